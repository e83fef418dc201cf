// cuweave api: include/cuweave/context.h.
#include "api/api.hpp"
#include "core/context.hpp"

using namespace cw;

extern "C" {

CW_API cw_status cw_context_create(cw_context **out, int device) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(device >= 0);
    return core::context_create_primary(device, out);
}

CW_API cw_status cw_context_wrap(cw_context **out, CUcontext cu) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(cu != NULL);
    return core::context_wrap(cu, out);
}

CW_API void cw_context_destroy(cw_context **pctx) {
    CW_ENTRY;
    if (!pctx || !*pctx) return;
    cw_context *ctx = *pctx;
    *pctx = NULL;
    if (!live(ctx)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_context; nothing destroyed");
        return;
    }
    if (ctx->kind == CW_CONTEXT_GREEN) {
        // Partitions are borrowed from their set: cw_partition_set_destroy.
        *pctx = ctx;
        fail(CW_ERROR_INVALID_STATE, "a partition's context belongs to its cw_partition_set; nothing destroyed");
        return;
    }
    core::context_release(ctx);
}

CW_API cw_status cw_context_get_device(const cw_context *ctx, int *device) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(device != NULL);
    *device = ctx->ordinal;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_kind(const cw_context *ctx, cw_context_kind *kind) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(kind != NULL);
    *kind = ctx->kind;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_handle(const cw_context *ctx, CUcontext *handle) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(handle != NULL);
    *handle = ctx->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_priority_range(const cw_context *ctx, int *least, int *greatest) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(least != NULL || greatest != NULL);
    if (least) *least = ctx->prio_least;
    if (greatest) *greatest = ctx->prio_greatest;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_synchronize(cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    return core::context_synchronize(ctx);
}

}  // extern "C"
