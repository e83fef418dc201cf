/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fused pipeline of four operators (cw_pipeline_make_fused), shared by
 * tests/test_pipeline_fused_cpu.c (its plan; the real NVRTC compiles its
 * source where there is one) and tests/test_gpu_pipeline_fused.c (it runs,
 * every result checked against pl_reference below):
 *
 *                +--> scale (b = 3a + 1, SAME) ----------+
 *   src (a) -----+                                       +--> sum (ALL, ALL) --> log
 *     ^          +--> blur (d = w0 a[i-1] + w1 a[i] + w2 a[i+1], NEIGHBOURS 2/1 radius 1) --+      |
 *     +--------------------------- prev (previous, ALL; with feedback) ------------------------------+
 *
 * A frame of PL_N 32-bit words: src and scale in 16 tiles of 256, blur in
 * 8 tiles of 512 (a tile reads src's 2x-1 .. 2x+2: its halo), sum one tile
 * of 128 threads that reduces b ^ d in t->shared and logs the total at
 * log[seq % PL_LOG_CAP] (the sink's output, read by the host). src's value
 * depends on the request, its input word and, with feedback, on the
 * previous request's total (log, read with `previous`): a connection from
 * the last operator back to the first. blur's stage user is its weights
 * (3 words). Data of a request is indexed by t->slot (PL_COPIES copies:
 * in_flight 1 or 2).
 */
#ifndef CUWEAVE_TESTS_PIPELINE_STAGES_H
#define CUWEAVE_TESTS_PIPELINE_STAGES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuweave/cuweave.h"

#define PL_N 4096u
#define PL_COPIES 2u
#define PL_LOG_CAP 4096u
#define PL_STR2(x) #x
#define PL_STR(x) PL_STR2(x)

static const char kPipelineStages[] =
    "#include \"cuweave/resident_device.h\"\n"
    "#define N " PL_STR(PL_N) "\n#define LOG_CAP " PL_STR(PL_LOG_CAP) "\n"
    "extern \"C\" __device__ void pl_src(const cw_fused_tile *t, void *user, const unsigned *prev, unsigned *out) {\n"
    "    (void)user;\n"
    "    const unsigned in = t->input ? *(const volatile unsigned *)t->input : 0u;\n"
    "    const unsigned carry = prev && !t->first ? prev[(unsigned)((t->seq - 1ull) % LOG_CAP)] : 0u;\n"
    "    unsigned *o = out + t->slot * N;\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads)\n"
    "        o[i] = (unsigned)t->seq * 2654435761u + i * 7u + in + carry;\n"
    "}\n"
    "extern \"C\" __device__ void pl_scale(const cw_fused_tile *t, void *user, const unsigned *a, unsigned *b) {\n"
    "    (void)user;\n"
    "    const unsigned c = t->slot * N;\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads) b[c + i] = a[c + i] * 3u + 1u;\n"
    "}\n"
    "extern \"C\" __device__ void pl_blur(const cw_fused_tile *t, const unsigned *w, const unsigned *a, unsigned *d) {\n"
    "    const unsigned c = t->slot * N;\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads) {\n"
    "        const unsigned l = i ? i - 1u : 0u, r = i + 1u < N ? i + 1u : N - 1u;\n"
    "        d[c + i] = w[0] * a[c + l] + w[1] * a[c + i] + w[2] * a[c + r];\n"
    "    }\n"
    "}\n"
    "extern \"C\" __device__ void pl_sum(const cw_fused_tile *t, void *user, const unsigned *b, const unsigned *d,\n"
    "                                    unsigned *log) {\n"
    "    (void)user;\n"
    "    unsigned *sh = (unsigned *)t->shared;\n"
    "    const unsigned c = t->slot * N;\n"
    "    unsigned acc = 0u;\n"
    "    for (unsigned i = threadIdx.x; i < N; i += t->threads) acc += b[c + i] ^ d[c + i];\n"
    "    sh[threadIdx.x] = acc;\n"
    "    cw_fused_tile_sync(t);\n"
    "    for (unsigned s = t->threads / 2u; s > 0u; s >>= 1) {\n"
    "        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];\n"
    "        cw_fused_tile_sync(t);\n"
    "    }\n"
    "    if (threadIdx.x == 0u) log[(unsigned)(t->seq % LOG_CAP)] = sh[0];\n"
    "}\n";

static const unsigned kPlWeights[3] = {1u, 2u, 1u};

/* The total of request seq with input word `in` and the previous total
 * `carry` (0 without feedback, and for the first request of a launch). */
static inline unsigned pl_reference(uint64_t seq, unsigned in, unsigned carry) {
    static unsigned a[PL_N];
    for (unsigned i = 0; i < PL_N; i++) a[i] = (unsigned)seq * 2654435761u + i * 7u + in + carry;
    unsigned total = 0;
    for (unsigned i = 0; i < PL_N; i++) {
        const unsigned l = i ? i - 1u : 0u, r = i + 1u < PL_N ? i + 1u : PL_N - 1u;
        const unsigned b = a[i] * 3u + 1u;
        const unsigned d = kPlWeights[0] * a[l] + kPlWeights[1] * a[i] + kPlWeights[2] * a[r];
        total += b ^ d;
    }
    return total;
}

typedef struct pl_options {
    int feedback;         /* connect sum.log back to src.prev (read with previous) */
    cw_devptr weights;    /* blur's stage user (3 words) */
    cw_devptr blur_out;   /* 0: blur.out declares bytes; else the memory it supplies */
} pl_options;

static cw_status pl_op(cw_pipeline *p, const char *name, const cw_operator_stage *st, const char *in1,
                       const char *in2, const char *out, size_t out_bytes, cw_devptr out_dptr, unsigned in1_flags) {
    cw_operator *op = NULL;
    cw_status s = cw_operator_create_stage(&op, name, st);
    if (s != CW_SUCCESS) return s;
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    if (in1) {
        ps.flags = in1_flags;
        s = cw_operator_add_input(op, in1, &ps);
        ps.flags = 0;
    }
    if (s == CW_SUCCESS && in2) s = cw_operator_add_input(op, in2, &ps);
    ps.bytes = out_dptr ? 0 : out_bytes;
    ps.dptr = out_dptr;
    if (s == CW_SUCCESS && out) s = cw_operator_add_output(op, out, &ps);
    if (s == CW_SUCCESS) s = cw_pipeline_add(p, op);
    if (s != CW_SUCCESS) cw_operator_destroy(&op);
    return s;
}

/* Makes the pipeline on ctx (*out, the caller's: cw_pipeline_destroy). */
static cw_status pl_build(cw_context *ctx, const pl_options *o, cw_pipeline **out) {
    cw_pipeline *p = NULL;
    cw_status s = cw_pipeline_create(&p, ctx, NULL);
    if (s != CW_SUCCESS) return s;
    const size_t frame = (size_t)PL_COPIES * PL_N * 4u;
    cw_port_read r_prev, r_a, r_nb, r_all[2];
    memset(&r_prev, 0, sizeof r_prev);
    memset(&r_a, 0, sizeof r_a);
    memset(&r_nb, 0, sizeof r_nb);
    memset(r_all, 0, sizeof r_all);
    r_prev.port = "prev";
    r_prev.read = CW_FUSED_READ_ALL;
    r_prev.previous = 1;
    r_a.port = "in";
    r_a.read = CW_FUSED_READ_SAME;
    r_nb.port = "in";
    r_nb.read = CW_FUSED_READ_NEIGHBOURS;
    r_nb.radius = 1;
    r_nb.scale_num = 2;
    r_nb.scale_den = 1;
    r_all[0].port = "b";
    r_all[0].read = CW_FUSED_READ_ALL;
    r_all[1].port = "d";
    r_all[1].read = CW_FUSED_READ_ALL;
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "pl_src";
    st.size[0] = PL_N;
    st.tile[0] = 256;
    st.reads = &r_prev;
    st.read_count = 1;
    /* src.prev: optional, no memory of its own (without feedback: unconnected, NULL) */
    s = pl_op(p, "src", &st, "prev", NULL, "out", frame, 0, CW_PORT_OPTIONAL);
    st.function = "pl_scale";
    st.reads = &r_a;
    if (s == CW_SUCCESS) s = pl_op(p, "scale", &st, "in", NULL, "out", frame, 0, 0);
    st.function = "pl_blur";
    st.tile[0] = 512;
    st.reads = &r_nb;
    st.user = o->weights;
    if (s == CW_SUCCESS) s = pl_op(p, "blur", &st, "in", NULL, "out", frame, o->blur_out, 0);
    memset(&st, 0, sizeof st);
    st.function = "pl_sum";
    st.tiles = 1;
    st.threads = 128;
    st.shared_bytes = 128 * 4;
    st.reads = r_all;
    st.read_count = 2;
    if (s == CW_SUCCESS) s = pl_op(p, "sum", &st, "b", "d", "log", (size_t)PL_LOG_CAP * 4u, 0, 0);
    if (s == CW_SUCCESS) s = cw_pipeline_connect(p, "src", "out", "scale", "in");
    if (s == CW_SUCCESS) s = cw_pipeline_connect(p, "src", "out", "blur", "in");
    if (s == CW_SUCCESS) s = cw_pipeline_connect(p, "scale", "out", "sum", "b");
    if (s == CW_SUCCESS) s = cw_pipeline_connect(p, "blur", "out", "sum", "d");
    if (s == CW_SUCCESS && o->feedback) s = cw_pipeline_connect(p, "sum", "log", "src", "prev");
    if (s != CW_SUCCESS) {
        cw_pipeline_destroy(&p);
        return s;
    }
    *out = p;
    return CW_SUCCESS;
}

/* What make_fused takes besides the pipeline: the source, 256 threads a
 * block (0) or block_threads, in_flight. */
static inline cw_resident_fused pl_fused(uint32_t block_threads, uint32_t in_flight) {
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kPipelineStages;
    f.block_threads = block_threads;
    f.in_flight = in_flight;
    /* CWT_LINEINFO=1: line numbers in the fused kernel, so that
     * compute-sanitizer names the source lines of what it reports */
    static const char *const kLineInfo[] = {"-lineinfo"};
    const char *li = getenv("CWT_LINEINFO");
    if (li && *li && *li != '0') {
        f.options = kLineInfo;
        f.option_count = 1;
    }
    return f;
}

#endif /* CUWEAVE_TESTS_PIPELINE_STAGES_H */
