/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the traces' CUPTI path (trace_impl.hpp, cuweave/trace.h).
//
// One session per process, opened by the first trace on CUPTI and closed
// by the last one: a CUPTI subscriber (which also tells whether another
// tool holds CUPTI), callbacks on the driver's and the runtime's launch,
// copy and memset calls, and the kernel, copy and memset activity records.
// A compute call (trace_call_begin .. trace_call_end) sets a thread-local
// pointer; the callback, on the launching thread, notes the launch's
// correlation id for that call in its trace (corr_mu). The records come in
// CUPTI's buffers (buf_completed, on CUPTI's thread or in a flush): each
// record whose correlation id a trace noted goes, on the host's clock (the
// session's offset, calibrated at each trace's creation and at each write),
// into that trace's inbox; the rest are dropped. The inbox becomes spans
// when the trace is read (cupti_drain: a write, cw_trace_get_info), not in
// CUPTI's callback: a thread holding a trace's mu may be in a driver call
// that CUPTI holds up while it delivers. Locks: g_life (the session's
// opening and closing, the CUPTI calls that may deliver buffers) > g_route
// (the traces records go to) > a trace's corr_mu or inbox_mu; a trace's mu
// > its inbox_mu. No CUPTI or driver call is made with g_route, corr_mu or
// inbox_mu held.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "base/vec.hpp"
#include "core/stream.hpp"
#include "core/trace.hpp"
#include "core/trace_impl.hpp"
#include "driver/cupti.hpp"

namespace cw {
namespace core {

namespace {

using tr::Call;
using tr::InRec;
using tr::Span;

constexpr size_t kBufferBytes = 1u << 20;  // an activity buffer (CUPTI asks for more as it needs)
constexpr int kCalibrations = 5;

std::mutex g_life;
pthread_mutex_t g_route = PTHREAD_MUTEX_INITIALIZER;
Vec<cw_trace *> g_traces;  // under g_route: the live traces on CUPTI
unsigned g_refs;           // under g_life
CUpti_SubscriberHandle g_sub;
const Cupti *g_cupti;      // while a session is open (and after, until cupti_forget)
bool g_kinds[3];           // the activity kinds enabled: kernel, copy, memset
std::atomic<int64_t> g_offset{0};  // host ns - CUPTI ns
std::atomic<int64_t> g_err{0};
std::atomic<uint64_t> g_lost{0};

// The calling thread's compute call (trace_call_begin), read by on_api.
struct Current {
    cw_trace *t;
    uint32_t call;
};
thread_local Current t_current;

const CUpti_ActivityKind kKinds[3] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET};

// ---- CUPTI's callbacks ----------------------------------------------------

void on_api(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata) {
    const Current cur = t_current;
    if (!cur.t) return;
    const CUpti_CallbackData *d = static_cast<const CUpti_CallbackData *>(cbdata);
    if (d->callbackSite != CUPTI_API_ENTER || d->correlationId == 0) return;
    cw_trace *t = cur.t;
    pthread_mutex_lock(&t->corr_mu);
    if (t->corr.size() >= t->max_spans || !t->corr.put(d->correlationId, cur.call)) t->corr_dropped++;
    pthread_mutex_unlock(&t->corr_mu);
}

void buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *p = nullptr;
    if (posix_memalign(&p, 8, kBufferBytes) != 0) p = nullptr;
    *buffer = static_cast<uint8_t *>(p);
    *size = p ? kBufferBytes : 0;  // none: CUPTI drops records (counted lost)
    *max_records = 0;
}

// A record as the trace keeps it.
struct Rec {
    uint8_t kind, copy;
    uint32_t corr, ctx, stream;
    uint64_t start, end, bytes;
    const char *name;  // CUPTI's, valid during the callback
};

bool parse(const CUpti_Activity *a, Rec *r) {
    memset(r, 0, sizeof *r);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const cw_cupti_kernel_head *k = reinterpret_cast<const cw_cupti_kernel_head *>(a);
        *r = Rec{tr::kSpanKernel, 0, k->correlationId, k->contextId, k->streamId, k->start, k->end, 0, k->name};
        return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const cw_cupti_memcpy_head *m = reinterpret_cast<const cw_cupti_memcpy_head *>(a);
        *r = Rec{tr::kSpanMemcpy, m->copyKind, m->correlationId, m->contextId, m->streamId, m->start, m->end,
                 m->bytes, nullptr};
        return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const cw_cupti_memset_head *m = reinterpret_cast<const cw_cupti_memset_head *>(a);
        *r = Rec{tr::kSpanMemset, 0, m->correlationId, m->contextId, m->streamId, m->start, m->end, m->bytes, nullptr};
        return true;
    }
    default: return false;
    }
}

