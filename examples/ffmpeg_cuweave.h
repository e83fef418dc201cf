/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave inside FFmpeg: the processing that examples/ffmpeg_decode.c, the
 * test (tests/test_gpu_ffmpeg.c) and the benchmark (bench/bench_ffmpeg.c)
 * share. FFmpeg owns the CUDA context and the stream (AVCUDADeviceContext's
 * cuda_ctx and stream; the stream is NULL, the legacy stream, unless the
 * program sets one) and the frames (AV_PIX_FMT_CUDA, from NVDEC or from
 * av_hwframe_transfer_data); cuweave wraps the context and the stream and
 * runs a pipeline per frame on the frame's luma plane:
 *
 *   FFmpeg's stream: ... decode/upload frame n ──┐                    ┌── next decode, download ...
 *   frame (source) ──> blur ──> sad ──┐          (waits for it)       │ (waits for sink)
 *        └───────────> hist ──────────┴──> sink ───────────────────────┘
 *
 *  - frame: its stream waits for FFmpeg's stream (the frame is written by
 *    then); with a slow variant, a busy kernel there delays every read;
 *  - blur: 3x3 box blur of the luma (edges clamped) into a buffer of the
 *    pipeline (and, for the filter-style use, into an output frame's luma);
 *  - hist: 256-bin histogram of the luma;
 *  - sad: sum of absolute differences of the blurred luma against the
 *    previous frame's (kept with a buffer reference; 0 for the first);
 *  - sink: copies the histogram and the SAD to page-locked memory, makes
 *    FFmpeg's stream wait for its stream (FFmpeg's later work comes after
 *    every read of the frame and every write of the output), and rearms the
 *    frame's future there.
 *
 * With fcw_options.one_stream and FFmpeg's own stream, every operator runs
 * on FFmpeg's stream, behind the decode and before FFmpeg's later work by
 * the stream's order: no event between the two, the hand-written code's
 * shape (docs/pipelines.md, "The FFmpeg processor's frame").
 *
 * The frame stays referenced (av_frame_ref) by the processor until its
 * future has completed: only then is it released back to FFmpeg's pool
 * (the caller may unref its own reference at once). cuweave never changes
 * FFmpeg's context (it is wrapped, never made current outside a cuweave
 * call, its flags untouched) nor its stream (wrapped, nothing enqueued on it
 * but the one wait per frame).
 *
 * hwcontext_cuda.h includes <cuda.h> unless CUDA_VERSION is defined, only
 * for CUcontext and CUstream; cuweave's common.h declares both exactly as
 * cuda.h does, so this header defines CUDA_VERSION around the include when
 * cuda.h was not included first: no CUDA toolkit is needed to build it
 * (docs/embedding.md, "Inside FFmpeg").
 *
 * Include it in one file. Kernels are compiled at run time with NVRTC.
 */
#ifndef CUWEAVE_EXAMPLE_FFMPEG_CUWEAVE_H
#define CUWEAVE_EXAMPLE_FFMPEG_CUWEAVE_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuweave/cuweave.h>

#if !defined(CUDA_VERSION) && !defined(__cuda_cuda_h__)
#define CUDA_VERSION 0 /* hwcontext_cuda.h: CUcontext and CUstream come from cuweave/common.h */
#define FCW_DEFINED_CUDA_VERSION_
#endif
#include <libavutil/hwcontext_cuda.h>
#ifdef FCW_DEFINED_CUDA_VERSION_
#undef CUDA_VERSION
#undef FCW_DEFINED_CUDA_VERSION_
#endif
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>

/* Every function is static; not every includer uses them all. */
#define FCW_FN_ __attribute__((unused)) static

/* ---- the host program's own driver calls (dlopen, as a host's would) ---- */

typedef struct fcw_driver {
    void *lib;
    int (*ctx_get_current)(CUcontext *);
    int (*ctx_set_current)(CUcontext);
    int (*ctx_push)(CUcontext);
    int (*ctx_pop)(CUcontext *);
    int (*ctx_get_flags)(unsigned *);
    int (*stream_create)(CUstream *, unsigned);
    int (*stream_destroy)(CUstream);
    int (*stream_get_flags)(CUstream, unsigned *);
    int (*stream_sync)(CUstream);
    int (*stream_wait_event)(CUstream, CUevent, unsigned);
    int (*event_create)(CUevent *, unsigned);
    int (*event_destroy)(CUevent);
    int (*event_record)(CUevent, CUstream);
    int (*event_sync)(CUevent);
    int (*event_query)(CUevent);
    int (*event_elapsed)(float *, CUevent, CUevent);
    int (*mem_alloc)(unsigned long long *, size_t);
    int (*mem_free)(unsigned long long);
    int (*host_alloc)(void **, size_t);
    int (*host_free)(void *);
    int (*dtoh_async)(void *, unsigned long long, size_t, CUstream);
    int (*memset_d32_async)(unsigned long long, unsigned, size_t, CUstream);
    int (*module_load_data)(void **, const void *);
    int (*module_unload)(void *);
    int (*module_get_function)(void **, void *, const char *);
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,
                  void **);
} fcw_driver;

static fcw_driver fcw_cu;

