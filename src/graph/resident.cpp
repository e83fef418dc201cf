// cuweave: the GPU-resident loop. One graph, launched once, that serves
// sequence-numbered requests on the GPU until it is torn down. The graph:
//
//   arm -> WHILE(loop) { unroll x [ poll -> (handler -> gate) -> IF(work) { workload -> signal } ] } -> exit
//
// The kernels are the library's own (ptx/cuweave_kernels.cu); the memory
// they share with this file is laid out in resident_abi.h.
#include <algorithm>
#include <new>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuweave/device.h"
#include "cuweave/resident.h"
#include "graph/graph.hpp"
#include "jit/jit.hpp"
#include "graph/resident_abi.h"
#include "testing/seam.h"
#include "core/vec.hpp"

static_assert(sizeof(cw_resident_ctl) == 64, "the public device block is 64 bytes");
static_assert(offsetof(cw_res_host, completed) == 64, "host and GPU words on separate cache lines");
static_assert(sizeof(cw_res_host) == 128, "the host block is two cache lines");
static_assert(offsetof(cw_res_host, stop) == 8, "the doorbell and the stop word are read in one 16-byte load");

namespace cw {
enum : uint32_t { kTagResident = 0x43575253u };  // "CWRS"
// A part of the iteration: a copy of a graph (added as a child node), or a
// function that enqueues the work while the build stream captures.
struct Part {
    cw_graph *graph;
    cw_resident_capture_fn fn;
    void *user;
    bool set() const { return graph || fn; }
};
// A traced stage (cw_resident_stage_begin): its name, and where it is.
struct Stage {
    char name[64];
    uint32_t copy;  // the copy of the iteration (0 .. unroll - 1)
    uint8_t part;   // 0 the workload, 1 the data-ready handler
    bool ended;     // its end was captured
};
constexpr uint32_t kMaxUnroll = 64;
constexpr uint32_t kMaxSleepUs = 1000000;
constexpr size_t kDropRanges = 8;
}  // namespace cw

struct cw_resident {
    uint32_t tag;
    cw_context *ctx;  // retained
    cw_resident_settings set;
    cw_stream *run;    // the loop runs here
    cw_stream *build;  // captures the loop's kernels
    cw_stream *stats;  // copies the statistics
    cw_res_host *host; // mapped host memory
    CUdeviceptr host_dev;
    CUdeviceptr dev;    // cw_res_dev
    CUdeviceptr input;  // input_slots * input_bytes
    cw::Part workload;  // what one iteration serves
    cw::Part handler;   // the data-ready handler (none: host requests)
    cw_graph_exec *exec;
    bool dirty;  // built graph out of date
    std::atomic<int> state;  // cw_resident_state
    uint32_t epoch;
    uint64_t base;  // requests made before this launch (served or dropped)
    std::atomic<uint64_t> launches;
    std::atomic<int> last_exit;
    // Requests dropped by teardowns, [lo, hi], the last kDropRanges of them.
    std::atomic<uint64_t> drop_lo[cw::kDropRanges], drop_hi[cw::kDropRanges];
    size_t drop_next;
    cw::IdleRelease idle;  // destroyed while other loops run: freed when they stop
    // Trace (settings.trace): the stages of the current build, and their
    // marks (two words each, mapped host memory, CW_RES_MAX_STAGES of them,
    // made at the first traced build).
    cw::Vec<cw::Stage> stages;
    unsigned long long *marks;
    CUdeviceptr marks_dev;
    bool building;        // inside build_into: the capture functions run
    uint32_t build_copy;  // the copy being built
    uint8_t build_part;   // the part being built (Stage::part)
};

