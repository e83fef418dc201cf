/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_pipeline: a cuweave pipeline (include/cuweave/flow.h, buffers from
 * include/cuweave/buffer.h) against the same work written by hand with the
 * raw driver API, on one stream and on one stream per operator, measured in
 * one run on device 0.
 *
 * Workloads (kernels: the cw_pl_* kernels of tests/kernels/test_kernels.cu,
 * loaded once from the embedded fatbin with cw_module_load_image; the raw
 * variants launch the very same kernels through cuKernelGetFunction):
 *
 *   diamond  A -> (B, D) -> C. A fills N uint32 (cw_pl_fill, out[i] = v + i,
 *            v changing per frame); B and D each transform A's output into
 *            their own buffer (cw_pl_scale, out = in * 3 + 1 and in * 5 + 7),
 *            spinning BENCH_SPIN_NS (default 20 us) first on a modest grid
 *            (BENCH_GRID blocks of 256, default 32) so that the two can run
 *            side by side on the GPU; C adds them (cw_pl_sum2) and checks the
 *            frame: zeroes a 64-bit word (cw_pl_zero64), reduces its sum into
 *            it (cw_pl_reduce) and copies it back to pinned host memory.
 *   video    libvmaf's shape: per frame a reference and a distorted 8-bit
 *            1920x1080 picture uploaded from pinned host memory on
 *            per-picture streams, a 1-D blur of each (cw_pl_blur), the sum of
 *            absolute differences of the two blurred pictures into a 64-bit
 *            word (cw_pl_zero64, cw_pl_sad) and the word copied back to
 *            pinned host memory.
 *
 * Variants (same frames, same kernels, same launch configurations):
 *
 *   (a) cuweave   a cw_pipeline run by cw_pipeline_run: one operator per
 *                 stage (diamond: A, B, D, C; video: up_ref, up_dis,
 *                 blur_ref, blur_dis, sad). Each computes on the stream
 *                 cw_io_receive_stream gives it (its internal stream from the
 *                 pipeline's lease pool, ordered behind its inputs), takes a
 *                 fresh buffer per frame with cw_io_alloc (stream-ordered pool
 *                 memory, freed by the pipeline after every use) and hands it
 *                 on with cw_io_emit; uploads and the read-back with
 *                 cw_copy_to_device / cw_copy_to_host, host pictures and
 *                 result words in cw_host_alloc memory. The sink records its
 *                 stream; the host waits with cw_stream_synchronize on it.
 *                 Port memory is not used: one buffer per connection, written
 *                 again every iteration, would hold frame f + 1's writer
 *                 behind frame f's readers (or race them); a pool buffer per
 *                 frame does not, as (c)'s ring does not.
 *   (b) raw, one  everything on one non-blocking stream
 *                 (cuStreamCreateWithPriority), in the order the pipeline
 *                 runs the operators; cuStreamSynchronize.
 *   (c) raw,      one non-blocking stream per operator, ordered by hand with
 *       multi     cuEventRecord + cuStreamWaitEvent (timing-disabled events,
 *                 one per stage and buffer slot); a ring of RING buffer sets
 *                 made with cuMemAlloc, the first stage of frame f waiting
 *                 for the end of frame f - RING (the slot's last reader);
 *                 cuStreamSynchronize on the sink's stream. (b) and (c): host
 *                 pictures and result words in cuMemHostAlloc memory, device
 *                 buffers from cuMemAlloc.
 *
 * All three wait for a frame the same way: one stream synchronize on the
 * stream of the last operator (the one that copies the result back), whose
 * work is ordered behind every other stage of the frame.
 *
 * Modes:
 *   one frame at a time  enqueue one frame (a: cw_pipeline_run(p, 1)), wait
 *                        for it; latency = host time from the first enqueue
 *                        call to the return of the wait. fps per run.
 *   pipelined            enqueue BENCH_FRAMES frames back to back (a:
 *                        cw_pipeline_run(p, BENCH_FRAMES)), then wait once;
 *                        time per frame (and fps) per run, and the host's
 *                        enqueue time per frame.
 *
 * Method: a warm-up (one pipelined run of BENCH_FRAMES frames, which also
 * grows cuweave's buffer pool to its working size, and a short latency run)
 * per variant, then BENCH_RUNS rounds, each one latency run and one pipelined
 * run per variant, the variants' order rotated every round. Every variant
 * processes the same frame numbers in a round.
 *
 * Checks: every frame's result word is poisoned before the frame and checked
 * after its wait against the CPU's value (diamond: 61 fill values, sums
 * precomputed; video: 7 host picture pairs, blur and SAD precomputed); the
 * raw variants' slot f % 8 and the host picture f % 7 (or the value f % 61)
 * change from one use of a slot to the next, so work that ran before its
 * inputs were ready gives a wrong value. After the runs one probe frame per
 * variant of the diamond writes GPU timestamps (the kernels' stamp argument)
 * and the order A before B and D before C is checked on them; the B/D
 * overlap is printed (information, not a check). A wrong result is printed,
 * counted, and makes the program exit 1.
 *
 * Environment: BENCH_FRAMES (default 2000) frames per run, BENCH_RUNS
 * (default 10) runs per variant and mode, BENCH_SPIN_NS (default 20000),
 * BENCH_N (diamond elements, default 262144), BENCH_GRID (diamond blocks,
 * default 32), BENCH_THREADS (cw_pipeline_settings.threads, default 1),
 * CW_COMMIT (the commit named in the output), BENCH_CSV=dir (each variant's
 * one-at-a-time latencies as CSV, bench_common.h), BENCH_TRACE_DIR=dir ((a)'s
 * timeline of 8 pipelined frames per workload, dir/pipeline-<workload>.json,
 * docs/tracing.md). A quick run: BENCH_FRAMES=200 BENCH_RUNS=2.
 *
 * Memory: (a) allocates per frame; the pool cannot reuse a block before its
 * free has run on the GPU, so while the host is ahead of the GPU in the
 * pipelined mode the pool grows (up to BENCH_FRAMES x 4 MiB for the diamond,
 * x 8 MiB for video at the defaults); the growth is printed.
 *
 * Exits 77 without a GPU (or without the driver's library API or memory
 * pools), printing why; 1 when a call fails, a result is wrong, or a run
 * makes no progress for WATCHDOG_S seconds; 0 otherwise (a MISS against a
 * target is a result, not a failure).
 *
 * Build (after `make -j16`):
 *   cc -std=c11 -Wall -Wextra -Werror -O2 -Iinclude -Itests -o bench_pipeline bench/bench_pipeline.c \
 *      build-make/libcuweave.so.1 -ldl -lpthread -lm
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"
#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_pipeline"
#include "bench_common.h"
#include "testing/seam.h"

#define DEFAULT_FRAMES 2000
#define DEFAULT_RUNS 10
#define DEFAULT_SPIN_NS 20000
#define DEFAULT_N (1u << 18)
#define DEFAULT_GRID 32
#define WARM_LATENCY 200   /* frames of the latency warm-up (at most BENCH_FRAMES) */
#define THREADS 256        /* threads per block of every kernel but zero64 */
#define RING 8             /* raw variants: device buffer sets, frame f uses f % RING */
#define NVALUES 61         /* diamond: fill values, frame f uses f % NVALUES */
#define HOST_FRAMES 7      /* video: host picture pairs, frame f uses f % HOST_FRAMES */
#define VIDEO_W 1920
#define VIDEO_H 1080
#define WATCHDOG_S 120     /* a run (or the setup) that takes longer: exit 1 */
#define POISON 0xfeedfacecafef00dull
#define MAX_STREAMS 5
#define MAX_SHOWN 10       /* wrong results printed per variant */

#define MUL_B 3u
#define ADD_B 1u
#define MUL_D 5u
#define ADD_D 7u

#define TARGET_AC_LAT 1.05 /* a within 5% of c: latency p50 a/c at most this */
#define TARGET_AC_FPS 0.95 /* pipelined fps a/c at least this */

/* Flag values from cuda.h (the benchmark builds without it). */
#define RAW_STREAM_NON_BLOCKING 0x1u
#define RAW_EVENT_DISABLE_TIMING 0x2u

enum { V_CW, V_ONE, V_MULTI, V_COUNT };
static const char *const variant_name[V_COUNT] = {"(a) cuweave", "(b) raw, 1 stream", "(c) raw, multi"};

/* ---- driver entry points -------------------------------------------------- */

static rawcuda rc;

/* Entry points tests/rawcuda.h does not load (signatures as in cuda.h;
 * CUdeviceptr as unsigned long long, CUfunction and CUkernel as void *). */
static struct {
    rc_result (*cuMemcpyHtoDAsync)(unsigned long long, const void *, size_t, CUstream);
    rc_result (*cuMemcpyDtoHAsync)(void *, unsigned long long, size_t, CUstream);
    rc_result (*cuKernelGetFunction)(void **, void *);
    rc_result (*cuMemGetInfo)(size_t *, size_t *);
} rx;

static int rx_open(void) {
    *(void **)&rx.cuMemcpyHtoDAsync = dlsym(rc.lib, "cuMemcpyHtoDAsync_v2");
    *(void **)&rx.cuMemcpyDtoHAsync = dlsym(rc.lib, "cuMemcpyDtoHAsync_v2");
    *(void **)&rx.cuKernelGetFunction = dlsym(rc.lib, "cuKernelGetFunction");
    *(void **)&rx.cuMemGetInfo = dlsym(rc.lib, "cuMemGetInfo_v2");
    return rx.cuMemcpyHtoDAsync && rx.cuMemcpyDtoHAsync && rx.cuKernelGetFunction && rx.cuMemGetInfo;
}

/* ---- the watchdog ------------------------------------------------------------ */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "bench_pipeline: no progress within the time limit (a hang?): giving up\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

/* ---- knobs ------------------------------------------------------------------------ */

static long g_frames = DEFAULT_FRAMES;
static int g_runs = DEFAULT_RUNS;
static long long g_spin = DEFAULT_SPIN_NS;
static unsigned g_n = DEFAULT_N;
static unsigned g_grid = DEFAULT_GRID;
static unsigned g_threads = 1;

static long env_long(const char *name, long def, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_pipeline: %s=%s is not a number in [%ld, %ld]; using %ld\n", name, s, lo, hi, def);
        return def;
    }
    return v;
}

/* ---- kernels --------------------------------------------------------------------- */

enum { K_FILL, K_SCALE, K_SUM2, K_REDUCE, K_SAD, K_BLUR, K_ZERO64, K_COUNT };
static const char *const kernel_name[K_COUNT] = {"cw_pl_fill", "cw_pl_scale", "cw_pl_sum2",  "cw_pl_reduce",
                                                 "cw_pl_sad",  "cw_pl_blur",  "cw_pl_zero64"};
static cw_kernel *g_kernel[K_COUNT]; /* for cw_kernel_launch */
static void *g_fn[K_COUNT];          /* the same kernels' CUfunctions in the context (raw variants) */

static void raw_launch(int k, CUstream s, const cw_launch_config *lc, void **args) {
    CU_CHECK(rc.cuLaunchKernel(g_fn[k], lc->grid[0], 1, 1, lc->block[0], 1, 1, 0, s, args, NULL));
}

static void store_u64(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; }
static uint64_t load_u64(const uint64_t *p) { return *(const volatile uint64_t *)p; }

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- workloads: parameters and the CPU's answers ------------------------------------ */

typedef struct diamond {
    unsigned n;
    size_t bytes;
    cw_launch_config lc;  /* g_grid x THREADS: fill, scale, sum2, reduce */
    cw_launch_config lc1; /* 1 x 32: zero64 of one word */
    unsigned value[NVALUES];
    uint64_t expect[NVALUES];
} diamond;
static diamond g_d;

static unsigned d_value(long f) { return g_d.value[f % NVALUES]; }
static uint64_t d_expect(long f) { return g_d.expect[f % NVALUES]; }

static void diamond_init(void) {
    memset(&g_d, 0, sizeof g_d);
    g_d.n = g_n;
    g_d.bytes = (size_t)g_n * sizeof(uint32_t);
    cw_launch_config_default(&g_d.lc);
    g_d.lc.grid[0] = g_grid;
    g_d.lc.block[0] = THREADS;
    cw_launch_config_default(&g_d.lc1);
    g_d.lc1.block[0] = 32;
    for (int j = 0; j < NVALUES; j++) {
        const uint32_t v = 0x9e3779b9u * (uint32_t)(j + 1) + 12345u;
        uint64_t sum = 0;
        for (uint32_t i = 0; i < g_n; i++) {
            const uint32_t a = v + i;
            const uint32_t b = a * MUL_B + ADD_B, d = a * MUL_D + ADD_D;
            sum += (uint32_t)(b + d);
        }
        g_d.value[j] = v;
        g_d.expect[j] = sum;
    }
}

typedef struct video {
    unsigned n;
    size_t bytes;
    cw_launch_config lc;  /* sm_count x THREADS: blur, sad */
    cw_launch_config lc1; /* zero64 */
    unsigned char *raw_ref[HOST_FRAMES], *raw_dis[HOST_FRAMES]; /* cuMemHostAlloc: (b), (c) */
    unsigned char *cw_ref[HOST_FRAMES], *cw_dis[HOST_FRAMES];   /* cw_host_alloc: (a) */
    uint64_t expect[HOST_FRAMES];
} video;
static video g_v;

static int host_of(long f) { return (int)(f % HOST_FRAMES); }
static uint64_t v_expect(long f) { return g_v.expect[host_of(f)]; }

/* cw_pl_blur on the CPU. */
static void blur_cpu(const unsigned char *in, unsigned char *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned l = in[i > 0 ? i - 1 : i], c = in[i], r = in[i + 1 < n ? i + 1 : i];
        out[i] = (unsigned char)((l + 2 * c + r) / 4);
    }
}

static void video_init(cw_context *ctx, int sm_count) {
    memset(&g_v, 0, sizeof g_v);
    g_v.n = (unsigned)VIDEO_W * VIDEO_H;
    g_v.bytes = (size_t)g_v.n;
    cw_launch_config_default(&g_v.lc);
    g_v.lc.grid[0] = (unsigned)(sm_count > 0 ? sm_count : 1);
    g_v.lc.block[0] = THREADS;
    cw_launch_config_default(&g_v.lc1);
    g_v.lc1.block[0] = 32;
    unsigned char *ref = malloc(g_v.bytes), *dis = malloc(g_v.bytes), *bref = malloc(g_v.bytes),
                  *bdis = malloc(g_v.bytes);
    if (!ref || !dis || !bref || !bdis) {
        fprintf(stderr, "bench_pipeline: out of host memory\n");
        exit(1);
    }
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (int h = 0; h < HOST_FRAMES; h++) {
        /* reference: random bytes; distorted: the reference plus noise of
         * +-amp (clamped), amp growing with h so every pair's SAD differs */
        const int amp = 3 + 2 * h;
        uint64_t r = 0;
        for (size_t j = 0; j < g_v.bytes; j++) {
            if (j % 4 == 0) r = rng_next(&seed);
            int a = (int)(r & 255u);
            int noise = (int)(((r >> 8) & 255u) % (uint64_t)(2 * amp + 1)) - amp;
            r >>= 16;
            int b = a + noise;
            ref[j] = (unsigned char)a;
            dis[j] = (unsigned char)(b < 0 ? 0 : b > 255 ? 255 : b);
        }
        blur_cpu(ref, bref, g_v.bytes);
        blur_cpu(dis, bdis, g_v.bytes);
        uint64_t sad = 0;
        for (size_t j = 0; j < g_v.bytes; j++) sad += (uint64_t)(bref[j] > bdis[j] ? bref[j] - bdis[j] : bdis[j] - bref[j]);
        g_v.expect[h] = sad;
        void *p = NULL;
        CU_CHECK(rc.cuMemHostAlloc(&p, g_v.bytes, 0));
        g_v.raw_ref[h] = p;
        CU_CHECK(rc.cuMemHostAlloc(&p, g_v.bytes, 0));
        g_v.raw_dis[h] = p;
        CW_CHECK(cw_host_alloc(&p, ctx, g_v.bytes));
        g_v.cw_ref[h] = p;
        CW_CHECK(cw_host_alloc(&p, ctx, g_v.bytes));
        g_v.cw_dis[h] = p;
        memcpy(g_v.raw_ref[h], ref, g_v.bytes);
        memcpy(g_v.raw_dis[h], dis, g_v.bytes);
        memcpy(g_v.cw_ref[h], ref, g_v.bytes);
        memcpy(g_v.cw_dis[h], dis, g_v.bytes);
    }
    free(ref);
    free(dis);
    free(bref);
    free(bdis);
}

static void video_free(cw_context *ctx) {
    for (int h = 0; h < HOST_FRAMES; h++) {
        CU_CHECK(rc.cuMemFreeHost(g_v.raw_ref[h]));
        CU_CHECK(rc.cuMemFreeHost(g_v.raw_dis[h]));
        cw_host_free(ctx, (void **)&g_v.cw_ref[h]);
        cw_host_free(ctx, (void **)&g_v.cw_dis[h]);
    }
}

/* ---- variants ----------------------------------------------------------------------- */

struct variant;

/* (a): what the pipeline's operators share. */
typedef struct cwstate {
    struct variant *V;
    long f0, r0;              /* frame number and result slot of the run's iteration 0 */
    unsigned long long stamp; /* probe frame: device stamps, 2 words per operator; else 0 (all variants) */
    cw_stream *sink;          /* the sink's stream, recorded by its compute */
} cwstate;

typedef struct opuser {
    cwstate *P;
    int role; /* diamond: 0 A, 1 B, 2 D, 3 C; video: 0 reference, 1 distorted */
} opuser;

typedef struct variant {
    int id;
    /* results: one 64-bit word per frame of a run */
    unsigned long long dres; /* device */
    uint64_t *hres;          /* pinned host */
    cw_buffer *dres_buf;     /* (a): dres is a cw_buffer */
    unsigned long long stamp; /* diamond probe's words: 4 operators x 2 (set in P.stamp for the probe) */
    /* raw: buffer sets, streams, events */
    unsigned long long buf[4][RING];
    int nbuf;
    CUstream s[MAX_STREAMS];
    int ns;
    CUevent ev[4][RING];
    CUevent done[RING];
    int nev;
    /* (a) */
    cw_pipeline *p;
    cwstate P;
    opuser ou[5];
    /* checks */
    long checked, wrong;
} variant;

static variant g_var[V_COUNT];

typedef struct workload {
    const char *name;
    void (*raw_frame)(variant *V, long f, long r);
    uint64_t (*expect)(long f);
} workload;

/* ---- (b), (c): the frames written by hand ------------------------------------------- */

/* The stamp words (start, end) of operator op (0 A, 1 B, 2 D, 3 C) in the
 * probe frame, else 0: the kernels then write none. */
static unsigned long long stamp_of(const cwstate *P, int op) {
    return P->stamp ? P->stamp + (unsigned long long)op * 16u : 0ull;
}

static void raw_record_wait(CUevent ev, CUstream on, CUstream waiter) {
    CU_CHECK(rc.cuEventRecord(ev, on));
    CU_CHECK(rc.cuStreamWaitEvent(waiter, ev, 0));
}

/* Diamond, frame f, result word r. (b): s[0] for everything; (c): A on s[0],
 * B on s[1], D on s[2], C on s[3]. */
static void diamond_raw_frame(variant *V, long f, long r) {
    const int k = (int)(f % RING), multi = V->id == V_MULTI;
    CUstream sA = V->s[0], sB = multi ? V->s[1] : sA, sD = multi ? V->s[2] : sA, sC = multi ? V->s[3] : sA;
    unsigned long long a = V->buf[0][k], b = V->buf[1][k], d = V->buf[2][k], c = V->buf[3][k];
    unsigned long long res = V->dres + (unsigned long long)r * sizeof(uint64_t);
    /* GPU timestamps in the probe frame only, as (a)'s operators do */
    unsigned long long stA = stamp_of(&V->P, 0), stB = stamp_of(&V->P, 1), stD = stamp_of(&V->P, 2),
                       stC = stamp_of(&V->P, 3);
    unsigned n = g_d.n, value = d_value(f), mb = MUL_B, ab = ADD_B, md = MUL_D, ad = ADD_D, one = 1;
    long long ns0 = 0, spin = g_spin;
    /* slot k's last reader was frame f - RING's C */
    if (multi) CU_CHECK(rc.cuStreamWaitEvent(sA, V->done[k], 0));
    void *fa[] = {&a, &n, &value, &ns0, &stA};
    raw_launch(K_FILL, sA, &g_d.lc, fa);
    if (multi) {
        CU_CHECK(rc.cuEventRecord(V->ev[0][k], sA));
        CU_CHECK(rc.cuStreamWaitEvent(sB, V->ev[0][k], 0));
        CU_CHECK(rc.cuStreamWaitEvent(sD, V->ev[0][k], 0));
    }
    void *fb[] = {&a, &b, &n, &mb, &ab, &spin, &stB};
    raw_launch(K_SCALE, sB, &g_d.lc, fb);
    void *fd[] = {&a, &d, &n, &md, &ad, &spin, &stD};
    raw_launch(K_SCALE, sD, &g_d.lc, fd);
    if (multi) {
        raw_record_wait(V->ev[1][k], sB, sC);
        raw_record_wait(V->ev[2][k], sD, sC);
    }
    void *fc[] = {&b, &d, &c, &n, &ns0, &stC};
    raw_launch(K_SUM2, sC, &g_d.lc, fc);
    void *fz[] = {&res, &one};
    raw_launch(K_ZERO64, sC, &g_d.lc1, fz);
    void *fr[] = {&c, &n, &res, &ns0};
    raw_launch(K_REDUCE, sC, &g_d.lc, fr);
    CU_CHECK(rx.cuMemcpyDtoHAsync(&V->hres[r], res, sizeof(uint64_t), sC));
    if (multi) CU_CHECK(rc.cuEventRecord(V->done[k], sC));
}

/* Video, frame f, result word r. (b): s[0] for everything; (c): the uploads
 * on s[0] (reference) and s[1] (distorted), the blurs on s[2] and s[3], the
 * metric and the read-back on s[4]. */
static void video_raw_frame(variant *V, long f, long r) {
    const int k = (int)(f % RING), h = host_of(f), multi = V->id == V_MULTI;
    CUstream sUR = V->s[0], sUD = multi ? V->s[1] : sUR, sBR = multi ? V->s[2] : sUR, sBD = multi ? V->s[3] : sUR,
             sS = multi ? V->s[4] : sUR;
    unsigned long long dref = V->buf[0][k], ddis = V->buf[1][k], bref = V->buf[2][k], bdis = V->buf[3][k];
    unsigned long long res = V->dres + (unsigned long long)r * sizeof(uint64_t);
    unsigned n = g_v.n, one = 1;
    if (multi) {
        /* slot k's last readers were frame f - RING's blurs and metric */
        CU_CHECK(rc.cuStreamWaitEvent(sUR, V->done[k], 0));
        CU_CHECK(rc.cuStreamWaitEvent(sUD, V->done[k], 0));
    }
    CU_CHECK(rx.cuMemcpyHtoDAsync(dref, g_v.raw_ref[h], g_v.bytes, sUR));
    if (multi) raw_record_wait(V->ev[0][k], sUR, sBR);
    CU_CHECK(rx.cuMemcpyHtoDAsync(ddis, g_v.raw_dis[h], g_v.bytes, sUD));
    if (multi) raw_record_wait(V->ev[1][k], sUD, sBD);
    void *br[] = {&dref, &bref, &n};
    raw_launch(K_BLUR, sBR, &g_v.lc, br);
    if (multi) raw_record_wait(V->ev[2][k], sBR, sS);
    void *bd[] = {&ddis, &bdis, &n};
    raw_launch(K_BLUR, sBD, &g_v.lc, bd);
    if (multi) raw_record_wait(V->ev[3][k], sBD, sS);
    void *fz[] = {&res, &one};
    raw_launch(K_ZERO64, sS, &g_v.lc1, fz);
    void *fs[] = {&bref, &bdis, &n, &res};
    raw_launch(K_SAD, sS, &g_v.lc, fs);
    CU_CHECK(rx.cuMemcpyDtoHAsync(&V->hres[r], res, sizeof(uint64_t), sS));
    if (multi) CU_CHECK(rc.cuEventRecord(V->done[k], sS));
}

/* ---- (a): the operators ---------------------------------------------------------------- */

#define TRY(expr)                                                                                                     \
    do {                                                                                                              \
        cw_status t_ = (expr);                                                                                        \
        if (t_ != CW_SUCCESS) return t_;                                                                              \
    } while (0)

/* The frame and result word of this compute call. */
static cw_status frame_of(cw_io *io, const cwstate *P, long *f, long *r) {
    cw_io_info io_info = {0};
    TRY(cw_io_get_info(io, &io_info));
    uint64_t it = io_info.iteration;
    *f = P->f0 + (long)it;
    *r = P->r0 + (long)it;
    return CW_SUCCESS;
}

/* The device address of the buffer of the message on `port`. */
static cw_status input_ptr(cw_io *io, const char *port, cw_devptr *p) {
    cw_message m;
    TRY(cw_io_receive(io, port, &m));
    return cw_buffer_get_ptr(m.buffer, p);
}

/* A fresh buffer on the operator's stream, and its address for writing. */
static cw_status output_buffer(cw_io *io, size_t bytes, cw_buffer **b, cw_devptr *p) {
    TRY(cw_io_alloc(b, io, bytes));
    return cw_buffer_get_writable(*b, p);
}

/* Diamond A: fill. */
static cw_status diamond_op_fill(cw_io *io, void *user) {
    const opuser *u = user;
    long f, r;
    TRY(frame_of(io, u->P, &f, &r));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b;
    cw_devptr out;
    TRY(output_buffer(io, g_d.bytes, &b, &out));
    unsigned n = g_d.n, value = d_value(f);
    long long ns = 0;
    unsigned long long stamp = stamp_of(u->P, 0);
    void *args[] = {&out, &n, &value, &ns, &stamp};
    TRY(cw_kernel_launch(g_kernel[K_FILL], s, &g_d.lc, args));
    return cw_io_emit(io, "out", NULL, b);
}

/* Diamond B and D: scale. */
static cw_status diamond_op_scale(cw_io *io, void *user) {
    const opuser *u = user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    cw_devptr in, out;
    TRY(input_ptr(io, "in", &in));
    cw_buffer *b;
    TRY(output_buffer(io, g_d.bytes, &b, &out));
    unsigned n = g_d.n, mul = u->role == 1 ? MUL_B : MUL_D, add = u->role == 1 ? ADD_B : ADD_D;
    long long ns = g_spin;
    unsigned long long stamp = stamp_of(u->P, u->role);
    void *args[] = {&in, &out, &n, &mul, &add, &ns, &stamp};
    TRY(cw_kernel_launch(g_kernel[K_SCALE], s, &g_d.lc, args));
    return cw_io_emit(io, "out", NULL, b);
}

/* Diamond C: sum, then the frame's check word (zero, reduce, copy back). */
static cw_status diamond_op_sum(cw_io *io, void *user) {
    const opuser *u = user;
    cwstate *P = u->P;
    long f, r;
    TRY(frame_of(io, P, &f, &r));
    cw_stream *s, *s2;
    TRY(cw_io_receive_stream(io, "b", &s));
    TRY(cw_io_receive_stream(io, "d", &s2)); /* the same stream, now behind D too */
    cw_devptr b, d, c;
    TRY(input_ptr(io, "b", &b));
    TRY(input_ptr(io, "d", &d));
    cw_buffer *cb; /* not emitted: the pipeline frees it after this call's work */
    TRY(output_buffer(io, g_d.bytes, &cb, &c));
    unsigned long long res = P->V->dres + (unsigned long long)r * sizeof(uint64_t);
    unsigned n = g_d.n, one = 1;
    long long ns0 = 0;
    unsigned long long stamp = stamp_of(P, 3);
    void *fc[] = {&b, &d, &c, &n, &ns0, &stamp};
    TRY(cw_kernel_launch(g_kernel[K_SUM2], s2, &g_d.lc, fc));
    void *fz[] = {&res, &one};
    TRY(cw_kernel_launch(g_kernel[K_ZERO64], s2, &g_d.lc1, fz));
    void *fr[] = {&c, &n, &res, &ns0};
    TRY(cw_kernel_launch(g_kernel[K_REDUCE], s2, &g_d.lc, fr));
    TRY(cw_copy_to_host(s2, &P->V->hres[r], res, sizeof(uint64_t)));
    P->sink = s2;
    return CW_SUCCESS;
}

/* Video up_ref / up_dis: upload the frame's picture into a fresh buffer. */
static cw_status video_op_upload(cw_io *io, void *user) {
    const opuser *u = user;
    long f, r;
    TRY(frame_of(io, u->P, &f, &r));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b;
    cw_devptr out;
    TRY(output_buffer(io, g_v.bytes, &b, &out));
    const int h = host_of(f);
    TRY(cw_copy_to_device(s, out, u->role == 0 ? g_v.cw_ref[h] : g_v.cw_dis[h], g_v.bytes));
    return cw_io_emit(io, "out", NULL, b);
}

/* Video blur_ref / blur_dis. */
static cw_status video_op_blur(cw_io *io, void *user) {
    (void)user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    cw_devptr in, out;
    TRY(input_ptr(io, "in", &in));
    cw_buffer *b;
    TRY(output_buffer(io, g_v.bytes, &b, &out));
    unsigned n = g_v.n;
    void *args[] = {&in, &out, &n};
    TRY(cw_kernel_launch(g_kernel[K_BLUR], s, &g_v.lc, args));
    return cw_io_emit(io, "out", NULL, b);
}

/* Video sad: the metric into the frame's word, copied back. */
static cw_status video_op_sad(cw_io *io, void *user) {
    const opuser *u = user;
    cwstate *P = u->P;
    long f, r;
    TRY(frame_of(io, P, &f, &r));
    cw_stream *s, *s2;
    TRY(cw_io_receive_stream(io, "ref", &s));
    TRY(cw_io_receive_stream(io, "dis", &s2));
    cw_devptr a, b;
    TRY(input_ptr(io, "ref", &a));
    TRY(input_ptr(io, "dis", &b));
    unsigned long long res = P->V->dres + (unsigned long long)r * sizeof(uint64_t);
    unsigned n = g_v.n, one = 1;
    void *fz[] = {&res, &one};
    TRY(cw_kernel_launch(g_kernel[K_ZERO64], s2, &g_v.lc1, fz));
    void *fs[] = {&a, &b, &n, &res};
    TRY(cw_kernel_launch(g_kernel[K_SAD], s2, &g_v.lc, fs));
    TRY(cw_copy_to_host(s2, &P->V->hres[r], res, sizeof(uint64_t)));
    P->sink = s2;
    return CW_SUCCESS;
}

static void add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                   const char *in1, const char *in2, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    CW_CHECK(cw_operator_create(&op, name, &ops, user, NULL));
    if (in1) CW_CHECK(cw_operator_add_input(op, in1, NULL));
    if (in2) CW_CHECK(cw_operator_add_input(op, in2, NULL));
    if (out) CW_CHECK(cw_operator_add_output(op, out, NULL));
    CW_CHECK(cw_pipeline_add(p, op));
}

