/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_resident_fused: the host round trip of the resident loop's fused
 * persistent mode (cw_resident_set_fused) against a hand-written
 * persistent kernel of the same shape on the raw driver API and against
 * cuGraphLaunch + cuStreamSynchronize, in one run on device 0, for a
 * 1-block grid and a grid of one block per SM; issue 24's targets are
 * checked at the end (PASS/MISS lines).
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
 * Back-to-back round trips (the next request right after the last result)
 * and, for a) and b) with grid 1, already polling: the host idles (spinning)
 * 30 us or 1 ms before each request. CLOCK_MONOTONIC, microseconds;
 * BENCH_ITERS (default 20000) after 1000 warm-up ones (2000 after 200 with
 * the 1 ms gap).
 *
 *   d) ablation (grid 1): b) with one thing the library's loop did per
 *      iteration added (or one thing b) does taken away), each its own
 *      kernel of the same source (hand_body<F>), back-to-back, so one run
 *      says what each costs: +timer (a globaltimer read and the timeout test
 *      at every doorbell check), +bell16 (doorbell and stop word in one
 *      16-byte load), +state (the poll's bookkeeping in the device block:
 *      stopped and started loaded, started/seq/skip/backoff stored, idle
 *      polls counted), +stats (the signal's statistics as cw__res_signal:
 *      t_start, served, min, max loaded from the device block, ring, min,
 *      max, served, last_done stored), +seqmem (the done value loaded from
 *      the device block after the system fence, as cw__res_signal's
 *      pub.seq), +cas (the host makes the request with a compare-and-swap,
 *      as cw_resident_data_ready), "+bell16, 2 loads in flight" (a second
 *      doorbell load issued half a measured round trip after the first, so
 *      the doorbell is sampled twice per round trip), -cmd (block 0 takes the decision from
 *      shared memory: no store and volatile load of a global word), -bar (no
 *      __syncthreads between the stages); "old loop by hand" has all of
 *      timer, bell16, state, stats, seqmem (the fused loop before
 *      commit 1eb73c8), "new loop by hand" timer, bell16, stats kept in
 *      registers and stored only, -cmd (the fused loop after it). What
 *      still differs between "new loop by hand" and a), one row each:
 *      "+ idle_polls += 1" (a global read-modify-write per empty check, as
 *      a) before it kept the count in a register), "+ a)'s stores at the
 *      take" (pub.seq, started, skip, backoff), "done 64 B after bell"
 *      (cw_res_host's layout: the done word in the doorbell's 128-byte
 *      block), "done in the next 128 B" (the next 64-byte line, another
 *      128-byte block); "a)'s kernel by hand" is a)'s own kernel (the
 *      library's source from cwi_resident_fused_source, compiled as the
 *      library compiles it) launched as b) is, on a cw_res_host of the
 *      bench, with b)'s host side (a store, a spin on the done word), and
 *      with a)'s compare-and-swap: a) minus these rows is the host side
 *      (cw_resident_data_ready / poll_result, the library's allocation,
 *      stream and launch); the host's cost of one cw_resident_poll_result
 *      is printed with d).
 *   e) under load (grid 1): a) in a 16-SM green partition, unloaded and
 *      while cw_hog keeps the leftover partition full (bench_common.h's
 *      bench_hog, as bench_resident h)), back-to-back; skipped, with the
 *      reason, without green contexts.
 *
 * Prints a block for docs/benchmarks.md. About 30 s on an H100.
 */
#define _GNU_SOURCE
#include <stddef.h>

#define BENCH_NAME "bench_resident_fused"
#include "../tests/rawcuda.h"
#include "../tests/kernels/test_kernels_fatbin.h"
#include "bench_common.h"
#include "cuweave/resident_device.h"
#include "../src/testing/seam.h"

#define DEFAULT_ITERS 20000
#define WARMUP 1000
#define BLOCK 128
#define POLL_GAP_NS 30000ull     /* already polling: idle host time before a request */
#define LONG_GAP_NS 1000000ull   /* ... and the long gap */
#define LONG_ITERS 2000          /* round trips with the long gap (and 200 warm-up) */
#define LONG_WARMUP 200
#define STALL_NS 5000000000ull   /* a round trip taking longer fails the run */
#define SMALL_SMS 16             /* e): the loop's partition */
#define HOG_THREADS 256
#define HOG_NS 20000000LL        /* each hog block waits 20 ms */
#define HOG_DEPTH 3              /* hog launches in flight at most */
#define LOAD_PAIRS 2             /* e): unloaded + loaded blocks, twice */
#define API_CALLS 1000000        /* calls of cw_resident_poll_result timed (result ready) */

/* issue 24's targets for the fused mode */
#define TARGET_VS_HAND 1.05      /* back-to-back p50 within 5% of the hand-written kernel */
#define TARGET_B2B_P50 4.2
#define TARGET_POLL_P50 3.3
#define TARGET_P99 6.0
#define TARGET_VS_GRAPH 2.5
#define TARGET_GPU_MEDIAN 1.5
#define TARGET_LOADED 1.5

static rawcuda rc;

/* The stages, for the fused loop (resident_device.h's signature) and, as
 * plain functions, for the hand-written kernel and the graph's kernels. */
static const char kStages[] =
    "extern \"C\" __device__ void st0(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 0, 1u); }\n"
    "extern \"C\" __device__ void st1(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 1, 1u); }\n"
    "extern \"C\" __device__ void st2(cw_resident_ctl *c, void *u) { if (threadIdx.x == 0) atomicAdd((unsigned *)u + 2, 1u); }\n";
static const char *const kStageNames[] = {"st0", "st1", "st2"};

/* The fused loop's description, the same for the library's launch (a) and
 * the hand-compiled copy of its kernel (d): the three stages, one block. */
static void fused_desc(cw_resident_fused *f, cw_devptr user) {
    memset(f, 0, sizeof *f);
    f->source = kStages;
    f->stages = kStageNames;
    f->stage_count = 3;
    f->grid_blocks = 1;
    f->block_threads = BLOCK;
    f->user = user;
}

/* b) and d): the hand-written loop, hand_body<F> with F a set of the
 * library's per-iteration extras (see the comment at the top); hand_f0 is
 * b). -cmd (H_NOCMD) is right for a grid of 1 only. k0-k2: c)'s kernels. */
