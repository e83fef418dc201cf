/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the futures' callbacks, rearm and destroy against a fake
 * CUDA driver (tests/fake_cuda.c, built into a shared library whose path is
 * argv[1]; cuweave opens it through CUWEAVE_LIBCUDA). Exits 77 (skip) when
 * argv[1] is missing. The other futures tests are in test_stream_cpu.c.
 *
 * A watchdog thread ends the program (exit 1, naming the step) when a test
 * is still running after 10 s, so that a deadlock fails CI instead of
 * holding it.
 *
 * Every test runs on its own cw_context; its teardown destroys it and checks
 * that the fake's live streams, events, host and device allocations and
 * primary-context retains are back where they were (no leak: a future left
 * behind keeps its context, and so all of it, alive), and that no driver
 * call came from inside a host function.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "driver/cuda_min.h"
#include "testing/seam.h"

/* ---- the fake driver's control API -------------------------------------- */

static struct {
    void *lib;
    long (*live)(const char *kind);
    void (*hold)(int on);
    int (*drain)(int timeout_ms);
    void (*fault)(int on);
    CUcontext (*other_context)(void);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemFreeHost)(void *);
} fk;

static int load_fake(const char *path) {
    fk.lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!fk.lib) fk.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!fk.lib) return 0;
#define FK_SYM_(field, name) \
    if (!(*(void **)&fk.field = dlsym(fk.lib, name))) return 0;
    FK_SYM_(live, "fake_cuda_live")
    FK_SYM_(hold, "fake_cuda_hold")
    FK_SYM_(drain, "fake_cuda_drain")
    FK_SYM_(fault, "fake_cuda_fault")
    FK_SYM_(other_context, "fake_cuda_other_context")
    FK_SYM_(cuCtxSetCurrent, "cuCtxSetCurrent")
    FK_SYM_(cuStreamWaitValue32, "cuStreamWaitValue32")
    FK_SYM_(cuMemHostAlloc, "cuMemHostAlloc")
    FK_SYM_(cuMemFreeHost, "cuMemFreeHost")
#undef FK_SYM_
    return 1;
}

#define assert_cu_ok(expr)                                                              \
    do {                                                                                \
        CUresult cwt_r_ = (expr);                                                       \
        if (cwt_r_ != CUDA_SUCCESS) fail_msg("%s returned CUresult %d", #expr, cwt_r_); \
    } while (0)

/* ---- the watchdog --------------------------------------------------------- */

/* One thread for the program: while a test runs it is armed with the test's
 * a test still running after the limit (10 s; 60 s under valgrind) ends the
 * program with exit status 1 and a line naming the step it was at
 * (dog_step; cmocka has named the test). A deadlock then fails the run. */
static struct {
    pthread_mutex_t mu;
    const char *step;
    double deadline; /* 0: disarmed */
} g_dog = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static void *dog_main(void *arg) {
    (void)arg;
    for (;;) {
        sleep_ms(50);
        pthread_mutex_lock(&g_dog.mu);
        if (g_dog.deadline > 0 && now_ms() > g_dog.deadline) {
            fprintf(stderr, "HANG: the test cmocka named last is still running after its limit, at step: %s\n",
                    g_dog.step ? g_dog.step : "?");
            fflush(stderr);
            _exit(1);
        }
        pthread_mutex_unlock(&g_dog.mu);
    }
    return NULL;
}

static void dog_arm(void) {
    const char *preload = getenv("LD_PRELOAD");
    const double limit_ms = preload && strstr(preload, "vgpreload") ? 60000 : 10000;
    pthread_mutex_lock(&g_dog.mu);
    g_dog.step = "setup";
    g_dog.deadline = now_ms() + limit_ms;
    pthread_mutex_unlock(&g_dog.mu);
}

static void dog_step(const char *step) {
    pthread_mutex_lock(&g_dog.mu);
    g_dog.step = step;
    pthread_mutex_unlock(&g_dog.mu);
}

static void dog_disarm(void) {
    pthread_mutex_lock(&g_dog.mu);
    g_dog.deadline = 0;
    pthread_mutex_unlock(&g_dog.mu);
}

/* ---- per-test context and leak check ------------------------------------ */

static cw_context *g_ctx;
static CUcontext g_primary;

struct snapshot {
    long stream, event, hostmem, devmem, primary, badaccess, cbcalls, orphans;
};

static struct snapshot snap(void) {
    struct snapshot s = {fk.live("stream"),  fk.live("event"),     fk.live("hostmem"), fk.live("devmem"),
                         fk.live("primary"), fk.live("badaccess"), fk.live("cbcalls"), fk.live("orphans")};
    return s;
}

static struct snapshot g_base;
static int g_known_leak; /* a HOST_FUNC future destroyed after a fault: documented */
static void *volatile g_kept[64]; /* its memory, kept reachable for LeakSanitizer */
static int g_kept_count;

static int setup_ctx(void **state) {
    (void)state;
    dog_arm();
    g_known_leak = 0;
    assert_cu_ok(fk.cuCtxSetCurrent(NULL));
    g_base = snap();
    if (cw_context_create(&g_ctx, 0) != CW_SUCCESS) return -1;
    cw_context_info ci;
    if (cw_context_get_info(g_ctx, &ci) != CW_SUCCESS) return -1;
    g_primary = ci.handle;
    return 0;
}

static int teardown_ctx(void **state) {
    (void)state;
    dog_step("teardown");
    cwi_future_watch_hooks(NULL, NULL, NULL);
    fk.hold(0);
    fk.fault(0);
    cw_context_destroy(&g_ctx);
    int drained = fk.drain(5000);
    (void)fk.cuCtxSetCurrent(NULL);
    struct snapshot now = snap();
    dog_disarm();
    if (g_known_leak) return 0;
    if (!drained || memcmp(&g_base, &now, sizeof now) != 0) {
        print_error("leak check after the test: streams %ld->%ld, events %ld->%ld, hostmem %ld->%ld, devmem "
                    "%ld->%ld, primary retains %ld->%ld, bad accesses %ld->%ld, calls from host functions "
                    "%ld->%ld, orphans %ld->%ld%s\n",
                    g_base.stream, now.stream, g_base.event, now.event, g_base.hostmem, now.hostmem, g_base.devmem,
                    now.devmem, g_base.primary, now.primary, g_base.badaccess, now.badaccess, g_base.cbcalls,
                    now.cbcalls, g_base.orphans, now.orphans, drained ? "" : " (fake queue not drained)");
        return -1;
    }
    return 0;
}

static cw_stream *new_stream(void) {
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, g_ctx, NULL));
    return s;
}

