/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: operators, ports and connections (model.cpp), the
// memory of resident pipelines' ports (memory.cpp), the CPU-driven executor
// (executor.cpp), the stream rules and what a compute call may do through
// its cw_io (io.cpp), and resident pipelines (resident_pipeline.cpp).
//
// A pipeline owns its operators and connections. Each connection has one
// message slot, filled when its producer's compute returns and emptied when
// the iteration ends. Each operator owns one cw_io, reused by every compute
// call (no allocation per call once the vectors have grown).
#pragma once

#include <atomic>
#include <pthread.h>

#include "base/vec.hpp"
#include "core/buffer.hpp"
#include "core/pool.hpp"
#include "core/trace.hpp"
#include "cuweave/flow.h"

struct cw_future;

namespace cw {
namespace flow {

struct Message {
    void *value = nullptr;
    cw_buffer *buffer = nullptr;
    cw_stream *stream = nullptr;
    core::Mark *mark = nullptr;  // the producer's call ended here on `stream` (a reference), or NULL
};

struct Port {
    char name[CW_NAME_MAX + 1];
    // The name pointer a compute call last found this port by (io.cpp): the
    // next call's lookup tries this port first (its name still compared).
    const char *key = nullptr;
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

struct Stage;  // a fused stage (fused.hpp)

struct PortMemory {
    core::IdleRelease rel;
    cw_context *ctx;
    Vec<CUdeviceptr> ptrs;
};
}  // namespace flow
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
    cw::Vec<cw_stream *> touched;  // named and output streams used in the call
    cw::Vec<cw::core::Mark *> waited;    // marks the call's stream waited for (held by their messages)
    cw::Vec<cw_buffer *> allocated;
    cw_stream *trace_stream;     // with a trace on events: the stream the call's GPU span was begun on
    cw::core::TraceCall trace_call;  // with a trace on CUPTI: the call (trace_call_begin .. trace_call_end)
};

struct cw_operator {
    uint32_t tag;
    char name[CW_NAME_MAX + 1];
    cw_operator_ops ops;
    void *user;
    cw_operator_settings settings;
    cw_pipeline *owner;
    int index;
    cw::Vec<cw::flow::Port> ports;
    cw::Vec<int> preds, succs;  // operator indices (distinct)
    // Run state.
    cw_stream *internal;        // leased once, kept until the pipeline goes
    cw_stream_pool *internal_pool;
    bool exhausted_noted;       // the warning that its pool was exhausted was logged
    bool started;               // by cw_pipeline_run (stopped when the run ends)
    bool resident_started;      // by a resident capture (stopped when the pipeline goes)
    std::atomic<uint64_t> ran;  // 1 + the global iteration of its last compute call (0: none)
    cw::Vec<cw::core::Mark *> call_marks;  // where its last compute call ended, per stream it used (references)
    uint64_t call_rank;         // call_marks[j]'s rank is call_rank + j (cw_pipeline::mark_ranks)
    cw_future *waiter;          // wait_inputs
    cw_io io;
    cw::flow::Stage *stage;     // a fused stage (cw_operator_create_stage: no callbacks), or NULL
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
        cw::core::Mark *mark;  // a reference
        int op;          // whose compute call it ended
        uint64_t rank;   // its mark's (mark_ranks): with one executor thread, the order of recording
    };
    cw::Vec<Ended> ended;  // the end of recent iterations, per stream used (sinks first in each)
    size_t ended_head;     // ended[0, ended_head) are settled (moved out in bulk)
    // Ranks given to marks as finish_call records them: with one executor
    // thread, the order they were recorded in (a skipped operator's marks
    // keep the rank of the call that recorded them).
    std::atomic<uint64_t> mark_ranks;
    cw::core::BufferCache *cache;  // buffers of cw_io_alloc, recycled
    cw::Vec<cw_operator *> ops;
    cw::Vec<cw::flow::Connection> conns;
    cw::Vec<int> topo;
    bool checked;
    bool port_memory;  // a port declares memory (found by pipeline_check)
    bool memory_ready;
    cw::flow::PortMemory *memory;
    cw_stream *null_stream;  // wrapper of the legacy stream, made when first needed
    std::atomic<int> running;  // 1: cw_pipeline_run runs it; 2: and it destroys it as it returns
    std::atomic<int> stop;
    std::atomic<uint64_t> iterations, computes, skipped, fallbacks, peer_copies;
    // Resident pipelines.
    cw_resident *resident;
    uint64_t resident_copy;
    // Fused pipelines (fused_pipeline.cpp): the table of port addresses the
    // stages read (in the port memory's allocations), and its size in words.
    CUdeviceptr stage_table;
    size_t stage_table_words;
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
    int fail_cu;           // the failing driver call's CUresult (0: none), from the detail
    char fail_call[64];    // and its name, passed on in cw_pipeline_run's detail
    cw_trace *trace;       // cw_pipeline_set_trace (retained), or NULL: no cost but this test
    // The current context, learned once per run and thread (io.cpp's
    // ensure_current): the run's number, and on the caller's thread (one
    // executor thread) the context current when it was first asked, put
    // back as the run returns when a compute call's stream needed another.
    uint64_t run_id;
    bool run_single;     // one executor thread: compute calls run on the caller's
    bool run_prev_set;   // run_prev was read
    bool run_switched;   // cuweave made another context current on the caller's thread
    CUcontext run_prev;
};


