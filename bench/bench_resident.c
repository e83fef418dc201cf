/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_resident: the host round trip of a GPU-resident loop (cw_resident)
 * against the raw driver API doing the same work, measured in one run on
 * device 0.
 *
 * One round trip: the host stores the input value v into mapped pinned host
 * memory `in`, makes the request, and spins until it sees the result; the
 * time is taken with CLOCK_MONOTONIC from before the store to the moment the
 * host sees the result. Then it checks out == (v + 1) * 3 + 7 (`out` is
 * mapped pinned host memory written by the workload); every mismatch is
 * counted and any fails the run. The workload is three trivial operators,
 * one thread each (tests/kernels/test_kernels.cu): load(in, buf) -> mul(buf)
 * -> store(buf, out), buf cuMemAlloc'd device memory; cw_op_* for the raw
 * methods and a loop with an IF node, cw_gop_* (the same, each starting with
 * `if (cw_resident_skip(ctl)) return;`) for a loop gated by kernels.
 *
 *   a) cw resident, back-to-back, in its fastest configuration: a
 *      cw_resident with settings.gate CW_RESIDENT_GATE_KERNELS (no IF node),
 *      sleep_interval_us 0 (spin), sync_with_host 1, unroll 16, whose
 *      workload is cw_resident_set_workload_fn: a function that launches
 *      cw_gop_load/mul/store (given cw_resident_get_ctl's address) with the
 *      raw cuLaunchKernel on the CUstream of the cw_stream the loop captures
 *      on, the loop's context current, so the kernels sit in the iteration
 *      itself (no child graph node); launched once per block. Per round
 *      trip: store v, cw_resident_data_ready(&seq), spin on
 *      cw_resident_poll_result(seq) until done; the next request right
 *      after the last result.
 *   b) cw resident, already polling: as a), but the host busy-waits 30 us
 *      (not counted) before the request, so the loop is back in its poll.
 *   c) raw graph relaunch: the three kernels captured with the raw driver
 *      capture, instantiated and uploaded; cuGraphLaunch + cuStreamSynchronize.
 *   d) raw direct: 3 x cuLaunchKernel + cuStreamSynchronize.
 *   e) persistent kernel (the floor): cw_op_persistent (one thread) launched
 *      once per block on its own stream; per round trip store v, release-store
 *      doorbell = n, spin until done == n; back-to-back and already polling.
 *      Stopped with stop = 1 and a stream synchronisation.
 *   f) structure sweep: which part of the loop costs what. Each row
 *      back-to-back and already polling (p50/p99/p99.9), with the GPU's
 *      per-iteration median (cw_resident_get_info iter_median_ns, from the
 *      poll that took the request to the result signal) of its loop; all
 *      spin, sync_with_host 1:
 *        f1 a)/b) itself: gate kernels, inline fn, unroll 16
 *        f2 gate kernels, inline fn, unroll 1 (every request pays the
 *           WHILE node's loop-back)
 *        f3 IF node (CW_RESIDENT_GATE_NODE), inline fn launching the
 *           unguarded cw_op_* kernels, unroll 16
 *        f4 IF node, child graph: cw_resident_set_workload with the cw_op_*
 *           kernels captured on a cw_stream (the general path), unroll 16
 *        f5 IF node, no workload (the loop's own kernels only; `out` is not
 *           written, so only the round trip is measured, not checked),
 *           unroll 16: the IF node by itself
 *        f6 f3 with settings.trace 1: the workload is a traced stage (two
 *           one-thread mark kernels around it in every iteration), what
 *           naming a faulting stage costs
 *      and a decomposition: IF node ~ f3 - f1 (GPU median), child graph
 *      node ~ f4 - f3 (GPU median), loop-back ~ f2 - f1 (back-to-back p50).
 *   n) issue 24, next to a)-e) in the same blocks: what the defaults give
 *      and the fused loop, back-to-back and already polling, with the GPU
 *      median and what the build chose (cw_resident_get_info gate, overlap):
 *        n1 the minimal program of docs/resident.md: cw_resident_settings_default
 *           (gate and overlap AUTO, ADAPTIVE sleep) with sync_with_host 1 only,
 *           the cw_gop_* kernels captured into a graph (cw_resident_set_workload),
 *           which the build copies into the iteration when it qualifies
 *        n2 the defaults with the same kernels as a capture function
 *           (cw_resident_set_workload_fn)
 *        n3 gate BEGIN_END: cw_fop_load (cw_resident_begin), cw_gop_mul,
 *           cw_fop_store (cw_resident_end) as a capture function, spin,
 *           overlap AUTO, unroll 16: the user's three kernels and nothing else
 *      with ratios against a), c) and e).
 *   g) idle settings: already polling after an idle gap (not counted) of
 *      1 ms plus a random 0-500 us (an exact 1 ms would hit the same phase
 *      of a FIXED 100 or 500 us sleep cycle every time), for spin, ADAPTIVE
 *      (500 us, spin_us 200), FIXED 500 us, FIXED 100 us, with the idle polls
 *      per second from cw_resident_get_info (difference of idle_polls over
 *      the variant's wall time): how busy the idle loop keeps the GPU.
 *      Each on a loop configured as a) apart from its sleep settings.
 *   h) under load: green partitions {16 SMs} + the leftover; a) (its
 *      configuration, on the partition's kernels) on a loop in the 16-SM
 *      partition, unloaded and while cw_hog (256-thread blocks of
 *      20 ms, one full wave of the leftover per launch, 3 launches in flight
 *      from a host thread) keeps the leftover partition full. Skipped, with
 *      the reason printed, when green contexts are not supported.
 *   i) as h), but the loop and the hog both on the primary context (the
 *      child loads its own cw_op_*, cw_gop_* and cw_hog kernels). This may
 *      stall for the hog's duration or worse, so it runs in a child process
 *      with alarm(30) that pipes its figures back (or the parent reports
 *      "did not finish in 30 s"); the benchmark never hangs on it. It makes
 *      no loaded request after 20 s (the figures are then over the round
 *      trips done, and say so) and calls a request still unserved 2 s later
 *      a stall. The child is forked at the very start, before anything
 *      initialises the driver (a CUDA driver does not survive fork()), and
 *      waits for the parent's signal to run.
 *
 * Every loop is torn down with cw_resident_tear_down(r, 1000) (h and i while
 * the hog still runs) and the status is reported.
 *
 * Order: a resident loop (or the persistent kernel) that is launched keeps a
 * GPU thread spinning on mapped host memory and would disturb whatever else
 * runs, and only a loop that is launched can be measured; so the methods run
 * in families that own the GPU for a block (the loop of a) and b), the raw
 * methods c) and d), the persistent kernel, the loops of f2-f6), launched
 * at the start of the block and torn down at its end. The variants inside a
 * family alternate in a fresh random order every round (fixed seed), and the
 * run is split into 4 blocks with the families in a fresh random order each
 * time, so that drift and order effects cancel as in bench_graph. Each
 * variant gets BENCH_ITERS measured round trips (env, default 20000) after
 * 2000 warm-up ones (500 at the start of each block); g) gets 2000 after 200
 * (in 2 blocks); h) alternates unloaded and loaded blocks twice.
 *
 * Targets (PASS/MISS, issue 6): a) p50 <= 6 us and p99 <= 8 us; b) p50 <= 4
 * us; a) at least 2x better than c) at p50 and at p99; h) loaded p99 within
 * 2x of unloaded. Prints the tables, the targets and a Markdown block for
 * docs/benchmarks.md. Exits 77 without a GPU (or without the resident loop's
 * driver features), 1 when a call fails or a result is wrong, 0 otherwise (a
 * MISS is a result, not a failure). Set CW_COMMIT to name the commit;
 * BENCH_CSV=dir writes each variant's round trips as CSV (bench_common.h:
 * tools/trace_plot.py latency draws them). About
 * 1 minute on an H100 with the defaults (h and i included).
 *
 * Build (after `make -j2 O=build/make lib`):
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests bench/bench_resident.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o bench_resident
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuweave/cuweave.h>
#include <cuweave/resident.h> /* not (yet) in the umbrella header */

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_resident"
#include "bench_common.h"

#define DEFAULT_ITERS 20000
#define WARMUP 2000                /* warm-up round trips per variant, spread over the blocks */
#define BLOCKS 4                   /* blocks of the main families (a-f) */
#define POLL_GAP_NS 30000ull       /* b), e), f): idle host time before an already-polling request */
#define SLEEP_ITERS 2000           /* g): round trips per idle setting */
#define SLEEP_WARMUP 200
#define SLEEP_BLOCKS 2
#define SLEEP_GAP_NS 1000000ull    /* g): idle gap before each request, at least */
#define SLEEP_JITTER_NS 500000ull  /* g): plus a random 0-500 us (see run_variant's caller) */
#define SMALL_SMS 16               /* h): the loop's partition */
#define HOG_THREADS 256
#define HOG_NS 20000000LL          /* each hog block waits 20 ms */
#define HOG_DEPTH 3                /* hog launches in flight at most */
#define LOAD_PAIRS 2               /* h): unloaded + loaded blocks, twice */
#define TEARDOWN_MS 1000
#define STALL_NS 5000000000ull     /* a round trip of the parent taking longer fails the run */
#define CHILD_ALARM_S 30           /* i) */
#define CHILD_BUDGET_NS 20000000000ull /* i): no loaded request is made after 20 s */
#define CHILD_GRACE_NS 2000000000ull   /* i): a request still unserved 2 s after that is a stall */
#define CHILD_ITERS 2000           /* i): round trips at most, unloaded and loaded each */
#define CHILD_WARMUP 200

#define TARGET_B2B_P50 6.0
#define TARGET_B2B_P99 8.0
#define TARGET_POLL_P50 4.0
#define TARGET_VS_GRAPH 2.0
#define TARGET_LOADED 2.0

typedef unsigned long long dptr;

static rawcuda rc;

/* ---- mapped pinned host memory (one page, portable: every context maps it) ---- */

static struct {
    void *base;
    unsigned *in, *out, *stop;
    unsigned long long *doorbell, *done;
} hm;

static void host_alloc(void) {
    CU_CHECK(rc.cuMemHostAlloc(&hm.base, 4096, 0x1 | 0x2 /* CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP */));
    memset(hm.base, 0, 4096);
    char *b = hm.base; /* one cache line each */
    hm.in = (unsigned *)(b + 0);
    hm.out = (unsigned *)(b + 128);
    hm.doorbell = (unsigned long long *)(b + 256);
    hm.stop = (unsigned *)(b + 384);
    hm.done = (unsigned long long *)(b + 512);
}

