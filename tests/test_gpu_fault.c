/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: a device fault is reported through futures, streams and contexts as
 * CW_ERROR_DEVICE_FAULT, never as success and never as a hang.
 *
 * A fault (cw_fault writing through (int *)0x10) is sticky and poisons the
 * context for the rest of the process, so each future kind runs in its own
 * child process with a fresh context: the parent forks before it makes any
 * CUDA call (a CUDA-initialised process cannot use CUDA in a forked child),
 * and each child checks the GPU itself, runs one kind and exits with a code
 * the parent reads (77: no GPU). A watchdog in each child turns a hang into
 * a failure that names the step that hung.
 *
 * For HOST_FUNC the host function never runs after a fault, so the wait is
 * given a timeout (2 s) and must come back with CW_ERROR_DEVICE_FAULT.
 * A third child runs a pipeline whose operator B faults in iteration 2: the
 * run stops there with CW_ERROR_DEVICE_FAULT naming the iteration and the
 * operators in flight, and everything is destroyed afterwards. A fourth
 * runs a resident loop whose workload faults: the wait for that request
 * ends with CW_ERROR_DEVICE_FAULT naming it, and destroy returns. A fifth
 * does the same with a loop that traces (cw_resident_settings.trace) and a
 * workload of three stages, the middle one faulting: the error names that
 * stage. A sixth runs a traced resident pipeline A -> B -> C whose
 * operator B faults: the error names operator B.
 * Under compute-sanitizer (NV_SANITIZER_INJECTION_* set) the driver reports the
 * fault as CUDA_ERROR_LAUNCH_FAILED, which is then accepted too; memcheck
 * still reports the deliberate bad write, so the sanitizer's own exit code
 * is not meaningful for this binary. Links libcuweave.a. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

#define MS 1000000LL /* nanoseconds */
#define WATCHDOG_S 30

typedef unsigned long long dptr;

static rawcuda rc;
static CUcontext cuctx;
static void *module;
static void *k_slow_write, *k_fault;
static cw_future_kind child_kind;
static const char *volatile stage = "start";

static const char *kind_name(cw_future_kind k) { return k == CW_FUTURE_HOST_FUNC ? "HOST_FUNC" : "WRITE_VALUE"; }

static void on_alarm(int sig) {
    (void)sig;
    static const char a[] = "FAIL: watchdog: the child hung in: ";
    const char *s = stage;
    size_t n = 0;
    while (s[n]) n++;
    if (write(2, a, sizeof a - 1) < 0 || write(2, s, n) < 0 || write(2, "\n", 1) < 0) _exit(3);
    _exit(3);
}

static void cur(void) { assert_cu_ok(rc.cuCtxSetCurrent(cuctx)); }

static void launch(cw_stream *s, void *fn, void **args) {
    CUstream h = NULL;
    assert_cw_ok(cwt_stream_handle(s, &h));
    cur();
    assert_cu_ok(rawcuda_launch1(&rc, fn, h, args));
}

typedef struct {
    atomic_int count;
    atomic_int status;
} cb_rec;

static void on_done(void *user, cw_future *f, cw_status status) {
    (void)f;
    cb_rec *r = user;
    atomic_store(&r->status, (int)status);
    atomic_fetch_add(&r->count, 1);
}

/* A thread that waits a future with no limit, or destroys one. */
typedef struct {
    cw_future *f;
    int destroy;
    atomic_int done;
    cw_status st;
    double ms;
} bg_arg;

static void *bg(void *p) {
    bg_arg *a = p;
    const double t0 = now_ms();
    if (a->destroy)
        cw_future_destroy(&a->f);
    else
        a->st = cw_future_wait(a->f, -1);
    a->ms = now_ms() - t0;
    atomic_store(&a->done, 1);
    return NULL;
}

/* Waits up to ms for a background thread; 1 when it finished. */
static int bg_join(bg_arg *a, pthread_t th, int ms) {
    for (int i = 0; i < ms && !atomic_load(&a->done); i++) sleep_ms(1);
    if (!atomic_load(&a->done)) return 0; /* left blocked; the child _exits */
    pthread_join(th, NULL);
    return 1;
}

