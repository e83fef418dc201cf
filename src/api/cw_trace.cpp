/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: traces (cuweave/trace.h).
#include "api/api.hpp"
#include "core/trace.hpp"
#include "flow/flow.hpp"
#include "graph/resident_timeline.hpp"

using namespace cw;

CW_API void cw_trace_settings_default(cw_trace_settings *s) {
    if (s) memset(s, 0, sizeof *s);
}

CW_API cw_status cw_trace_create(cw_trace **out, const cw_trace_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    if (settings && !api::all_zero(settings->reserved, sizeof settings->reserved))
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: settings has nonzero reserved bytes");
    if (settings && settings->gpu_timing > CW_TRACE_GPU_CUPTI)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: settings.gpu_timing %u is not a cw_trace_gpu_timing",
                    settings->gpu_timing);
    return core::trace_create(settings, out);
}

CW_API void cw_trace_destroy(cw_trace **pt) {
    CW_ENTRY;
    if (!pt || !*pt) return;
    cw_trace *t = *pt;
    *pt = NULL;
    if (!live(t)) {
        log(CW_LOG_WARNING, "%s: not a live cw_trace; nothing destroyed", current_api());
        return;
    }
    core::trace_destroy(t);
}

CW_API cw_status cw_trace_name_stream(cw_trace *t, cw_stream *s, const char *name) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(name != NULL);
    return core::trace_name_stream(t, s, name, false);
}

CW_API cw_status cw_trace_name_thread(cw_trace *t, const char *name) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_ARG(name != NULL);
    return core::trace_name_thread(t, name);
}

CW_API cw_status cw_trace_begin(cw_trace *t, cw_stream *s, const char *name) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(name != NULL);
    return core::trace_begin(t, s, name);
}

CW_API cw_status cw_trace_end(cw_trace *t, cw_stream *s) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(s);
    return core::trace_end(t, s);
}

CW_API cw_status cw_trace_host_begin(cw_trace *t, const char *name) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_ARG(name != NULL);
    return core::trace_host_begin(t, name);
}

CW_API cw_status cw_trace_host_end(cw_trace *t) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    return core::trace_host_end(t);
}

CW_API cw_status cw_pipeline_set_trace(cw_pipeline *p, cw_trace *t) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    if (t) CW_CHECK_HANDLE(t);
    return flow::pipeline_set_trace(p, t);
}

CW_API cw_status cw_trace_record_resident(cw_trace *t, cw_resident *r) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_HANDLE(r);
    return graphs::resident_record_trace(t, r);
}

CW_API cw_status cw_trace_get_info(const cw_trace *t, cw_trace_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_ARG(info != NULL);
    core::trace_info(t, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_trace_write(cw_trace *t, const char *path) {
    CW_ENTRY;
    CW_CHECK_HANDLE(t);
    CW_CHECK_ARG(path != NULL);
    return core::trace_write(t, path);
}
