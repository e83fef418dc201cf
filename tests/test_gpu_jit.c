/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: run-time compiled kernels and the library's own kernels.
 *
 *  - a templated kernel compiled by NVRTC, fetched by its name expression,
 *    with a header supplied in memory, launched on 4 blocks: every output
 *    element checked exactly; its parameters as the driver lists them;
 *  - a compile error returns CW_ERROR_COMPILE and the log with the line;
 *  - a second process loads the kernel from the disk cache without NVRTC
 *    compiling anything (its own counters), and runs it;
 *  - PTX output loads and runs (the driver JITs it);
 *  - one module load serves the primary context and a green partition;
 *  - launch attributes: a thread-block cluster and a launch priority;
 *  - images are checked at load (4 KiB of garbage refused by
 *    cw_module_load_image, not at the first kernel lookup), and launches
 *    against the kernel's parameters (NULL args for a kernel that has
 *    parameters, and wrong cfg.arg_sizes, are CW_ERROR_INVALID_ARGUMENT,
 *    not the driver's error; on a driver that lists parameters, 12.4+);
 *  - the built-in kernels (fill, write, timestamp, set a graph condition)
 *    run on a green partition, the last inside a graph's IF node.
 *
 * The cache goes to a scratch directory (CUWEAVE_CACHE_DIR). Exits 77
 * without a GPU; skips the compile tests without NVRTC.
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

extern char **environ;

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static char g_self[4096];
static char g_root[256];
static int g_have_nvrtc;

static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

static const char *k_axpb_src =
    "#include \"params.h\"\n"
    "template <typename T>\n"
    "__global__ void axpb(T *x, T a, T b, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = a * x[i] + b + (T)OFFSET;\n"
    "}\n";
static const cw_header k_params_h = {"params.h", "#define OFFSET 7\n"};
static const char *const k_exprs[] = {"axpb<float>", "axpb<int>"};

static cw_program_settings axpb_settings(void) {
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "axpb.cu";
    ps.headers = &k_params_h;
    ps.n_headers = 1;
    ps.name_expressions = k_exprs;
    ps.n_name_expressions = 2;
    static const char *const opts[] = {"-std=c++17", "--use_fast_math"};
    ps.options = opts;
    ps.n_options = 2;
    return ps;
}

/* Runs axpb<int> on n elements x[i] = i with a = 3, b = -2 through kernel k
 * on stream s (of context cu); checks every element. */
static void run_axpb_int(cw_kernel *k, cw_stream *s, CUcontext cu) {
    const int n = 1000;
    int host[1000];
    for (int i = 0; i < n; i++) host[i] = i;
    dptr x = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(cu));
    assert_cu_ok(rc.cuMemAlloc(&x, sizeof host));
    assert_cu_ok(rc.cuMemcpyHtoD(x, host, sizeof host));
    int a = 3, b = -2, nn = n;
    void *args[] = {&x, &a, &b, &nn};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = 4;
    lc.block[0] = 256;
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cu_ok(rc.cuCtxSetCurrent(cu));
    assert_cu_ok(rc.cuMemcpyDtoH(host, x, sizeof host));
    assert_cu_ok(rc.cuMemFree(x));
    for (int i = 0; i < n; i++)
        if (host[i] != 3 * i - 2 + 7) fail_msg("axpb<int>: x[%d] = %d, expected %d", i, host[i], 3 * i + 5);
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    g_have_nvrtc = cw_driver_has(CW_FEATURE_NVRTC);
    if (!g_have_nvrtc) printf("# no NVRTC here: %s\n", cw_last_error()->message);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