static void test_fault(void **state) {
    const cw_future_kind kind = *(const cw_future_kind *)*state;
    const char *kn = kind_name(kind);
    cw_context *ctx = NULL;
    stage = "setup";
    assert_cw_ok(cw_context_create(&ctx, 0));
    assert_cw_ok(cwt_context_handle(ctx, &cuctx));
    cur();
    assert_cu_ok(rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_slow_write", &k_slow_write));
    assert_cu_ok(rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_fault", &k_fault));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    dptr buf = 0;
    assert_cu_ok(rc.cuMemAlloc(&buf, sizeof(int)));
    assert_cu_ok(rc.cuMemsetD32(buf, 0, 1));
    assert_cu_ok(rc.cuCtxSynchronize());

    /* a future that completed before the fault, to be re-armed after it: its
     * fault check must still work (the event is recorded once, at creation) */
    cw_future *f0 = NULL;
    assert_cw_ok(cw_future_create(&f0, s, kind));
    assert_cw_ok(cw_future_wait(f0, 2000000));

    /* a 20 ms writer first, so that the futures are made before the fault
     * happens, then the fault */
    stage = "enqueue";
    int value = 1;
    long long ns = 20 * MS;
    void *wargs[] = {&buf, &value, &ns};
    launch(s, k_slow_write, wargs);
    dptr bad = 0x10;
    void *fargs[] = {&bad};
    launch(s, k_fault, fargs);
    cw_future *f = NULL, *f2 = NULL;
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_cw_ok(cw_future_create(&f2, s, kind));
    cb_rec cb;
    atomic_init(&cb.count, 0);
    atomic_init(&cb.status, -1);
    assert_cw_ok(cw_future_set_callback(f, on_done, &cb));
    assert_cw(CW_ERROR_NOT_READY, cw_future_poll(f));
    int fd = -1;
    assert_cw_ok(cw_future_get_fd(f, &fd));
    stage = "cw_future_rearm after the fault";
    cw_status rs = cw_future_rearm(f0, s);
    assert_true(rs == CW_SUCCESS || rs == CW_ERROR_DEVICE_FAULT);

    /* a waiter with no limit, started before the fault is known */
    static bg_arg forever;
    memset(&forever, 0, sizeof forever);
    forever.f = f2;
    pthread_t th_forever;
    assert_int_equal(pthread_create(&th_forever, NULL, bg, &forever), 0);

    /* the wait comes back with the fault, not success, not a hang */
    stage = "cw_future_wait(f, 2 s) after the fault";
    const double t0 = now_ms();
    const cw_status st = cw_future_wait(f, 2000000);
    const double took = now_ms() - t0;
    printf("# fault %s: wait(2 s) returned %s after %.0f ms\n", kn, cw_status_name(st), took);
    if (st != CW_ERROR_DEVICE_FAULT)
        fail_msg("%s: cw_future_wait after a fault returned %s (%s), expected CW_ERROR_DEVICE_FAULT", kn,
                 cw_status_name(st), cw_last_error()->message);
    assert_true(took < 2600.0);
    stage = "cw_future_poll after the fault";
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_poll(f));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_wait(f, 0));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_wait(f, 1000));

    /* the re-armed future reports the fault too */
    stage = "cw_future_wait on the re-armed future";
    if (rs == CW_SUCCESS) assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_wait(f0, 2000000));

    /* the fd becomes readable and the callback runs exactly once, with the
     * fault (the watcher thread reports it: the driver never runs a host
     * function after a fault) */
    stage = "poll(fd) after the fault";
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 2000), 1);
    sleep_ms(20);
    assert_int_equal(atomic_load(&cb.count), 1);
    assert_int_equal(atomic_load(&cb.status), CW_ERROR_DEVICE_FAULT);

    /* streams and the context say the same, with the driver's name */
    stage = "cw_stream_synchronize after the fault";
    cw_clear_error();
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_stream_synchronize(s));
    if (getenv("NV_SANITIZER_INJECTION_PORT_BASE") || getenv("CUDA_INJECTION64_PATH")) {
        /* under compute-sanitizer the fault surfaces as a launch failure */
        assert_true(cw_last_error()->cu_result == 700 || cw_last_error()->cu_result == 719);
    } else {
        assert_string_equal(cw_last_error()->cu_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert_int_equal(cw_last_error()->cu_result, 700);
    }
    assert_string_equal(cw_last_error()->function, "cw_stream_synchronize");
    assert_int_equal(cw_last_error()->status, CW_ERROR_DEVICE_FAULT);
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_stream_query(s));
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_context_synchronize(ctx));

    /* nothing new can be made complete on a faulted stream */
    stage = "cw_future_create after the fault";
    cw_future *f3 = NULL;
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_future_create(&f3, s, kind));
    assert_null(f3);

    /* the unlimited waiter (informational: the header only promises an
     * answer "whenever a wait gives up") */
    stage = "waiting for the wait(-1) thread";
    const int forever_done = bg_join(&forever, th_forever, 3000);
    if (forever_done) {
        printf("# fault %s: wait(-1) returned %s after %.0f ms\n", kn, cw_status_name(forever.st), forever.ms);
        assert_int_not_equal(forever.st, CW_SUCCESS);
    } else {
        printf("# fault %s: wait(-1) had not returned 3 s after the fault was seen\n", kn);
    }

    /* destroying a future whose marker will never complete must return */
    stage = "cw_future_destroy after the fault";
    static bg_arg des;
    memset(&des, 0, sizeof des);
    des.f = f;
    des.destroy = 1;
    pthread_t th_des;
    assert_int_equal(pthread_create(&th_des, NULL, bg, &des), 0);
    if (!bg_join(&des, th_des, 5000)) fail_msg("%s: cw_future_destroy of a faulted future did not return in 5 s", kn);
    assert_null(des.f);
    printf("# fault %s: destroy of the faulted future took %.1f ms\n", kn, des.ms);
    if (forever_done) cw_future_destroy(&f2);

    cw_future_destroy(&f0);
    assert_null(f0);
    stage = "cw_stream_destroy / cw_context_destroy after the fault";
    cw_stream_destroy(&s);
    assert_null(s);
    cw_context_destroy(&ctx);
    assert_null(ctx);
    stage = "done";
}

