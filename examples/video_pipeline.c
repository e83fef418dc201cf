/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A libvmaf-like video pipeline with the CPU-driven executor (cuweave/flow.h):
 *
 *   source --frames--> blur --frames--> sad --metric--> sink
 *
 *  - source: the "decoder". Per frame it makes a reference and a distorted
 *    1920x1080 8-bit picture on the CPU (synthetic, different every frame)
 *    in page-locked memory (cw_host_alloc) and uploads both into one buffer
 *    on a per-picture stream: cw_io_get_stream names "pic0" and "pic1" in turn,
 *    so picture n+1 never queues behind picture n's upload, and
 *    cw_io_set_output_stream makes the message carry that stream;
 *  - blur: a 3x3 box blur of both pictures (one kernel, grid z = picture);
 *  - sad: the sum of absolute differences of the two blurred pictures into a
 *    64-bit word (zeroed first with the library's own fill kernel);
 *  - sink: reads the word back (cw_copy_to_host into page-locked memory) on
 *    its stream, which waits for the sad's on the GPU, and synchronizes it.
 *
 * Every buffer is allocated in stream order from the context's pool and is
 * freed, once its message is dropped, after every stream that used it: no
 * operator frees anything. Each metric is checked against the same
 * computation done on the CPU (after the run, from the same synthetic
 * pictures). Prints the first few frames' metric and the time per frame.
 *
 * Kernels are compiled at run time with NVRTC. Without a GPU or NVRTC it says
 * why and exits 77; exits 1 when a call fails or a metric is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/video_pipeline.c \
 *      build/make/libcuweave.so -o video_pipeline
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

enum {
    W = 1920,
    H = 1080,
    PIXELS = W * H, /* one 8-bit picture */
    FRAMES = 24,
    SHOWN = 4 /* frames whose metric is printed */
};

static const char *k_source =
    "// 3x3 box blur, edges clamped; blockIdx.z picks the picture\n"
    "extern \"C\" __global__ void blur3(const unsigned char *src, unsigned char *dst, unsigned w, unsigned h) {\n"
    "    unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "    if (x >= w || y >= h) return;\n"
    "    unsigned long long base = (unsigned long long)blockIdx.z * w * h;\n"
    "    const unsigned char *s = src + base;\n"
    "    unsigned sum = 0;\n"
    "    for (int dy = -1; dy <= 1; dy++) {\n"
    "        int yy = min(max((int)y + dy, 0), (int)h - 1);\n"
    "        for (int dx = -1; dx <= 1; dx++) {\n"
    "            int xx = min(max((int)x + dx, 0), (int)w - 1);\n"
    "            sum += s[(unsigned)yy * w + (unsigned)xx];\n"
    "        }\n"
    "    }\n"
    "    dst[base + (unsigned long long)y * w + x] = (unsigned char)((sum + 4u) / 9u);\n"
    "}\n"
    "// *out += sum |a[i] - b[i]| (out zeroed before)\n"
    "extern \"C\" __global__ void sad(const unsigned char *a, const unsigned char *b, unsigned n,\n"
    "                                unsigned long long *out) {\n"
    "    unsigned long long acc = 0;\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
    "        int d = (int)a[i] - (int)b[i];\n"
    "        acc += (unsigned long long)(d < 0 ? -d : d);\n"
    "    }\n"
    "    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
    "    if ((threadIdx.x & 31u) == 0u) atomicAdd(out, acc);\n"
    "}\n";

/* ---- the pictures and the CPU reference ----------------------------------- */

/* Frame n: a moving gradient with a checkerboard as the reference; the
 * distorted one adds noise of up to +-12 (from a table, so that drawing stays
 * cheap) whose pattern moves every frame. */
static signed char g_noise[8192];

static void make_noise(void) {
    for (uint32_t i = 0; i < 8192; i++) {
        uint32_t h = (i + 1u) * 0x9E3779B1u;
        h ^= h >> 15;
        h *= 0x2C1B3C6Du;
        h ^= h >> 12;
        g_noise[i] = (signed char)((int)(h % 25u) - 12);
    }
}

static void make_frame(unsigned n, unsigned char *ref, unsigned char *dis) {
    for (unsigned y = 0; y < H; y++) {
        const unsigned yterm = y / 5u + n * 3u, ychk = ((y >> 6) ^ n) & 1u, nterm = y * 37u + n * 1031u;
        unsigned char *r = ref + (size_t)y * W, *d = dis + (size_t)y * W;
        for (unsigned x = 0; x < W; x++) {
            const unsigned v = ((x >> 3) + yterm + ((((x >> 6) & 1u) ^ ychk) * 48u)) & 255u;
            const int e = (int)v + g_noise[(x + nterm) & 8191u];
            r[x] = (unsigned char)v;
            d[x] = (unsigned char)(e < 0 ? 0 : e > 255 ? 255 : e);
        }
    }
}

static void blur_cpu(const unsigned char *s, unsigned char *d) {
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            unsigned sum = 0;
            for (int dy = -1; dy <= 1; dy++) {
                int yy = y + dy < 0 ? 0 : y + dy > H - 1 ? H - 1 : y + dy;
                for (int dx = -1; dx <= 1; dx++) {
                    int xx = x + dx < 0 ? 0 : x + dx > W - 1 ? W - 1 : x + dx;
                    sum += s[yy * W + xx];
                }
            }
            d[y * W + x] = (unsigned char)((sum + 4u) / 9u);
        }
    }
}

