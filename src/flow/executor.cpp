/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: the CPU-driven executor (flow.hpp). Each iteration
// runs every operator once, in topological order (one thread) or as its
// inputs arrive (worker threads); after each compute call it records one
// mark per stream the call used, which becomes the use of every buffer the
// call touched and the point consumers wait for. The GPU may lag at most
// max_in_flight iterations behind.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "core/future.hpp"
#include "flow/flow.hpp"

namespace cw {
namespace flow {

using namespace core;

namespace {

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
            if (op->waiter && op->waiter->ctx != s->ctx) {
                future_destroy(op->waiter);
                op->waiter = nullptr;
            }
            if (op->waiter) {
                CW_TRY(future_rearm(op->waiter, s));
            } else {
                CW_TRY(future_create(s, CW_FUTURE_EVENT, &op->waiter));
            }
            CW_TRY(future_wait(op->waiter, -1));
        }
    }
    return CW_SUCCESS;
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
    // Their ranks, now that they are recorded: the order of recording (with
    // one executor thread), which the in-flight bound's shortcut relies on.
    op->call_rank = p->mark_ranks.fetch_add(op->call_marks.size(), std::memory_order_relaxed);
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
                    buffer_release(c.local);
                    c.local = nullptr;
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
                    if (c.msg.buffer) buffer_release(c.msg.buffer);
                    mark_release(c.msg.mark);
                }
                c.msg.value = pt.pending.value;
                c.msg.buffer = pt.pending.buffer;
                if (c.msg.buffer) buffer_retain(c.msg.buffer);
                c.msg.stream = carry;
                c.msg.mark = mark;
                if (mark) mark_retain(mark);
                c.has = true;
            }
        }
        if (pt.pending.buffer) {
            buffer_release(pt.pending.buffer);
            pt.pending.buffer = nullptr;
        }
        pt.emitted = false;
    }
    for (cw_buffer *&b : io->allocated) {
        buffer_release(b);
        b = nullptr;
    }
    io->allocated.clear();
    return st;
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
    cw_trace *const trace = p->trace;
    const int64_t call_begin = trace ? now_ns() : 0;
    if (op->settings.wait_inputs) {
        cw_status st = wait_inputs(p, op);
        if (trace) trace_host(p, "wait inputs", call_begin);
        if (st != CW_SUCCESS) {
            record_failure(p, op, "waiting for its inputs", st);
            return;
        }
    }
    CW_NVTX_RANGE_TEXT(operator_compute, op->name);  // the call and what it recorded (finish_call)
    io_reset(&op->io, op, iteration);
    op->ran.store(p->iterations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    op->io.active = true;
    if (trace) trace_call_begin(&op->io);
    cw_status st = op->ops.compute(&op->io, op->user);
    op->io.active = false;
    if (st != CW_SUCCESS) record_failure(p, op, "compute", st);
    if (trace) {
        cw_status te = trace_call_end(&op->io);
        if (st == CW_SUCCESS && te != CW_SUCCESS) record_failure(p, op, "tracing", te);
    }
    cw_status fin = finish_call(p, op, st == CW_SUCCESS);
    if (st == CW_SUCCESS && fin != CW_SUCCESS) record_failure(p, op, "recording buffer uses", fin);
    if (trace) trace_host(p, op->name, call_begin);
    p->computes.fetch_add(1, std::memory_order_relaxed);
}

// The end of iteration `it`: where every compute call of it ended.
cw_status mark_iteration(cw_pipeline *p, uint64_t it) {
    // Sinks first: waiting for a sink's mark marks what it covers finished,
    // so the waits for its upstream operators' marks cost nothing. Each
    // entry keeps its mark's rank, given as it was recorded (finish_call):
    // the list itself is not in recording order, and an operator that did
    // not run in this iteration (skipped, or after a failed run) lists the
    // marks of an earlier call, recorded before this iteration's.
    for (size_t k = p->topo.size(); k-- > 0;) {
        const cw_operator *op = p->ops[p->topo[k]];
        const Vec<Mark *> &marks = op->call_marks;
        for (size_t j = 0; j < marks.size(); j++) {
            if (!p->ended.push(cw_pipeline::Ended{it, marks[j], p->topo[k], op->call_rank + j}))
                return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            mark_retain(marks[j]);
        }
    }
    return CW_SUCCESS;
}

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

