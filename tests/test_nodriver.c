/* SPDX-License-Identifier: BSD-2-Clause */
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
#include <unistd.h>

#include "cwtest.h"

static void expect_no_driver(cw_status st, const char *fn) {
    if (st != CW_ERROR_NO_DRIVER)
        fail_msg("%s returned %s, expected CW_ERROR_NO_DRIVER", fn, cw_status_name(st));
    assert_string_equal(cw_last_error()->function, fn);
    assert_non_null(strstr(cw_last_error()->message, "no CUDA driver"));
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent/libcuda.so.1"));
}

static void test_init_reports_no_driver(void **state) {
    (void)state;
    expect_no_driver(cw_init(), "cw_init");
    /* the message says what was tried and why it failed */
    assert_non_null(strstr(cw_last_error()->message, "dlopen"));
    /* idempotent: the same answer again */
    expect_no_driver(cw_init(), "cw_init");
}

static void test_every_call_reports_no_driver(void **state) {
    (void)state;
    int v = -7;
    cw_device_info info;
    memset(&info, 0x5a, sizeof info);
    cw_context *ctx = NULL;

    expect_no_driver(cw_device_count(&v), "cw_device_count");
    assert_int_equal(v, -7);
    expect_no_driver(cw_device_get_info(0, &info), "cw_device_get_info");
    assert_int_equal(info.ordinal, 0x5a5a5a5a);
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
    cw_context_info ci;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_get_info(none, &ci));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_synchronize(none));
    cw_context_destroy(&none);
}

