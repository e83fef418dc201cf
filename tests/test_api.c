/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the API surface that needs no driver: status names and
 * strings, pinned values, versions, argument validation with its detail,
 * the per-thread error detail and the log callback. Run everywhere.
 */
#include <pthread.h>
#include <stdlib.h>

#include "cwtest.h"

/* The pinned values: a value must never change between releases. */
static void test_status_values_pinned(void **state) {
    (void)state;
    struct {
        cw_status s;
        int v;
    } const pinned[] = {
        {CW_SUCCESS, 0},           {CW_ERROR_INVALID_ARGUMENT, 1}, {CW_ERROR_NO_DRIVER, 2},
        {CW_ERROR_NO_DEVICE, 3},   {CW_ERROR_NOT_SUPPORTED, 4},    {CW_ERROR_OUT_OF_MEMORY, 5},
        {CW_ERROR_INVALID_HANDLE, 6}, {CW_ERROR_INVALID_STATE, 7}, {CW_ERROR_NOT_READY, 8},
        {CW_ERROR_TIMEOUT, 9},     {CW_ERROR_POOL_EXHAUSTED, 10},  {CW_ERROR_DEVICE_FAULT, 11},
        {CW_ERROR_CAPTURE, 12},    {CW_ERROR_NOT_PERMITTED, 13},   {CW_ERROR_DRIVER, 14},
        {CW_ERROR_NO_NVRTC, 15},   {CW_ERROR_COMPILE, 16},         {CW_ERROR_INTERNAL, 17},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) assert_int_equal(pinned[i].s, pinned[i].v);
}

/* Every status has its own name, equal to its enumerator, and its own text. */
static void test_status_names_and_strings(void **state) {
    (void)state;
    const char *names[64];
    const char *texts[64];
    int n = 0;
#define CHECK_ENTRY(name, value, text)                                  \
    assert_string_equal(cw_status_name(CW_##name), "CW_" #name);        \
    assert_string_equal(cw_status_string(CW_##name), text);             \
    assert_true(strlen(text) > 3);                                      \
    names[n] = cw_status_name(CW_##name);                               \
    texts[n] = cw_status_string(CW_##name);                             \
    n++;
    CW_STATUS_MAP(CHECK_ENTRY)
#undef CHECK_ENTRY
    assert_int_equal(n, 18);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            assert_string_not_equal(names[i], names[j]);
            assert_string_not_equal(texts[i], texts[j]);
        }
    assert_string_equal(cw_status_name((cw_status)12345), "CW_UNKNOWN_STATUS");
    assert_string_equal(cw_status_string((cw_status)-1), "unknown status");
}

static void test_versions(void **state) {
    (void)state;
    unsigned v = cw_version();
    assert_int_equal(CW_VERSION_PACK_MAJOR(v), CW_VERSION_MAJOR);
    assert_int_equal(CW_VERSION_PACK_MINOR(v), CW_VERSION_MINOR);
    assert_int_equal(CW_VERSION_PACK_PATCH(v), CW_VERSION_PATCH);
    cw_versions vs;
    memset(&vs, 0x5a, sizeof vs);
    assert_cw_ok(cw_get_versions(&vs));
    assert_int_equal(vs.cuweave, v);
    assert_int_equal(vs.api, CW_VERSION_PACK(CW_API_VERSION_MAJOR, CW_API_VERSION_MINOR, CW_API_VERSION_PATCH));
    for (size_t i = 0; i < sizeof vs.reserved; i++) assert_int_equal(vs.reserved[i], 0);
    assert_int_equal(CW_VERSION_PACK(1, 2, 3), 0x010203u);
}

/* Each call below must fail with CW_ERROR_INVALID_ARGUMENT, before touching
 * the driver, and name itself and the failed check in the detail. */
static void test_invalid_arguments(void **state) {
    (void)state;
    cw_device_info info;
    cw_context *ctx = NULL;

#define EXPECT_INVALID(fn, call)                                  \
    do {                                                          \
        cw_clear_error();                                         \
        assert_cw(CW_ERROR_INVALID_ARGUMENT, call);               \
        assert_detail(#fn);                                       \
        assert_int_equal(cw_last_error()->status, CW_ERROR_INVALID_ARGUMENT); \
        assert_non_null(strstr(cw_last_error()->message, "invalid argument")); \
    } while (0)

    EXPECT_INVALID(cw_get_versions, cw_get_versions(NULL));
    EXPECT_INVALID(cw_device_count, cw_device_count(NULL));
    EXPECT_INVALID(cw_device_get_info, cw_device_get_info(0, NULL));
    EXPECT_INVALID(cw_device_get_info, cw_device_get_info(-1, &info));
    EXPECT_INVALID(cw_context_create, cw_context_create(NULL, 0));
    EXPECT_INVALID(cw_context_create, cw_context_create(&ctx, -1));
    EXPECT_INVALID(cw_context_wrap, cw_context_wrap(NULL, (CUcontext)0x1000));
    EXPECT_INVALID(cw_context_wrap, cw_context_wrap(&ctx, NULL));
    {
        cw_context_info ci;
        EXPECT_INVALID(cw_context_get_info, cw_context_get_info(NULL, &ci));
    }
    EXPECT_INVALID(cw_context_synchronize, cw_context_synchronize(NULL));
    EXPECT_INVALID(cw_log_set_callback, cw_log_set_callback(NULL, NULL, (cw_log_level)7));
    EXPECT_INVALID(cw_log_set_callback, cw_log_set_callback(NULL, NULL, (cw_log_level)-1));
    {
        cw_partition_group *set = NULL;
        const unsigned counts[] = {16, 8};
        const unsigned zero[] = {16, 0};
        cw_partition_caps caps;
        EXPECT_INVALID(cw_partition_get_caps, cw_partition_get_caps(0, NULL));
        EXPECT_INVALID(cw_partition_get_caps, cw_partition_get_caps(-1, &caps));
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(NULL, 0, counts, 2, -1));
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, -1, counts, 2, -1));
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, 0, NULL, 2, -1));
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, 0, counts, 0, -1)); /* no partitions */
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, 0, zero, 2, -1));   /* a zero count */
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, 0, counts, 2, 2));  /* default out of range */
        EXPECT_INVALID(cw_partition_group_create, cw_partition_group_create(&set, 0, counts, 2, -2));
        assert_null(set);
    }
