/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU-resident loop driven by the host: one graph launched once, then
 * 1000 requests, each with its own input. The workload is a kernel compiled
 * with NVRTC that includes <cuweave/resident_device.h> (handed to NVRTC from
 * memory by cw_builtin_get_resident_header()) to find its request number and
 * input slot. Two input slots: the host fills the slot of request n+1 while
 * request n runs. Prints the round trip seen by the host and the
 * per-iteration time the GPU measured.
 *
 * Device memory for the output comes from a small dlopen of libcuda
 * (cuweave has no allocator yet). Without a GPU or NVRTC it says why and
 * exits 77; exits 1 when a call fails or a result is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuweave/cuweave.h>

enum { N = 256, REQUESTS = 1000 };

static const char *k_source =
    "#include \"cuweave/resident_device.h\"\n"
    "extern \"C\" __global__ void square(const cw_resident_ctl *ctl, unsigned *out) {\n"
    "    if (cw_resident_skip(ctl)) return;  // no request in this iteration (the loop stops)\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < 256) out[i] = in[i] * in[i] + (unsigned)cw_resident_sequence(ctl);\n"
    "}\n";

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(void) {
    printf("resident: a GPU-resident loop driven by the host\n");
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
    int (*htod)(unsigned long long, const void *, size_t) = NULL;
    int (*dtoh)(void *, unsigned long long, size_t) = NULL;
    int (*set_current)(CUcontext) = NULL;
    int (*host_alloc)(void **, size_t) = NULL;
    int (*host_free)(void *) = NULL;
    if (lib) {
        *(void **)&host_alloc = dlsym(lib, "cuMemAllocHost_v2");
        *(void **)&host_free = dlsym(lib, "cuMemFreeHost");
        *(void **)&mem_alloc = dlsym(lib, "cuMemAlloc_v2");
        *(void **)&mem_free = dlsym(lib, "cuMemFree_v2");
        *(void **)&htod = dlsym(lib, "cuMemcpyHtoD_v2");
        *(void **)&dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
        *(void **)&set_current = dlsym(lib, "cuCtxSetCurrent");
    }
    if (st != CW_SUCCESS || !mem_alloc || !mem_free || !htod || !dtoh || !set_current || !host_alloc || !host_free) {
        fprintf(stderr, "resident: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    cw_program *p = NULL;
    cw_module *m = NULL;
    cw_kernel *square = NULL;
    cw_graph *g = NULL;
    cw_resident *r = NULL;
    CUcontext cu = NULL;
    unsigned long long out = 0;
    /* the input in pinned memory: from there cuMemcpyHtoD returns only once
     * the data is on the GPU (from pageable memory it may return earlier,
     * and the request made next could read the previous input) */
    unsigned *in = NULL;
    static unsigned res[N];
#define TRY(expr)                                                          \
    do {                                                                   \
        if ((expr) != CW_SUCCESS) {                                        \
            fprintf(stderr, "resident: %s\n", cw_last_error()->message);    \
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

    /* the workload kernel, with the device header from memory */
    cw_header header = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "square.cu";
    ps.headers = &header;
    ps.n_headers = 1;
    TRY(cw_program_compile(&p, ctx, k_source, &ps));
    TRY(cw_module_load(&m, p));
    TRY(cw_module_get_kernel(m, "square", &square));

    /* the loop: two input slots; spin for 200 us after each request, then
     * sleep up to 100 us between checks */
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.input_slots = 2;
    rs.input_bytes = N * sizeof(unsigned);
    rs.sleep_mode = CW_RESIDENT_SLEEP_ADAPTIVE;
    rs.sleep_interval_us = 100;
    rs.spin_us = 200;
    TRY(cw_resident_create(&r, ctx, &rs));
    cw_devptr ctl = 0;
    TRY(cw_resident_get_ctl(r, &ctl));
    if (set_current(cu) != 0 || mem_alloc(&out, sizeof res) != 0 || host_alloc((void **)&in, N * sizeof *in) != 0)
        goto out;

    /* capture the workload: one launch of square(ctl, out) */
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.block[0] = N;
    void *args[] = {&ctl, &out};
    TRY(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    TRY(cw_kernel_launch(square, s, &lc, args));
    TRY(cw_capture_end(&g, s));
    TRY(cw_resident_set_workload(r, g));
    TRY(cw_resident_launch(r));

    double total = 0, worst = 0;
    int bad = 0;
    for (unsigned k = 1; k <= REQUESTS; k++) {
        cw_devptr slot = 0;
        TRY(cw_resident_next_input(r, 1000, &slot)); /* free once request k-2 finished */
        for (unsigned i = 0; i < N; i++) in[i] = k + i;
        const double t0 = now_us();
        if (set_current(cu) != 0 || htod(slot, in, N * sizeof *in) != 0) goto out;
        uint64_t seq = 0;
        TRY(cw_resident_data_ready(r, &seq));
        TRY(cw_resident_wait_result(r, seq, 1000));
        const double dt = now_us() - t0;
        total += dt;
        if (dt > worst) worst = dt;
        if (dtoh(res, out, sizeof res) != 0) goto out;
        for (unsigned i = 0; i < N; i++) bad += res[i] != in[i] * in[i] + (unsigned)seq;
    }
    ok = bad == 0;
    printf("%d requests: every output right: %s; host round trip (copy in, request, result) mean %.1f us, worst "
           "%.1f us\n",
           REQUESTS, ok ? "yes" : "NO", total / REQUESTS, worst);
    cw_resident_info stats;
    TRY(cw_resident_get_info(r, &stats));
    printf("the GPU's own clock: %llu iterations, per iteration min %.2f us, median %.2f us, max %.2f us\n",
           (unsigned long long)stats.iterations, stats.iter_min_ns / 1e3, stats.iter_median_ns / 1e3,
           stats.iter_max_ns / 1e3);
    /* what the defaults (gate and overlap AUTO) chose for this workload, and why where they fell back */
    printf("the loop the build chose: gate %s, overlap %s%s%s\n",
           stats.gate == CW_RESIDENT_GATE_KERNELS ? "kernels (no IF node)" : "IF node", stats.overlap ? "on" : "off",
           stats.fallback_detail[0] ? "; " : "", stats.fallback_detail);
    TRY(cw_resident_tear_down(r, 1000));
    printf("torn down\n");

out:
    if (r && cw_resident_tear_down(r, 1000) != CW_SUCCESS) ok = 0; /* destroy would abandon it (logged) */
    cw_resident_destroy(&r);
    if (out && set_current && set_current(cu) == 0) mem_free(out);
    if (in) host_free(in);
    if (set_current) set_current(NULL);
    cw_graph_destroy(&g);
    cw_module_destroy(&m);
    cw_program_destroy(&p);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
