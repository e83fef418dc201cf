/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_trace: what tracing costs (cuweave/trace.h), and the traces the
 * pictures of docs/tracing.md are made from. Device 0, one run.
 *
 * Overhead. A diamond pipeline A -> (B, D) -> C whose operators each launch
 * one tiny kernel (cw_spin_add, no spin) on the stream cw_io_receive_stream
 * gives them, run ITERS iterations per set (cw_pipeline_run then
 * cw_pipeline_synchronize), ROUNDS rounds of four sets: untraced; traced on
 * timing events (a trace made with gpu_timing EVENTS); then, with a trace on
 * CUPTI made for the round (gpu_timing CUPTI: the process's CUPTI session
 * opened), untraced while that trace holds CUPTI, and traced on CUPTI; the
 * order of each pair alternating round to round. Traced sets are followed
 * by a write to /dev/null (which resolves and frees the events, and flushes
 * CUPTI's records, as a user's periodic write would); the CUPTI trace is
 * destroyed at the round's end (CUPTI closed). Reported: microseconds per
 * iteration (p50 and p99 over rounds) of each, the differences per iteration
 * and per compute call (4 a round), the ratios to untraced, and the enqueue
 * alone (cw_pipeline_run's time). Without CUPTI (none found, or another
 * tool holds it: the line says why) the CUPTI rows are left out. Then the
 * cost of one GPU span placed by hand (cw_trace_begin + cw_trace_end on a
 * stream, two event records), of one host span (cw_trace_host_begin +
 * cw_trace_host_end) and of cw_trace_write per span.
 *
 * Resident stage marks. A resident loop (gate NODE, no overlap) whose
 * workload is one tiny kernel served RES_REQUESTS requests three ways:
 * untraced; traced (the workload a stage: its two marks stored by the
 * loop's own kernels); traced with the workload's kernel inside two stages
 * of the capture function (four mark kernels more). Reported: the loop's
 * own GPU time per iteration (cw_resident_info.iter_median_ns) of each, and
 * per mark: (traced - untraced) / 2 and (stages - traced) / 4.
 *
 * Pictures (BENCH_TRACE_DIR=dir): writes
 *   dir/diamond.json   the diamond with B and D spinning 50 us each on one
 *                      SM, 6 iterations with 2 worker threads: B and D
 *                      overlap on the GPU and on the host;
 *   dir/resident.json  a resident loop (trace=1) whose workload has three
 *                      stages (decode 20 us, infer 40 us, post 10 us), 12
 *                      requests, cw_trace_record_resident after each
 *                      result, each request a host span;
 *   dir/green.json     a 1-block kernel (5 us) launched 10 times beside a
 *                      hog that fills the GPU, first both on the primary
 *                      context, then the kernel on a 16-SM partition and
 *                      the hog on the leftover (skipped without green
 *                      contexts).
 * tools/trace_plot.py renders them (tools/make-pictures.sh does both).
 *
 * Exits 77 without a GPU, 1 when a call fails, 0 otherwise. Set CW_COMMIT
 * to name the commit in the output. BENCH_CSV=dir writes the per-round
 * samples (bench_common.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#define BENCH_NAME "bench_trace"
#include "../tests/rawcuda.h"
#include "bench_common.h"
#include "../tests/kernels/test_kernels_fatbin.h"

enum { ITERS = 200, ROUNDS = 15, MARKS = 20000, RES_REQUESTS = 3000 };

static cw_kernel *k_spin, *k_hog;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void launch_spin(cw_stream *s, cw_devptr word, long long ns, unsigned blocks) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = blocks;
    cfg.block[0] = 32;
    void *args[] = {&word, &ns};
    CW_CHECK(cw_kernel_launch(k_spin, s, &cfg, args));
}

/* ---- the diamond -------------------------------------------------------------------- */

typedef struct op {
    const char *in[2];
    int nout;
    long long spin_ns;
    cw_devptr word;
} op;

static cw_status op_compute(cw_io *io, void *user) {
    op *o = user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, o->in[0], &s);
    if (st != CW_SUCCESS) return st;
    if (o->in[1] && (st = cw_io_receive_stream(io, o->in[1], &s)) != CW_SUCCESS) return st;
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.block[0] = 32;
    long long ns = o->spin_ns;
    void *args[] = {&o->word, &ns};
    if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
    for (int i = 0; i < o->nout; i++)
        if ((st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL)) != CW_SUCCESS) return st;
    return CW_SUCCESS;
}

