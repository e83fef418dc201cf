/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_pipeline_wide: how far the CPU-driven executor's worker threads
 * (cw_pipeline_settings.threads, include/cuweave/flow.h) scale on a wide
 * pipeline of host-heavy operators, against a plain pthread pool written
 * here on the raw driver API doing the same host work and launching the same
 * kernels with the same number of threads (issue 26, deliverable 3).
 *
 * The pipeline (one frame = one iteration):
 *
 *            +-> b0_1 -> b0_2 -+
 *     src ---+-> b1_1 -> b1_2 -+--> sink
 *            |   ...           |
 *            +-> b7_1 -> b7_2 -+
 *
 *   src    fills the frame's source word (cw_pl_fill, 1 uint32: a value that
 *          changes per frame);
 *   bB_S   8 independent branches of 2 host-heavy operators: each call first
 *          does a fixed amount of real host work, BENCH_HOST_US (default 50)
 *          microseconds of it as calibrated on one thread at the start:
 *          `passes` rounds of a 64-bit FNV-1a-style hash over the operator's
 *          own 16 KiB host buffer, seeded by the frame and the operator (a
 *          dependent multiply chain: nothing to vectorise or skip; not a
 *          sleep), then launches cw_pl_scale on one word: out = in * (h | 1)
 *          + (h >> 32), h the hash. The GPU result so depends on the host
 *          work and on the order of the kernels;
 *   sink   joins the 8 branches, zeroes the frame's 64-bit result word
 *          (cw_pl_zero64), sums the 8 branch words into it (cw_pl_reduce)
 *          and copies it back to pinned host memory; checked against the
 *          CPU's value (precomputed) for every frame.
 * Kernels: tests/kernels' embedded fatbin (cw_module_load_image), 1 block of
 * 32 threads each; the raw pool launches the very same kernels through
 * cuKernelGetFunction. Device words: a ring of RING slots of one frame's
 * words (cuMemAlloc, both variants alike), frame i using slot i % RING; the
 * host never runs more than RING frames ahead of the GPU, so a slot is never
 * rewritten while a frame still reads it.
 *
 * Variants, each run with 1, 2, 4, 8 workers (and 16 when the host has 16
 * CPUs or more; BENCH_MAX_WORKERS caps the list):
 *   cuweave   cw_pipeline_run, settings.threads = N, max_in_flight = RING:
 *             18 operators, each computing on the stream
 *             cw_io_receive_stream gives it (its own internal stream,
 *             ordered behind its inputs with the pipeline's events), the
 *             sink's input a CW_PORT_MANY port with the 8 branches;
 *             messages carry no buffer (the words are the bench's ring).
 *             N = 1 runs every call on the calling thread.
 *   raw pool  N persistent pthreads (made once per N, the context current
 *             on each) beside the calling thread: the calling
 *             thread runs src, hands the 8 branches to the pool (a mutex, a
 *             condition variable, one branch per pick; a worker runs its
 *             branch's two calls one after the other on the branch's
 *             stream), waits for the 8, runs the sink. One non-blocking
 *             stream per branch, one for src, one for the sink, ordered with
 *             cuEventRecord + cuStreamWaitEvent (src -> each branch, each
 *             branch -> sink); before frame i the host waits
 *             (cuEventSynchronize) for frame i - RING's sink, as the
 *             executor's max_in_flight does. N = 1 runs everything on the
 *             calling thread, as the executor does.
 * Both variants keep a barrier per frame (the executor's iterations follow
 * one another; the pool waits for the 8 branches before the sink) and do
 * the same host work, the same kernels and the same copies: what differs is
 * the executor (per-operator streams and events, marks, messages, its lock
 * and wake-ups, its worker threads started per cw_pipeline_run) against the
 * hand-written pool.
 *
 * Modes:
 *   pipelined            BENCH_FRAMES frames back to back (cuweave: one
 *                        cw_pipeline_run of them), then one wait; fps per run.
 *   one frame at a time  a frame (cuweave: cw_pipeline_run(p, 1)), then its
 *                        wait; latency = host time from the submit to the
 *                        end of the wait.
 * Method: per worker count, both variants set up, a warm-up (one pipelined
 * run, a short latency run) each, then BENCH_RUNS rounds of one latency run
 * and one pipelined run per variant, the variants' order alternated.
 *
 * What limits the scaling, and what the bench measures of it. The public API
 * has no counters of the executor's lock waits or idle workers
 * (cw_pipeline_info counts iterations and calls), so every operator call
 * stamps itself from the inside: its start and end, the span of its host
 * work, and which thread ran it. From these the bench prints, per variant
 * and worker count (medians over the pipelined runs):
 *   work/call  the host work's time per call: it grows when the workers
 *              share cores (SMT siblings, frequency, caches), and then no
 *              scheduler can scale;
 *   enq/call   the rest of a branch call (stream ordering, the launch): it
 *              grows where the driver's calls from several threads wait on
 *              each other (cuweave makes about 81 driver calls per frame,
 *              the pool 47: a mark per call, a stream wait per input, a
 *              context switch per call; BENCH_PROFILE shows them);
 *   busy       compute time of all calls / (workers x wall time): the rest
 *              is the workers' idle time, waiting for work or for the lock;
 *   hand-off   from a branch's first call returning to its second starting:
 *              (cuweave) the call's marks, the lock, the queue, a wake-up;
 *              (raw) the same thread goes on, nearly 0;
 *   fork       from src returning to the first branch call starting (a
 *              wake-up of an idle worker);
 *   join       from the last branch call returning to the sink starting;
 *   gap        from the sink returning to the next frame's src starting
 *              (cuweave: the iteration's end, its marks, the in-flight wait);
 *   start      one frame at a time: from the submit to src starting
 *              (cuweave: the run starts its N worker threads per call).
 * The bound: with H the host work per frame (16 calls), N workers cannot go
 * below H / N per frame (the ideal printed), and never below H / 8: only 8
 * branches exist, a branch's two calls run one after the other, so beyond 8
 * workers nothing is left to run (the 16-worker row shows it). Below that
 * the serial part of a frame (src, the sink, the hand-offs, the iteration's
 * end: nothing of the next frame starts before the sink returns) is Amdahl's
 * serial fraction, and it grows with the executor's hand-off costs. The
 * printed "where scaling stops" names the first worker count whose doubling
 * gains under 25% and the figures above at that count.
 *
 * Checks: every frame's result word is poisoned before the frame and checked
 * after its wait against the CPU's value (NVALUES source values, the hashes
 * and sums precomputed); the ring slot changes from frame to frame, so a
 * kernel run before its inputs were ready gives a wrong value; the sink
 * checks it got 8 messages. A wrong result is printed, counted, and makes
 * the program exit 1.
 *
 * BENCH_PROFILE=1 adds, per worker count, one more pipelined cuweave run with
 * every driver call the library makes timed through the test seam (all
 * threads): the driver's share of the executor's cost per frame.
 *
 * Environment: BENCH_FRAMES (default 400) frames per run, BENCH_RUNS
 * (default 5) rounds, BENCH_HOST_US (default 50) host work per branch call,
 * BENCH_MAX_WORKERS (default 16, the list stops at 8 on a host with fewer
 * than 16 CPUs), CW_COMMIT (the commit named in the output). The defaults
 * take about 20-30 s on a 16-CPU H100 machine; a quick run: BENCH_FRAMES=100
 * BENCH_RUNS=2 (a few seconds).
 *
 * Exits 77 without a GPU (or without the driver's library API), printing
 * why; 1 when a call fails, a result is wrong, or a run makes no progress
 * for WATCHDOG_S seconds; 0 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
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

#define BENCH_NAME "bench_pipeline_wide"
#include "bench_common.h"
#include "testing/seam.h"

#define DEFAULT_FRAMES 400
#define DEFAULT_RUNS 5
#define DEFAULT_HOST_US 50
#define WARM_LATENCY 100 /* frames of the latency warm-up (at most BENCH_FRAMES) */
#define BRANCHES 8
#define NODES (2 + 2 * BRANCHES) /* src, 16 branch calls, sink */
#define NODE_SRC 0
#define NODE_SINK (NODES - 1)
#define RING 8           /* device word slots; max_in_flight */
#define SLOT_WORDS 32    /* uint32 per slot (128 bytes): [0] src, [8 + b] stage 1, [16 + b] stage 2 */
#define NVALUES 61       /* source values: frame f uses f % NVALUES */
#define HOST_WORDS 2048  /* 16 KiB of host data per branch operator */
#define MAX_WORKERS 16
#define MAX_COUNTS 5     /* 1, 2, 4, 8, 16 */
#define WATCHDOG_S 120
#define POISON 0xfeedfacecafef00dull
#define MAX_SHOWN 10
#define RAW_CALLS_PER_FRAME 47 /* the raw pool's driver calls per frame (see the profile) */
#define STOP_GAIN 1.25 /* a doubling of the workers that gains less: scaling stopped */

#define RAW_STREAM_NON_BLOCKING 0x1u
#define RAW_EVENT_DISABLE_TIMING 0x2u

enum { V_CW, V_RAW, V_COUNT };
static const char *const variant_name[V_COUNT] = {"cuweave", "raw pool"};

/* ---- the driver --------------------------------------------------------------------------- */

static rawcuda rc;
static struct {
    rc_result (*cuMemcpyDtoHAsync)(void *, unsigned long long, size_t, CUstream);
    rc_result (*cuKernelGetFunction)(void **, void *);
} rx;
static CUcontext g_cuctx;

static int rx_open(void) {
    *(void **)&rx.cuMemcpyDtoHAsync = dlsym(rc.lib, "cuMemcpyDtoHAsync_v2");
    *(void **)&rx.cuKernelGetFunction = dlsym(rc.lib, "cuKernelGetFunction");
    return rx.cuMemcpyDtoHAsync && rx.cuKernelGetFunction;
}

/* ---- knobs ---------------------------------------------------------------------------------- */

static long g_frames = DEFAULT_FRAMES;
static int g_runs = DEFAULT_RUNS;
static long g_host_us = DEFAULT_HOST_US;
static unsigned g_passes = 1; /* hash passes per call, calibrated to g_host_us */

static long env_long(const char *name, long def, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_pipeline_wide: %s=%s is not a number in [%ld, %ld]; using %ld\n", name, s, lo, hi,
                def);
        return def;
    }
    return v;
}

/* ---- kernels -------------------------------------------------------------------------------- */

enum { K_FILL, K_SCALE, K_REDUCE, K_ZERO64, K_COUNT };
static const char *const kernel_name[K_COUNT] = {"cw_pl_fill", "cw_pl_scale", "cw_pl_reduce", "cw_pl_zero64"};
static cw_kernel *g_kernel[K_COUNT];
static void *g_fn[K_COUNT];
static cw_launch_config g_lc; /* 1 block of 32 threads */

static void raw_launch(int k, CUstream s, void **args) {
    CU_CHECK(rc.cuLaunchKernel(g_fn[k], 1, 1, 1, g_lc.block[0], 1, 1, 0, s, args, NULL));
}

/* ---- the host work and the CPU's answers ------------------------------------------------------ */

static uint64_t *g_hbuf[NODES]; /* each branch operator's own host data */
static unsigned g_value[NVALUES];
static uint64_t g_expect[NVALUES];

static int node_of(int b, int stage) { return 1 + stage * BRANCHES + b; }
/* The uint32 index in a slot of a node's output word. */
static unsigned word_of(int node) {
    if (node == NODE_SRC) return 0;
    const int b = (node - 1) % BRANCHES, stage = (node - 1) / BRANCHES;
    return 8u + (unsigned)stage * 8u + (unsigned)b;
}
/* ... and of its input word. */
static unsigned in_word_of(int node) {
    const int b = (node - 1) % BRANCHES, stage = (node - 1) / BRANCHES;
    return stage == 0 ? 0u : 8u + (unsigned)b;
}

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int vidx(long f) { return (int)(f % NVALUES); }

/* The host work of one branch call: g_passes rounds over the node's data. */
static uint64_t host_hash(int node, int j, unsigned passes) {
    uint64_t h = splitmix((uint64_t)j * 1000003u + (uint64_t)node);
    const uint64_t *w = g_hbuf[node];
    for (unsigned p = 0; p < passes; p++)
        for (size_t i = 0; i < HOST_WORDS; i++) h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t scale_mul(uint64_t h) { return (uint32_t)(h | 1u); }
static uint32_t scale_add(uint64_t h) { return (uint32_t)(h >> 32); }

static void host_init(void) {
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (int n = 0; n < NODES; n++) {
        g_hbuf[n] = aligned_alloc(64, HOST_WORDS * sizeof(uint64_t));
        if (!g_hbuf[n]) {
            fprintf(stderr, "bench_pipeline_wide: out of host memory\n");
            exit(1);
        }
        for (size_t i = 0; i < HOST_WORDS; i++) g_hbuf[n][i] = seed = splitmix(seed);
    }
}

/* Calibrates g_passes to g_host_us on this thread: the median of 7 timings
 * of 4 passes. Returns the measured microseconds of one call. */
static double calibrate(void) {
    double t[7];
    volatile uint64_t sinkv = 0;
    for (int r = 0; r < 7; r++) {
        const unsigned long long a = now_ns();
        sinkv += host_hash(1, r, 4);
        t[r] = (double)(now_ns() - a) / 4.0;
    }
    (void)sinkv;
    const double per_pass = stats_of(t, 7).p50;
    const double want = (double)g_host_us * 1e3;
    g_passes = per_pass > 0 ? (unsigned)(want / per_pass + 0.5) : 1u;
    if (g_passes < 1) g_passes = 1;
    for (int r = 0; r < 7; r++) {
        const unsigned long long a = now_ns();
        sinkv += host_hash(2, r, g_passes);
        t[r] = (double)(now_ns() - a) / 1e3;
    }
    return stats_of(t, 7).p50;
}

/* The CPU's answer for every source value: the two scale steps of each
 * branch, with the hashes the operators will compute, summed. */
static void answers_init(void) {
    for (int j = 0; j < NVALUES; j++) {
        g_value[j] = 0x9e3779b9u * (uint32_t)(j + 1) + 777u;
        uint64_t sum = 0;
        for (int b = 0; b < BRANCHES; b++) {
            uint32_t x = g_value[j];
            for (int s = 0; s < 2; s++) {
                const uint64_t h = host_hash(node_of(b, s), j, g_passes);
                x = x * scale_mul(h) + scale_add(h);
            }
            sum += x;
        }
        g_expect[j] = sum;
    }
}

/* ---- per-call stamps -------------------------------------------------------------------------- */

typedef struct rec {
    unsigned long long t0, t1; /* the call's start and end (now_ns) */
    unsigned long long work;   /* the host work's nanoseconds (branch calls) */
    int thread;                /* a small id of the thread that ran it */
} rec;

static int g_tid_next;
static _Thread_local int t_id;

static int thread_id(void) {
    if (!t_id) t_id = __atomic_add_fetch(&g_tid_next, 1, __ATOMIC_RELAXED);
    return t_id;
}

/* ---- variants ------------------------------------------------------------------------------- */

struct variant;

typedef struct opuser {
    struct variant *V;
    int node;
} opuser;

/* The raw variant's pool: N threads; the calling thread hands out the 8
 * branches of one frame and waits for them. */
typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t th[MAX_WORKERS];
    unsigned n;
    int quit;
    int next;      /* the next branch to pick; BRANCHES: none */
    int remaining; /* branches of the frame not finished */
    struct variant *V;
    long i;
} pool;

typedef struct variant {
    int id;
    unsigned workers;
    unsigned long long dring; /* RING slots of SLOT_WORDS uint32 */
    unsigned long long dres;  /* g_frames result words */
    uint64_t *hres;           /* pinned */
    uint64_t seq;             /* slot of the submission's frame 0: (seq + i) % RING */
    long f0, r0;              /* frame value and result word of the submission's frame 0 */
    rec *rec;                 /* g_frames x NODES, indexed by result word */
    /* cuweave */
    cw_pipeline *p;
    cw_stream *sink;
    opuser ou[NODES];
    /* raw */
    CUstream s_src, s_br[BRANCHES], s_sink;
    CUevent ev_src[RING], ev_br[BRANCHES][RING], done[RING];
    uint64_t raw_frames; /* frames submitted, all runs */
    pool pl;
    int have_pool;
    long checked, wrong;
} variant;

static variant g_var[V_COUNT];

static unsigned long long slot_addr(const variant *V, uint64_t frame_seq) {
    return V->dring + (frame_seq % RING) * SLOT_WORDS * sizeof(uint32_t);
}

static void stamp(variant *V, long r, int node, unsigned long long t0, unsigned long long work) {
    rec *x = &V->rec[(size_t)r * NODES + (size_t)node];
    x->t0 = t0;
    x->t1 = now_ns();
    x->work = work;
    x->thread = thread_id();
}

/* ---- cuweave's operators --------------------------------------------------------------------- */

#define TRY(expr)                                                                                                     \
    do {                                                                                                              \
        cw_status t_ = (expr);                                                                                        \
        if (t_ != CW_SUCCESS) return t_;                                                                              \
    } while (0)

static cw_status iteration_of(cw_io *io, uint64_t *it) {
    cw_io_info info;
    memset(&info, 0, sizeof info);
    TRY(cw_io_get_info(io, &info));
    *it = info.iteration;
    return CW_SUCCESS;
}

static cw_status op_src(cw_io *io, void *user) {
    const unsigned long long t0 = now_ns();
    const opuser *u = user;
    variant *V = u->V;
    uint64_t it;
    TRY(iteration_of(io, &it));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_devptr out = slot_addr(V, V->seq + it);
    unsigned n = 1, value = g_value[vidx(V->f0 + (long)it)];
    long long ns = 0;
    unsigned long long st = 0;
    void *args[] = {&out, &n, &value, &ns, &st};
    TRY(cw_kernel_launch(g_kernel[K_FILL], s, &g_lc, args));
    TRY(cw_io_emit(io, "out", NULL, NULL));
    stamp(V, V->r0 + (long)it, NODE_SRC, t0, 0);
    return CW_SUCCESS;
}

static cw_status op_branch(cw_io *io, void *user) {
    const unsigned long long t0 = now_ns();
    const opuser *u = user;
    variant *V = u->V;
    uint64_t it;
    TRY(iteration_of(io, &it));
    const long f = V->f0 + (long)it;
    const uint64_t h = host_hash(u->node, vidx(f), g_passes);
    const unsigned long long work = now_ns() - t0;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    const cw_devptr slot = slot_addr(V, V->seq + it);
    cw_devptr in = slot + in_word_of(u->node) * sizeof(uint32_t), out = slot + word_of(u->node) * sizeof(uint32_t);
    unsigned n = 1, mul = scale_mul(h), add = scale_add(h);
    long long ns = 0;
    unsigned long long st = 0;
    void *args[] = {&in, &out, &n, &mul, &add, &ns, &st};
    TRY(cw_kernel_launch(g_kernel[K_SCALE], s, &g_lc, args));
    TRY(cw_io_emit(io, "out", NULL, NULL));
    stamp(V, V->r0 + (long)it, u->node, t0, work);
    return CW_SUCCESS;
}

static cw_status op_sink(cw_io *io, void *user) {
    const unsigned long long t0 = now_ns();
    const opuser *u = user;
    variant *V = u->V;
    uint64_t it;
    TRY(iteration_of(io, &it));
    const long r = V->r0 + (long)it;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s)); /* behind all 8 branches */
    size_t count = 0;
    TRY(cw_io_receive_many(io, "in", NULL, 0, &count));
    if (count != BRANCHES && V->wrong++ < MAX_SHOWN)
        fprintf(stderr, "bench_pipeline_wide: WRONG cuweave, frame %ld: the sink got %zu messages, not %d\n",
                V->f0 + (long)it, count, BRANCHES);
    const cw_devptr slot = slot_addr(V, V->seq + it);
    cw_devptr res = V->dres + (unsigned long long)r * sizeof(uint64_t), words = slot + 16u * sizeof(uint32_t);
    unsigned one = 1, n = BRANCHES;
    long long ns = 0;
    void *fz[] = {&res, &one};
    TRY(cw_kernel_launch(g_kernel[K_ZERO64], s, &g_lc, fz));
    void *fr[] = {&words, &n, &res, &ns};
    TRY(cw_kernel_launch(g_kernel[K_REDUCE], s, &g_lc, fr));
    TRY(cw_copy_to_host(s, &V->hres[r], res, sizeof(uint64_t)));
    V->sink = s;
    stamp(V, r, NODE_SINK, t0, 0);
    return CW_SUCCESS;
}

