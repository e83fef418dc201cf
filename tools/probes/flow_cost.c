/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flow_cost: cuweave's own host work per frame, off the GPU (issue 26/31).
 * Runs, against the fake driver (tests/fake_cuda.c), the cw_io calls that
 * bench_pipeline's (a) variant makes per frame for the diamond (A -> B, D ->
 * C) and the video pipeline (two uploads, two blurs, sad), and the submit of
 * bench_vmaf's cuweave design (two cw_stream_wait, a future rearm), the
 * FFmpeg processor's calls (ffmpeg, ffmpeg1: examples/ffmpeg_cuweave.h's
 * operators with a stream each or on one stream, one frame at a time) and
 * cw_stream_wait alone (wait, bench_streams' case). The
 * kernels and copies the benches make themselves are left out (the same
 * driver calls in the hand-written code): what remains is the library's
 * work and the driver calls it adds. The fake's calls are cheap, so
 * instructions under callgrind measure the library:
 *
 *   valgrind --tool=callgrind --toggle-collect='frames_*' --callgrind-out-file=cg.out \
 *       ./flow_cost build/dev/tests/libfakecuda.so diamond 2000
 *   python3 tools/probes/callgrind_objects.py cg.out 2000
 *
 * Prints, per workload: ns per frame (natively: noisy, the fake's calls
 * included) and driver calls per frame (the fake's counters; the pipeline's
 * include the host's cuStreamSynchronize on the sink's stream per frame).
 * callgrind_objects.py splits the instructions: the library's own, those of
 * the driver calls it makes, and calls of malloc/calloc/free per frame.
 *
 * Build (after ninja -C build/dev):
 *   cc -std=c11 -O2 -g -Iinclude -o build/dev/flow_cost tools/probes/flow_cost.c \
 *      build/dev/src/libcuweave.so -ldl -lpthread -Wl,-rpath,$PWD/build/dev/src
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cw_status s_ = (x);                                                                        \
        if (s_ != CW_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cw_last_error()->message); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define TRY(x)                                  \
    do {                                        \
        cw_status t_ = (x);                     \
        if (t_ != CW_SUCCESS) return t_;        \
    } while (0)

static long (*fake_calls)(const char *entry);

static cw_status op_src(cw_io *io, void *user) {
    (void)user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    cw_buffer *b;
    cw_devptr p;
    TRY(cw_io_alloc(&b, io, 4096));
    TRY(cw_buffer_get_writable(b, &p));
    return cw_io_emit(io, "out", NULL, b);
}
static cw_status op_mid(cw_io *io, void *user) {
    (void)user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    cw_message m;
    cw_devptr in, out;
    TRY(cw_io_receive(io, "in", &m));
    TRY(cw_buffer_get_ptr(m.buffer, &in));
    cw_buffer *b;
    TRY(cw_io_alloc(&b, io, 4096));
    TRY(cw_buffer_get_writable(b, &out));
    return cw_io_emit(io, "out", NULL, b);
}
static cw_stream *g_sink; /* the sink's stream: the host waits on it (bench_pipeline's P->sink) */
static cw_status op_sink(cw_io *io, void *user) {
    const char **names = user;
    cw_stream *s, *s2;
    TRY(cw_io_receive_stream(io, names[0], &s));
    TRY(cw_io_receive_stream(io, names[1], &s2));
    g_sink = s2;
    cw_message m;
    cw_devptr a, b;
    TRY(cw_io_receive(io, names[0], &m));
    TRY(cw_buffer_get_ptr(m.buffer, &a));
    TRY(cw_io_receive(io, names[1], &m));
    TRY(cw_buffer_get_ptr(m.buffer, &b));
    if (names[2]) { /* the diamond's C also takes a buffer it does not emit */
        cw_buffer *cb;
        cw_devptr c;
        TRY(cw_io_alloc(&cb, io, 4096));
        TRY(cw_buffer_get_writable(cb, &c));
    }
    return CW_SUCCESS;
}

/* examples/ffmpeg_cuweave.h's processor, its cw_* calls as it makes them
 * (FFmpeg left out: a wrapped stream stands for FFmpeg's, a pipeline run
 * and the frame's future waited for are one frame), ffmpeg: a stream per
 * operator, ffmpeg1: one stream (blur, hist, sad and the sink with
 * no_internal_stream). The host has no context current between frames. */
typedef struct fproc {
    cw_stream *host;     /* "FFmpeg's stream" */
    cw_future *done[4];  /* FCW_RING futures */
    cw_buffer *prev;     /* the previous blur */
    long frame;
} fproc;
static fproc g_fp;
static cw_status f_frame(cw_io *io, void *user) {
    (void)user;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, NULL, &s));
    TRY(cw_stream_wait(s, g_fp.host));
    return cw_io_emit(io, "out", NULL, NULL);
}
static cw_status f_work(cw_io *io, void *user) { /* blur, hist: a buffer out (64x32 bytes; 256 words) */
    const size_t bytes = user ? 2048 : 1024;
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o;
    cw_devptr d;
    TRY(cw_io_alloc(&o, io, bytes));
    TRY(cw_buffer_get_writable(o, &d));
    return cw_io_emit(io, "out", NULL, o);
}
static cw_status f_sad(cw_io *io, void *user) {
    (void)user;
    cw_message m;
    TRY(cw_io_receive(io, "in", &m));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o;
    cw_devptr d, cur, prev;
    TRY(cw_io_alloc(&o, io, 8));
    TRY(cw_buffer_get_writable(o, &d));
    TRY(cw_buffer_get_ptr(m.buffer, &cur));
    if (g_fp.prev) {
        TRY(cw_buffer_get_ptr(g_fp.prev, &prev));
        TRY(cw_buffer_use(g_fp.prev, s));
        cw_buffer_destroy(&g_fp.prev);
    }
    TRY(cw_buffer_retain(m.buffer));
    g_fp.prev = m.buffer;
    return cw_io_emit(io, "out", NULL, o);
}
static cw_status f_sink(cw_io *io, void *user) {
    (void)user;
    cw_message mh, ms;
    TRY(cw_io_receive(io, "hist", &mh));
    TRY(cw_io_receive(io, "sad", &ms));
    cw_stream *s;
    TRY(cw_io_receive_stream(io, "hist", &s));
    TRY(cw_io_receive_stream(io, "sad", &s));
    TRY(cw_stream_wait(g_fp.host, s));
    cw_future **f = &g_fp.done[g_fp.frame % 4];
    if (*f) return cw_future_rearm(*f, s);
    return cw_future_create(f, s, CW_FUTURE_EVENT);
}

