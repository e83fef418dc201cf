// cuweave: run-time compiled kernels. Programs (NVRTC behind the cache),
// modules and kernels (the library API), launches, and the library's own
// kernels embedded at build time. The NVRTC loader lives in driver.cpp, the
// cache in jit_cache.cpp.
#include <mutex>
#include <new>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.hpp"
#include "jit/sha256.hpp"

namespace cw {

// Made by tools/embed.py at build time (from nvcc's fatbin, or from the
// checked-in PTX).
extern const unsigned long long kBuiltinImage[];
extern const size_t kBuiltinImageSize;
extern const char kBuiltinOrigin[];

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

// Runs NVRTC. On success *out is a new entry (refs 1) without its key.
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
            // the first lines of the log go into the detail; all of it into cw_compile_log()
            char head[400];
            snprintf(head, sizeof head, "%s", logbuf ? logbuf : "(NVRTC gave no log)");
            for (char *p = head; *p; p++)
                if (*p == '\n' && p[1]) *p = ' ';
            st = fail(CW_ERROR_COMPILE, "NVRTC could not compile %s (%s): %s (the whole log: cw_compile_log())", name,
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
    CW_CHECK_ARG(s->cache == CW_CACHE_DEFAULT || s->cache == CW_CACHE_MEMORY_ONLY || s->cache == CW_CACHE_NONE);
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
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
    room.publish(p, kTagProgram);
    *out = p;
    return CW_SUCCESS;
}

bool program_ok(const cw_program *p) { return handle_live(p, kTagProgram); }
bool module_ok(const cw_module *m) { return handle_live(m, kTagModule); }
bool kernel_ok(const cw_kernel *k) { return handle_live(k, kTagKernel); }

cw_status need_library_api() {
    CW_TRY(ensure_init());
    if (!drv().cuLibraryLoadData || !drv().cuLibraryGetKernel || !drv().cuLibraryUnload || !drv().cuLaunchKernelEx)
        return fail(CW_ERROR_NOT_SUPPORTED, "this driver has no library API (cuLibraryLoadData, CUDA 12.0)");
    return CW_SUCCESS;
}

cw_module *module_new(CUlibrary lib, bool builtin) {
    HandleRoom room;
    if (room.reserve() != CW_SUCCESS) return nullptr;
    void *m = calloc(1, sizeof(cw_module));
    if (!m) return nullptr;
    cw_module *mod = new (m) cw_module();
    mod->cu = lib;
    mod->builtin = builtin;
    room.publish(mod, kTagModule);
    return mod;
}

void module_free(cw_module *m) {
    handle_retire(m);
    cw_kernel *k = m->kernels;
    while (k) {
        cw_kernel *next = k->next;
        handle_retire(k);
        free(k->name);
        free(k);
        k = next;
    }
    for (size_t i = 0; i < m->n_names; i++) {
        free(m->exprs[i]);
        free(m->lowered[i]);
    }
    free(m->exprs);
    free(m->lowered);
    CUresult r = drv().cuLibraryUnload(m->cu);
    if (r != CUDA_SUCCESS) log(CW_LOG_WARNING, "%s: cuLibraryUnload failed with CUresult %d", current_api(), r);
    m->~cw_module();
    free(m);
}

cw_status get_kernel(cw_module *m, const char *name, cw_kernel **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    SpinLock lock(m->lock);
    for (cw_kernel *k = m->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k;
            return CW_SUCCESS;
        }
    const char *sym = name;
    for (size_t i = 0; i < m->n_names; i++)
        if (strcmp(m->exprs[i], name) == 0) sym = m->lowered[i];
    CUkernel ck = nullptr;
    CUresult r = drv().cuLibraryGetKernel(&ck, m->cu, sym);
    if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the module has no kernel \"%s\"%s%s%s", name,
                    sym != name ? " (lowered: " : "", sym != name ? sym : "", sym != name ? ")" : "");
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuLibraryGetKernel");
    cw_kernel *k = static_cast<cw_kernel *>(calloc(1, sizeof(cw_kernel)));
    char *n = dup_string(name);
    if (!k || !n) {
        free(k);
        free(n);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    k->module = m;
    k->cu = ck;
    k->name = n;
    k->next = m->kernels;
    room.publish(k, kTagKernel);
    m->kernels = k;
    *out = k;
    return CW_SUCCESS;
}

// ---- built-ins -----------------------------------------------------------------

// The public built-ins (cw_builtin order), then the library's internal ones
// (BuiltinInternal order).
const char *const kBuiltinNames[kBuiltinTotal] = {"cwk_fill_u32",  "cwk_write_u32", "cwk_timestamp",
                                                  "cwk_set_cond",  "cwk_res_arm",   "cwk_res_poll",
                                                  "cwk_res_gate",  "cwk_res_signal", "cwk_res_exit",
                                                  "cwk_res_mark"};
std::mutex g_builtin_mutex;
cw_module *g_builtin_module;
cw_kernel *g_builtin[kBuiltinTotal];

cw_status builtins_load() {
    std::lock_guard<std::mutex> lock(g_builtin_mutex);
    if (g_builtin_module) return CW_SUCCESS;
    CW_TRY(need_library_api());
    CW_TRY(refuse_load_while_resident("loading cuweave's built-in kernels"));
    CUlibrary lib = nullptr;
    CUresult r = drv().cuLibraryLoadData(&lib, kBuiltinImage, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuLibraryLoadData", "loading cuweave's built-in kernels");
    cw_module *m = module_new(lib, true);
    if (!m) {
        drv().cuLibraryUnload(lib);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    cw_kernel *ks[kBuiltinTotal] = {};
    for (int i = 0; i < kBuiltinTotal; i++) {
        cw_status st = get_kernel(m, kBuiltinNames[i], &ks[i]);
        if (st != CW_SUCCESS) {
            module_free(m);
            return st;
        }
    }
    for (int i = 0; i < kBuiltinTotal; i++) g_builtin[i] = ks[i];
    g_builtin_module = m;  // lives as long as the process
    log(CW_LOG_INFO, "cuweave: built-in kernels loaded (%s, %zu bytes)", kBuiltinOrigin, kBuiltinImageSize);
    return CW_SUCCESS;
}

}  // namespace

cw_status builtin_get(int index, cw_kernel **out) {
    if (index < 0 || index >= kBuiltinTotal) return fail(CW_ERROR_INTERNAL, "no built-in kernel %d", index);
    CW_TRY(builtins_load());
    *out = g_builtin[index];
    return CW_SUCCESS;
}

}  // namespace cw

using namespace cw;

extern "C" {

CW_API cw_status cw_nvrtc_version(int *major, int *minor) {
    CW_ENTRY;
    CW_CHECK_ARG(major != NULL || minor != NULL);
    const Nvrtc *n;
    CW_TRY(ensure_nvrtc(&n));
    int ma = 0, mi = 0;
    int r = n->nvrtcVersion(&ma, &mi);
    if (r != 0) return fail_nvrtc(r, "nvrtcVersion");
    if (major) *major = ma;
    if (minor) *minor = mi;
    return CW_SUCCESS;
}

CW_API void cw_program_settings_default(cw_program_settings *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->name = "cuweave.cu";
    s->cache = CW_CACHE_DEFAULT;
}

CW_API const char *cw_compile_log(void) {
    pthread_once(&g_log_once, make_log_key);
    const char *s = static_cast<const char *>(pthread_getspecific(g_log_key));
    return s ? s : "";
}

CW_API cw_status cw_program_compile(cw_program **out, cw_context *ctx, const char *source,
                                    const cw_program_settings *settings) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(source != NULL);
    cw_program_settings def;
    cw_program_settings_default(&def);
    const cw_program_settings *s = settings ? settings : &def;
    CW_TRY(check_settings(s));
    if (s->arch == 0 || ctx) CW_CHECK_CONTEXT(ctx);
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
    const bool use_disk = cacheable && s->cache == CW_CACHE_DEFAULT && cfg.dir[0];
    if (use_memory) {
        JitEntry *e = memory_find(material);
        if (e) {
            g_jit.memory_hits.fetch_add(1, std::memory_order_relaxed);
            set_log("", 0);
            return new_program(e, CW_FROM_MEMORY, true, out);
        }
    }
    // The SHA-256 only past the memory cache: a memory hit compares the bytes.
    uint8_t key[32];
    sha256(material.data, material.size, key);
    if (use_disk) {
        JitEntry *e = nullptr;
        if (disk_load(cfg.dir, key, &e) == DiskResult::Hit) {
            g_jit.disk_hits.fetch_add(1, std::memory_order_relaxed);
            if (use_memory) memory_put(material, e);
            set_log("", 0);
            return new_program(e, CW_FROM_DISK, true, out);
        }
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
            log(CW_LOG_WARNING, "%s: the kernel cache was not written: %s", current_api(), cw_last_error_message());
            cw_clear_error();
        }
    }
    return new_program(e, CW_FROM_COMPILE, cacheable, out);
}