/* The call fails with CW_ERROR_INVALID_ARGUMENT and the detail names fn. */
#define EXPECT_INVALID_ND(fn, call)                         \
    do {                                                    \
        cw_clear_error();                                   \
        assert_cw(CW_ERROR_INVALID_ARGUMENT, call);         \
        assert_string_equal(cw_last_error()->function, #fn); \
    } while (0)

/* The stream, pool, timer and future calls: without a driver no context can
 * be had, so every call that takes a handle gets NULL and must refuse it with
 * CW_ERROR_INVALID_ARGUMENT (checked before the driver), naming itself; the
 * destroy functions accept NULL; the settings functions fill the defaults. */
static void test_stream_calls_without_driver(void **state) {
    (void)state;
    cw_stream *s = NULL, *child = NULL;
    cw_stream_pool *pool = NULL;
    cw_timer *timer = NULL;
    cw_future *fut = NULL;
    cw_context *none = NULL;
    cw_stream_info info;
    cw_stream_pool_info stats;
    float ms = 0;
    int fd = -1;
    size_t count = 0;


    /* stream.h */
    EXPECT_INVALID_ND(cw_stream_create, cw_stream_create(&s, none, NULL));
    EXPECT_INVALID_ND(cw_stream_create, cw_stream_create(NULL, none, NULL));
    EXPECT_INVALID_ND(cw_stream_wrap, cw_stream_wrap(&s, none, NULL));
    EXPECT_INVALID_ND(cw_stream_get_info, cw_stream_get_info(NULL, &info));
    EXPECT_INVALID_ND(cw_stream_synchronize, cw_stream_synchronize(NULL));
    EXPECT_INVALID_ND(cw_stream_query, cw_stream_query(NULL));
    EXPECT_INVALID_ND(cw_stream_wait, cw_stream_wait(NULL, NULL));
    EXPECT_INVALID_ND(cw_stream_fork, cw_stream_fork(&child, NULL));
    EXPECT_INVALID_ND(cw_stream_join, cw_stream_join(NULL, &child));
    EXPECT_INVALID_ND(cw_stream_pool_create, cw_stream_pool_create(&pool, none, NULL));
    EXPECT_INVALID_ND(cw_stream_pool_acquire, cw_stream_pool_acquire(&s, NULL, 0));
    EXPECT_INVALID_ND(cw_stream_pool_acquire, cw_stream_pool_acquire(&s, NULL, 10));
    EXPECT_INVALID_ND(cw_stream_pool_release, cw_stream_pool_release(NULL, &s));
    EXPECT_INVALID_ND(cw_stream_pool_get_next, cw_stream_pool_get_next(NULL, &s));
    EXPECT_INVALID_ND(cw_stream_pool_acquire_named, cw_stream_pool_acquire_named(&s, NULL, NULL, "a"));
    EXPECT_INVALID_ND(cw_stream_pool_release_owner, cw_stream_pool_release_owner(NULL, NULL, &count));
    EXPECT_INVALID_ND(cw_stream_pool_get_info, cw_stream_pool_get_info(NULL, &stats));
    EXPECT_INVALID_ND(cw_timer_create, cw_timer_create(&timer, none));
    EXPECT_INVALID_ND(cw_timer_start, cw_timer_start(NULL, NULL));
    EXPECT_INVALID_ND(cw_timer_stop, cw_timer_stop(NULL, NULL));
    EXPECT_INVALID_ND(cw_timer_get_elapsed_ms, cw_timer_get_elapsed_ms(NULL, &ms));
    /* future.h */
    EXPECT_INVALID_ND(cw_future_create, cw_future_create(&fut, NULL, CW_FUTURE_HOST_FUNC));
    EXPECT_INVALID_ND(cw_future_rearm, cw_future_rearm(NULL, NULL));
    EXPECT_INVALID_ND(cw_future_poll, cw_future_poll(NULL));
    EXPECT_INVALID_ND(cw_future_wait, cw_future_wait(NULL, 0));
    EXPECT_INVALID_ND(cw_future_set_spin, cw_future_set_spin(NULL, 10));
    EXPECT_INVALID_ND(cw_future_set_callback, cw_future_set_callback(NULL, NULL, NULL));
    EXPECT_INVALID_ND(cw_future_get_fd, cw_future_get_fd(NULL, &fd));
    EXPECT_INVALID_ND(cw_future_when_all, cw_future_when_all(&fut, NULL, 1, CW_FUTURE_WRITE_VALUE));
    /* out-parameters untouched */
    assert_null(s);
    assert_null(pool);
    assert_null(timer);
    assert_null(fut);
    assert_int_equal(fd, -1);

    /* destroy functions accept NULL and pointers to NULL */
    cw_stream_destroy(NULL);
    cw_stream_destroy(&s);
    cw_stream_pool_destroy(NULL);
    cw_stream_pool_destroy(&pool);
    cw_timer_destroy(NULL);
    cw_timer_destroy(&timer);
    cw_future_destroy(NULL);
    cw_future_destroy(&fut);
    assert_null(s);

    /* settings defaults need no driver */
    cw_stream_settings ss;
    memset(&ss, 0x5a, sizeof ss);
    cw_stream_settings_default(&ss);
    cw_stream_settings_default(NULL);
    assert_int_equal(ss.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(ss.priority, 0);
    for (size_t i = 0; i < sizeof ss.reserved; i++) assert_int_equal(ss.reserved[i], 0);
    cw_stream_pool_settings ps;
    memset(&ps, 0x5a, sizeof ps);
    cw_stream_pool_settings_default(&ps);
    cw_stream_pool_settings_default(NULL);
    assert_int_equal(ps.mode, CW_POOL_LEASE);
    assert_int_equal(ps.flags, CW_STREAM_NON_BLOCKING);
    assert_int_equal(ps.priority, 0);
    assert_int_equal(ps.reserved_streams, 1);
    assert_int_equal(ps.max_streams, 0);
    for (size_t i = 0; i < sizeof ps.reserved; i++) assert_int_equal(ps.reserved[i], 0);
}


/* Graphs: every call refuses NULL handles before anything else (no driver
 * is needed to say so); the destroy calls accept NULL; defaults need no
 * driver. */
static void test_graph_calls_without_driver(void **state) {
    (void)state;
    cw_graph *g = NULL, *body = NULL, *else_body = NULL;
    cw_graph_exec *e = NULL;
    cw_graph_node *node = NULL;
    cw_cond_handle h = 0;
    cw_capture_state cs = CW_CAPTURE_NONE;
    cw_graph_info gi;
    cw_graph_exec_info ei;
    cw_graph_update_info ui;
    cw_context *none = NULL;
    EXPECT_INVALID_ND(cw_capture_begin, cw_capture_begin(NULL, NULL, CW_CAPTURE_GLOBAL));
    EXPECT_INVALID_ND(cw_capture_end, cw_capture_end(&g, NULL));
    EXPECT_INVALID_ND(cw_capture_end, cw_capture_end(NULL, NULL));
    EXPECT_INVALID_ND(cw_capture_get_state, cw_capture_get_state(NULL, &cs));
    EXPECT_INVALID_ND(cw_graph_create, cw_graph_create(&g, none));
    EXPECT_INVALID_ND(cw_graph_create, cw_graph_create(NULL, none));
    EXPECT_INVALID_ND(cw_graph_get_info, cw_graph_get_info(NULL, &gi));
    EXPECT_INVALID_ND(cw_graph_add_child, cw_graph_add_child(NULL, NULL, NULL, 0, &node));
    EXPECT_INVALID_ND(cw_graph_add_empty, cw_graph_add_empty(NULL, NULL, 0, &node));
    EXPECT_INVALID_ND(cw_graph_add_cond_handle, cw_graph_add_cond_handle(NULL, 1, CW_COND_RESET_EACH_LAUNCH, &h));
    EXPECT_INVALID_ND(cw_graph_add_conditional,
                      cw_graph_add_conditional(NULL, h, NULL, NULL, 0, &node, &body, &else_body));
    size_t nsinks = 7;
    EXPECT_INVALID_ND(cw_graph_get_sinks, cw_graph_get_sinks(NULL, &node, 1, &nsinks));
    assert_int_equal(nsinks, 7);
    EXPECT_INVALID_ND(cw_graph_write_dot, cw_graph_write_dot(NULL, "/tmp/x.dot", 0));
    EXPECT_INVALID_ND(cw_graph_instantiate, cw_graph_instantiate(&e, NULL, 0));
    EXPECT_INVALID_ND(cw_graph_exec_upload, cw_graph_exec_upload(NULL, NULL));
    EXPECT_INVALID_ND(cw_graph_exec_launch, cw_graph_exec_launch(NULL, NULL));
    EXPECT_INVALID_ND(cw_graph_exec_update, cw_graph_exec_update(NULL, NULL, &ui));
    EXPECT_INVALID_ND(cw_graph_exec_get_info, cw_graph_exec_get_info(NULL, &ei));
    assert_null(g);
    assert_null(e);
    assert_null(node);
    assert_null(body);
    assert_true(h == 0);
    cw_graph_destroy(NULL);
    cw_graph_destroy(&g);
    cw_graph_exec_destroy(NULL);
    cw_graph_exec_destroy(&e);
    cw_cond_settings cset;
    memset(&cset, 0x5a, sizeof cset);
    cw_cond_settings_default(&cset);
    cw_cond_settings_default(NULL);
    assert_int_equal(cset.type, CW_COND_WHILE);
    assert_int_equal(cset.with_else, 0);
    for (size_t i = 0; i < sizeof cset.reserved; i++) assert_int_equal(cset.reserved[i], 0);
}

/* Partitions: without a driver the creating calls say so; the calls on a set
 * refuse NULL before anything else. */
static void test_partition_calls_without_driver(void **state) {
    (void)state;
    cw_partition_caps caps;
    memset(&caps, 0x5a, sizeof caps);
    cw_partition_group *set = NULL;
    const unsigned counts[] = {16};
    expect_no_driver(cw_partition_get_caps(0, &caps), "cw_partition_get_caps");
    assert_int_equal(caps.supported, 0x5a5a5a5a);
    expect_no_driver(cw_partition_group_create(&set, 0, counts, 1, -1), "cw_partition_group_create");
    assert_null(set);
    cw_partition_group_info ginfo;
    cw_partition_info info;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_get_info(NULL, &ginfo));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_get_partition(NULL, 0, &info));
    cw_partition_group_destroy(NULL);
    cw_partition_group_destroy(&set);
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

static int g_nd_logged;
static void nd_count_log(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)level;
    (void)message;
    g_nd_logged++;
}

