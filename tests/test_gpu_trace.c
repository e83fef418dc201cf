/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU tests of traces (cuweave/trace.h) on device 0, against what the GPU
 * itself measured:
 *   - a GPU span around a kernel that spins 200 us and stamps the global
 *     timer at its start and end (cw_stamp) lasts at least those 200 us and
 *     not much more, and lies where the kernel's own stamps put it on the
 *     host's axis (within the calibrations' error bounds plus slack);
 *   - two streams' spinning kernels overlap in the trace; a span begun after
 *     a stream synchronize starts after the host span that waited;
 *   - the calibration error bound is small (under 50 us);
 *   - a traced pipeline's GPU spans cover the kernels its operators launched;
 *     in a diamond whose second branch is slow, the sink's span begins after
 *     both branches' work (the span's begin is recorded again after each
 *     input port's wait);
 *   - a resident loop's stages (100 us and 50 us spins) come back with those
 *     durations, in order, inside their iteration, on the loop's tracks;
 *   - spans on a green partition's stream get a calibration of their own;
 *   - the pipeline tests above on timing events (gpu_timing EVENTS); on
 *     CUPTI (skipped, with the reason, where CUPTI is absent or held, as
 *     under compute-sanitizer): an operator's stamping kernel is one kernel
 *     span as long as its own global-timer stamps say (within 2 us), inside
 *     the host span around the run and the operator's span, its copy a
 *     memcpy span with its bytes, one record per launch; in the diamond the
 *     sink's kernel begins after both branches' kernels end, the branches'
 *     kernels overlap; a resident loop with a data-ready handler (gate
 *     NODE) comes back with its handler's and workload's stages (marked
 *     by the loop's own kernels) around the stages inside them.
 * Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

static rawcuda rc;
static cw_context *ctx;
static cw_module *mod;
static cw_kernel *k_stamp, *k_spin, *k_handler;

/* ---- a small reader of the file cw_trace_write makes (its own format) -------- */

typedef struct Span {
    char name[64], track[64];
    char cat[8], op[64]; /* op: args.operator (CUPTI's spans), else "" */
    int pid;
    double ts, dur;
    long long bytes; /* args.bytes, else -1 */
} Span;

/* Reads the X events of path with their track names (sscanf over the lines
 * cw_trace_write writes: one event a line). */
static size_t read_spans(const char *path, Span *out, size_t cap) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    struct {
        int pid, tid;
        char name[64];
    } tracks[64];
    size_t nt = 0, n = 0;
    struct {
        Span s;
        int tid;
    } raw[256];
    size_t nr = 0;
    while (fgets(line, sizeof line, f)) {
        int pid = 0, tid = 0;
        char name[64];
        if (strstr(line, "\"thread_name\"") && nt < 64 &&
            sscanf(line, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%63[^\"]\"", &pid,
                   &tid, name) == 3) {
            tracks[nt].pid = pid;
            tracks[nt].tid = tid;
            snprintf(tracks[nt].name, 64, "%s", name);
            nt++;
        }
        double ts = 0, dur = 0;
        char cat[8];
        if (strstr(line, "\"ph\":\"X\"") && nr < 256 &&
            sscanf(line, "{\"name\":\"%63[^\"]\",\"cat\":\"%7[^\"]\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"dur\":%lf",
                   name, cat, &pid, &tid, &ts, &dur) == 6) {
            snprintf(raw[nr].s.name, 64, "%s", name);
            snprintf(raw[nr].s.cat, 8, "%s", cat);
            raw[nr].s.op[0] = 0;
            raw[nr].s.bytes = -1;
            const char *op = strstr(line, "\"operator\":\""), *by = strstr(line, "\"bytes\":");
            if (op) sscanf(op + 12, "%63[^\"]", raw[nr].s.op);
            if (by) raw[nr].s.bytes = atoll(by + 8);
            raw[nr].s.pid = pid;
            raw[nr].s.ts = ts;
            raw[nr].s.dur = dur;
            raw[nr].tid = tid;
            nr++;
        }
    }
    fclose(f);
    for (size_t i = 0; i < nr && n < cap; i++) {
        out[n] = raw[i].s;
        out[n].track[0] = 0;
        for (size_t k = 0; k < nt; k++)
            if (tracks[k].pid == raw[i].s.pid && tracks[k].tid == raw[i].tid) snprintf(out[n].track, 64, "%s", tracks[k].name);
        n++;
    }
    return n;
}

static const Span *named(const Span *s, size_t n, const char *name, int nth) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s[i].name, name) && nth-- == 0) return &s[i];
    fail_msg("no span '%s'", name);
    return NULL;
}

