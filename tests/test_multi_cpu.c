/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Several devices against the fake driver (tests/fake_cuda.c with
 * FAKE_CUDA_DEVICES=2, whose device memory is host memory) and the fake NCCL
 * (tests/fake_nccl.c, libfakenccl.so beside the fake driver, which computes
 * collectives on that memory): device groups, peer access, peer copies, pools
 * opened to peers, a pipeline whose operators sit on two devices (data moved
 * and checked), several resident loops' calls, and collectives with their
 * sums checked. Every scenario ends with the fake's live counts where they
 * started. Last, a fault-injection sweep over two multi-device scenarios (a
 * device group's peers, copies and pool sharing; the two-device pipeline):
 * every driver call failed in turn with each of three results, each run
 * returning an error or absorbing it, leaking nothing, and a clean run after
 * it still right. The same behaviour on two real GPUs: test_gpu_multi.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdlib.h>

#include "cwtest.h"
#include "fakelive.h"
#include "testing/seam.h"

static long (*fake_calls)(const char *entry);
static int (*fake_drain)(int timeout_ms);
static CUcontext (*fake_other)(void);
static int (*fake_ctx_get)(CUcontext *);
static int (*fake_ctx_set)(CUcontext);
static int (*nccl_live)(void);
static long (*nccl_calls)(const char *entry);
static void (*nccl_fail)(const char *entry, int result);
static void *(*nccl_last_stream)(int device);
static char g_fake_nccl[4096];

static cw_device_group *g_set;
static cw_context *g_ctx[2];

/* What the log callback received: messages per level, the last one. */
typedef struct LogTally {
    int warnings, errors;
    char last[512];
} LogTally;
static void log_tally(void *user, cw_log_level level, const char *msg) {
    LogTally *t = user;
    if (level == CW_LOG_WARNING) t->warnings++;
    if (level == CW_LOG_ERROR) t->errors++;
    snprintf(t->last, sizeof t->last, "%s", msg);
}

/* Peer access for every ordered pair of a group's devices that the topology
 * allows (what 0.1's cw_device_set_enable_peers did): *enabled pairs. */
static cw_status enable_all_peers(const cw_device_group *g, int *enabled) {
    cw_device_group_info gi;
    cw_status st = cw_device_group_get_info(g, &gi);
    int pairs = 0;
    for (int a = 0; a < gi.count && st == CW_SUCCESS; a++)
        for (int b = 0; b < gi.count && st == CW_SUCCESS; b++) {
            if (a == b) continue;
            cw_peer_info pi;
            st = cw_device_get_peer_info(gi.devices[a], gi.devices[b], &pi);
            if (st == CW_SUCCESS && pi.can_access) {
                st = cw_context_enable_peer(gi.contexts[a], gi.contexts[b]);
                if (st == CW_SUCCESS) pairs++;
            }
        }
    *enabled = pairs;
    return st;
}

/* ---- device groups -------------------------------------------------------- */

static void test_device_group(void **state) {
    (void)state;
    long p0 = fake_live("primary0"), p1 = fake_live("primary1");
    cw_device_group *set = NULL;
    assert_cw_ok(cw_device_group_create(&set, NULL, 0));
    int dev = -1;
    cw_device_group_info gi;
    memset(&gi, 0xab, sizeof gi);
    assert_cw_ok(cw_device_group_get_info(set, &gi));
    assert_int_equal(gi.count, 2);
    assert_int_equal(fake_live("primary0"), p0 + 1);
    assert_int_equal(fake_live("primary1"), p1 + 1);
    for (int i = 0; i < 2; i++) {
        cw_context *c = gi.contexts[i];
        assert_cw_ok(cwt_context_device(c, &dev));
        assert_int_equal(dev, i);
        assert_int_equal(gi.devices[i], i);
        cw_context_info ci;
        assert_cw_ok(cw_context_get_info(c, &ci));
        assert_int_equal(ci.kind, CW_CONTEXT_PRIMARY);
    }
    /* the entries past count and the reserved bytes are zero */
    for (int i = 2; i < CW_MAX_DEVICES; i++) {
        assert_int_equal(gi.devices[i], 0);
        assert_null(gi.contexts[i]);
    }
    for (size_t i = 0; i < sizeof gi.reserved; i++) assert_int_equal(gi.reserved[i], 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_device_group_get_info(set, NULL));
    cw_device_group_destroy(&set);
    assert_null(set);
    assert_int_equal(fake_live("primary0"), p0);
    assert_int_equal(fake_live("primary1"), p1);

    /* A list keeps its order. */
    int rev[2] = {1, 0};
    assert_cw_ok(cw_device_group_create(&set, rev, 2));
    assert_cw_ok(cw_device_group_get_info(set, &gi));
    assert_int_equal(gi.count, 2);
    assert_int_equal(gi.devices[0], 1);
    assert_int_equal(gi.devices[1], 0);
    assert_cw_ok(cwt_context_device(gi.contexts[0], &dev));
    assert_int_equal(dev, 1);
    cw_device_group_destroy(&set);

    /* Bad lists are refused with the culprit named, nothing retained. */
    int dup[3] = {0, 1, 0};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_device_group_create(&set, dup, 3));
    assert_non_null(strstr(cw_last_error()->message, "devices[0] and devices[2] are both device 0"));
    int far[1] = {2};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_device_group_create(&set, far, 1));
    assert_non_null(strstr(cw_last_error()->message, "there are 2 devices"));
    assert_null(set);
    assert_int_equal(fake_live("primary0"), p0);
    assert_int_equal(fake_live("primary1"), p1);
    /* A foreign handle is refused, not used. */
    uint32_t junk[16] = {0};
    cw_device_group *bad = (cw_device_group *)junk;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_device_group_get_info(bad, &gi));
}

/* The destroy contract: a handle that is not live is ignored, the caller's
 * variable nulled, and a warning logged (no error); NULL and a NULL handle
 * do nothing. 0.1's cw_device_set_close and cw_comm_destroy left the
 * variable as it was and logged an error. */
