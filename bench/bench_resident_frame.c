/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_resident_frame: a 4-stage frame pipeline served per request, in
 * seven styles, in one run on device 0, at 1920x1080 and at 576x324 (issue
 * 39). The frame is 8-bit luma in device memory (four random frames,
 * rotated: request n reads frame n % 4):
 *
 *   S1 3x3 box blur (edges clamped) into blur[n % 3]
 *   S2 256-bin histogram of the blur
 *   S3 threshold at the histogram's median (needs the whole histogram),
 *      and a count of the blurred pixels above it
 *   S4 SAD of the blur against the previous request's blur
 *   then the result (count, SAD, request number) lands in pinned host
 *   memory, and the accumulators are reset for the next request.
 *
 * The same stage code (band functions: a band is `rows` rows of the frame)
 * in every style:
 *   a) cuweave fused, tile dataflow (CW_FUSED_DATAFLOW): a band a tile, S2
 *      and S4 read their band of S1, S3 reads all of S2, the result reads
 *      all of S3 and S4; S4 also reads the previous request's band of S1
 *   b) cuweave fused, barrier mode: the stages grid-stride over the bands,
 *      a grid barrier between them
 *   c) a hand-written persistent cooperative kernel: block 0 polls a
 *      doorbell in mapped host memory, cooperative groups' grid sync
 *      between the stages (raw driver, NVRTC)
 *   d) the stages as five kernels (a band a block) in a graph:
 *      cuGraphLaunch + cuStreamSynchronize
 *   e) the same graph with programmatic dependent launch between its
 *      kernels (each waits for its predecessor with griddepcontrol.wait)
 *   f) the cuweave graph loop (cw_resident) with the five kernels as its
 *      workload
 *   g) a doorbell-only persistent kernel (no work: the PCIe floor)
 * Every result is checked against the CPU's (count and SAD per frame pair).
 * Host round trips (request made to result seen) p50 / p99 / p99.9 and the
 * GPU time per request (a, b, f: the loop's median from the GPU clock; c:
 * doorbell seen to result written; d, e: the first kernel's start to the
 * last kernel's end) are printed with the targets of issue 39.
 *
 * Also: the fused barrier's cost (b with 1 and with 5 empty stages on the
 * full grid: the difference per barrier, GPU clock), a) in a green
 * partition unloaded and with a hog filling the rest of the GPU, and
 * BENCH_FRAME_SOAK=N: N requests through a) at 576x324, every result
 * checked, host and device memory at the start and the end.
 *
 * BENCH_FRAME_PARTS (default "styles,barrier,partition") picks the parts.
 * BENCH_ITERS (default 5000) round trips per style and size after 500
 * warm-up ones; BENCH_FRAME_ROWS_1080 / _324 rows a band (default 8 / 4);
 * BENCH_FRAME_GRID blocks of a), b) and c) (default a block a band: every
 * band of a stage at once); BENCH_FRAME_A_MUL times as many for a)
 * (default 1). Prints a block for docs/benchmarks.md.
 */
#define _GNU_SOURCE
#include <stddef.h>

#define BENCH_NAME "bench_resident_frame"
#include "../tests/rawcuda.h"
#include "../tests/kernels/test_kernels_fatbin.h"
#include "bench_common.h"

typedef unsigned long long dptr;

#define NFRAMES 4
#define BLOCK 256
#define RING 1024u
#define WARMUP 500
#define HOG_THREADS 256
#define HOG_NS 20000000LL
#define LOOP_SMS 64 /* the partition of the loaded run */

static rawcuda rc;
static unsigned long long g_checked, g_wrong;

/* The stages' memory (device memory, the bench's layout, the same in every
 * style) and the result (mapped pinned host memory). */
typedef struct fr_res {
    unsigned long long seq, count, sad, t0, t1, pad[3];
} fr_res;
typedef struct fr_dev {
    dptr frames, blur, hist, count, sad, res, n, gstart;
    unsigned W, H, rows, tiles;
} fr_dev;

