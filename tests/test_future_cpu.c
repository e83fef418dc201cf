/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the futures' callbacks, rearm and destroy against a fake
 * CUDA driver (tests/fake_cuda.c, built into a shared library whose path is
 * argv[1]; cuweave opens it through CUWEAVE_LIBCUDA). Exits 77 (skip) when
 * argv[1] is missing. The other futures tests are in test_stream_cpu.c.
 *
 * What a callback may do (cuweave/future.h, cw_future_fn), for every kind:
 * the orderings test runs each call a user may make inside a callback
 * (destroy another future of the same watcher pass, destroy its own, rearm
 * its own or another, set the callback of another, get fds) and counts
 * every callback: exactly once per completion, none lost, none twice, and
 * nothing hangs. A watchdog thread ends the program (exit 1, naming the test
 * and the step) when a test is still running after 10 s, so that a deadlock
 * fails CI instead of holding it.
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
#include <sys/eventfd.h>
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
    cwi_future_unwatch_hook(NULL, NULL);
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

static CUstream handle_of(const cw_stream *s) {
    cw_stream_info i;
    assert_cw_ok(cw_stream_get_info(s, &i));
    return i.handle;
}

/* Mapped pinned words a stream can wait on (cuStreamWaitValue32); the work
 * queued after such a wait (on any stream: the fake runs all work in one
 * queue, in order) waits until the test sets the word to 1. */
static volatile uint32_t *gate_new(void) {
    volatile uint32_t *gate = NULL;
    assert_cu_ok(fk.cuCtxSetCurrent(g_primary));
    assert_cu_ok(fk.cuMemHostAlloc((void **)&gate, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    assert_cu_ok(fk.cuCtxSetCurrent(NULL));
    return gate;
}

static void gate_close(cw_stream *s, volatile uint32_t *gate) {
    assert_cu_ok(fk.cuStreamWaitValue32(handle_of(s), (CUdeviceptr)(uintptr_t)gate, 1, CU_STREAM_WAIT_VALUE_EQ));
}

static void gate_open(volatile uint32_t *gate) { __atomic_store_n(gate, 1, __ATOMIC_RELEASE); }

static void gate_free(volatile uint32_t *gate) {
    assert_cu_ok(fk.cuCtxSetCurrent(g_primary));
    assert_cu_ok(fk.cuMemFreeHost((void *)gate));
    assert_cu_ok(fk.cuCtxSetCurrent(NULL));
}

static const char *kind_name(cw_future_kind k) {
    return k == CW_FUTURE_HOST_FUNC ? "HOST_FUNC" : k == CW_FUTURE_WRITE_VALUE ? "WRITE_VALUE" : "EVENT";
}

static const cw_future_kind k_host = CW_FUTURE_HOST_FUNC;
static const cw_future_kind k_write = CW_FUTURE_WRITE_VALUE;
static const cw_future_kind k_event = CW_FUTURE_EVENT;

static cw_future_kind kind_of(void **state) { return *(const cw_future_kind *)*state; }

/* Waits (at most ms) until *v >= n. */
static int wait_at_least(atomic_int *v, int n, int ms) {
    for (double end = now_ms() + ms; atomic_load(v) < n && now_ms() < end;) sleep_ms(1);
    return atomic_load(v) >= n;
}

static int fd_readable(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    return fd >= 0 && poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Log messages by level (the log callback may run on any thread). */
static atomic_int g_log_levels[4];
static void count_levels(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if ((int)level >= 0 && (int)level < 4) atomic_fetch_add(&g_log_levels[level], 1);
}

/* ---- destroy delivers what completed (issue 38, defect 4) ---------------- */

struct counter {
    atomic_int calls;
    atomic_int status;
};

static void count_cb(void *user, cw_future *f, cw_status st) {
    (void)f;
    struct counter *c = (struct counter *)user;
    atomic_store(&c->status, st);
    atomic_fetch_add(&c->calls, 1);
}

static void *release_after_5ms(void *arg) {
    (void)arg;
    sleep_ms(5);
    fk.hold(0);
    return NULL;
}

/* cw_future_set_callback promises the callback exactly once per completion.
 * A future destroyed after its completion (here: right after a wait said
 * so) must have had its callback run by the time cw_future_destroy returns,
 * whichever thread got to it: 200 cycles, each checked as destroy returns.
 * Then 20 cycles where destroy itself waits for the marker (released by a
 * helper thread 5 ms in). On the old code the watcher's callback was simply
 * dropped when destroy came first: HOST_FUNC 200/200, WRITE_VALUE and EVENT
 * a few of 200. */
static void test_future_destroy_delivers_callback(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    struct counter c;
    memset(&c, 0, sizeof c);
    int before_return = 0, total_expected = 0;
    dog_step("200 cycles: wait, then destroy");
    for (int i = 0; i < 200; i++) {
        cw_future *f = NULL;
        fk.hold(1);
        assert_cw_ok(cw_future_create(&f, s, kind));
        assert_cw_ok(cw_future_set_callback(f, count_cb, &c));
        fk.hold(0);
        assert_cw_ok(cw_future_wait(f, 5000000));
        cw_future_destroy(&f);
        total_expected++;
        if (atomic_load(&c.calls) == total_expected) before_return++;
        else atomic_store(&c.calls, total_expected); /* count each cycle on its own */
    }
    dog_step("20 cycles: destroy waits for the marker");
    int waited_before_return = 0;
    for (int i = 0; i < 20; i++) {
        cw_future *f = NULL;
        fk.hold(1);
        assert_cw_ok(cw_future_create(&f, s, kind));
        assert_cw_ok(cw_future_set_callback(f, count_cb, &c));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, release_after_5ms, NULL), 0);
        cw_future_destroy(&f);
        assert_int_equal(pthread_join(t, NULL), 0);
        total_expected++;
        if (atomic_load(&c.calls) == total_expected) waited_before_return++;
        else atomic_store(&c.calls, total_expected);
    }
    sleep_ms(30); /* a late second call would show now */
    const int total = atomic_load(&c.calls);
    assert_true(fk.drain(5000));
    cw_stream_destroy(&s);
    printf("# %s: callback ran before destroy returned in %d/200 cycles after a wait, %d/20 where destroy "
           "waited\n",
           kind_name(kind), before_return, waited_before_return);
    if (before_return != 200 || waited_before_return != 20)
        fail_msg("%s: cw_future_destroy returned before the callback of a completed future ran (%d/200 after a "
                 "wait, %d/20 where destroy waited for the marker): the callback was lost",
                 kind_name(kind), before_return, waited_before_return);
    if (total != total_expected)
        fail_msg("%s: %d callbacks for %d completions", kind_name(kind), total, total_expected);
    assert_int_equal(atomic_load(&c.status), CW_SUCCESS);
}

/* After a device fault the callback reports it, once, by the time
 * cw_future_destroy returns, for every kind (the watcher reports a fault
 * within about a millisecond; destroy coming first must not drop it). */
static void test_future_destroy_delivers_fault(void **state) {
    const cw_future_kind kind = kind_of(state);
    cw_stream *s = new_stream();
    int before_return = 0;
    struct counter c[20];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 20; i++) {
        cw_future *f = NULL;
        fk.fault(1);
        assert_cw_ok(cw_future_create(&f, s, kind));
        atomic_store(&c[i].status, CW_SUCCESS);
        assert_cw_ok(cw_future_set_callback(f, count_cb, &c[i]));
        if (kind == CW_FUTURE_HOST_FUNC) {
            /* documented: its memory (and context reference) stays behind */
            if (g_kept_count < 64) g_kept[g_kept_count++] = f;
            g_known_leak = 1;
        }
        cw_future_destroy(&f);
        if (atomic_load(&c[i].calls) == 1) before_return++;
        assert_true(fk.drain(5000)); /* nothing of it left to run once the fault is cleared */
        fk.fault(0);
    }
    sleep_ms(30);
    cw_stream_destroy(&s);
    printf("# %s: fault reported to the callback before destroy returned in %d/20 cycles\n", kind_name(kind),
           before_return);
    if (before_return != 20)
        fail_msg("%s: cw_future_destroy after a fault returned before the callback ran (%d/20)", kind_name(kind),
                 before_return);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(atomic_load(&c[i].calls), 1);
        assert_int_equal(atomic_load(&c[i].status), CW_ERROR_DEVICE_FAULT);
    }
}

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

