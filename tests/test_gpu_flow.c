/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU tests of pipelines: the stream rules proved with data and device
 * clocks, the sink race, waiting for inputs, and a resident pipeline.
 *  - The diamond A -> (B, D) -> C: A is a slow producer (20 ms), B and D
 *    transform its frame (5 ms each, a few blocks: they fit on the GPU
 *    together), C adds them. Every value of every frame is checked; the
 *    device timestamps show B and D after A, overlapping each other, and C
 *    after both. On the calling thread and with 4 worker threads.
 *  - The sink race of pool allocators (Holoscan's warning): first the race
 *    itself with the raw driver (buffer freed on the producer's stream while
 *    a slow sink still reads it: the next frame overwrites it and the sink
 *    sums the wrong data), then the same frames through a cuweave pipeline
 *    whose sink only reads: every sum right.
 *  - wait_inputs: an operator reading on the CPU what a slow kernel upstream
 *    wrote sees the value; the same without wait_inputs does not (the control).
 *  - The diamond as a resident pipeline: 200 requests, each checked, with
 *    B and D overlapping inside the loop's iteration.
 * Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "cwtest.h"
#include "kernels/test_kernels_fatbin.h"
#include "rawcuda.h"

enum { N = 65536, ITS = 4, GRID = 8, BLOCK = 256 };
static const long long A_NS = 20000000, BD_NS = 5000000;

static cw_context *ctx;
static cw_module *mod;
static cw_kernel *k_fill, *k_scale, *k_sum2, *k_reduce, *k_slow_write;

static cw_status launch(cw_kernel *k, cw_stream *s, unsigned grid, void **args) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = grid;
    cfg.block[0] = BLOCK;
    return cw_kernel_launch(k, s, &cfg, args);
}

static cw_devptr ptr_of(cw_buffer *b) {
    cw_devptr p = 0;
    cw_buffer_get_ptr(b, &p);
    return p;
}

/* ---- the diamond ------------------------------------------------------------ */

typedef struct dia {
    unsigned long long stamps;  /* device: [ITS][4][2] */
    unsigned long long results; /* device: [ITS][N] */
    cw_stream *c_stream;
} dia;

typedef struct dop {
    int which; /* 0 A, 1 B, 2 D, 3 C */
    dia *d;
} dop;

static cw_status dia_compute(cw_io *io, void *user) {
    dop *o = (dop *)user;
    cw_io_info io_info = {0};
    cw_status st = cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    if (st) return st;
    unsigned long long stamp = o->d->stamps + (it * 4 + (uint64_t)o->which) * 16;
    unsigned n = N;
    cw_stream *s = NULL;
    if (o->which == 0) {
        if ((st = cw_io_receive_stream(io, NULL, &s))) return st;
        cw_buffer *b = NULL;
        if ((st = cw_io_alloc(&b, io, N * 4))) return st;
        cw_devptr p = 0;
        if ((st = cw_buffer_get_writable(b, &p))) return st;
        unsigned value = (unsigned)it * 1000u + 1u;
        long long ns = A_NS;
        void *args[] = {&p, &n, &value, &ns, &stamp};
        if ((st = launch(k_fill, s, GRID, args))) return st;
        return cw_io_emit(io, "out", NULL, b);
    }
    if (o->which == 1 || o->which == 2) {
        cw_message m;
        if ((st = cw_io_receive(io, "in", &m))) return st;
        if ((st = cw_io_receive_stream(io, "in", &s))) return st;
        cw_buffer *b = NULL;
        if ((st = cw_io_alloc(&b, io, N * 4))) return st;
        cw_devptr in = ptr_of(m.buffer), out = 0;
        if ((st = cw_buffer_get_writable(b, &out))) return st;
        unsigned mul = o->which == 1 ? 2 : 3, add = o->which == 1 ? 1 : 5;
        long long ns = BD_NS;
        void *args[] = {&in, &out, &n, &mul, &add, &ns, &stamp};
        if ((st = launch(k_scale, s, 4, args))) return st;
        return cw_io_emit(io, "out", NULL, b);
    }
    cw_message mb, md;
    if ((st = cw_io_receive(io, "in_b", &mb)) || (st = cw_io_receive(io, "in_d", &md))) return st;
    cw_stream *s2 = NULL;
    if ((st = cw_io_receive_stream(io, "in_b", &s)) || (st = cw_io_receive_stream(io, "in_d", &s2))) return st;
    if (s != s2) return CW_ERROR_INTERNAL;
    o->d->c_stream = s;
    unsigned long long a = ptr_of(mb.buffer), b = ptr_of(md.buffer), out = o->d->results + it * N * 4;
    long long ns = 0;
    void *args[] = {&a, &b, &out, &n, &ns, &stamp};
    return launch(k_sum2, s, GRID, args);
}

