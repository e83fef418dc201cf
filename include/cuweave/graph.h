/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: graphs. Capture work issued to a stream into a graph, instantiate
 * it, launch it on any stream, update it with a re-captured sequence, and
 * build graphs from parts (child graphs, conditional IF / WHILE nodes whose
 * condition device code sets).
 *
 * The life of a graph:
 *
 *   cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL);
 *   ... launches, copies, cw_stream_fork / cw_stream_join on s ...
 *   cw_capture_end(&graph, s);             the work was recorded, not run
 *   cw_graph_instantiate(&exec, graph, 0);
 *   cw_graph_exec_upload(exec, s);          optional: ready before first launch
 *   cw_graph_exec_launch(exec, s);          as often as needed
 *
 * Threading: a cw_graph and a cw_graph_exec are not internally
 * synchronised (the driver's graph objects are not): use each from one
 * thread at a time. Different graphs may be used from different threads.
 * Launches of one exec are ordered on the GPU by the driver (a launch waits
 * for the previous launch of the same exec).
 */
#ifndef CUWEAVE_GRAPH_H
#define CUWEAVE_GRAPH_H

#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __cuda_cuda_h__
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
#endif

typedef struct cw_graph cw_graph;
typedef struct cw_graph_exec cw_graph_exec;
/* A node of a graph. Owned by its graph: valid until the graph is destroyed. */
typedef struct cw_graph_node cw_graph_node;

/* ---- capture ------------------------------------------------------------ */

/*
 * How capture interacts with other threads (the driver's capture modes):
 * GLOBAL refuses potentially unsafe calls (those that may synchronise with
 * the capturing work, such as cuMemAlloc or a synchronous copy) made from
 * any thread while the capture is active; THREAD_LOCAL only from this
 * thread; RELAXED refuses nothing. When unsure, use GLOBAL.
 */
typedef enum cw_capture_mode {
    CW_CAPTURE_GLOBAL = 0,
    CW_CAPTURE_THREAD_LOCAL = 1,
    CW_CAPTURE_RELAXED = 2
} cw_capture_mode;

typedef enum cw_capture_state {
    CW_CAPTURE_NONE = 0,        /* not capturing */
    CW_CAPTURE_ACTIVE = 1,      /* capturing */
    CW_CAPTURE_INVALIDATED = 2  /* the capture was invalidated: cw_capture_end reports why */
} cw_capture_state;

/*
 * Starts capturing s: until cw_capture_end, work enqueued on s (launches,
 * copies, memsets, stream-ordered waits) is recorded instead of running.
 * Streams made to wait for s while it captures (cw_stream_fork, or
 * cw_stream_wait(other, s)) join the capture; their work is recorded as
 * parallel branches and must be joined back to s (cw_stream_join, or
 * cw_stream_wait(s, other)) before cw_capture_end.
 *
 * into NULL: the work is recorded into a new graph, which cw_capture_end
 * hands out. into a graph (made by cw_graph_create, returned by an earlier
 * capture, or the body of a conditional node): the work is recorded into
 * it, after every node of it that no other node depends on (its sinks), so
 * a capture into a non-empty graph extends it in sequence. into must
 * belong to s's context and must not be used otherwise until
 * cw_capture_end. Capturing into a graph needs a CUDA 12.3 driver
 * (cuStreamBeginCaptureToGraph).
 *
 * Not allowed while capturing (the driver invalidates the capture; see
 * cw_capture_end): synchronising or querying a stream that takes part,
 * cw_future_create on it, waiting on an event recorded outside the capture.
 *
 * Returns:
 *   CW_SUCCESS                 s captures (into a new graph, or into `into`).
 *   CW_ERROR_INVALID_ARGUMENT  s is NULL; mode is not a cw_capture_mode;
 *                              into belongs to another context than s.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream; into is neither NULL
 *                              nor a live graph.
 *   CW_ERROR_NOT_SUPPORTED     s is the legacy NULL stream (the driver cannot
 *                              capture it); into is given and the driver
 *                              has no cuStreamBeginCaptureToGraph (before
 *                              CUDA 12.3).
 *   CW_ERROR_INVALID_STATE     s captures already; into is the target of a
 *                              capture on another stream.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory to list into's sinks.
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_capture_begin(cw_stream *s, cw_graph *into, cw_capture_mode mode);

/*
 * Ends the capture begun on s with cw_capture_begin and writes its graph to
 * *out:
 *  - begun with into NULL: a new graph, which the caller owns (destroy it
 *    with cw_graph_destroy);
 *  - begun into a graph: that same graph handle, the work now in it. No
 *    ownership changes hands: whoever owned it before owns it still (the
 *    caller for a graph of cw_graph_create or of an earlier capture, its
 *    node for the body of a conditional node), and it must be destroyed
 *    once, not once per capture.
 *
 * When the capture was invalidated, returns CW_ERROR_CAPTURE, leaves *out
 * untouched, and cw_last_error()->message says which call invalidated it and
 * why (the cuweave function, the driver call, the CUresult name and text),
 * or that it was a call cuweave did not see. A fork that was not joined
 * back gives CW_ERROR_CAPTURE as well. In every such case the capture has
 * ended, nothing of it is kept, and s can be used again at once; a graph
 * captured into may hold part of the work and is best destroyed. The
 * exception is a THREAD_LOCAL capture ended from another thread:
 * CW_ERROR_CAPTURE, and the capture goes on.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the captured graph (see above).
 *   CW_ERROR_INVALID_ARGUMENT  out or s is NULL (a capture on s goes on).
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_INVALID_STATE     s is not capturing (no cw_capture_begin on it,
 *                              or its capture has ended).
 *   CW_ERROR_CAPTURE           the capture was invalidated or a fork was not
 *                              joined back (the capture has ended), or a
 *                              THREAD_LOCAL capture was ended from another
 *                              thread (it goes on); the detail says which.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory for the new graph's handle
 *                              (the capture has ended; nothing is kept).
 *   CW_ERROR_DRIVER            cuStreamEndCapture failed otherwise (detail:
 *                              the result, and whether the capture goes on).
 */
CW_API cw_status cw_capture_end(cw_graph **out, cw_stream *s);

/*
 * The capture state of s as the driver sees it (also for streams that take
 * part in a capture begun on another stream).
 *
 * Returns:
 *   CW_SUCCESS                 *state is NONE, ACTIVE or INVALIDATED.
 *   CW_ERROR_INVALID_ARGUMENT  s or state is NULL.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_DRIVER            cuStreamIsCapturing failed (detail: the
 *                              result).
 */
CW_API cw_status cw_capture_get_state(cw_stream *s, cw_capture_state *state);

/* ---- graphs ------------------------------------------------------------- */

/*
 * Creates an empty graph on ctx (cuGraphCreate), to build from parts or to
 * capture into. The graph keeps ctx alive; the caller owns it (destroy it
 * with cw_graph_destroy).
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new graph.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory for the handle, or the driver
 *                              ran out (detail: cuGraphCreate).
 *   CW_ERROR_DRIVER            cuGraphCreate failed (detail: the result).
 */
CW_API cw_status cw_graph_create(cw_graph **out, cw_context *ctx);

/*
 * Destroys a graph and every node in it (a conditional node's bodies
 * included). Executable graphs made from it stay valid. A capture that
 * still records into the graph (or into one of its bodies) is ended and
 * dropped first, as if its stream had been destroyed: that stream is no
 * longer capturing (its cw_capture_end gives CW_ERROR_INVALID_STATE).
 * Sets *g to NULL; accepts NULL and a pointer to NULL. Never fails:
 * a handle that is not a live graph, and the body of a conditional node
 * (it belongs to its node and goes with its graph), are left alone and
 * said so in a CW_LOG_WARNING (the thread's
 * detail is left alone).
 *
 * Returns: nothing.
 */
CW_API void cw_graph_destroy(cw_graph **g);

typedef struct cw_graph_info {
    CUgraph handle;       /* the driver graph (borrowed: valid while the graph lives), for
                             adding nodes cuweave has no call for with the driver API */
    cw_context *context;  /* the graph's context (borrowed: valid while the graph lives;
                             its device: cw_context_get_info) */
    size_t nodes;         /* nodes at the top level of the graph */
    size_t sinks;         /* nodes no other node depends on */
    int is_body;          /* 1: the body of a conditional node (owned by it) */
    uint8_t reserved[28];
} cw_graph_info;

/*
 * Fills *info. Counting the nodes and sinks asks the driver; handle and
 * context cost nothing.
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled (its reserved bytes zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  g or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory to list the nodes.
 *   CW_ERROR_DRIVER            cuGraphGetNodes or cuGraphNodeGetDependentNodes
 *                              failed (detail: which, and the result).
 */
CW_API cw_status cw_graph_get_info(const cw_graph *g, cw_graph_info *info);

/*
 * Adds a node that runs a copy of child (cuGraphAddChildGraphNode: the
 * child is cloned, so it may be changed or destroyed afterwards) after
 * deps[0..ndeps-1] (deps may be NULL when ndeps is 0: a root node).
 * *node (node may be NULL) receives the new node, owned by g. The driver
 * refuses a child that contains a conditional node: add the conditional
 * node to the parent itself.
 *
 * Returns:
 *   CW_SUCCESS                 the node is in g (*node, when node is not NULL).
 *   CW_ERROR_INVALID_ARGUMENT  g or child is NULL; child is g; deps is NULL
 *                              while ndeps is not 0; an entry of deps is NULL.
 *   CW_ERROR_INVALID_HANDLE    g or child is not a live graph.
 *   CW_ERROR_INVALID_STATE     a capture records into g or child: end it first.
 *   CW_ERROR_NOT_SUPPORTED     child contains a conditional node (the driver
 *                              refuses it; detail: cuGraphAddChildGraphNode).
 *   CW_ERROR_DRIVER            cuGraphAddChildGraphNode failed otherwise (a
 *                              node of deps not in g, say; detail: the result).
 */
CW_API cw_status cw_graph_add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps,
                                    size_t ndeps, cw_graph_node **node);

