/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_completion: how long from enqueueing a kernel until a waiting host
 * thread knows it is done, for cuweave's futures against the raw driver
 * mechanisms they stand for, measured in one run on device 0.
 *
 * One iteration = enqueue the empty kernel cw_empty (tests/kernels) on a
 * stream, enqueue the completion mechanism, wait on the host; the time is
 * taken with clock_gettime(CLOCK_MONOTONIC) from before the launch to the
 * moment the waiting thread returns (the round trip; the launch and the
 * kernel are the same in every method, so differences are the mechanisms'):
 *
 *   a) future HOST_FUNC    cw_future_rearm(f, s) + cw_future_wait(f)
 *   b) future WRITE_VALUE  cw_future_rearm(f, s) + cw_future_wait(f)
 *   c) cuStreamSynchronize on the stream
 *   d) raw write value     cuStreamWriteValue32 of an incrementing sequence
 *                          into mapped pinned memory (cuMemHostAlloc
 *                          DEVICEMAP + cuMemHostGetDevicePointer), the host
 *                          spinning on the value
 *   e) raw host func       cuLaunchHostFunc bumping an atomic counter, the
 *                          host spinning on it
 *   h) future EVENT        cw_future_rearm(f, s) + cw_future_wait(f) (not
 *                          judged)
 *   f) raw event + write   d) with a cuEventRecord (timing-disabled event)
 *                          before the write: what the WRITE_VALUE future
 *                          enqueues (its fault-check event, then the write);
 *                          not judged, it tells the future's own cost from
 *                          that of its extra event
 *
 * The futures are made once and re-armed (no allocation per iteration).
 * After warm-up, the methods run in rounds (one iteration of each per round,
 * in a fresh random order every round, since what ran just before changes a
 * method's latency) to cancel drift and order effects. All run
 * on one stream from cw_stream_create, with the cw_context's CUcontext
 * current on the thread. Targets: the WRITE_VALUE future within 10% of the
 * raw write value + spin at p50; the WRITE_VALUE future at least 2x faster
 * than the HOST_FUNC future at p50 and at p99.
 *
 * Prints what it measures first and a Markdown block for docs/benchmarks.md
 * last. Exits 77 without a GPU, 1 when a call fails, 0 otherwise (a MISS is
 * a result, not a failure). Set CW_COMMIT to name the commit in the output.
 *
 * Build (after `make -j2 O=build/make lib`):
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests bench/bench_completion.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o bench_completion
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_completion"
#include "bench_common.h"
#include "../src/testing/seam.h"

#if defined(__x86_64__) || defined(__i386__)
#  include <immintrin.h>
#  define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#  define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#  define CPU_RELAX() ((void)0)
#endif

#define ROUNDS 3000        /* measured iterations per method */
#define WARMUP_ROUNDS 300  /* warm-up iterations per method */
#define TIMEOUT_US 5000000 /* a wait longer than 5 s is a failure, not a sample */

#define TARGET_WV_VS_RAW 1.10 /* WRITE_VALUE future p50 / raw write value p50 */
#define TARGET_HF_OVER_WV 2.0 /* HOST_FUNC future / WRITE_VALUE future, p50 and p99 */

enum { M_FUT_HF, M_FUT_WV, M_SYNC, M_RAW_WV, M_RAW_HF, M_RAW_EV_WV, M_FUT_WV_SPIN, M_FUT_EV, M_COUNT };
static const char *const method_name[M_COUNT] = {
    "future HOST_FUNC (rearm + wait)",
    "future WRITE_VALUE (rearm + wait)",
    "cuStreamSynchronize",
    "raw cuStreamWriteValue32 + spin",
    "raw cuLaunchHostFunc + spin",
    "raw cuEventRecord + cuStreamWriteValue32 + spin",
    "diagnostic: future WRITE_VALUE rearm + raw spin on its word",
    "future EVENT (rearm + wait)",
};

/* ---- small helpers ------------------------------------------------------ */

static rawcuda rc;



/* ---- the measured iterations -------------------------------------------- */

static cw_stream *s;
static CUstream hs;
static void *fn_empty;
static cw_future *fut_hf, *fut_wv, *fut_ev;
static volatile uint32_t *pinned;   /* host view of the mapped word */
static unsigned long long pinned_d; /* device view */
static uint32_t wv_seq;
static atomic_uint hf_count;
static unsigned hf_expected;

static void raw_host_fn(void *p) { atomic_fetch_add_explicit((atomic_uint *)p, 1, memory_order_release); }

static void launch_empty(void) { CU_CHECK(rc.cuLaunchKernel(fn_empty, 1, 1, 1, 1, 1, 1, 0, hs, NULL, NULL)); }

static void spin_timeout(const char *what) {
    fprintf(stderr, "bench_completion: %s: no completion within %d s\n", what, TIMEOUT_US / 1000000);
    exit(1);
}

static double iter_future(cw_future *f) {
    unsigned long long t0 = now_ns();
    launch_empty();
    CW_CHECK(cw_future_rearm(f, s));
    CW_CHECK(cw_future_wait(f, TIMEOUT_US));
    unsigned long long t1 = now_ns();
    return (double)(t1 - t0) / 1000.0;
}

static double iter_sync(void) {
    unsigned long long t0 = now_ns();
    launch_empty();
    CU_CHECK(rc.cuStreamSynchronize(hs));
    unsigned long long t1 = now_ns();
    return (double)(t1 - t0) / 1000.0;
}

static CUevent raw_ev; /* timing-disabled; recorded before the write in method f */

static double iter_raw_wv(int with_event) {
    uint32_t want = ++wv_seq;
    unsigned long long t0 = now_ns();
    launch_empty();
    if (with_event) CU_CHECK(rc.cuEventRecord(raw_ev, hs));
    CU_CHECK(rc.cuStreamWriteValue32(hs, pinned_d, want, 0 /* CU_STREAM_WRITE_VALUE_DEFAULT */));
    for (unsigned n = 1; *pinned != want; n++) {
        CPU_RELAX();
        if ((n & 0xffffu) == 0 && now_ns() - t0 > TIMEOUT_US * 1000ull) spin_timeout("raw write value");
    }
    atomic_thread_fence(memory_order_acquire);
    unsigned long long t1 = now_ns();
    return (double)(t1 - t0) / 1000.0;
}

static double iter_raw_hf(void) {
    unsigned want = ++hf_expected;
    unsigned long long t0 = now_ns();
    launch_empty();
    CU_CHECK(rc.cuLaunchHostFunc(hs, raw_host_fn, &hf_count));
    for (unsigned n = 1; atomic_load_explicit(&hf_count, memory_order_acquire) != want; n++) {
        CPU_RELAX();
        if ((n & 0xffffu) == 0 && now_ns() - t0 > TIMEOUT_US * 1000ull) spin_timeout("raw host func");
    }
    unsigned long long t1 = now_ns();
    return (double)(t1 - t0) / 1000.0;
}

/* Diagnostic: cuweave's enqueue (rearm) with the raw waiting loop, to tell
 * the enqueue side from the waiting side. */
static double iter_future_rawspin(cw_future *f) {
    unsigned long long t0 = now_ns();
    launch_empty();
    CW_CHECK(cw_future_rearm(f, s));
    volatile unsigned *word;
    unsigned want;
    if (cwi_future_word(f, &word, &want) != 0) {
        fprintf(stderr, "bench_completion: cwi_future_word failed\n");
        exit(1);
    }
    for (unsigned n = 1; (int)(*word - want) < 0; n++) {
        CPU_RELAX();
        if ((n & 0xffffu) == 0 && now_ns() - t0 > TIMEOUT_US * 1000ull) spin_timeout("future word");
    }
    atomic_thread_fence(memory_order_acquire);
    unsigned long long t1 = now_ns();
    return (double)(t1 - t0) / 1000.0;
}

static double iter(int m) {
    switch (m) {
    case M_FUT_HF: return iter_future(fut_hf);
    case M_FUT_WV: return iter_future(fut_wv);
    case M_SYNC: return iter_sync();
    case M_RAW_WV: return iter_raw_wv(0);
    case M_RAW_HF: return iter_raw_hf();
    case M_FUT_WV_SPIN: return iter_future_rawspin(fut_wv);
    case M_FUT_EV: return iter_future(fut_ev);
    default: return iter_raw_wv(1);
    }
}

/* Diagnostics, not judged: the host cost of enqueueing the marker alone, on
 * an idle stream (no kernel), each call timed on its own and the completion
 * awaited outside the timed region. Shows how much of a gap between (b) and
 * (d) is spent on the host before the GPU sees anything. */
enum { D_REARM, D_RAW_WV, D_RAW_EV_WV, D_WAIT_DONE, D_REARM_EV, D_RAW_EV, D_COUNT };
static const char *const diag_name[D_COUNT] = {
    "cw_future_rearm (WRITE_VALUE)",
    "cuStreamWriteValue32",
    "cuEventRecord + cuStreamWriteValue32",
    "cw_future_wait, already complete",
    "cw_future_rearm (EVENT)",
    "cuEventRecord",
};


static double diag(int d) {
    unsigned long long t0, t1;
    switch (d) {
    case D_REARM:
        t0 = now_ns();
        CW_CHECK(cw_future_rearm(fut_wv, s));
        t1 = now_ns();
        CW_CHECK(cw_future_wait(fut_wv, TIMEOUT_US));
        break;
    case D_RAW_WV:
    case D_RAW_EV_WV: {
        uint32_t want = ++wv_seq;
        t0 = now_ns();
        if (d == D_RAW_EV_WV) CU_CHECK(rc.cuEventRecord(raw_ev, hs));
        CU_CHECK(rc.cuStreamWriteValue32(hs, pinned_d, want, 0));
        t1 = now_ns();
        while (*pinned != want) CPU_RELAX();
        break;
    }
    case D_REARM_EV:
        t0 = now_ns();
        CW_CHECK(cw_future_rearm(fut_ev, s));
        t1 = now_ns();
        CW_CHECK(cw_future_wait(fut_ev, TIMEOUT_US));
        break;
    case D_RAW_EV:
        t0 = now_ns();
        CU_CHECK(rc.cuEventRecord(raw_ev, hs));
        t1 = now_ns();
        CU_CHECK(rc.cuStreamSynchronize(hs));
        break;
    default:
        CW_CHECK(cw_future_rearm(fut_wv, s));
        CU_CHECK(rc.cuStreamSynchronize(hs));
        while (cw_future_poll(fut_wv) == CW_ERROR_NOT_READY) CPU_RELAX();
        t0 = now_ns();
        CW_CHECK(cw_future_wait(fut_wv, TIMEOUT_US));
        t1 = now_ns();
        break;
    }
    return (double)(t1 - t0) / 1000.0;
}

int main(void) {
    printf("bench_completion: round trip from enqueueing an empty kernel to a waiting host thread awake\n"
           "  a) cw_future HOST_FUNC: launch + cw_future_rearm + cw_future_wait\n"
           "  b) cw_future WRITE_VALUE: launch + cw_future_rearm + cw_future_wait (default spin)\n"
           "  c) launch + cuStreamSynchronize\n"
           "  d) launch + cuStreamWriteValue32 of a sequence into mapped pinned memory + host spin\n"
           "  e) launch + cuLaunchHostFunc bumping an atomic + host spin\n"
           "  f) as d) with a cuEventRecord before the write (not judged: the cost of one more\n"
           "     driver call between the launch and the marker)\n"
           "  g) cw_future_rearm, then the raw spin on the future's own word (not judged: tells\n"
           "     the enqueue side of the future from its waiting side)\n"
           "  h) cw_future EVENT: launch + cw_future_rearm + cw_future_wait (not judged: the marker\n"
           "     cheapest to enqueue, waited for with cuEventQuery)\n"
           "  method: %d warm-up + %d measured iterations each, one of each per round, in a random\n"
           "          order (fixed seed), one stream, CLOCK_MONOTONIC from before the launch to the wake-up\n"
           "  then, not judged: the host time of enqueueing each marker alone (cw_future_rearm of\n"
           "          WRITE_VALUE and EVENT futures, cuStreamWriteValue32, cuEventRecord +\n"
           "          cuStreamWriteValue32, cuEventRecord) and of a wait that finds the future complete\n",
           WARMUP_ROUNDS, ROUNDS);
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
    unsigned ctx_flags = 0;
    CU_CHECK(rc.cuCtxGetFlags(&ctx_flags));
    unsigned v = cw_version();
    printf("device 0: %s, driver %d.%d, cuweave %u.%u.%u, commit %s, %s, context flags 0x%x\n", info.name,
           drv / 1000, drv % 1000 / 10, CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v),
           CW_VERSION_PACK_PATCH(v), commit, date, ctx_flags);

    void *module = NULL;
    CU_CHECK(rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_empty", &fn_empty));
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    hs = bench_cu_stream(s);

    CU_CHECK(rc.cuEventCreate(&raw_ev, 0x2 /* CU_EVENT_DISABLE_TIMING */));
    void *hp = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&hp, 64, 0x02 /* CU_MEMHOSTALLOC_DEVICEMAP */));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&pinned_d, hp, 0));
    pinned = (volatile uint32_t *)hp;
    *pinned = 0;

    /* the futures: made once (each enqueues its first marker), then re-armed */
    CW_CHECK(cw_future_create(&fut_hf, s, CW_FUTURE_HOST_FUNC));
    CW_CHECK(cw_future_create(&fut_wv, s, CW_FUTURE_WRITE_VALUE));
    CW_CHECK(cw_future_create(&fut_ev, s, CW_FUTURE_EVENT));
    CW_CHECK(cw_future_wait(fut_ev, TIMEOUT_US));
    CW_CHECK(cw_future_wait(fut_hf, TIMEOUT_US));
    CW_CHECK(cw_future_wait(fut_wv, TIMEOUT_US));

    double *t[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) {
        t[m] = malloc(sizeof(double) * ROUNDS);
        if (!t[m]) {
            fprintf(stderr, "bench_completion: out of memory\n");
            return 1;
        }
    }
    /* Each round runs every method once, in a fresh random order: a method's
     * latency depends on what ran just before it (after a host-function
     * method the driver's callback thread is still busy for microseconds),
     * so a fixed rotation would always put the same method after the same
     * neighbour. A fixed seed keeps runs comparable. */
    int order[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) order[m] = m;
    for (int r = 0; r < WARMUP_ROUNDS + ROUNDS; r++) {
        shuffle(order, M_COUNT);
        for (int j = 0; j < M_COUNT; j++) {
            double v = iter(order[j]);
            if (r >= WARMUP_ROUNDS) t[order[j]][r - WARMUP_ROUNDS] = v;
        }
    }
    CU_CHECK(rc.cuStreamSynchronize(hs));

    /* WRITE_VALUE future over raw write value, round by round, before the sorts */
    double *pr = malloc(sizeof(double) * ROUNDS);
    if (!pr) return 1;
    for (int r = 0; r < ROUNDS; r++) pr[r] = t[M_FUT_WV][r] / t[M_RAW_WV][r];
    stats s_pr = stats_of(pr, ROUNDS);
    free(pr);

    stats sm[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) sm[m] = stats_of(t[m], ROUNDS);

    const stats *hf = &sm[M_FUT_HF], *wv = &sm[M_FUT_WV], *rwv = &sm[M_RAW_WV], *rhf = &sm[M_RAW_HF];
    double wv_vs_raw = wv->p50 / rwv->p50;
    double hf_over_wv50 = hf->p50 / wv->p50, hf_over_wv99 = hf->p99 / wv->p99;
    int ok1 = wv_vs_raw <= TARGET_WV_VS_RAW, ok2 = hf_over_wv50 >= TARGET_HF_OVER_WV,
        ok3 = hf_over_wv99 >= TARGET_HF_OVER_WV;

    printf("results (microseconds, %d iterations each):\n", ROUNDS);
    for (int m = 0; m < M_COUNT; m++)
        printf("  %-48s p50 %8.2f  p90 %8.2f  p99 %8.2f  max %9.2f\n", method_name[m], sm[m].p50, sm[m].p90,
               sm[m].p99, sm[m].max);
    printf("ratios:\n");
    printf("  WRITE_VALUE future / raw write value, p50: %.3f (target <= %.2f): %s\n", wv_vs_raw, TARGET_WV_VS_RAW,
           pass(ok1));
    printf("  WRITE_VALUE future / raw write value, per round (same round): p10 %.3f, p50 %.3f, p90 %.3f\n",
           s_pr.p10, s_pr.p50, s_pr.p90);
    printf("  HOST_FUNC future / WRITE_VALUE future, p50: %.2fx (target >= %.1fx): %s\n", hf_over_wv50,
           TARGET_HF_OVER_WV, pass(ok2));
    printf("  HOST_FUNC future / WRITE_VALUE future, p99: %.2fx (target >= %.1fx): %s\n", hf_over_wv99,
           TARGET_HF_OVER_WV, pass(ok3));
    printf("  HOST_FUNC future / raw host func, p50 %.3f, p99 %.3f (no target)\n", hf->p50 / rhf->p50,
           hf->p99 / rhf->p99);
    printf("  WRITE_VALUE future / raw event + write value, p50 %.3f, p99 %.3f (no target)\n",
           wv->p50 / sm[M_RAW_EV_WV].p50, wv->p99 / sm[M_RAW_EV_WV].p99);

    /* diagnostics: host cost of the marker alone, interleaved, same stream */
    double *dt[D_COUNT];
    for (int d = 0; d < D_COUNT; d++) {
        dt[d] = malloc(sizeof(double) * ROUNDS);
        if (!dt[d]) {
            fprintf(stderr, "bench_completion: out of memory\n");
            return 1;
        }
    }
    for (int r = 0; r < WARMUP_ROUNDS; r++)
        for (int j = 0; j < D_COUNT; j++) (void)diag((r + j) % D_COUNT);
    for (int r = 0; r < ROUNDS; r++)
        for (int j = 0; j < D_COUNT; j++) {
            int d = (r + j) % D_COUNT;
            dt[d][r] = diag(d);
        }
    printf("diagnostics, not judged: host time of the call alone, idle stream, microseconds:\n");
    for (int d = 0; d < D_COUNT; d++) {
        stats sd = stats_of(dt[d], ROUNDS);
        printf("  %-48s p50 %6.2f  p90 %6.2f  p99 %6.2f\n", diag_name[d], sd.p50, sd.p90, sd.p99);
        free(dt[d]);
    }

    /* the block for docs/benchmarks.md */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Host completion after an empty kernel (bench_completion)\n\n");
    printf("%s, %s, driver %d.%d, commit %s. Microseconds from before the launch to the waiting\n"
           "thread awake; %d iterations each, methods in a fresh random order each round on one stream.\n\n",
           date, info.name, drv / 1000, drv % 1000 / 10, commit, ROUNDS);
    printf("| method | p50 | p90 | p99 | max |\n| --- | --- | --- | --- | --- |\n");
    for (int m = 0; m < M_COUNT; m++)
        printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", method_name[m], sm[m].p50, sm[m].p90, sm[m].p99,
               sm[m].max);
    printf("\n| target | measured | result |\n| --- | --- | --- |\n");
    printf("| WRITE_VALUE future within 10%% of raw write value + spin (p50) | %.3f | %s |\n", wv_vs_raw,
           pass(ok1));
    printf("| WRITE_VALUE future >= 2x faster than HOST_FUNC future (p50) | %.2fx | %s |\n", hf_over_wv50,
           pass(ok2));
    printf("| WRITE_VALUE future >= 2x faster than HOST_FUNC future (p99) | %.2fx | %s |\n", hf_over_wv99,
           pass(ok3));
    printf("---- end ----\n");

    for (int m = 0; m < M_COUNT; m++) free(t[m]);
    cw_future_destroy(&fut_hf);
    cw_future_destroy(&fut_wv);
    cw_future_destroy(&fut_ev);
    CU_CHECK(rc.cuStreamSynchronize(hs));
    cw_stream_destroy(&s);
    CU_CHECK(rc.cuMemFreeHost(hp));
    CU_CHECK(rc.cuEventDestroy(raw_ev));
    CU_CHECK(rc.cuModuleUnload(module));
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    return 0;
}
