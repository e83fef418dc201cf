/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: operators, ports, pipelines and their connections,
// and the checks that make a pipeline runnable (flow.hpp).
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/future.hpp"
#include "flow/flow.hpp"
#include "flow/fused.hpp"

namespace cw {
namespace flow {

using namespace core;

void list_name(char *buf, size_t cap, size_t *len, const char *name) {
    if (*len + CW_NAME_MAX + 8 >= cap) return;
    *len += (size_t)snprintf(buf + *len, cap - *len, "%s'%s'", *len ? ", " : "", name);
}

bool name_ok(const char *name, const char **why) {
    if (!name) return *why = "it is NULL", false;
    size_t n = strnlen(name, CW_NAME_MAX + 1);  // never read past the longest name's end
    if (n == 0) return *why = "it is empty", false;
    if (n > CW_NAME_MAX) return *why = "it is longer than 63 bytes", false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        if (!ok) return *why = "it may hold only letters, digits, '_', '.' and '-'", false;
    }
    return true;
}

int find_port(const cw_operator *op, const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < op->ports.size(); i++)
        if (same_name(op->ports[i].name, name)) return (int)i;
    return -1;
}

cw_operator *find_op(const cw_pipeline *p, const char *name) {
    if (!name) return nullptr;
    for (cw_operator *o : p->ops)
        if (strcmp(o->name, name) == 0) return o;
    return nullptr;
}

cw_status operator_create(const char *name, const cw_operator_ops *ops, void *user, const cw_operator_settings *s,
                          cw_operator **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    void *mem = calloc(1, sizeof(cw_operator));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_operator *op = new (mem) cw_operator();
    room.publish(op);
    snprintf(op->name, sizeof op->name, "%s", name);
    op->ops = *ops;
    op->user = user;
    op->settings = *s;
    op->index = -1;
    op->io.tag = HandleKind<cw_io>::tag;
    *out = op;
    return CW_SUCCESS;
}

void operator_free(cw_operator *op) {
    if (op->ops.destroy) op->ops.destroy(op->user);
    stage_free(op->stage);
    handle_retire(op);
    op->io.tag = kTagDead;
    op->~cw_operator();
    handle_free(op);
}

cw_status add_port(cw_operator *op, const char *name, const cw_port_settings *settings, bool input) {
    const char *kind = input ? "input" : "output";
    const char *why = "";
    if (!name_ok(name, &why))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': bad %s port name: %s", op->name, kind, why);
    if (op->owner)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' is in a pipeline already: declare ports before adding it",
                    op->name);
    if (find_port(op, name) >= 0)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has a port named '%s' already", op->name, name);
    cw_port_settings s;
    memset(&s, 0, sizeof s);
    if (settings) {
        for (size_t i = 0; i < sizeof settings->reserved; i++) CW_CHECK_ARG(settings->reserved[i] == 0);
        s = *settings;
    }
    if (s.flags & ~(CW_PORT_OPTIONAL | CW_PORT_MANY))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s': unknown flags 0x%x", op->name, name,
                    s.flags);
    if (!input && s.flags)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' output '%s': port flags apply to inputs only", op->name,
                    name);
    if (s.bytes && s.dptr)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' port '%s' declares both a size and a device pointer: give one", op->name, name);
    Port *pt = op->ports.emplace();
    if (!pt) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    snprintf(pt->name, sizeof pt->name, "%s", name);
    pt->input = input;
    pt->flags = s.flags;
    pt->bytes = s.bytes;
    pt->dptr = s.dptr;
    return CW_SUCCESS;
}