static void add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                   const char *in, unsigned in_flags, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    CW_CHECK(cw_operator_create(&op, name, &ops, user, NULL));
    if (in) {
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.flags = in_flags;
        CW_CHECK(cw_operator_add_input(op, in, &ps));
    }
    if (out) CW_CHECK(cw_operator_add_output(op, out, NULL));
    CW_CHECK(cw_pipeline_add(p, op));
}

static void cw_setup(variant *V, cw_context *ctx) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = V->workers;
    ps.max_in_flight = RING;
    CW_CHECK(cw_pipeline_create(&V->p, ctx, &ps));
    for (int n = 0; n < NODES; n++) V->ou[n] = (opuser){V, n};
    add_op(V->p, "src", op_src, &V->ou[NODE_SRC], NULL, 0, "out");
    char name[16], prev[16];
    for (int b = 0; b < BRANCHES; b++)
        for (int s = 0; s < 2; s++) {
            snprintf(name, sizeof name, "b%d_%d", b, s + 1);
            add_op(V->p, name, op_branch, &V->ou[node_of(b, s)], "in", 0, "out");
        }
    add_op(V->p, "sink", op_sink, &V->ou[NODE_SINK], "in", CW_PORT_MANY, NULL);
    for (int b = 0; b < BRANCHES; b++) {
        snprintf(prev, sizeof prev, "b%d_1", b);
        snprintf(name, sizeof name, "b%d_2", b);
        CW_CHECK(cw_pipeline_connect(V->p, "src", "out", prev, "in"));
        CW_CHECK(cw_pipeline_connect(V->p, prev, "out", name, "in"));
        CW_CHECK(cw_pipeline_connect(V->p, name, "out", "sink", "in"));
    }
    CW_CHECK(cw_pipeline_check(V->p));
}

