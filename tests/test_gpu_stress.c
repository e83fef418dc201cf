/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU stress and soak (issue 11, items 4 and 5). Counts must match after
 * the run, and every result is checked:
 *
 *  - stress: 16 host threads at once for CWT_STRESS_S seconds (default 3;
 *    60 for the full run). Half of them lease streams from one bounded pool,
 *    order them after a stream of their own, re-arm a future on the lease,
 *    wait for it and give the lease back; the other half make requests to
 *    one resident loop (cw_resident_data_ready from 8 threads at once) and
 *    wait for each one's result. Afterwards: leases acquired == released and
 *    none out, futures armed == completed, loop requests == results ==
 *    iterations on the GPU, every request number seen exactly once.
 *  - soak: one resident loop serves CWT_SOAK_REQUESTS requests (default
 *    200000; 10000000 for the full run), each with its own input value and
 *    its output checked; the resident set size and the device's free memory
 *    are reported at the start and the end (and must not grow by more than
 *    a few MiB).
 *  - fused soak: the same through a fused persistent loop
 *    (cw_resident_set_fused): CWT_FUSED_SOAK_REQUESTS requests (default
 *    100000; 10000000 for the full run, docs/reliability.md "Soak"), on a
 *    grid of CWT_FUSED_SOAK_GRID blocks (default 1), two stages: the last
 *    block computes the result from the request's input into device memory,
 *    block 0 copies it and the request's number to mapped host memory after
 *    the grid barrier; every result checked, GPU iterations == requests,
 *    memory flat as above.
 *
 * Links libcuweave.a. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

static rawcuda rc;
static cw_context *ctx;
static CUcontext cuctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CWT_QUICK=1 (under compute-sanitizer): 1 s of stress, 1000 soak requests. */
static long env_long(const char *name, long dflt, long quick) {
    const char *e = getenv(name);
    if (e && *e) return atol(e);
    const char *q = getenv("CWT_QUICK");
    return q && *q == '1' ? quick : dflt;
}

/* ---- stress ---------------------------------------------------------------- */

enum { THREADS = 16 };

static struct {
    cw_stream_pool *pool;
    cw_resident *loop;
    double until;
    atomic_long acquired, released, armed, completed, requests, results, errors;
    atomic_uchar *seen; /* request numbers seen (loop threads) */
    long seen_cap;
} g;

static void *stream_worker(void *arg) {
    (void)arg;
    cw_stream *own = NULL;
    cw_future *f = NULL;
    if (cw_stream_create(&own, ctx, NULL) != CW_SUCCESS ||
        cw_future_create(&f, own, CW_FUTURE_WRITE_VALUE) != CW_SUCCESS ||
        cw_future_wait(f, 5000000) != CW_SUCCESS) {
        atomic_fetch_add(&g.errors, 1);
        return NULL;
    }
    while (now_s() < g.until) {
        cw_stream *lease = NULL;
        if (cw_stream_pool_acquire(&lease, g.pool, 1000000) != CW_SUCCESS) {
            atomic_fetch_add(&g.errors, 1);
            break;
        }
        atomic_fetch_add(&g.acquired, 1);
        cw_status st = cw_stream_wait(lease, own);
        if (st == CW_SUCCESS) st = cw_future_rearm(f, lease);
        if (st == CW_SUCCESS) atomic_fetch_add(&g.armed, 1);
        if (st == CW_SUCCESS) st = cw_future_wait(f, 5000000);
        if (st == CW_SUCCESS) atomic_fetch_add(&g.completed, 1);
        if (st != CW_SUCCESS) atomic_fetch_add(&g.errors, 1);
        if (cw_stream_pool_release(g.pool, &lease) == CW_SUCCESS)
            atomic_fetch_add(&g.released, 1);
        else
            atomic_fetch_add(&g.errors, 1);
    }
    cw_future_destroy(&f);
    cw_stream_destroy(&own);
    return NULL;
}

