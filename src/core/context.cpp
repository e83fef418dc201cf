// cuweave: contexts (primary and external).
#include <new>
#include <stdlib.h>
#include <string.h>

#include "core/core.hpp"
#include "core/stream.hpp"

namespace cw {

void context_retain(cw_context *ctx) { ctx->refs.fetch_add(1, std::memory_order_relaxed); }

namespace {
void context_free(void *owner) {
    cw_context *ctx = static_cast<cw_context *>(owner);
    {
        // What the context made for itself goes first, with it current.
        CurrentGuard guard;
        (void)guard.enter(ctx->cu);
        if (ctx->orphans) future_orphans_teardown(ctx);
        buffer_teardown(ctx);
        if (ctx->fork_pool) pool_destroy_internal(ctx->fork_pool);
        for (size_t i = 0; i < ctx->events.count; i++) drv().cuEventDestroy(ctx->events.items[i]);
        free(ctx->events.items);
        for (size_t i = 0; i < ctx->slab.page_count; i++) drv().cuMemFreeHost(ctx->slab.pages[i].host);
        free(ctx->slab.pages);
        free(ctx->slab.free_slots);
    }
    if (ctx->kind == CW_CONTEXT_GREEN) {
        CUresult r = drv().cuGreenCtxDestroy(ctx->green);
        if (r != CUDA_SUCCESS)
            log(CW_LOG_WARNING, "%s: cuGreenCtxDestroy (device %d) failed with CUresult %d", current_api(),
                ctx->ordinal, r);
    }
    if (ctx->kind == CW_CONTEXT_PRIMARY) {
        CUresult r = drv().cuDevicePrimaryCtxRelease(ctx->device);
        if (r != CUDA_SUCCESS)
            log(CW_LOG_WARNING, "%s: cuDevicePrimaryCtxRelease(device %d) failed with CUresult %d", current_api(),
                ctx->ordinal, r);
    }
    ctx->~cw_context();
    free(ctx);
}
}  // namespace

void context_release(cw_context *ctx) {
    if (ctx->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Gone for callers now. Freeing its host memory and the context itself
    // waits for running resident loops (any context of the device): while
    // one runs, that happens when none does.
    handle_retire(ctx);
    ctx->idle.run = context_free;
    ctx->idle.owner = ctx;
    release_when_idle(&ctx->idle);
}

int clamp_priority(const cw_context *ctx, int priority) {
    // greatest is the numerically smallest (highest priority).
    if (priority > ctx->prio_least) return ctx->prio_least;
    if (priority < ctx->prio_greatest) return ctx->prio_greatest;
    return priority;
}

cw_status event_get(cw_context *ctx, CUevent *ev) {
    {
        SpinLock lock(ctx->events.lock);
        if (ctx->events.count > 0) {
            *ev = ctx->events.items[--ctx->events.count];
            return CW_SUCCESS;
        }
    }
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CW_CU(cuEventCreate, (ev, CU_EVENT_DISABLE_TIMING));
    cw_status st = guard.leave();
    if (st != CW_SUCCESS) drv().cuEventDestroy(*ev);
    return st;
}

void event_put(cw_context *ctx, CUevent ev) {
    {
        SpinLock lock(ctx->events.lock);
        if (ctx->events.count < ctx->events.cap ||
            [&] {
                size_t cap = ctx->events.cap ? ctx->events.cap * 2 : 16;
                void *p = realloc(ctx->events.items, cap * sizeof(CUevent));
                if (!p) return false;
                ctx->events.items = static_cast<CUevent *>(p);
                ctx->events.cap = cap;
                return true;
            }()) {
            ctx->events.items[ctx->events.count++] = ev;
            return;
        }
    }
    // No room to keep it: give it back to the driver.
    drv().cuEventDestroy(ev);
}

cw_status slab_get(cw_context *ctx, uint32_t *slot, volatile uint32_t **host, CUdeviceptr *dev) {
    HostSlab &sl = ctx->slab;
    for (;;) {
        {
            SpinLock lock(ctx->lock);
            if (sl.free_count > 0) {
                uint32_t id = sl.free_slots[--sl.free_count];
                const HostSlab::Page &pg = sl.pages[id / kSlotsPerPage];
                size_t off = (id % kSlotsPerPage) * kSlotBytes;
                *slot = id;
                *host = reinterpret_cast<volatile uint32_t *>(static_cast<char *>(pg.host) + off);
                *dev = pg.dev + off;
                return CW_SUCCESS;
            }
        }
        // Grow by one page (outside the spin lock: the driver call is slow).
        CurrentGuard guard;
        CW_TRY(guard.enter(ctx->cu));
        void *hostp = nullptr;
        CUdeviceptr devp = 0;
        // Mapped for this context only: the slab serves this context's futures.
        CW_TRY(host_mapped_alloc(kSlabPageBytes, 0, &hostp, &devp));
        cw_status st = guard.leave();
        if (st != CW_SUCCESS) {
            drv().cuMemFreeHost(hostp);
            return st;
        }
        SpinLock lock(ctx->lock);
        bool ok = true;
        if (sl.page_count == sl.page_cap) {
            size_t cap = sl.page_cap ? sl.page_cap * 2 : 4;
            void *p = realloc(sl.pages, cap * sizeof(HostSlab::Page));
            if (p) {
                sl.pages = static_cast<HostSlab::Page *>(p);
                sl.page_cap = cap;
            } else {
                ok = false;
            }
        }
        // Room for every slot that will exist, so that slab_put never grows.
        if (ok && sl.free_cap < (sl.page_count + 1) * kSlotsPerPage) {
            size_t cap = (sl.page_count + 1) * kSlotsPerPage * 2;
            void *p = realloc(sl.free_slots, cap * sizeof(uint32_t));
            if (p) {
                sl.free_slots = static_cast<uint32_t *>(p);
                sl.free_cap = cap;
            } else {
                ok = false;
            }
        }
        if (!ok) {
            drv().cuMemFreeHost(hostp);
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        uint32_t page = static_cast<uint32_t>(sl.page_count);
        sl.pages[sl.page_count++] = HostSlab::Page{hostp, devp};
        for (size_t i = kSlotsPerPage; i-- > 0;) sl.free_slots[sl.free_count++] = page * kSlotsPerPage + (uint32_t)i;
    }
}

void slab_put(cw_context *ctx, uint32_t slot) {
    SpinLock lock(ctx->lock);
    // free_cap always covers every slot ever made, so this cannot overflow.
    ctx->slab.free_slots[ctx->slab.free_count++] = slot;
}

namespace {

cw_context *new_context() {
    void *mem = malloc(sizeof(cw_context));
    if (!mem) return nullptr;
    cw_context *ctx = new (mem) cw_context();
    ctx->refs.store(1, std::memory_order_relaxed);
    return ctx;
}

// Finds the ordinal of a CUdevice (the two coincide on every driver seen, but
// the API does not promise it).
cw_status ordinal_of(CUdevice dev, int *ordinal) {
    int count = 0;
    CW_CU(cuDeviceGetCount, (&count));
    for (int i = 0; i < count; i++) {
        CUdevice d;
        CW_CU(cuDeviceGet, (&d, i));
        if (d == dev) {
            *ordinal = i;
            return CW_SUCCESS;
        }
    }
    return fail(CW_ERROR_INTERNAL, "device %d of the context is not among the %d devices", (int)dev, count);
}

// Reads the device and priority range of ctx (made current for the query).
cw_status describe(CUcontext cu, CUdevice *dev, int *least, int *greatest) {
    CurrentGuard guard;
    CW_TRY(guard.enter(cu));
    CW_CU(cuCtxGetDevice, (dev));
    CW_CU(cuCtxGetStreamPriorityRange, (least, greatest));
    return guard.leave();
}

}  // namespace

cw_status context_new_green(CUgreenCtx green, CUdevice dev, int ordinal, cw_context **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUcontext cu = nullptr;
    CUresult r = drv().cuCtxFromGreenCtx(&cu, green);
    if (r != CUDA_SUCCESS) {
        free(ctx);
        return fail_cu(r, "cuCtxFromGreenCtx");
    }
    // Same device, same priority range as its primary context.
    cw_status st = device_priority_range(ordinal, &ctx->prio_least, &ctx->prio_greatest);
    if (st != CW_SUCCESS) {
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_GREEN;
    ctx->cu = cu;
    ctx->green = green;
    ctx->device = dev;
    ctx->ordinal = ordinal;
    room.publish(ctx, kTagContext);
    *out = ctx;
    return CW_SUCCESS;
}

cw_status host_mapped_alloc(size_t bytes, unsigned extra_flags, void **host, CUdeviceptr *dev) {
    void *p = nullptr;
    CW_CU(cuMemHostAlloc, (&p, bytes, CU_MEMHOSTALLOC_DEVICEMAP | extra_flags));
    CUdeviceptr d = 0;
    CUresult r = drv().cuMemHostGetDevicePointer(&d, p, 0);
    if (r != CUDA_SUCCESS) {
        drv().cuMemFreeHost(p);
        return fail_cu(r, "cuMemHostGetDevicePointer");
    }
    memset(p, 0, bytes);
    *host = p;
    *dev = d;
    return CW_SUCCESS;
}

}  // namespace cw

using namespace cw;

namespace cw {
namespace {
// (context, running loops) pairs; a handful at most, so a small table.
struct ResidentCount {
    CUcontext cu;
    int n;
};
ResidentCount g_residents[64];
int g_residents_total;           // the sum of the table's counts
IdleRelease *g_idle_releases;    // queued while loops run
std::atomic<int> g_residents_lock{0};

void run_releases(IdleRelease *list) {
    while (list) {
        IdleRelease *next = list->next;
        list->run(list->owner);
        list = next;
    }
}
}  // namespace

void context_note_resident(CUcontext cu, int delta) {
    IdleRelease *ready = nullptr;
    {
        SpinLock lock(g_residents_lock);
        ResidentCount *entry = nullptr, *free_slot = nullptr;
        for (ResidentCount &e : g_residents) {
            if (e.n > 0 && e.cu == cu) {
                entry = &e;
                break;
            }
            if (e.n == 0 && !free_slot) free_slot = &e;
        }
        if (entry)
            entry->n += delta;
        else if (delta > 0 && free_slot)
            *free_slot = {cu, delta};
        g_residents_total += delta;  // counted even when the table is full
        if (g_residents_total == 0) {
            ready = g_idle_releases;
            g_idle_releases = nullptr;
        }
    }
    run_releases(ready);
}

int context_residents(CUcontext cu) {
    SpinLock lock(g_residents_lock);
    for (const ResidentCount &e : g_residents)
        if (e.n > 0 && e.cu == cu) return e.n;
    return 0;
}

int residents_running() {
    SpinLock lock(g_residents_lock);
    return g_residents_total;
}

void release_when_idle(IdleRelease *rel) {
    {
        SpinLock lock(g_residents_lock);
        if (g_residents_total > 0) {
            rel->next = g_idle_releases;
            g_idle_releases = rel;
            return;
        }
    }
    rel->run(rel->owner);
}

cw_status refuse_load_while_resident(const char *what) {
    const int n = residents_running();
    if (n == 0) return CW_SUCCESS;
    return fail(CW_ERROR_INVALID_STATE,
                "%s loads code, and loading waits until no kernel runs on the device, which never happens while "
                "a GPU-resident loop runs (%d running in this process): load and build before launching loops, "
                "or tear them down first",
                what, n);
}
}  // namespace cw

extern "C" {

CW_API cw_status cw_context_create(cw_context **out, int device) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(device >= 0);
    CUdevice dev;
    CW_TRY(device_from_ordinal(device, &dev));

    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUcontext cu = nullptr;
    CUresult r = drv().cuDevicePrimaryCtxRetain(&cu, dev);
    if (r != CUDA_SUCCESS) {
        free(ctx);
        return fail_cu(r, "cuDevicePrimaryCtxRetain");
    }
    CUdevice seen;
    cw_status st = describe(cu, &seen, &ctx->prio_least, &ctx->prio_greatest);
    if (st != CW_SUCCESS) {
        drv().cuDevicePrimaryCtxRelease(dev);
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_PRIMARY;
    ctx->cu = cu;
    ctx->device = dev;
    ctx->ordinal = device;
    room.publish(ctx, kTagContext);
    *out = ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_wrap(cw_context **out, CUcontext cu) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(cu != NULL);
    CW_TRY(ensure_init());
    unsigned api = 0;
    CUresult r = drv().cuCtxGetApiVersion(cu, &api);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxGetApiVersion", "the CUcontext to wrap is not a live context");
    cw_context *ctx = new_context();
    if (!ctx) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = describe(cu, &ctx->device, &ctx->prio_least, &ctx->prio_greatest);
    if (st == CW_SUCCESS) st = ordinal_of(ctx->device, &ctx->ordinal);
    if (st != CW_SUCCESS) {
        free(ctx);
        return st;
    }
    ctx->kind = CW_CONTEXT_EXTERNAL;
    ctx->cu = cu;
    room.publish(ctx, kTagContext);
    *out = ctx;
    return CW_SUCCESS;
}

CW_API void cw_context_destroy(cw_context **pctx) {
    CW_ENTRY;
    if (!pctx || !*pctx) return;
    cw_context *ctx = *pctx;
    *pctx = NULL;
    if (!context_ok(ctx)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_context; nothing destroyed");
        return;
    }
    if (ctx->kind == CW_CONTEXT_GREEN) {
        // Partitions are borrowed from their set: cw_partition_set_destroy.
        *pctx = ctx;
        fail(CW_ERROR_INVALID_STATE, "a partition's context belongs to its cw_partition_set; nothing destroyed");
        return;
    }
    context_release(ctx);
}

CW_API cw_status cw_context_get_device(const cw_context *ctx, int *device) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(device != NULL);
    *device = ctx->ordinal;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_kind(const cw_context *ctx, cw_context_kind *kind) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(kind != NULL);
    *kind = ctx->kind;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_handle(const cw_context *ctx, CUcontext *handle) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(handle != NULL);
    *handle = ctx->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_get_priority_range(const cw_context *ctx, int *least, int *greatest) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(least != NULL || greatest != NULL);
    if (least) *least = ctx->prio_least;
    if (greatest) *greatest = ctx->prio_greatest;
    return CW_SUCCESS;
}

CW_API cw_status cw_context_synchronize(cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_CONTEXT(ctx);
    if (context_residents(ctx->cu) > 0)
        return fail(CW_ERROR_INVALID_STATE,
                    "a GPU-resident loop runs on this context: its work never ends, so synchronizing the whole "
                    "context would never return; synchronize streams, or tear the loop down first");
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CW_CU(cuCtxSynchronize, ());
    return guard.leave();
}

}  // extern "C"
