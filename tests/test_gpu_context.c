/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: contexts. A primary context is the driver's primary context and
 * leaves the caller's current context alone; an external context is used
 * and left alive and current as the host program had it; fault injection on
 * every driver call of context creation leaks nothing and leaves the library
 * usable. Links libcuweave.a for the test seam. Exits 77 without a GPU.
 */
#include <stdlib.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "testing/seam.h"

static rawcuda rc;

static CUcontext current(void) {
    CUcontext c = (CUcontext)0x1;
    assert_cu_ok(rc.cuCtxGetCurrent(&c));
    return c;
}

static void test_primary_context(void **state) {
    (void)state;
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    CUcontext before = current();
    cw_context *ctx = NULL;
    assert_cw_ok(cw_context_create(&ctx, 0));
    assert_non_null(ctx);
    /* nothing was left current */
    assert_ptr_equal(current(), before);

    cw_context_info ci;
    memset(&ci, 0x5a, sizeof ci);
    CUcontext h = NULL, primary = NULL;
    assert_cw_ok(cw_context_get_info(ctx, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_PRIMARY);
    assert_int_equal(ci.device, 0);
    for (size_t i = 0; i < sizeof ci.reserved; i++) assert_int_equal(ci.reserved[i], 0);
    h = ci.handle;
    rc_device d0;
    assert_cu_ok(rc.cuDeviceGet(&d0, 0));
    assert_cu_ok(rc.cuDevicePrimaryCtxRetain(&primary, d0));
    assert_ptr_equal(h, primary);
    /* the primary context is active while cuweave holds it */
    unsigned flags;
    int active = 0;
    assert_cu_ok(rc.cuDevicePrimaryCtxGetState(d0, &flags, &active));
    assert_int_equal(active, 1);
    assert_cu_ok(rc.cuDevicePrimaryCtxRelease(d0));

    /* the priority range and SM count are the device's */
    int rlo, rhi, sms = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(h));
    assert_cu_ok(rc.cuCtxGetStreamPriorityRange(&rlo, &rhi));
    assert_cu_ok(rc.cuCtxSetCurrent(before));
    assert_int_equal(ci.least_priority, rlo);
    assert_int_equal(ci.greatest_priority, rhi);
    assert_cu_ok(rc.cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, d0));
    assert_int_equal(ci.sm_count, (unsigned)sms);
    assert_cw_ok(cw_context_synchronize(ctx));
    assert_ptr_equal(current(), before);

    cw_context_destroy(&ctx);
    assert_null(ctx);
    /* cuweave's retain is gone: nobody else holds device 0's primary context */
    assert_cu_ok(rc.cuDevicePrimaryCtxGetState(d0, &flags, &active));
    assert_int_equal(active, 0);
}

/* A host program owns a context and has it current; cuweave uses it and
 * hands everything back as it was. */
