/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the resident loop against the fake CUDA driver
 * (tests/fake_cuda.c) with its conditional-node and library features on
 * (FAKE_CUDA_FEATURES=all): settings defaults and validation, every handle
 * and argument error, the state machine (launch, relaunch, configure and
 * set_workload refused while launched, requests refused when not running,
 * dropped requests reported after a teardown, cw_context_synchronize
 * refused while a loop runs), releases that wait for running loops (a
 * loop, a module, a context destroyed while another loop runs) and loads
 * refused meanwhile, a release, a load and a context synchronize racing a
 * loop launched by another thread (the fake counts driver calls that would
 * wait for a running loop), the graph the loop builds (its nodes and
 * bodies), nothing leaked (live driver objects through the fake), and a
 * fault-injection sweep: every driver call of create + launch + teardown +
 * destroy failed in turn, each run returning an error and leaking nothing
 * (untraced, then traced). Trace: stages begun and ended by a capture
 * function, their refusals, and the fault message naming the stage from
 * marks the test writes as the GPU would.
 * The fake runs no kernels: the loop never serves a request here (the GPU
 * tests do that). Links libcuweave.a for the test seam; the fake's path is
 * argv[1].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "graph/resident_abi.h"
#include "testing/seam.h"

static long (*fake_last_prog)(void);
static long (*fake_coop_nodes)(void);
static long (*fake_calls)(const char *entry);
static CUcontext (*fake_other)(void);

static cw_context *ctx;

static void test_settings_defaults_and_validation(void **state) {
    (void)state;
    cw_resident_settings s;
    memset(&s, 0x5a, sizeof s);
    cw_resident_settings_default(&s);
    assert_int_equal(s.timeout_ms, 0);
    assert_int_equal(s.sleep_interval_us, 500);
    assert_int_equal(s.sleep_mode, CW_RESIDENT_SLEEP_ADAPTIVE); /* issue 24: fast by default */
    assert_int_equal(s.spin_us, 200);
    assert_int_equal(s.sync_with_host, 0);
    assert_int_equal(s.input_slots, 0);
    assert_int_equal(s.input_bytes, 0);
    assert_int_equal(s.unroll, 16);
    assert_int_equal(s.gate, CW_RESIDENT_GATE_AUTO); /* issue 24: the fast loop by default */
    assert_int_equal(s.overlap, CW_RESIDENT_OVERLAP_AUTO);
    assert_int_equal(s.trace, 0);
    assert_int_equal(s.use_default_priority, 1);
    assert_int_equal(s.destroy_timeout_ms, 5000);
    for (size_t i = 0; i < sizeof s.reserved; i++) assert_int_equal(s.reserved[i], 0);
    cw_resident_settings_default(NULL); /* ignored */

    cw_resident *r = (cw_resident *)0x1;
    struct {
        const char *what;
        void (*set)(cw_resident_settings *);
    } bad[] = {
        {"sleep too long", NULL}, {"spin too long", NULL}, {"mode", NULL},  {"trace and overlap", NULL},
        {"3 slots", NULL},        {"slots no bytes", NULL}, {"bytes no slots", NULL},
        {"unroll 0", NULL},       {"unroll 65", NULL},     {"reserved", NULL},       {"gate", NULL},
        {"overlap, gate AUTO", NULL}, {"overlap, gate NODE", NULL}, {"trace and gate CW_RESIDENT_GATE_BEGIN_END", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cw_resident_settings_default(&s);
        switch (i) {
        case 0: s.sleep_interval_us = 1000001; break;
        case 1: s.spin_us = 1000001; break;
        case 2: s.sleep_mode = (cw_resident_sleep)2; break;
        case 3: s.trace = 1, s.overlap = 1, s.gate = CW_RESIDENT_GATE_KERNELS; break;
        case 4: s.input_slots = 3, s.input_bytes = 4; break;
        case 5: s.input_slots = 1; break;
        case 6: s.input_bytes = 4; break;
        case 7: s.unroll = 0; break;
        case 8: s.unroll = 65; break;
        case 9: s.reserved[3] = 1; break;
        case 10: s.gate = (cw_resident_gate)4; break;
        case 11: s.overlap = 1; break; /* gate AUTO: overlap 1 needs KERNELS or FUSED */
        case 12: s.overlap = 1, s.gate = CW_RESIDENT_GATE_NODE; break;
        case 13: s.trace = 1, s.gate = CW_RESIDENT_GATE_BEGIN_END; break;
        }
        cw_status st = cw_resident_create(&r, ctx, &s);
        if (st != CW_ERROR_INVALID_ARGUMENT) fail_msg("%s: %s", bad[i].what, cw_status_name(st));
        assert_detail("cw_resident_create");
        assert_ptr_equal(r, (cw_resident *)0x1); /* untouched */
    }
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_create(NULL, ctx, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_create(&r, NULL, NULL));
    uint32_t junk[16] = {0};
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_create(&r, (cw_context *)junk, NULL));

    /* booleans: any nonzero value is true, kept and reported as 1 */
    cw_resident_settings_default(&s);
    s.sync_with_host = 2;
    s.use_default_priority = -1;
    s.overlap = 7;
    s.gate = CW_RESIDENT_GATE_KERNELS;
    r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    cw_resident_settings got;
    assert_cw_ok(cw_resident_get_settings(r, &got));
    assert_int_equal(got.sync_with_host, 1);
    assert_int_equal(got.use_default_priority, 1);
    assert_int_equal(got.overlap, 1);
    assert_int_equal(got.trace, 0);
    s.overlap = 0;
    s.trace = 3;
    s.use_default_priority = 5; /* the same (true) priority setting as at creation */
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw_ok(cw_resident_get_settings(r, &got));
    assert_int_equal(got.trace, 1);
    assert_int_equal(got.overlap, 0);
    assert_int_equal(got.use_default_priority, 1);
    /* overlap AUTO is kept as it is (not a boolean's 1); trace with it is allowed (AUTO turns off) */
    s.overlap = CW_RESIDENT_OVERLAP_AUTO;
    s.gate = CW_RESIDENT_GATE_AUTO;
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw_ok(cw_resident_get_settings(r, &got));
    assert_int_equal(got.overlap, CW_RESIDENT_OVERLAP_AUTO);
    assert_int_equal(got.gate, CW_RESIDENT_GATE_AUTO);
    /* overlap 1 with gate BEGIN_END is allowed; trace with FUSED is not (configure too) */
    s.trace = 0;
    s.overlap = 1;
    s.gate = CW_RESIDENT_GATE_BEGIN_END;
    assert_cw_ok(cw_resident_configure(r, &s));
    s.trace = 1;
    s.overlap = 0;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_configure(r, &s));
    assert_non_null(strstr(cw_last_error()->message, "BEGIN_END"));
    cw_resident_destroy(&r);
    assert_null(r);
}

/* Every call refuses NULL and foreign handles; destroy accepts NULL. */
static void test_handle_errors(void **state) {
    (void)state;
    uint32_t junk[64] = {0};
    cw_resident *f = (cw_resident *)junk;
    uint64_t seq = 0;
    cw_devptr p = 0;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    cw_resident_info st;
    cw_resident_state rs;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_launch(f));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_build(f));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_tear_down(f, 0));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_data_ready(f, &seq));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_poll_result(f, 1));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_wait_result(f, 1, 0));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_state(f, &rs));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_info(f, &st));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_ctl(f, &p));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_input(f, 0, &p));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_next_input(f, 0, &p));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_configure(f, &s));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_settings(f, &s));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_set_workload(f, NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_set_handler(f, NULL));
    cw_resident_destroy(&f); /* ignored (logged), and the pointer cleared */
    assert_null(f);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_launch(NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_data_ready(NULL, &seq));
    cw_resident_destroy(NULL);
    cw_resident *none = NULL;
    cw_resident_destroy(&none);
    assert_non_null(cw_builtin_get_resident_header());
}

/* The state machine on the fake (whose GPU never runs the loop). */
static void test_states(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.input_slots = 2;
    s.input_bytes = 64;
    s.unroll = 3;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_non_null(r);
    cw_devptr ctl = 0, in0 = 0, in1 = 0, p = 0;
    assert_cw_ok(cw_resident_get_ctl(r, &ctl));
    assert_true(ctl != 0);
    cw_resident_info info;
    memset(&info, 0x5a, sizeof info);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_ptr_equal(info.context, ctx);
    assert_int_equal(info.state, CW_RESIDENT_NOT_LAUNCHED);
    assert_int_equal(info.launched, 0);
    assert_int_equal(info.launches, 0);
    assert_null(info.stall); /* not stalled */
    assert_cw_ok(cw_resident_get_input(r, 0, &in0));
    assert_cw_ok(cw_resident_get_input(r, 1, &in1));
    assert_int_equal(in1 - in0, 64);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_get_input(r, 2, &p));
    assert_detail("cw_resident_get_input");
    cw_resident_settings got;
    assert_cw_ok(cw_resident_get_settings(r, &got));
    assert_memory_equal(&got, &s, sizeof s);

    /* not launched */
    cw_resident_state rs;
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_NOT_LAUNCHED);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));
    assert_detail("cw_resident_data_ready");
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_next_input(r, 0, &p));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_poll_result(r, 0));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_poll_result(r, 1)); /* never made */
    assert_cw_ok(cw_resident_tear_down(r, 0)); /* nothing to stop */

    /* configure: layout and priority are fixed; the rest changes before launch */
    cw_resident_settings c = s;
    c.input_bytes = 32;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_configure(r, &c));
    c = s;
    c.use_default_priority = 0;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_configure(r, &c));
    c = s;
    c.unroll = 0;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_configure(r, &c));
    c = s;
    c.sleep_interval_us = 0;
    c.sync_with_host = 1;
    assert_cw_ok(cw_resident_configure(r, &c));

    /* a workload: any graph of the loop's context (the fake runs nothing) */
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    assert_cw_ok(cw_graph_add_empty(g, NULL, 0, NULL));
    assert_cw_ok(cw_resident_set_workload(r, g));
    cw_graph_destroy(&g); /* the loop kept a copy */

    /* build, then launch: the graph is built once (top: arm, WHILE, exit) */
    long graphs_before = fake_live("graph");
    assert_cw_ok(cw_resident_build(r));
    const long execs = fake_live("exec");
    assert_cw_ok(cw_resident_build(r)); /* nothing changed: nothing rebuilt */
    assert_int_equal(fake_live("exec"), execs);
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(fake_live("exec"), execs);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
    assert_int_equal(fake_live("graph"), graphs_before); /* the built graph was dropped after instantiation */
    assert_true(fake_live("exec") >= 1);
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_RUNNING);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.state, CW_RESIDENT_RUNNING);
    assert_int_equal(info.launched, 1);
    assert_ptr_equal(info.context, ctx);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_launch(r));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_configure(r, &c));
    assert_non_null(strstr(cw_last_error()->message, "tear the loop down"));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_workload(r, NULL));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_handler(r, NULL));
    assert_cw(CW_ERROR_INVALID_STATE, cw_context_synchronize(ctx));
    assert_detail("cw_context_synchronize");

    /* requests are numbered; the fake never serves them */
    uint64_t s1 = 0, s2 = 0;
    assert_cw_ok(cw_resident_next_input(r, 0, &p));
    assert_int_equal(p, in0);
    assert_cw_ok(cw_resident_data_ready(r, &s1));
    assert_cw_ok(cw_resident_next_input(r, 0, &p));
    assert_int_equal(p, in1);
    assert_cw_ok(cw_resident_data_ready(r, &s2));
    assert_int_equal(s1, 1);
    assert_int_equal(s2, 2);
    /* slot 0 again needs request 1 finished: it is not */
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_next_input(r, 5, &p));
    /* not finished: CW_ERROR_NOT_READY, as cw_future_poll; no detail, no log */
    cw_clear_error();
    assert_cw(CW_ERROR_NOT_READY, cw_resident_poll_result(r, s2));
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_wait_result(r, s1, 5));
    assert_detail("cw_resident_wait_result");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_poll_result(r, 3));
    cw_resident_info st;
    assert_cw_ok(cw_resident_get_info(r, &st));
    assert_int_equal(st.requested, 2);
    assert_int_equal(st.completed, 0);
    assert_int_equal(st.launches, 1);
    assert_int_equal(st.exit, CW_RESIDENT_EXIT_NONE);

    /* teardown: the requests were dropped and say so */
    assert_cw_ok(cw_resident_tear_down(r, 100));
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_STOPPED);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.state, CW_RESIDENT_STOPPED);
    assert_int_equal(info.launched, 0);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_poll_result(r, s1));
    assert_non_null(strstr(cw_last_error()->message, "dropped"));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_wait_result(r, s2, 100));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));
    assert_cw_ok(cw_context_synchronize(ctx));
    assert_cw_ok(cw_resident_get_info(r, &st));
    assert_int_equal(st.exit, CW_RESIDENT_EXIT_TEAR_DOWN);

    /* relaunch (no rebuild needed): numbers go on after the dropped ones */
    assert_cw_ok(cw_resident_launch(r));
    uint64_t s3 = 0;
    assert_cw_ok(cw_resident_data_ready(r, &s3));
    assert_int_equal(s3, 3);
    assert_cw_ok(cw_resident_get_info(r, &st));
    assert_int_equal(st.launches, 2);
    /* destroy while launched tears it down first */
    cw_resident_destroy(&r);
    assert_null(r);
    assert_cw_ok(cw_context_synchronize(ctx));
    assert_int_equal(leaks(before, "create/launch/destroy"), 0);
}

