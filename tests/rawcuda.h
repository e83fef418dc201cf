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
#undef RC_SYM_
    *(void **)&rc->cuCtxCreate_v4 = dlsym(rc->lib, "cuCtxCreate_v4");
    *(void **)&rc->cuCtxCreate_v2 = dlsym(rc->lib, "cuCtxCreate_v2");
    if (!rc->cuCtxCreate_v4 && !rc->cuCtxCreate_v2) return 0;
    return rc->cuInit(0) == 0;
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
