/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/flow.h (operators, pipelines, cw_io).
#include "api/api.hpp"
#include "flow/flow.hpp"
#include "flow/fused.hpp"
#include "graph/resident.hpp"
#include "kernel/kernel.hpp"

using namespace cw;

static_assert(sizeof(cw_port_settings) == 64, "cw_port_settings keeps its 0.1 size");
static_assert(sizeof(cw_operator_ops) == 64, "cw_operator_ops keeps its 0.1 size");
static_assert(sizeof(cw_pipeline_info) == 128, "cw_pipeline_info: the context, then the counters");
static_assert(sizeof(cw_io_info) == 64, "cw_io_info");
static_assert(sizeof(cw_port_read) == 56 && sizeof(cw_operator_stage) == 88, "fused stages' descriptors");

namespace {

void defaults(cw_port_settings *s) { memset(s, 0, sizeof *s); }
void defaults(cw_operator_settings *s) { memset(s, 0, sizeof *s); }
void defaults(cw_pipeline_settings *s) {
    memset(s, 0, sizeof *s);
    s->threads = 1;
    s->max_in_flight = 4;
}

// cw_pipeline_make_fused: the plan (checked, no driver call), the loop's
// own checks, the compile and what the loop refuses of the kernel (before
// any device memory, so that a refused call allocates nothing and leaves
// the pipeline open to changes), the port memory and its table, then the
// loop.
cw_status make_fused(cw_pipeline *p, cw_resident *r, const cw_resident_fused *fused) {
    flow::FusedPlan plan;
    CW_TRY(flow::fused_plan(p, r, fused, &plan));
    cw_status st = graphs::fused_may_set(r);
    cw_module *m = nullptr;
    cw_kernel *k = nullptr;
    if (st == CW_SUCCESS) st = api::compile_fused(r, &plan.f, &m, &k);
    // every refusal of the loop's own before the port memory is set up
    // (after it, connections and operators are fixed)
    if (st == CW_SUCCESS) st = graphs::resident_check_fused(r, &plan.f, m, k);
    if (st == CW_SUCCESS) st = flow::fused_memory(p, r, &plan);
    if (st == CW_SUCCESS) st = graphs::resident_set_fused(r, &plan.f, m, k);
    if (st != CW_SUCCESS && m) kernels::module_destroy(m);
    flow::fused_plan_free(&plan);
    return st;
}

}  // namespace

extern "C" {

CW_API void cw_port_settings_default(cw_port_settings *s) {
    if (s) defaults(s);
}

CW_API void cw_operator_settings_default(cw_operator_settings *s) {
    if (s) defaults(s);
}

CW_API void cw_pipeline_settings_default(cw_pipeline_settings *s) {
    if (s) defaults(s);
}

// ---- operators ------------------------------------------------------------------

CW_API cw_status cw_operator_create(cw_operator **out, const char *name, const cw_operator_ops *ops, void *user,
                                    const cw_operator_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(ops != NULL);
    const char *why = "";
    if (!flow::name_ok(name, &why)) return fail(CW_ERROR_INVALID_ARGUMENT, "bad operator name: %s", why);
    if (!ops->compute) return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has no compute callback", name);
    CW_CHECK_ARG(api::all_zero(ops->reserved, sizeof ops->reserved));
    cw_operator_settings s;
    defaults(&s);
    if (settings) {
        CW_CHECK_ARG(api::all_zero(settings->reserved, sizeof settings->reserved));
        if (settings->pool && !live(settings->pool))
            return fail(CW_ERROR_INVALID_HANDLE, "settings->pool is not a live cw_stream_pool");
        s = *settings;
    }
    return flow::operator_create(name, ops, user, &s, out);
}

CW_API cw_status cw_operator_create_stage(cw_operator **out, const char *name, const cw_operator_stage *stage) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(stage != NULL);
    const char *why = "";
    if (!flow::name_ok(name, &why)) return fail(CW_ERROR_INVALID_ARGUMENT, "bad operator name: %s", why);
    return flow::stage_create(name, stage, out);
}

CW_API void cw_operator_destroy(cw_operator **op) {
    CW_ENTRY;
    if (!op || !*op) return;
    cw_operator *o = *op;
    *op = nullptr;
    if (!live(o)) {
        cw::log(CW_LOG_WARNING, "%s: *op is not a live cw_operator; nothing destroyed", current_api());
        return;
    }
    if (o->owner) {
        cw::log(CW_LOG_WARNING, "%s: operator '%s' belongs to a pipeline: it goes with the pipeline; nothing destroyed",
                current_api(), o->name);
        return;
    }
    flow::operator_free(o);
}

CW_API cw_status cw_operator_add_input(cw_operator *op, const char *name, const cw_port_settings *settings) {
    CW_ENTRY;
    CW_CHECK_HANDLE(op);
    return flow::add_port(op, name, settings, true);
}

CW_API cw_status cw_operator_add_output(cw_operator *op, const char *name, const cw_port_settings *settings) {
    CW_ENTRY;
    CW_CHECK_HANDLE(op);
    return flow::add_port(op, name, settings, false);
}


// ---- pipelines ------------------------------------------------------------------

CW_API cw_status cw_pipeline_create(cw_pipeline **out, cw_context *ctx, const cw_pipeline_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    cw_pipeline_settings s;
    defaults(&s);
    if (settings) {
        CW_CHECK_ARG(api::all_zero(settings->reserved, sizeof settings->reserved));
        if (settings->pool && !live(settings->pool))
            return fail(CW_ERROR_INVALID_HANDLE, "settings->pool is not a live cw_stream_pool");
        CW_CHECK_ARG(settings->threads <= 256);
        s = *settings;
    }
    return flow::pipeline_create(ctx, &s, out);
}

