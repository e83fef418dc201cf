/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: streams, ordering between streams, stream pools, timers. Ordering is
 * proved with data written by slow kernels (tests/kernels/test_kernels.cu),
 * not with status codes: a reader that is not ordered after a 50 ms writer
 * sees the old value. The test's own driver loader (rawcuda.h) allocates
 * memory and launches kernels; cuweave does streams, ordering, pools and
 * timers. Links libcuweave.a. Exits 77 without a GPU.
 *
 * CUWEAVE_TEST_HAMMER_S=<seconds> shortens the 10 s pool hammer (for runs
 * under compute-sanitizer).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

#define MS 1000000LL /* nanoseconds */

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static void *module;
static void *k_slow_write, *k_copy_int, *k_stamp;
static int least_prio, greatest_prio;

static int serialized(void) {
    const char *e = getenv("CUWEAVE_SERIALIZE");
    return e && strcmp(e, "1") == 0;
}

/* cuweave restores whatever was current; raw calls need the context current. */
static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

static CUstream hnd(const cw_stream *s) {
    CUstream h = (CUstream)0x7;
    assert_cw_ok(cwt_stream_handle(s, &h));
    return h;
}

static dptr dalloc(size_t bytes) {
    dptr p = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&p, bytes));
    return p;
}

static void dfree(dptr p) {
    cur();
    assert_cu_ok(rc.cuMemFree(p));
}

/* Fills n ints and waits for the fill (a memset may return before it is done,
 * and non-blocking streams do not wait for the NULL stream). */
static void dfill(dptr p, unsigned v, size_t n) {
    cur();
    assert_cu_ok(rc.cuMemsetD32(p, v, n));
    assert_cu_ok(rc.cuCtxSynchronize());
}

static int dget(dptr p) {
    int v = 0x7eadbeef;
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

static void slow_write(CUstream h, dptr p, int value, long long ns) {
    void *args[] = {&p, &value, &ns};
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, k_slow_write, h, args));
}

static void copy_int(CUstream h, dptr src, dptr dst) {
    void *args[] = {&src, &dst};
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, k_copy_int, h, args));
}

static void stamp(CUstream h, dptr out, long long ns) {
    void *args[] = {&out, &ns};
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, k_stamp, h, args));
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    cw_context_info ci;
    if (cw_context_get_info(ctx, &ci) != CW_SUCCESS) return -1;
    least_prio = ci.least_priority;
    greatest_prio = ci.greatest_priority;
    if (rc.cuCtxSetCurrent(cuctx) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_slow_write", &k_slow_write) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_copy_int", &k_copy_int) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_stamp", &k_stamp) != 0) return -1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    rc.cuCtxSetCurrent(cuctx);
    rc.cuCtxSynchronize();
    if (module) rc.cuModuleUnload(module);
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

/* ---- ordering ------------------------------------------------------------ */

/* A reader on B ordered after a 50 ms writer on A by cw_stream_wait sees the
 * written value; without the wait it (almost always) sees the old one. */
static void test_wait_orders_data(void **state) {
    (void)state;
    cw_stream *a = NULL, *b = NULL;
    assert_cw_ok(cw_stream_create(&a, ctx, NULL));
    assert_cw_ok(cw_stream_create(&b, ctx, NULL));
    assert_ptr_not_equal(hnd(a), hnd(b));
    dptr buf = dalloc(2 * sizeof(int)), out = buf + sizeof(int);

    /* control: no ordering, the race is real */
    dfill(buf, 0, 1);
    dfill(out, 0xffffffffu, 1);
    slow_write(hnd(a), buf, 42, 50 * MS);
    copy_int(hnd(b), buf, out);
    assert_cw_ok(cw_stream_synchronize(b));
    assert_cw_ok(cw_stream_synchronize(a));
    const int raced = dget(out);
    printf("# without wait the reader saw %d (42 would mean no race was shown)\n", raced);
    assert_int_equal(dget(buf), 42);

    /* ordered: exact */
    for (int round = 0; round < 3; round++) {
        const int value = 42 + round;
        dfill(buf, 0, 1);
        dfill(out, 0xffffffffu, 1);
        slow_write(hnd(a), buf, value, 50 * MS);
        const double t0 = now_ms();
        assert_cw_ok(cw_stream_wait(b, a));
        const double t_wait = now_ms() - t0;
        copy_int(hnd(b), buf, out);
        /* the wait is on the GPU: the host was not held for the writer */
        assert_cw(CW_ERROR_NOT_READY, cw_stream_query(b));
        assert_true(t_wait < 25.0);
        assert_cw_ok(cw_stream_synchronize(b));
        assert_int_equal(dget(out), value);
        /* b finished only after a's writer */
        assert_cw_ok(cw_stream_query(a));
    }
    /* dst == src is allowed and does nothing */
    assert_cw_ok(cw_stream_wait(a, a));
    assert_cw_ok(cw_stream_synchronize(a));

    dfree(buf);
    cw_stream_destroy(&a);
    cw_stream_destroy(&b);
    assert_null(a);
    assert_null(b);
}