/* Returns 0 when every entry point resolved. */
FCW_FN_ int fcw_driver_open(void) {
    if (fcw_cu.lib) return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&fcw_cu.ctx_get_current, "cuCtxGetCurrent"},
        {(void **)&fcw_cu.ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&fcw_cu.ctx_push, "cuCtxPushCurrent_v2"},
        {(void **)&fcw_cu.ctx_pop, "cuCtxPopCurrent_v2"},
        {(void **)&fcw_cu.ctx_get_flags, "cuCtxGetFlags"},
        {(void **)&fcw_cu.stream_create, "cuStreamCreate"},
        {(void **)&fcw_cu.stream_destroy, "cuStreamDestroy_v2"},
        {(void **)&fcw_cu.stream_get_flags, "cuStreamGetFlags"},
        {(void **)&fcw_cu.stream_sync, "cuStreamSynchronize"},
        {(void **)&fcw_cu.stream_wait_event, "cuStreamWaitEvent"},
        {(void **)&fcw_cu.event_create, "cuEventCreate"},
        {(void **)&fcw_cu.event_destroy, "cuEventDestroy_v2"},
        {(void **)&fcw_cu.event_record, "cuEventRecord"},
        {(void **)&fcw_cu.event_sync, "cuEventSynchronize"},
        {(void **)&fcw_cu.event_query, "cuEventQuery"},
        {(void **)&fcw_cu.event_elapsed, "cuEventElapsedTime"},
        {(void **)&fcw_cu.mem_alloc, "cuMemAlloc_v2"},
        {(void **)&fcw_cu.mem_free, "cuMemFree_v2"},
        {(void **)&fcw_cu.host_alloc, "cuMemAllocHost_v2"},
        {(void **)&fcw_cu.host_free, "cuMemFreeHost"},
        {(void **)&fcw_cu.dtoh_async, "cuMemcpyDtoHAsync_v2"},
        {(void **)&fcw_cu.memset_d32_async, "cuMemsetD32Async"},
        {(void **)&fcw_cu.module_load_data, "cuModuleLoadData"},
        {(void **)&fcw_cu.module_unload, "cuModuleUnload"},
        {(void **)&fcw_cu.module_get_function, "cuModuleGetFunction"},
        {(void **)&fcw_cu.launch, "cuLaunchKernel"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].name))) return -1;
    fcw_cu.lib = lib;
    return 0;
}

/* ---- the computation, on the CPU (the reference) and on the GPU ---------- */

typedef struct fcw_result {
    uint32_t hist[256]; /* luma histogram of the frame as decoded */
    uint64_t sad;       /* sum |blur(frame n) - blur(frame n-1)| (0 for the first frame) */
} fcw_result;

/* 3x3 box blur with clamped edges, rounded: (sum + 4) / 9. */
FCW_FN_ void fcw_blur_cpu(const uint8_t *src, size_t pitch, unsigned w, unsigned h, uint8_t *dst) {
    for (unsigned y = 0; y < h; y++) {
        const uint8_t *r0 = src + (size_t)(y ? y - 1 : 0) * pitch, *r1 = src + (size_t)y * pitch,
                      *r2 = src + (size_t)(y + 1 < h ? y + 1 : h - 1) * pitch;
        for (unsigned x = 0; x < w; x++) {
            const unsigned xl = x ? x - 1 : 0, xr = x + 1 < w ? x + 1 : w - 1;
            const unsigned sum = (unsigned)r0[xl] + r0[x] + r0[xr] + r1[xl] + r1[x] + r1[xr] + r2[xl] + r2[x] + r2[xr];
            dst[(size_t)y * w + x] = (uint8_t)((sum + 4u) / 9u);
        }
    }
}

/*
 * The reference for one frame: the histogram of its luma (w x h, rows pitch
 * apart), its blur into blur (w * h bytes) and the SAD against prev_blur
 * (NULL for the first frame: 0).
 */
FCW_FN_ void fcw_reference(const uint8_t *luma, size_t pitch, unsigned w, unsigned h, const uint8_t *prev_blur,
                          uint8_t *blur, fcw_result *r) {
    memset(r, 0, sizeof *r);
    for (unsigned y = 0; y < h; y++)
        for (unsigned x = 0; x < w; x++) r->hist[luma[(size_t)y * pitch + x]]++;
    fcw_blur_cpu(luma, pitch, w, h, blur);
    uint64_t sad = 0;
    if (prev_blur)
        for (size_t i = 0; i < (size_t)w * h; i++) sad += (uint64_t)(blur[i] > prev_blur[i] ? blur[i] - prev_blur[i] : prev_blur[i] - blur[i]);
    r->sad = sad;
}

