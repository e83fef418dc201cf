/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU churn (issue 25, item 4): every kind of object created, used with
 * work in flight, and destroyed, over and over; afterwards the live handles
 * are exactly those of before, and host memory (resident set) and device
 * memory (free bytes) have not grown.
 *
 * Work in flight: a busy stream keeps a slow kernel queued the whole time,
 * and each object's own work is still running (or queued) when it is
 * destroyed: a stream with a kernel queued, a buffer whose last use is a
 * kernel, a future whose marker sits behind a kernel, a graph exec launched
 * and destroyed at once, a pipeline iteration left on the GPU, a resident
 * loop torn down with a request made. (A module is destroyed once its own
 * kernel has finished: unloading code waits for every kernel of the device
 * anyway, the busy stream's included.)
 *
 * CWT_CHURN_N (default 1000; the soak run: 1000000) cycles per light kind;
 * heavy kinds, whose creation costs milliseconds of driver work, do fewer:
 * modules N/10, resident loops N/100, partition groups N/100 but at most
 * 1000 (the driver never gives back what a green context took: about
 * 3.3 MiB of host and 8 MiB of device memory per pair on driver 580, so
 * 10000 of them fill an H100), NCCL communicators N/1000 (at least 3 of
 * each). CWT_CHURN_S (default 600)
 * bounds the seconds per kind: a kind that reaches it stops there and says
 * how many cycles it made. Each kind prints one "# churn" line; host memory
 * must not grow by more than 8 MiB from the end of its first tenth to its
 * end, device memory not by more than 64 MiB over the kind, and the count
 * of live handles must come back. Partition sets are measured beside the
 * raw driver making and destroying the same two green contexts: what the
 * driver itself keeps per green context is allowed to them, and no more;
 * communicators likewise beside NCCL's own.
 * CWT_FILTER picks one of the three groups (test_churn_core,
 * test_churn_graphs_code_flow, test_churn_partitions_and_comms).
 *
 * Links libcuweave.a (the count of live handles comes from the test hooks,
 * src/testing/seam.h). Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "driver/cuda_min.h"
#include "kernels/test_kernels_fatbin.h"
#include "rawcuda.h"
#include "testing/seam.h"

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static cw_module *mod;
static cw_kernel *k_empty, *k_slow;
static cw_stream *busy;
static rc_result (*mem_info)(size_t *, size_t *);
static long g_n, g_seconds;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long env_long(const char *name, long dflt) {
    const char *e = getenv(name);
    return e && *e ? atol(e) : dflt;
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long device_free_mib(void) {
    size_t free_b = 0, total = 0;
    if (!mem_info || mem_info(&free_b, &total) != 0) return -1;
    return (long)(free_b >> 20);
}

static void launch(cw_kernel *k, cw_stream *s, void **args) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    assert_cw_ok(cw_kernel_launch(k, s, &cfg, args));
}

/* Keeps a slow kernel (20 us) queued on the busy stream: called each cycle,
 * it adds one when the stream has gone idle. */
static unsigned long long busy_word;
static void keep_busy(void) {
    if (cw_stream_query(busy) == CW_SUCCESS) {
        int v = 1;
        long long ns = 20000;
        void *args[] = {&busy_word, &v, &ns};
        launch(k_slow, busy, args);
    }
}

/* What one kind's churn left behind. */
typedef struct {
    long done;      /* cycles made */
    long host_kib;  /* resident set growth from the end of the first tenth */
    long dev_mib;   /* device free bytes lost over the whole run (-1: unknown) */
    size_t live0, live1;
} churn_growth;

/* Runs `cycle` n times (or until the time bound) and measures what the kind
 * leaves behind; asserts nothing. */
static churn_growth churn_measure(const char *kind, long n, void (*cycle)(long i)) {
    if (n < 3) n = 3;
    /* One cycle first: what a kind makes once and keeps (the context's own
     * pools and release stream, the built-in kernels, NVRTC's first load)
     * is not what this measures. */
    cycle(0);
    assert_cw_ok(cw_context_synchronize(ctx));
    churn_growth g = {0, 0, -1, cwi_handles_live(), 0};
    const long dev0 = device_free_mib();
    const double t0 = now_s(), until = t0 + (double)g_seconds;
    long rss_warm = -1;
    for (long i = 0; i < n && now_s() < until; i++) {
        keep_busy();
        cycle(i);
        g.done++;
        /* The host baseline: after the first tenth of the cycles or of the
         * time bound, whichever comes first. */
        if (rss_warm < 0 && (i >= n / 10 || now_s() - t0 >= (double)g_seconds / 10)) rss_warm = rss_kib();
    }
    assert_cw_ok(cw_stream_synchronize(busy));
    assert_cw_ok(cw_context_synchronize(ctx));
    const double dt = now_s() - t0;
    const long rss1 = rss_kib(), dev1 = device_free_mib();
    g.live1 = cwi_handles_live();
    if (rss_warm < 0) rss_warm = rss1;
    g.host_kib = rss1 - rss_warm;
    if (dev0 >= 0 && dev1 >= 0) g.dev_mib = dev0 - dev1;
    printf("# churn %-16s %8ld cycles%s in %7.1f s (%7.2f us each): host %ld -> %ld KiB, device free %ld -> %ld MiB, "
           "live handles %zu -> %zu\n",
           kind, g.done, g.done < n ? " (time bound)" : "", dt, dt / (double)g.done * 1e6, rss_warm, rss1, dev0, dev1,
           g.live0, g.live1);
    fflush(stdout);
    return g;
}

/* Churns one kind and asserts it left nothing: the live handles are those
 * of before, host memory grew by less than 8 MiB and device memory by less
 * than 64 MiB, beyond what `allow` (the raw driver doing the same work, or
 * NULL) grew per cycle. */
static long churn_within(const char *kind, long n, void (*cycle)(long i), const churn_growth *allow) {
    const churn_growth g = churn_measure(kind, n, cycle);
    long host_allow = 8 * 1024, dev_allow = 64;
    if (allow && allow->done > 0) {
        if (allow->host_kib > 0) host_allow += allow->host_kib * g.done / allow->done;
        if (allow->dev_mib > 0) dev_allow += allow->dev_mib * g.done / allow->done;
    }
    assert_int_equal(g.live1, g.live0);
    assert_true(g.host_kib < host_allow);
    if (g.dev_mib >= 0) assert_true(g.dev_mib < dev_allow);
    return g.done;
}

static long churn(const char *kind, long n, void (*cycle)(long i)) {
    return churn_within(kind, n, cycle, NULL);
}

/* ---- one cycle of each kind ---------------------------------------------------- */

static void cycle_context(long i) {
    (void)i;
    cw_context *c = NULL;
    assert_cw_ok(cw_context_create(&c, 0));
    cw_context_info ci;
    assert_cw_ok(cw_context_get_info(c, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_PRIMARY);
    cw_context_destroy(&c);
}

static void cycle_stream(long i) {
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_stream_wait(s, busy));
    launch(k_empty, s, NULL);
    if (i % 2) assert_cw_ok(cw_stream_wait(busy, s));
    cw_stream_destroy(&s); /* its kernel still queued behind the busy stream */
}

static void cycle_pool(long i) {
    (void)i;
    cw_stream_pool *p = NULL;
    assert_cw_ok(cw_stream_pool_create(&p, ctx, NULL));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&s, p, 0));
    assert_cw_ok(cw_stream_wait(s, busy));
    launch(k_empty, s, NULL);
    assert_cw_ok(cw_stream_pool_release(p, &s));
    cw_stream_pool_destroy(&p);
}

