/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of streams, stream pools, ordering, futures and timers against a
 * fake CUDA driver (tests/fake_cuda.c, built into a shared library whose path
 * is argv[1]; cuweave opens it through CUWEAVE_LIBCUDA). Runs anywhere: CI
 * has no GPU. Exits 77 (skip) when argv[1] is missing.
 *
 * Links libcuweave.a for the driver test seam (src/testing/seam.h): the fault
 * injection test fails every driver call of stream, pool, fork, future and
 * timer creation in turn and proves that nothing leaks.
 *
 * Every test runs on its own cw_context; its teardown destroys it and checks
 * that the fake's live streams, events, host and device allocations and
 * primary-context retains are back where they were (no leak), that no stream
 * write hit unallocated memory, and that no driver call came from inside a
 * host function.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "driver/cuda_min.h"
#include "testing/seam.h"

extern char **environ;

/* ---- the fake driver's control API and a few of its entry points -------- */

static struct {
    void *lib;
    long (*live)(const char *kind);
    void (*hold)(int on);
    int (*drain)(int timeout_ms);
    long (*discard)(void);
    void (*fault)(int on);
    long (*waits)(void);
    long (*calls)(const char *entry);
    CUcontext (*other_context)(void);
    void (*set_context_flags)(CUcontext, unsigned);
    void (*event_query_needs_context)(int on);
    void (*green)(int on);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned, int);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamGetFlags)(CUstream, unsigned *);
    CUresult (*cuStreamGetPriority)(CUstream, int *);
    CUresult (*cuStreamQuery)(CUstream);
    CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuStreamWriteValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void *), void *);
} fk;

static const char *g_fake_path;
static const char *g_self_path;

static int load_fake(const char *path) {
    fk.lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!fk.lib) fk.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!fk.lib) return 0;
#define FK_SYM_(field, name) \
    if (!(*(void **)&fk.field = dlsym(fk.lib, name))) return 0;
    FK_SYM_(live, "fake_cuda_live")
    FK_SYM_(hold, "fake_cuda_hold")
    FK_SYM_(drain, "fake_cuda_drain")
    FK_SYM_(discard, "fake_cuda_discard")
    FK_SYM_(fault, "fake_cuda_fault")
    FK_SYM_(waits, "fake_cuda_waits")
    FK_SYM_(calls, "fake_cuda_calls")
    FK_SYM_(other_context, "fake_cuda_other_context")
    FK_SYM_(set_context_flags, "fake_cuda_set_context_flags")
    FK_SYM_(event_query_needs_context, "fake_cuda_event_query_needs_context")
    FK_SYM_(green, "fake_cuda_green")
    FK_SYM_(cuCtxGetCurrent, "cuCtxGetCurrent")
    FK_SYM_(cuCtxSetCurrent, "cuCtxSetCurrent")
    FK_SYM_(cuStreamCreateWithPriority, "cuStreamCreateWithPriority")
    FK_SYM_(cuStreamDestroy, "cuStreamDestroy")
    FK_SYM_(cuStreamGetFlags, "cuStreamGetFlags")
    FK_SYM_(cuStreamGetPriority, "cuStreamGetPriority")
    FK_SYM_(cuStreamQuery, "cuStreamQuery")
    FK_SYM_(cuStreamWaitValue32, "cuStreamWaitValue32")
    FK_SYM_(cuMemHostAlloc, "cuMemHostAlloc")
    FK_SYM_(cuMemFreeHost, "cuMemFreeHost")
    FK_SYM_(cuStreamWriteValue32, "cuStreamWriteValue32")
    FK_SYM_(cuLaunchHostFunc, "cuLaunchHostFunc")
#undef FK_SYM_
    return 1;
}

#define assert_cu_ok(expr)                                                          \
    do {                                                                            \
        CUresult cwt_r_ = (expr);                                                   \
        if (cwt_r_ != CUDA_SUCCESS) fail_msg("%s returned CUresult %d", #expr, cwt_r_); \
    } while (0)

static CUcontext current(void) {
    CUcontext c = (CUcontext)0x1;
    assert_cu_ok(fk.cuCtxGetCurrent(&c));
    return c;
}

static void set_current(CUcontext c) { assert_cu_ok(fk.cuCtxSetCurrent(c)); }

/* ---- per-test context and leak check ------------------------------------ */

static cw_context *g_ctx;    /* this test's context (primary context of device 0) */
static CUcontext g_primary;  /* its CUcontext */
static CUcontext g_other;    /* "the host program's" context, made current by tests */

struct snapshot {
    long stream, event, hostmem, devmem, primary, badaccess, cbcalls, orphans, graph, exec;
};

static struct snapshot snap(void) {
    struct snapshot s = {fk.live("stream"),  fk.live("event"),     fk.live("hostmem"), fk.live("devmem"),
                         fk.live("primary"), fk.live("badaccess"), fk.live("cbcalls"), fk.live("orphans"),
                         fk.live("graph"),   fk.live("exec")};
    return s;
}

static int snap_diff(const struct snapshot *a, const struct snapshot *b, char *msg, size_t n) {
    return snprintf(msg, n, "streams %ld->%ld, events %ld->%ld, hostmem %ld->%ld, devmem %ld->%ld, "
                    "primary retains %ld->%ld, bad accesses %ld->%ld, calls from host functions %ld->%ld, "
                    "orphans %ld->%ld, graphs %ld->%ld, execs %ld->%ld",
                    a->stream, b->stream, a->event, b->event, a->hostmem, b->hostmem, a->devmem, b->devmem,
                    a->primary, b->primary, a->badaccess, b->badaccess, a->cbcalls, b->cbcalls, a->orphans,
                    b->orphans, a->graph, b->graph, a->exec, b->exec);
}

static int snap_equal(const struct snapshot *a, const struct snapshot *b) {
    return a->stream == b->stream && a->event == b->event && a->hostmem == b->hostmem && a->devmem == b->devmem &&
           a->primary == b->primary && a->badaccess == b->badaccess && a->cbcalls == b->cbcalls &&
           a->orphans == b->orphans && a->graph == b->graph && a->exec == b->exec;
}

static struct snapshot g_base;
static int g_known_leak; /* set by a test whose leak the library documents */
/* Memory the library leaves behind on purpose (a HOST_FUNC future destroyed
 * after a device fault): kept reachable so that LeakSanitizer is quiet. */
/* volatile: the stores must not be optimised away (nothing reads them) */
static void *volatile g_kept[16];
static int g_kept_count;

static int setup_ctx(void **state) {
    (void)state;
    g_known_leak = 0;
    set_current(NULL);
    g_base = snap();
    if (cw_context_create(&g_ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(g_ctx, &g_primary) != CW_SUCCESS) return -1;
    g_other = fk.other_context();
    return 0;
}

static int teardown_ctx(void **state) {
    (void)state;
    fk.hold(0);
    fk.fault(0);
    cw_context_destroy(&g_ctx);
    int drained = fk.drain(5000);
    set_current(NULL);
    struct snapshot now = snap();
    if (g_known_leak) return 0;
    if (!drained || !snap_equal(&g_base, &now)) {
        char msg[512];
        snap_diff(&g_base, &now, msg, sizeof msg);
        print_error("leak check after the test: %s%s\n", msg, drained ? "" : " (fake queue not drained)");
        return -1;
    }
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_ctx, teardown_ctx)
/* A test run once per future kind, named after it. */
#define TEST_K(fn, kind) {#fn "(" #kind ")", fn, setup_ctx, teardown_ctx, (void *)&kind}

static cw_stream *new_stream(void) {
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, g_ctx, NULL));
    assert_non_null(s);
    return s;
}

static CUstream handle_of(const cw_stream *s) {
    CUstream h = (CUstream)0x77;
    assert_cw_ok(cwt_stream_handle(s, &h));
    return h;
}

/* ---- argument checks ------------------------------------------------------ */

#define EXPECT_INVALID(fn, call)                                                   \
    do {                                                                           \
        cw_clear_error();                                                          \
        assert_cw(CW_ERROR_INVALID_ARGUMENT, call);                                \
        assert_detail(#fn);                                                        \
        assert_int_equal(cw_last_error()->status, CW_ERROR_INVALID_ARGUMENT);      \
        assert_non_null(strstr(cw_last_error()->message, "invalid argument"));    \
    } while (0)

static void dummy_cb(void *user, cw_future *f, cw_status st) {
    (void)user;
    (void)f;
    (void)st;
}

static void test_invalid_arguments(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    cw_stream *out = NULL, *child = NULL, *nulls = NULL;
    cw_stream_pool *pool = NULL, *pout = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, g_ctx, NULL));
    cw_timer *t = NULL, *tout = NULL;
    assert_cw_ok(cw_timer_create(&t, g_ctx));
    cw_future *f = NULL, *fout = NULL;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_HOST_FUNC));
    cw_stream_info info;
    cw_stream_pool_info stats;
    float ms;
    int fd = -1;
    size_t count = 0;
    cw_stream *srcs[2] = {s, s};
    cw_stream_settings ss;
    cw_stream_pool_settings ps;
    char long_name[80];
    memset(long_name, 'n', sizeof long_name);
    long_name[64] = '\0'; /* 64 bytes: one too many */

    /* stream.h */
    EXPECT_INVALID(cw_stream_create, cw_stream_create(NULL, g_ctx, NULL));
    EXPECT_INVALID(cw_stream_create, cw_stream_create(&out, NULL, NULL));
    cw_stream_settings_default(&ss);
    ss.flags = 0x4;
    EXPECT_INVALID(cw_stream_create, cw_stream_create(&out, g_ctx, &ss));
    cw_stream_settings_default(&ss);
    ss.reserved[55] = 1;
    EXPECT_INVALID(cw_stream_create, cw_stream_create(&out, g_ctx, &ss));
    EXPECT_INVALID(cw_stream_wrap, cw_stream_wrap(NULL, g_ctx, NULL));
    EXPECT_INVALID(cw_stream_wrap, cw_stream_wrap(&out, NULL, NULL));
    EXPECT_INVALID(cw_stream_get_info, cw_stream_get_info(NULL, &info));
    EXPECT_INVALID(cw_stream_get_info, cw_stream_get_info(s, NULL));
    EXPECT_INVALID(cw_stream_synchronize, cw_stream_synchronize(NULL));
    EXPECT_INVALID(cw_stream_query, cw_stream_query(NULL));
    EXPECT_INVALID(cw_stream_wait, cw_stream_wait(NULL, s));
    EXPECT_INVALID(cw_stream_wait, cw_stream_wait(s, NULL));
    EXPECT_INVALID(cw_stream_fork, cw_stream_fork(&child, NULL));
    EXPECT_INVALID(cw_stream_fork, cw_stream_fork(NULL, s));
    EXPECT_INVALID(cw_stream_join, cw_stream_join(NULL, &child));
    EXPECT_INVALID(cw_stream_join, cw_stream_join(s, NULL));
    EXPECT_INVALID(cw_stream_join, cw_stream_join(s, &nulls));
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(NULL, g_ctx, NULL));
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(&pout, NULL, NULL));
    cw_stream_pool_settings_default(&ps);
    ps.mode = (cw_pool_mode)7;
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(&pout, g_ctx, &ps));
    cw_stream_pool_settings_default(&ps);
    ps.flags = 0x10;
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(&pout, g_ctx, &ps));
    cw_stream_pool_settings_default(&ps);
    ps.reserved_streams = 5;
    ps.max_streams = 4;
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(&pout, g_ctx, &ps));
    cw_stream_pool_settings_default(&ps);
    ps.reserved[0] = 1;
    EXPECT_INVALID(cw_stream_pool_create, cw_stream_pool_create(&pout, g_ctx, &ps));
    EXPECT_INVALID(cw_stream_pool_acquire, cw_stream_pool_acquire(&out, NULL, 0));
    EXPECT_INVALID(cw_stream_pool_acquire, cw_stream_pool_acquire(NULL, pool, 0));
    EXPECT_INVALID(cw_stream_pool_acquire, cw_stream_pool_acquire(&out, NULL, 10));
    EXPECT_INVALID(cw_stream_pool_acquire, cw_stream_pool_acquire(NULL, pool, 10));
    EXPECT_INVALID(cw_stream_pool_release, cw_stream_pool_release(NULL, &s));
    EXPECT_INVALID(cw_stream_pool_release, cw_stream_pool_release(pool, NULL));
    EXPECT_INVALID(cw_stream_pool_release, cw_stream_pool_release(pool, &nulls));
    EXPECT_INVALID(cw_stream_pool_get_next, cw_stream_pool_get_next(NULL, &out));
    EXPECT_INVALID(cw_stream_pool_get_next, cw_stream_pool_get_next(pool, NULL));
    EXPECT_INVALID(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(&out, NULL, NULL, "a"));
    EXPECT_INVALID(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(&out, pool, NULL, NULL));
    EXPECT_INVALID(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(&out, pool, NULL, ""));
    EXPECT_INVALID(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(&out, pool, NULL, long_name));
    EXPECT_INVALID(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(NULL, pool, NULL, "a"));
    EXPECT_INVALID(cw_stream_pool_release_owner, cw_stream_pool_release_owner(NULL, NULL, &count));
    EXPECT_INVALID(cw_stream_pool_get_info, cw_stream_pool_get_info(NULL, &stats));
    EXPECT_INVALID(cw_stream_pool_get_info, cw_stream_pool_get_info(pool, NULL));
    EXPECT_INVALID(cw_timer_create, cw_timer_create(NULL, g_ctx));
    EXPECT_INVALID(cw_timer_create, cw_timer_create(&tout, NULL));
    EXPECT_INVALID(cw_timer_start, cw_timer_start(NULL, s));
    EXPECT_INVALID(cw_timer_start, cw_timer_start(t, NULL));
    EXPECT_INVALID(cw_timer_stop, cw_timer_stop(NULL, s));
    EXPECT_INVALID(cw_timer_stop, cw_timer_stop(t, NULL));
    EXPECT_INVALID(cw_timer_get_elapsed_ms, cw_timer_get_elapsed_ms(NULL, &ms));
    EXPECT_INVALID(cw_timer_get_elapsed_ms, cw_timer_get_elapsed_ms(t, NULL));
    /* future.h */
    EXPECT_INVALID(cw_future_create, cw_future_create(NULL, s, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID(cw_future_create, cw_future_create(&fout, NULL, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID(cw_future_create, cw_future_create(&fout, s, (cw_future_kind)7));
    EXPECT_INVALID(cw_future_rearm, cw_future_rearm(NULL, s));
    EXPECT_INVALID(cw_future_rearm, cw_future_rearm(f, NULL));
    EXPECT_INVALID(cw_future_poll, cw_future_poll(NULL));
    EXPECT_INVALID(cw_future_wait, cw_future_wait(NULL, 10));
    EXPECT_INVALID(cw_future_set_spin, cw_future_set_spin(NULL, 10));
    EXPECT_INVALID(cw_future_set_callback, cw_future_set_callback(NULL, dummy_cb, NULL));
    EXPECT_INVALID(cw_future_set_callback, cw_future_set_callback(f, NULL, NULL));
    EXPECT_INVALID(cw_future_get_fd, cw_future_get_fd(NULL, &fd));
    EXPECT_INVALID(cw_future_get_fd, cw_future_get_fd(f, NULL));
    EXPECT_INVALID(cw_future_when_all, cw_future_when_all(NULL, srcs, 2, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID(cw_future_when_all, cw_future_when_all(&fout, NULL, 2, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID(cw_future_when_all, cw_future_when_all(&fout, srcs, 0, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID(cw_future_when_all, cw_future_when_all(&fout, srcs, 2, (cw_future_kind)9));

    /* out-parameters untouched */
    assert_null(out);
    assert_null(pout);
    assert_null(tout);
    assert_null(fout);
    assert_null(child);
    assert_int_equal(fd, -1);

    /* foreign handles are refused, not used */
    uint64_t junk[64];
    memset(junk, 0xab, sizeof junk);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)junk));
    assert_detail("cw_stream_query");
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_pool_acquire(&out, (cw_stream_pool *)junk, 0));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_future_poll((cw_future *)junk));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_timer_get_elapsed_ms((cw_timer *)junk, &ms));
    assert_null(out);

    /* destroy functions accept NULL */
    cw_stream_destroy(NULL);
    cw_stream_destroy(&nulls);
    cw_stream_pool_destroy(NULL);
    cw_timer_destroy(NULL);
    cw_future_destroy(NULL);

    assert_cw_ok(cw_future_wait(f, -1));
    cw_future_destroy(&f);
    assert_null(f);
    cw_timer_destroy(&t);
    assert_null(t);
    cw_stream_pool_destroy(&pool);
    assert_null(pool);
    cw_stream_destroy(&s);
    assert_null(s);
}

/* A NULL entry of when_all's array is an invalid argument, as a NULL handle
 * is everywhere else (not CW_ERROR_INVALID_HANDLE). */
/* Green partitions against the fake (132 SMs, partitions of 8 in multiples
 * of 8): sizes that do not fit are refused before any green context is made,
 * with a message that says what the device offers. */
static void test_partition_validation(void **state) {
    (void)state;
    cw_partition_caps caps;
    memset(&caps, 0xee, sizeof caps);
    assert_cw_ok(cw_partition_get_caps(0, &caps));
    assert_int_equal(caps.supported, 1);
    assert_int_equal(caps.sm_count, 132);
    assert_int_equal(caps.min_partition, 8);
    assert_int_equal(caps.granularity, 8);
    assert_int_equal(caps.workqueues, 0);

    cw_partition_group *set = NULL;
    const unsigned not_multiple[] = {12};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, not_multiple, 1, -1));
    assert_non_null(strstr(cw_last_error()->message, "132 SMs"));
    assert_non_null(strstr(cw_last_error()->message, "multiples of 8"));
    const unsigned too_small[] = {16, 4};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, too_small, 2, 0));
    assert_non_null(strstr(cw_last_error()->message, "partition 1 asks for 4 SMs"));
    const unsigned too_many[] = {128, 16};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, too_many, 2, 0));
    assert_non_null(strstr(cw_last_error()->message, "ask for 144 SMs"));
    assert_non_null(strstr(cw_last_error()->message, "at most 128"));
    /* all 16 groups taken and 4 SMs left over is fine for the validation;
     * 128 + 8 is not */
    const unsigned exactly_full[] = {128, 8};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, exactly_full, 2, 0));
    assert_null(set);
    /* a valid request reaches the driver; the fake cannot make green
     * contexts, so it fails there, cleanly (the teardown checks for leaks) */
    const unsigned ok[] = {16, 8};
    cw_status st = cw_partition_group_create(&set, 0, ok, 2, -1);
    assert_int_equal(st, CW_ERROR_NOT_SUPPORTED);
    assert_string_equal(cw_last_error()->driver_call, "cuDevResourceGenerateDesc");
    assert_null(set);
}

/* Issue 25, defect 2: partition sizes are bounded one by one by the
 * device's SM count and summed in 64 bits. The sum was an unsigned with no
 * bound per entry: {4294967288, 16} summed to 8 (one group of 8), passed,
 * and reached cuDevResourceGenerateDesc with a count of 536870911 for a
 * one-group array (the fake counts such a call in "badresource" instead of
 * reading past the array). Each request below must be refused with
 * CW_ERROR_INVALID_ARGUMENT whose detail contains `want`, before any
 * descriptor is made; the valid ones at the end reach the driver. */
static void test_partition_sizes_overflow(void **state) {
    (void)state;
    static const struct {
        unsigned counts[3];
        size_t n;
        const char *want;
    } refused[] = {
        {{4294967288u, 16}, 2, "partition 0 asks for 4294967288 SMs; device 0 has 132"},
        {{16, 4294967288u}, 2, "partition 1 asks for 4294967288 SMs; device 0 has 132"},
        {{0}, 1, "sm_counts[i] > 0"},                                   /* zero */
        {{16, 0}, 2, "sm_counts[i] > 0"},
        {{133}, 1, "partition 0 asks for 133 SMs; device 0 has 132"},    /* one SM too many */
        {{136}, 1, "partition 0 asks for 136 SMs; device 0 has 132"},    /* one group too many */
        {{132}, 1, "multiples of 8"},                                   /* the exact SM count */
        {{128, 8}, 2, "ask for 136 SMs"},                               /* 17 groups, 16 possible */
        {{4294967295u}, 1, "partition 0 asks for 4294967295 SMs"},       /* UINT_MAX */
        {{4294967295u, 4294967295u}, 2, "partition 0 asks for 4294967295 SMs"},
        {{8, 4294967295u}, 2, "partition 1 asks for 4294967295 SMs"},
        {{4294967288u, 8, 8}, 3, "partition 0 asks for 4294967288 SMs"}, /* 2^32 + 8 */
        {{2147483648u, 2147483648u, 8}, 3, "partition 0 asks for 2147483648 SMs"}, /* 2^31 + 2^31 + 8 */
        {{8, 2147483648u, 2147483656u}, 3, "partition 1 asks for 2147483648 SMs"}, /* 2^32 + 16 */
        {{4294967168u, 128, 8}, 3, "partition 0 asks for 4294967168 SMs"}, /* 2^32 - 128 + 136 */
    };
    const long bad0 = fk.live("badresource");
    for (size_t c = 0; c < sizeof refused / sizeof refused[0]; c++) {
        cw_partition_group *set = NULL;
        const long desc0 = fk.calls("cuDevResourceGenerateDesc");
        cw_clear_error();
        const cw_status st = cw_partition_group_create(&set, 0, refused[c].counts, refused[c].n, -1);
        const long descs = fk.calls("cuDevResourceGenerateDesc") - desc0;
        const long bad = fk.live("badresource") - bad0;
        if (st != CW_ERROR_INVALID_ARGUMENT || !strstr(cw_last_error()->message, refused[c].want) || descs != 0 ||
            bad != 0 || set != NULL)
            fail_msg("case %zu {%u, %u, %u} (n %zu): %s, %ld cuDevResourceGenerateDesc call(s), %ld beyond the "
                     "split's array; detail: %s (expected CW_ERROR_INVALID_ARGUMENT with \"%s\", no descriptor)",
                     c, refused[c].counts[0], refused[c].counts[1], refused[c].counts[2], refused[c].n,
                     cw_status_name(st), descs, bad, cw_last_error()->message, refused[c].want);
    }
    /* the largest valid requests reach the driver with counts inside the
     * split's array (the fake makes no green context: NOT_SUPPORTED there) */
    static const struct {
        unsigned counts[3];
        size_t n;
    } valid[] = {{{128}, 1}, {{8}, 1}, {{120, 8}, 2}, {{8, 8, 112}, 3}};
    for (size_t c = 0; c < sizeof valid / sizeof valid[0]; c++) {
        cw_partition_group *set = NULL;
        const long desc0 = fk.calls("cuDevResourceGenerateDesc");
        const cw_status st = cw_partition_group_create(&set, 0, valid[c].counts, valid[c].n, 0);
        if (st != CW_ERROR_NOT_SUPPORTED || fk.calls("cuDevResourceGenerateDesc") != desc0 + 1 ||
            fk.live("badresource") != bad0)
            fail_msg("valid case %zu: %s, %ld beyond the split's array; detail: %s", c, cw_status_name(st),
                     fk.live("badresource") - bad0, cw_last_error()->message);
        assert_string_equal(cw_last_error()->driver_call, "cuDevResourceGenerateDesc");
        assert_null(set);
    }
}