static const char kHand[] =
    "#define H_TIMER 1u\n"
    "#define H_BELL16 2u\n"
    "#define H_STATE 4u\n"
    "#define H_STATS 8u\n"
    "#define H_SEQMEM 16u\n"
    "#define H_NOCMD 32u\n"
    "#define H_NOBAR 64u\n"
    "#define H_STATSREG 128u\n"
    "#define H_PIPE 256u\n"
    "#define H_IDLERMW 512u\n"
    "#define H_TAKEST 1024u\n"
    "struct hdev {\n"
    "    unsigned long long seq, started, t0, t_start, last_done, served, min_ns, max_ns, idle_polls;\n"
    "    unsigned stopped, skip, backoff, pad;\n"
    "    unsigned ring[4096];\n"
    "};\n"
    "static __device__ __forceinline__ unsigned long long gtimer() {\n"
    "    unsigned long long t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    return t;\n"
    "}\n"
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
    "template <unsigned F>\n"
    "static __device__ __forceinline__ void hand_body(volatile unsigned long long *bell, volatile unsigned *stop,\n"
    "                                                 volatile unsigned long long *done, unsigned *s, unsigned *work,\n"
    "                                                 hdev *d, unsigned long long timeout_ns) {\n"
    "    __shared__ unsigned cmd;\n"
    "    const bool lead = blockIdx.x == 0 && threadIdx.x == 0;\n"
    "    unsigned long long taken = 0, t_start = 0, served = 0, mn = 0, mx = 0;\n"
    "    if (lead && (F & (H_TIMER | H_STATS | H_STATSREG))) d->t0 = gtimer();\n"
    "    if (lead && (F & H_STATSREG)) { served = d->served; mn = d->min_ns; mx = d->max_ns; }\n"
    "    unsigned long long half_rtt = 0, pend_a = 0, pend_b = 0, sink = 0;\n"
    "    if (lead && (F & H_PIPE)) {\n"
    "        /* one doorbell load's round trip, measured */\n"
    "        unsigned long long r0, w0;\n"
    "        const unsigned long long t1 = gtimer();\n"
    "        asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(r0), \"=l\"(w0) : \"l\"(bell) : \"memory\");\n"
    "        sink = r0 ^ w0;\n"
    "        asm volatile(\"\" : \"+l\"(sink));\n"
    "        half_rtt = (gtimer() - t1) / 2u;\n"
    "    }\n"
    "    for (;;) {\n"
    "        if (lead) {\n"
    "            unsigned c = 0u;\n"
    "            unsigned long long started = taken;\n"
    "            if (F & H_STATE) { if (d->stopped) c = 2u; started = d->started; }\n"
    "            if (F & H_PIPE) {\n"
    "                /* two doorbell loads in flight, the second issued half a round trip after the first:\n"
    "                 * the doorbell is sampled twice per round trip. Loads left in flight stay live (sink)\n"
    "                 * until after the result, so nothing on the path waits for them. */\n"
    "                unsigned long long ra, wa, rb, wb;\n"
    "                asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(ra), \"=l\"(wa) : \"l\"(bell) : \"memory\");\n"
    "                const unsigned long long until = gtimer() + half_rtt;\n"
    "                while (gtimer() < until) { }\n"
    "                asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(rb), \"=l\"(wb) : \"l\"(bell) : \"memory\");\n"
    "                for (;;) {\n"
    "                    if ((unsigned)wa) { c = 2u; break; }\n"
    "                    if (ra > started) { c = 1u; break; }\n"
    "                    asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(ra), \"=l\"(wa) : \"l\"(bell) : \"memory\");\n"
    "                    if ((unsigned)wb) { c = 2u; break; }\n"
    "                    if (rb > started) { c = 1u; break; }\n"
    "                    asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(rb), \"=l\"(wb) : \"l\"(bell) : \"memory\");\n"
    "                }\n"
    "                pend_a = ra ^ wa;\n"
    "                pend_b = rb ^ wb;\n"
    "            }\n"
    "            while (c == 0u) {\n"
    "                unsigned long long req;\n"
    "                if (F & H_BELL16) {\n"
    "                    unsigned long long w;\n"
    "                    asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(req), \"=l\"(w) : \"l\"(bell) : \"memory\");\n"
    "                    if ((unsigned)w) { c = 2u; break; }\n"
    "                } else {\n"
    "                    if (*stop) { c = 2u; break; }\n"
    "                    req = *bell;\n"
    "                }\n"
    "                unsigned long long now = 0;\n"
    "                if (F & H_TIMER) {\n"
    "                    now = gtimer();\n"
    "                    if (timeout_ns != 0ull && now - d->t0 >= timeout_ns) { c = 2u; break; }\n"
    "                }\n"
    "                if (req > started) {\n"
    "                    c = 1u;\n"
    "                    if ((F & (H_STATS | H_STATSREG)) && !(F & H_TIMER)) now = gtimer();\n"
    "                    if (F & H_STATS) d->t_start = now;\n"
    "                    if (F & H_STATSREG) t_start = now;\n"
    "                    if (F & (H_STATE | H_SEQMEM)) d->seq = started + 1ull;\n"
    "                    if (F & H_STATE) { d->started = started + 1ull; d->skip = 0u; d->backoff = 0u; }\n"
    "                    if (F & H_TAKEST) { d->seq = started + 1ull; d->started = started + 1ull; d->skip = 0u; d->backoff = 0u; }\n"
    "                    break;\n"
    "                }\n"
    "                if (F & (H_STATE | H_IDLERMW)) d->idle_polls += 1ull;\n"
    "            }\n"
    "            if (F & H_NOCMD) cmd = c;\n"
    "            else *(volatile unsigned *)(s + 2) = c;\n"
    "        }\n"
    "        bar(s);\n"
    "        if (!(F & H_NOCMD)) {\n"
    "            if (threadIdx.x == 0) cmd = *(volatile unsigned *)(s + 2);\n"
    "            __syncthreads();\n"
    "        }\n"
    "        if (cmd == 2u) return;\n"
    "        taken++;\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 0, 1u);\n"
    "        if (!(F & H_NOBAR)) bar(s);\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 1, 1u);\n"
    "        if (!(F & H_NOBAR)) bar(s);\n"
    "        if (threadIdx.x == 0) atomicAdd(work + 2, 1u);\n"
    "        if (!(F & H_NOBAR)) bar(s);\n"
    "        if (lead) {\n"
    "            if (F & H_STATS) {\n"
    "                const unsigned long long now = gtimer();\n"
    "                const unsigned long long dur = now - d->t_start;\n"
    "                const unsigned long long sv = d->served;\n"
    "                d->ring[sv % 4096u] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;\n"
    "                if (sv == 0ull || dur < d->min_ns) d->min_ns = dur;\n"
    "                if (dur > d->max_ns) d->max_ns = dur;\n"
    "                d->served = sv + 1ull;\n"
    "                d->last_done = now;\n"
    "            }\n"
    "            if (F & H_STATSREG) {\n"
    "                const unsigned long long now = gtimer();\n"
    "                const unsigned long long dur = now - t_start;\n"
    "                d->ring[served % 4096u] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;\n"
    "                if (served == 0ull || dur < mn) mn = dur;\n"
    "                if (dur > mx) mx = dur;\n"
    "                served++;\n"
    "                d->min_ns = mn;\n"
    "                d->max_ns = mx;\n"
    "                d->served = served;\n"
    "                d->last_done = now;\n"
    "            }\n"
    "            __threadfence_system();\n"
    "            *done = (F & H_SEQMEM) ? d->seq : taken;\n"
    "            if (F & H_PIPE) { sink ^= pend_a ^ pend_b; if (sink == 1ull) d->pad = 1u; }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "#define HAND(n) extern \"C\" __global__ void hand_f##n(volatile unsigned long long *bell, volatile unsigned *stop, \\\n"
    "    volatile unsigned long long *done, unsigned *s, unsigned *work, hdev *d, unsigned long long timeout_ns) { \\\n"
    "    hand_body<n##u>(bell, stop, done, s, work, d, timeout_ns); }\n"
    "HAND(0) HAND(1) HAND(2) HAND(4) HAND(8) HAND(16) HAND(32) HAND(64) HAND(31) HAND(163) HAND(258) HAND(675) HAND(1187)\n"
    "extern \"C\" {\n"
    "__global__ void k0(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 0, 1u); }\n"
    "__global__ void k1(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 1, 1u); }\n"
    "__global__ void k2(unsigned *w) { if (threadIdx.x == 0) atomicAdd(w + 2, 1u); }\n"
    "}\n";

