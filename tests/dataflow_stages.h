/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The stages of tests/test_gpu_resident_dataflow.c, as one source and the
 * plan that runs them (also compiled by the real NVRTC on the CPU, in
 * tests/test_resident_fused_cpu.c, where there is one): every kind of
 * dependency, each stage checking on the GPU that what it reads is the
 * right request's (a count of errors a stage), the result of each request
 * logged for the host to check against its own sums.
 *
 *   s0 produce  64 tiles          writes V0[c][tile][0..W) = f(seq, tile, j), its input, its SM
 *   s1 same     64 tiles, 32 thr  SAME s0: checks the tile, V1 = its sum (a reduction in t->shared)
 *   s2 stencil  64 tiles          NEIGHBOURS s0 radius 2: checks tiles tile-2..tile+2 (clipped)
 *   s3 down     32 tiles          NEIGHBOURS s1 scale 2/1: checks tiles 2t and 2t + 1
 *   s4 total    1 tile            ALL s1 and ALL s3: LOG[seq] = the sum of V1
 *   s5 picked   16 tiles          FUNCTION pick on s2: tiles (5t + 3i) % 64, i < 3
 *   s6 previous 64 tiles          SAME s0 of the previous request: V0 of seq - 1
 *   s7 grid     100x30 in 16x8    reads nothing: checks its own descriptor (7x4 tiles, edges)
 *   s8 grid_nb  100x30 in 16x8    NEIGHBOURS s7 radius 1 in both axes
 *
 * c = seq % COPIES: three copies of everything (in_flight 2 at most: the
 * previous request's data is read while the next is written). User memory,
 * 32-bit words: V0, V1, V2, V7, IN (per copy and tile), ERR[16], LOG[LOG_CAP],
 * SMID[64]. Options: -DDF_IN_FLIGHT=n (the loop's), -DDF_HANG_SEQ=n (s0's
 * tile 3 of request n sleeps 1.5 s), -DDF_BAD_TILE=n (pick names tile 64
 * for s5's tile 1 of request n).
 */
#ifndef CUWEAVE_TESTS_DATAFLOW_STAGES_H
#define CUWEAVE_TESTS_DATAFLOW_STAGES_H

#define DF_W 32u
#define DF_COPIES 3u
#define DF_LOG_CAP 4096u
#define DF_T0 64u
#define DF_V0 0u
#define DF_V1 (DF_V0 + DF_COPIES * DF_T0 * DF_W)
#define DF_V2 (DF_V1 + DF_COPIES * DF_T0)
#define DF_V7 (DF_V2 + DF_COPIES * DF_T0)
#define DF_IN (DF_V7 + DF_COPIES * 28u)
#define DF_ERR (DF_IN + DF_COPIES * DF_T0)
#define DF_LOG (DF_ERR + 16u)
#define DF_SMID (DF_LOG + DF_LOG_CAP)
#define DF_WORDS (DF_SMID + DF_T0)

/* f(seq, tile, j): what s0 writes; the host computes the sums from it. */
#define DF_F(seq, in, tile, j) ((unsigned)(seq) * 131u + (unsigned)(tile) * 7u + (unsigned)(j) + (unsigned)(in))

#define DF_STR2(x) #x
#define DF_STR(x) DF_STR2(x)

static const char kDataflowStages[] =
    "#include \"cuweave/resident_device.h\"\n"
    "#define W " DF_STR(DF_W) "\n#define COPIES " DF_STR(DF_COPIES) "\n#define LOG_CAP " DF_STR(DF_LOG_CAP) "\n"
    "#define V0 " DF_STR(DF_V0) "\n#define V1 " DF_STR(DF_V1) "\n#define V2 " DF_STR(DF_V2) "\n#define V7 " DF_STR(DF_V7) "\n"
    "#define IN " DF_STR(DF_IN) "\n#define ERR " DF_STR(DF_ERR) "\n#define LOG " DF_STR(DF_LOG) "\n#define SMID " DF_STR(DF_SMID) "\n"
    "#ifndef DF_HANG_SEQ\n#define DF_HANG_SEQ 0ull\n#endif\n"
    "#ifndef DF_BAD_TILE\n#define DF_BAD_TILE 0ull\n#endif\n"
    "#ifndef DF_IN_FLIGHT\n#define DF_IN_FLIGHT 1ull\n#endif\n"
    "#define F(seq, in, tile, j) ((unsigned)(seq) * 131u + (unsigned)(tile) * 7u + (unsigned)(j) + (unsigned)(in))\n"
    "static __device__ __forceinline__ volatile unsigned *U(void *u) { return (volatile unsigned *)u; }\n"
    "static __device__ __forceinline__ unsigned cp(unsigned long long seq) { return (unsigned)(seq % COPIES); }\n"
    "static __device__ void err(void *u, unsigned stage) { atomicAdd((unsigned *)u + ERR + stage, 1u); }\n"
    "static __device__ __forceinline__ unsigned smid(void) { unsigned s; asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(s)); return s; }\n"
    /* a pause on some tiles, from the request and the tile, to mix the order */
    "static __device__ void jitter(const cw_fused_tile *t) {\n"
    "    const unsigned h = (unsigned)t->seq * 2654435761u ^ (t->tile + 1u) * 40503u ^ t->stage * 977u;\n"
    "    if (threadIdx.x == 0 && (h >> 7) % 13u == 0u) __nanosleep(500u + (h >> 11) % 3000u);\n"
    "}\n"
    "static __device__ unsigned input_of(const cw_fused_tile *t) { return t->input ? *(const volatile unsigned *)t->input : 0u; }\n"
    "extern \"C\" __device__ void produce(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned in = input_of(t), c = cp(t->seq);\n"
    "    if (DF_HANG_SEQ && t->seq == DF_HANG_SEQ && t->tile == 3u && threadIdx.x == 0) {\n"
    "        unsigned long long t0; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "        for (;;) { unsigned long long n; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(n)); if (n - t0 > 1500000000ull) break; __nanosleep(100000u); }\n"
    "    }\n"
    "    for (unsigned j = threadIdx.x; j < W; j += blockDim.x) U(u)[V0 + (c * 64u + t->tile) * W + j] = F(t->seq, in, t->tile, j);\n"
    "    if (threadIdx.x == 0) { U(u)[IN + c * 64u + t->tile] = in; U(u)[SMID + t->tile] = smid(); }\n"
    "    if (t->tiles != 64u || t->tiles_x != 64u || t->tiles_y != 1u || t->x != t->tile || t->x0 != t->tile || t->w != 1u) err(u, 0);\n"
    "}\n"
    "extern \"C\" __device__ void same(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned in = input_of(t), c = cp(t->seq);\n"
    "    unsigned *sh = (unsigned *)t->shared;\n"
    "    if (t->threads != 32u || threadIdx.x >= 32u) err(u, 1);\n"
    "    const unsigned j = threadIdx.x;\n"
    "    const unsigned v = U(u)[V0 + (c * 64u + t->tile) * W + j];\n"
    "    if (v != F(t->seq, in, t->tile, j)) err(u, 1);\n"
    "    sh[j] = v;\n"
    "    cw_fused_tile_sync(t);\n"
    "    for (unsigned s = 16u; s > 0u; s >>= 1) { if (j < s) sh[j] += sh[j + s]; cw_fused_tile_sync(t); }\n"
    "    if (j == 0) U(u)[V1 + c * 64u + t->tile] = sh[0];\n"
    "}\n"
    "extern \"C\" __device__ void stencil(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned in = input_of(t), c = cp(t->seq);\n"
    "    if (threadIdx.x == 0) {\n"
    "        const int lo = (int)t->tile - 2 < 0 ? 0 : (int)t->tile - 2, hi = t->tile + 2u > 63u ? 63 : (int)t->tile + 2;\n"
    "        for (int k = lo; k <= hi; k++) for (unsigned j = 0; j < W; j += 7u)\n"
    "            if (U(u)[V0 + (c * 64u + (unsigned)k) * W + j] != F(t->seq, in, k, j)) err(u, 2);\n"
    "        U(u)[V2 + c * 64u + t->tile] = (unsigned)t->seq * 3u + t->tile;\n"
    "    }\n"
    "}\n"
    "static __device__ unsigned v1_want(unsigned long long seq, unsigned in, unsigned tile) {\n"
    "    unsigned s = 0; for (unsigned j = 0; j < W; j++) s += F(seq, in, tile, j); return s;\n"
    "}\n"
    "extern \"C\" __device__ void down(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned in = input_of(t), c = cp(t->seq);\n"
    "    if (threadIdx.x < 2u) { const unsigned k = 2u * t->tile + threadIdx.x;\n"
    "        if (U(u)[V1 + c * 64u + k] != v1_want(t->seq, in, k)) err(u, 3); }\n"
    "}\n"
    "extern \"C\" __device__ void total(const cw_fused_tile *t, void *u) {\n"
    "    const unsigned c = cp(t->seq);\n"
    "    __shared__ unsigned acc;\n"
    "    if (threadIdx.x == 0) acc = 0u;\n"
    "    __syncthreads();\n"
    "    for (unsigned k = threadIdx.x; k < 64u; k += blockDim.x) atomicAdd(&acc, U(u)[V1 + c * 64u + k]);\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) U(u)[LOG + (unsigned)(t->seq % LOG_CAP)] = acc;\n"
    "}\n"
    "extern \"C\" __device__ int pick(const cw_fused_tile *t, unsigned i) {\n"
    "    if (DF_BAD_TILE && t->seq == DF_BAD_TILE && t->tile == 1u && i == 0u) return 64;\n"
    "    return i < 3u ? (int)((t->tile * 5u + i * 3u) % 64u) : -1;\n"
    "}\n"
    "extern \"C\" __device__ void picked(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned c = cp(t->seq);\n"
    "    if (threadIdx.x < 3u) { const unsigned k = (t->tile * 5u + threadIdx.x * 3u) % 64u;\n"
    "        if (U(u)[V2 + c * 64u + k] != (unsigned)t->seq * 3u + k) err(u, 5); }\n"
    "}\n"
    "extern \"C\" __device__ void previous(const cw_fused_tile *t, void *u) {\n"
    "    if (t->first || threadIdx.x != 0) return;\n"
    "    const unsigned long long p = t->seq - 1ull;\n"
    "    const unsigned pin = U(u)[IN + cp(p) * 64u + t->tile];\n"
    "    if (U(u)[V0 + (cp(p) * 64u + t->tile) * W + 5u] != F(p, pin, t->tile, 5u)) err(u, 6);\n"
    "}\n"
    "extern \"C\" __device__ void grid(const cw_fused_tile *t, void *u) {\n"
    "    const unsigned c = cp(t->seq);\n"
    "    if (threadIdx.x == 0) {\n"
    "        const unsigned wx = t->x * 16u + 16u > 100u ? 100u - t->x * 16u : 16u, wy = t->y * 8u + 8u > 30u ? 30u - t->y * 8u : 8u;\n"
    "        if (t->tiles_x != 7u || t->tiles_y != 4u || t->tiles != 28u || t->tile != t->y * 7u + t->x || t->x0 != t->x * 16u ||\n"
    "            t->y0 != t->y * 8u || t->w != wx || t->h != wy || t->slot != (unsigned)((t->seq - 1ull) % DF_IN_FLIGHT))\n"
    "            err(u, 7);\n"
    "        U(u)[V7 + c * 28u + t->tile] = (unsigned)t->seq * 5u + t->tile;\n"
    "    }\n"
    "}\n"
    "extern \"C\" __device__ void grid_nb(const cw_fused_tile *t, void *u) {\n"
    "    jitter(t);\n"
    "    const unsigned c = cp(t->seq);\n"
    "    if (threadIdx.x == 0)\n"
    "        for (int y = (int)t->y - 1; y <= (int)t->y + 1; y++) for (int x = (int)t->x - 1; x <= (int)t->x + 1; x++) {\n"
    "            if (x < 0 || y < 0 || x > 6 || y > 3) continue;\n"
    "            const unsigned k = (unsigned)y * 7u + (unsigned)x;\n"
    "            if (U(u)[V7 + c * 28u + k] != (unsigned)t->seq * 5u + k) err(u, 8);\n"
    "        }\n"
    "}\n";

/* The plan: nine stages, every dependency kind. deps and stages are the
 * caller's (static storage in the caller). */
static inline void dataflow_plan_fill(cw_fused_stage st[9], cw_fused_dep deps[10]) {
    memset(st, 0, 9 * sizeof st[0]);
    memset(deps, 0, 10 * sizeof deps[0]);
    deps[0].stage = 0; deps[0].read = CW_FUSED_READ_SAME;                       /* same <- produce */
    deps[1].stage = 0; deps[1].read = CW_FUSED_READ_NEIGHBOURS; deps[1].radius = 2; /* stencil <- produce */
    deps[2].stage = 1; deps[2].read = CW_FUSED_READ_NEIGHBOURS; deps[2].scale_num = 2; deps[2].scale_den = 1; /* down <- same */
    deps[3].stage = 1; deps[3].read = CW_FUSED_READ_ALL;                        /* total <- same */
    deps[4].stage = 3; deps[4].read = CW_FUSED_READ_ALL;                        /* total <- down */
    deps[5].stage = 2; deps[5].read = CW_FUSED_READ_FUNCTION; deps[5].function = "pick"; /* picked <- stencil */
    deps[6].stage = 0; deps[6].read = CW_FUSED_READ_SAME; deps[6].previous = 1;  /* previous <- produce, request before */
    deps[7].stage = 7; deps[7].read = CW_FUSED_READ_NEIGHBOURS; deps[7].radius = 1; /* grid_nb <- grid */
    static const char *const names[9] = {"produce", "same", "stencil", "down", "total", "picked", "previous", "grid", "grid_nb"};
    for (int i = 0; i < 9; i++) st[i].name = names[i];
    st[0].tiles = 64;
    st[1].tiles = 64; st[1].threads = 32; st[1].shared_bytes = 32 * 4; st[1].deps = &deps[0]; st[1].dep_count = 1;
    st[2].tiles = 64; st[2].deps = &deps[1]; st[2].dep_count = 1;
    st[3].tiles = 32; st[3].deps = &deps[2]; st[3].dep_count = 1;
    st[4].tiles = 1; st[4].deps = &deps[3]; st[4].dep_count = 2;
    st[5].tiles = 16; st[5].deps = &deps[5]; st[5].dep_count = 1;
    st[6].tiles = 64; st[6].deps = &deps[6]; st[6].dep_count = 1;
    st[7].size[0] = 100; st[7].size[1] = 30; st[7].tile[0] = 16; st[7].tile[1] = 8;
    st[8].size[0] = 100; st[8].size[1] = 30; st[8].tile[0] = 16; st[8].tile[1] = 8; st[8].deps = &deps[7]; st[8].dep_count = 1;
}

/* What s4 logs for request seq with input in: the sum over 64 tiles of the
 * sums of f. */
static inline unsigned dataflow_total(unsigned long long seq, unsigned in) {
    unsigned s = 0;
    for (unsigned tile = 0; tile < DF_T0; tile++)
        for (unsigned j = 0; j < DF_W; j++) s += DF_F(seq, in, tile, j);
    return s;
}

#endif /* CUWEAVE_TESTS_DATAFLOW_STAGES_H */