static char g_path[64];

/* Under compute-sanitizer every kernel and every clock read is slowed by an
 * amount of its own: the upper bounds on durations and on the calibration
 * error are checked only without it (lower bounds and orderings always). */
static int slowed(void) { return cwt_under_sanitizer(); }

static void launch(cw_kernel *k, cw_stream *s, void **args) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    assert_cw_ok(cw_kernel_launch(k, s, &cfg, args));
}

/* ---- spans on streams against the kernel's own global-timer stamps ------------- */

static void test_spans_match_the_gpu(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_stream *a = NULL, *b = NULL;
    assert_cw_ok(cw_stream_create(&a, ctx, NULL));
    assert_cw_ok(cw_stream_create(&b, ctx, NULL));
    assert_cw_ok(cw_trace_name_stream(t, a, "a"));
    assert_cw_ok(cw_trace_name_stream(t, b, "b"));
    unsigned long long stamps[4] = {0};
    cw_buffer *sb = NULL;
    assert_cw_ok(cw_buffer_create(&sb, a, sizeof stamps));
    cw_devptr dstamps = 0;
    assert_cw_ok(cw_buffer_get_ptr(sb, &dstamps));
    cw_devptr d0 = dstamps, d1 = dstamps + 16;
    long long ns = 200000;
    void *args_a[] = {&d0, &ns}, *args_b[] = {&d1, &ns};
    /* Both kernels loaded and launched once first: a span begins when its
     * stream reaches the begin mark, on an idle stream when the mark is
     * placed, so a first launch's lazy load (about 0.8 ms on the H100) would
     * count in the span. */
    launch(k_stamp, a, args_a);
    launch(k_spin, a, args_a);
    assert_cw_ok(cw_stream_synchronize(a));
    assert_cw_ok(cw_trace_begin(t, a, "kernel a"));
    launch(k_stamp, a, args_a);
    assert_cw_ok(cw_trace_end(t, a));
    assert_cw_ok(cw_trace_begin(t, b, "kernel b"));
    launch(k_stamp, b, args_b);
    assert_cw_ok(cw_trace_end(t, b));
    assert_cw_ok(cw_trace_host_begin(t, "wait"));
    assert_cw_ok(cw_stream_synchronize(a));
    assert_cw_ok(cw_stream_synchronize(b));
    assert_cw_ok(cw_trace_host_end(t));
    assert_cw_ok(cw_copy_to_host(a, stamps, dstamps, sizeof stamps));
    assert_cw_ok(cw_stream_synchronize(a));
    assert_cw_ok(cw_trace_begin(t, a, "after"));
    launch(k_spin, a, args_a);
    assert_cw_ok(cw_trace_end(t, a));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    printf("# calibration error bound %.2f us\n", (double)info.calibration_error_ns / 1e3);
    assert_true(info.calibration_error_ns > 0);
    if (!slowed()) assert_true(info.calibration_error_ns < 50000);
    assert_cw_ok(cw_trace_write(t, g_path));
    Span s[32];
    const size_t n = read_spans(g_path, s, 32);
    assert_int_equal(n, 4);
    const Span *ka = named(s, n, "kernel a", 0), *kb = named(s, n, "kernel b", 0), *w = named(s, n, "wait", 0),
               *af = named(s, n, "after", 0);
    assert_string_equal(ka->track, "a");
    assert_string_equal(kb->track, "b");
    printf("# kernel a: %.1f us, kernel b: %.1f us, overlap from %.1f to %.1f us\n", ka->dur, kb->dur, kb->ts,
           ka->ts + ka->dur);
    assert_true(ka->dur >= 195.0 && kb->dur >= 195.0);
    if (!slowed()) assert_true(ka->dur < 400.0 && kb->dur < 400.0);
    assert_true(ka->ts < kb->ts + kb->dur && kb->ts < ka->ts + ka->dur); /* two streams side by side */
    assert_true(af->ts >= w->ts + w->dur - 1.0 - (double)info.calibration_error_ns / 1e3);
    assert_true(w->ts + w->dur >= ka->ts + ka->dur - 1.0 - (double)info.calibration_error_ns / 1e3);
    /* the kernel's own stamps (the global timer, on the GPU's axis) last as long as the span, less launch slack */
    const double gpu_us = (double)(stamps[1] - stamps[0]) / 1e3;
    assert_true(gpu_us >= 199.0 && gpu_us <= ka->dur + 2.0);
    cw_buffer_destroy(&sb);
    cw_stream_destroy(&a);
    cw_stream_destroy(&b);
    cw_trace_destroy(&t);
}

