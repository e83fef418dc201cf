/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CPU side of cuweave inside FFmpeg (examples/ffmpeg_cuweave.h), with
 * no GPU: the reference computation the GPU test checks every frame
 * against (the blur, the histogram, the SAD) on small pictures worked out
 * by hand, and on the clips of tests/data decoded by FFmpeg's software
 * decoder (50 frames of 1920x1080 each; the same results on a second
 * decode, and after the decoder is rewound as the benchmark does). Also
 * that FFmpeg's hwcontext_cuda.h compiled here without CUDA's cuda.h, with
 * the AVCUDADeviceContext layout FFmpeg's library uses.
 *
 * And the processor itself (fcw_open, fcw_process, fcw_drain, fcw_close)
 * on the fake driver (tests/fake_cuda.c, path in argv[1]; the fake NVRTC
 * beside it), with FFmpeg's device context filled in by hand as a program
 * that hands FFmpeg its own context does: while the fake GPU holds its work,
 * no frame goes back to FFmpeg (their buffers' free callbacks are not
 * called) though the program dropped its references; once the work is
 * done every frame is released, in order, each after its result was handed
 * over; a released-at-once control frees them at once; the context current
 * before each call (none, or FFmpeg's) is current after it and FFmpeg's
 * stream is the same; FFmpeg's stream gets exactly one wait per frame, and
 * none with no_order_back; frames of another format or size are refused.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "cwtest.h"

#include "ffmpeg_cuweave.h"
#include "testing/seam.h"

/* the fake driver's hooks (argv[1]); NULL without it */
static void (*fake_hold)(int);
static int (*fake_drain)(int);
static long (*fake_calls)(const char *);
static int (*fake_ctx_get)(CUcontext *);
static int (*fake_ctx_set)(CUcontext);

/* hwcontext_cuda.h through cuweave's handle types: the struct FFmpeg's
 * library fills (cuda_ctx, stream, internal). */
static void test_hwcontext_cuda_header_without_cuda_h(void **state) {
    (void)state;
#ifdef __cuda_cuda_h__
    skip(); /* built with the real cuda.h: nothing to show */
#else
    assert_int_equal(sizeof(AVCUDADeviceContext), 3 * sizeof(void *));
    assert_int_equal(offsetof(AVCUDADeviceContext, cuda_ctx), 0);
    assert_int_equal(offsetof(AVCUDADeviceContext, stream), sizeof(void *));
#ifdef CUDA_VERSION
    fail_msg("CUDA_VERSION leaked out of ffmpeg_cuweave.h");
#endif
#endif
}

/* A 4x3 picture, rows 8 bytes apart: every output worked out by hand. */
static void test_blur_by_hand(void **state) {
    (void)state;
    const uint8_t src[3 * 8] = {
        0, 9, 18, 27, 0xee, 0xee, 0xee, 0xee, /* row 0 (pitch 8: the last 4 are not pixels) */
        9, 9, 9, 9, 0xee, 0xee, 0xee, 0xee,   /* row 1 */
        90, 0, 0, 255, 0xee, 0xee, 0xee, 0xee /* row 2 */
    };
    uint8_t dst[12];
    fcw_blur_cpu(src, 8, 4, 3, dst);
    /* (0,0): rows 0,0,1 and columns 0,0,1: 0+0+9 +0+0+9 +9+9+9 = 45 -> (45+4)/9 = 5 */
    assert_int_equal(dst[0], 5);
    /* (1,0): rows 0,0,1, columns 0..2: (0+9+18)*2 + 27 = 81 -> 85/9 = 9 */
    assert_int_equal(dst[1], 9);
    /* (3,0): columns 2,3,3: (18+27+27)*2 + 27 = 171 -> 175/9 = 19 */
    assert_int_equal(dst[3], 19);
    /* (0,2): rows 1,2,2, columns 0,0,1: 9+9+9 + (90+90+0)*2 = 387 -> 391/9 = 43 */
    assert_int_equal(dst[8], 43);
    /* (3,2): rows 1,2,2, columns 2,3,3: 27 + (0+255+255)*2 = 1047 -> 1051/9 = 116 */
    assert_int_equal(dst[11], 116);
    /* (1,1): the full 3x3: 0+9+18 + 27 + 90+0+0 = 144 -> 148/9 = 16 */
    assert_int_equal(dst[5], 16);
}

static void test_reference_by_hand(void **state) {
    (void)state;
    uint8_t a[2 * 4] = {1, 1, 1, 1, 0xff, 0xff, 0xff, 0xff}; /* 2x1, pitch 4 */
    uint8_t blur_a[2], blur_b[2];
    fcw_result r;
    fcw_reference(a, 4, 2, 1, NULL, blur_a, &r);
    assert_int_equal(r.hist[1], 2);
    assert_int_equal(r.hist[0xff], 0); /* outside the picture */
    assert_int_equal(r.sad, 0);        /* the first frame */
    assert_int_equal(blur_a[0], 1);
    uint8_t b[2 * 4] = {10, 28, 0, 0, 0, 0, 0, 0};
    fcw_reference(b, 4, 2, 1, blur_a, blur_b, &r);
    /* blur of (10, 28) in one row: x0: 10*6 + 28*3 = 144 -> 16; x1: 10*3 + 28*6 = 198 -> 22 */
    assert_int_equal(blur_b[0], 16);
    assert_int_equal(blur_b[1], 22);
    assert_int_equal(r.sad, (16 - 1) + (22 - 1));
    assert_int_equal(r.hist[10], 1);
    assert_int_equal(r.hist[28], 1);
}

static void check_clip(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fcw_data_dir(), name);
    fcw_result *a = NULL;
    size_t na = 0;
    unsigned w = 0, h = 0;
    int r = fcw_reference_clip(path, &a, &na, &w, &h);
    if (r < 0) fail_msg("%s: %s", path, av_err2str(r));
    assert_int_equal(na, 50);
    assert_int_equal(w, 1920);
    assert_int_equal(h, 1080);
    for (size_t i = 0; i < na; i++) {
        uint64_t sum = 0;
        for (int v = 0; v < 256; v++) sum += a[i].hist[v];
        assert_int_equal(sum, (uint64_t)w * h);
        if (i == 0) assert_int_equal(a[i].sad, 0);
        else assert_true(a[i].sad > 0); /* testsrc2 moves every frame */
    }
    printf("# %s: %zu frames of %ux%u; frame 1's SAD %llu, frame 49's %llu\n", name, na, w, h,
           (unsigned long long)a[1].sad, (unsigned long long)a[49].sad);
    free(a);
}