void stop_ops(cw_pipeline *p) {
    for (cw_operator *op : p->ops) {
        if (!op->started) continue;
        op->started = false;
        if (op->ops.stop) op->ops.stop(op, op->user);
    }
}

}  // namespace

void io_reset(cw_io *io, cw_operator *op, uint64_t iteration) {
    io->op = op;
    io->iteration = iteration;
    io->stream = nullptr;
    io->carry = false;
    io->reuse_ordered = false;
    io->touched.clear();
    io->waited.clear();
    io->allocated.clear();
    io->trace_stream = nullptr;
    for (Port &pt : op->ports) {
        pt.emitted = false;
        pt.pending = Message{};
        pt.stream_set = false;
        pt.stream = nullptr;
        pt.moved = false;
    }
}

void drop_marks(Vec<Mark *> &v) {
    for (Mark *m : v) mark_release(m);
    v.clear();
}

void record_failure(cw_pipeline *p, cw_operator *op, const char *phase, cw_status st) {
    pthread_mutex_lock(&p->mu);
    if (!p->failed.load(std::memory_order_relaxed)) {
        p->fail_status = st;
        const cw_error_info &e = last_error();
        const char *what = e.status == st && e.message[0] ? e.message : status_text(st);
        p->fail_cu = e.status == st ? e.cu_result : 0;
        copy_text(p->fail_call, sizeof p->fail_call, e.status == st ? e.driver_call : "");
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

void end_iteration(cw_pipeline *p) {
    for (Connection &c : p->conns) {
        if (c.has && c.msg.buffer) buffer_release(c.msg.buffer);
        if (c.has) mark_release(c.msg.mark);
        c.has = false;
        c.msg = Message{};
    }
}

cw_status settle_marks(cw_pipeline *p, uint64_t upto, bool wait) {
    // The list is in iteration order (mark_iteration appends; within an
    // iteration sinks come first): only its front is settled, from the head on; the settled entries are dropped
    // from the vector once they are as many as the live ones (a move every
    // few iterations, not one per iteration).
    cw_status st = CW_SUCCESS;
    const size_t head = p->ended_head;
    // The entries to wait for: [head, upto_end).
    size_t upto_end = head;
    if (wait)
        while (upto_end < p->ended.size() && p->ended[upto_end].iteration <= upto) upto_end++;
    size_t settled = head;
    for (; settled < p->ended.size(); settled++) {
        cw_pipeline::Ended e = p->ended[settled];
        if (wait && e.iteration > upto) break;
        if (wait && st == CW_SUCCESS) {
            // A host wait on the operator's own stream (cw_stream_synchronize,
            // the usual wait of one frame at a time) that began after the
            // mark shows it finished: no driver call.
            if (cw_stream *own = p->ops[e.op]->internal) (void)mark_synced(e.mark, own);
            // With one executor thread the marks were recorded in the order
            // of their ranks (not the list's: sinks come first in it): the
            // last recorded of these on the same stream (the same lease)
            // finishing means every one recorded before it on that stream
            // did (the stream's order). One wait serves every operator that
            // ran on it (operators without a stream of their own run on
            // their upstream's); a mark recorded before this one tells
            // nothing about it.
            if (p->threads <= 1 && !mark_finished(e.mark)) {
                auto same = [&](const Mark *m) {
                    return mark_stream(m) == mark_stream(e.mark) && mark_serial(m) == mark_serial(e.mark);
                };
                size_t last = settled;
                for (size_t j = settled + 1; j < upto_end; j++)
                    if (same(p->ended[j].mark) && p->ended[j].rank > p->ended[last].rank) last = j;
                if (mark_wait(p->ended[last].mark) == CW_SUCCESS)
                    for (size_t j = settled; j < upto_end; j++)
                        if (same(p->ended[j].mark) && p->ended[j].rank <= p->ended[last].rank)
                            mark_note_finished(p->ended[j].mark);
            }
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
                    for (size_t m = head; m < p->ended.size(); m++)
                        open = open || (p->ended[m].iteration == e.iteration && p->ended[m].op == op->index &&
                                        !mark_finished(p->ended[m].mark));
                    if (open) list_name(names, sizeof names, &len, op->name);
                }
                const cw_error_info &why = last_error();
                char call[64], cu_name[64];
                copy_text(call, sizeof call, why.driver_call);
                copy_text(cu_name, sizeof cu_name, why.cu_name);
                st = fail_from(CW_ERROR_DEVICE_FAULT, why.cu_result, call,
                                "the device faulted (%s) in iteration %llu or before: the work of operators %s was "
                                "not seen finished",
                                cu_name, (unsigned long long)e.iteration, names);
            }
        }
        mark_release(e.mark);
    }
    if (settled >= p->ended.size() - settled) {
        p->ended.erase_front(settled);
        p->ended_head = 0;
    } else {
        p->ended_head = settled;
    }
    return st;
}

