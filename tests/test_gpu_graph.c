/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: graphs. Every check is on data the GPU wrote: a captured chain of
 * kernels and a copy gives what direct launches give; branches captured
 * across fork/join keep their order (GPU timestamps); an update changes a
 * kernel argument and the output follows; an invalidated capture is named
 * and the stream works afterwards; a WHILE node runs its body exactly the
 * number of times device code decides; an IF node takes the branch device
 * code chose. The test's own loader (rawcuda.h) allocates, copies and
 * launches; cuweave captures, instantiates, launches and updates. Links
 * libcuweave.a. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

#define MS 1000000LL /* nanoseconds */

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static void *module;
static void *k_mul_add, *k_stamp, *k_while_body, *k_set_cond, *k_slow_write;

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
    assert_cu_ok(rc.cuMemsetD32(p, 0, bytes / 4));
    assert_cu_ok(rc.cuCtxSynchronize());
    return p;
}

static void dfree(dptr p) {
    cur();
    assert_cu_ok(rc.cuMemFree(p));
}

static void dset(dptr p, int v) {
    cur();
    assert_cu_ok(rc.cuMemcpyHtoD(p, &v, sizeof v));
}

static int dget(dptr p) {
    int v = 0x7eadbeef;
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

static void mul_add(CUstream h, dptr p, int v) {
    void *args[] = {&p, &v};
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, k_mul_add, h, args));
}

static void stamp(CUstream h, dptr out, long long ns) {
    void *args[] = {&out, &ns};
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, k_stamp, h, args));
}

static int host_mul_add(int x, int v) { return x * 3 + v; }

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    if (rc.cuCtxSetCurrent(cuctx) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_mul_add", &k_mul_add) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_stamp", &k_stamp) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_while_body", &k_while_body) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_set_cond", &k_set_cond) != 0) return -1;
    if (rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_slow_write", &k_slow_write) != 0) return -1;
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

/* The chain: *p = ((x*3+v1)*3+v2)... for v = 1..n, then a copy of *p to *q. */
static void enqueue_chain(CUstream h, dptr p, dptr q, int n) {
    for (int v = 1; v <= n; v++) mul_add(h, p, v);
    cur();
    assert_cu_ok(rc.cuMemcpyDtoDAsync(q, p, sizeof(int), h));
}

/* A captured chain of kernels plus a copy gives the same data as the same
 * work launched directly, at every replay. */
static void test_chain_matches_direct(void **state) {
    (void)state;
    const int n = 12;
    dptr p = dalloc(4), q = dalloc(4);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));

    dset(p, 1);
    enqueue_chain(hnd(s), p, q, n);
    assert_cw_ok(cw_stream_synchronize(s));
    const int direct = dget(q);
    int expect = 1;
    for (int v = 1; v <= n; v++) expect = host_mul_add(expect, v);
    assert_int_equal(direct, expect);

    dset(p, 1);
    dset(q, 0);
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    enqueue_chain(hnd(s), p, q, n);
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    assert_int_equal(dget(q), 0); /* captured, not run */
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, (size_t)n + 1);
    assert_int_equal(gi.sinks, 1);
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_graph_exec_upload(e, s));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(q), direct);
    /* a second replay continues from where the first left *p */
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    int again = direct;
    for (int v = 1; v <= n; v++) again = host_mul_add(again, v);
    assert_int_equal(dget(q), again);
    /* on another stream, made by a pool */
    cw_stream_pool *pool = NULL;
    cw_stream *leased = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, NULL));
    assert_cw_ok(cw_stream_pool_acquire(&leased, pool, 0));
    dset(p, 1);
    assert_cw_ok(cw_graph_exec_launch(e, leased));
    assert_cw_ok(cw_stream_synchronize(leased));
    assert_int_equal(dget(q), direct);
    assert_cw_ok(cw_stream_pool_release(pool, &leased));
    cw_stream_pool_destroy(&pool);

    /* DOT output for debugging */
    char path[] = "/tmp/cuweave-graph-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_cw_ok(cw_graph_write_dot(g, path, 0));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(buf, "digraph"));

    cw_graph_exec_info st;
    assert_cw_ok(cw_graph_exec_get_info(e, &st));
    assert_int_equal(st.launches, 3);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_stream_destroy(&s);
    dfree(p);
    dfree(q);
}

