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
 *   unsigned long long ctl;
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
 *   cw_resident_wait_result(r, seq, 1000);            (or poll cw_resident_result_ready)
 *   ... read the output ...
 *   cw_resident_tear_down(r, 1000);
 *   cw_resident_destroy(&r);
 *
 * The doorbell is a count, not a flag: cw_resident_data_ready adds one
 * request and returns its number (1, 2, 3, ...); the loop serves requests
 * one per iteration, in order, each exactly once, however fast they come;
 * the number of the last finished request is written by the GPU where the
 * host reads it without a driver call. See docs/resident.md for how the
 * loop is built and why no request can be lost or merged.
 *
 * Threading: cw_resident_data_ready, cw_resident_result_ready,
 * cw_resident_wait_result, cw_resident_is_launched, cw_resident_get_state
 * and cw_resident_get_stats may be called from any number of threads at
 * once, also while another thread launches or tears down. The other calls
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
 * runs. See docs/resident.md, "What waits for a running loop".
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
    CW_RESIDENT_GATE_KERNELS = 1
} cw_resident_gate;

typedef struct cw_resident_settings {
    /* Tear the loop down by itself this long after it starts, measured on
     * the GPU's clock (no host thread involved). 0: run until torn down.
     * Default 0. */
    uint32_t timeout_ms;
    /* Sleep between checks when idle, in microseconds, at most 1000000.
     * 0: never sleep (spin: lowest latency, one GPU thread always busy).
     * Default 500. */
    uint32_t sleep_interval_us;
    cw_resident_sleep sleep_mode; /* default CW_RESIDENT_SLEEP_FIXED */
    /* CW_RESIDENT_SLEEP_ADAPTIVE: how long to keep checking without
     * sleeping after each served request, in microseconds, at most 1000000.
     * Default 200. */
    uint32_t spin_us;
    /* Nonzero: a system-wide memory fence (__threadfence_system) after the
     * workload and before the result signal, so that every write of the
     * workload, also to mapped host memory, is visible to the host before
     * cw_resident_result_ready says so. Costs latency; needed when the
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
    cw_resident_gate gate; /* default CW_RESIDENT_GATE_NODE */
    /* Priority of the stream the loop runs on, clamped into the context's
     * range. Default: the greatest (most urgent) priority the context has
     * (use_default_priority 1). */
    int priority;
    int use_default_priority;
    /* How long cw_resident_destroy waits for a launched loop to stop.
     * Default 5000. */
    uint32_t destroy_timeout_ms;
    /* 1: overlap the launches inside an iteration (programmatic dependent
     * launch, compute capability 9.0 or newer): each workload and handler
     * kernel that follows a kernel is launched as soon as that kernel has
     * started, and waits on the GPU for it to finish, so a kernel boundary
     * costs less (docs/resident.md has the figures). Needs
     * CW_RESIDENT_GATE_KERNELS, and every kernel of the workload and of the
     * handler must call cw_resident_skip(ctl) or cw_resident_wait() in
     * every thread before it touches memory that earlier work of the
     * iteration writes, and be compiled for compute capability 9.0 or newer
     * (the wait is compiled out of older targets). While the loop idles, the
     * first workload kernel is already launched and waiting: its blocks
     * that fit hold their SMs.
     * Default 0. */
    uint32_t overlap;
    /* 1: trace the iteration's stages, so that a device fault names the
     * stage it happened in (docs/resident.md, "Which stage faulted"). The
     * workload and the data-ready handler are stages of their own, and a
     * capture function may begin and end stages inside them
     * (cw_resident_stage_begin); a resident pipeline makes one per
     * operator. Each stage adds two one-thread kernels to every iteration
     * that runs it (its begin and end marks, written to mapped host
     * memory), so it costs latency: for finding faults, not for
     * production. Cannot be combined with overlap (CW_ERROR_INVALID_ARGUMENT).
     * Default 0. */
    uint32_t trace;
    uint8_t reserved[40];
} cw_resident_settings;

/* Fills *s with the defaults above. NULL is ignored. */
CW_API void cw_resident_settings_default(cw_resident_settings *s);

/*
 * Makes a loop on ctx (any context: a device's primary context, an external
 * one, a green partition): its control block (mapped host memory, one
 * page), its device block (cw_resident_get_ctl), its input slots and two
 * streams of ctx. Keeps ctx alive. settings may be NULL for the defaults.
 *
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (a setting out of range:
 * the detail names it); CW_ERROR_INVALID_HANDLE; CW_ERROR_NO_DRIVER;
 * CW_ERROR_NOT_SUPPORTED without conditional nodes or the library API;
 * CW_ERROR_OUT_OF_MEMORY; the driver's error otherwise. Nothing is left
 * allocated on failure.
 */