static op g_ops[4];

static cw_pipeline *make_diamond(cw_context *ctx, cw_devptr word, long long spin_ns, unsigned threads) {
    static const char *names[4] = {"A", "B", "D", "C"};
    const op shape[4] = {{{NULL, NULL}, 2, 0, 0}, {{"in", NULL}, 1, 0, 0}, {{"in", NULL}, 1, 0, 0}, {{"a", "b"}, 0, 0, 0}};
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = threads;
    cw_pipeline *p = NULL;
    CW_CHECK(cw_pipeline_create(&p, ctx, &ps));
    for (int i = 0; i < 4; i++) {
        g_ops[i] = shape[i];
        g_ops[i].word = word;
        g_ops[i].spin_ns = (i == 1 || i == 2) ? spin_ns : 0;
        cw_operator_ops ops;
        memset(&ops, 0, sizeof ops);
        ops.compute = op_compute;
        cw_operator *o = NULL;
        CW_CHECK(cw_operator_create(&o, names[i], &ops, &g_ops[i], NULL));
        for (int k = 0; k < 2; k++)
            if (g_ops[i].in[k]) CW_CHECK(cw_operator_add_input(o, g_ops[i].in[k], NULL));
        if (g_ops[i].nout > 0) CW_CHECK(cw_operator_add_output(o, "out", NULL));
        if (g_ops[i].nout > 1) CW_CHECK(cw_operator_add_output(o, "out2", NULL));
        CW_CHECK(cw_pipeline_add(p, o));
    }
    CW_CHECK(cw_pipeline_connect(p, "A", "out", "B", "in"));
    CW_CHECK(cw_pipeline_connect(p, "A", "out2", "D", "in"));
    CW_CHECK(cw_pipeline_connect(p, "B", "out", "C", "a"));
    CW_CHECK(cw_pipeline_connect(p, "D", "out", "C", "b"));
    return p;
}

/* ---- the resident loop's stages ------------------------------------------------------ */

typedef struct res_user {
    cw_resident *r;
    cw_devptr word;
} res_user;

static cw_status res_workload(cw_stream *s, void *user) {
    res_user *u = user;
    static const char *names[3] = {"decode", "infer", "post"};
    static const long long ns[3] = {20000, 40000, 10000};
    for (int i = 0; i < 3; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(u->r, s, names[i], &stage);
        if (st != CW_SUCCESS) return st;
        cw_launch_config cfg;
        cw_launch_config_default(&cfg);
        long long v = ns[i];
        void *args[] = {&u->word, &v};
        if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(u->r, s, stage)) != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

static void picture_resident(cw_context *ctx, cw_devptr word, const char *path) {
    cw_trace *t = NULL;
    CW_CHECK(cw_trace_create(&t, NULL));
    CW_CHECK(cw_trace_name_thread(t, "requests (main thread)"));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    cw_resident *r = NULL;
    CW_CHECK(cw_resident_create(&r, ctx, &rs));
    res_user u = {r, word};
    CW_CHECK(cw_resident_set_workload_fn(r, res_workload, &u));
    CW_CHECK(cw_resident_build(r));
    CW_CHECK(cw_trace_record_resident(t, r)); /* calibrates the global timer before the loop runs */
    CW_CHECK(cw_resident_launch(r));
    for (int i = 0; i < 12; i++) {
        uint64_t seq = 0;
        CW_CHECK(cw_trace_host_begin(t, "request"));
        CW_CHECK(cw_resident_data_ready(r, &seq));
        CW_CHECK(cw_resident_wait_result(r, seq, 5000));
        CW_CHECK(cw_trace_host_end(t));
        CW_CHECK(cw_trace_record_resident(t, r));
        sleep_us(30);
    }
    CW_CHECK(cw_resident_tear_down(r, 5000));
    cw_trace_info info;
    CW_CHECK(cw_trace_get_info(t, &info));
    CW_CHECK(cw_trace_write(t, path));
    printf("picture: %s (%llu spans; global timer calibrated within %.2f us)\n", path,
           (unsigned long long)info.spans, (double)info.calibration_error_ns / 1e3);
    cw_resident_destroy(&r);
    cw_trace_destroy(&t);
}

/* ---- a small kernel beside a hog ------------------------------------------------------- */

static void small_beside_hog(cw_trace *t, cw_stream *small, cw_stream *hog, cw_devptr sw, cw_devptr hw,
                             unsigned hog_sms) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = hog_sms * 16; /* 16 blocks of 128 threads: a full wave of each SM */
    cfg.block[0] = 128;
    long long hog_ns = 2000000;
    void *hargs[] = {&hw, &hog_ns};
    CW_CHECK(cw_trace_begin(t, hog, "hog (every SM, 2 ms)"));
    CW_CHECK(cw_kernel_launch(k_hog, hog, &cfg, hargs));
    CW_CHECK(cw_trace_end(t, hog));
    sleep_us(100);
    for (int i = 0; i < 10; i++) {
        CW_CHECK(cw_trace_host_begin(t, "launch + sync"));
        CW_CHECK(cw_trace_begin(t, small, "small"));
        launch_spin(small, sw, 5000, 1);
        CW_CHECK(cw_trace_end(t, small));
        CW_CHECK(cw_stream_synchronize(small));
        CW_CHECK(cw_trace_host_end(t));
        sleep_us(50);
    }
    CW_CHECK(cw_stream_synchronize(hog));
}

