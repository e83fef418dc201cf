/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: the GPU-resident loop. One graph, launched once, that
// serves sequence-numbered requests on the GPU until it is torn down:
//
//   arm -> WHILE(loop) { unroll x [ poll -> (handler -> gate) -> IF(work) { workload -> signal } ] } -> exit
//   gate BEGIN_END: arm -> WHILE(loop) { unroll x [ workload ] -> loop } -> exit
//
// The kernels are the library's own (ptx/cuweave_kernels.cu); the memory
// they share with the host is laid out in resident_abi.h. The code:
// resident_loop.cpp (lifecycle, the doorbell, results, stopping),
// resident_build.cpp (the graph), resident_trace.cpp (stages and the fault
// message).
#pragma once

#include <atomic>
#include <mutex>

#include "base/text.hpp"
#include "base/vec.hpp"
#include "core/idle.hpp"
#include "cuweave/resident.h"
#include "graph/graph.hpp"
#include "graph/fused_dataflow.h"
#include "graph/resident_abi.h"

namespace cw {
namespace graphs {
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
// Set in the doorbell (cw_res_host.requested) once a launch has stopped:
// the requests it took are final, and cw_resident_data_ready refuses more.
constexpr uint64_t kDoorbellClosed = 1ull << 63;
// Requests a stopped launch took and did not serve, lo..hi.
struct DropRange {
    uint64_t lo, hi;
};
// Fused persistent mode (resident_fused.cpp): the loop's own kernel, made
// from the caller's stages. module NULL: a graph loop (the barrier's memory
// is kept for a later set).
// The tile dataflow mode's tables (resident_dataflow.cpp), as the kernel
// gets them (fused_dataflow.h's types), and what the host keeps of the
// stages: names (for messages), geometry.
struct DataflowGeo {
    uint32_t size_x, size_y, tile_x, tile_y;  // tile_x 0: a stage given as a count of tiles
    uint32_t threads, shared;
};
struct DataflowPlan {
    cwf_df_stage *stages;
    cwf_df_chain *chains;
    cwf_df_dep *deps;
    DataflowGeo *geo;
    char **names;  // the stages'
    char **fns;    // the dependency functions', nfns of them
    uint32_t nstages, nchains, ndeps, nfns;
    uint32_t tasks, tiles, alls, in_flight;
    uint32_t final;   // the last chain's one task signals (fused_dataflow.h)
    uint32_t block;   // threads a block
    uint32_t shared;  // the kernel's dynamic shared memory: the most a stage (or the loop) asks
    size_t state_bytes;
};
struct Fused {
    cw_module *module;  // owned
    cw_kernel *kernel;  // cwf_resident_loop or cwf_dataflow_loop
    CUfunction fn;      // in the loop's context
    CUdeviceptr sync;   // the grid barrier's words (sync_bytes; dataflow: the protocol's state)
    size_t sync_bytes;
    CUdeviceptr user;
    uint32_t grid, block, shared, stages;
    uint32_t per_sm, max_grid;  // co-resident blocks an SM holds; times the context's SMs
    bool dataflow;
    uint64_t watchdog_ns;      // dataflow: 0 none
    DataflowPlan plan;         // dataflow (names for the stall's message)
    cw_resident_stall stall;   // the last stall read (cw_resident_info.stall)
    char stall_detail[512];
};
}  // namespace graphs

// The text of src/graph/resident_abi.h (embedded by tools/embed.py).
extern const char kResidentAbiHeader[];

// The text of include/cuweave/resident_device.h (embedded by tools/embed.py).
extern const char kResidentDeviceHeader[];

// The text of src/graph/fused_dataflow.h (embedded by tools/embed.py).
extern const char kFusedDataflowHeader[];

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
    cw::graphs::Part workload;  // what one iteration serves
    cw::graphs::Part handler;   // the data-ready handler (none: host requests)
    cw_graph_exec *exec;
    bool dirty;  // built graph out of date
    std::atomic<int> state;  // cw_resident_state
    // Written by launch (and build's trial run), read by any thread
    // (cw_resident_get_state, results) while it runs: atomics.
    std::atomic<uint32_t> epoch;
    std::atomic<uint64_t> base;  // numbers used before this launch (served or dropped)
    std::atomic<uint64_t> launches;
    std::atomic<int> last_exit;
    // Every launch takes the numbers after those of the launches before it
    // (base, then up to the doorbell or the last served when it stops): a
    // request is ready when served and not in a range a stopped launch
    // dropped. All the ranges are kept, ascending, under drop_mutex (room for
    // one more is made at launch, so recording one never fails); drop_max,
    // the highest dropped number (0: none), lets readers of later requests
    // skip the lock.
    mutable std::mutex drop_mutex;
    cw::Vec<cw::graphs::DropRange> drops;
    std::atomic<uint64_t> drop_max;
    cw::core::IdleRelease idle;  // destroyed while other loops run: freed when they stop
    cw_resident *abandoned_next;  // destroyed while it would not stop: the list of those
    // Trace (settings.trace): the stages of the current build, and their
    // marks (two words each, mapped host memory, CW_RES_MAX_STAGES of them,
    // made at the first traced build).
    cw::Vec<cw::graphs::Stage> stages;
    unsigned long long *marks;
    CUdeviceptr marks_dev;
    cw::graphs::Fused *fused;  // fused persistent mode (NULL until first set)
    bool building;        // inside build_into: the capture functions run
    uint32_t build_copy;  // the copy being built
    uint8_t build_part;   // the part being built (Stage::part)
    // What the last build chose (gate and overlap AUTO resolved), and why it
    // fell back where it did (cw_resident_info).
    bool built;
    cw_resident_gate gate_used;
    int overlap_used;
    cw_resident_fallback fallback;
    char fallback_detail[256];
};

