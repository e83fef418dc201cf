/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a frame costs the host, by driver entry (issue 43): bench_pipeline's
 * workloads built as bench_pipeline builds them (the diamond A -> (B, D) ->
 * C; video, video4k and video16: two uploads, two blurs, the SAD into a word
 * copied back; one copy, one blur and one SAD launch per picture) run on the
 * fake driver (tests/fake_cuda.c, FAKE_CUDA_FEATURES=all), one frame at a
 * time (cw_pipeline_run(p, 1), then cw_stream_synchronize on the sink's
 * stream, as bench_pipeline's latency mode) and pipelined (one run of 40
 * frames, the enqueue only). Every driver call cuweave makes is counted by
 * the test seam (src/testing/seam.h: the library's calls, not the test's),
 * printed per frame beside the hand-written multi-stream code's (bench
 * pipeline's (c) variant, counted by reading its code), and asserted entry
 * by entry: a call that comes back fails the test. The launches and copies
 * are the operators' own (the same in both); what cuweave adds beyond them
 * is listed in docs/pipelines.md ("What a frame costs").
 *
 * The pictures are smaller than bench_pipeline's (the counts do not depend
 * on their size): video and video4k one picture each, video16 sixteen.
 * Links libcuweave.a for the seam; the fake's path is argv[1].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>

#include "cwtest.h"
#include "testing/seam.h"

static CUcontext (*fake_ctx_handle)(void);
static int (*fake_ctx_set)(CUcontext);
static int (*fake_drain)(int timeout_ms);
static cw_context *ctx;
static cw_module *g_mod;
static cw_kernel *g_k;

#define TRY(x)                           \
    do {                                 \
        cw_status t_ = (x);              \
        if (t_ != CW_SUCCESS) return t_; \
    } while (0)

/* ---- the workloads, as bench_pipeline's (a) variant builds them ---------- */

enum { RING = 8, FRAMES = 20, PIPELINED = 40 };

typedef struct work {
    int video, pics;  /* video: pictures per frame (video16: 16) */
    size_t n;         /* bytes per picture (video) or per buffer (diamond) */
    unsigned char *host_ref, *host_dis; /* cw_host_alloc: pics * n each */
    uint64_t *hres;   /* the result word */
    cw_buffer *dres_buf;
    cw_devptr dres;
    cw_stream *sink;  /* the sink's stream (the host waits on it) */
} work;

static cw_status launch(cw_stream *s) {
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = 4;
    lc.block[0] = 64;
    return cw_kernel_launch(g_k, s, &lc, NULL);
}

static cw_status out_buffer(cw_io *io, size_t bytes, cw_buffer **b) {
    cw_devptr p;
    TRY(cw_io_alloc(b, io, bytes));
    return cw_buffer_get_writable(*b, &p);
}

static cw_status in_ptr(cw_io *io, const char *port) {
    cw_message m;
    cw_devptr p;
    TRY(cw_io_receive(io, port, &m));
    return cw_buffer_get_ptr(m.buffer, &p);
}

/* diamond A: fill */
static cw_status d_fill(cw_io *io, void *user) {
    work *w = user;
    cw_io_info info;
    TRY(cw_io_get_info(io, &info));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b;
    TRY(out_buffer(io, w->n, &b));
    TRY(launch(s));
    return cw_io_emit(io, "out", NULL, b);
}

/* diamond B and D: scale */
static cw_status d_scale(cw_io *io, void *user) {
    work *w = user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    TRY(in_ptr(io, "in"));
    cw_buffer *b;
    TRY(out_buffer(io, w->n, &b));
    TRY(launch(s));
    return cw_io_emit(io, "out", NULL, b);
}

/* diamond C: sum, zero, reduce, copy back */
static cw_status d_sum(cw_io *io, void *user) {
    work *w = user;
    cw_io_info info;
    TRY(cw_io_get_info(io, &info));
    cw_stream *s, *s2;
    TRY(cw_io_receive_stream(io, "b", &s));
    TRY(cw_io_receive_stream(io, "d", &s2));
    TRY(in_ptr(io, "b"));
    TRY(in_ptr(io, "d"));
    cw_buffer *cb; /* not emitted */
    TRY(out_buffer(io, w->n, &cb));
    for (int k = 0; k < 3; k++) TRY(launch(s2));
    TRY(cw_copy_to_host(s2, w->hres, w->dres, sizeof(uint64_t)));
    w->sink = s2;
    return CW_SUCCESS;
}

typedef struct vrole {
    work *w;
    int dis;
} vrole;