/* Overlap: settings checked; the edges into the workload's kernels (from
 * the poll and from each other) become programmatic, none into the loop's
 * own kernels; without overlap there are none. */
static cw_status three_kernels(cw_stream *s, void *user) {
    (void)user;
    cw_kernel *k = NULL;
    cw_status st = cw_builtin_get_kernel(CW_BUILTIN_TIMESTAMP, &k);
    unsigned long long dst = 0;
    void *args[] = {&dst};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    for (int i = 0; i < 3 && st == CW_SUCCESS; i++) st = cw_kernel_launch(k, s, &cfg, args);
    return st;
}

static void test_overlap(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    cw_resident *r = NULL;
    s.overlap = 1;
    s.gate = CW_RESIDENT_GATE_NODE;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_create(&r, ctx, &s));
    assert_non_null(strstr(cw_last_error()->message, "CW_RESIDENT_GATE_KERNELS"));
    assert_null(r);
    for (int overlap = 0; overlap < 2; overlap++) {
        s.overlap = overlap;
        s.gate = CW_RESIDENT_GATE_KERNELS;
        s.unroll = 4;
        assert_cw_ok(cw_resident_create(&r, ctx, &s));
        assert_cw_ok(cw_resident_set_workload_fn(r, three_kernels, NULL));
        assert_cw_ok(cw_resident_build(r));
        /* The fake's code says PTX 9.0: the loop's own kernels wait too, so
         * per copy poll -> k1 -> k2 -> k3 -> signal, and signal -> the next
         * copy's poll (3 of those in 4 copies). */
        assert_int_equal(fake_last_prog(), overlap ? 4 * 4 + 3 : 0);
        if (overlap) {
            /* Code for compute 8.0 has no wait in the loop's kernels: only
             * the edges into the workload's kernels (poll -> k1 -> k2 -> k3). */
            setenv("FAKE_CUDA_PTX_VERSION", "80", 1);
            assert_cw_ok(cw_resident_configure(r, &s)); /* marks it for a rebuild */
            assert_cw_ok(cw_resident_build(r));
            assert_int_equal(fake_last_prog(), 4 * 3);
            /* a data-ready handler's kernels too: poll -> h1 -> h2 -> h3, gate -> k1 -> k2 -> k3 */
            assert_cw_ok(cw_resident_set_handler_fn(r, three_kernels, NULL));
            assert_cw_ok(cw_resident_build(r));
            assert_int_equal(fake_last_prog(), 4 * 6);
            unsetenv("FAKE_CUDA_PTX_VERSION");
            /* and with 9.0 code: ... h3 -> gate, k3 -> signal, signal -> next poll as well */
            assert_cw_ok(cw_resident_configure(r, &s));
            assert_cw_ok(cw_resident_build(r));
            assert_int_equal(fake_last_prog(), 4 * 8 + 3);
        }
        cw_resident_destroy(&r);
    }
    assert_int_equal(leaks(before, "overlap builds"), 0);
}

/* cw_kernel_launch resolves a kernel's function in a context once
 * (cuKernelGetFunction) and launches through it from then on; not while the
 * stream captures (resolving may load code), where it launches the kernel
 * itself; a second context gets its own entry. */
static void test_kernel_function_cache(void **state) {
    (void)state;
    static const char image[] = "// fake PTX for the cache\n.version 8.0\n.target sm_90\n";
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, image));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "cached", &k));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    const long gets0 = fake_calls("cuKernelGetFunction"), launches0 = fake_calls("cuLaunchKernelEx"),
               plain0 = fake_calls("cuLaunchKernel");
    /* captured first: launched, nothing resolved */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw_ok(cw_kernel_launch(k, s, &lc, NULL));
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_destroy(&g);
    assert_int_equal(fake_calls("cuKernelGetFunction"), gets0);
    /* then ten launches: resolved once, launched through the function with
     * the plain call (no attributes asked for) */
    for (int i = 0; i < 10; i++) assert_cw_ok(cw_kernel_launch(k, s, &lc, NULL));
    assert_int_equal(fake_calls("cuKernelGetFunction"), gets0 + 1);
    assert_int_equal(fake_calls("cuLaunchKernelEx"), launches0 + 1);
    assert_int_equal(fake_calls("cuLaunchKernel"), plain0 + 10);
    /* with an attribute (a priority): the extensible launch */
    lc.use_priority = 1;
    assert_cw_ok(cw_kernel_launch(k, s, &lc, NULL));
    assert_int_equal(fake_calls("cuLaunchKernelEx"), launches0 + 2);
    lc.use_priority = 0;
    /* another context (a wrapper of the fake's second context): its own entry */
    cw_context *other = NULL;
    assert_cw_ok(cw_context_wrap(&other, fake_other()));
    cw_stream *s2 = NULL;
    assert_cw_ok(cw_stream_create(&s2, other, NULL));
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_kernel_launch(k, s2, &lc, NULL));
    assert_int_equal(fake_calls("cuKernelGetFunction"), gets0 + 2);
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_kernel_launch(k, s, &lc, NULL));
    assert_int_equal(fake_calls("cuKernelGetFunction"), gets0 + 2);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cw_ok(cw_stream_synchronize(s2));
    cw_stream_destroy(&s2);
    cw_context_destroy(&other);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* Requests from many threads at once (the calls documented as safe to make
 * concurrently: data_ready, poll_result, get_state, get_info): every
 * number handed out exactly once and the count right. Run under
 * ThreadSanitizer in CI (the TSan build runs the CPU suite). */
enum { REQ_THREADS = 8, REQ_EACH = 5000 };
static cw_resident *g_req_loop;
static unsigned char g_req_seen[REQ_THREADS * REQ_EACH + 1];
static int g_req_bad;

static void *request_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < REQ_EACH; i++) {
        uint64_t seq = 0;
        cw_resident_state st;
        if (cw_resident_data_ready(g_req_loop, &seq) != CW_SUCCESS || seq == 0 ||
            seq > REQ_THREADS * REQ_EACH || __atomic_fetch_add(&g_req_seen[seq], 1, __ATOMIC_RELAXED) != 0 ||
            cw_resident_poll_result(g_req_loop, seq) != CW_ERROR_NOT_READY ||
            cw_resident_get_state(g_req_loop, &st) != CW_SUCCESS || st != CW_RESIDENT_RUNNING)
            __atomic_fetch_add(&g_req_bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *stats_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) {
        cw_resident_info st;
        if (cw_resident_get_info(g_req_loop, &st) != CW_SUCCESS || st.requested > REQ_THREADS * REQ_EACH)
            __atomic_fetch_add(&g_req_bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_requests_from_many_threads(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    assert_cw_ok(cw_resident_create(&g_req_loop, ctx, NULL));
    assert_cw_ok(cw_resident_launch(g_req_loop));
    pthread_t th[REQ_THREADS + 1];
    for (int i = 0; i < REQ_THREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, request_thread, NULL), 0);
    assert_int_equal(pthread_create(&th[REQ_THREADS], NULL, stats_thread, NULL), 0);
    for (int i = 0; i <= REQ_THREADS; i++) pthread_join(th[i], NULL);
    assert_int_equal(g_req_bad, 0);
    for (int i = 1; i <= REQ_THREADS * REQ_EACH; i++) assert_int_equal(g_req_seen[i], 1);
    cw_resident_info st;
    assert_cw_ok(cw_resident_get_info(g_req_loop, &st));
    assert_int_equal(st.requested, REQ_THREADS * REQ_EACH);
    cw_resident_destroy(&g_req_loop);
    assert_int_equal(leaks(before, "requests from many threads"), 0);
}

/* While a loop runs, driver calls that free memory, load or unload code, or
 * destroy a graph with conditional nodes wait until it ends (they would hang
 * for good). So: destroying another loop, a module or a context then
 * returns at once and its driver objects go when the last loop stops;
 * building a loop and loading code are refused with a message. */
static void test_releases_wait_for_running_loops(void **state) {
    (void)state;
    cw_resident *a = NULL, *b = NULL, *c = NULL;
    /* three loops at once take more of the context's pooled events: warm it */
    assert_cw_ok(cw_resident_create(&a, ctx, NULL));
    assert_cw_ok(cw_resident_create(&b, ctx, NULL));
    assert_cw_ok(cw_resident_create(&c, ctx, NULL));
    cw_resident_destroy(&a);
    cw_resident_destroy(&b);
    cw_resident_destroy(&c);
    long before[NKINDS];
    snapshot(before);
    const long libs_before = fake_live("library");
    assert_cw_ok(cw_resident_create(&a, ctx, NULL));
    assert_cw_ok(cw_resident_create(&b, ctx, NULL));
    assert_cw_ok(cw_resident_create(&c, ctx, NULL));
    cw_module *m = NULL;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    assert_cw_ok(cw_module_load_image(&m, image));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(m, "k", &k));
    cw_context *other = NULL;
    assert_cw_ok(cw_context_create(&other, 0));
    assert_cw_ok(cw_resident_build(a));
    assert_cw_ok(cw_resident_build(b));
    assert_cw_ok(cw_resident_launch(a));
    const long execs_running = fake_live("exec");
    const long host_running = fake_live("hostmem");
    const long dev_running = fake_live("devmem");

    /* refused while a runs: building c, loading code, preloading a kernel */
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(c));
    assert_detail("cw_resident_build");
    assert_non_null(strstr(cw_last_error()->message, "loading waits"));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_launch(c));
    cw_module *m2 = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_module_load_image(&m2, image));
    assert_null(m2);
    assert_cw(CW_ERROR_INVALID_STATE, cw_kernel_preload(k, ctx));
    /* b was built before: it launches */
    assert_cw_ok(cw_resident_launch(b));

    /* destroying b (torn down first), c, the module and the other context
     * returns at once; their driver objects stay while a runs */
    cw_resident_destroy(&b);
    assert_null(b);
    cw_resident_destroy(&c);
    cw_module_destroy(&m);
    assert_null(m);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_kernel_preload(k, ctx)); /* the module's kernels are dead at once */
    cw_context_destroy(&other);
    assert_null(other);
    assert_int_equal(fake_live("exec"), execs_running);
    assert_int_equal(fake_live("hostmem"), host_running);
    assert_int_equal(fake_live("devmem"), dev_running);
    assert_int_equal(fake_live("library"), libs_before + 1);

    /* a stops: everything queued is released, nothing leaks */
    assert_cw_ok(cw_resident_tear_down(a, 100));
    assert_int_equal(fake_live("library"), libs_before);
    assert_true(fake_live("exec") < execs_running);
    cw_resident_destroy(&a);
    assert_int_equal(leaks(before, "loops, a module and a context released while a loop ran"), 0);
    /* and loading works again */
    assert_cw_ok(cw_module_load_image(&m, image));
    cw_module_destroy(&m);
    assert_int_equal(fake_live("library"), libs_before);
}

/* Defect 3 of issue 24: a loop counts as running from before its
 * cuGraphLaunch (which may start it), so that a load or release made by
 * another thread meanwhile is refused or deferred, not a driver call that
 * waits for the loop; a failed launch takes the count back. The seam runs a
 * load inside cuGraphLaunch, where another thread could. */
struct in_launch {
    int calls;
    cw_status load;
};

static void load_in_launch(void *arg) {
    struct in_launch *p = arg;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    cw_module *m = NULL;
    p->calls++;
    p->load = cw_module_load_image(&m, image);
    cw_module_destroy(&m);
}

static void test_loop_counted_before_its_launch(void **state) {
    (void)state;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    struct in_launch probe = {0, CW_SUCCESS};
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_hook(cwi_seam_entry("cuGraphLaunch"), load_in_launch, &probe);
    assert_cw_ok(cw_resident_launch(r));
    cwi_seam_hook(-1, NULL, NULL);
    assert_int_equal(probe.calls, 1);
    /* inside cuGraphLaunch the loop already counts: the load is refused */
    assert_int_equal(probe.load, CW_ERROR_INVALID_STATE);
    assert_cw_ok(cw_resident_tear_down(r, 100));

    /* a launch that fails leaves nothing counted: loading works after it */
    cwi_seam_fail(cwi_seam_entry("cuGraphLaunch"), 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
    assert_cw(CW_ERROR_OUT_OF_MEMORY, cw_resident_launch(r));
    assert_int_equal(cwi_seam_fired(), 1);
    cwi_seam_reset();
    cwi_seam_disable();
    cw_resident_state st;
    assert_cw_ok(cw_resident_get_state(r, &st));
    assert_int_equal(st, CW_RESIDENT_STOPPED); /* as the teardown left it */
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, image));
    cw_module_destroy(&m);
    cw_resident_destroy(&r);
}

