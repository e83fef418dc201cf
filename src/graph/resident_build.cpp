/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: building the resident loop's graph (resident.hpp).
// The loop's own kernels are captured one at a time into the graph (or a
// body), after its sinks; the workload and the handler go in as child
// graphs or as the work their capture functions enqueue.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

inline cw_status cu_check(CUresult r, const char *call) { return r == CUDA_SUCCESS ? CW_SUCCESS : fail_cu(r, call); }

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
    CUgraphNode v[3 * kMaxUnroll + 1];
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
    if (st == CW_SUCCESS && count) st = cu_check(drv().cuGraphGetNodes(body, nodes, &count), "cuGraphGetNodes");
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
// capture function begins nest in that one). own_marks: the loop's own
// kernels around the part store the stage's begin and end (their mark
// arguments, mark_arg); else mark kernels before and after it do. The
// stage's index is `expect` (what mark_arg was given before).
cw_status add_traced_part(cw_resident *r, cw_graph *g, const Part &part, uint8_t which, uint32_t copy,
                          bool own_marks = false, uint32_t expect = 0) {
    if (!part.set()) return CW_SUCCESS;
    r->build_part = which;
    r->build_copy = copy;
    if (!r->set.trace) return add_part(r, g, part);
    uint32_t idx = 0;
    CW_TRY(stage_new(r, which ? "handler" : "workload", &idx));
    if (own_marks && idx != expect)
        return fail(CW_ERROR_INTERNAL, "internal error: the %s's stage is %u, its marks were given to the loop's "
                    "kernels as %u", which ? "data-ready handler" : "workload", idx, expect);
    if (!own_marks) CW_TRY(mark_into(r, g, idx, false));
    CW_TRY(add_part(r, g, part));
    // A stage left open would look like the one running at every later fault.
    for (size_t j = idx + 1; j < r->stages.size(); j++)
        if (!r->stages[j].ended)
            return fail(CW_ERROR_INVALID_STATE,
                        "the %s's capture function began stage '%s' and did not end it (cw_resident_stage_end)",
                        which ? "data-ready handler" : "workload", r->stages[j].name);
    r->stages[idx].ended = true;
    return own_marks ? CW_SUCCESS : mark_into(r, g, idx, true);
}

// The device address of stage idx's begin or end mark as a kernel argument
// of the loop's own kernels (0: no mark, untraced or no such stage).
CUdeviceptr mark_arg(const cw_resident *r, bool traced, uint32_t idx, bool end) {
    return traced ? r->marks_dev + sizeof(unsigned long long) * (2ull * idx + (end ? 1 : 0)) : 0;
}

// ---- what the workload is made of (gate and overlap AUTO, gate BEGIN_END) ----

// Records the first reason a build fell back (later ones are consequences).
void fall_back(cw_resident *r, cw_resident_fallback why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fall_back(cw_resident *r, cw_resident_fallback why, const char *fmt, ...) {
    if (r->fallback != CW_RESIDENT_FALLBACK_NONE) return;
    r->fallback = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fallback_detail, sizeof r->fallback_detail, fmt, ap);
    va_end(ap);
}

const char *node_kind(CUgraphNodeType t) {
    switch (t) {
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "a copy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "a memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "a host function";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "an event record";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "a memory operation";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "a conditional node";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "a child graph";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "an empty node";
    default: return "a node that is not a kernel";
    }
}

// A kernel node as the loop needs to know it: its function's name, whether
// it takes the loop's device block as an argument (1, 0, -1: the driver
// cannot tell: no cuFuncGetParamInfo, CUDA 12.4), its code's PTX version (0:
// unknown).
struct KernelFacts {
    const char *name;
    int takes_ctl;
    int ptx;
};

