/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A model test of the fused loop's tile dataflow protocol
 * (src/graph/fused_dataflow.h): the same text the dataflow kernel runs, run
 * here by host threads that stand for blocks, over random plans (built by
 * the library's own plan builder, cwi_fused_plan) and random timing, with a
 * host thread that makes the requests as the doorbell would and sometimes
 * stops the loop. Memory is weak on purpose: each thread's relaxed stores
 * sit in a buffer of its own and become visible in any order, at random
 * moments or at its next release, so a missing release shows as a stale
 * read. What must hold, checked by the test's own code (not the
 * protocol's): no tile runs before every tile it reads has finished for the
 * right request (the data it reads is that request's), every tile of every
 * opened request runs exactly once and none of a request that was not
 * opened, results are signalled in order and only after all of the
 * request's tiles, a request starts only after the one in_flight before it
 * was signalled, and nothing stalls. Two broken variants of the protocol (a
 * tile's done word stored without release; a slot's counters reset one
 * request early) must be caught: they are the negative tests. The watchdog
 * and a dependency function naming a tile that does not exist stop the
 * loop with the stall recorded.
 *
 * CWT_MODEL_SEED and CWT_MODEL_RUNS change the seed and the number of
 * random plans (default 20261201 and 60).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "testing/seam.h"

/* ---- the weak memory the protocol runs on ---- */

static int model_mutation; /* CWF_MUTATION: 0 the protocol as the library has it */

#define SB_MAX 16
typedef struct {
    unsigned long long *addr[SB_MAX];
    unsigned long long val[SB_MAX];
    int n;
    unsigned rng;
} store_buf;
static __thread store_buf sb;

static unsigned rnd(unsigned *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void sb_flush_one(int i) {
    __atomic_store_n(sb.addr[i], sb.val[i], __ATOMIC_RELAXED);
    sb.addr[i] = sb.addr[sb.n - 1];
    sb.val[i] = sb.val[sb.n - 1];
    sb.n--;
}
/* Everything buffered, in a random order (a release). */
static void sb_flush_all(void) {
    while (sb.n) sb_flush_one((int)(rnd(&sb.rng) % (unsigned)sb.n));
}
/* Now and then one buffered store becomes visible, not the oldest first;
 * now and then the thread pauses (another block runs). */
static void jitter(void) {
    const unsigned x = rnd(&sb.rng);
    if (sb.n && (x & 3u) == 0u) sb_flush_one((int)((x >> 2) % (unsigned)sb.n));
    if ((x & 0x70u) == 0u) sched_yield();
    if ((x & 0x3ff00u) == 0u) usleep(50 + (x >> 20) % 200);
}
static unsigned long long m_ld(const unsigned long long *p) {
    jitter();
    for (int i = sb.n - 1; i >= 0; i--) /* its own stores, the newest first */
        if (sb.addr[i] == p) return sb.val[i];
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static void m_st(unsigned long long *p, unsigned long long v) {
    jitter();
    for (int i = 0; i < sb.n; i++)
        if (sb.addr[i] == p) {
            sb.val[i] = v;
            return;
        }
    if (sb.n == SB_MAX) sb_flush_one((int)(rnd(&sb.rng) % SB_MAX));
    sb.addr[sb.n] = p;
    sb.val[sb.n] = v;
    sb.n++;
}
static void m_st_rel(unsigned long long *p, unsigned long long v) {
    jitter();
    sb_flush_all();
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static unsigned long long m_add(unsigned long long *p, unsigned long long v, int release) {
    jitter();
    if (release) sb_flush_all();
    else /* an RMW of a buffered word must see it */
        for (int i = 0; i < sb.n; i++)
            if (sb.addr[i] == p) sb_flush_one(i--);
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
static unsigned long long m_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

#define CWF_MUTATION model_mutation
#define CWF_FN static
#define CWF_LD_ACQ(p) m_ld(p)
#define CWF_LD(p) m_ld(p)
#define CWF_ST_REL(p, v) m_st_rel((p), (v))
#define CWF_ST(p, v) m_st((p), (v))
#define CWF_ADD_ACQREL(p, v) m_add((p), (v), 1)
#define CWF_ADD_REL(p, v) ((void)m_add((p), (v), 1))

#define CWF_NOW() m_now()
#define CWF_NAP(ns) ((ns) > 200u ? (void)usleep(1) : (void)sched_yield())
#include "graph/fused_dataflow.h"

/* ---- one run: a plan, blocks, the host ---- */

#define MAX_STAGES 8
#define MAX_TILES 64
#define MAX_REQ 400
#define COPIES 9 /* data copies: in_flight + 1 at most (seq % COPIES is never reused early) */

typedef struct run {
    /* the plan as the test made it (the oracle's view) */
    cw_fused_stage defs[MAX_STAGES];
    cw_fused_dep deps[MAX_STAGES][4];
    unsigned tx[MAX_STAGES], ty[MAX_STAGES], tiles[MAX_STAGES];
    int fn_out_of_range; /* the dependency function names a tile that does not exist (for request 3) */
    /* the protocol's tables */
    cwf_df_stage *stages;
    cwf_df_dep *pdeps;
    cwf_df_chain *chains;
    unsigned long long counts[9];
    unsigned long long *state;
    /* the host */
    unsigned long long requested; /* atomics */
    unsigned stop;
    unsigned requests;            /* to make */
    unsigned stop_after;          /* stop once this many were made (0: never) */
    unsigned hang_stage, hang_tile, hang_req; /* a tile that sleeps past the watchdog (hang_req 0: none) */
    /* what happened */
    unsigned long long data[COPIES][MAX_STAGES][MAX_TILES]; /* the request that wrote it last (weak stores) */
    unsigned runs[MAX_REQ + 2][MAX_STAGES][MAX_TILES];       /* atomics */
    unsigned finished[MAX_REQ + 2];                          /* tiles finished of each request (atomics) */
    unsigned long long signalled_seen;                       /* last signal seen (the signals follow each other) */
    unsigned long long signal_order_bad, early_signal, early_start;
    unsigned long long stale, unknown;
    char why[256];
    int noted;
    int blocks;
    unsigned seed;
} run;

static void note(run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(run *R, const char *fmt, ...) {
    if (__atomic_exchange_n(&R->noted, 1, __ATOMIC_ACQ_REL) != 0) return; /* the first note stands */
    va_list a;
    va_start(a, fmt);
    vsnprintf(R->why, sizeof R->why, fmt, a);
    va_end(a);
}

/* The dependency function of the model: tiles (tile * 5 + i * 3) % n for i
 * < tile % 3 (none for some tiles); with fn_out_of_range, request 3's tile 0
 * names tile n. */
static run *g_run; /* the run the includer functions see (one at a time) */
static int model_fn(unsigned stage, unsigned tile, cwf_u64 r, unsigned i) {
    run *R = g_run;
    const cw_fused_dep *d = NULL;
    for (unsigned k = 0; k < R->defs[stage].dep_count; k++)
        if (R->deps[stage][k].read == CW_FUSED_READ_FUNCTION) d = &R->deps[stage][k];
    if (!d) return -1;
    const unsigned n = R->tiles[d->stage];
    if (R->fn_out_of_range && r == 3 && tile == 0 && i == 0) return (int)n;
    if (i >= tile % 3u) return -1;
    return (int)((tile * 5u + i * 3u) % n);
}

typedef struct {
    run *R;
} inc_t;

CWF_FN unsigned cwf_df_host_poll(cwf_df_ctx *c, cwf_u64 r) {
    run *R = ((inc_t *)c->inc)->R;
    for (;;) {
        if (__atomic_load_n(&R->stop, __ATOMIC_ACQUIRE)) return 0u;
        if (__atomic_load_n(&R->requested, __ATOMIC_ACQUIRE) >= r) return 1u;
        if (m_ld(&c->st[CWF_W_ABORT])) return 0u;
        sched_yield();
    }
}

CWF_FN void cwf_df_host_signal(cwf_df_ctx *c, cwf_u64 r) {
    run *R = ((inc_t *)c->inc)->R;
    if (r != R->signalled_seen + 1ull) __atomic_fetch_add(&R->signal_order_bad, 1ull, __ATOMIC_RELAXED);
    if (r <= MAX_REQ && __atomic_load_n(&R->finished[r], __ATOMIC_ACQUIRE) != (unsigned)R->counts[3]) {
        __atomic_fetch_add(&R->early_signal, 1ull, __ATOMIC_RELAXED);
        note(R, "request %llu signalled with %u of its %llu tiles finished", r, R->finished[r], R->counts[3]);
    }
    R->signalled_seen = r;
}

CWF_FN int cwf_df_dep_fn(cwf_df_ctx *c, unsigned fn, unsigned stage, unsigned tile, cwf_u64 r, unsigned i) {
    (void)c;
    (void)fn;
    return model_fn(stage, tile, r, i);
}

/* The oracle: the tiles of src that (stage, tile) reads through dep d, by
 * the documented rules (written again here, not the protocol's code). */
static unsigned oracle_tiles(run *R, unsigned stage, unsigned tile, cwf_u64 r, const cw_fused_dep *d, unsigned *out) {
    const unsigned src = d->stage, n = R->tiles[src];
    unsigned k = 0;
    if (d->read == CW_FUSED_READ_SAME) {
        out[k++] = tile;
    } else if (d->read == CW_FUSED_READ_ALL) {
        for (unsigned i = 0; i < n; i++) out[k++] = i;
    } else if (d->read == CW_FUSED_READ_FUNCTION) {
        for (unsigned i = 0;; i++) {
            const int t = model_fn(stage, tile, r, i);
            if (t < 0 || (unsigned)t >= n) break;
            out[k++] = (unsigned)t;
        }
    } else {
        /* the tiles x maps to, floor(x * num / den) .. ceil((x + 1) * num /
         * den) - 1, widened by the radius, clipped; y alike */
        const long num = d->scale_num ? (long)d->scale_num : 1, den = d->scale_den ? (long)d->scale_den : 1;
        const long x = (long)(tile % R->tx[stage]), y = (long)(tile / R->tx[stage]), rad = (long)d->radius;
        long x0 = x * num / den - rad, x1 = ((x + 1) * num + den - 1) / den - 1 + rad;
        long y0 = y * num / den - rad, y1 = ((y + 1) * num + den - 1) / den - 1 + rad;
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > (long)R->tx[src] - 1) x1 = (long)R->tx[src] - 1;
        if (y1 > (long)R->ty[src] - 1) y1 = (long)R->ty[src] - 1;
        for (long sy = y0; sy <= y1; sy++)
            for (long sx = x0; sx <= x1; sx++) out[k++] = (unsigned)(sy * (long)R->tx[src] + sx);
    }
    return k;
}

/* What a block does with a task: checks that everything it reads is there
 * (the right request's data), counts the run, writes its own data. */
static void run_task(run *R, const cwf_df_task *t, const cwf_df_ctx *c) {
    const cwf_u64 r = t->r;
    if (r > MAX_REQ || t->stage >= c->nstages) {
        __atomic_fetch_add(&R->unknown, 1ull, __ATOMIC_RELAXED);
        note(R, "a task out of range: request %llu stage %u", r, t->stage);
        return;
    }
    /* a request starts only after the one in_flight before it was signalled */
    if (r > c->in_flight && m_ld(&c->st[CWF_W_SIGNALLED]) < r - c->in_flight) {
        __atomic_fetch_add(&R->early_start, 1ull, __ATOMIC_RELAXED);
        note(R, "request %llu ran before request %llu was signalled", r, r - c->in_flight);
    }
    unsigned tiles[MAX_TILES];
    for (unsigned k = 0; k < R->defs[t->stage].dep_count; k++) {
        const cw_fused_dep *d = &R->deps[t->stage][k];
        const cwf_u64 need = d->previous ? r - 1 : r;
        if (need == 0) continue;
        const unsigned n = oracle_tiles(R, t->stage, t->tile, r, d, tiles);
        for (unsigned i = 0; i < n; i++) {
            const unsigned long long v = m_ld(&R->data[need % COPIES][d->stage][tiles[i]]);
            if (v != need) {
                __atomic_fetch_add(&R->stale, 1ull, __ATOMIC_RELAXED);
                note(R, "stage %u tile %u of request %llu read stage %u tile %u: request %llu's data there, not %llu's",
                     t->stage, t->tile, r, d->stage, tiles[i], v, need);
            }
        }
    }
    if (R->hang_req == r && R->hang_stage == t->stage && R->hang_tile == t->tile) usleep(400 * 1000);
    __atomic_fetch_add(&R->runs[r][t->stage][t->tile], 1u, __ATOMIC_RELAXED);
    m_st(&R->data[r % COPIES][t->stage][t->tile], r);
    jitter();
    /* the block's barrier before thread 0 reports the tile: every thread's
     * writes are its own here (one thread a block) */
    __atomic_fetch_add(&R->finished[r], 1u, __ATOMIC_RELEASE);
}

static void *block_main(void *arg) {
    run *R = (run *)arg;
    static unsigned ids;
    memset(&sb, 0, sizeof sb);
    sb.rng = R->seed * 2654435761u + __atomic_fetch_add(&ids, 1u, __ATOMIC_RELAXED) * 40503u + 1u;
    inc_t I = {R};
    cwf_df_ctx c;
    memset(&c, 0, sizeof c);
    c.st = R->state;
    c.stages = R->stages;
    c.chains = R->chains;
    c.deps = R->pdeps;
    c.nstages = (unsigned)R->counts[0];
    c.nchains = (unsigned)R->counts[7];
    c.tasks = (unsigned)R->counts[2];
    c.alls = (unsigned)R->counts[4];
    c.in_flight = (unsigned)R->counts[5];
    c.final = (unsigned)R->counts[8];
    c.watchdog_ns = R->hang_req ? 100ull * 1000000ull : 3ull * 1000000000ull;
    c.idle_nap_ns = 1000u;
    c.inc = &I;
    unsigned long long next = __atomic_fetch_add(&R->state[CWF_W_NEXT], 1ull, __ATOMIC_RELAXED);
    for (;;) {
        const unsigned long long ticket = next;
        next = __atomic_fetch_add(&R->state[CWF_W_NEXT], 1ull, __ATOMIC_RELAXED);
        cwf_df_task t;
        if (!cwf_df_take(&c, ticket, &t)) break;
        /* the chain's stages one after the other, as the kernel runs them */
        const cwf_df_chain *ch = &R->chains[t.chain];
        int left = 0;
        for (unsigned s = ch->first; s < ch->first + ch->count; s++) {
            t.stage = s;
            if (!cwf_df_wait_deps(&c, &t)) {
                left = 1;
                break;
            }
            run_task(R, &t, &c);
            cwf_df_publish(&c, &t);
        }
        if (left) break;
        cwf_df_finish(&c, &t);
    }
    cwf_df_leave(&c, (unsigned)R->blocks);
    sb_flush_all();
    return NULL;
}

/* Runs R to the end: the host makes its requests (and maybe stops), the
 * blocks serve them. 0 when every check held; else R->why says what broke
 * first. */
static int run_model(run *R) {
    g_run = R;
    R->state = calloc(R->counts[6], 8);
    assert_non_null(R->state);
    pthread_t th[16];
    for (int b = 0; b < R->blocks; b++) assert_int_equal(pthread_create(&th[b], NULL, block_main, R), 0);
    unsigned host_rng = R->seed | 1u;
    unsigned made = 0;
    const unsigned long long t0 = m_now();
    int hung = 0;
    while (made < R->requests) {
        if (R->stop_after && made == R->stop_after) break;
        /* a burst or one at a time */
        const unsigned burst = 1u + rnd(&host_rng) % 4u;
        for (unsigned i = 0; i < burst && made < R->requests; i++) __atomic_store_n(&R->requested, ++made, __ATOMIC_RELEASE);
        if (rnd(&host_rng) % 3u == 0u) usleep(rnd(&host_rng) % 300u);
        if (__atomic_load_n(&R->state[CWF_W_ABORT], __ATOMIC_ACQUIRE)) break;
    }
    /* wait for the signals (or the stall), then stop */
    for (;;) {
        const unsigned long long s = __atomic_load_n(&R->state[CWF_W_SIGNALLED], __ATOMIC_ACQUIRE);
        if (s >= made || __atomic_load_n(&R->state[CWF_W_ABORT], __ATOMIC_ACQUIRE)) break;
        if (R->stop_after && s + 1 >= made) break; /* stopping: the last may be dropped */
        if (m_now() - t0 > 20ull * 1000000000ull) {
            hung = 1;
            note(R, "no progress: %llu of %u requests signalled after 20 s", s, made);
            /* what a watchdog would do: make the blocks leave */
            __atomic_store_n(&R->state[CWF_W_ABORT], 1ull, __ATOMIC_RELEASE);
            break;
        }
        usleep(100);
    }
    __atomic_store_n(&R->stop, 1u, __ATOMIC_RELEASE);
    for (int b = 0; b < R->blocks; b++) pthread_join(th[b], NULL);
    const unsigned long long halt = R->state[CWF_W_HALT], signalled = R->state[CWF_W_SIGNALLED];
    const int aborted = R->state[CWF_W_ABORT] != 0;
    if (R->state[CWF_W_EXITS] != (unsigned long long)R->blocks) note(R, "%llu of %d blocks left", R->state[CWF_W_EXITS], R->blocks);
    if (R->signal_order_bad) note(R, "%llu signals out of order", R->signal_order_bad);
    if (!aborted && !hung) {
        /* every opened request signalled and ran each tile once; none after the halt ran */
        const unsigned long long opened = halt ? halt - 1 : made;
        if (signalled != opened) note(R, "%llu requests signalled, %llu opened (halt %llu)", signalled, opened, halt);
        for (unsigned long long r = 1; r <= MAX_REQ; r++)
            for (unsigned s = 0; s < R->counts[0]; s++)
                for (unsigned i = 0; i < R->tiles[s]; i++) {
                    const unsigned want = r <= opened ? 1u : 0u;
                    if (R->runs[r][s][i] != want)
                        note(R, "request %llu stage %u tile %u ran %u times (%u expected; %llu opened)", r, s, i,
                             R->runs[r][s][i], want, opened);
                }
    } else if (aborted && !R->hang_req && !R->fn_out_of_range) {
        note(R, "the loop stalled: kind %llu, stage %llu tile %llu of request %llu waited on stage %llu tile %llu (%llu, "
                "%llu needed)",
             R->state[CWF_W_STALL], R->state[CWF_W_STALL + 2], R->state[CWF_W_STALL + 3], R->state[CWF_W_STALL + 1],
             R->state[CWF_W_STALL + 4], R->state[CWF_W_STALL + 5], R->state[CWF_W_STALL + 6], R->state[CWF_W_STALL + 7]);
    }
    return R->noted ? -1 : 0;
}

/* A random plan that the library accepts (a refused one is drawn again). */
static void make_plan(run *R, unsigned *rng) {
    for (;;) {
        memset(R->defs, 0, sizeof R->defs);
        memset(R->deps, 0, sizeof R->deps);
        const unsigned n = 1u + rnd(rng) % 6u;
        static const char *const names[] = {"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"};
        for (unsigned i = 0; i < n; i++) {
            cw_fused_stage *s = &R->defs[i];
            s->name = names[i];
            if (rnd(rng) % 3u == 0u) {
                s->size[0] = 1u + rnd(rng) % 30u;
                s->size[1] = 1u + rnd(rng) % 20u;
                s->tile[0] = 1u + rnd(rng) % 8u;
                s->tile[1] = 1u + rnd(rng) % 8u;
            } else {
                s->tiles = (i > 0 && rnd(rng) % 2u) ? R->defs[rnd(rng) % i].tiles : 1u + rnd(rng) % 12u;
                if (!s->tiles) s->tiles = 1u + rnd(rng) % 12u;
            }
            const unsigned nd = i == 0 ? (rnd(rng) % 4u == 0u) : rnd(rng) % 4u;
            for (unsigned k = 0; k < nd; k++) {
                cw_fused_dep *d = &R->deps[i][k];
                d->previous = i == 0 || rnd(rng) % 5u == 0u;
                d->stage = d->previous ? rnd(rng) % n : rnd(rng) % i;
                d->read = (cw_fused_read)(1u + rnd(rng) % 4u);
                if (d->read == CW_FUSED_READ_NEIGHBOURS) {
                    d->radius = rnd(rng) % 3u;
                    const unsigned pick = rnd(rng) % 3u;
                    if (pick == 1) d->scale_num = 2, d->scale_den = 1;
                    if (pick == 2) d->scale_num = 1, d->scale_den = 2;
                }
                if (d->read == CW_FUSED_READ_FUNCTION) d->function = "pick";
            }
            /* one function dependency a stage at most (model_fn knows one) */
            int fns = 0;
            for (unsigned k = 0; k < nd; k++)
                if (R->deps[i][k].read == CW_FUSED_READ_FUNCTION && fns++) R->deps[i][k].read = CW_FUSED_READ_ALL, R->deps[i][k].function = NULL;
            s->deps = nd ? R->deps[i] : NULL;
            s->dep_count = nd;
        }
        cw_resident_fused f;
        memset(&f, 0, sizeof f);
        f.source = "s0 s1 s2 s3 s4 s5 s6 s7 pick";
        f.mode = CW_FUSED_DATAFLOW;
        f.stage_defs = R->defs;
        f.stage_count = n;
        f.in_flight = 1u + rnd(rng) % 3u;
        void *st = NULL, *dp = NULL, *chp = NULL;
        if (cwi_fused_plan(&f, &st, &dp, &chp, R->counts) != 0) continue;
        int small = R->counts[3] <= MAX_TILES * 2 && R->counts[0] <= MAX_STAGES;
        for (unsigned i = 0; i < n && small; i++) {
            const cwf_df_stage *ps = &((cwf_df_stage *)st)[i];
            R->tx[i] = ps->tiles_x;
            R->ty[i] = ps->tiles_y;
            R->tiles[i] = ps->tiles;
            if (ps->tiles > MAX_TILES) small = 0;
        }
        if (!small) {
            free(st);
            free(dp);
            free(chp);
            continue;
        }
        R->stages = st;
        R->pdeps = dp;
        R->chains = chp;
        return;
    }
}

static unsigned env_u(const char *name, unsigned dflt) {
    const char *v = getenv(name);
    return v && *v ? (unsigned)strtoul(v, NULL, 10) : dflt;
}

static void free_run(run *R) {
    free(R->stages);
    free(R->pdeps);
    free(R->chains);
    free(R->state);
    free(R);
}

/* Random plans, random timing, the protocol as the library has it: every
 * check holds in every run. */
static void test_protocol_random_plans(void **state) {
    (void)state;
    unsigned rng = env_u("CWT_MODEL_SEED", 20261201u) | 1u;
    const unsigned runs = env_u("CWT_MODEL_RUNS", 60u);
    unsigned long long tiles_run = 0, stopped = 0;
    for (unsigned k = 0; k < runs; k++) {
        run *R = calloc(1, sizeof *R);
        assert_non_null(R);
        R->seed = rnd(&rng);
        make_plan(R, &rng);
        R->blocks = 2 + (int)(rnd(&rng) % 7u);
        R->requests = 20u + rnd(&rng) % 100u;
        if (rnd(&rng) % 4u == 0u) R->stop_after = 1u + rnd(&rng) % R->requests, stopped++;
        model_mutation = 0;
        if (run_model(R) != 0)
            fail_msg("run %u (seed %u, %llu stages, %llu tiles, in flight %llu, %d blocks): %s", k, R->seed,
                     R->counts[0], R->counts[3], R->counts[5], R->blocks, R->why);
        for (unsigned r = 1; r <= MAX_REQ; r++) tiles_run += R->finished[r];
        free_run(R);
    }
    printf("# %u random plans, %llu tiles run, %llu runs stopped part-way: every check held\n", runs, tiles_run, stopped);
    assert_true(tiles_run > runs * 20ull);
}

/* The library's tables for R's five stages (R->defs), with their grids. */
static void plan_five(run *R, unsigned in_flight, const char *what) {
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = "s0 s1 s2 s3 s4 pick";
    f.mode = CW_FUSED_DATAFLOW;
    f.stage_defs = R->defs;
    f.stage_count = 5;
    f.in_flight = in_flight;
    void *st = NULL, *dp = NULL, *chp = NULL;
    if (cwi_fused_plan(&f, &st, &dp, &chp, R->counts) != 0) fail_msg("%s was refused: %s", what, cw_last_error()->message);
    R->stages = st;
    R->pdeps = dp;
    R->chains = chp;
    for (unsigned i = 0; i < 5; i++) {
        R->tx[i] = R->stages[i].tiles_x;
        R->ty[i] = R->stages[i].tiles_y;
        R->tiles[i] = R->stages[i].tiles;
    }
}

/* A fixed plan with every kind of dependency and requests in flight: the
 * plan the mutations are tried on. */
static run *fixed_plan(unsigned in_flight, unsigned seed) {
    run *R = calloc(1, sizeof *R);
    assert_non_null(R);
    static const char *const names[] = {"s0", "s1", "s2", "s3", "s4"};
    R->defs[0] = (cw_fused_stage){.name = names[0], .tiles = 16};
    R->deps[1][0] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_NEIGHBOURS, .radius = 1};
    R->defs[1] = (cw_fused_stage){.name = names[1], .tiles = 16, .deps = R->deps[1], .dep_count = 1};
    R->deps[2][0] = (cw_fused_dep){.stage = 1, .read = CW_FUSED_READ_ALL};
    R->defs[2] = (cw_fused_stage){.name = names[2], .tiles = 4, .deps = R->deps[2], .dep_count = 1};
    R->deps[3][0] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME};
    R->deps[3][1] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME, .previous = 1};
    R->deps[3][2] = (cw_fused_dep){.stage = 2, .read = CW_FUSED_READ_NEIGHBOURS, .scale_num = 1, .scale_den = 4};
    R->defs[3] = (cw_fused_stage){.name = names[3], .tiles = 16, .deps = R->deps[3], .dep_count = 3};
    R->deps[4][0] = (cw_fused_dep){.stage = 3, .read = CW_FUSED_READ_FUNCTION, .function = "pick"};
    R->defs[4] = (cw_fused_stage){.name = names[4], .tiles = 8, .deps = R->deps[4], .dep_count = 1};
    plan_five(R, in_flight, "the fixed plan");
    R->blocks = 6;
    R->requests = 200;
    R->seed = seed;
    return R;
}

/* A frame's plan (bench_resident_frame's shape): a blur, its histogram
 * tile for tile (one chain with the blur), a threshold reading all of the
 * histogram, a SAD reading the blur tile for tile and the previous
 * request's, one result tile reading all of both: the last chain's one
 * task waits for every other, so it signals (final). */
static run *frame_plan(unsigned in_flight, unsigned seed) {
    run *R = calloc(1, sizeof *R);
    assert_non_null(R);
    static const char *const names[] = {"s0", "s1", "s2", "s3", "s4"};
    R->defs[0] = (cw_fused_stage){.name = names[0], .tiles = 12};
    R->deps[1][0] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME};
    R->defs[1] = (cw_fused_stage){.name = names[1], .tiles = 12, .deps = R->deps[1], .dep_count = 1};
    R->deps[2][0] = (cw_fused_dep){.stage = 1, .read = CW_FUSED_READ_ALL};
    R->defs[2] = (cw_fused_stage){.name = names[2], .tiles = 12, .deps = R->deps[2], .dep_count = 1};
    R->deps[3][0] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME};
    R->deps[3][1] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME, .previous = 1};
    R->defs[3] = (cw_fused_stage){.name = names[3], .tiles = 12, .deps = R->deps[3], .dep_count = 2};
    R->deps[4][0] = (cw_fused_dep){.stage = 2, .read = CW_FUSED_READ_ALL};
    R->deps[4][1] = (cw_fused_dep){.stage = 3, .read = CW_FUSED_READ_ALL};
    R->defs[4] = (cw_fused_stage){.name = names[4], .tiles = 1, .deps = R->deps[4], .dep_count = 2};
    plan_five(R, in_flight, "the frame plan");
    R->blocks = 5;
    R->requests = 200;
    R->seed = seed;
    return R;
}

