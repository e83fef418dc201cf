/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: buffers and events shared between processes (share.hpp).
//
// A handle (cw_shared_handle, 128 bytes) carries the driver's IPC handle,
// the exporter's pid, its device's UUID, the size, and the name of the
// object's shared-memory block. The block holds one slot per import: the
// importing process's pid, cleared when it closes. The exporter's last
// release frees the object when no slot holds a live process; otherwise
// the object waits in a list that later calls sweep and that the context's
// teardown empties (waiting up to kTeardownWaitMs for the importers).
#include "core/share.hpp"

#include <errno.h>
#include <fcntl.h>
#include <new>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/context.hpp"

namespace cw {
namespace core {

namespace {

constexpr int kSlots = 64;
constexpr uint32_t kBlockMagic = 0x43575342u;   // CWSB
constexpr uint32_t kHandleMagic = 0x43575348u;  // CWSH
constexpr uint8_t kHandleVersion = 1;
constexpr uint8_t kKindBuffer = 1, kKindEvent = 2;
constexpr int kTeardownWaitMs = 2000;

struct Block {
    uint32_t magic;
    uint32_t kind;
    int32_t exporter;
    uint32_t pad;
    std::atomic<int32_t> slots[kSlots];  // importing processes' pids, 0: free
};
static_assert(sizeof(std::atomic<int32_t>) == 4, "slots are plain 32-bit words in shared memory");

struct HandleBytes {
    uint32_t magic;
    uint8_t version;
    uint8_t kind;
    uint8_t pad[2];
    int32_t pid;
    uint32_t pad2;
    uint8_t uuid[16];
    uint64_t bytes;
    char ipc[64];  // CUipcMemHandle or CUipcEventHandle
    char name[24];
};
static_assert(sizeof(HandleBytes) == sizeof(cw_shared_handle), "a handle's layout fills its bytes");

}  // namespace

struct Share {
    bool exporter;
    uint8_t kind;
    Block *block;
    char name[24];
    Share *next_export;  // the process's exported blocks (exporter only)
};

namespace {

bool ipc_present() {
    return drv().cuIpcGetMemHandle && drv().cuIpcOpenMemHandle && drv().cuIpcCloseMemHandle &&
           drv().cuIpcGetEventHandle && drv().cuIpcOpenEventHandle;
}

cw_status need_ipc() {
    if (ipc_present()) return CW_SUCCESS;
    return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no CUDA IPC entry points (cuIpcGetMemHandle, ...)");
}

bool process_alive(int32_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// The names of the blocks this process exported and has not freed: removed
// at exit, so that a process that exits with objects still exported leaves
// no file in /dev/shm (importers then see the exporter gone).
pthread_mutex_t g_exports_mu = PTHREAD_MUTEX_INITIALIZER;
Share *g_exports;

void unlink_exports_at_exit() {
    pthread_mutex_lock(&g_exports_mu);
    // Only this process's own: a child forked without exec inherits the
    // list, and its exit must not take its parent's names.
    for (Share *s = g_exports; s; s = s->next_export)
        if (s->block->exporter == (int32_t)getpid()) shm_unlink(s->name);
    pthread_mutex_unlock(&g_exports_mu);
}

void exports_add(Share *sh) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] { atexit(unlink_exports_at_exit); });
    pthread_mutex_lock(&g_exports_mu);
    sh->next_export = g_exports;
    g_exports = sh;
    pthread_mutex_unlock(&g_exports_mu);
}

void exports_remove(Share *sh) {
    pthread_mutex_lock(&g_exports_mu);
    for (Share **pp = &g_exports; *pp; pp = &(*pp)->next_export)
        if (*pp == sh) {
            *pp = sh->next_export;
            break;
        }
    pthread_mutex_unlock(&g_exports_mu);
}

cw_status block_create(uint8_t kind, Share **out) {
    static std::atomic<unsigned> serial{0};
    Share *sh = static_cast<Share *>(calloc(1, sizeof(Share)));
    if (!sh) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a shared object");
    snprintf(sh->name, sizeof sh->name, "/cuweave.%d.%u", (int)getpid(), serial.fetch_add(1) + 1);
    int fd = shm_open(sh->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    void *p = MAP_FAILED;
    int err = errno;
    if (fd >= 0) {
        if (ftruncate(fd, sizeof(Block)) == 0)
            p = mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        err = errno;
        close(fd);
        if (p == MAP_FAILED) shm_unlink(sh->name);
    }
    if (p == MAP_FAILED) {
        free(sh);
        return fail(CW_ERROR_OUT_OF_MEMORY, "the shared block of an exported object (shm_open): %s", strerror(err));
    }
    sh->block = static_cast<Block *>(p);
    sh->block->kind = kind;
    sh->block->exporter = (int32_t)getpid();
    std::atomic_thread_fence(std::memory_order_release);
    sh->block->magic = kBlockMagic;
    sh->exporter = true;
    sh->kind = kind;
    exports_add(sh);
    *out = sh;
    return CW_SUCCESS;
}

// The exporter frees its object: the name goes (later imports fail), then the mapping.
void block_free(Share *sh) {
    exports_remove(sh);
    shm_unlink(sh->name);
    munmap(sh->block, sizeof(Block));
    free(sh);
}

// Processes holding the object now; slots of processes gone are cleared.
int block_holders(Block *b) {
    int n = 0;
    for (int i = 0; i < kSlots; i++) {
        int32_t pid = b->slots[i].load(std::memory_order_acquire);
        if (!pid) continue;
        if (process_alive(pid))
            n++;
        else
            b->slots[i].compare_exchange_strong(pid, 0);
    }
    return n;
}

// Checks a handle and opens its block, taking a slot.
cw_status block_open(const HandleBytes &h, uint8_t kind, const CUuuid &uuid, Share **out) {
    if (h.magic != kHandleMagic || h.version != kHandleVersion || h.kind != kind || h.pid <= 0 ||
        memchr(h.name, 0, sizeof h.name) == nullptr || strncmp(h.name, "/cuweave.", 9) != 0)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the handle is not a cuweave %s handle (version %d)",
                    kind == kKindBuffer ? "buffer" : "event", (int)kHandleVersion);
    if (h.pid == (int32_t)getpid())
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the handle was exported by this process: the driver cannot open it here (use the exported "
                    "object itself)");
    if (memcmp(h.uuid, uuid.bytes, 16) != 0)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "the handle is of another device (UUID %02x%02x%02x%02x...): import it on a context of the "
                    "exporter's device", h.uuid[0], h.uuid[1], h.uuid[2], h.uuid[3]);
    if (!process_alive(h.pid)) {
        shm_unlink(h.name);  // stale: its process died without freeing
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) is gone", (int)h.pid);
    }
    int fd = shm_open(h.name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) has destroyed the object (%s: %s)", (int)h.pid,
                    h.name, strerror(errno));
    void *p = mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return fail(CW_ERROR_OUT_OF_MEMORY, "mapping the shared block %s: %s", h.name, strerror(errno));
    Block *b = static_cast<Block *>(p);
    if (b->magic != kBlockMagic || b->kind != kind || b->exporter != h.pid) {
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_INVALID_ARGUMENT, "the handle's shared block %s is not the exporter's", h.name);
    }
    int32_t me = (int32_t)getpid();
    int slot = -1;
    for (int i = 0; i < kSlots && slot < 0; i++) {
        int32_t z = 0;
        if (b->slots[i].compare_exchange_strong(z, me)) slot = i;
    }
    if (slot < 0) {
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_OUT_OF_MEMORY, "%d imports hold the object already", kSlots);
    }
    // The exporter removes the name before it counts the holders: a name
    // still there now means that count sees this slot.
    fd = shm_open(h.name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        b->slots[slot].store(0, std::memory_order_release);
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) has destroyed the object", (int)h.pid);
    }
    close(fd);
    Share *sh = static_cast<Share *>(calloc(1, sizeof(Share)));
    if (!sh) {
        b->slots[slot].store(0, std::memory_order_release);
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for an imported object");
    }
    sh->exporter = false;
    sh->kind = kind;
    sh->block = b;
    memcpy(sh->name, h.name, sizeof sh->name);
    *out = sh;
    return CW_SUCCESS;
}

