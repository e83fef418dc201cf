/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: building the resident loop's graph (resident.hpp).
// The loop's own kernels are captured one at a time into the graph (or a
// body), after its sinks; the workload and the handler go in as child
// graphs or as the work their capture functions enqueue.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

// Adds a part (may be unset: nothing) after g's sinks.
cw_status add_part(cw_resident *r, cw_graph *g, const Part &part) {
    if (part.graph) {
        cw_graph_node *deps[8];
        size_t n = 0;
        CW_TRY(graph_sinks(g, deps, 8, &n));
        if (n > 8) return fail(CW_ERROR_INTERNAL, "the resident graph has %zu sinks", n);
        return add_child(g, part.graph, deps, n, nullptr);
    }
    if (!part.fn) return CW_SUCCESS;
    CW_TRY(capture_begin(r->build, g, CW_CAPTURE_THREAD_LOCAL));
    cw_status st = part.fn(r->build, part.user);
    if (st != CW_SUCCESS && last_error().status == CW_SUCCESS)
        st = fail(st, "the resident loop's capture function returned %s", status_name(st));
    cw_status end = capture_end(r->build, nullptr);
    return st != CW_SUCCESS ? st : end;
}

inline cw_status cu_check(CUresult r, const char *call) { return r == CUDA_SUCCESS ? CW_SUCCESS : fail_cu(r, call); }

// What overlap needs: the 12.3 edge API and programmatic dependent launch.
cw_status check_overlap(const cw_resident *r) {
    if (!drv().cuGraphNodeGetType || !drv().cuGraphNodeGetDependencies || !drv().cuGraphAddDependencies ||
        !drv().cuGraphRemoveDependencies)
        return fail(CW_ERROR_NOT_SUPPORTED, "overlap needs graph edge data (a CUDA 12.3 driver or newer)");
    int major = 0;
    CW_CU(cuDeviceGetAttribute, (&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r->ctx->device));
    if (major < 9)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "overlap needs compute capability 9.0 or newer (programmatic dependent launch); device %d "
                    "is %d.x",
                    r->ctx->ordinal, major);
    return CW_SUCCESS;
}

