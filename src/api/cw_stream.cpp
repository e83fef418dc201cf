/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/stream.h (streams, ordering, fork and join,
// stream pools, timers).
#include "api/api.hpp"
#include "core/event.hpp"
#include "core/pool.hpp"

using namespace cw;

static_assert(sizeof(cw_stream_info) == 72, "cw_stream_info keeps its 0.1 size");
static_assert(sizeof(cw_stream_pool_info) == 72, "cw_stream_pool_info keeps cw_stream_pool_stats' size");

namespace {
void defaults(cw_stream_settings *s) {
    memset(s, 0, sizeof *s);
    s->flags = CW_STREAM_NON_BLOCKING;
    s->priority = 0;
}
void defaults(cw_stream_pool_settings *s) {
    memset(s, 0, sizeof *s);
    s->mode = CW_POOL_LEASE;
    s->flags = CW_STREAM_NON_BLOCKING;
    s->priority = 0;
    s->reserved_streams = 1;
    s->max_streams = 0;
}
}  // namespace

extern "C" {

CW_API void cw_stream_settings_default(cw_stream_settings *s) {
    if (s) defaults(s);
}

CW_API cw_status cw_stream_create(cw_stream **out, cw_context *ctx, const cw_stream_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    cw_stream_settings def;
    defaults(&def);
    const cw_stream_settings *s = settings ? settings : &def;
    CW_CHECK_ARG((s->flags & ~CW_STREAM_BLOCKING) == 0);
    CW_CHECK_ARG(api::all_zero(s->reserved, sizeof s->reserved));
    CW_TRY(ensure_init());
    return core::stream_new(ctx, s->flags, s->priority, true, out);
}

CW_API cw_status cw_stream_wrap(cw_stream **out, cw_context *ctx, CUstream stream) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    return core::stream_wrap(ctx, stream, out);
}

CW_API void cw_stream_destroy(cw_stream **ps) {
    CW_ENTRY;
    if (!ps || !*ps) return;
    cw_stream *s = *ps;
    *ps = NULL;
    if (!live(s)) {
        log(CW_LOG_WARNING, "%s: not a live cw_stream; nothing destroyed", current_api());
        return;
    }
    if (s->pool) {
        log(CW_LOG_WARNING,
            "%s: the stream belongs to a pool, which keeps it (give a leased one back with "
            "cw_stream_pool_release); nothing destroyed",
            current_api());
        return;
    }
    core::stream_free(s);
}

CW_API cw_status cw_stream_get_info(const cw_stream *s, cw_stream_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(info != NULL);
    core::stream_info(s, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_synchronize(cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    return core::stream_synchronize(s);
}

CW_API cw_status cw_stream_query(cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    return core::stream_query(s);
}

CW_API cw_status cw_stream_wait(cw_stream *dst, cw_stream *src) {
    CW_ENTRY;
    CW_CHECK_HANDLE(dst);
    CW_CHECK_HANDLE(src);
    return core::stream_order(dst, src);
}

CW_API cw_status cw_stream_fork(cw_stream **child, cw_stream *parent) {
    CW_ENTRY;
    CW_CHECK_ARG(child != NULL);
    CW_CHECK_HANDLE(parent);
    return core::stream_fork(parent, child);
}

CW_API cw_status cw_stream_join(cw_stream *parent, cw_stream **child) {
    CW_ENTRY;
    CW_CHECK_HANDLE(parent);
    CW_CHECK_ARG(child != NULL);
    CW_CHECK_HANDLE(*child);
    return core::stream_join(parent, child);
}

// ---- stream pools ---------------------------------------------------------------

CW_API void cw_stream_pool_settings_default(cw_stream_pool_settings *s) {
    if (s) defaults(s);
}

CW_API cw_status cw_stream_pool_create(cw_stream_pool **out, cw_context *ctx, const cw_stream_pool_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    cw_stream_pool_settings def;
    defaults(&def);
    const cw_stream_pool_settings *s = settings ? settings : &def;
    // Read the enum as an int: a C caller may store any value in it.
    int mode;
    memcpy(&mode, &s->mode, sizeof mode);
    CW_CHECK_ARG(mode == CW_POOL_LEASE || mode == CW_POOL_ROUND_ROBIN || mode == CW_POOL_SINGLE);
    CW_CHECK_ARG((s->flags & ~CW_STREAM_BLOCKING) == 0);
    CW_CHECK_ARG(s->mode != CW_POOL_LEASE || s->max_streams == 0 || s->reserved_streams <= s->max_streams);
    CW_CHECK_ARG(s->reserved_streams <= core::kChunk * core::kMaxChunks);
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    CW_TRY(ensure_init());
    return core::pool_new(ctx, s, false, out);
}

CW_API void cw_stream_pool_destroy(cw_stream_pool **pp) {
    CW_ENTRY;
    if (!pp || !*pp) return;
    cw_stream_pool *p = *pp;
    *pp = NULL;
    if (!live(p) || p->internal) {
        log(CW_LOG_WARNING, "%s: not a live cw_stream_pool; nothing destroyed", current_api());
        return;
    }
    core::pool_destroy(p);
}

CW_API cw_status cw_stream_pool_acquire(cw_stream **out, cw_stream_pool *pool, int64_t timeout_us) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(pool);
    return core::pool_acquire(pool, out, timeout_us);
}

CW_API cw_status cw_stream_pool_release(cw_stream_pool *pool, cw_stream **s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(pool);
    CW_CHECK_ARG(s != NULL);
    CW_CHECK_HANDLE(*s);
    CW_TRY(core::pool_release(pool, *s));
    *s = NULL;
    return CW_SUCCESS;
}

CW_API cw_status cw_stream_pool_get_next(cw_stream_pool *pool, cw_stream **out) {
    CW_ENTRY;
    CW_CHECK_HANDLE(pool);
    CW_CHECK_ARG(out != NULL);
    if (pool->mode == CW_POOL_LEASE)
        return fail(CW_ERROR_INVALID_STATE, "next is for round-robin and single pools; use acquire on a lease pool");
    return core::pool_acquire(pool, out, 0);
}

CW_API cw_status cw_stream_pool_acquire_named(cw_stream **out, cw_stream_pool *pool, const void *owner,
                                              const char *name) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(pool);
    CW_CHECK_ARG(name != NULL);
    CW_CHECK_ARG(name[0] != '\0' && strlen(name) < sizeof(((core::Named *)0)->name));
    return core::pool_named(pool, owner, name, out);
}

CW_API cw_status cw_stream_pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(pool);
    return core::pool_release_owner(pool, owner, count);
}

CW_API cw_status cw_stream_pool_get_info(const cw_stream_pool *pool, cw_stream_pool_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(pool);
    CW_CHECK_ARG(info != NULL);
    core::pool_info(pool, info);
    return CW_SUCCESS;
}

// ---- timers -------------------------------------------------------------------

CW_API cw_status cw_timer_create(cw_timer **out, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    return core::timer_create(ctx, out);
}

CW_API void cw_timer_destroy(cw_timer **pt) {
    CW_ENTRY;
    if (!pt || !*pt) return;
    cw_timer *t = *pt;
    *pt = NULL;
    if (!live(t)) {
        log(CW_LOG_WARNING, "%s: not a live cw_timer; nothing destroyed", current_api());
        return;
    }
    core::timer_destroy(t);
}

CW_API cw_status cw_timer_start(cw_timer *t, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(s);
    return core::timer_record(t, s, true);
}

CW_API cw_status cw_timer_stop(cw_timer *t, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(s);
    return core::timer_record(t, s, false);
}

CW_API cw_status cw_timer_get_elapsed_ms(cw_timer *t, float *ms) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_ARG(ms != NULL);
    return core::timer_elapsed_ms(t, ms);
}

}  // extern "C"