static void test_destroy_not_live(void **state) {
    (void)state;
    LogTally tally;
    memset(&tally, 0, sizeof tally);
    assert_cw_ok(cw_log_set_callback(log_tally, &tally, CW_LOG_DEBUG));
    uint32_t junk[16] = {0};
    cw_device_group *bad = (cw_device_group *)junk;
    cw_device_group_destroy(&bad);
    assert_null(bad);
    assert_int_equal(tally.warnings, 1);
    assert_int_equal(tally.errors, 0);
    assert_non_null(strstr(tally.last, "cw_device_group_destroy: *g is not a live cw_device_group"));
    /* a destroyed one: the same */
    cw_device_group *g = NULL, *stale;
    assert_cw_ok(cw_device_group_create(&g, NULL, 0));
    stale = g;
    cw_device_group_destroy(&g);
    assert_null(g);
    cw_device_group_destroy(&stale);
    assert_null(stale);
    assert_int_equal(tally.warnings, 2);
    /* a communicator */
    cw_comm *c = NULL, *cstale;
    assert_cw_ok(cw_comm_create(&c, g_ctx, 2));
    cstale = c;
    cw_comm_destroy(&c);
    assert_null(c);
    assert_int_equal(nccl_live(), 0);
    cw_comm_destroy(&cstale);
    assert_null(cstale);
    assert_int_equal(tally.warnings, 3);
    assert_non_null(strstr(tally.last, "cw_comm_destroy: *c is not a live cw_comm"));
    cw_comm *cbad = (cw_comm *)g_ctx[0]; /* a live handle of another kind */
    cw_comm_destroy(&cbad);
    assert_null(cbad);
    assert_int_equal(tally.warnings, 4);
    assert_int_equal(tally.errors, 0);
    cw_device_group_destroy(NULL);
    cw_device_group_destroy(&g);
    cw_comm_destroy(NULL);
    cw_comm_destroy(&c);
    assert_int_equal(tally.warnings, 4);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    int dev = -1;
    assert_cw_ok(cwt_context_device(g_ctx[0], &dev)); /* left alone */
}

/* ---- a pipeline over two devices ---------------------------------------------- */

enum { kWords = 256, kIters = 6 };

typedef struct Stage {
    int device;  /* the device this operator expects its buffers on */
    int role;    /* 0 source, 1 middle (adds 1000), 2 sink (copies out) */
    uint32_t *out;
    int wrong_device;
} Stage;

static cw_status stage_compute(cw_io *io, void *user) {
    Stage *st = user;
    cw_io_info io_info = {0};
    cw_io_get_info(io, &io_info);
    uint64_t it = io_info.iteration;
    cw_stream *s = NULL;
    cw_buffer *b = NULL;
    uint32_t host[kWords];
    if (st->role == 0) {
        cw_status r = cw_io_receive_stream(io, NULL, &s);
        if (r != CW_SUCCESS) return r;
        if ((r = cw_io_alloc(&b, io, sizeof host)) != CW_SUCCESS) return r;
        for (int i = 0; i < kWords; i++) host[i] = (uint32_t)(it * 100000 + (uint64_t)i);
        cw_devptr p;
        if ((r = cw_buffer_get_writable(b, &p)) != CW_SUCCESS) return r;
        if ((r = cw_copy_to_device(s, p, host, sizeof host)) != CW_SUCCESS) return r;
        if ((r = cw_stream_synchronize(s)) != CW_SUCCESS) return r; /* host is a local */
        return cw_io_emit(io, "out", NULL, b);
    }
    cw_message m;
    cw_status r = cw_io_receive(io, "in", &m);
    if (r != CW_SUCCESS) return r;
    cw_buffer_info bi;
    int dev = -1;
    cw_buffer_get_info(m.buffer, &bi);
    cwt_context_device(bi.context, &dev);
    if (dev != st->device || bi.device != st->device) st->wrong_device++;
    if ((r = cw_io_receive_stream(io, "in", &s)) != CW_SUCCESS) return r;
    cw_devptr p;
    cw_buffer_get_ptr(m.buffer, &p);
    if (st->role == 1) {
        /* Add 1000 to every word (a host round trip stands in for a kernel). */
        if ((r = cw_copy_to_host(s, host, p, sizeof host)) != CW_SUCCESS) return r;
        if ((r = cw_stream_synchronize(s)) != CW_SUCCESS) return r;
        for (int i = 0; i < kWords; i++) host[i] += 1000;
        if ((r = cw_io_alloc(&b, io, sizeof host)) != CW_SUCCESS) return r;
        cw_devptr q;
        if ((r = cw_buffer_get_writable(b, &q)) != CW_SUCCESS) return r;
        if ((r = cw_copy_to_device(s, q, host, sizeof host)) != CW_SUCCESS) return r;
        if ((r = cw_stream_synchronize(s)) != CW_SUCCESS) return r;
        return cw_io_emit(io, "out", NULL, b);
    }
    return cw_copy_to_host(s, st->out + it * kWords, p, sizeof host);
}

static cw_operator *stage_op(const char *name, Stage *st, cw_stream_pool *pool) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = stage_compute;
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.pool = pool;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, name, &ops, st, &os));
    if (st->role != 0) assert_cw_ok(cw_operator_add_input(op, "in", NULL));
    if (st->role != 2) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    return op;
}

typedef struct LogSeen {
    int staged, direct;
} LogSeen;

static void log_seen(void *user, cw_log_level level, const char *msg) {
    LogSeen *ls = user;
    if (strstr(msg, "without peer access: the driver stages each copy through host memory") &&
        level == CW_LOG_WARNING)
        ls->staged++;
    if (strstr(msg, "with direct peer copies") && level == CW_LOG_INFO) ls->direct++;
}

/* A (device 0) -> B (device 1, adds 1000) -> C (device 0): each connection
 * moves the buffer to the consumer's device; C sees every value right. */