cw_status kernel_facts(const cw_resident *r, CUgraphNode node, KernelFacts *f) {
    f->name = "?";
    f->takes_ctl = -1;
    f->ptx = 0;
    if (!drv().cuGraphKernelNodeGetParams) return CW_SUCCESS;
    // What the driver cannot say is "cannot tell" (the automatic choice then
    // falls back), never a failed build.
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    if (drv().cuGraphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) return CW_SUCCESS;
    CUfunction fn = p.func;
    if (!fn && p.kern && drv().cuKernelGetFunction && drv().cuKernelGetFunction(&fn, p.kern) != CUDA_SUCCESS)
        fn = nullptr;
    if (!fn) return CW_SUCCESS;
    const char *name = nullptr;
    if (drv().cuFuncGetName && drv().cuFuncGetName(&name, fn) == CUDA_SUCCESS && name) f->name = name;
    int ptx = 0;
    if (drv().cuFuncGetAttribute && drv().cuFuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, fn) == CUDA_SUCCESS)
        f->ptx = ptx;
    if (!drv().cuFuncGetParamInfo) return CW_SUCCESS;
    // The arguments: pointers to each (kernelParams), or one buffer (extra).
    const unsigned char *buffer = nullptr;
    size_t buffer_size = 0;
    if (!p.kernelParams && p.extra) {
        for (size_t i = 0; p.extra[i] != nullptr && i < 8; i += 2) {
            if (p.extra[i] == (void *)1) buffer = static_cast<const unsigned char *>(p.extra[i + 1]);
            else if (p.extra[i] == (void *)2) buffer_size = *static_cast<const size_t *>(p.extra[i + 1]);
        }
    }
    f->takes_ctl = 0;
    const unsigned long long ctl = r->dev;
    for (size_t i = 0; i < 4096; i++) {
        size_t off = 0, size = 0;
        const CUresult q = drv().cuFuncGetParamInfo(fn, i, &off, &size);
        if (q == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
        if (q != CUDA_SUCCESS) {
            f->takes_ctl = -1;
            return CW_SUCCESS;
        }
        if (size != sizeof ctl) continue;
        const void *arg = p.kernelParams ? p.kernelParams[i]
                          : buffer && off + size <= buffer_size ? buffer + off
                                                                : nullptr;
        if (arg && memcmp(arg, &ctl, sizeof ctl) == 0) {
            f->takes_ctl = 1;
            break;
        }
    }
    return CW_SUCCESS;
}

// What a look at the workload found.
struct Look {
    bool ok;          // every node a kernel that takes the device block (empty nodes and child graphs looked into)
    bool unknown_ptx; // a kernel whose code's PTX version the driver does not say
    int min_ptx;      // the lowest PTX version among its kernels
    char low_name[96]; // the kernel with it (or the first unknown one)
    size_t kernels;
};

// Looks at every node of g (and of its child graphs), but those in skip.
cw_status look_at(cw_resident *r, CUgraph g, const OwnNodes *skip, Look *look, int depth, bool gate) {
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (g, nullptr, &count));
    if (count == 0) return CW_SUCCESS;
    CUgraphNode *nodes = static_cast<CUgraphNode *>(calloc(count, sizeof(CUgraphNode)));
    if (!nodes) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = cu_check(drv().cuGraphGetNodes(g, nodes, &count), "cuGraphGetNodes");
    for (size_t i = 0; st == CW_SUCCESS && i < count; i++) {
        if (skip && skip->has(nodes[i])) continue;
        CUgraphNodeType type = 0;
        st = cu_check(drv().cuGraphNodeGetType(nodes[i], &type), "cuGraphNodeGetType");
        if (st != CW_SUCCESS) break;
        if (type == CU_GRAPH_NODE_TYPE_EMPTY) continue;
        if (type == CU_GRAPH_NODE_TYPE_GRAPH && depth < 8 && drv().cuGraphChildGraphNodeGetGraph) {
            CUgraph child = nullptr;
            st = cu_check(drv().cuGraphChildGraphNodeGetGraph(nodes[i], &child), "cuGraphChildGraphNodeGetGraph");
            if (st == CW_SUCCESS) st = look_at(r, child, nullptr, look, depth + 1, gate);
            continue;
        }
        if (type != CU_GRAPH_NODE_TYPE_KERNEL) {
            if (look->ok && gate)
                fall_back(r, CW_RESIDENT_FALLBACK_NODE,
                          "the workload holds %s node: only kernels can check the skip word (gate NODE)",
                          node_kind(type));
            look->ok = false;
            continue;
        }
        KernelFacts f;
        st = kernel_facts(r, nodes[i], &f);
        if (st != CW_SUCCESS) break;
        look->kernels++;
        if (f.ptx == 0) {
            if (!look->unknown_ptx) snprintf(look->low_name, sizeof look->low_name, "%s", f.name);
            look->unknown_ptx = true;
        } else if (!look->unknown_ptx && (look->min_ptx == 0 || f.ptx < look->min_ptx)) {
            look->min_ptx = f.ptx;
            snprintf(look->low_name, sizeof look->low_name, "%s", f.name);
        }
        if (f.takes_ctl == 1) continue;
        if (look->ok && gate) {
            if (f.takes_ctl < 0)
                fall_back(r, CW_RESIDENT_FALLBACK_DRIVER,
                          "the driver did not list the parameters of the workload's kernel '%s' (cuFuncGetParamInfo "
                          "needs CUDA 12.4): it cannot be checked for the device block (gate NODE)",
                          f.name);
            else
                fall_back(r, CW_RESIDENT_FALLBACK_NO_CTL,
                          "the workload's kernel '%s' does not take the loop's device block (cw_resident_get_ctl) as "
                          "an argument, so it is not known to check the skip word (gate NODE)",
                          f.name);
        }
        look->ok = false;
    }
    free(nodes);
    return st;
}