static const char fcw_source[] =
    "extern \"C\" __global__ void fcw_spin(unsigned long long ns) {\n"
    "    unsigned long long t0, t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < ns);\n"
    "}\n"
    "// the GPU's clock (ns) into *p: the benchmark's per-frame breakdown\n"
    "extern \"C\" __global__ void fcw_stamp(unsigned long long *p) {\n"
    "    unsigned long long t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    *p = t;\n"
    "}\n"
    "extern \"C\" __global__ void fcw_zero(unsigned *p, unsigned n) {\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = 0u;\n"
    "}\n"
    "// 3x3 box blur of the luma (rows pitch apart) into dst (rows w apart) and, when out2 is not 0, into out2\n"
    "// (rows pitch2 apart)\n"
    "extern \"C\" __global__ void fcw_blur(const unsigned char *src, unsigned long long pitch, unsigned char *dst,\n"
    "                                     unsigned w, unsigned h, unsigned char *out2, unsigned long long pitch2) {\n"
    "    const unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "    if (x >= w || y >= h) return;\n"
    "    const unsigned y0 = y ? y - 1 : 0, y2 = y + 1 < h ? y + 1 : h - 1;\n"
    "    const unsigned xl = x ? x - 1 : 0, xr = x + 1 < w ? x + 1 : w - 1;\n"
    "    const unsigned char *r0 = src + y0 * pitch, *r1 = src + y * pitch, *r2 = src + y2 * pitch;\n"
    "    const unsigned sum = (unsigned)r0[xl] + r0[x] + r0[xr] + r1[xl] + r1[x] + r1[xr] + r2[xl] + r2[x] + r2[xr];\n"
    "    const unsigned char v = (unsigned char)((sum + 4u) / 9u);\n"
    "    dst[(unsigned long long)y * w + x] = v;\n"
    "    if (out2) out2[(unsigned long long)y * pitch2 + x] = v;\n"
    "}\n"
    "// hist[v] += number of luma bytes equal to v (hist zeroed before)\n"
    "extern \"C\" __global__ void fcw_hist(const unsigned char *src, unsigned long long pitch, unsigned w, unsigned h,\n"
    "                                     unsigned *hist) {\n"
    "    __shared__ unsigned local[256];\n"
    "    for (unsigned i = threadIdx.x; i < 256u; i += blockDim.x) local[i] = 0u;\n"
    "    __syncthreads();\n"
    "    const unsigned n = w * h;\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "        const unsigned y = i / w, x = i - y * w;\n"
    "        atomicAdd(&local[src[(unsigned long long)y * pitch + x]], 1u);\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (unsigned i = threadIdx.x; i < 256u; i += blockDim.x)\n"
    "        if (local[i]) atomicAdd(&hist[i], local[i]);\n"
    "}\n"
    "// *out += sum |a[i] - b[i]| (out zeroed before); blockDim.x a multiple of 32\n"
    "extern \"C\" __global__ void fcw_sad(const unsigned char *a, const unsigned char *b, unsigned n,\n"
    "                                    unsigned long long *out) {\n"
    "    unsigned long long acc = 0;\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "        const int d = (int)a[i] - (int)b[i];\n"
    "        acc += (unsigned long long)(d < 0 ? -d : d);\n"
    "    }\n"
    "    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
    "    if ((threadIdx.x & 31u) == 0u && acc) atomicAdd(out, acc);\n"
    "}\n";

/* Launch shapes, the same for cuweave and the hand-written driver code. */
enum { FCW_BLUR_BX = 32, FCW_BLUR_BY = 8, FCW_HIST_GRID = 264, FCW_HIST_BLOCK = 256, FCW_SAD_GRID = 264, FCW_SAD_BLOCK = 256 };

/* The kernels, compiled once per context (NVRTC through cuweave's cache). */
typedef struct fcw_kernels {
    cw_program *prog;
    cw_module *mod;
    cw_kernel *spin, *zero, *blur, *hist, *sad, *stamp;
} fcw_kernels;

FCW_FN_ void fcw_kernels_close(fcw_kernels *k) {
    cw_module_destroy(&k->mod);
    cw_program_destroy(&k->prog);
    memset(k, 0, sizeof *k);
}

FCW_FN_ cw_status fcw_kernels_open(fcw_kernels *k, cw_context *ctx) {
    memset(k, 0, sizeof *k);
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "ffmpeg_cuweave.cu";
    cw_status st = cw_program_compile(&k->prog, ctx, fcw_source, &ps);
    if (st == CW_SUCCESS) st = cw_module_load(&k->mod, k->prog);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_spin", &k->spin);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_zero", &k->zero);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_blur", &k->blur);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_hist", &k->hist);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_sad", &k->sad);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(k->mod, "fcw_stamp", &k->stamp);
    cw_kernel *all[] = {k->spin, k->zero, k->blur, k->hist, k->sad, k->stamp};
    for (unsigned i = 0; st == CW_SUCCESS && i < 6; i++) st = cw_kernel_preload(all[i], ctx);
    if (st != CW_SUCCESS) fcw_kernels_close(k);
    return st;
}

/* ---- the processor: a pipeline per frame --------------------------------- */

enum { FCW_RING = 4 }; /* frames in flight */

/* The per-frame breakdown's GPU timestamps (bench_ffmpeg): the words a
 * frame's processing writes with fcw_stamp (the GPU's %globaltimer, ns), the
 * same points in cuweave's operators and in the hand-written code. */
enum {
    FCW_ST_DECODED = 0,  /* on FFmpeg's stream when the host got the frame (the benchmark's) */
    FCW_ST_START = 1,    /* processing starts: after the wait for FFmpeg's stream */
    FCW_ST_SPIN_END = 2, /* after the extra work (extra_ns), or = start */
    FCW_ST_HIST0 = 3,    /* histogram (zero + hist) start, end */
    FCW_ST_HIST1 = 4,
    FCW_ST_BLUR0 = 5, /* blur start, end */
    FCW_ST_BLUR1 = 6,
    FCW_ST_SAD0 = 7, /* SAD (zero + sad) start, end */
    FCW_ST_SAD1 = 8,
    FCW_ST_END = 9, /* after both copies to page-locked memory */
    FCW_STAMPS = 10
};