/* ---- the kernels and buffers of one context --------------------------------- */

typedef struct kset {
    const char *name;
    cw_context *ctx; /* borrowed */
    CUcontext cu;
    void *module, *f_load, *f_mul, *f_store, *f_gload, *f_gmul, *f_gstore, *f_pers, *f_hog, *f_fload, *f_fstore;
    dptr buf, sink;                     /* device memory of this context */
    dptr in, out, doorbell, stop, done; /* the mapped host words, as this context addresses them */
    cw_stream *cap;                     /* the capture stream of the cw workload */
    CUstream cap_h;
    unsigned long long hog_launched;
} kset;

static void kset_load(kset *k, const char *name, cw_context *ctx) {
    memset(k, 0, sizeof *k);
    k->name = name;
    k->ctx = ctx;
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    k->cu = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_op_load", &k->f_load));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_op_mul", &k->f_mul));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_op_store", &k->f_store));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_gop_load", &k->f_gload));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_gop_mul", &k->f_gmul));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_gop_store", &k->f_gstore));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_op_persistent", &k->f_pers));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_fop_load", &k->f_fload));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_fop_store", &k->f_fstore));
    CU_CHECK(rawcuda_kernel(&rc, &k->module, cw_test_kernels_fatbin, "cw_hog", &k->f_hog));
    CU_CHECK(rc.cuMemAlloc(&k->buf, 64));
    CU_CHECK(rc.cuMemAlloc(&k->sink, 64));
    CU_CHECK(rc.cuMemsetD32(k->buf, 0, 16));
    CU_CHECK(rc.cuMemsetD32(k->sink, 0, 16));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&k->in, hm.in, 0));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&k->out, hm.out, 0));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&k->doorbell, hm.doorbell, 0));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&k->stop, hm.stop, 0));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&k->done, hm.done, 0));
    CU_CHECK(rc.cuCtxSynchronize());
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    CW_CHECK(cw_stream_create(&k->cap, ctx, NULL));
    k->cap_h = bench_cu_stream(k->cap);
}

/* Checks that every hog launch ran, then frees and unloads. */
static void kset_unload(kset *k) {
    unsigned long long hog = 0;
    cw_stream_destroy(&k->cap);
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    CU_CHECK(rc.cuCtxSynchronize());
    CU_CHECK(rc.cuMemcpyDtoH(&hog, k->sink, sizeof hog));
    if (hog != k->hog_launched) {
        fprintf(stderr, "%s: %s: %llu of %llu hog launches counted on the GPU\n", BENCH_NAME, k->name, hog,
                k->hog_launched);
        exit(1);
    }
    CU_CHECK(rc.cuMemFree(k->buf));
    CU_CHECK(rc.cuMemFree(k->sink));
    CU_CHECK(rc.cuModuleUnload(k->module));
    CU_CHECK(rc.cuCtxSetCurrent(prev));
}

/* The three operators on stream h (k's context current on this thread). */
static void launch_ops(kset *k, CUstream h) {
    void *a_load[] = {&k->in, &k->buf};
    void *a_mul[] = {&k->buf};
    void *a_store[] = {&k->buf, &k->out};
    CU_CHECK(rawcuda_launch1(&rc, k->f_load, h, a_load));
    CU_CHECK(rawcuda_launch1(&rc, k->f_mul, h, a_mul));
    CU_CHECK(rawcuda_launch1(&rc, k->f_store, h, a_store));
}

/* The three guarded operators (cw_gop_*, for a loop gated by kernels) on
 * stream h, ctl the loop's device block (k's context current on this thread). */
static void launch_gops(kset *k, dptr ctl, CUstream h) {
    void *a_load[] = {&ctl, &k->in, &k->buf};
    void *a_mul[] = {&ctl, &k->buf};
    void *a_store[] = {&ctl, &k->buf, &k->out};
    CU_CHECK(rawcuda_launch1(&rc, k->f_gload, h, a_load));
    CU_CHECK(rawcuda_launch1(&rc, k->f_gmul, h, a_mul));
    CU_CHECK(rawcuda_launch1(&rc, k->f_gstore, h, a_store));
}

/* The fused operators (gate BEGIN_END: cw_fop_load begins, cw_fop_store ends). */
static void launch_fops(kset *k, dptr ctl, CUstream h) {
    void *a_load[] = {&ctl, &k->in, &k->buf};
    void *a_mul[] = {&ctl, &k->buf};
    void *a_store[] = {&ctl, &k->buf, &k->out};
    CU_CHECK(rawcuda_launch1(&rc, k->f_fload, h, a_load));
    CU_CHECK(rawcuda_launch1(&rc, k->f_gmul, h, a_mul));
    CU_CHECK(rawcuda_launch1(&rc, k->f_fstore, h, a_store));
}

/* The guarded operators captured into a graph on k's cw_stream (the
 * minimal program's workload: cw_resident_set_workload). */
static cw_graph *capture_gops(kset *k, dptr ctl) {
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    cw_graph *g = NULL;
    CW_CHECK(cw_capture_begin(k->cap, NULL, CW_CAPTURE_GLOBAL));
    launch_gops(k, ctl, k->cap_h);
    CW_CHECK(cw_capture_end(&g, k->cap));
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    return g;
}

/* The workload for a cw_resident as a graph: the three operators captured on
 * k's cw_stream (the general path: the loop holds it as a child graph node). */
static cw_graph *capture_ops(kset *k) {
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(k->cu));
    cw_graph *g = NULL;
    CW_CHECK(cw_capture_begin(k->cap, NULL, CW_CAPTURE_GLOBAL));
    launch_ops(k, k->cap_h);
    CW_CHECK(cw_capture_end(&g, k->cap));
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    return g;
}

/* 1: the gated loops overlap their launches (cw_resident_settings.overlap:
 * compute capability 9.0 or newer). */
static int g_overlap;

/* What a loop's workload is. */
typedef enum {
    W_GUARDED_FN, /* gate kernels: cw_resident_set_workload_fn launching cw_gop_*, overlap when g_overlap (a) */
    W_GUARDED_FN_PLAIN, /* the same without overlap (f0) */
    W_PLAIN_FN,   /* IF node: cw_resident_set_workload_fn launching cw_op_* */
    W_GRAPH,      /* IF node: cw_resident_set_workload with capture_ops's graph (child graph node) */
    W_NONE,       /* IF node, no workload: the loop's own kernels only (out is not written) */
    W_DEFAULT_GRAPH, /* n1: the defaults (gate, overlap, sleep), cw_gop_* as a graph */
    W_DEFAULT_FN,    /* n2: the defaults, cw_gop_* as a capture function */
    W_BEGIN_END          /* n3: gate BEGIN_END, cw_fop_load / cw_gop_mul / cw_fop_store as a capture function */
} wkind;

/* The user data of a workload function: lives as long as the process (a
 * loop calls its function whenever cw_resident_launch rebuilds its graph). */
typedef struct wl {
    kset *k;
    cw_devptr ctl;
    int guarded; /* 1 cw_gop_*, 2 the fused operators, 0 cw_op_* */
} wl;
static wl wl_pool[16];
static int wl_used;

/* cw_resident_capture_fn: the three operators on s (capturing into the
 * loop's graph), launched raw on s's CUstream with the loop's context current. */
static cw_status wl_capture(cw_stream *s, void *user) {
    const wl *w = user;
    cw_stream_info si;
    cw_status st = cw_stream_get_info(s, &si);
    if (st != CW_SUCCESS) return st;
    CUstream h = si.handle;
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(w->k->cu));
    if (w->guarded == 2)
        launch_fops(w->k, w->ctl, h);
    else if (w->guarded)
        launch_gops(w->k, w->ctl, h);
    else
        launch_ops(w->k, h);
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    return CW_SUCCESS;
}

/* A loop on k's context serving workload `w`, the host reading mapped memory
 * it writes. W_GUARDED_FN gates by kernels, the others by an IF node. */
static cw_status loop_make(cw_resident **r, kset *k, wkind w, uint32_t unroll, cw_resident_sleep mode,
                           uint32_t sleep_us, uint32_t spin_us, uint32_t trace) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.trace = trace;
    s.sleep_mode = mode;
    s.sleep_interval_us = sleep_us;
    if (mode == CW_RESIDENT_SLEEP_ADAPTIVE) s.spin_us = spin_us;
    s.sync_with_host = 1; /* the workload writes `out` in host memory */
    s.unroll = unroll;
    const int guarded = w == W_GUARDED_FN || w == W_GUARDED_FN_PLAIN || w == W_DEFAULT_FN ? 1 : w == W_BEGIN_END ? 2 : 0;
    if (w == W_DEFAULT_GRAPH || w == W_DEFAULT_FN) {
        /* the minimal program: the defaults, but for the results in host memory */
        cw_resident_settings_default(&s);
        s.sync_with_host = 1;
    } else if (w == W_BEGIN_END) {
        s.gate = CW_RESIDENT_GATE_BEGIN_END; /* overlap AUTO (the default) */
    } else {
        s.gate = guarded ? CW_RESIDENT_GATE_KERNELS : CW_RESIDENT_GATE_NODE;
        s.overlap = w == W_GUARDED_FN ? g_overlap : 0;
    }
    cw_status st = cw_resident_create(r, k->ctx, &s);
    if (st != CW_SUCCESS) return st;
    switch (w) {
    case W_GUARDED_FN:
    case W_GUARDED_FN_PLAIN:
    case W_DEFAULT_FN:
    case W_BEGIN_END:
    case W_PLAIN_FN: {
        if (wl_used == (int)(sizeof wl_pool / sizeof wl_pool[0])) {
            fprintf(stderr, "%s: more loops than wl_pool holds\n", BENCH_NAME);
            exit(1);
        }
        wl *x = &wl_pool[wl_used++];
        x->k = k;
        x->guarded = guarded;
        CW_CHECK(cw_resident_get_ctl(*r, &x->ctl));
        CW_CHECK(cw_resident_set_workload_fn(*r, wl_capture, x));
        break;
    }
    case W_DEFAULT_GRAPH: {
        cw_devptr ctl = 0;
        CW_CHECK(cw_resident_get_ctl(*r, &ctl));
        cw_graph *g = capture_gops(k, ctl);
        CW_CHECK(cw_resident_set_workload(*r, g));
        cw_graph_destroy(&g);
        break;
    }
    case W_GRAPH: {
        cw_graph *g = capture_ops(k);
        CW_CHECK(cw_resident_set_workload(*r, g));
        cw_graph_destroy(&g);
        break;
    }
    case W_NONE: break;
    }
    return CW_SUCCESS;
}

