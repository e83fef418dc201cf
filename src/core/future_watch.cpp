/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the futures' watcher thread, which completes the callbacks
// and file descriptors of written-value and event futures and reports device
// faults of watched futures of every kind (future.hpp; split from
// future.cpp).
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/future.hpp"

namespace cw {
namespace core {
namespace {

// ---- the watcher thread (futures with a callback or an fd) ----
// It completes written-value futures and notices device faults for both
// kinds (a fault check of every watched future once a millisecond). It
// polls with sleeps from 2 us growing to 1 ms while anything is watched, and
// sleeps on the condition variable otherwise. A newly watched future wakes
// it, and its polls start again from 2 us.
//
// A pass takes the completed futures off the watched list onto the ready
// list (kOnReadyList), under the lock; then the watcher notifies them one at
// a time (kNotifying) with the lock released, so that a callback may use
// any other future, those of its own pass included: unwatch takes a future
// off either list, and waits only for the one future being notified, never
// from inside that future's own callback.

struct Watch {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond;      // on the monotonic clock: set up by watch() before the thread starts
    pthread_cond_t idle = PTHREAD_COND_INITIALIZER;  // a notification ended (unwatch waits for it)
    bool cond_ready = false;  // cond is set up
    cw_future *head = nullptr;   // watched, through watch_next
    cw_future *ready = nullptr;  // found complete, not notified yet, through ready_next
    bool running = false;
    bool added = false;  // a future was watched since the watcher last looked at its list
} g_watch;
// Times a newly watched future woke the watcher (future_watcher_wakes).
std::atomic<unsigned long> g_watch_wakes{0};

// The callbacks this thread is running, innermost first (a callback may set
// the callback of a completed future, which then runs inside it).
struct CallbackFrame {
    const cw_future *f;
    CallbackFrame *up;
};
thread_local CallbackFrame *t_frames __attribute__((tls_model("initial-exec"))) = nullptr;

void unlink_from(cw_future **head, cw_future *f, cw_future *cw_future::*next) {
    for (cw_future **pp = head; *pp; pp = &((*pp)->*next))
        if (*pp == f) {
            *pp = f->*next;
            return;
        }
}

void *watcher_main(void *) {
    // Sleeps as asked: Linux adds the thread's timer slack (50 us by default,
    // inherited) to every sleep. Only this thread's setting changes.
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    int64_t idle_ns = 2000, next_fault_check = 0;
    pthread_mutex_lock(&g_watch.mutex);
    for (;;) {
        while (!g_watch.head) {
            idle_ns = 2000;
            next_fault_check = 0;
            pthread_cond_wait(&g_watch.cond, &g_watch.mutex);
        }
        g_watch.added = false;
        // Once a millisecond of polling, also look for a fault.
        const int64_t t = now_ns();
        if (next_fault_check == 0) next_fault_check = t + 1000000;
        const bool fault_pass = t >= next_fault_check;
        if (fault_pass) next_fault_check = t + 1000000;
        for (cw_future **pp = &g_watch.head; *pp;) {
            cw_future *f = *pp;
            bool finished = future_marker_done(f);
            // A host-function future's own host function notifies it (the
            // callback runs on the driver's thread, as promised): the watcher
            // only drops it, and notifies it only for a fault, after which
            // the host function never runs.
            bool deliver = finished && f->kind != CW_FUTURE_HOST_FUNC;
            if (!finished && fault_pass) finished = deliver = future_check_fault(f) == CW_ERROR_DEVICE_FAULT;
            if (finished) {
                *pp = f->watch_next;
                if (!deliver) {
                    f->wstate.fetch_and(~kOnWatchList, std::memory_order_acq_rel);
                    continue;
                }
                // one store: off the list and on the ready list (unwatch
                // reads the word without the lock)
                const int ws = f->wstate.load(std::memory_order_relaxed);
                f->wstate.store((ws & ~kOnWatchList) | kOnReadyList, std::memory_order_release);
                f->ready_next = g_watch.ready;
                g_watch.ready = f;
            } else {
                pp = &f->watch_next;
            }
        }
        if (g_watch.ready) {
            idle_ns = 2000;
            if (FutureHook h = g_watch_ready_hook.load(std::memory_order_acquire)) {
                pthread_mutex_unlock(&g_watch.mutex);
                h(g_watch_hook_arg.load());
                pthread_mutex_lock(&g_watch.mutex);
            }
        }
        while (cw_future *f = g_watch.ready) {
            g_watch.ready = f->ready_next;
            const int ws = f->wstate.load(std::memory_order_relaxed);
            f->wstate.store((ws & ~kOnReadyList) | kNotifying, std::memory_order_release);
            pthread_mutex_unlock(&g_watch.mutex);
            int fault = f->fault.load(std::memory_order_acquire);
            // Its callback destroyed it: only when this thread ran the
            // callback. One that another thread runs (set_callback of the
            // completed future: the exchange went there) is that thread's
            // to free, and may still be running.
            const bool doomed = future_notify(f, fault ? static_cast<cw_status>(fault) : CW_SUCCESS) &&
                                f->destroy_deferred;
            pthread_mutex_lock(&g_watch.mutex);
            f->wstate.fetch_and(~kNotifying, std::memory_order_acq_rel);  // last touch of f, unless doomed
            pthread_cond_broadcast(&g_watch.idle);
            if (doomed) {
                pthread_mutex_unlock(&g_watch.mutex);
                future_destroy(f);
                pthread_mutex_lock(&g_watch.mutex);
            }
        }
        // Sleep idle_ns, unless a future was watched meanwhile (watch()
        // sets `added` and signals under the mutex, so none is missed).
        if (!g_watch.added && g_watch.head) {
            const int64_t until = now_ns() + idle_ns;
            struct timespec ts = {until / 1000000000, until % 1000000000};
            pthread_cond_timedwait(&g_watch.cond, &g_watch.mutex, &ts);
        }
        if (g_watch.added) {
            idle_ns = 2000;
            g_watch_wakes.fetch_add(1, std::memory_order_relaxed);
        } else if (idle_ns < 1000000) {
            idle_ns *= 2;
        }
    }
    return nullptr;
}

}  // namespace

void future_run_claimed(cw_future *f, cw_status st) {
    CallbackFrame frame = {f, t_frames};
    t_frames = &frame;
    f->cb(f->cb_user, f, st);
    t_frames = frame.up;
}

bool future_callback(cw_future *f, cw_status st) {
    int expected = 1;
    if (!f->cb_state.compare_exchange_strong(expected, 2, std::memory_order_acq_rel)) return false;
    future_run_claimed(f, st);
    return true;
}

bool future_in_callback(const cw_future *f) {
    for (const CallbackFrame *c = t_frames; c; c = c->up)
        if (c->f == f) return true;
    return false;
}

bool future_notify(cw_future *f, cw_status st) {
    int fd = f->efd.load(std::memory_order_seq_cst);
    if (fd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(fd, &one, sizeof one);
        (void)n;
    }
    return future_callback(f, st);
}

cw_status future_publish_listed(cw_future *f, bool *claimed) {
    *claimed = false;
    if (FutureHook h = g_watch_entry_hook.load(std::memory_order_acquire)) h(g_watch_hook_arg.load());
    // f is on a list or being notified: the watcher runs (it started before
    // it listed f). A callback the watcher runs once this is published may
    // destroy f, and the watcher frees such a future only after it took the
    // lock again: everything this call reads of f is read under it.
    pthread_mutex_lock(&g_watch.mutex);
    f->cb_state.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with host_fn
    if (future_marker_done(f)) {
        int expected = 1;
        *claimed = f->cb_state.compare_exchange_strong(expected, 2, std::memory_order_acq_rel);
    } else if (!(f->wstate.load(std::memory_order_relaxed) & kOnWatchList)) {
        f->wstate.fetch_or(kOnWatchList, std::memory_order_acq_rel);
        f->watch_next = g_watch.head;
        g_watch.head = f;
        g_watch.added = true;
        pthread_cond_signal(&g_watch.cond);
    }
    pthread_mutex_unlock(&g_watch.mutex);  // f is not touched after this unless *claimed
    return CW_SUCCESS;
}

cw_status future_watch(cw_future *f) {
    if (FutureHook h = g_watch_entry_hook.load(std::memory_order_acquire)) h(g_watch_hook_arg.load());
    pthread_mutex_lock(&g_watch.mutex);
    if (!g_watch.running) {
        if (!g_watch.cond_ready) cond_init_monotonic(&g_watch.cond);
        g_watch.cond_ready = true;
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, watcher_main, nullptr);
        pthread_attr_destroy(&a);
        if (rc != 0) {
            pthread_mutex_unlock(&g_watch.mutex);
            return fail(CW_ERROR_OUT_OF_MEMORY, "could not start the watcher thread (%s)", strerror(rc));
        }
        g_watch.running = true;
    }
    if (!(f->wstate.load(std::memory_order_relaxed) & kOnWatchList)) {
        f->wstate.fetch_or(kOnWatchList, std::memory_order_acq_rel);
        f->watch_next = g_watch.head;
        g_watch.head = f;
        g_watch.added = true;
        pthread_cond_signal(&g_watch.cond);
    }
    pthread_mutex_unlock(&g_watch.mutex);
    return CW_SUCCESS;
}

void future_unwatch(cw_future *f) {
    // On no list and not being notified, at one moment (one word: two loads,
    // of "watched" and then of "notifying", once let a destroy see the first
    // before a callback's rearm watched f again and the second after that
    // callback returned, and free f on the list). Only a call on f puts it
    // back: this thread's, or a callback of f, which the watcher runs only
    // while kNotifying is set.
    const int ws = f->wstate.load(std::memory_order_acquire);
    if (FutureHook h = g_unwatch_hook.load(std::memory_order_acquire)) h(g_unwatch_hook_arg.load());
    if (ws == 0) return;
    pthread_mutex_lock(&g_watch.mutex);
    for (;;) {
        const int now = f->wstate.load(std::memory_order_relaxed);
        if (now & kOnWatchList) unlink_from(&g_watch.head, f, &cw_future::watch_next);
        if (now & kOnReadyList) unlink_from(&g_watch.ready, f, &cw_future::ready_next);
        f->wstate.store(now & kNotifying, std::memory_order_release);
        // Being notified: wait for its callback to return (it may watch f
        // again: look again), unless this thread runs it.
        if (!(now & kNotifying) || future_in_callback(f)) break;
        pthread_cond_wait(&g_watch.idle, &g_watch.mutex);
    }
    pthread_mutex_unlock(&g_watch.mutex);
}

unsigned long future_watcher_wakes() { return g_watch_wakes.load(std::memory_order_relaxed); }

std::atomic<FutureHook> g_watch_ready_hook{nullptr}, g_watch_entry_hook{nullptr};
std::atomic<void *> g_watch_hook_arg{nullptr};
std::atomic<FutureHook> g_unwatch_hook{nullptr};
std::atomic<void *> g_unwatch_hook_arg{nullptr};

bool future_watched(const cw_future *f) {
    return (f->wstate.load(std::memory_order_acquire) & kOnWatchList) != 0;
}

}  // namespace core
}  // namespace cw
