/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave inside FFmpeg: NVDEC decoding of the clips of tests/data (H.264
 * and HEVC, 1920x1080) into CUDA frames, each processed as in
 * examples/ffmpeg_cuweave.h (3x3 blur of the luma, its histogram, the SAD
 * against the previous frame's blur, both results copied to page-locked
 * memory; the same NVRTC kernels and launch shapes everywhere):
 *
 *  A. cuweave's pipeline against the same processing hand-written on the
 *     raw driver API on FFmpeg's stream (every kernel and copy on it; a frame
 *     is released when its event has completed), with FFmpeg's stream NULL
 *     and set by the program: decode + process throughput (frames per
 *     second over a pass of the clip, 4 frames in flight) and per-frame
 *     latency (one frame at a time: from avcodec_receive_frame's return to
 *     the result on the host). cuweave twice: as examples/ffmpeg_cuweave.h
 *     runs by default (a stream per operator, the pipeline's default: the
 *     histogram beside the blur, events between the streams) and with
 *     fcw_options.one_stream (blur, histogram, SAD and the sink on the frame
 *     operator's stream, as the hand-written code runs on one stream).
 *  B. libvmaf's ADR-0378 case for real, while FFmpeg works on the NULL
 *     stream: each frame's processing (with 2 ms more GPU work per frame, a
 *     heavier metric) on per-picture streams made with CU_STREAM_DEFAULT
 *     (blocking: the old design), the same with CU_STREAM_NON_BLOCKING (the
 *     fix), and cuweave's non-blocking pipeline. Nobody consumes the results
 *     on FFmpeg's stream, so none makes FFmpeg's stream wait (the frames
 *     are protected by the references held until the work is done). Then a
 *     timeline of GPU timestamps (events on the NULL stream after each
 *     decoded frame, and at the end of each frame's processing) shows what
 *     a blocking stream does: FFmpeg's NULL-stream copy of frame n+1 waits
 *     for the processing of frame n.
 *
 *  C. Where the time goes, for every variant: a pipelined pass's phases (the
 *     first frame received, frame 10 received, the rate of frames 10.. and
 *     the drain: the first frames of an H.264 pass take most of its time,
 *     so the fps of a whole pass mostly measures the decoder's start), and
 *     a one-frame-at-a-time pass with GPU stamps (fcw_stamp: %globaltimer
 *     written to page-locked memory by a 1-thread kernel at the same points
 *     of cuweave's operators and of the hand-written code: processing
 *     start, extra work end, each of hist, blur, sad start and end, the
 *     copies' end; and on FFmpeg's stream after the frame was received)
 *     and host times (receipt, submit, result in hand) on one clock:
 *     submit, submit to GPU start, each operator, GPU end to the host
 *     having the result (the wait's wake-up), total. Added for issue 28:
 *     by reading, cuweave's 0.9 ms over the hand-written code in the ADR
 *     case was the wake-up (an EVENT future's wait polled with sleeps grown
 *     to 1 ms where the hand-written cuEventSynchronize sleeps in the
 *     driver; changed in src/core/future.cpp); the breakdown shows on the
 *     GPU whether anything else is left.
 *
 * Every result is checked against the CPU over the software-decoded clip.
 * Prints a block for docs/benchmarks.md. Exits 77 without a GPU, NVRTC or
 * the clips' hardware decoding.
 */
#define _POSIX_C_SOURCE 200809L
#include "../tests/rawcuda.h"
#define BENCH_NAME "bench_ffmpeg"
#include "bench_common.h"

#include "ffmpeg_cuweave.h"
#include "testing/seam.h"

enum { PASSES = 12, ADR_WORK_US = 2000, TL_FIRST = 10, TL_COUNT = 8, MAX_FRAMES = 1024 };

/* ---- the hand-written processing (raw driver API) -------------------------- */

typedef struct raw_proc {
    CUcontext ctx;
    CUstream host;        /* FFmpeg's stream */
    int per_picture;      /* 0: everything on FFmpeg's stream; 1: a stream per picture */
    CUstream ps[FCW_RING];
    CUevent ready[FCW_RING], done[FCW_RING];
    AVFrame *frame[FCW_RING];
    long long index[FCW_RING];
    void *mod, *fspin, *fzero, *fblur, *fhist, *fsad, *fstamp;
    unsigned long long *stamps; /* the breakdown's words of the current frame (FCW_ST_*), or NULL */
    unsigned long long blur[2], dres[FCW_RING]; /* dres: 256 words of histogram, then the SAD */
    fcw_result *pinned;
    unsigned long long extra_ns;
    unsigned w, h;
    void (*on_result)(void *user, long long index, const fcw_result *r);
    void *user;
} raw_proc;

#define RAW_TRY_(expr)                                                                         \
    do {                                                                                       \
        int r_ = (expr);                                                                       \
        if (r_ != 0) {                                                                         \
            fprintf(stderr, "bench_ffmpeg: %s failed with CUresult %d\n", #expr, r_);          \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void raw_retire(raw_proc *p, unsigned i) {
    if (p->index[i] < 0) return;
    RAW_TRY_(fcw_cu.event_sync(p->done[i]));
    av_frame_unref(p->frame[i]);
    if (p->on_result) p->on_result(p->user, p->index[i], &p->pinned[i]);
    p->index[i] = -1;
}

static void raw_drain(raw_proc *p) {
    for (;;) {
        int oldest = -1;
        for (unsigned j = 0; j < FCW_RING; j++)
            if (p->index[j] >= 0 && (oldest < 0 || p->index[j] < p->index[oldest])) oldest = (int)j;
        if (oldest < 0) return;
        raw_retire(p, (unsigned)oldest);
    }
}

/* stream_flags < 0: on FFmpeg's stream; else per-picture streams made with them. */
static void raw_open(raw_proc *p, AVBufferRef *dev, const cw_program *prog, unsigned w, unsigned h, int stream_flags,
                     unsigned long long extra_ns) {
    memset(p, 0, sizeof *p);
    const AVCUDADeviceContext *hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)dev->data)->hwctx;
    p->ctx = hw->cuda_ctx;
    p->host = hw->stream;
    p->per_picture = stream_flags >= 0;
    p->extra_ns = extra_ns;
    p->w = w;
    p->h = h;
    cw_program_info pi;
    CW_CHECK(cw_program_get_info(prog, &pi));
    CUcontext dummy;
    RAW_TRY_(fcw_cu.ctx_push(p->ctx));
    RAW_TRY_(fcw_cu.module_load_data(&p->mod, pi.code));
    RAW_TRY_(fcw_cu.module_get_function(&p->fspin, p->mod, "fcw_spin"));
    RAW_TRY_(fcw_cu.module_get_function(&p->fzero, p->mod, "fcw_zero"));
    RAW_TRY_(fcw_cu.module_get_function(&p->fblur, p->mod, "fcw_blur"));
    RAW_TRY_(fcw_cu.module_get_function(&p->fhist, p->mod, "fcw_hist"));
    RAW_TRY_(fcw_cu.module_get_function(&p->fsad, p->mod, "fcw_sad"));
    RAW_TRY_(fcw_cu.module_get_function(&p->fstamp, p->mod, "fcw_stamp"));
    RAW_TRY_(fcw_cu.mem_alloc(&p->blur[0], (size_t)w * h));
    RAW_TRY_(fcw_cu.mem_alloc(&p->blur[1], (size_t)w * h));
    RAW_TRY_(fcw_cu.host_alloc((void **)&p->pinned, FCW_RING * sizeof(fcw_result)));
    for (unsigned i = 0; i < FCW_RING; i++) {
        RAW_TRY_(fcw_cu.mem_alloc(&p->dres[i], 256 * 4 + 8));
        RAW_TRY_(fcw_cu.event_create(&p->done[i], 0)); /* timing: the timeline reads it */
        RAW_TRY_(fcw_cu.event_create(&p->ready[i], 0x2 /* CU_EVENT_DISABLE_TIMING */));
        if (p->per_picture) RAW_TRY_(fcw_cu.stream_create(&p->ps[i], (unsigned)stream_flags));
        p->frame[i] = av_frame_alloc();
        p->index[i] = -1;
    }
    RAW_TRY_(fcw_cu.ctx_pop(&dummy));
}

static void raw_close(raw_proc *p) {
    raw_drain(p);
    CUcontext dummy;
    RAW_TRY_(fcw_cu.ctx_push(p->ctx));
    for (unsigned i = 0; i < FCW_RING; i++) {
        if (p->ps[i]) fcw_cu.stream_destroy(p->ps[i]);
        fcw_cu.event_destroy(p->done[i]);
        fcw_cu.event_destroy(p->ready[i]);
        fcw_cu.mem_free(p->dres[i]);
        av_frame_free(&p->frame[i]);
    }
    fcw_cu.mem_free(p->blur[0]);
    fcw_cu.mem_free(p->blur[1]);
    fcw_cu.host_free(p->pinned);
    fcw_cu.module_unload(p->mod);
    RAW_TRY_(fcw_cu.ctx_pop(&dummy));
}

/* The breakdown's stamp k on s (as fcw_stamp does for cuweave's operators). */
static void raw_stamp(raw_proc *p, CUstream s, unsigned k) {
    if (!p->stamps) return;
    unsigned long long at = (unsigned long long)(uintptr_t)&p->stamps[k];
    void *a[] = {&at};
    RAW_TRY_(fcw_cu.launch(p->fstamp, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
}

static void raw_process(raw_proc *p, AVFrame *f, long long index) {
    const unsigned i = (unsigned)(index % FCW_RING);
    raw_retire(p, i);
    CUcontext dummy;
    RAW_TRY_(fcw_cu.ctx_push(p->ctx));
    CUstream s = p->host;
    if (p->per_picture) {
        s = p->ps[i];
        RAW_TRY_(fcw_cu.event_record(p->ready[i], p->host)); /* the decoded picture */
        RAW_TRY_(fcw_cu.stream_wait_event(s, p->ready[i], 0));
        if (index > 0) /* the previous blur written (and the one before read) */
            RAW_TRY_(fcw_cu.stream_wait_event(s, p->done[(index - 1) % FCW_RING], 0));
    }
    unsigned long long luma = (unsigned long long)(uintptr_t)f->data[0], pitch = (unsigned long long)f->linesize[0];
    unsigned long long cur = p->blur[index % 2], prev = index > 0 ? p->blur[(index - 1) % 2] : cur, none = 0, npitch = 0;
    unsigned long long hist = p->dres[i], sad = p->dres[i] + 256 * 4;
    unsigned w = p->w, h = p->h, n256 = 256, n2 = 2, npx = w * h;
    raw_stamp(p, s, FCW_ST_START);
    if (p->extra_ns) {
        void *a[] = {&p->extra_ns};
        RAW_TRY_(fcw_cu.launch(p->fspin, 1, 1, 1, 1, 1, 1, 0, s, a, NULL));
    }
    raw_stamp(p, s, FCW_ST_SPIN_END);
    void *zh[] = {&hist, &n256};
    raw_stamp(p, s, FCW_ST_HIST0);
    RAW_TRY_(fcw_cu.launch(p->fzero, 1, 1, 1, 256, 1, 1, 0, s, zh, NULL));
    void *ah[] = {&luma, &pitch, &w, &h, &hist};
    RAW_TRY_(fcw_cu.launch(p->fhist, FCW_HIST_GRID, 1, 1, FCW_HIST_BLOCK, 1, 1, 0, s, ah, NULL));
    raw_stamp(p, s, FCW_ST_HIST1);
    void *ab[] = {&luma, &pitch, &cur, &w, &h, &none, &npitch};
    raw_stamp(p, s, FCW_ST_BLUR0);
    RAW_TRY_(fcw_cu.launch(p->fblur, (w + FCW_BLUR_BX - 1) / FCW_BLUR_BX, (h + FCW_BLUR_BY - 1) / FCW_BLUR_BY, 1,
                           FCW_BLUR_BX, FCW_BLUR_BY, 1, 0, s, ab, NULL));
    raw_stamp(p, s, FCW_ST_BLUR1);
    void *zs[] = {&sad, &n2};
    raw_stamp(p, s, FCW_ST_SAD0);
    RAW_TRY_(fcw_cu.launch(p->fzero, 1, 1, 1, 32, 1, 1, 0, s, zs, NULL));
    void *as[] = {&cur, &prev, &npx, &sad};
    RAW_TRY_(fcw_cu.launch(p->fsad, FCW_SAD_GRID, 1, 1, FCW_SAD_BLOCK, 1, 1, 0, s, as, NULL));
    raw_stamp(p, s, FCW_ST_SAD1);
    RAW_TRY_(fcw_cu.dtoh_async(p->pinned[i].hist, hist, sizeof p->pinned[i].hist, s));
    RAW_TRY_(fcw_cu.dtoh_async(&p->pinned[i].sad, sad, sizeof p->pinned[i].sad, s));
    raw_stamp(p, s, FCW_ST_END);
    RAW_TRY_(fcw_cu.event_record(p->done[i], s));
    RAW_TRY_(fcw_cu.ctx_pop(&dummy));
    if (av_frame_ref(p->frame[i], f) < 0) exit(1);
    p->index[i] = index;
}

/* ---- runs ------------------------------------------------------------------ */

typedef enum variant { V_CW, V_RAW, V_OLD, V_FIX, V_CW_NB, V_CW_SPLIT, V_COUNT } variant;
static const char *variant_name[V_COUNT] = {
    "cuweave pipeline", "hand-written, on FFmpeg's stream", "per-picture blocking streams (old libvmaf)",
    "per-picture non-blocking streams (ADR fix)", "cuweave pipeline (non-blocking)",
    "cuweave pipeline, one stream"};

typedef struct checker {
    const fcw_result *want;
    size_t count;
    long checked, wrong;
    double *done_ms; /* when each frame's result was handed over (host) */
} checker;

static void on_result(void *user, long long index, const fcw_result *r) {
    checker *c = (checker *)user;
    c->checked++;
    if ((size_t)index >= c->count || memcmp(r, &c->want[index], sizeof *r) != 0) c->wrong++;
    if (c->done_ms && (size_t)index < c->count) c->done_ms[index] = (double)now_ns() / 1e6;
}

/* The timeline: events on the NULL stream after each decoded frame, and at
 * the end of each frame's processing. */
typedef struct timeline {
    int on;
    CUevent base, dec[TL_FIRST + TL_COUNT], end[TL_FIRST + TL_COUNT];
    double host_ms[TL_FIRST + TL_COUNT], base_host_ms;
} timeline;

static void tl_sink(void *user, long long index, cw_stream *s);

/* The per-frame breakdown of a one-at-a-time pass: GPU stamps (fcw_stamp,
 * the GPU's %globaltimer, at the FCW_ST_* points; FCW_ST_DECODED on FFmpeg's
 * stream right after avcodec_receive_frame returned) and host times
 * (CLOCK_MONOTONIC), on one clock: gpu_off_ns, measured when the runner
 * opens (the smallest host-minus-GPU difference of 20 stamps written to
 * page-locked memory while the host spins on it), brings a stamp to the
 * host's clock (to within the ~1 us a stamp takes to reach the host). */
enum { BD_SUBMIT, BD_TO_GPU, BD_DECODED, BD_SPIN, BD_HIST, BD_BLUR, BD_SAD, BD_AFTER_SPIN, BD_WAKE, BD_TOTAL, BD_N };
static const char *bd_name[BD_N] = {"submit (host)", "submit -> GPU start", "recv -> FFmpeg's stream reached",
                                    "extra work", "hist", "blur", "sad", "extra work end -> results copied",
                                    "results copied -> host has them", "total (recv -> host has them)"};
typedef struct breakdown {
    double p50[BD_N], p99[BD_N]; /* us, over frames 1.. of the pass */
    double hist_at, blur_at, sad_at, end_at; /* p50 of each start (and the copies' end) after the extra work's end, us */
} breakdown;

typedef struct runner {
    AVBufferRef *dev;
    const AVCUDADeviceContext *hw;
    fcw_decoder dec;
    fcw_kernels k; /* for the raw variants' cubin */
    cw_context *kctx;
    checker chk;
    timeline tl;
    unsigned w, h;
    size_t frames;
    /* each variant's processor, made at its first pass (outside the timed
     * part) and kept: a pass starts it again at frame 0 */
    fcw_proc *cw[V_COUNT];
    raw_proc raw[V_COUNT];
    int raw_open[V_COUNT];
    /* the breakdown */
    int bd_on;
    void *smod, *fstamp;          /* fcw_stamp for FFmpeg's stream and the calibration */
    unsigned long long *bd;       /* page-locked: MAX_FRAMES x FCW_STAMPS GPU stamps */
    double sub0_ms[MAX_FRAMES], sub1_ms[MAX_FRAMES], recv_ms[MAX_FRAMES], done_ms[MAX_FRAMES];
    long long gpu_off_ns;         /* host ns = GPU ns + gpu_off_ns */
    /* where the last pass's time went (ms from its start; fps) */
    double ph[4];
} runner;

/* A pass's phases: the first frame received, frame TL_FIRST received (ms
 * from the pass's start), the rate of frames TL_FIRST.. (fps, by their
 * receipt: a pipelined pass's host is held to the GPU's pace by the ring),
 * the last frame received to the pass's end (the drain, ms). */
enum { PH_FIRST, PH_TENTH, PH_STEADY_FPS, PH_DRAIN, PH_N };
static const char *ph_name[PH_N] = {"first frame received (ms)", "frame 10 received (ms)",
                                    "frames 10.. received per second", "last frame received -> drained (ms)"};

static runner *g_run; /* for tl_sink */

static void tl_sink(void *user, long long index, cw_stream *s) {
    (void)user;
    timeline *tl = &g_run->tl;
    if (tl->on && index < TL_FIRST + TL_COUNT) RAW_TRY_(fcw_cu.event_record(tl->end[index], bench_cu_stream(s)));
}

/* One pass over the clip with variant v. one_at_a_time: each frame's result
 * is waited for before the next frame is decoded; lat_ms (frames entries)
 * receives each latency. Returns the pass's wall time in ms. */
static double run_pass(runner *R, variant v, int one_at_a_time, double *lat_ms) {
    if (fcw_decoder_rewind(&R->dec) < 0) {
        fprintf(stderr, "bench_ffmpeg: cannot rewind the clip\n");
        exit(1);
    }
    double *recv_ms = R->recv_ms;
    const int is_cw = v == V_CW || v == V_CW_NB || v == V_CW_SPLIT;
    const int adr = v == V_OLD || v == V_FIX || v == V_CW_NB; /* the ADR-0378 case: 2 ms more GPU work */
    const unsigned long long extra = adr ? ADR_WORK_US * 1000ull : 0;
    if (is_cw && !R->cw[v]) {
        fcw_options opt = {extra, v == V_CW_NB, 0, v == V_CW_SPLIT};
        CW_CHECK(fcw_open(&R->cw[v], R->dev, R->w, R->h, &opt));
        R->cw[v]->on_result = on_result;
        R->cw[v]->user = &R->chk;
        R->cw[v]->on_sink = tl_sink;
    } else if (!is_cw && !R->raw_open[v]) {
        raw_open(&R->raw[v], R->dev, R->k.prog, R->w, R->h, v == V_RAW ? -1 : v == V_OLD ? 0 : 1, extra);
        R->raw[v].on_result = on_result;
        R->raw[v].user = &R->chk;
        R->raw_open[v] = 1;
    }
    fcw_proc *cw = R->cw[v];
    raw_proc *raw = &R->raw[v];
    if (is_cw) CW_CHECK(fcw_restart(cw)); /* frame 0 again: no previous blur */
    double *done_ms = R->done_ms;
    R->chk.done_ms = done_ms;
    AVFrame *f = av_frame_alloc();
    CUcontext dummy;
    if (R->tl.on) {
        RAW_TRY_(fcw_cu.ctx_push(R->hw->cuda_ctx));
        RAW_TRY_(fcw_cu.event_record(R->tl.base, NULL));
        RAW_TRY_(fcw_cu.ctx_pop(&dummy));
        R->tl.base_host_ms = (double)now_ns() / 1e6;
    }
    const double t0 = (double)now_ns() / 1e6;
    long long n = 0;
    int r;
    while ((r = fcw_decoder_next(&R->dec, f)) >= 0 && n < MAX_FRAMES) {
        recv_ms[n] = (double)now_ns() / 1e6;
        if (R->bd_on) {
            unsigned long long *row = &R->bd[n * FCW_STAMPS];
            memset(row, 0, FCW_STAMPS * sizeof *row);
            unsigned long long at = (unsigned long long)(uintptr_t)&row[FCW_ST_DECODED];
            void *a[] = {&at};
            RAW_TRY_(fcw_cu.ctx_push(R->hw->cuda_ctx));
            RAW_TRY_(fcw_cu.launch(R->fstamp, 1, 1, 1, 1, 1, 1, 0, R->hw->stream, a, NULL));
            RAW_TRY_(fcw_cu.ctx_pop(&dummy));
            if (is_cw) cw->stamps = row;
            else raw->stamps = row;
            R->sub0_ms[n] = (double)now_ns() / 1e6;
        }
        if (R->tl.on && n < TL_FIRST + TL_COUNT) {
            R->tl.host_ms[n] = recv_ms[n];
            RAW_TRY_(fcw_cu.ctx_push(R->hw->cuda_ctx));
            RAW_TRY_(fcw_cu.event_record(R->tl.dec[n], NULL)); /* after FFmpeg's copy of frame n */
            RAW_TRY_(fcw_cu.ctx_pop(&dummy));
        }
        if (is_cw) {
            CW_CHECK(fcw_process(cw, f, n, NULL));
            if (R->bd_on) R->sub1_ms[n] = (double)now_ns() / 1e6;
            if (one_at_a_time) CW_CHECK(fcw_drain(cw));
        } else {
            raw_process(raw, f, n);
            if (R->bd_on) R->sub1_ms[n] = (double)now_ns() / 1e6;
            if (R->tl.on && n < TL_FIRST + TL_COUNT) {
                RAW_TRY_(fcw_cu.ctx_push(R->hw->cuda_ctx));
                RAW_TRY_(fcw_cu.event_record(R->tl.end[n], raw->per_picture ? raw->ps[n % FCW_RING] : raw->host));
                RAW_TRY_(fcw_cu.ctx_pop(&dummy));
            }
            if (one_at_a_time) raw_drain(raw);
        }
        av_frame_unref(f);
        n++;
    }
    if (r != AVERROR_EOF) {
        fprintf(stderr, "bench_ffmpeg: decoding failed: %s\n", av_err2str(r));
        exit(1);
    }
    if (is_cw) {
        CW_CHECK(fcw_drain(cw));
    } else {
        raw_drain(raw);
    }
    const double t1 = (double)now_ns() / 1e6;
    if (is_cw) cw->stamps = NULL;
    else raw->stamps = NULL;
    if (n > TL_FIRST + 1) {
        R->ph[PH_FIRST] = recv_ms[0] - t0;
        R->ph[PH_TENTH] = recv_ms[TL_FIRST] - t0;
        R->ph[PH_STEADY_FPS] = (double)(n - 1 - TL_FIRST) / ((recv_ms[n - 1] - recv_ms[TL_FIRST]) / 1e3);
        R->ph[PH_DRAIN] = t1 - recv_ms[n - 1];
    }
    if (lat_ms)
        for (long long i = 0; i < n; i++) lat_ms[i] = done_ms[i] - recv_ms[i];
    av_frame_free(&f);
    R->frames = (size_t)n;
    R->chk.done_ms = NULL;
    return t1 - t0;
}

typedef struct vstats {
    stats lat;       /* ms, one at a time */
    double fps_p50;  /* pipelined passes */
    double fps_p01;  /* the slowest 1% (p99 of the pass time) */
    breakdown bd;    /* a one-at-a-time pass with stamps */
    double ph[PH_N]; /* pipelined passes: p50 of each phase */
} vstats;

/* A GPU stamp of frame n on the host's clock, ms. */
static double bd_gpu_ms(const runner *R, size_t n, unsigned k) {
    return (double)((long long)R->bd[n * FCW_STAMPS + k] + R->gpu_off_ns) / 1e6;
}

/* One one-at-a-time pass of v with stamps, summed up in *b. */
static void measure_breakdown(runner *R, variant v, breakdown *b) {
    R->bd_on = 1;
    run_pass(R, v, 1, NULL);
    R->bd_on = 0;
    const size_t n = R->frames;
    static double part[BD_N][MAX_FRAMES], at[4][MAX_FRAMES];
    size_t m = 0;
    for (size_t i = 1; i < n; i++, m++) { /* frame 0 has no previous blur */
        const double start = bd_gpu_ms(R, i, FCW_ST_START), spin_end = bd_gpu_ms(R, i, FCW_ST_SPIN_END),
                     end = bd_gpu_ms(R, i, FCW_ST_END);
        part[BD_SUBMIT][m] = R->sub1_ms[i] - R->sub0_ms[i];
        part[BD_TO_GPU][m] = start - R->sub0_ms[i];
        part[BD_DECODED][m] = bd_gpu_ms(R, i, FCW_ST_DECODED) - R->recv_ms[i];
        part[BD_SPIN][m] = spin_end - start;
        part[BD_HIST][m] = bd_gpu_ms(R, i, FCW_ST_HIST1) - bd_gpu_ms(R, i, FCW_ST_HIST0);
        part[BD_BLUR][m] = bd_gpu_ms(R, i, FCW_ST_BLUR1) - bd_gpu_ms(R, i, FCW_ST_BLUR0);
        part[BD_SAD][m] = bd_gpu_ms(R, i, FCW_ST_SAD1) - bd_gpu_ms(R, i, FCW_ST_SAD0);
        part[BD_AFTER_SPIN][m] = end - spin_end;
        part[BD_WAKE][m] = R->done_ms[i] - end;
        part[BD_TOTAL][m] = R->done_ms[i] - R->recv_ms[i];
        at[0][m] = bd_gpu_ms(R, i, FCW_ST_HIST0) - spin_end;
        at[1][m] = bd_gpu_ms(R, i, FCW_ST_BLUR0) - spin_end;
        at[2][m] = bd_gpu_ms(R, i, FCW_ST_SAD0) - spin_end;
        at[3][m] = end - spin_end;
    }
    for (int k = 0; k < BD_N; k++) {
        for (size_t i = 0; i < m; i++) part[k][i] *= 1e3; /* us */
        stats st = stats_of(part[k], m);
        b->p50[k] = st.p50;
        b->p99[k] = st.p99;
    }
    double *dst[4] = {&b->hist_at, &b->blur_at, &b->sad_at, &b->end_at};
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < m; i++) at[k][i] *= 1e3;
        *dst[k] = stats_of(at[k], m).p50;
    }
}

/* Where the pipelined passes' time went, for the variants vs. */
static void print_phases(const char *title, const variant *vs, const vstats *st, int nv) {
    printf("\n%s: where a pipelined pass's time goes (p50 over the passes)\n\n| phase |", title);
    for (int i = 0; i < nv; i++) printf(" %s |", variant_name[vs[i]]);
    printf("\n| --- |");
    for (int i = 0; i < nv; i++) printf(" ---: |");
    printf("\n");
    for (int k = 0; k < PH_N; k++) {
        printf("| %s |", ph_name[k]);
        for (int i = 0; i < nv; i++) printf(k == PH_STEADY_FPS ? " %.0f |" : " %.2f |", st[i].ph[k]);
        printf("\n");
    }
}

/* The breakdown's rows for the variants vs (their vstats in st). */
static void print_breakdown(const char *title, const variant *vs, const vstats *st, int nv) {
    printf("\n%s: one frame at a time, frames 1.. of one pass with stamps (p50, us; p99 in brackets);\n"
           "the GPU's stamps put on the host's clock:\n\n| part |",
           title);
    for (int i = 0; i < nv; i++) printf(" %s |", variant_name[vs[i]]);
    printf("\n| --- |");
    for (int i = 0; i < nv; i++) printf(" ---: |");
    printf("\n");
    for (int k = 0; k < BD_N; k++) {
        printf("| %s |", bd_name[k]);
        for (int i = 0; i < nv; i++) {
            printf(" %.1f (%.1f) |", st[i].bd.p50[k], st[i].bd.p99[k]);
        }
        printf("\n");
    }
    printf("| hist / blur / sad start, copies end (after the extra work's end) |");
    for (int i = 0; i < nv; i++)
        printf(" %.1f / %.1f / %.1f, %.1f |", st[i].bd.hist_at, st[i].bd.blur_at, st[i].bd.sad_at, st[i].bd.end_at);
    printf("\n");
}

/* cuweave's driver calls in one frame-at-a-time pass of variant v (the
 * test seam counts and times the calls cuweave makes; FFmpeg's own and the
 * bench's raw calls are not counted): per frame, by entry. */
typedef struct cw_profile {
    double frames;
    unsigned long calls[256];
    unsigned long long ns[256];
} cw_profile;

static void profile_cw(runner *R, variant v, cw_profile *P) {
    memset(P, 0, sizeof *P);
    if (cwi_seam_enable() != 0) {
        fprintf(stderr, "bench_ffmpeg: the test seam could not be enabled\n");
        exit(1);
    }
    cwi_seam_timing(1);
    cwi_seam_reset();
    run_pass(R, v, 1, NULL);
    cwi_seam_timing(0);
    const int n = cwi_seam_entry_count() < 256 ? cwi_seam_entry_count() : 256;
    for (int id = 0; id < n; id++) {
        P->calls[id] = cwi_seam_calls(id);
        P->ns[id] = cwi_seam_ns(id);
    }
    cwi_seam_disable();
    P->frames = (double)R->frames;
}

static void print_profile(const char *what, const cw_profile *P) {
    unsigned long calls = 0;
    unsigned long long ns = 0;
    const int n = cwi_seam_entry_count() < 256 ? cwi_seam_entry_count() : 256;
    for (int id = 0; id < n; id++) {
        calls += P->calls[id];
        ns += P->ns[id];
    }
    printf("  %s: %.1f driver calls a frame, %.1f us in the driver; by entry (calls, us a frame):", what,
           calls / P->frames, ns / 1e3 / P->frames);
    for (int id = 0; id < n; id++)
        if (P->calls[id])
            printf(" %s %.1f %.2f;", cwi_seam_entry_name(id), P->calls[id] / P->frames, P->ns[id] / 1e3 / P->frames);
    printf("\n");
}

static void measure(runner *R, const variant *vs, int nv, vstats *out) {
    static double lat[V_COUNT][PASSES * MAX_FRAMES];
    double fps[V_COUNT][PASSES], ph[V_COUNT][PH_N][PASSES];
    size_t nlat[V_COUNT] = {0};
    int order[V_COUNT];
    for (int i = 0; i < nv; i++) order[i] = i;
    for (int i = 0; i < nv; i++) run_pass(R, vs[i], 0, NULL); /* warm-up: the decoder, the processors, their memory */
    for (int pass = 0; pass < PASSES; pass++) {
        shuffle(order, nv);
        for (int j = 0; j < nv; j++) {
            const int i = order[j];
            const double ms = run_pass(R, vs[i], 0, NULL);
            fps[i][pass] = (double)R->frames / (ms / 1e3);
            for (int k = 0; k < PH_N; k++) ph[i][k][pass] = R->ph[k];
            run_pass(R, vs[i], 1, &lat[i][nlat[i]]);
            nlat[i] += R->frames;
        }
    }
    for (int i = 0; i < nv; i++) {
        out[i].lat = stats_of(lat[i], nlat[i]);
        stats s = stats_of(fps[i], PASSES);
        out[i].fps_p50 = s.p50;
        out[i].fps_p01 = fps[i][0]; /* sorted: the slowest pass */
        for (int k = 0; k < PH_N; k++) out[i].ph[k] = stats_of(ph[i][k], PASSES).p50;
    }
    for (int i = 0; i < nv; i++) measure_breakdown(R, vs[i], &out[i].bd);
}

static int open_runner(runner *R, const char *clip, int own_stream, CUstream *stream, const fcw_result *want,
                       size_t count, unsigned w, unsigned h) {
    memset(R, 0, sizeof *R);
    if (fcw_device_open(&R->dev, own_stream ? 0x1 : -1, stream) < 0) {
        fprintf(stderr, "bench_ffmpeg: FFmpeg could not open its CUDA device\n");
        exit(1);
    }
    R->hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)R->dev->data)->hwctx;
    if (fcw_decoder_open(&R->dec, clip, R->dev) < 0) return 77;
    CW_CHECK(cw_context_wrap(&R->kctx, R->hw->cuda_ctx));
    CW_CHECK(fcw_kernels_open(&R->k, R->kctx));
    R->chk.want = want;
    R->chk.count = count;
    R->w = w;
    R->h = h;
    CUcontext dummy;
    RAW_TRY_(fcw_cu.ctx_push(R->hw->cuda_ctx));
    RAW_TRY_(fcw_cu.event_create(&R->tl.base, 0));
    for (int i = 0; i < TL_FIRST + TL_COUNT; i++) {
        RAW_TRY_(fcw_cu.event_create(&R->tl.dec[i], 0));
        RAW_TRY_(fcw_cu.event_create(&R->tl.end[i], 0));
    }
    /* the breakdown's stamps and the GPU clock's offset */
    cw_program_info pi;
    CW_CHECK(cw_program_get_info(R->k.prog, &pi));
    RAW_TRY_(fcw_cu.module_load_data(&R->smod, pi.code));
    RAW_TRY_(fcw_cu.module_get_function(&R->fstamp, R->smod, "fcw_stamp"));
    RAW_TRY_(fcw_cu.host_alloc((void **)&R->bd, (size_t)MAX_FRAMES * FCW_STAMPS * sizeof *R->bd));
    CUstream cal;
    RAW_TRY_(fcw_cu.stream_create(&cal, 0x1 /* CU_STREAM_NON_BLOCKING */));
    volatile unsigned long long *word = R->bd;
    for (int t = 0; t < 20; t++) {
        *word = 0;
        unsigned long long at = (unsigned long long)(uintptr_t)R->bd;
        void *a[] = {&at};
        RAW_TRY_(fcw_cu.launch(R->fstamp, 1, 1, 1, 1, 1, 1, 0, cal, a, NULL));
        unsigned long long g;
        while ((g = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == 0) {
        }
        const long long off = (long long)now_ns() - (long long)g;
        if (t == 0 || off < R->gpu_off_ns) R->gpu_off_ns = off;
    }
    RAW_TRY_(fcw_cu.stream_sync(cal));
    RAW_TRY_(fcw_cu.stream_destroy(cal));
    RAW_TRY_(fcw_cu.ctx_pop(&dummy));
    g_run = R;
    return 0;
}

static void close_runner(runner *R, CUstream stream) {
    for (int v = 0; v < V_COUNT; v++) {
        fcw_close(&R->cw[v]);
        if (R->raw_open[v]) raw_close(&R->raw[v]);
    }
    CUcontext dummy;
    if (fcw_cu.ctx_push(R->hw->cuda_ctx) == 0) {
        fcw_cu.event_destroy(R->tl.base);
        for (int i = 0; i < TL_FIRST + TL_COUNT; i++) {
            fcw_cu.event_destroy(R->tl.dec[i]);
            fcw_cu.event_destroy(R->tl.end[i]);
        }
        if (R->smod) fcw_cu.module_unload(R->smod);
        if (R->bd) fcw_cu.host_free(R->bd);
        fcw_cu.ctx_pop(&dummy);
    }
    fcw_kernels_close(&R->k);
    cw_context_destroy(&R->kctx);
    fcw_decoder_close(&R->dec);
    fcw_device_close(&R->dev, stream);
}

static float tl_ms(CUevent base, CUevent e) {
    float ms = 0;
    RAW_TRY_(fcw_cu.event_elapsed(&ms, base, e));
    return ms;
}

/* One timeline pass of v; prints frames TL_FIRST.. and returns how many of
 * them had their decode copy finish only after the previous frame's
 * processing had ended. */
static int print_timeline(runner *R, variant v, char *md, size_t mdsize) {
    R->tl.on = 1;
    run_pass(R, v, 0, NULL);
    R->tl.on = 0;
    int serialized = 0;
    size_t len = strlen(md);
    len += (size_t)snprintf(md + len, mdsize - len, "\n%s:\n\n| frame | decoded (NULL stream) | processed | host got frame |\n| ---: | ---: | ---: | ---: |\n",
                            variant_name[v]);
    for (int n = TL_FIRST; n < TL_FIRST + TL_COUNT && len < mdsize; n++) {
        const float d = tl_ms(R->tl.base, R->tl.dec[n]), e = tl_ms(R->tl.base, R->tl.end[n]);
        const float prev_end = tl_ms(R->tl.base, R->tl.end[n - 1]);
        serialized += d >= prev_end;
        len += (size_t)snprintf(md + len, mdsize - len, "| %d | %.2f | %.2f | %.2f |\n", n, d, e,
                                R->tl.host_ms[n] - R->tl.base_host_ms);
    }
    return serialized;
}

int main(int argc, char **argv) {
    rawcuda raw;
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int s = bench_setup(&raw, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (s) return s;
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("SKIP: no NVRTC: %s\n", cw_last_error()->message);
        return 77;
    }
    if (fcw_driver_open() != 0) {
        fprintf(stderr, "bench_ffmpeg: the driver's entry points are missing\n");
        return 1;
    }
    av_log_set_level(AV_LOG_ERROR);
    const char *names[2] = {"clip_h264.mp4", "clip_hevc.mp4"};
    char paths[2][4096];
    fcw_result *want[2] = {NULL, NULL};
    size_t count[2] = {0, 0};
    unsigned w = 0, h = 0;
    for (int c = 0; c < 2; c++) {
        snprintf(paths[c], sizeof paths[c], "%s/%s", argc > 1 ? argv[1] : fcw_data_dir(), names[c]);
        if (fcw_reference_clip(paths[c], &want[c], &count[c], &w, &h) < 0 || count[c] > 1024) {
            fprintf(stderr, "bench_ffmpeg: cannot decode %s in software\n", paths[c]);
            return 1;
        }
    }
    /* A: cuweave against hand-written code on FFmpeg's stream */
    vstats a[2][2][3]; /* clip, stream, variant (of av) */
    static cw_profile prof[2]; /* H.264, NULL stream: cuweave's driver calls, a stream per operator and one stream */
    const variant av[3] = {V_CW, V_RAW, V_CW_SPLIT};
    long checked = 0, wrong = 0;
    for (int c = 0; c < 2; c++)
        for (int own = 0; own < 2; own++) {
            runner R;
            CUstream stream = NULL;
            if (open_runner(&R, paths[c], own, &stream, want[c], count[c], w, h) == 77) {
                printf("SKIP: FFmpeg cannot decode %s with NVDEC here\n", paths[c]);
                return 77;
            }
            measure(&R, av, 3, a[c][own]);
            if (c == 0 && own == 0) {
                profile_cw(&R, V_CW, &prof[0]);
                profile_cw(&R, V_CW_SPLIT, &prof[1]);
            }
            checked += R.chk.checked;
            wrong += R.chk.wrong;
            close_runner(&R, stream);
        }
    /* B: the ADR-0378 case on the NULL stream, H.264 */
    vstats b[3];
    static char md[8192];
    md[0] = 0;
    int serialized[3];
    {
        runner R;
        CUstream stream = NULL;
        if (open_runner(&R, paths[0], 0, &stream, want[0], count[0], w, h) == 77) return 77;
        const variant vs[3] = {V_OLD, V_FIX, V_CW_NB};
        measure(&R, vs, 3, b);
        for (int i = 0; i < 3; i++) serialized[i] = print_timeline(&R, vs[i], md, sizeof md);
        checked += R.chk.checked;
        wrong += R.chk.wrong;
        close_runner(&R, stream);
    }

    printf("\n---- docs/benchmarks.md ----\n");
    printf("### cuweave inside FFmpeg: NVDEC frames (bench_ffmpeg)\n\n");
    printf("%s, %s, driver %d.%d, commit %s; FFmpeg %s (libavcodec %d.%d). The clips of tests/data (%ux%u, %zu\n"
           "H.264 and %zu HEVC frames) decoded by FFmpeg's NVDEC into CUDA frames; per frame a 3x3 blur of the\n"
           "luma, its histogram and the SAD against the previous frame's blur, both results copied to pinned\n"
           "memory (the same NVRTC kernels and launch shapes for every variant; %d frames in flight). fps: one\n"
           "pass over a clip, decode and processing, median and slowest of %d passes; latency: one frame at a\n"
           "time, from avcodec_receive_frame's return to the result on the host, ms. %ld results checked\n"
           "against the CPU over the software-decoded clips, %ld wrong.\n\n",
           date, info.name, drv / 1000, drv % 1000 / 10, commit, av_version_info(), LIBAVCODEC_VERSION_MAJOR,
           LIBAVCODEC_VERSION_MINOR, w, h, count[0], count[1], FCW_RING, PASSES, checked, wrong);
    printf("| clip | FFmpeg's stream | variant | fps p50 / slowest | latency p50 / p99 |\n| --- | --- | --- | --- | --- |\n");
    for (int c = 0; c < 2; c++)
        for (int own = 0; own < 2; own++)
            for (int v = 0; v < 3; v++)
                printf("| %s | %s | %s | %.0f / %.0f | %.3f / %.3f |\n", c ? "HEVC" : "H.264",
                       own ? "the program's (non-blocking)" : "NULL", variant_name[av[v]], a[c][own][v].fps_p50,
                       a[c][own][v].fps_p01, a[c][own][v].lat.p50, a[c][own][v].lat.p99);
    printf("\n| clip | FFmpeg's stream | hand-written / cuweave: fps p50 | cuweave / hand-written: latency p50, p99 | "
           "the same for one stream |\n"
           "| --- | --- | --- | --- | --- |\n");
    for (int c = 0; c < 2; c++)
        for (int own = 0; own < 2; own++)
            printf("| %s | %s | %.3f | %.3f, %.3f | %.3f; %.3f, %.3f |\n", c ? "HEVC" : "H.264",
                   own ? "the program's" : "NULL", a[c][own][1].fps_p50 / a[c][own][0].fps_p50,
                   a[c][own][0].lat.p50 / a[c][own][1].lat.p50, a[c][own][0].lat.p99 / a[c][own][1].lat.p99,
                   a[c][own][1].fps_p50 / a[c][own][2].fps_p50, a[c][own][2].lat.p50 / a[c][own][1].lat.p50,
                   a[c][own][2].lat.p99 / a[c][own][1].lat.p99);
    for (int c = 0; c < 2; c++)
        for (int own = 0; own < 2; own++) {
            char title[96];
            snprintf(title, sizeof title, "Breakdown, %s, FFmpeg's stream %s", c ? "HEVC" : "H.264",
                     own ? "the program's" : "NULL");
            print_phases(title, av, a[c][own], 3);
            print_breakdown(title, av, a[c][own], 3);
        }
    printf("\ncuweave's driver calls, H.264, FFmpeg's stream NULL, one frame at a time (the test seam; its timing\n"
           "slows the calls a little):\n");
    print_profile(variant_name[V_CW], &prof[0]);
    print_profile(variant_name[V_CW_SPLIT], &prof[1]);
    printf("\nThe ADR-0378 case (H.264, FFmpeg on the NULL stream, %d us more GPU work per frame, FFmpeg's\n"
           "stream not made to wait: the frames are held until the work is done):\n\n",
           ADR_WORK_US);
    printf("| variant | fps p50 / slowest | latency p50 / p99 | ratio of fps to cuweave's |\n| --- | --- | --- | --- |\n");
    const variant bv[3] = {V_OLD, V_FIX, V_CW_NB};
    for (int i = 0; i < 3; i++)
        printf("| %s | %.0f / %.0f | %.3f / %.3f | %.3f |\n", variant_name[bv[i]], b[i].fps_p50, b[i].fps_p01,
               b[i].lat.p50, b[i].lat.p99, b[i].fps_p50 / b[2].fps_p50);
    print_phases("The ADR-0378 case", bv, b, 3);
    print_breakdown("Breakdown, the ADR-0378 case", bv, b, 3);
    printf("\nTimeline of frames %d to %d in one pipelined pass of each (ms from an event recorded on the NULL\n"
           "stream at the start; \"decoded\": an event recorded on the NULL stream right after\n"
           "avcodec_receive_frame returned, i.e. after FFmpeg's copy of the frame; \"processed\": the end of the\n"
           "frame's processing on its stream; the recording of the NULL-stream events is itself a NULL-stream\n"
           "operation, as FFmpeg's copies are). Frames whose decode finished only after the previous frame's\n"
           "processing: blocking %d of %d, non-blocking %d of %d, cuweave %d of %d.\n",
           TL_FIRST, TL_FIRST + TL_COUNT - 1, serialized[0], TL_COUNT, serialized[1], TL_COUNT, serialized[2],
           TL_COUNT);
    printf("%s", md);
    printf("---- end ----\n");
    int fast = 1;
    for (int c = 0; c < 2; c++)
        for (int own = 0; own < 2; own++) fast &= a[c][own][0].fps_p50 >= 0.97 * a[c][own][1].fps_p50;
    printf("target: cuweave's fps at least the hand-written code's (within 3%%) for every clip and stream: %s\n",
           pass(fast));
    printf("target: the blocking-stream penalty measured: blocking / cuweave fps %.3f, serialized decodes %d of %d "
           "against %d of %d\n",
           b[0].fps_p50 / b[2].fps_p50, serialized[0], TL_COUNT, serialized[2], TL_COUNT);
    free(want[0]);
    free(want[1]);
    return wrong ? 1 : 0;
}
