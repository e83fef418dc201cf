/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Two GPUs of one host, checked with data (needs at least two devices; with
 * one or none every test skips, saying why):
 *  - ordering across devices: a slow writer on one GPU, a reader on the
 *    other (a peer copy, and a kernel reading the peer's memory directly),
 *    right every time with cw_stream_wait and early without it (the
 *    control), both directions;
 *  - a diamond pipeline over two devices: A and C on GPU 0, B on GPU 1, D on
 *    GPU 0; buffers moved across by the pipeline; every value of every
 *    iteration checked, with one host thread and with four;
 *  - two resident loops, one per GPU, served together from one thread
 *    (cw_resident_data_ready on each, then cw_resident_wait_result on each),
 *    every result checked;
 *  - an all-reduce and a broadcast through NCCL on cuweave streams, ordered
 *    after a slow producer with cw_stream_wait: every element checked, and
 *    the caller's current context unchanged.
 * The binary first runs itself again (before touching the GPU) with
 * CWT_MULTI_NO_PEER=1: that pass never enables peer access, so peer copies
 * and the pipeline's moves go the way a machine without a peer path takes
 * (the driver stages through host memory), checked the same way.
 * NCCL_NVLS_ENABLE=0 is set before anything can load NCCL (NVLink multicast
 * is off on the machines this runs on); nothing calls cuMulticastCreate.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "kernels/test_kernels_fatbin.h"
#include "rawcuda.h"

enum { N = 65536, ITS = 4, GRID = 8, BLOCK = 256 };
static const long long SLOW_NS = 50000000; /* 50 ms: far longer than any copy or launch */

static rawcuda rc;
static cw_device_group *set;
static cw_context *ctx[2];
static cw_module *mod;
static int no_peer;     /* the CWT_MULTI_NO_PEER pass */
static int child_status = -1;
static cw_kernel *k_slow_write, *k_copy_int, *k_fill, *k_scale, *k_sum2, *k_gload, *k_gmul, *k_gstore;

static cw_status launch(cw_kernel *k, cw_stream *s, unsigned grid, unsigned block, void **args) {
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = grid;
    cfg.block[0] = block;
    return cw_kernel_launch(k, s, &cfg, args);
}

static cw_devptr ptr_of(cw_buffer *b) {
    cw_devptr p = 0;
    cw_buffer_get_ptr(b, &p);
    return p;
}

static int read_int(cw_stream *s, cw_devptr p) {
    int v = -1;
    assert_cw_ok(cw_copy_to_host(s, &v, p, sizeof v));
    assert_cw_ok(cw_stream_synchronize(s));
    return v;
}

/* ---- ordering across devices -------------------------------------------------- */

/* Peer access for every ordered pair of the group the topology allows (a
 * loop users write: cw_device_get_peer_info, cw_context_enable_peer). */
static int enable_all_peers(void) {
    cw_device_group_info gi;
    assert_cw_ok(cw_device_group_get_info(set, &gi));
    int enabled = 0;
    for (int a = 0; a < gi.count; a++)
        for (int b = 0; b < gi.count; b++) {
            cw_peer_info pi;
            if (a == b) continue;
            assert_cw_ok(cw_device_get_peer_info(gi.devices[a], gi.devices[b], &pi));
            if (!pi.can_access) continue;
            assert_cw_ok(cw_context_enable_peer(gi.contexts[a], gi.contexts[b]));
            enabled++;
        }
    return enabled;
}

static void test_cross_device_ordering(void **state) {
    (void)state;
    int enabled = 0;
    if (!no_peer) enabled = enable_all_peers();
    printf("# peer access: %d ordered pairs enabled%s\n", enabled, no_peer ? " (the pass without peer access)" : "");
    /* the two GPUs this runs on have a peer path both ways */
    assert_int_equal(enabled, no_peer ? 0 : 2);
    for (int dir = 0; dir < 2; dir++) {
        const int w = dir, r = 1 - dir; /* writer's and reader's device */
        cw_stream *sw = NULL, *sr = NULL;
        assert_cw_ok(cw_stream_create(&sw, ctx[w], NULL));
        assert_cw_ok(cw_stream_create(&sr, ctx[r], NULL));
        cw_buffer *x = NULL, *y = NULL;
        assert_cw_ok(cw_buffer_create(&x, sw, 64));
        assert_cw_ok(cw_buffer_create(&y, sr, 64));
        cw_devptr px = ptr_of(x), py = ptr_of(y);
        int zero[16] = {0};
        assert_cw_ok(cw_copy_to_device(sw, px, zero, sizeof zero));
        assert_cw_ok(cw_stream_synchronize(sw));
        const int peer_ok = !no_peer; /* enabled both ways above (or never, in this pass) */
        /* Three readers: a peer copy with the wait, a kernel reading the peer's
         * memory with the wait (peer access only), a peer copy without (control). */
        int right_copy = 0, right_kernel = 0, early = 0;
        for (int it = 1; it <= ITS; it++) {
            int value = it * 10 + dir;
            long long ns = SLOW_NS;
            void *wa[] = {&px, &value, &ns};
            assert_cw_ok(launch(k_slow_write, sw, 1, 1, wa));
            assert_cw_ok(cw_stream_wait(sr, sw));
            assert_cw_ok(cw_copy_peer(sr, py, ctx[r], px, ctx[w], sizeof(int)));
            if (read_int(sr, py) == value) right_copy++;
            if (peer_ok) {
                value += 1000;
                void *wb[] = {&px, &value, &ns};
                assert_cw_ok(launch(k_slow_write, sw, 1, 1, wb));
                assert_cw_ok(cw_stream_wait(sr, sw));
                cw_devptr pyk = py + 4;
                void *ra[] = {&px, &pyk};
                assert_cw_ok(launch(k_copy_int, sr, 1, 1, ra));
                if (read_int(sr, pyk) == value) right_kernel++;
            }
            /* The control: no wait, so the copy reads before the write. */
            value += 1000;
            void *wc[] = {&px, &value, &ns};
            assert_cw_ok(launch(k_slow_write, sw, 1, 1, wc));
            assert_cw_ok(cw_copy_peer(sr, py, ctx[r], px, ctx[w], sizeof(int)));
            if (read_int(sr, py) != value) early++;
            assert_cw_ok(cw_stream_synchronize(sw));
        }
        printf("# writer GPU %d, reader GPU %d: peer copy right %d/%d, peer kernel right %d/%d%s, "
               "control (no wait) early %d/%d\n",
               w, r, right_copy, ITS, right_kernel, peer_ok ? ITS : 0, peer_ok ? "" : " (no peer access)", early,
               ITS);
        assert_int_equal(right_copy, ITS);
        if (peer_ok) assert_int_equal(right_kernel, ITS);
        if (!cwt_under_sanitizer()) assert_true(early > 0);
        cw_buffer_destroy(&x);
        cw_buffer_destroy(&y);
        cw_stream_destroy(&sw);
        cw_stream_destroy(&sr);
    }
}

/* ---- a diamond over two devices ------------------------------------------------ */

typedef struct dia {
    cw_devptr results; /* device 0: [ITS][N] */
    int wrong_device;
} dia;

typedef struct dop {
    int which;  /* 0 A, 1 B, 2 D, 3 C */
    int device; /* where its inputs must arrive */
    dia *d;
} dop;

static cw_status dia_compute(cw_io *io, void *user) {
    dop *o = (dop *)user;
    cw_io_info io_info = {0};
    cw_status st = cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    if (st) return st;
    unsigned n = N;
    cw_stream *s = NULL;
    long long ns = 0;
    unsigned long long nostamp = 0;
    if (o->which == 0) {
        if ((st = cw_io_receive_stream(io, NULL, &s))) return st;
        cw_buffer *b = NULL;
        if ((st = cw_io_alloc(&b, io, N * 4))) return st;
        cw_devptr p = 0;
        if ((st = cw_buffer_get_writable(b, &p))) return st;
        unsigned value = (unsigned)it * 1000u + 1u;
        ns = 20000000; /* a slow producer: its consumers must wait for it, also on GPU 1 */
        void *args[] = {&p, &n, &value, &ns, &nostamp};
        if ((st = launch(k_fill, s, GRID, BLOCK, args))) return st;
        return cw_io_emit(io, "out", NULL, b);
    }
    cw_message m[2];
    const char *ports[2] = {o->which == 3 ? "in_b" : "in", "in_d"};
    int nin = o->which == 3 ? 2 : 1;
    for (int i = 0; i < nin; i++) {
        if ((st = cw_io_receive(io, ports[i], &m[i]))) return st;
        cw_buffer_info bi;
        int dev = -1;
        cw_buffer_get_info(m[i].buffer, &bi);
        cwt_context_device(bi.context, &dev);
        if (dev != o->device || bi.device != o->device) o->d->wrong_device++;
        if ((st = cw_io_receive_stream(io, ports[i], &s))) return st;
    }
    int sdev = -1;
    cwt_stream_device(s, &sdev);
    if (sdev != o->device) o->d->wrong_device++;
    if (o->which == 1 || o->which == 2) {
        cw_buffer *b = NULL;
        if ((st = cw_io_alloc(&b, io, N * 4))) return st;
        cw_devptr in = ptr_of(m[0].buffer), out = 0;
        if ((st = cw_buffer_get_writable(b, &out))) return st;
        unsigned mul = o->which == 1 ? 2 : 3, add = o->which == 1 ? 1 : 5;
        ns = 5000000;
        void *args[] = {&in, &out, &n, &mul, &add, &ns, &nostamp};
        if ((st = launch(k_scale, s, 4, BLOCK, args))) return st;
        return cw_io_emit(io, "out", NULL, b);
    }
    cw_devptr a = ptr_of(m[0].buffer), b = ptr_of(m[1].buffer), out = o->d->results + it * N * 4;
    void *args[] = {&a, &b, &out, &n, &ns, &nostamp};
    return launch(k_sum2, s, GRID, BLOCK, args);
}

typedef struct moves_seen {
    int staged, direct;
} moves_seen;

static void count_moves(void *user, cw_log_level level, const char *msg) {
    moves_seen *m = user;
    (void)level;
    if (strstr(msg, "without peer access: the driver stages")) m->staged++;
    if (strstr(msg, "with direct peer copies")) m->direct++;
}

static void run_diamond(unsigned threads) {
    cw_stream_pool *pool1 = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool1, ctx[1], NULL));
    cw_stream *s0 = NULL;
    assert_cw_ok(cw_stream_create(&s0, ctx[0], NULL));
    cw_buffer *res = NULL;
    assert_cw_ok(cw_buffer_create(&res, s0, (size_t)ITS * N * 4));
    dia d = {ptr_of(res), 0};
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = threads;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx[0], &ps));
    static const char *names[] = {"A", "B", "D", "C"};
    dop ops[4];
    cw_operator_ops vt = {NULL, dia_compute, NULL, NULL, {0}};
    for (int i = 0; i < 4; i++) {
        ops[i] = (dop){i, i == 1 ? 1 : 0, &d};
        cw_operator_settings os;
        cw_operator_settings_default(&os);
        if (i == 1) os.pool = pool1; /* B runs on GPU 1 */
        cw_operator *o = NULL;
        assert_cw_ok(cw_operator_create(&o, names[i], &vt, &ops[i], &os));
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
    struct timespec t0, t1;
    moves_seen seen = {0, 0};
    assert_cw_ok(cw_log_set_callback(count_moves, &seen, CW_LOG_INFO));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_cw_ok(cw_pipeline_run(p, ITS));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    unsigned *host = malloc((size_t)ITS * N * 4);
    assert_cw_ok(cw_copy_to_host(s0, host, d.results, (size_t)ITS * N * 4));
    assert_cw_ok(cw_stream_synchronize(s0));
    long wrong = 0;
    for (unsigned it = 0; it < ITS; it++)
        for (unsigned i = 0; i < N; i++) {
            unsigned v = it * 1000u + 1u + i;
            if (host[(size_t)it * N + i] != (v * 2u + 1u) + (v * 3u + 5u)) wrong++;
        }
    cw_pipeline_info st;
    assert_cw_ok(cw_pipeline_get_info(p, &st));
    printf("# two-device diamond, %u thread(s)%s: %ld of %d values wrong, %d inputs on the wrong device, "
           "%llu peer copies (connections logged: %d staged, %d direct), run returned in %.1f ms "
           "(A is 20 ms a frame)\n",
           threads, no_peer ? ", no peer access" : "", wrong, ITS * N, d.wrong_device,
           (unsigned long long)st.peer_copies, seen.staged, seen.direct,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    assert_int_equal(no_peer ? seen.staged : seen.direct, 2);
    assert_int_equal(no_peer ? seen.direct : seen.staged, 0);
    assert_int_equal(wrong, 0);
    assert_int_equal(d.wrong_device, 0);
    assert_int_equal(st.peer_copies, 2 * ITS); /* A -> B and B -> C, each iteration */
    free(host);
    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&res);
    cw_stream_destroy(&s0);
    cw_stream_pool_destroy(&pool1);
}

