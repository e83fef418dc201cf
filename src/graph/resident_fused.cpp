/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: the resident loop's fused persistent mode
// (cw_resident_set_fused). One cooperative kernel, compiled from the
// caller's stages and the loop below, replaces the graph: block 0 polls the
// doorbell as cwk_res_poll does, every block runs the stages with a grid
// barrier after each, block 0 signals as cwk_res_signal does. It uses the
// graph loop's host and device blocks (resident_abi.h) word for word, so
// the host side (resident_loop.cpp: the doorbell, results, stopping,
// statistics) is the same code. The api layer compiles the source made
// here (the jit layer) and hands the module over.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.hpp"
#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

// The loop around the stages. CWF_STAGES is replaced by the calls of the
// stages, each followed by a grid barrier. The start, the poll and the
// signal are the graph loop's (cw__res_arm, cw__res_poll, cw__res_signal in
// resident_device.h) with the lead thread's state in registers for the
// whole launch (cwf_arm, cwf_poll, cwf_signal), the end is cw__res_exit:
// the host reads the same words, written in the same order.
const char kLoop[] = R"CWF(
extern "C" {

/* The grid's words (the loop's own allocation, zeroed before each launch),
 * each on a line of its own: arrivals, counted up for the whole launch
 * (barrier k of a block waits for k * blocks), and block 0's decision for
 * iteration i (i: serve, i | CWF_STOP: stop). */
struct cwf_sync {
    unsigned long long arrive;
    unsigned long long pad0[15];
    unsigned long long go;
    unsigned long long pad1[15];
};
#define CWF_STOP (1ull << 63)

/* One block arrives: its writes before (every thread's: the block barrier
 * first) are released at GPU scope, at system scope with sys (writes to
 * host memory visible to the host). Thread 0 only. */
static __device__ __forceinline__ void cwf_arrive(cwf_sync *s, unsigned sys) {
    if (sys) __threadfence_system();
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(&s->arrive) : "memory");
}