static cw_pipeline *new_pipeline(cw_context *ctx) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = g_threads;
    ps.max_in_flight = RING; /* as far ahead as (c)'s ring lets the host run */
    cw_pipeline *p = NULL;
    CW_CHECK(cw_pipeline_create(&p, ctx, &ps));
    return p;
}

static void diamond_pipeline(variant *V, cw_context *ctx) {
    cw_pipeline *p = new_pipeline(ctx);
    for (int i = 0; i < 4; i++) V->ou[i] = (opuser){&V->P, i};
    add_op(p, "A", diamond_op_fill, &V->ou[0], NULL, NULL, "out");
    add_op(p, "B", diamond_op_scale, &V->ou[1], "in", NULL, "out");
    add_op(p, "D", diamond_op_scale, &V->ou[2], "in", NULL, "out");
    add_op(p, "C", diamond_op_sum, &V->ou[3], "b", "d", NULL);
    CW_CHECK(cw_pipeline_connect(p, "A", "out", "B", "in"));
    CW_CHECK(cw_pipeline_connect(p, "A", "out", "D", "in"));
    CW_CHECK(cw_pipeline_connect(p, "B", "out", "C", "b"));
    CW_CHECK(cw_pipeline_connect(p, "D", "out", "C", "d"));
    CW_CHECK(cw_pipeline_check(p));
    V->p = p;
}