static void test_two_device_diamond(void **state) {
    (void)state;
    run_diamond(1);
    run_diamond(4);
}

/* ---- two resident loops served together --------------------------------------------- */

typedef struct loop {
    cw_resident *r;
    cw_devptr ctl;
    unsigned long long in_d, out_d, buf;
    volatile unsigned *in, *out;
    cw_buffer *scratch;
} loop;

static cw_status loop_capture(cw_stream *s, void *user) {
    loop *l = user;
    void *a1[] = {&l->ctl, &l->in_d, &l->buf};
    void *a2[] = {&l->ctl, &l->buf};
    void *a3[] = {&l->ctl, &l->buf, &l->out_d};
    cw_status st = launch(k_gload, s, 1, 1, a1);
    if (!st) st = launch(k_gmul, s, 1, 1, a2);
    if (!st) st = launch(k_gstore, s, 1, 1, a3);
    return st;
}

static loop L[2];
static void *page;

/* Whatever the test left (after a failed assertion too): no loop may keep
 * running into the next test, whose loads would wait for it. */
static int loops_teardown(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        if (L[d].r) {
            (void)cw_resident_tear_down(L[d].r, 1000);
            cw_resident_destroy(&L[d].r);
        }
        cw_buffer_destroy(&L[d].scratch);
    }
    if (page) cw_host_free(ctx[0], &page);
    page = NULL;
    return 0;
}

