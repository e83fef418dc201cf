/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave inside FFmpeg: decodes a clip with FFmpeg's CUDA hardware decoding
 * (NVDEC) into AV_PIX_FMT_CUDA frames and runs a cuweave pipeline on every
 * decoded surface (ffmpeg_cuweave.h: a 3x3 blur of the luma, its histogram,
 * and the SAD of the blur against the previous frame's), on FFmpeg's own
 * context, ordered against FFmpeg's stream both ways: once with the stream
 * FFmpeg leaves NULL (the legacy stream), once with a stream the program
 * sets in AVCUDADeviceContext.stream. Every frame's result is compared with
 * the same computation on the CPU over the clip decoded by FFmpeg's
 * software decoder; the context current before each cuweave call is current
 * after it, and FFmpeg's stream (its handle and its flags) is unchanged.
 *
 *   ffmpeg_decode [CLIP]      (default: tests/data/clip_h264.mp4 of the source tree)
 *
 * Without a GPU, NVRTC or NVDEC it says why and exits 77; exits 1 when a
 * call fails or a result is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "ffmpeg_cuweave.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct check {
    const fcw_result *want;
    size_t count;
    size_t seen, wrong;
} check;

static void on_result(void *user, long long index, const fcw_result *r) {
    check *c = (check *)user;
    c->seen++;
    if ((size_t)index >= c->count || memcmp(r, &c->want[index], sizeof *r) != 0) {
        if (c->wrong < 3) fprintf(stderr, "ffmpeg_decode: frame %lld differs from the CPU's result\n", index);
        c->wrong++;
    }
}

/* One pass over the clip: 0 right, 1 wrong or failed, 77 no NVDEC. */
static int run(const char *path, int own_stream, const fcw_result *want, size_t count, unsigned w, unsigned h) {
    AVBufferRef *dev = NULL;
    CUstream stream = NULL;
    /* the program's stream: non-blocking, so that only explicit ordering
     * orders anything against it */
    if (fcw_device_open(&dev, own_stream ? 0x1 /* CU_STREAM_NON_BLOCKING */ : -1, &stream) < 0) {
        fprintf(stderr, "ffmpeg_decode: FFmpeg could not open its CUDA device\n");
        return 1;
    }
    const AVCUDADeviceContext *hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)dev->data)->hwctx;
    unsigned stream_flags = 0, flags_now = 0;
    if (stream) fcw_cu.stream_get_flags(stream, &stream_flags);
    fcw_decoder d;
    int ret = 1;
    if (fcw_decoder_open(&d, path, dev) < 0) {
        fprintf(stderr, "ffmpeg_decode: cannot open %s for hardware decoding\n", path);
        fcw_device_close(&dev, stream);
        return 77;
    }
    check c = {want, count, 0, 0};
    fcw_proc *p = NULL;
    AVFrame *f = av_frame_alloc();
    int kept = 1, r = 0;
    CUcontext before = NULL, after = NULL;
    fcw_cu.ctx_get_current(&before);
    cw_status st = fcw_open(&p, dev, w, h, NULL);
    fcw_cu.ctx_get_current(&after);
    kept &= before == after;
    if (st != CW_SUCCESS) {
        fprintf(stderr, "ffmpeg_decode: fcw_open: %s\n", cw_last_error()->message);
        if (cw_last_error()->status == CW_ERROR_COMPILE) fprintf(stderr, "%s", cw_jit_get_compile_log());
        goto out;
    }
    p->on_result = on_result;
    p->user = &c;
    const double t0 = now_ms();
    long long n = 0;
    while (f && (r = fcw_decoder_next(&d, f)) >= 0) {
        if (f->format != AV_PIX_FMT_CUDA) {
            fprintf(stderr, "ffmpeg_decode: the decoder gave %s frames, not CUDA ones\n", av_get_pix_fmt_name((enum AVPixelFormat)f->format));
            r = -1;
            break;
        }
        fcw_cu.ctx_get_current(&before);
        st = fcw_process(p, f, n++, NULL);
        fcw_cu.ctx_get_current(&after);
        kept &= before == after && hw->stream == stream;
        if (stream && fcw_cu.stream_get_flags(stream, &flags_now) == 0) kept &= flags_now == stream_flags;
        av_frame_unref(f); /* ours; the processor keeps its own reference until done */
        if (st != CW_SUCCESS) {
            fprintf(stderr, "ffmpeg_decode: fcw_process: %s\n", cw_last_error()->message);
            break;
        }
    }
    if (st == CW_SUCCESS && (r == AVERROR_EOF || r >= 0)) st = fcw_drain(p);
    const double ms = now_ms() - t0;
    if (r != AVERROR_EOF) {
        fprintf(stderr, "ffmpeg_decode: decoding stopped: %s\n", r < 0 ? av_err2str(r) : "a frame was not CUDA");
        goto out;
    }
    if (st != CW_SUCCESS) goto out;
    printf("  %s stream: %zu frames of %ux%u decoded by NVDEC and processed: %s; %.2f ms per frame (decode, "
           "pipeline, results); waited for the GPU before releasing %llu frames\n",
           own_stream ? "the program's" : "FFmpeg's NULL", c.seen, w, h,
           c.wrong == 0 && c.seen == count ? "every result equal to the CPU's" : "WRONG", ms / (double)(c.seen ? c.seen : 1),
           p->waits);
    printf("  the current context was the same after every cuweave call, FFmpeg's stream unchanged: %s\n",
           kept ? "yes" : "NO");
    ret = c.wrong == 0 && c.seen == count && kept ? 0 : 1;
out:
    fcw_close(&p);
    av_frame_free(&f);
    fcw_decoder_close(&d);
    fcw_device_close(&dev, stream);
    return ret;
}

int main(int argc, char **argv) {
    char def[4096];
    snprintf(def, sizeof def, "%s/clip_h264.mp4", fcw_data_dir());
    const char *path = argc > 1 ? argv[1] : def;
    printf("ffmpeg_decode: %s decoded by FFmpeg's NVDEC into CUDA frames, processed by a cuweave pipeline\n", path);
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st == CW_SUCCESS && !cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS || fcw_driver_open() != 0) {
        fprintf(stderr, "ffmpeg_decode: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }
    av_log_set_level(AV_LOG_ERROR);
    fcw_result *want = NULL;
    size_t count = 0;
    unsigned w = 0, h = 0;
    int r = fcw_reference_clip(path, &want, &count, &w, &h);
    if (r < 0 || count == 0) {
        fprintf(stderr, "ffmpeg_decode: cannot decode %s in software: %s\n", path, r < 0 ? av_err2str(r) : "no frames");
        return 1;
    }
    printf("  the CPU's reference: %zu frames of %ux%u decoded in software; frame 1's SAD %llu\n", count, w, h,
           count > 1 ? (unsigned long long)want[1].sad : 0ull);
    int rc = run(path, 0, want, count, w, h);
    if (rc == 0) rc = run(path, 1, want, count, w, h);
    if (rc == 77) printf("no NVDEC decoding here (FFmpeg could not open the hardware decoder)\n");
    free(want);
    return rc;
}