/* Defect 4 of issue 24: destroying an exec with conditional nodes waits for
 * every running loop (docs/resident.md), so while a loop runs
 * cw_graph_exec_destroy and the exec that cw_graph_exec_update replaces are
 * released once none runs, like the other waiting releases. */
static void test_exec_destroy_waits_for_running_loops(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    /* two graphs with a conditional node, and a plain one (updating it to
     * one of the others changes its shape: the update instantiates again) */
    cw_graph *gc = NULL, *g1 = NULL, *g2 = NULL;
    cw_graph **conds[2] = {&gc, &g2};
    for (int i = 0; i < 2; i++) {
        assert_cw_ok(cw_graph_create(conds[i], ctx));
        cw_cond_handle h;
        assert_cw_ok(cw_graph_add_cond_handle(*conds[i], 0, 0, &h));
        cw_graph *body = NULL;
        assert_cw_ok(cw_graph_add_conditional(*conds[i], h, NULL, NULL, 0, NULL, &body, NULL));
        assert_cw_ok(cw_graph_add_empty(body, NULL, 0, NULL));
    }
    assert_cw_ok(cw_graph_create(&g1, ctx));
    assert_cw_ok(cw_graph_add_empty(g1, NULL, 0, NULL));
    cw_graph_exec *ec = NULL, *e1 = NULL;
    assert_cw_ok(cw_graph_instantiate(&ec, gc, 0));
    assert_cw_ok(cw_graph_instantiate(&e1, g1, 0));
    assert_cw_ok(cw_resident_launch(r));
    const long execs = fake_live("exec");
    const long destroys = fake_calls("cuGraphExecDestroy");

    /* destroyed while the loop runs: the handle is gone at once, the driver's exec stays */
    cw_graph_exec_destroy(&ec);
    assert_null(ec);
    assert_int_equal(fake_calls("cuGraphExecDestroy"), destroys);
    assert_int_equal(fake_live("exec"), execs);
    /* an update that instantiates again keeps the replaced exec too */
    cw_graph_update_info ui;
    assert_cw_ok(cw_graph_exec_update(e1, g2, &ui));
    assert_int_equal(ui.kind, CW_GRAPH_REINSTANTIATED);
    assert_int_equal(fake_calls("cuGraphExecDestroy"), destroys);
    assert_int_equal(fake_live("exec"), execs + 1);
    cw_graph_exec_info ei;
    assert_cw_ok(cw_graph_exec_get_info(e1, &ei));
    assert_int_equal(ei.reinstantiations, 1);

    /* the loop stops: both are destroyed */
    assert_cw_ok(cw_resident_tear_down(r, 100));
    assert_int_equal(fake_calls("cuGraphExecDestroy"), destroys + 2);
    assert_int_equal(fake_live("exec"), execs - 1);
    /* and with no loop running an exec is destroyed at once */
    cw_graph_exec_destroy(&e1);
    assert_int_equal(fake_calls("cuGraphExecDestroy"), destroys + 3);
    cw_resident_destroy(&r);
    cw_graph_destroy(&gc);
    cw_graph_destroy(&g1);
    cw_graph_destroy(&g2);
    assert_int_equal(leaks(before, "execs destroyed while a loop ran"), 0);
}

/* Issue 38: the calls that wait until no kernel runs on the device (a code
 * load, cuMemFree, a module unload, cuCtxSynchronize: docs/resident.md,
 * "What waits for a running loop") against a loop launched by another
 * thread at the same time. The fake marks a loop's launch running until its
 * stream is seen idle and counts each such call made meanwhile
 * (fake_cuda_persistent_violations): on the real driver that call waits
 * until the loop ends, for good when nobody stops it. The idle hooks hold
 * the window open between the library's finding that no loop runs and its
 * call, while the other thread launches. */
static long (*fake_pers_running)(void);
static long (*fake_pers_violations)(char *last, size_t cap);
static void (*fake_pers_watch)(int on);

struct window {
    atomic_int armed;  /* the next hook call holds */
    atomic_int inside; /* it holds now */
    atomic_int go;     /* let it go */
};

static void hold_window(void *arg) {
    struct window *w = arg;
    int one = 1;
    if (!atomic_compare_exchange_strong(&w->armed, &one, 0)) return;
    atomic_store(&w->inside, 1);
    for (int i = 0; i < 20000 && !atomic_load(&w->go); i++) usleep(500); /* bounded: 10 s */
}

static void wait_inside(struct window *w) {
    for (int i = 0; i < 20000 && !atomic_load(&w->inside); i++) usleep(500);
    assert_true(atomic_load(&w->inside));
}

struct launcher {
    cw_resident *r;
    cw_status st;
    atomic_int done;
};

static void *launch_main(void *arg) {
    struct launcher *l = arg;
    l->st = cw_resident_launch(l->r);
    atomic_store(&l->done, 1);
    return NULL;
}

/* Starts l's launch on a thread of its own and waits until it returned or
 * waits for the call held in the window (bounded: 10 s). Returns the
 * launches that waited meanwhile (1: this one). */
static unsigned long launch_beside(struct launcher *l, pthread_t *id) {
    const unsigned long waits = cwi_idle_launch_waits();
    atomic_store(&l->done, 0);
    assert_int_equal(pthread_create(id, NULL, launch_main, l), 0);
    for (int i = 0; i < 20000 && !atomic_load(&l->done) && cwi_idle_launch_waits() == waits; i++) usleep(500);
    return cwi_idle_launch_waits() - waits;
}

static long violations_since(long before) {
    char last[160];
    const long n = fake_pers_violations(last, sizeof last) - before;
    if (n) printf("# %ld calls the real driver would make wait for a running loop; the last: %s\n", n, last);
    return n;
}

struct tear {
    cw_resident *r;
    cw_status st;
};

static void *tear_main(void *arg) {
    struct tear *t = arg;
    t->st = cw_resident_tear_down(t->r, 5000);
    return NULL;
}

/* A module destroyed while loop a runs is unloaded when a stops: by the
 * thread that sees a stop, after it took the queued releases. Loop b,
 * launched by another thread meanwhile, must not run yet when the unload
 * is made. */
static void test_release_racing_a_launch(void **state) {
    (void)state;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    cw_resident *a = NULL, *b = NULL;
    assert_cw_ok(cw_resident_create(&a, ctx, NULL));
    assert_cw_ok(cw_resident_create(&b, ctx, NULL));
    assert_cw_ok(cw_resident_build(a));
    assert_cw_ok(cw_resident_build(b));
    const long libs = fake_live("library");
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, image));
    assert_int_equal(fake_pers_running(), 0);
    assert_cw_ok(cw_resident_launch(a));
    assert_int_equal(fake_pers_running(), 1);
    cw_module_destroy(&m); /* queued: a runs */
    assert_int_equal(fake_live("library"), libs + 1);
    const long v0 = fake_pers_violations(NULL, 0);

    struct window w = {0};
    atomic_store(&w.armed, 1);
    cwi_idle_hooks(hold_window, NULL, &w);
    struct tear t = {a, CW_ERROR_DRIVER};
    pthread_t tid, lid;
    assert_int_equal(pthread_create(&tid, NULL, tear_main, &t), 0);
    wait_inside(&w); /* a stopped; the unload taken, not made */
    assert_int_equal(fake_pers_running(), 0);
    assert_int_equal(fake_live("library"), libs + 1);
    struct launcher l = {b, CW_ERROR_DRIVER, 0};
    const unsigned long waited = launch_beside(&l, &lid);
    atomic_store(&w.go, 1);
    pthread_join(tid, NULL);
    pthread_join(lid, NULL);
    cwi_idle_hooks(NULL, NULL, NULL);
    const long violations = violations_since(v0);
    const long running = fake_pers_running(), unloaded = fake_live("library") == libs;
    const cw_status b_down = cw_resident_tear_down(b, 1000); /* before any check: the next tests need no loop */
    cw_resident_destroy(&a);
    cw_resident_destroy(&b);

    assert_int_equal(violations, 0);
    assert_int_equal(waited, 1); /* b's launch waited for the unload */
    assert_cw_ok(t.st);
    assert_cw_ok(l.st);
    assert_true(unloaded);
    assert_int_equal(running, 1); /* b ran */
    assert_cw_ok(b_down);
    assert_int_equal(violations_since(v0), 0);
}

enum { RACE_LOAD, RACE_SYNC, RACE_UPDATE, RACES };
static const char *const race_names[RACES] = {"cw_module_load_image", "cw_context_synchronize",
                                              "cw_graph_exec_update"};

struct loader {
    int race;
    cw_module *m;
    cw_graph_exec *e; /* RACE_UPDATE: an exec with a conditional node, updated to g */
    cw_graph *g;
    cw_status st;
};

static void *load_main(void *arg) {
    struct loader *p = arg;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    cw_graph_update_info ui;
    p->st = p->race == RACE_LOAD   ? cw_module_load_image(&p->m, image)
            : p->race == RACE_SYNC ? cw_context_synchronize(ctx)
                                   : cw_graph_exec_update(p->e, p->g, &ui);
    if (p->race == RACE_UPDATE && p->st == CW_SUCCESS && ui.kind != CW_GRAPH_REINSTANTIATED) p->st = CW_ERROR_DRIVER;
    return NULL;
}

/* A load, a context synchronize and the destroy of the exec an update
 * replaces find no loop running, then make their driver call; a loop
 * launched by another thread in between must not run yet when that call is
 * made. */
static void test_load_racing_a_launch(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    const long libs = fake_live("library");
    for (int race = 0; race < RACES; race++) {
        assert_int_equal(fake_pers_running(), 0);
        struct loader p = {race, NULL, NULL, NULL, CW_ERROR_DRIVER};
        cw_graph *gc = NULL;
        if (race == RACE_UPDATE) { /* an exec with a conditional node; a plain graph to update it to */
            cw_cond_handle h;
            cw_graph *body = NULL;
            assert_cw_ok(cw_graph_create(&gc, ctx));
            assert_cw_ok(cw_graph_add_cond_handle(gc, 0, 0, &h));
            assert_cw_ok(cw_graph_add_conditional(gc, h, NULL, NULL, 0, NULL, &body, NULL));
            assert_cw_ok(cw_graph_add_empty(body, NULL, 0, NULL));
            assert_cw_ok(cw_graph_instantiate(&p.e, gc, 0));
            assert_cw_ok(cw_graph_create(&p.g, ctx));
            assert_cw_ok(cw_graph_add_empty(p.g, NULL, 0, NULL));
        }
        const long v0 = fake_pers_violations(NULL, 0);
        struct window w = {0};
        atomic_store(&w.armed, 1);
        cwi_idle_hooks(NULL, hold_window, &w);
        pthread_t pid, lid;
        assert_int_equal(pthread_create(&pid, NULL, load_main, &p), 0);
        wait_inside(&w); /* no loop runs: the load (the synchronize, the destroy) is about to be made */
        struct launcher l = {r, CW_ERROR_DRIVER, 0};
        const unsigned long waited = launch_beside(&l, &lid);
        atomic_store(&w.go, 1);
        pthread_join(pid, NULL);
        pthread_join(lid, NULL);
        cwi_idle_hooks(NULL, NULL, NULL);
        print_message("# %s\n", race_names[race]);
        const long violations = violations_since(v0);
        const long running = fake_pers_running(), loaded = fake_live("library") - libs;
        const cw_status down = cw_resident_tear_down(r, 1000); /* before any check: the next tests need no loop */
        cw_module_destroy(&p.m);
        cw_graph_exec_destroy(&p.e);
        cw_graph_destroy(&p.g);
        cw_graph_destroy(&gc);
        if (violations || p.st || l.st || running != 1 || down) cw_resident_destroy(&r);

        assert_int_equal(violations, 0);
        assert_int_equal(waited, 1); /* the launch waited for the call */
        assert_cw_ok(p.st);
        assert_cw_ok(l.st);
        assert_int_equal(running, 1); /* r ran */
        assert_int_equal(loaded, race == RACE_LOAD);
        assert_cw_ok(down);
        assert_int_equal(fake_live("library"), libs);
    }
    cw_resident_destroy(&r);
}

/* A launch made inside such a call on its own thread (here: a workload's
 * capture function, called while the loop's graph is built) would wait for
 * that call, which waits for it: it is refused. The build goes on. */
struct inner_launch {
    cw_resident *other;
    cw_status st;
    int calls;
};

