/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program linked with libcuweave.a and nothing of CUDA: the C compiler
 * links it with the archive and the libraries cuweave.pc's Libs.private
 * names (-ldl -lpthread -lstdc++ -lm); tests/check-static.sh proves from
 * ldd and nm that it links no CUDA library and no libcuweave.so.
 *  - no driver: cw_init and cw_context_create return CW_ERROR_NO_DRIVER
 *    with a message saying so, and cw_resident_create refuses the context
 *    that could not be made. Always runs: in a child of this program
 *    (--no-driver) whose loader is pointed at a missing file, so that a GPU
 *    machine runs it too; where there is no driver at all (CI) the GPU test
 *    checks the same with the default loader path;
 *  - with a driver and a GPU: a resident loop with the default settings and
 *    no workload serves 100 requests, numbered 1 to 100, and its statistics
 *    count 100 iterations. Skipped, saying why, without one.
 * Exits 0 when every test passed or was skipped, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "cwtest.h"

extern char **environ;

enum { REQUESTS = 100 };

static cw_context *g_ctx;
static cw_resident *g_loop;

/* The driver calls fail saying there is no driver; the resident loop cannot
 * be had without a context. `path` is the loader path the message names. */
static void check_no_driver(const char *path) {
    assert_cw(CW_ERROR_NO_DRIVER, cw_init());
    assert_non_null(strstr(cw_last_error()->message, "no CUDA driver"));
    assert_non_null(strstr(cw_last_error()->message, path));
    printf("# cw_init: %s: %s\n", cw_status_name(CW_ERROR_NO_DRIVER), cw_last_error()->message);

    cw_context *ctx = NULL;
    assert_cw(CW_ERROR_NO_DRIVER, cw_context_create(&ctx, 0));
    assert_null(ctx);
    assert_string_equal(cw_last_error()->function, "cw_context_create");
    assert_non_null(strstr(cw_last_error()->message, "no CUDA driver"));
    printf("# cw_context_create: %s: %s\n", cw_status_name(CW_ERROR_NO_DRIVER), cw_last_error()->message);

    /* the context check comes first: with no context to give it, the loop
     * is refused as an argument, before any driver use */
    cw_resident *r = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_create(&r, ctx, NULL));
    assert_null(r);
    assert_detail("cw_resident_create");
    printf("# cw_resident_create: %s: %s\n", cw_status_name(CW_ERROR_INVALID_ARGUMENT), cw_last_error()->message);
}

/* Runs in the child (--no-driver), its loader pointed at a missing file. */
static void test_no_driver(void **state) {
    (void)state;
    check_no_driver("/nonexistent/libcuda.so.1");
}

/* Runs this program again with --no-driver: a fresh process, whose driver
 * was never loaded, whatever this one finds. */
static void test_no_driver_in_child(void **state) {
    (void)state;
    char *argv[] = {(char *)"test_static", (char *)"--no-driver", NULL};
    pid_t pid;
    fflush(stdout);
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    if (rc != 0) fail_msg("posix_spawn(/proc/self/exe) failed: %s", strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status)) fail_msg("the --no-driver child died (status 0x%x)", status);
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_resident_loop(void **state) {
    (void)state;
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER) {
        /* no libcuda.so.1 at all (CI): the default path fails the same way */
        const char *path = getenv("CUWEAVE_LIBCUDA");
        check_no_driver(path && *path ? path : "libcuda.so.1");
        printf("# no CUDA driver: the resident loop is not run\n");
        skip();
        return;
    }
    int n = 0;
    if (st != CW_SUCCESS || cw_device_count(&n) != CW_SUCCESS || n == 0) {
        printf("# no usable GPU: %s\n", st == CW_SUCCESS && n == 0 ? "no CUDA devices" : cw_last_error()->message);
        skip();
        return;
    }
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        printf("# the driver has no conditional graph nodes (CUDA 12.3): no resident loop\n");
        skip();
        return;
    }

    assert_cw_ok(cw_context_create(&g_ctx, 0));
    assert_cw_ok(cw_resident_create(&g_loop, g_ctx, NULL));
    assert_cw_ok(cw_resident_launch(g_loop));
    for (uint64_t i = 1; i <= REQUESTS; i++) {
        uint64_t seq = 0;
        assert_cw_ok(cw_resident_data_ready(g_loop, &seq));
        if (seq != i)
            fail_msg("request %llu got number %llu", (unsigned long long)i, (unsigned long long)seq);
        assert_cw_ok(cw_resident_wait_result(g_loop, seq, 2000));
    }
    cw_resident_info stats;
    assert_cw_ok(cw_resident_get_info(g_loop, &stats));
    assert_int_equal(stats.requested, REQUESTS);
    assert_int_equal(stats.completed, REQUESTS);
    assert_int_equal(stats.iterations, REQUESTS);
    assert_int_equal(stats.launches, 1);
    printf("# %d requests served by the loop; iteration on the GPU min %.2f us, median %.2f us, max %.2f us\n",
           REQUESTS, stats.iter_min_ns / 1e3, stats.iter_median_ns / 1e3, stats.iter_max_ns / 1e3);

    assert_cw_ok(cw_resident_tear_down(g_loop, 2000));
    assert_cw_ok(cw_resident_get_info(g_loop, &stats));
    assert_int_equal(stats.launched, 0);
    assert_int_equal(stats.iterations, REQUESTS);
    assert_int_equal(stats.exit, CW_RESIDENT_EXIT_TEAR_DOWN);
    cw_resident_destroy(&g_loop);
    assert_null(g_loop);
    cw_context_destroy(&g_ctx);
    assert_null(g_ctx);
}

/* After a failed check: whatever is left. */
static int cleanup(void **state) {
    (void)state;
    cw_resident_destroy(&g_loop);
    cw_context_destroy(&g_ctx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--no-driver") == 0) {
        setenv("CUWEAVE_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
        const struct CMUnitTest child[] = {
            cmocka_unit_test(test_no_driver),
        };
        return cmocka_run_group_tests_name("test_static --no-driver", child, NULL, NULL) ? 1 : 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_driver_in_child),
        cmocka_unit_test_teardown(test_resident_loop, cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
