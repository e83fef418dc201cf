/* SPDX-License-Identifier: BSD-2-Clause */
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
        log(CW_LOG_WARNING, "%s: not a live cw_context; nothing destroyed", current_api());
        return;
    }
    if (ctx->kind == CW_CONTEXT_GREEN) {
        // Partitions are borrowed from their group, which holds their
        // reference (cw_partition_group_destroy drops it).
        log(CW_LOG_WARNING, "%s: a partition's context is borrowed from its cw_partition_group; nothing destroyed",
            current_api());
        return;
    }
    core::context_release(ctx);
}

CW_API cw_status cw_context_get_info(const cw_context *ctx, cw_context_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(info != NULL);
    cw_context_info i;
    memset(&i, 0, sizeof i);
    i.device = ctx->ordinal;
    i.kind = ctx->kind;
    i.handle = ctx->cu;
    i.least_priority = ctx->prio_least;
    i.greatest_priority = ctx->prio_greatest;
    i.sm_count = ctx->sm_count;
    *info = i;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_synchronize(cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(ctx);
    return core::context_synchronize(ctx);
}

}  // extern "C"
