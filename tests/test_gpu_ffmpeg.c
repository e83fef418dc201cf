/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave inside FFmpeg, on the GPU: the clips of tests/data (H.264 and
 * HEVC, 1920x1080) decoded by FFmpeg's NVDEC into AV_PIX_FMT_CUDA frames
 * and processed by the pipeline of examples/ffmpeg_cuweave.h on FFmpeg's
 * own context and stream (the NULL stream FFmpeg leaves, and a stream the
 * program sets). Every frame's histogram and SAD is compared with the same
 * computation on the CPU over the clip decoded by FFmpeg's software
 * decoder. After every cuweave call the context current before it (none,
 * or FFmpeg's) is current again, FFmpeg's stream is the same handle with
 * the same flags, and at the end FFmpeg's context has its flags. The
 * slow-kernel variants (every read of a frame 10 ms late) are still exact,
 * also without FFmpeg's stream waiting for cuweave, where only the
 * references the processor holds keep NVDEC from writing a surface cuweave
 * has yet to read: the frames went back to FFmpeg's pool only after
 * cuweave's last use (and retiring them had to wait for the GPU).
 *
 * The filter-style variant: no decoder; the software-decoded frames are
 * uploaded with av_hwframe_transfer_data into a CUDA frame pool, processed
 * (the blur written into an output CUDA frame), downloaded with
 * av_hwframe_transfer_data and checked byte for byte; with slow kernels too,
 * where FFmpeg's pool hands the same surface back for the next upload. The
 * fcw_options.one_stream (issue 43) decoded and filter-style, on the
 * program's own stream (every operator on it) and on the NULL stream. The
 * control leaves out the ordering back to FFmpeg's stream and releases each
 * frame at once: then frames come out wrong, so the checks can fail.
 *
 * Exits 77 without a GPU or NVRTC.
 */
#define _POSIX_C_SOURCE 200809L
#include "cwtest.h"

#include "ffmpeg_cuweave.h"

typedef struct clip_ref {
    const char *name;
    fcw_result *want;
    size_t count;
    unsigned w, h;
} clip_ref;

static clip_ref clips[2] = {{"clip_h264.mp4", NULL, 0, 0, 0}, {"clip_hevc.mp4", NULL, 0, 0, 0}};

static void clip_path(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", fcw_data_dir(), name); }

/* The CPU's reference of a clip, computed once. */
static clip_ref *reference(int which) {
    clip_ref *c = &clips[which];
    if (!c->want) {
        char path[4096];
        clip_path(path, sizeof path, c->name);
        int r = fcw_reference_clip(path, &c->want, &c->count, &c->w, &c->h);
        if (r < 0) fail_msg("software decoding of %s failed: %s", path, av_err2str(r));
        assert_true(c->count >= 25);
        assert_int_equal(c->w, 1920);
        assert_int_equal(c->h, 1080);
    }
    return c;
}

typedef struct collect {
    const fcw_result *want;
    size_t count, seen, wrong;
    long long last;
    int in_order;
} collect;

static void on_result(void *user, long long index, const fcw_result *r) {
    collect *c = (collect *)user;
    c->in_order &= index == c->last + 1;
    c->last = index;
    c->seen++;
    if ((size_t)index >= c->count || memcmp(r, &c->want[index], sizeof *r) != 0) c->wrong++;
}

/* What the host's state is around each cuweave call. */
typedef struct host_watch {
    CUcontext ffctx;
    CUstream stream;
    unsigned stream_flags;
    int push; /* make FFmpeg's context current around each call */
    unsigned calls, changed;
} host_watch;

static void watch_before(host_watch *hwt, CUcontext *before) {
    if (hwt->push) assert_int_equal(fcw_cu.ctx_push(hwt->ffctx), 0);
    assert_int_equal(fcw_cu.ctx_get_current(before), 0);
}

static void watch_after(host_watch *hwt, const AVCUDADeviceContext *hw, CUcontext before) {
    CUcontext after = (CUcontext)(uintptr_t)1;
    assert_int_equal(fcw_cu.ctx_get_current(&after), 0);
    unsigned flags = hwt->stream_flags;
    if (hw->stream) assert_int_equal(fcw_cu.stream_get_flags(hw->stream, &flags), 0);
    hwt->calls++;
    if (after != before || hw->stream != hwt->stream || flags != hwt->stream_flags) hwt->changed++;
    if (hwt->push) {
        CUcontext popped = NULL;
        assert_int_equal(fcw_cu.ctx_pop(&popped), 0);
        assert_ptr_equal(popped, hwt->ffctx);
    }
}

static unsigned ctx_flags(CUcontext c) {
    unsigned f = 0;
    CUcontext popped = NULL;
    assert_int_equal(fcw_cu.ctx_push(c), 0);
    assert_int_equal(fcw_cu.ctx_get_flags(&f), 0);
    assert_int_equal(fcw_cu.ctx_pop(&popped), 0);
    return f;
}

/* ---- decoded by NVDEC ------------------------------------------------------ */

static void decode_case_opt(int which, int own_stream, unsigned long long extra_ns, int no_order_back, int one_stream) {
    clip_ref *ref = reference(which);
    char path[4096];
    clip_path(path, sizeof path, ref->name);
    AVBufferRef *dev = NULL;
    CUstream stream = NULL;
    assert_true(fcw_device_open(&dev, own_stream ? 0x1 : -1, &stream) >= 0);
    const AVCUDADeviceContext *hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)dev->data)->hwctx;
    host_watch hwt = {hw->cuda_ctx, hw->stream, 0, own_stream, 0, 0};
    if (stream) assert_int_equal(fcw_cu.stream_get_flags(stream, &hwt.stream_flags), 0);
    const unsigned ctx_flags_before = ctx_flags(hw->cuda_ctx);
    fcw_decoder d;
    int r = fcw_decoder_open(&d, path, dev);
    if (r < 0) fail_msg("cannot open %s for NVDEC decoding: %s", path, av_err2str(r));

    collect c = {ref->want, ref->count, 0, 0, -1, 1};
    fcw_options opt = {extra_ns, no_order_back, 0, one_stream};
    fcw_proc *p = NULL;
    CUcontext before;
    watch_before(&hwt, &before);
    cw_status st = fcw_open(&p, dev, ref->w, ref->h, &opt);
    watch_after(&hwt, hw, before);
    if (st != CW_SUCCESS) fail_msg("fcw_open: %s", cw_last_error()->message);
    p->on_result = on_result;
    p->user = &c;
    AVFrame *f = av_frame_alloc();
    assert_non_null(f);
    long long n = 0;
    while ((r = fcw_decoder_next(&d, f)) >= 0) {
        assert_int_equal(f->format, AV_PIX_FMT_CUDA);
        watch_before(&hwt, &before);
        st = fcw_process(p, f, n++, NULL);
        watch_after(&hwt, hw, before);
        if (st != CW_SUCCESS) fail_msg("fcw_process of frame %lld: %s", n - 1, cw_last_error()->message);
        av_frame_unref(f); /* the processor holds its own reference */
    }
    assert_int_equal(r, AVERROR_EOF);
    watch_before(&hwt, &before);
    st = fcw_drain(p);
    watch_after(&hwt, hw, before);
    assert_int_equal(st, CW_SUCCESS);
    const unsigned long long waits = p->waits;
    watch_before(&hwt, &before);
    fcw_close(&p);
    watch_after(&hwt, hw, before);
    printf("# %s, %s stream%s%s%s: %zu of %zu frames checked, %zu wrong; %u cuweave calls, the host's context or "
           "stream changed after %u; released after waiting for the GPU: %llu frames\n",
           ref->name, own_stream ? "the program's" : "FFmpeg's NULL", one_stream ? ", one stream" : "",
           extra_ns ? ", 10 ms slow kernels" : "",
           no_order_back ? ", FFmpeg's stream not waiting" : "", c.seen,
           ref->count, c.wrong, hwt.calls, hwt.changed, waits);
    assert_int_equal(c.seen, ref->count);
    assert_int_equal(n, (long long)ref->count);
    assert_int_equal(c.wrong, 0);
    assert_true(c.in_order);
    assert_int_equal(hwt.changed, 0);
    assert_int_equal(ctx_flags(hw->cuda_ctx), ctx_flags_before);
    /* With FFmpeg's stream not waiting, nothing holds the decoder back: it
     * runs ahead of the 10 ms reads, and frames were held (retirement waited
     * for the GPU) while cuweave still read them. (Not under
     * compute-sanitizer, which serializes all GPU work, NVDEC's copies too.) */
    if (extra_ns && no_order_back && !cwt_under_sanitizer()) assert_true(waits > 0);
    av_frame_free(&f);
    fcw_decoder_close(&d);
    fcw_device_close(&dev, stream);
}

