/* SPDX-License-Identifier: BSD-2-Clause */
// Kernels used by the GPU tests and the benchmarks. Compiled ahead of time by
// tools/gen-test-kernels.sh into test_kernels_fatbin.h (committed), so that
// neither CI nor the tests need nvcc or NVRTC.
#include <cuda_device_runtime_api.h>  // cudaGraphSetConditional (resolved by the driver at load)
#include <stdint.h>

#include "../../include/cuweave/resident_device.h"

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void spin_ns(long long ns) {
    unsigned long long end = now_ns() + (unsigned long long)ns;
    while (now_ns() < end) {
    }
}

extern "C" {

// Does nothing: for launch and completion latency.
__global__ void cw_empty() {}

// Spins for ns nanoseconds, then writes value to *p: the slow writer.
__global__ void cw_slow_write(int *p, int value, long long ns) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        spin_ns(ns);
        *(volatile int *)p = value;
        __threadfence_system();
    }
}

// Waits ns (thread 0 of each block), then fills n bytes at p with value:
// a slow producer of a frame on the host program's stream (test_gpu_embed).
__global__ void cw_fill_u8_slow(unsigned char *p, unsigned long long n, unsigned value, long long ns) {
    if (ns) {
        if (threadIdx.x == 0) spin_ns(ns);
        __syncthreads();
    }
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = (unsigned char)value;
}

// Copies *src to *dst: the reader.
__global__ void cw_copy_int(const int *src, int *dst) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *dst = *(volatile const int *)src;
}

// Records the GPU clock at start and end of a spin of ns nanoseconds:
// out[0] = start, out[1] = end. For overlap checks.
__global__ void cw_stamp(unsigned long long *out, long long ns) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = now_ns();
        spin_ns(ns);
        out[1] = now_ns();
    }
}

// Adds 1 to *p after a spin: futures completing in order.
__global__ void cw_spin_add(int *p, long long ns) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        spin_ns(ns);
        atomicAdd(p, 1);
    }
}

// Writes through a bad pointer: a sticky device fault (illegal address).
__global__ void cw_fault(int *bad) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *(volatile int *)bad = 1;
}

// Spins ns nanoseconds in every block, then writes the SM the block ran on
// to out[blockIdx.x]: which SMs a stream's (partition's) kernels land on.
__global__ void cw_smid(unsigned *out, long long ns) {
    if (threadIdx.x == 0) {
        spin_ns(ns);
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        out[blockIdx.x] = id;
    }
}

// A hog: every thread of every block waits ns nanoseconds on the global
// timer (no arithmetic), then block 0 thread 0 adds 1 to *sink. Launched with
// enough blocks it fills the GPU (or a partition) for ns.
__global__ void cw_hog(unsigned long long *sink, long long ns) {
    spin_ns(ns);
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(sink, 1ull);
}

// Tiny latency-critical kernel (1 block): increments *p.
__global__ void cw_small(int *p) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *p += 1;
}

// *p = *p * 3 + v: a chain of these gives a result that depends on the
// order the kernels ran in and on every argument.
__global__ void cw_mul_add(int *p, int v) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *p = *p * 3 + v;
}

// The body of a WHILE node: counts its runs in *count and keeps the loop
// going while the count is below *limit (read on the GPU).
__global__ void cw_while_body(cudaGraphConditionalHandle h, int *count, const int *limit) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int c = *count + 1;
        *count = c;
        cudaGraphSetConditional(h, c < *limit ? 1u : 0u);
    }
}

// Sets a conditional node's value to (*value > 0), for IF nodes and for a
// WHILE node that may run zero times.
__global__ void cw_set_cond(cudaGraphConditionalHandle h, const int *value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(h, *value > 0 ? 1u : 0u);
}

// ---- the resident loop (tests and bench_resident) ---------------------------

// A workload step that reads the loop's input slot (a u32) and the request
// number, and writes out[0] = v * 3 + 1, out[1] = seq (out may be mapped
// host memory), and log[seq - 1] = (v * 3 + 1) << 32 | seq when
// seq <= log_cap (device memory: what each request was served with).
__global__ void cw_res_apply(const cw_resident_ctl *ctl, unsigned *out, unsigned long long *log,
                             unsigned long long log_cap) {
    if (cw_resident_skip(ctl)) return;  // a loop gated by kernels: nothing to serve
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const unsigned long long seq = cw_resident_sequence(ctl);
        const unsigned v = *(const volatile unsigned *)cw_resident_input(ctl);
        ((volatile unsigned *)out)[0] = v * 3u + 1u;
        ((volatile unsigned *)out)[1] = (unsigned)seq;
        __threadfence_system();  // host memory: visible before anything the GPU writes later
        if (seq >= 1 && seq <= log_cap) log[seq - 1] = ((unsigned long long)(v * 3u + 1u) << 32) | (unsigned)seq;
    }
}