/* Without a driver, NVRTC or NCCL, cw_get_versions still succeeds: what is
 * absent reads 0, nothing is logged and the thread's detail is kept. */
static void test_versions_without_libraries(void **state) {
    (void)state;
    cw_versions v;
    memset(&v, 0x5a, sizeof v);
    assert_cw(CW_ERROR_NO_DRIVER, cw_init());
    g_nd_logged = 0;
    assert_cw_ok(cw_log_set_callback(nd_count_log, NULL, CW_LOG_DEBUG));
    assert_cw_ok(cw_get_versions(&v));
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_int_equal(g_nd_logged, 0);
    assert_int_equal(v.cuweave, cw_version());
    assert_int_equal(v.api, CW_VERSION_PACK(CW_API_VERSION_MAJOR, CW_API_VERSION_MINOR, CW_API_VERSION_PATCH));
    assert_int_equal(v.driver, 0);
    assert_int_equal(v.nvrtc_major, 0);
    assert_int_equal(v.nvrtc_minor, 0);
    assert_int_equal(v.nccl, 0);
    for (size_t i = 0; i < sizeof v.reserved; i++) assert_int_equal(v.reserved[i], 0);
    /* the detail is cw_init's, as it was before the call */
    assert_int_equal(cw_last_error()->status, CW_ERROR_NO_DRIVER);
    assert_string_equal(cw_last_error()->function, "cw_init");
    EXPECT_INVALID_ND(cw_get_versions, cw_get_versions(NULL));
    /* a compile still says why NVRTC is missing */
    assert_int_equal(cw_driver_has(CW_FEATURE_NVRTC), 0);
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent/libnvrtc.so"));
}

/* The status and log functions work without a driver. */
/* The jit layer: a compile needs the driver (its version is in the cache
 * key); modules and kernels need it too; settings, the cache configuration
 * and the stats need neither. */