static cw_status v_upload(cw_io *io, void *user) {
    vrole *r = user;
    work *w = r->w;
    cw_io_info info;
    TRY(cw_io_get_info(io, &info));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b;
    cw_devptr out;
    TRY(cw_io_alloc(&b, io, w->n * (size_t)w->pics));
    TRY(cw_buffer_get_writable(b, &out));
    const unsigned char *src = r->dis ? w->host_dis : w->host_ref;
    for (int q = 0; q < w->pics; q++) TRY(cw_copy_to_device(s, out + (size_t)q * w->n, src + (size_t)q * w->n, w->n));
    return cw_io_emit(io, "out", NULL, b);
}

static cw_status v_blur(cw_io *io, void *user) {
    vrole *r = user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    TRY(in_ptr(io, "in"));
    cw_buffer *b;
    TRY(out_buffer(io, r->w->n * (size_t)r->w->pics, &b));
    for (int q = 0; q < r->w->pics; q++) TRY(launch(s));
    return cw_io_emit(io, "out", NULL, b);
}

static cw_status v_sad(cw_io *io, void *user) {
    vrole *r = user;
    work *w = r->w;
    cw_io_info info;
    TRY(cw_io_get_info(io, &info));
    cw_stream *s, *s2;
    TRY(cw_io_receive_stream(io, "ref", &s));
    TRY(cw_io_receive_stream(io, "dis", &s2));
    TRY(in_ptr(io, "ref"));
    TRY(in_ptr(io, "dis"));
    TRY(launch(s2)); /* zero64 */
    for (int q = 0; q < w->pics; q++) TRY(launch(s2));
    TRY(cw_copy_to_host(s2, w->hres, w->dres, sizeof(uint64_t)));
    w->sink = s2;
    return CW_SUCCESS;
}

static void add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                   const char *in1, const char *in2, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, name, &ops, user, NULL));
    if (in1) assert_cw_ok(cw_operator_add_input(op, in1, NULL));
    if (in2) assert_cw_ok(cw_operator_add_input(op, in2, NULL));
    if (out) assert_cw_ok(cw_operator_add_output(op, out, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
}

static vrole g_roles[2];

static cw_pipeline *build(work *w) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = RING; /* bench_pipeline's */
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    cw_stream *aux = NULL;
    assert_cw_ok(cw_stream_create(&aux, ctx, NULL));
    assert_cw_ok(cw_buffer_create(&w->dres_buf, aux, sizeof(uint64_t)));
    assert_cw_ok(cw_buffer_get_writable(w->dres_buf, &w->dres));
    assert_cw_ok(cw_stream_synchronize(aux));
    cw_stream_destroy(&aux);
    assert_cw_ok(cw_host_alloc((void **)&w->hres, ctx, sizeof(uint64_t)));
    if (!w->video) {
        add_op(p, "A", d_fill, w, NULL, NULL, "out");
        add_op(p, "B", d_scale, w, "in", NULL, "out");
        add_op(p, "D", d_scale, w, "in", NULL, "out");
        add_op(p, "C", d_sum, w, "b", "d", NULL);
        assert_cw_ok(cw_pipeline_connect(p, "A", "out", "B", "in"));
        assert_cw_ok(cw_pipeline_connect(p, "A", "out", "D", "in"));
        assert_cw_ok(cw_pipeline_connect(p, "B", "out", "C", "b"));
        assert_cw_ok(cw_pipeline_connect(p, "D", "out", "C", "d"));
    } else {
        assert_cw_ok(cw_host_alloc((void **)&w->host_ref, ctx, w->n * (size_t)w->pics));
        assert_cw_ok(cw_host_alloc((void **)&w->host_dis, ctx, w->n * (size_t)w->pics));
        g_roles[0] = (vrole){w, 0};
        g_roles[1] = (vrole){w, 1};
        add_op(p, "up_ref", v_upload, &g_roles[0], NULL, NULL, "out");
        add_op(p, "up_dis", v_upload, &g_roles[1], NULL, NULL, "out");
        add_op(p, "blur_ref", v_blur, &g_roles[0], "in", NULL, "out");
        add_op(p, "blur_dis", v_blur, &g_roles[1], "in", NULL, "out");
        add_op(p, "sad", v_sad, &g_roles[0], "ref", "dis", NULL);
        assert_cw_ok(cw_pipeline_connect(p, "up_ref", "out", "blur_ref", "in"));
        assert_cw_ok(cw_pipeline_connect(p, "up_dis", "out", "blur_dis", "in"));
        assert_cw_ok(cw_pipeline_connect(p, "blur_ref", "out", "sad", "ref"));
        assert_cw_ok(cw_pipeline_connect(p, "blur_dis", "out", "sad", "dis"));
    }
    assert_cw_ok(cw_pipeline_check(p));
    return p;
}