/* A kernel faulting inside a pipeline: operator B launches cw_fault in
 * iteration 2. With max_in_flight 1 the run waits for each iteration at its
 * end, so the fault stops the run there, named: the iteration and the
 * operators whose work was in flight. Then everything is destroyed. */
static cw_kernel *pk_slow, *pk_fault;
static cw_status pf_compute(cw_io *io, void *user) {
    const char *role = (const char *)user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, role[0] == 'A' ? NULL : "in", &s);
    if (st) return st;
    static dptr word;
    cw_launch_config c;
    cw_launch_config_default(&c);
    if (role[0] == 'A') {
        if (!word && rc.cuMemAlloc(&word, sizeof(int))) return CW_ERROR_OUT_OF_MEMORY;
        int v = (int)it;
        long long ns = 2 * MS;
        void *a[] = {&word, &v, &ns};
        if ((st = cw_kernel_launch(pk_slow, s, &c, a))) return st;
    } else if (role[0] == 'B' && it == 2) {
        dptr bad = 0x10;
        void *a[] = {&bad};
        if ((st = cw_kernel_launch(pk_fault, s, &c, a))) return st;
    }
    return role[0] == 'C' ? CW_SUCCESS : cw_io_emit(io, "out", NULL, NULL);
}

static void test_pipeline_fault(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    cw_module *m = NULL;
    stage = "pipeline setup";
    assert_cw_ok(cw_context_create(&ctx, 0));
    assert_cw_ok(cwt_context_handle(ctx, &cuctx));
    cur();
    assert_cw_ok(cw_module_load_image(&m, cw_test_kernels_fatbin));
    assert_cw_ok(cw_module_get_kernel(m, "cw_slow_write", &pk_slow));
    assert_cw_ok(cw_module_get_kernel(m, "cw_fault", &pk_fault));
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 1;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    static const char *names[] = {"A", "B", "C"};
    cw_operator_ops ops = {NULL, pf_compute, NULL, NULL, {0}};
    for (int i = 0; i < 3; i++) {
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &ops, (void *)names[i], NULL));
        if (i) assert_cw_ok(cw_operator_add_input(o, "in", NULL));
        if (i < 2) assert_cw_ok(cw_operator_add_output(o, "out", NULL));
        assert_cw_ok(cw_pipeline_add(p, o));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in"));
    stage = "cw_pipeline_run with a faulting operator";
    cw_status st = cw_pipeline_run(p, 10);
    const char *msg = cw_last_error()->message;
    printf("# pipeline fault: cw_pipeline_run returned %s: %s\n", cw_status_name(st), msg);
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_non_null(strstr(msg, "iteration 2"));
    assert_non_null(strstr(msg, "'B'"));
    cw_pipeline_info pst;
    assert_cw_ok(cw_pipeline_get_info(p, &pst));
    assert_int_equal(pst.iterations, 3); /* it stopped in the iteration of the fault */
    stage = "cw_pipeline_synchronize after the fault";
    assert_cw(CW_ERROR_DEVICE_FAULT, cw_pipeline_synchronize(p));
    assert_non_null(strstr(cw_last_error()->message, "operator '"));
    stage = "destroying the pipeline, module and context after the fault";
    cw_pipeline_destroy(&p);
    assert_null(p);
    cw_module_destroy(&m);
    cw_context_destroy(&ctx);
    assert_null(ctx);
    stage = "done";
}

