/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: traces (trace.hpp). Every call takes the trace's lock; GPU
// spans hold their two timing events until cw_trace_write resolves them to
// host nanoseconds: elapsed time from the context's calibration event, plus
// the host time that event was estimated at. The write waits for those
// events, sorts and writes without the lock (write_trace).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "base/sync.hpp"
#include "base/vec.hpp"
#include "core/handle.hpp"
#include "core/stream.hpp"
#include "core/trace.hpp"
#include "core/trace_impl.hpp"

namespace {

constexpr uint32_t kDefaultMaxSpans = 1u << 20;
constexpr int kCalibrations = 5;

uint64_t thread_key() {
    static thread_local uint64_t tid = 0;
    if (!tid) tid = (uint64_t)syscall(SYS_gettid);
    return tid;
}

}  // namespace

namespace cw {
namespace core {

using tr::Call;
using tr::Clock;
using tr::GlobalTimer;
using tr::kBlock;
using tr::Source;
using tr::Span;
using tr::Spans;
using tr::Spare;
using tr::Track;
using tr::track_of;

namespace tr {
// (trace_impl.hpp)
uint32_t track_of(cw_trace *t, uint64_t key, bool gpu) {
    for (size_t i = 0; i < t->tracks.size(); i++)
        if (t->tracks[i].key == key && t->tracks[i].gpu == gpu) return (uint32_t)i;
    Track k;
    memset(&k, 0, sizeof k);
    k.key = key;
    k.gpu = gpu;
    snprintf(k.name, sizeof k.name, gpu ? "stream %llu" : "thread %llu", (unsigned long long)key);
    if (!t->tracks.push(k)) return UINT32_MAX;
    return (uint32_t)(t->tracks.size() - 1);
}

Span *span_new(cw_trace *t, uint32_t k, const char *name, cw_status *st);

Span *closed_span_new(cw_trace *t, uint32_t k, const char *name, int64_t begin_ns, int64_t end_ns, cw_status *st) {
    Span *sp = span_new(t, k, name, st);
    if (sp) {
        sp->b = begin_ns;
        sp->e = end_ns;
        sp->open = false;
        sp->resolved = true;
    } else if (*st == CW_SUCCESS) {
        t->tracks[k].dropped_open--;  // dropped: nothing is left open
    }
    return sp;
}
}  // namespace tr

using tr::span_new;

namespace {

struct Lock {
    pthread_mutex_t *m;
    explicit Lock(cw_trace *t) : m(&t->mu) { pthread_mutex_lock(m); }
    ~Lock() { pthread_mutex_unlock(m); }
};

cw_status elapsed_ms(CUevent a, CUevent b, float *ms) {
    if (drv().cuEventElapsedTime)
        CW_CU(cuEventElapsedTime, (ms, a, b));
    else if (drv().cuEventElapsedTime_v1)
        CW_CU(cuEventElapsedTime_v1, (ms, a, b));
    else
        return fail(CW_ERROR_NOT_SUPPORTED, "the driver has no cuEventElapsedTime");
    return CW_SUCCESS;
}

// The clock of ctx: calibrated now when new. The best of kCalibrations
// records of an event on a private stream, each waited for: the event's GPU
// time lies between the host's readings before the record and after the
// wait, estimated at the middle.
cw_status clock_of(cw_trace *t, cw_context *ctx, int *idx) {
    for (size_t i = 0; i < t->clocks.size(); i++)
        if (t->clocks[i].ctx == ctx) {
            *idx = (int)i;
            return CW_SUCCESS;
        }
    cw_stream *tmp = nullptr;  // a partition's stream on a green context
    CW_TRY(stream_new(ctx, CW_STREAM_NON_BLOCKING, 0, true, &tmp));
    CurrentGuard guard;
    cw_status entered = guard.enter(ctx->cu);
    if (entered != CW_SUCCESS) {
        stream_free(tmp);
        return entered;
    }
    Clock c{ctx, nullptr, 0, INT64_MAX};
    cw_status st = CW_SUCCESS;
    for (int k = 0; k < kCalibrations && st == CW_SUCCESS; k++) {
        CUevent ev = nullptr;
        CUresult r = drv().cuEventCreate(&ev, CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS) {
            st = fail_cu(r, "cuEventCreate");
            break;
        }
        const int64_t t0 = now_ns();
        r = drv().cuEventRecord(ev, tmp->cu);
        if (r == CUDA_SUCCESS) r = drv().cuEventSynchronize(ev);
        const int64_t t1 = now_ns();
        if (r != CUDA_SUCCESS) {
            st = fail_cu(r, "cuEventSynchronize");
            drv().cuEventDestroy(ev);
            break;
        }
        if ((t1 - t0) / 2 < c.err_ns) {
            if (c.ref) drv().cuEventDestroy(c.ref);
            c.ref = ev;
            c.err_ns = (t1 - t0 + 1) / 2;
            c.host_ns = t0 + (t1 - t0) / 2;
        } else {
            drv().cuEventDestroy(ev);
        }
    }
    stream_free(tmp);
    if (st == CW_SUCCESS && !t->clocks.push(c)) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (st != CW_SUCCESS) {
        if (c.ref) drv().cuEventDestroy(c.ref);
        return st;
    }
    context_retain(ctx);
    *idx = (int)(t->clocks.size() - 1);
    return guard.leave();
}

// The span begun last and not ended on track k (-1: none).
long last_open(cw_trace *t, uint32_t k) {
    for (size_t i = t->spans.size(); i-- > 0;)
        if (t->spans[i].open && t->spans[i].track == k) return (long)i;
    return -1;
}

}  // namespace

namespace tr {
// A span begun on track k (host: at b); false when past max_spans.
Span *span_new(cw_trace *t, uint32_t k, const char *name, cw_status *st) {
    *st = CW_SUCCESS;
    if (t->spans.size() >= t->max_spans) {
        t->dropped++;
        t->tracks[k].dropped_open++;
        return nullptr;
    }
    Span *sp = t->spans.emplace();
    if (!sp) {
        *st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        return nullptr;
    }
    memset(sp, 0, sizeof *sp);
    sp->track = k;
    sp->clock = -1;
    sp->open = true;
    snprintf(sp->name, sizeof sp->name, "%s", name);
    return sp;
}
}  // namespace tr

namespace {

// A timing event of clock's context (a spare one, else a new one) recorded on s.
cw_status record_new(cw_trace *t, int clock, const cw_stream *s, CUevent *ev) {
    *ev = nullptr;
    for (size_t i = t->spare.size(); i-- > 0;)
        if (t->spare[i].clock == clock) {
            *ev = t->spare[i].ev;
            t->spare[i] = t->spare[t->spare.size() - 1];
            t->spare.pop();
            break;
        }
    if (!*ev) {
        CurrentGuard guard;
        CW_TRY(guard.enter(s->ctx->cu));
        CW_CU(cuEventCreate, (ev, CU_EVENT_DEFAULT));
        CW_TRY(guard.leave());
    }
    cw_status st = on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(*ev, s->cu); });
    if (st != CW_SUCCESS) {
        drv().cuEventDestroy(*ev);
        *ev = nullptr;
    }
    return st;
}

// A written span's event: kept for the next span of its context.
void spare_event(cw_trace *t, int clock, CUevent ev) {
    if (!t->spare.push(Spare{clock, ev})) drv().cuEventDestroy(ev);
}

void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

// s as a JSON string (quoted, escaped) into out (len bytes, truncated).
void json_string(const char *s, char *out, size_t len) {
    size_t at = 0;
    auto put = [&](char c) {
        if (at + 2 < len) out[at++] = c;
    };
    put('"');
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            if (at + 3 >= len) break;  // the pair whole or not at all
            put('\\');
            put((char)c);
        } else if (c >= 0x20) {
            put((char)c);
        }
    }
    if (at + 1 < len) out[at++] = '"';
    out[at < len ? at : len - 1] = 0;
}