static __device__ __forceinline__ unsigned long long cwf_ld_acquire(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* Thread 0 waits until *w reaches need, spinning on acquire loads (the
 * load that sees it orders what follows: no fence after), napping up to
 * nap_ns between checks (0: spin). */
static __device__ __forceinline__ unsigned long long cwf_wait(const unsigned long long *w, unsigned long long need,
                                                              unsigned long long mask, unsigned nap_ns) {
    unsigned long long v = cwf_ld_acquire(w);
    unsigned nap = 32u;
    while ((v & mask) < need) {
        if (nap_ns) {
            __nanosleep(nap);
            if (nap < nap_ns) nap *= 2u;
        }
        v = cwf_ld_acquire(w);
    }
    return v;
}

/* A grid barrier: every thread of every block arrives; what any block wrote
 * before it is visible to every block after it. One counter for the launch,
 * never reset: the k-th barrier of a block waits for k * blocks arrivals
 * (*target, the block's count, moves on by the grid each time). */
static __device__ __forceinline__ void cwf_barrier(cwf_sync *s, unsigned long long *target, unsigned sys) {
    __syncthreads();
    if (gridDim.x == 1u) return;
    if (threadIdx.x == 0u) {
        cwf_arrive(s, sys);
        *target += gridDim.x;
        cwf_wait(&s->arrive, *target, ~0ull, 0u);
    }
    __syncthreads();
}

/* The lead thread's (block 0, thread 0) copy of the loop's state, kept in
 * registers for the whole launch: the poll and the signal of cw__res_poll
 * and cw__res_signal, but without a global load between seeing the
 * doorbell and writing the result (the graph loop's kernels are separate
 * launches and keep it in the device block). Every word the host reads is
 * still stored, in the same place, before the result: served, min_ns,
 * max_ns, the ring, idle_polls, the sequence words, the exit words. */
struct cwf_lead {
    unsigned long long started;  /* requests taken: the number of the last one */
    unsigned long long t0;       /* globaltimer at the start of this launch */
    unsigned long long deadline; /* t0 + the GPU timeout (never, without one) */
    unsigned long long t_start;  /* globaltimer when the doorbell load that took the current request returned */
    unsigned long long served, min_ns, max_ns;
    unsigned long long idle_polls; /* checks that found nothing, every launch: stored, never loaded again */
};

/* cw__res_arm: the launch's numbers begin at h->base; announced to the host
 * (running_epoch) after everything else. */
static __device__ __forceinline__ void cwf_arm(cw_res_host *h, cw_res_dev *d, cwf_lead &L,
                                               unsigned long long timeout_ns) {
    const unsigned long long now = cw__res_now();
    const unsigned long long base = *(volatile unsigned long long *)&h->base;
    L.started = base;
    L.t0 = now;
    L.deadline = timeout_ns != 0ull ? now + timeout_ns : ~0ull;
    L.t_start = now;
    L.served = d->served; /* the statistics run over every launch */
    L.min_ns = d->min_ns;
    L.max_ns = d->max_ns;
    L.idle_polls = d->idle_polls;
    d->t0 = now;
    d->last_done = now;
    d->stopped = 0u;
    d->reason = 0u;
    d->backoff_ns = 0u;
    d->idle = 0u;
    d->started = base;
    d->pub.seq = base;
    d->pub.ready = 0u;
    d->pub.skip = 1u;
    const unsigned epoch = *(volatile unsigned *)&h->epoch;
    d->epoch = epoch;
    __threadfence_system();
    *(volatile unsigned *)&h->running_epoch = epoch;
}

/* cw__res_poll for host requests (a fused loop has no data-ready handler):
 * 1 a request was taken (its number L.started, written to pub.seq for the
 * stages), 0 the loop stops (the stop word or the GPU timeout; the stop word
 * wins over a request made before it, as in cw__res_poll). On the way to a
 * taken request the one memory access waited for is the doorbell's load;
 * stop and timeout are compares of registers. An empty check stores the
 * count of idle polls from its register (a load of the device block there
 * would hold up the next doorbell load by an L2 round trip); the adaptive
 * back-off keeps its word in the device block (it only runs when the loop
 * sleeps). */
static __device__ __forceinline__ unsigned cwf_poll(const cw_res_host *h, cw_res_dev *d, cwf_lead &L,
                                                    unsigned sleep_ns, unsigned spin_ns, unsigned flags) {
    for (;;) {
        /* the doorbell and the stop word in one 16-byte load */
        unsigned long long requested, word;
        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(requested), "=l"(word) : "l"(h) : "memory");
        const unsigned long long now = cw__res_now();
        const unsigned stop = (unsigned)(word & 0xffffffffull);
        if (stop || now >= L.deadline) {
            d->stopped = 1u;
            d->reason = stop ? CW_RES_EXIT_TEAR_DOWN : CW_RES_EXIT_TIMEOUT;
            d->pub.skip = 1u;
            return 0u;
        }
        if (requested > L.started) {
            const unsigned long long seq = L.started + 1ull;
            L.started = seq;
            /* The clock read after the doorbell's value is known (this
             * branch waits for the load): `now` above is read while the
             * load is still in flight, a PCIe round trip before the
             * request was seen. */
            L.t_start = cw__res_now();
            d->pub.seq = seq;
            d->started = seq;
            d->pub.skip = 0u;
            d->backoff_ns = 0u;
            return 1u;
        }
        L.idle_polls += 1ull;
        d->idle_polls = L.idle_polls;
        cw__res_pause(d, now, sleep_ns, spin_ns, flags);
    }
}

/* cw__res_signal from registers: the iteration's time into the ring and
 * the statistics (stored only, nothing loaded), then the request's number
 * where the host reads it, after a system-wide fence with sync_with_host. */
