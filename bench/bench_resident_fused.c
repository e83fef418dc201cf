/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_resident_fused: the host round trip of the resident loop's fused
 * persistent mode (cw_resident_set_fused) against a hand-written
 * persistent kernel of the same shape on the raw driver API and against
 * cuGraphLaunch + cuStreamSynchronize, in one run on device 0, for a
 * 1-block grid and a grid of one block per SM.
 *
 * The work: three trivial stages; in each, thread 0 of every block adds 1
 * to the stage's counter (atomicAdd on device memory), so each request
 * adds `grid` to each of the three counters: checked after every method
 * (a wrong count fails the run).
 *
 *   a) fused loop: cw_resident_set_fused with the three stages (a grid
 *      barrier after each), spin (sleep_interval_us 0), sync_with_host 1;
 *      per round trip cw_resident_data_ready + spin on
 *      cw_resident_poll_result.
 *   b) hand-written persistent kernel: the same loop written by hand
 *      (compiled with NVRTC here, loaded and launched cooperatively with the
 *      raw driver): block 0 spins on a doorbell in mapped host memory,
 *      a grid barrier, the three stages with a barrier after each, a
 *      system fence, the done word; per round trip: release-store the
 *      doorbell, spin on done.
 *   c) cuGraphLaunch + cuStreamSynchronize of a graph of the three stages
 *      as three kernels of the same grid (captured with the raw driver).
 *
 * Back-to-back round trips (the next request right after the last result),
 * CLOCK_MONOTONIC, microseconds; BENCH_ITERS (default 20000) after 1000
 * warm-up ones. Prints a block for docs/benchmarks.md and docs/resident.md.
 */
#define _GNU_SOURCE

#define BENCH_NAME "bench_resident_fused"
#include "../tests/rawcuda.h"
#include "bench_common.h"

#define DEFAULT_ITERS 20000
#define WARMUP 1000
#define BLOCK 128

static rawcuda rc;

/* The stages, for the fused loop (resident_device.h's signature) and, as
 * plain functions, for the hand-written kernel and the graph's kernels. */
static const char kStages[] =
    "extern \"C\" __device__ void st0(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 0, 1u); }\n"
    "extern \"C\" __device__ void st1(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 1, 1u); }\n"
    "extern \"C\" __device__ void st2(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 2, 1u); }\n";
static const char *const kStageNames[] = {"st0", "st1", "st2"};

