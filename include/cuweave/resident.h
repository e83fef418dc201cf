/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: the GPU-resident graph loop.
 *
 * One graph, instantiated and launched once, that loops on the GPU until it
 * is torn down. Each iteration: an optional data-ready handler (a graph
 * whose kernels decide on the GPU whether data is ready), then, when there
 * is a request, the workload (a graph), then the result signal. The host
 * drives it with sequence-numbered requests:
 *
 *   cw_resident *r;
 *   cw_resident_create(&r, ctx, NULL);               any context: primary,
 *                                                     external, green partition
 *   cw_devptr ctl;
 *   cw_resident_get_ctl(r, &ctl);                     what device code is given
 *   ... capture the workload on a stream of ctx into graph g
 *       (its kernels may take ctl: include <cuweave/resident_device.h>) ...
 *   cw_resident_set_workload(r, g);                   copied: g may go
 *   cw_resident_build(r);                             optional: build, load, trial run
 *   cw_resident_launch(r);                            one launch, from now on
 *                                                     the loop runs on the GPU
 *   uint64_t seq;
 *   ... write the input ...
 *   cw_resident_data_ready(r, &seq);                  request number seq
 *   cw_resident_wait_result(r, seq, 1000);            (or poll cw_resident_poll_result)
 *   ... read the output ...
 *   cw_resident_tear_down(r, 1000);                   reports a loop that will not stop
 *   cw_resident_destroy(&r);                          never fails
 *
 * The doorbell is a count, not a flag: cw_resident_data_ready adds one
 * request and returns its number (1, 2, 3, ...); the loop serves requests
 * one per iteration, in order, each exactly once, however fast they come;
 * the number of the last finished request is written by the GPU where the
 * host reads it without a driver call. See docs/resident.md for how the
 * loop is built and why no request can be lost or merged.
 *
 * Threading: cw_resident_data_ready, cw_resident_poll_result,
 * cw_resident_wait_result, cw_resident_get_state and cw_resident_get_info
 * may be called from any number of threads at once, also while another
 * thread launches or tears down. The other calls
 * (configure, set_workload(_fn), set_handler(_fn), build, launch,
 * tear_down, destroy, next_input) change the loop: call them from one
 * thread at a time.
 *
 * While a loop runs, some driver calls wait for it, which is never: loading
 * code (a kernel's first launch in a context loads it), cuMemFree,
 * cuMemFreeHost, destroying a graph with conditional nodes. So: load
 * kernels first (cw_kernel_preload), build every loop before launching any
 * (cw_resident_build), and free memory with cuMemFreeAsync or after the
 * loops stop. cuweave refuses its own loads while a loop runs
 * (CW_ERROR_INVALID_STATE) and defers its own such releases until no loop
 * runs; a loop launched while another thread makes one of those calls
 * (a load, a build, a release, cw_context_synchronize) waits until that call
 * has returned, so that the call cannot wait for it. See docs/resident.md,
 * "What waits for a running loop".
 *
 * Needs a driver with conditional graph nodes (CUDA 12.3,
 * cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) and the library API (12.0):
 * cw_resident_create returns CW_ERROR_NOT_SUPPORTED otherwise.
 */
#ifndef CUWEAVE_RESIDENT_H
#define CUWEAVE_RESIDENT_H

#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_resident cw_resident;

/* How the loop waits when there is no request. */
typedef enum cw_resident_sleep {
    /* Check, then sleep sleep_interval_us on the GPU, then check again
     * (Holoscan's behaviour). A request waits up to one interval. */
    CW_RESIDENT_SLEEP_FIXED = 0,
    /* After each served request keep checking without sleeping for spin_us,
     * then sleep 1 us, 2 us, 4 us, ... up to sleep_interval_us between
     * checks. Bursts are served at once; an idle loop costs what FIXED
     * costs. */
    CW_RESIDENT_SLEEP_ADAPTIVE = 1
} cw_resident_sleep;

/* How an iteration that serves nothing skips the workload. */
typedef enum cw_resident_gate {
    /* An IF node around the workload and the result signal: any workload
     * (kernels, copies, memsets, child graphs). Costs the IF node's launch
     * on the GPU for every request (docs/resident.md has the figure). */
    CW_RESIDENT_GATE_NODE = 0,
    /* No IF node: the workload always runs, and every one of its kernels
     * starts with `if (cw_resident_skip(ctl)) return;` (resident_device.h).
     * Only kernels that do so may be in the workload. Faster per request. */
    CW_RESIDENT_GATE_KERNELS = 1,
    /* The default: the build picks CW_RESIDENT_GATE_KERNELS when the
     * workload qualifies, else CW_RESIDENT_GATE_NODE. It qualifies when every
     * node of it (child graphs looked into) is a kernel that takes the
     * loop's device block (the address cw_resident_get_ctl gives) as one of
     * its arguments: the contract is that such a kernel starts with
     * cw_resident_skip(ctl) (or cw_resident_begin). A copy, a memset, a host
     * node or a kernel without the block makes the loop fall back, as does a
     * driver that cannot list kernel parameters (cuFuncGetParamInfo, CUDA
     * 12.4). No workload: kernels. cw_resident_get_info says which gate the
     * build took and, when it fell back, why (cw_resident_fallback). */
    CW_RESIDENT_GATE_AUTO = 2,
    /* No poll and no signal kernel: the workload's first kernel calls
     * cw_resident_begin(ctl) (the poll's work: it waits for the request) and
     * its last cw_resident_end(ctl) (the signal's work), so that a request
     * is the workload's kernels and nothing else; one more kernel per
     * `unroll` requests ends the WHILE node when the loop stops. Needs a
     * workload given as a capture function (cw_resident_set_workload_fn)
     * whose graph has one first and one last node, both kernels taking the
     * loop's device block, and no data-ready handler; cannot be combined
     * with trace. Explicit only: the library cannot see which kernel calls
     * begin and end, so CW_RESIDENT_GATE_AUTO never picks it. */
    CW_RESIDENT_GATE_BEGIN_END = 3
} cw_resident_gate;

/* cw_resident_settings.overlap: decided at the build (the default). */
#define CW_RESIDENT_OVERLAP_AUTO (-1)

/* Why a build took a slower setting than the one asked for with
 * CW_RESIDENT_GATE_AUTO or CW_RESIDENT_OVERLAP_AUTO (cw_resident_info). */
typedef enum cw_resident_fallback {
    CW_RESIDENT_FALLBACK_NONE = 0,     /* nothing fell back (or nothing was automatic) */
    CW_RESIDENT_FALLBACK_NODE = 1,     /* gate NODE: the workload holds a node that is not a kernel */
    CW_RESIDENT_FALLBACK_NO_CTL = 2,   /* gate NODE: a workload kernel does not take the device block */
    CW_RESIDENT_FALLBACK_DRIVER = 3,   /* the driver cannot list kernel parameters or graph edges */
    CW_RESIDENT_FALLBACK_DEVICE = 4,   /* no overlap: compute capability below 9.0 */
    CW_RESIDENT_FALLBACK_CODE = 5,     /* no overlap: a workload kernel compiled for below 9.0 */
    CW_RESIDENT_FALLBACK_SETTING = 6   /* no overlap: gate NODE, trace or a data-ready handler */
} cw_resident_fallback;

/* The loop's settings. Booleans (int) are 0 for false and any other value
 * for true; the library keeps and reports them as 0 or 1. */
typedef struct cw_resident_settings {
    /* Tear the loop down by itself this long after it starts, measured on
     * the GPU's clock (no host thread involved). 0: run until torn down.
     * Default 0. */
    uint32_t timeout_ms;
    /* Sleep between checks when idle, in microseconds, at most 1000000.
     * 0: never sleep (spin: lowest latency, one GPU thread always busy).
     * Default 500. */
    uint32_t sleep_interval_us;
    /* Default CW_RESIDENT_SLEEP_ADAPTIVE (issue 24: requests that follow
     * each other within spin_us are served at spinning speed; an idle loop
     * costs what FIXED costs). Earlier versions defaulted to FIXED. */
    cw_resident_sleep sleep_mode;
    /* CW_RESIDENT_SLEEP_ADAPTIVE: how long to keep checking without
     * sleeping after each served request, in microseconds, at most 1000000.
     * Default 200. */
    uint32_t spin_us;
    /* Boolean: a system-wide memory fence (__threadfence_system) after the
     * workload and before the result signal, so that every write of the
     * workload, also to mapped host memory, is visible to the host before
     * cw_resident_poll_result says so. Costs latency; needed when the
     * workload writes host memory the host reads between iterations.
     * Default 0. */
    int sync_with_host;
    /* Input slots owned by the loop: 0 (none: the workload reads memory of
     * its own), 1, or 2 (double-buffered: the host fills the slot of
     * request n+1 while request n runs). Request seq reads slot
     * (seq - 1) % input_slots. Default 0. */
    uint32_t input_slots;
    /* Bytes per input slot when input_slots > 0 (then at least 1). */
    size_t input_bytes;
    /* Iterations per pass of the loop's WHILE node, 1 to 64. The graph
     * holds this many copies of one iteration, so that only one request in
     * `unroll` pays the WHILE node's loop-back (several microseconds on an
     * H100; docs/resident.md has the figures). Larger values cost graph
     * memory and instantiate time. Default 16. */
    uint32_t unroll;
    cw_resident_gate gate; /* default CW_RESIDENT_GATE_AUTO */
    /* Priority of the stream the loop runs on, clamped into the context's
     * range. Default: the greatest (most urgent) priority the context has
     * (use_default_priority, a boolean, 1). */
    int priority;
    int use_default_priority;
    /* How long cw_resident_destroy waits for a launched loop to stop before
     * it abandons it. Default 5000. */
    uint32_t destroy_timeout_ms;
    /* Overlap the launches inside an iteration (programmatic dependent
     * launch, compute capability 9.0 or newer): each workload and handler
     * kernel that follows a kernel is launched as soon as that kernel has
     * started, and waits on the GPU for it to finish, so a kernel boundary
     * costs less (docs/resident.md has the figures). 0: off. Any other value
     * but CW_RESIDENT_OVERLAP_AUTO: on (kept as 1); needs
     * CW_RESIDENT_GATE_KERNELS or CW_RESIDENT_GATE_BEGIN_END, and every kernel of
     * the workload and of the handler must call cw_resident_skip(ctl),
     * cw_resident_begin(ctl) or cw_resident_wait() in every thread before it
     * touches memory that earlier work of the iteration writes, and be
     * compiled for compute capability 9.0 or newer (the wait is compiled out
     * of older targets). While the loop idles, the first workload kernel is
     * already launched and waiting: its blocks that fit hold their SMs.
     * CW_RESIDENT_OVERLAP_AUTO (the default; -1, which earlier versions took
     * as on): on when the gate in force is KERNELS or FUSED, the device has
     * compute capability 9.0 or newer, the driver has graph edge data (CUDA
     * 12.3), every workload kernel's code is for 9.0 or newer (its PTX
     * version), and the loop neither traces nor has a data-ready handler,
     * nor runs under compute-sanitizer (NV_SANITIZER_INJECTION_PORT_BASE
     * set); else off (cw_resident_info says why). */
    int overlap;
    /* Boolean: trace the iteration's stages, so that a device fault names
     * the stage it happened in (docs/resident.md, "Which stage faulted").
     * The workload and the data-ready handler are stages of their own, and
     * a capture function may begin and end stages inside them
     * (cw_resident_stage_begin); a resident pipeline makes one per
     * operator. The workload's and the handler's begin and end are
     * written (to mapped host memory) by the loop's own kernels around
     * them, one clock store each; every stage a capture function begins
     * adds two one-thread kernels to every iteration that runs it (its
     * begin and end marks), so those cost latency: for finding faults,
     * not for production. Cannot be combined with overlap 1 or with
     * CW_RESIDENT_GATE_BEGIN_END (CW_ERROR_INVALID_ARGUMENT; overlap AUTO turns
     * off). Default 0. */
    int trace;
    uint8_t reserved[40]; /* zero */
} cw_resident_settings;

/*
 * Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_resident_settings_default(cw_resident_settings *s);

/*
 * Makes a loop on ctx (any context: a device's primary context, an external
 * one, a green partition): its control block (mapped host memory, one
 * page), its device block (cw_resident_get_ctl), its input slots and three
 * streams of ctx. Keeps ctx alive. settings may be NULL for the defaults.
 * Nothing is left allocated on failure. *out is the caller's:
 * cw_resident_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new loop.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; a setting is out of range
 *                              or combined with one it excludes (the detail
 *                              names it); nonzero reserved bytes;
 *                              input_slots * input_bytes overflows.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no conditional graph nodes
 *                              (CUDA 12.3) or no library API (12.0).
 *   CW_ERROR_OUT_OF_MEMORY     host, mapped host or device memory ran out.
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_resident_create(cw_resident **out, cw_context *ctx, const cw_resident_settings *settings);

/*
 * Destroys the loop and sets *r to NULL. Accepts NULL and *r NULL (nothing
 * happens). Never fails: a launched loop is torn down first, waiting up to
 * settings.destroy_timeout_ms for it to stop; call cw_resident_tear_down
 * first to learn whether it stops.
 *  - A loop that does not stop in time (a workload still running, or the
 *    GPU held by other work) is abandoned: the handle is gone, and its
 *    memory, streams and graph are kept, since the GPU may still use them;
 *    the log callback gets a CW_LOG_ERROR saying so (the detail
 *    cw_last_error gives too). The request to stop stays. It still counts
 *    as a running loop (loads are refused and some releases wait, as
 *    below) until a later cw_resident_create or cw_resident_destroy sees it
 *    stopped and frees it.
 *  - A loop whose stream reports a device fault while it stops is over:
 *    it is freed, and the fault logged at CW_LOG_ERROR.
 *  - While another loop runs in the process, freeing would wait for it:
 *    then the handle is gone at once and the memory and graph are freed
 *    when the last running loop is seen to stop.
 * A handle that is not a live loop is ignored: *r is set to NULL and a
 * CW_LOG_WARNING logged; cw_last_error is left as it was.
 *
 * Returns: nothing.
 */
CW_API void cw_resident_destroy(cw_resident **r);

/*
 * Changes the settings (input_slots, input_bytes and the loop's stream
 * priority excepted: they are fixed at creation; use_default_priority, and
 * priority where it is 0, must be as they were). The settings are built
 * into the loop's graph at launch, so they can change only while the loop
 * is not launched.
 *
 * Returns:
 *   CW_SUCCESS                 the settings are in force from the next
 *                              build.
 *   CW_ERROR_INVALID_ARGUMENT  r or settings is NULL; a value out of range;
 *                              nonzero reserved bytes; a different input
 *                              layout or priority; trace or overlap for a
 *                              fused loop (cw_resident_set_fused).
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched ("tear the loop down
 *                              first").
 */
CW_API cw_status cw_resident_configure(cw_resident *r, const cw_resident_settings *settings);

/*
 * The settings in force (booleans as 0 or 1). No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *settings holds them.
 *   CW_ERROR_INVALID_ARGUMENT  r or settings is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 */
CW_API cw_status cw_resident_get_settings(const cw_resident *r, cw_resident_settings *settings);

/*
 * The device address of the loop's device block: a cw_resident_ctl
 * (include/cuweave/resident_device.h) to pass to kernels of the workload
 * and the data-ready handler, which read the request number and input slot
 * from it and mark data ready. Valid for the life of the loop. No driver
 * call.
 *
 * Returns:
 *   CW_SUCCESS                 *ctl is the address.
 *   CW_ERROR_INVALID_ARGUMENT  r or ctl is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 */
CW_API cw_status cw_resident_get_ctl(const cw_resident *r, cw_devptr *ctl);

/*
 * The device address of input slot `slot` (0 <= slot < input_slots),
 * valid for the life of the loop. No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *dptr is the address.
 *   CW_ERROR_INVALID_ARGUMENT  r or dptr is NULL; slot >= input_slots.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 */
CW_API cw_status cw_resident_get_input(const cw_resident *r, uint32_t slot, cw_devptr *dptr);

/*
 * Sets (or, with NULL, removes) the workload: what one iteration runs for
 * one request. The graph is copied (it may be changed or destroyed
 * afterwards); it must belong to the loop's context and, as the driver
 * requires of graphs inside conditional nodes, contain only kernels,
 * copies, memsets, empty nodes and child graphs (no conditional nodes, no
 * host functions, no event nodes: the driver refuses others when the loop
 * builds). Capture it on any stream of the loop's context. A loop with no
 * workload serves requests with an empty iteration (useful to measure the
 * loop itself). Replaces a workload set with cw_resident_set_workload_fn.
 *
 * Returns:
 *   CW_SUCCESS                 the workload is set, for the next build.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL; the graph belongs to another
 *                              context.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop; workload is not NULL
 *                              and not a live graph.
 *   CW_ERROR_INVALID_STATE     the loop is launched; it is fused
 *                              (cw_resident_set_fused) and this sets one.
 *   CW_ERROR_OUT_OF_MEMORY     copying the graph ran out of memory.
 *   CW_ERROR_DRIVER            the driver refused the copy (detail: the
 *                              call).
 */
CW_API cw_status cw_resident_set_workload(cw_resident *r, const cw_graph *workload);

/*
 * Enqueues part of a loop's iteration on s (which captures into the loop's
 * graph): launches, copies, memsets on s and on streams forked from it
 * (joined back before returning). user is what was given with it. Return
 * CW_SUCCESS, or an error to make cw_resident_build / cw_resident_launch
 * fail with it.
 */
typedef cw_status (*cw_resident_capture_fn)(cw_stream *s, void *user);

/*
 * Sets the workload as what fn enqueues: fn is called by cw_resident_build
 * and cw_resident_launch when they build the graph, once per copy of the
 * iteration (settings.unroll times), with s capturing straight into the
 * loop's graph; with gate CW_RESIDENT_GATE_AUTO (the default) once more
 * first, into a graph the build looks at (which kernels, taking the loop's
 * device block or not) and then throws away. The work then sits in the
 * iteration itself instead of inside a child graph node, which is faster
 * to start on the GPU. fn NULL
 * removes the workload. Replaces a workload set with
 * cw_resident_set_workload, and the other way round.
 *
 * Returns:
 *   CW_SUCCESS                 the workload is set, for the next build.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched; it is fused
 *                              (cw_resident_set_fused) and this sets one.
 */
CW_API cw_status cw_resident_set_workload_fn(cw_resident *r, cw_resident_capture_fn fn, void *user);

/*
 * As cw_resident_set_workload_fn, for the data-ready handler (see
 * cw_resident_set_handler).
 *
 * Returns:
 *   CW_SUCCESS                 the handler is set, for the next build.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched; it is fused
 *                              (cw_resident_set_fused) and this sets one.
 */
CW_API cw_status cw_resident_set_handler_fn(cw_resident *r, cw_resident_capture_fn fn, void *user);

/*
 * Sets (or, with NULL, removes) the data-ready handler: a graph that runs at
 * the start of every iteration and whose kernels call
 * cw_resident_mark_data_ready(ctl) when data has arrived (by a GPU-direct
 * path, say). An iteration whose handler marked data ready serves one
 * request: it gets the next sequence number, runs the workload and
 * signals. With a handler, requests come from it only:
 * cw_resident_data_ready is refused. Same rules as the workload.
 *
 * Returns:
 *   CW_SUCCESS                 the handler is set, for the next build.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL; the graph belongs to another
 *                              context.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop; handler is not NULL
 *                              and not a live graph.
 *   CW_ERROR_INVALID_STATE     the loop is launched; it is fused
 *                              (cw_resident_set_fused) and this sets one.
 *   CW_ERROR_OUT_OF_MEMORY     copying the graph ran out of memory.
 *   CW_ERROR_DRIVER            the driver refused the copy (detail: the
 *                              call).
 */
CW_API cw_status cw_resident_set_handler(cw_resident *r, const cw_graph *handler);

/* cw_resident_stage_begin's stage when the loop does not trace. */
#define CW_RESIDENT_NO_STAGE 0xffffffffu

/*
 * Begins a traced stage named `name` on s, inside a capture function of the
 * loop (cw_resident_set_workload_fn, cw_resident_set_handler_fn) while it
 * builds: s is the stream the function was given, or one forked from it.
 * The loop captures a one-thread kernel there that marks the stage begun
 * when it runs (about 1.4 us of GPU time); cw_resident_stage_end marks it
 * ended with another. When a device fault
 * stops the loop, the error of the call that sees it
 * (cw_resident_wait_result, cw_resident_tear_down; cw_resident_destroy's
 * log) names the stage begun last of those that had begun and not ended,
 * and lists the others running (stages on parallel branches run together;
 * the fault stops them all, so any of them may hold the faulting kernel).
 * Stages nest: the enclosing workload or handler stage stays open too.
 * name: up to 63 bytes are kept. *stage receives the stage's number for
 * cw_resident_stage_end. Every stage begun must be ended before the
 * capture function returns: the build fails with CW_ERROR_INVALID_STATE,
 * naming the stage, otherwise.
 * When the loop does not trace (settings.trace 0), nothing is captured,
 * *stage is CW_RESIDENT_NO_STAGE and CW_SUCCESS returns: capture
 * functions need not know whether the loop traces. Called on the thread
 * the capture function runs on.
 *
 * Returns:
 *   CW_SUCCESS                 *stage is the stage's number.
 *   CW_ERROR_INVALID_ARGUMENT  r, s, name or stage is NULL; name is empty.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop; s is not a live stream.
 *   CW_ERROR_INVALID_STATE     not inside the loop's build, or s is not
 *                              capturing into it.
 *   CW_ERROR_OUT_OF_MEMORY     past 1024 stages in one build (every copy of
 *                              the iteration counts); host memory.
 *   CW_ERROR_CAPTURE           the capture refused the mark's launch.
 *   CW_ERROR_DRIVER            the driver refused the launch (detail: the
 *                              call).
 */
CW_API cw_status cw_resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage);

