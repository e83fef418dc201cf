/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of operators, pipelines and buffers against the fake CUDA driver
 * (tests/fake_cuda.c, FAKE_CUDA_FEATURES=all): names and ports, connection
 * and check rules (each error names the operator and port), every stream
 * rule of flow.h (internal stream leased once and kept, ordered behind every
 * upstream stream, the same for several ports, the current context set,
 * outputs carrying it; the fallbacks without a pool or with it exhausted;
 * the legacy stream with neither; the manual calls), messages (optional
 * ports, skipped operators, replacement), buffers (references, read-only
 * sharing, uses recorded for every stream an operator used, the free ordered
 * after each use and after nothing else), the executor (counts, stop,
 * worker threads running independent operators at once, a failing start or
 * compute named and stopping the run without leaks, runs after a failure),
 * resident pipelines (the memory rules, one stream per operator, the loop's
 * control block), a frame's host cost (driver calls and mark allocations
 * per iteration counted; port names from memory rewritten between calls;
 * buffers of two sizes through the cache's ring), and a fault-injection
 * sweep over a pipeline run. The fake
 * runs no kernels: ordering by data is proved by test_gpu_flow on the GPU.
 * Links libcuweave.a for the test seam; the fake's path is argv[1].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "testing/seam.h"

static long (*fake_calls)(const char *entry);
static void (*fake_hold)(int on);
static int (*fake_drain)(int timeout_ms);
static void (*fake_fault)(int on);
static CUcontext (*fake_other)(void);
static int (*fake_ctx_get)(CUcontext *);
static int (*fake_ctx_set)(CUcontext);
static cw_context *ctx;

static void expect_detail(const char *a, const char *b) {
    const char *m = cw_last_error()->message;
    if (a && !strstr(m, a)) fail_msg("detail '%s' lacks '%s'", m, a);
    if (b && !strstr(m, b)) fail_msg("detail '%s' lacks '%s'", m, b);
}

/* Returns a failed call's status from a compute function. */
#define CW_TRY_TEST(x)                   \
    do {                                 \
        cw_status t_ = (x);              \
        if (t_ != CW_SUCCESS) return t_; \
    } while (0)

/* What the log callback received: messages per level, the last one. */
typedef struct LogTally {
    int warnings, errors;
    char last[512];
} LogTally;
static void log_tally(void *user, cw_log_level level, const char *msg) {
    LogTally *t = user;
    if (level == CW_LOG_WARNING) t->warnings++;
    if (level == CW_LOG_ERROR) t->errors++;
    snprintf(t->last, sizeof t->last, "%s", msg);
}

/* ---- a configurable test operator --------------------------------------- */

enum { MAXP = 4, MAXIT = 64 };
typedef struct top {
    const char *name;
    const char *in[MAXP];   /* input ports, NULL-terminated */
    const char *out[MAXP];  /* output ports */
    unsigned in_flags[MAXP];
    int use_stream;         /* 1: receive_stream on every input (or NULL for sources) */
    int keep_context;       /* with use_stream: no work on another context before receive_stream */
    int alloc;              /* bytes to cw_io_alloc and emit on every output (0: emit value only) */
    int no_emit;
    int fail_at;            /* iteration at which compute fails (0: never; iteration+1) */
    int fail_start;
    int stop_at;            /* call cw_pipeline_stop at this iteration + 1 */
    int destroy_at;         /* call cw_pipeline_destroy(&pipe) at this iteration + 1 */
    int sleep_us;           /* CPU time per compute */
    int keep_buffer;        /* retain the first received buffer (for inspection) */
    int check_detail;       /* with use_stream: clear the detail before receive_stream, note it after */
    cw_pipeline *pipe;
    /* what happened */
    atomic_int computes, starts, stops, destroyed;
    cw_stream *got[MAXIT];      /* the stream receive_stream returned, per iteration */
    cw_stream *got2[MAXIT];     /* the same for the second input */
    cw_stream *in_stream[MAXIT];  /* the stream of the first input's message */
    cw_stream *in_stream2[MAXIT];
    int have_msg[MAXIT];
    void *value[MAXIT];
    double t0[MAXIT], t1[MAXIT];  /* host time of compute */
    long seq[MAXIT];              /* global order of compute calls */
    CUcontext current[MAXIT];
    cw_devptr in_dptr[MAXIT];     /* the address of the first input's buffer (0: none) */
    cw_status detail[MAXIT];      /* check_detail: cw_last_error's status after receive_stream */
    int detail_set;               /* check_detail: calls after which it was not CW_SUCCESS */
    cw_buffer *kept;
} top;

static atomic_long g_seq;

static cw_status top_start(cw_operator *op, void *user) {
    top *t = (top *)user;
    (void)op;
    t->starts++;
    if (t->fail_start) return cw_copy_to_device(NULL, 0, NULL, 0); /* a real error with a detail */
    return CW_SUCCESS;
}
static void top_stop(cw_operator *op, void *user) {
    (void)op;
    ((top *)user)->stops++;
}
static void top_destroy(void *user) { ((top *)user)->destroyed++; }

static cw_status top_compute(cw_io *io, void *user) {
    top *t = (top *)user;
    cw_io_info io_info = {0};
    cw_status st = cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    if (st) return st;
    int i = (int)(it % MAXIT);
    t->t0[i] = now_ms();
    t->seq[i] = atomic_fetch_add(&g_seq, 1);
    if (t->in[0]) {
        cw_message m;
        st = cw_io_receive(io, t->in[0], &m);
        t->have_msg[i] = st == CW_SUCCESS;
        if (st == CW_SUCCESS) {
            t->in_stream[i] = m.stream;
            t->value[i] = m.value;
            t->in_dptr[i] = 0;
            if (m.buffer && cw_buffer_get_ptr(m.buffer, &t->in_dptr[i]) != CW_SUCCESS) t->in_dptr[i] = 0;
            if (t->keep_buffer && m.buffer && !t->kept) {
                cw_buffer_retain(m.buffer);
                t->kept = m.buffer;
            }
        } else if (st != CW_ERROR_NOT_READY) {
            return st;
        }
        if (t->in[1] && cw_io_receive(io, t->in[1], &m) == CW_SUCCESS) t->in_stream2[i] = m.stream;
    }
    if (t->use_stream) {
        /* work of its own on another context, the one it found put back
         * (flow.h: what a compute callback makes current it puts back):
         * the stream's context stays current */
        if (!t->keep_context) {
            CUcontext found = NULL;
            fake_ctx_get(&found);
            fake_ctx_set(fake_other());
            fake_ctx_set(found);
        }
        cw_stream *s = NULL;
        if (t->check_detail) cw_clear_error();
        st = cw_io_receive_stream(io, t->in[0], &s);
        if (st) return st;
        if (t->check_detail) {
            t->detail[i] = cw_last_error()->status;
            t->detail_set += t->detail[i] != CW_SUCCESS;
        }
        t->got[i] = s;
        fake_ctx_get(&t->current[i]);
        if (t->in[1]) {
            st = cw_io_receive_stream(io, t->in[1], &t->got2[i]);
            if (st) return st;
        }
    }
    if (t->sleep_us) usleep((useconds_t)t->sleep_us);
    if (t->fail_at && (int)it + 1 == t->fail_at) {
        cw_stream *x = NULL;
        return cw_stream_pool_acquire(&x, NULL, 0); /* a real error with a detail */
    }
    if (t->stop_at && (int)it + 1 == t->stop_at) cw_pipeline_stop(t->pipe);
    if (t->destroy_at && (int)it + 1 == t->destroy_at) cw_pipeline_destroy(&t->pipe);
    for (int k = 0; k < MAXP && t->out[k] && !t->no_emit; k++) {
        cw_buffer *b = NULL;
        if (t->alloc && (st = cw_io_alloc(&b, io, (size_t)t->alloc)) != CW_SUCCESS) return st;
        st = cw_io_emit(io, t->out[k], (void *)(uintptr_t)(0x1000 + it), b);
        if (st) return st;
    }
    t->t1[i] = now_ms();
    t->computes++;
    return CW_SUCCESS;
}

static const cw_operator_ops k_ops = {top_start, top_compute, top_stop, top_destroy, {0}};

static cw_operator *make_op(top *t, const cw_operator_settings *s) {
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, t->name, &k_ops, t, s));
    for (int k = 0; k < MAXP && t->in[k]; k++) {
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.flags = t->in_flags[k];
        assert_cw_ok(cw_operator_add_input(op, t->in[k], &ps));
    }
    for (int k = 0; k < MAXP && t->out[k]; k++) assert_cw_ok(cw_operator_add_output(op, t->out[k], NULL));
    return op;
}

/* The diamond A -> (B, D) -> C of the reference. */
typedef struct diamond {
    top a, b, d, c;
    cw_pipeline *p;
} diamond;

static cw_status diamond_build(diamond *g, const cw_pipeline_settings *ps, int alloc) {
    memset(g, 0, sizeof *g);
    g->a = (top){.name = "A", .out = {"out"}, .use_stream = 1, .alloc = alloc};
    g->b = (top){.name = "B", .in = {"in"}, .out = {"out"}, .use_stream = 1, .alloc = alloc};
    g->d = (top){.name = "D", .in = {"in"}, .out = {"out"}, .use_stream = 1, .alloc = alloc};
    g->c = (top){.name = "C", .in = {"in_b", "in_d"}, .use_stream = 1};
    cw_status st = cw_pipeline_create(&g->p, ctx, ps);
    if (st) return st;
    top *all[] = {&g->a, &g->b, &g->d, &g->c};
    for (int i = 0; i < 4; i++) {
        all[i]->pipe = g->p;
        if ((st = cw_pipeline_add(g->p, make_op(all[i], NULL))) != CW_SUCCESS) return st;
    }
    if ((st = cw_pipeline_connect(g->p, "A", "out", "B", "in")) != CW_SUCCESS) return st;
    if ((st = cw_pipeline_connect(g->p, "A", "out", "D", "in")) != CW_SUCCESS) return st;
    if ((st = cw_pipeline_connect(g->p, "B", "out", "C", "in_b")) != CW_SUCCESS) return st;
    return cw_pipeline_connect(g->p, "D", "out", "C", "in_d");
}

static void diamond_init(diamond *g, const cw_pipeline_settings *ps, int alloc) {
    assert_cw_ok(diamond_build(g, ps, alloc));
}

/* ---- tests ------------------------------------------------------------------ */

static void test_defaults_names_ports(void **state) {
    (void)state;
    cw_port_settings ps;
    memset(&ps, 0x5a, sizeof ps);
    cw_port_settings_default(&ps);
    assert_int_equal(ps.flags, 0);
    assert_int_equal(ps.bytes, 0);
    assert_int_equal(ps.dptr, 0);
    cw_operator_settings os;
    memset(&os, 0x5a, sizeof os);
    cw_operator_settings_default(&os);
    assert_null(os.pool);
    assert_int_equal(os.no_internal_stream + os.wait_inputs + os.resident, 0);
    cw_pipeline_settings pls;
    memset(&pls, 0x5a, sizeof pls);
    cw_pipeline_settings_default(&pls);
    assert_null(pls.pool);
    assert_int_equal(pls.threads, 1);
    cw_port_settings_default(NULL);
    cw_operator_settings_default(NULL);
    cw_pipeline_settings_default(NULL);

    top t = {.name = "x"};
    cw_operator *op = NULL;
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    const char *bad[] = {NULL, "", longname, "has space", "semi;colon", "tab\t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create(&op, bad[i], &k_ops, &t, NULL));
        expect_detail("bad operator name", NULL);
        assert_null(op);
    }
    longname[63] = '\0'; /* 63 bytes: the longest name */
    assert_cw_ok(cw_operator_create(&op, longname, &k_ops, &t, NULL));
    cw_pipeline *lp = NULL;
    assert_cw_ok(cw_pipeline_create(&lp, ctx, NULL));
    assert_cw_ok(cw_pipeline_add(lp, op));
    cw_operator *named = NULL;
    assert_cw_ok(cw_pipeline_get_operator(lp, longname, &named)); /* the whole name is kept */
    assert_ptr_equal(named, op);
    cw_pipeline_destroy(&lp);
    op = NULL; /* the pipeline owned it */
    cw_operator_destroy(&op);
    assert_null(op);
    assert_int_equal(t.destroyed, 1);
    cw_operator_ops no_compute = k_ops;
    no_compute.compute = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create(&op, "x", &no_compute, &t, NULL));
    expect_detail("'x'", "no compute");
    cw_operator_ops reserved = k_ops;
    reserved.reserved[2] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create(&op, "x", &reserved, &t, NULL));
    os.reserved[3] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create(&op, "x", &k_ops, &t, &os));
    cw_operator_settings_default(&os);
    os.pool = (cw_stream_pool *)&t;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_operator_create(&op, "x", &k_ops, &t, &os));

    /* ports */
    assert_cw_ok(cw_operator_create(&op, "op1", &k_ops, &t, NULL));
    assert_cw_ok(cw_operator_add_input(op, "in", NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_input(op, "in", NULL));
    expect_detail("'op1'", "'in'");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_output(op, "in", NULL)); /* one namespace */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_output(op, "bad name", NULL));
    expect_detail("'op1'", "bad output port name");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_input(op, NULL, NULL));
    cw_port_settings_default(&ps);
    ps.flags = 0x80;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_input(op, "in2", &ps));
    expect_detail("unknown flags", NULL);
    ps.flags = CW_PORT_OPTIONAL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_output(op, "out", &ps));
    expect_detail("'out'", "inputs only");
    cw_port_settings_default(&ps);
    ps.bytes = 16;
    ps.dptr = 0x1000;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_output(op, "out", &ps));
    expect_detail("both a size and a device pointer", NULL);
    cw_port_settings_default(&ps);
    ps.reserved[0] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_add_output(op, "out", &ps));
    assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_operator_add_input((cw_operator *)&t, "x", NULL));

    /* in a pipeline: owned, no more ports; destroy never fails: it clears the
     * caller's pointer and leaves the operator to its pipeline, with a
     * warning */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    assert_cw(CW_ERROR_INVALID_STATE, cw_operator_add_input(op, "late", NULL));
    cw_operator *keep = op;
    LogTally tally;
    memset(&tally, 0, sizeof tally);
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    cw_clear_error();
    cw_operator_destroy(&op);
    assert_null(op);
    assert_int_equal(tally.warnings, 1);
    assert_int_equal(tally.errors, 0);
    assert_non_null(strstr(tally.last, "cw_operator_destroy: operator 'op1' belongs to a pipeline"));
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* nothing failed */
    assert_int_equal(t.destroyed, 1);
    /* a handle that is not live: ignored, cleared, a warning */
    cw_operator *junk = (cw_operator *)&t;
    cw_operator_destroy(&junk);
    assert_null(junk);
    assert_int_equal(tally.warnings, 2);
    assert_non_null(strstr(tally.last, "cw_operator_destroy: *op is not a live cw_operator"));
    cw_pipeline *pjunk = (cw_pipeline *)&t;
    cw_pipeline_destroy(&pjunk);
    assert_null(pjunk);
    assert_int_equal(tally.warnings, 3);
    assert_int_equal(tally.errors, 0);
    assert_non_null(strstr(tally.last, "cw_pipeline_destroy: *p is not a live cw_pipeline"));
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    cw_operator *found = NULL;
    assert_cw_ok(cw_pipeline_get_operator(p, "op1", &found));
    assert_ptr_equal(found, keep);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_get_operator(p, "nope", &found));
    cw_pipeline_info pi;
    memset(&pi, 0x5a, sizeof pi);
    assert_cw_ok(cw_pipeline_get_info(p, &pi));
    assert_ptr_equal(pi.context, ctx);
    assert_int_equal(pi.operators, 1);
    assert_int_equal(pi.iterations, 0);
    for (size_t i = 0; i < sizeof pi.reserved; i++) assert_int_equal(pi.reserved[i], 0);
    cw_pipeline_destroy(&p);
    assert_null(p);
    assert_int_equal(t.destroyed, 2); /* the pipeline destroyed it */
    cw_pipeline_destroy(&p);          /* NULL: nothing */
    cw_pipeline_destroy(NULL);
}

