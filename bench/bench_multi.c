/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_multi: two GPUs of one host, cuweave against the raw driver API (and
 * NCCL called directly) doing the same work, measured in one run on devices
 * 0 and 1 (include/cuweave/multi.h, include/cuweave/collective.h).
 *
 * Setup: a cw_device_group of devices 0 and 1 (their primary contexts); peer
 * access enabled between them where the topology allows it
 * (cw_device_get_peer_info, cw_context_enable_peer each way; it serves both
 * sides: the raw side uses the same primary contexts); per device a cuweave
 * stream (cw_stream_create) and a raw stream (cuStreamCreateWithPriority,
 * non-blocking) in that context, and two 256 MiB buffers `a` and `b`
 * (cuMemAlloc in the device's primary context) that both sides share.
 *
 *  1) Peer copies, GPU0 -> GPU1 (g0.a -> g1.b) and GPU1 -> GPU0 (g1.a ->
 *     g0.b), 1 MiB, 64 MiB and 256 MiB, each on a stream of the source
 *     device: cw_copy_peer on the cw_stream against cuMemcpyPeerAsync on the
 *     raw stream. Each copy is timed with raw events (cuEventRecord before and
 *     after it on the underlying CUstream, the cw_stream's from
 *     cw_stream_get_info; cuEventElapsedTime), COPY_REPS copies per size,
 *     direction and variant after COPY_WARMUP warm-ups, the variants
 *     alternating (AB BA ...) so that both share the drift. GB/s at the
 *     median (and p90) time; the ratio is of the median times, cw / raw
 *     (above 1: cuweave slower). Each direction's copy is checked once per
 *     variant (a pattern copied, words read back). Also the host cost of
 *     enqueueing one copy (4 KiB, GPU0 -> GPU1): ENQ_CALLS calls per variant,
 *     each timed alone with CLOCK_MONOTONIC, in batches of ENQ_BATCH (the
 *     stream synchronised after each batch, outside the timing), the
 *     variants' batches alternating; ns p50/p99 (the clock pair's own cost is
 *     printed, not subtracted). The source device's context is current on the
 *     thread throughout, for both sides.
 *
 *  2) Resident loops: one cw_resident per GPU, made on the group's context of
 *     its device, configured as bench_resident's a): gated by kernels
 *     (CW_RESIDENT_GATE_KERNELS), its workload the three guarded operators
 *     cw_gop_load -> cw_gop_mul -> cw_gop_store (tests/kernels, one thread
 *     each) enqueued into the iteration by cw_resident_set_workload_fn,
 *     overlap on compute capability 9.0+, unroll 16, spin, sync_with_host 1.
 *     Each loop has its own `in` and `out` words in mapped pinned host memory
 *     (one portable page); out == (v + 1) * 3 + 7 is checked after every
 *     round trip. One round trip: store v (or v0 and v1), ring, see the
 *     result; timed with CLOCK_MONOTONIC from before the store(s) to the
 *     return of the wait:
 *       a) GPU0's loop alone: cw_resident_data_ready + cw_resident_wait_result
 *       b) GPU1's loop alone: the same
 *       c) both together: cw_resident_data_ready on each (both doorbells),
 *          then cw_resident_wait_result on each (both results), from one
 *          thread
 *     "Alone" means the other loop is not launched: each of a), b), c) owns
 *     the GPUs for a block (its loops launched at the start of the block and
 *     torn down at its end), RT_BLOCKS blocks with the three in a fresh
 *     random order each (fixed seed); BENCH_ITERS (default 20000) round trips
 *     each after RT_WARMUP warm-up ones, microseconds p50/p90/p99. The ratio
 *     together / alone is c) over the slower of a) and b), at p50 and p99.
 *
 *  3) All-reduce through NCCL, float32 sum, out of place (send = a, recv =
 *     b, so the values do not change from one repetition to the next),
 *     1 MiB and 256 MiB per rank: cw_comm_all_reduce (a cw_comm from
 *     cw_comm_create over the group's contexts, the cuweave streams) against
 *     NCCL called directly (opened here: $CUWEAVE_LIBNCCL, else
 *     libnccl.so.2; its own communicators from ncclCommInitAll; the raw
 *     streams; ncclGroupStart, ncclAllReduce per rank with the rank's context
 *     current, ncclGroupEnd). AR_REPS_SMALL (1 MiB) and AR_REPS_LARGE
 *     (256 MiB) repetitions after warm-ups, the variants alternating.
 *     Timing (events, one clock): a start event recorded on rank 0's stream
 *     before the all-reduce is issued; after it, an event recorded on rank
 *     1's stream, rank 0's stream made to wait for it (cuStreamWaitEvent
 *     across devices), and an end event recorded on rank 0's stream. So
 *     start -> end, both on device 0's clock, spans the whole collective up
 *     to the later of the two ranks' ends (events of two devices cannot be
 *     compared with cuEventElapsedTime, hence the join). The streams are idle
 *     when the start event is recorded, so the span also holds the host's
 *     issue time (cuweave's wrapper included): the figure is issue-to-done,
 *     which is what a caller waits for. The host issue time (the all-reduce
 *     call, or the group) is reported separately. Median and p90 in
 *     microseconds, algorithm bandwidth (bytes per rank / median time), the
 *     ratio of the medians cw / direct: PASS when <= 1.03 (the issue's
 *     target: within 3%), else MISS. Each variant's result is checked once
 *     per size: rank r's send filled with r + 1, recv cleared, one
 *     all-reduce, sample words of both ranks' recv read back: 3.0 expected.
 *     Skipped (with the reason) when NCCL cannot be opened.
 *
 * NCCL_NVLS_ENABLE=0 is set first thing (the machines forbid NVLink
 * multicast); nothing here calls cuMulticastCreate.
 *
 * Order: 1), then 2) (the loops are built before any is launched, since
 * loading code waits for running loops, and destroyed after the last block),
 * then 3), so that no loop spins while copies or collectives run.
 *
 * Prints the tables and a summary block for docs/benchmarks.md. Exits 77 with
 * a SKIP line without a driver or GPU, or with fewer than two GPUs; 1 when a
 * call fails or a result is wrong; 0 otherwise (a MISS is a result, not a
 * failure). Set CW_COMMIT to name the commit.
 *
 * Build (after `make -j16`):
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests bench/bench_multi.c \
 *      build-make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o bench_multi
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_multi"
#include "bench_common.h"

