// cuweave api: include/cuweave/multi.h (device sets, peers, copies between
// devices, several resident loops at once).
#include "api/api.hpp"
#include "base/sync.hpp"
#include "graph/resident.hpp"
#include "multi/multi.hpp"

using namespace cw;

extern "C" {

CW_API cw_status cw_device_set_open(cw_device_set **out, const int *devices, int count) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(count >= 0 && count <= CW_MAX_DEVICES);
    CW_CHECK_ARG(devices != NULL || count == 0);
    return multi::device_set_open(devices, count, out);
}

CW_API void cw_device_set_close(cw_device_set **pset) {
    CW_ENTRY;
    if (!pset || !*pset) return;
    cw_device_set *set = *pset;
    if (!live(set)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "*set is not a live cw_device_set");
        return;
    }
    *pset = nullptr;
    multi::device_set_close(set);
}

CW_API cw_status cw_device_set_size(const cw_device_set *set, int *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(count != NULL);
    *count = set->count;
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_context(const cw_device_set *set, int index, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(ctx != NULL);
    if (index < 0 || index >= set->count)
        return fail(CW_ERROR_INVALID_ARGUMENT, "index %d, but the set holds %d devices", index, set->count);
    *ctx = set->ctx[index];
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_ordinal(const cw_device_set *set, int index, int *device) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(device != NULL);
    if (index < 0 || index >= set->count)
        return fail(CW_ERROR_INVALID_ARGUMENT, "index %d, but the set holds %d devices", index, set->count);
    *device = set->ordinal[index];
    return CW_SUCCESS;
}

CW_API cw_status cw_device_set_enable_peers(cw_device_set *set, int *enabled) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    return multi::device_set_enable_peers(set, enabled);
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

CW_API cw_status cw_context_peer_enabled(const cw_context *ctx, const cw_context *peer, int *enabled) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_HANDLE(peer);
    CW_CHECK_ARG(enabled != NULL);
    *enabled = multi::peer_enabled(ctx, peer);
    return CW_SUCCESS;
}

CW_API cw_status cw_copy_peer(cw_stream *s, unsigned long long dst, cw_context *dst_ctx, unsigned long long src,
                              cw_context *src_ctx, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    CW_CHECK_HANDLE(dst_ctx);
    CW_CHECK_HANDLE(src_ctx);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(dst != 0 && src != 0);
    return multi::copy_peer(s, dst, dst_ctx, src, src_ctx, bytes);
}

CW_API cw_status cw_buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    CW_CHECK_HANDLE(dst);
    CW_CHECK_HANDLE(src);
    CW_CHECK_ARG(dst != src);
    if (dst->bytes < src->bytes)
        return fail(CW_ERROR_INVALID_ARGUMENT, "dst holds %zu bytes, src %zu", dst->bytes, src->bytes);
    if (dst->refs.load(std::memory_order_acquire) > 1)
        return fail(CW_ERROR_INVALID_STATE, "dst is shared (%u references): it is read-only",
                    dst->refs.load(std::memory_order_relaxed));
    return core::buffer_copy(s, dst, src);
}

CW_API cw_status cw_buffer_pool_share(cw_context *owner, cw_context *peer) {
    CW_ENTRY;
    CW_CHECK_HANDLE(owner);
    CW_CHECK_HANDLE(peer);
    return multi::buffer_pool_share(owner, peer);
}

CW_API cw_status cw_resident_data_ready_many(cw_resident *const *loops, size_t n, uint64_t *seqs) {
    CW_ENTRY;
    CW_CHECK_ARG(loops != NULL || n == 0);
    for (size_t i = 0; i < n; i++) CW_CHECK_HANDLE_AT(loops, i);
    for (size_t i = 0; i < n; i++)
        if (graphs::resident_data_ready(loops[i], seqs ? &seqs[i] : nullptr) != CW_SUCCESS)
            return prefix_error("loops[%zu]", i);
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_wait_many(cw_resident *const *loops, const uint64_t *seqs, size_t n,
                                       uint32_t timeout_ms) {
    CW_ENTRY;
    CW_CHECK_ARG((loops != NULL && seqs != NULL) || n == 0);
    for (size_t i = 0; i < n; i++) CW_CHECK_HANDLE_AT(loops, i);
    // One deadline for all: each wait gets what is left of it (a loop whose
    // result is already there costs one check).
    const int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    for (size_t i = 0; i < n; i++) {
        int64_t left = deadline - now_ns();
        uint32_t ms = left <= 0 ? 0 : (uint32_t)((left + 999999) / 1000000);
        if (graphs::resident_wait_result(loops[i], seqs[i], ms) != CW_SUCCESS) return prefix_error("loops[%zu]", i);
    }
    return CW_SUCCESS;
}

}  // extern "C"