/* ---- the raw pool ------------------------------------------------------------------------------- */

static void raw_src(variant *V, long i) {
    const uint64_t seq = V->raw_frames + (uint64_t)i;
    const int k = (int)(seq % RING);
    /* the in-flight bound: frame seq - RING (the slot's last user) is done */
    if (seq >= RING) CU_CHECK(rc.cuEventSynchronize(V->done[k]));
    const unsigned long long t0 = now_ns();
    unsigned long long out = slot_addr(V, seq);
    unsigned n = 1, value = g_value[vidx(V->f0 + i)];
    long long ns = 0;
    unsigned long long st = 0;
    void *args[] = {&out, &n, &value, &ns, &st};
    raw_launch(K_FILL, V->s_src, args);
    CU_CHECK(rc.cuEventRecord(V->ev_src[k], V->s_src));
    stamp(V, V->r0 + i, NODE_SRC, t0, 0);
}

static void raw_branch(variant *V, long i, int b) {
    const uint64_t seq = V->raw_frames + (uint64_t)i;
    const int k = (int)(seq % RING);
    const unsigned long long slot = slot_addr(V, seq);
    const long f = V->f0 + i;
    for (int s = 0; s < 2; s++) {
        const int node = node_of(b, s);
        const unsigned long long t0 = now_ns();
        const uint64_t h = host_hash(node, vidx(f), g_passes);
        const unsigned long long work = now_ns() - t0;
        if (s == 0) CU_CHECK(rc.cuStreamWaitEvent(V->s_br[b], V->ev_src[k], 0));
        unsigned long long in = slot + in_word_of(node) * sizeof(uint32_t), out = slot + word_of(node) * sizeof(uint32_t);
        unsigned n = 1, mul = scale_mul(h), add = scale_add(h);
        long long ns = 0;
        unsigned long long st = 0;
        void *args[] = {&in, &out, &n, &mul, &add, &ns, &st};
        raw_launch(K_SCALE, V->s_br[b], args);
        if (s == 1) CU_CHECK(rc.cuEventRecord(V->ev_br[b][k], V->s_br[b]));
        stamp(V, V->r0 + i, node, t0, work);
    }
}