static void run_two_device_pipeline(LogSeen *seen) {
    cw_stream_pool *pool1 = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool1, g_ctx[1], NULL));
    uint32_t *out = calloc(kIters * kWords, sizeof *out);
    Stage a = {0, 0, NULL, 0}, b = {1, 1, NULL, 0}, c = {0, 2, out, 0};
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, g_ctx[0], NULL));
    assert_cw_ok(cw_pipeline_add(p, stage_op("A", &a, NULL)));
    assert_cw_ok(cw_pipeline_add(p, stage_op("B", &b, pool1)));
    assert_cw_ok(cw_pipeline_add(p, stage_op("C", &c, NULL)));
    assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "in"));
    assert_cw_ok(cw_log_set_callback(log_seen, seen, CW_LOG_INFO));
    assert_cw_ok(cw_pipeline_run(p, kIters));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    assert_int_equal(b.wrong_device, 0);
    assert_int_equal(c.wrong_device, 0);
    int wrong = 0;
    for (int it = 0; it < kIters; it++)
        for (int i = 0; i < kWords; i++)
            if (out[it * kWords + i] != (uint32_t)(it * 100000 + i + 1000)) wrong++;
    assert_int_equal(wrong, 0);
    cw_pipeline_info ps;
    assert_cw_ok(cw_pipeline_get_info(p, &ps));
    assert_int_equal(ps.peer_copies, 2 * kIters);
    assert_int_equal(ps.iterations, kIters);
    cw_pipeline_destroy(&p);
    cw_stream_pool_destroy(&pool1);
    free(out);
}

static void test_pipeline_two_devices_staged(void **state) {
    (void)state;
    LogSeen seen = {0, 0};
    run_two_device_pipeline(&seen); /* warms the event pools */
    long before[NKINDS];
    snapshot(before);
    long staged = fake_live("staged");
    seen.staged = seen.direct = 0;
    run_two_device_pipeline(&seen);
    /* No peer access yet: every copy staged, and each connection said so once. */
    assert_int_equal(fake_live("staged") - staged, 2 * kIters);
    assert_int_equal(seen.staged, 2);
    assert_int_equal(seen.direct, 0);
    assert_false(leaks(before, "a two-device pipeline"));
}

/* ---- peers ------------------------------------------------------------------ */

static void test_peers(void **state) {
    (void)state;
    cw_peer_info pi;
    assert_cw_ok(cw_device_get_peer_info(0, 1, &pi));
    assert_int_equal(pi.can_access, 1);
    assert_int_equal(pi.native_atomics, 1);
    assert_cw_ok(cw_device_get_peer_info(1, 1, &pi));
    assert_int_equal(pi.can_access, 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_device_get_peer_info(0, 2, &pi));

    long peers = fake_live("peers"), opened = fake_calls("cuMemPoolSetAccess");
    long enables = fake_calls("cuCtxEnablePeerAccess");
    int enabled = -1;
    assert_cw_ok(enable_all_peers(g_set, &enabled));
    assert_int_equal(enabled, 2);
    assert_int_equal(fake_calls("cuCtxEnablePeerAccess"), enables + 2);
    assert_int_equal(fake_live("peers"), peers + 2);
    /* Each context's buffer pool (made when warming up) is opened to the
     * other device too: a pool's memory is not covered by context peer access. */
    assert_int_equal(fake_calls("cuMemPoolSetAccess"), opened + 2);
    /* Again: idempotent, no new pair, no error (cuweave knows; the driver is
     * not asked). */
    enables = fake_calls("cuCtxEnablePeerAccess");
    assert_cw_ok(enable_all_peers(g_set, &enabled));
    assert_int_equal(enabled, 2);
    assert_cw_ok(cw_context_enable_peer(g_ctx[0], g_ctx[1]));
    assert_int_equal(fake_calls("cuCtxEnablePeerAccess"), enables);
    assert_int_equal(fake_live("peers"), peers + 2);
    /* One device is not a peer pair. */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_enable_peer(g_ctx[0], g_ctx[0]));
    assert_non_null(strstr(cw_last_error()->message, "both on device 0"));
}

static void test_pipeline_two_devices_direct(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    long direct = fake_live("direct");
    LogSeen seen = {0, 0};
    run_two_device_pipeline(&seen);
    assert_int_equal(fake_live("direct") - direct, 2 * kIters);
    assert_int_equal(seen.direct, 2);
    assert_int_equal(seen.staged, 0);
    assert_false(leaks(before, "a two-device pipeline with peer access"));
}

/* ---- copies and pools -------------------------------------------------------- */

static void test_copies(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_stream *s0 = NULL, *s1 = NULL;
    assert_cw_ok(cw_stream_create(&s0, g_ctx[0], NULL));
    assert_cw_ok(cw_stream_create(&s1, g_ctx[1], NULL));
    uint32_t host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = 0xabc00000u + (uint32_t)i;
    cw_buffer *a = NULL, *b = NULL, *small = NULL;
    assert_cw_ok(cw_buffer_create(&a, s0, sizeof host));
    assert_cw_ok(cw_buffer_create(&b, s1, sizeof host));
    assert_cw_ok(cw_buffer_create(&small, s1, 16));
    cw_devptr pa, pb;
    assert_cw_ok(cw_buffer_get_writable(a, &pa));
    assert_cw_ok(cw_buffer_get_writable(b, &pb));
    assert_cw_ok(cw_copy_to_device(s0, pa, host, sizeof host));
    assert_cw_ok(cw_stream_wait(s1, s0)); /* across devices */

    /* Raw addresses. */
    long peer_calls = fake_calls("cuMemcpyPeerAsync");
    assert_cw_ok(cw_copy_peer(s1, pb, g_ctx[1], pa, g_ctx[0], sizeof host));
    assert_int_equal(fake_calls("cuMemcpyPeerAsync"), peer_calls + 1);
    memset(back, 0, sizeof back);
    assert_cw_ok(cw_copy_to_host(s1, back, pb, sizeof back));
    assert_cw_ok(cw_stream_synchronize(s1));
    assert_memory_equal(back, host, sizeof host);
    assert_cw_ok(cw_copy_peer(s1, pb, g_ctx[1], pa, g_ctx[0], 0)); /* nothing */
    assert_int_equal(fake_calls("cuMemcpyPeerAsync"), peer_calls + 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_copy_peer(s1, 0, g_ctx[1], pa, g_ctx[0], 4));

    /* Buffers: back the other way, on the source device's stream. */
    uint32_t zero[64] = {0};
    assert_cw_ok(cw_copy_to_device(s0, pa, zero, sizeof zero));
    assert_cw_ok(cw_stream_wait(s0, s1));
    assert_cw_ok(cw_buffer_copy(a, b, s0));
    assert_cw_ok(cw_copy_to_host(s0, back, pa, sizeof back));
    assert_cw_ok(cw_stream_synchronize(s0));
    assert_memory_equal(back, host, sizeof host);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_copy(small, a, s0));
    assert_non_null(strstr(cw_last_error()->message, "dst holds 16 bytes"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_copy(a, a, s0));
    assert_cw_ok(cw_buffer_retain(b));
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_copy(b, a, s0)); /* b is shared now */
    cw_buffer *extra = b;
    cw_buffer_destroy(&extra);

    /* A use by a stream of another device is allowed (a peer reading it). */
    assert_cw_ok(cw_buffer_use(a, s1));

    cw_buffer_destroy(&a);
    cw_buffer_destroy(&b);
    cw_buffer_destroy(&small);
    cw_stream_destroy(&s0);
    cw_stream_destroy(&s1);
    assert_false(leaks(before, "peer copies"));
}