/*
 * Adds an empty node after deps (a join point). *node (node may be NULL)
 * receives it.
 *
 * Returns:
 *   CW_SUCCESS                 the node is in g (*node, when node is not NULL).
 *   CW_ERROR_INVALID_ARGUMENT  g is NULL; deps is NULL while ndeps is not 0;
 *                              an entry of deps is NULL.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_INVALID_STATE     a capture records into g: end it first.
 *   CW_ERROR_DRIVER            cuGraphAddEmptyNode failed (a node of deps not
 *                              in g, say; detail: the result).
 */
CW_API cw_status cw_graph_add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node);

/* The handle device code passes to cudaGraphSetConditional(handle, value)
 * (from <cuda_device_runtime_api.h>) to set a conditional node's value. */
typedef uint64_t cw_cond_handle;

/* cw_graph_add_cond_handle flags. */
#define CW_COND_RESET_EACH_LAUNCH 0x1u /* the value is set to default_value at every launch of
                                          the graph; without it, only device code sets it, and
                                          a node that runs before any did sees 0 */

/*
 * Adds to g a condition for its conditional nodes
 * (cuGraphConditionalHandleCreate): a value device code sets and
 * conditional nodes read. Made before its node so that kernels that run
 * before the node (a data-ready check, say) can be given the handle. g owns
 * it: it lives as long as g, and there is nothing to destroy. flags: 0 or
 * CW_COND_RESET_EACH_LAUNCH. Needs conditional nodes in the driver (CUDA
 * 12.3; cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)).
 *
 * Returns:
 *   CW_SUCCESS                 *handle is the new condition.
 *   CW_ERROR_INVALID_ARGUMENT  g or handle is NULL; flags has unknown bits.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no conditional nodes.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory to record the handle in g.
 *   CW_ERROR_DRIVER            cuGraphConditionalHandleCreate failed
 *                              (detail: the result).
 */
