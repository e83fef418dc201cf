/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: the fused resident loop's tile dataflow mode (CW_FUSED_DATAFLOW).
 * Every check is on data the GPU wrote (tests/dataflow_stages.h: nine
 * stages, every kind of dependency, each stage counting on the GPU what it
 * read wrong, the request's total logged for the host):
 *  - every dependency kind, one request in flight and two, on the most
 *    blocks that fit and on a few (fewer blocks than tiles), through
 *    double-buffered input slots: every total right, no stage read wrong;
 *  - a storm of requests made faster than served with two in flight: the
 *    host samples the completed number as it rises and finds every request
 *    up to it logged (results in order), every total right at the end;
 *  - tear-down mid-storm: every request reported finished has its total,
 *    the others are reported dropped, none ready falsely; relaunch numbers on;
 *  - the watchdog: a tile that sleeps 1.5 s stops the loop (exit
 *    CW_RESIDENT_EXIT_STALLED) and cw_resident_info.stall names the tile
 *    that waited, the stage and tile it waited on and the request; a
 *    dependency function naming a tile that does not exist stops it too;
 *  - refusals that need the driver: a stage's shared memory past the
 *    device's (the stage named), a grid that does not fit co-resident;
 *  - the GPU timeout and a sleeping idle mode;
 *  - a green partition: the tiles ran on at most its SMs, and it serves.
 * CWT_QUICK=1 (and under compute-sanitizer) serves fewer requests. Exits 77
 * without a GPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "dataflow_stages.h"
#include "rawcuda.h"

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static cw_fused_stage g_stages[9];
static cw_fused_dep g_deps[10];

static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

/* The loop of the test running (a failed test leaves it to the teardown,
 * which destroys it so that the next test can load code). */
static cw_resident *g_loop;
static int test_teardown(void **state) {
    (void)state;
    if (g_loop) cw_resident_destroy(&g_loop);
    return 0;
}

static int quick(void) {
    const char *q = getenv("CWT_QUICK");
    return (q && *q == '1') || cwt_under_sanitizer();
}

static dptr user_mem(void) {
    dptr p = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&p, DF_WORDS * 4));
    assert_cu_ok(rc.cuMemsetD32(p, 0, DF_WORDS));
    return p;
}

static unsigned *g_host; /* pinned: the words copied back */
static void read_words(dptr user, unsigned first, unsigned n, unsigned *out) {
    cur();
    assert_cu_ok(rc.cuMemcpyDtoH(out, user + first * 4ull, n * 4ull));
}

static void check_no_errors(dptr user) {
    unsigned e[16];
    read_words(user, DF_ERR, 16, e);
    for (int i = 0; i < 9; i++)
        if (e[i]) fail_msg("stage %d (%s) read wrong data %u times", i, g_stages[i].name, e[i]);
}

static void put_u32(dptr dst, unsigned v) {
    cur();
    *g_host = v;
    assert_cu_ok(rc.cuMemcpyHtoD(dst, g_host, 4));
}

static cw_resident_settings settings_with(uint32_t sleep_us, uint32_t slots) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = sleep_us;
    s.sleep_mode = CW_RESIDENT_SLEEP_FIXED;
    s.input_slots = slots;
    s.input_bytes = slots ? 64 : 0;
    return s;
}

static char g_opts[4][64];
static const char *g_optv[4];
static cw_resident_fused fused(dptr user, uint32_t grid, uint32_t in_flight, unsigned long long hang,
                               unsigned long long bad) {
    dataflow_plan_fill(g_stages, g_deps);
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kDataflowStages;
    f.mode = CW_FUSED_DATAFLOW;
    f.stage_defs = g_stages;
    f.stage_count = 9;
    f.user = user;
    f.grid_blocks = grid;
    f.block_threads = 128;
    f.in_flight = in_flight;
    snprintf(g_opts[0], sizeof g_opts[0], "-DDF_IN_FLIGHT=%uull", in_flight ? in_flight : 1u);
    snprintf(g_opts[1], sizeof g_opts[1], "-DDF_HANG_SEQ=%lluull", hang);
    snprintf(g_opts[2], sizeof g_opts[2], "-DDF_BAD_TILE=%lluull", bad);
    snprintf(g_opts[3], sizeof g_opts[3], "-lineinfo"); /* compute-sanitizer names source lines */
    for (int i = 0; i < 4; i++) g_optv[i] = g_opts[i];
    f.options = g_optv;
    f.option_count = 4;
    return f;
}

/* n requests from `first`, each with input seq * 7 + 3 in the slot
 * next_input names (no input without slots); then every total logged. */