const char *copy_name(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
    }
}

// The track of a record's stream in t (the trace's lock held): the stream a call
// asked for, known by CUPTI's ids, else one of the stream's own.
uint32_t record_track(cw_trace *t, uint32_t ctx, uint32_t stream) {
    for (size_t k = 0; k < t->tracks.size(); k++) {
        const tr::Track &tk = t->tracks[k];
        if (tk.gpu && tk.cupti_mapped && tk.cupti_ctx == ctx && tk.cupti_stream == stream) return (uint32_t)k;
    }
    const uint64_t key = (1ull << 63) | (1ull << 61) | ((uint64_t)ctx << 32) | stream;
    const size_t had = t->tracks.size();
    const uint32_t k = tr::track_of(t, key, true);
    if (k != UINT32_MAX && t->tracks.size() > had) {
        snprintf(t->tracks[k].name, sizeof t->tracks[k].name, "CUDA stream %u (context %u)", stream, ctx);
        t->tracks[k].named = true;
    }
    return k;
}

// Puts into t's inbox the records of recs whose launches t noted (g_route
// held), on the host's clock.
void route(cw_trace *t, const Vec<Rec> &recs, Vec<uint32_t> *calls) {
    calls->clear();
    bool any = false;
    pthread_mutex_lock(&t->corr_mu);
    for (size_t i = 0; i < recs.size(); i++) {
        const uint32_t c = t->corr.get(recs[i].corr);
        any = any || c != 0;
        calls->push(c);  // reserved
    }
    pthread_mutex_unlock(&t->corr_mu);
    if (!any) return;
    const int64_t off = g_offset.load(std::memory_order_relaxed), err = g_err.load(std::memory_order_relaxed);
    pthread_mutex_lock(&t->inbox_mu);
    if (err > t->inbox_err_ns) t->inbox_err_ns = err;
    for (size_t i = 0; i < recs.size(); i++) {
        const uint32_t c = (*calls)[i];
        if (!c) continue;
        const Rec &r = recs[i];
        tr::InRec in;
        in.kind = r.kind;
        in.copy = r.copy;
        in.call = c;
        in.corr = r.corr;
        in.ctx = r.ctx;
        in.stream = r.stream;
        in.b = (int64_t)r.start + off;
        in.e = (int64_t)r.end + off;
        if (in.e < in.b) in.e = in.b;
        in.bytes = r.bytes;
        snprintf(in.name, sizeof in.name, "%s",
                 r.kind == tr::kSpanKernel ? (r.name ? r.name : "kernel")
                                           : r.kind == tr::kSpanMemcpy ? copy_name(r.copy) : "memset");
        if (t->inbox.size() >= t->max_spans || !t->inbox.push(in)) t->inbox_dropped++;
    }
    pthread_mutex_unlock(&t->inbox_mu);
}

void buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t, size_t valid) {
    const Cupti *c = g_cupti;
    Vec<Rec> recs;
    Vec<uint32_t> calls;
    CUpti_Activity *a = nullptr;
    while (c && buffer && c->cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
        Rec r;
        if (!parse(a, &r)) continue;
        if (!recs.push(r)) {
            g_lost.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
    }
    if (c && c->cuptiActivityGetNumDroppedRecords) {
        size_t n = 0;
        if (c->cuptiActivityGetNumDroppedRecords(ctx, stream, &n) == CUPTI_SUCCESS && n)
            g_lost.fetch_add(n, std::memory_order_relaxed);
    }
    if (recs.size() && calls.reserve(recs.size())) {
        pthread_mutex_lock(&g_route);
        for (size_t i = 0; i < g_traces.size(); i++) route(g_traces[i], recs, &calls);
        pthread_mutex_unlock(&g_route);
    } else if (recs.size()) {
        g_lost.fetch_add(recs.size(), std::memory_order_relaxed);
    }
    free(buffer);
}

// ---- the session ----------------------------------------------------------

// CUPTI's clock against the host's: the middle of the shortest of five
// windows around cuptiGetTimestamp.
void calibrate(const Cupti *c) {
    int64_t best = INT64_MAX, off = 0;
    for (int k = 0; k < kCalibrations; k++) {
        uint64_t ts = 0;
        const int64_t t0 = now_ns();
        const CUptiResult r = c->cuptiGetTimestamp(&ts);
        const int64_t t1 = now_ns();
        if (r != CUPTI_SUCCESS || t1 - t0 >= best) continue;
        best = t1 - t0;
        off = t0 + (t1 - t0) / 2 - (int64_t)ts;
    }
    if (best == INT64_MAX) return;  // keeps the last offset
    g_offset.store(off, std::memory_order_relaxed);
    g_err.store((best + 1) / 2, std::memory_order_relaxed);
}

void close_kinds(const Cupti *c) {
    for (int i = 0; i < 3; i++)
        if (g_kinds[i]) {
            (void)c->cuptiActivityDisable(kKinds[i]);
            g_kinds[i] = false;
        }
}

// Opens the session (g_life held, no trace on it). On failure *result is
// the CUptiResult that refused (-1: no CUPTI) and *text says why.
cw_status open_session(int32_t *result, char *text, size_t len) {
    const char *why = "";
    const Cupti *c = nullptr;
    if (ensure_cupti(&c, &why) != CW_SUCCESS) {
        *result = -1;
        snprintf(text, len, "not used: %s", why);
        return fail(CW_ERROR_NOT_SUPPORTED, "not supported: %s", why);
    }
    g_cupti = c;
    char name[48];
    const char *call = "cuptiSubscribe";
    CUptiResult r = c->cuptiSubscribe(&g_sub, on_api, nullptr);
    if (r != CUPTI_SUCCESS) {
        g_sub = nullptr;
        *result = r;
        const char *rs = cupti_result_name(c, r, name, sizeof name);
        const bool held = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        snprintf(text, len, "refused: cuptiSubscribe returned %s%s", rs,
                 held ? " (another CUPTI user holds it: Nsight Systems, Nsight Compute, compute-sanitizer, a profiler)"
                      : "");
        if (held || r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
            return fail(CW_ERROR_NOT_PERMITTED, "not permitted: CUPTI %s", text);
        return fail(CW_ERROR_NOT_SUPPORTED, "not supported: CUPTI %s", text);
    }
    // The callbacks that note launches (an older CUPTI lacks some: those fail alone).
#define CW_CUPTI_ID_(name, id) id,
    static const CUpti_CallbackId driver_ids[] = {CW_CUPTI_DRIVER_CBIDS(CW_CUPTI_ID_)};
    static const CUpti_CallbackId runtime_ids[] = {CW_CUPTI_RUNTIME_CBIDS(CW_CUPTI_ID_)};
#undef CW_CUPTI_ID_
    unsigned enabled = 0;
    for (CUpti_CallbackId id : driver_ids)
        enabled += c->cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS;
    for (CUpti_CallbackId id : runtime_ids)
        enabled += c->cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, id) == CUPTI_SUCCESS;
    r = enabled ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED;
    if (!enabled) call = "cuptiEnableCallback";
    if (r == CUPTI_SUCCESS) {
        call = "cuptiActivityRegisterCallbacks";
        r = c->cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    }
    for (int i = 0; i < 3 && r == CUPTI_SUCCESS; i++) {
        call = "cuptiActivityEnable";
        r = c->cuptiActivityEnable(kKinds[i]);
        g_kinds[i] = r == CUPTI_SUCCESS;
    }
    if (r != CUPTI_SUCCESS) {
        close_kinds(c);
        (void)c->cuptiUnsubscribe(g_sub);
        g_sub = nullptr;
        *result = r;
        snprintf(text, len, "failed: %s returned %s", call, cupti_result_name(c, r, name, sizeof name));
        return fail(CW_ERROR_NOT_SUPPORTED, "not supported: CUPTI %s", text);
    }
    return CW_SUCCESS;
}

// Closes the session (g_life held, no trace on it): what CUPTI holds is
// delivered (to no trace: dropped) and its buffers freed.
void close_session() {
    const Cupti *c = g_cupti;
    (void)c->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    close_kinds(c);
    (void)c->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    (void)c->cuptiUnsubscribe(g_sub);
    g_sub = nullptr;
}

}  // namespace