// Gate AUTO: looks at the workload (a graph as it is; a capture function
// captured once into a graph thrown away) and picks KERNELS when it
// qualifies, else NODE.
cw_status choose_gate(cw_resident *r, cw_resident_gate *gate) {
    *gate = CW_RESIDENT_GATE_KERNELS;
    if (!r->workload.set()) return CW_SUCCESS;  // an empty iteration: nothing to gate
    Look look;
    memset(&look, 0, sizeof look);
    look.ok = true;
    if (r->workload.graph) {
        CurrentGuard guard;
        CW_TRY(guard.enter(r->ctx->cu));
        CW_TRY(look_at(r, r->workload.graph->cu, nullptr, &look, 0, true));
        CW_TRY(guard.leave());
    } else {
        cw_graph *scratch = nullptr;
        CW_TRY(graph_create(r->ctx, &scratch));
        r->build_part = 0;
        r->build_copy = 0;
        cw_status st = add_part(r, scratch, r->workload);
        if (st != CW_SUCCESS) capture_abandon(r->build);
        if (st == CW_SUCCESS) {
            CurrentGuard guard;
            st = guard.enter(r->ctx->cu);
            if (st == CW_SUCCESS) st = look_at(r, scratch->cu, nullptr, &look, 0, true);
            if (st == CW_SUCCESS) st = guard.leave();
        }
        graph_destroy(scratch);
        r->stages.clear();
        CW_TRY(st);
    }
    if (!look.ok) *gate = CW_RESIDENT_GATE_NODE;
    // A workload graph stays one child graph node per copy of the iteration.
    // (Copying its kernel nodes into the iteration with cuGraphKernelNodeGetParams
    // and cuGraphAddKernelNode crashed inside the H100's driver, 580.159, for
    // kernels launched through the library API: not done.)
    return CW_SUCCESS;
}

