/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_green: does an SM partition (green context) keep a latency-critical
 * kernel fast while the rest of the GPU is full, and what does the rest of
 * the GPU lose? Device 0, one run.
 *
 * The small kernel: cw_small (1 block, 1 thread, tests/kernels), launched and
 * waited for with cuStreamSynchronize on its stream, over and over; each
 * launch + sync round trip is timed with CLOCK_MONOTONIC, in microseconds.
 *
 * The hog: cw_hog, blocks of 128 threads that each wait HOG_MS on the GPU
 * clock, as many blocks as the hog's context holds at once (the driver's
 * occupancy for the kernel times the context's SMs: one launch is exactly
 * one full wave, so no SM has a free thread slot while a wave runs). A host
 * thread relaunches it on its own stream without pause, keeping HOG_DEPTH
 * launches queued (events with blocking sync pace it), so the hog's context
 * is never free. Its throughput is hog blocks completed per second (a wave
 * of the whole GPU and a wave of the leftover partition differ in blocks,
 * not in time).
 *
 *   h0) hog alone on the primary context (the whole GPU): reference throughput
 *   h1) hog alone on the leftover partition (the GPU less 16 SMs)
 *   a)  idle GPU, small kernel on the primary context
 *   a2) idle GPU, small kernel on its 16-SM partition (not judged: a
 *       partition's own launch cost)
 *   b)  hog and small kernel both on the primary context, default priority
 *   c)  as b), the small kernel on a stream of the greatest priority
 *   d)  small kernel on its own 16-SM partition, hog on the leftover
 *       partition: cw_partition_group_create(&set, 0, {16}, 1, -1)
 *
 * Each scenario runs at least N_FAST (a, a2, d) or N_SLOW (b, c) round
 * trips and at least IDLE_MIN_S / HOGGED_MIN_S seconds, at most CAP_S.
 *
 * Targets: d) p99 within 1.5x of a) p99 (PASS/MISS). Reported, no target:
 * b) p99 / a) p99 and c) p99 / a) p99 (priority does not preempt a running
 * wave), and the hog's loss in d) against h0) (16 SMs taken away).
 *
 * Between scenarios the hog thread is stopped and joined and every stream
 * drained. The test kernels are loaded once per context (primary, the
 * partition, the leftover) with that context current; a green context is
 * current on one thread at a time: the hog thread alone uses the leftover's,
 * the main thread alone the small partition's.
 *
 * Prints what it measures first and a Markdown block for docs/benchmarks.md
 * last. Exits 77 without a GPU or when green contexts are unsupported, 1
 * when a call fails, 0 otherwise (a MISS is a result, not a failure). Takes
 * about 10 s. Set CW_COMMIT to name the commit in the output.
 *
 * Build (after `make -j2 O=build/make lib`):
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests bench/bench_green.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o bench_green
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_green"
#include "bench_common.h"

#define SMALL_SMS 16          /* the small kernel's partition */
#define HOG_MS 2              /* each hog block waits this long */
#define HOG_THREADS 128       /* threads per hog block */
#define HOG_DEPTH 3           /* hog launches queued at most */
#define HOG_ALONE_S 1.0       /* h0, h1: seconds of hog alone */
#define IDLE_MIN_S 0.5        /* a, a2: at least this long (a p99 of many samples) */
#define HOGGED_MIN_S 1.0      /* b, c, d: at least this long (hog throughput) */
#define CAP_S 3.0             /* every scenario: at most this long */
#define N_FAST 300            /* round trips in a, a2, d (at least) */
#define N_SLOW 30             /* round trips in b, c (at least) */
#define WARMUP 20             /* round trips before each scenario's samples */
#define MAX_SAMPLES 400000
#define TARGET_D_OVER_A 1.5   /* d) p99 / a) p99 */

typedef unsigned long long dptr;

static rawcuda rc;

/* ---- the kernels, per context ---------------------------------------------- */

typedef struct kctx {
    const char *name;
    cw_context *ctx; /* borrowed for partitions */
    CUcontext cu;
    void *module, *f_small, *f_hog;
    dptr counter;         /* cw_small's int */
    dptr sink;            /* cw_hog's counter */
    unsigned sms;         /* SMs of the context */
    unsigned hog_blocks;  /* one full wave of the hog in this context */
    long small_launched;  /* cw_small launches, checked against counter */
    unsigned long long hog_launched;
} kctx;

