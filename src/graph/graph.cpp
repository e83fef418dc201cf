// cuweave: graphs. Stream capture, instantiation, launch, update, and graphs
// built from parts (child graphs, conditional nodes).
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.hpp"

namespace cw {
namespace {

const char *update_reason(int result) {
    switch (result) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS: return "";
    case CU_GRAPH_EXEC_UPDATE_ERROR: return "the driver refused the update for an unspecified reason";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "the topology changed (nodes or edges added or removed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "a node changed type";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "a kernel node's function changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
        return "a node's parameters changed in a way that cannot be updated";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "a node cannot be updated";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
        return "a kernel node's function changed in an unsupported way";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return "a node's attributes changed";
    default: return "the driver refused the update (unknown reason code)";
    }
}

// The nodes of cu that no node depends on. *out is malloc'ed (NULL when
// there are none); the caller frees it.
cw_status graph_sinks(CUgraph cu, CUgraphNode **out, size_t *count) {
    *out = nullptr;
    *count = 0;
    size_t n = 0;
    CW_CU(cuGraphGetNodes, (cu, nullptr, &n));
    if (n == 0) return CW_SUCCESS;
    CUgraphNode *nodes = static_cast<CUgraphNode *>(malloc(n * sizeof(CUgraphNode)));
    if (!nodes) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    CUresult r = drv().cuGraphGetNodes(cu, nodes, &n);
    if (r != CUDA_SUCCESS) {
        free(nodes);
        return fail_cu(r, "cuGraphGetNodes");
    }
    size_t sinks = 0;
    for (size_t i = 0; i < n; i++) {
        size_t deps = 0;
        r = drv().cuGraphNodeGetDependentNodes(nodes[i], nullptr, &deps);
        if (r != CUDA_SUCCESS) {
            free(nodes);
            return fail_cu(r, "cuGraphNodeGetDependentNodes");
        }
        if (deps == 0) nodes[sinks++] = nodes[i];
    }
    *out = nodes;
    *count = sinks;
    return CW_SUCCESS;
}

// A graph, or a body inside it, is the target of an active capture.
bool graph_busy(const cw_graph *g) {
    if (g->capturing) return true;
    for (const cw_graph *b = g->bodies; b; b = b->next_body)
        if (graph_busy(b)) return true;
    return false;
}

void graph_free(cw_graph *g) {
    cw_graph *b = g->bodies;
    while (b) {
        cw_graph *next = b->next_body;
        graph_free(b);
        b = next;
    }
    free(g->conds);
    cw_context *ctx = g->ctx;
    bool top = g->owner == nullptr;
    if (top) {
        CUresult r = drv().cuGraphDestroy(g->cu);
        if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuGraphDestroy failed with CUresult %d", current_api(), r);
    }
    handle_retire(g);
    free(g);
    if (top) context_release(ctx);
}

cw_status check_deps(cw_graph_node *const *deps, size_t ndeps) {
    CW_CHECK_ARG(ndeps == 0 || deps != NULL);
    for (size_t i = 0; i < ndeps; i++) CW_CHECK_ARG(deps[i] != NULL);
    return CW_SUCCESS;
}

const CUgraphNode *cu_nodes(cw_graph_node *const *deps) { return reinterpret_cast<const CUgraphNode *>(deps); }

cw_status begin_capture(cw_stream *s, cw_graph *g, cw_capture_mode mode) {
    CW_TRY(ensure_init());
    if (s->is_null)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "the legacy NULL stream cannot be captured (the driver refuses it): capture a stream made by "
                    "cw_stream_create or taken from a pool, and order it against the NULL stream with cw_stream_wait");
    if (s->cap.active)
        return fail(CW_ERROR_INVALID_STATE, "the stream is already capturing: end that capture with cw_capture_end first");
    CUgraphNode *sinks = nullptr;
    size_t nsinks = 0;
    if (g) {
        if (g->ctx != s->ctx)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the graph and the stream belong to different contexts");
        if (g->capturing)
            return fail(CW_ERROR_INVALID_STATE, "the graph is already the target of a capture on another stream");
        if (!drv().cuStreamBeginCaptureToGraph)
            return fail(CW_ERROR_NOT_SUPPORTED,
                        "capturing into an existing graph needs cuStreamBeginCaptureToGraph (CUDA 12.3 driver)");
        CW_TRY(graph_sinks(g->cu, &sinks, &nsinks));
    }
    const uint64_t serial = capture_violation_serial();
    cw_status st;
    if (g)
        st = on_stream(s, "cuStreamBeginCaptureToGraph", [&] {
            return drv().cuStreamBeginCaptureToGraph(s->cu, g->cu, sinks, nullptr, nsinks, mode);
        });
    else
        st = on_stream(s, "cuStreamBeginCapture", [&] { return drv().cuStreamBeginCapture(s->cu, mode); });
    free(sinks);
    if (st != CW_SUCCESS) return st;
    s->cap.noted.store(0, std::memory_order_relaxed);
    s->cap.serial = serial;
    s->cap.mode = mode;
    s->cap.target = g;
    s->cap.active = true;
    if (g) g->capturing = s;
    return CW_SUCCESS;
}

