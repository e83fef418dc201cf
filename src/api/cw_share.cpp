/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/share.h (buffers and events shared between
// processes).
#include "api/api.hpp"
#include "core/share.hpp"

using namespace cw;

extern "C" {

static_assert(sizeof(cw_shared_handle) == 128, "cw_shared_handle is 128 bytes");
static_assert(sizeof(cw_shared_event_info) == 32, "cw_shared_event_info is 32 bytes");

CW_API cw_status cw_buffer_create_shareable(cw_buffer **out, cw_stream *s, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(bytes > 0);
    return core::shareable_alloc(s, bytes, out);
}

CW_API cw_status cw_buffer_export(const cw_buffer *b, cw_shared_handle *out) {
    CW_ENTRY;
    CW_CHECK_HANDLE(b);
    CW_CHECK_ARG(out != NULL);
    return core::buffer_export(b, out);
}

CW_API cw_status cw_buffer_import(cw_buffer **out, cw_stream *s, const cw_shared_handle *h) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(h != NULL);
    return core::buffer_import(s, h, out);
}

CW_API cw_status cw_shared_event_create(cw_shared_event **out, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    return core::shared_event_create(ctx, out);
}

CW_API void cw_shared_event_destroy(cw_shared_event **e) {
    CW_ENTRY;
    if (!e || !*e) return;
    cw_shared_event *x = *e;
    *e = nullptr;
    if (!live(x)) {
        log(CW_LOG_WARNING, "%s: *e is not a live cw_shared_event; nothing destroyed", current_api());
        return;
    }
    core::shared_event_destroy(x);
}

CW_API cw_status cw_shared_event_export(const cw_shared_event *e, cw_shared_handle *out) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_ARG(out != NULL);
    return core::shared_event_export(e, out);
}

CW_API cw_status cw_shared_event_import(cw_shared_event **out, cw_context *ctx, const cw_shared_handle *h) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(h != NULL);
    return core::shared_event_import(ctx, h, out);
}

CW_API cw_status cw_shared_event_record(cw_shared_event *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_HANDLE(s);
    return core::shared_event_record(e, s);
}

CW_API cw_status cw_shared_event_wait(cw_shared_event *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_HANDLE(s);
    return core::shared_event_wait(e, s);
}

CW_API cw_status cw_shared_event_get_info(const cw_shared_event *e, cw_shared_event_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_ARG(info != NULL);
    core::shared_event_info(e, info);
    return CW_SUCCESS;
}

}  // extern "C"