static const char kFrame[] =
    "#include \"cuweave/resident_device.h\"\n"
    "typedef unsigned char u8;\n"
    "typedef unsigned long long u64;\n"
    "struct fr_res { u64 seq, count, sad, t0, t1, pad[3]; };\n"
    "struct fr { const u8 *frames; u8 *blur; unsigned *hist; u64 *count, *sad; fr_res *res; u64 *n, *gstart;\n"
    "            unsigned W, H, rows, tiles; };\n"
    "static __device__ __forceinline__ u64 gnow(void) { u64 t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); return t; }\n"
    /* The band functions work on 32-bit words (W is a multiple of 4): four
     * pixels a thread at a time, byte SIMD where it applies. */
    "static __device__ __forceinline__ unsigned byte_of(unsigned w, unsigned i) { return (w >> (8u * i)) & 0xffu; }\n"
    /* S1: the band's rows of the blur of frame seq % 4 into blur[seq % 3]:
     * column sums of three rows, then three of them a pixel */
    "static __device__ void blur_band(const fr *u, u64 seq, unsigned band) {\n"
    "    const unsigned W = u->W, H = u->H, WW = W / 4u;\n"
    "    const unsigned *__restrict__ in = (const unsigned *)(u->frames + (size_t)(seq % 4ull) * W * H);\n"
    "    unsigned *__restrict__ out = (unsigned *)(u->blur + (size_t)(seq % 3ull) * W * H);\n"
    "    const unsigned y0 = band * u->rows, y1 = y0 + u->rows < H ? y0 + u->rows : H;\n"
    "#pragma unroll 2\n"
    "    for (unsigned i = threadIdx.x; i < (y1 - y0) * WW; i += blockDim.x) {\n"
    "        const unsigned y = y0 + i / WW, x = i % WW;\n"
    "        const unsigned ya = y ? y - 1u : 0u, yb = y + 1u < H ? y + 1u : y;\n"
    "        unsigned c[6];\n"
    "        for (unsigned k = 0; k < 6; k++) c[k] = 0u;\n"
    "        const unsigned rows3[3] = {ya, y, yb};\n"
    "        for (unsigned r = 0; r < 3; r++) {\n"
    "            const unsigned *row = in + (size_t)rows3[r] * WW;\n"
    "            const unsigned w = row[x];\n"
    "            const unsigned l = x ? byte_of(row[x - 1u], 3u) : byte_of(w, 0u);\n"
    "            const unsigned h = x + 1u < WW ? byte_of(row[x + 1u], 0u) : byte_of(w, 3u);\n"
    "            c[0] += l; c[1] += byte_of(w, 0u); c[2] += byte_of(w, 1u); c[3] += byte_of(w, 2u); c[4] += byte_of(w, 3u); c[5] += h;\n"
    "        }\n"
    "        unsigned o = 0u;\n"
    "        for (unsigned k = 0; k < 4; k++) o |= (((c[k] + c[k + 1] + c[k + 2]) * 7282u) >> 16) << (8u * k);\n"
    "        out[(size_t)y * WW + x] = o;\n"
    "    }\n"
    "}\n"
    /* S2: the band's histogram: one in shared memory a warp, summed into the frame's */
    "static __device__ void hist_band(const fr *u, u64 seq, unsigned band) {\n"
    "    __shared__ unsigned sh[8][256];\n"
    "    const unsigned W = u->W, H = u->H, WW = W / 4u;\n"
    "    const unsigned *__restrict__ b = (const unsigned *)(u->blur + (size_t)(seq % 3ull) * W * H);\n"
    "    const unsigned wp = (threadIdx.x / 32u) & 7u;\n"
    "    for (unsigned k = threadIdx.x; k < 8u * 256u; k += blockDim.x) (&sh[0][0])[k] = 0u;\n"
    "    __syncthreads();\n"
    "    const unsigned y0 = band * u->rows, y1 = y0 + u->rows < H ? y0 + u->rows : H;\n"
    "#pragma unroll 4\n"
    "    for (unsigned i = threadIdx.x; i < (y1 - y0) * WW; i += blockDim.x) {\n"
    "        const unsigned w = b[(size_t)y0 * WW + i];\n"
    "        atomicAdd(&sh[wp][w & 0xffu], 1u); atomicAdd(&sh[wp][(w >> 8) & 0xffu], 1u);\n"
    "        atomicAdd(&sh[wp][(w >> 16) & 0xffu], 1u); atomicAdd(&sh[wp][w >> 24], 1u);\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (unsigned k = threadIdx.x; k < 256u; k += blockDim.x) {\n"
    "        unsigned n = 0u;\n"
    "        for (unsigned q = 0; q < 8u; q++) n += sh[q][k];\n"
    "        if (n) atomicAdd(&u->hist[k], n);\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    /* a block's sum (every thread calls it; the result in thread 0) */
    "static __device__ __forceinline__ u64 block_sum(u64 v) {\n"
    "    __shared__ u64 part[32];\n"
    "    for (unsigned o = 16u; o > 0u; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
    "    if ((threadIdx.x & 31u) == 0u) part[threadIdx.x / 32u] = v;\n"
    "    __syncthreads();\n"
    "    u64 t = 0ull;\n"
    "    if (threadIdx.x == 0u) for (unsigned w = 0; w < (blockDim.x + 31u) / 32u; w++) t += part[w];\n"
    "    __syncthreads();\n"
    "    return t;\n"
    "}\n"
    /* S3: the median from the whole histogram (a warp scan a 32 bins), the band's pixels above it counted */
    "static __device__ void thresh_band(const fr *u, u64 seq, unsigned band) {\n"
    "    __shared__ unsigned wsum[8], thr;\n"
    "    const unsigned W = u->W, H = u->H, WW = W / 4u;\n"
    "    const unsigned k = threadIdx.x, lane = k & 31u, wp = k / 32u;\n"
    "    unsigned v = k < 256u ? *(volatile unsigned *)&u->hist[k] : 0u;\n"
    "    for (unsigned o = 1u; o < 32u; o <<= 1) { const unsigned n = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += n; }\n"
    "    if (lane == 31u && wp < 8u) wsum[wp] = v;\n"
    "    __syncthreads();\n"
    "    unsigned before = 0u;\n"
    "    for (unsigned q = 0; q < wp && q < 8u; q++) before += wsum[q];\n"
    "    const unsigned cum = v + before;\n"
    "    const unsigned half = (W * H + 1u) / 2u;\n"
    "    const unsigned prev = __shfl_up_sync(0xffffffffu, cum, 1);\n"
    "    const unsigned prev_cum = lane ? prev : before;\n"
    "    if (k < 256u && cum >= half && (k == 0u || prev_cum < half)) thr = k;\n"
    "    __syncthreads();\n"
    "    const unsigned t4 = thr * 0x01010101u;\n"
    "    const unsigned *__restrict__ b = (const unsigned *)(u->blur + (size_t)(seq % 3ull) * W * H);\n"
    "    const unsigned y0 = band * u->rows, y1 = y0 + u->rows < H ? y0 + u->rows : H;\n"
    "    unsigned c = 0u;\n"
    "#pragma unroll 4\n"
    "    for (unsigned i = threadIdx.x; i < (y1 - y0) * WW; i += blockDim.x)\n"
    "        c += __popc(__vcmpgtu4(b[(size_t)y0 * WW + i], t4)) >> 3;\n"
    "    const u64 n = block_sum((u64)c);\n"
    "    if (threadIdx.x == 0u) atomicAdd(u->count, n);\n"
    "}\n"
    /* S4: the band's SAD against the previous request's blur */
    "static __device__ void sad_band(const fr *u, u64 seq, unsigned band) {\n"
    "    const unsigned W = u->W, H = u->H, WW = W / 4u;\n"
    "    const unsigned *__restrict__ a = (const unsigned *)(u->blur + (size_t)(seq % 3ull) * W * H);\n"
    "    const unsigned *__restrict__ p = (const unsigned *)(u->blur + (size_t)((seq + 2ull) % 3ull) * W * H);\n"
    "    const unsigned y0 = band * u->rows, y1 = y0 + u->rows < H ? y0 + u->rows : H;\n"
    "    unsigned s = 0u;\n"
    "#pragma unroll 4\n"
    "    for (unsigned i = threadIdx.x; i < (y1 - y0) * WW; i += blockDim.x) {\n"
    "        const size_t at = (size_t)y0 * WW + i;\n"
    "        s += __vsadu4(a[at], p[at]);\n"
    "    }\n"
    "    const u64 n = block_sum((u64)s);\n"
    "    if (threadIdx.x == 0u) atomicAdd(u->sad, n);\n"
    "}\n"
    /* the result into host memory (its number last), then the accumulators reset (one block) */
    "static __device__ void result(const fr *u, u64 seq, u64 t0, unsigned sys) {\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) {\n"
    "        volatile fr_res *r = u->res + (seq % 1024ull);\n"
    "        r->count = *(volatile u64 *)u->count;\n"
    "        r->sad = *(volatile u64 *)u->sad;\n"
    "        r->t0 = t0;\n"
    "        r->t1 = gnow();\n"
    "        if (sys) __threadfence_system();\n"
    "        r->seq = seq;\n"
    "        *u->count = 0ull;\n"
    "        *u->sad = 0ull;\n"
    "    }\n"
    "    for (unsigned k = threadIdx.x; k < 256u; k += blockDim.x) u->hist[k] = 0u;\n"
    "}\n"
    "/* a) dataflow stages */\n"
    "extern \"C\" __device__ void a_blur(const cw_fused_tile *t, void *u) { blur_band((const fr *)u, t->seq, t->tile); }\n"
    "extern \"C\" __device__ void a_hist(const cw_fused_tile *t, void *u) { hist_band((const fr *)u, t->seq, t->tile); }\n"
    "extern \"C\" __device__ void a_thresh(const cw_fused_tile *t, void *u) { thresh_band((const fr *)u, t->seq, t->tile); }\n"
    "extern \"C\" __device__ void a_sad(const cw_fused_tile *t, void *u) { sad_band((const fr *)u, t->seq, t->tile); }\n"
    "extern \"C\" __device__ void a_result(const cw_fused_tile *t, void *u) { result((const fr *)u, t->seq, 0ull, 0u); }\n"
    "extern \"C\" __device__ void a_empty(const cw_fused_tile *t, void *u) { (void)t; (void)u; }\n"
    /* b) barrier stages: the grid strides over the bands */
    "#define BSTAGE(name, fn) extern \"C\" __device__ void name(cw_resident_ctl *c, void *u) { \\\n"
    "    const fr *f = (const fr *)u; const u64 seq = cw_resident_sequence(c); \\\n"
    "    for (unsigned band = blockIdx.x; band < f->tiles; band += gridDim.x) fn(f, seq, band); }\n"
    "BSTAGE(b_blur, blur_band)\nBSTAGE(b_hist, hist_band)\nBSTAGE(b_thresh, thresh_band)\nBSTAGE(b_sad, sad_band)\n"
    "extern \"C\" __device__ void b_result(cw_resident_ctl *c, void *u) { if (blockIdx.x == 0) result((const fr *)u, cw_resident_sequence(c), 0ull, 0u); }\n"
    "extern \"C\" __device__ void b_empty(cw_resident_ctl *c, void *u) { (void)c; (void)u; }\n"
    /* d), e): graph kernels (a band a block); the request's number is the
     * GPU's own count (the result kernel moves it on) */
    "static __device__ __forceinline__ void pdl(void) {\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "#endif\n"
    "}\n"
    "extern \"C\" __global__ void g_blur(fr *u) { pdl(); if (threadIdx.x == 0) atomicMin(u->gstart, gnow()); blur_band(u, *(volatile u64 *)u->n, blockIdx.x); }\n"
    "extern \"C\" __global__ void g_hist(fr *u) { pdl(); hist_band(u, *(volatile u64 *)u->n, blockIdx.x); }\n"
    "extern \"C\" __global__ void g_thresh(fr *u) { pdl(); thresh_band(u, *(volatile u64 *)u->n, blockIdx.x); }\n"
    "extern \"C\" __global__ void g_sad(fr *u) { pdl(); sad_band(u, *(volatile u64 *)u->n, blockIdx.x); }\n"
    "extern \"C\" __global__ void g_result(fr *u) { pdl(); const u64 seq = *(volatile u64 *)u->n;\n"
    "    result(u, seq, *(volatile u64 *)u->gstart, 0u); __syncthreads();\n"
    "    if (threadIdx.x == 0) { *u->n = seq + 1ull; *u->gstart = ~0ull; } }\n"
    /* f): the graph loop's kernels */
    "#define LK(name, fn) extern \"C\" __global__ void name(cw_resident_ctl *c, fr *u) { \\\n"
    "    if (cw_resident_skip(c)) return; fn(u, cw_resident_sequence(c), blockIdx.x); }\n"
    "LK(l_blur, blur_band)\nLK(l_hist, hist_band)\nLK(l_thresh, thresh_band)\nLK(l_sad, sad_band)\n"
    "extern \"C\" __global__ void l_result(cw_resident_ctl *c, fr *u) { if (cw_resident_skip(c)) return; result(u, cw_resident_sequence(c), 0ull, 0u); }\n";

