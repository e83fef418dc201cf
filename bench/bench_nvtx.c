/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_nvtx: what cuweave's NVTX ranges (src/base/nvtx.hpp, docs/tracing.md
 * "Nsight Systems") cost with no tool attached, against the work they mark.
 * Device 0, one run.
 *
 *  1. A push/pop pair through the module's scope helper (CW_NVTX_RANGE, the
 *     ranges' only code path), PAIRS pairs per round, ROUNDS rounds, against
 *     the same loop without it: nanoseconds per pair, p50 and p99 over
 *     rounds, and the difference.
 *  2. The enqueue of a diamond pipeline A -> (B, D) -> C whose operators each
 *     launch one tiny kernel (cw_spin_add, no spin), one executor thread:
 *     cw_pipeline_run's time per compute call (each compute call is one
 *     range; the run one more), p50 and p99 over rounds.
 *  3. The ratio: a pair's cost over a compute call's. PASS when a pair costs
 *     under 5 ns more than the empty loop and under 0.1 % of a compute call
 *     (issue 42: "no tool attached, the ranges cost nothing measurable").
 *
 * With a tool attached (NVTX_INJECTION64_PATH, e.g. the tests' counting
 * tool build/tests/libnvtxinject.so) the same figures are what that tool
 * costs; the verdict then does not apply and is not printed. The output says
 * whether the ranges are compiled in and whether a tool is attached.
 *
 * Exits 77 without a GPU, 1 when a call fails, 0 otherwise. Set CW_COMMIT to
 * name the commit in the output. BENCH_CSV=dir writes the per-round samples.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuweave/cuweave.h>

#define BENCH_NAME "bench_nvtx"
#include "../tests/rawcuda.h"
#include "bench_common.h"
#include "../tests/kernels/test_kernels_fatbin.h"
#include "testing/seam.h"

enum { PAIRS = 1000000, ITERS = 200, ROUNDS = 31 };

static cw_kernel *k_spin;

typedef struct op {
    const char *in[2];
    int nout;
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
    long long ns = 0;
    void *args[] = {&o->word, &ns};
    if ((st = cw_kernel_launch(k_spin, s, &cfg, args)) != CW_SUCCESS) return st;
    for (int i = 0; i < o->nout; i++)
        if ((st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL)) != CW_SUCCESS) return st;
    return CW_SUCCESS;
}

static op g_ops[4];

static cw_pipeline *make_diamond(cw_context *ctx, cw_devptr word) {
    static const char *names[4] = {"A", "B", "D", "C"};
    const op shape[4] = {{{NULL, NULL}, 2, 0}, {{"in", NULL}, 1, 0}, {{"in", NULL}, 1, 0}, {{"a", "b"}, 0, 0}};
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 1;
    cw_pipeline *p = NULL;
    CW_CHECK(cw_pipeline_create(&p, ctx, &ps));
    for (int i = 0; i < 4; i++) {
        g_ops[i] = shape[i];
        g_ops[i].word = word;
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

int main(void) {
    rawcuda rc;
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;
    bench_watchdog(120);
    const int compiled = cwi_nvtx_compiled(), tool = cwi_nvtx_on();
    printf("bench_nvtx: %s (%d SMs), driver %d, commit %s, %s\n", info.name, info.sm_count, drv, commit, date);
    printf("NVTX ranges: %s; tool: %s\n", compiled ? "compiled in" : "compiled out (no NVTX3 headers at build time)",
           tool ? "attached (NVTX_INJECTION64_PATH)" : "none attached");

    /* 1. a pair against an empty call, rounds interleaved */
    double pair[ROUNDS], empty[ROUNDS], diff[ROUNDS];
    (void)cwi_nvtx_pairs(PAIRS / 10, 0); /* warm */
    (void)cwi_nvtx_pairs(PAIRS / 10, 1);
    for (int r = 0; r < ROUNDS; r++) {
        const int first = r % 2;
        double v[2];
        for (int k = 0; k < 2; k++) {
            const int e = k ^ first;
            v[e] = (double)cwi_nvtx_pairs(PAIRS, e) / PAIRS;
        }
        pair[r] = v[0];
        empty[r] = v[1];
        diff[r] = v[0] - v[1];
    }
    double pair_us[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) pair_us[r] = pair[r] / 1e3;
    bench_csv_us("push_pop_pair", pair_us, ROUNDS);
    const stats sp = stats_of(pair, ROUNDS), se = stats_of(empty, ROUNDS), sd = stats_of(diff, ROUNDS);
    printf("push/pop pair (CW_NVTX_RANGE): p50 %.2f ns, p99 %.2f ns per pair (%d rounds of %d)\n", sp.p50, sp.p99,
           ROUNDS, PAIRS);
    printf("the same loop without the range: p50 %.2f ns, p99 %.2f ns\n", se.p50, se.p99);
    printf("pair - empty: p50 %.2f ns, p99 %.2f ns\n", sd.p50, sd.p99);

    /* 2. the pipeline's enqueue per compute call */
    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cw_module *mod = NULL;
    CW_CHECK(cw_module_load_image(&mod, cw_test_kernels_fatbin));
    CW_CHECK(cw_module_get_kernel(mod, "cw_spin_add", &k_spin));
    cw_stream *s = NULL;
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    CW_CHECK(cw_buffer_create(&buf, s, 64));
    cw_devptr word = 0;
    CW_CHECK(cw_buffer_get_ptr(buf, &word));
    cw_pipeline *p = make_diamond(ctx, word);
    CW_CHECK(cw_pipeline_run(p, ITERS)); /* warm-up: pools, kernels */
    CW_CHECK(cw_pipeline_synchronize(p));
    double call[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        const unsigned long long a = now_ns();
        CW_CHECK(cw_pipeline_run(p, ITERS));
        const unsigned long long b = now_ns();
        CW_CHECK(cw_pipeline_synchronize(p));
        call[r] = (double)(b - a) / 1e3 / (ITERS * 4.0);
    }
    bench_csv_us("enqueue_per_compute_call", call, ROUNDS);
    const stats sc = stats_of(call, ROUNDS);
    printf("diamond pipeline enqueue (4 operators, 1 thread, %d iterations a round): p50 %.3f us, p99 %.3f us per "
           "compute call\n",
           ITERS, sc.p50, sc.p99);

    /* 3. the share */
    const double share = sd.p50 / (sc.p50 * 1e3) * 100.0;
    printf("a range's share of a compute call: %.4f %% (%.2f ns of %.3f us)\n", share, sd.p50, sc.p50);
    if (!tool)
        printf("target (no tool attached: under 5 ns a pair and 0.1 %% of a compute call): %s\n",
               pass(sd.p50 < 5.0 && share < 0.1));
    printf("---- docs/benchmarks.md ----\n");
    printf("| %s | %s | %s | %.2f ns | %.2f ns | %.3f us | %.4f %% |\n", info.name, commit, tool ? "attached" : "none",
           sp.p50, sd.p50, sc.p50, share);

    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&mod);
    cw_context_destroy(&ctx);
    return 0;
}