namespace cw {
namespace {

inline bool resident_ok(const cw_resident *r) { return handle_live(r, kTagResident); }
void describe_open_stages(const cw_resident *r, char *buf, size_t len);

#define CW_CHECK_RESIDENT(r)                                                                 \
    do {                                                                                     \
        CW_CHECK_ARG((r) != NULL);                                                           \
        if (__builtin_expect(!resident_ok(r), 0))                                            \
            return fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_resident", #r);        \
    } while (0)

inline uint64_t load_completed(const cw_resident *r) {
    return __atomic_load_n(&r->host->completed, __ATOMIC_ACQUIRE);
}
inline uint64_t load_requested(const cw_resident *r) {
    return __atomic_load_n(&r->host->requested, __ATOMIC_ACQUIRE);
}
// The GPU has reported that the current launch's loop stopped.
inline bool gpu_exited(const cw_resident *r) {
    return __atomic_load_n(&r->host->exited_epoch, __ATOMIC_ACQUIRE) == r->epoch;
}

// An enum field as the caller stored it: C callers may store any int, and
// loading an out-of-range value as the C++ enum type is undefined.
template <class E>
unsigned raw_enum(const E &field) {
    static_assert(sizeof(E) == sizeof(unsigned), "C enums are int-sized");
    unsigned v;
    memcpy(&v, &field, sizeof v);
    return v;
}

cw_status check_settings(const cw_resident_settings *s) {
    CW_CHECK_ARG(s->sleep_interval_us <= kMaxSleepUs);
    CW_CHECK_ARG(s->spin_us <= kMaxSleepUs);
    CW_CHECK_ARG(raw_enum(s->sleep_mode) <= CW_RESIDENT_SLEEP_ADAPTIVE);
    CW_CHECK_ARG(raw_enum(s->gate) <= CW_RESIDENT_GATE_KERNELS);
    CW_CHECK_ARG(s->sync_with_host == 0 || s->sync_with_host == 1);
    CW_CHECK_ARG(s->input_slots <= 2);
    CW_CHECK_ARG(s->input_slots == 0 ? s->input_bytes == 0 : s->input_bytes > 0);
    CW_CHECK_ARG(s->unroll >= 1 && s->unroll <= kMaxUnroll);
    CW_CHECK_ARG(s->use_default_priority == 0 || s->use_default_priority == 1);
    CW_CHECK_ARG(s->overlap == 0 || s->overlap == 1);
    if (s->overlap && raw_enum(s->gate) != CW_RESIDENT_GATE_KERNELS)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: overlap needs gate CW_RESIDENT_GATE_KERNELS (an IF node between the "
                    "kernels breaks the chain of launches it overlaps)");
    CW_CHECK_ARG(s->trace == 0 || s->trace == 1);
    if (s->trace && s->overlap)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: trace and overlap cannot be combined (the marks trace adds between the "
                    "kernels would break the chain of launches overlap makes)");
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    return CW_SUCCESS;
}

// Records the requests a stopped launch did not serve.
void note_dropped(cw_resident *r) {
    const uint64_t lo = load_completed(r) + 1, hi = load_requested(r);
    if (hi < lo) return;
    const size_t i = r->drop_next++ % kDropRanges;
    r->drop_hi[i].store(0, std::memory_order_relaxed);  // no range while it changes
    r->drop_lo[i].store(lo, std::memory_order_relaxed);
    r->drop_hi[i].store(hi, std::memory_order_release);
}

bool was_dropped(const cw_resident *r, uint64_t seq) {
    for (size_t i = 0; i < kDropRanges; i++) {
        const uint64_t hi = r->drop_hi[i].load(std::memory_order_acquire);
        if (hi && seq <= hi && seq >= r->drop_lo[i].load(std::memory_order_relaxed)) return true;
    }
    return false;
}

// The launch stopped on the GPU and its stream is idle: records why.
void finish_stop(cw_resident *r, cw_resident_exit why) {
    note_dropped(r);
    context_note_resident(r->ctx->cu, -1);
    r->last_exit.store(why, std::memory_order_relaxed);
    r->state.store(CW_RESIDENT_STOPPED, std::memory_order_release);
}

cw_resident_exit exit_from_gpu(const cw_resident *r) {
    const unsigned reason = __atomic_load_n(&r->host->exit_reason, __ATOMIC_ACQUIRE);
    return reason == CW_RES_EXIT_TIMEOUT ? CW_RESIDENT_EXIT_TIMEOUT : CW_RESIDENT_EXIT_TEAR_DOWN;
}

// Waits up to timeout_ms for the loop's stream to be idle.
cw_status wait_idle(cw_resident *r, uint32_t timeout_ms) {
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
                        "workload is still running, or other work holds the GPU; the request to stop stays",
                        timeout_ms, (unsigned long long)load_requested(r), (unsigned long long)load_completed(r));
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

bool is_active(const cw_resident *r) {
    const int st = r->state.load(std::memory_order_acquire);
    return st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING;
}

// ---- trace: stages and their marks ----------------------------------------------

// Makes the marks (once) and clears them: a traced build starts with no
// stage begun.
cw_status trace_prepare(cw_resident *r) {
    const size_t bytes = 2 * sizeof(unsigned long long) * CW_RES_MAX_STAGES;
    if (!r->marks) {
        CurrentGuard guard;
        CW_TRY(guard.enter(r->ctx->cu));
        void *p = nullptr;
        CW_TRY(host_mapped_alloc(bytes, CU_MEMHOSTALLOC_PORTABLE, &p, &r->marks_dev));
        r->marks = static_cast<unsigned long long *>(p);  // zeroed
        return guard.leave();
    }
    memset(r->marks, 0, bytes);  // no loop runs while one builds
    return CW_SUCCESS;
}

// A new stage of this build, named (truncated to 63 bytes).
cw_status stage_new(cw_resident *r, const char *name, uint32_t *idx) {
    if (r->stages.size() >= CW_RES_MAX_STAGES)
        return fail(CW_ERROR_OUT_OF_MEMORY, "the resident loop traces at most %u stages a build (every copy of the "
                    "iteration counts; unroll is %u)", CW_RES_MAX_STAGES, r->set.unroll);
    Stage st;
    memset(&st, 0, sizeof st);
    snprintf(st.name, sizeof st.name, "%s", name);
    st.copy = r->build_copy;
    st.part = r->build_part;
    if (!r->stages.push(st)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    *idx = static_cast<uint32_t>(r->stages.size() - 1);
    return CW_SUCCESS;
}

// The arguments of the mark of stage idx (its begin, or its end): the
// loop's device block, and the stage's word.
struct MarkArgs {
    CUdeviceptr dev, mark;
    void *v[2];
    MarkArgs(const cw_resident *r, uint32_t idx, bool end)
        : dev(r->dev), mark(r->marks_dev + sizeof(unsigned long long) * (2ull * idx + (end ? 1 : 0))),
          v{&dev, &mark} {}
    MarkArgs(const MarkArgs &) = delete;
};

// Enqueues on s (capturing into the loop's graph) the mark of stage idx.
cw_status stage_mark(cw_resident *r, cw_stream *s, uint32_t idx, bool end) {
    cw_kernel *k = nullptr;
    CW_TRY(builtin_get(kResMark, &k));
    MarkArgs a(r, idx, end);
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    return cw_kernel_launch(k, s, &cfg, a.v);
}

// Appends to buf (len bytes, *at used), truncating.
__attribute__((format(printf, 4, 5))) void append(char *buf, size_t len, size_t *at, const char *fmt, ...) {
    if (*at >= len) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    *at = w < 0 ? len : *at + (size_t)w;
}

// With trace: " in stage 'x' (...)" for the stages that had begun and not
// ended when the loop faulted, the last begun first; "" without trace.
void describe_open_stages(const cw_resident *r, char *buf, size_t len) {
    buf[0] = 0;
    if (!r->set.trace || !r->marks) return;
    uint32_t open[4];
    unsigned long long began[4];
    size_t n = 0, total = 0;
    for (size_t i = 0; i < r->stages.size(); i++) {
        const unsigned long long b = __atomic_load_n(&r->marks[2 * i], __ATOMIC_ACQUIRE);
        const unsigned long long e = __atomic_load_n(&r->marks[2 * i + 1], __ATOMIC_ACQUIRE);
        if (b == 0 || b < e) continue;  // never begun, or ended since
        total++;
        // keep the four last begun, the latest first
        size_t at = n;
        if (n < 4)
            n++;
        else if (b <= began[3])
            continue;
        else
            at = 3;
        for (; at > 0 && began[at - 1] < b; at--) {
            began[at] = began[at - 1];
            open[at] = open[at - 1];
        }
        began[at] = b;
        open[at] = static_cast<uint32_t>(i);
    }
    size_t at = 0;
    if (total == 0) {
        append(buf, len, &at, ", in none of the traced stages (the loop's own kernels, or work outside every stage)");
        return;
    }
    const Stage &last = r->stages[open[0]];
    append(buf, len, &at, ", in stage '%s' (%s, copy %u of %u of the iteration", last.name,
           last.part ? "data-ready handler" : "workload", last.copy + 1, r->set.unroll);
    if (total > 1) {
        append(buf, len, &at, "; stages running, the last begun first:");
        for (size_t k = 0; k < n; k++) append(buf, len, &at, "%s '%s'", k ? "," : "", r->stages[open[k]].name);
        if (total > n) append(buf, len, &at, " and %zu more", total - n);
    }
    append(buf, len, &at, ")");
}

// ---- building the graph ---------------------------------------------------------

cw_status launch_into(cw_resident *r, cw_graph *g, int kernel, void **args) {
    cw_kernel *k = nullptr;
    CW_TRY(builtin_get(kernel, &k));
    CW_TRY(cw_capture_begin_to(r->build, g, CW_CAPTURE_THREAD_LOCAL));
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cw_status st = cw_kernel_launch(k, r->build, &cfg, args);
    cw_status end = cw_capture_end(r->build, nullptr);
    return st != CW_SUCCESS ? st : end;
}

// Adds a part (may be unset: nothing) after g's sinks.
cw_status add_part(cw_resident *r, cw_graph *g, const Part &part) {
    if (part.graph) {
        cw_graph_node *deps[8];
        size_t n = 0;
        CW_TRY(cw_graph_get_sinks(g, deps, 8, &n));
        if (n > 8) return fail(CW_ERROR_INTERNAL, "the resident graph has %zu sinks", n);
        return cw_graph_add_child(g, part.graph, deps, n, nullptr);
    }
    if (!part.fn) return CW_SUCCESS;
    CW_TRY(cw_capture_begin_to(r->build, g, CW_CAPTURE_THREAD_LOCAL));
    cw_status st = part.fn(r->build, part.user);
    if (st != CW_SUCCESS && cw_last_error()->status == CW_SUCCESS)
        st = fail(st, "the resident loop's capture function returned %s", cw_status_name(st));
    cw_status end = cw_capture_end(r->build, nullptr);
    return st != CW_SUCCESS ? st : end;
}

inline cw_status cu_check(CUresult r, const char *call) { return r == CUDA_SUCCESS ? CW_SUCCESS : fail_cu(r, call); }

// What overlap needs: the 12.3 edge API and programmatic dependent launch.
cw_status check_overlap(const cw_resident *r) {
    if (!drv().cuGraphNodeGetType || !drv().cuGraphNodeGetDependencies || !drv().cuGraphAddDependencies ||
        !drv().cuGraphRemoveDependencies)
        return fail(CW_ERROR_NOT_SUPPORTED, "overlap needs graph edge data (a CUDA 12.3 driver or newer)");
    int major = 0;
    CW_CU(cuDeviceGetAttribute, (&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r->ctx->device));
    if (major < 9)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "overlap needs compute capability 9.0 or newer (programmatic dependent launch); device %d "
                    "is %d.x",
                    r->ctx->ordinal, major);
    return CW_SUCCESS;
}

// Whether the loop's own kernels, as loaded for r's context, wait for the
// kernel before them (res_wait_previous: code compiled for compute 9.0 or
// newer; the checked-in compute 8.0 PTX has no such wait). Only then may the
// edges into them be programmatic.
cw_status own_kernels_wait(const cw_resident *r, bool *yes) {
    *yes = false;
    if (!drv().cuFuncGetAttribute || !drv().cuKernelGetFunction) return CW_SUCCESS;
    cw_kernel *k = nullptr;
    CW_TRY(builtin_get(kResSignal, &k));
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    int ptx = 0;
    CW_CU(cuFuncGetAttribute, (&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    *yes = ptx >= 90;
    return guard.leave();
}

// The loop's own kernel nodes in the WHILE body (poll, gate, signal per
// iteration): overlap leaves the edges into them as they are unless their
// code waits for the kernel before them (own_kernels_wait).
struct OwnNodes {
    CUgraphNode v[3 * kMaxUnroll];
    size_t n;
    bool has(CUgraphNode x) const {
        for (size_t i = 0; i < n; i++)
            if (v[i] == x) return true;
        return false;
    }
};

// Records the node just captured into g (its only sink).
cw_status note_own(cw_graph *g, OwnNodes *own) {
    cw_graph_node *sink = nullptr;
    size_t n = 0;
    CW_TRY(cw_graph_get_sinks(g, &sink, 1, &n));
    if (n != 1 || own->n == sizeof own->v / sizeof own->v[0])
        return fail(CW_ERROR_INTERNAL, "the resident graph has %zu sinks after one of its kernels", n);
    own->v[own->n++] = reinterpret_cast<CUgraphNode>(sink);
    return CW_SUCCESS;
}

// Overlap: every ordinary edge from a kernel node into a workload or
// handler kernel node (and, when own_wait, into the loop's own kernels)
// becomes programmatic, from the launch-order port: the kernel is launched
// once the one before it has started, and waits for it on the GPU
// (cw_resident_wait, res_wait_previous).
cw_status overlap_edges(CUgraph body, const OwnNodes &own, bool own_wait) {
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (body, nullptr, &count));
    CUgraphNode *nodes = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    CUgraphNode *deps = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    CUgraphEdgeData *edges = static_cast<CUgraphEdgeData *>(calloc(count ? count : 1, sizeof(CUgraphEdgeData)));
    cw_status st = nodes && deps && edges ? CW_SUCCESS : fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st == CW_SUCCESS) st = cu_check(drv().cuGraphGetNodes(body, nodes, &count), "cuGraphGetNodes");
    for (size_t i = 0; st == CW_SUCCESS && i < count; i++) {
        CUgraphNode to = nodes[i];
        CUgraphNodeType type = 0;
        st = cu_check(drv().cuGraphNodeGetType(to, &type), "cuGraphNodeGetType");
        if (st != CW_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL || (!own_wait && own.has(to))) continue;
        size_t nd = count;
        st = cu_check(drv().cuGraphNodeGetDependencies(to, deps, edges, &nd), "cuGraphNodeGetDependencies");
        for (size_t k = 0; st == CW_SUCCESS && k < nd && k < count; k++) {
            CUgraphNodeType from_type = 0;
            st = cu_check(drv().cuGraphNodeGetType(deps[k], &from_type), "cuGraphNodeGetType");
            if (st != CW_SUCCESS || from_type != CU_GRAPH_NODE_TYPE_KERNEL ||
                edges[k].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
                continue;
            CUgraphEdgeData prog;
            memset(&prog, 0, sizeof prog);
            prog.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
            prog.from_port = CW_KERNEL_NODE_PORT_LAUNCH_ORDER;
            st = cu_check(drv().cuGraphRemoveDependencies(body, &deps[k], &to, &edges[k], 1),
                          "cuGraphRemoveDependencies");
            if (st == CW_SUCCESS)
                st = cu_check(drv().cuGraphAddDependencies(body, &deps[k], &to, &prog, 1), "cuGraphAddDependencies");
        }
    }
    free(nodes);
    free(deps);
    free(edges);
    return st;
}

// Captures the mark of stage idx (its begin, or its end) into g, after
// its sinks.
cw_status mark_into(cw_resident *r, cw_graph *g, uint32_t idx, bool end) {
    MarkArgs a(r, idx, end);
    return launch_into(r, g, kResMark, a.v);
}

// Adds a part; with trace, inside a stage named after it (the stages its
// capture function begins nest in that one).
cw_status add_traced_part(cw_resident *r, cw_graph *g, const Part &part, uint8_t which, uint32_t copy) {
    if (!part.set()) return CW_SUCCESS;
    r->build_part = which;
    r->build_copy = copy;
    if (!r->set.trace) return add_part(r, g, part);
    uint32_t idx = 0;
    CW_TRY(stage_new(r, which ? "handler" : "workload", &idx));
    CW_TRY(mark_into(r, g, idx, false));
    CW_TRY(add_part(r, g, part));
    // A stage left open would look like the one running at every later fault.
    for (size_t j = idx + 1; j < r->stages.size(); j++)
        if (!r->stages[j].ended)
            return fail(CW_ERROR_INVALID_STATE,
                        "the %s's capture function began stage '%s' and did not end it (cw_resident_stage_end)",
                        which ? "data-ready handler" : "workload", r->stages[j].name);
    r->stages[idx].ended = true;
    return mark_into(r, g, idx, true);
}

cw_status build_into(cw_resident *r, cw_graph *top) {
    cw_res_host *h = reinterpret_cast<cw_res_host *>(r->host_dev);
    cw_res_dev *d = reinterpret_cast<cw_res_dev *>(r->dev);
    const bool handler = r->handler.set();
    const bool gate_node = r->set.gate == CW_RESIDENT_GATE_NODE;
    unsigned long long timeout_ns = (unsigned long long)r->set.timeout_ms * 1000000ull;
    unsigned sleep_ns = r->set.sleep_interval_us * 1000u;
    unsigned spin_ns = r->set.spin_us * 1000u;
    unsigned flags = (r->set.sleep_mode == CW_RESIDENT_SLEEP_ADAPTIVE ? CW_RES_ADAPTIVE : 0u) |
                     (handler ? CW_RES_HANDLER : 0u) | (r->set.sync_with_host ? CW_RES_SYNC_HOST : 0u) |
                     (gate_node ? 0u : CW_RES_GATE_KERNELS);

    if (r->set.overlap) CW_TRY(check_overlap(r));
    cw_cond_handle loop = 0;
    CW_TRY(cw_graph_cond_create(top, 1, CW_COND_RESET_EACH_LAUNCH, &loop));
    void *arm_args[] = {&h, &d};
    CW_TRY(launch_into(r, top, kResArm, arm_args));
    cw_graph_node *sink = nullptr;
    size_t n = 0;
    CW_TRY(cw_graph_get_sinks(top, &sink, 1, &n));
    cw_cond_settings cs;
    cw_cond_settings_default(&cs);
    cs.type = CW_COND_WHILE;
    cw_graph *body = nullptr;
    CW_TRY(cw_graph_add_conditional(top, loop, &cs, &sink, 1, nullptr, &body, nullptr));
    cs.type = CW_COND_IF;
    OwnNodes own;
    own.n = 0;
    for (uint32_t i = 0; i < r->set.unroll; i++) {
        // Gated by kernels the handle is never set: the kernels take it all the same.
        cw_cond_handle work = 0;
        if (gate_node) CW_TRY(cw_graph_cond_create(body, 0, 0, &work));
        void *poll_args[] = {&h, &d, &loop, &work, &timeout_ns, &sleep_ns, &spin_ns, &flags};
        CW_TRY(launch_into(r, body, kResPoll, poll_args));
        if (r->set.overlap) CW_TRY(note_own(body, &own));
        if (handler) {
            CW_TRY(add_traced_part(r, body, r->handler, 1, i));
            void *gate_args[] = {&d, &work, &flags};
            CW_TRY(launch_into(r, body, kResGate, gate_args));
            if (r->set.overlap) CW_TRY(note_own(body, &own));
        }
        cw_graph *then = body;
        if (gate_node) {
            CW_TRY(cw_graph_get_sinks(body, &sink, 1, &n));
            CW_TRY(cw_graph_add_conditional(body, work, &cs, &sink, 1, nullptr, &then, nullptr));
        }
        CW_TRY(add_traced_part(r, then, r->workload, 0, i));
        void *signal_args[] = {&h, &d, &flags};
        CW_TRY(launch_into(r, then, kResSignal, signal_args));
        if (r->set.overlap && then == body) CW_TRY(note_own(body, &own));
    }
    if (r->set.overlap) {
        bool own_wait = false;
        CW_TRY(own_kernels_wait(r, &own_wait));
        CW_TRY(overlap_edges(body->cu, own, own_wait));
        log(CW_LOG_DEBUG, "cuweave: resident loop overlap: the workload's kernels%s",
            own_wait ? " and the loop's own" : " (the loop's own kernels were not compiled for 9.0: not them)");
    }
    void *exit_args[] = {&h, &d};
    return launch_into(r, top, kResExit, exit_args);
}

cw_status build(cw_resident *r) {
    if (r->set.trace) CW_TRY(trace_prepare(r));
    r->stages.clear();
    cw_graph *top = nullptr;
    CW_TRY(cw_graph_create(&top, r->ctx));
    cw_graph_exec *exec = nullptr;
    r->building = true;
    cw_status st = build_into(r, top);
    r->building = false;
    if (st != CW_SUCCESS) capture_abandon(r->build);  // a capture a failed call left open
    if (st == CW_SUCCESS) st = cw_graph_instantiate(&exec, top, 0);
    cw_graph_destroy(&top);
    if (st == CW_SUCCESS) st = cw_graph_exec_upload(exec, r->run);
    if (st != CW_SUCCESS) {
        cw_graph_exec_destroy(&exec);
        return st;
    }
    // A trial run that stops at its first poll: the driver loads code into
    // a context lazily, at the first launch, and loading waits until no
    // kernel runs on the device; once this loop or another runs, that is
    // never. Run once now, everything is loaded.
    cw_res_host *h = r->host;
    __atomic_store_n(&h->stop, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&h->base, load_requested(r), __ATOMIC_RELAXED);
    __atomic_store_n(&h->epoch, r->epoch + 1, __ATOMIC_RELEASE);
    st = cw_graph_exec_launch(exec, r->run);
    if (st == CW_SUCCESS)
        st = on_stream(r->run, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(r->run->cu); });
    if (st != CW_SUCCESS) {
        cw_graph_exec_destroy(&exec);
        return st;
    }
    r->epoch += 1;
    cw_graph_exec_destroy(&r->exec);
    r->exec = exec;
    r->dirty = false;
    return CW_SUCCESS;
}

// Keeps a copy of g (as a graph holding it as a child) or fn as *part.
cw_status set_part(cw_resident *r, const cw_graph *g, cw_resident_capture_fn fn, void *user, Part *part) {
    cw_graph *copy = nullptr;
    if (g) {
        if (g->ctx->cu != r->ctx->cu)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: the graph belongs to another context than the resident loop's");
        CW_TRY(cw_graph_create(&copy, r->ctx));
        cw_status st = cw_graph_add_child(copy, g, nullptr, 0, nullptr);
        if (st != CW_SUCCESS) {
            cw_graph_destroy(&copy);
            return st;
        }
    }
    cw_graph_destroy(&part->graph);
    part->graph = copy;
    part->fn = fn;
    part->user = fn ? user : nullptr;
    r->dirty = true;
    return CW_SUCCESS;
}

// ---- creation and destruction -------------------------------------------------------

void resident_free(cw_resident *r) {
    cw_graph_exec_destroy(&r->exec);
    cw_graph_destroy(&r->workload.graph);
    cw_graph_destroy(&r->handler.graph);
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
    free(r);
    if (ctx) context_release(ctx);
}

// Frees r now, or, while any resident loop runs, once none does: freeing
// its memory and its graph would wait for those loops to end.
void resident_release(cw_resident *r) {
    handle_retire(r);
    r->idle.run = [](void *owner) { resident_free(static_cast<cw_resident *>(owner)); };
    r->idle.owner = r;
    release_when_idle(&r->idle);
}

cw_status alloc_memory(cw_resident *r) {
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    void *p = nullptr;
    CW_TRY(host_mapped_alloc(4096, CU_MEMHOSTALLOC_PORTABLE, &p, &r->host_dev));
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

}  // namespace
}  // namespace cw

using namespace cw;

extern "C" {

CW_API void cw_resident_settings_default(cw_resident_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->timeout_ms = 0;
    s->sleep_interval_us = 500;
    s->sleep_mode = CW_RESIDENT_SLEEP_FIXED;
    s->spin_us = 200;
    s->sync_with_host = 0;
    s->input_slots = 0;
    s->input_bytes = 0;
    s->unroll = 16;
    s->gate = CW_RESIDENT_GATE_NODE;
    s->priority = 0;
    s->use_default_priority = 1;
    s->destroy_timeout_ms = 5000;
}

CW_API cw_status cw_resident_create(cw_resident **out, cw_context *ctx, const cw_resident_settings *settings) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
    cw_resident_settings def;
    cw_resident_settings_default(&def);
    const cw_resident_settings *s = settings ? settings : &def;
    CW_TRY(check_settings(s));
    CW_TRY(ensure_init());
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
        st = builtin_get(kResPoll, &k);
    }
    if (st != CW_SUCCESS) {
        resident_release(r);
        return st;
    }
    room.publish(r, kTagResident);
    *out = r;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_destroy(cw_resident **pr) {
    CW_ENTRY;
    if (!pr || !*pr) return CW_SUCCESS;
    cw_resident *r = *pr;
    CW_CHECK_RESIDENT(r);
    if (is_active(r)) {
        __atomic_store_n(&r->host->stop, 1u, __ATOMIC_RELEASE);
        r->state.store(CW_RESIDENT_STOPPING, std::memory_order_release);
        cw_status st = wait_idle(r, r->set.destroy_timeout_ms);
        if (st == CW_ERROR_TIMEOUT) return st;  // the GPU may still use it all: keep it
    }
    resident_release(r);
    *pr = nullptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_configure(cw_resident *r, const cw_resident_settings *settings) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(settings != NULL);
    CW_TRY(check_settings(settings));
    if (settings->input_slots != r->set.input_slots || settings->input_bytes != r->set.input_bytes)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: input_slots and input_bytes are fixed when the loop is made");
    if (settings->use_default_priority != r->set.use_default_priority ||
        (!settings->use_default_priority && settings->priority != r->set.priority))
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the priority is fixed when the loop is made");
    settle(r);
    if (is_active(r))
        return fail(CW_ERROR_INVALID_STATE,
                    "the settings are built into the loop's graph at launch: tear the loop down "
                    "(cw_resident_tear_down) before changing them");
    r->set = *settings;
    r->dirty = true;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_settings(const cw_resident *r, cw_resident_settings *settings) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(settings != NULL);
    *settings = r->set;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_context(const cw_resident *r, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = r->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_ctl(const cw_resident *r, unsigned long long *ctl) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(ctl != NULL);
    *ctl = r->dev;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_input(const cw_resident *r, uint32_t slot, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(dptr != NULL);
    if (slot >= r->set.input_slots)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: input slot %u of a loop with %u slots", slot,
                    r->set.input_slots);
    *dptr = r->input + (unsigned long long)slot * r->set.input_bytes;
    return CW_SUCCESS;
}

static cw_status set_part_checked(cw_resident *r, const cw_graph *g, cw_resident_capture_fn fn, void *user,
                                  Part *part, const char *what) {
    settle(r);
    if (is_active(r))
        return fail(CW_ERROR_INVALID_STATE, "the %s is built into the loop's graph at launch: tear the loop down first",
                    what);
    return set_part(r, g, fn, user, part);
}

CW_API cw_status cw_resident_set_workload(cw_resident *r, const cw_graph *workload) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    if (workload) CW_CHECK_GRAPH(workload);
    return set_part_checked(r, workload, nullptr, nullptr, &r->workload, "workload");
}

CW_API cw_status cw_resident_set_handler(cw_resident *r, const cw_graph *handler) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    if (handler) CW_CHECK_GRAPH(handler);
    return set_part_checked(r, handler, nullptr, nullptr, &r->handler, "data-ready handler");
}

CW_API cw_status cw_resident_set_workload_fn(cw_resident *r, cw_resident_capture_fn fn, void *user) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    return set_part_checked(r, nullptr, fn, user, &r->workload, "workload");
}

