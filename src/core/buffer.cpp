/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: device buffers from a stream-ordered pool, freed after every
// use; pinned host memory (buffer.hpp).
//
// The last release of a buffer makes the context's release stream wait for
// each of its uses, then enqueues cuMemFreeAsync there: the users' streams
// never wait for one another. When the list of uses is full, the oldest use
// is folded into the release stream's waits at once (it only frees, so
// waiting early there delays nothing but frees).
#include "core/buffer.hpp"

#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/pool.hpp"
#include "core/share.hpp"

namespace cw {
namespace core {

namespace {
void buffers_teardown(cw_context *ctx);
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
    context_on_teardown(buffers_teardown, kTeardownUsers);
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
    context_on_teardown(buffers_teardown, kTeardownUsers);
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

// Frees memory after every use (dropping them), with its context current:
// the release stream waits for each use, then frees it there.
void free_after_uses(cw_context *ctx, CUdeviceptr ptr, size_t bytes, Share *share, Mark *const *uses, int nuses) {
    cw_stream *rel = nullptr;
    cw_status st = release_stream(ctx, &rel);
    if (st != CW_SUCCESS) rel = nullptr;
    // The release stream's waits and free: in relaxed mode, so that a buffer
    // dropped while this thread captures is freed and the capture goes on.
    RelaxedCapture relaxed;
    bool ordered = true;
    for (int i = 0; i < nuses; i++) ordered = mark_fold(rel, uses[i]) && ordered;
    if (share) {
        // Shareable memory (cuMemAlloc, or an import): freed or closed once
        // the uses and the importers are done (share.cpp).
        share_memory_release(ctx, share, ptr, bytes, rel, ordered);
    } else if (ordered && rel) {
        st = on_stream(rel, "cuMemFreeAsync", [&] { return drv().cuMemFreeAsync(ptr, rel->cu); });
    } else if (ordered) {
        // No release stream (making it failed): fold waited for every use on
        // the host, so nothing can still read the memory; free it on the
        // context's legacy stream.
        CurrentGuard guard;
        st = guard.enter(ctx->cu);
        if (st == CW_SUCCESS) {
            CUresult r = drv().cuMemFreeAsync(ptr, nullptr);
            st = r == CUDA_SUCCESS ? guard.leave() : fail_cu(r, "cuMemFreeAsync");
        }
    }
    if (!ordered || st != CW_SUCCESS) {
        // Never a free that could overtake a reader (a faulted device, say):
        // the memory stays allocated in the context's pool until the CUDA
        // context itself goes (for a primary context, when nothing retains it).
        log(CW_LOG_WARNING, "%s: a buffer of %zu bytes could not be freed in stream order; "
            "it stays allocated until its CUDA context is destroyed", current_api(), bytes);
    }
}

// The object of a buffer whose handle is retired and whose memory is gone
// (freed, or to a cache): the registry's quarantine holds its memory.
void object_free(cw_buffer *b) {
    b->~cw_buffer();
    handle_free_sized(b, sizeof(cw_buffer));  // kept for a later buffer once out of the quarantine
}

}  // namespace

// Frees the memory after every use, and the object.
void buffer_free(cw_buffer *b) {
    handle_retire(b);
    free_after_uses(b->ctx, b->ptr, b->bytes, b->share, b->uses, b->nuses);
    b->nuses = 0;
    b->share = nullptr;
    context_release(b->ctx);
    object_free(b);
}

void memory_free(CachedMemory &m) {
    free_after_uses(m.ctx, m.ptr, m.bytes, nullptr, m.uses, m.nuses);
    m.nuses = 0;
    context_release(m.ctx);
    m.ctx = nullptr;
}

// The last reference went: the handle is retired (a stale copy is refused
// from now on, and the quarantine keeps its address from a new object),
// then the memory goes back to its cache, or is freed.
void buffer_last_release(cw_buffer *b) {
    handle_retire(b);
    BufferCache *c = b->cache;
    if (c) {
        // Retired first: once the memory is in the cache, another thread may
        // hand it out under a new handle.
        if (cache_keep(c, b)) {  // the memory keeps the buffer's cache reference
            object_free(b);
            return;
        }
        b->cache = nullptr;
        cache_release(c);
    }
    CurrentGuard guard;
    (void)guard.enter(b->ctx->cu);
    buffer_free(b);
}

cw_status buffer_rewrap(const CachedMemory &m, cw_buffer **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    void *mem = handle_alloc(sizeof(cw_buffer));  // a frame's takes: an object a recycled buffer left
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a buffer");
    cw_buffer *b = new (mem) cw_buffer();
    b->ctx = m.ctx;  // the record's reference
    b->ptr = m.ptr;
    b->bytes = m.bytes;
    b->refs.store(1, std::memory_order_relaxed);
    room.publish(b);
    *out = b;
    return CW_SUCCESS;
}

cw_status buffer_new(cw_stream *s, size_t bytes, cw_buffer **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = s->ctx;
    CUmemoryPool pool = nullptr;
    CW_TRY(mempool_get(ctx, &pool));
    void *mem = handle_alloc(sizeof(cw_buffer));
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
    room.publish(b);
    b->refs.store(1, std::memory_order_relaxed);
    b->ctx = ctx;
    context_retain(ctx);
    b->ptr = p;
    b->bytes = bytes;
    *out = b;
    return CW_SUCCESS;
}

cw_status buffer_attach(cw_buffer *b, Mark *m) {
    mark_retain(m);
    Mark *out = nullptr;
    bool replaced = false;
    {
        SpinLock lock(b->lock);
        // A use recorded later on the same stream covers the earlier one
        // (by the stream's serial, not its address: a later stream may
        // reuse it). Not the order of attaching: two threads' calls on one
        // stream attach in either order; marks they recorded at once are
        // both kept.
        for (int i = 0; i < b->nuses && !replaced; i++) {
            if (mark_follows(m, b->uses[i])) {
                out = b->uses[i];
                b->uses[i] = m;
                replaced = true;
            } else if (b->uses[i] == m || mark_follows(b->uses[i], m)) {
                out = m;  // kept already, or covered: the caller's reference goes
                replaced = true;
            }
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
    if (!mark_fold(rel, out))
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
        KeepError keep;
        (void)on_stream(s, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(s->cu); });
        return st;
    }
    return CW_SUCCESS;
}







cw_status buffer_alloc(cw_stream *s, size_t bytes, cw_buffer **out) {
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
        handle_free(b);
        return st;
    }
    *out = b;
    return CW_SUCCESS;
}

void buffer_retain(cw_buffer *b) { b->refs.fetch_add(1, std::memory_order_relaxed); }

void buffer_release(cw_buffer *b) {
    if (b->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    buffer_last_release(b);
}

cw_status buffer_use(cw_buffer *b, cw_stream *s) {
    if (capturing(s))
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the stream is being captured: a use recorded in a graph would not order the free");
    return record_use(b, s);  // any device: a peer reading it, or a peer copy
}

void buffer_info(const cw_buffer *b, cw_buffer_info *info) {
    memset(info, 0, sizeof *info);
    info->dptr = b->ptr;
    info->bytes = b->bytes;
    info->refs = b->refs.load(std::memory_order_acquire);
    {
        SpinLock lock(const_cast<cw_buffer *>(b)->lock);
        info->uses = (unsigned)b->nuses;
    }
    info->device = b->ctx->ordinal;
    info->context = b->ctx;
}

cw_status copy_to_device(cw_stream *s, CUdeviceptr dst, const void *src, size_t bytes) {
    return on_stream(s, "cuMemcpyHtoDAsync", [&] { return drv().cuMemcpyHtoDAsync(dst, src, bytes, s->cu); });
}

cw_status copy_to_host(cw_stream *s, void *dst, CUdeviceptr src, size_t bytes) {
    return on_stream(s, "cuMemcpyDtoHAsync", [&] { return drv().cuMemcpyDtoHAsync(dst, src, bytes, s->cu); });
}

cw_status host_alloc(cw_context *ctx, size_t bytes, void **out) {
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    void *p = nullptr;
    // Portable (every context) and mapped, as the futures' slab is.
    CUresult r = drv().cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
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

void buffers_teardown(cw_context *ctx) {
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

}  // namespace

cw_status host_free(cw_context *ctx, void *p) {
    HostFree *h = static_cast<HostFree *>(calloc(1, sizeof(HostFree)));
    if (!h) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory: the page-locked memory is kept");
    h->ctx = ctx;
    context_retain(ctx);
    h->p = p;
    h->rel.run = host_free_now;
    h->rel.owner = h;
    release_when_idle(&h->rel);
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