/* d): the ablation rows. flags: hand_body's F (the kernel hand_f<flags>);
 * bell16: the doorbell layout of H_BELL16 (stop word right after it); cas:
 * the host's request by compare-and-swap. */
#define H_TIMER 1u
#define H_BELL16 2u
#define H_STATE 4u
#define H_STATS 8u
#define H_SEQMEM 16u
#define H_NOCMD 32u
#define H_NOBAR 64u
#define H_STATSREG 128u
#define H_PIPE 256u
#define H_IDLERMW 512u
#define H_TAKEST 1024u
#define H_NEW (H_TIMER | H_BELL16 | H_STATSREG | H_NOCMD)
/* where the host words are (ablation.layout) */
#define L_FLAGS 0   /* b)'s (bell16: +bell16's) */
#define L_RESHOST 1 /* cw_res_host's: done 64 bytes after the doorbell, in its 128-byte block */
#define L_NEXT128 2 /* done in the next 64-byte line, which starts the next 128-byte block */
#define L_LIBK 3    /* a)'s kernel (the library's source, compiled as the library does) on a cw_res_host of the bench */
typedef struct ablation {
    const char *name;
    unsigned flags;
    unsigned long long timeout_ns;
    int cas;
    int layout;
} ablation;
static const ablation kAbl[] = {
    {"b) hand-written (base)", 0, 0, 0, L_FLAGS},
    {"+timer (timeout 0, as a))", H_TIMER, 0, 0, L_FLAGS},
    {"+timer, timeout 60 s", H_TIMER, 60000000000ull, 0, L_FLAGS},
    {"+bell16", H_BELL16, 0, 0, L_FLAGS},
    {"+bell16, 2 loads in flight", H_BELL16 | H_PIPE, 0, 0, L_FLAGS},
    {"+state", H_STATE, 0, 0, L_FLAGS},
    {"+stats", H_STATS, 0, 0, L_FLAGS},
    {"+seqmem", H_SEQMEM, 0, 0, L_FLAGS},
    {"+cas (host)", 0, 0, 1, L_FLAGS},
    {"-cmd", H_NOCMD, 0, 0, L_FLAGS},
    {"-bar", H_NOBAR, 0, 0, L_FLAGS},
    {"old loop by hand", H_TIMER | H_BELL16 | H_STATE | H_STATS | H_SEQMEM, 0, 0, L_FLAGS},
    {"new loop by hand", H_NEW, 0, 0, L_FLAGS},
    {"new + idle_polls += 1 (a) before)", H_NEW | H_IDLERMW, 0, 0, L_FLAGS},
    {"new + a)'s stores at the take", H_NEW | H_TAKEST, 0, 0, L_FLAGS},
    {"new, done 64 B after bell (a)'s)", H_NEW, 0, 0, L_RESHOST},
    {"new, done in the next 128 B", H_NEW, 0, 0, L_NEXT128},
    {"a)'s kernel by hand, b)'s host", 0, 0, 0, L_LIBK},
    {"a)'s kernel by hand, +cas (host)", 0, 0, 1, L_LIBK},
};
#define NABL ((int)(sizeof kAbl / sizeof kAbl[0]))
#define HDEV_BYTES (9 * 8 + 4 * 4 + 4096 * 4)

typedef struct result {
    stats st;
    double mean;
} result;

typedef unsigned long long dptr;

static unsigned long long g_checked, g_wrong;
static uint64_t g_last_seq; /* the last request a) made */

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

static result summarize(double *v, size_t n, const char *label) {
    bench_csv_us(label, v, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    result r;
    r.mean = sum / (double)n;
    r.st = stats_of(v, n);
    return r;
}

static void stop_warn(const char *s) { fprintf(stderr, "%s\n", s); }

static void stalled(const char *what) {
    fprintf(stderr, "%s: %s: the result did not come within %.0f s\n", BENCH_NAME, what, STALL_NS / 1e9);
    exit(1);
}

/* Spins (the CPU stays awake) until CLOCK_MONOTONIC reaches t. */
static void idle_until(unsigned long long t) {
    while (now_ns() < t) {
    }
}

/* One round trip of a fused loop, microseconds. */
static double rt_fused(cw_resident *r, const char *what) {
    const unsigned long long t0 = now_ns();
    uint64_t seq = 0;
    CW_CHECK(cw_resident_data_ready(r, &seq));
    cw_status st;
    unsigned k = 0;
    while ((st = cw_resident_poll_result(r, seq)) == CW_ERROR_NOT_READY)
        if ((++k & 4095u) == 0 && now_ns() - t0 > STALL_NS) stalled(what);
    CW_CHECK(st);
    g_last_seq = seq;
    return (now_ns() - t0) / 1e3;
}

/* n round trips of a fused loop after `warm`, each after `gap_ns` of idling. */
static result run_fused(cw_resident *r, double *v, size_t warm, size_t n, unsigned long long gap_ns,
                        const char *what) {
    for (size_t i = 0; i < warm + n; i++) {
        if (gap_ns) idle_until(now_ns() + gap_ns);
        const double us = rt_fused(r, what);
        if (i >= warm) v[i - warm] = us;
    }
    return summarize(v, n, what);
}

/* The hand-written kernels' host side: the doorbell, stop and done words. */
typedef struct hand_words {
    volatile unsigned long long *bell, *done;
    volatile unsigned *stop;
    dptr d_bell, d_stop, d_done;
    unsigned long long made;
} hand_words;

static double rt_hand(hand_words *w, int cas, const char *what) {
    const unsigned long long t0 = now_ns();
    const unsigned long long n = ++w->made;
    if (cas) {
        unsigned long long cur = __atomic_load_n((unsigned long long *)w->bell, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n((unsigned long long *)w->bell, &cur, cur + 1, 1, __ATOMIC_SEQ_CST,
                                            __ATOMIC_RELAXED)) {
        }
    } else {
        __atomic_store_n((unsigned long long *)w->bell, n, __ATOMIC_RELEASE);
    }
    unsigned k = 0;
    while (__atomic_load_n((unsigned long long *)w->done, __ATOMIC_ACQUIRE) < n)
        if ((++k & 4095u) == 0 && now_ns() - t0 > STALL_NS) stalled(what);
    return (now_ns() - t0) / 1e3;
}

static result run_hand(hand_words *w, int cas, double *v, size_t warm, size_t n, unsigned long long gap_ns,
                       const char *what) {
    for (size_t i = 0; i < warm + n; i++) {
        if (gap_ns) idle_until(now_ns() + gap_ns);
        const double us = rt_hand(w, cas, what);
        if (i >= warm) v[i - warm] = us;
    }
    return summarize(v, n, what);
}

/* Launches a hand-written kernel cooperatively with its words cleared. */
static void hand_launch(void *fn, hand_words *w, unsigned grid, dptr sync, dptr work, dptr devblk,
                        unsigned long long timeout_ns, CUstream hs) {
    *w->bell = 0;
    *w->stop = 0;
    *w->done = 0;
    w->made = 0;
    CU_CHECK(rc.cuMemsetD32(sync, 0, 16));
    CU_CHECK(rc.cuMemsetD32(devblk, 0, HDEV_BYTES / 4));
    void *hargs[] = {&w->d_bell, &w->d_stop, &w->d_done, &sync, &work, &devblk, &timeout_ns};
    CU_CHECK(rc.cuLaunchCooperativeKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, hs, hargs));
}