void capture_done(cw_stream *s) {
    if (s->cap.target) s->cap.target->capturing = nullptr;
    s->cap.target = nullptr;
    s->cap.active = false;
}

}  // namespace

void note_capture_failure(const cw_stream *cs, CUresult r, const char *entry) {
    cw_stream *s = const_cast<cw_stream *>(cs);
    if (!s->cap.active) return;
    int expected = 0;
    if (!s->cap.noted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
    copy_text(s->cap.note.api, sizeof s->cap.note.api, current_api());
    copy_text(s->cap.note.call, sizeof s->cap.note.call, entry);
    s->cap.note.result = r;
    s->cap.noted.store(2, std::memory_order_release);
}

void capture_abandon(cw_stream *s) {
    if (!s->cap.active) return;
    CUgraph g = nullptr;
    CUresult r = drv().cuStreamEndCapture(s->cu, &g);
    if (r == CUDA_SUCCESS && g && !s->cap.target) drv().cuGraphDestroy(g);
    log(CW_LOG_WARNING, "%s: a capture left open (its stream going away, or a failed build) was ended and dropped",
        current_api());
    capture_done(s);
}

cw_status graph_wrap(cw_context *ctx, CUgraph cu, cw_graph *owner, cw_graph **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_graph *g = static_cast<cw_graph *>(calloc(1, sizeof(cw_graph)));
    if (!g) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    g->ctx = ctx;
    g->cu = cu;
    g->owner = owner;
    if (owner) {
        g->next_body = owner->bodies;
        owner->bodies = g;
    } else {
        context_retain(ctx);
    }
    room.publish(g, kTagGraph);
    *out = g;
    return CW_SUCCESS;
}

}  // namespace cw

using namespace cw;

extern "C" {

// ---- capture ---------------------------------------------------------------

CW_API cw_status cw_capture_begin(cw_stream *s, cw_capture_mode mode) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(mode == CW_CAPTURE_GLOBAL || mode == CW_CAPTURE_THREAD_LOCAL || mode == CW_CAPTURE_RELAXED);
    return begin_capture(s, nullptr, mode);
}

CW_API cw_status cw_capture_begin_to(cw_stream *s, cw_graph *g, cw_capture_mode mode) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(mode == CW_CAPTURE_GLOBAL || mode == CW_CAPTURE_THREAD_LOCAL || mode == CW_CAPTURE_RELAXED);
    return begin_capture(s, g, mode);
}

CW_API cw_status cw_capture_end(cw_stream *s, cw_graph **out) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    if (!s->cap.active)
        return fail(CW_ERROR_INVALID_STATE,
                    "the stream is not capturing (no cw_capture_begin on it, or its capture already ended)");
    CW_CHECK_ARG(out != NULL || s->cap.target != NULL);
    cw_graph *target = s->cap.target;
    CUgraph g = nullptr;
    CUresult r = drv().cuStreamEndCapture(s->cu, &g);
    if (r == CUDA_SUCCESS) {
        capture_done(s);
        if (target) {
            if (out) *out = target;
            return CW_SUCCESS;
        }
        cw_graph *w = nullptr;
        cw_status st = graph_wrap(s->ctx, g, nullptr, &w);
        if (st != CW_SUCCESS) {
            drv().cuGraphDestroy(g);
            return st;
        }
        *out = w;
        return CW_SUCCESS;
    }
    if (g && !(target && g == target->cu)) drv().cuGraphDestroy(g);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    const bool still = drv().cuStreamIsCapturing(s->cu, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
    char why[400];
    if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && still) {
        return fail_cu(r, "cuStreamEndCapture",
                       "a CW_CAPTURE_THREAD_LOCAL capture must be ended on the thread that began it; the capture goes on");
    }
    if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
        CaptureViolation v;
        const char *name = nullptr, *text = nullptr;
        bool known = false;
        const char *how = "invalidated by";
        if (s->cap.noted.load(std::memory_order_acquire) == 2) {
            copy_text(v.api, sizeof v.api, s->cap.note.api);
            copy_text(v.call, sizeof v.call, s->cap.note.call);
            v.result = s->cap.note.result;
            known = true;
        } else if (capture_violation_since(s->cap.serial, &v)) {
            known = true;
            how = "invalidated, most likely by the last capture-breaking call cuweave saw:";
        }
        if (known) {
            driver_error_text(v.result, &name, &text);
            snprintf(why, sizeof why,
                     "the capture was %s %s (%s returned %s: %s); the capture has ended and the stream can be used "
                     "again",
                     how, v.api, v.call, name ? name : "?", text ? text : "?");
        } else {
            snprintf(why, sizeof why,
                     "the capture was invalidated by a call cuweave did not make (a driver call on a stream taking "
                     "part in the capture); the capture has ended and the stream can be used again");
        }
    } else if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
        snprintf(why, sizeof why,
                 "a stream that joined the capture (cw_stream_fork, or cw_stream_wait on the capturing stream) was "
                 "not joined back (cw_stream_join, or cw_stream_wait of the capturing stream on it) before "
                 "cw_capture_end; the capture has ended and the stream can be used again");
    } else {
        snprintf(why, sizeof why, "the capture has %s", still ? "not ended" : "ended and the stream can be used again");
    }
    if (!still) capture_done(s);
    return fail_cu(r, "cuStreamEndCapture", why);
}