// An ended GPU span a write resolves: copied under the lock, waited for
// without it (nothing else uses an ended span's events), put back under it.
struct Pending {
    uint32_t span;
    CUcontext cu;
    CUevent ref, eb, ee;  // the clock's reference event (kept until the trace goes), the span's
    int64_t host_ns;      // the clock's
    int64_t b, e;         // resolved: host ns
};

// The ended GPU spans not yet resolved (the lock held).
cw_status pending_of(cw_trace *t, Vec<Pending> *out) {
    for (size_t i = 0; i < t->spans.size(); i++) {
        const Span &sp = t->spans[i];
        if (sp.open || sp.resolved) continue;
        const Clock &c = t->clocks[(size_t)sp.clock];
        if (!out->push(Pending{(uint32_t)i, c.ctx->cu, c.ref, sp.eb, sp.ee, c.host_ns, 0, 0}))
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    return CW_SUCCESS;
}

// Waits for p's end event and puts the span on the host's clock (no lock).
cw_status resolve(Pending *p) {
    CurrentGuard guard;
    CW_TRY(guard.enter(p->cu));
    CW_CU(cuEventSynchronize, (p->ee));
    float mb = 0, me = 0;
    CW_TRY(elapsed_ms(p->ref, p->eb, &mb));
    CW_TRY(elapsed_ms(p->ref, p->ee, &me));
    p->b = p->host_ns + (int64_t)((double)mb * 1e6);
    p->e = p->host_ns + (int64_t)((double)me * 1e6);
    if (p->e < p->b) p->e = p->b;
    return guard.leave();
}

// The first n of pend resolved: their spans take the times, their events
// are kept for the next spans (the lock held).
void resolved(cw_trace *t, const Vec<Pending> &pend, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Span &sp = t->spans[pend[i].span];
        sp.b = pend[i].b;
        sp.e = pend[i].e;
        spare_event(t, sp.clock, sp.eb);
        spare_event(t, sp.clock, sp.ee);
        sp.eb = sp.ee = nullptr;
        sp.resolved = true;
    }
}

