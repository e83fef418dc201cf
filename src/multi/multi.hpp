/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: several GPUs in one process. Device groups (a primary
// context per device), peer access and peer copies (device_group.cpp,
// peer.cpp); collectives through NCCL opened at run time (collective.hpp).
#pragma once

#include "core/buffer.hpp"
#include "core/context.hpp"
#include "cuweave/multi.h"

struct cw_device_group {
    uint32_t tag;
    int count;
    int ordinal[CW_MAX_DEVICES];
    cw_context *ctx[CW_MAX_DEVICES];
};

namespace cw {
namespace multi {

// The primary contexts of `devices` (count of them; count 0: every visible
// device, up to CW_MAX_DEVICES). A device that cannot be opened is named
// ("devices[i]: ...") and releases the ones opened before it.
cw_status device_group_create(const int *devices, int count, cw_device_group **out);
void device_group_destroy(cw_device_group *g);
void device_group_info(const cw_device_group *g, cw_device_group_info *info);

// CW_ERROR_NOT_SUPPORTED when the driver lacks the peer-access entries.
cw_status need_peer_entries();
cw_status peer_info(int device, int peer, cw_peer_info *info);
// ctx's device reads and writes peer's memory (idempotent); peer's buffer
// pool is opened to ctx's device too (now, or when the pool is made).
cw_status context_enable_peer(cw_context *ctx, cw_context *peer);
cw_status copy_peer(cw_stream *s, CUdeviceptr dst, cw_context *dst_ctx, CUdeviceptr src, cw_context *src_ctx,
                    size_t bytes);
// peer's device reads and writes the buffers of owner's pool.
cw_status buffer_pool_share(cw_context *owner, cw_context *peer);

}  // namespace multi
}  // namespace cw
