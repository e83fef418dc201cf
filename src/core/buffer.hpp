/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: device buffers from a stream-ordered pool, freed after every
// use (buffer.cpp), the cache that recycles them (buffer_cache.cpp), and
// pinned host memory.
//
// A buffer keeps up to kUses pending uses, each a mark (event.hpp). The last
// release frees it on its context's release stream after every use; a
// BufferCache (the flow layer's, per pipeline) takes its memory back instead
// and hands it out again, as a new buffer, once every use finished: memory
// recycled without a free, an allocation, or a wait between streams. The
// handle goes with the last reference either way (a stale copy is refused).
#pragma once

#include <atomic>

#include "core/event.hpp"
#include "core/stream.hpp"
#include "cuweave/buffer.h"

namespace cw {
namespace core {
constexpr int kUses = 8;
struct BufferCache;
struct Share;
}  // namespace core
}  // namespace cw

struct cw_buffer {
    uint32_t tag;
    std::atomic<unsigned> refs;
    cw_context *ctx;  // retained
    CUdeviceptr ptr;
    size_t bytes;
    std::atomic<int> lock;  // guards uses
    int nuses;
    cw::core::Mark *uses[cw::core::kUses];
    cw::core::BufferCache *cache;  // where its last release puts it (retained), or NULL
    cw::core::Share *share;        // shareable (exported or imported) memory, or NULL (share.cpp)
};

namespace cw {
namespace core {

// A buffer of `bytes` on s's device, allocated in stream order on s, with
// its allocation as its first use (refused while s captures).
cw_status buffer_alloc(cw_stream *s, size_t bytes, cw_buffer **out);
void buffer_retain(cw_buffer *b);
// Drops a reference; the last one frees the buffer after every recorded use
// (or gives it back to its cache).
void buffer_release(cw_buffer *b);
// Records work queued on s so far as a use of b (s on any device).
cw_status buffer_use(cw_buffer *b, cw_stream *s);
// Records m as a use of b (a use on the same stream is replaced). m may be
// on any device (a peer reading b, or copying it).
cw_status buffer_attach(cw_buffer *b, Mark *m);
void buffer_info(const cw_buffer *b, cw_buffer_info *info);
// Copies all of src into dst (at least as large) on s (cuMemcpyPeerAsync:
// any two devices) and records the use of both by s. Checks nothing else.
cw_status buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src);

// The context's stream-ordered pool (made on first use, opened to the
// devices in ctx->pool_peers).
cw_status mempool_get(cw_context *ctx, CUmemoryPool *out);
// Opens ctx's buffer pool (if made yet) to the devices in `devices` (bits =
// ordinals), read and write. Used when peer access is enabled, and when the
// pool is made after that.
cw_status pool_open_to(cw_context *ctx, uint64_t devices);

// Copies between host memory and device addresses, in stream order on s.
cw_status copy_to_device(cw_stream *s, CUdeviceptr dst, const void *src, size_t bytes);
cw_status copy_to_host(cw_stream *s, void *dst, CUdeviceptr src, size_t bytes);

// Pinned host memory, portable and mapped, zeroed; freed when no persistent
// work runs (idle.hpp).
cw_status host_alloc(cw_context *ctx, size_t bytes, void **out);
cw_status host_free(cw_context *ctx, void *p);

// ---- the cache (buffer_cache.cpp) ----
BufferCache *buffer_cache_new();
// The owner is done with the cache: cached buffers are freed (stream-ordered),
// later releases free instead of caching; the cache goes with its last buffer.
void buffer_cache_close(BufferCache *c);
// A buffer of `bytes` for work on s: a new handle for cached memory whose
// uses have all finished, else a new allocation (without a use recorded: the
// caller records one after enqueuing work). Its last release returns its
// memory to the cache. Driver calls (cuEventQuery) are made with the cache's
// lock released.
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
// True while a thread holds c's spin lock (for tests: a seam hook on a
// driver call asks it; no lock taken).
bool buffer_cache_locked(const BufferCache *c);

// Between buffer.cpp and buffer_cache.cpp.
// The memory of a buffer whose last reference went, as its cache keeps it:
// no handle (that was retired), the context's reference and the uses.
struct CachedMemory {
    cw_context *ctx;  // retained
    CUdeviceptr ptr;
    size_t bytes;
    int nuses;
    Mark *uses[kUses];
};
cw_status buffer_new(cw_stream *s, size_t bytes, cw_buffer **out);
// A new buffer (a new handle, one reference, no uses) for m's memory, which
// it takes with m's context reference (m's uses must be gone). On failure
// (out of host memory, recorded) m is left as it was.
cw_status buffer_rewrap(const CachedMemory &m, cw_buffer **out);
void buffer_free(cw_buffer *b);  // with b's context current
// Frees m's memory after every use (dropping them) and drops its context
// reference; with m's context current.
void memory_free(CachedMemory &m);
// The last reference went, b's handle retired: its memory goes back to its
// cache (true; b's uses and context reference go with it, and b is then
// only to be freed), or is not kept (false: b unchanged).
bool cache_keep(BufferCache *c, cw_buffer *b);
void cache_release(BufferCache *c);
void buffer_last_release(cw_buffer *b);

}  // namespace core
}  // namespace cw
