/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: stream capture (graph.hpp). The capture's state lives
// in the stream (core/stream.hpp), so that every call on a capturing stream
// can note what broke the capture.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "graph/graph.hpp"

namespace cw {
namespace graphs {

using namespace core;

namespace {

void capture_done(cw_stream *s) {
    if (s->cap.target) static_cast<cw_graph *>(s->cap.target)->capturing = nullptr;
    s->cap.target = nullptr;
    s->cap.active = false;
    CW_NVTX_END(s->cap.nvtx);
}

}  // namespace

cw_status capture_begin(cw_stream *s, cw_graph *g, cw_capture_mode mode) {
    CW_TRY(ensure_init());
    // A stream destroyed while it captures ends the capture the way this layer does.
    stream_on_abandon(capture_abandon);
    if (s->is_null)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "the legacy NULL stream cannot be captured (the driver refuses it): capture a stream made by "
                    "cw_stream_create or taken from a pool, and order it against the NULL stream with cw_stream_wait");
    if (s->cap.active)
        return fail(CW_ERROR_INVALID_STATE, "the stream is already capturing: end that capture with cw_capture_end first");
    CUgraphNode *sinks = nullptr;
    size_t nsinks = 0;
    if (g) {
        if (g->ctx != s->ctx)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the graph and the stream belong to different contexts");
        if (g->capturing)
            return fail(CW_ERROR_INVALID_STATE, "the graph is already the target of a capture on another stream");
        if (!drv().cuStreamBeginCaptureToGraph)
            return fail(CW_ERROR_NOT_SUPPORTED,
                        "capturing into an existing graph needs cuStreamBeginCaptureToGraph (CUDA 12.3 driver)");
        CW_TRY(sinks_of(g->cu, &sinks, &nsinks));
    }
    const uint64_t serial = capture_violation_serial();
    cw_status st;
    if (g)
        st = on_stream(s, "cuStreamBeginCaptureToGraph", [&] {
            return drv().cuStreamBeginCaptureToGraph(s->cu, g->cu, sinks, nullptr, nsinks, mode);
        });
    else
        st = on_stream(s, "cuStreamBeginCapture", [&] { return drv().cuStreamBeginCapture(s->cu, mode); });
    free(sinks);
    if (st != CW_SUCCESS) return st;
    s->cap.noted.store(0, std::memory_order_relaxed);
    s->cap.serial = serial;
    s->cap.mode = mode;
    s->cap.target = g;
    s->cap.active = true;
    s->cap.nvtx = CW_NVTX_START(graph_capture);
    if (g) g->capturing = s;
    return CW_SUCCESS;
}

void capture_abandon(cw_stream *s) {
    if (!s->cap.active) return;
    CUgraph g = nullptr;
    CUresult r = drv().cuStreamEndCapture(s->cu, &g);
    if (r == CUDA_SUCCESS && g && !s->cap.target) drv().cuGraphDestroy(g);
    log(CW_LOG_WARNING,
        "%s: a capture left open (its stream or the graph it recorded into going away, or a failed build) was "
        "ended and dropped",
        current_api());
    capture_done(s);
}

cw_status capture_end(cw_stream *s, cw_graph **out) {
    if (!s->cap.active)
        return fail(CW_ERROR_INVALID_STATE,
                    "the stream is not capturing (no cw_capture_begin on it, or its capture already ended)");
    CW_CHECK_ARG(out != NULL || s->cap.target != NULL);
    cw_graph *target = static_cast<cw_graph *>(s->cap.target);
    CUgraph g = nullptr;
    CUresult r = drv().cuStreamEndCapture(s->cu, &g);
    if (r == CUDA_SUCCESS) {
        capture_done(s);
        if (target) {
            if (out) *out = target;
            return CW_SUCCESS;
        }
        cw_graph *w = nullptr;
        cw_status st = graph_wrap(s->ctx, g, nullptr, &w);
        if (st != CW_SUCCESS) {
            drv().cuGraphDestroy(g);
            return st;
        }
        *out = w;
        return CW_SUCCESS;
    }
    if (g && !(target && g == target->cu)) drv().cuGraphDestroy(g);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    const bool still = drv().cuStreamIsCapturing(s->cu, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
    char why[400];
    if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && still) {
        return fail_cu(r, "cuStreamEndCapture",
                       "a CW_CAPTURE_THREAD_LOCAL capture must be ended on the thread that began it; the capture goes on");
    }
    if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
        CaptureNote v;
        const char *name = nullptr, *text = nullptr;
        bool known = false;
        const char *how = "invalidated by";
        if (s->cap.noted.load(std::memory_order_acquire) == 2) {
            copy_text(v.api, sizeof v.api, s->cap.note.api);
            copy_text(v.call, sizeof v.call, s->cap.note.call);
            v.result = s->cap.note.result;
            known = true;
        } else if (capture_violation_since(s->cap.serial, &v)) {
            known = true;
            how = "invalidated, most likely by the last capture-breaking call cuweave saw:";
        }
        if (known) {
            driver_error_text(v.result, &name, &text);
            snprintf(why, sizeof why,
                     "the capture was %s %s (%s returned %s: %s); the capture has ended and the stream can be used "
                     "again",
                     how, v.api, v.call, name ? name : "?", text ? text : "?");
        } else {
            snprintf(why, sizeof why,
                     "the capture was invalidated by a call cuweave did not make (a driver call on a stream taking "
                     "part in the capture); the capture has ended and the stream can be used again");
        }
    } else if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
        snprintf(why, sizeof why,
                 "a stream that joined the capture (cw_stream_fork, or cw_stream_wait on the capturing stream) was "
                 "not joined back (cw_stream_join, or cw_stream_wait of the capturing stream on it) before "
                 "cw_capture_end; the capture has ended and the stream can be used again");
    } else {
        snprintf(why, sizeof why, "the capture has %s", still ? "not ended" : "ended and the stream can be used again");
    }
    if (!still) capture_done(s);
    return fail_cu(r, "cuStreamEndCapture", why);
}

cw_status capture_state(cw_stream *s, cw_capture_state *state) {
    CW_TRY(ensure_init());
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CW_TRY(on_stream(s, "cuStreamIsCapturing", [&] { return drv().cuStreamIsCapturing(s->cu, &cs); }));
    *state = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE        ? CW_CAPTURE_ACTIVE
             : cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CW_CAPTURE_INVALIDATED
                                                          : CW_CAPTURE_NONE;
    return CW_SUCCESS;
}

}  // namespace graphs
}  // namespace cw
