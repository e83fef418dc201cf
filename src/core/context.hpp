/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: contexts (primary, external, green), the current-context
// rule, and what a context owns for the objects made on it.
#pragma once

#include <atomic>
#include <stdint.h>

#include "base/sync.hpp"
#include "core/handle.hpp"
#include "core/idle.hpp"
#include "cuweave/context.h"
#include "driver/driver.hpp"
#include "driver/error.hpp"

namespace cw {
namespace core {

struct Mark;
// A small spin-locked stack of pooled driver events (event.cpp), and under
// the same lock the host memory of marks that went (a mark and its event
// are taken again together, with no allocation and one lock round).
struct EventPool {
    std::atomic<int> lock{0};
    CUevent *items = nullptr;
    size_t count = 0, cap = 0;
    Mark *marks = nullptr;  // free marks, linked through Mark::next
};

// Pinned, mapped host memory carved into cache-line slots, for futures that
// are completed by a stream-written value (future.cpp).
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

}  // namespace core
}  // namespace cw

struct cw_future;
struct cw_stream;
struct cw_stream_pool;

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
    unsigned sm_count;  // the partition's SMs for a green context, the device's otherwise
    // Parts made on first use by the code that owns them, torn down with the
    // context through the hooks that code registers (context_on_teardown).
    std::atomic<int> lock;       // guards the parts' creation
    cw_stream_pool *fork_pool;   // pool.cpp: leases for fork and when_all
    cw_future *orphans;          // future.cpp: futures whose creation failed after their marker was queued
    cw::core::HostSlab slab;     // future.cpp: words for written-value futures
    cw::core::EventPool events;  // event.cpp: timing-disabled events
    CUmemoryPool mempool;        // buffer.cpp: the stream-ordered pool
    cw_stream *release;          // buffer.cpp: the stream frees go on
    cw::core::IdleRelease idle;  // its own last release while persistent work runs
    // Peer access from this context enabled through cuweave: bit i set when
    // the device of ordinal i can be accessed.
    std::atomic<uint64_t> peers;
    // Devices (bit = ordinal) whose contexts were given access to this
    // context's memory: its buffer pool is opened to them too (a pool's
    // memory is not covered by cuCtxEnablePeerAccess).
    std::atomic<uint64_t> pool_peers;
};

namespace cw {
namespace core {

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

// Sets the calling thread's capture interaction mode to relaxed and puts the
// previous one back when it goes. For frees that are not part of any capture
// (a buffer's on the release stream, a kept shared object's): the driver
// counts them as unsafe while the thread has a GLOBAL or THREAD_LOCAL capture
// open (or any thread a GLOBAL one), refuses them and invalidates that
// capture. Without the driver entry it does nothing.
class RelaxedCapture {
  public:
    RelaxedCapture() {
        if (drv().cuThreadExchangeStreamCaptureMode)
            set_ = drv().cuThreadExchangeStreamCaptureMode(&prev_) == CUDA_SUCCESS;
    }
    ~RelaxedCapture() {
        if (set_) (void)drv().cuThreadExchangeStreamCaptureMode(&prev_);
    }
    RelaxedCapture(const RelaxedCapture &) = delete;
    RelaxedCapture &operator=(const RelaxedCapture &) = delete;

  private:
    CUstreamCaptureMode prev_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    bool set_ = false;
};

// A context of device `ordinal`'s primary context (retained), or wrapping a
// CUcontext the caller owns (never destroyed or changed).
cw_status context_create_primary(int ordinal, cw_context **out);
cw_status context_wrap(CUcontext cu, cw_context **out);
// A cw_context for a green context (owned: destroyed with the last reference).
cw_status context_new_green(CUgreenCtx green, CUdevice dev, int ordinal, cw_context **out);

// References held by objects made on a context. The last release tears the
// context down: every registered part (below), then the driver context
// (primary released, green destroyed, external left alone). That waits for
// running persistent work (idle.hpp).
void context_retain(cw_context *ctx);
void context_release(cw_context *ctx);

// cuCtxSynchronize with ctx current; refused while persistent work runs on it.
cw_status context_synchronize(cw_context *ctx);

// Teardown of a part a context makes on first use. The owner of the part
// registers its hook (once per process; any thread; idempotent) before it
// first makes the part; a context going runs every hook, stage by stage,
// with the context current. Hooks check whether their part exists.
enum TeardownStage : int {
    kTeardownUsers = 0,    // objects that use the context's streams and events
    kTeardownStreams = 1,  // the context's own streams
    kTeardownEvents = 2,   // its pooled events, last
};
void context_on_teardown(void (*teardown)(cw_context *), TeardownStage stage);

// The bit of ctx's device in the peer masks (peers, pool_peers): 1 << ordinal,
// 0 for an ordinal past 63 (peer state is tracked for the first 64 devices).
inline uint64_t device_bit(const cw_context *ctx) { return ctx->ordinal < 64 ? 1ull << ctx->ordinal : 0; }

// Clamps a priority into the context's range.
int clamp_priority(const cw_context *ctx, int priority);

// Pinned host memory mapped into the current context's address space (ctx's,
// current: cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | extra_flags),
// zeroed, and its device address. Nothing is left allocated on failure
// (what was made is freed as host_free does: once no resident loop runs).
cw_status host_mapped_alloc(cw_context *ctx, size_t bytes, unsigned extra_flags, void **host, CUdeviceptr *dev);

}  // namespace core
}  // namespace cw