static __device__ __forceinline__ void cwf_signal(cw_res_host *h, cw_res_dev *d, cwf_lead &L, unsigned flags) {
    const unsigned long long now = cw__res_now();
    const unsigned long long dur = now - L.t_start;
    const unsigned long long served = L.served;
    d->ring[served % CW_RES_RING] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;
    if (served == 0ull || dur < L.min_ns) L.min_ns = dur;
    if (dur > L.max_ns) L.max_ns = dur;
    L.served = served + 1ull;
    d->min_ns = L.min_ns;
    d->max_ns = L.max_ns;
    d->served = served + 1ull;
    d->last_done = now;
    if (flags & CW_RES_SYNC_HOST) __threadfence_system();
    *(volatile unsigned long long *)&h->completed = L.started;
}

__global__ void __launch_bounds__(1024) cwf_resident_loop(cw_res_host *h, cw_res_dev *d, cwf_sync *s, void *user,
                                                          unsigned long long timeout_ns, unsigned sleep_ns,
                                                          unsigned spin_ns, unsigned flags) {
    __shared__ unsigned cwf_cmd;
    const bool lead = blockIdx.x == 0u && threadIdx.x == 0u;
    const bool one = gridDim.x == 1u;
    const unsigned sys = (flags & CW_RES_SYNC_HOST) ? 1u : 0u;
    /* Blocks waiting for a request nap up to 1 us between checks (spin
     * when the loop spins): block 0 does the sleeping of the idle modes. */
    const unsigned idle_nap = sleep_ns == 0u ? 0u : 1000u;
    cwf_lead L = {};
    unsigned long long target = 0ull; /* this block's count of arrivals waited for */
    unsigned long long it = 0ull;     /* iterations */
    if (lead) cwf_arm(h, d, L, timeout_ns);
    for (;;) {
        /* The decision, 1 a request taken, 2 the loop stops (tear-down or
         * timeout): block 0 takes it and publishes it with the iteration's
         * number; the other blocks wait for that number (they arrived at the
         * end of the last iteration and need not meet block 0 again). */
        it += 1ull;
        if (lead) {
            const unsigned c = cwf_poll(h, d, L, sleep_ns, spin_ns, flags) == 1u ? 1u : 2u;
            cwf_cmd = c;
            if (!one)
                asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(&s->go), "l"(c == 1u ? it : it | CWF_STOP)
                             : "memory");
        } else if (threadIdx.x == 0u) {
            const unsigned long long g = cwf_wait(&s->go, it, ~CWF_STOP, idle_nap);
            cwf_cmd = (g & CWF_STOP) ? 2u : 1u;
        }
        __syncthreads();
        const unsigned cmd = cwf_cmd;
        if (cmd == 2u) break;
CWF_STAGES
        /* the iteration's end: every block arrives (its stage writes
         * released); block 0 waits for all of them and signals */
        __syncthreads();
        if (!one && threadIdx.x == 0u) {
            cwf_arrive(s, sys);
            target += gridDim.x;
            if (lead) cwf_wait(&s->arrive, target, ~0ull, 0u);
        }
        if (lead) cwf_signal(h, d, L, flags); /* (its system fence covers a grid of one) */
    }
    if (lead) cw__res_exit(h, d);
}

}  /* extern "C" */
)CWF";

constexpr size_t kSyncBytes = 256;  // struct cwf_sync
constexpr uint32_t kDefaultBlockThreads = 256;

bool is_ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

uint32_t block_threads_of(const cw_resident_fused *f) {
    return f->block_threads ? f->block_threads : kDefaultBlockThreads;
}

