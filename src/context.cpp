// cuweave: contexts (primary and external).
#include <new>
#include <stdlib.h>

#include "core.hpp"

namespace cw {

void context_retain(cw_context *ctx) { ctx->refs.fetch_add(1, std::memory_order_relaxed); }

void context_release(cw_context *ctx) {
    if (ctx->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (ctx->kind == CW_CONTEXT_PRIMARY) {
        CUresult r = drv().cuDevicePrimaryCtxRelease(ctx->device);
        if (r != CUDA_SUCCESS)
            log(CW_LOG_WARNING, "%s: cuDevicePrimaryCtxRelease(device %d) failed with CUresult %d", current_api(),
                ctx->ordinal, r);
    }
    ctx->tag = kTagDead;
    ctx->~cw_context();
    free(ctx);
}

namespace {

cw_context *new_context() {
    void *mem = malloc(sizeof(cw_context));
    if (!mem) return nullptr;
    cw_context *ctx = new (mem) cw_context();
    ctx->refs.store(1, std::memory_order_relaxed);
    return ctx;
}

// Finds the ordinal of a CUdevice (the two coincide on every driver seen, but
// the API does not promise it).
cw_status ordinal_of(CUdevice dev, int *ordinal) {
    int count = 0;
    CW_CU(cuDeviceGetCount, (&count));
    for (int i = 0; i < count; i++) {
        CUdevice d;
        CW_CU(cuDeviceGet, (&d, i));
        if (d == dev) {
            *ordinal = i;
            return CW_SUCCESS;
        }
    }
    return fail(CW_ERROR_INTERNAL, "device %d of the context is not among the %d devices", (int)dev, count);
}

// Reads the device and priority range of ctx (made current for the query).
cw_status describe(CUcontext cu, CUdevice *dev, int *least, int *greatest) {
    CurrentGuard guard;
    CW_TRY(guard.enter(cu));
    CW_CU(cuCtxGetDevice, (dev));
    CW_CU(cuCtxGetStreamPriorityRange, (least, greatest));
    return guard.leave();
}

}  // namespace
}  // namespace cw

using namespace cw;

extern "C" {

CW_API cw_status cw_context_create(cw_context **out, int device) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(device >= 0);
    CUdevice dev;
    CW_TRY(device_from_ordinal(device, &dev));

    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUcontext cu = nullptr;
    CUresult r = drv().cuDevicePrimaryCtxRetain(&cu, dev);
    if (r != CUDA_SUCCESS) {
        free(ctx);
        return fail_cu(r, "cuDevicePrimaryCtxRetain");
    }
    CUdevice seen;
    cw_status st = describe(cu, &seen, &ctx->prio_least, &ctx->prio_greatest);
    if (st != CW_SUCCESS) {
        drv().cuDevicePrimaryCtxRelease(dev);
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_PRIMARY;
    ctx->cu = cu;
    ctx->device = dev;
    ctx->ordinal = device;
    ctx->tag = kTagContext;
    *out = ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_wrap(cw_context **out, CUcontext cu) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(cu != NULL);
    CW_TRY(ensure_init());
    unsigned api = 0;
    CUresult r = drv().cuCtxGetApiVersion(cu, &api);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxGetApiVersion", "the CUcontext to wrap is not a live context");
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = describe(cu, &ctx->device, &ctx->prio_least, &ctx->prio_greatest);
    if (st == CW_SUCCESS) st = ordinal_of(ctx->device, &ctx->ordinal);
    if (st != CW_SUCCESS) {
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_EXTERNAL;
    ctx->cu = cu;
    ctx->tag = kTagContext;
    *out = ctx;
    return CW_SUCCESS;
}

CW_API void cw_context_destroy(cw_context **pctx) {
    CW_ENTRY;
    if (!pctx || !*pctx) return;
    cw_context *ctx = *pctx;
    *pctx = NULL;
    if (!context_ok(ctx)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_context; nothing destroyed");
        return;
    }
    context_release(ctx);
}

CW_API cw_status cw_context_get_device(const cw_context *ctx, int *device) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(device != NULL);
    *device = ctx->ordinal;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_kind(const cw_context *ctx, cw_context_kind *kind) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(kind != NULL);
    *kind = ctx->kind;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_handle(const cw_context *ctx, CUcontext *handle) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(handle != NULL);
    *handle = ctx->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_priority_range(const cw_context *ctx, int *least, int *greatest) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(least != NULL || greatest != NULL);
    if (least) *least = ctx->prio_least;
    if (greatest) *greatest = ctx->prio_greatest;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_synchronize(cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CW_CU(cuCtxSynchronize, ());
    return guard.leave();
}

}  // extern "C"
