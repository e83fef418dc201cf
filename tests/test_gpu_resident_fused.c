/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: the resident loop's fused persistent mode (cw_resident_set_fused).
 * Every check is on data the GPU wrote:
 *  - the grid barrier: stage 1 writes one value per block (from the
 *    request's number, the block and the request's input), stage 2 has
 *    every block check every other block's value of this request (a count
 *    of mismatches) and block 0 log their sum by request number; N requests
 *    through double-buffered input slots, each sum checked against what the
 *    host wrote, no mismatch, statistics from the GPU clock;
 *  - grid_blocks 0 is the most that fit co-resident (reported), one more is
 *    refused, and that grid runs;
 *  - the idle modes: FIXED, ADAPTIVE and spin all serve every request, and
 *    the sleeping ones count idle polls;
 *  - the GPU-measured timeout stops the loop by itself (exit reason, run
 *    time on the GPU's clock);
 *  - tear-down while idle, while block 0 sleeps a long interval, and
 *    destroy while launched; relaunch after tear-down numbers on;
 *  - a stage NVRTC cannot compile is refused with its log;
 *  - a green partition (skipped with the reason when the device has none):
 *    the most that fit is counted on the partition's SMs, and it serves.
 * Links libcuweave.a. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;

#define LOG_CAP 8192u   /* request numbers logged (mod) */
#define MAX_BLOCKS 8192u

/* user -> unsigned words: [0, MAX_BLOCKS) stage 1's values, then the
 * mismatch count, then the log of sums (LOG_CAP). */
static const char kStages[] =
    "#include \"cuweave/resident_device.h\"\n"
    "#define VALS(u) ((volatile unsigned *)(u))\n"
    "#define ERRS(u) ((unsigned *)(u) + MAX_BLOCKS)\n"
    "#define LOGS(u) ((volatile unsigned *)(u) + MAX_BLOCKS + 16)\n"
    "static __device__ unsigned expect(unsigned long long seq, unsigned b, unsigned in) {\n"
    "    return (unsigned)seq * 1000u + b + in;\n"
    "}\n"
    "extern \"C\" __device__ void write_blocks(cw_resident_ctl *ctl, void *user) {\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    if (threadIdx.x == 0) VALS(user)[blockIdx.x] = expect(cw_resident_sequence(ctl), blockIdx.x, in ? in[0] : 0u);\n"
    "}\n"
    "extern \"C\" __device__ void read_others(cw_resident_ctl *ctl, void *user) {\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    const unsigned long long seq = cw_resident_sequence(ctl);\n"
    "    const unsigned v = in ? in[0] : 0u;\n"
    "    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)\n"
    "        if (VALS(user)[b] != expect(seq, b, v)) atomicAdd(ERRS(user), 1u);\n"
    "    if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "        unsigned sum = 0;\n"
    "        for (unsigned b = 0; b < gridDim.x; b++) sum += VALS(user)[b];\n"
    "        LOGS(user)[seq % LOG_CAP] = sum;\n"
    "    }\n"
    "}\n";
static const char *const kStageNames[] = {"write_blocks", "read_others"};

static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

static int quick(void) {
    const char *q = getenv("CWT_QUICK");
    return (q && *q == '1') || cwt_under_sanitizer();
}

static dptr dalloc(size_t bytes) {
    dptr p = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&p, bytes));
    assert_cu_ok(rc.cuMemsetD32(p, 0, bytes / 4));
    return p;
}