CW_API cw_status cw_resident_set_handler_fn(cw_resident *r, cw_resident_capture_fn fn, void *user) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    return set_part_checked(r, nullptr, fn, user, &r->handler, "data-ready handler");
}

// Refuses a launched loop (with `launched`), else builds when something changed.
static cw_status build_unless_launched(cw_resident *r, const char *launched) {
    settle(r);
    if (is_active(r)) return fail(CW_ERROR_INVALID_STATE, "%s", launched);
    if (r->dirty || !r->exec) {
        // Instantiating loads code; replacing an old build destroys a graph
        // with conditional nodes: both wait for running loops to end.
        CW_TRY(refuse_load_while_resident("building a resident loop's graph"));
        CW_TRY(build(r));
    }
    return CW_SUCCESS;
}

// Shared checks of the stage calls: 1 in *traced when marks are to be made.
static cw_status stage_checks(cw_resident *r, cw_stream *s, bool *traced) {
    *traced = false;
    if (!r->set.trace) return CW_SUCCESS;
    if (!r->building)
        return fail(CW_ERROR_INVALID_STATE,
                    "stages are begun and ended inside the loop's capture functions, while it builds");
    if (s->ctx->cu != r->ctx->cu || !capturing(s))
        return fail(CW_ERROR_INVALID_STATE,
                    "s is not capturing into the resident loop's graph (use the capture function's stream, or "
                    "one forked from it)");
    *traced = true;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(name != NULL && name[0] != 0);
    CW_CHECK_ARG(stage != NULL);
    *stage = CW_RESIDENT_NO_STAGE;
    bool traced = false;
    CW_TRY(stage_checks(r, s, &traced));
    if (!traced) return CW_SUCCESS;
    uint32_t idx = 0;
    CW_TRY(stage_new(r, name, &idx));
    cw_status st = stage_mark(r, s, idx, false);
    if (st != CW_SUCCESS) {
        r->stages.pop();  // never begun
        return st;
    }
    *stage = idx;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_stage_end(cw_resident *r, cw_stream *s, uint32_t stage) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_STREAM(s);
    if (stage == CW_RESIDENT_NO_STAGE) return CW_SUCCESS;
    bool traced = false;
    CW_TRY(stage_checks(r, s, &traced));
    if (!traced || stage >= r->stages.size() || r->stages[stage].ended)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u was not begun in this build%s", stage,
                    traced && stage < r->stages.size() ? " or has ended already" : "");
    CW_TRY(stage_mark(r, s, stage, true));
    r->stages[stage].ended = true;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_build(cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    return build_unless_launched(r, "the loop is launched: its graph is built (tear it down to rebuild)");
}