/* Ordering across a wrapped external stream and the wrapped legacy NULL
 * stream, each as source and as destination. */
static void test_wait_wrapped_streams(void **state) {
    (void)state;
    CUstream raw = NULL;
    cur();
    assert_cu_ok(rc.cuStreamCreateWithPriority(&raw, 1 /* CU_STREAM_NON_BLOCKING */, greatest_prio));
    cw_stream *ext = NULL, *nul = NULL, *own = NULL;
    assert_cw_ok(cw_stream_wrap(&ext, ctx, raw));
    assert_cw_ok(cw_stream_wrap(&nul, ctx, NULL));
    assert_cw_ok(cw_stream_create(&own, ctx, NULL));

    cw_stream_info info;
    memset(&info, 0xee, sizeof info);
    assert_cw_ok(cw_stream_get_info(ext, &info));
    assert_ptr_equal(info.handle, raw);
    assert_int_equal(info.owned, 0);
    assert_int_equal(info.is_null, 0);
    assert_int_equal(info.from_pool, 0);
    assert_int_equal(info.priority, greatest_prio);
    assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(info.device, 0);
    memset(&info, 0xee, sizeof info);
    assert_cw_ok(cw_stream_get_info(nul, &info));
    assert_null(info.handle);
    assert_int_equal(info.owned, 0);
    assert_int_equal(info.is_null, 1);
    cw_context *back = NULL;
    assert_cw_ok(cwt_stream_context(nul, &back));
    assert_ptr_equal(back, ctx);

    dptr buf = dalloc(2 * sizeof(int)), out = buf + sizeof(int);
    struct {
        cw_stream *src, *dst;
        const char *what;
    } const cases[] = {
        {ext, own, "external -> owned"},
        {own, ext, "owned -> external"},
        {nul, ext, "NULL -> external"},
        {ext, nul, "external -> NULL"},
        {nul, own, "NULL -> owned"},
        {own, nul, "owned -> NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int value = 100 + (int)i;
        dfill(buf, 0, 1);
        dfill(out, 0xffffffffu, 1);
        slow_write(hnd(cases[i].src), buf, value, 30 * MS);
        assert_cw_ok(cw_stream_wait(cases[i].dst, cases[i].src));
        copy_int(hnd(cases[i].dst), buf, out);
        assert_cw_ok(cw_stream_synchronize(cases[i].dst));
        const int got = dget(out);
        if (got != value) fail_msg("%s: reader saw %d, expected %d", cases[i].what, got, value);
        assert_cw_ok(cw_stream_synchronize(cases[i].src));
    }

    /* a stream of another context is refused */
    rc_device d0;
    CUcontext other = NULL;
    CUstream foreign = NULL;
    assert_cu_ok(rc.cuDeviceGet(&d0, 0));
    assert_cu_ok(rawcuda_ctx_create(&rc, &other, d0));
    assert_cu_ok(rc.cuStreamCreateWithPriority(&foreign, 1, 0));
    cw_stream *bad = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_wrap(&bad, ctx, foreign));
    assert_null(bad);
    assert_cu_ok(rc.cuStreamDestroy(foreign));
    assert_cu_ok(rc.cuCtxDestroy(other));

    /* dropping the wrappers leaves the caller's stream alive */
    cw_stream_destroy(&ext);
    cw_stream_destroy(&nul);
    assert_null(ext);
    cur();
    assert_cu_ok(rc.cuStreamQuery(raw));
    slow_write(raw, buf, 7, 0);
    assert_cu_ok(rc.cuStreamSynchronize(raw));
    assert_int_equal(dget(buf), 7);
    assert_cu_ok(rc.cuStreamDestroy(raw));
    cw_stream_destroy(&own);
    dfree(buf);
}

/* Three writers of different lengths; the reader waits for each (one
 * cw_stream_wait per writer) and copies all three. */
static void test_wait_several(void **state) {
    (void)state;
    cw_stream *w[3] = {NULL, NULL, NULL}, *r = NULL;
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_create(&w[i], ctx, NULL));
    assert_cw_ok(cw_stream_create(&r, ctx, NULL));
    dptr buf = dalloc(6 * sizeof(int)), out = buf + 3 * sizeof(int);
    const long long ms[3] = {40, 10, 25};
    for (int round = 0; round < 2; round++) {
        dfill(buf, 0, 3);
        dfill(out, 0xffffffffu, 3);
        for (int i = 0; i < 3; i++) slow_write(hnd(w[i]), buf + i * sizeof(int), 1000 * (round + 1) + i, ms[i] * MS);
        for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_wait(r, w[i]));
        for (int i = 0; i < 3; i++) copy_int(hnd(r), buf + i * sizeof(int), out + i * sizeof(int));
        assert_cw_ok(cw_stream_synchronize(r));
        int got[3];
        cur();
        assert_cu_ok(rc.cuMemcpyDtoH(got, out, sizeof got));
        for (int i = 0; i < 3; i++) assert_int_equal(got[i], 1000 * (round + 1) + i);
        /* every writer is done once the reader is */
        for (int i = 0; i < 3; i++) assert_cw_ok(cw_stream_query(w[i]));
    }
    for (int i = 0; i < 3; i++) cw_stream_destroy(&w[i]);
    cw_stream_destroy(&r);
    dfree(buf);
}