static void decode_case(int which, int own_stream, unsigned long long extra_ns, int no_order_back) {
    decode_case_opt(which, own_stream, extra_ns, no_order_back, 0);
}

static void test_h264_null_stream(void **state) {
    (void)state;
    decode_case(0, 0, 0, 0);
}
static void test_h264_own_stream(void **state) {
    (void)state;
    decode_case(0, 1, 0, 0);
}
static void test_hevc_null_stream(void **state) {
    (void)state;
    decode_case(1, 0, 0, 0);
}
static void test_hevc_own_stream(void **state) {
    (void)state;
    decode_case(1, 1, 0, 0);
}
/* Every read of every frame 10 ms late: the frames go back to FFmpeg only
 * after it, and the results stay exact. */
static void test_h264_slow_kernels_null_stream(void **state) {
    (void)state;
    decode_case(0, 0, 10000000ull, 0);
}
static void test_hevc_slow_kernels_own_stream(void **state) {
    (void)state;
    decode_case(1, 1, 10000000ull, 0);
}
/* fcw_options.one_stream (issue 43): on the program's own stream every
 * operator runs on FFmpeg's stream itself, no event between the two; on the
 * NULL stream on the frame operator's. Exact with 10 ms slow kernels too:
 * NVDEC's next write of a surface waits for cuweave's reads by the stream's
 * order (or by the reference held). */
