/*
 * Without a CUDA driver every public call that needs one returns
 * CW_ERROR_NO_DRIVER with a message that says so, and nothing crashes.
 *
 * The test points the loader at a path that does not exist, so it proves the
 * no-driver path on any machine, a GPU machine included. CI (which has no
 * driver at all) runs it too. tools/check-exports.sh fails when an exported
 * function is not named in this file, so every new call gets a line here.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "cwtest.h"

static void expect_no_driver(cw_status st, const char *fn) {
    if (st != CW_ERROR_NO_DRIVER)
        fail_msg("%s returned %s, expected CW_ERROR_NO_DRIVER", fn, cw_status_name(st));
    assert_string_equal(cw_last_error()->function, fn);
    assert_non_null(strstr(cw_last_error_message(), "no CUDA driver"));
    assert_non_null(strstr(cw_last_error_message(), "/nonexistent/libcuda.so.1"));
}

static void test_init_reports_no_driver(void **state) {
    (void)state;
    expect_no_driver(cw_init(), "cw_init");
    /* the message says what was tried and why it failed */
    assert_non_null(strstr(cw_last_error_message(), "dlopen"));
    /* idempotent: the same answer again */
    expect_no_driver(cw_init(), "cw_init");
}

static void test_every_call_reports_no_driver(void **state) {
    (void)state;
    int v = -7;
    cw_device_info info;
    memset(&info, 0x5a, sizeof info);
    cw_context *ctx = NULL;
    int least = 11, greatest = 12;

    expect_no_driver(cw_driver_version(&v), "cw_driver_version");
    assert_int_equal(v, -7);
    expect_no_driver(cw_device_count(&v), "cw_device_count");
    assert_int_equal(v, -7);
    expect_no_driver(cw_device_get_info(0, &info), "cw_device_get_info");
    assert_int_equal(info.ordinal, 0x5a5a5a5a);
    expect_no_driver(cw_device_get_priority_range(0, &least, &greatest), "cw_device_get_priority_range");
    assert_int_equal(least, 11);
    expect_no_driver(cw_context_create(&ctx, 0), "cw_context_create");
    assert_null(ctx);
    expect_no_driver(cw_context_wrap(&ctx, (CUcontext)0x1000), "cw_context_wrap");
    assert_null(ctx);
}

/* Calls on handles cannot reach the driver without a handle; they refuse
 * foreign ones (the handle check comes before any driver use). */
static void test_handle_calls_without_driver(void **state) {
    (void)state;
    cw_context *none = NULL;
    int d;
    cw_context_kind k;
    CUcontext h;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_device(none, &d));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_kind(none, &k));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_handle(none, &h));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_priority_range(none, &d, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_synchronize(none));
    cw_context_destroy(&none);
}

static void test_features_absent(void **state) {
    (void)state;
    assert_int_equal(cw_driver_has(CW_FEATURE_GREEN_CONTEXTS), 0);
    assert_int_equal(cw_driver_has(CW_FEATURE_CONDITIONAL_NODES), 0);
    assert_int_equal(cw_driver_has(CW_FEATURE_LIBRARY_API), 0);
    assert_int_equal(cw_driver_has(CW_FEATURE_STREAM_GET_DEVICE), 0);
    assert_int_equal(cw_driver_has(CW_FEATURE_CTX_FROM_STREAM), 0);
    assert_int_equal(cw_driver_has(CW_FEATURE_NVRTC), 0);
    assert_int_equal(cw_driver_has((cw_feature)99), 0);
}

static void test_no_nvrtc(void **state) {
    (void)state;
    int major = -1, minor = -1;
    assert_cw(CW_ERROR_NO_NVRTC, cw_nvrtc_version(&major, &minor));
    assert_int_equal(major, -1);
    assert_string_equal(cw_last_error()->function, "cw_nvrtc_version");
    assert_non_null(strstr(cw_last_error_message(), "/nonexistent/libnvrtc.so"));
}

/* The status and log functions work without a driver. */
static void test_driverless_functions(void **state) {
    (void)state;
    assert_string_equal(cw_status_name(CW_ERROR_NO_DRIVER), "CW_ERROR_NO_DRIVER");
    assert_true(strlen(cw_status_string(CW_ERROR_NO_DRIVER)) > 0);
    assert_int_equal(cw_version(), CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH));
    assert_true(cw_version_api() > 0 || CW_API_VERSION_MINOR == 0);
    assert_cw_ok(cw_set_log_callback(NULL, NULL, CW_LOG_ERROR));
    cw_clear_error();
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
}

static void *init_thread(void *arg) {
    *(cw_status *)arg = cw_init();
    return NULL;
}

/* Many threads racing into the first init all get the same answer. */
static void test_concurrent_init(void **state) {
    (void)state;
    pthread_t t[8];
    cw_status st[8];
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&t[i], NULL, init_thread, &st[i]), 0);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(st[i], CW_ERROR_NO_DRIVER);
    }
}

int main(void) {
    /* Before any cuweave call: the loader reads these once. */
    setenv("CUWEAVE_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    setenv("CUWEAVE_LIBNVRTC", "/nonexistent/libnvrtc.so", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_init),
        cmocka_unit_test(test_init_reports_no_driver),
        cmocka_unit_test(test_every_call_reports_no_driver),
        cmocka_unit_test(test_handle_calls_without_driver),
        cmocka_unit_test(test_features_absent),
        cmocka_unit_test(test_no_nvrtc),
        cmocka_unit_test(test_driverless_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