// Launches the loop's kernel on the run stream, cooperatively, after
// zeroing the barrier's words there.
cw_status fused_start(cw_resident *r) {
    Fused *fu = r->fused;
    CW_TRY(on_stream(r->run, "cuMemsetD32Async",
                     [&] { return drv().cuMemsetD32Async(fu->sync, 0u, fu->sync_bytes / 4, r->run->cu); }));
    CUdeviceptr h = r->host_dev, d = r->dev, s = fu->sync, user = fu->user;
    unsigned long long timeout_ns = (unsigned long long)r->set.timeout_ms * 1000000ull;
    unsigned sleep_ns = r->set.sleep_interval_us * 1000u;
    unsigned spin_ns = r->set.spin_us * 1000u;
    unsigned flags = (r->set.sleep_mode == CW_RESIDENT_SLEEP_ADAPTIVE ? CW_RES_ADAPTIVE : 0u) |
                     (r->set.sync_with_host ? CW_RES_SYNC_HOST : 0u);
    unsigned long long watchdog_ns = fu->watchdog_ns;
    // The dataflow kernel takes the watchdog as a ninth argument.
    void *args[] = {&h, &d, &s, &user, &timeout_ns, &sleep_ns, &spin_ns, &flags, &watchdog_ns};
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    CUlaunchConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDimX = fu->grid;
    lc.gridDimY = lc.gridDimZ = 1;
    lc.blockDimX = fu->block;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = fu->shared;
    lc.hStream = r->run->cu;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    return on_stream(r->run, "cuLaunchKernelEx", [&] { return drv().cuLaunchKernelEx(&lc, fu->fn, args, nullptr); });
}

// The most dynamic shared memory a block of this device may have (opt-in).
cw_status max_shared(const cw_resident *r, int *out) {
    *out = 48 * 1024;
    int v = 0;
    if (drv().cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, r->ctx->device) ==
            CUDA_SUCCESS &&
        v > 0)
        *out = v;
    return CW_SUCCESS;
}

// Checks that the kernel k of module m fits (cooperative launch, shared
// memory, co-residency) and, with apply, makes r fused with it (plan: the
// dataflow mode's tables, taken over on success). Without apply nothing is
// allocated or kept (resident_check_fused).
cw_status fused_fit(cw_resident *r, const cw_resident_fused *f, uint32_t block, DataflowPlan *plan, cw_module *m,
                    cw_kernel *k, bool apply) {
    const uint32_t shared = plan ? plan->shared : f->shared_bytes;
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    CUfunction fn = nullptr;
    CW_CU(cuKernelGetFunction, (&fn, k->cu));
    int coop = 0;
    CW_CU(cuDeviceGetAttribute, (&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, r->ctx->device));
    if (!coop)
        return fail(CW_ERROR_NOT_SUPPORTED, "device %d does not support cooperative launch", r->ctx->ordinal);
    if (shared > 48u * 1024u) {
        int most = 0;
        CW_TRY(max_shared(r, &most));
        if (shared > (uint32_t)most) {
            if (plan) {
                uint32_t i = 0;
                while (i < plan->nstages && plan->geo[i].shared != shared) i++;
                if (i < plan->nstages)
                    return fail(CW_ERROR_INVALID_ARGUMENT,
                                "invalid argument: stage %u ('%s') asks %u bytes of shared memory; a block of device "
                                "%d has at most %d",
                                i, plan->names[i], shared, r->ctx->ordinal, most);
            }
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: %u bytes of shared memory a block; a block of device %d has at most %d",
                        shared, r->ctx->ordinal, most);
        }
        if (!drv().cuFuncSetAttribute)
            return fail(CW_ERROR_NOT_SUPPORTED, "more than 48 KiB of shared memory needs cuFuncSetAttribute");
        CW_CU(cuFuncSetAttribute, (fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared));
    }
    int per_sm = 0;
    CW_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, (&per_sm, fn, (int)block, (size_t)shared));
    const uint64_t max_grid = (uint64_t)(per_sm > 0 ? per_sm : 0) * r->ctx->sm_count;
    if (max_grid == 0) {
        int regs = 0;
        if (drv().cuFuncGetAttribute) (void)drv().cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: no block of %u threads with %u bytes of shared memory fits on an SM (the "
                    "kernel uses %d registers a thread: the stages' registers or shared memory)",
                    block, shared, regs);
    }
    const uint32_t max32 = max_grid > 0xffffffffull ? 0xffffffffu : (uint32_t)max_grid;
    if (f->grid_blocks > max32)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: a grid of %u blocks does not fit co-resident: at most %u (%d blocks of %u "
                    "threads an SM x %u SMs of the context)",
                    f->grid_blocks, max32, per_sm, block, r->ctx->sm_count);
    if (!apply) return guard.leave();
    const size_t sync_bytes = plan ? plan->state_bytes : kSyncBytes;
    Fused *fu = r->fused;
    if (!fu) {
        fu = static_cast<Fused *>(calloc(1, sizeof(Fused)));
        if (!fu) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        r->fused = fu;
    }
    if (!fu->sync || fu->sync_bytes != sync_bytes) {
        CUdeviceptr mem = 0;
        if (drv().cuMemAlloc(&mem, sync_bytes) != CUDA_SUCCESS)
            return fail(CW_ERROR_OUT_OF_MEMORY, "the fused loop's %s: out of device memory (%zu bytes)",
                        plan ? "counters" : "barrier", sync_bytes);
        if (fu->sync) drv().cuMemFree(fu->sync);
        fu->sync = mem;
        fu->sync_bytes = sync_bytes;
    }
    CW_TRY(guard.leave());
    if (fu->module) kernels::module_destroy(fu->module);
    dataflow_plan_free(&fu->plan);
    fu->module = m;
    fu->kernel = k;
    fu->fn = fn;
    // Grid 0: a barrier loop gets the most that fit; a dataflow loop one
    // block an SM (more would only wait for tiles), at most the most that fit.
    const uint32_t sms = r->ctx->sm_count ? r->ctx->sm_count : 1;
    fu->grid = f->grid_blocks ? f->grid_blocks : plan ? (sms < max32 ? sms : max32) : max32;
    fu->block = block;
    fu->shared = shared;
    fu->per_sm = (uint32_t)per_sm;
    fu->max_grid = max32;
    fu->stages = f->stage_count;
    fu->user = f->user;
    fu->dataflow = plan != nullptr;
    fu->watchdog_ns = !plan || f->watchdog_ms == UINT32_MAX ? 0ull
                                                             : (uint64_t)(f->watchdog_ms ? f->watchdog_ms : 5000u) * 1000000ull;
    if (plan) {
        fu->plan = *plan;
        memset(plan, 0, sizeof *plan);
    }
    r->dirty = true;
    return CW_SUCCESS;
}

}  // namespace