CW_API cw_status cw_graph_add_cond_handle(cw_graph *g, unsigned default_value, unsigned flags,
                                          cw_cond_handle *handle);

typedef enum cw_cond_type {
    CW_COND_IF = 0,    /* the body runs once when the value is nonzero (the else body when zero) */
    CW_COND_WHILE = 1  /* the body runs again and again while the value is nonzero */
} cw_cond_type;

typedef struct cw_cond_settings {
    cw_cond_type type; /* default CW_COND_WHILE */
    int with_else;     /* CW_COND_IF only: also make an else body (default 0) */
    uint8_t reserved[56];
} cw_cond_settings;

/* Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing. */
CW_API void cw_cond_settings_default(cw_cond_settings *s);

/*
 * Adds a conditional node on the condition `handle` (made by
 * cw_graph_add_cond_handle on g) after deps, and returns its body graph(s).
 * WHILE: the body runs while the value is nonzero when the node starts and
 * after each run of the body; a kernel in the body sets the value
 * (cudaGraphSetConditional(handle, 0) ends the loop). IF: the body runs
 * when the value is nonzero, the else body (with_else) when it is zero.
 * *body receives the body graph; *else_body (may be NULL) the else body,
 * or NULL when there is none. Bodies are owned by the node (cw_graph_destroy
 * leaves them alone) and are filled with cw_capture_begin(s, body, mode),
 * cw_graph_add_child, cw_graph_add_empty or cw_graph_add_conditional. Body
 * graphs may contain only kernels, copies, memsets, empty nodes, child
 * graphs and conditional nodes, all on g's context (the driver's rule).
 * node may be NULL. settings may be NULL for the defaults.
 *
 * Returns:
 *   CW_SUCCESS                 the node is in g; *body (and *else_body) set.
 *   CW_ERROR_INVALID_ARGUMENT  g or body is NULL; settings has an unknown
 *                              type, with_else not 0 or 1 (1 with WHILE), or
 *                              nonzero reserved bytes; deps is NULL while
 *                              ndeps is not 0, or an entry of deps is NULL;
 *                              handle was not made by cw_graph_add_cond_handle
 *                              on g.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_INVALID_STATE     a capture records into g: end it first.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory for the bodies' handles.
 *   CW_ERROR_DRIVER            cuGraphAddNode failed (detail: the result).
 *   CW_ERROR_INTERNAL          the driver made the node but returned no body.
 */
