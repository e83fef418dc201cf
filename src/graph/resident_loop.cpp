/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: the resident loop's life (resident.hpp): made,
// launched, asked to serve requests (the doorbell), its results waited for,
// stopped, destroyed. Its graph is built by resident_build.cpp.
#include <algorithm>
#include <mutex>
#include <new>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/nvtx.hpp"
#include "core/context.hpp"
#include "cuweave/device.h"  // cw_feature
#include "driver/driver.hpp"
#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

static_assert(sizeof(cw_resident_ctl) == 64, "the public device block is 64 bytes");
static_assert(offsetof(cw_res_host, completed) == 64, "host and GPU words on separate cache lines");
static_assert(sizeof(cw_res_host) == 128, "the host block is two cache lines");
static_assert(offsetof(cw_res_host, stop) == 8, "the doorbell and the stop word are read in one 16-byte load");

namespace cw {
namespace graphs {

using namespace core;

namespace {

// The loop's own kernels, by name in the built-in image, resolved once: a
// loop made while another runs finds them here (no driver call).
const char *const kResidentKernelNames[kResKernels] = {"cwk_res_arm", "cwk_res_poll", "cwk_res_gate",
                                                       "cwk_res_signal", "cwk_res_exit", "cwk_res_mark",
                                                       "cwk_res_loop"};
std::mutex g_kernels_mutex;
std::atomic<bool> g_kernels_ready{false};
cw_kernel *g_kernels[kResKernels];

// The GPU has reported that the current launch's loop stopped.
inline bool gpu_exited(const cw_resident *r) {
    return __atomic_load_n(&r->host->exited_epoch, __ATOMIC_ACQUIRE) == r->epoch.load(std::memory_order_acquire);
}

// Ends a launch's numbers (its stream idle: the GPU takes and serves no
// more): closes the doorbell in one atomic step with the last number taken,
// so that a cw_resident_data_ready racing it either got a number at or below
// that one or is refused, and records the numbers the launch took and did
// not serve as dropped. The closed doorbell holds the launch's last number
// (a handler launch's: the last it served), where the next launch starts.
// Runs once per launch (a second call finds the doorbell closed).
void close_launch(cw_resident *r) {
    std::lock_guard<std::mutex> lock(r->drop_mutex);
    unsigned long long *bell = &r->host->requested;
    const unsigned long long done = std::max(load_completed(r), r->base.load(std::memory_order_relaxed));
    unsigned long long cur = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
    do {
        if (cur & kDoorbellClosed) return;
    } while (!__atomic_compare_exchange_n(bell, &cur, std::max(cur, done) | kDoorbellClosed, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_ACQUIRE));
    if (cur <= done) return;
    (void)r->drops.push(DropRange{done + 1, cur});  // room made at launch
    r->drop_max.store(cur, std::memory_order_release);
}

// Whether request seq was taken by a launch that stopped before serving it.
bool was_dropped(const cw_resident *r, uint64_t seq) {
    if (__builtin_expect(seq > r->drop_max.load(std::memory_order_acquire), 1)) return false;
    std::lock_guard<std::mutex> lock(r->drop_mutex);
    const DropRange *d = r->drops.begin();
    size_t lo = 0, hi = r->drops.size();  // ranges ascending: the last with lo <= seq
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (d[mid].lo <= seq) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && seq <= d[lo - 1].hi;
}

// The launch stopped on the GPU and its stream is idle: records why.
void finish_stop(cw_resident *r, cw_resident_exit why) {
    close_launch(r);
    persistent_stop(r->ctx->cu);
    r->last_exit.store(why, std::memory_order_relaxed);
    r->state.store(CW_RESIDENT_STOPPED, std::memory_order_release);
}

cw_resident_exit exit_from_gpu(const cw_resident *r) {
    const unsigned reason = __atomic_load_n(&r->host->exit_reason, __ATOMIC_ACQUIRE);
    return reason == CW_RES_EXIT_TIMEOUT   ? CW_RESIDENT_EXIT_TIMEOUT
           : reason == CW_RES_EXIT_STALLED ? CW_RESIDENT_EXIT_STALLED
                                           : CW_RESIDENT_EXIT_TEAR_DOWN;
}

// Waits up to timeout_ms for the loop's stream to be idle. `then` says, in
// the timeout's message, what becomes of the loop.
cw_status wait_idle(cw_resident *r, uint32_t timeout_ms, const char *then) {
    const uint64_t deadline = (uint64_t)now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (unsigned spins = 0;; spins++) {
        CUresult q = drv().cuStreamQuery(r->run->cu);
        if (q == CUDA_SUCCESS) {
            finish_stop(r, gpu_exited(r) ? exit_from_gpu(r) : CW_RESIDENT_EXIT_TEAR_DOWN);
            return CW_SUCCESS;
        }
        if (q != CUDA_ERROR_NOT_READY) {
            finish_stop(r, CW_RESIDENT_EXIT_FAULT);
            char where[384];
            describe_open_stages(r, where, sizeof where);
            char what[512];
            snprintf(what, sizeof what, "the resident loop's stream reported an error while stopping%s", where);
            return fail_cu(q, "cuStreamQuery", what);
        }
        if ((uint64_t)now_ns() >= deadline)
            return fail(CW_ERROR_TIMEOUT,
                        "the resident loop did not stop within %u ms (requests made %llu, finished %llu): a "
                        "workload is still running, or other work holds the GPU; %s",
                        timeout_ms, (unsigned long long)load_requested(r), (unsigned long long)load_completed(r),
                        then);
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, nullptr);
        }
    }
}

// A launch whose loop stopped on the GPU by itself (timeout) is settled
// once its stream is idle. What is left on the stream then is the end of
// the loop's last kernel (microseconds; much longer under
// compute-sanitizer, where racecheck showed a loop get_state called stopped
// refused by configure): it is waited for. A stream error leaves the
// launch as it is, for tear-down to report.
void settle(cw_resident *r) {
    const int st = r->state.load(std::memory_order_acquire);
    if ((st != CW_RESIDENT_RUNNING && st != CW_RESIDENT_STOPPING) || !gpu_exited(r)) return;
    CUresult q = drv().cuStreamQuery(r->run->cu);
    if (q == CUDA_ERROR_NOT_READY) q = drv().cuStreamSynchronize(r->run->cu);
    if (q == CUDA_SUCCESS) finish_stop(r, exit_from_gpu(r));
}

void resident_free(cw_resident *r) {
    fused_free(r);
    if (r->exec) exec_destroy(r->exec);
    if (r->workload.graph) graph_destroy(r->workload.graph);
    if (r->handler.graph) graph_destroy(r->handler.graph);
    if (r->dev || r->input || r->host || r->marks) {
        CurrentGuard guard;
        if (guard.enter(r->ctx->cu) == CW_SUCCESS) {
            if (r->dev) drv().cuMemFree(r->dev);
            if (r->input) drv().cuMemFree(r->input);
            if (r->host) drv().cuMemFreeHost(r->host);
            if (r->marks) drv().cuMemFreeHost(r->marks);
            (void)guard.leave();
        }
    }
    if (r->run) stream_free(r->run);
    if (r->build) stream_free(r->build);
    if (r->stats) stream_free(r->stats);
    cw_context *ctx = r->ctx;
    handle_retire(r);
    r->~cw_resident();
    handle_free(r);
    if (ctx) context_release(ctx);
}

// Frees r now, or, while persistent work runs, once none does: freeing its
// memory and its graph would wait for those loops to end.
void resident_release(cw_resident *r) {
    handle_retire(r);
    r->idle.run = [](void *owner) { resident_free(static_cast<cw_resident *>(owner)); };
    r->idle.owner = r;
    release_when_idle(&r->idle);
}

// Loops destroyed while they would not stop: their handles are gone, their
// memory kept (the GPU may still use it), and they still count as running,
// until reap_abandoned sees them stopped and frees them.
std::mutex g_abandoned_mutex;
cw_resident *g_abandoned;

void abandon(cw_resident *r) {
    handle_retire(r);
    std::lock_guard<std::mutex> lock(g_abandoned_mutex);
    r->abandoned_next = g_abandoned;
    g_abandoned = r;
}

// Frees the abandoned loops whose stream is idle (or reports an error: the
// loop is over then too). A driver call per abandoned loop; none without.
void reap_abandoned() {
    cw_resident *list, *keep = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_abandoned_mutex);
        list = g_abandoned;
        g_abandoned = nullptr;
    }
    while (list) {
        cw_resident *r = list;
        list = r->abandoned_next;
        const CUresult q = drv().cuStreamQuery(r->run->cu);
        if (q == CUDA_ERROR_NOT_READY) {
            r->abandoned_next = keep;
            keep = r;
            continue;
        }
        finish_stop(r, q != CUDA_SUCCESS ? CW_RESIDENT_EXIT_FAULT
                                         : gpu_exited(r) ? exit_from_gpu(r) : CW_RESIDENT_EXIT_TEAR_DOWN);
        log(CW_LOG_INFO, "cuweave: a resident loop abandoned by cw_resident_destroy has stopped: freed");
        resident_release(r);
    }
    if (!keep) return;
    std::lock_guard<std::mutex> lock(g_abandoned_mutex);
    cw_resident **tail = &keep;
    while (*tail) tail = &(*tail)->abandoned_next;
    *tail = g_abandoned;
    g_abandoned = keep;
}

