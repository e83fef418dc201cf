/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: peer access and peer copies (multi.hpp).
#include <string.h>

#include "core/device.hpp"
#include "multi/multi.hpp"

namespace cw {
namespace multi {

using namespace core;

cw_status need_peer_entries() {
    if (!drv().cuDeviceCanAccessPeer || !drv().cuCtxEnablePeerAccess)
        return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no peer access entries");
    return CW_SUCCESS;
}

cw_status peer_info(int device, int peer, cw_peer_info *info) {
    CUdevice d, p;
    CW_TRY(device_from_ordinal(device, &d));
    CW_TRY(device_from_ordinal(peer, &p));
    memset(info, 0, sizeof *info);
    if (device == peer) {
        info->can_access = 1;
        info->native_atomics = 1;
        return CW_SUCCESS;
    }
    CW_TRY(need_peer_entries());
    CW_CU(cuDeviceCanAccessPeer, (&info->can_access, d, p));
    if (info->can_access && drv().cuDeviceGetP2PAttribute) {
        CW_CU(cuDeviceGetP2PAttribute, (&info->perf_rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, d, p));
        CW_CU(cuDeviceGetP2PAttribute, (&info->native_atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, d, p));
    }
    return CW_SUCCESS;
}

cw_status context_enable_peer(cw_context *ctx, cw_context *peer) {
    if (ctx->device == peer->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "ctx and peer are both on device %d", ctx->ordinal);
    CW_TRY(need_peer_entries());
    const uint64_t bit = device_bit(peer);
    if (ctx->peers.load(std::memory_order_acquire) & bit) return CW_SUCCESS;
    int can = 0;
    CW_CU(cuDeviceCanAccessPeer, (&can, ctx->device, peer->device));
    if (!can)
        return fail(CW_ERROR_NOT_SUPPORTED, "device %d cannot access device %d's memory (no peer path)",
                    ctx->ordinal, peer->ordinal);
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUresult r = drv().cuCtxEnablePeerAccess(peer->cu, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        if (r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
            return fail(CW_ERROR_NOT_SUPPORTED, "device %d cannot access device %d's memory (%s)", ctx->ordinal,
                        peer->ordinal, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED");
        return fail_cu(r, "cuCtxEnablePeerAccess");
    }
    CW_TRY(guard.leave());
    // A stream-ordered pool's memory is not covered by context peer access:
    // open peer's buffer pool to ctx's device too (now, or when it is made).
    peer->pool_peers.fetch_or(device_bit(ctx));
    CW_TRY(pool_open_to(peer, device_bit(ctx)));
    ctx->peers.fetch_or(bit, std::memory_order_acq_rel);
    log(CW_LOG_INFO, "peer access enabled: device %d reads and writes device %d's memory", ctx->ordinal,
        peer->ordinal);
    return CW_SUCCESS;
}

cw_status copy_peer(cw_stream *s, CUdeviceptr dst, cw_context *dst_ctx, CUdeviceptr src, cw_context *src_ctx,
                    size_t bytes) {
    if (!drv().cuMemcpyPeerAsync) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemcpyPeerAsync");
    return on_stream(s, "cuMemcpyPeerAsync", [&] {
        return drv().cuMemcpyPeerAsync(dst, dst_ctx->cu, src, src_ctx->cu, bytes, s->cu);
    });
}

cw_status buffer_pool_share(cw_context *owner, cw_context *peer) {
    if (owner->device == peer->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "owner and peer are both on device %d", owner->ordinal);
    if (!drv().cuMemPoolSetAccess) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemPoolSetAccess");
    // Peer access first: it is what the topology must allow, and it says so
    // (CW_ERROR_NOT_SUPPORTED) before the pool is touched.
    CW_TRY(context_enable_peer(peer, owner));
    CUmemoryPool pool = nullptr;
    CW_TRY(mempool_get(owner, &pool));  // made now: opened to every device given access so far
    return pool_open_to(owner, device_bit(peer));
}

}  // namespace multi
}  // namespace cw