#define MIB (1024ull * 1024ull)
#define BIG_BYTES (256ull * MIB) /* each of a and b, per device */

#define COPY_WARMUP 3
#define COPY_REPS 20
#define ENQ_BYTES 4096
#define ENQ_CALLS 10000  /* per variant */
#define ENQ_BATCH 100    /* calls between two synchronisations */
#define ENQ_WARMUP 1000  /* per variant */

#define RT_DEFAULT_ITERS 20000
#define RT_WARMUP 2000   /* per variant, spread over the blocks */
#define RT_BLOCKS 4
#define RT_WAIT_MS 5000  /* a round trip slower than this fails the run */
#define TEARDOWN_MS 1000

#define AR_SMALL_BYTES (1ull * MIB)
#define AR_LARGE_BYTES (256ull * MIB)
#define AR_REPS_SMALL 50
#define AR_REPS_LARGE 20
#define AR_WARMUP_SMALL 10
#define AR_WARMUP_LARGE 3
#define AR_TARGET 1.03 /* cw / direct, medians */
#define AR_CHECK_WORDS 1024

typedef unsigned long long dptr;

static rawcuda rc;
/* Driver entries tests/rawcuda.h does not declare. */
static rc_result (*p_cuMemcpyPeerAsync)(dptr, CUcontext, dptr, CUcontext, size_t, CUstream);
static rc_result (*p_cuEventElapsedTime)(float *, CUevent, CUevent);

/* ---- the two GPUs --------------------------------------------------------------- */

typedef struct gpu {
    int ord;
    cw_device_info info;
    cw_context *ctx; /* borrowed from the group */
    CUcontext cu;    /* its primary context */
    dptr a, b;       /* BIG_BYTES each: copy source / destination; all-reduce send / recv */
    cw_stream *cs;   /* the cuweave stream */
    CUstream cs_h;   /* its CUstream */
    CUstream rs;     /* the raw stream */
    CUevent ev_start, ev_end, ev_join; /* timing, timing, timing disabled */
    /* 2) */
    void *module, *f_gload, *f_gmul, *f_gstore;
    dptr rbuf;               /* the workload's scratch word(s) */
    dptr in_d, out_d;        /* the mapped host words as this context addresses them */
    unsigned *in, *out;      /* the same, for the host */
    cw_resident *loop;
    cw_devptr ctl;
} gpu;

static gpu g[2];
static cw_device_group *set;

static void use(int d) { CU_CHECK(rc.cuCtxSetCurrent(g[d].cu)); }

static float f32_bits_to_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static unsigned float_bits(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The median of v[0..n) without reordering it. */
static double median_of(const double *v, size_t n) {
    double *c = malloc(n * sizeof *c);
    if (!c) {
        fprintf(stderr, "%s: out of memory\n", BENCH_NAME);
        exit(1);
    }
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    const double m = c[(size_t)ceil(0.5 * (double)n) - 1];
    free(c);
    return m;
}

static double *alloc_doubles(size_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", BENCH_NAME);
        exit(1);
    }
    return p;
}

/* ==== 1) peer copies ============================================================= */

enum { V_CW = 0, V_RAW = 1 };

/* One copy src -> dst of `bytes` (g[src].a -> g[dst].b) on the source
 * device's stream of `variant`, timed with events; milliseconds. */
static double copy_once(int variant, int src, int dst, size_t bytes) {
    gpu *s = &g[src], *t = &g[dst];
    const CUstream h = variant == V_CW ? s->cs_h : s->rs;
    CU_CHECK(rc.cuEventRecord(s->ev_start, h));
    if (variant == V_CW)
        CW_CHECK(cw_copy_peer(s->cs, t->b, t->ctx, s->a, s->ctx, bytes));
    else
        CU_CHECK(p_cuMemcpyPeerAsync(t->b, t->cu, s->a, s->cu, bytes, s->rs));
    CU_CHECK(rc.cuEventRecord(s->ev_end, h));
    CU_CHECK(rc.cuEventSynchronize(s->ev_end));
    float ms = 0;
    CU_CHECK(p_cuEventElapsedTime(&ms, s->ev_start, s->ev_end));
    return (double)ms;
}

/* Checks that `variant` copies: a pattern in the first 1 MiB of g[src].a,
 * g[dst].b cleared, one copy, words at both ends of the 1 MiB read back.
 * Returns the number of wrong words. */
static unsigned long long copy_check(int variant, int src, int dst) {
    const size_t bytes = 1 * MIB, words = bytes / 4;
    const unsigned pattern = 0xc0ffee00u + (unsigned)src * 16u + (unsigned)variant;
    use(dst);
    CU_CHECK(rc.cuMemsetD32(g[dst].b, 0, words));
    CU_CHECK(rc.cuCtxSynchronize());
    use(src);
    CU_CHECK(rc.cuMemsetD32(g[src].a, pattern, words));
    CU_CHECK(rc.cuCtxSynchronize());
    copy_once(variant, src, dst, bytes);
    static unsigned host[2 * 1024];
    use(dst);
    CU_CHECK(rc.cuMemcpyDtoH(host, g[dst].b, 1024 * 4));
    CU_CHECK(rc.cuMemcpyDtoH(host + 1024, g[dst].b + bytes - 1024 * 4, 1024 * 4));
    unsigned long long bad = 0;
    for (int i = 0; i < 2 * 1024; i++) bad += host[i] != pattern;
    use(src);
    return bad;
}

typedef struct copy_row {
    int src, dst;
    size_t bytes;
    double ms[2][COPY_REPS];
    stats st[2];     /* milliseconds */
    double gbs[2];   /* GB/s at the median time */
    double gbs90[2]; /* GB/s at the p90 time */
    double ratio;    /* median time, cw / raw */
} copy_row;

static void copy_measure(copy_row *r) {
    use(r->src);
    for (int i = 0; i < COPY_WARMUP + COPY_REPS; i++) {
        const int first = i % 2 ? V_RAW : V_CW; /* AB BA AB ... */
        for (int k = 0; k < 2; k++) {
            const int v = k == 0 ? first : 1 - first;
            const double ms = copy_once(v, r->src, r->dst, r->bytes);
            if (i >= COPY_WARMUP) r->ms[v][i - COPY_WARMUP] = ms;
        }
    }
    for (int v = 0; v < 2; v++) {
        r->st[v] = stats_of(r->ms[v], COPY_REPS);
        r->gbs[v] = (double)r->bytes / (r->st[v].p50 * 1e-3) / 1e9;
        r->gbs90[v] = (double)r->bytes / (r->st[v].p90 * 1e-3) / 1e9;
    }
    r->ratio = r->st[V_CW].p50 / r->st[V_RAW].p50;
}