// Overlap AUTO, once the body is built: on where everything it needs holds.
cw_status choose_overlap(cw_resident *r, cw_graph *body, const OwnNodes &own, cw_resident_gate gate, bool *on) {
    *on = false;
    if (gate == CW_RESIDENT_GATE_NODE) {
        fall_back(r, CW_RESIDENT_FALLBACK_SETTING, "no overlap: the gate is NODE (an IF node breaks the chain)");
        return CW_SUCCESS;
    }
    if (r->set.trace) {
        fall_back(r, CW_RESIDENT_FALLBACK_SETTING, "no overlap: the loop traces");
        return CW_SUCCESS;
    }
    if (r->handler.set()) {
        fall_back(r, CW_RESIDENT_FALLBACK_SETTING,
                  "no overlap: the loop has a data-ready handler (its kernels are not known to wait)");
        return CW_SUCCESS;
    }
    if (r->workload.graph) {
        fall_back(r, CW_RESIDENT_FALLBACK_NODE,
                  "no overlap: the workload is a graph, whose kernels sit in a child graph node that overlap cannot "
                  "chain (give a capture function, cw_resident_set_workload_fn, for overlap)");
        return CW_SUCCESS;
    }
    // compute-sanitizer's racecheck aborts or hangs on programmatic edges
    // inside a WHILE body (docs/resident.md, "Limits"): under the sanitizer
    // the automatic choice leaves them out (overlap 1 still asks for them).
    if (getenv("NV_SANITIZER_INJECTION_PORT_BASE")) {
        fall_back(r, CW_RESIDENT_FALLBACK_SETTING,
                  "no overlap: compute-sanitizer is attached (NV_SANITIZER_INJECTION_PORT_BASE), whose racecheck does "
                  "not survive programmatic edges inside a loop");
        return CW_SUCCESS;
    }
    if (!drv().cuGraphNodeGetType || !drv().cuGraphNodeGetDependencies || !drv().cuGraphAddDependencies ||
        !drv().cuGraphRemoveDependencies) {
        fall_back(r, CW_RESIDENT_FALLBACK_DRIVER, "no overlap: the driver has no graph edge data (CUDA 12.3)");
        return CW_SUCCESS;
    }
    int major = 0;
    CW_CU(cuDeviceGetAttribute, (&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r->ctx->device));
    if (major < 9) {
        fall_back(r, CW_RESIDENT_FALLBACK_DEVICE, "no overlap: device %d has compute capability %d.x (9.0 needed)",
                  r->ctx->ordinal, major);
        return CW_SUCCESS;
    }
    Look look;
    memset(&look, 0, sizeof look);
    look.ok = true;
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    CW_TRY(look_at(r, body->cu, &own, &look, 0, false));
    CW_TRY(guard.leave());
    if (look.unknown_ptx) {
        fall_back(r, CW_RESIDENT_FALLBACK_DRIVER, "no overlap: the driver does not say what the kernel '%s' was "
                  "compiled for", look.low_name);
        return CW_SUCCESS;
    }
    if (look.kernels && look.min_ptx < 90) {
        fall_back(r, CW_RESIDENT_FALLBACK_CODE,
                  "no overlap: the workload's kernel '%s' was compiled for compute_%d (9.0 needed for its wait)",
                  look.low_name, look.min_ptx);
        return CW_SUCCESS;
    }
    *on = true;
    return CW_SUCCESS;
}

// Gate BEGIN_END, after the first copy of the workload went into the empty
// body: one first and one last node, both kernels that take the device
// block (when the driver can tell).
// Gate BEGIN_END: the first kernel of the copy just captured (the node not
// in before[] whose dependencies all are) is launched cooperatively. Its
// blocks other than block 0 wait in cw_resident_begin for block 0's
// decision, which CUDA promises to end only when all of the kernel's
// blocks are on the GPU at once: a cooperative kernel's are (its launch is
// refused where they cannot be). Without that, under a tool that runs
// blocks one after another (compute-sanitizer's racecheck), the loop
// stopped serving.
cw_status make_begin_cooperative(cw_graph *body, const CUgraphNode *before, size_t nbefore) {
    if (!drv().cuGraphKernelNodeSetAttribute || !drv().cuGraphNodeGetDependencies)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "gate BEGIN_END: the driver cannot make a graph's kernel cooperative (cuGraphKernelNodeSetAttribute)");
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (body->cu, nullptr, &count));
    CUgraphNode *nodes = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    CUgraphNode *deps = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    cw_status st = nodes && deps ? CW_SUCCESS : fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st == CW_SUCCESS && count) st = cu_check(drv().cuGraphGetNodes(body->cu, nodes, &count), "cuGraphGetNodes");
    auto old = [&](CUgraphNode n) {
        for (size_t k = 0; k < nbefore; k++)
            if (before[k] == n) return true;
        return false;
    };
    size_t made = 0;
    for (size_t i = 0; st == CW_SUCCESS && i < count; i++) {
        if (old(nodes[i])) continue;
        size_t nd = count;
        st = cu_check(drv().cuGraphNodeGetDependencies(nodes[i], deps, nullptr, &nd), "cuGraphNodeGetDependencies");
        bool first = true;
        for (size_t k = 0; st == CW_SUCCESS && k < nd; k++) first = first && old(deps[k]);
        if (st != CW_SUCCESS || !first) continue;
        CUlaunchAttributeValue v;
        memset(&v, 0, sizeof v);
        v.cooperative = 1;
        st = cu_check(drv().cuGraphKernelNodeSetAttribute(nodes[i], CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v),
                      "cuGraphKernelNodeSetAttribute");
        made++;
    }
    free(nodes);
    free(deps);
    CW_TRY(st);
    if (made != 1)
        return fail(CW_ERROR_INTERNAL, "gate BEGIN_END: %zu first kernels in a copy of the workload", made);
    return CW_SUCCESS;
}

