/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the buffer cache (buffer.hpp). It keeps the memory of
// buffers whose last reference went, and hands it back, as a new buffer,
// when every use recorded on it has finished on the GPU: memory recycled
// without a free, an allocation, or a wait between streams.
//
// The cache keeps memory, not buffers: a buffer's handle is retired with
// its last reference (buffer_last_release), as any other handle is, so a
// stale copy of it is refused (the registry's quarantine keeps its address
// from a new object), and the memory comes back under a new handle. The
// cache holds a record of it (CachedMemory), with the context's reference
// and the uses, and the reference of the cache its buffer held.
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.hpp"

namespace cw {
namespace core {

constexpr size_t kCacheMax = 64;  // memory a cache keeps (a power of two: the ring's index wraps by a mask)
static_assert((kCacheMax & (kCacheMax - 1)) == 0, "kCacheMax is a power of two");

struct BufferCache {
    std::atomic<int> refs;  // the owner's, one per buffer it made and one per record it holds
    std::atomic<int> lock;  // guards what follows; no driver call is made under it
    bool closed;
    CachedMemory *items;  // a ring of kCacheMax: oldest first, from items[head]
    size_t head, count;
    std::atomic<uint64_t> reused, allocated;
};

// The i-th oldest record's slot (i < count, or == count to append).
namespace {
CachedMemory &at(BufferCache *c, size_t i) { return c->items[(c->head + i) & (kCacheMax - 1)]; }

// Under the lock: appends m (true), or not (closed or full: false).
bool put(BufferCache *c, const CachedMemory &m) {
    if (c->closed || c->count >= kCacheMax) return false;
    at(c, c->count++) = m;
    return true;
}

// Frees a record's memory after its uses, and drops its references (the
// context's and the cache's).
void drop(BufferCache *c, CachedMemory &m) {
    {
        CurrentGuard guard;
        (void)guard.enter(m.ctx->cu);
        memory_free(m);
    }
    cache_release(c);
}
}  // namespace

bool cache_keep(BufferCache *c, cw_buffer *b) {
    CachedMemory m;
    m.ctx = b->ctx;
    m.ptr = b->ptr;
    m.bytes = b->bytes;
    m.nuses = b->nuses;
    memcpy(m.uses, b->uses, sizeof m.uses);
    SpinLock lock(c->lock);
    if (!put(c, m)) return false;
    b->nuses = 0;  // the record has them, with the context's reference
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
    c->items = static_cast<CachedMemory *>(calloc(kCacheMax, sizeof(CachedMemory)));
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
    CachedMemory items[kCacheMax];
    size_t n;
    {
        SpinLock lock(c->lock);
        c->closed = true;
        n = c->count;
        for (size_t i = 0; i < n; i++) items[i] = at(c, i);
        c->count = 0;
    }
    for (size_t i = 0; i < n; i++) drop(c, items[i]);
    cache_release(c);  // the owner's
}

namespace {
// Takes the i-th oldest record out of the cache (lock held). The oldest,
// the usual one, moves the ring's head: nothing is moved.
CachedMemory cache_remove(BufferCache *c, size_t i) {
    CachedMemory m = at(c, i);
    if (i == 0) {
        c->head = (c->head + 1) & (kCacheMax - 1);
    } else {
        for (size_t j = i; j + 1 < c->count; j++) at(c, j) = at(c, j + 1);
    }
    c->count--;
    return m;
}

bool fits(const CachedMemory &m, const cw_stream *s, size_t bytes) {
    return m.bytes == bytes && m.ctx->device == s->ctx->device;
}

bool known_finished(const CachedMemory &m) {
    for (int u = 0; u < m.nuses; u++)
        if (!mark_finished(m.uses[u])) return false;
    return true;
}

// Under the lock: takes out the oldest record that fits and whose uses are
// all known finished (no driver call).
bool take_known(BufferCache *c, const cw_stream *s, size_t bytes, CachedMemory *out) {
    for (size_t i = 0; i < c->count; i++) {
        const CachedMemory &m = at(c, i);
        if (fits(m, s, bytes) && known_finished(m)) {
            *out = cache_remove(c, i);
            return true;
        }
    }
    return false;
}

// A new buffer for a record's memory (every use finished: dropped), with
// its cache reference. On failure (out of host memory) the record goes back
// to the cache, or is freed when the cache is closed or full.
cw_status reuse(BufferCache *c, CachedMemory &m, cw_buffer **out) {
    for (int u = 0; u < m.nuses; u++) mark_release(m.uses[u]);
    m.nuses = 0;
    cw_buffer *b = nullptr;
    cw_status st = buffer_rewrap(m, &b);
    if (st != CW_SUCCESS) {
        bool kept;
        {
            SpinLock lock(c->lock);
            kept = put(c, m);
        }
        if (!kept) drop(c, m);
        return st;
    }
    b->cache = c;  // the record's reference of the cache
    c->reused.fetch_add(1, std::memory_order_relaxed);
    *out = b;
    return CW_SUCCESS;
}

// The cache's ask (query true, or its last resort with query false, see
// buffer_cache_take) with the lock released: the uses not known finished
// of the records that fit, oldest first, noted (and retained) under the
// lock, then asked without it (cuEventQuery), a record's in order up to
// the first unfinished one, until a record is found all finished. A mark
// found unfinished is not asked again in the same take (records share
// marks: one per stream per compute call). Then, when a record was found
// finished, the oldest known finished is taken out under the lock again
// (another thread may have taken that one meanwhile). At most one call a
// record that fits, plus one a use found finished: never under the lock.
bool take_asked(BufferCache *c, const cw_stream *s, size_t bytes, bool query, CachedMemory *out) {
    Mark *ask[kCacheMax * kUses];
    unsigned char per[kCacheMax];  // ask[] entries of each record noted, in order
    size_t nask = 0, nrec = 0;
    {
        SpinLock lock(c->lock);
        if (take_known(c, s, bytes, out)) return true;
        // Without query, only the oldest that fits, and only when the cache is full.
        if (!query && c->count < kCacheMax) return false;
        for (size_t i = 0; i < c->count && nrec < kCacheMax; i++) {
            const CachedMemory &m = at(c, i);
            if (!fits(m, s, bytes)) continue;
            unsigned char n = 0;
            for (int u = 0; u < m.nuses; u++) {
                Mark *k = m.uses[u];
                if (mark_finished(k)) continue;
                mark_retain(k);
                ask[nask++] = k;
                n++;
            }
            per[nrec++] = n;
            if (!query) break;
        }
    }
    Mark *unfinished[kCacheMax];
    size_t nun = 0;
    bool found = false;
    for (size_t r = 0, k = 0; r < nrec && !found; k += per[r], r++) {
        bool all = true;
        for (size_t j = k; j < k + per[r] && all; j++) {
            bool asked = false;  // and found unfinished, in this take
            for (size_t x = 0; x < nun && !asked; x++) asked = unfinished[x] == ask[j];
            if (asked) {
                all = false;
            } else if (!mark_done(ask[j])) {
                all = false;
                if (nun < kCacheMax) unfinished[nun++] = ask[j];
            }
        }
        found = all;
    }
    for (size_t j = 0; j < nask; j++) mark_release(ask[j]);
    if (!found) return false;
    SpinLock lock(c->lock);
    return take_known(c, s, bytes, out);
}
}  // namespace

cw_status buffer_cache_take(BufferCache *c, cw_stream *s, size_t bytes, bool query, cw_buffer **out) {
    // Oldest first: cached memory of this size and device whose uses are
    // finished: known so (query false: a pipeline that waits for old
    // iterations learns it that way, with no driver call here; a
    // cuEventQuery of recent work costs about 2 us on the H100), or asked
    // (query true, or the oldest that fits when none is known finished and
    // the cache is full), with the cache's lock released (take_asked).
    // Nothing waits: memory still in use stays cached and a new buffer is
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
    CachedMemory hit;
    if (take_asked(c, s, bytes, query, &hit)) return reuse(c, hit, out);
    cw_buffer *b = nullptr;
    cw_status st = buffer_new(s, bytes, &b);
    if (st == CW_ERROR_OUT_OF_MEMORY) {
        // The device is full: wait for the oldest cached memory of this size
        // instead (the only wait the cache ever makes).
        bool have = false;
        {
            SpinLock lock(c->lock);
            for (size_t i = 0; i < c->count && !have; i++)
                if (fits(at(c, i), s, bytes)) {
                    hit = cache_remove(c, i);
                    have = true;
                }
        }
        if (!have) return st;
        for (int u = 0; u < hit.nuses; u++) {
            cw_status w = mark_wait(hit.uses[u]);
            if (w != CW_SUCCESS) {
                // Back (or freed): not handed out unfinished.
                bool kept;
                {
                    SpinLock lock(c->lock);
                    kept = put(c, hit);
                }
                if (!kept) drop(c, hit);
                return w;
            }
        }
        return reuse(c, hit, out);
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

bool buffer_cache_locked(const BufferCache *c) { return c->lock.load(std::memory_order_acquire) != 0; }

}  // namespace core
}  // namespace cw
