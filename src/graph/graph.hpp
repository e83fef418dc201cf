/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: stream capture, graphs built from parts (child
// graphs, conditional nodes), executable graphs; the GPU-resident loop is
// built on these (resident.hpp).
#pragma once

#include "core/stream.hpp"
#include "cuweave/graph.h"

struct cw_graph {
    uint32_t tag;
    cw_context *ctx;     // retained by top-level graphs; bodies borrow their root's
    CUgraph cu;
    cw_graph *owner;     // a conditional body: the graph holding its node (NULL at top level)
    cw_graph *bodies;    // wrappers of the bodies of this graph's conditional nodes
    cw_graph *next_body; // link in owner->bodies
    cw_stream *capturing;  // the stream capturing into this graph (capture_begin with a graph)
    CUgraphConditionalHandle *conds;  // made by cw_graph_add_cond_handle on this graph
    size_t cond_count, cond_cap;
};

struct cw_graph_exec {
    uint32_t tag;
    cw_context *ctx;  // retained
    CUgraphExec cu;
    unsigned long long cu_flags;
    std::atomic<uint64_t> launches;
    uint64_t updates_in_place;
    uint64_t reinstantiations;
    cw::core::IdleRelease idle;  // its destroy, deferred while persistent work runs (exec_destroy)
};

namespace cw {
namespace graphs {

// ---- capture (capture.cpp) ----
// Begins a capture on s: into a new graph (g NULL), or into g after its
// current sinks. Refused on the legacy stream and on a stream capturing already.
cw_status capture_begin(cw_stream *s, cw_graph *g, cw_capture_mode mode);
// Ends the capture on s. *out: the new graph, or g itself (out may be NULL
// then). A failed capture is explained: the call that broke it, a stream not
// joined back.
cw_status capture_end(cw_stream *s, cw_graph **out);
cw_status capture_state(cw_stream *s, cw_capture_state *state);
// Ends an abandoned capture on s (a failed build, or its stream going away):
// the partial graph is dropped. Does nothing when no capture is active.
void capture_abandon(cw_stream *s);

// ---- graphs (graph.cpp) ----
cw_status graph_create(cw_context *ctx, cw_graph **out);
// Wraps a driver graph (owned when owner is NULL) in a cw_graph.
cw_status graph_wrap(cw_context *ctx, CUgraph cu, cw_graph *owner, cw_graph **out);
// A graph, or a body inside it, is the target of an active capture.
bool graph_busy(const cw_graph *g);
// Destroys a top-level graph, its bodies with it; a capture recording into
// it or a body is ended and dropped first (capture_abandon).
void graph_destroy(cw_graph *g);
cw_status graph_info(const cw_graph *g, cw_graph_info *info);
// Nodes of g: child (a copy of child), empty, conditional (IF or WHILE on
// handle, which cond_create made on g; its bodies are graphs owned by g).
// deps: ndeps nodes of g (checked by the caller); node may be NULL.
cw_status add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps, size_t ndeps,
                    cw_graph_node **node);
cw_status add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node);
cw_status cond_create(cw_graph *g, unsigned default_value, unsigned flags, cw_cond_handle *handle);
cw_status add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *s, cw_graph_node *const *deps,
                          size_t ndeps, cw_graph_node **node, cw_graph **body, cw_graph **else_body);
// The nodes of g that no node depends on: up to cap of them in nodes, all
// of them counted in *count.
cw_status graph_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count);
cw_status write_dot(const cw_graph *g, const char *path, int verbose);
// The sinks of a driver graph: *out is malloc'ed (NULL when there are none),
// the caller frees it.
cw_status sinks_of(CUgraph cu, CUgraphNode **out, size_t *count);

// ---- executable graphs (exec.cpp) ----
cw_status instantiate(cw_graph *g, unsigned flags, cw_graph_exec **out);
void exec_destroy(cw_graph_exec *e);
cw_status exec_upload(cw_graph_exec *e, cw_stream *s);
cw_status exec_launch(cw_graph_exec *e, cw_stream *s);
// Updates e to g in place, or instantiates again when the driver refuses.
cw_status exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info);

}  // namespace graphs
}  // namespace cw