static cw_status launch_in_capture(cw_stream *s, void *user) {
    (void)s;
    struct inner_launch *p = user;
    if (p->calls++ == 0) p->st = cw_resident_launch(p->other);
    return CW_SUCCESS;
}

static void test_launch_inside_a_build_refused(void **state) {
    (void)state;
    cw_resident *a = NULL, *b = NULL;
    assert_cw_ok(cw_resident_create(&a, ctx, NULL));
    assert_cw_ok(cw_resident_create(&b, ctx, NULL));
    assert_cw_ok(cw_resident_build(b));
    struct inner_launch p = {b, CW_SUCCESS, 0};
    assert_cw_ok(cw_resident_set_workload_fn(a, launch_in_capture, &p));
    const unsigned long waits = cwi_idle_launch_waits();
    assert_cw_ok(cw_resident_build(a));
    assert_true(p.calls >= 1);
    assert_int_equal(p.st, CW_ERROR_INVALID_STATE);
    printf("# %s\n", cw_last_error()->message);
    assert_non_null(strstr(cw_last_error()->message, "launching a resident loop from inside a call that waits"));
    assert_int_equal(cwi_idle_launch_waits(), waits);
    cw_resident_state st;
    assert_cw_ok(cw_resident_get_state(b, &st));
    assert_int_equal(st, CW_RESIDENT_NOT_LAUNCHED);
    assert_int_equal(fake_pers_running(), 0);
    /* outside the build both launch */
    assert_cw_ok(cw_resident_launch(b));
    assert_cw_ok(cw_resident_launch(a));
    assert_cw_ok(cw_resident_tear_down(a, 1000));
    assert_cw_ok(cw_resident_tear_down(b, 1000));
    cw_resident_destroy(&a);
    cw_resident_destroy(&b);
}

/* The first cw_trace_record_resident for a context calibrates its global
 * timer: a probe kernel writes the timer to mapped host memory, which is
 * freed after. trace.h allows that call while the loop runs (it returns
 * CW_ERROR_TIMEOUT when the loop keeps the probe from running, as here: the
 * fake runs no probe); the free must then wait for the loops, not be made
 * while one runs (cuMemFreeHost would wait for good). */
static cw_status one_stage(cw_stream *s, void *user) {
    uint32_t stage = 0;
    cw_status st = cw_resident_stage_begin(user, s, "stage", &stage);
    return st != CW_SUCCESS ? st : cw_resident_stage_end(user, s, stage);
}

static void test_trace_calibrated_beside_a_loop(void **state) {
    (void)state;
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(r, one_stage, r));
    assert_cw_ok(cw_resident_build(r));
    /* one calibration with no loop running first (it warms a pool of the
     * context, and frees the probe's word at once) */
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    long host_before = fake_live("hostmem");
    assert_cw(CW_ERROR_TIMEOUT, cw_trace_record_resident(t, r)); /* the fake runs no probe */
    assert_int_equal(fake_live("hostmem"), host_before);
    cw_trace_destroy(&t);
    long before[NKINDS];
    snapshot(before);
    assert_cw_ok(cw_trace_create(&t, NULL));
    host_before = fake_live("hostmem");
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(fake_pers_running(), 1);
    const long v0 = fake_pers_violations(NULL, 0);
    const cw_status st = cw_trace_record_resident(t, r);
    const long violations = violations_since(v0);
    const long host_during = fake_live("hostmem"); /* the probe's word, kept while the loop runs */
    const cw_status down = cw_resident_tear_down(r, 1000);
    const long host_after = fake_live("hostmem");
    cw_trace_destroy(&t);
    const int leaked = leaks(before, "a calibration beside a running loop");
    cw_resident_destroy(&r);

    assert_int_equal(violations, 0);
    assert_int_equal(st, CW_ERROR_TIMEOUT);
    assert_int_equal(host_during, host_before + 1);
    assert_cw_ok(down);
    assert_int_equal(host_after, host_before); /* freed once the loop stopped */
    assert_int_equal(leaked, 0);
}

/* A shareable buffer (cuMemAlloc memory, cw_buffer_create_shareable) whose
 * exporter destroys it while a loop runs, no importer holding it: its
 * cuMemFree waits for the loop like any other, so it is made once no loop
 * runs. Returns what it saw: violations, the memory kept while the loop ran
 * and freed after it stopped. */
struct share_round {
    long violations, kept, freed;
    cw_status down;
};

static struct share_round shareable_round(cw_stream *s) {
    struct share_round o = {0, 0, 0, CW_SUCCESS};
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create_shareable(&b, s, 4096));
    cw_shared_handle h;
    assert_cw_ok(cw_buffer_export(b, &h));
    const long dev = fake_live("devmem");
    assert_cw_ok(cw_resident_launch(r));
    const long v0 = fake_pers_violations(NULL, 0);
    cw_buffer_destroy(&b);
    o.violations = violations_since(v0);
    o.kept = fake_live("devmem") == dev;
    o.down = cw_resident_tear_down(r, 1000);
    o.freed = fake_live("devmem") == dev - 1;
    cw_resident_destroy(&r);
    return o;
}

static void test_shareable_buffer_freed_beside_a_loop(void **state) {
    (void)state;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    const struct share_round first = shareable_round(s); /* warms the context's pools too */
    long before[NKINDS];
    snapshot(before);
    const struct share_round second = shareable_round(s);
    const int leaked = leaks(before, "a shareable buffer freed beside a running loop");
    cw_stream_destroy(&s);

    const struct share_round *rounds[2] = {&first, &second};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rounds[i]->violations, 0);
        assert_true(rounds[i]->kept); /* while the loop runs */
        assert_cw_ok(rounds[i]->down);
        assert_true(rounds[i]->freed); /* once it stopped */
    }
    assert_int_equal(leaked, 0);
}

/* Mapped host memory made while a loop runs (a WRITE_VALUE future's slab
 * page, a loop's host block): when cuMemHostGetDevicePointer fails after
 * cuMemHostAlloc, the memory made goes back, and not by a cuMemFreeHost
 * made while the loop runs (it would wait for good). */
static void test_mapped_alloc_failing_beside_a_loop(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    cw_context *c2 = NULL; /* its own slab of futures: the first WRITE_VALUE future makes a page */
    assert_cw_ok(cw_context_create(&c2, 0));
    cw_stream *s2 = NULL;
    assert_cw_ok(cw_stream_create(&s2, c2, NULL));
    const long host0 = fake_live("hostmem");
    assert_cw_ok(cw_resident_launch(r));
    const long v0 = fake_pers_violations(NULL, 0);
    assert_int_equal(cwi_seam_enable(), 0);
    const int id = cwi_seam_entry("cuMemHostGetDevicePointer");
    assert_true(id >= 0);
    cwi_seam_fail(id, 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
    cw_future *f = NULL;
    const cw_status fst = cw_future_create(&f, s2, CW_FUTURE_WRITE_VALUE);
    const int fired_future = cwi_seam_fired();
    cwi_seam_fail(id, 1, 2);
    cw_resident *r2 = NULL;
    const cw_status rst = cw_resident_create(&r2, ctx, NULL);
    const int fired_loop = cwi_seam_fired();
    cwi_seam_fail(id, 0, 0);
    cwi_seam_disable();
    const long violations = violations_since(v0);
    const long host_during = fake_live("hostmem") - host0;
    const cw_status down = cw_resident_tear_down(r, 1000);
    const long host_after = fake_live("hostmem") - host0;
    cw_resident_destroy(&r);
    cw_stream_destroy(&s2);
    cw_context_destroy(&c2);

    assert_true(fired_future && fired_loop);
    assert_int_equal(fst, CW_ERROR_OUT_OF_MEMORY);
    assert_null(f);
    assert_int_equal(rst, CW_ERROR_OUT_OF_MEMORY);
    assert_null(r2);
    assert_int_equal(violations, 0);
    assert_true(host_during >= 0);
    assert_cw_ok(down);
    assert_int_equal(host_after, 0); /* what the failed calls made is freed once the loop stopped */
}

/* A launch from a HOST_FUNC future's callback, which runs on the driver's
 * callback thread (future.h: no CUDA call there), while another thread's
 * cw_context_synchronize waits for that callback's host function: the
 * launch must not wait for the synchronize (which waits for it), but be
 * refused as other such calls are. The callback's end is waited for up to
 * 10 s; past that the program ends (the two threads wait for each other). */
static void (*fake_hold)(int on);
struct host_fn_launch {
    cw_resident *r;
    atomic_int st; /* -1 until the launch returned */
};

static void launch_in_host_fn(void *user, cw_future *f, cw_status status) {
    (void)f;
    (void)status;
    struct host_fn_launch *p = user;
    usleep(50000); /* the synchronize is under way by then (it waits for this host function) */
    atomic_store(&p->st, (int)cw_resident_launch(p->r));
}

struct syncer {
    cw_status st;
    atomic_int done;
};

static void *sync_main(void *arg) {
    struct syncer *y = arg;
    y->st = cw_context_synchronize(ctx);
    atomic_store(&y->done, 1);
    return NULL;
}

static void test_launch_in_host_fn_callback_refused(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    struct host_fn_launch p = {r, -1};
    fake_hold(1); /* the marker waits until the synchronize has begun */
    cw_future *f = NULL;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_HOST_FUNC));
    assert_cw_ok(cw_future_set_callback(f, launch_in_host_fn, &p));
    struct syncer y = {CW_ERROR_INTERNAL, 0};
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, sync_main, &y), 0);
    usleep(20000);
    fake_hold(0);
    for (int i = 0; i < 10000 && atomic_load(&p.st) == -1; i++) usleep(1000);
    if (atomic_load(&p.st) == -1) {
        printf("FAIL: test_launch_in_host_fn_callback_refused: the launch inside the callback has not returned after "
               "10 s (it waits for cw_context_synchronize, which waits for the callback's host function)\n");
        fflush(stdout);
        _exit(1);
    }
    pthread_join(tid, NULL);
    cw_future_destroy(&f);
    cw_stream_destroy(&s);
    const long running = fake_pers_running();
    cw_resident_state rst;
    assert_cw_ok(cw_resident_get_state(r, &rst));
    cw_resident_destroy(&r);
    assert_int_equal(atomic_load(&p.st), CW_ERROR_NOT_PERMITTED);
    assert_cw_ok(y.st);
    assert_int_equal(rst, CW_RESIDENT_NOT_LAUNCHED);
    assert_int_equal(running, 0);
}

/* A data-ready handler: host requests are refused; the graph builds. */
static void test_handler_mode(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_graph *h = NULL;
    assert_cw_ok(cw_graph_create(&h, ctx));
    assert_cw_ok(cw_graph_add_empty(h, NULL, 0, NULL));
    assert_cw_ok(cw_resident_set_handler(r, h));
    assert_cw_ok(cw_resident_launch(r));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));
    assert_non_null(strstr(cw_last_error()->message, "handler"));
    /* handler numbers are not bounded by the host */
    assert_cw(CW_ERROR_NOT_READY, cw_resident_poll_result(r, 5));
    assert_cw_ok(cw_resident_tear_down(r, 100));
    /* removing the handler: host requests again */
    assert_cw_ok(cw_resident_set_handler(r, NULL));
    assert_cw_ok(cw_resident_launch(r));
    assert_cw_ok(cw_resident_data_ready(r, NULL));
    cw_resident_destroy(&r);
    cw_graph_destroy(&h);
    assert_int_equal(leaks(before, "handler mode"), 0);
}

/* A workload given as a capture function: called once per copy of the
 * iteration at each build; its error fails the launch (nothing left
 * launched, nothing leaked); refused while launched. Gated by kernels too. */
typedef struct cap_count {
    int calls;
    cw_status ret;
} cap_count;

static cw_status count_capture(cw_stream *s, void *user) {
    cap_count *c = user;
    c->calls++;
    if (c->ret != CW_SUCCESS) return c->ret;
    cw_kernel *k = NULL;
    cw_status st = cw_builtin_get_kernel(CW_BUILTIN_TIMESTAMP, &k); /* any kernel: the fake runs none */
    if (st != CW_SUCCESS) return st;
    unsigned long long dst = 0;
    void *args[] = {&dst};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    return cw_kernel_launch(k, s, &cfg, args);
}