/* ---- calls made inside a callback (issue 38, defect 3 and the matrix) ---- */

/* The scene: on one stream, X, then a gate, then A and B (and, for some
 * calls, a second gate and C), all of one kind. For WRITE_VALUE and EVENT
 * the watcher's ready hook opens the first gate only after the pass that
 * found X complete, and returns once A and B have completed: the watcher's
 * next pass finds A and B complete together (one pass). For HOST_FUNC the
 * test opens the gate, and A's callback runs on the driver's callback
 * thread before B's marker has run. The first of A and B whose callback
 * runs (the actor) makes the call under test on itself or on the other (the
 * target). */
enum action {
    ACT_DESTROY_OTHER,      /* destroy the target (it has a callback) */
    ACT_DESTROY_OTHER_FD,   /* destroy B (it has only an fd) */
    ACT_DESTROY_OWN,        /* destroy the actor */
    ACT_REARM_OWN,          /* rearm the actor (held), set its callback again */
    ACT_REARM_OTHER,        /* rearm the target, set its callback again */
    ACT_SET_CALLBACK_OTHER, /* set the callbacks of B (fd only, complete) and C (not complete) */
    ACT_GET_FD              /* get the fds of the actor, the target and C; set the actor's callback again */
};

static const char *const k_action_names[] = {"destroy another", "destroy another (fd only)", "destroy its own",
                                             "rearm its own",   "rearm another",             "set_callback of others",
                                             "get_fd"};

struct cell {
    enum action act;
    cw_future_kind kind;
};

enum { IA, IB, IC, IX, NF };

struct scene;
struct party {
    struct scene *sc;
    int idx;
};

struct scene {
    enum action act;
    cw_future_kind kind;
    cw_stream *s;
    volatile uint32_t *gate, *gate2;
    cw_future *f[NF];
    struct party p[NF];
    atomic_int calls[NF]; /* callbacks of the first arming */
    atomic_int again[NF]; /* callbacks of the arming after a rearm */
    atomic_int status[NF];
    atomic_int hooked; /* the ready hook opened the gate with A and B complete */
    atomic_int claimed;
    atomic_int acted; /* the actor's callback returned */
    /* what the actor saw (read after `acted`) */
    int actor, target;
    cw_status r1, r2, r3;
    int target_calls_at_return, again_at_return, pointer_null;
    cw_future *destroyed;  /* a copy of the handle the actor destroyed */
    cw_status stale;       /* cw_future_poll of that copy, right after the destroy */
    int fd_own, fd_other, fd_c;
    int own_ready, other_ready, c_ready;
};

static void again_cb(void *user, cw_future *f, cw_status st) {
    (void)f;
    struct party *p = (struct party *)user;
    atomic_store(&p->sc->status[p->idx], st);
    atomic_fetch_add(&p->sc->again[p->idx], 1);
}

static void act(struct scene *sc, int me, cw_future *f) {
    const int other = me == IA ? IB : IA;
    sc->actor = me;
    sc->target = other;
    switch (sc->act) {
    case ACT_DESTROY_OTHER:
    case ACT_DESTROY_OTHER_FD:
        sc->destroyed = sc->f[other];
        cw_future_destroy(&sc->f[other]);
        sc->pointer_null = sc->f[other] == NULL;
        sc->target_calls_at_return = atomic_load(&sc->calls[other]);
        sc->stale = cw_future_poll(sc->destroyed);
        break;
    case ACT_DESTROY_OWN:
        sc->destroyed = sc->f[me];
        cw_future_destroy(&sc->f[me]);
        sc->pointer_null = sc->f[me] == NULL;
        sc->stale = cw_future_poll(sc->destroyed); /* freed only once this callback returns */
        break;
    case ACT_REARM_OWN:
        fk.hold(1); /* the new marker waits until the test releases it */
        sc->r1 = cw_future_rearm(f, sc->s);
        sc->r2 = cw_future_set_callback(f, again_cb, &sc->p[me]);
        sc->again_at_return = atomic_load(&sc->again[me]);
        break;
    case ACT_REARM_OTHER:
        sc->r1 = cw_future_rearm(sc->f[other], sc->s);
        sc->target_calls_at_return = atomic_load(&sc->calls[other]);
        sc->r2 = sc->r1 == CW_SUCCESS ? cw_future_set_callback(sc->f[other], again_cb, &sc->p[other]) : sc->r1;
        sc->again_at_return = atomic_load(&sc->again[other]);
        break;
    case ACT_SET_CALLBACK_OTHER:
        sc->r1 = cw_future_set_callback(sc->f[IB], again_cb, &sc->p[IB]);
        sc->again_at_return = atomic_load(&sc->again[IB]);
        sc->r2 = cw_future_set_callback(sc->f[IC], again_cb, &sc->p[IC]);
        break;
    case ACT_GET_FD:
        sc->r1 = cw_future_get_fd(f, &sc->fd_own);
        sc->own_ready = fd_readable(sc->fd_own, 0);
        sc->r2 = cw_future_get_fd(sc->f[other], &sc->fd_other);
        sc->other_ready = fd_readable(sc->fd_other, 0);
        sc->r3 = cw_future_get_fd(sc->f[IC], &sc->fd_c);
        sc->c_ready = fd_readable(sc->fd_c, 0);
        /* its own callback once more: it has one (it is running) */
        if (cw_future_set_callback(f, again_cb, &sc->p[me]) != CW_ERROR_INVALID_STATE) sc->r3 = CW_ERROR_INTERNAL;
        break;
    }
}