/* A workload kernel faulting inside the resident loop: the wait for that
 * request ends with CW_ERROR_DEVICE_FAULT naming it, not with a timeout;
 * tear-down and destroy return. */
static cw_status fault_workload(cw_stream *s, void *user) {
    (void)user;
    dptr bad = 0x10;
    void *a[] = {&bad};
    cw_launch_config c;
    cw_launch_config_default(&c);
    return cw_kernel_launch(pk_fault, s, &c, a);
}

static void test_resident_fault(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    cw_module *m = NULL;
    stage = "resident setup";
    assert_cw_ok(cw_context_create(&ctx, 0));
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        cw_context_destroy(&ctx);
        skip();
    }
    assert_cw_ok(cw_module_load_image(&m, cw_test_kernels_fatbin));
    assert_cw_ok(cw_module_get_kernel(m, "cw_fault", &pk_fault));
    assert_cw_ok(cw_kernel_preload(pk_fault, ctx));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.unroll = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(r, fault_workload, NULL));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_launch(r));
    stage = "waiting for a request whose workload faults";
    uint64_t seq = 0;
    assert_cw_ok(cw_resident_data_ready(r, &seq));
    const double t0 = now_ms();
    cw_status st = cw_resident_wait_result(r, seq, 10000);
    const double took = now_ms() - t0;
    printf("# resident fault: wait_result returned %s after %.0f ms: %s\n", cw_status_name(st), took,
           cw_last_error()->message);
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_non_null(strstr(cw_last_error()->message, "request 1"));
    assert_true(took < 5000);
    stage = "tear-down and destroy after the fault";
    (void)cw_resident_tear_down(r, 1000);
    cw_resident_destroy(&r);
    assert_null(r);
    cw_module_destroy(&m);
    cw_context_destroy(&ctx);
    stage = "done";
}

/* Traced: the workload is three stages, "load", "scale" (faults) and
 * "store"; the error names "scale" and the copy of the iteration. */
static cw_kernel *pk_mul_add;
static dptr g_word;
static cw_status staged_workload(cw_stream *s, void *user) {
    cw_resident *r = (cw_resident *)user;
    static const char *names[3] = {"load", "scale", "store"};
    cw_launch_config c;
    cw_launch_config_default(&c);
    for (int i = 0; i < 3; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(r, s, names[i], &stage);
        if (st) return st;
        dptr bad = 0x10;
        int v = i;
        void *fa[] = {&bad};
        void *ma[] = {&g_word, &v};
        if ((st = cw_kernel_launch(i == 1 ? pk_fault : pk_mul_add, s, &c, i == 1 ? fa : ma))) return st;
        if ((st = cw_resident_stage_end(r, s, stage))) return st;
    }
    return CW_SUCCESS;
}

/* The traced children's setup: a context (skips without conditional
 * nodes), the test kernels loaded, cw_fault and cw_mul_add preloaded, and
 * g_word (the word cw_mul_add updates). */