CW_API cw_status cw_graph_add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *settings,
                                          cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node,
                                          cw_graph **body, cw_graph **else_body);

/*
 * The nodes of g that no node depends on (its sinks: the end of what was
 * captured or added last), to add nodes after them. Writes up to cap nodes
 * to nodes (may be NULL when cap is 0) and the number of sinks to *count.
 *
 * Returns:
 *   CW_SUCCESS                 *count is the number of sinks; the first
 *                              min(cap, *count) of them are in nodes.
 *   CW_ERROR_INVALID_ARGUMENT  g or count is NULL; nodes is NULL while cap
 *                              is not 0.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory to list the nodes.
 *   CW_ERROR_DRIVER            cuGraphGetNodes or cuGraphNodeGetDependentNodes
 *                              failed (detail: which, and the result).
 */
CW_API cw_status cw_graph_get_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count);

/*
 * Writes the graph in Graphviz DOT form to path (cuGraphDebugDotPrint);
 * verbose nonzero adds every node's parameters. For debugging.
 *
 * Returns:
 *   CW_SUCCESS                 the file is written.
 *   CW_ERROR_INVALID_ARGUMENT  g or path is NULL; path is "".
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_DRIVER            cuGraphDebugDotPrint failed (the file could
 *                              not be written, say; detail: the result).
 */
CW_API cw_status cw_graph_write_dot(const cw_graph *g, const char *path, int verbose);

/* ---- executable graphs -------------------------------------------------- */

/* Instantiate flags. */
#define CW_GRAPH_EXEC_NODE_PRIORITY 0x1u /* kernels keep the priority of the stream they were
                                            captured on, instead of the launch stream's */

/*
 * Instantiates g (cuGraphInstantiateWithFlags) in g's context. The exec is
 * independent of g afterwards (g may be destroyed); it keeps the context
 * alive, and the caller owns it (destroy it with cw_graph_exec_destroy).
 * flags: 0 or CW_GRAPH_EXEC_NODE_PRIORITY.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new exec.
 *   CW_ERROR_INVALID_ARGUMENT  out or g is NULL; flags has unknown bits.
 *   CW_ERROR_INVALID_HANDLE    g is not a live graph.
 *   CW_ERROR_INVALID_STATE     a capture records into g: end it first.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory for the handle, or the driver
 *                              ran out (detail: the call).
 *   CW_ERROR_DRIVER            the driver cannot instantiate g, or could not
 *                              make g's context current (detail: the call
 *                              and the reason).
 */
CW_API cw_status cw_graph_instantiate(cw_graph_exec **out, cw_graph *g, unsigned flags);

/*
 * Destroys the exec; launches in flight complete. Sets *e to NULL; accepts
 * NULL and a pointer to NULL. Never fails: a handle that is not a live exec
 * is left alone and said so in a CW_LOG_WARNING (the thread's detail is left alone);
 * a driver that refuses to destroy the exec is logged (CW_LOG_WARNING).
 * While a GPU-resident loop runs in the process the handle is dead at once
 * and the driver's exec is destroyed when the last loop stops (destroying
 * an exec with conditional nodes waits for every running kernel;
 * docs/resident.md).
 *
 * Returns: nothing.
 */
CW_API void cw_graph_exec_destroy(cw_graph_exec **e);

