// cuweave: operators, pipelines, the stream rules, the CPU-driven executor
// and resident pipelines (include/cuweave/flow.h, docs/pipelines.md).
//
// Layout: a pipeline owns its operators and connections. Each connection has
// one message slot, filled when its producer's compute returns and emptied
// when the iteration ends. Each operator owns one cw_io, reused by every
// compute call (no allocation per call once the vectors have grown).
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <new>

#include "core/buffer.hpp"
#include "core/core.hpp"
#include "cuweave/flow.h"
#include "cuweave/future.h"
#include "core/stream.hpp"
#include "core/vec.hpp"

namespace cw {
enum : uint32_t {
    kTagOperator = 0x43574f50u,  // "CWOP"
    kTagPipeline = 0x43575049u,  // "CWPI"
    kTagIo = 0x4357494fu,        // "CWIO"
};

struct Message {
    void *value = nullptr;
    cw_buffer *buffer = nullptr;
    cw_stream *stream = nullptr;
    Mark *mark = nullptr;  // the producer's call ended here on `stream` (a reference), or NULL
};

struct Port {
    char name[CW_NAME_MAX + 1];
    bool input;
    unsigned flags;
    size_t bytes;
    CUdeviceptr dptr;
    Vec<int> conns;  // connection indices (incoming for inputs, outgoing for outputs)
    CUdeviceptr mem = 0;     // port memory once set up
    // Output state of the compute call in progress.
    bool emitted = false;
    Message pending;
    bool stream_set = false;
    cw_stream *stream = nullptr;
    // Input state of the call in progress: buffers from other devices moved.
    bool moved = false;
};

struct Connection {
    int from_op, from_port, to_op, to_port;
    bool has = false;
    Message msg;
    // The message's buffer moved to the consumer's device for the call in
    // progress (a reference, dropped when the call ends), or NULL.
    cw_buffer *local = nullptr;
    bool noted = false;  // the move across devices was logged once
};

struct PortMemory {
    IdleRelease rel;
    cw_context *ctx;
    Vec<CUdeviceptr> ptrs;
};
}  // namespace cw

struct cw_io {
    uint32_t tag;
    cw_pipeline *p;
    cw_operator *op;
    uint64_t iteration;
    bool resident;
    bool active;                 // inside the compute call it was given to
    unsigned long long ctl;      // resident capture: the loop's control block
    cw_stream *stream;           // the call's internal stream (or the upstream one in use), or NULL
    bool carry;                  // outputs carry `stream`
    bool reuse_ordered;          // port memory: ordered after last iteration's readers
    CUcontext made_current;      // the context this call made current (once per call)
    cw::Vec<cw_stream *> touched;  // named and output streams used in the call
    cw::Vec<cw::Mark *> waited;    // marks the call's stream waited for (held by their messages)
    cw::Vec<cw_buffer *> allocated;
};

struct cw_operator {
    uint32_t tag;
    char name[CW_NAME_MAX + 1];
    cw_operator_ops ops;
    void *user;
    cw_operator_settings settings;
    cw_pipeline *owner;
    int index;
    cw::Vec<cw::Port> ports;
    cw::Vec<int> preds, succs;  // operator indices (distinct)
    // Run state.
    cw_stream *internal;        // leased once, kept until the pipeline goes
    cw_stream_pool *internal_pool;
    bool started;               // by cw_pipeline_run (stopped when the run ends)
    bool resident_started;      // by a resident capture (stopped when the pipeline goes)
    std::atomic<uint64_t> ran;  // 1 + the global iteration of its last compute call (0: none)
    cw::Vec<cw::Mark *> call_marks;  // where its last compute call ended, per stream it used (references)
    cw_future *waiter;          // wait_inputs
    cw_io io;
};

struct cw_pipeline {
    uint32_t tag;
    cw_context *ctx;  // retained
    cw_stream_pool *pool;
    bool own_pool;
    unsigned threads;
    unsigned max_in_flight;  // iterations the GPU may lag behind (0: no bound)
    struct Ended {
        uint64_t iteration;
        cw::Mark *mark;  // a reference
        int op;          // whose compute call it ended
    };
    cw::Vec<Ended> ended;  // the end of recent iterations, per stream used
    cw::BufferCache *cache;  // buffers of cw_io_alloc, recycled
    cw::Vec<cw_operator *> ops;
    cw::Vec<cw::Connection> conns;
    cw::Vec<int> topo;
    bool checked;
    bool memory_ready;
    cw::PortMemory *memory;
    cw_stream *null_stream;  // wrapper of the legacy stream, made when first needed
    std::atomic<int> running;
    std::atomic<int> stop;
    std::atomic<uint64_t> iterations, computes, skipped, fallbacks, peer_copies;
    // Resident pipelines.
    cw_resident *resident;
    uint64_t resident_copy;
    // Multi-threaded runs.
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    cw::Vec<int> pending_preds;
    cw::Vec<int> queue;
    size_t done;
    bool quit;
    std::atomic<bool> failed;  // set (with fail_msg) under mu; read without it
    cw_status fail_status;
    char fail_msg[512];
};