static void test_protocol_fixed_plan(void **state) {
    (void)state;
    for (unsigned d = 1; d <= 3; d++) {
        run *R = fixed_plan(d, 77u + d);
        model_mutation = 0;
        assert_int_equal(R->counts[7], 5); /* no stage chains onto another */
        assert_int_equal(R->counts[8], 0); /* the last stage has 8 tiles: a count of tasks finds the last */
        if (run_model(R) != 0) fail_msg("in flight %u: %s", d, R->why);
        assert_int_equal(R->state[CWF_W_SIGNALLED], 200);
        assert_int_equal(R->stale + R->early_signal + R->early_start + R->signal_order_bad, 0);
        free_run(R);
    }
}

static void test_protocol_chains_final(void **state) {
    (void)state;
    for (unsigned d = 1; d <= 3; d++) {
        run *R = frame_plan(d, 91u + d);
        model_mutation = 0;
        /* chains: {blur, histogram}, {threshold}, {SAD}, {result} */
        assert_int_equal(R->counts[7], 4);
        assert_int_equal(R->chains[0].count, 2);
        assert_int_equal(R->counts[2], 12 + 12 + 12 + 1); /* tasks a request */
        assert_int_equal(R->counts[8], 1);                /* final */
        assert_int_equal(R->stages[0].publish, 1);        /* the SAD reads the blur's tiles by their done words */
        assert_int_equal(R->stages[1].publish, 0);        /* the histogram is read whole: a count */
        assert_int_equal(R->pdeps[R->stages[1].dep_first].local, 1);
        if (run_model(R) != 0) fail_msg("in flight %u: %s", d, R->why);
        assert_int_equal(R->state[CWF_W_SIGNALLED], 200);
        assert_int_equal(R->stale + R->early_signal + R->early_start + R->signal_order_bad, 0);
        free_run(R);
    }
}