/*
 * Ends stage (from cw_resident_stage_begin) on s, which must be where its
 * work ends: s itself, or a stream the work was joined into.
 * CW_RESIDENT_NO_STAGE does nothing.
 *
 * Returns:
 *   CW_SUCCESS                 the stage's end is captured.
 *   CW_ERROR_INVALID_ARGUMENT  r or s is NULL; a stage this build did not
 *                              begin, or one ended already.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop; s is not a live stream.
 *   CW_ERROR_INVALID_STATE     not inside the loop's build, or s is not
 *                              capturing into it.
 *   CW_ERROR_CAPTURE           the capture refused the mark's launch.
 *   CW_ERROR_DRIVER            the driver refused the launch (detail: the
 *                              call).
 */
CW_API cw_status cw_resident_stage_end(cw_resident *r, cw_stream *s, uint32_t stage);

/*
 * Builds the loop's graph (when something changed since the last build),
 * instantiates it, uploads it and runs it once with the stop already asked
 * (it ends at its first check, serving nothing), so that every kernel in it
 * is loaded. cw_resident_launch does this itself when needed; call it first
 * when several loops will run at once: the driver loads code into a context
 * at a kernel's first launch there, and loading code on a device waits
 * until no kernel runs on it (seen on the H100 with CUDA 13.0, across
 * contexts and partitions too), which never happens while a loop runs. So:
 * build every loop, then launch them. The capture functions run here, on
 * this thread; an error one returns is returned as it is. Gate and overlap
 * CW_RESIDENT_GATE_AUTO / CW_RESIDENT_OVERLAP_AUTO are decided here;
 * cw_resident_get_info says what was chosen and why.
 *
 * Returns:
 *   CW_SUCCESS                 built (or nothing to build).
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched; a build is needed while
 *                              a loop runs in the process (it would wait
 *                              for that loop); a capture function left a
 *                              stage open; gate CW_RESIDENT_GATE_BEGIN_END with
 *                              a data-ready handler, without a workload
 *                              capture function, or with a workload that
 *                              does not begin and end with one kernel that
 *                              takes the loop's device block (the detail
 *                              names the node).
 *   CW_ERROR_NOT_SUPPORTED     settings.overlap on a driver or device
 *                              without programmatic dependent launch.
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out.
 *   CW_ERROR_CAPTURE           a capture function broke the capture.
 *   CW_ERROR_DEVICE_FAULT      the trial run faulted.
 *   CW_ERROR_DRIVER            the driver refused (detail: the call), a
 *                              workload it cannot put in a conditional
 *                              node included.
 */