static void video_pipeline(variant *V, cw_context *ctx) {
    cw_pipeline *p = new_pipeline(ctx);
    for (int i = 0; i < 2; i++) V->ou[i] = (opuser){&V->P, i};
    add_op(p, "up_ref", video_op_upload, &V->ou[0], NULL, NULL, "out");
    add_op(p, "up_dis", video_op_upload, &V->ou[1], NULL, NULL, "out");
    add_op(p, "blur_ref", video_op_blur, &V->ou[0], "in", NULL, "out");
    add_op(p, "blur_dis", video_op_blur, &V->ou[1], "in", NULL, "out");
    add_op(p, "sad", video_op_sad, &V->ou[0], "ref", "dis", NULL);
    CW_CHECK(cw_pipeline_connect(p, "up_ref", "out", "blur_ref", "in"));
    CW_CHECK(cw_pipeline_connect(p, "up_dis", "out", "blur_dis", "in"));
    CW_CHECK(cw_pipeline_connect(p, "blur_ref", "out", "sad", "ref"));
    CW_CHECK(cw_pipeline_connect(p, "blur_dis", "out", "sad", "dis"));
    CW_CHECK(cw_pipeline_check(p));
    V->p = p;
}

/* ---- per-workload setup and teardown of a variant ---------------------------------------- */