namespace cw {
namespace graphs {

// ---- the loop (resident_loop.cpp) ----
// Settings are checked by the caller (cw_resident_create, cw_resident_configure).
cw_status resident_create(cw_context *ctx, const cw_resident_settings *s, cw_resident **out);
// Stops a running loop first (destroy_timeout_ms), then frees it; one that
// does not stop in time is abandoned (logged; freed once seen stopped).
void resident_destroy(cw_resident *r);
cw_status resident_configure(cw_resident *r, const cw_resident_settings *s);
// The workload (handler false) or the data-ready handler: a copy of g, or a
// capture function; neither: none.
cw_status resident_set_part(cw_resident *r, bool handler, const cw_graph *g, cw_resident_capture_fn fn, void *user);
cw_status resident_build(cw_resident *r);
cw_status resident_launch(cw_resident *r);
cw_status resident_data_ready(cw_resident *r, uint64_t *seq);
// CW_SUCCESS when request seq has finished, CW_ERROR_NOT_READY (no detail)
// when not yet, or why it never will.
cw_status resident_poll_result(const cw_resident *r, uint64_t seq);
cw_status resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms);
cw_status resident_next_input(cw_resident *r, uint32_t timeout_ms, CUdeviceptr *dptr);
cw_status resident_tear_down(cw_resident *r, uint32_t timeout_ms);
cw_resident_state resident_state(const cw_resident *r);
cw_status resident_info(cw_resident *r, cw_resident_info *info);

// ---- trace (resident_trace.cpp) ----
// A stage begun and ended by a capture function on a stream capturing into
// the loop's graph (stage CW_RESIDENT_NO_STAGE when the loop does not trace).
cw_status resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage);
cw_status resident_stage_end(cw_resident *r, cw_stream *s, uint32_t stage);
// The marks (two words a stage) and the stages of the last build; false
// before the first traced build (tests).
bool resident_trace_marks(const cw_resident *r, volatile unsigned long long **marks, unsigned *stages);

// ---- fused persistent mode (resident_fused.cpp) ----
// Refuses trace and overlap (they do not apply to a fused loop).
cw_status fused_check_settings(const cw_resident_settings *s);
// Whether the loop may be made fused now (not launched, no workload or
// handler, settings that apply).
cw_status fused_may_set(cw_resident *r);
// The kernel's source for f (checked: stage names are identifiers found in
// f->source), malloc'ed: the caller frees it. Its headers: the device
// header as "cuweave/resident_device.h".
cw_status fused_source(const cw_resident_fused *f, char **out);
// Stage and function names: identifiers, found in the source as words.
bool is_identifier(const char *s);
bool has_word(const char *text, const char *word);
// Appends what every fused kernel's source starts with: the device header
// and resident_abi.h as NVRTC sees them, then the caller's source from line
// 1 of "stages.cu". false: the embedded header is not as expected.
bool fused_prologue(Text *t, const char *source);
// ---- the tile dataflow mode (resident_dataflow.cpp) ----
// Checks f's stages (each refusal names the stage) and builds the tables.
cw_status dataflow_plan(const cw_resident_fused *f, uint32_t block_threads, DataflowPlan *p);
void dataflow_plan_free(DataflowPlan *p);
// The dataflow kernel's source (cwf_dataflow_loop), malloc'ed.
cw_status dataflow_source(const cw_resident_fused *f, const DataflowPlan *p, char **out);
// A stall as the state's eight words say it, named (detail is the text's room).
void dataflow_stall(const DataflowPlan *p, const uint64_t words[8], uint64_t base, cw_resident_stall *s, char *detail,
                    size_t detail_size);
