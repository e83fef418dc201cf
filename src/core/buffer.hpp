// cuweave internal: what the flow layer uses of buffers.
//
// A Mark is one event recorded on one stream, shared by every buffer use and
// message that needs "the work on that stream up to here" (one record per
// stream per compute call, however many buffers the call touched).
// A BufferCache keeps buffers whose last reference went, and hands one back
// when every use recorded on it has finished on the GPU: memory recycled
// without a free, an allocation, or a wait between streams.
#pragma once

#include "core/core.hpp"
#include "cuweave/buffer.h"

namespace cw {

struct Mark;
// Records an event on s (pooled, from s's context). One reference for the caller.
cw_status mark_record(cw_stream *s, Mark **out);
void mark_retain(Mark *m);
void mark_release(Mark *m);
CUevent mark_event(const Mark *m);
// True once the work before m has finished (asks the driver until it has,
// remembers it after). mark_wait blocks until then.
bool mark_done(Mark *m);
// True when m is known finished (no driver call).
bool mark_finished(const Mark *m);
cw_status mark_wait(Mark *m);
// m was recorded on a stream that had waited for `earlier`: when m is seen
// finished, so is earlier (no driver call asks about it). Only before m is
// shared with another thread; at most 8 (more are simply not noted).
void mark_cover(Mark *m, Mark *earlier);
const cw_stream *mark_stream(const Mark *m);

// Records m as a use of b (a use on the same stream is replaced). m may be
// on any device (a peer reading b, or copying it).
cw_status buffer_attach(cw_buffer *b, Mark *m);

// The buffer's context (borrowed) and size.
cw_context *buffer_context(const cw_buffer *b);
size_t buffer_bytes(const cw_buffer *b);
// Copies all of src into dst (at least as large) on s (cuMemcpyPeerAsync:
// any two devices) and records the use of both by s. Checks nothing else.
cw_status buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src);
// The context's stream-ordered pool (made on first use).
cw_status mempool_get(cw_context *ctx, CUmemoryPool *out);

struct BufferCache;
BufferCache *buffer_cache_new();
// The owner is done with the cache: cached buffers are freed (stream-ordered),
// later releases free instead of caching; the cache goes with its last buffer.
void buffer_cache_close(BufferCache *c);
// A buffer of `bytes` for work on s: a cached one whose uses have all
// finished, else a new allocation (without a use recorded: the caller records
// one after enqueuing work). Its last release returns it to the cache.
// query false: a use counts as finished only once mark_wait or mark_done
// said so (no driver call here: an executor that waits for old iterations
// anyway tells the cache that way); true: asks the driver (cuEventQuery,
// about 2 us a call on the H100 for recent work).
cw_status buffer_cache_take(BufferCache *c, cw_stream *s, size_t bytes, bool query, cw_buffer **out);
// Buffers taken from and put back into caches (for tests and statistics).
struct BufferCacheStats {
    uint64_t reused, allocated, cached;
};
void buffer_cache_stats(const BufferCache *c, BufferCacheStats *st);

}  // namespace cw