/* The templated kernel by name expression, with the header from memory. */
static void test_templated_kernel(void **state) {
    (void)state;
    if (!g_have_nvrtc) skip();
    cw_program_settings ps = axpb_settings();
    cw_program *p = NULL;
    assert_cw_ok(cw_program_compile(&p, ctx, k_axpb_src, &ps));
    cw_program_info pi;
    assert_cw_ok(cw_program_get_info(p, &pi));
    assert_int_equal(pi.is_ptx, 0);
    assert_true(pi.arch >= 70);
    printf("# compiled axpb for sm_%d: %zu bytes of cubin (%s)\n", pi.arch, pi.size,
           pi.source == CW_FROM_COMPILE ? "NVRTC" : pi.source == CW_FROM_DISK ? "disk cache" : "memory cache");
    const char *low = NULL;
    assert_cw_ok(cw_program_get_lowered_name(p, "axpb<int>", &low));
    assert_non_null(strstr(low, "axpb"));
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load(&m, p));
    cw_program_destroy(&p); /* the module does not need it */
    cw_kernel *ki = NULL, *kf = NULL, *again = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "axpb<int>", &ki));
    assert_cw_ok(cw_module_get_kernel(m, "axpb<float>", &kf));
    assert_cw_ok(cw_module_get_kernel(m, "axpb<int>", &again));
    assert_ptr_equal(ki, again);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_module_get_kernel(m, "axpb<double>", &again));
    size_t count = 0, sizes[8] = {0};
    cw_status st = cw_kernel_get_params(ki, ctx, sizes, 8, &count);
    if (st == CW_SUCCESS) {
        assert_int_equal(count, 4);
        assert_int_equal(sizes[0], 8);
        assert_int_equal(sizes[1], 4);
        assert_int_equal(sizes[3], 4);
    } else {
        assert_int_equal(st, CW_ERROR_NOT_SUPPORTED);
    }
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    run_axpb_int(ki, s, cuctx);
    /* float: exact for these small integers */
    float host[512];
    for (int i = 0; i < 512; i++) host[i] = (float)i;
    dptr x = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&x, sizeof host));
    assert_cu_ok(rc.cuMemcpyHtoD(x, host, sizeof host));
    float a = 0.5f, b = 1.0f;
    int n = 512;
    void *args[] = {&x, &a, &b, &n};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = 2;
    lc.block[0] = 256;
    assert_cw_ok(cw_kernel_launch(kf, s, &lc, args));
    assert_cw_ok(cw_stream_synchronize(s));
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(host, x, sizeof host));
    assert_cu_ok(rc.cuMemFree(x));
    for (int i = 0; i < 512; i++)
        if (host[i] != 0.5f * (float)i + 8.0f) fail_msg("axpb<float>: x[%d] = %g", i, (double)host[i]);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
    assert_null(m);
}

/* A compile error: the status, and the log with the line of the error. */
static void test_compile_error_log(void **state) {
    (void)state;
    if (!g_have_nvrtc) skip();
    const char *bad = "__global__ void k(int *p) {\n"
                      "    int ok = 1;\n"
                      "    int broken = ;\n"
                      "}\n";
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "broken.cu";
    cw_program *p = NULL;
    assert_cw(CW_ERROR_COMPILE, cw_program_compile(&p, ctx, bad, &ps));
    assert_null(p);
    printf("# the log: %s", cw_jit_get_compile_log());
    assert_non_null(strstr(cw_jit_get_compile_log(), "broken.cu(3)"));
    assert_non_null(strstr(cw_jit_get_compile_log(), "error"));
    assert_non_null(strstr(cw_last_error()->message, "broken.cu(3)"));
}

/* The child: compile axpb (from the disk cache), prove NVRTC compiled
 * nothing, run it. Exit 0 when all held. */
