// cuweave internal: graphs and executable graphs.
#pragma once

#include "cuweave/graph.h"
#include "core/stream.hpp"

namespace cw {
enum : uint32_t {
    kTagGraph = 0x43574752u,  // "CWGR"
    kTagExec = 0x43574558u,   // "CWEX"
};
}  // namespace cw

struct cw_graph {
    uint32_t tag;
    cw_context *ctx;     // retained by top-level graphs; bodies borrow their root's
    CUgraph cu;
    cw_graph *owner;     // a conditional body: the graph holding its node (NULL at top level)
    cw_graph *bodies;    // wrappers of the bodies of this graph's conditional nodes
    cw_graph *next_body; // link in owner->bodies
    cw_stream *capturing;  // the stream capturing into this graph (cw_capture_begin_to)
    CUgraphConditionalHandle *conds;  // made by cw_graph_cond_create on this graph
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
};

namespace cw {

inline bool graph_ok(const cw_graph *g) { return handle_live(g, kTagGraph); }
inline bool exec_ok(const cw_graph_exec *e) { return handle_live(e, kTagExec); }

// Wraps a driver graph (owned when owner is NULL) in a cw_graph.
cw_status graph_wrap(cw_context *ctx, CUgraph cu, cw_graph *owner, cw_graph **out);

}  // namespace cw

#define CW_CHECK_GRAPH(g)                                                                  \
    do {                                                                                   \
        CW_CHECK_ARG((g) != NULL);                                                         \
        if (__builtin_expect(!::cw::graph_ok(g), 0))                                       \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_graph", #g);   \
    } while (0)

#define CW_CHECK_EXEC(e)                                                                   \
    do {                                                                                   \
        CW_CHECK_ARG((e) != NULL);                                                         \
        if (__builtin_expect(!::cw::exec_ok(e), 0))                                        \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_graph_exec", #e); \
    } while (0)