static void cycle_timer(long i) {
    (void)i;
    cw_timer *t = NULL;
    assert_cw_ok(cw_timer_create(&t, ctx));
    assert_cw_ok(cw_timer_start(t, busy));
    assert_cw_ok(cw_timer_stop(t, busy));
    cw_timer_destroy(&t);
}

static void cycle_future(long i) {
    static const cw_future_kind kinds[] = {CW_FUTURE_WRITE_VALUE, CW_FUTURE_EVENT, CW_FUTURE_HOST_FUNC};
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, busy, kinds[i % 3]));
    if (i % 7 == 0) assert_cw_ok(cw_future_wait(f, -1));
    cw_future_destroy(&f); /* waits for its marker, queued behind the slow kernel */
}

static void cycle_buffer(long i) {
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, busy, 4096 + (size_t)(i % 4) * 4096));
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    int v = (int)i;
    long long ns = 0;
    void *args[] = {&p, &v, &ns};
    launch(k_slow, busy, args);
    cw_buffer_destroy(&b); /* freed after the kernel, in stream order */
}

static void cycle_graph(long i) {
    (void)i;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    launch(k_empty, s, NULL);
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_cw_ok(cw_stream_wait(s, busy));
    assert_cw_ok(cw_graph_exec_launch(e, s));
    cw_graph_destroy(&g);
    cw_graph_exec_destroy(&e); /* launched, still queued behind the busy stream */
    cw_stream_destroy(&s);
}