static void test_when_all_null_entry(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    cw_stream *srcs[2] = {s, NULL};
    cw_future *f = NULL;
    cw_clear_error();
    const cw_status st = cw_future_when_all(&f, srcs, 2, CW_FUTURE_HOST_FUNC);
    char detail[300];
    snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    if (st != CW_ERROR_INVALID_ARGUMENT)
        fail_msg("cw_future_when_all with a NULL entry returned %s, expected CW_ERROR_INVALID_ARGUMENT; detail: %s",
                 cw_status_name(st), detail);
    assert_non_null(strstr(detail, "cw_future_when_all"));
}

static void test_settings_defaults(void **state) {
    (void)state;
    cw_stream_settings ss;
    memset(&ss, 0x5a, sizeof ss);
    cw_stream_settings_default(&ss);
    assert_int_equal(ss.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(ss.priority, 0);
    for (size_t i = 0; i < sizeof ss.reserved; i++) assert_int_equal(ss.reserved[i], 0);
    cw_stream_pool_settings ps;
    memset(&ps, 0x5a, sizeof ps);
    cw_stream_pool_settings_default(&ps);
    assert_int_equal(ps.mode, CW_POOL_LEASE);
    assert_int_equal(ps.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(ps.priority, 0);
    assert_int_equal(ps.reserved_streams, 1);
    assert_int_equal(ps.max_streams, 0);
    for (size_t i = 0; i < sizeof ps.reserved; i++) assert_int_equal(ps.reserved[i], 0);
    cw_stream_settings_default(NULL);
    cw_stream_pool_settings_default(NULL);

    /* the defaults as used: a default pool made one stream up front */
    cw_stream_pool *pool = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, g_ctx, &ps));
    cw_stream_pool_info st;
    assert_cw_ok(cw_stream_pool_get_info(pool, &st));
    assert_int_equal(st.mode, CW_POOL_LEASE);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.idle, 1);
    assert_int_equal(st.leased, 0);
    assert_int_equal(st.named, 0);
    cw_stream_pool_destroy(&pool);
}

/* ---- streams ---------------------------------------------------------------- */

static void test_stream_priority_and_flags(void **state) {
    (void)state;
    set_current(g_other);
    const long live0 = fk.live("stream");
    cw_stream_settings ss;
    cw_stream_settings_default(&ss);
    cw_stream *s[4] = {NULL};
    const int asked[4] = {7, -20, -3, 0};
    const int expect[4] = {0, -5, -3, 0};
    for (int i = 0; i < 4; i++) {
        ss.priority = asked[i];
        assert_cw_ok(cw_stream_create(&s[i], g_ctx, &ss));
        assert_ptr_equal(current(), g_other);
        cw_stream_info info;
        memset(&info, 0x5a, sizeof info);
        assert_cw_ok(cw_stream_get_info(s[i], &info));
        assert_ptr_equal(current(), g_other);
        assert_int_equal(info.priority, expect[i]);
        assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);
        assert_int_equal(info.owned, 1);
        assert_int_equal(info.from_pool, 0);
        assert_int_equal(info.is_null, 0);
        assert_int_equal(info.device, 0);
        assert_non_null(info.handle);
        assert_ptr_equal(info.handle, handle_of(s[i]));
        /* what the driver saw */
        unsigned cuf = 99;
        int prio = 99;
        assert_cu_ok(fk.cuStreamGetFlags(info.handle, &cuf));
        assert_int_equal(cuf, CU_STREAM_NON_BLOCKING);
        assert_cu_ok(fk.cuStreamGetPriority(info.handle, &prio));
        assert_int_equal(prio, expect[i]);
        cw_context *c = NULL;
        assert_cw_ok(cwt_stream_context(s[i], &c));
        assert_ptr_equal(c, g_ctx);
    }
    assert_int_equal(fk.live("stream"), live0 + 4);

    /* opt-in blocking stream: the driver sees CU_STREAM_DEFAULT */
    cw_stream *b = NULL;
    cw_stream_settings_default(&ss);
    ss.flags = CW_STREAM_BLOCKING;
    assert_cw_ok(cw_stream_create(&b, g_ctx, &ss));
    unsigned cuf = 99;
    assert_cu_ok(fk.cuStreamGetFlags(handle_of(b), &cuf));
    assert_int_equal(cuf, CU_STREAM_DEFAULT);
    cw_stream_info info;
    assert_cw_ok(cw_stream_get_info(b, &info));
    assert_int_equal(info.flags, CW_STREAM_BLOCKING);

    /* query / synchronize of idle streams */
    assert_cw_ok(cw_stream_query(b));
    assert_cw_ok(cw_stream_synchronize(b));
    assert_ptr_equal(current(), g_other);

    /* also with no context current at all */
    set_current(NULL);
    cw_stream *n = NULL;
    assert_cw_ok(cw_stream_create(&n, g_ctx, NULL));
    assert_ptr_equal(current(), NULL);
    assert_cw_ok(cw_stream_query(n));
    assert_ptr_equal(current(), NULL);

    cw_stream_destroy(&n);
    cw_stream_destroy(&b);
    for (int i = 0; i < 4; i++) {
        cw_stream_destroy(&s[i]);
        assert_null(s[i]);
    }
    assert_int_equal(fk.live("stream"), live0);
}

static void test_stream_wrap(void **state) {
    (void)state;
    set_current(g_other);
    const long live0 = fk.live("stream");
    CUstream legacy_handles[3] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
    for (int i = 0; i < 3; i++) {
        cw_stream *w = NULL;
        assert_cw_ok(cw_stream_wrap(&w, g_ctx, legacy_handles[i]));
        assert_ptr_equal(current(), g_other);
        cw_stream_info info;
        memset(&info, 0x5a, sizeof info);
        assert_cw_ok(cw_stream_get_info(w, &info));
        assert_ptr_equal(current(), g_other);
        assert_int_equal(info.is_null, 1);
        assert_int_equal(info.owned, 0);
        assert_int_equal(info.from_pool, 0);
        assert_ptr_equal(info.handle, legacy_handles[i]);
        assert_cw_ok(cw_stream_query(w));
        assert_cw_ok(cw_stream_synchronize(w));
        assert_ptr_equal(current(), g_other);
        /* ordering with the wrapped legacy stream, both ways */
        cw_stream *s = new_stream();
        long w0 = fk.waits();
        assert_cw_ok(cw_stream_wait(s, w));
        assert_cw_ok(cw_stream_wait(w, s));
        assert_int_equal(fk.waits() - w0, 2);
        assert_ptr_equal(current(), g_other);
        cw_stream_destroy(&s);
        cw_stream_destroy(&w);
        assert_null(w);
    }
    assert_int_equal(fk.live("stream"), live0);

    /* a stream the host program made on the primary context */
    set_current(g_primary);
    CUstream mine = NULL;
    assert_cu_ok(fk.cuStreamCreateWithPriority(&mine, CU_STREAM_NON_BLOCKING, -2));
    set_current(g_other);
    cw_stream *w = NULL;
    assert_cw_ok(cw_stream_wrap(&w, g_ctx, mine));
    cw_stream_info info;
    assert_cw_ok(cw_stream_get_info(w, &info));
    assert_int_equal(info.is_null, 0);
    assert_int_equal(info.owned, 0);
    assert_int_equal(info.priority, -2);
    assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);
    assert_ptr_equal(info.handle, mine);
    assert_int_equal(fk.live("stream"), live0 + 1);
    cw_stream_destroy(&w);
    assert_null(w);
    /* the wrapper went, the stream did not */
    assert_int_equal(fk.live("stream"), live0 + 1);
    assert_int_equal(fk.cuStreamQuery(mine), CUDA_SUCCESS);
    assert_cu_ok(fk.cuStreamDestroy(mine));

    /* a stream of another context is refused */
    CUstream foreign = NULL;
    assert_cu_ok(fk.cuStreamCreateWithPriority(&foreign, CU_STREAM_NON_BLOCKING, 0));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_wrap(&w, g_ctx, foreign));
    assert_detail("cw_stream_wrap");
    assert_null(w);
    assert_ptr_equal(current(), g_other);
    assert_cu_ok(fk.cuStreamDestroy(foreign));
    assert_int_equal(fk.live("stream"), live0);
}

/* ---- pools ------------------------------------------------------------------ */

static cw_stream_pool *new_pool(cw_pool_mode mode, unsigned reserved, unsigned max) {
    cw_stream_pool_settings ps;
    cw_stream_pool_settings_default(&ps);
    ps.mode = mode;
    ps.reserved_streams = reserved;
    ps.max_streams = max;
    cw_stream_pool *p = NULL;
    assert_cw_ok(cw_stream_pool_create(&p, g_ctx, &ps));
    assert_non_null(p);
    return p;
}

static void expect_stats(cw_stream_pool *p, cw_pool_mode mode, size_t created, size_t leased, size_t idle,
                         size_t named) {
    cw_stream_pool_info st;
    memset(&st, 0x5a, sizeof st);
    assert_cw_ok(cw_stream_pool_get_info(p, &st));
    if (st.mode != mode || st.created != created || st.leased != leased || st.idle != idle || st.named != named)
        fail_msg("pool stats: mode %d created %zu leased %zu idle %zu named %zu; expected %d %zu %zu %zu %zu",
                 (int)st.mode, st.created, st.leased, st.idle, st.named, (int)mode, created, leased, idle, named);
}

static void test_pool_lease(void **state) {
    (void)state;
    set_current(g_other);
    const long live0 = fk.live("stream");
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 3);
    expect_stats(p, CW_POOL_LEASE, 1, 0, 1, 0);
    assert_int_equal(fk.live("stream"), live0 + 1);
    cw_stream *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&a, p, 0));
    assert_cw_ok(cw_stream_pool_acquire(&b, p, 0));
    assert_cw_ok(cw_stream_pool_acquire(&c, p, 0));
    assert_ptr_equal(current(), g_other);
    assert_true(a != b && b != c && a != c);
    expect_stats(p, CW_POOL_LEASE, 3, 3, 0, 0);
    assert_int_equal(fk.live("stream"), live0 + 3);
    cw_stream_info info;
    assert_cw_ok(cw_stream_get_info(a, &info));
    assert_int_equal(info.from_pool, 1);
    assert_int_equal(info.owned, 1);
    assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);

    /* exhausted: at once, out untouched */
    double t0 = now_ms();
    assert_cw(CW_ERROR_POOL_EXHAUSTED, cw_stream_pool_acquire(&d, p, 0));
    assert_true(now_ms() - t0 < 100);
    assert_detail("cw_stream_pool_acquire");
    assert_null(d);
    assert_cw(CW_ERROR_POOL_EXHAUSTED, cw_stream_pool_acquire(&d, p, 0));
    assert_null(d);

    /* a pool stream is not destroyed by cw_stream_destroy: the caller's
     * pointer is nulled (the destroy contract), the stream stays leased */
    cw_stream *keep = b;
    cw_clear_error();
    cw_stream_destroy(&keep);
    assert_null(keep);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* nothing failed: a warning only */
    assert_int_equal(fk.live("stream"), live0 + 3);
    cw_stream_info binfo;
    assert_cw_ok(cw_stream_get_info(b, &binfo));

    /* release, then acquire gets that stream back */
    cw_stream *copy = b;
    assert_cw_ok(cw_stream_pool_release(p, &b));
    assert_null(b);
    expect_stats(p, CW_POOL_LEASE, 3, 2, 1, 0);
    /* double release */
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_pool_release(p, &copy));
    assert_detail("cw_stream_pool_release");
    assert_non_null(copy);
    expect_stats(p, CW_POOL_LEASE, 3, 2, 1, 0);
    assert_cw_ok(cw_stream_pool_acquire(&d, p, 0));
    assert_ptr_equal(d, copy);
    expect_stats(p, CW_POOL_LEASE, 3, 3, 0, 0);

    /* release to the wrong pool */
    cw_stream_pool *q = new_pool(CW_POOL_LEASE, 1, 0);
    cw_stream *tmp = a;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_release(q, &tmp));
    assert_detail("cw_stream_pool_release");
    assert_ptr_equal(tmp, a);
    expect_stats(q, CW_POOL_LEASE, 1, 0, 1, 0);
    expect_stats(p, CW_POOL_LEASE, 3, 3, 0, 0);
    /* nor does a plain stream go into a pool */
    cw_stream *plain = new_stream();
    tmp = plain;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_release(p, &tmp));
    assert_ptr_equal(tmp, plain);
    cw_stream_destroy(&plain);
    /* next() is not for lease pools */
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_pool_get_next(p, &tmp));

    assert_cw_ok(cw_stream_pool_release(p, &a));
    assert_cw_ok(cw_stream_pool_release(p, &c));
    assert_cw_ok(cw_stream_pool_release(p, &d));
    expect_stats(p, CW_POOL_LEASE, 3, 0, 3, 0);
    cw_stream_pool_destroy(&q);
    cw_stream_pool_destroy(&p);
    assert_null(p);
    assert_ptr_equal(current(), g_other);
    assert_int_equal(fk.live("stream"), live0);
}

struct releaser {
    cw_stream_pool *pool;
    cw_stream *s;
    int delay_ms;
    cw_status st;
};

static void *release_later(void *arg) {
    struct releaser *r = (struct releaser *)arg;
    sleep_ms(r->delay_ms);
    r->st = cw_stream_pool_release(r->pool, &r->s);
    return NULL;
}

static void test_pool_acquire_wait(void **state) {
    (void)state;
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 1);
    cw_stream *a = NULL, *b = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&a, p, 0));
    /* nobody releases: a timeout after about the time asked */
    double t0 = now_ms();
    assert_cw(CW_ERROR_TIMEOUT, cw_stream_pool_acquire(&b, p, 50000));
    double dt = now_ms() - t0;
    assert_detail("cw_stream_pool_acquire");
    assert_null(b);
    if (dt < 45 || dt > 2000) fail_msg("acquire_wait(50 ms) timed out after %.1f ms", dt);

    /* another thread releases meanwhile: success, with that stream */
    struct releaser r = {p, a, 50, CW_ERROR_INTERNAL};
    cw_stream *expected = a;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &r), 0);
    t0 = now_ms();
    assert_cw_ok(cw_stream_pool_acquire(&b, p, 5000000));
    dt = now_ms() - t0;
    pthread_join(t, NULL);
    assert_int_equal(r.st, CW_SUCCESS);
    assert_null(r.s);
    assert_ptr_equal(b, expected);
    if (dt < 30 || dt > 3000) fail_msg("acquire_wait returned after %.1f ms; the release came after 50 ms", dt);
    /* forever (negative) with a release */
    r.s = b;
    r.st = CW_ERROR_INTERNAL;
    b = NULL;
    assert_int_equal(pthread_create(&t, NULL, release_later, &r), 0);
    assert_cw_ok(cw_stream_pool_acquire(&b, p, -1));
    pthread_join(t, NULL);
    assert_int_equal(r.st, CW_SUCCESS);
    assert_ptr_equal(b, expected);
    expect_stats(p, CW_POOL_LEASE, 1, 1, 0, 0);
    assert_cw_ok(cw_stream_pool_release(p, &b));
    cw_stream_pool_destroy(&p);
}

struct huge_acquire {
    cw_stream_pool *pool;
    int64_t timeout_us;
    cw_stream *got;
    cw_status st;
    atomic_int returned;
};

static void *huge_acquire_main(void *arg) {
    struct huge_acquire *a = (struct huge_acquire *)arg;
    a->st = cw_stream_pool_acquire(&a->got, a->pool, a->timeout_us);
    atomic_store(&a->returned, 1);
    return NULL;
}

/* A timeout too large to represent means no limit (as for futures): with
 * the pool exhausted, a wait with each huge timeout is still waiting when
 * the test releases a stream, and then gets it. */
static void test_pool_acquire_wait_huge_timeout(void **state) {
    (void)state;
    static const int64_t huge[] = {INT64_MAX, INT64_MAX / 1000 + 1, INT64_MAX / 1000, INT64_MAX / 2};
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 1);
    cw_stream *held = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&held, p, 0));
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        struct huge_acquire a = {p, huge[i], NULL, CW_ERROR_INTERNAL, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, huge_acquire_main, &a), 0);
        sleep_ms(50); /* a wait that would end early has ended by now */
        const int early = atomic_load(&a.returned);
        cw_stream *expected = held;
        assert_cw_ok(cw_stream_pool_release(p, &held));
        pthread_join(t, NULL);
        if (early)
            fail_msg("cw_stream_pool_acquire(%lld us) returned %s while the pool was exhausted",
                     (long long)huge[i], cw_status_name(a.st));
        assert_int_equal(a.st, CW_SUCCESS);
        assert_ptr_equal(a.got, expected);
        held = a.got;
    }
    assert_cw_ok(cw_stream_pool_release(p, &held));
    cw_stream_pool_destroy(&p);
}

static void test_pool_round_robin(void **state) {
    (void)state;
    const long live0 = fk.live("stream");
    cw_stream_pool *p = new_pool(CW_POOL_ROUND_ROBIN, 4, 0);
    assert_int_equal(fk.live("stream"), live0 + 4);
    cw_stream *seen[400];
    for (int i = 0; i < 400; i++) assert_cw_ok(cw_stream_pool_get_next(p, &seen[i]));
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) assert_true(seen[i] != seen[j]);
    int counts[4] = {0};
    for (int i = 0; i < 400; i++) {
        if (seen[i] != seen[i % 4]) fail_msg("next() #%d gave stream %p, expected %p (in turn)", i, (void *)seen[i],
                                             (void *)seen[i % 4]);
        counts[i % 4]++;
    }
    for (int i = 0; i < 4; i++) assert_int_equal(counts[i], 100);
    /* acquire is next; release accepts the stream back and does nothing */
    cw_stream *x = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&x, p, 0));
    assert_ptr_equal(x, seen[0]);
    assert_cw_ok(cw_stream_pool_release(p, &x));
    assert_null(x);
    cw_stream_pool_info st;
    assert_cw_ok(cw_stream_pool_get_info(p, &st));
    assert_int_equal(st.mode, CW_POOL_ROUND_ROBIN);
    assert_int_equal(st.created, 4);
    assert_int_equal(fk.live("stream"), live0 + 4);
    /* reserved 0 means 4 */
    cw_stream_pool *q = new_pool(CW_POOL_ROUND_ROBIN, 0, 0);
    assert_cw_ok(cw_stream_pool_get_info(q, &st));
    assert_int_equal(st.created, 4);
    cw_stream_pool_destroy(&q);
    /* max_streams is a lease setting: a round-robin pool makes its whole set
     * whatever it says (found by tests/fuzz/fuzz_settings: the pool was
     * refused with CW_ERROR_POOL_EXHAUSTED and no detail) */
    q = new_pool(CW_POOL_ROUND_ROBIN, 6, 2);
    assert_cw_ok(cw_stream_pool_get_info(q, &st));
    assert_int_equal(st.created, 6);
    cw_stream_pool_destroy(&q);
    cw_stream_pool_destroy(&p);
    assert_int_equal(fk.live("stream"), live0);
}

static void test_pool_single(void **state) {
    (void)state;
    cw_stream_pool *p = new_pool(CW_POOL_SINGLE, 3, 0);
    cw_stream *first = NULL, *x = NULL;
    assert_cw_ok(cw_stream_pool_get_next(p, &first));
    for (int i = 0; i < 50; i++) {
        assert_cw_ok(cw_stream_pool_get_next(p, &x));
        assert_ptr_equal(x, first);
        assert_cw_ok(cw_stream_pool_acquire(&x, p, 0));
        assert_ptr_equal(x, first);
    }
    cw_stream_pool_info st;
    assert_cw_ok(cw_stream_pool_get_info(p, &st));
    assert_int_equal(st.mode, CW_POOL_SINGLE);
    assert_int_equal(st.created, 1);
    /* fork in a single pool: the child is the parent */
    cw_stream *child = NULL;
    assert_cw_ok(cw_stream_fork(&child, first));
    assert_ptr_equal(child, first);
    assert_cw_ok(cw_stream_join(first, &child));
    assert_null(child);
    cw_stream_pool_destroy(&p);
}

/* Runs in a child process (argv: self fake --serialize-child): with
 * CUWEAVE_SERIALIZE=1 every pool is a single-stream pool. Exit 0 = as
 * documented; any other code names the check that failed. */