/* Result words (frames of them), the raw variants' buffer sets, streams and
 * events, or (a)'s pipeline. nbuf buffers of `bytes` per slot; nstreams
 * streams for (c). */
static void variant_setup(variant *V, cw_context *ctx, cw_stream *aux, int nbuf, size_t bytes, int nstreams,
                          int is_video) {
    const size_t rbytes = (size_t)g_frames * sizeof(uint64_t);
    V->checked = V->wrong = 0;
    V->P = (cwstate){V, 0, 0, 0, NULL};
    if (V->id == V_CW) {
        /* result words: a cw_buffer allocated on aux, complete before any
         * pipeline stream touches it (the synchronize below) */
        cw_status st = cw_buffer_create(&V->dres_buf, aux, rbytes);
        if (st == CW_ERROR_NOT_SUPPORTED) {
            printf("SKIP: no stream-ordered memory pools on this device: %s\n", cw_last_error()->message);
            exit(77);
        }
        CW_CHECK(st);
        cw_devptr dres = 0;
        CW_CHECK(cw_buffer_get_writable(V->dres_buf, &dres));
        V->dres = dres;
        CW_CHECK(cw_stream_synchronize(aux));
        void *p = NULL;
        CW_CHECK(cw_host_alloc(&p, ctx, rbytes));
        V->hres = p;
        if (is_video)
            video_pipeline(V, ctx);
        else
            diamond_pipeline(V, ctx);
    } else {
        CU_CHECK(rc.cuMemAlloc(&V->dres, rbytes));
        void *p = NULL;
        CU_CHECK(rc.cuMemHostAlloc(&p, rbytes, 0));
        V->hres = p;
        V->nbuf = nbuf;
        for (int b = 0; b < nbuf; b++)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuMemAlloc(&V->buf[b][k], bytes));
        V->ns = V->id == V_MULTI ? nstreams : 1;
        for (int i = 0; i < V->ns; i++) CU_CHECK(rc.cuStreamCreateWithPriority(&V->s[i], RAW_STREAM_NON_BLOCKING, 0));
        V->nev = V->id == V_MULTI ? 4 : 0;
        for (int e = 0; e < V->nev; e++)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuEventCreate(&V->ev[e][k], RAW_EVENT_DISABLE_TIMING));
        if (V->id == V_MULTI)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuEventCreate(&V->done[k], RAW_EVENT_DISABLE_TIMING));
    }
    for (long r = 0; r < g_frames; r++) store_u64(&V->hres[r], POISON);
    if (!is_video) CU_CHECK(rc.cuMemAlloc(&V->stamp, 8 * sizeof(uint64_t))); /* V->P.stamp: the probe only */
}