/* c) and g): the hand-written persistent kernels (raw driver). */
static const char kHand[] =
    "#include <cooperative_groups.h>\n"
    "namespace cg = cooperative_groups;\n"
    "typedef unsigned char u8;\n"
    "typedef unsigned long long u64;\n"
    "struct fr_res { u64 seq, count, sad, t0, t1, pad[3]; };\n"
    "struct fr { const u8 *frames; u8 *blur; unsigned *hist; u64 *count, *sad; fr_res *res; u64 *n, *gstart;\n"
    "            unsigned W, H, rows, tiles; };\n"
    "BAND_FUNCTIONS\n"
    "extern \"C\" __global__ void hand_loop(volatile u64 *bell, volatile unsigned *stop, volatile u64 *done, fr *u) {\n"
    "    cg::grid_group g = cg::this_grid();\n"
    "    __shared__ u64 s_seq;\n"
    "    __shared__ unsigned s_go;\n"
    "    u64 taken = 0ull, t0 = 0ull;\n"
    "    for (;;) {\n"
    "        if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "            unsigned go = 0u;\n"
    "            for (;;) { if (*stop) break; if (*bell > taken) { taken++; go = 1u; break; } }\n"
    "            t0 = gnow();\n"
    "            u->gstart[1] = go ? taken : 0ull; /* the decision, for the other blocks */\n"
    "        }\n"
    "        g.sync();\n"
    "        if (threadIdx.x == 0) { s_seq = *(volatile u64 *)&u->gstart[1]; s_go = s_seq != 0ull; }\n"
    "        __syncthreads();\n"
    "        if (!s_go) break;\n"
    "        const u64 seq = s_seq;\n"
    "        for (unsigned b = blockIdx.x; b < u->tiles; b += gridDim.x) blur_band(u, seq, b);\n"
    "        g.sync();\n"
    "        for (unsigned b = blockIdx.x; b < u->tiles; b += gridDim.x) hist_band(u, seq, b);\n"
    "        g.sync();\n"
    "        for (unsigned b = blockIdx.x; b < u->tiles; b += gridDim.x) thresh_band(u, seq, b);\n"
    "        g.sync();\n"
    "        for (unsigned b = blockIdx.x; b < u->tiles; b += gridDim.x) sad_band(u, seq, b);\n"
    "        g.sync();\n"
    "        if (blockIdx.x == 0) {\n"
    "            result(u, seq, t0, 1u);\n"
    "            __syncthreads();\n"
    "            if (threadIdx.x == 0) { __threadfence_system(); *done = seq; }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void floor_loop(volatile u64 *bell, volatile unsigned *stop, volatile u64 *done) {\n"
    "    if (threadIdx.x != 0) return;\n"
    "    u64 taken = 0ull;\n"
    "    for (;;) {\n"
    "        if (*stop) return;\n"
    "        if (*bell > taken) { taken++; __threadfence_system(); *done = taken; }\n"
    "    }\n"
    "}\n";

/* ---- the CPU's answers ---- */

typedef struct frame_set {
    unsigned W, H, rows, tiles;
    unsigned char *frames; /* NFRAMES of W * H */
    unsigned long long count[NFRAMES], sad[NFRAMES], sad_first[NFRAMES];
} frame_set;

static void cpu_blur(const unsigned char *in, unsigned char *out, unsigned W, unsigned H) {
    for (unsigned y = 0; y < H; y++)
        for (unsigned x = 0; x < W; x++) {
            unsigned s = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int yy = (int)y + dy, xx = (int)x + dx;
                    yy = yy < 0 ? 0 : yy >= (int)H ? (int)H - 1 : yy;
                    xx = xx < 0 ? 0 : xx >= (int)W ? (int)W - 1 : xx;
                    s += in[(size_t)yy * W + (size_t)xx];
                }
            out[(size_t)y * W + x] = (unsigned char)(s / 9u);
        }
}

static void make_frames(frame_set *fs, unsigned W, unsigned H, unsigned rows) {
    fs->W = W;
    fs->H = H;
    fs->rows = rows;
    fs->tiles = (H + rows - 1) / rows;
    const size_t px = (size_t)W * H;
    fs->frames = malloc(px * NFRAMES);
    unsigned char *blur = malloc(px * NFRAMES);
    if (!fs->frames || !blur) exit(1);
    uint64_t s = 0x2545f4914f6cdd1dull ^ (W * 31 + H);
    for (size_t i = 0; i < px * NFRAMES; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        fs->frames[i] = (unsigned char)(s >> 24);
    }
    for (int f = 0; f < NFRAMES; f++) {
        cpu_blur(fs->frames + px * f, blur + px * f, W, H);
        unsigned hist[256] = {0};
        for (size_t i = 0; i < px; i++) hist[blur[px * f + i]]++;
        unsigned cum = 0, thr = 0;
        const unsigned half = (unsigned)((px + 1) / 2);
        for (unsigned k = 0; k < 256; k++) {
            cum += hist[k];
            if (cum >= half) {
                thr = k;
                break;
            }
        }
        unsigned long long c = 0;
        for (size_t i = 0; i < px; i++) c += blur[px * f + i] > thr;
        fs->count[f] = c;
    }
    for (int f = 0; f < NFRAMES; f++) {
        const int p = (f + NFRAMES - 1) % NFRAMES;
        unsigned long long a = 0, z = 0;
        for (size_t i = 0; i < px; i++) {
            const int d = (int)blur[px * f + i] - (int)blur[px * p + i];
            a += (unsigned long long)(d < 0 ? -d : d);
            z += blur[px * f + i];
        }
        fs->sad[f] = a;
        fs->sad_first[f] = z; /* against the zeroed buffer */
    }
    free(blur);
}