static void test_workload_fn(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    for (int gate = 0; gate < 2; gate++) {
        cw_resident_settings s;
        cw_resident_settings_default(&s);
        s.unroll = 5;
        s.gate = gate ? CW_RESIDENT_GATE_KERNELS : CW_RESIDENT_GATE_NODE;
        cw_resident *r = NULL;
        assert_cw_ok(cw_resident_create(&r, ctx, &s));
        cap_count c = {0, CW_ERROR_NOT_PERMITTED};
        assert_cw_ok(cw_resident_set_workload_fn(r, count_capture, &c));
        assert_cw(CW_ERROR_NOT_PERMITTED, cw_resident_launch(r)); /* the function's error */
        assert_int_equal(c.calls, 1);
        cw_resident_state rs;
        assert_cw_ok(cw_resident_get_state(r, &rs));
        assert_int_equal(rs, CW_RESIDENT_NOT_LAUNCHED);
        c.ret = CW_SUCCESS;
        c.calls = 0;
        assert_cw_ok(cw_resident_launch(r));
        assert_int_equal(c.calls, 5); /* once per copy */
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_workload_fn(r, count_capture, &c));
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_handler_fn(r, count_capture, &c));
        assert_cw_ok(cw_resident_tear_down(r, 100));
        assert_cw_ok(cw_resident_launch(r)); /* nothing changed: no rebuild */
        assert_int_equal(c.calls, 5);
        assert_cw_ok(cw_resident_tear_down(r, 100));
        assert_cw_ok(cw_resident_set_handler_fn(r, count_capture, &c)); /* handler and workload: 2 per copy */
        c.calls = 0;
        assert_cw_ok(cw_resident_launch(r));
        assert_int_equal(c.calls, 10);
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));
        cw_resident_destroy(&r);
    }
    assert_int_equal(leaks(before, "capture functions"), 0);
}


/* ---- issue 24: gate and overlap AUTO (the defaults), gate BEGIN_END ----
 * The fake's kernels from a module have the parameters their names say
 * ("first#8,8": two 8-byte ones); a captured launch keeps its arguments,
 * which the loop reads back (cuGraphKernelNodeGetParams, cuFuncGetParamInfo)
 * to see whether a kernel takes the loop's device block. */
static const char k_fake_ptx[] = "//\n// resident test kernels\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n";

static long launches(void) { return fake_calls("cuLaunchKernel") + fake_calls("cuLaunchKernelEx"); }

/* A capture function: kernels named in kinds[], launched one after the
 * other, each given the loop's device block (or, for a name without
 * "ctl", a device address that is not it), or a copy ("copy"). */
typedef struct fused_work {
    cw_module *m;
    cw_devptr ctl;
    const char *kinds[4];
    int n;
    int calls;
    void *host;
} fused_work;

static cw_status fused_capture(cw_stream *s, void *user) {
    fused_work *w = (fused_work *)user;
    w->calls++;
    for (int i = 0; i < w->n; i++) {
        if (!strcmp(w->kinds[i], "fork")) {
            /* the next kernel on a branch beside the rest, joined back at the end */
            cw_stream *br = NULL;
            cw_status st = cw_stream_fork(&br, s);
            fused_work one = *w;
            one.kinds[0] = w->kinds[i + 1];
            one.n = 1;
            if (st == CW_SUCCESS) st = fused_capture(br, &one);
            fused_work rest = *w;
            for (int k = 0; k + i + 2 < w->n; k++) rest.kinds[k] = w->kinds[k + i + 2];
            rest.n = w->n - i - 2;
            if (st == CW_SUCCESS) st = fused_capture(s, &rest);
            cw_status j = br ? cw_stream_join(s, &br) : CW_SUCCESS;
            return st != CW_SUCCESS ? st : j;
        }
        if (!strcmp(w->kinds[i], "copy")) {
            cw_status st = cw_copy_to_device(s, w->ctl, w->host, 8);
            if (st != CW_SUCCESS) return st;
            continue;
        }
        cw_kernel *k = NULL;
        cw_status st = cw_module_get_kernel(w->m, w->kinds[i], &k);
        if (st != CW_SUCCESS) return st;
        unsigned long long a = strstr(w->kinds[i], "ctl") ? w->ctl : 0x1000, b = 0x2000;
        void *args[] = {&a, &b};
        cw_launch_config cfg;
        cw_launch_config_default(&cfg);
        st = cw_kernel_launch(k, s, &cfg, args);
        if (st != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

static cw_resident *made(cw_resident_gate gate, int overlap, uint32_t unroll) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.gate = gate;
    s.overlap = overlap;
    s.unroll = unroll;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    return r;
}

static void test_auto_gate_and_overlap(void **state) {
    (void)state;
    cw_stream *cs = NULL; /* (its events are the context's to keep: made before the snapshot) */
    assert_cw_ok(cw_stream_create(&cs, ctx, NULL));
    fused_work w; /* (the module and the host memory are made before the snapshot) */
    memset(&w, 0, sizeof w);
    assert_cw_ok(cw_module_load_image(&w.m, k_fake_ptx));
    assert_cw_ok(cw_host_alloc(&w.host, ctx, 64));
    cw_resident *warm = made(CW_RESIDENT_GATE_AUTO, CW_RESIDENT_OVERLAP_AUTO, 1);
    cw_resident_destroy(&warm); /* (the context's pool of events grows to what a loop takes, beside cs) */
    long before[NKINDS];
    snapshot(before);
    cw_resident_info info;

    /* Before a build the info shows the settings as they are. */
    cw_resident *r = made(CW_RESIDENT_GATE_AUTO, CW_RESIDENT_OVERLAP_AUTO, 4);
    assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_AUTO);
    assert_int_equal(info.overlap, CW_RESIDENT_OVERLAP_AUTO);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NONE);
    assert_string_equal(info.fallback_detail, "");

    /* No workload: nothing to gate, kernels; overlap on (the fake is a 9.0
     * device). The conditional nodes a build adds (cuGraphAddNode): the
     * WHILE node, and with gate NODE an IF node per copy. */
    long cond0 = fake_calls("cuGraphAddNode");
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    if (info.overlap != 1) fail_msg("no overlap: %s", info.fallback_detail);
    assert_int_equal(fake_calls("cuGraphAddNode") - cond0, 1); /* the WHILE node only: no IF node */

    /* Kernels that take the device block: kernels, overlap, no IF node; the
     * capture function ran once more to be looked at. */
    w.kinds[0] = "k1ctl#8,8", w.kinds[1] = "k2ctl#8,8", w.n = 2;
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    long l0 = launches();
    cond0 = fake_calls("cuGraphAddNode");
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(w.calls, 4 + 1);
    /* per copy: poll, k1, k2, signal; arm and exit; and the look: k1, k2 */
    assert_int_equal(launches() - l0, 4 * 4 + 2 + 2);
    assert_int_equal(fake_calls("cuGraphAddNode") - cond0, 1);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(info.overlap, 1);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NONE);
    assert_int_equal(fake_last_prog(), 4 * 3 + 3); /* poll->k1->k2->signal per copy, signal->next poll */

    /* Code for compute 8.0: kernels still, no overlap, and why. */
    setenv("FAKE_CUDA_PTX_VERSION", "80", 1);
    cw_resident_settings s;
    assert_cw_ok(cw_resident_get_settings(r, &s));
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw_ok(cw_resident_build(r));
    unsetenv("FAKE_CUDA_PTX_VERSION");
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_CODE);
    assert_non_null(strstr(info.fallback_detail, "compute_80"));
    assert_int_equal(fake_last_prog(), 0);

    /* A kernel without the device block: gate NODE (an IF node per copy), named. */
    w.kinds[1] = "plain#8,8";
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    cond0 = fake_calls("cuGraphAddNode");
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_NODE);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NO_CTL);
    assert_non_null(strstr(info.fallback_detail, "'plain#8,8'"));
    assert_int_equal(fake_calls("cuGraphAddNode") - cond0, 1 + 4);
    /* the library's own timestamp kernel has no device block either */
    assert_cw_ok(cw_resident_set_workload_fn(r, three_kernels, NULL));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_NODE);
    assert_non_null(strstr(info.fallback_detail, "cwk_timestamp"));

    /* A copy in the workload: gate NODE, named. */
    w.kinds[1] = "copy";
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_NODE);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NODE);
    assert_non_null(strstr(info.fallback_detail, "a copy"));

    /* A workload graph is looked into (its child graph): kernels with the
     * block qualify; the graph is not called again. */
    w.kinds[1] = "k2ctl#8,8";
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_begin(cs, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw_ok(fused_capture(cs, &w));
    assert_cw_ok(cw_capture_end(&g, cs));
    assert_cw_ok(cw_resident_set_workload(r, g));
    cond0 = fake_calls("cuGraphAddNode");
    long kn0 = fake_calls("cuGraphAddKernelNode"), child0 = fake_calls("cuGraphAddChildGraphNode");
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(fake_calls("cuGraphAddNode") - cond0, 1);
    /* a child graph node in every copy of the iteration (no node-by-node
     * copy: cuGraphAddKernelNode of a node read back crashed in the H100's
     * driver), so no overlap, with the reason */
    assert_int_equal(fake_calls("cuGraphAddKernelNode") - kn0, 0);
    assert_int_equal(fake_calls("cuGraphAddChildGraphNode") - child0, 4);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NODE);
    assert_non_null(strstr(info.fallback_detail, "child graph node"));
    cw_graph_destroy(&g);
    w.kinds[1] = "copy";
    assert_cw_ok(cw_capture_begin(cs, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw_ok(fused_capture(cs, &w));
    assert_cw_ok(cw_capture_end(&g, cs));
    assert_cw_ok(cw_resident_set_workload(r, g));
    kn0 = fake_calls("cuGraphAddKernelNode"), child0 = fake_calls("cuGraphAddChildGraphNode");
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_NODE);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NODE);
    /* a graph that does not qualify stays a child graph node, in each IF body */
    assert_int_equal(fake_calls("cuGraphAddKernelNode") - kn0, 0);
    assert_int_equal(fake_calls("cuGraphAddChildGraphNode") - child0, 4);
    cw_graph_destroy(&g);

    /* A data-ready handler: kernels still, overlap off (its kernels are not known to wait). */
    w.kinds[1] = "k2ctl#8,8";
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_set_handler_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_SETTING);
    assert_non_null(strstr(info.fallback_detail, "handler"));
    assert_cw_ok(cw_resident_set_handler_fn(r, NULL, NULL));
    cw_resident_destroy(&r);

    /* Explicit settings keep their meaning: NODE stays NODE for a workload
     * that qualifies, KERNELS stays KERNELS for one that does not; no look
     * (the capture function runs once per copy). */
    r = made(CW_RESIDENT_GATE_NODE, CW_RESIDENT_OVERLAP_AUTO, 4);
    assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
    w.calls = 0;
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(w.calls, 4);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_NODE);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_SETTING);
    cw_resident_destroy(&r);
    r = made(CW_RESIDENT_GATE_KERNELS, 0, 4);
    assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
    w.kinds[1] = "plain#8,8";
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_NONE);
    cw_resident_destroy(&r);

    /* under compute-sanitizer (its injection variable set) overlap AUTO turns off */
    setenv("NV_SANITIZER_INJECTION_PORT_BASE", "12345", 1);
    r = made(CW_RESIDENT_GATE_AUTO, CW_RESIDENT_OVERLAP_AUTO, 2);
    assert_cw_ok(cw_resident_build(r));
    unsetenv("NV_SANITIZER_INJECTION_PORT_BASE");
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.gate, CW_RESIDENT_GATE_KERNELS);
    assert_int_equal(info.overlap, 0);
    assert_non_null(strstr(info.fallback_detail, "compute-sanitizer"));
    cw_resident_destroy(&r);

    /* trace: overlap AUTO turns off */
    cw_resident_settings_default(&s);
    s.trace = 1;
    s.unroll = 2;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
    w.kinds[1] = "k2ctl#8,8";
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.overlap, 0);
    assert_int_equal(info.fallback, CW_RESIDENT_FALLBACK_SETTING);
    assert_non_null(strstr(info.fallback_detail, "traces"));
    cw_resident_destroy(&r);

    assert_int_equal(leaks(before, "auto builds"), 0);
    cw_host_free(ctx, &w.host);
    cw_module_destroy(&w.m);
    cw_stream_destroy(&cs);
}

/* Gate BEGIN_END: the WHILE body holds the workload's kernels, `unroll` times,
 * and one loop kernel; no poll, no signal, no IF node. Every refusal. */