static void test_h264_one_stream_own_stream(void **state) {
    (void)state;
    decode_case_opt(0, 1, 0, 0, 1);
}
static void test_hevc_one_stream_slow_kernels_own_stream(void **state) {
    (void)state;
    decode_case_opt(1, 1, 10000000ull, 0, 1);
}
static void test_h264_one_stream_null_stream(void **state) {
    (void)state;
    decode_case_opt(0, 0, 0, 0, 1);
}
/* The same without FFmpeg's stream waiting for cuweave (fcw_options.
 * no_order_back): only the reference the processor holds until its work is
 * done keeps the decoder from writing the next pictures into a surface
 * cuweave has yet to read. */
static void test_h264_slow_kernels_only_references(void **state) {
    (void)state;
    decode_case(0, 0, 10000000ull, 1);
}
static void test_hevc_slow_kernels_only_references(void **state) {
    (void)state;
    decode_case(1, 1, 10000000ull, 1);
}

/* ---- filter-style: uploaded, processed, downloaded ------------------------ */

typedef struct filter_outcome {
    size_t frames, wrong_results, wrong_pictures;
    unsigned long long waits;
} filter_outcome;

static filter_outcome filter_case(int which, int own_stream, const fcw_options *opt) {
    clip_ref *ref = reference(which);
    char path[4096];
    clip_path(path, sizeof path, ref->name);
    AVBufferRef *dev = NULL;
    CUstream stream = NULL;
    assert_true(fcw_device_open(&dev, own_stream ? 0x1 : -1, &stream) >= 0);
    const AVCUDADeviceContext *hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)dev->data)->hwctx;
    host_watch hwt = {hw->cuda_ctx, hw->stream, 0, own_stream, 0, 0};
    if (stream) assert_int_equal(fcw_cu.stream_get_flags(stream, &hwt.stream_flags), 0);
    fcw_decoder d; /* software */
    int r = fcw_decoder_open(&d, path, NULL);
    if (r < 0) fail_msg("cannot open %s: %s", path, av_err2str(r));

    AVBufferRef *frames = NULL;
    AVFrame *sw = av_frame_alloc(), *in = av_frame_alloc(), *out = av_frame_alloc(), *dl = av_frame_alloc();
    assert_true(sw && in && out && dl);
    uint8_t *blur[2] = {malloc((size_t)ref->w * ref->h), malloc((size_t)ref->w * ref->h)};
    assert_true(blur[0] && blur[1]);
    collect c = {ref->want, ref->count, 0, 0, -1, 1};
    fcw_proc *p = NULL;
    CUcontext before;
    watch_before(&hwt, &before);
    cw_status st = fcw_open(&p, dev, ref->w, ref->h, opt);
    watch_after(&hwt, hw, before);
    if (st != CW_SUCCESS) fail_msg("fcw_open: %s", cw_last_error()->message);
    p->on_result = on_result;
    p->user = &c;
    filter_outcome o = {0, 0, 0, 0};
    long long n = 0;
    while ((r = fcw_decoder_next(&d, sw)) >= 0) {
        if (!frames) {
            assert_true(sw->format == AV_PIX_FMT_YUV420P || sw->format == AV_PIX_FMT_NV12);
            frames = av_hwframe_ctx_alloc(dev);
            assert_non_null(frames);
            AVHWFramesContext *fc = (AVHWFramesContext *)frames->data;
            fc->format = AV_PIX_FMT_CUDA;
            fc->sw_format = (enum AVPixelFormat)sw->format;
            fc->width = sw->width;
            fc->height = sw->height;
            assert_true(av_hwframe_ctx_init(frames) >= 0);
        }
        assert_true(av_hwframe_get_buffer(frames, in, 0) >= 0);
        assert_true(av_hwframe_transfer_data(in, sw, 0) >= 0); /* upload on FFmpeg's stream */
        assert_true(av_hwframe_get_buffer(frames, out, 0) >= 0);
        watch_before(&hwt, &before);
        st = fcw_process(p, in, n, out);
        watch_after(&hwt, hw, before);
        if (st != CW_SUCCESS) fail_msg("fcw_process of frame %lld: %s", n, cw_last_error()->message);
        av_frame_unref(in); /* back to the pool as far as the program goes */
        assert_true(av_hwframe_transfer_data(dl, out, 0) >= 0); /* download on FFmpeg's stream, synchronised */
        av_frame_unref(out);
        /* the picture: the blur of the luma as uploaded */
        fcw_blur_cpu(sw->data[0], (size_t)sw->linesize[0], ref->w, ref->h, blur[n % 2]);
        size_t bad = 0;
        for (unsigned y = 0; y < ref->h; y++)
            bad += memcmp(dl->data[0] + (size_t)y * dl->linesize[0], blur[n % 2] + (size_t)y * ref->w, ref->w) != 0;
        o.wrong_pictures += bad != 0;
        av_frame_unref(dl);
        av_frame_unref(sw);
        n++;
    }
    assert_int_equal(r, AVERROR_EOF);
    watch_before(&hwt, &before);
    st = fcw_drain(p);
    watch_after(&hwt, hw, before);
    assert_int_equal(st, CW_SUCCESS);
    o.waits = p->waits;
    watch_before(&hwt, &before);
    fcw_close(&p);
    watch_after(&hwt, hw, before);
    o.frames = (size_t)n;
    o.wrong_results = c.wrong;
    assert_int_equal(c.seen, ref->count);
    assert_int_equal(hwt.changed, 0);
    assert_true(c.in_order);
    free(blur[0]);
    free(blur[1]);
    av_frame_free(&sw);
    av_frame_free(&in);
    av_frame_free(&out);
    av_frame_free(&dl);
    av_buffer_unref(&frames);
    fcw_decoder_close(&d);
    fcw_device_close(&dev, stream);
    return o;
}

