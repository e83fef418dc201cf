/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Host cost of the driver calls a pipeline iteration makes, on one stream
 * pair, completed work (what an executor pays per call when the GPU keeps
 * up): cuCtxGetCurrent, cuCtxSetCurrent (same context), cuEventRecord,
 * cuStreamWaitEvent, cuEventQuery and cuEventSynchronize of a finished
 * event, cuLaunchKernel of an empty kernel. Median of 20000 calls each, ns.
 * Then how the events are reused (issue 26): cuweave's marks take pooled
 * events, most recently freed first, so an event is recorded on another
 * stream than the last time (and a wait of yet another stream may still
 * name it), where hand-written code keeps one event per stage and ring slot,
 * always recorded on its stage's stream. One record plus one wait per pair,
 * ns per pair.
 * Last, whether cuEventQuery and cuEventSynchronize answer with no context
 * current on the thread (cuweave's EVENT futures query without making the
 * event's context current): the results printed.
 * Plain driver API, no cuweave. Build: cc -O2 -o calls tools/probes/calls.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../tests/kernels/test_kernels_fatbin.h"

typedef int R;
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#define N 20000
static double v[N];
static double med(void) {
    qsort(v, N, sizeof v[0], cmp);
    return v[N / 2];
}
int main(void) {
    void *l = dlopen("libcuda.so.1", RTLD_NOW);
    if (!l) return printf("no driver\n"), 0;
#define S(n, args) R(*n) args = (R(*) args)dlsym(l, #n)
    S(cuInit, (unsigned));
    S(cuDeviceGet, (int *, int));
    S(cuDevicePrimaryCtxRetain, (void **, int));
    S(cuCtxSetCurrent, (void *));
    S(cuCtxGetCurrent, (void **));
    S(cuStreamCreate, (void **, unsigned));
    S(cuEventCreate, (void **, unsigned));
    S(cuEventRecord, (void *, void *));
    S(cuStreamWaitEvent, (void *, void *, unsigned));
    S(cuEventQuery, (void *));
    S(cuEventSynchronize, (void *));
    S(cuStreamSynchronize, (void *));
    S(cuModuleLoadData, (void **, const void *));
    S(cuModuleGetFunction, (void **, void *, const char *));
    S(cuLaunchKernel, (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                            void **, void **));
    int d;
    void *ctx, *a, *b, *c, *ev, *ev2, *m, *f, *cur;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&a, 1) || cuStreamCreate(&b, 1) || cuStreamCreate(&c, 1) || cuEventCreate(&ev, 2) ||
        cuEventCreate(&ev2, 2) || cuModuleLoadData(&m, cw_test_kernels_fatbin) ||
        cuModuleGetFunction(&f, m, "cw_empty"))
        return printf("setup failed\n"), 1;
    double t;
#define TIME(name, call)                              \
    for (int i = 0; i < N; i++) {                     \
        t = now();                                    \
        call;                                         \
        v[i] = now() - t;                             \
    }                                                 \
    printf("%-40s %7.0f ns\n", name, med());