/* ---- a resident loop's stages ----------------------------------------------- */

typedef struct res {
    cw_resident *r;
    cw_devptr word;
} res;

static cw_status two_stages(cw_stream *s, void *user) {
    res *u = user;
    const char *names[2] = {"long", "short"};
    long long ns[2] = {100000, 50000};
    for (int i = 0; i < 2; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(u->r, s, names[i], &stage);
        if (st != CW_SUCCESS) return st;
        cw_launch_config cfg;
        cw_launch_config_default(&cfg);
        void *args[] = {&u->word, &ns[i]};
        if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(u->r, s, stage)) != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

static void test_resident_stages(void **state) {
    (void)state;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    res u = {NULL, 0};
    assert_cw_ok(cw_buffer_get_ptr(b, &u.word));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    assert_cw_ok(cw_resident_create(&u.r, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(u.r, two_stages, &u));
    assert_cw_ok(cw_resident_build(u.r));
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_trace_record_resident(t, u.r)); /* calibrates */
    assert_cw_ok(cw_resident_launch(u.r));
    for (int i = 0; i < 3; i++) {
        uint64_t seq = 0;
        assert_cw_ok(cw_trace_host_begin(t, "request"));
        assert_cw_ok(cw_resident_data_ready(u.r, &seq));
        assert_cw_ok(cw_resident_wait_result(u.r, seq, 5000));
        assert_cw_ok(cw_trace_host_end(t));
        assert_cw_ok(cw_trace_record_resident(t, u.r));
        assert_cw_ok(cw_trace_record_resident(t, u.r)); /* nothing new */
    }
    assert_cw_ok(cw_resident_tear_down(u.r, 5000));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    printf("# resident: %llu spans, global timer within %.2f us\n", (unsigned long long)info.spans,
           (double)info.calibration_error_ns / 1e3);
    assert_cw_ok(cw_trace_write(t, g_path));
    Span sp[64];
    const size_t n = read_spans(g_path, sp, 64);
    for (int i = 0; i < 3; i++) {
        const Span *it = named(sp, n, "iteration", i), *w = named(sp, n, "workload", i), *l = named(sp, n, "long", i),
                   *sh = named(sp, n, "short", i), *rq = named(sp, n, "request", i);
        printf("# iteration %d: %.1f us (long %.1f, short %.1f), request %.1f us\n", i, it->dur, l->dur, sh->dur, rq->dur);
        assert_string_equal(l->track, "loop 0: long");
        assert_string_equal(it->track, "loop 0: iterations");
        assert_true(l->dur >= 99.0 && sh->dur >= 49.0);
        if (!slowed()) assert_true(l->dur < 200.0 && sh->dur < 150.0);
        assert_true(sh->ts >= l->ts + l->dur); /* in order */
        assert_true(l->ts >= w->ts && sh->ts + sh->dur <= w->ts + w->dur + 0.01);
        const double err = (double)info.calibration_error_ns / 1e3 + 5.0;
        assert_true(it->ts >= rq->ts - err && it->ts + it->dur <= rq->ts + rq->dur + err); /* inside its request */
    }
    cw_resident_destroy(&u.r);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
}

/* ---- a pipeline ------------------------------------------------------------ */

static cw_devptr g_word;
static cw_status spin_op(cw_io *io, void *user) {
    (void)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, NULL, &s);
    if (st != CW_SUCCESS) return st;
    long long ns = 50000;
    void *args[] = {&g_word, &ns};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    return cw_kernel_launch(k_spin, s, &cfg, args);
}

static void test_pipeline(void **state) {
    (void)state;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    assert_cw_ok(cw_buffer_get_ptr(b, &g_word));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = spin_op;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, "spin", &ops, NULL, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    cw_trace *t = NULL;
    cw_trace_settings ts;
    cw_trace_settings_default(&ts);
    ts.gpu_timing = CW_TRACE_GPU_EVENTS; /* the event path (CUPTI's: test_cupti_*) */
    assert_cw_ok(cw_trace_create(&t, &ts));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_pipeline_run(p, 4));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_trace_write(t, g_path));
    Span sp[32];
    const size_t n = read_spans(g_path, sp, 32);
    int gpu = 0;
    for (size_t i = 0; i < n; i++)
        if (sp[i].pid == 2) {
            gpu++;
            assert_string_equal(sp[i].track, "spin");
            assert_true(sp[i].dur >= 49.0); /* covers the operator's kernel */
        }
    assert_int_equal(gpu, 4);
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
}