static void check_filter_opt(int which, int own_stream, unsigned long long extra_ns, int one_stream) {
    fcw_options opt = {extra_ns, 0, 0, one_stream};
    filter_outcome o = filter_case(which, own_stream, &opt);
    printf("# filter-style, %s, %s stream%s%s: %zu frames uploaded, processed, downloaded: %zu wrong results, %zu "
           "wrong pictures; released after waiting for the GPU: %llu\n",
           clips[which].name, own_stream ? "the program's" : "FFmpeg's NULL", one_stream ? ", one stream" : "",
           extra_ns ? ", 10 ms slow kernels" : "",
           o.frames, o.wrong_results, o.wrong_pictures, o.waits);
    assert_int_equal(o.frames, clips[which].count);
    assert_int_equal(o.wrong_results, 0);
    assert_int_equal(o.wrong_pictures, 0);
}

static void check_filter(int which, int own_stream, unsigned long long extra_ns) {
    check_filter_opt(which, own_stream, extra_ns, 0);
}

static void test_filter_null_stream(void **state) {
    (void)state;
    check_filter(0, 0, 0);
}
static void test_filter_own_stream(void **state) {
    (void)state;
    check_filter(1, 1, 0);
}
/* FFmpeg's pool hands the surface just released back for the next upload:
 * exact only because that upload waits for cuweave's reads. */