cw_status alloc_memory(cw_resident *r) {
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    void *p = nullptr;
    CW_TRY(host_mapped_alloc(r->ctx, 4096, CU_MEMHOSTALLOC_PORTABLE, &p, &r->host_dev));
    r->host = static_cast<cw_res_host *>(p);
    CW_CU(cuMemAlloc, (&r->dev, sizeof(cw_res_dev)));
    if (r->set.input_slots) {
        if (r->set.input_bytes > SIZE_MAX / r->set.input_slots)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: input_slots * input_bytes overflows");
        CW_CU(cuMemAlloc, (&r->input, r->set.input_slots * r->set.input_bytes));
    }
    // The device block starts as zeros with the public part filled in.
    cw_res_dev init;
    memset(&init, 0, sizeof init);
    init.pub.input = r->input;
    init.pub.input_bytes = r->set.input_bytes;
    init.pub.input_slots = r->set.input_slots;
    CW_CU(cuMemcpyHtoD, (r->dev, &init, sizeof init));
    return guard.leave();
}

// Refuses a launched loop (with `launched`), else builds when something changed.
cw_status build_unless_launched(cw_resident *r, const char *launched) {
    settle(r);
    if (resident_active(r)) return fail(CW_ERROR_INVALID_STATE, "%s", launched);
    if (r->dirty || (!is_fused(r) && !r->exec)) {
        // Instantiating loads code; replacing an old build destroys a graph
        // with conditional nodes: both wait for running loops to end. The
        // whole build is one quiet call: a loop launched meanwhile waits.
        QuietCall quiet;
        CW_TRY(refuse_load_while_persistent(quiet, "building a resident loop's graph"));
        CW_TRY(is_fused(r) ? fused_build(r) : build(r));
    }
    return CW_SUCCESS;
}