// Whether the loop's own kernels, as loaded for r's context, wait for the
// kernel before them (res_wait_previous: code compiled for compute 9.0 or
// newer; the checked-in compute 8.0 PTX has no such wait). Only then may the
// edges into them be programmatic.
cw_status own_kernels_wait(const cw_resident *r, bool *yes) {
    *yes = false;
    if (!drv().cuFuncGetAttribute || !drv().cuKernelGetFunction) return CW_SUCCESS;
    cw_kernel *k = nullptr;
    CW_TRY(resident_kernel(kResSignal, &k));
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    int ptx = 0;
    CW_CU(cuFuncGetAttribute, (&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    *yes = ptx >= 90;
    return guard.leave();
}

// The loop's own kernel nodes in the WHILE body (poll, gate, signal per
// iteration): overlap leaves the edges into them as they are unless their
// code waits for the kernel before them (own_kernels_wait).
struct OwnNodes {
    CUgraphNode v[3 * kMaxUnroll];
    size_t n;
    bool has(CUgraphNode x) const {
        for (size_t i = 0; i < n; i++)
            if (v[i] == x) return true;
        return false;
    }
};

// Records the node just captured into g (its only sink).
cw_status note_own(cw_graph *g, OwnNodes *own) {
    cw_graph_node *sink = nullptr;
    size_t n = 0;
    CW_TRY(graph_sinks(g, &sink, 1, &n));
    if (n != 1 || own->n == sizeof own->v / sizeof own->v[0])
        return fail(CW_ERROR_INTERNAL, "the resident graph has %zu sinks after one of its kernels", n);
    own->v[own->n++] = reinterpret_cast<CUgraphNode>(sink);
    return CW_SUCCESS;
}

// Overlap: every ordinary edge from a kernel node into a workload or
// handler kernel node (and, when own_wait, into the loop's own kernels)
// becomes programmatic, from the launch-order port: the kernel is launched
// once the one before it has started, and waits for it on the GPU
// (cw_resident_wait, res_wait_previous).
cw_status overlap_edges(CUgraph body, const OwnNodes &own, bool own_wait) {
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (body, nullptr, &count));
    CUgraphNode *nodes = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    CUgraphNode *deps = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    CUgraphEdgeData *edges = static_cast<CUgraphEdgeData *>(calloc(count ? count : 1, sizeof(CUgraphEdgeData)));
    cw_status st = nodes && deps && edges ? CW_SUCCESS : fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st == CW_SUCCESS) st = cu_check(drv().cuGraphGetNodes(body, nodes, &count), "cuGraphGetNodes");
    for (size_t i = 0; st == CW_SUCCESS && i < count; i++) {
        CUgraphNode to = nodes[i];
        CUgraphNodeType type = 0;
        st = cu_check(drv().cuGraphNodeGetType(to, &type), "cuGraphNodeGetType");
        if (st != CW_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL || (!own_wait && own.has(to))) continue;
        size_t nd = count;
        st = cu_check(drv().cuGraphNodeGetDependencies(to, deps, edges, &nd), "cuGraphNodeGetDependencies");
        for (size_t k = 0; st == CW_SUCCESS && k < nd && k < count; k++) {
            CUgraphNodeType from_type = 0;
            st = cu_check(drv().cuGraphNodeGetType(deps[k], &from_type), "cuGraphNodeGetType");
            if (st != CW_SUCCESS || from_type != CU_GRAPH_NODE_TYPE_KERNEL ||
                edges[k].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
                continue;
            CUgraphEdgeData prog;
            memset(&prog, 0, sizeof prog);
            prog.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
            prog.from_port = CW_KERNEL_NODE_PORT_LAUNCH_ORDER;
            st = cu_check(drv().cuGraphRemoveDependencies(body, &deps[k], &to, &edges[k], 1),
                          "cuGraphRemoveDependencies");
            if (st == CW_SUCCESS)
                st = cu_check(drv().cuGraphAddDependencies(body, &deps[k], &to, &prog, 1), "cuGraphAddDependencies");
        }
    }
    free(nodes);
    free(deps);
    free(edges);
    return st;
}

// Adds a part; with trace, inside a stage named after it (the stages its
// capture function begins nest in that one).
cw_status add_traced_part(cw_resident *r, cw_graph *g, const Part &part, uint8_t which, uint32_t copy) {
    if (!part.set()) return CW_SUCCESS;
    r->build_part = which;
    r->build_copy = copy;
    if (!r->set.trace) return add_part(r, g, part);
    uint32_t idx = 0;
    CW_TRY(stage_new(r, which ? "handler" : "workload", &idx));
    CW_TRY(mark_into(r, g, idx, false));
    CW_TRY(add_part(r, g, part));
    // A stage left open would look like the one running at every later fault.
    for (size_t j = idx + 1; j < r->stages.size(); j++)
        if (!r->stages[j].ended)
            return fail(CW_ERROR_INVALID_STATE,
                        "the %s's capture function began stage '%s' and did not end it (cw_resident_stage_end)",
                        which ? "data-ready handler" : "workload", r->stages[j].name);
    r->stages[idx].ended = true;
    return mark_into(r, g, idx, true);
}

cw_status build_into(cw_resident *r, cw_graph *top) {
    cw_res_host *h = reinterpret_cast<cw_res_host *>(r->host_dev);
    cw_res_dev *d = reinterpret_cast<cw_res_dev *>(r->dev);
    const bool handler = r->handler.set();
    const bool gate_node = r->set.gate == CW_RESIDENT_GATE_NODE;
    unsigned long long timeout_ns = (unsigned long long)r->set.timeout_ms * 1000000ull;
    unsigned sleep_ns = r->set.sleep_interval_us * 1000u;
    unsigned spin_ns = r->set.spin_us * 1000u;
    unsigned flags = (r->set.sleep_mode == CW_RESIDENT_SLEEP_ADAPTIVE ? CW_RES_ADAPTIVE : 0u) |
                     (handler ? CW_RES_HANDLER : 0u) | (r->set.sync_with_host ? CW_RES_SYNC_HOST : 0u) |
                     (gate_node ? 0u : CW_RES_GATE_KERNELS);

    if (r->set.overlap) CW_TRY(check_overlap(r));
    cw_cond_handle loop = 0;
    CW_TRY(cond_create(top, 1, CW_COND_RESET_EACH_LAUNCH, &loop));
    void *arm_args[] = {&h, &d};
    CW_TRY(launch_into(r, top, kResArm, arm_args));
    cw_graph_node *sink = nullptr;
    size_t n = 0;
    CW_TRY(graph_sinks(top, &sink, 1, &n));
    cw_cond_settings cs;
    memset(&cs, 0, sizeof cs);
    cs.type = CW_COND_WHILE;
    cw_graph *body = nullptr;
    CW_TRY(add_conditional(top, loop, &cs, &sink, 1, nullptr, &body, nullptr));
    cs.type = CW_COND_IF;
    OwnNodes own;
    own.n = 0;
    for (uint32_t i = 0; i < r->set.unroll; i++) {
        // Gated by kernels the handle is never set: the kernels take it all the same.
        cw_cond_handle work = 0;
        if (gate_node) CW_TRY(cond_create(body, 0, 0, &work));
        void *poll_args[] = {&h, &d, &loop, &work, &timeout_ns, &sleep_ns, &spin_ns, &flags};
        CW_TRY(launch_into(r, body, kResPoll, poll_args));
        if (r->set.overlap) CW_TRY(note_own(body, &own));
        if (handler) {
            CW_TRY(add_traced_part(r, body, r->handler, 1, i));
            void *gate_args[] = {&d, &work, &flags};
            CW_TRY(launch_into(r, body, kResGate, gate_args));
            if (r->set.overlap) CW_TRY(note_own(body, &own));
        }
        cw_graph *then = body;
        if (gate_node) {
            CW_TRY(graph_sinks(body, &sink, 1, &n));
            CW_TRY(add_conditional(body, work, &cs, &sink, 1, nullptr, &then, nullptr));
        }
        CW_TRY(add_traced_part(r, then, r->workload, 0, i));
        void *signal_args[] = {&h, &d, &flags};
        CW_TRY(launch_into(r, then, kResSignal, signal_args));
        if (r->set.overlap && then == body) CW_TRY(note_own(body, &own));
    }
    if (r->set.overlap) {
        bool own_wait = false;
        CW_TRY(own_kernels_wait(r, &own_wait));
        CW_TRY(overlap_edges(body->cu, own, own_wait));
        log(CW_LOG_DEBUG, "cuweave: resident loop overlap: the workload's kernels%s",
            own_wait ? " and the loop's own" : " (the loop's own kernels were not compiled for 9.0: not them)");
    }
    void *exit_args[] = {&h, &d};
    return launch_into(r, top, kResExit, exit_args);
}

}  // namespace

