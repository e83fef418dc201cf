/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: the fused resident loop's tile dataflow mode
// (cw_resident_fused.mode CW_FUSED_DATAFLOW). The caller's stages, cut into
// tiles with their dependencies, are checked (every refusal names the
// stage), turned into the protocol's tables (fused_dataflow.h: a stage
// table, a dependency table, the size of the counters' state), and compiled
// into one persistent kernel with the protocol's text: thread 0 of each
// block takes tickets, waits for what the tile reads, the block runs the
// tile, thread 0 reports it done. resident_fused.cpp launches it as it
// launches the barrier kernel.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.hpp"
#include "graph/resident.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

// The device side of the protocol's primitives, and the parts of the loop
// around the tickets (the kernel's start, the doorbell, the signal).
const char kPrelude[] = R"CWF(
extern "C" {
#define CWF_FN static __device__ __inline__
static __device__ __forceinline__ unsigned long long cwf_ld_acq(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void cwf_st_rel(unsigned long long *p, unsigned long long v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
static __device__ __forceinline__ unsigned long long cwf_add_acqrel(unsigned long long *p, unsigned long long v) {
    unsigned long long o;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(o) : "l"(p), "l"(v) : "memory");
    return o;
}
static __device__ __forceinline__ void cwf_add_rel(unsigned long long *p, unsigned long long v) {
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
static __device__ __forceinline__ unsigned long long cwf_add_relaxed(unsigned long long *p, unsigned long long v) {
    unsigned long long o;
    asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(o) : "l"(p), "l"(v) : "memory");
    return o;
}
#define CWF_LD_ACQ(p) cwf_ld_acq(p)
#define CWF_LD(p) (*(const volatile unsigned long long *)(p))
#define CWF_ST_REL(p, v) cwf_st_rel((p), (v))
#define CWF_ST(p, v) (*(volatile unsigned long long *)(p) = (v))
#define CWF_ADD_ACQREL(p, v) cwf_add_acqrel((p), (v))
#define CWF_ADD_REL(p, v) cwf_add_rel((p), (v))

#define CWF_NOW() cw__res_now()
#define CWF_NAP(ns) cw__res_nap(ns)
}  /* extern "C" */
)CWF";

// The stage geometry the descriptor needs (beside the protocol's table).
const char kGeoType[] = R"CWF(
extern "C" {
typedef struct cwf_geo {
    unsigned size_x, size_y, tile_x, tile_y; /* tile_x 0: a stage given as a count of tiles */
    unsigned threads, shared;
} cwf_geo;

/* The includer's part of the block's view. */
typedef struct cwf_inc {
    cw_res_host *h;
    cw_res_dev *d;
    cw_fused_tile *t;
    unsigned long long base, deadline;
    unsigned sleep_ns, spin_ns, flags;
} cwf_inc;

/* The opener's wait at the doorbell for request base + r: as the graph
 * loop's poll (the stop word wins over a request made before it; the
 * timeout on the GPU's clock). The openers follow each other (the open
 * word), so the device block's words are theirs in turn. */
CWF_FN unsigned cwf_df_host_poll(cwf_df_ctx *c, cwf_u64 r) {
    cwf_inc *I = (cwf_inc *)c->inc;
    cw_res_dev *d = I->d;
    const unsigned long long want = I->base + r;
    for (;;) {
        unsigned long long requested, word;
        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(requested), "=l"(word) : "l"(I->h) : "memory");
        const unsigned long long now = cw__res_now();
        const unsigned stop = (unsigned)(word & 0xffffffffull);
        if (stop || now >= I->deadline) {
            d->stopped = 1u;
            d->reason = stop ? CW_RES_EXIT_TEAR_DOWN : CW_RES_EXIT_TIMEOUT;
            return 0u;
        }
        if (requested >= want) {
            d->started = want;
            d->backoff_ns = 0u;
            return 1u;
        }
        d->idle_polls += 1ull;
        cw__res_pause(d, now, I->sleep_ns, I->spin_ns, I->flags);
    }
}

/* Request base + r is finished (every one before it too): its time into
 * the ring and the statistics, then its number where the host reads it
 * (after a system-wide fence with sync_with_host). The signals follow each
 * other (the signalled word). */
