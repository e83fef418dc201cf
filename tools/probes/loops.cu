/* SPDX-License-Identifier: BSD-2-Clause */
// Probe, not part of the library: plain CUDA (runtime + driver API) answers
// to two questions the resident loop raised.
//   two  : are two WHILE-graph loops served when both run at once (primary
//          context, two green contexts, polling that yields or never does)?
//   pdl  : does a programmatic (PDL) edge between the kernels of a loop
//          iteration shorten the host round trip?
// Every loop ends on the GPU clock (limit) or a host stop word, so the probe
// cannot hang. Build: nvcc -O2 -arch=sm_90 -o loops loops.cu -lcuda
// Run: ./loops two | ./loops pdl
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_device_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)
#define CU(x)                                                                         \
    do {                                                                              \
        CUresult e_ = (x);                                                            \
        if (e_ != CUDA_SUCCESS) {                                                     \
            const char *s_ = "";                                                      \
            cuGetErrorName(e_, &s_);                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);            \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

struct Host {
    unsigned long long ring;  // host: requests made
    unsigned long long done;  // GPU: requests finished
    unsigned stop;
    unsigned exited;
};
struct Dev {
    unsigned long long taken, t0, idle_returns;
    unsigned open;
};

__device__ __forceinline__ unsigned long long gnow() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_go() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__global__ void k_arm(Host *h, Dev *d) {
    d->t0 = gnow();
    d->open = 0;
    d->taken = *(volatile unsigned long long *)&h->done;
}
// yield_ns: return with nothing taken after that long (0: wait until a request)
__global__ void k_poll(Host *h, Dev *d, cudaGraphConditionalHandle loop, unsigned long long yield_ns,
                       unsigned sleep_ns, unsigned long long limit_ns, int pdl) {
    if (pdl) {
        pdl_go();
        pdl_wait();  // the previous iteration's signal has finished
    }
    const unsigned long long start = gnow();
    for (;;) {
        const unsigned long long now = gnow();
        if (*(volatile unsigned *)&h->stop || now - d->t0 > limit_ns) {
            d->open = 0;
            cudaGraphSetConditional(loop, 0);
            return;
        }
        if (*(volatile unsigned long long *)&h->ring > d->taken) {
            d->taken += 1;
            d->open = 1;
            return;
        }
        if (yield_ns && now - start > yield_ns) {
            d->open = 0;
            d->idle_returns++;
            return;
        }
        if (sleep_ns) __nanosleep(sleep_ns);
    }
}
__global__ void k_work(Dev *d, unsigned *buf, int pdl) {
    if (pdl) {
        pdl_go();
        pdl_wait();
    }
    if (d->open) buf[threadIdx.x] += 1u;
}
__global__ void k_signal(Host *h, Dev *d, int pdl) {
    if (pdl) pdl_wait();
    if (d->open) {
        __threadfence_system();
        *(volatile unsigned long long *)&h->done = d->taken;
    }
}
__global__ void k_exit(Host *h) { *(volatile unsigned *)&h->exited = 1u; }
// The floor: one persistent kernel that serves requests itself.
__global__ void k_persist(Host *h, unsigned *buf, unsigned long long limit_ns) {
    const unsigned long long t0 = gnow();
    unsigned long long taken = *(volatile unsigned long long *)&h->done;
    while (!*(volatile unsigned *)&h->stop && gnow() - t0 < limit_ns) {
        if (*(volatile unsigned long long *)&h->ring > taken) {
            taken++;
            buf[0] += 3u;
            __threadfence_system();
            *(volatile unsigned long long *)&h->done = taken;
        }
    }
    *(volatile unsigned *)&h->exited = 1u;
}

static double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static unsigned long long g_limit_ns = 20ull * 1000 * 1000 * 1000;

struct Loop {
    CUcontext ctx = nullptr;
    cudaStream_t s = nullptr;
    cudaGraphExec_t ge = nullptr;
    Host *h = nullptr;
    Dev *d = nullptr;
    unsigned *buf = nullptr;
};

static void kparams(cudaKernelNodeParams &p, void *fn, void **args, unsigned threads = 1) {
    memset(&p, 0, sizeof p);
    p.func = fn;
    p.gridDim = dim3(1);
    p.blockDim = dim3(threads);
    p.kernelParams = args;
}

// arm -> WHILE{ unroll x [poll -> work x nwork -> signal] } -> exit
static void build(Loop &L, unsigned long long yield_ns, unsigned sleep_ns, int nwork, int unroll, int pdl_port) {
    CU(cuCtxSetCurrent(L.ctx));
    CK(cudaHostAlloc(&L.h, sizeof(Host), cudaHostAllocMapped | cudaHostAllocPortable));
    memset((void *)L.h, 0, sizeof(Host));
    CK(cudaMalloc(&L.d, sizeof(Dev)));
    CK(cudaMemset(L.d, 0, sizeof(Dev)));
    CK(cudaMalloc(&L.buf, 64 * sizeof(unsigned)));
    CK(cudaMemset(L.buf, 0, 64 * sizeof(unsigned)));
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle hl;
    CK(cudaGraphConditionalHandleCreate(&hl, g, 1, cudaGraphCondAssignDefault));
    static Host *sh;
    static Dev *sd;
    static unsigned *sb;
    static cudaGraphConditionalHandle shl;
    static unsigned long long syield, slimit;
    slimit = g_limit_ns;
    static unsigned ssleep;
    static int spdl;
    sh = L.h, sd = L.d, sb = L.buf, shl = hl, syield = yield_ns, ssleep = sleep_ns, spdl = pdl_port != 0;
    void *a_arm[] = {&sh, &sd};
    void *a_poll[] = {&sh, &sd, &shl, &syield, &ssleep, &slimit, &spdl};
    void *a_work[] = {&sd, &sb, &spdl};
    void *a_sig[] = {&sh, &sd, &spdl};
    void *a_exit[] = {&sh};
    cudaKernelNodeParams kp;
    cudaGraphNode_t arm, wn, ex;
    kparams(kp, (void *)k_arm, a_arm);
    CK(cudaGraphAddKernelNode(&arm, g, nullptr, 0, &kp));
    alignas(cudaGraphNodeParams) unsigned char raw_cp[sizeof(cudaGraphNodeParams)] = {};
    cudaGraphNodeParams &cp = *reinterpret_cast<cudaGraphNodeParams *>(raw_cp);
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = hl;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    CK(cudaGraphAddNode(&wn, g, &arm, nullptr, 1, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    cudaGraphNode_t prev = nullptr;
    cudaGraphEdgeData ed;
    memset(&ed, 0, sizeof ed);
    if (pdl_port) {
        ed.type = cudaGraphDependencyTypeProgrammatic;
        ed.from_port = (unsigned char)pdl_port;
    }
    auto add = [&](void *fn, void **args, unsigned threads) {
        alignas(cudaGraphNodeParams) unsigned char raw_np[sizeof(cudaGraphNodeParams)] = {};
        cudaGraphNodeParams &np = *reinterpret_cast<cudaGraphNodeParams *>(raw_np);
        np.type = cudaGraphNodeTypeKernel;
        np.kernel.func = fn;
        np.kernel.gridDim = dim3(1);
        np.kernel.blockDim = dim3(threads);
        np.kernel.kernelParams = args;
        cudaGraphNode_t n;
        CK(cudaGraphAddNode(&n, body, prev ? &prev : nullptr, prev ? &ed : nullptr, prev ? 1 : 0, &np));
        prev = n;
    };
    for (int u = 0; u < unroll; u++) {
        add((void *)k_poll, a_poll, 1);
        for (int w = 0; w < nwork; w++) add((void *)k_work, a_work, 32);
        add((void *)k_signal, a_sig, 1);
    }
    kparams(kp, (void *)k_exit, a_exit);
    CK(cudaGraphAddKernelNode(&ex, g, &wn, 1, &kp));
    CK(cudaGraphInstantiate(&L.ge, g, 0));
    CK(cudaGraphDestroy(g));
    // trial run with stop set: loads everything in this context
    L.h->stop = 1;
    CK(cudaGraphLaunch(L.ge, L.s));
    CK(cudaStreamSynchronize(L.s));
    L.h->stop = 0;
    L.h->exited = 0;
}

static void launch(Loop &L) {
    CU(cuCtxSetCurrent(L.ctx));
    CK(cudaGraphLaunch(L.ge, L.s));
}
// Rings once and waits up to timeout_us; returns the round trip or -1.
static double ring(Loop &L, double timeout_us) {
    const double t0 = now_us();
    const unsigned long long want = __atomic_add_fetch(&L.h->ring, 1ull, __ATOMIC_SEQ_CST);
    for (;;) {
        const double t = now_us() - t0;
        if (*(volatile unsigned long long *)&L.h->done >= want) return t;
        if (t > timeout_us) return -1.0;
    }
}
static void stop_wait(Loop &L, const char *name) {
    L.h->stop = 1;
    __sync_synchronize();
    const double t0 = now_us();
    while (cudaStreamQuery(L.s) == cudaErrorNotReady) {
        if (now_us() - t0 > 30e6) {
            printf("  %s: did not stop in 30 s\n", name);
            return;
        }
    }
    printf("  %s: stopped after %.1f ms (exited %u)\n", name, (now_us() - t0) / 1e3, L.h->exited);
}
static void unbuild(Loop &L) {
    CU(cuCtxSetCurrent(L.ctx));
    CK(cudaGraphExecDestroy(L.ge));
    CK(cudaFreeHost(L.h));
    CK(cudaFree(L.d));
    CK(cudaFree(L.buf));
}

static void two(const char *what, Loop L[2], unsigned long long yield_ns, unsigned sleep_ns) {
    printf("two: %s, yield %llu ns, sleep %u ns\n", what, yield_ns, sleep_ns);
    for (int i = 0; i < 2; i++) build(L[i], yield_ns, sleep_ns, 1, 1, 0);
    for (int i = 0; i < 2; i++) launch(L[i]);
    int served[2] = {0, 0}, lost[2] = {0, 0};
    std::vector<double> lat[2];
    for (int k = 0; k < 200; k++)
        for (int i = 0; i < 2; i++) {
            if (lost[i] > 2) continue;
            double t = ring(L[i], 200e3);
            if (t < 0) {
                lost[i]++;
                printf("  loop %d: request %d not served in 200 ms\n", i, k + 1);
            } else {
                served[i]++;
                lat[i].push_back(t);
            }
        }
    for (int i = 0; i < 2; i++) {
        std::sort(lat[i].begin(), lat[i].end());
        printf("  loop %d: served %d of its requests; p50 %.2f us\n", i, served[i],
               lat[i].empty() ? -1.0 : lat[i][lat[i].size() / 2]);
    }
    for (int i = 0; i < 2; i++) stop_wait(L[i], i ? "loop 1" : "loop 0");
    for (int i = 0; i < 2; i++) unbuild(L[i]);
}

static void pct(const char *name, std::vector<double> &v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    printf("  %-44s p50 %6.2f  p99 %6.2f  p99.9 %6.2f us (n=%zu)\n", name, v[n / 2], v[n * 99 / 100],
           v[n * 999 / 1000], n);
}

static void shape(Loop &L, const char *name, int nwork, int unroll, int pdl_port, int n) {
    build(L, 0, 0, nwork, unroll, pdl_port);
    launch(L);
    for (int i = 0; i < 200; i++) ring(L, 1e6);
    std::vector<double> b2b, pol;
    for (int i = 0; i < n; i++) {
        double t = ring(L, 1e6);
        if (t < 0) {
            printf("  %s: lost a request\n", name);
            break;
        }
        b2b.push_back(t);
    }
    for (int i = 0; i < n / 2; i++) {
        const double t0 = now_us();
        while (now_us() - t0 < 30.0) {
        }
        double t = ring(L, 1e6);
        if (t < 0) break;
        pol.push_back(t);
    }
    char buf[128];
    snprintf(buf, sizeof buf, "%s back-to-back", name);
    if (!b2b.empty()) pct(buf, b2b);
    snprintf(buf, sizeof buf, "%s already polling", name);
    if (!pol.empty()) pct(buf, pol);
    stop_wait(L, name);
    unsigned check = 0;
    CK(cudaMemcpy(&check, L.buf, 4, cudaMemcpyDeviceToHost));
    printf("  %s: work counter %u for %llu requests x %d kernels\n", name, check, L.h->done, nwork);
    unbuild(L);
}

static const char kPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry nop()\n{\n ret;\n}\n";

// Times one driver call made while loop L runs (never rung; it would end on
// its own after g_limit_ns). A call that waits for the loop takes that long.
template <class F>
static void timed(Loop &L, CUcontext opctx, const char *what, F f) {
    L.h->stop = 0;
    L.h->exited = 0;
    launch(L);
    const double t_wait = now_us();
    while (now_us() - t_wait < 50e3) {
    }
    CU(cuCtxSetCurrent(opctx));
    const double t0 = now_us();
    f();
    const double dt = now_us() - t0;
    const int ended = *(volatile unsigned *)&L.h->exited;
    printf("  %-48s %10.1f us%s\n", what, dt, ended ? "  <- WAITED for the loop to end" : "");
    L.h->stop = 1;
    CU(cuCtxSetCurrent(L.ctx));
    CK(cudaStreamSynchronize(L.s));
}

static void calls(const char *name, Loop &L, CUcontext opctx) {
    printf("calls: %s\n", name);
    build(L, 0, 0, 1, 1, 0);
    CUdeviceptr d = 0, d2 = 0;
    void *hp = nullptr;
    static char pageable[1 << 16];
    CU(cuCtxSetCurrent(opctx));
    CU(cuMemAlloc(&d2, 1 << 20));
    void *pin;
    CU(cuMemHostAlloc(&pin, 1 << 16, CU_MEMHOSTALLOC_PORTABLE));
    CUstream os;
    CU(cuStreamCreate(&os, CU_STREAM_NON_BLOCKING));
    CUmemoryPool pool;
    CUdevice dev;
    CU(cuCtxGetDevice(&dev));
    CU(cuDeviceGetDefaultMemPool(&pool, dev));
    timed(L, opctx, "cuMemAlloc 1 MiB", [&] { CU(cuMemAlloc(&d, 1 << 20)); });
    timed(L, opctx, "cuMemFree", [&] { CU(cuMemFree(d)); });
    timed(L, opctx, "cuMemHostAlloc 64 KiB", [&] { CU(cuMemHostAlloc(&hp, 1 << 16, CU_MEMHOSTALLOC_DEVICEMAP)); });
    timed(L, opctx, "cuMemFreeHost", [&] { CU(cuMemFreeHost(hp)); });
    void *m = malloc(1 << 16);
    timed(L, opctx, "cuMemHostRegister 64 KiB", [&] { CU(cuMemHostRegister(m, 1 << 16, CU_MEMHOSTREGISTER_DEVICEMAP)); });
    timed(L, opctx, "cuMemHostUnregister", [&] { CU(cuMemHostUnregister(m)); });
    free(m);
    timed(L, opctx, "cuMemAllocAsync+cuStreamSynchronize", [&] {
        CU(cuMemAllocAsync(&d, 1 << 20, os));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuMemFreeAsync+cuStreamSynchronize", [&] {
        CU(cuMemFreeAsync(d, os));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuMemFreeAsync of a cuMemAlloc pointer+sync", [&] {
        CU(cuMemFreeAsync(d2, os));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuMemPoolTrimTo 0", [&] { CU(cuMemPoolTrimTo(pool, 0)); });
    CU(cuMemAlloc(&d, 1 << 20));
    timed(L, opctx, "cuMemcpyHtoD 4 KiB pinned", [&] { CU(cuMemcpyHtoD(d, pin, 4096)); });
    timed(L, opctx, "cuMemcpyHtoD 4 KiB pageable", [&] { CU(cuMemcpyHtoD(d, pageable, 4096)); });
    timed(L, opctx, "cuMemcpyDtoH 4 KiB pageable", [&] { CU(cuMemcpyDtoH(pageable, d, 4096)); });
    timed(L, opctx, "cuMemsetD32 (sync)", [&] { CU(cuMemsetD32(d, 0, 1024)); });
    timed(L, opctx, "cuMemsetD32Async+sync (own stream)", [&] {
        CU(cuMemsetD32Async(d, 0, 1024, os));
        CU(cuStreamSynchronize(os));
    });
    CUstream s2;
    timed(L, opctx, "cuStreamCreate", [&] { CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)); });
    timed(L, opctx, "cuStreamDestroy", [&] { CU(cuStreamDestroy(s2)); });
    CUevent ev;
    timed(L, opctx, "cuEventCreate+cuEventDestroy", [&] {
        CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CU(cuEventDestroy(ev));
    });
    CUmodule mod;
    timed(L, opctx, "cuModuleLoadData (PTX)", [&] { CU(cuModuleLoadData(&mod, kPtx)); });
    CUfunction fn;
    CU(cuModuleGetFunction(&fn, mod, "nop"));
    timed(L, opctx, "cuLaunchKernel of it + sync", [&] {
        CU(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, os, nullptr, nullptr));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuModuleUnload", [&] { CU(cuModuleUnload(mod)); });
    CUlibrary lib;
    timed(L, opctx, "cuLibraryLoadData (PTX)", [&] { CU(cuLibraryLoadData(&lib, kPtx, 0, 0, 0, 0, 0, 0)); });
    CUkernel kern;
    CU(cuLibraryGetKernel(&kern, lib, "nop"));
    timed(L, opctx, "launch a CUkernel first time + sync", [&] {
        CU(cuLaunchKernel((CUfunction)kern, 1, 1, 1, 1, 1, 1, 0, os, nullptr, nullptr));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuLibraryUnload", [&] { CU(cuLibraryUnload(lib)); });
    CUgraph g;
    CUgraphExec ge;
    CU(cuModuleLoadData(&mod, kPtx));
    CU(cuModuleGetFunction(&fn, mod, "nop"));
    timed(L, opctx, "capture+instantiate+upload a 1-kernel graph", [&] {
        CU(cuStreamBeginCapture(os, CU_STREAM_CAPTURE_MODE_RELAXED));
        CU(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, os, nullptr, nullptr));
        CU(cuStreamEndCapture(os, &g));
        CU(cuGraphInstantiate(&ge, g, 0));
        CU(cuGraphUpload(ge, os));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuGraphLaunch + sync", [&] {
        CU(cuGraphLaunch(ge, os));
        CU(cuStreamSynchronize(os));
    });
    timed(L, opctx, "cuGraphExecDestroy+cuGraphDestroy", [&] {
        CU(cuGraphExecDestroy(ge));
        CU(cuGraphDestroy(g));
    });
    CU(cuCtxSetCurrent(opctx));
    CU(cuModuleUnload(mod));
    CU(cuMemFree(d));
    CU(cuMemFreeHost(pin));
    CU(cuStreamDestroy(os));
    CU(cuCtxSetCurrent(L.ctx));
    Loop M;
    M.ctx = opctx;
    CU(cuCtxSetCurrent(opctx));
    CK(cudaStreamCreateWithFlags(&M.s, cudaStreamNonBlocking));
    build(M, 0, 0, 1, 1, 0);  // a second loop, built but never launched
    timed(L, opctx, "cuGraphExecDestroy of a second loop's exec", [&] { CK(cudaGraphExecDestroy(M.ge)); });
    timed(L, opctx, "cudaFree of the second loop's memory", [&] {
        CK(cudaFree(M.d));
        CK(cudaFree(M.buf));
    });
    CK(cudaFreeHost(M.h));
    unbuild(L);
}

// Two green contexts of 16 SMs on dev, a non-blocking stream on each.
static void two_partitions(CUdevice dev, CUcontext ctx[2], CUstream s[2]) {
    CUdevResource res, parts[2], rem;
    CU(cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM));
    unsigned ng = 2;
    CU(cuDevSmResourceSplitByCount(parts, &ng, &res, &rem, 0, 16));
    for (int i = 0; i < 2; i++) {
        CUdevResourceDesc desc;
        CUgreenCtx gc;
        CU(cuDevResourceGenerateDesc(&desc, &parts[i], 1));
        CU(cuGreenCtxCreate(&gc, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
        CU(cuCtxFromGreenCtx(&ctx[i], gc));
        CU(cuGreenCtxStreamCreate(&s[i], gc, CU_STREAM_NON_BLOCKING, 0));
    }
}

int main(int argc, char **argv) {
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    const char *mode = argc > 1 ? argv[1] : "two";
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CUcontext primary;
    CU(cuCtxGetCurrent(&primary));
    if (!strcmp(mode, "pdl")) {
        Loop L;
        L.ctx = primary;
        CK(cudaStreamCreateWithFlags(&L.s, cudaStreamNonBlocking));
        const int n = argc > 2 ? atoi(argv[2]) : 20000;
        shape(L, "3 work, plain edges, unroll 1", 3, 1, 0, n);
        shape(L, "3 work, plain edges, unroll 8", 3, 8, 0, n);
        shape(L, "3 work, PDL programmatic, unroll 1", 3, 1, cudaGraphKernelNodePortProgrammatic, n);
        shape(L, "3 work, PDL programmatic, unroll 8", 3, 8, cudaGraphKernelNodePortProgrammatic, n);
        shape(L, "3 work, PDL launch-completion, unroll 8", 3, 8, cudaGraphKernelNodePortLaunchCompletion, n);
        shape(L, "1 work, plain edges, unroll 8", 1, 8, 0, n);
        // persistent floor
        Host *h;
        unsigned *buf;
        CK(cudaHostAlloc(&h, sizeof(Host), cudaHostAllocMapped | cudaHostAllocPortable));
        memset(h, 0, sizeof *h);
        CK(cudaMalloc(&buf, 64));
        k_persist<<<1, 1, 0, L.s>>>(h, buf, 20ull * 1000 * 1000 * 1000);
        Loop P;
        P.h = h;
        std::vector<double> v;
        for (int i = 0; i < 200; i++) ring(P, 1e6);
        for (int i = 0; i < n; i++) v.push_back(ring(P, 1e6));
        pct("persistent kernel back-to-back", v);
        h->stop = 1;
        CK(cudaStreamSynchronize(L.s));
        return 0;
    }
    if (!strcmp(mode, "calls")) {
        g_limit_ns = 1500ull * 1000 * 1000;
        Loop L;
        L.ctx = primary;
        CK(cudaStreamCreateWithFlags(&L.s, cudaStreamNonBlocking));
        calls("loop and calls in the primary context", L, primary);
        CUcontext gx[2];
        CUstream gs[2];
        two_partitions(dev, gx, gs);
        Loop G;
        G.ctx = gx[0];
        G.s = (cudaStream_t)gs[0];
        calls("loop in green context 0, calls in green context 1", G, gx[1]);
        calls("loop in green context 0, calls in the primary context", G, primary);
        printf("done\n");
        return 0;
    }
    // two loops
    Loop L[2];
    for (int i = 0; i < 2; i++) {
        L[i].ctx = primary;
        CK(cudaStreamCreateWithFlags(&L[i].s, cudaStreamNonBlocking));
    }
    two("primary context, two streams", L, 0, 0);
    two("primary context, two streams", L, 0, 500);
    two("primary context, two streams", L, 20000, 0);
    Loop G[2];
    CUcontext gx[2];
    CUstream gs[2];
    two_partitions(dev, gx, gs);
    for (int i = 0; i < 2; i++) {
        G[i].ctx = gx[i];
        G[i].s = (cudaStream_t)gs[i];
    }
    two("two green contexts of 16 SMs", G, 0, 0);
    two("two green contexts of 16 SMs", G, 0, 500);
    two("two green contexts of 16 SMs", G, 20000, 0);
    printf("done\n");
    return 0;
}