namespace cw {
namespace flow {

// A cw_io is not in the handle registry (each operator owns one, reused by
// every call): it is recognised by its tag, and only inside its call.
inline bool io_ok(const cw_io *io) { return io && io->tag == HandleKind<cw_io>::tag; }

// ---- model.cpp ----
// 1..63 bytes of [A-Za-z0-9_.-]; *why says what is wrong.
bool name_ok(const char *name, const char **why);
int find_port(const cw_operator *op, const char *name);
// The same name (what strcmp == 0 says, inline: port names are short).
inline bool same_name(const char *a, const char *b) {
    for (;; a++, b++) {
        if (*a != *b) return false;
        if (!*a) return true;
    }
}
cw_operator *find_op(const cw_pipeline *p, const char *name);
// Appends 'name' to a list of names in buf (cap bytes, *len used, a ", "
// before all but the first); stops adding once less than a name's room is
// left, so a long list is cut, never overflowed.
void list_name(char *buf, size_t cap, size_t *len, const char *name);
// Settings are checked by the caller.
cw_status operator_create(const char *name, const cw_operator_ops *ops, void *user, const cw_operator_settings *s,
                          cw_operator **out);
void operator_free(cw_operator *op);
cw_status add_port(cw_operator *op, const char *name, const cw_port_settings *settings, bool input);
cw_status pipeline_create(cw_context *ctx, const cw_pipeline_settings *s, cw_pipeline **out);
// A pipeline that is not running, its operators with it.
void pipeline_destroy(cw_pipeline *p);
cw_status pipeline_add(cw_pipeline *p, cw_operator *op);
cw_status pipeline_connect(cw_pipeline *p, const char *from_op, const char *from_port, const char *to_op,
                           const char *to_port);
// Required inputs connected, no cycle, the port-memory rules; the order to run.
cw_status pipeline_check(cw_pipeline *p);
cw_status pipeline_port_ptr(const cw_pipeline *p, const char *op, const char *port, CUdeviceptr *dptr);

// ---- memory.cpp ----
bool any_port_memory(const cw_pipeline *p);
// The port-memory rules of cw_pipeline_make_resident, checked.
cw_status check_memory(cw_pipeline *p);
// Allocates the port memory (once): on ctx (the pipeline's, or a loop's).
cw_status setup_memory(cw_pipeline *p, cw_context *ctx);
// Frees it when no persistent work runs.
void release_memory(PortMemory *m);

// ---- executor.cpp ----
void io_reset(cw_io *io, cw_operator *op, uint64_t iteration);
void record_failure(cw_pipeline *p, cw_operator *op, const char *phase, cw_status st);
void drop_marks(Vec<core::Mark *> &v);
void end_iteration(cw_pipeline *p);
// Waits (on the host) for the ends of iterations up to `upto`, or drops
// them all without waiting (wait false).
cw_status settle_marks(cw_pipeline *p, uint64_t upto, bool wait);
cw_status pipeline_run(cw_pipeline *p, uint64_t iterations);
cw_status pipeline_synchronize(cw_pipeline *p);
void pipeline_info(const cw_pipeline *p, cw_pipeline_info *info);
// Destroys p now or, while cw_pipeline_run runs it, asks that run to stop
// and leaves the destroy to it (as it returns). The handle is dead at once.
void pipeline_destroy_when_idle(cw_pipeline *p);

// ---- io.cpp ----
// Makes cu current on this thread for a compute call of p's run in
// progress: the driver is asked once per run and thread (what cuweave made
// current stays so: a compute callback that makes another context current
// puts back the one it found before it returns); on the caller's thread
// the context it had is noted, to be put back (run_end_current).
cw_status ensure_current(cw_pipeline *p, CUcontext cu);
// A new run's number (ensure_current forgets what it learned in others).
void run_begin_current(cw_pipeline *p, bool single);
// Puts back the caller's context when a compute call's needed another.
void run_end_current(cw_pipeline *p);
// The pool an operator's streams come from, and so its device.
cw_stream_pool *op_pool(const cw_operator *op);
cw_status io_receive(cw_io *io, const char *port, cw_message *msg);
cw_status io_receive_many(cw_io *io, const char *port, cw_message *msgs, size_t cap, size_t *count);
cw_status io_receive_stream(cw_io *io, const char *port, cw_stream **out);
cw_status io_stream(cw_io *io, const char *name, cw_stream **out);
cw_status io_set_output_stream(cw_io *io, const char *port, cw_stream *s);
cw_status io_emit(cw_io *io, const char *port, void *value, cw_buffer *buffer);
cw_status io_alloc(cw_io *io, size_t bytes, cw_buffer **out);  // (cw_io_alloc's out comes first)
cw_status io_port_ptr(cw_io *io, const char *port, CUdeviceptr *dptr);

// ---- resident_pipeline.cpp ----
// The pipeline becomes r's workload: each iteration captures every
// operator on a stream of its own, forked from the loop's.
cw_status make_resident(cw_pipeline *p, cw_resident *r);

// ---- pipeline_trace.cpp: the hooks of cw_pipeline_set_trace -----------------
cw_status pipeline_set_trace(cw_pipeline *p, cw_trace *t);
void pipeline_drop_trace(cw_pipeline *p);
// The call's GPU span begins on s (once per call); ends after the compute call.
// A compute call begins (the trace attached: CUPTI follows its launches).
void trace_call_begin(cw_io *io);
cw_status trace_call_stream(cw_io *io, cw_stream *s);
cw_status trace_call_end(cw_io *io);
// A host span on this thread from begin_ns to now.
void trace_host(cw_pipeline *p, const char *name, int64_t begin_ns);

}  // namespace flow
}  // namespace cw

// Rejects an io that is not a compute call's, or used outside its call.
#define CW_CHECK_IO(io)                                                                                 \
    do {                                                                                                \
        CW_CHECK_ARG((io) != NULL);                                                                     \
        if (__builtin_expect(!::cw::flow::io_ok(io), 0))                                                \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_io of a compute call", #io); \
        if (__builtin_expect(!(io)->active, 0))                                                         \
            return ::cw::fail(CW_ERROR_INVALID_STATE, "%s is used outside the compute call it was given to", #io); \
    } while (0)
