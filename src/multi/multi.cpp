// Several GPUs in one host: device sets, peer access, peer copies, and the
// calls that drive several resident loops at once (include/cuweave/multi.h).
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/core.hpp"
#include "cuweave/multi.h"
#include "core/stream.hpp"

struct cw_device_set {
    uint32_t tag;
    int count;
    int ordinal[CW_MAX_DEVICES];
    cw_context *ctx[CW_MAX_DEVICES];
};

namespace cw {
namespace {

enum : uint32_t { kTagDeviceSet = 0x43574453u };  // "CWDS"

inline bool set_ok(const cw_device_set *s) { return handle_live(s, kTagDeviceSet); }

#define CW_CHECK_SET(s) CW_CHECK_HANDLE(set_ok, s, "cw_device_set")

void set_free(cw_device_set *set) {
    for (int i = 0; i < set->count; i++) cw_context_destroy(&set->ctx[i]);
    handle_retire(set);
    free(set);
}

cw_status peer_entries() {
    if (!drv().cuDeviceCanAccessPeer || !drv().cuCtxEnablePeerAccess)
        return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no peer access entries");
    return CW_SUCCESS;
}

// The detail of the failure just recorded, prefixed with which of several
// objects it came from (the status is kept).
cw_status name_index(cw_status st, const char *what, size_t i) {
    char msg[400];
    copy_text(msg, sizeof msg, cw_last_error_message());
    return fail(st, "%s[%zu]: %s", what, i, msg);
}

}  // namespace
}  // namespace cw

using namespace cw;

extern "C" {

CW_API cw_status cw_device_set_open(cw_device_set **out, const int *devices, int count) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(count >= 0 && count <= CW_MAX_DEVICES);
    CW_CHECK_ARG(devices != NULL || count == 0);
    CW_TRY(ensure_init());
    int visible = 0;
    CW_CU(cuDeviceGetCount, (&visible));
    int list[CW_MAX_DEVICES];
    int n = count;
    if (count > 0) {
        for (int i = 0; i < n; i++) {
            if (devices[i] < 0 || devices[i] >= visible)
                return fail(CW_ERROR_INVALID_ARGUMENT, "devices[%d] is %d, but there are %d devices", i, devices[i],
                            visible);
            for (int j = 0; j < i; j++)
                if (devices[j] == devices[i])
                    return fail(CW_ERROR_INVALID_ARGUMENT, "devices[%d] and devices[%d] are both device %d", j, i,
                                devices[i]);
            list[i] = devices[i];
        }
    } else {
        if (visible == 0) return fail(CW_ERROR_NO_DEVICE, "no CUDA device is visible");
        n = visible < CW_MAX_DEVICES ? visible : CW_MAX_DEVICES;
        for (int i = 0; i < n; i++) list[i] = i;
    }
    cw_device_set *set = static_cast<cw_device_set *>(calloc(1, sizeof(cw_device_set)));
    if (!set) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) {
        cw_status st = cw_context_create(&set->ctx[i], list[i]);
        if (st != CW_SUCCESS) {
            set_free(set);  // closes the i already open
            return name_index(st, "devices", (size_t)i);
        }
        set->ordinal[i] = list[i];
        set->count = i + 1;
    }
    room.publish(set, kTagDeviceSet);
    *out = set;
    return CW_SUCCESS;
}

CW_API void cw_device_set_close(cw_device_set **pset) {
    CW_ENTRY;
    if (!pset || !*pset) return;
    cw_device_set *set = *pset;
    if (!set_ok(set)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "*set is not a live cw_device_set");
        return;
    }
    *pset = nullptr;
    set_free(set);
}