static void test_pool_share(void **state) {
    (void)state;
    long calls = fake_calls("cuMemPoolSetAccess");
    assert_cw_ok(cw_context_share_buffer_pool(g_ctx[0], g_ctx[1]));
    assert_int_equal(fake_calls("cuMemPoolSetAccess"), calls + 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_context_share_buffer_pool(g_ctx[1], g_ctx[1]));
    assert_int_equal(fake_calls("cuMemPoolSetAccess"), calls + 1);
}

/* ---- collectives through the fake NCCL ------------------------------------------------ */

static void fill(cw_stream *s, cw_devptr p, const void *v, size_t bytes) {
    assert_cw_ok(cw_copy_to_device(s, p, v, bytes));
    assert_cw_ok(cw_stream_synchronize(s));
}

static void test_collectives(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_versions versions;
    assert_cw_ok(cw_get_versions(&versions));
    assert_int_equal(versions.nccl, 22703);
    long p0 = fake_live("primary0");
    cw_comm *comm = NULL;
    assert_cw_ok(cw_comm_create(&comm, g_ctx, 2));
    assert_int_equal(nccl_live(), 2);
    assert_int_equal(fake_live("primary0"), p0); /* references, not retains */
    cw_comm_info ci;
    memset(&ci, 0xab, sizeof ci);
    assert_cw_ok(cw_comm_get_info(comm, &ci));
    assert_int_equal(ci.size, 2);
    assert_ptr_equal(ci.contexts[0], g_ctx[0]);
    assert_ptr_equal(ci.contexts[1], g_ctx[1]);
    for (int i = 2; i < CW_MAX_DEVICES; i++) assert_null(ci.contexts[i]);
    for (size_t i = 0; i < sizeof ci.reserved; i++) assert_int_equal(ci.reserved[i], 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_get_info(comm, NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_comm_get_info((cw_comm *)g_ctx[0], &ci));

    cw_stream *s[2];
    cw_buffer *buf[2];
    cw_devptr send[2], recv[2];
    enum { kCount = 1000 };
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_create(&s[r], g_ctx[r], NULL));
        assert_cw_ok(cw_buffer_create(&buf[r], s[r], 2 * kCount * sizeof(float)));
        assert_cw_ok(cw_buffer_get_writable(buf[r], &send[r]));
        recv[r] = send[r] + kCount * sizeof(float);
        float v[kCount];
        for (int i = 0; i < kCount; i++) v[i] = (float)(r + 1) * (float)(i + 1);
        fill(s[r], send[r], v, sizeof v);
    }
    /* float32 sum, out of place, on cuweave streams. */
    assert_cw_ok(cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, s));
    CUstream h0, h1;
    assert_cw_ok(cwt_stream_handle(s[0], &h0));
    assert_cw_ok(cwt_stream_handle(s[1], &h1));
    assert_ptr_equal(nccl_last_stream(0), h0);
    assert_ptr_equal(nccl_last_stream(1), h1);
    for (int r = 0; r < 2; r++) {
        float out[kCount];
        assert_cw_ok(cw_copy_to_host(s[r], out, recv[r], sizeof out));
        assert_cw_ok(cw_stream_synchronize(s[r]));
        int wrong = 0;
        for (int i = 0; i < kCount; i++)
            if (out[i] != 3.0f * (float)(i + 1)) wrong++;
        assert_int_equal(wrong, 0);
    }
    /* Broadcast from rank 1 (send[0] unread). */
    cw_devptr bsend[2] = {0, send[1]};
    assert_cw_ok(cw_comm_broadcast(comm, bsend, recv, kCount, CW_FLOAT32, 1, s));
    for (int r = 0; r < 2; r++) {
        float out[kCount];
        assert_cw_ok(cw_copy_to_host(s[r], out, recv[r], sizeof out));
        assert_cw_ok(cw_stream_synchronize(s[r]));
        assert_true(out[0] == 2.0f && out[kCount - 1] == 2.0f * kCount);
    }
    /* int32 max in place, one rank at a time inside a group. */
    for (int r = 0; r < 2; r++) {
        int32_t v[4] = {r, 10 - r, -r, 5};
        fill(s[r], send[r], v, sizeof v);
    }
    assert_cw_ok(cw_comm_group_begin());
    for (int r = 0; r < 2; r++)
        assert_cw_ok(cw_comm_all_reduce_rank(comm, r, send[r], send[r], 4, CW_INT32, CW_MAX, s[r]));
    assert_cw_ok(cw_comm_group_end());
    for (int r = 0; r < 2; r++) {
        int32_t out[4];
        assert_cw_ok(cw_copy_to_host(s[r], out, send[r], sizeof out));
        assert_cw_ok(cw_stream_synchronize(s[r]));
        assert_int_equal(out[0], 1);
        assert_int_equal(out[1], 10);
        assert_int_equal(out[2], 0);
        assert_int_equal(out[3], 5);
    }
    /* Broadcast by rank inside a group. */
    assert_cw_ok(cw_comm_group_begin());
    for (int r = 0; r < 2; r++)
        assert_cw_ok(cw_comm_broadcast_rank(comm, r, r == 0 ? send[0] : 0, recv[r], 4, CW_INT32, 0, s[r]));
    assert_cw_ok(cw_comm_group_end());
    {
        int32_t out[4];
        assert_cw_ok(cw_copy_to_host(s[1], out, recv[1], sizeof out));
        assert_cw_ok(cw_stream_synchronize(s[1]));
        assert_int_equal(out[1], 10);
    }

    /* Refusals, each naming the culprit; nothing reaches NCCL: the array
     * calls check every rank before issuing any part (a refused last rank
     * leaves the first one unissued, which a loop of _rank calls in a group
     * cannot do: why both forms are kept). */
    long issued = nccl_calls("ncclAllReduce");
    cw_stream *last_bad[2] = {s[0], s[0]};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, last_bad));
    assert_non_null(strstr(cw_last_error()->message, "rank 1 is on device 0"));
    assert_int_equal(nccl_calls("ncclAllReduce"), issued);
    cw_stream *swapped[2] = {s[1], s[0]};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, swapped));
    assert_non_null(strstr(cw_last_error()->message, "rank 0 is on device 1"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce(comm, send, recv, kCount, (cw_dtype)42, CW_SUM, s));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, (cw_reduce_op)9, s));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_broadcast(comm, send, recv, kCount, CW_FLOAT32, 2, s));
    cw_devptr zero[2] = {0, 0};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce(comm, send, zero, kCount, CW_FLOAT32, CW_SUM, s));
    assert_non_null(strstr(cw_last_error()->message, "recv[0] is 0"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_all_reduce_rank(comm, 2, send[0], recv[0], 1, CW_FLOAT32, CW_SUM, s[0]));
    assert_int_equal(nccl_calls("ncclAllReduce"), issued);
    /* count 0 does nothing. */
    assert_cw_ok(cw_comm_all_reduce(comm, send, recv, 0, CW_FLOAT32, CW_SUM, s));

    /* NCCL's own failure: CW_ERROR_DRIVER with its words, and the next call works. */
    nccl_fail("ncclAllReduce", 5 /* ncclInvalidUsage */);
    assert_cw(CW_ERROR_DRIVER, cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, s));
    assert_non_null(strstr(cw_last_error()->message, "ncclAllReduce failed for rank 0: NCCL error 5"));
    assert_cw_ok(cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, s));

    for (int r = 0; r < 2; r++) {
        cw_buffer_destroy(&buf[r]);
        cw_stream_destroy(&s[r]);
    }
    cw_comm_destroy(&comm);
    assert_null(comm);
    assert_int_equal(nccl_live(), 0);
    assert_false(leaks(before, "collectives"));
}