static void test_external_context_left_alive(void **state) {
    (void)state;
    rc_device d0;
    assert_cu_ok(rc.cuDeviceGet(&d0, 0));
    CUcontext host = NULL;
    assert_cu_ok(rawcuda_ctx_create(&rc, &host, d0));
    assert_ptr_equal(current(), host);
    unsigned host_flags = 0;
    assert_cu_ok(rc.cuCtxGetFlags(&host_flags));

    /* a primary cw_context made and used while the host's context is current */
    cw_context *prim = NULL;
    assert_cw_ok(cw_context_create(&prim, 0));
    assert_cw_ok(cw_context_synchronize(prim));
    assert_ptr_equal(current(), host);

    cw_context *ext = NULL;
    assert_cw_ok(cw_context_wrap(&ext, host));
    cw_context_info ci;
    assert_cw_ok(cw_context_get_info(ext, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_EXTERNAL);
    assert_int_equal(ci.device, 0);
    assert_ptr_equal(ci.handle, host);
    assert_true(ci.sm_count > 0);

    /* used from a thread state where another context is current */
    CUcontext prim_cu;
    assert_cw_ok(cwt_context_handle(prim, &prim_cu));
    assert_cu_ok(rc.cuCtxSetCurrent(prim_cu));
    assert_cw_ok(cw_context_synchronize(ext));
    assert_ptr_equal(current(), prim_cu);
    assert_cu_ok(rc.cuCtxSetCurrent(host));

    cw_context_destroy(&ext);
    cw_context_destroy(&prim);
    /* the host's context is alive, current, and its flags are unchanged */
    unsigned api = 0;
    assert_cu_ok(rc.cuCtxGetApiVersion(host, &api));
    assert_true(api > 0);
    assert_ptr_equal(current(), host);
    unsigned flags_after = 0;
    assert_cu_ok(rc.cuCtxGetFlags(&flags_after));
    assert_int_equal(flags_after, host_flags);
    assert_cu_ok(rc.cuCtxSynchronize());
    assert_cu_ok(rc.cuCtxDestroy(host));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
}

/* Objects can outlive the caller's reference: destroy is a release. Also
 * proves a wrapped context is not retained as a primary one. */
static void test_two_primary_wrappers_share(void **state) {
    (void)state;
    cw_context *a = NULL, *b = NULL;
    assert_cw_ok(cw_context_create(&a, 0));
    assert_cw_ok(cw_context_create(&b, 0));
    CUcontext ha, hb;
    assert_cw_ok(cwt_context_handle(a, &ha));
    assert_cw_ok(cwt_context_handle(b, &hb));
    assert_ptr_equal(ha, hb);
    cw_context_destroy(&a);
    /* b still works after a is gone */
    assert_cw_ok(cw_context_synchronize(b));
    cw_context_destroy(&b);
}

/*
 * Fault injection: count the driver calls of one context creation, then fail
 * each of them in turn. Every run must return an error, leave *out alone,
 * leave the current context as it was, and leave as many primary-context
 * retains as releases (nothing leaked). Afterwards the library still works.
 */
static void test_fault_injection_context_create(void **state) {
    (void)state;
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    const int retain = cwi_seam_entry("cuDevicePrimaryCtxRetain");
    const int release = cwi_seam_entry("cuDevicePrimaryCtxRelease");
    assert_true(retain >= 0 && release >= 0);

    cw_context *ctx = NULL;
    assert_cw_ok(cw_context_create(&ctx, 0));
    const unsigned long calls = cwi_seam_calls(-1);
    cw_context_destroy(&ctx);
    assert_true(calls >= 4);
    printf("# cw_context_create makes %lu driver calls\n", calls);

    const int results[] = {2 /* OUT_OF_MEMORY */, 719 /* LAUNCH_FAILED */, 800 /* NOT_PERMITTED */};
    const cw_status expected[] = {CW_ERROR_OUT_OF_MEMORY, CW_ERROR_DEVICE_FAULT, CW_ERROR_NOT_PERMITTED};
    unsigned long handled = 0;
    for (int r = 0; r < 3; r++) {
        for (unsigned long k = 1; k <= calls; k++) {
            cwi_seam_reset();
            cwi_seam_fail(-1, k, results[r]);
            cw_context *c = NULL;
            cw_status st = cw_context_create(&c, 0);
            assert_true(cwi_seam_fired());
            if (st != expected[r])
                fail_msg("call %lu failing with %d: got %s (%s)", k, results[r], cw_status_name(st),
                         cw_last_error()->message);
            assert_null(c);
            assert_true(strlen(cw_last_error()->driver_call) > 0);
            assert_int_equal(cw_last_error()->cu_result, results[r]);
            if (cwi_seam_successes(retain) != cwi_seam_calls(release))
                fail_msg("call %lu: %lu retains, %lu releases", k, cwi_seam_successes(retain),
                         cwi_seam_calls(release));
            /* a failed restore can leave the context current; put it back */
            if (current() != NULL) assert_cu_ok(rc.cuCtxSetCurrent(NULL));
            handled++;
        }
    }
    cwi_seam_disable();
    printf("# fault injection: %lu failures handled, 0 leaks\n", handled);

    /* the library is still usable */
    cw_context *ok = NULL;
    assert_cw_ok(cw_context_create(&ok, 0));
    assert_cw_ok(cw_context_synchronize(ok));
    cw_context_destroy(&ok);
    rc_device d0;
    unsigned flags;
    int active = 1;
    assert_cu_ok(rc.cuDeviceGet(&d0, 0));
    assert_cu_ok(rc.cuDevicePrimaryCtxGetState(d0, &flags, &active));
    assert_int_equal(active, 0);
}

static void test_fault_injection_wrap(void **state) {
    (void)state;
    rc_device d0;
    assert_cu_ok(rc.cuDeviceGet(&d0, 0));
    CUcontext host = NULL;
    assert_cu_ok(rawcuda_ctx_create(&rc, &host, d0));
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cw_context *ctx = NULL;
    assert_cw_ok(cw_context_wrap(&ctx, host));
    const unsigned long calls = cwi_seam_calls(-1);
    cw_context_destroy(&ctx);
    for (unsigned long k = 1; k <= calls; k++) {
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 2);
        cw_context *c = NULL;
        assert_cw(CW_ERROR_OUT_OF_MEMORY, cw_context_wrap(&c, host));
        assert_null(c);
        if (current() != host) assert_cu_ok(rc.cuCtxSetCurrent(host));
    }
    cwi_seam_disable();
    unsigned api = 0;
    assert_cu_ok(rc.cuCtxGetApiVersion(host, &api));
    assert_cu_ok(rc.cuCtxDestroy(host));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
}

int main(void) {
    const int start = rawcuda_start(&rc);
    if (start != 0) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primary_context),
        cmocka_unit_test(test_external_context_left_alive),
        cmocka_unit_test(test_two_primary_wrappers_share),
        cmocka_unit_test(test_fault_injection_context_create),
        cmocka_unit_test(test_fault_injection_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