static void picture_green(cw_context *ctx, cw_stream *s0, cw_devptr word, unsigned sms, const char *path) {
    cw_partition_caps caps;
    CW_CHECK(cw_partition_get_caps(0, &caps));
    if (!caps.supported) {
        printf("picture: %s skipped: no green contexts here\n", path);
        return;
    }
    cw_trace *t = NULL;
    CW_CHECK(cw_trace_create(&t, NULL));
    CW_CHECK(cw_trace_name_thread(t, "main thread"));
    cw_stream *small = NULL, *hog = NULL;
    CW_CHECK(cw_stream_create(&small, ctx, NULL));
    CW_CHECK(cw_stream_create(&hog, ctx, NULL));
    CW_CHECK(cw_trace_name_stream(t, small, "small kernel, primary context"));
    CW_CHECK(cw_trace_name_stream(t, hog, "hog, primary context"));
    small_beside_hog(t, small, hog, word, word + 8, sms);
    sleep_us(500);
    cw_partition_group *g = NULL;
    const unsigned sizes[1] = {16};
    CW_CHECK(cw_partition_group_create(&g, 0, sizes, 1, -1));
    cw_partition_info pi_small, pi_left;
    CW_CHECK(cw_partition_group_get_partition(g, 0, &pi_small));
    CW_CHECK(cw_partition_group_get_partition(g, 1, &pi_left));
    cw_stream *gs = NULL, *gh = NULL;
    CW_CHECK(cw_stream_create(&gs, pi_small.context, NULL));
    CW_CHECK(cw_stream_create(&gh, pi_left.context, NULL));
    cw_buffer *bs = NULL, *bh = NULL;
    CW_CHECK(cw_buffer_create(&bs, gs, 64));
    CW_CHECK(cw_buffer_create(&bh, gh, 64));
    cw_devptr ps = 0, ph = 0;
    CW_CHECK(cw_buffer_get_ptr(bs, &ps));
    CW_CHECK(cw_buffer_get_ptr(bh, &ph));
    char name[64];
    snprintf(name, sizeof name, "small kernel, %u-SM partition", pi_small.sm_count);
    CW_CHECK(cw_trace_name_stream(t, gs, name));
    snprintf(name, sizeof name, "hog, leftover partition (%u SMs)", pi_left.sm_count);
    CW_CHECK(cw_trace_name_stream(t, gh, name));
    small_beside_hog(t, gs, gh, ps, ph, pi_left.sm_count);
    cw_trace_info info;
    CW_CHECK(cw_trace_get_info(t, &info));
    CW_CHECK(cw_trace_write(t, path));
    printf("picture: %s (%llu spans, %u calibrations, within %.2f us)\n", path, (unsigned long long)info.spans,
           info.contexts, (double)info.calibration_error_ns / 1e3);
    cw_buffer_destroy(&bs);
    cw_buffer_destroy(&bh);
    cw_stream_destroy(&gs);
    cw_stream_destroy(&gh);
    cw_partition_group_destroy(&g);
    cw_stream_destroy(&small);
    cw_stream_destroy(&hog);
    cw_trace_destroy(&t);
    (void)s0;
}

/* ---- the resident loop's stage marks on the GPU --------------------------------------- */