/*
 * Uploads the exec's work to the device on s (cuGraphUpload), so that the
 * first launch costs no more than later ones. Optional.
 *
 * Returns:
 *   CW_SUCCESS                 the upload is enqueued on s.
 *   CW_ERROR_INVALID_ARGUMENT  e or s is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live exec, s not a live stream.
 *   CW_ERROR_DEVICE_FAULT      the context faulted earlier (detail: the fault).
 *   CW_ERROR_CAPTURE           s captures and the driver refused the call there.
 *   CW_ERROR_DRIVER            cuGraphUpload failed (s of another device, say;
 *                              detail: the result).
 */
CW_API cw_status cw_graph_exec_upload(cw_graph_exec *e, cw_stream *s);

/*
 * Launches the exec on s (cuGraphLaunch): one driver call, no allocation,
 * no lock. s may be any stream of the exec's device.
 *
 * Returns:
 *   CW_SUCCESS                 the launch is enqueued on s (counted in the
 *                              info's launches).
 *   CW_ERROR_INVALID_ARGUMENT  e or s is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live exec, s not a live stream.
 *   CW_ERROR_DEVICE_FAULT      the context faulted earlier (detail: the fault).
 *   CW_ERROR_CAPTURE           s captures and the driver refused the call there.
 *   CW_ERROR_DRIVER            cuGraphLaunch failed (s of another device, say;
 *                              detail: the result).
 */
CW_API cw_status cw_graph_exec_launch(cw_graph_exec *e, cw_stream *s);

typedef enum cw_graph_update_kind {
    CW_GRAPH_UPDATED_IN_PLACE = 0,  /* cuGraphExecUpdate applied the new parameters */
    CW_GRAPH_REINSTANTIATED = 1     /* the topology (or something else the driver cannot
                                       update) changed: the exec was instantiated again */
} cw_graph_update_kind;

typedef struct cw_graph_update_info {
    cw_graph_update_kind kind;
    int driver_result;  /* the driver's CUgraphExecUpdateResult (0: success) */
    const char *reason; /* static text: why an update in place was not possible, or "" */
    uint8_t reserved[40];
} cw_graph_update_info;

/*
 * Makes the exec run g from its next launch: g is usually a re-capture of
 * the sequence the exec was made from, with new parameters (kernel
 * arguments, copy addresses). Tries cuGraphExecUpdate; when the driver
 * cannot update in place (topology, node types, functions changed), the
 * exec is instantiated again from g with its flags and the old one is
 * destroyed (launches in flight complete; while a GPU-resident loop runs,
 * once the last loop stops, as cw_graph_exec_destroy). *info (may be NULL) says which
 * happened and why. Launches already enqueued run the old work. The exec
 * handle stays the same either way (its driver handle, in
 * cw_graph_exec_info, changes when it is instantiated again). On failure
 * the exec is unchanged.
 *
 * Returns:
 *   CW_SUCCESS                 the exec runs g from its next launch (*info,
 *                              when info is not NULL, says how).
 *   CW_ERROR_INVALID_ARGUMENT  e or g is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live exec, g not a live graph.
 *   CW_ERROR_INVALID_STATE     a capture records into g: end it first.
 *   CW_ERROR_OUT_OF_MEMORY     the driver ran out instantiating g again, or
 *                              no host memory to keep the replaced exec
 *                              until the running loops stop.
 *   CW_ERROR_DRIVER            cuGraphExecUpdate failed for another reason
 *                              than a change it cannot apply, instantiating
 *                              g again failed, or the context could not be
 *                              made current (detail: the call and why).
 */
CW_API cw_status cw_graph_exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info);

typedef struct cw_graph_exec_info {
    CUgraphExec handle;         /* the driver exec (borrowed: valid until the exec is destroyed
                                   or instantiated again by cw_graph_exec_update) */
    cw_context *context;        /* the exec's context (borrowed: valid while the exec lives;
                                   its device: cw_context_get_info) */
    uint64_t launches;          /* cw_graph_exec_launch calls that succeeded */
    uint64_t updates_in_place;  /* cw_graph_exec_update calls applied in place */
    uint64_t reinstantiations;  /* cw_graph_exec_update calls that instantiated again */
    uint8_t reserved[24];
} cw_graph_exec_info;

/*
 * Fills *info: the driver exec, the context and the counters. No driver
 * call.
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled (its reserved bytes zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  e or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live exec.
 */
CW_API cw_status cw_graph_exec_get_info(const cw_graph_exec *e, cw_graph_exec_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_GRAPH_H */
