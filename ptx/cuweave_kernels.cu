/* SPDX-License-Identifier: BSD-2-Clause */
// The library's own kernels. Compiled at build time (nvcc: cubins for the
// architectures built for, plus PTX) or taken from the checked-in PTX next to
// this file (cuweave_kernels.ptx, made by tools/gen-ptx.sh), and embedded in
// libcuweave; loaded with the library API on first use. NVRTC is never
// needed for them. The argument lists are part of the API (cw_builtin in
// include/cuweave/jit.h).
#include <cuda_device_runtime_api.h>  // cudaGraphSetConditional, resolved by the driver at load
#include <stdint.h>

#include "../src/graph/resident_abi.h"  // the resident loop's memory layout, shared with src/graph/

extern "C" {

// dst[i] = value for i < count; any grid shape (grid-stride loop).
__global__ void cwk_fill_u32(uint32_t *dst, uint32_t value, uint64_t count) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) dst[i] = value;
}

// *dst = value from one thread, then a system-wide fence so that a host
// reading mapped memory sees it in order with what the stream did before.
__global__ void cwk_write_u32(uint32_t *dst, uint32_t value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *(volatile uint32_t *)dst = value;
        __threadfence_system();
    }
}

// *dst = the GPU's global timer (nanoseconds).
__global__ void cwk_timestamp(uint64_t *dst) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        *dst = t;
    }
}

// Sets a graph condition to (*value != 0).
__global__ void cwk_set_cond(cudaGraphConditionalHandle handle, const uint32_t *value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(handle, *value != 0 ? 1u : 0u);
}

// ---- the GPU-resident loop (src/resident.cpp builds the graph) -------------
//
// top:   arm -> WHILE(loop) { body } -> exit
// body:  `unroll` copies of   poll -> [handler -> gate] -> IF(work) { workload -> signal }
//        or, gated by kernels: poll -> [handler -> gate] -> workload -> signal
//        (pub.skip tells the workload's kernels and the signal to do nothing)
//
// One thread of one block runs each of these. h is mapped host memory (the
// doorbell and the results), d is the loop's device block.

// With the loop's overlap setting the kernel before this one in the
// iteration may still run: wait for it (programmatic dependent launch; a
// no-op when launched the ordinary way). Compiled out below compute 9.0,
// where the library leaves the edges into these kernels ordinary (it checks
// the PTX version of the code it loaded).
static __device__ __forceinline__ void res_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ unsigned long long res_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Sleeps about ns nanoseconds (__nanosleep sleeps at most about 1 ms and
// may wake early: the global timer decides).
static __device__ void res_sleep(unsigned long long ns) {
    const unsigned long long end = res_now() + ns;
    for (;;) {
        const unsigned long long now = res_now();
        if (now >= end) return;
        const unsigned long long left = end - now;
        __nanosleep(left > 1000000ull ? 1000000u : (unsigned)left);
    }
}

// What an idle check is followed by: nothing (spin), a fixed sleep, or the
// adaptive policy (no sleep within spin_ns of the last result, then 1 us,
// 2 us, 4 us, ... up to sleep_ns).
static __device__ void res_pause(cw_res_dev *d, unsigned long long now, unsigned sleep_ns, unsigned spin_ns,
                                 unsigned flags) {
    if (sleep_ns == 0u) return;
    if (!(flags & CW_RES_ADAPTIVE)) {
        res_sleep(sleep_ns);
        return;
    }
    if (now - d->last_done < (unsigned long long)spin_ns) return;
    unsigned b = d->backoff_ns;
    b = b == 0u ? 1000u : b * 2u;
    if (b > sleep_ns) b = sleep_ns;
    d->backoff_ns = b;
    res_sleep(b);
}

// Reads the host-written line in one 16-byte load: the doorbell and the stop word.
static __device__ __forceinline__ void res_read_host(const cw_res_host *h, unsigned long long *requested,
                                                     unsigned *stop) {
    unsigned long long a, b;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(h) : "memory");
    *requested = a;
    *stop = (unsigned)(b & 0xffffffffull);
}

// Stops the loop: this iteration does no work and the WHILE node ends.
static __device__ void res_stop(cw_res_dev *d, unsigned reason, cudaGraphConditionalHandle loop,
                                cudaGraphConditionalHandle work, unsigned flags) {
    d->stopped = 1u;
    d->reason = reason;
    d->pub.skip = 1u;
    if (!(flags & CW_RES_GATE_KERNELS)) cudaGraphSetConditional(work, 0u);
    cudaGraphSetConditional(loop, 0u);
}

// Opens (1) or closes (0) this iteration's workload: the IF node's value, or
// the skip word the workload's kernels read.
static __device__ __forceinline__ void res_open(cw_res_dev *d, cudaGraphConditionalHandle work, unsigned open,
                                                unsigned flags) {
    d->pub.skip = open ? 0u : 1u;
    if (!(flags & CW_RES_GATE_KERNELS)) cudaGraphSetConditional(work, open);
}

// Before the WHILE node: starts a launch.
__global__ void cwk_res_arm(cw_res_host *h, cw_res_dev *d) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long now = res_now();
    const unsigned long long base = *(volatile unsigned long long *)&h->base;
    d->t0 = now;
    d->last_done = now;
    d->stopped = 0u;
    d->reason = 0u;
    d->backoff_ns = 0u;
    d->idle = 0u;
    d->started = base;
    d->pub.seq = base;
    d->pub.ready = 0u;
    d->pub.skip = 1u;
    d->epoch = *(volatile unsigned *)&h->epoch;
    __threadfence_system();
    *(volatile unsigned *)&h->running_epoch = d->epoch;
}