static void test_h264_clip_reference(void **state) {
    (void)state;
    check_clip("clip_h264.mp4");
}

static void test_hevc_clip_reference(void **state) {
    (void)state;
    check_clip("clip_hevc.mp4");
}

/* fcw_decoder_rewind (the benchmark's passes): the same frames again. */
static void rewind_case(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fcw_data_dir(), name);
    fcw_decoder d;
    assert_int_equal(fcw_decoder_open(&d, path, NULL), 0);
    AVFrame *f = av_frame_alloc();
    assert_non_null(f);
    uint64_t sums[2][64];
    size_t count[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass) assert_int_equal(fcw_decoder_rewind(&d), 0);
        int r;
        while ((r = fcw_decoder_next(&d, f)) >= 0) {
            uint64_t s = 0;
            for (int y = 0; y < f->height; y++)
                for (int x = 0; x < f->width; x++) s = s * 31u + f->data[0][(size_t)y * f->linesize[0] + x];
            if (count[pass] < 64) sums[pass][count[pass]] = s;
            count[pass]++;
            av_frame_unref(f);
        }
        assert_int_equal(r, AVERROR_EOF);
    }
    assert_int_equal(count[0], 50);
    assert_int_equal(count[1], 50);
    assert_memory_equal(sums[0], sums[1], 50 * sizeof(uint64_t));
    av_frame_free(&f);
    fcw_decoder_close(&d);
}

