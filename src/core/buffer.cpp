// cuweave: device buffers from a stream-ordered pool, freed after every use.
//
// A buffer keeps up to kUses pending uses, each a Mark: an event recorded on
// the stream that used it (shared: the flow layer records one per stream per
// compute call and attaches it to every buffer the call touched). A later use
// on the same stream replaces the earlier one. The last release makes the
// context's release stream wait for each use, then enqueues cuMemFreeAsync
// there: the users' streams never wait for one another. When the list is
// full, the oldest use is folded into the release stream's waits at once (it
// only frees, so waiting early there delays nothing but frees).
// A BufferCache (the flow layer's, per pipeline) takes buffers back at their
// last release instead, and hands them out again once cuEventQuery says all
// their uses finished: recycling without a free, an allocation or a wait.
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.hpp"
#include "cuweave/multi.h"
#include "core/core.hpp"
#include "cuweave/buffer.h"
#include "core/stream.hpp"

namespace cw {
enum : uint32_t { kTagBuffer = 0x43574246u };  // "CWBF"
constexpr int kUses = 8;
constexpr size_t kCacheMax = 64;  // buffers a cache keeps

struct Mark {
    std::atomic<int> refs;
    std::atomic<bool> done;  // seen finished
    // Marks this one is known to come after on the GPU (its stream waited
    // for them before it was recorded): finished when it is. References,
    // dropped when it is seen finished or goes.
    Mark *covers[8];
    int ncovers;
    cw_context *ctx;  // the event's pool (retained)
    CUevent ev;
    const cw_stream *s;  // compared only, within a compute call (the stream is alive)
    uint64_t serial;     // the stream's serial: compared across time
};

struct BufferCache {
    std::atomic<int> refs;  // the owner's and one per buffer it made
    std::atomic<int> lock;
    bool closed;
    cw_buffer **items;  // oldest first
    size_t count;
    std::atomic<uint64_t> reused, allocated;
};
}  // namespace cw

struct cw_buffer {
    uint32_t tag;
    std::atomic<unsigned> refs;
    cw_context *ctx;  // retained
    CUdeviceptr ptr;
    size_t bytes;
    std::atomic<int> lock;  // guards uses
    int nuses;
    cw::Mark *uses[cw::kUses];
    cw::BufferCache *cache;  // where its last release puts it (retained), or NULL
};

namespace cw {

cw_status mark_record(cw_stream *s, Mark **out) {
    Mark *m = static_cast<Mark *>(calloc(1, sizeof(Mark)));
    if (!m) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = event_get(s->ctx, &m->ev);
    if (st == CW_SUCCESS) {
        st = on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(m->ev, s->cu); });
        if (st != CW_SUCCESS) event_put(s->ctx, m->ev);
    }
    if (st != CW_SUCCESS) {
        free(m);
        return st;
    }
    m->refs.store(1, std::memory_order_relaxed);
    m->ctx = s->ctx;
    context_retain(m->ctx);
    m->s = s;
    m->serial = s->serial;
    *out = m;
    return CW_SUCCESS;
}

void mark_retain(Mark *m) { m->refs.fetch_add(1, std::memory_order_relaxed); }