static void add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                   const char *in1, const char *in2, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    CHECK(cw_operator_create(&op, name, &ops, user, NULL));
    if (in1) CHECK(cw_operator_add_input(op, in1, NULL));
    if (in2) CHECK(cw_operator_add_input(op, in2, NULL));
    if (out) CHECK(cw_operator_add_output(op, out, NULL));
    CHECK(cw_pipeline_add(p, op));
}

static void add_op_own(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                       const char *in1, const char *in2, const char *out, int own) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator_settings set;
    cw_operator_settings_default(&set);
    set.no_internal_stream = !own;
    cw_operator *op = NULL;
    CHECK(cw_operator_create(&op, name, &ops, user, &set));
    if (in1) CHECK(cw_operator_add_input(op, in1, NULL));
    if (in2) CHECK(cw_operator_add_input(op, in2, NULL));
    if (out) CHECK(cw_operator_add_output(op, out, NULL));
    CHECK(cw_pipeline_add(p, op));
}

static cw_pipeline *ffmpeg_pipeline(cw_context *ctx, int one_stream) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 5; /* FCW_RING + 1, as the processor's */
    cw_pipeline *p = NULL;
    CHECK(cw_pipeline_create(&p, ctx, &ps));
    add_op_own(p, "frame", f_frame, NULL, NULL, NULL, "out", 1);
    add_op_own(p, "blur", f_work, &g_fp, "in", NULL, "out", !one_stream);
    add_op_own(p, "hist", f_work, NULL, "in", NULL, "out", !one_stream);
    add_op_own(p, "sad", f_sad, NULL, "in", NULL, "out", !one_stream);
    add_op_own(p, "sink", f_sink, NULL, "hist", "sad", NULL, !one_stream);
    CHECK(cw_pipeline_connect(p, "frame", "out", "blur", "in"));
    CHECK(cw_pipeline_connect(p, "frame", "out", "hist", "in"));
    CHECK(cw_pipeline_connect(p, "blur", "out", "sad", "in"));
    CHECK(cw_pipeline_connect(p, "hist", "out", "sink", "hist"));
    CHECK(cw_pipeline_connect(p, "sad", "out", "sink", "sad"));
    CHECK(cw_pipeline_check(p));
    return p;
}

