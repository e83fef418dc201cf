/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/resident.h (the GPU-resident loop).
#include <stdlib.h>

#include "api/api.hpp"
#include "graph/resident.hpp"
#include "jit/jit.hpp"
#include "kernel/kernel.hpp"

using namespace cw;

static_assert(sizeof(cw_resident_settings) == 104, "cw_resident_settings keeps its 0.1 size");
static_assert(sizeof(cw_resident_info) == 144, "cw_resident_info: 16 bytes of context and state, then the 0.1 stats");
static_assert(sizeof(cw_resident_fused) == 96, "cw_resident_fused: 0.2's size (mode, stage_defs, in_flight and watchdog_ms in its reserved bytes)");
static_assert(offsetof(cw_resident_fused, stage_defs) == 56, "cw_resident_fused.stage_defs follows mode");
static_assert(sizeof(cw_fused_stage) == 80 && sizeof(cw_fused_dep) == 48, "dataflow descriptors");

namespace {

void defaults(cw_resident_settings *s) {
    memset(s, 0, sizeof *s);
    s->timeout_ms = 0;
    s->sleep_interval_us = 500;
    s->sleep_mode = CW_RESIDENT_SLEEP_ADAPTIVE;
    s->spin_us = 200;
    s->sync_with_host = 0;
    s->input_slots = 0;
    s->input_bytes = 0;
    s->unroll = 16;
    s->gate = CW_RESIDENT_GATE_AUTO;
    s->overlap = CW_RESIDENT_OVERLAP_AUTO;
    s->priority = 0;
    s->use_default_priority = 1;
    s->destroy_timeout_ms = 5000;
}

cw_status check_settings(const cw_resident_settings *s) {
    CW_CHECK_ARG(s->sleep_interval_us <= graphs::kMaxSleepUs);
    CW_CHECK_ARG(s->spin_us <= graphs::kMaxSleepUs);
    CW_CHECK_ARG(api::raw_enum(s->sleep_mode) <= CW_RESIDENT_SLEEP_ADAPTIVE);
    CW_CHECK_ARG(api::raw_enum(s->gate) <= CW_RESIDENT_GATE_BEGIN_END);
    CW_CHECK_ARG(s->input_slots <= 2);
    CW_CHECK_ARG(s->input_slots == 0 ? s->input_bytes == 0 : s->input_bytes > 0);
    CW_CHECK_ARG(s->unroll >= 1 && s->unroll <= graphs::kMaxUnroll);
    const bool overlap_on = s->overlap != 0 && s->overlap != CW_RESIDENT_OVERLAP_AUTO;
    if (overlap_on && api::raw_enum(s->gate) != CW_RESIDENT_GATE_KERNELS &&
        api::raw_enum(s->gate) != CW_RESIDENT_GATE_BEGIN_END)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: overlap needs gate CW_RESIDENT_GATE_KERNELS or CW_RESIDENT_GATE_BEGIN_END (an IF "
                    "node between the kernels breaks the chain of launches it overlaps); overlap "
                    "CW_RESIDENT_OVERLAP_AUTO turns it on where it applies");
    if (s->trace && overlap_on)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: trace and overlap cannot be combined (the marks trace adds between the "
                    "kernels would break the chain of launches overlap makes)");
    if (s->trace && api::raw_enum(s->gate) == CW_RESIDENT_GATE_BEGIN_END)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: trace and gate CW_RESIDENT_GATE_BEGIN_END cannot be combined (the workload's "
                    "stage marks would run outside cw_resident_begin and cw_resident_end)");
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    return CW_SUCCESS;
}

// The settings as the loop keeps them: booleans 0 or 1.
cw_resident_settings normalized(const cw_resident_settings *s) {
    cw_resident_settings n = *s;
    n.sync_with_host = s->sync_with_host != 0;
    n.use_default_priority = s->use_default_priority != 0;
    n.overlap = s->overlap == CW_RESIDENT_OVERLAP_AUTO ? CW_RESIDENT_OVERLAP_AUTO : s->overlap != 0;
    n.trace = s->trace != 0;
    return n;
}

cw_status check_fused(const cw_resident_fused *f) {
    CW_CHECK_ARG(f->source != NULL);
    if (f->stage_count == 0 || f->stage_count > CW_RESIDENT_MAX_FUSED_STAGES)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: stage_count %u (1 to %u)", f->stage_count,
                    CW_RESIDENT_MAX_FUSED_STAGES);
    CW_CHECK_ARG(f->option_count == 0 || f->options != NULL);
    for (uint32_t i = 0; i < f->option_count; i++) CW_CHECK_ARG(f->options[i] != NULL);
    if (f->block_threads > 1024)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: block_threads %u (at most 1024)", f->block_threads);
    for (size_t i = 0; i < sizeof f->reserved; i++) CW_CHECK_ARG(f->reserved[i] == 0);
    return CW_SUCCESS;
}

}  // namespace

