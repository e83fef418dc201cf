/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: the resident loop's trace (resident.hpp). With
// settings.trace, each stage of an iteration (the workload, the handler,
// stages a capture function begins) has its begin and end marked with the
// device clock in mapped host memory: the workload's and the handler's by
// the loop's own kernels (resident_build.cpp gives them the marks'
// addresses), a capture function's stages by a one-thread mark kernel at
// each begin and end; a fault then names the stage begun last of those
// running.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

// The arguments of the mark of stage idx (its begin, or its end): the
// loop's device block, and the stage's word.
struct MarkArgs {
    CUdeviceptr dev, mark;
    void *v[2];
    MarkArgs(const cw_resident *r, uint32_t idx, bool end)
        : dev(r->dev), mark(r->marks_dev + sizeof(unsigned long long) * (2ull * idx + (end ? 1 : 0))),
          v{&dev, &mark} {}
    MarkArgs(const MarkArgs &) = delete;
};

// Appends to buf (len bytes, *at used), truncating.
__attribute__((format(printf, 4, 5))) void append(char *buf, size_t len, size_t *at, const char *fmt, ...) {
    if (*at >= len) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    *at = w < 0 ? len : *at + (size_t)w;
}

// Shared checks of the stage calls: true in *traced when marks are to be made.
cw_status stage_checks(cw_resident *r, cw_stream *s, bool *traced) {
    *traced = false;
    if (!r->set.trace) return CW_SUCCESS;
    if (!r->building)
        return fail(CW_ERROR_INVALID_STATE,
                    "stages are begun and ended inside the loop's capture functions, while it builds");
    if (s->ctx->cu != r->ctx->cu || !capturing(s))
        return fail(CW_ERROR_INVALID_STATE,
                    "s is not capturing into the resident loop's graph (use the capture function's stream, or "
                    "one forked from it)");
    *traced = true;
    return CW_SUCCESS;
}

}  // namespace

// Makes the marks (once) and clears them: a traced build starts with no
// stage begun.
cw_status trace_prepare(cw_resident *r) {
    const size_t bytes = 2 * sizeof(unsigned long long) * CW_RES_MAX_STAGES;
    if (!r->marks) {
        CurrentGuard guard;
        CW_TRY(guard.enter(r->ctx->cu));
        void *p = nullptr;
        CW_TRY(host_mapped_alloc(r->ctx, bytes, CU_MEMHOSTALLOC_PORTABLE, &p, &r->marks_dev));
        r->marks = static_cast<unsigned long long *>(p);  // zeroed
        return guard.leave();
    }
    memset(r->marks, 0, bytes);  // no loop runs while one builds
    return CW_SUCCESS;
}

// A new stage of this build, named (truncated to 63 bytes).
cw_status stage_new(cw_resident *r, const char *name, uint32_t *idx) {
    if (r->stages.size() >= CW_RES_MAX_STAGES)
        return fail(CW_ERROR_OUT_OF_MEMORY, "the resident loop traces at most %u stages a build (every copy of the "
                    "iteration counts; unroll is %u)", CW_RES_MAX_STAGES, r->set.unroll);
    Stage st;
    memset(&st, 0, sizeof st);
    snprintf(st.name, sizeof st.name, "%s", name);
    st.copy = r->build_copy;
    st.part = r->build_part;
    if (!r->stages.push(st)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    *idx = static_cast<uint32_t>(r->stages.size() - 1);
    return CW_SUCCESS;
}

// Enqueues on s (capturing into the loop's graph) the mark of stage idx.
cw_status stage_mark(cw_resident *r, cw_stream *s, uint32_t idx, bool end) {
    cw_kernel *k = nullptr;
    CW_TRY(resident_kernel(kResMark, &k));
    MarkArgs a(r, idx, end);
    cw_launch_config cfg;
    kernels::launch_config_default(&cfg);
    return kernels::launch(k, s, &cfg, a.v);
}

// Captures the mark of stage idx (its begin, or its end) into g, after
// its sinks.
cw_status mark_into(cw_resident *r, cw_graph *g, uint32_t idx, bool end) {
    MarkArgs a(r, idx, end);
    return launch_into(r, g, kResMark, a.v);
}

// With trace: " in stage 'x' (...)" for the stages that had begun and not
// ended when the loop faulted, the last begun first; "" without trace.
void describe_open_stages(const cw_resident *r, char *buf, size_t len) {
    buf[0] = 0;
    if (!r->set.trace || !r->marks) return;
    uint32_t open[4];
    unsigned long long began[4];
    size_t n = 0, total = 0;
    for (size_t i = 0; i < r->stages.size(); i++) {
        const unsigned long long b = __atomic_load_n(&r->marks[2 * i], __ATOMIC_ACQUIRE);
        const unsigned long long e = __atomic_load_n(&r->marks[2 * i + 1], __ATOMIC_ACQUIRE);
        if (b == 0 || b < e) continue;  // never begun, or ended since
        total++;
        // keep the four last begun, the latest first
        size_t at = n;
        if (n < 4)
            n++;
        else if (b <= began[3])
            continue;
        else
            at = 3;
        for (; at > 0 && began[at - 1] < b; at--) {
            began[at] = began[at - 1];
            open[at] = open[at - 1];
        }
        began[at] = b;
        open[at] = static_cast<uint32_t>(i);
    }
    size_t at = 0;
    if (total == 0) {
        append(buf, len, &at, ", in none of the traced stages (the loop's own kernels, or work outside every stage)");
        return;
    }
    const Stage &last = r->stages[open[0]];
    append(buf, len, &at, ", in stage '%s' (%s, copy %u of %u of the iteration", last.name,
           last.part ? "data-ready handler" : "workload", last.copy + 1, r->set.unroll);
    if (total > 1) {
        append(buf, len, &at, "; stages running, the last begun first:");
        for (size_t k = 0; k < n; k++) append(buf, len, &at, "%s '%s'", k ? "," : "", r->stages[open[k]].name);
        if (total > n) append(buf, len, &at, " and %zu more", total - n);
    }
    append(buf, len, &at, ")");
}

cw_status resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage) {
    *stage = CW_RESIDENT_NO_STAGE;
    bool traced = false;
    CW_TRY(stage_checks(r, s, &traced));
    if (!traced) return CW_SUCCESS;
    uint32_t idx = 0;
    CW_TRY(stage_new(r, name, &idx));
    cw_status st = stage_mark(r, s, idx, false);
    if (st != CW_SUCCESS) {
        r->stages.pop();  // never begun
        return st;
    }
    *stage = idx;
    return CW_SUCCESS;
}

cw_status resident_stage_end(cw_resident *r, cw_stream *s, uint32_t stage) {
    if (stage == CW_RESIDENT_NO_STAGE) return CW_SUCCESS;
    bool traced = false;
    CW_TRY(stage_checks(r, s, &traced));
    if (!traced || stage >= r->stages.size() || r->stages[stage].ended)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage %u was not begun in this build%s", stage,
                    traced && stage < r->stages.size() ? " or has ended already" : "");
    CW_TRY(stage_mark(r, s, stage, true));
    r->stages[stage].ended = true;
    return CW_SUCCESS;
}

bool resident_trace_marks(const cw_resident *r, volatile unsigned long long **marks, unsigned *stages) {
    if (!r->marks) return false;
    *marks = r->marks;
    *stages = static_cast<unsigned>(r->stages.size());
    return true;
}

}  // namespace graphs
}  // namespace cw