static void test_fused(void **state) {
    (void)state;
    fused_work w; /* (the module and the host memory are made before the snapshot) */
    memset(&w, 0, sizeof w);
    assert_cw_ok(cw_module_load_image(&w.m, k_fake_ptx));
    assert_cw_ok(cw_host_alloc(&w.host, ctx, 64));
    cw_resident *warm = made(CW_RESIDENT_GATE_AUTO, CW_RESIDENT_OVERLAP_AUTO, 1);
    cw_resident_destroy(&warm); /* (the context's pool of events grows to what a loop takes, beside cs) */
    {
        /* (the context's pools of forked streams and of events grow to what
         * a fork in a capture function takes beside a loop: one such build
         * made before the snapshot) */
        cw_resident *warm2 = made(CW_RESIDENT_GATE_BEGIN_END, CW_RESIDENT_OVERLAP_AUTO, 2);
        assert_cw_ok(cw_resident_get_ctl(warm2, &w.ctl));
        w.kinds[0] = "fork", w.kinds[1] = "firstctl#8,8", w.kinds[2] = "lastctl#8,8", w.n = 3;
        assert_cw_ok(cw_resident_set_workload_fn(warm2, fused_capture, &w));
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(warm2));
        cw_resident_destroy(&warm2);
    }
    long before[NKINDS];
    snapshot(before);
    cw_resident_info info;

    for (int overlap = 0; overlap < 2; overlap++) {
        cw_resident *r = made(CW_RESIDENT_GATE_BEGIN_END, overlap ? CW_RESIDENT_OVERLAP_AUTO : 0, 4);
        assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
        w.kinds[0] = "firstctl#8,8", w.kinds[1] = "midctl#8,8", w.kinds[2] = "lastctl#8,8", w.n = 3;
        w.calls = 0;
        assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
        long l0 = launches(), cond0 = fake_calls("cuGraphAddNode"), coop0 = fake_coop_nodes();
        assert_cw_ok(cw_resident_build(r));
        /* each copy's first kernel (the one calling cw_resident_begin, whose
         * blocks wait for block 0) cooperative, and only it: 4 copies */
        assert_int_equal(fake_coop_nodes() - coop0, 4);
        /* arm, 4 x (first, mid, last), loop, exit: the user's kernels and 3 */
        assert_int_equal(launches() - l0, 1 + 4 * 3 + 1 + 1);
        assert_int_equal(w.calls, 4); /* FUSED is explicit: no look */
        assert_int_equal(fake_calls("cuGraphAddNode") - cond0, 1); /* the WHILE node, no IF node */
        assert_cw_ok(cw_resident_get_info(r, &info));
        assert_int_equal(info.gate, CW_RESIDENT_GATE_BEGIN_END);
        assert_int_equal(info.overlap, overlap);
        /* with overlap: first->mid->last in each copy, last -> the next
         * copy's first, the last copy's last -> the loop kernel (9.0 code) */
        assert_int_equal(fake_last_prog(), overlap ? 4 * 2 + 3 + 1 : 0);
        /* it launches and tears down like any loop */
        assert_cw_ok(cw_resident_launch(r));
        uint64_t seq = 0;
        assert_cw_ok(cw_resident_data_ready(r, &seq));
        assert_int_equal(seq, 1);
        assert_cw_ok(cw_resident_tear_down(r, 100));
        /* one kernel that both begins and ends */
        w.kinds[0] = "onlyctl#8,8", w.n = 1;
        assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
        l0 = launches();
        assert_cw_ok(cw_resident_build(r));
        assert_int_equal(launches() - l0, 1 + 4 + 1 + 1);
        /* a build refused afterwards leaves what the last good one chose in the info */
        w.kinds[0] = "copy", w.kinds[1] = "lastctl#8,8", w.n = 2;
        assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
        assert_cw_ok(cw_resident_get_info(r, &info));
        assert_int_equal(info.gate, CW_RESIDENT_GATE_BEGIN_END);
        assert_int_equal(info.overlap, overlap);
        cw_resident_destroy(&r);
    }

    /* Refusals, at the build (CW_ERROR_INVALID_STATE, naming why). */
    struct {
        const char *kinds[3];
        int n;
        const char *says;
    } bad[] = {
        {{"firstplain#8,8", "lastctl#8,8"}, 2, "first kernel 'firstplain#8,8'"},
        {{"firstctl#8,8", "lastplain#8,8"}, 2, "last kernel 'lastplain#8,8'"},
        {{"firstctl#8,8", "copy"}, 2, "last node is a copy"},
        {{"copy", "lastctl#8,8"}, 2, "first node is a copy"},
        {{NULL}, 0, "captured nothing"},
        /* two kernels side by side: 2 first and 2 last nodes */
        {{"fork", "firstctl#8,8", "lastctl#8,8"}, 3, "its graph has 2 first and 2 last nodes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cw_resident *r = made(CW_RESIDENT_GATE_BEGIN_END, CW_RESIDENT_OVERLAP_AUTO, 2);
        assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
        for (int k = 0; k < 3; k++) w.kinds[k] = bad[i].kinds[k];
        w.n = bad[i].n;
        assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
        if (!strstr(cw_last_error()->message, bad[i].says)) fail_msg("case %zu: %s", i, cw_last_error()->message);
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_launch(r));
        cw_resident_state rs;
        assert_cw_ok(cw_resident_get_state(r, &rs));
        assert_int_equal(rs, CW_RESIDENT_NOT_LAUNCHED);
        cw_resident_destroy(&r);
    }
    /* no workload, a workload graph, a data-ready handler */
    cw_resident *r = made(CW_RESIDENT_GATE_BEGIN_END, CW_RESIDENT_OVERLAP_AUTO, 2);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
    assert_non_null(strstr(cw_last_error()->message, "none is set"));
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    assert_cw_ok(cw_graph_add_empty(g, NULL, 0, NULL));
    assert_cw_ok(cw_resident_set_workload(r, g));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
    assert_non_null(strstr(cw_last_error()->message, "it is a graph"));
    assert_cw_ok(cw_resident_get_ctl(r, &w.ctl));
    w.kinds[0] = "onlyctl#8,8", w.n = 1;
    assert_cw_ok(cw_resident_set_workload_fn(r, fused_capture, &w));
    assert_cw_ok(cw_resident_set_handler(r, g));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
    assert_non_null(strstr(cw_last_error()->message, "data-ready handler"));
    cw_graph_destroy(&g);
    cw_resident_destroy(&r);

    assert_int_equal(leaks(before, "fused builds"), 0);
    cw_host_free(ctx, &w.host);
    cw_module_destroy(&w.m);
}

/* ---- request numbering and readiness (issue 24, defects 1, 2 and 5) ----
 * The fake runs no kernels: the test writes the host block's GPU words
 * (completed: the last request served) as the loop's signal kernel would,
 * and reads the words the host wrote for the GPU (base: the number the
 * launch counts from). */
static void gpu_serves(struct cw_res_host *h, uint64_t seq) { __atomic_store_n(&h->completed, seq, __ATOMIC_RELEASE); }
static uint64_t launch_base(const struct cw_res_host *h) { return __atomic_load_n(&h->base, __ATOMIC_ACQUIRE); }

/* Defect 1: a handler-mode launch numbers its requests after every number
 * an earlier launch used, so a relaunch does not restart at 1 (where the
 * first request of the new launch would read as served by the old one),
 * and host requests after handler ones go on after them too. */
static void test_numbering_goes_on_across_launches(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    struct cw_res_host *h = cwi_resident_host(r);
    assert_non_null(h);
    cw_graph *hg = NULL;
    assert_cw_ok(cw_graph_create(&hg, ctx));
    assert_cw_ok(cw_graph_add_empty(hg, NULL, 0, NULL));
    assert_cw_ok(cw_resident_set_handler(r, hg));
    cw_graph_destroy(&hg);
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(launch_base(h), 0);
    gpu_serves(h, 100); /* the handler marked 100 requests ready, all served */
    assert_cw_ok(cw_resident_poll_result(r, 100));
    assert_cw_ok(cw_resident_tear_down(r, 100));
    assert_cw_ok(cw_resident_poll_result(r, 1)); /* served by the first launch */

    /* relaunch: the GPU numbers from 101 */
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(launch_base(h), 100);
    cw_clear_error();
    assert_cw(CW_ERROR_NOT_READY, cw_resident_poll_result(r, 101));
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_wait_result(r, 101, 0));
    gpu_serves(h, 101);
    assert_cw_ok(cw_resident_wait_result(r, 101, 0));
    assert_cw_ok(cw_resident_tear_down(r, 100));

    /* host requests after handler ones: numbered after them, not ready */
    assert_cw_ok(cw_resident_set_handler(r, NULL));
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(launch_base(h), 101);
    uint64_t s = 0;
    assert_cw_ok(cw_resident_data_ready(r, &s));
    assert_int_equal(s, 102);
    assert_cw(CW_ERROR_NOT_READY, cw_resident_poll_result(r, s));
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_wait_result(r, s, 0));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.requested, 102);
    assert_int_equal(info.completed, 101);
    assert_cw_ok(cw_resident_tear_down(r, 100));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_poll_result(r, s));
    assert_non_null(strstr(cw_last_error()->message, "dropped"));
    assert_cw_ok(cw_resident_poll_result(r, 50)); /* the handler's, still served */
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "numbering across launches"), 0);
}

/* Defect 2 (its second half): every teardown's dropped requests stay
 * dropped, however many teardowns later and after later launches served
 * requests numbered above them. */
static void test_dropped_requests_stay_dropped(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    struct cw_res_host *h = cwi_resident_host(r);
    enum { TEARDOWNS = 40 };
    uint64_t dropped[TEARDOWNS], served = 0;
    for (int i = 0; i < TEARDOWNS; i++) {
        assert_cw_ok(cw_resident_launch(r));
        uint64_t a = 0;
        assert_cw_ok(cw_resident_data_ready(r, &a));
        if (i % 2) { /* every other launch serves one request first */
            gpu_serves(h, a);
            served = a;
            assert_cw_ok(cw_resident_data_ready(r, &a));
        }
        dropped[i] = a;
        assert_cw_ok(cw_resident_tear_down(r, 100));
    }
    assert_cw_ok(cw_resident_launch(r));
    uint64_t s = 0;
    assert_cw_ok(cw_resident_data_ready(r, &s));
    assert_int_equal(s, dropped[TEARDOWNS - 1] + 1);
    gpu_serves(h, s);
    assert_cw_ok(cw_resident_poll_result(r, s));
    assert_cw_ok(cw_resident_poll_result(r, served));
    for (int i = 0; i < TEARDOWNS; i++) {
        cw_status st = cw_resident_poll_result(r, dropped[i]);
        if (st != CW_ERROR_INVALID_STATE || !strstr(cw_last_error()->message, "dropped"))
            fail_msg("request %llu (dropped by teardown %d): %s", (unsigned long long)dropped[i], i,
                     cw_status_name(st));
        assert_cw(CW_ERROR_INVALID_STATE, cw_resident_wait_result(r, dropped[i], 0));
    }
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "dropped requests"), 0);
}

/* Defect 2: requests made while a teardown records what it dropped are
 * either refused or dropped with the rest; none is accepted and then
 * forgotten (reported ready once a later launch serves a request). Two
 * threads make requests while the main thread tears the loop down, many
 * times over; every other time the GPU first stops by itself (a timeout,
 * written as the exit kernel would) and the main thread relaunches. */
#define RACE_KEEP 4096 /* the last requests each thread made: those near the teardown */
typedef struct racer {
    cw_resident *r;
    uint64_t seqs[RACE_KEEP];
    size_t n;
    int started;
} racer;