static void test_collective_refusals(void **state) {
    (void)state;
    cw_comm *comm = NULL;
    cw_context *same[2] = {g_ctx[0], g_ctx[0]};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_create(&comm, same, 2));
    assert_non_null(strstr(cw_last_error()->message, "ctxs[0] and ctxs[1] are both on device 0"));
    cw_context *wrapped = NULL;
    assert_cw_ok(cw_context_wrap(&wrapped, fake_other()));
    cw_context *ext[2] = {wrapped, g_ctx[1]};
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_comm_create(&comm, ext, 2));
    assert_non_null(strstr(cw_last_error()->message, "not a primary context"));
    cw_context_destroy(&wrapped);
    nccl_fail("ncclCommInitAll", 2 /* ncclSystemError */);
    assert_cw(CW_ERROR_DRIVER, cw_comm_create(&comm, g_ctx, 2));
    assert_non_null(strstr(cw_last_error()->message, "ncclCommInitAll failed"));
    assert_null(comm);
    assert_int_equal(nccl_live(), 0);
}

/* ---- fault injection ---------------------------------------------------------------- */

/* The seam's call count where a scenario's releases begin: a failure after
 * it happened inside a call that returns nothing (a release), which can only
 * absorb it. */
static unsigned long g_release_at;

/* A device group of its own (fresh cw_context handles, so enabling peers asks
 * the driver: the fake's primary contexts have the pairs already, and its
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is success), a stream and a buffer
 * on each device, data there and back across devices, the data checked, a
 * pool shared; everything released, the contexts' own pools and streams
 * with them. *wrong counts what came out wrong (meaningful on success). */