CW_API cw_status cw_capture_get_state(cw_stream *s, cw_capture_state *state) {
    CW_ENTRY;
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(state != NULL);
    CW_TRY(ensure_init());
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CW_TRY(on_stream(s, "cuStreamIsCapturing", [&] { return drv().cuStreamIsCapturing(s->cu, &cs); }));
    *state = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE        ? CW_CAPTURE_ACTIVE
             : cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CW_CAPTURE_INVALIDATED
                                                          : CW_CAPTURE_NONE;
    return CW_SUCCESS;
}

// ---- graphs ----------------------------------------------------------------

CW_API cw_status cw_graph_create(cw_graph **out, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
    CW_TRY(ensure_init());
    CUgraph cu = nullptr;
    CW_CU(cuGraphCreate, (&cu, 0));
    cw_status st = graph_wrap(ctx, cu, nullptr, out);
    if (st != CW_SUCCESS) drv().cuGraphDestroy(cu);
    return st;
}

CW_API void cw_graph_destroy(cw_graph **pg) {
    CW_ENTRY;
    if (!pg || !*pg) return;
    cw_graph *g = *pg;
    if (!graph_ok(g)) {
        *pg = NULL;
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_graph; nothing destroyed");
        return;
    }
    if (g->owner) {
        fail(CW_ERROR_INVALID_STATE, "the graph is the body of a conditional node: it goes with its graph");
        return;
    }
    if (graph_busy(g)) {
        fail(CW_ERROR_INVALID_STATE, "the graph is the target of an active capture: end the capture first");
        return;
    }
    *pg = NULL;
    graph_free(g);
}

CW_API cw_status cw_graph_get_info(const cw_graph *g, cw_graph_info *info) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(info != NULL);
    size_t n = 0;
    CW_CU(cuGraphGetNodes, (g->cu, nullptr, &n));
    CUgraphNode *sinks = nullptr;
    size_t nsinks = 0;
    CW_TRY(graph_sinks(g->cu, &sinks, &nsinks));
    free(sinks);
    memset(info, 0, sizeof *info);
    info->nodes = n;
    info->sinks = nsinks;
    info->is_body = g->owner != nullptr;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_get_handle(const cw_graph *g, CUgraph *handle) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(handle != NULL);
    *handle = g->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps, size_t ndeps,
                                    cw_graph_node **node) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_GRAPH(child);
    CW_CHECK_ARG(child != g);
    CW_TRY(check_deps(deps, ndeps));
    if (graph_busy(g) || graph_busy(child))
        return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CUgraphNode n = nullptr;
    CW_CU(cuGraphAddChildGraphNode, (&n, g->cu, cu_nodes(deps), ndeps, child->cu));
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_TRY(check_deps(deps, ndeps));
    if (graph_busy(g)) return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CUgraphNode n = nullptr;
    CW_CU(cuGraphAddEmptyNode, (&n, g->cu, cu_nodes(deps), ndeps));
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_cond_create(cw_graph *g, unsigned default_value, unsigned flags, cw_cond_handle *handle) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(handle != NULL);
    CW_CHECK_ARG((flags & ~CW_COND_RESET_EACH_LAUNCH) == 0);
    CW_TRY(ensure_init());
    if (!drv().cuGraphConditionalHandleCreate || !drv().cuGraphAddNode)
        return fail(CW_ERROR_NOT_SUPPORTED, "conditional graph nodes need a CUDA 12.3 driver or newer");
    if (g->cond_count == g->cond_cap) {
        size_t cap = g->cond_cap ? g->cond_cap * 2 : 4;
        void *p = realloc(g->conds, cap * sizeof *g->conds);
        if (!p) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        g->conds = static_cast<CUgraphConditionalHandle *>(p);
        g->cond_cap = cap;
    }
    CUgraphConditionalHandle h = 0;
    CW_CU(cuGraphConditionalHandleCreate,
          (&h, g->cu, g->ctx->cu, default_value, (flags & CW_COND_RESET_EACH_LAUNCH) ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0));
    g->conds[g->cond_count++] = h;
    *handle = h;
    return CW_SUCCESS;
}

