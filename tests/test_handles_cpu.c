/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Handle safety against the fake driver: a destroyed, foreign or garbage
 * handle given to any call is refused with CW_ERROR_INVALID_HANDLE without
 * its memory being read (the registry of live handles, src/core/registry.cpp), a
 * second destroy is harmless, even after a new object of the kind was made
 * (the destroyed object's memory is held in a quarantine of the last N
 * freed, so the new one is elsewhere) and up to the exact limit, a handle
 * of one kind passed as another is refused, the registry grows past
 * thousands of handles and gives their room back, its memory stays flat
 * under create/destroy churn, a registry that cannot grow makes creation
 * fail cleanly, and lookups from several threads while others create and
 * destroy never refuse a live handle nor accept a stale one (run under
 * ThreadSanitizer in CI).
 *
 * "Not read" is what ASan checks here: every stale handle below points at
 * heap memory that is freed or held poisoned in the quarantine, so a check
 * that read the handle's tag would be reported in the sanitizer build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "testing/seam.h"

static int (*fake_drain)(int timeout_ms);
static cw_context *ctx;

/* Every kind the public API hands out that the fake can make, made and
 * destroyed, then used through a copy of the pointer. */

/* Warnings logged: a destroy given a handle that is not live ignores it and
 * says so at CW_LOG_WARNING, leaving the thread's detail alone (the 0.2
 * convention; a destroy not converted yet records CW_ERROR_INVALID_HANDLE
 * in the detail instead, which refused() accepts too). */
static int g_warnings;
static void count_warnings(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if (level == CW_LOG_WARNING) g_warnings++;
}
static void watch_warnings(void) {
    g_warnings = 0;
    cw_clear_error();
    assert_cw_ok(cw_log_set_callback(count_warnings, NULL, CW_LOG_WARNING));
}
/* 1 when the destroy since watch_warnings() was refused: a warning, or the
 * detail of a destroy that records one. Removes the callback. */
static int refused(void) {
    const int r = g_warnings > 0 || cw_last_error()->status == CW_ERROR_INVALID_HANDLE;
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    return r;
}

static void test_destroyed_handles_are_refused(void **state) {
    (void)state;
    size_t live0 = cwi_handles_live();
    cw_stream *s = NULL, *s_copy;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    s_copy = s;
    cw_stream_pool *pool = NULL, *pool_copy;
    assert_cw_ok(cw_stream_pool_create(&pool, ctx, NULL));
    pool_copy = pool;
    cw_timer *t = NULL, *t_copy;
    assert_cw_ok(cw_timer_create(&t, ctx));
    t_copy = t;
    cw_graph *g = NULL, *g_copy;
    assert_cw_ok(cw_graph_create(&g, ctx));
    g_copy = g;
    cw_buffer *b = NULL, *b_copy;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    b_copy = b;
    cw_future *f = NULL, *f_copy;
    assert_cw_ok(cw_future_create(&f, s, CW_FUTURE_HOST_FUNC));
    f_copy = f;
    cw_pipeline *p = NULL, *p_copy;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    p_copy = p;
    cw_resident *r = NULL, *r_copy;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    r_copy = r;
    cw_context *c2 = NULL, *c2_copy;
    assert_cw_ok(cw_context_create(&c2, 0));
    c2_copy = c2;
    assert_true(cwi_handles_live() >= live0 + 9); /* and what they made for themselves (streams of pools) */

    assert_cw_ok(cw_future_wait(f, 1000000));
    cw_future_destroy(&f);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&s);
    cw_stream_pool_destroy(&pool);
    cw_timer_destroy(&t);
    cw_graph_destroy(&g);
    cw_pipeline_destroy(&p);
    cw_resident_destroy(&r);
    cw_context_destroy(&c2);
    assert_int_equal(cwi_handles_live(), live0);

    /* Every call on a stale copy: refused, the detail naming the kind. */
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query(s_copy));
    assert_non_null(strstr(cw_last_error()->message, "not a live cw_stream"));
    cw_stream_pool_info ps;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_pool_get_info(pool_copy, &ps));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_timer_start(t_copy, NULL));
    cw_graph_info gi;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_graph_get_info(g_copy, &gi));
    cw_devptr dptr = 0;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_buffer_get_ptr(b_copy, &dptr));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_future_poll(f_copy));
    cw_pipeline_info pst;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_pipeline_get_info(p_copy, &pst));
    cw_resident_state rstate;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_get_state(r_copy, &rstate));
    cw_context_info ci;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(c2_copy, &ci));

    /* A second destroy through the copy: harmless, refused with a warning
     * (the detail left alone). */
    watch_warnings();
    cw_stream_destroy(&s_copy);
    assert_int_equal(g_warnings, 1);
    cw_stream_pool_destroy(&pool_copy);
    assert_int_equal(g_warnings, 2);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    assert_true(refused());
    cw_timer_destroy(&t_copy);
    cw_graph_destroy(&g_copy);
    cw_buffer_destroy(&b_copy);
    cw_future_destroy(&f_copy);
    cw_clear_error();
    cw_pipeline_destroy(&p_copy); /* a warning (logged), not a failure: the detail stays */
    assert_null(p_copy);
    cw_resident_destroy(&r_copy);
    assert_null(r_copy);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS);
    watch_warnings();
    cw_context_destroy(&c2_copy);
    assert_true(refused());
    assert_int_equal(cwi_handles_live(), live0);
}