/* the same, the streams drained every 64 calls (not timed): the launch queue never fills */
#define TIME_DRAINED(name, call)                                   \
    for (int i = 0; i < N; i++) {                                  \
        t = now();                                                 \
        call;                                                      \
        v[i] = now() - t;                                          \
        if ((i & 63) == 63) {                                      \
            cuStreamSynchronize(a);                                \
            cuStreamSynchronize(b);                                \
            cuStreamSynchronize(c);                                \
        }                                                          \
    }                                                              \
    printf("%-40s %7.0f ns\n", name, med());
    TIME("cuCtxGetCurrent", cuCtxGetCurrent(&cur));
    TIME("cuCtxSetCurrent (already current)", cuCtxSetCurrent(ctx));
    TIME("cuEventRecord (idle stream)", cuEventRecord(ev, a));
    cuStreamSynchronize(a);
    TIME("cuStreamWaitEvent (finished event)", cuStreamWaitEvent(b, ev, 0));
    cuStreamSynchronize(b);
    TIME("cuEventQuery (finished)", cuEventQuery(ev));
    TIME("cuEventSynchronize (finished)", cuEventSynchronize(ev));
    TIME("cuLaunchKernel (empty, 1x1)", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL));
    cuStreamSynchronize(a);
    /* record + wait pairs, one event per stream (hand-written) against one
     * event recorded on a, then on b, in turn (a pool's reuse) */
    int k = 0;
    TIME("record+wait, same event per stream", (k++ & 1) ? (cuEventRecord(ev2, b), cuStreamWaitEvent(c, ev2, 0))
                                                         : (cuEventRecord(ev, a), cuStreamWaitEvent(c, ev, 0)));
    cuStreamSynchronize(c);
    TIME("record+wait, one event on a, b in turn", (k++ & 1) ? (cuEventRecord(ev, b), cuStreamWaitEvent(c, ev, 0))
                                                                : (cuEventRecord(ev, a), cuStreamWaitEvent(c, ev, 0)));
    cuStreamSynchronize(c);
    /* the same with a little work on the streams, so that the waits are
     * pending when the event is recorded again */
    TIME_DRAINED("kernel+record+wait, same event per stream",
         (k++ & 1) ? (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL), cuEventRecord(ev2, b),
                      cuStreamWaitEvent(c, ev2, 0))
                   : (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL), cuEventRecord(ev, a),
                      cuStreamWaitEvent(c, ev, 0)));
    cuStreamSynchronize(a);
    cuStreamSynchronize(b);
    cuStreamSynchronize(c);
    TIME_DRAINED("kernel+record+wait, one event, a/b in turn",
         (k++ & 1) ? (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL), cuEventRecord(ev, b),
                      cuStreamWaitEvent(c, ev, 0))
                   : (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL), cuEventRecord(ev, a),
                      cuStreamWaitEvent(c, ev, 0)));
    cuStreamSynchronize(a);
    cuStreamSynchronize(b);
    cuStreamSynchronize(c);
    /* a ring of 8 events per stream (bench_vmaf's raw designs: one event per
     * picture stream and ring slot) against the one event per stream above,
     * recorded again while waits on its last record are pending (cuweave's
     * stream_order records the stream's own event) */
    void *ring_a[8], *ring_b[8];
    for (int i = 0; i < 8; i++)
        if (cuEventCreate(&ring_a[i], 2) || cuEventCreate(&ring_b[i], 2)) return printf("setup failed\n"), 1;
    int slot = 0;
    TIME_DRAINED("kernel+record+wait, a ring of 8 per stream",
         (k++ & 1) ? (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL), cuEventRecord(ring_b[slot & 7], b),
                      cuStreamWaitEvent(c, ring_b[slot & 7], 0), slot++)
                   : (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, NULL, NULL), cuEventRecord(ring_a[slot & 7], a),
                      cuStreamWaitEvent(c, ring_a[slot & 7], 0)));
    cuStreamSynchronize(a);
    cuStreamSynchronize(b);
    cuStreamSynchronize(c);
    /* the pair alone, no kernel: the same two patterns, each repeated */
    for (int rep = 0; rep < 2; rep++) {
        TIME_DRAINED("record+wait, one event per stream",
             (k++ & 1) ? (cuEventRecord(ev2, b), cuStreamWaitEvent(c, ev2, 0)) : (cuEventRecord(ev, a), cuStreamWaitEvent(c, ev, 0)));
        TIME_DRAINED("record+wait, a ring of 8 per stream",
             (k++ & 1) ? (cuEventRecord(ring_b[slot & 7], b), cuStreamWaitEvent(c, ring_b[slot & 7], 0), slot++)
                       : (cuEventRecord(ring_a[slot & 7], a), cuStreamWaitEvent(c, ring_a[slot & 7], 0)));
    }
    /* an event of the context, recorded, then asked with no context current */
    cuEventRecord(ev, a);
    cuStreamSynchronize(a);
    cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL);
    cuEventRecord(ev2, b);
    cuCtxSetCurrent(NULL);
    void *none = (void *)1;
    cuCtxGetCurrent(&none);
    R q_done = cuEventQuery(ev), q_any = cuEventQuery(ev2), s_any = cuEventSynchronize(ev2), q_after = cuEventQuery(ev2);
    printf("no context current (cuCtxGetCurrent gives %p): cuEventQuery of a finished event %d, of a recent one %d; "
           "cuEventSynchronize %d, then cuEventQuery %d (0: CUDA_SUCCESS, 600: NOT_READY, 201: INVALID_CONTEXT)\n",
           none, q_done, q_any, s_any, q_after);
    cuCtxSetCurrent(ctx);
    return 0;
}