// The nodes of g now (the caller frees *out).
cw_status graph_nodes(cw_graph *g, CUgraphNode **out, size_t *n) {
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (g->cu, nullptr, &count));
    CUgraphNode *v = static_cast<CUgraphNode *>(calloc(count ? count : 1, sizeof(CUgraphNode)));
    if (!v) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    // The driver refuses an array with room for no node (the body is empty
    // before the first copy).
    cw_status st = count ? cu_check(drv().cuGraphGetNodes(g->cu, v, &count), "cuGraphGetNodes") : CW_SUCCESS;
    if (st != CW_SUCCESS) {
        free(v);
        return st;
    }
    *out = v;
    *n = count;
    return CW_SUCCESS;
}

cw_status check_fused_shape(cw_resident *r, cw_graph *body) {
    size_t count = 0;
    CW_CU(cuGraphGetNodes, (body->cu, nullptr, &count));
    if (count == 0)
        return fail(CW_ERROR_INVALID_STATE, "gate BEGIN_END: the workload's capture function captured nothing");
    CUgraphNode *nodes = static_cast<CUgraphNode *>(calloc(count, sizeof(CUgraphNode)));
    cw_status st = nodes ? CW_SUCCESS : fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st == CW_SUCCESS) st = cu_check(drv().cuGraphGetNodes(body->cu, nodes, &count), "cuGraphGetNodes");
    size_t roots = 0, sinks = 0;
    CUgraphNode root = nullptr, sink = nullptr;
    for (size_t i = 0; st == CW_SUCCESS && i < count; i++) {
        size_t after = 0, before = 0;
        st = cu_check(drv().cuGraphNodeGetDependentNodes(nodes[i], nullptr, &after), "cuGraphNodeGetDependentNodes");
        // (gate BEGIN_END needs conditional nodes, and so a 12.3 driver, which has this)
        if (st == CW_SUCCESS && drv().cuGraphNodeGetDependencies)
            st = cu_check(drv().cuGraphNodeGetDependencies(nodes[i], nullptr, nullptr, &before),
                          "cuGraphNodeGetDependencies");
        if (after == 0) {
            sinks++;
            sink = nodes[i];
        }
        if (before == 0) {
            roots++;
            root = nodes[i];
        }
    }
    free(nodes);
    CW_TRY(st);
    if (roots != 1 || sinks != 1)
        return fail(CW_ERROR_INVALID_STATE,
                    "gate BEGIN_END: the workload must begin with one kernel (the one that calls cw_resident_begin) and "
                    "end with one (cw_resident_end); its graph has %zu first and %zu last nodes",
                    roots, sinks);
    CurrentGuard guard;
    CW_TRY(guard.enter(r->ctx->cu));
    const CUgraphNode ends[2] = {root, sink};
    for (int i = 0; i < 2; i++) {
        CUgraphNodeType type = 0;
        CW_CU(cuGraphNodeGetType, (ends[i], &type));
        if (type != CU_GRAPH_NODE_TYPE_KERNEL)
            return fail(CW_ERROR_INVALID_STATE, "gate BEGIN_END: the workload's %s node is %s, not a kernel that calls %s",
                        i ? "last" : "first", node_kind(type), i ? "cw_resident_end" : "cw_resident_begin");
        KernelFacts f;
        CW_TRY(kernel_facts(r, ends[i], &f));
        if (f.takes_ctl == 0)
            return fail(CW_ERROR_INVALID_STATE,
                        "gate BEGIN_END: the workload's %s kernel '%s' does not take the loop's device block "
                        "(cw_resident_get_ctl), so it cannot call %s",
                        i ? "last" : "first", f.name, i ? "cw_resident_end" : "cw_resident_begin");
    }
    return guard.leave();
}