/* Memory that looks like a handle is not one: the first word holds the tag a
 * live stream has, and it is still refused (a tag check alone would accept
 * it). A live handle of one kind passed as another is refused too. */
static void test_foreign_and_confused_handles(void **state) {
    (void)state;
    uint32_t fake[64];
    memset(fake, 0, sizeof fake);
    fake[0] = 0x43575354u; /* "CWST", the stream tag */
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)fake));
    fake[0] = 0x43574358u; /* "CWCX", the context tag */
    cw_stream *s = NULL;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_create(&s, (cw_context *)fake, NULL));
    assert_null(s);
    /* Odd addresses, a small integer, the top of the address space. */
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)(uintptr_t)0x1));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)(uintptr_t)0x7));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)(uintptr_t)~(uintptr_t)15));

    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_context_info ci;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info((cw_context *)s, &ci));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_stream_query((cw_stream *)ctx));
    cw_pipeline_info pst;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_pipeline_get_info((cw_pipeline *)s, &pst));
    assert_cw_ok(cw_stream_query(s));
    cw_stream_destroy(&s);
}

/* Thousands of live handles (the registry grows several times), all valid,
 * then all gone; the room is given back. */
static void test_many_handles(void **state) {
    (void)state;
    enum { N = 5000 };
    size_t live0 = cwi_handles_live();
    cw_timer **t = calloc(N, sizeof *t);
    for (int i = 0; i < N; i++) assert_cw_ok(cw_timer_create(&t[i], ctx));
    assert_int_equal(cwi_handles_live(), live0 + N);
    float ms = 0;
    for (int i = 0; i < N; i++) assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t[i], &ms)); /* live, never started */
    /* Destroy every other one: the rest stay valid, the destroyed are refused. */
    cw_timer **copy = calloc(N, sizeof *copy);
    memcpy(copy, t, N * sizeof *t);
    for (int i = 0; i < N; i += 2) cw_timer_destroy(&t[i]);
    int refused = 0, valid = 0;
    for (int i = 0; i < N; i++) {
        cw_status st = cw_timer_get_elapsed_ms(copy[i], &ms);
        if (st == CW_ERROR_INVALID_HANDLE) refused++;
        else if (st == CW_ERROR_INVALID_STATE) valid++; /* live, but never started */
    }
    assert_int_equal(refused, N / 2);
    assert_int_equal(valid, N / 2);
    for (int i = 1; i < N; i += 2) cw_timer_destroy(&t[i]);
    assert_int_equal(cwi_handles_live(), live0);
    free(t);
    free(copy);
}

/* A registry that cannot grow: creation fails with CW_ERROR_OUT_OF_MEMORY
 * before anything is made, nothing leaks, and the next creation works. */
static void test_registry_full(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    size_t live0 = cwi_handles_live();
    cw_stream *s = NULL;
    cwi_handles_fail_next(1);
    assert_cw(CW_ERROR_OUT_OF_MEMORY, cw_stream_create(&s, ctx, NULL));
    assert_non_null(strstr(cw_last_error()->message, "handle registry"));
    assert_null(s);
    cw_timer *t = NULL;
    cwi_handles_fail_next(1);
    assert_cw(CW_ERROR_OUT_OF_MEMORY, cw_timer_create(&t, ctx));
    assert_null(t);
    cw_context *c2 = NULL;
    cwi_handles_fail_next(1);
    assert_cw(CW_ERROR_OUT_OF_MEMORY, cw_context_create(&c2, 0));
    assert_null(c2);
    assert_int_equal(cwi_handles_live(), live0);
    assert_false(leaks(before, "creations refused by a full registry"));
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_stream_destroy(&s);
    cwi_handles_fail_next(0);
}

