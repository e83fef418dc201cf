/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave kernel layer: modules, their kernels, and the library's built-in
// kernels (kernel.hpp).
#include <mutex>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.hpp"
#include "kernel/kernel.hpp"

namespace cw {

// Made by tools/embed.py at build time (from nvcc's fatbin, or from the
// checked-in PTX).
extern const unsigned long long kBuiltinImage[];
extern const size_t kBuiltinImageSize;
extern const char kBuiltinOrigin[];

namespace kernels {

using namespace core;

namespace {

cw_module *module_new(CUlibrary lib, bool builtin) {
    HandleRoom room;
    if (room.reserve() != CW_SUCCESS) return nullptr;
    void *m = calloc(1, sizeof(cw_module));
    if (!m) return nullptr;
    cw_module *mod = new (m) cw_module();
    mod->cu = lib;
    mod->builtin = builtin;
    room.publish(mod);
    return mod;
}

void module_free(cw_module *m) {
    handle_retire(m);
    cw_kernel *k = m->kernels;
    while (k) {
        cw_kernel *next = k->next;
        handle_retire(k);
        kernel_params_free(k);
        free(k->name);
        handle_free(k);
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
    handle_free(m);
}

void free_names(char **ex, char **lo, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ex) free(ex[i]);
        if (lo) free(lo[i]);
    }
    free(ex);
    free(lo);
}

// The kernel `name` of m, made on first ask. publish: a handle callers may
// hold (in the registry); the library's own lookups need none.
cw_status get_kernel(cw_module *m, const char *name, cw_kernel **out, bool publish = true) {
    HandleRoom room;
    if (publish) CW_TRY(room.reserve());
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
    if (publish) room.publish(k);
    m->kernels = k;
    *out = k;
    return CW_SUCCESS;
}

// ---- built-ins -----------------------------------------------------------------

// The public built-ins, in cw_builtin order.
const char *const kBuiltinNames[CW_BUILTIN_COUNT] = {"cwk_fill_u32", "cwk_write_u32", "cwk_timestamp",
                                                     "cwk_set_cond"};
std::mutex g_builtin_mutex;
cw_module *g_builtin_module;
cw_kernel *g_builtin[CW_BUILTIN_COUNT];

cw_status builtins_load() {
    std::lock_guard<std::mutex> lock(g_builtin_mutex);
    if (g_builtin_module) return CW_SUCCESS;
    CW_TRY(need_library_api());
    QuietCall quiet;
    CW_TRY(refuse_load_while_persistent(quiet, "loading cuweave's built-in kernels"));
    CUlibrary lib = nullptr;
    CUresult r = drv().cuLibraryLoadData(&lib, kBuiltinImage, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuLibraryLoadData", "loading cuweave's built-in kernels");
    cw_module *m = module_new(lib, true);
    if (!m) {
        drv().cuLibraryUnload(lib);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    cw_kernel *ks[CW_BUILTIN_COUNT] = {};
    for (int i = 0; i < CW_BUILTIN_COUNT; i++) {
        cw_status st = get_kernel(m, kBuiltinNames[i], &ks[i]);
        if (st != CW_SUCCESS) {
            module_free(m);
            return st;
        }
    }
    for (int i = 0; i < CW_BUILTIN_COUNT; i++) g_builtin[i] = ks[i];
    g_builtin_module = m;  // lives as long as the process
    log(CW_LOG_INFO, "cuweave: built-in kernels loaded (%s, %zu bytes)", kBuiltinOrigin, kBuiltinImageSize);
    return CW_SUCCESS;
}

}  // namespace

cw_status need_library_api() {
    CW_TRY(ensure_init());
    if (!drv().cuLibraryLoadData || !drv().cuLibraryGetKernel || !drv().cuLibraryUnload || !drv().cuLaunchKernelEx)
        return fail(CW_ERROR_NOT_SUPPORTED, "this driver has no library API (cuLibraryLoadData, CUDA 12.0)");
    return CW_SUCCESS;
}

namespace {

bool is_blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// PTX: blanks and comments, then the .version directive (the PTX ISA: "each
// PTX module must begin with a .version directive"). Reads up to the NUL.
bool is_ptx(const unsigned char *b) {
    size_t i = 0;
    for (;;) {
        while (is_blank(b[i])) i++;
        if (b[i] == '/' && b[i + 1] == '/') {
            while (b[i] && b[i] != '\n') i++;
        } else if (b[i] == '/' && b[i + 1] == '*') {
            i += 2;
            while (b[i] && !(b[i] == '*' && b[i + 1] == '/')) i++;
            if (!b[i]) return false;
            i += 2;
        } else {
            break;
        }
    }
    return strncmp(reinterpret_cast<const char *>(b + i), ".version", 8) == 0 && is_blank(b[i + 8]);
}

uint32_t le32(const unsigned char *b) { return b[0] | b[1] << 8 | b[2] << 16 | uint32_t(b[3]) << 24; }

// b starts with the n bytes of magic, compared one by one: text shorter
// than the magic is not read past its NUL.
bool starts(const unsigned char *b, const char *magic, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != static_cast<unsigned char>(magic[i])) return false;
    return true;
}

}  // namespace

cw_status check_image(const void *image) {
    const unsigned char *b = static_cast<const unsigned char *>(image);
    if (starts(b, "\x7f" "ELF", 4)) {
        // e_ident[EI_CLASS] 2 (64-bit), e_ident[EI_DATA] 1 (little-endian),
        // e_machine (offset 18) 190 (EM_CUDA)
        if (b[4] == 2 && b[5] == 1 && (b[18] | b[19] << 8) == 190) return CW_SUCCESS;
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: image is an ELF file but not a cubin (class %u, data %u, machine %u; a "
                    "cubin is 64-bit little-endian ELF for EM_CUDA, 190)",
                    b[4], b[5], b[4] == 2 && b[5] == 1 ? unsigned(b[18] | b[19] << 8) : 0u);
    }
    if (starts(b, "\x50\xed\x55\xba", 4)) {  // fatBinaryHeader: magic, u16 version, u16 header size, u64 fat size
        const unsigned version = b[4] | b[5] << 8, header = b[6] | b[7] << 8;
        if (version == 1 && header >= 16) return CW_SUCCESS;
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: image has the fatbin magic but version %u and header size %u (a fatbin "
                    "has version 1 and a header of 16 bytes or more)",
                    version, header);
    }
    if (starts(b, "\xb1\x43\x62\x46", 4)) {  // nvcc's __fatBinC_Wrapper_t around a fatbin: magic, int version
        const uint32_t version = le32(b + 4);
        if (version == 1 || version == 2) return CW_SUCCESS;
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: image has the fatbin wrapper's magic but version %u (1 or 2)", version);
    }
    if (is_ptx(b)) return CW_SUCCESS;
    char start[8 * 3 + 1] = "";
    for (size_t i = 0, at = 0; i < 8; i++) {
        at += snprintf(start + at, sizeof start - at, i ? " %02x" : "%02x", b[i]);
        if (!b[i]) break;  // text ends: read no further
    }
    return fail(CW_ERROR_INVALID_ARGUMENT,
                "invalid argument: image is not a cubin (64-bit ELF for CUDA), a fatbin (magic 0xBA55ED50) or PTX "
                "(text whose first directive is .version); it starts with %s",
                start);
}

cw_status module_load(const void *image, size_t n_names, char *const *exprs, char *const *lowered, const char *what,
                      cw_module **out) {
    CW_TRY(need_library_api());
    QuietCall quiet;
    CW_TRY(refuse_load_while_persistent(quiet, what));
    // copy the name expressions first: nothing may fail once the library is loaded
    char **ex = nullptr, **lo = nullptr;
    if (n_names) {
        ex = static_cast<char **>(calloc(n_names, sizeof(char *)));
        lo = static_cast<char **>(calloc(n_names, sizeof(char *)));
        bool ok = ex && lo;
        for (size_t i = 0; ok && i < n_names; i++) ok = (ex[i] = dup_string(exprs[i])) && (lo[i] = dup_string(lowered[i]));
        if (!ok) {
            free_names(ex, lo, n_names);
            return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
    }
    CUlibrary lib = nullptr;
    CUresult r = drv().cuLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
    cw_module *m = r == CUDA_SUCCESS ? module_new(lib, false) : nullptr;
    if (!m) {
        free_names(ex, lo, n_names);
        if (r != CUDA_SUCCESS) return fail_cu(r, "cuLibraryLoadData");
        drv().cuLibraryUnload(lib);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    m->n_names = n_names;
    m->exprs = ex;
    m->lowered = lo;
    *out = m;
    return CW_SUCCESS;
}

void module_destroy(cw_module *m) {
    // Dead to callers now; unloading waits for persistent work, so it waits
    // until none runs.
    handle_retire(m);
    for (cw_kernel *k = m->kernels; k; k = k->next) handle_retire(k);
    m->idle.run = [](void *owner) { module_free(static_cast<cw_module *>(owner)); };
    m->idle.owner = m;
    release_when_idle(&m->idle);
}

cw_status module_get_kernel(cw_module *m, const char *name, cw_kernel **out) { return get_kernel(m, name, out); }

cw_status builtin_public(cw_builtin which, cw_kernel **out) {
    CW_TRY(builtins_load());
    *out = g_builtin[which];
    return CW_SUCCESS;
}

cw_status builtin_by_name(const char *name, cw_kernel **out) {
    CW_TRY(builtins_load());
    return get_kernel(g_builtin_module, name, out, false);
}

const char *builtin_origin() { return kBuiltinOrigin; }

}  // namespace kernels
}  // namespace cw