static void test_connect_and_check_rules(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline *p = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_create(&p, NULL, NULL));
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 1000;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_create(&p, ctx, &ps));
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_check(p));
    expect_detail("no operator", NULL);
    top a = {.name = "A", .out = {"out"}}, b = {.name = "B", .in = {"in", "opt"}, .in_flags = {0, CW_PORT_OPTIONAL},
                                                 .out = {"out"}};
    top c = {.name = "C", .in = {"x", "many"}, .in_flags = {0, CW_PORT_MANY}, .out = {"out"}};
    top dup = {.name = "B"};
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&b, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&c, NULL)));
    cw_operator *d = make_op(&dup, NULL);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_add(p, d));
    expect_detail("'B'", "already");
    cw_operator_destroy(&d);
    cw_operator *mine = NULL;
    assert_cw_ok(cw_pipeline_get_operator(p, "A", &mine));
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_add(p, mine));

    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "Z", "out", "B", "in"));
    expect_detail("'Z'", NULL);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "A", "nope", "B", "in"));
    expect_detail("'A'", "'nope'");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "A", "out", "B", "nope"));
    expect_detail("'B'", "'nope'");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "B", "in", "C", "x"));
    expect_detail("'B'", "is an input");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "A", "out", "B", "out"));
    expect_detail("'B'", "is an output");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "B", "out", "B", "opt"));
    expect_detail("'B'", "itself");
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "A", "out", "B", "in"));
    expect_detail("connected to", "already");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "C", "out", "B", "in"));
    expect_detail("'B'", "'in'");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(NULL, "A", "out", "B", "in"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_connect(p, "A", NULL, "B", "in"));

    /* C.x is required and unconnected */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_check(p));
    expect_detail("operator 'C' input 'x'", "not connected");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_run(p, 1));
    expect_detail("operator 'C' input 'x'", NULL);
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "x"));
    /* many: two connections into one port */
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "C", "many"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "many"));
    assert_cw_ok(cw_pipeline_check(p));
    /* a cycle: C -> B (optional port) closes B -> C */
    assert_cw_ok(cw_pipeline_connect(p, "C", "out", "B", "opt"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_check(p));
    expect_detail("cycle", "'B'");
    expect_detail("'C'", NULL);
    assert_null(strstr(cw_last_error()->message, "'A'")); /* A is not on it */
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(p, &st));
    assert_int_equal(st.operators, 3);
    assert_int_equal(st.connections, 5);
    assert_int_equal(st.iterations, 0);
    cw_pipeline_destroy(&p);
    assert_int_equal(a.destroyed + b.destroyed + c.destroyed + dup.destroyed, 4);
    assert_int_equal(leaks(before, "building and checking"), 0);
}

static void test_stream_rules(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    diamond g;
    diamond_init(&g, NULL, 0);
    long waits0 = fake_calls("cuStreamWaitEvent");
    fake_ctx_set(fake_other()); /* the host program's context */
    assert_cw_ok(cw_pipeline_run(g.p, 5));
    CUcontext after = NULL;
    fake_ctx_get(&after);
    assert_ptr_equal(after, fake_other()); /* given back after the run */
    fake_ctx_set(NULL);
    long waits = fake_calls("cuStreamWaitEvent") - waits0;
    CUcontext mine = NULL;
    assert_cw_ok(cwt_context_handle(ctx, &mine));
    for (int i = 0; i < 5; i++) {
        /* each operator has its own internal stream, kept across calls */
        assert_non_null(g.a.got[i]);
        assert_ptr_equal(g.a.got[i], g.a.got[0]);
        assert_ptr_equal(g.b.got[i], g.b.got[0]);
        assert_ptr_equal(g.d.got[i], g.d.got[0]);
        assert_ptr_equal(g.c.got[i], g.c.got[0]);
        /* messages carry the producer's internal stream */
        assert_ptr_equal(g.b.in_stream[i], g.a.got[i]);
        assert_ptr_equal(g.d.in_stream[i], g.a.got[i]);
        assert_ptr_equal(g.c.in_stream[i], g.b.got[i]);
        assert_ptr_equal(g.c.in_stream2[i], g.d.got[i]);
        /* several ports: the same stream */
        assert_ptr_equal(g.c.got2[i], g.c.got[i]);
        /* the current context is the stream's, whatever the host had */
        assert_ptr_equal(g.b.current[i], mine);
        assert_ptr_equal(g.c.current[i], mine);
        /* values travel */
        assert_ptr_equal(g.b.value[i], (void *)(uintptr_t)(0x1000 + i));
    }
    cw_stream *distinct[4] = {g.a.got[0], g.b.got[0], g.d.got[0], g.c.got[0]};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) assert_ptr_not_equal(distinct[i], distinct[j]);
    /* the ordering is on the GPU: B, D, C (twice) wait per iteration */
    assert_int_equal(waits, 5 * 4);
    int dev = -1;
    assert_cw_ok(cwt_stream_device(g.c.got[0], &dev));
    assert_int_equal(dev, 0);
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(g.p, &st));
    assert_int_equal(st.iterations, 5);
    assert_int_equal(st.computes, 20);
    assert_int_equal(st.fallbacks, 0);
    assert_int_equal(g.a.starts, 1);
    assert_int_equal(g.a.stops, 1);
    /* a second run: same streams (kept until the pipeline goes), start again */
    assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_ptr_equal(g.b.got[0], distinct[1]);
    assert_int_equal(g.c.starts, 2);
    assert_int_equal(g.c.stops, 2);
    cw_pipeline_destroy(&g.p);
    assert_int_equal(leaks(before, "the diamond"), 0);
}

static void test_fallbacks(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    /* B and D share a pool of one stream: the first to ask gets it, the other
     * falls back to A's stream (the first upstream stream) */
    cw_stream_pool *one = NULL;
    cw_stream_pool_settings pss;
    cw_stream_pool_settings_default(&pss);
    pss.max_streams = 1;
    assert_cw_ok(cw_stream_pool_create(&one, ctx, &pss));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    top a = {.name = "A", .out = {"out"}, .use_stream = 1, .pipe = p};
    top b = {.name = "B", .in = {"in"}, .out = {"out"}, .use_stream = 1, .pipe = p};
    top d = {.name = "D", .in = {"in"}, .out = {"out"}, .use_stream = 1, .pipe = p};
    top e = {.name = "E", .in = {"in"}, .use_stream = 1, .pipe = p};     /* after D */
    top n = {.name = "N", .out = {"out"}, .use_stream = 1, .pipe = p};   /* a source without a pool */
    top m = {.name = "M", .in = {"in"}, .pipe = p};                     /* reads N's message */
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.pool = one;
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&b, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&d, &os)));
    cw_operator_settings_default(&os);
    os.no_internal_stream = 1;
    assert_cw_ok(cw_pipeline_add(p, make_op(&e, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&n, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&m, NULL)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "D", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "D", "out", "E", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "N", "out", "M", "in"));
    assert_cw_ok(cw_pipeline_run(p, 3));
    cw_stream *pool_stream = b.got[0];
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(b.got[i], pool_stream);  /* B holds the pool's stream */
        assert_ptr_equal(d.got[i], a.got[i]);     /* D reuses A's */
        assert_ptr_equal(e.in_stream[i], a.got[i]); /* and its output carries it */
        assert_ptr_equal(e.got[i], a.got[i]);     /* E (no pool) reuses its upstream's */
        /* N: no pool, no upstream: the legacy stream, and no stream on its output */
        cw_stream_info info;
        assert_cw_ok(cw_stream_get_info(n.got[i], &info));
        assert_int_equal(info.is_null, 1);
        assert_int_equal(info.owned, 0);
        assert_true(m.have_msg[i]);
        assert_null(m.in_stream[i]);
    }
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(p, &st));
    assert_int_equal(st.fallbacks, 3 * 2); /* D and E, each iteration */
    cw_stream_pool_info pst;
    assert_cw_ok(cw_stream_pool_get_info(one, &pst));
    assert_int_equal(pst.leased, 1);
    cw_pipeline_destroy(&p);
    assert_cw_ok(cw_stream_pool_get_info(one, &pst));
    assert_int_equal(pst.leased, 0); /* given back */
    cw_stream_pool_destroy(&one);
    assert_int_equal(leaks(before, "the fallbacks"), 0);
}

/* Manual calls: receive_many with its streams, named streams, set_output_stream. */
typedef struct manual {
    int calls;
    cw_stream *all[4];
    size_t nall;
    cw_stream *named1[3], *named1b[3], *named2[3];
    cw_stream *extra;
    int mode; /* 0: sink of MANY; 1: source choosing its output stream */
    cw_status errs[8];
} manual;

static cw_status manual_compute(cw_io *io, void *user) {
    manual *m = (manual *)user;
    int i = m->calls++;
    if (m->mode == 0) {
        cw_message msgs[4];
        cw_status st = cw_io_receive_many(io, "many", msgs, 4, &m->nall);
        if (st) return st;
        for (size_t k = 0; k < m->nall && k < 4; k++) m->all[k] = msgs[k].stream;
        size_t n = 99;
        st = cw_io_receive_many(io, "many", NULL, 0, &n); /* count only */
        if (st || n != m->nall) return CW_ERROR_INTERNAL;
        cw_io_info ii;
        if (cw_io_get_info(io, &ii) != CW_SUCCESS || ii.resident_ctl != 0) /* not resident */
            return CW_ERROR_INTERNAL;
        /* errors inside compute */
        m->errs[0] = cw_io_receive_many(io, "nope", msgs, 4, &n);
        m->errs[1] = cw_io_emit(io, "many", NULL, NULL);
        m->errs[2] = cw_io_set_output_stream(io, "many", NULL);
        m->errs[3] = cw_io_get_stream(io, "bad name", &m->extra);
        m->errs[4] = cw_io_receive_many(io, "many", NULL, 4, &n); /* msgs NULL with cap 4 */
        m->errs[5] = cw_io_get_port_ptr(io, "many", &(cw_devptr){0});
        m->errs[6] = cw_io_receive(io, "nope", &msgs[0]);
        return CW_SUCCESS;
    }
    cw_status st = cw_io_get_stream(io, "first", &m->named1[i]);
    if (!st) st = cw_io_get_stream(io, "first", &m->named1b[i]);
    if (!st) st = cw_io_get_stream(io, "second", &m->named2[i]);
    if (st) return st;
    /* out1 carries "second" (the last set wins), out2 carries nothing */
    if ((st = cw_io_set_output_stream(io, "out1", m->named1[i])) != CW_SUCCESS) return st;
    if ((st = cw_io_set_output_stream(io, "out1", m->named2[i])) != CW_SUCCESS) return st;
    if ((st = cw_io_set_output_stream(io, "out2", NULL)) != CW_SUCCESS) return st;
    if ((st = cw_io_emit(io, "out1", NULL, NULL)) != CW_SUCCESS) return st;
    return cw_io_emit(io, "out2", NULL, NULL);
}

static cw_io *g_stale_io;
static cw_status stale_compute(cw_io *io, void *user) {
    (void)user;
    g_stale_io = io;
    return CW_SUCCESS;
}

static void test_manual_calls(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    manual src = {.mode = 1}, sink = {.mode = 0};
    cw_operator_ops ops = {NULL, manual_compute, NULL, NULL, {0}};
    cw_operator *o = NULL;
    assert_cw_ok(cw_operator_create(&o, "src", &ops, &src, NULL));
    assert_cw_ok(cw_operator_add_output(o, "out1", NULL));
    assert_cw_ok(cw_operator_add_output(o, "out2", NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_operator_create(&o, "sink", &ops, &sink, NULL));
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    ps.flags = CW_PORT_MANY;
    assert_cw_ok(cw_operator_add_input(o, "many", &ps));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out1", "sink", "many"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "sink", "many"));
    assert_cw_ok(cw_pipeline_run(p, 3));
    assert_int_equal(src.calls, 3);
    assert_int_equal(sink.calls, 3);
    for (int i = 0; i < 3; i++) {
        assert_non_null(src.named1[i]);
        assert_ptr_equal(src.named1b[i], src.named1[i]); /* same name, same stream */
        assert_ptr_equal(src.named1[i], src.named1[0]);  /* across calls too */
        assert_ptr_not_equal(src.named2[i], src.named1[i]);
    }
    assert_int_equal(sink.nall, 2);
    assert_ptr_equal(sink.all[0], src.named2[2]); /* out1: the last set */
    assert_null(sink.all[1]);                     /* out2: none */
    assert_int_equal(sink.errs[0], CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.errs[1], CW_ERROR_INVALID_ARGUMENT); /* emit on an input */
    assert_int_equal(sink.errs[2], CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.errs[3], CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.errs[4], CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.errs[5], CW_ERROR_INVALID_STATE);    /* no port memory */
    assert_int_equal(sink.errs[6], CW_ERROR_INVALID_ARGUMENT);
    cw_stream_pool_info pst; /* the default pool is the pipeline's: not visible; the named streams go with it */
    (void)pst;
    cw_pipeline_destroy(&p);

    /* a cw_io kept past its compute call is refused */
    cw_operator_ops sops = {NULL, stale_compute, NULL, NULL, {0}};
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    assert_cw_ok(cw_operator_create(&o, "s", &sops, NULL, NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_pipeline_run(p, 1));
    cw_stream *s = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_io_receive_stream(g_stale_io, NULL, &s));
    expect_detail("outside the compute call", NULL);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_io_receive_stream((cw_io *)&sops, NULL, &s));
    cw_pipeline_destroy(&p);
    assert_int_equal(leaks(before, "the manual calls"), 0);
}

static void test_messages_optional_skipped(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    /* S emits nothing; X (required input from S) is skipped, and so is Y after
     * X; O has an optional input from S and runs without a message */
    top s = {.name = "S", .out = {"out"}, .no_emit = 1, .pipe = p};
    top x = {.name = "X", .in = {"in"}, .out = {"out"}, .pipe = p};
    top y = {.name = "Y", .in = {"in"}, .pipe = p};
    top o = {.name = "O", .in = {"in"}, .in_flags = {CW_PORT_OPTIONAL}, .pipe = p};
    top *all[] = {&s, &x, &y, &o};
    for (int i = 0; i < 4; i++) assert_cw_ok(cw_pipeline_add(p, make_op(all[i], NULL)));
    assert_cw_ok(cw_pipeline_connect(p, "S", "out", "X", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "X", "out", "Y", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "S", "out", "O", "in"));
    assert_cw_ok(cw_pipeline_run(p, 4));
    assert_int_equal(s.computes, 4);
    assert_int_equal(x.computes, 0);
    assert_int_equal(y.computes, 0);
    assert_int_equal(o.computes, 4);
    for (int i = 0; i < 4; i++) assert_false(o.have_msg[i]);
    assert_int_equal(x.starts, 0); /* never started: never stopped */
    assert_int_equal(x.stops, 0);
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(p, &st));
    assert_int_equal(st.skipped, 8);
    assert_int_equal(st.computes, 8);
    /* now S emits: everything runs, and messages do not outlive their iteration */
    s.no_emit = 0;
    assert_cw_ok(cw_pipeline_run(p, 2));
    assert_int_equal(x.computes, 2);
    assert_int_equal(y.computes, 2);
    assert_true(o.have_msg[1]);
    cw_pipeline_destroy(&p);
    assert_int_equal(leaks(before, "messages"), 0);
}

