/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * trace_write_cost: what a second cw_trace_write costs (nothing left to wait
 * for) at 40k, 80k and 160k spans, and how long it keeps another thread's
 * host span waiting (issue 38). Against the fake driver (tests/fake_cuda.c),
 * two inputs:
 *   host    n host spans made in order (cw_trace_host_begin/end), as a
 *           thread's spans come;
 *   stages  a resident loop of a workload and 1023 stages whose marks (the
 *           test seam) place them in the reverse of their order, recorded
 *           n / 1025 times (tests/test_trace_cpu.c test_write_sort's input);
 *   all     every span added after every span later in time: n / 1025 such
 *           loops, each recorded once, each earlier than the one before.
 * Prints per input and size the median of 5 second writes (to /dev/null) and
 * the longest host span begin + end another thread made meanwhile (it spins
 * on them during the writes).
 *
 * Build (links the static library for the seam; after ninja -C build/meson):
 *   cc -std=c11 -O2 -Iinclude -Isrc -o build/meson/trace_write_cost tools/probes/trace_write_cost.c \
 *      build/meson/src/libcuweave.a -lstdc++ -ldl -lpthread -lm
 *   build/meson/trace_write_cost build/meson/tests/libfakecuda.so
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "testing/seam.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cw_status s_ = (x);                                                                        \
        if (s_ != CW_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cw_last_error()->message); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static cw_context *ctx;
static cw_resident *g_loop;
enum { kSteps = 1023 };

enum { kLoops = 157 }; /* 160925 spans, 1025 a record */
static cw_resident *g_loops[kLoops];

static cw_status many_steps(cw_stream *s, void *user) {
    cw_resident *r = *(cw_resident **)user;
    for (int i = 0; i < kSteps; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(r, s, "step", &stage);
        if (st != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(r, s, stage)) != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

static cw_resident *loop_new(cw_resident **slot) {
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    rs.unroll = 1;
    CHECK(cw_resident_create(slot, ctx, &rs));
    CHECK(cw_resident_set_workload_fn(*slot, many_steps, slot));
    CHECK(cw_resident_build(*slot));
    return *slot;
}

/* Writes the marks of one record of r, from base: the workload around its
 * stages, which begin in the reverse of their order. */
static void reversed_marks(cw_resident *r, unsigned long long base) {
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    if (cwi_resident_trace(r, &marks, &stages) != 0 || stages != kSteps + 1) exit(1);
    for (unsigned j = 1; j <= kSteps; j++) {
        marks[2 * j] = base + 10ull * (kSteps + 1 - j);
        marks[2 * j + 1] = base + 10ull * (kSteps + 1 - j) + 5;
    }
    marks[0] = base;
    marks[1] = base + 20000;
}

static cw_trace *with_host_spans(long n) {
    cw_trace *t = NULL;
    CHECK(cw_trace_create(&t, NULL));
    for (long i = 0; i < n; i++) {
        CHECK(cw_trace_host_begin(t, "span"));
        CHECK(cw_trace_host_end(t));
    }
    return t;
}

/* One loop recorded again and again: each record's stages reversed. */
static cw_trace *with_reversed_stages(long n) {
    cw_trace *t = NULL;
    CHECK(cw_trace_create(&t, NULL));
    if (cwi_trace_set_globaltimer(t, ctx, 1000000) != 0) exit(1);
    for (long k = 0; k * (kSteps + 2) < n; k++) {
        reversed_marks(g_loop, 1000000ull + 100000ull * (unsigned long long)k);
        CHECK(cw_trace_record_resident(t, g_loop));
    }
    return t;
}

/* Every span added after every later one: loop k recorded once, each loop
 * earlier in time than the one before, its stages reversed. */
static cw_trace *with_all_reversed(long n) {
    cw_trace *t = NULL;
    CHECK(cw_trace_create(&t, NULL));
    if (cwi_trace_set_globaltimer(t, ctx, 1000000) != 0) exit(1);
    const long loops = (n + kSteps + 1) / (kSteps + 2);
    for (long k = 0; k < loops && k < kLoops; k++) {
        reversed_marks(g_loops[k], 1000000ull + 100000ull * (unsigned long long)(loops - 1 - k));
        CHECK(cw_trace_record_resident(t, g_loops[k]));
    }
    return t;
}

typedef struct {
    cw_trace *t;
    int stop;  /* atomic */
    double worst;
} Prober;

static void *probe(void *arg) {
    Prober *p = arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        const double t0 = now_s();
        CHECK(cw_trace_host_begin(p->t, "probe"));
        CHECK(cw_trace_host_end(p->t));
        const double d = now_s() - t0;
        if (d > p->worst) p->worst = d;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(const char *input, cw_trace *(*make)(long), long n) {
    cw_trace *t = make(n);
    cw_trace_info info;
    CHECK(cw_trace_get_info(t, &info));
    CHECK(cw_trace_write(t, "/dev/null")); /* the first: resolves and sorts once */
    double w[5];
    for (int i = 0; i < 5; i++) {
        const double t0 = now_s();
        CHECK(cw_trace_write(t, "/dev/null"));
        w[i] = now_s() - t0;
    }
    qsort(w, 5, sizeof w[0], cmp_double);
    Prober p = {t, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, probe, &p);
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    CHECK(cw_trace_write(t, "/dev/null"));
    __atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    printf("%-6s %7llu spans: second write %8.1f ms (median of 5), another thread's host span waited up to "
           "%8.3f ms\n",
           input, (unsigned long long)info.spans, w[2] * 1e3, p.worst * 1e3);
    cw_trace_destroy(&t);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/libfakecuda.so\n", argv[0]);
        return 2;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    CHECK(cw_init());
    CHECK(cw_context_create(&ctx, 0));
    loop_new(&g_loop);
    for (int k = 0; k < kLoops; k++) loop_new(&g_loops[k]);
    const long sizes[] = {40000, 80000, 160000};
    for (int i = 0; i < 3; i++) measure("host", with_host_spans, sizes[i]);
    for (int i = 0; i < 3; i++) measure("stages", with_reversed_stages, sizes[i]);
    for (int i = 0; i < 3; i++) measure("all", with_all_reversed, sizes[i]);
    cw_resident_destroy(&g_loop);
    for (int k = 0; k < kLoops; k++) cw_resident_destroy(&g_loops[k]);
    cw_context_destroy(&ctx);
    return 0;
}