static void *loop_worker(void *arg) {
    (void)arg;
    while (now_s() < g.until) {
        uint64_t seq = 0;
        if (cw_resident_data_ready(g.loop, &seq) != CW_SUCCESS) {
            atomic_fetch_add(&g.errors, 1);
            break;
        }
        atomic_fetch_add(&g.requests, 1);
        if (seq == 0 || (long)seq > g.seen_cap || atomic_fetch_add(&g.seen[seq - 1], 1) != 0)
            atomic_fetch_add(&g.errors, 1); /* out of range, or a number handed out twice */
        if (cw_resident_wait_result(g.loop, seq, 5000) != CW_SUCCESS) {
            atomic_fetch_add(&g.errors, 1);
            break;
        }
        atomic_fetch_add(&g.results, 1);
    }
    return NULL;
}

static void test_stress_16_threads(void **state) {
    (void)state;
    const long seconds = env_long("CWT_STRESS_S", 3, 1);
    cw_stream_pool_settings ps;
    cw_stream_pool_settings_default(&ps);
    ps.max_streams = 4; /* fewer streams than stream threads: acquire_wait waits */
    assert_cw_ok(cw_stream_pool_create(&g.pool, ctx, &ps));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    assert_cw_ok(cw_resident_create(&g.loop, ctx, &rs));
    assert_cw_ok(cw_resident_launch(g.loop));
    g.seen_cap = 20000000;
    g.seen = calloc((size_t)g.seen_cap, 1);
    assert_non_null(g.seen);
    g.until = now_s() + (double)seconds;
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, i % 2 ? loop_worker : stream_worker, NULL), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    cw_resident_info st;
    assert_cw_ok(cw_resident_get_info(g.loop, &st));
    cw_stream_pool_info pst;
    assert_cw_ok(cw_stream_pool_get_info(g.pool, &pst));
    long once = 0;
    for (long i = 0; i < (long)st.requested && i < g.seen_cap; i++) once += g.seen[i] == 1;
    printf("# stress, %d threads, %ld s: %ld leases (%ld released, %zu out, %zu streams), %ld futures armed "
           "(%ld completed), %ld loop requests (%ld results, %llu iterations on the GPU, %ld numbers seen once), "
           "%ld errors\n",
           THREADS, seconds, atomic_load(&g.acquired), atomic_load(&g.released), pst.leased, pst.created,
           atomic_load(&g.armed), atomic_load(&g.completed), atomic_load(&g.requests), atomic_load(&g.results),
           (unsigned long long)st.iterations, once, atomic_load(&g.errors));
    assert_int_equal(atomic_load(&g.errors), 0);
    assert_int_equal(atomic_load(&g.acquired), atomic_load(&g.released));
    assert_int_equal(pst.leased, 0);
    assert_true(pst.created <= 4);
    assert_int_equal(atomic_load(&g.armed), atomic_load(&g.completed));
    assert_int_equal(atomic_load(&g.requests), atomic_load(&g.results));
    assert_int_equal((long)st.requested, atomic_load(&g.requests));
    assert_int_equal((long)st.completed, atomic_load(&g.requests));
    assert_int_equal((long)st.iterations, atomic_load(&g.requests));
    assert_int_equal(once, atomic_load(&g.requests));
    assert_true(atomic_load(&g.acquired) > 0 && atomic_load(&g.requests) > 0);
    cw_resident_destroy(&g.loop);
    cw_stream_pool_destroy(&g.pool);
    free(g.seen);
}