static cw_status sc_device_group(int *wrong) {
    enum { kN = 64 };
    uint32_t host[kN], zero[kN], back[kN];
    for (int i = 0; i < kN; i++) {
        host[i] = 0x5e000000u + (uint32_t)i;
        zero[i] = 0;
        back[i] = 0xffffffffu;
    }
    cw_device_group *set = NULL;
    cw_context *c[2] = {NULL, NULL};
    cw_stream *s[2] = {NULL, NULL};
    cw_buffer *b[2] = {NULL, NULL};
    cw_devptr p[2] = {0, 0};
    int enabled = -1;
    cw_device_group_info gi;
    cw_status st = cw_device_group_create(&set, NULL, 0);
    if (st == CW_SUCCESS) st = cw_device_group_get_info(set, &gi);
    for (int i = 0; i < 2 && st == CW_SUCCESS; i++) c[i] = gi.contexts[i];
    if (st == CW_SUCCESS) st = enable_all_peers(set, &enabled);
    if (st == CW_SUCCESS && enabled != 2) (*wrong)++;
    for (int i = 0; i < 2 && st == CW_SUCCESS; i++) st = cw_stream_create(&s[i], c[i], NULL);
    for (int i = 0; i < 2 && st == CW_SUCCESS; i++) st = cw_buffer_create(&b[i], s[i], sizeof host);
    for (int i = 0; i < 2 && st == CW_SUCCESS; i++) st = cw_buffer_get_writable(b[i], &p[i]);
    if (st == CW_SUCCESS) st = cw_copy_to_device(s[0], p[0], host, sizeof host);
    if (st == CW_SUCCESS) st = cw_stream_wait(s[1], s[0]);       /* device 1 after device 0's write */
    if (st == CW_SUCCESS) st = cw_buffer_copy(b[1], b[0], s[1]); /* to device 1 */
    if (st == CW_SUCCESS) st = cw_stream_wait(s[0], s[1]);       /* b[0] rewritten after that read */
    if (st == CW_SUCCESS) st = cw_copy_to_device(s[0], p[0], zero, sizeof zero);
    if (st == CW_SUCCESS) st = cw_copy_peer(s[0], p[0], c[0], p[1], c[1], sizeof host); /* back */
    if (st == CW_SUCCESS) st = cw_copy_to_host(s[0], back, p[0], sizeof back);
    if (st == CW_SUCCESS) st = cw_stream_synchronize(s[0]);
    if (st == CW_SUCCESS && memcmp(back, host, sizeof host) != 0) (*wrong)++;
    if (st == CW_SUCCESS) st = cw_context_share_buffer_pool(c[0], c[1]);
    g_release_at = cwi_seam_calls(-1);
    for (int i = 0; i < 2; i++) cw_buffer_destroy(&b[i]);
    for (int i = 0; i < 2; i++) cw_stream_destroy(&s[i]);
    cw_device_group_destroy(&set);
    fake_drain(2000); /* copies from and into this frame are done */
    return st;
}

/* One stage operator added to p (status instead of asserts: stage_op's). */
static cw_status stage_add(cw_pipeline *p, const char *name, Stage *stage, cw_stream_pool *pool) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = stage_compute;
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.pool = pool;
    cw_operator *op = NULL;
    cw_status st = cw_operator_create(&op, name, &ops, stage, &os);
    if (st == CW_SUCCESS && stage->role != 0) st = cw_operator_add_input(op, "in", NULL);
    if (st == CW_SUCCESS && stage->role != 2) st = cw_operator_add_output(op, "out", NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_add(p, op);
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
}

/* run_two_device_pipeline for two iterations, on the process's device group
 * (peers enabled): A (device 0) -> B (device 1, adds 1000) -> C (device 0). */
static cw_status sc_pipeline(int *wrong) {
    enum { kRuns = 2 };
    uint32_t *out = calloc(kRuns * kWords, sizeof *out);
    if (!out) return CW_ERROR_OUT_OF_MEMORY;
    Stage a = {0, 0, NULL, 0}, b = {1, 1, NULL, 0}, c = {0, 2, out, 0};
    cw_stream_pool *pool1 = NULL;
    cw_pipeline *p = NULL;
    cw_status st = cw_stream_pool_create(&pool1, g_ctx[1], NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_create(&p, g_ctx[0], NULL);
    if (st == CW_SUCCESS) st = stage_add(p, "A", &a, NULL);
    if (st == CW_SUCCESS) st = stage_add(p, "B", &b, pool1);
    if (st == CW_SUCCESS) st = stage_add(p, "C", &c, NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p, "A", "out", "B", "in");
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p, "B", "out", "C", "in");
    if (st == CW_SUCCESS) st = cw_pipeline_run(p, kRuns);
    if (st == CW_SUCCESS) st = cw_pipeline_synchronize(p);
    if (st == CW_SUCCESS) {
        cw_pipeline_info ps;
        if (cw_pipeline_get_info(p, &ps) != CW_SUCCESS || ps.iterations != kRuns || ps.peer_copies != 2 * kRuns)
            (*wrong)++;
        *wrong += b.wrong_device + c.wrong_device;
        for (int it = 0; it < kRuns; it++)
            for (int i = 0; i < kWords; i++)
                if (out[it * kWords + i] != (uint32_t)(it * 100000 + i + 1000)) (*wrong)++;
    }
    g_release_at = cwi_seam_calls(-1);
    cw_pipeline_destroy(&p);
    cw_stream_pool_destroy(&pool1);
    fake_drain(2000); /* C's copies into out are done */
    free(out);
    return st;
}

/* The fake's live counts (fakelive.h's and these), and cuweave's live handles. */
static const char *const k_more[] = {"primary0", "primary1", "mempool", "peers", "orphans", "badaccess", "sticky"};
#define NMORE (sizeof k_more / sizeof k_more[0])
typedef struct Live {
    long base[NKINDS];
    long more[NMORE];
    long handles;
} Live;

static void live_take(Live *v) {
    snapshot(v->base); /* drains the fake first */
    for (size_t i = 0; i < NMORE; i++) v->more[i] = fake_live(k_more[i]);
    v->handles = (long)cwi_handles_live();
}

/* 1 (each difference printed) when a count moved since before. */
static int live_leaks(const Live *before, const char *what) {
    Live now;
    live_take(&now);
    int bad = 0;
    for (size_t i = 0; i < NKINDS; i++)
        if (now.base[i] != before->base[i]) {
            printf("# leak after %s: %s %ld -> %ld\n", what, k_kinds[i], before->base[i], now.base[i]);
            bad = 1;
        }
    for (size_t i = 0; i < NMORE; i++)
        if (now.more[i] != before->more[i]) {
            printf("# leak after %s: %s %ld -> %ld\n", what, k_more[i], before->more[i], now.more[i]);
            bad = 1;
        }
    if (now.handles != before->handles) {
        printf("# leak after %s: cuweave handles %ld -> %ld\n", what, before->handles, now.handles);
        bad = 1;
    }
    return bad;
}

/* The entry whose call failed: the one the seam counted a call of that the
 * fake never saw (a cuCtxEnablePeerAccess answered ALREADY_ENABLED is not
 * a success either, so the seam's successes cannot tell). */