bool is_identifier(const char *s) {
    if (!s[0] || (s[0] >= '0' && s[0] <= '9')) return false;
    for (const char *c = s; *c; c++)
        if (!is_ident_char(*c)) return false;
    return true;
}

// Whether `word` occurs in text as a whole identifier.
bool has_word(const char *text, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        if ((p == text || !is_ident_char(p[-1])) && !is_ident_char(p[n])) return true;
    return false;
}

bool fused_prologue(Text *t, const char *source) {
    // resident_abi.h as NVRTC sees it: its include of the device header by
    // the in-memory name.
    static const char kAbiInclude[] = "#include \"../../include/cuweave/resident_device.h\"";
    const char *abi = kResidentAbiHeader;
    const char *inc = strstr(abi, kAbiInclude);
    if (!inc) return false;
    t->add("#include \"cuweave/resident_device.h\"\n");
    t->add(abi, (size_t)(inc - abi));
    t->add("#include \"cuweave/resident_device.h\"");
    t->add(inc + sizeof kAbiInclude - 1);
    t->add("\n#line 1 \"stages.cu\"\n");
    t->add(source);
    return true;
}

uint32_t fused_mode(const cw_resident_fused *f) {
    uint32_t m = 0;  // the raw value: a caller's mode need not be one of the enum's (loading it as one would be UB)
    memcpy(&m, &f->mode, sizeof m);
    return m;
}

const char *fused_kernel_name(const cw_resident_fused *f) {
    return fused_mode(f) == CW_FUSED_DATAFLOW ? "cwf_dataflow_loop" : "cwf_resident_loop";
}

