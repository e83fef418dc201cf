/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: the CUDA driver loader.
#include "driver/driver.hpp"

#include <atomic>
#include <dlfcn.h>
#include <mutex>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cuweave/device.h"  // cw_feature
#include "driver/error.hpp"

namespace cw {

Driver g_driver;

namespace {

Driver g_loaded;  // as resolved; g_driver is this unless the test seam replaced it

// Minimum driver: CUDA 12.0 (cuGetProcAddress with symbol status, the
// *_v2 stream memory operations, context ids).
constexpr int kMinDriverVersion = 12000;

using GetProcV2 = CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
using GetProcV1 = CUresult (*)(const char *, void **, int, cuuint64_t);

std::atomic<int> g_state{0};  // 0 = not tried, 1 = done (g_status holds the result)
std::mutex g_init_mutex;
cw_status g_status = CW_ERROR_NO_DRIVER;
int g_version = 0;
void *g_lib = nullptr;
// The driver loaded is the one the loader gives for "libcuda.so.1" (a
// libcupti found on its own links that one); written once, by load().
char g_other_driver[512];
GetProcV2 g_getproc2 = nullptr;
GetProcV1 g_getproc1 = nullptr;
bool g_features[8];
char g_init_text[640];
CUresult (*g_error_name)(CUresult, const char **) = nullptr;
CUresult (*g_error_string)(CUresult, const char **) = nullptr;

const char *const kEntryNames[] = {
#define CW_DRV_NAME_(member, symbol, version, params) #member,
    CW_DRIVER_REQUIRED(CW_DRV_NAME_) CW_DRIVER_OPTIONAL(CW_DRV_NAME_)
#undef CW_DRV_NAME_
};
static_assert(sizeof kEntryNames / sizeof kEntryNames[0] == DRV_ENTRY_COUNT, "entry names");

// Resolves one symbol at one version. Legacy-stream variants always: cuweave
// never relies on the per-thread default stream, and a wrapped NULL stream
// must mean what it means to the video tool that hands it over.
void *resolve(const char *symbol, int version) {
    void *fn = nullptr;
    if (g_getproc2) {
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (g_getproc2(symbol, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q) != CUDA_SUCCESS ||
            q != CU_GET_PROC_ADDRESS_SUCCESS)
            return nullptr;
    } else if (g_getproc1(symbol, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM) != CUDA_SUCCESS) {
        return nullptr;
    }
    return fn;
}

cw_status load() {
    const char *path = getenv("CUWEAVE_LIBCUDA");
    if (!path || !*path) path = "libcuda.so.1";
    g_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_lib)
        return fail(CW_ERROR_NO_DRIVER, "no CUDA driver: dlopen(\"%s\") failed: %s", path, dlerror());
    // Another driver than the system's: CUWEAVE_LIBCUDA named a library
    // that is not what "libcuda.so.1" finds, by name or soname (the real
    // driver named by its path is the system's).
    void *sys = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (sys != g_lib) snprintf(g_other_driver, sizeof g_other_driver, "%s", path);
    if (sys) dlclose(sys);
    g_getproc2 = reinterpret_cast<GetProcV2>(dlsym(g_lib, "cuGetProcAddress_v2"));
    if (!g_getproc2) g_getproc1 = reinterpret_cast<GetProcV1>(dlsym(g_lib, "cuGetProcAddress"));
    if (!g_getproc2 && !g_getproc1)
        return fail(CW_ERROR_NO_DRIVER, "no CUDA driver: %s has no cuGetProcAddress (driver older than 11.3)",
                    path);