/* ---- a diamond: the sink's span begins after both producers' work ------------- */

typedef struct dop {
    const char *in[2];
    int nout;
    long long ns;
} dop;

static cw_status dop_compute(cw_io *io, void *user) {
    dop *o = user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, o->in[0], &s);
    if (st != CW_SUCCESS) return st;
    if (o->in[1] && (st = cw_io_receive_stream(io, o->in[1], &s)) != CW_SUCCESS) return st;
    long long ns = o->ns;
    void *args[] = {&g_word, &ns};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
    for (int i = 0; i < o->nout; i++)
        if ((st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL)) != CW_SUCCESS) return st;
    return CW_SUCCESS;
}

static void test_diamond_sink_after_both(void **state) {
    (void)state;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    assert_cw_ok(cw_buffer_get_ptr(b, &g_word));
    assert_cw_ok(cw_stream_synchronize(s));
    /* left is quick, right slow: the sink asks for "a" (left's) first */
    /* left runs 100 us: long enough that right's launch (the executor's next
     * call) arrives while it runs (with 10 us, seen on the H100, it did not) */
    static dop ops[4] = {{{NULL, NULL}, 2, 1000}, {{"in", NULL}, 1, 100000}, {{"in", NULL}, 1, 300000},
                         {{"a", "b"}, 0, 1000}};
    static const char *names[4] = {"src", "left", "right", "sink"};
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    for (int i = 0; i < 4; i++) {
        cw_operator_ops oo;
        memset(&oo, 0, sizeof oo);
        oo.compute = dop_compute;
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create(&op, names[i], &oo, &ops[i], NULL));
        for (int k = 0; k < 2; k++)
            if (ops[i].in[k]) assert_cw_ok(cw_operator_add_input(op, ops[i].in[k], NULL));
        if (ops[i].nout > 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        if (ops[i].nout > 1) assert_cw_ok(cw_operator_add_output(op, "out2", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "src", "out", "left", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "right", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "left", "out", "sink", "a"));
    assert_cw_ok(cw_pipeline_connect(p, "right", "out", "sink", "b"));
    cw_trace *t = NULL;
    cw_trace_settings ts;
    cw_trace_settings_default(&ts);
    ts.gpu_timing = CW_TRACE_GPU_EVENTS; /* the event path (CUPTI's: test_cupti_diamond) */
    assert_cw_ok(cw_trace_create(&t, &ts));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_pipeline_run(p, 2));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_trace_write(t, g_path));
    Span sp[64];
    const size_t n = read_spans(g_path, sp, 64);
    for (int it = 0; it < 2; it++) {
        const Span *l = NULL, *r = NULL, *k = NULL;
        int nl = 0, nr = 0, nk = 0;
        for (size_t i = 0; i < n; i++) {
            if (sp[i].pid != 2) continue;
            if (!strcmp(sp[i].name, "left") && nl++ == it) l = &sp[i];
            if (!strcmp(sp[i].name, "right") && nr++ == it) r = &sp[i];
            if (!strcmp(sp[i].name, "sink") && nk++ == it) k = &sp[i];
        }
        assert_non_null(l);
        assert_non_null(r);
        assert_non_null(k);
        printf("# iteration %d: left ends %.1f, right ends %.1f, sink begins %.1f us\n", it, l->ts + l->dur,
               r->ts + r->dur, k->ts);
        assert_true(r->dur >= 299.0);
        /* the branches overlap in the first iteration; in the second, right
         * waits on its stream for the first iteration's right (300 us) */
        if (it == 0) assert_true(l->ts < r->ts + r->dur && r->ts < l->ts + l->dur);
        assert_true(k->ts >= r->ts + r->dur - 1.0);                   /* after the slow branch too */
        assert_true(k->ts >= l->ts + l->dur - 1.0);
    }
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
}

/* ---- a green partition's stream ---------------------------------------------- */