CWF_FN void cwf_df_host_signal(cwf_df_ctx *c, cwf_u64 r) {
    cwf_inc *I = (cwf_inc *)c->inc;
    cw_res_dev *d = I->d;
    const unsigned long long now = cw__res_now();
    const unsigned long long dur = now - c->st[CWF_W_TSTART + cwf_df_slot(c, r)];
    const unsigned long long served = d->served;
    d->ring[served % CW_RES_RING] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;
    if (served == 0ull || dur < d->min_ns) d->min_ns = dur;
    if (dur > d->max_ns) d->max_ns = dur;
    d->served = served + 1ull;
    d->last_done = now;
    if (I->flags & CW_RES_SYNC_HOST) __threadfence_system();
    *(volatile unsigned long long *)&I->h->completed = I->base + r;
}
}  /* extern "C" */
)CWF";

// The kernel. cwf_run is the generated dispatch of a tile to its stage.
const char kKernel[] = R"CWF(
extern "C" {
/* The descriptor of stage task->stage's tile (thread 0). */
static __device__ __forceinline__ void cwf_fill(cw_fused_tile *t, const cwf_df_task *task, const cwf_inc *I,
                                                unsigned long long input, unsigned slots, unsigned long long in_bytes,
                                                void *dyn) {
    const cwf_df_stage *s = &cwf_stages[task->stage];
    const cwf_geo *g = &cwf_geos[task->stage];
    t->seq = I->base + task->r;
    t->input = slots ? (void *)(input + ((t->seq - 1ull) % slots) * in_bytes) : (void *)0;
    t->shared = dyn;
    t->stage = task->stage;
    t->tile = task->tile;
    t->tiles = s->tiles;
    t->tiles_x = s->tiles_x;
    t->tiles_y = s->tiles_y;
    t->x = task->tile % s->tiles_x;
    t->y = task->tile / s->tiles_x;
    if (g->tile_x) {
        t->x0 = t->x * g->tile_x;
        t->y0 = t->y * g->tile_y;
        t->w = g->size_x - t->x0 < g->tile_x ? g->size_x - t->x0 : g->tile_x;
        t->h = g->size_y - t->y0 < g->tile_y ? g->size_y - t->y0 : g->tile_y;
    } else {
        t->x0 = task->tile;
        t->y0 = 0u;
        t->w = 1u;
        t->h = 1u;
    }
    t->slot = (unsigned)((t->seq - 1ull) % CWF_IN_FLIGHT);
    t->threads = g->threads;
    t->first = task->r == 1ull;
}

__global__ void __launch_bounds__(CWF_BLOCK) cwf_dataflow_loop(cw_res_host *h, cw_res_dev *d, unsigned long long *st,
                                                          void *user, unsigned long long timeout_ns,
                                                          unsigned sleep_ns, unsigned spin_ns, unsigned flags,
                                                          unsigned long long watchdog_ns) {
    __shared__ cw_fused_tile cwf_t;
    __shared__ unsigned cwf_go;
    extern __shared__ __align__(16) unsigned char cwf_dyn[];
    cwf_df_ctx c;
    cwf_inc I;
    cwf_df_task task;
    unsigned long long next = 0ull, input = 0ull, in_bytes = 0ull;
    unsigned slots = 0u;
    if (threadIdx.x == 0u) {
        c.st = st;
        c.stages = cwf_stages;
        c.chains = cwf_chains;
        c.deps = cwf_deps;
        c.nstages = CWF_STAGES;
        c.nchains = CWF_CHAINS;
        c.tasks = CWF_TASKS;
        c.in_flight = CWF_IN_FLIGHT;
        c.alls = CWF_ALLS;
        c.final = CWF_FINAL;
        c.watchdog_ns = watchdog_ns;
        /* blocks waiting for a request nap up to 1 us between checks (spin
         * when the loop spins): the opener does the sleeping of the idle modes */
        c.idle_nap_ns = sleep_ns == 0u ? 0u : 1000u;
        c.inc = &I;
        I.h = h;
        I.d = d;
        I.t = &cwf_t;
        I.sleep_ns = sleep_ns;
        I.spin_ns = spin_ns;
        I.flags = flags;
        if (blockIdx.x == 0u) {
            /* the graph loop's start: the launch's numbers begin at h->base,
             * announced to the host (running_epoch) after everything else */
            cw__res_arm(h, d);
            cwf_st_rel(&st[CWF_W_ARMED], 1ull);
        } else {
            while (cwf_ld_acq(&st[CWF_W_ARMED]) == 0ull) cw__res_nap(64u);
        }
        I.base = *(volatile unsigned long long *)&h->base;
        I.deadline = timeout_ns != 0ull ? d->t0 + timeout_ns : ~0ull;
        /* the input slots, the same for the whole launch: in registers */
        slots = d->pub.input_slots;
        input = d->pub.input;
        in_bytes = d->pub.input_bytes;
        next = cwf_add_relaxed(&st[CWF_W_NEXT], 1ull);
    }
    for (;;) {
        /* a task: its chain's stages one after the other; cwf_go 1 runs the
         * stage in cwf_t, 0 ends the task, 2 leaves the loop (every thread
         * has read the last task's cwf_go before thread 0 writes the next) */
        __syncthreads();
        if (threadIdx.x == 0u) {
            const unsigned long long ticket = next;
            next = cwf_add_relaxed(&st[CWF_W_NEXT], 1ull); /* the next one, while this one runs */
            unsigned go = cwf_df_take(&c, ticket, &task);
            if (go) {
                cwf_fill(&cwf_t, &task, &I, input, slots, in_bytes, (void *)cwf_dyn);
                go = cwf_df_wait_deps(&c, &task);
            }
            cwf_go = go ? 1u : 2u;
        }
        __syncthreads();
        if (cwf_go == 2u) break;
        while (cwf_go == 1u) {
            cwf_run(cwf_t.stage, &cwf_t, user);
            __syncthreads();
            if (threadIdx.x == 0u) {
                cwf_df_publish(&c, &task);
                const cwf_df_chain *ch = &cwf_chains[task.chain];
                unsigned go = 0u;
                if (task.stage + 1u < ch->first + ch->count) {
                    task.stage += 1u;
                    cwf_fill(&cwf_t, &task, &I, input, slots, in_bytes, (void *)cwf_dyn);
                    go = cwf_df_wait_deps(&c, &task) ? 1u : 2u;
                }
                cwf_go = go;
            }
            __syncthreads();
        }
        if (cwf_go == 2u) break;
        if (threadIdx.x == 0u) cwf_df_finish(&c, &task);
    }
    if (threadIdx.x == 0u && cwf_df_leave(&c, gridDim.x)) {
        if (CWF_LD(&st[CWF_W_ABORT]) != 0ull) {
            d->stopped = 1u;
            d->reason = CW_RES_EXIT_STALLED;
        }
        cw__res_exit(h, d);
    }
}
}  /* extern "C" */
)CWF";