/* ---- round trips ------------------------------------------------------------------ */

static unsigned next_v = 1;
static unsigned long long checked, mismatches;

/* xorshift64 for the idle gaps' jitter (its own state: the shuffles keep theirs) */
static uint64_t jitter_state = 0x2545f4914f6cdd1dull;
static uint64_t jitter_rand(void) {
    jitter_state ^= jitter_state << 13;
    jitter_state ^= jitter_state >> 7;
    jitter_state ^= jitter_state << 17;
    return jitter_state;
}

static void host_wait_ns(unsigned long long ns) {
    const unsigned long long end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

static void check_out(unsigned v, const char *what) {
    const unsigned want = (v + 1u) * 3u + 7u;
    const unsigned got = __atomic_load_n(hm.out, __ATOMIC_ACQUIRE);
    checked++;
    if (got != want) {
        if (mismatches < 10)
            fprintf(stderr, "%s: %s: out = %u after v = %u, expected %u\n", BENCH_NAME, what, got, v, want);
        mismatches++;
    }
}

/* Through a loop: microseconds, or -1 when the result did not come within
 * limit_ns. check 0: a loop without a workload (out is not written). */
static double rt_loop(cw_resident *r, unsigned long long limit_ns, const char *what, int check) {
    const unsigned v = next_v++;
    const unsigned long long t0 = now_ns();
    *(volatile unsigned *)hm.in = v;
    uint64_t seq = 0;
    CW_CHECK(cw_resident_data_ready(r, &seq));
    for (unsigned spins = 1;; spins++) {
        const cw_status q = cw_resident_poll_result(r, seq);
        if (q == CW_SUCCESS) break;
        if (q != CW_ERROR_NOT_READY) CW_CHECK(q);
        if ((spins & 1023u) == 0 && now_ns() - t0 > limit_ns) return -1.0;
    }
    const unsigned long long t1 = now_ns();
    if (check) check_out(v, what);
    return (double)(t1 - t0) / 1000.0;
}

static CUstream raw_s, pers_s;
static void *raw_exec;
static kset kp; /* the primary context's */
static unsigned long long pers_n;

static double rt_pers(unsigned long long limit_ns) {
    const unsigned v = next_v++;
    const unsigned long long n = ++pers_n;
    const unsigned long long t0 = now_ns();
    *(volatile unsigned *)hm.in = v;
    __atomic_store_n(hm.doorbell, n, __ATOMIC_RELEASE);
    for (unsigned spins = 1; __atomic_load_n(hm.done, __ATOMIC_ACQUIRE) < n; spins++)
        if ((spins & 1023u) == 0 && now_ns() - t0 > limit_ns) return -1.0;
    const unsigned long long t1 = now_ns();
    check_out(v, "e) persistent kernel");
    return (double)(t1 - t0) / 1000.0;
}

static double rt_raw(int graph) {
    const unsigned v = next_v++;
    const unsigned long long t0 = now_ns();
    *(volatile unsigned *)hm.in = v;
    if (graph)
        CU_CHECK(rc.cuGraphLaunch(raw_exec, raw_s));
    else
        launch_ops(&kp, raw_s);
    CU_CHECK(rc.cuStreamSynchronize(raw_s));
    const unsigned long long t1 = now_ns();
    check_out(v, graph ? "c) raw graph" : "d) raw direct");
    return (double)(t1 - t0) / 1000.0;
}

static void pers_launch(void) {
    __atomic_store_n(hm.stop, 0u, __ATOMIC_RELEASE);
    void *a[] = {&kp.doorbell, &kp.stop, &kp.in, &kp.out, &kp.done};
    CU_CHECK(rawcuda_launch1(&rc, kp.f_pers, pers_s, a));
}

static void pers_stop(void) {
    __atomic_store_n(hm.stop, 1u, __ATOMIC_RELEASE);
    CU_CHECK(rc.cuStreamSynchronize(pers_s));
}

/* ---- families: methods that own the GPU for a block ------------------------------- */

typedef enum { T_LOOP, T_RAW_GRAPH, T_RAW_DIRECT, T_PERS } vtype;

typedef struct variant {
    const char *label;
    vtype type;
    unsigned long long gap_ns; /* idle host time before each request, not counted */
    unsigned long long jitter_ns; /* plus a random 0..jitter_ns */
    int nocheck;                  /* a loop without a workload: the result is not checked */
    double *t;
    size_t n, cap;
    stats st;
} variant;

typedef struct family {
    const char *label;
    vtype kind; /* T_LOOP, T_RAW_GRAPH (the raw methods) or T_PERS */
    cw_resident *r;
    variant *v[2];
    int nv;
    /* loops: over every block */
    int launches;
    double first_launch_ms, relaunch_ms_max, teardown_ms_max;
    unsigned long long idle_polls, wall_ns;
    cw_resident_info last;
} family;

static void variant_init(variant *v, const char *label, vtype type, unsigned long long gap_ns, size_t cap) {
    memset(v, 0, sizeof *v);
    v->label = label;
    v->type = type;
    v->gap_ns = gap_ns;
    v->cap = cap;
    v->t = malloc(sizeof(double) * (cap ? cap : 1));
    if (!v->t) {
        fprintf(stderr, "%s: out of memory\n", BENCH_NAME);
        exit(1);
    }
}

static void variant_done(variant *v) {
    if (v->n == 0) {
        fprintf(stderr, "%s: %s: no samples\n", BENCH_NAME, v->label);
        exit(1);
    }
    bench_csv_us(v->label, v->t, v->n);
    v->st = stats_of(v->t, v->n);
}

static double run_variant(family *f, variant *v) {
    double us = 0;
    switch (v->type) {
    case T_LOOP: us = rt_loop(f->r, STALL_NS, v->label, !v->nocheck); break;
    case T_PERS: us = rt_pers(STALL_NS); break;
    case T_RAW_GRAPH: us = rt_raw(1); break;
    case T_RAW_DIRECT: us = rt_raw(0); break;
    }
    if (us < 0) {
        fprintf(stderr, "%s: %s: the result did not come within %.0f s\n", BENCH_NAME, v->label, STALL_NS / 1e9);
        exit(1);
    }
    return us;
}

static cw_status tear_down_timed(cw_resident *r, double *ms) {
    const unsigned long long t = now_ns();
    cw_status st = cw_resident_tear_down(r, TEARDOWN_MS);
    *ms = (double)(now_ns() - t) / 1e6;
    return st;
}

static void loop_launch(family *f) {
    const unsigned long long t = now_ns();
    CW_CHECK(cw_resident_launch(f->r));
    const double ms = (double)(now_ns() - t) / 1e6;
    if (f->launches++ == 0)
        f->first_launch_ms = ms;
    else if (ms > f->relaunch_ms_max)
        f->relaunch_ms_max = ms;
}

static void loop_tear_down(family *f) {
    double ms = 0;
    cw_status st = tear_down_timed(f->r, &ms);
    if (st != CW_SUCCESS) {
        fprintf(stderr, "%s: %s: cw_resident_tear_down(r, %d) returned %s (%s)\n", BENCH_NAME, f->label,
                TEARDOWN_MS, cw_status_name(st), cw_last_error()->message);
        exit(1);
    }
    if (ms > f->teardown_ms_max) f->teardown_ms_max = ms;
}

/* One block of a family: `warm` + `rounds` rounds, each one round trip of every
 * variant of the family in a random order; the loop or the persistent kernel
 * launched at the start and stopped at the end. */
static void family_block(family *f, size_t warm, size_t rounds) {
    cw_resident_info s0;
    unsigned long long t0 = 0, reqs = 0;
    if (f->kind == T_LOOP) {
        loop_launch(f);
        CW_CHECK(cw_resident_get_info(f->r, &s0));
        t0 = now_ns();
    } else if (f->kind == T_PERS) {
        pers_launch();
    }
    int order[2] = {0, 1};
    for (size_t i = 0; i < warm + rounds; i++) {
        if (f->nv > 1) shuffle(order, f->nv);
        for (int k = 0; k < f->nv; k++) {
            variant *v = f->v[order[k]];
            if (v->gap_ns) host_wait_ns(v->gap_ns + (v->jitter_ns ? jitter_rand() % v->jitter_ns : 0));
            const double us = run_variant(f, v);
            reqs++;
            if (i >= warm && v->n < v->cap) v->t[v->n++] = us;
        }
    }
    if (f->kind == T_LOOP) {
        cw_resident_info s1;
        CW_CHECK(cw_resident_get_info(f->r, &s1));
        f->wall_ns += now_ns() - t0;
        f->idle_polls += s1.idle_polls - s0.idle_polls;
        f->last = s1;
        if (s1.iterations - s0.iterations != reqs || s1.completed != s1.requested)
            printf("  note: %s: get_stats after a block says %llu iterations served, %llu requests made; "
                   "requested %llu, completed %llu\n",
                   f->label, (unsigned long long)(s1.iterations - s0.iterations), reqs,
                   (unsigned long long)s1.requested, (unsigned long long)s1.completed);
        loop_tear_down(f);
    } else if (f->kind == T_PERS) {
        pers_stop();
    }
}

static void family_init(family *f, const char *label, vtype kind, cw_resident *r, variant *a, variant *b) {
    memset(f, 0, sizeof *f);
    f->label = label;
    f->kind = kind;
    f->r = r;
    f->v[0] = a;
    f->v[1] = b;
    f->nv = b ? 2 : 1;
}

/* Runs the families in `blocks` blocks, a fresh random order of the families
 * in each; every variant gets `iters` measured round trips after `warmup`. */
static void run_blocks(family **fams, int nf, int blocks, size_t warmup, size_t iters) {
    int order[16];
    for (int i = 0; i < nf; i++) order[i] = i;
    for (int b = 0; b < blocks; b++) {
        shuffle(order, nf);
        const size_t rounds = iters / (size_t)blocks + ((size_t)b < iters % (size_t)blocks ? 1 : 0);
        for (int i = 0; i < nf; i++) family_block(fams[order[i]], warmup / (size_t)blocks, rounds);
    }
}

/* ---- the hog: a host thread keeping a context full ------------------------------- */

/* bench_common.h's bench_hog, on a kset's context and cw_hog, counting its
 * launches into the kset (kset_unload checks them against the GPU's count). */
typedef struct hog {
    bench_hog b;
    kset *k;
} hog;

static void hog_start(hog *g, kset *k, cw_stream *s, unsigned blocks) {
    g->k = k;
    bench_hog_start(&g->b, &rc, k->cu, k->f_hog, k->sink, bench_cu_stream(s), blocks, HOG_THREADS, HOG_NS, HOG_DEPTH);
}

/* Stops and joins the hog thread (its stream drained); returns its launches. */
static unsigned long long hog_stop(hog *g) {
    const unsigned long long n = bench_hog_stop(&g->b);
    g->k->hog_launched += n;
    return n;
}

/* Blocks of cw_hog that fit on one SM at HOG_THREADS threads (k's context
 * current on this thread; 2048 / HOG_THREADS without the occupancy call). */
static int hog_blocks_per_sm(void *fn) { return bench_hog_blocks_per_sm(&rc, fn, HOG_THREADS); }

/* ---- i): the child process -------------------------------------------------------- */

static int cmd_pipe[2] = {-1, -1}, res_pipe[2] = {-1, -1};
static pid_t helper_pid = -1;

__attribute__((format(printf, 2, 3))) static void say(int fd, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1) n = (int)sizeof buf - 1;
    if (n > 0 && write(fd, buf, (size_t)n) < 0) {
        /* the parent has gone: nothing to tell */
    }
}