static cw_pipeline *build_diamond(dia *d, dop ops[4], unsigned threads) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = threads;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    static const char *names[] = {"A", "B", "D", "C"};
    cw_operator_ops vt = {NULL, dia_compute, NULL, NULL, {0}};
    for (int i = 0; i < 4; i++) {
        ops[i] = (dop){i, d};
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &vt, &ops[i], NULL));
        if (i == 3) {
            assert_cw_ok(cw_operator_add_input(o, "in_b", NULL));
            assert_cw_ok(cw_operator_add_input(o, "in_d", NULL));
        } else {
            if (i) assert_cw_ok(cw_operator_add_input(o, "in", NULL));
            assert_cw_ok(cw_operator_add_output(o, "out", NULL));
        }
        assert_cw_ok(cw_pipeline_add(p, o));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "D", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in_b"));
    assert_cw_ok(cw_pipeline_connect(p, "D", "out", "C", "in_d"));
    return p;
}

static void run_diamond(unsigned threads) {
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    dia d = {0};
    cw_buffer *stamps = NULL, *results = NULL;
    assert_cw_ok(cw_buffer_create(&stamps, s, ITS * 4 * 16));
    assert_cw_ok(cw_buffer_create(&results, s, (size_t)ITS * N * 4));
    d.stamps = ptr_of(stamps);
    d.results = ptr_of(results);
    assert_cw_ok(cw_stream_synchronize(s));
    dop ops[4];
    cw_pipeline *p = build_diamond(&d, ops, threads);
    double t0 = now_ms();
    assert_cw_ok(cw_pipeline_run(p, ITS));
    double host_ms = now_ms() - t0;
    /* the host was not held up by the GPU: 4 iterations with a 20 ms
     * producer each returned long before the GPU finished */
    assert_cw_ok(cw_stream_wait(s, d.c_stream));
    unsigned *host = NULL;
    unsigned long long *st = NULL;
    assert_cw_ok(cw_host_alloc((void **)&host, ctx, (size_t)ITS * N * 4));
    assert_cw_ok(cw_host_alloc((void **)&st, ctx, ITS * 4 * 16));
    assert_cw_ok(cw_copy_to_host(s, host, d.results, (size_t)ITS * N * 4));
    assert_cw_ok(cw_copy_to_host(s, st, d.stamps, ITS * 4 * 16));
    assert_cw_ok(cw_stream_synchronize(s));
    long wrong = 0;
    for (unsigned it = 0; it < ITS; it++)
        for (unsigned i = 0; i < N; i++) {
            unsigned v = it * 1000u + 1u + i;
            if (host[it * N + i] != 5u * v + 6u) wrong++;
        }
    int overlapped = 0;
    for (unsigned it = 0; it < ITS; it++) {
        unsigned long long *a = st + (it * 4 + 0) * 2, *b = st + (it * 4 + 1) * 2, *dd = st + (it * 4 + 2) * 2,
                           *c = st + (it * 4 + 3) * 2;
        printf("# threads %u, iteration %u (us from A's start): A %.0f-%.0f  B %.0f-%.0f  D %.0f-%.0f  C %.0f-%.0f\n",
               threads, it, 0.0, (a[1] - a[0]) / 1e3, (b[0] - a[0]) / 1e3, (b[1] - a[0]) / 1e3,
               (dd[0] - a[0]) / 1e3, (dd[1] - a[0]) / 1e3, (c[0] - a[0]) / 1e3, (c[1] - a[0]) / 1e3);
        assert_true(b[0] >= a[1] && dd[0] >= a[1]);  /* after the producer */
        assert_true(c[0] >= b[1] && c[0] >= dd[1]);  /* after both branches */
        if (b[0] < dd[1] && dd[0] < b[1]) overlapped++;
    }
    printf("# threads %u: %ld of %d values wrong; B and D overlapped in %d of %d iterations; run returned after "
           "%.1f ms (GPU work >= %.0f ms)\n",
           threads, wrong, ITS * N, overlapped, ITS, host_ms, ITS * (A_NS + BD_NS) / 1e6);
    assert_int_equal(wrong, 0);
    if (!cwt_under_sanitizer()) { /* it serializes streams, and slows the host */
        assert_int_equal(overlapped, ITS);
        assert_true(host_ms < ITS * A_NS / 1e6);
    }
    cw_pipeline_destroy(&p);
    cw_host_free(ctx, (void **)&host);
    cw_host_free(ctx, (void **)&st);
    assert_cw_ok(cw_buffer_use(stamps, s));
    assert_cw_ok(cw_buffer_use(results, s));
    cw_buffer_destroy(&stamps);
    cw_buffer_destroy(&results);
    cw_stream_destroy(&s);
}