static void *race_requests(void *arg) {
    racer *x = arg;
    for (;;) {
        uint64_t s = 0;
        if (cw_resident_data_ready(x->r, &s) != CW_SUCCESS) break;
        x->seqs[x->n++ % RACE_KEEP] = s;
        __atomic_store_n(&x->started, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&x->started, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_requests_racing_teardown(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    struct cw_res_host *h = cwi_resident_host(r);
    static racer x[2];
    for (int t = 0; t < 2; t++) x[t].r = r;
    size_t lost = 0, later = 0, total = 0;
    for (int round = 0; round < 200; round++) {
        assert_cw_ok(cw_resident_launch(r));
        pthread_t th[2];
        for (int t = 0; t < 2; t++) {
            x[t].n = 0;
            x[t].started = 0;
            assert_int_equal(pthread_create(&th[t], NULL, race_requests, &x[t]), 0);
        }
        for (int t = 0; t < 2; t++)
            while (!__atomic_load_n(&x[t].started, __ATOMIC_ACQUIRE)) sched_yield();
        if (round % 2) {
            /* the GPU stops by itself (timeout), and this thread relaunches
             * (settling that launch) while the others make requests */
            __atomic_store_n(&h->exit_reason, CW_RES_EXIT_TIMEOUT, __ATOMIC_RELAXED);
            __atomic_store_n(&h->exited_epoch, __atomic_load_n(&h->epoch, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
            sched_yield();
            assert_cw_ok(cw_resident_launch(r));
        }
        assert_cw_ok(cw_resident_tear_down(r, 1000));
        for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
        /* nothing was served: each accepted request was dropped */
        for (int t = 0; t < 2; t++)
            for (size_t i = 0; i < x[t].n && i < RACE_KEEP; i++) {
                total++;
                cw_status st = cw_resident_poll_result(r, x[t].seqs[i]);
                if (st != CW_ERROR_INVALID_STATE || !strstr(cw_last_error()->message, "dropped")) lost++;
            }
    }
    /* a later launch serves its first request: the dropped ones stay so */
    assert_cw_ok(cw_resident_launch(r));
    uint64_t s = 0;
    assert_cw_ok(cw_resident_data_ready(r, &s));
    gpu_serves(h, s);
    assert_cw_ok(cw_resident_poll_result(r, s));
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < x[t].n && i < RACE_KEEP; i++)
            if (cw_resident_poll_result(r, x[t].seqs[i]) != CW_ERROR_INVALID_STATE) later++;
    printf("# %zu requests checked (the last made before each teardown), %zu not reported dropped, %zu reported "
           "ready later\n",
           total, lost, later);
    assert_int_equal(later, 0);
    assert_int_equal(lost, 0);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "requests racing teardown"), 0);
}

/* Defect 5: the state and results are read while another thread launches
 * and tears the loop down (documented safe). Checked by ThreadSanitizer
 * (build/tsan: meson test -C build/tsan test_resident_cpu); here: each
 * state read is one a launch goes through. */
static int g_state_stop;
static long g_state_reads;
static void *read_state(void *arg) {
    cw_resident *r = arg;
    while (!__atomic_load_n(&g_state_stop, __ATOMIC_ACQUIRE)) {
        cw_resident_state st;
        if (cw_resident_get_state(r, &st) != CW_SUCCESS) return (void *)1;
        if (st != CW_RESIDENT_RUNNING && st != CW_RESIDENT_STOPPED && st != CW_RESIDENT_STOPPING &&
            st != CW_RESIDENT_NOT_LAUNCHED)
            return (void *)1;
        (void)cw_resident_poll_result(r, 1);
        __atomic_add_fetch(&g_state_reads, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_state_read_during_launch(void **state) {
    (void)state;
    cw_resident *r = NULL;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.input_slots = 2;
    s.input_bytes = 16;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_cw_ok(cw_resident_build(r));
    __atomic_store_n(&g_state_stop, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_state_reads, 0, __ATOMIC_RELEASE);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_state, r), 0);
    /* 200 launches, and on until the reader has read during some */
    for (int i = 0; i < 200 || __atomic_load_n(&g_state_reads, __ATOMIC_ACQUIRE) < 1000; i++) {
        assert_cw_ok(cw_resident_launch(r));
        uint64_t q = 0;
        assert_cw_ok(cw_resident_data_ready(r, &q));
        assert_cw_ok(cw_resident_tear_down(r, 1000));
    }
    __atomic_store_n(&g_state_stop, 1, __ATOMIC_RELEASE);
    void *bad = NULL;
    pthread_join(th, &bad);
    assert_null(bad);
    cw_resident_destroy(&r);
}

/* A graph of another context is refused. */
static void test_foreign_context_graph(void **state) {
    (void)state;
    cw_context *other = NULL;
    assert_cw_ok(cw_context_create(&other, 0)); /* another handle on the same driver context: accepted */
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, other));
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_set_workload(r, g));
    uint32_t junk[16] = {0};
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_set_workload(r, (cw_graph *)junk));
    cw_resident_destroy(&r);
    cw_graph_destroy(&g);
    cw_context_destroy(&other);
}

/* Every driver call of create + set_workload + launch + data_ready +
 * tear_down fails in turn: each run returns an error (never crashes, never
 * CW_SUCCESS), destroying what was made then leaves nothing alive, and the
 * library still works. */
/* Trace: stages named by capture functions (nested in the automatic
 * workload stage), their refusals, and the fault message. The fake runs no
 * kernel, so the test writes the marks the GPU would have written: stage
 * "scale" of copy 2 begun and not ended, the rest ended, then the loop's
 * stream reports an illegal address. */
typedef struct trace_fn {
    cw_resident *r;
    int calls;
} trace_fn;
static cw_status traced_capture(cw_stream *s, void *user) {
    trace_fn *t = user;
    t->calls++;
    const char *names[] = {"load", "scale"};
    for (int i = 0; i < 2; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(t->r, s, names[i], &stage);
        if (st != CW_SUCCESS) return st;
        if ((st = three_kernels(s, NULL)) != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(t->r, s, stage)) != CW_SUCCESS) return st;
        /* ended already: refused (without trace the number is NO_STAGE: nothing to end) */
        if (cw_resident_stage_end(t->r, s, stage) !=
            (stage == CW_RESIDENT_NO_STAGE ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT))
            return CW_ERROR_INTERNAL;
    }
    /* a stage this build never began, an empty name, no stage pointer */
    uint32_t stage = 0;
    if (cw_resident_stage_end(t->r, s, 100000) != CW_ERROR_INVALID_ARGUMENT ||
        cw_resident_stage_begin(t->r, s, "", &stage) != CW_ERROR_INVALID_ARGUMENT ||
        cw_resident_stage_begin(t->r, s, "x", NULL) != CW_ERROR_INVALID_ARGUMENT)
        return CW_ERROR_INTERNAL;
    return CW_SUCCESS;
}

/* Begins a stage and returns without ending it. */
static cw_status open_stage(cw_stream *s, void *user) {
    uint32_t stage = 0;
    return cw_resident_stage_begin((cw_resident *)user, s, "left open", &stage);
}

static void test_trace(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    cw_resident *r = NULL;
    s.trace = 1;
    s.overlap = 1;
    s.gate = CW_RESIDENT_GATE_KERNELS;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_create(&r, ctx, &s));
    assert_non_null(strstr(cw_last_error()->message, "trace and overlap"));
    assert_null(r);
    s.overlap = 0;
    s.gate = CW_RESIDENT_GATE_NODE;
    s.unroll = 3;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    cw_stream *plain = NULL;
    assert_cw_ok(cw_stream_create(&plain, ctx, NULL));
    uint32_t stage = 7;
    /* outside a build */
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_stage_begin(r, plain, "x", &stage));
    assert_int_equal(stage, CW_RESIDENT_NO_STAGE);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_stage_end(r, plain, 0));
    assert_cw_ok(cw_resident_stage_end(r, plain, CW_RESIDENT_NO_STAGE)); /* nothing to end */
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_stage_begin(r, (cw_stream *)0x10, "x", &stage));

    /* a stage left open fails the build, named */
    assert_cw_ok(cw_resident_set_workload_fn(r, open_stage, r));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_build(r));
    assert_non_null(strstr(cw_last_error()->message, "began stage 'left open' and did not end it"));

    trace_fn t = {r, 0};
    assert_cw_ok(cw_resident_set_workload_fn(r, traced_capture, &t));
    long launched = launches();
    assert_cw_ok(cw_resident_build(r));
    const long traced_launches = launches() - launched;
    assert_int_equal(t.calls, 3);
    /* The loop's own stages (workload, handler) are marked by the loop's own
     * kernels (the poll or gate that opens the stage, the gate or signal
     * after it): a traced build launches one mark kernel per begin and end
     * of a stage a capture function began (2 stages, 3 copies: 12), none
     * for the workload or the handler. The same loop untraced is the base. */
    cw_resident *bare = NULL;
    s.trace = 0;
    assert_cw_ok(cw_resident_create(&bare, ctx, &s));
    s.trace = 1;
    trace_fn tb = {bare, 0};
    assert_cw_ok(cw_resident_set_workload_fn(bare, traced_capture, &tb));
    launched = launches();
    assert_cw_ok(cw_resident_build(bare));
    const long bare_launches = launches() - launched;
    assert_int_equal(traced_launches - bare_launches, 2 * 2 * 3);
    assert_cw_ok(cw_resident_set_handler_fn(bare, three_kernels, NULL));
    launched = launches();
    assert_cw_ok(cw_resident_build(bare));
    const long bare_handler_launches = launches() - launched;
    assert_cw_ok(cw_resident_set_handler_fn(r, three_kernels, NULL));
    launched = launches();
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(launches() - launched - bare_handler_launches, 2 * 2 * 3); /* the handler's stage: none */
    assert_cw_ok(cw_resident_set_handler_fn(r, NULL, NULL));
    assert_cw_ok(cw_resident_build(r));
    cw_resident_destroy(&bare);
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    assert_int_equal(cwi_resident_trace(r, &marks, &stages), 0);
    assert_int_equal(stages, 3 * 3); /* per copy: workload, load, scale */
    for (unsigned i = 0; i < 2 * stages; i++) assert_int_equal(marks[i], 0); /* a build clears them */
    /* a handler adds a stage per copy */
    assert_cw_ok(cw_resident_set_handler_fn(r, three_kernels, NULL));
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(cwi_resident_trace(r, &marks, &stages), 0);
    assert_int_equal(stages, 3 * 4);
    assert_cw_ok(cw_resident_set_handler_fn(r, NULL, NULL));
    assert_cw_ok(cw_resident_launch(r));
    assert_int_equal(cwi_resident_trace(r, &marks, &stages), 0);
    assert_int_equal(stages, 9);

    /* The GPU ran copies 1 and 2 of request 1 (stages 0-2, 3-5) and copy 2's
     * "scale" (stage 5) began and did not end: stage order per copy is
     * workload, load, scale. */
    unsigned long long clock = 0;
    for (unsigned i = 0; i < 6; i++) marks[2 * i] = ++clock; /* begun */
    for (unsigned i = 0; i < 6; i++)
        if (i != 5 && i != 3) marks[2 * i + 1] = ++clock; /* ended, but copy 2's workload and scale */
    marks[2 * 5] = ++clock; /* scale began again, after load ended */
    assert_cw_ok(cw_resident_data_ready(r, NULL));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_fail(cwi_seam_entry("cuStreamQuery"), 1, 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */);
    cw_status st = cw_resident_wait_result(r, 1, 2000);
    const char *msg = cw_last_error()->message;
    printf("# traced fault: %s: %s\n", cw_status_name(st), msg);
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_non_null(strstr(msg, "request 1, in stage 'scale' (workload, copy 2 of 3"));
    assert_non_null(strstr(msg, "the last begun first: 'scale', 'workload')"));
    cwi_seam_reset();
    cwi_seam_disable();
    /* the fake's stream is fine again: tear down, and an untraced loop's message */
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    s.trace = 0;
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw_ok(cw_resident_launch(r));
    assert_cw_ok(cw_resident_data_ready(r, NULL));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_fail(cwi_seam_entry("cuStreamQuery"), 1, 700);
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_resident_wait_result(r, 2, 2000));
    assert_non_null(strstr(cw_last_error()->message, "request 2 (its workload or data-ready handler)"));
    assert_non_null(strstr(cw_last_error()->message, "cw_resident_settings.trace names the stage"));
    cwi_seam_reset();
    cwi_seam_disable();
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    cw_resident_destroy(&r);
    cw_stream_destroy(&plain);
    assert_int_equal(leaks(before, "traced loops"), 0);
}

static int g_sweep_trace; /* the sweep's scenario traces (settings.trace) */
static const char *g_step;  /* the public call the scenario made last */
#define STEP(call) (g_step = #call, (call))
static cw_status scenario(cw_resident **r) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.trace = g_sweep_trace;
    s.input_slots = 1;
    s.input_bytes = 16;
    s.unroll = 2;
    cw_status st = STEP(cw_resident_create)(r, ctx, &s);
    if (st != CW_SUCCESS) return st;
    cw_graph *g = NULL;
    st = STEP(cw_graph_create)(&g, ctx);
    if (st == CW_SUCCESS) st = STEP(cw_graph_add_empty)(g, NULL, 0, NULL);
    if (st == CW_SUCCESS) st = STEP(cw_resident_set_workload)(*r, g);
    cw_graph_destroy(&g);
    if (st == CW_SUCCESS) st = STEP(cw_resident_launch)(*r);
    if (st == CW_SUCCESS) st = STEP(cw_resident_data_ready)(*r, NULL);
    if (st == CW_SUCCESS) st = STEP(cw_resident_tear_down)(*r, 100);
    return st;
}