CW_API void cw_cond_settings_default(cw_cond_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->type = CW_COND_WHILE;
    s->with_else = 0;
}

CW_API cw_status cw_graph_add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *settings,
                                          cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node,
                                          cw_graph **body, cw_graph **else_body) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(body != NULL);
    cw_cond_settings def;
    cw_cond_settings_default(&def);
    const cw_cond_settings *s = settings ? settings : &def;
    CW_CHECK_ARG(s->type == CW_COND_IF || s->type == CW_COND_WHILE);
    CW_CHECK_ARG(s->with_else == 0 || (s->with_else == 1 && s->type == CW_COND_IF));
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    CW_TRY(check_deps(deps, ndeps));
    bool known = false;
    for (size_t i = 0; i < g->cond_count && !known; i++) known = g->conds[i] == handle;
    if (!known)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: the condition handle was not made by cw_graph_cond_create on this graph");
    if (graph_busy(g)) return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    const unsigned nbodies = s->with_else ? 2 : 1;
    // The wrappers (and their room in the handle registry) first, so that
    // nothing can fail once the node exists.
    HandleRoom room;
    CW_TRY(room.reserve(nbodies));
    cw_graph *w[2] = {nullptr, nullptr};
    for (unsigned i = 0; i < nbodies; i++) {
        w[i] = static_cast<cw_graph *>(calloc(1, sizeof(cw_graph)));
        if (!w[i]) {
            free(w[0]);
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = handle;
    p.conditional.type = s->type == CW_COND_IF ? CU_GRAPH_COND_TYPE_IF : CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = nbodies;
    p.conditional.ctx = g->ctx->cu;
    CUgraphNode n = nullptr;
    CUresult r = drv().cuGraphAddNode(&n, g->cu, cu_nodes(deps), nullptr, ndeps, &p);
    if (r != CUDA_SUCCESS || !p.conditional.phGraph_out) {
        free(w[0]);
        free(w[1]);
        if (r == CUDA_SUCCESS) return fail(CW_ERROR_INTERNAL, "cuGraphAddNode returned no body graph");
        return fail_cu(r, "cuGraphAddNode");
    }
    for (unsigned i = 0; i < nbodies; i++) {
        w[i]->ctx = g->ctx;
        w[i]->cu = p.conditional.phGraph_out[i];
        w[i]->owner = g;
        w[i]->next_body = g->bodies;
        g->bodies = w[i];
        room.publish(w[i], kTagGraph);
    }
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    *body = w[0];
    if (else_body) *else_body = w[1];
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_get_context(const cw_graph *g, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = g->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_get_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(cap == 0 || nodes != NULL);
    CUgraphNode *sinks = nullptr;
    size_t n = 0;
    CW_TRY(graph_sinks(g->cu, &sinks, &n));
    for (size_t i = 0; i < n && i < cap; i++) nodes[i] = reinterpret_cast<cw_graph_node *>(sinks[i]);
    free(sinks);
    *count = n;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_write_dot(const cw_graph *g, const char *path, int verbose) {
    CW_ENTRY;
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG(path != NULL && *path);
    CW_CU(cuGraphDebugDotPrint, (g->cu, path, verbose ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0));
    return CW_SUCCESS;
}

// ---- executable graphs -----------------------------------------------------

CW_API cw_status cw_graph_instantiate(cw_graph_exec **out, cw_graph *g, unsigned flags) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_GRAPH(g);
    CW_CHECK_ARG((flags & ~CW_GRAPH_EXEC_NODE_PRIORITY) == 0);
    if (graph_busy(g)) return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CW_TRY(ensure_init());
    void *mem = calloc(1, sizeof(cw_graph_exec));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_graph_exec *e = new (mem) cw_graph_exec();
    e->cu_flags = (flags & CW_GRAPH_EXEC_NODE_PRIORITY) ? CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY : 0;
    CurrentGuard guard;
    cw_status st = guard.enter(g->ctx->cu);
    if (st == CW_SUCCESS) {
        CUresult r = drv().cuGraphInstantiateWithFlags(&e->cu, g->cu, e->cu_flags);
        if (r != CUDA_SUCCESS) st = fail_cu(r, "cuGraphInstantiateWithFlags");
    }
    cw_status left = guard.leave();
    if (st == CW_SUCCESS && left != CW_SUCCESS) {
        drv().cuGraphExecDestroy(e->cu);
        st = left;
    }
    if (st != CW_SUCCESS) {
        e->~cw_graph_exec();
        free(mem);
        return st;
    }
    e->ctx = g->ctx;
    context_retain(e->ctx);
    room.publish(e, kTagExec);
    *out = e;
    return CW_SUCCESS;
}

CW_API void cw_graph_exec_destroy(cw_graph_exec **pe) {
    CW_ENTRY;
    if (!pe || !*pe) return;
    cw_graph_exec *e = *pe;
    *pe = NULL;
    if (!exec_ok(e)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_graph_exec; nothing destroyed");
        return;
    }
    handle_retire(e);
    CUresult r = drv().cuGraphExecDestroy(e->cu);
    if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuGraphExecDestroy failed with CUresult %d", current_api(), r);
    cw_context *ctx = e->ctx;
    e->~cw_graph_exec();
    free(e);
    context_release(ctx);
}

CW_API cw_status cw_graph_exec_upload(cw_graph_exec *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_STREAM(s);
    return on_stream(s, "cuGraphUpload", [&] { return drv().cuGraphUpload(e->cu, s->cu); });
}

CW_API cw_status cw_graph_exec_get_context(const cw_graph_exec *e, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = e->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_exec_launch(cw_graph_exec *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_STREAM(s);
    CW_TRY(on_stream(s, "cuGraphLaunch", [&] { return drv().cuGraphLaunch(e->cu, s->cu); }));
    e->launches.fetch_add(1, std::memory_order_relaxed);
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_GRAPH(g);
    if (graph_busy(g)) return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CurrentGuard guard;
    CW_TRY(guard.enter(e->ctx->cu));
    CUgraphExecUpdateResultInfo ri;
    memset(&ri, 0, sizeof ri);
    CUresult r = drv().cuGraphExecUpdate(e->cu, g->cu, &ri);
    cw_graph_update_info out;
    memset(&out, 0, sizeof out);
    if (r == CUDA_SUCCESS) {
        e->updates_in_place++;
        out.kind = CW_GRAPH_UPDATED_IN_PLACE;
        out.reason = "";
    } else if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        CUgraphExec fresh = nullptr;
        CUresult r2 = drv().cuGraphInstantiateWithFlags(&fresh, g->cu, e->cu_flags);
        if (r2 != CUDA_SUCCESS) {
            char what[200];
            snprintf(what, sizeof what, "instantiating again after the update in place was refused (%s)",
                     update_reason(ri.result));
            return fail_cu(r2, "cuGraphInstantiateWithFlags", what);
        }
        CUresult r3 = drv().cuGraphExecDestroy(e->cu);
        if (r3 != CUDA_SUCCESS) {
            // The old exec is still there: keep it, and drop the new one.
            drv().cuGraphExecDestroy(fresh);
            return fail_cu(r3, "cuGraphExecDestroy", "destroying the exec being replaced; the exec is unchanged");
        }
        e->cu = fresh;
        e->reinstantiations++;
        out.kind = CW_GRAPH_REINSTANTIATED;
        out.driver_result = ri.result;
        out.reason = update_reason(ri.result);
        log(CW_LOG_INFO, "%s: the exec was instantiated again: %s", current_api(), out.reason);
    } else {
        return fail_cu(r, "cuGraphExecUpdate");
    }
    CW_TRY(guard.leave());
    if (info) *info = out;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_exec_get_stats(const cw_graph_exec *e, cw_graph_exec_stats *stats) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_ARG(stats != NULL);
    memset(stats, 0, sizeof *stats);
    stats->launches = e->launches.load(std::memory_order_relaxed);
    stats->updates_in_place = e->updates_in_place;
    stats->reinstantiations = e->reinstantiations;
    return CW_SUCCESS;
}

CW_API cw_status cw_graph_exec_get_handle(const cw_graph_exec *e, CUgraphExec *handle) {
    CW_ENTRY;
    CW_CHECK_EXEC(e);
    CW_CHECK_ARG(handle != NULL);
    *handle = e->cu;
    return CW_SUCCESS;
}

}  // extern "C"
