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
//        or, gate FUSED: `unroll` copies of the workload (cw_resident_begin in
//        its first kernel, cw_resident_end in its last), then loop
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

// The poll's and the signal's work are cw__res_poll and cw__res_signal
// (include/cuweave/resident_device.h), shared with cw_resident_begin and
// cw_resident_end, which do the same work inside the workload's kernels
// (gate CW_RESIDENT_GATE_BEGIN_END).

// Before the WHILE node: starts a launch. Keeps the poll's settings in the
// device block for cw_resident_begin and cw_resident_end.
__global__ void cwk_res_arm(cw_res_host *h, cw_res_dev *d, unsigned long long timeout_ns, unsigned sleep_ns,
                            unsigned spin_ns, unsigned flags) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    d->host = (unsigned long long)h;
    d->timeout_ns = timeout_ns;
    d->sleep_ns = sleep_ns;
    d->spin_ns = spin_ns;
    d->flags = flags;
    d->decided = 0u;
    d->ended = 0u;
    cw__res_arm(h, d);  // last: it announces the launch to the host
}

// Trace: the next value of the loop's trace clock, written to a stage's
// mark word (mapped host memory). The clock's values are the global timer's
// nanoseconds where they are new, else one past the last value taken: every
// mark gets a value of its own, later marks larger ones, and
// cw_trace_record_resident reads them as times. atomicMax takes `now` when
// it is past every value taken so far; else atomicAdd takes the next one.
// Either way one thread moves the clock to the value it takes, so no two
// marks share one. No fence: the loop's own kernels store the marks of the
// workload and handler stages this way (cwk_res_mark fences its own).
static __device__ __forceinline__ void res_mark(cw_res_dev *d, unsigned long long *mark) {
    const unsigned long long now = cw__res_now();
    const unsigned long long prev = atomicMax(&d->trace_clock, now);
    const unsigned long long c = now > prev ? now : atomicAdd(&d->trace_clock, 1ull) + 1ull;
    *(volatile unsigned long long *)mark = c;
}

// First in each iteration: the poll (cw__res_poll), then the graph's
// conditions: the IF node opens for a request, the WHILE node ends when the
// loop stops. Traced (open_mark not NULL): the begin of the stage the poll
// opens (the data-ready handler's, else the workload's) when it opens one.
__global__ void cwk_res_poll(const cw_res_host *h, cw_res_dev *d, cudaGraphConditionalHandle loop,
                             cudaGraphConditionalHandle work, unsigned long long timeout_ns, unsigned sleep_ns,
                             unsigned spin_ns, unsigned flags, unsigned long long *open_mark) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned got = cw__res_poll(h, d, timeout_ns, sleep_ns, spin_ns, flags);
    if (open_mark && got != 0u) res_mark(d, open_mark);
    // With a handler the workload stays closed until the gate, after the
    // handler, opens it or not.
    if (!(flags & CW_RES_GATE_KERNELS)) cudaGraphSetConditional(work, got == 1u ? 1u : 0u);
    if (got == 0u) cudaGraphSetConditional(loop, 0u);
}

// Opens (1) or closes (0) this iteration's workload: the IF node's value, or
// the skip word the workload's kernels read.
static __device__ __forceinline__ void res_open(cw_res_dev *d, cudaGraphConditionalHandle work, unsigned open,
                                                unsigned flags) {
    d->pub.skip = open ? 0u : 1u;
    if (!(flags & CW_RES_GATE_KERNELS)) cudaGraphSetConditional(work, open);
}

// With a data-ready handler, after it: serves a request when the handler
// marked data ready. Traced: the handler's end (close_mark) when it ran, and
// the workload's begin (open_mark) when the gate opens it.
__global__ void cwk_res_gate(cw_res_dev *d, cudaGraphConditionalHandle work, unsigned flags,
                             unsigned long long *close_mark, unsigned long long *open_mark) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (close_mark && !d->stopped) res_mark(d, close_mark);
    if (!d->stopped && *(volatile unsigned *)&d->pub.ready) {
        const unsigned long long seq = d->started + 1ull;
        d->started = seq;
        d->pub.seq = seq;
        d->t_start = cw__res_now();
        d->idle = 0u;
        d->backoff_ns = 0u;
        if (open_mark) res_mark(d, open_mark);
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
// result signal (after a system-wide fence with sync_with_host). Traced: the
// workload's end (close_mark) first, so that the fence covers it too.
__global__ void cwk_res_signal(cw_res_host *h, cw_res_dev *d, unsigned flags, unsigned long long *close_mark) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (d->pub.skip) return;  // gated by kernels: nothing was served
    if (close_mark) res_mark(d, close_mark);
    cw__res_signal(h, d, flags);
}

// Gate FUSED: last in the WHILE body (once per `unroll` requests). The
// workload's cw_resident_begin took the requests and stops the loop by
// setting d->stopped (the poll's stop); this ends the WHILE node then.
__global__ void cwk_res_loop(const cw_res_dev *d, cudaGraphConditionalHandle loop) {
    res_wait_previous();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (*(const volatile unsigned *)&d->stopped) cudaGraphSetConditional(loop, 0u);
}

// Trace: a stage a capture function began (cw_resident_stage_begin,
// cw_resident_stage_end) begins or ends. Takes the next value of the loop's
// trace clock (res_mark) and writes it to the stage's word in mapped host
// memory, fenced, so that the host can read which stages had begun and not
// ended after a fault made the context unusable.
__global__ void cwk_res_mark(cw_res_dev *d, unsigned long long *mark) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    res_mark(d, mark);
    __threadfence_system();
}

// After the WHILE node: says why and when the loop stopped.
__global__ void cwk_res_exit(cw_res_host *h, cw_res_dev *d) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    cw__res_exit(h, d);
}

}  // extern "C"