/* Every kind made in one scenario, everything released on every path. */
static cw_status noop_compute(cw_io *io, void *user) {
    (void)io;
    (void)user;
    return CW_SUCCESS;
}

static cw_status make_everything(void) {
    cw_stream *s = NULL;
    cw_stream_pool *pool = NULL;
    cw_timer *t = NULL;
    cw_graph *g = NULL;
    cw_graph_exec *e = NULL;
    cw_buffer *b = NULL;
    cw_future *f = NULL;
    cw_pipeline *p = NULL;
    cw_operator *op = NULL;
    cw_resident *r = NULL;
    cw_context *c2 = NULL;
    cw_device_group *ds = NULL;
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = noop_compute;
    cw_status st;
    if ((st = cw_stream_create(&s, ctx, NULL)) || (st = cw_stream_pool_create(&pool, ctx, NULL)) ||
        (st = cw_timer_create(&t, ctx)) || (st = cw_graph_create(&g, ctx)) ||
        (st = cw_graph_instantiate(&e, g, 0)) || (st = cw_buffer_create(&b, s, 256)) ||
        (st = cw_future_create(&f, s, CW_FUTURE_HOST_FUNC)) || (st = cw_future_wait(f, 1000000)) ||
        (st = cw_pipeline_create(&p, ctx, NULL)) || (st = cw_operator_create(&op, "A", &ops, NULL, NULL)))
        goto out;
    if ((st = cw_pipeline_add(p, op)) != CW_SUCCESS) goto out;
    op = NULL; /* the pipeline's now */
    if ((st = cw_pipeline_run(p, 2)) || (st = cw_resident_create(&r, ctx, NULL)) ||
        (st = cw_context_create(&c2, 0)) || (st = cw_device_group_create(&ds, NULL, 0)))
        goto out;
out:
    cw_device_group_destroy(&ds);
    cw_context_destroy(&c2);
    if (r) cw_resident_destroy(&r);
    cw_operator_destroy(&op);
    cw_pipeline_destroy(&p);
    if (f) (void)cw_future_wait(f, 1000000);
    cw_future_destroy(&f);
    cw_buffer_destroy(&b);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    cw_timer_destroy(&t);
    cw_stream_pool_destroy(&pool);
    if (s) (void)cw_stream_synchronize(s);
    cw_stream_destroy(&s);
    return st;
}

/* The registry refusing each reservation in turn: the scenario fails with
 * CW_ERROR_OUT_OF_MEMORY at that creation, whichever it is, and leaves no
 * handle and no driver object behind; then it runs clean. */
static void test_registry_sweep(void **state) {
    (void)state;
    assert_cw_ok(make_everything()); /* warm what contexts keep */
    long before[NKINDS];
    snapshot(before);
    const size_t live0 = cwi_handles_live();
    int refused = 0, leaked = 0;
    unsigned k;
    for (k = 1; k < 500; k++) {
        cwi_handles_fail_next((int)k);
        cw_status st = make_everything();
        cwi_handles_fail_next(0);
        if (st == CW_SUCCESS) break; /* past the last reservation */
        if (st != CW_ERROR_OUT_OF_MEMORY) fail_msg("reservation %u: %s, expected CW_ERROR_OUT_OF_MEMORY", k, cw_status_name(st));
        refused++;
        if (cwi_handles_live() != live0 || leaks(before, "a refused reservation")) leaked++;
    }
    printf("# handle registry sweep: %d reservations refused in turn, each failing its creation with "
           "CW_ERROR_OUT_OF_MEMORY; %d leaks\n", refused, leaked);
    assert_true(refused >= 12); /* at least one per kind made directly */
    assert_int_equal(leaked, 0);
    assert_cw_ok(make_everything());
    assert_int_equal(cwi_handles_live(), live0);
}

/* Lookups from several threads while others create and destroy. */
typedef struct churn {
    cw_stream *keep;
    int ok, bad;
} churn;

