/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: persistent work counted per driver context, and the
// releases that wait until none runs (idle.hpp).
#include "core/idle.hpp"

#include <atomic>

#include "base/sync.hpp"
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
IdleRelease *g_releases;       // queued while work runs
std::atomic<int> g_lock{0};

void run_releases(IdleRelease *list) {
    while (list) {
        IdleRelease *next = list->next;
        list->run(list->owner);
        list = next;
    }
}

}  // namespace

void persistent_note(CUcontext cu, int delta) {
    IdleRelease *ready = nullptr;
    {
        SpinLock lock(g_lock);
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
        if (g_total == 0) {
            ready = g_releases;
            g_releases = nullptr;
        }
    }
    run_releases(ready);
}

int persistent_on(CUcontext cu) {
    SpinLock lock(g_lock);
    for (const Running &e : g_running)
        if (e.n > 0 && e.cu == cu) return e.n;
    return 0;
}

int persistent_running() {
    SpinLock lock(g_lock);
    return g_total;
}

void release_when_idle(IdleRelease *rel) {
    {
        SpinLock lock(g_lock);
        if (g_total > 0) {
            rel->next = g_releases;
            g_releases = rel;
            return;
        }
    }
    rel->run(rel->owner);
}

cw_status refuse_load_while_persistent(const char *what) {
    const int n = persistent_running();
    if (n == 0) return CW_SUCCESS;
    return fail(CW_ERROR_INVALID_STATE,
                "%s loads code, and loading waits until no kernel runs on the device, which never happens while "
                "a GPU-resident loop runs (%d running in this process): load and build before launching loops, "
                "or tear them down first",
                what, n);
}

}  // namespace core
}  // namespace cw