CW_API cw_status cw_resident_launch(cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_TRY(build_unless_launched(r, "the loop is launched already (tear it down before launching again)"));
    // Every request made so far has been served or dropped: this launch
    // starts after them.
    cw_res_host *h = r->host;
    const uint64_t base = load_requested(r);
    __atomic_store_n(&h->stop, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&h->base, base, __ATOMIC_RELAXED);
    __atomic_store_n(&h->epoch, r->epoch + 1, __ATOMIC_RELEASE);
    // The stream (and the driver's submission) orders these stores before the GPU reads them.
    cw_status st = cw_graph_exec_launch(r->exec, r->run);
    if (st != CW_SUCCESS) return st;
    r->epoch += 1;
    r->base = base;
    context_note_resident(r->ctx->cu, +1);
    r->launches.fetch_add(1, std::memory_order_relaxed);
    r->last_exit.store(CW_RESIDENT_EXIT_NONE, std::memory_order_relaxed);
    r->state.store(CW_RESIDENT_RUNNING, std::memory_order_release);
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_is_launched(const cw_resident *r, int *launched) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(launched != NULL);
    *launched = is_active(r) && !gpu_exited(r);
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_data_ready(cw_resident *r, uint64_t *seq) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    if (__builtin_expect(r->state.load(std::memory_order_acquire) != CW_RESIDENT_RUNNING, 0))
        return fail(CW_ERROR_INVALID_STATE, "the resident loop is not running (launch it first)");
    if (__builtin_expect(r->handler.set(), 0))
        return fail(CW_ERROR_INVALID_STATE,
                    "this loop's requests come from its data-ready handler; the host cannot add any");
    const uint64_t s = __atomic_add_fetch(&r->host->requested, 1, __ATOMIC_SEQ_CST);
    if (seq) *seq = s;
    return CW_SUCCESS;
}