CW_API cw_status cw_resident_build(cw_resident *r);

/*
 * Builds the loop's graph when needed (see cw_resident_build: the capture
 * functions may run here, and their errors are returned as they are) and
 * launches it on the loop's own stream. Requests not served by an earlier
 * launch are dropped. Nothing is left launched on failure. The loop counts
 * as running from the start of the launch (another thread's loads are
 * refused, its releases deferred); when another thread is inside a call
 * that waits until no kernel runs on the device (loading code, building a
 * loop, its capture functions and compile included, releasing memory or
 * code, cw_context_synchronize), the launch first waits for that call to
 * return: a capture function must not wait for a thread that launches a
 * loop.
 *
 * Returns:
 *   CW_SUCCESS                 the loop runs on the GPU.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched already; called from
 *                              inside such a call on this thread (a
 *                              capture function of a loop being built:
 *                              the launch would wait for itself); or as
 *                              cw_resident_build.
 *   CW_ERROR_NOT_SUPPORTED     as cw_resident_build.
 *   CW_ERROR_OUT_OF_MEMORY     as cw_resident_build.
 *   CW_ERROR_CAPTURE           as cw_resident_build.
 *   CW_ERROR_NOT_PERMITTED     called inside a HOST_FUNC future's callback
 *                              (the driver's callback thread, where CUDA
 *                              allows no CUDA call, and where a
 *                              cw_context_synchronize on another thread
 *                              may be waiting for it); nothing launched.
 *   CW_ERROR_DEVICE_FAULT      as cw_resident_build, or the launch faulted.
 *   CW_ERROR_DRIVER            the driver refused the build or the launch
 *                              (detail: the call).
 */