static void raw_sink(variant *V, long i) {
    const unsigned long long t0 = now_ns();
    const uint64_t seq = V->raw_frames + (uint64_t)i;
    const int k = (int)(seq % RING);
    const long r = V->r0 + i;
    for (int b = 0; b < BRANCHES; b++) CU_CHECK(rc.cuStreamWaitEvent(V->s_sink, V->ev_br[b][k], 0));
    unsigned long long res = V->dres + (unsigned long long)r * sizeof(uint64_t),
                       words = slot_addr(V, seq) + 16u * sizeof(uint32_t);
    unsigned one = 1, n = BRANCHES;
    long long ns = 0;
    void *fz[] = {&res, &one};
    raw_launch(K_ZERO64, V->s_sink, fz);
    void *fr[] = {&words, &n, &res, &ns};
    raw_launch(K_REDUCE, V->s_sink, fr);
    CU_CHECK(rx.cuMemcpyDtoHAsync(&V->hres[r], res, sizeof(uint64_t), V->s_sink));
    CU_CHECK(rc.cuEventRecord(V->done[k], V->s_sink));
    stamp(V, r, NODE_SINK, t0, 0);
}

static void *pool_main(void *arg) {
    pool *P = arg;
    CU_CHECK(rc.cuCtxSetCurrent(g_cuctx));
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (!P->quit && P->next >= BRANCHES) pthread_cond_wait(&P->cv_work, &P->mu);
        if (P->quit) break;
        const int b = P->next++;
        variant *V = P->V;
        const long i = P->i;
        pthread_mutex_unlock(&P->mu);
        raw_branch(V, i, b);
        pthread_mutex_lock(&P->mu);
        if (--P->remaining == 0) pthread_cond_signal(&P->cv_done);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

static void pool_start(pool *P, unsigned n) {
    memset(P, 0, sizeof *P);
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv_work, NULL);
    pthread_cond_init(&P->cv_done, NULL);
    P->next = BRANCHES;
    P->n = n;
    for (unsigned t = 0; t < n; t++)
        if (pthread_create(&P->th[t], NULL, pool_main, P) != 0) {
            fprintf(stderr, "bench_pipeline_wide: could not start pool thread %u of %u\n", t + 1, n);
            exit(1);
        }
}

static void pool_stop(pool *P) {
    pthread_mutex_lock(&P->mu);
    P->quit = 1;
    pthread_cond_broadcast(&P->cv_work);
    pthread_mutex_unlock(&P->mu);
    for (unsigned t = 0; t < P->n; t++) pthread_join(P->th[t], NULL);
    pthread_cond_destroy(&P->cv_done);
    pthread_cond_destroy(&P->cv_work);
    pthread_mutex_destroy(&P->mu);
}

static void raw_frame(variant *V, long i) {
    raw_src(V, i);
    if (!V->have_pool) {
        for (int b = 0; b < BRANCHES; b++) raw_branch(V, i, b);
    } else {
        pool *P = &V->pl;
        pthread_mutex_lock(&P->mu);
        P->V = V;
        P->i = i;
        P->remaining = BRANCHES;
        P->next = 0;
        pthread_cond_broadcast(&P->cv_work);
        while (P->remaining) pthread_cond_wait(&P->cv_done, &P->mu);
        pthread_mutex_unlock(&P->mu);
    }
    raw_sink(V, i);
}

/* ---- setup and teardown ------------------------------------------------------------------------ */