static uint64_t metric_cpu(unsigned n, unsigned char *scratch /* 4 pictures */) {
    unsigned char *ref = scratch, *dis = scratch + PIXELS, *br = scratch + 2 * PIXELS, *bd = scratch + 3 * PIXELS;
    make_frame(n, ref, dis);
    blur_cpu(ref, br);
    blur_cpu(dis, bd);
    uint64_t sum = 0;
    for (size_t i = 0; i < PIXELS; i++) sum += (uint64_t)(br[i] > bd[i] ? br[i] - bd[i] : bd[i] - br[i]);
    return sum;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the operators ---------------------------------------------------------- */

typedef struct shared {
    cw_kernel *blur, *sad, *fill;
    unsigned char *staging[2]; /* page-locked: ref then dis, one per picture stream */
    uint64_t *metric;          /* page-locked: one word per frame */
    unsigned frame_no[FRAMES]; /* the value each frame's messages carry */
    double done_ms[FRAMES];    /* when the sink had frame n's metric */
    double make_ms;            /* time the source spent drawing pictures */
} shared;

#define OP_TRY(expr)                          \
    do {                                      \
        cw_status st_ = (expr);               \
        if (st_ != CW_SUCCESS) return st_;    \
    } while (0)

static cw_status source_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_io_info io_info = {0};
    OP_TRY(cw_io_get_info(io, &io_info));
    uint64_t it = io_info.iteration;
    if (it >= FRAMES) return CW_ERROR_INVALID_STATE;
    unsigned n = (unsigned)it;
    cw_stream *ps;
    OP_TRY(cw_io_get_stream(io, n % 2 ? "pic1" : "pic0", &ps));
    /* The staging memory of this stream was last read by the upload of frame
     * n-2, on this stream: let that finish before drawing over it. */
    OP_TRY(cw_stream_synchronize(ps));
    unsigned char *stage = sh->staging[n % 2];
    double t0 = now_ms();
    make_frame(n, stage, stage + PIXELS);
    sh->make_ms += now_ms() - t0;
    /* One buffer for both pictures, allocated on the picture's stream (not
     * cw_io_alloc: that one allocates on the internal stream). */
    cw_buffer *b = NULL;
    OP_TRY(cw_buffer_create(&b, ps, 2 * (size_t)PIXELS));
    cw_devptr d;
    cw_status st = cw_buffer_get_writable(b, &d);
    if (st == CW_SUCCESS) st = cw_copy_to_device(ps, d, stage, 2 * (size_t)PIXELS);
    if (st == CW_SUCCESS) st = cw_io_set_output_stream(io, "frames", ps);
    if (st == CW_SUCCESS) st = cw_io_emit(io, "frames", &sh->frame_no[n], b);
    /* the message holds its own reference; the pipeline records ps as a use */
    cw_buffer_destroy(&b);
    return st;
}