/* Fork/join inside a capture: A, then B and C in parallel branches, then D.
 * In the replayed graph B and C start after A ends, D starts after both end,
 * and B and C overlap (they are branches, not a chain). */
static void test_fork_join_capture_order(void **state) {
    (void)state;
    dptr t = dalloc(8 * sizeof(unsigned long long));
    cw_stream *s = NULL, *b = NULL, *c = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    stamp(hnd(s), t + 0 * 16, 10 * MS);
    assert_cw_ok(cw_stream_fork(&b, s));
    assert_cw_ok(cw_stream_fork(&c, s));
    stamp(hnd(b), t + 1 * 16, 20 * MS);
    stamp(hnd(c), t + 2 * 16, 20 * MS);
    assert_cw_ok(cw_stream_join(s, &b));
    assert_cw_ok(cw_stream_join(s, &c));
    stamp(hnd(s), t + 3 * 16, 1 * MS);
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 4);
    assert_int_equal(gi.sinks, 1);
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    for (int round = 0; round < 3; round++) {
        cur();
        assert_cu_ok(rc.cuMemsetD32(t, 0, 16));
        assert_cu_ok(rc.cuCtxSynchronize());
        assert_cw_ok(cw_graph_exec_launch(e, s));
        assert_cw_ok(cw_stream_synchronize(s));
        unsigned long long v[8];
        cur();
        assert_cu_ok(rc.cuMemcpyDtoH(v, t, sizeof v));
        const unsigned long long a_end = v[1], b0 = v[2], b1 = v[3], c0 = v[4], c1 = v[5], d0 = v[6];
        assert_true(v[0] != 0 && v[7] != 0);
        if (!(b0 >= a_end && c0 >= a_end)) fail_msg("a branch started before A ended");
        if (!(d0 >= b1 && d0 >= c1)) fail_msg("D started before both branches ended");
        if (!(b0 < c1 && c0 < b1)) fail_msg("the branches did not overlap: B [%llu,%llu] C [%llu,%llu]", b0, b1, c0, c1);
    }
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_stream_destroy(&s);
    dfree(t);
}

/* Update: a re-capture with a new kernel argument is applied in place and
 * the output follows; a re-capture with another shape is instantiated
 * again, and the caller is told. */
static void test_update_changes_argument(void **state) {
    (void)state;
    dptr p = dalloc(4);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 5);
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    cw_graph_destroy(&g);
    dset(p, 0);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), 5);

    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 7);
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_update_info ui;
    assert_cw_ok(cw_graph_exec_update(e, g, &ui));
    cw_graph_destroy(&g);
    assert_int_equal(ui.kind, CW_GRAPH_UPDATED_IN_PLACE);
    dset(p, 0);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), 7);

    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 7);
    mul_add(hnd(s), p, 2);
    assert_cw_ok(cw_capture_end(&g, s));
    assert_cw_ok(cw_graph_exec_update(e, g, &ui));
    cw_graph_destroy(&g);
    assert_int_equal(ui.kind, CW_GRAPH_REINSTANTIATED);
    assert_int_not_equal(ui.driver_result, 0);
    assert_true(strlen(ui.reason) > 0);
    printf("# a changed topology was instantiated again: %s (CUgraphExecUpdateResult %d)\n", ui.reason,
           ui.driver_result);
    dset(p, 0);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), host_mul_add(host_mul_add(0, 7), 2));
    cw_graph_exec_info st;
    assert_cw_ok(cw_graph_exec_get_info(e, &st));
    assert_int_equal(st.updates_in_place, 1);
    assert_int_equal(st.reinstantiations, 1);
    cw_graph_exec_destroy(&e);
    cw_stream_destroy(&s);
    dfree(p);
}