/* fork/join: children start after the parent's earlier work, run at the same
 * time as each other, and the parent's later work starts after both. */
static void test_fork_join_overlap(void **state) {
    (void)state;
    cw_stream *parent = NULL, *c1 = NULL, *c2 = NULL;
    assert_cw_ok(cw_stream_create(&parent, ctx, NULL));
    /* pre[0..1], c1[2..3], c2[4..5], post[6..7] */
    dptr st = dalloc(8 * sizeof(unsigned long long));
    dfill(st, 0, 16);
    stamp(hnd(parent), st + 0 * 16, 5 * MS);
    assert_cw_ok(cw_stream_fork(&c1, parent));
    assert_cw_ok(cw_stream_fork(&c2, parent));
    assert_non_null(c1);
    assert_non_null(c2);
    const int single = serialized();
    if (!single) {
        assert_ptr_not_equal(c1, c2);
        assert_ptr_not_equal(hnd(c1), hnd(parent));
        assert_ptr_not_equal(hnd(c2), hnd(parent));
    }
    stamp(hnd(c1), st + 1 * 16, 20 * MS);
    stamp(hnd(c2), st + 2 * 16, 20 * MS);
    assert_cw_ok(cw_stream_join(parent, &c1));
    assert_cw_ok(cw_stream_join(parent, &c2));
    assert_null(c1);
    assert_null(c2);
    stamp(hnd(parent), st + 3 * 16, 1 * MS);
    assert_cw_ok(cw_stream_synchronize(parent));
    unsigned long long t[8];
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(t, st, sizeof t));
    for (int i = 0; i < 8; i++) assert_true(t[i] != 0);
    /* fork: both children after the parent's earlier stamp */
    assert_true(t[2] >= t[1]);
    assert_true(t[4] >= t[1]);
    /* join: the parent's later stamp after both children */
    assert_true(t[6] >= t[3]);
    assert_true(t[6] >= t[5]);
    const long long lo = (long long)(t[2] > t[4] ? t[2] : t[4]);
    const long long hi = (long long)(t[3] < t[5] ? t[3] : t[5]);
    printf("# fork/join: branches overlapped %.2f ms of 20 ms\n", (double)(hi - lo) / 1e6);
    if (single) {
        printf("# CUWEAVE_SERIALIZE=1: overlap not required\n");
    } else {
        /* the two branches ran at the same time */
        assert_true(t[4] < t[3] && t[2] < t[5]);
    }

    /* a fork/join round again reuses the fork pool's streams */
    assert_cw_ok(cw_stream_fork(&c1, parent));
    assert_cw_ok(cw_stream_join(parent, &c1));
    assert_cw_ok(cw_stream_synchronize(parent));
    cw_stream_destroy(&parent);
    dfree(st);
}

/* ---- creation ------------------------------------------------------------ */

static void check_stream(cw_stream *s, int want_prio, unsigned want_flags) {
    cw_stream_info info;
    memset(&info, 0xee, sizeof info);
    assert_cw_ok(cw_stream_get_info(s, &info));
    assert_ptr_equal(info.handle, hnd(s));
    assert_non_null(info.handle);
    assert_int_equal(info.device, 0);
    assert_int_equal(info.owned, 1);
    assert_int_equal(info.from_pool, 0);
    assert_int_equal(info.is_null, 0);
    assert_int_equal(info.flags, want_flags);
    assert_int_equal(info.priority, want_prio);
    int raw_prio = 99;
    unsigned raw_flags = 99;
    cur();
    assert_cu_ok(rc.cuStreamGetPriority(info.handle, &raw_prio));
    assert_cu_ok(rc.cuStreamGetFlags(info.handle, &raw_flags));
    assert_int_equal(info.priority, raw_prio);
    assert_int_equal(raw_flags, want_flags == CW_STREAM_BLOCKING ? 0u : 1u);
    cw_context *back = NULL;
    assert_cw_ok(cwt_stream_context(s, &back));
    assert_ptr_equal(back, ctx);
}

static int clamp_prio(int p) {
    const int lo = least_prio < greatest_prio ? least_prio : greatest_prio;
    const int hi = least_prio < greatest_prio ? greatest_prio : least_prio;
    return p < lo ? lo : (p > hi ? hi : p);
}