// Shared by result_ready and wait_result: 1 done, 0 not yet, or an error.
static cw_status check_result(const cw_resident *r, uint64_t seq, int *ready) {
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
    if (!is_active(r) || gpu_exited(r))
        return fail(CW_ERROR_INVALID_STATE, "the resident loop stopped before serving request %llu (served: %llu)",
                    (unsigned long long)seq, (unsigned long long)load_completed(r));
    return CW_SUCCESS;
}

// A running loop whose stream reports an error has faulted: name the stage
// (the request it was serving). Asked by waits that have waited a while.
static cw_status check_fault(const cw_resident *r) {
    if (!is_active(r)) return CW_SUCCESS;
    CUresult q = drv().cuStreamQuery(r->run->cu);
    if (q == CUDA_SUCCESS || q == CUDA_ERROR_NOT_READY) return CW_SUCCESS;
    const unsigned long long served = (unsigned long long)load_completed(r);
    // the request being served: after the last finished one, and after
    // those a teardown dropped before this launch
    const unsigned long long serving = (served > r->base ? served : (unsigned long long)r->base) + 1;
    char where[384];
    describe_open_stages(r, where, sizeof where);
    cw_status st = fail_cu(q, "cuStreamQuery", "the resident loop's stream");
    return fail(st, "the resident loop faulted while serving request %llu%s (requests finished: %llu%s): %s",
                serving, where[0] ? where : " (its workload or data-ready handler)", served,
                r->set.trace ? "" : "; cw_resident_settings.trace names the stage", cw_last_error()->cu_name);
}