/* The negative tests: each broken variant is caught (within a few runs of
 * the fixed plan, each with other timing). */
static void expect_caught(int mutation, unsigned in_flight, const char *what, int frame) {
    int caught = 0;
    char why[256] = "";
    for (unsigned k = 0; k < 12 && !caught; k++) {
        run *R = frame ? frame_plan(in_flight, 2000u + k) : fixed_plan(in_flight, 1000u + k);
        model_mutation = mutation;
        if (run_model(R) != 0) {
            caught = 1;
            snprintf(why, sizeof why, "%s", R->why);
        }
        model_mutation = 0;
        free_run(R);
    }
    if (!caught) fail_msg("the model did not catch %s in 12 runs", what);
    printf("# caught %s: %s\n", what, why);
}

/* (On the frame's plan the blur's done word is followed at once by the
 * histogram's release in the same chain and read only by later tasks: a
 * relaxed store there is never seen early, so the fixed plan, where the
 * readers wait while the writer goes on, is the one that shows it.) */
static void test_mutation_done_without_release(void **state) {
    (void)state;
    expect_caught(1, 2, "a done word stored without release", 0);
}

static void test_mutation_reset_early(void **state) {
    (void)state;
    expect_caught(2, 2, "a slot's counters reset one request early", 0);
    expect_caught(2, 2, "a slot's counters reset one request early (chains, final)", 1);
}