static void test_rewind_decodes_the_same_frames(void **state) {
    (void)state;
    rewind_case("clip_h264.mp4");
    rewind_case("clip_hevc.mp4");
}

/* ---- the processor on the fake driver ------------------------------------- */

enum { FW = 64, FH = 32, FPITCH = 128, NFRAMES = 10 };

typedef struct released {
    int order[64];
    int count;
    int results_before[64]; /* results handed over when frame i was released */
    int results;
} released;

static released g_rel;

static void frame_free(void *opaque, uint8_t *data) {
    (void)data;
    const int i = (int)(intptr_t)opaque;
    g_rel.results_before[i] = g_rel.results;
    g_rel.order[g_rel.count++] = i;
}

static void count_result(void *user, long long index, const fcw_result *r) {
    (void)r;
    released *rel = (released *)user;
    assert_int_equal(index, rel->results); /* in order */
    rel->results++;
}

typedef struct fake_host {
    cw_context *own;   /* the "FFmpeg" context, made by the test */
    cw_stream *stream; /* its stream, when the case sets one */
    cw_buffer *mem;    /* the frames' device memory */
    AVBufferRef *dev;
    AVCUDADeviceContext *hw;
    cw_devptr base;
} fake_host;

static void fake_host_open(fake_host *h, int own_stream) {
    memset(h, 0, sizeof *h);
    assert_cw_ok(cw_context_create(&h->own, 0));
    cw_stream *alloc_stream = NULL;
    assert_cw_ok(cw_stream_create(&alloc_stream, h->own, NULL));
    assert_cw_ok(cw_buffer_create(&h->mem, alloc_stream, (size_t)FPITCH * FH));
    assert_cw_ok(cw_buffer_get_ptr(h->mem, &h->base));
    assert_cw_ok(cw_stream_synchronize(alloc_stream));
    cw_stream_destroy(&alloc_stream);
    if (own_stream) assert_cw_ok(cw_stream_create(&h->stream, h->own, NULL));
    /* FFmpeg's device context as a program fills it in before
     * av_hwdevice_ctx_init (not called: nothing of FFmpeg's CUDA loader runs) */
    h->dev = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA);
    assert_non_null(h->dev);
    h->hw = (AVCUDADeviceContext *)((AVHWDeviceContext *)h->dev->data)->hwctx;
    cw_context_info ci;
    assert_cw_ok(cw_context_get_info(h->own, &ci));
    h->hw->cuda_ctx = ci.handle;
    if (h->stream) {
        cw_stream_info si;
        assert_cw_ok(cw_stream_get_info(h->stream, &si));
        h->hw->stream = si.handle;
    }
}

static void fake_host_close(fake_host *h) {
    h->hw->cuda_ctx = NULL;
    h->hw->stream = NULL;
    av_buffer_unref(&h->dev);
    cw_buffer_destroy(&h->mem);
    cw_stream_destroy(&h->stream);
    cw_context_destroy(&h->own);
}

/* A CUDA frame over the host's memory whose buffer reports its release. */
static AVFrame *fake_frame(const fake_host *h, int i) {
    AVFrame *f = av_frame_alloc();
    assert_non_null(f);
    f->format = AV_PIX_FMT_CUDA;
    f->width = FW;
    f->height = FH;
    f->data[0] = (uint8_t *)(uintptr_t)h->base;
    f->linesize[0] = FPITCH;
    static uint8_t dummy;
    f->buf[0] = av_buffer_create(&dummy, 1, frame_free, (void *)(intptr_t)i, 0);
    assert_non_null(f->buf[0]);
    return f;
}

static void need_fake(void) {
    if (!fake_hold) {
        printf("# no fake driver given (argv[1])\n");
        skip();
    }
}

/* The state a host watches around each call. */
static void process_checked(fcw_proc *p, const fake_host *h, AVFrame *f, long long i, CUcontext current) {
    CUstream stream_before = h->hw->stream;
    assert_int_equal(fake_ctx_set(current), 0);
    assert_cw_ok(fcw_process(p, f, i, NULL));
    CUcontext after = (CUcontext)(uintptr_t)1;
    assert_int_equal(fake_ctx_get(&after), 0);
    assert_ptr_equal(after, current);
    assert_ptr_equal(h->hw->stream, stream_before);
    assert_int_equal(fake_ctx_set(NULL), 0);
}