cw_status pipeline_create(cw_context *ctx, const cw_pipeline_settings *settings, cw_pipeline **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    const cw_pipeline_settings &s = *settings;
    cw_stream_pool *pool = s.pool;
    if (!pool) {
        // The operators' internal streams: a lease pool of the pipeline's own.
        cw_stream_pool_settings ps;
        memset(&ps, 0, sizeof ps);
        ps.mode = CW_POOL_LEASE;
        ps.flags = CW_STREAM_NON_BLOCKING;
        ps.reserved_streams = 1;
        CW_TRY(ensure_init());
        CW_TRY(pool_new(ctx, &ps, false, &pool));
    }
    void *mem = calloc(1, sizeof(cw_pipeline));
    if (!mem) {
        if (!s.pool) pool_destroy(pool);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    BufferCache *cache = buffer_cache_new();
    if (!cache) {
        free(mem);
        if (!s.pool) pool_destroy(pool);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    cw_pipeline *p = new (mem) cw_pipeline();
    p->cache = cache;
    room.publish(p);
    p->ctx = ctx;
    context_retain(ctx);
    p->pool = pool;
    p->own_pool = !s.pool;
    p->threads = s.threads ? s.threads : 1;
    p->max_in_flight = s.max_in_flight;
    pthread_mutex_init(&p->mu, nullptr);
    pthread_cond_init(&p->cv_work, nullptr);
    pthread_cond_init(&p->cv_done, nullptr);
    *out = p;
    return CW_SUCCESS;
}

void pipeline_destroy(cw_pipeline *p) {
    end_iteration(p);
    for (cw_operator *op : p->ops) {
        if (op->resident_started && op->ops.stop) op->ops.stop(op, op->user);
        for (Port &pt : op->ports)
            if (pt.pending.buffer) {
                buffer_release(pt.pending.buffer);
                pt.pending.buffer = nullptr;
            }
        drop_marks(op->call_marks);
        if (op->internal) {
            (void)pool_release(op->internal_pool, op->internal);
            op->internal = nullptr;
        }
        (void)pool_release_owner(op_pool(op), op, nullptr);
        if (op->waiter) {
            future_destroy(op->waiter);
            op->waiter = nullptr;
        }
        op->owner = nullptr;
        operator_free(op);
    }
    settle_marks(p, 0, false);
    buffer_cache_close(p->cache);
    if (p->null_stream) stream_free(p->null_stream);
    if (p->own_pool) pool_destroy(p->pool);
    if (p->memory) release_memory(p->memory);
    pipeline_drop_trace(p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    context_release(p->ctx);
    handle_retire(p);
    p->~cw_pipeline();
    handle_free(p);
}

cw_status pipeline_add(cw_pipeline *p, cw_operator *op) {
    if (op->owner) return fail(CW_ERROR_INVALID_STATE, "operator '%s' belongs to a pipeline already", op->name);
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    if (p->memory_ready)
        return fail(CW_ERROR_INVALID_STATE,
                    "the pipeline's port memory is set up (a run, cw_pipeline_make_resident or "
                    "cw_pipeline_make_fused): operators are fixed");
    if (find_op(p, op->name))
        return fail(CW_ERROR_INVALID_ARGUMENT, "the pipeline has an operator named '%s' already", op->name);
    if (!p->ops.push(op)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    op->owner = p;
    op->index = (int)p->ops.size() - 1;
    op->io.p = p;
    p->checked = false;
    return CW_SUCCESS;
}

cw_status pipeline_connect(cw_pipeline *p, const char *from_op, const char *from_port, const char *to_op,
                           const char *to_port) {
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    if (p->memory_ready)
        return fail(CW_ERROR_INVALID_STATE, "the pipeline's port memory is set up: connections are fixed");
    cw_operator *a = find_op(p, from_op), *b = find_op(p, to_op);
    if (!a) return fail(CW_ERROR_INVALID_ARGUMENT, "no operator named '%s' in the pipeline", from_op);
    if (!b) return fail(CW_ERROR_INVALID_ARGUMENT, "no operator named '%s' in the pipeline", to_op);
    int ap = find_port(a, from_port), bp = find_port(b, to_port);
    if (ap < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", a->name, from_port);
    if (bp < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", b->name, to_port);
    if (a->ports[ap].input)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s' is an input: a connection starts at an output",
                    a->name, from_port);
    if (!b->ports[bp].input)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s' is an output: a connection ends at an input",
                    b->name, to_port);
    if (a == b)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' cannot be connected to itself ('%s' to '%s')", a->name,
                    from_port, to_port);
    for (const Connection &c : p->conns)
        if (c.from_op == a->index && c.from_port == ap && c.to_op == b->index && c.to_port == bp)
            return fail(CW_ERROR_INVALID_ARGUMENT, "'%s.%s' is connected to '%s.%s' already", a->name, from_port,
                        b->name, to_port);
    Port &in = b->ports[bp];
    if (!in.conns.empty() && !(in.flags & CW_PORT_MANY))
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s' is connected already and does not accept many (CW_PORT_MANY)", b->name,
                    to_port);
    // A fused stage's port read with `previous` (fused.hpp) orders nothing.
    bool known = !connection_orders(b, to_port);
    for (int s : a->succs) known = known || s == b->index;
    // Room first, so that a failure leaves nothing half-connected.
    if (!p->conns.reserve(p->conns.size() + 1) || !a->ports[ap].conns.reserve(a->ports[ap].conns.size() + 1) ||
        !in.conns.reserve(in.conns.size() + 1) || !a->succs.reserve(a->succs.size() + 1) ||
        !b->preds.reserve(b->preds.size() + 1))
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    p->conns.push(Connection{a->index, ap, b->index, bp, false, Message{}});
    int ci = (int)p->conns.size() - 1;
    a->ports[ap].conns.push(ci);
    in.conns.push(ci);
    if (!known) {
        a->succs.push(b->index);
        b->preds.push(a->index);
    }
    p->checked = false;
    return CW_SUCCESS;
}

cw_status pipeline_check(cw_pipeline *p) {
    if (p->ops.empty()) return fail(CW_ERROR_INVALID_ARGUMENT, "the pipeline has no operator");
    for (cw_operator *o : p->ops)
        for (const Port &pt : o->ports)
            if (pt.input && !(pt.flags & CW_PORT_OPTIONAL) && pt.conns.empty())
                return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s' is required and not connected",
                            o->name, pt.name);
    // Kahn's algorithm over operators.
    size_t n = p->ops.size();
    cw::Vec<int> indeg, order;
    if (!indeg.assign(n, 0) || !order.reserve(n)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (cw_operator *o : p->ops) indeg[o->index] = (int)o->preds.size();
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0) order.push((int)i);
    for (size_t k = 0; k < order.size(); k++)
        for (int s : p->ops[order[k]]->succs)
            if (--indeg[s] == 0) order.push(s);
    if (order.size() != n) {
        char names[256] = "";
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
            if (indeg[i] > 0) list_name(names, sizeof names, &len, p->ops[i]->name);
        return fail(CW_ERROR_INVALID_ARGUMENT, "the connections form a cycle through operators %s", names);
    }
    p->port_memory = any_port_memory(p);
    if (p->port_memory) CW_TRY(check_memory(p));
    p->topo.clear();
    if (!p->topo.reserve(n)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i : order) p->topo.push(i);
    p->checked = true;
    return CW_SUCCESS;
}

cw_status pipeline_port_ptr(const cw_pipeline *p, const char *op, const char *port, CUdeviceptr *dptr) {
    cw_operator *o = find_op(p, op);
    if (!o) return fail(CW_ERROR_INVALID_ARGUMENT, "no operator named '%s' in the pipeline", op);
    int pi = find_port(o, port);
    if (pi < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", o->name, port);
    if (!o->ports[pi].mem)
        return fail(CW_ERROR_INVALID_STATE,
                    "operator '%s' port '%s' has no port memory (not set up yet: cw_pipeline_make_resident or a run; "
                    "or none declared)",
                    o->name, port);
    *dptr = o->ports[pi].mem;
    return CW_SUCCESS;
}

}  // namespace flow
}  // namespace cw
