/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/graph.h (capture, graphs, executable graphs).
#include "api/api.hpp"
#include "graph/graph.hpp"

using namespace cw;

// 0.2 moved the handle and context into the info structs: same sizes as 0.1's.
static_assert(sizeof(cw_graph_info) == 64, "cw_graph_info keeps its size");
static_assert(sizeof(cw_graph_exec_info) == 64, "cw_graph_exec_info keeps cw_graph_exec_stats's size");

namespace {

bool mode_ok(cw_capture_mode mode) {
    return mode == CW_CAPTURE_GLOBAL || mode == CW_CAPTURE_THREAD_LOCAL || mode == CW_CAPTURE_RELAXED;
}

cw_status check_deps(cw_graph_node *const *deps, size_t ndeps) {
    CW_CHECK_ARG(ndeps == 0 || deps != NULL);
    for (size_t i = 0; i < ndeps; i++) CW_CHECK_ARG(deps[i] != NULL);
    return CW_SUCCESS;
}

void defaults(cw_cond_settings *s) {
    memset(s, 0, sizeof *s);
    s->type = CW_COND_WHILE;
    s->with_else = 0;
}

}  // namespace

extern "C" {

// ---- capture ---------------------------------------------------------------

CW_API cw_status cw_capture_begin(cw_stream *s, cw_graph *into, cw_capture_mode mode) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    if (into) CW_CHECK_HANDLE(into);
    CW_CHECK_ARG(mode_ok(mode));
    return graphs::capture_begin(s, into, mode);
}

CW_API cw_status cw_capture_end(cw_graph **out, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(s);
    return graphs::capture_end(s, out);
}

CW_API cw_status cw_capture_get_state(cw_stream *s, cw_capture_state *state) {
    CW_ENTRY;
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(state != NULL);
    return graphs::capture_state(s, state);
}

// ---- graphs ----------------------------------------------------------------

CW_API cw_status cw_graph_create(cw_graph **out, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    return graphs::graph_create(ctx, out);
}

CW_API void cw_graph_destroy(cw_graph **pg) {
    CW_ENTRY;
    if (!pg || !*pg) return;
    cw_graph *g = *pg;
    *pg = NULL;
    if (!live(g)) {
        ignored(CW_ERROR_INVALID_HANDLE, "not a live cw_graph; nothing destroyed");
        return;
    }
    if (g->owner) {
        ignored(CW_ERROR_INVALID_STATE,
                "the graph is the body of a conditional node: it goes with its graph; nothing destroyed");
        return;
    }
    graphs::graph_destroy(g);
}

CW_API cw_status cw_graph_get_info(const cw_graph *g, cw_graph_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(info != NULL);
    return graphs::graph_info(g, info);
}

CW_API cw_status cw_graph_add_child(cw_graph *g, const cw_graph *child, cw_graph_node *const *deps, size_t ndeps,
                                    cw_graph_node **node) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_HANDLE(child);
    CW_CHECK_ARG(child != g);
    CW_TRY(check_deps(deps, ndeps));
    return graphs::add_child(g, child, deps, ndeps, node);
}

CW_API cw_status cw_graph_add_empty(cw_graph *g, cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_TRY(check_deps(deps, ndeps));
    return graphs::add_empty(g, deps, ndeps, node);
}

CW_API cw_status cw_graph_add_cond_handle(cw_graph *g, unsigned default_value, unsigned flags,
                                          cw_cond_handle *handle) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(handle != NULL);
    CW_CHECK_ARG((flags & ~CW_COND_RESET_EACH_LAUNCH) == 0);
    return graphs::cond_create(g, default_value, flags, handle);
}

CW_API void cw_cond_settings_default(cw_cond_settings *s) {
    if (s) defaults(s);
}

CW_API cw_status cw_graph_add_conditional(cw_graph *g, cw_cond_handle handle, const cw_cond_settings *settings,
                                          cw_graph_node *const *deps, size_t ndeps, cw_graph_node **node,
                                          cw_graph **body, cw_graph **else_body) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(body != NULL);
    cw_cond_settings def;
    defaults(&def);
    const cw_cond_settings *s = settings ? settings : &def;
    const unsigned type = api::raw_enum(s->type);
    CW_CHECK_ARG(type == CW_COND_IF || type == CW_COND_WHILE);
    CW_CHECK_ARG(s->with_else == 0 || (s->with_else == 1 && type == CW_COND_IF));
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    CW_TRY(check_deps(deps, ndeps));
    return graphs::add_conditional(g, handle, s, deps, ndeps, node, body, else_body);
}

CW_API cw_status cw_graph_get_sinks(const cw_graph *g, cw_graph_node **nodes, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(cap == 0 || nodes != NULL);
    return graphs::graph_sinks(g, nodes, cap, count);
}

CW_API cw_status cw_graph_write_dot(const cw_graph *g, const char *path, int verbose) {
    CW_ENTRY;
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG(path != NULL && *path);
    return graphs::write_dot(g, path, verbose);
}

// ---- executable graphs -----------------------------------------------------

CW_API cw_status cw_graph_instantiate(cw_graph_exec **out, cw_graph *g, unsigned flags) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(g);
    CW_CHECK_ARG((flags & ~CW_GRAPH_EXEC_NODE_PRIORITY) == 0);
    return graphs::instantiate(g, flags, out);
}

CW_API void cw_graph_exec_destroy(cw_graph_exec **pe) {
    CW_ENTRY;
    if (!pe || !*pe) return;
    cw_graph_exec *e = *pe;
    *pe = NULL;
    if (!live(e)) {
        ignored(CW_ERROR_INVALID_HANDLE, "not a live cw_graph_exec; nothing destroyed");
        return;
    }
    graphs::exec_destroy(e);
}

CW_API cw_status cw_graph_exec_upload(cw_graph_exec *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_HANDLE(s);
    return graphs::exec_upload(e, s);
}

CW_API cw_status cw_graph_exec_launch(cw_graph_exec *e, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_HANDLE(s);
    return graphs::exec_launch(e, s);
}

CW_API cw_status cw_graph_exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_HANDLE(g);
    return graphs::exec_update(e, g, info);
}

CW_API cw_status cw_graph_exec_get_info(const cw_graph_exec *e, cw_graph_exec_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(e);
    CW_CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    info->handle = e->cu;
    info->context = e->ctx;
    info->launches = e->launches.load(std::memory_order_relaxed);
    info->updates_in_place = e->updates_in_place;
    info->reinstantiations = e->reinstantiations;
    return CW_SUCCESS;
}

}  // extern "C"