static void party_cb(void *user, cw_future *f, cw_status st) {
    struct party *p = (struct party *)user;
    struct scene *sc = p->sc;
    atomic_store(&sc->status[p->idx], st);
    const int first = (p->idx == IA || p->idx == IB) && atomic_exchange(&sc->claimed, 1) == 0;
    atomic_fetch_add(&sc->calls[p->idx], 1);
    if (!first) return;
    act(sc, p->idx, f);
    atomic_store(&sc->acted, 1);
}

/* The watcher's ready hook: after the pass that found X complete (the first
 * gate holds A and B), opens the gate and waits until A and B completed. */
static void scene_ready_hook(void *arg) {
    struct scene *sc = (struct scene *)arg;
    if (atomic_load(&sc->hooked)) return;
    gate_open(sc->gate);
    for (double end = now_ms() + 5000; now_ms() < end;) {
        if (cw_future_poll(sc->f[IA]) == CW_SUCCESS && cw_future_poll(sc->f[IB]) == CW_SUCCESS) break;
        sleep_ms(1);
    }
    atomic_store(&sc->hooked, 1);
}

static int action_has_c(enum action a) { return a == ACT_SET_CALLBACK_OTHER || a == ACT_GET_FD; }
static int b_fd_only(enum action a) { return a == ACT_DESTROY_OTHER_FD || a == ACT_SET_CALLBACK_OTHER; }

static void test_future_in_callback(void **state) {
    const struct cell *cell = (const struct cell *)*state;
    const cw_future_kind kind = cell->kind;
    const int watcher = kind != CW_FUTURE_HOST_FUNC;
    const char *an = k_action_names[cell->act], *kn = kind_name(kind);
    static struct scene sc; /* static: callbacks may still read it if a test fails */
    memset(&sc, 0, sizeof sc);
    sc.act = cell->act;
    sc.kind = kind;
    sc.fd_own = sc.fd_other = sc.fd_c = -1;
    sc.actor = sc.target = -1;
    for (int i = 0; i < NF; i++) {
        sc.p[i].sc = &sc;
        sc.p[i].idx = i;
    }
    for (int i = 0; i < 4; i++) atomic_store(&g_log_levels[i], 0);
    assert_cw_ok(cw_log_set_callback(count_levels, NULL, CW_LOG_WARNING));
    sc.s = new_stream();
    sc.gate = gate_new();
    sc.gate2 = gate_new();
    fk.hold(1);
    assert_cw_ok(cw_future_create(&sc.f[IX], sc.s, kind));
    gate_close(sc.s, sc.gate);
    assert_cw_ok(cw_future_create(&sc.f[IA], sc.s, kind));
    assert_cw_ok(cw_future_create(&sc.f[IB], sc.s, kind));
    if (action_has_c(cell->act)) {
        gate_close(sc.s, sc.gate2);
        assert_cw_ok(cw_future_create(&sc.f[IC], sc.s, kind));
    }
    assert_cw_ok(cw_future_set_callback(sc.f[IX], party_cb, &sc.p[IX]));
    assert_cw_ok(cw_future_set_callback(sc.f[IA], party_cb, &sc.p[IA]));
    int fd_b = -1;
    if (b_fd_only(cell->act))
        assert_cw_ok(cw_future_get_fd(sc.f[IB], &fd_b)); /* watched, with no callback */
    else
        assert_cw_ok(cw_future_set_callback(sc.f[IB], party_cb, &sc.p[IB]));
    if (watcher) cwi_future_watch_hooks(scene_ready_hook, NULL, &sc);
    fk.hold(0);
    if (!watcher) gate_open(sc.gate);
    dog_step("waiting for the actor's callback to return");
    const int acted = wait_at_least(&sc.acted, 1, 5000);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    if (!acted)
        fail_msg("%s, %s in a callback: the callback never returned (hooked %d, A %d, B %d callbacks): the call "
                 "hangs",
                 kn, an, atomic_load(&sc.hooked), atomic_load(&sc.calls[IA]), atomic_load(&sc.calls[IB]));
    if (watcher && !atomic_load(&sc.hooked)) fail_msg("the ready hook never ran");
    const int me = sc.actor, other = sc.target;
    dog_step("after the actor: releasing the rest");
    fk.hold(0);
    gate_open(sc.gate2);
    dog_step("waiting for the remaining callbacks");
    /* every callback that must come, then a while for one that must not */
    assert_true(wait_at_least(&sc.calls[IX], 1, 5000));
    if (!(b_fd_only(cell->act))) assert_true(wait_at_least(&sc.calls[other], 1, 5000));
    assert_true(fk.drain(5000));
    if (watcher && cell->act == ACT_REARM_OWN) assert_true(wait_at_least(&sc.again[me], 1, 5000));
    if (watcher && cell->act == ACT_REARM_OTHER) assert_true(wait_at_least(&sc.again[other], 1, 5000));
    if (cell->act == ACT_SET_CALLBACK_OTHER) {
        assert_true(wait_at_least(&sc.again[IB], 1, 5000));
        assert_true(wait_at_least(&sc.again[IC], 1, 5000));
    }
    /* a future destroyed in a callback is gone once the callback returned (a
     * stale copy of its handle is refused) */
    cw_status stale_late = CW_SUCCESS;
    if (sc.destroyed && watcher) {
        for (double end = now_ms() + 5000; now_ms() < end; sleep_ms(1))
            if ((stale_late = cw_future_poll(sc.destroyed)) == CW_ERROR_INVALID_HANDLE) break;
    }
    sleep_ms(30);
    const int calls_me = atomic_load(&sc.calls[me]), calls_other = atomic_load(&sc.calls[other]);
    const int again_me = atomic_load(&sc.again[me]), again_other = atomic_load(&sc.again[other]);
    const int again_c = atomic_load(&sc.again[IC]);
    const int warnings = atomic_load(&g_log_levels[CW_LOG_WARNING]);
    const int own_ready_late = fd_readable(sc.fd_own, 1000), other_ready_late = fd_readable(sc.fd_other, 1000);
    const int c_ready_late = fd_readable(sc.fd_c, 1000);
    dog_step("destroying what is left");
    for (int i = 0; i < NF; i++) cw_future_destroy(&sc.f[i]);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_true(fk.drain(5000));
    gate_free(sc.gate);
    gate_free(sc.gate2);
    cw_stream_destroy(&sc.s);
    printf("# %s, %s: actor %c, calls %d/%d, again %d/%d, r %s/%s/%s, target at return %d, warnings %d\n", kn, an,
           "ABCX"[me], calls_me, calls_other, again_me, again_other, cw_status_name(sc.r1), cw_status_name(sc.r2),
           cw_status_name(sc.r3), sc.target_calls_at_return, warnings);

    assert_int_equal(atomic_load(&sc.calls[IX]), 1);
    assert_int_equal(calls_me, 1);
    if (b_fd_only(cell->act)) {
        assert_int_equal(me, IA);
        assert_int_equal(calls_other, 0);
    } else {
        assert_int_equal(calls_other, 1); /* never lost, never twice */
    }
    for (int i = 0; i < NF; i++) assert_int_equal(atomic_load(&sc.status[i]), CW_SUCCESS);
    switch (cell->act) {
    case ACT_DESTROY_OTHER:
    case ACT_DESTROY_OTHER_FD:
    case ACT_DESTROY_OWN:
        if (watcher) {
            assert_true(sc.pointer_null);
            /* the target's completion was delivered before destroy returned */
            if (cell->act == ACT_DESTROY_OTHER) assert_int_equal(sc.target_calls_at_return, 1);
            /* another: gone when destroy returns; its own: when the callback returns */
            assert_int_equal(sc.stale, cell->act == ACT_DESTROY_OWN ? CW_SUCCESS : CW_ERROR_INVALID_HANDLE);
            assert_int_equal(stale_late, CW_ERROR_INVALID_HANDLE);
            assert_int_equal(warnings, 0);
        } else {
            /* refused on the driver's callback thread: the handle is left, a warning says why */
            assert_false(sc.pointer_null);
            assert_int_not_equal(sc.stale, CW_ERROR_INVALID_HANDLE);
            assert_int_equal(warnings, 1);
        }
        break;
    case ACT_REARM_OWN:
        if (watcher) {
            assert_int_equal(sc.r1, CW_SUCCESS);
            assert_int_equal(sc.r2, CW_SUCCESS);
            assert_int_equal(sc.again_at_return, 0); /* held: not complete yet */
            assert_int_equal(again_me, 1);           /* the second completion, once */
        } else {
            assert_int_equal(sc.r1, CW_ERROR_NOT_PERMITTED);
            assert_int_equal(sc.r2, CW_ERROR_INVALID_STATE);
            assert_int_equal(again_me, 0);
        }
        break;
    case ACT_REARM_OTHER:
        if (watcher) {
            assert_int_equal(sc.r1, CW_SUCCESS);
            assert_int_equal(sc.target_calls_at_return, 1); /* its first completion, before the rearm */
            assert_int_equal(sc.r2, CW_SUCCESS);
            assert_int_equal(sc.again_at_return, 1); /* complete at once: run then */
            assert_int_equal(again_other, 1);
        } else {
            assert_int_equal(sc.r1, CW_ERROR_NOT_PERMITTED);
            assert_int_equal(again_other, 0);
        }
        break;
    case ACT_SET_CALLBACK_OTHER:
        assert_int_equal(sc.r1, CW_SUCCESS);
        assert_int_equal(sc.r2, CW_SUCCESS);
        /* B: complete in the watcher's pass (run at once); behind A on the driver's thread */
        assert_int_equal(sc.again_at_return, watcher ? 1 : 0);
        assert_int_equal(atomic_load(&sc.again[IB]), 1);
        assert_int_equal(again_c, 1);
        break;
    case ACT_GET_FD:
        assert_int_equal(sc.r1, CW_SUCCESS);
        assert_int_equal(sc.r2, CW_SUCCESS);
        assert_int_equal(sc.r3, CW_SUCCESS);
        assert_true(sc.own_ready);
        assert_int_equal(sc.other_ready, watcher); /* the target: complete only in the watcher's pass */
        assert_false(sc.c_ready);                  /* C is behind the second gate */
        assert_true(own_ready_late);
        assert_true(other_ready_late);
        assert_true(c_ready_late);
        assert_int_equal(again_me, 0);
        break;
    }
}

