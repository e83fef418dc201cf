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
 */
#define _POSIX_C_SOURCE 200809L
#include "cwtest.h"

#include "ffmpeg_cuweave.h"

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
    fcw_result *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
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
    assert_int_equal(fcw_reference_clip(path, &b, &nb, &w, &h), 0);
    assert_int_equal(nb, na);
    assert_memory_equal(a, b, na * sizeof *a);
    printf("# %s: %zu frames of %ux%u; frame 1's SAD %llu, frame 49's %llu\n", name, na, w, h,
           (unsigned long long)a[1].sad, (unsigned long long)a[49].sad);
    free(a);
    free(b);
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
static void test_rewind_decodes_the_same_frames(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/clip_hevc.mp4", fcw_data_dir());
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

int main(void) {
    av_log_set_level(AV_LOG_ERROR);
    cwt_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hwcontext_cuda_header_without_cuda_h),
        cmocka_unit_test(test_blur_by_hand),
        cmocka_unit_test(test_reference_by_hand),
        cmocka_unit_test(test_h264_clip_reference),
        cmocka_unit_test(test_hevc_clip_reference),
        cmocka_unit_test(test_rewind_decodes_the_same_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