static void test_buffers(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_stream *s1 = NULL, *s2 = NULL;
    assert_cw_ok(cw_stream_create(&s1, ctx, NULL));
    assert_cw_ok(cw_stream_create(&s2, ctx, NULL));
    long devmem0 = fake_live("devmem");
    cw_buffer *b = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_create(&b, s1, 0));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_create(NULL, s1, 4));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_buffer_create(&b, (cw_stream *)ctx, 4));
    assert_cw_ok(cw_buffer_create(&b, s1, 4096));
    assert_int_equal(fake_live("devmem"), devmem0 + 1);
    assert_int_equal(fake_live("mempool"), 1); /* the context's pool, made once */
    cw_buffer_info info;
    assert_cw_ok(cw_buffer_get_info(b, &info));
    assert_int_equal(info.bytes, 4096);
    assert_int_equal(info.refs, 1);
    assert_int_equal(info.uses, 1); /* the allocation */
    assert_int_equal(info.device, 0);
    assert_ptr_equal(info.context, ctx); /* 0.2: cw_buffer_get_context's answer */
    for (size_t i = 0; i < sizeof info.reserved; i++) assert_int_equal(info.reserved[i], 0);
    cw_devptr p = 0, w = 0;
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    assert_cw_ok(cw_buffer_get_writable(b, &w));
    assert_true(p != 0 && p == w && p == info.dptr);
    /* shared: read-only */
    assert_cw_ok(cw_buffer_retain(b));
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_get_writable(b, &w));
    expect_detail("shared (2 references)", NULL);
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    cw_buffer *second = b;
    cw_buffer_destroy(&second);
    assert_null(second);
    assert_cw_ok(cw_buffer_get_writable(b, &w));
    /* uses: one event per stream (a later use on the same stream replaces
     * the earlier); past 8 streams the oldest fold into the release stream */
    for (int i = 0; i < 4; i++) assert_cw_ok(cw_buffer_use(b, i % 2 ? s2 : s1));
    assert_cw_ok(cw_buffer_get_info(b, &info));
    assert_int_equal(info.uses, 2);
    cw_stream *more[9] = {0};
    long waits0 = fake_calls("cuStreamWaitEvent");
    for (int i = 0; i < 9; i++) {
        assert_cw_ok(cw_stream_create(&more[i], ctx, NULL));
        assert_cw_ok(cw_buffer_use(b, more[i]));
    }
    assert_cw_ok(cw_buffer_get_info(b, &info));
    assert_int_equal(info.uses, 8);
    assert_int_equal(fake_calls("cuStreamWaitEvent") - waits0, 3); /* 11 streams: 3 folded */
    /* the free waits for every use, and is not done before the GPU gets there */
    fake_hold(1);
    assert_cw_ok(cw_buffer_use(b, s1));
    waits0 = fake_calls("cuStreamWaitEvent");
    long frees0 = fake_calls("cuMemFreeAsync");
    cw_buffer_destroy(&b);
    assert_int_equal(fake_calls("cuStreamWaitEvent") - waits0, 8); /* one per pending use */
    assert_int_equal(fake_calls("cuMemFreeAsync") - frees0, 1);
    assert_int_equal(fake_live("devmem"), devmem0 + 1); /* queued, not freed */
    fake_hold(0);
    assert_true(fake_drain(2000));
    assert_int_equal(fake_live("devmem"), devmem0);
    assert_int_equal(fake_live("badaccess"), 0);
    /* handle errors */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_retain(NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_buffer_retain((cw_buffer *)s1));
    /* destroy of what is not a live buffer: ignored, nulled, a warning (no error) */
    LogTally tally;
    memset(&tally, 0, sizeof tally);
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    cw_buffer *foreign = (cw_buffer *)s1;
    cw_buffer_destroy(&foreign);
    assert_null(foreign);
    assert_int_equal(tally.warnings, 1);
    assert_int_equal(tally.errors, 0);
    assert_non_null(strstr(tally.last, "cw_buffer_destroy: *b is not a live cw_buffer"));
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_cw_ok(cw_stream_query(s1)); /* the stream was left alone */
    cw_buffer_destroy(NULL);
    cw_buffer_destroy(&b); /* NULL inside */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_use(NULL, s1));
    /* copies and page-locked memory */
    void *host = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_host_alloc(&host, ctx, 0));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_host_alloc(NULL, ctx, 64));
    assert_null(host);
    assert_cw_ok(cw_host_alloc(&host, ctx, 64));
    assert_int_equal(((unsigned char *)host)[63], 0);
    assert_cw_ok(cw_buffer_create(&b, s1, 64));
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    memset(host, 7, 64);
    assert_cw_ok(cw_copy_to_device(s1, p, host, 64));
    memset(host, 0, 64);
    assert_cw_ok(cw_copy_to_host(s1, host, p, 64));
    assert_cw_ok(cw_stream_synchronize(s1));
    assert_int_equal(((unsigned char *)host)[0], 7);
    assert_int_equal(((unsigned char *)host)[63], 7);
    assert_cw_ok(cw_copy_to_device(s1, 0, NULL, 0)); /* nothing */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_copy_to_device(s1, 0, host, 4));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_copy_to_host(s1, NULL, p, 4));
    assert_cw_ok(cw_buffer_use(b, s1));
    cw_buffer_destroy(&b);
    /* cw_host_free nulls the caller's pointer, and accepts NULL and a NULL *p */
    long pinned = fake_live("hostmem");
    cw_host_free(ctx, &host);
    assert_null(host);
    assert_int_equal(fake_live("hostmem"), pinned - 1);
    cw_host_free(ctx, &host);
    cw_host_free(ctx, NULL);
    assert_int_equal(fake_live("hostmem"), pinned - 1);
    /* with a context that is not live: ignored (not freed), nulled, a warning */
    assert_cw_ok(cw_host_alloc(&host, ctx, 16));
    void *kept = host;
    memset(&tally, 0, sizeof tally);
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    cw_host_free((cw_context *)s1, &host);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_null(host);
    assert_int_equal(tally.warnings, 1);
    assert_int_equal(tally.errors, 0);
    assert_non_null(strstr(tally.last, "cw_host_free: ctx is not a live cw_context"));
    assert_int_equal(fake_live("hostmem"), pinned);
    cw_host_free(ctx, &kept);
    assert_int_equal(fake_live("hostmem"), pinned - 1);
    for (int i = 0; i < 9; i++) cw_stream_destroy(&more[i]);
    cw_stream_destroy(&s1);
    cw_stream_destroy(&s2);
    assert_int_equal(leaks(before, "buffers"), 0);
}

/* A sink only reads: the pipeline records a use by every stream of every
 * operator that held the buffer, and nothing more. */
static void test_pipeline_records_uses(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    for (unsigned depth = 0; depth <= 1; depth++) {
        /* depth 1: the run waits for the previous iteration, which tells the
         * cache its buffers are free (no query); depth 0: the cache asks the
         * driver */
        cw_pipeline_settings ps;
        cw_pipeline_settings_default(&ps);
        ps.max_in_flight = depth;
        cw_pipeline *p = NULL;
        assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
        top a = {.name = "A", .out = {"out"}, .use_stream = 1, .alloc = 256, .pipe = p};
        top k = {.name = "K", .in = {"in"}, .use_stream = 1, .keep_buffer = 1, .pipe = p};
        assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
        assert_cw_ok(cw_pipeline_add(p, make_op(&k, NULL)));
        assert_cw_ok(cw_pipeline_connect(p, "A", "out", "K", "in"));
        long devmem0 = fake_live("devmem");
        long records0 = fake_calls("cuEventRecord"), waits0 = fake_calls("cuStreamWaitEvent");
        long allocs0 = fake_calls("cuMemAllocFromPoolAsync"), queries0 = fake_calls("cuEventQuery");
        assert_cw_ok(cw_pipeline_run(p, 6));
        /* per iteration: one record per operator (where its call ended), one
         * wait (K on A's mark, no record of its own) */
        assert_int_equal(fake_calls("cuEventRecord") - records0, 6 * 2);
        assert_int_equal(fake_calls("cuStreamWaitEvent") - waits0, 6);
        /* K keeps frame 0's buffer; frame 1's goes back to the pipeline's
         * cache and is handed out again from frame 2 on, without a new
         * allocation (the fake finishes work at once) */
        assert_true(fake_drain(2000));
        assert_int_equal(fake_calls("cuMemAllocFromPoolAsync") - allocs0, 2);
        if (depth)
            assert_int_equal(fake_calls("cuEventQuery") - queries0, 0);
        else
            assert_true(fake_calls("cuEventQuery") - queries0 >= 4);
        assert_int_equal(fake_live("devmem"), devmem0 + 2);
        cw_buffer_info info;
        assert_cw_ok(cw_buffer_get_info(k.kept, &info));
        assert_int_equal(info.refs, 1);
        assert_int_equal(info.uses, 2); /* A's stream, K's stream */
        cw_buffer_destroy(&k.kept); /* back to the cache: not freed */
        assert_true(fake_drain(2000));
        assert_int_equal(fake_live("devmem"), devmem0 + 2);
        cw_pipeline_info st;
        assert_cw_ok(cw_pipeline_get_info(p, &st));
        assert_int_equal(st.buffers_reused, 4);
        assert_int_equal(st.buffers_allocated, 2);
        if (!depth) {
            /* while the GPU holds everything: the two cached buffers (known
             * free) serve two iterations, the third allocates instead of waiting */
            fake_hold(1);
            cw_status held = cw_pipeline_run(p, 3);
            long allocs = fake_calls("cuMemAllocFromPoolAsync") - allocs0;
            fake_hold(0);
            assert_cw_ok(held);
            assert_int_equal(allocs, 2 + 1);
            cw_buffer_destroy(&k.kept); /* K kept one of these too */
        }
        cw_pipeline_destroy(&p); /* the cache's buffers are freed */
        assert_true(fake_drain(2000));
        assert_int_equal(fake_live("devmem"), devmem0);
    }
    assert_int_equal(leaks(before, "pipeline buffers"), 0);
}

static void *stop_later(void *arg) {
    usleep(20000);
    cw_pipeline_stop((cw_pipeline *)arg);
    return NULL;
}

static void test_executor(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    /* stop from a compute call: the iteration in progress finishes */
    diamond g;
    diamond_init(&g, NULL, 64);
    g.d.stop_at = 3;
    assert_cw_ok(cw_pipeline_run(g.p, 10));
    assert_int_equal(g.c.computes, 3);
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(g.p, &st));
    assert_int_equal(st.iterations, 3);
    /* until stopped from another thread */
    g.d.stop_at = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, g.p), 0);
    assert_cw_ok(cw_pipeline_run(g.p, 0));
    pthread_join(t, NULL);
    assert_true(g.c.computes > 3);
    /* one run at a time */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_stop(NULL));
    cw_pipeline_destroy(&g.p);

    /* worker threads: B and D (20 ms of CPU each) run at the same time; C
     * always after both, A before both */
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 4;
    diamond_init(&g, &ps, 64);
    g.b.sleep_us = 20000;
    g.d.sleep_us = 20000;
    double t0 = now_ms();
    assert_cw_ok(cw_pipeline_run(g.p, 5));
    double took = now_ms() - t0;
    int overlapped = 0;
    for (int i = 0; i < 5; i++) {
        assert_true(g.a.seq[i] < g.b.seq[i] && g.a.seq[i] < g.d.seq[i]);
        assert_true(g.c.seq[i] > g.b.seq[i] && g.c.seq[i] > g.d.seq[i]);
        assert_true(g.c.t0[i] >= g.b.t1[i] && g.c.t0[i] >= g.d.t1[i]);
        if (g.b.t0[i] < g.d.t1[i] && g.d.t0[i] < g.b.t1[i]) overlapped++;
        assert_ptr_equal(g.c.in_stream[i], g.b.got[i]);
    }
    printf("# 4 threads: 5 iterations of two 20 ms operators in %.1f ms; B and D overlapped in %d of 5\n", took,
           overlapped);
    assert_int_equal(overlapped, 5); /* (no bound on `took`: sanitizers and valgrind slow the host) */
    cw_pipeline_destroy(&g.p);
    assert_int_equal(leaks(before, "the executor"), 0);
}

static void test_failures(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        cw_pipeline_settings ps;
        cw_pipeline_settings_default(&ps);
        ps.threads = threads;
        diamond g;
        diamond_init(&g, &ps, 128);
        g.b.fail_at = 3; /* iteration 2 */
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_run(g.p, 10));
        expect_detail("operator 'B' (compute)", "(pool) != NULL");
        assert_int_equal(g.b.computes, 2);
        assert_int_equal(g.c.computes, 2); /* C did not run in iteration 2 */
        assert_true(g.a.computes == 3);
        assert_int_equal(g.a.stops, 1);
        assert_int_equal(g.b.stops, 1);
        assert_int_equal(g.c.stops, 1);
        cw_pipeline_info st;
        assert_cw_ok(cw_pipeline_get_info(g.p, &st));
        assert_int_equal(st.iterations, 2);
        /* the pipeline runs again */
        g.b.fail_at = 0;
        assert_cw_ok(cw_pipeline_run(g.p, 2));
        assert_int_equal(g.c.computes, 4);
        /* a failing start */
        g.d.fail_start = 1;
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_run(g.p, 2));
        expect_detail("operator 'D' (start)", NULL);
        assert_int_equal(g.d.stops, 3); /* every run that started it stopped it, the failed start too */
        g.d.fail_start = 0;
        cw_pipeline_destroy(&g.p);
        assert_true(fake_drain(2000));
        assert_int_equal(leaks(before, "failures"), 0);
    }
}

static void *release_later(void *arg) {
    (void)arg;
    usleep(50000);
    fake_hold(0);
    return NULL;
}

typedef struct runner {
    cw_pipeline *p;
    uint64_t n;
    cw_status st;
} runner;
static void *run_thread(void *arg) {
    runner *r = (runner *)arg;
    r->st = cw_pipeline_run(r->p, r->n);
    return NULL;
}

/* cw_pipeline_destroy never fails: while the pipeline runs (from a compute
 * call, on the run's thread or a worker; or from another thread) the run is
 * asked to stop and destroys the pipeline as it returns. */
static void test_destroy_while_running(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        cw_pipeline_settings ps;
        cw_pipeline_settings_default(&ps);
        ps.threads = threads;
        diamond g;
        diamond_init(&g, &ps, 64);
        g.b.destroy_at = 2; /* from B's compute, in iteration 1 */
        cw_pipeline *p = g.p;
        assert_cw_ok(cw_pipeline_run(p, 10)); /* stopped after the iteration in progress */
        assert_null(g.b.pipe);
        assert_int_equal(g.b.computes, 2);
        assert_int_equal(g.c.computes, 2);
        /* the pipeline went as the run returned: every operator's stop and destroy ran */
        assert_int_equal(g.a.destroyed + g.b.destroyed + g.c.destroyed + g.d.destroyed, 4);
        assert_int_equal(g.a.stops, 1);
        assert_int_equal(g.c.stops, 1);
        assert_true(fake_drain(2000));
        assert_int_equal(leaks(before, "destroyed from a compute call"), 0);
    }
    /* from another thread, while a run without an end runs */
    diamond g;
    diamond_init(&g, NULL, 64);
    g.a.sleep_us = 1000;
    runner r = {g.p, 0, CW_ERROR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
    cw_pipeline_info info;
    for (int i = 0; i < 500; i++) { /* up to 5 s */
        assert_cw_ok(cw_pipeline_get_info(g.p, &info));
        if (info.iterations >= 2) break;
        usleep(10000);
    }
    assert_true(info.iterations >= 2);
    cw_pipeline *p = g.p;
    cw_pipeline_destroy(&p); /* returns at once */
    assert_null(p);
    pthread_join(t, NULL);
    assert_cw_ok(r.st);
    assert_int_equal(g.a.destroyed + g.b.destroyed + g.c.destroyed + g.d.destroyed, 4);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "destroyed from another thread"), 0);
}

/* max_in_flight: the host waits when the GPU lags that many iterations;
 * cw_pipeline_synchronize waits for the last iteration's work. */
static void test_in_flight_and_synchronize(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    assert_int_equal(ps.max_in_flight, 4);
    ps.max_in_flight = 2;
    diamond g;
    diamond_init(&g, &ps, 64);
    fake_hold(1); /* the GPU completes nothing */
    runner r = {g.p, 6, CW_ERROR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
    cw_pipeline_info st;
    for (int i = 0; i < 500; i++) { /* up to 5 s (valgrind is slow) */
        assert_cw_ok(cw_pipeline_get_info(g.p, &st));
        if (st.iterations >= 2) break;
        usleep(10000);
    }
    usleep(50000);
    assert_cw_ok(cw_pipeline_get_info(g.p, &st));
    assert_int_equal(st.iterations, 2); /* iteration 2 waits for iteration 0 on the GPU */
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_synchronize(g.p));
    fake_hold(0);
    pthread_join(t, NULL);
    assert_cw_ok(r.st);
    assert_cw_ok(cw_pipeline_get_info(g.p, &st));
    assert_int_equal(st.iterations, 6);
    /* one host wait per iteration: C's mark covers B's, D's and A's (C's
     * stream waited for them), so only the sink's event is asked about */
    long syncs0 = fake_calls("cuEventSynchronize"), queries0 = fake_calls("cuEventQuery");
    assert_cw_ok(cw_pipeline_run(g.p, 20));
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, 20);
    assert_int_equal(fake_calls("cuEventQuery") - queries0, 0);
    cw_pipeline_destroy(&g.p);

    /* unbounded, then synchronize */
    ps.max_in_flight = 0;
    diamond_init(&g, &ps, 64);
    fake_hold(1);
    assert_cw_ok(cw_pipeline_run(g.p, 5));
    assert_true(fake_live("pending") > 0);
    assert_int_equal(pthread_create(&t, NULL, release_later, NULL), 0);
    assert_cw_ok(cw_pipeline_synchronize(g.p));
    assert_int_equal(fake_live("pending"), 0);
    pthread_join(t, NULL);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_synchronize(NULL));
    cw_pipeline_destroy(&g.p);
    assert_int_equal(leaks(before, "in flight"), 0);
}