/* Callbacks that cw_future_destroy and cw_future_rearm run themselves (the
 * watcher had not got to them: here it is held in its ready hook, on X's
 * pass, while A, B, D and E complete behind a gate). destroy(A) runs A's
 * callback on the destroying thread before it returns; there, a rearm of A
 * is refused (A is being destroyed) and a destroy of B runs B's callback
 * first. rearm(D) runs D's callback, which destroys D: the rearm says so and
 * D is gone. rearm(E) runs E's callback, which rearms E: the rearm succeeds
 * and E completes once more. Every callback runs exactly once. */
struct by_call {
    cw_stream *s;
    volatile uint32_t *gate;
    cw_future *a, *b, *d, *e, *x;
    atomic_int calls_a, calls_b, calls_d, calls_e, calls_x;
    atomic_int paused, release;
    cw_status a_rearm, e_rearm;
    int b_at_return;
    pthread_t a_thread;
};

static void by_call_hook(void *arg) {
    struct by_call *c = (struct by_call *)arg;
    if (atomic_exchange(&c->paused, 1)) return;
    for (double end = now_ms() + 5000; !atomic_load(&c->release) && now_ms() < end;) sleep_ms(1);
}

static void by_call_a(void *user, cw_future *f, cw_status st) {
    (void)st;
    struct by_call *c = (struct by_call *)user;
    c->a_thread = pthread_self();
    c->a_rearm = cw_future_rearm(f, c->s);
    cw_future_destroy(&c->b);
    c->b_at_return = atomic_load(&c->calls_b);
    atomic_fetch_add(&c->calls_a, 1);
}

static void by_call_b(void *user, cw_future *f, cw_status st) {
    (void)f;
    (void)st;
    atomic_fetch_add(&((struct by_call *)user)->calls_b, 1);
}

static void by_call_d(void *user, cw_future *f, cw_status st) {
    (void)st;
    cw_future *me = f;
    cw_future_destroy(&me);
    atomic_fetch_add(&((struct by_call *)user)->calls_d, 1);
}