/* A synchronize on the capturing stream invalidates the capture; the end
 * names it; the stream runs work (and captures) afterwards. */
static void test_invalidated_capture(void **state) {
    (void)state;
    dptr p = dalloc(4);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 1);
    assert_cw(CW_ERROR_CAPTURE, cw_stream_synchronize(s));
    cw_capture_state cs = CW_CAPTURE_NONE;
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_INVALIDATED);
    cw_graph *g = NULL;
    cw_clear_error();
    assert_cw(CW_ERROR_CAPTURE, cw_capture_end(&g, s));
    assert_null(g);
    printf("# %s\n", cw_last_error()->message);
    assert_non_null(strstr(cw_last_error()->message, "invalidated by cw_stream_synchronize"));
    assert_non_null(strstr(cw_last_error()->message, "cuStreamSynchronize"));
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    dset(p, 2);
    mul_add(hnd(s), p, 1);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), 7);
    /* and captures again */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 1);
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), 22);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_stream_destroy(&s);
    dfree(p);
}

/* A buffer dropped by the capturing thread during a capture (each strict
 * mode): the driver counts its stream-ordered free as unsafe; cuweave makes
 * it in relaxed mode on the release stream, so the capture is not
 * invalidated, the graph runs, and nothing is logged (before: the free was
 * refused, the capture invalidated and the memory kept until the context
 * went, with a warning). */
static int g_graph_warnings;
static void count_warnings(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if (level <= CW_LOG_WARNING) g_graph_warnings++;
}

static void test_buffer_dropped_during_capture(void **state) {
    (void)state;
    const cw_capture_mode modes[] = {CW_CAPTURE_GLOBAL, CW_CAPTURE_THREAD_LOCAL};
    dptr p = dalloc(4);
    assert_cw_ok(cw_log_set_callback(count_warnings, NULL, CW_LOG_WARNING));
    for (int i = 0; i < 2; i++) {
        g_graph_warnings = 0;
        cw_stream *s = NULL, *u = NULL;
        assert_cw_ok(cw_stream_create(&s, ctx, NULL));
        assert_cw_ok(cw_stream_create(&u, ctx, NULL));
        cw_buffer *b = NULL;
        assert_cw_ok(cw_buffer_create(&b, u, 1 << 20));
        assert_cw_ok(cw_stream_synchronize(u));
        dset(p, 1);
        assert_cw_ok(cw_capture_begin(s, NULL, modes[i]));
        mul_add(hnd(s), p, 1);
        cw_buffer_destroy(&b);
        cw_graph *g = NULL;
        assert_cw_ok(cw_capture_end(&g, s));
        cw_graph_exec *e = NULL;
        assert_cw_ok(cw_graph_instantiate(&e, g, 0));
        assert_cw_ok(cw_graph_exec_launch(e, s));
        assert_cw_ok(cw_stream_synchronize(s));
        assert_int_equal(dget(p), 1 * 3 + 1);
        assert_cw_ok(cw_context_synchronize(ctx));
        assert_int_equal(g_graph_warnings, 0);
        cw_graph_exec_destroy(&e);
        cw_graph_destroy(&g);
        cw_stream_destroy(&u);
        cw_stream_destroy(&s);
    }
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    dfree(p);
}

/* A WHILE node runs its body exactly as often as device code decides: a
 * kernel before the node sets the condition to (limit > 0); the body counts
 * and continues while count < limit. limit is read on the GPU, changed
 * between launches without touching the graph. */