void mark_release(Mark *m) {
    if (!m || m->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (int i = 0; i < m->ncovers; i++) mark_release(m->covers[i]);
    event_put(m->ctx, m->ev);
    context_release(m->ctx);
    free(m);
}

CUevent mark_event(const Mark *m) { return m->ev; }

void mark_cover(Mark *m, Mark *earlier) {
    if (m == earlier || m->ncovers == (int)(sizeof m->covers / sizeof m->covers[0])) return;
    mark_retain(earlier);
    m->covers[m->ncovers++] = earlier;
}

namespace {
// m finished: so did everything it covers (the first to see it tells them).
void mark_set_done(Mark *m) {
    if (m->done.exchange(true, std::memory_order_acq_rel)) return;
    for (int i = 0; i < m->ncovers; i++) mark_set_done(m->covers[i]);
}
}  // namespace

bool mark_finished(const Mark *m) { return m->done.load(std::memory_order_acquire); }

bool mark_done(Mark *m) {
    if (m->done.load(std::memory_order_acquire)) return true;
    if (drv().cuEventQuery(m->ev) != CUDA_SUCCESS) return false;
    mark_set_done(m);
    return true;
}

cw_status mark_wait(Mark *m) {
    if (m->done.load(std::memory_order_acquire)) return CW_SUCCESS;
    CUresult r = drv().cuEventSynchronize(m->ev);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuEventSynchronize");
    mark_set_done(m);
    return CW_SUCCESS;
}
const cw_stream *mark_stream(const Mark *m) { return m->s; }

namespace {

inline bool buffer_ok(const cw_buffer *b) { return handle_live(b, kTagBuffer); }

#define CW_CHECK_BUFFER(b) CW_CHECK_HANDLE(buffer_ok, b, "cw_buffer")

}  // namespace

// The context's pool, made on first use: device memory of its device, kept
// cached (release threshold: all), never inserting dependencies between
// streams to reuse memory (a consumer of frame n must not hold up the
// producer of frame n+1).
cw_status mempool_get(cw_context *ctx, CUmemoryPool *out) {
    {
        SpinLock lock(ctx->lock);
        if (ctx->mempool) {
            *out = ctx->mempool;
            return CW_SUCCESS;
        }
    }
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = ctx->ordinal;
    CUmemoryPool pool = nullptr;
    CUresult r = drv().cuMemPoolCreate(&pool, &props);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuMemPoolCreate", "the context's buffer pool");
    cuuint64_t all = ~(cuuint64_t)0;
    int off = 0;
    r = drv().cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &all);
    if (r == CUDA_SUCCESS)
        r = drv().cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off);
    if (r != CUDA_SUCCESS) {
        drv().cuMemPoolDestroy(pool);
        return fail_cu(r, "cuMemPoolSetAttribute", "the context's buffer pool");
    }
    {
        SpinLock lock(ctx->lock);
        if (!ctx->mempool) {
            ctx->mempool = pool;
            pool = nullptr;
        }
        *out = ctx->mempool;
    }
    if (pool) {
        drv().cuMemPoolDestroy(pool);  // another thread made it first
        return CW_SUCCESS;
    }
    // Devices given peer access to this context before its pool existed.
    return pool_open_to(ctx, ctx->pool_peers.load());
}

cw_status pool_open_to(cw_context *ctx, uint64_t devices) {
    CUmemoryPool pool;
    {
        SpinLock lock(ctx->lock);
        pool = ctx->mempool;
    }
    if (!pool || !devices) return CW_SUCCESS;
    if (!drv().cuMemPoolSetAccess) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemPoolSetAccess");
    for (int d = 0; d < 64; d++) {
        if (!(devices >> d & 1) || d == ctx->ordinal) continue;
        CUmemAccessDesc desc;
        memset(&desc, 0, sizeof desc);
        desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc.location.id = d;
        desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CUresult r = drv().cuMemPoolSetAccess(pool, &desc, 1);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuMemPoolSetAccess", "opening the buffer pool to a peer device");
    }
    return CW_SUCCESS;
}

