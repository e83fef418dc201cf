// SPDX-License-Identifier: BSD-2-Clause
// compute-sanitizer's racecheck against a named barrier over part of a block.
//
// Thread 0 writes two shared words, __syncthreads(), every thread reads
// them: ordered by the barrier, no race. Variant 1 adds, in the body, a
// `bar.sync 1, 128` over the block's first 128 threads of 256 (what
// cw_fused_tile_sync does for a tile narrower than the block). On the H200
// (CUDA 13.0, 2026-12-02) racecheck reports variant 0 clean and variant 1
// with a hazard between thread 0's write and the other threads' read of
// `go` across the __syncthreads() between them: racecheck misreads the
// block-wide barrier once a named barrier with a count has run.
//
//   nvcc -arch=sm_90 -lineinfo -o rx tools/probes/racecheck_named_barrier.cu
//   compute-sanitizer --tool racecheck ./rx 0    # 0 hazards
//   compute-sanitizer --tool racecheck ./rx 1    # 1 hazard (the write of go, the read after __syncthreads)
#include <cstdio>
#include <cstdlib>

__device__ unsigned out[1024];

__global__ void k(int variant, int iters) {
    __shared__ unsigned go, val;
    __shared__ unsigned sh[256];
    for (int i = 0;; i++) {
        __syncthreads();
        if (threadIdx.x == 0) {
            go = i < iters ? 1u : 2u;
            val = i;
        }
        __syncthreads();
        if (go == 2u) break;
        const unsigned v = val;
        if (variant == 1 && threadIdx.x < 128) {
            sh[threadIdx.x] = v + threadIdx.x;
            asm volatile("bar.sync 1, %0;" ::"r"(128) : "memory");
            if (threadIdx.x == 0) {
                unsigned s = 0;
                for (int j = 0; j < 128; j++) s += sh[j];
                out[blockIdx.x] += s;
            }
        } else if (variant == 0) {
            out[blockIdx.x * 256 % 1024] += v;
        }
        __syncthreads();
    }
}

int main(int argc, char **argv) {
    const int v = argc > 1 ? atoi(argv[1]) : 1;
    k<<<4, 256>>>(v, 50);
    const cudaError_t e = cudaDeviceSynchronize();
    printf("variant %d: %s\n", v, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
