/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/jit.h (NVRTC programs, the kernel cache,
// modules, kernels, launches, built-in kernels).
#include "api/api.hpp"
#include "driver/nvrtc.hpp"
#include "jit/jit.hpp"
#include "kernel/kernel.hpp"

using namespace cw;

// 0.2 added the argument check (arg_sizes, n_args) in the reserved bytes.
static_assert(sizeof(cw_launch_config) == 80, "cw_launch_config keeps its size");

namespace {

void defaults(cw_program_settings *s) {
    memset(s, 0, sizeof *s);
    s->name = "cuweave.cu";
    s->cache = CW_CACHE_DEFAULT;
}

void defaults(cw_jit_cache_settings *s) {
    memset(s, 0, sizeof *s);
    s->dir = nullptr;
    s->max_bytes = 0;
    s->memory = 1;
}

cw_status check_settings(const cw_program_settings *s) {
    CW_CHECK_ARG(s->n_options == 0 || s->options != NULL);
    CW_CHECK_ARG(s->n_headers == 0 || s->headers != NULL);
    CW_CHECK_ARG(s->n_name_expressions == 0 || s->name_expressions != NULL);
    for (size_t i = 0; i < s->n_headers; i++)
        if (!s->headers[i].name || !*s->headers[i].name || !s->headers[i].source)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: headers[%zu] needs a name and a source", i);
    for (size_t i = 0; i < s->n_name_expressions; i++)
        if (!s->name_expressions[i] || !*s->name_expressions[i])
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: name_expressions[%zu] is empty", i);
    CW_CHECK_ARG(s->arch >= 0 && s->arch < 1000);
    CW_CHECK_ARG(s->output_ptx == 0 || s->output_ptx == 1);
    const unsigned cache = api::raw_enum(s->cache);
    CW_CHECK_ARG(cache == CW_CACHE_DEFAULT || cache == CW_CACHE_MEMORY_ONLY || cache == CW_CACHE_NONE);
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    return CW_SUCCESS;
}

}  // namespace

extern "C" {

// ---- programs ---------------------------------------------------------------

CW_API void cw_program_settings_default(cw_program_settings *s) {
    if (s) defaults(s);
}

CW_API const char *cw_jit_get_compile_log(void) { return jit::compile_log(); }

CW_API cw_status cw_program_compile(cw_program **out, cw_context *ctx, const char *source,
                                    const cw_program_settings *settings) {
    CW_ENTRY;
    CW_NVTX_RANGE(program_compile);
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(source != NULL);
    cw_program_settings def;
    defaults(&def);
    const cw_program_settings *s = settings ? settings : &def;
    CW_TRY(check_settings(s));
    if (s->arch == 0 || ctx) CW_CHECK_HANDLE(ctx);
    return jit::program_compile(ctx, source, s, out);
}

CW_API void cw_program_destroy(cw_program **pp) {
    CW_ENTRY;
    if (!pp || !*pp) return;
    cw_program *p = *pp;
    *pp = NULL;
    if (!live(p)) {
        ignored(CW_ERROR_INVALID_HANDLE, "not a live cw_program; nothing destroyed");
        return;
    }
    jit::program_destroy(p);
}

CW_API cw_status cw_program_get_info(const cw_program *p, cw_program_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    info->code = p->entry->code;
    info->size = p->entry->size;
    info->is_ptx = p->entry->is_ptx;
    info->arch = p->entry->arch;
    info->source = p->source;
    info->cached = p->cached;
    memcpy(info->key, p->key, sizeof info->key);
    return CW_SUCCESS;
}

CW_API cw_status cw_program_get_lowered_name(const cw_program *p, const char *expr, const char **lowered) {
    CW_ENTRY;
    CW_CHECK_HANDLE(p);
    CW_CHECK_ARG(expr != NULL);
    CW_CHECK_ARG(lowered != NULL);
    return jit::program_lowered_name(p, expr, lowered);
}

// ---- the kernel cache -------------------------------------------------------------

CW_API void cw_jit_cache_settings_default(cw_jit_cache_settings *s) {
    if (s) defaults(s);
}

CW_API cw_status cw_jit_cache_configure(const cw_jit_cache_settings *s) {
    CW_ENTRY;
    CW_CHECK_ARG(s != NULL);
    CW_CHECK_ARG(s->memory == 0 || s->memory == 1);
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    CW_CHECK_ARG(s->dir == NULL || strlen(s->dir) < jit::kDirMax);
    return jit::cache_configure(s);
}

CW_API cw_status cw_jit_get_stats(cw_jit_stats *stats) {
    CW_ENTRY;
    CW_CHECK_ARG(stats != NULL);
    jit::cache_stats(stats);
    return CW_SUCCESS;
}

CW_API void cw_jit_cache_clear_memory(void) { jit::memory_clear(); }

CW_API cw_status cw_jit_cache_get_info(cw_jit_cache_info *info) {
    CW_ENTRY;
    CW_CHECK_ARG(info != NULL);
    jit::cache_info(info);
    return CW_SUCCESS;
}

CW_API cw_status cw_jit_cache_clear_disk(uint64_t *entries, uint64_t *bytes) {
    CW_ENTRY;
    return jit::cache_clear_disk(entries, bytes);
}

// ---- modules and kernels ------------------------------------------------------

CW_API cw_status cw_module_load(cw_module **out, const cw_program *p) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(p);
    return jit::module_load(p, out);
}

CW_API cw_status cw_module_load_image(cw_module **out, const void *image) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(image != NULL);
    CW_TRY(kernels::check_image(image));
    return kernels::module_load(image, 0, nullptr, nullptr, "cw_module_load_image", out);
}