typedef struct marks_user {
    cw_resident *r;
    cw_devptr word;
    int stages; /* the capture function's stages around the kernel */
} marks_user;

static cw_status marks_workload(cw_stream *s, void *user) {
    marks_user *u = user;
    uint32_t st[2] = {CW_RESIDENT_NO_STAGE, CW_RESIDENT_NO_STAGE};
    static const char *names[2] = {"outer", "inner"};
    cw_status rc = CW_SUCCESS;
    for (int i = 0; i < u->stages && rc == CW_SUCCESS; i++) rc = cw_resident_stage_begin(u->r, s, names[i], &st[i]);
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    long long ns = 0;
    void *args[] = {&u->word, &ns};
    if (rc == CW_SUCCESS) rc = cw_kernel_launch(k_spin, s, &cfg, args);
    for (int i = u->stages; i-- > 0 && rc == CW_SUCCESS;) rc = cw_resident_stage_end(u->r, s, st[i]);
    return rc;
}

/* The loop's GPU median per iteration (ns) over RES_REQUESTS requests. */
static double loop_median_ns(cw_context *ctx, cw_devptr word, int trace, int stages) {
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = trace;
    rs.overlap = 0;
    rs.gate = CW_RESIDENT_GATE_NODE;
    cw_resident *r = NULL;
    CW_CHECK(cw_resident_create(&r, ctx, &rs));
    marks_user u = {r, word, stages};
    CW_CHECK(cw_resident_set_workload_fn(r, marks_workload, &u));
    CW_CHECK(cw_resident_build(r));
    CW_CHECK(cw_resident_launch(r));
    for (int i = 0; i < RES_REQUESTS; i++) {
        uint64_t seq = 0;
        CW_CHECK(cw_resident_data_ready(r, &seq));
        CW_CHECK(cw_resident_wait_result(r, seq, 5000));
    }
    cw_resident_info ri;
    CW_CHECK(cw_resident_get_info(r, &ri));
    CW_CHECK(cw_resident_tear_down(r, 5000));
    cw_resident_destroy(&r);
    return (double)ri.iter_median_ns;
}