// Shared by poll_result and wait_result: 1 done, 0 not yet, or an error.
cw_status check_result(const cw_resident *r, uint64_t seq, int *ready) {
    *ready = 0;
    if (seq == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: request numbers start at 1");
    if (!r->handler.set()) {
        const uint64_t made = load_requested(r);
        if (seq > made)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: request %llu was never made (the last is %llu)",
                        (unsigned long long)seq, (unsigned long long)made);
    }
    if (was_dropped(r, seq))
        return fail(CW_ERROR_INVALID_STATE, "request %llu was dropped: the loop was torn down before serving it",
                    (unsigned long long)seq);
    if (load_completed(r) >= seq) {
        *ready = 1;
        return CW_SUCCESS;
    }
    if (!resident_active(r) || gpu_exited(r))
        return fail(CW_ERROR_INVALID_STATE, "the resident loop stopped before serving request %llu (served: %llu)",
                    (unsigned long long)seq, (unsigned long long)load_completed(r));
    return CW_SUCCESS;
}

// A running loop whose stream reports an error has faulted: name the stage
// (the request it was serving). Asked by waits that have waited a while.
cw_status check_fault(const cw_resident *r) {
    if (!resident_active(r)) return CW_SUCCESS;
    CUresult q = drv().cuStreamQuery(r->run->cu);
    if (q == CUDA_SUCCESS || q == CUDA_ERROR_NOT_READY) return CW_SUCCESS;
    const unsigned long long served = (unsigned long long)load_completed(r);
    // the request being served: after the last finished one, and after
    // those a teardown dropped before this launch
    const unsigned long long base = r->base.load(std::memory_order_acquire);
    const unsigned long long serving = (served > base ? served : base) + 1;
    char where[384];
    describe_open_stages(r, where, sizeof where);
    cw_status st = fail_cu(q, "cuStreamQuery", "the resident loop's stream");
    return fail(st, "the resident loop faulted while serving request %llu%s (requests finished: %llu%s): %s",
                serving, where[0] ? where : " (its workload or data-ready handler)", served,
                r->set.trace ? "" : "; cw_resident_settings.trace names the stage", last_error().cu_name);
}

}  // namespace