enum { kMaxEntries = 512 };
static void fake_entry_counts(long *v) {
    for (int id = 0; id < cwi_seam_entry_count() && id < kMaxEntries; id++)
        v[id] = fake_calls(cwi_seam_entry_name(id));
}
static const char *failed_entry(const long *before) {
    for (int id = 0; id < cwi_seam_entry_count() && id < kMaxEntries; id++) {
        if (before[id] < 0) continue; /* an entry the fake has not */
        long reached = fake_calls(cwi_seam_entry_name(id)) - before[id];
        if ((long)cwi_seam_calls(id) > reached) return cwi_seam_entry_name(id);
    }
    return "?";
}

/* The driver object is gone for good when its release fails: the driver's
 * loss (the real driver's too), not cuweave's leak. */
static int loses_object(const char *entry) {
    return strstr(entry, "Destroy") || strstr(entry, "Free") || strstr(entry, "Unload") || strstr(entry, "Release");
}
/* A failure a call that reports success may absorb: a wait for completion,
 * a query or a context switch whose caller has another way (a host wait for
 * a device wait, say), or a release (as test_gpu_sweep's is_release). */
static int may_absorb(const char *entry) {
    return loses_object(entry) || strstr(entry, "Synchronize") || strstr(entry, "Query") ||
           strstr(entry, "GetCurrent") || strstr(entry, "SetCurrent");
}

typedef struct SweepCase {
    const char *name;
    cw_status (*run)(int *wrong);
} SweepCase;

static const SweepCase k_sweep[] = {
    {"device group: peers, copies, pool share", sc_device_group},
    {"two-device pipeline, 2 iterations", sc_pipeline},
};

/* Every driver call of each scenario failed in turn, with each of three
 * results: each run returns an error, or absorbs the failure (one inside a
 * release, which returns nothing; a fallback taken) and is then right;
 * nothing is left behind (the fake drained); a clean run afterwards is
 * right and leaves nothing either. */
/* A device group whose second device cannot be opened: the detail names
 * cw_device_group_create (and which device), with the driver call and CUresult. */