static void traced_setup(cw_context **ctx, cw_module **m, const char *what) {
    stage = what;
    assert_cw_ok(cw_context_create(ctx, 0));
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        cw_context_destroy(ctx);
        skip();
    }
    assert_cw_ok(cwt_context_handle(*ctx, &cuctx));
    cur();
    assert_cw_ok(cw_module_load_image(m, cw_test_kernels_fatbin));
    assert_cw_ok(cw_module_get_kernel(*m, "cw_fault", &pk_fault));
    assert_cw_ok(cw_module_get_kernel(*m, "cw_mul_add", &pk_mul_add));
    assert_cw_ok(cw_kernel_preload(pk_fault, *ctx));
    assert_cw_ok(cw_kernel_preload(pk_mul_add, *ctx));
    assert_cu_ok(rc.cuMemAlloc(&g_word, sizeof(int)));
}

static void test_resident_traced_fault(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    cw_module *m = NULL;
    traced_setup(&ctx, &m, "traced resident setup");
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.unroll = 4;
    rs.trace = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(r, staged_workload, r));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_launch(r));
    stage = "waiting for a request whose traced workload faults";
    uint64_t seq = 0;
    assert_cw_ok(cw_resident_data_ready(r, &seq));
    cw_status st = cw_resident_wait_result(r, seq, 10000);
    const char *msg = cw_last_error()->message;
    printf("# traced resident fault: wait_result returned %s: %s\n", cw_status_name(st), msg);
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_non_null(strstr(msg, "request 1, in stage 'scale' (workload, copy 1 of 4 of the iteration"));
    assert_non_null(strstr(msg, "'scale', 'workload'"));
    stage = "tear-down and destroy after the traced fault";
    st = cw_resident_tear_down(r, 1000);
    printf("# traced resident fault: tear_down returned %s: %s\n", cw_status_name(st), cw_last_error()->message);
    cw_resident_destroy(&r);
    cw_module_destroy(&m);
    cw_context_destroy(&ctx);
    stage = "done";
}

/* A traced resident pipeline A -> B -> C whose operator B faults: the
 * error names operator B. */
static cw_status rpf_compute(cw_io *io, void *user) {
    const char *role = (const char *)user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, role[0] == 'A' ? NULL : "in", &s);
    if (st) return st;
    cw_launch_config c;
    cw_launch_config_default(&c);
    dptr bad = 0x10;
    int v = 1;
    void *fa[] = {&bad};
    void *ma[] = {&g_word, &v};
    if ((st = cw_kernel_launch(role[0] == 'B' ? pk_fault : pk_mul_add, s, &c, role[0] == 'B' ? fa : ma))) return st;
    return role[0] == 'C' ? CW_SUCCESS : cw_io_emit(io, "out", NULL, NULL);
}

static void test_resident_pipeline_fault(void **state) {
    (void)state;
    cw_context *ctx = NULL;
    cw_module *m = NULL;
    traced_setup(&ctx, &m, "traced resident pipeline setup");
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    static const char *names[] = {"A", "B", "C"};
    cw_operator_ops ops = {NULL, rpf_compute, NULL, NULL, {0}};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    for (int i = 0; i < 3; i++) {
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &ops, (void *)names[i], &os));
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.bytes = 64;
        if (i) assert_cw_ok(cw_operator_add_input(o, "in", NULL));
        if (i < 2) assert_cw_ok(cw_operator_add_output(o, "out", &ps));
        assert_cw_ok(cw_pipeline_add(p, o));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in"));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.unroll = 2;
    rs.trace = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_pipeline_make_resident(p, r));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_launch(r));
    stage = "waiting for a request whose operator B faults";
    uint64_t seq = 0;
    assert_cw_ok(cw_resident_data_ready(r, &seq));
    cw_status st = cw_resident_wait_result(r, seq, 10000);
    const char *msg = cw_last_error()->message;
    printf("# traced resident pipeline fault: wait_result returned %s: %s\n", cw_status_name(st), msg);
    assert_int_equal(st, CW_ERROR_DEVICE_FAULT);
    assert_non_null(strstr(msg, "in stage 'operator B' (workload, copy 1 of 2"));
    stage = "destroying the loop, pipeline, module and context after the fault";
    (void)cw_resident_tear_down(r, 1000);
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
    cw_module_destroy(&m);
    cw_context_destroy(&ctx);
    stage = "done";
}

