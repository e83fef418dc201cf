/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: a pipeline's trace (cw_pipeline_set_trace). The
// executor and the stream rules call these only when a trace is attached.
#include "core/trace.hpp"
#include "flow/flow.hpp"

namespace cw {
namespace flow {

cw_status pipeline_set_trace(cw_pipeline *p, cw_trace *t) {
    if (p->running.load(std::memory_order_acquire))
        return fail(CW_ERROR_INVALID_STATE, "the pipeline is running: attach a trace between runs");
    if (t) core::trace_retain(t);
    if (p->trace) core::trace_release(p->trace);
    p->trace = t;
    return CW_SUCCESS;
}

void pipeline_drop_trace(cw_pipeline *p) {
    if (p->trace) core::trace_release(p->trace);
    p->trace = nullptr;
}

void trace_call_begin(cw_io *io) {
    core::trace_call_begin(io->p->trace, io->op->name, io->iteration, &io->trace_call);
}

cw_status trace_call_stream(cw_io *io, cw_stream *s) {
    // On CUPTI no event: the call's records go on the stream's track (none
    // for a call past max_spans, whose launches are not followed).
    if (io->trace_call.cupti) {
        if (io->trace_stream == s) return CW_SUCCESS;
        io->trace_stream = s;
        return core::trace_call_stream(&io->trace_call, s, io->op->name);
    }
    // Asked again (another input port): the span begins after this port's waits too.
    if (io->trace_stream) return io->trace_stream == s ? core::trace_rebegin(io->p->trace, s) : CW_SUCCESS;
    CW_TRY(core::trace_name_stream(io->p->trace, s, io->op->name, true));
    CW_TRY(core::trace_begin(io->p->trace, s, io->op->name));
    io->trace_stream = s;
    return CW_SUCCESS;
}

cw_status trace_call_end(cw_io *io) {
    if (io->trace_call.cupti) {
        core::trace_call_end(&io->trace_call);
        io->trace_stream = nullptr;
        return CW_SUCCESS;
    }
    if (!io->trace_stream) return CW_SUCCESS;
    cw_stream *s = io->trace_stream;
    io->trace_stream = nullptr;
    return core::trace_end(io->p->trace, s);
}

void trace_host(cw_pipeline *p, const char *name, int64_t begin_ns) {
    // a lost span is no failure of the run; a thread the user did not name
    // is "executor thread <tid>"
    (void)core::trace_host_span(p->trace, name, begin_ns, now_ns(), "executor thread");
}

}  // namespace flow
}  // namespace cw
