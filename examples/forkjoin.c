/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Fork/join with cuweave: a parent stream forks two child streams, each
 * branch runs its own work, the parent joins both, and a cw_future tells the
 * host when everything is done; a cw_timer measures the whole on the GPU.
 *
 *   parent: [stamp P0] --fork--> child A: [stamp A, 2 ms] --join--> [stamp P1]
 *                       \-fork-> child B: [stamp B, 2 ms] -/
 *
 * The work is the test kernel cw_stamp (tests/kernels/test_kernels.cu): it
 * writes the GPU's global timer when it starts and when it has spun for the
 * time asked. From the six stamps the example checks that the order held
 * (P0 before A and B, both before P1) and whether A and B overlapped.
 *
 * cuweave has no kernel-launch API yet (it comes with the jit layer), so
 * this example loads the precompiled kernels itself through a small dlopen
 * of libcuda: the few entry points below, resolved with dlsym (its own
 * loader rather than tests/rawcuda.h, to show how little it takes). Those
 * raw calls need a current context: the example pushes the cw_context's
 * CUcontext while it uses them and pops it afterwards. cuweave's own calls
 * need no current context.
 *
 * Without a GPU it says why and exits 77. Exits 1 when a call fails or the
 * order was broken.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests examples/forkjoin.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o forkjoin
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"

/* ---- the few driver entry points the example uses (legacy-stream ABI) ---- */

typedef int CUresult_;
typedef unsigned long long CUdeviceptr_;

static struct {
    void *lib;
    CUresult_ (*cuCtxPushCurrent)(CUcontext);
    CUresult_ (*cuCtxPopCurrent)(CUcontext *);
    CUresult_ (*cuModuleLoadData)(void **module, const void *image);
    CUresult_ (*cuModuleUnload)(void *module);
    CUresult_ (*cuModuleGetFunction)(void **fn, void *module, const char *name);
    CUresult_ (*cuLaunchKernel)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream stream, void **params, void **extra);
    CUresult_ (*cuMemAlloc)(CUdeviceptr_ *p, size_t bytes);
    CUresult_ (*cuMemFree)(CUdeviceptr_ p);
    CUresult_ (*cuMemsetD32)(CUdeviceptr_ p, unsigned value, size_t count);
    CUresult_ (*cuMemcpyDtoH)(void *dst, CUdeviceptr_ src, size_t bytes);
} cu;

/* cuweave already opened the driver (cw_init succeeded), so this finds the
 * same library. Returns 1 when every entry resolved. */
static int cu_open(void) {
    const char *path = getenv("CUWEAVE_LIBCUDA");
    cu.lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) return 0;
#define SYM_(field, name) \
    if (!(*(void **)&cu.field = dlsym(cu.lib, name))) return 0;
    SYM_(cuCtxPushCurrent, "cuCtxPushCurrent_v2")
    SYM_(cuCtxPopCurrent, "cuCtxPopCurrent_v2")
    SYM_(cuModuleLoadData, "cuModuleLoadData")
    SYM_(cuModuleUnload, "cuModuleUnload")
    SYM_(cuModuleGetFunction, "cuModuleGetFunction")
    SYM_(cuLaunchKernel, "cuLaunchKernel")
    SYM_(cuMemAlloc, "cuMemAlloc_v2")
    SYM_(cuMemFree, "cuMemFree_v2")
    SYM_(cuMemsetD32, "cuMemsetD32_v2")
    SYM_(cuMemcpyDtoH, "cuMemcpyDtoH_v2")
#undef SYM_
    return 1;
}