static cw_status blur_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_message m;
    OP_TRY(cw_io_receive(io, "in", &m));
    if (!m.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, "in", &s)); /* waits for the upload on the GPU */
    cw_buffer *o;
    OP_TRY(cw_io_alloc(&o, io, 2 * (size_t)PIXELS));
    cw_devptr src, dst;
    OP_TRY(cw_buffer_get_ptr(m.buffer, &src));
    OP_TRY(cw_buffer_get_writable(o, &dst));
    unsigned w = W, h = H;
    void *args[] = {&src, &dst, &w, &h};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.block[0] = 32;
    lc.block[1] = 8;
    lc.grid[0] = (W + 31) / 32;
    lc.grid[1] = (H + 7) / 8;
    lc.grid[2] = 2; /* reference, distorted */
    OP_TRY(cw_kernel_launch(sh->blur, s, &lc, args));
    return cw_io_emit(io, "out", m.value, o);
}

static cw_status sad_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_message m;
    OP_TRY(cw_io_receive(io, "in", &m));
    if (!m.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, "in", &s));
    cw_buffer *o;
    OP_TRY(cw_io_alloc(&o, io, sizeof(uint64_t)));
    cw_devptr pics, out;
    OP_TRY(cw_buffer_get_ptr(m.buffer, &pics));
    OP_TRY(cw_buffer_get_writable(o, &out));
    /* zero the word: fill(uint32_t *dst, uint32_t value, uint64_t count) */
    unsigned zero = 0;
    uint64_t words = 2;
    void *fill_args[] = {&out, &zero, &words};
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    lc.block[0] = 32;
    OP_TRY(cw_kernel_launch(sh->fill, s, &lc, fill_args));
    cw_devptr dis = pics + PIXELS;
    unsigned n = PIXELS;
    void *args[] = {&pics, &dis, &n, &out};
    lc.grid[0] = 264; /* a couple of waves on most GPUs; the loop covers the rest */
    lc.block[0] = 256;
    OP_TRY(cw_kernel_launch(sh->sad, s, &lc, args));
    return cw_io_emit(io, "out", m.value, o);
}

static cw_status sink_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_message m;
    OP_TRY(cw_io_receive(io, "in", &m));
    if (!m.buffer || !m.value) return CW_ERROR_INVALID_STATE;
    unsigned n = *(const unsigned *)m.value;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, "in", &s)); /* behind the sad kernel */
    cw_devptr word;
    OP_TRY(cw_buffer_get_ptr(m.buffer, &word));
    OP_TRY(cw_copy_to_host(s, &sh->metric[n], word, sizeof(uint64_t)));
    OP_TRY(cw_stream_synchronize(s));
    sh->done_ms[n] = now_ms();
    if (n < SHOWN) printf("frame %u: SAD of the blurred pictures %llu\n", n, (unsigned long long)sh->metric[n]);
    return CW_SUCCESS;
}

static cw_status add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                        const char *in, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    OP_TRY(cw_operator_create(&op, name, &ops, user, NULL));
    cw_status st = CW_SUCCESS;
    if (in) st = cw_operator_add_input(op, in, NULL);
    if (st == CW_SUCCESS && out) st = cw_operator_add_output(op, out, NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_add(p, op);
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
}