static void test_stream_create(void **state) {
    (void)state;
    printf("# priority range: least %d, greatest %d\n", least_prio, greatest_prio);
    cw_stream *s = NULL;
    /* defaults: non-blocking, priority 0 */
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    check_stream(s, clamp_prio(0), CW_STREAM_NON_BLOCKING);
    cw_stream_destroy(&s);
    assert_null(s);

    cw_stream_settings set;
    memset(&set, 0xee, sizeof set);
    cw_stream_settings_default(&set);
    assert_int_equal(set.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(set.priority, 0);
    for (size_t i = 0; i < sizeof set.reserved; i++) assert_int_equal(set.reserved[i], 0);

    /* every priority in range is kept; outside it is clamped (greatest is the
     * numerically smallest) */
    const int step = greatest_prio <= least_prio ? -1 : 1;
    for (int p = least_prio;; p += step) {
        set.priority = p;
        assert_cw_ok(cw_stream_create(&s, ctx, &set));
        check_stream(s, p, CW_STREAM_NON_BLOCKING);
        cw_stream_destroy(&s);
        if (p == greatest_prio) break;
    }
    set.priority = greatest_prio + 100 * step;
    assert_cw_ok(cw_stream_create(&s, ctx, &set));
    check_stream(s, greatest_prio, CW_STREAM_NON_BLOCKING);
    cw_stream_destroy(&s);
    set.priority = least_prio - 100 * step;
    assert_cw_ok(cw_stream_create(&s, ctx, &set));
    check_stream(s, least_prio, CW_STREAM_NON_BLOCKING);
    cw_stream_destroy(&s);

    /* opt-in blocking stream */
    set.priority = 0;
    set.flags = CW_STREAM_BLOCKING;
    assert_cw_ok(cw_stream_create(&s, ctx, &set));
    check_stream(s, clamp_prio(0), CW_STREAM_BLOCKING);
    cw_stream_destroy(&s);

    /* refused settings leave *out alone */
    cw_stream *untouched = (cw_stream *)&set;
    set.flags = 0x4;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_create(&untouched, ctx, &set));
    assert_ptr_equal(untouched, (cw_stream *)&set);
    cw_stream_settings_default(&set);
    set.reserved[7] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_create(&untouched, ctx, &set));
    assert_ptr_equal(untouched, (cw_stream *)&set);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_create(&untouched, NULL, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_create(NULL, ctx, NULL));

    /* a stream works and keeps its context alive after the caller's reference goes */
    cw_context *tmp = NULL;
    assert_cw_ok(cw_context_create(&tmp, 0));
    assert_cw_ok(cw_stream_create(&s, tmp, NULL));
    cw_context_destroy(&tmp);
    dptr buf = dalloc(sizeof(int));
    dfill(buf, 0, 1);
    slow_write(hnd(s), buf, 5, 1 * MS);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(buf), 5);
    cw_stream_destroy(&s);
    dfree(buf);
}

/* ---- pools --------------------------------------------------------------- */

static void pool_settings(cw_stream_pool_settings *ps, cw_pool_mode mode, unsigned reserved, unsigned max) {
    memset(ps, 0xee, sizeof *ps);
    cw_stream_pool_settings_default(ps);
    ps->mode = mode;
    ps->reserved_streams = reserved;
    ps->max_streams = max;
}

typedef struct {
    cw_stream_pool *pool;
    cw_stream *s;
    cw_status st;
} release_later;

static void *release_after_20ms(void *arg) {
    release_later *r = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    r->st = cw_stream_pool_release(r->pool, &r->s);
    return NULL;
}

