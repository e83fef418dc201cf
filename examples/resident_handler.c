/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU-resident loop driven by the GPU: a data-ready handler (a kernel
 * the loop runs at the start of every iteration) watches a frame counter
 * that another kernel, standing in for a GPU-direct input (a NIC or a
 * sensor bridge writing into GPU memory), advances every 100 us. When a
 * frame has arrived, the handler marks data ready and the loop runs the
 * workload for it; no host thread takes part. The host only waits for the
 * last frame's result and checks what the workload saw.
 *
 * Kernels compiled with NVRTC, with <cuweave/resident_device.h> from memory.
 * Without a GPU or NVRTC it says why and exits 77; exits 1 on a failure.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include <cuweave/cuweave.h>

enum { FRAMES = 200 };

static const char *k_source =
    "#include \"cuweave/resident_device.h\"\n"
    "__device__ unsigned long long now() {\n"
    "    unsigned long long t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); return t; }\n"
    "// the input: a frame every gap_ns (a GPU-direct source in a real system)\n"
    "extern \"C\" __global__ void produce(unsigned *arrived, unsigned n, long long gap_ns) {\n"
    "    for (unsigned i = 0; i < n; i++) {\n"
    "        unsigned long long end = now() + gap_ns; while (now() < end) {}\n"
    "        atomicAdd(arrived, 1u); __threadfence();\n"
    "    }\n"
    "}\n"
    "// the data-ready handler: one frame per iteration, when one is waiting\n"
    "extern \"C\" __global__ void ready(cw_resident_ctl *ctl, const unsigned *arrived, unsigned *taken) {\n"
    "    if (*(const volatile unsigned *)arrived > *taken) { *taken += 1; cw_resident_mark_data_ready(ctl); }\n"
    "    else cw_resident_mark_data_not_ready(ctl);\n"
    "}\n"
    "// the workload: adds the frame's number (its request number) to a sum\n"
    "extern \"C\" __global__ void process(const cw_resident_ctl *ctl, unsigned long long *sum) {\n"
    "    if (cw_resident_skip(ctl)) return;  // an iteration whose handler found no frame\n"
    "    *sum += cw_resident_sequence(ctl);\n"
    "}\n";