/* The in-flight bound waits for every operator's work (issue 38, defect 1):
 * A with a stream of its own, B on A's stream (no_internal_stream), C with
 * a stream of its own and no input; the fake holds the GPU from B's first
 * compute call on. B writes a buffer of its own and copies it back into
 * host memory, both on A's stream; C, max_in_flight iterations later, looks
 * whether that copy has landed (it must have: the iteration may start only
 * once the GPU is no more than max_in_flight iterations behind) and asks
 * for a buffer of B's size (the cache would hand it B's, still being
 * written). With one executor thread the bound took the waits of A's mark
 * (finished before the hold) for B's: marks of one stream were taken to be
 * in recording order while the list of them is sinks first. The GPU is let
 * go once C has run that iteration or after 300 ms (correct code waits). */
typedef struct bound_op {
    int role; /* 0 A, 1 B, 2 C */
    int max;  /* the pipeline's max_in_flight */
    uint64_t src[8], done[8]; /* B: what it writes, where its copy back lands */
    struct bound_op *b;       /* C: B's */
    atomic_int computes;
    uint64_t saw[8];          /* C: B's copy back of iteration it - max, as C's call began */
    cw_devptr b_ptr[8], c_ptr[8];
} bound_op;

static cw_status bound_compute(cw_io *io, void *user) {
    bound_op *o = user;
    cw_io_info info = {0};
    CW_TRY_TEST(cw_io_get_info(io, &info));
    const int it = (int)info.iteration;
    if (it >= 8) return CW_ERROR_INTERNAL;
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, o->role == 1 ? "in" : NULL, &s));
    if (o->role == 2 && it >= o->max) o->saw[it] = __atomic_load_n(&o->b->done[it - o->max], __ATOMIC_ACQUIRE);
    if (o->role == 1 && it == 0) fake_hold(1);
    if (o->role != 0 && (o->role == 1 || it >= 1)) {
        cw_buffer *buf = NULL;
        cw_devptr d = 0;
        CW_TRY_TEST(cw_io_alloc(&buf, io, 64));
        CW_TRY_TEST(cw_buffer_get_writable(buf, &d));
        if (o->role == 1) {
            o->b_ptr[it] = d;
            o->src[it] = 0xb0000 + (uint64_t)it;
            CW_TRY_TEST(cw_copy_to_device(s, d, &o->src[it], 8));
            CW_TRY_TEST(cw_copy_to_host(s, &o->done[it], d, 8));
        } else {
            o->c_ptr[it] = d;
        }
    }
    if (o->role == 0) CW_TRY_TEST(cw_io_emit(io, "out", (void *)(uintptr_t)(it + 1), NULL));
    atomic_fetch_add(&o->computes, 1);
    return CW_SUCCESS;
}

static void test_in_flight_bound_waits_for_every_mark(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    for (unsigned threads = 1; threads <= 2; threads++)
        for (int max = 1; max <= 4; max += 3) {
            cw_pipeline_settings ps;
            cw_pipeline_settings_default(&ps);
            ps.threads = threads;
            ps.max_in_flight = (unsigned)max;
            cw_pipeline *p = NULL;
            assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
            static bound_op ops[3];
            memset(ops, 0, sizeof ops);
            static const char *const names[] = {"A", "B", "C"};
            cw_operator_ops k = {NULL, bound_compute, NULL, NULL, {0}};
            for (int r = 0; r < 3; r++) {
                ops[r].role = r;
                ops[r].max = max;
                ops[r].b = &ops[1];
                cw_operator_settings os;
                cw_operator_settings_default(&os);
                os.no_internal_stream = r == 1;
                cw_operator *op = NULL;
                assert_cw_ok(cw_operator_create(&op, names[r], &k, &ops[r], &os));
                if (r == 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
                if (r == 1) assert_cw_ok(cw_operator_add_input(op, "in", NULL));
                assert_cw_ok(cw_pipeline_add(p, op));
            }
            assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
            runner r = {p, (uint64_t)max + 1, CW_ERROR_INTERNAL};
            pthread_t t;
            assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
            const double t0 = now_ms();
            while (atomic_load(&ops[2].computes) < max + 1 && now_ms() - t0 < 300) usleep(1000);
            fake_hold(0);
            pthread_join(t, NULL);
            assert_cw_ok(r.st);
            assert_int_equal(atomic_load(&ops[2].computes), max + 1);
            printf("# threads %u, max_in_flight %d: iteration %d began with B's iteration 0 copy %s; C's buffer %s "
                   "B's\n", threads, max, max, ops[2].saw[max] == ops[1].src[0] ? "landed" : "NOT landed",
                   ops[2].c_ptr[max] == ops[1].b_ptr[0] ? "was" : "was not");
            /* iteration max began only once iteration 0's work was done */
            assert_int_equal(ops[2].saw[max], ops[1].src[0]);
            assert_true(fake_drain(2000));
            cw_pipeline_destroy(&p);
        }
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "the in-flight bound"), 0);
}

/* The in-flight bound after a failed run (review of the ranks): a mark an
 * operator recorded in an iteration that failed is never in the bound's
 * list then; when the operator is skipped in the next run's iteration (its
 * input not ready) the list got it again, ranked as if recorded after that
 * iteration's marks of the same stream. A (a stream of its own) feeds B (on
 * A's stream, no_internal_stream). Run 1: B fails in its first call (its
 * mark on A's stream recorded, the run ends). Run 2: iteration 0, A holds
 * the GPU, writes and copies back on its stream, emits nothing (B is
 * skipped); iteration 1 (max_in_flight 1) looks whether that copy landed:
 * it must have. The stale mark, finished long before, was waited for in
 * place of A's and A's taken as finished. The GPU is let go once A has run
 * iteration 1 or after 300 ms (correct code waits). */
typedef struct rerun_op {
    int role;          /* 0 A, 1 B */
    int run;           /* 1 or 2 */
    uint64_t src, done, saw;
    atomic_int computes;
} rerun_op;

static cw_status rerun_compute(cw_io *io, void *user) {
    rerun_op *o = user;
    cw_io_info info = {0};
    CW_TRY_TEST(cw_io_get_info(io, &info));
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, o->role == 1 ? "in" : NULL, &s));
    atomic_fetch_add(&o->computes, 1);
    if (o->role == 1) return CW_ERROR_INTERNAL; /* run 1: its mark recorded, the run fails */
    if (o->run == 1) return cw_io_emit(io, "out", (void *)(uintptr_t)1, NULL);
    if (info.iteration == 0) {
        fake_hold(1);
        o->src = 0x5a1e;
        cw_buffer *buf = NULL;
        cw_devptr d = 0;
        CW_TRY_TEST(cw_io_alloc(&buf, io, 64));
        CW_TRY_TEST(cw_buffer_get_writable(buf, &d));
        CW_TRY_TEST(cw_copy_to_device(s, d, &o->src, 8));
        CW_TRY_TEST(cw_copy_to_host(s, &o->done, d, 8));
    } else if (info.iteration == 1) {
        o->saw = __atomic_load_n(&o->done, __ATOMIC_ACQUIRE);
    }
    return CW_SUCCESS; /* emits nothing: B is skipped */
}

static void test_in_flight_bound_after_failed_run(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 1;
    ps.max_in_flight = 1;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    static rerun_op ops[2];
    memset(ops, 0, sizeof ops);
    cw_operator_ops k = {NULL, rerun_compute, NULL, NULL, {0}};
    for (int r = 0; r < 2; r++) {
        ops[r].role = r;
        ops[r].run = 1;
        cw_operator_settings os;
        cw_operator_settings_default(&os);
        os.no_internal_stream = r == 1;
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create(&op, r ? "B" : "A", &k, &ops[r], &os));
        if (r == 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        if (r == 1) assert_cw_ok(cw_operator_add_input(op, "in", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw(CW_ERROR_INTERNAL, cw_pipeline_run(p, 1));
    assert_int_equal(atomic_load(&ops[1].computes), 1);
    assert_true(fake_drain(2000)); /* run 1's work (B's mark among it) is done */
    ops[0].run = 2;
    atomic_store(&ops[0].computes, 0);
    runner r = {p, 2, CW_ERROR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
    const double t0 = now_ms();
    while (atomic_load(&ops[0].computes) < 2 && now_ms() - t0 < 300) usleep(1000);
    fake_hold(0);
    pthread_join(t, NULL);
    assert_cw_ok(r.st);
    assert_int_equal(atomic_load(&ops[0].computes), 2);
    assert_int_equal(atomic_load(&ops[1].computes), 1); /* skipped in run 2 */
    printf("# run 2's iteration 1 began with iteration 0's copy %s\n",
           ops[0].saw == ops[0].src ? "landed" : "NOT landed");
    assert_int_equal(ops[0].saw, ops[0].src);
    assert_true(fake_drain(2000));
    cw_pipeline_destroy(&p);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "the bound after a failed run"), 0);
}

/* The device full: cw_io_alloc waits for the oldest cached buffer of the
 * size instead of failing (the only wait the cache makes). */
static void test_alloc_waits_when_full(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    top a = {.name = "A", .out = {"out"}, .use_stream = 1, .alloc = 256, .pipe = p};
    top k = {.name = "K", .in = {"in"}, .use_stream = 1, .pipe = p};
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&k, NULL)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "K", "in"));
    fake_hold(1);
    assert_cw_ok(cw_pipeline_run(p, 1)); /* a buffer, cached at the end, still in use */
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_fail(cwi_seam_entry("cuMemAllocFromPoolAsync"), 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, NULL), 0);
    cw_status st = cw_pipeline_run(p, 1);
    int fired = cwi_seam_fired();
    pthread_join(t, NULL);
    cwi_seam_disable();
    assert_cw_ok(st);
    assert_true(fired);
    cw_pipeline_info ps;
    assert_cw_ok(cw_pipeline_get_info(p, &ps));
    assert_int_equal(ps.buffers_allocated, 1);
    assert_int_equal(ps.buffers_reused, 1);
    cw_pipeline_destroy(&p);
    assert_int_equal(leaks(before, "a full device"), 0);
}

/* A device fault while the pipeline runs: the run stops with
 * CW_ERROR_DEVICE_FAULT naming the iteration and the operators whose work
 * was in flight; destroying everything afterwards works. */
static int g_fault_at = -1;
static cw_status fault_compute(cw_io *io, void *user) {
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_stream *s = NULL;
    const char *name = (const char *)user;
    cw_status st = cw_io_receive_stream(io, name[0] == 'A' ? NULL : "in", &s);
    if (st) return st;
    if (name[0] == 'B' && (int)it == g_fault_at) fake_fault(1); /* the next work item faults */
    return name[0] == 'C' ? CW_SUCCESS : cw_io_emit(io, "out", NULL, NULL);
}

static void test_device_fault_named(void **state) {
    (void)state;
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 1;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    static const char *names[] = {"A", "B", "C"};
    cw_operator_ops ops = {NULL, fault_compute, NULL, NULL, {0}};
    for (int i = 0; i < 3; i++) {
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &ops, (void *)names[i], NULL));
        if (i) assert_cw_ok(cw_operator_add_input(o, "in", NULL));
        if (i < 2) assert_cw_ok(cw_operator_add_output(o, "out", NULL));
        assert_cw_ok(cw_pipeline_add(p, o));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in"));
    g_fault_at = 2;
    cw_status st = cw_pipeline_run(p, 10);
    char msg[600], call[64];
    snprintf(msg, sizeof msg, "%s", cw_last_error()->message);
    snprintf(call, sizeof call, "%s", cw_last_error()->driver_call);
    const int cu = cw_last_error()->cu_result;
    printf("# %s\n", msg);
    cw_pipeline_info pst;
    assert_cw_ok(cw_pipeline_get_info(p, &pst));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_pipeline_synchronize(p));
    /* both name the driver call that saw the fault, and its CUresult */
    assert_true(cw_last_error()->driver_call[0] != 0);
    assert_int_equal(cw_last_error()->cu_result, 700); /* CUDA_ERROR_ILLEGAL_ADDRESS */
    cw_pipeline_destroy(&p); /* with the device faulted: returns, frees */
    assert_null(p);
    fake_fault(0);
    assert_true(fake_drain(2000));
    g_fault_at = -1;
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_true(call[0] != 0);
    assert_int_equal(cu, 700);
    assert_non_null(strstr(msg, "iteration 2"));
    assert_non_null(strstr(msg, "'B'"));
    assert_int_equal(pst.iterations, 3);
}

/* ---- resident pipelines ------------------------------------------------------ */

typedef struct rop {
    int copies;
    cw_stream *stream[64];
    cw_devptr in_ptr, out_ptr, ctl;
    cw_status alloc_st, emit_st, named_st;
    const char *in, *out;
} rop;

static cw_status rop_compute(cw_io *io, void *user) {
    rop *r = (rop *)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, r->in, &s);
    if (st) return st;
    r->stream[r->copies % 64] = s;
    r->copies++;
    if (r->in && (st = cw_io_get_port_ptr(io, r->in, &r->in_ptr)) != CW_SUCCESS) return st;
    if (r->out && (st = cw_io_get_port_ptr(io, r->out, &r->out_ptr)) != CW_SUCCESS) return st;
    cw_io_info ii;
    if ((st = cw_io_get_info(io, &ii)) != CW_SUCCESS) return st;
    if (!ii.resident_ctl) return CW_ERROR_INTERNAL; /* a resident capture's */
    r->ctl = ii.resident_ctl;
    cw_buffer *b = NULL;
    r->alloc_st = cw_io_alloc(&b, io, 4);
    cw_stream *n = NULL;
    r->named_st = cw_io_get_stream(io, "x", &n);
    if (r->out) r->emit_st = cw_io_emit(io, r->out, NULL, NULL);
    return CW_SUCCESS;
}