static void test_diamond(void **state) {
    (void)state;
    run_diamond(1);
}

static void test_diamond_threads(void **state) {
    (void)state;
    run_diamond(4);
}

/* ---- the sink race -------------------------------------------------------- */

enum { RACE_FRAMES = 6 };
static const long long SINK_NS = 10000000;

static unsigned long long expected_sum(unsigned value) {
    unsigned long long s = 0;
    for (unsigned i = 0; i < N; i++) s += (unsigned)(value + i);
    return s;
}

typedef int (*pool_create_fn)(void **, const void *);
typedef int (*pool_destroy_fn)(void *);
typedef int (*alloc_pool_fn)(unsigned long long *, size_t, void *, CUstream);
typedef int (*free_async_fn)(unsigned long long, CUstream);
typedef int (*pool_set_fn)(void *, int, void *);

/* The race with the raw driver: the producer frees on its own stream. */
static int raw_race(unsigned long long *wrong_frames, int *reused) {
    rawcuda rc;
    if (!rawcuda_open(&rc)) return -1;
    pool_create_fn pool_create = (pool_create_fn)dlsym(rc.lib, "cuMemPoolCreate");
    pool_destroy_fn pool_destroy = (pool_destroy_fn)dlsym(rc.lib, "cuMemPoolDestroy");
    alloc_pool_fn alloc = (alloc_pool_fn)dlsym(rc.lib, "cuMemAllocFromPoolAsync");
    free_async_fn freea = (free_async_fn)dlsym(rc.lib, "cuMemFreeAsync");
    pool_set_fn pool_set = (pool_set_fn)dlsym(rc.lib, "cuMemPoolSetAttribute");
    if (!pool_create || !pool_destroy || !alloc || !freea || !pool_set) return -2;
    CUcontext c = NULL;
    rc_device dev = 0;
    if (rc.cuDeviceGet(&dev, 0) || rc.cuDevicePrimaryCtxRetain(&c, dev) || rc.cuCtxSetCurrent(c)) return -3;
    void *m = NULL, *fill = NULL, *reduce = NULL;
    if (rawcuda_kernel(&rc, &m, cw_test_kernels_fatbin, "cw_pl_fill", &fill) ||
        rawcuda_kernel(&rc, &m, cw_test_kernels_fatbin, "cw_pl_reduce", &reduce))
        return -4;
    CUstream sa = NULL, sb = NULL;
    CUevent ev = NULL;
    if (rc.cuStreamCreateWithPriority(&sa, 1, 0) || rc.cuStreamCreateWithPriority(&sb, 1, 0) ||
        rc.cuEventCreate(&ev, 2))
        return -5;
    struct {
        int allocType, handleTypes, locType, locId;
        void *win32;
        size_t maxSize;
        unsigned short usage;
        unsigned char reserved[54];
    } props = {1, 0, 1, 0, NULL, 0, 0, {0}};
    void *pool = NULL;
    if (pool_create(&pool, &props)) return -6;
    /* Keep freed memory mapped: with the default threshold (0) the pool
     * unmaps it at the next synchronisation while the sink still reads it,
     * and the race ends in an illegal-address fault that poisons the
     * context (seen on the H100) instead of in wrong sums. */
    unsigned long long keep = ~0ull;
    if (pool_set(pool, 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */, &keep)) return -6;
    unsigned long long sums = 0;
    if (rc.cuMemAlloc(&sums, RACE_FRAMES * 8) || rc.cuMemsetD32(sums, 0, RACE_FRAMES * 2)) return -7;
    unsigned long long first = 0;
    *reused = 0;
    for (unsigned f = 0; f < RACE_FRAMES; f++) {
        unsigned long long p = 0;
        if (alloc(&p, N * 4, pool, sa)) return -8;
        if (f == 0) first = p;
        else if (p == first) (*reused)++;
        unsigned n = N, value = f * 1000u;
        long long zero = 0, ns = SINK_NS;
        unsigned long long nostamp = 0, sum = sums + f * 8;
        void *fa[] = {&p, &n, &value, &zero, &nostamp};
        if (rc.cuLaunchKernel(fill, GRID, 1, 1, BLOCK, 1, 1, 0, sa, fa, NULL)) return -9;
        if (rc.cuEventRecord(ev, sa) || rc.cuStreamWaitEvent(sb, ev, 0)) return -10;
        void *ra[] = {&p, &n, &sum, &ns};
        if (rc.cuLaunchKernel(reduce, GRID, 1, 1, BLOCK, 1, 1, 0, sb, ra, NULL)) return -11;
        if (freea(p, sa)) return -12; /* the producer's stream: what the allocator sees */
    }
    if (rc.cuStreamSynchronize(sa) || rc.cuStreamSynchronize(sb)) return -13;
    unsigned long long host[RACE_FRAMES];
    if (rc.cuMemcpyDtoH(host, sums, sizeof host)) return -14;
    *wrong_frames = 0;
    for (unsigned f = 0; f < RACE_FRAMES; f++)
        if (host[f] != expected_sum(f * 1000u)) (*wrong_frames)++;
    rc.cuMemFree(sums);
    pool_destroy(pool);
    rc.cuStreamDestroy(sa);
    rc.cuStreamDestroy(sb);
    rc.cuEventDestroy(ev);
    rc.cuModuleUnload(m);
    rc.cuDevicePrimaryCtxRelease(dev);
    return 0;
}

