/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: a fused pipeline (cw_pipeline_make_fused) of four operators,
 * tests/pipeline_stages.h's diamond src -> (scale, blur) -> sum, run as one
 * persistent kernel. Every check is on data the GPU wrote, against the CPU's
 * pl_reference:
 *  - thousands of requests through double-buffered input slots, one and two
 *    requests in flight, 256 and 128 threads a block, blur's output in
 *    memory the test supplies: every request's total right;
 *  - feedback (sum's total into the next request's src, read with
 *    `previous`): every total is the chain of all before it in the launch;
 *    after a tear-down and a relaunch the first request starts the chain
 *    again (t->first) and the numbers go on;
 *  - the stages ran as the plan says: the loop reports the grid the plan
 *    asked for, and the median time per request.
 * CWT_QUICK=1 (and under compute-sanitizer) serves fewer requests. Exits 77
 * without a GPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "pipeline_stages.h"
#include "rawcuda.h"

typedef unsigned long long dptr;

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;
static unsigned *g_host; /* pinned */

/* What a test made (a failed test leaves it to the teardown: the loop
 * before the pipeline, so that the next test can load code). */
static cw_resident *g_loop;
static cw_pipeline *g_pipe;
static int test_teardown(void **state) {
    (void)state;
    if (g_loop) cw_resident_destroy(&g_loop);
    if (g_pipe) cw_pipeline_destroy(&g_pipe);
    return 0;
}

static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

static int quick(void) {
    const char *q = getenv("CWT_QUICK");
    return (q && *q == '1') || cwt_under_sanitizer();
}

/* CWT_BLOCK=N: only the loops of N threads a block (0: the default, 256).
 * At 128 every stage's tile is the whole block: no named barrier, which
 * racecheck misreads (docs/reliability.md, "compute-sanitizer"). */
static int block_wanted(uint32_t block) {
    const char *b = getenv("CWT_BLOCK");
    return !b || !*b || (uint32_t)strtoul(b, NULL, 10) == block;
}

static dptr weights(void) {
    dptr w = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&w, sizeof kPlWeights));
    assert_cu_ok(rc.cuMemcpyHtoD(w, kPlWeights, sizeof kPlWeights));
    return w;
}

static void put_u32(dptr dst, unsigned v) {
    cur();
    *g_host = v;
    assert_cu_ok(rc.cuMemcpyHtoD(dst, g_host, 4));
}

static unsigned input_of(uint64_t seq) { return (unsigned)(seq * 7u + 3u); }

/* Makes the pipeline and its loop (input slots of 16 bytes, two of them)
 * and makes it fused. */
static void make(const pl_options *o, uint32_t block, uint32_t in_flight) {
    assert_cw_ok(pl_build(ctx, o, &g_pipe));
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = 0;
    s.sleep_mode = CW_RESIDENT_SLEEP_FIXED;
    s.input_slots = 2;
    s.input_bytes = 16;
    assert_cw_ok(cw_resident_create(&g_loop, ctx, &s));
    cw_resident_fused f = pl_fused(block, in_flight);
    assert_cw_ok(cw_pipeline_make_fused(g_pipe, g_loop, &f));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(g_loop, &info));
    assert_int_equal(info.fused, 1);
    assert_int_equal(info.block_threads, block ? block : 256);
}

/* Serves requests first .. first + n - 1 in chunks the log holds, checking
 * every total: want(seq) gives it. */
typedef unsigned (*want_fn)(uint64_t seq, const unsigned *log, uint64_t first_of_launch);
static void serve(uint64_t first, unsigned n, uint64_t first_of_launch, want_fn want) {
    cw_devptr log_ptr = 0;
    assert_cw_ok(cw_pipeline_get_port_ptr(g_pipe, "sum", "log", &log_ptr));
    unsigned *log = malloc(PL_LOG_CAP * 4);
    assert_non_null(log);
    const unsigned chunk = PL_LOG_CAP / 2;
    unsigned wrong = 0;
    for (unsigned done = 0; done < n;) {
        const unsigned m = n - done < chunk ? n - done : chunk;
        uint64_t last = 0;
        for (unsigned i = 0; i < m; i++) {
            const uint64_t seq = first + done + i;
            cw_devptr slot = 0;
            assert_cw_ok(cw_resident_next_input(g_loop, 5000, &slot));
            put_u32(slot, input_of(seq));
            assert_cw_ok(cw_resident_data_ready(g_loop, &last));
            assert_int_equal(last, seq);
        }
        assert_cw_ok(cw_resident_wait_result(g_loop, last, 10000));
        cur();
        assert_cu_ok(rc.cuMemcpyDtoH(log, log_ptr, PL_LOG_CAP * 4));
        for (unsigned i = 0; i < m; i++) {
            const uint64_t seq = first + done + i;
            const unsigned w = want(seq, log, first_of_launch), got = log[seq % PL_LOG_CAP];
            if (got != w && wrong++ < 5)
                printf("# request %llu: total %u, want %u\n", (unsigned long long)seq, got, w);
        }
        done += m;
    }
    free(log);
    assert_int_equal(wrong, 0);
}

