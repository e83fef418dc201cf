/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_graph: a chain of N small kernels (cw_mul_add, one thread, each
 * depending on the last), launched directly versus replayed as a graph, per
 * iteration including the synchronisation, for N = 1, 2, 3, 5, 10, 30 and
 * 100; cuweave and the raw driver API side by side, measured in one run on
 * device 0:
 *
 *   a) raw direct     N x cuLaunchKernel + cuStreamSynchronize
 *   b) raw graph      cuGraphLaunch of the captured chain + cuStreamSynchronize
 *   c) cw direct      N x cuLaunchKernel on a cw_stream + cw_stream_synchronize
 *   d) cw graph       cw_graph_exec_launch + cw_stream_synchronize
 *
 * The graphs are captured once per N (cw_capture_begin/end for d, the raw
 * capture calls for b), instantiated and uploaded before timing. One
 * iteration is timed with CLOCK_MONOTONIC from before the first launch to
 * the return of the synchronisation. After warm-up the four methods run in
 * rounds (one iteration each per round, in a fresh random order) so that
 * drift and order effects cancel.
 *
 * Prints the table, the crossover (the smallest N from which replaying the
 * graph is faster than launching directly, for cuweave and for the raw
 * driver) and cuweave's overhead over the raw driver (cw graph / raw graph,
 * cw direct / raw direct; target: at most 1.05 at p50), then a Markdown
 * block for docs/benchmarks.md. Exits 77 without a GPU, 1 when a call
 * fails, 0 otherwise. Set CW_COMMIT to name the commit; BENCH_ROUNDS to
 * change the rounds per N (default 2000).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_graph"
#include "bench_common.h"

enum { M_RAW_DIRECT, M_RAW_GRAPH, M_CW_DIRECT, M_CW_GRAPH, M_COUNT };
static const char *const method_name[M_COUNT] = {"raw direct", "raw graph", "cw direct", "cw graph"};
static const int k_chain[] = {1, 2, 3, 5, 10, 30, 100};
#define NCHAIN ((int)(sizeof k_chain / sizeof k_chain[0]))
#define WARMUP_ROUNDS 200

static rawcuda rc;
static void *fn_mul_add;
static CUstream raw_s, cw_h;
static cw_stream *s;
static unsigned long long dp;
static int chain_n;
static void *raw_exec;
static cw_graph_exec *cw_exec;

static void launch_chain(CUstream h, int n) {
    for (int v = 0; v < n; v++) {
        int arg = v & 7;
        void *args[] = {&dp, &arg};
        CU_CHECK(rc.cuLaunchKernel(fn_mul_add, 1, 1, 1, 1, 1, 1, 0, h, args, NULL));
    }
}

static double iter(int m) {
    unsigned long long t0 = now_ns();
    switch (m) {
    case M_RAW_DIRECT:
        launch_chain(raw_s, chain_n);
        CU_CHECK(rc.cuStreamSynchronize(raw_s));
        break;
    case M_RAW_GRAPH:
        CU_CHECK(rc.cuGraphLaunch(raw_exec, raw_s));
        CU_CHECK(rc.cuStreamSynchronize(raw_s));
        break;
    case M_CW_DIRECT:
        launch_chain(cw_h, chain_n);
        CW_CHECK(cw_stream_synchronize(s));
        break;
    default:
        CW_CHECK(cw_graph_exec_launch(cw_exec, s));
        CW_CHECK(cw_stream_synchronize(s));
        break;
    }
    return (double)(now_ns() - t0) / 1000.0;
}