// Makes r fused with the compiled kernel k of module m (owned by r from
// success on): checks co-residency of f's grid in r's context.
cw_status resident_set_fused(cw_resident *r, const cw_resident_fused *f, cw_module *m, cw_kernel *k);
// What resident_set_fused refuses of f with m and k (the loop's state, the
// dataflow plan, cooperative launch, shared memory, co-residency), nothing
// allocated or changed: cw_pipeline_make_fused asks it before it sets up
// the pipeline's port memory.
cw_status resident_check_fused(cw_resident *r, const cw_resident_fused *f, cw_module *m, cw_kernel *k);
// Makes r a graph loop again.
cw_status resident_clear_fused(cw_resident *r);
bool is_fused(const cw_resident *r);
// The fused loop's trial run (cw_resident_build) and its launch.
cw_status fused_build(cw_resident *r);
cw_status fused_launch(cw_resident *r);
void fused_free(cw_resident *r);
// Fills the fused fields of info (a stalled dataflow loop's stall: read
// from the GPU on the stats stream).
cw_status fused_info(cw_resident *r, cw_resident_info *info);
// f's mode as the raw value the caller stored (any value, read without UB).
uint32_t fused_mode(const cw_resident_fused *f);
// The name of the fused kernel of f's mode.
const char *fused_kernel_name(const cw_resident_fused *f);

// ---- between the loop's files ----
// A launch that stopped on the GPU by itself is settled (resident_loop.cpp).
void settle_launch(cw_resident *r);
// The loop's own kernels (resolved once, when the first loop is made).
enum ResidentKernel : int { kResArm, kResPoll, kResGate, kResSignal, kResExit, kResMark, kResLoop, kResKernels };
cw_status resident_kernel(ResidentKernel which, cw_kernel **out);
inline uint64_t load_completed(const cw_resident *r) { return __atomic_load_n(&r->host->completed, __ATOMIC_ACQUIRE); }
// The last number given to a request (the closed mark removed).
inline uint64_t load_requested(const cw_resident *r) {
    return __atomic_load_n(&r->host->requested, __ATOMIC_ACQUIRE) & ~kDoorbellClosed;
}
// A running loop is active until seen stopped (its launch settled).
bool resident_active(const cw_resident *r);
// Builds the loop's graph (and its trial run) into r->exec (resident_build.cpp).
cw_status build(cw_resident *r);
// Keeps a copy of g (as a graph holding it as a child) or fn as *part.
cw_status set_part(cw_resident *r, const cw_graph *g, cw_resident_capture_fn fn, void *user, Part *part);
// Trace (resident_trace.cpp): makes and clears the marks before a traced
// build; a new stage of the build; the mark of a stage's begin or end,
// enqueued on s or captured into g; the stages open at a fault, as text.
cw_status trace_prepare(cw_resident *r);
cw_status stage_new(cw_resident *r, const char *name, uint32_t *idx);
cw_status stage_mark(cw_resident *r, cw_stream *s, uint32_t idx, bool end);
cw_status mark_into(cw_resident *r, cw_graph *g, uint32_t idx, bool end);
void describe_open_stages(const cw_resident *r, char *buf, size_t len);
// Captures one of the loop's own kernels into g, after its sinks.
cw_status launch_into(cw_resident *r, cw_graph *g, ResidentKernel kernel, void **args);

}  // namespace graphs

// The text of include/cuweave/resident_device.h (embedded by tools/embed.py).
extern const char kResidentDeviceHeader[];

// The text of src/graph/fused_dataflow.h (embedded by tools/embed.py).
extern const char kFusedDataflowHeader[];

}  // namespace cw