static int serialize_child(void) {
    setenv("CUWEAVE_SERIALIZE", "1", 1);
    cw_context *ctx = NULL;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return 10;
    cw_stream_pool_settings ps;
    cw_stream_pool_settings_default(&ps);
    ps.reserved_streams = 2;
    ps.max_streams = 4;
    cw_stream_pool *p = NULL;
    if (cw_stream_pool_create(&p, ctx, &ps) != CW_SUCCESS) return 11;
    cw_stream_pool_info st;
    if (cw_stream_pool_get_info(p, &st) != CW_SUCCESS || st.mode != CW_POOL_SINGLE) return 12;
    if (st.created != 1) return 13;
    cw_stream *a = NULL, *b = NULL, *n = NULL;
    if (cw_stream_pool_acquire(&a, p, 0) != CW_SUCCESS || cw_stream_pool_acquire(&b, p, 0) != CW_SUCCESS || a != b)
        return 14;
    if (cw_stream_pool_get_next(p, &n) != CW_SUCCESS || n != a) return 15;
    cw_stream_pool *rr = NULL;
    ps.mode = CW_POOL_ROUND_ROBIN;
    ps.max_streams = 0;
    if (cw_stream_pool_create(&rr, ctx, &ps) != CW_SUCCESS) return 16;
    if (cw_stream_pool_get_info(rr, &st) != CW_SUCCESS || st.mode != CW_POOL_SINGLE || st.created != 1) return 17;
    cw_stream *c = NULL;
    if (cw_stream_fork(&c, a) != CW_SUCCESS || c != a) return 18;
    if (cw_stream_join(a, &c) != CW_SUCCESS || c != NULL) return 19;
    /* a stream made outside a pool forks onto itself too */
    cw_stream *s = NULL;
    if (cw_stream_create(&s, ctx, NULL) != CW_SUCCESS) return 20;
    if (cw_stream_fork(&c, s) != CW_SUCCESS || c != s) return 21;
    if (cw_stream_join(s, &c) != CW_SUCCESS || c != NULL) return 22;
    if (cw_stream_pool_release(p, &a) != CW_SUCCESS || cw_stream_pool_release(p, &b) != CW_SUCCESS) return 23;
    cw_stream_destroy(&s);
    cw_stream_pool_destroy(&rr);
    cw_stream_pool_destroy(&p);
    cw_context_destroy(&ctx);
    if (fk.lib && fk.live("stream") != 0) return 24;
    return 0;
}

static void test_serialize_env(void **state) {
    (void)state;
    char *argv[] = {(char *)g_self_path, (char *)g_fake_path, (char *)"--serialize-child", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, g_self_path, NULL, NULL, argv, environ);
    if (rc != 0) fail_msg("posix_spawn(%s) failed: %s", g_self_path, strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status)) fail_msg("the CUWEAVE_SERIALIZE=1 child died (status 0x%x)", status);
    if (WEXITSTATUS(status) != 0)
        fail_msg("the CUWEAVE_SERIALIZE=1 child failed check %d (see serialize_child)", WEXITSTATUS(status));
}

static void test_pool_named(void **state) {
    (void)state;
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 0);
    int owner_a, owner_b;
    cw_stream *ax = NULL, *ax2 = NULL, *ay = NULL, *bx = NULL, *nx = NULL, *nx2 = NULL, *free1 = NULL;
    char name63[64];
    memset(name63, 'q', 63);
    name63[63] = '\0';
    assert_cw_ok(cw_stream_pool_acquire_named(&ax, p, &owner_a, "x"));
    assert_cw_ok(cw_stream_pool_acquire_named(&ax2, p, &owner_a, "x"));
    assert_ptr_equal(ax, ax2);
    assert_cw_ok(cw_stream_pool_acquire_named(&ay, p, &owner_a, name63));
    assert_cw_ok(cw_stream_pool_acquire_named(&bx, p, &owner_b, "x"));
    assert_cw_ok(cw_stream_pool_acquire_named(&nx, p, NULL, "x"));
    assert_cw_ok(cw_stream_pool_acquire_named(&nx2, p, NULL, "x"));
    assert_ptr_equal(nx, nx2);
    cw_stream *all[4] = {ax, ay, bx, nx};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) assert_true(all[i] != all[j]);
    expect_stats(p, CW_POOL_LEASE, 4, 4, 0, 4);
    /* acquire never hands out a named stream */
    assert_cw_ok(cw_stream_pool_acquire(&free1, p, 0));
    for (int i = 0; i < 4; i++) assert_true(free1 != all[i]);
    expect_stats(p, CW_POOL_LEASE, 5, 5, 0, 4);

    size_t n = 99;
    assert_cw_ok(cw_stream_pool_release_owner(p, &owner_a, &n));
    assert_int_equal(n, 2);
    expect_stats(p, CW_POOL_LEASE, 5, 3, 2, 2);
    /* the released ones are idle: the next acquires get them back */
    cw_stream *r1 = NULL, *r2 = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&r1, p, 0));
    assert_cw_ok(cw_stream_pool_acquire(&r2, p, 0));
    assert_true((r1 == ax && r2 == ay) || (r1 == ay && r2 == ax));
    expect_stats(p, CW_POOL_LEASE, 5, 5, 0, 2);
    /* owner a again: a stream, not necessarily the old one; still consistent */
    assert_cw_ok(cw_stream_pool_release(p, &r1));
    assert_cw_ok(cw_stream_pool_release(p, &r2));
    assert_cw_ok(cw_stream_pool_release_owner(p, &owner_a, &n));
    assert_int_equal(n, 0);
    assert_cw_ok(cw_stream_pool_release_owner(p, &owner_b, NULL));
    assert_cw_ok(cw_stream_pool_release_owner(p, NULL, &n));
    assert_int_equal(n, 1);
    assert_cw_ok(cw_stream_pool_release(p, &free1));
    expect_stats(p, CW_POOL_LEASE, 5, 0, 5, 0);
    /* named streams in a bounded pool that is full */
    cw_stream_pool *q = new_pool(CW_POOL_LEASE, 1, 1);
    cw_stream *q1 = NULL, *q2 = NULL;
    assert_cw_ok(cw_stream_pool_acquire_named(&q1, q, &owner_a, "one"));
    assert_cw(CW_ERROR_POOL_EXHAUSTED, cw_stream_pool_acquire_named(&q2, q, &owner_a, "two"));
    assert_null(q2);
    expect_stats(q, CW_POOL_LEASE, 1, 1, 0, 1);
    assert_cw_ok(cw_stream_pool_release_owner(q, &owner_a, &n));
    assert_int_equal(n, 1);
    expect_stats(q, CW_POOL_LEASE, 1, 0, 1, 0);
    cw_stream_pool_destroy(&q);
    cw_stream_pool_destroy(&p);
}

/* A named stream belongs to the pool's named table until release_owner.
 * Released by cw_stream_pool_release (or joined as if forked) as well, it
 * went back to the free list twice: once there, once more at release_owner,
 * so two acquirers held the same stream. The mistaken release is refused
 * and release_owner gives the stream back exactly once. */
static void test_pool_named_double_release(void **state) {
    (void)state;
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 2, 0);
    int owner;
    cw_stream *named = NULL, *copy = NULL, *a = NULL, *b = NULL, *parent = new_stream();
    assert_cw_ok(cw_stream_pool_acquire_named(&named, p, &owner, "x"));
    expect_stats(p, CW_POOL_LEASE, 2, 1, 1, 1);
    /* the user's mistake: the named stream given back as if acquired */
    copy = named;
    cw_clear_error();
    const cw_status released = cw_stream_pool_release(p, &copy);
    char detail[300];
    snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
    /* someone else acquires, then the owner's streams go back */
    assert_cw_ok(cw_stream_pool_acquire(&a, p, 0));
    size_t n = 99;
    assert_cw_ok(cw_stream_pool_release_owner(p, &owner, &n));
    assert_cw_ok(cw_stream_pool_acquire(&b, p, 0));
    if (a == b)
        fail_msg("two holders: cw_stream_pool_release of a named stream returned %s, then acquire gave stream %p, "
                 "release_owner gave it back again (count %zu) and the next acquire gave the same stream %p",
                 cw_status_name(released), (void *)a, n, (void *)b);
    if (released != CW_ERROR_INVALID_STATE)
        fail_msg("cw_stream_pool_release of a named stream returned %s, expected CW_ERROR_INVALID_STATE",
                 cw_status_name(released));
    assert_ptr_equal(copy, named); /* refused: the handle is left as it was */
    assert_non_null(strstr(detail, "named"));
    assert_int_equal(n, 1);
    assert_true(a != named);
    assert_ptr_equal(b, named); /* release_owner put it back, once */
    expect_stats(p, CW_POOL_LEASE, 2, 2, 0, 0);
    assert_cw_ok(cw_stream_pool_release(p, &a));
    assert_cw_ok(cw_stream_pool_release(p, &b));
    expect_stats(p, CW_POOL_LEASE, 2, 0, 2, 0);

    /* joined as if it were a forked child: refused the same way, and the
     * named stream is still the owner's */
    assert_cw_ok(cw_stream_pool_acquire_named(&named, p, &owner, "y"));
    copy = named;
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_join(parent, &copy));
    assert_ptr_equal(copy, named);
    cw_stream *again = NULL;
    assert_cw_ok(cw_stream_pool_acquire_named(&again, p, &owner, "y"));
    assert_ptr_equal(again, named);
    assert_cw_ok(cw_stream_pool_acquire(&a, p, 0));
    assert_true(a != named);
    assert_cw_ok(cw_stream_pool_release_owner(p, &owner, &n));
    assert_int_equal(n, 1);
    /* released by release_owner, the old handle is no longer leased */
    copy = named;
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_pool_release(p, &copy));
    assert_cw_ok(cw_stream_pool_acquire(&b, p, 0));
    assert_ptr_equal(b, named);
    assert_cw_ok(cw_stream_pool_release(p, &a));
    assert_cw_ok(cw_stream_pool_release(p, &b));
    expect_stats(p, CW_POOL_LEASE, 2, 0, 2, 0);
    cw_stream_destroy(&parent);
    cw_stream_pool_destroy(&p);
}

/* Waiters are served first: a stream released while a thread waits in
 * cw_stream_pool_acquire (waiting) goes to that thread, not to an acquire that
 * comes after it. */
struct waiter {
    cw_stream_pool *pool;
    int64_t timeout_us;
    int give_back; /* release the stream at once */
    atomic_int *served; /* counts the waiters served so far */
    cw_stream *got;
    cw_status st, release_st;
    int rank; /* 1: served first */
};

static void *waiter_main(void *arg) {
    struct waiter *w = (struct waiter *)arg;
    w->st = cw_stream_pool_acquire(&w->got, w->pool, w->timeout_us);
    w->rank = atomic_fetch_add(w->served, 1) + 1;
    if (w->give_back && w->st == CW_SUCCESS) {
        cw_stream *s = w->got;
        w->release_st = cw_stream_pool_release(w->pool, &s);
    }
    return NULL;
}

/* Waits (up to 10 s) until n threads wait in the pool. */
static void expect_waiting(cw_stream_pool *p, int n) {
    for (int i = 0; i < 10000 && cwi_pool_waiting(p) != n; i++) sleep_ms(1);
    if (cwi_pool_waiting(p) != n) fail_msg("%d threads wait in the pool, expected %d", cwi_pool_waiting(p), n);
}

static void test_pool_waiter_first(void **state) {
    (void)state;
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 1);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&s, p, 0));
    cw_stream *const only = s;
    assert_int_equal(cwi_pool_waiting(p), 0);
    atomic_int served = 0;
    /* A thread waits; this thread gives the stream back and acquires again,
     * 1000 times: every acquire here starts after the waiter began to wait.
     * Five rounds, each with a new waiter. */
    int overtaken = 0, rounds = 0;
    cw_status st = CW_SUCCESS;
    for (rounds = 1; rounds <= 5 && overtaken == 0; rounds++) {
        struct waiter w = {p, 20000000, 0, &served, NULL, CW_ERROR_INTERNAL, CW_ERROR_INTERNAL, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
        expect_waiting(p, 1);
        /* Let it fall asleep in the kernel (between giving up the pool's
         * mutex and sleeping, a wake-up finds it at once). The old code let
         * this thread win every race but now and then the first (1 run in 10
         * here), hence the rounds; the fixed pool hands the stream over
         * whenever the waiter runs. */
        sleep_ms(50);
        for (int i = 0; i < 1000; i++) {
            assert_cw_ok(cw_stream_pool_release(p, &s));
            st = cw_stream_pool_acquire(&s, p, 0);
            if (st != CW_SUCCESS) break;
            overtaken++;
        }
        if (s) assert_cw_ok(cw_stream_pool_release(p, &s)); /* let the waiter have it at last */
        pthread_join(t, NULL);
        printf("# waiter-first, round %d: the waiter was overtaken %d times, then %s; the acquire after the last "
               "release: %s\n",
               rounds, overtaken, cw_status_name(w.st), cw_status_name(st));
        assert_int_equal(w.st, CW_SUCCESS);
        assert_ptr_equal(w.got, only);
        s = w.got; /* this thread holds it again */
    }
    if (overtaken)
        fail_msg("a thread waiting in cw_stream_pool_acquire was overtaken %d times in a row by a thread "
                 "that released and acquired again after it began to wait",
                 overtaken);
    assert_int_equal(st, CW_ERROR_POOL_EXHAUSTED);
    expect_stats(p, CW_POOL_LEASE, 1, 1, 0, 0);
    assert_int_equal(cwi_pool_waiting(p), 0);

    /* Waiters are served in the order they began to wait: two of them,
     * each giving the stream back at once, the second queued after the
     * first; a third times out and leaves the queue. */
    struct waiter w1 = {p, 20000000, 1, &served, NULL, CW_ERROR_INTERNAL, CW_ERROR_INTERNAL, 0};
    struct waiter w2 = w1;
    atomic_store(&served, 0);
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, waiter_main, &w1), 0);
    expect_waiting(p, 1);
    assert_int_equal(pthread_create(&t2, NULL, waiter_main, &w2), 0);
    expect_waiting(p, 2);
    cw_stream *late = NULL;
    assert_cw(CW_ERROR_TIMEOUT, cw_stream_pool_acquire(&late, p, 20000));
    assert_null(late);
    assert_int_equal(cwi_pool_waiting(p), 2);
    assert_cw_ok(cw_stream_pool_release(p, &s));
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(w1.st, CW_SUCCESS);
    assert_int_equal(w2.st, CW_SUCCESS);
    assert_int_equal(w1.release_st, CW_SUCCESS);
    assert_int_equal(w2.release_st, CW_SUCCESS);
    assert_ptr_equal(w1.got, only);
    assert_ptr_equal(w2.got, only);
    if (w1.rank != 1 || w2.rank != 2)
        fail_msg("the waiter queued first was served %s (ranks %d and %d)", w1.rank == 1 ? "first" : "second",
                 w1.rank, w2.rank);
    assert_int_equal(cwi_pool_waiting(p), 0);
    expect_stats(p, CW_POOL_LEASE, 1, 0, 1, 0);
    /* with nobody waiting, the free stream is taken on the fast path */
    assert_cw_ok(cw_stream_pool_acquire(&s, p, 0));
    assert_ptr_equal(s, only);
    assert_cw_ok(cw_stream_pool_release(p, &s));
    cw_stream_pool_destroy(&p);
}

/* 16 threads lease, use and release streams of one pool for about a second:
 * no stream leased to two at once, none lost, nobody left waiting. */
#define HAMMER_THREADS 16
#define HAMMER_MAX 8

struct hammer {
    cw_stream_pool *pool;
    cw_stream *shared;
    double until_ms;
    _Atomic(cw_stream *) table[64]; /* streams seen, index = ownership slot */
    atomic_int owner[64];
    atomic_int registered;
    pthread_mutex_t reg_mutex;
    atomic_long iterations, exhausted, timeouts, violations, errors;
    cw_status first_error;
};

static int hammer_slot(struct hammer *h, cw_stream *s) {
    int n = atomic_load(&h->registered);
    for (int i = 0; i < n; i++)
        if (atomic_load(&h->table[i]) == s) return i;
    pthread_mutex_lock(&h->reg_mutex);
    n = atomic_load(&h->registered);
    int found = -1;
    for (int i = 0; i < n; i++)
        if (atomic_load(&h->table[i]) == s) found = i;
    if (found < 0 && n < 64) {
        atomic_store(&h->table[n], s);
        atomic_store(&h->registered, n + 1);
        found = n;
    }
    pthread_mutex_unlock(&h->reg_mutex);
    return found;
}

struct hammer_arg {
    struct hammer *h;
    int id;
};

static void *hammer_main(void *arg) {
    struct hammer_arg *a = (struct hammer_arg *)arg;
    struct hammer *h = a->h;
    const int me = a->id + 1;
    while (now_ms() < h->until_ms) {
        cw_stream *s = NULL;
        /* odd: no wait; 2, 6, 10, 14: waits of 5 us, which time out while
         * releases hand streams to the queue; the others: 200 ms */
        cw_status st = (me & 1)        ? cw_stream_pool_acquire(&s, h->pool, 0)
                       : (me & 3) == 2 ? cw_stream_pool_acquire(&s, h->pool, 5)
                                       : cw_stream_pool_acquire(&s, h->pool, 200000);
        if (st == CW_ERROR_POOL_EXHAUSTED) {
            atomic_fetch_add(&h->exhausted, 1);
            sched_yield();
            continue;
        }
        if (st == CW_ERROR_TIMEOUT) {
            atomic_fetch_add(&h->timeouts, 1);
            continue;
        }
        if (st != CW_SUCCESS || !s) {
            atomic_fetch_add(&h->errors, 1);
            h->first_error = st;
            continue;
        }
        int slot = hammer_slot(h, s);
        if (slot < 0) {
            atomic_fetch_add(&h->violations, 1);
            continue;
        }
        if (atomic_exchange(&h->owner[slot], me) != 0) atomic_fetch_add(&h->violations, 1);
        if (cw_stream_wait(s, h->shared) != CW_SUCCESS) atomic_fetch_add(&h->errors, 1);
        if (cw_stream_wait(h->shared, s) != CW_SUCCESS) atomic_fetch_add(&h->errors, 1);
        if ((atomic_load(&h->iterations) & 15) == 0) sched_yield(); /* hold it a little longer now and then */
        if (atomic_exchange(&h->owner[slot], 0) != me) atomic_fetch_add(&h->violations, 1);
        if (cw_stream_pool_release(h->pool, &s) != CW_SUCCESS || s != NULL) atomic_fetch_add(&h->errors, 1);
        atomic_fetch_add(&h->iterations, 1);
    }
    return NULL;
}

/* max: the pool's max_streams (at most HAMMER_MAX) */
static void run_hammer(unsigned max) {
    static struct hammer h; /* large; zeroed below */
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.reg_mutex, NULL);
    h.pool = new_pool(CW_POOL_LEASE, 1, max);
    h.shared = new_stream();
    const long waits0 = fk.waits();
    h.until_ms = now_ms() + 1000;
    pthread_t t[HAMMER_THREADS];
    struct hammer_arg args[HAMMER_THREADS];
    for (int i = 0; i < HAMMER_THREADS; i++) {
        args[i].h = &h;
        args[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &args[i]), 0);
    }
    for (int i = 0; i < HAMMER_THREADS; i++) pthread_join(t[i], NULL);
    long iters = atomic_load(&h.iterations);
    printf("# hammer (max %u): %ld leases by %d threads, %ld exhausted, %ld timeouts, %d streams\n", max, iters,
           HAMMER_THREADS,
           (long)atomic_load(&h.exhausted), (long)atomic_load(&h.timeouts), atomic_load(&h.registered));
    if (atomic_load(&h.violations) != 0)
        fail_msg("%ld ownership violations: a stream was leased to two threads at once",
                 (long)atomic_load(&h.violations));
    if (atomic_load(&h.errors) != 0)
        fail_msg("%ld calls failed (first: %s)", (long)atomic_load(&h.errors), cw_status_name(h.first_error));
    assert_true(iters >= HAMMER_THREADS * 10);
    assert_int_equal(cwi_pool_waiting(h.pool), 0);
    assert_int_equal(fk.waits() - waits0, 2 * iters);
    cw_stream_pool_info st;
    assert_cw_ok(cw_stream_pool_get_info(h.pool, &st));
    assert_true(st.created <= max);
    assert_int_equal(st.leased, 0);
    assert_int_equal(st.idle, st.created);
    assert_int_equal(st.created, (size_t)atomic_load(&h.registered));
    /* every stream can be leased once more, all at the same time: none lost */
    cw_stream *all[HAMMER_MAX] = {NULL};
    for (size_t i = 0; i < st.created; i++) assert_cw_ok(cw_stream_pool_acquire(&all[i], h.pool, 0));
    for (size_t i = 0; i < st.created; i++)
        for (size_t j = i + 1; j < st.created; j++) assert_true(all[i] != all[j]);
    for (size_t i = 0; i < st.created; i++) assert_cw_ok(cw_stream_pool_release(h.pool, &all[i]));
    cw_stream_destroy(&h.shared);
    cw_stream_pool_destroy(&h.pool);
    pthread_mutex_destroy(&h.reg_mutex);
}

/* A pool of 8 (the waits are rare) and one of 2 (most acquires wait, and
 * waits of 5 us time out while releases hand streams over). */
static void test_pool_hammer(void **state) {
    (void)state;
    run_hammer(HAMMER_MAX);
    run_hammer(2);
}

/* ---- ordering --------------------------------------------------------------- */

static void test_stream_wait(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream *a = new_stream(), *b = new_stream(), *c = new_stream(), *d = new_stream();
    const long rec0 = fk.calls("cuEventRecord");
    long w0 = fk.waits();
    assert_cw_ok(cw_stream_wait(a, b));
    assert_int_equal(fk.waits() - w0, 1);
    assert_int_equal(fk.calls("cuEventRecord") - rec0, 1);
    /* dst == src does nothing */
    w0 = fk.waits();
    assert_cw_ok(cw_stream_wait(a, a));
    assert_int_equal(fk.waits() - w0, 0);
    /* several sources: one wait each */
    cw_stream *srcs[3] = {b, c, d};
    w0 = fk.waits();
    for (int k = 0; k < 3; k++) assert_cw_ok(cw_stream_wait(a, srcs[k]));
    assert_int_equal(fk.waits() - w0, 3);
    /* a foreign source is refused before any wait */
    uint64_t junk[64];
    memset(junk, 0xcd, sizeof junk);
    w0 = fk.waits();
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_wait(a, (cw_stream *)junk));
    assert_int_equal(fk.waits() - w0, 0);
    assert_ptr_equal(current(), g_other);
    /* none of these blocks: with the fake holding all work they return at once */
    fk.hold(1);
    assert_cw_ok(cw_stream_wait(a, b));
    assert_cw(CW_ERROR_NOT_READY, cw_stream_query(b));
    assert_cw_ok(cw_stream_wait(c, a));
    fk.hold(0);
    assert_cw_ok(cw_stream_synchronize(c));
    assert_cw_ok(cw_stream_query(b));
    cw_stream_destroy(&a);
    cw_stream_destroy(&b);
    cw_stream_destroy(&c);
    cw_stream_destroy(&d);
}