// An importer closes: one of its slots goes.
void block_leave(Share *sh) {
    int32_t me = (int32_t)getpid();
    for (int i = 0; i < kSlots; i++) {
        int32_t v = me;
        if (sh->block->slots[i].compare_exchange_strong(v, 0, std::memory_order_acq_rel)) break;
    }
    munmap(sh->block, sizeof(Block));
    free(sh);
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
    cw_context *ctx;  // not retained: its teardown empties the list first
    Share *sh;
    CUdeviceptr ptr;  // a buffer's memory, or 0
    CUevent ev;       // an event, or NULL
    Pending *next;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
Pending *g_pending;

// Frees a kept object (any thread; makes its context current). In relaxed
// capture mode: a free is not part of any capture, and the driver would
// otherwise count it unsafe while this thread has one open.
void pending_free(Pending *p) {
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
    free(p);
}

// Takes the kept objects `pick` chooses off the list (under its lock) and
// returns them as a list of their own.
template <typename Pick>
Pending *take_pending(Pick pick) {
    Pending *taken = nullptr;
    pthread_mutex_lock(&g_mu);
    for (Pending **pp = &g_pending; *pp;) {
        if (pick(*pp)) {
            Pending *p = *pp;
            *pp = p->next;
            p->next = taken;
            taken = p;
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return taken;
}

void share_teardown(cw_context *ctx) {
    Pending *mine = take_pending([ctx](const Pending *p) { return p->ctx == ctx; });
    while (mine) {
        Pending *p = mine;
        mine = p->next;
        int held = 0;
        for (int waited = 0; (held = block_holders(p->sh->block)) > 0 && waited < kTeardownWaitMs; waited++) {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, nullptr);
        }
        if (held > 0)
            log(CW_LOG_ERROR, "the context of a shared %s is torn down while %d other process(es) still hold it "
                "(waited %d ms): freed anyway",
                p->ptr ? "buffer" : "event", held, kTeardownWaitMs);
        pending_free(p);
    }
}

// The exporter dropped the object: no new import from now on (the name
// goes first: see block_open), then freed at once or kept for the holders.
void keep_or_free(Pending *p) {
    shm_unlink(p->sh->name);
    if (block_holders(p->sh->block) == 0) {
        pending_free(p);
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
    Pending *done = take_pending([](const Pending *p) { return block_holders(p->sh->block) == 0; });
    while (done) {
        Pending *p = done;
        done = p->next;
        pending_free(p);
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
    cw_status st = block_create(kKindBuffer, &sh);
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
    HandleBytes h;
    memset(&h, 0, sizeof h);
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
    h.magic = kHandleMagic;
    h.version = kHandleVersion;
    h.kind = kKindBuffer;
    h.pid = (int32_t)getpid();
    memcpy(h.uuid, uuid.bytes, 16);
    h.bytes = b->bytes;
    memcpy(h.ipc, ipc.reserved, sizeof h.ipc);
    memcpy(h.name, b->share->name, sizeof h.name);
    memcpy(out->bytes, &h, sizeof h);
    return CW_SUCCESS;
}

cw_status buffer_import(cw_stream *s, const cw_shared_handle *hp, cw_buffer **out) {
    CW_TRY(need_ipc());
    share_sweep();
    HandleBytes h;
    CW_TRY(read_handle(hp, &h));
    cw_context *ctx = s->ctx;
    CUuuid uuid;
    CW_TRY(device_uuid(ctx, &uuid));
    if (h.magic == kHandleMagic && h.kind == kKindBuffer && h.bytes == 0)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the handle names an empty buffer");
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
        // No room to keep it: free it now, after its uses (as cuMemFree would).
        if (rel) (void)drv().cuStreamSynchronize(rel->cu);
        (void)drv().cuMemFree(ptr);
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
    cw_status st = block_create(kKindEvent, &e->share);
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
    memset(&h, 0, sizeof h);
    h.magic = kHandleMagic;
    h.version = kHandleVersion;
    h.kind = kKindEvent;
    h.pid = (int32_t)getpid();
    memcpy(h.uuid, uuid.bytes, 16);
    memcpy(h.ipc, ipc.reserved, sizeof h.ipc);
    memcpy(h.name, e->share->name, sizeof h.name);
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
    info->importers = e->share->exporter ? block_holders(e->share->block) : 0;
}

}  // namespace core
}  // namespace cw