#undef EXPECT_INVALID
    assert_null(ctx); /* out-parameters untouched on failure */

    /* The failed expression is quoted. */
    cw_device_count(NULL);
    assert_non_null(strstr(cw_last_error()->message, "`count != NULL`"));
    assert_int_equal(cw_last_error()->cu_result, 0);
    assert_string_equal(cw_last_error()->driver_call, "");
}

/* A pointer that is not a cw_context is refused, not used. */
static void test_foreign_handle_refused(void **state) {
    (void)state;
    uint64_t junk[16];
    memset(junk, 0xab, sizeof junk);
    cw_context *fake = (cw_context *)junk;
    cw_context_info ci;
    ci.device = -1;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(fake, &ci));
    assert_detail("cw_context_get_info");
    assert_int_equal(ci.device, -1);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_synchronize(fake));
    /* destroy of a foreign handle nulls the pointer and frees nothing */
    cw_context *p = fake;
    cw_clear_error();
    cw_context_destroy(&p);
    assert_null(p);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* ignored with a warning */
}

static void test_destroy_accepts_null(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    cw_context_destroy(NULL);
    cw_context_destroy(&ctx);
    assert_null(ctx);
}

static void test_clear_error(void **state) {
    (void)state;
    cw_device_count(NULL);
    assert_int_equal(cw_last_error()->status, CW_ERROR_INVALID_ARGUMENT);
    cw_clear_error();
    const cw_error_info *e = cw_last_error();
    assert_int_equal(e->status, CW_SUCCESS);
    assert_string_equal(e->message, "");
    assert_string_equal(e->function, "");
    assert_string_equal(cw_last_error()->message, "");
}

/* Successful calls leave the detail alone (errno-like). */
static void test_success_keeps_detail(void **state) {
    (void)state;
    cw_device_count(NULL);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_int_equal(cw_last_error()->status, CW_ERROR_INVALID_ARGUMENT);
    assert_string_equal(cw_last_error()->function, "cw_device_count");
}

static void *other_thread(void *arg) {
    int *out = (int *)arg;
    /* a fresh thread starts with an empty detail */
    out[0] = cw_last_error()->status;
    out[1] = (int)strlen(cw_last_error()->message);
    cw_context_create(NULL, 0);
    out[2] = cw_last_error()->status;
    return NULL;
}

static void test_detail_is_per_thread(void **state) {
    (void)state;
    cw_device_count(NULL);
    int seen[3] = {-1, -1, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, seen), 0);
    pthread_join(t, NULL);
    assert_int_equal(seen[0], CW_SUCCESS);
    assert_int_equal(seen[1], 0);
    assert_int_equal(seen[2], CW_ERROR_INVALID_ARGUMENT);
    /* this thread's detail is unchanged by the other thread's failure */
    assert_string_equal(cw_last_error()->function, "cw_device_count");
}

struct log_capture {
    int calls;
    cw_log_level level;
    char message[1024];
    pthread_t thread;
};

static void capture_log(void *user, cw_log_level level, const char *message) {
    struct log_capture *c = (struct log_capture *)user;
    c->calls++;
    c->level = level;
    c->thread = pthread_self();
    snprintf(c->message, sizeof c->message, "%s", message);
}

static void test_log_callback(void **state) {
    (void)state;
    struct log_capture cap;
    memset(&cap, 0, sizeof cap);
    assert_cw_ok(cw_log_set_callback(capture_log, &cap, CW_LOG_ERROR));
    cw_context_create(NULL, 3);
    assert_int_equal(cap.calls, 1);
    assert_int_equal(cap.level, CW_LOG_ERROR);
    assert_string_equal(cap.message, cw_last_error()->message);
    assert_true(pthread_equal(cap.thread, pthread_self()));
    /* removed: no more calls */
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_DEBUG));
    cw_context_create(NULL, 3);
    assert_int_equal(cap.calls, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_values_pinned),
        cmocka_unit_test(test_status_names_and_strings),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_foreign_handle_refused),
        cmocka_unit_test(test_destroy_accepts_null),
        cmocka_unit_test(test_clear_error),
        cmocka_unit_test(test_success_keeps_detail),
        cmocka_unit_test(test_detail_is_per_thread),
        cmocka_unit_test(test_log_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