int main(void) {
    const char *env = getenv("BENCH_ROUNDS");
    const int rounds = env && atoi(env) > 0 ? atoi(env) : 2000;
    printf("bench_graph: a chain of N dependent one-thread kernels (cw_mul_add), launched directly vs\n"
           "  replayed as a graph, per iteration including the synchronisation (microseconds)\n"
           "  a) raw direct: N x cuLaunchKernel + cuStreamSynchronize\n"
           "  b) raw graph:  cuGraphLaunch + cuStreamSynchronize\n"
           "  c) cw direct:  N x cuLaunchKernel on a cw_stream + cw_stream_synchronize\n"
           "  d) cw graph:   cw_graph_exec_launch + cw_stream_synchronize\n"
           "  method: per N, %d warm-up + %d measured rounds, one iteration of each method per round\n"
           "          in a random order (fixed seed); graphs captured, instantiated and uploaded first\n",
           WARMUP_ROUNDS, rounds);
    fflush(stdout);
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;
    cw_context *ctx = NULL;
    CUcontext cuctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cuctx = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cuctx));
    printf("device 0: %s, driver %d.%d, commit %s, %s\n", info.name, drv / 1000, drv % 1000 / 10, commit, date);
    void *module = NULL;
    CU_CHECK(rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_mul_add", &fn_mul_add));
    CU_CHECK(rc.cuMemAlloc(&dp, 64));
    CU_CHECK(rc.cuStreamCreateWithPriority(&raw_s, 1 /* CU_STREAM_NON_BLOCKING */, 0));
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    cw_h = bench_cu_stream(s);

    double *t[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) t[m] = malloc(sizeof(double) * (size_t)rounds);
    stats res[NCHAIN][M_COUNT];
    for (int ci = 0; ci < NCHAIN; ci++) {
        chain_n = k_chain[ci];
        /* raw capture */
        void *raw_graph = NULL;
        CU_CHECK(rc.cuStreamBeginCapture(raw_s, 0 /* GLOBAL */));
        launch_chain(raw_s, chain_n);
        CU_CHECK(rc.cuStreamEndCapture(raw_s, &raw_graph));
        CU_CHECK(rc.cuGraphInstantiateWithFlags(&raw_exec, raw_graph, 0));
        CU_CHECK(rc.cuGraphUpload(raw_exec, raw_s));
        /* cuweave capture */
        cw_graph *g = NULL;
        CW_CHECK(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
        launch_chain(cw_h, chain_n);
        CW_CHECK(cw_capture_end(&g, s));
        CW_CHECK(cw_graph_instantiate(&cw_exec, g, 0));
        CW_CHECK(cw_graph_exec_upload(cw_exec, s));
        CU_CHECK(rc.cuCtxSynchronize());
        int order[M_COUNT];
        for (int m = 0; m < M_COUNT; m++) order[m] = m;
        for (int r = 0; r < WARMUP_ROUNDS + rounds; r++) {
            shuffle(order, M_COUNT);
            for (int k = 0; k < M_COUNT; k++) {
                double us = iter(order[k]);
                if (r >= WARMUP_ROUNDS) t[order[k]][r - WARMUP_ROUNDS] = us;
            }
        }
        for (int m = 0; m < M_COUNT; m++) res[ci][m] = stats_of(t[m], (size_t)rounds);
        CU_CHECK(rc.cuGraphExecDestroy(raw_exec));
        CU_CHECK(rc.cuGraphDestroy(raw_graph));
        cw_graph_exec_destroy(&cw_exec);
        cw_graph_destroy(&g);
    }

    printf("\n%5s  %-11s %8s %8s %8s %8s\n", "N", "method", "p50", "p90", "p99", "max");
    for (int ci = 0; ci < NCHAIN; ci++)
        for (int m = 0; m < M_COUNT; m++)
            printf("%5d  %-11s %8.2f %8.2f %8.2f %8.2f\n", k_chain[ci], method_name[m], res[ci][m].p50,
                   res[ci][m].p90, res[ci][m].p99, res[ci][m].max);
    int cross_cw = -1, cross_raw = -1;
    for (int ci = NCHAIN - 1; ci >= 0; ci--) {
        if (res[ci][M_CW_GRAPH].p50 < res[ci][M_CW_DIRECT].p50) cross_cw = k_chain[ci];
        else break;
    }
    for (int ci = NCHAIN - 1; ci >= 0; ci--) {
        if (res[ci][M_RAW_GRAPH].p50 < res[ci][M_RAW_DIRECT].p50) cross_raw = k_chain[ci];
        else break;
    }
    printf("\ncrossover (p50): replaying the graph is faster than launching directly from N = %d with cuweave, "
           "from N = %d with the raw driver (-1: not within the N measured)\n",
           cross_cw, cross_raw);
    int all_ok = 1;
    printf("\n%5s %18s %18s %18s %18s\n", "N", "cw/raw graph p50", "cw/raw graph p99", "cw/raw direct p50",
           "direct/graph p50");
    for (int ci = 0; ci < NCHAIN; ci++) {
        double rg = res[ci][M_CW_GRAPH].p50 / res[ci][M_RAW_GRAPH].p50;
        double rg99 = res[ci][M_CW_GRAPH].p99 / res[ci][M_RAW_GRAPH].p99;
        double rd = res[ci][M_CW_DIRECT].p50 / res[ci][M_RAW_DIRECT].p50;
        double sp = res[ci][M_CW_DIRECT].p50 / res[ci][M_CW_GRAPH].p50;
        all_ok &= rg <= 1.05;
        printf("%5d %17.3fx %17.3fx %17.3fx %17.2fx\n", k_chain[ci], rg, rg99, rd, sp);
    }
    printf("cuweave graph launch within 5%% of the raw driver at p50 for every N: %s\n", pass(all_ok));

    printf("\n--- Markdown for docs/benchmarks.md ---\n");
    printf("bench_graph, %s, %s, driver %d.%d, commit %s, %d rounds per N\n\n", date, info.name, drv / 1000,
           drv % 1000 / 10, commit, rounds);
    printf("| N | raw direct p50 / p99 | raw graph p50 / p99 | cw direct p50 / p99 | cw graph p50 / p99 | "
           "cw graph / raw graph p50 | direct / graph p50 (cw) |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int ci = 0; ci < NCHAIN; ci++) {
        stats *r = res[ci];
        printf("| %d | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.3fx | %.2fx |\n", k_chain[ci],
               r[M_RAW_DIRECT].p50, r[M_RAW_DIRECT].p99, r[M_RAW_GRAPH].p50, r[M_RAW_GRAPH].p99, r[M_CW_DIRECT].p50,
               r[M_CW_DIRECT].p99, r[M_CW_GRAPH].p50, r[M_CW_GRAPH].p99, r[M_CW_GRAPH].p50 / r[M_RAW_GRAPH].p50,
               r[M_CW_DIRECT].p50 / r[M_CW_GRAPH].p50);
    }
    printf("\nCrossover (p50): graph faster than direct from N = %d (cuweave), N = %d (raw driver).\n", cross_cw,
           cross_raw);

    for (int m = 0; m < M_COUNT; m++) free(t[m]);
    CU_CHECK(rc.cuStreamSynchronize(raw_s));
    CU_CHECK(rc.cuStreamDestroy(raw_s));
    CU_CHECK(rc.cuMemFree(dp));
    CU_CHECK(rc.cuModuleUnload(module));
    cw_stream_destroy(&s);
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    return 0;
}