namespace cw {
namespace {

inline bool op_ok(const cw_operator *o) { return handle_live(o, kTagOperator); }
inline bool pipe_ok(const cw_pipeline *p) { return handle_live(p, kTagPipeline); }
inline bool io_ok(const cw_io *io) { return io && io->tag == kTagIo; }

#define CW_CHECK_OP(o) CW_CHECK_HANDLE(op_ok, o, "cw_operator")
#define CW_CHECK_PIPE(p) CW_CHECK_HANDLE(pipe_ok, p, "cw_pipeline")
#define CW_CHECK_IO(io)                                                                     \
    do {                                                                                    \
        CW_CHECK_HANDLE(io_ok, io, "cw_io of a compute call");                              \
        if (__builtin_expect(!(io)->active, 0))                                             \
            return fail(CW_ERROR_INVALID_STATE, "%s is used outside the compute call it was given to", #io); \
    } while (0)

// Appends 'name' to a list of names in buf (cap bytes, *len used, a ", "
// before all but the first); stops adding once less than a name's room is
// left, so a long list is cut, never overflowed.
void list_name(char *buf, size_t cap, size_t *len, const char *name) {
    if (*len + CW_NAME_MAX + 8 >= cap) return;
    *len += (size_t)snprintf(buf + *len, cap - *len, "%s'%s'", *len ? ", " : "", name);
}

// 1..63 bytes of [A-Za-z0-9_.-]; *why says what is wrong.
bool name_ok(const char *name, const char **why) {
    if (!name) return *why = "it is NULL", false;
    size_t n = strlen(name);
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
        if (strcmp(op->ports[i].name, name) == 0) return (int)i;
    return -1;
}

cw_operator *find_op(const cw_pipeline *p, const char *name) {
    if (!name) return nullptr;
    for (cw_operator *o : p->ops)
        if (strcmp(o->name, name) == 0) return o;
    return nullptr;
}

bool all_zero(const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

void op_free(cw_operator *op) {
    if (op->ops.destroy) op->ops.destroy(op->user);
    handle_retire(op);
    op->io.tag = kTagDead;
    op->~cw_operator();
    free(op);
}

// ---- checks ------------------------------------------------------------------

// The memory of every output port's group (the port and the inputs
// connected to it), by the rules of cw_pipeline_make_resident. With
// allocate false only checks. Outputs with no connection get none.
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
                // (the host reads it: cw_pipeline_port_ptr).
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

bool any_port_memory(const cw_pipeline *p) {
    for (const cw_operator *o : p->ops)
        for (const Port &pt : o->ports)
            if (pt.bytes || pt.dptr) return true;
    return false;
}

cw_status check(cw_pipeline *p) {
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
    if (any_port_memory(p)) CW_TRY(plan_memory(p, nullptr));
    p->topo.clear();
    if (!p->topo.reserve(n)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i : order) p->topo.push(i);
    p->checked = true;
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

// Allocates the port memory (once): on ctx (the pipeline's, or a loop's).
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
        m->rel.run = free_port_memory;
        m->rel.owner = m;
        release_when_idle(&m->rel);
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

// ---- one compute call -----------------------------------------------------------

void io_reset(cw_io *io, cw_operator *op, uint64_t iteration) {
    io->op = op;
    io->iteration = iteration;
    io->stream = nullptr;
    io->carry = false;
    io->reuse_ordered = false;
    io->made_current = nullptr;
    io->touched.clear();
    io->waited.clear();
    io->allocated.clear();
    for (Port &pt : op->ports) {
        pt.emitted = false;
        pt.pending = Message{};
        pt.stream_set = false;
        pt.stream = nullptr;
        pt.moved = false;
    }
}

bool input_ready(const cw_pipeline *p, const cw_operator *op) {
    for (const Port &pt : op->ports) {
        if (!pt.input || (pt.flags & CW_PORT_OPTIONAL)) continue;
        bool any = false;
        for (int ci : pt.conns) any = any || p->conns[ci].has;
        if (!any) return false;
    }
    return true;
}

// Waits for the GPU work of every input message's stream (wait_inputs).
cw_status wait_inputs(cw_pipeline *p, cw_operator *op) {
    for (const Port &pt : op->ports) {
        if (!pt.input) continue;
        for (int ci : pt.conns) {
            const Connection &c = p->conns[ci];
            if (!c.has || !c.msg.stream) continue;
            cw_stream *s = c.msg.stream;
            if (op->waiter) {
                cw_context *fctx = nullptr;
                (void)cw_future_get_context(op->waiter, &fctx);
                if (fctx != s->ctx) cw_future_destroy(&op->waiter);
            }
            if (op->waiter) {
                CW_TRY(cw_future_rearm(op->waiter, s));
            } else {
                CW_TRY(cw_future_create(&op->waiter, s, CW_FUTURE_EVENT));
            }
            CW_TRY(cw_future_wait(op->waiter, -1));
        }
    }
    return CW_SUCCESS;
}

void drop_marks(cw::Vec<Mark *> &v) {
    for (Mark *m : v) mark_release(m);
    v.clear();
}

// After compute returned: one mark per stream the call used (recorded now:
// everything the call enqueued), attached as a use to every buffer the call
// received, emitted or allocated, carried by the messages it emits; then the
// call's own references go.
cw_status finish_call(cw_pipeline *p, cw_operator *op, bool ok) {
    cw_io *io = &op->io;
    cw_status st = CW_SUCCESS;
    drop_marks(op->call_marks);
    auto add_mark = [&](cw_stream *s) {
        if (!s || s->is_null) return;
        for (Mark *m : op->call_marks)
            if (mark_stream(m) == s) return;
        Mark *m = nullptr;
        cw_status r = mark_record(s, &m);
        if (r == CW_SUCCESS && !op->call_marks.push(m)) {
            mark_release(m);
            r = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        if (r != CW_SUCCESS && st == CW_SUCCESS) st = r;
    };
    add_mark(io->stream);
    // The call's own stream waited for its inputs' marks: its mark covers them.
    if (!op->call_marks.empty() && io->stream && mark_stream(op->call_marks[0]) == io->stream)
        for (Mark *w : io->waited) mark_cover(op->call_marks[0], w);
    for (cw_stream *s : io->touched) add_mark(s);
    // Each buffer once (one received on two ports, or allocated and emitted).
    cw_buffer *seen[32];
    size_t nseen = 0;
    auto use = [&](cw_buffer *b) {
        if (!b) return;
        for (size_t i = 0; i < nseen; i++)
            if (seen[i] == b) return;
        if (nseen < 32) seen[nseen++] = b;
        for (Mark *m : op->call_marks) {
            cw_status u = buffer_attach(b, m);
            if (u != CW_SUCCESS && st == CW_SUCCESS) st = u;
        }
    };
    for (const Port &pt : op->ports) {
        if (pt.input) {
            for (int ci : pt.conns) {
                Connection &c = p->conns[ci];
                if (c.has) use(c.msg.buffer);
                if (c.local) {
                    use(c.local);
                    cw_buffer_release(&c.local);
                }
            }
        } else if (pt.emitted) {
            use(pt.pending.buffer);
        }
    }
    for (cw_buffer *b : io->allocated) use(b);
    // Deliver (only after a successful compute).
    for (Port &pt : op->ports) {
        if (pt.input || !pt.emitted) continue;
        if (ok) {
            cw_stream *carry = pt.stream_set ? pt.stream : (io->carry ? io->stream : nullptr);
            Mark *mark = nullptr;
            for (Mark *m : op->call_marks)
                if (mark_stream(m) == carry) mark = m;
            for (int ci : pt.conns) {
                Connection &c = p->conns[ci];
                if (c.has) {
                    if (c.msg.buffer) cw_buffer_release(&c.msg.buffer);
                    mark_release(c.msg.mark);
                }
                c.msg.value = pt.pending.value;
                c.msg.buffer = pt.pending.buffer;
                if (c.msg.buffer) (void)cw_buffer_retain(c.msg.buffer);
                c.msg.stream = carry;
                c.msg.mark = mark;
                if (mark) mark_retain(mark);
                c.has = true;
            }
        }
        if (pt.pending.buffer) cw_buffer_release(&pt.pending.buffer);
        pt.emitted = false;
    }
    for (cw_buffer *&b : io->allocated) cw_buffer_release(&b);
    io->allocated.clear();
    return st;
}

void record_failure(cw_pipeline *p, cw_operator *op, const char *phase, cw_status st) {
    pthread_mutex_lock(&p->mu);
    if (!p->failed.load(std::memory_order_relaxed)) {
        p->fail_status = st;
        const cw_error_info *e = cw_last_error();
        const char *what = e->status == st && e->message[0] ? e->message : cw_status_string(st);
        int n = snprintf(p->fail_msg, sizeof p->fail_msg, "operator '%s' (%s): %s", op->name, phase, what);
        const uint64_t ran = op->ran.load(std::memory_order_relaxed);
        if (st == CW_ERROR_DEVICE_FAULT && ran && n > 0 && (size_t)n < sizeof p->fail_msg) {
            // A fault is seen by whoever asks next: name the stage whose work
            // may hold it, the operators that queued work in this iteration.
            char names[320] = "";
            size_t len = 0;
            for (size_t k = 0; k < p->topo.size(); k++) {
                const cw_operator *o = p->ops[p->topo[k]];
                if (o->ran.load(std::memory_order_relaxed) == ran) list_name(names, sizeof names, &len, o->name);
            }
            snprintf(p->fail_msg + n, sizeof p->fail_msg - (size_t)n,
                     "; the faulting work was queued in iteration %llu or before, by one of operators %s",
                     (unsigned long long)(ran - 1), names);
        }
        p->failed.store(true, std::memory_order_release);  // after the message
    }
    pthread_mutex_unlock(&p->mu);
}

// Runs one operator for one iteration (any thread).
void run_op(cw_pipeline *p, cw_operator *op, uint64_t iteration) {
    if (p->failed.load(std::memory_order_acquire)) return;
    if (!input_ready(p, op)) {
        p->skipped.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (!op->started) {
        op->started = true;
        if (op->ops.start) {
            cw_status st = op->ops.start(op, op->user);
            if (st != CW_SUCCESS) {
                record_failure(p, op, "start", st);
                return;
            }
        }
    }
    if (op->settings.wait_inputs) {
        cw_status st = wait_inputs(p, op);
        if (st != CW_SUCCESS) {
            record_failure(p, op, "waiting for its inputs", st);
            return;
        }
    }
    io_reset(&op->io, op, iteration);
    op->ran.store(p->iterations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    op->io.active = true;
    cw_status st = op->ops.compute(&op->io, op->user);
    op->io.active = false;
    if (st != CW_SUCCESS) record_failure(p, op, "compute", st);
    cw_status fin = finish_call(p, op, st == CW_SUCCESS);
    if (st == CW_SUCCESS && fin != CW_SUCCESS) record_failure(p, op, "recording buffer uses", fin);
    p->computes.fetch_add(1, std::memory_order_relaxed);
}

// The end of iteration `it`: where every compute call of it ended.
cw_status mark_iteration(cw_pipeline *p, uint64_t it) {
    // Sinks first: waiting for a sink's mark marks what it covers finished,
    // so the waits for its upstream operators' marks cost nothing.
    for (size_t k = p->topo.size(); k-- > 0;)
        for (Mark *m : p->ops[p->topo[k]]->call_marks) {
            if (!p->ended.push(cw_pipeline::Ended{it, m, p->topo[k]}))
                return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            mark_retain(m);
        }
    return CW_SUCCESS;
}

// Waits (on the host) for the ends of iterations up to `upto`, or drops
// them all without waiting (wait false).
cw_status settle_marks(cw_pipeline *p, uint64_t upto, bool wait) {
    cw_status st = CW_SUCCESS;
    size_t keep = 0;
    for (size_t i = 0; i < p->ended.size(); i++) {
        cw_pipeline::Ended e = p->ended[i];
        if (wait && e.iteration > upto) {
            p->ended[keep++] = e;
            continue;
        }
        if (wait && st == CW_SUCCESS) {
            st = mark_wait(e.mark);
            if (st == CW_ERROR_DEVICE_FAULT) {
                // Name the stage: the iteration, and its operators whose work
                // was not seen finished (a sticky fault hides which kernel it
                // was: it is in one of them, or in work queued before).
                char names[320] = "";
                size_t len = 0;
                for (size_t j = 0; j < p->topo.size(); j++) {
                    const cw_operator *op = p->ops[p->topo[j]];
                    bool open = false;
                    for (size_t m = 0; m < p->ended.size(); m++)
                        open = open || (p->ended[m].iteration == e.iteration && p->ended[m].op == op->index &&
                                        !mark_finished(p->ended[m].mark));
                    if (open) list_name(names, sizeof names, &len, op->name);
                }
                st = fail(CW_ERROR_DEVICE_FAULT,
                          "the device faulted (%s) in iteration %llu or before: the work of operators %s was not "
                          "seen finished",
                          cw_last_error()->cu_name, (unsigned long long)e.iteration, names);
            }
        }
        mark_release(e.mark);
    }
    while (p->ended.size() > keep) p->ended.pop();
    return st;
}

void end_iteration(cw_pipeline *p) {
    for (Connection &c : p->conns) {
        if (c.has && c.msg.buffer) cw_buffer_release(&c.msg.buffer);
        if (c.has) mark_release(c.msg.mark);
        c.has = false;
        c.msg = Message{};
    }
}

// ---- workers ----------------------------------------------------------------------

struct WorkerArg {
    cw_pipeline *p;
    std::atomic<uint64_t> *iteration;
};

void *worker_main(void *arg) {
    WorkerArg *w = static_cast<WorkerArg *>(arg);
    cw_pipeline *p = w->p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->queue.empty()) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        int idx = p->queue.back();
        p->queue.pop();
        uint64_t it = w->iteration->load(std::memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
        run_op(p, p->ops[idx], it);
        pthread_mutex_lock(&p->mu);
        for (int s : p->ops[idx]->succs)
            if (--p->pending_preds[s] == 0) p->queue.push(s);  // reserved: never grows
        if (!p->queue.empty()) pthread_cond_broadcast(&p->cv_work);
        if (++p->done == p->ops.size()) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return nullptr;
}

// ---- resident capture ------------------------------------------------------------

cw_status resident_fn(cw_stream *s, void *user) {
    cw_pipeline *p = static_cast<cw_pipeline *>(user);
    uint64_t copy = p->resident_copy++;
    size_t n = p->ops.size();
    cw::Vec<cw_stream *> streams;
    if (!streams.assign(n, nullptr)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = CW_SUCCESS;
    for (size_t k = 0; k < p->topo.size() && st == CW_SUCCESS; k++) {
        cw_operator *op = p->ops[p->topo[k]];
        cw_stream *os = nullptr;
        st = cw_stream_fork(s, &os);
        if (st != CW_SUCCESS) {
            record_failure(p, op, "resident capture: fork", st);
            break;
        }
        streams[op->index] = os;
        for (int pr : op->preds) {
            st = cw_stream_wait(os, streams[pr]);
            if (st != CW_SUCCESS) break;
        }
        if (st != CW_SUCCESS) {
            record_failure(p, op, "resident capture: ordering", st);
            break;
        }
        if (!op->resident_started) {
            op->resident_started = true;
            if (op->ops.start && (st = op->ops.start(op, op->user)) != CW_SUCCESS) {
                record_failure(p, op, "start", st);
                break;
            }
        }
        cw_io io;
        io.tag = kTagIo;
        io.p = p;
        io.resident = true;
        (void)cw_resident_get_ctl(p->resident, &io.ctl);
        io_reset(&io, op, copy);
        io.stream = os;
        io.carry = true;
        // A loop that traces (cw_resident_settings.trace) gets a stage per
        // operator, so that a fault names the operator.
        char stage_name[80];
        snprintf(stage_name, sizeof stage_name, "operator %s", op->name);
        uint32_t stage = CW_RESIDENT_NO_STAGE;
        if ((st = cw_resident_stage_begin(p->resident, os, stage_name, &stage)) != CW_SUCCESS) {
            record_failure(p, op, "resident capture: trace stage", st);
            break;
        }
        io.active = true;
        st = op->ops.compute(&io, op->user);
        io.active = false;
        io.tag = kTagDead;
        for (Port &pt : op->ports) pt.emitted = false;
        if (st != CW_SUCCESS) record_failure(p, op, "resident capture: compute", st);
        if (st == CW_SUCCESS && (st = cw_resident_stage_end(p->resident, os, stage)) != CW_SUCCESS)
            record_failure(p, op, "resident capture: trace stage", st);
    }
    for (size_t i = n; i-- > 0;)
        if (streams[i]) {
            cw_status j = cw_stream_join(s, &streams[i]);
            if (st == CW_SUCCESS) st = j;
        }
    if (st != CW_SUCCESS) {
        pthread_mutex_lock(&p->mu);
        bool have = p->failed.load(std::memory_order_relaxed);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", p->fail_msg);
        p->failed.store(false, std::memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
        if (have) return fail(st, "%s", msg);
    }
    return st;
}

void stop_ops(cw_pipeline *p) {
    for (cw_operator *op : p->ops) {
        if (!op->started) continue;
        op->started = false;
        if (op->ops.stop) op->ops.stop(op, op->user);
    }
}

// Input port index, or a failure naming the operator and port.
cw_status input_port(cw_io *io, const char *port, int *idx) {
    CW_CHECK_ARG(port != NULL);
    int i = find_port(io->op, port);
    if (i < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", io->op->name, port);
    if (!io->op->ports[i].input)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' port '%s' is an output, not an input", io->op->name,
                    port);
    *idx = i;
    return CW_SUCCESS;
}

cw_status output_port(cw_io *io, const char *port, int *idx) {
    CW_CHECK_ARG(port != NULL);
    int i = find_port(io->op, port);
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

cw_stream_pool *op_pool(const cw_operator *op) {
    return op->settings.pool ? op->settings.pool : op->owner->pool;
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
        cw_status st = cw_stream_pool_acquire(pool, &s);
        if (st == CW_SUCCESS) {
            op->internal = s;
            op->internal_pool = pool;
        } else if (st != CW_ERROR_POOL_EXHAUSTED) {
            return st;
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
cw_status move_inputs(cw_io *io, int pi) {
    Port &pt = io->op->ports[pi];
    if (io->resident || pt.moved) return CW_SUCCESS;
    cw_pipeline *p = io->p;
    const cw_context *home = op_context(io->op);
    for (int ci : pt.conns) {
        Connection &c = p->conns[ci];
        if (!c.has || !c.msg.buffer || c.local) continue;
        const cw_context *from = buffer_context(c.msg.buffer);
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
        CW_TRY(buffer_cache_take(p->cache, s, buffer_bytes(c.msg.buffer), p->max_in_flight == 0, &copy));
        cw_status st = buffer_copy(s, copy, c.msg.buffer);
        if (st != CW_SUCCESS) {
            cw_buffer_release(&copy);
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
                    "(cw_context_enable_peer or cw_device_set_enable_peers makes it direct where the topology allows)",
                    src->name, src->ports[c.from_port].name, io->op->name, pt.name, from->ordinal, home->ordinal);
        }
    }
    pt.moved = true;
    return CW_SUCCESS;
}

cw_status legacy_stream(cw_pipeline *p, cw_stream **out) {
    if (!p->null_stream) CW_TRY(cw_stream_wrap(&p->null_stream, p->ctx, nullptr));
    *out = p->null_stream;
    return CW_SUCCESS;
}

}  // namespace
}  // namespace cw

using namespace cw;

extern "C" {

CW_API void cw_port_settings_default(cw_port_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
}

CW_API void cw_operator_settings_default(cw_operator_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
}

CW_API void cw_pipeline_settings_default(cw_pipeline_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->threads = 1;
    s->max_in_flight = 4;
}

CW_API cw_status cw_operator_create(cw_operator **out, const char *name, const cw_operator_ops *ops, void *user,
                                    const cw_operator_settings *settings) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(ops != NULL);
    const char *why = "";
    if (!name_ok(name, &why)) return fail(CW_ERROR_INVALID_ARGUMENT, "bad operator name: %s", why);
    if (!ops->compute) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no compute callback", name);
    CW_CHECK_ARG(all_zero(ops->reserved, sizeof ops->reserved));
    cw_operator_settings s;
    cw_operator_settings_default(&s);
    if (settings) {
        CW_CHECK_ARG(all_zero(settings->reserved, sizeof settings->reserved));
        if (settings->pool && !pool_ok(settings->pool))
            return fail(CW_ERROR_INVALID_HANDLE, "settings->pool is not a live cw_stream_pool");
        s = *settings;
    }
    void *mem = calloc(1, sizeof(cw_operator));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_operator *op = new (mem) cw_operator();
    room.publish(op, kTagOperator);
    snprintf(op->name, sizeof op->name, "%s", name);
    op->ops = *ops;
    op->user = user;
    op->settings = s;
    op->index = -1;
    op->io.tag = kTagIo;
    *out = op;
    return CW_SUCCESS;
}

CW_API void cw_operator_destroy(cw_operator **op) {
    CW_ENTRY;
    if (!op || !*op) return;
    cw_operator *o = *op;
    if (!op_ok(o)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "op is not a live cw_operator");
        return;
    }
    if (o->owner) {
        (void)fail(CW_ERROR_INVALID_STATE, "operator '%s' belongs to a pipeline: it goes with the pipeline", o->name);
        return;
    }
    *op = nullptr;
    op_free(o);
}

static cw_status add_port(cw_operator *op, const char *name, const cw_port_settings *settings, bool input) {
    CW_CHECK_OP(op);
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
    cw_port_settings_default(&s);
    if (settings) {
        CW_CHECK_ARG(all_zero(settings->reserved, sizeof settings->reserved));
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

CW_API cw_status cw_operator_add_input(cw_operator *op, const char *name, const cw_port_settings *settings) {
    CW_ENTRY;
    return add_port(op, name, settings, true);
}

CW_API cw_status cw_operator_add_output(cw_operator *op, const char *name, const cw_port_settings *settings) {
    CW_ENTRY;
    return add_port(op, name, settings, false);
}

CW_API const char *cw_operator_name(const cw_operator *op) { return op_ok(op) ? op->name : nullptr; }

CW_API cw_status cw_pipeline_create(cw_pipeline **out, cw_context *ctx, const cw_pipeline_settings *settings) {
    CW_ENTRY;
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_CONTEXT(ctx);
    cw_pipeline_settings s;
    cw_pipeline_settings_default(&s);
    if (settings) {
        CW_CHECK_ARG(all_zero(settings->reserved, sizeof settings->reserved));
        if (settings->pool && !pool_ok(settings->pool))
            return fail(CW_ERROR_INVALID_HANDLE, "settings->pool is not a live cw_stream_pool");
        CW_CHECK_ARG(settings->threads <= 256);
        s = *settings;
    }
    cw_stream_pool *pool = s.pool;
    if (!pool) {
        cw_stream_pool_settings ps;
        cw_stream_pool_settings_default(&ps);
        CW_TRY(cw_stream_pool_create(&pool, ctx, &ps));
    }
    void *mem = calloc(1, sizeof(cw_pipeline));
    if (!mem) {
        if (!s.pool) cw_stream_pool_destroy(&pool);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    BufferCache *cache = buffer_cache_new();
    if (!cache) {
        free(mem);
        if (!s.pool) cw_stream_pool_destroy(&pool);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    cw_pipeline *p = new (mem) cw_pipeline();
    p->cache = cache;
    room.publish(p, kTagPipeline);
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

CW_API void cw_pipeline_destroy(cw_pipeline **pp) {
    CW_ENTRY;
    if (!pp || !*pp) return;
    cw_pipeline *p = *pp;
    if (!pipe_ok(p)) {
        (void)fail(CW_ERROR_INVALID_HANDLE, "p is not a live cw_pipeline");
        return;
    }
    if (p->running.load()) {
        (void)fail(CW_ERROR_INVALID_STATE, "the pipeline is running: stop it and let cw_pipeline_run return first");
        return;
    }
    *pp = nullptr;
    end_iteration(p);
    for (cw_operator *op : p->ops) {
        if (op->resident_started && op->ops.stop) op->ops.stop(op, op->user);
        for (Port &pt : op->ports)
            if (pt.pending.buffer) cw_buffer_release(&pt.pending.buffer);
        drop_marks(op->call_marks);
        if (op->internal) (void)cw_stream_pool_release(op->internal_pool, &op->internal);
        (void)cw_stream_pool_release_owner(op_pool(op), op, nullptr);
        cw_future_destroy(&op->waiter);
        op->owner = nullptr;
        op_free(op);
    }
    settle_marks(p, 0, false);
    buffer_cache_close(p->cache);
    if (p->null_stream) cw_stream_destroy(&p->null_stream);
    if (p->own_pool) cw_stream_pool_destroy(&p->pool);
    if (p->memory) {
        p->memory->rel.run = free_port_memory;
        p->memory->rel.owner = p->memory;
        release_when_idle(&p->memory->rel);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    context_release(p->ctx);
    handle_retire(p);
    p->~cw_pipeline();
    free(p);
}

CW_API cw_status cw_pipeline_add(cw_pipeline *p, cw_operator *op) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_OP(op);
    if (op->owner) return fail(CW_ERROR_INVALID_STATE, "operator '%s' belongs to a pipeline already", op->name);
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    if (find_op(p, op->name))
        return fail(CW_ERROR_INVALID_ARGUMENT, "the pipeline has an operator named '%s' already", op->name);
    if (!p->ops.push(op)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    op->owner = p;
    op->index = (int)p->ops.size() - 1;
    op->io.p = p;
    p->checked = false;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_connect(cw_pipeline *p, const char *from_op, const char *from_port, const char *to_op,
                                     const char *to_port) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(from_op != NULL && from_port != NULL && to_op != NULL && to_port != NULL);
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
    bool known = false;
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

CW_API cw_status cw_pipeline_check(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    return check(p);
}

CW_API cw_status cw_pipeline_run(cw_pipeline *p, uint64_t iterations) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    int expected = 0;
    if (!p->running.compare_exchange_strong(expected, 1))
        return fail(CW_ERROR_INVALID_STATE, "the pipeline is running already");
    struct Running {
        cw_pipeline *p;
        ~Running() { p->running.store(0); }
    } running{p};
    if (!p->checked) CW_TRY(check(p));
    if (any_port_memory(p)) CW_TRY(setup_memory(p, p->ctx));
    // Compute calls make their stream's context current (on this thread,
    // with one worker thread): the caller gets its own back at the end.
    struct Restore {
        CUcontext prev = nullptr;
        bool have = false;
        ~Restore() {
            if (have) drv().cuCtxSetCurrent(prev);
        }
    } restore;
    {
        // Without the caller's context known it could not be put back: refuse.
        CUresult r = drv().cuCtxGetCurrent(&restore.prev);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxGetCurrent", "the caller's current context");
        restore.have = true;
    }
    p->stop.store(0);
    p->failed.store(false, std::memory_order_relaxed);
    p->fail_status = CW_SUCCESS;
    p->fail_msg[0] = '\0';
    size_t n = p->ops.size();
    std::atomic<uint64_t> iteration{0};
    cw::Vec<pthread_t> workers;
    WorkerArg warg{p, &iteration};
    unsigned nthreads = p->threads > n ? (unsigned)n : p->threads;
    cw_status st = CW_SUCCESS;
    if (nthreads > 1) {
        if (!p->pending_preds.assign(n, 0) || !p->queue.reserve(n) || !workers.reserve(nthreads))
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        p->quit = false;
        p->queue.clear();
        for (unsigned i = 0; i < nthreads; i++) {
            pthread_t t;
            if (pthread_create(&t, nullptr, worker_main, &warg) != 0) {
                st = fail(CW_ERROR_OUT_OF_MEMORY, "could not start executor thread %u of %u", i + 1, nthreads);
                break;
            }
            workers.push(t);
        }
    }
    for (uint64_t it = 0; st == CW_SUCCESS && (iterations == 0 || it < iterations); it++) {
        if (p->stop.load(std::memory_order_acquire)) break;
        iteration.store(it, std::memory_order_relaxed);
        if (workers.empty()) {
            for (int idx : p->topo) run_op(p, p->ops[idx], it);
        } else {
            pthread_mutex_lock(&p->mu);
            p->done = 0;
            for (cw_operator *op : p->ops) {
                p->pending_preds[op->index] = (int)op->preds.size();
                if (op->preds.empty()) p->queue.push(op->index);
            }
            pthread_cond_broadcast(&p->cv_work);
            while (p->done < n) pthread_cond_wait(&p->cv_done, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        end_iteration(p);
        if (p->failed.load(std::memory_order_acquire)) break;
        // Iterations are counted over every run (a run of one iteration per
        // frame is bounded too). The GPU may lag at most max_in_flight
        // iterations behind: the wait for the next iteration's bound is made
        // now, after this iteration's work is queued, so that it overlaps
        // the GPU's work instead of delaying the next iteration's first launch.
        const uint64_t global = p->iterations.fetch_add(1, std::memory_order_relaxed);
        if (p->max_in_flight) {
            if ((st = mark_iteration(p, global)) != CW_SUCCESS) break;
            if (global + 1 >= p->max_in_flight && (st = settle_marks(p, global + 1 - p->max_in_flight, true)))
                break;
        }
    }
    if (!workers.empty()) {
        pthread_mutex_lock(&p->mu);
        p->quit = true;
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
        for (pthread_t t : workers) pthread_join(t, nullptr);
    }
    end_iteration(p);
    stop_ops(p);
    if (st != CW_SUCCESS) return st;
    if (p->failed.load(std::memory_order_acquire)) return fail(p->fail_status, "%s", p->fail_msg);
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_synchronize(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running: wait for cw_pipeline_run");
    for (size_t k = p->topo.size(); k-- > 0;) {  // sinks first (their marks cover the rest)
        cw_operator *op = p->ops[p->topo[k]];
        for (Mark *m : op->call_marks) {
            cw_status st = mark_wait(m);
            if (st != CW_SUCCESS)
                return fail(st, "operator '%s': its last compute call's work (or earlier work) failed: %s", op->name,
                            cw_last_error()->message);
        }
    }
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_stop(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    p->stop.store(1, std::memory_order_release);
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_get_stats(const cw_pipeline *p, cw_pipeline_stats *stats) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(stats != NULL);
    memset(stats, 0, sizeof *stats);
    stats->iterations = p->iterations.load(std::memory_order_relaxed);
    stats->computes = p->computes.load(std::memory_order_relaxed);
    stats->skipped = p->skipped.load(std::memory_order_relaxed);
    stats->fallbacks = p->fallbacks.load(std::memory_order_relaxed);
    stats->peer_copies = p->peer_copies.load(std::memory_order_relaxed);
    stats->operators = p->ops.size();
    stats->connections = p->conns.size();
    BufferCacheStats cs;
    buffer_cache_stats(p->cache, &cs);
    stats->buffers_allocated = cs.allocated;
    stats->buffers_reused = cs.reused;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_get_context(const cw_pipeline *p, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = p->ctx;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_find(const cw_pipeline *p, const char *name, cw_operator **op) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(name != NULL && op != NULL);
    cw_operator *o = find_op(p, name);
    if (!o) return fail(CW_ERROR_INVALID_ARGUMENT, "no operator named '%s' in the pipeline", name);
    *op = o;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_port_ptr(const cw_pipeline *p, const char *op, const char *port, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(op != NULL && port != NULL && dptr != NULL);
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

CW_API cw_status cw_pipeline_make_resident(cw_pipeline *p, cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_PIPE(p);
    CW_CHECK_ARG(r != NULL);
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    cw_context *rctx = nullptr;
    CW_TRY(cw_resident_get_context(r, &rctx));
    if (rctx->device != p->ctx->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the loop is on device %d, the pipeline on device %d", rctx->ordinal,
                    p->ctx->ordinal);
    if (!p->checked) CW_TRY(check(p));
    for (cw_operator *op : p->ops)
        if (!op->settings.resident)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s' is not GPU-resident (cw_operator_settings.resident): a resident pipeline "
                        "captures every operator",
                        op->name);
    CW_TRY(setup_memory(p, rctx));  // plans the memory (its rules' errors) before allocating
    p->resident = r;
    p->resident_copy = 0;
    cw_status st = cw_resident_set_workload_fn(r, resident_fn, p);
    if (st != CW_SUCCESS) p->resident = nullptr;
    return st;
}

/* ---- cw_io ------------------------------------------------------------------------ */

CW_API cw_status cw_io_receive(cw_io *io, const char *port, cw_message *msg) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(msg != NULL);
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

CW_API cw_status cw_io_receive_many(cw_io *io, const char *port, cw_message *msgs, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(msgs != NULL || cap == 0);
    int pi;
    CW_TRY(input_port(io, port, &pi));
    CW_TRY(move_inputs(io, pi));
    *count = each_message(io, pi, [&](size_t i, const Message &m) {
        if (i < cap) msgs[i] = cw_message{m.value, m.buffer, m.stream};
    });
    return CW_SUCCESS;
}

CW_API cw_status cw_io_receive_stream(cw_io *io, const char *port, cw_stream **out) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(out != NULL);
    int pi = -1;
    if (port) CW_TRY(input_port(io, port, &pi));
    if (io->resident) {
        *out = io->stream;
        return CW_SUCCESS;
    }
    if (pi >= 0) CW_TRY(move_inputs(io, pi));
    CW_TRY(ensure_stream(io, pi));
    cw_stream *s = io->stream;
    if (!s) {
        // Neither a pool stream nor an upstream one: the legacy stream, and
        // outputs carry nothing (what Holoscan documents for this case).
        CW_TRY(legacy_stream(io->p, &s));
        CUresult r = drv().cuCtxSetCurrent(io->p->ctx->cu);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxSetCurrent");
        *out = s;
        return CW_SUCCESS;
    }
    if (pi >= 0)
        for (int ci : io->op->ports[pi].conns) {
            const Connection &c = io->p->conns[ci];
            if (!c.local) CW_TRY(order_behind(io, s, c));  // a moved message's copy already waited on s
        }
    if (io->p->memory_ready && !io->reuse_ordered) {
        // Port memory is written again every iteration: the writer waits for
        // last iteration's readers (a pool buffer never needs this).
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
    }
    if (io->made_current != s->ctx->cu) {
        CUresult r = drv().cuCtxSetCurrent(s->ctx->cu);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuCtxSetCurrent");
        io->made_current = s->ctx->cu;
    }
    *out = s;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_receive_streams(cw_io *io, const char *port, cw_stream **streams, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(streams != NULL || cap == 0);
    int pi;
    CW_TRY(input_port(io, port, &pi));
    *count = each_message(io, pi, [&](size_t i, const Message &m) {
        if (i < cap) streams[i] = m.stream;
    });
    return CW_SUCCESS;
}

CW_API cw_status cw_io_stream(cw_io *io, const char *name, cw_stream **out) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(out != NULL);
    const char *why = "";
    if (!name_ok(name, &why)) return fail(CW_ERROR_INVALID_ARGUMENT, "bad stream name: %s", why);
    if (io->resident)
        return fail(CW_ERROR_INVALID_STATE,
                    "operator '%s': in a resident capture use the stream of cw_io_receive_stream", io->op->name);
    if (io->op->settings.no_internal_stream)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' was made with no_internal_stream: it takes no stream",
                    io->op->name);
    cw_stream *s;
    CW_TRY(cw_stream_pool_named(op_pool(io->op), io->op, name, &s));
    if (!io->touched.push(s)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    *out = s;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_set_output_stream(cw_io *io, const char *port, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    if (s) CW_CHECK_STREAM(s);
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

CW_API cw_status cw_io_emit(cw_io *io, const char *port, void *value, cw_buffer *buffer) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    int pi = -1;
    CW_TRY(output_port(io, port, &pi));
    if (io->resident) return CW_SUCCESS;
    if (buffer) CW_TRY(cw_buffer_retain(buffer));
    Port &pt = io->op->ports[pi];
    if (pt.pending.buffer) cw_buffer_release(&pt.pending.buffer);
    pt.pending.value = value;
    pt.pending.buffer = buffer;
    pt.emitted = true;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_alloc(cw_io *io, size_t bytes, cw_buffer **out) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(bytes > 0);
    if (io->resident)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s': a resident capture allocates nothing (use port memory)",
                    io->op->name);
    cw_stream *s = io->stream;
    if (!s) CW_TRY(cw_io_receive_stream(io, nullptr, &s));
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

CW_API cw_status cw_io_port_ptr(cw_io *io, const char *port, unsigned long long *dptr) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(port != NULL && dptr != NULL);
    int pi = find_port(io->op, port);
    if (pi < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no port '%s'", io->op->name, port);
    CUdeviceptr m = io->op->ports[pi].mem;
    if (!m)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' port '%s' has no port memory (unconnected, or none declared)",
                    io->op->name, port);
    *dptr = m;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_resident_ctl(cw_io *io, unsigned long long *ctl) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(ctl != NULL);
    if (!io->resident)
        return fail(CW_ERROR_INVALID_STATE, "operator '%s' is not being captured into a resident loop", io->op->name);
    *ctl = io->ctl;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_get_operator(cw_io *io, cw_operator **op) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(op != NULL);
    *op = io->op;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_get_iteration(cw_io *io, uint64_t *iteration) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(iteration != NULL);
    *iteration = io->iteration;
    return CW_SUCCESS;
}

}  // extern "C"