static void released_only_after_the_work(int own_stream) {
    need_fake();
    fake_host h;
    fake_host_open(&h, own_stream);
    memset(&g_rel, 0, sizeof g_rel);
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, NULL));
    p->on_result = count_result;
    p->user = &g_rel;
    fake_hold(1); /* the fake GPU runs nothing from here */
    for (int i = 0; i < FCW_RING; i++) {
        AVFrame *f = fake_frame(&h, i);
        process_checked(p, &h, f, i, i % 2 ? h.hw->cuda_ctx : NULL);
        av_frame_free(&f); /* the program's reference goes at once */
    }
    assert_int_equal(g_rel.count, 0); /* nothing back to FFmpeg while the GPU has not run the work */
    assert_int_equal(g_rel.results, 0);
    fake_hold(0);
    assert_cw_ok(fcw_drain(p));
    assert_int_equal(g_rel.count, FCW_RING);
    for (int i = 0; i < FCW_RING; i++) {
        assert_int_equal(g_rel.order[i], i);            /* in order */
        assert_int_equal(g_rel.results_before[i], i);   /* before its own result was handed over */
    }
    assert_int_equal(g_rel.results, FCW_RING);
    /* more frames than the ring: each released FCW_RING frames later at the latest */
    for (int i = FCW_RING; i < NFRAMES; i++) {
        AVFrame *f = fake_frame(&h, i);
        process_checked(p, &h, f, i, NULL);
        av_frame_free(&f);
        assert_true(g_rel.count >= i + 1 - FCW_RING);
    }
    fcw_close(&p);
    assert_int_equal(g_rel.count, NFRAMES);
    assert_int_equal(g_rel.results, NFRAMES);
    for (int i = 0; i < NFRAMES; i++) assert_int_equal(g_rel.order[i], i);
    assert_true(fake_drain(5000));
    fake_host_close(&h);
}

static void test_fake_released_after_the_work_null_stream(void **state) {
    (void)state;
    released_only_after_the_work(0);
}

static void test_fake_released_after_the_work_own_stream(void **state) {
    (void)state;
    released_only_after_the_work(1);
}

/* The control's knob: released at once, while the GPU still holds the work. */
static void test_fake_release_at_once(void **state) {
    (void)state;
    need_fake();
    fake_host h;
    fake_host_open(&h, 0);
    memset(&g_rel, 0, sizeof g_rel);
    fcw_options opt = {0, 1, 1, 0};
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, &opt));
    fake_hold(1);
    for (int i = 0; i < 3; i++) {
        AVFrame *f = fake_frame(&h, i);
        assert_cw_ok(fcw_process(p, f, i, NULL));
        av_frame_free(&f);
    }
    assert_int_equal(g_rel.count, 3);
    fake_hold(0);
    fcw_close(&p);
    assert_true(fake_drain(5000));
    fake_host_close(&h);
}

/* FFmpeg's stream waits once per frame for the sink; with no_order_back
 * never. */
static long waits_for(int no_order_back) {
    fake_host h;
    fake_host_open(&h, 1);
    memset(&g_rel, 0, sizeof g_rel);
    fcw_options opt = {0, no_order_back, 0, 0};
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, &opt));
    AVFrame *f = fake_frame(&h, 0);
    assert_cw_ok(fcw_process(p, f, 0, NULL)); /* the pipeline's first run leases its streams */
    assert_cw_ok(fcw_drain(p));
    const long before = fake_calls("cuStreamWaitEvent");
    for (int i = 1; i < NFRAMES; i++) assert_cw_ok(fcw_process(p, f, i, NULL));
    assert_cw_ok(fcw_drain(p));
    const long waits = fake_calls("cuStreamWaitEvent") - before;
    av_frame_free(&f);
    fcw_close(&p);
    assert_true(fake_drain(5000));
    fake_host_close(&h);
    return waits;
}