cw_status pipeline_run(cw_pipeline *p, uint64_t iterations) {
    int expected = 0;
    if (!p->running.compare_exchange_strong(expected, 1))
        return fail(CW_ERROR_INVALID_STATE, "the pipeline is running already");
    struct Running {
        cw_pipeline *p;
        ~Running() {
            // Destroyed while it ran (cw_pipeline_destroy): the destroy is ours.
            if (p->running.exchange(0) == 2) pipeline_destroy(p);
        }
    } running{p};
    if (!p->checked) CW_TRY(pipeline_check(p));
    if (p->port_memory) CW_TRY(setup_memory(p, p->ctx));  // (found once by pipeline_check)
    // Compute calls make their stream's context current (ensure_current: on
    // this thread, with one executor thread, asked once per run): the
    // caller gets its own back at the end.
    struct Restore {
        cw_pipeline *p;
        ~Restore() { run_end_current(p); }
    } restore{p};
    p->stop.store(0);
    p->failed.store(false, std::memory_order_relaxed);
    p->fail_status = CW_SUCCESS;
    p->fail_msg[0] = '\0';
    p->fail_cu = 0;
    p->fail_call[0] = '\0';
    size_t n = p->ops.size();
    std::atomic<uint64_t> iteration{0};
    cw::Vec<pthread_t> workers;
    WorkerArg warg{p, &iteration};
    unsigned nthreads = p->threads > n ? (unsigned)n : p->threads;
    run_begin_current(p, nthreads <= 1);
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
        // (A destroy may have asked to stop before this run cleared the request.)
        if (p->stop.load(std::memory_order_acquire) || p->running.load(std::memory_order_acquire) == 2) break;
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
            const int64_t wait_begin = p->trace ? now_ns() : 0;
            if (global + 1 >= p->max_in_flight && (st = settle_marks(p, global + 1 - p->max_in_flight, true)))
                break;
            if (p->trace && global + 1 >= p->max_in_flight) trace_host(p, "in-flight wait", wait_begin);
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
    if (p->failed.load(std::memory_order_acquire))
        return fail_from(p->fail_status, p->fail_cu, p->fail_call, "%s", p->fail_msg);
    return CW_SUCCESS;
}

cw_status pipeline_synchronize(cw_pipeline *p) {
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running: wait for cw_pipeline_run");
    for (size_t k = p->topo.size(); k-- > 0;) {  // sinks first (their marks cover the rest)
        cw_operator *op = p->ops[p->topo[k]];
        for (Mark *m : op->call_marks) {
            cw_status st = mark_wait(m);
            if (st != CW_SUCCESS) {
                const cw_error_info &why = last_error();
                char call[64];
                copy_text(call, sizeof call, why.driver_call);
                return fail_from(st, why.cu_result, call,
                                  "operator '%s': its last compute call's work (or earlier work) failed: %s",
                                  op->name, why.message);
            }
        }
    }
    return CW_SUCCESS;
}

void pipeline_destroy_when_idle(cw_pipeline *p) {
    handle_retire(p);  // dead at once, also to a compute call that still has it
    p->stop.store(1, std::memory_order_release);
    int expected = 1;
    if (p->running.compare_exchange_strong(expected, 2)) return;  // the run destroys it as it returns
    pipeline_destroy(p);
}

void pipeline_info(const cw_pipeline *p, cw_pipeline_info *stats) {
    memset(stats, 0, sizeof *stats);
    stats->context = p->ctx;
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
}

}  // namespace flow
}  // namespace cw