// Compiles the fused kernel for r's device (the kernel cache) and loads it
// (api.hpp: cw_pipeline_make_fused compiles a pipeline's this way).
cw_status cw::api::compile_fused(cw_resident *r, const cw_resident_fused *f, cw_module **m, cw_kernel **k) {
    char *src = nullptr;
    CW_TRY(graphs::fused_source(f, &src));
    cw_header headers[1] = {{"cuweave/resident_device.h", kResidentDeviceHeader}};
    cw_program_settings ps;
    memset(&ps, 0, sizeof ps);
    ps.name = graphs::fused_mode(f) == CW_FUSED_DATAFLOW ? "cuweave_fused_dataflow.cu" : "cuweave_fused_loop.cu";
    ps.options = f->options;
    ps.n_options = f->option_count;
    ps.headers = headers;
    ps.n_headers = 1;
    ps.cache = CW_CACHE_DEFAULT;
    cw_program *p = nullptr;
    cw_status st = jit::program_compile(r->ctx, src, &ps, &p);
    free(src);
    if (st != CW_SUCCESS) return st;
    st = jit::module_load(p, m);
    jit::program_destroy(p);
    if (st != CW_SUCCESS) return st;
    st = kernels::module_get_kernel(*m, graphs::fused_kernel_name(f), k);
    if (st != CW_SUCCESS) {
        kernels::module_destroy(*m);
        *m = nullptr;
    }
    return st;
}

extern "C" {

CW_API void cw_resident_settings_default(cw_resident_settings *s) {
    if (s) defaults(s);
}

CW_API cw_status cw_resident_create(cw_resident **out, cw_context *ctx, const cw_resident_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    cw_resident_settings def;
    defaults(&def);
    const cw_resident_settings *s = settings ? settings : &def;
    CW_TRY(check_settings(s));
    const cw_resident_settings n = normalized(s);
    return graphs::resident_create(ctx, &n, out);
}

CW_API void cw_resident_destroy(cw_resident **pr) {
    CW_ENTRY;
    if (!pr || !*pr) return;
    cw_resident *r = *pr;
    *pr = nullptr;
    if (!live(r)) {
        cw::log(CW_LOG_WARNING, "%s: *r is not a live cw_resident; nothing destroyed", current_api());
        return;
    }
    graphs::resident_destroy(r);
}

CW_API cw_status cw_resident_configure(cw_resident *r, const cw_resident_settings *settings) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(settings != NULL);
    CW_TRY(check_settings(settings));
    const cw_resident_settings n = normalized(settings);
    return graphs::resident_configure(r, &n);
}

CW_API cw_status cw_resident_get_settings(const cw_resident *r, cw_resident_settings *settings) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(settings != NULL);
    *settings = r->set;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_ctl(const cw_resident *r, cw_devptr *ctl) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(ctl != NULL);
    *ctl = r->dev;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_input(const cw_resident *r, uint32_t slot, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(dptr != NULL);
    if (slot >= r->set.input_slots)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: input slot %u of a loop with %u slots", slot,
                    r->set.input_slots);
    *dptr = r->input + (cw_devptr)slot * r->set.input_bytes;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_set_workload(cw_resident *r, const cw_graph *workload) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    if (workload) CW_CHECK_HANDLE(workload);
    return graphs::resident_set_part(r, false, workload, nullptr, nullptr);
}