// What a write exports, taken under the lock: the spans ended and resolved
// (their indices; those spans no longer change), the blocks holding them,
// the tracks as named then, and the time of ts 0.
struct Snapshot {
    Vec<uint32_t> order;
    Vec<Span *> blocks;
    Vec<Track> tracks;
    Vec<Call> calls;   // CUPTI: the calls, for the spans' args
    Vec<Span> parents; // CUPTI: per call and track, a span around its records (index base + i)
    uint32_t base;     // the spans' count when taken
    int64_t origin;
    char other[400];   // otherData's contents
    const Span &span(uint32_t i) const { return i < base ? blocks[i / kBlock][i % kBlock] : parents[i - base]; }
};

// CUPTI: per (call, track) of the snapshot's records, a span named after
// the call's operator from the first one's begin to the last one's end.
cw_status add_parents(Snapshot *sn) {
    struct Key {
        uint32_t call, track;
        int64_t b, e;
    };
    Vec<Key> keys;
    for (size_t i = 0; i < sn->order.size(); i++) {
        const Span &sp = sn->span(sn->order[i]);
        if (sp.kind == tr::kSpanPlain || sp.call == 0 || sp.call > sn->calls.size()) continue;
        if (!keys.push(Key{sp.call, sp.track, sp.b, sp.e})) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    std::sort(keys.begin(), keys.end(), [](const Key &x, const Key &y) {
        return x.call != y.call ? x.call < y.call : x.track < y.track;
    });
    for (size_t i = 0; i < keys.size();) {
        Span p;
        memset(&p, 0, sizeof p);
        p.track = keys[i].track;
        p.clock = -1;
        p.resolved = true;
        p.call = keys[i].call;
        p.b = keys[i].b;
        p.e = keys[i].e;
        size_t j = i + 1;
        for (; j < keys.size() && keys[j].call == keys[i].call && keys[j].track == keys[i].track; j++) {
            if (keys[j].b < p.b) p.b = keys[j].b;
            if (keys[j].e > p.e) p.e = keys[j].e;
        }
        snprintf(p.name, sizeof p.name, "%s", sn->calls[p.call - 1].name);
        if (!sn->parents.push(p) || !sn->order.push(sn->base + (uint32_t)(sn->parents.size() - 1)))
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        i = j;
    }
    return CW_SUCCESS;
}

cw_status snapshot_of(cw_trace *t, Snapshot *out) {
    const size_t n = t->spans.size();
    if (!out->order.reserve(n) || !t->spans.blocks(n, &out->blocks) || !out->tracks.reserve(t->tracks.size()) ||
        !out->calls.reserve(t->calls.size()))
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    out->base = (uint32_t)n;
    // ts 0 is the trace's creation, or the earliest span when one began
    // before it (a resident loop's stages that ran before the trace was made).
    out->origin = t->origin;
    for (size_t i = 0; i < n; i++) {
        const Span &sp = t->spans[i];
        if (sp.open || !sp.resolved) continue;  // a GPU span ended since the write began: the next one's
        out->order.push((uint32_t)i);
        if (sp.b < out->origin) out->origin = sp.b;
    }
    for (size_t k = 0; k < t->tracks.size(); k++) out->tracks.push(t->tracks[k]);
    for (size_t k = 0; k < t->calls.size(); k++) out->calls.push(t->calls[k]);
    const int64_t err = t->cupti_err_ns;
    snprintf(out->other, sizeof out->other, "\"gpu_timing\":\"%s\",\"cupti\":",
             t->timing == CW_TRACE_GPU_CUPTI ? "cupti" : "events");
    const size_t at = strlen(out->other);
    json_string(t->cupti_text, out->other + at, sizeof out->other - at);
    if (t->timing == CW_TRACE_GPU_CUPTI) {
        const size_t at2 = strlen(out->other);
        snprintf(out->other + at2, sizeof out->other - at2, ",\"cupti_calibration_error_ns\":%lld", (long long)err);
    }
    return CW_SUCCESS;
}

// Puts the snapshot's spans by begin, the longer first at equal begins (a
// parent before its children, as chrome://tracing wants), then in the order
// they were made; counts the comparisons.
void sort_spans(Snapshot *sn, uint64_t *compares) {
    struct Cmp {
        const Snapshot *sn;
        uint64_t *n;
        bool operator()(uint32_t a, uint32_t b) const {
            ++*n;
            const Span &x = sn->span(a), &y = sn->span(b);
            if (x.b != y.b) return x.b < y.b;
            if (x.e != y.e) return x.e > y.e;
            return a < b;
        }
    };
    std::sort(sn->order.begin(), sn->order.end(), Cmp{sn, compares});
}

cw_status write_file(const Snapshot &sn, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{%s},\"traceEvents\":[\n", sn.other);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"host threads\"}},\n", f);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,\"args\":{\"name\":\"GPU streams\"}}", f);
    for (size_t k = 0; k < sn.tracks.size(); k++) {
        const Track &tr = sn.tracks[k];
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,\"args\":{\"name\":",
                tr.gpu ? 2 : 1, k + 1);
        put_json_string(f, tr.name);
        fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,\"args\":"
                   "{\"sort_index\":%zu}}",
                tr.gpu ? 2 : 1, k + 1, k + 1);
    }
    for (size_t i = 0; i < sn.order.size(); i++) {
        const Span &sp = sn.span(sn.order[i]);
        const bool gpu = sn.tracks[sp.track].gpu;
        static const char *const cats[] = {"gpu", "kernel", "memcpy", "memset"};
        fputs(",\n{\"name\":", f);
        put_json_string(f, sp.name);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f",
                gpu ? cats[sp.kind < 4 ? sp.kind : 0] : "host", gpu ? 2 : 1, sp.track + 1,
                (double)(sp.b - sn.origin) / 1e3, (double)(sp.e - sp.b) / 1e3);
        if (sp.call && sp.call <= sn.calls.size()) {
            const Call &c = sn.calls[sp.call - 1];
            fputs(",\"args\":{", f);
            if (sp.kind != tr::kSpanPlain) {
                fputs("\"operator\":", f);
                put_json_string(f, c.name);
                fprintf(f, ",\"correlation\":%u,", sp.corr);
                if (sp.kind != tr::kSpanKernel) fprintf(f, "\"bytes\":%llu,", (unsigned long long)sp.bytes);
            }
            fprintf(f, "\"iteration\":%llu}", (unsigned long long)c.iteration);
        }
        fputc('}', f);
    }
    fputs("\n]}\n", f);
    const bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: cannot write '%s': %s", path, strerror(errno));
    return CW_SUCCESS;
}