static void *churn_main(void *arg) {
    churn *c = arg;
    for (int i = 0; i < 2000; i++) {
        if (cw_stream_query(c->keep) == CW_SUCCESS) c->ok++;
        else c->bad++;
        cw_timer *t = NULL;
        if (cw_timer_create(&t, ctx) != CW_SUCCESS) {
            c->bad++;
            continue;
        }
        cw_timer *stale = t;
        cw_timer_destroy(&t);
        float ms;
        if (cw_timer_get_elapsed_ms(stale, &ms) != CW_ERROR_INVALID_HANDLE) c->bad++;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    enum { T = 4 };
    size_t live0 = cwi_handles_live();
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    pthread_t th[T];
    churn c[T];
    for (int i = 0; i < T; i++) {
        c[i] = (churn){s, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
    }
    int ok = 0, bad = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        ok += c[i].ok;
        bad += c[i].bad;
    }
    assert_int_equal(ok, T * 2000);
    assert_int_equal(bad, 0);
    cw_stream_destroy(&s);
    assert_int_equal(cwi_handles_live(), live0);
}

/* The registry's memory stays flat under create/destroy churn: 100,000
 * streams made and destroyed one at a time while 9 timers stay live. Each
 * destroyed stream's memory is then taken by a malloc of its size, as an
 * application's own allocations would (and as ASan's quarantine does), so
 * that every stream has a new address. The old registry left a removed
 * entry behind for each address and, each time they filled 3/4 of the
 * table, rebuilt a table of the same size, keeping the old one for
 * lookups: memory grew without bound. */
static void test_registry_memory_flat(void **state) {
    (void)state;
    enum { KEEP = 9, CYCLES = 100000, WARM = 1000 };
    const size_t live0 = cwi_handles_live();
    cw_timer *keep[KEEP] = {0};
    for (int i = 0; i < KEEP; i++) assert_cw_ok(cw_timer_create(&keep[i], ctx));
    void **hold = calloc(CYCLES, sizeof *hold);
    assert_non_null(hold);
    size_t warm = 0, most = 0;
    for (int i = 0; i < CYCLES; i++) {
        if (i == WARM) warm = cwi_handles_bytes();
        cw_stream *s = NULL;
        assert_cw_ok(cw_stream_create(&s, ctx, NULL));
        const size_t size = malloc_usable_size(s);
        cw_stream_destroy(&s);
        hold[i] = malloc(size);
        size_t b = cwi_handles_bytes();
        if (b > most) most = b;
    }
    const size_t end = cwi_handles_bytes();
    printf("# registry bytes with %zu handles live: %zu after %d create/destroy cycles, %zu after %d "
           "(the most seen: %zu)\n",
           cwi_handles_live(), warm, WARM, end, CYCLES, most);
    for (int i = 0; i < CYCLES; i++) free(hold[i]);
    free(hold);
    float ms;
    for (int i = 0; i < KEEP; i++) assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(keep[i], &ms));
    for (int i = 0; i < KEEP; i++) cw_timer_destroy(&keep[i]);
    assert_int_equal(cwi_handles_live(), live0);
    assert_int_equal(end, warm);
    assert_int_equal(most, warm);
}

/* A removal moves entries back (no tombstones): one that moves the handle a
 * lookup is probing for behind it must not make the lookup refuse a live
 * handle. The hook makes that race happen at once for each of 3,000 live
 * timers; every one is found, some only by the look again under the lock
 * (without it they were refused: the test fails). */
static void test_lookup_racing_move(void **state) {
    (void)state;
    enum { N = 3000 };
    const size_t live0 = cwi_handles_live();
    cw_timer **t = calloc(N, sizeof *t);
    for (int i = 0; i < N; i++) assert_cw_ok(cw_timer_create(&t[i], ctx));
    int how[3] = {0, 0, 0};
    for (int i = 0; i < N; i++) {
        int r = cwi_handles_lookup_racing_move(t[i]);
        assert_true(r >= 0 && r <= 2);
        how[r]++;
    }
    printf("# %d live timers looked up while an entry moved under the lookup: %d found at once, %d by the look "
           "again under the lock, %d refused\n",
           N, how[1], how[2], how[0]);
    float ms;
    for (int i = 0; i < N; i++) assert_cw(CW_ERROR_INVALID_STATE, cw_timer_get_elapsed_ms(t[i], &ms));
    assert_int_equal(cwi_handles_live(), live0 + N);
    for (int i = 0; i < N; i++) cw_timer_destroy(&t[i]);
    free(t);
    assert_int_equal(cwi_handles_live(), live0);
    assert_int_equal(how[0], 0);
    assert_true(how[2] > 0); /* the race did happen */
}