/* One frame at a time (each retired before the next, as bench_ffmpeg's
 * latency pass and a decoder loop that waits for each result do), the
 * processor's three per-frame buffers (blur, histogram, SAD) come back from
 * the pipeline's cache once warm: no allocation and no free per frame. On
 * the H100 each frame made 3 cuMemAllocFromPoolAsync and 3 cuMemFreeAsync
 * (22 us a frame): the cached buffers' uses were never learned finished
 * (the host's wait was on the frame's future, not on the pipeline), so the
 * cache filled with buffers it would not hand out. Now, once the cache is
 * full (64 buffers: about 21 frames), it asks the oldest. Returns the
 * allocations and frees of frames 100..179. */
static long allocs_per_frames(int one_stream, long *frees) {
    fake_host h;
    fake_host_open(&h, 1);
    memset(&g_rel, 0, sizeof g_rel);
    fcw_options opt = {0, 0, 0, one_stream};
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, &opt));
    AVFrame *f = fake_frame(&h, 0);
    long a0 = 0, f0 = 0;
    for (int i = 0; i < 180; i++) {
        if (i == 100) {
            a0 = fake_calls("cuMemAllocFromPoolAsync") + fake_calls("cuMemAlloc");
            f0 = fake_calls("cuMemFreeAsync") + fake_calls("cuMemFree");
        }
        assert_cw_ok(fcw_process(p, f, i, NULL));
        assert_cw_ok(fcw_drain(p)); /* the frame's result on the host before the next frame */
    }
    const long allocs = fake_calls("cuMemAllocFromPoolAsync") + fake_calls("cuMemAlloc") - a0;
    *frees = fake_calls("cuMemFreeAsync") + fake_calls("cuMemFree") - f0;
    av_frame_free(&f);
    fcw_close(&p);
    assert_true(fake_drain(5000));
    fake_host_close(&h);
    return allocs;
}

static void test_fake_buffers_reused_one_frame_at_a_time(void **state) {
    (void)state;
    need_fake();
    for (int split = 0; split < 2; split++) {
        long frees = 0;
        const long allocs = allocs_per_frames(split, &frees);
        printf("# %s: %ld allocations and %ld frees in 80 warm frames\n",
               split ? "one stream" : "a stream per operator", allocs, frees);
        assert_int_equal(allocs, 0);
        assert_int_equal(frees, 0);
    }
}

static void test_fake_one_wait_back_per_frame(void **state) {
    (void)state;
    need_fake();
    const long ordered = waits_for(0), not_back = waits_for(1);
    printf("# cuStreamWaitEvent calls for %d frames: %ld with FFmpeg's stream waiting, %ld without\n", NFRAMES - 1,
           ordered, not_back);
    assert_int_equal(ordered - not_back, NFRAMES - 1);
}

static void test_fake_refuses_other_frames(void **state) {
    (void)state;
    need_fake();
    fake_host h;
    fake_host_open(&h, 0);
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, NULL));
    memset(&g_rel, 0, sizeof g_rel);
    AVFrame *f = fake_frame(&h, 0);
    f->format = AV_PIX_FMT_NV12;
    assert_int_equal(fcw_process(p, f, 0, NULL), CW_ERROR_INVALID_ARGUMENT);
    f->format = AV_PIX_FMT_CUDA;
    f->width = FW / 2;
    assert_int_equal(fcw_process(p, f, 0, NULL), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(p->frames, 0);
    av_frame_free(&f);
    assert_int_equal(g_rel.count, 1); /* the processor kept no reference */
    fcw_close(&p);
    fake_host_close(&h);
}

/* ---- what a frame costs the host (issue 43) ------------------------------- */

/* The entries a frame may call (the seam counts cuweave's calls only). */
static const char *const k_entries[] = {
    "cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyDtoHAsync", "cuEventRecord", "cuStreamWaitEvent",
    "cuEventSynchronize", "cuEventQuery", "cuStreamSynchronize", "cuStreamQuery", "cuCtxGetCurrent",
    "cuCtxSetCurrent", "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuEventCreate"};
