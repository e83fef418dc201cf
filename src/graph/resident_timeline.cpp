/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: a resident loop's stages on a trace's timeline
// (cw_trace_record_resident). The stage marks (resident_trace.cpp) hold the
// global timer's nanoseconds of each stage's last begin and end; those of
// stages that began and ended since the trace last read them become GPU
// spans, one track per stage name, and each copy of the iteration an
// "iteration" span from its first stage's begin to its last stage's end.
#include <stdio.h>
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
    uint32_t loop = 0;
    uint64_t last = 0;
    CW_TRY(core::trace_source(t, r, &loop, &last));
    uint64_t newest = last;
    uint64_t first[kMaxUnroll], end[kMaxUnroll];
    for (uint32_t c = 0; c < kMaxUnroll; c++) first[c] = end[c] = 0;
    char track[64];
    snprintf(track, sizeof track, "loop %u: iterations", loop);
    CW_TRY(core::trace_gpu_track(t, iteration_key(loop), track));  // the loop's first track
    for (size_t i = 0; i < n; i++) {
        const unsigned long long b = __atomic_load_n(&r->marks[2 * i], __ATOMIC_ACQUIRE);
        const unsigned long long e = __atomic_load_n(&r->marks[2 * i + 1], __ATOMIC_ACQUIRE);
        if (b == 0 || e <= b || b <= last) continue;  // never begun, running now, or read before
        const Stage &st = r->stages[i];
        snprintf(track, sizeof track, "loop %u: %s", loop, st.name);
        CW_TRY(core::trace_gpu_span(t, stage_key(loop, st), track, st.name, (int64_t)b + offset,
                                    (int64_t)e + offset));
        const uint32_t c = st.copy < kMaxUnroll ? st.copy : 0;
        if (!first[c] || b < first[c]) first[c] = b;
        if (e > end[c]) end[c] = e;
        if (e > newest) newest = e;
    }
    snprintf(track, sizeof track, "loop %u: iterations", loop);  // (made above)
    for (uint32_t c = 0; c < kMaxUnroll; c++)
        if (first[c])
            CW_TRY(core::trace_gpu_span(t, iteration_key(loop), track, "iteration", (int64_t)first[c] + offset,
                                        (int64_t)end[c] + offset));
    core::trace_source_seen(t, loop, newest);
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