static int child_main(void) {
    if (!rawcuda_open(&rc)) return 10;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS || cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return 11;
    cw_program_settings ps = axpb_settings();
    cw_program *p = NULL;
    if (cw_program_compile(&p, ctx, k_axpb_src, &ps) != CW_SUCCESS) return 12;
    cw_program_info pi;
    cw_program_get_info(p, &pi);
    cw_jit_stats js;
    cw_jit_get_stats(&js);
    printf("# second process: from %s, NVRTC compiles %llu, disk hits %llu\n",
           pi.source == CW_FROM_DISK ? "disk" : "elsewhere", (unsigned long long)js.compiles,
           (unsigned long long)js.disk_hits);
    if (pi.source != CW_FROM_DISK || js.compiles != 0 || js.disk_hits != 1) return 13;
    cw_module *m = NULL;
    cw_kernel *k = NULL;
    cw_stream *s = NULL;
    if (cw_module_load(&m, p) != CW_SUCCESS || cw_module_get_kernel(m, "axpb<int>", &k) != CW_SUCCESS ||
        cw_stream_create(&s, ctx, NULL) != CW_SUCCESS)
        return 14;
    const int n = 1000;
    int host[1000];
    for (int i = 0; i < n; i++) host[i] = i;
    dptr x = 0;
    rc.cuCtxSetCurrent(cuctx);
    rc.cuMemAlloc(&x, sizeof host);
    rc.cuMemcpyHtoD(x, host, sizeof host);
    int a = 3, b = -2, nn = n;
    void *args[] = {&x, &a, &b, &nn};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = 4;
    lc.block[0] = 256;
    if (cw_kernel_launch(k, s, &lc, args) != CW_SUCCESS || cw_stream_synchronize(s) != CW_SUCCESS) return 15;
    rc.cuCtxSetCurrent(cuctx);
    rc.cuMemcpyDtoH(host, x, sizeof host);
    rc.cuMemFree(x);
    for (int i = 0; i < n; i++)
        if (host[i] != 3 * i + 5) return 16;
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
    cw_program_destroy(&p);
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

static void test_second_process_from_disk(void **state) {
    (void)state;
    if (!g_have_nvrtc) skip();
    /* this process compiled (or found) it already: make sure it is on disk */
    cw_program_settings ps = axpb_settings();
    cw_program *p = NULL;
    assert_cw_ok(cw_program_compile(&p, ctx, k_axpb_src, &ps));
    cw_program_destroy(&p);
    char *argv[] = {g_self, (char *)"--child", NULL};
    pid_t pid = -1;
    assert_int_equal(posix_spawn(&pid, g_self, NULL, NULL, argv, environ), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        fail_msg("the second process exited %d (13: it compiled instead of loading from disk)", WEXITSTATUS(status));
}

/* PTX output: the driver JITs it at load. */
static void test_ptx_output(void **state) {
    (void)state;
    if (!g_have_nvrtc) skip();
    cw_program_settings ps = axpb_settings();
    ps.output_ptx = 1;
    cw_program *p = NULL;
    assert_cw_ok(cw_program_compile(&p, ctx, k_axpb_src, &ps));
    cw_program_info pi;
    assert_cw_ok(cw_program_get_info(p, &pi));
    assert_int_equal(pi.is_ptx, 1);
    assert_non_null(strstr((const char *)pi.code, ".entry"));
    cw_module *m = NULL;
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_load(&m, p));
    assert_cw_ok(cw_module_get_kernel(m, "axpb<int>", &k));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    run_axpb_int(k, s, cuctx);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
    cw_program_destroy(&p);
}

/* One module (the test kernels' fatbin, loaded once) serves the primary
 * context and a green partition; launch attributes. */
static void test_one_module_many_contexts(void **state) {
    (void)state;
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, cw_test_kernels_fatbin));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "cw_mul_add", &k));
    void *cuk = NULL;
    assert_cw_ok(cw_kernel_get_handle(k, &cuk));
    assert_non_null(cuk);
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    dptr p = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&p, 4));
    assert_cu_ok(rc.cuMemsetD32(p, 0, 1));
    assert_cu_ok(rc.cuCtxSynchronize());
    int v = 4;
    void *args[] = {&p, &v};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    /* with a priority */
    lc.use_priority = 1;
    lc.priority = -1;
    v = 5;
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    /* in a cluster of 2 blocks (grid 2): sm_90 has clusters */
    cw_device_info di;
    assert_cw_ok(cw_device_get_info(0, &di));
    cw_launch_config_default(&lc);
    lc.grid[0] = 2;
    lc.cluster[0] = 2;
    v = 6;
    if (di.cc_major >= 9) {
        /* cw_mul_add works in block 0 only: one update */
        assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
        /* a grid that the cluster does not divide is refused by the driver */
        lc.grid[0] = 3;
        cw_status st = cw_kernel_launch(k, s, &lc, args);
        assert_int_not_equal(st, CW_SUCCESS);
        printf("# grid 3 in clusters of 2: %s\n", cw_last_error()->message);
    }
    assert_cw_ok(cw_stream_synchronize(s));
    int got = 0;
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(&got, p, 4));
    int expect = (0 * 3 + 4) * 3 + 5;
    if (di.cc_major >= 9) expect = expect * 3 + 6;
    assert_int_equal(got, expect);
    assert_cu_ok(rc.cuMemFree(p));
    cw_stream_destroy(&s);

    if (cw_driver_has(CW_FEATURE_GREEN_CONTEXTS)) {
        cw_partition_group *set = NULL;
        const unsigned counts[] = {16};
        assert_cw_ok(cw_partition_group_create(&set, 0, counts, 1, -1));
        cw_context *part = NULL;
        assert_cw_ok(cwt_partition(set, 0, &part));
        CUcontext pcu = NULL;
        assert_cw_ok(cwt_context_handle(part, &pcu));
        cw_stream *ps = NULL;
        assert_cw_ok(cw_stream_create(&ps, part, NULL));
        assert_cu_ok(rc.cuCtxSetCurrent(pcu));
        assert_cu_ok(rc.cuMemAlloc(&p, 4));
        assert_cu_ok(rc.cuMemsetD32(p, 0, 1));
        assert_cu_ok(rc.cuCtxSynchronize());
        cw_launch_config_default(&lc);
        v = 9;
        assert_cw_ok(cw_kernel_launch(k, ps, &lc, args)); /* same kernel handle, another context */
        assert_cw_ok(cw_stream_synchronize(ps));
        assert_cu_ok(rc.cuCtxSetCurrent(pcu));
        assert_cu_ok(rc.cuMemcpyDtoH(&got, p, 4));
        assert_int_equal(got, 9);
        assert_cu_ok(rc.cuMemFree(p));
        assert_cu_ok(rc.cuCtxSetCurrent(NULL));
        cw_stream_destroy(&ps);
        cw_partition_group_destroy(&set);
    }
    cw_module_destroy(&m);
}