CW_API cw_status cw_resident_create(cw_resident **out, cw_context *ctx, const cw_resident_settings *settings);

/*
 * Tears a launched loop down (waiting up to settings.destroy_timeout_ms),
 * then frees everything and sets *r to NULL. Accepts NULL and *r NULL
 * (CW_SUCCESS). While another loop runs in the process, freeing would wait
 * for it: then the handle is gone at once and its memory and graph are
 * freed when the last running loop is seen to stop.
 *
 * Returns CW_SUCCESS; CW_ERROR_INVALID_HANDLE; CW_ERROR_TIMEOUT when the
 * loop did not stop in time (a workload still running, or the GPU held by
 * other work): then nothing is freed (the GPU may still use it) and *r is
 * left as it was: try again, or end the process. After a device fault
 * (CW_ERROR_DEVICE_FAULT from the stream) everything is freed as well.
 */
CW_API cw_status cw_resident_destroy(cw_resident **r);

/*
 * Changes the settings (input_slots, input_bytes and the loop's stream
 * priority excepted: they are fixed at creation; use_default_priority, and
 * priority where it is 0, must be as they were). The settings are built
 * into the loop's graph at launch, so they can change only while the loop
 * is not launched: CW_ERROR_INVALID_STATE while it is ("tear the loop down
 * first"). CW_ERROR_INVALID_ARGUMENT for a value out of range, a different
 * input layout or a different priority.
 */
CW_API cw_status cw_resident_configure(cw_resident *r, const cw_resident_settings *settings);

/* The settings in force. */
CW_API cw_status cw_resident_get_settings(const cw_resident *r, cw_resident_settings *settings);

/*
 * The device address (a CUdeviceptr) of the loop's device block: a
 * cw_resident_ctl (include/cuweave/resident_device.h) to pass to kernels of
 * the workload and the data-ready handler, which read the request number and
 * input slot from it and mark data ready. Valid for the life of the loop.
 */
CW_API cw_status cw_resident_get_ctl(const cw_resident *r, unsigned long long *ctl);

/* Writes the loop's context (borrowed: valid while the loop lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_resident_get_context(const cw_resident *r, cw_context **ctx);

/* The device address of input slot `slot` (0 <= slot < input_slots). */
CW_API cw_status cw_resident_get_input(const cw_resident *r, uint32_t slot, unsigned long long *dptr);

/*
 * Sets the workload: what one iteration runs for one request. The graph is
 * copied (it may be changed or destroyed afterwards); it must belong to the
 * loop's context and, as the driver requires of graphs inside conditional
 * nodes, contain only kernels, copies, memsets, empty nodes and child graphs
 * (no conditional nodes, no host functions, no event nodes). Capture it on
 * any stream of the loop's context. Before launch only
 * (CW_ERROR_INVALID_STATE after). A loop with no workload serves requests
 * with an empty iteration (useful to measure the loop itself).
 */
CW_API cw_status cw_resident_set_workload(cw_resident *r, const cw_graph *workload);

/*
 * Enqueues part of a loop's iteration on s (which captures into the loop's
 * graph): launches, copies, memsets on s and on streams forked from it
 * (joined back before returning). user is what was given with it. Return
 * CW_SUCCESS, or an error to make cw_resident_launch fail with it.
 */
typedef cw_status (*cw_resident_capture_fn)(cw_stream *s, void *user);

/*
 * Sets the workload as what fn enqueues: fn is called by cw_resident_launch
 * when it builds the graph, once per copy of the iteration
 * (settings.unroll times), with s capturing straight into the loop's graph.
 * The work then sits in the iteration itself instead of inside a child
 * graph node, which is faster to start on the GPU. fn NULL removes the
 * workload. Before launch only (CW_ERROR_INVALID_STATE after). Replaces a
 * workload set with cw_resident_set_workload, and the other way round.
 */
CW_API cw_status cw_resident_set_workload_fn(cw_resident *r, cw_resident_capture_fn fn, void *user);

/* As cw_resident_set_workload_fn, for the data-ready handler. */
CW_API cw_status cw_resident_set_handler_fn(cw_resident *r, cw_resident_capture_fn fn, void *user);