// The write, with write_mu held: the lock is taken twice, briefly (a pass
// over the spans each time); the GPU waits, the sort and the file are
// outside it. A span ended before the write began is in the file; one
// ending meanwhile is in it or in the next write's, once.
cw_status write_trace(cw_trace *t, const char *path) {
    if (t->timing == CW_TRACE_GPU_CUPTI) tr::cupti_flush(t);  // the records of completed work, into the spans
    Vec<Pending> pend;
    {
        Lock lock(t);
        if (t->timing == CW_TRACE_GPU_CUPTI) tr::cupti_drain(t);
        CW_TRY(pending_of(t, &pend));
    }
    size_t done = 0;
    cw_status st = CW_SUCCESS;
    while (done < pend.size() && (st = resolve(&pend[done])) == CW_SUCCESS) done++;
    Snapshot sn;
    {
        Lock lock(t);
        resolved(t, pend, done);
        CW_TRY(st);
        CW_TRY(snapshot_of(t, &sn));
    }
    CW_TRY(add_parents(&sn));
    uint64_t compares = 0;
    sort_spans(&sn, &compares);
    {
        Lock lock(t);
        t->sort_compares = compares;
    }
    return write_file(sn, path);
}

}  // namespace

cw_status trace_create(const cw_trace_settings *settings, cw_trace **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_trace *t = static_cast<cw_trace *>(calloc(1, sizeof(cw_trace)));
    if (!t) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    new (t) cw_trace();
    t->refs.store(1);
    pthread_mutex_init(&t->mu, nullptr);
    pthread_mutex_init(&t->write_mu, nullptr);
    pthread_mutex_init(&t->record_mu, nullptr);
    pthread_mutex_init(&t->corr_mu, nullptr);
    pthread_mutex_init(&t->inbox_mu, nullptr);
    t->max_spans = settings && settings->max_spans ? settings->max_spans : kDefaultMaxSpans;
    t->origin = now_ns();
    const cw_status st = tr::cupti_join(t, settings ? settings->gpu_timing : (uint32_t)CW_TRACE_GPU_AUTO);
    if (st != CW_SUCCESS) {
        pthread_mutex_destroy(&t->mu);
        pthread_mutex_destroy(&t->write_mu);
        pthread_mutex_destroy(&t->record_mu);
        pthread_mutex_destroy(&t->corr_mu);
        pthread_mutex_destroy(&t->inbox_mu);
        t->~cw_trace();
        free(t);
        return st;
    }
    room.publish(t);
    *out = t;
    return CW_SUCCESS;
}