static void test_partition_calibrated(void **state) {
    (void)state;
    cw_partition_caps caps;
    assert_cw_ok(cw_partition_get_caps(0, &caps));
    if (!caps.supported) skip();
    cw_partition_group *g = NULL;
    const unsigned sizes[1] = {8};
    assert_cw_ok(cw_partition_group_create(&g, 0, sizes, 1, -1));
    cw_partition_info pi;
    assert_cw_ok(cw_partition_group_get_partition(g, 0, &pi));
    cw_stream *gs = NULL, *ps = NULL;
    assert_cw_ok(cw_stream_create(&gs, pi.context, NULL));
    assert_cw_ok(cw_stream_create(&ps, ctx, NULL));
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_trace_begin(t, ps, "primary"));
    assert_cw_ok(cw_trace_end(t, ps));
    assert_cw_ok(cw_trace_begin(t, gs, "partition"));
    assert_cw_ok(cw_trace_end(t, gs));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    /* a calibration per context, and CUPTI's clock where the trace took CUPTI */
    assert_int_equal(info.contexts, 2u + (info.gpu_timing == CW_TRACE_GPU_CUPTI ? 1u : 0u));
    assert_cw_ok(cw_trace_write(t, g_path));
    Span sp[8];
    assert_int_equal(read_spans(g_path, sp, 8), 2);
    assert_true(named(sp, 2, "partition", 0)->ts >= named(sp, 2, "primary", 0)->ts - 50.0);
    cw_trace_destroy(&t);
    cw_stream_destroy(&gs);
    cw_stream_destroy(&ps);
    cw_partition_group_destroy(&g);
}

/* ---- CUPTI: kernel spans from CUPTI's records ------------------------------------ */

/* A trace on CUPTI, or NULL (the test skips, saying why). */
static cw_trace *cupti_trace(void) {
    cw_trace_settings ts;
    cw_trace_settings_default(&ts);
    ts.gpu_timing = CW_TRACE_GPU_CUPTI;
    cw_trace *t = NULL;
    const cw_status st = cw_trace_create(&t, &ts);
    if (st == CW_ERROR_NOT_SUPPORTED || st == CW_ERROR_NOT_PERMITTED) {
        printf("# no CUPTI here: %s: %s\n", cw_status_name(st), cw_last_error()->message);
        return NULL;
    }
    assert_cw_ok(st);
    return t;
}

static cw_devptr g_stamps;
static cw_status stamp_op(cw_io *io, void *user) {
    (void)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, NULL, &s);
    if (st != CW_SUCCESS) return st;
    long long ns = 200000;
    void *args[] = {&g_stamps, &ns};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    if ((st = cw_kernel_launch(k_stamp, s, &cfg, args)) != CW_SUCCESS) return st;
    static unsigned char host[1 << 20];
    return cw_copy_to_device(s, g_word, host, sizeof host);
}

static void test_cupti_spans_match_the_gpu(void **state) {
    (void)state;
    cw_trace *t = cupti_trace();
    if (!t) skip();
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL, *sb = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 1 << 20));
    assert_cw_ok(cw_buffer_create(&sb, s, 64));
    assert_cw_ok(cw_buffer_get_ptr(b, &g_word));
    assert_cw_ok(cw_buffer_get_ptr(sb, &g_stamps));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = stamp_op;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, "stamp", &ops, NULL, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    assert_cw_ok(cw_pipeline_run(p, 1)); /* untraced: loads the kernel (a span would hold the load) */
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_trace_host_begin(t, "run"));
    assert_cw_ok(cw_pipeline_run(p, 1));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_trace_host_end(t));
    unsigned long long stamps[2] = {0};
    assert_cw_ok(cw_copy_to_host(s, stamps, g_stamps, sizeof stamps));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cw_ok(cw_trace_write(t, g_path));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    printf("# CUPTI: %llu records, calibration within %.3f us\n", (unsigned long long)info.gpu_records,
           (double)info.calibration_error_ns / 1e3);
    assert_int_equal(info.gpu_timing, CW_TRACE_GPU_CUPTI);
    assert_int_equal(info.gpu_records, 2); /* the kernel and the copy */
    if (!slowed()) assert_true(info.calibration_error_ns < 50000);
    Span sp[32];
    const size_t n = read_spans(g_path, sp, 32);
    const Span *k = NULL, *c = NULL, *run = named(sp, n, "run", 0), *opspan = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(sp[i].cat, "kernel")) k = &sp[i];
        if (!strcmp(sp[i].cat, "memcpy")) c = &sp[i];
        if (!strcmp(sp[i].cat, "gpu") && !strcmp(sp[i].name, "stamp")) opspan = &sp[i];
    }
    assert_non_null(k);
    assert_non_null(c);
    assert_non_null(opspan);
    const double gpu_us = (double)(stamps[1] - stamps[0]) / 1e3, err = (double)info.calibration_error_ns / 1e3 + 1.0;
    printf("# kernel %s: %.2f us in the trace, %.2f us by its own stamps; copy %.2f us\n", k->name, k->dur, gpu_us,
           c->dur);
    assert_string_equal(k->name, "cw_stamp");
    assert_string_equal(k->op, "stamp");
    assert_string_equal(k->track, "stamp");
    assert_true(k->dur >= gpu_us - 0.5);
    if (!slowed()) assert_true(k->dur <= gpu_us + 2.0);
    assert_string_equal(c->name, "memcpy HtoD");
    assert_int_equal(c->bytes, 1 << 20);
    assert_true(c->ts >= k->ts + k->dur - 0.01); /* after the kernel on its stream */
    assert_true(k->ts >= run->ts - err && c->ts + c->dur <= run->ts + run->dur + err);
    assert_true(opspan->ts <= k->ts + 0.001 && opspan->ts + opspan->dur >= c->ts + c->dur - 0.001);
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_buffer_destroy(&sb);
    cw_stream_destroy(&s);
}