static void variant_setup(variant *V, int id, unsigned workers, cw_context *ctx) {
    memset(V, 0, sizeof *V);
    V->id = id;
    V->workers = workers;
    CU_CHECK(rc.cuMemAlloc(&V->dring, RING * SLOT_WORDS * sizeof(uint32_t)));
    CU_CHECK(rc.cuMemsetD32(V->dring, 0, RING * SLOT_WORDS));
    CU_CHECK(rc.cuMemAlloc(&V->dres, (size_t)g_frames * sizeof(uint64_t)));
    void *h = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&h, (size_t)g_frames * sizeof(uint64_t), 0));
    V->hres = h;
    V->rec = calloc((size_t)g_frames * NODES, sizeof(rec));
    if (!V->rec) {
        fprintf(stderr, "bench_pipeline_wide: out of host memory\n");
        exit(1);
    }
    if (id == V_CW) {
        cw_setup(V, ctx);
    } else {
        CU_CHECK(rc.cuStreamCreateWithPriority(&V->s_src, RAW_STREAM_NON_BLOCKING, 0));
        CU_CHECK(rc.cuStreamCreateWithPriority(&V->s_sink, RAW_STREAM_NON_BLOCKING, 0));
        for (int b = 0; b < BRANCHES; b++) CU_CHECK(rc.cuStreamCreateWithPriority(&V->s_br[b], RAW_STREAM_NON_BLOCKING, 0));
        for (int k = 0; k < RING; k++) {
            CU_CHECK(rc.cuEventCreate(&V->ev_src[k], RAW_EVENT_DISABLE_TIMING));
            CU_CHECK(rc.cuEventCreate(&V->done[k], RAW_EVENT_DISABLE_TIMING));
            for (int b = 0; b < BRANCHES; b++) CU_CHECK(rc.cuEventCreate(&V->ev_br[b][k], RAW_EVENT_DISABLE_TIMING));
        }
        if (workers > 1) {
            pool_start(&V->pl, workers);
            V->have_pool = 1;
        }
    }
}

static void variant_teardown(variant *V) {
    if (V->id == V_CW) {
        CW_CHECK(cw_pipeline_synchronize(V->p));
        cw_pipeline_destroy(&V->p);
    } else {
        if (V->have_pool) pool_stop(&V->pl);
        CU_CHECK(rc.cuStreamSynchronize(V->s_sink));
        CU_CHECK(rc.cuStreamDestroy(V->s_src));
        CU_CHECK(rc.cuStreamDestroy(V->s_sink));
        for (int b = 0; b < BRANCHES; b++) CU_CHECK(rc.cuStreamDestroy(V->s_br[b]));
        for (int k = 0; k < RING; k++) {
            CU_CHECK(rc.cuEventDestroy(V->ev_src[k]));
            CU_CHECK(rc.cuEventDestroy(V->done[k]));
            for (int b = 0; b < BRANCHES; b++) CU_CHECK(rc.cuEventDestroy(V->ev_br[b][k]));
        }
    }
    CU_CHECK(rc.cuMemFree(V->dring));
    CU_CHECK(rc.cuMemFree(V->dres));
    CU_CHECK(rc.cuMemFreeHost(V->hres));
    free(V->rec);
    V->rec = NULL;
}

/* ---- running frames ------------------------------------------------------------------------------ */

static void submit(variant *V, long f0, long r0, long count) {
    V->f0 = f0;
    V->r0 = r0;
    if (V->id == V_CW) {
        cw_pipeline_info info;
        CW_CHECK(cw_pipeline_get_info(V->p, &info));
        V->seq = info.iterations; /* the slot follows the pipeline's own iteration count */
        CW_CHECK(cw_pipeline_run(V->p, (uint64_t)count));
    } else {
        for (long i = 0; i < count; i++) raw_frame(V, i);
        V->raw_frames += (uint64_t)count;
    }
}

static void wait_done(variant *V) {
    if (V->id == V_CW)
        CW_CHECK(cw_stream_synchronize(V->sink));
    else
        CU_CHECK(rc.cuStreamSynchronize(V->s_sink));
}

static void check_range(variant *V, long f0, long r0, long count) {
    for (long i = 0; i < count; i++) {
        const uint64_t got = *(volatile uint64_t *)&V->hres[r0 + i], want = g_expect[vidx(f0 + i)];
        V->checked++;
        if (got != want && V->wrong++ < MAX_SHOWN)
            fprintf(stderr, "bench_pipeline_wide: WRONG %s, %u workers, frame %ld: GPU %llu, CPU %llu%s\n",
                    variant_name[V->id], V->workers, f0 + i, (unsigned long long)got, (unsigned long long)want,
                    got == POISON ? " (no result copied back)" : "");
    }
}

static void poison(variant *V, long r0, long count) {
    for (long i = 0; i < count; i++) *(volatile uint64_t *)&V->hres[r0 + i] = POISON;
}

/* What the stamps of one run show (medians; microseconds). */
typedef struct obs {
    double work, enq, busy, handoff, fork, join, gap, start;
    int threads;
} obs;

static double median_of(double *v, size_t n) { return n ? stats_of(v, n).p50 : 0.0; }

static obs observe(const variant *V, long count, unsigned long long wall_ns, const unsigned long long *submit_ns) {
    obs o;
    memset(&o, 0, sizeof o);
    const size_t nb = (size_t)count * 2 * BRANCHES;
    double *work = malloc(sizeof(double) * nb), *enq = malloc(sizeof(double) * nb),
           *hand = malloc(sizeof(double) * (size_t)count * BRANCHES), *fork = malloc(sizeof(double) * nb),
           *join = malloc(sizeof(double) * (size_t)count), *gap = malloc(sizeof(double) * (size_t)count);
    if (!work || !enq || !hand || !fork || !join || !gap) {
        fprintf(stderr, "bench_pipeline_wide: out of host memory\n");
        exit(1);
    }
    size_t nw = 0, nh = 0, nf = 0, nj = 0, ng = 0;
    double busy_ns = 0;
    int seen[4 * MAX_WORKERS + 4], nseen = 0; /* the distinct thread ids of this run */
    for (long i = 0; i < count; i++) {
        const rec *x = &V->rec[(size_t)i * NODES];
        unsigned long long last = 0;
        for (int n = 0; n < NODES; n++) {
            busy_ns += (double)(x[n].t1 - x[n].t0);
            int known = 0;
            for (int t = 0; t < nseen; t++) known = known || seen[t] == x[n].thread;
            if (!known && nseen < (int)(sizeof seen / sizeof seen[0])) seen[nseen++] = x[n].thread;
        }
        unsigned long long first = ~0ull;
        for (int b = 0; b < BRANCHES; b++)
            for (int s = 0; s < 2; s++) {
                const rec *c = &x[node_of(b, s)];
                work[nw] = (double)c->work / 1e3;
                enq[nw++] = (double)(c->t1 - c->t0 - c->work) / 1e3;
                if (c->t1 > last) last = c->t1;
                if (s == 0 && c->t0 < first) first = c->t0;
                if (s == 1) hand[nh++] = ((double)c->t0 - (double)x[node_of(b, 0)].t1) / 1e3;
            }
        fork[nf++] = ((double)first - (double)x[NODE_SRC].t1) / 1e3;
        join[nj++] = ((double)x[NODE_SINK].t0 - (double)last) / 1e3;
        if (submit_ns) {
            gap[ng++] = ((double)x[NODE_SRC].t0 - (double)submit_ns[i]) / 1e3;
        } else if (i + 1 < count) {
            gap[ng++] = ((double)x[NODES + NODE_SRC].t0 - (double)x[NODE_SINK].t1) / 1e3;
        }
    }
    o.threads = nseen;
    o.work = median_of(work, nw);
    o.enq = median_of(enq, nw);
    o.handoff = median_of(hand, nh);
    o.fork = median_of(fork, nf);
    o.join = median_of(join, nj);
    if (submit_ns)
        o.start = median_of(gap, ng);
    else
        o.gap = median_of(gap, ng);
    const unsigned w = V->workers > 1 ? V->workers : 1;
    o.busy = wall_ns ? busy_ns / ((double)w * (double)wall_ns) : 0.0;
    free(work);
    free(enq);
    free(hand);
    free(fork);
    free(join);
    free(gap);
    return o;
}