static void variant_teardown(variant *V, cw_context *ctx) {
    if (V->id == V_CW) {
        if (V->P.sink) {
            CW_CHECK(cw_stream_synchronize(V->P.sink));
            /* the sink's stream wrote the words: the free waits for it (it
             * is done already; this is what the buffer API asks) */
            CW_CHECK(cw_buffer_use(V->dres_buf, V->P.sink));
        }
        cw_pipeline_destroy(&V->p);
        cw_buffer_destroy(&V->dres_buf);
        V->dres = 0;
        cw_host_free(ctx, (void **)&V->hres);
    } else {
        for (int i = 0; i < V->ns; i++) {
            CU_CHECK(rc.cuStreamSynchronize(V->s[i]));
            CU_CHECK(rc.cuStreamDestroy(V->s[i]));
        }
        for (int e = 0; e < V->nev; e++)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuEventDestroy(V->ev[e][k]));
        if (V->id == V_MULTI)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuEventDestroy(V->done[k]));
        for (int b = 0; b < V->nbuf; b++)
            for (int k = 0; k < RING; k++) CU_CHECK(rc.cuMemFree(V->buf[b][k]));
        CU_CHECK(rc.cuMemFree(V->dres));
        CU_CHECK(rc.cuMemFreeHost(V->hres));
    }
    if (V->stamp) CU_CHECK(rc.cuMemFree(V->stamp));
    V->stamp = 0;
    V->hres = NULL;
    V->ns = V->nev = V->nbuf = 0;
}

/* ---- running frames ------------------------------------------------------------------------ */

/* Enqueues `count` frames from f0 into result words r0... */
static void submit(variant *V, const workload *W, long f0, long r0, long count) {
    if (V->id == V_CW) {
        V->P.f0 = f0;
        V->P.r0 = r0;
        CW_CHECK(cw_pipeline_run(V->p, (uint64_t)count));
    } else {
        for (long i = 0; i < count; i++) W->raw_frame(V, f0 + i, r0 + i);
    }
}

/* The host waits until everything enqueued is done: one stream synchronize
 * on the stream of the operator that copies the results back. */