static void test_fork_join(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream *parent = new_stream();
    cw_stream *child = NULL;
    long w0 = fk.waits();
    assert_cw_ok(cw_stream_fork(&child, parent));
    assert_non_null(child);
    assert_true(child != parent);
    assert_int_equal(fk.waits() - w0, 1);
    cw_stream_info info;
    assert_cw_ok(cw_stream_get_info(child, &info));
    assert_int_equal(info.from_pool, 1);
    assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);
    /* a forked child is not destroyed by cw_stream_destroy (the caller's
     * pointer is nulled; the child is still joined below) */
    cw_stream *keep = child;
    cw_stream_destroy(&keep);
    assert_null(keep);
    w0 = fk.waits();
    cw_stream *copy = child;
    assert_cw_ok(cw_stream_join(parent, &child));
    assert_null(child);
    assert_int_equal(fk.waits() - w0, 1);
    /* joined twice */
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_join(parent, &copy));
    assert_ptr_equal(current(), g_other);

    /* several children at once are distinct */
    cw_stream *kids[3] = {NULL};
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_fork(&kids[i], parent));
    assert_true(kids[0] != kids[1] && kids[1] != kids[2] && kids[0] != kids[2]);
    for (int i = 0; i < 3; i++) assert_true(kids[i] != parent);
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_join(parent, &kids[i]));

    /* no leak across 100 cycles */
    const long streams = fk.live("stream"), events = fk.live("event");
    for (int i = 0; i < 100; i++) {
        assert_cw_ok(cw_stream_fork(&child, parent));
        assert_true(child != parent);
        assert_cw_ok(cw_stream_join(parent, &child));
        assert_null(child);
    }
    assert_int_equal(fk.live("stream"), streams);
    assert_int_equal(fk.live("event"), events);

    /* a child of a lease pool's stream comes from that pool */
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 0);
    cw_stream *ps = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&ps, p, 0));
    assert_cw_ok(cw_stream_fork(&child, ps));
    expect_stats(p, CW_POOL_LEASE, 2, 2, 0, 0);
    assert_cw_ok(cw_stream_join(ps, &child));
    expect_stats(p, CW_POOL_LEASE, 2, 1, 1, 0);
    /* joining a plain stream as a child is refused */
    cw_stream *other = new_stream();
    keep = other;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_join(parent, &keep));
    assert_ptr_equal(keep, other);
    cw_stream_destroy(&other);
    assert_cw_ok(cw_stream_pool_release(p, &ps));
    cw_stream_pool_destroy(&p);
    /* the context outlives the caller's reference while a child is out */
    assert_cw_ok(cw_stream_fork(&child, parent));
    cw_context_destroy(&g_ctx);
    assert_cw_ok(cw_stream_query(child));
    assert_cw_ok(cw_stream_join(parent, &child));
    cw_stream_destroy(&parent);
    assert_ptr_equal(current(), g_other);
}

/* A join whose ordering fails still gives the child back: *child is NULL,
 * the child is back in its pool (and a child of the context's own pool no
 * longer holds the context), and the status says the parent does not wait
 * for it. Before, the child stayed leased with no call left to give it back
 * (cw_stream_destroy ignores a pool's stream): a join that failed in a C++
 * destructor leaked the stream and the context. */
static void test_join_failure_gives_the_child_back(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream_pool *p = new_pool(CW_POOL_LEASE, 1, 0);
    cw_stream *ps = NULL, *child = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&ps, p, 0));
    assert_cw_ok(cw_stream_fork(&child, ps));
    expect_stats(p, CW_POOL_LEASE, 2, 2, 0, 0);
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_fail(cwi_seam_entry("cuStreamWaitEvent"), 1, 1 /* CUDA_ERROR_INVALID_VALUE */);
    assert_cw(CW_ERROR_DRIVER, cw_stream_join(ps, &child));
    assert_true(cwi_seam_fired());
    cwi_seam_disable();
    assert_string_equal(cw_last_error()->driver_call, "cuStreamWaitEvent");
    assert_non_null(strstr(cw_last_error()->message, "given back"));
    assert_null(child);
    expect_stats(p, CW_POOL_LEASE, 2, 1, 1, 0); /* only ps is out */
    assert_cw_ok(cw_stream_pool_release(p, &ps));
    cw_stream_pool_destroy(&p);

    /* a child of the context's fork pool: the context goes with its last
     * reference once the failed join gave the child back */
    cw_context *c2 = NULL;
    assert_cw_ok(cw_context_create(&c2, 0));
    const long ctxs = fk.live("primary");
    cw_stream_settings ss;
    cw_stream_settings_default(&ss);
    cw_stream *parent = NULL;
    assert_cw_ok(cw_stream_create(&parent, c2, &ss));
    assert_cw_ok(cw_stream_fork(&child, parent));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_fail(cwi_seam_entry("cuStreamWaitEvent"), 1, 1);
    assert_cw(CW_ERROR_DRIVER, cw_stream_join(parent, &child));
    cwi_seam_disable();
    assert_null(child);
    cw_stream_destroy(&parent);
    cw_context_destroy(&c2);
    assert_true(fk.live("primary") < ctxs); /* nothing kept it */
}

/* A buffer dropped on a thread that has a capture open: the free goes on the
 * context's release stream, which is not capturing, but the driver refuses
 * a stream-ordered free from that thread while a GLOBAL or THREAD_LOCAL
 * capture is open, and the refusal invalidates the capture. Before, the
 * buffer stayed allocated until its context went (a warning) and the
 * user's capture was broken (test_gpu_sweep: "1 device memory left" when
 * cuStreamEndCapture failed; the fake now refuses as the driver does). The
 * free is made in relaxed mode: the memory goes back, the capture goes on. */
static void test_buffer_freed_during_own_capture(void **state) {
    (void)state;
    set_current(g_other);
    const cw_capture_mode modes[] = {CW_CAPTURE_GLOBAL, CW_CAPTURE_THREAD_LOCAL};
    for (size_t i = 0; i < 2; i++) {
        cw_stream *s = new_stream(), *u = new_stream();
        cw_buffer *b = NULL;
        const long dev0 = fk.live("devmem");
        assert_cw_ok(cw_buffer_create(&b, u, 256));
        assert_cw_ok(cw_stream_synchronize(u));
        assert_int_equal(fk.live("devmem"), dev0 + 1);
        assert_cw_ok(cw_capture_begin(s, NULL, modes[i]));
        cw_buffer_destroy(&b); /* this thread is capturing */
        cw_graph *g = NULL;
        assert_cw_ok(cw_capture_end(&g, s)); /* not invalidated */
        assert_non_null(g);
        cw_graph_destroy(&g);
        assert_cw_ok(cw_context_synchronize(g_ctx));
        assert_int_equal(fk.live("devmem"), dev0); /* freed */
        cw_stream_destroy(&u);
        cw_stream_destroy(&s);
    }
}

/* ---- futures ---------------------------------------------------------------- */

static const cw_future_kind k_host = CW_FUTURE_HOST_FUNC;
static const cw_future_kind k_write = CW_FUTURE_WRITE_VALUE;
static const cw_future_kind k_event = CW_FUTURE_EVENT;

static cw_future_kind kind_of(void **state) { return *(const cw_future_kind *)*state; }

static void test_future_hold(void **state) {
    const cw_future_kind kind = kind_of(state);
    set_current(g_other);
    cw_stream *s = new_stream();
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_non_null(f);
    assert_ptr_equal(current(), g_other);
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    double t0 = now_ms();
    assert_cw(CW_ERROR_TIMEOUT, cw_future_wait(f, 1000));
    double dt = now_ms() - t0;
    if (dt < 0.9 || dt > 1000) fail_msg("wait(1000 us) returned after %.3f ms", dt);
    assert_cw(CW_ERROR_TIMEOUT, cw_future_wait(f, 0));
    assert_cw(CW_ERROR_NOT_READY, cw_stream_query(s));
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    assert_ptr_equal(current(), g_other);
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    assert_cw_ok(cw_future_poll(f));
    assert_cw_ok(cw_future_wait(f, 0));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_ptr_equal(current(), g_other);
    cw_future_destroy(&f);
    assert_null(f);
    /* a future on work already done completes at once; wait forever works */
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_spin(f, 0));
    assert_cw_ok(cw_future_wait(f, -1));
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

static void test_future_fd(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    int fd = -1, fd2 = -2;
    assert_cw_ok(cw_future_get_fd(f, &fd));
    assert_true(fd >= 0);
    assert_cw_ok(cw_future_get_fd(f, &fd2));
    assert_int_equal(fd, fd2);
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 50), 0); /* not readable while held */
    fk.hold(0);
    pfd.revents = 0;
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    assert_true(pfd.revents & POLLIN);
    assert_cw_ok(cw_future_poll(f));
    cw_future_destroy(&f);
    /* completed before the fd was asked for: readable at once */
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_wait(f, 5000000));
    assert_cw_ok(cw_future_get_fd(f, &fd));
    pfd.fd = fd;
    pfd.revents = 0;
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

/* The waiting policy (docs/threading.md, "How a wait waits"): a wait that
 * completes within the future's spin budget never gives the CPU away, for
 * every kind whose check needs no driver call (a HOST_FUNC future's counter,
 * a WRITE_VALUE future's word); one that lasts past the budget does sleep.
 * Measured by the waiting thread's voluntary context switches
 * (getrusage(RUSAGE_THREAD).ru_nvcsw: a futex wait, a nanosleep or a poll
 * counts one; being preempted while spinning counts as involuntary). The
 * marker is held by the fake, released 20 ms after the waiter has started.
 * (An EVENT future's check is cuEventQuery, which takes the fake's lock and
 * may sleep on it: not countable here.) */
struct spin_waiter {
    cw_future *f;
    atomic_int started;
    long nvcsw; /* voluntary switches during the wait */
    double waited_ms;
    cw_status st;
    int64_t timeout_us; /* 0: 10 s */
};

static void *spin_waiter_main(void *arg) {
    struct spin_waiter *w = (struct spin_waiter *)arg;
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    atomic_store(&w->started, 1);
    const double t0 = now_ms();
    w->st = cw_future_wait(w->f, w->timeout_us ? w->timeout_us : 10000000);
    w->waited_ms = now_ms() - t0;
    getrusage(RUSAGE_THREAD, &after);
    w->nvcsw = after.ru_nvcsw - before.ru_nvcsw;
    return NULL;
}

/* Waits on f (timeout_us 0: 10 s) from another thread while its marker is held for 20 ms. */
static struct spin_waiter wait_held_for(cw_future *f, int64_t timeout_us) {
    struct spin_waiter w;
    memset(&w, 0, sizeof w);
    w.f = f;
    w.timeout_us = timeout_us;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, spin_waiter_main, &w), 0);
    while (!atomic_load(&w.started)) sched_yield();
    sleep_ms(20);
    fk.hold(0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return w;
}

static struct spin_waiter wait_held(cw_future *f) { return wait_held_for(f, 0); }

/* An EVENT future takes its marker event from the context's pool, as the
 * stream calls do: no event is made per future. A future with an event of
 * its own made with CU_EVENT_BLOCKING_SYNC cost its launch + rearm + wait
 * about 1.1 us more at p50 on the H100 (bench_completion: EVENT future / raw
 * event 1.13x, from 1.01x) and bench_vmaf's pipelined fps at 576x324 fell
 * to 0.83 of the raw design's. */
static void test_future_event_takes_pool_event(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    cw_future *f = NULL;
    /* warm the pool: a future made and destroyed gives its event back */
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_EVENT));
    assert_cw_ok(cw_future_wait(f, -1));
    cw_future_destroy(&f);
    const long created0 = fk.calls("cuEventCreate"), destroyed0 = fk.calls("cuEventDestroy");
    for (int i = 0; i < 3; i++) {
        assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_EVENT));
        assert_cw_ok(cw_future_rearm(f, s));
        assert_cw_ok(cw_future_wait(f, -1));
        cw_future_destroy(&f);
    }
    assert_int_equal(fk.calls("cuEventCreate") - created0, 0);
    assert_int_equal(fk.calls("cuEventDestroy") - destroyed0, 0);
    cw_stream_destroy(&s);
}

/* An EVENT wait with no limit, past its spin, waits as the context's
 * scheduling flags say. On a context made with CU_CTX_SCHED_BLOCKING_SYNC
 * (FFmpeg's CUDA device context is) it sleeps in cuEventSynchronize, woken
 * by the GPU's completion as a hand-written cuEventSynchronize there is;
 * polling with sleeps grown to 1 ms returned a 2 ms wait 0.9 ms late on the
 * H100 (bench_ffmpeg's ADR case). On other contexts it polls with growing
 * sleeps (cuEventSynchronize would spin there). A wait with a limit always
 * polls (the driver's wait has no limit). */
/* An EVENT future's wait makes the driver calls the raw wait does: one
 * cuEventQuery for a completed marker, queries only while it spins, and no
 * context switch or lookup (the query needs no current context). Where a
 * driver refuses the query without the event's context current, the wait
 * makes it current, asks again, and gives the caller's context back. */
static void test_future_event_wait_calls(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_EVENT));
    assert_true(fk.drain(5000));
    long get0 = fk.calls("cuCtxGetCurrent"), set0 = fk.calls("cuCtxSetCurrent"), q0 = fk.calls("cuEventQuery");
    assert_cw_ok(cw_future_wait(f, 5000000));
    long gets = fk.calls("cuCtxGetCurrent") - get0, sets = fk.calls("cuCtxSetCurrent") - set0,
         queries = fk.calls("cuEventQuery") - q0;
    if (gets || sets || queries != 1)
        fail_msg("waiting for a completed EVENT future made %ld cuEventQuery, %ld cuCtxGetCurrent and %ld "
                 "cuCtxSetCurrent calls; expected 1, 0, 0",
                 queries, gets, sets);
    /* a wait that spins */
    fk.hold(1);
    assert_cw_ok(cw_future_rearm(f, s));
    get0 = fk.calls("cuCtxGetCurrent");
    set0 = fk.calls("cuCtxSetCurrent");
    q0 = fk.calls("cuEventQuery");
    struct spin_waiter w = wait_held_for(f, 5000000);
    assert_cw_ok(w.st);
    gets = fk.calls("cuCtxGetCurrent") - get0;
    sets = fk.calls("cuCtxSetCurrent") - set0;
    queries = fk.calls("cuEventQuery") - q0;
    if (gets || sets)
        fail_msg("a %.1f ms EVENT wait made %ld cuCtxGetCurrent and %ld cuCtxSetCurrent calls; expected none",
                 w.waited_ms, gets, sets);
    assert_true(queries >= 2);
    /* a driver that wants the event's context current: another one is */
    CUcontext mine = NULL, other = fk.other_context();
    assert_cu_ok(fk.cuCtxGetCurrent(&mine));
    fk.event_query_needs_context(1);
    fk.hold(1);
    assert_cw_ok(cw_future_rearm(f, s));
    assert_cu_ok(fk.cuCtxSetCurrent(other));
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    CUcontext now = NULL;
    assert_cu_ok(fk.cuCtxGetCurrent(&now));
    assert_ptr_equal(now, other);
    w = wait_held_for(f, 5000000);
    assert_cw_ok(w.st);
    assert_cu_ok(fk.cuCtxGetCurrent(&now));
    assert_ptr_equal(now, other);
    assert_cw_ok(cw_future_poll(f));
    fk.event_query_needs_context(0);
    assert_cu_ok(fk.cuCtxSetCurrent(mine));
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

static void test_future_event_wait_follows_context_sched(void **state) {
    (void)state;
    CUcontext other = fk.other_context();
    fk.set_context_flags(other, CU_CTX_SCHED_BLOCKING_SYNC);
    cw_context *ext = NULL;
    assert_cw_ok(cw_context_wrap(&ext, other));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ext, NULL));
    cw_future *f = NULL;
    fk.hold(1);
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_EVENT));
    assert_cw_ok(cw_future_set_spin(f, 0));
    long sync0 = fk.calls("cuEventSynchronize"), query0 = fk.calls("cuEventQuery");
    struct spin_waiter w = wait_held_for(f, -1);
    assert_cw_ok(w.st);
    if (w.waited_ms < 5.0) fail_msg("the wait returned after %.3f ms: it did not wait for the held marker", w.waited_ms);
    long syncs = fk.calls("cuEventSynchronize") - sync0, queries = fk.calls("cuEventQuery") - query0;
    if (syncs != 1)
        fail_msg("a %.1f ms wait with no limit on a BLOCKING_SYNC context made %ld cuEventSynchronize calls, "
                 "expected 1 (and %ld cuEventQuery calls)",
                 w.waited_ms, syncs, queries);
    /* one query before the driver's wait (spin 0); polling made some 15 in 20 ms */
    if (queries > 2) fail_msg("a %.1f ms wait with no limit made %ld cuEventQuery calls: it polled", w.waited_ms, queries);
    /* with a limit: polls (no driver wait), and still completes */
    fk.hold(1);
    assert_cw_ok(cw_future_rearm(f, s));
    sync0 = fk.calls("cuEventSynchronize");
    query0 = fk.calls("cuEventQuery");
    w = wait_held_for(f, 5000000);
    assert_cw_ok(w.st);
    assert_int_equal(fk.calls("cuEventSynchronize") - sync0, 0);
    if (fk.calls("cuEventQuery") - query0 < 3)
        fail_msg("a %.1f ms wait with a limit made %ld cuEventQuery calls: expected it to poll", w.waited_ms,
                 fk.calls("cuEventQuery") - query0);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    cw_context_destroy(&ext);
    fk.set_context_flags(other, 0);

    /* the primary context, default flags: polls past the spin, no driver wait */
    s = new_stream();
    fk.hold(1);
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_EVENT));
    assert_cw_ok(cw_future_set_spin(f, 0));
    sync0 = fk.calls("cuEventSynchronize");
    query0 = fk.calls("cuEventQuery");
    w = wait_held_for(f, -1);
    assert_cw_ok(w.st);
    assert_int_equal(fk.calls("cuEventSynchronize") - sync0, 0);
    if (fk.calls("cuEventQuery") - query0 < 3)
        fail_msg("a %.1f ms wait with no limit on a default context made %ld cuEventQuery calls: expected it to poll",
                 w.waited_ms, fk.calls("cuEventQuery") - query0);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

static void test_future_wait_spins_within_budget(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    cw_future *f = NULL;
    /* within the budget: a 20 ms wait under a 5 s spin never sleeps */
    fk.hold(1);
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_spin(f, 5000000));
    struct spin_waiter w = wait_held(f);
    assert_cw_ok(w.st);
    if (w.waited_ms < 5.0) fail_msg("the wait returned after %.3f ms: it did not wait for the held marker", w.waited_ms);
    /* valgrind runs one thread at a time, handing the CPU over through a
     * lock: a spinning thread waits on that lock for the fake's callback
     * thread to run (a voluntary switch that is valgrind's, not the wait's) */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        print_message("# under valgrind: %ld voluntary switches in the spin, not judged\n", w.nvcsw);
    else if (w.nvcsw != 0)
        fail_msg("a wait of %.1f ms within a 5 s spin budget gave the CPU away %ld times (slept instead of spinning)",
                 w.waited_ms, w.nvcsw);
    assert_cw_ok(cw_future_poll(f));
    /* past the budget (spin 0): the same wait sleeps, it does not burn the CPU */
    fk.hold(1);
    assert_cw_ok(cw_future_rearm(f, s));
    assert_cw_ok(cw_future_set_spin(f, 0));
    w = wait_held(f);
    assert_cw_ok(w.st);
    if (w.waited_ms < 5.0) fail_msg("the wait returned after %.3f ms: it did not wait for the held marker", w.waited_ms);
    if (w.nvcsw < 1) fail_msg("a wait of %.1f ms with spin 0 never slept", w.waited_ms);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

struct cb_record {
    atomic_int calls;
    cw_status status;
    cw_status poll_status;
    pthread_t thread;
    cw_future *future;
    int sleep_ms;
};

static void record_cb(void *user, cw_future *f, cw_status st) {
    struct cb_record *r = (struct cb_record *)user;
    r->status = st;
    r->thread = pthread_self();
    r->future = f;
    r->poll_status = cw_future_poll(f);
    if (r->sleep_ms) sleep_ms(r->sleep_ms);
    atomic_fetch_add(&r->calls, 1);
}

static int wait_calls(struct cb_record *r, int n, int ms) {
    for (double end = now_ms() + ms; now_ms() < end;) {
        if (atomic_load(&r->calls) >= n) return 1;
        sleep_ms(1);
    }
    return atomic_load(&r->calls) >= n;
}

static void test_future_callback(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    struct cb_record rec;
    memset(&rec, 0, sizeof rec);
    rec.status = CW_ERROR_INTERNAL;
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_callback(f, record_cb, &rec));
    assert_cw(CW_ERROR_INVALID_STATE, cw_future_set_callback(f, record_cb, &rec));
    sleep_ms(20);
    assert_int_equal(atomic_load(&rec.calls), 0);
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    assert_true(wait_calls(&rec, 1, 5000));
    sleep_ms(30);
    assert_int_equal(atomic_load(&rec.calls), 1); /* exactly once */
    assert_int_equal(rec.status, CW_SUCCESS);
    assert_int_equal(rec.poll_status, CW_SUCCESS);
    assert_ptr_equal(rec.future, f);
    assert_false(pthread_equal(rec.thread, pthread_self()));
    cw_future_destroy(&f);

    /* set after completion: runs now, on this thread, before the call returns */
    memset(&rec, 0, sizeof rec);
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_wait(f, 5000000));
    assert_true(fk.drain(5000));
    assert_cw_ok(cw_future_set_callback(f, record_cb, &rec));
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_true(pthread_equal(rec.thread, pthread_self()));
    assert_int_equal(rec.status, CW_SUCCESS);
    sleep_ms(20);
    assert_int_equal(atomic_load(&rec.calls), 1);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