/* One frame at a time; lat gets each frame's latency (us). Returns fps;
 * *o: what the stamps show (start: submit to src). */
static double run_latency(variant *V, long f0, long count, double *lat, obs *o) {
    alarm(WATCHDOG_S);
    unsigned long long *sub = malloc(sizeof(unsigned long long) * (size_t)count);
    if (!sub) exit(1);
    poison(V, 0, count);
    const unsigned long long t0 = now_ns();
    for (long i = 0; i < count; i++) {
        const unsigned long long a = now_ns();
        sub[i] = a;
        submit(V, f0 + i, i, 1);
        wait_done(V);
        if (lat) lat[i] = (double)(now_ns() - a) / 1e3;
    }
    const unsigned long long t1 = now_ns();
    check_range(V, f0, 0, count);
    if (o) *o = observe(V, count, 0, sub);
    free(sub);
    alarm(0);
    return (double)count / ((double)(t1 - t0) / 1e9);
}

/* count frames back to back, one wait. Returns microseconds per frame. */
static double run_pipelined(variant *V, long f0, long count, obs *o) {
    alarm(WATCHDOG_S);
    poison(V, 0, count);
    const unsigned long long t0 = now_ns();
    submit(V, f0, 0, count);
    const unsigned long long t1 = now_ns();
    wait_done(V);
    const unsigned long long t2 = now_ns();
    check_range(V, f0, 0, count);
    if (o) *o = observe(V, count, t1 - t0, NULL);
    alarm(0);
    return (double)(t2 - t0) / 1e3 / (double)count;
}

/* ---- one worker count ------------------------------------------------------------------------------ */

typedef struct result {
    unsigned workers;
    stats pus[V_COUNT]; /* pipelined: us per frame over runs */
    stats lat[V_COUNT]; /* one at a time: latency us over every frame */
    obs po[V_COUNT];    /* pipelined: medians over runs of each run's medians */
    obs lo[V_COUNT];    /* one at a time */
    double host_frame_us; /* host work per frame: 16 x work/call (cuweave and raw's median) */
    /* BENCH_PROFILE: cuweave's driver calls in one more pipelined run, per frame, all threads */
    int profiled;
    double drv_calls, drv_us, prof_us; /* calls and their time per frame; the run's us per frame */
    int top[4];                        /* the entries of most time */
    double top_calls[4], top_us[4];
} result;

static obs median_obs(obs *v, int n) {
    obs o;
    memset(&o, 0, sizeof o);
    double *t = malloc(sizeof(double) * (size_t)n);
    if (!t) exit(1);
#define MED_(f)                                                                                                       \
    do {                                                                                                              \
        for (int i = 0; i < n; i++) t[i] = v[i].f;                                                                    \
        o.f = median_of(t, (size_t)n);                                                                                \
    } while (0)
    MED_(work);
    MED_(enq);
    MED_(busy);
    MED_(handoff);
    MED_(fork);
    MED_(join);
    MED_(gap);
    MED_(start);
#undef MED_
    for (int i = 0; i < n; i++) o.threads = v[i].threads > o.threads ? v[i].threads : o.threads;
    free(t);
    return o;
}

static long g_next; /* the next frame value */

static void run_count(result *R, unsigned workers, cw_context *ctx) {
    R->workers = workers;
    alarm(WATCHDOG_S);
    for (int v = 0; v < V_COUNT; v++) variant_setup(&g_var[v], v, workers, ctx);
    alarm(0);
    const long F = g_frames;
    const int runs = g_runs;
    const long warm = F < WARM_LATENCY ? F : WARM_LATENCY;
    for (int v = 0; v < V_COUNT; v++) (void)run_pipelined(&g_var[v], g_next, F, NULL);
    g_next += F;
    for (int v = 0; v < V_COUNT; v++) (void)run_latency(&g_var[v], g_next, warm, NULL, NULL);
    g_next += warm;
    double *pus[V_COUNT], *lat[V_COUNT];
    obs *po[V_COUNT], *lo[V_COUNT];
    for (int v = 0; v < V_COUNT; v++) {
        pus[v] = malloc(sizeof(double) * (size_t)runs);
        lat[v] = malloc(sizeof(double) * (size_t)F * (size_t)runs);
        po[v] = malloc(sizeof(obs) * (size_t)runs);
        lo[v] = malloc(sizeof(obs) * (size_t)runs);
        if (!pus[v] || !lat[v] || !po[v] || !lo[v]) exit(1);
    }
    for (int r = 0; r < runs; r++) {
        for (int j = 0; j < V_COUNT; j++) {
            const int v = (r + j) % V_COUNT;
            (void)run_latency(&g_var[v], g_next, F, lat[v] + (size_t)r * (size_t)F, &lo[v][r]);
        }
        g_next += F;
        for (int j = 0; j < V_COUNT; j++) {
            const int v = (r + j) % V_COUNT;
            pus[v][r] = run_pipelined(&g_var[v], g_next, F, &po[v][r]);
        }
        g_next += F;
    }
    for (int v = 0; v < V_COUNT; v++) {
        R->pus[v] = stats_of(pus[v], (size_t)runs);
        R->lat[v] = stats_of(lat[v], (size_t)F * (size_t)runs);
        R->po[v] = median_obs(po[v], runs);
        R->lo[v] = median_obs(lo[v], runs);
        free(pus[v]);
        free(lat[v]);
        free(po[v]);
        free(lo[v]);
    }
    R->host_frame_us = 2.0 * BRANCHES * 0.5 * (R->po[V_CW].work + R->po[V_RAW].work);
    if (getenv("BENCH_PROFILE")) {
        /* Every driver call cuweave makes, timed through the test seam (all
         * threads), in one more pipelined run: how much of the executor's
         * cost per frame is the driver's. Not in the figures above. */
        if (cwi_seam_enable() != 0) exit(1);
        cwi_seam_timing(1);
        cwi_seam_reset();
        R->prof_us = run_pipelined(&g_var[V_CW], g_next, F, NULL);
        g_next += F;
        cwi_seam_timing(0);
        R->profiled = 1;
        R->drv_calls = (double)cwi_seam_calls(-1) / (double)F;
        R->drv_us = (double)cwi_seam_ns(-1) / 1e3 / (double)F;
        for (int t = 0; t < 4; t++) {
            R->top[t] = -1;
            unsigned long long best = 0;
            for (int id = 0; id < cwi_seam_entry_count(); id++) {
                int taken = 0;
                for (int u = 0; u < t; u++) taken = taken || R->top[u] == id;
                if (!taken && cwi_seam_ns(id) > best) {
                    best = cwi_seam_ns(id);
                    R->top[t] = id;
                }
            }
            if (R->top[t] >= 0) {
                R->top_calls[t] = (double)cwi_seam_calls(R->top[t]) / (double)F;
                R->top_us[t] = (double)cwi_seam_ns(R->top[t]) / 1e3 / (double)F;
            }
        }
        cwi_seam_disable();
    }
    alarm(WATCHDOG_S);
    for (int v = 0; v < V_COUNT; v++) variant_teardown(&g_var[v]);
    alarm(0);
}