void trace_retain(cw_trace *t) { t->refs.fetch_add(1, std::memory_order_relaxed); }

void trace_release(cw_trace *t) {
    if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (t->timing == CW_TRACE_GPU_CUPTI) tr::cupti_leave(t);  // no CUPTI record reaches t after this
    for (size_t i = 0; i < t->spans.size(); i++) {
        Span &sp = t->spans[i];
        if (sp.eb) drv().cuEventDestroy(sp.eb);
        if (sp.ee) drv().cuEventDestroy(sp.ee);
    }
    for (size_t i = 0; i < t->spare.size(); i++) drv().cuEventDestroy(t->spare[i].ev);
    for (size_t i = 0; i < t->clocks.size(); i++) {
        drv().cuEventDestroy(t->clocks[i].ref);
        context_release(t->clocks[i].ctx);
    }
    for (size_t i = 0; i < t->timers.size(); i++) context_release(t->timers[i].ctx);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->write_mu);
    pthread_mutex_destroy(&t->record_mu);
    pthread_mutex_destroy(&t->corr_mu);
    pthread_mutex_destroy(&t->inbox_mu);
    t->~cw_trace();
    handle_free(t);
}

void trace_destroy(cw_trace *t) {
    handle_retire(t);
    trace_release(t);
}

cw_status trace_name_stream(cw_trace *t, const cw_stream *s, const char *name, bool only_if_unnamed) {
    Lock lock(t);
    const uint32_t k = track_of(t, s->serial, true);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    Track &tr = t->tracks[k];
    if (only_if_unnamed && tr.named) return CW_SUCCESS;
    snprintf(tr.name, sizeof tr.name, "%s", name);
    tr.named = true;
    return CW_SUCCESS;
}

cw_status trace_name_thread(cw_trace *t, const char *name) {
    Lock lock(t);
    const uint32_t k = track_of(t, thread_key(), false);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    snprintf(t->tracks[k].name, sizeof t->tracks[k].name, "%s", name);
    t->tracks[k].named = true;
    return CW_SUCCESS;
}

cw_status trace_begin(cw_trace *t, cw_stream *s, const char *name) {
    if (capturing(s)) return fail(CW_ERROR_INVALID_STATE, "the stream is capturing: a trace marks work as it runs");
    Lock lock(t);
    int clock = -1;
    CW_TRY(clock_of(t, s->ctx, &clock));
    const uint32_t k = track_of(t, s->serial, true);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st;
    Span *sp = span_new(t, k, name, &st);
    if (!sp) return st;
    sp->clock = clock;
    st = record_new(t, clock, s, &sp->eb);
    if (st != CW_SUCCESS) t->spans.pop();
    return st;
}