static unsigned want_plain(uint64_t seq, const unsigned *log, uint64_t first_of_launch) {
    (void)log;
    (void)first_of_launch;
    return pl_reference(seq, input_of(seq), 0);
}

/* With feedback the total carries the one before it (the GPU's, which the
 * check of that request has proven right), but for a launch's first. */
static unsigned want_chain(uint64_t seq, const unsigned *log, uint64_t first_of_launch) {
    const unsigned carry = seq == first_of_launch ? 0u : log[(seq - 1) % PL_LOG_CAP];
    return pl_reference(seq, input_of(seq), carry);
}

static void finish(void) {
    assert_cw_ok(cw_resident_tear_down(g_loop, 2000));
    cw_resident_destroy(&g_loop);
    cw_pipeline_destroy(&g_pipe);
}

/* The diamond: one and two requests in flight, 256 and 128 threads a
 * block, blur's output in the test's own memory for one of them. */
static void test_diamond(void **state) {
    (void)state;
    const dptr w = weights();
    dptr own = 0;
    cur();
    assert_cu_ok(rc.cuMemAlloc(&own, (size_t)PL_COPIES * PL_N * 4u));
    static const uint32_t blocks[] = {0, 128};
    for (uint32_t in_flight = 1; in_flight <= 2; in_flight++)
        for (int b = 0; b < 2; b++) {
            if (!block_wanted(blocks[b])) continue;
            pl_options o = {0, w, in_flight == 2 && b == 1 ? own : 0};
            make(&o, blocks[b], in_flight);
            assert_cw_ok(cw_resident_launch(g_loop));
            const unsigned n = quick() ? 300 : 10000;
            serve(1, n, 1, want_plain);
            cw_resident_info info;
            assert_cw_ok(cw_resident_get_info(g_loop, &info));
            assert_int_equal(info.completed, n);
            printf("# fused diamond, %u in flight, %u threads a block, %u blocks: %u requests right; per request on "
                   "the GPU: median %llu ns\n",
                   in_flight, info.block_threads, info.grid_blocks, n, (unsigned long long)info.iter_median_ns);
            finish();
        }
    cur();
    assert_cu_ok(rc.cuMemFree(own));
    assert_cu_ok(rc.cuMemFree(w));
}

/* Feedback: each total carries the one before it; a relaunch starts the
 * chain again at its first request, numbering on. */
static void test_feedback(void **state) {
    (void)state;
    const dptr w = weights();
    pl_options o = {1, w, 0};
    if (!block_wanted(256)) {
        cur();
        assert_cu_ok(rc.cuMemFree(w));
        skip();
    }
    make(&o, 0, 2);
    assert_cw_ok(cw_resident_launch(g_loop));
    const unsigned n = quick() ? 200 : 5000;
    serve(1, n, 1, want_chain);
    assert_cw_ok(cw_resident_tear_down(g_loop, 2000));
    assert_cw_ok(cw_resident_launch(g_loop));
    serve(n + 1, quick() ? 50 : 1000, n + 1, want_chain);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(g_loop, &info));
    printf("# fused diamond with feedback, 2 in flight: %u + %u requests right, each the chain of those before it; "
           "median %llu ns a request\n",
           n, quick() ? 50 : 1000, (unsigned long long)info.iter_median_ns);
    finish();
    cur();
    assert_cu_ok(rc.cuMemFree(w));
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
        cmocka_unit_test_teardown(test_diamond, test_teardown),
        cmocka_unit_test_teardown(test_feedback, test_teardown),
    };
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