/* ---- output ----------------------------------------------------------------------------------------- */

static double fps_of(double us) { return us > 0 ? 1e6 / us : 0.0; }

/* The first count whose doubling gained under STOP_GAIN, or -1. */
static int stop_index(const result *R, int nc, int v) {
    for (int c = 1; c < nc; c++)
        if (R[c - 1].pus[v].p50 / R[c].pus[v].p50 < STOP_GAIN) return c;
    return -1;
}

static void print_stop(const result *R, int nc, int v, double H1) {
    const int c = stop_index(R, nc, v);
    if (c < 0) {
        printf("  %s: no doubling gained under %.2fx up to %u workers: it still scales there\n", variant_name[v],
               STOP_GAIN, R[nc - 1].workers);
        return;
    }
    const result *a = &R[c - 1], *b = &R[c];
    printf("  %s: scaling stops at %u workers: %.0f fps against %.0f with %u (%.2fx; the ideal H/N gives 2x)\n",
           variant_name[v], b->workers, fps_of(b->pus[v].p50), fps_of(a->pus[v].p50), a->workers,
           a->pus[v].p50 / b->pus[v].p50);
    const obs *oa = &a->po[v], *ob = &b->po[v];
    if (b->workers > BRANCHES)
        printf("    - more workers than branches: at most %d calls can run at once; the bound is H/%d = %.1f us\n",
               BRANCHES, BRANCHES, H1 / BRANCHES);
    if (ob->work > 1.15 * R[0].po[v].work)
        printf("    - the host work itself is slower: %.1f us per call against %.1f us with 1 worker (cores shared:\n"
               "      SMT siblings, clock, caches; no scheduler gets past it)\n",
               ob->work, R[0].po[v].work);
    printf("    - per call outside the host work: %.1f us (%.1f with %u): the driver's calls%s\n", ob->enq, oa->enq,
           a->workers, v == V_CW ? " and the executor's stream ordering" : "");
    printf("    - busy %.0f%% of the workers' time (%.0f%% with %u); hand-off %.1f us, fork %.1f us, join %.1f us,\n"
           "      gap between frames %.1f us (serial per frame: nothing of the next frame starts before the sink)\n",
           100.0 * ob->busy, 100.0 * oa->busy, a->workers, ob->handoff, ob->fork, ob->join, ob->gap);
    const double us = b->pus[v].p50, bound = H1 / (b->workers < BRANCHES ? b->workers : BRANCHES);
    printf("    - %.1f us per frame against the bound's %.1f: %.1f us per frame lost to the serial part and the\n"
           "      hand-offs\n",
           us, bound, us - bound);
}