// Appends the request number to a list: seqs[(*count)++] = seq (one thread).
__global__ void cw_res_record(const cw_resident_ctl *ctl, unsigned *count, unsigned long long *seqs,
                              unsigned cap) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        unsigned c = *count;
        if (c < cap) seqs[c] = cw_resident_sequence(ctl);
        *count = c + 1;
    }
}

// ---- gate FUSED: the workload's kernels poll and signal themselves ----------

// First kernel: takes the request (cw_resident_begin, every thread of every
// block); every block writes buf[1 + b] = v + b (v: the request's input),
// block 0 buf[0] = the request's number.
__global__ void cw_fus_first(cw_resident_ctl *ctl, unsigned *buf) {
    if (cw_resident_begin(ctl)) return;  // the loop stops
    if (threadIdx.x == 0) {
        const unsigned v = *(const volatile unsigned *)cw_resident_input(ctl);
        buf[1 + blockIdx.x] = v + blockIdx.x;
        if (blockIdx.x == 0) buf[0] = (unsigned)cw_resident_sequence(ctl);
    }
}

// Last kernel: every block sums what every block of the first wrote and
// writes out[2 + b] = sum + b; block 0 out[0] = buf[0] (the number the first
// kernel saw), out[1] = sum, counts the request and logs its number
// (log[count] = seq); then cw_resident_end (every thread of every block).
__global__ void cw_fus_last(cw_resident_ctl *ctl, const unsigned *buf, unsigned blocks, unsigned *out,
                            unsigned *count, unsigned long long *log, unsigned cap) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0) {
        unsigned sum = 0;
        for (unsigned b = 0; b < blocks; b++) sum += buf[1 + b];
        ((volatile unsigned *)out)[2 + blockIdx.x] = sum + blockIdx.x;
        if (blockIdx.x == 0) {
            ((volatile unsigned *)out)[0] = buf[0];
            ((volatile unsigned *)out)[1] = sum;
            const unsigned c = atomicAdd(count, 1u);
            if (c < cap) log[c] = cw_resident_sequence(ctl);
        }
    }
    cw_resident_end(ctl);
}

// The whole workload in one kernel: begins and ends; out[0] = v * 3 + 1,
// out[1] = seq.
__global__ void cw_fus_only(cw_resident_ctl *ctl, unsigned *out) {
    if (cw_resident_begin(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const unsigned v = *(const volatile unsigned *)cw_resident_input(ctl);
        ((volatile unsigned *)out)[0] = v * 3u + 1u;
        ((volatile unsigned *)out)[1] = (unsigned)cw_resident_sequence(ctl);
    }
    cw_resident_end(ctl);
}

// A data-ready handler: data is ready when the producer's count (*produced,
// written by another kernel) is ahead of what was consumed; then it
// consumes one.
__global__ void cw_res_handler(cw_resident_ctl *ctl, const unsigned *produced, unsigned *consumed) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const unsigned p = *(const volatile unsigned *)produced;
        if (p > *consumed) {
            *consumed += 1;
            cw_resident_mark_data_ready(ctl);
        } else {
            cw_resident_mark_data_not_ready(ctl);
        }
    }
}

// The same handler, starting as a workload kernel does, with
// cw_resident_skip (allowed in a handler: nonzero only when the loop stops).
__global__ void cw_res_handler_skip(cw_resident_ctl *ctl, const unsigned *produced, unsigned *consumed) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const unsigned p = *(const volatile unsigned *)produced;
        if (p > *consumed) {
            *consumed += 1;
            cw_resident_mark_data_ready(ctl);
        } else {
            cw_resident_mark_data_not_ready(ctl);
        }
    }
}

// A GPU producer: n times, wait gap_ns, then add one to *produced.
__global__ void cw_res_produce(unsigned *produced, unsigned n, long long gap_ns) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        for (unsigned i = 0; i < n; i++) {
            spin_ns(gap_ns);
            atomicAdd(produced, 1u);
            __threadfence();
        }
    }
}

// The three trivial operators of bench_resident: (in + 1) * 3 + 7.
__global__ void cw_op_load(const unsigned *in, unsigned *buf) {
    if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] = *(const volatile unsigned *)in + 1u;
}
__global__ void cw_op_mul(unsigned *buf) {
    if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] = buf[0] * 3u;
}
__global__ void cw_op_store(const unsigned *buf, unsigned *out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *(volatile unsigned *)out = buf[0] + 7u;
}

// The same three operators for a loop gated by kernels
// (CW_RESIDENT_GATE_KERNELS): each returns at once when the iteration
// serves nothing.
__global__ void cw_gop_load(const cw_resident_ctl *ctl, const unsigned *in, unsigned *buf) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] = *(const volatile unsigned *)in + 1u;
}
__global__ void cw_gop_mul(const cw_resident_ctl *ctl, unsigned *buf) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] = buf[0] * 3u;
}
__global__ void cw_gop_store(const cw_resident_ctl *ctl, const unsigned *buf, unsigned *out) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) *(volatile unsigned *)out = buf[0] + 7u;
}

