/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: the memory of ports (flow.hpp). A resident pipeline
// passes data through port memory: one allocation per output port, shared
// with every input connected to it, written again each iteration.
#include <new>
#include <string.h>

#include "flow/flow.hpp"

namespace cw {
namespace flow {

using namespace core;

namespace {

// The memory of every output port's group (the port and the inputs
// connected to it), by the rules of cw_pipeline_make_resident. With
// groups NULL it only checks. Outputs with no connection get none.
struct Group {
    int op, port;
    size_t bytes;
    CUdeviceptr dptr;
};

cw_status plan_memory(cw_pipeline *p, Vec<Group> *groups) {
    for (cw_operator *o : p->ops) {
        for (size_t pi = 0; pi < o->ports.size(); pi++) {
            const Port &out = o->ports[pi];
            if (out.input) continue;
            if (out.conns.empty()) {
                // A sink's output: memory of its own when it declares some
                // (the host reads it: cw_pipeline_get_port_ptr).
                if ((out.bytes || out.dptr) && groups &&
                    !groups->push(Group{o->index, (int)pi, out.bytes, out.dptr}))
                    return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
                continue;
            }
            size_t bytes = out.bytes;
            CUdeviceptr dptr = out.dptr;
            const char *dptr_op = out.dptr ? o->name : nullptr, *dptr_port = out.dptr ? out.name : nullptr;
            const char *size_op = out.bytes ? o->name : nullptr, *size_port = out.bytes ? out.name : nullptr;
            for (int ci : out.conns) {
                const Connection &c = p->conns[ci];
                const cw_operator *to = p->ops[c.to_op];
                const Port &in = to->ports[c.to_port];
                if (in.flags & CW_PORT_MANY)
                    return fail(CW_ERROR_INVALID_ARGUMENT,
                                "operator '%s' input '%s' accepts many connections: port memory needs one upstream "
                                "port per input",
                                to->name, in.name);
                if (in.dptr) {
                    if (dptr)
                        return fail(CW_ERROR_INVALID_ARGUMENT,
                                    "operator '%s' port '%s' and operator '%s' port '%s' both supply device memory "
                                    "for one connection",
                                    dptr_op, dptr_port, to->name, in.name);
                    dptr = in.dptr;
                    dptr_op = to->name;
                    dptr_port = in.name;
                }
                if (in.bytes) {
                    if (bytes && bytes != in.bytes)
                        return fail(CW_ERROR_INVALID_ARGUMENT,
                                    "operator '%s' port '%s' wants %zu bytes but operator '%s' port '%s' wants %zu on "
                                    "the same connection",
                                    size_op, size_port, bytes, to->name, in.name, in.bytes);
                    if (!bytes) {
                        bytes = in.bytes;
                        size_op = to->name;
                        size_port = in.name;
                    }
                }
            }
            if (!bytes && !dptr) {
                const Connection &c = p->conns[out.conns[0]];
                return fail(CW_ERROR_INVALID_ARGUMENT,
                            "neither operator '%s' port '%s' nor operator '%s' port '%s' declares memory (a size or "
                            "a device pointer)",
                            o->name, out.name, p->ops[c.to_op]->name, p->ops[c.to_op]->ports[c.to_port].name);
            }
            if (groups && !groups->push(Group{o->index, (int)pi, bytes, dptr}))
                return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    return CW_SUCCESS;
}

void free_port_memory(void *owner) {
    PortMemory *m = static_cast<PortMemory *>(owner);
    {
        CurrentGuard guard;
        (void)guard.enter(m->ctx->cu);
        for (CUdeviceptr d : m->ptrs) drv().cuMemFree(d);
    }
    context_release(m->ctx);
    delete m;
}

}  // namespace

bool any_port_memory(const cw_pipeline *p) {
    for (const cw_operator *o : p->ops)
        for (const Port &pt : o->ports)
            if (pt.bytes || pt.dptr) return true;
    return false;
}

cw_status check_memory(cw_pipeline *p) { return plan_memory(p, nullptr); }

void release_memory(PortMemory *m) {
    m->rel.run = free_port_memory;
    m->rel.owner = m;
    release_when_idle(&m->rel);
}

cw_status setup_memory(cw_pipeline *p, cw_context *ctx) {
    if (p->memory_ready) return CW_SUCCESS;
    cw::Vec<Group> groups;
    CW_TRY(plan_memory(p, &groups));
    PortMemory *m = new (std::nothrow) PortMemory();
    if (!m) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    m->ctx = ctx;
    context_retain(ctx);
    CurrentGuard guard;
    cw_status st = guard.enter(ctx->cu);
    for (size_t i = 0; st == CW_SUCCESS && i < groups.size(); i++) {
        Group &g = groups[i];
        if (!g.dptr) {
            CUdeviceptr d = 0;
            CUresult r = drv().cuMemAlloc(&d, g.bytes);
            if (r != CUDA_SUCCESS) {
                st = fail_cu(r, "cuMemAlloc", "port memory");
                break;
            }
            if (!m->ptrs.push(d)) {
                drv().cuMemFree(d);
                st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
                break;
            }
            g.dptr = d;
        }
    }
    if (st == CW_SUCCESS) st = guard.leave();
    if (st != CW_SUCCESS) {
        release_memory(m);
        return st;
    }
    for (const Group &g : groups) {
        cw_operator *o = p->ops[g.op];
        o->ports[g.port].mem = g.dptr;
        for (int ci : o->ports[g.port].conns) {
            const Connection &c = p->conns[ci];
            p->ops[c.to_op]->ports[c.to_port].mem = g.dptr;
        }
    }
    p->memory = m;
    p->memory_ready = true;
    return CW_SUCCESS;
}

}  // namespace flow
}  // namespace cw
