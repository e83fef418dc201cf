/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: host completion (futures) and when_all (future.hpp); the
// watcher thread is in future_watch.cpp, the slab of words in
// future_slab.cpp.
#include "core/future.hpp"

#include <errno.h>
#include <new>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/event.hpp"
#include "core/pool.hpp"

namespace cw {
namespace core {
namespace {

constexpr unsigned kDefaultSpinUs = 200;
// EVENT waits: time between cuEventQuery calls while spinning (a build
// setting only for measuring it: -DCW_EVENT_QUERY_GAP_NS=n).
#ifndef CW_EVENT_QUERY_GAP_NS
#define CW_EVENT_QUERY_GAP_NS 500
#endif
constexpr int64_t kEventQueryGapNs = CW_EVENT_QUERY_GAP_NS;
// ... after the first kEventQueryDenseNs of a wait, which query back to back.
constexpr int64_t kEventQueryDenseNs = 20000;

// Set while this thread runs host_fn: the driver's callback thread, where
// CUDA allows no driver call (cuLaunchHostFunc). The user callbacks it runs
// may poll, set callbacks on and get fds of other futures: those paths make
// no driver call while it is set, and refuse what needs one.
thread_local bool t_in_host_fn __attribute__((tls_model("initial-exec"))) = false;

cw_status refuse_in_host_fn(const char *what) {
    return fail(CW_ERROR_NOT_PERMITTED,
                "%s inside a HOST_FUNC future's callback: it runs on the driver's callback thread, where no CUDA "
                "call is allowed (do it from another thread, or use a callback or an fd)",
                what);
}

// Only a device fault is remembered (it is sticky: the marker never runs);
// any other error of a query says nothing about the marker.
bool is_fault(CUresult r) { return status_from_cu(r) == CW_ERROR_DEVICE_FAULT; }

// Asks the driver about f's event. The query needs no current context on
// the drivers measured (the event names its own); should one refuse it with
// CUDA_ERROR_INVALID_CONTEXT, it is asked again with f's context made
// current in *guard (entered once: *guarded), the caller's restored when the
// guard goes. A completed wait so costs one driver call, as the raw
// cuEventQuery or cuEventSynchronize does.
CUresult query_event(cw_future *f, CurrentGuard *guard, bool *guarded, cw_status *guard_st) {
    CUresult r = drv().cuEventQuery(f->ev);
    if (__builtin_expect(r != CUDA_ERROR_INVALID_CONTEXT || *guarded, 1)) return r;
    *guard_st = guard->enter(f->ctx->cu);
    if (*guard_st != CW_SUCCESS) return r;
    *guarded = true;
    return drv().cuEventQuery(f->ev);
}

// EVENT: asks the driver whether the marker event has been reached. A
// device fault counts as reached, and is cached for outcome() to report;
// any other error of a query counts as not reached, and is not cached. On
// the driver's callback thread it asks nothing: not reached, unless seen so
// or faulted before.
bool event_reached(cw_future *f) {
    if (f->seen_done.load(std::memory_order_acquire)) return true;
    if (t_in_host_fn) return f->fault.load(std::memory_order_acquire) != 0;
    CurrentGuard guard;
    bool guarded = false;
    cw_status guard_st = CW_SUCCESS;
    CUresult r = query_event(f, &guard, &guarded, &guard_st);
    if (guard_st != CW_SUCCESS) return false;
    if (guarded) (void)guard.leave();
    if (r == CUDA_SUCCESS) {
        f->seen_done.store(true, std::memory_order_release);
        return true;
    }
    if (!is_fault(r)) return false;
    f->fault.store(CW_ERROR_DEVICE_FAULT, std::memory_order_release);
    return true;
}

// A WRITE_VALUE word as the host sees it, read with acquire order (as the
// resident loop reads its words): once it shows the marker, the results of
// the work before the marker are visible to this thread's later reads. A
// plain (volatile) load would do on x86, where every load is an acquire
// load; on a weakly ordered host (Grace, aarch64) later reads could be
// satisfied before it and see stale results. On x86 this compiles to the
// same single mov as the volatile load (objdump of the spin: no fence).
inline uint32_t load_word(const volatile uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

// True when the marker of the current arming has been reached.
inline bool marker_done(cw_future *f) {
    if (f->kind == CW_FUTURE_EVENT) return event_reached(f);
    uint32_t want = f->armed.load(std::memory_order_acquire);
    uint32_t have = f->kind == CW_FUTURE_WRITE_VALUE ? load_word(f->word) : f->done.load(std::memory_order_acquire);
    return static_cast<int32_t>(have - want) >= 0;
}

// Asks the driver whether the context faulted: after a sticky fault every
// query of the context, this future's event included, returns the error.
// Returns CW_SUCCESS when no fault is known.
cw_status check_fault(cw_future *f) {
    int cached = f->fault.load(std::memory_order_acquire);
    if (cached) return static_cast<cw_status>(cached);
    CurrentGuard guard;
    CW_TRY(guard.enter(f->ctx->cu));
    CUresult r = drv().cuEventQuery(f->ev);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) return guard.leave();
    cw_status st = fail_cu(r, "cuEventQuery", "the stream faulted before the future's marker");
    if (st == CW_ERROR_DEVICE_FAULT) f->fault.store(st, std::memory_order_release);
    return st;
}

// The status a completed (or faulted) future reports.
cw_status outcome(cw_future *f) {
    int cached = f->fault.load(std::memory_order_acquire);
    if (cached) return fail(static_cast<cw_status>(cached), "the stream faulted before the future's marker");
    return CW_SUCCESS;
}

// ---- HOST_FUNC -------------------------------------------------------------

void host_fn(void *user) {
    cw_future *f = static_cast<cw_future *>(user);
    f->done.store(f->armed.load(std::memory_order_relaxed), std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with set_callback / get_fd
    if (FutureHook h = g_host_fn_hook.load(std::memory_order_acquire)) h(g_host_fn_hook_arg.load());
    pthread_mutex_lock(&f->mutex);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mutex);
    t_in_host_fn = true;  // the user's callback runs on the driver's thread
    (void)future_notify(f, CW_SUCCESS);  // a destroy is refused here: nothing deferred to free
    t_in_host_fn = false;
    f->hostfn_pending.store(0, std::memory_order_release);  // last touch of f
}

// Enqueues the marker for sequence number `seq` (and, on first arming, the
// fault-check event). The event is recorded once, when the future is made:
// after a sticky fault every query of the context returns the error, so one
// event serves every later arming and rearm costs one driver call, as the raw
// cuStreamWriteValue32 does. The event goes before the marker, so that once
// the marker is queued nothing can fail and no queued host function can
// point at freed memory.
cw_status enqueue_marker(cw_future *f, cw_stream *s, uint32_t seq, bool first, bool *queued) {
    *queued = false;
    // EVENT: the event is the marker, recorded at every arming. Nothing on
    // the stream points at f then, so `queued` stays false: a future whose
    // creation failed may be freed at once (its event goes back to the pool,
    // re-recorded by its next user).
    if (f->kind == CW_FUTURE_EVENT) f->seen_done.store(false, std::memory_order_release);
    if (first || f->kind == CW_FUTURE_EVENT)
        CW_TRY(on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(f->ev, s->cu); }));
    f->armed.store(seq, std::memory_order_seq_cst);
    if (f->kind == CW_FUTURE_EVENT) return CW_SUCCESS;
    // `queued` follows the driver call itself: on_stream may also report a
    // failed restore of the caller's context after the marker went in.
    if (f->kind == CW_FUTURE_WRITE_VALUE) {
        return on_stream(s, "cuStreamWriteValue32", [&] {
            CUresult r = drv().cuStreamWriteValue32(s->cu, f->word_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
            *queued = r == CUDA_SUCCESS;
            return r;
        });
    }
    f->hostfn_pending.store(1, std::memory_order_release);
    cw_status st = on_stream(s, "cuLaunchHostFunc", [&] {
        CUresult r = drv().cuLaunchHostFunc(s->cu, host_fn, f);
        *queued = r == CUDA_SUCCESS;
        return r;
    });
    if (!*queued) f->hostfn_pending.store(0, std::memory_order_release);
    return st;
}

void reset_notification(cw_future *f) {
    int fd = f->efd.load(std::memory_order_relaxed);
    if (fd >= 0) {
        uint64_t v;
        while (read(fd, &v, sizeof v) > 0) {
        }
    }
    f->cb_state.store(0, std::memory_order_release);
    f->cb = nullptr;
    f->cb_user = nullptr;
}

// The spin of WRITE_VALUE and HOST_FUNC waits, until reached() or spin_us
// (at most the deadline): no clock for the first 256 turns (a few us, the
// usual wait), then a clock read every 1024 turns. Returns the deadline (-1:
// no limit), counted from the end of those first turns.
template <class Reached>
inline int64_t spin_for(Reached reached, unsigned spin_us, int64_t timeout_us) {
    unsigned n = 0;
    while (!reached() && ++n < 256) cpu_relax();
    const int64_t start = now_ns();
    const int64_t deadline = deadline_after_us(start, timeout_us);
    int64_t spin_until = start + (int64_t)spin_us * 1000;
    if (deadline >= 0 && spin_until > deadline) spin_until = deadline;
    for (n = 1; !reached(); n++) {
        cpu_relax();
        if ((n & 1023) == 0 && now_ns() >= spin_until) break;
    }
    return deadline;
}

// Whether the current context was made with CU_CTX_SCHED_BLOCKING_SYNC
// (asked once a wait is past its spin: not on the fast path).
bool blocking_sync_context() {
    unsigned flags = 0;
    return drv().cuCtxGetFlags(&flags) == CUDA_SUCCESS && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC;
}

// Waits for the marker, at most timeout_us microseconds (negative, or too
// large to represent as a clock reading: no limit).
cw_status wait_done(cw_future *f, int64_t timeout_us) {
    if (f->kind == CW_FUTURE_EVENT) {
        // Spins on cuEventQuery for spin_us: back to back for the first
        // kEventQueryDenseNs (a wait for a GPU round trip reacts as fast as
        // the driver's own spin), then a query every kEventQueryGapNs. Then,
        // with no limit, on a context made with CU_CTX_SCHED_BLOCKING_SYNC
        // (FFmpeg's CUDA device context is), sleeps in cuEventSynchronize
        // until the GPU's completion wakes it, as a hand-written
        // cuEventSynchronize there does (polling returned bench_ffmpeg's 2 ms
        // waits 0.9 ms late on the H100). Otherwise, and with a limit (the
        // driver's wait cannot be bounded), polls with sleeps growing to 1
        // ms: on other contexts cuEventSynchronize spins or yields, as their
        // flags say. The context is made current only where the driver asks
        // for it (query_event) and for the flags and the driver's wait.
        CurrentGuard guard;
        bool guarded = false;
        cw_status guard_st = CW_SUCCESS;
        const int64_t start = now_ns();
        const int64_t deadline = deadline_after_us(start, timeout_us);  // -1: no limit
        int64_t spin_until = start + (int64_t)f->spin_us * 1000;
        if (deadline >= 0 && spin_until > deadline) spin_until = deadline;
        int64_t sleep_ns = 2000;
        for (;;) {
            CUresult r = f->seen_done.load(std::memory_order_acquire) ? CUDA_SUCCESS
                                                                        : query_event(f, &guard, &guarded, &guard_st);
            if (guard_st != CW_SUCCESS) return guard_st;
            if (r == CUDA_SUCCESS) {
                f->seen_done.store(true, std::memory_order_release);
                break;
            }
            if (r != CUDA_ERROR_NOT_READY) {
                cw_status st = fail_cu(r, "cuEventQuery", "the stream faulted before the future's marker");
                if (st == CW_ERROR_DEVICE_FAULT) f->fault.store(st, std::memory_order_release);
                return st;  // the guard restores the caller's context, keeping this error
            }
            const int64_t t = now_ns();
            if (deadline >= 0 && t >= deadline) {
                if (guarded) CW_TRY(guard.leave());
                return fail(CW_ERROR_TIMEOUT, "the future did not complete in time");
            }
            if (t < spin_until) {
                // Past the first microseconds each query waits its turn:
                // queries take the driver's lock, and a long spin should not
                // crowd the driver's other callers.
                if (t - start >= kEventQueryDenseNs)
                    while (now_ns() - t < kEventQueryGapNs) cpu_relax();
                continue;
            }
            if (deadline < 0) {
                if (!guarded) {
                    CW_TRY(guard.enter(f->ctx->cu));
                    guarded = true;
                }
                if (blocking_sync_context()) {
                    r = drv().cuEventSynchronize(f->ev);
                    if (r == CUDA_SUCCESS) {
                        f->seen_done.store(true, std::memory_order_release);
                        break;
                    }
                    cw_status st = fail_cu(r, "cuEventSynchronize", "the stream faulted before the future's marker");
                    if (st == CW_ERROR_DEVICE_FAULT) f->fault.store(st, std::memory_order_release);
                    return st;
                }
            }
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, nullptr);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
        if (guarded) CW_TRY(guard.leave());
    } else if (f->kind == CW_FUTURE_WRITE_VALUE) {
        const uint32_t want = f->armed.load(std::memory_order_acquire);
        const volatile uint32_t *word = f->word;
        const int64_t deadline =
            spin_for([&] { return static_cast<int32_t>(load_word(word) - want) >= 0; }, f->spin_us, timeout_us);
        int64_t sleep_ns = 2000, next_fault_check = 0;
        while (!marker_done(f)) {
            int64_t t = now_ns();
            if (t >= next_fault_check) {
                cw_status st = check_fault(f);
                if (st != CW_SUCCESS) return st;
                next_fault_check = t + 1000000;
            }
            if (deadline >= 0 && t >= deadline) return fail(CW_ERROR_TIMEOUT, "the future did not complete in time");
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, nullptr);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
    } else {
        // HOST_FUNC: spins on the counter the host function sets, then sleeps
        // on the condition variable it signals (sleeping at once cost every
        // wait a futex wake-up, tens of microseconds at p99).
        const uint32_t want = f->armed.load(std::memory_order_acquire);
        const int64_t deadline = spin_for(
            [&] { return static_cast<int32_t>(f->done.load(std::memory_order_acquire) - want) >= 0; }, f->spin_us,
            timeout_us);
        if (!marker_done(f)) {
            pthread_mutex_lock(&f->mutex);
            while (!marker_done(f)) {
                int64_t t = now_ns();
                if (deadline >= 0 && t >= deadline) {
                    pthread_mutex_unlock(&f->mutex);
                    cw_status st = check_fault(f);
                    return st != CW_SUCCESS ? st : fail(CW_ERROR_TIMEOUT, "the future did not complete in time");
                }
                // Wake at least every 10 ms to look for a device fault (after
                // one, the host function never runs).
                int64_t until = t + 10000000;
                if (deadline >= 0 && deadline < until) until = deadline;
                struct timespec ts = {until / 1000000000, until % 1000000000};
                pthread_cond_timedwait(&f->cond, &f->mutex, &ts);
                if (!marker_done(f)) {
                    pthread_mutex_unlock(&f->mutex);
                    cw_status st = check_fault(f);
                    if (st != CW_SUCCESS) return st;
                    pthread_mutex_lock(&f->mutex);
                }
            }
            pthread_mutex_unlock(&f->mutex);
        }
    }
    // The marker ran, so the work before it is done; a fault after it is not
    // this future's business, but one before it would have stopped the marker.
    return outcome(f);
}

// Waits until f's marker can no longer touch f's memory, quietly (the
// caller's error detail is not this loop's business). Returns CW_SUCCESS once
// it ran; CW_ERROR_DEVICE_FAULT when the context faulted (it never runs);
// for an EVENT future, the status of a query error other than a fault
// (nothing queued points at an EVENT future: an error the driver keeps giving
// must not hold the destroy for good). Only a fault ends the wait of the
// other kinds: any other error of the query (a refusal, a passing failure)
// says nothing about a marker that may still be queued, and a written-value
// slot handed to the next future while its old marker is queued would
// complete that future early.
cw_status settle(cw_future *f) {
    int64_t sleep_ns = 1000, next_check = 0;
    while (!f->fault.load(std::memory_order_acquire) &&
           (!marker_done(f) || f->hostfn_pending.load(std::memory_order_acquire))) {
        int64_t t = now_ns();
        if (t >= next_check) {
            CurrentGuard guard;
            if (guard.enter(f->ctx->cu) == CW_SUCCESS) {
                CUresult r = drv().cuEventQuery(f->ev);
                if (is_fault(r)) return CW_ERROR_DEVICE_FAULT;
                if (f->kind == CW_FUTURE_EVENT && r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
                    return status_from_cu(r);
            }
            next_check = t + 10000000;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, nullptr);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
    return f->fault.load(std::memory_order_acquire) ? CW_ERROR_DEVICE_FAULT : CW_SUCCESS;
}

// Frees a live future once its marker can no longer touch it (see
// cw_future_destroy), after running a callback set for this arming that has
// not run yet. Keeps the caller's error detail. holds_ctx: the future holds
// a context reference to drop (orphans do not).
void future_free(cw_future *f, bool holds_ctx = true) {
    // Inside its own callback (on this thread): the code that runs the
    // callback frees it when the callback returns.
    if (future_in_callback(f)) {
        f->destroy_deferred = true;
        return;
    }
    f->dying.store(true, std::memory_order_seq_cst);  // no rearm from here on
    cw_status st;
    do {
        st = settle(f);
        // Off the watcher's lists; a callback the watcher runs now returns
        // first (it may have rearmed f before `dying` was set: look again).
        future_unwatch(f);
    } while (st == CW_SUCCESS && (!marker_done(f) || f->hostfn_pending.load(std::memory_order_acquire)));
    // Exactly once per completion: a callback not run yet runs now. It may
    // get f's fd, which watches f again when its marker never runs (a
    // fault): off the list once more (rearm refuses now, so nothing else
    // puts it back).
    if (future_callback(f, st)) future_unwatch(f);
    handle_retire(f);
    if (st == CW_ERROR_DEVICE_FAULT && f->kind == CW_FUTURE_HOST_FUNC) {
        log(CW_LOG_WARNING, "cw_future_destroy: the context faulted before the marker; its memory is not freed");
        return;
    }
    cw_context *ctx = f->ctx;
    if (f->kind == CW_FUTURE_WRITE_VALUE) slab_put(ctx, f->slot);
    event_put(ctx, f->ev);
    int fd = f->efd.load();
    if (fd >= 0) close(fd);
    pthread_mutex_destroy(&f->mutex);
    pthread_cond_destroy(&f->cond);
    f->~cw_future();
    handle_free(f);
    if (holds_ctx) context_release(ctx);
}

// Frees the context's orphans whose markers have run. An orphan is a future
// whose creation failed after its marker was queued (only the restore of the
// caller's context failed): the marker still points at it, so it waits here
// instead of being freed on the spot, and the caller never sees it.
void reap_orphans(cw_context *ctx) {
    cw_future *list;
    {
        SpinLock lock(ctx->lock);
        list = ctx->orphans;
        ctx->orphans = nullptr;
    }
    cw_future *keep = nullptr;
    while (list) {
        cw_future *f = list;
        list = f->orphan_next;
        if (marker_done(f) && !f->hostfn_pending.load(std::memory_order_acquire)) {
            future_free(f, false);
        } else {
            f->orphan_next = keep;
            keep = f;
        }
    }
    if (!keep) return;
    SpinLock lock(ctx->lock);
    while (keep) {
        cw_future *f = keep;
        keep = f->orphan_next;
        f->orphan_next = ctx->orphans;
        ctx->orphans = f;
    }
}

cw_status future_make(cw_stream *s, cw_future_kind kind, cw_future **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = s->ctx;
    if (__builtin_expect(ctx->orphans != nullptr, 0)) reap_orphans(ctx);
    void *mem = calloc(1, sizeof(cw_future));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_future *f = new (mem) cw_future();
    f->ctx = ctx;
    f->kind = kind;
    f->efd.store(-1);
    f->spin_us = kDefaultSpinUs;
    cond_init_monotonic(&f->cond);
    pthread_mutex_init(&f->mutex, nullptr);
    bool have_slot = false;
    cw_status st = event_get(ctx, &f->ev);
    if (st == CW_SUCCESS && kind == CW_FUTURE_WRITE_VALUE) {
        st = slab_get(ctx, &f->slot, &f->word, &f->word_dev);
        have_slot = st == CW_SUCCESS;
        if (have_slot) {
            *f->word = 0;
            f->armed.store(0);
        }
    }
    bool queued = false;
    if (st == CW_SUCCESS) st = enqueue_marker(f, s, 1, true, &queued);
    if (st != CW_SUCCESS && queued) {
        // The marker went in but the call still failed (the caller's context
        // could not be restored). Out-parameters stay untouched on failure,
        // so the future becomes an orphan, freed once its marker has run.
        handle_retire(f);
        context_on_teardown(futures_teardown, kTeardownUsers);
        SpinLock lock(ctx->lock);
        f->orphan_next = ctx->orphans;
        ctx->orphans = f;
        return st;
    }
    if (st != CW_SUCCESS) {
        if (have_slot) slab_put(ctx, f->slot);
        if (f->ev) event_put(ctx, f->ev);
        pthread_mutex_destroy(&f->mutex);
        pthread_cond_destroy(&f->cond);
        f->~cw_future();
        free(f);
        return st;
    }
    context_retain(ctx);
    room.publish(f);
    *out = f;
    return CW_SUCCESS;
}

}  // namespace

bool future_marker_done(cw_future *f) { return marker_done(f); }
bool future_in_host_fn() { return t_in_host_fn; }
cw_status future_check_fault(cw_future *f) { return check_fault(f); }

// The context is going: its orphans (freed once their markers have run, or
// the context faulted, waiting quietly as destroy does), then its slab.
void futures_teardown(cw_context *ctx) {
    cw_future *list = ctx->orphans;
    ctx->orphans = nullptr;
    while (list) {
        cw_future *f = list;
        list = f->orphan_next;
        future_free(f, false);
    }
    slab_free(ctx);
}

void future_destroy(cw_future *f) { future_free(f); }

cw_status future_create(cw_stream *s, cw_future_kind kind, cw_future **out) {
    if (t_in_host_fn) return refuse_in_host_fn("a future cannot be created");
    if (capturing(s))
        return fail(CW_ERROR_INVALID_STATE,
                    "the stream is capturing: a future would complete at every launch of the graph, not once");
    return future_make(s, kind, out);
}

cw_status future_rearm(cw_future *f, cw_stream *s) {
    if (t_in_host_fn) return refuse_in_host_fn("a future cannot be rearmed");
    if (s->ctx->cu != f->ctx->cu)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stream is not on the future's context");
    if (capturing(s))
        return fail(CW_ERROR_INVALID_STATE,
                    "the stream is capturing: a future would complete at every launch of the graph, not once");
    if (!marker_done(f)) {
        // After a device fault the marker never runs: that is the answer,
        // whether or not anything has asked the driver yet.
        CW_TRY(check_fault(f));
        return fail(CW_ERROR_INVALID_STATE, "the future's previous marker has not completed");
    }
    if (f->fault.load()) return outcome(f);
    if (f->dying.load(std::memory_order_acquire))
        return fail(CW_ERROR_INVALID_STATE, "the future is being destroyed (its callback runs inside cw_future_destroy)");
    // The marker ran; its host function may still be finishing (running the
    // callback): it touches the future until it clears hostfn_pending.
    while (f->hostfn_pending.load(std::memory_order_acquire)) sched_yield();
    future_unwatch(f);
    // A callback the watcher had not delivered yet belongs to this
    // completion: deliver it before the future is armed again.
    const uint32_t prev = f->armed.load(std::memory_order_relaxed);
    if (f->cb_state.load(std::memory_order_acquire) == 1 && future_callback(f, outcome(f))) {
        if (f->destroy_deferred) {
            future_free(f);
            return fail(CW_ERROR_INVALID_HANDLE, "the future's callback destroyed it (the callback of its last "
                                                 "completion, which the rearm ran first)");
        }
        if (f->armed.load(std::memory_order_relaxed) != prev) return CW_SUCCESS;  // its callback rearmed it
    }
    reset_notification(f);
    bool queued = false;
    cw_status st = enqueue_marker(f, s, prev + 1, false, &queued);
    if (st != CW_SUCCESS && !queued) {
        // Nothing was enqueued that will complete the new number: stay completed.
        f->armed.store(prev, std::memory_order_release);
        return st;
    }
    // An eventfd stays with the future across rearms: the watcher must signal
    // it for the new marker too (or report a fault).
    if (f->efd.load(std::memory_order_relaxed) >= 0) {
        cw_status w = future_watch(f);
        if (st == CW_SUCCESS) st = w;
    }
    return st;
}

cw_status future_poll(cw_future *f) {
    if (marker_done(f)) return outcome(f);
    if (t_in_host_fn) {
        // Written-value and host-function futures answer from memory (a
        // fault already seen included); the fault check (a driver call) is
        // left to the watcher and the waiters.
        if (f->kind == CW_FUTURE_EVENT) return refuse_in_host_fn("an EVENT future cannot be polled (cuEventQuery)");
        return f->fault.load(std::memory_order_acquire) ? outcome(f) : CW_ERROR_NOT_READY;
    }
    CW_TRY(check_fault(f));
    return CW_ERROR_NOT_READY;
}

cw_status future_wait(cw_future *f, int64_t timeout_us) {
    if (marker_done(f)) return outcome(f);
    if (t_in_host_fn) return refuse_in_host_fn("a future that has not completed cannot be waited for");
    if (timeout_us == 0) {
        CW_TRY(check_fault(f));
        return fail(CW_ERROR_TIMEOUT, "the future has not completed (timeout 0)");
    }
    return wait_done(f, timeout_us);
}

cw_status future_set_callback(cw_future *f, cw_future_fn fn, void *user) {
    if (f->cb_state.load(std::memory_order_acquire) != 0)
        return fail(CW_ERROR_INVALID_STATE, "the future already has a callback");
    f->cb = fn;
    f->cb_user = user;
    // Once published, the callback may run on another thread and destroy f
    // (a callback may destroy its own future): this call must not touch f
    // after that. With f on the watcher's lists (an fd; an earlier watch)
    // the watcher may run it at once, so the publication, the check and the
    // watch are made under the watcher's lock, which its free of such a
    // future waits for. Otherwise nothing runs it before this call watches f
    // but a HOST_FUNC host function, where a destroy is refused.
    bool claimed = false;
    if (f->wstate.load(std::memory_order_acquire) != 0) {
        CW_TRY(future_publish_listed(f, &claimed));
    } else {
        f->cb_state.store(1, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with host_fn
        // The watcher completes written-value futures, and for host-function
        // futures it notices a device fault (after which the host function
        // never runs); the exchange on cb_state keeps the callback to one call.
        if (!marker_done(f)) return future_watch(f);
        // Whoever wins the 1 -> 2 exchange (this thread or the notifier) calls it.
        int expected = 1;
        claimed = f->cb_state.compare_exchange_strong(expected, 2, std::memory_order_acq_rel);
    }
    if (!claimed) return CW_SUCCESS;
    // One that destroyed its future is freed once it returned.
    future_run_claimed(f, outcome(f));
    if (f->destroy_deferred) future_free(f);
    return CW_SUCCESS;
}

cw_status future_get_fd(cw_future *f, int *fd) {
    int e = f->efd.load(std::memory_order_acquire);
    if (e < 0) {
        int n = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (n < 0) return fail(CW_ERROR_OUT_OF_MEMORY, "eventfd failed: %s", strerror(errno));
        int expected = -1;
        if (!f->efd.compare_exchange_strong(expected, n, std::memory_order_seq_cst)) {
            close(n);  // another thread made it
            n = expected;
        }
        e = n;
        std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with host_fn
        if (marker_done(f)) {
            uint64_t one = 1;
            ssize_t w = write(e, &one, sizeof one);
            (void)w;
        } else {
            CW_TRY(future_watch(f));  // see cw_future_set_callback
        }
    }
    *fd = e;
    return CW_SUCCESS;
}

cw_status when_all(cw_stream *const *streams, size_t n, cw_future_kind kind, cw_future **out) {
    if (t_in_host_fn) return refuse_in_host_fn("a future cannot be created");
    for (size_t i = 0; i < n; i++) {
        if (streams[i]->ctx->cu != streams[0]->ctx->cu)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: streams[%zu] is on another context", i);
        if (capturing(streams[i]))
            return fail(CW_ERROR_INVALID_STATE, "streams[%zu] is capturing: a future cannot wait for captured work", i);
    }
    cw_context *ctx = streams[0]->ctx;
    cw_stream_pool *pool = nullptr;
    CW_TRY(fork_pool(ctx, &pool));
    cw_stream *join = nullptr;
    CW_TRY(pool_acquire(pool, &join, 0));
    cw_status st = CW_SUCCESS;
    for (size_t i = 0; i < n && st == CW_SUCCESS; i++) st = stream_order(join, streams[i]);
    if (st == CW_SUCCESS) st = future_make(join, kind, out);
    pool_release(pool, join);
    return st;
}

std::atomic<FutureHook> g_host_fn_hook{nullptr};
std::atomic<void *> g_host_fn_hook_arg{nullptr};
bool future_word(const cw_future *f, volatile unsigned **word, unsigned *armed) {
    if (f->kind != CW_FUTURE_WRITE_VALUE) return false;
    *word = f->word;
    *armed = f->armed.load(std::memory_order_acquire);
    return true;
}

}  // namespace core
}  // namespace cw