// The same three operators for a loop with gate FUSED (issue 24): the first
// takes the request (cw_resident_begin), the middle one is cw_gop_mul, the
// last reports the result (cw_resident_end): a request is these three
// kernels and nothing else.
__global__ void cw_fop_load(cw_resident_ctl *ctl, const unsigned *in, unsigned *buf) {
    if (cw_resident_begin(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] = *(const volatile unsigned *)in + 1u;
}
__global__ void cw_fop_store(cw_resident_ctl *ctl, const unsigned *buf, unsigned *out) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) *(volatile unsigned *)out = buf[0] + 7u;
    cw_resident_end(ctl);
}

// The floor: one persistent polling kernel (one thread) that serves the
// same three operators. doorbell and stop are written by the host (mapped
// memory); done is written here after out.
__global__ void cw_op_persistent(const unsigned long long *doorbell, const unsigned *stop, const unsigned *in,
                                 unsigned *out, unsigned long long *done) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long served = *(volatile unsigned long long *)done;
    for (;;) {
        const unsigned long long d = *(const volatile unsigned long long *)doorbell;
        if (d > served) {
            unsigned v = *(const volatile unsigned *)in + 1u;
            v = v * 3u;
            *(volatile unsigned *)out = v + 7u;
            __threadfence_system();
            served += 1;
            *(volatile unsigned long long *)done = served;
        } else if (*(const volatile unsigned *)stop) {
            return;
        }
    }
}

// ---- pipeline operators (test_gpu_flow, bench_pipeline, examples) --------
// Each spins ns in thread 0 of every block before touching data (a slow
// operator), and writes the GPU clock at its start and end to stamp[0..1]
// (stamp may be NULL): device timestamps that show which operators overlap.
// (__syncwarp before each barrier: the warp of thread 0 arrives together,
// which compute-sanitizer's synccheck asks for. Its mask names the lanes the
// warp has: a block of fewer than 32 threads has a partial warp, and a full
// mask there is itself a divergent barrier, which synccheck reported when
// test_gpu_sweep launched these with one thread.)
__device__ __forceinline__ unsigned warp_lanes() {
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned left = threads - (tid & ~31u);
    return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}
__device__ __forceinline__ void pl_begin(long long ns, unsigned long long *stamp) {
    if (stamp && threadIdx.x == 0 && blockIdx.x == 0) stamp[0] = now_ns();
    if (ns && threadIdx.x == 0) spin_ns(ns);
    __syncwarp(warp_lanes());
    __syncthreads();
}
__device__ __forceinline__ void pl_end(unsigned long long *stamp) {
    __syncwarp(warp_lanes());
    __syncthreads();
    if (stamp && threadIdx.x == 0 && blockIdx.x == 0) {
        __threadfence();
        stamp[1] = now_ns();
    }
}

// out[i] = value + i.
__global__ void cw_pl_fill(unsigned *out, unsigned n, unsigned value, long long ns, unsigned long long *stamp) {
    pl_begin(ns, stamp);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value + i;
    pl_end(stamp);
}

// out[i] = in[i] * mul + add.
__global__ void cw_pl_scale(const unsigned *in, unsigned *out, unsigned n, unsigned mul, unsigned add, long long ns,
                            unsigned long long *stamp) {
    pl_begin(ns, stamp);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * mul + add;
    pl_end(stamp);
}

// out[i] = a[i] + b[i].
__global__ void cw_pl_sum2(const unsigned *a, const unsigned *b, unsigned *out, unsigned n, long long ns,
                           unsigned long long *stamp) {
    pl_begin(ns, stamp);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a[i] + b[i];
    pl_end(stamp);
}

// *sum = the sum of in[0..n) (64-bit), after a spin: a slow reader (the sink
// of the buffer-race test reads only after ns).
__global__ void cw_pl_reduce(const unsigned *in, unsigned n, unsigned long long *sum, long long ns) {
    if (ns && threadIdx.x == 0) spin_ns(ns);
    __syncwarp(warp_lanes());
    __syncthreads();
    unsigned long long local = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) local += in[i];
    atomicAdd(sum, local);
}

// Absolute difference of two byte frames, summed into *sad (a video metric).
__global__ void cw_pl_sad(const unsigned char *a, const unsigned char *b, unsigned n, unsigned long long *sad) {
    unsigned long long local = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int d = (int)a[i] - (int)b[i];
        local += (unsigned long long)(d < 0 ? -d : d);
    }
    atomicAdd(sad, local);
}

// out[i] = (in[i-1] + 2 in[i] + in[i+1]) / 4 on a byte frame (a 1-D blur).
__global__ void cw_pl_blur(const unsigned char *in, unsigned char *out, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned l = in[i > 0 ? i - 1 : i], c = in[i], r = in[i + 1 < n ? i + 1 : i];
        out[i] = (unsigned char)((l + 2 * c + r) / 4);
    }
}

// Zeroes n 64-bit words.
__global__ void cw_pl_zero64(unsigned long long *p, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = 0;
}

}  // extern "C"