CW_API void cw_pipeline_destroy(cw_pipeline **pp) {
    CW_ENTRY;
    if (!pp || !*pp) return;
    cw_pipeline *p = *pp;
    *pp = nullptr;
    if (!live(p)) {
        cw::log(CW_LOG_WARNING, "%s: *p is not a live cw_pipeline; nothing destroyed", current_api());
        return;
    }
    flow::pipeline_destroy_when_idle(p);
}

CW_API cw_status cw_pipeline_add(cw_pipeline *p, cw_operator *op) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_HANDLE(op);
    return flow::pipeline_add(p, op);
}

CW_API cw_status cw_pipeline_connect(cw_pipeline *p, const char *from_op, const char *from_port, const char *to_op,
                                     const char *to_port) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(from_op != NULL && from_port != NULL && to_op != NULL && to_port != NULL);
    return flow::pipeline_connect(p, from_op, from_port, to_op, to_port);
}

CW_API cw_status cw_pipeline_check(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    return flow::pipeline_check(p);
}

CW_API cw_status cw_pipeline_run(cw_pipeline *p, uint64_t iterations) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(pipeline_run, iterations);
    CW_CHECK_HANDLE(p);
    CW_TRY(flow::refuse_stages(p, "cw_pipeline_run"));
    return flow::pipeline_run(p, iterations);
}

CW_API cw_status cw_pipeline_synchronize(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    return flow::pipeline_synchronize(p);
}

CW_API cw_status cw_pipeline_stop(cw_pipeline *p) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    p->stop.store(1, std::memory_order_release);
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_get_info(const cw_pipeline *p, cw_pipeline_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(info != NULL);
    flow::pipeline_info(p, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_get_operator(const cw_pipeline *p, const char *name, cw_operator **op) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(name != NULL && op != NULL);
    cw_operator *o = flow::find_op(p, name);
    if (!o) return fail(CW_ERROR_INVALID_ARGUMENT, "no operator named '%s' in the pipeline", name);
    *op = o;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_get_port_ptr(const cw_pipeline *p, const char *op, const char *port, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(op != NULL && port != NULL && dptr != NULL);
    CUdeviceptr d = 0;
    CW_TRY(flow::pipeline_port_ptr(p, op, port, &d));
    *dptr = d;
    return CW_SUCCESS;
}

CW_API cw_status cw_pipeline_make_resident(cw_pipeline *p, cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_HANDLE(r);
    CW_TRY(flow::refuse_stages(p, "cw_pipeline_make_resident to capture"));
    return flow::make_resident(p, r);
}

CW_API cw_status cw_pipeline_make_fused(cw_pipeline *p, cw_resident *r, const cw_resident_fused *fused) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(fused != NULL);
    CW_CHECK_ARG(api::all_zero(fused->reserved, sizeof fused->reserved));
    CW_CHECK_ARG(fused->option_count == 0 || fused->options != NULL);
    for (uint32_t i = 0; i < fused->option_count; i++) CW_CHECK_ARG(fused->options[i] != NULL);
    if (fused->block_threads > 1024)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: block_threads %u (at most 1024)", fused->block_threads);
    return make_fused(p, r, fused);
}

// ---- cw_io ------------------------------------------------------------------------

CW_API cw_status cw_io_receive(cw_io *io, const char *port, cw_message *msg) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(msg != NULL);
    return flow::io_receive(io, port, msg);
}

CW_API cw_status cw_io_receive_many(cw_io *io, const char *port, cw_message *msgs, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(msgs != NULL || cap == 0);
    return flow::io_receive_many(io, port, msgs, cap, count);
}

CW_API cw_status cw_io_receive_stream(cw_io *io, const char *port, cw_stream **out) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(out != NULL);
    return flow::io_receive_stream(io, port, out);
}

CW_API cw_status cw_io_get_stream(cw_io *io, const char *name, cw_stream **out) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(out != NULL);
    return flow::io_stream(io, name, out);
}

CW_API cw_status cw_io_set_output_stream(cw_io *io, const char *port, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    if (s) CW_CHECK_HANDLE(s);
    return flow::io_set_output_stream(io, port, s);
}

CW_API cw_status cw_io_emit(cw_io *io, const char *port, void *value, cw_buffer *buffer) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    return flow::io_emit(io, port, value, buffer);
}

CW_API cw_status cw_io_alloc(cw_buffer **out, cw_io *io, size_t bytes) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_IO(io);
    CW_CHECK_ARG(bytes > 0);
    return flow::io_alloc(io, bytes, out);
}

CW_API cw_status cw_io_get_port_ptr(cw_io *io, const char *port, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(port != NULL && dptr != NULL);
    CUdeviceptr d = 0;
    CW_TRY(flow::io_port_ptr(io, port, &d));
    *dptr = d;
    return CW_SUCCESS;
}

CW_API cw_status cw_io_get_info(cw_io *io, cw_io_info *info) {
    CW_ENTRY;
    CW_CHECK_IO(io);
    CW_CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    info->op = io->op;
    info->iteration = io->iteration;
    info->name = io->op->name;
    info->resident_ctl = io->resident ? io->ctl : 0;
    return CW_SUCCESS;
}

}  // extern "C"
