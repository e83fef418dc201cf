// cuweave: streams, ordering between streams, fork/join, timers.
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/stream.hpp"

namespace cw {
namespace {

unsigned cu_flags(unsigned cw_flags) { return (cw_flags & CW_STREAM_BLOCKING) ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING; }

bool zero_bytes(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

cw_stream *alloc_stream() {
    void *mem = malloc(sizeof(cw_stream));
    if (!mem) return nullptr;
    return new (mem) cw_stream();
}

}  // namespace

cw_status stream_new(cw_context *ctx, unsigned flags, int priority, bool retain_ctx, cw_stream **out) {
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
    room.publish(s, kTagStream);
    *out = s;
    return CW_SUCCESS;
}

void stream_free(cw_stream *s) {
    cw_context *ctx = s->ctx;
    capture_abandon(s);
    handle_retire(s);
    if (s->owned) {
        CUresult r = drv().cuStreamDestroy(s->cu);
        if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuStreamDestroy failed with CUresult %d", current_api(), r);
    }
    event_put(ctx, s->ev);
    bool holds = s->holds_ctx;
    s->~cw_stream();
    free(s);
    if (holds) context_release(ctx);
}

uint64_t stream_serial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

cw_status stream_order(cw_stream *dst, cw_stream *src) {
    if (dst == src) return CW_SUCCESS;
    CW_TRY(on_stream(src, "cuEventRecord", [&] { return drv().cuEventRecord(src->ev, src->cu); }));
    return on_stream(dst, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(dst->cu, src->ev, 0); });
}

}  // namespace cw

using namespace cw;

struct cw_timer {
    uint32_t tag;
    cw_context *ctx;
    CUevent start, stop;
    bool started, stopped;
};

extern "C" {

CW_API void cw_stream_settings_default(cw_stream_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->flags = CW_STREAM_NON_BLOCKING;
    s->priority = 0;
}

CW_API cw_status cw_stream_create(cw_stream **out, cw_context *ctx, const cw_stream_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
    cw_stream_settings def;
    cw_stream_settings_default(&def);
    const cw_stream_settings *s = settings ? settings : &def;
    CW_CHECK_ARG((s->flags & ~CW_STREAM_BLOCKING) == 0);
    CW_CHECK_ARG(zero_bytes(s->reserved, sizeof s->reserved));
    CW_TRY(ensure_init());
    return stream_new(ctx, s->flags, s->priority, true, out);
}

CW_API cw_status cw_stream_wrap(cw_stream **out, cw_context *ctx, CUstream stream) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
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
    room.publish(s, kTagStream);
    *out = s;
    return CW_SUCCESS;
}

CW_API void cw_stream_destroy(cw_stream **ps) {
    CW_ENTRY;
    if (!ps || !*ps) return;
    cw_stream *s = *ps;
    if (!stream_ok(s)) {
        *ps = NULL;
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_stream; nothing destroyed");
        return;
    }
    if (s->pool) {
        fail(CW_ERROR_INVALID_STATE, "the stream belongs to a pool: release it with cw_stream_pool_release");
        return;
    }
    *ps = NULL;
    stream_free(s);
}

CW_API cw_status cw_stream_get_info(const cw_stream *s, cw_stream_info *info) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(info != NULL);
    int prio = 0;
    CW_TRY(on_stream(s, "cuStreamGetPriority", [&] { return drv().cuStreamGetPriority(s->cu, &prio); }));
    cw_stream_info i;
    memset(&i, 0, sizeof i);
    i.handle = s->cu;
    i.device = s->ctx->ordinal;
    i.priority = prio;
    i.flags = s->flags;
    i.owned = s->owned;
    i.from_pool = s->pool != nullptr;
    i.is_null = s->is_null;
    *info = i;
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_get_handle(const cw_stream *s, CUstream *handle) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(handle != NULL);
    *handle = s->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_get_device(const cw_stream *s, int *device) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(device != NULL);
    *device = s->ctx->ordinal;
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_get_context(const cw_stream *s, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = s->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_synchronize(cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    return on_stream(s, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(s->cu); });
}

CW_API cw_status cw_stream_query(cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CUresult r = CUDA_SUCCESS;
    cw_status st = on_stream(s, "cuStreamQuery", [&] {
        r = drv().cuStreamQuery(s->cu);
        return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
    });
    if (st != CW_SUCCESS) return st;
    return r == CUDA_ERROR_NOT_READY ? CW_ERROR_NOT_READY : CW_SUCCESS;
}

CW_API cw_status cw_stream_wait(cw_stream *dst, cw_stream *src) {
    CW_ENTRY;
    CW_CHECK_STREAM(dst);
    CW_CHECK_STREAM(src);
    return stream_order(dst, src);
}

