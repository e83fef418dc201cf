/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave graph layer: the tile dataflow protocol of the fused resident loop
 * (cw_resident_fused.mode CW_RESIDENT_FUSED_DATAFLOW). The same text runs in
 * two places: embedded in the fused kernel's source (NVRTC; thread 0 of
 * every block runs it) and compiled into the host model test
 * (tests/test_fused_model_cpu.cpp; one host thread stands for one block), so
 * that the counters' logic the GPU runs is the logic the model checks.
 *
 * Work is a ticket: tickets are taken in order from one counter; ticket k
 * is task k % T of request k / T + 1 (T tasks a request). A task is one
 * tile of a chain: consecutive stages of one tile grid where each later
 * stage reads the chain's earlier ones only tile for tile (SAME), run one
 * after the other by one block (what a stage reads of its own chain is the
 * block's own work: no wait). A stage waits only for what it reads outside
 * its chain: per tile, the last request that tile finished (done words;
 * release store, acquire load); per stage read whole, a count of its
 * finished tiles per request slot. Deadlock-free with every block
 * co-resident: a task depends only on tasks of lower tickets, and the
 * lowest unfinished one is held by a running block whose every dependency
 * has finished.
 *
 * Requests: the task 0 of request r (its opener) waits for the opener of r
 * - 1 (one block polls the host at a time), for request r - D to be
 * signalled (D requests in flight: a slot's counters and data are free),
 * then polls the host's doorbell and opens r; the other tasks of r wait for
 * it to open. The task that finishes request r last signals it, after r -
 * 1: results stay in order. When the last chain is one task that
 * (through what it reads) waits for every other (the plan says: final),
 * that task signals; else a count of finished tasks a slot finds the last.
 * A stop closes the requests from the opener's on (halt); requests opened
 * before it are served.
 *
 * The types and constants need nothing. For the protocol's functions the
 * includer defines, before including this text:
 *   CWF_FN                  qualifiers of these functions
 *   CWF_LD_ACQ(p)           64-bit load, acquire, GPU scope
 *   CWF_LD(p)               64-bit load, relaxed (volatile)
 *   CWF_ST_REL(p, v)        64-bit store, release
 *   CWF_ST(p, v)            64-bit store, relaxed
 *   CWF_ADD_ACQREL(p, v)    64-bit fetch-and-add, acquire-release, returns the old value
 *   CWF_ADD_REL(p, v)       64-bit add, release, no result
 *   CWF_NOW()               a clock in ns
 *   CWF_NAP(ns)             a pause of about ns (may do nothing)
 * and the functions the protocol calls (below, as prototypes):
 *   cwf_df_host_poll(c, r)    the opener's wait for request r at the
 *                             doorbell: 1 it was made, 0 the loop stops
 *                             (stop word or timeout; the reason is the
 *                             includer's to record)
 *   cwf_df_host_signal(c, r)  request r is finished: report it
 *   cwf_df_dep_fn(c, fn, s, tile, r, i)  dependency function fn of stage
 *                             s: the i-th tile it reads for that tile of
 *                             request r, or -1 after the last
 */
#ifndef CUWEAVE_FUSED_DATAFLOW_H
#define CUWEAVE_FUSED_DATAFLOW_H

/* Mutations of the protocol that the model test must catch (the model
 * defines CWF_MUTATION as a variable; the library never defines it): 1 a
 * tile's done word stored without release; 2 a slot's counters reset one
 * request early (the slot of the request after the one signalled). */
#ifndef CWF_MUTATION
#define CWF_MUTATION 0
#endif

typedef unsigned long long cwf_u64;

/* Dependency kinds (cw_resident_read's values). */
#define CWF_READ_SAME 1u
#define CWF_READ_NEIGHBOURS 2u
#define CWF_READ_ALL 3u
#define CWF_READ_FUNCTION 4u

#define CWF_NONE 0xffffffffu

/* One stage of the plan (a constant table). */
typedef struct cwf_df_stage {
    unsigned chain;              /* the chain it belongs to */
    unsigned tiles;              /* tiles_x * tiles_y */
    unsigned tiles_x, tiles_y;
    unsigned dep_first, dep_count; /* its dependencies in the dependency table */
    unsigned all;                /* its count of finished tiles (a stage read whole), or CWF_NONE */
    unsigned done;               /* the done word of its tile 0 */
    unsigned publish;            /* 1: its done words are read (else never stored) */
    unsigned pad;
} cwf_df_stage;

/* One chain (a constant table): stages first .. first + count - 1. */
typedef struct cwf_df_chain {
    unsigned task;               /* its tile 0's task number within a request */
    unsigned first, count;
    unsigned tiles;
} cwf_df_chain;

/* One dependency (a constant table). */
typedef struct cwf_df_dep {
    unsigned stage;    /* the stage read */
    unsigned read;     /* CWF_READ_* */
    unsigned radius;   /* NEIGHBOURS: tiles around the mapped ones */
    unsigned num, den; /* NEIGHBOURS: tile x reads tiles from x * num / den */
    unsigned previous; /* 1: the previous request's tiles */
    unsigned fn;       /* FUNCTION: which dependency function */
    unsigned local;    /* 1: a stage of its own chain, tile for tile: the block's own work (no wait) */
} cwf_df_dep;

/* The state's words (64-bit; zeroed before each launch). The words every
 * block touches each have a 128-byte line. */
#define CWF_W_NEXT 0u       /* tickets taken */
#define CWF_W_OPEN 16u      /* requests opened (numbered from 1 in this launch) */
#define CWF_W_HALT 32u      /* 0: running; else the first request not served */
#define CWF_W_SIGNALLED 48u /* requests signalled */
#define CWF_W_EXITS 64u     /* blocks that have left */
#define CWF_W_ARMED 65u     /* block 0 has set the launch up */
#define CWF_W_ABORT 80u     /* nonzero: the watchdog stopped the loop */
#define CWF_W_STALL 96u     /* 8 words: kind, request, stage, tile, waited stage, waited tile, counter, needed */
#define CWF_W_FIN 112u      /* per slot (a line each): tasks finished of the slot's request */
#define CWF_W_TSTART 240u   /* per slot: when its request was opened (CWF_NOW) */
#define CWF_W_ALL 256u      /* per stage read whole and slot (a line each): its tiles finished */
#define CWF_MAX_IN_FLIGHT 8u

/* Stall kinds (CWF_W_STALL's first word). */
#define CWF_STALL_WAIT 1u    /* a wait took longer than the watchdog */
#define CWF_STALL_RANGE 2u   /* a dependency function named a tile that does not exist */

/* The 64-bit words of a plan's state: the fixed part, the counts of the
 * stages read whole, one done word per tile. */
#define CWF_STATE_WORDS(alls, in_flight, tiles) (CWF_W_ALL + 16ull * (alls) * (in_flight) + (tiles))

#ifdef CWF_FN /* the protocol itself: for the kernel and the model test (the library's host code takes the tables) */

/* A block's view (thread 0's registers). */
typedef struct cwf_df_ctx {
    cwf_u64 *st;                 /* the state (device memory) */
    const cwf_df_stage *stages;
    const cwf_df_chain *chains;
    const cwf_df_dep *deps;
    unsigned nstages, nchains, tasks, in_flight, alls;
    unsigned final;              /* 1: the last chain's one task signals (no count of finished tasks) */
    cwf_u64 watchdog_ns;         /* 0: no watchdog */
    unsigned idle_nap_ns;        /* the longest nap while waiting for a request (0: spin) */
    void *inc;                   /* the includer's */
} cwf_df_ctx;

/* A task: a chain's tile of request r (numbered from 1 in this launch);
 * stage is the chain's stage at hand. */
typedef struct cwf_df_task {
    cwf_u64 r;
    unsigned chain, stage, tile;
} cwf_df_task;

CWF_FN unsigned cwf_df_host_poll(cwf_df_ctx *c, cwf_u64 r);
CWF_FN void cwf_df_host_signal(cwf_df_ctx *c, cwf_u64 r);
CWF_FN int cwf_df_dep_fn(cwf_df_ctx *c, unsigned fn, unsigned stage, unsigned tile, cwf_u64 r, unsigned i);

CWF_FN unsigned cwf_df_slot(const cwf_df_ctx *c, cwf_u64 r) { return (unsigned)((r - 1ull) % c->in_flight); }

/* Records why the loop stops (the first record wins: the abort word is the
 * claim) and so stops every block's waits. The record is read by the host
 * after the launch has ended. */
CWF_FN void cwf_df_stall(cwf_df_ctx *c, unsigned kind, const cwf_df_task *t, unsigned wstage, unsigned wtile,
                         cwf_u64 seen, cwf_u64 need) {
    cwf_u64 *s = c->st;
    if (CWF_ADD_ACQREL(&s[CWF_W_ABORT], 1ull) != 0ull) return; /* another block's record stands */
    CWF_ST(&s[CWF_W_STALL], (cwf_u64)kind);
    CWF_ST(&s[CWF_W_STALL + 1u], t->r);
    CWF_ST(&s[CWF_W_STALL + 2u], (cwf_u64)t->stage);
    CWF_ST(&s[CWF_W_STALL + 3u], (cwf_u64)t->tile);
    CWF_ST(&s[CWF_W_STALL + 4u], (cwf_u64)wstage);
    CWF_ST(&s[CWF_W_STALL + 5u], (cwf_u64)wtile);
    CWF_ST(&s[CWF_W_STALL + 6u], seen);
    CWF_ST(&s[CWF_W_STALL + 7u], need);
}

/* Waits until *w >= need, napping between checks up to cap ns (0: spin).
 * 1: it is; 0: leave (the watchdog stopped the loop, or, with halt_r,
 * request halt_r will not be served). With a task the watchdog applies (the
 * stall names the task and what it waited on). */
CWF_FN unsigned cwf_df_wait(cwf_df_ctx *c, const cwf_u64 *w, cwf_u64 need, cwf_u64 halt_r, unsigned cap,
                            const cwf_df_task *t, unsigned wstage, unsigned wtile) {
    cwf_u64 v = CWF_LD_ACQ(w);
    if (v >= need) return 1u;
    const cwf_u64 t0 = CWF_NOW();
    unsigned nap = 0u;
    for (;;) {
        if (CWF_LD(&c->st[CWF_W_ABORT]) != 0ull) return 0u;
        if (halt_r != 0ull) {
            const cwf_u64 h = CWF_LD(&c->st[CWF_W_HALT]);
            if (h != 0ull && halt_r >= h) return 0u;
        }
        if (t && c->watchdog_ns != 0ull && CWF_NOW() - t0 > c->watchdog_ns) {
            cwf_df_stall(c, CWF_STALL_WAIT, t, wstage, wtile, v, need);
            return 0u;
        }
        if (nap) CWF_NAP(nap);
        nap = cap == 0u ? 0u : nap == 0u ? 32u : nap * 2u > cap ? cap : nap * 2u;
        v = CWF_LD_ACQ(w);
        if (v >= need) return 1u;
    }
}

/* The longest nap of a task's wait for what it reads, and of the signal's
 * wait for the request before (both on the way to a result). */
#define CWF_TASK_NAP 128u

CWF_FN cwf_u64 *cwf_df_done(cwf_df_ctx *c, unsigned stage, unsigned tile) {
    return &c->st[CWF_W_ALL + 16ull * c->alls * c->in_flight + c->stages[stage].done + tile];
}

CWF_FN cwf_u64 *cwf_df_all(cwf_df_ctx *c, unsigned all, unsigned slot) {
    return &c->st[CWF_W_ALL + 16ull * (all * c->in_flight + slot)];
}

/* The source tiles lo..hi (one axis) that reader tile x reads through a
 * neighbourhood: the tiles x maps to, widened by the radius, clipped. */
CWF_FN void cwf_df_span(unsigned x, unsigned num, unsigned den, unsigned radius, unsigned n, unsigned *lo,
                        unsigned *hi) {
    const cwf_u64 a = (cwf_u64)x * num / den;
    const cwf_u64 b = ((cwf_u64)(x + 1u) * num + den - 1ull) / den; /* one past the last */
    cwf_u64 l = a > radius ? a - radius : 0ull;
    cwf_u64 h = (b > a ? b - 1ull : a) + radius;
    if (h > (cwf_u64)n - 1ull) h = (cwf_u64)n - 1ull;
    if (l > h) l = h;
    *lo = (unsigned)l;
    *hi = (unsigned)h;
}

/* Waits for everything stage t->stage of task t reads outside its chain.
 * 1: go; 0: leave. */
CWF_FN unsigned cwf_df_wait_deps(cwf_df_ctx *c, const cwf_df_task *t) {
    const cwf_df_stage *s = &c->stages[t->stage];
    const cwf_u64 r = t->r;
    /* the same tile of the request before finished first (with requests in
     * flight: the tile's done word only moves forward) */
    if (c->in_flight > 1u && r > 1ull && s->publish &&
        !cwf_df_wait(c, cwf_df_done(c, t->stage, t->tile), r - 1ull, 0ull, CWF_TASK_NAP, t, t->stage, t->tile))
        return 0u;
    for (unsigned k = 0; k < s->dep_count; k++) {
        const cwf_df_dep *d = &c->deps[s->dep_first + k];
        const cwf_df_stage *src = &c->stages[d->stage];
        const cwf_u64 need = d->previous ? r - 1ull : r;
        if (need == 0ull) continue; /* the first request of a launch has no previous one */
        if (d->local) continue;     /* this block's own work, just done */
        /* one request in flight: request r opened after r - 1 was signalled */
        if (d->previous && c->in_flight == 1u) continue;
        if (d->read == CWF_READ_SAME) {
            if (!cwf_df_wait(c, cwf_df_done(c, d->stage, t->tile), need, 0ull, CWF_TASK_NAP, t, d->stage, t->tile)) return 0u;
        } else if (d->read == CWF_READ_NEIGHBOURS) {
            const unsigned x = t->tile % s->tiles_x, y = t->tile / s->tiles_x;
            unsigned x0, x1, y0, y1;
            cwf_df_span(x, d->num, d->den, d->radius, src->tiles_x, &x0, &x1);
            cwf_df_span(y, d->num, d->den, d->radius, src->tiles_y, &y0, &y1);
            for (unsigned yy = y0; yy <= y1; yy++)
                for (unsigned xx = x0; xx <= x1; xx++) {
                    const unsigned tile = yy * src->tiles_x + xx;
                    if (!cwf_df_wait(c, cwf_df_done(c, d->stage, tile), need, 0ull, CWF_TASK_NAP, t, d->stage, tile)) return 0u;
                }
        } else if (d->read == CWF_READ_ALL) {
            /* the previous request's whole stage: that request signalled
             * (its counts are reset by then) */
            const cwf_u64 *w = d->previous ? &c->st[CWF_W_SIGNALLED] : cwf_df_all(c, src->all, cwf_df_slot(c, r));
            if (!cwf_df_wait(c, w, d->previous ? need : (cwf_u64)src->tiles, 0ull, CWF_TASK_NAP, t, d->stage,
                             CWF_NONE)) return 0u;
        } else { /* CWF_READ_FUNCTION */
            for (unsigned i = 0;; i++) {
                const int tile = cwf_df_dep_fn(c, d->fn, t->stage, t->tile, r, i);
                if (tile < 0) break;
                if ((unsigned)tile >= src->tiles) {
                    cwf_df_stall(c, CWF_STALL_RANGE, t, d->stage, (unsigned)tile, (cwf_u64)i, (cwf_u64)src->tiles);
                    return 0u;
                }
                if (!cwf_df_wait(c, cwf_df_done(c, d->stage, (unsigned)tile), need, 0ull, CWF_TASK_NAP, t, d->stage,
                                 (unsigned)tile))
                    return 0u;
            }
        }
    }
    return 1u;
}

/* Ticket -> the task to run (its dependencies not yet waited for:
 * cwf_df_wait_deps next). 1: a task; 0: leave the loop (stopped, or the
 * watchdog fired). */
CWF_FN unsigned cwf_df_take(cwf_df_ctx *c, cwf_u64 ticket, cwf_df_task *t) {
    const cwf_u64 r = ticket / c->tasks + 1ull;
    const unsigned task = (unsigned)(ticket % c->tasks);
    cwf_u64 *s = c->st;
    if (task == 0u) {
        /* the opener: after the one before it, with request r - D signalled */
        if (r > 1ull && !cwf_df_wait(c, &s[CWF_W_OPEN], r - 1ull, r, c->idle_nap_ns, 0, 0u, 0u)) return 0u;
        if (r > c->in_flight && !cwf_df_wait(c, &s[CWF_W_SIGNALLED], r - c->in_flight, r, c->idle_nap_ns, 0, 0u, 0u)) return 0u;
        if (!cwf_df_host_poll(c, r)) {
            CWF_ST_REL(&s[CWF_W_HALT], r);
            return 0u;
        }
        CWF_ST(&s[CWF_W_TSTART + cwf_df_slot(c, r)], CWF_NOW());
        CWF_ST_REL(&s[CWF_W_OPEN], r);
    } else if (!cwf_df_wait(c, &s[CWF_W_OPEN], r, r, c->idle_nap_ns, 0, 0u, 0u)) {
        return 0u;
    }
    /* the chain whose tiles hold this task (binary search of the firsts) */
    unsigned lo = 0, hi = c->nchains - 1u;
    while (lo < hi) {
        const unsigned mid = (lo + hi + 1u) / 2u;
        if (c->chains[mid].task <= task) lo = mid;
        else hi = mid - 1u;
    }
    t->r = r;
    t->chain = lo;
    t->stage = c->chains[lo].first;
    t->tile = task - c->chains[lo].task;
    return 1u;
}

/* After the block's writes of stage t->stage (the includer's block barrier
 * first): its tile is done for the stages that read it. */
CWF_FN void cwf_df_publish(cwf_df_ctx *c, const cwf_df_task *t) {
    const cwf_df_stage *st = &c->stages[t->stage];
    if (st->publish) {
        if (CWF_MUTATION == 1) CWF_ST(cwf_df_done(c, t->stage, t->tile), t->r);
        else CWF_ST_REL(cwf_df_done(c, t->stage, t->tile), t->r);
    }
    if (st->all != CWF_NONE) CWF_ADD_REL(cwf_df_all(c, st->all, cwf_df_slot(c, t->r)), 1ull);
}

/* After task t's last stage was published: the request's last task
 * signals it, in order. */
CWF_FN void cwf_df_finish(cwf_df_ctx *c, const cwf_df_task *t) {
    cwf_u64 *s = c->st;
    const unsigned slot = cwf_df_slot(c, t->r);
    if (c->final) {
        /* the last chain's one task waited (through what it reads) for every other */
        if (t->chain + 1u != c->nchains) return;
    } else if (CWF_ADD_ACQREL(&s[CWF_W_FIN + 16u * slot], 1ull) + 1ull != (cwf_u64)c->tasks) {
        return;
    }
    /* the last task of request r: after r - 1's signal */
    if (t->r > 1ull && !cwf_df_wait(c, &s[CWF_W_SIGNALLED], t->r - 1ull, 0ull, CWF_TASK_NAP, 0, 0u, 0u)) return;
    const unsigned reset = CWF_MUTATION == 2 ? cwf_df_slot(c, t->r + 1ull) : slot;
    CWF_ST(&s[CWF_W_FIN + 16u * reset], 0ull);
    for (unsigned a = 0; a < c->alls; a++) CWF_ST(cwf_df_all(c, a, reset), 0ull);
    cwf_df_host_signal(c, t->r);
    CWF_ST_REL(&s[CWF_W_SIGNALLED], t->r);
}

/* A block leaves: 1 for the last one (it reports the launch's end). */
CWF_FN unsigned cwf_df_leave(cwf_df_ctx *c, unsigned blocks) {
    return CWF_ADD_ACQREL(&c->st[CWF_W_EXITS], 1ull) + 1ull == (cwf_u64)blocks;
}

#endif /* CWF_FN */

#endif /* CUWEAVE_FUSED_DATAFLOW_H */