static void test_resident_pipeline(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.unroll = 2;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    cw_operator_ops ops = {NULL, rop_compute, NULL, NULL, {0}};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    /* the memory rules, one pipeline per case: A.out -> B.in */
    struct {
        size_t out_bytes;
        unsigned long long out_dptr;
        size_t in_bytes;
        unsigned long long in_dptr;
        cw_status want;
        const char *detail;
    } cases[] = {
        {64, 0, 64, 0, CW_SUCCESS, NULL},
        {64, 0, 32, 0, CW_ERROR_INVALID_ARGUMENT, "wants 64 bytes"},
        {0, 0x9000, 0, 0xa000, CW_ERROR_INVALID_ARGUMENT, "both supply device memory"},
        {0, 0, 0, 0, CW_ERROR_INVALID_ARGUMENT, "declares memory"},
        {64, 0, 0, 0, CW_SUCCESS, NULL},
        {0, 0, 0, 0xa000, CW_SUCCESS, NULL},
        {16, 0, 0, 0xa000, CW_SUCCESS, NULL}, /* the pointer wins */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cw_pipeline *p = NULL;
        assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
        rop ra = {.out = "out"}, rb = {.in = "in"};
        cw_operator *a = NULL, *b = NULL;
        assert_cw_ok(cw_operator_create(&a, "A", &ops, &ra, &os));
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.bytes = cases[i].out_bytes;
        ps.dptr = cases[i].out_dptr;
        assert_cw_ok(cw_operator_add_output(a, "out", &ps));
        assert_cw_ok(cw_operator_create(&b, "B", &ops, &rb, &os));
        cw_port_settings_default(&ps);
        ps.bytes = cases[i].in_bytes;
        ps.dptr = cases[i].in_dptr;
        assert_cw_ok(cw_operator_add_input(b, "in", &ps));
        assert_cw_ok(cw_pipeline_add(p, a));
        assert_cw_ok(cw_pipeline_add(p, b));
        assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
        long devmem0 = fake_live("devmem");
        assert_cw(cases[i].want, cw_pipeline_make_resident(p, r));
        if (cases[i].detail) {
            expect_detail(cases[i].detail, "'A'");
            expect_detail("'B'", NULL);
            if (cases[i].out_bytes || cases[i].out_dptr) /* check applies the rules once a port declares memory */
                assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_check(p));
        } else {
            assert_cw_ok(cw_resident_build(r));
            /* once per unrolled copy, and once first for the build's look at
             * the workload (gate CW_RESIDENT_GATE_AUTO, the default) */
            assert_int_equal(ra.copies, 2 + 1);
            assert_int_equal(rb.copies, 2 + 1);
            assert_true(ra.out_ptr != 0);
            assert_int_equal(ra.out_ptr, rb.in_ptr); /* one buffer, both ends */
            if (cases[i].in_dptr) assert_int_equal(rb.in_ptr, cases[i].in_dptr);
            assert_int_equal(fake_live("devmem"), devmem0 + (cases[i].in_dptr ? 0 : 1));
            assert_ptr_not_equal(ra.stream[0], rb.stream[0]); /* a branch per operator */
            cw_devptr ctl = 0;
            assert_cw_ok(cw_resident_get_ctl(r, &ctl));
            assert_int_equal(ra.ctl, ctl);
            assert_int_equal(ra.alloc_st, CW_ERROR_INVALID_STATE);
            assert_int_equal(ra.named_st, CW_ERROR_INVALID_STATE);
            assert_int_equal(ra.emit_st, CW_SUCCESS);
            /* the loop must go before the pipeline; a fresh loop for the next case */
            cw_resident_destroy(&r);
            assert_cw_ok(cw_resident_create(&r, ctx, &rs));
        }
        cw_pipeline_destroy(&p);
        assert_int_equal(fake_live("devmem"), devmem0);
        if (i == 0) snapshot(before); /* the first build grew the context's fork pool: not a leak */
    }
    /* several sources (Holoscan allows one): S1 and S2 feed J; each gets its
     * own branch, J one stream after both */
    {
        cw_pipeline *p2 = NULL;
        assert_cw_ok(cw_pipeline_create(&p2, ctx, NULL));
        rop s1 = {.out = "out"}, s2 = {.out = "out"}, j = {.in = "a"};
        cw_operator *o1 = NULL, *o2 = NULL, *oj = NULL;
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.bytes = 32;
        assert_cw_ok(cw_operator_create(&o1, "S1", &ops, &s1, &os));
        assert_cw_ok(cw_operator_add_output(o1, "out", &ps));
        assert_cw_ok(cw_operator_create(&o2, "S2", &ops, &s2, &os));
        assert_cw_ok(cw_operator_add_output(o2, "out", &ps));
        assert_cw_ok(cw_operator_create(&oj, "J", &ops, &j, &os));
        assert_cw_ok(cw_operator_add_input(oj, "a", NULL));
        assert_cw_ok(cw_operator_add_input(oj, "b", NULL));
        assert_cw_ok(cw_pipeline_add(p2, o1));
        assert_cw_ok(cw_pipeline_add(p2, o2));
        assert_cw_ok(cw_pipeline_add(p2, oj));
        assert_cw_ok(cw_pipeline_connect(p2, "S1", "out", "J", "a"));
        assert_cw_ok(cw_pipeline_connect(p2, "S2", "out", "J", "b"));
        assert_cw_ok(cw_pipeline_make_resident(p2, r));
        assert_cw_ok(cw_resident_build(r));
        assert_int_equal(s1.copies, 2 + 1); /* + the look of gate AUTO (the default) */
        assert_int_equal(s2.copies, 2 + 1);
        assert_int_equal(j.copies, 2 + 1);
        assert_ptr_not_equal(s1.stream[0], s2.stream[0]);
        assert_ptr_not_equal(j.stream[0], s1.stream[0]);
        assert_int_equal(j.in_ptr, s1.out_ptr);
        assert_true(s2.out_ptr != 0 && s2.out_ptr != s1.out_ptr);
        /* A loop that traces gets a stage per operator inside the workload's
         * (per copy: workload, S1, S2, J); a fault names the operator. The
         * fake runs no kernel: the marks are what the GPU would write when
         * S2 faults after S1 ended. */
        rs.trace = 1;
        assert_cw_ok(cw_resident_configure(r, &rs));
        assert_cw_ok(cw_resident_build(r));
        volatile unsigned long long *marks = NULL;
        unsigned stages = 0;
        assert_int_equal(cwi_resident_trace(r, &marks, &stages), 0);
        assert_int_equal(stages, 2 * 4);
        assert_cw_ok(cw_resident_launch(r));
        marks[0] = 1;                /* workload begun */
        marks[2] = 2, marks[3] = 3; /* S1 begun and ended */
        marks[4] = 4;                /* S2 begun */
        assert_cw_ok(cw_resident_data_ready(r, NULL));
        assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
        cwi_seam_reset();
        cwi_seam_fail(cwi_seam_entry("cuStreamQuery"), 1, 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */);
        assert_cw(CW_ERROR_DEVICE_FAULT, cw_resident_wait_result(r, 1, 2000));
        printf("# %s\n", cw_last_error()->message);
        assert_non_null(strstr(cw_last_error()->message, "in stage 'operator S2' (workload, copy 1 of 2"));
        cwi_seam_reset();
        cwi_seam_disable();
        assert_cw_ok(cw_resident_tear_down(r, 1000));
        rs.trace = 0;
        cw_resident_destroy(&r);
        assert_cw_ok(cw_resident_create(&r, ctx, &rs));
        cw_pipeline_destroy(&p2);
        snapshot(before); /* three branches at once grew the context's fork pool: not a leak */
    }
    /* an operator that is not resident is named */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    top plain = {.name = "plain"};
    assert_cw_ok(cw_pipeline_add(p, make_op(&plain, NULL)));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_resident(p, r));
    expect_detail("operator 'plain'", "not GPU-resident");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_resident(p, NULL));
    cw_pipeline_destroy(&p);
    /* many-inputs ports are refused for port memory */
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    rop ra = {.out = "out"}, rb = {.in = "in"};
    cw_operator *a = NULL, *b = NULL;
    assert_cw_ok(cw_operator_create(&a, "A", &ops, &ra, &os));
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    ps.bytes = 8;
    assert_cw_ok(cw_operator_add_output(a, "out", &ps));
    assert_cw_ok(cw_operator_create(&b, "B", &ops, &rb, &os));
    ps.flags = CW_PORT_MANY;
    assert_cw_ok(cw_operator_add_input(b, "in", &ps));
    assert_cw_ok(cw_pipeline_add(p, a));
    assert_cw_ok(cw_pipeline_add(p, b));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_resident(p, r));
    expect_detail("operator 'B' input 'in'", "many");
    cw_pipeline_destroy(&p);
    assert_int_equal(leaks(before, "resident pipelines"), 0); /* the snapshot had a loop too */
    cw_resident_destroy(&r);
}

/* Port memory under cw_pipeline_run: the same memory for both ends, a sink's
 * unconnected output with memory of its own, read from outside; the writer
 * waits for last iteration's reader before writing again. Resident captures
 * start operators once and stop them when the pipeline goes. */
typedef struct pm {
    const char *in, *out;
    int starts, stops, copies;
    cw_devptr in_ptr, out_ptr;
} pm;
static cw_status pm_start(cw_operator *op, void *user) {
    (void)op;
    ((pm *)user)->starts++;
    return CW_SUCCESS;
}
static void pm_stop(cw_operator *op, void *user) {
    (void)op;
    ((pm *)user)->stops++;
}
static cw_status pm_compute(cw_io *io, void *user) {
    pm *m = (pm *)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, m->in, &s);
    if (st) return st;
    m->copies++;
    if (m->in && (st = cw_io_get_port_ptr(io, m->in, &m->in_ptr))) return st;
    if ((st = cw_io_get_port_ptr(io, m->out, &m->out_ptr))) return st;
    return cw_io_emit(io, m->out, NULL, NULL); /* the message says "ready" under cw_pipeline_run */
}

static void test_port_memory_under_run(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_operator_ops ops = {pm_start, pm_compute, pm_stop, NULL, {0}};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    pm a = {.out = "out"}, b = {.in = "in", .out = "res"};
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator *o = NULL;
    assert_cw_ok(cw_operator_create(&o, "A", &ops, &a, &os));
    ps.bytes = 64;
    assert_cw_ok(cw_operator_add_output(o, "out", &ps));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_operator_create(&o, "B", &ops, &b, &os));
    assert_cw_ok(cw_operator_add_input(o, "in", NULL));
    ps.bytes = 16;
    assert_cw_ok(cw_operator_add_output(o, "res", &ps)); /* unconnected: its own memory */
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    cw_devptr d = 0;
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_get_port_ptr(p, "B", "res", &d)); /* not set up yet */
    long devmem0 = fake_live("devmem");
    long waits0 = fake_calls("cuStreamWaitEvent");
    assert_cw_ok(cw_pipeline_run(p, 3));
    /* B waits for A each iteration; from the second on, A waits for B */
    assert_int_equal(fake_calls("cuStreamWaitEvent") - waits0, 3 + 2);
    assert_int_equal(fake_live("devmem"), devmem0 + 2);
    cw_devptr ao = 0, bi = 0, br = 0;
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "A", "out", &ao));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "B", "in", &bi));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "B", "res", &br));
    assert_true(ao != 0 && ao == bi && br != 0 && br != ao);
    assert_int_equal(a.out_ptr, ao);
    assert_int_equal(b.in_ptr, ao);
    assert_int_equal(b.out_ptr, br);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_get_port_ptr(p, "Z", "res", &d));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_get_port_ptr(p, "B", "zz", &d));
    assert_int_equal(a.starts, 1);
    assert_int_equal(a.stops, 1);
    /* the same operators captured into a loop: started once, stopped with the pipeline */
    cw_resident *r = NULL;
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.unroll = 3;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_pipeline_make_resident(p, r));
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(a.copies, 3 + 3 + 1); /* + the look of gate AUTO (the default) */
    assert_int_equal(a.starts, 2);
    assert_int_equal(a.stops, 1);
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
    assert_int_equal(a.stops, 2);
    assert_int_equal(b.stops, 2);
    assert_int_equal(fake_live("devmem"), devmem0);
    assert_int_equal(leaks(before, "port memory"), 0);
}

/* ---- fault injection ------------------------------------------------------- */

static char g_sweep_call[64]; /* the detail of the scenario's failure */
static int g_sweep_cu;

static cw_status sweep_scenario(void) {
    diamond g;
    cw_status st = diamond_build(&g, NULL, 64);
    if (st == CW_SUCCESS) st = cw_pipeline_run(g.p, 2);
    snprintf(g_sweep_call, sizeof g_sweep_call, "%s", st ? cw_last_error()->driver_call : "");
    g_sweep_cu = st ? cw_last_error()->cu_result : 0;
    cw_pipeline_destroy(&g.p);
    fake_drain(2000);
    return st;
}

static void test_fault_sweep(void **state) {
    (void)state;
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    assert_int_equal(sweep_scenario(), CW_SUCCESS); /* warm the pools */
    long before[NKINDS];
    snapshot(before);
    cwi_seam_reset();
    assert_int_equal(sweep_scenario(), CW_SUCCESS);
    const unsigned long calls = cwi_seam_calls(-1);
    assert_int_equal(leaks(before, "the clean run"), 0);
    unsigned long tried = 0, handled = 0, bad = 0, absorbed = 0;
    for (unsigned long k = 1; k <= calls; k++) {
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        cw_status st = sweep_scenario();
        int fired = cwi_seam_fired();
        const char *entry = "?";
        if (cwi_seam_fired_entry() >= 0) entry = cwi_seam_entry_name(cwi_seam_fired_entry());
        cwi_seam_reset();
        if (!fired) break;
        tried++;
        int is_release = strstr(entry, "Destroy") || strstr(entry, "Free") || strstr(entry, "Unload") ||
                         strstr(entry, "Synchronize");
        if (is_release) {
            absorbed++;
            snapshot(before);
            continue;
        }
        if (st == CW_SUCCESS && !strcmp(entry, "cuMemAllocFromPoolAsync")) {
            /* out of memory: cw_io_alloc waited for a cached buffer instead */
            absorbed++;
        } else if (st == CW_SUCCESS) {
            /* a failed query or context switch absorbed on the way is fine; a
             * failed allocation or record that still reports success is not */
            if (strstr(entry, "Alloc") || strstr(entry, "Record") || strstr(entry, "Launch")) {
                printf("# call %lu (%s) failing: the run returned CW_SUCCESS\n", k, entry);
                bad++;
            }
        } else {
            handled++;
            /* every failure names the driver call and its CUresult, those
             * inside an operator's compute included */
            if (st == CW_ERROR_OUT_OF_MEMORY && (strcmp(g_sweep_call, entry) || g_sweep_cu != 2)) {
                printf("# call %lu (%s) failing: the detail names '%s' (CUresult %d)\n", k, entry, g_sweep_call,
                       g_sweep_cu);
                bad++;
            }
        }
        if (leaks(before, entry)) {
            bad++;
            snapshot(before);
        }
    }
    cwi_seam_disable();
    printf("# pipeline fault sweep: %lu driver calls, %lu failed in turn, %lu errors reported, %lu absorbed "
           "(failed releases; allocations served by waiting for a cached buffer), %lu bad\n",
           calls, tried, handled, absorbed, bad);
    assert_true(tried > 20);
    assert_int_equal(bad, 0);
    /* the library is usable afterwards */
    assert_int_equal(sweep_scenario(), CW_SUCCESS);
}

/* A failure inside cw_pipeline_create (its stream pool's first stream) is
 * reported as cw_pipeline_create's, with the driver call and CUresult. */
static void test_error_names_public_call(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    const char *entries[] = {"cuStreamCreateWithPriority", "cuEventCreate"};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
        cwi_seam_reset();
        cwi_seam_fail(cwi_seam_entry(entries[i]), 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        cw_pipeline *p = (cw_pipeline *)0x1;
        const cw_status st = cw_pipeline_create(&p, ctx, NULL);
        const int fired = cwi_seam_fired();
        cwi_seam_reset();
        cwi_seam_disable();
        if (!fired) { /* an event from the context's pool: no driver call */
            assert_cw_ok(st);
            cw_pipeline_destroy(&p);
            continue;
        }
        assert_int_equal(st, CW_ERROR_OUT_OF_MEMORY);
        assert_ptr_equal(p, (cw_pipeline *)0x1);
        const cw_error_info *e = cw_last_error();
        printf("# %s failing in cw_pipeline_create: %s\n", entries[i], e->message);
        assert_string_equal(e->function, "cw_pipeline_create");
        assert_string_equal(e->driver_call, entries[i]);
        assert_int_equal(e->cu_result, 2);
    }
    assert_int_equal(leaks(before, "failed pipeline creations"), 0);
}

/* A driver call that fails inside an operator's compute (cw_io_alloc's
 * allocation, cw_io_receive_stream's wait for an upstream stream) is
 * reported by cw_pipeline_run with the driver call and its CUresult in the
 * detail, not only in the message; with one thread and with worker threads
 * (where compute runs on another thread than cw_pipeline_run). */
static void test_compute_failure_detail(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    const struct {
        const char *entry;
        int result;
        cw_status status;
        const char *inside; /* the public call compute made */
    } cases[] = {
        {"cuMemAllocFromPoolAsync", 2 /* CUDA_ERROR_OUT_OF_MEMORY */, CW_ERROR_OUT_OF_MEMORY, "cw_io_alloc"},
        {"cuStreamWaitEvent", 1 /* CUDA_ERROR_INVALID_VALUE */, CW_ERROR_DRIVER, "cw_io_receive_stream"},
    };
    for (unsigned threads = 1; threads <= 3; threads += 2)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            cw_pipeline_settings ps;
            cw_pipeline_settings_default(&ps);
            ps.threads = threads;
            diamond g;
            diamond_init(&g, &ps, 64);
            assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
            cwi_seam_reset();
            cwi_seam_fail(cwi_seam_entry(cases[i].entry), 1, cases[i].result);
            const cw_status st = cw_pipeline_run(g.p, 1);
            const int fired = cwi_seam_fired();
            cwi_seam_reset();
            cwi_seam_disable();
            assert_true(fired);
            const cw_error_info *e = cw_last_error();
            printf("# %s failing in compute (%u threads): %s\n", cases[i].entry, threads, e->message);
            assert_int_equal(st, cases[i].status);
            assert_int_equal(e->status, cases[i].status);
            assert_string_equal(e->function, "cw_pipeline_run");
            assert_non_null(strstr(e->message, "(compute)"));
            assert_non_null(strstr(e->message, cases[i].inside));
            assert_string_equal(e->driver_call, cases[i].entry);
            assert_int_equal(e->cu_result, cases[i].result);
            assert_true(e->cu_name[0] != 0);
            cw_pipeline_destroy(&g.p);
            assert_true(fake_drain(2000));
        }
    assert_int_equal(leaks(before, "driver failures inside compute"), 0);
}

