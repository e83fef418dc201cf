/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: what cuweave reports about the driver and each device equals what the
 * driver itself answers (through the test's own dlopen, not cuweave's table).
 * Exits 77 without a GPU.
 */
#include <stdlib.h>

#include "cwtest.h"
#include "rawcuda.h"

static rawcuda rc;

static void test_driver_version_matches(void **state) {
    (void)state;
    int raw = 0;
    cw_versions v;
    assert_cw_ok(cw_get_versions(&v));
    assert_cu_ok(rc.cuDriverGetVersion(&raw));
    assert_int_equal(v.driver, raw);
    assert_true(v.driver >= 12000);
}

static void test_device_facts_match(void **state) {
    (void)state;
    int n = 0, raw_n = 0;
    assert_cw_ok(cw_device_count(&n));
    assert_cu_ok(rc.cuDeviceGetCount(&raw_n));
    assert_int_equal(n, raw_n);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        cw_device_info info;
        memset(&info, 0xee, sizeof info);
        assert_cw_ok(cw_device_get_info(i, &info));
        rc_device dev;
        assert_cu_ok(rc.cuDeviceGet(&dev, i));
        char name[256];
        assert_cu_ok(rc.cuDeviceGetName(name, sizeof name, dev));
        assert_string_equal(info.name, name);
        assert_int_equal(info.ordinal, i);
        struct {
            int have;
            int attr;
        } const pairs[] = {
            {info.cc_major, 75}, {info.cc_minor, 76}, {info.sm_count, 16},
            {info.max_threads_per_block, 1}, {info.warp_size, 10}, {info.clock_khz, 13},
            {info.async_engines, 40}, {info.l2_cache_bytes, 38}, {info.max_shared_per_block_optin, 97},
            {info.can_map_host_memory, 19}, {info.stream_priorities, 78}, {info.memory_pools, 115},
            {info.stream_mem_ops_64, 122}, {info.pci_domain, 50}, {info.pci_bus, 33}, {info.pci_device, 34},
        };
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
            int v = -1;
            assert_cu_ok(rc.cuDeviceGetAttribute(&v, pairs[k].attr, dev));
            if (v != pairs[k].have) fail_msg("device %d attribute %d: cuweave %d, driver %d", i, pairs[k].attr, pairs[k].have, v);
        }
        size_t mem = 0;
        assert_cu_ok(rc.cuDeviceTotalMem(&mem, dev));
        assert_true(info.total_memory == mem);
        /* reserved bytes are zero, the UUID is not all zero */
        for (size_t k = 0; k < sizeof info.reserved; k++) assert_int_equal(info.reserved[k], 0);
        int nonzero = 0;
        for (int k = 0; k < 16; k++) nonzero |= info.uuid[k];
        assert_true(nonzero);
        printf("# device %d: %s, cc %d.%d, %d SMs, %.1f GiB\n", i, info.name, info.cc_major, info.cc_minor,
               info.sm_count, info.total_memory / 1073741824.0);
    }
    cw_device_info info;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_device_get_info(n, &info));
    assert_non_null(strstr(cw_last_error()->message, "devices"));
}

/* The priority range of a context on device 0 (cw_context_info) is the
 * driver's for the device's primary context. */
static void test_priority_range_matches(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    assert_cw_ok(cw_context_create(&ctx, 0));
    cw_context_info ci;
    memset(&ci, 0x5a, sizeof ci);
    assert_cw_ok(cw_context_get_info(ctx, &ci));
    cw_context_destroy(&ctx);
    const int least = ci.least_priority, greatest = ci.greatest_priority;
    rc_device dev;
    CUcontext primary, before;
    assert_cu_ok(rc.cuDeviceGet(&dev, 0));
    assert_cu_ok(rc.cuCtxGetCurrent(&before));
    assert_cu_ok(rc.cuDevicePrimaryCtxRetain(&primary, dev));
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    int lo, hi;
    assert_cu_ok(rc.cuCtxGetStreamPriorityRange(&lo, &hi));
    assert_cu_ok(rc.cuCtxSetCurrent(before));
    assert_cu_ok(rc.cuDevicePrimaryCtxRelease(dev));
    assert_int_equal(least, lo);
    assert_int_equal(greatest, hi);
    assert_true(greatest <= least);
}

/* A driver of 12.5 or newer has green contexts, conditional nodes and the
 * library API; cuweave must find them. */
static void test_features_present(void **state) {
    (void)state;
    cw_versions vs;
    assert_cw_ok(cw_get_versions(&vs));
    const int v = vs.driver;
    assert_int_equal(cw_driver_has(CW_FEATURE_LIBRARY_API), 1);
    if (v >= 12030) assert_int_equal(cw_driver_has(CW_FEATURE_CONDITIONAL_NODES), 1);
    if (v >= 12050) assert_int_equal(cw_driver_has(CW_FEATURE_GREEN_CONTEXTS), 1);
    if (v >= 12080) assert_int_equal(cw_driver_has(CW_FEATURE_STREAM_GET_DEVICE), 1);
    assert_int_equal(cw_driver_has((cw_feature)1000), 0);
}

static void test_nvrtc_version(void **state) {
    (void)state;
    cw_versions v;
    assert_cw_ok(cw_get_versions(&v));
    if (v.nvrtc_major == 0) skip(); /* absent: 0, not an error */
    assert_true(v.nvrtc_major >= 12);
    assert_int_equal(cw_driver_has(CW_FEATURE_NVRTC), 1);
    printf("# NVRTC %d.%d, NCCL %d\n", v.nvrtc_major, v.nvrtc_minor, v.nccl);
}

int main(void) {
    const int start = rawcuda_start(&rc);
    if (start != 0) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_version_matches),
        cmocka_unit_test(test_device_facts_match),
        cmocka_unit_test(test_priority_range_matches),
        cmocka_unit_test(test_features_present),
        cmocka_unit_test(test_nvrtc_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