/* A stale copy of a destroyed handle, destroyed after a new object of its
 * kind was made: the new object is made at another address (the destroyed
 * one's memory is held back), so the stale destroy is refused (in the detail,
 * or in 0.2's way: a warning, the detail left alone) and the new object
 * stays live. Before, malloc gave the new object the destroyed one's
 * address and the stale destroy destroyed it. */
#define STALE_DESTROY(type, make, destroy, use_ok)                                                           \
    do {                                                                                                     \
        type *a = NULL, *b = NULL;                                                                           \
        assert_cw_ok(make(&a));                                                                              \
        type *stale = a;                                                                                     \
        destroy(&a);                                                                                         \
        assert_cw_ok(make(&b));                                                                              \
        const int same = (void *)stale == (void *)b;                                                         \
        void *was = (void *)stale;                                                                           \
        watch_warnings();                                                                                    \
        destroy(&stale); /* the stale copy */                                                                \
        const int was_refused = refused();                                                                   \
        const cw_status after = use_ok(b); /* the new one: live and usable */                               \
        printf("# %s: destroyed %p, the next one made at %s; destroying the stale copy: %s; the new one "    \
               "then: %s\n",                                                                                 \
               #type, was, same ? "the same address" : "another address", was_refused ? "refused" : "USED", \
               cw_status_name(after));                                                                       \
        assert_true(was_refused);                                                                            \
        assert_cw_ok(after);                                                                                 \
        assert_false(same);                                                                                  \
        destroy(&b);                                                                                         \
    } while (0)

static cw_status make_stream(cw_stream **s) { return cw_stream_create(s, ctx, NULL); }
static cw_status make_timer(cw_timer **t) { return cw_timer_create(t, ctx); }
static cw_status make_graph(cw_graph **g) { return cw_graph_create(g, ctx); }
static cw_status make_pipeline(cw_pipeline **p) { return cw_pipeline_create(p, ctx, NULL); }
static cw_stream *use_stream; /* for timers */
static cw_status use_timer(cw_timer *t) { return cw_timer_start(t, use_stream); }
static cw_status use_graph(cw_graph *g) {
    cw_graph_info gi;
    return cw_graph_get_info(g, &gi);
}
static cw_status use_pipeline(cw_pipeline *p) {
    cw_pipeline_info st;
    return cw_pipeline_get_info(p, &st);
}

static void test_stale_destroy_after_reuse(void **state) {
    (void)state;
    const size_t live0 = cwi_handles_live();
    assert_cw_ok(cw_stream_create(&use_stream, ctx, NULL));
    STALE_DESTROY(cw_stream, make_stream, cw_stream_destroy, cw_stream_query);
    STALE_DESTROY(cw_timer, make_timer, cw_timer_destroy, use_timer);
    STALE_DESTROY(cw_graph, make_graph, cw_graph_destroy, use_graph);
    STALE_DESTROY(cw_pipeline, make_pipeline, cw_pipeline_destroy, use_pipeline);
    assert_cw_ok(cw_stream_synchronize(use_stream));
    cw_stream_destroy(&use_stream);
    assert_int_equal(cwi_handles_live(), live0);
}

/* The limit, exactly: a destroyed handle's memory is held while fewer than
 * N (cwi_handles_quarantine) handle objects have been freed after it, and
 * a stale copy is refused; the Nth frees it, and from then on a new object
 * may be made at its address (the stale copy would then be that object). */