static unsigned dget32(dptr p) {
    unsigned v = 0x7eadbeef;
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

static unsigned *g_stage;
static void put_u32(dptr dst, unsigned v) {
    cur();
    if (!g_stage) assert_cu_ok(rc.cuMemHostAlloc((void **)&g_stage, 64, 0x01));
    *g_stage = v;
    assert_cu_ok(rc.cuMemcpyHtoD(dst, g_stage, sizeof v));
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *const kOptions[] = {"-DMAX_BLOCKS=8192u", "-DLOG_CAP=8192u"};

static cw_resident_fused fused(dptr user, uint32_t grid) {
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kStages;
    f.stages = kStageNames;
    f.stage_count = 2;
    f.options = kOptions;
    f.option_count = 2;
    f.user = user;
    f.grid_blocks = grid;
    f.block_threads = 256;
    return f;
}

static dptr user_mem(void) { return dalloc((MAX_BLOCKS + 16 + LOG_CAP) * 4); }

/* n requests, each with input seq * 7 + 3 in the slot next_input names;
 * checks every logged sum and that no block saw another's stale value. */
static void serve_and_check(cw_resident *r, dptr user, uint64_t first, unsigned n, unsigned blocks) {
    uint64_t last = 0;
    for (unsigned i = 0; i < n; i++) {
        cw_devptr slot = 0;
        assert_cw_ok(cw_resident_next_input(r, 5000, &slot));
        const uint64_t seq = first + i;
        put_u32(slot, (unsigned)(seq * 7 + 3));
        uint64_t got = 0;
        assert_cw_ok(cw_resident_data_ready(r, &got));
        assert_int_equal(got, seq);
        last = got;
        if (i % 64 == 63 || i + 1 == n) {
            assert_cw_ok(cw_resident_wait_result(r, got, 5000));
        }
    }
    assert_cw_ok(cw_resident_wait_result(r, last, 5000));
    assert_int_equal(dget32(user + MAX_BLOCKS * 4), 0); /* no block read a stale value */
    /* the last min(n, LOG_CAP) sums */
    for (unsigned i = n > LOG_CAP ? n - LOG_CAP : 0; i < n; i++) {
        const uint64_t seq = first + i;
        const unsigned in = (unsigned)(seq * 7 + 3);
        unsigned want = 0;
        for (unsigned b = 0; b < blocks; b++) want += (unsigned)seq * 1000u + b + in;
        const unsigned got = dget32(user + (MAX_BLOCKS + 16 + (unsigned)(seq % LOG_CAP)) * 4);
        if (got != want) fail_msg("request %llu: sum %u, want %u", (unsigned long long)seq, got, want);
    }
}

static cw_resident_settings settings_with(uint32_t sleep_us, cw_resident_sleep mode) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = sleep_us;
    s.sleep_mode = mode;
    s.spin_us = 50;
    s.input_slots = 2;
    s.input_bytes = 64;
    return s;
}

/* grid 0: the most that fit, run with the barrier check; one more block refused. */
static void test_barrier_max_grid(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(0, CW_RESIDENT_SLEEP_FIXED);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 1);
    assert_true(info.max_grid_blocks > 0);
    assert_int_equal(info.grid_blocks, info.max_grid_blocks);
    assert_int_equal(info.block_threads, 256);
    int sms = 0;
    cur();
    assert_cu_ok(rc.cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, 0));
    assert_int_equal(info.max_grid_blocks % (unsigned)sms, 0);
    printf("# fused: %u blocks of 256 threads co-resident (%d SMs)\n", info.max_grid_blocks, sms);
    const uint32_t max = info.max_grid_blocks;
    assert_true(max <= MAX_BLOCKS);

    cw_resident_fused big = fused(user, max + 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &big));
    assert_non_null(strstr(cw_last_error()->message, "does not fit co-resident"));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.grid_blocks, max); /* kept */

    assert_cw_ok(cw_resident_launch(r));
    const unsigned n = quick() ? 200 : 5000;
    serve_and_check(r, user, 1, n, max);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.completed, n);
    assert_int_equal(info.iterations, n);
    assert_true(info.iter_min_ns > 0 && info.iter_min_ns <= info.iter_median_ns &&
                info.iter_median_ns <= info.iter_max_ns);
    printf("# fused, %u blocks: per request on the GPU: min %llu ns, median %llu ns\n", max,
           (unsigned long long)info.iter_min_ns, (unsigned long long)info.iter_median_ns);
    assert_cw_ok(cw_resident_tear_down(r, 2000));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_TEAR_DOWN);
    cw_resident_destroy(&r);
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* FIXED, ADAPTIVE and spin, a few blocks: every request served right; the
 * sleeping modes count idle polls. */
static void test_idle_modes(void **state) {
    (void)state;
    struct {
        uint32_t sleep_us;
        cw_resident_sleep mode;
        const char *what;
    } modes[] = {{50, CW_RESIDENT_SLEEP_FIXED, "fixed"},
                 {500, CW_RESIDENT_SLEEP_ADAPTIVE, "adaptive"},
                 {0, CW_RESIDENT_SLEEP_FIXED, "spin"}};
    for (size_t m = 0; m < 3; m++) {
        cw_resident_settings s = settings_with(modes[m].sleep_us, modes[m].mode);
        cw_resident *r = NULL;
        assert_cw_ok(cw_resident_create(&r, ctx, &s));
        dptr user = user_mem();
        cw_resident_fused f = fused(user, 6);
        assert_cw_ok(cw_resident_set_fused(r, &f));
        assert_cw_ok(cw_resident_launch(r));
        serve_and_check(r, user, 1, 100, 6);
        usleep(20000); /* idle a while: the sleeping modes poll */
        serve_and_check(r, user, 101, 100, 6);
        cw_resident_info info;
        assert_cw_ok(cw_resident_get_info(r, &info));
        assert_int_equal(info.completed, 200);
        if (modes[m].sleep_us) assert_true(info.idle_polls > 0);
        printf("# %s: idle polls %llu\n", modes[m].what, (unsigned long long)info.idle_polls);
        assert_cw_ok(cw_resident_tear_down(r, 2000)); /* while idle */
        cw_resident_destroy(&r);
        cur();
        assert_cu_ok(rc.cuMemFree(user));
    }
}