const char *read_name(uint32_t r) {
    switch (r) {
    case CW_FUSED_READ_SAME: return "CW_FUSED_READ_SAME";
    case CW_FUSED_READ_NEIGHBOURS: return "CW_FUSED_READ_NEIGHBOURS";
    case CW_FUSED_READ_ALL: return "CW_FUSED_READ_ALL";
    case CW_FUSED_READ_FUNCTION: return "CW_FUSED_READ_FUNCTION";
    default: return "?";
    }
}

bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

// The tiles of stage i: x and y counts (0: refused, with the detail set).
cw_status stage_grid(const cw_fused_stage *s, uint32_t i, uint32_t *tx, uint32_t *ty) {
    const bool by_count = s->tiles != 0;
    const bool by_size = s->size[0] || s->size[1] || s->tile[0] || s->tile[1];
    if (by_count == by_size)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: stage %u ('%s') gives %s: give `tiles`, or `size` and `tile`", i, s->name,
                    by_count ? "both tiles and a size" : "neither tiles nor a size");
    uint64_t x = 1, y = 1;
    if (by_count) {
        x = s->tiles;
    } else {
        const uint64_t sx = s->size[0], sy = s->size[1] ? s->size[1] : 1;
        const uint64_t wx = s->tile[0], wy = s->tile[1] ? s->tile[1] : 1;
        if (sx == 0 || wx == 0)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: stage %u ('%s'): size[0] and tile[0] must be at least 1 (size %ux%u, tile "
                        "%ux%u)",
                        i, s->name, s->size[0], s->size[1], s->tile[0], s->tile[1]);
        x = (sx + wx - 1) / wx;
        y = (sy + wy - 1) / wy;
    }
    if (x * y > CW_FUSED_MAX_TILES)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u ('%s') has %llu tiles (at most %u)", i,
                    s->name, (unsigned long long)(x * y), CW_FUSED_MAX_TILES);
    *tx = (uint32_t)x;
    *ty = (uint32_t)y;
    return CW_SUCCESS;
}

// The last source tile (one axis) that a neighbourhood's reader tiles map
// to, without the radius: it must exist.
uint64_t mapped_end(uint32_t n, uint32_t num, uint32_t den) { return ((uint64_t)n * num + den - 1) / den; }

// Whether reader tiles of `n` a neighbourhood maps onto src's, widened by
// the radius, reach every tile of src (one axis).
bool covers(uint32_t n, uint32_t src, uint32_t num, uint32_t den, uint32_t radius) {
    return mapped_end(n, num, den) + radius >= src;
}