CW_API cw_status cw_stream_wait_all(cw_stream *dst, cw_stream *const *srcs, size_t n) {
    CW_ENTRY;
    CW_CHECK_STREAM(dst);
    CW_CHECK_ARG(srcs != NULL || n == 0);
    for (size_t i = 0; i < n; i++)
        if (srcs[i] && !stream_ok(srcs[i]))
            return fail(CW_ERROR_INVALID_HANDLE, "srcs[%zu] is not a live cw_stream", i);
    for (size_t i = 0; i < n; i++)
        if (srcs[i]) CW_TRY(stream_order(dst, srcs[i]));
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_fork(cw_stream *parent, cw_stream **child) {
    CW_ENTRY;
    CW_CHECK_STREAM(parent);
    CW_CHECK_ARG(child != NULL);
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

CW_API cw_status cw_stream_join(cw_stream *parent, cw_stream **child) {
    CW_ENTRY;
    CW_CHECK_STREAM(parent);
    CW_CHECK_ARG(child != NULL);
    CW_CHECK_STREAM(*child);
    cw_stream *c = *child;
    if (c == parent) {
        *child = NULL;
        return CW_SUCCESS;
    }
    if (!c->pool || c->pool->mode != CW_POOL_LEASE)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the child was not made by cw_stream_fork");
    if (!c->leased.load(std::memory_order_acquire))
        return fail(CW_ERROR_INVALID_STATE, "the child has already been joined or released");
    CW_TRY(stream_order(parent, c));
    c->in_capture = false;
    cw_stream_pool *pool = c->pool;
    cw_context *ctx = pool->ctx;
    bool internal = pool->internal;
    CW_TRY(pool_release(pool, c));
    *child = NULL;
    if (internal) context_release(ctx);
    return CW_SUCCESS;
}

// ---- timers ----------------------------------------------------------------

CW_API cw_status cw_timer_create(cw_timer **out, cw_context *ctx) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
    CW_TRY(ensure_init());
    cw_timer *t = static_cast<cw_timer *>(calloc(1, sizeof(cw_timer)));
    if (!t) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CurrentGuard guard;
    cw_status st = guard.enter(ctx->cu);
    if (st == CW_SUCCESS) {
        CUresult r = drv().cuEventCreate(&t->start, CU_EVENT_DEFAULT);
        if (r == CUDA_SUCCESS) {
            r = drv().cuEventCreate(&t->stop, CU_EVENT_DEFAULT);
            if (r != CUDA_SUCCESS) drv().cuEventDestroy(t->start);
        }
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuEventCreate");
    }
    if (st == CW_SUCCESS) {
        st = guard.leave();
        if (st != CW_SUCCESS) {
            drv().cuEventDestroy(t->start);
            drv().cuEventDestroy(t->stop);
        }
    }
    if (st != CW_SUCCESS) {
        free(t);
        return st;
    }
    t->ctx = ctx;
    context_retain(ctx);
    room.publish(t, kTagTimer);
    *out = t;
    return CW_SUCCESS;
}

CW_API void cw_timer_destroy(cw_timer **pt) {
    CW_ENTRY;
    if (!pt || !*pt) return;
    cw_timer *t = *pt;
    *pt = NULL;
    if (!handle_live(t, kTagTimer)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_timer; nothing destroyed");
        return;
    }
    handle_retire(t);
    drv().cuEventDestroy(t->start);
    drv().cuEventDestroy(t->stop);
    cw_context *ctx = t->ctx;
    free(t);
    context_release(ctx);
}

static cw_status timer_record(cw_timer *t, cw_stream *s, bool start) {
    if (s->ctx->cu != t->ctx->cu)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stream is not on the timer's context");
    CUevent ev = start ? t->start : t->stop;
    CW_TRY(on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(ev, s->cu); }));
    if (start) {
        t->started = true;
        t->stopped = false;
    } else {
        t->stopped = true;
    }
    return CW_SUCCESS;
}

CW_API cw_status cw_timer_start(cw_timer *t, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_ARG(t != NULL);
    if (!handle_live(t, kTagTimer)) return fail(CW_ERROR_INVALID_HANDLE, "t is not a live cw_timer");
    CW_CHECK_STREAM(s);
    return timer_record(t, s, true);
}

CW_API cw_status cw_timer_stop(cw_timer *t, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_ARG(t != NULL);
    if (!handle_live(t, kTagTimer)) return fail(CW_ERROR_INVALID_HANDLE, "t is not a live cw_timer");
    CW_CHECK_STREAM(s);
    if (!t->started) return fail(CW_ERROR_INVALID_STATE, "cw_timer_stop before cw_timer_start");
    return timer_record(t, s, false);
}

CW_API cw_status cw_timer_get_context(const cw_timer *t, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_ARG(t != NULL);
    if (!handle_live(t, kTagTimer)) return fail(CW_ERROR_INVALID_HANDLE, "t is not a live cw_timer");
    CW_CHECK_ARG(ctx != NULL);
    *ctx = t->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_timer_elapsed_ms(cw_timer *t, float *ms) {
    CW_ENTRY;
    CW_CHECK_ARG(t != NULL);
    if (!handle_live(t, kTagTimer)) return fail(CW_ERROR_INVALID_HANDLE, "t is not a live cw_timer");
    CW_CHECK_ARG(ms != NULL);
    if (!t->started || !t->stopped) return fail(CW_ERROR_INVALID_STATE, "the timer was not started and stopped");
    CurrentGuard guard;
    CW_TRY(guard.enter(t->ctx->cu));
    CW_CU(cuEventSynchronize, (t->stop));
    float v = 0;
    if (drv().cuEventElapsedTime)
        CW_CU(cuEventElapsedTime, (&v, t->start, t->stop));
    else if (drv().cuEventElapsedTime_v1)
        CW_CU(cuEventElapsedTime_v1, (&v, t->start, t->stop));
    else
        return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuEventElapsedTime");
    CW_TRY(guard.leave());
    *ms = v;
    return CW_SUCCESS;
}

}  // extern "C"