static void cycle_module(long i) {
    (void)i;
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, cw_test_kernels_fatbin));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "cw_empty", &k));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    launch(k, s, NULL);
    /* Unloading code waits for every kernel of the device anyway; the
     * module's own kernel is waited for first, the busy stream's is not. */
    assert_cw_ok(cw_stream_synchronize(s));
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

static void cycle_program(long i) {
    (void)i;
    cw_program *p = NULL;
    assert_cw_ok(cw_program_compile(&p, ctx, "extern \"C\" __global__ void churn_k(int *p) { *p = 7; }", NULL));
    cw_program_info info;
    assert_cw_ok(cw_program_get_info(p, &info));
    assert_true(info.size > 0);
    cw_program_destroy(&p);
}

static cw_status op_compute(cw_io *io, void *user) {
    (void)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, NULL, &s);
    if (st != CW_SUCCESS) return st;
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    return cw_kernel_launch(k_empty, s, &cfg, NULL);
}

static void cycle_pipeline(long i) {
    (void)i;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = op_compute;
    cw_operator *a = NULL, *b = NULL;
    assert_cw_ok(cw_operator_create(&a, "a", &ops, NULL, NULL));
    assert_cw_ok(cw_operator_add_output(a, "out", NULL));
    assert_cw_ok(cw_operator_create(&b, "b", &ops, NULL, NULL));
    assert_cw_ok(cw_operator_add_input(b, "in", NULL));
    assert_cw_ok(cw_pipeline_add(p, a));
    assert_cw_ok(cw_pipeline_add(p, b));
    assert_cw_ok(cw_pipeline_connect(p, "a", "out", "b", "in"));
    assert_cw_ok(cw_pipeline_run(p, 1));
    cw_pipeline_destroy(&p); /* its iteration may still be on the GPU */
}

static void cycle_resident(long i) {
    cw_resident *r = NULL;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = 0;
    s.unroll = 1;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_cw_ok(cw_resident_launch(r));
    uint64_t seq = 0;
    assert_cw_ok(cw_resident_data_ready(r, &seq));
    assert_int_equal(seq, 1);
    assert_cw_ok(cw_resident_wait_result(r, seq, 10000));
    if (i % 2) assert_cw_ok(cw_resident_data_ready(r, NULL)); /* torn down with a request maybe unserved */
    assert_cw_ok(cw_resident_tear_down(r, 10000));
    cw_resident_destroy(&r);
}

