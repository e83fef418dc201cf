/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave testing: the driver test seam. See seam.h.
#include "testing/seam.h"

#include <atomic>
#include <string.h>
#include <time.h>

#include "driver/driver.hpp"

namespace cw {
namespace {

Driver g_real;
void *g_real_ptr[DRV_ENTRY_COUNT];
std::atomic<unsigned long> g_calls[DRV_ENTRY_COUNT];
std::atomic<unsigned long> g_ok[DRV_ENTRY_COUNT];
std::atomic<unsigned long> g_all_calls{0};
std::atomic<unsigned long long> g_ns[DRV_ENTRY_COUNT];
std::atomic<int> g_timing{0};
// Calls made through the seam by this thread (never reset): for counting the
// calls of one stretch of code on one thread (cwi_seam_thread_calls).
thread_local unsigned long t_thread_calls = 0;

unsigned long long mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

std::atomic<int> g_fail_id{-2};  // -2 = disarmed
std::atomic<unsigned long> g_fail_nth{0};
std::atomic<unsigned long> g_fail_seen{0};
std::atomic<int> g_fail_result{0};
std::atomic<int> g_fired{0};
std::atomic<int> g_fired_id{-1};  // the entry the fault failed
// A function run inside every call of one entry, before the call reaches
// the driver (cwi_seam_hook).
std::atomic<int> g_hook_id{-2};  // -2 = none
std::atomic<void (*)(void *)> g_hook_fn{nullptr};
std::atomic<void *> g_hook_arg{nullptr};

// Decides whether this call (of entry id) is the one to fail.
bool should_fail(int id, CUresult *result) {
    g_calls[id].fetch_add(1, std::memory_order_relaxed);
    g_all_calls.fetch_add(1, std::memory_order_relaxed);
    t_thread_calls++;
    int target = g_fail_id.load(std::memory_order_acquire);
    if (target == -2 || (target != -1 && target != id)) return false;
    unsigned long n = g_fail_seen.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n != g_fail_nth.load(std::memory_order_relaxed)) return false;
    *result = g_fail_result.load(std::memory_order_relaxed);
    g_fired_id.store(id, std::memory_order_relaxed);
    g_fired.store(1, std::memory_order_release);
    return true;
}

template <int Id, typename F>
struct Wrap;

template <int Id, typename... A>
struct Wrap<Id, CUresult (*)(A...)> {
    static CUresult call(A... a) {
        CUresult injected;
        if (should_fail(Id, &injected)) return injected;
        if (g_hook_id.load(std::memory_order_acquire) == Id) {
            void (*fn)(void *) = g_hook_fn.load(std::memory_order_relaxed);
            if (fn) fn(g_hook_arg.load(std::memory_order_relaxed));
        }
        const bool timed = g_timing.load(std::memory_order_relaxed) != 0;
        const unsigned long long t0 = timed ? mono_ns() : 0;
        CUresult r = reinterpret_cast<CUresult (*)(A...)>(g_real_ptr[Id])(a...);
        if (timed) g_ns[Id].fetch_add(mono_ns() - t0, std::memory_order_relaxed);
        if (r == CUDA_SUCCESS) g_ok[Id].fetch_add(1, std::memory_order_relaxed);
        return r;
    }
};

void zero() {
    for (int i = 0; i < DRV_ENTRY_COUNT; i++) {
        g_calls[i].store(0);
        g_ok[i].store(0);
        g_ns[i].store(0);
    }
    g_all_calls.store(0);
    g_fail_id.store(-2);
    g_fail_nth.store(0);
    g_fail_seen.store(0);
    g_fired.store(0);
    g_fired_id.store(-1);
}

// The table the wrappers call through: the driver's as loaded.
void take_real() {
    g_real = driver_loaded();
#define CW_SEAM_PTR_(member, symbol, version, params) \
    g_real_ptr[DRV_##member] = reinterpret_cast<void *>(g_real.member);
    CW_DRIVER_REQUIRED(CW_SEAM_PTR_) CW_DRIVER_OPTIONAL(CW_SEAM_PTR_)
#undef CW_SEAM_PTR_
}

}  // namespace
}  // namespace cw

using namespace cw;

int cwi_seam_entry_count(void) { return DRV_ENTRY_COUNT; }
const char *cwi_seam_entry_name(int id) { return driver_entry_name(id); }

int cwi_seam_entry(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < DRV_ENTRY_COUNT; i++)
        if (strcmp(driver_entry_name(i), name) == 0) return i;
    return -1;
}

int cwi_seam_enable(void) {
    cw_status st = ensure_init();
    if (st != CW_SUCCESS) return st;
    zero();
    take_real();
    Driver t = g_real;
    // Optional entries the driver lacks stay NULL.
#define CW_SEAM_WRAP_(member, symbol, version, params) \
    if (g_real.member) t.member = &Wrap<DRV_##member, decltype(t.member)>::call;
    CW_DRIVER_REQUIRED(CW_SEAM_WRAP_) CW_DRIVER_OPTIONAL(CW_SEAM_WRAP_)
#undef CW_SEAM_WRAP_
    driver_install(t);
    return CW_SUCCESS;
}

void cwi_seam_disable(void) {
    if (ensure_init() == CW_SUCCESS) driver_install(driver_loaded());
}

void cwi_seam_reset(void) { zero(); }

void cwi_seam_fail(int id, unsigned long nth, int result) {
    g_fail_id.store(-2, std::memory_order_release);
    g_fail_seen.store(0);
    g_fired.store(0);
    g_fired_id.store(-1);
    if (nth == 0 || id < -1 || id >= DRV_ENTRY_COUNT) return;
    g_fail_nth.store(nth);
    g_fail_result.store(result);
    g_fail_id.store(id, std::memory_order_release);
}

void cwi_seam_hook(int id, void (*fn)(void *arg), void *arg) {
    g_hook_id.store(-2, std::memory_order_release);
    if (!fn || id < 0 || id >= DRV_ENTRY_COUNT) return;
    g_hook_fn.store(fn, std::memory_order_relaxed);
    g_hook_arg.store(arg, std::memory_order_relaxed);
    g_hook_id.store(id, std::memory_order_release);
}

int cwi_seam_fired(void) { return g_fired.load(std::memory_order_acquire); }

int cwi_seam_fired_entry(void) { return cwi_seam_fired() ? g_fired_id.load(std::memory_order_relaxed) : -1; }

unsigned long cwi_seam_calls(int id) {
    if (id == -1) return g_all_calls.load();
    if (id < 0 || id >= DRV_ENTRY_COUNT) return 0;
    return g_calls[id].load();
}

unsigned long cwi_seam_thread_calls(void) { return t_thread_calls; }

unsigned long cwi_seam_successes(int id) {
    if (id == -1) {
        unsigned long n = 0;
        for (int i = 0; i < DRV_ENTRY_COUNT; i++) n += g_ok[i].load();
        return n;
    }
    if (id < 0 || id >= DRV_ENTRY_COUNT) return 0;
    return g_ok[id].load();
}


void cwi_seam_timing(int on) { g_timing.store(on ? 1 : 0); }

unsigned long long cwi_seam_ns(int id) {
    if (id < 0) {
        unsigned long long t = 0;
        for (int i = 0; i < DRV_ENTRY_COUNT; i++) t += g_ns[i].load();
        return t;
    }
    return id < DRV_ENTRY_COUNT ? g_ns[id].load() : 0;
}
