/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: persistent work counted per driver context, and the
// releases that wait until none runs (idle.hpp).
#include "core/idle.hpp"

#include <atomic>
#include <sched.h>
#include <time.h>

#include "base/sync.hpp"
#include "core/future.hpp"
#include "driver/error.hpp"

namespace cw {
namespace core {
namespace {

// (context, running work) pairs; a handful at most, so a small table.
struct Running {
    CUcontext cu;
    int n;
};
Running g_running[64];
int g_total;                   // the sum of the table's counts
int g_quiet;                   // quiet calls under way, every thread's
IdleRelease *g_releases;       // queued while work runs
std::atomic<int> g_lock{0};
std::atomic<unsigned long> g_launch_waits{0};

// This thread's quiet calls under way, and those of them entered while no
// persistent work ran in the process (or nested in one that was): while
// one of those is under way, no launch has started since it began (launches
// wait for it), so a nested quiet call may go ahead at once.
thread_local int t_quiet __attribute__((tls_model("initial-exec"))) = 0;
thread_local int t_clear __attribute__((tls_model("initial-exec"))) = 0;

void count_locked(CUcontext cu, int delta) {
    Running *entry = nullptr, *free_slot = nullptr;
    for (Running &e : g_running) {
        if (e.n > 0 && e.cu == cu) {
            entry = &e;
            break;
        }
        if (e.n == 0 && !free_slot) free_slot = &e;
    }
    if (entry)
        entry->n += delta;
    else if (delta > 0 && free_slot)
        *free_slot = {cu, delta};
    g_total += delta;  // counted even when the table is full
}

int on_locked(CUcontext cu) {
    for (const Running &e : g_running)
        if (e.n > 0 && e.cu == cu) return e.n;
    return 0;
}

// Begins a quiet call (the lock held by the caller, g_quiet counted there)
// and ends one.
void quiet_begin(bool clear) {
    t_quiet++;
    if (clear) t_clear++;
}

void quiet_end(bool clear) {
    t_quiet--;
    if (clear) t_clear--;
    SpinLock lock(g_lock);
    g_quiet--;
}

// Runs the releases of list as one quiet call, counted in g_quiet by the caller.
void run_releases(IdleRelease *list) {
    quiet_begin(true);
    while (list) {
        IdleRelease *next = list->next;
        list->run(list->owner);
        list = next;
    }
    quiet_end(true);
}

}  // namespace

cw_status persistent_start(CUcontext cu, const char *what) {
    // On the driver's callback thread (a HOST_FUNC future's callback) CUDA
    // allows no CUDA call; and a quiet call on another thread (a context
    // synchronize) may be waiting for this very host function to return.
    if (future_in_host_fn())
        return fail(CW_ERROR_NOT_PERMITTED,
                    "%s inside a HOST_FUNC future's callback is refused: it runs on the driver's callback thread, "
                    "where no CUDA call is allowed, and a call on another thread may be waiting for it (launch from "
                    "another thread)",
                    what);
    if (t_quiet > 0)
        return fail(CW_ERROR_INVALID_STATE,
                    "%s from inside a call that waits until no kernel runs on the device (a capture function "
                    "of a loop being built, for one) is refused: the launch would wait for that call to return, "
                    "and the call for the launch",
                    what);
    {
        SpinLock lock(g_lock);
        count_locked(cu, +1);
        if (g_quiet == 0) return CW_SUCCESS;
    }
    // Quiet calls began before this count: they end by themselves, and no
    // other begins now (releases wait, loads are refused).
    g_launch_waits.fetch_add(1, std::memory_order_relaxed);
    for (unsigned spins = 0;; spins++) {
        {
            SpinLock lock(g_lock);
            if (g_quiet == 0) return CW_SUCCESS;
        }
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, nullptr);
        }
    }
}

void persistent_stop(CUcontext cu) {
    IdleRelease *ready = nullptr;
    {
        SpinLock lock(g_lock);
        count_locked(cu, -1);
        if (g_total == 0 && g_releases) {
            ready = g_releases;
            g_releases = nullptr;
            g_quiet++;  // in the same step: a launch from now on waits for them
        }
    }
    if (!ready) return;
    if (IdleHook h = g_idle_released_hook.load(std::memory_order_acquire)) h(g_idle_hook_arg.load());
    run_releases(ready);
}

int persistent_on(CUcontext cu) {
    SpinLock lock(g_lock);
    return on_locked(cu);
}

int persistent_running() {
    SpinLock lock(g_lock);
    return g_total;
}

void release_when_idle(IdleRelease *rel) {
    {
        SpinLock lock(g_lock);
        if (g_total > 0 && t_clear == 0) {
            rel->next = g_releases;
            g_releases = rel;
            return;
        }
        g_quiet++;
    }
    rel->next = nullptr;
    run_releases(rel);
}

QuietCall::~QuietCall() {
    if (in_) quiet_end(clear_);
}

int QuietCall::enter(CUcontext cu) {
    {
        SpinLock lock(g_lock);
        const bool clear = t_clear > 0 || g_total == 0;
        if (!clear) {
            const int n = cu ? on_locked(cu) : g_total;
            if (n > 0) return n;
        }
        g_quiet++;
        clear_ = clear;
    }
    in_ = true;
    quiet_begin(clear_);
    if (IdleHook h = g_idle_checked_hook.load(std::memory_order_acquire)) h(g_idle_hook_arg.load());
    return 0;
}

cw_status refuse_load_while_persistent(QuietCall &q, const char *what) {
    const int n = q.enter(nullptr);
    if (n == 0) return CW_SUCCESS;
    return fail(CW_ERROR_INVALID_STATE,
                "%s loads code, and loading waits until no kernel runs on the device, which never happens while "
                "a GPU-resident loop runs (%d running in this process): load and build before launching loops, "
                "or tear them down first",
                what, n);
}

std::atomic<IdleHook> g_idle_released_hook{nullptr}, g_idle_checked_hook{nullptr};
std::atomic<void *> g_idle_hook_arg{nullptr};

unsigned long idle_launch_waits() { return g_launch_waits.load(std::memory_order_relaxed); }

}  // namespace core
}  // namespace cw