static void cycle_device_group(long i) {
    (void)i;
    cw_device_group *set = NULL;
    const int dev0 = 0;
    assert_cw_ok(cw_device_group_create(&set, &dev0, 1));
    cw_device_group_info gi;
    assert_cw_ok(cw_device_group_get_info(set, &gi));
    assert_int_equal(gi.count, 1);
    cw_device_group_destroy(&set);
}

static unsigned g_part_sms;
static void cycle_partition(long i) {
    (void)i;
    cw_partition_group *set = NULL;
    assert_cw_ok(cw_partition_group_create(&set, 0, &g_part_sms, 1, 0));
    cw_context *pc = NULL;
    assert_cw_ok(cwt_partition(set, 0, &pc));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, pc, NULL));
    launch(k_empty, s, NULL);
    cw_stream_destroy(&s);
    cw_partition_group_destroy(&set);
}

/* The same two green contexts made and destroyed with the raw driver (the
 * partition and the leftover of one split): what the driver itself keeps
 * per green context, the reference for cuweave's partition groups. */
static struct {
    CUresult (*get_res)(CUdevice, CUdevResource *, CUdevResourceType);
    CUresult (*split)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned, unsigned);
    CUresult (*gen)(CUdevResourceDesc *, CUdevResource *, unsigned);
    CUresult (*create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
    CUresult (*destroy)(CUgreenCtx);
} raw_green;

static void cycle_raw_green(long i) {
    (void)i;
    CUdevResource input, part, rest;
    memset(&input, 0, sizeof input);
    memset(&part, 0, sizeof part);
    memset(&rest, 0, sizeof rest);
    assert_int_equal(raw_green.get_res(0, &input, CU_DEV_RESOURCE_TYPE_SM), 0);
    unsigned groups = 1;
    assert_int_equal(raw_green.split(&part, &groups, &input, &rest, 0, g_part_sms), 0);
    CUdevResourceDesc d1 = NULL, d2 = NULL;
    CUgreenCtx g1 = NULL, g2 = NULL;
    assert_int_equal(raw_green.gen(&d1, &part, 1), 0);
    assert_int_equal(raw_green.create(&g1, d1, 0, CU_GREEN_CTX_DEFAULT_STREAM), 0);
    assert_int_equal(raw_green.gen(&d2, &rest, 1), 0);
    assert_int_equal(raw_green.create(&g2, d2, 0, CU_GREEN_CTX_DEFAULT_STREAM), 0);
    assert_int_equal(raw_green.destroy(g2), 0);
    assert_int_equal(raw_green.destroy(g1), 0);
}

/* The same one-rank communicator made and destroyed with NCCL itself: the
 * reference for what NCCL keeps of each. */
static struct {
    void *lib;
    int (*init_all)(void **comms, int n, const int *devs);
    int (*destroy)(void *comm);
} raw_nccl;

static void cycle_raw_nccl(long i) {
    (void)i;
    void *comm = NULL;
    const int dev = 0;
    assert_int_equal(raw_nccl.init_all(&comm, 1, &dev), 0);
    assert_int_equal(raw_nccl.destroy(comm), 0);
    assert_int_equal(rc.cuCtxSetCurrent(cuctx), 0);
}

static void cycle_comm(long i) {
    (void)i;
    cw_comm *c = NULL;
    cw_context *one[1] = {ctx};
    assert_cw_ok(cw_comm_create(&c, one, 1));
    cw_comm_destroy(&c);
}

/* ---- the tests ------------------------------------------------------------------ */

static void test_churn_core(void **state) {
    (void)state;
    churn("context", g_n, cycle_context);
    churn("stream", g_n, cycle_stream);
    churn("stream pool", g_n, cycle_pool);
    churn("timer", g_n, cycle_timer);
    churn("future", g_n, cycle_future);
    churn("buffer", g_n, cycle_buffer);
    churn("device group", g_n, cycle_device_group);
}