int main(void) {
    rawcuda rc;
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;
    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cw_module *mod = NULL;
    CW_CHECK(cw_module_load_image(&mod, cw_test_kernels_fatbin));
    CW_CHECK(cw_module_get_kernel(mod, "cw_spin_add", &k_spin));
    CW_CHECK(cw_module_get_kernel(mod, "cw_hog", &k_hog));
    cw_stream *s = NULL;
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    CW_CHECK(cw_buffer_create(&buf, s, 64));
    cw_devptr word = 0;
    CW_CHECK(cw_buffer_get_ptr(buf, &word));
    printf("bench_trace: %s (%d SMs), driver %d, commit %s, %s\n", info.name, info.sm_count, drv, commit, date);

    /* ---- overhead of a traced pipeline: off, events, CUPTI */
    cw_pipeline *p = make_diamond(ctx, word, 0, 1);
    cw_trace_settings ts;
    cw_trace_settings_default(&ts);
    ts.gpu_timing = CW_TRACE_GPU_EVENTS;
    cw_trace *t = NULL;
    CW_CHECK(cw_trace_create(&t, &ts));
    CW_CHECK(cw_pipeline_run(p, ITERS)); /* warm-up: pools, the calibration */
    CW_CHECK(cw_pipeline_set_trace(p, t));
    CW_CHECK(cw_pipeline_run(p, ITERS));
    CW_CHECK(cw_pipeline_synchronize(p));
    CW_CHECK(cw_trace_write(t, "/dev/null"));
    /* Is CUPTI there? (a trace on CUPTI, or why not) */
    ts.gpu_timing = CW_TRACE_GPU_CUPTI;
    cw_trace *probe = NULL;
    const cw_status cupti_st = cw_trace_create(&probe, &ts);
    const int have_cupti = cupti_st == CW_SUCCESS;
    if (have_cupti) {
        CW_CHECK(cw_pipeline_set_trace(p, probe)); /* warm CUPTI's path too */
        CW_CHECK(cw_pipeline_run(p, ITERS));
        CW_CHECK(cw_pipeline_synchronize(p));
        CW_CHECK(cw_trace_write(probe, "/dev/null"));
        cw_trace_info pi;
        CW_CHECK(cw_trace_get_info(probe, &pi));
        printf("CUPTI: used (%llu records merged in the warm-up, calibrated within %lld ns)\n",
               (unsigned long long)pi.gpu_records, (long long)pi.calibration_error_ns);
        CW_CHECK(cw_pipeline_set_trace(p, NULL));
        cw_trace_destroy(&probe);
    } else {
        printf("CUPTI: not used: %s: %s\n", cw_status_name(cupti_st), cw_last_error()->message);
    }
    enum { OFF, EVENTS, HELD, CUPTI, NSETS };
    static const char *const set_names[NSETS] = {"untraced", "traced, events", "untraced, CUPTI held", "traced, CUPTI"};
    double per[NSETS][ROUNDS], enq[NSETS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        cw_trace *tc = NULL;
        for (int k = 0; k < NSETS; k++) {
            /* pairs (OFF, EVENTS) then (HELD, CUPTI), each pair's order alternating */
            const int set = k < 2 ? ((k + r) % 2 ? EVENTS : OFF) : ((k + r) % 2 ? CUPTI : HELD);
            if (k == 2) {
                if (!have_cupti) break;
                CW_CHECK(cw_trace_create(&tc, &ts));
            }
            CW_CHECK(cw_pipeline_set_trace(p, set == EVENTS ? t : set == CUPTI ? tc : NULL));
            const unsigned long long a0 = now_ns();
            CW_CHECK(cw_pipeline_run(p, ITERS));
            const unsigned long long b0 = now_ns();
            CW_CHECK(cw_pipeline_synchronize(p));
            const unsigned long long c0 = now_ns();
            per[set][r] = (double)(c0 - a0) / 1e3 / ITERS;
            enq[set][r] = (double)(b0 - a0) / 1e3 / ITERS;
            if (set == EVENTS) CW_CHECK(cw_trace_write(t, "/dev/null"));
            if (set == CUPTI) CW_CHECK(cw_trace_write(tc, "/dev/null"));
        }
        CW_CHECK(cw_pipeline_set_trace(p, NULL));
        cw_trace_destroy(&tc); /* CUPTI closed until the next round */
    }
    const int nsets = have_cupti ? NSETS : 2;
    stats st[NSETS], se[NSETS];
    for (int k = 0; k < nsets; k++) {
        char label[96];
        snprintf(label, sizeof label, "diamond %s us per iteration", set_names[k]);
        bench_csv_us(label, per[k], ROUNDS);
        st[k] = stats_of(per[k], ROUNDS);
        se[k] = stats_of(enq[k], ROUNDS);
    }
    printf("\ndiamond pipeline (4 operators, 1 thread), %d iterations x %d rounds, over rounds:\n", ITERS, ROUNDS);
    for (int k = 0; k < nsets; k++)
        printf("  %-22s run + sync p50 %.2f p99 %.2f us/iteration (%.3fx untraced; +%.2f us per compute call), "
               "enqueue p50 %.2f\n", set_names[k], st[k].p50, st[k].p99, st[k].p50 / st[OFF].p50,
               (st[k].p50 - st[OFF].p50) / 4, se[k].p50);
    if (have_cupti)
        printf("  CUPTI: cuweave's part (traced, CUPTI against untraced, CUPTI held) +%.2f us per compute call; "
               "CUPTI's own recording +%.2f us per compute call\n", (st[CUPTI].p50 - st[HELD].p50) / 4,
               (st[HELD].p50 - st[OFF].p50) / 4);

    /* ---- spans by hand */
    cw_trace *m = NULL;
    ts.gpu_timing = CW_TRACE_GPU_EVENTS; /* no CUPTI session beside the hand spans */
    CW_CHECK(cw_trace_create(&m, &ts));
    CW_CHECK(cw_trace_begin(m, s, "calibrate"));
    CW_CHECK(cw_trace_end(m, s));
    unsigned long long a = now_ns();
    for (int i = 0; i < MARKS; i++) {
        CW_CHECK(cw_trace_begin(m, s, "mark"));
        CW_CHECK(cw_trace_end(m, s));
    }
    const double gpu_pair = (double)(now_ns() - a) / 1e3 / MARKS;
    CW_CHECK(cw_stream_synchronize(s));
    a = now_ns();
    for (int i = 0; i < MARKS; i++) {
        CW_CHECK(cw_trace_host_begin(m, "host"));
        CW_CHECK(cw_trace_host_end(m));
    }
    const double host_pair = (double)(now_ns() - a) / 1e3 / MARKS;
    a = now_ns();
    CW_CHECK(cw_trace_write(m, "/dev/null"));
    const double write_per_span = (double)(now_ns() - a) / 1e3 / (2.0 * MARKS + 1);
    printf("  cw_trace_begin + cw_trace_end on a stream: %.2f us per span (mean of %d)\n", gpu_pair, MARKS);
    printf("  cw_trace_host_begin + cw_trace_host_end: %.3f us per span (mean of %d)\n", host_pair, MARKS);
    printf("  cw_trace_write: %.3f us per span (events resolved, JSON written to /dev/null)\n", write_per_span);
    cw_trace_destroy(&m);

    /* ---- the resident loop's stage marks (GPU time) */
    const double res_off = loop_median_ns(ctx, word, 0, 0), res_on = loop_median_ns(ctx, word, 1, 0),
                 res_stages = loop_median_ns(ctx, word, 1, 2);
    printf("\nresident loop (gate NODE, one tiny kernel), GPU median per iteration over %d requests:\n", RES_REQUESTS);
    printf("  untraced %.2f us, traced workload %.2f us (+%.3f us per mark, stored by the loop's kernels), "
           "two stages more %.2f us (+%.3f us per mark kernel)\n", res_off / 1e3, res_on / 1e3,
           (res_on - res_off) / 2e3, res_stages / 1e3, (res_stages - res_on) / 4e3);

    /* ---- pictures */
    const char *dir = getenv("BENCH_TRACE_DIR");
    if (dir && *dir) {
        char path[512];
        cw_pipeline *d = make_diamond(ctx, word, 50000, 2);
        cw_trace *dt = NULL;
        CW_CHECK(cw_trace_create(&dt, NULL));
        CW_CHECK(cw_pipeline_run(d, 2)); /* warm-up */
        CW_CHECK(cw_pipeline_synchronize(d));
        CW_CHECK(cw_pipeline_set_trace(d, dt));
        CW_CHECK(cw_pipeline_run(d, 6));
        CW_CHECK(cw_pipeline_synchronize(d));
        snprintf(path, sizeof path, "%s/diamond.json", dir);
        CW_CHECK(cw_trace_write(dt, path));
        printf("picture: %s\n", path);
        cw_pipeline_destroy(&d);
        cw_trace_destroy(&dt);
        snprintf(path, sizeof path, "%s/resident.json", dir);
        picture_resident(ctx, word, path);
        snprintf(path, sizeof path, "%s/green.json", dir);
        picture_green(ctx, s, word, (unsigned)info.sm_count, path);
    }

    printf("\n### Tracing overhead (bench_trace, %s, driver %d, commit %s, %s)\n\n", info.name, drv, commit, date);
    printf("| what | p50 | p99 | against untraced |\n|---|---|---|---|\n");
    for (int k = 0; k < nsets; k++)
        printf("| diamond pipeline %s, run + sync, us/iteration | %.2f | %.2f | %.3fx, +%.2f (+%.2f per compute call) |\n",
               set_names[k], st[k].p50, st[k].p99, st[k].p50 / st[OFF].p50, st[k].p50 - st[OFF].p50,
               (st[k].p50 - st[OFF].p50) / 4);
    for (int k = 0; k < nsets; k++)
        printf("| diamond pipeline %s, enqueue, us/iteration | %.2f | %.2f | +%.2f |\n", set_names[k], se[k].p50,
               se[k].p99, se[k].p50 - se[OFF].p50);
    printf("| resident loop untraced, GPU us/iteration | %.2f | | |\n", res_off / 1e3);
    printf("| resident loop, workload traced (2 marks by the loop's kernels) | %.2f | | +%.3f us per mark |\n",
           res_on / 1e3, (res_on - res_off) / 2e3);
    printf("| resident loop, 2 capture-function stages more (4 mark kernels) | %.2f | | +%.3f us per mark kernel |\n",
           res_stages / 1e3, (res_stages - res_on) / 4e3);
    printf("| GPU span by hand (begin + end) | %.2f us | | |\n", gpu_pair);
    printf("| host span (host_begin + host_end) | %.3f us | | |\n", host_pair);
    printf("| cw_trace_write, per span | %.3f us | | |\n", write_per_span);

    cw_trace_destroy(&t);
    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&mod);
    cw_context_destroy(&ctx);
    return 0;
}