/* Runs i) in the child: loop and hog both on the primary context. Lines to fd:
 *   U n p50 p99 p999 max                  unloaded
 *   R n target stalled p50 p99 p999 max   loaded (n < target: stopped after 20 s)
 *   T status ms                           cw_resident_tear_down(r, 1000), hog still running
 *   H launches blocks                     the hog stopped
 *   M checked mismatches
 *   E text                                an error (the run fails)
 *   D                                     done */
static void child_run(int fd, size_t iters) {
    cw_status st = cw_init();
    if (st != CW_SUCCESS) {
        say(fd, "E cw_init: %s: %s\n", cw_status_name(st), cw_last_error()->message);
        _exit(1);
    }
    if (!rawcuda_open(&rc)) {
        say(fd, "E the raw loader (tests/rawcuda.h) failed\n");
        _exit(1);
    }
    cw_device_info info;
    CW_CHECK(cw_device_get_info(0, &info));
    cw_context *ctx = NULL;
    CUcontext cu = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cu = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cu));
    host_alloc();
    kset k;
    kset_load(&k, "primary (child)", ctx);
    cw_resident *r = NULL;
    st = loop_make(&r, &k, W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0); /* as a) */
    if (st != CW_SUCCESS) {
        say(fd, "E cw_resident_create: %s: %s\n", cw_status_name(st), cw_last_error()->message);
        _exit(1);
    }
    cw_stream *hs = NULL;
    CW_CHECK(cw_stream_create(&hs, ctx, NULL));
    const unsigned blocks = (unsigned)hog_blocks_per_sm(k.f_hog) * (unsigned)info.sm_count;
    CW_CHECK(cw_resident_launch(r));

    const size_t n_max = iters < CHILD_ITERS ? iters : CHILD_ITERS;
    double *t = malloc(sizeof(double) * n_max);
    if (!t) {
        say(fd, "E out of memory\n");
        _exit(1);
    }
    for (int i = 0; i < CHILD_WARMUP; i++)
        if (rt_loop(r, STALL_NS, "i) unloaded, primary", 1) < 0) {
            say(fd, "E an unloaded request was not served within 5 s\n");
            _exit(1);
        }
    for (size_t i = 0; i < n_max; i++) {
        t[i] = rt_loop(r, STALL_NS, "i) unloaded, primary", 1);
        if (t[i] < 0) {
            say(fd, "E an unloaded request was not served within 5 s\n");
            _exit(1);
        }
    }
    stats su = stats_of(t, n_max);
    say(fd, "U %zu %.3f %.3f %.3f %.3f\n", n_max, su.p50, su.p99, su.p999, su.max);

    hog hg;
    hog_start(&hg, &k, hs, blocks);
    const unsigned long long end = now_ns() + CHILD_BUDGET_NS;
    size_t n = 0;
    int stalled = 0;
    while (n < n_max) {
        const unsigned long long now = now_ns();
        if (now >= end) break;
        const double us = rt_loop(r, end - now + CHILD_GRACE_NS, "i) loaded, primary", 1);
        if (us < 0) {
            stalled = 1;
            break;
        }
        t[n++] = us;
    }
    if (n > 0) {
        stats sl = stats_of(t, n);
        say(fd, "R %zu %zu %d %.3f %.3f %.3f %.3f\n", n, n_max, stalled, sl.p50, sl.p99, sl.p999, sl.max);
    } else {
        say(fd, "R 0 %zu %d 0 0 0 0\n", n_max, stalled);
    }
    say(fd, "M %llu %llu\n", checked, mismatches);
    double ms = 0;
    st = tear_down_timed(r, &ms);
    say(fd, "T %s %.3f\n", cw_status_name(st), ms);
    say(fd, "H %llu %u\n", hog_stop(&hg), blocks);
    say(fd, "D\n");
    _exit(0); /* the process's end frees the rest, also when the loop did not stop */
}

/* The helper: forked before the driver is initialised; waits for 'g'. */
static void helper_main(size_t iters) {
    close(cmd_pipe[1]);
    close(res_pipe[0]);
    char c = 0;
    ssize_t n;
    do
        n = read(cmd_pipe[0], &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || c != 'g') _exit(0); /* the parent ended without i) */
    alarm(CHILD_ALARM_S);
    child_run(res_pipe[1], iters);
    _exit(0);
}

typedef struct child_result {
    int ran, got_u, got_r, got_t, got_h, done, error, alarm, killed, exit_status;
    char err[256], td_status[64];
    size_t nu, n, target;
    int stalled;
    double u[4], l[4]; /* p50 p99 p999 max */
    double td_ms;
    unsigned long long hog_launches, checked, mismatches;
    unsigned blocks;
} child_result;

static void child_parse(child_result *c, char *line) {
    switch (line[0]) {
    case 'U':
        c->got_u = sscanf(line, "U %zu %lf %lf %lf %lf", &c->nu, &c->u[0], &c->u[1], &c->u[2], &c->u[3]) == 5;
        break;
    case 'R':
        c->got_r = sscanf(line, "R %zu %zu %d %lf %lf %lf %lf", &c->n, &c->target, &c->stalled, &c->l[0], &c->l[1],
                          &c->l[2], &c->l[3]) == 7;
        break;
    case 'M': sscanf(line, "M %llu %llu", &c->checked, &c->mismatches); break;
    case 'T': c->got_t = sscanf(line, "T %63s %lf", c->td_status, &c->td_ms) == 2; break;
    case 'H': c->got_h = sscanf(line, "H %llu %u", &c->hog_launches, &c->blocks) == 2; break;
    case 'D': c->done = 1; break;
    case 'E':
        c->error = 1;
        snprintf(c->err, sizeof c->err, "%.200s", line[1] ? line + 2 : "");
        break;
    default: break;
    }
}

/* Tells the helper to run i) and collects its lines; never waits much more
 * than the child's alarm. */
static void run_child(child_result *c) {
    memset(c, 0, sizeof *c);
    if (helper_pid < 0) return;
    c->ran = 1;
    const char go = 'g';
    if (write(cmd_pipe[1], &go, 1) != 1) {
        c->error = 1;
        snprintf(c->err, sizeof c->err, "could not reach the child process");
    }
    close(cmd_pipe[1]);
    cmd_pipe[1] = -1;
    const unsigned long long deadline = now_ns() + (CHILD_ALARM_S + 5) * 1000000000ull;
    char buf[4096];
    size_t len = 0;
    for (;;) {
        const unsigned long long now = now_ns();
        if (now >= deadline) {
            kill(helper_pid, SIGKILL);
            c->killed = 1;
            break;
        }
        struct pollfd p = {res_pipe[0], POLLIN, 0};
        int pr = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        ssize_t n = read(res_pipe[0], buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* EOF: the child has ended */
        len += (size_t)n;
        buf[len] = 0;
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = 0;
            child_parse(c, buf);
            const size_t used = (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len - used + 1);
            len -= used;
        }
        if (len == sizeof buf - 1) len = 0; /* an overlong line: drop it */
    }
    close(res_pipe[0]);
    res_pipe[0] = -1;
    /* reap it, without waiting forever for a process stuck in the driver */
    int status = 0;
    const unsigned long long reap_end = now_ns() + 5000000000ull;
    for (;;) {
        pid_t w = waitpid(helper_pid, &status, WNOHANG);
        if (w == helper_pid) {
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) c->alarm = 1;
            if (WIFEXITED(status)) c->exit_status = WEXITSTATUS(status);
            if (WIFSIGNALED(status) && WTERMSIG(status) != SIGALRM && WTERMSIG(status) != SIGKILL)
                c->exit_status = 128 + WTERMSIG(status);
            break;
        }
        if (w < 0 || now_ns() > reap_end) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    helper_pid = -1;
}

/* ---- h): the loop in a partition, the hog in the rest ---------------------------- */

typedef struct part_result {
    int ran;
    char skip[512];
    unsigned small_sms, left_sms, hog_blocks;
    variant un, lo;
    double ratio, td_ms;
    cw_status td;
    unsigned long long hog_launches;
    uint64_t iter_median_un, iter_median_lo;
} part_result;