cw_status build_into(cw_resident *r, cw_graph *top) {
    cw_res_host *h = reinterpret_cast<cw_res_host *>(r->host_dev);
    cw_res_dev *d = reinterpret_cast<cw_res_dev *>(r->dev);
    const bool handler = r->handler.set();
    r->fallback = CW_RESIDENT_FALLBACK_NONE;
    r->fallback_detail[0] = '\0';
    cw_resident_gate gate = r->set.gate;
    if (gate == CW_RESIDENT_GATE_BEGIN_END) {
        if (handler)
            return fail(CW_ERROR_INVALID_STATE,
                        "gate BEGIN_END: the loop has a data-ready handler (its gate kernel decides between the handler "
                        "and the workload): use gate KERNELS");
        if (!r->workload.fn)
            return fail(CW_ERROR_INVALID_STATE,
                        "gate BEGIN_END needs the workload as a capture function (cw_resident_set_workload_fn) whose "
                        "first kernel calls cw_resident_begin and last cw_resident_end%s",
                        r->workload.graph ? " (it is a graph, which becomes a child graph node)" : " (none is set)");
    }
    if (gate == CW_RESIDENT_GATE_AUTO) CW_TRY(choose_gate(r, &gate));
    const bool gate_node = gate == CW_RESIDENT_GATE_NODE;
    const bool fused = gate == CW_RESIDENT_GATE_BEGIN_END;
    unsigned long long timeout_ns = (unsigned long long)r->set.timeout_ms * 1000000ull;
    unsigned sleep_ns = r->set.sleep_interval_us * 1000u;
    unsigned spin_ns = r->set.spin_us * 1000u;
    unsigned flags = (r->set.sleep_mode == CW_RESIDENT_SLEEP_ADAPTIVE ? CW_RES_ADAPTIVE : 0u) |
                     (handler ? CW_RES_HANDLER : 0u) | (r->set.sync_with_host ? CW_RES_SYNC_HOST : 0u) |
                     (gate_node ? 0u : CW_RES_GATE_KERNELS);

    const bool overlap_asked = r->set.overlap == 1;
    if (overlap_asked) CW_TRY(check_overlap(r));
    cw_cond_handle loop = 0;
    CW_TRY(cond_create(top, 1, CW_COND_RESET_EACH_LAUNCH, &loop));
    void *arm_args[] = {&h, &d, &timeout_ns, &sleep_ns, &spin_ns, &flags};
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
        if (fused) {
            // The workload's own kernels poll and signal (cw_resident_begin, cw_resident_end).
            CUgraphNode *before = nullptr;
            size_t nbefore = 0;
            CW_TRY(graph_nodes(body, &before, &nbefore));
            cw_status st = add_traced_part(r, body, r->workload, 0, i);
            if (st == CW_SUCCESS && i == 0) st = check_fused_shape(r, body);
            if (st == CW_SUCCESS) st = make_begin_cooperative(body, before, nbefore);
            free(before);
            CW_TRY(st);
            continue;
        }
        // Gated by kernels the handle is never set: the kernels take it all the same.
        cw_cond_handle work = 0;
        if (gate_node) CW_TRY(cond_create(body, 0, 0, &work));
        // Traced, the loop's own kernels mark the handler's and the
        // workload's stages (one clock store each, no mark kernel): the poll
        // the begin of the stage it opens, the gate the handler's end and
        // the workload's begin, the signal the workload's end. The stages
        // are made next, in this order: their indices are known now.
        const bool traced = r->set.trace != 0;
        const bool has_work = r->workload.set();
        const uint32_t first = static_cast<uint32_t>(r->stages.size());
        const uint32_t hidx = first;
        CUdeviceptr poll_mark = mark_arg(r, traced && (handler || has_work), first, false);
        void *poll_args[] = {&h, &d, &loop, &work, &timeout_ns, &sleep_ns, &spin_ns, &flags, &poll_mark};
        CW_TRY(launch_into(r, body, kResPoll, poll_args));
        CW_TRY(note_own(body, &own));
        uint32_t wexpect = first;  // the workload's stage, after the handler's when there is one
        if (handler) {
            CW_TRY(add_traced_part(r, body, r->handler, 1, i, true, hidx));
            wexpect = static_cast<uint32_t>(r->stages.size());  // after the handler's own stages
            CUdeviceptr close = mark_arg(r, traced, hidx, true), open = mark_arg(r, traced && has_work, wexpect, false);
            void *gate_args[] = {&d, &work, &flags, &close, &open};
            CW_TRY(launch_into(r, body, kResGate, gate_args));
            CW_TRY(note_own(body, &own));
        }
        cw_graph *then = body;
        if (gate_node) {
            CW_TRY(graph_sinks(body, &sink, 1, &n));
            CW_TRY(add_conditional(body, work, &cs, &sink, 1, nullptr, &then, nullptr));
        }
        CW_TRY(add_traced_part(r, then, r->workload, 0, i, true, wexpect));
        CUdeviceptr signal_mark = mark_arg(r, traced && has_work, wexpect, true);
        void *signal_args[] = {&h, &d, &flags, &signal_mark};
        CW_TRY(launch_into(r, then, kResSignal, signal_args));
        if (then == body) CW_TRY(note_own(body, &own));
    }
    if (fused) {
        // Ends the WHILE node once a cw_resident_begin saw the stop (once per `unroll` requests).
        void *loop_args[] = {&d, &loop};
        CW_TRY(launch_into(r, body, kResLoop, loop_args));
        CW_TRY(note_own(body, &own));
    }
    bool overlap = overlap_asked;
    if (r->set.overlap == CW_RESIDENT_OVERLAP_AUTO) CW_TRY(choose_overlap(r, body, own, gate, &overlap));
    if (overlap) {
        bool own_wait = false;
        CW_TRY(own_kernels_wait(r, &own_wait));
        CW_TRY(overlap_edges(body->cu, own, own_wait));
        log(CW_LOG_DEBUG, "cuweave: resident loop overlap: the workload's kernels%s",
            own_wait ? " and the loop's own" : " (the loop's own kernels were not compiled for 9.0: not them)");
    }
    r->gate_used = gate;
    r->overlap_used = overlap ? 1 : 0;
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
    CW_NVTX_RANGE(resident_build);
    if (r->set.trace) CW_TRY(trace_prepare(r));
    r->stages.clear();
    cw_graph *top = nullptr;
    CW_TRY(graph_create(r->ctx, &top));
    cw_graph_exec *exec = nullptr;
    // What the last good build chose stays in cw_resident_info if this one fails.
    const cw_resident_gate gate_used = r->gate_used;
    const int overlap_used = r->overlap_used;
    const cw_resident_fallback fallback = r->fallback;
    char detail[sizeof r->fallback_detail];
    memcpy(detail, r->fallback_detail, sizeof detail);
    auto keep_last = [&] {
        r->gate_used = gate_used;
        r->overlap_used = overlap_used;
        r->fallback = fallback;
        memcpy(r->fallback_detail, detail, sizeof detail);
    };
    r->building = true;
    cw_status st = build_into(r, top);
    r->building = false;
    if (st != CW_SUCCESS) capture_abandon(r->build);  // a capture a failed call left open
    if (st == CW_SUCCESS) st = instantiate(top, 0, &exec);
    graph_destroy(top);
    if (st == CW_SUCCESS) st = exec_upload(exec, r->run);
    if (st != CW_SUCCESS) {
        if (exec) exec_destroy(exec);
        keep_last();
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
        keep_last();
        return st;
    }
    r->epoch.fetch_add(1, std::memory_order_release);
    r->built = true;
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