/* The watcher thread (callbacks and fds of WRITE_VALUE and EVENT futures)
 * polls with sleeps that start at 2 us: they must be 2 us, not the default
 * timer slack of 50 us that Linux adds to every sleep of a thread (which
 * made the watcher's first look come some 50 us after it started watching,
 * whatever the work took). The callback runs on the watcher thread and reads
 * its timer slack there. */
struct slack_record {
    atomic_int calls;
    long slack_ns;
    pthread_t thread;
};

static void slack_cb(void *user, cw_future *f, cw_status st) {
    (void)f;
    (void)st;
    struct slack_record *r = (struct slack_record *)user;
    r->slack_ns = (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    r->thread = pthread_self();
    atomic_store(&r->calls, 1);
}

static void test_watcher_timer_slack(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    struct slack_record rec;
    memset(&rec, 0, sizeof rec);
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_callback(f, slack_cb, &rec));
    sleep_ms(5);
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    for (int i = 0; i < 5000 && !atomic_load(&rec.calls); i++) sleep_ms(1);
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_false(pthread_equal(rec.thread, pthread_self())); /* on the watcher thread */
    if (rec.slack_ns > 1000)
        fail_msg("the watcher thread's timer slack is %ld ns: each of its 2 us sleeps lasts that much longer",
                 rec.slack_ns);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
}

/* A future watched while the watcher polls slowly (another watched future
 * has been pending long enough for its sleeps to grow to 1 ms) is looked at
 * at once, and the polls start short again: the watcher is woken by the new
 * watch, not left to finish a 1 ms sleep (which made a callback or an fd of
 * a fast future up to a millisecond late whenever a slow one was watched
 * too). */
static void test_watcher_woken_by_new_watch(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    struct cb_record slow, fast;
    memset(&slow, 0, sizeof slow);
    memset(&fast, 0, sizeof fast);
    fk.hold(1);
    cw_future *a = NULL, *b = NULL;
    assert_cw_ok(cw_future_create(&a, s, kind));
    assert_cw_ok(cw_future_set_callback(a, record_cb, &slow));
    sleep_ms(30); /* the watcher's polls of a have grown to 1 ms */
    const unsigned long w0 = cwi_future_watcher_wakes();
    assert_cw_ok(cw_future_create(&b, s, kind));
    assert_cw_ok(cw_future_set_callback(b, record_cb, &fast));
    unsigned long w1 = w0;
    for (int i = 0; i < 200 && w1 == w0; i++) {
        sleep_ms(1);
        w1 = cwi_future_watcher_wakes();
    }
    if (w1 == w0) fail_msg("the watcher was not woken by a newly watched future (it finished its long sleep)");
    fk.hold(0);
    assert_true(wait_calls(&slow, 1, 5000));
    assert_true(wait_calls(&fast, 1, 5000));
    assert_int_equal(fast.status, CW_SUCCESS);
    assert_false(pthread_equal(fast.thread, pthread_self()));
    cw_future_destroy(&a);
    cw_future_destroy(&b);
    cw_stream_destroy(&s);
}

static void test_future_rearm(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream(), *s2 = new_stream();
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw(CW_ERROR_INVALID_STATE, cw_future_rearm(f, s));
    assert_detail("cw_future_rearm");
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    assert_true(fk.drain(5000));
    int fd = -1;
    assert_cw_ok(cw_future_get_fd(f, &fd));
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    struct cb_record rec;
    memset(&rec, 0, sizeof rec);
    assert_cw_ok(cw_future_set_callback(f, record_cb, &rec)); /* runs now */
    assert_int_equal(atomic_load(&rec.calls), 1);

    for (int round = 0; round < 3; round++) {
        cw_stream *on = round & 1 ? s : s2;
        fk.hold(1);
        assert_cw_ok(cw_future_rearm(f, on));
        assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
        assert_cw(CW_ERROR_INVALID_STATE, cw_future_rearm(f, on)); /* not completed yet */
        pfd.revents = 0;
        assert_int_equal(poll(&pfd, 1, 20), 0); /* the fd was reset */
        /* the callback must be set again */
        memset(&rec, 0, sizeof rec);
        assert_cw_ok(cw_future_set_callback(f, record_cb, &rec));
        fk.hold(0);
        assert_cw_ok(cw_future_wait(f, 5000000));
        pfd.revents = 0;
        assert_int_equal(poll(&pfd, 1, 5000), 1);
        assert_true(wait_calls(&rec, 1, 5000));
        assert_true(fk.drain(5000));
        assert_int_equal(atomic_load(&rec.calls), 1);
        assert_int_equal(rec.status, CW_SUCCESS);
    }
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    cw_stream_destroy(&s2);
}

/* After cw_future_wait returned CW_SUCCESS the future has completed, so
 * cw_future_rearm must be accepted at once, even while the completion
 * callback (here a slow one) is still running. */
static void test_future_rearm_right_after_wait(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    struct cb_record rec;
    memset(&rec, 0, sizeof rec);
    rec.sleep_ms = 150;
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_callback(f, record_cb, &rec));
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    const cw_status st = cw_future_rearm(f, s);
    char detail[300];
    snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
    /* the first completion's callback runs exactly once, rearm or not */
    const int cb_ran = wait_calls(&rec, 1, 3000);
    const cw_status second = st == CW_SUCCESS ? cw_future_wait(f, 5000000) : CW_SUCCESS;
    fk.drain(5000);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    if (st != CW_SUCCESS)
        fail_msg("cw_future_rearm right after a successful wait returned %s: %s", cw_status_name(st), detail);
    if (!cb_ran)
        fail_msg("the callback of the completion that wait() reported never ran (cw_future_rearm dropped it)");
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_int_equal(rec.status, CW_SUCCESS);
    assert_int_equal(second, CW_SUCCESS);
}

static void test_future_fault(void **state) {
    const cw_future_kind kind = kind_of(state);
    set_current(g_other);
    cw_stream *s = new_stream();
    fk.fault(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    double t0 = now_ms();
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_wait(f, 500000));
    assert_true(now_ms() - t0 < 2000);
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_poll(f));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_wait(f, -1)); /* must not hang */
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_stream_query(s));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_stream_synchronize(s));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_context_synchronize(g_ctx));
    assert_ptr_equal(current(), g_other);
    /* a callback set now reports the fault, not success */
    struct cb_record rec;
    memset(&rec, 0, sizeof rec);
    rec.status = CW_SUCCESS;
    cw_status cbst = cw_future_set_callback(f, record_cb, &rec);
    if (cbst == CW_SUCCESS && wait_calls(&rec, 1, 2000)) assert_int_not_equal(rec.status, CW_SUCCESS);
    if (kind == CW_FUTURE_HOST_FUNC) {
        /* documented: its memory (and context reference) stays behind */
        if (g_kept_count < 16) g_kept[g_kept_count++] = f;
        g_known_leak = 1;
    }
    t0 = now_ms();
    cw_future_destroy(&f);
    assert_null(f);
    assert_true(now_ms() - t0 < 5000);
    fk.fault(0);
    cw_stream_destroy(&s);
}

/* ---- issue 25: huge timeouts, the driver's callback thread, a destroyed
 * written-value future's slot -------------------------------------------- */

/* Timeouts that are too large to represent as a clock reading: INT64_MAX,
 * the first value whose microseconds overflow as nanoseconds, the last that
 * does not (its sum with the clock does), and two more. */
static const int64_t k_huge_us[] = {INT64_MAX, INT64_MAX / 1000 + 1, INT64_MAX / 1000, INT64_MAX / 2,
                                    (int64_t)10000000000000000};
#define N_HUGE ((int)(sizeof k_huge_us / sizeof k_huge_us[0]))

struct huge_wait {
    cw_future *f;
    int64_t timeout_us;
    cw_status st;
    char detail[256];
    atomic_int returned;
};

static void *huge_wait_main(void *arg) {
    struct huge_wait *w = (struct huge_wait *)arg;
    w->st = cw_future_wait(w->f, w->timeout_us);
    snprintf(w->detail, sizeof w->detail, "%s", cw_last_error()->message);
    atomic_store(&w->returned, 1);
    return NULL;
}

/* A timeout too large to represent means no limit: waits with each huge
 * timeout, on threads, on a marker the fake holds back, are all still
 * waiting when the marker is released, and then succeed (observed by state:
 * none has returned when the test releases the marker). */
static void test_future_wait_huge_timeout(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_set_spin(f, 10)); /* to the sleeping part soon */
    struct huge_wait w[N_HUGE];
    pthread_t t[N_HUGE];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N_HUGE; i++) {
        w[i].f = f;
        w[i].timeout_us = k_huge_us[i];
        w[i].st = CW_ERROR_INTERNAL;
        assert_int_equal(pthread_create(&t[i], NULL, huge_wait_main, &w[i]), 0);
    }
    sleep_ms(100); /* a wait that would end early has ended by now */
    int early = -1;
    for (int i = 0; i < N_HUGE && early < 0; i++)
        if (atomic_load(&w[i].returned)) early = i;
    fk.hold(0);
    for (int i = 0; i < N_HUGE; i++) pthread_join(t[i], NULL);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    if (early >= 0)
        fail_msg("cw_future_wait(f, %lld) returned %s while the marker was held: %s", (long long)w[early].timeout_us,
                 cw_status_name(w[early].st), w[early].detail);
    for (int i = 0; i < N_HUGE; i++)
        if (w[i].st != CW_SUCCESS)
            fail_msg("cw_future_wait(f, %lld) returned %s after the release: %s", (long long)w[i].timeout_us,
                     cw_status_name(w[i].st), w[i].detail);
}

/* What a HOST_FUNC future's callback saw of other futures. */
/* The window between a HOST_FUNC future's completion being stored and its
 * host function running the callback: the watcher (watching the future for
 * a fault) sees it complete there. The callback must still run once, on the
 * driver's callback thread, as cw_future_set_callback promises; the watcher
 * delivers a host-function future only on a fault. */
struct hf_window {
    cw_future *f;
    pthread_t host_thread;
    atomic_int entered;
    int watcher_dropped; /* the watcher took the completed future off its list in the window */
};

static void hold_window_open(void *arg) {
    struct hf_window *w = (struct hf_window *)arg;
    w->host_thread = pthread_self();
    atomic_store(&w->entered, 1);
    /* the watcher passes at least once a millisecond while it watches */
    for (double end = now_ms() + 2000; cwi_future_watched(w->f) == 1 && now_ms() < end;) sleep_ms(1);
    w->watcher_dropped = cwi_future_watched(w->f) == 0;
}

static void test_future_host_func_callback_on_callback_thread(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    struct hf_window w;
    memset(&w, 0, sizeof w);
    struct cb_record rec;
    memset(&rec, 0, sizeof rec);
    fk.hold(1);
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_HOST_FUNC));
    assert_cw_ok(cw_future_set_callback(f, record_cb, &rec)); /* watched (for a fault) from here */
    assert_int_equal(cwi_future_watched(f), 1);
    w.f = f;
    cwi_future_host_fn_hook(hold_window_open, &w);
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 5000000));
    const int ran = wait_calls(&rec, 1, 5000);
    assert_true(fk.drain(5000));
    cwi_future_host_fn_hook(NULL, NULL);
    sleep_ms(20);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    assert_true(atomic_load(&w.entered));
    assert_true(w.watcher_dropped); /* the watcher saw the future complete in the window */
    assert_true(ran);
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_int_equal(rec.status, CW_SUCCESS);
    if (!pthread_equal(rec.thread, w.host_thread))
        fail_msg("the HOST_FUNC future's callback ran on another thread than the driver's callback thread");
}

struct probe {
    cw_stream *s;
    cw_future *ev, *wv;
    unsigned long seam_calls; /* driver calls the callback made (the seam, its thread) */
    long fake_calls;          /* the fake's count of calls from its callback thread */
    cw_status poll_ev, poll_wv, wait_ev, wait_wv, set_cb_ev, get_fd_ev, rearm_wv;
    char poll_ev_detail[300];
    int fd;
    struct cb_record ev_rec;
    atomic_int done;
};

static void probe_cb(void *user, cw_future *f, cw_status st) {
    struct probe *p = (struct probe *)user;
    (void)f;
    (void)st;
    const unsigned long c0 = cwi_seam_thread_calls();
    const long k0 = fk.live("cbcalls");
    p->poll_ev = cw_future_poll(p->ev);
    snprintf(p->poll_ev_detail, sizeof p->poll_ev_detail, "%s", cw_last_error()->message);
    p->poll_wv = cw_future_poll(p->wv);
    p->wait_ev = cw_future_wait(p->ev, 0);
    p->wait_wv = cw_future_wait(p->wv, 1000);
    p->set_cb_ev = cw_future_set_callback(p->ev, record_cb, &p->ev_rec);
    p->get_fd_ev = cw_future_get_fd(p->ev, &p->fd);
    p->rearm_wv = cw_future_rearm(p->wv, p->s);
    p->seam_calls = cwi_seam_thread_calls() - c0;
    p->fake_calls = fk.live("cbcalls") - k0;
    atomic_store(&p->done, 1);
}

/* Inside a HOST_FUNC future's callback (the driver's callback thread, where
 * CUDA allows no call: the fake refuses them with CUDA_ERROR_NOT_PERMITTED)
 * cuweave makes no driver call. Polling an EVENT future there needs
 * cuEventQuery, so it is refused with CW_ERROR_NOT_PERMITTED, and that
 * refusal is not remembered: the EVENT future completes, rearms and
 * completes again. A WRITE_VALUE future answers from its word; waiting and
 * rearming are refused; a callback and an fd set there on the EVENT future
 * are served by the watcher thread. */
static void test_future_no_driver_calls_in_callback(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    struct probe p;
    memset(&p, 0, sizeof p);
    p.s = s;
    p.fd = -1;
    p.ev_rec.status = CW_ERROR_INTERNAL;
    fk.hold(1);
    cw_future *hf = NULL;
    assert_cw_ok(cw_future_create(&p.ev, s, CW_FUTURE_EVENT)); /* reached before hf's callback runs */
    assert_cw_ok(cw_future_create(&hf, s, CW_FUTURE_HOST_FUNC));
    assert_cw_ok(cw_future_create(&p.wv, s, CW_FUTURE_WRITE_VALUE)); /* reached after it */
    assert_cw_ok(cw_future_set_callback(hf, probe_cb, &p));
    fk.hold(0);
    for (double end = now_ms() + 5000; !atomic_load(&p.done) && now_ms() < end;) sleep_ms(1);
    const int ran = atomic_load(&p.done);
    assert_cw_ok(cw_future_wait(hf, 5000000));
    /* the EVENT future is as good as before: complete, rearmed, complete */
    const cw_status ev_wait = cw_future_wait(p.ev, 5000000);
    char ev_detail[300];
    snprintf(ev_detail, sizeof ev_detail, "%s", cw_last_error()->message);
    const int ev_cb_ran = wait_calls(&p.ev_rec, 1, 5000);
    const cw_status ev_rearm = cw_future_rearm(p.ev, s);
    char rearm_detail[300];
    snprintf(rearm_detail, sizeof rearm_detail, "%s", cw_last_error()->message);
    const cw_status ev_again = ev_rearm == CW_SUCCESS ? cw_future_wait(p.ev, 5000000) : ev_rearm;
    struct pollfd pfd = {p.fd, POLLIN, 0};
    const int fd_ready = p.fd >= 0 && poll(&pfd, 1, 5000) == 1;
    assert_cw_ok(cw_future_wait(p.wv, 5000000));
    assert_true(fk.drain(5000));
    cw_future_destroy(&hf);
    cw_future_destroy(&p.ev);
    cw_future_destroy(&p.wv);
    cwi_seam_disable();
    cw_stream_destroy(&s);
    if (!ran) fail_msg("the HOST_FUNC future's callback never ran");
    printf("# in the callback: poll(EVENT) %s (%s); %lu driver calls (seam), %ld (fake)\n",
           cw_status_name(p.poll_ev), p.poll_ev_detail, p.seam_calls, p.fake_calls);
    printf("# afterwards: wait(EVENT) %s%s%s; rearm + wait %s%s%s\n", cw_status_name(ev_wait),
           ev_wait ? ": " : "", ev_wait ? ev_detail : "", cw_status_name(ev_again), ev_again ? ": " : "",
           ev_again ? rearm_detail : "");
    if (p.seam_calls != 0 || p.fake_calls != 0)
        fail_msg("the callback made %lu driver calls (seam; the fake counted %ld) on the driver's callback thread",
                 p.seam_calls, p.fake_calls);
    if (ev_wait != CW_SUCCESS)
        fail_msg("the EVENT future polled in the callback later waited with %s: %s", cw_status_name(ev_wait),
                 ev_detail);
    if (ev_again != CW_SUCCESS)
        fail_msg("the EVENT future polled in the callback could not be rearmed: %s: %s", cw_status_name(ev_again),
                 rearm_detail);
    assert_int_equal(p.poll_ev, CW_ERROR_NOT_PERMITTED);
    assert_non_null(strstr(p.poll_ev_detail, "callback"));
    assert_int_equal(p.poll_wv, CW_ERROR_NOT_READY);
    assert_int_equal(p.wait_ev, CW_ERROR_NOT_PERMITTED);
    assert_int_equal(p.wait_wv, CW_ERROR_NOT_PERMITTED);
    assert_int_equal(p.rearm_wv, CW_ERROR_NOT_PERMITTED);
    assert_int_equal(p.set_cb_ev, CW_SUCCESS);
    assert_int_equal(p.get_fd_ev, CW_SUCCESS);
    assert_true(ev_cb_ran);
    assert_int_equal(atomic_load(&p.ev_rec.calls), 1);
    assert_int_equal(p.ev_rec.status, CW_SUCCESS);
    assert_false(pthread_equal(p.ev_rec.thread, pthread_self()));
    assert_true(fd_ready);
}

struct destroyer {
    cw_future *f;
    atomic_int done;
};

static void *destroy_main(void *arg) {
    struct destroyer *d = (struct destroyer *)arg;
    cw_future_destroy(&d->f);
    atomic_store(&d->done, 1);
    return NULL;
}

/* A mapped pinned word a stream can wait on (cuStreamWaitValue32), made in
 * the primary context; the caller's thread is left with g_other current, as
 * the tests that use it run. */