enum { NE = sizeof k_entries / sizeof k_entries[0], WARM = 100, COST_FRAMES = 40 };

typedef struct cost_want {
    const char *entry;
    double raw, cw; /* the hand-written code's calls a frame, and cuweave's */
} cost_want;

static unsigned long seam_of(const char *name) {
    const int id = cwi_seam_entry(name);
    return id < 0 ? 0 : cwi_seam_calls(id);
}

/* One frame at a time on FFmpeg's own stream, no context current between
 * calls (FFmpeg pushes and pops its own around its work), each frame's
 * result waited for (fcw_drain) before the next, as bench_ffmpeg's latency
 * pass: cuweave's driver calls a frame, entry by entry, against `want`
 * (printed beside the hand-written code's: bench_ffmpeg's raw_process on
 * FFmpeg's stream makes cuCtxPushCurrent, 5 launches, 2 copies,
 * cuEventRecord, cuCtxPopCurrent and, when the frame retires,
 * cuEventSynchronize: 11). */
static void frame_cost(int one_stream, const char *name, const cost_want *want, size_t nwant) {
    fake_host h;
    fake_host_open(&h, 1);
    memset(&g_rel, 0, sizeof g_rel);
    fcw_options opt = {0, 0, 0, one_stream};
    fcw_proc *p = NULL;
    assert_cw_ok(fcw_open(&p, h.dev, FW, FH, &opt));
    AVFrame *f = fake_frame(&h, 0);
    assert_int_equal(fake_ctx_set(NULL), 0);
    for (int i = 0; i < WARM; i++) { /* warm: streams leased, the cache full (about 21 frames) */
        assert_cw_ok(fcw_process(p, f, i, NULL));
        assert_cw_ok(fcw_drain(p));
    }
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    unsigned long before[NE];
    for (int e = 0; e < NE; e++) before[e] = seam_of(k_entries[e]);
    const unsigned long all0 = cwi_seam_calls(-1);
    for (int i = WARM; i < WARM + COST_FRAMES; i++) {
        assert_cw_ok(fcw_process(p, f, i, NULL));
        assert_cw_ok(fcw_drain(p));
    }
    double per[NE];
    for (int e = 0; e < NE; e++) per[e] = (double)(seam_of(k_entries[e]) - before[e]) / COST_FRAMES;
    const double all = (double)(cwi_seam_calls(-1) - all0) / COST_FRAMES;
    cwi_seam_disable();
    double raw_all = 0, listed = 0;
    for (size_t i = 0; i < nwant; i++) raw_all += want[i].raw;
    printf("# %s: %.2f driver calls a frame (hand-written on FFmpeg's stream: %.2f):", name, all, raw_all);
    for (int e = 0; e < NE; e++)
        if (per[e] != 0) printf(" %s %.2f;", k_entries[e], per[e]);
    printf("\n");
    for (int e = 0; e < NE; e++) {
        double cw = 0;
        for (size_t i = 0; i < nwant; i++)
            if (!strcmp(want[i].entry, k_entries[e])) cw = want[i].cw;
        if (fabs(per[e] - cw) > 1e-9) fail_msg("%s: %s: %.2f calls a frame, expected %.2f", name, k_entries[e], per[e], cw);
        listed += cw;
    }
    if (fabs(all - listed) > 1e-9) fail_msg("%s: %.2f calls a frame in all, %.2f of them listed", name, all, listed);
    av_frame_free(&f);
    fcw_close(&p);
    assert_true(fake_drain(5000));
    fake_host_close(&h);
}

/* A stream per operator (the processor's default): FFmpeg's stream waited
 * for, the DAG's four hops, FFmpeg's stream waiting for the sink. */