/* Host cost of enqueueing one ENQ_BYTES copy GPU0 -> GPU1: ns per call. */
static void enqueue_measure(stats st[2], double *clock_ns) {
    use(0);
    double *t[2] = {alloc_doubles(ENQ_CALLS), alloc_doubles(ENQ_CALLS)};
    size_t n[2] = {0, 0};
    const int batches = (ENQ_WARMUP + ENQ_CALLS) / ENQ_BATCH;
    for (int b = 0; b < batches; b++) {
        const int first = b % 2 ? V_RAW : V_CW;
        for (int k = 0; k < 2; k++) {
            const int v = k == 0 ? first : 1 - first;
            const int timed = b >= ENQ_WARMUP / ENQ_BATCH;
            for (int i = 0; i < ENQ_BATCH; i++) {
                const unsigned long long t0 = now_ns();
                if (v == V_CW)
                    CW_CHECK(cw_copy_peer(g[0].cs, g[1].b, g[1].ctx, g[0].a, g[0].ctx, ENQ_BYTES));
                else
                    CU_CHECK(p_cuMemcpyPeerAsync(g[1].b, g[1].cu, g[0].a, g[0].cu, ENQ_BYTES, g[0].rs));
                const unsigned long long t1 = now_ns();
                if (timed && n[v] < ENQ_CALLS) t[v][n[v]++] = (double)(t1 - t0);
            }
            CU_CHECK(rc.cuStreamSynchronize(v == V_CW ? g[0].cs_h : g[0].rs));
        }
    }
    for (int v = 0; v < 2; v++) {
        st[v] = stats_of(t[v], n[v]);
        free(t[v]);
    }
    /* the cost of an empty pair of clock reads, for scale */
    double c[1000];
    for (int i = 0; i < 1000; i++) {
        const unsigned long long t0 = now_ns();
        const unsigned long long t1 = now_ns();
        c[i] = (double)(t1 - t0);
    }
    *clock_ns = stats_of(c, 1000).p50;
}

/* ==== 2) resident loops ========================================================= */

static void *host_page;
static unsigned next_v = 1;
static unsigned long long rt_checked, rt_wrong;

/* The kernels, the scratch word and the mapped words of g[d] (its context
 * current while loading). */
static void rt_load(int d) {
    gpu *x = &g[d];
    use(d);
    CU_CHECK(rawcuda_kernel(&rc, &x->module, cw_test_kernels_fatbin, "cw_gop_load", &x->f_gload));
    CU_CHECK(rawcuda_kernel(&rc, &x->module, cw_test_kernels_fatbin, "cw_gop_mul", &x->f_gmul));
    CU_CHECK(rawcuda_kernel(&rc, &x->module, cw_test_kernels_fatbin, "cw_gop_store", &x->f_gstore));
    CU_CHECK(rc.cuMemAlloc(&x->rbuf, 64));
    CU_CHECK(rc.cuMemsetD32(x->rbuf, 0, 16));
    char *base = host_page; /* one cache line each: in0, out0, in1, out1 */
    x->in = (unsigned *)(base + 256 * d);
    x->out = (unsigned *)(base + 256 * d + 128);
    CU_CHECK(rc.cuMemHostGetDevicePointer(&x->in_d, x->in, 0));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&x->out_d, x->out, 0));
    CU_CHECK(rc.cuCtxSynchronize());
}

/* cw_resident_capture_fn: the three guarded operators on s (capturing into
 * the loop's graph), launched raw on s's CUstream with the loop's context
 * current (as bench_resident's wl_capture). */
static cw_status rt_workload(cw_stream *s, void *user) {
    gpu *x = user;
    cw_stream_info si;
    cw_status st = cw_stream_get_info(s, &si);
    if (st != CW_SUCCESS) return st;
    CUstream h = si.handle;
    CUcontext prev = NULL;
    CU_CHECK(rc.cuCtxGetCurrent(&prev));
    CU_CHECK(rc.cuCtxSetCurrent(x->cu));
    void *a_load[] = {&x->ctl, &x->in_d, &x->rbuf};
    void *a_mul[] = {&x->ctl, &x->rbuf};
    void *a_store[] = {&x->ctl, &x->rbuf, &x->out_d};
    CU_CHECK(rawcuda_launch1(&rc, x->f_gload, h, a_load));
    CU_CHECK(rawcuda_launch1(&rc, x->f_gmul, h, a_mul));
    CU_CHECK(rawcuda_launch1(&rc, x->f_gstore, h, a_store));
    CU_CHECK(rc.cuCtxSetCurrent(prev));
    return CW_SUCCESS;
}

/* The loop of g[d], configured as bench_resident's a). */
static cw_status rt_make(int d) {
    gpu *x = &g[d];
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_mode = CW_RESIDENT_SLEEP_FIXED;
    s.sleep_interval_us = 0; /* spin */
    s.sync_with_host = 1;    /* the workload writes `out` in host memory */
    s.unroll = 16;
    s.gate = CW_RESIDENT_GATE_KERNELS;
    s.overlap = x->info.cc_major >= 9 ? 1u : 0u;
    cw_status st = cw_resident_create(&x->loop, x->ctx, &s);
    if (st != CW_SUCCESS) return st;
    CW_CHECK(cw_resident_get_ctl(x->loop, &x->ctl));
    CW_CHECK(cw_resident_set_workload_fn(x->loop, rt_workload, x));
    return CW_SUCCESS;
}

static void rt_check(int d, unsigned v) {
    const unsigned want = (v + 1u) * 3u + 7u;
    const unsigned got = __atomic_load_n(g[d].out, __ATOMIC_ACQUIRE);
    rt_checked++;
    if (got != want) {
        if (rt_wrong < 10)
            fprintf(stderr, "%s: GPU%d's loop: out = %u after v = %u, expected %u\n", BENCH_NAME, d, got, v, want);
        rt_wrong++;
    }
}