cw_status launch_into(cw_resident *r, cw_graph *g, ResidentKernel kernel, void **args) {
    cw_kernel *k = nullptr;
    CW_TRY(resident_kernel(kernel, &k));
    CW_TRY(capture_begin(r->build, g, CW_CAPTURE_THREAD_LOCAL));
    cw_launch_config cfg;
    kernels::launch_config_default(&cfg);
    cw_status st = kernels::launch(k, r->build, &cfg, args);
    cw_status end = capture_end(r->build, nullptr);
    return st != CW_SUCCESS ? st : end;
}

cw_status build(cw_resident *r) {
    if (r->set.trace) CW_TRY(trace_prepare(r));
    r->stages.clear();
    cw_graph *top = nullptr;
    CW_TRY(graph_create(r->ctx, &top));
    cw_graph_exec *exec = nullptr;
    r->building = true;
    cw_status st = build_into(r, top);
    r->building = false;
    if (st != CW_SUCCESS) capture_abandon(r->build);  // a capture a failed call left open
    if (st == CW_SUCCESS) st = instantiate(top, 0, &exec);
    graph_destroy(top);
    if (st == CW_SUCCESS) st = exec_upload(exec, r->run);
    if (st != CW_SUCCESS) {
        if (exec) exec_destroy(exec);
        return st;
    }
    // A trial run that stops at its first poll: the driver loads code into
    // a context lazily, at the first launch, and loading waits until no
    // kernel runs on the device; once this loop or another runs, that is
    // never. Run once now, everything is loaded.
    cw_res_host *h = r->host;
    __atomic_store_n(&h->stop, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&h->base, load_requested(r), __ATOMIC_RELAXED);
    __atomic_store_n(&h->epoch, r->epoch.load(std::memory_order_relaxed) + 1, __ATOMIC_RELEASE);
    st = exec_launch(exec, r->run);
    if (st == CW_SUCCESS) st = stream_synchronize(r->run);
    if (st != CW_SUCCESS) {
        exec_destroy(exec);
        return st;
    }
    r->epoch.fetch_add(1, std::memory_order_release);
    if (r->exec) exec_destroy(r->exec);
    r->exec = exec;
    r->dirty = false;
    return CW_SUCCESS;
}

cw_status set_part(cw_resident *r, const cw_graph *g, cw_resident_capture_fn fn, void *user, Part *part) {
    cw_graph *copy = nullptr;
    if (g) {
        if (g->ctx->cu != r->ctx->cu)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: the graph belongs to another context than the resident loop's");
        CW_TRY(graph_create(r->ctx, &copy));
        cw_status st = add_child(copy, g, nullptr, 0, nullptr);
        if (st != CW_SUCCESS) {
            graph_destroy(copy);
            return st;
        }
    }
    if (part->graph) graph_destroy(part->graph);
    part->graph = copy;
    part->fn = fn;
    part->user = fn ? user : nullptr;
    r->dirty = true;
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
