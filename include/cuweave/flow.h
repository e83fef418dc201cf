/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: operators, pipelines and their stream rules.
 *
 * An operator is a compute callback with named input and output ports. A
 * pipeline holds operators and connections (an output port to an input
 * port) forming any directed acyclic graph: several sources, fan-out,
 * fan-in. It runs in one of two ways:
 *  - the CPU-driven executor (cw_pipeline_run): compute calls in
 *    topological order, once per iteration, on the calling thread or on a
 *    set of worker threads; GPU work is ordered between operators with
 *    events, never by blocking the CPU;
 *  - the resident pipeline (cw_pipeline_make_resident): every operator is
 *    GPU-resident, and their compute calls are captured once into a
 *    resident loop's iteration, branches as parallel graph branches;
 *  - the fused pipeline (cw_pipeline_make_fused): every operator is a
 *    stage (cw_operator_create_stage), a device function cut into tiles,
 *    and the whole DAG runs as one persistent kernel of a resident loop
 *    in its tile dataflow mode (resident.h, CW_FUSED_DATAFLOW), each tile
 *    waiting only for the producers' tiles it reads.
 *
 * Messages. An operator emits a message on an output port; the pipeline
 * delivers it to every input connected to that port. A message carries a
 * value (any pointer, not owned), an optional cw_buffer (a reference held
 * while the message lives) and at most one stream: the stream its data was
 * produced on. Messages live for one iteration: those delivered in
 * iteration n are dropped when iteration n ends.
 *
 * The stream rules (docs/pipelines.md has the timeline):
 *  - cw_io_receive_stream(io, port) returns the operator's internal stream,
 *    leased once from the operator's pool and kept across compute calls,
 *    after making it wait (cuStreamWaitEvent, no CPU blocking) for the work
 *    of every message on that port: each message carries the event its
 *    producer's compute call ended with on its stream (one cuEventRecord
 *    per stream per call, made when the call returned). It makes the
 *    stream's context current on the calling thread, and from then on the
 *    operator's outputs carry the internal stream. The thread's current
 *    context is asked of the driver once per run and thread (not once per
 *    call): a compute callback that makes another context current itself
 *    puts back the one it found before it returns or calls
 *    cw_io_receive_stream again (push and pop, as FFmpeg's CUDA code does,
 *    keep to that; cuweave's own calls always do). Calling it for several
 *    ports returns the same stream, ordered behind all of them. Unlike
 *    Holoscan, it orders behind the port's messages whether or not
 *    cw_io_receive was called first.
 *  - Without a pool (the operator was made with no_internal_stream) or with
 *    its pool exhausted, the first upstream stream met is used as the
 *    internal stream for that compute call (and outputs carry it); with
 *    neither a pool stream nor an upstream stream, the call returns a
 *    wrapper of the context's legacy NULL stream and outputs carry no
 *    stream: the behaviour Holoscan documents for that case. Either way
 *    the call succeeds (the detail is left alone); an exhausted pool is
 *    logged at CW_LOG_WARNING the first time an operator meets it.
 *  - Every operator without its own pool uses the pipeline's pool: the one
 *    given in the settings, else a lease pool the pipeline makes
 *    (unbounded, non-blocking streams, priority 0).
 *  - The manual calls: cw_io_receive_many (every message of a port, with
 *    the stream each was made on, no ordering), cw_io_get_stream (a named extra stream, kept across calls),
 *    cw_io_set_output_stream (the stream an output carries; the last call
 *    wins), cw_stream_wait (order a stream behind another), and
 *    cw_stream_get_info (the device and context of a stream).
 *
 * Buffers (buffer.h): after each compute call the pipeline records, on
 * every buffer the operator received, emitted or allocated with
 * cw_io_alloc, a use by every stream the operator touched in that call
 * (internal, named, output streams). A buffer is then freed only after all
 * of them: a sink that only reads needs no code for it.
 *
 * Threading: build a pipeline (add, connect, settings) from one thread;
 * cw_pipeline_run from one thread at a time; cw_pipeline_stop and
 * cw_pipeline_get_info from any thread. The cw_io calls are valid only
 * inside the compute call they were given to, on its thread.
 */
#ifndef CUWEAVE_FLOW_H
#define CUWEAVE_FLOW_H

#include "cuweave/buffer.h"
#include "cuweave/common.h"
#include "cuweave/resident.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_operator cw_operator;
typedef struct cw_pipeline cw_pipeline;
typedef struct cw_io cw_io;

/* Names of operators and ports: 1 to 63 bytes of [A-Za-z0-9_.-]. */
#define CW_NAME_MAX 63

/* Port flags. */
#define CW_PORT_OPTIONAL 0x1u /* input: compute runs without a message on it */
#define CW_PORT_MANY 0x2u     /* input: any number of connections (one message each) */

typedef struct cw_port_settings {
    unsigned flags; /* CW_PORT_* (input ports only); default 0: required, one connection */
    /* Resident pipelines (and every run once any port declares memory): the
     * size in bytes of the buffer this port wants on its connection, or 0. */
    size_t bytes;
    /* ... or device memory the operator supplies for the connection, or 0.
     * The connection rules: see cw_pipeline_make_resident. */
    cw_devptr dptr;
    uint8_t reserved[40]; /* zero */
} cw_port_settings;

/*
 * Fills *s with the defaults (required, no memory). NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_port_settings_default(cw_port_settings *s);

/*
 * What an operator does. compute is required; the others may be NULL.
 * Return CW_SUCCESS or an error from compute and start: an error stops the
 * run, and cw_pipeline_run returns it with a detail naming the operator
 * (and, when the error was a driver call's, that call and its CUresult).
 */
typedef struct cw_operator_ops {
    /* Called once before the operator's first compute of a run (also of a
     * resident capture). */
    cw_status (*start)(cw_operator *op, void *user);
    /* One compute call: receive, launch, emit through io. */
    cw_status (*compute)(cw_io *io, void *user);
    /* Called once when a run that started the operator ends (also after a
     * failure). */
    void (*stop)(cw_operator *op, void *user);
    /* Called when the operator is destroyed (frees user, say). */
    void (*destroy)(void *user);
    uint8_t reserved[32]; /* zero */
} cw_operator_ops;

/* An operator's settings. Booleans (int) are 0 for false and any other
 * value for true. */
typedef struct cw_operator_settings {
    /* Where the internal stream and named streams come from; NULL: the
     * pipeline's pool. The pool must outlive the operator. A pool on a
     * green partition's context puts the operator's work there. */
    cw_stream_pool *pool;
    /* Boolean: never lease an internal stream (Holoscan's allocate=false):
     * the first upstream stream serves as it. Default 0. */
    int no_internal_stream;
    /* Boolean: the executor runs compute only after the GPU has finished
     * the work of every input message's stream (a future per stream;
     * Holoscan's CudaStreamCondition). For operators that read inputs on
     * the CPU. Default 0. */
    int wait_inputs;
    /* Boolean: a GPU-resident operator: its compute only enqueues GPU work
     * on the stream cw_io_receive_stream returns, using port memory
     * (cw_io_get_port_ptr). Needed by cw_pipeline_make_resident; such an
     * operator also runs under cw_pipeline_run, where it emits on its
     * outputs as any operator does (an empty message: "ready", with its
     * stream) so that its consumers run and are ordered. Default 0. */
    int resident;
    uint8_t reserved[44]; /* zero */
} cw_operator_settings;

/*
 * Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_operator_settings_default(cw_operator_settings *s);

/*
 * Makes an operator named `name` (copied) with the callbacks in ops
 * (copied) and user data passed to them. settings may be NULL. Needs no
 * driver. *out is the caller's until cw_pipeline_add gives it to a
 * pipeline: cw_operator_destroy before that.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new operator.
 *   CW_ERROR_INVALID_ARGUMENT  out or ops is NULL; a bad name (the detail
 *                              says why); compute is NULL; nonzero reserved
 *                              bytes in ops or settings.
 *   CW_ERROR_INVALID_HANDLE    settings->pool is not NULL and not a live
 *                              pool.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_operator_create(cw_operator **out, const char *name, const cw_operator_ops *ops, void *user,
                                    const cw_operator_settings *settings);

/*
 * Destroys an operator that was not added to a pipeline (ops.destroy is
 * called) and sets *op to NULL; accepts NULL and *op NULL. An operator
 * added to a pipeline belongs to it and goes with it: then *op is set to
 * NULL, the operator stays in its pipeline, and a CW_LOG_WARNING is
 * logged. A handle that is not a live operator is ignored: *op is set to
 * NULL and a CW_LOG_WARNING logged. Neither changes cw_last_error.
 *
 * Returns: nothing.
 */
CW_API void cw_operator_destroy(cw_operator **op);

/*
 * Declares an input port. settings may be NULL for the defaults. Inputs
 * and outputs share one namespace per operator. Before the operator is
 * added to a pipeline only.
 *
 * Returns:
 *   CW_SUCCESS                 the port is declared.
 *   CW_ERROR_INVALID_ARGUMENT  op is NULL; a bad or duplicate name; unknown
 *                              flags; both bytes and dptr set; nonzero
 *                              reserved bytes (the detail names the
 *                              operator and the port).
 *   CW_ERROR_INVALID_HANDLE    op is not a live operator.
 *   CW_ERROR_INVALID_STATE     op is in a pipeline already.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_operator_add_input(cw_operator *op, const char *name, const cw_port_settings *settings);

/*
 * Declares an output port: as cw_operator_add_input, and port flags are
 * refused (they apply to inputs).
 *
 * Returns:
 *   CW_SUCCESS                 the port is declared.
 *   CW_ERROR_INVALID_ARGUMENT  as cw_operator_add_input; flags are not 0.
 *   CW_ERROR_INVALID_HANDLE    op is not a live operator.
 *   CW_ERROR_INVALID_STATE     op is in a pipeline already.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_operator_add_output(cw_operator *op, const char *name, const cw_port_settings *settings);

/* ---- pipelines ---------------------------------------------------------- */

typedef struct cw_pipeline_settings {
    /* The pool of operators that have none; NULL: the pipeline makes a lease
     * pool on its context (unbounded, non-blocking, priority 0). */
    cw_stream_pool *pool;
    /* Host threads of the executor: 0 or 1 runs every compute call on the
     * thread of cw_pipeline_run; n > 1 (at most 256) starts n workers per
     * run, and operators whose inputs are ready run at the same time.
     * Default 1. */
    unsigned threads;
    /* How many iterations the GPU may lag behind the host: before
     * iteration i starts, cw_pipeline_run waits (on the host) until the GPU
     * has finished the work of iteration i - max_in_flight on every stream
     * its compute calls used. Iterations are counted over every run, so a
     * run per frame is bounded the same way. Bounds the memory of buffers
     * in flight, and tells the buffer cache which buffers are free without
     * asking the driver. 0: no bound (only the driver's queue limits the
     * lag). Default 4. */
    unsigned max_in_flight;
    uint8_t reserved[48]; /* zero */
} cw_pipeline_settings;

/*
 * Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_pipeline_settings_default(cw_pipeline_settings *s);

/*
 * Makes an empty pipeline on ctx (kept alive by it). settings may be NULL
 * for the defaults. *out is the caller's: cw_pipeline_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new pipeline.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; nonzero reserved bytes;
 *                              threads above 256.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context; settings->pool is
 *                              not NULL and not a live pool.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out, or the driver's.
 *   CW_ERROR_DRIVER            the driver refused the default pool's first
 *                              stream (detail: the call).
 */
CW_API cw_status cw_pipeline_create(cw_pipeline **out, cw_context *ctx, const cw_pipeline_settings *settings);

/*
 * Destroys the pipeline, its operators (their ops.destroy), the messages
 * still held, the operators' internal and named streams (back to their
 * pools), its default pool and its port memory; sets *p to NULL; accepts
 * NULL and *p NULL. Port memory goes when no resident loop runs
 * (resident.h): destroy the pipeline's resident loop first.
 * While cw_pipeline_run runs (on another thread, or this call is made from
 * a compute or start callback), the run is asked to stop
 * (cw_pipeline_stop) and the pipeline is destroyed by cw_pipeline_run as it
 * returns; the handle is dead at once. A handle that is not a live
 * pipeline is ignored: *p is set to NULL and a CW_LOG_WARNING logged
 * (cw_last_error is left as it was).
 *
 * Returns: nothing.
 */
CW_API void cw_pipeline_destroy(cw_pipeline **p);

/*
 * Adds an operator; the pipeline owns it from now on (the handle stays
 * valid, borrowed, until the pipeline is destroyed).
 *
 * Returns:
 *   CW_SUCCESS                 op is the pipeline's.
 *   CW_ERROR_INVALID_ARGUMENT  p or op is NULL; the pipeline has an
 *                              operator of that name (the detail names it).
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline; op is not a live
 *                              operator.
 *   CW_ERROR_INVALID_STATE     op belongs to a pipeline already; the
 *                              pipeline is running; its port memory is set
 *                              up (a run with port memory,
 *                              cw_pipeline_make_resident or
 *                              cw_pipeline_make_fused: operators and
 *                              connections are fixed from then on; op stays
 *                              the caller's).
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_pipeline_add(cw_pipeline *p, cw_operator *op);

/*
 * Connects output port from_port of operator from_op to input port to_port
 * of operator to_op (names).
 *
 * Returns:
 *   CW_SUCCESS                 connected.
 *   CW_ERROR_INVALID_ARGUMENT  p or a name is NULL; an unknown operator or
 *                              port, an input given as the source or an
 *                              output as the target, a connection made
 *                              twice, an input already connected that is
 *                              not CW_PORT_MANY, an operator connected to
 *                              itself (the detail names the operator and
 *                              port).
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 *   CW_ERROR_INVALID_STATE     the pipeline is running, or its port memory
 *                              is set up (connections are fixed then).
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_pipeline_connect(cw_pipeline *p, const char *from_op, const char *from_port, const char *to_op,
                                     const char *to_port);

/*
 * Checks the pipeline as a run would: at least one operator, no cycle,
 * every required input connected, the port memory rules when any port
 * declares memory (see cw_pipeline_make_resident). A connection into a
 * fused stage's port read with `previous` (cw_port_read) orders nothing
 * and makes no cycle. Needs no driver.
 *
 * Returns:
 *   CW_SUCCESS                 the pipeline can run.
 *   CW_ERROR_INVALID_ARGUMENT  p is NULL; no operator; a cycle (the detail
 *                              names the operators on it); a required input
 *                              not connected or a port memory rule broken
 *                              (the detail names the operator and port).
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_pipeline_check(cw_pipeline *p);

/*
 * Runs `iterations` iterations (0: until cw_pipeline_stop). Each iteration
 * calls compute once for every operator whose required inputs all received
 * a message in that iteration (sources always), in topological order, or
 * with settings.threads > 1 on worker threads as soon as the upstream
 * operators' compute calls have returned. cw_pipeline_stop ends the run
 * after the iteration in progress.
 * The first error of a start or compute callback (whatever status it
 * returns), of a wait for its inputs, or of the pipeline's own driver
 * calls stops the run after the iteration in progress (no new compute call
 * starts), every stop callback runs, messages are dropped, and the
 * pipeline can run again. The call returns that status with the detail
 * "operator 'B' (compute): <what it said>", and the driver call and its
 * CUresult in detail.driver_call and detail.cu_result when a driver call
 * failed (inside compute too, on any thread).
 * The context current on the calling thread when the run started is current
 * again when it returns (a run whose compute calls found it current makes
 * one cuCtxGetCurrent and no switch). Returns when the compute calls have returned, not
 * when the GPU has finished: cw_pipeline_synchronize waits for that.
 *
 * Returns:
 *   CW_SUCCESS                 the iterations ran (or the run was stopped).
 *   CW_ERROR_INVALID_ARGUMENT  p is NULL; cw_pipeline_check failed; an
 *                              operator is a fused stage
 *                              (cw_operator_create_stage: no compute; the
 *                              detail names it).
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 *   CW_ERROR_INVALID_STATE     a run is in progress.
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out (port memory,
 *                              cw_io_alloc, the executor's threads).
 *   CW_ERROR_DEVICE_FAULT      the GPU faulted (the detail names the
 *                              iteration and the operators whose work was
 *                              in flight).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 */
CW_API cw_status cw_pipeline_run(cw_pipeline *p, uint64_t iterations);

/*
 * Blocks until the GPU has finished the work of every operator's last
 * compute call (on every stream it used). Call it after cw_pipeline_run has
 * returned.
 *
 * Returns:
 *   CW_SUCCESS                 the GPU has finished.
 *   CW_ERROR_INVALID_ARGUMENT  p is NULL.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 *   CW_ERROR_INVALID_STATE     a run is in progress.
 *   CW_ERROR_DEVICE_FAULT      the work faulted (the detail names the
 *                              operator, the driver call and its CUresult).
 *   CW_ERROR_DRIVER            the wait failed otherwise (detail: the call).
 */
CW_API cw_status cw_pipeline_synchronize(cw_pipeline *p);

/*
 * Asks a run to end after the iteration in progress. Any thread, also from
 * a compute call. Lock-free.
 *
 * Returns:
 *   CW_SUCCESS                 asked (also when no run is in progress).
 *   CW_ERROR_INVALID_ARGUMENT  p is NULL.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 */
CW_API cw_status cw_pipeline_stop(cw_pipeline *p);

typedef struct cw_pipeline_info {
    cw_context *context; /* the pipeline's context, borrowed: valid while the pipeline lives */
    uint64_t iterations; /* iterations finished, all runs */
    uint64_t computes;   /* compute calls returned, all runs */
    uint64_t skipped;    /* compute calls not made: a required input had no message */
    uint64_t fallbacks;  /* receive_stream calls that found no pool stream and used an upstream one */
    size_t operators;
    size_t connections;
    uint64_t buffers_allocated; /* cw_io_alloc buffers made (cuMemAllocFromPoolAsync) */
    uint64_t buffers_reused;    /* cw_io_alloc buffers recycled from the pipeline's cache */
    uint64_t peer_copies;       /* buffers moved to a consumer on another device (cuMemcpyPeerAsync) */
    uint8_t reserved[48];       /* zeroed */
} cw_pipeline_info;

/*
 * Describes the pipeline: its context and its counters. No driver call;
 * any thread, also while it runs (the counters are read one by one).
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the pipeline.
 *   CW_ERROR_INVALID_ARGUMENT  p or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 */
CW_API cw_status cw_pipeline_get_info(const cw_pipeline *p, cw_pipeline_info *info);

/*
 * The operator named `name`, borrowed (valid while the pipeline lives). No
 * driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *op is the operator.
 *   CW_ERROR_INVALID_ARGUMENT  p, name or op is NULL; the pipeline has no
 *                              operator of that name.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 */
CW_API cw_status cw_pipeline_get_operator(const cw_pipeline *p, const char *name, cw_operator **op);

/*
 * Makes the pipeline the workload of resident loop r (cw_resident_set_workload_fn):
 * when the loop builds, each operator's compute is called once per copy of
 * the iteration, in topological order, on its own stream forked from the
 * capture, made to wait for the streams of its upstream operators: the
 * iteration's graph has one branch per operator, with an edge per
 * connection, so independent operators run in parallel on the GPU.
 * Several sources are allowed.
 * Every operator must be resident (settings.resident). Port memory is set
 * up here, one buffer per output port shared by every input connected to
 * it, by these rules (each error names the operators and ports):
 *  - every port of the group declares bytes: they must be equal, and one
 *    buffer of that size is allocated (cuMemAlloc, on r's context);
 *  - one port supplies dptr: that memory is used for all of them (a size
 *    declared beside it is ignored);
 *  - two ports supply dptr: an error;
 *  - some ports declare bytes and others nothing: the declared size is
 *    allocated;
 *  - no port declares anything: an error.
 * An output with no connection that declares memory gets its own (read it
 * from the host with cw_pipeline_get_port_ptr). CW_PORT_MANY inputs are
 * refused here (one upstream per input port).
 * The same memory serves cw_pipeline_run too (a resident operator runs
 * there as well): then an operator writing port memory waits, on the GPU,
 * for last iteration's readers of it before its new work.
 * start callbacks run before an operator's first capture; their stop
 * callbacks when the pipeline is destroyed. In a capture, cw_io_receive
 * finds no message (CW_ERROR_NOT_READY) and cw_io_receive_many counts 0:
 * data flows through port memory. A failure
 * in a capture fails the loop's build (cw_resident_build,
 * cw_resident_launch) with the detail cw_pipeline_run would give.
 * The pipeline must outlive r's builds and launches. Before r's launch only.
 *
 * Returns:
 *   CW_SUCCESS                 the pipeline is r's workload.
 *   CW_ERROR_INVALID_ARGUMENT  p or r is NULL; r is on another device;
 *                              cw_pipeline_check failed; an operator that is
 *                              not resident or is a fused stage (the detail
 *                              names it); a port memory rule broken.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline; r is not a live
 *                              loop.
 *   CW_ERROR_INVALID_STATE     the pipeline is running; r is launched.
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out.
 *   CW_ERROR_DRIVER            the driver refused the port memory (detail:
 *                              the call).
 */
CW_API cw_status cw_pipeline_make_resident(cw_pipeline *p, cw_resident *r);

/* ---- fused pipelines: operators as stages of one persistent kernel ------
 *
 * An operator made with cw_operator_create_stage has no compute callback:
 * it is a stage of the resident loop's tile dataflow kernel (resident.h,
 * "Fused persistent mode", CW_FUSED_DATAFLOW). Its author writes a device
 * function that does one tile's work; cw_pipeline_make_fused orders the
 * stages (the pipeline's topological order), makes every connection a
 * dependency of the consumer's stage on the producer's, read as the
 * consumer's input port says (cw_port_read), writes the functions that
 * hand each stage its ports' memory, and compiles the loop's kernel.
 * docs/pipelines.md, "Fused pipelines", has an example. */

/* How the tiles of a stage read the operator connected to one of its
 * input ports: a cw_fused_dep on the producer's stage. Zero-initialise,
 * then fill in. */
typedef struct cw_port_read {
    const char *port;       /* the input port (a port name; declared by cw_pipeline_make_fused) */
    cw_fused_read read;     /* what tile (x, y) waits for of the producer's tiles (resident.h) */
    uint32_t radius;        /* CW_FUSED_READ_NEIGHBOURS (else 0) */
    uint32_t scale_num;     /* CW_FUSED_READ_NEIGHBOURS: the mapping (0 and 0: 1/1; else 0) */
    uint32_t scale_den;
    /* Boolean: the producer's tiles of the previous request (a temporal
     * filter). Such a connection orders nothing within a request, so it
     * may come from an operator that runs later: a feedback connection
     * (the one way a pipeline's connections may form a cycle). */
    int previous;
    /* CW_FUSED_READ_FUNCTION: the dependency function's name, defined in the
     * source (resident.h: extern "C" __device__ int NAME(const cw_fused_tile
     * *t, unsigned i)); else NULL. */
    const char *function;
    uint8_t reserved[16];   /* zero */
} cw_port_read;

/* An operator's stage. Zero-initialise, then fill in. */
typedef struct cw_operator_stage {
    /* The device function, defined in the source given to
     * cw_pipeline_make_fused:
     *   __device__ void FUNCTION(const cw_fused_tile *t, U *user,
     *                            T0 *port0, T1 *port1, ...)
     * `user` below, then one pointer per port of the operator, in the order
     * the ports were declared, inputs and outputs alike: the port's memory
     * (NULL for a port with none); each of any pointer type (void *,
     * const float *, ...). Called by the threads of one block (threadIdx.x
     * < t->threads) once per tile of each request. */
    const char *function;
    cw_devptr user;           /* passed as `user` (0: NULL) */
    /* How the stage is cut, as cw_fused_stage: `tiles` tiles in a row, or
     * size[0] x size[1] elements in tiles of tile[0] x tile[1]. */
    uint32_t tiles;
    uint32_t size[2];
    uint32_t tile[2];
    uint32_t threads;         /* threads a tile: 0 (the block's) or a multiple of 32 */
    uint32_t shared_bytes;    /* dynamic shared memory a tile uses (t->shared) */
    /* How its tiles read each connected input port's producer: one entry
     * per connected input (0 .. CW_FUSED_MAX_DEPS of them; reads may be
     * NULL when read_count is 0). */
    uint32_t read_count;
    const cw_port_read *reads;
    uint8_t reserved[32];     /* zero */
} cw_operator_stage;

/*
 * Makes an operator named `name` (copied) that runs as a fused stage:
 * *stage is copied (its strings too: they may go). Declare its ports with
 * cw_operator_add_input / cw_operator_add_output as for any operator (port
 * memory by the rules of cw_pipeline_make_resident); a read naming a port
 * is matched with the declared ports by cw_pipeline_make_fused. Such an
 * operator has no callbacks: only cw_pipeline_make_fused runs it
 * (cw_pipeline_run and cw_pipeline_make_resident refuse a pipeline that
 * holds one). Needs no driver. *out is the caller's until cw_pipeline_add
 * gives it to a pipeline: cw_operator_destroy before that.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new operator.
 *   CW_ERROR_INVALID_ARGUMENT  out or stage is NULL; a bad name; function
 *                              NULL or not an identifier; the cut (neither
 *                              or both of tiles and size, a size or tile of
 *                              0, more than CW_FUSED_MAX_TILES tiles);
 *                              threads not 0 or a multiple of 32 up to
 *                              1024; read_count above CW_FUSED_MAX_DEPS or
 *                              reads NULL with read_count > 0; a read with
 *                              a bad port name, a port read twice, a read
 *                              that is not a cw_fused_read, radius or scale
 *                              on a read that is not NEIGHBOURS, a scale
 *                              with one side 0, a function without
 *                              CW_FUSED_READ_FUNCTION (or that read without
 *                              one, or one not an identifier); nonzero
 *                              reserved bytes (the detail names the
 *                              operator, and the read's port).
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_operator_create_stage(cw_operator **out, const char *name, const cw_operator_stage *stage);

/*
 * Makes the pipeline resident loop r's fused kernel, in the tile dataflow
 * mode (as cw_resident_set_fused with CW_FUSED_DATAFLOW): every operator
 * is a stage (cw_operator_create_stage), run in the pipeline's topological
 * order; each connection is a dependency of the consumer's stage on the
 * producer's, read as the consumer's cw_port_read for that port says. From
 * `fused` come the source (CUDA C++ defining every stage's function and
 * dependency function; it may include "cuweave/resident_device.h"), the
 * NVRTC options, grid_blocks, block_threads, shared_bytes, in_flight and
 * watchdog_ms, all as cw_resident_set_fused reads them; mode is 0 or
 * CW_FUSED_DATAFLOW, and stages, stage_defs, stage_count and user are the
 * pipeline's to fill: leave them 0. Nothing is kept from fused.
 * Port memory is set up here by the rules of cw_pipeline_make_resident (one
 * buffer per output port, shared by the inputs connected to it; an
 * unconnected output that declares memory gets its own, which the host
 * reads with cw_pipeline_get_port_ptr), with one more allocation: the
 * table of port addresses the generated functions read (the loop's user
 * pointer). Data passes through port memory: with in_flight above 1 a
 * stage indexes per-request copies by t->slot, and a port read with
 * `previous` needs in_flight + 1 of them (t->seq % (in_flight + 1)),
 * which the port's bytes must hold. A stage's input slot is the loop's
 * (t->input). The pipeline must outlive r's launches; its port memory is
 * freed with it, once no loop runs. A stall (cw_resident_info.stall) names
 * a stage by its generated function, "cwp_" and the operator's name ('.'
 * and '-' as '_'). Call from the thread that builds the pipeline and
 * changes r; before r's launch; refused while any loop runs in the process
 * (it loads code, as cw_resident_set_fused).
 *
 * Returns:
 *   CW_SUCCESS                 r runs the pipeline.
 *   CW_ERROR_INVALID_ARGUMENT  p, r or fused is NULL; r is on another
 *                              device; source NULL; mode not 0 or
 *                              CW_FUSED_DATAFLOW; stages, stage_defs,
 *                              stage_count or user set; more than
 *                              CW_RESIDENT_MAX_FUSED_STAGES operators;
 *                              cw_pipeline_check failed; an operator that
 *                              is not a stage; a CW_PORT_MANY input; a
 *                              connected input with no read, a read of a
 *                              port the operator has not or of an output;
 *                              a stage or dependency function not in the
 *                              source; a CW_FUSED_READ_SAME read between
 *                              different tile grids, a neighbourhood
 *                              reaching outside the producer's tiles or a
 *                              radius above its grid (each names the
 *                              operator and port); what
 *                              cw_resident_set_fused refuses (its detail,
 *                              the stage named by its generated function).
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline; r is not a live
 *                              loop.
 *   CW_ERROR_INVALID_STATE     the pipeline is running; r is launched or
 *                              has a workload or data-ready handler; a loop
 *                              runs in the process.
 *   CW_ERROR_COMPILE           NVRTC refused the source (the detail has the
 *                              log's first lines: the generated functions
 *                              are in "cuweave_pipeline_stages.cu").
 *   CW_ERROR_NOT_SUPPORTED     as cw_resident_set_fused.
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out.
 *   CW_ERROR_DRIVER            the driver refused the port memory, the
 *                              table's copy, the code or a query (detail:
 *                              the call).
 * Every refusal above but the driver's and memory's comes before the port
 * memory is set up: the pipeline may still be changed after one.
 */
CW_API cw_status cw_pipeline_make_fused(cw_pipeline *p, cw_resident *r, const cw_resident_fused *fused);

/*
 * The device address of port memory from outside compute (after
 * cw_pipeline_make_resident, or the first run of a pipeline whose ports
 * declare memory): any port of any operator by name, an unconnected output
 * that declares memory included (a sink's result the host reads). No
 * driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *dptr is the address.
 *   CW_ERROR_INVALID_ARGUMENT  p, op, port or dptr is NULL; an unknown
 *                              operator or port.
 *   CW_ERROR_INVALID_HANDLE    p is not a live pipeline.
 *   CW_ERROR_INVALID_STATE     the port has no memory (yet).
 */
CW_API cw_status cw_pipeline_get_port_ptr(const cw_pipeline *p, const char *op, const char *port, cw_devptr *dptr);

/* ---- inside compute: cw_io ----------------------------------------------
 * Every cw_io call refuses an io that is NULL (CW_ERROR_INVALID_ARGUMENT),
 * one that is not a compute call's (CW_ERROR_INVALID_HANDLE), and one used
 * outside the compute call it was given to (CW_ERROR_INVALID_STATE). */

typedef struct cw_message {
    void *value;       /* the emitter's value (not owned), may be NULL */
    cw_buffer *buffer; /* borrowed for the compute call (cw_buffer_retain to keep it), may be NULL */
    cw_stream *stream; /* the stream the data was produced on, may be NULL */
} cw_message;

/*
 * The first message on input port `port`. A buffer from another device is
 * first moved to the operator's (a peer copy on its stream).
 *
 * Returns:
 *   CW_SUCCESS                 *msg is the message.
 *   CW_ERROR_NOT_READY         the port received none this iteration (only
 *                              possible on optional ports; always in a
 *                              resident capture).
 *   CW_ERROR_INVALID_ARGUMENT  io, port or msg is NULL; a port the operator
 *                              has not (the detail names it), or an output.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     outside its compute call; a buffer of another
 *                              device and no stream of the operator's to
 *                              copy it with.
 *   CW_ERROR_OUT_OF_MEMORY     moving a buffer ran out of memory.
 *   CW_ERROR_DRIVER            moving a buffer failed (detail: the call).
 */
CW_API cw_status cw_io_receive(cw_io *io, const char *port, cw_message *msg);

/*
 * Every message on the port (CW_PORT_MANY: one per connection that sent
 * one, in connection order), at most cap of them into msgs; *count is how
 * many there are. The only way to read a CW_PORT_MANY port's messages
 * after the first. Buffers from other devices are moved as cw_io_receive
 * moves them.
 *
 * Returns:
 *   CW_SUCCESS                 *count is set, min(cap, *count) copied.
 *   CW_ERROR_INVALID_ARGUMENT  io, port or count is NULL; msgs NULL with cap
 *                              not 0; a port the operator has not, or an
 *                              output.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     as cw_io_receive.
 *   CW_ERROR_OUT_OF_MEMORY     as cw_io_receive.
 *   CW_ERROR_DRIVER            as cw_io_receive.
 */
CW_API cw_status cw_io_receive_many(cw_io *io, const char *port, cw_message *msgs, size_t cap, size_t *count);

/*
 * The operator's internal stream, ordered behind the stream of every
 * message on `port` (see the stream rules above); port NULL: the internal
 * stream with no ordering (for sources). Makes the stream's context
 * current on this thread (asked once per run and thread: see the stream
 * rules above). In a resident capture: the operator's capture
 * stream. The stream is borrowed for the compute call.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the stream.
 *   CW_ERROR_INVALID_ARGUMENT  io or out is NULL; a port the operator has
 *                              not, or an output.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     as cw_io_receive.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out; leasing the stream or
 *                              moving a buffer ran out of memory.
 *   CW_ERROR_DRIVER            leasing the stream, a wait or making the
 *                              context current failed (detail: the call).
 */
CW_API cw_status cw_io_receive_stream(cw_io *io, const char *port, cw_stream **out);

/*
 * A named extra stream from the operator's pool (cw_stream_pool_acquire_named with
 * the operator as owner): the same name gives the same stream in every
 * compute call; borrowed. Not carried by outputs unless set with
 * cw_io_set_output_stream.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the stream.
 *   CW_ERROR_INVALID_ARGUMENT  io or out is NULL; a bad name.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     outside its compute call; in a resident
 *                              capture; an operator made with
 *                              no_internal_stream.
 *   CW_ERROR_POOL_EXHAUSTED    the pool has no stream for it.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 *   CW_ERROR_DRIVER            the pool could not make the stream (detail:
 *                              the call).
 */
CW_API cw_status cw_io_get_stream(cw_io *io, const char *name, cw_stream **out);

/*
 * The stream output `port` carries in this call (the last call wins).
 * s NULL: no stream.
 *
 * Returns:
 *   CW_SUCCESS                 set.
 *   CW_ERROR_INVALID_ARGUMENT  io or port is NULL; a port the operator has
 *                              not, or an input.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's; s is not NULL and
 *                              not a live stream.
 *   CW_ERROR_INVALID_STATE     outside its compute call.
 *   CW_ERROR_OUT_OF_MEMORY     host memory ran out.
 */
CW_API cw_status cw_io_set_output_stream(cw_io *io, const char *port, cw_stream *s);

/*
 * Emits a message on output `port`: value (not owned) and buffer (a
 * reference is taken; may be NULL). Delivered to every connected input
 * when compute returns, with the port's stream (set_output_stream, else the
 * internal stream once receive_stream was called, else none). One message
 * per port per call: a second emit replaces the first. The emit's
 * reference makes the buffer shared: take the address for writing
 * (cw_buffer_get_writable) before emitting it. In a resident
 * capture, emit does nothing and returns CW_SUCCESS (data flows through
 * port memory).
 *
 * Returns:
 *   CW_SUCCESS                 emitted.
 *   CW_ERROR_INVALID_ARGUMENT  io or port is NULL; a port the operator has
 *                              not, or an input.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's; buffer is not
 *                              NULL and not a live buffer.
 *   CW_ERROR_INVALID_STATE     outside its compute call.
 */
CW_API cw_status cw_io_emit(cw_io *io, const char *port, void *value, cw_buffer *buffer);

/*
 * A buffer of `bytes` on the operator's internal stream (receive_stream
 * with no port, when not called yet); the call holds the reference and
 * drops it when compute returns (emit takes its own; cw_buffer_retain keeps
 * it longer). Buffers come from the pipeline's cache: when a cw_io_alloc
 * buffer's last reference goes its memory is kept (up to 64 per pipeline),
 * and handed out again, as a new buffer, for the same size, once every use
 * recorded on it is known finished on the GPU: with max_in_flight, once
 * the run has waited for the iteration that used it last (no driver
 * call); without, when cuEventQuery says so. Nothing waits for a buffer:
 * otherwise a new one is allocated from the context's pool. The cache's
 * memory is freed with the pipeline. The old handle goes with its last
 * reference, as any buffer's: a stale copy of it is refused.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the buffer.
 *   CW_ERROR_INVALID_ARGUMENT  out or io is NULL; bytes is 0.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     outside its compute call; in a resident
 *                              capture (no allocation there); an operator
 *                              with no stream at all (the legacy-stream
 *                              case).
 *   CW_ERROR_OUT_OF_MEMORY     host or device memory ran out.
 *   CW_ERROR_DRIVER            the allocation or the stream's lease failed
 *                              (detail: the call).
 */
CW_API cw_status cw_io_alloc(cw_buffer **out, cw_io *io, size_t bytes);

/*
 * Port memory (resident operators, or any pipeline whose ports declare
 * memory): the device address of the connection's buffer of `port`, input
 * or output. No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *dptr is the address.
 *   CW_ERROR_INVALID_ARGUMENT  io, port or dptr is NULL; a port the
 *                              operator has not.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     outside its compute call; the port has no
 *                              memory.
 */
CW_API cw_status cw_io_get_port_ptr(cw_io *io, const char *port, cw_devptr *dptr);

typedef struct cw_io_info {
    cw_operator *op;        /* the operator being computed, borrowed */
    uint64_t iteration;     /* 0, 1, ... within the run; the copy of the iteration in a resident capture */
    const char *name;       /* the operator's name (owned by it; valid while it lives) */
    cw_devptr resident_ctl; /* in a resident capture: the loop's device block (cw_resident_get_ctl) to
                               pass to kernels; 0 under cw_pipeline_run */
    uint8_t reserved[32];   /* zeroed */
} cw_io_info;

/*
 * Describes the compute call: its operator, name and iteration, and the
 * resident loop's device block in a resident capture. No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the call.
 *   CW_ERROR_INVALID_ARGUMENT  io or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    io is not a compute call's.
 *   CW_ERROR_INVALID_STATE     outside its compute call.
 */
CW_API cw_status cw_io_get_info(cw_io *io, cw_io_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_FLOW_H */