CW_API cw_status cw_resident_result_ready(const cw_resident *r, uint64_t seq, int *ready) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(ready != NULL);
    if (__builtin_expect(load_completed(r) >= seq && seq != 0 && !was_dropped(r, seq), 1)) {
        *ready = 1;
        return CW_SUCCESS;
    }
    return check_result(r, seq, ready);
}

CW_API cw_status cw_resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
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

CW_API cw_status cw_resident_next_input(cw_resident *r, uint32_t timeout_ms, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(dptr != NULL);
    if (r->set.input_slots == 0) return fail(CW_ERROR_INVALID_STATE, "the loop has no input slots (input_slots 0)");
    if (!is_active(r)) return fail(CW_ERROR_INVALID_STATE, "the resident loop is not running (launch it first)");
    const uint64_t next = load_requested(r) + 1;
    const uint64_t slots = r->set.input_slots;
    // The request that used this slot before must have finished (or been
    // made before this launch: served or dropped).
    if (next > slots) {
        const uint64_t before = next - slots;
        if (before > r->base && load_completed(r) < before) CW_TRY(cw_resident_wait_result(r, before, timeout_ms));
    }
    *dptr = r->input + ((next - 1) % slots) * r->set.input_bytes;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_tear_down(cw_resident *r, uint32_t timeout_ms) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    if (!is_active(r)) return CW_SUCCESS;
    __atomic_store_n(&r->host->stop, 1u, __ATOMIC_RELEASE);
    r->state.store(CW_RESIDENT_STOPPING, std::memory_order_release);
    return wait_idle(r, timeout_ms);
}