/* The loop stops by itself at its GPU-measured timeout. */
static void test_timeout(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(100, CW_RESIDENT_SLEEP_FIXED);
    s.timeout_ms = 300;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 4);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_build(r));
    const uint64_t t0 = now_ns();
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 1, 10, 4);
    cw_resident_state st = CW_RESIDENT_RUNNING;
    while (st != CW_RESIDENT_STOPPED && now_ns() - t0 < 5000000000ull) {
        assert_cw_ok(cw_resident_get_state(r, &st));
        usleep(1000);
    }
    assert_int_equal(st, CW_RESIDENT_STOPPED);
    const uint64_t took = now_ns() - t0;
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_TIMEOUT);
    if (!quick()) {
        assert_true(info.run_ns >= 290000000ull && info.run_ns <= 400000000ull);
        assert_true(took >= 290000000ull);
    }
    assert_cw_ok(cw_resident_tear_down(r, 1000)); /* settles the stopped launch */
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_TIMEOUT); /* still why it stopped */
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));
    cw_resident_destroy(&r);
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* Tear-down while block 0 sleeps a long interval (it stops at its next
 * check, within the interval), relaunch numbering, destroy while launched. */
static void test_teardown_and_relaunch(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(200000, CW_RESIDENT_SLEEP_FIXED); /* 200 ms naps */
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 8);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 1, 5, 8);
    usleep(50000); /* asleep now */
    const uint64_t t0 = now_ns();
    assert_cw_ok(cw_resident_tear_down(r, 3000));
    const uint64_t took = now_ns() - t0;
    printf("# tear-down while sleeping 200 ms intervals: %.1f ms\n", took / 1e6);
    if (!quick()) assert_true(took < 1000000000ull);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_TEAR_DOWN);

    /* relaunch: numbering goes on at 6 */
    s.sleep_interval_us = 0;
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 6, 50, 8);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.launches, 2);
    assert_int_equal(info.completed, 55);
    cw_resident_destroy(&r); /* launched: torn down by destroy */
    assert_null(r);
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* Real NVRTC: a stage named in a comment only does not compile. */
static void test_compile_error(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    static const char src[] = "// missing_stage is not defined here\n";
    static const char *const names[] = {"missing_stage"};
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = src;
    f.stages = names;
    f.stage_count = 1;
    assert_cw(CW_ERROR_COMPILE, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "missing_stage"));
    cw_resident_destroy(&r);
}

/* A green partition: the most that fit is counted on its SMs. */
static void test_green_partition(void **state) {
    (void)state;
    cw_partition_caps caps;
    if (cw_partition_get_caps(0, &caps) != CW_SUCCESS || !caps.supported) {
        printf("# SKIP: device 0 has no green partitions (cw_partition_get_caps)\n");
        skip();
        return;
    }
    unsigned counts[1] = {caps.min_partition > 16 ? caps.min_partition : 16};
    cw_partition_group *ps = NULL;
    assert_cw_ok(cw_partition_group_create(&ps, 0, counts, 1, 0));
    cw_context *pc = NULL;
    assert_cw_ok(cwt_partition(ps, 0, &pc));
    cw_resident_settings s = settings_with(0, CW_RESIDENT_SLEEP_FIXED);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, pc, &s));
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    int sms = 0;
    cur();
    assert_cu_ok(rc.cuDeviceGetAttribute(&sms, 16, 0));
    printf("# green partition of %u SMs: %u blocks co-resident (device: %d SMs)\n", counts[0], info.max_grid_blocks,
           sms);
    assert_true(info.max_grid_blocks > 0);
    assert_int_equal(info.max_grid_blocks % counts[0], 0);
    assert_true(info.max_grid_blocks / counts[0] * (unsigned)sms > info.max_grid_blocks); /* fewer than the device's */
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 1, quick() ? 50 : 1000, info.grid_blocks);
    assert_cw_ok(cw_resident_tear_down(r, 2000));
    cw_resident_destroy(&r);
    cur();
    assert_cu_ok(rc.cuMemFree(user));
    cw_partition_group_destroy(&ps);
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    return rc.cuCtxSetCurrent(cuctx) != 0 ? -1 : 0;
}

static int group_teardown(void **state) {
    (void)state;
    rc.cuCtxSetCurrent(cuctx);
    if (g_stage) rc.cuMemFreeHost(g_stage);
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_error),     cmocka_unit_test(test_barrier_max_grid),
        cmocka_unit_test(test_idle_modes),        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_teardown_and_relaunch), cmocka_unit_test(test_green_partition),
    };
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
