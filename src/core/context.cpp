/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: contexts (primary, external, green) and the current-context
// rule (context.hpp).
#include "core/context.hpp"

#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.hpp"
#include "core/device.hpp"

namespace cw {
namespace core {

cw_status CurrentGuard::leave() {
    if (!switched_) return CW_SUCCESS;
    switched_ = false;
    CUresult r = drv().cuCtxSetCurrent(prev_);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxSetCurrent", "could not restore the caller's current context");
    return CW_SUCCESS;
}

cw_status CurrentGuard::enter(CUcontext ctx) {
    CW_CU(cuCtxGetCurrent, (&prev_));
    if (prev_ != ctx) {
        CW_CU(cuCtxSetCurrent, (ctx));
        switched_ = true;
    }
    return CW_SUCCESS;
}

namespace {

// The teardown hooks registered by the owners of a context's parts.
struct Hook {
    void (*teardown)(cw_context *);
    TeardownStage stage;
};
constexpr int kMaxHooks = 8;
Hook g_hooks[kMaxHooks];
std::atomic<int> g_hook_count{0};
std::atomic<int> g_hook_lock{0};

void context_free(void *owner) {
    cw_context *ctx = static_cast<cw_context *>(owner);
    {
        // What the context made for itself goes first, with it current.
        CurrentGuard guard;
        (void)guard.enter(ctx->cu);
        const int n = g_hook_count.load(std::memory_order_acquire);
        for (int stage = kTeardownUsers; stage <= kTeardownEvents; stage++)
            for (int i = 0; i < n; i++)
                if (g_hooks[i].stage == stage) g_hooks[i].teardown(ctx);
    }
    if (ctx->kind == CW_CONTEXT_GREEN) {
        // Current on this thread, it would be a context the driver has freed
        // (the next cuCtxSetCurrent frees it again): nothing is current then.
        CUcontext cur = nullptr;
        if (drv().cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx->cu) (void)drv().cuCtxSetCurrent(nullptr);
        CUresult r = drv().cuGreenCtxDestroy(ctx->green);
        if (r != CUDA_SUCCESS)
            log(CW_LOG_WARNING, "%s: cuGreenCtxDestroy (device %d) failed with CUresult %d", current_api(),
                ctx->ordinal, r);
    }
    if (ctx->kind == CW_CONTEXT_PRIMARY) {
        CUresult r = drv().cuDevicePrimaryCtxRelease(ctx->device);
        if (r != CUDA_SUCCESS)
            log(CW_LOG_WARNING, "%s: cuDevicePrimaryCtxRelease(device %d) failed with CUresult %d", current_api(),
                ctx->ordinal, r);
    }
    ctx->~cw_context();
    handle_free(ctx);
}

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

// Reads the device, priority range and the device's SM count of ctx (made
// current for the query).
cw_status describe(CUcontext cu, CUdevice *dev, int *least, int *greatest, unsigned *sm_count) {
    CurrentGuard guard;
    CW_TRY(guard.enter(cu));
    CW_CU(cuCtxGetDevice, (dev));
    CW_CU(cuCtxGetStreamPriorityRange, (least, greatest));
    int sms = 0;
    CW_CU(cuDeviceGetAttribute, (&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, *dev));
    *sm_count = (unsigned)sms;
    return guard.leave();
}

}  // namespace

void context_on_teardown(void (*teardown)(cw_context *), TeardownStage stage) {
    const int n = g_hook_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (g_hooks[i].teardown == teardown) return;  // the usual case: registered before
    SpinLock lock(g_hook_lock);
    const int m = g_hook_count.load(std::memory_order_relaxed);
    for (int i = 0; i < m; i++)
        if (g_hooks[i].teardown == teardown) return;
    // The library has a fixed handful of owners, far fewer than kMaxHooks.
    if (m == kMaxHooks) {
        log(CW_LOG_ERROR, "cuweave: internal: more than %d context teardown hooks", kMaxHooks);
        return;
    }
    g_hooks[m] = Hook{teardown, stage};
    g_hook_count.store(m + 1, std::memory_order_release);
}

void context_retain(cw_context *ctx) { ctx->refs.fetch_add(1, std::memory_order_relaxed); }

void context_release(cw_context *ctx) {
    if (ctx->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Gone for callers now. Freeing its host memory and the context itself
    // waits for running persistent work (any context of the device): while
    // some runs, that happens when none does.
    handle_retire(ctx);
    ctx->idle.run = context_free;
    ctx->idle.owner = ctx;
    release_when_idle(&ctx->idle);
}

int clamp_priority(const cw_context *ctx, int priority) {
    // greatest is the numerically smallest (highest priority).
    if (priority > ctx->prio_least) return ctx->prio_least;
    if (priority < ctx->prio_greatest) return ctx->prio_greatest;
    return priority;
}

cw_status context_create_primary(int ordinal, cw_context **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CUdevice dev;
    CW_TRY(device_from_ordinal(ordinal, &dev));
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUcontext cu = nullptr;
    CUresult r = drv().cuDevicePrimaryCtxRetain(&cu, dev);
    if (r != CUDA_SUCCESS) {
        free(ctx);
        return fail_cu(r, "cuDevicePrimaryCtxRetain");
    }
    CUdevice seen;
    cw_status st = describe(cu, &seen, &ctx->prio_least, &ctx->prio_greatest, &ctx->sm_count);
    if (st != CW_SUCCESS) {
        drv().cuDevicePrimaryCtxRelease(dev);
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_PRIMARY;
    ctx->cu = cu;
    ctx->device = dev;
    ctx->ordinal = ordinal;
    room.publish(ctx);
    *out = ctx;
    return CW_SUCCESS;
}

cw_status context_wrap(CUcontext cu, cw_context **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_TRY(ensure_init());
    unsigned api = 0;
    CUresult r = drv().cuCtxGetApiVersion(cu, &api);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxGetApiVersion", "the CUcontext to wrap is not a live context");
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = describe(cu, &ctx->device, &ctx->prio_least, &ctx->prio_greatest, &ctx->sm_count);
    if (st == CW_SUCCESS) st = ordinal_of(ctx->device, &ctx->ordinal);
    if (st != CW_SUCCESS) {
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_EXTERNAL;
    ctx->cu = cu;
    room.publish(ctx);
    *out = ctx;
    return CW_SUCCESS;
}

cw_status context_new_green(CUgreenCtx green, CUdevice dev, int ordinal, cw_context **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUcontext cu = nullptr;
    CUresult r = drv().cuCtxFromGreenCtx(&cu, green);
    if (r != CUDA_SUCCESS) {
        free(ctx);
        return fail_cu(r, "cuCtxFromGreenCtx");
    }
    // Same device, same priority range as its primary context.
    cw_status st = device_priority_range(ordinal, &ctx->prio_least, &ctx->prio_greatest);
    if (st != CW_SUCCESS) {
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_GREEN;
    ctx->cu = cu;
    ctx->green = green;
    ctx->device = dev;
    ctx->ordinal = ordinal;
    room.publish(ctx);
    *out = ctx;
    return CW_SUCCESS;
}

cw_status context_synchronize(cw_context *ctx) {
    QuietCall quiet;  // a loop launched on ctx meanwhile waits for the synchronize
    if (quiet.enter(ctx->cu) > 0)
        return fail(CW_ERROR_INVALID_STATE,
                    "a GPU-resident loop runs on this context: its work never ends, so synchronizing the whole "
                    "context would never return; synchronize streams, or tear the loop down first");
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CW_CU(cuCtxSynchronize, ());
    return guard.leave();
}

cw_status host_mapped_alloc(cw_context *ctx, size_t bytes, unsigned extra_flags, void **host, CUdeviceptr *dev) {
    void *p = nullptr;
    CW_CU(cuMemHostAlloc, (&p, bytes, CU_MEMHOSTALLOC_DEVICEMAP | extra_flags));
    CUdeviceptr d = 0;
    CUresult r = drv().cuMemHostGetDevicePointer(&d, p, 0);
    if (r != CUDA_SUCCESS) {
        const cw_status st = fail_cu(r, "cuMemHostGetDevicePointer");
        KeepError keep;
        (void)host_free(ctx, p);  // cuMemFreeHost waits for running resident loops
        return st;
    }
    memset(p, 0, bytes);
    *host = p;
    *dev = d;
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