static void test_fake_calls_per_frame_streams(void **state) {
    (void)state;
    need_fake();
    const cost_want want[] = {
        {"cuLaunchKernel", 5, 5},     {"cuMemcpyDtoHAsync", 2, 2}, {"cuEventRecord", 1, 9},
        {"cuStreamWaitEvent", 0, 7},  {"cuEventSynchronize", 1, 1}, {"cuEventQuery", 0, 2},
        {"cuCtxGetCurrent", 0, 1},    {"cuCtxSetCurrent", 0, 2},
        {"cuCtxPushCurrent", 1, 0},   {"cuCtxPopCurrent", 1, 0},
    };
    frame_cost(0, "FFmpeg processor, a stream per operator", want, sizeof want / sizeof want[0]);
}

/* One stream, FFmpeg's own: every operator on it (the hand-written code's
 * shape), no event between cuweave's work and FFmpeg's. What is left beyond
 * the hand-written code (docs/pipelines.md, "The FFmpeg processor's
 * frame"): a mark per compute call (5), the previous blur's use
 * (cw_buffer_use), the cache asking whether that blur's memory is free, the
 * future polled before its wait, the in-flight bound, and the context made
 * current and given back (FFmpeg leaves none current). */
static void test_fake_calls_per_frame_one_stream(void **state) {
    (void)state;
    need_fake();
    const cost_want want[] = {
        {"cuLaunchKernel", 5, 5},     {"cuMemcpyDtoHAsync", 2, 2}, {"cuEventRecord", 1, 7},
        {"cuStreamWaitEvent", 0, 0},  {"cuEventSynchronize", 1, 1}, {"cuEventQuery", 0, 2},
        {"cuCtxGetCurrent", 0, 1},    {"cuCtxSetCurrent", 0, 2},
        {"cuCtxPushCurrent", 1, 0},   {"cuCtxPopCurrent", 1, 0},
    };
    frame_cost(1, "FFmpeg processor, one stream", want, sizeof want / sizeof want[0]);
}

int main(int argc, char **argv) {
    av_log_set_level(AV_LOG_ERROR);
    if (argc > 1 && argv[1][0]) {
        setenv("CUWEAVE_LIBCUDA", argv[1], 1);
        setenv("FAKE_CUDA_FEATURES", "all", 1);
        char nvrtc[4096];
        snprintf(nvrtc, sizeof nvrtc, "%s", argv[1]);
        char *slash = strrchr(nvrtc, '/');
        snprintf(slash ? slash + 1 : nvrtc, sizeof nvrtc - (size_t)(slash ? slash + 1 - nvrtc : 0), "libfakenvrtc.so");
        setenv("CUWEAVE_LIBNVRTC", nvrtc, 1);
        setenv("CUWEAVE_CACHE_DIR", "off", 1);
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!lib || !(*(void **)&fake_hold = dlsym(lib, "fake_cuda_hold")) ||
            !(*(void **)&fake_drain = dlsym(lib, "fake_cuda_drain")) ||
            !(*(void **)&fake_calls = dlsym(lib, "fake_cuda_calls")) ||
            !(*(void **)&fake_ctx_get = dlsym(lib, "cuCtxGetCurrent")) ||
            !(*(void **)&fake_ctx_set = dlsym(lib, "cuCtxSetCurrent")) || cw_init() != CW_SUCCESS) {
            printf("FAIL: cannot use the fake driver %s: %s\n", argv[1], cw_last_error()->message);
            return 1;
        }
    }
    cwt_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hwcontext_cuda_header_without_cuda_h),
        cmocka_unit_test(test_blur_by_hand),
        cmocka_unit_test(test_reference_by_hand),
        cmocka_unit_test(test_h264_clip_reference),
        cmocka_unit_test(test_hevc_clip_reference),
        cmocka_unit_test(test_rewind_decodes_the_same_frames),
        cmocka_unit_test(test_fake_released_after_the_work_null_stream),
        cmocka_unit_test(test_fake_released_after_the_work_own_stream),
        cmocka_unit_test(test_fake_release_at_once),
        cmocka_unit_test(test_fake_one_wait_back_per_frame),
        cmocka_unit_test(test_fake_buffers_reused_one_frame_at_a_time),
        cmocka_unit_test(test_fake_refuses_other_frames),
        cmocka_unit_test(test_fake_calls_per_frame_streams),
        cmocka_unit_test(test_fake_calls_per_frame_one_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
