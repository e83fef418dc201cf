/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: streams, ordering between streams, fork and join
// (stream.hpp).
#include "core/stream.hpp"

#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/event.hpp"
#include "core/pool.hpp"

namespace cw {
namespace core {
namespace {

unsigned cu_flags(unsigned cw_flags) { return (cw_flags & CW_STREAM_BLOCKING) ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING; }

cw_stream *alloc_stream() {
    void *mem = malloc(sizeof(cw_stream));
    if (!mem) return nullptr;
    return new (mem) cw_stream();
}

std::atomic<void (*)(cw_stream *)> g_abandon{nullptr};

}  // namespace

void stream_on_abandon(void (*abandon)(cw_stream *s)) { g_abandon.store(abandon, std::memory_order_release); }

void note_capture_failure(const cw_stream *cs, CUresult r, const char *entry) {
    cw_stream *s = const_cast<cw_stream *>(cs);
    if (!s->cap.active) return;
    int expected = 0;
    if (!s->cap.noted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
    copy_text(s->cap.note.api, sizeof s->cap.note.api, current_api());
    copy_text(s->cap.note.call, sizeof s->cap.note.call, entry);
    s->cap.note.result = r;
    s->cap.noted.store(2, std::memory_order_release);
}

cw_status stream_new(cw_context *ctx, unsigned flags, int priority, bool retain_ctx, cw_stream **out,
                     cw_stream_pool *pool, uint32_t index) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_stream *s = alloc_stream();
    if (!s) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CurrentGuard guard;
    cw_status st = guard.enter(ctx->cu);
    CUstream cu = nullptr;
    int prio = clamp_priority(ctx, priority);
    if (st == CW_SUCCESS && ctx->kind == CW_CONTEXT_GREEN) {
        // The driver makes green-context streams non-blocking only.
        if (flags & CW_STREAM_BLOCKING)
            st = fail(CW_ERROR_NOT_SUPPORTED, "streams of a partition (green context) are always non-blocking");
        CUresult r = st == CW_SUCCESS ? drv().cuGreenCtxStreamCreate(&cu, ctx->green, CU_STREAM_NON_BLOCKING, prio)
                                      : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuGreenCtxStreamCreate");
    } else if (st == CW_SUCCESS) {
        CUresult r = drv().cuStreamCreateWithPriority(&cu, cu_flags(flags), prio);
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuStreamCreateWithPriority");
    }
    if (st == CW_SUCCESS) st = event_get(ctx, &s->ev);
    cw_status left = guard.leave();
    if (st == CW_SUCCESS) st = left;
    if (st != CW_SUCCESS) {
        if (s->ev) event_put(ctx, s->ev);
        if (cu) drv().cuStreamDestroy(cu);
        free(s);
        return st;
    }
    s->ctx = ctx;
    s->cu = cu;
    s->flags = flags;
    s->priority = prio;
    s->owned = true;
    s->holds_ctx = retain_ctx;
    if (retain_ctx) context_retain(ctx);
    s->serial = stream_serial();
    s->pool = pool;
    s->index = index;
    room.publish(s);  // complete: live from here on
    *out = s;
    return CW_SUCCESS;
}

void stream_free(cw_stream *s) {
    cw_context *ctx = s->ctx;
    if (s->cap.active) {
        // Only the graph layer begins captures, and it registers first.
        void (*abandon)(cw_stream *) = g_abandon.load(std::memory_order_acquire);
        if (abandon) abandon(s);
    }
    handle_retire(s);
    if (s->owned) {
        CUresult r = drv().cuStreamDestroy(s->cu);
        if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuStreamDestroy failed with CUresult %d", current_api(), r);
    }
    event_put(ctx, s->ev);
    bool holds = s->holds_ctx;
    s->~cw_stream();
    handle_free(s);
    if (holds) context_release(ctx);
}

uint64_t stream_serial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

cw_status stream_wrap(cw_context *ctx, CUstream stream, cw_stream **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_TRY(ensure_init());
    const bool is_null = stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    if (!is_null) {
        CUcontext owner = nullptr;
        CW_CU(cuStreamGetCtx, (stream, &owner));
        if (owner != ctx->cu)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stream belongs to another context");
    }
    unsigned cuf = 0;
    int prio = 0;
    CW_CU(cuStreamGetFlags, (stream, &cuf));
    CW_CU(cuStreamGetPriority, (stream, &prio));
    cw_stream *s = alloc_stream();
    if (!s) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = event_get(ctx, &s->ev);
    if (st == CW_SUCCESS) st = guard.leave();
    if (st != CW_SUCCESS) {
        if (s->ev) event_put(ctx, s->ev);
        free(s);
        return st;
    }
    s->ctx = ctx;
    s->cu = stream;
    // The legacy stream synchronises with blocking streams by definition.
    s->flags = (!is_null && (cuf & CU_STREAM_NON_BLOCKING)) ? CW_STREAM_NON_BLOCKING : CW_STREAM_BLOCKING;
    s->priority = prio;
    s->owned = false;
    s->is_null = is_null;
    s->holds_ctx = true;
    context_retain(ctx);
    s->serial = stream_serial();
    room.publish(s);
    *out = s;
    return CW_SUCCESS;
}

cw_status stream_synchronize(cw_stream *s) {
    // Numbered before the driver call: the marks recorded before it are
    // covered by it (mark_synced).
    const uint64_t n = s->syncs_begun.fetch_add(1, std::memory_order_seq_cst) + 1;
    CW_TRY(on_stream(s, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(s->cu); }));
    uint64_t prev = s->synced.load(std::memory_order_relaxed);
    while (prev < n && !s->synced.compare_exchange_weak(prev, n, std::memory_order_release, std::memory_order_relaxed)) {
    }
    return CW_SUCCESS;
}

cw_status stream_query(cw_stream *s) {
    CUresult r = CUDA_SUCCESS;
    cw_status st = on_stream(s, "cuStreamQuery", [&] {
        r = drv().cuStreamQuery(s->cu);
        return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
    });
    if (st != CW_SUCCESS) return st;
    return r == CUDA_ERROR_NOT_READY ? CW_ERROR_NOT_READY : CW_SUCCESS;
}

void stream_info(const cw_stream *s, cw_stream_info *info) {
    // All known since the stream was made: its priority is the one the
    // driver was given (clamped into the context's range, as the driver
    // clamps), or, for a wrapped stream, the one the driver reported then.
    cw_stream_info i;
    memset(&i, 0, sizeof i);
    i.handle = s->cu;
    i.context = s->ctx;
    i.device = s->ctx->ordinal;
    i.priority = s->priority;
    i.flags = s->flags;
    i.owned = s->owned;
    i.from_pool = s->pool != nullptr;
    i.is_null = s->is_null;
    *info = i;
}

cw_status stream_order_slow(cw_stream *dst, cw_stream *src) {
    CW_TRY(on_stream(src, "cuEventRecord", [&] { return drv().cuEventRecord(src->ev, src->cu); }));
    return on_stream(dst, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(dst->cu, src->ev, 0); });
}