/* One frame of the processor, one at a time (fcw_process, then fcw_drain:
 * the frame's future polled, then waited for). */
__attribute__((noinline)) void frames_ffmpeg(cw_pipeline *p, long n) {
    for (long i = 0; i < n; i++) {
        CHECK(cw_pipeline_run(p, 1));
        cw_future *f = g_fp.done[g_fp.frame % 4];
        cw_status st = cw_future_poll(f);
        if (st == CW_ERROR_NOT_READY) st = cw_future_wait(f, -1);
        CHECK(st);
        g_fp.frame++;
    }
}

/* cw_stream_wait alone (bench_streams' case): two streams, one wait a frame. */
__attribute__((noinline)) void frames_wait_only(cw_stream *a, cw_stream *b, long n) {
    for (long i = 0; i < n; i++) CHECK(cw_stream_wait(a, b));
}

static const char *diamond_names[] = {"b", "d", "c"};
static const char *video_names[] = {"ref", "dis", NULL};

static cw_pipeline *pipeline(cw_context *ctx, int video) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.max_in_flight = 8;
    cw_pipeline *p = NULL;
    CHECK(cw_pipeline_create(&p, ctx, &ps));
    if (!video) {
        add_op(p, "A", op_src, NULL, NULL, NULL, "out");
        add_op(p, "B", op_mid, NULL, "in", NULL, "out");
        add_op(p, "D", op_mid, NULL, "in", NULL, "out");
        add_op(p, "C", op_sink, diamond_names, "b", "d", NULL);
        CHECK(cw_pipeline_connect(p, "A", "out", "B", "in"));
        CHECK(cw_pipeline_connect(p, "A", "out", "D", "in"));
        CHECK(cw_pipeline_connect(p, "B", "out", "C", "b"));
        CHECK(cw_pipeline_connect(p, "D", "out", "C", "d"));
    } else {
        add_op(p, "up_ref", op_src, NULL, NULL, NULL, "out");
        add_op(p, "up_dis", op_src, NULL, NULL, NULL, "out");
        add_op(p, "blur_ref", op_mid, NULL, "in", NULL, "out");
        add_op(p, "blur_dis", op_mid, NULL, "in", NULL, "out");
        add_op(p, "sad", op_sink, video_names, "ref", "dis", NULL);
        CHECK(cw_pipeline_connect(p, "up_ref", "out", "blur_ref", "in"));
        CHECK(cw_pipeline_connect(p, "up_dis", "out", "blur_dis", "in"));
        CHECK(cw_pipeline_connect(p, "blur_ref", "out", "sad", "ref"));
        CHECK(cw_pipeline_connect(p, "blur_dis", "out", "sad", "dis"));
    }
    CHECK(cw_pipeline_check(p));
    return p;
}

/* The measured loops (callgrind: --toggle-collect='frames_*'). One frame at
 * a time, as bench_pipeline's latency mode: cw_pipeline_run(p, 1), then the
 * host's wait on the sink's stream (cw_stream_synchronize), which is not
 * counted: frames_wait toggles the collection off while it runs. */
__attribute__((noinline)) void frames_wait(void) { CHECK(cw_stream_synchronize(g_sink)); }
__attribute__((noinline)) void frames_pipeline(cw_pipeline *p, long n) {
    for (long i = 0; i < n; i++) {
        CHECK(cw_pipeline_run(p, 1));
        frames_wait();
    }
}

typedef struct vmaf {
    cw_stream *up_ref, *up_dis, *compute;
    cw_future *fut[8];
} vmaf;

/* bench_vmaf's cw_submit less the calls the bench makes on raw handles. */
__attribute__((noinline)) void frames_vmaf(vmaf *V, long n) {
    for (long i = 0; i < n; i++) {
        CHECK(cw_stream_wait(V->compute, V->up_ref));
        CHECK(cw_stream_wait(V->compute, V->up_dis));
        cw_future *f = V->fut[i % 8];
        CHECK(cw_future_wait(f, -1)); /* the frame 8 before (the bench's pipelined wait) */
        CHECK(cw_future_rearm(f, V->compute));
    }
}