static void by_call_e(void *user, cw_future *f, cw_status st) {
    (void)st;
    struct by_call *c = (struct by_call *)user;
    c->e_rearm = cw_future_rearm(f, c->s);
    atomic_fetch_add(&c->calls_e, 1);
}

static void by_call_x(void *user, cw_future *f, cw_status st) {
    (void)f;
    (void)st;
    atomic_fetch_add(&((struct by_call *)user)->calls_x, 1);
}

static void test_future_callback_run_by_destroy_and_rearm(void **state) {
    const cw_future_kind kind = kind_of(state);
    static struct by_call c;
    memset(&c, 0, sizeof c);
    c.s = new_stream();
    c.gate = gate_new();
    fk.hold(1);
    assert_cw_ok(cw_future_create(&c.x, c.s, kind));
    gate_close(c.s, c.gate);
    assert_cw_ok(cw_future_create(&c.a, c.s, kind));
    assert_cw_ok(cw_future_create(&c.b, c.s, kind));
    assert_cw_ok(cw_future_create(&c.d, c.s, kind));
    assert_cw_ok(cw_future_create(&c.e, c.s, kind));
    assert_cw_ok(cw_future_set_callback(c.x, by_call_x, &c));
    assert_cw_ok(cw_future_set_callback(c.a, by_call_a, &c));
    assert_cw_ok(cw_future_set_callback(c.b, by_call_b, &c));
    assert_cw_ok(cw_future_set_callback(c.d, by_call_d, &c));
    assert_cw_ok(cw_future_set_callback(c.e, by_call_e, &c));
    cwi_future_watch_hooks(by_call_hook, NULL, &c);
    fk.hold(0);
    dog_step("waiting for the watcher to pause on X's pass");
    assert_true(wait_at_least(&c.paused, 1, 5000));
    gate_open(c.gate);
    assert_cw_ok(cw_future_wait(c.a, 5000000));
    assert_cw_ok(cw_future_wait(c.e, 5000000));
    assert_true(fk.drain(5000));
    dog_step("destroy(A), rearm(D), rearm(E) while the watcher is held");
    cw_future *d_copy = c.d;
    cw_future_destroy(&c.a);
    const int a_at_return = atomic_load(&c.calls_a);
    const cw_status d_rearm = cw_future_rearm(c.d, c.s);
    char d_detail[300];
    snprintf(d_detail, sizeof d_detail, "%s", cw_last_error()->message);
    const int d_at_return = atomic_load(&c.calls_d);
    const cw_status d_stale = cw_future_poll(d_copy);
    c.d = NULL;
    const cw_status e_rearm = cw_future_rearm(c.e, c.s);
    const int e_at_return = atomic_load(&c.calls_e);
    volatile unsigned *e_word = NULL;
    unsigned e_armed = 2; /* EVENT futures have no word: not judged */
    if (kind == CW_FUTURE_WRITE_VALUE) assert_int_equal(cwi_future_word(c.e, &e_word, &e_armed), 0);
    atomic_store(&c.release, 1);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    dog_step("after the release");
    assert_true(wait_at_least(&c.calls_x, 1, 5000));
    const cw_status e_again = cw_future_wait(c.e, 5000000);
    struct counter again;
    memset(&again, 0, sizeof again);
    const cw_status e_cb = cw_future_set_callback(c.e, count_cb, &again); /* complete: runs now */
    sleep_ms(30);
    cw_future_destroy(&c.x);
    cw_future_destroy(&c.e);
    assert_true(fk.drain(5000));
    gate_free(c.gate);
    cw_stream_destroy(&c.s);
    if (a_at_return != 1)
        fail_msg("%s: cw_future_destroy returned before the callback of A's completion ran", kind_name(kind));
    assert_true(pthread_equal(c.a_thread, pthread_self())); /* run by the destroy, on its thread */
    assert_int_equal(c.a_rearm, CW_ERROR_INVALID_STATE);      /* A is being destroyed */
    assert_null(c.b);
    assert_int_equal(c.b_at_return, 1); /* B's callback ran before its destroy (in A's) returned */
    if (d_rearm != CW_ERROR_INVALID_HANDLE)
        fail_msg("%s: rearm of a future whose pending callback destroyed it returned %s (%s)", kind_name(kind),
                 cw_status_name(d_rearm), d_detail);
    assert_int_equal(d_at_return, 1);
    assert_int_equal(d_stale, CW_ERROR_INVALID_HANDLE);
    assert_int_equal(e_rearm, CW_SUCCESS);
    assert_int_equal(c.e_rearm, CW_SUCCESS); /* E's callback, run by the rearm, rearmed it */
    assert_int_equal(e_at_return, 1);
    assert_int_equal(e_armed, 2); /* armed once more, by its callback, not twice */
    assert_int_equal(e_again, CW_SUCCESS);
    assert_int_equal(e_cb, CW_SUCCESS);
    assert_int_equal(atomic_load(&again.calls), 1);
    assert_int_equal(atomic_load(&c.calls_a), 1);
    assert_int_equal(atomic_load(&c.calls_b), 1);
    assert_int_equal(atomic_load(&c.calls_d), 1);
    assert_int_equal(atomic_load(&c.calls_e), 1);
    assert_int_equal(atomic_load(&c.calls_x), 1);
}


/* ---- review of the callback/destroy change (rev-futures) ------------------ */

/* A callback that cw_future_set_callback runs (the future was complete) may
 * destroy its own future, which is freed "once this callback returns"
 * (cw_future_fn). Here the future also has an fd, so the watcher has it on
 * its ready list at that moment: it notifies it (the fd; the callback is
 * already taken) while the callback runs on the test's thread. The watcher
 * must not free it then: it did not run the callback. On the old code it
 * read destroy_deferred (set by the other thread's callback) and destroyed
 * the future itself, while the callback still ran, and set_callback then
 * destroyed it a second time. The watcher is held in its ready hook until
 * the callback has destroyed the future; the callback then waits (at most
 * 300 ms, after the fd became readable) to see whether its handle dies under
 * it. */
struct own_destroy {
    cw_future *f;
    int fd;
    atomic_int paused, destroyed, calls;
    int fd_ready, retired_inside;
};

static void own_destroy_hook(void *arg) {
    struct own_destroy *o = (struct own_destroy *)arg;
    if (atomic_exchange(&o->paused, 1)) return;
    for (double end = now_ms() + 5000; !atomic_load(&o->destroyed) && now_ms() < end;) sleep_ms(1);
}