// First in each iteration. Host requests: waits (spinning or sleeping as
// set) until the doorbell is ahead of the requests taken, takes one and
// opens the IF node; or stops on the stop word or the timeout. With a
// data-ready handler: checks stop and timeout, sleeps when the last
// iteration found nothing, and clears the ready mark for the handler.
__global__ void cwk_res_poll(const cw_res_host *h, cw_res_dev *d, cudaGraphConditionalHandle loop,
                             cudaGraphConditionalHandle work, unsigned long long timeout_ns, unsigned sleep_ns,
                             unsigned spin_ns, unsigned flags) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (d->stopped) {
        res_open(d, work, 0u, flags);
        cudaGraphSetConditional(loop, 0u);
        return;
    }
    const unsigned long long started = d->started;
    for (bool first = true;; first = false) {
        unsigned long long requested;
        unsigned stop;
        res_read_host(h, &requested, &stop);
        const unsigned long long now = res_now();
        if (stop) return res_stop(d, CW_RES_EXIT_TEAR_DOWN, loop, work, flags);
        if (timeout_ns != 0ull && now - d->t0 >= timeout_ns)
            return res_stop(d, CW_RES_EXIT_TIMEOUT, loop, work, flags);
        if (flags & CW_RES_HANDLER) {
            if (first && d->idle) {
                res_pause(d, now, sleep_ns, spin_ns, flags);
                continue;  // check stop and timeout again after the sleep
            }
            // The handler runs next and may call cw_resident_skip: it sees
            // 0 (1 only when the loop stops). The workload stays closed
            // until the gate, after the handler, opens it or not.
            d->pub.ready = 0u;
            d->pub.skip = 0u;
            if (!(flags & CW_RES_GATE_KERNELS)) cudaGraphSetConditional(work, 0u);
            return;
        }
        if (requested > started) {
            d->started = started + 1ull;
            d->pub.seq = started + 1ull;
            d->t_start = now;
            d->backoff_ns = 0u;
            res_open(d, work, 1u, flags);
            return;
        }
        d->idle_polls += 1ull;
        res_pause(d, now, sleep_ns, spin_ns, flags);
    }
}

// With a data-ready handler, after it: serves a request when the handler
// marked data ready.
__global__ void cwk_res_gate(cw_res_dev *d, cudaGraphConditionalHandle work, unsigned flags) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (!d->stopped && *(volatile unsigned *)&d->pub.ready) {
        const unsigned long long seq = d->started + 1ull;
        d->started = seq;
        d->pub.seq = seq;
        d->t_start = res_now();
        d->idle = 0u;
        d->backoff_ns = 0u;
        res_open(d, work, 1u, flags);
    } else {
        if (!d->stopped) {
            d->idle_polls += 1ull;
            d->idle = 1u;
        }
        res_open(d, work, 0u, flags);
    }
}

// Last in a served iteration (gated by kernels: in every iteration, doing
// nothing when nothing was served): records the iteration's time and writes the
// result signal (after a system-wide fence with sync_with_host).
__global__ void cwk_res_signal(cw_res_host *h, cw_res_dev *d, unsigned flags) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (d->pub.skip) return;  // gated by kernels: nothing was served
    const unsigned long long now = res_now();
    const unsigned long long dur = now - d->t_start;
    const unsigned long long served = d->served;
    d->ring[served % CW_RES_RING] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;
    if (served == 0ull || dur < d->min_ns) d->min_ns = dur;
    if (dur > d->max_ns) d->max_ns = dur;
    d->served = served + 1ull;
    d->last_done = now;
    if (flags & CW_RES_SYNC_HOST) __threadfence_system();
    *(volatile unsigned long long *)&h->completed = d->pub.seq;
}

// Trace: a stage of the loop's graph begins or ends (cw_resident_stage_begin,
// cw_resident_stage_end). Takes the next value of the loop's trace clock and
// writes it to the stage's word in mapped host memory, fenced, so that the
// host can read which stages had begun and not ended after a fault made the
// context unusable. The clock's values are the global timer's nanoseconds
// where they are new, else one past the last value taken: every mark gets a
// value of its own, later marks larger ones, and cw_trace_record_resident
// reads them as times.
__global__ void cwk_res_mark(cw_res_dev *d, unsigned long long *mark) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long now = res_now();
    // atomicMax takes `now` when it is past every value taken so far; else
    // atomicAdd takes the next one. Either way one thread moves the clock to
    // the value it takes, so no two marks share one.
    const unsigned long long prev = atomicMax(&d->trace_clock, now);
    const unsigned long long c = now > prev ? now : atomicAdd(&d->trace_clock, 1ull) + 1ull;
    *(volatile unsigned long long *)mark = c;
    __threadfence_system();
}

// After the WHILE node: says why and when the loop stopped.
__global__ void cwk_res_exit(cw_res_host *h, cw_res_dev *d) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    *(volatile unsigned *)&h->exit_reason = d->reason;
    *(volatile unsigned long long *)&h->run_ns = res_now() - d->t0;
    __threadfence_system();
    *(volatile unsigned *)&h->exited_epoch = d->epoch;
}

}  // extern "C"