int main(void) {
    printf("video_pipeline: source -> blur -> sad -> sink, %d frames of %dx%d (reference + distorted)\n", FRAMES, W,
           H);
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "video_pipeline: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_program *prog = NULL;
    cw_module *mod = NULL;
    cw_pipeline *p = NULL;
    unsigned char *scratch = NULL;
    shared sh;
    memset(&sh, 0, sizeof sh);
    for (unsigned i = 0; i < FRAMES; i++) sh.frame_no[i] = i;
    make_noise();
#define TRY(expr)                                                              \
    do {                                                                       \
        if ((expr) != CW_SUCCESS) {                                            \
            fprintf(stderr, "video_pipeline: %s\n", cw_last_error()->message);  \
            if (cw_last_error()->status == CW_ERROR_COMPILE)                   \
                fprintf(stderr, "%s", cw_jit_get_compile_log());                       \
            goto out;                                                          \
        }                                                                      \
    } while (0)

    TRY(cw_context_create(&ctx, 0));
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "video_pipeline.cu";
    TRY(cw_program_compile(&prog, ctx, k_source, &ps));
    TRY(cw_module_load(&mod, prog));
    TRY(cw_module_get_kernel(mod, "blur3", &sh.blur));
    TRY(cw_module_get_kernel(mod, "sad", &sh.sad));
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &sh.fill));
    TRY(cw_kernel_preload(sh.blur, ctx));
    TRY(cw_kernel_preload(sh.sad, ctx));
    TRY(cw_kernel_preload(sh.fill, ctx));
    TRY(cw_host_alloc((void **)&sh.staging[0], ctx, 2 * (size_t)PIXELS));
    TRY(cw_host_alloc((void **)&sh.staging[1], ctx, 2 * (size_t)PIXELS));
    TRY(cw_host_alloc((void **)&sh.metric, ctx, FRAMES * sizeof(uint64_t)));

    TRY(cw_pipeline_create(&p, ctx, NULL));
    TRY(add_op(p, "source", source_compute, &sh, NULL, "frames"));
    TRY(add_op(p, "blur", blur_compute, &sh, "in", "out"));
    TRY(add_op(p, "sad", sad_compute, &sh, "in", "out"));
    TRY(add_op(p, "sink", sink_compute, &sh, "in", NULL));
    TRY(cw_pipeline_connect(p, "source", "frames", "blur", "in"));
    TRY(cw_pipeline_connect(p, "blur", "out", "sad", "in"));
    TRY(cw_pipeline_connect(p, "sad", "out", "sink", "in"));

    const double t0 = now_ms();
    TRY(cw_pipeline_run(p, FRAMES));
    const double total = now_ms() - t0;
    printf("%d frames in %.1f ms: %.2f ms per frame (%.2f ms per frame after the first), of which %.2f ms drawing "
           "the pictures on the CPU\n",
           FRAMES, total, total / FRAMES, (sh.done_ms[FRAMES - 1] - sh.done_ms[0]) / (FRAMES - 1),
           sh.make_ms / FRAMES);

    /* the same metric on the CPU */
    scratch = malloc(4 * (size_t)PIXELS);
    if (!scratch) {
        fprintf(stderr, "video_pipeline: out of memory\n");
        goto out;
    }
    int bad = 0;
    for (unsigned n = 0; n < FRAMES; n++) {
        uint64_t want = metric_cpu(n, scratch);
        if (sh.metric[n] != want) {
            fprintf(stderr, "video_pipeline: frame %u: GPU %llu, CPU %llu\n", n, (unsigned long long)sh.metric[n],
                    (unsigned long long)want);
            bad++;
        } else if (n < SHOWN) {
            printf("frame %u: the CPU finds %llu too\n", n, (unsigned long long)want);
        }
    }
    ok = bad == 0;
    printf("metric of every frame equal to the CPU's: %s\n", ok ? "yes" : "NO");

out:
    /* the sink synchronized each frame's last stream; after a failure, wait */
    if (!ok && ctx) cw_context_synchronize(ctx);
    cw_pipeline_destroy(&p);
    free(scratch);
    cw_host_free(ctx, (void **)&sh.staging[0]);
    cw_host_free(ctx, (void **)&sh.staging[1]);
    cw_host_free(ctx, (void **)&sh.metric);
    cw_module_destroy(&mod);
    cw_program_destroy(&prog);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
