/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared helpers for cuweave's CMocka tests: assertions that print the
 * library's own error detail, and a raw driver loader so that GPU tests can
 * compare cuweave's answers with the driver's own, independently of
 * cuweave's function table.
 */
#ifndef CUWEAVE_TESTS_CWTEST_H
#define CUWEAVE_TESTS_CWTEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuweave/cuweave.h"

#if defined(_GNU_SOURCE) || defined(_POSIX_C_SOURCE)
#include <errno.h>
#include <time.h>

/* Milliseconds on the monotonic clock. */
static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Sleeps ms milliseconds, resuming after signals. */
static inline void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
#endif

/* Exit status meson (and tools/run-tests.sh) read as "skipped". */
#define CWT_SKIP_EXIT 77

#define assert_cw(expected, expr)                                                          \
    do {                                                                                   \
        cw_status cwt_s_ = (expr);                                                         \
        if (cwt_s_ != (expected))                                                          \
            fail_msg("%s returned %s, expected %s; detail: %s", #expr, cw_status_name(cwt_s_), \
                     cw_status_name(expected), cw_last_error()->message);                   \
    } while (0)

#define assert_cw_ok(expr) assert_cw(CW_SUCCESS, expr)

/* The detail names the failing function and says something. */
#define assert_detail(fn_name)                                                             \
    do {                                                                                   \
        assert_string_equal(cw_last_error()->function, fn_name);                           \
        assert_true(strlen(cw_last_error()->message) > strlen(fn_name) + 2);              \
    } while (0)

/*
 * For binaries whose every test needs a GPU: returns 1 when cuweave can use
 * one; otherwise prints why and returns 0 (the caller exits 77).
 */
/* Fields of a context's info (0.2 has no getter of their own beside
 * cw_context_get_info); the status is cw_context_get_info's. */
static inline cw_status cwt_context_handle(const cw_context *ctx, CUcontext *out) {
    cw_context_info i;
    cw_status st = cw_context_get_info(ctx, &i);
    if (st == CW_SUCCESS) *out = i.handle;
    return st;
}
static inline cw_status cwt_context_device(const cw_context *ctx, int *out) {
    cw_context_info i;
    cw_status st = cw_context_get_info(ctx, &i);
    if (st == CW_SUCCESS) *out = i.device;
    return st;
}

/* Fields of a stream's info, as for contexts above (cw_stream_get_info's
 * status). */
static inline cw_status cwt_stream_handle(const cw_stream *s, CUstream *out) {
    cw_stream_info i;
    cw_status st = cw_stream_get_info(s, &i);
    if (st == CW_SUCCESS) *out = i.handle;
    return st;
}
static inline cw_status cwt_stream_context(const cw_stream *s, cw_context **out) {
    cw_stream_info i;
    cw_status st = cw_stream_get_info(s, &i);
    if (st == CW_SUCCESS) *out = i.context;
    return st;
}
static inline cw_status cwt_stream_device(const cw_stream *s, int *out) {
    cw_stream_info i;
    cw_status st = cw_stream_get_info(s, &i);
    if (st == CW_SUCCESS) *out = i.device;
    return st;
}

/* The context of a group's partition `index` (borrowed from the group); the
 * status is cw_partition_group_get_partition's. */
static inline cw_status cwt_partition(const cw_partition_group *g, size_t index, cw_context **out) {
    cw_partition_info i;
    cw_status st = cw_partition_group_get_partition(g, index, &i);
    if (st == CW_SUCCESS) *out = i.context;
    return st;
}

static inline int cwt_have_gpu(void) {
    cw_status st = cw_init();
    int n = 0;
    if (st == CW_SUCCESS && cw_device_count(&n) == CW_SUCCESS && n > 0) return 1;
    printf("SKIP: no usable GPU: %s\n", st == CW_SUCCESS ? "no CUDA devices" : cw_last_error()->message);
    return 0;
}

/* 1 under compute-sanitizer, which serializes the GPU work of streams: races
 * cannot show and independent kernels do not overlap there. */
static inline int cwt_under_sanitizer(void) {
    return getenv("NV_SANITIZER_INJECTION_PORT_BASE") != NULL || getenv("CUDA_INJECTION64_PATH") != NULL;
}

/* CWT_FILTER=test_name (cmocka's wildcard pattern) runs a subset of the
 * group run next. */
static inline void cwt_filter_from_env(void) {
    const char *filter = getenv("CWT_FILTER");
    if (filter && *filter) cmocka_set_test_filter(filter);
}

/* 1 when the compute-sanitizer tool running the test is `tool`. The tool
 * does not say which it is: tools/sanitize-suite.sh (and gpu-check.sh)
 * export CWT_SANITIZER_TOOL=memcheck|racecheck|synccheck|initcheck. */
static inline int cwt_sanitizer_is(const char *tool) {
    const char *t = getenv("CWT_SANITIZER_TOOL");
    return cwt_under_sanitizer() && t && strcmp(t, tool) == 0;
}

#endif /* CUWEAVE_TESTS_CWTEST_H */
