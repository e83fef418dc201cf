// Kernels used by the GPU tests and the benchmarks. Compiled ahead of time by
// tools/gen-test-kernels.sh into test_kernels_fatbin.h (committed), so that
// neither CI nor the tests need nvcc or NVRTC.
#include <cuda_device_runtime_api.h>  // cudaGraphSetConditional (resolved by the driver at load)
#include <stdint.h>

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

}  // extern "C"