CW_API cw_status cw_device_set_size(const cw_device_set *set, int *count) {
    CW_ENTRY;
    CW_CHECK_SET(set);
    CW_CHECK_ARG(count != NULL);
    *count = set->count;
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_context(const cw_device_set *set, int index, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_SET(set);
    CW_CHECK_ARG(ctx != NULL);
    if (index < 0 || index >= set->count)
        return fail(CW_ERROR_INVALID_ARGUMENT, "index %d, but the set holds %d devices", index, set->count);
    *ctx = set->ctx[index];
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_ordinal(const cw_device_set *set, int index, int *device) {
    CW_ENTRY;
    CW_CHECK_SET(set);
    CW_CHECK_ARG(device != NULL);
    if (index < 0 || index >= set->count)
        return fail(CW_ERROR_INVALID_ARGUMENT, "index %d, but the set holds %d devices", index, set->count);
    *device = set->ordinal[index];
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_enable_peers(cw_device_set *set, int *enabled) {
    CW_ENTRY;
    CW_CHECK_SET(set);
    CW_TRY(peer_entries());
    int pairs = 0;
    cw_status st = CW_SUCCESS;
    for (int a = 0; a < set->count && st == CW_SUCCESS; a++)
        for (int b = 0; b < set->count && st == CW_SUCCESS; b++) {
            if (a == b) continue;
            int can = 0;
            CUresult r = drv().cuDeviceCanAccessPeer(&can, set->ctx[a]->device, set->ctx[b]->device);
            if (r != CUDA_SUCCESS) {
                st = fail_cu(r, "cuDeviceCanAccessPeer");
            } else if (can) {
                st = cw_context_enable_peer(set->ctx[a], set->ctx[b]);
                if (st == CW_SUCCESS) pairs++;
            }
        }
    if (enabled) *enabled = pairs;
    return st;
}

CW_API cw_status cw_device_get_peer_info(int device, int peer, cw_peer_info *info) {
    CW_ENTRY;
    CW_CHECK_ARG(info != NULL);
    CW_CHECK_ARG(device >= 0 && peer >= 0);
    CUdevice d, p;
    CW_TRY(device_from_ordinal(device, &d));
    CW_TRY(device_from_ordinal(peer, &p));
    memset(info, 0, sizeof *info);
    if (device == peer) {
        info->can_access = 1;
        info->native_atomics = 1;
        return CW_SUCCESS;
    }
    CW_TRY(peer_entries());
    CW_CU(cuDeviceCanAccessPeer, (&info->can_access, d, p));
    if (info->can_access && drv().cuDeviceGetP2PAttribute) {
        CW_CU(cuDeviceGetP2PAttribute, (&info->perf_rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, d, p));
        CW_CU(cuDeviceGetP2PAttribute, (&info->native_atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, d, p));
    }
    return CW_SUCCESS;
}

CW_API cw_status cw_context_enable_peer(cw_context *ctx, cw_context *peer) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_CONTEXT(peer);
    if (ctx->device == peer->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "ctx and peer are both on device %d", ctx->ordinal);
    CW_TRY(peer_entries());
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

CW_API cw_status cw_context_peer_enabled(const cw_context *ctx, const cw_context *peer, int *enabled) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_CONTEXT(peer);
    CW_CHECK_ARG(enabled != NULL);
    if (ctx->device == peer->device) {
        *enabled = 1;
        return CW_SUCCESS;
    }
    const uint64_t bit = device_bit(peer);
    *enabled = (ctx->peers.load(std::memory_order_acquire) & bit) != 0;
    return CW_SUCCESS;
}

CW_API cw_status cw_copy_peer(cw_stream *s, unsigned long long dst, cw_context *dst_ctx, unsigned long long src,
                              cw_context *src_ctx, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_CONTEXT(dst_ctx);
    CW_CHECK_CONTEXT(src_ctx);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(dst != 0 && src != 0);
    if (!drv().cuMemcpyPeerAsync) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemcpyPeerAsync");
    return on_stream(s, "cuMemcpyPeerAsync", [&] {
        return drv().cuMemcpyPeerAsync(dst, dst_ctx->cu, src, src_ctx->cu, bytes, s->cu);
    });
}

CW_API cw_status cw_resident_data_ready_many(cw_resident *const *loops, size_t n, uint64_t *seqs) {
    CW_ENTRY;
    CW_CHECK_ARG(loops != NULL || n == 0);
    for (size_t i = 0; i < n; i++)
        if (!loops[i]) return fail(CW_ERROR_INVALID_ARGUMENT, "loops[%zu] is NULL", i);
    for (size_t i = 0; i < n; i++) {
        cw_status st = cw_resident_data_ready(loops[i], seqs ? &seqs[i] : nullptr);
        if (st != CW_SUCCESS) return name_index(st, "loops", i);
    }
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_wait_many(cw_resident *const *loops, const uint64_t *seqs, size_t n,
                                       uint32_t timeout_ms) {
    CW_ENTRY;
    CW_CHECK_ARG((loops != NULL && seqs != NULL) || n == 0);
    for (size_t i = 0; i < n; i++)
        if (!loops[i]) return fail(CW_ERROR_INVALID_ARGUMENT, "loops[%zu] is NULL", i);
    // One deadline for all: each wait gets what is left of it (a loop whose
    // result is already there costs one check).
    const int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    for (size_t i = 0; i < n; i++) {
        int64_t left = deadline - now_ns();
        uint32_t ms = left <= 0 ? 0 : (uint32_t)((left + 999999) / 1000000);
        cw_status st = cw_resident_wait_result(loops[i], seqs[i], ms);
        if (st != CW_SUCCESS) return name_index(st, "loops", i);
    }
    return CW_SUCCESS;
}

}  // extern "C"
