/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The diamond A -> (B, D) -> C of examples/diamond_resident.c as a fused
 * pipeline (cuweave/flow.h, cw_pipeline_make_fused): each operator is a
 * stage, a device function that does one tile's work, and the whole DAG
 * runs as one persistent kernel. The operator author writes the stages;
 * cuweave writes the schedule (one task per tile, a tile waiting only for
 * the producers' tiles it reads), the counters, and the calls that hand
 * each stage its ports' memory.
 *
 *            +--> B (x*2+1, tile for tile) ------+
 *   A (in)   |                                   +--> C (5*b + d[i-1] + d[i+1]) --> result
 *            +--> D (x*3+7, tile for tile) ------+
 *
 * A frame of 4096 words in tiles of 256. B and D read A tile for tile
 * (CW_FUSED_READ_SAME): one block runs A, B and D of a tile back to back.
 * C reads B tile for tile and D's tiles around its own (a halo:
 * CW_FUSED_READ_NEIGHBOURS, radius 1), so its tile waits for at most three
 * of D's. A stage is `__device__ void f(const cw_fused_tile *t, void *user,
 * port0, port1, ...)`: one pointer per port, in the order the ports were
 * declared. A reads the request's input slot (t->input). C's output is
 * unconnected: memory of its own, which the host reads
 * (cw_pipeline_get_port_ptr).
 *
 * Per request the host fills the input slot, rings, waits, copies the result
 * back and checks every value. Prints the median round trip and the GPU's
 * own time per request. Without a GPU or NVRTC it says why and exits 77;
 * exits 1 when a call fails or a value is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/pipeline_fused.c \
 *      build/make/libcuweave.so -o pipeline_fused
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

enum {
    N = 4096,      /* 32-bit values per port */
    TILE = 256,    /* values per tile */
    IN_WORDS = 16, /* 32-bit words per request's input */
    REQUESTS = 1000
};

static const char *k_stages =
    "#include \"cuweave/resident_device.h\"\n"
    "#define N 4096u\n"
    "__device__ void produce(const cw_fused_tile *t, void *user, unsigned *out) {\n"
    "    const unsigned *in = (const unsigned *)t->input;\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads)\n"
    "        out[i] = in[i % 16u] * 3u + i + (unsigned)t->seq;\n"
    "}\n"
    "__device__ void transform(const cw_fused_tile *t, const unsigned *k, const unsigned *in, unsigned *out) {\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads) out[i] = in[i] * k[0] + k[1];\n"
    "}\n"
    "__device__ void combine(const cw_fused_tile *t, void *user, const unsigned *b, const unsigned *d,\n"
    "                        unsigned *out) {\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads)\n"
    "        out[i] = b[i] * 5u + (i ? d[i - 1u] : 0u) + (i + 1u < N ? d[i + 1u] : 0u);\n"
    "}\n";

#define TRY(expr)                                                              \
    do {                                                                       \
        if ((expr) != CW_SUCCESS) {                                            \
            fprintf(stderr, "pipeline_fused: %s\n", cw_last_error()->message);  \
            if (cw_last_error()->status == CW_ERROR_COMPILE)                   \
                fprintf(stderr, "%s", cw_jit_get_compile_log());               \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* A stage operator of the frame's size in tiles of TILE, its inputs read as
 * reads[] says, every port N words. */
static cw_status add_stage(cw_pipeline *p, const char *name, const char *function, cw_devptr user,
                           const cw_port_read *reads, uint32_t nreads, const char *in1, const char *in2,
                           const char *out) {
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = function;
    st.user = user;
    st.size[0] = N;
    st.tile[0] = TILE;
    st.reads = reads;
    st.read_count = nreads;
    cw_port_settings port;
    cw_port_settings_default(&port);
    port.bytes = N * sizeof(unsigned);
    cw_operator *op = NULL;
    cw_status s = cw_operator_create_stage(&op, name, &st);
    if (s != CW_SUCCESS) return s;
    if (in1) s = cw_operator_add_input(op, in1, &port);
    if (s == CW_SUCCESS && in2) s = cw_operator_add_input(op, in2, &port);
    if (s == CW_SUCCESS) s = cw_operator_add_output(op, out, &port);
    if (s == CW_SUCCESS) s = cw_pipeline_add(p, op);
    if (s != CW_SUCCESS) cw_operator_destroy(&op);
    return s;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    printf("pipeline_fused: A -> (B, D) -> C as one persistent kernel, %d requests\n", REQUESTS);
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "pipeline_fused: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *hs = NULL; /* the host's copies */
    cw_buffer *params = NULL;
    cw_resident *r = NULL;
    cw_pipeline *p = NULL;
    unsigned *host_in = NULL, *host_out = NULL;
    static double round_trip[REQUESTS];
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&hs, ctx, NULL));
    TRY(cw_host_alloc((void **)&host_in, ctx, IN_WORDS * sizeof(unsigned)));
    TRY(cw_host_alloc((void **)&host_out, ctx, N * sizeof(unsigned)));

    /* B's and D's multiplier and addend: each stage's own user pointer */
    const unsigned k[4] = {2u, 1u, 3u, 7u};
    cw_devptr kp = 0;
    TRY(cw_buffer_create(&params, hs, sizeof k));
    TRY(cw_buffer_get_writable(params, &kp));
    TRY(cw_copy_to_device(hs, kp, k, sizeof k));
    TRY(cw_stream_synchronize(hs));

    /* the stages: B and D read A tile for tile; C reads B so and D's tiles around its own */
    cw_port_read same, b_same, d_halo;
    memset(&same, 0, sizeof same);
    same.port = "in";
    same.read = CW_FUSED_READ_SAME;
    cw_port_read c_reads[2];
    memset(c_reads, 0, sizeof c_reads);
    b_same = same;
    b_same.port = "b";
    memset(&d_halo, 0, sizeof d_halo);
    d_halo.port = "d";
    d_halo.read = CW_FUSED_READ_NEIGHBOURS;
    d_halo.radius = 1;
    c_reads[0] = b_same;
    c_reads[1] = d_halo;
    TRY(cw_pipeline_create(&p, ctx, NULL));
    TRY(add_stage(p, "A", "produce", 0, NULL, 0, NULL, NULL, "out"));
    TRY(add_stage(p, "B", "transform", kp, &same, 1, "in", NULL, "out"));
    TRY(add_stage(p, "D", "transform", kp + 2 * sizeof(unsigned), &same, 1, "in", NULL, "out"));
    TRY(add_stage(p, "C", "combine", 0, c_reads, 2, "b", "d", "result"));
    TRY(cw_pipeline_connect(p, "A", "out", "B", "in"));
    TRY(cw_pipeline_connect(p, "A", "out", "D", "in"));
    TRY(cw_pipeline_connect(p, "B", "out", "C", "b"));
    TRY(cw_pipeline_connect(p, "D", "out", "C", "d"));

    /* the loop: two input slots, adaptive sleep; the pipeline is its kernel */
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.input_slots = 2;
    rs.input_bytes = IN_WORDS * sizeof(unsigned);
    TRY(cw_resident_create(&r, ctx, &rs));
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = k_stages;
    f.block_threads = 256;
    TRY(cw_pipeline_make_fused(p, r, &f)); /* port memory, the generated calls, the compile */
    cw_devptr result = 0;
    TRY(cw_pipeline_get_port_ptr(p, "C", "result", &result));
    cw_resident_info info;
    TRY(cw_resident_get_info(r, &info));
    printf("fused: %u blocks of %u threads\n", info.grid_blocks, info.block_threads);
    TRY(cw_resident_launch(r));

    int bad = 0;
    for (unsigned q = 0; q < REQUESTS; q++) {
        cw_devptr slot = 0;
        TRY(cw_resident_next_input(r, 1000, &slot));
        for (unsigned j = 0; j < IN_WORDS; j++) host_in[j] = q * 7919u + j * 31u;
        const double t0 = now_us();
        TRY(cw_copy_to_device(hs, slot, host_in, IN_WORDS * sizeof(unsigned)));
        TRY(cw_stream_synchronize(hs)); /* the input is on the GPU before the doorbell */
        uint64_t seq = 0;
        TRY(cw_resident_data_ready(r, &seq));
        TRY(cw_resident_wait_result(r, seq, 1000));
        TRY(cw_copy_to_host(hs, host_out, result, N * sizeof(unsigned)));
        TRY(cw_stream_synchronize(hs));
        round_trip[q] = now_us() - t0;
        for (unsigned i = 0; i < N; i++) {
#define A_(i) (host_in[(i) % IN_WORDS] * 3u + (i) + (unsigned)seq)
#define D_(i) (A_(i) * 3u + 7u)
            const unsigned want = (A_(i) * 2u + 1u) * 5u + (i ? D_(i - 1) : 0u) + (i + 1 < N ? D_(i + 1) : 0u);
            if (host_out[i] != want) {
                if (bad < 5)
                    fprintf(stderr, "pipeline_fused: request %llu: result[%u] = %u, want %u\n",
                            (unsigned long long)seq, i, host_out[i], want);
                bad++;
            }
        }
    }
    qsort(round_trip, REQUESTS, sizeof round_trip[0], cmp_double);
    TRY(cw_resident_get_info(r, &info));
    ok = bad == 0 && info.iterations == REQUESTS;
    printf("%d requests: every output right: %s\n", REQUESTS, bad == 0 ? "yes" : "NO");
    printf("round trip (copy in, request, result, copy out): median %.1f us; the GPU's own time per request: median "
           "%.2f us\n",
           round_trip[REQUESTS / 2], info.iter_median_ns / 1e3);
    TRY(cw_resident_tear_down(r, 1000));
out:
    /* the loop before the pipeline whose memory it uses */
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&params);
    cw_host_free(ctx, (void **)&host_in);
    cw_host_free(ctx, (void **)&host_out);
    cw_stream_destroy(&hs);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