static volatile uint32_t *gate_new(void) {
    volatile uint32_t *gate = NULL;
    set_current(g_primary);
    assert_cu_ok(fk.cuMemHostAlloc((void **)&gate, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    set_current(g_other);
    return gate;
}

static void gate_free(volatile uint32_t *gate) {
    set_current(g_primary);
    assert_cu_ok(fk.cuMemFreeHost((void *)gate));
    set_current(g_other);
}

/* A future watched again (an fd asked for, here) while the watcher is about
 * to notify it: its link on the watcher's list of futures to notify must
 * not become its link on the list of watched ones, else the watcher goes on
 * to notify the watched futures after it, which have not completed. A is
 * held until a helper thread releases the fake's hold; B stays behind a
 * gate the test opens at the end. The hooks hold the window open: the
 * watcher pauses after the pass that found A complete, until A's watch has
 * linked it again. */
struct rewatch {
    atomic_int watcher_paused, release, entered;
};

static void rewatch_ready(void *arg) {
    struct rewatch *w = (struct rewatch *)arg;
    atomic_store(&w->watcher_paused, 1);
    for (double end = now_ms() + 2000; !atomic_load(&w->release) && now_ms() < end;) sleep_ms(1);
}

static void rewatch_entry(void *arg) {
    struct rewatch *w = (struct rewatch *)arg;
    if (atomic_fetch_add(&w->entered, 1) != 0) return; /* only the test's get_fd waits */
    for (double end = now_ms() + 2000; !atomic_load(&w->watcher_paused) && now_ms() < end;) sleep_ms(1);
}

static void *release_hold_main(void *arg) {
    (void)arg;
    sleep_ms(20);
    fk.hold(0);
    return NULL;
}

static void test_future_rewatched_while_notified(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream *s = new_stream(), *s2 = new_stream();
    volatile uint32_t *gate = gate_new();
    cw_future *a = NULL, *b = NULL;
    struct cb_record rb, ra;
    memset(&rb, 0, sizeof rb);
    memset(&ra, 0, sizeof ra);
    /* A: held, watched (its callback) */
    fk.hold(1);
    assert_cw_ok(cw_future_create(&a, s, CW_FUTURE_WRITE_VALUE));
    assert_cw_ok(cw_future_set_callback(a, record_cb, &ra));
    /* B: behind the gate (queued after A: the fake runs the streams' work in
     * the order it was queued), watched after A, so first on the list */
    assert_cu_ok(fk.cuStreamWaitValue32(handle_of(s2), (CUdeviceptr)(uintptr_t)gate, 1, CU_STREAM_WAIT_VALUE_EQ));
    assert_cw_ok(cw_future_create(&b, s2, CW_FUTURE_WRITE_VALUE));
    assert_cw_ok(cw_future_set_callback(b, record_cb, &rb));
    struct rewatch w;
    memset(&w, 0, sizeof w);
    cwi_future_watch_hooks(rewatch_ready, rewatch_entry, &w);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_hold_main, NULL), 0);
    int fd = -1;
    /* A is not complete yet: get_fd watches it, and waits (entry hook) until
     * the watcher has found it complete and paused before notifying it */
    assert_cw_ok(cw_future_get_fd(a, &fd));
    atomic_store(&w.release, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    const int a_ran = wait_calls(&ra, 1, 5000);
    sleep_ms(30); /* time for a wrong notification of B */
    const int b_early = atomic_load(&rb.calls);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    const int paused = atomic_load(&w.watcher_paused);
    __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
    assert_cw_ok(cw_future_wait(b, 5000000));
    const int b_ran = wait_calls(&rb, 1, 5000);
    struct pollfd pfd = {fd, POLLIN, 0};
    const int fd_ready = poll(&pfd, 1, 5000) == 1;
    cw_future_destroy(&a);
    cw_future_destroy(&b);
    assert_true(fk.drain(5000));
    gate_free(gate);
    cw_stream_destroy(&s);
    cw_stream_destroy(&s2);
    assert_true(paused); /* the watcher did find A complete in the window */
    assert_true(a_ran);
    assert_true(fd_ready);
    if (b_early)
        fail_msg("B's callback ran %d time(s) while B's marker was still behind its gate: the watcher notified "
                 "a future that had not completed",
                 b_early);
    assert_true(b_ran);
    assert_int_equal(atomic_load(&ra.calls), 1);
    assert_int_equal(atomic_load(&rb.calls), 1);
    assert_int_equal(rb.status, CW_SUCCESS);
}

/* A cuEventQuery error that is not a device fault (here
 * CUDA_ERROR_NOT_PERMITTED, injected) while a WRITE_VALUE future is
 * destroyed with its marker still queued must not hand its word's slot to
 * the next future: the old marker would then write the slot under the new
 * future, which would report completion while its own work is still held. */
static void test_future_destroy_query_error(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream *s = new_stream(), *s2 = new_stream();
    volatile uint32_t *gate = gate_new();
    fk.hold(1);
    struct destroyer d;
    memset(&d, 0, sizeof d);
    assert_cw_ok(cw_future_create(&d.f, s, CW_FUTURE_WRITE_VALUE));
    volatile unsigned *old_word = NULL;
    unsigned armed = 0;
    assert_int_equal(cwi_future_word(d.f, &old_word, &armed), 0);
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_fail(cwi_seam_entry("cuEventQuery"), 1, 800 /* CUDA_ERROR_NOT_PERMITTED */);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, destroy_main, &d), 0);
    for (double end = now_ms() + 5000; !cwi_seam_fired() && now_ms() < end;) sleep_ms(1);
    assert_true(cwi_seam_fired());
    /* a destroy that takes the error for a fault returns now; one that waits
     * for the marker returns once it is released */
    for (double end = now_ms() + 200; !atomic_load(&d.done) && now_ms() < end;) sleep_ms(1);
    /* the new future's marker is held on s2 behind a gate the test opens */
    assert_cu_ok(fk.cuStreamWaitValue32(handle_of(s2), (CUdeviceptr)(uintptr_t)gate, 1, CU_STREAM_WAIT_VALUE_EQ));
    cw_future *nf = NULL;
    assert_cw_ok(cw_future_create(&nf, s2, CW_FUTURE_WRITE_VALUE));
    volatile unsigned *new_word = NULL;
    assert_int_equal(cwi_future_word(nf, &new_word, &armed), 0);
    fk.hold(0); /* the old marker runs; the gate holds the new one */
    pthread_join(t, NULL);
    cw_status qs = CW_ERROR_NOT_READY;
    for (double end = now_ms() + 5000; (qs = cw_stream_query(s)) == CW_ERROR_NOT_READY && now_ms() < end;)
        sleep_ms(1);
    const cw_status early = cw_future_poll(nf);
    __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
    assert_cw_ok(cw_future_wait(nf, 5000000));
    cw_future_destroy(&nf);
    cwi_seam_disable();
    assert_true(fk.drain(5000));
    gate_free(gate);
    cw_stream_destroy(&s);
    cw_stream_destroy(&s2);
    assert_int_equal(qs, CW_SUCCESS);
    if (early != CW_ERROR_NOT_READY)
        fail_msg("the new WRITE_VALUE future (%s the destroyed one's slot) reported %s while its marker was still "
                 "held: the destroyed future's marker completed it",
                 new_word == old_word ? "given" : "not given", cw_status_name(early));
}

static void test_when_all(void **state) {
    const cw_future_kind kind = kind_of(state);
    set_current(g_other);
    cw_stream *s[3] = {new_stream(), new_stream(), new_stream()};
    /* a gate on each stream: a stream-side wait for a host word the test sets */
    volatile uint32_t *gate = gate_new();
    for (int i = 0; i < 3; i++)
        assert_cu_ok(fk.cuStreamWaitValue32(handle_of(s[i]), (CUdeviceptr)(uintptr_t)&gate[i], 1,
                                            CU_STREAM_WAIT_VALUE_EQ));
    const long w0 = fk.waits();
    cw_future *f = NULL;
    assert_cw_ok(cw_future_when_all(&f, s, 3, kind));
    assert_int_equal(fk.waits() - w0, 3);
    assert_ptr_equal(current(), g_other);
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    __atomic_store_n(&gate[2], 1, __ATOMIC_RELEASE);
    __atomic_store_n(&gate[1], 1, __ATOMIC_RELEASE);
    sleep_ms(20);
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    assert_cw(CW_ERROR_TIMEOUT, cw_future_wait(f, 2000));
    __atomic_store_n(&gate[0], 1, __ATOMIC_RELEASE);
    assert_cw_ok(cw_future_wait(f, 5000000));
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_synchronize(s[i]));
    cw_future_destroy(&f);
    /* no streams leak through the internal join stream */
    const long streams = fk.live("stream");
    for (int i = 0; i < 20; i++) {
        assert_cw_ok(cw_future_when_all(&f, s, 3, kind));
        assert_cw_ok(cw_future_wait(f, 5000000));
        cw_future_destroy(&f);
    }
    assert_int_equal(fk.live("stream"), streams);
    assert_true(fk.drain(5000));
    gate_free(gate);
    for (int i = 0; i < 3; i++) cw_stream_destroy(&s[i]);
}

/* ---- timers ----------------------------------------------------------------- */

static void test_timer(void **state) {
    (void)state;
    set_current(g_other);
    cw_stream *s = new_stream();
    cw_timer *t = NULL;
    const long ev0 = fk.live("event");
    assert_cw_ok(cw_timer_create(&t, g_ctx));
    assert_int_equal(fk.live("event"), ev0 + 2);
    float ms = -1;
    assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t, &ms));
    assert_detail("cw_timer_get_elapsed_ms");
    assert_cw(CW_ERROR_INVALID_STATE, cw_timer_stop(t, s));
    assert_cw_ok(cw_timer_start(t, s));
    assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t, &ms));
    assert_true(ms == -1.0f);
    sleep_ms(2);
    assert_cw_ok(cw_timer_stop(t, s));
    assert_cw_ok(cw_timer_get_elapsed_ms(t, &ms));
    assert_true(ms > 0.0f);
    assert_true(ms < 10000.0f);
    /* again, on a wrapped NULL stream */
    cw_stream *w = NULL;
    assert_cw_ok(cw_stream_wrap(&w, g_ctx, NULL));
    ms = -1;
    assert_cw_ok(cw_timer_start(t, w));
    assert_cw_ok(cw_timer_stop(t, w));
    assert_cw_ok(cw_timer_get_elapsed_ms(t, &ms));
    assert_true(ms > 0.0f);
    assert_ptr_equal(current(), g_other);
    cw_stream_destroy(&w);
    /* the timer's own two events go with it (streams' events are pooled by
     * the context: the teardown's leak check covers those) */
    const long ev1 = fk.live("event");
    assert_true(ev1 >= ev0 + 2);
    cw_timer_destroy(&t);
    assert_null(t);
    assert_int_equal(fk.live("event"), ev1 - 2);
    cw_stream_destroy(&s);
}

/* ---- graphs ------------------------------------------------------------------
 * The fake records work enqueued on a capturing stream as graph nodes and
 * replays their items when the graph is launched (see tests/fake_cuda.c). */

static CUcontext fi_primary(void);

/* Mapped host words (the fake allocates on the current context). */
static volatile uint32_t *host_words(size_t n) {
    void *p = NULL;
    CUcontext prev = current();
    set_current(fi_primary());
    assert_cu_ok(fk.cuMemHostAlloc(&p, n * sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
    set_current(prev);
    memset(p, 0, n * sizeof(uint32_t));
    return (volatile uint32_t *)p;
}

static void free_words(volatile uint32_t *w) {
    CUcontext prev = current();
    set_current(fi_primary());
    assert_cu_ok(fk.cuMemFreeHost((void *)w));
    set_current(prev);
}

static CUcontext fi_primary(void) { return g_primary; }

static void write_word(cw_stream *s, volatile uint32_t *w, uint32_t v) {
    assert_cu_ok(fk.cuStreamWriteValue32(handle_of(s), (CUdeviceptr)(uintptr_t)w, v, 0));
}

static atomic_int g_replays;
static void count_replay(void *arg) {
    (void)arg;
    atomic_fetch_add(&g_replays, 1);
}

static cw_graph *capture_writes(cw_stream *s, volatile uint32_t *w, const uint32_t *values, size_t n) {
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    for (size_t i = 0; i < n; i++) write_word(s, &w[i], values[i]);
    assert_cw_ok(cw_capture_end(&g, s));
    assert_non_null(g);
    return g;
}

/* Captured work is recorded, not run; each launch replays it. */
static void test_graph_capture_replay(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(2);
    cw_capture_state cs = CW_CAPTURE_NONE;
    atomic_store(&g_replays, 0);
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_ACTIVE);
    write_word(s, &w[0], 7);
    assert_cu_ok(fk.cuLaunchHostFunc(handle_of(s), count_replay, NULL));
    assert_int_equal(w[0], 0); /* recorded only */
    assert_int_equal(atomic_load(&g_replays), 0);
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 2);
    assert_int_equal(gi.sinks, 1);
    assert_int_equal(gi.is_body, 0);
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    cw_graph_destroy(&g); /* the exec does not need the graph */
    assert_null(g);
    assert_cw_ok(cw_graph_exec_upload(e, s));
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 7);
    assert_int_equal(atomic_load(&g_replays), 3);
    cw_graph_exec_info st;
    assert_cw_ok(cw_graph_exec_get_info(e, &st));
    assert_int_equal(st.launches, 3);
    assert_int_equal(st.updates_in_place, 0);
    assert_int_equal(st.reinstantiations, 0);
    /* a launch on another stream of the context works too */
    cw_stream *s2 = new_stream();
    w[0] = 0;
    assert_cw_ok(cw_graph_exec_launch(e, s2));
    assert_cw_ok(cw_stream_synchronize(s2));
    assert_int_equal(w[0], 7);
    cw_graph_exec_destroy(&e);
    assert_null(e);
    cw_stream_destroy(&s2);
    cw_stream_destroy(&s);
    free_words(w);
}

/* Capture across fork/join: the branch is part of the graph; a fork that is
 * not joined back fails the capture with a message that says so, and the
 * stream is usable afterwards. */
static void test_graph_capture_fork_join(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(3);
    cw_stream *child = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    write_word(s, &w[0], 1);
    assert_cw_ok(cw_stream_fork(&child, s));
    cw_capture_state cs = CW_CAPTURE_NONE;
    assert_cw_ok(cw_capture_get_state(child, &cs));
    assert_int_equal(cs, CW_CAPTURE_ACTIVE); /* the child joined the capture */
    write_word(child, &w[1], 2);
    cw_future *f = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_future_create(&f, child, CW_FUTURE_WRITE_VALUE));
    assert_non_null(strstr(cw_last_error()->message, "capturing"));
    assert_cw_ok(cw_stream_join(s, &child));
    write_word(s, &w[2], 3);
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 3);
    assert_int_equal(gi.sinks, 1);
    assert_int_equal(w[0] + w[1] + w[2], 0);
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 1);
    assert_int_equal(w[1], 2);
    assert_int_equal(w[2], 3);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);

    /* unjoined fork */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    assert_cw_ok(cw_stream_fork(&child, s));
    write_word(child, &w[1], 9);
    cw_clear_error();
    assert_cw(CW_ERROR_CAPTURE, cw_capture_end(&g, s));
    assert_null(g);
    assert_detail("cw_capture_end");
    assert_non_null(strstr(cw_last_error()->message, "not joined back"));
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    assert_cw_ok(cw_capture_get_state(child, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    assert_cw_ok(cw_stream_join(s, &child)); /* the child goes back to its pool */
    write_word(s, &w[0], 5);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 5);
    assert_int_equal(w[1], 2); /* the unjoined branch never ran */
    cw_stream_destroy(&s);
    free_words(w);
}

/* A call that invalidates the capture is named when the capture ends; the
 * stream works afterwards. */
static void test_graph_capture_invalidated(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(1);
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    write_word(s, &w[0], 1);
    assert_cw(CW_ERROR_CAPTURE, cw_stream_synchronize(s));
    cw_capture_state cs = CW_CAPTURE_NONE;
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_INVALIDATED);
    assert_cw(CW_ERROR_CAPTURE, cw_stream_query(s)); /* a second offence: the first is reported */
    cw_graph *g = NULL;
    cw_clear_error();
    assert_cw(CW_ERROR_CAPTURE, cw_capture_end(&g, s));
    assert_null(g);
    const char *m = cw_last_error()->message;
    assert_non_null(strstr(m, "invalidated by cw_stream_synchronize"));
    assert_non_null(strstr(m, "cuStreamSynchronize"));
    assert_non_null(strstr(m, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"));
    assert_non_null(strstr(m, "can be used again"));
    assert_string_equal(cw_last_error()->driver_call, "cuStreamEndCapture");
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    write_word(s, &w[0], 4);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 4);
    /* and it can capture again */
    const uint32_t v = 6;
    g = capture_writes(s, w, &v, 1);
    cw_graph_destroy(&g);
    /* a capture invalidated by a call cuweave did not make */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    assert_int_equal(fk.cuStreamQuery(handle_of(s)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_cw(CW_ERROR_CAPTURE, cw_capture_end(&g, s));
    assert_non_null(strstr(cw_last_error()->message, "cuweave did not make"));
    cw_stream_destroy(&s);
    free_words(w);
}

/* Wrong states and the refusals that go with them. */
static void test_graph_capture_states(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    cw_graph *g = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_capture_end(&g, s));
    EXPECT_INVALID(cw_capture_begin, cw_capture_begin(s, NULL, (cw_capture_mode)7));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw(CW_ERROR_INVALID_STATE, cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    EXPECT_INVALID(cw_capture_end, cw_capture_end(NULL, s)); /* the capture goes on */
    cw_future *f = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_future_create(&f, s, CW_FUTURE_HOST_FUNC));
    assert_cw(CW_ERROR_INVALID_STATE, cw_future_when_all(&f, &s, 1, CW_FUTURE_HOST_FUNC));
    assert_null(f);
    assert_cw_ok(cw_capture_end(&g, s)); /* an empty capture is a graph with no node */
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 0);
    cw_graph_destroy(&g);
    /* the legacy NULL stream cannot be captured */
    cw_stream *nul = NULL;
    assert_cw_ok(cw_stream_wrap(&nul, g_ctx, NULL));
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_capture_begin(nul, NULL, CW_CAPTURE_GLOBAL));
    assert_non_null(strstr(cw_last_error()->message, "legacy NULL stream"));
    cw_stream_destroy(&nul);
    /* a stream destroyed while capturing takes its capture with it (the
     * teardown's leak check counts the fake's graphs) */
    volatile uint32_t *w = host_words(1);
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_RELAXED));
    write_word(s, &w[0], 3);
    cw_stream_destroy(&s);
    assert_int_equal(w[0], 0);
    /* handles are checked */
    cw_graph *bogus = (cw_graph *)(void *)&state;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_graph_get_info(bogus, &gi));
    cw_graph_exec *ebogus = (cw_graph_exec *)(void *)&state;
    cw_graph_exec_info ei;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_graph_exec_get_info(ebogus, &ei));
    free_words(w);
}

/* Capture into an existing graph extends it in sequence; graphs combine as
 * child nodes; DOT output; conditional nodes need a driver that has them. */
static void test_graph_build(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(3);
    cw_graph *g = NULL, *out = NULL;
    assert_cw_ok(cw_graph_create(&g, g_ctx));
    assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL));
    write_word(s, &w[0], 1);
    cw_graph_exec *e = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_capture_end(&out, s));
    assert_ptr_equal(out, g); /* the same graph, still the caller's own: destroyed once, below */
    assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL));
    write_word(s, &w[1], 2);
    /* out is needed after a capture into a graph too (0.1 took NULL there);
     * refused, the capture goes on */
    EXPECT_INVALID(cw_capture_end, cw_capture_end(NULL, s));
    cw_capture_state cs = CW_CAPTURE_NONE;
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_ACTIVE);
    out = NULL;
    assert_cw_ok(cw_capture_end(&out, s));
    assert_ptr_equal(out, g);
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 2);
    assert_int_equal(gi.sinks, 1); /* in sequence, not side by side */

    /* g twice as children of a parent, the second after the first, then a join */
    cw_graph *parent = NULL;
    assert_cw_ok(cw_graph_create(&parent, g_ctx));
    cw_graph_node *a = NULL, *b = NULL, *j = NULL;
    assert_cw_ok(cw_graph_add_child(parent, g, NULL, 0, &a));
    assert_non_null(a);
    assert_cw_ok(cw_graph_add_child(parent, g, &a, 1, &b));
    cw_graph_node *both[2] = {a, b};
    assert_cw_ok(cw_graph_add_empty(parent, both, 2, &j));
    EXPECT_INVALID(cw_graph_add_child, cw_graph_add_child(parent, parent, NULL, 0, NULL));
    EXPECT_INVALID(cw_graph_add_empty, cw_graph_add_empty(parent, NULL, 1, NULL));
    cw_graph_destroy(&g); /* children are copies */
    assert_null(g);
    assert_cw_ok(cw_graph_get_info(parent, &gi));
    assert_int_equal(gi.nodes, 3);
    assert_int_equal(gi.sinks, 1);
    assert_cw_ok(cw_graph_instantiate(&e, parent, CW_GRAPH_EXEC_NODE_PRIORITY));
    EXPECT_INVALID(cw_graph_instantiate, cw_graph_instantiate(&e, parent, 0x80));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 1);
    assert_int_equal(w[1], 2);
    cw_graph_exec_destroy(&e);

    /* DOT */
    char path[] = "/tmp/cuweave-dot-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_cw_ok(cw_graph_write_dot(parent, path, 1));
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[64] = "";
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    unlink(path);
    assert_non_null(strstr(line, "digraph"));
    EXPECT_INVALID(cw_graph_write_dot, cw_graph_write_dot(parent, "", 0));

    /* sinks */
    cw_graph_node *sinks[4] = {NULL};
    size_t nsinks = 0;
    assert_cw_ok(cw_graph_get_sinks(parent, sinks, 4, &nsinks));
    assert_int_equal(nsinks, 1);
    assert_ptr_equal(sinks[0], j);
    assert_cw_ok(cw_graph_get_sinks(parent, NULL, 0, &nsinks));
    assert_int_equal(nsinks, 1);
    EXPECT_INVALID(cw_graph_get_sinks, cw_graph_get_sinks(parent, NULL, 2, &nsinks));

    /* conditional nodes: the fake driver has none */
    cw_cond_handle h = 0;
    cw_graph *body = NULL;
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_graph_add_cond_handle(parent, 1, CW_COND_RESET_EACH_LAUNCH, &h));
    assert_non_null(strstr(cw_last_error()->message, "12.3"));
    EXPECT_INVALID(cw_graph_add_cond_handle, cw_graph_add_cond_handle(parent, 1, 0x10, &h));
    /* a handle this graph did not make is refused before the driver is asked */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_graph_add_conditional(parent, 42, NULL, &j, 1, NULL, &body, NULL));
    assert_non_null(strstr(cw_last_error()->message, "cw_graph_add_cond_handle"));
    assert_null(body);
    cw_cond_settings cset;
    cw_cond_settings_default(&cset);
    cset.with_else = 1; /* WHILE has no else */
    EXPECT_INVALID(cw_graph_add_conditional, cw_graph_add_conditional(parent, h, &cset, NULL, 0, NULL, &body, NULL));
    cw_cond_settings_default(&cset);
    cset.reserved[3] = 1;
    EXPECT_INVALID(cw_graph_add_conditional, cw_graph_add_conditional(parent, h, &cset, NULL, 0, NULL, &body, NULL));
    /* a type out of the enum's range, as a C caller may store it (found by
     * tests/fuzz/fuzz_settings: read as the enum type it was undefined
     * behaviour, which UBSan reports) */
    const int bad_types[] = {2, 17, -1};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        cw_cond_settings_default(&cset);
        memcpy(&cset.type, &bad_types[i], sizeof bad_types[i]);
        EXPECT_INVALID(cw_graph_add_conditional, cw_graph_add_conditional(parent, h, &cset, NULL, 0, NULL, &body, NULL));
    }
    EXPECT_INVALID(cw_graph_add_conditional, cw_graph_add_conditional(parent, h, NULL, NULL, 0, NULL, NULL, NULL));

    /* the info: counts, the driver graph and the context */
    memset(&gi, 0x5a, sizeof gi);
    assert_cw_ok(cw_graph_get_info(parent, &gi));
    assert_non_null(gi.handle);
    assert_ptr_equal(gi.context, g_ctx);
    assert_int_equal(gi.is_body, 0);
    for (size_t i = 0; i < sizeof gi.reserved; i++) assert_int_equal(gi.reserved[i], 0);
    cw_graph_destroy(&parent);
    cw_stream_destroy(&s);
    free_words(w);
}

/* What the log callback got, by level (errors and warnings only). */
static char g_graph_log[2][2048];

static void graph_log(void *user, cw_log_level level, const char *message) {
    (void)user;
    if (level > CW_LOG_WARNING) return;
    char *buf = g_graph_log[level];
    const size_t n = strlen(buf);
    snprintf(buf + n, sizeof g_graph_log[0] - n, "%s\n", message);
}