/* Launches a)'s kernel (cwf_resident_loop, compiled from the library's
 * source) the way b) is launched, on the bench's cw_res_host (the
 * library's allocation flags) and device block, with the arguments
 * fused_start passes for a)'s settings: no timeout, spin (sleep 0), the
 * default spin_us and sleep mode, sync_with_host. */
static void lib_launch(void *fn, hand_words *w, cw_res_host *h, dptr h_dev, dptr sync, dptr work, dptr ldev,
                       unsigned spin_ns, unsigned flags, CUstream hs) {
    memset(h, 0, sizeof *h);
    h->epoch = 1;
    w->made = 0;
    CU_CHECK(rc.cuMemsetD32(sync, 0, 64));
    CU_CHECK(rc.cuMemsetD32(ldev, 0, sizeof(cw_res_dev) / 4));
    unsigned long long timeout_ns = 0;
    unsigned sleep_ns = 0;
    void *args[] = {&h_dev, &ldev, &sync, &work, &timeout_ns, &sleep_ns, &spin_ns, &flags};
    CU_CHECK(rc.cuLaunchCooperativeKernel(fn, 1, 1, 1, BLOCK, 1, 1, 0, hs, args));
}

static void hand_stop(hand_words *w, CUstream hs, const char *what) {
    __atomic_store_n((unsigned *)w->stop, 1u, __ATOMIC_RELEASE);
    if (rc.cuStreamSynchronize(hs) != 0) {
        char m[256];
        snprintf(m, sizeof m, "%s: the hand-written kernel's stream reported an error", what);
        stop_warn(m);
    }
}

/* ---- e): the fused loop in a partition, the hog in the rest ---------------------- */

typedef struct part_result {
    int ran;
    char skip[512];
    unsigned small_sms, left_sms, hog_blocks;
    result un, lo;
    double ratio, td_ms;
    cw_status td;
    unsigned long long hog_launches;
    uint64_t median_un, median_lo;
} part_result;

static void run_partition(part_result *pr, const cw_device_info *info, size_t iters) {
    memset(pr, 0, sizeof *pr);
    cw_partition_group *set = NULL;
    if (!bench_partition_split(info, SMALL_SMS, &set, pr->skip, sizeof pr->skip)) return;
    cw_partition_group_info ginfo;
    cw_partition_info pinfo, linfo;
    CW_CHECK(cw_partition_group_get_info(set, &ginfo));
    CW_CHECK(cw_partition_group_get_partition(set, 0, &pinfo));
    CW_CHECK(cw_partition_group_get_partition(set, ginfo.default_index, &linfo));
    cw_context *part = pinfo.context, *left = linfo.context;
    pr->small_sms = pinfo.sm_count;
    pr->left_sms = linfo.sm_count;
    const CUcontext part_cu = bench_cu_context(part), left_cu = bench_cu_context(left);

    /* the loop's counters in the partition's context, the hog in the leftover's */
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    dptr work = 0, sink = 0;
    CU_CHECK(rc.cuCtxSetCurrent(part_cu));
    CU_CHECK(rc.cuMemAlloc(&work, 64));
    CU_CHECK(rc.cuMemsetD32(work, 0, 16));
    CU_CHECK(rc.cuCtxSetCurrent(left_cu));
    void *hog_mod = NULL, *f_hog = NULL;
    CU_CHECK(rawcuda_kernel(&rc, &hog_mod, cw_test_kernels_fatbin, "cw_hog", &f_hog));
    CU_CHECK(rc.cuMemAlloc(&sink, 64));
    CU_CHECK(rc.cuMemsetD32(sink, 0, 16));
    pr->hog_blocks = (unsigned)bench_hog_blocks_per_sm(&rc, f_hog, HOG_THREADS) * linfo.sm_count;
    CU_CHECK(rc.cuCtxSynchronize());
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    cw_stream *hs = NULL;
    CW_CHECK(cw_stream_create(&hs, left, NULL));

    cw_resident *r = NULL;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = 0;
    s.sync_with_host = 1;
    cw_status st = cw_resident_create(&r, part, &s);
    if (st == CW_SUCCESS) {
        cw_resident_fused f;
        fused_desc(&f, work);
        st = cw_resident_set_fused(r, &f);
        if (st == CW_SUCCESS) st = cw_resident_build(r);
    }
    if (st == CW_ERROR_NOT_SUPPORTED) {
        snprintf(pr->skip, sizeof pr->skip, "a fused loop on a partition: %s", cw_last_error()->message);
    } else {
        CW_CHECK(st);
        pr->ran = 1;
        const size_t warm = WARMUP / 2, rounds = iters / LOAD_PAIRS;
        double *lo = malloc(sizeof(double) * rounds * LOAD_PAIRS), *un = malloc(sizeof(double) * rounds * LOAD_PAIRS);
        if (!lo || !un) {
            fprintf(stderr, "%s: out of host memory\n", BENCH_NAME);
            exit(1);
        }
        size_t nlo = 0, nun = 0;
        CW_CHECK(cw_resident_launch(r));
        bench_hog hg;
        for (int p = 0; p < LOAD_PAIRS; p++) {
            for (int loaded = 0; loaded < 2; loaded++) {
                if (loaded)
                    bench_hog_start(&hg, &rc, left_cu, f_hog, sink, bench_cu_stream(hs), pr->hog_blocks, HOG_THREADS,
                                    HOG_NS, HOG_DEPTH);
                for (size_t i = 0; i < warm + rounds; i++) {
                    const double us = rt_fused(r, loaded ? "e) partition, hog in the leftover" : "e) partition");
                    if (i < warm) continue;
                    if (loaded)
                        lo[nlo++] = us;
                    else
                        un[nun++] = us;
                }
                cw_resident_info ri;
                CW_CHECK(cw_resident_get_info(r, &ri));
                if (loaded)
                    pr->median_lo = ri.iter_median_ns;
                else
                    pr->median_un = ri.iter_median_ns;
                /* the last loaded block ends with the tear-down, the hog still running */
                if (loaded && p < LOAD_PAIRS - 1) pr->hog_launches += bench_hog_stop(&hg);
            }
        }
        const unsigned long long t0 = now_ns();
        pr->td = cw_resident_tear_down(r, 1000);
        pr->td_ms = (now_ns() - t0) / 1e6;
        pr->hog_launches += bench_hog_stop(&hg);
        if (pr->td != CW_SUCCESS) {
            fprintf(stderr, "%s: e) cw_resident_tear_down(r, 1000) under load returned %s (%s)\n", BENCH_NAME,
                    cw_status_name(pr->td), cw_last_error()->message);
            if (cw_resident_tear_down(r, 5000) != CW_SUCCESS) exit(1);
        }
        pr->un = summarize(un, nun, "e) partition, unloaded");
        pr->lo = summarize(lo, nlo, "e) partition, hog in the leftover");
        pr->ratio = pr->lo.st.p99 / pr->un.st.p99;
        free(lo);
        free(un);
        CU_CHECK(rc.cuCtxSetCurrent(part_cu));
        check_counts(work, (unsigned long long)(warm + rounds) * 2 * LOAD_PAIRS, "e) fused loop in a partition");
        CU_CHECK(rc.cuCtxSetCurrent(left_cu));
        CU_CHECK(rc.cuCtxSynchronize());
        unsigned long long hog = 0;
        CU_CHECK(rc.cuMemcpyDtoH(&hog, sink, sizeof hog));
        g_checked++;
        if (hog != pr->hog_launches) {
            g_wrong++;
            fprintf(stderr, "%s: e) %llu of %llu hog launches counted on the GPU\n", BENCH_NAME, hog,
                    pr->hog_launches);
        }
        CU_CHECK(rc.cuCtxSetCurrent(prev));
    }
    cw_resident_destroy(&r);
    cw_stream_destroy(&hs);
    CU_CHECK(rc.cuCtxSetCurrent(part_cu));
    CU_CHECK(rc.cuMemFree(work));
    CU_CHECK(rc.cuCtxSetCurrent(left_cu));
    CU_CHECK(rc.cuMemFree(sink));
    CU_CHECK(rc.cuModuleUnload(hog_mod));
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    cw_partition_group_destroy(&set);
}