static void wait_done(variant *V) {
    if (V->id == V_CW)
        CW_CHECK(cw_stream_synchronize(V->P.sink));
    else
        CU_CHECK(rc.cuStreamSynchronize(V->s[V->ns - 1]));
}

static void check_range(variant *V, const workload *W, long f0, long r0, long count) {
    for (long i = 0; i < count; i++) {
        const uint64_t got = load_u64(&V->hres[r0 + i]), want = W->expect(f0 + i);
        V->checked++;
        if (got != want && V->wrong++ < MAX_SHOWN)
            fprintf(stderr, "bench_pipeline: WRONG %s, %s, frame %ld (word %ld): GPU %llu, CPU %llu%s\n", W->name,
                    variant_name[V->id], f0 + i, r0 + i, (unsigned long long)got, (unsigned long long)want,
                    got == POISON ? " (no result copied back)" : "");
    }
    if (V->wrong > MAX_SHOWN && V->wrong - (long)count <= MAX_SHOWN)
        fprintf(stderr, "bench_pipeline: (further wrong results of %s, %s are counted, not printed)\n", W->name,
                variant_name[V->id]);
}

/* One frame at a time, count frames from f0; lat (may be NULL) gets each
 * frame's latency in microseconds. Returns the run's frames per second. */
static double run_latency(variant *V, const workload *W, long f0, long count, double *lat) {
    alarm(WATCHDOG_S);
    const unsigned long long t0 = now_ns();
    for (long i = 0; i < count; i++) {
        store_u64(&V->hres[i], POISON);
        const unsigned long long a = now_ns();
        submit(V, W, f0 + i, i, 1);
        wait_done(V);
        const unsigned long long b = now_ns();
        if (lat) lat[i] = (double)(b - a) / 1e3;
        check_range(V, W, f0 + i, i, 1);
    }
    const unsigned long long t1 = now_ns();
    alarm(0);
    return (double)count / ((double)(t1 - t0) / 1e9);
}

/* count frames from f0 enqueued back to back, then one wait. Returns
 * microseconds per frame; *enq_us: the host's enqueue time per frame. */
static double run_pipelined(variant *V, const workload *W, long f0, long count, double *enq_us) {
    alarm(WATCHDOG_S);
    for (long i = 0; i < count; i++) store_u64(&V->hres[i], POISON);
    const unsigned long long t0 = now_ns();
    submit(V, W, f0, 0, count);
    const unsigned long long t1 = now_ns();
    wait_done(V);
    const unsigned long long t2 = now_ns();
    check_range(V, W, f0, 0, count);
    alarm(0);
    if (enq_us) *enq_us = (double)(t1 - t0) / 1e3 / (double)count;
    return (double)(t2 - t0) / 1e3 / (double)count;
}

/* ---- the diamond probe: GPU timestamps of one frame ------------------------------------------ */

typedef struct probe {
    double bd_overlap_us; /* B and D both running (block 0 of each) */
    double b_us, d_us;    /* B's and D's span (block 0) */
    int order_ok;
} probe;

static probe run_probe(variant *V, const workload *W, long f) {
    CU_CHECK(rc.cuMemsetD32(V->stamp, 0, 16));
    V->P.stamp = V->stamp; /* every variant passes stamps for this frame only */
    store_u64(&V->hres[0], POISON);
    alarm(WATCHDOG_S);
    submit(V, W, f, 0, 1);
    wait_done(V);
    alarm(0);
    check_range(V, W, f, 0, 1);
    V->P.stamp = 0;
    uint64_t t[8];
    CU_CHECK(rc.cuMemcpyDtoH(t, V->stamp, sizeof t));
    /* t[2i], t[2i+1]: start and end (block 0) of A, B, D, C */
    probe pr;
    int all = 1;
    for (int i = 0; i < 8; i++) all = all && t[i] != 0;
    pr.order_ok = all && t[0] <= t[1] && t[1] <= t[2] && t[1] <= t[4] && t[2] <= t[3] && t[4] <= t[5] &&
                  t[3] <= t[6] && t[5] <= t[6] && t[6] <= t[7];
    const uint64_t lo = t[2] > t[4] ? t[2] : t[4], hi = t[3] < t[5] ? t[3] : t[5];
    pr.bd_overlap_us = hi > lo ? (double)(hi - lo) / 1e3 : 0.0;
    pr.b_us = t[3] > t[2] ? (double)(t[3] - t[2]) / 1e3 : 0.0;
    pr.d_us = t[5] > t[4] ? (double)(t[5] - t[4]) / 1e3 : 0.0;
    if (!pr.order_ok) {
        V->wrong++;
        fprintf(stderr,
                "bench_pipeline: WRONG %s, %s, probe frame %ld: GPU timestamps out of dependency order "
                "(A %llu..%llu, B %llu..%llu, D %llu..%llu, C %llu..%llu)\n",
                W->name, variant_name[V->id], f, (unsigned long long)t[0], (unsigned long long)t[1],
                (unsigned long long)t[2], (unsigned long long)t[3], (unsigned long long)t[4],
                (unsigned long long)t[5], (unsigned long long)t[6], (unsigned long long)t[7]);
    }
    V->checked++;
    return pr;
}

/* ---- one workload ------------------------------------------------------------------------------ */

typedef struct result {
    const char *name;
    stats lat[V_COUNT];  /* one at a time: microseconds per frame */
    stats lfps[V_COUNT]; /* one at a time: fps per run */
    stats pus[V_COUNT];  /* pipelined: microseconds per frame per run */
    stats enq[V_COUNT];  /* pipelined: host enqueue microseconds per frame per run */
    probe pr[V_COUNT];
    int have_probe;
    double grew_mib;     /* device memory in use, after the runs minus before the setup */
    cw_pipeline_info pst;
} result;

static double mem_used_mib(void) {
    size_t fr = 0, total = 0;
    CU_CHECK(rx.cuMemGetInfo(&fr, &total));
    return (double)(total - fr) / (1024.0 * 1024.0);
}

