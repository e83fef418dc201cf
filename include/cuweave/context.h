/*
 * cuweave: contexts.
 *
 * A cw_context is what every other cuweave object is created on. It is one of:
 *  - a device's primary context, retained on create and released on destroy
 *    (the context the CUDA runtime and most libraries share);
 *  - an external CUcontext that the embedding program owns (a video tool's
 *    AVCUDADeviceContext, libvmaf's cu_ctx): cuweave wraps it without taking
 *    ownership and never destroys it or changes its flags;
 *  - (later) a green context: a partition of a device's SMs.
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
 *
 * Returns CW_SUCCESS and a new handle in *out; CW_ERROR_INVALID_ARGUMENT when
 * out is NULL or device is negative or out of range; CW_ERROR_OUT_OF_MEMORY;
 * what cw_init() returns; or the error of the failing driver call. On failure
 * *out is untouched and nothing is retained. Thread-safe.
 */
CW_API cw_status cw_context_create(cw_context **out, int device);

/*
 * Wraps a CUcontext owned by the caller. cuweave never destroys it, never
 * changes its flags, and restores the caller's current context after every
 * call. The caller must keep ctx alive until every cuweave object made on
 * the wrapper is destroyed. The device is taken from the context.
 *
 * Returns CW_SUCCESS and a new handle in *out; CW_ERROR_INVALID_ARGUMENT when
 * out or ctx is NULL; CW_ERROR_INVALID_HANDLE when the driver does not know
 * ctx; CW_ERROR_OUT_OF_MEMORY; what cw_init() returns. Thread-safe.
 */
CW_API cw_status cw_context_wrap(cw_context **out, CUcontext ctx);

/*
 * Drops the caller's reference to *ctx and sets *ctx to NULL. Accepts NULL
 * and a pointer to NULL. A primary context is released once the last object
 * made on it is gone; an external one is left untouched. A partition's
 * context (CW_CONTEXT_GREEN) belongs to its cw_partition_set: the call then
 * leaves it alone and *ctx as is, recording CW_ERROR_INVALID_STATE in the
 * detail. A failing release is reported through the log callback. While a
 * GPU-resident loop runs in the process, the release (which frees memory
 * and would wait for the loop) happens when the last running loop stops.
 */
CW_API void cw_context_destroy(cw_context **ctx);

/* Writes the context's device ordinal. CW_ERROR_INVALID_ARGUMENT on NULL. */
CW_API cw_status cw_context_get_device(const cw_context *ctx, int *device);

/* Writes the kind of context. CW_ERROR_INVALID_ARGUMENT on NULL. */
CW_API cw_status cw_context_get_kind(const cw_context *ctx, cw_context_kind *kind);

/*
 * Writes the driver context (for an external context, the one wrapped).
 * The CUcontext stays owned as before: do not destroy a primary one.
 */
CW_API cw_status cw_context_get_handle(const cw_context *ctx, CUcontext *handle);

/*
 * Writes the stream priority range of the context (see
 * cw_device_get_priority_range). Either pointer may be NULL, not both.
 */
CW_API cw_status cw_context_get_priority_range(const cw_context *ctx, int *least, int *greatest);

/*
 * Blocks until all work in the context is done (cuCtxSynchronize).
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, CW_ERROR_DEVICE_FAULT when
 * earlier work faulted, or the driver's error; CW_ERROR_INVALID_STATE while
 * a GPU-resident loop (cw_resident) runs on the same driver context: its
 * work never ends, so the call would never return.
 */
CW_API cw_status cw_context_synchronize(cw_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_CONTEXT_H */
