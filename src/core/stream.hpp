/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: streams, ordering between streams, fork and join.
#pragma once

#include <atomic>

#include "core/context.hpp"
#include "cuweave/stream.h"

namespace cw {
namespace core {
// The capture begun on a stream (the graph layer begins and ends it; the
// stream keeps its state, so that every call made on a capturing stream can
// note what broke the capture, and a stream destroyed while capturing can end
// it).
struct CaptureState {
    bool active;
    int mode;
    void *target;      // the graph layer's: the graph recorded into (capture into an existing graph), or NULL
    uint64_t serial;   // capture_violation_serial() at begin
    std::atomic<int> noted;
    CaptureNote note;  // the first capture-class failure of a call made on the stream
    uint64_t nvtx;     // the capture's NVTX range (base/nvtx.hpp), ended with it
};
}  // namespace core
}  // namespace cw

struct cw_stream {
    uint32_t tag;
    cw_context *ctx;  // retained, except for streams of a pool (the pool holds it)
    CUstream cu;
    CUevent ev;       // timing-disabled, for ordering: from the context's event pool
    unsigned flags;   // CW_STREAM_*
    int priority;
    bool owned;       // created by cuweave
    bool is_null;     // NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD: needs its context current
    bool holds_ctx;   // holds a context reference (streams of a pool do not)
    cw_stream_pool *pool;
    uint32_t index;                   // slot in the pool
    std::atomic<uint32_t> next_free;  // free-list link: index + 1, 0 = end
    std::atomic<int> leased;          // lease pools: kFree, kLeased or kNamed (pool.hpp)
    cw::core::CaptureState cap;  // a capture begun on this stream
    bool in_capture;       // forked from a capturing stream and not yet joined
    uint64_t serial;       // unique in the process (an address can be reused by a later stream)
    // Host waits on the stream (stream_synchronize): how many began, and the
    // number of the last that ended in success. A mark recorded before a wait
    // began is finished once that wait ended (mark_synced).
    std::atomic<uint64_t> syncs_begun{0};
    std::atomic<uint64_t> synced{0};
    // Marks recorded on it (mark_record numbers each once its record returned).
    std::atomic<uint64_t> records{0};
};

namespace cw {
namespace core {

// s records into a graph: a capture begun on it, or forked from one.
inline bool capturing(const cw_stream *s) { return s->cap.active || s->in_capture; }

// Records r as what invalidated the capture begun on s (when one is active).
void note_capture_failure(const cw_stream *s, CUresult r, const char *entry);
// Ends an abandoned capture on s (its stream is going away): the graph layer
// registers how, before it begins its first capture.
void stream_on_abandon(void (*abandon)(cw_stream *s));

// Runs a driver call on a stream. A wrapped NULL stream means "the legacy
// stream of the current context", so its context is made current first; any
// other stream names its context itself, and the call goes straight to the
// driver (the hot path: no query, no switch). A driver that still wants a
// current context (CUDA_ERROR_INVALID_CONTEXT) gets one and the call is retried.
template <typename F>
inline cw_status on_stream(const cw_stream *s, const char *entry, F &&call) {
    if (__builtin_expect(!s->is_null, 1)) {
        CUresult r = call();
        if (__builtin_expect(r == CUDA_SUCCESS, 1)) return CW_SUCCESS;
        if (r != CUDA_ERROR_INVALID_CONTEXT) {
            if (is_capture_error(r)) note_capture_failure(s, r, entry);
            return fail_cu(r, entry);
        }
    }
    CurrentGuard guard;
    CW_TRY(guard.enter(s->ctx->cu));
    CUresult r = call();
    if (r != CUDA_SUCCESS) {
        if (is_capture_error(r)) note_capture_failure(s, r, entry);
        return fail_cu(r, entry);
    }
    return guard.leave();
}

// Creates a stream object (driver stream + ordering event). retain_ctx: the
// stream holds a context reference (false for pool streams). pool, index:
// the pool's slot it fills, set before the handle goes live (a stale copy
// of a handle whose address it takes may read it from then on).
cw_status stream_new(cw_context *ctx, unsigned flags, int priority, bool retain_ctx, cw_stream **out,
                     cw_stream_pool *pool = nullptr, uint32_t index = 0);
// Wraps a CUstream of ctx the caller owns (NULL, CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD: the legacy stream of ctx).
cw_status stream_wrap(cw_context *ctx, CUstream stream, cw_stream **out);
// Destroys what stream_new or stream_wrap made (a capture left open on it is
// ended and dropped).
void stream_free(cw_stream *s);
// A number no other stream of the process has had (for each new cw_stream).
uint64_t stream_serial();

// stream_order's paths out of line: either stream a wrapped legacy one
// (its context made current first), or a driver call that failed with r
// (the record when !waiting, else the wait): what on_stream does after its
// first try (a current context and one retry for CUDA_ERROR_INVALID_CONTEXT,
// the capture noted), then the wait when the record was the one.
cw_status stream_order_slow(cw_stream *dst, cw_stream *src);
cw_status stream_order_failed(cw_stream *dst, cw_stream *src, bool waiting, CUresult r);

// Record on src, wait on dst (the heart of cw_stream_wait; inline: it is
// the hot path of ordering, two driver calls and nothing else: one test of
// both streams, the table read once, the failures out of line).
inline cw_status stream_order(cw_stream *dst, cw_stream *src) {
    if (dst == src) return CW_SUCCESS;
    if (__builtin_expect(src->is_null || dst->is_null, 0)) return stream_order_slow(dst, src);
    const Driver &d = drv();
    const CUevent ev = src->ev;
    CUresult r = d.cuEventRecord(ev, src->cu);
    if (__builtin_expect(r != CUDA_SUCCESS, 0)) return stream_order_failed(dst, src, false, r);
    r = d.cuStreamWaitEvent(dst->cu, ev, 0);
    if (__builtin_expect(r != CUDA_SUCCESS, 0)) return stream_order_failed(dst, src, true, r);
    return CW_SUCCESS;
}
// A child stream ordered after parent (leased from parent's pool or the
// context's fork pool; parent itself when everything is serialised), and
// joining it back (parent waits for it; it goes back to its pool).
cw_status stream_fork(cw_stream *parent, cw_stream **child);
cw_status stream_join(cw_stream *parent, cw_stream **child);
cw_status stream_synchronize(cw_stream *s);
// CW_SUCCESS when idle, CW_ERROR_NOT_READY while work is queued.
cw_status stream_query(cw_stream *s);
// What cw_stream_get_info reports: no driver call.
void stream_info(const cw_stream *s, cw_stream_info *info);

}  // namespace core
}  // namespace cw