static void test_two_resident_loops(void **state) {
    (void)state;
    const unsigned n = cwt_under_sanitizer() ? 200 : 20000;
    assert_cw_ok(cw_host_alloc(&page, ctx[0], 4096));
    cw_resident *rs[2];
    for (int d = 0; d < 2; d++) {
        loop *l = &L[d];
        memset(l, 0, sizeof *l);
        l->in = (volatile unsigned *)((char *)page + 256 * d);
        l->out = (volatile unsigned *)((char *)page + 256 * d + 128);
        l->in_d = (unsigned long long)(uintptr_t)l->in; /* portable mapped memory: one address (UVA) */
        l->out_d = (unsigned long long)(uintptr_t)l->out;
        cw_stream *s = NULL;
        assert_cw_ok(cw_stream_create(&s, ctx[d], NULL));
        assert_cw_ok(cw_buffer_create(&l->scratch, s, 64));
        l->buf = ptr_of(l->scratch);
        assert_cw_ok(cw_stream_synchronize(s));
        cw_stream_destroy(&s);
        cw_resident_settings rs_set;
        cw_resident_settings_default(&rs_set);
        rs_set.sleep_interval_us = 0;
        rs_set.gate = CW_RESIDENT_GATE_KERNELS;
        rs_set.sync_with_host = 1;
        rs_set.unroll = 8;
        assert_cw_ok(cw_resident_create(&l->r, ctx[d], &rs_set));
        assert_cw_ok(cw_resident_get_ctl(l->r, &l->ctl));
        assert_cw_ok(cw_resident_set_workload_fn(l->r, loop_capture, l));
        rs[d] = l->r;
    }
    /* Build every loop before launching any: building loads code, which
     * waits for running kernels, and a launched loop never stops running. */
    for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_build(rs[d]));
    for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_launch(rs[d]));
    unsigned wrong = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1; i <= n; i++) {
        L[0].in[0] = i;
        L[1].in[0] = i * 7u + 3u;
        uint64_t seqs[2] = {0, 0};
        for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_data_ready(rs[d], &seqs[d]));
        assert_int_equal(seqs[0], i);
        assert_int_equal(seqs[1], i);
        for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_wait_result(rs[d], seqs[d], 2000));
        if (L[0].out[0] != (i + 1u) * 3u + 7u) wrong++;
        if (L[1].out[0] != (i * 7u + 3u + 1u) * 3u + 7u) wrong++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
    cw_resident_info st[2];
    for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_get_info(rs[d], &st[d]));
    printf("# two resident loops served together: %u rounds, %u results wrong, %.2f us a round (both), "
           "iterations %llu and %llu, GPU iteration medians %.2f and %.2f us\n",
           n, wrong, us, (unsigned long long)st[0].iterations, (unsigned long long)st[1].iterations,
           st[0].iter_median_ns / 1e3, st[1].iter_median_ns / 1e3);
    assert_int_equal(wrong, 0);
    assert_int_equal(st[0].iterations, n);
    assert_int_equal(st[1].iterations, n);
    /* A wait for a request never made is refused. */
    assert_cw_ok(cw_resident_wait_result(rs[0], n, 10));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_wait_result(rs[1], n + 5, 10));
    for (int d = 0; d < 2; d++) assert_cw_ok(cw_resident_tear_down(rs[d], 1000));
}