cw_status resident_kernel(ResidentKernel which, cw_kernel **out) {
    if (__builtin_expect(!g_kernels_ready.load(std::memory_order_acquire), 0)) {
        std::lock_guard<std::mutex> lock(g_kernels_mutex);
        if (!g_kernels_ready.load(std::memory_order_relaxed)) {
            cw_kernel *k[kResKernels] = {};
            for (int i = 0; i < kResKernels; i++) CW_TRY(kernels::builtin_by_name(kResidentKernelNames[i], &k[i]));
            for (int i = 0; i < kResKernels; i++) g_kernels[i] = k[i];
            g_kernels_ready.store(true, std::memory_order_release);
        }
    }
    *out = g_kernels[which];
    return CW_SUCCESS;
}

void settle_launch(cw_resident *r) { settle(r); }

bool resident_active(const cw_resident *r) {
    const int st = r->state.load(std::memory_order_acquire);
    return st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING;
}

cw_status resident_create(cw_context *ctx, const cw_resident_settings *s, cw_resident **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_TRY(ensure_init());
    reap_abandoned();
    if (!driver_has(CW_FEATURE_CONDITIONAL_NODES))
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "the GPU-resident loop needs conditional graph nodes (a CUDA 12.3 driver or newer)");
    if (!driver_has(CW_FEATURE_LIBRARY_API))
        return fail(CW_ERROR_NOT_SUPPORTED, "the GPU-resident loop needs the library API (a CUDA 12.0 driver or newer)");
    void *mem = calloc(1, sizeof(cw_resident));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_resident *r = new (mem) cw_resident();
    r->set = *s;
    r->ctx = ctx;
    context_retain(ctx);
    r->state.store(CW_RESIDENT_NOT_LAUNCHED, std::memory_order_relaxed);
    r->dirty = true;
    const int prio = s->use_default_priority ? ctx->prio_greatest : s->priority;
    cw_status st = stream_new(ctx, CW_STREAM_NON_BLOCKING, prio, false, &r->run);
    if (st == CW_SUCCESS) st = stream_new(ctx, CW_STREAM_NON_BLOCKING, 0, false, &r->build);
    if (st == CW_SUCCESS) st = stream_new(ctx, CW_STREAM_NON_BLOCKING, prio, false, &r->stats);
    if (st == CW_SUCCESS) st = alloc_memory(r);
    if (st == CW_SUCCESS) {
        // The built-in kernels now, so that a missing image fails here, not at launch.
        cw_kernel *k = nullptr;
        st = resident_kernel(kResPoll, &k);
    }
    if (st != CW_SUCCESS) {
        resident_release(r);
        return st;
    }
    room.publish(r);
    *out = r;
    return CW_SUCCESS;
}