static void own_destroy_cb(void *user, cw_future *f, cw_status st) {
    (void)st;
    struct own_destroy *o = (struct own_destroy *)user;
    cw_future *me = f;
    cw_future_destroy(&me);
    atomic_store(&o->destroyed, 1);
    o->fd_ready = fd_readable(o->fd, 5000); /* the watcher notified it */
    for (double end = now_ms() + 300; now_ms() < end; sleep_ms(1))
        if (cw_future_poll(f) == CW_ERROR_INVALID_HANDLE) {
            o->retired_inside = 1;
            break;
        }
    atomic_fetch_add(&o->calls, 1);
}

static void test_future_set_callback_destroys_own_beside_watcher(void **state) {
    const cw_future_kind kind = kind_of(state);
    static struct own_destroy o;
    memset(&o, 0, sizeof o);
    o.fd = -1;
    cw_stream *s = new_stream();
    fk.hold(1);
    assert_cw_ok(cw_future_create(&o.f, s, kind));
    assert_cw_ok(cw_future_get_fd(o.f, &o.fd)); /* watched, with no callback */
    cwi_future_watch_hooks(own_destroy_hook, NULL, &o);
    fk.hold(0);
    dog_step("waiting for the watcher to find the future complete");
    assert_true(wait_at_least(&o.paused, 1, 5000));
    assert_cw_ok(cw_future_wait(o.f, 5000000));
    cw_future *copy = o.f;
    dog_step("set_callback on the complete future: its callback destroys it");
    const cw_status set = cw_future_set_callback(o.f, own_destroy_cb, &o);
    o.f = NULL;
    const cw_status stale = cw_future_poll(copy);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    sleep_ms(30);
    assert_true(fk.drain(5000));
    cw_stream_destroy(&s);
    printf("# %s: fd readable in the callback %d, handle dead before the callback returned %d\n", kind_name(kind),
           o.fd_ready, o.retired_inside);
    assert_int_equal(set, CW_SUCCESS);
    assert_int_equal(atomic_load(&o.calls), 1);
    if (o.retired_inside)
        fail_msg("%s: the watcher destroyed the future while its callback (run by cw_future_set_callback on another "
                 "thread) was still running; set_callback then destroyed it again",
                 kind_name(kind));
    assert_true(o.fd_ready);
    assert_int_equal(stale, CW_ERROR_INVALID_HANDLE); /* gone once set_callback returned */
}

/* The callback that cw_future_destroy runs after a device fault may get its
 * own future's fd (get_fd neither enqueues nor waits; the orderings test
 * gets the actor's own fd in its callback too).
 * The marker of a faulted WRITE_VALUE future never runs, so get_fd puts the
 * future on the watcher's list; destroy must take it off again before it
 * frees it. On the old code destroy took it off only before it ran the
 * callback: the watcher (held in its ready hook on X's pass while this
 * happens) then found a freed future on its list and wrote to its closed fd
 * (here reused by an eventfd the test makes right after the destroy: it
 * became readable), under ASan a use-after-poison in the watcher. */
struct fault_fd {
    atomic_int paused, release, calls;
    cw_status st, fd_st;
    int fd;
};

static void fault_fd_hook(void *arg) {
    struct fault_fd *o = (struct fault_fd *)arg;
    if (atomic_exchange(&o->paused, 1)) return;
    for (double end = now_ms() + 5000; !atomic_load(&o->release) && now_ms() < end;) sleep_ms(1);
}

static void fault_fd_cb(void *user, cw_future *f, cw_status st) {
    struct fault_fd *o = (struct fault_fd *)user;
    o->st = st;
    o->fd_st = cw_future_get_fd(f, &o->fd);
    atomic_fetch_add(&o->calls, 1);
}

static void test_future_destroy_fault_callback_gets_fd(void **state) {
    const cw_future_kind kind = kind_of(state);
    static struct fault_fd o;
    memset(&o, 0, sizeof o);
    o.fd = -1;
    cw_stream *s = new_stream();
    cw_future *x = NULL, *f = NULL;
    int xfd = -1;
    fk.hold(1);
    assert_cw_ok(cw_future_create(&x, s, kind));
    assert_cw_ok(cw_future_get_fd(x, &xfd));
    cwi_future_watch_hooks(fault_fd_hook, NULL, &o);
    fk.hold(0);
    dog_step("waiting for the watcher to pause on X's pass");
    assert_true(wait_at_least(&o.paused, 1, 5000));
    fk.fault(1);
    assert_cw_ok(cw_future_create(&f, s, kind)); /* its marker faults */
    assert_true(fk.drain(5000));
    assert_cw_ok(cw_future_set_callback(f, fault_fd_cb, &o));
    dog_step("destroy of the faulted future: its callback gets its fd");
    cw_future_destroy(&f);
    const int calls_at_return = atomic_load(&o.calls);
    const int probe = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* takes the lowest free number */
    atomic_store(&o.release, 1);
    dog_step("after the release");
    assert_true(fd_readable(xfd, 5000)); /* the watcher went on */
    const int probe_written = fd_readable(probe, 200);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    fk.fault(0);
    cw_future_destroy(&x);
    assert_true(fk.drain(5000));
    cw_stream_destroy(&s);
    close(probe);
    printf("# %s: the callback's fd %d, the probe %d written %d\n", kind_name(kind), o.fd, probe, probe_written);
    assert_null(f);
    assert_int_equal(calls_at_return, 1);
    assert_int_equal(o.st, CW_ERROR_DEVICE_FAULT);
    assert_int_equal(o.fd_st, CW_SUCCESS);
    if (probe_written)
        fail_msg("%s: after cw_future_destroy returned the watcher wrote to fd %d (the destroyed future's, now "
                 "another's): the future was still on its list",
                 kind_name(kind), probe);
}


/* cw_future_destroy from one thread while the watcher runs the future's
 * callback, which rearms it (the future has an fd: the rearm watches it
 * again): destroy waits for the callback and must then find the future on
 * the watcher's list (future_free: "it may have rearmed f before `dying` was
 * set: look again"). The windows, held open by the unwatch hook: the rearm
 * in the callback passed its `dying` check and stops in its own unwatch
 * until the destroying thread (its `dying` set, the old marker settled) has
 * read that the future is on no list; that thread then waits until the
 * callback has returned (the rearm put the future on the list, its new
 * marker behind a gate), until the watcher is parked in its ready hook on a
 * pass that found Y complete and the future not (Y, behind a gate of its
 * own, watched for its fd and let go meanwhile), and until the new marker
 * has run (its gate opened). Then it reads whether
 * the watcher is notifying the future. On the old code: not, the new marker
 * has run, no callback is set for it: destroy freed the future on the
 * watcher's list, and the watcher, let go, wrote to its closed fd (reused by
 * an eventfd the test makes); under ASan a use-after-poison in
 * watcher_main. */