CW_API void cw_module_destroy(cw_module **pm) {
    CW_ENTRY;
    if (!pm || !*pm) return;
    cw_module *m = *pm;
    *pm = NULL;
    if (!live(m)) {
        ignored(CW_ERROR_INVALID_HANDLE, "not a live cw_module; nothing destroyed");
        return;
    }
    if (m->builtin) {
        ignored(CW_ERROR_INVALID_STATE, "the built-in kernels' module belongs to the library; nothing destroyed");
        return;
    }
    kernels::module_destroy(m);
}

CW_API cw_status cw_module_get_kernel(cw_module *m, const char *name, cw_kernel **kernel) {
    CW_ENTRY;
    CW_CHECK_HANDLE(m);
    CW_CHECK_ARG(name != NULL && *name);
    CW_CHECK_ARG(kernel != NULL);
    return kernels::module_get_kernel(m, name, kernel);
}

CW_API cw_status cw_kernel_preload(const cw_kernel *k, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(k);
    CW_CHECK_HANDLE(ctx);
    return kernels::kernel_preload(k, ctx);
}

CW_API cw_status cw_kernel_get_params(const cw_kernel *k, cw_context *ctx, size_t *sizes, size_t cap, size_t *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(k);
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(cap == 0 || sizes != NULL);
    return kernels::kernel_params(k, ctx, count, sizes, cap);
}

CW_API void cw_launch_config_default(cw_launch_config *c) {
    if (c) kernels::launch_config_default(c);
}

CW_API cw_status cw_kernel_launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args) {
    CW_ENTRY;
    CW_CHECK_HANDLE(k);
    CW_CHECK_HANDLE(s);
    CW_CHECK_ARG(cfg != NULL);
    CW_CHECK_ARG(cfg->use_priority == 0 || cfg->use_priority == 1);
    CW_CHECK_ARG(cfg->arg_sizes != NULL || cfg->n_args == 0);
    CW_CHECK_ARG(api::all_zero(cfg->reserved, sizeof cfg->reserved));
    return kernels::launch(k, s, cfg, args);
}

CW_API cw_status cw_kernel_get_handle(const cw_kernel *k, void **cukernel) {
    CW_ENTRY;
    CW_CHECK_HANDLE(k);
    CW_CHECK_ARG(cukernel != NULL);
    *cukernel = k->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_builtin_get_kernel(cw_builtin which, cw_kernel **kernel) {
    CW_ENTRY;
    CW_CHECK_ARG(which >= 0 && which < CW_BUILTIN_COUNT);
    CW_CHECK_ARG(kernel != NULL);
    return kernels::builtin_public(which, kernel);
}


}  // extern "C"