typedef struct fcw_options {
    /* GPU time (ns) the frame operator spends busy before any read of the
     * frame (a slower filter; the test's slow-kernel variant). 0: none. */
    unsigned long long extra_ns;
    /* Nonzero: FFmpeg's stream does not wait for the processing. For a host
     * that consumes nothing of it on its stream (a decoder with no encoder
     * or download after it): the frames are still protected, by the
     * reference the processor holds until its work is done, and FFmpeg's
     * NULL-stream work need not queue behind cuweave's (bench_ffmpeg). */
    int no_order_back;
    /* Nonzero (the test's control only): the frame is released at once
     * after the enqueue, before cuweave has read it. */
    int release_at_once;
    /* Nonzero: blur, hist, SAD and the sink take no stream of their own
     * (cw_operator_settings.no_internal_stream) and run on the frame
     * operator's, behind each other, as hand-written code on one stream
     * does; with FFmpeg's own stream set (AVCUDADeviceContext.stream not
     * NULL) that stream is FFmpeg's: the frame operator runs on it too, as
     * the hand-written code does, and no event orders cuweave's work
     * against FFmpeg's (the stream's order does). 0 (the default): a stream
     * per operator, ordered with events (the histogram beside the blur).
     * On the H100 one stream was no faster (the histogram no longer
     * overlaps the blur; bench_ffmpeg measures both). */
    int one_stream;
} fcw_options;

typedef struct fcw_slot {
    AVFrame *frame;     /* our reference to the input frame (until done) */
    cw_future *done;    /* completes after the sink's copies */
    fcw_result *result; /* page-locked: the sink's copies land here */
    long long index;    /* frame number, -1: free */
} fcw_slot;

typedef struct fcw_proc {
    cw_context *ctx;  /* wraps FFmpeg's CUcontext */
    cw_stream *host;  /* wraps FFmpeg's CUstream (NULL: the legacy stream) */
    cw_pipeline *pipe;
    fcw_kernels k;
    fcw_options opt;
    unsigned w, h;
    fcw_slot slot[FCW_RING];
    fcw_result *pinned; /* FCW_RING results, page-locked */
    cw_buffer *prev_blur; /* the previous frame's blur (a reference) */
    int on_host;          /* one_stream with FFmpeg's own stream: every operator runs on it */
    /* the frame of the run in progress */
    cw_devptr luma, out_luma;
    unsigned long long pitch, out_pitch;
    fcw_slot *cur;
    /* what came out: called for every retired frame, in order */
    void (*on_result)(void *user, long long index, const fcw_result *r);
    void *user;
    /* called by the sink with its stream after the copies (the benchmark
     * records a timing event there); may be NULL */
    void (*on_sink)(void *user, long long index, cw_stream *s);
    /* NULL, or FCW_STAMPS words of page-locked memory (the device reaches it
     * at the same address) that the current frame's operators stamp with
     * fcw_stamp at the FCW_ST_* points (the benchmark's breakdown: a few
     * 1-thread kernels more per frame); set before each fcw_process */
    unsigned long long *stamps;
    unsigned long long frames, waits; /* waits: retirements that had to wait for the GPU */
} fcw_proc;

#define FCW_TRY_(expr)                         \
    do {                                       \
        cw_status st_ = (expr);                \
        if (st_ != CW_SUCCESS) return st_;     \
    } while (0)

FCW_FN_ cw_status fcw_launch2d(cw_kernel *k, cw_stream *s, unsigned gx, unsigned gy, unsigned bx, unsigned by, void **args) {
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.grid[0] = gx;
    lc.grid[1] = gy;
    lc.block[0] = bx;
    lc.block[1] = by;
    return cw_kernel_launch(k, s, &lc, args);
}

/* Stamps word k of the current frame's breakdown on s (when on). */
FCW_FN_ cw_status fcw_stamp(fcw_proc *p, cw_stream *s, unsigned k) {
    if (!p->stamps) return CW_SUCCESS;
    unsigned long long at = (unsigned long long)(uintptr_t)&p->stamps[k];
    void *args[] = {&at};
    return fcw_launch2d(p->k.stamp, s, 1, 1, 1, 1, args);
}

FCW_FN_ cw_status fcw_op_frame(cw_io *io, void *user) {
    fcw_proc *p = (fcw_proc *)user;
    cw_stream *s;
    if (p->on_host) {
        /* one stream, FFmpeg's own: the frame's work runs there, behind the
         * decode by the stream's order (no event, no wait), and every
         * operator after it on the same stream */
        s = p->host;
        FCW_TRY_(cw_io_set_output_stream(io, "out", s));
    } else {
        FCW_TRY_(cw_io_receive_stream(io, NULL, &s));
        FCW_TRY_(cw_stream_wait(s, p->host)); /* after FFmpeg's decode / upload of the frame */
    }
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_START));
    if (p->opt.extra_ns) {
        void *args[] = {&p->opt.extra_ns};
        FCW_TRY_(fcw_launch2d(p->k.spin, s, 1, 1, 1, 1, args));
    }
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_SPIN_END));
    return cw_io_emit(io, "out", p, NULL);
}

FCW_FN_ cw_status fcw_op_blur(cw_io *io, void *user) {
    fcw_proc *p = (fcw_proc *)user;
    cw_stream *s;
    FCW_TRY_(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o = NULL;
    FCW_TRY_(cw_io_alloc(&o, io, (size_t)p->w * p->h));
    cw_devptr dst;
    FCW_TRY_(cw_buffer_get_writable(o, &dst));
    unsigned w = p->w, h = p->h;
    void *args[] = {&p->luma, &p->pitch, &dst, &w, &h, &p->out_luma, &p->out_pitch};
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_BLUR0));
    FCW_TRY_(fcw_launch2d(p->k.blur, s, (w + FCW_BLUR_BX - 1) / FCW_BLUR_BX, (h + FCW_BLUR_BY - 1) / FCW_BLUR_BY,
                          FCW_BLUR_BX, FCW_BLUR_BY, args));
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_BLUR1));
    return cw_io_emit(io, "out", p, o);
}