CW_API cw_status cw_resident_launch(cw_resident *r);

/*
 * Requests one iteration: one atomic compare-and-swap on the doorbell in
 * host memory, no driver call, no lock. A call racing the loop's stop either
 * gets a number that stop reports dropped, or is refused. *seq (seq may be NULL) receives the request's
 * number. Write the request's input before calling (any write the host has
 * finished: a synchronous copy, a finished stream, a store to mapped
 * memory).
 *
 * Returns:
 *   CW_SUCCESS                 request *seq is made.
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is not running, or has a data-ready
 *                              handler.
 */
CW_API cw_status cw_resident_data_ready(cw_resident *r, uint64_t *seq);

/*
 * Asks whether request seq has finished (its result signal was written),
 * as cw_future_poll asks of a future. No driver call, no lock. With a
 * data-ready handler, seq numbers the iterations that served data; numbers
 * go on across launches (each launch after every number used before it).
 *
 * Returns:
 *   CW_SUCCESS                 request seq has finished.
 *   CW_ERROR_NOT_READY         not yet: ask again (no detail is recorded
 *                              and nothing is logged).
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL; seq is 0, or a request never made
 *                              (host requests).
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop stopped before serving seq, or a
 *                              teardown dropped it: it never will.
 */
CW_API cw_status cw_resident_poll_result(const cw_resident *r, uint64_t seq);