cw_status trace_end(cw_trace *t, cw_stream *s) {
    Lock lock(t);
    const uint32_t k = track_of(t, s->serial, true);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    const long i = last_open(t, k);
    // A span dropped past max_spans, begun after the last kept one, ends first.
    if (t->tracks[k].dropped_open && (i < 0 || t->spans.size() >= t->max_spans)) {
        t->tracks[k].dropped_open--;
        return CW_SUCCESS;
    }
    if (i < 0) return fail(CW_ERROR_INVALID_STATE, "no span is open on this stream");
    Span &sp = t->spans[(size_t)i];
    CW_TRY(record_new(t, sp.clock, s, &sp.ee));
    sp.open = false;
    return CW_SUCCESS;
}

cw_status trace_rebegin(cw_trace *t, cw_stream *s) {
    Lock lock(t);
    const uint32_t k = track_of(t, s->serial, true);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    const long i = last_open(t, k);
    if (i < 0 || t->tracks[k].dropped_open) return CW_SUCCESS;  // dropped past max_spans
    CUevent ev = t->spans[(size_t)i].eb;
    return on_stream(s, "cuEventRecord", [&] { return drv().cuEventRecord(ev, s->cu); });
}

cw_status trace_host_begin(cw_trace *t, const char *name) {
    const int64_t now = now_ns();
    Lock lock(t);
    const uint32_t k = track_of(t, thread_key(), false);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st;
    Span *sp = span_new(t, k, name, &st);
    if (sp) {
        sp->b = now;
        sp->resolved = true;
    }
    return st;
}

cw_status trace_host_end(cw_trace *t) {
    const int64_t now = now_ns();
    Lock lock(t);
    const uint32_t k = track_of(t, thread_key(), false);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    const long i = last_open(t, k);
    if (t->tracks[k].dropped_open && (i < 0 || t->spans.size() >= t->max_spans)) {
        t->tracks[k].dropped_open--;
        return CW_SUCCESS;
    }
    if (i < 0) return fail(CW_ERROR_INVALID_STATE, "no host span is open on this thread");
    t->spans[(size_t)i].e = now;
    t->spans[(size_t)i].open = false;
    return CW_SUCCESS;
}

namespace {
// A span already ended, on track k (the lock held). A span the bound drops
// leaves nothing open.
cw_status closed_span(cw_trace *t, uint32_t k, const char *name, int64_t begin_ns, int64_t end_ns) {
    cw_status st;
    tr::closed_span_new(t, k, name, begin_ns, end_ns, &st);
    return st;
}

// The GPU track of key, named `track` when this call made it (the lock held).
cw_status gpu_track(cw_trace *t, uint64_t key, const char *track, uint32_t *out) {
    const size_t had = t->tracks.size();
    const uint32_t k = track_of(t, key, true);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (t->tracks.size() > had) {
        snprintf(t->tracks[k].name, sizeof t->tracks[k].name, "%s", track);
        t->tracks[k].named = true;
    }
    *out = k;
    return CW_SUCCESS;
}
}  // namespace

cw_status trace_host_span(cw_trace *t, const char *name, int64_t begin_ns, int64_t end_ns, const char *thread_name) {
    Lock lock(t);
    const uint32_t k = track_of(t, thread_key(), false);
    if (k == UINT32_MAX) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    if (thread_name && !t->tracks[k].named) {
        snprintf(t->tracks[k].name, sizeof t->tracks[k].name, "%s %llu", thread_name,
                 (unsigned long long)t->tracks[k].key);
        t->tracks[k].named = true;
    }
    return closed_span(t, k, name, begin_ns, end_ns);
}

cw_status trace_gpu_span(cw_trace *t, uint64_t key, const char *track, const char *name, int64_t begin_ns,
                         int64_t end_ns) {
    Lock lock(t);
    uint32_t k;
    CW_TRY(gpu_track(t, key, track, &k));
    return closed_span(t, k, name, begin_ns, end_ns < begin_ns ? begin_ns : end_ns);
}

cw_status trace_gpu_track(cw_trace *t, uint64_t key, const char *track) {
    Lock lock(t);
    uint32_t k;
    return gpu_track(t, key, track, &k);
}