static void serve_and_check(cw_resident *r, dptr user, uint64_t first, unsigned n, int slots) {
    uint64_t last = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t seq = first + i;
        if (slots) {
            cw_devptr slot = 0;
            assert_cw_ok(cw_resident_next_input(r, 5000, &slot));
            put_u32(slot, (unsigned)(seq * 7 + 3));
        }
        uint64_t got = 0;
        assert_cw_ok(cw_resident_data_ready(r, &got));
        assert_int_equal(got, seq);
        last = got;
        if (!slots && i % 32 == 31) assert_cw_ok(cw_resident_wait_result(r, got, 5000));
    }
    assert_cw_ok(cw_resident_wait_result(r, last, 5000));
    check_no_errors(user);
    unsigned *log = malloc(DF_LOG_CAP * 4);
    assert_non_null(log);
    read_words(user, DF_LOG, DF_LOG_CAP, log);
    for (unsigned i = n > DF_LOG_CAP ? n - DF_LOG_CAP : 0; i < n; i++) {
        const uint64_t seq = first + i;
        const unsigned want = dataflow_total(seq, slots ? (unsigned)(seq * 7 + 3) : 0u);
        if (log[seq % DF_LOG_CAP] != want)
            fail_msg("request %llu: total %u, want %u", (unsigned long long)seq, log[seq % DF_LOG_CAP], want);
    }
    free(log);
}

/* Every dependency kind, one and two requests in flight, the most blocks
 * that fit and 5 blocks (fewer than most stages' tiles). */
static void test_all_kinds(void **state) {
    (void)state;
    /* the default (a block an SM), 5 blocks, and the most that fit (most of them waiting) */
    static const uint32_t grids[] = {0, 5, UINT32_MAX};
    for (uint32_t in_flight = 1; in_flight <= 2; in_flight++)
        for (int g = 0; g < 3; g++) {
            cw_resident_settings s = settings_with(0, 2);
            cw_resident *r = NULL;
            assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
            dptr user = user_mem();
            cw_resident_fused f = fused(user, grids[g] == UINT32_MAX ? 0 : grids[g], in_flight, 0, 0);
            assert_cw_ok(cw_resident_set_fused(r, &f));
            cw_resident_info info;
            assert_cw_ok(cw_resident_get_info(r, &info));
            if (grids[g] == UINT32_MAX) {
                f.grid_blocks = info.max_grid_blocks;
                assert_cw_ok(cw_resident_set_fused(r, &f));
                assert_cw_ok(cw_resident_get_info(r, &info));
            }
            assert_int_equal(info.fused, 1);
            assert_true(info.grid_blocks > 0);
            if (grids[g] == 0) {
                int sms = 0;
                cur();
                assert_cu_ok(rc.cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, 0));
                assert_int_equal(info.grid_blocks, (unsigned)sms); /* the default: a block an SM */
            }
            assert_cw_ok(cw_resident_launch(r));
            const unsigned n = quick() ? 300 : 20000;
            serve_and_check(r, user, 1, n, 1);
            assert_cw_ok(cw_resident_get_info(r, &info));
            assert_int_equal(info.completed, n);
            assert_int_equal(info.iterations, n);
            printf("# dataflow, in flight %u, %u blocks: %u requests right; per request on the GPU: median %llu ns\n",
                   in_flight, info.grid_blocks, n, (unsigned long long)info.iter_median_ns);
            assert_cw_ok(cw_resident_tear_down(r, 2000));
            assert_cw_ok(cw_resident_get_info(r, &info));
            assert_int_equal(info.exit, CW_RESIDENT_EXIT_TEAR_DOWN);
            assert_null(info.stall);
            cw_resident_destroy(&r);
            g_loop = NULL;
    g_loop = NULL;
            cur();
            assert_cu_ok(rc.cuMemFree(user));
        }
}

/* Requests made faster than served, two in flight, no input slots: each
 * sampled completed number c has every request up to c logged. */