FCW_FN_ cw_status fcw_op_hist(cw_io *io, void *user) {
    fcw_proc *p = (fcw_proc *)user;
    cw_stream *s;
    FCW_TRY_(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o = NULL;
    FCW_TRY_(cw_io_alloc(&o, io, 256 * sizeof(uint32_t)));
    cw_devptr hist;
    FCW_TRY_(cw_buffer_get_writable(o, &hist));
    unsigned n = 256, w = p->w, h = p->h;
    void *zargs[] = {&hist, &n};
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_HIST0));
    FCW_TRY_(fcw_launch2d(p->k.zero, s, 1, 1, 256, 1, zargs));
    void *args[] = {&p->luma, &p->pitch, &w, &h, &hist};
    FCW_TRY_(fcw_launch2d(p->k.hist, s, FCW_HIST_GRID, 1, FCW_HIST_BLOCK, 1, args));
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_HIST1));
    return cw_io_emit(io, "out", p, o);
}

FCW_FN_ cw_status fcw_op_sad(cw_io *io, void *user) {
    fcw_proc *p = (fcw_proc *)user;
    cw_message m;
    FCW_TRY_(cw_io_receive(io, "in", &m));
    if (!m.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s;
    FCW_TRY_(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o = NULL;
    FCW_TRY_(cw_io_alloc(&o, io, sizeof(uint64_t)));
    cw_devptr out, cur, prev;
    FCW_TRY_(cw_buffer_get_writable(o, &out));
    FCW_TRY_(cw_buffer_get_ptr(m.buffer, &cur));
    prev = cur; /* the first frame against itself: 0 */
    if (p->prev_blur) FCW_TRY_(cw_buffer_get_ptr(p->prev_blur, &prev));
    unsigned two = 2, n = p->w * p->h;
    void *zargs[] = {&out, &two};
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_SAD0));
    FCW_TRY_(fcw_launch2d(p->k.zero, s, 1, 1, 32, 1, zargs));
    void *args[] = {&cur, &prev, &n, &out};
    FCW_TRY_(fcw_launch2d(p->k.sad, s, FCW_SAD_GRID, 1, FCW_SAD_BLOCK, 1, args));
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_SAD1));
    if (p->prev_blur) {
        /* this call read the previous blur too: its free waits for s */
        FCW_TRY_(cw_buffer_use(p->prev_blur, s));
        cw_buffer_destroy(&p->prev_blur);
    }
    FCW_TRY_(cw_buffer_retain(m.buffer)); /* kept for the next frame's SAD */
    p->prev_blur = m.buffer;
    return cw_io_emit(io, "out", p, o);
}

