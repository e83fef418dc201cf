/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A video filter as a plugin of a host program that already owns CUDA (a
 * codec, a player, FFmpeg's hwcontext_cuda): the host hands over its
 * CUcontext and its CUstream (NULL: the context's legacy default stream),
 * and frames in device memory that its own work on that stream produces and
 * consumes. The filter inverts 8-bit luma (out = 255 - in) on streams of its
 * own and hands each frame back ready on the host's stream:
 *
 *   host stream:   ... produce src ──┐                    ┌── consume dst ...
 *   filter:                          └─ top half ─────────┤
 *                                    └─ bottom half ──────┘   (fork / join)
 *
 * The rules it keeps (tests/test_gpu_embed.c checks each with data and with
 * context queries):
 *   - ordered after the host's work on src (its streams wait for the host's
 *     stream), and the host's later work after its own (the host's stream
 *     waits for it): no synchronisation of the host's stream, no blocking;
 *   - the host's context is wrapped, never destroyed, its flags never
 *     changed; the host's stream is wrapped, never destroyed;
 *   - whatever context the host had current stays current after every call
 *     (cuweave sets a context only inside its calls and restores it);
 *   - nothing is left on the host's stream but the ordering the frames need.
 *
 * Carried as one header so that the example (embed.c) and the test share it:
 * include it in one file. The kernel is compiled at open with NVRTC through
 * cuweave (cached in memory and on disk).
 */
#ifndef CUWEAVE_EXAMPLE_VIDEO_FILTER_H
#define CUWEAVE_EXAMPLE_VIDEO_FILTER_H

#include <stdio.h>
#include <stdlib.h>

#include <cuweave/cuweave.h>

typedef struct vf_options {
    /* Busy time each half of a frame spends on the GPU before writing, in
     * nanoseconds: stands in for a heavier filter (the test uses it to make
     * a missing order show). 0 for none. */
    unsigned long long extra_ns;
    /* Nonzero: leave out the ordering against the host's stream (both
     * directions). Only for the test, to show what goes wrong without it. */
    int unordered;
} vf_options;

typedef struct video_filter {
    cw_context *ctx;   /* wraps the host's CUcontext */
    cw_stream *host;   /* wraps the host's CUstream */
    cw_stream *work;   /* the filter's own non-blocking stream */
    cw_program *prog;
    cw_module *mod;
    cw_kernel *invert;
    vf_options opt;
    unsigned long long frames;
} video_filter;

static const char vf_source[] =
    "extern \"C\" __global__ void vf_invert(const unsigned char *src, unsigned char *dst, unsigned width,\n"
    "                                       unsigned rows, unsigned long long pitch, unsigned long long extra_ns) {\n"
    "    if (extra_ns) {\n"
    "        if (threadIdx.x == 0) {\n"
    "            unsigned long long t0, t;\n"
    "            asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "            do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < extra_ns);\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    const unsigned y = blockIdx.y;\n"
    "    for (unsigned x = blockIdx.x * blockDim.x + threadIdx.x; x < width; x += gridDim.x * blockDim.x)\n"
    "        if (y < rows) dst[y * pitch + x] = (unsigned char)(255u - src[y * pitch + x]);\n"
    "}\n";

/* Frees what vf_open made; the host's context and stream stay as they were. */
static void vf_close(video_filter **pf) {
    if (!pf || !*pf) return;
    video_filter *f = *pf;
    cw_stream_destroy(&f->work);  /* pending work still completes */
    cw_stream_destroy(&f->host);  /* a wrapper: the host's stream is left alone */
    cw_module_destroy(&f->mod);
    cw_program_destroy(&f->prog);
    cw_context_destroy(&f->ctx);  /* a wrapper: the host's context is left alone */
    free(f);
    *pf = NULL;
}

/* Opens the filter on the host's context and stream (NULL: the legacy
 * default stream). Returns CW_SUCCESS or the failing call's status (the
 * detail in cw_last_error()->message). */
static cw_status vf_open(video_filter **out, CUcontext host_ctx, CUstream host_stream, const vf_options *opt) {
    *out = NULL;
    video_filter *f = (video_filter *)calloc(1, sizeof *f);
    if (!f) return CW_ERROR_OUT_OF_MEMORY;
    if (opt) f->opt = *opt;
    cw_status st = cw_context_wrap(&f->ctx, host_ctx);
    if (st == CW_SUCCESS) st = cw_stream_wrap(&f->host, f->ctx, host_stream);
    if (st == CW_SUCCESS) st = cw_stream_create(&f->work, f->ctx, NULL); /* non-blocking by default */
    if (st == CW_SUCCESS) {
        cw_program_settings ps;
        cw_program_settings_default(&ps);
        ps.name = "vf_invert.cu";
        st = cw_program_compile(&f->prog, f->ctx, vf_source, &ps);
    }
    if (st == CW_SUCCESS) st = cw_module_load(&f->mod, f->prog);
    if (st == CW_SUCCESS) st = cw_module_get_kernel(f->mod, "vf_invert", &f->invert);
    if (st != CW_SUCCESS) {
        vf_close(&f);
        return st;
    }
    *out = f;
    return CW_SUCCESS;
}

/* One half of the frame on stream s: rows [row0, row0 + rows). */
static cw_status vf_half(video_filter *f, cw_stream *s, unsigned long long src, unsigned long long dst, unsigned width,
                         unsigned row0, unsigned rows, unsigned long long pitch) {
    unsigned long long a = src + (unsigned long long)row0 * pitch, b = dst + (unsigned long long)row0 * pitch;
    void *args[] = {&a, &b, &width, &rows, &pitch, &f->opt.extra_ns};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.block[0] = 256;
    lc.grid[0] = (width + 255) / 256;
    lc.grid[1] = rows;
    return cw_kernel_launch(f->invert, s, &lc, args);
}

/*
 * Filters one frame: dst = 255 - src, width x height bytes with rows
 * `pitch` apart. Enqueues only; returns at once. The host's work enqueued
 * on its stream before the call (producing src) comes first; the host's
 * work enqueued after it (consuming dst) comes after the filter's.
 */
static cw_status vf_process(video_filter *f, unsigned long long src, unsigned long long dst, unsigned width, unsigned height,
                            unsigned long long pitch) {
    if (!f || !src || !dst || !width || !height || pitch < width) return CW_ERROR_INVALID_ARGUMENT;
    cw_status st = f->opt.unordered ? CW_SUCCESS : cw_stream_wait(f->work, f->host); /* after the host's producer */
    cw_stream *child = NULL;
    if (st == CW_SUCCESS) st = cw_stream_fork(&child, f->work); /* the bottom half runs beside the top */
    const unsigned top = height / 2;
    if (st == CW_SUCCESS) st = vf_half(f, f->work, src, dst, width, 0, top, pitch);
    if (st == CW_SUCCESS) st = vf_half(f, child, src, dst, width, top, height - top, pitch);
    if (child) {
        cw_status j = cw_stream_join(f->work, &child);
        if (st == CW_SUCCESS) st = j;
    }
    if (st == CW_SUCCESS && !f->opt.unordered) st = cw_stream_wait(f->host, f->work); /* the host's consumer after us */
    if (st == CW_SUCCESS) f->frames++;
    return st;
}

#endif /* CUWEAVE_EXAMPLE_VIDEO_FILTER_H */