int main(void) {
    printf("resident_handler: a GPU-resident loop fed by a GPU-side data-ready handler\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st == CW_SUCCESS && !cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*mem_alloc)(unsigned long long *, size_t) = NULL;
    int (*mem_free)(unsigned long long) = NULL;
    int (*memset32)(unsigned long long, unsigned, size_t) = NULL;
    int (*dtoh)(void *, unsigned long long, size_t) = NULL;
    int (*set_current)(CUcontext) = NULL;
    if (lib) {
        *(void **)&mem_alloc = dlsym(lib, "cuMemAlloc_v2");
        *(void **)&mem_free = dlsym(lib, "cuMemFree_v2");
        *(void **)&memset32 = dlsym(lib, "cuMemsetD32_v2");
        *(void **)&dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
        *(void **)&set_current = dlsym(lib, "cuCtxSetCurrent");
    }
    if (st != CW_SUCCESS || !mem_alloc || !mem_free || !memset32 || !dtoh || !set_current) {
        fprintf(stderr, "resident_handler: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL, *input = NULL;
    cw_program *p = NULL;
    cw_module *m = NULL;
    cw_kernel *produce = NULL, *ready = NULL, *process = NULL;
    cw_graph *hg = NULL, *wg = NULL;
    cw_resident *r = NULL;
    CUcontext cu = NULL;
    unsigned long long mem = 0; /* arrived (4 bytes), taken (4), sum (8) */
#define TRY(expr)                                                                 \
    do {                                                                          \
        if ((expr) != CW_SUCCESS) {                                               \
            fprintf(stderr, "resident_handler: %s\n", cw_last_error()->message);   \
            if (cw_last_error()->status == CW_ERROR_COMPILE)                      \
                fprintf(stderr, "%s", cw_jit_get_compile_log());                          \
            goto out;                                                             \
        }                                                                         \
    } while (0)

    cw_context_info ctx_info;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_context_get_info(ctx, &ctx_info));
    cu = ctx_info.handle;
    TRY(cw_stream_create(&s, ctx, NULL));
    TRY(cw_stream_create(&input, ctx, NULL));
    cw_header header = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "handler.cu";
    ps.headers = &header;
    ps.n_headers = 1;
    TRY(cw_program_compile(&p, ctx, k_source, &ps));
    TRY(cw_module_load(&m, p));
    TRY(cw_module_get_kernel(m, "produce", &produce));
    TRY(cw_module_get_kernel(m, "ready", &ready));
    TRY(cw_module_get_kernel(m, "process", &process));
    /* every kernel this context will run is loaded before the loop starts:
     * loading code into a context waits for its running kernels, and the
     * loop's never end (the ones the loop runs are loaded when it is built) */
    TRY(cw_kernel_preload(produce, ctx));
    if (set_current(cu) != 0 || mem_alloc(&mem, 16) != 0 || memset32(mem, 0, 4) != 0) goto out;
    unsigned long long arrived = mem, taken = mem + 4, sum = mem + 8;

    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_mode = CW_RESIDENT_SLEEP_ADAPTIVE; /* spin right after a frame, then back off */
    rs.sleep_interval_us = 50;
    TRY(cw_resident_create(&r, ctx, &rs));
    cw_devptr ctl = 0;
    TRY(cw_resident_get_ctl(r, &ctl));

    cw_launch_config lc;
    cw_launch_config_default(&lc);
    void *ready_args[] = {&ctl, &arrived, &taken};
    TRY(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    TRY(cw_kernel_launch(ready, s, &lc, ready_args));
    TRY(cw_capture_end(&hg, s));
    void *process_args[] = {&ctl, &sum};
    TRY(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    TRY(cw_kernel_launch(process, s, &lc, process_args));
    TRY(cw_capture_end(&wg, s));
    TRY(cw_resident_set_handler(r, hg));
    TRY(cw_resident_set_workload(r, wg));
    TRY(cw_resident_launch(r));

    /* the "input device" starts sending frames */
    unsigned frames = FRAMES;
    long long gap = 100000;
    void *produce_args[] = {&arrived, &frames, &gap};
    TRY(cw_kernel_launch(produce, input, &lc, produce_args));
    TRY(cw_resident_wait_result(r, FRAMES, 10000)); /* the FRAMES-th frame's result */
    TRY(cw_stream_synchronize(input));
    unsigned long long got = 0;
    if (set_current(cu) != 0 || dtoh(&got, sum, sizeof got) != 0) goto out;
    const unsigned long long want = (unsigned long long)FRAMES * (FRAMES + 1) / 2;
    ok = got == want;
    cw_resident_info stats;
    TRY(cw_resident_get_info(r, &stats));
    printf("%u frames served on the GPU, each once and in order (sum of frame numbers %llu, expected %llu): %s\n",
           FRAMES, got, want, ok ? "yes" : "NO");
    printf("iterations that found no frame: %llu; per frame on the GPU: median %.2f us\n",
           (unsigned long long)stats.idle_polls, stats.iter_median_ns / 1e3);
    TRY(cw_resident_tear_down(r, 1000));

out:
    if (r && cw_resident_tear_down(r, 1000) != CW_SUCCESS) ok = 0; /* destroy would abandon it (logged) */
    cw_resident_destroy(&r);
    if (input) cw_stream_synchronize(input);
    if (mem && set_current && set_current(cu) == 0) mem_free(mem);
    if (set_current) set_current(NULL);
    cw_graph_destroy(&hg);
    cw_graph_destroy(&wg);
    cw_module_destroy(&m);
    cw_program_destroy(&p);
    cw_stream_destroy(&input);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