/* CUDA_ERROR_NOT_READY from a driver call of cw_pipeline_run (none of them a
 * query the run answers for) is a failure: CW_ERROR_DRIVER naming the call
 * and its CUresult, never CW_ERROR_NOT_READY ("not finished yet, ask
 * again"). Every driver call of a run fails in turn. */
static void test_not_ready_is_a_failure(void **state) {
    (void)state;
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    unsigned long failed = 0, problems = 0;
    for (unsigned long k = 1;; k++) {
        diamond g;
        assert_cw_ok(diamond_build(&g, NULL, 64));
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 600 /* CUDA_ERROR_NOT_READY */);
        cw_clear_error();
        const cw_status st = cw_pipeline_run(g.p, 2);
        const int fired = cwi_seam_fired();
        const char *entry = "";
        if (cwi_seam_fired_entry() >= 0) entry = cwi_seam_entry_name(cwi_seam_fired_entry());
        const cw_error_info *e = cw_last_error();
        if (fired && st != CW_SUCCESS) {
            failed++;
            if (st != CW_ERROR_DRIVER || e->cu_result != 600 || strcmp(e->driver_call, entry) != 0 ||
                strcmp(e->function, "cw_pipeline_run") != 0) {
                printf("# call %lu (%s) failing with CUDA_ERROR_NOT_READY: returned %s, detail: function '%s', "
                       "driver_call '%s', cu_result %d: %s\n",
                       k, entry, cw_status_name(st), e->function, e->driver_call, e->cu_result, e->message);
                problems++;
            }
        }
        cwi_seam_reset();
        cw_pipeline_destroy(&g.p);
        fake_drain(2000);
        if (!fired) {
            assert_cw_ok(st);
            break;
        }
    }
    cwi_seam_disable();
    printf("# cw_pipeline_run: %lu driver calls failed with CUDA_ERROR_NOT_READY, %lu reported otherwise\n", failed,
           problems);
    assert_true(failed > 0);
    assert_int_equal(problems, 0);
}

/* With the pipeline's context already current on the calling thread (the
 * usual case), an iteration switches no context: receive_stream finds it
 * current and the run leaves it as it was. Before the fix every compute call
 * that received its stream made one cuCtxSetCurrent and the run one more at
 * its end (4 operators x 10 iterations + 1 = 41 here). */
static void test_no_context_switch_when_current(void **state) {
    (void)state;
    diamond g;
    diamond_init(&g, NULL, 0);
    top *all[] = {&g.a, &g.b, &g.d, &g.c};
    for (int i = 0; i < 4; i++) all[i]->keep_context = 1;
    CUcontext mine = NULL;
    assert_cw_ok(cwt_context_handle(ctx, &mine));
    fake_ctx_set(mine);
    assert_cw_ok(cw_pipeline_run(g.p, 1)); /* streams made, operators started */
    const long sets0 = fake_calls("cuCtxSetCurrent");
    assert_cw_ok(cw_pipeline_run(g.p, 10));
    assert_int_equal(fake_calls("cuCtxSetCurrent") - sets0, 0);
    for (int i = 0; i < 10; i++) { /* each run numbers its iterations from 0 */
        assert_ptr_equal(g.b.current[i], mine);
        assert_ptr_equal(g.c.current[i], mine);
    }
    CUcontext after = NULL;
    fake_ctx_get(&after);
    assert_ptr_equal(after, mine);
    /* another context current before the run: switched to ours for the
     * compute calls and given back after it, as before */
    for (int i = 0; i < 4; i++) all[i]->keep_context = 0;
    fake_ctx_set(fake_other());
    assert_cw_ok(cw_pipeline_run(g.p, 2));
    fake_ctx_get(&after);
    assert_ptr_equal(after, fake_other());
    assert_ptr_equal(g.c.current[1], mine);
    fake_ctx_set(NULL);
    cw_pipeline_destroy(&g.p);
}

/* The caller's context is current again after a run that fails midway,
 * and after one that found no context current, with one executor thread
 * and with several (flow.h: cw_pipeline_run). */
static void test_context_restored_after_failed_run(void **state) {
    (void)state;
    CUcontext mine = NULL;
    assert_cw_ok(cwt_context_handle(ctx, &mine));
    for (int threads = 1; threads <= 4; threads *= 2) {
        cw_pipeline_settings ps;
        cw_pipeline_settings_default(&ps);
        ps.threads = (unsigned)threads;
        diamond g;
        diamond_init(&g, &ps, 0);
        for (int k = 0; k < 2; k++) {
            CUcontext before = k ? NULL : fake_other();
            g.b.fail_at = 2; /* iteration 1 */
            fake_ctx_set(before);
            assert_int_not_equal(cw_pipeline_run(g.p, 4), CW_SUCCESS);
            CUcontext after = mine;
            fake_ctx_get(&after);
            if (after != before)
                fail_msg("threads %d: after a failed run %p is current, %p was", threads, (void *)after, (void *)before);
            g.b.fail_at = 0;
            fake_ctx_set(before);
            assert_cw_ok(cw_pipeline_run(g.p, 2));
            fake_ctx_get(&after);
            assert_ptr_equal(after, before);
            assert_ptr_equal(g.c.current[1], mine);
        }
        fake_ctx_set(NULL);
        cw_pipeline_destroy(&g.p);
    }
}

/* What one frame costs the host, counted (issue 26): a warm diamond run one
 * frame at a time (cw_pipeline_run(p, 1), as bench_pipeline's latency mode)
 * allocates no mark and creates no event, and makes exactly the driver calls
 * the hand-written code makes for ordering plus the ones documented in
 * docs/pipelines.md ("What a frame costs"): one cuEventRecord per compute
 * call (its mark), one cuStreamWaitEvent per connection, one
 * cuEventSynchronize per iteration (the max_in_flight bound: the sink's mark
 * covers the rest), one cuCtxGetCurrent per run (the caller's context,
 * kept; issue 43: it was one per compute call and two per run), no context switch, no
 * cuEventQuery; none of that cuEventSynchronize when the host waits on the
 * sink's stream after each frame. Before the mark free list every mark was a
 * calloc (4 per frame here); before mark_synced every frame made the
 * cuEventSynchronize. */
/* Port names passed from memory the operator rewrites between calls (the
 * same pointer, another name): each call finds the port its name says now
 * (the executor tries the port last found by that pointer first, and
 * compares the name). Buffers of two sizes taken in turn from the
 * pipeline's cache, over more frames than the cache holds: the cache hands
 * back buffers out of the middle of its ring and wraps, and the pipeline
 * allocates no buffer once warm. */

typedef struct names_op {
    char buf[16];
    long frame, bad;
} names_op;

static cw_status names_src(cw_io *io, void *user) {
    names_op *n = user;
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b = NULL;
    /* 4096 on two frames of three, 8192 on the third: the oldest cached
     * buffer is often of the other size */
    CW_TRY_TEST(cw_io_alloc(&b, io, n->frame % 3 == 2 ? 8192 : 4096));
    strcpy(n->buf, "x");
    CW_TRY_TEST(cw_io_emit(io, n->buf, (void *)(intptr_t)(2 * n->frame + 1), b));
    strcpy(n->buf, "y");
    CW_TRY_TEST(cw_io_emit(io, n->buf, (void *)(intptr_t)(2 * n->frame + 2), NULL));
    strcpy(n->buf, "in");  /* an output has no port "in" */
    if (cw_io_emit(io, n->buf, NULL, NULL) != CW_ERROR_INVALID_ARGUMENT) n->bad++;
    n->frame++;
    return CW_SUCCESS;
}

static cw_status names_dst(cw_io *io, void *user) {
    names_op *n = user;
    cw_message m;
    for (int k = 0; k < 2; k++) { /* "y" then "x" in the same memory, twice */
        strcpy(n->buf, "y");
        CW_TRY_TEST(cw_io_receive(io, n->buf, &m));
        if ((intptr_t)m.value != 2 * n->frame + 2 || m.buffer) n->bad++;
        strcpy(n->buf, "x");
        CW_TRY_TEST(cw_io_receive(io, n->buf, &m));
        if ((intptr_t)m.value != 2 * n->frame + 1 || !m.buffer) n->bad++;
        cw_buffer_info bi;
        CW_TRY_TEST(cw_buffer_get_info(m.buffer, &bi));
        if (bi.bytes != (n->frame % 3 == 2 ? 8192u : 4096u)) n->bad++;
    }
    cw_stream *s = NULL;
    strcpy(n->buf, "x");
    CW_TRY_TEST(cw_io_receive_stream(io, n->buf, &s));
    strcpy(n->buf, "z");
    if (cw_io_receive(io, n->buf, &m) != CW_ERROR_INVALID_ARGUMENT) n->bad++;
    n->frame++;
    return CW_SUCCESS;
}

static void test_port_names_and_cache_ring(void **state) {
    (void)state;
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 4;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    names_op src = {0}, dst = {0};
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = names_src;
    cw_operator *a = NULL, *b = NULL;
    assert_cw_ok(cw_operator_create(&a, "src", &ops, &src, NULL));
    assert_cw_ok(cw_operator_add_output(a, "x", NULL));
    assert_cw_ok(cw_operator_add_output(a, "y", NULL));
    ops.compute = names_dst;
    assert_cw_ok(cw_operator_create(&b, "dst", &ops, &dst, NULL));
    assert_cw_ok(cw_operator_add_input(b, "x", NULL));
    assert_cw_ok(cw_operator_add_input(b, "y", NULL));
    assert_cw_ok(cw_pipeline_add(p, a));
    assert_cw_ok(cw_pipeline_add(p, b));
    assert_cw_ok(cw_pipeline_connect(p, "src", "x", "dst", "x"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "y", "dst", "y"));
    assert_cw_ok(cw_pipeline_run(p, 30)); /* warm */
    cw_pipeline_info i0, i1;
    assert_cw_ok(cw_pipeline_get_info(p, &i0));
    for (int f = 0; f < 170; f++) assert_cw_ok(cw_pipeline_run(p, 1)); /* 140 takes: the 64-slot ring wraps */
    assert_cw_ok(cw_pipeline_get_info(p, &i1));
    assert_int_equal(src.frame, 200);
    assert_int_equal(dst.frame, 200);
    assert_int_equal(src.bad, 0);
    assert_int_equal(dst.bad, 0);
    assert_int_equal(i1.buffers_allocated, i0.buffers_allocated); /* warm: every buffer from the cache */
    assert_int_equal(i1.buffers_reused - i0.buffers_reused, 170);
    cw_pipeline_destroy(&p);
}

/* A chain whose later operators take no stream of their own runs on its
 * first operator's stream: each iteration's marks all stand on that one
 * stream. With one executor thread, the in-flight bound waits for the last
 * of them and knows the earlier ones finished by the stream's order: one
 * cuEventSynchronize an iteration, not one per operator (bench_ffmpeg's
 * one-stream variant made 5 a frame on the H100, 11.7 us). */
static void test_one_stream_chain_one_wait(void **state) {
    (void)state;
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 2;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    top a = {.name = "A", .out = {"out"}, .use_stream = 1, .keep_context = 1, .pipe = p};
    top b = {.name = "B", .in = {"in"}, .out = {"out"}, .use_stream = 1, .keep_context = 1, .pipe = p};
    top c = {.name = "C", .in = {"in"}, .out = {"out"}, .use_stream = 1, .keep_context = 1, .pipe = p};
    top d = {.name = "D", .in = {"in"}, .use_stream = 1, .keep_context = 1, .pipe = p};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.no_internal_stream = 1;
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&b, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&c, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&d, &os)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "C", "out", "D", "in"));
    for (int i = 0; i < 4; i++) assert_cw_ok(cw_pipeline_run(p, 1)); /* warm */
    const long syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < 10; i++) assert_cw_ok(cw_pipeline_run(p, 1));
    const long syncs = fake_calls("cuEventSynchronize") - syncs0;
    for (int i = 0; i < 4; i++) assert_ptr_equal(d.got[i], a.got[i]); /* all on A's stream */
    printf("# one-stream chain of 4: %ld cuEventSynchronize in 10 iterations\n", syncs);
    assert_int_equal(syncs, 10);
    cw_pipeline_destroy(&p);
}

static void test_frame_cost_counted(void **state) {
    (void)state;
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 4;
    diamond g;
    diamond_init(&g, &ps, 256);
    top *all[] = {&g.a, &g.b, &g.d, &g.c};
    for (int i = 0; i < 4; i++) all[i]->keep_context = 1;
    CUcontext mine = NULL;
    assert_cw_ok(cwt_context_handle(ctx, &mine));
    fake_ctx_set(mine);
    for (int i = 0; i < 8; i++) assert_cw_ok(cw_pipeline_run(g.p, 1)); /* warm: streams, buffers, marks */
    static const char *const entries[] = {"cuEventRecord", "cuStreamWaitEvent", "cuEventSynchronize", "cuEventQuery",
                                          "cuEventCreate", "cuCtxGetCurrent", "cuCtxSetCurrent",
                                          "cuMemAllocFromPoolAsync", "cuMemAllocAsync", "cuStreamSynchronize"};
    enum { NE = sizeof entries / sizeof entries[0], FRAMES = 10 };
    long before[NE];
    for (int e = 0; e < NE; e++) before[e] = fake_calls(entries[e]);
    const unsigned long marks0 = cwi_marks_allocated();
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    long per[NE];
    for (int e = 0; e < NE; e++) {
        per[e] = fake_calls(entries[e]) - before[e];
        printf("# %s: %ld in %d frames\n", entries[e], per[e], FRAMES);
    }
    assert_int_equal(cwi_marks_allocated() - marks0, 0);
    assert_int_equal(per[0], 4 * FRAMES);       /* cuEventRecord: one mark per compute call */
    assert_int_equal(per[1], 4 * FRAMES);       /* cuStreamWaitEvent: A->B, A->D, B->C, D->C */
    assert_int_equal(per[2], FRAMES);           /* cuEventSynchronize: the in-flight bound */
    assert_int_equal(per[3], 0);                /* cuEventQuery */
    assert_int_equal(per[4], 0);                /* cuEventCreate: pooled */
    assert_int_equal(per[5], (1 + 4) * FRAMES); /* cuCtxGetCurrent: once a run (+ 4: the test operators' own look) */
    assert_int_equal(per[6], 0);                /* cuCtxSetCurrent */
    assert_int_equal(per[7] + per[8], 0);       /* buffers: from the pipeline's cache */
    assert_int_equal(per[9], 0);
    /* The host waiting on the sink's stream after each frame
     * (cw_stream_synchronize, bench_pipeline's wait) shows the iteration that
     * the in-flight bound waits for finished: no cuEventSynchronize but the
     * first frame's (its bound's iteration was recorded before any wait). */
    cw_stream *sink = g.c.got[0];
    assert_non_null(sink);
    long syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < FRAMES; i++) {
        assert_cw_ok(cw_pipeline_run(g.p, 1));
        assert_cw_ok(cw_stream_synchronize(sink));
    }
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, 1);
    /* Only marks recorded before a wait began count as finished: after the
     * last wait, the next frames' bound skips the 3 iterations recorded before
     * it (max_in_flight 4) and waits for the 7 after; with no wait, for all. */
    syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, FRAMES - 3);
    syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, FRAMES);
    assert_cw_ok(cw_stream_synchronize(sink));
    syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, FRAMES - 3);
    /* A wait that failed shows nothing finished: the bound still asks. */
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_fail(cwi_seam_entry("cuStreamSynchronize"), 1, 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */);
    assert_int_not_equal(cw_stream_synchronize(sink), CW_SUCCESS);
    cwi_seam_disable();
    syncs0 = fake_calls("cuEventSynchronize");
    for (int i = 0; i < FRAMES; i++) assert_cw_ok(cw_pipeline_run(g.p, 1));
    assert_int_equal(fake_calls("cuEventSynchronize") - syncs0, FRAMES);
    fake_ctx_set(NULL);
    cw_pipeline_destroy(&g.p);
}