static void test_quarantine_limit(void **state) {
    (void)state;
    const size_t n = cwi_handles_quarantine();
    assert_true(n >= 1);
    const size_t live0 = cwi_handles_live();
    cw_timer **t = calloc(n + 1, sizeof *t);
    for (size_t i = 0; i <= n; i++) assert_cw_ok(cw_timer_create(&t[i], ctx));
    cw_timer *stale = t[0];
    cw_timer_destroy(&t[0]);
    assert_true(cwi_handles_held(stale));
    float ms;
    for (size_t i = 1; i < n; i++) cw_timer_destroy(&t[i]); /* n - 1 later frees */
    assert_true(cwi_handles_held(stale));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_timer_get_elapsed_ms(stale, &ms));
    cw_timer *u = NULL;
    assert_cw_ok(cw_timer_create(&u, ctx));
    assert_ptr_not_equal(u, stale); /* its memory is held: nothing can be made there */
    cw_timer_destroy(&t[n]); /* the nth later free: it goes */
    assert_false(cwi_handles_held(stale));
    cw_timer *v = NULL;
    assert_cw_ok(cw_timer_create(&v, ctx));
    printf("# a destroyed timer's memory held through %zu later frees, freed by the %zu-th; the next timer made "
           "%s\n",
           n - 1, n, (void *)v == (void *)stale ? "at its address (malloc reused it)" : "elsewhere");
    cw_timer_destroy(&u);
    cw_timer_destroy(&v);
    free(t);
    assert_int_equal(cwi_handles_live(), live0);
}

/* A buffer's object is freed with its size (a pipeline's cache makes a new
 * buffer for every recycled memory, issue 38): the same quarantine as any
 * handle, and once out of it the block is kept for the next buffer instead
 * of freed, so a frame's buffers cost no malloc and free. Held through N - 1
 * later frees (no buffer is made at its address meanwhile), and the next
 * buffer after the Nth takes the block. */
static void test_buffer_block_recycled_after_quarantine(void **state) {
    (void)state;
    const size_t n = cwi_handles_quarantine();
    const size_t live0 = cwi_handles_live();
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_timer **t = calloc(n, sizeof *t);
    for (size_t i = 0; i < n; i++) assert_cw_ok(cw_timer_create(&t[i], ctx));
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    cw_buffer *stale = b;
    cw_buffer_destroy(&b);
    assert_true(cwi_handles_held(stale));
    for (size_t i = 0; i + 1 < n; i++) cw_timer_destroy(&t[i]); /* n - 1 later frees */
    assert_true(cwi_handles_held(stale));
    cw_buffer *u = NULL;
    assert_cw_ok(cw_buffer_create(&u, s, 64));
    assert_ptr_not_equal(u, stale); /* held: no buffer made there */
    cw_buffer_info info;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_buffer_get_info(stale, &info));
    cw_timer_destroy(&t[n - 1]); /* the nth: out of the quarantine, kept for a buffer */
    assert_false(cwi_handles_held(stale));
    cw_buffer *v = NULL;
    assert_cw_ok(cw_buffer_create(&v, s, 64));
    assert_ptr_equal(v, stale); /* the block a buffer left, zeroed and made a new buffer */
    assert_cw_ok(cw_buffer_get_info(v, &info));
    assert_int_equal(info.refs, 1);
    assert_int_equal(info.uses, 1);
    assert_int_equal(info.bytes, 64);
    cw_buffer_destroy(&u);
    cw_buffer_destroy(&v);
    assert_cw_ok(cw_stream_synchronize(s));
    cw_stream_destroy(&s);
    free(t);
    assert_int_equal(cwi_handles_live(), live0);
}

/* A pool's stream is complete when it becomes a live handle: a stale copy
 * of a destroyed stream whose memory a pool's new stream takes (past the
 * quarantine) is that stream's handle from its publication on, and reads
 * it (another thread, cw_stream_get_info) while the pool sets it up. Under
 * TSan the pool's writes after the publication raced with those reads. */