static int pipeline_child(void) {
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (!rawcuda_open(&rc)) {
        printf("FAIL: cuweave found a driver but the test's own loader did not\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pipeline_fault)};
    return cmocka_run_group_tests_name("fault_pipeline", tests, NULL, NULL) ? 1 : 0;
}

/* which: 0 the plain loop, 1 the traced loop, 2 the traced resident pipeline */
static int resident_child(int which) {
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (!rawcuda_open(&rc)) {
        printf("FAIL: cuweave found a driver but the test's own loader did not\n");
        return 1;
    }
    const struct CMUnitTest plain[] = {cmocka_unit_test(test_resident_fault)};
    const struct CMUnitTest traced[] = {cmocka_unit_test(test_resident_traced_fault)};
    const struct CMUnitTest piped[] = {cmocka_unit_test(test_resident_pipeline_fault)};
    if (which == 1) return cmocka_run_group_tests_name("fault_resident_traced", traced, NULL, NULL) ? 1 : 0;
    if (which == 2) return cmocka_run_group_tests_name("fault_resident_pipeline", piped, NULL, NULL) ? 1 : 0;
    return cmocka_run_group_tests_name("fault_resident", plain, NULL, NULL) ? 1 : 0;
}

static const char *child_name(int i) {
    static const char *const n[] = {"HOST_FUNC", "WRITE_VALUE", "pipeline", "resident", "traced resident",
                                    "traced resident pipeline"};
    return n[i];
}

/* The child: one kind, a fresh process, a fresh context. */
static int child(cw_future_kind kind) {
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (!rawcuda_open(&rc)) {
        printf("FAIL: cuweave found a driver but the test's own loader did not\n");
        return 1;
    }
    child_kind = kind;
    const struct CMUnitTest tests[] = {
        {kind == CW_FUTURE_HOST_FUNC ? "test_fault(HOST_FUNC)" : "test_fault(WRITE_VALUE)", test_fault, NULL, NULL,
         &child_kind},
    };
    const int failed = cmocka_run_group_tests_name(kind == CW_FUTURE_HOST_FUNC ? "fault_host_func" : "fault_write_value",
                                                   tests, NULL, NULL);
    return failed ? 1 : 0;
}

int main(void) {
    /* No CUDA (and no cuweave call, which would initialise it) before fork. */
    const cw_future_kind kinds[2] = {CW_FUTURE_HOST_FUNC, CW_FUTURE_WRITE_VALUE};
    int skipped = 0, failed = 0;
    enum { kChildren = 6 };
    /* 0, 1: the future kinds; 2: the pipeline; 3: the resident loop; 4: traced; 5: a traced resident pipeline */
    for (int i = 0; i < kChildren; i++) {
        fflush(stdout);
        fflush(stderr);
        const pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            const int code = i >= 3 ? resident_child(i - 3) : i == 2 ? pipeline_child() : child(kinds[i]);
            fflush(stdout);
            fflush(stderr);
            _exit(code); /* no atexit teardown in a faulted process */
        }
        int ws = 0;
        if (waitpid(pid, &ws, 0) != pid) {
            perror("waitpid");
            return 1;
        }
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == CWT_SKIP_EXIT) {
            skipped++;
        } else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
            /* passed */
        } else {
            failed++;
            if (WIFSIGNALED(ws))
                printf("FAIL: %s child killed by signal %d\n", child_name(i), WTERMSIG(ws));
            else
                printf("FAIL: %s child exited %d\n", child_name(i), WEXITSTATUS(ws));
        }
    }
    if (skipped == kChildren) return CWT_SKIP_EXIT;
    if (skipped) {
        printf("FAIL: some children found a GPU and others did not\n");
        return 1;
    }
    printf("# fault: both future kinds, the pipeline and the resident loops (plain, traced, traced pipeline) reported "
           "CW_ERROR_DEVICE_FAULT: %s\n",
           failed ? "no" : "yes");
    return failed ? 1 : 0;
}