static void run_partition(part_result *pr, const cw_device_info *info, size_t iters) {
    memset(pr, 0, sizeof *pr);
    cw_partition_group *set = NULL;
    if (!bench_partition_split(info, SMALL_SMS, &set, pr->skip, sizeof pr->skip)) return;
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
    pr->small_sms = pinfo.sm_count;
    pr->left_sms = linfo.sm_count;

    kset kg, kl;
    kset_load(&kg, "small partition", part);
    kset_load(&kl, "leftover partition", left);
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(kl.cu));
    pr->hog_blocks = (unsigned)hog_blocks_per_sm(kl.f_hog) * linfo.sm_count;
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    cw_stream *hs = NULL;
    CW_CHECK(cw_stream_create(&hs, left, NULL));
    cw_resident *r = NULL;
    cw_status st = loop_make(&r, &kg, W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0); /* as a) */
    if (st == CW_ERROR_NOT_SUPPORTED) {
        snprintf(pr->skip, sizeof pr->skip, "cw_resident_create on a partition: %s", cw_last_error()->message);
    } else {
        CW_CHECK(st);
        pr->ran = 1;
        variant_init(&pr->un, "h) partition, unloaded", T_LOOP, 0, iters);
        variant_init(&pr->lo, "h) partition, hog in the leftover", T_LOOP, 0, iters);
        CW_CHECK(cw_resident_launch(r));
        hog hg;
        const size_t warm = WARMUP / (2 * LOAD_PAIRS);
        for (int p = 0; p < LOAD_PAIRS; p++) {
            const size_t rounds = iters / LOAD_PAIRS + ((size_t)p < iters % LOAD_PAIRS ? 1 : 0);
            for (int loaded = 0; loaded < 2; loaded++) {
                variant *v = loaded ? &pr->lo : &pr->un;
                if (loaded) hog_start(&hg, &kl, hs, pr->hog_blocks);
                for (size_t i = 0; i < warm + rounds; i++) {
                    const double us = rt_loop(r, STALL_NS, v->label, 1);
                    if (us < 0) {
                        fprintf(stderr, "%s: %s: the result did not come within %.0f s\n", BENCH_NAME, v->label,
                                STALL_NS / 1e9);
                        exit(1);
                    }
                    if (i >= warm && v->n < v->cap) v->t[v->n++] = us;
                }
                cw_resident_info s;
                CW_CHECK(cw_resident_get_info(r, &s));
                if (loaded)
                    pr->iter_median_lo = s.iter_median_ns;
                else
                    pr->iter_median_un = s.iter_median_ns;
                /* the last loaded block ends with the tear-down, the hog still running */
                if (loaded && p < LOAD_PAIRS - 1) pr->hog_launches += hog_stop(&hg);
            }
        }
        pr->td = tear_down_timed(r, &pr->td_ms);
        pr->hog_launches += hog_stop(&hg);
        if (pr->td != CW_SUCCESS) {
            fprintf(stderr, "%s: h) cw_resident_tear_down(r, %d) under load returned %s (%s)\n", BENCH_NAME,
                    TEARDOWN_MS, cw_status_name(pr->td), cw_last_error()->message);
            pr->td = cw_resident_tear_down(r, 5000);
            if (pr->td != CW_SUCCESS) exit(1);
            pr->td = CW_ERROR_TIMEOUT; /* report the first answer */
        }
        variant_done(&pr->un);
        variant_done(&pr->lo);
        pr->ratio = pr->lo.st.p99 / pr->un.st.p99;
    }
    cw_resident_destroy(&r);
    cw_stream_destroy(&hs);
    kset_unload(&kg);
    kset_unload(&kl);
    cw_partition_group_destroy(&set);
}

/* ---- output ------------------------------------------------------------------------ */

static void row(const char *label, const stats *s, const char *ref) {
    printf("  %-44s %8.2f %8.2f %8.2f %8.2f   %s\n", label, s->p50, s->p99, s->p999, s->max, ref);
}

static void md_row(const char *label, const stats *s, const char *ref) {
    printf("| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", label, s->p50, s->p99, s->p999, s->max, ref);
}

static void loop_facts(const family *f) {
    printf("  %-38s launch %.2f ms first, %.2f ms at most later; tear-down %.3f ms at most; "
           "GPU iteration (get_stats) min/median/max %.2f/%.2f/%.2f us over %llu iterations\n",
           f->label, f->first_launch_ms, f->relaunch_ms_max, f->teardown_ms_max, f->last.iter_min_ns / 1e3,
           f->last.iter_median_ns / 1e3, f->last.iter_max_ns / 1e3, (unsigned long long)f->last.iterations);
}