static void target(const char *what, double got, const char *op, double want, int ok, const char *unit) {
    printf("  %-66s %8.2f%s (%s %.2f%s)  %s\n", what, got, unit, op, want, unit, pass(ok));
}

int main(void) {
    const char *env = getenv("BENCH_ITERS");
    size_t iters = env && atol(env) > 0 ? (size_t)atol(env) : DEFAULT_ITERS;
    const size_t long_iters = iters < LONG_ITERS ? iters : LONG_ITERS;
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

    /* b), c), d): compiled with NVRTC (through cuweave's cache), loaded raw */
    cw_program *prog = NULL;
    CW_CHECK(cw_program_compile(&prog, ctx, kHand, NULL));
    cw_program_info pi;
    CW_CHECK(cw_program_get_info(prog, &pi));
    void *mod = NULL, *f_k[3] = {NULL, NULL, NULL}, *f_abl[NABL];
    CU_CHECK(rc.cuModuleLoadData(&mod, pi.code));
    for (int a = 0; a < NABL; a++) {
        char name[32];
        snprintf(name, sizeof name, "hand_f%u", kAbl[a].flags);
        f_abl[a] = NULL;
        if (kAbl[a].layout != L_LIBK) CU_CHECK(rc.cuModuleGetFunction(&f_abl[a], mod, name));
    }
    void *f_hand = f_abl[0];
    /* d)'s L_LIBK rows: a)'s kernel, compiled from cwi_resident_fused_source
     * with what compile_fused passes (the same source, name, in-memory
     * header and options: the same cubin) */
    cw_resident_fused lf;
    fused_desc(&lf, 0);
    char *lsrc = cwi_resident_fused_source(&lf);
    if (!lsrc) {
        fprintf(stderr, "%s: cwi_resident_fused_source failed: %s\n", BENCH_NAME, cw_last_error()->message);
        return 1;
    }
    cw_header lhdr = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings lps;
    cw_program_settings_default(&lps);
    lps.name = "cuweave_fused_loop.cu";
    lps.headers = &lhdr;
    lps.n_headers = 1;
    cw_program *lprog = NULL;
    CW_CHECK(cw_program_compile(&lprog, ctx, lsrc, &lps));
    free(lsrc);
    CW_CHECK(cw_program_get_info(lprog, &pi));
    void *lmod = NULL, *f_lib = NULL;
    CU_CHECK(rc.cuModuleLoadData(&lmod, pi.code));
    CU_CHECK(rc.cuModuleGetFunction(&f_lib, lmod, "cwf_resident_loop"));
    cw_program_destroy(&lprog);
    CU_CHECK(rc.cuModuleGetFunction(&f_k[0], mod, "k0"));
    CU_CHECK(rc.cuModuleGetFunction(&f_k[1], mod, "k1"));
    CU_CHECK(rc.cuModuleGetFunction(&f_k[2], mod, "k2"));
    cw_program_destroy(&prog);

    dptr work = 0, sync = 0, devblk = 0;
    CU_CHECK(rc.cuMemAlloc(&work, 64));
    CU_CHECK(rc.cuMemsetD32(work, 0, 16));
    CU_CHECK(rc.cuMemAlloc(&sync, 256)); /* the library's struct cwf_sync */
    CU_CHECK(rc.cuMemAlloc(&devblk, HDEV_BYTES));
    void *hb = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&hb, 4096, 0x1 | 0x2));
    memset(hb, 0, 4096);
    dptr hd = 0;
    CU_CHECK(rc.cuMemHostGetDevicePointer(&hd, hb, 0));
    /* b)'s layout: doorbell, stop and done a cache line each; +bell16's:
     * the stop word right after the doorbell (as cw_res_host) */
    hand_words wb = {(volatile unsigned long long *)hb, (volatile unsigned long long *)((char *)hb + 128),
                     (volatile unsigned *)((char *)hb + 64), hd, hd + 64, hd + 128, 0};
    hand_words w16 = {(volatile unsigned long long *)((char *)hb + 256),
                      (volatile unsigned long long *)((char *)hb + 128), (volatile unsigned *)((char *)hb + 264),
                      hd + 256, hd + 264, hd + 128, 0};
    /* d)'s layouts in the same page: cw_res_host's (done 64 bytes after the
     * doorbell, one 128-byte block) and done in the next 128-byte block */
    hand_words wres = {(volatile unsigned long long *)((char *)hb + 1024),
                       (volatile unsigned long long *)((char *)hb + 1088), (volatile unsigned *)((char *)hb + 1032),
                       hd + 1024, hd + 1032, hd + 1088, 0};
    hand_words wnext = {(volatile unsigned long long *)((char *)hb + 1600),
                        (volatile unsigned long long *)((char *)hb + 1664), (volatile unsigned *)((char *)hb + 1608),
                        hd + 1600, hd + 1608, hd + 1664, 0};
    /* the L_LIBK rows' cw_res_host: its own page, allocated as the library
     * allocates it (PORTABLE | DEVICEMAP), and device block */
    void *lhp = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&lhp, 4096, 0x1 | 0x2));
    memset(lhp, 0, 4096);
    dptr lh_dev = 0, ldev = 0;
    CU_CHECK(rc.cuMemHostGetDevicePointer(&lh_dev, lhp, 0));
    CU_CHECK(rc.cuMemAlloc(&ldev, sizeof(cw_res_dev)));
    cw_res_host *lh = (cw_res_host *)lhp;
    hand_words wlib = {(volatile unsigned long long *)&lh->requested, (volatile unsigned long long *)&lh->completed,
                       (volatile unsigned *)&lh->stop, lh_dev + offsetof(cw_res_host, requested),
                       lh_dev + offsetof(cw_res_host, stop), lh_dev + offsetof(cw_res_host, completed), 0};
    unsigned lib_spin_ns = 0, lib_flags = CW_RES_SYNC_HOST;
    {
        cw_resident_settings ds;
        cw_resident_settings_default(&ds);
        lib_spin_ns = ds.spin_us * 1000u;
        if (ds.sleep_mode == CW_RESIDENT_SLEEP_ADAPTIVE) lib_flags |= CW_RES_ADAPTIVE;
    }
    CUstream hs = NULL;
    CU_CHECK(rc.cuStreamCreateWithPriority(&hs, 1, 0));

    const unsigned grids[2] = {1, (unsigned)info.sm_count};
    result res[2][3], fpoll[2], hpoll[2], abl[NABL];
    double poll_call_ns = 0;
    unsigned fused_grid[2] = {0, 0};
    unsigned long long gpu_median[2] = {0, 0};
    cw_resident_info gpu_info[2];
    double *v = (double *)malloc(sizeof(double) * iters);
    if (!v) return 1;
    const unsigned long long gaps[2] = {POLL_GAP_NS, LONG_GAP_NS};

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
        /* a) fused loop: back-to-back, then (grid 1) already polling */
        CW_CHECK(cw_resident_launch(loops[g]));
        res[g][0] = run_fused(loops[g], v, WARMUP, iters, 0, g ? "a) fused, full grid" : "a) fused");
        CW_CHECK(cw_resident_get_info(loops[g], &gpu_info[g]));
        gpu_median[g] = gpu_info[g].iter_median_ns;
        if (g == 0) {
            /* the host's cost of one check of a) (the result there): one spin of rt_fused */
            const unsigned long long t0 = now_ns();
            for (int i = 0; i < API_CALLS; i++) CW_CHECK(cw_resident_poll_result(loops[0], g_last_seq));
            poll_call_ns = (double)(now_ns() - t0) / API_CALLS;
        }
        unsigned long long made = WARMUP + iters;
        if (g == 0) {
            fpoll[0] = run_fused(loops[g], v, WARMUP, iters, gaps[0], "a) fused, 30 us gap");
            fpoll[1] = run_fused(loops[g], v, LONG_WARMUP, long_iters, gaps[1], "a) fused, 1 ms gap");
            made += WARMUP + iters + LONG_WARMUP + long_iters;
        }
        CW_CHECK(cw_resident_tear_down(loops[g], 5000));
        check_counts(work, made * grid, "a) fused loop");

        /* b) hand-written persistent kernel */
        hand_launch(f_hand, &wb, grid, sync, work, devblk, 0, hs);
        res[g][1] = run_hand(&wb, 0, v, WARMUP, iters, 0, g ? "b) hand-written, full grid" : "b) hand-written");
        if (g == 0) {
            hpoll[0] = run_hand(&wb, 0, v, WARMUP, iters, gaps[0], "b) hand-written, 30 us gap");
            hpoll[1] = run_hand(&wb, 0, v, LONG_WARMUP, long_iters, gaps[1], "b) hand-written, 1 ms gap");
        }
        hand_stop(&wb, hs, "b)");
        check_counts(work, wb.made * grid, "b) hand-written kernel");

        /* c) cuGraphLaunch + sync */
        for (size_t i = 0; i < WARMUP + iters; i++) {
            const unsigned long long t0 = now_ns();
            CU_CHECK(rc.cuGraphLaunch(gexec[g], hs));
            CU_CHECK(rc.cuStreamSynchronize(hs));
            if (i >= WARMUP) v[i - WARMUP] = (now_ns() - t0) / 1e3;
        }
        res[g][2] = summarize(v, iters, g ? "c) graph, full grid" : "c) graph");
        check_counts(work, (unsigned long long)(WARMUP + iters) * grid, "c) graph launch");
    }

    /* d) ablation, grid 1 */
    for (int a = 0; a < NABL; a++) {
        hand_words *w = kAbl[a].layout == L_RESHOST   ? &wres
                        : kAbl[a].layout == L_NEXT128 ? &wnext
                        : kAbl[a].layout == L_LIBK    ? &wlib
                        : (kAbl[a].flags & H_BELL16)  ? &w16
                                                      : &wb;
        if (kAbl[a].layout == L_LIBK)
            lib_launch(f_lib, w, lh, lh_dev, sync, work, ldev, lib_spin_ns, lib_flags, hs);
        else
            hand_launch(f_abl[a], w, 1, sync, work, devblk, kAbl[a].timeout_ns, hs);
        abl[a] = run_hand(w, kAbl[a].cas, v, WARMUP, iters, 0, kAbl[a].name);
        hand_stop(w, hs, kAbl[a].name);
        check_counts(work, w->made, kAbl[a].name);
    }

    /* e) under load */
    part_result pr;
    run_partition(&pr, &info, iters);

    static const char *const names[3] = {"a) cw fused loop", "b) hand-written persistent kernel",
                                         "c) cuGraphLaunch + sync"};
    printf("bench_resident_fused: host round trip of 3 trivial stages, %zu round trips after %d warm-up, us\n", iters,
           WARMUP);
    for (int g = 0; g < 2; g++) {
        printf("grid %u x %d threads (fused loop: %u blocks), back-to-back:\n", grids[g], BLOCK, fused_grid[g]);
        printf("  %-36s %8s %8s %8s %8s %8s %8s\n", "method", "p50", "p90", "p99", "p99.9", "max", "mean");
        for (int m = 0; m < 3; m++)
            printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", names[m], res[g][m].st.p50, res[g][m].st.p90,
                   res[g][m].st.p99, res[g][m].st.p999, res[g][m].st.max, res[g][m].mean);
        printf("  fused / hand-written: p50 %.2fx, p99 %.2fx; graph / fused: p50 %.2fx, p99 %.2fx; "
               "GPU per request (fused, poll to result, cw_resident_get_info) min %.2f median %.2f max %.2f us\n",
               res[g][0].st.p50 / res[g][1].st.p50, res[g][0].st.p99 / res[g][1].st.p99,
               res[g][2].st.p50 / res[g][0].st.p50, res[g][2].st.p99 / res[g][0].st.p99,
               gpu_info[g].iter_min_ns / 1e3, gpu_median[g] / 1e3, gpu_info[g].iter_max_ns / 1e3);
    }
    printf("grid 1, already polling (the host idles, spinning, before each request):\n");
    printf("  %-36s %8s %8s %8s %8s %8s %8s\n", "method", "p50", "p90", "p99", "p99.9", "max", "mean");
    for (int k = 0; k < 2; k++) {
        char l[64];
        snprintf(l, sizeof l, "a) fused, %s gap", k ? "1 ms" : "30 us");
        printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", l, fpoll[k].st.p50, fpoll[k].st.p90, fpoll[k].st.p99,
               fpoll[k].st.p999, fpoll[k].st.max, fpoll[k].mean);
        snprintf(l, sizeof l, "b) hand-written, %s gap", k ? "1 ms" : "30 us");
        printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", l, hpoll[k].st.p50, hpoll[k].st.p90, hpoll[k].st.p99,
               hpoll[k].st.p999, hpoll[k].st.max, hpoll[k].mean);
    }
    printf("  (%zu round trips with the 30 us gap, %zu with the 1 ms gap)\n", iters, long_iters);
    printf("d) ablation, grid 1, back-to-back (each row: b) with one change; after \"new loop by hand\": that row with "
           "one change, or a)'s own kernel launched by hand; delta: p50 - the base's p50):\n");
    printf("  %-36s %8s %8s %8s %8s %8s %8s %8s\n", "variant", "p50", "p90", "p99", "p99.9", "max", "mean", "delta");
    for (int a = 0; a < NABL; a++)
        printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %+8.2f\n", kAbl[a].name, abl[a].st.p50, abl[a].st.p90,
               abl[a].st.p99, abl[a].st.p999, abl[a].st.max, abl[a].mean, abl[a].st.p50 - abl[0].st.p50);
    printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %+8.2f\n", "(a) cw fused loop, this run)", res[0][0].st.p50,
           res[0][0].st.p90, res[0][0].st.p99, res[0][0].st.p999, res[0][0].st.max, res[0][0].mean,
           res[0][0].st.p50 - abl[0].st.p50);
    printf("  host: cw_resident_poll_result, result ready: %.1f ns a call (%d calls)\n", poll_call_ns, API_CALLS);
    if (pr.ran) {
        printf("e) grid 1 fused loop in a %u-SM green partition; hog: %u blocks x %d threads x %lld ms in the leftover "
               "(%u SMs), %d in flight:\n",
               pr.small_sms, pr.hog_blocks, HOG_THREADS, HOG_NS / 1000000, pr.left_sms, HOG_DEPTH);
        printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  GPU median %.2f us\n", "unloaded", pr.un.st.p50,
               pr.un.st.p90, pr.un.st.p99, pr.un.st.p999, pr.un.st.max, pr.un.mean, pr.median_un / 1e3);
        printf("  %-36s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  GPU median %.2f us\n", "hog in the leftover",
               pr.lo.st.p50, pr.lo.st.p90, pr.lo.st.p99, pr.lo.st.p999, pr.lo.st.max, pr.lo.mean, pr.median_lo / 1e3);
        printf("  loaded p99 / unloaded p99 %.2fx; tear-down under load: %s in %.3f ms; %llu hog launches\n", pr.ratio,
               cw_status_name(pr.td), pr.td_ms, pr.hog_launches);
    } else {
        printf("e) under load: skipped: %s\n", pr.skip);
    }
    printf("checked %llu counters, %llu wrong: %s\n", g_checked, g_wrong, pass(g_wrong == 0));

    /* issue 24's targets (grid 1) */
    const double vs_hand = res[0][0].st.p50 / res[0][1].st.p50;
    const double g50 = res[0][2].st.p50 / res[0][0].st.p50, g99 = res[0][2].st.p99 / res[0][0].st.p99;
    printf("\nissue 24 targets, fused mode, grid 1:\n");
    target("back-to-back p50 / hand-written p50", vs_hand, "<=", TARGET_VS_HAND, vs_hand <= TARGET_VS_HAND, "x");
    target("back-to-back p50", res[0][0].st.p50, "<=", TARGET_B2B_P50, res[0][0].st.p50 <= TARGET_B2B_P50, " us");
    target("already polling (30 us gap) p50", fpoll[0].st.p50, "<=", TARGET_POLL_P50,
           fpoll[0].st.p50 <= TARGET_POLL_P50, " us");
    target("already polling (1 ms gap) p50", fpoll[1].st.p50, "<=", TARGET_POLL_P50,
           fpoll[1].st.p50 <= TARGET_POLL_P50, " us");
    target("back-to-back p99", res[0][0].st.p99, "<=", TARGET_P99, res[0][0].st.p99 <= TARGET_P99, " us");
    target("already polling (30 us gap) p99", fpoll[0].st.p99, "<=", TARGET_P99, fpoll[0].st.p99 <= TARGET_P99,
           " us");
    target("already polling (1 ms gap) p99", fpoll[1].st.p99, "<=", TARGET_P99, fpoll[1].st.p99 <= TARGET_P99,
           " us");
    target("cuGraphLaunch + sync / fused, p50", g50, ">=", TARGET_VS_GRAPH, g50 >= TARGET_VS_GRAPH, "x");
    target("cuGraphLaunch + sync / fused, p99", g99, ">=", TARGET_VS_GRAPH, g99 >= TARGET_VS_GRAPH, "x");
    printf("    (2.5x needs a fused p50 <= %.2f us and p99 <= %.2f us; the hand-written kernel gets %.2fx / %.2fx)\n",
           res[0][2].st.p50 / TARGET_VS_GRAPH, res[0][2].st.p99 / TARGET_VS_GRAPH, res[0][2].st.p50 / res[0][1].st.p50,
           res[0][2].st.p99 / res[0][1].st.p99);
    target("GPU median per request (poll to result)", gpu_median[0] / 1e3, "<=", TARGET_GPU_MEDIAN,
           gpu_median[0] / 1e3 <= TARGET_GPU_MEDIAN, " us");
    if (pr.ran)
        target("green partition: loaded p99 / unloaded p99", pr.ratio, "<=", TARGET_LOADED, pr.ratio <= TARGET_LOADED,
               "x");
    else
        printf("  %-66s skipped (%s)\n", "green partition: loaded p99 / unloaded p99", pr.skip);

    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Fused persistent mode: host round trip of three stages (bench_resident_fused)\n\n");
    printf("%s, %s (%d SMs), driver %d.%d, commit %s. Three trivial stages (thread 0 of every block adds 1 to the\n"
           "stage's counter; the counts are checked: %llu checked, %llu wrong), %d threads a block; %zu round trips\n"
           "after %d warm-up (%zu with the 1 ms gap), microseconds. a) `cw_resident_set_fused`, spin,\n"
           "`sync_with_host` 1; b) the same loop written by hand (NVRTC, raw cooperative launch, doorbell and done\n"
           "word in mapped host memory); c) `cuGraphLaunch` + `cuStreamSynchronize` of the three stages as three\n"
           "kernels. Already polling: the host idles 30 us or 1 ms (spinning) before each request.\n\n",
           date, info.name, info.sm_count, drv / 1000, drv % 1000 / 10, commit, g_checked, g_wrong, BLOCK, iters,
           WARMUP, long_iters);
    printf("| grid | method | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
    for (int g = 0; g < 2; g++)
        for (int m = 0; m < 3; m++)
            printf("| %u | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", grids[g], names[m], res[g][m].st.p50,
                   res[g][m].st.p90, res[g][m].st.p99, res[g][m].st.p999, res[g][m].st.max);
    for (int k = 0; k < 2; k++) {
        printf("| 1 | a) cw fused loop, %s gap | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k ? "1 ms" : "30 us",
               fpoll[k].st.p50, fpoll[k].st.p90, fpoll[k].st.p99, fpoll[k].st.p999, fpoll[k].st.max);
        printf("| 1 | b) hand-written, %s gap | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k ? "1 ms" : "30 us",
               hpoll[k].st.p50, hpoll[k].st.p90, hpoll[k].st.p99, hpoll[k].st.p999, hpoll[k].st.max);
    }
    printf("\nRatios (p50 / p99): ");
    for (int g = 0; g < 2; g++)
        printf("%sgrid %u: fused / hand-written %.2fx / %.2fx, graph / fused %.2fx / %.2fx", g ? "; " : "", grids[g],
               res[g][0].st.p50 / res[g][1].st.p50, res[g][0].st.p99 / res[g][1].st.p99,
               res[g][2].st.p50 / res[g][0].st.p50, res[g][2].st.p99 / res[g][0].st.p99);
    printf(". GPU median per request (poll to result): grid 1 %.2f us, grid %u %.2f us.\n\n", gpu_median[0] / 1e3,
           grids[1], gpu_median[1] / 1e3);
    printf("Ablation (grid 1, back-to-back; each row is b) with one change; after \"new loop by hand\": that row "
           "with one change, or a)'s own kernel launched by hand):\n\n");
    printf("| variant | p50 | p99 | p99.9 | p50 - base |\n|---|---|---|---|---|\n");
    for (int a = 0; a < NABL; a++)
        printf("| %s | %.2f | %.2f | %.2f | %+.2f |\n", kAbl[a].name, abl[a].st.p50, abl[a].st.p99, abl[a].st.p999,
               abl[a].st.p50 - abl[0].st.p50);
    printf("| a) cw fused loop (this run) | %.2f | %.2f | %.2f | %+.2f |\n", res[0][0].st.p50, res[0][0].st.p99,
           res[0][0].st.p999, res[0][0].st.p50 - abl[0].st.p50);
    printf("\nHost: `cw_resident_poll_result` with the result there, %.1f ns a call.\n", poll_call_ns);
    if (pr.ran) {
        printf("\nUnder load: the grid-1 fused loop in a %u-SM green partition, `cw_hog` (%u blocks x %d threads x %lld "
               "ms, %d in flight) keeping the leftover partition (%u SMs) full; back-to-back.\n\n",
               pr.small_sms, pr.hog_blocks, HOG_THREADS, HOG_NS / 1000000, HOG_DEPTH, pr.left_sms);
        printf("| partition | p50 | p99 | p99.9 | max | GPU median |\n|---|---|---|---|---|---|\n");
        printf("| unloaded | %.2f | %.2f | %.2f | %.2f | %.2f |\n", pr.un.st.p50, pr.un.st.p99, pr.un.st.p999,
               pr.un.st.max, pr.median_un / 1e3);
        printf("| hog in the leftover | %.2f | %.2f | %.2f | %.2f | %.2f |\n", pr.lo.st.p50, pr.lo.st.p99,
               pr.lo.st.p999, pr.lo.st.max, pr.median_lo / 1e3);
        printf("\nLoaded p99 / unloaded p99: %.2fx. Tear-down under load: %s in %.3f ms.\n", pr.ratio,
               cw_status_name(pr.td), pr.td_ms);
    } else {
        printf("\nUnder load: skipped: %s.\n", pr.skip);
    }
    printf("\n| target | measured | result |\n|---|---|---|\n");
    printf("| back-to-back p50 within 5%% of hand-written | %.2fx | %s |\n", vs_hand, pass(vs_hand <= TARGET_VS_HAND));
    printf("| back-to-back p50 <= 4.2 us | %.2f | %s |\n", res[0][0].st.p50, pass(res[0][0].st.p50 <= TARGET_B2B_P50));
    printf("| already polling p50 <= 3.3 us (30 us / 1 ms gap) | %.2f / %.2f | %s |\n", fpoll[0].st.p50,
           fpoll[1].st.p50, pass(fpoll[0].st.p50 <= TARGET_POLL_P50 && fpoll[1].st.p50 <= TARGET_POLL_P50));
    printf("| p99 <= 6 us (back-to-back / 30 us / 1 ms gap) | %.2f / %.2f / %.2f | %s |\n", res[0][0].st.p99,
           fpoll[0].st.p99, fpoll[1].st.p99,
           pass(res[0][0].st.p99 <= TARGET_P99 && fpoll[0].st.p99 <= TARGET_P99 && fpoll[1].st.p99 <= TARGET_P99));
    printf("| >= 2.5x faster than cuGraphLaunch + sync, p50 | %.2fx | %s |\n", g50, pass(g50 >= TARGET_VS_GRAPH));
    printf("| >= 2.5x faster than cuGraphLaunch + sync, p99 | %.2fx | %s |\n", g99, pass(g99 >= TARGET_VS_GRAPH));
    printf("| GPU median (poll to result) <= 1.5 us | %.2f | %s |\n", gpu_median[0] / 1e3,
           pass(gpu_median[0] / 1e3 <= TARGET_GPU_MEDIAN));
    if (pr.ran)
        printf("| loaded p99 within 1.5x of unloaded (green partition) | %.2fx | %s |\n", pr.ratio,
               pass(pr.ratio <= TARGET_LOADED));
    printf("---- end ----\n");

    for (int g = 0; g < 2; g++) {
        cw_resident_destroy(&loops[g]);
        rc.cuGraphExecDestroy(gexec[g]);
    }
    rc.cuStreamDestroy(hs);
    rc.cuMemFreeHost(hb);
    rc.cuMemFreeHost(lhp);
    rc.cuMemFree(ldev);
    rc.cuModuleUnload(lmod);
    rc.cuMemFree(work);
    rc.cuMemFree(sync);
    rc.cuMemFree(devblk);
    rc.cuModuleUnload(mod);
    free(v);
    cw_context_destroy(&ctx);
    return g_wrong ? 1 : 0;
}
