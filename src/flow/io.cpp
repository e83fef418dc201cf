/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: what a compute call does through its cw_io, and the
// stream rules (flow.hpp, docs/pipelines.md): the call's stream is the
// operator's internal stream (leased once, kept), else the upstream one,
// else the legacy stream; it waits for every input's producer; outputs
// carry it. Buffers from other devices are moved once per call.
#include <stdio.h>
#include <string.h>

#include "flow/flow.hpp"

namespace cw {
namespace flow {

using namespace core;

namespace {

// find_port for a compute call: operators pass the same name (a literal)
// every call, so the port last found by this pointer is tried first; the
// name is still compared (the caller's memory may hold another name now).
int io_find_port(cw_operator *op, const char *name) {
    const size_t n = op->ports.size();
    for (size_t i = 0; i < n; i++) {
        Port &pt = op->ports[i];
        if (pt.key == name) {
            if (same_name(pt.name, name)) return (int)i;
            break;
        }
    }
    int i = find_port(op, name);
    if (i >= 0) op->ports[i].key = name;
    return i;
}

// Input port index, or a failure naming the operator and port.
cw_status input_port(cw_io *io, const char *port, int *idx) {
    CW_CHECK_ARG(port != NULL);
    int i = io_find_port(io->op, port);
    if (i < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", io->op->name, port);
    if (!io->op->ports[i].input)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s' is an output, not an input", io->op->name,
                    port);
    *idx = i;
    return CW_SUCCESS;
}

cw_status output_port(cw_io *io, const char *port, int *idx) {
    CW_CHECK_ARG(port != NULL);
    int i = io_find_port(io->op, port);
    if (i < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", io->op->name, port);
    if (io->op->ports[i].input)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s' is an input, not an output", io->op->name,
                    port);
    *idx = i;
    return CW_SUCCESS;
}

// Calls fn(n, message) for each message on input port pi in this iteration
// (connection order; none in a resident capture); returns how many.
template <class F>
size_t each_message(const cw_io *io, int pi, F &&fn) {
    size_t n = 0;
    if (io->resident) return 0;
    for (int ci : io->op->ports[pi].conns) {
        const Connection &c = io->p->conns[ci];
        if (!c.has) continue;
        Message m = c.msg;
        if (c.local) m.buffer = c.local;
        fn(n++, m);
    }
    return n;
}

// The device an operator's work runs on: its pool's.
const cw_context *op_context(const cw_operator *op) { return op_pool(op)->ctx; }

// Gives the call its stream when it has none yet: the operator's internal
// stream (leased now if need be), else the first upstream stream of `port`.
cw_status ensure_stream(cw_io *io, int port) {
    if (io->stream) return CW_SUCCESS;
    cw_operator *op = io->op;
    cw_pipeline *p = io->p;
    if (!op->internal && !op->settings.no_internal_stream) {
        cw_stream_pool *pool = op_pool(op);
        cw_stream *s = nullptr;
        // An exhausted pool is not this call's failure (it falls back, and
        // succeeds): no error logged, the thread's detail left alone; a
        // warning, once for the operator.
        cw_status st = pool_try_acquire(pool, &s);
        if (st == CW_SUCCESS) {
            op->internal = s;
            op->internal_pool = pool;
        } else if (st != CW_ERROR_POOL_EXHAUSTED) {
            return st;
        } else if (!op->exhausted_noted) {
            op->exhausted_noted = true;
            log(CW_LOG_WARNING, "%s: operator '%s': every stream of its pool is leased: its compute calls run "
                "on an upstream stream (or the legacy stream without one) until one is free (said once for "
                "the operator)", current_api(), op->name);
        }
    }
    if (op->internal) {
        io->stream = op->internal;
        io->carry = true;
        return CW_SUCCESS;
    }
    if (port >= 0)
        for (int ci : op->ports[port].conns) {
            const Connection &c = p->conns[ci];
            // Not a stream of another device: the operator's work stays on its own.
            if (c.has && c.msg.stream && c.msg.stream->ctx->device == op_context(op)->device) {
                io->stream = c.msg.stream;
                io->carry = true;
                p->fallbacks.fetch_add(1, std::memory_order_relaxed);
                return CW_SUCCESS;
            }
        }
    return CW_SUCCESS;  // none: the caller hands out the legacy stream
}

// Makes s wait for the producer's work of the message on connection c.
cw_status order_behind(cw_io *io, cw_stream *s, const Connection &c) {
    if (!c.has || !c.msg.stream || c.msg.stream == s) return CW_SUCCESS;
    if (c.msg.mark) {
        // The producer's call ended at this event: wait for it (no record).
        CUevent ev = mark_event(c.msg.mark);
        CW_TRY(on_stream(s, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(s->cu, ev, 0); }));
        (void)io->waited.push(c.msg.mark);  // not noted when out of memory: only a lost shortcut
        return CW_SUCCESS;
    }
    return stream_order(s, c.msg.stream);
}

// True when the consumer's device reads the producer's memory directly
// (peer access from home to from enabled through cuweave).
bool peer_direct(const cw_context *home, const cw_context *from) {
    return (home->peers.load(std::memory_order_acquire) & device_bit(from)) != 0;
}

// Moves, once per call, the buffers of port pi's messages that live on
// another device than the operator's: a buffer of the operator's device
// (from the pipeline's cache) filled by a peer copy on the call's stream,
// after the producer's work. Receive calls hand out the moved buffer; the
// original keeps the call's uses, so neither is freed under the copy.
__attribute__((noinline)) cw_status move_inputs_slow(cw_io *io, int pi);

// The usual case inline, with no frame to set up: the port was seen this
// call, or none of its buffers lives on another device.
inline cw_status move_inputs(cw_io *io, int pi) {
    Port &pt = io->op->ports[pi];
    if (io->resident || pt.moved) return CW_SUCCESS;
    const CUdevice home = op_context(io->op)->device;
    for (int ci : pt.conns) {
        const Connection &c = io->p->conns[ci];
        if (c.has && c.msg.buffer && !c.local && c.msg.buffer->ctx->device != home) return move_inputs_slow(io, pi);
    }
    pt.moved = true;
    return CW_SUCCESS;
}

cw_status move_inputs_slow(cw_io *io, int pi) {
    Port &pt = io->op->ports[pi];
    cw_pipeline *p = io->p;
    const cw_context *home = op_context(io->op);
    for (int ci : pt.conns) {
        Connection &c = p->conns[ci];
        if (!c.has || !c.msg.buffer || c.local) continue;
        const cw_context *from = c.msg.buffer->ctx;
        if (from->device == home->device) continue;
        CW_TRY(ensure_stream(io, -1));
        cw_stream *s = io->stream;
        if (!s || s->ctx->device != home->device)
            return fail(CW_ERROR_INVALID_STATE,
                        "operator '%s' input '%s' receives a buffer of device %d, and the operator has no stream of "
                        "its device %d to copy it with (no_internal_stream, or its pool is exhausted)",
                        io->op->name, pt.name, from->ordinal, home->ordinal);
        CW_TRY(order_behind(io, s, c));
        cw_buffer *copy = nullptr;
        CW_TRY(buffer_cache_take(p->cache, s, c.msg.buffer->bytes, p->max_in_flight == 0, &copy));
        cw_status st = buffer_copy(s, copy, c.msg.buffer);
        if (st != CW_SUCCESS) {
            buffer_release(copy);
            return st;
        }
        c.local = copy;
        p->peer_copies.fetch_add(1, std::memory_order_relaxed);
        if (!c.noted) {
            c.noted = true;
            const cw_operator *src = p->ops[c.from_op];
            if (peer_direct(home, from))
                log(CW_LOG_INFO, "connection '%s.%s' -> '%s.%s' moves buffers from device %d to device %d with "
                    "direct peer copies", src->name, src->ports[c.from_port].name, io->op->name, pt.name,
                    from->ordinal, home->ordinal);
            else
                log(CW_LOG_WARNING, "connection '%s.%s' -> '%s.%s' moves buffers from device %d to device %d "
                    "without peer access: the driver stages each copy through host memory "
                    "(cw_context_enable_peer(consumer, producer) makes it direct where the topology allows)",
                    src->name, src->ports[c.from_port].name, io->op->name, pt.name, from->ordinal, home->ordinal);
        }
    }
    pt.moved = true;
    return CW_SUCCESS;
}

cw_status legacy_stream(cw_pipeline *p, cw_stream **out) {
    if (!p->null_stream) CW_TRY(stream_wrap(p->ctx, nullptr, &p->null_stream));
    *out = p->null_stream;
    return CW_SUCCESS;
}

}  // namespace

cw_stream_pool *op_pool(const cw_operator *op) {
    return op->settings.pool ? op->settings.pool : op->owner->pool;
}

cw_status io_receive(cw_io *io, const char *port, cw_message *msg) {
    int pi;
    CW_TRY(input_port(io, port, &pi));
    CW_TRY(move_inputs(io, pi));
    if (!io->resident)
        for (int ci : io->op->ports[pi].conns) {
            const Connection &c = io->p->conns[ci];
            if (!c.has) continue;
            msg->value = c.msg.value;
            msg->buffer = c.local ? c.local : c.msg.buffer;
            msg->stream = c.msg.stream;
            return CW_SUCCESS;
        }
    return fail(CW_ERROR_NOT_READY, "operator '%s' input '%s' has no message in this iteration", io->op->name, port);
}

cw_status io_receive_many(cw_io *io, const char *port, cw_message *msgs, size_t cap, size_t *count) {
    int pi;
    CW_TRY(input_port(io, port, &pi));
    CW_TRY(move_inputs(io, pi));
    *count = each_message(io, pi, [&](size_t i, const Message &m) {
        if (i < cap) msgs[i] = cw_message{m.value, m.buffer, m.stream};
    });
    return CW_SUCCESS;
}

namespace {
// What ensure_current learned on this thread: the context current for
// compute calls of run `run` (a run's number is unique in the process).
struct KnownCurrent {
    uint64_t run;
    CUcontext cu;
};
thread_local KnownCurrent t_known __attribute__((tls_model("initial-exec"))) = {0, nullptr};
std::atomic<uint64_t> g_runs{0};
}  // namespace

void run_begin_current(cw_pipeline *p, bool single) {
    p->run_id = g_runs.fetch_add(1, std::memory_order_relaxed) + 1;
    p->run_single = single;
    p->run_prev_set = false;
    p->run_switched = false;
    p->run_prev = nullptr;
}

void run_end_current(cw_pipeline *p) {
    // Only when a compute call's context was not the caller's: no driver
    // call otherwise (the caller's context was never changed).
    if (p->run_switched) (void)drv().cuCtxSetCurrent(p->run_prev);
    p->run_switched = false;
    if (t_known.run == p->run_id) t_known = KnownCurrent{0, nullptr};
}

// True when cu is known current on this thread for p's run (no call).
static inline bool known_current(const cw_pipeline *p, CUcontext cu) { return t_known.run == p->run_id && t_known.cu == cu; }

cw_status ensure_current(cw_pipeline *p, CUcontext cu) {
    if (__builtin_expect(known_current(p, cu), 1)) return CW_SUCCESS;
    CUcontext cur = nullptr;
    CUresult r = drv().cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxGetCurrent");
    // The caller's context, to be put back as the run returns: the first
    // one seen on its thread in this run (before cuweave changed anything).
    if (p->run_single && !p->run_prev_set) {
        p->run_prev = cur;
        p->run_prev_set = true;
    }
    if (cur != cu) {
        r = drv().cuCtxSetCurrent(cu);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxSetCurrent");
        if (p->run_single) p->run_switched = true;
    }
    t_known = KnownCurrent{p->run_id, cu};
    return CW_SUCCESS;
}

// Neither a pool stream nor an upstream one: the legacy stream, and outputs
// carry nothing (what Holoscan documents for this case). Out of line, as
// the port-memory ordering below: io_receive_stream's usual path stays short.
__attribute__((noinline)) static cw_status receive_legacy(cw_io *io, cw_stream **out) {
    cw_stream *s = nullptr;
    CW_TRY(legacy_stream(io->p, &s));
    CW_TRY(ensure_current(io->p, io->p->ctx->cu));
    *out = s;
    return CW_SUCCESS;
}

// Port memory is written again every iteration: the writer waits for last
// iteration's readers (a pool buffer never needs this).
__attribute__((noinline)) static cw_status order_port_memory(cw_io *io, cw_stream *s) {
    io->reuse_ordered = true;
    for (const Port &pt : io->op->ports) {
        if (pt.input || !pt.mem) continue;
        for (int ci : pt.conns)
            for (Mark *m : io->p->ops[io->p->conns[ci].to_op]->call_marks) {
                if (mark_stream(m) == s) continue;
                CUevent ev = mark_event(m);
                CW_TRY(on_stream(s, "cuStreamWaitEvent", [&] { return drv().cuStreamWaitEvent(s->cu, ev, 0); }));
            }
    }
    return CW_SUCCESS;
}

cw_status io_receive_stream(cw_io *io, const char *port, cw_stream **out) {
    int pi = -1;
    if (port) CW_TRY(input_port(io, port, &pi));
    if (io->resident) {
        *out = io->stream;
        return CW_SUCCESS;
    }
    if (pi >= 0) CW_TRY(move_inputs(io, pi));
    if (!io->stream) CW_TRY(ensure_stream(io, pi));
    cw_stream *s = io->stream;
    if (!s) return receive_legacy(io, out);
    if (pi >= 0)
        for (int ci : io->op->ports[pi].conns) {
            const Connection &c = io->p->conns[ci];
            if (!c.local) CW_TRY(order_behind(io, s, c));  // a moved message's copy already waited on s
        }
    if (io->p->memory_ready && !io->reuse_ordered) CW_TRY(order_port_memory(io, s));
    if (!known_current(io->p, s->ctx->cu)) CW_TRY(ensure_current(io->p, s->ctx->cu));
    if (io->p->trace) CW_TRY(trace_call_stream(io, s));
    *out = s;
    return CW_SUCCESS;
}

cw_status io_stream(cw_io *io, const char *name, cw_stream **out) {
    const char *why = "";
    if (!name_ok(name, &why)) return fail(CW_ERROR_INVALID_ARGUMENT, "bad stream name: %s", why);
    if (io->resident)
        return fail(CW_ERROR_INVALID_STATE,
                    "operator '%s': in a resident capture use the stream of cw_io_receive_stream", io->op->name);
    if (io->op->settings.no_internal_stream)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' was made with no_internal_stream: it takes no stream",
                    io->op->name);
    cw_stream *s;
    CW_TRY(pool_named(op_pool(io->op), io->op, name, &s));
    if (!io->touched.push(s)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    *out = s;
    return CW_SUCCESS;
}

cw_status io_set_output_stream(cw_io *io, const char *port, cw_stream *s) {
    int pi = -1;
    CW_TRY(output_port(io, port, &pi));
    Port &pt = io->op->ports[pi];
    pt.stream_set = true;
    pt.stream = s;
    if (s && !io->resident) {
        if (!io->touched.push(s)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    return CW_SUCCESS;
}

cw_status io_emit(cw_io *io, const char *port, void *value, cw_buffer *buffer) {
    int pi = -1;
    CW_TRY(output_port(io, port, &pi));
    if (io->resident) return CW_SUCCESS;
    if (buffer) {
        if (!live(buffer)) return fail(CW_ERROR_INVALID_HANDLE, "buffer is not a live cw_buffer");
        buffer_retain(buffer);
    }
    Port &pt = io->op->ports[pi];
    if (pt.pending.buffer) buffer_release(pt.pending.buffer);
    pt.pending.value = value;
    pt.pending.buffer = buffer;
    pt.emitted = true;
    return CW_SUCCESS;
}

cw_status io_alloc(cw_io *io, size_t bytes, cw_buffer **out) {
    if (io->resident)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s': a resident capture allocates nothing (use port memory)",
                    io->op->name);
    cw_stream *s = io->stream;
    if (!s) CW_TRY(io_receive_stream(io, nullptr, &s));
    if (!io->allocated.reserve(io->allocated.size() + 1)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (s->is_null)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' has no stream to allocate on (no pool and no upstream stream)",
                    io->op->name);
    cw_buffer *b;  // on the stream's device: the cache keeps each device's buffers apart
    // With max_in_flight the run waits for old iterations anyway, which marks
    // their uses finished: the cache then needs no driver call.
    CW_TRY(buffer_cache_take(io->p->cache, s, bytes, io->p->max_in_flight == 0, &b));
    io->allocated.push(b);
    *out = b;
    return CW_SUCCESS;
}

cw_status io_port_ptr(cw_io *io, const char *port, CUdeviceptr *dptr) {
    int pi = find_port(io->op, port);
    if (pi < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", io->op->name, port);
    CUdeviceptr m = io->op->ports[pi].mem;
    if (!m)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' port '%s' has no port memory (unconnected, or none declared)",
                    io->op->name, port);
    *dptr = m;
    return CW_SUCCESS;
}

}  // namespace flow
}  // namespace cw