static void test_jit_without_driver(void **state) {
    (void)state;
    cw_program *p = NULL;
    cw_program_settings ps;
    memset(&ps, 0x5a, sizeof ps);
    cw_program_settings_default(&ps);
    cw_program_settings_default(NULL);
    assert_string_equal(ps.name, "cuweave.cu");
    assert_int_equal(ps.arch, 0);
    assert_int_equal(ps.output_ptx, 0);
    assert_int_equal(ps.cache, CW_CACHE_DEFAULT);
    assert_int_equal(ps.n_options + ps.n_headers + ps.n_name_expressions, 0);
    for (size_t i = 0; i < sizeof ps.reserved; i++) assert_int_equal(ps.reserved[i], 0);
    ps.arch = 90;
    expect_no_driver(cw_program_compile(&p, NULL, "__global__ void k() {}", &ps), "cw_program_compile");
    assert_null(p);
    assert_string_equal(cw_jit_get_compile_log(), "");
    cw_module *m = NULL;
    /* an image that is not one is refused before the driver is needed */
    EXPECT_INVALID_ND(cw_module_load_image, cw_module_load_image(&m, "x"));
    assert_non_null(strstr(cw_last_error()->message, "not a cubin"));
    expect_no_driver(cw_module_load_image(&m, "// PTX\n.version 8.0\n.target sm_90\n"), "cw_module_load_image");
    cw_kernel *k = NULL;
    expect_no_driver(cw_builtin_get_kernel(CW_BUILTIN_TIMESTAMP, &k), "cw_builtin_get_kernel");
    assert_null(m);
    assert_null(k);
    cw_versions vs;
    assert_cw_ok(cw_get_versions(&vs)); /* no driver: its fields 0, the origin still said */
    assert_int_equal(vs.driver, 0);
    assert_non_null(strstr(vs.builtin_origin, "ptx"));
    /* handles are checked first */
    cw_program_info pi;
    const char *low = NULL;
    size_t n = 0;
    void *h = NULL;
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    cw_launch_config_default(NULL);
    assert_int_equal(lc.block[0], 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_get_info(NULL, &pi));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_get_lowered_name(NULL, "f", &low));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_module_load(&m, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_module_get_kernel(NULL, "f", &k));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_get_params(NULL, NULL, NULL, 0, &n));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(NULL, NULL, &lc, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_get_handle(NULL, &h));
    cw_program_destroy(NULL);
    cw_program_destroy(&p);
    cw_module_destroy(NULL);
    cw_module_destroy(&m);
    /* the cache's configuration and counters */
    cw_jit_cache_settings cs;
    cw_jit_cache_settings_default(&cs);
    cw_jit_cache_settings_default(NULL);
    assert_null(cs.dir);
    assert_int_equal(cs.memory, 1);
    cs.dir = "off";
    assert_cw_ok(cw_jit_cache_configure(&cs));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_jit_cache_configure(NULL));
    cs.memory = 7;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_jit_cache_configure(&cs));
    cw_jit_stats js;
    assert_cw_ok(cw_jit_get_stats(&js));
    assert_int_equal(js.compiles + js.memory_hits + js.disk_hits, 0);
    cw_jit_cache_clear_memory();
    /* the disk cache is off here: nothing there, nothing to clear */
    cw_jit_cache_info ci;
    assert_cw_ok(cw_jit_cache_get_info(&ci));
    assert_string_equal(ci.dir, "");
    assert_int_equal(ci.entries + ci.bytes, 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_jit_cache_get_info(NULL));
    uint64_t cleared = 9;
    assert_cw_ok(cw_jit_cache_clear_disk(&cleared, NULL));
    assert_int_equal(cleared, 0);
    cw_clear_error();
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_preload(NULL, NULL));
    assert_string_equal(cw_last_error()->function, "cw_kernel_preload");
}

static void test_driverless_functions(void **state) {
    (void)state;
    assert_string_equal(cw_status_name(CW_ERROR_NO_DRIVER), "CW_ERROR_NO_DRIVER");
    assert_true(strlen(cw_status_string(CW_ERROR_NO_DRIVER)) > 0);
    assert_int_equal(cw_version(), CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH));
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    cw_clear_error();
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
}

/* Operators need no driver: they are built, checked and destroyed here.
 * Pipelines, buffers and copies need a context (none without a driver), and
 * every call refuses NULL handles. */
static int g_nd_destroyed;
static cw_status nd_compute(cw_io *io, void *user) {
    (void)io;
    (void)user;
    return CW_SUCCESS;
}
static void nd_destroy(void *user) { (*(int *)user)++; }

