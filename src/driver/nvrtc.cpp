/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: the NVRTC loader (opened on first use only).
#include "driver/nvrtc.hpp"

#include <atomic>
#include <dlfcn.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>

#include "driver/error.hpp"

namespace cw {

namespace {
std::mutex g_nvrtc_mutex;
std::atomic<int> g_nvrtc_state{0};  // 0 untried, 1 loaded, 2 failed
Nvrtc g_nvrtc;
char g_nvrtc_error[512];

bool nvrtc_load(void *lib, Nvrtc *t) {
#define CW_NVRTC_LOAD_(name, params) \
    if (!(t->name = reinterpret_cast<decltype(t->name)>(dlsym(lib, #name)))) return false;
    CW_NVRTC_ENTRIES(CW_NVRTC_LOAD_)
#undef CW_NVRTC_LOAD_
    t->nvrtcGetErrorString = reinterpret_cast<decltype(t->nvrtcGetErrorString)>(dlsym(lib, "nvrtcGetErrorString"));
    return t->nvrtcGetErrorString != nullptr;
}
}  // namespace

cw_status ensure_nvrtc(const Nvrtc **out) {
    int state = g_nvrtc_state.load(std::memory_order_acquire);
    if (state == 0) {
        std::lock_guard<std::mutex> lock(g_nvrtc_mutex);
        state = g_nvrtc_state.load(std::memory_order_relaxed);
        if (state == 0) {
            const char *env = getenv("CUWEAVE_LIBNVRTC");
            // The loader's search path first, then the toolkit's usual homes.
            char home[3][512];
            const char *names[8];
            size_t count = 0;
            if (env && *env) {
                names[count++] = env;
            } else {
                names[count++] = "libnvrtc.so.13";
                names[count++] = "libnvrtc.so.12";
                names[count++] = "libnvrtc.so";
                const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
                for (int i = 0; i < 3; i++) {
                    if (!roots[i] || !*roots[i]) continue;
                    snprintf(home[i], sizeof home[i], "%s/lib64/libnvrtc.so", roots[i]);
                    names[count++] = home[i];
                }
            }
            state = 2;
            snprintf(g_nvrtc_error, sizeof g_nvrtc_error, "NVRTC not found");
            for (size_t i = 0; i < count && state != 1; i++) {
                void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
                if (!lib) {
                    snprintf(g_nvrtc_error, sizeof g_nvrtc_error, "dlopen(\"%s\") failed: %s", names[i], dlerror());
                    continue;
                }
                Nvrtc t{};
                if (nvrtc_load(lib, &t)) {
                    g_nvrtc = t;
                    state = 1;
                } else {
                    snprintf(g_nvrtc_error, sizeof g_nvrtc_error, "%s lacks an NVRTC entry point", names[i]);
                    dlclose(lib);
                }
            }
            g_nvrtc_state.store(state, std::memory_order_release);
        }
    }
    if (state != 1) return fail(CW_ERROR_NO_NVRTC, "NVRTC could not be loaded: %s", g_nvrtc_error);
    *out = &g_nvrtc;
    return CW_SUCCESS;
}

}  // namespace cw