typedef struct race {
    unsigned long long sums;
    unsigned long long addr[RACE_FRAMES];
    cw_stream *sink_stream;
} race;

static cw_status race_src(cw_io *io, void *user) {
    race *r = (race *)user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_buffer *b = NULL;
    cw_stream *s = NULL;
    cw_status st;
    if ((st = cw_io_receive_stream(io, NULL, &s)) || (st = cw_io_alloc(&b, io, N * 4))) return st;
    cw_devptr p = 0;
    if ((st = cw_buffer_get_writable(b, &p))) return st;
    r->addr[it % RACE_FRAMES] = p;
    unsigned n = N, value = (unsigned)it * 1000u;
    long long zero = 0;
    unsigned long long nostamp = 0;
    void *args[] = {&p, &n, &value, &zero, &nostamp};
    if ((st = launch(k_fill, s, GRID, args))) return st;
    return cw_io_emit(io, "out", NULL, b);
}

/* The sink only reads: no code about the buffer's lifetime. */
static cw_status race_sink(cw_io *io, void *user) {
    race *r = (race *)user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_message m;
    cw_stream *s = NULL;
    cw_status st;
    if ((st = cw_io_receive(io, "in", &m)) || (st = cw_io_receive_stream(io, "in", &s))) return st;
    r->sink_stream = s;
    unsigned long long p = ptr_of(m.buffer), sum = r->sums + it * 8;
    unsigned n = N;
    long long ns = SINK_NS;
    void *args[] = {&p, &n, &sum, &ns};
    return launch(k_reduce, s, GRID, args);
}