int main(void) {
    g_frames = env_long("BENCH_FRAMES", DEFAULT_FRAMES, 2, 1000000);
    g_runs = (int)env_long("BENCH_RUNS", DEFAULT_RUNS, 1, 100000);
    g_host_us = env_long("BENCH_HOST_US", DEFAULT_HOST_US, 1, 100000);
    const long max_workers = env_long("BENCH_MAX_WORKERS", MAX_WORKERS, 1, MAX_WORKERS);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    (void)pass; /* bench_common.h's; no PASS/MISS target here */

    printf("bench_pipeline_wide: the executor's worker threads on a wide pipeline of host-heavy operators,\n"
           "against a plain pthread pool on the raw driver API with the same threads\n"
           "  pipeline : src -> 8 branches of 2 operators -> sink (joins the 8, copies a word back); each branch\n"
           "             call does %ld us of host hashing, then launches one kernel on its stream\n"
           "  cuweave  : cw_pipeline_run, settings.threads = N, max_in_flight %d, an internal stream per operator\n"
           "  raw pool : N persistent pthreads take the 8 branches of a frame; src and sink on the calling\n"
           "             thread; a stream per branch, events placed by hand; the same in-flight bound\n"
           "  modes    : pipelined (%ld frames, then one wait) and one frame at a time; %d rounds\n",
           g_host_us, RING, g_frames, g_runs);
    fflush(stdout);

    bench_watchdog(WATCHDOG_S);

    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup == 77) return 77;
    if (setup != 0) return setup;
    if (!rx_open()) {
        fprintf(stderr, "bench_pipeline_wide: the driver lacks cuMemcpyDtoHAsync_v2 or cuKernelGetFunction\n");
        return 1;
    }
    unsigned ver = cw_version();
    printf("device 0: %s (sm_%d%d, %d SMs), driver %d.%d, cuweave %u.%u.%u, commit %s, %s; host: %ld CPUs online\n",
           info.name, info.cc_major, info.cc_minor, info.sm_count, drv / 1000, drv % 1000 / 10,
           CW_VERSION_PACK_MAJOR(ver), CW_VERSION_PACK_MINOR(ver), CW_VERSION_PACK_PATCH(ver), commit, date, ncpu);

    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    g_cuctx = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(g_cuctx));

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
    cw_launch_config_default(&g_lc);
    g_lc.block[0] = 32;

    host_init();
    const double call_us = calibrate();
    answers_init();
    alarm(0);
    printf("host work: %u passes over 16 KiB per branch call, %.1f us on one thread (calibrated to %ld us);\n"
           "  H = host work per frame = 16 calls = %.0f us\n",
           g_passes, call_us, g_host_us, 16.0 * call_us);

    unsigned counts[MAX_COUNTS];
    int nc = 0;
    for (unsigned w = 1; w <= (unsigned)max_workers && nc < MAX_COUNTS; w *= 2) {
        if (w > BRANCHES && ncpu < (long)w) break; /* 16 only where there are 16 CPUs */
        counts[nc++] = w;
    }
    result res[MAX_COUNTS];
    long checked = 0, wrong = 0;
    for (int c = 0; c < nc; c++) {
        printf("%u worker%s: running ...\n", counts[c], counts[c] > 1 ? "s" : "");
        fflush(stdout);
        run_count(&res[c], counts[c], ctx);
        for (int v = 0; v < V_COUNT; v++) {
            checked += g_var[v].checked;
            wrong += g_var[v].wrong;
        }
    }
    const double H1 = res[0].host_frame_us; /* measured with 1 worker */

    printf("\npipelined: %ld frames back to back, then one wait; fps per run (p50, and p99: the slow runs);\n"
           "  speed-up: over the same variant's 1 worker; ideal: H/N with H = %.0f us measured at 1 worker;\n"
           "  bound: max(H/N, H/%d): only %d branches\n",
           g_frames, H1, BRANCHES, BRANCHES);
    printf("  %7s | %17s %8s | %17s %8s | %9s %9s | %8s\n", "workers", "cuweave fps", "speed-up", "raw pool fps",
           "speed-up", "ideal fps", "bound fps", "cw / raw");
    for (int c = 0; c < nc; c++) {
        const result *R = &res[c];
        const unsigned w = R->workers, wb = w < BRANCHES ? w : BRANCHES;
        printf("  %7u | %8.0f / %6.0f %7.2fx | %8.0f / %6.0f %7.2fx | %9.0f %9.0f | %8.3f\n", w,
               fps_of(R->pus[V_CW].p50), fps_of(R->pus[V_CW].p99), res[0].pus[V_CW].p50 / R->pus[V_CW].p50,
               fps_of(R->pus[V_RAW].p50), fps_of(R->pus[V_RAW].p99), res[0].pus[V_RAW].p50 / R->pus[V_RAW].p50,
               fps_of(H1 / w), fps_of(H1 / wb), R->pus[V_RAW].p50 / R->pus[V_CW].p50);
    }
    printf("\none frame at a time: latency in us (submit to the end of the wait), %ld frames x %d runs;\n"
           "  start: submit to src's call starting (cuweave starts its workers in every cw_pipeline_run)\n",
           g_frames, g_runs);
    printf("  %7s | %17s %8s | %17s %8s\n", "workers", "cuweave p50 / p99", "start", "raw p50 / p99", "start");
    for (int c = 0; c < nc; c++) {
        const result *R = &res[c];
        printf("  %7u | %8.1f / %6.1f %8.1f | %8.1f / %6.1f %8.1f\n", R->workers, R->lat[V_CW].p50, R->lat[V_CW].p99,
               R->lo[V_CW].start, R->lat[V_RAW].p50, R->lat[V_RAW].p99, R->lo[V_RAW].start);
    }
    printf("\nwhat the calls' own stamps show, pipelined (medians over the runs, us):\n"
           "  work/call  the host work of a branch call\n"
           "  enq/call   the rest of a branch call (stream ordering, the launch)\n"
           "  busy       compute time of all calls / (workers x wall time); the rest is idle\n"
           "  hand-off   a branch's first call returning to its second starting (1 worker: the other\n"
           "             branches' calls run between)\n"
           "  fork       src returning to the first branch call starting\n"
           "  join       the last branch call returning to the sink starting\n"
           "  gap        the sink returning to the next frame's src starting\n"
           "  threads    threads seen running calls (raw: the pool's and the calling thread)\n");
    printf("  %-8s %7s | %9s %8s %6s %8s %6s %6s %6s %7s\n", "variant", "workers", "work/call", "enq/call", "busy",
           "hand-off", "fork", "join", "gap", "threads");
    for (int v = 0; v < V_COUNT; v++)
        for (int c = 0; c < nc; c++) {
            const obs *o = &res[c].po[v];
            printf("  %-8s %7u | %9.1f %8.1f %5.0f%% %8.1f %6.1f %6.1f %6.1f %7d\n", variant_name[v], res[c].workers,
                   o->work, o->enq, 100.0 * o->busy, o->handoff, o->fork, o->join, o->gap, o->threads);
        }
    printf("\nwhere scaling stops (the first doubling of the workers that gains under %.2fx, pipelined):\n",
           STOP_GAIN);
    for (int v = 0; v < V_COUNT; v++) print_stop(res, nc, v, H1);
    printf("  (the public API has no counters of the executor's lock waits or idle workers: idle time is\n"
           "  1 - busy, and the executor's lock and wake-ups are inside the hand-off, fork, join and gap)\n");
    if (res[0].profiled) {
        printf("\nprofile (BENCH_PROFILE): cuweave's driver calls per frame in one more pipelined run, through the\n"
               "  test seam, summed over its threads; the raw pool makes %d per frame (19 launches, 1 copy, 10\n"
               "  event records, 16 stream waits, 1 event synchronize)\n",
               RAW_CALLS_PER_FRAME);
        for (int c = 0; c < nc; c++) {
            const result *R = &res[c];
            printf("  %2u workers: %.1f us per frame; %.1f driver calls, %.1f us in all; most time:", R->workers, R->prof_us,
                   R->drv_calls, R->drv_us);
            for (int t = 0; t < 4; t++)
                if (R->top[t] >= 0)
                    printf(" %s %.1f calls %.1f us%s", cwi_seam_entry_name(R->top[t]), R->top_calls[t], R->top_us[t],
                           t < 3 ? "," : "");
            printf("\n");
        }
    }

    /* the block for docs/benchmarks.md */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Worker threads on a wide pipeline (bench_pipeline_wide)\n\n");
    printf("%s, %s, driver %d.%d, commit %s, %ld CPUs. src -> 8 branches of 2 operators -> sink; each\n"
           "branch call hashes host data for %.1f us (H = %.0f us of host work per frame), then launches one\n"
           "kernel; the sink copies a word back, checked every frame. cuweave: `cw_pipeline_run` with\n"
           "`threads` = N, `max_in_flight` %d; raw pool: N pthreads on the raw driver API, a stream per\n"
           "branch, events by hand. Pipelined: %ld frames, then one wait, %d runs; latency: one frame at a\n"
           "time.\n\n",
           date, info.name, drv / 1000, drv % 1000 / 10, commit, ncpu, call_us, H1, RING, g_frames, g_runs);
    printf("| workers | cuweave fps p50 / p99 | speed-up | raw pool fps p50 / p99 | speed-up | ideal fps (H/N) | "
           "cuweave / raw | latency p50 / p99, cuweave | raw |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int c = 0; c < nc; c++) {
        const result *R = &res[c];
        printf("| %u | %.0f / %.0f | %.2fx | %.0f / %.0f | %.2fx | %.0f | %.3f | %.1f / %.1f | %.1f / %.1f |\n",
               R->workers, fps_of(R->pus[V_CW].p50), fps_of(R->pus[V_CW].p99), res[0].pus[V_CW].p50 / R->pus[V_CW].p50,
               fps_of(R->pus[V_RAW].p50), fps_of(R->pus[V_RAW].p99), res[0].pus[V_RAW].p50 / R->pus[V_RAW].p50,
               fps_of(H1 / R->workers), R->pus[V_RAW].p50 / R->pus[V_CW].p50, R->lat[V_CW].p50, R->lat[V_CW].p99,
               R->lat[V_RAW].p50, R->lat[V_RAW].p99);
    }
    printf("\n| variant | workers | work/call us | enq/call us | busy | hand-off us | join us | gap us |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int v = 0; v < V_COUNT; v++)
        for (int c = 0; c < nc; c++) {
            const obs *o = &res[c].po[v];
            printf("| %s | %u | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f |\n", variant_name[v], res[c].workers, o->work,
                   o->enq, 100.0 * o->busy, o->handoff, o->join, o->gap);
        }
    for (int v = 0; v < V_COUNT; v++) {
        const int c = stop_index(res, nc, v);
        if (c < 0)
            printf("\n%s: still scales at %u workers.", variant_name[v], res[nc - 1].workers);
        else
            printf("\n%s: scaling stops at %u workers (%.2fx over %u).", variant_name[v], res[c].workers,
                   res[c - 1].pus[v].p50 / res[c].pus[v].p50, res[c - 1].workers);
    }
    printf("\nresults checked: %ld, wrong: %ld: %s\n", checked, wrong, wrong ? "FAIL" : "all correct");
    printf("---- end ----\n");
    fflush(stdout);

    alarm(WATCHDOG_S);
    cw_module_destroy(&mod);
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    for (int n = 0; n < NODES; n++) free(g_hbuf[n]);
    alarm(0);
    return wrong ? 1 : 0;
}
