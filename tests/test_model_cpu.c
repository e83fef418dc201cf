/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Model-based stress of every kind of handle against the fake CUDA driver
 * (issue 25, item 2). Several threads run random sequences of create, use,
 * destroy, wait and stale-handle calls over every kind of object the fake
 * can make; each call's status is checked against a simple model of what
 * must hold:
 *
 *  - a call on a live object of the thread's own succeeds, with the values
 *    the model predicts (a buffer's size and references, a pool's leases,
 *    a loop's request numbers, a pipeline's iteration count);
 *  - buffered pipelines (issue 38; see "buffered pipelines" below): no
 *    buffer handed out by the cache, read, written or freed while another
 *    stream's work on it is unfinished and not ordered before (the fake's
 *    hazard tracking), no iteration begun past max_in_flight;
 *  - a call on a stale copy of a destroyed handle, while the library still
 *    holds its memory (cwi_handles_held: it is not reused for another
 *    object), is refused with CW_ERROR_INVALID_HANDLE and changes nothing;
 *  - shared objects (a lease pool of 3 streams, one context) stay
 *    consistent: every lease released, none lost;
 *  - at the end every object is gone: the count of live handles and every
 *    live count of the fake driver (streams, events, host and device
 *    memory, graphs, execs, libraries) are those of the start, and per kind
 *    the creates equal the destroys.
 *
 * Environment: CWT_MODEL_SEED (default 20261126; "random": from the clock,
 * printed), CWT_MODEL_THREADS (default 4), CWT_MODEL_S (seconds, default
 * 2), CWT_MODEL_OPS (most calls per thread, default 1000000),
 * CWT_MODEL_HOLD (one compute call of a buffered pipeline in this many
 * holds the fake GPU for 0.2 to 1 ms, default 16; 0: never). The seed and
 * the counts are printed, so any run can be replayed (the interleaving of
 * threads is the one thing a seed does not fix).
 *
 * Links libcuweave.a for the test hooks; the fake's path is argv[1].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "testing/seam.h"

static int (*fake_drain)(int timeout_ms);
static cw_context *ctx;             /* the model's context, made for the run */
static cw_stream_pool *shared_pool; /* lease pool of 3 streams, shared by every thread */

enum Kind {
    K_STREAM,
    K_POOL,
    K_TIMER,
    K_FUTURE,
    K_BUFFER,
    K_GRAPH,
    K_EXEC,
    K_MODULE,
    K_PROGRAM,
    K_RESIDENT,
    K_PIPELINE,
    K_FLOW,
    K_CONTEXT,
    K_DEVSET,
    K_COUNT
};
static const char *const kind_names[K_COUNT] = {"stream",  "pool",     "timer",   "future", "buffer",
                                                "graph",   "exec",     "module",  "program", "resident",
                                                "pipeline", "buffered pipeline", "context", "device group"};

enum { SLOTS = 4, STALE = 16 };

/* ---- buffered pipelines: the model of the in-flight bound and the cache ----
 * A pipeline of 2 to 5 operators in a random shape (sources, operators of
 * one or two inputs from earlier ones, or of a CW_PORT_MANY input fed by up
 * to four), each with a stream of its own or on its upstream's
 * (no_internal_stream), some waiting for their inputs on the host; its
 * operators' pool the pipeline's own, a CW_POOL_SINGLE pool (one stream for
 * all) or, for the operators with inputs, a lease pool of two streams (the
 * others fall back to an upstream stream); one to six executor threads (more than
 * operators, too), max_in_flight 0 to 4 or 1000. Sources now and then emit
 * nothing (what needs their message is skipped); with the pipeline's own
 * pool, a compute call now and then fails after its work (the run fails,
 * the next run goes on). Each compute call
 * reads every input buffer (a copy to host on its stream), takes a buffer
 * from the pipeline's cache (cw_io_alloc), writes a tag for its iteration
 * into it and copies it back into host memory, all on its stream, and emits
 * it. Now and then a call holds the fake GPU for up to a millisecond (the
 * holder thread lets it go), so that work is left unfinished while the
 * pipeline goes on. What must hold:
 *  - a buffer handed out by the cache has no unfinished work on it
 *    (fake_cuda_mem_busy: the cache hands out only buffers whose uses all
 *    finished);
 *  - no read, write or free of a buffer on a stream that is not ordered
 *    after another stream's unfinished work on it (the fake's hazards);
 *  - a compute call of iteration g begins only once every operator's copy
 *    back of iteration g - max_in_flight has landed (the bound). */
enum { FLOW_OPS = 5, RING = 16 };
struct Flow;
typedef struct FlowOp {
    struct Flow *f;
    int index, nin, own_stream, wait_inputs, has_out, bytes;
    int many;                  /* its one input is a CW_PORT_MANY port fed by nin operators (up to 4) */
    int skips;                 /* a source that emits nothing in one call of 4 */
    uint64_t calls;            /* its compute calls (the tags: unique even when a failed iteration is run again) */
    uint64_t rng;              /* its calls' draws (an operator's calls never overlap) */
    int from[4];
    char name[8], in_name[2][8];
    uint64_t src[RING];        /* the tag each iteration writes (the fake copies from here) */
    uint64_t done[RING];       /* where its copy back lands */
    uint64_t read[RING][4];    /* where the reads of its inputs land (not checked) */
    uint64_t want[RING];       /* the tag of the iteration that used the slot last (0: none) */
} FlowOp;
typedef struct Flow {
    unsigned gen;              /* the pipeline's number in its thread (tags) */
    int nops, max;
    unsigned threads;
    int pool_kind;             /* 0: the pipeline's own, 1: CW_POOL_SINGLE, 2: a lease pool of 2 */
    int fails;                 /* compute calls fail now and then (pool_kind 0 only) */
    cw_stream_pool *pool;      /* pool_kind 1, 2: destroyed after the pipeline */
    uint64_t base;             /* iterations of earlier runs */
    FlowOp op[FLOW_OPS];
    atomic_long bad;           /* failures seen by compute calls (any executor thread) */
    atomic_long checked, handed, busy;
    char why[320];
    atomic_int why_set;
} Flow;

