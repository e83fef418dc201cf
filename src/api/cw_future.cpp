/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/future.h (host completion).
#include "api/api.hpp"
#include "core/future.hpp"

using namespace cw;

namespace {
bool kind_ok(cw_future_kind kind) {
    return kind == CW_FUTURE_HOST_FUNC || kind == CW_FUTURE_WRITE_VALUE || kind == CW_FUTURE_EVENT;
}
}  // namespace

extern "C" {

CW_API cw_status cw_future_create(cw_future **out, cw_stream *s, cw_future_kind kind) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(kind_ok(kind));
    return core::future_create(s, kind, out);
}

CW_API cw_status cw_future_rearm(cw_future *f, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    CW_CHECK_HANDLE(s);
    return core::future_rearm(f, s);
}

CW_API cw_status cw_future_poll(cw_future *f) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    return core::future_poll(f);
}

CW_API cw_status cw_future_wait(cw_future *f, int64_t timeout_us) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    return core::future_wait(f, timeout_us);
}

CW_API cw_status cw_future_set_spin(cw_future *f, unsigned spin_us) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    CW_CHECK_ARG(spin_us <= 10000000);
    f->spin_us = spin_us;
    return CW_SUCCESS;
}

CW_API cw_status cw_future_set_callback(cw_future *f, cw_future_fn fn, void *user) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    CW_CHECK_ARG(fn != NULL);
    return core::future_set_callback(f, fn, user);
}

CW_API cw_status cw_future_get_fd(cw_future *f, int *fd) {
    CW_ENTRY;
    CW_CHECK_HANDLE(f);
    CW_CHECK_ARG(fd != NULL);
    return core::future_get_fd(f, fd);
}

CW_API void cw_future_destroy(cw_future **pf) {
    CW_ENTRY;
    if (!pf || !*pf) return;
    if (core::future_in_host_fn()) {
        // The destroy may wait for a marker, which the driver cannot run
        // while its callback thread is here, and it may call the driver.
        log(CW_LOG_WARNING,
            "%s: refused inside a HOST_FUNC future's callback (the driver's callback thread): nothing destroyed, "
            "the handle is left as it was",
            current_api());
        return;
    }
    cw_future *f = *pf;
    *pf = NULL;
    if (!live(f)) {
        log(CW_LOG_WARNING, "%s: not a live cw_future; nothing destroyed", current_api());
        return;
    }
    core::future_destroy(f);
}

CW_API cw_status cw_future_when_all(cw_future **out, cw_stream *const *streams, size_t n, cw_future_kind kind) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(streams != NULL);
    CW_CHECK_ARG(n > 0);
    CW_CHECK_ARG(kind_ok(kind));
    for (size_t i = 0; i < n; i++) CW_CHECK_ARG(streams[i] != NULL);
    for (size_t i = 0; i < n; i++) CW_CHECK_HANDLE_AT(streams, i);
    return core::when_all(streams, n, kind, out);
}

}  // extern "C"