static void test_filter_slow_kernels(void **state) {
    (void)state;
    check_filter(0, 0, 10000000ull);
}

/* One stream on the program's own: the download after the blur's write and
 * the next upload after cuweave's reads by the stream's order alone. */
static void test_filter_one_stream_slow_kernels_own_stream(void **state) {
    (void)state;
    check_filter_opt(0, 1, 10000000ull, 1);
}

/* The control: no ordering back to FFmpeg's stream, frames released at once,
 * slow kernels: the download reads the output before the blur wrote it, so
 * the pictures come out wrong (49 of 50 on the H100). The results (histogram
 * and SAD, read from the input surfaces) stayed right there: 0 of 50 wrong,
 * the next upload did not overwrite a surface still being read in that run,
 * so only the pictures are asserted; the results are printed. */
static void test_filter_unordered_is_wrong(void **state) {
    (void)state;
    if (cwt_under_sanitizer()) {
        printf("# the control is skipped under compute-sanitizer (it serializes streams)\n");
        skip();
        return;
    }
    fcw_options opt = {10000000ull, 1, 1, 0};
    filter_outcome o = filter_case(0, 0, &opt);
    printf("# control (no ordering back, released at once, 10 ms slow kernels): %zu frames, %zu wrong results, %zu "
           "wrong pictures\n",
           o.frames, o.wrong_results, o.wrong_pictures);
    assert_true(o.wrong_pictures > 0);
}

int main(void) {
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("SKIP: no NVRTC: %s\n", cw_last_error()->message);
        return CWT_SKIP_EXIT;
    }
    if (fcw_driver_open() != 0) {
        printf("FAIL: cuweave found a driver but the test's own loader did not\n");
        return 1;
    }
    av_log_set_level(AV_LOG_ERROR);
    cwt_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h264_null_stream),
        cmocka_unit_test(test_h264_own_stream),
        cmocka_unit_test(test_hevc_null_stream),
        cmocka_unit_test(test_hevc_own_stream),
        cmocka_unit_test(test_h264_slow_kernels_null_stream),
        cmocka_unit_test(test_hevc_slow_kernels_own_stream),
        cmocka_unit_test(test_h264_one_stream_own_stream),
        cmocka_unit_test(test_hevc_one_stream_slow_kernels_own_stream),
        cmocka_unit_test(test_h264_one_stream_null_stream),
        cmocka_unit_test(test_h264_slow_kernels_only_references),
        cmocka_unit_test(test_hevc_slow_kernels_only_references),
        cmocka_unit_test(test_filter_null_stream),
        cmocka_unit_test(test_filter_own_stream),
        cmocka_unit_test(test_filter_slow_kernels),
        cmocka_unit_test(test_filter_one_stream_slow_kernels_own_stream),
        cmocka_unit_test(test_filter_unordered_is_wrong),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(clips[0].want);
    free(clips[1].want);
    return rc;
}