cw_status fused_check_settings(const cw_resident_settings *s) {
    if (s->trace)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: settings.trace does not apply to a fused loop (it has no graph stages to "
                    "mark); turn it off");
    // AUTO (the default) resolves to off here; only an explicit request is refused.
    if (s->overlap != 0 && s->overlap != CW_RESIDENT_OVERLAP_AUTO)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: settings.overlap does not apply to a fused loop (one kernel: nothing to "
                    "overlap); leave it CW_RESIDENT_OVERLAP_AUTO or 0");
    return CW_SUCCESS;
}

cw_status fused_source(const cw_resident_fused *f, char **out) {
    if (fused_mode(f) == CW_FUSED_DATAFLOW) {
        DataflowPlan plan;
        CW_TRY(dataflow_plan(f, block_threads_of(f), &plan));
        cw_status st = dataflow_source(f, &plan, out);
        dataflow_plan_free(&plan);
        return st;
    }
    if (fused_mode(f) != CW_FUSED_BARRIER)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: mode %u is not a cw_fused_mode", fused_mode(f));
    if (f->stage_defs || f->in_flight || f->watchdog_ms)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: stage_defs, in_flight and watchdog_ms are for CW_FUSED_DATAFLOW (mode is "
                    "CW_FUSED_BARRIER)");
    if (!f->stages) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stages is NULL");
    for (uint32_t i = 0; i < f->stage_count; i++) {
        const char *name = f->stages[i];
        if (!name || !is_identifier(name))
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u's name %s%s%s is not an identifier", i,
                        name ? "'" : "", name ? name : "(NULL)", name ? "'" : "");
        if (!has_word(f->source, name))
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: stage %u, '%s', is not in the source (each stage is an extern \"C\" "
                        "__device__ void %s(cw_resident_ctl *ctl, void *user))",
                        i, name, name);
    }
    Text t;
    if (!fused_prologue(&t, f->source))
        return fail(CW_ERROR_INTERNAL, "the embedded resident_abi.h does not include the device header");
    t.add("\n#line 1 \"cuweave_fused_loop.cu\"\n");
    const char *mark = strstr(kLoop, "CWF_STAGES");
    t.add(kLoop, (size_t)(mark - kLoop));
    // Each stage's call and the grid barrier between it and the next,
    // appended piece by piece: a name has no length limit (a fixed line
    // once cut the barrier off). The last stage's end is the iteration's.
    for (uint32_t i = 0; i < f->stage_count; i++) {
        t.add("        ");
        t.add(f->stages[i]);
        t.add("((cw_resident_ctl *)d, user);\n");
        if (i + 1 < f->stage_count) t.add("        cwf_barrier(s, &target, 0u);\n");
    }
    t.add(mark + strlen("CWF_STAGES\n"));  // the marker's line, newline and all
    if (!t.ok) {
        free(t.s);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = t.s;
    return CW_SUCCESS;
}

cw_status fused_may_set(cw_resident *r) {
    settle_launch(r);
    if (resident_active(r))
        return fail(CW_ERROR_INVALID_STATE,
                    "the fused kernel is what the launched loop runs: tear the loop down before changing it");
    if (r->workload.set() || r->handler.set())
        return fail(CW_ERROR_INVALID_STATE,
                    "the loop has a %s: a fused loop has none (cw_resident_set_workload / set_handler NULL first)",
                    r->workload.set() ? "workload" : "data-ready handler");
    return fused_check_settings(&r->set);
}

