// cuweave internal: the core objects shared by the core layer.
#pragma once

#include <atomic>
#include <stdint.h>
#include <time.h>

#include "cuweave/context.h"
#include "driver/driver.hpp"
#include "driver/error.hpp"

namespace cw {

// Every handle starts with a tag so that a foreign pointer or a destroyed
// handle is refused (CW_ERROR_INVALID_HANDLE) instead of being used.
enum : uint32_t {
    kTagContext = 0x43574358u,  // "CWCX"
    kTagStream = 0x43575354u,   // "CWST"
    kTagPool = 0x4357504cu,     // "CWPL"
    kTagTimer = 0x4357544du,    // "CWTM"
    kTagFuture = 0x43574655u,   // "CWFU"
    kTagDead = 0xdeadc0deu,
};

// The registry of live handles (registry.cpp). A public handle is valid
// when its address is in the registry with its kind: checks never read the
// handle's memory, so a destroyed, foreign or garbage pointer is refused
// (CW_ERROR_INVALID_HANDLE) in every build, and a second destroy is
// harmless. Lookups take no lock; creation and destruction a short one.
bool handle_live(const void *h, uint32_t kind);
// Removes h (a handle whose tag, its first 4 bytes, is then set dead).
void handle_retire(void *h);
// Live handles of every kind (for tests).
size_t handles_live();
// Test hook: the nth next reservation fails with CW_ERROR_OUT_OF_MEMORY.
void handle_registry_fail_next(int n);

// Room in the registry for handles about to be made: reserve() before
// anything is created (it is the only step that can fail), publish() once
// the object is complete (writes its tag and makes it live; cannot fail).
// Room not used is given back when the object goes out of scope.
class HandleRoom {
  public:
    HandleRoom() = default;
    ~HandleRoom();
    HandleRoom(const HandleRoom &) = delete;
    HandleRoom &operator=(const HandleRoom &) = delete;
    cw_status reserve(unsigned n = 1);
    void publish(void *h, uint32_t kind);

  private:
    unsigned held_ = 0;
};

// The monotonic clock, in nanoseconds (for timeouts and spin windows).
inline int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// A pause for spin loops (no-op where the CPU has no such hint).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// A small mutex-protected stack of pooled driver objects (events, mapped
// host words). Used on creation and destruction paths only.
struct EventPool {
    std::atomic<int> lock{0};
    CUevent *items = nullptr;
    size_t count = 0, cap = 0;
};

// Pinned, mapped host memory carved into cache-line slots, for futures that
// are completed by a stream-written value.
struct HostSlab {
    struct Page {
        void *host;
        CUdeviceptr dev;
    };
    Page *pages = nullptr;
    size_t page_count = 0, page_cap = 0;
    uint32_t *free_slots = nullptr;  // slot ids: page * kSlotsPerPage + index
    size_t free_count = 0, free_cap = 0;
};
constexpr size_t kSlabPageBytes = 4096;
constexpr size_t kSlotBytes = 64;
constexpr size_t kSlotsPerPage = kSlabPageBytes / kSlotBytes;

// A spin lock for the short, rare critical sections of creation paths.
class SpinLock {
  public:
    explicit SpinLock(std::atomic<int> &l) : l_(l) {
        while (l_.exchange(1, std::memory_order_acquire)) {
        }
    }
    ~SpinLock() { l_.store(0, std::memory_order_release); }
    SpinLock(const SpinLock &) = delete;
    SpinLock &operator=(const SpinLock &) = delete;

  private:
    std::atomic<int> &l_;
};

// Makes a context current on this thread and puts back what was current
// before: in leave(), whose failure the caller reports, or (on early return)
// in the destructor. Costs one query when the context is already current.
class CurrentGuard {
  public:
    CurrentGuard() = default;
    ~CurrentGuard() { (void)leave(); }
    CurrentGuard(const CurrentGuard &) = delete;
    CurrentGuard &operator=(const CurrentGuard &) = delete;
    cw_status enter(CUcontext ctx);
    cw_status leave();

  private:
    CUcontext prev_ = nullptr;
    bool switched_ = false;
};

// Pinned host memory mapped into the current context's address space
// (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | extra_flags), zeroed, and
// its device address. Nothing is left allocated on failure.
cw_status host_mapped_alloc(size_t bytes, unsigned extra_flags, void **host, CUdeviceptr *dev);

// A release that waits for running resident loops (release_when_idle).
struct IdleRelease {
    void (*run)(void *owner);
    void *owner;
    IdleRelease *next;
};

}  // namespace cw

struct cw_stream;
struct cw_stream_pool;
struct cw_future;