static void test_flow_without_driver(void **state) {
    (void)state;
    cw_operator_ops ops = {NULL, nd_compute, NULL, nd_destroy, {0}};
    cw_operator *op = NULL;
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    assert_cw_ok(cw_operator_create(&op, "filter", &ops, &g_nd_destroyed, &os));
    assert_cw_ok(cw_operator_add_input(op, "in", &ps));
    assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    EXPECT_INVALID_ND(cw_operator_add_input, cw_operator_add_input(op, "bad/name", NULL));
    EXPECT_INVALID_ND(cw_operator_add_output, cw_operator_add_output(op, "out", NULL));
    EXPECT_INVALID_ND(cw_operator_create, cw_operator_create(&op, "", &ops, NULL, NULL));
    cw_operator_destroy(&op);
    assert_null(op);
    assert_int_equal(g_nd_destroyed, 1);
    /* a fused stage needs no driver either */
    cw_port_read rd;
    memset(&rd, 0, sizeof rd);
    rd.port = "in";
    rd.read = CW_FUSED_READ_SAME;
    cw_operator_stage stage;
    memset(&stage, 0, sizeof stage);
    stage.function = "blur";
    stage.tiles = 8;
    stage.reads = &rd;
    stage.read_count = 1;
    assert_cw_ok(cw_operator_create_stage(&op, "blur", &stage));
    assert_cw_ok(cw_operator_add_input(op, "in", &ps));
    cw_operator_destroy(&op);
    assert_null(op);
    stage.tiles = 0;
    EXPECT_INVALID_ND(cw_operator_create_stage, cw_operator_create_stage(&op, "blur", &stage));
    assert_null(op);

    cw_pipeline *p = NULL;
    cw_pipeline_settings pls;
    cw_pipeline_settings_default(&pls);
    cw_pipeline_info pst;
    cw_operator *found = NULL;
    cw_devptr d = 0;
    EXPECT_INVALID_ND(cw_pipeline_create, cw_pipeline_create(&p, NULL, &pls));
    EXPECT_INVALID_ND(cw_pipeline_add, cw_pipeline_add(NULL, NULL));
    EXPECT_INVALID_ND(cw_pipeline_connect, cw_pipeline_connect(NULL, "a", "o", "b", "i"));
    EXPECT_INVALID_ND(cw_pipeline_check, cw_pipeline_check(NULL));
    EXPECT_INVALID_ND(cw_pipeline_run, cw_pipeline_run(NULL, 1));
    EXPECT_INVALID_ND(cw_pipeline_stop, cw_pipeline_stop(NULL));
    EXPECT_INVALID_ND(cw_pipeline_synchronize, cw_pipeline_synchronize(NULL));
    EXPECT_INVALID_ND(cw_pipeline_get_info, cw_pipeline_get_info(NULL, &pst));
    EXPECT_INVALID_ND(cw_pipeline_get_operator, cw_pipeline_get_operator(NULL, "a", &found));
    EXPECT_INVALID_ND(cw_pipeline_make_resident, cw_pipeline_make_resident(NULL, NULL));
    cw_resident_fused fu;
    memset(&fu, 0, sizeof fu);
    EXPECT_INVALID_ND(cw_pipeline_make_fused, cw_pipeline_make_fused(NULL, NULL, &fu));
    EXPECT_INVALID_ND(cw_pipeline_get_port_ptr, cw_pipeline_get_port_ptr(NULL, "a", "o", &d));
    cw_pipeline_destroy(&p);

    cw_message m;
    cw_stream *s = NULL;
    size_t n = 0;
    cw_io_info ii;
    cw_buffer *b = NULL;
    EXPECT_INVALID_ND(cw_io_receive, cw_io_receive(NULL, "in", &m));
    EXPECT_INVALID_ND(cw_io_receive_many, cw_io_receive_many(NULL, "in", &m, 1, &n));
    EXPECT_INVALID_ND(cw_io_receive_stream, cw_io_receive_stream(NULL, "in", &s));
    EXPECT_INVALID_ND(cw_io_get_stream, cw_io_get_stream(NULL, "x", &s));
    EXPECT_INVALID_ND(cw_io_set_output_stream, cw_io_set_output_stream(NULL, "out", NULL));
    EXPECT_INVALID_ND(cw_io_emit, cw_io_emit(NULL, "out", NULL, NULL));
    EXPECT_INVALID_ND(cw_io_alloc, cw_io_alloc(&b, NULL, 4));
    EXPECT_INVALID_ND(cw_io_get_port_ptr, cw_io_get_port_ptr(NULL, "out", &d));
    EXPECT_INVALID_ND(cw_io_get_info, cw_io_get_info(NULL, &ii));

    cw_buffer_info bi;
    void *host = NULL;
    cw_devptr dp = 0;
    EXPECT_INVALID_ND(cw_buffer_create, cw_buffer_create(&b, NULL, 16));
    EXPECT_INVALID_ND(cw_buffer_retain, cw_buffer_retain(NULL));
    EXPECT_INVALID_ND(cw_buffer_use, cw_buffer_use(NULL, NULL));
    EXPECT_INVALID_ND(cw_buffer_get_ptr, cw_buffer_get_ptr(NULL, &dp));
    EXPECT_INVALID_ND(cw_buffer_get_writable, cw_buffer_get_writable(NULL, &dp));
    EXPECT_INVALID_ND(cw_buffer_get_info, cw_buffer_get_info(NULL, &bi));
    EXPECT_INVALID_ND(cw_copy_to_device, cw_copy_to_device(NULL, 0, NULL, 0));
    EXPECT_INVALID_ND(cw_copy_to_host, cw_copy_to_host(NULL, NULL, 0, 0));
    EXPECT_INVALID_ND(cw_host_alloc, cw_host_alloc(&host, NULL, 16));
    EXPECT_INVALID_ND(cw_host_alloc, cw_host_alloc(NULL, NULL, 16));
    cw_buffer_destroy(&b);
    cw_buffer_destroy(NULL);
    cw_host_free(NULL, NULL);
    cw_host_free(NULL, &host);
    assert_null(host);
    assert_int_equal(dp, 0);
}

