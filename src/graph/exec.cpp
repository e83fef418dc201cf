/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: executable graphs (graph.hpp).
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "graph/graph.hpp"

namespace cw {
namespace graphs {

using namespace core;

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
}  // namespace

cw_status instantiate(cw_graph *g, unsigned flags, cw_graph_exec **out) {
    CW_NVTX_RANGE(graph_instantiate);
    HandleRoom room;
    CW_TRY(room.reserve());
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
    room.publish(e);
    *out = e;
    return CW_SUCCESS;
}

namespace {
void destroy_cu(CUgraphExec cu) {
    CUresult r = drv().cuGraphExecDestroy(cu);
    if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuGraphExecDestroy failed with CUresult %d", current_api(), r);
}

void exec_free(void *owner) {
    cw_graph_exec *e = static_cast<cw_graph_exec *>(owner);
    destroy_cu(e->cu);
    cw_context *ctx = e->ctx;
    e->~cw_graph_exec();
    handle_free(e);
    context_release(ctx);
}

// A driver exec replaced by exec_update, destroyed once no persistent work runs.
struct Replaced {
    IdleRelease idle;
    CUgraphExec cu;
};

void replaced_free(void *owner) {
    Replaced *old = static_cast<Replaced *>(owner);
    destroy_cu(old->cu);
    free(old);
}
}  // namespace

// Destroying an exec with conditional nodes waits until no kernel runs on
// the device (docs/resident.md), forever while a resident loop runs: the
// destroy waits for the loops to stop (idle.hpp), as other such releases do.
// Every exec is deferred so, with or without conditional nodes (the driver
// exec may hold them through a captured or child graph): a plain one is
// only kept a little longer.
void exec_destroy(cw_graph_exec *e) {
    handle_retire(e);
    e->idle.run = exec_free;
    e->idle.owner = e;
    release_when_idle(&e->idle);
}

cw_status exec_upload(cw_graph_exec *e, cw_stream *s) {
    return on_stream(s, "cuGraphUpload", [&] { return drv().cuGraphUpload(e->cu, s->cu); });
}

cw_status exec_launch(cw_graph_exec *e, cw_stream *s) {
    CW_TRY(on_stream(s, "cuGraphLaunch", [&] { return drv().cuGraphLaunch(e->cu, s->cu); }));
    e->launches.fetch_add(1, std::memory_order_relaxed);
    return CW_SUCCESS;
}

cw_status exec_update(cw_graph_exec *e, cw_graph *g, cw_graph_update_info *info) {
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
        // While a resident loop runs, the replaced exec is destroyed once
        // none does (as in exec_destroy): its node is made first, so that
        // nothing fails after the new exec is. Else it is destroyed now, in
        // a quiet call: a loop launched meanwhile waits for the destroy.
        QuietCall quiet;
        Replaced *old = nullptr;
        if (quiet.enter(nullptr) > 0) {
            old = static_cast<Replaced *>(calloc(1, sizeof(Replaced)));
            if (!old) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        CUgraphExec fresh = nullptr;
        CUresult r2 = drv().cuGraphInstantiateWithFlags(&fresh, g->cu, e->cu_flags);
        if (r2 != CUDA_SUCCESS) {
            free(old);
            char what[200];
            snprintf(what, sizeof what, "instantiating again after the update in place was refused (%s)",
                     update_reason(ri.result));
            return fail_cu(r2, "cuGraphInstantiateWithFlags", what);
        }
        if (old) {
            old->cu = e->cu;
            old->idle.run = replaced_free;
            old->idle.owner = old;
            release_when_idle(&old->idle);
        } else {
            CUresult r3 = drv().cuGraphExecDestroy(e->cu);
            if (r3 != CUDA_SUCCESS) {
                // The old exec is still there: keep it, and drop the new one.
                drv().cuGraphExecDestroy(fresh);
                return fail_cu(r3, "cuGraphExecDestroy", "destroying the exec being replaced; the exec is unchanged");
            }
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

}  // namespace graphs
}  // namespace cw