namespace {

// The context's release stream: leased from its fork pool once, kept.
cw_status release_stream(cw_context *ctx, cw_stream **out) {
    {
        SpinLock lock(ctx->lock);
        if (ctx->release) {
            *out = ctx->release;
            return CW_SUCCESS;
        }
    }
    cw_stream_pool *fp;
    CW_TRY(fork_pool(ctx, &fp));
    cw_stream *s;
    CW_TRY(pool_acquire(fp, &s, 0));
    {
        SpinLock lock(ctx->lock);
        if (!ctx->release) {
            ctx->release = s;
            s = nullptr;
        }
        *out = ctx->release;
    }
    if (s) (void)pool_release(fp, s);
    return CW_SUCCESS;
}

// Makes the release stream wait for m (or, when it cannot, the host), then
// drops m. False when neither could wait (a faulted device).
bool fold(cw_stream *rel, Mark *m) {
    bool ok = (rel && drv().cuStreamWaitEvent(rel->cu, m->ev, 0) == CUDA_SUCCESS) ||
              drv().cuEventSynchronize(m->ev) == CUDA_SUCCESS;
    mark_release(m);
    return ok;
}

// Frees the memory after every use, and the object.
void buffer_free(cw_buffer *b) {
    handle_retire(b);
    cw_stream *rel = nullptr;
    cw_status st = release_stream(b->ctx, &rel);
    if (st != CW_SUCCESS) rel = nullptr;
    bool ordered = true;
    for (int i = 0; i < b->nuses; i++) ordered = fold(rel, b->uses[i]) && ordered;
    b->nuses = 0;
    if (ordered && rel) {
        st = on_stream(rel, "cuMemFreeAsync", [&] { return drv().cuMemFreeAsync(b->ptr, rel->cu); });
    } else if (ordered) {
        // No release stream (making it failed): fold waited for every use on
        // the host, so nothing can still read the memory; free it on the
        // context's legacy stream.
        CurrentGuard guard;
        st = guard.enter(b->ctx->cu);
        if (st == CW_SUCCESS) {
            CUresult r = drv().cuMemFreeAsync(b->ptr, nullptr);
            st = r == CUDA_SUCCESS ? guard.leave() : fail_cu(r, "cuMemFreeAsync");
        }
    }
    if (!ordered || st != CW_SUCCESS) {
        // Never a free that could overtake a reader (a faulted device, say):
        // the memory stays allocated in the context's pool until the CUDA
        // context itself goes (for a primary context, when nothing retains it).
        log(CW_LOG_WARNING, "%s: a buffer of %zu bytes could not be freed in stream order; "
            "it stays allocated until its CUDA context is destroyed", current_api(), b->bytes);
    }
    context_release(b->ctx);
    b->~cw_buffer();
    free(b);
}

void cache_release(BufferCache *c) {
    if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    free(c->items);
    c->~BufferCache();
    free(c);
}

// The last reference went: back to its cache, or freed.
void buffer_last_release(cw_buffer *b) {
    BufferCache *c = b->cache;
    if (c) {
        bool kept = false;
        {
            SpinLock lock(c->lock);
            if (!c->closed && c->count < kCacheMax) {
                c->items[c->count++] = b;
                kept = true;
            }
        }
        if (kept) return;  // the buffer keeps its cache reference
        b->cache = nullptr;
        cache_release(c);
    }
    CurrentGuard guard;
    (void)guard.enter(b->ctx->cu);
    buffer_free(b);
}

cw_status buffer_new(cw_stream *s, size_t bytes, cw_buffer **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = s->ctx;
    CUmemoryPool pool = nullptr;
    CW_TRY(mempool_get(ctx, &pool));
    void *mem = calloc(1, sizeof(cw_buffer));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a buffer");
    cw_buffer *b = new (mem) cw_buffer();
    CUdeviceptr p = 0;
    cw_status st = on_stream(s, "cuMemAllocFromPoolAsync",
                             [&] { return drv().cuMemAllocFromPoolAsync(&p, bytes, pool, s->cu); });
    if (st != CW_SUCCESS) {
        b->~cw_buffer();
        free(b);
        return st;
    }
    room.publish(b, kTagBuffer);
    b->refs.store(1, std::memory_order_relaxed);
    b->ctx = ctx;
    context_retain(ctx);
    b->ptr = p;
    b->bytes = bytes;
    *out = b;
    return CW_SUCCESS;
}

}  // namespace

cw_status buffer_attach(cw_buffer *b, Mark *m) {
    mark_retain(m);
    Mark *out = nullptr;
    bool replaced = false;
    {
        SpinLock lock(b->lock);
        // A use on the same stream covers the earlier one.
        for (int i = 0; i < b->nuses && !replaced; i++)
            if (b->uses[i]->serial == m->serial) {  // not the address: a later stream may reuse it
                out = b->uses[i];
                b->uses[i] = m;
                replaced = true;
            }
        if (!replaced) {
            if (b->nuses == kUses) {
                out = b->uses[0];
                memmove(&b->uses[0], &b->uses[1], (kUses - 1) * sizeof(Mark *));
                b->nuses--;
            }
            b->uses[b->nuses++] = m;
        }
    }
    if (!out) return CW_SUCCESS;
    if (replaced) {
        mark_release(out);
        return CW_SUCCESS;
    }
    // Full: the oldest use goes into the release stream's waits now.
    cw_stream *rel = nullptr;
    if (release_stream(b->ctx, &rel) != CW_SUCCESS) rel = nullptr;
    if (!fold(rel, out))
        return fail(CW_ERROR_DEVICE_FAULT, "a buffer's earlier use could not be waited for (the device faulted?)");
    return CW_SUCCESS;
}

namespace {
// A use recorded by hand: a mark of its own on s.
cw_status record_use(cw_buffer *b, cw_stream *s) {
    Mark *m = nullptr;
    CW_TRY(mark_record(s, &m));
    cw_status st = buffer_attach(b, m);
    mark_release(m);
    return st;
}
}  // namespace

cw_context *buffer_context(const cw_buffer *b) { return b->ctx; }
size_t buffer_bytes(const cw_buffer *b) { return b->bytes; }

