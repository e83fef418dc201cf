/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/buffer.h (device buffers, copies, pinned
// host memory).
#include "api/api.hpp"
#include "core/buffer.hpp"

using namespace cw;

extern "C" {

static_assert(sizeof(cw_buffer_info) == 64, "cw_buffer_info keeps its 0.1 size");

CW_API cw_status cw_buffer_create(cw_buffer **out, cw_stream *s, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(bytes > 0);
    return core::buffer_alloc(s, bytes, out);
}

CW_API cw_status cw_buffer_retain(cw_buffer *b) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    core::buffer_retain(b);
    return CW_SUCCESS;
}

CW_API void cw_buffer_destroy(cw_buffer **b) {
    CW_ENTRY;
    if (!b || !*b) return;
    cw_buffer *x = *b;
    *b = nullptr;
    if (!live(x)) {
        log(CW_LOG_WARNING, "%s: *b is not a live cw_buffer; nothing destroyed", current_api());
        return;
    }
    core::buffer_release(x);
}

CW_API cw_status cw_buffer_use(cw_buffer *b, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    CW_CHECK_HANDLE(s);
    return core::buffer_use(b, s);
}

CW_API cw_status cw_buffer_get_ptr(const cw_buffer *b, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    CW_CHECK_ARG(dptr != NULL);
    *dptr = b->ptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_get_writable(cw_buffer *b, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    CW_CHECK_ARG(dptr != NULL);
    unsigned refs = b->refs.load(std::memory_order_acquire);
    if (refs != 1)
        return fail(CW_ERROR_INVALID_STATE,
                    "the buffer is shared (%u references): it is read-only; allocate a new one to write", refs);
    *dptr = b->ptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_get_info(const cw_buffer *b, cw_buffer_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    CW_CHECK_ARG(info != NULL);
    core::buffer_info(b, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_copy_to_device(cw_stream *s, cw_devptr dst, const void *src, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(src != NULL && dst != 0);
    return core::copy_to_device(s, dst, src, bytes);
}

CW_API cw_status cw_copy_to_host(cw_stream *s, void *dst, cw_devptr src, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(dst != NULL && src != 0);
    return core::copy_to_host(s, dst, src, bytes);
}

CW_API cw_status cw_host_alloc(void **out, cw_context *ctx, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(bytes > 0);
    return core::host_alloc(ctx, bytes, out);
}

CW_API void cw_host_free(cw_context *ctx, void **p) {
    CW_ENTRY;
    if (!p || !*p) return;
    void *mem = *p;
    *p = nullptr;
    if (!live(ctx)) {
        log(CW_LOG_WARNING, "%s: ctx is not a live cw_context; the memory at %p is not freed", current_api(), mem);
        return;
    }
    (void)core::host_free(ctx, mem);
}

}  // extern "C"