static void test_pool_lease(void **state) {
    (void)state;
    if (serialized()) skip();
    cw_stream_pool_settings ps;
    memset(&ps, 0xee, sizeof ps);
    cw_stream_pool_settings_default(&ps);
    assert_int_equal(ps.mode, CW_POOL_LEASE);
    assert_int_equal(ps.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(ps.priority, 0);
    assert_int_equal(ps.reserved_streams, 1);
    assert_int_equal(ps.max_streams, 0);
    for (size_t i = 0; i < sizeof ps.reserved; i++) assert_int_equal(ps.reserved[i], 0);

    cw_stream_pool *pool = NULL;
    pool_settings(&ps, CW_POOL_LEASE, 1, 2);
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, &ps));
    cw_stream_pool_info stats;
    memset(&stats, 0xee, sizeof stats);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.mode, CW_POOL_LEASE);
    assert_int_equal(stats.created, 1);
    assert_int_equal(stats.leased, 0);
    assert_int_equal(stats.idle, 1);

    cw_stream *a = NULL, *b = NULL, *c = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&a, pool, 0));
    assert_cw_ok(cw_stream_pool_acquire(&b, pool, 0));
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_ptr_not_equal(hnd(a), hnd(b));
    assert_cw(CW_ERROR_POOL_EXHAUSTED, cw_stream_pool_acquire(&c, pool, 0));
    assert_null(c);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.created, 2);
    assert_int_equal(stats.leased, 2);
    assert_int_equal(stats.idle, 0);
    /* acquire_wait times out */
    const double t0 = now_ms();
    assert_cw(CW_ERROR_TIMEOUT, cw_stream_pool_acquire(&c, pool, 10000));
    const double waited = now_ms() - t0;
    assert_true(waited >= 9.0 && waited < 1000.0);
    assert_null(c);
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_pool_get_next(pool, &c));

    /* leased streams are pool streams and work */
    cw_stream_info info;
    assert_cw_ok(cw_stream_get_info(a, &info));
    assert_int_equal(info.from_pool, 1);
    assert_int_equal(info.flags, CW_STREAM_NON_BLOCKING);
    dptr buf = dalloc(sizeof(int));
    dfill(buf, 0, 1);
    slow_write(hnd(a), buf, 11, 1 * MS);
    assert_cw_ok(cw_stream_synchronize(a));
    assert_int_equal(dget(buf), 11);
    /* destroy refuses a leased stream (only the pointer is nulled, with a
     * warning) and leaves it usable */
    cw_stream *copy = a;
    cw_clear_error();
    cw_stream_destroy(&copy);
    assert_null(copy);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_cw_ok(cw_stream_get_info(a, &info));

    /* release, then the same stream comes back */
    cw_stream *old_a = a;
    assert_cw_ok(cw_stream_pool_release(pool, &a));
    assert_null(a);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.leased, 1);
    assert_int_equal(stats.idle, 1);
    assert_cw_ok(cw_stream_pool_acquire(&c, pool, 0));
    assert_ptr_equal(c, old_a);
    /* double release */
    copy = c;
    assert_cw_ok(cw_stream_pool_release(pool, &c));
    assert_cw(CW_ERROR_INVALID_STATE, cw_stream_pool_release(pool, &copy));

    /* a stream of another pool, and a plain stream, are refused */
    cw_stream_pool *other = NULL;
    assert_cw_ok(cw_stream_pool_create(&other, ctx, NULL));
    cw_stream *o = NULL, *plain = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&o, other, 0));
    copy = o;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_release(pool, &copy));
    assert_cw_ok(cw_stream_pool_release(other, &o));
    assert_cw_ok(cw_stream_create(&plain, ctx, NULL));
    copy = plain;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_release(pool, &copy));
    cw_stream_destroy(&plain);
    cw_stream_pool_destroy(&other);
    assert_null(other);

    /* acquire_wait is woken by a release from another thread */
    assert_cw_ok(cw_stream_pool_acquire(&a, pool, 0));
    assert_cw(CW_ERROR_POOL_EXHAUSTED, cw_stream_pool_acquire(&c, pool, 0));
    release_later rl = {pool, b, CW_ERROR_INTERNAL};
    pthread_t th;
    const double t1 = now_ms();
    assert_int_equal(pthread_create(&th, NULL, release_after_20ms, &rl), 0);
    assert_cw_ok(cw_stream_pool_acquire(&c, pool, 2000000));
    const double woke = now_ms() - t1;
    pthread_join(th, NULL);
    assert_cw_ok(rl.st);
    assert_ptr_equal(c, b);
    assert_true(woke >= 15.0 && woke < 1000.0);
    printf("# pool: acquire_wait woken by a release after %.1f ms (release at 20 ms)\n", woke);
    assert_cw_ok(cw_stream_pool_release(pool, &a));
    assert_cw_ok(cw_stream_pool_release(pool, &c));
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.created, 2);
    assert_int_equal(stats.leased, 0);
    assert_int_equal(stats.idle, 2);

    /* bad settings */
    cw_stream_pool *bad = NULL;
    pool_settings(&ps, CW_POOL_LEASE, 3, 2);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_create(&bad, ctx, &ps));
    pool_settings(&ps, (cw_pool_mode)7, 1, 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_create(&bad, ctx, &ps));
    pool_settings(&ps, CW_POOL_LEASE, 1, 0);
    ps.reserved[0] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_create(&bad, ctx, &ps));
    assert_null(bad);

    cw_stream_pool_destroy(&pool);
    assert_null(pool);
    dfree(buf);
}

static void test_pool_round_robin(void **state) {
    (void)state;
    if (serialized()) skip();
    cw_stream_pool_settings ps;
    pool_settings(&ps, CW_POOL_ROUND_ROBIN, 4, 0);
    cw_stream_pool *pool = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, &ps));
    cw_stream_pool_info stats;
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.mode, CW_POOL_ROUND_ROBIN);
    assert_int_equal(stats.created, 4);

    cw_stream *seq[400];
    for (int i = 0; i < 400; i++) assert_cw_ok(cw_stream_pool_get_next(pool, &seq[i]));
    cw_stream *distinct[4];
    int counts[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        distinct[i] = seq[i];
        for (int j = 0; j < i; j++) assert_ptr_not_equal(distinct[i], distinct[j]);
    }
    for (int i = 0; i < 400; i++) {
        /* in turn */
        assert_ptr_equal(seq[i], seq[i % 4]);
        for (int j = 0; j < 4; j++)
            if (seq[i] == distinct[j]) counts[j]++;
    }
    for (int j = 0; j < 4; j++) assert_int_equal(counts[j], 100);
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < j; k++) assert_ptr_not_equal(hnd(distinct[j]), hnd(distinct[k]));

    /* acquire is next; release accepts the stream and does nothing */
    cw_stream *s = NULL, *t = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&s, pool, 0));
    assert_ptr_equal(s, distinct[0]);
    assert_cw_ok(cw_stream_pool_release(pool, &s));
    assert_cw_ok(cw_stream_pool_get_next(pool, &t));
    assert_ptr_equal(t, distinct[1]);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.created, 4);
    cw_stream_pool_destroy(&pool);

    /* reserved 0 means 4 */
    pool_settings(&ps, CW_POOL_ROUND_ROBIN, 0, 0);
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, &ps));
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.created, 4);
    cw_stream_pool_destroy(&pool);
}