/* 0.2: cw_module_load_image refuses what the driver would refuse, at load
 * (the lazily loading driver took 4 KiB of garbage; the error came from
 * cw_module_get_kernel), and cw_kernel_launch checks the arguments against
 * the kernel's parameters in C (NULL args reached the driver, which
 * answered CW_ERROR_DRIVER). */
static void test_checked_load_and_launch(void **state) {
    (void)state;
    unsigned char *junk = malloc(4096);
    assert_non_null(junk);
    unsigned seed = 4096;
    for (size_t i = 0; i < 4096; i++) junk[i] = (unsigned char)(rand_r(&seed) | 1);
    junk[0] = 0x3f;
    junk[4095] = 0;
    cw_module *m = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_module_load_image(&m, junk));
    assert_null(m);
    assert_non_null(strstr(cw_last_error()->message, "not a cubin"));
    free(junk);

    assert_cw_ok(cw_module_load_image(&m, cw_test_kernels_fatbin));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "cw_mul_add", &k)); /* (int *p, int v) */
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    dptr p = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&p, 4));
    assert_cu_ok(rc.cuMemsetD32(p, 0, 1));
    assert_cu_ok(rc.cuCtxSynchronize());
    int v = 4;
    void *args[] = {&p, &v};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    size_t n = 0;
    const int listed = cw_kernel_get_params(k, ctx, NULL, 0, &n) == CW_SUCCESS;
    if (listed) {
        assert_int_equal(n, 2);
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, NULL));
        assert_non_null(strstr(cw_last_error()->message, "args is NULL"));
        const size_t wrong[] = {8, 8};
        lc.arg_sizes = wrong;
        lc.n_args = 2;
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, args));
        lc.n_args = 1;
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, args));
    } else {
        printf("# this driver cannot list parameters (before 12.4): launches go unchecked\n");
    }
    const size_t right[] = {8, 4};
    lc.arg_sizes = right;
    lc.n_args = 2;
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args)); /* the refused ones launched nothing: 0 * 3 + 4 */
    assert_cw_ok(cw_stream_synchronize(s));
    int got = -1;
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(&got, p, sizeof got));
    assert_cu_ok(rc.cuMemFree(p));
    assert_int_equal(got, 4);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* The built-in kernels run on a green partition; SET_COND drives an IF node
 * in a graph made there. */