/* share.h: every call refuses a NULL argument before anything else. */
static void test_share_without_driver(void **state) {
    (void)state;
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    cw_shared_handle h;
    cw_shared_event_info info;
    memset(&h, 0, sizeof h);
    EXPECT_INVALID_ND(cw_buffer_create_shareable, cw_buffer_create_shareable(&b, NULL, 16));
    EXPECT_INVALID_ND(cw_buffer_export, cw_buffer_export(NULL, &h));
    EXPECT_INVALID_ND(cw_buffer_import, cw_buffer_import(&b, NULL, &h));
    EXPECT_INVALID_ND(cw_shared_event_create, cw_shared_event_create(&e, NULL));
    EXPECT_INVALID_ND(cw_shared_event_export, cw_shared_event_export(NULL, &h));
    EXPECT_INVALID_ND(cw_shared_event_import, cw_shared_event_import(&e, NULL, &h));
    EXPECT_INVALID_ND(cw_shared_event_record, cw_shared_event_record(NULL, NULL));
    EXPECT_INVALID_ND(cw_shared_event_wait, cw_shared_event_wait(NULL, NULL));
    EXPECT_INVALID_ND(cw_shared_event_get_info, cw_shared_event_get_info(NULL, &info));
    cw_shared_event_destroy(NULL);
    cw_shared_event_destroy(&e);
    assert_null(b);
    assert_null(e);
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

/* The resident loop: every call checks its arguments before anything else
 * (no driver is needed to say so); destroy accepts NULL; the device header
 * text needs nothing. */
static void test_resident_without_driver(void **state) {
    (void)state;
    cw_resident *r = NULL;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    uint64_t seq = 0;
    cw_devptr p = 0;
    cw_resident_state rs;
    cw_resident_info st;
    EXPECT_INVALID_ND(cw_resident_create, cw_resident_create(NULL, NULL, &s));
    EXPECT_INVALID_ND(cw_resident_create, cw_resident_create(&r, NULL, &s));
    EXPECT_INVALID_ND(cw_resident_configure, cw_resident_configure(NULL, &s));
    EXPECT_INVALID_ND(cw_resident_get_settings, cw_resident_get_settings(NULL, &s));
    EXPECT_INVALID_ND(cw_resident_get_ctl, cw_resident_get_ctl(NULL, &p));
    EXPECT_INVALID_ND(cw_resident_get_input, cw_resident_get_input(NULL, 0, &p));
    EXPECT_INVALID_ND(cw_resident_set_workload, cw_resident_set_workload(NULL, NULL));
    EXPECT_INVALID_ND(cw_resident_set_handler, cw_resident_set_handler(NULL, NULL));
    EXPECT_INVALID_ND(cw_resident_set_workload_fn, cw_resident_set_workload_fn(NULL, NULL, NULL));
    EXPECT_INVALID_ND(cw_resident_set_handler_fn, cw_resident_set_handler_fn(NULL, NULL, NULL));
    EXPECT_INVALID_ND(cw_resident_launch, cw_resident_launch(NULL));
    EXPECT_INVALID_ND(cw_resident_build, cw_resident_build(NULL));
    EXPECT_INVALID_ND(cw_resident_set_fused, cw_resident_set_fused(NULL, NULL));
    uint32_t stage = 7;
    EXPECT_INVALID_ND(cw_resident_stage_begin, cw_resident_stage_begin(NULL, NULL, "x", &stage));
    EXPECT_INVALID_ND(cw_resident_stage_end, cw_resident_stage_end(NULL, NULL, 0));
    EXPECT_INVALID_ND(cw_resident_data_ready, cw_resident_data_ready(NULL, &seq));
    EXPECT_INVALID_ND(cw_resident_poll_result, cw_resident_poll_result(NULL, 1));
    EXPECT_INVALID_ND(cw_resident_wait_result, cw_resident_wait_result(NULL, 1, 0));
    EXPECT_INVALID_ND(cw_resident_next_input, cw_resident_next_input(NULL, 0, &p));
    EXPECT_INVALID_ND(cw_resident_tear_down, cw_resident_tear_down(NULL, 0));
    EXPECT_INVALID_ND(cw_resident_get_state, cw_resident_get_state(NULL, &rs));
    EXPECT_INVALID_ND(cw_resident_get_info, cw_resident_get_info(NULL, &st));
    s.unroll = 0;
    EXPECT_INVALID_ND(cw_resident_create, cw_resident_create(&r, NULL, &s));
    assert_null(r);
    cw_resident_destroy(NULL);
    cw_resident_destroy(&r);
    const char *h = cw_builtin_get_resident_header();
    assert_non_null(strstr(h, "cw_resident_sequence"));
}

/* Several devices and NCCL: what needs the driver says so; NULL handles are
 * refused first; NCCL (pointed at a path that does not exist) is reported
 * absent with CW_ERROR_NOT_SUPPORTED, naming the path. */
static void test_multi_without_driver(void **state) {
    (void)state;
    cw_device_group *group = NULL;
    expect_no_driver(cw_device_group_create(&group, NULL, 0), "cw_device_group_create");
    assert_null(group);
    int devs[2] = {0, 1};
    expect_no_driver(cw_device_group_create(&group, devs, 2), "cw_device_group_create");
    EXPECT_INVALID_ND(cw_device_group_create, cw_device_group_create(NULL, NULL, 0));
    EXPECT_INVALID_ND(cw_device_group_create, cw_device_group_create(&group, NULL, 2));
    EXPECT_INVALID_ND(cw_device_group_create, cw_device_group_create(&group, devs, -1));
    EXPECT_INVALID_ND(cw_device_group_create, cw_device_group_create(&group, devs, CW_MAX_DEVICES + 1));
    cw_device_group_destroy(NULL);
    cw_device_group_destroy(&group);
    cw_device_group_info gi;
    gi.count = -3;
    EXPECT_INVALID_ND(cw_device_group_get_info, cw_device_group_get_info(NULL, &gi));
    assert_int_equal(gi.count, -3);
    cw_peer_info pi;
    expect_no_driver(cw_device_get_peer_info(0, 1, &pi), "cw_device_get_peer_info");
    EXPECT_INVALID_ND(cw_device_get_peer_info, cw_device_get_peer_info(0, 1, NULL));
    EXPECT_INVALID_ND(cw_device_get_peer_info, cw_device_get_peer_info(-1, 1, &pi));
    EXPECT_INVALID_ND(cw_context_enable_peer, cw_context_enable_peer(NULL, NULL));
    EXPECT_INVALID_ND(cw_copy_peer, cw_copy_peer(NULL, 1, NULL, 2, NULL, 16));
    EXPECT_INVALID_ND(cw_buffer_copy, cw_buffer_copy(NULL, NULL, NULL));
    EXPECT_INVALID_ND(cw_context_share_buffer_pool, cw_context_share_buffer_pool(NULL, NULL));

    /* NCCL */
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_comm_group_begin());
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent/libnccl.so.2"));
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_comm_group_end());
    cw_comm *comm = NULL;
    cw_context *ctxs[1] = {NULL};
    EXPECT_INVALID_ND(cw_comm_create, cw_comm_create(NULL, ctxs, 1));
    EXPECT_INVALID_ND(cw_comm_create, cw_comm_create(&comm, NULL, 1));
    EXPECT_INVALID_ND(cw_comm_create, cw_comm_create(&comm, ctxs, 0));
    EXPECT_INVALID_ND(cw_comm_create, cw_comm_create(&comm, ctxs, 1));
    assert_null(comm);
    cw_comm_destroy(NULL);
    cw_comm_destroy(&comm);
    cw_comm_info ci;
    ci.size = -3;
    EXPECT_INVALID_ND(cw_comm_get_info, cw_comm_get_info(NULL, &ci));
    assert_int_equal(ci.size, -3);
    cw_devptr a[1] = {1};
    cw_stream *ss[1] = {NULL};
    EXPECT_INVALID_ND(cw_comm_all_reduce, cw_comm_all_reduce(NULL, a, a, 1, CW_FLOAT32, CW_SUM, ss));
    EXPECT_INVALID_ND(cw_comm_broadcast, cw_comm_broadcast(NULL, a, a, 1, CW_FLOAT32, 0, ss));
    EXPECT_INVALID_ND(cw_comm_all_reduce_rank, cw_comm_all_reduce_rank(NULL, 0, 1, 1, 1, CW_FLOAT32, CW_SUM, NULL));
    EXPECT_INVALID_ND(cw_comm_broadcast_rank, cw_comm_broadcast_rank(NULL, 0, 1, 1, 1, CW_FLOAT32, 0, NULL));
    /* Communicators by rank (CPU tests across processes: test_comm_rank_cpu). */
    cw_comm_id id;
    memset(&id, 0, sizeof id);
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_comm_id_generate(&id));
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent/libnccl.so.2"));
    EXPECT_INVALID_ND(cw_comm_id_generate, cw_comm_id_generate(NULL));
    EXPECT_INVALID_ND(cw_comm_create_rank, cw_comm_create_rank(NULL, NULL, &id, 2, 0, 100));
    EXPECT_INVALID_ND(cw_comm_create_rank, cw_comm_create_rank(&comm, NULL, &id, 2, 0, 100));
    cw_comm_bootstrap_settings bs;
    cw_comm_bootstrap_settings_default(NULL);
    memset(&bs, 0x7f, sizeof bs);
    cw_comm_bootstrap_settings_default(&bs);
    assert_int_equal(bs.rank, -1);
    assert_int_equal(bs.world_size, 0);
    assert_null(bs.file);
    assert_null(bs.addr);
    assert_int_equal(bs.timeout_ms, 60000);
    for (size_t i = 0; i < sizeof bs.reserved; i++) assert_int_equal(bs.reserved[i], 0);
    EXPECT_INVALID_ND(cw_comm_bootstrap, cw_comm_bootstrap(NULL, NULL, &bs));
    EXPECT_INVALID_ND(cw_comm_bootstrap, cw_comm_bootstrap(&comm, NULL, NULL));
    assert_null(comm);
}