FCW_FN_ cw_status fcw_op_sink(cw_io *io, void *user) {
    fcw_proc *p = (fcw_proc *)user;
    cw_message mh, ms;
    FCW_TRY_(cw_io_receive(io, "hist", &mh));
    FCW_TRY_(cw_io_receive(io, "sad", &ms));
    if (!mh.buffer || !ms.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s;
    FCW_TRY_(cw_io_receive_stream(io, "hist", &s));
    FCW_TRY_(cw_io_receive_stream(io, "sad", &s)); /* the same stream, behind both */
    cw_devptr hist, sad;
    FCW_TRY_(cw_buffer_get_ptr(mh.buffer, &hist));
    FCW_TRY_(cw_buffer_get_ptr(ms.buffer, &sad));
    FCW_TRY_(cw_copy_to_host(s, p->cur->result->hist, hist, sizeof p->cur->result->hist));
    FCW_TRY_(cw_copy_to_host(s, &p->cur->result->sad, sad, sizeof p->cur->result->sad));
    FCW_TRY_(fcw_stamp(p, s, FCW_ST_END));
    if (p->on_sink) p->on_sink(p->user, p->cur->index, s);
    /* FFmpeg's later work after ours (on FFmpeg's own stream already: nothing) */
    if (!p->opt.no_order_back && s != p->host) FCW_TRY_(cw_stream_wait(p->host, s));
    if (p->cur->done) return cw_future_rearm(p->cur->done, s);
    return cw_future_create(&p->cur->done, s, CW_FUTURE_EVENT);
}

/* Waits for the slot's frame, hands its result over and releases the frame
 * back to FFmpeg (av_frame_unref): after cuweave's last use. */
FCW_FN_ cw_status fcw_retire(fcw_proc *p, fcw_slot *sl) {
    if (sl->index < 0) return CW_SUCCESS;
    if (sl->done) {
        cw_status st = cw_future_poll(sl->done);
        if (st == CW_ERROR_NOT_READY) {
            p->waits++;
            st = cw_future_wait(sl->done, -1);
        }
        if (st != CW_SUCCESS) return st;
    }
    if (sl->frame) av_frame_unref(sl->frame);
    if (p->on_result) p->on_result(p->user, sl->index, sl->result);
    sl->index = -1;
    return CW_SUCCESS;
}

/* Retires every frame in flight, oldest first. */
FCW_FN_ cw_status fcw_drain(fcw_proc *p) {
    for (unsigned i = 0; i < FCW_RING; i++) {
        fcw_slot *oldest = NULL;
        for (unsigned j = 0; j < FCW_RING; j++)
            if (p->slot[j].index >= 0 && (!oldest || p->slot[j].index < oldest->index)) oldest = &p->slot[j];
        if (!oldest) break;
        FCW_TRY_(fcw_retire(p, oldest));
    }
    return CW_SUCCESS;
}

/* Starts again at frame 0 (another clip, or the same from its start): every
 * frame in flight retired, the previous blur dropped (the next frame's SAD
 * is 0). The next fcw_process takes index 0. */
FCW_FN_ cw_status fcw_restart(fcw_proc *p) {
    FCW_TRY_(fcw_drain(p));
    cw_buffer_destroy(&p->prev_blur);
    return CW_SUCCESS;
}

FCW_FN_ void fcw_close(fcw_proc **pp) {
    if (!pp || !*pp) return;
    fcw_proc *p = *pp;
    if (p->pipe) {
        fcw_drain(p);
        cw_pipeline_synchronize(p->pipe);
    }
    cw_pipeline_destroy(&p->pipe);
    cw_buffer_destroy(&p->prev_blur);
    for (unsigned i = 0; i < FCW_RING; i++) {
        cw_future_destroy(&p->slot[i].done);
        av_frame_free(&p->slot[i].frame);
    }
    if (p->pinned) cw_host_free(p->ctx, (void **)&p->pinned);
    fcw_kernels_close(&p->k);
    cw_stream_destroy(&p->host); /* a wrapper: FFmpeg's stream is left alone */
    cw_context_destroy(&p->ctx); /* a wrapper: FFmpeg's context is left alone */
    free(p);
    *pp = NULL;
}

FCW_FN_ cw_status fcw_add_op(cw_pipeline *pl, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                            const char *in1, const char *in2, const char *out, int own_stream) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator_settings set;
    cw_operator_settings_default(&set);
    set.no_internal_stream = !own_stream; /* then the upstream operator's stream serves */
    cw_operator *op = NULL;
    FCW_TRY_(cw_operator_create(&op, name, &ops, user, &set));
    cw_status st = CW_SUCCESS;
    if (in1) st = cw_operator_add_input(op, in1, NULL);
    if (st == CW_SUCCESS && in2) st = cw_operator_add_input(op, in2, NULL);
    if (st == CW_SUCCESS && out) st = cw_operator_add_output(op, out, NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_add(pl, op);
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
}

/*
 * Opens the processor on FFmpeg's CUDA device (its context and its stream,
 * as they are now) for frames of w x h. opt may be NULL. Returns CW_SUCCESS
 * or the failing call's status (the detail in cw_last_error()).
 */
FCW_FN_ cw_status fcw_open(fcw_proc **out, AVBufferRef *hw_device, unsigned w, unsigned h, const fcw_options *opt) {
    *out = NULL;
    const AVCUDADeviceContext *hw = (const AVCUDADeviceContext *)((AVHWDeviceContext *)hw_device->data)->hwctx;
    fcw_proc *p = (fcw_proc *)calloc(1, sizeof *p);
    if (!p) return CW_ERROR_OUT_OF_MEMORY;
    if (opt) p->opt = *opt;
    p->w = w;
    p->h = h;
    for (unsigned i = 0; i < FCW_RING; i++) p->slot[i].index = -1;
    cw_status st = cw_context_wrap(&p->ctx, hw->cuda_ctx);
    if (st == CW_SUCCESS) st = cw_stream_wrap(&p->host, p->ctx, hw->stream);
    p->on_host = p->opt.one_stream && hw->stream != NULL;
    if (st == CW_SUCCESS) st = fcw_kernels_open(&p->k, p->ctx);
    if (st == CW_SUCCESS) st = cw_host_alloc((void **)&p->pinned, p->ctx, FCW_RING * sizeof(fcw_result));
    for (unsigned i = 0; st == CW_SUCCESS && i < FCW_RING; i++) {
        p->slot[i].result = &p->pinned[i];
        if (!(p->slot[i].frame = av_frame_alloc())) st = CW_ERROR_OUT_OF_MEMORY;
    }
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    /* the ring bounds the frames in flight (a frame is retired before its
     * slot is used again); the pipeline's own bound, which waits at the end
     * of iteration i for iteration i + 1 - max_in_flight, stays behind it */
    ps.max_in_flight = FCW_RING + 1;
    if (st == CW_SUCCESS) st = cw_pipeline_create(&p->pipe, p->ctx, &ps);
    const int own = !p->opt.one_stream;
    if (st == CW_SUCCESS) st = fcw_add_op(p->pipe, "frame", fcw_op_frame, p, NULL, NULL, "out", 1);
    if (st == CW_SUCCESS) st = fcw_add_op(p->pipe, "blur", fcw_op_blur, p, "in", NULL, "out", own);
    if (st == CW_SUCCESS) st = fcw_add_op(p->pipe, "hist", fcw_op_hist, p, "in", NULL, "out", own);
    if (st == CW_SUCCESS) st = fcw_add_op(p->pipe, "sad", fcw_op_sad, p, "in", NULL, "out", own);
    if (st == CW_SUCCESS) st = fcw_add_op(p->pipe, "sink", fcw_op_sink, p, "hist", "sad", NULL, own);
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p->pipe, "frame", "out", "blur", "in");
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p->pipe, "frame", "out", "hist", "in");
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p->pipe, "blur", "out", "sad", "in");
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p->pipe, "hist", "out", "sink", "hist");
    if (st == CW_SUCCESS) st = cw_pipeline_connect(p->pipe, "sad", "out", "sink", "sad");
    if (st == CW_SUCCESS) st = cw_pipeline_check(p->pipe);
    if (st != CW_SUCCESS) {
        fcw_close(&p);
        return st;
    }
    *out = p;
    return CW_SUCCESS;
}