static void test_builtins_on_partition(void **state) {
    (void)state;
    cw_versions vs;
    assert_cw_ok(cw_get_versions(&vs));
    printf("# built-in kernels: %s\n", vs.builtin_origin);
    cw_partition_group *set = NULL;
    cw_context *where = ctx;
    CUcontext wcu = cuctx;
    if (cw_driver_has(CW_FEATURE_GREEN_CONTEXTS)) {
        const unsigned counts[] = {16};
        assert_cw_ok(cw_partition_group_create(&set, 0, counts, 1, -1));
        assert_cw_ok(cwt_partition(set, 0, &where));
        assert_cw_ok(cwt_context_handle(where, &wcu));
    } else {
        printf("# no green contexts: the built-ins run on the primary context\n");
    }
    cw_kernel *fill = NULL, *wr = NULL, *ts = NULL, *sc = NULL;
    assert_cw_ok(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &fill));
    assert_cw_ok(cw_builtin_get_kernel(CW_BUILTIN_WRITE_U32, &wr));
    assert_cw_ok(cw_builtin_get_kernel(CW_BUILTIN_TIMESTAMP, &ts));
    assert_cw_ok(cw_builtin_get_kernel(CW_BUILTIN_SET_COND, &sc));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, where, NULL));
    const uint64_t n = 1u << 20;
    dptr buf = 0, t = 0, flag = 0, out = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(wcu));
    assert_cu_ok(rc.cuMemAlloc(&buf, n * 4));
    assert_cu_ok(rc.cuMemAlloc(&t, 16));
    assert_cu_ok(rc.cuMemAlloc(&flag, 4));
    assert_cu_ok(rc.cuMemAlloc(&out, 4));
    assert_cu_ok(rc.cuMemsetD32(out, 0, 1));
    assert_cu_ok(rc.cuCtxSynchronize());
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = 64;
    lc.block[0] = 256;
    uint32_t value = 0xc0ffee;
    uint64_t count = n;
    void *fargs[] = {&buf, &value, &count};
    assert_cw_ok(cw_kernel_launch(fill, s, &lc, fargs));
    cw_launch_config_default(&lc);
    dptr t1 = t + 8;
    void *targs0[] = {&t};
    void *targs1[] = {&t1};
    assert_cw_ok(cw_kernel_launch(ts, s, &lc, targs0));
    assert_cw_ok(cw_kernel_launch(ts, s, &lc, targs1));
    assert_cw_ok(cw_stream_synchronize(s));
    uint32_t *host = malloc(n * 4);
    assert_non_null(host);
    assert_cu_ok(rc.cuCtxSetCurrent(wcu));
    assert_cu_ok(rc.cuMemcpyDtoH(host, buf, n * 4));
    for (uint64_t i = 0; i < n; i++)
        if (host[i] != 0xc0ffee) fail_msg("fill: element %llu is 0x%x", (unsigned long long)i, host[i]);
    free(host);
    unsigned long long stamps[2] = {0, 0};
    assert_cu_ok(rc.cuMemcpyDtoH(stamps, t, 16));
    assert_true(stamps[0] > 0 && stamps[1] >= stamps[0]);

    /* a graph on the same context: [SET_COND(flag)] -> IF { WRITE_U32(out, 77) } */
    if (cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        cw_graph *g = NULL, *body = NULL;
        assert_cw_ok(cw_graph_create(&g, where));
        cw_cond_handle h = 0;
        assert_cw_ok(cw_graph_add_cond_handle(g, 0, CW_COND_RESET_EACH_LAUNCH, &h));
        assert_cw_ok(cw_capture_begin(s, g, CW_CAPTURE_GLOBAL));
        void *cargs[] = {&h, &flag};
        assert_cw_ok(cw_kernel_launch(sc, s, &lc, cargs));
        {
            cw_graph *got = NULL; /* the graph captured into, no new ownership */
            assert_cw_ok(cw_capture_end(&got, s));
            assert_ptr_equal(got, g);
        }
        cw_graph_node *after = NULL;
        size_t ns = 0;
        assert_cw_ok(cw_graph_get_sinks(g, &after, 1, &ns));
        cw_cond_settings cs;
        cw_cond_settings_default(&cs);
        cs.type = CW_COND_IF;
        assert_cw_ok(cw_graph_add_conditional(g, h, &cs, &after, 1, NULL, &body, NULL));
        assert_cw_ok(cw_capture_begin(s, body, CW_CAPTURE_GLOBAL));
        uint32_t seventy_seven = 77;
        void *wargs[] = {&out, &seventy_seven};
        assert_cw_ok(cw_kernel_launch(wr, s, &lc, wargs));
        {
            cw_graph *got = NULL; /* the graph captured into, no new ownership */
            assert_cw_ok(cw_capture_end(&got, s));
            assert_ptr_equal(got, body);
        }
        cw_graph_exec *e = NULL;
        assert_cw_ok(cw_graph_instantiate(&e, g, 0));
        for (int round = 0; round < 2; round++) {
            uint32_t f = (uint32_t)round, zero = 0, got = 1234;
            assert_cu_ok(rc.cuCtxSetCurrent(wcu));
            assert_cu_ok(rc.cuMemcpyHtoD(flag, &f, 4));
            assert_cu_ok(rc.cuMemcpyHtoD(out, &zero, 4));
            assert_cw_ok(cw_graph_exec_launch(e, s));
            assert_cw_ok(cw_stream_synchronize(s));
            assert_cu_ok(rc.cuCtxSetCurrent(wcu));
            assert_cu_ok(rc.cuMemcpyDtoH(&got, out, 4));
            assert_int_equal(got, round ? 77 : 0);
        }
        cw_graph_exec_destroy(&e);
        cw_graph_destroy(&g);
    }
    assert_cu_ok(rc.cuCtxSetCurrent(wcu));
    assert_cu_ok(rc.cuMemFree(buf));
    assert_cu_ok(rc.cuMemFree(t));
    assert_cu_ok(rc.cuMemFree(flag));
    assert_cu_ok(rc.cuMemFree(out));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    cw_stream_destroy(&s);
    if (set) cw_partition_group_destroy(&set);
}

int main(int argc, char **argv) {
    ssize_t len = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (len <= 0) return 1;
    g_self[len] = '\0';
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main();
    int start = rawcuda_start(&rc);
    if (start) return start;
    /* a scratch cache, shared with the child through the environment */
    snprintf(g_root, sizeof g_root, "/tmp/cuweave-gpu-jit-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    setenv("CUWEAVE_CACHE_DIR", g_root, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templated_kernel),
        cmocka_unit_test(test_compile_error_log),
        cmocka_unit_test(test_second_process_from_disk),
        cmocka_unit_test(test_ptx_output),
        cmocka_unit_test(test_one_module_many_contexts),
        cmocka_unit_test(test_checked_load_and_launch),
        cmocka_unit_test(test_builtins_on_partition),
    };
    int r = cmocka_run_group_tests(tests, group_setup, group_teardown);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_root);
    return r;
}