/* Issue 38, defect 11: a buffer whose last reference goes into the
 * pipeline's cache is retired as a handle: a stale copy of it is refused
 * (get_info, destroy), and the memory comes back under a new handle, so a
 * stale destroy cannot put a buffer that is in use back into the cache and
 * the cache never hands the same memory to two live buffers. */
static void test_cached_buffer_handle_retired(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 0; /* the cache asks the driver: the fake's work is done once drained */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    top a = {.name = "A", .out = {"out"}, .use_stream = 1, .alloc = 256, .pipe = p};
    top k = {.name = "K", .in = {"in"}, .use_stream = 1, .keep_buffer = 1, .pipe = p};
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&k, NULL)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "K", "in"));
    LogTally tally;
    memset(&tally, 0, sizeof tally);
    /* frame 0: K keeps A's buffer X, the only reference once the run ends */
    assert_cw_ok(cw_pipeline_run(p, 1));
    cw_buffer *stale = k.kept, *stale2 = k.kept;
    cw_buffer_info info;
    assert_cw_ok(cw_buffer_get_info(stale, &info));
    assert_int_equal(info.refs, 1);
    const cw_devptr dx = info.dptr;
    assert_true(dx != 0);
    cw_buffer_destroy(&k.kept); /* the last reference: X's memory into the cache */
    memset(&info, 0, sizeof info);
    const cw_status stale_info = cw_buffer_get_info(stale, &info);
    const unsigned stale_refs = info.refs;
    assert_true(fake_drain(2000));
    /* frame 1: the cache hands X's memory out again; K keeps that buffer, Y */
    assert_cw_ok(cw_pipeline_run(p, 1));
    cw_buffer *y = k.kept;
    assert_non_null(y);
    assert_int_equal(k.in_dptr[0], dx); /* the memory is recycled (iterations count from 0 each run) */
    /* a stale destroy of X: refused (a warning), Y keeps its reference */
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    cw_clear_error();
    cw_buffer_destroy(&stale2);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_null(stale2);
    memset(&info, 0, sizeof info);
    assert_cw_ok(cw_buffer_get_info(y, &info));
    const unsigned y_refs = info.refs;
    assert_true(fake_drain(2000));
    /* frame 2: Y is held by K, so A gets other memory */
    assert_cw_ok(cw_pipeline_run(p, 1));
    const cw_devptr d2 = k.in_dptr[0];
    cw_pipeline_info pi;
    assert_cw_ok(cw_pipeline_get_info(p, &pi));
    printf("# stale get_info: %s (refs %u); stale destroy: %d warning(s); Y: %s, refs %u after it; "
           "frame 2's buffer at %#llx, K holds %#llx; reused %llu, allocated %llu\n",
           cw_status_name(stale_info), stale_refs, tally.warnings, y == stale ? "X's handle" : "a new handle",
           y_refs, (unsigned long long)d2, (unsigned long long)dx, (unsigned long long)pi.buffers_reused,
           (unsigned long long)pi.buffers_allocated);
    assert_int_equal(stale_info, CW_ERROR_INVALID_HANDLE);
    assert_int_equal(y_refs, 1);
    assert_true(d2 != dx); /* never the memory of a live buffer */
    assert_true(y != stale);
    assert_int_equal(tally.warnings, 1);
    assert_non_null(strstr(tally.last, "not a live cw_buffer"));
    assert_int_equal(tally.errors, 0);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_buffer_get_info(stale, &info));
    assert_int_equal(pi.buffers_reused, 1);
    assert_int_equal(pi.buffers_allocated, 2);
    cw_buffer_destroy(&k.kept);
    cw_pipeline_destroy(&p);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "retired cached buffers"), 0);
}

/* Issue 38, defect 13: a compute call that finds its operator's pool
 * exhausted falls back to the upstream stream and succeeds: nothing failed,
 * so the thread's detail is left alone and nothing is logged as an error;
 * the fallback is a warning, once per operator however many calls. */
static void test_fallback_warns_once(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_stream_pool *one = NULL;
    cw_stream_pool_settings pss;
    cw_stream_pool_settings_default(&pss);
    pss.max_streams = 1;
    assert_cw_ok(cw_stream_pool_create(&one, ctx, &pss));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    /* B, D, F (after A) and N (a source) share a pool of one stream: the
     * first to ask keeps it, the others fall back (to A's stream, or for N
     * to the legacy stream), each warned of once */
    top a = {.name = "A", .out = {"out"}, .use_stream = 1, .pipe = p};
    top b = {.name = "B", .in = {"in"}, .use_stream = 1, .check_detail = 1, .pipe = p};
    top d = {.name = "D", .in = {"in"}, .use_stream = 1, .check_detail = 1, .pipe = p};
    top f = {.name = "F", .in = {"in"}, .use_stream = 1, .check_detail = 1, .pipe = p};
    top n = {.name = "N", .use_stream = 1, .check_detail = 1, .pipe = p}; /* no upstream: the legacy stream */
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.pool = one;
    assert_cw_ok(cw_pipeline_add(p, make_op(&a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&b, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&d, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&f, &os)));
    assert_cw_ok(cw_pipeline_add(p, make_op(&n, &os)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "D", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "F", "in"));
    enum { N = 12 };
    LogTally tally;
    memset(&tally, 0, sizeof tally);
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    cw_clear_error();
    cw_status run = cw_pipeline_run(p, 6);
    if (run == CW_SUCCESS) run = cw_pipeline_run(p, N - 6); /* a second run: still once */
    const cw_status after = cw_last_error()->status;
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_cw_ok(run);
    const int exhausted = b.detail_set + d.detail_set + f.detail_set + n.detail_set;
    assert_int_equal(b.computes + d.computes + f.computes + n.computes, 4 * N);
    printf("# %d errors, %d warnings logged over %d iterations; detail after: %s in %d of %d calls, "
           "after the run: %s; last: %s\n",
           tally.errors, tally.warnings, N, cw_status_name(d.detail[0]), exhausted, 4 * N, cw_status_name(after),
           tally.last);
    assert_int_equal(tally.errors, 0);
    assert_int_equal(exhausted, 0);
    assert_int_equal(after, CW_SUCCESS);
    assert_int_equal(tally.warnings, 3); /* the three that fall back, once each */
    /* the first to ask holds the pool's stream; the others fall back, every
     * call of both runs (the second run's calls checked) */
    int holders = 0, consumers_back = 0;
    top *const consumers[] = {&b, &d, &f};
    for (int c = 0; c < 3; c++) {
        const int back = consumers[c]->got[0] == a.got[0];
        for (int i = 0; i < N - 6; i++) assert_int_equal(consumers[c]->got[i] == a.got[i], back);
        holders += !back;
        consumers_back += back;
    }
    cw_stream_info si;
    assert_cw_ok(cw_stream_get_info(n.got[0], &si));
    for (int i = 0; i < N - 6; i++) {
        cw_stream_info sj;
        assert_cw_ok(cw_stream_get_info(n.got[i], &sj));
        assert_int_equal(sj.is_null, si.is_null);
    }
    holders += !si.is_null;
    assert_int_equal(holders, 1);
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(p, &st));
    assert_int_equal(st.fallbacks, (uint64_t)consumers_back * N); /* still counted every call */
    cw_pipeline_destroy(&p);
    cw_stream_pool_destroy(&one);
    assert_int_equal(leaks(before, "the fallback warning"), 0);
}

/* Issue 38, minor suspicion: buffer_cache_take asked the driver about its
 * cached buffers' uses (cuEventQuery) with the cache's spin lock held: up
 * to one call per use of every cached buffer that fits, 64 x 8. Counted
 * here from inside each cuEventQuery (a seam hook that looks at the lock):
 * with 64 buffers cached whose one use (a shared mark) is unfinished, a
 * take made 64 calls under the lock. Now it asks with the lock released,
 * and each unfinished mark once a take. */
typedef struct many_op {
    int n;   /* buffers to cw_io_alloc (and drop) this call */
    int bad;
} many_op;
static cw_status many_compute(cw_io *io, void *user) {
    many_op *m = user;
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, NULL, &s));
    for (int i = 0; i < m->n; i++) {
        cw_buffer *b = NULL;
        CW_TRY_TEST(cw_io_alloc(&b, io, 512));
    }
    return CW_SUCCESS;
}
typedef struct query_count {
    cw_pipeline *p;
    long calls, locked;
} query_count;
static void count_query(void *arg) {
    query_count *q = arg;
    q->calls++;
    if (cwi_pipeline_cache_locked(q->p) == 1) q->locked++;
}
static void test_cache_queries_outside_lock(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 0; /* no bound: the cache asks the driver */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    many_op m = {.n = 64};
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = many_compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, "many", &ops, &m, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    /* the GPU holds everything: 64 buffers cached, each with one use unfinished */
    fake_hold(1);
    cw_status st1 = cw_pipeline_run(p, 1);
    cw_pipeline_info i0, i1;
    cw_status gi = cw_pipeline_get_info(p, &i0);
    query_count q = {.p = p};
    m.n = 1;
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_hook(cwi_seam_entry("cuEventQuery"), count_query, &q);
    cw_status st2 = cw_pipeline_run(p, 1); /* one take: nothing it may reuse */
    cwi_seam_hook(cwi_seam_entry("cuEventQuery"), NULL, NULL);
    cwi_seam_disable();
    fake_hold(0);
    assert_cw_ok(st1);
    assert_cw_ok(st2);
    assert_cw_ok(gi);
    assert_true(fake_drain(2000));
    assert_cw_ok(cw_pipeline_get_info(p, &i1));
    printf("# a take with 64 cached buffers in use: %ld cuEventQuery calls, %ld with the cache's lock held; "
           "allocated %llu -> %llu\n",
           q.calls, q.locked, (unsigned long long)i0.buffers_allocated, (unsigned long long)i1.buffers_allocated);
    assert_int_equal(i0.buffers_allocated, 64); /* all 64 cached when the call returned */
    assert_int_equal(i1.buffers_allocated, i0.buffers_allocated + 1); /* nothing reusable: a new one */
    assert_int_equal(q.locked, 0);
    assert_int_equal(q.calls, 1); /* the one mark the 64 share, asked once */
    /* the work done: the cache hands its buffers out again */
    m.n = 64;
    assert_cw_ok(cw_pipeline_run(p, 1));
    cw_pipeline_info i2;
    assert_cw_ok(cw_pipeline_get_info(p, &i2));
    assert_int_equal(i2.buffers_allocated, i1.buffers_allocated);
    assert_int_equal(i2.buffers_reused - i1.buffers_reused, 64);
    cw_pipeline_destroy(&p);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "the cache's queries"), 0);
}

/* The cache's takes from several executor threads at once (TSan runs it):
 * four workers allocate a buffer each per iteration from the one cache,
 * asking the driver (max_in_flight 0) with the lock released, while a sink
 * holds the last iteration's four; the sink checks that the four it gets
 * are four memories, none of them one it still holds. */
typedef struct wide_op {
    int worker;              /* 1: allocate and emit; 0: the sink */
    cw_devptr held[4];       /* the sink: last iteration's addresses (it keeps those buffers) */
    cw_buffer *keep[4];
    int bad, iterations;
} wide_op;
static cw_status wide_compute(cw_io *io, void *user) {
    wide_op *w = user;
    cw_stream *s = NULL;
    if (w->worker) {
        CW_TRY_TEST(cw_io_receive_stream(io, "in", &s));
        cw_buffer *b = NULL;
        CW_TRY_TEST(cw_io_alloc(&b, io, 1024));
        return cw_io_emit(io, "out", NULL, b);
    }
    cw_message m[4];
    size_t n = 0;
    CW_TRY_TEST(cw_io_receive_many(io, "in", m, 4, &n));
    if (n != 4) w->bad++;
    cw_devptr now[4] = {0};
    for (size_t i = 0; i < n && i < 4; i++) {
        CW_TRY_TEST(cw_buffer_get_ptr(m[i].buffer, &now[i]));
        for (size_t j = 0; j < i; j++) w->bad += now[j] == now[i];
        for (int k = 0; k < 4; k++) w->bad += w->held[k] == now[i];
    }
    for (int k = 0; k < 4; k++) {
        cw_buffer_destroy(&w->keep[k]);
        w->keep[k] = k < (int)n ? m[k].buffer : NULL;
        if (w->keep[k]) CW_TRY_TEST(cw_buffer_retain(w->keep[k]));
        w->held[k] = now[k];
    }
    w->iterations++;
    return CW_SUCCESS;
}
static cw_status wide_source(cw_io *io, void *user) {
    (void)user;
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, NULL, &s));
    return cw_io_emit(io, "out", NULL, NULL);
}
static void test_cache_takes_across_threads(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 0;
    ps.threads = 4;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = wide_source;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, "src", &ops, NULL, NULL));
    assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    wide_op workers[4], sink;
    memset(workers, 0, sizeof workers);
    memset(&sink, 0, sizeof sink);
    ops.compute = wide_compute;
    cw_port_settings many;
    cw_port_settings_default(&many);
    many.flags = CW_PORT_MANY;
    assert_cw_ok(cw_operator_create(&op, "sink", &ops, &sink, NULL));
    assert_cw_ok(cw_operator_add_input(op, "in", &many));
    assert_cw_ok(cw_pipeline_add(p, op));
    for (int k = 0; k < 4; k++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", k);
        workers[k].worker = 1;
        assert_cw_ok(cw_operator_create(&op, name, &ops, &workers[k], NULL));
        assert_cw_ok(cw_operator_add_input(op, "in", NULL));
        assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
        assert_cw_ok(cw_pipeline_connect(p, "src", "out", name, "in"));
        assert_cw_ok(cw_pipeline_connect(p, name, "out", "sink", "in"));
    }
    assert_cw_ok(cw_pipeline_run(p, 300));
    cw_pipeline_info pi;
    assert_cw_ok(cw_pipeline_get_info(p, &pi));
    printf("# 300 iterations, 4 workers on 4 threads: %llu buffers reused, %llu allocated, %d bad\n",
           (unsigned long long)pi.buffers_reused, (unsigned long long)pi.buffers_allocated, sink.bad);
    assert_int_equal(sink.iterations, 300);
    assert_int_equal(sink.bad, 0);
    assert_int_equal(pi.buffers_reused + pi.buffers_allocated, 4 * 300);
    assert_true(pi.buffers_reused > 0);
    for (int k = 0; k < 4; k++) cw_buffer_destroy(&sink.keep[k]);
    cw_pipeline_destroy(&p);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "takes across threads"), 0);
}

/* Review: a new handle for cached memory that cannot be made (the
 * registry's reservation failed, the Nth in turn) loses no memory and
 * never gives one memory to two live buffers. A allocates two buffers a
 * call (the cache's takes), emits one and drops the other; K keeps the
 * last buffer it received until the next. Every reservation of a run is
 * failed in turn (max_in_flight 0 and 2): the run fails or succeeds, the
 * next runs succeed, no call sees a buffer another live one holds, and at
 * the end the fake's device memory is back where it was. */
