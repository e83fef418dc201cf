/* SPDX-License-Identifier: BSD-2-Clause */
// Probe, not part of the library: plain CUDA (runtime API) asking whether
// compute-sanitizer's synccheck reports a barrier in a kernel that cannot
// diverge (one thread, or a full warp) when the kernel runs inside a
// conditional graph body, while the same kernel on a stream or in a plain
// graph gets no report. Each case runs in its own process so that the
// tool's summary belongs to one case.
// Build: nvcc -O2 -arch=sm_90 -o synccheck_cond synccheck_cond.cu
// Run:   compute-sanitizer --tool synccheck ./synccheck_cond CASE THREADS
//        CASE: stream | graph | while | if
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

// The lanes this thread's warp has (a partial warp in a block of < 32).
__device__ unsigned lanes() {
    unsigned left = blockDim.x - (threadIdx.x & ~31u);
    return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}

// Every thread reaches both barriers: nothing here can diverge.
__global__ void barrier_fill(unsigned *out, unsigned n, unsigned v) {
    __syncwarp(lanes());
    __syncthreads();
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] += v + i;
    __syncwarp(lanes());
    __syncthreads();
}

// Sets the WHILE handle: run *left more times.
__global__ void count_down(cudaGraphConditionalHandle h, unsigned *left) {
    unsigned l = *left;
    if (l) *left = l - 1;
    cudaGraphSetConditional(h, l > 1 ? 1u : 0u);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "while";
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    const unsigned n = 64, rounds = 3;
    unsigned *out = nullptr, *left = nullptr;
    CK(cudaMalloc(&out, n * sizeof(unsigned)));
    CK(cudaMalloc(&left, sizeof(unsigned)));
    CK(cudaMemset(out, 0, n * sizeof(unsigned)));
    CK(cudaMemcpy(left, &rounds, sizeof rounds, cudaMemcpyHostToDevice));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned expect_rounds = 1;
    if (!strcmp(mode, "stream")) {
        barrier_fill<<<1, threads, 0, s>>>(out, n, 7);
        CK(cudaGetLastError());
    } else {
        cudaGraph_t g;
        CK(cudaGraphCreate(&g, 0));
        cudaGraph_t body = g;
        cudaGraphConditionalHandle h = 0;
        if (!strcmp(mode, "while") || !strcmp(mode, "if")) {
            bool is_while = !strcmp(mode, "while");
            CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
            // (cudaGraphNodeParams has no default constructor: zeroed storage)
            alignas(cudaGraphNodeParams) unsigned char raw[sizeof(cudaGraphNodeParams)] = {};
            cudaGraphNodeParams &p = *reinterpret_cast<cudaGraphNodeParams *>(raw);
            p.type = cudaGraphNodeTypeConditional;
            p.conditional.handle = h;
            p.conditional.type = is_while ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
            p.conditional.size = 1;
            cudaGraphNode_t cond;
            CK(cudaGraphAddNode(&cond, g, nullptr, nullptr, 0, &p));
            body = p.conditional.phGraph_out[0];
            if (is_while) expect_rounds = rounds;
        } else if (strcmp(mode, "graph")) {
            fprintf(stderr, "mode: stream | graph | while | if\n");
            return 2;
        }
        // The body: the barrier kernel, then (WHILE) the count-down.
        cudaGraphNode_t fill, down;
        cudaKernelNodeParams k;
        memset(&k, 0, sizeof k);
        unsigned nn = n, v = 7;
        void *fargs[] = {&out, &nn, &v};
        k.func = (void *)barrier_fill;
        k.gridDim = dim3(1);
        k.blockDim = dim3(threads);
        k.kernelParams = fargs;
        CK(cudaGraphAddKernelNode(&fill, body, nullptr, 0, &k));
        if (!strcmp(mode, "while")) {
            void *dargs[] = {&h, &left};
            k.func = (void *)count_down;
            k.blockDim = dim3(1);
            k.kernelParams = dargs;
            CK(cudaGraphAddKernelNode(&down, body, &fill, 1, &k));
        }
        cudaGraphExec_t e;
        CK(cudaGraphInstantiate(&e, g, 0));
        CK(cudaGraphLaunch(e, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGraphExecDestroy(e));
        CK(cudaGraphDestroy(g));
    }
    CK(cudaStreamSynchronize(s));
    unsigned h_out[64];
    CK(cudaMemcpy(h_out, out, sizeof h_out, cudaMemcpyDeviceToHost));
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        if (h_out[i] != expect_rounds * (7 + i)) bad++;
    printf("%s, %u thread(s): %u round(s), %u of %u values wrong\n", mode, threads, expect_rounds, bad, n);
    return bad ? 1 : 0;
}