// The chains (consecutive stages of one tile grid, each later one reading
// the chain's earlier ones only tile for tile, and at least once), the
// dependencies a block fulfils itself (local), the done words somebody
// reads (publish), and whether the last chain's one task waits, through
// what it reads, for every other (final: it signals, no count of tasks).
cw_status plan_chains(DataflowPlan *p) {
    const uint32_t n = p->nstages;
    p->chains = static_cast<cwf_df_chain *>(calloc(n, sizeof *p->chains));
    if (!p->chains) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        cwf_df_stage *s = &p->stages[i];
        bool join = false;
        if (i > 0 && p->chains[c - 1].first + p->chains[c - 1].count == i) {
            const cwf_df_stage *head = &p->stages[p->chains[c - 1].first];
            bool reads_chain = false, only_same = true;
            for (uint32_t k = 0; k < s->dep_count; k++) {
                const cwf_df_dep *d = &p->deps[s->dep_first + k];
                if (d->previous || d->stage < p->chains[c - 1].first) continue;
                if (d->read == CW_FUSED_READ_SAME) reads_chain = true;
                else only_same = false;
            }
            join = reads_chain && only_same && head->tiles_x == s->tiles_x && head->tiles_y == s->tiles_y;
        }
        if (join) {
            p->chains[c - 1].count++;
        } else {
            p->chains[c] = cwf_df_chain{p->tasks, i, 1, s->tiles};
            p->tasks += s->tiles;
            c++;
        }
        s->chain = c - 1;
    }
    p->nchains = c;
    for (uint32_t k = 0; k < p->ndeps; k++) {
        cwf_df_dep *d = &p->deps[k];
        d->local = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        const cwf_df_stage *s = &p->stages[i];
        for (uint32_t k = 0; k < s->dep_count; k++) {
            cwf_df_dep *d = &p->deps[s->dep_first + k];
            if (!d->previous && p->stages[d->stage].chain == s->chain) d->local = 1;
            // a done word is read by a wait for it: not the block's own work,
            // not an ALL (a count), not a previous request's with one in flight
            const bool waits = !d->local && d->read != CW_FUSED_READ_ALL && !(d->previous && p->in_flight == 1);
            if (waits) p->stages[d->stage].publish = 1;
        }
    }
    // With requests in flight a tile's done word also orders its own next
    // request's tile: kept wherever it is read at all.
    // final: every stage whole, reached from the last chain (one task).
    bool *whole = static_cast<bool *>(calloc(n, sizeof *whole));
    if (!whole) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    const cwf_df_chain *last = &p->chains[c - 1];
    if (last->tiles == 1)
        for (uint32_t i = last->first; i < last->first + last->count; i++) whole[i] = true;
    for (bool more = true; more;) {
        more = false;
        for (uint32_t i = n; i-- > 0;) {
            if (!whole[i]) continue;
            const cwf_df_stage *s = &p->stages[i];
            const cwf_df_chain *ch = &p->chains[s->chain];
            for (uint32_t j = ch->first; j < ch->first + ch->count; j++)
                if (!whole[j]) whole[j] = more = true;
            for (uint32_t k = 0; k < s->dep_count; k++) {
                const cwf_df_dep *d = &p->deps[s->dep_first + k];
                const cwf_df_stage *src = &p->stages[d->stage];
                if (d->previous || whole[d->stage]) continue;
                bool all = d->read == CW_FUSED_READ_ALL || d->read == CW_FUSED_READ_SAME;
                if (d->read == CW_FUSED_READ_NEIGHBOURS)
                    all = covers(s->tiles_x, src->tiles_x, d->num, d->den, d->radius) &&
                          (s->tiles_y == 1 && src->tiles_y == 1 ? true
                                                                : covers(s->tiles_y, src->tiles_y, d->num, d->den, d->radius));
                if (all) whole[d->stage] = more = true;
            }
        }
    }
    p->final = 1;
    for (uint32_t i = 0; i < n; i++)
        if (!whole[i]) p->final = 0;
    free(whole);
    return CW_SUCCESS;
}

}  // namespace

void dataflow_plan_free(DataflowPlan *p) {
    free(p->stages);
    free(p->chains);
    free(p->deps);
    free(p->geo);
    for (uint32_t i = 0; i < p->nstages; i++) free(p->names ? p->names[i] : nullptr);
    free(p->names);
    for (uint32_t i = 0; i < p->nfns; i++) free(p->fns ? p->fns[i] : nullptr);
    free(p->fns);
    memset(p, 0, sizeof *p);
}

