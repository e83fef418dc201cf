/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave kernel layer: launches, each kernel's functions per context, its
// parameters, and what a kernel asks of its launch (kernel.hpp).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.hpp"

namespace cw {
namespace kernels {

using namespace core;

namespace {
const CUcontext kFilling = reinterpret_cast<CUcontext>(uintptr_t(1));
// What a kernel's params point to when the driver cannot list them.
const KernelParams kUnknown = {false, 0, {0}};

// Lists k's parameters (the kernel is loaded in the current context) and
// publishes them, once: a thread that loses the race frees its own list and
// takes the winner's. A driver that cannot list them (no
// cuKernelGetParamInfo, or an error other than the index past the end)
// publishes kUnknown, so that nobody asks again; running out of host memory
// publishes nothing. Returns what is published, or nullptr.
const KernelParams *publish_params(const cw_kernel *k) {
    const KernelParams *have = k->params.load(std::memory_order_acquire);
    if (have) return have;
    const KernelParams *made = &kUnknown;
    KernelParams *list = nullptr;
    if (drv().cuKernelGetParamInfo) {
        size_t cap = 16;
        list = static_cast<KernelParams *>(malloc(sizeof(KernelParams) + cap * sizeof(size_t)));
        if (!list) return nullptr;
        list->known = true;
        list->count = 0;
        for (;;) {
            size_t off = 0, size = 0;
            CUresult r = drv().cuKernelGetParamInfo(k->cu, list->count, &off, &size);
            if (r == CUDA_ERROR_INVALID_VALUE) {  // past the last one
                made = list;
                break;
            }
            if (r != CUDA_SUCCESS) {
                free(list);
                list = nullptr;
                break;
            }
            if (list->count == cap) {
                cap *= 2;
                void *more = realloc(list, sizeof(KernelParams) + cap * sizeof(size_t));
                if (!more) {
                    free(list);
                    return nullptr;
                }
                list = static_cast<KernelParams *>(more);
            }
            list->sizes[list->count++] = size;
        }
    }
    const KernelParams *expected = nullptr;
    if (k->params.compare_exchange_strong(expected, made, std::memory_order_acq_rel, std::memory_order_acquire))
        return made;
    free(list);  // another thread published first
    return expected;
}

// The kernel's function in ctx from the cache, or nullptr.
CUfunction cached_function(const cw_kernel *k, CUcontext ctx) {
    for (const auto &e : k->fns) {
        CUcontext c = e.ctx.load(std::memory_order_acquire);
        if (c == ctx) return e.fn;
        if (!c) break;
    }
    return nullptr;
}

// The first launch of k in s's context: loads k there (cuKernelGetFunction)
// and keeps the function (a launch through it skips the driver's per-launch
// lookup of the kernel in the stream's context; up to four contexts, not
// for the legacy stream, whose launches name the kernel), and lists k's
// parameters if nobody has yet. Best effort, outside captures only
// (resolving may load code, which a capture may not see): a failure leaves
// the launch to the driver, unchecked, and the thread's error detail as it
// was.
void first_launch(cw_kernel *k, const cw_stream *s) {
    if (!drv().cuKernelGetFunction || capturing(s)) return;
    const bool need_params = !k->params.load(std::memory_order_acquire);
    // A slot of k's function cache for s's context: claimed (kFilling) by
    // this thread, or nullptr (full, the legacy stream, or the context's
    // entry there or being filled by another thread).
    std::atomic<CUcontext> *slot = nullptr;
    CUfunction *slot_fn = nullptr;
    bool room = false;  // a full cache costs a launch no driver call, and no atomic write
    if (!s->is_null)
        for (const auto &e : k->fns) room = room || !e.ctx.load(std::memory_order_acquire);
    if (room)
        for (auto &e : k->fns) {
            CUcontext expected = nullptr;
            if (e.ctx.load(std::memory_order_acquire) == s->ctx->cu) break;
            if (!e.ctx.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) {
                if (expected == s->ctx->cu) break;
                continue;  // another context's, or being filled
            }
            slot = &e.ctx;
            slot_fn = &e.fn;
            break;
        }
    if (!slot && !need_params) return;
    KeepError keep;
    CurrentGuard guard;
    CUfunction f = nullptr;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    bool ok = guard.enter(s->ctx->cu) == CW_SUCCESS && drv().cuStreamIsCapturing(s->cu, &cs) == CUDA_SUCCESS &&
              cs == CU_STREAM_CAPTURE_STATUS_NONE && drv().cuKernelGetFunction(&f, k->cu) == CUDA_SUCCESS && f;
    if (ok && need_params) publish_params(k);
    ok = guard.leave() == CW_SUCCESS && ok;
    if (!slot) return;
    if (ok) {
        *slot_fn = f;
        slot->store(s->ctx->cu, std::memory_order_release);
    } else {
        slot->store(nullptr, std::memory_order_release);  // free again
    }
}

// The launch's arguments against k's parameters, once known (see jit.h).
cw_status check_args(const cw_kernel *k, const cw_launch_config *cfg, void **args) {
    const KernelParams *p = k->params.load(std::memory_order_acquire);
    if (!p || !p->known) return CW_SUCCESS;  // not known (yet): unchecked
    if (!args && p->count)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: args is NULL but the kernel \"%s\" has %zu parameter(s); nothing launched",
                    k->name, p->count);
    if (!cfg->arg_sizes) return CW_SUCCESS;
    if (cfg->n_args != p->count)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: %u argument(s) given, the kernel \"%s\" has %zu parameter(s); nothing "
                    "launched",
                    cfg->n_args, k->name, p->count);
    for (size_t i = 0; i < p->count; i++)
        if (cfg->arg_sizes[i] != p->sizes[i])
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: argument %zu has %zu bytes, parameter %zu of the kernel \"%s\" has %zu; "
                        "nothing launched",
                        i, cfg->arg_sizes[i], i, k->name, p->sizes[i]);
    return CW_SUCCESS;
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
    // itself (the driver finds its function in the stream's context). After
    // a kernel's first launch in a context: no driver call but the launch.
    CUfunction fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    if (__builtin_expect(!fn || !k->params.load(std::memory_order_acquire), 0)) {
        first_launch(k, s);
        fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    }
    CW_TRY(check_args(k, cfg, args));
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
    QuietCall quiet;
    CW_TRY(refuse_load_while_persistent(quiet, "cw_kernel_preload"));
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    if (!k->params.load(std::memory_order_acquire)) {
        KeepError keep;  // best effort: the preload itself succeeded
        publish_params(k);
    }
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
    if (!k->params.load(std::memory_order_acquire)) {
        KeepError keep;
        publish_params(k);
    }
    CW_TRY(guard.leave());
    *count = n;
    return CW_SUCCESS;
}

void kernel_params_free(cw_kernel *k) {
    const KernelParams *p = k->params.exchange(nullptr, std::memory_order_acq_rel);
    if (p && p != &kUnknown) free(const_cast<KernelParams *>(p));
}

}  // namespace kernels
}  // namespace cw