static void teardown(work *w, cw_pipeline **p) {
    assert_cw_ok(cw_pipeline_synchronize(*p));
    assert_cw_ok(cw_buffer_use(w->dres_buf, w->sink));
    cw_pipeline_destroy(p);
    cw_buffer_destroy(&w->dres_buf);
    cw_host_free(ctx, (void **)&w->hres);
    if (w->host_ref) cw_host_free(ctx, (void **)&w->host_ref);
    if (w->host_dis) cw_host_free(ctx, (void **)&w->host_dis);
    assert_true(fake_drain(5000));
}

/* ---- counting ------------------------------------------------------------- */

/* The entries a frame may call, in the order printed. */
static const char *const k_entries[] = {
    "cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuEventRecord",
    "cuStreamWaitEvent", "cuEventSynchronize", "cuEventQuery", "cuStreamSynchronize", "cuCtxGetCurrent",
    "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuMemAllocFromPoolAsync", "cuMemAllocAsync",
    "cuMemFreeAsync", "cuEventCreate", "cuStreamQuery"};
enum { NE = sizeof k_entries / sizeof k_entries[0] };

typedef struct counts {
    double per[NE]; /* calls per frame, by entry */
    double all;     /* every entry, listed or not */
} counts;

static unsigned long seam_of(const char *name) {
    const int id = cwi_seam_entry(name);
    return id < 0 ? 0 : cwi_seam_calls(id);
}

/* Frames of the workload: one at a time (run 1, wait for the sink) or
 * pipelined (one run of PIPELINED frames; the final wait not counted). */
static void measure(work *w, cw_pipeline *p, int one_at_a_time, counts *c) {
    CUcontext mine = NULL;
    assert_cw_ok(cwt_context_handle(ctx, &mine));
    fake_ctx_set(mine); /* as a host that made the context current, as bench_pipeline's does */
    for (int i = 0; i < 2 * RING; i++) { /* warm: streams leased, buffers cached, marks pooled */
        assert_cw_ok(cw_pipeline_run(p, 1));
        assert_cw_ok(cw_stream_synchronize(w->sink));
    }
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    unsigned long before[NE], all0 = cwi_seam_calls(-1);
    for (int e = 0; e < NE; e++) before[e] = seam_of(k_entries[e]);
    const unsigned long marks0 = cwi_marks_allocated();
    int frames;
    if (one_at_a_time) {
        frames = FRAMES;
        for (int i = 0; i < FRAMES; i++) {
            assert_cw_ok(cw_pipeline_run(p, 1));
            assert_cw_ok(cw_stream_synchronize(w->sink));
        }
    } else {
        frames = PIPELINED;
        assert_cw_ok(cw_pipeline_run(p, PIPELINED));
    }
    for (int e = 0; e < NE; e++) c->per[e] = (double)(seam_of(k_entries[e]) - before[e]) / frames;
    c->all = (double)(cwi_seam_calls(-1) - all0) / frames;
    cwi_seam_disable();
    if (!one_at_a_time) assert_cw_ok(cw_stream_synchronize(w->sink));
    assert_int_equal(cwi_marks_allocated() - marks0, 0); /* no mark allocated per frame */
    fake_ctx_set(NULL);
}

/* The hand-written code's calls per frame (bench_pipeline's (c)), and
 * cuweave's as this build makes them, entry by entry: -1 for an entry
 * neither makes. */
typedef struct expect {
    const char *entry;
    double raw, cw;
} expect;

static void check(const char *name, const counts *c, const expect *want, size_t nwant) {
    double raw_all = 0;
    for (size_t i = 0; i < nwant; i++) raw_all += want[i].raw;
    printf("# %s: %.2f driver calls a frame (hand-written multi-stream: %.2f):", name, c->all, raw_all);
    for (int e = 0; e < NE; e++)
        if (c->per[e] != 0) printf(" %s %.2f;", k_entries[e], c->per[e]);
    printf("\n");
    double listed = 0;
    for (int e = 0; e < NE; e++) {
        double cw = 0;
        for (size_t i = 0; i < nwant; i++)
            if (!strcmp(want[i].entry, k_entries[e])) cw = want[i].cw;
        if (fabs(c->per[e] - cw) > 1e-9)
            fail_msg("%s: %s: %.2f calls a frame, expected %.2f", name, k_entries[e], c->per[e], cw);
        listed += cw;
    }
    if (fabs(c->all - listed) > 1e-9) fail_msg("%s: %.2f calls a frame in all, %.2f of them listed", name, c->all, listed);
}

/* ---- the cases -------------------------------------------------------------- */

/* Pipelined: the in-flight bound waits for iteration i + 1 - RING at the end
 * of iteration i; the host's wait on the sink before the run shows the
 * first RING - 1 finished. And the run's own call (the caller's context,
 * asked once a run), spread over its frames. */