static void run_workload(result *R, const workload *W, cw_context *ctx, cw_stream *aux, int is_video) {
    R->name = W->name;
    alarm(WATCHDOG_S);
    const double mem0 = mem_used_mib();
    for (int v = 0; v < V_COUNT; v++) {
        g_var[v].id = v;
        if (is_video)
            variant_setup(&g_var[v], ctx, aux, 4, g_v.bytes, 5, 1);
        else
            variant_setup(&g_var[v], ctx, aux, 4, g_d.bytes, 4, 0);
    }
    alarm(0);

    const long F = g_frames;
    const int runs = g_runs;
    double *lat[V_COUNT], *lfps[V_COUNT], *pus[V_COUNT], *enq[V_COUNT];
    for (int v = 0; v < V_COUNT; v++) {
        lat[v] = malloc(sizeof(double) * (size_t)F * (size_t)runs);
        lfps[v] = malloc(sizeof(double) * (size_t)runs);
        pus[v] = malloc(sizeof(double) * (size_t)runs);
        enq[v] = malloc(sizeof(double) * (size_t)runs);
        if (!lat[v] || !lfps[v] || !pus[v] || !enq[v]) {
            fprintf(stderr, "bench_pipeline: out of host memory\n");
            exit(1);
        }
    }

    /* Frame numbers run on without a gap; every variant gets the same ones. */
    long next = 0;
    const long warm = F < WARM_LATENCY ? F : WARM_LATENCY;
    for (int v = 0; v < V_COUNT; v++) (void)run_pipelined(&g_var[v], W, next, F, NULL);
    next += F;
    for (int v = 0; v < V_COUNT; v++) (void)run_latency(&g_var[v], W, next, warm, NULL);
    next += warm;
    for (int r = 0; r < runs; r++) {
        for (int j = 0; j < V_COUNT; j++) {
            const int v = (r + j) % V_COUNT;
            lfps[v][r] = run_latency(&g_var[v], W, next, F, lat[v] + (size_t)r * (size_t)F);
        }
        next += F;
        for (int j = 0; j < V_COUNT; j++) {
            const int v = (r + j) % V_COUNT;
            pus[v][r] = run_pipelined(&g_var[v], W, next, F, &enq[v][r]);
        }
        next += F;
    }
    const char *trace_dir = getenv("BENCH_TRACE_DIR");
    if (trace_dir && *trace_dir) {
        /* A timeline of (a): 8 pipelined frames traced (cw_pipeline_set_trace),
         * written to BENCH_TRACE_DIR/pipeline-<workload>.json (docs/tracing.md). */
        cw_trace *t = NULL;
        CW_CHECK(cw_trace_create(&t, NULL));
        CW_CHECK(cw_pipeline_set_trace(g_var[V_CW].p, t));
        (void)run_pipelined(&g_var[V_CW], W, next, 8, NULL);
        next += 8;
        CW_CHECK(cw_pipeline_set_trace(g_var[V_CW].p, NULL));
        char path[512];
        snprintf(path, sizeof path, "%s/pipeline-%s.json", trace_dir, W->name);
        CW_CHECK(cw_trace_write(t, path));
        printf("trace: %s\n", path);
        cw_trace_destroy(&t);
    }
    if (getenv("BENCH_PROFILE")) {
        /* Where the host time of (a)'s pipelined frames goes: every driver
         * call through the test seam, timed; the rest is cuweave's own code
         * and the operators'. */
        variant *V = &g_var[V_CW];
        if (cwi_seam_enable() != 0) exit(1);
        cwi_seam_timing(1);
        cwi_seam_reset();
        double enq = 0;
        (void)run_pipelined(V, W, next, F, &enq);
        next += F;
        cwi_seam_timing(0);
        const double drv_us = (double)cwi_seam_ns(-1) / 1e3 / (double)F;
        printf("profile, %s, (a) pipelined: enqueue %.2f us/frame, of which driver calls %.2f us "
               "(the wait at the end excluded)\n", W->name, enq, drv_us);
        for (int id = 0; id < cwi_seam_entry_count(); id++) {
            const unsigned long n = cwi_seam_calls(id);
            if (n) printf("  %-26s %6.2f calls/frame %8.2f us/frame\n", cwi_seam_entry_name(id), (double)n / (double)F,
                          (double)cwi_seam_ns(id) / 1e3 / (double)F);
        }
        cwi_seam_disable();
    }
    R->have_probe = !is_video;
    if (!is_video)
        for (int v = 0; v < V_COUNT; v++) R->pr[v] = run_probe(&g_var[v], W, next);
    R->grew_mib = mem_used_mib() - mem0;
    CW_CHECK(cw_pipeline_get_info(g_var[V_CW].p, &R->pst));

    for (int v = 0; v < V_COUNT; v++) {
        char label[160];
        snprintf(label, sizeof label, "%s %s one at a time", W->name, variant_name[v]);
        bench_csv_us(label, lat[v], (size_t)F * (size_t)runs);
        R->lat[v] = stats_of(lat[v], (size_t)F * (size_t)runs);
        R->lfps[v] = stats_of(lfps[v], (size_t)runs);
        R->pus[v] = stats_of(pus[v], (size_t)runs);
        R->enq[v] = stats_of(enq[v], (size_t)runs);
        free(lat[v]);
        free(lfps[v]);
        free(pus[v]);
        free(enq[v]);
    }
}

static void print_workload(const result *R) {
    printf("%s, one frame at a time: latency in microseconds (first enqueue call to the end of the wait), "
           "%ld frames x %d runs per variant; fps per run\n",
           R->name, g_frames, g_runs);
    printf("  %-18s %9s %9s %9s %9s %9s %10s\n", "variant", "p50", "p90", "p99", "p99.9", "max", "fps p50");
    for (int v = 0; v < V_COUNT; v++) {
        const stats *l = &R->lat[v];
        printf("  %-18s %9.2f %9.2f %9.2f %9.2f %9.2f %10.0f\n", variant_name[v], l->p50, l->p90, l->p99, l->p999,
               l->max, R->lfps[v].p50);
    }
    printf("%s, pipelined: %ld frames enqueued back to back, then one wait; per run: microseconds per frame,\n"
           "  fps, and the host's enqueue time per frame (%d runs per variant; fps p99: at the p99 time per\n"
           "  frame, the slow tail)\n",
           R->name, g_frames, g_runs);
    printf("  %-18s %11s %11s %10s %10s %12s\n", "variant", "us/fr p50", "us/fr p99", "fps p50", "fps p99",
           "enqueue p50");
    for (int v = 0; v < V_COUNT; v++)
        printf("  %-18s %11.2f %11.2f %10.0f %10.0f %12.2f\n", variant_name[v], R->pus[v].p50, R->pus[v].p99,
               1e6 / R->pus[v].p50, 1e6 / R->pus[v].p99, R->enq[v].p50);
    const double lat_ac = R->lat[V_CW].p50 / R->lat[V_MULTI].p50, lat_ac99 = R->lat[V_CW].p99 / R->lat[V_MULTI].p99;
    const double fps_ac = R->pus[V_MULTI].p50 / R->pus[V_CW].p50;
    printf("ratios:\n");
    printf("  a/c (cuweave against the hand-written multi-stream code): latency p50 %.3f, p99 %.3f "
           "(target <= %.2f: %s); pipelined fps %.3f (target >= %.2f: %s)\n",
           lat_ac, lat_ac99, TARGET_AC_LAT, pass(lat_ac <= TARGET_AC_LAT), fps_ac, TARGET_AC_FPS,
           pass(fps_ac >= TARGET_AC_FPS));
    printf("  speed-up from overlap, c over b: latency p50 %.3fx, p99 %.3fx; pipelined fps %.3fx\n",
           R->lat[V_ONE].p50 / R->lat[V_MULTI].p50, R->lat[V_ONE].p99 / R->lat[V_MULTI].p99,
           R->pus[V_ONE].p50 / R->pus[V_MULTI].p50);
    printf("  speed-up from overlap, a over b: latency p50 %.3fx, p99 %.3fx; pipelined fps %.3fx\n",
           R->lat[V_ONE].p50 / R->lat[V_CW].p50, R->lat[V_ONE].p99 / R->lat[V_CW].p99,
           R->pus[V_ONE].p50 / R->pus[V_CW].p50);
    if (R->have_probe) {
        printf("probe (one frame with GPU timestamps, block 0 of each kernel): B and D run %.1f us each at the\n"
               "  spin set; the time both run at once:\n", (double)g_spin / 1e3);
        for (int v = 0; v < V_COUNT; v++)
            printf("  %-18s B %.1f us, D %.1f us, overlap %.1f us; dependency order on the GPU: %s\n",
                   variant_name[v], R->pr[v].b_us, R->pr[v].d_us, R->pr[v].bd_overlap_us,
                   R->pr[v].order_ok ? "ok" : "VIOLATED");
    }
    printf("(a)'s pipeline: %llu iterations, %llu compute calls, %llu skipped, %llu pool fallbacks (all runs so far)\n",
           (unsigned long long)R->pst.iterations, (unsigned long long)R->pst.computes,
           (unsigned long long)R->pst.skipped, (unsigned long long)R->pst.fallbacks);
    printf("device memory in use grew by %.0f MiB over the workload (raw buffer sets, result words, and the\n"
           "  cuweave buffer pool, which keeps what it grew to)\n",
           R->grew_mib);
    fflush(stdout);
}

/* ---- main ------------------------------------------------------------------------------------- */

