/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: a resident loop's stages on a trace's timeline
// (cw_trace_record_resident). The stage marks (resident_trace.cpp) hold the
// global timer's nanoseconds of each stage's last begin and end; those of
// stages that began and ended since the trace last added them (each
// stage's begin is noted in the trace) become GPU spans, one track per
// stage name, and each copy of the iteration an "iteration" span from its
// first stage's begin to its last stage's end. A copy with a stage still
// running (the workload, its inner stages ended) is left whole for the
// next call.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.hpp"
#include "graph/resident.hpp"
#include "graph/resident_timeline.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace graphs {

namespace {

// Track keys of the loop's tracks (the top bit set: no stream's serial).
uint64_t stage_key(uint32_t loop, const Stage &st) {
    uint32_t h = 2166136261u;  // FNV-1a of the name and part
    for (const char *c = st.name; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
    h = (h ^ st.part) * 16777619u;
    return (1ull << 63) | ((uint64_t)loop << 32) | h;
}

uint64_t iteration_key(uint32_t loop) { return (1ull << 63) | (1ull << 62) | loop; }

}  // namespace

cw_status resident_record_trace(cw_trace *t, cw_resident *r) {
    if (!r->set.trace)
        return fail(CW_ERROR_INVALID_STATE, "the resident loop does not trace its stages (settings.trace is 0)");
    const size_t n = r->stages.size();
    if (!r->marks || n == 0)
        return fail(CW_ERROR_INVALID_STATE, "the resident loop has no traced stages yet: build or launch it first");
    int64_t offset = 0;
    if (!core::trace_globaltimer(t, r->ctx, &offset)) {
        int64_t err = 0;
        CW_TRY(kernels::globaltimer_offset(r->ctx, &offset, &err));
        CW_TRY(core::trace_set_globaltimer(t, r->ctx, offset, err));
    }
    // Another thread's record of t waits from here until this one noted
    // what it added (each stage added once).
    struct RecordLock {
        cw_trace *t;
        explicit RecordLock(cw_trace *tr) : t(tr) { core::trace_record_lock(t); }
        ~RecordLock() { core::trace_record_unlock(t); }
    } record(t);
    // Per stage: the begin last added to t, and the marks as read now.
    uint64_t *mem = static_cast<uint64_t *>(malloc(3 * n * sizeof(uint64_t)));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    uint64_t *seen = mem, *b = mem + n, *e = mem + 2 * n;
    uint32_t loop = 0;
    cw_status status = core::trace_source(t, r, n, &loop, seen);
    char track[64];
    snprintf(track, sizeof track, "loop %u: iterations", loop);
    if (status == CW_SUCCESS) status = core::trace_gpu_track(t, iteration_key(loop), track);  // the loop's first
    if (status != CW_SUCCESS) {
        free(mem);
        return status;
    }
    // A stage's end is read before its begin: marks only grow (no two are
    // equal), so a stage that begins again between the two reads looks
    // running (a begin past its end), never ended with the end of an
    // earlier run. A copy with a stage running is an iteration still
    // running: none of its stages is added (the next call adds them, the
    // stage around them included).
    bool running[kMaxUnroll] = {};
    for (size_t i = 0; i < n; i++) {
        e[i] = __atomic_load_n(&r->marks[2 * i + 1], __ATOMIC_ACQUIRE);
        b[i] = __atomic_load_n(&r->marks[2 * i], __ATOMIC_ACQUIRE);
        const uint32_t c = r->stages[i].copy < kMaxUnroll ? r->stages[i].copy : 0;
        if (b[i] != 0 && e[i] <= b[i]) running[c] = true;
    }
    uint64_t first[kMaxUnroll], end[kMaxUnroll];
    for (uint32_t c = 0; c < kMaxUnroll; c++) first[c] = end[c] = 0;
    for (size_t i = 0; i < n && status == CW_SUCCESS; i++) {
        const Stage &st = r->stages[i];
        const uint32_t c = st.copy < kMaxUnroll ? st.copy : 0;
        if (b[i] == 0 || running[c] || b[i] <= seen[i]) continue;  // never begun, its copy running, added before
        snprintf(track, sizeof track, "loop %u: %s", loop, st.name);
        status = core::trace_gpu_span(t, stage_key(loop, st), track, st.name, (int64_t)b[i] + offset,
                                      (int64_t)e[i] + offset);
        if (status != CW_SUCCESS) break;
        seen[i] = b[i];
        if (!first[c] || b[i] < first[c]) first[c] = b[i];
        if (e[i] > end[c]) end[c] = e[i];
    }
    snprintf(track, sizeof track, "loop %u: iterations", loop);  // (made above)
    for (uint32_t c = 0; c < kMaxUnroll && status == CW_SUCCESS; c++)
        if (first[c])
            status = core::trace_gpu_span(t, iteration_key(loop), track, "iteration", (int64_t)first[c] + offset,
                                          (int64_t)end[c] + offset);
    // What was added is noted, failed or not (never added twice).
    const cw_status noted = core::trace_source_seen(t, loop, n, seen);
    free(mem);
    return status != CW_SUCCESS ? status : noted;
}

}  // namespace graphs
}  // namespace cw
