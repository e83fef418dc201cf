/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: the monotonic clock, a pause for spin loops, and a spin
// lock for short critical sections. Nothing here knows CUDA.
#pragma once

#include <atomic>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

namespace cw {

// The monotonic clock, in nanoseconds (for timeouts and spin windows).
inline int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The clock reading (now_ns) timeout_us microseconds after start_ns, or -1
// for no limit: a negative timeout, and one too large to represent (one that
// would end past INT64_MAX ns of the clock, some 292 years of uptime) mean no
// limit. Never overflows (timeout_us * 1000 would, past 9.2e15 us).
inline int64_t deadline_after_us(int64_t start_ns, int64_t timeout_us) {
    if (timeout_us < 0 || timeout_us > (INT64_MAX - start_ns) / 1000) return -1;
    return start_ns + timeout_us * 1000;
}

// Initialises a condition variable whose timed waits use the monotonic clock.
inline void cond_init_monotonic(pthread_cond_t *c) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

// A pause for spin loops (no-op where the CPU has no such hint).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// A spin lock for the short, rare critical sections of creation paths.
class SpinLock {
  public:
    explicit SpinLock(std::atomic<int> &l) : l_(l) {
        while (l_.exchange(1, std::memory_order_acquire)) {
        }
    }
    ~SpinLock() { l_.store(0, std::memory_order_release); }
    SpinLock(const SpinLock &) = delete;
    SpinLock &operator=(const SpinLock &) = delete;

  private:
    std::atomic<int> &l_;
};

}  // namespace cw