    Driver t{};
    // cuDriverGetVersion first, so that an old driver is named as such.
    t.cuDriverGetVersion = reinterpret_cast<decltype(t.cuDriverGetVersion)>(resolve("cuDriverGetVersion", 2020));
    if (!t.cuDriverGetVersion || t.cuDriverGetVersion(&g_version) != CUDA_SUCCESS)
        return fail(CW_ERROR_NO_DRIVER, "no CUDA driver: cuDriverGetVersion unavailable in %s", path);
    if (g_version < kMinDriverVersion)
        return fail(CW_ERROR_NOT_SUPPORTED, "the CUDA driver is version %d.%d; cuweave needs 12.0 or newer",
                    g_version / 1000, g_version % 1000 / 10);

#define CW_DRV_REQ_(member, symbol, version, params)                                        \
    t.member = reinterpret_cast<decltype(t.member)>(resolve(symbol, version));              \
    if (!t.member)                                                                          \
        return fail(CW_ERROR_NOT_SUPPORTED, "the CUDA driver (%d) lacks %s (version %d)",   \
                    g_version, symbol, version);
    CW_DRIVER_REQUIRED(CW_DRV_REQ_)
#undef CW_DRV_REQ_
#define CW_DRV_OPT_(member, symbol, version, params) \
    t.member = reinterpret_cast<decltype(t.member)>(resolve(symbol, version));
    CW_DRIVER_OPTIONAL(CW_DRV_OPT_)
#undef CW_DRV_OPT_

    bool missing[8] = {false};
    bool seen[8] = {false};
#define CW_DRV_PROBE_(symbol, version, feature) \
    seen[feature] = true;                       \
    if (!resolve(symbol, version)) missing[feature] = true;
    CW_DRIVER_PROBES(CW_DRV_PROBE_)
#undef CW_DRV_PROBE_
    for (int f = 0; f < 8; f++) g_features[f] = seen[f] && !missing[f];

    g_error_name = t.cuGetErrorName;
    g_error_string = t.cuGetErrorString;
    g_loaded = t;
    g_driver = t;

    CUresult r = g_driver.cuInit(0);
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuInit");
    log(CW_LOG_INFO, "cuweave: CUDA driver %d.%d loaded from %s", g_version / 1000, g_version % 1000 / 10, path);
    return CW_SUCCESS;
}

}  // namespace

cw_status ensure_init() {
    if (__builtin_expect(g_state.load(std::memory_order_acquire) == 1, 1)) {
        if (__builtin_expect(g_status == CW_SUCCESS, 1)) return CW_SUCCESS;
        // Report the first failure again, for this call.
        return fail(g_status, "%s", g_init_text);
    }
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (g_state.load(std::memory_order_relaxed) == 0) {
        g_status = load();
        if (g_status != CW_SUCCESS) {
            // Leave the table empty: nothing may call a half-loaded driver.
            g_driver = Driver{};
            // Keep the reason, less the "function: " prefix, for later calls.
            const cw_error_info &e = last_error();
            size_t skip = strlen(e.function) + 2;
            snprintf(g_init_text, sizeof g_init_text, "%s",
                     strlen(e.message) > skip ? e.message + skip : e.message);
        }
        g_state.store(1, std::memory_order_release);
        return g_status;
    }
    return g_status == CW_SUCCESS ? CW_SUCCESS : fail(g_status, "%s", g_init_text);
}

bool driver_has(int feature) {
    if (ensure_init() != CW_SUCCESS) return false;
    if (feature < 0 || feature >= 8) return false;
    return g_features[feature];
}

int driver_version() { return g_version; }

bool driver_error_text(CUresult result, const char **name, const char **text) {
    if (!g_error_name || !g_error_string) return false;
    if (g_error_name(result, name) != CUDA_SUCCESS) *name = nullptr;
    if (g_error_string(result, text) != CUDA_SUCCESS) *text = nullptr;
    return true;
}

const char *driver_other() { return g_other_driver[0] ? g_other_driver : nullptr; }

const Driver &driver_loaded() { return g_loaded; }

void driver_install(const Driver &table) { g_driver = table; }

const char *driver_entry_name(int id) {
    if (id < 0 || id >= DRV_ENTRY_COUNT) return nullptr;
    return kEntryNames[id];
}

}  // namespace cw