cw_status dataflow_plan(const cw_resident_fused *f, uint32_t block_threads, DataflowPlan *p) {
    memset(p, 0, sizeof *p);
    if (f->stages)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: a dataflow loop names its stages in stage_defs: stages must be NULL");
    if (!f->stage_defs) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage_defs is NULL (a dataflow loop)");
    if (f->in_flight > CW_FUSED_MAX_IN_FLIGHT)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: in_flight %u (0 to %u)", f->in_flight,
                    CW_FUSED_MAX_IN_FLIGHT);
    const uint32_t n = f->stage_count;
    p->nstages = n;
    p->block = block_threads;
    p->in_flight = f->in_flight ? f->in_flight : 1;
    p->shared = f->shared_bytes;
    uint32_t ndeps = 0;
    for (uint32_t i = 0; i < n; i++) ndeps += f->stage_defs[i].dep_count <= CW_FUSED_MAX_DEPS ? f->stage_defs[i].dep_count : 0;
    p->stages = static_cast<cwf_df_stage *>(calloc(n, sizeof *p->stages));
    p->geo = static_cast<DataflowGeo *>(calloc(n, sizeof *p->geo));
    p->deps = static_cast<cwf_df_dep *>(calloc(ndeps ? ndeps : 1, sizeof *p->deps));
    p->names = static_cast<char **>(calloc(n, sizeof *p->names));
    p->fns = static_cast<char **>(calloc(ndeps ? ndeps : 1, sizeof *p->fns));
    if (!p->stages || !p->geo || !p->deps || !p->names || !p->fns) {
        dataflow_plan_free(p);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    cw_status st = CW_SUCCESS;
    uint64_t tiles = 0;
    for (uint32_t i = 0; i < n && st == CW_SUCCESS; i++) {
        const cw_fused_stage *s = &f->stage_defs[i];
        if (!s->name || !is_identifier(s->name)) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u's name %s%s%s is not an identifier", i,
                      s->name ? "'" : "", s->name ? s->name : "(NULL)", s->name ? "'" : "");
            break;
        }
        if (!has_word(f->source, s->name)) {
            st = fail(CW_ERROR_INVALID_ARGUMENT,
                      "invalid argument: stage %u, '%s', is not in the source (each dataflow stage is an extern \"C\" "
                      "__device__ void %s(const cw_fused_tile *t, void *user))",
                      i, s->name, s->name);
            break;
        }
        if (!all_zero(s->reserved, sizeof s->reserved)) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u ('%s'): nonzero reserved bytes", i, s->name);
            break;
        }
        uint32_t tx = 0, ty = 0;
        st = stage_grid(s, i, &tx, &ty);
        if (st != CW_SUCCESS) break;
        if (s->threads != 0 && (s->threads % 32 != 0 || s->threads > block_threads)) {
            st = fail(CW_ERROR_INVALID_ARGUMENT,
                      "invalid argument: stage %u ('%s') asks %u threads a tile: 0 (the block's) or a multiple of 32 "
                      "up to the block's %u",
                      i, s->name, s->threads, block_threads);
            break;
        }
        if (s->dep_count > CW_FUSED_MAX_DEPS || (s->dep_count && !s->deps)) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u ('%s'): dep_count %u%s (at most %u)", i,
                      s->name, s->dep_count, s->dep_count && !s->deps ? " with deps NULL" : "", CW_FUSED_MAX_DEPS);
            break;
        }
        p->names[i] = dup_string(s->name);
        if (!p->names[i]) {
            st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            break;
        }
        cwf_df_stage *ps = &p->stages[i];
        ps->tiles = tx * ty;
        ps->tiles_x = tx;
        ps->tiles_y = ty;
        ps->dep_first = p->ndeps;
        ps->dep_count = s->dep_count;
        ps->all = CWF_NONE;
        ps->done = (unsigned)tiles;
        DataflowGeo *g = &p->geo[i];
        if (!s->tiles) {
            g->size_x = s->size[0];
            g->size_y = s->size[1] ? s->size[1] : 1;
            g->tile_x = s->tile[0];
            g->tile_y = s->tile[1] ? s->tile[1] : 1;
        }
        g->threads = s->threads ? s->threads : block_threads;
        g->shared = s->shared_bytes;
        if (s->shared_bytes > p->shared) p->shared = s->shared_bytes;
        tiles += ps->tiles;
        for (uint32_t k = 0; k < s->dep_count && st == CW_SUCCESS; k++) {
            const cw_fused_dep *d = &s->deps[k];
            cwf_df_dep *pd = &p->deps[p->ndeps];
            if (!all_zero(d->reserved, sizeof d->reserved)) {
                st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u ('%s') dependency %u: nonzero reserved bytes",
                          i, s->name, k);
                break;
            }
            uint32_t rd = 0;  // the raw value (a caller's may be none of the enum's)
            memcpy(&rd, &d->read, sizeof rd);
            if (rd < CW_FUSED_READ_SAME || rd > CW_FUSED_READ_FUNCTION) {
                st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u ('%s') dependency %u: read %u is not a cw_fused_read",
                          i, s->name, k, rd);
                break;
            }
            if (d->stage >= n) {
                st = fail(CW_ERROR_INVALID_ARGUMENT,
                          "invalid argument: stage %u ('%s') dependency %u reads stage %u, which does not exist (%u stages)",
                          i, s->name, k, d->stage, n);
                break;
            }
            const bool prev = d->previous != 0;
            if (!prev && d->stage >= i) {
                st = fail(CW_ERROR_INVALID_ARGUMENT,
                          "invalid argument: stage %u ('%s') reads %s: a stage reads only stages before it (or, with "
                          "previous, the previous request's)",
                          i, s->name, d->stage == i ? "itself" : "a stage that runs after it");
                break;
            }
            // A later stage (with previous) is checked below, once its grid is known.
            const bool neighbours = rd == CW_FUSED_READ_NEIGHBOURS;
            if (!neighbours && (d->radius || d->scale_num || d->scale_den)) {
                st = fail(CW_ERROR_INVALID_ARGUMENT,
                          "invalid argument: stage %u ('%s') dependency %u: radius and scale apply to "
                          "CW_FUSED_READ_NEIGHBOURS only, not %s",
                          i, s->name, k, read_name(rd));
                break;
            }
            if ((rd == CW_FUSED_READ_FUNCTION) != (d->function != nullptr)) {
                st = fail(CW_ERROR_INVALID_ARGUMENT,
                          "invalid argument: stage %u ('%s') dependency %u: %s", i, s->name, k,
                          d->function ? "function is set but read is not CW_FUSED_READ_FUNCTION"
                                      : "CW_FUSED_READ_FUNCTION needs its function's name");
                break;
            }
            uint32_t num = d->scale_num, den = d->scale_den;
            if (neighbours) {
                if (num == 0 && den == 0) num = den = 1;
                if (num == 0 || den == 0) {
                    st = fail(CW_ERROR_INVALID_ARGUMENT,
                              "invalid argument: stage %u ('%s') dependency %u: scale %u/%u (both 0 for 1/1, or both "
                              "at least 1)",
                              i, s->name, k, d->scale_num, d->scale_den);
                    break;
                }
            }
            pd->stage = d->stage;
            pd->read = rd;
            pd->radius = d->radius;
            pd->num = num;
            pd->den = den;
            pd->previous = prev ? 1u : 0u;
            pd->fn = CWF_NONE;
            if (rd == CW_FUSED_READ_FUNCTION) {
                if (!is_identifier(d->function) || !has_word(f->source, d->function)) {
                    st = fail(CW_ERROR_INVALID_ARGUMENT,
                              "invalid argument: stage %u ('%s') dependency %u: function '%s' is %s (extern \"C\" "
                              "__device__ int %s(const cw_fused_tile *t, unsigned i))",
                              i, s->name, k, d->function, is_identifier(d->function) ? "not in the source" : "not an identifier",
                              d->function);
                    break;
                }
                uint32_t fn = 0;
                while (fn < p->nfns && strcmp(p->fns[fn], d->function) != 0) fn++;
                if (fn == p->nfns) {
                    p->fns[fn] = dup_string(d->function);
                    if (!p->fns[fn]) {
                        st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
                        break;
                    }
                    p->nfns++;
                }
                pd->fn = fn;
            }
            p->ndeps++;
        }
    }
    if (st == CW_SUCCESS && tiles > CW_FUSED_MAX_TILES)
        st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stages have %llu tiles in all (at most %u)",
                  (unsigned long long)tiles, CW_FUSED_MAX_TILES);
    // What needs every stage's grid: the shapes a dependency relates.
    for (uint32_t i = 0; i < n && st == CW_SUCCESS; i++) {
        const cwf_df_stage *ps = &p->stages[i];
        for (uint32_t k = 0; k < ps->dep_count && st == CW_SUCCESS; k++) {
            cwf_df_dep *pd = &p->deps[ps->dep_first + k];
            const cwf_df_stage *src = &p->stages[pd->stage];
            const char *me = p->names[i], *them = p->names[pd->stage];
            if (pd->read == CW_FUSED_READ_SAME && (src->tiles_x != ps->tiles_x || src->tiles_y != ps->tiles_y)) {
                st = fail(CW_ERROR_INVALID_ARGUMENT,
                          "invalid argument: stage %u ('%s') reads stage %u ('%s') tile for tile (CW_FUSED_READ_SAME) but "
                          "their tile grids differ (%ux%u and %ux%u): use CW_FUSED_READ_NEIGHBOURS with a scale",
                          i, me, pd->stage, them, ps->tiles_x, ps->tiles_y, src->tiles_x, src->tiles_y);
            } else if (pd->read == CW_FUSED_READ_NEIGHBOURS) {
                // The scale applies across a row, and down the rows unless
                // both grids are one row (a stage of `tiles` in a row).
                const uint64_t ex = mapped_end(ps->tiles_x, pd->num, pd->den);
                const uint64_t ey =
                    ps->tiles_y == 1 && src->tiles_y == 1 ? 1 : mapped_end(ps->tiles_y, pd->num, pd->den);
                if (ex > src->tiles_x || ey > src->tiles_y)
                    st = fail(CW_ERROR_INVALID_ARGUMENT,
                              "invalid argument: stage %u ('%s') reads stage %u ('%s') at scale %u/%u: its %ux%u tiles map "
                              "to %llux%llu tiles of '%s', which has %ux%u (the neighbourhood reaches outside the tile "
                              "range)",
                              i, me, pd->stage, them, pd->num, pd->den, ps->tiles_x, ps->tiles_y, (unsigned long long)ex,
                              (unsigned long long)ey, them, src->tiles_x, src->tiles_y);
                else if (pd->radius > (src->tiles_x > src->tiles_y ? src->tiles_x : src->tiles_y))
                    st = fail(CW_ERROR_INVALID_ARGUMENT,
                              "invalid argument: stage %u ('%s') reads stage %u ('%s') with radius %u: more than its tile "
                              "grid (%ux%u)",
                              i, me, pd->stage, them, pd->radius, src->tiles_x, src->tiles_y);
            }
        }
    }
    if (st == CW_SUCCESS) {
        // The stages read whole (not as the previous request's: that waits for its signal) get a count.
        for (uint32_t k = 0; k < p->ndeps; k++) {
            cwf_df_dep *pd = &p->deps[k];
            if (pd->read == CW_FUSED_READ_ALL && !pd->previous && p->stages[pd->stage].all == CWF_NONE)
                p->stages[pd->stage].all = p->alls++;
        }
        st = plan_chains(p);
        p->tiles = (uint32_t)tiles;
        p->state_bytes = (size_t)CWF_STATE_WORDS(p->alls, p->in_flight, p->tiles) * 8u;
    }
    if (st != CW_SUCCESS) dataflow_plan_free(p);
    return st;
}