/* ---- NCCL ---------------------------------------------------------------------------- */

static void test_all_reduce(void **state) {
    (void)state;
    cw_versions vs;
    assert_cw_ok(cw_get_versions(&vs));
    const int version = vs.nccl;
    if (version == 0) {
        printf("# SKIP all-reduce: no NCCL (CUWEAVE_LIBNCCL, libnccl.so.2)\n");
        skip();
        return;
    }
    printf("# NCCL %d, NCCL_NVLS_ENABLE=%s\n", version, getenv("NCCL_NVLS_ENABLE"));
    CUcontext before = NULL, after = NULL;
    assert_int_equal(rc.cuCtxGetCurrent(&before), 0);
    cw_comm *comm = NULL;
    assert_cw_ok(cw_comm_create(&comm, ctx, 2));
    assert_int_equal(rc.cuCtxGetCurrent(&after), 0);
    assert_ptr_equal(before, after);

    enum { COUNT = 1 << 20 };
    cw_stream *fill[2], *coll[2], *use[2];
    cw_buffer *buf[2];
    cw_devptr send[2], recv[2];
    float *host = malloc(COUNT * sizeof(float));
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_create(&fill[r], ctx[r], NULL));
        assert_cw_ok(cw_stream_create(&coll[r], ctx[r], NULL));
        assert_cw_ok(cw_stream_create(&use[r], ctx[r], NULL));
        assert_cw_ok(cw_buffer_create(&buf[r], fill[r], 2ull * COUNT * sizeof(float)));
        assert_cw_ok(cw_buffer_get_writable(buf[r], &send[r]));
        recv[r] = send[r] + COUNT * sizeof(float);
        for (int i = 0; i < COUNT; i++) host[i] = (float)((r + 1) * (i % 1000));
        assert_cw_ok(cw_copy_to_device(fill[r], send[r], host, COUNT * sizeof(float)));
        assert_cw_ok(cw_stream_synchronize(fill[r]));
    }
    /* A slow producer on rank 1's fill stream writes element 0 after 50 ms
     * (as an int: the bits of 1000.0f); the collective's streams wait for the
     * producers with cw_stream_wait, the readers for the collective. */
    int bits;
    float thousand = 1000.0f;
    memcpy(&bits, &thousand, sizeof bits);
    long long ns = SLOW_NS;
    void *wa[] = {&send[1], &bits, &ns};
    assert_cw_ok(launch(k_slow_write, fill[1], 1, 1, wa));
    for (int r = 0; r < 2; r++) assert_cw_ok(cw_stream_wait(coll[r], fill[r]));
    assert_cw_ok(cw_comm_all_reduce(comm, send, recv, COUNT, CW_FLOAT32, CW_SUM, coll));
    assert_int_equal(rc.cuCtxGetCurrent(&after), 0);
    assert_ptr_equal(before, after);
    long wrong = 0;
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_wait(use[r], coll[r]));
        assert_cw_ok(cw_copy_to_host(use[r], host, recv[r], COUNT * sizeof(float)));
        assert_cw_ok(cw_stream_synchronize(use[r]));
        if (host[0] != 1000.0f) wrong++; /* rank 0's 0 + the slow 1000 */
        for (int i = 1; i < COUNT; i++)
            if (host[i] != (float)(3 * (i % 1000))) wrong++;
    }
    printf("# all-reduce of %d floats over 2 GPUs after a 50 ms producer: %ld of %d wrong\n", COUNT, wrong,
           2 * COUNT);
    assert_int_equal(wrong, 0);

    /* Broadcast from rank 1 into recv, then by rank inside a group. */
    cw_devptr bsend[2] = {0, send[1]};
    assert_cw_ok(cw_comm_broadcast(comm, bsend, recv, COUNT, CW_FLOAT32, 1, coll));
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_wait(use[r], coll[r]));
        assert_cw_ok(cw_copy_to_host(use[r], host, recv[r], COUNT * sizeof(float)));
        assert_cw_ok(cw_stream_synchronize(use[r]));
        assert_true(host[0] == 1000.0f && host[1] == 2.0f && host[999] == 1998.0f);
    }
    assert_cw_ok(cw_comm_group_begin());
    for (int r = 0; r < 2; r++)
        assert_cw_ok(cw_comm_all_reduce_rank(comm, r, recv[r], recv[r], COUNT, CW_FLOAT32, CW_MAX, coll[r]));
    assert_cw_ok(cw_comm_group_end());
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_synchronize(coll[r]));
        assert_cw_ok(cw_copy_to_host(use[r], host, recv[r], 4 * sizeof(float)));
        assert_cw_ok(cw_stream_synchronize(use[r]));
        assert_true(host[0] == 1000.0f && host[1] == 2.0f);
    }
    for (int r = 0; r < 2; r++) {
        cw_buffer_destroy(&buf[r]);
        cw_stream_destroy(&fill[r]);
        cw_stream_destroy(&coll[r]);
        cw_stream_destroy(&use[r]);
    }
    cw_comm_destroy(&comm);
    free(host);
}