/* What bench_pipeline's operators call around their kernels: one
 * cw_kernel_launch (a kernel of two parameters, the launch configuration
 * without argument sizes, as the bench's) and one cw_copy_to_host of a word,
 * a frame; against the same calls made raw (frames_launch_raw). */
__attribute__((noinline)) void frames_launch(cw_kernel *k, cw_stream *s, const cw_launch_config *lc, void **args,
                                             void *host, cw_devptr dev, long n) {
    for (long i = 0; i < n; i++) {
        CHECK(cw_kernel_launch(k, s, lc, args));
        CHECK(cw_copy_to_host(s, host, dev, 8));
    }
}
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);
typedef int (*dtoh_fn)(void *, unsigned long long, size_t, void *);
__attribute__((noinline)) void frames_launch_raw(launch_fn launch, dtoh_fn dtoh, void *fn, void *cs, void **args,
                                                 void *host, cw_devptr dev, long n) {
    for (long i = 0; i < n; i++) {
        if (launch(fn, 1, 1, 1, 256, 1, 1, 0, cs, args, NULL) || dtoh(host, dev, 8, cs)) exit(1);
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *entries[] = {"cuEventRecord", "cuStreamWaitEvent", "cuEventQuery", "cuEventSynchronize",
                                "cuCtxGetCurrent", "cuCtxSetCurrent", "cuEventCreate", "cuMemAllocAsync",
                                "cuMemFreeAsync", "cuStreamSynchronize", "cuStreamQuery", "cuLaunchHostFunc",
                                "cuStreamWriteValue32", "cuStreamGetCtx", "cuPointerGetAttribute", "cuLaunchKernel",
                                NULL};

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s libfakecuda.so diamond|video|ffmpeg|ffmpeg1|wait|vmaf|launch [frames]\n", argv[0]);
        return 2;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls"))) return 1;
    const long n = argc > 3 ? atol(argv[3]) : 2000;
    CHECK(cw_init());
    cw_context *ctx;
    CHECK(cw_context_create(&ctx, 0));
    { /* the benches make the context current on their thread */
        cw_context_info ci;
        CHECK(cw_context_get_info(ctx, &ci));
        int (*set)(CUcontext) = (int (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
        if (!set || set(ci.handle)) return 1;
    }
    long before[32];
    double t0, t1;
    if (!strcmp(argv[2], "vmaf")) {
        vmaf V;
        memset(&V, 0, sizeof V);
        cw_stream_pool_settings pss;
        cw_stream_pool_settings_default(&pss);
        cw_stream_pool *pool;
        CHECK(cw_stream_pool_create(&pool, ctx, &pss));
        static int owner1, owner2; /* the pictures (bench_vmaf: their device pointers) */
        CHECK(cw_stream_pool_acquire_named(&V.up_ref, pool, &owner1, "upload"));
        CHECK(cw_stream_pool_acquire_named(&V.up_dis, pool, &owner2, "upload"));
        CHECK(cw_stream_create(&V.compute, ctx, NULL));
        for (int i = 0; i < 8; i++) CHECK(cw_future_create(&V.fut[i], V.compute, CW_FUTURE_EVENT));
        frames_vmaf(&V, 64); /* warm */
        for (int e = 0; entries[e]; e++) before[e] = fake_calls(entries[e]);
        t0 = now_s();
        frames_vmaf(&V, n);
        t1 = now_s();
        CHECK(cw_stream_synchronize(V.compute));
        for (int i = 0; i < 8; i++) cw_future_destroy(&V.fut[i]);
        cw_stream_destroy(&V.compute);
        CHECK(cw_stream_pool_release_owner(pool, &owner1, NULL));
        CHECK(cw_stream_pool_release_owner(pool, &owner2, NULL));
        cw_stream_pool_destroy(&pool);
    } else if (!strcmp(argv[2], "launch")) {
        /* a PTX module: the fake makes any kernel asked of one ("k#8,4": parameters of 8 and 4 bytes) */
        static const char ptx[] = "//\n// flow_cost\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n";
        cw_module *m;
        cw_kernel *k;
        CHECK(cw_module_load_image(&m, ptx));
        CHECK(cw_module_get_kernel(m, "k#8,4", &k));
        cw_stream *s;
        CHECK(cw_stream_create(&s, ctx, NULL));
        cw_launch_config lc;
        cw_launch_config_default(&lc);
        lc.block[0] = 256;
        cw_devptr dev = 0;
        cw_buffer *b;
        CHECK(cw_buffer_create(&b, s, 64));
        CHECK(cw_buffer_get_ptr(b, &dev));
        unsigned long long host = 0, p = 0;
        float f = 1.0f;
        void *args[] = {&p, &f};
        frames_launch(k, s, &lc, args, &host, dev, 64); /* warm: the function cached, the parameters listed */
        for (int e = 0; entries[e]; e++) before[e] = fake_calls(entries[e]);
        t0 = now_s();
        frames_launch(k, s, &lc, args, &host, dev, n);
        t1 = now_s();
        CHECK(cw_stream_synchronize(s));
        { /* the same two calls raw, for the driver's share (natively timed, printed) */
            void *cukernel = NULL, *fn = NULL;
            CHECK(cw_kernel_get_handle(k, &cukernel));
            int (*getfn)(void **, void *) = (int (*)(void **, void *))dlsym(lib, "cuKernelGetFunction");
            launch_fn launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
            dtoh_fn dtoh = (dtoh_fn)dlsym(lib, "cuMemcpyDtoHAsync_v2");
            if (!dtoh) dtoh = (dtoh_fn)dlsym(lib, "cuMemcpyDtoHAsync");
            cw_stream_info si;
            CHECK(cw_stream_get_info(s, &si));
            if (!getfn || !launch || !dtoh || getfn(&fn, cukernel)) return 1;
            const double r0 = now_s();
            frames_launch_raw(launch, dtoh, fn, si.handle, args, &host, dev, n);
            const double r1 = now_s();
            CHECK(cw_stream_synchronize(s));
            printf("launch: the same two calls raw: %.0f ns per frame (natively)\n", (r1 - r0) * 1e9 / (double)n);
        }
        cw_buffer_destroy(&b);
        cw_stream_destroy(&s);
        cw_module_destroy(&m);
    } else if (!strcmp(argv[2], "ffmpeg") || !strcmp(argv[2], "ffmpeg1")) {
        int (*set)(CUcontext) = (int (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
        if (!set || set(NULL)) return 1; /* FFmpeg pops its context after its own work */
        CHECK(cw_stream_create(&g_fp.host, ctx, NULL));
        cw_pipeline *p = ffmpeg_pipeline(ctx, !strcmp(argv[2], "ffmpeg1"));
        frames_ffmpeg(p, 100); /* warm: streams leased, the cache full */
        for (int e = 0; entries[e]; e++) before[e] = fake_calls(entries[e]);
        t0 = now_s();
        frames_ffmpeg(p, n);
        t1 = now_s();
        CHECK(cw_pipeline_synchronize(p));
        cw_pipeline_destroy(&p);
        cw_buffer_destroy(&g_fp.prev);
        for (int i = 0; i < 4; i++) cw_future_destroy(&g_fp.done[i]);
        cw_stream_destroy(&g_fp.host);
    } else if (!strcmp(argv[2], "wait")) {
        cw_stream *a, *b;
        CHECK(cw_stream_create(&a, ctx, NULL));
        CHECK(cw_stream_create(&b, ctx, NULL));
        frames_wait_only(a, b, 64);
        for (int e = 0; entries[e]; e++) before[e] = fake_calls(entries[e]);
        t0 = now_s();
        frames_wait_only(a, b, n);
        t1 = now_s();
        CHECK(cw_stream_synchronize(a));
        cw_stream_destroy(&a);
        cw_stream_destroy(&b);
    } else {
        cw_pipeline *p = pipeline(ctx, !strcmp(argv[2], "video"));
        frames_pipeline(p, 64); /* warm: streams leased, buffers cached */
        for (int e = 0; entries[e]; e++) before[e] = fake_calls(entries[e]);
        t0 = now_s();
        frames_pipeline(p, n);
        t1 = now_s();
        CHECK(cw_pipeline_synchronize(p));
        cw_pipeline_destroy(&p);
    }
    printf("%s: %.0f ns per frame (natively, with the fake driver)\ndriver calls per frame:", argv[2],
           (t1 - t0) * 1e9 / (double)n);
    for (int e = 0; entries[e]; e++) {
        long d = fake_calls(entries[e]) - before[e];
        if (d) printf(" %s %.2f", entries[e], (double)d / (double)n);
    }
    printf("\n");
    cw_context_destroy(&ctx);
    return 0;
}