/* The check of request seq's result (first: the first request since the
 * blur buffers were zeroed). */
static void check(const frame_set *fs, volatile fr_res *res, unsigned long long seq, int first, const char *who) {
    volatile fr_res *r = &res[seq % RING];
    const int f = (int)(seq % NFRAMES);
    const unsigned long long want_sad = first ? fs->sad_first[f] : fs->sad[f];
    g_checked++;
    if (r->seq != seq || r->count != fs->count[f] || r->sad != want_sad) {
        if (g_wrong++ < 10)
            fprintf(stderr, "%s: %s %ux%u request %llu: seq %llu count %llu (want %llu) sad %llu (want %llu)\n",
                    BENCH_NAME, who, fs->W, fs->H, seq, (unsigned long long)r->seq, (unsigned long long)r->count,
                    fs->count[f], (unsigned long long)r->sad, want_sad);
    }
}

/* ---- the GPU side of one frame size (in one context) ---- */

typedef struct frame_gpu {
    CUcontext cu;
    dptr user;        /* fr_dev */
    fr_dev d;
    fr_res *res;      /* host */
    size_t px;
} frame_gpu;

static void gpu_reset(frame_gpu *g) {
    CU_CHECK(rc.cuCtxSetCurrent(g->cu));
    CU_CHECK(rc.cuMemsetD32(g->d.blur, 0, g->px * 3 / 4 + 1));
    CU_CHECK(rc.cuMemsetD32(g->d.hist, 0, 256));
    CU_CHECK(rc.cuMemsetD32(g->d.count, 0, 4));
    unsigned long long one = 1, top = ~0ull;
    CU_CHECK(rc.cuMemcpyHtoD(g->d.n, &one, 8));
    CU_CHECK(rc.cuMemcpyHtoD(g->d.gstart, &top, 8));
    memset(g->res, 0, sizeof(fr_res) * RING);
}

static void gpu_make(frame_gpu *g, CUcontext cu, const frame_set *fs) {
    memset(g, 0, sizeof *g);
    g->cu = cu;
    g->px = (size_t)fs->W * fs->H;
    CU_CHECK(rc.cuCtxSetCurrent(cu));
    CU_CHECK(rc.cuMemAlloc(&g->d.frames, g->px * NFRAMES));
    CU_CHECK(rc.cuMemcpyHtoD(g->d.frames, fs->frames, g->px * NFRAMES));
    CU_CHECK(rc.cuMemAlloc(&g->d.blur, g->px * 3 + 16));
    CU_CHECK(rc.cuMemAlloc(&g->d.hist, 256 * 4));
    CU_CHECK(rc.cuMemAlloc(&g->d.count, 32)); /* count, sad, n, gstart[2] in one */
    g->d.sad = g->d.count + 8;
    g->d.n = g->d.count + 16;
    CU_CHECK(rc.cuMemAlloc(&g->d.gstart, 16));
    CU_CHECK(rc.cuMemHostAlloc((void **)&g->res, sizeof(fr_res) * RING, 0x1 | 0x2));
    CU_CHECK(rc.cuMemHostGetDevicePointer(&g->d.res, g->res, 0));
    g->d.W = fs->W;
    g->d.H = fs->H;
    g->d.rows = fs->rows;
    g->d.tiles = fs->tiles;
    CU_CHECK(rc.cuMemAlloc(&g->user, sizeof g->d));
    CU_CHECK(rc.cuMemcpyHtoD(g->user, &g->d, sizeof g->d));
    gpu_reset(g);
}

static void gpu_free(frame_gpu *g) {
    CU_CHECK(rc.cuCtxSetCurrent(g->cu));
    CU_CHECK(rc.cuMemFree(g->d.frames));
    CU_CHECK(rc.cuMemFree(g->d.blur));
    CU_CHECK(rc.cuMemFree(g->d.hist));
    CU_CHECK(rc.cuMemFree(g->d.count));
    CU_CHECK(rc.cuMemFree(g->d.gstart));
    CU_CHECK(rc.cuMemFree(g->user));
    CU_CHECK(rc.cuMemFreeHost(g->res));
}

/* ---- results ---- */

typedef struct result {
    int ran;
    stats st;
    double gpu_us;     /* GPU time per request, median */
    char why[160];     /* not run: why */
} result;

static result summarize(double *v, size_t n, double gpu_us) {
    result r;
    memset(&r, 0, sizeof r);
    r.ran = 1;
    r.st = stats_of(v, n);
    r.gpu_us = gpu_us;
    return r;
}

static double median_of(double *v, size_t n) { return stats_of(v, n).p50; }

/* a), b), f): one cuweave loop, n round trips after the warm-up; the
 * loop's own GPU median. */
static result run_loop(cw_resident *r, const frame_set *fs, frame_gpu *g, size_t iters, const char *who, double *v) {
    CW_CHECK(cw_resident_launch(r));
    uint64_t seq = 0, first = 0;
    for (size_t i = 0; i < WARMUP + iters; i++) {
        const unsigned long long t0 = now_ns();
        CW_CHECK(cw_resident_data_ready(r, &seq));
        cw_status st;
        while ((st = cw_resident_poll_result(r, seq)) == CW_ERROR_NOT_READY) {
        }
        CW_CHECK(st);
        const unsigned long long t1 = now_ns();
        if (i == 0) first = seq; /* the blur before it was zeroed (gpu_reset) */
        check(fs, g->res, seq, seq == first, who);
        if (i >= WARMUP) v[i - WARMUP] = (t1 - t0) / 1e3;
    }
    cw_resident_info info;
    CW_CHECK(cw_resident_get_info(r, &info));
    CW_CHECK(cw_resident_tear_down(r, 5000));
    return summarize(v, iters, info.iter_median_ns / 1e3);
}

static cw_resident *make_loop(cw_context *ctx, int spin) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.sleep_interval_us = spin ? 0 : s.sleep_interval_us;
    s.sync_with_host = 1;
    cw_resident *r = NULL;
    CW_CHECK(cw_resident_create(&r, ctx, &s));
    return r;
}

