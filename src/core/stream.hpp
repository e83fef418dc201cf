// cuweave internal: streams, pools, timers, futures.
#pragma once

#include <pthread.h>

#include "core/core.hpp"
#include "cuweave/future.h"
#include "cuweave/stream.h"

struct cw_graph;

namespace cw {
// What invalidated a capture: the first capture-class failure of a call made
// through cuweave (set once per capture).
struct CaptureNote {
    char api[48];   // the cuweave function
    char call[48];  // the driver entry
    CUresult result;
};
// The capture begun on a stream with cw_capture_begin(_to).
struct CaptureState {
    bool active;
    int mode;
    cw_graph *target;  // cw_capture_begin_to: the graph recorded into
    uint64_t serial;   // capture_violation_serial() at begin
    std::atomic<int> noted;
    CaptureNote note;
};
inline bool is_capture_error(CUresult r) {
    return r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}
// Records r as what invalidated the capture begun on s (when one is active).
void note_capture_failure(const cw_stream *s, CUresult r, const char *entry);
// Ends an abandoned capture on s (its stream is going away): the partial
// graph is dropped. Does nothing when no capture is active.
void capture_abandon(cw_stream *s);
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
    std::atomic<int> leased;
    cw::CaptureState cap;  // a capture begun on this stream
    bool in_capture;       // forked from a capturing stream and not yet joined
    uint64_t serial;       // unique in the process (an address can be reused by a later stream)
};

namespace cw {
constexpr uint32_t kChunk = 64;
constexpr uint32_t kMaxChunks = 1024;  // 65536 streams per pool

struct Named {
    const void *owner;
    char name[64];
    cw_stream *stream;
};
}  // namespace cw

struct cw_stream_pool {
    uint32_t tag;
    cw_context *ctx;
    bool internal;  // the context's fork pool: does not hold a context reference
    cw_pool_mode mode;
    unsigned flags;
    int priority;
    unsigned max;
    // lease mode: slots in chunks that never move, a tagged Treiber stack of free ones
    std::atomic<cw_stream **> chunks[cw::kMaxChunks];
    std::atomic<uint32_t> created;
    std::atomic<uint64_t> free_head;  // (tag << 32) | (index + 1)
    std::atomic<size_t> leased;
    std::atomic<int> waiters;
    pthread_mutex_t mutex;  // growth, waiting, named streams
    pthread_cond_t cond;
    // round-robin and single modes: a fixed set
    cw_stream **fixed;
    uint32_t fixed_count;
    std::atomic<uint64_t> rr;
    // named streams
    cw::Named *named;
    size_t named_count, named_cap;
};

namespace cw {

inline bool stream_ok(const cw_stream *s) { return handle_live(s, kTagStream); }
inline bool pool_ok(const cw_stream_pool *p) { return handle_live(p, kTagPool); }
// s records into a graph: a capture begun on it, or forked from one.
inline bool capturing(const cw_stream *s) { return s->cap.active || s->in_capture; }

// Creates a stream object (driver stream + ordering event). retain_ctx: the
// stream holds a context reference (false for pool streams).
cw_status stream_new(cw_context *ctx, unsigned flags, int priority, bool retain_ctx, cw_stream **out);
// Destroys what stream_new made.
void stream_free(cw_stream *s);

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

// A number no other stream of the process has had (for each new cw_stream).
uint64_t stream_serial();

// Record on src, wait on dst (the heart of cw_stream_wait).
cw_status stream_order(cw_stream *dst, cw_stream *src);

// Lease-mode acquire and release (also used by fork/join and when_all).
cw_status pool_acquire(cw_stream_pool *pool, cw_stream **out, int64_t timeout_us);
cw_status pool_release(cw_stream_pool *pool, cw_stream *s);
cw_status pool_new(cw_context *ctx, const cw_stream_pool_settings *s, bool internal, cw_stream_pool **out);

// True when CUWEAVE_SERIALIZE=1 (read once).
bool serialize_all();

}  // namespace cw

#define CW_CHECK_STREAM(s)                                                                 \
    do {                                                                                   \
        CW_CHECK_ARG((s) != NULL);                                                         \
        if (__builtin_expect(!::cw::stream_ok(s), 0))                                      \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_stream", #s);  \
    } while (0)

#define CW_CHECK_POOL(p)                                                                   \
    do {                                                                                   \
        CW_CHECK_ARG((p) != NULL);                                                         \
        if (__builtin_expect(!::cw::pool_ok(p), 0))                                        \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_stream_pool", #p); \
    } while (0)