/* A tile that sleeps past the watchdog: the tiles waiting on it stop the
 * loop, and the stall names a waiting tile and what it waited on. */
static void test_watchdog(void **state) {
    (void)state;
    run *R = fixed_plan(1, 5u);
    R->hang_req = 4;
    R->hang_stage = 0;
    R->hang_tile = 7;
    model_mutation = 0;
    run_model(R);
    assert_int_equal(R->state[CWF_W_ABORT] != 0, 1);
    assert_int_equal(R->state[CWF_W_STALL], CWF_STALL_WAIT);
    assert_int_equal(R->state[CWF_W_STALL + 1], 4); /* the request */
    /* the tile waited on is stage 0 tile 7 (its neighbours and readers wait
     * for it) or a tile that in turn waits for it */
    assert_true(R->state[CWF_W_STALL + 6] < R->state[CWF_W_STALL + 7]);
    assert_true(R->state[CWF_W_SIGNALLED] < 4);
    assert_int_equal(R->state[CWF_W_EXITS], (unsigned long long)R->blocks);
    free_run(R);
}

/* A dependency function that names a tile that does not exist stops the
 * loop with a range stall naming it. */
static void test_function_out_of_range(void **state) {
    (void)state;
    run *R = fixed_plan(1, 9u);
    R->fn_out_of_range = 1;
    model_mutation = 0;
    run_model(R);
    assert_int_equal(R->state[CWF_W_STALL], CWF_STALL_RANGE);
    assert_int_equal(R->state[CWF_W_STALL + 1], 3);  /* request */
    assert_int_equal(R->state[CWF_W_STALL + 2], 4);  /* the stage with the function */
    assert_int_equal(R->state[CWF_W_STALL + 3], 0);  /* tile 0 */
    assert_int_equal(R->state[CWF_W_STALL + 4], 3);  /* the stage it reads */
    assert_int_equal(R->state[CWF_W_STALL + 5], 16); /* the tile named: one past the last */
    assert_int_equal(R->state[CWF_W_SIGNALLED], 2);
    free_run(R);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_fixed_plan),          cmocka_unit_test(test_protocol_chains_final),
        cmocka_unit_test(test_protocol_random_plans),
        cmocka_unit_test(test_mutation_done_without_release), cmocka_unit_test(test_mutation_reset_early),
        cmocka_unit_test(test_watchdog),                     cmocka_unit_test(test_function_out_of_range),
    };
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