static void test_while_runs_n_times(void **state) {
    (void)state;
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) skip();
    dptr count = dalloc(4), limit = dalloc(4);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_graph *g = NULL, *body = NULL, *no_else = (cw_graph *)0x1;
    assert_cw_ok(cw_graph_create(&g, ctx));
    cw_cond_handle h = 0;
    assert_cw_ok(cw_graph_add_cond_handle(g, 1, CW_COND_RESET_EACH_LAUNCH, &h));
    /* the setter, captured into g; then the WHILE node after it */
    assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL));
    {
        void *args[] = {&h, &limit};
        cur();
        assert_cu_ok(rawcuda_launch1(&rc, k_set_cond, hnd(s), args));
    }
    {
        cw_graph *got = NULL; /* the graph captured into, no new ownership */
        assert_cw_ok(cw_capture_end(&got, s));
        assert_ptr_equal(got, g);
    }
    cw_graph_node *after[1] = {NULL};
    size_t nsinks = 0;
    assert_cw_ok(cw_graph_get_sinks(g, after, 1, &nsinks));
    assert_int_equal(nsinks, 1);
    cw_cond_settings cset;
    cw_cond_settings_default(&cset); /* WHILE */
    cw_graph_node *wnode = NULL;
    assert_cw_ok(cw_graph_add_conditional(g, h, &cset, after, 1, &wnode, &body, &no_else));
    assert_non_null(body);
    assert_null(no_else);
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(body, &gi));
    assert_int_equal(gi.is_body, 1);
    cw_graph *body_copy = body;
    cw_graph_destroy(&body); /* left alone: the node owns it; only the pointer goes */
    assert_null(body);
    body = body_copy;
    assert_cw_ok(cw_graph_get_info(body, &gi));
    /* the body, captured */
    assert_cw_ok(cw_capture_begin(s, body, CW_CAPTURE_GLOBAL));
    {
        void *args[] = {&h, &count, &limit};
        cur();
        assert_cu_ok(rawcuda_launch1(&rc, k_while_body, hnd(s), args));
    }
    {
        cw_graph *got = NULL; /* the graph captured into, no new ownership */
        assert_cw_ok(cw_capture_end(&got, s));
        assert_ptr_equal(got, body);
    }
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    const int limits[] = {5, 1, 0, 1000, 3};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        dset(count, 0);
        dset(limit, limits[i]);
        assert_cw_ok(cw_graph_exec_launch(e, s));
        assert_cw_ok(cw_stream_synchronize(s));
        if (dget(count) != limits[i]) fail_msg("limit %d: the body ran %d times", limits[i], dget(count));
    }
    printf("# WHILE node: the body ran exactly 5, 1, 0, 1000 and 3 times as set on the GPU\n");
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    assert_null(g);
    cw_stream_destroy(&s);
    dfree(count);
    dfree(limit);
}

/* Built from parts: a captured graph added as a child node, then (captured
 * after it) the kernel that sets the condition, then an IF node with an
 * else body: device code picks the branch. A graph holding a conditional
 * node cannot itself become a child (the driver refuses: NOT_SUPPORTED). */