static void graph_log_on(int on) {
    if (on) memset(g_graph_log, 0, sizeof g_graph_log);
    assert_cw_ok(cw_log_set_callback(on ? graph_log : NULL, NULL, CW_LOG_WARNING));
}

/* Destroy never fails (docs/api-convention.md): a graph that a capture
 * records into is destroyed all the same, the capture ended and dropped
 * (0.1 refused, and left *g set); a stale graph or exec, or a conditional
 * body, is ignored and said so as a CW_LOG_WARNING, not an error, with *g
 * nulled. */
static void test_graph_destroy_never_fails(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(2);
    const long graphs0 = fk.live("graph");
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, g_ctx));
    assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL));
    write_word(s, &w[0], 1);
    graph_log_on(1);
    cw_graph_destroy(&g);
    graph_log_on(0);
    assert_null(g);
    assert_int_equal(fk.live("graph"), graphs0);
    assert_non_null(strstr(g_graph_log[CW_LOG_WARNING], "ended and dropped"));
    assert_string_equal(g_graph_log[CW_LOG_ERROR], "");
    /* the stream no longer captures, and works */
    cw_capture_state cs = CW_CAPTURE_ACTIVE;
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    cw_graph *out = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_capture_end(&out, s));
    assert_null(out);
    write_word(s, &w[1], 2);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 0); /* the dropped capture never ran */
    assert_int_equal(w[1], 2);

    /* stale handles: ignored, *g nulled, a warning; the detail left alone */
    cw_graph *stale = NULL;
    assert_cw_ok(cw_graph_create(&stale, g_ctx));
    cw_graph *copy = stale;
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_add_empty(stale, NULL, 0, NULL));
    assert_cw_ok(cw_graph_instantiate(&e, stale, 0));
    cw_graph_exec *ecopy = e;
    cw_graph_destroy(&stale);
    cw_graph_exec_destroy(&e);
    graph_log_on(1);
    cw_clear_error();
    cw_graph_destroy(&copy);
    assert_null(copy);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* the detail is left alone */
    cw_graph_exec_destroy(&ecopy);
    assert_null(ecopy);
    graph_log_on(0);
    assert_non_null(strstr(g_graph_log[CW_LOG_WARNING], "cw_graph_destroy: not a live cw_graph"));
    assert_non_null(strstr(g_graph_log[CW_LOG_WARNING], "cw_graph_exec_destroy: not a live cw_graph_exec"));
    assert_string_equal(g_graph_log[CW_LOG_ERROR], "");
    cw_stream_destroy(&s);
    free_words(w);
}

/* Update: the same shape is applied in place; a changed shape is
 * instantiated again, and the caller is told why. */
static void test_graph_update(void **state) {
    (void)state;
    cw_stream *s = new_stream();
    volatile uint32_t *w = host_words(2);
    const uint32_t one = 1, two = 2, pair[2] = {3, 4};
    cw_graph *g1 = capture_writes(s, w, &one, 1);
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g1, 0));
    cw_graph_exec_info ei;
    assert_cw_ok(cw_graph_exec_get_info(e, &ei));
    CUgraphExec h1 = ei.handle;
    assert_non_null(h1);
    assert_ptr_equal(ei.context, g_ctx);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 1);

    cw_graph *g2 = capture_writes(s, w, &two, 1);
    cw_graph_update_info ui;
    memset(&ui, 0x5a, sizeof ui);
    assert_cw_ok(cw_graph_exec_update(e, g2, &ui));
    assert_int_equal(ui.kind, CW_GRAPH_UPDATED_IN_PLACE);
    assert_int_equal(ui.driver_result, 0);
    assert_string_equal(ui.reason, "");
    assert_cw_ok(cw_graph_exec_get_info(e, &ei));
    assert_ptr_equal(ei.handle, h1); /* updated in place: the same driver exec */
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 2);

    cw_graph *g3 = capture_writes(s, w, pair, 2);
    assert_cw_ok(cw_graph_exec_update(e, g3, &ui));
    assert_int_equal(ui.kind, CW_GRAPH_REINSTANTIATED);
    assert_int_equal(ui.driver_result, 2 /* CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED */);
    assert_non_null(strstr(ui.reason, "topology"));
    assert_cw_ok(cw_graph_exec_get_info(e, &ei));
    assert_ptr_not_equal(ei.handle, h1); /* instantiated again: another driver exec (made while h1 lived) */
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 3);
    assert_int_equal(w[1], 4);
    assert_cw_ok(cw_graph_exec_update(e, g1, NULL)); /* info may be NULL */
    memset(&ei, 0x5a, sizeof ei);
    assert_cw_ok(cw_graph_exec_get_info(e, &ei));
    assert_int_equal(ei.updates_in_place, 1);
    assert_int_equal(ei.reinstantiations, 2);
    assert_int_equal(ei.launches, 3);
    assert_ptr_equal(ei.context, g_ctx);
    for (size_t i = 0; i < sizeof ei.reserved; i++) assert_int_equal(ei.reserved[i], 0);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g1);
    cw_graph_destroy(&g2);
    cw_graph_destroy(&g3);
    cw_stream_destroy(&s);
    free_words(w);
}

/* ---- fault injection through the seam -------------------------------------- */

struct fi_env {
    cw_context *ctx;
    cw_stream *stream;
    void *out;
    cw_graph *graph;
    cw_graph_exec *exec;
    volatile uint32_t *word;
};

struct fi_scenario {
    const char *name;
    int hold_work;    /* hold the fake's work: a failed call must leave none queued */
    void (*setup)(struct fi_env *e);
    cw_status (*call)(struct fi_env *e);
    void (*cleanup)(struct fi_env *e); /* of a successful call's result */
};

static void fi_setup_stream(struct fi_env *e) { assert_cw_ok(cw_stream_create(&e->stream, e->ctx, NULL)); }
static void fi_setup_null_stream(struct fi_env *e) { assert_cw_ok(cw_stream_wrap(&e->stream, e->ctx, NULL)); }

static cw_status fi_stream_create(struct fi_env *e) { return cw_stream_create((cw_stream **)&e->out, e->ctx, NULL); }
static void fi_stream_destroy(struct fi_env *e) { cw_stream_destroy((cw_stream **)&e->out); }

static cw_status fi_stream_wrap(struct fi_env *e) { return cw_stream_wrap((cw_stream **)&e->out, e->ctx, NULL); }

static cw_status fi_pool_create(struct fi_env *e) {
    cw_stream_pool_settings ps;
    cw_stream_pool_settings_default(&ps);
    ps.reserved_streams = 3;
    return cw_stream_pool_create((cw_stream_pool **)&e->out, e->ctx, &ps);
}
static void fi_pool_destroy(struct fi_env *e) { cw_stream_pool_destroy((cw_stream_pool **)&e->out); }

static cw_status fi_fork(struct fi_env *e) { return cw_stream_fork((cw_stream **)&e->out, e->stream); }
static void fi_join(struct fi_env *e) { assert_cw_ok(cw_stream_join(e->stream, (cw_stream **)&e->out)); }

static cw_status fi_future_host(struct fi_env *e) {
    return cw_future_create((cw_future **)&e->out, e->stream, CW_FUTURE_HOST_FUNC);
}
static cw_status fi_future_write(struct fi_env *e) {
    return cw_future_create((cw_future **)&e->out, e->stream, CW_FUTURE_WRITE_VALUE);
}
static cw_status fi_when_all(struct fi_env *e) {
    return cw_future_when_all((cw_future **)&e->out, &e->stream, 1, CW_FUTURE_WRITE_VALUE);
}
static void fi_future_destroy(struct fi_env *e) {
    fk.hold(0);
    assert_cw_ok(cw_future_wait((cw_future *)e->out, 5000000));
    cw_future_destroy((cw_future **)&e->out);
}

static cw_status fi_timer_create(struct fi_env *e) { return cw_timer_create((cw_timer **)&e->out, e->ctx); }
static void fi_timer_destroy(struct fi_env *e) { cw_timer_destroy((cw_timer **)&e->out); }

static void fi_setup_graph(struct fi_env *e) {
    fi_setup_stream(e);
    e->word = host_words(2);
    const uint32_t v = 1;
    e->graph = capture_writes(e->stream, e->word, &v, 1);
}
static void fi_setup_exec(struct fi_env *e) {
    fi_setup_graph(e);
    assert_cw_ok(cw_graph_instantiate(&e->exec, e->graph, 0));
    cw_graph_destroy(&e->graph);
    const uint32_t v[2] = {1, 2}; /* another shape: the update instantiates again */
    e->graph = capture_writes(e->stream, e->word, v, 2);
}
static cw_status fi_graph_create(struct fi_env *e) { return cw_graph_create((cw_graph **)&e->out, e->ctx); }
static void fi_graph_destroy(struct fi_env *e) { cw_graph_destroy((cw_graph **)&e->out); }
static cw_status fi_capture(struct fi_env *e) {
    cw_status st = cw_capture_begin(e->stream, NULL, CW_CAPTURE_GLOBAL);
    if (st != CW_SUCCESS) return st;
    static uint32_t word;
    fk.cuStreamWriteValue32(handle_of(e->stream), (CUdeviceptr)(uintptr_t)&word, 1, 0);
    return cw_capture_end((cw_graph **)&e->out, e->stream);
}
static cw_status fi_instantiate(struct fi_env *e) {
    return cw_graph_instantiate((cw_graph_exec **)&e->out, e->graph, 0);
}
static void fi_exec_destroy(struct fi_env *e) { cw_graph_exec_destroy((cw_graph_exec **)&e->out); }
static cw_status fi_add_child(struct fi_env *e) {
    cw_graph *parent = NULL;
    cw_status st = cw_graph_create(&parent, e->ctx);
    if (st != CW_SUCCESS) return st;
    st = cw_graph_add_child(parent, e->graph, NULL, 0, NULL);
    if (st == CW_SUCCESS) e->out = parent;
    else cw_graph_destroy(&parent);
    return st;
}
static cw_status fi_update(struct fi_env *e) {
    cw_status st = cw_graph_exec_update(e->exec, e->graph, NULL);
    if (st == CW_SUCCESS) e->out = e->exec; /* marks success for the cleanup */
    return st;
}
static void fi_nothing(struct fi_env *e) { e->out = NULL; }

static const struct fi_scenario k_scenarios[] = {
    {"cw_stream_create", 0, NULL, fi_stream_create, fi_stream_destroy},
    {"cw_stream_wrap(NULL stream)", 0, NULL, fi_stream_wrap, fi_stream_destroy},
    {"cw_stream_pool_create(reserved 3)", 0, NULL, fi_pool_create, fi_pool_destroy},
    {"cw_stream_fork", 0, fi_setup_stream, fi_fork, fi_join},
    {"cw_future_create(HOST_FUNC)", 1, fi_setup_stream, fi_future_host, fi_future_destroy},
    {"cw_future_create(WRITE_VALUE)", 1, fi_setup_stream, fi_future_write, fi_future_destroy},
    {"cw_future_create(HOST_FUNC on the wrapped NULL stream)", 1, fi_setup_null_stream, fi_future_host,
     fi_future_destroy},
    {"cw_future_create(WRITE_VALUE on the wrapped NULL stream)", 1, fi_setup_null_stream, fi_future_write,
     fi_future_destroy},
    {"cw_future_when_all(WRITE_VALUE)", 1, fi_setup_stream, fi_when_all, fi_future_destroy},
    {"cw_timer_create", 0, NULL, fi_timer_create, fi_timer_destroy},
    {"cw_graph_create", 0, NULL, fi_graph_create, fi_graph_destroy},
    {"cw_capture_begin + cw_capture_end", 0, fi_setup_stream, fi_capture, fi_graph_destroy},
    {"cw_graph_instantiate", 0, fi_setup_graph, fi_instantiate, fi_exec_destroy},
    {"cw_graph_create + cw_graph_add_child", 0, fi_setup_graph, fi_add_child, fi_graph_destroy},
    {"cw_graph_exec_update (instantiates again)", 0, fi_setup_exec, fi_update, fi_nothing},
};

static void fi_env_free(struct fi_env *e) {
    cw_graph_exec_destroy(&e->exec);
    cw_graph_destroy(&e->graph);
    if (e->stream) cw_stream_destroy(&e->stream);
    if (e->word) free_words(e->word);
    cw_context_destroy(&e->ctx);
}

/* One run of a scenario on a fresh context. fail_at 0: no fault. Returns the
 * number of problems found (each printed). */
static int fi_run(const struct fi_scenario *sc, unsigned long fail_at, unsigned long *calls) {
    int problems = 0;
    char msg[512];
    const struct snapshot before = snap();
    struct fi_env e;
    memset(&e, 0, sizeof e);
    set_current(NULL);
    assert_cw_ok(cw_context_create(&e.ctx, 0));
    if (sc->setup) sc->setup(&e);
    set_current(g_other);
    if (sc->hold_work) fk.hold(1);
    cwi_seam_reset();
    if (fail_at) cwi_seam_fail(-1, fail_at, CUDA_ERROR_OUT_OF_MEMORY);
    cw_clear_error();
    cw_status st = sc->call(&e);
    if (calls) *calls = cwi_seam_calls(-1);
    const int fired = cwi_seam_fired();
    char failed_call[64];
    snprintf(failed_call, sizeof failed_call, "%s", cw_last_error()->driver_call);
    char detail[400];
    snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
    cwi_seam_reset(); /* disarm */
    CUcontext cur = current();
    if (!fail_at) {
        if (st != CW_SUCCESS) fail_msg("%s failed without a fault: %s", sc->name, detail);
    } else {
        if (!fired) {
            printf("# %s, call %lu: the fault did not fire\n", sc->name, fail_at);
            problems++;
        }
        if (st == CW_SUCCESS) {
            printf("# %s, call %lu failing: returned CW_SUCCESS\n", sc->name, fail_at);
            problems++;
        } else if (st != CW_ERROR_OUT_OF_MEMORY) {
            printf("# %s, call %lu failing with OUT_OF_MEMORY: returned %s (%s)\n", sc->name, fail_at,
                   cw_status_name(st), detail);
            problems++;
        }
        if (e.out != NULL && st != CW_SUCCESS) {
            printf("# %s, call %lu failing (%s): returned %s and wrote the out-parameter anyway (a caller "
                   "that follows the convention leaks it)\n",
                   sc->name, fail_at, failed_call, cw_status_name(st));
            problems++;
            st = CW_SUCCESS; /* clean it up below */
        }
        if (cur != g_other) {
            /* a failed restore of the caller's context can only leave the
             * object's context current; anything else is a bug */
            if (!(strcmp(failed_call, "cuCtxSetCurrent") == 0 && cur == g_primary)) {
                printf("# %s, call %lu failing (%s): current context changed\n", sc->name, fail_at, failed_call);
                problems++;
            }
            set_current(g_other);
        }
        if (sc->hold_work && strcmp(failed_call, "cuCtxSetCurrent") == 0) {
            /* Only the restore of the caller's context failed, after the
             * marker was queued: the library keeps the object as an orphan
             * until the marker has run (it is not freed under it). Let the
             * work run; the leak check below proves the orphan is freed when
             * the context goes. */
        } else if (sc->hold_work) {
            long left = fk.discard();
            if (left > 0 && st != CW_SUCCESS) {
                printf("# %s, call %lu failing (%s): returned %s but left %ld host function(s)/stream write(s) "
                       "queued that refer to the freed object\n",
                       sc->name, fail_at, failed_call, cw_status_name(st), left);
                problems++;
            }
        }
    }
    fk.hold(0);
    if (st == CW_SUCCESS && e.out) sc->cleanup(&e);
    fi_env_free(&e);
    if (!fk.drain(5000)) {
        printf("# %s, call %lu: the fake's queue did not drain\n", sc->name, fail_at);
        problems++;
    }
    set_current(NULL);
    const struct snapshot after = snap();
    if (!snap_equal(&before, &after)) {
        snap_diff(&before, &after, msg, sizeof msg);
        printf("# %s, call %lu failing (%s): leak: %s\n", sc->name, fail_at, failed_call, msg);
        problems++;
    }
    return problems;
}

/* Prints which driver entry the k-th call of a scenario is. */
static void fi_name_call(const struct fi_scenario *sc, unsigned long k) {
    /* fail call k and read the detail */
    struct fi_env e;
    memset(&e, 0, sizeof e);
    set_current(NULL);
    assert_cw_ok(cw_context_create(&e.ctx, 0));
    if (sc->setup) sc->setup(&e);
    set_current(g_other);
    if (sc->hold_work) fk.hold(1);
    cwi_seam_reset();
    cwi_seam_fail(-1, k, CUDA_ERROR_OUT_OF_MEMORY);
    cw_status st = sc->call(&e);
    printf("#   call %lu: %s -> %s (%s)\n", k, cw_last_error()->driver_call, cw_status_name(st),
           cw_last_error()->message);
    cwi_seam_reset();
    if (sc->hold_work) fk.discard();
    fk.hold(0);
    set_current(g_other);
    if (st == CW_SUCCESS && e.out) sc->cleanup(&e);
    fi_env_free(&e);
    fk.drain(5000);
    set_current(NULL);
}

static void test_fault_injection(void **state) {
    (void)state;
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    const size_t n = sizeof k_scenarios / sizeof k_scenarios[0];
    unsigned long handled = 0;
    int problems = 0;
    for (size_t i = 0; i < n; i++) {
        const struct fi_scenario *sc = &k_scenarios[i];
        unsigned long calls = 0;
        problems += fi_run(sc, 0, &calls);
        if (calls == 0) fail_msg("%s made no driver call", sc->name);
        printf("# %s makes %lu driver calls\n", sc->name, calls);
        if (getenv("CWT_VERBOSE")) {
            for (unsigned long k = 1; k <= calls; k++) {
                /* name each call: fail it, see which entry fired */
                fi_name_call(sc, k);
            }
        }
        for (unsigned long k = 1; k <= calls; k++) {
            problems += fi_run(sc, k, NULL);
            handled++;
        }
        /* the library works afterwards */
        problems += fi_run(sc, 0, NULL);
    }
    cwi_seam_disable();
    if (problems) {
        printf("# fault injection: %zu scenarios, %lu failures handled, %d problems (listed above)\n", n, handled,
               problems);
        fail_msg("%d problems under fault injection (listed above)", problems);
    }
    printf("# fault injection: %zu scenarios, %lu failures handled, 0 leaks\n", n, handled);
}

/* ---- status mapping: CUDA_ERROR_NOT_READY ------------------------------------
 * CW_ERROR_NOT_READY means "not finished yet, ask again" and comes only from
 * calls that ask. A CUDA_ERROR_NOT_READY from any other driver call is a
 * failure: CW_ERROR_DRIVER, with the call and its CUresult in the detail
 * (a caller told CW_ERROR_NOT_READY would retry a failed creation). */

enum { NR_STREAM, NR_TIMER, NR_FUTURE_HOST, NR_FUTURE_WRITE, NR_FUTURE_EVENT, NR_COUNT };
static const char *const k_nr_names[NR_COUNT] = {"cw_stream_create", "cw_timer_create", "cw_future_create",
                                                 "cw_future_create", "cw_future_create"};

/* Makes the scenario's object (on a fresh context, so that what a context
 * makes on first use, its event pool and futures' slab, is swept too). */
static cw_status nr_create(int which, cw_context *c, cw_stream *s, void **made) {
    if (which == NR_STREAM) return cw_stream_create((cw_stream **)made, c, NULL);
    if (which == NR_TIMER) return cw_timer_create((cw_timer **)made, c);
    const cw_future_kind kind = which == NR_FUTURE_HOST    ? CW_FUTURE_HOST_FUNC
                                : which == NR_FUTURE_WRITE ? CW_FUTURE_WRITE_VALUE
                                                           : CW_FUTURE_EVENT;
    return cw_future_create((cw_future **)made, s, kind);
}

/* Destroys it, with no fault armed. */
static void nr_destroy(int which, void **made) {
    if (which == NR_STREAM) {
        cw_stream_destroy((cw_stream **)made);
    } else if (which == NR_TIMER) {
        cw_timer_destroy((cw_timer **)made);
    } else if (*made) {
        assert_cw_ok(cw_future_wait((cw_future *)*made, 1000000));
        cw_future_destroy((cw_future **)made);
    }
}

static void test_not_ready_is_not_a_query_answer(void **state) {
    (void)state;
    int problems = 0;
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    for (int which = 0; which < NR_COUNT; which++) {
        unsigned long failed = 0;
        for (unsigned long k = 1;; k++) {
            cw_context *c = NULL;
            cw_stream *s = NULL;
            assert_cw_ok(cw_context_create(&c, 0));
            if (which >= NR_FUTURE_HOST) assert_cw_ok(cw_stream_create(&s, c, NULL));
            cwi_seam_reset();
            cwi_seam_fail(-1, k, CUDA_ERROR_NOT_READY);
            cw_clear_error();
            void *made = NULL;
            const cw_status st = nr_create(which, c, s, &made);
            const int fired = cwi_seam_fired();
            const char *entry = "";
            if (cwi_seam_fired_entry() >= 0) entry = cwi_seam_entry_name(cwi_seam_fired_entry());
            const cw_error_info e = *cw_last_error();
            char call[64], fn[64];
            snprintf(call, sizeof call, "%s", e.driver_call);
            snprintf(fn, sizeof fn, "%s", e.function);
            cwi_seam_reset();
            nr_destroy(which, &made);
            cw_stream_destroy(&s);
            cw_context_destroy(&c);
            if (!fired) {
                assert_cw_ok(st);
                break;
            }
            if (st == CW_SUCCESS) continue; /* a release or a restore whose failure is absorbed */
            failed++;
            if (st != CW_ERROR_DRIVER || e.cu_result != CUDA_ERROR_NOT_READY || strcmp(call, entry) != 0 ||
                strcmp(fn, k_nr_names[which]) != 0) {
                printf("# %s, call %lu (%s) failing with CUDA_ERROR_NOT_READY: returned %s, detail: function "
                       "'%s', driver_call '%s', cu_result %d\n",
                       k_nr_names[which], k, entry, cw_status_name(st), fn, call, e.cu_result);
                problems++;
            }
        }
        printf("# %s (scenario %d): %lu driver calls failed with CUDA_ERROR_NOT_READY\n", k_nr_names[which], which,
               failed);
        if (failed == 0) fail_msg("%s: no driver call failed", k_nr_names[which]);
    }
    cwi_seam_disable();
    /* The queries still answer CW_ERROR_NOT_READY while work is queued. */
    cw_stream *s = new_stream();
    fk.hold(1);
    cw_future *fw = NULL, *fe = NULL;
    assert_cw_ok(cw_future_create(&fw, s, CW_FUTURE_WRITE_VALUE));
    assert_cw_ok(cw_future_create(&fe, s, CW_FUTURE_EVENT));
    assert_cw(CW_ERROR_NOT_READY, cw_stream_query(s));
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(fw));
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(fe));
    fk.hold(0);
    assert_cw_ok(cw_future_wait(fw, 1000000));
    assert_cw_ok(cw_future_wait(fe, 1000000));
    assert_cw_ok(cw_stream_query(s));
    cw_future_destroy(&fw);
    cw_future_destroy(&fe);
    cw_stream_destroy(&s);
    if (problems) fail_msg("%d calls turned CUDA_ERROR_NOT_READY into something else (listed above)", problems);
}

