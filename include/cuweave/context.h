/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: contexts.
 *
 * A cw_context is what every other cuweave object is created on. It is one of:
 *  - a device's primary context, retained on create and released on destroy
 *    (the context the CUDA runtime and most libraries share);
 *  - an external CUcontext that the embedding program owns (a video tool's
 *    AVCUDADeviceContext, libvmaf's cu_ctx): cuweave wraps it without taking
 *    ownership and never destroys it or changes its flags;
 *  - a green context: a partition of a device's SMs, made by a
 *    cw_partition_group (partition.h) and borrowed from it.
 *
 * Current context rule: every cuweave call that needs a current context makes
 * the object's context current on the calling thread and restores what was
 * current before it returns, on success and on failure. The caller never
 * needs to set a context for cuweave, and cuweave never leaves one set.
 *
 * Lifetime: objects created on a context keep it alive; cw_context_destroy()
 * drops the caller's reference and the context goes away when the last
 * object made on it is destroyed.
 */
#ifndef CUWEAVE_CONTEXT_H
#define CUWEAVE_CONTEXT_H

#include "cuweave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_context cw_context;

typedef enum cw_context_kind {
    CW_CONTEXT_PRIMARY = 0,  /* a device's primary context, retained by cuweave */
    CW_CONTEXT_EXTERNAL = 1, /* a CUcontext owned by the caller */
    CW_CONTEXT_GREEN = 2     /* a green context (SM partition) owned by cuweave */
} cw_context_kind;

/*
 * Creates a cw_context on device ordinal `device`'s primary context, which it
 * retains (cuDevicePrimaryCtxRetain) until the last reference goes.
 * Destroy it with cw_context_destroy. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new context.
 *   CW_ERROR_INVALID_ARGUMENT  out is NULL; device is negative or not below
 *                              the device count.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than 12.0 (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched and nothing is retained.
 */
CW_API cw_status cw_context_create(cw_context **out, int device);

/*
 * Wraps a CUcontext owned by the caller. cuweave never destroys it, never
 * changes its flags, and restores the caller's current context after every
 * call. The caller must keep ctx alive until every cuweave object made on
 * the wrapper is destroyed. The device is taken from the context. Destroy
 * the wrapper with cw_context_destroy. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new context.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    the driver does not know ctx.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than 12.0 (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_context_wrap(cw_context **out, CUcontext ctx);

/*
 * Drops the caller's reference to *ctx and sets *ctx to NULL. Accepts NULL
 * and a pointer to NULL; never fails. A primary context is released once
 * the last object made on it is gone; an external one is left untouched. A
 * partition's context (CW_CONTEXT_GREEN) is borrowed from its
 * cw_partition_group, not the caller's to destroy: *ctx is set to NULL and
 * nothing else happens but a warning (CW_LOG_WARNING; the thread's detail
 * is left as it was). A handle that is not a live context is ignored the
 * same way. A failing release is reported through the
 * log callback. While a GPU-resident loop runs in the process, the release
 * (which frees memory and would wait for the loop) happens when the last
 * running loop stops.
 *
 * Returns: nothing.
 */
CW_API void cw_context_destroy(cw_context **ctx);

/* Facts about a context. Filled by cw_context_get_info(). */
typedef struct cw_context_info {
    int device;              /* the device ordinal */
    cw_context_kind kind;
    CUcontext handle;        /* the driver context (for an external context, the one wrapped); it stays
                                owned as before: do not destroy it */
    int least_priority;      /* stream priorities: the lowest, the default (0 on current GPUs) */
    int greatest_priority;   /* the highest, numerically smallest (e.g. -5) */
    unsigned sm_count;       /* SMs: the partition's for a green context, the device's otherwise */
    uint8_t reserved[36];    /* zeroed; room for new fields */
} cw_context_info;

/*
 * Fills *info. No driver call, no lock. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes ctx.
 *   CW_ERROR_INVALID_ARGUMENT  ctx or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 */
CW_API cw_status cw_context_get_info(const cw_context *ctx, cw_context_info *info);

/*
 * Blocks until all work in the context is done (cuCtxSynchronize).
 *
 * Returns:
 *   CW_SUCCESS                 all work in the context is done.
 *   CW_ERROR_INVALID_ARGUMENT  ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_INVALID_STATE     a GPU-resident loop (cw_resident) runs on the
 *                              same driver context: its work never ends, so
 *                              the call would never return.
 *   CW_ERROR_DEVICE_FAULT      earlier work faulted.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 */
CW_API cw_status cw_context_synchronize(cw_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_CONTEXT_H */
