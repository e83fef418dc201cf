/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: events. Every event the library records comes from here:
//
// - the context's pool of timing-disabled events (one per stream for
//   ordering, one per future, one per mark), handed back when their user goes;
// - marks: one event recorded on one stream, shared by every buffer use and
//   message that needs "the work on that stream up to here" (the flow layer
//   records one per stream per compute call, however many buffers it touched);
// - timers: two timing events around work on a stream.
#pragma once

#include <atomic>
#include <stdint.h>

#include "core/context.hpp"

struct cw_stream;

struct cw_timer {
    uint32_t tag;
    cw_context *ctx;  // retained
    CUevent start, stop;
    bool started, stopped;
};

namespace cw {
namespace core {

// A timing-disabled event from the context's pool (created when empty), and
// giving one back (destroyed when the pool cannot grow).
cw_status event_get(cw_context *ctx, CUevent *ev);
void event_put(cw_context *ctx, CUevent ev);

// ---- marks ----
struct Mark {
    std::atomic<int> refs;
    std::atomic<bool> done;  // seen finished
    // Marks this one is known to come after on the GPU (its stream waited
    // for them before it was recorded): finished when it is. References,
    // dropped when it is seen finished or goes.
    Mark *covers[8];
    int ncovers;
    cw_context *ctx;  // the event's pool (retained while the mark is in use)
    CUevent ev;
    const cw_stream *s;  // compared only, within a compute call (the stream is alive)
    uint64_t serial;     // the stream's serial: compared across time
    uint64_t syncs;      // the stream's host waits begun when it was recorded (mark_synced)
    // Its place among the marks of its stream (cw_stream::records): its
    // number, taken once its cuEventRecord returned, and the count seen
    // before that call began (every mark numbered up to it was enqueued
    // before this one; marks recorded at once by two threads are in no
    // known order). mark_follows.
    uint64_t number, after;
    Mark *next;          // in the pool's free list
};

// Records an event on s (pooled, from s's context). One reference for the caller.
cw_status mark_record(cw_stream *s, Mark **out);
// (The accessors used on every compute call are inline.)
inline void mark_retain(Mark *m) { m->refs.fetch_add(1, std::memory_order_relaxed); }
void mark_last_release(Mark *m);  // mark_release's last reference: to the free list
inline void mark_release(Mark *m) {
    if (m && m->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) mark_last_release(m);
}
inline CUevent mark_event(const Mark *m) { return m->ev; }
// True once the work before m has finished (asks the driver until it has,
// remembers it after). mark_wait blocks until then.
bool mark_done(Mark *m);
// True when m is known finished (no driver call).
inline bool mark_finished(const Mark *m) { return m->done.load(std::memory_order_acquire); }
// True when m is known finished, or was recorded on s (alive: the caller
// holds it) before a host wait on s began that has ended in success
// (stream_synchronize): then noted finished, with what it covers. No driver call.
bool mark_synced(Mark *m, const cw_stream *s);
cw_status mark_wait(Mark *m);
// m is known finished (the caller saw a later mark on its stream finish):
// noted, with what it covers. No driver call.
void mark_note_finished(Mark *m);
// m was recorded on a stream that had waited for `earlier`: when m is seen
// finished, so is earlier (no driver call asks about it). Only before m is
// shared with another thread; at most 8 (more are simply not noted).
void mark_cover(Mark *m, Mark *earlier);
// The stream m was recorded on (compare only: it may be gone), and that
// stream's serial (unique in the process, unlike its address).
inline const cw_stream *mark_stream(const Mark *m) { return m->s; }
// Marks allocated since the process started (a mark's host memory is reused
// from its context's free list: the count grows only with the most marks
// alive at once; test_flow_cpu asserts no growth per iteration).
unsigned long marks_allocated();
inline uint64_t mark_serial(const Mark *m) { return m->serial; }
// True when m was recorded on the same stream as `earlier` and after it:
// earlier's cuEventRecord had returned before m's began, so m finishing
// means earlier did (the stream's order). False for marks of two threads
// recorded at once, whose order on the stream is not known.
inline bool mark_follows(const Mark *m, const Mark *earlier) {
    return m->serial == earlier->serial && earlier->number <= m->after;
}
// Makes the release stream rel wait for m (or, when it cannot, the host),
// then drops the caller's reference. False when neither could wait (a
// faulted device).
bool mark_fold(cw_stream *rel, Mark *m);

// ---- timers ----
cw_status timer_create(cw_context *ctx, cw_timer **out);
void timer_destroy(cw_timer *t);
// Records the start (or stop) event on s, which must be on the timer's context.
cw_status timer_record(cw_timer *t, cw_stream *s, bool start);
// Waits for the stop event; the milliseconds between start and stop.
cw_status timer_elapsed_ms(cw_timer *t, float *ms);

}  // namespace core
}  // namespace cw