/* The pass without peer access, run by the parent before its own tests. */
static void test_without_peer_access(void **state) {
    (void)state;
    if (no_peer) skip(); /* the child itself */
    printf("# the pass without peer access exited with %d\n", child_status);
    assert_int_equal(child_status, 0);
}

int main(int argc, char **argv) {
    (void)argc;
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* before anything can load NCCL */
    no_peer = getenv("CWT_MULTI_NO_PEER") != NULL;
    if (!no_peer) {
        /* Before this process touches the driver: the child starts clean. */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("CWT_MULTI_NO_PEER", "1", 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int ws = 0;
        if (pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws)) child_status = WEXITSTATUS(ws);
        if (child_status == CWT_SKIP_EXIT) return CWT_SKIP_EXIT; /* it said why */
    }
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    int n = 0;
    cw_device_count(&n);
    if (n < 2) {
        printf("SKIP: these tests need two GPUs; this machine has %d\n", n);
        return CWT_SKIP_EXIT;
    }
    if (!rawcuda_open(&rc)) {
        printf("FAIL: the raw driver could not be opened\n");
        return 1;
    }
    int devs[2] = {0, 1};
    cw_device_group_info gi;
    if (cw_device_group_create(&set, devs, 2) || cw_device_group_get_info(set, &gi) ||
        !(ctx[0] = gi.contexts[0]) || !(ctx[1] = gi.contexts[1]) ||
        cw_module_load_image(&mod, cw_test_kernels_fatbin) ||
        cw_module_get_kernel(mod, "cw_slow_write", &k_slow_write) ||
        cw_module_get_kernel(mod, "cw_copy_int", &k_copy_int) || cw_module_get_kernel(mod, "cw_pl_fill", &k_fill) ||
        cw_module_get_kernel(mod, "cw_pl_scale", &k_scale) || cw_module_get_kernel(mod, "cw_pl_sum2", &k_sum2) ||
        cw_module_get_kernel(mod, "cw_gop_load", &k_gload) || cw_module_get_kernel(mod, "cw_gop_mul", &k_gmul) ||
        cw_module_get_kernel(mod, "cw_gop_store", &k_gstore)) {
        printf("FAIL: setup: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_peer_access),
        cmocka_unit_test(test_cross_device_ordering),
        cmocka_unit_test(test_two_device_diamond),
        cmocka_unit_test_teardown(test_two_resident_loops, loops_teardown),
        cmocka_unit_test(test_all_reduce),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    cw_module_destroy(&mod);
    cw_device_group_destroy(&set);
    return failed;
}