typedef struct rewrap_op {
    int keeper;
    cw_buffer *kept;
    cw_devptr kept_ptr;
    int bad, calls;
} rewrap_op;
static rewrap_op *g_rewrap_keeper;
static cw_status rewrap_compute(cw_io *io, void *user) {
    rewrap_op *o = user;
    cw_stream *s = NULL;
    o->calls++;
    if (o->keeper) {
        cw_message m;
        CW_TRY_TEST(cw_io_receive_stream(io, "in", &s));
        CW_TRY_TEST(cw_io_receive(io, "in", &m));
        cw_devptr d = 0;
        CW_TRY_TEST(cw_buffer_get_ptr(m.buffer, &d));
        o->bad += o->kept && d == o->kept_ptr;
        cw_buffer_destroy(&o->kept);
        CW_TRY_TEST(cw_buffer_retain(m.buffer));
        o->kept = m.buffer;
        o->kept_ptr = d;
        return CW_SUCCESS;
    }
    CW_TRY_TEST(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *a = NULL, *b = NULL;
    cw_devptr da = 0, db = 0;
    CW_TRY_TEST(cw_io_alloc(&a, io, 256));
    CW_TRY_TEST(cw_buffer_get_writable(a, &da));
    CW_TRY_TEST(cw_io_alloc(&b, io, 256));
    CW_TRY_TEST(cw_buffer_get_writable(b, &db));
    const cw_devptr held = g_rewrap_keeper->kept ? g_rewrap_keeper->kept_ptr : 0;
    o->bad += da == db || da == held || db == held;
    static const uint64_t tags[2] = {1, 2};
    CW_TRY_TEST(cw_copy_to_device(s, da, &tags[0], 8));
    CW_TRY_TEST(cw_copy_to_device(s, db, &tags[1], 8));
    return cw_io_emit(io, "out", NULL, a);
}

static void test_rewrap_failures(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    int failed_runs = 0, ran_ok = 0;
    for (int max = 0; max <= 2; max += 2)
        for (int nth = 1; nth <= 8; nth++) {
            cw_pipeline_settings ps;
            cw_pipeline_settings_default(&ps);
            ps.max_in_flight = (unsigned)max;
            cw_pipeline *p = NULL;
            assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
            rewrap_op a = {0}, k = {.keeper = 1};
            g_rewrap_keeper = &k;
            cw_operator_ops ops;
            memset(&ops, 0, sizeof ops);
            ops.compute = rewrap_compute;
            cw_operator *op = NULL;
            assert_cw_ok(cw_operator_create(&op, "A", &ops, &a, NULL));
            assert_cw_ok(cw_operator_add_output(op, "out", NULL));
            assert_cw_ok(cw_pipeline_add(p, op));
            assert_cw_ok(cw_operator_create(&op, "K", &ops, &k, NULL));
            assert_cw_ok(cw_operator_add_input(op, "in", NULL));
            assert_cw_ok(cw_pipeline_add(p, op));
            assert_cw_ok(cw_pipeline_connect(p, "A", "out", "K", "in"));
            assert_cw_ok(cw_pipeline_run(p, 3)); /* warm: the cache holds memory */
            assert_true(fake_drain(2000));
            cwi_handles_fail_next(nth);
            cw_status st = cw_pipeline_run(p, 3);
            cwi_handles_fail_next(0);
            if (st != CW_SUCCESS) {
                assert_int_equal(st, CW_ERROR_OUT_OF_MEMORY);
                failed_runs++;
            }
            assert_true(fake_drain(2000));
            assert_cw_ok(cw_pipeline_run(p, 4));
            assert_true(fake_drain(2000));
            assert_cw_ok(cw_pipeline_run(p, 4));
            ran_ok++;
            cw_pipeline_info pi;
            assert_cw_ok(cw_pipeline_get_info(p, &pi));
            if (a.bad || k.bad)
                printf("# max_in_flight %d, reservation %d failed: %d + %d calls given memory a live buffer holds\n",
                       max, nth, a.bad, k.bad);
            assert_int_equal(a.bad + k.bad, 0);
            assert_true(pi.buffers_allocated <= 8); /* memory is recycled, not lost and replaced */
            cw_buffer_destroy(&k.kept);
            cw_pipeline_destroy(&p);
            assert_true(fake_drain(2000));
        }
    printf("# rewrap failures: %d runs failed by the reservation, %d pipelines went on\n", failed_runs, ran_ok);
    assert_true(failed_runs > 0);
    assert_int_equal(leaks(before, "rewrap failures"), 0);
}

/* Review: two operators on one stream on two executor threads (B and C
 * both on A's stream by no_internal_stream, both reading A's buffer X). A
 * buffer keeps one use per stream, the later covering the earlier; but C
 * recorded its mark on the stream, then (held in finish_call by the fold
 * of another buffer's full list of uses, a seam hook) attached it to X
 * after B had recorded its own later mark and attached it: C's earlier
 * mark replaced B's. B's read of X waits in the fake's queue behind a host
 * function of the test's; C's mark, before it, finished. Then E, on a
 * stream of its own, asks the cache for a buffer of X's size: it must not
 * get X, whose read by B is unfinished. */
static int (*fake_host_fn)(void *stream, void (*fn)(void *), void *user); /* cuLaunchHostFunc */
static long (*fake_busy)(cw_devptr);
typedef struct attach_race {
    cw_stream *u[8];            /* D's buffer W gets a use on each: its list is full */
    cw_devptr x_ptr, y_ptr;
    long y_busy;
    uint64_t x_read[2], tag;
    atomic_int c_paused, b_done, released, c_hooked;
} attach_race;
static attach_race g_ar;
static __thread int tl_c_finishing;
static void ar_blocker(void *arg) {
    (void)arg;
    const double t0 = now_ms();
    while (!atomic_load(&g_ar.released) && now_ms() - t0 < 5000) usleep(1000);
}
static void ar_hook(void *arg) {
    (void)arg;
    if (!tl_c_finishing) return;
    tl_c_finishing = 0; /* C's finish_call: its mark is recorded, not yet attached to X */
    atomic_store(&g_ar.c_hooked, 1);
    atomic_store(&g_ar.c_paused, 1);
    const double t0 = now_ms();
    while (!atomic_load(&g_ar.b_done) && now_ms() - t0 < 2000) usleep(1000);
    usleep(100000); /* B's finish_call records and attaches its mark meanwhile */
}
static cw_status ar_compute(cw_io *io, void *user) {
    const char role = *(const char *)user;
    cw_io_info info = {0};
    CW_TRY_TEST(cw_io_get_info(io, &info));
    cw_stream *s = NULL;
    cw_message m;
    if (role == 'A' || role == 'D' || role == 'E') {
        CW_TRY_TEST(cw_io_receive_stream(io, NULL, &s));
        if (role == 'E' && info.iteration == 1) {
            cw_buffer *y = NULL;
            CW_TRY_TEST(cw_io_alloc(&y, io, 64));
            CW_TRY_TEST(cw_buffer_get_writable(y, &g_ar.y_ptr));
            g_ar.y_busy = fake_busy(g_ar.y_ptr);
            CW_TRY_TEST(cw_copy_to_device(s, g_ar.y_ptr, &g_ar.tag, 8));
        }
        if (info.iteration != 0 || role == 'E') return CW_SUCCESS;
        cw_buffer *b = NULL;
        CW_TRY_TEST(cw_io_alloc(&b, io, role == 'A' ? 64 : 128));
        if (role == 'A') {
            CW_TRY_TEST(cw_buffer_get_writable(b, &g_ar.x_ptr));
            CW_TRY_TEST(cw_copy_to_device(s, g_ar.x_ptr, &g_ar.tag, 8));
        } else {
            for (int i = 0; i < 8; i++) CW_TRY_TEST(cw_buffer_use(b, g_ar.u[i]));
        }
        return cw_io_emit(io, "out", NULL, b);
    }
    CW_TRY_TEST(cw_io_receive_stream(io, "x", &s)); /* A's stream */
    CW_TRY_TEST(cw_io_receive(io, "x", &m));
    if (role == 'B') {
        const double t0 = now_ms();
        while (!atomic_load(&g_ar.c_paused) && now_ms() - t0 < 2000) usleep(1000);
        cw_stream_info si;
        CW_TRY_TEST(cw_stream_get_info(s, &si));
        if (fake_host_fn((void *)si.handle, ar_blocker, NULL) != 0) return CW_ERROR_INTERNAL;
        CW_TRY_TEST(cw_copy_to_host(s, &g_ar.x_read[0], g_ar.x_ptr, 8));
        atomic_store(&g_ar.b_done, 1);
        return CW_SUCCESS;
    }
    CW_TRY_TEST(cw_copy_to_host(s, &g_ar.x_read[1], g_ar.x_ptr, 8));
    tl_c_finishing = 1; /* the next cuStreamWaitEvent on this thread: the fold of W's oldest use */
    return CW_SUCCESS;
}

static void test_same_stream_uses_across_threads(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    memset(&g_ar, 0, sizeof g_ar);
    g_ar.tag = 0x7a6;
    for (int i = 0; i < 8; i++) assert_cw_ok(cw_stream_create(&g_ar.u[i], ctx, NULL));
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 5;
    ps.max_in_flight = 0; /* the cache asks the driver */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    static const char roles[] = "ADEBC";
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = ar_compute;
    for (int r = 0; r < 5; r++) {
        const char name[2] = {roles[r], 0};
        cw_operator_settings os;
        cw_operator_settings_default(&os);
        os.no_internal_stream = roles[r] == 'B' || roles[r] == 'C';
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create(&op, name, &ops, (void *)&roles[r], &os));
        if (roles[r] == 'A' || roles[r] == 'D') assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        if (roles[r] == 'C') assert_cw_ok(cw_operator_add_input(op, "w", NULL)); /* W's port first */
        if (roles[r] == 'B' || roles[r] == 'C') assert_cw_ok(cw_operator_add_input(op, "x", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "x"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "C", "x"));
    assert_cw_ok(cw_pipeline_connect(p, "D", "out", "C", "w"));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_hook(cwi_seam_entry("cuStreamWaitEvent"), ar_hook, NULL);
    cw_status st = cw_pipeline_run(p, 2);
    cwi_seam_hook(cwi_seam_entry("cuStreamWaitEvent"), NULL, NULL);
    cwi_seam_disable();
    const long busy = g_ar.y_busy;
    const int same = g_ar.y_ptr == g_ar.x_ptr;
    atomic_store(&g_ar.released, 1);
    assert_true(fake_drain(5000));
    printf("# C held after recording its mark: %s; E's buffer %s X, with %ld unfinished accesses\n",
           atomic_load(&g_ar.c_hooked) ? "yes" : "no", same ? "was" : "was not", busy);
    assert_cw_ok(st);
    assert_true(atomic_load(&g_ar.c_hooked));
    assert_int_equal(busy, 0);
    assert_false(same);
    cw_pipeline_destroy(&p);
    for (int i = 0; i < 8; i++) cw_stream_destroy(&g_ar.u[i]);
    assert_true(fake_drain(2000));
    assert_int_equal(leaks(before, "same-stream uses across threads"), 0);
}

/* Review: the fallback warning with several executor threads: six
 * siblings share a pool of one stream and run at once on six threads, 20
 * iterations; the one that got the stream keeps it, each other warns once,
 * whichever thread runs it (TSan runs it). */
typedef struct fb_tally {
    pthread_mutex_t mu;
    int errors, warned[6];
} fb_tally;
static void fb_log(void *user, cw_log_level level, const char *msg) {
    fb_tally *t = user;
    pthread_mutex_lock(&t->mu);
    if (level == CW_LOG_ERROR) t->errors++;
    if (level == CW_LOG_WARNING && strstr(msg, "every stream of its pool is leased"))
        for (int i = 0; i < 6; i++) {
            char name[16];
            snprintf(name, sizeof name, "operator 'S%d'", i);
            if (strstr(msg, name)) t->warned[i]++;
        }
    pthread_mutex_unlock(&t->mu);
}
static cw_status fb_compute(cw_io *io, void *user) {
    cw_stream *s = NULL;
    CW_TRY_TEST(cw_io_receive_stream(io, user ? "in" : NULL, &s));
    if (!user) return cw_io_emit(io, "out", NULL, NULL);
    usleep(200); /* the siblings overlap */
    return CW_SUCCESS;
}
static void test_fallback_warns_once_threads(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_stream_pool *one = NULL;
    cw_stream_pool_settings pss;
    cw_stream_pool_settings_default(&pss);
    pss.max_streams = 1;
    assert_cw_ok(cw_stream_pool_create(&one, ctx, &pss));
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 6;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = fb_compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, "A", &ops, NULL, NULL));
    assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    static int marker;
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "S%d", i);
        cw_operator_settings os;
        cw_operator_settings_default(&os);
        os.pool = one;
        assert_cw_ok(cw_operator_create(&op, name, &ops, &marker, &os));
        assert_cw_ok(cw_operator_add_input(op, "in", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
        assert_cw_ok(cw_pipeline_connect(p, "A", "out", name, "in"));
    }
    fb_tally t;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.mu, NULL);
    assert_cw_ok(cw_log_set_callback(fb_log, &t, CW_LOG_DEBUG));
    cw_status st = cw_pipeline_run(p, 20);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_cw_ok(st);
    int warned = 0, twice = 0;
    for (int i = 0; i < 6; i++) {
        warned += t.warned[i] == 1;
        twice += t.warned[i] > 1;
    }
    cw_pipeline_info pi;
    assert_cw_ok(cw_pipeline_get_info(p, &pi));
    printf("# 6 siblings on 6 threads, a pool of 1: %d warned once, %d more than once, %d errors; %llu fallbacks\n",
           warned, twice, t.errors, (unsigned long long)pi.fallbacks);
    assert_int_equal(t.errors, 0);
    assert_int_equal(twice, 0);
    assert_int_equal(warned, 5);
    assert_int_equal(pi.fallbacks, 5 * 20);
    cw_pipeline_destroy(&p);
    cw_stream_pool_destroy(&one);
    pthread_mutex_destroy(&t.mu);
    assert_int_equal(leaks(before, "the fallback warning on threads"), 0);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(fake_hold = (void (*)(int))dlsym(lib, "fake_cuda_hold")) ||
        !(fake_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain")) ||
        !(fake_fault = (void (*)(int))dlsym(lib, "fake_cuda_fault")) ||
        !(fake_other = (CUcontext(*)(void))dlsym(lib, "fake_cuda_other_context")) ||
        !(fake_ctx_get = (int (*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent")) ||
        !(fake_ctx_set = (int (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent")) ||
        !(fake_host_fn = (int (*)(void *, void (*)(void *), void *))dlsym(lib, "cuLaunchHostFunc")) ||
        !(fake_busy = (long (*)(cw_devptr))dlsym(lib, "fake_cuda_mem_busy"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    live_drain = fake_drain; /* counts are taken with the fake's work done */
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    /* warm the context's event pool, stream pools and buffer pool so that live
     * counts compare like with like */
    cw_stream *s[8] = {0};
    cw_buffer *b[24] = {0};
    for (int k = 0; k < 8; k++)
        if (cw_stream_create(&s[k], ctx, NULL)) return 1;
    for (int i = 0; i < 24; i++) {
        if (cw_buffer_create(&b[i], s[0], 8)) return 1;
        for (int k = 1; k < 8; k++)
            if (cw_buffer_use(b[i], s[k])) return 1;
    }
    for (int i = 0; i < 24; i++) cw_buffer_destroy(&b[i]);
    for (int k = 0; k < 8; k++) cw_stream_destroy(&s[k]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_names_ports),
        cmocka_unit_test(test_no_context_switch_when_current),
        cmocka_unit_test(test_context_restored_after_failed_run),
        cmocka_unit_test(test_frame_cost_counted),
        cmocka_unit_test(test_one_stream_chain_one_wait),
        cmocka_unit_test(test_port_names_and_cache_ring),
        cmocka_unit_test(test_connect_and_check_rules),
        cmocka_unit_test(test_stream_rules),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_manual_calls),
        cmocka_unit_test(test_messages_optional_skipped),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_pipeline_records_uses),
        cmocka_unit_test(test_executor),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_in_flight_and_synchronize),
        cmocka_unit_test(test_in_flight_bound_waits_for_every_mark),
        cmocka_unit_test(test_in_flight_bound_after_failed_run),
        cmocka_unit_test(test_destroy_while_running),
        cmocka_unit_test(test_alloc_waits_when_full),
        cmocka_unit_test(test_cached_buffer_handle_retired),
        cmocka_unit_test(test_fallback_warns_once),
        cmocka_unit_test(test_fallback_warns_once_threads),
        cmocka_unit_test(test_cache_queries_outside_lock),
        cmocka_unit_test(test_cache_takes_across_threads),
        cmocka_unit_test(test_rewrap_failures),
        cmocka_unit_test(test_same_stream_uses_across_threads),
        cmocka_unit_test(test_device_fault_named),
        cmocka_unit_test(test_resident_pipeline),
        cmocka_unit_test(test_port_memory_under_run),
        cmocka_unit_test(test_error_names_public_call),
        cmocka_unit_test(test_compute_failure_detail),
        cmocka_unit_test(test_fault_sweep),
        cmocka_unit_test(test_not_ready_is_a_failure),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    return rc;
}