/* cw_context_get_info: what 0.1's four getters gave, and the SM count, with
 * no driver call; reserved bytes zeroed. */
static void test_context_info(void **state) {
    (void)state;
    cw_context_info ci;
    memset(&ci, 0x5a, sizeof ci);
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    assert_cw_ok(cw_context_get_info(g_ctx, &ci));
    assert_int_equal(cwi_seam_calls(-1), 0);
    cwi_seam_disable();
    assert_int_equal(ci.device, 0);
    assert_int_equal(ci.kind, CW_CONTEXT_PRIMARY);
    assert_ptr_equal(ci.handle, g_primary);
    assert_int_equal(ci.least_priority, 0);
    assert_int_equal(ci.greatest_priority, -5);
    assert_int_equal(ci.sm_count, 132);
    for (size_t i = 0; i < sizeof ci.reserved; i++) assert_int_equal(ci.reserved[i], 0);
    /* a wrapped context: the host's */
    cw_context *ext = NULL;
    assert_cw_ok(cw_context_wrap(&ext, g_other));
    assert_cw_ok(cw_context_get_info(ext, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_EXTERNAL);
    assert_ptr_equal(ci.handle, g_other);
    assert_int_equal(ci.device, 0);
    assert_int_equal(ci.sm_count, 132);
    cw_context_destroy(&ext);
    /* refusals; *info untouched */
    ci.device = 77;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_info(g_ctx, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_info(NULL, &ci));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info((cw_context *)&ci, &ci));
    assert_int_equal(ci.device, 77);
}

/* ---- partition groups ---------------------------------------------------------
 * With the fake's green contexts on (fake_cuda_green): a group of {16, 8}
 * and the leftover; destroyed while a stream made on partition 1 lives. The
 * stream goes on working (work enqueued, queried, waited for, ordered with
 * another context's stream); partitions 0 and 2 go with the group, the
 * fake's green context of partition 1 only when that stream is destroyed;
 * nothing is orphaned or leaked. */
static void test_partition_group_outlived(void **state) {
    (void)state;
    fk.green(1);
    const long green0 = fk.live("green"), orphans0 = fk.live("orphans");
    cw_partition_group *g = NULL;
    const unsigned sizes[] = {16, 8};
    assert_cw_ok(cw_partition_group_create(&g, 0, sizes, 2, 0));
    assert_int_equal(fk.live("green"), green0 + 3);
    cw_partition_group_info gi;
    memset(&gi, 0x5a, sizeof gi);
    assert_cw_ok(cw_partition_group_get_info(g, &gi));
    assert_int_equal(gi.count, 3);
    assert_int_equal(gi.default_index, 0);
    assert_int_equal(gi.device, 0);
    for (size_t k = 0; k < sizeof gi.reserved; k++) assert_int_equal(gi.reserved[k], 0);
    cw_partition_info pi[3];
    const unsigned want_sms[3] = {16, 8, 132 - 24};
    for (size_t i = 0; i < 3; i++) {
        memset(&pi[i], 0x5a, sizeof pi[i]);
        assert_cw_ok(cw_partition_group_get_partition(g, i, &pi[i]));
        assert_int_equal(pi[i].sm_count, want_sms[i]);
        assert_int_equal(pi[i].leftover, i == 2);
        assert_int_equal(pi[i].is_default, i == 0);
        for (size_t k = 0; k < sizeof pi[i].reserved; k++) assert_int_equal(pi[i].reserved[k], 0);
        cw_context_info ci;
        assert_cw_ok(cw_context_get_info(pi[i].context, &ci));
        assert_int_equal(ci.kind, CW_CONTEXT_GREEN);
        assert_int_equal(ci.sm_count, want_sms[i]);
        assert_int_equal(ci.device, 0);
    }
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_get_partition(g, 3, &pi[0]));
    /* a partition's context is borrowed: destroying it nulls the pointer only */
    cw_context *borrowed = pi[0].context;
    cw_clear_error();
    cw_context_destroy(&borrowed);
    assert_null(borrowed);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_int_equal(fk.live("green"), green0 + 3);

    set_current(g_other);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, pi[1].context, NULL));
    cw_partition_group_destroy(&g);
    assert_null(g);
    /* partitions 0 and 2 are gone; 1 stays for its stream */
    assert_int_equal(fk.live("green"), green0 + 1);
    assert_int_equal(fk.live("orphans"), orphans0);
    cw_context_info ci;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(pi[0].context, &ci));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(pi[2].context, &ci));
    assert_cw_ok(cw_context_get_info(pi[1].context, &ci));
    assert_int_equal(ci.sm_count, 8);

    /* the stream works: work enqueued on it runs, in order with others */
    cw_stream *p = new_stream();
    fk.hold(1);
    cw_future *f = NULL, *h = NULL;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_WRITE_VALUE));
    assert_cw_ok(cw_future_create(&h, s, CW_FUTURE_HOST_FUNC));
    assert_cw(CW_ERROR_NOT_READY, cw_stream_query(s));
    assert_cw_ok(cw_stream_wait(p, s));
    fk.hold(0);
    assert_cw_ok(cw_future_wait(f, 2000000));
    assert_cw_ok(cw_future_wait(h, 2000000));
    assert_cw_ok(cw_stream_synchronize(p));
    volatile uint32_t *w = host_words(1);
    write_word(s, w, 7);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(w[0], 7);
    free_words(w);
    assert_cw_ok(cw_stream_query(s));
    cw_future_destroy(&f);
    cw_future_destroy(&h);
    assert_ptr_equal(current(), g_other);
    assert_int_equal(fk.live("green"), green0 + 1);

    /* the last object on partition 1: its green context goes with it */
    cw_stream_destroy(&s);
    assert_int_equal(fk.live("green"), green0);
    assert_int_equal(fk.live("orphans"), orphans0);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(pi[1].context, &ci));
    cw_stream_destroy(&p);
    fk.green(0);
}

/* A partition's context current on the thread when the group destroys it
 * is made not current (nothing is current then): left current it is a
 * context the driver has freed (the H200 run of bench_resident_frame: the
 * next cuCtxSetCurrent freed it twice). A partition destroyed later, with
 * its last stream, likewise; another context current stays. */
static void test_partition_destroyed_while_current(void **state) {
    (void)state;
    fk.green(1);
    const long green0 = fk.live("green");
    cw_partition_group *g = NULL;
    const unsigned sizes[] = {16, 8};
    assert_cw_ok(cw_partition_group_create(&g, 0, sizes, 2, 0));
    cw_partition_info p0, p1;
    assert_cw_ok(cw_partition_group_get_partition(g, 0, &p0));
    assert_cw_ok(cw_partition_group_get_partition(g, 1, &p1));
    cw_context_info c0, c1;
    assert_cw_ok(cw_context_get_info(p0.context, &c0));
    assert_cw_ok(cw_context_get_info(p1.context, &c1));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, p1.context, NULL)); /* keeps partition 1 */
    set_current(c0.handle);
    cw_partition_group_destroy(&g);
    assert_int_equal(fk.live("green"), green0 + 1);
    assert_ptr_equal(current(), NULL); /* not the freed partition 0 */
    set_current(c1.handle);
    cw_stream_destroy(&s); /* partition 1 goes with it, current on this thread */
    assert_int_equal(fk.live("green"), green0);
    assert_ptr_equal(current(), NULL);
    /* another context current is kept */
    assert_cw_ok(cw_partition_group_create(&g, 0, sizes, 2, 0));
    set_current(g_other);
    cw_partition_group_destroy(&g);
    assert_ptr_equal(current(), g_other);
    set_current(NULL);
    fk.green(0);
}

/* cw_stream_get_info holds what 0.1's get_handle, get_device and
 * get_context gave, and makes no driver call (it is where the handle is read
 * on every use): the priority is the one the stream was made with (clamped
 * as the driver clamps) or, for a wrapped stream, the driver's answer at
 * wrap time. */
static void test_stream_info(void **state) {
    (void)state;
    cw_stream_settings ss;
    cw_stream_settings_default(&ss);
    ss.priority = -9; /* clamped to the fake's -5 */
    cw_stream *s = NULL, *w = NULL;
    assert_cw_ok(cw_stream_create(&s, g_ctx, &ss));
    assert_cw_ok(cw_stream_wrap(&w, g_ctx, NULL));
    cw_stream_info i;
    memset(&i, 0x5a, sizeof i);
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    assert_cw_ok(cw_stream_get_info(s, &i));
    cw_stream_info wi;
    assert_cw_ok(cw_stream_get_info(w, &wi));
    const unsigned long calls = cwi_seam_calls(-1);
    cwi_seam_disable();
    assert_int_equal(calls, 0);
    int raw = 1;
    assert_cu_ok(fk.cuStreamGetPriority(i.handle, &raw));
    assert_int_equal(i.priority, raw);
    assert_int_equal(i.priority, -5);
    assert_ptr_equal(i.context, g_ctx);
    assert_int_equal(i.device, 0);
    assert_int_equal(i.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(i.owned, 1);
    assert_int_equal(i.from_pool, 0);
    assert_int_equal(i.is_null, 0);
    for (size_t k = 0; k < sizeof i.reserved; k++) assert_int_equal(i.reserved[k], 0);
    assert_null(wi.handle);
    assert_ptr_equal(wi.context, g_ctx);
    assert_int_equal(wi.is_null, 1);
    assert_int_equal(wi.owned, 0);
    assert_int_equal(wi.flags, CW_STREAM_BLOCKING);
    /* a pool's stream */
    cw_stream_pool *pool = NULL;
    cw_stream *ps = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, g_ctx, NULL));
    assert_cw_ok(cw_stream_pool_acquire(&ps, pool, 0));
    assert_cw_ok(cw_stream_get_info(ps, &i));
    assert_int_equal(i.from_pool, 1);
    assert_ptr_equal(i.context, g_ctx);
    cw_stream_pool_info pi;
    memset(&pi, 0x5a, sizeof pi);
    assert_cw_ok(cw_stream_pool_get_info(pool, &pi));
    assert_ptr_equal(pi.context, g_ctx);
    assert_int_equal(pi.mode, CW_POOL_LEASE);
    assert_int_equal(pi.leased, 1);
    for (size_t k = 0; k < sizeof pi.reserved; k++) assert_int_equal(pi.reserved[k], 0);
    assert_cw_ok(cw_stream_pool_release(pool, &ps));
    cw_stream_pool_destroy(&pool);
    cw_stream_destroy(&w);
    cw_stream_destroy(&s);
}

/* The destroy contract: NULL-safe, the caller's pointer nulled, never fails;
 * a handle that is not live (or not the caller's to destroy) is ignored and
 * logged at CW_LOG_WARNING, not CW_LOG_ERROR, and the thread's detail is
 * left as it was (nothing failed that the caller must handle). */
static int g_log_levels[4];
static void count_levels(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if ((int)level >= 0 && (int)level < 4) g_log_levels[level]++;
}

static void test_destroy_ignores_and_warns(void **state) {
    (void)state;
    uint64_t junk[64];
    memset(junk, 0xab, sizeof junk);
    assert_cw_ok(cw_log_set_callback(count_levels, NULL, CW_LOG_DEBUG));
#define EXPECT_IGNORED(type, destroy, handle)                                          \
    do {                                                                               \
        memset(g_log_levels, 0, sizeof g_log_levels);                                  \
        cw_clear_error();                                                              \
        type *h_ = (type *)(handle);                                                   \
        destroy(&h_);                                                                  \
        assert_null(h_);                                                               \
        assert_int_equal(cw_last_error()->status, CW_SUCCESS);                         \
        if (g_log_levels[CW_LOG_WARNING] != 1 || g_log_levels[CW_LOG_ERROR] != 0)      \
            fail_msg("%s of a handle it cannot destroy: %d warning(s), %d error(s) logged, " \
                     "expected 1 warning", #destroy, g_log_levels[CW_LOG_WARNING],     \
                     g_log_levels[CW_LOG_ERROR]);                                      \
    } while (0)
    EXPECT_IGNORED(cw_stream, cw_stream_destroy, junk);
    EXPECT_IGNORED(cw_stream_pool, cw_stream_pool_destroy, junk);
    EXPECT_IGNORED(cw_timer, cw_timer_destroy, junk);
    EXPECT_IGNORED(cw_future, cw_future_destroy, junk);
    EXPECT_IGNORED(cw_context, cw_context_destroy, junk);
    EXPECT_IGNORED(cw_partition_group, cw_partition_group_destroy, junk);
    /* destroyed already (a stale copy) */
    cw_stream *s = new_stream(), *stale = s;
    cw_stream_destroy(&s);
    assert_null(s);
    EXPECT_IGNORED(cw_stream, cw_stream_destroy, stale);
    /* a pool's stream: not the caller's to destroy */
    cw_stream_pool *pool = NULL;
    cw_stream *leased = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, g_ctx, NULL));
    assert_cw_ok(cw_stream_pool_acquire(&leased, pool, 0));
    EXPECT_IGNORED(cw_stream, cw_stream_destroy, leased);
    assert_cw_ok(cw_stream_pool_release(pool, &leased)); /* still leased, still usable */
    cw_stream_pool_destroy(&pool);
#undef EXPECT_IGNORED
    /* NULL and a pointer to NULL: nothing at all */
    memset(g_log_levels, 0, sizeof g_log_levels);
    cw_stream_destroy(NULL);
    cw_stream_destroy(&s);
    cw_partition_group *g = NULL;
    cw_partition_group_destroy(NULL);
    cw_partition_group_destroy(&g);
    assert_int_equal(g_log_levels[CW_LOG_WARNING] + g_log_levels[CW_LOG_ERROR], 0);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
}

/* ---- main ------------------------------------------------------------------- */

/* Every object with an info or a getter knows its context (and through it
 * its device): streams, pools, graphs and executable graphs hand back the
 * context they were made on; a second context's objects hand back that
 * one. */
static void test_objects_know_their_context(void **state) {
    (void)state;
    cw_context *other = NULL;
    assert_cw_ok(cw_context_create(&other, 0));
    cw_context *ctxs[2] = {g_ctx, other};
    for (int i = 0; i < 2; i++) {
        cw_context *c = ctxs[i], *got = NULL;
        cw_stream_pool *pool = NULL;
        assert_cw_ok(cw_stream_pool_create(&pool, c, NULL));
        cw_stream_pool_info pi;
        assert_cw_ok(cw_stream_pool_get_info(pool, &pi));
        assert_ptr_equal(pi.context, c);
        cw_stream *s = NULL;
        assert_cw_ok(cw_stream_create(&s, c, NULL));
        assert_cw_ok(cwt_stream_context(s, &got));
        assert_ptr_equal(got, c);
        cw_future *f = NULL;
        assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_WRITE_VALUE));
        assert_cw_ok(cw_future_wait(f, 1000000));
        cw_graph *g = NULL;
        assert_cw_ok(cw_graph_create(&g, c));
        assert_cw_ok(cw_graph_add_empty(g, NULL, 0, NULL));
        cw_graph_info gi;
        assert_cw_ok(cw_graph_get_info(g, &gi));
        assert_ptr_equal(gi.context, c);
        cw_graph_exec *e = NULL;
        assert_cw_ok(cw_graph_instantiate(&e, g, 0));
        cw_graph_exec_info ei;
        assert_cw_ok(cw_graph_exec_get_info(e, &ei));
        assert_ptr_equal(ei.context, c);
        got = ei.context;
        int dev = -1;
        assert_cw_ok(cwt_context_device(got, &dev));
        assert_int_equal(dev, 0);
        /* a NULL out pointer and a foreign handle are refused */
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_graph_get_info(g, NULL));
        assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_pool_get_info((const cw_stream_pool *)s, &pi));
        cw_graph_exec_destroy(&e);
        cw_graph_destroy(&g);
        cw_future_destroy(&f);
        cw_stream_destroy(&s);
        cw_stream_pool_destroy(&pool);
    }
    cw_context_destroy(&other);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    g_fake_path = argv[1];
    /* The binary itself, for the CUWEAVE_SERIALIZE child: resolved now, since
     * /proc/self/exe cannot be exec'd under valgrind (which answers readlink
     * with the client's own path). */
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        g_self_path = self;
    } else {
        g_self_path = "/proc/self/exe";
    }
    if (access(g_fake_path, R_OK) != 0) {
        printf("FAIL: the fake driver %s is not readable\n", g_fake_path);
        return 1;
    }
    /* Before any cuweave call: the loader reads it once. */
    setenv("CUWEAVE_LIBCUDA", g_fake_path, 1);
    unsetenv("CUWEAVE_SERIALIZE");
    if (argc >= 3 && strcmp(argv[2], "--serialize-child") == 0) {
        if (cw_init() != CW_SUCCESS || !load_fake(g_fake_path)) return 9;
        return serialize_child();
    }
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: cuweave could not load the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!load_fake(g_fake_path)) {
        printf("FAIL: %s lacks the fake driver's control API: %s\n", g_fake_path, dlerror());
        return 1;
    }
    /* The device as the fake describes it. */
    cw_device_info info;
    cw_versions versions;
    if (cw_device_get_info(0, &info) != CW_SUCCESS || strcmp(info.name, "cuweave fake device") != 0 ||
        cw_get_versions(&versions) != CW_SUCCESS || versions.driver != 13000) {
        printf("FAIL: not the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        TEST(test_invalid_arguments),
        TEST(test_partition_validation),
        TEST(test_partition_sizes_overflow),
        TEST(test_settings_defaults),
        TEST(test_stream_priority_and_flags),
        TEST(test_stream_wrap),
        TEST(test_pool_lease),
        TEST(test_pool_acquire_wait),
        TEST(test_pool_round_robin),
        TEST(test_pool_single),
        TEST(test_serialize_env),
        TEST(test_pool_named),
        TEST(test_pool_named_double_release),
        TEST(test_pool_waiter_first),
        TEST(test_pool_hammer),
        TEST(test_stream_wait),
        TEST(test_fork_join),
        TEST(test_join_failure_gives_the_child_back),
        TEST(test_buffer_freed_during_own_capture),
        TEST(test_objects_know_their_context),
        TEST_K(test_future_hold, k_host),
        TEST_K(test_future_hold, k_write),
        TEST_K(test_future_hold, k_event),
        TEST_K(test_future_fd, k_host),
        TEST_K(test_future_fd, k_write),
        TEST_K(test_future_fd, k_event),
        TEST_K(test_future_wait_spins_within_budget, k_host),
        TEST_K(test_future_wait_spins_within_budget, k_write),
        TEST(test_future_event_takes_pool_event),
        TEST(test_future_event_wait_follows_context_sched),
        TEST(test_future_event_wait_calls),
        TEST_K(test_future_callback, k_host),
        TEST_K(test_future_callback, k_write),
        TEST_K(test_future_callback, k_event),
        TEST_K(test_watcher_timer_slack, k_write),
        TEST_K(test_watcher_timer_slack, k_event),
        TEST_K(test_watcher_woken_by_new_watch, k_write),
        TEST_K(test_watcher_woken_by_new_watch, k_event),
        TEST_K(test_future_rearm, k_host),
        TEST_K(test_future_rearm, k_write),
        TEST_K(test_future_rearm, k_event),
        TEST_K(test_when_all, k_host),
        TEST_K(test_when_all, k_write),
        TEST_K(test_when_all, k_event),
        TEST(test_timer),
        TEST(test_graph_capture_replay),
        TEST(test_graph_capture_fork_join),
        TEST(test_graph_capture_invalidated),
        TEST(test_graph_capture_states),
        TEST(test_graph_build),
        TEST(test_graph_destroy_never_fails),
        TEST(test_graph_update),
        TEST_K(test_future_fault, k_write),
        TEST_K(test_future_fault, k_event),
        TEST_K(test_future_fault, k_host),
        TEST_K(test_future_rearm_right_after_wait, k_write),
        TEST_K(test_future_rearm_right_after_wait, k_event),
        TEST_K(test_future_rearm_right_after_wait, k_host),
        TEST(test_when_all_null_entry),
        TEST_K(test_future_wait_huge_timeout, k_host),
        TEST_K(test_future_wait_huge_timeout, k_write),
        TEST_K(test_future_wait_huge_timeout, k_event),
        TEST(test_pool_acquire_wait_huge_timeout),
        TEST(test_future_no_driver_calls_in_callback),
        TEST(test_future_host_func_callback_on_callback_thread),
        TEST(test_future_destroy_query_error),
        TEST(test_future_rewatched_while_notified),
        TEST(test_fault_injection),
        TEST(test_not_ready_is_not_a_query_answer),
        TEST(test_context_info),
        TEST(test_partition_group_outlived),
        TEST(test_partition_destroyed_while_current),
        TEST(test_stream_info),
        TEST(test_destroy_ignores_and_warns),
    };
    /* CWT_FILTER=pattern runs only the matching tests (cmocka's filter) */
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
