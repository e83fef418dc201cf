/*
 * cuweave: graphs. Capture work issued to a stream into a graph, instantiate
 * it, launch it on any stream, update it with a re-captured sequence, and
 * build graphs from parts (child graphs, conditional IF / WHILE nodes whose
 * condition device code sets).
 *
 * The life of a graph:
 *
 *   cw_capture_begin(s, CW_CAPTURE_GLOBAL);
 *   ... launches, copies, cw_stream_fork / cw_stream_join on s ...
 *   cw_capture_end(s, &graph);             the work was recorded, not run
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
 * copies, memsets, stream-ordered waits) is recorded into a new graph
 * instead of running. Streams made to wait for s while it captures
 * (cw_stream_fork, or cw_stream_wait(other, s)) join the capture; their
 * work is recorded as parallel branches and must be joined back to s
 * (cw_stream_join, or cw_stream_wait(s, other)) before cw_capture_end.
 *
 * Not allowed while capturing (the driver invalidates the capture; see
 * cw_capture_end): synchronising or querying a stream that takes part,
 * cw_future_create on it, waiting on an event recorded outside the capture.
 *
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (bad mode);
 * CW_ERROR_INVALID_HANDLE; CW_ERROR_NOT_SUPPORTED for the legacy NULL
 * stream (the driver cannot capture it); CW_ERROR_INVALID_STATE when s
 * already captures; the driver's error otherwise.
 */
CW_API cw_status cw_capture_begin(cw_stream *s, cw_capture_mode mode);

/*
 * As cw_capture_begin, but records into the existing graph g (made by
 * cw_graph_create, returned by an earlier capture, or the body of a
 * conditional node): the captured work depends on every node of g that no
 * other node depends on (its sinks), so a capture into a non-empty graph
 * extends it in sequence. g must belong to s's context and must not be
 * used otherwise until cw_capture_end. Needs a CUDA 12.3 driver
 * (cuStreamBeginCaptureToGraph): CW_ERROR_NOT_SUPPORTED before that.
 */
CW_API cw_status cw_capture_begin_to(cw_stream *s, cw_graph *g, cw_capture_mode mode);

/*
 * Ends the capture begun on s with cw_capture_begin(_to).
 * After cw_capture_begin: *out receives a new graph (the caller owns it;
 * out must not be NULL). After cw_capture_begin_to: *out, when out is not
 * NULL, receives the target graph again (no new ownership).
 *
 * When the capture was invalidated, returns CW_ERROR_CAPTURE, leaves *out
 * untouched, and cw_last_error_message() says which call invalidated it and
 * why (the cuweave function, the driver call, the CUresult name and text),
 * or that it was a call cuweave did not see. A fork that was not joined
 * back gives CW_ERROR_CAPTURE as well. In every such case the capture has
 * ended, nothing of it is kept, and s can be used again at once; a target
 * graph of cw_capture_begin_to may hold part of the work and is best
 * destroyed. The exception is a THREAD_LOCAL capture ended from another
 * thread: CW_ERROR_CAPTURE, and the capture goes on.
 * CW_ERROR_INVALID_STATE when s is not capturing.
 */
CW_API cw_status cw_capture_end(cw_stream *s, cw_graph **out);

/*
 * The capture state of s as the driver sees it (also for streams that take
 * part in a capture begun on another stream).
 */
CW_API cw_status cw_capture_get_state(cw_stream *s, cw_capture_state *state);

/* ---- graphs ------------------------------------------------------------- */

/* Creates an empty graph on ctx (cuGraphCreate), to build from parts or to
 * capture into. The graph keeps ctx alive. */
CW_API cw_status cw_graph_create(cw_graph **out, cw_context *ctx);

/*
 * Destroys a graph and every node in it (a conditional node's bodies
 * included). Executable graphs made from it stay valid. Sets *g to NULL;
 * accepts NULL. The body of a conditional node belongs to its node and is
 * not destroyed this way: the call then records CW_ERROR_INVALID_STATE in
 * the detail and does nothing else.
 */
CW_API void cw_graph_destroy(cw_graph **g);

typedef struct cw_graph_info {
    size_t nodes;     /* nodes at the top level of the graph */
    size_t sinks;     /* nodes no other node depends on */
    int is_body;      /* 1: the body of a conditional node (owned by it) */
    uint8_t reserved[44];
} cw_graph_info;

CW_API cw_status cw_graph_get_info(const cw_graph *g, cw_graph_info *info);

/* The driver graph (borrowed: valid while g lives), for adding nodes
 * cuweave has no call for with the driver API. */
CW_API cw_status cw_graph_get_handle(const cw_graph *g, CUgraph *handle);

/*
 * Adds a node that runs a copy of child (cuGraphAddChildGraphNode: the
 * child is cloned, so it may be changed or destroyed afterwards) after
 * deps[0..ndeps-1] (deps may be NULL when ndeps is 0: a root node).
 * *node (may be NULL) receives the new node. The driver refuses a child
 * that contains a conditional node (CW_ERROR_NOT_SUPPORTED): add the
 * conditional node to the parent itself.
 */
CW_API cw_status cw_graph_add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps,
                                    size_t ndeps, cw_graph_node **node);

/* Adds an empty node after deps (a join point). *node may be NULL. */
CW_API cw_status cw_graph_add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node);

/* The handle device code passes to cudaGraphSetConditional(handle, value)
 * (from <cuda_device_runtime_api.h>) to set a conditional node's value. */
typedef uint64_t cw_cond_handle;