/*
 * Processes one AV_PIX_FMT_CUDA frame (its luma: data[0], linesize[0]),
 * frame number index (increasing). out, when not NULL, is an
 * AV_PIX_FMT_CUDA frame whose luma receives the blur (the filter-style
 * use). Enqueues only: FFmpeg's stream waits for the work (its next decode,
 * upload or download comes after it); the result is handed to on_result
 * when the frame retires (a later call or fcw_drain). The processor keeps a
 * reference to frame until then; the caller may unref its own at once.
 */
FCW_FN_ cw_status fcw_process(fcw_proc *p, AVFrame *frame, long long index, AVFrame *out) {
    if (!p || !frame || frame->format != AV_PIX_FMT_CUDA || (unsigned)frame->width != p->w ||
        (unsigned)frame->height != p->h)
        return CW_ERROR_INVALID_ARGUMENT;
    fcw_slot *sl = &p->slot[index % FCW_RING];
    FCW_TRY_(fcw_retire(p, sl)); /* the frame FCW_RING before: done, released */
    if (av_frame_ref(sl->frame, frame) < 0) return CW_ERROR_OUT_OF_MEMORY;
    sl->index = index;
    p->cur = sl;
    p->luma = (cw_devptr)(uintptr_t)frame->data[0];
    p->pitch = (unsigned long long)frame->linesize[0];
    p->out_luma = out ? (cw_devptr)(uintptr_t)out->data[0] : 0;
    p->out_pitch = out ? (unsigned long long)out->linesize[0] : 0;
    cw_status st = cw_pipeline_run(p->pipe, 1);
    if (st != CW_SUCCESS) {
        /* nothing of this frame is handed over; the pipeline is synchronised
         * before the frame goes back (cuweave's work may have started) */
        cw_pipeline_synchronize(p->pipe);
        av_frame_unref(sl->frame);
        sl->index = -1;
        return st;
    }
    p->frames++;
    if (p->opt.release_at_once) av_frame_unref(sl->frame); /* the control: released at once */
    return CW_SUCCESS;
}

/* Where the clips are: $CW_FFMPEG_DATA, else the source tree's tests/data
 * (FCW_DATA_DIR, set by the build), else ./tests/data. */
#ifndef FCW_DATA_DIR
#define FCW_DATA_DIR "tests/data"
#endif
static const char *fcw_data_dir(void) {
    const char *e = getenv("CW_FFMPEG_DATA");
    return e && *e ? e : FCW_DATA_DIR;
}

/* ---- FFmpeg: opening a clip for hardware (CUDA) or software decoding ---- */

typedef struct fcw_decoder {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    int stream, eof, sent_eof;
} fcw_decoder;

FCW_FN_ enum AVPixelFormat fcw_get_cuda_format(AVCodecContext *c, const enum AVPixelFormat *fmts) {
    (void)c;
    for (const enum AVPixelFormat *f = fmts; *f != AV_PIX_FMT_NONE; f++)
        if (*f == AV_PIX_FMT_CUDA) return *f;
    fprintf(stderr, "ffmpeg: the decoder offers no AV_PIX_FMT_CUDA output\n");
    return AV_PIX_FMT_NONE;
}

FCW_FN_ void fcw_decoder_close(fcw_decoder *d) {
    avcodec_free_context(&d->dec);
    avformat_close_input(&d->fmt);
    av_packet_free(&d->pkt);
    memset(d, 0, sizeof *d);
}

/* Opens path; hw_device NULL: software decoding, else NVDEC into CUDA frames
 * of that device. Returns 0 or an AVERROR. */
FCW_FN_ int fcw_decoder_open(fcw_decoder *d, const char *path, AVBufferRef *hw_device) {
    memset(d, 0, sizeof *d);
    int r = avformat_open_input(&d->fmt, path, NULL, NULL);
    if (r >= 0) r = avformat_find_stream_info(d->fmt, NULL);
    const AVCodec *codec = NULL;
    if (r >= 0) r = av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (r >= 0) {
        d->stream = r;
        d->dec = avcodec_alloc_context3(codec);
        d->pkt = av_packet_alloc();
        r = d->dec && d->pkt ? 0 : AVERROR(ENOMEM);
    }
    if (r >= 0) r = avcodec_parameters_to_context(d->dec, d->fmt->streams[d->stream]->codecpar);
    if (r >= 0 && hw_device) {
        d->dec->hw_device_ctx = av_buffer_ref(hw_device);
        d->dec->get_format = fcw_get_cuda_format;
        if (!d->dec->hw_device_ctx) r = AVERROR(ENOMEM);
    }
    /* one thread: FFmpeg's frame threads sync with atomics in code no
     * sanitizer sees (ThreadSanitizer reports its buffer frees as races) */
    if (r >= 0) d->dec->thread_count = 1;
    if (r >= 0 && hw_device) d->dec->extra_hw_frames = FCW_RING + 1; /* the frames the processor holds */
    if (r >= 0) r = avcodec_open2(d->dec, codec, NULL);
    if (r < 0) fcw_decoder_close(d);
    return r;
}