typedef struct {
    void *h[K_COUNT][SLOTS];
    long aux[K_COUNT][SLOTS];    /* what the model knows: a buffer's size, a loop's last request */
    void *stale[STALE];          /* copies of destroyed handles */
    int stale_kind[STALE];
    int nstale;
    unsigned long long rng;
    long ops, created[K_COUNT], destroyed[K_COUNT], stale_checked, stale_skipped, leases, errors;
    long flow_runs, flow_checked, flow_handed, flow_busy, flow_failed;
    unsigned flow_gen;
    cw_stream *own;              /* a stream the thread keeps (work to wait for) */
    Flow flow[SLOTS];            /* the buffered pipelines' model (K_FLOW), kept with the thread */
} Thread;

static atomic_int g_stop;
static long g_max_ops;

/* Loading code is refused while a resident loop runs (docs/resident.md), and
 * a loop's launch builds it first when something changed (which loads code):
 * a module load or a launch may be refused (CW_ERROR_INVALID_STATE, "loading
 * waits") when another thread's loop may have run during the call (counted
 * from before its launch until its teardown returned), and must succeed
 * otherwise. Nothing serialises loads and launches: the fake counts every
 * driver call made that would wait for a running loop (issue 38), and the
 * run must make none. */
static atomic_long g_loops_running, g_loop_launches, g_loads_refused;
static long (*fake_violations)(char *last, size_t cap);

typedef struct {
    long running, launches;
} LoopsSeen;

static LoopsSeen loops_seen(int own) {
    LoopsSeen seen = {atomic_load(&g_loops_running) - own, atomic_load(&g_loop_launches)};
    return seen;
}

/* st is a load refused because another thread's loop may have run meanwhile. */
static int refused_for_a_loop(cw_status st, LoopsSeen before) {
    if (st != CW_ERROR_INVALID_STATE || !strstr(cw_last_error()->message, "loading waits")) return 0;
    if (before.running == 0 && atomic_load(&g_loop_launches) == before.launches) return 0;
    atomic_fetch_add(&g_loads_refused, 1);
    return 1;
}
static const char *const k_source = "extern \"C\" __global__ void model_k(int *p) { *p = 1; }";

static unsigned rnd(Thread *t, unsigned n) {
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    return (unsigned)(t->rng % n);
}

#define EXPECT(t, cond, ...)                                                                                 \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("# model: " __VA_ARGS__);                                                                 \
            printf(" (%s)\n", cw_last_error()->message);                                                      \
            (t)->errors++;                                                                                   \
        }                                                                                                    \
    } while (0)

static cw_status noop_compute(cw_io *io, void *user) {
    (void)user;
    cw_stream *s = NULL;
    return cw_io_receive_stream(io, NULL, &s);
}

/* ---- buffered pipelines ------------------------------------------------------ */

static long (*fake_hazards)(char *text, size_t cap, long *lost);
static long (*fake_mem_busy)(cw_devptr dptr);
static void (*fake_hold)(int on);
static atomic_long g_hazards_seen;

/* Holds of the fake GPU: a compute call asks for one of some milliseconds;
 * the holder thread lets the GPU go when the latest asked for has passed. */
static pthread_mutex_t g_hold_lock = PTHREAD_MUTEX_INITIALIZER;
static double g_hold_until; /* 0: not held */
static atomic_long g_holds;
static unsigned g_hold_every; /* a compute call in this many holds the GPU (CWT_MODEL_HOLD; 0: none) */

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void hold_for(double ms) {
    pthread_mutex_lock(&g_hold_lock);
    const double until = mono_ms() + ms;
    if (until > g_hold_until) g_hold_until = until;
    fake_hold(1);
    pthread_mutex_unlock(&g_hold_lock);
    atomic_fetch_add(&g_holds, 1);
}

static atomic_int g_holder_stop;
static void *holder_main(void *arg) {
    (void)arg;
    while (!atomic_load(&g_holder_stop)) {
        pthread_mutex_lock(&g_hold_lock);
        if (g_hold_until != 0 && mono_ms() >= g_hold_until) {
            g_hold_until = 0;
            fake_hold(0);
        }
        pthread_mutex_unlock(&g_hold_lock);
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&g_hold_lock);
    g_hold_until = 0;
    fake_hold(0);
    pthread_mutex_unlock(&g_hold_lock);
    return NULL;
}