static const char kHand[] =
    "extern \"C\" {\n"
    "static __device__ __forceinline__ void bar(unsigned *s) {\n"
    "    __syncthreads();\n"
    "    if (gridDim.x == 1u) return;\n"
    "    if (threadIdx.x == 0u) {\n"
    "        volatile unsigned *gen = s + 1;\n"
    "        const unsigned g = *gen;\n"
    "        __threadfence();\n"
    "        if (atomicAdd(s, 1u) == gridDim.x - 1u) { atomicExch(s, 0u); __threadfence(); atomicExch(s + 1, g + 1u); }\n"
    "        else { while (*gen == g) { } }\n"
    "        __threadfence();\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    "__global__ void hand_loop(volatile unsigned long long *bell, volatile unsigned *stop,\n"
    "                          volatile unsigned long long *done, unsigned *s, unsigned *work) {\n"
    "    __shared__ unsigned cmd;\n"
    "    unsigned long long taken = 0;\n"
    "    for (;;) {\n"
    "        if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "            for (;;) {\n"
    "                if (*stop) { *(volatile unsigned *)(s + 2) = 2u; break; }\n"
    "                if (*bell > taken) { *(volatile unsigned *)(s + 2) = 1u; break; }\n"
    "            }\n"
    "        }\n"
    "        bar(s);\n"
    "        if (threadIdx.x == 0) cmd = *(volatile unsigned *)(s + 2);\n"
    "        __syncthreads();\n"
    "        if (cmd == 2u) return;\n"
    "        taken++;\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 0, 1u);\n"
    "        bar(s);\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 1, 1u);\n"
    "        bar(s);\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 2, 1u);\n"
    "        bar(s);\n"
    "        if (blockIdx.x == 0 && threadIdx.x == 0) { __threadfence_system(); *done = taken; }\n"
    "    }\n"
    "}\n"
    "__global__ void k0(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 0, 1u); }\n"
    "__global__ void k1(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 1, 1u); }\n"
    "__global__ void k2(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 2, 1u); }\n"
    "}\n";

typedef struct result {
    stats st;
    double mean;
} result;

typedef unsigned long long dptr;

static unsigned long long g_checked, g_wrong;

static void check_counts(dptr work, unsigned long long want, const char *what) {
    unsigned got[3] = {0, 0, 0};
    CU_CHECK(rc.cuMemcpyDtoH(got, work, sizeof got));
    for (int i = 0; i < 3; i++) {
        g_checked++;
        if (got[i] != (unsigned)want) {
            g_wrong++;
            fprintf(stderr, "%s: %s: stage %d counted %u, want %llu\n", BENCH_NAME, what, i, got[i], want);
        }
    }
    CU_CHECK(rc.cuMemsetD32(work, 0, 4));
}

static result summarize(double *v, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    result r;
    r.mean = sum / (double)n;
    r.st = stats_of(v, n);
    return r;
}

static void stop_warn(const char *s) { fprintf(stderr, "%s\n", s); }

int main(void) {
    const char *env = getenv("BENCH_ITERS");
    size_t iters = env && atol(env) > 0 ? (size_t)atol(env) : DEFAULT_ITERS;
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int s0 = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (s0) return s0;
    if (!rc.cuLaunchCooperativeKernel) {
        printf("SKIP: the driver has no cuLaunchCooperativeKernel\n");
        return 77;
    }
    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    CUcontext cu = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cu));

    /* b) and c): compiled with NVRTC (through cuweave's cache), loaded raw */
    cw_program *prog = NULL;
    CW_CHECK(cw_program_compile(&prog, ctx, kHand, NULL));
    cw_program_info pi;
    CW_CHECK(cw_program_get_info(prog, &pi));
    void *mod = NULL, *f_hand = NULL, *f_k[3] = {NULL, NULL, NULL};
    CU_CHECK(rc.cuModuleLoadData(&mod, pi.code));
    CU_CHECK(rc.cuModuleGetFunction(&f_hand, mod, "hand_loop"));
    CU_CHECK(rc.cuModuleGetFunction(&f_k[0], mod, "k0"));
    CU_CHECK(rc.cuModuleGetFunction(&f_k[1], mod, "k1"));
    CU_CHECK(rc.cuModuleGetFunction(&f_k[2], mod, "k2"));
    cw_program_destroy(&prog);

    dptr work = 0, sync = 0;
    CU_CHECK(rc.cuMemAlloc(&work, 64));
    CU_CHECK(rc.cuMemsetD32(work, 0, 16));
    CU_CHECK(rc.cuMemAlloc(&sync, 64));
    void *hb = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&hb, 4096, 0x1 | 0x2));
    memset(hb, 0, 4096);
    dptr hd = 0;
    CU_CHECK(rc.cuMemHostGetDevicePointer(&hd, hb, 0));
    volatile unsigned long long *bell = (volatile unsigned long long *)hb;
    volatile unsigned *stopw = (volatile unsigned *)((char *)hb + 64);
    volatile unsigned long long *done = (volatile unsigned long long *)((char *)hb + 128);
    dptr d_bell = hd, d_stop = hd + 64, d_done = hd + 128;
    CUstream hs = NULL;
    CU_CHECK(rc.cuStreamCreateWithPriority(&hs, 1, 0));

    const unsigned grids[2] = {1, (unsigned)info.sm_count};
    result res[2][3];
    unsigned fused_grid[2] = {0, 0};
    unsigned long long gpu_median[2] = {0, 0};
    double *v = (double *)malloc(sizeof(double) * iters);
    if (!v) return 1;

    /* the fused loops and the graphs first: nothing may load code while a loop runs */
    cw_resident *loops[2] = {NULL, NULL};
    void *gexec[2] = {NULL, NULL};
    for (int g = 0; g < 2; g++) {
        cw_resident_settings s;
        cw_resident_settings_default(&s);
        s.sleep_interval_us = 0;
        s.sync_with_host = 1;
        CW_CHECK(cw_resident_create(&loops[g], ctx, &s));
        cw_resident_fused f;
        memset(&f, 0, sizeof f);
        f.source = kStages;
        f.stages = kStageNames;
        f.stage_count = 3;
        f.grid_blocks = grids[g];
        f.block_threads = BLOCK;
        f.user = work;
        CW_CHECK(cw_resident_set_fused(loops[g], &f));
        CW_CHECK(cw_resident_build(loops[g]));
        cw_resident_info ri;
        CW_CHECK(cw_resident_get_info(loops[g], &ri));
        fused_grid[g] = ri.grid_blocks;
        void *graph = NULL;
        CU_CHECK(rc.cuStreamBeginCapture(hs, 2 /* relaxed */));
        for (int k = 0; k < 3; k++) {
            void *args[] = {&work};
            CU_CHECK(rc.cuLaunchKernel(f_k[k], grids[g], 1, 1, BLOCK, 1, 1, 0, hs, args, NULL));
        }
        CU_CHECK(rc.cuStreamEndCapture(hs, &graph));
        CU_CHECK(rc.cuGraphInstantiateWithFlags(&gexec[g], graph, 0));
        CU_CHECK(rc.cuGraphUpload(gexec[g], hs));
        CU_CHECK(rc.cuStreamSynchronize(hs));
        CU_CHECK(rc.cuGraphDestroy(graph));
    }
    CU_CHECK(rc.cuMemsetD32(work, 0, 16));

    for (int g = 0; g < 2; g++) {
        const unsigned grid = grids[g];
        /* a) fused loop */
        CW_CHECK(cw_resident_launch(loops[g]));
        for (size_t i = 0; i < WARMUP + iters; i++) {
            const unsigned long long t0 = now_ns();
            uint64_t seq = 0;
            CW_CHECK(cw_resident_data_ready(loops[g], &seq));
            cw_status st;
            while ((st = cw_resident_poll_result(loops[g], seq)) == CW_ERROR_NOT_READY) {
            }
            CW_CHECK(st);
            if (i >= WARMUP) v[i - WARMUP] = (now_ns() - t0) / 1e3;
        }
        cw_resident_info ri;
        CW_CHECK(cw_resident_get_info(loops[g], &ri));
        gpu_median[g] = ri.iter_median_ns;
        CW_CHECK(cw_resident_tear_down(loops[g], 5000));
        res[g][0] = summarize(v, iters);
        check_counts(work, (unsigned long long)(WARMUP + iters) * grid, "a) fused loop");

        /* b) hand-written persistent kernel */
        *bell = 0;
        *stopw = 0;
        *done = 0;
        CU_CHECK(rc.cuMemsetD32(sync, 0, 16));
        void *hargs[] = {&d_bell, &d_stop, &d_done, &sync, &work};
        CU_CHECK(rc.cuLaunchCooperativeKernel(f_hand, grid, 1, 1, BLOCK, 1, 1, 0, hs, hargs));
        for (size_t i = 0; i < WARMUP + iters; i++) {
            const unsigned long long t0 = now_ns();
            const unsigned long long n = i + 1;
            __atomic_store_n((unsigned long long *)bell, n, __ATOMIC_RELEASE);
            while (__atomic_load_n((unsigned long long *)done, __ATOMIC_ACQUIRE) < n) {
            }
            if (i >= WARMUP) v[i - WARMUP] = (now_ns() - t0) / 1e3;
        }
        __atomic_store_n((unsigned *)stopw, 1u, __ATOMIC_RELEASE);
        if (rc.cuStreamSynchronize(hs) != 0) stop_warn("b) the hand-written kernel's stream reported an error");
        res[g][1] = summarize(v, iters);
        check_counts(work, (unsigned long long)(WARMUP + iters) * grid, "b) hand-written kernel");

        /* c) cuGraphLaunch + sync */
        for (size_t i = 0; i < WARMUP + iters; i++) {
            const unsigned long long t0 = now_ns();
            CU_CHECK(rc.cuGraphLaunch(gexec[g], hs));
            CU_CHECK(rc.cuStreamSynchronize(hs));
            if (i >= WARMUP) v[i - WARMUP] = (now_ns() - t0) / 1e3;
        }
        res[g][2] = summarize(v, iters);
        check_counts(work, (unsigned long long)(WARMUP + iters) * grid, "c) graph launch");
    }

    static const char *const names[3] = {"a) cw fused loop", "b) hand-written persistent kernel",
                                          "c) cuGraphLaunch + sync"};
    printf("bench_resident_fused: host round trip of 3 trivial stages, %zu round trips after %d warm-up, us\n", iters,
           WARMUP);
    for (int g = 0; g < 2; g++) {
        printf("grid %u x %d threads (fused loop: %u blocks):\n", grids[g], BLOCK, fused_grid[g]);
        printf("  %-36s %8s %8s %8s %8s %8s %8s\n", "method", "p50", "p90", "p99", "p99.9", "max", "mean");
        for (int m = 0; m < 3; m++)
            printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", names[m], res[g][m].st.p50, res[g][m].st.p90,
                   res[g][m].st.p99, res[g][m].st.p999, res[g][m].st.max, res[g][m].mean);
        printf("  fused / hand-written: p50 %.2fx, p99 %.2fx; graph / fused: p50 %.2fx, p99 %.2fx; "
               "GPU median per request (fused, cw_resident_get_info) %.2f us\n",
               res[g][0].st.p50 / res[g][1].st.p50, res[g][0].st.p99 / res[g][1].st.p99,
               res[g][2].st.p50 / res[g][0].st.p50, res[g][2].st.p99 / res[g][0].st.p99, gpu_median[g] / 1e3);
    }
    printf("checked %llu counters, %llu wrong: %s\n", g_checked, g_wrong, pass(g_wrong == 0));

    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Fused persistent mode: host round trip of three stages (bench_resident_fused)\n\n");
    printf("%s, %s (%d SMs), driver %d.%d, commit %s. Three trivial stages (thread 0 of every block adds 1 to the\n"
           "stage's counter; the counts are checked: %llu checked, %llu wrong), %d threads a block; back-to-back\n"
           "round trips (the next request right after the last result), %zu after %d warm-up, microseconds. a)\n"
           "`cw_resident_set_fused`, spin, `sync_with_host` 1; b) the same loop written by hand (NVRTC, raw\n"
           "cooperative launch, doorbell and done word in mapped host memory); c) `cuGraphLaunch` +\n"
           "`cuStreamSynchronize` of the three stages as three kernels.\n\n",
           date, info.name, info.sm_count, drv / 1000, drv % 1000 / 10, commit, g_checked, g_wrong, BLOCK, iters,
           WARMUP);
    printf("| grid | method | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
    for (int g = 0; g < 2; g++)
        for (int m = 0; m < 3; m++)
            printf("| %u | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", grids[g], names[m], res[g][m].st.p50,
                   res[g][m].st.p90, res[g][m].st.p99, res[g][m].st.p999, res[g][m].st.max);
    printf("\nRatios (p50 / p99): ");
    for (int g = 0; g < 2; g++)
        printf("%sgrid %u: fused / hand-written %.2fx / %.2fx, graph / fused %.2fx / %.2fx", g ? "; " : "", grids[g],
               res[g][0].st.p50 / res[g][1].st.p50, res[g][0].st.p99 / res[g][1].st.p99,
               res[g][2].st.p50 / res[g][0].st.p50, res[g][2].st.p99 / res[g][0].st.p99);
    printf(".\n---- end ----\n");

    for (int g = 0; g < 2; g++) {
        cw_resident_destroy(&loops[g]);
        rc.cuGraphExecDestroy(gexec[g]);
    }
    rc.cuStreamDestroy(hs);
    rc.cuMemFreeHost(hb);
    rc.cuMemFree(work);
    rc.cuMemFree(sync);
    rc.cuModuleUnload(mod);
    free(v);
    cw_context_destroy(&ctx);
    return g_wrong ? 1 : 0;
}