static void kctx_load(kctx *k, const char *name, cw_context *ctx, unsigned sms, int hog_per_sm) {
    memset(k, 0, sizeof *k);
    k->name = name;
    k->ctx = ctx;
    k->sms = sms;
    k->hog_blocks = (unsigned)hog_per_sm * sms;
    k->cu = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_small", &k->f_small));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_hog", &k->f_hog));
    CU_CHECK(rc.cuMemAlloc(&k->counter, 64));
    CU_CHECK(rc.cuMemAlloc(&k->sink, 64));
    CU_CHECK(rc.cuMemsetD32(k->counter, 0, 16));
    CU_CHECK(rc.cuMemsetD32(k->sink, 0, 16));
    CU_CHECK(rc.cuCtxSynchronize());
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
}

/* Checks that every launch ran, then frees and unloads (before the set goes). */
static void kctx_unload(kctx *k) {
    int small = 0;
    unsigned long long hog = 0;
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    CU_CHECK(rc.cuCtxSynchronize());
    CU_CHECK(rc.cuMemcpyDtoH(&small, k->counter, sizeof small));
    CU_CHECK(rc.cuMemcpyDtoH(&hog, k->sink, sizeof hog));
    if ((long)small != k->small_launched || hog != k->hog_launched) {
        fprintf(stderr, "%s: %s: %d of %ld small kernels and %llu of %llu hog launches counted on the GPU\n",
                BENCH_NAME, k->name, small, k->small_launched, hog, k->hog_launched);
        exit(1);
    }
    CU_CHECK(rc.cuMemFree(k->counter));
    CU_CHECK(rc.cuMemFree(k->sink));
    CU_CHECK(rc.cuModuleUnload(k->module));
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
}

/* ---- the hog thread --------------------------------------------------------- */

typedef struct hog {
    kctx *k;
    CUstream h;
    pthread_t thread;
    atomic_int stop;
    atomic_ullong launched;
    unsigned long long t0, t1; /* first launch, all launches done */
    int err;                   /* CUresult of a failing call, or 0 */
    const char *err_call;
} hog;

#define HOG_CU_(call)                      \
    do {                                   \
        rc_result r_ = (call);             \
        if (r_ != 0 && !g->err) {          \
            g->err = r_;                   \
            g->err_call = #call;           \
        }                                  \
    } while (0)

static void *hog_main(void *arg) {
    hog *g = arg;
    long long ns = HOG_MS * 1000000LL;
    void *args[] = {&g->k->sink, &ns};
    CUevent ev[HOG_DEPTH] = {0};
    HOG_CU_(rc.cuCtxSetCurrent(g->k->cu));
    for (int i = 0; i < HOG_DEPTH && !g->err; i++)
        HOG_CU_(rc.cuEventCreate(&ev[i], 0x1 | 0x2 /* CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING */));
    g->t0 = now_ns();
    for (unsigned long long i = 0; !g->err && !atomic_load_explicit(&g->stop, memory_order_acquire); i++) {
        if (i >= HOG_DEPTH) HOG_CU_(rc.cuEventSynchronize(ev[i % HOG_DEPTH]));
        HOG_CU_(rc.cuLaunchKernel(g->k->f_hog, g->k->hog_blocks, 1, 1, HOG_THREADS, 1, 1, 0, g->h, args, NULL));
        HOG_CU_(rc.cuEventRecord(ev[i % HOG_DEPTH], g->h));
        if (!g->err) atomic_fetch_add_explicit(&g->launched, 1, memory_order_release);
    }
    HOG_CU_(rc.cuStreamSynchronize(g->h));
    g->t1 = now_ns();
    for (int i = 0; i < HOG_DEPTH; i++)
        if (ev[i]) HOG_CU_(rc.cuEventDestroy(ev[i]));
    HOG_CU_(rc.cuCtxSetCurrent(NULL));
    return NULL;
}