static void test_storm_in_order(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(0, 0);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 2, 0, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    const unsigned n = quick() ? 500 : 4000; /* below the log's capacity */
    unsigned *log = malloc(DF_LOG_CAP * 4);
    assert_non_null(log);
    unsigned samples = 0, behind = 0;
    for (unsigned i = 1; i <= n; i++) {
        uint64_t got = 0;
        assert_cw_ok(cw_resident_data_ready(r, &got));
        assert_int_equal(got, i);
        if (i % 97 == 0) {
            cw_resident_info info;
            assert_cw_ok(cw_resident_get_info(r, &info));
            const uint64_t c = info.completed;
            if (c == 0) continue;
            read_words(user, DF_LOG, DF_LOG_CAP, log);
            for (uint64_t k = c > 8 ? c - 8 : 1; k <= c; k++)
                if (log[k % DF_LOG_CAP] != dataflow_total(k, 0)) behind++;
            samples++;
        }
    }
    /* and while the rest finishes (under a sanitizer the storm may end before the first result) */
    for (;;) {
        cw_resident_info info;
        assert_cw_ok(cw_resident_get_info(r, &info));
        const uint64_t c = info.completed;
        if (c > 0) {
            read_words(user, DF_LOG, DF_LOG_CAP, log);
            for (uint64_t k = c > 8 ? c - 8 : 1; k <= c; k++)
                if (log[k % DF_LOG_CAP] != dataflow_total(k, 0)) behind++;
            samples++;
        }
        if (c >= n) break;
        usleep(1000);
    }
    assert_cw_ok(cw_resident_wait_result(r, n, 10000));
    read_words(user, DF_LOG, DF_LOG_CAP, log);
    for (unsigned k = 1; k <= n; k++)
        if (log[k % DF_LOG_CAP] != dataflow_total(k, 0)) fail_msg("request %u: total %u", k, log[k % DF_LOG_CAP]);
    check_no_errors(user);
    printf("# storm: %u requests, %u samples of the completed number, %u requests up to it not logged\n", n, samples,
           behind);
    assert_true(samples > 0);
    assert_int_equal(behind, 0);
    free(log);
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* Tear-down in the middle of a storm: what is reported finished is right,
 * the rest is dropped, nothing is falsely ready; a relaunch numbers on. */
static void test_teardown_mid_storm(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(0, 0);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 2, 0, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    const unsigned n = 3000;
    for (unsigned i = 1; i <= n; i++) assert_cw_ok(cw_resident_data_ready(r, NULL));
    /* some served, the rest still queued: the tear-down comes mid-storm */
    assert_cw_ok(cw_resident_wait_result(r, 300, 10000));
    assert_cw_ok(cw_resident_tear_down(r, 5000));
    unsigned *log = malloc(DF_LOG_CAP * 4);
    assert_non_null(log);
    read_words(user, DF_LOG, DF_LOG_CAP, log);
    unsigned done = 0, dropped = 0;
    for (unsigned k = 1; k <= n; k++) {
        const cw_status st = cw_resident_poll_result(r, k);
        if (st == CW_SUCCESS) {
            done++;
            if (dropped) fail_msg("request %u finished after a dropped one", k);
            if (log[k % DF_LOG_CAP] != dataflow_total(k, 0)) fail_msg("request %u reported finished, total %u", k, log[k % DF_LOG_CAP]);
        } else {
            assert_int_equal(st, CW_ERROR_INVALID_STATE);
            dropped++;
        }
    }
    check_no_errors(user);
    printf("# tear-down mid-storm: %u finished (each right), %u dropped\n", done, dropped);
    assert_int_equal(done + dropped, n);
    assert_true(done >= 300);
    /* relaunch: numbers go on after the last one given */
    assert_cw_ok(cw_resident_launch(r));
    uint64_t got = 0;
    assert_cw_ok(cw_resident_data_ready(r, &got));
    assert_int_equal(got, n + 1);
    assert_cw_ok(cw_resident_wait_result(r, got, 5000));
    read_words(user, DF_LOG, DF_LOG_CAP, log);
    assert_int_equal(log[got % DF_LOG_CAP], dataflow_total(got, 0));
    free(log);
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

static void wait_stopped(cw_resident *r, uint32_t ms) {
    cw_resident_state st = CW_RESIDENT_RUNNING;
    for (uint32_t i = 0; i < ms / 10; i++) {
        assert_cw_ok(cw_resident_get_state(r, &st));
        if (st == CW_RESIDENT_STOPPED) return;
        usleep(10000);
    }
    fail_msg("the loop did not stop within %u ms", ms);
}

/* The watchdog: s0's tile 3 of request 5 sleeps 1.5 s; s1's tile 3 waits
 * for it longer than 200 ms and stops the loop. */
static void test_watchdog(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(0, 0);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 1, 5, 0);
    f.watchdog_ms = 200;
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    for (unsigned i = 1; i <= 8; i++) assert_cw_ok(cw_resident_data_ready(r, NULL));
    assert_cw_ok(cw_resident_wait_result(r, 4, 5000));
    wait_stopped(r, 5000);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_STALLED);
    assert_non_null(info.stall);
    printf("# watchdog: %s\n", info.stall->detail);
    assert_int_equal(info.stall->kind, 1);
    assert_int_equal(info.stall->request, 5);
    /* the first tile to wait 200 ms waited on s0's tile 3, on a tile that
     * waits for it in turn, or on a tile whose task the sleeping block has
     * taken already (its next ticket, taken while the tile ran: the H200
     * named 'stencil' tile 55 so): a tile not done for request 5 */
    if (info.stall->waited_tile != UINT32_MAX) {
        assert_int_equal(info.stall->needed, 5);
        assert_true(info.stall->counter < 5);
    } else {
        assert_true(info.stall->counter < info.stall->needed);
    }
    assert_non_null(strstr(info.stall->detail, "of request 5 waited longer than the watchdog"));
    assert_int_equal(info.completed, 4);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_poll_result(r, 5));
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* A dependency function that names tile 64 of a 64-tile stage (request 3). */
static void test_function_out_of_range(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(0, 0);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 1, 0, 3);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    for (unsigned i = 1; i <= 5; i++) assert_cw_ok(cw_resident_data_ready(r, NULL));
    wait_stopped(r, 5000);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_STALLED);
    assert_non_null(info.stall);
    printf("# out of range: %s\n", info.stall->detail);
    assert_int_equal(info.stall->kind, 2);
    assert_int_equal(info.stall->stage, 5);
    assert_int_equal(info.stall->tile, 1);
    assert_int_equal(info.stall->waited_stage, 2);
    assert_int_equal(info.stall->waited_tile, 64);
    assert_int_equal(info.stall->request, 3);
    assert_int_equal(info.completed, 2);
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* Refusals that need the driver: shared memory past the device's (the
 * stage named) and a grid that is not co-resident. Nothing changes. */