typedef struct stale_reader {
    cw_stream *stale;
    atomic_int stop, live_seen, not_from_pool;
} stale_reader;
static void *stale_reader_main(void *arg) {
    stale_reader *r = arg;
    while (!atomic_load(&r->stop)) {
        cw_stream_info si;
        if (cw_stream_get_info(r->stale, &si) == CW_SUCCESS) {
            atomic_fetch_add(&r->live_seen, 1);
            if (!si.from_pool) atomic_fetch_add(&r->not_from_pool, 1);
        }
    }
    return NULL;
}
static void test_pool_stream_published_complete(void **state) {
    (void)state;
    const size_t n = cwi_handles_quarantine();
    const size_t live0 = cwi_handles_live();
    stale_reader r;
    memset(&r, 0, sizeof r);
    int taken = 0, tries = 0;
    for (; tries < 20 && !taken; tries++) {
        cw_stream *x = NULL;
        assert_cw_ok(cw_stream_create(&x, ctx, NULL));
        r.stale = x;
        cw_stream_destroy(&x);
        cw_timer **t = calloc(n, sizeof *t);
        assert_non_null(t);
        for (size_t i = 0; i < n; i++) assert_cw_ok(cw_timer_create(&t[i], ctx));
        for (size_t i = 0; i < n; i++) cw_timer_destroy(&t[i]); /* the stream's memory leaves the quarantine */
        free(t);
        atomic_store(&r.stop, 0);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stale_reader_main, &r), 0);
        cw_stream_pool *pool = NULL;
        cw_stream_pool_settings ps;
        cw_stream_pool_settings_default(&ps);
        ps.reserved_streams = 1;
        assert_cw_ok(cw_stream_pool_create(&pool, ctx, &ps)); /* its stream made now */
        cw_stream *s = NULL;
        assert_cw_ok(cw_stream_pool_acquire(&s, pool, 0));
        taken = s == r.stale;
        const double t0 = now_ms();
        while (taken && atomic_load(&r.live_seen) < 100 && now_ms() - t0 < 2000) usleep(100);
        atomic_store(&r.stop, 1);
        pthread_join(th, NULL);
        assert_cw_ok(cw_stream_pool_release(pool, &s));
        cw_stream_pool_destroy(&pool);
    }
    printf("# a pool's stream took a destroyed stream's memory after %d tries: %s; read through the stale copy "
           "%d times, %d of them not yet a pool's\n",
           tries, taken ? "yes" : "no", atomic_load(&r.live_seen), atomic_load(&r.not_from_pool));
    assert_int_equal(atomic_load(&r.not_from_pool), 0);
    assert_int_equal(cwi_handles_live(), live0);
}

/* Threads looking up their own live handles while they and others create
 * and destroy: a live handle is never refused (a lookup racing a removal
 * that moves entries retries under the registry's lock), a destroyed one
 * always is, and the live count is exact at the end. Two more threads
 * make and drop bursts of 300 handles, so the table also grows under the
 * lookups. Runs under ThreadSanitizer in CI. */
enum { OWN = 48, OWN_ROUNDS = 1500, BURST = 300, BURSTS = 6 };
typedef struct owner {
    int refused_live, accepted_stale, errors;
    unsigned long lookups;
    unsigned long stale_judged, past_quarantine; /* stale lookups inside / past the quarantine's promise */
} owner;

static void *owner_main(void *arg) {
    owner *o = arg;
    cw_timer *t[OWN] = {0};
    float ms;
    for (int i = 0; i < OWN; i++)
        if (cw_timer_create(&t[i], ctx) != CW_SUCCESS) o->errors++;
    for (int r = 0; r < OWN_ROUNDS && !o->errors; r++) {
        const int j = (r * 7) % OWN;
        cw_timer *stale = t[j];
        /* The promise: a stale handle is refused while fewer than N handle
         * objects (of any kind, any thread's) were freed after it. Counted
         * from before the destroy, so at most N - 1 frees came after it
         * when f1 - f0 <= N. Past N (the burst threads can free 300 while
         * this one is descheduled) its address may hold a new timer. */
        const unsigned long f0 = cwi_handles_freed();
        cw_timer_destroy(&t[j]);
        const cw_status st = cw_timer_get_elapsed_ms(stale, &ms);
        const unsigned long f1 = cwi_handles_freed();
        if (f1 - f0 > cwi_handles_quarantine()) {
            o->past_quarantine++;
        } else {
            o->stale_judged++;
            if (st != CW_ERROR_INVALID_HANDLE) o->accepted_stale++;
        }
        if (cw_timer_create(&t[j], ctx) != CW_SUCCESS) {
            o->errors++;
            break;
        }
        for (int i = 0; i < OWN; i++) {
            /* Live and never started: CW_ERROR_INVALID_STATE, never INVALID_HANDLE. */
            if (cw_timer_get_elapsed_ms(t[i], &ms) != CW_ERROR_INVALID_STATE) o->refused_live++;
            o->lookups++;
        }
    }
    for (int i = 0; i < OWN; i++) cw_timer_destroy(&t[i]);
    return NULL;
}

