/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave inside a program that already owns CUDA, as in a video tool: this
 * "host program" creates its own context, decodes (here: uploads) each
 * frame on its legacy NULL stream, runs the filter of video_filter.h on it
 * (cuweave streams and an NVRTC kernel, ordered against the NULL stream
 * both ways), encodes (here: downloads) the result on the NULL stream and
 * synchronises only that stream. It checks every byte of every frame, that
 * its current context is the same after every filter call, and that its
 * context keeps its flags.
 *
 * The host's own CUDA calls go through a small dlopen of libcuda, as a host
 * program's would. Without a GPU or NVRTC it says why and exits 77; exits 1
 * when a call fails or a result is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "video_filter.h"

enum { W = 1920, H = 1080, PITCH = 2048, FRAMES = 30 };

/* The host program's driver calls. */
static struct {
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*ctx_create_v4)(CUcontext *, void *, unsigned, int);
    int (*ctx_create_v2)(CUcontext *, unsigned, int);
    int (*ctx_destroy)(CUcontext);
    int (*ctx_get_current)(CUcontext *);
    int (*ctx_set_current)(CUcontext);
    int (*ctx_get_flags)(unsigned *);
    int (*mem_alloc)(unsigned long long *, size_t);
    int (*mem_free)(unsigned long long);
    int (*host_alloc)(void **, size_t);
    int (*host_free)(void *);
    int (*htod_async)(unsigned long long, const void *, size_t, CUstream);
    int (*dtoh_async)(void *, unsigned long long, size_t, CUstream);
    int (*stream_sync)(CUstream);
} cu;

static int load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&cu.init, "cuInit"},
        {(void **)&cu.device_get, "cuDeviceGet"},
        {(void **)&cu.ctx_destroy, "cuCtxDestroy_v2"},
        {(void **)&cu.ctx_get_current, "cuCtxGetCurrent"},
        {(void **)&cu.ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&cu.ctx_get_flags, "cuCtxGetFlags"},
        {(void **)&cu.mem_alloc, "cuMemAlloc_v2"},
        {(void **)&cu.mem_free, "cuMemFree_v2"},
        {(void **)&cu.host_alloc, "cuMemAllocHost_v2"},
        {(void **)&cu.host_free, "cuMemFreeHost"},
        {(void **)&cu.htod_async, "cuMemcpyHtoDAsync_v2"},
        {(void **)&cu.dtoh_async, "cuMemcpyDtoHAsync_v2"},
        {(void **)&cu.stream_sync, "cuStreamSynchronize"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].name))) return -1;
    *(void **)&cu.ctx_create_v4 = dlsym(lib, "cuCtxCreate_v4");
    *(void **)&cu.ctx_create_v2 = dlsym(lib, "cuCtxCreate_v2");
    return cu.ctx_create_v4 || cu.ctx_create_v2 ? 0 : -1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void) {
    printf("embed: a video filter on cuweave inside a host program that owns its CUDA context\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st == CW_SUCCESS && !cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS || load_driver() != 0 || cu.init(0) != 0) {
        fprintf(stderr, "embed: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }

    /* the host program: its context (blocking sync, as a player might ask
     * for), its NULL stream, its frames */
    int dev = 0;
    CUcontext ctx = NULL;
    int r = cu.device_get(&dev, 0);
    if (r == 0) r = cu.ctx_create_v4 ? cu.ctx_create_v4(&ctx, NULL, 0x04 /* SCHED_BLOCKING_SYNC */, dev)
                                     : cu.ctx_create_v2(&ctx, 0x04, dev);
    if (r != 0) {
        fprintf(stderr, "embed: the host could not make its context (CUresult %d)\n", r);
        return 1;
    }
    unsigned flags_before = 0, flags_after = 0;
    cu.ctx_get_flags(&flags_before);
    const CUstream host_stream = NULL;
    unsigned long long src = 0, dst = 0;
    unsigned char *in = NULL, *out = NULL;
    const size_t bytes = (size_t)PITCH * H;
    int ok = cu.mem_alloc(&src, bytes) == 0 && cu.mem_alloc(&dst, bytes) == 0 &&
             cu.host_alloc((void **)&in, bytes) == 0 && cu.host_alloc((void **)&out, bytes) == 0;

    video_filter *f = NULL;
    if (ok && (st = vf_open(&f, ctx, host_stream, NULL)) != CW_SUCCESS) {
        fprintf(stderr, "embed: vf_open: %s\n", cw_last_error()->message);
        ok = 0;
    }
    unsigned long long wrong = 0;
    int current_kept = 1;
    double t0 = now_ms();
    for (unsigned k = 0; ok && k < FRAMES; k++) {
        /* decode: the frame arrives on the host's stream */
        memset(in, (int)(k * 7u + 3u), bytes);
        ok = cu.htod_async(src, in, bytes, host_stream) == 0;
        /* filter: enqueued, ordered after the upload and before the download */
        CUcontext before = NULL, after = NULL;
        cu.ctx_get_current(&before);
        if (ok && vf_process(f, src, dst, W, H, PITCH) != CW_SUCCESS) {
            fprintf(stderr, "embed: vf_process: %s\n", cw_last_error()->message);
            ok = 0;
        }
        cu.ctx_get_current(&after);
        current_kept &= before == after;
        /* encode: the host reads the frame back on its own stream */
        ok = ok && cu.dtoh_async(out, dst, bytes, host_stream) == 0 && cu.stream_sync(host_stream) == 0;
        const unsigned char want = (unsigned char)(255u - (k * 7u + 3u));
        for (unsigned y = 0; ok && y < H; y++)
            for (unsigned x = 0; x < W; x++) wrong += out[(size_t)y * PITCH + x] != want;
    }
    const double ms = now_ms() - t0;
    vf_close(&f);
    cu.ctx_set_current(ctx);
    cu.ctx_get_flags(&flags_after);
    if (ok) {
        printf("%d frames of %dx%d: %s; %.2f ms per frame (upload, filter, download, sync)\n", FRAMES, W, H,
               wrong ? "WRONG BYTES" : "every byte right", ms / FRAMES);
        printf("the host's current context was the same after every filter call: %s\n", current_kept ? "yes" : "NO");
        printf("the host's context flags: 0x%x before, 0x%x after\n", flags_before, flags_after);
    }
    ok = ok && wrong == 0 && current_kept && flags_before == flags_after;
    if (src) cu.mem_free(src);
    if (dst) cu.mem_free(dst);
    if (in) cu.host_free(in);
    if (out) cu.host_free(out);
    cu.ctx_set_current(NULL);
    cu.ctx_destroy(ctx);
    return ok ? 0 : 1;
}
