/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: the CUPTI loader (cupti.hpp), opened on first use only.
#include "driver/cupti.hpp"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "driver/driver.hpp"
#include "driver/error.hpp"

namespace cw {

namespace {
std::mutex g_cupti_mutex;
std::atomic<int> g_cupti_state{0};  // 0 untried, 1 loaded, 2 failed
Cupti g_cupti;
void *g_cupti_lib = nullptr;
char g_cupti_error[768];

// CUPTI 12.0 (CUDA 12.0) and newer: the records' heads cupti_min.h declares.
constexpr uint32_t kMinCuptiVersion = 18;

bool cupti_load(void *lib, Cupti *t) {
#define CW_CUPTI_LOAD_(name, params) \
    if (!(t->name = reinterpret_cast<decltype(t->name)>(dlsym(lib, #name)))) return false;
    CW_CUPTI_ENTRIES(CW_CUPTI_LOAD_)
#undef CW_CUPTI_LOAD_
    t->cuptiActivityGetNumDroppedRecords =
        reinterpret_cast<decltype(t->cuptiActivityGetNumDroppedRecords)>(dlsym(lib, "cuptiActivityGetNumDroppedRecords"));
    return true;
}

// The directory of libcuweave itself (a wheel's site-packages/cuweave), or "".
void own_dir(char *out, size_t len) {
    out[0] = 0;
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(&ensure_cupti), &info) || !info.dli_fname) return;
    snprintf(out, len, "%s", info.dli_fname);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = 0;
    else
        out[0] = 0;
}

// Tries the candidates in order; the first that opens and has every entry wins.
void search() {
    enum { kMax = 16 };
    static char home[kMax][512];
    const char *names[kMax];
    size_t count = 0;
    const char *env = getenv("CUWEAVE_LIBCUPTI");
    (void)ensure_init();  // which driver is loaded decides what is searched
    const char *driver = driver_other();
    if (env && *env) {
        names[count++] = env;
    } else if (driver) {
        // A libcupti found on its own instruments the libcuda.so.1 it links,
        // not the driver cuweave was told to use: only a named one is taken.
        snprintf(g_cupti_error, sizeof g_cupti_error,
                 "CUPTI not searched: CUWEAVE_LIBCUDA names another driver (%s); name the CUPTI that sees it with "
                 "CUWEAVE_LIBCUPTI", driver);
        g_cupti_state.store(2, std::memory_order_release);
        return;
    } else {
        names[count++] = "libcupti.so.13";
        names[count++] = "libcupti.so.12";
        names[count++] = "libcupti.so";
        const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
        const char *subs[] = {"extras/CUPTI/lib64/libcupti.so", "lib64/libcupti.so", "lib/libcupti.so"};
        size_t h = 0;
        for (const char *root : roots) {
            if (!root || !*root) continue;
            for (const char *sub : subs) snprintf(home[h], sizeof home[h], "%s/%s", root, sub), names[count++] = home[h++];
        }
        char dir[384];
        own_dir(dir, sizeof dir);
        if (dir[0]) {
            snprintf(home[h], sizeof home[h], "%s/../nvidia/cu13/lib/libcupti.so.13", dir);
            names[count++] = home[h++];
            snprintf(home[h], sizeof home[h], "%s/../nvidia/cuda_cupti/lib/libcupti.so.12", dir);
            names[count++] = home[h++];
        }
    }
    size_t at = (size_t)snprintf(g_cupti_error, sizeof g_cupti_error, "CUPTI not found: tried");
    for (size_t i = 0; i < count; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            if (at < sizeof g_cupti_error)
                at += (size_t)snprintf(g_cupti_error + at, sizeof g_cupti_error - at, "%s %s", i ? "," : "", names[i]);
            continue;
        }
        Cupti t{};
        if (!cupti_load(lib, &t)) {
            snprintf(g_cupti_error, sizeof g_cupti_error, "%s lacks a CUPTI entry point cuweave uses", names[i]);
            dlclose(lib);
            continue;
        }
        if (t.cuptiGetVersion(&t.version) != CUPTI_SUCCESS || t.version < kMinCuptiVersion) {
            snprintf(g_cupti_error, sizeof g_cupti_error, "%s is CUPTI API version %u: cuweave needs %u (CUDA 12.0) or "
                     "newer", names[i], t.version, kMinCuptiVersion);
            dlclose(lib);
            continue;
        }
        snprintf(t.path, sizeof t.path, "%s", names[i]);
        g_cupti = t;
        g_cupti_lib = lib;
        g_cupti_state.store(1, std::memory_order_release);
        return;
    }
    g_cupti_state.store(2, std::memory_order_release);
}
}  // namespace

cw_status ensure_cupti(const Cupti **out, const char **why) {
    if (g_cupti_state.load(std::memory_order_acquire) == 0) {
        std::lock_guard<std::mutex> lock(g_cupti_mutex);
        if (g_cupti_state.load(std::memory_order_relaxed) == 0) search();
    }
    if (g_cupti_state.load(std::memory_order_acquire) != 1) {
        if (why) *why = g_cupti_error;
        return fail(CW_ERROR_NOT_SUPPORTED, "not supported: %s", g_cupti_error);
    }
    *out = &g_cupti;
    return CW_SUCCESS;
}

void cupti_forget() {
    std::lock_guard<std::mutex> lock(g_cupti_mutex);
    if (g_cupti_lib) dlclose(g_cupti_lib);
    g_cupti_lib = nullptr;
    memset(&g_cupti, 0, sizeof g_cupti);
    g_cupti_state.store(0, std::memory_order_release);
}

const char *cupti_result_name(const Cupti *c, CUptiResult r, char *buf, size_t len) {
    const char *s = nullptr;
    if (c && c->cuptiGetResultString && c->cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
    snprintf(buf, len, "CUPTI error %d", r);
    return buf;
}

}  // namespace cw
