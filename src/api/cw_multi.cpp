/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/multi.h (device groups, peers, copies between
// devices).
#include "api/api.hpp"
#include "multi/multi.hpp"

using namespace cw;

static_assert(sizeof(cw_peer_info) == 32, "cw_peer_info keeps its 0.1 size");
static_assert(sizeof(void *) != 8 || sizeof(cw_device_group_info) == 840, "cw_device_group_info: 840 bytes on LP64");

extern "C" {

CW_API cw_status cw_device_group_create(cw_device_group **out, const int *devices, int count) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(count >= 0 && count <= CW_MAX_DEVICES);
    CW_CHECK_ARG(devices != NULL || count == 0);
    return multi::device_group_create(devices, count, out);
}

CW_API void cw_device_group_destroy(cw_device_group **pg) {
    CW_ENTRY;
    if (!pg || !*pg) return;
    cw_device_group *g = *pg;
    *pg = nullptr;
    if (!live(g)) {
        log(CW_LOG_WARNING, "%s: *g is not a live cw_device_group; nothing destroyed", current_api());
        return;
    }
    multi::device_group_destroy(g);
}

CW_API cw_status cw_device_group_get_info(const cw_device_group *g, cw_device_group_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(info != NULL);
    multi::device_group_info(g, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_device_get_peer_info(int device, int peer, cw_peer_info *info) {
    CW_ENTRY;
    CW_CHECK_ARG(info != NULL);
    CW_CHECK_ARG(device >= 0 && peer >= 0);
    return multi::peer_info(device, peer, info);
}

CW_API cw_status cw_context_enable_peer(cw_context *ctx, cw_context *peer) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_HANDLE(peer);
    return multi::context_enable_peer(ctx, peer);
}

CW_API cw_status cw_copy_peer(cw_stream *s, cw_devptr dst, cw_context *dst_ctx, cw_devptr src, cw_context *src_ctx,
                              size_t bytes) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    CW_CHECK_HANDLE(dst_ctx);
    CW_CHECK_HANDLE(src_ctx);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(dst != 0 && src != 0);
    return multi::copy_peer(s, dst, dst_ctx, src, src_ctx, bytes);
}

CW_API cw_status cw_buffer_copy(cw_buffer *dst, cw_buffer *src, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(dst);
    CW_CHECK_HANDLE(src);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(dst != src);
    if (dst->bytes < src->bytes)
        return fail(CW_ERROR_INVALID_ARGUMENT, "dst holds %zu bytes, src %zu", dst->bytes, src->bytes);
    if (dst->refs.load(std::memory_order_acquire) > 1)
        return fail(CW_ERROR_INVALID_STATE, "dst is shared (%u references): it is read-only",
                    dst->refs.load(std::memory_order_relaxed));
    return core::buffer_copy(s, dst, src);
}

CW_API cw_status cw_context_share_buffer_pool(cw_context *owner, cw_context *peer) {
    CW_ENTRY;
    CW_CHECK_HANDLE(owner);
    CW_CHECK_HANDLE(peer);
    return multi::buffer_pool_share(owner, peer);
}

}  // extern "C"
