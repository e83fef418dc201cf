/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A minimal, independent driver loader for tests: dlopen + dlsym of the
 * entry points a test compares cuweave with. Deliberately not cuweave's
 * table, so that a bug there cannot hide behind itself.
 */
#ifndef CUWEAVE_TESTS_RAWCUDA_H
#define CUWEAVE_TESTS_RAWCUDA_H

#include <dlfcn.h>
#include <stdlib.h>

#include "cuweave/common.h"

typedef int rc_result;
typedef int rc_device;

typedef struct rawcuda {
    void *lib;
    rc_result (*cuInit)(unsigned);
    rc_result (*cuDriverGetVersion)(int *);
    rc_result (*cuDeviceGetCount)(int *);
    rc_result (*cuDeviceGet)(rc_device *, int);
    rc_result (*cuDeviceGetName)(char *, int, rc_device);
    rc_result (*cuDeviceGetAttribute)(int *, int, rc_device);
    rc_result (*cuDeviceTotalMem)(size_t *, rc_device);
    rc_result (*cuDevicePrimaryCtxRetain)(CUcontext *, rc_device);
    rc_result (*cuDevicePrimaryCtxRelease)(rc_device);
    rc_result (*cuDevicePrimaryCtxGetState)(rc_device, unsigned *, int *);
    rc_result (*cuCtxCreate_v4)(CUcontext *, void *, unsigned, rc_device);
    rc_result (*cuCtxCreate_v2)(CUcontext *, unsigned, rc_device);
    rc_result (*cuCtxDestroy)(CUcontext);
    rc_result (*cuCtxGetCurrent)(CUcontext *);
    rc_result (*cuCtxSetCurrent)(CUcontext);
    rc_result (*cuCtxGetApiVersion)(CUcontext, unsigned *);
    rc_result (*cuCtxGetStreamPriorityRange)(int *, int *);
    rc_result (*cuCtxGetFlags)(unsigned *);
    rc_result (*cuCtxSynchronize)(void);
    rc_result (*cuCtxGetDevice)(rc_device *);
    /* streams, events, memory, modules, launches (legacy-stream variants) */
    rc_result (*cuStreamCreateWithPriority)(CUstream *, unsigned, int);
    rc_result (*cuStreamDestroy)(CUstream);
    rc_result (*cuStreamSynchronize)(CUstream);
    rc_result (*cuStreamQuery)(CUstream);
    rc_result (*cuStreamGetPriority)(CUstream, int *);
    rc_result (*cuStreamGetFlags)(CUstream, unsigned *);
    rc_result (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
    rc_result (*cuStreamWriteValue32)(CUstream, unsigned long long, unsigned, unsigned);
    rc_result (*cuLaunchHostFunc)(CUstream, void (*)(void *), void *);
    rc_result (*cuEventCreate)(CUevent *, unsigned);
    rc_result (*cuEventRecord)(CUevent, CUstream);
    rc_result (*cuEventDestroy)(CUevent);
    rc_result (*cuEventSynchronize)(CUevent);
    rc_result (*cuEventQuery)(CUevent);
    rc_result (*cuMemAlloc)(unsigned long long *, size_t);
    rc_result (*cuMemFree)(unsigned long long);
    rc_result (*cuMemcpyHtoD)(unsigned long long, const void *, size_t);
    rc_result (*cuMemcpyDtoH)(void *, unsigned long long, size_t);
    rc_result (*cuMemsetD32)(unsigned long long, unsigned, size_t);
    rc_result (*cuMemHostAlloc)(void **, size_t, unsigned);
    rc_result (*cuMemFreeHost)(void *);
    rc_result (*cuMemHostGetDevicePointer)(unsigned long long *, void *, unsigned);
    rc_result (*cuModuleLoadData)(void **, const void *);
    rc_result (*cuModuleUnload)(void *);
    rc_result (*cuModuleGetFunction)(void **, void *, const char *);
    rc_result (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void **, void **);
    rc_result (*cuLaunchCooperativeKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, CUstream, void **);
    rc_result (*cuMemcpyDtoDAsync)(unsigned long long, unsigned long long, size_t, CUstream);
    rc_result (*cuMemsetD32Async)(unsigned long long, unsigned, size_t, CUstream);
    /* graphs (handles as void *) */
    rc_result (*cuStreamBeginCapture)(CUstream, int);
    rc_result (*cuStreamEndCapture)(CUstream, void **);
    rc_result (*cuGraphInstantiateWithFlags)(void **, void *, unsigned long long);
    rc_result (*cuGraphUpload)(void *, CUstream);
    rc_result (*cuGraphLaunch)(void *, CUstream);
    rc_result (*cuGraphExecDestroy)(void *);
    rc_result (*cuGraphDestroy)(void *);
} rawcuda;

/* Returns 1 when every entry resolved and cuInit succeeded. */
static inline int rawcuda_open(rawcuda *rc) {
    rc->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!rc->lib) return 0;
#define RC_SYM_(field, name) \
    if (!(*(void **)&rc->field = dlsym(rc->lib, name))) return 0;
    RC_SYM_(cuInit, "cuInit")
    RC_SYM_(cuDriverGetVersion, "cuDriverGetVersion")
    RC_SYM_(cuDeviceGetCount, "cuDeviceGetCount")
    RC_SYM_(cuDeviceGet, "cuDeviceGet")
    RC_SYM_(cuDeviceGetName, "cuDeviceGetName")
    RC_SYM_(cuDeviceGetAttribute, "cuDeviceGetAttribute")
    RC_SYM_(cuDeviceTotalMem, "cuDeviceTotalMem_v2")
    RC_SYM_(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
    RC_SYM_(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
    RC_SYM_(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState")
    RC_SYM_(cuCtxDestroy, "cuCtxDestroy_v2")
    RC_SYM_(cuCtxGetCurrent, "cuCtxGetCurrent")
    RC_SYM_(cuCtxSetCurrent, "cuCtxSetCurrent")
    RC_SYM_(cuCtxGetApiVersion, "cuCtxGetApiVersion")
    RC_SYM_(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange")
    RC_SYM_(cuCtxGetFlags, "cuCtxGetFlags")
    RC_SYM_(cuCtxSynchronize, "cuCtxSynchronize")
    RC_SYM_(cuCtxGetDevice, "cuCtxGetDevice")
    RC_SYM_(cuStreamCreateWithPriority, "cuStreamCreateWithPriority")
    RC_SYM_(cuStreamDestroy, "cuStreamDestroy_v2")
    RC_SYM_(cuStreamSynchronize, "cuStreamSynchronize")
    RC_SYM_(cuStreamQuery, "cuStreamQuery")
    RC_SYM_(cuStreamGetPriority, "cuStreamGetPriority")
    RC_SYM_(cuStreamGetFlags, "cuStreamGetFlags")
    RC_SYM_(cuStreamWaitEvent, "cuStreamWaitEvent")
    RC_SYM_(cuStreamWriteValue32, "cuStreamWriteValue32_v2")
    RC_SYM_(cuLaunchHostFunc, "cuLaunchHostFunc")
    RC_SYM_(cuEventCreate, "cuEventCreate")
    RC_SYM_(cuEventRecord, "cuEventRecord")
    RC_SYM_(cuEventDestroy, "cuEventDestroy_v2")
    RC_SYM_(cuEventSynchronize, "cuEventSynchronize")
    RC_SYM_(cuEventQuery, "cuEventQuery")
    RC_SYM_(cuMemAlloc, "cuMemAlloc_v2")
    RC_SYM_(cuMemFree, "cuMemFree_v2")
    RC_SYM_(cuMemcpyHtoD, "cuMemcpyHtoD_v2")
    RC_SYM_(cuMemcpyDtoH, "cuMemcpyDtoH_v2")
    RC_SYM_(cuMemsetD32, "cuMemsetD32_v2")
    RC_SYM_(cuMemHostAlloc, "cuMemHostAlloc")
    RC_SYM_(cuMemFreeHost, "cuMemFreeHost")
    RC_SYM_(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2")
    RC_SYM_(cuModuleLoadData, "cuModuleLoadData")
    RC_SYM_(cuModuleUnload, "cuModuleUnload")
    RC_SYM_(cuModuleGetFunction, "cuModuleGetFunction")
    RC_SYM_(cuLaunchKernel, "cuLaunchKernel")
    RC_SYM_(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
    RC_SYM_(cuMemsetD32Async, "cuMemsetD32Async")
    RC_SYM_(cuStreamBeginCapture, "cuStreamBeginCapture_v2")
    RC_SYM_(cuStreamEndCapture, "cuStreamEndCapture")
    RC_SYM_(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
    RC_SYM_(cuGraphUpload, "cuGraphUpload")
    RC_SYM_(cuGraphLaunch, "cuGraphLaunch")
    RC_SYM_(cuGraphExecDestroy, "cuGraphExecDestroy")
    RC_SYM_(cuGraphDestroy, "cuGraphDestroy")
#undef RC_SYM_
    *(void **)&rc->cuCtxCreate_v4 = dlsym(rc->lib, "cuCtxCreate_v4");
    *(void **)&rc->cuLaunchCooperativeKernel = dlsym(rc->lib, "cuLaunchCooperativeKernel"); /* may be NULL */
    *(void **)&rc->cuCtxCreate_v2 = dlsym(rc->lib, "cuCtxCreate_v2");
    if (!rc->cuCtxCreate_v4 && !rc->cuCtxCreate_v2) return 0;
    return rc->cuInit(0) == 0;
}

/*
 * The start of a GPU test binary: 77 (skip, the reason printed) when cuweave
 * finds no usable GPU, 1 when it does but the test's own loader fails, 0 to
 * go on. Defined where cwtest.h was included first (the tests).
 */
#ifdef CUWEAVE_TESTS_CWTEST_H
static inline int rawcuda_start(rawcuda *rc) {
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (!rawcuda_open(rc)) {
        printf("FAIL: cuweave found a driver but the test's own loader did not\n");
        return 1;
    }
    return 0;
}
#endif

/* Loads the test kernels (tests/kernels/test_kernels.cu) into the context
 * current on this thread and looks up a kernel by name. */
static inline rc_result rawcuda_kernel(rawcuda *rc, void **module, const void *image, const char *name,
                                       void **fn) {
    rc_result r = 0;
    if (!*module) r = rc->cuModuleLoadData(module, image);
    if (r != 0) return r;
    return rc->cuModuleGetFunction(fn, *module, name);
}

/* Launches fn<<<1, 1, 0, stream>>>(args). */
static inline rc_result rawcuda_launch1(rawcuda *rc, void *fn, CUstream stream, void **args) {
    return rc->cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

/* Creates an ordinary (non-primary) context, as a host program would; it
 * becomes current on this thread. */
static inline rc_result rawcuda_ctx_create(rawcuda *rc, CUcontext *ctx, rc_device dev) {
    rc_result r = 1;
    if (rc->cuCtxCreate_v4) r = rc->cuCtxCreate_v4(ctx, NULL, 0, dev);
    if (r != 0 && rc->cuCtxCreate_v2) r = rc->cuCtxCreate_v2(ctx, 0, dev);
    return r;
}

#define assert_cu_ok(expr)                                                    \
    do {                                                                      \
        rc_result rc_r_ = (expr);                                             \
        if (rc_r_ != 0) fail_msg("%s failed with CUresult %d", #expr, rc_r_); \
    } while (0)

#endif /* CUWEAVE_TESTS_RAWCUDA_H */