#define CU_TRY(expr)                                                                  \
    do {                                                                              \
        CUresult_ r_ = (expr);                                                        \
        if (r_ != 0) {                                                                \
            fprintf(stderr, "forkjoin: %s failed with CUresult %d\n", #expr, r_);     \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

#define CW_TRY(expr)                                                                  \
    do {                                                                              \
        if ((expr) != CW_SUCCESS) {                                                   \
            fprintf(stderr, "forkjoin: %s\n", cw_last_error()->message);               \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

/* cw_stamp(out, ns) on stream s: out[0] = start, out[1] = end (GPU ns). */
static CUresult_ stamp(void *fn, cw_stream *s, CUdeviceptr_ out, long long ns) {
    cw_stream_info info; /* the driver stream: no driver call to read it */
    if (cw_stream_get_info(s, &info) != CW_SUCCESS) return -1;
    void *args[] = {&out, &ns};
    return cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, info.handle, args, NULL);
}

/* Prints the stamps and the verdict; returns 1 when the order held. */
static int report(const unsigned long long *t, float ms, int serialized, long long parent_ns,
                  long long branch_ns) {
    /* t: P0 start/end, A start/end, B start/end, P1 start/end; shown from P0's start, in us */
#define US_(x) ((double)((x) - t[0]) / 1000.0)
    printf("P0 %8.1f .. %8.1f us  (parent, before the fork)\n", US_(t[0]), US_(t[1]));
    printf("A  %8.1f .. %8.1f us  (child A)\n", US_(t[2]), US_(t[3]));
    printf("B  %8.1f .. %8.1f us  (child B)\n", US_(t[4]), US_(t[5]));
    printf("P1 %8.1f .. %8.1f us  (parent, after the join)\n", US_(t[6]), US_(t[7]));
#undef US_
    int ordered = t[1] <= t[2] && t[1] <= t[4] && t[3] <= t[6] && t[5] <= t[6];
    int overlapped = t[2] < t[5] && t[4] < t[3];
    double serial_ms = (2.0 * parent_ns + 2.0 * branch_ns) / 1e6;
    double parallel_ms = (2.0 * parent_ns + branch_ns) / 1e6;
    printf("cw_timer: %.3f ms on the GPU (about %.1f ms if the branches overlap, %.1f ms if not)\n", ms,
           parallel_ms, serial_ms);
    printf("order kept (P0 before A and B, both before P1): %s\n", ordered ? "yes" : "NO");
    printf("branches overlapped: %s%s\n", overlapped ? "yes" : "no",
           serialized ? " (CUWEAVE_SERIALIZE=1: the children share one stream, so they run in turn)" : "");
    return ordered;
}

int main(void) {
    const long long branch_ns = 2000000; /* each branch spins 2 ms */
    const long long parent_ns = 100000;  /* the parent's pieces, 0.1 ms each */

    printf("forkjoin: a parent stream forks two children (%.1f ms of work each), joins them,\n"
           "waits with a cw_future and times the whole with a cw_timer\n",
           branch_ns / 1e6);

    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "forkjoin: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!cu_open()) {
        fprintf(stderr, "forkjoin: could not resolve the driver entry points: %s\n", dlerror());
        return 1;
    }

    int ok = 0, pushed = 0, serialized = 0;
    float ms = 0.0f;
    cw_context *ctx = NULL;
    cw_stream *parent = NULL, *a = NULL, *b = NULL;
    cw_future *done = NULL;
    cw_timer *timer = NULL;
    CUcontext cuctx = NULL;
    void *module = NULL, *fn = NULL;
    CUdeviceptr_ buf = 0;
    unsigned long long stamps[8] = {0}; /* start, end of P0, A, B, P1 (GPU ns) */

    cw_context_info ctx_info;
    CW_TRY(cw_context_create(&ctx, 0));
    CW_TRY(cw_context_get_info(ctx, &ctx_info));
    cuctx = ctx_info.handle;
    CW_TRY(cw_stream_create(&parent, ctx, NULL)); /* non-blocking, priority 0 */
    CW_TRY(cw_timer_create(&timer, ctx));

    /* the raw part: load the kernels, 8 stamps of device memory */
    CU_TRY(cu.cuCtxPushCurrent(cuctx));
    pushed = 1;
    CU_TRY(cu.cuModuleLoadData(&module, cw_test_kernels_fatbin));
    CU_TRY(cu.cuModuleGetFunction(&fn, module, "cw_stamp"));
    CU_TRY(cu.cuMemAlloc(&buf, 8 * sizeof(unsigned long long)));
    CU_TRY(cu.cuMemsetD32(buf, 0, 16));

    /* the graph of work */
    CW_TRY(cw_timer_start(timer, parent));
    CU_TRY(stamp(fn, parent, buf + 0 * 8, parent_ns)); /* P0 */
    CW_TRY(cw_stream_fork(&a, parent));
    CW_TRY(cw_stream_fork(&b, parent));
    /* CUWEAVE_SERIALIZE=1: the children are the parent, or one shared stream */
    serialized = (a == parent || b == parent || a == b);
    CU_TRY(stamp(fn, a, buf + 2 * 8, branch_ns)); /* A */
    CU_TRY(stamp(fn, b, buf + 4 * 8, branch_ns)); /* B */
    CW_TRY(cw_stream_join(parent, &a));
    CW_TRY(cw_stream_join(parent, &b));
    CU_TRY(stamp(fn, parent, buf + 6 * 8, parent_ns)); /* P1 */
    CW_TRY(cw_timer_stop(timer, parent));

    /* the host learns of completion through a future (the fast kind) */
    CW_TRY(cw_future_create(&done, parent, CW_FUTURE_WRITE_VALUE));
    CW_TRY(cw_future_wait(done, 10 * 1000 * 1000)); /* 10 s at most */
    CW_TRY(cw_timer_get_elapsed_ms(timer, &ms));

    CU_TRY(cu.cuMemcpyDtoH(stamps, buf, sizeof stamps));

    ok = report(stamps, ms, serialized, parent_ns, branch_ns);

fail:
    /* after a failure a child may still be ours: join it, then let the work
     * finish before its memory goes */
    if (a && parent) cw_stream_join(parent, &a);
    if (b && parent) cw_stream_join(parent, &b);
    if (parent) cw_stream_synchronize(parent);
    if (pushed) {
        CUcontext popped = NULL;
        if (buf) cu.cuMemFree(buf);
        if (module) cu.cuModuleUnload(module);
        cu.cuCtxPopCurrent(&popped);
    }
    cw_future_destroy(&done);
    cw_timer_destroy(&timer);
    cw_stream_destroy(&parent);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