static void test_sink_race(void **state) {
    (void)state;
    unsigned long long raw_wrong = 0;
    int raw_reused = 0;
    if (cwt_under_sanitizer()) {
        printf("# the raw control is skipped under compute-sanitizer (it serializes streams)\n");
    } else {
        int rr = raw_race(&raw_wrong, &raw_reused);
        assert_int_equal(rr, 0);
        printf("# raw driver, freed on the producer's stream: %llu of %d frames summed wrong (address reused by %d "
               "frames)\n",
               raw_wrong, RACE_FRAMES, raw_reused);
        assert_true(raw_wrong > 0); /* the race is real on this GPU: the test below can fail */
    }

    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    race r = {0};
    cw_buffer *sums = NULL;
    assert_cw_ok(cw_buffer_create(&sums, s, RACE_FRAMES * 8));
    r.sums = ptr_of(sums);
    unsigned long long *host = NULL;
    assert_cw_ok(cw_host_alloc((void **)&host, ctx, RACE_FRAMES * 8));
    assert_cw_ok(cw_copy_to_device(s, r.sums, host, RACE_FRAMES * 8)); /* zeroes */
    assert_cw_ok(cw_stream_synchronize(s));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops so = {NULL, race_src, NULL, NULL, {0}}, ko = {NULL, race_sink, NULL, NULL, {0}};
    cw_operator *o = NULL;
    assert_cw_ok(cw_operator_create(&o, "producer", &so, &r, NULL));
    assert_cw_ok(cw_operator_add_output(o, "out", NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_operator_create(&o, "sink", &ko, &r, NULL));
    assert_cw_ok(cw_operator_add_input(o, "in", NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_pipeline_connect(p, "producer", "out", "sink", "in"));
    assert_cw_ok(cw_pipeline_run(p, RACE_FRAMES));
    assert_cw_ok(cw_stream_wait(s, r.sink_stream));
    assert_cw_ok(cw_copy_to_host(s, host, r.sums, RACE_FRAMES * 8));
    assert_cw_ok(cw_stream_synchronize(s));
    int wrong = 0, reused = 0;
    for (unsigned f = 0; f < RACE_FRAMES; f++) {
        if (host[f] != expected_sum(f * 1000u)) wrong++;
        if (f && r.addr[f] == r.addr[0]) reused++;
    }
    printf("# cuweave pipeline, sink only reads: %d of %d frames summed wrong (address reused by %d frames)\n", wrong,
           RACE_FRAMES, reused);
    assert_int_equal(wrong, 0);
    /* once the sink is done, memory is reused: run again after the GPU caught up */
    cw_pipeline_destroy(&p);
    assert_cw_ok(cw_buffer_use(sums, s));
    cw_buffer_destroy(&sums);
    cw_host_free(ctx, (void **)&host);
    cw_stream_destroy(&s);
}

/* ---- wait_inputs ---------------------------------------------------------- */

typedef struct wi {
    int *host; /* mapped: written by the GPU */
    int seen[ITS];
} wi;

static cw_status wi_src(cw_io *io, void *user) {
    wi *w = (wi *)user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, NULL, &s);
    if (st) return st;
    unsigned long long p = (unsigned long long)(uintptr_t)(w->host + it);
    int value = (int)it + 100;
    long long ns = 20000000;
    void *args[] = {&p, &value, &ns};
    if ((st = launch(k_slow_write, s, 1, args))) return st;
    return cw_io_emit(io, "out", NULL, NULL);
}

static cw_status wi_reader(cw_io *io, void *user) {
    wi *w = (wi *)user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    w->seen[it] = *(volatile int *)(w->host + it); /* read on the CPU, no synchronisation here */
    return CW_SUCCESS;
}

static int run_wait_inputs(int wait) {
    wi w = {0};
    assert_cw_ok(cw_host_alloc((void **)&w.host, ctx, ITS * sizeof(int)));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops so = {NULL, wi_src, NULL, NULL, {0}}, ro = {NULL, wi_reader, NULL, NULL, {0}};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.wait_inputs = wait;
    cw_operator *o = NULL;
    assert_cw_ok(cw_operator_create(&o, "gpu", &so, &w, NULL));
    assert_cw_ok(cw_operator_add_output(o, "out", NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_operator_create(&o, "cpu", &ro, &w, &os));
    assert_cw_ok(cw_operator_add_input(o, "in", NULL));
    assert_cw_ok(cw_pipeline_add(p, o));
    assert_cw_ok(cw_pipeline_connect(p, "gpu", "out", "cpu", "in"));
    assert_cw_ok(cw_pipeline_run(p, ITS));
    cw_context_synchronize(ctx);
    int right = 0;
    for (int i = 0; i < ITS; i++) right += w.seen[i] == i + 100;
    cw_pipeline_destroy(&p);
    cw_host_free(ctx, (void **)&w.host);
    return right;
}

static void test_wait_inputs(void **state) {
    (void)state;
    int with = run_wait_inputs(1), without = run_wait_inputs(0);
    printf("# a CPU reader of a 20 ms kernel's output: %d of %d right with wait_inputs, %d without\n", with, ITS,
           without);
    assert_int_equal(with, ITS);
    if (!cwt_under_sanitizer()) assert_true(without < ITS); /* the control: without the wait the reader is early */
}

/* ---- the resident diamond ---------------------------------------------------- */

enum { RN = 4096, REQUESTS = 200 };
static const long long R_NS = 100000; /* 100 us per branch: enough to see overlap */

typedef struct rdia {
    unsigned long long input, output, stamps;
    int which;
} rdia;

static cw_status rdia_compute(cw_io *io, void *user) {
    rdia *r = (rdia *)user;
    cw_stream *s = NULL;
    cw_status st;
    unsigned n = RN;
    /* the branches' spin only shows overlap, which is not checked under
     * compute-sanitizer (it runs one kernel at a time) */
    long long zero = 0, ns = cwt_under_sanitizer() ? 0 : R_NS;
    unsigned long long stamp = r->stamps + (unsigned long long)r->which * 16;
    if (r->which == 0) {
        cw_devptr out = 0;
        if ((st = cw_io_receive_stream(io, NULL, &s)) || (st = cw_io_get_port_ptr(io, "out", &out))) return st;
        unsigned mul = 1, add = 1;
        void *args[] = {&r->input, &out, &n, &mul, &add, &zero, &stamp};
        return launch(k_scale, s, 4, args);
    }
    if (r->which == 1 || r->which == 2) {
        cw_devptr in = 0, out = 0;
        if ((st = cw_io_receive_stream(io, "in", &s)) || (st = cw_io_get_port_ptr(io, "in", &in)) ||
            (st = cw_io_get_port_ptr(io, "out", &out)))
            return st;
        unsigned mul = r->which == 1 ? 2 : 3, add = 0;
        void *args[] = {&in, &out, &n, &mul, &add, &ns, &stamp};
        return launch(k_scale, s, 2, args);
    }
    cw_devptr a = 0, b = 0;
    if ((st = cw_io_receive_stream(io, "in_b", &s)) || (st = cw_io_receive_stream(io, "in_d", &s)) ||
        (st = cw_io_get_port_ptr(io, "in_b", &a)) || (st = cw_io_get_port_ptr(io, "in_d", &b)))
        return st;
    void *args[] = {&a, &b, &r->output, &n, &zero, &stamp};
    return launch(k_sum2, s, 4, args);
}

static void test_resident_diamond(void **state) {
    (void)state;
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) skip();
    if (cwt_sanitizer_is("synccheck")) {
        /* synccheck reports every barrier in a kernel inside a WHILE graph
         * body as divergent, even with one thread, and aborts the kernel
         * (tools/probes/synccheck_cond.cu shows it with plain CUDA); the
         * diamond's kernels have barriers */
        printf("# the resident diamond is skipped under synccheck (it fails barriers inside a loop's graph)\n");
        skip();
    }
    if (cwt_sanitizer_is("racecheck")) {
        /* Under racecheck this loop served no request in 120 s (H100,
         * 2026-11-22), with or without the branches' spin, while memcheck
         * runs it in a second, and examples/diamond_resident (a resident
         * diamond without barriers, through input slots) runs 1000
         * iterations under racecheck with 0 hazards. Not understood yet:
         * docs/reliability.md. */
        printf("# the resident diamond is skipped under racecheck (it serves nothing there: docs/reliability.md)\n");
        skip();
    }
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *in = NULL, *out = NULL, *stamps = NULL;
    assert_cw_ok(cw_buffer_create(&in, s, RN * 4));
    assert_cw_ok(cw_buffer_create(&out, s, RN * 4));
    assert_cw_ok(cw_buffer_create(&stamps, s, 4 * 16));
    rdia ops[4];
    for (int i = 0; i < 4; i++) ops[i] = (rdia){ptr_of(in), ptr_of(out), ptr_of(stamps), i};
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    static const char *names[] = {"A", "B", "D", "C"};
    cw_operator_ops vt = {NULL, rdia_compute, NULL, NULL, {0}};
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    cw_port_settings sized;
    cw_port_settings_default(&sized);
    sized.bytes = RN * 4;
    for (int i = 0; i < 4; i++) {
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &vt, &ops[i], &os));
        if (i == 3) {
            assert_cw_ok(cw_operator_add_input(o, "in_b", &sized));
            assert_cw_ok(cw_operator_add_input(o, "in_d", NULL)); /* the other end declares it */
        } else {
            if (i) assert_cw_ok(cw_operator_add_input(o, "in", NULL));
            assert_cw_ok(cw_operator_add_output(o, "out", &sized));
        }
        assert_cw_ok(cw_pipeline_add(p, o));
    }
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "D", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in_b"));
    assert_cw_ok(cw_pipeline_connect(p, "D", "out", "C", "in_d"));
    cw_kernel *used[] = {k_scale, k_sum2};
    for (int i = 0; i < 2; i++) assert_cw_ok(cw_kernel_preload(used[i], ctx));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.sync_with_host = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    assert_cw_ok(cw_pipeline_make_resident(p, r));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cw_ok(cw_resident_launch(r));
    unsigned *hin = NULL, *hout = NULL;
    unsigned long long *hst = NULL;
    assert_cw_ok(cw_host_alloc((void **)&hin, ctx, RN * 4));
    assert_cw_ok(cw_host_alloc((void **)&hout, ctx, RN * 4));
    assert_cw_ok(cw_host_alloc((void **)&hst, ctx, 4 * 16));
    long wrong = 0;
    int overlapped = 0, ordered = 0;
    /* an iteration takes milliseconds under memcheck and seconds under
     * racecheck: fewer requests, longer waits */
    const unsigned requests = cwt_under_sanitizer() ? 4 : REQUESTS;
    const uint32_t wait_ms = cwt_under_sanitizer() ? 120000 : 5000;
    for (unsigned q = 0; q < requests; q++) {
        for (unsigned i = 0; i < RN; i++) hin[i] = q * 7u + i;
        assert_cw_ok(cw_copy_to_device(s, ptr_of(in), hin, RN * 4));
        assert_cw_ok(cw_stream_synchronize(s));
        uint64_t seq = 0;
        assert_cw_ok(cw_resident_data_ready(r, &seq));
        assert_cw_ok(cw_resident_wait_result(r, seq, wait_ms));
        assert_cw_ok(cw_copy_to_host(s, hout, ptr_of(out), RN * 4));
        assert_cw_ok(cw_copy_to_host(s, hst, ptr_of(stamps), 4 * 16));
        assert_cw_ok(cw_stream_synchronize(s));
        for (unsigned i = 0; i < RN; i++)
            if (hout[i] != 5u * (q * 7u + i + 1u)) wrong++;
        unsigned long long *a = hst, *b = hst + 2, *d = hst + 4, *c = hst + 6;
        if (b[0] < d[1] && d[0] < b[1]) overlapped++;
        if (b[0] >= a[1] && d[0] >= a[1] && c[0] >= b[1] && c[0] >= d[1]) ordered++;
    }
    assert_cw_ok(cw_resident_tear_down(r, wait_ms));
    cw_resident_info rst;
    assert_cw_ok(cw_resident_get_info(r, &rst));
    printf("# resident diamond: %d requests, %ld values wrong, ordered in %d, B and D overlapped in %d; GPU "
           "iteration median %.1f us\n",
           requests, wrong, ordered, overlapped, rst.iter_median_ns / 1e3);
    assert_int_equal(wrong, 0);
    assert_int_equal(ordered, requests);
    if (!cwt_under_sanitizer()) assert_true(overlapped >= REQUESTS * 9 / 10); /* the tool serializes kernels */
    cw_resident_destroy(&r); /* the loop before the pipeline */
    cw_pipeline_destroy(&p);
    cw_host_free(ctx, (void **)&hin);
    cw_host_free(ctx, (void **)&hout);
    cw_host_free(ctx, (void **)&hst);
    cw_buffer *all[] = {in, out, stamps};
    for (int i = 0; i < 3; i++) {
        assert_cw_ok(cw_buffer_use(all[i], s));
        cw_buffer_destroy(&all[i]);
    }
    cw_stream_destroy(&s);
}

int main(void) {
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS || cw_module_load_image(&mod, cw_test_kernels_fatbin) != CW_SUCCESS ||
        cw_module_get_kernel(mod, "cw_pl_fill", &k_fill) || cw_module_get_kernel(mod, "cw_pl_scale", &k_scale) ||
        cw_module_get_kernel(mod, "cw_pl_sum2", &k_sum2) || cw_module_get_kernel(mod, "cw_pl_reduce", &k_reduce) ||
        cw_module_get_kernel(mod, "cw_slow_write", &k_slow_write)) {
        printf("FAIL: setup: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_diamond_threads),
        cmocka_unit_test(test_sink_race),
        cmocka_unit_test(test_wait_inputs),
        cmocka_unit_test(test_resident_diamond),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_module_destroy(&mod);
    cw_context_destroy(&ctx);
    return rc;
}
