// cuweave: device buffers from a stream-ordered pool, freed after every use.
//
// A buffer keeps up to kUses pending uses: an event recorded on the stream
// that used it, from the event pool of that stream's context (kept alive by
// the use). The last release makes the context's release stream wait for
// each, then enqueues cuMemFreeAsync there. The users' streams never wait
// for one another. When the list is full, the oldest uses are folded into
// the release stream's waits at once (it only frees, so waiting early there
// delays nothing but frees).
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core.hpp"
#include "cuweave/buffer.h"
#include "stream.hpp"

namespace cw {
enum : uint32_t { kTagBuffer = 0x43574246u };  // "CWBF"
constexpr int kUses = 8;
}  // namespace cw

struct cw_buffer {
    uint32_t tag;
    std::atomic<unsigned> refs;
    cw_context *ctx;  // retained
    CUdeviceptr ptr;
    size_t bytes;
    std::atomic<int> lock;  // guards uses
    int nuses;
    struct Use {
        cw_context *ctx;    // the event's pool (retained)
        CUevent ev;
        const cw_stream *s; // compared only: a later use on the same stream replaces it
    } uses[cw::kUses];
};

namespace cw {

namespace {

inline bool buffer_ok(const cw_buffer *b) { return b && b->tag == kTagBuffer; }

#define CW_CHECK_BUFFER(b)                                                                  \
    do {                                                                                    \
        CW_CHECK_ARG((b) != NULL);                                                          \
        if (__builtin_expect(!buffer_ok(b), 0))                                             \
            return fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_buffer", #b);         \
    } while (0)

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
    if (pool) drv().cuMemPoolDestroy(pool);  // another thread made it first
    return CW_SUCCESS;
}

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

bool capturing(const cw_stream *s) { return s->cap.active || s->in_capture; }

// Makes rel wait for use u and gives the event back.
cw_status fold_use(cw_stream *rel, cw_buffer::Use &u) {
    cw_status st = on_stream(rel, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(rel->cu, u.ev, 0); });
    event_put(u.ctx, u.ev);
    context_release(u.ctx);
    u.ctx = nullptr;
    u.ev = nullptr;
    return st;
}

cw_status record_use(cw_buffer *b, cw_stream *s) {
    cw_context *ectx = s->ctx;
    CUevent ev;
    CW_TRY(event_get(ectx, &ev));
    cw_status st = on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(ev, s->cu); });
    if (st != CW_SUCCESS) {
        event_put(ectx, ev);
        return st;
    }
    context_retain(ectx);
    cw_buffer::Use folded{nullptr, nullptr, nullptr};
    {
        SpinLock lock(b->lock);
        // A use on the same stream covers the earlier one: swap the event.
        for (int i = 0; i < b->nuses; i++)
            if (b->uses[i].s == s) {
                folded = b->uses[i];
                b->uses[i].ev = ev;
                ev = nullptr;
                break;
            }
        if (!ev) {
            // nothing to fold: give the older event back below
        } else if (b->nuses == kUses) {
            folded = b->uses[0];
            memmove(&b->uses[0], &b->uses[1], (kUses - 1) * sizeof(cw_buffer::Use));
            b->nuses--;
        }
        if (ev) b->uses[b->nuses++] = cw_buffer::Use{ectx, ev, s};
    }
    if (!ev) {
        // Replaced: the older event (same stream, same context) is not needed.
        event_put(folded.ctx, folded.ev);
        context_release(folded.ctx);
        return CW_SUCCESS;
    }
    if (folded.ev) {
        cw_stream *rel;
        st = release_stream(b->ctx, &rel);
        if (st == CW_SUCCESS) st = fold_use(rel, folded);
        if (st != CW_SUCCESS) {
            // The release stream cannot wait for it: wait here instead, so the
            // free can never overtake this use.
            drv().cuEventSynchronize(folded.ev);
            if (folded.ctx) {
                event_put(folded.ctx, folded.ev);
                context_release(folded.ctx);
            }
        }
    }
    return CW_SUCCESS;
}

void buffer_free(cw_buffer *b) {
    b->tag = kTagDead;
    cw_stream *rel = nullptr;
    cw_status st = release_stream(b->ctx, &rel);
    // Ordered after every use: on the GPU (the release stream waits), or,
    // when the driver refuses that wait, by waiting for the use here.
    bool ordered = true;
    for (int i = 0; i < b->nuses; i++) {
        cw_buffer::Use &u = b->uses[i];
        bool waited = rel && drv().cuStreamWaitEvent(rel->cu, u.ev, 0) == CUDA_SUCCESS;
        if (!waited && drv().cuEventSynchronize(u.ev) != CUDA_SUCCESS) ordered = false;
        event_put(u.ctx, u.ev);
        context_release(u.ctx);
    }
    if (ordered && rel)
        st = on_stream(rel, "cuMemFreeAsync", [&] { return drv().cuMemFreeAsync(b->ptr, rel->cu); });
    if (!ordered || !rel || st != CW_SUCCESS) {
        // Never a free that could overtake a reader: the memory stays in the
        // context's pool, which the context's destruction frees.
        log(CW_LOG_WARNING, "%s: a buffer of %zu bytes could not be freed in stream order; "
            "it is kept until its context is destroyed", current_api(), b->bytes);
    }
    context_release(b->ctx);
    b->~cw_buffer();
    free(b);
}

}  // namespace

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
    b->tag = kTagBuffer;
    b->refs.store(1, std::memory_order_relaxed);
    b->ctx = ctx;
    context_retain(ctx);
    b->ptr = p;
    b->bytes = bytes;
    st = record_use(b, s);  // the free must follow the allocation
    if (st != CW_SUCCESS) {
        // Nothing used it yet: freeing on its own stream is ordered.
        (void)on_stream(s, "cuMemFreeAsync", [&] { return drv().cuMemFreeAsync(p, s->cu); });
        context_release(ctx);
        b->tag = kTagDead;
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
    CurrentGuard guard;
    (void)guard.enter(x->ctx->cu);
    buffer_free(x);
}

CW_API cw_status cw_buffer_use(cw_buffer *b, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_BUFFER(b);
    CW_CHECK_STREAM(s);
    if (capturing(s))
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the stream is being captured: a use recorded in a graph would not order the free");
    if (s->ctx->device != b->ctx->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream is on device %d, the buffer on device %d", s->ctx->ordinal,
                    b->ctx->ordinal);
    return record_use(b, s);
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