struct cw_context {
    uint32_t tag;
    std::atomic<int> refs;
    cw_context_kind kind;
    CUcontext cu;
    CUgreenCtx green;  // CW_CONTEXT_GREEN: the green context (cu is made from it)
    CUdevice device;
    int ordinal;
    int prio_least;
    int prio_greatest;
    // Made on first use, torn down with the context.
    std::atomic<int> lock;  // guards fork_pool creation, slab
    cw_stream_pool *fork_pool;
    cw_future *orphans;  // futures whose creation failed after their marker was queued
    cw::EventPool events;
    cw::HostSlab slab;
    // Buffers (buffer.cpp): the stream-ordered pool and the stream frees go on.
    CUmemoryPool mempool;
    cw_stream *release;
    cw::IdleRelease idle;  // its last release while a resident loop runs: freed when none does
    // Peer access from this context enabled through cuweave (multi.cpp): bit
    // i set when the device of ordinal i can be accessed.
    std::atomic<uint64_t> peers;
    // Devices (bit = ordinal) whose contexts were given access to this
    // context's memory: its buffer pool is opened to them too (a pool's
    // memory is not covered by cuCtxEnablePeerAccess).
    std::atomic<uint64_t> pool_peers;
};

namespace cw {

// The bit of ctx's device in the peer masks (peers, pool_peers): 1 << ordinal,
// 0 for an ordinal past 63 (peer state is tracked for the first 64 devices).
inline uint64_t device_bit(const cw_context *ctx) { return ctx->ordinal < 64 ? 1ull << ctx->ordinal : 0; }

// True when ctx looks like a live context handle.
inline bool context_ok(const cw_context *ctx) { return handle_live(ctx, kTagContext); }

// A cw_context for a green context (owned: destroyed with the last reference).
cw_status context_new_green(CUgreenCtx green, CUdevice dev, int ordinal, cw_context **out);

// References held by objects made on a context.
void context_retain(cw_context *ctx);
void context_release(cw_context *ctx);

// Initialises the driver and maps a device ordinal to its CUdevice;
// CW_ERROR_INVALID_ARGUMENT (with the device count) when out of range.
cw_status device_from_ordinal(int ordinal, CUdevice *dev);

// Timing-disabled events from the context's pool (created when empty).
cw_status event_get(cw_context *ctx, CUevent *ev);
void event_put(cw_context *ctx, CUevent ev);

// A mapped host word (64-byte slot) from the context's slab.
cw_status slab_get(cw_context *ctx, uint32_t *slot, volatile uint32_t **host, CUdeviceptr *dev);
void slab_put(cw_context *ctx, uint32_t slot);

// The context's own lease pool for fork and when_all (made on first use).
cw_status fork_pool(cw_context *ctx, cw_stream_pool **out);

// Resident loops running per driver context (process-wide, any number of
// cw_context handles): cw_context_synchronize refuses while one runs. The
// last decrement runs the releases queued by release_when_idle.
void context_note_resident(CUcontext cu, int delta);
int context_residents(CUcontext cu);
// Resident loops running in the whole process (launched, not yet seen stopped).
int residents_running();

// Driver calls that wait until no kernel runs on the device (measured by
// tools/probes/loops.cu, docs/resident.md): cuMemFree, cuMemFreeHost,
// cuMemHostUnregister, loading and unloading code, destroying an exec with
// conditional nodes. A resident loop's kernels never end, so the library
// makes none of those while one runs: its releases wait here instead.
//
// Runs rel->run(rel->owner) now when no resident loop runs in the process, else
// when the last one is seen to stop. rel must stay valid until it runs.
void release_when_idle(IdleRelease *rel);
// Refuses (CW_ERROR_INVALID_STATE, naming `what`) while a resident loop
// runs: for calls that load code, which would wait for the loop to end.
cw_status refuse_load_while_resident(const char *what);

// Clamps a priority into the context's range.
int clamp_priority(const cw_context *ctx, int priority);

// Opens ctx's buffer pool (if made yet) to the devices in `devices` (bits =
// ordinals), read and write. Used when peer access is enabled, and when the
// pool is made after that.
cw_status pool_open_to(cw_context *ctx, uint64_t devices);

// Teardown hooks of the stream layer, called when the context goes.
void pool_destroy_internal(cw_stream_pool *pool);
void future_orphans_teardown(cw_context *ctx);
void buffer_teardown(cw_context *ctx);

// The device's primary-context priority range, cached per device.
cw_status device_priority_range(int ordinal, int *least, int *greatest);

}  // namespace cw

// Rejects a NULL handle (CW_ERROR_INVALID_ARGUMENT) or one that ok_fn does
// not accept (CW_ERROR_INVALID_HANDLE, naming the type `what`).
#define CW_CHECK_HANDLE(ok_fn, h, what)                                                    \
    do {                                                                                   \
        CW_CHECK_ARG((h) != NULL);                                                         \
        if (__builtin_expect(!ok_fn(h), 0))                                                \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live " what, #h);     \
    } while (0)

// Rejects a NULL or foreign context handle.
#define CW_CHECK_CONTEXT(ctx)                                                              \
    do {                                                                                   \
        CW_CHECK_ARG((ctx) != NULL);                                                       \
        if (__builtin_expect(!::cw::context_ok(ctx), 0))                                   \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_context", #ctx); \
    } while (0)
