/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: buffers and events shared between processes (share.hpp).
//
// A handle (cw_shared_handle, 128 bytes) carries the driver's IPC handle,
// the exporter's pid, its device's UUID, the size, and what names the
// object's shared-memory block (share_block.cpp), which holds one slot per
// import: the importing process's pid, cleared when it closes. The memory
// an import opens must hold the size (check_mapping). The exporter's last
// release frees the object when no slot holds a live process; otherwise
// the object waits in a list that later calls sweep and that the context's
// teardown empties (waiting up to kTeardownWaitMs in all for the
// importers, and for a sweep freeing one of its objects on another thread).
#include "core/share.hpp"

#include <new>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sync.hpp"
#include "core/context.hpp"
#include "core/share_block.hpp"

namespace cw {
namespace core {

std::atomic<ShareHook> g_share_hook{nullptr};
std::atomic<void *> g_share_hook_arg{nullptr};

void share_hook(int point) {
    if (ShareHook h = g_share_hook.load(std::memory_order_acquire)) h(point, g_share_hook_arg.load());
}

namespace {

constexpr int kTeardownWaitMs = 2000;

bool ipc_present() {
    return drv().cuIpcGetMemHandle && drv().cuIpcOpenMemHandle && drv().cuIpcCloseMemHandle &&
           drv().cuIpcGetEventHandle && drv().cuIpcOpenEventHandle && drv().cuMemGetAddressRange;
}

cw_status need_ipc() {
    if (ipc_present()) return CW_SUCCESS;
    return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no CUDA IPC entry points (cuIpcGetMemHandle, ...)");
}

cw_status device_uuid(const cw_context *ctx, CUuuid *out) {
    CUresult r = drv().cuDeviceGetUuid(out, ctx->device);
    return r == CUDA_SUCCESS ? CW_SUCCESS : fail_cu(r, "cuDeviceGetUuid");
}

cw_status read_handle(const cw_shared_handle *h, HandleBytes *out) {
    memcpy(out, h->bytes, sizeof *out);
    return CW_SUCCESS;
}

// ---- objects kept for importers ----

struct Pending {
    cw_context *ctx;  // not retained (but while rel waits): its teardown frees what it kept (share_teardown)
    Share *sh;
    CUdeviceptr ptr;  // a buffer's memory, or 0
    CUevent ev;       // an event, or NULL
    Pending *next;    // on g_pending, then on the list of the thread that frees it
    Pending *next_freed;  // on a sweep's list (busy)
    bool busy;            // a sweep frees it; still on g_pending until freed
    IdleRelease rel;      // a buffer's memory freed once no resident loop runs (pending_drop)
};

// The kept objects. A sweep frees those without holders while they stay
// on the list, marked busy, and takes each off once freed (g_freed): the
// teardown of their context waits for that, so no free enters a context
// already torn down.
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_freed = PTHREAD_COND_INITIALIZER;
Pending *g_pending;

// Frees a kept object's memory or event and its block (any thread; makes
// its context current). In relaxed capture mode: a free is not part of any
// capture, and the driver would otherwise count it unsafe while this
// thread has one open.
void pending_release(Pending *p) {
    CurrentGuard guard;
    (void)guard.enter(p->ctx->cu);
    {
        RelaxedCapture relaxed;
        if (p->ptr) {
            CUresult r = drv().cuMemFree(p->ptr);
            if (r != CUDA_SUCCESS) {
                (void)fail_cu(r, "cuMemFree");
                log(CW_LOG_ERROR, "a shared buffer's memory could not be freed (cuMemFree failed)");
            }
        }
        if (p->ev) (void)drv().cuEventDestroy(p->ev);
    }
    block_free(p->sh);
}

void pending_free(Pending *p) {
    pending_release(p);
    free(p);
}

// Frees an object nobody holds, given up by its exporter, whose context the
// caller holds a reference to. cuMemFree waits until no kernel runs on the
// device, for good while a resident loop runs (idle.hpp): a buffer's memory
// is freed as a release, which keeps the context until it has run.
void pending_drop(Pending *p) {
    if (!p->ptr) {
        pending_free(p);
        return;
    }
    context_retain(p->ctx);
    p->rel.run = [](void *owner) {
        Pending *q = static_cast<Pending *>(owner);
        cw_context *ctx = q->ctx;
        pending_free(q);
        context_release(ctx);
    };
    p->rel.owner = p;
    release_when_idle(&p->rel);
}

bool busy_of(const cw_context *ctx) {
    for (const Pending *p = g_pending; p; p = p->next)
        if (p->ctx == ctx && p->busy) return true;
    return false;
}

// Frees what ctx kept: first it waits for a sweep on another thread that
// frees one of them, then for the importers of the rest, all of them
// together up to kTeardownWaitMs, then frees them (held ones logged).
void share_teardown(cw_context *ctx) {
    Pending *mine = nullptr;
    pthread_mutex_lock(&g_mu);
    for (Pending **pp = &g_pending; *pp;) {
        Pending *p = *pp;
        if (p->ctx == ctx && !p->busy) {
            *pp = p->next;
            p->next = mine;
            mine = p;
        } else {
            pp = &p->next;
        }
    }
    if (busy_of(ctx)) {
        share_hook(kHookTeardownWaits);
        while (busy_of(ctx)) pthread_cond_wait(&g_freed, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    const int64_t deadline = now_ns() + (int64_t)kTeardownWaitMs * 1000000;
    while (mine) {
        Pending *p = mine;
        mine = p->next;
        int held = 0;
        while ((held = block_holders(p->sh)) > 0 && now_ns() < deadline) {
            share_hook(kHookHoldersWait);
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, nullptr);
        }
        if (held > 0)
            log(CW_LOG_ERROR, "the context of a shared %s is torn down while %d other process(es) still hold it "
                "(its kept objects waited %d ms in all): freed anyway",
                p->ptr ? "buffer" : "event", held, kTeardownWaitMs);
        pending_free(p);
    }
}

// The exporter dropped the object: no new import from now on (the name
// goes first: see block_open), then freed at once or kept for the holders.
void keep_or_free(Pending *p) {
    block_unname(p->sh);
    const int held = block_holders(p->sh);
    share_hook(kHookHoldersCounted);
    if (held == 0) {
        pending_drop(p);
        return;
    }
    pthread_mutex_lock(&g_mu);
    p->next = g_pending;
    g_pending = p;
    pthread_mutex_unlock(&g_mu);
}

void register_teardown() { context_on_teardown(share_teardown, kTeardownUsers); }

}  // namespace

void share_sweep() {
    // A sweep's cuMemFree would wait for a running resident loop: none is
    // made while one runs (the objects stay for a later sweep, or their
    // context's teardown), and a loop launched meanwhile waits for it.
    QuietCall quiet;
    if (quiet.enter(nullptr) > 0) return;
    Pending *done = nullptr;
    pthread_mutex_lock(&g_mu);
    for (Pending *p = g_pending; p; p = p->next)
        if (!p->busy && block_holders(p->sh) == 0) {
            p->busy = true;
            p->next_freed = done;
            done = p;
        }
    pthread_mutex_unlock(&g_mu);
    while (done) {
        Pending *p = done;
        done = p->next_freed;
        share_hook(kHookSweepTaken);
        pending_release(p);
        pthread_mutex_lock(&g_mu);
        for (Pending **pp = &g_pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        pthread_cond_broadcast(&g_freed);
        pthread_mutex_unlock(&g_mu);
        free(p);
    }
}

// ---- buffers ----

cw_status shareable_alloc(cw_stream *s, size_t bytes, cw_buffer **out) {
    CW_TRY(need_ipc());
    share_sweep();
    register_teardown();
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = s->ctx;
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    void *mem = calloc(1, sizeof(cw_buffer));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a buffer");
    Share *sh = nullptr;
    cw_status st = block_create(kKindBuffer, bytes, &sh);
    if (st != CW_SUCCESS) {
        free(mem);
        return st;
    }
    CUdeviceptr p = 0;
    CUresult r = drv().cuMemAlloc(&p, bytes);
    if (r != CUDA_SUCCESS) {
        block_free(sh);
        free(mem);
        return fail_cu(r, "cuMemAlloc", "a shareable buffer");
    }
    cw_buffer *b = new (mem) cw_buffer();
    room.publish(b);
    b->refs.store(1, std::memory_order_relaxed);
    b->ctx = ctx;
    context_retain(ctx);
    b->ptr = p;
    b->bytes = bytes;
    b->share = sh;
    CW_TRY(guard.leave());
    *out = b;
    return CW_SUCCESS;
}

cw_status buffer_export(const cw_buffer *b, cw_shared_handle *out) {
    if (!b->share || !b->share->exporter)
        return fail(CW_ERROR_INVALID_STATE, b->share ? "the buffer was imported: only its exporter exports it"
                                                     : "the buffer is pool memory, which cannot be exported: make "
                                                       "it with cw_buffer_create_shareable");
    CW_TRY(need_ipc());
    share_sweep();
    CUuuid uuid;
    CW_TRY(device_uuid(b->ctx, &uuid));
    CUipcMemHandle ipc;
    {
        CurrentGuard guard;
        CW_TRY(guard.enter(b->ctx->cu));
        CUresult r = drv().cuIpcGetMemHandle(&ipc, b->ptr);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuIpcGetMemHandle");
        CW_TRY(guard.leave());
    }
    HandleBytes h;
    handle_make(b->share, uuid, b->bytes, ipc.reserved, &h);
    memcpy(out->bytes, &h, sizeof h);
    return CW_SUCCESS;
}

namespace {

// The memory the driver mapped at p holds the handle's bytes from p on (a
// handle whose driver part is another, smaller allocation's is refused);
// the mapping is closed when not.
cw_status check_mapping(CUdeviceptr p, uint64_t bytes) {
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = drv().cuMemGetAddressRange(&base, &size, p);
    cw_status st = CW_SUCCESS;
    if (r != CUDA_SUCCESS)
        st = fail_cu(r, "cuMemGetAddressRange", "the imported memory");
    else if (p < base || p - base >= size || size - (p - base) < bytes)
        st = fail(CW_ERROR_INVALID_ARGUMENT, "the handle claims %llu bytes; the memory it opens holds %zu",
                  (unsigned long long)bytes, p < base || p - base >= size ? (size_t)0 : size - (size_t)(p - base));
    if (st != CW_SUCCESS) (void)drv().cuIpcCloseMemHandle(p);
    return st;
}

}  // namespace

cw_status buffer_import(cw_stream *s, const cw_shared_handle *hp, cw_buffer **out) {
    CW_TRY(need_ipc());
    share_sweep();
    HandleBytes h;
    CW_TRY(read_handle(hp, &h));
    cw_context *ctx = s->ctx;
    CUuuid uuid;
    CW_TRY(device_uuid(ctx, &uuid));
    HandleRoom room;
    CW_TRY(room.reserve());
    Share *sh = nullptr;
    CW_TRY(block_open(h, kKindBuffer, uuid, &sh));
    void *mem = calloc(1, sizeof(cw_buffer));
    if (!mem) {
        block_leave(sh);
        return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a buffer");
    }
    CurrentGuard guard;
    cw_status st = guard.enter(ctx->cu);
    CUdeviceptr p = 0;
    if (st == CW_SUCCESS) {
        CUipcMemHandle ipc;
        memcpy(ipc.reserved, h.ipc, sizeof ipc.reserved);
        CUresult r = drv().cuIpcOpenMemHandle(&p, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuIpcOpenMemHandle");
        if (st == CW_SUCCESS) st = check_mapping(p, h.bytes);
    }
    if (st != CW_SUCCESS) {
        block_leave(sh);
        free(mem);
        return st;
    }
    cw_buffer *b = new (mem) cw_buffer();
    room.publish(b);
    b->refs.store(1, std::memory_order_relaxed);
    b->ctx = ctx;
    context_retain(ctx);
    b->ptr = p;
    b->bytes = (size_t)h.bytes;
    b->share = sh;
    *out = b;
    return CW_SUCCESS;
}

void share_memory_release(cw_context *ctx, Share *sh, CUdeviceptr ptr, size_t bytes, cw_stream *rel, bool ordered) {
    if (!sh->exporter) {
        // The reads and writes recorded on it finish before the mapping goes.
        if (rel && ordered) {
            CUresult r = drv().cuStreamSynchronize(rel->cu);
            if (r != CUDA_SUCCESS) (void)fail_cu(r, "cuStreamSynchronize");
        }
        CUresult r = drv().cuIpcCloseMemHandle(ptr);
        if (r != CUDA_SUCCESS) {
            (void)fail_cu(r, "cuIpcCloseMemHandle");
            log(CW_LOG_ERROR, "an imported buffer of %zu bytes could not be closed (cuIpcCloseMemHandle failed)", bytes);
        }
        block_leave(sh);
        return;
    }
    if (!ordered) {
        // A faulted device: never a free that could overtake a reader. The
        // memory goes with the CUDA context; importers can no longer open it.
        log(CW_LOG_WARNING, "a shared buffer of %zu bytes could not be freed in order; it stays allocated until its "
            "CUDA context is destroyed", bytes);
        block_free(sh);
        return;
    }
    Pending *p = static_cast<Pending *>(calloc(1, sizeof(Pending)));
    if (!p) {
        // No room to keep it: free it now, after its uses (as cuMemFree
        // would), unless a resident loop runs (the free would wait for it).
        if (rel) (void)drv().cuStreamSynchronize(rel->cu);
        QuietCall quiet;
        if (quiet.enter(nullptr) == 0)
            (void)drv().cuMemFree(ptr);
        else
            log(CW_LOG_WARNING, "a shared buffer of %zu bytes could not be freed (out of host memory while a "
                "resident loop runs); it stays allocated until its CUDA context is destroyed", bytes);
        block_free(sh);
        return;
    }
    p->ctx = ctx;
    p->sh = sh;
    p->ptr = ptr;
    // The recorded uses finish before the memory can go (now or later: a
    // kept object must not hold the context, whose teardown frees it).
    if (rel) {
        CUresult r = drv().cuStreamSynchronize(rel->cu);
        if (r != CUDA_SUCCESS) (void)fail_cu(r, "cuStreamSynchronize");
    }
    keep_or_free(p);
}

// ---- events ----

cw_status shared_event_create(cw_context *ctx, cw_shared_event **out) {
    CW_TRY(need_ipc());
    share_sweep();
    register_teardown();
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_shared_event *e = static_cast<cw_shared_event *>(calloc(1, sizeof(cw_shared_event)));
    if (!e) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a shared event");
    cw_status st = block_create(kKindEvent, 0, &e->share);
    if (st != CW_SUCCESS) {
        free(e);
        return st;
    }
    CurrentGuard guard;
    st = guard.enter(ctx->cu);
    if (st == CW_SUCCESS) {
        CUresult r = drv().cuEventCreate(&e->ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuEventCreate", "an interprocess event");
    }
    if (st != CW_SUCCESS) {
        block_free(e->share);
        free(e);
        return st;
    }
    room.publish(e);
    e->ctx = ctx;
    context_retain(ctx);
    *out = e;
    return CW_SUCCESS;
}

void shared_event_destroy(cw_shared_event *e) {
    share_sweep();
    handle_retire(e);
    cw_context *ctx = e->ctx;
    if (e->share->exporter) {
        Pending *p = static_cast<Pending *>(calloc(1, sizeof(Pending)));
        if (p) {
            p->ctx = ctx;
            p->sh = e->share;
            p->ev = e->ev;
            keep_or_free(p);
        } else {
            CurrentGuard guard;
            (void)guard.enter(ctx->cu);
            (void)drv().cuEventDestroy(e->ev);
            block_free(e->share);
        }
    } else {
        CurrentGuard guard;
        (void)guard.enter(ctx->cu);
        CUresult r = drv().cuEventDestroy(e->ev);
        if (r != CUDA_SUCCESS) {
            (void)fail_cu(r, "cuEventDestroy");
            log(CW_LOG_ERROR, "an imported event could not be destroyed (cuEventDestroy failed)");
        }
        block_leave(e->share);
    }
    handle_free(e);
    context_release(ctx);
}

cw_status shared_event_export(const cw_shared_event *e, cw_shared_handle *out) {
    if (!e->share->exporter) return fail(CW_ERROR_INVALID_STATE, "the event was imported: only its exporter exports it");
    share_sweep();
    CUuuid uuid;
    CW_TRY(device_uuid(e->ctx, &uuid));
    CUipcEventHandle ipc;
    {
        CurrentGuard guard;
        CW_TRY(guard.enter(e->ctx->cu));
        CUresult r = drv().cuIpcGetEventHandle(&ipc, e->ev);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuIpcGetEventHandle");
        CW_TRY(guard.leave());
    }
    HandleBytes h;
    handle_make(e->share, uuid, 0, ipc.reserved, &h);
    memcpy(out->bytes, &h, sizeof h);
    return CW_SUCCESS;
}

cw_status shared_event_import(cw_context *ctx, const cw_shared_handle *hp, cw_shared_event **out) {
    CW_TRY(need_ipc());
    share_sweep();
    register_teardown();
    HandleBytes h;
    CW_TRY(read_handle(hp, &h));
    CUuuid uuid;
    CW_TRY(device_uuid(ctx, &uuid));
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_shared_event *e = static_cast<cw_shared_event *>(calloc(1, sizeof(cw_shared_event)));
    if (!e) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a shared event");
    cw_status st = block_open(h, kKindEvent, uuid, &e->share);
    if (st != CW_SUCCESS) {
        free(e);
        return st;
    }
    CurrentGuard guard;
    st = guard.enter(ctx->cu);
    if (st == CW_SUCCESS) {
        CUipcEventHandle ipc;
        memcpy(ipc.reserved, h.ipc, sizeof ipc.reserved);
        CUresult r = drv().cuIpcOpenEventHandle(&e->ev, ipc);
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuIpcOpenEventHandle");
    }
    if (st != CW_SUCCESS) {
        block_leave(e->share);
        free(e);
        return st;
    }
    room.publish(e);
    e->ctx = ctx;
    context_retain(ctx);
    *out = e;
    return CW_SUCCESS;
}

cw_status shared_event_record(cw_shared_event *e, cw_stream *s) {
    if (s->ctx != e->ctx)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream is of another context than the event's");
    if (capturing(s)) return fail(CW_ERROR_NOT_PERMITTED, "the stream is being captured");
    return on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(e->ev, s->cu); });
}

cw_status shared_event_wait(cw_shared_event *e, cw_stream *s) {
    if (capturing(s)) return fail(CW_ERROR_NOT_PERMITTED, "the stream is being captured");
    return on_stream(s, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(s->cu, e->ev, 0); });
}

void shared_event_info(const cw_shared_event *e, cw_shared_event_info *info) {
    memset(info, 0, sizeof *info);
    info->context = e->ctx;
    info->imported = e->share->exporter ? 0 : 1;
    info->importers = e->share->exporter ? block_holders(e->share) : 0;
}

}  // namespace core
}  // namespace cw