static void test_error_names_public_call(void **state) {
    (void)state;
    long p0 = fake_live("primary0"), p1 = fake_live("primary1");
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cwi_seam_reset();
    cwi_seam_fail(cwi_seam_entry("cuDevicePrimaryCtxRetain"), 2, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
    cw_device_group *set = NULL;
    const cw_status st = cw_device_group_create(&set, NULL, 0);
    const int fired = cwi_seam_fired();
    cwi_seam_reset();
    cwi_seam_disable();
    assert_true(fired);
    assert_int_equal(st, CW_ERROR_OUT_OF_MEMORY);
    assert_null(set);
    const cw_error_info *e = cw_last_error();
    printf("# the second device failing in cw_device_group_create: %s\n", e->message);
    assert_string_equal(e->function, "cw_device_group_create");
    assert_string_equal(e->driver_call, "cuDevicePrimaryCtxRetain");
    assert_int_equal(e->cu_result, 2);
    assert_non_null(strstr(e->message, "devices[1]"));
    assert_int_equal(fake_live("primary0"), p0); /* the first was closed again */
    assert_int_equal(fake_live("primary1"), p1);
}

static void test_fault_sweep_multi(void **state) {
    (void)state;
    static const int results[3] = {2 /* OUT_OF_MEMORY */, 719 /* LAUNCH_FAILED */, 800 /* NOT_PERMITTED */};
    static const cw_status expected[3] = {CW_ERROR_OUT_OF_MEMORY, CW_ERROR_DEVICE_FAULT, CW_ERROR_NOT_PERMITTED};
    static long entries[kMaxEntries];
    assert_true(cwi_seam_entry_count() <= kMaxEntries);
    /* the process's group has its peers (test_peers did it; again asks no driver) */
    int enabled = 0;
    assert_cw_ok(enable_all_peers(g_set, &enabled));
    assert_int_equal(enabled, 2);
    CUcontext home = NULL;
    assert_int_equal(fake_ctx_get(&home), 0);
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    unsigned long all_calls = 0, all_tried = 0, all_leaks = 0, all_bad = 0;
    for (size_t sc = 0; sc < sizeof k_sweep / sizeof k_sweep[0]; sc++) {
        const SweepCase *c = &k_sweep[sc];
        int wrong = 0;
        /* twice first: the process set's pools grow to what the scenario needs */
        for (int w = 0; w < 2; w++) {
            assert_cw_ok(c->run(&wrong));
            assert_int_equal(wrong, 0);
        }
        Live before;
        live_take(&before);
        cwi_seam_reset();
        assert_cw_ok(c->run(&wrong));
        assert_int_equal(wrong, 0);
        const unsigned long calls = cwi_seam_calls(-1);
        assert_int_equal(live_leaks(&before, c->name), 0);
        unsigned long tried = 0, returned = 0, absorbed = 0, leaks = 0, bad = 0, unusable = 0, moved = 0;
        for (int r = 0; r < 3; r++) {
            for (unsigned long k = 1; k <= calls; k++) {
                fake_entry_counts(entries);
                cwi_seam_reset();
                cwi_seam_fail(-1, k, results[r]);
                g_release_at = (unsigned long)-1;
                wrong = 0;
                const cw_status st = c->run(&wrong);
                const int fired = cwi_seam_fired();
                const int in_release = k > g_release_at;
                char detail[300];
                snprintf(detail, sizeof detail, "%s", cw_last_error()->message);
                const char *entry = failed_entry(entries);
                cwi_seam_reset(); /* disarmed: what follows must not fail */
                /* A failed restore (cuCtxSetCurrent) leaves another context
                 * current, as the driver would: put the thread's back. */
                CUcontext now = NULL;
                fake_ctx_get(&now);
                if (now != home) {
                    moved++;
                    if (getenv("CWT_VERBOSE"))
                        printf("# %s, call %lu (%s) failing with %d: current context %p, was %p\n", c->name, k, entry,
                               results[r], (void *)now, (void *)home);
                    fake_ctx_set(home);
                }
                if (getenv("CWT_VERBOSE"))
                    printf("# %s, call %lu (%s%s) failing with %d: %s %s\n", c->name, k, entry,
                           in_release ? ", in a release" : "", results[r], cw_status_name(st),
                           st ? detail : "");
                if (!fired) {
                    /* this run made fewer calls (queries vary with timing): done */
                    if (st != CW_SUCCESS || wrong) {
                        printf("# %s: no fault fired at call %lu, yet the run failed: %s\n", c->name, k, detail);
                        bad++;
                    }
                    break;
                }
                tried++;
                char what[200];
                snprintf(what, sizeof what, "%s, call %lu (%s) failing with %d", c->name, k, entry, results[r]);
                if (st != CW_SUCCESS) {
                    returned++;
                    if (st != expected[r]) { /* the driver's error, as itself */
                        printf("# %s: returned %s: %s\n", what, cw_status_name(st), detail);
                        bad++;
                    }
                } else if (in_release || may_absorb(entry) ||
                           (!strcmp(entry, "cuMemAllocFromPoolAsync") && results[r] == 2)) {
                    /* out of memory in the pipeline: cw_io_alloc waited for a
                     * cached buffer instead */
                    absorbed++;
                } else {
                    printf("# %s: the run returned CW_SUCCESS\n", what);
                    bad++;
                }
                if (st == CW_SUCCESS && wrong) {
                    printf("# %s: success with %d wrong results\n", what, wrong);
                    bad++;
                }
                if (loses_object(entry)) {
                    live_take(&before); /* the driver object is lost */
                } else if (live_leaks(&before, what)) {
                    leaks++;
                    live_take(&before);
                }
                /* a clean run afterwards: right, and nothing left */
                wrong = 0;
                const cw_status again = c->run(&wrong);
                if (again != CW_SUCCESS || wrong) {
                    printf("# %s: the clean run after it gave %s, %d wrong: %s\n", what, cw_status_name(again),
                           wrong, cw_last_error()->message);
                    unusable++;
                }
                snprintf(what, sizeof what, "%s, the clean run after call %lu (%s) failed", c->name, k, entry);
                if (live_leaks(&before, what)) {
                    leaks++;
                    live_take(&before);
                }
            }
        }
        printf("# %s: %lu driver calls, %lu failed in turn (3 results each), %lu errors returned, %lu absorbed, "
               "%lu leaks, %lu bad, usable after: %s (%lu left another context current)\n",
               c->name, calls, tried, returned, absorbed, leaks, bad, unusable ? "no" : "yes", moved);
        all_calls += calls;
        all_tried += tried;
        all_leaks += leaks;
        all_bad += bad + unusable;
        assert_true(tried > 2 * calls); /* all three results reached nearly every call */
    }
    cwi_seam_disable();
    printf("# multi-device fault sweep: %lu driver calls, %lu failed in turn, %lu leaks, %lu problems\n", all_calls,
           all_tried, all_leaks, all_bad);
    assert_int_equal(all_leaks, 0);
    assert_int_equal(all_bad, 0);
    /* the library is usable afterwards, with the seam off */
    for (size_t sc = 0; sc < sizeof k_sweep / sizeof k_sweep[0]; sc++) {
        int wrong = 0;
        assert_cw_ok(k_sweep[sc].run(&wrong));
        assert_int_equal(wrong, 0);
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenccl.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(g_fake_nccl, sizeof g_fake_nccl, "%s/libfakenccl.so", dirname(tmp));
    setenv("CUWEAVE_LIBNCCL", g_fake_nccl, 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *nccl = dlopen(g_fake_nccl, RTLD_NOW | RTLD_LOCAL);
    if (!lib || !nccl || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(fake_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain")) ||
        !(fake_other = (CUcontext(*)(void))dlsym(lib, "fake_cuda_other_context")) ||
        !(fake_ctx_get = (int (*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent")) ||
        !(fake_ctx_set = (int (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent")) ||
        !(nccl_live = (int (*)(void))dlsym(nccl, "fake_nccl_live")) ||
        !(nccl_calls = (long (*)(const char *))dlsym(nccl, "fake_nccl_calls")) ||
        !(nccl_fail = (void (*)(const char *, int))dlsym(nccl, "fake_nccl_fail")) ||
        !(nccl_last_stream = (void *(*)(int))dlsym(nccl, "fake_nccl_last_stream"))) {
        printf("FAIL: cannot load %s and %s\n", argv[1], g_fake_nccl);
        return 1;
    }
    live_drain = fake_drain;
    cw_device_group_info gi;
    if (cw_init() != CW_SUCCESS || cw_device_group_create(&g_set, NULL, 0) != CW_SUCCESS ||
        cw_device_group_get_info(g_set, &gi) != CW_SUCCESS || gi.count != 2) {
        printf("FAIL: cuweave could not open two fake devices: %s\n", cw_last_error()->message);
        return 1;
    }
    g_ctx[0] = gi.contexts[0];
    g_ctx[1] = gi.contexts[1];
    /* Warm each context's event pool, fork pool, release stream and buffer
     * pool (made on first use, kept with the context) so that live counts
     * compare like with like. */
    for (int i = 0; i < 2; i++) {
        cw_stream *s = NULL, *child = NULL;
        cw_buffer *b = NULL;
        if (cw_stream_create(&s, g_ctx[i], NULL) != CW_SUCCESS || cw_stream_fork(&child, s) != CW_SUCCESS ||
            cw_stream_join(s, &child) != CW_SUCCESS || cw_buffer_create(&b, s, 64) != CW_SUCCESS) {
            printf("FAIL: warming device %d: %s\n", i, cw_last_error()->message);
            return 1;
        }
        cw_buffer_destroy(&b);
        cw_stream_synchronize(s);
        cw_stream_destroy(&s);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_group),
        cmocka_unit_test(test_pipeline_two_devices_staged),
        cmocka_unit_test(test_peers),
        cmocka_unit_test(test_pipeline_two_devices_direct),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_pool_share),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_destroy_not_live),
        cmocka_unit_test(test_collective_refusals),
        cmocka_unit_test(test_error_names_public_call),
        cmocka_unit_test(test_fault_sweep_multi),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    cw_device_group_destroy(&g_set);
    return failed;
}
