/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the context's event pool, marks and timers (event.hpp).
#include "core/event.hpp"

#include <stdlib.h>
#include <string.h>

#include "core/stream.hpp"

namespace cw {
namespace core {

namespace {
// The pool goes last with its context (its events' users went first).
void events_teardown(cw_context *ctx) {
    while (Mark *m = ctx->events.marks) {
        ctx->events.marks = m->next;
        free(m);
    }
    for (size_t i = 0; i < ctx->events.count; i++) drv().cuEventDestroy(ctx->events.items[i]);
    free(ctx->events.items);
    ctx->events.items = nullptr;
    ctx->events.count = ctx->events.cap = 0;
}
}  // namespace

cw_status event_get(cw_context *ctx, CUevent *ev) {
    {
        SpinLock lock(ctx->events.lock);
        if (ctx->events.count > 0) {
            *ev = ctx->events.items[--ctx->events.count];
            return CW_SUCCESS;
        }
    }
    context_on_teardown(events_teardown, kTeardownEvents);
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CW_CU(cuEventCreate, (ev, CU_EVENT_DISABLE_TIMING));
    cw_status st = guard.leave();
    if (st != CW_SUCCESS) drv().cuEventDestroy(*ev);
    return st;
}
namespace {
// ev onto the pool's stack; false when it cannot grow (the lock held).
bool event_push_locked(cw_context *ctx, CUevent ev) {
    if (ctx->events.count == ctx->events.cap) {
        size_t cap = ctx->events.cap ? ctx->events.cap * 2 : 16;
        void *p = realloc(ctx->events.items, cap * sizeof(CUevent));
        if (!p) return false;
        ctx->events.items = static_cast<CUevent *>(p);
        ctx->events.cap = cap;
    }
    ctx->events.items[ctx->events.count++] = ev;
    return true;
}
}  // namespace

void event_put(cw_context *ctx, CUevent ev) {
    {
        SpinLock lock(ctx->events.lock);
        if (event_push_locked(ctx, ev)) return;
    }
    // No room to keep it: give it back to the driver.
    drv().cuEventDestroy(ev);
}

// ---- marks -------------------------------------------------------------------

namespace {
std::atomic<unsigned long> g_marks_allocated{0};

// A mark back to its context's free list and its event to the pool, under
// one lock (the caller holds a context reference until after this).
void mark_free(cw_context *ctx, Mark *m) {
    {
        SpinLock lock(ctx->events.lock);
        m->next = ctx->events.marks;
        ctx->events.marks = m;
        if (event_push_locked(ctx, m->ev)) return;
    }
    drv().cuEventDestroy(m->ev);  // no room to keep it
}
}  // namespace

// The mark and its event come from the context's free list and pool, under
// one lock: no allocation once the pool has served as many marks as are
// alive at once.
cw_status mark_record(cw_stream *s, Mark **out) {
    cw_context *const ctx = s->ctx;
    Mark *m;
    bool have_ev = false;
    CUevent ev = nullptr;
    {
        SpinLock lock(ctx->events.lock);
        m = ctx->events.marks;
        if (m) ctx->events.marks = m->next;
        if (ctx->events.count > 0) {
            ev = ctx->events.items[--ctx->events.count];
            have_ev = true;
        }
    }
    if (!m) {  // the pool's first marks: made once, reused from then on
        context_on_teardown(events_teardown, kTeardownEvents);
        m = static_cast<Mark *>(calloc(1, sizeof(Mark)));
        if (m) g_marks_allocated.fetch_add(1, std::memory_order_relaxed);
        if (!m) {
            if (have_ev) event_put(ctx, ev);
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    if (!have_ev) {
        cw_status st = event_get(ctx, &ev);
        if (st != CW_SUCCESS) {
            SpinLock lock(ctx->events.lock);
            m->next = ctx->events.marks;
            ctx->events.marks = m;
            return st;
        }
    }
    m->ev = ev;
    // Every mark numbered up to `seen` was enqueued on s before this record.
    const uint64_t seen = s->records.load(std::memory_order_acquire);
    cw_status st = on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(m->ev, s->cu); });
    if (st != CW_SUCCESS) {
        mark_free(ctx, m);
        return st;
    }
    m->refs.store(1, std::memory_order_relaxed);
    m->done.store(false, std::memory_order_relaxed);
    m->ncovers = 0;
    m->ctx = ctx;
    context_retain(ctx);
    m->s = s;
    m->serial = s->serial;
    m->after = seen;
    m->number = s->records.fetch_add(1, std::memory_order_acq_rel) + 1;
    // After the record: a host wait on s numbered above this began after it.
    m->syncs = s->syncs_begun.load(std::memory_order_seq_cst);
    *out = m;
    return CW_SUCCESS;
}

void mark_last_release(Mark *m) {
    for (int i = 0; i < m->ncovers; i++) mark_release(m->covers[i]);
    cw_context *ctx = m->ctx;
    mark_free(ctx, m);
    context_release(ctx);
}

void mark_cover(Mark *m, Mark *earlier) {
    if (m == earlier || m->ncovers == (int)(sizeof m->covers / sizeof m->covers[0])) return;
    mark_retain(earlier);
    m->covers[m->ncovers++] = earlier;
}

namespace {
// m finished: so did everything it covers (the first to see it tells them).
void mark_set_done(Mark *m) {
    if (m->done.exchange(true, std::memory_order_acq_rel)) return;
    for (int i = 0; i < m->ncovers; i++) mark_set_done(m->covers[i]);
}
}  // namespace

void mark_note_finished(Mark *m) { mark_set_done(m); }

bool mark_synced(Mark *m, const cw_stream *s) {
    if (m->done.load(std::memory_order_acquire)) return true;
    if (s->serial != m->serial || s->synced.load(std::memory_order_acquire) <= m->syncs) return false;
    mark_set_done(m);
    return true;
}

bool mark_done(Mark *m) {
    if (m->done.load(std::memory_order_acquire)) return true;
    if (drv().cuEventQuery(m->ev) != CUDA_SUCCESS) return false;
    mark_set_done(m);
    return true;
}

cw_status mark_wait(Mark *m) {
    if (m->done.load(std::memory_order_acquire)) return CW_SUCCESS;
    CUresult r = drv().cuEventSynchronize(m->ev);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuEventSynchronize");
    mark_set_done(m);
    return CW_SUCCESS;
}
unsigned long marks_allocated() { return g_marks_allocated.load(std::memory_order_relaxed); }

bool mark_fold(cw_stream *rel, Mark *m) {
    bool ok = (rel && drv().cuStreamWaitEvent(rel->cu, m->ev, 0) == CUDA_SUCCESS) ||
              drv().cuEventSynchronize(m->ev) == CUDA_SUCCESS;
    mark_release(m);
    return ok;
}

// ---- timers ------------------------------------------------------------------

cw_status timer_create(cw_context *ctx, cw_timer **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_TRY(ensure_init());
    cw_timer *t = static_cast<cw_timer *>(calloc(1, sizeof(cw_timer)));
    if (!t) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CurrentGuard guard;
    cw_status st = guard.enter(ctx->cu);
    if (st == CW_SUCCESS) {
        CUresult r = drv().cuEventCreate(&t->start, CU_EVENT_DEFAULT);
        if (r == CUDA_SUCCESS) {
            r = drv().cuEventCreate(&t->stop, CU_EVENT_DEFAULT);
            if (r != CUDA_SUCCESS) drv().cuEventDestroy(t->start);
        }
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuEventCreate");
    }
    if (st == CW_SUCCESS) {
        st = guard.leave();
        if (st != CW_SUCCESS) {
            drv().cuEventDestroy(t->start);
            drv().cuEventDestroy(t->stop);
        }
    }
    if (st != CW_SUCCESS) {
        free(t);
        return st;
    }
    t->ctx = ctx;
    context_retain(ctx);
    room.publish(t);
    *out = t;
    return CW_SUCCESS;
}

void timer_destroy(cw_timer *t) {
    handle_retire(t);
    drv().cuEventDestroy(t->start);
    drv().cuEventDestroy(t->stop);
    cw_context *ctx = t->ctx;
    handle_free(t);
    context_release(ctx);
}

cw_status timer_record(cw_timer *t, cw_stream *s, bool start) {
    if (!start && !t->started) return fail(CW_ERROR_INVALID_STATE, "cw_timer_stop before cw_timer_start");
    if (s->ctx->cu != t->ctx->cu)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stream is not on the timer's context");
    CUevent ev = start ? t->start : t->stop;
    CW_TRY(on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(ev, s->cu); }));
    if (start) {
        t->started = true;
        t->stopped = false;
    } else {
        t->stopped = true;
    }
    return CW_SUCCESS;
}

cw_status timer_elapsed_ms(cw_timer *t, float *ms) {
    if (!t->started || !t->stopped) return fail(CW_ERROR_INVALID_STATE, "the timer was not started and stopped");
    CurrentGuard guard;
    CW_TRY(guard.enter(t->ctx->cu));
    CW_CU(cuEventSynchronize, (t->stop));
    float v = 0;
    if (drv().cuEventElapsedTime)
        CW_CU(cuEventElapsedTime, (&v, t->start, t->stop));
    else if (drv().cuEventElapsedTime_v1)
        CW_CU(cuEventElapsedTime_v1, (&v, t->start, t->stop));
    else
        return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuEventElapsedTime");
    CW_TRY(guard.leave());
    *ms = v;
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