static void hog_start(hog *g, kctx *k, cw_stream *s) {
    memset(g, 0, sizeof *g);
    g->k = k;
    g->h = bench_cu_stream(s);
    atomic_init(&g->stop, 0);
    atomic_init(&g->launched, 0);
    if (pthread_create(&g->thread, NULL, hog_main, g) != 0) {
        fprintf(stderr, "%s: pthread_create failed\n", BENCH_NAME);
        exit(1);
    }
    /* the GPU is full once the first wave is queued and a second behind it */
    const unsigned long long t = now_ns();
    while (atomic_load_explicit(&g->launched, memory_order_acquire) < 2 && !g->err) {
        if (now_ns() - t > 5000000000ull) {
            fprintf(stderr, "%s: the hog thread did not launch within 5 s\n", BENCH_NAME);
            exit(1);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* Stops and joins the hog thread (its stream drained); returns hog blocks
 * completed per second. */
static double hog_stop(hog *g) {
    atomic_store_explicit(&g->stop, 1, memory_order_release);
    pthread_join(g->thread, NULL);
    if (g->err) {
        fprintf(stderr, "%s: hog thread: %s failed with CUresult %d\n", BENCH_NAME, g->err_call, g->err);
        exit(1);
    }
    const unsigned long long n = atomic_load(&g->launched);
    g->k->hog_launched += n;
    return (double)n * g->k->hog_blocks / ((double)(g->t1 - g->t0) / 1e9);
}

static double hog_waves_per_s(const hog *g) {
    return (double)atomic_load(&g->launched) / ((double)(g->t1 - g->t0) / 1e9);
}

/* ---- the small kernel's round trips ------------------------------------------ */

typedef struct result {
    const char *name;
    size_t n;
    double seconds;
    stats st;
    double hog_blocks_per_s, hog_waves_per_s; /* 0 without a hog */
} result;

static double *samples;

/* Launch + sync round trips on s (of k's context) until at least `target`
 * samples and min_s seconds, at most CAP_S seconds. */
static void small_run(result *out, const char *name, kctx *k, cw_stream *s, size_t target, double min_s) {
    CUstream h = NULL;
    h = bench_cu_stream(s);
    void *args[] = {&k->counter};
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    for (int i = 0; i < WARMUP; i++) {
        CU_CHECK(rawcuda_launch1(&rc, k->f_small, h, args));
        CU_CHECK(rc.cuStreamSynchronize(h));
        k->small_launched++;
    }
    size_t n = 0;
    const unsigned long long start = now_ns();
    double el = 0;
    for (;;) {
        const unsigned long long t0 = now_ns();
        CU_CHECK(rawcuda_launch1(&rc, k->f_small, h, args));
        CU_CHECK(rc.cuStreamSynchronize(h));
        const unsigned long long t1 = now_ns();
        k->small_launched++;
        samples[n++] = (double)(t1 - t0) / 1000.0;
        el = (double)(t1 - start) / 1e9;
        if ((n >= target && el >= min_s) || el >= CAP_S || n == MAX_SAMPLES) break;
    }
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    memset(out, 0, sizeof *out);
    out->name = name;
    out->n = n;
    out->seconds = el;
    out->st = stats_of(samples, n);
}

static void print_result(const result *r) {
    printf("  %-58s n %6zu  p50 %9.1f  p99 %9.1f  max %9.1f", r->name, r->n, r->st.p50, r->st.p99, r->st.max);
    if (r->hog_blocks_per_s > 0) printf("  hog %.0f blocks/s", r->hog_blocks_per_s);
    printf("\n");
    fflush(stdout);
}

/* Blocks of fn that fit on one SM at HOG_THREADS threads (the driver's
 * occupancy; 2048 / HOG_THREADS when the driver has no occupancy call). */
static int hog_blocks_per_sm(void *fn) {
    rc_result (*occ)(int *, void *, int, size_t) = NULL;
    *(void **)&occ = dlsym(rc.lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    int n = 0;
    if (occ && occ(&n, fn, HOG_THREADS, 0) == 0 && n > 0) return n;
    return 2048 / HOG_THREADS;
}

int main(void) {
    printf("bench_green: a small kernel's launch + cuStreamSynchronize round trip while a hog fills the GPU\n"
           "  hog: cw_hog, %d-thread blocks waiting %d ms each, one full wave of its context per launch,\n"
           "       relaunched without pause by a host thread (%d queued at most)\n"
           "  h0) hog alone, primary context        h1) hog alone, leftover partition (GPU less %d SMs)\n"
           "  a)  idle, primary context             a2) idle, small kernel on its %d-SM partition\n"
           "  b)  hog + small on the primary context, default priority\n"
           "  c)  hog + small on the primary context, small on the greatest-priority stream\n"
           "  d)  small on its own %d-SM partition, hog on the leftover partition\n"
           "  method: %d warm-up round trips, then at least %d (a, a2, d) or %d (b, c) round trips and %.1f s\n"
           "          idle or %.1f s with a hog, at most %.0f s per scenario; CLOCK_MONOTONIC from before\n"
           "          the launch to the sync's return\n",
           HOG_THREADS, HOG_MS, HOG_DEPTH, SMALL_SMS, SMALL_SMS, SMALL_SMS, WARMUP, N_FAST, N_SLOW, IDLE_MIN_S,
           HOGGED_MIN_S, CAP_S);
    fflush(stdout);

    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;

    cw_partition_caps caps;
    CW_CHECK(cw_partition_get_caps(0, &caps));
    if (!caps.supported) {
        printf("SKIP: device 0 (%s) or its driver has no green contexts\n", info.name);
        return 77;
    }
    samples = malloc(sizeof(double) * MAX_SAMPLES);
    if (!samples) {
        fprintf(stderr, "%s: out of memory\n", BENCH_NAME);
        return 1;
    }

    /* contexts: the primary, then a {16} partition set (primary made first,
     * green contexts retain it) */
    cw_context *primary = NULL;
    CW_CHECK(cw_context_create(&primary, 0));
    cw_context_info primary_info;
    CW_CHECK(cw_context_get_info(primary, &primary_info));
    const int least = primary_info.least_priority, greatest = primary_info.greatest_priority;
    const unsigned small_sizes[] = {SMALL_SMS};
    cw_partition_group *set = NULL;
    unsigned long long tc = now_ns();
    CW_CHECK(cw_partition_group_create(&set, 0, small_sizes, 1, -1));
    const double set_ms = (double)(now_ns() - tc) / 1e6;
    cw_context *part = NULL, *left = NULL;
    cw_partition_group_info ginfo;
    cw_partition_info part_info;
    CW_CHECK(cw_partition_group_get_info(set, &ginfo));
    CW_CHECK(cw_partition_group_get_partition(set, 0, &part_info));
    part = part_info.context;
    CW_CHECK(cw_partition_group_get_partition(set, ginfo.default_index, &part_info));
    left = part_info.context;
    cw_partition_info pinfo, linfo;
    CW_CHECK(cw_partition_group_get_partition(set, 0, &pinfo));
    CW_CHECK(cw_partition_group_get_partition(set, 1, &linfo));

    kctx kp, kg, kl;
    kctx_load(&kp, "primary", primary, (unsigned)info.sm_count, 1);
    CU_CHECK(rc.cuCtxSetCurrent(kp.cu));
    const int per_sm = hog_blocks_per_sm(kp.f_hog);
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    kp.hog_blocks = (unsigned)per_sm * kp.sms;
    kctx_load(&kg, "small partition", part, pinfo.sm_count, per_sm);
    kctx_load(&kl, "leftover partition", left, linfo.sm_count, per_sm);

    unsigned v = cw_version();
    printf("device 0: %s, %d SMs, driver %d.%d, cuweave %u.%u.%u, commit %s, %s\n", info.name, info.sm_count,
           drv / 1000, drv % 1000 / 10, CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v),
           CW_VERSION_PACK_PATCH(v), commit, date);
    printf("green: min partition %u, granularity %u; set {%d} made in %.2f ms: partition %u SMs, leftover %u SMs\n",
           caps.min_partition, caps.granularity, SMALL_SMS, set_ms, pinfo.sm_count, linfo.sm_count);
    printf("hog: %d blocks of %d threads per SM; a wave is %u blocks on the primary context, %u on the leftover\n",
           per_sm, HOG_THREADS, kp.hog_blocks, kl.hog_blocks);
    printf("stream priorities: least %d, greatest %d\n", least, greatest);
    fflush(stdout);

    cw_stream *s_small_p = NULL, *s_small_hi = NULL, *s_hog_p = NULL, *s_small_g = NULL, *s_hog_l = NULL;
    cw_stream_settings hi;
    cw_stream_settings_default(&hi);
    hi.priority = greatest;
    CW_CHECK(cw_stream_create(&s_small_p, primary, NULL));
    CW_CHECK(cw_stream_create(&s_small_hi, primary, &hi));
    CW_CHECK(cw_stream_create(&s_hog_p, primary, NULL));
    CW_CHECK(cw_stream_create(&s_small_g, part, NULL));
    CW_CHECK(cw_stream_create(&s_hog_l, left, NULL));
    cw_stream_info si;
    CW_CHECK(cw_stream_get_info(s_small_hi, &si));
    if (si.priority != greatest) {
        fprintf(stderr, "%s: the high-priority stream has priority %d, not %d\n", BENCH_NAME, si.priority, greatest);
        return 1;
    }

    hog g;
    result h0, h1, ra, ra2, rb, rc_, rd;
    memset(&h0, 0, sizeof h0);
    memset(&h1, 0, sizeof h1);

    printf("results (microseconds):\n");
    /* h0, h1: the hog alone */
    struct timespec alone = {(time_t)HOG_ALONE_S, (long)((HOG_ALONE_S - (double)(time_t)HOG_ALONE_S) * 1e9)};
    hog_start(&g, &kp, s_hog_p);
    nanosleep(&alone, NULL);
    h0.hog_blocks_per_s = hog_stop(&g);
    h0.hog_waves_per_s = hog_waves_per_s(&g);
    printf("  h0) hog alone, primary context: %.0f blocks/s (%.1f waves/s)\n", h0.hog_blocks_per_s,
           h0.hog_waves_per_s);
    hog_start(&g, &kl, s_hog_l);
    nanosleep(&alone, NULL);
    h1.hog_blocks_per_s = hog_stop(&g);
    h1.hog_waves_per_s = hog_waves_per_s(&g);
    printf("  h1) hog alone, leftover partition: %.0f blocks/s (%.1f waves/s)\n", h1.hog_blocks_per_s,
           h1.hog_waves_per_s);
    fflush(stdout);

    /* a, a2: idle */
    small_run(&ra, "a) idle, primary context", &kp, s_small_p, N_FAST, IDLE_MIN_S);
    print_result(&ra);
    small_run(&ra2, "a2) idle, 16-SM partition", &kg, s_small_g, N_FAST, IDLE_MIN_S);
    print_result(&ra2);

    /* b: both on the primary context, default priority */
    hog_start(&g, &kp, s_hog_p);
    small_run(&rb, "b) hog + small, primary, default priority", &kp, s_small_p, N_SLOW, HOGGED_MIN_S);
    rb.hog_blocks_per_s = hog_stop(&g);
    rb.hog_waves_per_s = hog_waves_per_s(&g);
    CW_CHECK(cw_stream_synchronize(s_small_p));
    print_result(&rb);

    /* c: the small kernel on the greatest-priority stream */
    hog_start(&g, &kp, s_hog_p);
    small_run(&rc_, "c) hog + small, primary, small at greatest priority", &kp, s_small_hi, N_SLOW, HOGGED_MIN_S);
    rc_.hog_blocks_per_s = hog_stop(&g);
    rc_.hog_waves_per_s = hog_waves_per_s(&g);
    CW_CHECK(cw_stream_synchronize(s_small_hi));
    print_result(&rc_);

    /* d: small on its partition, hog on the leftover */
    hog_start(&g, &kl, s_hog_l);
    small_run(&rd, "d) small on 16-SM partition, hog on leftover", &kg, s_small_g, N_FAST, HOGGED_MIN_S);
    rd.hog_blocks_per_s = hog_stop(&g);
    rd.hog_waves_per_s = hog_waves_per_s(&g);
    CW_CHECK(cw_stream_synchronize(s_small_g));
    print_result(&rd);

    const double d_over_a = rd.st.p99 / ra.st.p99, b_over_a = rb.st.p99 / ra.st.p99,
                 c_over_a = rc_.st.p99 / ra.st.p99, d_over_a2 = rd.st.p99 / ra2.st.p99;
    const int ok_d = d_over_a <= TARGET_D_OVER_A;
    const double loss_d = 1.0 - rd.hog_blocks_per_s / h0.hog_blocks_per_s;
    const double loss_b = 1.0 - rb.hog_blocks_per_s / h0.hog_blocks_per_s;
    const double loss_h1 = 1.0 - h1.hog_blocks_per_s / h0.hog_blocks_per_s;
    const double sm_share = (double)pinfo.sm_count / (double)info.sm_count;
    printf("ratios:\n");
    printf("  d) p99 / a) p99: %.2fx (target <= %.1fx): %s\n", d_over_a, TARGET_D_OVER_A, pass(ok_d));
    printf("  d) p99 / a2) p99: %.2fx (no target: the partition idle against the partition with the hog beside)\n",
           d_over_a2);
    printf("  b) p99 / a) p99: %.1fx (no target; expected far worse)\n", b_over_a);
    printf("  c) p99 / a) p99: %.1fx (no target; priority does not preempt a running wave)\n", c_over_a);
    printf("  hog loss with %u SMs taken away: d) %.1f%%, h1) %.1f%% of h0)'s blocks/s (the SM share is %.1f%%);"
           " b) %.1f%%\n",
           pinfo.sm_count, 100.0 * loss_d, 100.0 * loss_h1, 100.0 * sm_share, 100.0 * loss_b);

    /* the block for docs/benchmarks.md */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("## Green contexts\n\n");
    printf("### A small kernel beside a GPU-filling hog (bench_green)\n\n");
    printf("%s, %s (%d SMs), driver %d.%d, commit %s. `cw_small` (1 block) launched +\n"
           "`cuStreamSynchronize`, microseconds per round trip, while `cw_hog` (%d-thread blocks of %d ms,\n"
           "one full wave of its context per launch, %d queued) runs without pause on its own stream from\n"
           "a host thread. Partition set `{%d}` with the leftover (%u SMs) as default, made in %.2f ms.\n\n",
           date, info.name, info.sm_count, drv / 1000, drv % 1000 / 10, commit, HOG_THREADS, HOG_MS, HOG_DEPTH,
           SMALL_SMS, linfo.sm_count, set_ms);
    printf("| scenario | round trips | p50 | p99 | max | hog blocks/s |\n| --- | --- | --- | --- | --- | --- |\n");
    printf("| hog alone, primary context (whole GPU) | - | - | - | - | %.0f |\n", h0.hog_blocks_per_s);
    printf("| hog alone, leftover partition (%u SMs) | - | - | - | - | %.0f |\n", linfo.sm_count,
           h1.hog_blocks_per_s);
    const result *rows[] = {&ra, &ra2, &rb, &rc_, &rd};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("| %s | %zu | %.1f | %.1f | %.1f | ", rows[i]->name, rows[i]->n, rows[i]->st.p50, rows[i]->st.p99,
               rows[i]->st.max);
        if (rows[i]->hog_blocks_per_s > 0)
            printf("%.0f |\n", rows[i]->hog_blocks_per_s);
        else
            printf("- |\n");
    }
    printf("\n| target | measured | result |\n| --- | --- | --- |\n");
    printf("| d) p99 within %.1fx of a) p99 (small kernel isolated on its partition) | %.2fx | %s |\n",
           TARGET_D_OVER_A, d_over_a, pass(ok_d));
    printf("| b) p99 / a) p99 (no target: same context, default priority) | %.1fx | - |\n", b_over_a);
    printf("| c) p99 / a) p99 (no target: same context, greatest priority) | %.1fx | - |\n", c_over_a);
    printf("| hog's loss in d) against the whole GPU (no target; the %u SMs are %.1f%%) | %.1f%% | - |\n",
           pinfo.sm_count, 100.0 * sm_share, 100.0 * loss_d);
    printf("---- end ----\n");

    /* teardown: streams drained, modules unloaded per context, then the set */
    cw_stream *all[] = {s_small_p, s_small_hi, s_hog_p, s_small_g, s_hog_l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CW_CHECK(cw_stream_synchronize(all[i]));
    kctx_unload(&kg);
    kctx_unload(&kl);
    kctx_unload(&kp);
    cw_stream_destroy(&s_small_p);
    cw_stream_destroy(&s_small_hi);
    cw_stream_destroy(&s_hog_p);
    cw_stream_destroy(&s_small_g);
    cw_stream_destroy(&s_hog_l);
    cw_partition_group_destroy(&set);
    cw_context_destroy(&primary);
    free(samples);
    return 0;
}