cw_status stream_order_failed(cw_stream *dst, cw_stream *src, bool waiting, CUresult r) {
    cw_stream *s = waiting ? dst : src;
    const char *entry = waiting ? "cuStreamWaitEvent" : "cuEventRecord";
    auto call = [&] { return waiting ? drv().cuStreamWaitEvent(dst->cu, src->ev, 0) : drv().cuEventRecord(src->ev, src->cu); };
    if (r != CUDA_ERROR_INVALID_CONTEXT) {
        if (is_capture_error(r)) note_capture_failure(s, r, entry);
        return fail_cu(r, entry);
    }
    {
        // A driver that still wants a current context: on_stream's retry.
        CurrentGuard guard;
        CW_TRY(guard.enter(s->ctx->cu));
        r = call();
        if (r != CUDA_SUCCESS) {
            if (is_capture_error(r)) note_capture_failure(s, r, entry);
            return fail_cu(r, entry);
        }
        CW_TRY(guard.leave());
    }
    if (waiting) return CW_SUCCESS;
    return on_stream(dst, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(dst->cu, src->ev, 0); });
}

cw_status stream_fork(cw_stream *parent, cw_stream **child) {
    cw_stream_pool *pool = nullptr;
    if (parent->pool && parent->pool->mode == CW_POOL_LEASE) {
        pool = parent->pool;
    } else if ((parent->pool && parent->pool->mode == CW_POOL_SINGLE) || serialize_all()) {
        *child = parent;  // debug serialisation: everything on one stream
        return CW_SUCCESS;
    } else {
        CW_TRY(fork_pool(parent->ctx, &pool));
    }
    cw_stream *c = nullptr;
    CW_TRY(pool_acquire(pool, &c, 0));
    cw_status st = stream_order(c, parent);
    if (st != CW_SUCCESS) {
        pool_release(pool, c);
        return st;
    }
    // A child of the context's own pool keeps the context alive while out.
    if (pool->internal) context_retain(pool->ctx);
    c->in_capture = capturing(parent);
    *child = c;
    return CW_SUCCESS;
}

cw_status stream_join(cw_stream *parent, cw_stream **child) {
    cw_stream *c = *child;
    if (c == parent) {
        *child = NULL;
        return CW_SUCCESS;
    }
    if (!c->pool || c->pool->mode != CW_POOL_LEASE)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the child was not made by cw_stream_fork");
    const int held = c->leased.load(std::memory_order_acquire);
    if (held == kNamed)
        return fail(CW_ERROR_INVALID_STATE,
                    "the stream is a named stream of its pool (cw_stream_pool_acquire_named), not a forked child: "
                    "the pool keeps it until cw_stream_pool_release_owner");
    if (held != kLeased) return fail(CW_ERROR_INVALID_STATE, "the child has already been joined or released");
    cw_status order = stream_order(parent, c);
    // A capture the ordering broke still holds the child (its capture ends
    // with the origin's): keep it, to be joined again after the capture
    // ends. Any other failure gives the child back all the same: nothing
    // else could (cw_stream_destroy ignores a pool's stream).
    if (order == CW_ERROR_CAPTURE) return order;
    c->in_capture = false;
    cw_stream_pool *pool = c->pool;
    cw_context *ctx = pool->ctx;
    bool internal = pool->internal;
    cw_status st = pool_release(pool, c);
    if (st != CW_SUCCESS) return order != CW_SUCCESS ? order : st;
    *child = NULL;
    if (internal) context_release(ctx);
    if (order != CW_SUCCESS)
        return prefix_error("the child was given back, but the parent does not wait for it");
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