static void *burst_main(void *arg) {
    owner *o = arg;
    cw_stream **s = calloc(BURST, sizeof *s);
    for (int b = 0; b < BURSTS; b++) {
        for (int i = 0; i < BURST; i++)
            if (cw_stream_create(&s[i], ctx, NULL) != CW_SUCCESS) o->errors++;
        for (int i = 0; i < BURST; i++) {
            if (s[i] && cw_stream_query(s[i]) != CW_SUCCESS) o->refused_live++;
            o->lookups++;
        }
        for (int i = 0; i < BURST; i++) cw_stream_destroy(&s[i]);
    }
    free(s);
    return NULL;
}

static void test_threads_own_handles(void **state) {
    (void)state;
    enum { OWNERS = 4, BURSTERS = 2 };
    const size_t live0 = cwi_handles_live();
    pthread_t th[OWNERS + BURSTERS];
    owner o[OWNERS + BURSTERS];
    memset(o, 0, sizeof o);
    for (int i = 0; i < OWNERS + BURSTERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, i < OWNERS ? owner_main : burst_main, &o[i]), 0);
    owner sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < OWNERS + BURSTERS; i++) {
        pthread_join(th[i], NULL);
        sum.refused_live += o[i].refused_live;
        sum.accepted_stale += o[i].accepted_stale;
        sum.errors += o[i].errors;
        sum.lookups += o[i].lookups;
        sum.stale_judged += o[i].stale_judged;
        sum.past_quarantine += o[i].past_quarantine;
    }
    printf("# %lu lookups of live handles from %d threads: %d refused; %d of %lu stale handles accepted (%lu more "
           "looked up after %zu frees: past the quarantine's promise); %d errors\n",
           sum.lookups, OWNERS + BURSTERS, sum.refused_live, sum.accepted_stale, sum.stale_judged,
           sum.past_quarantine, cwi_handles_quarantine(), sum.errors);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(sum.refused_live, 0);
    assert_int_equal(sum.accepted_stale, 0);
    assert_int_equal(sum.stale_judged + sum.past_quarantine, (unsigned long)OWNERS * OWN_ROUNDS);
    /* the stale check stays a check: nearly every one is inside the promise */
    assert_true(sum.stale_judged * 10 >= (unsigned long)OWNERS * OWN_ROUNDS * 9);
    assert_int_equal(sum.lookups, (unsigned long)OWNERS * OWN_ROUNDS * OWN + (unsigned long)BURSTERS * BURSTS * BURST);
    assert_int_equal(cwi_handles_live(), live0);
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
        !(fake_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    live_drain = fake_drain;
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    /* Warm what the context makes for itself and keeps (its fork pool's
     * streams, the buffers' release stream and pool, the futures' slab) so
     * that handle counts compare like with like. */
    cw_stream *w = NULL, *child = NULL;
    cw_buffer *wb = NULL;
    cw_future *wf = NULL;
    cw_resident *wr = NULL;
    cw_pipeline *wp = NULL;
    if (cw_stream_create(&w, ctx, NULL) || cw_stream_fork(&child, w) || cw_stream_join(w, &child) ||
        cw_buffer_create(&wb, w, 64) || cw_future_create(&wf, w, CW_FUTURE_HOST_FUNC) ||
        cw_future_wait(wf, 1000000) || cw_resident_create(&wr, ctx, NULL) || cw_pipeline_create(&wp, ctx, NULL)) {
        printf("FAIL: warming up: %s\n", cw_last_error()->message);
        return 1;
    }
    cw_buffer_destroy(&wb);
    cw_future_destroy(&wf);
    cw_resident_destroy(&wr);
    cw_pipeline_destroy(&wp);
    cw_stream_synchronize(w);
    cw_stream_destroy(&w);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroyed_handles_are_refused),
        cmocka_unit_test(test_foreign_and_confused_handles),
        cmocka_unit_test(test_many_handles),
        cmocka_unit_test(test_registry_full),
        cmocka_unit_test(test_registry_sweep),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_stale_destroy_after_reuse),
        cmocka_unit_test(test_quarantine_limit),
        cmocka_unit_test(test_buffer_block_recycled_after_quarantine),
        cmocka_unit_test(test_pool_stream_published_complete),
        cmocka_unit_test(test_registry_memory_flat),
        cmocka_unit_test(test_lookup_racing_move),
        cmocka_unit_test(test_threads_own_handles),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    return failed;
}