static void sweep(void) {
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cw_resident *r = NULL;
    /* once first: what is done once per process or context (the built-in
     * kernels loaded into the context) is not part of every run */
    assert_int_equal(scenario(&r), CW_SUCCESS);
    cw_resident_destroy(&r);
    long before[NKINDS];
    snapshot(before);
    cwi_seam_reset();
    assert_int_equal(scenario(&r), CW_SUCCESS);
    const unsigned long calls = cwi_seam_calls(-1);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "the clean run"), 0);
    unsigned long handled = 0, bad = 0, absorbed = 0, tried = 0;
    for (unsigned long k = 1; k <= calls; k++) {
        r = NULL;
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        cw_status st = scenario(&r);
        const int fired = cwi_seam_fired();
        char detail[300], function[64];
        snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
        snprintf(function, sizeof function, "%s", cw_last_error()->function);
        if (getenv("CWT_VERBOSE")) printf("# call %lu: %s -> %s\n", k, cw_status_name(st), detail);
        /* which entry failed: the one with a call that did not succeed */
        const char *entry = "?";
        if (cwi_seam_fired_entry() >= 0) entry = cwi_seam_entry_name(cwi_seam_fired_entry());
        const int is_release = strstr(entry, "Destroy") || strstr(entry, "Free") || strstr(entry, "Unload");
        cwi_seam_reset(); /* disarmed: what follows must not fail */
        if (!fired) {
            /* this run made fewer calls (the teardown's stream queries vary
             * with timing): the sweep is complete */
            if (st != CW_SUCCESS) {
                printf("# call %lu: no fault fired, yet the scenario failed: %s\n", k, detail);
                bad++;
            }
            cw_resident_destroy(&r);
            break;
        }
        tried++;
        if (is_release) {
            /* a failed release is absorbed (destroy calls return nothing): the
             * driver object is lost, as it would be; not a leak of cuweave's */
            absorbed++;
            cw_resident_destroy(&r);
            snapshot(before);
            continue;
        } else if (st == CW_SUCCESS) {
            printf("# call %lu failing: the scenario returned CW_SUCCESS\n", k);
            bad++;
        } else {
            handled++;
            /* the detail names the public call that failed, never a call
             * the library made inside it */
            if (strcmp(function, g_step) != 0) {
                printf("# call %lu failing (%s): the detail names %s, the call that failed was %s\n", k, entry,
                       function, g_step);
                bad++;
            }
        }
        cw_resident_destroy(&r);
        if (r) {
            printf("# call %lu failing (%s): destroy afterwards left the handle\n", k, detail);
            bad++;
        }
        char what[64];
        snprintf(what, sizeof what, "failing call %lu", k);
        if (leaks(before, what)) bad++;
    }
    /* the library still works */
    r = NULL;
    assert_int_equal(scenario(&r), CW_SUCCESS);
    cw_resident_destroy(&r);
    cwi_seam_disable();
    printf("# resident fault sweep%s: %lu driver calls, %lu failures injected: %lu returned an error and leaked "
           "nothing, %lu failed releases absorbed; %lu problems\n",
           g_sweep_trace ? " (traced)" : "", calls, tried, handled, absorbed, bad);
    assert_int_equal(bad, 0);
    assert_int_equal(handled + absorbed, tried);
    assert_true(tried >= 60);
}

/* A failure deep inside a public call is reported as that call's: the
 * function is the one the caller used, with the driver call and its
 * CUresult filled in (the library never goes through its own public entries). */
static void test_error_names_public_call(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    assert_cw_ok(cw_graph_add_empty(g, NULL, 0, NULL));
    assert_cw_ok(cw_resident_set_workload(r, g));
    cw_graph_destroy(&g);
    const char *entries[] = {"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphCreate",
                             "cuStreamBeginCaptureToGraph", "cuGraphAddNode"};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
        cwi_seam_reset();
        cwi_seam_fail(cwi_seam_entry(entries[i]), 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        const cw_status st = cw_resident_launch(r);
        const int fired = cwi_seam_fired();
        cwi_seam_reset();
        cwi_seam_disable();
        assert_true(fired);
        assert_int_equal(st, CW_ERROR_OUT_OF_MEMORY);
        const cw_error_info *e = cw_last_error();
        printf("# %s failing in cw_resident_launch: %s\n", entries[i], e->message);
        assert_string_equal(e->function, "cw_resident_launch");
        assert_string_equal(e->driver_call, entries[i]);
        assert_int_equal(e->cu_result, 2);
        assert_string_equal(e->cu_name, "CUDA_ERROR_OUT_OF_MEMORY");
        assert_true(strncmp(e->message, "cw_resident_launch: ", 20) == 0);
    }
    /* nothing was left half-built: the loop still launches and stops */
    assert_cw_ok(cw_resident_launch(r));
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    cw_resident_destroy(&r);
}

static void test_fault_sweep(void **state) {
    (void)state;
    fake_pers_watch(0); /* a failed cuStreamQuery never reaches the fake: its marks would stay */
    g_sweep_trace = 0;
    sweep();
    g_sweep_trace = 1; /* the trace's marks, and its stages' kernels in the build */
    sweep();
    g_sweep_trace = 0;
    fake_pers_watch(1);
}

/* ---- the largest timeouts (issue 25) ------------------------------------
 * Every resident timeout is a uint32_t of milliseconds: UINT32_MAX (about
 * 49.7 days) must be a real wait, not one that wraps into the past. Waits
 * for a request the fake never serves, with UINT32_MAX, are still waiting
 * when the test tears the loop down (then: dropped, CW_ERROR_INVALID_STATE,
 * not CW_ERROR_TIMEOUT); a teardown held back by the fake waits until it is
 * released; destroy_timeout_ms UINT32_MAX stops the loop. */
static void (*fake_hold)(int on);

struct big_wait {
    cw_resident *r;
    uint64_t seq;
    cw_status st;
    volatile int returned;
};

static void *big_wait_main(void *arg) {
    struct big_wait *w = (struct big_wait *)arg;
    w->st = cw_resident_wait_result(w->r, w->seq, UINT32_MAX);
    __atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *big_tear_down_main(void *arg) {
    struct big_wait *w = (struct big_wait *)arg;
    w->st = cw_resident_tear_down(w->r, UINT32_MAX);
    __atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_largest_timeouts(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.destroy_timeout_ms = UINT32_MAX;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_cw_ok(cw_resident_launch(r));
    uint64_t seq = 0;
    assert_cw_ok(cw_resident_data_ready(r, &seq));
    struct big_wait w[2] = {{r, seq, CW_ERROR_INTERNAL, 0}, {r, seq, CW_ERROR_INTERNAL, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, big_wait_main, &w[i]), 0);
    sleep_ms(50); /* a wait that would end early has ended by now */
    const int early0 = __atomic_load_n(&w[0].returned, __ATOMIC_ACQUIRE);
    const int early1 = __atomic_load_n(&w[1].returned, __ATOMIC_ACQUIRE);
    assert_cw_ok(cw_resident_tear_down(r, UINT32_MAX));
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_false(early0);
    assert_false(early1);
    assert_int_equal(w[0].st, CW_ERROR_INVALID_STATE); /* dropped, not timed out */
    assert_int_equal(w[1].st, CW_ERROR_INVALID_STATE);

    /* a teardown whose stream the fake holds busy waits for it */
    fake_hold(1);
    assert_cw_ok(cw_resident_launch(r));
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_tear_down(r, 0)); /* held: busy */
    struct big_wait td = {r, 0, CW_ERROR_INTERNAL, 0};
    assert_int_equal(pthread_create(&t[0], NULL, big_tear_down_main, &td), 0);
    sleep_ms(50);
    const int early = __atomic_load_n(&td.returned, __ATOMIC_ACQUIRE);
    fake_hold(0);
    pthread_join(t[0], NULL);
    assert_false(early);
    assert_int_equal(td.st, CW_SUCCESS);

    /* destroy with destroy_timeout_ms UINT32_MAX stops a launched loop */
    assert_cw_ok(cw_resident_launch(r));
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "largest timeouts"), 0);
}

/* ---- destroy never fails ---------------------------------------------------
 * A launched loop that does not stop within destroy_timeout_ms (the fake
 * holds its stream busy): cw_resident_destroy returns all the same, the
 * handle is NULL and dead, the log callback got CW_LOG_ERROR naming the call
 * and saying the loop was abandoned; its memory stays while the GPU may
 * still use it, and goes once the loop is seen stopped (at the next loop's
 * create or destroy). A handle that is not live is ignored with a warning. */
static int (*fake_drain)(int timeout_ms);
static cw_log_level g_log_level[16];
static char g_log_msg[16][768];
static int g_log_n;

static void capture_log(void *user, cw_log_level level, const char *message) {
    (void)user;
    if (g_log_n < 16) {
        g_log_level[g_log_n] = level;
        snprintf(g_log_msg[g_log_n], sizeof g_log_msg[0], "%s", message);
        g_log_n++;
    }
}

static void test_destroy_abandons_a_loop_that_will_not_stop(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.destroy_timeout_ms = 20;
    s.input_slots = 1;
    s.input_bytes = 64;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    assert_cw_ok(cw_resident_build(r));
    fake_hold(1); /* the launch never completes: the loop will not stop */
    assert_cw_ok(cw_resident_launch(r));
    const long devmem_running = fake_live("devmem");
    cw_resident *stale = r;
    g_log_n = 0;
    assert_cw_ok(cw_log_set_callback(capture_log, NULL, CW_LOG_WARNING));
    cw_resident_destroy(&r);
    assert_null(r);
    assert_int_equal(g_log_n, 1);
    assert_int_equal(g_log_level[0], CW_LOG_ERROR);
    printf("# %s\n", g_log_msg[0]);
    assert_non_null(strstr(g_log_msg[0], "cw_resident_destroy"));
    assert_non_null(strstr(g_log_msg[0], "did not stop within 20 ms"));
    assert_non_null(strstr(g_log_msg[0], "abandoned"));
    /* the handle is dead; destroying it again is ignored, with a warning */
    cw_resident_state rs;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_state(stale, &rs));
    g_log_n = 0;
    cw_resident *again = stale;
    cw_clear_error();
    cw_resident_destroy(&again);
    assert_null(again);
    assert_int_equal(g_log_n, 1);
    assert_int_equal(g_log_level[0], CW_LOG_WARNING);
    assert_non_null(strstr(g_log_msg[0], "cw_resident_destroy: *r is not a live cw_resident"));
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* a warning: nothing failed */
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    /* its memory is kept while the GPU may still use it; it still counts
     * as running (loading code waits for it: refused) */
    assert_int_equal(fake_live("devmem"), devmem_running);
    cw_module *m = NULL;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    assert_cw(CW_ERROR_INVALID_STATE, cw_module_load_image(&m, image));
    /* the loop stops: the next create sees it and frees everything */
    fake_hold(0);
    assert_true(fake_drain(2000));
    cw_resident *next = NULL;
    assert_cw_ok(cw_resident_create(&next, ctx, NULL));
    cw_resident_destroy(&next);
    assert_null(next);
    assert_int_equal(leaks(before, "a loop abandoned by destroy"), 0);
    assert_cw_ok(cw_module_load_image(&m, image));
    cw_module_destroy(&m);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_last_prog = (long (*)(void))dlsym(lib, "fake_cuda_last_prog_edges")) ||
        !(fake_coop_nodes = (long (*)(void))dlsym(lib, "fake_cuda_cooperative_nodes")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(fake_other = (CUcontext(*)(void))dlsym(lib, "fake_cuda_other_context")) ||
        !(*(void **)&fake_hold = dlsym(lib, "fake_cuda_hold")) ||
        !(*(void **)&fake_drain = dlsym(lib, "fake_cuda_drain")) ||
        !(*(void **)&fake_pers_running = dlsym(lib, "fake_cuda_persistent_running")) ||
        !(*(void **)&fake_pers_violations = dlsym(lib, "fake_cuda_persistent_violations")) ||
        !(*(void **)&fake_pers_watch = dlsym(lib, "fake_cuda_persistent_watch"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    /* warm the context's event pool (streams take pooled events and give them
     * back), so that live counts compare like with like */
    cw_resident *warm = NULL;
    if (cw_resident_create(&warm, ctx, NULL) != CW_SUCCESS) return 1;
    cw_resident_destroy(&warm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_defaults_and_validation),
        cmocka_unit_test(test_handle_errors),
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_handler_mode),
        cmocka_unit_test(test_numbering_goes_on_across_launches),
        cmocka_unit_test(test_dropped_requests_stay_dropped),
        cmocka_unit_test(test_requests_racing_teardown),
        cmocka_unit_test(test_state_read_during_launch),
        cmocka_unit_test(test_foreign_context_graph),
        cmocka_unit_test(test_workload_fn),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_auto_gate_and_overlap),
        cmocka_unit_test(test_fused),
        cmocka_unit_test(test_kernel_function_cache),
        cmocka_unit_test(test_requests_from_many_threads),
        cmocka_unit_test(test_releases_wait_for_running_loops),
        cmocka_unit_test(test_loop_counted_before_its_launch),
        cmocka_unit_test(test_exec_destroy_waits_for_running_loops),
        cmocka_unit_test(test_release_racing_a_launch),
        cmocka_unit_test(test_load_racing_a_launch),
        cmocka_unit_test(test_launch_inside_a_build_refused),
        cmocka_unit_test(test_trace_calibrated_beside_a_loop),
        cmocka_unit_test(test_shareable_buffer_freed_beside_a_loop),
        cmocka_unit_test(test_mapped_alloc_failing_beside_a_loop),
        cmocka_unit_test(test_launch_in_host_fn_callback_refused),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_error_names_public_call),
        cmocka_unit_test(test_largest_timeouts),
        cmocka_unit_test(test_destroy_abandons_a_loop_that_will_not_stop),
        cmocka_unit_test(test_fault_sweep),
    };
    cwt_filter_from_env(); /* CWT_FILTER=test_name runs one */
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    return rc;
}