void resident_destroy(cw_resident *r) {
    reap_abandoned();
    if (resident_active(r)) {
        __atomic_store_n(&r->host->stop, 1u, __ATOMIC_RELEASE);
        r->state.store(CW_RESIDENT_STOPPING, std::memory_order_release);
        // A timeout or a fault is logged (CW_LOG_ERROR) by the failure itself.
        const cw_status st =
            wait_idle(r, r->set.destroy_timeout_ms,
                      "the handle is gone and the loop abandoned: its memory, streams and graph are kept (the GPU "
                      "may still use them) and freed once a later cw_resident_create or cw_resident_destroy sees it "
                      "stopped; the request to stop stays");
        if (st == CW_ERROR_TIMEOUT) {
            abandon(r);  // the GPU may still use it all: keep it
            return;
        }
        // Stopped, or a fault ended it (finish_stop ran): free it.
    }
    resident_release(r);
}

cw_status resident_configure(cw_resident *r, const cw_resident_settings *settings) {
    if (settings->input_slots != r->set.input_slots || settings->input_bytes != r->set.input_bytes)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: input_slots and input_bytes are fixed when the loop is made");
    if (settings->use_default_priority != r->set.use_default_priority ||
        (!settings->use_default_priority && settings->priority != r->set.priority))
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the priority is fixed when the loop is made");
    settle(r);
    if (resident_active(r))
        return fail(CW_ERROR_INVALID_STATE,
                    "the settings are built into the loop's graph at launch: tear the loop down "
                    "(cw_resident_tear_down) before changing them");
    if (is_fused(r)) CW_TRY(fused_check_settings(settings));
    r->set = *settings;
    r->dirty = true;
    return CW_SUCCESS;
}

cw_status resident_set_part(cw_resident *r, bool handler, const cw_graph *g, cw_resident_capture_fn fn, void *user) {
    Part *part = handler ? &r->handler : &r->workload;
    const char *what = handler ? "data-ready handler" : "workload";
    settle(r);
    if (resident_active(r))
        return fail(CW_ERROR_INVALID_STATE, "the %s is built into the loop's graph at launch: tear the loop down first",
                    what);
    if (is_fused(r) && (g || fn))
        return fail(CW_ERROR_INVALID_STATE,
                    "the loop is fused (cw_resident_set_fused): it runs its stages, not a %s; "
                    "cw_resident_set_fused(r, NULL) first",
                    what);
    return set_part(r, g, fn, user, part);
}

cw_status resident_build(cw_resident *r) {
    return build_unless_launched(r, "the loop is launched: its graph is built (tear it down to rebuild)");
}