/* ---- soak ------------------------------------------------------------------ */

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_soak_resident(void **state) {
    (void)state;
    const long n = env_long("CWT_SOAK_REQUESTS", 200000, 1000);
    rc_result (*mem_info)(size_t *, size_t *) = (rc_result(*)(size_t *, size_t *))dlsym(rc.lib, "cuMemGetInfo_v2");
    assert_non_null(mem_info);
    void *module = NULL, *apply = NULL;
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(rawcuda_kernel(&rc, &module, cw_test_kernels_fatbin, "cw_res_apply", &apply));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.input_slots = 2;
    rs.input_bytes = 4;
    rs.sync_with_host = 1;
    rs.gate = CW_RESIDENT_GATE_KERNELS;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    cw_devptr ctl = 0;
    assert_cw_ok(cw_resident_get_ctl(r, &ctl));
    /* output and staging in mapped pinned memory: the host reads and writes them directly */
    unsigned *out = NULL, *stage = NULL;
    assert_cu_ok(rc.cuMemHostAlloc((void **)&out, 64, 0x01 | 0x02));
    assert_cu_ok(rc.cuMemHostAlloc((void **)&stage, 64, 0x01));
    unsigned long long out_d = 0, log = 0, cap = 0;
    assert_cu_ok(rc.cuMemHostGetDevicePointer(&out_d, out, 0));
    void *args[] = {&ctl, &out_d, &log, &cap};
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    CUstream h = NULL;
    assert_cw_ok(cwt_stream_handle(s, &h));
    cw_graph *g2 = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cu_ok(rawcuda_launch1(&rc, apply, h, args));
    assert_cw_ok(cw_capture_end(&g2, s));
    assert_cw_ok(cw_resident_set_workload(r, g2));
    cw_graph_destroy(&g2);
    assert_cw_ok(cw_resident_launch(r));
    size_t free0 = 0, total = 0, free1 = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(mem_info(&free0, &total));
    const long rss0 = rss_kib();
    const double t0 = now_s();
    long bad = 0;
    for (long i = 1; i <= n; i++) {
        cw_devptr slot = 0;
        assert_cw_ok(cw_resident_next_input(r, 2000, &slot));
        const unsigned v = (unsigned)i * 2654435761u;
        *stage = v;
        assert_cu_ok(rc.cuMemcpyHtoD(slot, stage, 4)); /* pinned: done when it returns */
        uint64_t seq = 0;
        assert_cw_ok(cw_resident_data_ready(r, &seq));
        assert_cw_ok(cw_resident_wait_result(r, seq, 2000));
        const volatile unsigned *o = out;
        if (o[0] != v * 3u + 1u || o[1] != (unsigned)seq) bad++;
    }
    const double dt = now_s() - t0;
    cw_resident_info st;
    assert_cw_ok(cw_resident_get_info(r, &st));
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(mem_info(&free1, &total));
    const long rss1 = rss_kib();
    printf("# soak: %ld requests in %.1f s (%.2f us each), %ld wrong; %llu iterations on the GPU, median %.2f us; "
           "resident set %ld -> %ld KiB; device free %zu -> %zu MiB\n",
           n, dt, dt / (double)n * 1e6, bad, (unsigned long long)st.iterations, st.iter_median_ns / 1e3, rss0, rss1,
           free0 >> 20, free1 >> 20);
    assert_int_equal(bad, 0);
    assert_int_equal((long)st.iterations, n);
    assert_true(rss1 - rss0 < 8 * 1024);                 /* flat: less than 8 MiB of growth */
    assert_true(free0 < free1 + ((size_t)8 << 20));     /* device memory flat too */
    assert_cw_ok(cw_resident_tear_down(r, 2000));
    cw_resident_destroy(&r);
    cw_stream_destroy(&s);
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(rc.cuMemFreeHost(out));
    assert_cu_ok(rc.cuMemFreeHost(stage));
    assert_cu_ok(rc.cuModuleUnload(module));
}

/* The fused soak's two stages. user: the device address of a struct
 * soak_dev in device memory: the mapped host block's device address (struct
 * fused_io: the inputs and the result) and the scratch word between the
 * stages, so that the one read of host memory a request makes is its input. */
static const char kFusedSoak[] =
    "struct fused_io { unsigned in[2]; unsigned out[2]; };\n"
    "struct soak_dev { fused_io *io; unsigned scratch; unsigned pad; };\n"
    "extern \"C\" __device__ void soak_compute(cw_resident_ctl *ctl, void *user) {\n"
    "    if (blockIdx.x != gridDim.x - 1u || threadIdx.x != 0u) return;\n"
    "    soak_dev *d = (soak_dev *)user;\n"
    "    volatile fused_io *io = d->io;\n"
    "    const unsigned long long seq = cw_resident_sequence(ctl);\n"
    "    *(volatile unsigned *)&d->scratch = io->in[seq & 1ull] * 3u + 1u;\n"
    "}\n"
    "extern \"C\" __device__ void soak_publish(cw_resident_ctl *ctl, void *user) {\n"
    "    if (blockIdx.x != 0u || threadIdx.x != 0u) return;\n"
    "    soak_dev *d = (soak_dev *)user;\n"
    "    volatile fused_io *io = d->io;\n"
    "    io->out[0] = *(volatile unsigned *)&d->scratch;\n"
    "    io->out[1] = (unsigned)cw_resident_sequence(ctl);\n"
    "}\n";

typedef struct fused_io {
    unsigned in[2];  /* request n's input: in[n & 1] */
    unsigned out[2]; /* the last result and its request's number */
} fused_io;