/*
 * Waits until request seq has finished: spins for a few microseconds, then
 * yields the CPU between checks. timeout_ms 0 checks once. With a
 * data-ready handler, seq numbers the iterations that served data (as
 * cw_resident_poll_result).
 *
 * Returns:
 *   CW_SUCCESS                 request seq has finished.
 *   CW_ERROR_INVALID_ARGUMENT  as cw_resident_poll_result.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop stopped before serving seq, or a
 *                              teardown dropped it.
 *   CW_ERROR_TIMEOUT           not finished within timeout_ms (the detail
 *                              gives the requests made and served).
 *   CW_ERROR_DEVICE_FAULT      the loop's stream reports a fault (asked about
 *                              once the wait has lasted a millisecond): the
 *                              detail names the request the loop was
 *                              serving and, with settings.trace, the stage.
 *   CW_ERROR_DRIVER            the loop's stream reports another error
 *                              (detail: the call).
 */
CW_API cw_status cw_resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms);

/*
 * The device address of the input slot the next request (the one the next
 * cw_resident_data_ready makes) will read, once that slot is free: waits up
 * to timeout_ms until the request that used it before has finished. Fill it,
 * then call cw_resident_data_ready. For one producer thread.
 *
 * Returns:
 *   CW_SUCCESS                 *dptr is the slot's address.
 *   CW_ERROR_INVALID_ARGUMENT  r or dptr is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop has no input slots, is not running,
 *                              or stopped before serving the request the
 *                              slot waits for.
 *   CW_ERROR_TIMEOUT           the slot was not free within timeout_ms.
 *   CW_ERROR_DEVICE_FAULT      as cw_resident_wait_result.
 *   CW_ERROR_DRIVER            as cw_resident_wait_result.
 */
CW_API cw_status cw_resident_next_input(cw_resident *r, uint32_t timeout_ms, cw_devptr *dptr);