/* a), b): one round trip through g[d]'s loop; microseconds. */
static double rt_one(int d) {
    const unsigned v = next_v++;
    const unsigned long long t0 = now_ns();
    *(volatile unsigned *)g[d].in = v;
    uint64_t seq = 0;
    CW_CHECK(cw_resident_data_ready(g[d].loop, &seq));
    CW_CHECK(cw_resident_wait_result(g[d].loop, seq, RT_WAIT_MS));
    const unsigned long long t1 = now_ns();
    rt_check(d, v);
    return (double)(t1 - t0) / 1000.0;
}

/* c): one round trip through both loops at once; microseconds. */
static double rt_both(void) {
    const unsigned v0 = next_v++, v1 = next_v++;
    uint64_t seqs[2] = {0, 0};
    const unsigned long long t0 = now_ns();
    *(volatile unsigned *)g[0].in = v0;
    *(volatile unsigned *)g[1].in = v1;
    for (int d = 0; d < 2; d++) CW_CHECK(cw_resident_data_ready(g[d].loop, &seqs[d]));
    for (int d = 0; d < 2; d++) CW_CHECK(cw_resident_wait_result(g[d].loop, seqs[d], RT_WAIT_MS));
    const unsigned long long t1 = now_ns();
    rt_check(0, v0);
    rt_check(1, v1);
    return (double)(t1 - t0) / 1000.0;
}

enum { F_ALONE0, F_ALONE1, F_BOTH, F_COUNT };

typedef struct rt_fam {
    const char *label;
    double *t;
    size_t n, cap;
    stats st;
    double gpu_med_us[2]; /* cw_resident_get_info iter_median_ns of each loop it ran, last block */
} rt_fam;

/* One block of family f: its loop(s) launched, `warm` + `rounds` round trips,
 * torn down. */
static void rt_block(rt_fam *fam, int f, size_t warm, size_t rounds) {
    const int lo = f == F_ALONE1 ? 1 : 0, hi = f == F_ALONE0 ? 0 : 1;
    for (int d = lo; d <= hi; d++) CW_CHECK(cw_resident_launch(g[d].loop));
    for (size_t i = 0; i < warm + rounds; i++) {
        const double us = f == F_BOTH ? rt_both() : rt_one(f == F_ALONE0 ? 0 : 1);
        if (i >= warm && fam->n < fam->cap) fam->t[fam->n++] = us;
    }
    for (int d = lo; d <= hi; d++) {
        cw_resident_info s;
        CW_CHECK(cw_resident_get_info(g[d].loop, &s));
        fam->gpu_med_us[d] = (double)s.iter_median_ns / 1e3;
    }
    for (int d = lo; d <= hi; d++) {
        const cw_status st = cw_resident_tear_down(g[d].loop, TEARDOWN_MS);
        if (st != CW_SUCCESS) {
            fprintf(stderr, "%s: %s: cw_resident_tear_down(GPU%d's loop, %d) returned %s (%s)\n", BENCH_NAME,
                    fam->label, d, TEARDOWN_MS, cw_status_name(st), cw_last_error()->message);
            exit(1);
        }
    }
}

/* ==== 3) all-reduce ============================================================== */

/* The few NCCL entries used, declared here (nccl.h's values). */
typedef int nccl_result;
typedef struct ncclComm *nccl_comm;
#define NCCL_FLOAT32 7
#define NCCL_SUM 0

static struct {
    void *lib;
    nccl_result (*GetVersion)(int *);
    const char *(*GetErrorString)(nccl_result);
    nccl_result (*CommInitAll)(nccl_comm *, int, const int *);
    nccl_result (*CommDestroy)(nccl_comm);
    nccl_result (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm, CUstream);
    nccl_result (*GroupStart)(void);
    nccl_result (*GroupEnd)(void);
} nc;

#define NCCL_CHECK(expr)                                                                                      \
    do {                                                                                                      \
        nccl_result n_ = (expr);                                                                              \
        if (n_ != 0) {                                                                                        \
            fprintf(stderr, "%s: %s failed: ncclResult %d (%s)\n", BENCH_NAME, #expr, n_,                     \
                    nc.GetErrorString ? nc.GetErrorString(n_) : "?");                                         \
            exit(1);                                                                                          \
        }                                                                                                     \
    } while (0)

/* Opens NCCL; 1 on success, else 0 with the reason in why. */
static int nccl_open(char *why, size_t size) {
    const char *path = getenv("CUWEAVE_LIBNCCL");
    if (!path || !*path) path = "libnccl.so.2";
    nc.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!nc.lib) {
        const char *e = dlerror();
        snprintf(why, size, "dlopen(\"%s\"): %s", path, e ? e : "failed");
        return 0;
    }
#define NC_SYM_(field, name)                                                            \
    if (!(*(void **)&nc.field = dlsym(nc.lib, name))) {                                 \
        snprintf(why, size, "%s has no %s", path, name);                                \
        return 0;                                                                       \
    }
    NC_SYM_(GetVersion, "ncclGetVersion")
    NC_SYM_(GetErrorString, "ncclGetErrorString")
    NC_SYM_(CommInitAll, "ncclCommInitAll")
    NC_SYM_(CommDestroy, "ncclCommDestroy")
    NC_SYM_(AllReduce, "ncclAllReduce")
    NC_SYM_(GroupStart, "ncclGroupStart")
    NC_SYM_(GroupEnd, "ncclGroupEnd")
#undef NC_SYM_
    return 1;
}

static cw_comm *cwc;
static nccl_comm ncc[2];

/* Issues one all-reduce of `count` floats (send a, recv b) on both ranks. */
static void ar_issue(int variant, size_t count) {
    if (variant == V_CW) {
        const cw_devptr send[2] = {g[0].a, g[1].a}, recv[2] = {g[0].b, g[1].b};
        cw_stream *const streams[2] = {g[0].cs, g[1].cs};
        CW_CHECK(cw_comm_all_reduce(cwc, send, recv, count, CW_FLOAT32, CW_SUM, streams));
    } else {
        NCCL_CHECK(nc.GroupStart());
        for (int r = 0; r < 2; r++) {
            use(r);
            NCCL_CHECK(nc.AllReduce((const void *)(uintptr_t)g[r].a, (void *)(uintptr_t)g[r].b, count,
                                    NCCL_FLOAT32, NCCL_SUM, ncc[r], g[r].rs));
        }
        NCCL_CHECK(nc.GroupEnd());
    }
}