/* Back to the first frame (the decoder flushed). Returns 0 or an AVERROR. */
FCW_FN_ int fcw_decoder_rewind(fcw_decoder *d) {
    int r = av_seek_frame(d->fmt, d->stream, 0, AVSEEK_FLAG_BACKWARD);
    if (r < 0) return r;
    avcodec_flush_buffers(d->dec);
    d->eof = d->sent_eof = 0;
    return 0;
}

/* The next frame into f: 0, AVERROR_EOF at the end, or another AVERROR. */
FCW_FN_ int fcw_decoder_next(fcw_decoder *d, AVFrame *f) {
    for (;;) {
        int r = avcodec_receive_frame(d->dec, f);
        if (r != AVERROR(EAGAIN)) return r;
        if (d->sent_eof) return AVERROR_EOF;
        r = av_read_frame(d->fmt, d->pkt);
        if (r == AVERROR_EOF) {
            d->sent_eof = 1;
            r = avcodec_send_packet(d->dec, NULL);
        } else if (r >= 0) {
            if (d->pkt->stream_index == d->stream) r = avcodec_send_packet(d->dec, d->pkt);
            av_packet_unref(d->pkt);
        }
        if (r < 0 && r != AVERROR_EOF) return r;
    }
}

/*
 * The reference of a whole clip: decodes path in software and computes
 * fcw_reference for every frame. *out: an array of *count results (free()).
 * Returns 0 or an AVERROR. w and h receive the frame size.
 */
FCW_FN_ int fcw_reference_clip(const char *path, fcw_result **out, size_t *count, unsigned *w, unsigned *h) {
    *out = NULL;
    *count = 0;
    fcw_decoder d;
    int r = fcw_decoder_open(&d, path, NULL);
    if (r < 0) return r;
    AVFrame *f = av_frame_alloc();
    uint8_t *blur[2] = {NULL, NULL};
    size_t cap = 0;
    fcw_result *res = NULL;
    if (!f) r = AVERROR(ENOMEM);
    while (r >= 0 && (r = fcw_decoder_next(&d, f)) >= 0) {
        if (!blur[0]) {
            *w = (unsigned)f->width;
            *h = (unsigned)f->height;
            blur[0] = (uint8_t *)malloc((size_t)f->width * f->height);
            blur[1] = (uint8_t *)malloc((size_t)f->width * f->height);
            if (!blur[0] || !blur[1]) r = AVERROR(ENOMEM);
        }
        if (r >= 0 && *count == cap) {
            cap = cap ? 2 * cap : 64;
            fcw_result *n = (fcw_result *)realloc(res, cap * sizeof *res);
            if (!n) r = AVERROR(ENOMEM);
            else res = n;
        }
        if (r >= 0) {
            const size_t i = *count;
            fcw_reference(f->data[0], (size_t)f->linesize[0], *w, *h, i ? blur[(i - 1) % 2] : NULL, blur[i % 2],
                          &res[i]);
            (*count)++;
        }
        av_frame_unref(f);
    }
    if (r == AVERROR_EOF) r = 0;
    av_frame_free(&f);
    free(blur[0]);
    free(blur[1]);
    fcw_decoder_close(&d);
    if (r < 0) {
        free(res);
        *count = 0;
        return r;
    }
    *out = res;
    return 0;
}

/*
 * FFmpeg's CUDA device on GPU 0 (FFmpeg makes its own context); with
 * stream_flags >= 0 the program sets a stream of its own (made with those
 * cuStreamCreate flags) in AVCUDADeviceContext.stream before any decoder
 * uses it, else the stream stays NULL. *stream receives it. Returns 0 or an
 * AVERROR (or -1 when the driver call failed).
 */
FCW_FN_ int fcw_device_open(AVBufferRef **dev, int stream_flags, CUstream *stream) {
    *stream = NULL;
    int r = av_hwdevice_ctx_create(dev, AV_HWDEVICE_TYPE_CUDA, "0", NULL, 0);
    if (r < 0 || stream_flags < 0) return r;
    AVCUDADeviceContext *hw = (AVCUDADeviceContext *)((AVHWDeviceContext *)(*dev)->data)->hwctx;
    CUcontext dummy = NULL;
    if (fcw_cu.ctx_push(hw->cuda_ctx) != 0) return -1;
    r = fcw_cu.stream_create(stream, (unsigned)stream_flags);
    fcw_cu.ctx_pop(&dummy);
    if (r != 0) return -1;
    hw->stream = *stream;
    return 0;
}

/* Frees the device; the program's stream (if any) is destroyed first. */
FCW_FN_ void fcw_device_close(AVBufferRef **dev, CUstream stream) {
    if (!*dev) return;
    if (stream) {
        AVCUDADeviceContext *hw = (AVCUDADeviceContext *)((AVHWDeviceContext *)(*dev)->data)->hwctx;
        CUcontext dummy = NULL;
        if (fcw_cu.ctx_push(hw->cuda_ctx) == 0) {
            fcw_cu.stream_sync(stream);
            fcw_cu.stream_destroy(stream);
            fcw_cu.ctx_pop(&dummy);
        }
        hw->stream = NULL;
    }
    av_buffer_unref(dev);
}

#endif /* CUWEAVE_EXAMPLE_FFMPEG_CUWEAVE_H */