static void test_cupti_diamond(void **state) {
    (void)state;
    cw_trace *t = cupti_trace();
    if (!t) skip();
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    assert_cw_ok(cw_buffer_get_ptr(b, &g_word));
    assert_cw_ok(cw_stream_synchronize(s));
    static dop ops[4] = {{{NULL, NULL}, 2, 1000}, {{"in", NULL}, 1, 100000}, {{"in", NULL}, 1, 300000},
                         {{"a", "b"}, 0, 1000}};
    static const char *names[4] = {"src", "left", "right", "sink"};
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    for (int i = 0; i < 4; i++) {
        cw_operator_ops oo;
        memset(&oo, 0, sizeof oo);
        oo.compute = dop_compute;
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create(&op, names[i], &oo, &ops[i], NULL));
        for (int k = 0; k < 2; k++)
            if (ops[i].in[k]) assert_cw_ok(cw_operator_add_input(op, ops[i].in[k], NULL));
        if (ops[i].nout > 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        if (ops[i].nout > 1) assert_cw_ok(cw_operator_add_output(op, "out2", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "src", "out", "left", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "right", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "left", "out", "sink", "a"));
    assert_cw_ok(cw_pipeline_connect(p, "right", "out", "sink", "b"));
    assert_cw_ok(cw_pipeline_run(p, 1)); /* loads */
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_pipeline_run(p, 2));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_trace_write(t, g_path));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_records, 8); /* one kernel a call */
    Span sp[64];
    const size_t n = read_spans(g_path, sp, 64);
    for (int it = 0; it < 2; it++) {
        const Span *l = NULL, *r = NULL, *k = NULL;
        int nl = 0, nr = 0, nk = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(sp[i].cat, "kernel")) continue;
            if (!strcmp(sp[i].op, "left") && nl++ == it) l = &sp[i];
            if (!strcmp(sp[i].op, "right") && nr++ == it) r = &sp[i];
            if (!strcmp(sp[i].op, "sink") && nk++ == it) k = &sp[i];
        }
        assert_non_null(l);
        assert_non_null(r);
        assert_non_null(k);
        printf("# CUPTI iteration %d: left kernel %.1f us, right %.1f us, sink begins %.1f us after right ends\n", it,
               l->dur, r->dur, k->ts - (r->ts + r->dur));
        assert_true(r->dur >= 299.0 && l->dur >= 99.0);
        if (it == 0) assert_true(l->ts < r->ts + r->dur && r->ts < l->ts + l->dur); /* the branches overlap */
        assert_true(k->ts >= r->ts + r->dur - 0.01 && k->ts >= l->ts + l->dur - 0.01);
    }
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
}

/* A resident loop with a data-ready handler (cw_res_handler: data ready
 * while the count the host set is ahead of what it consumed), gate
 * NODE: the handler's and the workload's stages are marked by the loop's
 * own kernels (the poll, the gate, the signal), the stage inside the
 * workload by mark kernels. */