static void test_pool_single(void **state) {
    (void)state;
    cw_stream_pool_settings ps;
    pool_settings(&ps, CW_POOL_SINGLE, 1, 0);
    cw_stream_pool *pool = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, &ps));
    cw_stream_pool_info stats;
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.mode, CW_POOL_SINGLE);
    cw_stream *first = NULL, *s = NULL;
    assert_cw_ok(cw_stream_pool_get_next(pool, &first));
    assert_non_null(first);
    for (int i = 0; i < 10; i++) {
        assert_cw_ok(cw_stream_pool_get_next(pool, &s));
        assert_ptr_equal(s, first);
        assert_cw_ok(cw_stream_pool_acquire(&s, pool, 0));
        assert_ptr_equal(s, first);
    }
    /* a lease-mode pool under CUWEAVE_SERIALIZE=1 is single too */
    if (serialized()) {
        cw_stream_pool *lease = NULL;
        assert_cw_ok(cw_stream_pool_create(&lease, ctx, NULL));
        assert_cw_ok(cw_stream_pool_get_info(lease, &stats));
        assert_int_equal(stats.mode, CW_POOL_SINGLE);
        cw_stream_pool_destroy(&lease);
    }
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.created, 1);
    cw_stream_pool_destroy(&pool);
}

static void test_pool_named(void **state) {
    (void)state;
    if (serialized()) skip();
    static int owner_a, owner_b;
    cw_stream_pool *pool = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, NULL));
    cw_stream *ad = NULL, *ad2 = NULL, *ae = NULL, *bd = NULL, *nd = NULL, *x = NULL;
    assert_cw_ok(cw_stream_pool_acquire_named(&ad, pool, &owner_a, "decode"));
    assert_cw_ok(cw_stream_pool_acquire_named(&ad2, pool, &owner_a, "decode"));
    assert_ptr_equal(ad, ad2);
    assert_cw_ok(cw_stream_pool_acquire_named(&ae, pool, &owner_a, "encode"));
    assert_ptr_not_equal(ae, ad);
    assert_cw_ok(cw_stream_pool_acquire_named(&bd, pool, &owner_b, "decode"));
    assert_ptr_not_equal(bd, ad);
    assert_ptr_not_equal(bd, ae);
    assert_cw_ok(cw_stream_pool_acquire_named(&nd, pool, NULL, "decode"));
    assert_ptr_not_equal(nd, ad);
    assert_ptr_not_equal(nd, bd);
    assert_cw_ok(cw_stream_pool_acquire_named(&x, pool, NULL, "decode"));
    assert_ptr_equal(x, nd);
    /* a named stream is not handed out by acquire */
    assert_cw_ok(cw_stream_pool_acquire(&x, pool, 0));
    assert_true(x != ad && x != ae && x != bd && x != nd);
    assert_cw_ok(cw_stream_pool_release(pool, &x));

    char longname[65];
    memset(longname, 'n', 64);
    longname[64] = 0;
    x = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_acquire_named(&x, pool, &owner_a, longname));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_acquire_named(&x, pool, &owner_a, ""));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_stream_pool_acquire_named(&x, pool, &owner_a, NULL));
    assert_null(x);
    longname[63] = 0; /* 63 bytes is allowed */
    assert_cw_ok(cw_stream_pool_acquire_named(&x, pool, &owner_a, longname));

    cw_stream_pool_info stats;
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.named, 5);
    assert_int_equal(stats.leased, 5);
    size_t count = 0;
    assert_cw_ok(cw_stream_pool_release_owner(pool, &owner_a, &count));
    assert_int_equal(count, 3);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.named, 2);
    assert_int_equal(stats.leased, 2);
    assert_cw_ok(cw_stream_pool_release_owner(pool, &owner_a, &count));
    assert_int_equal(count, 0);
    /* B's stream is unchanged; A gets a stream again under the same name */
    assert_cw_ok(cw_stream_pool_acquire_named(&x, pool, &owner_b, "decode"));
    assert_ptr_equal(x, bd);
    assert_cw_ok(cw_stream_pool_acquire_named(&x, pool, &owner_a, "decode"));
    assert_non_null(x);
    assert_cw_ok(cw_stream_pool_release_owner(pool, &owner_a, NULL));
    assert_cw_ok(cw_stream_pool_release_owner(pool, &owner_b, NULL));
    assert_cw_ok(cw_stream_pool_release_owner(pool, NULL, &count));
    assert_int_equal(count, 1);
    assert_cw_ok(cw_stream_pool_get_info(pool, &stats));
    assert_int_equal(stats.named, 0);
    assert_int_equal(stats.leased, 0);
    assert_int_equal(stats.idle, stats.created);
    cw_stream_pool_destroy(&pool);
}

