/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: resident pipelines (flow.hpp). The pipeline becomes a
// capture function of a resident loop: each build captures every operator
// once per copy of the iteration, on a stream forked from the loop's build
// stream and ordered after its predecessors' streams, then joins them all
// back. The operators pass data through port memory (memory.cpp).
#include <stdio.h>

#include "flow/flow.hpp"
#include "graph/resident.hpp"

namespace cw {
namespace flow {

using namespace core;

namespace {

cw_status resident_fn(cw_stream *s, void *user) {
    cw_pipeline *p = static_cast<cw_pipeline *>(user);
    uint64_t copy = p->resident_copy++;
    size_t n = p->ops.size();
    cw::Vec<cw_stream *> streams;
    if (!streams.assign(n, nullptr)) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = CW_SUCCESS;
    for (size_t k = 0; k < p->topo.size() && st == CW_SUCCESS; k++) {
        cw_operator *op = p->ops[p->topo[k]];
        cw_stream *os = nullptr;
        st = stream_fork(s, &os);
        if (st != CW_SUCCESS) {
            record_failure(p, op, "resident capture: fork", st);
            break;
        }
        streams[op->index] = os;
        for (int pr : op->preds) {
            st = stream_order(os, streams[pr]);
            if (st != CW_SUCCESS) break;
        }
        if (st != CW_SUCCESS) {
            record_failure(p, op, "resident capture: ordering", st);
            break;
        }
        if (!op->resident_started) {
            op->resident_started = true;
            if (op->ops.start && (st = op->ops.start(op, op->user)) != CW_SUCCESS) {
                record_failure(p, op, "start", st);
                break;
            }
        }
        cw_io io;
        io.tag = HandleKind<cw_io>::tag;
        io.p = p;
        io.resident = true;
        io.ctl = p->resident->dev;
        io_reset(&io, op, copy);
        io.stream = os;
        io.carry = true;
        // A loop that traces (cw_resident_settings.trace) gets a stage per
        // operator, so that a fault names the operator.
        char stage_name[80];
        snprintf(stage_name, sizeof stage_name, "operator %s", op->name);
        uint32_t stage = CW_RESIDENT_NO_STAGE;
        if ((st = graphs::resident_stage_begin(p->resident, os, stage_name, &stage)) != CW_SUCCESS) {
            record_failure(p, op, "resident capture: trace stage", st);
            break;
        }
        io.active = true;
        st = op->ops.compute(&io, op->user);
        io.active = false;
        io.tag = kTagDead;
        for (Port &pt : op->ports) pt.emitted = false;
        if (st != CW_SUCCESS) record_failure(p, op, "resident capture: compute", st);
        if (st == CW_SUCCESS && (st = graphs::resident_stage_end(p->resident, os, stage)) != CW_SUCCESS)
            record_failure(p, op, "resident capture: trace stage", st);
    }
    for (size_t i = n; i-- > 0;)
        if (streams[i]) {
            cw_status j = stream_join(s, &streams[i]);
            if (st == CW_SUCCESS) st = j;
        }
    if (st != CW_SUCCESS) {
        pthread_mutex_lock(&p->mu);
        bool have = p->failed.load(std::memory_order_relaxed);
        char msg[512], call[64];
        snprintf(msg, sizeof msg, "%s", p->fail_msg);
        copy_text(call, sizeof call, p->fail_call);
        const int cu = p->fail_cu;
        p->failed.store(false, std::memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
        if (have) return fail_from(st, cu, call, "%s", msg);
    }
    return st;
}

}  // namespace

cw_status make_resident(cw_pipeline *p, cw_resident *r) {
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    cw_context *rctx = r->ctx;
    if (rctx->device != p->ctx->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the loop is on device %d, the pipeline on device %d", rctx->ordinal,
                    p->ctx->ordinal);
    if (!p->checked) CW_TRY(pipeline_check(p));
    for (cw_operator *op : p->ops)
        if (!op->settings.resident)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s' is not GPU-resident (cw_operator_settings.resident): a resident pipeline "
                        "captures every operator",
                        op->name);
    CW_TRY(setup_memory(p, rctx));  // plans the memory (its rules' errors) before allocating
    p->resident = r;
    p->resident_copy = 0;
    cw_status st = graphs::resident_set_part(r, false, nullptr, resident_fn, p);
    if (st != CW_SUCCESS) p->resident = nullptr;
    return st;
}

}  // namespace flow
}  // namespace cw