static const char *kind_name(cw_future_kind k) {
    return k == CW_FUTURE_HOST_FUNC ? "HOST_FUNC" : k == CW_FUTURE_WRITE_VALUE ? "WRITE_VALUE" : "EVENT";
}

static const cw_future_kind k_host = CW_FUTURE_HOST_FUNC;
static const cw_future_kind k_write = CW_FUTURE_WRITE_VALUE;
static const cw_future_kind k_event = CW_FUTURE_EVENT;

static cw_future_kind kind_of(void **state) { return *(const cw_future_kind *)*state; }

/* ---- rearm after a fault (issue 38, defect 12) ---------------------------- */

/* future.h: cw_future_rearm returns CW_ERROR_DEVICE_FAULT when the context
 * faulted before the previous marker. Asked twice: before anything has
 * seen the fault, and after a wait reported it. On the old code HOST_FUNC
 * and WRITE_VALUE futures answered CW_ERROR_INVALID_STATE ("the previous
 * marker has not completed": the marker never runs after a fault). */
static void test_future_rearm_after_fault(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    cw_future *f = NULL;
    fk.fault(1);
    assert_cw_ok(cw_future_create(&f, s, kind));
    assert_true(fk.drain(5000));
    const cw_status first = cw_future_rearm(f, s);
    char detail1[300];
    snprintf(detail1, sizeof detail1, "%s", cw_last_error()->message);
    const cw_status waited = cw_future_wait(f, 1000000);
    const cw_status second = cw_future_rearm(f, s);
    char detail2[300];
    snprintf(detail2, sizeof detail2, "%s", cw_last_error()->message);
    if (kind == CW_FUTURE_HOST_FUNC) {
        if (g_kept_count < 64) g_kept[g_kept_count++] = f;
        g_known_leak = 1;
    }
    cw_future_destroy(&f);
    fk.fault(0);
    cw_stream_destroy(&s);
    assert_int_equal(waited, CW_ERROR_DEVICE_FAULT);
    if (first != CW_ERROR_DEVICE_FAULT || second != CW_ERROR_DEVICE_FAULT)
        fail_msg("%s: cw_future_rearm after a fault returned %s (%s) before anything had seen it and %s (%s) after "
                 "a wait reported it, expected CW_ERROR_DEVICE_FAULT both times",
                 kind_name(kind), cw_status_name(first), detail1, cw_status_name(second), detail2);
}

/* ---- main ------------------------------------------------------------------- */

#define TEST_K(fn, kind) {#fn "(" #kind ")", fn, setup_ctx, teardown_ctx, (void *)&kind}


int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    if (access(argv[1], R_OK) != 0) {
        printf("FAIL: the fake driver %s is not readable\n", argv[1]);
        return 1;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    unsetenv("CUWEAVE_SERIALIZE");
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: cuweave could not load the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!load_fake(argv[1])) {
        printf("FAIL: %s lacks the fake driver's control API: %s\n", argv[1], dlerror());
        return 1;
    }
    pthread_t dog;
    if (pthread_create(&dog, NULL, dog_main, NULL) != 0) return 1;
    pthread_detach(dog);
    const struct CMUnitTest tests[] = {
        TEST_K(test_future_rearm_after_fault, k_write),
        TEST_K(test_future_rearm_after_fault, k_event),
        TEST_K(test_future_rearm_after_fault, k_host),
    };
    /* CWT_FILTER=pattern runs only the matching tests (cmocka's filter) */
    cwt_filter_from_env();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