cw_status resident_launch(cw_resident *r) {
    CW_TRY(build_unless_launched(r, "the loop is launched already (tear it down before launching again)"));
    // Room to record the requests this launch may drop (recording cannot fail).
    {
        std::lock_guard<std::mutex> lock(r->drop_mutex);
        if (!r->drops.reserve(r->drops.size() + 1)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    // Every number given so far has been served or dropped (the closed
    // doorbell holds the last, a handler launch's included): this launch
    // numbers after them, and opens the doorbell there.
    cw_res_host *h = r->host;
    const uint64_t base = load_requested(r);
    const uint32_t epoch = r->epoch.load(std::memory_order_relaxed) + 1;
    r->base.store(base, std::memory_order_release);
    __atomic_store_n(&h->stop, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&h->base, base, __ATOMIC_RELAXED);
    __atomic_store_n(&h->epoch, epoch, __ATOMIC_RELEASE);
    __atomic_store_n(&h->requested, base, __ATOMIC_SEQ_CST);
    // Counted before the launch: from the moment cuGraphLaunch may start the
    // loop, another thread's release or load must see it running (a driver
    // call that waits for it would hang); and launched once none that began
    // before is under way (persistent_start waits). Undone when the launch
    // fails.
    cw_status st = persistent_start(r->ctx->cu, "launching a resident loop");
    if (st != CW_SUCCESS) {
        close_launch(r);
        return st;
    }
    // The stream (and the driver's submission) orders these stores before the GPU reads them.
    st = is_fused(r) ? fused_launch(r) : exec_launch(r->exec, r->run);
    if (st != CW_SUCCESS) {
        persistent_stop(r->ctx->cu);
        close_launch(r);  // a request that raced in is dropped, and more refused
        return st;
    }
    r->epoch.store(epoch, std::memory_order_release);
    r->launches.fetch_add(1, std::memory_order_relaxed);
    r->last_exit.store(CW_RESIDENT_EXIT_NONE, std::memory_order_relaxed);
    r->state.store(CW_RESIDENT_RUNNING, std::memory_order_release);
    return CW_SUCCESS;
}

cw_status resident_data_ready(cw_resident *r, uint64_t *seq) {
    if (__builtin_expect(r->state.load(std::memory_order_acquire) != CW_RESIDENT_RUNNING, 0))
        return fail(CW_ERROR_INVALID_STATE, "the resident loop is not running (launch it first)");
    if (__builtin_expect(r->handler.set(), 0))
        return fail(CW_ERROR_INVALID_STATE,
                    "this loop's requests come from its data-ready handler; the host cannot add any");
    // A number from the open doorbell; closed (the launch stopped meanwhile
    // and its numbers are final): refused, as when the state said so.
    unsigned long long *bell = &r->host->requested;
    unsigned long long cur = __atomic_load_n(bell, __ATOMIC_RELAXED);
    do {
        if (__builtin_expect(cur & kDoorbellClosed, 0))
            return fail(CW_ERROR_INVALID_STATE, "the resident loop is not running (launch it first)");
    } while (!__atomic_compare_exchange_n(bell, &cur, cur + 1, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (seq) *seq = cur + 1;
    CW_NVTX_MARK_N(resident_request, cur + 1);
    return CW_SUCCESS;
}

cw_status resident_poll_result(const cw_resident *r, uint64_t seq) {
    if (__builtin_expect(load_completed(r) >= seq && seq != 0 && !was_dropped(r, seq), 1)) return CW_SUCCESS;
    int ready = 0;
    CW_TRY(check_result(r, seq, &ready));
    return ready ? CW_SUCCESS : CW_ERROR_NOT_READY;  // not yet: no detail, as cw_future_poll
}

cw_status resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms) {
    const uint64_t start = (uint64_t)now_ns();
    const uint64_t deadline = start + (uint64_t)timeout_ms * 1000000ull;
    for (unsigned i = 0;; i++) {
        int ready = 0;
        if (load_completed(r) >= seq && seq != 0 && !was_dropped(r, seq)) return CW_SUCCESS;
        if ((i & 63) == 0) {
            CW_TRY(check_result(r, seq, &ready));
            if (ready) return CW_SUCCESS;
            const uint64_t now = (uint64_t)now_ns();
            if (now - start > 1000000ull && (i & 1023) == 0) CW_TRY(check_fault(r));  // past 1 ms: a fault?
            if (now >= deadline)
                return fail(CW_ERROR_TIMEOUT, "request %llu not finished within %u ms (made: %llu, finished: %llu)",
                            (unsigned long long)seq, timeout_ms, (unsigned long long)load_requested(r),
                            (unsigned long long)load_completed(r));
            if (now - start > 200000ull) {  // past 200 us: give the CPU away between checks
                if (now - start > 5000000ull) {
                    struct timespec ts = {0, 50000};
                    nanosleep(&ts, nullptr);
                } else {
                    sched_yield();
                }
            }
        }
        cpu_relax();
    }
}

cw_status resident_next_input(cw_resident *r, uint32_t timeout_ms, CUdeviceptr *dptr) {
    if (r->set.input_slots == 0) return fail(CW_ERROR_INVALID_STATE, "the loop has no input slots (input_slots 0)");
    if (!resident_active(r)) return fail(CW_ERROR_INVALID_STATE, "the resident loop is not running (launch it first)");
    const uint64_t next = load_requested(r) + 1;
    const uint64_t slots = r->set.input_slots;
    // The request that used this slot before must have finished (or been
    // made before this launch: served or dropped).
    if (next > slots) {
        const uint64_t before = next - slots;
        if (before > r->base.load(std::memory_order_acquire) && load_completed(r) < before)
            CW_TRY(resident_wait_result(r, before, timeout_ms));
    }
    *dptr = r->input + ((next - 1) % slots) * r->set.input_bytes;
    return CW_SUCCESS;
}

cw_status resident_tear_down(cw_resident *r, uint32_t timeout_ms) {
    if (!resident_active(r)) return CW_SUCCESS;
    __atomic_store_n(&r->host->stop, 1u, __ATOMIC_RELEASE);
    r->state.store(CW_RESIDENT_STOPPING, std::memory_order_release);
    return wait_idle(r, timeout_ms, "the request to stop stays");
}

cw_resident_state resident_state(const cw_resident *r) {
    int st = r->state.load(std::memory_order_acquire);
    if ((st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING) && gpu_exited(r)) st = CW_RESIDENT_STOPPED;
    return static_cast<cw_resident_state>(st);
}

cw_status resident_info(cw_resident *r, cw_resident_info *info) {
    cw_res_dev d;  // 16.5 KB on the stack: no allocation, and each thread has its own
    CW_TRY(on_stream(r->stats, "cuMemcpyDtoHAsync",
                     [&] { return drv().cuMemcpyDtoHAsync(&d, r->dev, sizeof d, r->stats->cu); }));
    CW_TRY(on_stream(r->stats, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(r->stats->cu); }));
    cw_resident_info o;
    memset(&o, 0, sizeof o);
    o.context = r->ctx;
    o.state = resident_state(r);
    o.launched = o.state == CW_RESIDENT_RUNNING || o.state == CW_RESIDENT_STOPPING;
    o.requested = load_requested(r);
    o.completed = load_completed(r);
    o.iterations = d.served;
    o.idle_polls = d.idle_polls;
    o.launches = r->launches.load(std::memory_order_relaxed);
    if (d.served) {
        o.iter_min_ns = d.min_ns;
        o.iter_max_ns = d.max_ns;
        const size_t n = d.served < CW_RES_RING ? (size_t)d.served : CW_RES_RING;
        std::nth_element(d.ring, d.ring + n / 2, d.ring + n);
        o.iter_median_ns = d.ring[n / 2];
        o.median_window = n;
    }
    int st = r->state.load(std::memory_order_acquire);
    if (st == CW_RESIDENT_NOT_LAUNCHED) {
        o.exit = CW_RESIDENT_EXIT_NONE;  // (a build's trial run does not count)
    } else if (gpu_exited(r)) {
        o.run_ns = __atomic_load_n(&r->host->run_ns, __ATOMIC_ACQUIRE);
        o.exit = st == CW_RESIDENT_STOPPED ? static_cast<cw_resident_exit>(r->last_exit.load()) : exit_from_gpu(r);
    } else {
        o.exit = st == CW_RESIDENT_STOPPED ? static_cast<cw_resident_exit>(r->last_exit.load()) : CW_RESIDENT_EXIT_NONE;
    }
    o.gate = r->built ? r->gate_used : r->set.gate;
    o.overlap = r->built ? r->overlap_used : r->set.overlap;
    o.fallback = r->built ? r->fallback : CW_RESIDENT_FALLBACK_NONE;
    o.fallback_detail = r->built ? r->fallback_detail : "";
    CW_TRY(fused_info(r, &o));
    *info = o;
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