bool trace_globaltimer(cw_trace *t, const cw_context *ctx, int64_t *offset) {
    Lock lock(t);
    for (size_t i = 0; i < t->timers.size(); i++)
        if (t->timers[i].ctx == ctx) {
            *offset = t->timers[i].offset;
            return true;
        }
    return false;
}

cw_status trace_set_globaltimer(cw_trace *t, cw_context *ctx, int64_t offset, int64_t err_ns) {
    Lock lock(t);
    for (size_t i = 0; i < t->timers.size(); i++)
        if (t->timers[i].ctx == ctx) {
            t->timers[i].offset = offset;
            t->timers[i].err_ns = err_ns;
            return CW_SUCCESS;
        }
    if (!t->timers.push(GlobalTimer{ctx, offset, err_ns})) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    context_retain(ctx);
    return CW_SUCCESS;
}

cw_status trace_source(cw_trace *t, const void *key, size_t n, uint32_t *index, uint64_t *seen) {
    {
        Lock lock(t);
        size_t i = 0;
        while (i < t->sources.size() && t->sources[i].key != key) i++;
        if (i == t->sources.size()) {
            Source *src = t->sources.emplace();
            if (!src) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            src->key = key;
        }
        const Vec<uint64_t> &had = t->sources[i].seen;
        for (size_t k = 0; k < n; k++) seen[k] = k < had.size() ? had[k] : 0;
        *index = (uint32_t)i;
    }
    if (void (*h)(void *) = g_trace_source_hook.load(std::memory_order_acquire)) h(g_trace_source_hook_arg.load());
    return CW_SUCCESS;
}

void trace_record_lock(cw_trace *t) { pthread_mutex_lock(&t->record_mu); }
void trace_record_unlock(cw_trace *t) { pthread_mutex_unlock(&t->record_mu); }

std::atomic<void (*)(void *)> g_trace_source_hook{nullptr};
std::atomic<void *> g_trace_source_hook_arg{nullptr};

cw_status trace_source_seen(cw_trace *t, uint32_t index, size_t n, const uint64_t *seen) {
    Lock lock(t);
    Vec<uint64_t> &had = t->sources[index].seen;
    if (!had.reserve(n)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    while (had.size() < n) had.push(0);  // (reserved)
    for (size_t k = 0; k < n; k++) had[k] = seen[k];
    return CW_SUCCESS;
}

void trace_info(const cw_trace *tc, cw_trace_info *info) {
    cw_trace *t = const_cast<cw_trace *>(tc);
    memset(info, 0, sizeof *info);
    Lock lock(t);
    if (t->timing == CW_TRACE_GPU_CUPTI) tr::cupti_drain(t);  // what CUPTI delivered counts once it is in
    info->spans = t->spans.size();
    info->dropped = t->dropped;
    info->tracks = (uint32_t)t->tracks.size();
    info->contexts = (uint32_t)(t->clocks.size() + t->timers.size());
    for (size_t i = 0; i < t->clocks.size(); i++)
        if (t->clocks[i].err_ns > info->calibration_error_ns) info->calibration_error_ns = t->clocks[i].err_ns;
    for (size_t i = 0; i < t->timers.size(); i++)
        if (t->timers[i].err_ns > info->calibration_error_ns) info->calibration_error_ns = t->timers[i].err_ns;
    info->gpu_timing = t->timing;
    info->cupti_result = t->cupti_result;
    if (t->timing == CW_TRACE_GPU_CUPTI) {
        info->contexts++;
        if (t->cupti_err_ns > info->calibration_error_ns) info->calibration_error_ns = t->cupti_err_ns;
        info->gpu_records = t->kernel_records;
        info->dropped += tr::cupti_lost() - t->cupti_lost_base;
        pthread_mutex_lock(&t->corr_mu);
        info->dropped += t->corr_dropped;
        pthread_mutex_unlock(&t->corr_mu);
    }
}

cw_status trace_write(cw_trace *t, const char *path) {
    pthread_mutex_lock(&t->write_mu);
    const cw_status st = write_trace(t, path);
    pthread_mutex_unlock(&t->write_mu);
    return st;
}

uint64_t trace_sort_comparisons(cw_trace *t) {
    Lock lock(t);
    return t->sort_compares;
}

}  // namespace core
}  // namespace cw