static void test_churn_graphs_code_flow(void **state) {
    (void)state;
    churn("graph + exec", g_n, cycle_graph);
    churn("module", g_n / 10, cycle_module);
    if (cw_driver_has(CW_FEATURE_NVRTC))
        churn("program", g_n, cycle_program);
    else
        printf("# churn program: skipped (no NVRTC)\n");
    churn("pipeline", g_n, cycle_pipeline);
    churn("resident", g_n / 100, cycle_resident);
}

static void test_churn_partitions_and_comms(void **state) {
    (void)state;
    cw_partition_caps caps;
    assert_cw_ok(cw_partition_get_caps(0, &caps));
    if (caps.supported) {
        g_part_sms = caps.min_partition > caps.granularity ? caps.min_partition : caps.granularity;
        *(void **)&raw_green.get_res = dlsym(rc.lib, "cuDeviceGetDevResource");
        *(void **)&raw_green.split = dlsym(rc.lib, "cuDevSmResourceSplitByCount");
        *(void **)&raw_green.gen = dlsym(rc.lib, "cuDevResourceGenerateDesc");
        *(void **)&raw_green.create = dlsym(rc.lib, "cuGreenCtxCreate");
        *(void **)&raw_green.destroy = dlsym(rc.lib, "cuGreenCtxDestroy");
        /* The raw driver's own two green contexts first: what it keeps per
         * green context is allowed to cuweave's partition group too, and no
         * more. */
        churn_growth raw = {0, 0, -1, 0, 0};
        const long parts = g_n / 100 < 1000 ? g_n / 100 : 1000;
        if (raw_green.get_res && raw_green.split && raw_green.gen && raw_green.create && raw_green.destroy)
            raw = churn_measure("raw green ctx x2", parts, cycle_raw_green);
        churn_within("partition group", parts, cycle_partition, &raw);
    } else {
        printf("# churn partition group: skipped (no green contexts)\n");
    }
    cw_versions vs;
    if (cw_get_versions(&vs) == CW_SUCCESS && vs.nccl > 0) {
        churn_growth raw = {0, 0, -1, 0, 0};
        raw_nccl.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (raw_nccl.lib) {
            *(void **)&raw_nccl.init_all = dlsym(raw_nccl.lib, "ncclCommInitAll");
            *(void **)&raw_nccl.destroy = dlsym(raw_nccl.lib, "ncclCommDestroy");
            if (raw_nccl.init_all && raw_nccl.destroy)
                raw = churn_measure("raw nccl comm", g_n / 1000, cycle_raw_nccl);
        }
        churn_within("comm (1 rank)", g_n / 1000, cycle_comm, &raw);
        if (raw_nccl.lib) dlclose(raw_nccl.lib);
    }
    else
        printf("# churn comm: skipped (%s)\n", cw_last_error()->message);
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS || cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    if (rc.cuCtxSetCurrent(cuctx) != 0) return -1;
    *(void **)&mem_info = dlsym(rc.lib, "cuMemGetInfo_v2");
    if (cw_module_load_image(&mod, cw_test_kernels_fatbin) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_empty", &k_empty) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_slow_write", &k_slow) != CW_SUCCESS ||
        cw_stream_create(&busy, ctx, NULL) != CW_SUCCESS)
        return -1;
    unsigned long long p = 0;
    if (rc.cuMemAlloc(&p, 64) != 0) return -1;
    busy_word = p;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    cw_stream_synchronize(busy);
    rc.cuMemFree(busy_word);
    cw_stream_destroy(&busy);
    cw_module_destroy(&mod);
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    g_n = env_long("CWT_CHURN_N", cwt_under_sanitizer() ? 50 : 1000);
    g_seconds = env_long("CWT_CHURN_S", 600);
    cwt_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_churn_core),
        cmocka_unit_test(test_churn_graphs_code_flow),
        cmocka_unit_test(test_churn_partitions_and_comms),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