static cw_fused_stage g_df_stages[5];
static cw_fused_dep g_df_deps[6];
static void dataflow_desc(cw_resident_fused *f, const frame_set *fs, dptr user, unsigned grid) {
    memset(f, 0, sizeof *f);
    memset(g_df_stages, 0, sizeof g_df_stages);
    memset(g_df_deps, 0, sizeof g_df_deps);
    static const char *const names[5] = {"a_blur", "a_hist", "a_thresh", "a_sad", "a_result"};
    for (int i = 0; i < 5; i++) {
        g_df_stages[i].name = names[i];
        g_df_stages[i].tiles = fs->tiles;
    }
    g_df_stages[4].tiles = 1;
    g_df_deps[0] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME};               /* hist <- blur */
    g_df_deps[1] = (cw_fused_dep){.stage = 1, .read = CW_FUSED_READ_ALL};                /* thresh <- hist */
    g_df_deps[2] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME};               /* sad <- blur */
    g_df_deps[3] = (cw_fused_dep){.stage = 0, .read = CW_FUSED_READ_SAME, .previous = 1}; /* sad <- the last blur */
    g_df_deps[4] = (cw_fused_dep){.stage = 2, .read = CW_FUSED_READ_ALL};                /* result <- thresh */
    g_df_deps[5] = (cw_fused_dep){.stage = 3, .read = CW_FUSED_READ_ALL};                /* result <- sad */
    g_df_stages[1].deps = &g_df_deps[0];
    g_df_stages[1].dep_count = 1;
    g_df_stages[2].deps = &g_df_deps[1];
    g_df_stages[2].dep_count = 1;
    g_df_stages[3].deps = &g_df_deps[2];
    g_df_stages[3].dep_count = 2;
    g_df_stages[4].deps = &g_df_deps[4];
    g_df_stages[4].dep_count = 2;
    f->source = kFrame;
    f->mode = CW_FUSED_DATAFLOW;
    f->stage_defs = g_df_stages;
    f->stage_count = 5;
    f->user = user;
    f->grid_blocks = grid;
    f->block_threads = BLOCK;
}

static void barrier_desc(cw_resident_fused *f, dptr user, unsigned grid, unsigned empties) {
    static const char *const names[5] = {"b_blur", "b_hist", "b_thresh", "b_sad", "b_result"};
    static const char *const empty[5] = {"b_empty", "b_empty", "b_empty", "b_empty", "b_empty"};
    memset(f, 0, sizeof *f);
    f->source = kFrame;
    f->stages = empties ? empty : names;
    f->stage_count = empties ? empties : 5;
    f->user = user;
    f->grid_blocks = grid;
    f->block_threads = BLOCK;
}

/* f)'s workload: the five graph-loop kernels on the capture stream. */
typedef struct loop_work {
    void *fn[5];
    cw_devptr ctl;
    dptr user;
    unsigned tiles;
} loop_work;
static cw_status capture_loop(cw_stream *s, void *user) {
    loop_work *w = (loop_work *)user;
    CUstream cs = bench_cu_stream(s);
    for (int k = 0; k < 5; k++) {
        void *args[] = {&w->ctl, &w->user};
        if (rc.cuLaunchKernel(w->fn[k], k == 4 ? 1 : w->tiles, 1, 1, BLOCK, 1, 1, 0, cs, args, NULL) != 0)
            return CW_ERROR_DRIVER;
    }
    return CW_SUCCESS;
}

/* The raw launch-with-attributes types (cuda.h's CUlaunchConfig and
 * CUlaunchAttribute), for e)'s programmatic launches. */
typedef struct raw_attr {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int programmatic;
    } value;
} raw_attr;
typedef struct raw_config {
    unsigned gx, gy, gz, bx, by, bz, shared;
    CUstream stream;
    raw_attr *attrs;
    unsigned nattrs;
} raw_config;
typedef int (*launch_ex_fn)(const raw_config *, void *, void **, void **);

/* d) / e): the five kernels captured into a graph (pdl: programmatic edges). */
static void *make_graph(CUstream hs, void *const fn[5], dptr user, unsigned tiles, int pdl, launch_ex_fn ex) {
    void *graph = NULL, *exec = NULL;
    CU_CHECK(rc.cuStreamBeginCapture(hs, 2 /* relaxed */));
    for (int k = 0; k < 5; k++) {
        void *args[] = {&user};
        if (!pdl || k == 0) {
            CU_CHECK(rc.cuLaunchKernel(fn[k], k == 4 ? 1 : tiles, 1, 1, BLOCK, 1, 1, 0, hs, args, NULL));
        } else {
            raw_attr a;
            memset(&a, 0, sizeof a);
            a.id = 6; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
            a.value.programmatic = 1;
            raw_config c = {k == 4 ? 1 : tiles, 1, 1, BLOCK, 1, 1, 0, hs, &a, 1};
            CU_CHECK(ex(&c, fn[k], args, NULL));
        }
    }
    CU_CHECK(rc.cuStreamEndCapture(hs, &graph));
    CU_CHECK(rc.cuGraphInstantiateWithFlags(&exec, graph, 0));
    CU_CHECK(rc.cuGraphUpload(exec, hs));
    CU_CHECK(rc.cuStreamSynchronize(hs));
    CU_CHECK(rc.cuGraphDestroy(graph));
    return exec;
}

static result run_graph(void *exec, CUstream hs, const frame_set *fs, frame_gpu *g, size_t iters, const char *who,
                        double *v, double *gv) {
    gpu_reset(g);
    for (size_t i = 0; i < WARMUP + iters; i++) {
        const unsigned long long seq = i + 1;
        const unsigned long long t0 = now_ns();
        CU_CHECK(rc.cuGraphLaunch(exec, hs));
        CU_CHECK(rc.cuStreamSynchronize(hs));
        const unsigned long long t1 = now_ns();
        check(fs, g->res, seq, seq == 1, who);
        if (i >= WARMUP) {
            v[i - WARMUP] = (t1 - t0) / 1e3;
            gv[i - WARMUP] = (double)(g->res[seq % RING].t1 - g->res[seq % RING].t0) / 1e3;
        }
    }
    const double gmed = median_of(gv, iters);
    return summarize(v, iters, gmed);
}

/* c) / g): a hand-written persistent kernel; the doorbell, stop and done
 * words a line each in mapped host memory. */
typedef struct hand_words {
    volatile unsigned long long *bell, *done;
    volatile unsigned *stop;
    dptr bell_d, stop_d, done_d;
} hand_words;

static result run_hand(void *fn, int coop, unsigned grid, hand_words *w, CUstream hs, const frame_set *fs,
                       frame_gpu *g, size_t iters, const char *who, double *v, double *gv) {
    gpu_reset(g);
    *w->bell = 0;
    *w->done = 0;
    *w->stop = 0;
    __sync_synchronize();
    if (coop) {
        void *args[] = {&w->bell_d, &w->stop_d, &w->done_d, &g->user};
        CU_CHECK(rc.cuLaunchCooperativeKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, hs, args));
    } else {
        void *args[] = {&w->bell_d, &w->stop_d, &w->done_d};
        CU_CHECK(rc.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, hs, args, NULL));
    }
    for (size_t i = 0; i < WARMUP + iters; i++) {
        const unsigned long long seq = i + 1;
        const unsigned long long t0 = now_ns();
        __atomic_store_n(w->bell, seq, __ATOMIC_RELEASE);
        const unsigned long long tl = t0 + 5000000000ull;
        while (__atomic_load_n(w->done, __ATOMIC_ACQUIRE) != seq)
            if (now_ns() > tl) {
                fprintf(stderr, "%s: %s: request %llu not served within 5 s\n", BENCH_NAME, who, seq);
                exit(1);
            }
        const unsigned long long t1 = now_ns();
        if (coop) check(fs, g->res, seq, seq == 1, who);
        if (i >= WARMUP) {
            v[i - WARMUP] = (t1 - t0) / 1e3;
            gv[i - WARMUP] = coop ? (double)(g->res[seq % RING].t1 - g->res[seq % RING].t0) / 1e3 : 0.0;
        }
    }
    __atomic_store_n(w->stop, 1u, __ATOMIC_RELEASE);
    CU_CHECK(rc.cuStreamSynchronize(hs));
    return summarize(v, iters, median_of(gv, iters));
}

static unsigned env_u(const char *name, unsigned dflt) {
    const char *s = getenv(name);
    return s && *s ? (unsigned)strtoul(s, NULL, 10) : dflt;
}