static void test_refusals(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 1, 0, 0);
    g_stages[5].shared_bytes = 400u * 1024u;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "stage 5 ('picked')"));
    assert_non_null(strstr(cw_last_error()->message, "shared memory"));
    f = fused(user, 0, 1, 0, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    const uint32_t max = info.max_grid_blocks;
    const uint32_t had = info.grid_blocks; /* the default: a block an SM */
    f = fused(user, max + 1, 1, 0, 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "does not fit co-resident"));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.grid_blocks, had); /* kept */
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* The GPU timeout stops it by itself; a sleeping idle mode serves. */
static void test_timeout_and_sleep(void **state) {
    (void)state;
    cw_resident_settings s = settings_with(100, 2);
    /* The timeout counts from the launch: under compute-sanitizer the 50
     * requests alone take longer than 300 ms, so the loop gets 10x more. */
    s.timeout_ms = cwt_under_sanitizer() ? 3000 : 300;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 2, 0, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 1, 50, 1);
    wait_stopped(r, 5000);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_TIMEOUT);
    assert_true(info.idle_polls > 0);
    printf("# timeout %u ms: stopped after %.1f ms on the GPU's clock, %llu idle polls\n", s.timeout_ms, info.run_ns / 1e6,
           (unsigned long long)info.idle_polls);
    if (!quick()) assert_true(info.run_ns >= 300000000ull && info.run_ns < 400000000ull);
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
}

/* A green partition: the tiles ran on at most its SMs; it serves. */
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
    cw_resident_settings s = settings_with(0, 2);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, pc, &s));
    g_loop = r;
    dptr user = user_mem();
    cw_resident_fused f = fused(user, 0, 2, 0, 0);
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    serve_and_check(r, user, 1, quick() ? 50 : 2000, 1);
    unsigned sm[DF_T0];
    read_words(user, DF_SMID, DF_T0, sm);
    unsigned distinct = 0;
    for (unsigned i = 0; i < DF_T0; i++) {
        int seen = 0;
        for (unsigned k = 0; k < i; k++) seen |= sm[k] == sm[i];
        distinct += !seen;
    }
    printf("# green partition of %u SMs: the last request's 64 tiles of s0 ran on %u SMs\n", counts[0], distinct);
    assert_true(distinct >= 1 && distinct <= counts[0]);
    assert_cw_ok(cw_resident_tear_down(r, 2000));
    cw_resident_destroy(&r);
    g_loop = NULL;
    cur();
    assert_cu_ok(rc.cuMemFree(user));
    cw_partition_group_destroy(&ps);
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    if (rc.cuCtxSetCurrent(cuctx) != 0) return -1;
    return rc.cuMemHostAlloc((void **)&g_host, 64, 0x01) != 0 ? -1 : 0;
}

static int group_teardown(void **state) {
    (void)state;
    rc.cuCtxSetCurrent(cuctx);
    if (g_host) rc.cuMemFreeHost(g_host);
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refusals, test_teardown),          cmocka_unit_test_teardown(test_all_kinds, test_teardown),
        cmocka_unit_test_teardown(test_storm_in_order, test_teardown),    cmocka_unit_test_teardown(test_teardown_mid_storm, test_teardown),
        cmocka_unit_test_teardown(test_watchdog, test_teardown),          cmocka_unit_test_teardown(test_function_out_of_range, test_teardown),
        cmocka_unit_test_teardown(test_timeout_and_sleep, test_teardown), cmocka_unit_test_teardown(test_green_partition, test_teardown),
    };
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