/*
 * Sets (or, with NULL, removes) the data-ready handler: a graph that runs at
 * the start of every iteration and whose kernels call
 * cw_resident_mark_data_ready(ctl) when data has arrived (by a GPU-direct
 * path, say). An iteration whose handler marked data ready serves one
 * request: it gets the next sequence number, runs the workload and
 * signals. With a handler, requests come from it only:
 * cw_resident_data_ready is refused. Same rules as the workload; before
 * launch only.
 */
CW_API cw_status cw_resident_set_handler(cw_resident *r, const cw_graph *handler);

/* cw_resident_stage_begin's stage when the loop does not trace. */
#define CW_RESIDENT_NO_STAGE 0xffffffffu

/*
 * Begins a traced stage named `name` on s, inside a capture function of the
 * loop (cw_resident_set_workload_fn, cw_resident_set_handler_fn) while it
 * builds: s is the stream the function was given, or one forked from it.
 * The loop captures a one-thread kernel there that marks the stage begun
 * when it runs; cw_resident_stage_end marks it ended. When a device fault
 * stops the loop, the error of the call that sees it
 * (cw_resident_wait_result, cw_resident_tear_down, cw_resident_destroy)
 * names the stage begun last of those that had begun and not ended, and
 * lists the others running (stages on parallel branches run together; the
 * fault stops them all, so any of them may hold the faulting kernel).
 * Stages nest: the enclosing workload or handler stage stays open too.
 * name: up to 63 bytes are kept. *stage receives the stage's number for
 * cw_resident_stage_end. Every stage begun must be ended before the
 * capture function returns: the build fails with CW_ERROR_INVALID_STATE,
 * naming the stage, otherwise.
 * When the loop does not trace (settings.trace 0), nothing is captured,
 * *stage is CW_RESIDENT_NO_STAGE and CW_SUCCESS returns: capture
 * functions need not know whether the loop traces.
 * Returns CW_ERROR_INVALID_ARGUMENT (NULL or empty name, NULL stage);
 * CW_ERROR_INVALID_HANDLE; CW_ERROR_INVALID_STATE outside the loop's
 * build, or when s is not capturing into it; CW_ERROR_OUT_OF_MEMORY past
 * 1024 stages in one build (every copy of the iteration counts); the
 * launch's error otherwise. Called on the thread the capture function runs
 * on.
 */
CW_API cw_status cw_resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage);

/*
 * Ends stage (from cw_resident_stage_begin) on s, which must be where its
 * work ends: s itself, or a stream the work was joined into.
 * CW_RESIDENT_NO_STAGE does nothing. Returns CW_ERROR_INVALID_ARGUMENT
 * for a stage this build did not begin or one ended already; otherwise as
 * cw_resident_stage_begin.
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
 * build every loop, then launch them.
 * CW_ERROR_INVALID_STATE while the loop is launched, and when a build is
 * needed while any loop runs in the process (it would wait for that loop).
 */
CW_API cw_status cw_resident_build(cw_resident *r);

/*
 * Builds the loop's graph (when something changed since the last build),
 * instantiates it and launches it on the loop's own stream. Requests not
 * served by an earlier launch are dropped. Returns CW_ERROR_INVALID_STATE when the loop is
 * launched already, or needs a build while another loop runs (build it
 * first: cw_resident_build); the driver's error when building or launching
 * fails (nothing is left launched then).
 */
CW_API cw_status cw_resident_launch(cw_resident *r);

/*
 * *launched = 1 from a successful cw_resident_launch until the loop has
 * stopped on the GPU (torn down, or its timeout expired), else 0.
 */
CW_API cw_status cw_resident_is_launched(const cw_resident *r, int *launched);

/*
 * Requests one iteration: one atomic add on the doorbell in host memory, no
 * driver call, no lock. *seq (may be NULL) receives the request's number.
 * Write the request's input before calling (any write the host has finished:
 * a synchronous copy, a finished stream, a store to mapped memory).
 * Returns CW_ERROR_INVALID_STATE when the loop is not launched or has a
 * data-ready handler.
 */
CW_API cw_status cw_resident_data_ready(cw_resident *r, uint64_t *seq);

/*
 * *ready = 1 when request seq has finished (its result signal was written),
 * else 0. No driver call, no lock.
 * Returns CW_ERROR_INVALID_ARGUMENT for seq 0 or a request never made (host
 * requests) ; CW_ERROR_INVALID_STATE (with *ready 0) when the loop stopped
 * before serving seq, so it never will.
 */
CW_API cw_status cw_resident_result_ready(const cw_resident *r, uint64_t seq, int *ready);