/* ---- the hammer ---------------------------------------------------------- */

#define HAMMER_THREADS 16
#define HAMMER_MAX_STREAMS 8
#define OWN_SLOTS 64

/* Ownership table: slot per stream pointer (found or claimed with CAS), and
 * who holds it (0: nobody). A stream leased twice at once is caught by the
 * atomic exchange. */
static struct {
    _Atomic(uintptr_t) key;
    atomic_int owner;
} own_table[OWN_SLOTS];

static atomic_long hammer_ops, hammer_exhausted, hammer_violations, hammer_errors;
static atomic_int hammer_first_error;
static pthread_mutex_t hammer_msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char hammer_msg[512];
static cw_stream_pool *hammer_pool;
static double hammer_deadline;

static atomic_int *own_slot(cw_stream *s) {
    const uintptr_t k = (uintptr_t)s;
    for (int i = 0; i < OWN_SLOTS; i++) {
        uintptr_t cur_key = atomic_load(&own_table[i].key);
        if (cur_key == k) return &own_table[i].owner;
        if (cur_key == 0) {
            uintptr_t expected = 0;
            if (atomic_compare_exchange_strong(&own_table[i].key, &expected, k)) return &own_table[i].owner;
            if (expected == k) return &own_table[i].owner;
        }
    }
    return NULL;
}

static void hammer_error(cw_status st, const char *what) {
    atomic_fetch_add(&hammer_errors, 1);
    int expected = 0;
    if (atomic_compare_exchange_strong(&hammer_first_error, &expected, (int)st)) {
        pthread_mutex_lock(&hammer_msg_lock);
        snprintf(hammer_msg, sizeof hammer_msg, "%s: %s (%s)", what, cw_status_name(st), cw_last_error()->message);
        pthread_mutex_unlock(&hammer_msg_lock);
    }
}

static int hold(cw_stream *s, int me) {
    atomic_int *o = own_slot(s);
    if (!o) {
        hammer_error(CW_ERROR_INTERNAL, "more distinct streams than the ownership table holds");
        return 0;
    }
    const int prev = atomic_exchange(o, me);
    if (prev != 0) atomic_fetch_add(&hammer_violations, 1);
    return 1;
}

static void unhold(cw_stream *s, int me) {
    atomic_int *o = own_slot(s);
    if (!o) return;
    const int prev = atomic_exchange(o, 0);
    if (prev != me) atomic_fetch_add(&hammer_violations, 1);
}

static void *hammer_thread(void *arg) {
    const int me = (int)(intptr_t)arg; /* 1..16 */
    cw_stream *mine = NULL;
    cw_status st = cw_stream_create(&mine, ctx, NULL);
    if (st != CW_SUCCESS) {
        hammer_error(st, "cw_stream_create");
        return NULL;
    }
    unsigned long iter = 0;
    long ops = 0, exhausted = 0;
    while (now_ms() < hammer_deadline) {
        iter++;
        cw_stream *s1 = NULL, *s2 = NULL;
        st = (iter & 1) ? cw_stream_pool_acquire(&s1, hammer_pool, 0)
                        : cw_stream_pool_acquire(&s1, hammer_pool, 500);
        ops++;
        if (st == CW_ERROR_POOL_EXHAUSTED || st == CW_ERROR_TIMEOUT) {
            exhausted++;
            continue;
        }
        if (st != CW_SUCCESS) {
            hammer_error(st, "acquire");
            break;
        }
        if (!hold(s1, me)) break;
        /* sometimes hold two at once */
        if ((iter & 3) == 0) {
            st = cw_stream_pool_acquire(&s2, hammer_pool, 0);
            ops++;
            if (st == CW_SUCCESS) {
                if (!hold(s2, me)) break;
            } else if (st == CW_ERROR_POOL_EXHAUSTED) {
                exhausted++;
                s2 = NULL;
            } else {
                hammer_error(st, "second acquire");
                break;
            }
        }
        if ((st = cw_stream_wait(s1, mine)) != CW_SUCCESS) hammer_error(st, "cw_stream_wait(s1, mine)");
        if ((st = cw_stream_wait(mine, s1)) != CW_SUCCESS) hammer_error(st, "cw_stream_wait(mine, s1)");
        ops += 2;
        if (s2) {
            if ((st = cw_stream_wait(s2, s1)) != CW_SUCCESS) hammer_error(st, "cw_stream_wait(s2, s1)");
            if ((st = cw_stream_wait(mine, s1)) != CW_SUCCESS) hammer_error(st, "cw_stream_wait(mine, s1)");
            if ((st = cw_stream_wait(mine, s2)) != CW_SUCCESS) hammer_error(st, "cw_stream_wait(mine, s2)");
            ops += 3;
            unhold(s2, me);
            if ((st = cw_stream_pool_release(hammer_pool, &s2)) != CW_SUCCESS) hammer_error(st, "release s2");
            ops++;
        }
        unhold(s1, me);
        if ((st = cw_stream_pool_release(hammer_pool, &s1)) != CW_SUCCESS) hammer_error(st, "release s1");
        ops++;
        if ((iter & 255) == 0) {
            if ((st = cw_stream_synchronize(mine)) != CW_SUCCESS) hammer_error(st, "cw_stream_synchronize");
            ops++;
        }
        if (atomic_load(&hammer_errors) > 0) break;
    }
    st = cw_stream_synchronize(mine);
    if (st != CW_SUCCESS) hammer_error(st, "final cw_stream_synchronize");
    cw_stream_destroy(&mine);
    atomic_fetch_add(&hammer_ops, ops);
    atomic_fetch_add(&hammer_exhausted, exhausted);
    return NULL;
}