/* A trace needs no driver for host spans; the calls on streams, pipelines
 * and loops refuse NULL handles naming themselves. */
static void test_trace_without_driver(void **state) {
    (void)state;
    cw_trace_settings ts;
    memset(&ts, 0x7f, sizeof ts);
    cw_trace_settings_default(&ts);
    cw_trace_settings_default(NULL);
    assert_int_equal(ts.max_spans, 0);
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, &ts));
    assert_cw_ok(cw_trace_name_thread(t, "main"));
    assert_cw_ok(cw_trace_host_begin(t, "work"));
    assert_cw_ok(cw_trace_host_end(t));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 1);
    assert_int_equal(info.contexts, 0);
    char path[] = "/tmp/cw-nodriver-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_cw_ok(cw_trace_write(t, path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[2048] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(text, "\"traceEvents\""));
    assert_non_null(strstr(text, "\"name\":\"work\",\"cat\":\"host\",\"ph\":\"X\""));
    assert_non_null(strstr(text, "\"args\":{\"name\":\"main\"}"));
    EXPECT_INVALID_ND(cw_trace_create, cw_trace_create(NULL, NULL));
    EXPECT_INVALID_ND(cw_trace_name_stream, cw_trace_name_stream(t, NULL, "x"));
    EXPECT_INVALID_ND(cw_trace_name_thread, cw_trace_name_thread(NULL, "x"));
    EXPECT_INVALID_ND(cw_trace_begin, cw_trace_begin(t, NULL, "x"));
    EXPECT_INVALID_ND(cw_trace_end, cw_trace_end(t, NULL));
    EXPECT_INVALID_ND(cw_trace_host_begin, cw_trace_host_begin(t, NULL));
    EXPECT_INVALID_ND(cw_trace_host_end, cw_trace_host_end(NULL));
    EXPECT_INVALID_ND(cw_pipeline_set_trace, cw_pipeline_set_trace(NULL, t));
    EXPECT_INVALID_ND(cw_trace_record_resident, cw_trace_record_resident(t, NULL));
    EXPECT_INVALID_ND(cw_trace_get_info, cw_trace_get_info(t, NULL));
    EXPECT_INVALID_ND(cw_trace_write, cw_trace_write(t, NULL));
    cw_trace_destroy(&t);
    assert_null(t);
    cw_trace_destroy(NULL);
}

int main(void) {
    /* Before any cuweave call: the loader reads these once. */
    setenv("CUWEAVE_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    setenv("CUWEAVE_LIBNVRTC", "/nonexistent/libnvrtc.so", 1);
    setenv("CUWEAVE_LIBNCCL", "/nonexistent/libnccl.so.2", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_init),
        cmocka_unit_test(test_init_reports_no_driver),
        cmocka_unit_test(test_every_call_reports_no_driver),
        cmocka_unit_test(test_handle_calls_without_driver),
        cmocka_unit_test(test_stream_calls_without_driver),
        cmocka_unit_test(test_graph_calls_without_driver),
        cmocka_unit_test(test_partition_calls_without_driver),
        cmocka_unit_test(test_features_absent),
        cmocka_unit_test(test_versions_without_libraries),
        cmocka_unit_test(test_jit_without_driver),
        cmocka_unit_test(test_driverless_functions),
        cmocka_unit_test(test_resident_without_driver),
        cmocka_unit_test(test_flow_without_driver),
        cmocka_unit_test(test_multi_without_driver),
        cmocka_unit_test(test_share_without_driver),
        cmocka_unit_test(test_trace_without_driver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
