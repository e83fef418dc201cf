/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: traces (cuweave/trace.h). Spans on tracks: GPU spans are
// two timing events on a stream, put on the host's monotonic clock by one
// calibration per context; host spans are two readings of that clock on a
// thread. Exported as Chrome trace-event JSON (trace.cpp).
#pragma once

#include <stdint.h>

#include <atomic>

#include "cuweave/trace.h"
#include "core/context.hpp"

struct cw_stream;

namespace cw {
namespace core {

cw_status trace_create(const cw_trace_settings *settings, cw_trace **out);
// Drops a reference: the creator's (cw_trace_destroy) or an attacher's.
void trace_release(cw_trace *t);
void trace_retain(cw_trace *t);
// Retires the handle (no new calls) and drops the creator's reference.
void trace_destroy(cw_trace *t);

cw_status trace_name_stream(cw_trace *t, const cw_stream *s, const char *name, bool only_if_unnamed);
cw_status trace_name_thread(cw_trace *t, const char *name);

// GPU spans on s: begin records a timing event; end records the end of the
// one begun last on s.
cw_status trace_begin(cw_trace *t, cw_stream *s, const char *name);
cw_status trace_end(cw_trace *t, cw_stream *s);
// Records again, on s now, the begin of the span begun last on s.
cw_status trace_rebegin(cw_trace *t, cw_stream *s);

// Host spans on the calling thread.
cw_status trace_host_begin(cw_trace *t, const char *name);
cw_status trace_host_end(cw_trace *t);
// A host span already measured (now_ns readings), on the calling thread;
// thread_name (may be NULL) names the thread's track when it has no name.
cw_status trace_host_span(cw_trace *t, const char *name, int64_t begin_ns, int64_t end_ns,
                          const char *thread_name = nullptr);

// For layers above: a GPU span already on the host's clock, on the track
// keyed `key` (named `track` when new; keys of streams are their serials,
// below 2^63: others set the top bit).
cw_status trace_gpu_span(cw_trace *t, uint64_t key, const char *track, const char *name, int64_t begin_ns,
                         int64_t end_ns);
// ctx's global timer on the host's clock (host ns = timer ns + offset), once
// set (err_ns: the calibration's error bound).
// Makes the GPU track keyed `key`, named `track`, when it is new (so that it
// comes before tracks made later).
cw_status trace_gpu_track(cw_trace *t, uint64_t key, const char *track);
bool trace_globaltimer(cw_trace *t, const cw_context *ctx, int64_t *offset);
cw_status trace_set_globaltimer(cw_trace *t, cw_context *ctx, int64_t offset, int64_t err_ns);
// A source of spans (a resident loop): its number in this trace (from 0, in
// the order first seen), and in seen[0 .. n) what it noted of each of its
// items (a loop's stages) when it last recorded (0: nothing, or new). A
// record (trace_source, the spans it adds, trace_source_seen) is made with
// trace_record_lock held: one at a time per trace, so that two threads'
// records of one source never both add what neither had noted yet.
void trace_record_lock(cw_trace *t);
void trace_record_unlock(cw_trace *t);
cw_status trace_source(cw_trace *t, const void *key, size_t n, uint32_t *index, uint64_t *seen);
// Notes seen[0 .. n) for source index (a number trace_source gave).
cw_status trace_source_seen(cw_trace *t, uint32_t index, size_t n, const uint64_t *seen);
// Tests (cwi_trace_source_hook): runs in trace_source once seen is read.
extern std::atomic<void (*)(void *)> g_trace_source_hook;
extern std::atomic<void *> g_trace_source_hook_arg;

// A pipeline's compute call on a trace that times calls with CUPTI
// (trace_cupti.cpp): between begin and end, the launches, copies and
// memsets the calling thread makes are the call's (CUPTI's callback notes
// their correlation ids). On events (c->cupti false), and for a call past
// max_spans, begin leaves c->t NULL and the three do nothing. Calls nest
// per thread (end restores the one around).
struct TraceCall {
    bool cupti;         // the trace is on CUPTI (also when the call was not kept: past max_spans)
    cw_trace *t;        // NULL: not a CUPTI call, or one not kept
    uint32_t call;      // from 1
    cw_trace *outer_t;  // the thread's call before this one
    uint32_t outer_call;
};
void trace_call_begin(cw_trace *t, const char *name, uint64_t iteration, TraceCall *c);
// The call asked for stream s: its spans there go on s's track (named
// `name` unless named already).
cw_status trace_call_stream(TraceCall *c, const cw_stream *s, const char *name);
void trace_call_end(TraceCall *c);
// Tests (cwi_cupti_forget): with no trace on CUPTI, closes libcupti so that
// the next trace searches for it again (CW_ERROR_INVALID_STATE otherwise).
cw_status trace_cupti_forget();

void trace_info(const cw_trace *t, cw_trace_info *info);
cw_status trace_write(cw_trace *t, const char *path);
// Test hook: the comparisons the sort of the last trace_write made.
uint64_t trace_sort_comparisons(cw_trace *t);

}  // namespace core
}  // namespace cw
