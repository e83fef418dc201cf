/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: graphs built from parts (child graphs, conditional
// nodes) and what they hold (graph.hpp).
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {
const CUgraphNode *cu_nodes(cw_graph_node *const *deps) { return reinterpret_cast<const CUgraphNode *>(deps); }
}  // namespace

// The nodes of cu that no node depends on. *out is malloc'ed (NULL when
// there are none); the caller frees it.
cw_status sinks_of(CUgraph cu, CUgraphNode **out, size_t *count) {
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

bool graph_busy(const cw_graph *g) {
    if (g->capturing) return true;
    for (const cw_graph *b = g->bodies; b; b = b->next_body)
        if (graph_busy(b)) return true;
    return false;
}

void graph_destroy(cw_graph *g) {
    // A capture still recording into g (or a body of it) is ended and
    // dropped first, as if its stream went away: the driver graph goes now.
    if (g->capturing) capture_abandon(g->capturing);
    cw_graph *b = g->bodies;
    while (b) {
        cw_graph *next = b->next_body;
        graph_destroy(b);
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
    handle_free(g);
    if (top) context_release(ctx);
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
    room.publish(g);
    *out = g;
    return CW_SUCCESS;
}

cw_status graph_create(cw_context *ctx, cw_graph **out) {
    CW_TRY(ensure_init());
    CUgraph cu = nullptr;
    CW_CU(cuGraphCreate, (&cu, 0));
    cw_status st = graph_wrap(ctx, cu, nullptr, out);
    if (st != CW_SUCCESS) drv().cuGraphDestroy(cu);
    return st;
}

cw_status graph_info(const cw_graph *g, cw_graph_info *info) {
    size_t n = 0;
    CW_CU(cuGraphGetNodes, (g->cu, nullptr, &n));
    CUgraphNode *sinks = nullptr;
    size_t nsinks = 0;
    CW_TRY(sinks_of(g->cu, &sinks, &nsinks));
    free(sinks);
    memset(info, 0, sizeof *info);
    info->handle = g->cu;
    info->context = g->ctx;
    info->nodes = n;
    info->sinks = nsinks;
    info->is_body = g->owner != nullptr;
    return CW_SUCCESS;
}

cw_status add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps, size_t ndeps,
                    cw_graph_node **node) {
    if (graph_busy(g) || graph_busy(child))
        return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CUgraphNode n = nullptr;
    CW_CU(cuGraphAddChildGraphNode, (&n, g->cu, cu_nodes(deps), ndeps, child->cu));
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    return CW_SUCCESS;
}

cw_status add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node) {
    if (graph_busy(g)) return fail(CW_ERROR_INVALID_STATE, "a capture into the graph is active: end it first");
    CUgraphNode n = nullptr;
    CW_CU(cuGraphAddEmptyNode, (&n, g->cu, cu_nodes(deps), ndeps));
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    return CW_SUCCESS;
}

cw_status cond_create(cw_graph *g, unsigned default_value, unsigned flags, cw_cond_handle *handle) {
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

cw_status add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *s, cw_graph_node *const *deps,
                          size_t ndeps, cw_graph_node **node, cw_graph **body, cw_graph **else_body) {
    bool known = false;
    for (size_t i = 0; i < g->cond_count && !known; i++) known = g->conds[i] == handle;
    if (!known)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: the condition handle was not made by cw_graph_add_cond_handle on this graph");
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
        room.publish(w[i]);
    }
    if (node) *node = reinterpret_cast<cw_graph_node *>(n);
    *body = w[0];
    if (else_body) *else_body = w[1];
    return CW_SUCCESS;
}

cw_status graph_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count) {
    CUgraphNode *sinks = nullptr;
    size_t n = 0;
    CW_TRY(sinks_of(g->cu, &sinks, &n));
    for (size_t i = 0; i < n && i < cap; i++) nodes[i] = reinterpret_cast<cw_graph_node *>(sinks[i]);
    free(sinks);
    *count = n;
    return CW_SUCCESS;
}

cw_status write_dot(const cw_graph *g, const char *path, int verbose) {
    CW_CU(cuGraphDebugDotPrint, (g->cu, path, verbose ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0));
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