cw_status buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src) {
    if (!drv().cuMemcpyPeerAsync) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemcpyPeerAsync");
    if (capturing(s))
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the stream is being captured: a use recorded in a graph would not order the free");
    CW_TRY(on_stream(s, "cuMemcpyPeerAsync", [&] {
        return drv().cuMemcpyPeerAsync(dst->ptr, dst->ctx->cu, src->ptr, src->ctx->cu, src->bytes, s->cu);
    }));
    // One record serves both buffers' uses.
    Mark *m = nullptr;
    cw_status st = mark_record(s, &m);
    if (st == CW_SUCCESS) {
        st = buffer_attach(src, m);
        if (st == CW_SUCCESS) st = buffer_attach(dst, m);
        mark_release(m);
    }
    if (st != CW_SUCCESS) {
        // The copy is queued but its use could not be recorded: wait for it
        // here, so that no release frees either buffer under it. The
        // failure stays the one reported.
        char msg[400];
        copy_text(msg, sizeof msg, cw_last_error_message());
        const cw_status failed = st;
        (void)on_stream(s, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(s->cu); });
        return fail(failed, "%s", msg);
    }
    return CW_SUCCESS;
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
        memcpy(items, c->items, n * sizeof(cw_buffer *));
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
// Takes c->items[i] out of the cache (lock held).
cw_buffer *cache_remove(BufferCache *c, size_t i) {
    cw_buffer *b = c->items[i];
    memmove(&c->items[i], &c->items[i + 1], (c->count - i - 1) * sizeof(cw_buffer *));
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
    // of recent work costs about 2 us on the H100), or asked (query true).
    // Nothing waits: a buffer still in use stays cached and a new one is
    // allocated, so the cache grows to what is in flight.
    cw_buffer *hit = nullptr;
    {
        SpinLock lock(c->lock);
        for (size_t i = 0; i < c->count && !hit; i++) {
            cw_buffer *b = c->items[i];
            if (!fits(b, s, bytes)) continue;
            bool done = true;
            for (int u = 0; u < b->nuses && done; u++)
                done = query ? mark_done(b->uses[u]) : b->uses[u]->done.load(std::memory_order_acquire);
            if (done) hit = cache_remove(c, i);
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
                if (fits(c->items[i], s, bytes)) old = cache_remove(c, i);
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

void buffer_teardown(cw_context *ctx) {
    if (ctx->release) {
        cw_stream *s = ctx->release;
        ctx->release = nullptr;
        drv().cuStreamSynchronize(s->cu);  // pending frees first
        if (ctx->fork_pool) (void)pool_release(ctx->fork_pool, s);
    }
    if (ctx->mempool) {
        // Outstanding allocations (buffers whose free could not be ordered)
        // go with the pool once they are no longer in use.
        drv().cuMemPoolDestroy(ctx->mempool);
        ctx->mempool = nullptr;
    }
}

}  // namespace cw

using namespace cw;

extern "C" {

CW_API cw_status cw_buffer_alloc(cw_buffer **out, cw_stream *s, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(bytes > 0);
    if (capturing(s))
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the stream is being captured: a buffer cannot be allocated into a graph (allocate before "
                    "the capture)");
    cw_buffer *b = nullptr;
    CW_TRY(buffer_new(s, bytes, &b));
    // The free must follow the allocation: its first use.
    cw_status st = record_use(b, s);
    if (st != CW_SUCCESS) {
        // Nothing used it yet: freeing on its own stream is ordered.
        (void)on_stream(s, "cuMemFreeAsync", [&] { return drv().cuMemFreeAsync(b->ptr, s->cu); });
        context_release(b->ctx);
        handle_retire(b);
        b->~cw_buffer();
        free(b);
        return st;
    }
    *out = b;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_retain(cw_buffer *b) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    b->refs.fetch_add(1, std::memory_order_relaxed);
    return CW_SUCCESS;
}

CW_API void cw_buffer_release(cw_buffer **b) {
    CW_ENTRY;
    if (!b || !*b) return;
    cw_buffer *x = *b;
    *b = nullptr;
    if (!buffer_ok(x)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "b is not a live cw_buffer");
        return;
    }
    if (x->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    buffer_last_release(x);
}

CW_API cw_status cw_buffer_use(cw_buffer *b, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_STREAM(s);
    if (capturing(s))
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the stream is being captured: a use recorded in a graph would not order the free");
    return record_use(b, s);  // any device: a peer reading it, or a peer copy
}

CW_API cw_status cw_buffer_get_ptr(const cw_buffer *b, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_ARG(dptr != NULL);
    *dptr = b->ptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_get_writable(cw_buffer *b, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_ARG(dptr != NULL);
    unsigned refs = b->refs.load(std::memory_order_acquire);
    if (refs != 1)
        return fail(CW_ERROR_INVALID_STATE,
                    "the buffer is shared (%u references): it is read-only; allocate a new one to write", refs);
    *dptr = b->ptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_get_info(const cw_buffer *b, cw_buffer_info *info) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    info->dptr = b->ptr;
    info->bytes = b->bytes;
    info->refs = b->refs.load(std::memory_order_acquire);
    {
        SpinLock lock(const_cast<cw_buffer *>(b)->lock);
        info->uses = (unsigned)b->nuses;
    }
    info->device = b->ctx->ordinal;
    return CW_SUCCESS;
}

CW_API cw_status cw_buffer_get_context(const cw_buffer *b, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = b->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_copy_to_device(cw_stream *s, unsigned long long dst, const void *src, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(src != NULL && dst != 0);
    return on_stream(s, "cuMemcpyHtoDAsync", [&] { return drv().cuMemcpyHtoDAsync(dst, src, bytes, s->cu); });
}

CW_API cw_status cw_copy_to_host(cw_stream *s, void *dst, unsigned long long src, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    if (bytes == 0) return CW_SUCCESS;
    CW_CHECK_ARG(dst != NULL && src != 0);
    return on_stream(s, "cuMemcpyDtoHAsync", [&] { return drv().cuMemcpyDtoHAsync(dst, src, bytes, s->cu); });
}

CW_API cw_status cw_buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_BUFFER(dst);
    CW_CHECK_BUFFER(src);
    CW_CHECK_ARG(dst != src);
    if (dst->bytes < src->bytes)
        return fail(CW_ERROR_INVALID_ARGUMENT, "dst holds %zu bytes, src %zu", dst->bytes, src->bytes);
    if (dst->refs.load(std::memory_order_acquire) > 1)
        return fail(CW_ERROR_INVALID_STATE, "dst is shared (%u references): it is read-only",
                    dst->refs.load(std::memory_order_relaxed));
    return buffer_copy(s, dst, src);
}

CW_API cw_status cw_buffer_pool_share(cw_context *owner, cw_context *peer) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(owner);
    CW_CHECK_CONTEXT(peer);
    if (owner->device == peer->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "owner and peer are both on device %d", owner->ordinal);
    if (!drv().cuMemPoolSetAccess) return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuMemPoolSetAccess");
    // Peer access first: it is what the topology must allow, and it says so
    // (CW_ERROR_NOT_SUPPORTED) before the pool is touched.
    CW_TRY(cw_context_enable_peer(peer, owner));
    CUmemoryPool pool = nullptr;
    CW_TRY(mempool_get(owner, &pool));  // made now: opened to every device given access so far
    return pool_open_to(owner, device_bit(peer));
}

CW_API cw_status cw_host_alloc(cw_context *ctx, size_t bytes, void **out) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(bytes > 0);
    CW_CHECK_ARG(out != NULL);
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    void *p = nullptr;
    // Portable (every context) and mapped, as the futures' slab is.
    CUresult r = drv().cuMemHostAlloc(&p, bytes, 0x01 | 0x02);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuMemHostAlloc");
    memset(p, 0, bytes);
    CW_TRY(guard.leave());
    *out = p;
    return CW_SUCCESS;
}

namespace {
struct HostFree {
    IdleRelease rel;
    cw_context *ctx;
    void *p;
};
void host_free_now(void *owner) {
    HostFree *h = static_cast<HostFree *>(owner);
    {
        CurrentGuard guard;
        (void)guard.enter(h->ctx->cu);
        CUresult r = drv().cuMemFreeHost(h->p);
        if (r != CUDA_SUCCESS) (void)fail_cu(r, "cuMemFreeHost");
    }
    context_release(h->ctx);
    free(h);
}
}  // namespace

CW_API void cw_host_free(cw_context *ctx, void *p) {
    CW_ENTRY;
    if (!p) return;
    if (!context_ok(ctx)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "ctx is not a live cw_context");
        return;
    }
    HostFree *h = static_cast<HostFree *>(calloc(1, sizeof(HostFree)));
    if (!h) {
        (void)fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory: the page-locked memory is kept");
        return;
    }
    h->ctx = ctx;
    context_retain(ctx);
    h->p = p;
    h->rel.run = host_free_now;
    h->rel.owner = h;
    release_when_idle(&h->rel);
}

}  // extern "C"