namespace {
cw_status set_or_check(cw_resident *r, const cw_resident_fused *f, cw_module *m, cw_kernel *k, bool apply) {
    CW_TRY(fused_may_set(r));
    const uint32_t block = block_threads_of(f);
    if (!drv().cuOccupancyMaxActiveBlocksPerMultiprocessor || !drv().cuLaunchKernelEx || !drv().cuKernelGetFunction)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "the fused resident loop needs cooperative launch and the occupancy calculator (a CUDA 12.0 "
                    "driver or newer)");
    DataflowPlan plan;
    memset(&plan, 0, sizeof plan);
    const bool dataflow = fused_mode(f) == CW_FUSED_DATAFLOW;
    if (dataflow) CW_TRY(dataflow_plan(f, block, &plan));
    cw_status st = fused_fit(r, f, block, dataflow ? &plan : nullptr, m, k, apply);
    if (st != CW_SUCCESS || !apply) dataflow_plan_free(&plan);
    return st;
}
}  // namespace

cw_status resident_set_fused(cw_resident *r, const cw_resident_fused *f, cw_module *m, cw_kernel *k) {
    return set_or_check(r, f, m, k, true);
}

cw_status resident_check_fused(cw_resident *r, const cw_resident_fused *f, cw_module *m, cw_kernel *k) {
    return set_or_check(r, f, m, k, false);
}

cw_status resident_clear_fused(cw_resident *r) {
    settle_launch(r);
    if (resident_active(r))
        return fail(CW_ERROR_INVALID_STATE, "the loop is launched: tear it down before making it a graph loop again");
    if (r->fused && r->fused->module) {
        kernels::module_destroy(r->fused->module);
        r->fused->module = nullptr;
        r->fused->kernel = nullptr;
        r->fused->fn = nullptr;
    }
    r->dirty = true;
    return CW_SUCCESS;
}

bool is_fused(const cw_resident *r) { return r->fused && r->fused->module; }

cw_status fused_build(cw_resident *r) {
    // A trial run that stops at its first check (as build's): the first
    // launch in the context loads the code, which waits for running kernels.
    cw_res_host *h = r->host;
    __atomic_store_n(&h->stop, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&h->base, load_requested(r), __ATOMIC_RELAXED);
    __atomic_store_n(&h->epoch, r->epoch.load(std::memory_order_relaxed) + 1, __ATOMIC_RELEASE);
    CW_TRY(fused_start(r));
    CW_TRY(stream_synchronize(r->run));
    r->epoch.fetch_add(1, std::memory_order_release);
    if (r->exec) {
        exec_destroy(r->exec);
        r->exec = nullptr;
    }
    r->dirty = false;
    return CW_SUCCESS;
}

cw_status fused_launch(cw_resident *r) { return fused_start(r); }

void fused_free(cw_resident *r) {
    Fused *fu = r->fused;
    if (!fu) return;
    if (fu->module) kernels::module_destroy(fu->module);
    dataflow_plan_free(&fu->plan);
    if (fu->sync) {
        CurrentGuard guard;
        if (guard.enter(r->ctx->cu) == CW_SUCCESS) {
            drv().cuMemFree(fu->sync);
            (void)guard.leave();
        }
    }
    free(fu);
    r->fused = nullptr;
}

cw_status fused_info(cw_resident *r, cw_resident_info *info) {
    if (!is_fused(r)) return CW_SUCCESS;
    Fused *fu = r->fused;
    info->fused = 1;
    info->grid_blocks = fu->grid;
    info->block_threads = fu->block;
    info->max_grid_blocks = fu->max_grid;
    if (!fu->dataflow || info->exit != CW_RESIDENT_EXIT_STALLED) return CW_SUCCESS;
    // The stall's record: the launch has ended, its words are final.
    uint64_t words[8];
    CW_TRY(on_stream(r->stats, "cuMemcpyDtoHAsync", [&] {
        return drv().cuMemcpyDtoHAsync(words, fu->sync + CWF_W_STALL * 8u, sizeof words, r->stats->cu);
    }));
    CW_TRY(on_stream(r->stats, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(r->stats->cu); }));
    dataflow_stall(&fu->plan, words, __atomic_load_n(&r->host->base, __ATOMIC_ACQUIRE), &fu->stall, fu->stall_detail,
                   sizeof fu->stall_detail);
    info->stall = &fu->stall;
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