static void print_row(const char *name, const result *r, const result *a) {
    if (!r->ran) {
        printf("| %s | - | - | - | - | - | %s |\n", name, r->why);
        return;
    }
    printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2fx |\n", name, r->st.p50, r->st.p99, r->st.p999, r->gpu_us,
           a && a->ran ? r->st.p50 / a->st.p50 : 0.0);
}

/* The fused barrier's cost on the full grid: b) with 1 and with 5 empty
 * stages, the loop's GPU median; (5 - 1) barriers between them. */
static double barrier_cost(cw_context *ctx, const frame_set *fs, frame_gpu *g, unsigned grid, double *v) {
    double med[2];
    const unsigned stages[2] = {1, 5};
    for (int k = 0; k < 2; k++) {
        cw_resident *r = make_loop(ctx, 1);
        cw_resident_fused f;
        barrier_desc(&f, g->user, grid, stages[k]);
        CW_CHECK(cw_resident_set_fused(r, &f));
        CW_CHECK(cw_resident_build(r));
        CW_CHECK(cw_resident_launch(r));
        uint64_t seq = 0;
        for (size_t i = 0; i < 3000; i++) {
            CW_CHECK(cw_resident_data_ready(r, &seq));
            while (cw_resident_poll_result(r, seq) == CW_ERROR_NOT_READY) {
            }
        }
        cw_resident_info info;
        CW_CHECK(cw_resident_get_info(r, &info));
        med[k] = info.iter_median_ns / 1e3;
        cw_resident_destroy(&r);
    }
    (void)fs;
    (void)v;
    printf("# barrier: %u blocks, GPU median per request with 1 empty stage %.2f us, with 5 %.2f us\n", grid, med[0],
           med[1]);
    /* the dataflow protocol's cost: stages of `grid` empty tiles, each tile
     * reading its tile of the stage before and the two beside it (1 and 5
     * stages; a neighbourhood is not chained, so each stage is its own
     * tasks) */
    double dmed[2];
    for (int k = 0; k < 2; k++) {
        cw_fused_stage st[5];
        cw_fused_dep dp[5];
        memset(st, 0, sizeof st);
        memset(dp, 0, sizeof dp);
        for (unsigned i = 0; i < stages[k]; i++) {
            st[i].name = "a_empty";
            st[i].tiles = grid;
            /* a stencil's neighbourhood: not chained (each stage its own tasks) */
            dp[i] = (cw_fused_dep){.stage = i ? i - 1 : 0, .read = CW_FUSED_READ_NEIGHBOURS, .radius = 1};
            if (i) {
                st[i].deps = &dp[i];
                st[i].dep_count = 1;
            }
        }
        cw_resident_fused f;
        memset(&f, 0, sizeof f);
        f.source = kFrame;
        f.mode = CW_FUSED_DATAFLOW;
        f.stage_defs = st;
        f.stage_count = stages[k];
        f.grid_blocks = grid;
        f.block_threads = BLOCK;
        cw_resident *r = make_loop(ctx, 1);
        CW_CHECK(cw_resident_set_fused(r, &f));
        CW_CHECK(cw_resident_build(r));
        CW_CHECK(cw_resident_launch(r));
        uint64_t seq = 0;
        for (size_t i = 0; i < 3000; i++) {
            CW_CHECK(cw_resident_data_ready(r, &seq));
            while (cw_resident_poll_result(r, seq) == CW_ERROR_NOT_READY) {
            }
        }
        cw_resident_info info;
        CW_CHECK(cw_resident_get_info(r, &info));
        dmed[k] = info.iter_median_ns / 1e3;
        cw_resident_destroy(&r);
    }
    printf("# dataflow: %u blocks, %u empty tiles a stage, each reading tiles t-1..t+1 of the stage before: GPU median per "
           "request with 1 stage %.2f us, with 5 %.2f us: %.2f us a stage\n",
           grid, grid, dmed[0], dmed[1], (dmed[1] - dmed[0]) / 4.0);
    return (med[1] - med[0]) / 4.0;
}