namespace tr {

bool CorrMap::put(uint32_t corr, uint32_t call) {
    if (corr == 0) return true;
    if (2 * (n_ + 1) > cap_) {
        const size_t cap = cap_ ? 2 * cap_ : 1024;
        uint64_t *slots = static_cast<uint64_t *>(calloc(cap, sizeof(uint64_t)));
        if (!slots) return false;
        for (size_t i = 0; i < cap_; i++) {
            if (!slots_[i]) continue;
            size_t j = (uint32_t)(slots_[i] >> 32) * 2654435761u % cap;
            while (slots[j]) j = (j + 1) % cap;
            slots[j] = slots_[i];
        }
        free(slots_);
        slots_ = slots;
        cap_ = cap;
    }
    size_t j = corr * 2654435761u % cap_;
    while (slots_[j] && (uint32_t)(slots_[j] >> 32) != corr) j = (j + 1) % cap_;
    if (!slots_[j]) n_++;
    slots_[j] = (uint64_t)corr << 32 | call;
    return true;
}

uint32_t CorrMap::get(uint32_t corr) const {
    if (!cap_ || corr == 0) return 0;
    for (size_t j = corr * 2654435761u % cap_; slots_[j]; j = (j + 1) % cap_)
        if ((uint32_t)(slots_[j] >> 32) == corr) return (uint32_t)slots_[j];
    return 0;
}

cw_status cupti_join(cw_trace *t, uint32_t asked) {
    t->timing = CW_TRACE_GPU_EVENTS;
    t->cupti_result = 0;
    if (asked == CW_TRACE_GPU_EVENTS) {
        snprintf(t->cupti_text, sizeof t->cupti_text, "not used: gpu_timing is CW_TRACE_GPU_EVENTS");
        return CW_SUCCESS;
    }
    std::lock_guard<std::mutex> life(g_life);
    if (g_refs == 0) {
        cw_status st;
        if (asked == CW_TRACE_GPU_AUTO) {
            QuietErrors quiet;  // AUTO without CUPTI is no failure: the thread's detail stays as it was
            st = open_session(&t->cupti_result, t->cupti_text, sizeof t->cupti_text);
        } else {
            st = open_session(&t->cupti_result, t->cupti_text, sizeof t->cupti_text);
        }
        if (st != CW_SUCCESS) {
            if (asked == CW_TRACE_GPU_CUPTI) return st;
            log(CW_LOG_DEBUG, "cuweave: a trace on timing events: CUPTI %s", t->cupti_text);  // AUTO: says why
            return CW_SUCCESS;
        }
    }
    pthread_mutex_lock(&g_route);
    const bool added = g_traces.push(t);
    pthread_mutex_unlock(&g_route);
    if (!added) {
        if (g_refs == 0) close_session();
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    g_refs++;
    calibrate(g_cupti);
    t->timing = CW_TRACE_GPU_CUPTI;
    t->cupti_result = 0;
    t->cupti_err_ns = g_err.load(std::memory_order_relaxed);
    t->cupti_lost_base = g_lost.load(std::memory_order_relaxed);
    snprintf(t->cupti_text, sizeof t->cupti_text, "used: %s (CUPTI API version %u)", g_cupti->path,
             g_cupti->version);
    return CW_SUCCESS;
}

void cupti_leave(cw_trace *t) {
    pthread_mutex_lock(&g_route);
    for (size_t i = 0; i < g_traces.size(); i++)
        if (g_traces[i] == t) {
            g_traces[i] = g_traces[g_traces.size() - 1];
            g_traces.pop();
            break;
        }
    pthread_mutex_unlock(&g_route);
    std::lock_guard<std::mutex> life(g_life);
    if (--g_refs == 0) close_session();
}

void cupti_flush(cw_trace *) {
    std::lock_guard<std::mutex> life(g_life);
    if (!g_refs) return;
    calibrate(g_cupti);
    (void)g_cupti->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

uint64_t cupti_lost() { return g_lost.load(std::memory_order_relaxed); }

void cupti_drain(cw_trace *t) {
    pthread_mutex_lock(&t->inbox_mu);
    if (t->inbox_err_ns > t->cupti_err_ns) t->cupti_err_ns = t->inbox_err_ns;
    t->dropped += t->inbox_dropped;
    t->inbox_dropped = 0;
    for (size_t i = 0; i < t->inbox.size(); i++) {
        const InRec &r = t->inbox[i];
        if (r.call > t->calls.size()) continue;
        const uint32_t k = record_track(t, r.ctx, r.stream);
        if (k == UINT32_MAX) {
            t->dropped++;
            continue;
        }
        cw_status st = CW_SUCCESS;
        Span *sp = closed_span_new(t, k, r.name, r.b, r.e, &st);
        if (!sp) {
            if (st != CW_SUCCESS) t->dropped++;  // out of memory (past max_spans is counted already)
            continue;
        }
        sp->kind = r.kind;
        sp->copy = r.copy;
        sp->call = r.call;
        sp->corr = r.corr;
        sp->bytes = r.bytes;
        t->kernel_records++;
    }
    t->inbox.clear();
    pthread_mutex_unlock(&t->inbox_mu);
}

}  // namespace tr

void trace_call_begin(cw_trace *t, const char *name, uint64_t iteration, TraceCall *c) {
    c->t = nullptr;
    c->cupti = t->timing == CW_TRACE_GPU_CUPTI;
    if (!c->cupti) return;
    Call k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", name);
    k.iteration = iteration;
    k.track = UINT32_MAX;
    pthread_mutex_lock(&t->mu);
    const bool kept = t->calls.size() < t->max_spans && t->calls.push(k);
    if (!kept) t->dropped++;  // its launches are not followed
    const uint32_t idx = (uint32_t)t->calls.size();
    pthread_mutex_unlock(&t->mu);
    if (!kept) return;
    c->t = t;
    c->call = idx;
    c->outer_t = t_current.t;
    c->outer_call = t_current.call;
    t_current = Current{t, idx};
}

cw_status trace_call_stream(TraceCall *c, const cw_stream *s, const char *name) {
    cw_trace *t = c->t;
    if (!t) return CW_SUCCESS;
    uint32_t k;
    bool mapped;
    {
        tr::Lock lock(&t->mu);
        k = tr::track_of(t, s->serial, true);
        if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        tr::Track &tk = t->tracks[k];
        if (!tk.named) {
            snprintf(tk.name, sizeof tk.name, "%s", name);
            tk.named = true;
        }
        if (t->calls[c->call - 1].track == UINT32_MAX) t->calls[c->call - 1].track = k;
        mapped = tk.cupti_mapped;
    }
    if (mapped) return CW_SUCCESS;
    // CUPTI's ids of the stream, once per trace and stream (no lock held).
    uint32_t ctx_id = 0, stream_id = 0;
    if (g_cupti->cuptiGetContextId(s->ctx->cu, &ctx_id) != CUPTI_SUCCESS ||
        g_cupti->cuptiGetStreamIdEx(s->ctx->cu, s->cu, 0, &stream_id) != CUPTI_SUCCESS)
        return CW_SUCCESS;  // its records go on a track of their own
    tr::Lock lock(&t->mu);
    tr::Track &tk = t->tracks[k];
    tk.cupti_ctx = ctx_id;
    tk.cupti_stream = stream_id;
    tk.cupti_mapped = true;
    return CW_SUCCESS;
}

void trace_call_end(TraceCall *c) {
    if (!c->t) return;
    t_current = Current{c->outer_t, c->outer_call};
    c->t = nullptr;
}

cw_status trace_cupti_forget() {
    std::lock_guard<std::mutex> life(g_life);
    if (g_refs) return fail(CW_ERROR_INVALID_STATE, "a trace holds CUPTI");
    cupti_forget();
    g_cupti = nullptr;
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
