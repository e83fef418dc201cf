/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: programs compiled by NVRTC behind the kernel cache, and
// their code loaded as modules (jit.hpp). The NVRTC loader is the driver
// layer's (driver/nvrtc.cpp), the cache is cache.cpp (memory)
// and disk.cpp (disk).
#include <new>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "driver/nvrtc.hpp"
#include "jit/jit.hpp"
#include "jit/sha256.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace jit {

using namespace core;

namespace {

// ---- the per-thread compile log ---------------------------------------------

pthread_key_t g_log_key;
pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
void make_log_key() { pthread_key_create(&g_log_key, free); }

void set_log(const char *text, size_t n) {
    pthread_once(&g_log_once, make_log_key);
    char *old = static_cast<char *>(pthread_getspecific(g_log_key));
    char *s = static_cast<char *>(malloc(n + 1));
    if (s) {
        memcpy(s, text, n);
        s[n] = '\0';
    }
    pthread_setspecific(g_log_key, s);
    free(old);
}

cw_status nvrtc_fail(const Nvrtc *nv, int r, const char *call) {
    char what[256];
    snprintf(what, sizeof what, "%s", nv->nvrtcGetErrorString ? nv->nvrtcGetErrorString(r) : "?");
    return fail_nvrtc(r, call, what);
}

cw_status nvrtc_compile(const Nvrtc *nv, const char *source, const cw_program_settings *s,
                        const CanonOptions &opts, int arch, JitEntry **out) {
    const size_t nh = s->n_headers;
    const char **hsrc = nh ? static_cast<const char **>(malloc(nh * sizeof(char *))) : nullptr;
    const char **hname = nh ? static_cast<const char **>(malloc(nh * sizeof(char *))) : nullptr;
    const char **argv = static_cast<const char **>(malloc((opts.n + 1) * sizeof(char *)));
    if ((nh && (!hsrc || !hname)) || !argv) {
        free(hsrc);
        free(hname);
        free(argv);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    for (size_t i = 0; i < nh; i++) {
        hsrc[i] = s->headers[i].source;
        hname[i] = s->headers[i].name;
    }
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s_%d", s->output_ptx ? "compute" : "sm", arch);
    for (size_t i = 0; i < opts.n; i++) argv[i] = opts.opts[i];
    argv[opts.n] = archopt;
    nvrtcProgram prog = nullptr;
    const char *name = s->name && *s->name ? s->name : "cuweave.cu";
    int r = nv->nvrtcCreateProgram(&prog, source, name, (int)nh, hsrc, hname);
    free(hsrc);
    free(hname);
    if (r != 0) {
        free(argv);
        return nvrtc_fail(nv, r, "nvrtcCreateProgram");
    }
    cw_status st = CW_SUCCESS;
    for (size_t i = 0; i < s->n_name_expressions && st == CW_SUCCESS; i++) {
        r = nv->nvrtcAddNameExpression(prog, s->name_expressions[i]);
        if (r != 0) st = nvrtc_fail(nv, r, "nvrtcAddNameExpression");
    }
    int cr = 0;
    if (st == CW_SUCCESS) {
        CW_NVTX_RANGE(nvrtc_compile);
        cr = nv->nvrtcCompileProgram(prog, (int)(opts.n + 1), argv);
        g_jit.compiles.fetch_add(1, std::memory_order_relaxed);
        size_t loglen = 0;
        char *logbuf = nullptr;
        if (nv->nvrtcGetProgramLogSize(prog, &loglen) == 0 && loglen > 0 &&
            (logbuf = static_cast<char *>(malloc(loglen))) && nv->nvrtcGetProgramLog(prog, logbuf) == 0) {
            size_t n = strnlen(logbuf, loglen);
            set_log(logbuf, n);
        } else {
            set_log("", 0);
        }
        if (cr != 0) {
            // the first lines of the log go into the detail; all of it into cw_jit_get_compile_log()
            char head[400];
            snprintf(head, sizeof head, "%s", logbuf ? logbuf : "(NVRTC gave no log)");
            for (char *p = head; *p; p++)
                if (*p == '\n' && p[1]) *p = ' ';
            st = fail(CW_ERROR_COMPILE, "NVRTC could not compile %s (%s): %s (the whole log: cw_jit_get_compile_log())", name,
                      nv->nvrtcGetErrorString(cr), head);
        }
        free(logbuf);
    }
    free(argv);
    JitEntry *e = nullptr;
    if (st == CW_SUCCESS) {
        e = entry_new();
        if (!e) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    if (st == CW_SUCCESS) {
        size_t size = 0;
        r = s->output_ptx ? nv->nvrtcGetPTXSize(prog, &size) : nv->nvrtcGetCUBINSize(prog, &size);
        if (r != 0) st = nvrtc_fail(nv, r, s->output_ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize");
        if (st == CW_SUCCESS) {
            e->code = static_cast<uint8_t *>(calloc(size + 1, 1));
            if (!e->code) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        if (st == CW_SUCCESS) {
            r = s->output_ptx ? nv->nvrtcGetPTX(prog, reinterpret_cast<char *>(e->code))
                              : nv->nvrtcGetCUBIN(prog, reinterpret_cast<char *>(e->code));
            if (r != 0) st = nvrtc_fail(nv, r, s->output_ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN");
            // PTX size counts its NUL; keep the text's length
            e->size = s->output_ptx && size ? strnlen(reinterpret_cast<char *>(e->code), size) : size;
            e->is_ptx = s->output_ptx;
            e->arch = arch;
        }
        const size_t ne = s->n_name_expressions;
        if (st == CW_SUCCESS && ne) {
            e->exprs = static_cast<char **>(calloc(ne, sizeof(char *)));
            e->lowered = static_cast<char **>(calloc(ne, sizeof(char *)));
            if (!e->exprs || !e->lowered) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            else e->n_names = ne;
            for (size_t i = 0; i < ne && st == CW_SUCCESS; i++) {
                const char *low = nullptr;
                r = nv->nvrtcGetLoweredName(prog, s->name_expressions[i], &low);
                if (r != 0) {
                    st = nvrtc_fail(nv, r, "nvrtcGetLoweredName");
                    break;
                }
                e->exprs[i] = dup_string(s->name_expressions[i]);
                e->lowered[i] = dup_string(low);
                if (!e->exprs[i] || !e->lowered[i]) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            }
        }
    }
    nv->nvrtcDestroyProgram(&prog);
    if (st != CW_SUCCESS) {
        entry_release(e);
        return st;
    }
    *out = e;
    return CW_SUCCESS;
}

cw_status new_program(JitEntry *e, cw_cache_source src, bool cached, cw_program **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    cw_program *p = static_cast<cw_program *>(calloc(1, sizeof(cw_program)));
    if (!p) {
        entry_release(e);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    p->entry = e;
    p->source = src;
    p->cached = cached;
    hex32(e->key, p->key);
    room.publish(p);
    *out = p;
    return CW_SUCCESS;
}

}  // namespace

const char *compile_log() {
    pthread_once(&g_log_once, make_log_key);
    const char *s = static_cast<const char *>(pthread_getspecific(g_log_key));
    return s ? s : "";
}

cw_status program_compile(cw_context *ctx, const char *source, const cw_program_settings *s, cw_program **out) {
    CanonOptions opts;
    CW_TRY(canonical_options(s->options, s->n_options, &opts));
    CW_TRY(ensure_init());
    int arch = s->arch;
    if (arch == 0) {
        int ma = 0, mi = 0;
        CW_CU(cuDeviceGetAttribute, (&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->device));
        CW_CU(cuDeviceGetAttribute, (&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ctx->device));
        arch = ma * 10 + mi;
    }
    const Nvrtc *nv = nullptr;
    CW_TRY(ensure_nvrtc(&nv));
    JitInput in{};
    in.source = source;
    in.headers = s->headers;
    in.n_headers = s->n_headers;
    in.options = &opts;
    in.exprs = s->name_expressions;
    in.n_exprs = s->n_name_expressions;
    in.arch = arch;
    in.ptx = s->output_ptx;
    int r = nv->nvrtcVersion(&in.nvrtc_major, &in.nvrtc_minor);
    if (r != 0) return fail_nvrtc(r, "nvrtcVersion");
    in.driver_version = driver_version();
    Bytes material;
    CW_TRY(key_material(in, &material));

    CacheConfig cfg;
    cache_config(&cfg);
    const bool cacheable = s->cache != CW_CACHE_NONE && !opts.reads_files;
    const bool use_memory = cacheable && cfg.memory;
    bool use_disk = cacheable && s->cache == CW_CACHE_DEFAULT && cfg.dir[0];
    if (use_memory) {
        JitEntry *e = memory_find(material);
        if (e) {
            g_jit.memory_hits.fetch_add(1, std::memory_order_relaxed);
            CW_NVTX_MARK_N(cache_hit_memory, 0);
            set_log("", 0);
            return new_program(e, CW_FROM_MEMORY, true, out);
        }
    }
    // The SHA-256 only past the memory cache: a memory hit compares the bytes.
    uint8_t key[32];
    sha256(material.data, material.size, key);
    if (use_disk) {
        JitEntry *e = nullptr;
        const DiskResult dr = disk_load(cfg.dir, key, &e);
        if (dr == DiskResult::Hit) {
            g_jit.disk_hits.fetch_add(1, std::memory_order_relaxed);
            CW_NVTX_MARK_N(cache_hit_disk, 0);
            if (use_memory) memory_put(material, e);
            set_log("", 0);
            return new_program(e, CW_FROM_DISK, true, out);
        }
        if (dr == DiskResult::DirRefused) use_disk = false;  // an untrusted directory: not written either
    }
    JitEntry *e = nullptr;
    CW_TRY(nvrtc_compile(nv, source, s, opts, arch, &e));
    memcpy(e->key, key, 32);
    if (use_memory) memory_put(material, e);
    if (use_disk) {
        // A cache that cannot be written only makes the next process slower:
        // the compile itself succeeded. Say so in the log, not as a failure.
        cw_status ds = disk_store(cfg.dir, e, cfg.max_bytes);
        if (ds != CW_SUCCESS) {
            log(CW_LOG_WARNING, "%s: the kernel cache was not written: %s", current_api(), last_error().message);
            clear_error();
        }
    }
    return new_program(e, CW_FROM_COMPILE, cacheable, out);
}

void program_destroy(cw_program *p) {
    handle_retire(p);
    entry_release(p->entry);
    handle_free(p);
}

cw_status program_lowered_name(const cw_program *p, const char *expr, const char **lowered) {
    for (size_t i = 0; i < p->entry->n_names; i++)
        if (strcmp(p->entry->exprs[i], expr) == 0) {
            *lowered = p->entry->lowered[i];
            return CW_SUCCESS;
        }
    return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: \"%s\" is not a name expression of the program", expr);
}

cw_status module_load(const cw_program *p, cw_module **out) {
    const JitEntry *e = p->entry;
    return kernels::module_load(e->code, e->n_names, e->exprs, e->lowered, "cw_module_load", out);
}

}  // namespace jit
}  // namespace cw
