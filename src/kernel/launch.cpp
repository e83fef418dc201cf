// cuweave kernel layer: launches, each kernel's functions per context, and
// what a kernel asks of its launch (kernel.hpp).
#include <string.h>

#include "kernel/kernel.hpp"

namespace cw {
namespace kernels {

using namespace core;

namespace {
const CUcontext kFilling = reinterpret_cast<CUcontext>(uintptr_t(1));

// The kernel's function in ctx from the cache, or nullptr.
CUfunction cached_function(const cw_kernel *k, CUcontext ctx) {
    for (const auto &e : k->fns) {
        CUcontext c = e.ctx.load(std::memory_order_acquire);
        if (c == ctx) return e.fn;
        if (!c) break;
    }
    return nullptr;
}

// Puts the kernel's function in s's context into the cache (best effort:
// nothing when the cache is full, the stream is capturing (resolving may
// load code, which a capture may not see), or the driver says no).
void cache_function(cw_kernel *k, const cw_stream *s) {
    if (!drv().cuKernelGetFunction || capturing(s) || s->is_null) return;
    bool room = false;  // a full cache costs a launch no driver call
    for (const auto &e : k->fns) room = room || !e.ctx.load(std::memory_order_acquire);
    if (!room) return;
    CUstreamCaptureStatus cs = 0;
    if (drv().cuStreamIsCapturing(s->cu, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE) return;
    for (auto &e : k->fns) {
        CUcontext expected = nullptr;
        if (e.ctx.load(std::memory_order_acquire) == s->ctx->cu) return;
        if (!e.ctx.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) {
            if (expected == s->ctx->cu) return;
            continue;  // another context's, or being filled
        }
        CurrentGuard guard;
        CUfunction f = nullptr;
        if (guard.enter(s->ctx->cu) == CW_SUCCESS && drv().cuKernelGetFunction(&f, k->cu) == CUDA_SUCCESS &&
            guard.leave() == CW_SUCCESS && f) {
            e.fn = f;
            e.ctx.store(s->ctx->cu, std::memory_order_release);
        } else {
            e.ctx.store(nullptr, std::memory_order_release);  // free again
        }
        return;
    }
}
}  // namespace

void launch_config_default(cw_launch_config *c) {
    memset(c, 0, sizeof *c);
    c->grid[0] = c->grid[1] = c->grid[2] = 1;
    c->block[0] = c->block[1] = c->block[2] = 1;
}

cw_status launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args) {
    CUlaunchAttribute attrs[2];
    unsigned na = 0;
    if (cfg->cluster[0] || cfg->cluster[1] || cfg->cluster[2]) {
        memset(&attrs[na], 0, sizeof attrs[na]);
        attrs[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[na].value.clusterDim.x = cfg->cluster[0] ? cfg->cluster[0] : 1;
        attrs[na].value.clusterDim.y = cfg->cluster[1] ? cfg->cluster[1] : 1;
        attrs[na].value.clusterDim.z = cfg->cluster[2] ? cfg->cluster[2] : 1;
        na++;
    }
    if (cfg->use_priority) {
        memset(&attrs[na], 0, sizeof attrs[na]);
        attrs[na].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attrs[na].value.priority = cfg->priority;
        na++;
    }
    CUlaunchConfig lc;
    lc.gridDimX = cfg->grid[0] ? cfg->grid[0] : 1;
    lc.gridDimY = cfg->grid[1] ? cfg->grid[1] : 1;
    lc.gridDimZ = cfg->grid[2] ? cfg->grid[2] : 1;
    lc.blockDimX = cfg->block[0] ? cfg->block[0] : 1;
    lc.blockDimY = cfg->block[1] ? cfg->block[1] : 1;
    lc.blockDimZ = cfg->block[2] ? cfg->block[2] : 1;
    lc.sharedMemBytes = cfg->shared_bytes;
    lc.hStream = s->cu;
    lc.attrs = na ? attrs : nullptr;
    lc.numAttrs = na;
    // The kernel's function in s's context when cached; else the kernel
    // itself (the driver finds its function in the stream's context).
    CUfunction fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    if (!fn) {
        cache_function(k, s);
        fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    }
    if (fn && na == 0)  // the plain launch: the cheapest to enqueue
        return on_stream(s, "cuLaunchKernel", [&] {
            return drv().cuLaunchKernel(fn, lc.gridDimX, lc.gridDimY, lc.gridDimZ, lc.blockDimX, lc.blockDimY,
                                        lc.blockDimZ, lc.sharedMemBytes, lc.hStream, args, nullptr);
        });
    if (!fn) fn = reinterpret_cast<CUfunction>(k->cu);
    return on_stream(s, "cuLaunchKernelEx", [&] { return drv().cuLaunchKernelEx(&lc, fn, args, nullptr); });
}

cw_status kernel_preload(const cw_kernel *k, cw_context *ctx) {
    if (!drv().cuKernelGetFunction) return fail(CW_ERROR_NOT_SUPPORTED, "this driver has no library API (CUDA 12.0)");
    CW_TRY(refuse_load_while_persistent("cw_kernel_preload"));
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    return guard.leave();
}

cw_status kernel_params(const cw_kernel *k, cw_context *ctx, size_t *count, size_t *sizes, size_t cap) {
    if (!drv().cuKernelGetParamInfo || !drv().cuKernelGetFunction)
        return fail(CW_ERROR_NOT_SUPPORTED, "this driver cannot list a kernel's parameters (CUDA 12.4)");
    // Loaded lazily: make sure it is in ctx before asking.
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    size_t n = 0;
    for (;; n++) {
        size_t off = 0, size = 0;
        CUresult r = drv().cuKernelGetParamInfo(k->cu, n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuKernelGetParamInfo");
        if (n < cap) sizes[n] = size;
    }
    CW_TRY(guard.leave());
    *count = n;
    return CW_SUCCESS;
}

}  // namespace kernels
}  // namespace cw