struct destroy_rearm {
    cw_stream *s;
    volatile uint32_t *gate, *gate_y;
    cw_future *f, *y;
    int fd, yfd;
    pthread_t destroyer;
    atomic_int in_cb, past_dying, destroying, in_unwatch, cb_done, rearm_once, unwatch_once;
    atomic_int park_armed, parked, release;
    cw_status rearm, yfd_st;
};

static void destroy_rearm_park(void *arg) {
    struct destroy_rearm *r = (struct destroy_rearm *)arg;
    if (!atomic_load(&r->park_armed) || atomic_exchange(&r->parked, 1)) return;
    for (double end = now_ms() + 5000; !atomic_load(&r->release) && now_ms() < end;) sleep_ms(1);
}

static void destroy_rearm_unwatch(void *arg) {
    struct destroy_rearm *r = (struct destroy_rearm *)arg;
    if (pthread_equal(pthread_self(), r->destroyer)) {
        if (!atomic_load(&r->destroying) || atomic_exchange(&r->unwatch_once, 1)) return;
        atomic_store(&r->in_unwatch, 1); /* it read: on no list */
        for (double end = now_ms() + 5000; !atomic_load(&r->cb_done) && now_ms() < end;) sleep_ms(1);
        sleep_ms(20); /* the watcher ends the notification as the callback returns */
        atomic_store(&r->park_armed, 1);
        r->yfd_st = cw_future_get_fd(r->y, &r->yfd); /* watched, behind its gate */
        gate_open(r->gate_y); /* the watcher's next pass finds Y complete, the future not */
        for (double end = now_ms() + 5000; !atomic_load(&r->parked) && now_ms() < end;) sleep_ms(1);
        gate_open(r->gate);
        (void)fk.drain(5000); /* the rearmed marker has run */
        return;
    }
    /* the rearm in the callback, past its `dying` check */
    if (!atomic_load(&r->in_cb) || atomic_exchange(&r->rearm_once, 1)) return;
    atomic_store(&r->past_dying, 1);
    for (double end = now_ms() + 5000; !atomic_load(&r->in_unwatch) && now_ms() < end;) sleep_ms(1);
}

static void destroy_rearm_cb(void *user, cw_future *f, cw_status st) {
    (void)st;
    struct destroy_rearm *r = (struct destroy_rearm *)user;
    gate_close(r->s, r->gate); /* the rearmed marker waits behind it */
    atomic_store(&r->in_cb, 1);
    r->rearm = cw_future_rearm(f, r->s);
    atomic_store(&r->cb_done, 1);
}

static void test_future_destroy_beside_callback_rearm(void **state) {
    const cw_future_kind kind = kind_of(state);
    static struct destroy_rearm r;
    memset(&r, 0, sizeof r);
    r.fd = r.yfd = -1;
    r.destroyer = pthread_self();
    r.s = new_stream();
    r.gate = gate_new();
    r.gate_y = gate_new();
    fk.hold(1);
    assert_cw_ok(cw_future_create(&r.f, r.s, kind));
    gate_close(r.s, r.gate_y);
    assert_cw_ok(cw_future_create(&r.y, r.s, kind)); /* behind gate_y, not watched yet */
    assert_cw_ok(cw_future_get_fd(r.f, &r.fd));
    assert_cw_ok(cw_future_set_callback(r.f, destroy_rearm_cb, &r));
    cwi_future_watch_hooks(destroy_rearm_park, NULL, &r);
    cwi_future_unwatch_hook(destroy_rearm_unwatch, &r);
    fk.hold(0);
    dog_step("waiting for the callback's rearm to pass its dying check");
    assert_true(wait_at_least(&r.past_dying, 1, 5000));
    atomic_store(&r.destroying, 1);
    dog_step("destroy while the watcher runs the callback");
    cw_future_destroy(&r.f);
    const int probe = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* the lowest free number */
    atomic_store(&r.release, 1);
    dog_step("after the release");
    const int y_ready = fd_readable(r.yfd, 5000); /* the watcher went on */
    const int probe_written = fd_readable(probe, 200);
    cwi_future_unwatch_hook(NULL, NULL);
    cwi_future_watch_hooks(NULL, NULL, NULL);
    cw_future_destroy(&r.y);
    assert_true(fk.drain(5000));
    gate_free(r.gate);
    gate_free(r.gate_y);
    cw_stream_destroy(&r.s);
    close(probe);
    printf("# %s: rearm in the callback %s, the future's fd %d, the probe %d written %d\n", kind_name(kind),
           cw_status_name(r.rearm), r.fd, probe, probe_written);
    assert_null(r.f);
    assert_true(atomic_load(&r.cb_done));
    assert_true(atomic_load(&r.unwatch_once)); /* the windows were held */
    assert_true(atomic_load(&r.parked));
    assert_int_equal(r.yfd_st, CW_SUCCESS);
    assert_true(y_ready);
    assert_int_equal(r.rearm, CW_SUCCESS); /* it came before the destroy */
    if (probe_written)
        fail_msg("%s: after cw_future_destroy returned the watcher wrote to fd %d (the destroyed future's, now "
                 "another's): the future its callback had rearmed was still on its list",
                 kind_name(kind), probe);
}

/* cw_future_set_callback on a future that the watcher has on its list (it
 * has an fd) and that completes while the call runs: the callback may run on
 * the watcher as soon as the call has published it, and may destroy its own
 * future; the call must not touch the future after that. Here the entry
 * hook (the call's watch, which comes after it published the callback on
 * the old code) lets the marker run and waits (500 ms) to see whether
 * the future dies meanwhile. On the old code: the watcher ran the callback,
 * which destroyed the future, and freed it there; set_callback then went on
 * to watch the freed future (under ASan a use-after-poison in future_watch,
 * called from future_set_callback). */
struct set_race {
    cw_future *f;
    pthread_t setter;
    atomic_int in_set, hooked, calls;
    int freed_inside;
    pthread_t cb_thread;
};

static void set_race_entry(void *arg) {
    struct set_race *r = (struct set_race *)arg;
    if (!atomic_load(&r->in_set) || !pthread_equal(pthread_self(), r->setter) || atomic_exchange(&r->hooked, 1))
        return;
    cw_future *copy = r->f;
    fk.hold(0); /* the marker runs now */
    for (double end = now_ms() + 500; now_ms() < end; sleep_ms(1))
        if (cw_future_poll(copy) == CW_ERROR_INVALID_HANDLE) {
            r->freed_inside = 1;
            break;
        }
}

static void set_race_cb(void *user, cw_future *f, cw_status st) {
    (void)st;
    struct set_race *r = (struct set_race *)user;
    r->cb_thread = pthread_self();
    cw_future *me = f;
    cw_future_destroy(&me);
    atomic_fetch_add(&r->calls, 1);
}