/*
 * Asks the loop to stop and waits up to timeout_ms until its stream is
 * idle. The loop stops at its next check of the doorbell (within one
 * sleep interval when idle; after the running iteration when busy).
 * Requests not yet served are dropped. The call that reports whether a
 * loop stops: cw_resident_destroy does not.
 *
 * Returns:
 *   CW_SUCCESS                 the loop has stopped (or was not launched).
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_TIMEOUT           it has not stopped yet; the request to stop
 *                              stays: call again to keep waiting.
 *   CW_ERROR_DEVICE_FAULT      the loop's stream reports a fault: the loop
 *                              is over (with settings.trace the detail
 *                              names the stage).
 *   CW_ERROR_DRIVER            the loop's stream reports another error: the
 *                              loop is over (detail: the call).
 */
CW_API cw_status cw_resident_tear_down(cw_resident *r, uint32_t timeout_ms);

typedef enum cw_resident_state {
    CW_RESIDENT_NOT_LAUNCHED = 0, /* made, not launched yet */
    CW_RESIDENT_RUNNING = 1,      /* launched, looping on the GPU */
    CW_RESIDENT_STOPPING = 2,     /* asked to stop, not stopped yet */
    CW_RESIDENT_STOPPED = 3       /* stopped (see cw_resident_info.exit) */
} cw_resident_state;

typedef enum cw_resident_exit {
    CW_RESIDENT_EXIT_NONE = 0,      /* has not stopped */
    CW_RESIDENT_EXIT_TEAR_DOWN = 1, /* cw_resident_tear_down (or destroy) */
    CW_RESIDENT_EXIT_TIMEOUT = 2,   /* settings.timeout_ms expired (on the GPU's clock) */
    CW_RESIDENT_EXIT_FAULT = 3,     /* the stream reported a device fault */
    CW_RESIDENT_EXIT_STALLED = 4    /* a dataflow loop's watchdog stopped it (cw_resident_info.stall) */
} cw_resident_exit;

/*
 * The loop's state: two atomic loads, no driver call, no lock, so that it
 * may be polled (cw_resident_get_info copies statistics from the GPU).
 * RUNNING and STOPPING are the states of a launched loop (launched from a
 * successful cw_resident_launch until the loop has stopped on the GPU: torn
 * down, or its timeout expired).
 *
 * Returns:
 *   CW_SUCCESS                 *state is the state.
 *   CW_ERROR_INVALID_ARGUMENT  r or state is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 */
CW_API cw_status cw_resident_get_state(const cw_resident *r, cw_resident_state *state);

/* Why a dataflow loop's watchdog stopped it (cw_resident_info.stall). */
typedef struct cw_resident_stall {
    /* 1: a tile waited longer than the watchdog for what it reads; 2: a
     * dependency function named a tile that does not exist. */
    uint32_t kind;
    uint32_t stage;         /* the stage of the tile that waited (an index of stage_defs) */
    uint32_t tile;          /* that tile */
    uint32_t waited_stage;  /* the stage it waited on */
    /* The tile it waited on; UINT32_MAX: the whole stage (CW_FUSED_READ_ALL).
     * kind 2: the tile the function named. */
    uint32_t waited_tile;
    uint32_t pad;
    uint64_t request;       /* the request (its number, as cw_resident_data_ready gave it) */
    /* kind 1: the counter it waited on (the last request that tile finished,
     * or the stage's finished tiles) and the value it waited for; kind 2:
     * the call's index i and the stage's tile count. */
    uint64_t counter, needed;
    /* The same in words, naming the stages ("stage 'sad' tile 17 of request
     * 42 waited 5000 ms for stage 'blur' tile 17: it had finished request
     * 41, 42 needed"). */
    const char *detail;
} cw_resident_stall;

typedef struct cw_resident_info {
    cw_context *context;     /* the loop's context, borrowed: valid while the loop lives */
    cw_resident_state state; /* as cw_resident_get_state */
    int launched;            /* 1 while state is RUNNING or STOPPING, else 0 */
    uint64_t requested;      /* the last request number given (host requests; after a
                                handler launch stopped, its last served) */
    uint64_t completed;      /* number of the last request finished */
    uint64_t iterations;     /* requests served, over every launch */
    uint64_t idle_polls;     /* checks that found no request, over every launch */
    uint64_t launches;       /* successful cw_resident_launch calls */
    /* Per-iteration time on the GPU's clock, in ns, from the check that
     * found the request to the start of the result signal (so: starting
     * the workload, the workload, and the node transitions). Min and max
     * over every iteration; the median over the last median_window ones
     * (at most 4096). 0 when none ran. */
    uint64_t iter_min_ns, iter_median_ns, iter_max_ns;
    uint64_t median_window;
    uint64_t run_ns;       /* GPU time from the start of the last launch to its stop (0 while it runs) */
    cw_resident_exit exit; /* why the last launch stopped */
    /* Fused persistent mode (cw_resident_set_fused); all 0 for a graph loop. */
    int fused;                /* 1 when the loop is fused */
    uint32_t grid_blocks;     /* blocks its kernel is launched with */
    uint32_t block_threads;   /* threads a block */
    uint32_t max_grid_blocks; /* the most blocks that fit co-resident on the
                                 context's SMs (a green partition's SMs) */
    /* What the last build chose (before the first build: the settings as
     * they are, CW_RESIDENT_GATE_AUTO and CW_RESIDENT_OVERLAP_AUTO
     * unresolved): the gate in force (never AUTO once built) and overlap (0
     * or 1 once built). */
    cw_resident_gate gate;
    int overlap;
    /* Why that build took a slower gate or no overlap where the settings
     * left the choice to it (AUTO); CW_RESIDENT_FALLBACK_NONE otherwise. */
    cw_resident_fallback fallback;
    /* The fallback in words, naming the node or kernel that forced it ("" for
     * none). Owned by the loop: valid until its next build or its
     * destruction. */
    const char *fallback_detail;
    /* Exit CW_RESIDENT_EXIT_STALLED: which tile waited on which, owned by
     * the loop (valid until its next launch or its destruction); else NULL. */
    const cw_resident_stall *stall;
} cw_resident_info;