static void test_pool_hammer(void **state) {
    (void)state;
    if (serialized()) skip();
    double seconds = 10.0;
    const char *e = getenv("CUWEAVE_TEST_HAMMER_S");
    if (e && atof(e) > 0) seconds = atof(e);
    cw_stream_pool_settings ps;
    pool_settings(&ps, CW_POOL_LEASE, 2, HAMMER_MAX_STREAMS);
    assert_cw_ok(cw_stream_pool_create(&hammer_pool, ctx, &ps));
    memset(own_table, 0, sizeof own_table);
    atomic_store(&hammer_ops, 0);
    atomic_store(&hammer_exhausted, 0);
    atomic_store(&hammer_violations, 0);
    atomic_store(&hammer_errors, 0);
    atomic_store(&hammer_first_error, 0);
    hammer_msg[0] = 0;

    pthread_t th[HAMMER_THREADS];
    const double t0 = now_ms();
    hammer_deadline = t0 + seconds * 1e3;
    for (int i = 0; i < HAMMER_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, (void *)(intptr_t)(i + 1)), 0);
    for (int i = 0; i < HAMMER_THREADS; i++) pthread_join(th[i], NULL);
    const double took = (now_ms() - t0) / 1e3;

    if (atomic_load(&hammer_errors) > 0) fail_msg("%ld errors; first: %s", atomic_load(&hammer_errors), hammer_msg);
    assert_int_equal(atomic_load(&hammer_violations), 0);
    cw_stream_pool_info stats;
    assert_cw_ok(cw_stream_pool_get_info(hammer_pool, &stats));
    assert_int_equal(stats.leased, 0);
    assert_int_equal(stats.idle, stats.created);
    assert_true(stats.created >= 2 && stats.created <= HAMMER_MAX_STREAMS);
    for (int i = 0; i < OWN_SLOTS; i++) assert_int_equal(atomic_load(&own_table[i].owner), 0);
    const long ops = atomic_load(&hammer_ops);
    assert_true(ops > 0);
    printf("# hammer: %d threads, %ld ops in %.1f s (%.0f ops/s), %ld exhausted, %zu streams, 0 double leases\n",
           HAMMER_THREADS, ops, took, (double)ops / took, atomic_load(&hammer_exhausted), stats.created);
    cw_stream_pool_destroy(&hammer_pool);
}

/* ---- timers -------------------------------------------------------------- */

static void test_timer(void **state) {
    (void)state;
    cw_stream *s = NULL;
    cw_timer *t = NULL;
    float ms = -1.0f;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_timer_create(&t, ctx));
    assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t, &ms));
    dptr st = dalloc(2 * sizeof(unsigned long long));
    dfill(st, 0, 4);
    assert_cw_ok(cw_timer_start(t, s));
    assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t, &ms));
    stamp(hnd(s), st, 5 * MS);
    assert_cw_ok(cw_timer_stop(t, s));
    assert_cw_ok(cw_timer_get_elapsed_ms(t, &ms));
    unsigned long long g[2];
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(g, st, sizeof g));
    const double gpu_ms = (double)(g[1] - g[0]) / 1e6;
    printf("# timer: 5 ms spin measured %.3f ms (globaltimer %.3f ms)\n", ms, gpu_ms);
    assert_true(gpu_ms >= 5.0);
    assert_true(ms >= 4.0f && ms <= 50.0f);
    assert_true(ms >= gpu_ms - 0.5);
    cw_timer_destroy(&t);
    assert_null(t);
    cw_stream_destroy(&s);
    dfree(st);
}

int main(void) {
    const int start = rawcuda_start(&rc);
    if (start != 0) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_orders_data),
        cmocka_unit_test(test_wait_wrapped_streams),
        cmocka_unit_test(test_wait_several),
        cmocka_unit_test(test_fork_join_overlap),
        cmocka_unit_test(test_stream_create),
        cmocka_unit_test(test_pool_lease),
        cmocka_unit_test(test_pool_round_robin),
        cmocka_unit_test(test_pool_single),
        cmocka_unit_test(test_pool_named),
        cmocka_unit_test(test_pool_hammer),
        cmocka_unit_test(test_timer),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