static void test_future_set_callback_races_watcher_destroy(void **state) {
    const cw_future_kind kind = kind_of(state);
    static struct set_race r;
    memset(&r, 0, sizeof r);
    r.setter = pthread_self();
    cw_stream *s = new_stream();
    int fd = -1;
    fk.hold(1);
    assert_cw_ok(cw_future_create(&r.f, s, kind));
    assert_cw_ok(cw_future_get_fd(r.f, &fd)); /* on the watcher's list */
    cw_future *copy = r.f;
    cwi_future_watch_hooks(NULL, set_race_entry, &r);
    atomic_store(&r.in_set, 1);
    dog_step("set_callback while the marker runs");
    const cw_status set = cw_future_set_callback(r.f, set_race_cb, &r);
    atomic_store(&r.in_set, 0);
    r.f = NULL;
    cwi_future_watch_hooks(NULL, NULL, NULL);
    fk.hold(0);
    assert_true(wait_at_least(&r.calls, 1, 5000));
    cw_status stale = CW_SUCCESS;
    for (double end = now_ms() + 5000; now_ms() < end; sleep_ms(1))
        if ((stale = cw_future_poll(copy)) == CW_ERROR_INVALID_HANDLE) break;
    sleep_ms(30);
    assert_true(fk.drain(5000));
    cw_stream_destroy(&s);
    printf("# %s: hooked %d, freed while set_callback ran %d, callback on the %s\n", kind_name(kind),
           atomic_load(&r.hooked), r.freed_inside, pthread_equal(r.cb_thread, r.setter) ? "caller" : "watcher");
    assert_int_equal(set, CW_SUCCESS);
    if (r.freed_inside)
        fail_msg("%s: the future was freed (its callback, run by the watcher, destroyed it) while "
                 "cw_future_set_callback was still using it",
                 kind_name(kind));
    assert_int_equal(atomic_load(&r.calls), 1);
    assert_int_equal(stale, CW_ERROR_INVALID_HANDLE); /* gone once the callback returned */
}

#define CELL(a, k) {a, k}
static const struct cell k_cells[] = {
    CELL(ACT_DESTROY_OTHER, CW_FUTURE_HOST_FUNC),      CELL(ACT_DESTROY_OTHER, CW_FUTURE_WRITE_VALUE),
    CELL(ACT_DESTROY_OTHER, CW_FUTURE_EVENT),          CELL(ACT_DESTROY_OTHER_FD, CW_FUTURE_HOST_FUNC),
    CELL(ACT_DESTROY_OTHER_FD, CW_FUTURE_WRITE_VALUE), CELL(ACT_DESTROY_OTHER_FD, CW_FUTURE_EVENT),
    CELL(ACT_DESTROY_OWN, CW_FUTURE_HOST_FUNC),        CELL(ACT_DESTROY_OWN, CW_FUTURE_WRITE_VALUE),
    CELL(ACT_DESTROY_OWN, CW_FUTURE_EVENT),            CELL(ACT_REARM_OWN, CW_FUTURE_HOST_FUNC),
    CELL(ACT_REARM_OWN, CW_FUTURE_WRITE_VALUE),        CELL(ACT_REARM_OWN, CW_FUTURE_EVENT),
    CELL(ACT_REARM_OTHER, CW_FUTURE_HOST_FUNC),        CELL(ACT_REARM_OTHER, CW_FUTURE_WRITE_VALUE),
    CELL(ACT_REARM_OTHER, CW_FUTURE_EVENT),            CELL(ACT_SET_CALLBACK_OTHER, CW_FUTURE_HOST_FUNC),
    CELL(ACT_SET_CALLBACK_OTHER, CW_FUTURE_WRITE_VALUE), CELL(ACT_SET_CALLBACK_OTHER, CW_FUTURE_EVENT),
    CELL(ACT_GET_FD, CW_FUTURE_HOST_FUNC),             CELL(ACT_GET_FD, CW_FUTURE_WRITE_VALUE),
    CELL(ACT_GET_FD, CW_FUTURE_EVENT),
};
#define N_CELLS ((int)(sizeof k_cells / sizeof k_cells[0]))

/* ---- main ------------------------------------------------------------------- */

#define TEST_K(fn, kind) {#fn "(" #kind ")", fn, setup_ctx, teardown_ctx, (void *)&kind}

static char g_names[64][96];
static struct CMUnitTest g_tests[64];
static int g_ntests;

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
    const struct CMUnitTest fixed[] = {
        TEST_K(test_future_destroy_delivers_callback, k_host),
        TEST_K(test_future_destroy_delivers_callback, k_write),
        TEST_K(test_future_destroy_delivers_callback, k_event),
        TEST_K(test_future_destroy_delivers_fault, k_write),
        TEST_K(test_future_destroy_delivers_fault, k_event),
        TEST_K(test_future_destroy_delivers_fault, k_host),
        TEST_K(test_future_rearm_after_fault, k_write),
        TEST_K(test_future_rearm_after_fault, k_event),
        TEST_K(test_future_rearm_after_fault, k_host),
        TEST_K(test_future_callback_run_by_destroy_and_rearm, k_write),
        TEST_K(test_future_callback_run_by_destroy_and_rearm, k_event),
        TEST_K(test_future_set_callback_destroys_own_beside_watcher, k_write),
        TEST_K(test_future_set_callback_destroys_own_beside_watcher, k_event),
        TEST_K(test_future_destroy_fault_callback_gets_fd, k_write),
        TEST_K(test_future_destroy_beside_callback_rearm, k_write),
        TEST_K(test_future_destroy_beside_callback_rearm, k_event),
        TEST_K(test_future_set_callback_races_watcher_destroy, k_write),
        TEST_K(test_future_set_callback_races_watcher_destroy, k_event),
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) g_tests[g_ntests++] = fixed[i];
    for (int i = 0; i < N_CELLS; i++) {
        snprintf(g_names[i], sizeof g_names[i], "test_future_in_callback(%s, %s)", k_action_names[k_cells[i].act],
                 kind_name(k_cells[i].kind));
        struct CMUnitTest t = {g_names[i], test_future_in_callback, setup_ctx, teardown_ctx, (void *)&k_cells[i]};
        g_tests[g_ntests++] = t;
    }
    /* CWT_FILTER=pattern runs only the matching tests (cmocka's filter) */
    cwt_filter_from_env();
    return _cmocka_run_group_tests("test_future_cpu", g_tests, (size_t)g_ntests, NULL, NULL);
}