cw_status dataflow_source(const cw_resident_fused *f, const DataflowPlan *p, char **out) {
    Text t;
    if (!fused_prologue(&t, f->source)) t.ok = false;
    t.add("\n#line 1 \"cuweave_fused_dataflow.cu\"\n");
    t.add(kPrelude);
    t.add(kFusedDataflowHeader);
    t.add(kGeoType);
    t.addf("extern \"C\" {\n#define CWF_STAGES %uu\n#define CWF_CHAINS %uu\n#define CWF_TASKS %uu\n"
           "#define CWF_IN_FLIGHT %uu\n#define CWF_ALLS %uu\n#define CWF_FINAL %uu\n#define CWF_BLOCK %u\n",
           p->nstages, p->nchains, p->tasks, p->in_flight, p->alls, p->final, p->block);
    // rows: chain, tiles, tiles_x, tiles_y, dep_first, dep_count, all, done, publish
    t.add("static __constant__ cwf_df_stage cwf_stages[] = {\n");
    for (uint32_t i = 0; i < p->nstages; i++) {
        const cwf_df_stage *s = &p->stages[i];
        t.addf("    {%uu, %uu, %uu, %uu, %uu, %uu, %uu, %uu, %uu, 0u}, /* %s */\n", s->chain, s->tiles, s->tiles_x,
               s->tiles_y, s->dep_first, s->dep_count, s->all, s->done, s->publish, p->names[i]);
    }
    // rows: the task of its tile 0, first stage, stages, tiles
    t.add("};\nstatic __constant__ cwf_df_chain cwf_chains[] = {\n");
    for (uint32_t i = 0; i < p->nchains; i++) {
        const cwf_df_chain *c = &p->chains[i];
        t.addf("    {%uu, %uu, %uu, %uu},\n", c->task, c->first, c->count, c->tiles);
    }
    // rows: stage, read, radius, num, den, previous, fn, local
    t.add("};\nstatic __constant__ cwf_df_dep cwf_deps[] = {\n");
    for (uint32_t k = 0; k < (p->ndeps ? p->ndeps : 1u); k++) {
        const cwf_df_dep *d = p->ndeps ? &p->deps[k] : nullptr;
        if (d)
            t.addf("    {%uu, %uu, %uu, %uu, %uu, %uu, %uu, %uu},\n", d->stage, d->read, d->radius, d->num, d->den,
                   d->previous, d->fn, d->local);
        else
            t.add("    {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}, /* none */\n");
    }
    t.add("};\nstatic __constant__ cwf_geo cwf_geos[] = {\n");
    for (uint32_t i = 0; i < p->nstages; i++) {
        const DataflowGeo *g = &p->geo[i];
        t.addf("    {%uu, %uu, %uu, %uu, %uu, %uu},\n", g->size_x, g->size_y, g->tile_x, g->tile_y, g->threads, g->shared);
    }
    t.add("};\n\n/* The dependency functions (CW_FUSED_READ_FUNCTION), by number. */\n"
          "CWF_FN int cwf_df_dep_fn(cwf_df_ctx *c, unsigned fn, unsigned stage, unsigned tile, cwf_u64 r, unsigned i) {\n"
          "    (void)c; (void)stage; (void)tile; (void)r; (void)i;\n");
    if (p->nfns) t.add("    const cw_fused_tile *t = ((cwf_inc *)c->inc)->t;\n");
    t.add("    switch (fn) {\n");
    for (uint32_t k = 0; k < p->nfns; k++) t.addf("    case %uu: return %s(t, i);\n", k, p->fns[k]);
    t.add("    default: return -1;\n    }\n}\n\n/* A tile to its stage's function. */\n"
          "static __device__ __forceinline__ void cwf_run(unsigned stage, const cw_fused_tile *t, void *user) {\n"
          "    switch (stage) {\n");
    for (uint32_t i = 0; i < p->nstages; i++) {
        if (p->geo[i].threads == p->block)
            t.addf("    case %uu: %s(t, user); break;\n", i, p->names[i]);
        else
            t.addf("    case %uu: if (threadIdx.x < %uu) %s(t, user); break;\n", i, p->geo[i].threads, p->names[i]);
    }
    t.add("    default: break;\n    }\n}\n}  /* extern \"C\" */\n");
    t.add(kKernel);
    if (!t.ok) {
        free(t.s);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = t.s;
    return CW_SUCCESS;
}

void dataflow_stall(const DataflowPlan *p, const uint64_t words[8], uint64_t base, cw_resident_stall *s, char *detail,
                    size_t detail_size) {
    memset(s, 0, sizeof *s);
    s->kind = (uint32_t)words[0];
    s->request = base + words[1];
    s->stage = (uint32_t)words[2];
    s->tile = (uint32_t)words[3];
    s->waited_stage = (uint32_t)words[4];
    s->waited_tile = (uint32_t)words[5];
    // A tile's done word holds a request of this launch: as the numbers
    // cw_resident_data_ready gave; a stage's count and a range stall are counts.
    const bool requests = s->kind == CWF_STALL_WAIT && s->waited_tile != CWF_NONE;
    s->counter = requests ? base + words[6] : words[6];
    s->needed = requests ? base + words[7] : words[7];
    const char *me = s->stage < p->nstages ? p->names[s->stage] : "?";
    const char *them = s->waited_stage < p->nstages ? p->names[s->waited_stage] : "?";
    if (s->kind == CWF_STALL_RANGE)
        snprintf(detail, detail_size,
                 "stage '%s' tile %u of request %llu: its dependency function's call %llu named tile %u of stage '%s', "
                 "which has %llu tiles",
                 me, s->tile, (unsigned long long)s->request, (unsigned long long)s->counter, s->waited_tile, them,
                 (unsigned long long)s->needed);
    else if (s->waited_tile == CWF_NONE)
        snprintf(detail, detail_size,
                 "stage '%s' tile %u of request %llu waited longer than the watchdog for the whole of stage '%s': %llu "
                 "of its %llu tiles had finished",
                 me, s->tile, (unsigned long long)s->request, them, (unsigned long long)s->counter,
                 (unsigned long long)s->needed);
    else
        snprintf(detail, detail_size,
                 "stage '%s' tile %u of request %llu waited longer than the watchdog for stage '%s' tile %u: it had "
                 "finished request %llu, %llu needed",
                 me, s->tile, (unsigned long long)s->request, them, s->waited_tile, (unsigned long long)s->counter,
                 (unsigned long long)s->needed);
    s->detail = detail;
}

}  // namespace graphs
}  // namespace cw