/* cw_graph_cond_create flags. */
#define CW_COND_RESET_EACH_LAUNCH 0x1u /* the value is set to default_value at every launch of
                                          the graph; without it, only device code sets it, and
                                          a node that runs before any did sees 0 */

/*
 * Makes a condition for conditional nodes of g (cuGraphConditionalHandleCreate):
 * a value device code sets and conditional nodes read. Made before its
 * node so that kernels that run before the node (a data-ready check, say)
 * can be given the handle. Lives as long as g. flags: 0 or
 * CW_COND_RESET_EACH_LAUNCH. Returns CW_ERROR_NOT_SUPPORTED when the driver
 * has no conditional nodes (before CUDA 12.3;
 * cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)).
 */
CW_API cw_status cw_graph_cond_create(cw_graph *g, unsigned default_value, unsigned flags, cw_cond_handle *handle);

typedef enum cw_cond_type {
    CW_COND_IF = 0,    /* the body runs once when the value is nonzero (the else body when zero) */
    CW_COND_WHILE = 1  /* the body runs again and again while the value is nonzero */
} cw_cond_type;

typedef struct cw_cond_settings {
    cw_cond_type type; /* default CW_COND_WHILE */
    int with_else;     /* CW_COND_IF only: also make an else body (default 0) */
    uint8_t reserved[56];
} cw_cond_settings;

/* Fills *s with the defaults above. NULL is ignored. */
CW_API void cw_cond_settings_default(cw_cond_settings *s);

/*
 * Adds a conditional node on the condition `handle` (made by
 * cw_graph_cond_create on g) after deps, and returns its body graph(s).
 * WHILE: the body runs while the value is nonzero when the node starts and
 * after each run of the body; a kernel in the body sets the value
 * (cudaGraphSetConditional(handle, 0) ends the loop). IF: the body runs
 * when the value is nonzero, the else body (with_else) when it is zero.
 * *body receives the body graph; *else_body (may be NULL) the else body,
 * or NULL when there is none. Bodies are owned by the node (cw_graph_destroy
 * refuses them) and are filled with cw_capture_begin_to, cw_graph_add_child,
 * cw_graph_add_empty or cw_graph_add_conditional. Body graphs may contain
 * only kernels, copies, memsets, empty nodes, child graphs and conditional
 * nodes, all on g's context (the driver's rule). node may be NULL.
 * settings may be NULL for the defaults.
 */
CW_API cw_status cw_graph_add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *settings,
                                          cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node,
                                          cw_graph **body, cw_graph **else_body);

/*
 * The nodes of g that no node depends on (its sinks: the end of what was
 * captured or added last), to add nodes after them. Writes up to cap nodes
 * to nodes (may be NULL when cap is 0) and the number of sinks to *count.
 */
CW_API cw_status cw_graph_get_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count);

/* Writes the graph's context (borrowed: valid while the graph lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_graph_get_context(const cw_graph *g, cw_context **ctx);

/* Writes the graph in Graphviz DOT form to path (cuGraphDebugDotPrint);
 * verbose nonzero adds every node's parameters. For debugging. */
CW_API cw_status cw_graph_write_dot(const cw_graph *g, const char *path, int verbose);

/* ---- executable graphs -------------------------------------------------- */

/* Instantiate flags. */
#define CW_GRAPH_EXEC_NODE_PRIORITY 0x1u /* kernels keep the priority of the stream they were
                                            captured on, instead of the launch stream's */

/*
 * Instantiates g (cuGraphInstantiateWithFlags). The exec is independent of
 * g afterwards (g may be destroyed). flags: 0 or CW_GRAPH_EXEC_NODE_PRIORITY.
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, CW_ERROR_INVALID_HANDLE,
 * or the driver's error (a graph the driver cannot instantiate gives its
 * error with the reason).
 */
CW_API cw_status cw_graph_instantiate(cw_graph_exec **out, cw_graph *g, unsigned flags);

/* Destroys the exec; launches in flight complete. Sets *e to NULL; accepts NULL. */
CW_API void cw_graph_exec_destroy(cw_graph_exec **e);

/* Uploads the exec's work to the device on s (cuGraphUpload), so that the
 * first launch costs no more than later ones. Optional. */
CW_API cw_status cw_graph_exec_upload(cw_graph_exec *e, cw_stream *s);

/* Launches the exec on s (cuGraphLaunch): one driver call, no allocation,
 * no lock. s may be any stream of the exec's device. */
CW_API cw_status cw_graph_exec_launch(cw_graph_exec *e, cw_stream *s);

/* Writes the executable graph's context (borrowed: valid while the exec lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_graph_exec_get_context(const cw_graph_exec *e, cw_context **ctx);

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
 * destroyed (launches in flight complete). *info (may be NULL) says which
 * happened and why. Launches already enqueued run the old work. The exec
 * handle stays the same either way. On failure the exec is unchanged.
 */
CW_API cw_status cw_graph_exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info);

typedef struct cw_graph_exec_stats {
    uint64_t launches;          /* cw_graph_exec_launch calls that succeeded */
    uint64_t updates_in_place;  /* cw_graph_exec_update calls applied in place */
    uint64_t reinstantiations;  /* cw_graph_exec_update calls that instantiated again */
    uint8_t reserved[40];
} cw_graph_exec_stats;

CW_API cw_status cw_graph_exec_get_stats(const cw_graph_exec *e, cw_graph_exec_stats *stats);

/* The driver exec (borrowed: valid until the exec is destroyed or
 * re-instantiated by cw_graph_exec_update). */
CW_API cw_status cw_graph_exec_get_handle(const cw_graph_exec *e, CUgraphExec *handle);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_GRAPH_H */