CW_API cw_status cw_resident_set_workload_fn(cw_resident *r, cw_resident_capture_fn fn, void *user) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    return graphs::resident_set_part(r, false, nullptr, fn, user);
}

CW_API cw_status cw_resident_set_handler_fn(cw_resident *r, cw_resident_capture_fn fn, void *user) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    return graphs::resident_set_part(r, true, nullptr, fn, user);
}

CW_API cw_status cw_resident_set_handler(cw_resident *r, const cw_graph *handler) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    if (handler) CW_CHECK_HANDLE(handler);
    return graphs::resident_set_part(r, true, handler, nullptr, nullptr);
}

CW_API cw_status cw_resident_stage_begin(cw_resident *r, cw_stream *s, const char *name, uint32_t *stage) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(name != NULL && name[0] != 0);
    CW_CHECK_ARG(stage != NULL);
    return graphs::resident_stage_begin(r, s, name, stage);
}

CW_API cw_status cw_resident_stage_end(cw_resident *r, cw_stream *s, uint32_t stage) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_HANDLE(s);
    return graphs::resident_stage_end(r, s, stage);
}

CW_API cw_status cw_resident_build(cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    return graphs::resident_build(r);
}

CW_API cw_status cw_resident_launch(cw_resident *r) {
    CW_ENTRY;
    CW_NVTX_RANGE(resident_launch);
    CW_CHECK_HANDLE(r);
    return graphs::resident_launch(r);
}

CW_API cw_status cw_resident_data_ready(cw_resident *r, uint64_t *seq) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    return graphs::resident_data_ready(r, seq);
}

CW_API cw_status cw_resident_poll_result(const cw_resident *r, uint64_t seq) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    return graphs::resident_poll_result(r, seq);
}

CW_API cw_status cw_resident_wait_result(const cw_resident *r, uint64_t seq, uint32_t timeout_ms) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(resident_wait, seq);
    CW_CHECK_HANDLE(r);
    return graphs::resident_wait_result(r, seq, timeout_ms);
}

CW_API cw_status cw_resident_next_input(cw_resident *r, uint32_t timeout_ms, cw_devptr *dptr) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(dptr != NULL);
    CUdeviceptr p = 0;
    CW_TRY(graphs::resident_next_input(r, timeout_ms, &p));
    *dptr = p;
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_tear_down(cw_resident *r, uint32_t timeout_ms) {
    CW_ENTRY;
    CW_NVTX_RANGE(resident_tear_down);
    CW_CHECK_HANDLE(r);
    return graphs::resident_tear_down(r, timeout_ms);
}

CW_API cw_status cw_resident_get_state(const cw_resident *r, cw_resident_state *state) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(state != NULL);
    *state = graphs::resident_state(r);
    return CW_SUCCESS;
}

CW_API cw_status cw_resident_get_info(cw_resident *r, cw_resident_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    CW_CHECK_ARG(info != NULL);
    return graphs::resident_info(r, info);
}

CW_API cw_status cw_resident_set_fused(cw_resident *r, const cw_resident_fused *fused) {
    CW_ENTRY;
    CW_CHECK_HANDLE(r);
    if (!fused) return graphs::resident_clear_fused(r);
    CW_TRY(check_fused(fused));
    CW_TRY(graphs::fused_may_set(r));  // before compiling: a loop that cannot take it compiles nothing
    cw_module *m = nullptr;
    cw_kernel *k = nullptr;
    CW_TRY(api::compile_fused(r, fused, &m, &k));
    cw_status st = graphs::resident_set_fused(r, fused, m, k);
    if (st != CW_SUCCESS) kernels::module_destroy(m);
    return st;
}

CW_API const char *cw_builtin_get_resident_header(void) { return kResidentDeviceHeader; }

}  // extern "C"