CW_API void cw_program_destroy(cw_program **pp) {
    CW_ENTRY;
    if (!pp || !*pp) return;
    cw_program *p = *pp;
    *pp = NULL;
    if (!program_ok(p)) {
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_program; nothing destroyed");
        return;
    }
    handle_retire(p);
    entry_release(p->entry);
    free(p);
}

CW_API cw_status cw_program_get_info(const cw_program *p, cw_program_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(program_ok, p, "cw_program");
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

CW_API cw_status cw_program_lowered_name(const cw_program *p, const char *expr, const char **lowered) {
    CW_ENTRY;
    CW_CHECK_HANDLE(program_ok, p, "cw_program");
    CW_CHECK_ARG(expr != NULL);
    CW_CHECK_ARG(lowered != NULL);
    for (size_t i = 0; i < p->entry->n_names; i++)
        if (strcmp(p->entry->exprs[i], expr) == 0) {
            *lowered = p->entry->lowered[i];
            return CW_SUCCESS;
        }
    return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: \"%s\" is not a name expression of the program", expr);
}

CW_API cw_status cw_module_load(cw_module **out, const cw_program *p) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(program_ok, p, "cw_program");
    CW_TRY(need_library_api());
    CW_TRY(refuse_load_while_resident("cw_module_load"));
    const JitEntry *e = p->entry;
    // copy the name expressions first: nothing may fail once the library is loaded
    char **ex = nullptr, **lo = nullptr;
    if (e->n_names) {
        ex = static_cast<char **>(calloc(e->n_names, sizeof(char *)));
        lo = static_cast<char **>(calloc(e->n_names, sizeof(char *)));
        bool ok = ex && lo;
        for (size_t i = 0; ok && i < e->n_names; i++) ok = (ex[i] = dup_string(e->exprs[i])) && (lo[i] = dup_string(e->lowered[i]));
        if (!ok) {
            for (size_t i = 0; i < e->n_names; i++) {
                if (ex) free(ex[i]);
                if (lo) free(lo[i]);
            }
            free(ex);
            free(lo);
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    CUlibrary lib = nullptr;
    CUresult r = drv().cuLibraryLoadData(&lib, e->code, nullptr, nullptr, 0, nullptr, nullptr, 0);
    cw_module *m = r == CUDA_SUCCESS ? module_new(lib, false) : nullptr;
    if (!m) {
        for (size_t i = 0; i < e->n_names; i++) {
            free(ex[i]);
            free(lo[i]);
        }
        free(ex);
        free(lo);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuLibraryLoadData");
        drv().cuLibraryUnload(lib);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    m->n_names = e->n_names;
    m->exprs = ex;
    m->lowered = lo;
    *out = m;
    return CW_SUCCESS;
}

CW_API cw_status cw_module_load_image(cw_module **out, const void *image) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(image != NULL);
    CW_TRY(need_library_api());
    CW_TRY(refuse_load_while_resident("cw_module_load_image"));
    CUlibrary lib = nullptr;
    CW_CU(cuLibraryLoadData, (&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
    cw_module *m = module_new(lib, false);
    if (!m) {
        drv().cuLibraryUnload(lib);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = m;
    return CW_SUCCESS;
}

CW_API void cw_module_destroy(cw_module **pm) {
    CW_ENTRY;
    if (!pm || !*pm) return;
    cw_module *m = *pm;
    if (!module_ok(m)) {
        *pm = NULL;
        fail(CW_ERROR_INVALID_HANDLE, "not a live cw_module; nothing destroyed");
        return;
    }
    if (m->builtin) {
        fail(CW_ERROR_INVALID_STATE, "the built-in kernels' module belongs to the library");
        return;
    }
    *pm = NULL;
    // Dead to callers now; unloading waits for running loops, so it waits
    // until none runs.
    handle_retire(m);
    for (cw_kernel *k = m->kernels; k; k = k->next) handle_retire(k);
    m->idle.run = [](void *owner) { module_free(static_cast<cw_module *>(owner)); };
    m->idle.owner = m;
    release_when_idle(&m->idle);
}

CW_API cw_status cw_module_get_kernel(cw_module *m, const char *name, cw_kernel **kernel) {
    CW_ENTRY;
    CW_CHECK_HANDLE(module_ok, m, "cw_module");
    CW_CHECK_ARG(name != NULL && *name);
    CW_CHECK_ARG(kernel != NULL);
    return get_kernel(m, name, kernel);
}

CW_API cw_status cw_kernel_preload(const cw_kernel *k, cw_context *ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(kernel_ok, k, "cw_kernel");
    CW_CHECK_CONTEXT(ctx);
    if (!drv().cuKernelGetFunction) return fail(CW_ERROR_NOT_SUPPORTED, "this driver has no library API (CUDA 12.0)");
    CW_TRY(refuse_load_while_resident("cw_kernel_preload"));
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    return guard.leave();
}

CW_API cw_status cw_kernel_get_params(const cw_kernel *k, cw_context *ctx, size_t *count, size_t *sizes, size_t cap) {
    CW_ENTRY;
    CW_CHECK_HANDLE(kernel_ok, k, "cw_kernel");
    CW_CHECK_CONTEXT(ctx);
    CW_CHECK_ARG(count != NULL);
    CW_CHECK_ARG(cap == 0 || sizes != NULL);
    if (!drv().cuKernelGetParamInfo || !drv().cuKernelGetFunction)
        return fail(CW_ERROR_NOT_SUPPORTED, "this driver cannot list a kernel's parameters (CUDA 12.4)");
    // Loaded lazily: make sure it is in ctx before asking.
    CurrentGuard guard;
    CW_TRY(guard.enter(ctx->cu));
    CUfunction f = nullptr;
    CW_CU(cuKernelGetFunction, (&f, k->cu));
    size_t n = 0;
    for (;; n++) {
        size_t off = 0, size = 0;
        CUresult r = drv().cuKernelGetParamInfo(k->cu, n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuKernelGetParamInfo");
        if (n < cap) sizes[n] = size;
    }
    CW_TRY(guard.leave());
    *count = n;
    return CW_SUCCESS;
}

CW_API void cw_launch_config_default(cw_launch_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->grid[0] = c->grid[1] = c->grid[2] = 1;
    c->block[0] = c->block[1] = c->block[2] = 1;
}

namespace cw {
namespace {
const CUcontext kFilling = reinterpret_cast<CUcontext>(uintptr_t(1));

// The kernel's function in ctx from the cache, or nullptr.
CUfunction cached_function(const cw_kernel *k, CUcontext ctx) {
    for (const auto &e : k->fns) {
        CUcontext c = e.ctx.load(std::memory_order_acquire);
        if (c == ctx) return e.fn;
        if (!c) break;
    }
    return nullptr;
}

// Puts the kernel's function in s's context into the cache (best effort:
// nothing when the cache is full, the stream is capturing (resolving may
// load code, which a capture may not see), or the driver says no).
void cache_function(cw_kernel *k, const cw_stream *s) {
    if (!drv().cuKernelGetFunction || capturing(s) || s->is_null) return;
    bool room = false;  // a full cache costs a launch no driver call
    for (const auto &e : k->fns) room = room || !e.ctx.load(std::memory_order_acquire);
    if (!room) return;
    CUstreamCaptureStatus cs = 0;
    if (drv().cuStreamIsCapturing(s->cu, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE) return;
    for (auto &e : k->fns) {
        CUcontext expected = nullptr;
        if (e.ctx.load(std::memory_order_acquire) == s->ctx->cu) return;
        if (!e.ctx.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) {
            if (expected == s->ctx->cu) return;
            continue;  // another context's, or being filled
        }
        CurrentGuard guard;
        CUfunction f = nullptr;
        if (guard.enter(s->ctx->cu) == CW_SUCCESS && drv().cuKernelGetFunction(&f, k->cu) == CUDA_SUCCESS &&
            guard.leave() == CW_SUCCESS && f) {
            e.fn = f;
            e.ctx.store(s->ctx->cu, std::memory_order_release);
        } else {
            e.ctx.store(nullptr, std::memory_order_release);  // free again
        }
        return;
    }
}
}  // namespace
}  // namespace cw

CW_API cw_status cw_kernel_launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args) {
    CW_ENTRY;
    CW_CHECK_HANDLE(kernel_ok, k, "cw_kernel");
    CW_CHECK_STREAM(s);
    CW_CHECK_ARG(cfg != NULL);
    CW_CHECK_ARG(cfg->use_priority == 0 || cfg->use_priority == 1);
    CUlaunchAttribute attrs[2];
    unsigned na = 0;
    if (cfg->cluster[0] || cfg->cluster[1] || cfg->cluster[2]) {
        memset(&attrs[na], 0, sizeof attrs[na]);
        attrs[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[na].value.clusterDim.x = cfg->cluster[0] ? cfg->cluster[0] : 1;
        attrs[na].value.clusterDim.y = cfg->cluster[1] ? cfg->cluster[1] : 1;
        attrs[na].value.clusterDim.z = cfg->cluster[2] ? cfg->cluster[2] : 1;
        na++;
    }
    if (cfg->use_priority) {
        memset(&attrs[na], 0, sizeof attrs[na]);
        attrs[na].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attrs[na].value.priority = cfg->priority;
        na++;
    }
    CUlaunchConfig lc;
    lc.gridDimX = cfg->grid[0] ? cfg->grid[0] : 1;
    lc.gridDimY = cfg->grid[1] ? cfg->grid[1] : 1;
    lc.gridDimZ = cfg->grid[2] ? cfg->grid[2] : 1;
    lc.blockDimX = cfg->block[0] ? cfg->block[0] : 1;
    lc.blockDimY = cfg->block[1] ? cfg->block[1] : 1;
    lc.blockDimZ = cfg->block[2] ? cfg->block[2] : 1;
    lc.sharedMemBytes = cfg->shared_bytes;
    lc.hStream = s->cu;
    lc.attrs = na ? attrs : nullptr;
    lc.numAttrs = na;
    // The kernel's function in s's context when cached; else the kernel
    // itself (the driver finds its function in the stream's context).
    CUfunction fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    if (!fn) {
        cache_function(k, s);
        fn = s->is_null ? nullptr : cached_function(k, s->ctx->cu);
    }
    if (fn && na == 0)  // the plain launch: the cheapest to enqueue
        return on_stream(s, "cuLaunchKernel", [&] {
            return drv().cuLaunchKernel(fn, lc.gridDimX, lc.gridDimY, lc.gridDimZ, lc.blockDimX, lc.blockDimY,
                                        lc.blockDimZ, lc.sharedMemBytes, lc.hStream, args, nullptr);
        });
    if (!fn) fn = reinterpret_cast<CUfunction>(k->cu);
    return on_stream(s, "cuLaunchKernelEx", [&] { return drv().cuLaunchKernelEx(&lc, fn, args, nullptr); });
}

CW_API cw_status cw_kernel_get_handle(const cw_kernel *k, void **cukernel) {
    CW_ENTRY;
    CW_CHECK_HANDLE(kernel_ok, k, "cw_kernel");
    CW_CHECK_ARG(cukernel != NULL);
    *cukernel = k->cu;
    return CW_SUCCESS;
}

CW_API cw_status cw_builtin_kernel(cw_builtin which, cw_kernel **kernel) {
    CW_ENTRY;
    CW_CHECK_ARG(which >= 0 && which < CW_BUILTIN_COUNT);
    CW_CHECK_ARG(kernel != NULL);
    CW_TRY(builtins_load());
    *kernel = g_builtin[which];
    return CW_SUCCESS;
}

CW_API const char *cw_builtin_origin(void) { return kBuiltinOrigin; }

}  // extern "C"