typedef struct hres {
    cw_resident *r;
    cw_devptr word, ctl, produced, consumed;
} hres;

static cw_status one_stage(cw_stream *s, void *user) {
    hres *u = user;
    uint32_t stage = 0;
    cw_status st = cw_resident_stage_begin(u->r, s, "inner", &stage);
    if (st != CW_SUCCESS) return st;
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    long long ns = 50000;
    void *args[] = {&u->word, &ns};
    if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
    return cw_resident_stage_end(u->r, s, stage);
}

static cw_status ready_handler(cw_stream *s, void *user) {
    hres *u = user;
    void *args[] = {&u->ctl, &u->produced, &u->consumed};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    return cw_kernel_launch(k_handler, s, &cfg, args);
}

static void test_resident_loop_kernels_mark(void **state) {
    (void)state;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    hres u;
    memset(&u, 0, sizeof u);
    assert_cw_ok(cw_buffer_get_ptr(b, &u.word));
    u.produced = u.word + 16;
    u.consumed = u.word + 32;
    const unsigned zero[12] = {0};
    assert_cw_ok(cw_copy_to_device(s, u.word, zero, sizeof zero));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    rs.gate = CW_RESIDENT_GATE_NODE; /* the workload runs only when served (its kernels do not read skip) */
    assert_cw_ok(cw_resident_create(&u.r, ctx, &rs));
    assert_cw_ok(cw_resident_get_ctl(u.r, &u.ctl));
    assert_cw_ok(cw_resident_set_workload_fn(u.r, one_stage, &u));
    assert_cw_ok(cw_resident_set_handler_fn(u.r, ready_handler, &u));
    assert_cw_ok(cw_resident_build(u.r));
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_trace_record_resident(t, u.r)); /* calibrates */
    assert_cw_ok(cw_resident_launch(u.r));
    const unsigned three = 3;
    assert_cw_ok(cw_copy_to_device(s, u.produced, &three, sizeof three)); /* three items */
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cw_ok(cw_resident_wait_result(u.r, 3, 5000));
    assert_cw_ok(cw_trace_record_resident(t, u.r));
    assert_cw_ok(cw_resident_tear_down(u.r, 5000));
    assert_cw_ok(cw_trace_write(t, g_path));
    Span sp[256];
    const size_t n = read_spans(g_path, sp, 256);
    int workloads = 0, handlers = 0;
    for (size_t i = 0; i < n; i++) {
        handlers += !strcmp(sp[i].name, "handler");
        if (strcmp(sp[i].name, "workload")) continue;
        const Span *w = &sp[i];
        workloads++;
        int inside = 0; /* the inner stage of this iteration, inside the workload */
        for (size_t j = 0; j < n; j++)
            if (!strcmp(sp[j].name, "inner") && sp[j].ts >= w->ts - 0.001 && sp[j].ts + sp[j].dur <= w->ts + w->dur + 0.001) {
                inside++;
                printf("# workload %.2f us around its inner stage's %.2f us\n", w->dur, sp[j].dur);
                assert_true(sp[j].dur >= 49.0);
                if (!slowed()) assert_true(w->dur < sp[j].dur + 30.0); /* the loop's own marks close around it */
            }
        assert_int_equal(inside, 1);
    }
    printf("# handler loop: %d workload stages, %d handler stages\n", workloads, handlers);
    assert_true(workloads >= 1);
    assert_true(handlers >= 1);
    cw_resident_destroy(&u.r);
    cw_trace_destroy(&t);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS || cw_module_load_image(&mod, cw_test_kernels_fatbin) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_stamp", &k_stamp) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_spin_add", &k_spin) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_res_handler", &k_handler) != CW_SUCCESS)
        return -1;
    snprintf(g_path, sizeof g_path, "/tmp/cw-gpu-trace-%d.json", (int)getpid());
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    unlink(g_path);
    cw_module_destroy(&mod);
    cw_context_destroy(&ctx);
    return 0;
}

int main(void) {
    const int start = rawcuda_start(&rc);
    if (start != 0) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans_match_the_gpu),
        cmocka_unit_test(test_resident_stages),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_diamond_sink_after_both),
        cmocka_unit_test(test_partition_calibrated),
        cmocka_unit_test(test_cupti_spans_match_the_gpu),
        cmocka_unit_test(test_cupti_diamond),
        cmocka_unit_test(test_resident_loop_kernels_mark),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