static void flow_bad(Flow *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void flow_bad(Flow *f, const char *fmt, ...) {
    atomic_fetch_add(&f->bad, 1);
    if (atomic_exchange(&f->why_set, 1)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
}

static unsigned flow_rnd(uint64_t *x, unsigned n) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (unsigned)(*x % n);
}

#define FLOW_TRY(x)                      \
    do {                                 \
        cw_status st_ = (x);             \
        if (st_ != CW_SUCCESS) return st_; \
    } while (0)

static cw_status flow_compute(cw_io *io, void *user) {
    FlowOp *o = (FlowOp *)user;
    Flow *f = o->f;
    cw_io_info info;
    memset(&info, 0, sizeof info);
    FLOW_TRY(cw_io_get_info(io, &info));
    const uint64_t g = f->base + info.iteration; /* over every run, as the bound counts */
    const int slot = (int)(g % RING);
    /* The bound: every operator's work of iteration g - max has finished. */
    if (f->max > 0 && g >= (uint64_t)f->max) {
        const int old = (int)((g - (uint64_t)f->max) % RING);
        for (int q = 0; q < f->nops; q++) {
            const uint64_t want = f->op[q].want[old];
            if (!want) continue;
            atomic_fetch_add(&f->checked, 1);
            if (__atomic_load_n(&f->op[q].done[old], __ATOMIC_ACQUIRE) != want)
                flow_bad(f, "iteration %llu began (operator %s, %u executor threads) with operator %s's work of "
                            "iteration %llu unfinished (max_in_flight %d)",
                         (unsigned long long)g, o->name, f->threads, f->op[q].name,
                         (unsigned long long)(g - (uint64_t)f->max), f->max);
        }
    }
    o->want[slot] = 0;
    cw_stream *s = NULL;
    if (o->nin == 0) FLOW_TRY(cw_io_receive_stream(io, NULL, &s));
    for (int k = 0; k < (o->many ? 1 : o->nin); k++) {
        cw_message m[4];
        size_t n = 1;
        FLOW_TRY(cw_io_receive_stream(io, o->in_name[k], &s));
        if (o->many)
            FLOW_TRY(cw_io_receive_many(io, o->in_name[k], m, 4, &n));
        else
            FLOW_TRY(cw_io_receive(io, o->in_name[k], &m[0]));
        if (n == 0 || n > (size_t)o->nin)
            flow_bad(f, "operator %s received %zu messages on %s (of %d connections)", o->name, n, o->in_name[k],
                     o->nin);
        for (size_t j = 0; j < n && j < 4; j++) {
            cw_devptr d = 0;
            if (!m[j].buffer) {
                flow_bad(f, "operator %s received no buffer on %s", o->name, o->in_name[k]);
                continue;
            }
            FLOW_TRY(cw_buffer_get_ptr(m[j].buffer, &d));
            FLOW_TRY(cw_copy_to_host(s, &o->read[slot][o->many ? j : (size_t)k], d, 8));
        }
    }
    /* (a hold begun here keeps this call's work and what follows unfinished) */
    if (g_hold_every && flow_rnd(&o->rng, g_hold_every) == 0) hold_for(0.2 + flow_rnd(&o->rng, 9) / 10.0);
    cw_buffer *b = NULL;
    cw_devptr d = 0;
    FLOW_TRY(cw_io_alloc(&b, io, (size_t)o->bytes));
    FLOW_TRY(cw_buffer_get_writable(b, &d));
    atomic_fetch_add(&f->handed, 1);
    const long busy = fake_mem_busy(d);
    if (busy != 0) atomic_fetch_add(&f->busy, 1);
    if (busy != 0)
        flow_bad(f, "operator %s (iteration %llu, %u executor threads, max_in_flight %d) was handed a buffer with %ld "
                    "unfinished accesses",
                 o->name, (unsigned long long)g, f->threads, f->max, busy);
    o->src[slot] = ((uint64_t)f->gen << 40) | ((uint64_t)o->index << 32) | (++o->calls & 0xffffffffu);
    FLOW_TRY(cw_copy_to_device(s, d, &o->src[slot], 8));
    FLOW_TRY(cw_copy_to_host(s, &o->done[slot], d, 8));
    o->want[slot] = o->src[slot];
    /* (after its work: the run fails, and the next run goes on) */
    if (f->fails && flow_rnd(&o->rng, 16) == 0) return CW_ERROR_INTERNAL;
    if (o->skips && flow_rnd(&o->rng, 3) == 0) return CW_SUCCESS; /* what needs its message is skipped */
    if (o->has_out) FLOW_TRY(cw_io_emit(io, "out", NULL, b));
    return CW_SUCCESS;
}

/* A random shape, made into a pipeline. */
static cw_status flow_create(Thread *t, Flow *f, cw_pipeline **out) {
    memset(f, 0, offsetof(Flow, bad));
    atomic_store(&f->bad, 0);
    atomic_store(&f->checked, 0);
    atomic_store(&f->handed, 0);
    atomic_store(&f->busy, 0);
    atomic_store(&f->why_set, 0);
    f->why[0] = 0;
    f->gen = ++t->flow_gen;
    f->nops = 2 + (int)rnd(t, FLOW_OPS - 1);
    f->max = rnd(t, 8) == 0 ? 1000 : (int)rnd(t, 5);
    f->threads = rnd(t, 4) == 0 ? 1 + rnd(t, 6) : 1 + rnd(t, 2);
    f->pool_kind = rnd(t, 4) == 0 ? 1 + (int)rnd(t, 2) : 0;
    f->fails = f->pool_kind == 0 && rnd(t, 4) == 0;
    for (int i = 0; i < f->nops; i++) {
        FlowOp *o = &f->op[i];
        o->f = f;
        o->index = i;
        o->rng = t->rng ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
        if (!o->rng) o->rng = 1;
        snprintf(o->name, sizeof o->name, "op%d", i);
        o->many = i >= 2 && rnd(t, 4) == 0;
        if (o->many)
            o->nin = 2 + (int)rnd(t, (unsigned)(i < 4 ? i - 1 : 3)); /* 2 to min(i, 4) distinct upstreams */
        else
            o->nin = i == 0 || rnd(t, 5) == 0 ? 0 : 1 + (i >= 2 && rnd(t, 3) == 0);
        for (int k = 0; k < o->nin; k++) {
            o->from[k] = (int)rnd(t, (unsigned)i);
            for (int j = 0; j < k; j++)
                if (o->from[j] == o->from[k]) {
                    o->from[k] = (o->from[k] + 1) % i;
                    j = -1; /* look again from the first */
                }
            f->op[o->from[k]].has_out = 1;
        }
        for (int k = 0; k < (o->many ? 1 : o->nin); k++) snprintf(o->in_name[k], sizeof o->in_name[k], "in%d", k);
        o->own_stream = o->nin == 0 || rnd(t, 2) == 0;
        o->wait_inputs = o->nin > 0 && rnd(t, 4) == 0;
        o->skips = o->nin == 0 && rnd(t, 3) == 0;
        o->bytes = 64 << rnd(t, 2);
    }
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = f->threads;
    ps.max_in_flight = (unsigned)f->max;
    if (f->pool_kind) {
        cw_stream_pool_settings pss;
        cw_stream_pool_settings_default(&pss);
        pss.mode = f->pool_kind == 1 ? CW_POOL_SINGLE : CW_POOL_LEASE;
        pss.max_streams = 2;
        FLOW_TRY(cw_stream_pool_create(&f->pool, ctx, &pss));
        if (f->pool_kind == 1) ps.pool = f->pool; /* sources too: a pool of 2 would leave a third none */
    }
    cw_status made = cw_pipeline_create(out, ctx, &ps);
    if (made != CW_SUCCESS) {
        cw_stream_pool_destroy(&f->pool);
        return made;
    }
    cw_status st = CW_SUCCESS;
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = flow_compute;
    for (int i = 0; i < f->nops && st == CW_SUCCESS; i++) {
        FlowOp *o = &f->op[i];
        cw_operator_settings os;
        cw_operator_settings_default(&os);
        os.no_internal_stream = !o->own_stream;
        os.wait_inputs = o->wait_inputs;
        if (f->pool_kind == 2 && o->nin > 0) os.pool = f->pool; /* the third to ask falls back upstream */
        cw_operator *op = NULL;
        cw_port_settings many;
        cw_port_settings_default(&many);
        many.flags = CW_PORT_MANY;
        st = cw_operator_create(&op, o->name, &ops, o, &os);
        for (int k = 0; k < (o->many ? 1 : o->nin) && st == CW_SUCCESS; k++)
            st = cw_operator_add_input(op, o->in_name[k], o->many ? &many : NULL);
        if (st == CW_SUCCESS && o->has_out) st = cw_operator_add_output(op, "out", NULL);
        if (st == CW_SUCCESS) st = cw_pipeline_add(*out, op);
        if (st != CW_SUCCESS) cw_operator_destroy(&op);
    }
    for (int i = 0; i < f->nops && st == CW_SUCCESS; i++)
        for (int k = 0; k < f->op[i].nin && st == CW_SUCCESS; k++)
            st = cw_pipeline_connect(*out, f->op[f->op[i].from[k]].name, "out", f->op[i].name,
                                     f->op[i].in_name[f->op[i].many ? 0 : k]);
    if (st != CW_SUCCESS) {
        cw_pipeline_destroy(out);
        cw_stream_pool_destroy(&f->pool);
    }
    return st;
}

/* Hazards the fake saw since last asked: a failure of whoever asks. */
static void flow_hazards(Thread *t);

/* ---- create, use, destroy per kind ---------------------------------------------- */

static void create(Thread *t, int k, int i) {
    void **h = &t->h[k][i];
    cw_status st = CW_SUCCESS;
    switch (k) {
    case K_STREAM: st = cw_stream_create((cw_stream **)h, ctx, NULL); break;
    case K_POOL: {
        cw_stream_pool_settings ps;
        cw_stream_pool_settings_default(&ps);
        ps.max_streams = 2;
        st = cw_stream_pool_create((cw_stream_pool **)h, ctx, &ps);
        break;
    }
    case K_TIMER: st = cw_timer_create((cw_timer **)h, ctx); break;
    case K_FUTURE: st = cw_future_create((cw_future **)h, t->own, (cw_future_kind)rnd(t, 3)); break;
    case K_BUFFER:
        t->aux[k][i] = 64 + 64 * rnd(t, 8);
        st = cw_buffer_create((cw_buffer **)h, t->own, (size_t)t->aux[k][i]);
        break;
    case K_GRAPH: st = cw_graph_create((cw_graph **)h, ctx); break;
    case K_EXEC: {
        cw_graph *g = NULL;
        st = cw_graph_create(&g, ctx);
        if (st == CW_SUCCESS) st = cw_graph_add_empty(g, NULL, 0, NULL);
        if (st == CW_SUCCESS) st = cw_graph_instantiate((cw_graph_exec **)h, g, 0);
        cw_graph_destroy(&g);
        break;
    }
    case K_MODULE: {
        cw_program *p = NULL;
        st = cw_program_compile(&p, ctx, k_source, NULL);
        const LoopsSeen seen = loops_seen(0);
        if (st == CW_SUCCESS) st = cw_module_load((cw_module **)h, p);
        cw_program_destroy(&p);
        if (refused_for_a_loop(st, seen)) return;
        break;
    }
    case K_PROGRAM: st = cw_program_compile((cw_program **)h, ctx, k_source, NULL); break;
    case K_RESIDENT: {
        cw_resident_settings rs;
        cw_resident_settings_default(&rs);
        rs.unroll = 1;
        t->aux[k][i] = 0;
        st = cw_resident_create((cw_resident **)h, ctx, &rs);
        break;
    }
    case K_PIPELINE: {
        cw_operator_ops ops;
        memset(&ops, 0, sizeof ops);
        ops.compute = noop_compute;
        cw_operator *op = NULL;
        st = cw_pipeline_create((cw_pipeline **)h, ctx, NULL);
        if (st == CW_SUCCESS) st = cw_operator_create(&op, "op", &ops, NULL, NULL);
        if (st == CW_SUCCESS) st = cw_pipeline_add((cw_pipeline *)*h, op);
        if (st != CW_SUCCESS) cw_operator_destroy(&op);
        t->aux[k][i] = 0;
        break;
    }
    case K_FLOW:
        t->aux[k][i] = 0;
        st = flow_create(t, &t->flow[i], (cw_pipeline **)h);
        break;
    case K_CONTEXT: st = cw_context_create((cw_context **)h, 0); break;
    case K_DEVSET: st = cw_device_group_create((cw_device_group **)h, NULL, 0); break;
    }
    EXPECT(t, st == CW_SUCCESS && *h, "creating a %s: %s", kind_names[k], cw_status_name(st));
    if (st == CW_SUCCESS) t->created[k]++;
}

static void use(Thread *t, int k, int i) {
    void *h = t->h[k][i];
    cw_status st = CW_SUCCESS;
    switch (k) {
    case K_STREAM:
        st = cw_stream_wait((cw_stream *)h, t->own);
        if (st == CW_SUCCESS) st = cw_stream_synchronize((cw_stream *)h);
        break;
    case K_POOL: {
        cw_stream *a = NULL, *b = NULL, *c = NULL;
        st = cw_stream_pool_acquire(&a, (cw_stream_pool *)h, 0);
        if (st == CW_SUCCESS) st = cw_stream_pool_acquire(&b, (cw_stream_pool *)h, 0);
        if (st == CW_SUCCESS) {
            cw_status third = cw_stream_pool_acquire(&c, (cw_stream_pool *)h, 0);
            EXPECT(t, third == CW_ERROR_POOL_EXHAUSTED, "a third lease of a pool of 2: %s", cw_status_name(third));
        }
        if (a) cw_stream_pool_release((cw_stream_pool *)h, &a);
        if (b) cw_stream_pool_release((cw_stream_pool *)h, &b);
        cw_stream_pool_info ps;
        if (st == CW_SUCCESS) st = cw_stream_pool_get_info((cw_stream_pool *)h, &ps);
        if (st == CW_SUCCESS) EXPECT(t, ps.leased == 0, "a pool with %zu leases out after releasing all", ps.leased);
        break;
    }
    case K_TIMER:
        st = cw_timer_start((cw_timer *)h, t->own);
        if (st == CW_SUCCESS) st = cw_timer_stop((cw_timer *)h, t->own);
        break;
    case K_FUTURE:
        st = cw_future_wait((cw_future *)h, -1);
        if (st == CW_SUCCESS) st = cw_future_rearm((cw_future *)h, t->own);
        break;
    case K_BUFFER: {
        cw_buffer_info bi;
        st = cw_buffer_use((cw_buffer *)h, t->own);
        if (st == CW_SUCCESS) st = cw_buffer_get_info((cw_buffer *)h, &bi);
        if (st == CW_SUCCESS)
            EXPECT(t, bi.bytes == (size_t)t->aux[k][i] && bi.refs == 1, "a buffer of %zu bytes, %u refs (want %ld, 1)",
                   bi.bytes, bi.refs, t->aux[k][i]);
        break;
    }
    case K_GRAPH: {
        cw_graph_info gi;
        st = cw_graph_add_empty((cw_graph *)h, NULL, 0, NULL);
        if (st == CW_SUCCESS) st = cw_graph_get_info((cw_graph *)h, &gi);
        break;
    }
    case K_EXEC: st = cw_graph_exec_launch((cw_graph_exec *)h, t->own); break;
    case K_MODULE: {
        cw_kernel *kern = NULL;
        st = cw_module_get_kernel((cw_module *)h, "model_k", &kern);
        break;
    }
    case K_PROGRAM: {
        cw_program_info pi;
        st = cw_program_get_info((cw_program *)h, &pi);
        if (st == CW_SUCCESS) EXPECT(t, pi.size > 0, "a program of %zu bytes", pi.size);
        break;
    }
    case K_RESIDENT: {
        /* The fake serves no request: launch, ring, tear down; the request is dropped. */
        cw_resident *r = (cw_resident *)h;
        uint64_t seq = 0;
        atomic_fetch_add(&g_loop_launches, 1);
        atomic_fetch_add(&g_loops_running, 1);
        const LoopsSeen seen = loops_seen(1);
        st = cw_resident_launch(r);
        if (refused_for_a_loop(st, seen)) {
            atomic_fetch_sub(&g_loops_running, 1);
            return;
        }
        if (st == CW_SUCCESS) st = cw_resident_data_ready(r, &seq);
        if (st == CW_SUCCESS) EXPECT(t, (long)seq == t->aux[k][i] + 1, "request %llu, want %ld", (unsigned long long)seq,
                                     t->aux[k][i] + 1);
        if (st == CW_SUCCESS) t->aux[k][i] = (long)seq;
        if (st == CW_SUCCESS) st = cw_resident_tear_down(r, 5000);
        atomic_fetch_sub(&g_loops_running, 1);
        cw_status dropped = cw_resident_poll_result(r, seq);
        EXPECT(t, dropped == CW_ERROR_INVALID_STATE, "a dropped request: %s", cw_status_name(dropped));
        break;
    }
    case K_PIPELINE: {
        cw_pipeline_info ps;
        st = cw_pipeline_run((cw_pipeline *)h, 1);
        if (st == CW_SUCCESS) t->aux[k][i]++;
        if (st == CW_SUCCESS) st = cw_pipeline_get_info((cw_pipeline *)h, &ps);
        if (st == CW_SUCCESS)
            EXPECT(t, (long)ps.iterations == t->aux[k][i], "a pipeline with %llu iterations, want %ld",
                   (unsigned long long)ps.iterations, t->aux[k][i]);
        break;
    }
    case K_FLOW: {
        Flow *f = &t->flow[i];
        cw_pipeline_info ps;
        const uint64_t n = 1 + rnd(t, 4);
        f->base = (uint64_t)t->aux[k][i];
        st = cw_pipeline_run((cw_pipeline *)h, n);
        if (st == CW_ERROR_INTERNAL && f->fails && strstr(cw_last_error()->message, "(compute)")) {
            /* a call failed on purpose: the iterations before it counted */
            st = cw_pipeline_get_info((cw_pipeline *)h, &ps);
            if (st == CW_SUCCESS)
                EXPECT(t, (long)ps.iterations >= t->aux[k][i] && (long)ps.iterations < t->aux[k][i] + (long)n,
                       "a failed run of %llu iterations left %llu, from %ld", (unsigned long long)n,
                       (unsigned long long)ps.iterations, t->aux[k][i]);
            if (st == CW_SUCCESS) t->aux[k][i] = (long)ps.iterations;
            t->flow_failed++;
        } else {
            if (st == CW_SUCCESS) t->aux[k][i] += (long)n;
            if (st == CW_SUCCESS) st = cw_pipeline_get_info((cw_pipeline *)h, &ps);
            if (st == CW_SUCCESS)
                EXPECT(t, (long)ps.iterations == t->aux[k][i], "a buffered pipeline with %llu iterations, want %ld",
                       (unsigned long long)ps.iterations, t->aux[k][i]);
        }
        t->flow_runs++;
        t->flow_checked += atomic_exchange(&f->checked, 0);
        t->flow_handed += atomic_exchange(&f->handed, 0);
        t->flow_busy += atomic_exchange(&f->busy, 0);
        if (atomic_load(&f->bad)) {
            printf("# model: a buffered pipeline (%d operators): %ld wrong, the first: %s\n", f->nops,
                   atomic_load(&f->bad), f->why);
            t->errors += atomic_load(&f->bad);
            atomic_store(&f->bad, 0);
            atomic_store(&f->why_set, 0);
        }
        flow_hazards(t);
        break;
    }
    case K_CONTEXT: {
        cw_context_info ci;
        ci.device = -1;
        st = cw_context_get_info((cw_context *)h, &ci);
        if (st == CW_SUCCESS) EXPECT(t, ci.device == 0, "a context of device %d", ci.device);
        break;
    }
    case K_DEVSET: {
        cw_device_group_info gi;
        st = cw_device_group_get_info((cw_device_group *)h, &gi);
        if (st == CW_SUCCESS) EXPECT(t, gi.count == 2, "a group of %d devices (the fake has 2)", gi.count);
        break;
    }
    }
    EXPECT(t, st == CW_SUCCESS, "using a %s: %s", kind_names[k], cw_status_name(st));
}

static void destroy(Thread *t, int k, int i) {
    void *h = t->h[k][i];
    switch (k) {
    case K_STREAM: cw_stream_destroy((cw_stream **)&t->h[k][i]); break;
    case K_POOL: cw_stream_pool_destroy((cw_stream_pool **)&t->h[k][i]); break;
    case K_TIMER: cw_timer_destroy((cw_timer **)&t->h[k][i]); break;
    case K_FUTURE: cw_future_destroy((cw_future **)&t->h[k][i]); break;
    case K_BUFFER: cw_buffer_destroy((cw_buffer **)&t->h[k][i]); break;
    case K_GRAPH: cw_graph_destroy((cw_graph **)&t->h[k][i]); break;
    case K_EXEC: cw_graph_exec_destroy((cw_graph_exec **)&t->h[k][i]); break;
    case K_MODULE: cw_module_destroy((cw_module **)&t->h[k][i]); break;
    case K_PROGRAM: cw_program_destroy((cw_program **)&t->h[k][i]); break;
    case K_RESIDENT: cw_resident_destroy((cw_resident **)&t->h[k][i]); break;
    case K_PIPELINE: cw_pipeline_destroy((cw_pipeline **)&t->h[k][i]); break;
    case K_FLOW: {
        /* Its copies land in t->flow[i], which the next pipeline of the slot
         * zeroes: wait for them (cw_pipeline_destroy does not). */
        const cw_status synced = cw_pipeline_synchronize((cw_pipeline *)t->h[k][i]);
        EXPECT(t, synced == CW_SUCCESS, "synchronizing a buffered pipeline: %s", cw_status_name(synced));
        cw_pipeline_destroy((cw_pipeline **)&t->h[k][i]);
        cw_stream_pool_destroy(&t->flow[i].pool);
        flow_hazards(t); /* its buffers' frees */
        break;
    }
    case K_CONTEXT: cw_context_destroy((cw_context **)&t->h[k][i]); break;
    case K_DEVSET: cw_device_group_destroy((cw_device_group **)&t->h[k][i]); break;
    }
    EXPECT(t, t->h[k][i] == NULL, "a %s's handle left set by its destroy", kind_names[k]);
    t->destroyed[k]++;
    const int s = t->nstale < STALE ? t->nstale++ : (int)rnd(t, STALE);
    t->stale[s] = h;
    t->stale_kind[s] = k;
}

static void flow_hazards(Thread *t) {
    char text[512];
    const long n = fake_hazards(text, sizeof text, NULL);
    const long seen = atomic_exchange(&g_hazards_seen, n);
    if (n != seen) {
        printf("# model: %ld hazards in the fake, the last: %s\n", n - seen, text);
        t->errors++;
    }
}

/* A call through a stale handle: refused while its memory is held. Only
 * calls that change nothing: should the memory be released and reused
 * between the check and the call, they must not harm the new owner. */
static void use_stale(Thread *t) {
    if (t->nstale == 0) return;
    const int s = (int)rnd(t, (unsigned)t->nstale);
    void *h = t->stale[s];
    if (!cwi_handles_held(h)) {
        t->stale_skipped++;
        return;
    }
    cw_context *c = NULL;
    cw_status st = CW_SUCCESS;
    cw_stream_pool_info pi;
    float ms = 0;
    switch (t->stale_kind[s]) {
    case K_STREAM: st = cwt_stream_context((cw_stream *)h, &c); break;
    case K_POOL: st = cw_stream_pool_get_info((cw_stream_pool *)h, &pi); break;
    case K_TIMER: st = cw_timer_get_elapsed_ms((cw_timer *)h, &ms); break;
    case K_FUTURE: st = cw_future_poll((cw_future *)h); break;
    case K_BUFFER: {
        cw_buffer_info bi;
        st = cw_buffer_get_info((cw_buffer *)h, &bi);
        break;
    }
    case K_GRAPH: {
        cw_graph_info gi;
        st = cw_graph_get_info((cw_graph *)h, &gi);
        break;
    }
    case K_EXEC: {
        cw_graph_exec_info ei;
        st = cw_graph_exec_get_info((cw_graph_exec *)h, &ei);
        break;
    }
    case K_MODULE: {
        cw_kernel *kern = NULL;
        st = cw_module_get_kernel((cw_module *)h, "model_k", &kern);
        break;
    }
    case K_PROGRAM: {
        cw_program_info pi;
        st = cw_program_get_info((cw_program *)h, &pi);
        break;
    }
    case K_RESIDENT: {
        cw_resident_state rs;
        st = cw_resident_get_state((cw_resident *)h, &rs);
        break;
    }
    case K_PIPELINE:
    case K_FLOW: {
        cw_pipeline_info pi;
        st = cw_pipeline_get_info((cw_pipeline *)h, &pi);
        break;
    }
    case K_CONTEXT: {
        cw_context_info ci;
        st = cw_context_get_info((cw_context *)h, &ci);
        break;
    }
    case K_DEVSET: {
        cw_device_group_info gi;
        st = cw_device_group_get_info((cw_device_group *)h, &gi);
        break;
    }
    }
    if (!cwi_handles_held(h)) { /* released meanwhile: the answer may be a new object's */
        t->stale_skipped++;
        return;
    }
    t->stale_checked++;
    EXPECT(t, st == CW_ERROR_INVALID_HANDLE, "a stale %s answered %s", kind_names[t->stale_kind[s]],
           cw_status_name(st));
}

/* A lease of the shared pool, waited for: released at once. */
static void lease_shared(Thread *t) {
    cw_stream *s = NULL;
    cw_status st = cw_stream_pool_acquire(&s, shared_pool, -1);
    EXPECT(t, st == CW_SUCCESS && s, "a lease of the shared pool: %s", cw_status_name(st));
    if (st != CW_SUCCESS) return;
    t->leases++;
    st = cw_stream_wait(s, t->own);
    EXPECT(t, st == CW_SUCCESS, "ordering a leased stream: %s", cw_status_name(st));
    st = cw_stream_pool_release(shared_pool, &s);
    EXPECT(t, st == CW_SUCCESS && !s, "releasing a lease: %s", cw_status_name(st));
}

static void *run(void *arg) {
    Thread *t = (Thread *)arg;
    if (cw_stream_create(&t->own, ctx, NULL) != CW_SUCCESS) {
        t->errors++;
        return NULL;
    }
    while (!atomic_load(&g_stop) && t->ops < g_max_ops) {
        t->ops++;
        const unsigned what = rnd(t, 100);
        if (what < 5) {
            use_stale(t);
        } else if (what < 10) {
            lease_shared(t);
        } else {
            const int k = (int)rnd(t, K_COUNT), i = (int)rnd(t, SLOTS);
            if (!t->h[k][i])
                create(t, k, i);
            else if (what < 60)
                use(t, k, i);
            else
                destroy(t, k, i);
        }
    }
    /* Streams last: their stale copies are the ones tried once every thread
     * has stopped (test_model), while their memory is still held. */
    for (int k = K_COUNT - 1; k >= 0; k--)
        for (int i = 0; i < SLOTS; i++)
            if (t->h[k][i]) destroy(t, k, i);
    cw_stream_synchronize(t->own);
    cw_stream_destroy(&t->own);
    return NULL;
}

/* Warnings logged: a destroy of a handle that is not live ignores it and
 * says so at CW_LOG_WARNING (the thread's detail is left alone). */
static atomic_int g_warnings;
static void count_warnings(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if (level == CW_LOG_WARNING) atomic_fetch_add(&g_warnings, 1);
}

static void test_model(void **state) {
    (void)state;
    const char *seed_env = getenv("CWT_MODEL_SEED");
    unsigned long long seed = 20261126ull;
    if (seed_env && strcmp(seed_env, "random") == 0)
        seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    else if (seed_env && *seed_env)
        seed = strtoull(seed_env, NULL, 0);
    const int nthreads = getenv("CWT_MODEL_THREADS") ? atoi(getenv("CWT_MODEL_THREADS")) : 4;
    const double seconds = getenv("CWT_MODEL_S") ? atof(getenv("CWT_MODEL_S")) : 2.0;
    g_max_ops = getenv("CWT_MODEL_OPS") ? atol(getenv("CWT_MODEL_OPS")) : 1000000;
    g_hold_every = getenv("CWT_MODEL_HOLD") ? (unsigned)atoi(getenv("CWT_MODEL_HOLD")) : 16;
    assert_true(nthreads >= 1 && nthreads <= 64);

    /* The model's context and shared pool are made here and go at the end,
     * so that what they pooled (events, streams, memory) goes too and the
     * fake's counts can be compared with those of before. */
    long before[NKINDS];
    snapshot(before);
    const long libs0 = fake_live("library"), kernels0 = fake_live("kernel"), mempools0 = fake_live("mempool");
    const long primary0 = fake_live("primary0"), primary1 = fake_live("primary1");
    const size_t live0 = cwi_handles_live();
    const long violations0 = fake_violations(NULL, 0);
    cw_stream_pool_settings pss;
    cw_stream_pool_settings_default(&pss);
    pss.max_streams = 3;
    assert_cw_ok(cw_context_create(&ctx, 0));
    assert_cw_ok(cw_stream_pool_create(&shared_pool, ctx, &pss));

    Thread *th = calloc((size_t)nthreads, sizeof(Thread));
    pthread_t *id = calloc((size_t)nthreads, sizeof(pthread_t));
    assert_non_null(th);
    assert_non_null(id);
    atomic_store(&g_stop, 0);
    long lost0 = 0;
    const long hazards0 = fake_hazards(NULL, 0, &lost0);
    atomic_store(&g_hazards_seen, hazards0);
    atomic_store(&g_holder_stop, 0);
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, holder_main, NULL), 0);
    for (int i = 0; i < nthreads; i++) {
        th[i].rng = seed * 0x9e3779b97f4a7c15ull + (unsigned long long)i * 0xbf58476d1ce4e5b9ull + 1;
        assert_int_equal(pthread_create(&id[i], NULL, run, &th[i]), 0);
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < nthreads; i++) pthread_join(id[i], NULL);
    atomic_store(&g_holder_stop, 1);
    pthread_join(holder, NULL); /* the GPU let go */

    /* One thread, everything else still: a stale destroy while held is
     * refused (the threads' stale streams, and one made here for sure). */
    long refused = 0, tried = 0;
    assert_cw_ok(cw_log_set_callback(count_warnings, NULL, CW_LOG_WARNING));
    {
        cw_stream *s1 = NULL, *copy;
        assert_cw_ok(cw_stream_create(&s1, ctx, NULL));
        copy = s1;
        cw_stream_destroy(&s1);
        cw_stream *s2 = NULL;
        assert_cw_ok(cw_stream_create(&s2, ctx, NULL));
        assert_true(cwi_handles_held(copy));
        tried++;
        atomic_store(&g_warnings, 0);
        cw_stream_destroy(&copy);
        refused += atomic_load(&g_warnings) == 1;
        assert_cw_ok(cw_stream_synchronize(s2)); /* the new one untouched */
        cw_stream_destroy(&s2);
    }
    for (int i = 0; i < nthreads; i++)
        for (int s = 0; s < th[i].nstale; s++) {
            if (th[i].stale_kind[s] != K_STREAM || !cwi_handles_held(th[i].stale[s])) continue;
            cw_stream *stale = (cw_stream *)th[i].stale[s];
            tried++;
            atomic_store(&g_warnings, 0);
            cw_stream_destroy(&stale);
            refused += atomic_load(&g_warnings) == 1;
        }
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));

    long ops = 0, errors = 0, checked = 0, skipped = 0, leases = 0, created[K_COUNT] = {0}, destroyed[K_COUNT] = {0};
    long flow_runs = 0, flow_checked = 0, flow_handed = 0, flow_busy = 0, flow_failed = 0;
    for (int i = 0; i < nthreads; i++) {
        flow_busy += th[i].flow_busy;
        flow_failed += th[i].flow_failed;
        flow_runs += th[i].flow_runs;
        flow_checked += th[i].flow_checked;
        flow_handed += th[i].flow_handed;
        ops += th[i].ops;
        errors += th[i].errors;
        checked += th[i].stale_checked;
        skipped += th[i].stale_skipped;
        leases += th[i].leases;
        for (int k = 0; k < K_COUNT; k++) {
            created[k] += th[i].created[k];
            destroyed[k] += th[i].destroyed[k];
        }
    }
    printf("# model: seed %llu, %d threads, %.1f s: %ld calls, %ld stale handles refused (%ld not checked: "
           "their memory was reused), %ld shared leases, %ld of %ld stale stream destroys refused; made and "
           "destroyed:",
           seed, nthreads, seconds, ops, checked, skipped, leases, refused, tried);
    for (int k = 0; k < K_COUNT; k++) printf(" %s %ld/%ld", kind_names[k], created[k], destroyed[k]);
    printf("; %ld wrong\n", errors);
    char htext[512];
    long lost = 0;
    const long hazards = fake_hazards(htext, sizeof htext, &lost) - hazards0;
    printf("# model: buffered pipelines: %ld runs (%ld failed on purpose), %ld buffers handed out (%ld with unfinished "
           "work), %ld in-flight checks, %ld holds of the GPU, %ld hazards%s%s\n",
           flow_runs, flow_failed, flow_handed, flow_busy, flow_checked, atomic_load(&g_holds), hazards, hazards ? ", the last: " : "",
           hazards ? htext : "");
    char last[160];
    const long violations = fake_violations(last, sizeof last) - violations0;
    printf("# model: %ld loads and launches refused while another thread's loop ran; %ld driver calls that would "
           "wait for a running loop%s%s\n",
           atomic_load(&g_loads_refused), violations, violations ? ", the last: " : "", violations ? last : "");

    assert_int_equal(errors, 0);
    assert_int_equal(hazards, 0);
    assert_int_equal(lost - lost0, 0); /* the fake noted every access and ordering */
    assert_int_equal(violations, 0);
    assert_int_equal(refused, tried);
    for (int k = 0; k < K_COUNT; k++) assert_int_equal(created[k], destroyed[k]);
    cw_stream_pool_info ps;
    assert_cw_ok(cw_stream_pool_get_info(shared_pool, &ps));
    assert_int_equal(ps.leased, 0);
    assert_true(ps.created <= 3);
    cw_stream_pool_destroy(&shared_pool);
    cw_context_destroy(&ctx);
    assert_int_equal(cwi_handles_live(), live0);
    assert_int_equal(fake_live("primary0"), primary0);
    assert_int_equal(fake_live("primary1"), primary1);
    assert_int_equal(leaks(before, "the model run"), 0);
    assert_int_equal(fake_live("library"), libs0);
    assert_int_equal(fake_live("kernel") - kernels0, 0);
    assert_int_equal(fake_live("mempool"), mempools0);
    free(th);
    free(id);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    /* The fake NVRTC beside the fake driver, and a kernel cache of its own. */
    char nvrtc[4096];
    snprintf(nvrtc, sizeof nvrtc, "%s", argv[1]);
    char *slash = strrchr(nvrtc, '/');
    snprintf(slash ? slash + 1 : nvrtc, sizeof nvrtc - (size_t)(slash ? slash + 1 - nvrtc : 0), "libfakenvrtc.so");
    setenv("CUWEAVE_LIBNVRTC", nvrtc, 1);
    setenv("CUWEAVE_CACHE_DIR", "off", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain")) ||
        !(fake_hold = (void (*)(int))dlsym(lib, "fake_cuda_hold")) ||
        !(fake_hazards = (long (*)(char *, size_t, long *))dlsym(lib, "fake_cuda_hazards")) ||
        !(fake_mem_busy = (long (*)(cw_devptr))dlsym(lib, "fake_cuda_mem_busy")) ||
        !(*(void **)&fake_violations = dlsym(lib, "fake_cuda_persistent_violations"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    live_drain = fake_drain;
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    /* Warm what is made once per process and kept (the built-in kernels and
     * the resident loop's own, the compiled program in the memory cache),
     * on a context that goes before the model runs. */
    cw_stream *w = NULL, *child = NULL;
    cw_buffer *wb = NULL;
    cw_future *wf = NULL;
    cw_resident *wr = NULL;
    cw_program *wp = NULL;
    cw_device_group *ds = NULL;
    if (cw_stream_create(&w, ctx, NULL) || cw_stream_fork(&child, w) || cw_stream_join(w, &child) ||
        cw_buffer_create(&wb, w, 64) || cw_future_create(&wf, w, CW_FUTURE_WRITE_VALUE) ||
        cw_future_wait(wf, -1) || cw_resident_create(&wr, ctx, NULL) ||
        cw_program_compile(&wp, ctx, k_source, NULL) || cw_device_group_create(&ds, NULL, 0)) {
        printf("FAIL: warming up: %s\n", cw_last_error()->message);
        return 1;
    }
    cw_buffer_destroy(&wb);
    cw_future_destroy(&wf);
    cw_resident_destroy(&wr);
    cw_program_destroy(&wp);
    cw_device_group_destroy(&ds);
    cw_stream_synchronize(w);
    cw_stream_destroy(&w);
    cw_context_destroy(&ctx);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
