// cuweave base: the monotonic clock, a pause for spin loops, and a spin
// lock for short critical sections. Nothing here knows CUDA.
#pragma once

#include <atomic>
#include <stdint.h>
#include <time.h>

namespace cw {

// The monotonic clock, in nanoseconds (for timeouts and spin windows).
inline int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