int main(void) {
    const char *env = getenv("BENCH_ITERS");
    size_t iters = env && atol(env) > 0 ? (size_t)atol(env) : DEFAULT_ITERS;
    if (iters < 10) iters = 10;
    const size_t sleep_iters = iters < SLEEP_ITERS ? iters : SLEEP_ITERS;

    /* i)'s child first, before anything initialises the driver (or prints) */
    if (pipe(cmd_pipe) == 0 && pipe(res_pipe) == 0) {
        helper_pid = fork();
        if (helper_pid == 0) helper_main(iters);
        if (helper_pid > 0) {
            close(cmd_pipe[0]);
            close(res_pipe[1]);
            signal(SIGPIPE, SIG_IGN);
        }
    }

    printf("bench_resident: the host round trip of a GPU-resident loop (cw_resident) against the raw driver\n"
           "  one round trip: store v to mapped pinned `in`, request, see the result; out == (v+1)*3+7 checked\n"
           "  workload: load(in, buf) -> mul(buf) -> store(buf, out), one thread each (cw_op_*; cw_gop_* start with\n"
           "            `if (cw_resident_skip(ctl)) return;`)\n"
           "  a) cw resident, back-to-back: gate kernels (no IF node), cw_resident_set_workload_fn launching\n"
           "     cw_gop_* into the iteration (no child graph node), overlap (compute capability 9.0+), unroll 16,\n"
           "     spin, sync_with_host\n"
           "  b) cw resident, already polling (host idle 30 us before each request, not counted)\n"
           "  c) raw graph relaunch: cuGraphLaunch + cuStreamSynchronize\n"
           "  d) raw direct: 3 x cuLaunchKernel + cuStreamSynchronize\n"
           "  e) persistent polling kernel (the floor), back-to-back and already polling\n"
           "  f) structure sweep: f1 = a/b; f0 f1 without overlap; f2 unroll 1; f3 IF node + inline fn; f4 IF node + child graph;\n"
           "     f5 IF node, no workload; f6 f3 with trace\n"
           "  g) idle settings, 1-1.5 ms gaps   h) loop in a %d-SM partition, hog in the rest   i) loop and hog\n"
           "  both on the primary context, in a child process with alarm(%d); g)-i) configured as a)\n"
           "  method: %zu round trips per variant after %d warm-up ones, in %d blocks; a family of methods owns\n"
           "          the GPU for a block (variants alternating in a random order), families in a random order\n"
           "          per block (fixed seed); g) %zu round trips after %d; times in microseconds\n",
           SMALL_SMS, CHILD_ALARM_S, iters, WARMUP, BLOCKS, sleep_iters, SLEEP_WARMUP);
    fflush(stdout);

    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;
    if (!info.can_map_host_memory) {
        fprintf(stderr, "%s: device 0 cannot map host memory\n", BENCH_NAME);
        return 1;
    }
    cw_context *ctx = NULL;
    CUcontext cuctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cuctx = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cuctx));
    int cc_major = 0;
    CU_CHECK(rc.cuDeviceGetAttribute(&cc_major, 75 /* COMPUTE_CAPABILITY_MAJOR */, 0));
    g_overlap = cc_major >= 9;
    printf("device 0: %s, %d SMs, compute capability %d, driver %d.%d, commit %s, %s; overlap %s\n", info.name,
           info.sm_count, cc_major, drv / 1000, drv % 1000 / 10, commit, date, g_overlap ? "on" : "off (needs 9.0)");
    fflush(stdout);

    host_alloc();
    kset_load(&kp, "primary", ctx);
    CU_CHECK(rc.cuStreamCreateWithPriority(&raw_s, 1 /* CU_STREAM_NON_BLOCKING */, 0));
    CU_CHECK(rc.cuStreamCreateWithPriority(&pers_s, 1, 0));
    void *raw_graph = NULL;
    CU_CHECK(rc.cuStreamBeginCapture(raw_s, 0 /* GLOBAL */));
    launch_ops(&kp, raw_s);
    CU_CHECK(rc.cuStreamEndCapture(raw_s, &raw_graph));
    CU_CHECK(rc.cuGraphInstantiateWithFlags(&raw_exec, raw_graph, 0));
    CU_CHECK(rc.cuGraphUpload(raw_exec, raw_s));
    CU_CHECK(rc.cuStreamSynchronize(raw_s));

    /* the loops: a)/b) (= f1) and the rest of the sweep, then g)'s idle settings */
    enum { L_A, L_F0, L_F2, L_F3, L_F4, L_F5, L_F6, L_SPIN, L_ADAPT, L_F500, L_F100, L_N1, L_N2, L_N3, L_COUNT };
    static const struct {
        const char *label;
        wkind w;
        uint32_t unroll;
        cw_resident_sleep mode;
        uint32_t sleep_us, spin_us, trace;
    } lcfg[L_COUNT] = {
        {"f1 gate kernels, fn, unroll 16 (a, b)", W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f0 gate kernels, fn, unroll 16, no overlap", W_GUARDED_FN_PLAIN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f2 gate kernels, fn, unroll 1", W_GUARDED_FN, 1, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f3 IF node, fn, unroll 16", W_PLAIN_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f4 IF node, child graph, unroll 16", W_GRAPH, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f5 IF node, no workload, unroll 16", W_NONE, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"f6 IF node, fn, unroll 16, trace", W_PLAIN_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 1},
        {"spin (sleep_interval_us 0)", W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"ADAPTIVE 500 us, spin_us 200", W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_ADAPTIVE, 500, 200, 0},
        {"FIXED 500 us", W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 500, 0, 0},
        {"FIXED 100 us", W_GUARDED_FN, 16, CW_RESIDENT_SLEEP_FIXED, 100, 0, 0},
        {"n1 defaults, graph (the minimal program)", W_DEFAULT_GRAPH, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"n2 defaults, fn", W_DEFAULT_FN, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
        {"n3 gate BEGIN_END, fn, unroll 16", W_BEGIN_END, 16, CW_RESIDENT_SLEEP_FIXED, 0, 0, 0},
    };
    cw_resident *loops[L_COUNT] = {0};
    for (int i = 0; i < L_COUNT; i++) {
        cw_status st = loop_make(&loops[i], &kp, lcfg[i].w, lcfg[i].unroll, lcfg[i].mode, lcfg[i].sleep_us,
                                 lcfg[i].spin_us, lcfg[i].trace);
        if (st == CW_ERROR_NOT_SUPPORTED) {
            printf("SKIP: the resident loop is not supported here: %s\n", cw_last_error()->message);
            return 77;
        }
        CW_CHECK(st);
    }

    enum {
        V_A, V_B, V_C, V_D, V_E_B2B, V_E_POLL, V_F0_B2B, V_F0_POLL, V_F2_B2B, V_F2_POLL, V_F3_B2B, V_F3_POLL, V_F4_B2B, V_F4_POLL,
        V_F5_B2B, V_F5_POLL, V_F6_B2B, V_F6_POLL, V_SPIN, V_ADAPT, V_F500, V_F100, V_N1_B2B, V_N1_POLL, V_N2_B2B,
        V_N2_POLL, V_N3_B2B, V_N3_POLL, V_COUNT
    };
    variant v[V_COUNT];
    variant_init(&v[V_A], "a) cw resident, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_B], "b) cw resident, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_C], "c) raw graph relaunch + sync", T_RAW_GRAPH, 0, iters);
    variant_init(&v[V_D], "d) raw direct, 3 launches + sync", T_RAW_DIRECT, 0, iters);
    variant_init(&v[V_E_B2B], "e) persistent kernel, back-to-back", T_PERS, 0, iters);
    variant_init(&v[V_E_POLL], "e) persistent kernel, already polling", T_PERS, POLL_GAP_NS, iters);
    variant_init(&v[V_F0_B2B], "f0) gate kernels, no overlap, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F0_POLL], "f0) gate kernels, no overlap, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_F2_B2B], "f2) gate kernels, unroll 1, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F2_POLL], "f2) gate kernels, unroll 1, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_F3_B2B], "f3) IF node, fn, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F3_POLL], "f3) IF node, fn, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_F4_B2B], "f4) IF node, child graph, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F4_POLL], "f4) IF node, child graph, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_F5_B2B], "f5) IF node, no workload, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F5_POLL], "f5) IF node, no workload, already polling", T_LOOP, POLL_GAP_NS, iters);
    v[V_F5_B2B].nocheck = v[V_F5_POLL].nocheck = 1; /* no workload: out is not written */
    variant_init(&v[V_F6_B2B], "f6) IF node, fn, trace, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_F6_POLL], "f6) IF node, fn, trace, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_N1_B2B], "n1) defaults, graph, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_N1_POLL], "n1) defaults, graph, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_N2_B2B], "n2) defaults, fn, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_N2_POLL], "n2) defaults, fn, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_N3_B2B], "n3) gate BEGIN_END, back-to-back", T_LOOP, 0, iters);
    variant_init(&v[V_N3_POLL], "n3) gate BEGIN_END, already polling", T_LOOP, POLL_GAP_NS, iters);
    variant_init(&v[V_SPIN], "g) spin", T_LOOP, SLEEP_GAP_NS, sleep_iters);
    variant_init(&v[V_ADAPT], "g) ADAPTIVE", T_LOOP, SLEEP_GAP_NS, sleep_iters);
    variant_init(&v[V_F500], "g) FIXED 500", T_LOOP, SLEEP_GAP_NS, sleep_iters);
    variant_init(&v[V_F100], "g) FIXED 100", T_LOOP, SLEEP_GAP_NS, sleep_iters);
    /* The loop's sleep cycle restarts with each served request, so a gap of
     * exactly 1 ms would put every request at the same phase of a FIXED
     * 500 us or 100 us cycle (1 ms is a multiple of both) and measure that
     * phase, not the setting: the gap is 1 ms plus a random 0-500 us. */
    for (int i = V_SPIN; i <= V_F100; i++) v[i].jitter_ns = SLEEP_JITTER_NS;

    family f_a, f_f0, f_raw, f_pers, f_f2, f_f3, f_f4, f_f5, f_f6, f_spin, f_adapt, f_f500, f_f100, f_n1, f_n2, f_n3;
    family_init(&f_n1, lcfg[L_N1].label, T_LOOP, loops[L_N1], &v[V_N1_B2B], &v[V_N1_POLL]);
    family_init(&f_n2, lcfg[L_N2].label, T_LOOP, loops[L_N2], &v[V_N2_B2B], &v[V_N2_POLL]);
    family_init(&f_n3, lcfg[L_N3].label, T_LOOP, loops[L_N3], &v[V_N3_B2B], &v[V_N3_POLL]);
    family_init(&f_a, lcfg[L_A].label, T_LOOP, loops[L_A], &v[V_A], &v[V_B]);
    family_init(&f_raw, "raw", T_RAW_GRAPH, NULL, &v[V_C], &v[V_D]);
    family_init(&f_pers, "persistent", T_PERS, NULL, &v[V_E_B2B], &v[V_E_POLL]);
    family_init(&f_f0, lcfg[L_F0].label, T_LOOP, loops[L_F0], &v[V_F0_B2B], &v[V_F0_POLL]);
    family_init(&f_f2, lcfg[L_F2].label, T_LOOP, loops[L_F2], &v[V_F2_B2B], &v[V_F2_POLL]);
    family_init(&f_f3, lcfg[L_F3].label, T_LOOP, loops[L_F3], &v[V_F3_B2B], &v[V_F3_POLL]);
    family_init(&f_f4, lcfg[L_F4].label, T_LOOP, loops[L_F4], &v[V_F4_B2B], &v[V_F4_POLL]);
    family_init(&f_f5, lcfg[L_F5].label, T_LOOP, loops[L_F5], &v[V_F5_B2B], &v[V_F5_POLL]);
    family_init(&f_f6, lcfg[L_F6].label, T_LOOP, loops[L_F6], &v[V_F6_B2B], &v[V_F6_POLL]);
    family_init(&f_spin, lcfg[L_SPIN].label, T_LOOP, loops[L_SPIN], &v[V_SPIN], NULL);
    family_init(&f_adapt, lcfg[L_ADAPT].label, T_LOOP, loops[L_ADAPT], &v[V_ADAPT], NULL);
    family_init(&f_f500, lcfg[L_F500].label, T_LOOP, loops[L_F500], &v[V_F500], NULL);
    family_init(&f_f100, lcfg[L_F100].label, T_LOOP, loops[L_F100], &v[V_F100], NULL);

    unsigned long long t_sec = now_ns();
    printf("measuring a)-f) ...\n");
    fflush(stdout);
    family *main_fams[] = {&f_a, &f_f0, &f_raw, &f_pers, &f_f2, &f_f3, &f_f4, &f_f5, &f_f6, &f_n1, &f_n2, &f_n3};
    run_blocks(main_fams, 12, BLOCKS, WARMUP, iters);
    printf("  done in %.1f s\nmeasuring g) ...\n", (double)(now_ns() - t_sec) / 1e9);
    fflush(stdout);
    t_sec = now_ns();
    family *sleep_fams[] = {&f_spin, &f_adapt, &f_f500, &f_f100};
    run_blocks(sleep_fams, 4, SLEEP_BLOCKS, SLEEP_WARMUP, sleep_iters);
    for (int i = 0; i < V_COUNT; i++) variant_done(&v[i]);
    /* what the n) builds chose, in words (the loop owns the text: copied before the loops go) */
    char n1_note[256] = "", n3_note[256] = "";
    {
        cw_resident_info ni;
        CW_CHECK(cw_resident_get_info(loops[L_N1], &ni));
        snprintf(n1_note, sizeof n1_note, "%s", ni.fallback_detail ? ni.fallback_detail : "");
        CW_CHECK(cw_resident_get_info(loops[L_N3], &ni));
        snprintf(n3_note, sizeof n3_note, "%s", ni.fallback_detail ? ni.fallback_detail : "");
    }
    printf("  done in %.1f s\nmeasuring h) ...\n", (double)(now_ns() - t_sec) / 1e9);
    fflush(stdout);

    /* the primary context's loops are all torn down; destroy them before h) and i) */
    for (int i = 0; i < L_COUNT; i++) cw_resident_destroy(&loops[i]);

    t_sec = now_ns();
    part_result pr;
    run_partition(&pr, &info, iters);
    if (pr.ran)
        printf("  done in %.1f s\nmeasuring i) (child process, at most %d s) ...\n", (double)(now_ns() - t_sec) / 1e9,
               CHILD_ALARM_S);
    else
        printf("  h) skipped: %s\nmeasuring i) (child process, at most %d s) ...\n", pr.skip, CHILD_ALARM_S);
    fflush(stdout);
    t_sec = now_ns();
    child_result cr;
    run_child(&cr);
    printf("  done in %.1f s\n", (double)(now_ns() - t_sec) / 1e9);

    /* ---- the tables ---- */
    int failed = 0;
    printf("\nresults (microseconds per round trip; reference: the issue's plain driver harness on an H100)\n");
    printf("  %-44s %8s %8s %8s %8s   %s\n", "method", "p50", "p99", "p99.9", "max", "reference");
    row(v[V_A].label, &v[V_A].st, "WHILE loop of poll/work/signal kernels 8.5-9.3 p50");
    row(v[V_B].label, &v[V_B].st, "WHILE loop 5.6-5.9 p50");
    row(v[V_C].label, &v[V_C].st, "12.1-12.4 p50, p99 16-18");
    row(v[V_D].label, &v[V_D].st, "16-18 p50, p99 25-32");
    row(v[V_E_B2B].label, &v[V_E_B2B].st, "persistent 3.7 p50");
    row(v[V_E_POLL].label, &v[V_E_POLL].st, "");
    printf("\nf) structure sweep (spin, sync_with_host 1; GPU median: cw_resident_get_info iter_median_ns, from the\n"
           "   poll that took the request to the result signal; f5's results are not checked: it has no workload):\n");
    printf("  %-47s %26s   %26s %10s\n", "row", "back-to-back p50/p99/p99.9", "already polling p50/p99/p99.9",
           "GPU median");
    enum { SWEEP_N = 7 };
    const struct {
        const char *what;
        const family *f;
        const variant *b2b, *poll;
    } sweep[SWEEP_N] = {
        {"f1 gate kernels, inline fn, unroll 16 (a, b)", &f_a, &v[V_A], &v[V_B]},
        {"f0 as f1 without overlap", &f_f0, &v[V_F0_B2B], &v[V_F0_POLL]},
        {"f2 gate kernels, inline fn, unroll 1", &f_f2, &v[V_F2_B2B], &v[V_F2_POLL]},
        {"f3 IF node, inline fn (cw_op_*), unroll 16", &f_f3, &v[V_F3_B2B], &v[V_F3_POLL]},
        {"f4 IF node, child graph, unroll 16", &f_f4, &v[V_F4_B2B], &v[V_F4_POLL]},
        {"f5 IF node, no workload, unroll 16", &f_f5, &v[V_F5_B2B], &v[V_F5_POLL]},
        {"f6 f3 with trace (the workload one stage)", &f_f6, &v[V_F6_B2B], &v[V_F6_POLL]},
    };
    double gpu_med[SWEEP_N];
    for (int i = 0; i < SWEEP_N; i++) {
        gpu_med[i] = (double)sweep[i].f->last.iter_median_ns / 1e3;
        printf("  %-47s %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f %10.2f\n", sweep[i].what, sweep[i].b2b->st.p50,
               sweep[i].b2b->st.p99, sweep[i].b2b->st.p999, sweep[i].poll->st.p50, sweep[i].poll->st.p99,
               sweep[i].poll->st.p999, gpu_med[i]);
    }
    /* IF node ~ f3 - f1 and child graph node ~ f4 - f3 on the GPU's median;
     * the loop-back is outside the GPU's poll-to-signal time: f2 - f1 at the
     * back-to-back p50 (f2 pays it every request, f1 one request in 16) */
    const double d_if = gpu_med[3] - gpu_med[1], d_child = gpu_med[4] - gpu_med[3];
    const double d_if_host = v[V_F3_B2B].st.p50 - v[V_F0_B2B].st.p50;
    const double d_overlap = gpu_med[1] - gpu_med[0], d_overlap_host = v[V_F0_B2B].st.p50 - v[V_A].st.p50;
    const double d_child_host = v[V_F4_B2B].st.p50 - v[V_F3_B2B].st.p50;
    const double d_loop = v[V_F2_B2B].st.p50 - v[V_A].st.p50;
    printf("  decomposition: overlap saves ~ %.2f us (f0 - f1, GPU median; %.2f at back-to-back p50), IF node ~ %.2f "
           "us\n  (f3 - f0, GPU median; %.2f at back-to-back p50), child graph node ~ %.2f us (f4 - f3, GPU median; "
           "%.2f at\n  back-to-back p50), loop-back ~ %.2f us (f2 - f1, back-to-back p50); f5 (IF node with no "
           "workload): GPU\n  median %.2f us\n",
           d_overlap, d_overlap_host, d_if, d_if_host, d_child, d_child_host, d_loop, gpu_med[5]);
    printf("  trace (one stage: its two marks an iteration, stored by the poll and the signal) costs ~ %.2f us (f6 - f3, GPU median; %.2f at "
           "back-to-back\n  p50; f6 / f3 back-to-back p50 %.3f)\n",
           gpu_med[6] - gpu_med[3], v[V_F6_B2B].st.p50 - v[V_F3_B2B].st.p50,
           v[V_F6_B2B].st.p50 / v[V_F3_B2B].st.p50);
    printf("\nn) issue 24: the defaults and gate BEGIN_END, in the same blocks as a)-f) (p50/p99/p99.9 us; GPU median;\n"
           "   what the build chose, cw_resident_get_info):\n");
    printf("  %-40s %26s   %26s %10s  %s\n", "row", "back-to-back p50/p99/p99.9", "already polling p50/p99/p99.9",
           "GPU median", "gate/overlap");
    {
        static const char *const gate_names[] = {"NODE", "KERNELS", "AUTO", "FUSED"};
        const struct {
            const char *what;
            const family *f;
            const variant *b2b, *poll;
        } nrows[] = {
            {"a) tuned: gate kernels, fn, overlap", &f_a, &v[V_A], &v[V_B]},
            {"n1 defaults, graph (the minimal program)", &f_n1, &v[V_N1_B2B], &v[V_N1_POLL]},
            {"n2 defaults, fn", &f_n2, &v[V_N2_B2B], &v[V_N2_POLL]},
            {"n3 gate BEGIN_END, fn", &f_n3, &v[V_N3_B2B], &v[V_N3_POLL]},
        };
        for (size_t i = 0; i < sizeof nrows / sizeof nrows[0]; i++) {
            const cw_resident_info *li = &nrows[i].f->last;
            const unsigned g = (unsigned)li->gate < 4 ? (unsigned)li->gate : 2;
            printf("  %-40s %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f %10.2f  %s/%d\n", nrows[i].what, nrows[i].b2b->st.p50,
                   nrows[i].b2b->st.p99, nrows[i].b2b->st.p999, nrows[i].poll->st.p50, nrows[i].poll->st.p99,
                   nrows[i].poll->st.p999, (double)li->iter_median_ns / 1e3, gate_names[g], li->overlap);
        }
        const double raw_p50 = v[V_C].st.p50, raw_p99 = v[V_C].st.p99, pers = v[V_E_B2B].st.p50;
        printf("  ratios (back-to-back): n1/a p50 %.2f p99 %.2f; n1/c p50 %.2f p99 %.2f; n3/a p50 %.2f p99 %.2f;\n"
               "  n3/c p50 %.2f p99 %.2f; n3/e p50 %.2f (e: the persistent kernel, %.2f us)\n",
               v[V_N1_B2B].st.p50 / v[V_A].st.p50, v[V_N1_B2B].st.p99 / v[V_A].st.p99, v[V_N1_B2B].st.p50 / raw_p50,
               v[V_N1_B2B].st.p99 / raw_p99, v[V_N3_B2B].st.p50 / v[V_A].st.p50, v[V_N3_B2B].st.p99 / v[V_A].st.p99,
               v[V_N3_B2B].st.p50 / raw_p50, v[V_N3_B2B].st.p99 / raw_p99, v[V_N3_B2B].st.p50 / pers, pers);
        if (n1_note[0]) printf("  n1 fell back: %s\n", n1_note);
        if (n3_note[0]) printf("  n3: %s\n", n3_note);
    }
    printf("\ng) idle settings (already polling after an idle gap of 1 ms + random 0-500 us; idle polls/s from\n"
           "   cw_resident_get_info):\n");
    printf("  %-32s %8s %8s %8s %8s %14s\n", "setting", "p50", "p99", "p99.9", "max", "idle polls/s");
    family *sf[] = {&f_spin, &f_adapt, &f_f500, &f_f100};
    variant *sv[] = {&v[V_SPIN], &v[V_ADAPT], &v[V_F500], &v[V_F100]};
    double polls_per_s[4];
    for (int i = 0; i < 4; i++) {
        polls_per_s[i] = sf[i]->wall_ns ? (double)sf[i]->idle_polls / ((double)sf[i]->wall_ns / 1e9) : 0.0;
        printf("  %-32s %8.2f %8.2f %8.2f %8.2f %14.0f\n", sf[i]->label, sv[i]->st.p50, sv[i]->st.p99,
               sv[i]->st.p999, sv[i]->st.max, polls_per_s[i]);
    }
    printf("\nloops (launch and tear-down host times; cw_resident_tear_down(r, %d) returned CW_SUCCESS for every "
           "block):\n",
           TEARDOWN_MS);
    family *lf[] = {&f_a, &f_f0, &f_f2, &f_f3, &f_f4, &f_f5, &f_f6, &f_spin, &f_adapt, &f_f500, &f_f100,
                    &f_n1, &f_n2, &f_n3};
    for (int i = 0; i < 14; i++) loop_facts(lf[i]);

    printf("\nh) under load, green partitions (the loop configured as a)):\n");
    if (pr.ran) {
        printf("  loop in a %u-SM partition; hog: %u blocks x %d threads x %lld ms in the leftover (%u SMs), %d in "
               "flight\n",
               pr.small_sms, pr.hog_blocks, HOG_THREADS, HOG_NS / 1000000, pr.left_sms, HOG_DEPTH);
        printf("  %-44s %8s %8s %8s %8s\n", "", "p50", "p99", "p99.9", "max");
        row("unloaded (back-to-back)", &pr.un.st, "");
        row("hog in the leftover partition", &pr.lo.st, "");
        printf("  loaded p99 / unloaded p99: %.2fx; GPU iteration median (get_stats): %.2f us unloaded, %.2f us "
               "loaded;\n  tear-down under load: %s in %.3f ms; %llu hog launches\n",
               pr.ratio, pr.iter_median_un / 1e3, pr.iter_median_lo / 1e3, cw_status_name(pr.td), pr.td_ms,
               pr.hog_launches);
    } else {
        printf("  skipped: %s\n", pr.skip);
    }

    printf("\ni) loop (configured as a)) and hog both on the primary context (child process, alarm(%d)):\n",
           CHILD_ALARM_S);
    char i_text[512];
    if (!cr.ran) {
        snprintf(i_text, sizeof i_text, "not run: the child process could not be made");
    } else if (cr.error) {
        snprintf(i_text, sizeof i_text, "failed in the child: %s", cr.err);
        failed = 1;
    } else if (!cr.got_r) {
        snprintf(i_text, sizeof i_text, "did not finish in %d s%s", CHILD_ALARM_S,
                 cr.got_u ? " (the unloaded part did)" : "");
        if (!cr.alarm && !cr.killed && cr.exit_status) {
            snprintf(i_text, sizeof i_text, "failed in the child (exit status %d, its message is above)",
                     cr.exit_status);
            failed = 1;
        }
    } else {
        char tail[200] = "";
        if (cr.n < cr.target)
            snprintf(tail, sizeof tail, " (%s after %zu of %zu round trips)",
                     cr.stalled ? "stalled: a request was still not served 2 s after the 20 s budget"
                                : "stopped at the 20 s budget",
                     cr.n, cr.target);
        if (cr.n > 0)
            snprintf(i_text, sizeof i_text, "loaded p50 %.2f, p99 %.2f, p99.9 %.2f, max %.2f over %zu round trips%s",
                     cr.l[0], cr.l[1], cr.l[2], cr.l[3], cr.n, tail);
        else
            snprintf(i_text, sizeof i_text, "no loaded round trip finished%s", tail);
    }
    if (cr.got_u)
        printf("  unloaded (in the child): p50 %.2f, p99 %.2f, p99.9 %.2f, max %.2f over %zu round trips\n", cr.u[0],
               cr.u[1], cr.u[2], cr.u[3], cr.nu);
    printf("  %s\n", i_text);
    if (cr.got_r && cr.got_u && cr.n > 0) printf("  loaded p99 / unloaded p99: %.1fx\n", cr.l[1] / cr.u[1]);
    char i_td[160];
    if (cr.got_t)
        snprintf(i_td, sizeof i_td, "%s in %.3f ms", cr.td_status, cr.td_ms);
    else if (cr.got_r)
        snprintf(i_td, sizeof i_td, "did not return before the child's %d s were up", CHILD_ALARM_S);
    else
        snprintf(i_td, sizeof i_td, "-");
    printf("  tear-down under load (cw_resident_tear_down(r, %d)): %s", TEARDOWN_MS, i_td);
    if (cr.got_h) printf("; hog %u blocks x %d threads x %lld ms, %llu launches", cr.blocks, HOG_THREADS,
                         HOG_NS / 1000000, cr.hog_launches);
    printf("\n");
    if (cr.mismatches) {
        printf("  %llu of %llu results in the child were wrong\n", cr.mismatches, cr.checked);
        failed = 1;
    }

    printf("\noutput checks: %llu round trips, %llu wrong results\n", checked, mismatches);
    if (mismatches) failed = 1;

    /* ---- targets ---- */
    const double vs_graph50 = v[V_C].st.p50 / v[V_A].st.p50, vs_graph99 = v[V_C].st.p99 / v[V_A].st.p99;
    const int ok_b2b50 = v[V_A].st.p50 <= TARGET_B2B_P50, ok_b2b99 = v[V_A].st.p99 <= TARGET_B2B_P99,
              ok_poll50 = v[V_B].st.p50 <= TARGET_POLL_P50, ok_g50 = vs_graph50 >= TARGET_VS_GRAPH,
              ok_g99 = vs_graph99 >= TARGET_VS_GRAPH, ok_load = pr.ran && pr.ratio <= TARGET_LOADED;
    printf("\ntargets:\n");
    printf("  a) back-to-back p50 <= %.0f us: %.2f: %s\n", TARGET_B2B_P50, v[V_A].st.p50, pass(ok_b2b50));
    printf("  a) back-to-back p99 <= %.0f us: %.2f: %s\n", TARGET_B2B_P99, v[V_A].st.p99, pass(ok_b2b99));
    printf("  b) already polling p50 <= %.0f us: %.2f: %s\n", TARGET_POLL_P50, v[V_B].st.p50, pass(ok_poll50));
    printf("  a) at least %.0fx better than c) raw graph relaunch at p50: %.2fx: %s\n", TARGET_VS_GRAPH, vs_graph50,
           pass(ok_g50));
    printf("  a) at least %.0fx better than c) raw graph relaunch at p99: %.2fx: %s\n", TARGET_VS_GRAPH, vs_graph99,
           pass(ok_g99));
    if (pr.ran)
        printf("  h) loaded p99 within %.0fx of unloaded: %.2fx: %s\n", TARGET_LOADED, pr.ratio, pass(ok_load));
    else
        printf("  h) loaded p99 within %.0fx of unloaded: SKIP (%s)\n", TARGET_LOADED, pr.skip);

    /* ---- the block for docs/benchmarks.md ---- */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("## GPU-resident loop\n\n");
    printf("### Host round trip of a three-operator workload (bench_resident)\n\n");
    printf("%s, %s (%d SMs), driver %d.%d, commit %s. One round trip: the host stores v into mapped pinned\n"
           "memory, makes the request and spins until it sees the result; `out == (v + 1) * 3 + 7` is checked\n"
           "after every round trip with a workload (%llu checked, %llu wrong). Workload load -> mul -> store, one\n"
           "thread each (`cw_op_*`; `cw_gop_*` are the same with `if (cw_resident_skip(ctl)) return;` first).\n"
           "%zu round trips per variant after %d warm-up ones, in %d blocks (each family of methods owns the GPU\n"
           "for a block), microseconds. The loop of a) and b): gated by kernels (`CW_RESIDENT_GATE_KERNELS`, no\n"
           "IF node), the workload enqueued by `cw_resident_set_workload_fn` (`cw_gop_*` in the iteration itself,\n"
           "no child graph node), `overlap` %d, unroll 16, spin (`sleep_interval_us` 0), `sync_with_host` 1.\n"
           "Already polling:\n"
           "the host idles 30 us before each request. Reference: the issue's plain driver harness on an H100.\n\n",
           date, info.name, info.sm_count, drv / 1000, drv % 1000 / 10, commit, checked, mismatches, iters, WARMUP,
           BLOCKS, g_overlap);
    printf("| method | p50 | p99 | p99.9 | max | reference |\n|---|---|---|---|---|---|\n");
    md_row("a) cw resident, back-to-back", &v[V_A].st, "WHILE loop of poll/work/signal kernels 8.5-9.3");
    md_row("b) cw resident, already polling", &v[V_B].st, "WHILE loop 5.6-5.9");
    md_row("c) raw `cuGraphLaunch` + sync", &v[V_C].st, "12.1-12.4 (p99 16-18)");
    md_row("d) raw 3 x `cuLaunchKernel` + sync", &v[V_D].st, "16-18 (p99 25-32)");
    md_row("e) persistent kernel, back-to-back", &v[V_E_B2B].st, "3.7");
    md_row("e) persistent kernel, already polling", &v[V_E_POLL].st, "-");
    printf("\nGPU side of the loop of a) and b) (`cw_resident_get_info`, from the poll that took the request to the\n"
           "result signal): min %.2f, median %.2f, max %.2f us.\n",
           f_a.last.iter_min_ns / 1e3, f_a.last.iter_median_ns / 1e3, f_a.last.iter_max_ns / 1e3);
    printf("\nStructure of the loop (spin, `sync_with_host` 1; GPU median: `cw_resident_get_info` `iter_median_ns`,\n"
           "poll to result signal). \"fn\": `cw_resident_set_workload_fn`, the kernels in the iteration itself;\n"
           "\"child graph\": `cw_resident_set_workload` with the captured `cw_op_*` graph (the general path); f5\n"
           "has no workload (round trip only, not checked).\n\n");
    printf("| row | back-to-back p50 / p99 / p99.9 | already polling p50 / p99 / p99.9 | GPU median |\n"
           "|---|---|---|---|\n");
    for (int i = 0; i < SWEEP_N; i++)
        printf("| %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f |\n", sweep[i].what, sweep[i].b2b->st.p50,
               sweep[i].b2b->st.p99, sweep[i].b2b->st.p999, sweep[i].poll->st.p50, sweep[i].poll->st.p99,
               sweep[i].poll->st.p999, gpu_med[i]);
    printf("\nDecomposition: overlap saves ~ %.2f us (f0 - f1, GPU median; %.2f at back-to-back p50), IF node ~\n"
           "%.2f us (f3 - f0, GPU median; %.2f at back-to-back p50), child graph node ~ %.2f us (f4 - f3, GPU\n"
           "median; %.2f at back-to-back p50), WHILE loop-back ~ %.2f us (f2 - f1, back-to-back p50); an IF node\n"
           "with no workload (f5): GPU median %.2f us.\n",
           d_overlap, d_overlap_host, d_if, d_if_host, d_child, d_child_host, d_loop, gpu_med[5]);
    printf("  trace (one stage: its two marks an iteration, stored by the poll and the signal) costs ~ %.2f us (f6 - f3, GPU median; %.2f at "
           "back-to-back\n  p50; f6 / f3 back-to-back p50 %.3f)\n",
           gpu_med[6] - gpu_med[3], v[V_F6_B2B].st.p50 - v[V_F3_B2B].st.p50,
           v[V_F6_B2B].st.p50 / v[V_F3_B2B].st.p50);
    printf("\nIdle settings (each on a loop configured as a) apart from its sleep settings): already polling after\n"
           "an idle gap of 1 ms plus a random 0-500 us, %zu round trips each; idle polls per second from\n"
           "`cw_resident_get_info` over the variant's wall time.\n\n",
           sleep_iters);
    printf("| idle setting | p50 | p99 | p99.9 | max | idle polls/s |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < 4; i++)
        printf("| %s | %.2f | %.2f | %.2f | %.2f | %.0f |\n", sf[i]->label, sv[i]->st.p50, sv[i]->st.p99,
               sv[i]->st.p999, sv[i]->st.max, polls_per_s[i]);
    if (pr.ran) {
        printf("\nUnder load: the loop (configured as a)) in a %u-SM green partition, `cw_hog` (%u blocks x %d\n"
               "threads x %lld ms, %d in flight) keeping the leftover partition (%u SMs) full; back-to-back.\n\n",
               pr.small_sms, pr.hog_blocks, HOG_THREADS, HOG_NS / 1000000, HOG_DEPTH, pr.left_sms);
        printf("| partition | p50 | p99 | p99.9 | max | |\n|---|---|---|---|---|---|\n");
        md_row("unloaded", &pr.un.st, "-");
        md_row("hog in the leftover", &pr.lo.st, "-");
        printf("\nLoaded p99 / unloaded p99: %.2fx. Tear-down under load: %s in %.3f ms.\n", pr.ratio,
               cw_status_name(pr.td), pr.td_ms);
    } else {
        printf("\nUnder load (green partitions): skipped: %s.\n", pr.skip);
    }
    printf("\nLoop (configured as a)) and hog both on the primary context (child process, alarm(%d)): %s",
           CHILD_ALARM_S, i_text);
    if (cr.got_u) printf("; unloaded p50 %.2f, p99 %.2f", cr.u[0], cr.u[1]);
    printf(". Tear-down: %s.\n", i_td);
    printf("\n| target | measured | result |\n|---|---|---|\n");
    printf("| back-to-back p50 <= %.0f us | %.2f | %s |\n", TARGET_B2B_P50, v[V_A].st.p50, pass(ok_b2b50));
    printf("| back-to-back p99 <= %.0f us | %.2f | %s |\n", TARGET_B2B_P99, v[V_A].st.p99, pass(ok_b2b99));
    printf("| already polling p50 <= %.0f us | %.2f | %s |\n", TARGET_POLL_P50, v[V_B].st.p50, pass(ok_poll50));
    printf("| back-to-back at least %.0fx better than raw graph relaunch, p50 | %.2fx | %s |\n", TARGET_VS_GRAPH,
           vs_graph50, pass(ok_g50));
    printf("| back-to-back at least %.0fx better than raw graph relaunch, p99 | %.2fx | %s |\n", TARGET_VS_GRAPH,
           vs_graph99, pass(ok_g99));
    if (pr.ran)
        printf("| loaded p99 within %.0fx of unloaded (green partition) | %.2fx | %s |\n", TARGET_LOADED, pr.ratio,
               pass(ok_load));
    else
        printf("| loaded p99 within %.0fx of unloaded (green partition) | - | skipped |\n", TARGET_LOADED);
    printf("---- end ----\n");

    /* ---- teardown ---- */
    for (int i = 0; i < V_COUNT; i++) free(v[i].t);
    if (pr.ran) {
        free(pr.un.t);
        free(pr.lo.t);
    }
    CU_CHECK(rc.cuGraphExecDestroy(raw_exec));
    CU_CHECK(rc.cuGraphDestroy(raw_graph));
    CU_CHECK(rc.cuStreamDestroy(raw_s));
    CU_CHECK(rc.cuStreamDestroy(pers_s));
    kset_unload(&kp);
    CU_CHECK(rc.cuCtxSetCurrent(cuctx));
    CU_CHECK(rc.cuMemFreeHost(hm.base));
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    return failed ? 1 : 0;
}