/*
 * Describes the loop: its context, its state, and the statistics the GPU
 * keeps (one small copy on the loop's third stream and a wait for it; the
 * loop keeps running). Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the loop.
 *   CW_ERROR_INVALID_ARGUMENT  r or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_DEVICE_FAULT      the context has faulted: the copy fails.
 *   CW_ERROR_DRIVER            the driver refused the copy (detail: the
 *                              call).
 */
CW_API cw_status cw_resident_get_info(cw_resident *r, cw_resident_info *info);

/* ---- Fused persistent mode ----
 *
 * Instead of a graph, the loop runs one persistent kernel that cuweave
 * compiles (NVRTC, through the kernel cache) from device functions the
 * caller gives as source: the stages. Every block of the grid loops:
 *
 *   block 0 polls the doorbell (sleep mode, timeout, stop word as the graph
 *   loop) -> grid barrier -> stage 1 -> grid barrier -> ... -> stage n ->
 *   grid barrier -> block 0 writes the result signal -> again
 *
 * Each stage is `extern "C" __device__ void NAME(cw_resident_ctl *ctl,
 * void *user)`, called by every thread of the grid once per request;
 * cw_resident_sequence(ctl) and cw_resident_input(ctl) work as in the
 * graph loop's kernels (the source may include "cuweave/resident_device.h":
 * it is given to NVRTC in memory). The barriers are grid-wide (the kernel is
 * launched cooperatively, with every block co-resident): what a stage
 * writes is visible to every thread of the next. The host API is the
 * graph loop's: cw_resident_launch, data_ready, poll/wait_result,
 * next_input, tear_down, get_info, get_state, destroy.
 *
 * Settings that apply: timeout_ms, sleep_interval_us, sleep_mode, spin_us,
 * sync_with_host, input_slots/input_bytes, priority, destroy_timeout_ms.
 * gate and unroll do not apply (there is no graph) and are ignored; trace
 * and overlap are refused (CW_ERROR_INVALID_ARGUMENT) by
 * cw_resident_set_fused and by cw_resident_configure of a fused loop.
 * docs/resident.md, "Fused persistent mode", says when to pick it.
 */

#define CW_RESIDENT_MAX_FUSED_STAGES 64u

/* How a fused loop runs its stages. */
typedef enum cw_fused_mode {
    /* Every thread of the grid runs every stage, a grid barrier after each
     * (the stages are `void NAME(cw_resident_ctl *ctl, void *user)`). */
    CW_FUSED_BARRIER = 0,
    /* Tile dataflow: each stage is cut into tiles; blocks take tiles from
     * counters on the GPU and each tile waits only for the tiles it reads
     * (the stages are `void NAME(const cw_fused_tile *t, void *user)`;
     * cw_resident_fused.stage_defs describes them). No grid barrier. */
    CW_FUSED_DATAFLOW = 1
} cw_fused_mode;

/* What a tile of a dataflow stage reads of another stage (cw_fused_dep). */
typedef enum cw_fused_read {
    /* Tile i reads tile i (the two stages' tile grids must be equal). */
    CW_FUSED_READ_SAME = 1,
    /* Tile (x, y) reads the tiles it maps to, x * scale_num / scale_den up to
     * (x + 1) * scale_num / scale_den (rounded up, exclusive), and radius
     * tiles more on each side, clipped at the edges of the stage's tile grid
     * (a stencil's halo at a frame's edge reads the tiles that exist); y
     * alike (but for two grids of one row each: row 0 reads row 0). Scale
     * 1/1: tiles x - radius .. x + radius. */
    CW_FUSED_READ_NEIGHBOURS = 2,
    /* Every tile of the stage (a histogram read whole, a reduction's
     * result): the one dependency that waits for a whole stage, on a
     * counter of its finished tiles. */
    CW_FUSED_READ_ALL = 3,
    /* The tiles a device function of the source names:
     *   extern "C" __device__ int FUNCTION(const cw_fused_tile *t, unsigned i)
     * returns the i-th tile (0, 1, ...) of the stage read that tile t reads,
     * or -1 after the last. A tile that does not exist stops the loop
     * (CW_RESIDENT_EXIT_STALLED; cw_resident_info.stall names it). */
    CW_FUSED_READ_FUNCTION = 4
} cw_fused_read;

/* One dependency of a dataflow stage. Zero-initialise, then fill in. */
typedef struct cw_fused_dep {
    uint32_t stage;         /* the stage read: an index of stage_defs before this stage's
                               (with previous: any stage, this one too) */
    cw_fused_read read;
    uint32_t radius;        /* CW_FUSED_READ_NEIGHBOURS (else 0) */
    uint32_t scale_num;     /* CW_FUSED_READ_NEIGHBOURS: the mapping (0 and 0: 1/1; else 0) */
    uint32_t scale_den;
    /* Boolean: the tiles of the previous request (a temporal filter, the
     * difference to the last frame). The first request of a launch waits
     * for nothing (there is none before it in the launch). */
    int previous;
    const char *function;   /* CW_FUSED_READ_FUNCTION: the function's name (else NULL) */
    uint8_t reserved[16];   /* zero */
} cw_fused_dep;