int main(void) {
    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int s = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (s) return s;
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench_watchdog(900);
    /* BENCH_FRAME_PARTS: which parts run (default all but the soak) */
    const char *parts = getenv("BENCH_FRAME_PARTS");
    if (!parts || !*parts) parts = "styles,barrier,partition";
    const int do_styles = strstr(parts, "styles") != NULL, do_barrier = strstr(parts, "barrier") != NULL,
              do_partition = strstr(parts, "partition") != NULL;
    launch_ex_fn launch_ex = NULL;
    *(void **)&launch_ex = dlsym(rc.lib, "cuLaunchKernelEx");
    const size_t iters = env_u("BENCH_ITERS", 5000);
    /* a) and b)'s grid: BENCH_FRAME_GRID, else a block a band (each size's) */
    const unsigned grid_env = env_u("BENCH_FRAME_GRID", 0);
    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    CUcontext cu = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cu));
    double *v = malloc(sizeof(double) * iters), *gv = malloc(sizeof(double) * iters);
    if (!v || !gv) return 1;

    /* the raw kernels: compiled with NVRTC (through cuweave's cache), loaded raw */
    cw_header hdr = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.headers = &hdr;
    ps.n_headers = 1;
    cw_program *prog = NULL;
    CW_CHECK(cw_program_compile(&prog, ctx, kFrame, &ps));
    cw_program_info pi;
    CW_CHECK(cw_program_get_info(prog, &pi));
    void *mod = NULL, *gk[5], *lk[5];
    static const char *const gnames[5] = {"g_blur", "g_hist", "g_thresh", "g_sad", "g_result"};
    static const char *const lnames[5] = {"l_blur", "l_hist", "l_thresh", "l_sad", "l_result"};
    CU_CHECK(rc.cuModuleLoadData(&mod, pi.code));
    for (int k = 0; k < 5; k++) {
        CU_CHECK(rc.cuModuleGetFunction(&gk[k], mod, gnames[k]));
        CU_CHECK(rc.cuModuleGetFunction(&lk[k], mod, lnames[k]));
    }
    cw_program_destroy(&prog);
    /* c)'s kernel: the band functions of kFrame (up to the dataflow
     * stages) spliced into kHand, with cooperative groups from the toolkit */
    void *hmod = NULL, *f_hand = NULL, *f_floor = NULL;
    char why_c[160] = "";
    {
        const char *cut = strstr(kFrame, "/* a) dataflow stages */");
        const char *from = strstr(kFrame, "static __device__ __forceinline__ u64 gnow");
        const char *mark = strstr(kHand, "BAND_FUNCTIONS");
        size_t n = strlen(kHand) + (size_t)(cut - from) + 1;
        char *src = malloc(n);
        if (!src) return 1;
        snprintf(src, n, "%.*s%.*s%s", (int)(mark - kHand), kHand, (int)(cut - from), from, mark + strlen("BAND_FUNCTIONS"));
        const char *cuda = getenv("CUDA_HOME");
        char inc[512], cccl[512];
        snprintf(inc, sizeof inc, "-I%s/include", cuda && *cuda ? cuda : "/usr/local/cuda");
        snprintf(cccl, sizeof cccl, "-I%s/include/cccl", cuda && *cuda ? cuda : "/usr/local/cuda");
        const char *opts[] = {inc, cccl};
        cw_program_settings hs;
        cw_program_settings_default(&hs);
        hs.options = opts;
        hs.n_options = 2;
        cw_program *hp = NULL;
        cw_status st = cw_program_compile(&hp, ctx, src, &hs);
        free(src);
        if (st != CW_SUCCESS) {
            snprintf(why_c, sizeof why_c, "not run: the hand-written kernel did not compile (%s)",
                     cw_last_error()->message);
        } else {
            CW_CHECK(cw_program_get_info(hp, &pi));
            CU_CHECK(rc.cuModuleLoadData(&hmod, pi.code));
            CU_CHECK(rc.cuModuleGetFunction(&f_hand, hmod, "hand_loop"));
            CU_CHECK(rc.cuModuleGetFunction(&f_floor, hmod, "floor_loop"));
            cw_program_destroy(&hp);
        }
    }
    CUstream hs = NULL;
    CU_CHECK(rc.cuStreamCreateWithPriority(&hs, 1, 0));
    void *hb = NULL;
    CU_CHECK(rc.cuMemHostAlloc(&hb, 4096, 0x1 | 0x2));
    memset(hb, 0, 4096);
    dptr hd = 0;
    CU_CHECK(rc.cuMemHostGetDevicePointer(&hd, hb, 0));
    hand_words hw = {(volatile unsigned long long *)hb, (volatile unsigned long long *)((char *)hb + 256),
                     (volatile unsigned *)((char *)hb + 128), hd, hd + 128, hd + 256};

    static const unsigned sizes[2][2] = {{1920, 1080}, {576, 324}};
    const unsigned rows[2] = {env_u("BENCH_FRAME_ROWS_1080", 8), env_u("BENCH_FRAME_ROWS_324", 4)};
    result all[2][7];
    double bar_us = 0;
    unsigned a_grid[2] = {0, 0}, b_grid[2] = {0, 0};
    frame_set fsets[2];
    memset(all, 0, sizeof all);
    for (int z = 0; z < 2; z++) {
        frame_set *fs = &fsets[z];
        make_frames(fs, sizes[z][0], sizes[z][1], rows[z]);
        if (!do_styles && !(do_barrier && z == 0)) continue;
        frame_gpu g;
        gpu_make(&g, cu, fs);
        memset(all[z], 0, sizeof all[z]);
        /* every module loads before any loop runs */
        cw_resident *ra = make_loop(ctx, 1), *rb = make_loop(ctx, 1), *rf = make_loop(ctx, 1);
        const unsigned grid = grid_env ? grid_env : fs->tiles;
        const unsigned a_blocks = env_u("BENCH_FRAME_A_MUL", 1) * grid;
        cw_resident_fused f;
        dataflow_desc(&f, fs, g.user, a_blocks);
        CW_CHECK(cw_resident_set_fused(ra, &f));
        CW_CHECK(cw_resident_build(ra));
        barrier_desc(&f, g.user, grid, 0);
        CW_CHECK(cw_resident_set_fused(rb, &f));
        CW_CHECK(cw_resident_build(rb));
        cw_resident_info ri;
        CW_CHECK(cw_resident_get_info(ra, &ri));
        a_grid[z] = ri.grid_blocks;
        CW_CHECK(cw_resident_get_info(rb, &ri));
        b_grid[z] = ri.grid_blocks;
        loop_work lw;
        memset(&lw, 0, sizeof lw);
        for (int k = 0; k < 5; k++) lw.fn[k] = lk[k];
        CW_CHECK(cw_resident_get_ctl(rf, &lw.ctl));
        lw.user = g.user;
        lw.tiles = fs->tiles;
        CW_CHECK(cw_resident_set_workload_fn(rf, capture_loop, &lw));
        CW_CHECK(cw_resident_build(rf));
        void *gd = make_graph(hs, gk, g.user, fs->tiles, 0, launch_ex);
        void *ge = launch_ex ? make_graph(hs, gk, g.user, fs->tiles, 1, launch_ex) : NULL;

        if (do_styles) {
        gpu_reset(&g);
        all[z][0] = run_loop(ra, fs, &g, iters, "a) dataflow", v);
        gpu_reset(&g);
        all[z][1] = run_loop(rb, fs, &g, iters, "b) barrier", v);
        if (f_hand) {
            /* the grid of a) and b) */
            all[z][2] = run_hand(f_hand, 1, grid, &hw, hs, fs, &g, iters, "c) hand-written", v, gv);
        } else {
            snprintf(all[z][2].why, sizeof all[z][2].why, "%s", why_c);
        }
        all[z][3] = run_graph(gd, hs, fs, &g, iters, "d) graph", v, gv);
        if (ge)
            all[z][4] = run_graph(ge, hs, fs, &g, iters, "e) graph + PDL", v, gv);
        else
            snprintf(all[z][4].why, sizeof all[z][4].why, "not run: the driver has no cuLaunchKernelEx");
        gpu_reset(&g);
        all[z][5] = run_loop(rf, fs, &g, iters, "f) graph loop", v);
        if (f_floor)
            all[z][6] = run_hand(f_floor, 0, 1, &hw, hs, fs, &g, iters, "g) doorbell only", v, gv);
        else
            snprintf(all[z][6].why, sizeof all[z][6].why, "%s", why_c);
        }
        cw_resident_destroy(&ra);
        cw_resident_destroy(&rb);
        cw_resident_destroy(&rf);
        if (z == 0 && do_barrier) bar_us = barrier_cost(ctx, fs, &g, (unsigned)info.sm_count, v);
        CU_CHECK(rc.cuCtxSetCurrent(cu));
        CU_CHECK(rc.cuGraphExecDestroy(gd));
        if (ge) CU_CHECK(rc.cuGraphExecDestroy(ge));
        gpu_free(&g);
    }

    /* a) in a green partition, unloaded and with the rest of the GPU full */
    result part_un = {0}, part_lo = {0};
    char part_skip[512] = "";
    {
        cw_partition_group *set = NULL;
        if (!do_partition) snprintf(part_skip, sizeof part_skip, "not asked for (BENCH_FRAME_PARTS)");
        else if (bench_partition_split(&info, LOOP_SMS, &set, part_skip, sizeof part_skip)) {
            cw_partition_group_info gi;
            cw_partition_info pinfo, linfo;
            CW_CHECK(cw_partition_group_get_info(set, &gi));
            CW_CHECK(cw_partition_group_get_partition(set, 0, &pinfo));
            CW_CHECK(cw_partition_group_get_partition(set, gi.default_index, &linfo));
            const CUcontext pcu = bench_cu_context(pinfo.context), lcu = bench_cu_context(linfo.context);
            frame_gpu g;
            gpu_make(&g, pcu, &fsets[0]);
            CU_CHECK(rc.cuCtxSetCurrent(lcu));
            void *hog_mod = NULL, *f_hog = NULL;
            dptr sink = 0;
            CU_CHECK(rawcuda_kernel(&rc, &hog_mod, cw_test_kernels_fatbin, "cw_hog", &f_hog));
            CU_CHECK(rc.cuMemAlloc(&sink, 64));
            CU_CHECK(rc.cuMemsetD32(sink, 0, 16));
            const unsigned hog_blocks = (unsigned)bench_hog_blocks_per_sm(&rc, f_hog, HOG_THREADS) * linfo.sm_count;
            cw_stream *hogs = NULL;
            CW_CHECK(cw_stream_create(&hogs, linfo.context, NULL));
            cw_resident *r = make_loop(pinfo.context, 1);
            cw_resident_fused f;
            dataflow_desc(&f, &fsets[0], g.user, 0);
            f.grid_blocks = pinfo.sm_count;
            CW_CHECK(cw_resident_set_fused(r, &f));
            CW_CHECK(cw_resident_build(r));
            gpu_reset(&g);
            part_un = run_loop(r, &fsets[0], &g, iters, "a) partition, unloaded", v);
            bench_hog hg;
            bench_hog_start(&hg, &rc, lcu, f_hog, sink, bench_cu_stream(hogs), hog_blocks, HOG_THREADS, HOG_NS, 3);
            gpu_reset(&g);
            part_lo = run_loop(r, &fsets[0], &g, iters, "a) partition, hog in the rest", v);
            bench_hog_stop(&hg);
            printf("# partition: the loop on %u SMs (%u blocks), the hog %u blocks on the other %u SMs\n",
                   pinfo.sm_count, pinfo.sm_count, hog_blocks, linfo.sm_count);
            cw_resident_destroy(&r);
            cw_stream_destroy(&hogs);
            CU_CHECK(rc.cuCtxSetCurrent(lcu));
            CU_CHECK(rc.cuMemFree(sink));
            CU_CHECK(rc.cuModuleUnload(hog_mod));
            gpu_free(&g);
            cw_partition_group_destroy(&set);
        }
    }

    /* the soak: BENCH_FRAME_SOAK requests through a) at 576x324 */
    const unsigned long long soak = env_u("BENCH_FRAME_SOAK", 0);
    if (soak) {
        frame_gpu g;
        gpu_make(&g, cu, &fsets[1]);
        cw_resident *r = make_loop(ctx, 1);
        cw_resident_fused f;
        dataflow_desc(&f, &fsets[1], g.user, grid_env ? grid_env : fsets[1].tiles);
        CW_CHECK(cw_resident_set_fused(r, &f));
        CW_CHECK(cw_resident_launch(r));
        size_t free0 = 0, free1 = 0, total = 0;
        rc_result (*meminfo)(size_t *, size_t *) = NULL;
        *(void **)&meminfo = dlsym(rc.lib, "cuMemGetInfo_v2");
        if (meminfo) CU_CHECK(meminfo(&free0, &total));
        long rss0 = 0, rss1 = 0;
        FILE *st = fopen("/proc/self/statm", "r");
        if (st) {
            long a;
            if (fscanf(st, "%ld %ld", &a, &rss0) != 2) rss0 = 0;
            fclose(st);
        }
        const unsigned long long wrong0 = g_wrong, t0 = now_ns();
        uint64_t seq = 0;
        for (unsigned long long i = 0; i < soak; i++) {
            CW_CHECK(cw_resident_data_ready(r, &seq));
            cw_status s2;
            while ((s2 = cw_resident_poll_result(r, seq)) == CW_ERROR_NOT_READY) {
            }
            CW_CHECK(s2);
            check(&fsets[1], g.res, seq, seq == 1, "soak");
            if (i % 1000000 == 999999) alarm(900);
        }
        const double secs = (now_ns() - t0) / 1e9;
        if (meminfo) CU_CHECK(meminfo(&free1, &total));
        st = fopen("/proc/self/statm", "r");
        if (st) {
            long a;
            if (fscanf(st, "%ld %ld", &a, &rss1) != 2) rss1 = 0;
            fclose(st);
        }
        printf("# soak: %llu requests through a) at 576x324 in %.1f s (%.2f us each), %llu wrong; resident set %ld -> "
               "%ld KiB; device free %zu -> %zu MiB\n",
               soak, secs, secs * 1e6 / (double)soak, g_wrong - wrong0, rss0 * 4, rss1 * 4, free0 >> 20, free1 >> 20);
        cw_resident_destroy(&r);
        gpu_free(&g);
    }

    printf("\n## bench_resident_frame, %s, %s, driver %d, commit %s\n", date, info.name, drv, commit);
    printf("%zu round trips a style after %d warm-up; a), b) and c) on %s blocks of %d threads; microseconds\n", iters,
           WARMUP, grid_env ? "BENCH_FRAME_GRID" : "a block a band's", BLOCK);
    static const char *const names[7] = {"a) cuweave fused, dataflow", "b) cuweave fused, barrier",
                                         "c) hand-written persistent (cg grid sync)", "d) graph: cuGraphLaunch + sync",
                                         "e) graph with PDL", "f) cuweave graph loop", "g) doorbell only (floor)"};
    for (int z = 0; z < 2 && do_styles; z++) {
        printf("\n%ux%u, %u rows a band (%u bands); a) %u blocks, b) %u blocks\n\n", fsets[z].W, fsets[z].H,
               fsets[z].rows, fsets[z].tiles, a_grid[z], b_grid[z]);
        printf("| style | p50 | p99 | p99.9 | GPU per request (median) | p50 / a)'s |\n|---|---|---|---|---|---|\n");
        for (int k = 0; k < 7; k++) print_row(names[k], &all[z][k], &all[z][0]);
        const result *a = &all[z][0], *c = &all[z][2], *d = &all[z][3], *e = &all[z][4];
        const double vs_d = d->st.p50 / a->st.p50, vs_c = c->ran ? c->st.p50 / a->st.p50 : 0,
                     vs_e = e->ran ? e->st.p50 / a->st.p50 : 0;
        const double need_d = z == 0 ? 1.7 : 2.5;
        printf("\n%s a) %.2fx faster than d) at p50 (target %.1fx)\n", pass(vs_d >= need_d), vs_d, need_d);
        printf("%s a) %.2fx faster than c) at p50 (target 1.3x)\n", pass(c->ran && vs_c >= 1.3), vs_c);
        printf("%s a) %.2fx faster than e) at p50 (target 1.2x)\n", pass(e->ran && vs_e >= 1.2), vs_e);
        printf("%s a)'s GPU time %.2f us, the graph's %.2f us (target: at most the graph's)\n",
               pass(a->gpu_us <= d->gpu_us), a->gpu_us, d->gpu_us);
        printf("%s a)'s p99 %.2fx its p50 (target at most 1.3x)\n", pass(a->st.p99 <= 1.3 * a->st.p50),
               a->st.p99 / a->st.p50);
    }
    if (do_barrier)
        printf("\n%s b)'s barrier: %.2f us at %d blocks (target at most 1 us; GPU clock, 5 empty stages against 1)\n",
               pass(bar_us <= 1.0), bar_us, info.sm_count);
    if (part_un.ran) {
        printf("%s a) in a %d-SM partition at 1920x1080: p99 %.2f us unloaded, %.2f us with a hog in the rest (%.2fx; "
               "target at most 1.5x); p50 %.2f / %.2f\n",
               pass(part_lo.st.p99 <= 1.5 * part_un.st.p99), LOOP_SMS, part_un.st.p99, part_lo.st.p99,
               part_lo.st.p99 / part_un.st.p99, part_un.st.p50, part_lo.st.p50);
    } else {
        printf("SKIP a) in a partition: %s\n", part_skip);
    }
    printf("\nresults checked: %llu, wrong: %llu\n", g_checked, g_wrong);
    CU_CHECK(rc.cuCtxSetCurrent(cu));
    if (hmod) CU_CHECK(rc.cuModuleUnload(hmod));
    CU_CHECK(rc.cuModuleUnload(mod));
    CU_CHECK(rc.cuStreamDestroy(hs));
    CU_CHECK(rc.cuMemFreeHost(hb));
    cw_context_destroy(&ctx);
    for (int z = 0; z < 2; z++) free(fsets[z].frames);
    free(v);
    free(gv);
    return g_wrong ? 1 : 0;
}