CW_API cw_status cw_resident_get_state(const cw_resident *r, cw_resident_state *state) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(state != NULL);
    int st = r->state.load(std::memory_order_acquire);
    if ((st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING) && gpu_exited(r)) st = CW_RESIDENT_STOPPED;
    *state = static_cast<cw_resident_state>(st);
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_stats(cw_resident *r, cw_resident_stats *stats) {
    CW_ENTRY;
    CW_CHECK_RESIDENT(r);
    CW_CHECK_ARG(stats != NULL);
    cw_res_dev d;  // 16.5 KB on the stack: no allocation, and each thread has its own
    CW_TRY(on_stream(r->stats, "cuMemcpyDtoHAsync",
                     [&] { return drv().cuMemcpyDtoHAsync(&d, r->dev, sizeof d, r->stats->cu); }));
    CW_TRY(on_stream(r->stats, "cuStreamSynchronize", [&] { return drv().cuStreamSynchronize(r->stats->cu); }));
    cw_resident_stats o;
    memset(&o, 0, sizeof o);
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
    *stats = o;
    return CW_SUCCESS;
}

CW_API const char *cw_resident_device_header(void) { return kResidentDeviceHeader; }

}  // extern "C"

int cwi_resident_trace(cw_resident *r, volatile unsigned long long **marks, unsigned *stages) {
    if (!r || !cw::handle_live(r, cw::kTagResident) || !r->marks) return -1;
    *marks = r->marks;
    *stages = static_cast<unsigned>(r->stages.size());
    return 0;
}