int main(void) {
    g_frames = env_long("BENCH_FRAMES", DEFAULT_FRAMES, 1, 1000000);
    g_runs = (int)env_long("BENCH_RUNS", DEFAULT_RUNS, 1, 100000);
    g_spin = env_long("BENCH_SPIN_NS", DEFAULT_SPIN_NS, 0, 100000000);
    g_n = (unsigned)env_long("BENCH_N", DEFAULT_N, 1, 1L << 28);
    g_grid = (unsigned)env_long("BENCH_GRID", DEFAULT_GRID, 1, 65535);
    g_threads = (unsigned)env_long("BENCH_THREADS", 1, 1, 256);

    printf("bench_pipeline: a cuweave pipeline against the same work on the raw driver API, on one stream and\n"
           "on one stream per operator\n"
           "  diamond     : A fill -> (B scale, D scale) -> C sum2 + check (zero64, reduce, copy back);\n"
           "                %u uint32, %u blocks of %d threads, B and D spin %.1f us each\n"
           "  video       : per frame a reference and a distorted 8-bit %dx%d picture uploaded from pinned\n"
           "                memory on per-picture streams, cw_pl_blur of each, cw_pl_sad into a 64-bit word\n"
           "                (zero64 first), the word copied back\n"
           "  (a) cuweave : cw_pipeline_run, one operator per stage, cw_io_receive_stream / cw_io_alloc /\n"
           "                cw_io_emit, cw_copy_to_device / cw_copy_to_host, cw_host_alloc memory,\n"
           "                executor threads %u; waits with cw_stream_synchronize on the sink's stream\n"
           "  (b) raw     : everything on one non-blocking stream; cuStreamSynchronize\n"
           "  (c) raw     : a non-blocking stream per operator, cuEventRecord + cuStreamWaitEvent placed by\n"
           "                hand, a ring of %d buffer sets; cuStreamSynchronize on the sink's stream\n"
           "  modes       : one frame at a time (latency, fps) and pipelined (%ld frames, then one wait)\n"
           "  method      : a warm-up per variant, then %d rounds of one run per variant and mode, the\n"
           "                variants' order rotated each round; every result checked\n",
           g_n, g_grid, THREADS, (double)g_spin / 1e3, VIDEO_W, VIDEO_H, g_threads, RING, g_frames, g_runs);
    fflush(stdout);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(WATCHDOG_S);

    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup == 77) return 77; /* no GPU: bench_setup said why */
    if (setup != 0) return setup;
    if (!rx_open()) {
        fprintf(stderr, "bench_pipeline: the driver lacks cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, "
                        "cuKernelGetFunction or cuMemGetInfo_v2\n");
        return 1;
    }
    unsigned ver = cw_version();
    printf("device 0: %s (sm_%d%d, %d SMs, %d copy engines), driver %d.%d, cuweave %u.%u.%u, commit %s, %s\n",
           info.name, info.cc_major, info.cc_minor, info.sm_count, info.async_engines, drv / 1000, drv % 1000 / 10,
           CW_VERSION_PACK_MAJOR(ver), CW_VERSION_PACK_MINOR(ver), CW_VERSION_PACK_PATCH(ver), commit, date);
    if (!info.memory_pools) {
        printf("SKIP: device 0 has no stream-ordered memory pools (cw_io_alloc needs them)\n");
        return 77;
    }

    /* the context, current on this thread for the whole run */
    cw_context *ctx = NULL;
    CUcontext cuctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cuctx = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cuctx));

    /* the kernels: loaded once, the same for every variant */
    cw_module *mod = NULL;
    cw_status st = cw_module_load_image(&mod, cw_test_kernels_fatbin);
    if (st == CW_ERROR_NOT_SUPPORTED) {
        printf("SKIP: the driver has no library API: %s\n", cw_last_error()->message);
        return 77;
    }
    CW_CHECK(st);
    for (int k = 0; k < K_COUNT; k++) {
        CW_CHECK(cw_module_get_kernel(mod, kernel_name[k], &g_kernel[k]));
        CW_CHECK(cw_kernel_preload(g_kernel[k], ctx));
        void *cukernel = NULL;
        CW_CHECK(cw_kernel_get_handle(g_kernel[k], &cukernel));
        CU_CHECK(rx.cuKernelGetFunction(&g_fn[k], cukernel));
    }
    cw_stream *aux = NULL; /* (a)'s result words are allocated on it */
    CW_CHECK(cw_stream_create(&aux, ctx, NULL));

    diamond_init();
    video_init(ctx, info.sm_count);
    alarm(0);

    static const workload w_diamond = {"diamond", diamond_raw_frame, d_expect};
    static const workload w_video = {"video", video_raw_frame, v_expect};
    result res[2];
    const workload *W[2] = {&w_diamond, &w_video};
    long checked = 0, wrong = 0;
    for (int w = 0; w < 2; w++) {
        printf("\n%s: running ...\n", W[w]->name);
        fflush(stdout);
        run_workload(&res[w], W[w], ctx, aux, w == 1);
        print_workload(&res[w]);
        alarm(WATCHDOG_S);
        for (int v = 0; v < V_COUNT; v++) {
            printf("  %-18s %ld results checked, %ld wrong\n", variant_name[v], g_var[v].checked, g_var[v].wrong);
            checked += g_var[v].checked;
            wrong += g_var[v].wrong;
            variant_teardown(&g_var[v], ctx);
        }
        alarm(0);
    }

    /* the summary */
    printf("\n---- summary: bench_pipeline, %s, %s, driver %d.%d, commit %s ----\n", date, info.name, drv / 1000,
           drv % 1000 / 10, commit);
    printf("diamond: %u uint32, B and D spin %.1f us; video: %dx%d; %ld frames x %d runs; latency in us,\n"
           "pipelined fps = 1e6 / (median us per frame)\n",
           g_n, (double)g_spin / 1e3, VIDEO_W, VIDEO_H, g_frames, g_runs);
    printf("| workload | variant | latency p50 / p99 | fps, one at a time | fps, pipelined (p50 / p99 run) | enqueue us/frame |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    for (int w = 0; w < 2; w++)
        for (int v = 0; v < V_COUNT; v++)
            printf("| %s | %s | %.1f / %.1f | %.0f | %.0f / %.0f | %.2f |\n", res[w].name, variant_name[v],
                   res[w].lat[v].p50, res[w].lat[v].p99, res[w].lfps[v].p50, 1e6 / res[w].pus[v].p50,
                   1e6 / res[w].pus[v].p99, res[w].enq[v].p50);
    printf("\n| workload | a/c latency p50 | a/c fps pipelined | c/b speed-up (latency, fps) | a/b speed-up (latency, fps) |\n");
    printf("| --- | --- | --- | --- | --- |\n");
    for (int w = 0; w < 2; w++) {
        const result *R = &res[w];
        const double lat_ac = R->lat[V_CW].p50 / R->lat[V_MULTI].p50, fps_ac = R->pus[V_MULTI].p50 / R->pus[V_CW].p50;
        printf("| %s | %.3f %s | %.3f %s | %.2fx, %.2fx | %.2fx, %.2fx |\n", R->name, lat_ac,
               pass(lat_ac <= TARGET_AC_LAT), fps_ac, pass(fps_ac >= TARGET_AC_FPS),
               R->lat[V_ONE].p50 / R->lat[V_MULTI].p50, R->pus[V_ONE].p50 / R->pus[V_MULTI].p50,
               R->lat[V_ONE].p50 / R->lat[V_CW].p50, R->pus[V_ONE].p50 / R->pus[V_CW].p50);
    }
    printf("\ntargets: a within 5%% of c (latency p50 a/c <= %.2f, pipelined fps a/c >= %.2f); PASS/MISS are results\n",
           TARGET_AC_LAT, TARGET_AC_FPS);
    printf("results checked: %ld, wrong: %ld: %s\n", checked, wrong, wrong ? "FAIL" : "all correct");
    printf("---- end ----\n");

    alarm(WATCHDOG_S);
    cw_stream_destroy(&aux);
    video_free(ctx);
    cw_module_destroy(&mod);
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    alarm(0);
    return wrong ? 1 : 0;
}