/*
 * Waits until request seq has finished: spins for a few microseconds, then
 * yields the CPU between checks. timeout_ms 0 checks once.
 * Returns CW_SUCCESS; CW_ERROR_TIMEOUT (the detail gives the requests made
 * and served); CW_ERROR_INVALID_STATE when the loop stopped before serving
 * seq; CW_ERROR_DEVICE_FAULT when the loop's stream reports a fault (asked
 * about once the wait has lasted a millisecond): the detail names the
 * request the loop was serving and, with settings.trace, the stage;
 * CW_ERROR_INVALID_ARGUMENT as
 * cw_resident_result_ready.
 * With a data-ready handler, seq counts the iterations that served data.
 */
CW_API cw_status cw_resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms);

/*
 * The device address of the input slot the next request (the one the next
 * cw_resident_data_ready makes) will read, once that slot is free: waits up
 * to timeout_ms until the request that used it before has finished. Fill it,
 * then call cw_resident_data_ready. For one producer thread.
 * CW_ERROR_INVALID_STATE without input slots or when not launched;
 * CW_ERROR_TIMEOUT.
 */
CW_API cw_status cw_resident_next_input(cw_resident *r, uint32_t timeout_ms, unsigned long long *dptr);

/*
 * Asks the loop to stop and waits up to timeout_ms until its stream is
 * idle. The loop stops at its next check of the doorbell (within one
 * sleep interval when idle; after the running iteration when busy).
 * Requests not yet served are dropped. A loop that is not launched returns
 * CW_SUCCESS at once.
 * Returns CW_SUCCESS; CW_ERROR_TIMEOUT when it has not stopped yet (the
 * request to stop stays: call again to keep waiting); CW_ERROR_DEVICE_FAULT
 * when the loop's stream reports a fault (the loop is over; with
 * settings.trace the detail names the stage).
 */
CW_API cw_status cw_resident_tear_down(cw_resident *r, uint32_t timeout_ms);

typedef enum cw_resident_state {
    CW_RESIDENT_NOT_LAUNCHED = 0, /* made, not launched yet */
    CW_RESIDENT_RUNNING = 1,      /* launched, looping on the GPU */
    CW_RESIDENT_STOPPING = 2,     /* asked to stop, not stopped yet */
    CW_RESIDENT_STOPPED = 3       /* stopped (see cw_resident_stats.exit) */
} cw_resident_state;

typedef enum cw_resident_exit {
    CW_RESIDENT_EXIT_NONE = 0,      /* has not stopped */
    CW_RESIDENT_EXIT_TEAR_DOWN = 1, /* cw_resident_tear_down (or destroy) */
    CW_RESIDENT_EXIT_TIMEOUT = 2,   /* settings.timeout_ms expired (on the GPU's clock) */
    CW_RESIDENT_EXIT_FAULT = 3      /* the stream reported a device fault */
} cw_resident_exit;

CW_API cw_status cw_resident_get_state(const cw_resident *r, cw_resident_state *state);

typedef struct cw_resident_stats {
    uint64_t requested;   /* number of the last request made (host requests) */
    uint64_t completed;   /* number of the last request finished */
    uint64_t iterations;  /* requests served, over every launch */
    uint64_t idle_polls;  /* checks that found no request, over every launch */
    uint64_t launches;    /* successful cw_resident_launch calls */
    /* Per-iteration time on the GPU's clock, in ns, from the check that
     * found the request to the start of the result signal (so: starting
     * the workload, the workload, and the node transitions). Min and max
     * over every iteration; the median over the last median_window ones
     * (at most 4096). 0 when none ran. */
    uint64_t iter_min_ns, iter_median_ns, iter_max_ns;
    uint64_t median_window;
    uint64_t run_ns;      /* GPU time from the start of the last launch to its stop (0 while it runs) */
    cw_resident_exit exit; /* why the last launch stopped */
    uint8_t reserved[44];
} cw_resident_stats;

/*
 * Reads the statistics the GPU keeps (one small copy on the loop's second
 * stream; the loop keeps running). Thread-safe.
 */
CW_API cw_status cw_resident_get_stats(cw_resident *r, cw_resident_stats *stats);

/*
 * The text of include/cuweave/resident_device.h, for NVRTC programs: pass
 * it as an in-memory header named "cuweave/resident_device.h" (cw_header).
 * Static; never NULL.
 */
CW_API const char *cw_resident_device_header(void);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_RESIDENT_H */