/* One stage of a dataflow loop. Zero-initialise, then fill in. */
typedef struct cw_fused_stage {
    /* Its device function, defined in the source:
     *   extern "C" __device__ void NAME(const cw_fused_tile *t, void *user)
     * called by the threads of one block (threadIdx.x < t->threads) once
     * per tile of each request. */
    const char *name;
    const cw_fused_dep *deps; /* what its tiles read of other stages (NULL when dep_count is 0) */
    uint32_t dep_count;       /* 0 .. CW_FUSED_MAX_DEPS */
    /* How the stage is cut: `tiles` tiles in a row (size and tile 0), or a
     * problem of size[0] x size[1] elements (size[1] 0: 1) in tiles of
     * tile[0] x tile[1] (tile[1] 0: 1), ceil(size / tile) of them each way
     * (tiles 0). At most CW_FUSED_MAX_TILES tiles. */
    uint32_t tiles;
    uint32_t size[2];
    uint32_t tile[2];
    /* Threads a tile uses: 0, all of the block's; else a multiple of 32 up
     * to block_threads (the others wait: a stage with fewer threads than
     * the block synchronises its threads with cw_fused_tile_sync, never
     * __syncthreads). */
    uint32_t threads;
    /* Dynamic shared memory the stage uses (t->shared); the kernel gets the
     * most any stage (or cw_resident_fused.shared_bytes) asks. */
    uint32_t shared_bytes;
    uint8_t reserved[32];     /* zero */
} cw_fused_stage;

#define CW_FUSED_MAX_DEPS 16u
#define CW_FUSED_MAX_TILES (1u << 20)
#define CW_FUSED_MAX_IN_FLIGHT 8u

/* What a fused loop runs. Zero-initialise, then fill in. */
typedef struct cw_resident_fused {
    const char *source;          /* CUDA C++ defining the stages (NUL-terminated) */
    /* CW_FUSED_BARRIER: the stages' names, in the order they run;
     * CW_FUSED_DATAFLOW: NULL (stage_defs names them). */
    const char *const *stages;
    const char *const *options;  /* NVRTC options, option_count of them (may be NULL
                                    when option_count is 0; no architecture option) */
    cw_devptr user;              /* passed to every stage as `void *user` */
    uint32_t stage_count;        /* 1 .. CW_RESIDENT_MAX_FUSED_STAGES */
    uint32_t option_count;
    /* Blocks of the grid; 0: the most that fit co-resident on the context's
     * SMs (cw_resident_info.max_grid_blocks), for CW_FUSED_DATAFLOW one
     * block an SM of the context (at most that many). */
    uint32_t grid_blocks;
    uint32_t block_threads;      /* threads a block, 1 .. 1024; 0: 256 */
    uint32_t shared_bytes;       /* dynamic shared memory a block (extern __shared__) */
    cw_fused_mode mode;          /* default (0) CW_FUSED_BARRIER */
    /* CW_FUSED_DATAFLOW: the stages, stage_count of them, in an order where
     * every stage reads only stages before it (but with `previous`). */
    const cw_fused_stage *stage_defs;
    /* CW_FUSED_DATAFLOW: requests whose tiles may run at once, 1 ..
     * CW_FUSED_MAX_IN_FLIGHT (0: 1). Request n starts only after request
     * n - in_flight has been signalled, so per-request data a stage writes
     * needs in_flight copies (index them by t->slot), and data the next
     * request reads (a `previous` dependency) in_flight + 1 (index them by
     * t->seq % (in_flight + 1)). Results are signalled in order. */
    uint32_t in_flight;
    /* CW_FUSED_DATAFLOW: the GPU-side watchdog. A tile that waits longer
     * than this for what it reads stops the loop (exit
     * CW_RESIDENT_EXIT_STALLED; cw_resident_info.stall says which tile
     * waited on which). 0: 5000 ms; UINT32_MAX: no watchdog. */
    uint32_t watchdog_ms;
    uint8_t reserved[24];        /* zero */
} cw_resident_fused;

/*
 * Makes r a fused loop running `fused` (or, with NULL, a graph loop again).
 * Compiles the stages with the loop's kernel for r's device (the library's
 * kernel cache: a second call with the same source compiles nothing),
 * loads it into r's context and checks that the grid fits co-resident
 * (blocks an SM holds, from the driver's occupancy calculator, times the
 * context's SMs: a green partition's own). Nothing is kept from fused
 * (its strings may go). cw_resident_build then runs the kernel once with
 * the stop already asked (loading it), cw_resident_launch launches it.
 * Not with a workload or a data-ready handler (remove them first). Call
 * from the thread that changes the loop; loading code, it is refused while
 * any loop runs in the process (as cw_resident_build).
 *
 * Returns:
 *   CW_SUCCESS                 the loop is fused (or a graph loop again).
 *   CW_ERROR_INVALID_ARGUMENT  r is NULL; source or stages is NULL;
 *                              stage_count 0 or above
 *                              CW_RESIDENT_MAX_FUSED_STAGES; a stage name
 *                              NULL, not an identifier, or not in the
 *                              source; options NULL with option_count > 0,
 *                              or an option NULL or refused (as
 *                              cw_program_compile); block_threads above
 *                              1024; nonzero reserved bytes; the loop's
 *                              settings trace or overlap; a grid that does
 *                              not fit co-resident (the detail gives the
 *                              most that fit).
 *   CW_ERROR_INVALID_HANDLE    r is not a live loop.
 *   CW_ERROR_INVALID_STATE     the loop is launched; it has a workload or a
 *                              data-ready handler; a loop runs in the
 *                              process (loading code would wait for it).
 *   CW_ERROR_COMPILE           NVRTC refused the source (the detail has the
 *                              log's first lines; cw_jit_get_compile_log()
 *                              all of it).
 *   CW_ERROR_NOT_SUPPORTED     no NVRTC; a driver without cooperative
 *                              launch or the occupancy calculator.
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out.
 *   CW_ERROR_DRIVER            the driver refused the code or a query
 *                              (detail: the call).
 */
CW_API cw_status cw_resident_set_fused(cw_resident *r, const cw_resident_fused *fused);

/*
 * The text of include/cuweave/resident_device.h, for NVRTC programs: pass
 * it as an in-memory header named "cuweave/resident_device.h" (cw_header).
 * Library-wide (it needs no loop and no driver): built into the library,
 * as the built-in kernels are (cw_builtin_*).
 *
 * Returns: the text, static (owned by the library); never NULL.
 */
CW_API const char *cw_builtin_get_resident_header(void);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_RESIDENT_H */