/* One timed all-reduce (see the top: start on rank 0's stream, rank 1's end
 * joined into rank 0's stream, end on rank 0's stream); microseconds, and
 * the host issue time in *issue_us. */
static double ar_once(int variant, size_t count, double *issue_us) {
    const CUstream s0 = variant == V_CW ? g[0].cs_h : g[0].rs, s1 = variant == V_CW ? g[1].cs_h : g[1].rs;
    use(0);
    CU_CHECK(rc.cuEventRecord(g[0].ev_start, s0));
    const unsigned long long t0 = now_ns();
    ar_issue(variant, count);
    *issue_us = (double)(now_ns() - t0) / 1000.0;
    use(1);
    CU_CHECK(rc.cuEventRecord(g[1].ev_join, s1));
    use(0);
    CU_CHECK(rc.cuStreamWaitEvent(s0, g[1].ev_join, 0));
    CU_CHECK(rc.cuEventRecord(g[0].ev_end, s0));
    CU_CHECK(rc.cuEventSynchronize(g[0].ev_end));
    float ms = 0;
    CU_CHECK(p_cuEventElapsedTime(&ms, g[0].ev_start, g[0].ev_end));
    return (double)ms * 1000.0;
}

/* One all-reduce of `variant` on fresh data (rank r's send = r + 1, recv
 * cleared); returns the number of wrong words among the samples read back
 * (AR_CHECK_WORDS at the start, the middle and the end of each rank's recv). */
static unsigned long long ar_check(int variant, size_t count) {
    for (int r = 0; r < 2; r++) {
        use(r);
        CU_CHECK(rc.cuMemsetD32(g[r].a, float_bits((float)(r + 1)), count));
        CU_CHECK(rc.cuMemsetD32(g[r].b, 0, count));
        CU_CHECK(rc.cuCtxSynchronize()); /* the memsets run on the legacy stream */
    }
    double issue = 0;
    ar_once(variant, count, &issue); /* waits for both ranks */
    static unsigned host[3 * AR_CHECK_WORDS];
    const size_t at[3] = {0, count / 2 - AR_CHECK_WORDS / 2, count - AR_CHECK_WORDS};
    unsigned long long bad = 0;
    for (int r = 0; r < 2; r++) {
        use(r);
        for (int k = 0; k < 3; k++)
            CU_CHECK(rc.cuMemcpyDtoH(host + k * AR_CHECK_WORDS, g[r].b + at[k] * 4, AR_CHECK_WORDS * 4));
        for (int i = 0; i < 3 * AR_CHECK_WORDS; i++) {
            const float f = f32_bits_to_float(host[i]);
            if (f != 3.0f) {
                if (bad < 5)
                    fprintf(stderr, "%s: all-reduce (%s) of %zu floats: rank %d word %zu is %g, expected 3\n",
                            BENCH_NAME, variant == V_CW ? "cuweave" : "direct", count, r,
                            at[i / AR_CHECK_WORDS] + (size_t)(i % AR_CHECK_WORDS), (double)f);
                bad++;
            }
        }
    }
    return bad;
}

typedef struct ar_row {
    size_t bytes;
    int reps, warm;
    double *us[2], *issue[2];
    stats st[2];
    double issue_p50[2];
    double algbw[2]; /* GB/s at the median */
    double ratio;    /* median, cw / direct */
    unsigned long long wrong[2];
} ar_row;

static void ar_measure(ar_row *r) {
    const size_t count = r->bytes / 4;
    for (int v = 0; v < 2; v++) {
        r->us[v] = alloc_doubles((size_t)r->reps);
        r->issue[v] = alloc_doubles((size_t)r->reps);
        r->wrong[v] = ar_check(v, count);
    }
    for (int i = 0; i < r->warm + r->reps; i++) {
        const int first = i % 2 ? V_RAW : V_CW;
        for (int k = 0; k < 2; k++) {
            const int v = k == 0 ? first : 1 - first;
            double issue = 0;
            const double us = ar_once(v, count, &issue);
            if (i >= r->warm) {
                r->us[v][i - r->warm] = us;
                r->issue[v][i - r->warm] = issue;
            }
        }
    }
    for (int v = 0; v < 2; v++) {
        r->issue_p50[v] = median_of(r->issue[v], (size_t)r->reps);
        r->st[v] = stats_of(r->us[v], (size_t)r->reps);
        r->algbw[v] = (double)r->bytes / (r->st[v].p50 * 1e-6) / 1e9;
    }
    r->ratio = r->st[V_CW].p50 / r->st[V_RAW].p50;
}

/* ==== main ======================================================================== */

static const char *size_name(size_t bytes, char *buf, size_t size) {
    snprintf(buf, size, "%zu MiB", bytes / (size_t)MIB);
    return buf;
}

