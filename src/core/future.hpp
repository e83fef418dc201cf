/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: host completion (futures) and when_all.
#pragma once

#include <atomic>
#include <pthread.h>

#include "core/stream.hpp"
#include "cuweave/future.h"

struct cw_future {
    uint32_t tag;
    cw_context *ctx;  // retained
    cw_future_kind kind;
    CUevent ev;       // recorded once, at creation: any query of it reports a sticky device fault
    std::atomic<uint32_t> armed;  // sequence number of the current marker
    // WRITE_VALUE: the stream writes `armed` here
    volatile uint32_t *word;
    CUdeviceptr word_dev;
    uint32_t slot;
    unsigned spin_us;
    // HOST_FUNC: the host function stores `armed` here and wakes waiters
    std::atomic<uint32_t> done;
    std::atomic<int> hostfn_pending;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    // Notification
    std::atomic<int> efd;
    std::atomic<int> cb_state;  // 0 none, 1 set, 2 fired
    cw_future_fn cb;
    void *cb_user;
    std::atomic<int> fault;     // cached cw_status of a device fault, 0 if none
    std::atomic<bool> seen_done; // EVENT: a wait or poll saw the current marker reached
    std::atomic<int> wstate;    // kOnWatchList | kOnReadyList | kNotifying (changed under g_watch.mutex; one
                                // word, so that a load without the lock sees one moment: future_unwatch)
    cw_future *watch_next;      // the watcher's list (under g_watch.mutex)
    cw_future *ready_next;      // the watcher's ready list (under g_watch.mutex): not watch_next, which a
                                // watch() of the future may relink meanwhile
    std::atomic<bool> dying;    // being destroyed: rearm refuses
    bool destroy_deferred;      // destroyed inside its own callback: freed when that returns, by the code
                                // that ran it (on its thread; read only there)
    cw_future *orphan_next;     // on the context's orphan list
};

namespace cw {
namespace core {

// cw_future::wstate: on the watcher's list (watch_next); on its ready list
// (ready_next: found complete, not notified yet); being notified by it,
// outside its lock (its callback may watch f again meanwhile).
constexpr int kOnWatchList = 1, kOnReadyList = 2, kNotifying = 4;

// A future completed by the work queued on s so far (refused while s
// captures: it would complete at every launch of the graph).
cw_status future_create(cw_stream *s, cw_future_kind kind, cw_future **out);
// Arms f again behind the work queued on s (f's context) now.
cw_status future_rearm(cw_future *f, cw_stream *s);
// CW_SUCCESS once complete, CW_ERROR_NOT_READY before; a device fault.
cw_status future_poll(cw_future *f);
// Waits at most timeout_us microseconds (negative or too large: no limit).
cw_status future_wait(cw_future *f, int64_t timeout_us);
cw_status future_set_callback(cw_future *f, cw_future_fn fn, void *user);
cw_status future_get_fd(cw_future *f, int *fd);
// Frees f once its marker can no longer touch it.
void future_destroy(cw_future *f);
// For the watcher (future_watch.cpp): whether the marker of f's current
// arming has run (or faulted); a driver query for a device fault (CW_SUCCESS
// when none is known).
bool future_marker_done(cw_future *f);
cw_status future_check_fault(cw_future *f);
// The watcher thread (future_watch.cpp): watch puts f on its list (starting
// it on first need); unwatch takes f off its lists and, unless this thread
// runs f's callback, waits until the watcher is not notifying f; notify
// makes f's fd readable and runs its callback, true when this call ran it
// (see future_callback).
cw_status future_watch(cw_future *f);
void future_unwatch(cw_future *f);
bool future_notify(cw_future *f, cw_status st);
// Runs f's callback if it is set and has not run for this arming (whoever
// wins its 1 -> 2 exchange runs it); true when this call ran it.
bool future_callback(cw_future *f, cw_status st);
// Runs f's callback, claimed by this thread (its exchange won).
void future_run_claimed(cw_future *f, cw_status st);
// cw_future_set_callback of f on the watcher's lists (or being notified by
// it), its callback stored: publishes it and either claims it (the marker
// has run: *claimed, run it with future_run_claimed) or watches f, all under
// the watcher's lock (future_watch.cpp).
cw_status future_publish_listed(cw_future *f, bool *claimed);
// True while this thread runs f's callback (nested ones included).
bool future_in_callback(const cw_future *f);
// True on the driver's callback thread, inside a HOST_FUNC future's host
// function (cw_future_destroy refuses there).
bool future_in_host_fn();
// A future completed by the work queued so far on every stream (one context).
cw_status when_all(cw_stream *const *streams, size_t n, cw_future_kind kind, cw_future **out);
// Times the watcher was woken from its polling sleep by a newly watched
// future (tests).
unsigned long future_watcher_wakes();
// Called by a HOST_FUNC future's host function after it stored the
// completion and before it notifies (tests: holds that window open).
using FutureHook = void (*)(void *arg);
extern std::atomic<FutureHook> g_host_fn_hook;
extern std::atomic<void *> g_host_fn_hook_arg;
// Called by the watcher after a pass that found futures to notify, before it
// notifies them (outside its lock), and at the start of watch() (tests: hold
// those windows open).
extern std::atomic<FutureHook> g_watch_ready_hook, g_watch_entry_hook;
extern std::atomic<void *> g_watch_hook_arg;
// Called by unwatch after it read f's wstate (whether f is on one of the
// watcher's lists or being notified), before it acts on it (tests).
extern std::atomic<FutureHook> g_unwatch_hook;
extern std::atomic<void *> g_unwatch_hook_arg;
// Whether f is on the watcher's list (tests).
bool future_watched(const cw_future *f);
// A written-value future's word and the number its marker writes (tests).
bool future_word(const cw_future *f, volatile unsigned **word, unsigned *armed);
// The context's orphan futures and its slab go with it (future.cpp;
// registered with context_on_teardown when either is first made).
void futures_teardown(cw_context *ctx);
// The context's slab of mapped host words for written-value futures
// (future_slab.cpp): a word (its slot, host and device addresses), given
// back with slab_put; slab_free frees every page (futures_teardown).
cw_status slab_get(cw_context *ctx, uint32_t *slot, volatile uint32_t **host, CUdeviceptr *dev);
void slab_put(cw_context *ctx, uint32_t slot);
void slab_free(cw_context *ctx);

}  // namespace core
}  // namespace cw
