/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: what a trace holds (trace.cpp, and trace_cupti.cpp for the
// CUPTI path). Private to those two files.
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "base/vec.hpp"
#include "core/trace.hpp"

namespace cw {
namespace core {
namespace tr {

struct Track {
    uint64_t key;  // the stream's serial, or the host thread's id
    bool gpu;
    bool named;
    bool cupti_mapped;      // CUPTI: cupti_ctx and cupti_stream are the stream's ids
    uint32_t dropped_open;  // spans begun past max_spans and not ended
    uint32_t cupti_ctx, cupti_stream;
    char name[64];
};

// What a span is (the file's "cat").
enum SpanKind : uint8_t { kSpanPlain = 0, kSpanKernel = 1, kSpanMemcpy = 2, kSpanMemset = 3 };

struct Span {
    uint32_t track;
    int clock;        // GPU: index of its context's clock; -1: host, or already on the host's clock
    bool open;
    bool resolved;    // host spans, and GPU spans once written
    uint8_t kind;     // SpanKind
    uint8_t copy;     // kSpanMemcpy: CUPTI's copy kind
    uint32_t call;    // CUPTI: the compute call that launched it, from 1 (0: none)
    uint32_t corr;    // CUPTI: the launch's correlation id
    uint64_t bytes;   // kSpanMemcpy, kSpanMemset
    CUevent eb, ee;   // GPU: begin and end events until resolved
    int64_t b, e;     // host monotonic ns
    char name[48];
};

struct GlobalTimer {
    cw_context *ctx;  // retained
    int64_t offset;   // host ns - timer ns
    int64_t err_ns;
};

struct Source {
    const void *key;
    Vec<uint64_t> seen;  // per item, what the source noted when it last recorded
};

// A timing event of a written span, kept for the next span on its context.
struct Spare {
    int clock;
    CUevent ev;
};

struct Clock {
    cw_context *ctx;  // retained
    CUevent ref;
    int64_t host_ns;  // the estimate of ref's GPU time on the host's clock
    int64_t err_ns;   // half the window it was taken in
};

// CUPTI: a compute call of a pipeline the trace follows.
struct Call {
    char name[48];       // the operator's
    uint64_t iteration;
    uint32_t track;      // the track of the stream it asked for (UINT32_MAX: none yet)
};

// CUPTI: a record of a traced call, on the host's clock, waiting in the
// trace's inbox to become a span.
struct InRec {
    uint8_t kind, copy;  // SpanKind; kSpanMemcpy: CUPTI's copy kind
    uint32_t call, corr, ctx, stream;
    int64_t b, e;
    uint64_t bytes;
    char name[48];
};

// CUPTI: correlation ids of launches made inside a compute call -> the call
// (open addressing; key 0 is free: CUPTI's ids start at 1).
class CorrMap {
  public:
    CorrMap() = default;
    CorrMap(const CorrMap &) = delete;
    CorrMap &operator=(const CorrMap &) = delete;
    ~CorrMap() { free(slots_); }
    // false when out of memory (nothing added)
    bool put(uint32_t corr, uint32_t call);
    uint32_t get(uint32_t corr) const;  // 0: none
    size_t size() const { return n_; }

  private:
    uint64_t *slots_ = nullptr;  // corr << 32 | call
    size_t cap_ = 0, n_ = 0;
};

// The spans, in blocks that never move: a write reads the ended ones (which
// nothing changes) without the lock while other threads add spans.
constexpr size_t kBlock = 1024;
class Spans {
  public:
    Spans() = default;
    Spans(const Spans &) = delete;
    Spans &operator=(const Spans &) = delete;
    ~Spans() {
        for (size_t i = 0; i < blocks_.size(); i++) free(blocks_[i]);
    }
    size_t size() const { return n_; }
    Span &operator[](size_t i) { return blocks_[i / kBlock][i % kBlock]; }
    // A new span at the end (its bytes not set), or NULL when out of memory.
    Span *emplace() {
        if (n_ == blocks_.size() * kBlock) {
            Span *b = static_cast<Span *>(malloc(kBlock * sizeof(Span)));
            if (!b || !blocks_.push(b)) {
                free(b);
                return nullptr;
            }
        }
        n_++;
        return &(*this)[n_ - 1];
    }
    void pop() { n_--; }
    // The blocks of the first n spans, copied into *out.
    bool blocks(size_t n, Vec<Span *> *out) const {
        const size_t k = (n + kBlock - 1) / kBlock;
        if (!out->reserve(k)) return false;
        for (size_t i = 0; i < k; i++) out->push(blocks_[i]);
        return true;
    }

  private:
    Vec<Span *> blocks_;
    size_t n_ = 0;
};

struct Lock {
    pthread_mutex_t *m;
    explicit Lock(pthread_mutex_t *mu) : m(mu) { pthread_mutex_lock(m); }
    Lock(const Lock &) = delete;
    ~Lock() { pthread_mutex_unlock(m); }
};

// The track of (key, gpu), made when new (UINT32_MAX when out of memory;
// the trace's lock held).
uint32_t track_of(cw_trace *t, uint64_t key, bool gpu);
// A span already ended on track k (the trace's lock held): NULL when past
// max_spans (counted dropped; *st CW_SUCCESS) or out of memory (*st says so).
Span *closed_span_new(cw_trace *t, uint32_t k, const char *name, int64_t begin_ns, int64_t end_ns, cw_status *st);

}  // namespace tr
}  // namespace core
}  // namespace cw

struct cw_trace {
    uint32_t tag;
    std::atomic<int> refs;
    pthread_mutex_t mu;        // every call's, held briefly
    pthread_mutex_t write_mu;  // one write at a time (taken before mu)
    pthread_mutex_t record_mu; // one record of a source at a time (taken before mu)
    uint32_t max_spans;
    int64_t origin;  // host ns of ts 0
    uint64_t dropped;
    cw::Vec<cw::core::tr::Track> tracks;
    cw::core::tr::Spans spans;
    cw::Vec<cw::core::tr::Clock> clocks;
    cw::Vec<cw::core::tr::GlobalTimer> timers;
    cw::Vec<cw::core::tr::Source> sources;
    cw::Vec<cw::core::tr::Spare> spare;
    uint64_t sort_compares;  // by the last write's sort (a test hook)
    // How the compute calls' GPU work is timed (set at creation, then fixed).
    uint32_t timing;           // CW_TRACE_GPU_EVENTS or CW_TRACE_GPU_CUPTI
    int32_t cupti_result;      // auto fell back: the CUptiResult that refused (-1: no CUPTI)
    char cupti_text[224];      // what the file's otherData says of CUPTI
    // CUPTI (timing CW_TRACE_GPU_CUPTI): the calls (under mu), the launches'
    // correlation ids (under corr_mu: the CUPTI callback's, never held while
    // calling the driver or CUPTI), what was merged.
    cw::Vec<cw::core::tr::Call> calls;
    pthread_mutex_t corr_mu;
    cw::core::tr::CorrMap corr;
    uint64_t corr_dropped;     // under corr_mu: launches not noted (past max_spans, out of memory)
    uint64_t kernel_records;   // under mu: CUPTI records merged
    int64_t cupti_err_ns;      // under mu: the CUPTI clock's calibration error (largest used)
    uint64_t cupti_lost_base;  // CUPTI's lost records when this trace joined
    // CUPTI's buffers deliver records into the inbox (under inbox_mu, never
    // held while calling the driver or CUPTI; taken after mu): the threads
    // that hold mu call the driver, which CUPTI may hold up while it
    // delivers. They become spans when the trace is read (write, info).
    pthread_mutex_t inbox_mu;
    cw::Vec<cw::core::tr::InRec> inbox;
    uint64_t inbox_dropped;    // under inbox_mu: records past max_spans, or out of memory
    int64_t inbox_err_ns;      // under inbox_mu: the calibration error of what came in
};

namespace cw {
namespace core {
namespace tr {

// ---- trace_cupti.cpp: the CUPTI path ------------------------------------
// Sets how t times its compute calls (asked: the settings' gpu_timing):
// AUTO and CUPTI join the process's CUPTI session (the first trace opens
// it); AUTO falls back to events, saying why (t->cupti_result, cupti_text).
// Called at creation, before t is published.
cw_status cupti_join(cw_trace *t, uint32_t asked);
// t (on CUPTI) goes: no record reaches it after this; the last trace
// closes the session.
void cupti_leave(cw_trace *t);
// Before a write of t (on CUPTI): CUPTI's clock calibrated again, its
// completed records flushed into every CUPTI trace.
void cupti_flush(cw_trace *t);
// Records CUPTI lost in this process (its buffers full) so far.
uint64_t cupti_lost();
// The inbox's records become spans (mu held).
void cupti_drain(cw_trace *t);

}  // namespace tr
}  // namespace core
}  // namespace cw
