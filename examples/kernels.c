/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Run-time compiled kernels with cuweave: compile a templated kernel with
 * NVRTC (a header from memory, fetched by its C++ name), load it once,
 * launch it, and show the kernel cache at work: the second compile comes
 * from memory, and a second run of this program finds the kernel on disk
 * (under $CUWEAVE_CACHE_DIR, $XDG_CACHE_HOME/cuweave or ~/.cache/cuweave).
 * The library's own fill kernel prepares the data (no NVRTC for that one).
 *
 * Device memory comes from a small dlopen of libcuda (cuweave has no
 * allocator yet). Without a GPU or without NVRTC it says why and exits 77;
 * exits 1 when a call fails or a result is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/kernels.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o kernels
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuweave/cuweave.h>

static const char *k_source =
    "#include \"scale.h\"\n"
    "template <typename T>\n"
    "__global__ void scale(T *x, T factor, unsigned n) {\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = x[i] * factor + (T)BIAS;\n"
    "}\n";

static const char *source_name(cw_cache_source s) {
    return s == CW_FROM_COMPILE ? "compiled by NVRTC" : s == CW_FROM_MEMORY ? "memory cache" : "disk cache";
}

int main(void) {
    printf("kernels: NVRTC, the kernel cache, a launch\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st == CW_SUCCESS && !cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    const char *path = getenv("CUWEAVE_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*mem_alloc)(unsigned long long *, size_t) = NULL;
    int (*mem_free)(unsigned long long) = NULL;
    int (*copy_dtoh)(void *, unsigned long long, size_t) = NULL;
    int (*set_current)(CUcontext) = NULL;
    if (lib) {
        *(void **)&mem_alloc = dlsym(lib, "cuMemAlloc_v2");
        *(void **)&mem_free = dlsym(lib, "cuMemFree_v2");
        *(void **)&copy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
        *(void **)&set_current = dlsym(lib, "cuCtxSetCurrent");
    }
    if (st != CW_SUCCESS || !mem_alloc || !mem_free || !copy_dtoh || !set_current) {
        fprintf(stderr, "kernels: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    cw_program *p = NULL, *again = NULL;
    cw_module *m = NULL;
    cw_kernel *scale = NULL, *fill = NULL;
    CUcontext cu = NULL;
    unsigned long long buf = 0;
    enum { N = 4096 };
    static float host[N];
#define TRY(expr)                                                          \
    do {                                                                   \
        if ((expr) != CW_SUCCESS) {                                        \
            fprintf(stderr, "kernels: %s\n", cw_last_error()->message);     \
            if (cw_last_error()->status == CW_ERROR_COMPILE)               \
                fprintf(stderr, "%s", cw_jit_get_compile_log());                   \
            goto out;                                                      \
        }                                                                  \
    } while (0)

    cw_context_info ctx_info;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_context_get_info(ctx, &ctx_info));
    cu = ctx_info.handle;
    TRY(cw_stream_create(&s, ctx, NULL));

    cw_header header = {"scale.h", "#define BIAS 0.5f\n"};
    const char *exprs[] = {"scale<float>"};
    const char *opts[] = {"-std=c++17"};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "scale.cu";
    ps.headers = &header;
    ps.n_headers = 1;
    ps.name_expressions = exprs;
    ps.n_name_expressions = 1;
    ps.options = opts;
    ps.n_options = 1;
    TRY(cw_program_compile(&p, ctx, k_source, &ps));
    cw_program_info pi;
    TRY(cw_program_get_info(p, &pi));
    cw_versions v;
    TRY(cw_get_versions(&v));
    printf("scale<float> for sm_%d: %zu bytes of cubin, %s (NVRTC %d.%d, key %.16s...)\n", pi.arch, pi.size,
           source_name(pi.source), v.nvrtc_major, v.nvrtc_minor, pi.key);
    TRY(cw_program_compile(&again, ctx, k_source, &ps));
    TRY(cw_program_get_info(again, &pi));
    printf("the same compile again: %s\n", source_name(pi.source));

    TRY(cw_module_load(&m, p));
    TRY(cw_module_get_kernel(m, "scale<float>", &scale));
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &fill));

    if (set_current(cu) != 0 || mem_alloc(&buf, N * sizeof(float)) != 0) goto out;
    /* fill with 2.0f (bits 0x40000000) using the built-in kernel, then scale by 3 */
    uint32_t two = 0x40000000u;
    uint64_t count = N;
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = N / 256;
    lc.block[0] = 256;
    void *fill_args[] = {&buf, &two, &count};
    TRY(cw_kernel_launch(fill, s, &lc, fill_args));
    float factor = 3.0f;
    unsigned n = N;
    void *scale_args[] = {&buf, &factor, &n};
    TRY(cw_kernel_launch(scale, s, &lc, scale_args));
    TRY(cw_stream_synchronize(s));
    if (set_current(cu) != 0 || copy_dtoh(host, buf, sizeof host) != 0) goto out;
    ok = 1;
    for (int i = 0; i < N; i++) ok &= host[i] == 6.5f;
    printf("x[i] = 2 * 3 + 0.5 for all %d elements: %s\n", N, ok ? "yes" : "NO");
    cw_jit_stats js;
    TRY(cw_jit_get_stats(&js));
    printf("this process: %llu NVRTC compile(s), %llu memory hit(s), %llu disk hit(s); run it again to load "
           "from disk\n",
           (unsigned long long)js.compiles, (unsigned long long)js.memory_hits, (unsigned long long)js.disk_hits);

out:
    if (s) cw_stream_synchronize(s);
    if (buf && set_current(cu) == 0) mem_free(buf);
    if (set_current) set_current(NULL);
    cw_module_destroy(&m);
    cw_program_destroy(&p);
    cw_program_destroy(&again);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