int main(void) {
    /* Before anything can load NCCL: the machines forbid NVLink multicast. */
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    const char *env = getenv("BENCH_ITERS");
    size_t iters = env && atol(env) > 0 ? (size_t)atol(env) : RT_DEFAULT_ITERS;
    if (iters < 10) iters = 10;

    printf("bench_multi: two GPUs, cuweave against the raw driver API and NCCL called directly\n"
           "  1) peer copies GPU0->GPU1 and GPU1->GPU0 (1, 64, 256 MiB): cw_copy_peer vs cuMemcpyPeerAsync on a\n"
           "     stream of the source device, same buffers; raw events; %d copies per variant after %d warm-ups,\n"
           "     alternating; and the host enqueue cost of a %d-byte copy (%d calls per variant)\n"
           "  2) resident loops (bench_resident's a): gate kernels, cw_gop_* inline, unroll 16, spin), one per GPU:\n"
           "     GPU0 alone, GPU1 alone, both together (data_ready x2, then wait_result x2); %zu round trips each after\n"
           "     %d warm-up ones, in %d blocks; out == (v+1)*3+7 checked every round trip\n"
           "  3) all-reduce float32 sum over both GPUs (1 MiB, 256 MiB): cw_comm_all_reduce vs NCCL directly;\n"
           "     %d / %d repetitions after %d / %d warm-ups, alternating; events from rank 0's start to the later\n"
           "     rank's end (joined into rank 0's stream); target cw/direct <= %.2f\n",
           COPY_REPS, COPY_WARMUP, ENQ_BYTES, ENQ_CALLS, iters, RT_WARMUP, RT_BLOCKS, AR_REPS_SMALL, AR_REPS_LARGE,
           AR_WARMUP_SMALL, AR_WARMUP_LARGE, AR_TARGET);
    fflush(stdout);

    cw_device_info info0;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info0, &drv, commit, sizeof commit, date, sizeof date);
    if (setup == 77) return 77; /* no driver or no GPU: the reason is printed */
    if (setup != 0) return setup;
    int ndev = 0;
    CW_CHECK(cw_device_count(&ndev));
    if (ndev < 2) {
        printf("SKIP: bench_multi needs two GPUs; %d visible\n", ndev);
        return 77;
    }
    *(void **)&p_cuMemcpyPeerAsync = dlsym(rc.lib, "cuMemcpyPeerAsync");
    *(void **)&p_cuEventElapsedTime = dlsym(rc.lib, "cuEventElapsedTime_v2");
    if (!p_cuEventElapsedTime) *(void **)&p_cuEventElapsedTime = dlsym(rc.lib, "cuEventElapsedTime");
    if (!p_cuMemcpyPeerAsync || !p_cuEventElapsedTime) {
        fprintf(stderr, "%s: the driver has no cuMemcpyPeerAsync or cuEventElapsedTime\n", BENCH_NAME);
        return 1;
    }

    /* ---- setup: the group, peers, streams, events, buffers ---- */
    const int devs[2] = {0, 1};
    CW_CHECK(cw_device_group_create(&set, devs, 2));
    cw_device_group_info gi;
    CW_CHECK(cw_device_group_get_info(set, &gi));
    for (int d = 0; d < 2; d++) {
        gpu *x = &g[d];
        x->ctx = gi.contexts[d];
        x->ord = gi.devices[d];
        CW_CHECK(cw_device_get_info(x->ord, &x->info));
        x->cu = bench_cu_context(x->ctx);
    }
    /* Peer access each way where the topology allows it. */
    int enabled = 0;
    cw_peer_info pi[2];
    int peer_on[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        CW_CHECK(cw_device_get_peer_info(g[k].ord, g[1 - k].ord, &pi[k]));
        if (pi[k].can_access) {
            CW_CHECK(cw_context_enable_peer(g[k].ctx, g[1 - k].ctx));
            peer_on[k] = 1;
            enabled++;
        }
    }

    for (int d = 0; d < 2; d++) {
        gpu *x = &g[d];
        CW_CHECK(cw_stream_create(&x->cs, x->ctx, NULL));
        x->cs_h = bench_cu_stream(x->cs);
        use(d);
        CU_CHECK(rc.cuStreamCreateWithPriority(&x->rs, 1 /* CU_STREAM_NON_BLOCKING */, 0));
        CU_CHECK(rc.cuEventCreate(&x->ev_start, 0));
        CU_CHECK(rc.cuEventCreate(&x->ev_end, 0));
        CU_CHECK(rc.cuEventCreate(&x->ev_join, 0x2 /* CU_EVENT_DISABLE_TIMING */));
        CU_CHECK(rc.cuMemAlloc(&x->a, BIG_BYTES));
        CU_CHECK(rc.cuMemAlloc(&x->b, BIG_BYTES));
        CU_CHECK(rc.cuMemsetD32(x->a, 0, BIG_BYTES / 4));
        CU_CHECK(rc.cuMemsetD32(x->b, 0, BIG_BYTES / 4));
        CU_CHECK(rc.cuCtxSynchronize());
    }

    printf("\nGPU0: %s (ordinal %d, %d SMs, cc %d.%d); GPU1: %s (ordinal %d, %d SMs, cc %d.%d)\n", g[0].info.name,
           g[0].ord, g[0].info.sm_count, g[0].info.cc_major, g[0].info.cc_minor, g[1].info.name, g[1].ord,
           g[1].info.sm_count, g[1].info.cc_major, g[1].info.cc_minor);
    printf("driver %d.%d, commit %s, %s\n", drv / 1000, drv % 1000 / 10, commit, date);
    printf("peer access: cw_context_enable_peer enabled %d ordered pair(s)\n", enabled);
    for (int k = 0; k < 2; k++)
        printf("  GPU%d -> GPU%d: can_access %d, perf_rank %d, native_atomics %d; enabled %d\n", k, 1 - k,
               pi[k].can_access, pi[k].perf_rank, pi[k].native_atomics, peer_on[k]);
    fflush(stdout);

    int failed = 0;

    /* ---- 1) peer copies ---- */
    printf("\nmeasuring 1) peer copies ...\n");
    fflush(stdout);
    unsigned long long copy_bad = 0;
    for (int dir = 0; dir < 2; dir++)
        for (int v = 0; v < 2; v++) {
            const unsigned long long bad = copy_check(v, dir, 1 - dir);
            if (bad) {
                fprintf(stderr, "%s: %s copy GPU%d -> GPU%d: %llu of %d words wrong\n", BENCH_NAME,
                        v == V_CW ? "cw_copy_peer" : "cuMemcpyPeerAsync", dir, 1 - dir, bad, 2 * 1024);
                failed = 1;
            }
            copy_bad += bad;
        }
    static const size_t copy_sizes[3] = {1 * MIB, 64 * MIB, 256 * MIB};
    static copy_row cr[2][3];
    for (int dir = 0; dir < 2; dir++)
        for (int i = 0; i < 3; i++) {
            cr[dir][i].src = dir;
            cr[dir][i].dst = 1 - dir;
            cr[dir][i].bytes = copy_sizes[i];
            copy_measure(&cr[dir][i]);
        }
    stats enq[2];
    double clock_ns = 0;
    enqueue_measure(enq, &clock_ns);

    char sz[32];
    printf("\n1) peer copies (GB/s at the median and p90 time; time in ms; cw/raw: median times)\n");
    printf("  %-14s %-8s %10s %10s %10s   %10s %10s %10s   %7s\n", "direction", "size", "cw GB/s", "cw p90",
           "cw ms", "raw GB/s", "raw p90", "raw ms", "cw/raw");
    for (int dir = 0; dir < 2; dir++)
        for (int i = 0; i < 3; i++) {
            const copy_row *r = &cr[dir][i];
            char what[32];
            snprintf(what, sizeof what, "GPU%d -> GPU%d", r->src, r->dst);
            printf("  %-14s %-8s %10.1f %10.1f %10.4f   %10.1f %10.1f %10.4f   %7.3f\n", what,
                   size_name(r->bytes, sz, sizeof sz), r->gbs[V_CW], r->gbs90[V_CW], r->st[V_CW].p50, r->gbs[V_RAW],
                   r->gbs90[V_RAW], r->st[V_RAW].p50, r->ratio);
        }
    printf("  copies checked: %llu wrong words\n", copy_bad);
    printf("  enqueue of one %d-byte copy GPU0 -> GPU1 (host ns per call, clock pair %.0f ns included):\n", ENQ_BYTES,
           clock_ns);
    printf("    cw_copy_peer       p50 %8.0f  p99 %8.0f  p99.9 %8.0f\n", enq[V_CW].p50, enq[V_CW].p99,
           enq[V_CW].p999);
    printf("    cuMemcpyPeerAsync  p50 %8.0f  p99 %8.0f  p99.9 %8.0f\n", enq[V_RAW].p50, enq[V_RAW].p99,
           enq[V_RAW].p999);
    printf("    cw/raw: p50 %.3f, p99 %.3f\n", enq[V_CW].p50 / enq[V_RAW].p50, enq[V_CW].p99 / enq[V_RAW].p99);
    fflush(stdout);

    /* ---- 2) resident loops ---- */
    printf("\nmeasuring 2) resident loops ...\n");
    fflush(stdout);
    int rt_ran = 0;
    char rt_skip[512] = "";
    rt_fam fam[F_COUNT];
    memset(fam, 0, sizeof fam);
    fam[F_ALONE0].label = "a) GPU0's loop alone";
    fam[F_ALONE1].label = "b) GPU1's loop alone";
    fam[F_BOTH].label = "c) both loops together";
    double rt_ratio50 = 0, rt_ratio99 = 0;
    if (!info0.can_map_host_memory || !g[1].info.can_map_host_memory) {
        snprintf(rt_skip, sizeof rt_skip, "a device cannot map host memory");
    } else {
        use(0);
        CU_CHECK(rc.cuMemHostAlloc(&host_page, 4096, 0x1 | 0x2 /* CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP */));
        memset(host_page, 0, 4096);
        rt_load(0);
        rt_load(1);
        cw_status st = rt_make(0);
        if (st == CW_SUCCESS) st = rt_make(1);
        if (st == CW_ERROR_NOT_SUPPORTED) {
            snprintf(rt_skip, sizeof rt_skip, "cw_resident_create: %s", cw_last_error()->message);
        } else {
            CW_CHECK(st);
            /* build both (and load their code) before either is launched */
            CW_CHECK(cw_resident_build(g[0].loop));
            CW_CHECK(cw_resident_build(g[1].loop));
            rt_ran = 1;
            for (int f = 0; f < F_COUNT; f++) {
                fam[f].cap = iters;
                fam[f].t = alloc_doubles(iters);
            }
            int order[F_COUNT] = {F_ALONE0, F_ALONE1, F_BOTH};
            for (int b = 0; b < RT_BLOCKS; b++) {
                shuffle(order, F_COUNT);
                const size_t rounds = iters / RT_BLOCKS + ((size_t)b < iters % RT_BLOCKS ? 1 : 0);
                for (int k = 0; k < F_COUNT; k++) rt_block(&fam[order[k]], order[k], RT_WARMUP / RT_BLOCKS, rounds);
            }
            for (int f = 0; f < F_COUNT; f++) fam[f].st = stats_of(fam[f].t, fam[f].n);
            const stats *s0 = &fam[F_ALONE0].st, *s1 = &fam[F_ALONE1].st, *sb = &fam[F_BOTH].st;
            rt_ratio50 = sb->p50 / fmax(s0->p50, s1->p50);
            rt_ratio99 = sb->p99 / fmax(s0->p99, s1->p99);
        }
        for (int d = 0; d < 2; d++)
            if (g[d].loop) cw_resident_destroy(&g[d].loop); /* all torn down: nothing runs */
    }
    if (rt_wrong) failed = 1;
    printf("\n2) resident loops (microseconds per round trip; GPU median: cw_resident_get_info iter_median_ns)\n");
    if (rt_ran) {
        printf("  %-26s %8s %8s %8s %8s %8s   %s\n", "variant", "p50", "p90", "p99", "p99.9", "max", "GPU median");
        for (int f = 0; f < F_COUNT; f++) {
            const stats *s = &fam[f].st;
            char gm[64];
            if (f == F_BOTH)
                snprintf(gm, sizeof gm, "%.2f / %.2f", fam[f].gpu_med_us[0], fam[f].gpu_med_us[1]);
            else
                snprintf(gm, sizeof gm, "%.2f", fam[f].gpu_med_us[f == F_ALONE0 ? 0 : 1]);
            printf("  %-26s %8.2f %8.2f %8.2f %8.2f %8.2f   %s\n", fam[f].label, s->p50, s->p90, s->p99, s->p999,
                   s->max, gm);
        }
        printf("  together / alone (c over the slower of a and b): p50 %.2fx, p99 %.2fx\n", rt_ratio50, rt_ratio99);
        printf("  output checks: %llu results, %llu wrong\n", rt_checked, rt_wrong);
    } else {
        printf("  skipped: %s\n", rt_skip);
    }
    fflush(stdout);

    /* ---- 3) all-reduce ---- */
    printf("\nmeasuring 3) all-reduce ...\n");
    fflush(stdout);
    char nccl_why[512] = "";
    int ar_ran = 0, nccl_ver = 0, cw_nccl_ver = 0;
    ar_row ar[2];
    memset(ar, 0, sizeof ar);
    ar[0].bytes = AR_SMALL_BYTES;
    ar[0].reps = AR_REPS_SMALL;
    ar[0].warm = AR_WARMUP_SMALL;
    ar[1].bytes = AR_LARGE_BYTES;
    ar[1].reps = AR_REPS_LARGE;
    ar[1].warm = AR_WARMUP_LARGE;
    if (nccl_open(nccl_why, sizeof nccl_why)) {
        NCCL_CHECK(nc.GetVersion(&nccl_ver));
        cw_versions versions;
        CW_CHECK(cw_get_versions(&versions));
        cw_nccl_ver = versions.nccl;
        const int ords[2] = {g[0].ord, g[1].ord};
        NCCL_CHECK(nc.CommInitAll(ncc, 2, ords));
        cw_context *const ctxs[2] = {g[0].ctx, g[1].ctx};
        CW_CHECK(cw_comm_create(&cwc, ctxs, 2));
        for (int i = 0; i < 2; i++) ar_measure(&ar[i]);
        ar_ran = 1;
        cw_comm_destroy(&cwc);
        for (int r = 0; r < 2; r++) NCCL_CHECK(nc.CommDestroy(ncc[r]));
    }
    printf("\n3) all-reduce, float32 sum, 2 ranks (microseconds; algbw = bytes per rank / median time)\n");
    int ar_pass[2] = {0, 0};
    if (ar_ran) {
        printf("  NCCL %d (direct), %d (cuweave's); NCCL_NVLS_ENABLE=%s\n", nccl_ver, cw_nccl_ver,
               getenv("NCCL_NVLS_ENABLE"));
        printf("  %-8s %-8s %9s %9s %9s %10s %11s   %s\n", "size", "variant", "p50", "p90", "max", "algbw GB/s",
               "issue p50", "check");
        for (int i = 0; i < 2; i++)
            for (int v = 0; v < 2; v++) {
                const ar_row *r = &ar[i];
                printf("  %-8s %-8s %9.1f %9.1f %9.1f %10.1f %11.1f   %s\n", size_name(r->bytes, sz, sizeof sz),
                       v == V_CW ? "cuweave" : "direct", r->st[v].p50, r->st[v].p90, r->st[v].max, r->algbw[v],
                       r->issue_p50[v], r->wrong[v] ? "WRONG" : "3.0 ok");
                if (r->wrong[v]) failed = 1;
            }
        for (int i = 0; i < 2; i++) {
            ar_pass[i] = ar[i].ratio <= AR_TARGET;
            printf("  %s: cw/direct median %.3f (p90 %.3f): %s (target <= %.2f)\n",
                   size_name(ar[i].bytes, sz, sizeof sz), ar[i].ratio, ar[i].st[V_CW].p90 / ar[i].st[V_RAW].p90,
                   pass(ar_pass[i]), AR_TARGET);
        }
    } else {
        printf("  skipped: NCCL cannot be opened: %s\n", nccl_why);
    }
    fflush(stdout);

    /* ---- the summary for docs/benchmarks.md ---- */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Two GPUs (bench_multi)\n\n");
    printf("%s, GPU0 %s, GPU1 %s, driver %d.%d, commit %s", date, g[0].info.name, g[1].info.name, drv / 1000,
           drv % 1000 / 10, commit);
    if (ar_ran) printf(", NCCL %d", nccl_ver);
    printf(". Peer access GPU0->GPU1 %s (rank %d), GPU1->GPU0 %s (rank %d).\n\n", pi[0].can_access ? "yes" : "no",
           pi[0].perf_rank, pi[1].can_access ? "yes" : "no", pi[1].perf_rank);
    printf("| measurement | cuweave | raw / direct | cw/raw |\n|---|---|---|---|\n");
    for (int dir = 0; dir < 2; dir++)
        for (int i = 0; i < 3; i++) {
            const copy_row *r = &cr[dir][i];
            printf("| peer copy GPU%d->GPU%d %s (GB/s at median, %d reps) | %.1f | %.1f | %.3f |\n", r->src, r->dst,
                   size_name(r->bytes, sz, sizeof sz), COPY_REPS, r->gbs[V_CW], r->gbs[V_RAW], r->ratio);
        }
    printf("| peer copy enqueue, %d B (host ns p50 / p99) | %.0f / %.0f | %.0f / %.0f | %.3f / %.3f |\n", ENQ_BYTES,
           enq[V_CW].p50, enq[V_CW].p99, enq[V_RAW].p50, enq[V_RAW].p99, enq[V_CW].p50 / enq[V_RAW].p50,
           enq[V_CW].p99 / enq[V_RAW].p99);
    if (rt_ran) {
        for (int f = 0; f < F_COUNT; f++)
            printf("| resident round trip, %s (us p50 / p90 / p99) | %.2f / %.2f / %.2f | - | - |\n", fam[f].label,
                   fam[f].st.p50, fam[f].st.p90, fam[f].st.p99);
        printf("| resident, together / slower alone (p50 / p99) | %.2fx / %.2fx | - | - |\n", rt_ratio50, rt_ratio99);
    } else {
        printf("| resident loops | skipped: %s | - | - |\n", rt_skip);
    }
    if (ar_ran) {
        for (int i = 0; i < 2; i++)
            printf("| all-reduce f32 sum %s (us p50 / p90; algbw GB/s) | %.1f / %.1f; %.1f | %.1f / %.1f; %.1f | "
                   "%.3f %s |\n",
                   size_name(ar[i].bytes, sz, sizeof sz), ar[i].st[V_CW].p50, ar[i].st[V_CW].p90, ar[i].algbw[V_CW],
                   ar[i].st[V_RAW].p50, ar[i].st[V_RAW].p90, ar[i].algbw[V_RAW], ar[i].ratio, pass(ar_pass[i]));
    } else {
        printf("| all-reduce | skipped: %s | - | - |\n", nccl_why);
    }
    printf("\n");

    /* ---- tear down ---- */
    for (int d = 0; d < 2; d++) {
        gpu *x = &g[d];
        use(d);
        CU_CHECK(rc.cuCtxSynchronize());
        cw_stream_destroy(&x->cs);
        CU_CHECK(rc.cuStreamDestroy(x->rs));
        CU_CHECK(rc.cuEventDestroy(x->ev_start));
        CU_CHECK(rc.cuEventDestroy(x->ev_end));
        CU_CHECK(rc.cuEventDestroy(x->ev_join));
        CU_CHECK(rc.cuMemFree(x->a));
        CU_CHECK(rc.cuMemFree(x->b));
        if (x->rbuf) CU_CHECK(rc.cuMemFree(x->rbuf));
        if (x->module) CU_CHECK(rc.cuModuleUnload(x->module));
    }
    if (host_page) CU_CHECK(rc.cuMemFreeHost(host_page));
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_device_group_destroy(&set);
    if (failed) {
        fprintf(stderr, "%s: FAILED: a result was wrong (see above)\n", BENCH_NAME);
        return 1;
    }
    return 0;
}
