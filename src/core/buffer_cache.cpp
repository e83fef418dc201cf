/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the buffer cache (buffer.hpp). It keeps buffers whose last
// reference went, and hands one back when every use recorded on it has
// finished on the GPU: memory recycled without a free, an allocation, or a
// wait between streams.
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.hpp"

namespace cw {
namespace core {

constexpr size_t kCacheMax = 64;  // buffers a cache keeps (a power of two: the ring's index wraps by a mask)
static_assert((kCacheMax & (kCacheMax - 1)) == 0, "kCacheMax is a power of two");

struct BufferCache {
    std::atomic<int> refs;  // the owner's and one per buffer it made
    std::atomic<int> lock;
    bool closed;
    cw_buffer **items;  // a ring of kCacheMax: oldest first, from items[head]
    size_t head, count;
    std::atomic<uint64_t> reused, allocated;
};

// The i-th oldest cached buffer's slot (i < count, or == count to append).
namespace {
cw_buffer *&at(BufferCache *c, size_t i) { return c->items[(c->head + i) & (kCacheMax - 1)]; }
}  // namespace

bool cache_keep(BufferCache *c, cw_buffer *b) {
    SpinLock lock(c->lock);
    if (c->closed || c->count >= kCacheMax) return false;
    at(c, c->count++) = b;
    return true;
}

void cache_release(BufferCache *c) {
    if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    free(c->items);
    c->~BufferCache();
    free(c);
}

BufferCache *buffer_cache_new() {
    void *mem = calloc(1, sizeof(BufferCache));
    if (!mem) return nullptr;
    BufferCache *c = new (mem) BufferCache();
    c->items = static_cast<cw_buffer **>(calloc(kCacheMax, sizeof(cw_buffer *)));
    if (!c->items) {
        c->~BufferCache();
        free(c);
        return nullptr;
    }
    c->refs.store(1, std::memory_order_relaxed);
    return c;
}

void buffer_cache_close(BufferCache *c) {
    if (!c) return;
    cw_buffer *items[kCacheMax];
    size_t n;
    {
        SpinLock lock(c->lock);
        c->closed = true;
        n = c->count;
        for (size_t i = 0; i < n; i++) items[i] = at(c, i);
        c->count = 0;
    }
    for (size_t i = 0; i < n; i++) {
        cw_buffer *b = items[i];
        b->cache = nullptr;
        {
            CurrentGuard guard;
            (void)guard.enter(b->ctx->cu);
            buffer_free(b);
        }
        cache_release(c);
    }
    cache_release(c);  // the owner's
}

namespace {
// Takes the i-th oldest buffer out of the cache (lock held). The oldest,
// the usual one, moves the ring's head: nothing is moved.
cw_buffer *cache_remove(BufferCache *c, size_t i) {
    cw_buffer *b = at(c, i);
    if (i == 0) {
        c->head = (c->head + 1) & (kCacheMax - 1);
    } else {
        for (size_t j = i; j + 1 < c->count; j++) at(c, j) = at(c, j + 1);
    }
    c->count--;
    return b;
}

bool fits(const cw_buffer *b, const cw_stream *s, size_t bytes) {
    return b->bytes == bytes && b->ctx->device == s->ctx->device;
}

cw_status reuse(BufferCache *c, cw_buffer *b, cw_buffer **out) {
    for (int u = 0; u < b->nuses; u++) mark_release(b->uses[u]);
    b->nuses = 0;
    b->refs.store(1, std::memory_order_release);
    c->reused.fetch_add(1, std::memory_order_relaxed);
    *out = b;
    return CW_SUCCESS;
}
}  // namespace

cw_status buffer_cache_take(BufferCache *c, cw_stream *s, size_t bytes, bool query, cw_buffer **out) {
    // Oldest first: a cached buffer of this size and device whose uses are
    // finished: known so (query false: a pipeline that waits for old
    // iterations learns it that way, with no driver call here; a cuEventQuery
    // of recent work costs about 2 us on the H100), or asked (query true, or
    // the oldest that fits when none is known finished and the cache is
    // full).
    // Nothing waits: a buffer still in use stays cached and a new one is
    // allocated, so the cache grows to what is in flight.
    // Without query, when none is known finished and the cache is full, the
    // oldest that fits is asked (one cuEventQuery a use): the host may learn
    // of the GPU's progress in a way the pipeline does not see (a future of
    // its own, a wait on another stream), and unasked such buffers never
    // came back: the cache filled with them and every take allocated and
    // freed (bench_ffmpeg one frame at a time, on the H100: 3
    // cuMemAllocFromPoolAsync and 3 cuMemFreeAsync a frame, 22 us). A
    // pipeline whose in-flight bound keeps up never fills it, and asks
    // nothing.
    cw_buffer *hit = nullptr;
    {
        SpinLock lock(c->lock);
        size_t oldest = c->count;  // the oldest that fits
        for (size_t i = 0; i < c->count && !hit; i++) {
            cw_buffer *b = at(c, i);
            if (!fits(b, s, bytes)) continue;
            if (oldest == c->count) oldest = i;
            bool done = true;
            for (int u = 0; u < b->nuses && done; u++)
                done = query ? mark_done(b->uses[u]) : mark_finished(b->uses[u]);
            if (done) hit = cache_remove(c, i);
        }
        if (!hit && !query && oldest < c->count && c->count == kCacheMax) {
            cw_buffer *b = at(c, oldest);
            bool done = true;
            for (int u = 0; u < b->nuses && done; u++) done = mark_done(b->uses[u]);
            if (done) hit = cache_remove(c, oldest);
        }
    }
    if (hit) return reuse(c, hit, out);
    cw_buffer *b = nullptr;
    cw_status st = buffer_new(s, bytes, &b);
    if (st == CW_ERROR_OUT_OF_MEMORY) {
        // The device is full: wait for the oldest cached buffer of this size
        // instead (the only wait the cache ever makes).
        cw_buffer *old = nullptr;
        {
            SpinLock lock(c->lock);
            for (size_t i = 0; i < c->count && !old; i++)
                if (fits(at(c, i), s, bytes)) old = cache_remove(c, i);
        }
        if (!old) return st;
        for (int u = 0; u < old->nuses; u++) {
            cw_status w = mark_wait(old->uses[u]);
            if (w != CW_SUCCESS) {
                buffer_last_release(old);  // back (or freed): not handed out unfinished
                return w;
            }
        }
        return reuse(c, old, out);
    }
    if (st != CW_SUCCESS) return st;
    c->refs.fetch_add(1, std::memory_order_relaxed);
    b->cache = c;
    c->allocated.fetch_add(1, std::memory_order_relaxed);
    *out = b;
    return CW_SUCCESS;
}

void buffer_cache_stats(const BufferCache *c, BufferCacheStats *st) {
    st->reused = c->reused.load(std::memory_order_relaxed);
    st->allocated = c->allocated.load(std::memory_order_relaxed);
    SpinLock lock(const_cast<BufferCache *>(c)->lock);
    st->cached = c->count;
}

}  // namespace core
}  // namespace cw