static void test_if_else_and_children(void **state) {
    (void)state;
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) skip();
    dptr p = dalloc(4), flag = dalloc(4);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_graph *chain = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 10);
    assert_cw_ok(cw_capture_end(&chain, s));
    cw_graph *g = NULL, *then_body = NULL, *else_body = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    cw_graph_node *first = NULL;
    assert_cw_ok(cw_graph_add_child(g, chain, NULL, 0, &first));
    cw_graph_destroy(&chain); /* the child is a copy */
    cw_cond_handle h = 0;
    assert_cw_ok(cw_graph_add_cond_handle(g, 0, CW_COND_RESET_EACH_LAUNCH, &h));
    assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL)); /* after the child */
    {
        void *args[] = {&h, &flag};
        cur();
        assert_cu_ok(rawcuda_launch1(&rc, k_set_cond, hnd(s), args));
    }
    {
        cw_graph *got = NULL; /* the graph captured into, no new ownership */
        assert_cw_ok(cw_capture_end(&got, s));
        assert_ptr_equal(got, g);
    }
    cw_graph_node *after[1];
    size_t n = 0;
    assert_cw_ok(cw_graph_get_sinks(g, after, 1, &n));
    assert_int_equal(n, 1);
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(g, &gi));
    assert_int_equal(gi.nodes, 2);
    cw_cond_settings cset;
    cw_cond_settings_default(&cset);
    cset.type = CW_COND_IF;
    cset.with_else = 1;
    assert_cw_ok(cw_graph_add_conditional(g, h, &cset, after, 1, NULL, &then_body, &else_body));
    assert_non_null(else_body);
    assert_cw_ok(cw_capture_begin(s, then_body, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 1);
    {
        cw_graph *got = NULL; /* the graph captured into, no new ownership */
        assert_cw_ok(cw_capture_end(&got, s));
        assert_ptr_equal(got, then_body);
    }
    assert_cw_ok(cw_capture_begin(s, else_body, CW_CAPTURE_GLOBAL));
    mul_add(hnd(s), p, 2);
    {
        cw_graph *got = NULL; /* the graph captured into, no new ownership */
        assert_cw_ok(cw_capture_end(&got, s));
        assert_ptr_equal(got, else_body);
    }
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    dset(p, 0);
    dset(flag, 1);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), host_mul_add(host_mul_add(0, 10), 1));
    dset(p, 0);
    dset(flag, 0);
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_int_equal(dget(p), host_mul_add(host_mul_add(0, 10), 2));
    /* the driver's rule, reported as such */
    cw_graph *parent = NULL;
    assert_cw_ok(cw_graph_create(&parent, ctx));
    cw_status st = cw_graph_add_child(parent, g, NULL, 0, NULL);
    printf("# a graph with a conditional node as a child: %s\n", cw_status_name(st));
    cw_graph_destroy(&parent);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_stream_destroy(&s);
    dfree(p);
    dfree(flag);
}

/* A graph made on a partition's context runs there (green contexts). */
static void test_graph_on_partition(void **state) {
    (void)state;
    if (!cw_driver_has(CW_FEATURE_GREEN_CONTEXTS)) skip();
    cw_partition_group *set = NULL;
    const unsigned counts[] = {16};
    assert_cw_ok(cw_partition_group_create(&set, 0, counts, 1, -1));
    cw_context *part = NULL;
    assert_cw_ok(cwt_partition(set, 0, &part));
    CUcontext pcu = NULL;
    assert_cw_ok(cwt_context_handle(part, &pcu));
    /* the kernels must be loaded in the partition's context */
    void *pmod = NULL, *pk = NULL;
    assert_cu_ok(rc.cuCtxSetCurrent(pcu));
    assert_cu_ok(rawcuda_kernel(&rc, &pmod, cw_test_kernels_fatbin, "cw_mul_add", &pk));
    dptr p = 0;
    assert_cu_ok(rc.cuMemAlloc(&p, 4));
    int zero = 0;
    assert_cu_ok(rc.cuMemcpyHtoD(p, &zero, 4));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, part, NULL));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    for (int v = 1; v <= 3; v++) {
        void *args[] = {&p, &v};
        assert_cu_ok(rc.cuCtxSetCurrent(pcu));
        assert_cu_ok(rawcuda_launch1(&rc, pk, hnd(s), args));
    }
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    assert_cw_ok(cw_stream_synchronize(s));
    int got = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(pcu));
    assert_cu_ok(rc.cuMemcpyDtoH(&got, p, 4));
    assert_int_equal(got, host_mul_add(host_mul_add(host_mul_add(0, 1), 2), 3));
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_stream_destroy(&s);
    assert_cu_ok(rc.cuCtxSetCurrent(pcu));
    assert_cu_ok(rc.cuMemFree(p));
    assert_cu_ok(rc.cuModuleUnload(pmod));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    cw_partition_group_destroy(&set);
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_matches_direct),
        cmocka_unit_test(test_fork_join_capture_order),
        cmocka_unit_test(test_update_changes_argument),
        cmocka_unit_test(test_invalidated_capture),
        cmocka_unit_test(test_buffer_dropped_during_capture),
        cmocka_unit_test(test_while_runs_n_times),
        cmocka_unit_test(test_if_else_and_children),
        cmocka_unit_test(test_graph_on_partition),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