#define BOUND ((PIPELINED - RING + 1.0) / PIPELINED)
#define RUN_CALLS (1.0 / PIPELINED)

/* The diamond: raw multi-stream makes 6 launches, 1 copy back, 4 records
 * (A's end, B's end, D's end, the slot's done) and 5 waits (the slot's last
 * reader, A for B and D, B and D for C) a frame; the host's wait is one
 * cuStreamSynchronize in both. */
static void test_diamond_calls_per_frame(void **state) {
    (void)state;
    work w = {.video = 0, .pics = 1, .n = 4096};
    cw_pipeline *p = build(&w);
    counts one, piped;
    measure(&w, p, 1, &one);
    measure(&w, p, 0, &piped);
    const expect want_one[] = {
        {"cuLaunchKernel", 6, 6},     {"cuMemcpyDtoHAsync", 1, 1}, {"cuEventRecord", 4, 4},
        {"cuStreamWaitEvent", 5, 4},  {"cuStreamSynchronize", 1, 1},
        {"cuEventSynchronize", 0, 0}, /* the bound: the host's waits show it finished */
        {"cuCtxGetCurrent", 0, 1}, /* once a run: the caller's context */
    };
    check("diamond, one frame at a time", &one, want_one, sizeof want_one / sizeof want_one[0]);
    const expect want_piped[] = {
        {"cuLaunchKernel", 6, 6},    {"cuMemcpyDtoHAsync", 1, 1}, {"cuEventRecord", 4, 4},
        {"cuStreamWaitEvent", 5, 4}, {"cuEventSynchronize", 0, BOUND}, /* the in-flight bound */
        {"cuCtxGetCurrent", 0, RUN_CALLS},
    };
    check("diamond, pipelined", &piped, want_piped, sizeof want_piped / sizeof want_piped[0]);
    teardown(&w, &p);
}

/* A video shape: raw multi-stream makes 2 * pics copies up, pics blur
 * launches per picture stream, 1 + pics for the SAD, 1 copy back, 5
 * records (each stage's end and the slot's done) and 6 waits (the slot's
 * last readers before both uploads, each upload for its blur, both blurs
 * for the SAD) a frame. */
static void video_case(const char *name, int pics, size_t n) {
    work w = {.video = 1, .pics = pics, .n = n};
    cw_pipeline *p = build(&w);
    counts one, piped;
    measure(&w, p, 1, &one);
    measure(&w, p, 0, &piped);
    const double launches = 2.0 * pics + 1 + pics, ups = 2.0 * pics;
    char title[96];
    const expect want_one[] = {
        {"cuLaunchKernel", launches, launches}, {"cuMemcpyHtoDAsync", ups, ups}, {"cuMemcpyDtoHAsync", 1, 1},
        {"cuEventRecord", 5, 5},                {"cuStreamWaitEvent", 6, 4},    {"cuStreamSynchronize", 1, 1},
        {"cuEventSynchronize", 0, 0},           {"cuCtxGetCurrent", 0, 1},
    };
    snprintf(title, sizeof title, "%s, one frame at a time", name);
    check(title, &one, want_one, sizeof want_one / sizeof want_one[0]);
    const expect want_piped[] = {
        {"cuLaunchKernel", launches, launches}, {"cuMemcpyHtoDAsync", ups, ups}, {"cuMemcpyDtoHAsync", 1, 1},
        {"cuEventRecord", 5, 5},                {"cuStreamWaitEvent", 6, 4},    {"cuEventSynchronize", 0, BOUND},
        {"cuCtxGetCurrent", 0, RUN_CALLS},
    };
    snprintf(title, sizeof title, "%s, pipelined", name);
    check(title, &piped, want_piped, sizeof want_piped / sizeof want_piped[0]);
    teardown(&w, &p);
}

static void test_video_calls_per_frame(void **state) {
    (void)state;
    video_case("video", 1, 1920);
}

static void test_video4k_calls_per_frame(void **state) {
    (void)state;
    video_case("video4k", 1, 3840);
}

static void test_video16_calls_per_frame(void **state) {
    (void)state;
    video_case("video16", 16, 320);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain")) ||
        !(fake_ctx_set = (int (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    (void)fake_ctx_handle;
    static const char k_ptx[] = "//\n// a test module\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n";
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS ||
        cw_module_load_image(&g_mod, k_ptx) != CW_SUCCESS || cw_module_get_kernel(g_mod, "k", &g_k) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond_calls_per_frame),
        cmocka_unit_test(test_video_calls_per_frame),
        cmocka_unit_test(test_video4k_calls_per_frame),
        cmocka_unit_test(test_video16_calls_per_frame),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_module_destroy(&g_mod);
    cw_context_destroy(&ctx);
    return rc;
}