typedef struct soak_dev {
    unsigned long long io; /* device address of the fused_io */
    unsigned scratch, pad;
} soak_dev;

static void test_soak_fused(void **state) {
    (void)state;
    const long n = env_long("CWT_FUSED_SOAK_REQUESTS", 100000, 1000);
    const long grid = env_long("CWT_FUSED_SOAK_GRID", 1, 1);
    assert_true(grid >= 1);
    rc_result (*mem_info)(size_t *, size_t *) = (rc_result(*)(size_t *, size_t *))dlsym(rc.lib, "cuMemGetInfo_v2");
    assert_non_null(mem_info);
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    fused_io *io = NULL;
    assert_cu_ok(rc.cuMemHostAlloc((void **)&io, sizeof *io, 0x01 | 0x02));
    memset(io, 0, sizeof *io);
    unsigned long long io_d = 0, dev = 0;
    assert_cu_ok(rc.cuMemHostGetDevicePointer(&io_d, io, 0));
    assert_cu_ok(rc.cuMemAlloc(&dev, sizeof(soak_dev)));
    soak_dev init = {io_d, 0, 0};
    assert_cu_ok(rc.cuMemcpyHtoD(dev, &init, sizeof init));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.sleep_interval_us = 0;
    rs.sync_with_host = 1;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    static const char *const stages[] = {"soak_compute", "soak_publish"};
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kFusedSoak;
    f.stages = stages;
    f.stage_count = 2;
    f.grid_blocks = (uint32_t)grid;
    f.block_threads = 64;
    f.user = dev;
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_launch(r));
    size_t free0 = 0, total = 0, free1 = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(mem_info(&free0, &total));
    const long rss0 = rss_kib();
    const double t0 = now_s();
    long bad = 0;
    volatile fused_io *vio = io;
    for (long i = 1; i <= n; i++) {
        const unsigned v = (unsigned)i * 2654435761u;
        /* request i is the loop's i-th (a fresh loop numbers from 1) */
        vio->in[i & 1] = v;
        __atomic_thread_fence(__ATOMIC_RELEASE);
        uint64_t seq = 0;
        assert_cw_ok(cw_resident_data_ready(r, &seq));
        if (seq != (uint64_t)i) {
            bad++;
            break;
        }
        assert_cw_ok(cw_resident_wait_result(r, seq, 2000));
        if (vio->out[0] != v * 3u + 1u || vio->out[1] != (unsigned)seq) bad++;
    }
    const double dt = now_s() - t0;
    cw_resident_info st;
    assert_cw_ok(cw_resident_get_info(r, &st));
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(mem_info(&free1, &total));
    const long rss1 = rss_kib();
    printf("# fused soak (grid %ld): %ld requests in %.1f s (%.2f us each), %ld wrong; %llu iterations on the GPU, "
           "median %.2f us; resident set %ld -> %ld KiB; device free %zu -> %zu MiB\n",
           grid, n, dt, dt / (double)n * 1e6, bad, (unsigned long long)st.iterations, st.iter_median_ns / 1e3, rss0,
           rss1, free0 >> 20, free1 >> 20);
    assert_int_equal(bad, 0);
    assert_int_equal((long)st.iterations, n);
    assert_int_equal((long)st.completed, n);
    assert_true(rss1 - rss0 < 8 * 1024);             /* flat: less than 8 MiB of growth */
    assert_true(free0 < free1 + ((size_t)8 << 20)); /* device memory flat too */
    assert_cw_ok(cw_resident_tear_down(r, 2000));
    cw_resident_destroy(&r);
    assert_cu_ok(rc.cuCtxSetCurrent(cuctx));
    assert_cu_ok(rc.cuMemFree(dev));
    assert_cu_ok(rc.cuMemFreeHost(io));
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    if (cwt_context_handle(ctx, &cuctx) != CW_SUCCESS) return -1;
    return rc.cuCtxSetCurrent(cuctx) == 0 ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    rc.cuCtxSetCurrent(NULL);
    cw_context_destroy(&ctx);
    return 0;
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_16_threads),
        cmocka_unit_test(test_soak_resident),
        cmocka_unit_test(test_soak_fused),
    };
    cwt_filter_from_env(); /* CWT_FILTER=test_soak_fused: the fused soak alone */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
