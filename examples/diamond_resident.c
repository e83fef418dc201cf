/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The diamond A -> (B, D) -> C as a resident pipeline (cuweave/flow.h): the
 * operators' compute calls are captured once into a GPU-resident loop's
 * iteration (cw_pipeline_make_resident), B and D as parallel graph branches,
 * and the host then drives 1000 requests without launching anything.
 *
 *            +--> B (x*2+1) --+
 *   A (in)   |                +--> C (5*b + d) --> result
 *            +--> D (x*3+7) --+
 *
 * Every operator is resident (cw_operator_settings.resident = 1) and its
 * ports declare memory (cw_port_settings.bytes): the pipeline allocates one
 * buffer per output port, shared by the inputs connected to it, and the
 * compute calls find it with cw_io_get_port_ptr. A compute call only launches a
 * kernel on the stream cw_io_receive_stream gives (in a capture, the
 * operator's branch of the graph; asking on C's two inputs gives the one
 * stream that waits for both branches). Nothing is allocated, and an emit
 * does nothing in a capture (the operators emit anyway, as
 * docs/pipelines.md advises): data flows through port memory.
 *
 * A reads the request's input from the loop's input slot (two slots, so the
 * host could fill one while the other is read): its kernel is given the
 * loop's control block (cw_io_get_info: resident_ctl) and calls cw_resident_input and
 * cw_resident_sequence from <cuweave/resident_device.h>, handed to NVRTC
 * from memory. C writes into a result buffer the example allocates. Per
 * request the host fills the slot (cw_resident_next_input, cw_copy_to_device,
 * synchronize), rings (cw_resident_data_ready), waits (cw_resident_wait_result),
 * copies the result back and checks every value, which depends on the input
 * and on the request number. Prints the median round trip.
 *
 * Order matters at the end: tear the loop down and destroy it, then the
 * pipeline (its port memory is in use while the loop runs). Kernels are
 * loaded before the loop runs (cw_kernel_preload): loading code waits until
 * no kernel runs on the device, which never happens while a loop runs.
 *
 * Kernels are compiled at run time with NVRTC. Without a GPU or NVRTC it says
 * why and exits 77; exits 1 when a call fails or a value is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/diamond_resident.c \
 *      build/make/libcuweave.so -o diamond_resident
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

enum {
    N = 4096,       /* 32-bit values per port */
    IN_WORDS = 16,  /* 32-bit words per request's input */
    REQUESTS = 1000
};

static const char *k_source =
    "#include \"cuweave/resident_device.h\"\n"
    "extern \"C\" __global__ void produce(const cw_resident_ctl *ctl, unsigned *out, unsigned n,\n"
    "                                    unsigned in_words) {\n"
    "    if (cw_resident_skip(ctl)) return;\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    const unsigned seq = (unsigned)cw_resident_sequence(ctl);\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "        out[i] = in[i % in_words] * 3u + i + seq;\n"
    "}\n"
    "extern \"C\" __global__ void transform(const unsigned *in, unsigned *out, unsigned n, unsigned mul,\n"
    "                                      unsigned add) {\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "        out[i] = in[i] * mul + add;\n"
    "}\n"
    "extern \"C\" __global__ void combine(const unsigned *b, const unsigned *d, unsigned *out, unsigned n) {\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "        out[i] = b[i] * 5u + d[i];\n"
    "}\n";

typedef struct shared {
    cw_kernel *produce, *transform, *combine;
    cw_devptr result;          /* device: N words that C writes */
    unsigned captures[4];      /* compute calls of A, B, D, C (one per copy of the iteration) */
    int bad_stream;
} shared;

typedef struct branch {
    shared *sh;
    unsigned mul, add;
    unsigned index; /* in captures: 1 (B) or 2 (D) */
} branch;

#define OP_TRY(expr)                          \
    do {                                      \
        cw_status st_ = (expr);               \
        if (st_ != CW_SUCCESS) return st_;    \
    } while (0)

/* A few blocks: the whole iteration is small, B and D share the GPU. */
static void small_grid(cw_launch_config *lc) {
    cw_launch_config_default(lc);
    lc->grid[0] = N / 256;
    lc->block[0] = 256;
}

static cw_status a_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, NULL, &s));
    cw_devptr ctl, out;
    cw_io_info info;
    OP_TRY(cw_io_get_info(io, &info));
    ctl = info.resident_ctl;
    OP_TRY(cw_io_get_port_ptr(io, "out", &out));
    unsigned n = N, in_words = IN_WORDS;
    void *args[] = {&ctl, &out, &n, &in_words};
    cw_launch_config lc;
    small_grid(&lc);
    OP_TRY(cw_kernel_launch(sh->produce, s, &lc, args));
    sh->captures[0]++;
    return cw_io_emit(io, "out", NULL, NULL); /* does nothing in a capture */
}

static cw_status branch_compute(cw_io *io, void *user) {
    branch *br = user;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, "in", &s)); /* this branch, after A's */
    cw_devptr in, out;
    OP_TRY(cw_io_get_port_ptr(io, "in", &in));
    OP_TRY(cw_io_get_port_ptr(io, "out", &out));
    unsigned n = N, mul = br->mul, add = br->add;
    void *args[] = {&in, &out, &n, &mul, &add};
    cw_launch_config lc;
    small_grid(&lc);
    OP_TRY(cw_kernel_launch(br->sh->transform, s, &lc, args));
    br->sh->captures[br->index]++;
    return cw_io_emit(io, "out", NULL, NULL);
}

static cw_status c_compute(cw_io *io, void *user) {
    shared *sh = user;
    cw_stream *s, *s2;
    OP_TRY(cw_io_receive_stream(io, "in_b", &s));
    OP_TRY(cw_io_receive_stream(io, "in_d", &s2));
    if (s != s2) {
        sh->bad_stream = 1;
        fprintf(stderr, "diamond_resident: C was given two different streams for its two inputs\n");
        return CW_ERROR_INTERNAL;
    }
    cw_devptr b, d, out = sh->result;
    OP_TRY(cw_io_get_port_ptr(io, "in_b", &b));
    OP_TRY(cw_io_get_port_ptr(io, "in_d", &d));
    unsigned n = N;
    void *args[] = {&b, &d, &out, &n};
    cw_launch_config lc;
    small_grid(&lc);
    OP_TRY(cw_kernel_launch(sh->combine, s, &lc, args));
    sh->captures[3]++;
    return CW_SUCCESS;
}

/* A resident operator whose ports all declare N words. */
static cw_status add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                        const char *in1, const char *in2, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    cw_port_settings port;
    cw_port_settings_default(&port);
    port.bytes = N * sizeof(unsigned);
    cw_operator *op = NULL;
    OP_TRY(cw_operator_create(&op, name, &ops, user, &os));
    cw_status st = CW_SUCCESS;
    if (in1) st = cw_operator_add_input(op, in1, &port);
    if (st == CW_SUCCESS && in2) st = cw_operator_add_input(op, in2, &port);
    if (st == CW_SUCCESS && out) st = cw_operator_add_output(op, out, &port);
    if (st == CW_SUCCESS) st = cw_pipeline_add(p, op);
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
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

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

int main(void) {
    printf("diamond_resident: A -> (B, D) -> C captured into a GPU-resident loop, %d requests\n", REQUESTS);
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "diamond_resident: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *hs = NULL; /* the host's copies */
    cw_program *prog = NULL;
    cw_module *mod = NULL;
    cw_buffer *result = NULL;
    cw_resident *r = NULL;
    cw_pipeline *p = NULL;
    unsigned *host_in = NULL, *host_out = NULL;
    static double round_trip[REQUESTS], request[REQUESTS];
    shared sh;
    memset(&sh, 0, sizeof sh);
    branch bb = {&sh, 2u, 1u, 1u}, bd = {&sh, 3u, 7u, 2u};
#define TRY(expr)                                                                \
    do {                                                                         \
        if ((expr) != CW_SUCCESS) {                                              \
            fprintf(stderr, "diamond_resident: %s\n", cw_last_error()->message);  \
            if (cw_last_error()->status == CW_ERROR_COMPILE)                     \
                fprintf(stderr, "%s", cw_jit_get_compile_log());                         \
            goto out;                                                            \
        }                                                                        \
    } while (0)

    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&hs, ctx, NULL));

    /* the kernels, with the device header from memory; loaded now */
    cw_header header = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "diamond_resident.cu";
    ps.headers = &header;
    ps.n_headers = 1;
    TRY(cw_program_compile(&prog, ctx, k_source, &ps));
    TRY(cw_module_load(&mod, prog));
    TRY(cw_module_get_kernel(mod, "produce", &sh.produce));
    TRY(cw_module_get_kernel(mod, "transform", &sh.transform));
    TRY(cw_module_get_kernel(mod, "combine", &sh.combine));
    TRY(cw_kernel_preload(sh.produce, ctx));
    TRY(cw_kernel_preload(sh.transform, ctx));
    TRY(cw_kernel_preload(sh.combine, ctx));

    /* C's result buffer (usable from every stream once hs is synchronized) and
     * page-locked host memory for the copies */
    TRY(cw_buffer_create(&result, hs, N * sizeof(unsigned)));
    TRY(cw_buffer_get_writable(result, &sh.result));
    TRY(cw_stream_synchronize(hs));
    TRY(cw_host_alloc((void **)&host_in, ctx, IN_WORDS * sizeof(unsigned)));
    TRY(cw_host_alloc((void **)&host_out, ctx, N * sizeof(unsigned)));

    /* The loop: default settings (CW_RESIDENT_GATE_NODE: plain kernels), two
     * input slots, and adaptive sleep: after each request it keeps checking
     * for 200 us without sleeping, so back-to-back requests start at once. */
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.input_slots = 2;
    rs.input_bytes = IN_WORDS * sizeof(unsigned);
    rs.sleep_mode = CW_RESIDENT_SLEEP_ADAPTIVE;
    rs.sleep_interval_us = 100;
    rs.spin_us = 200;
    TRY(cw_resident_create(&r, ctx, &rs));

    /* the pipeline: resident operators, ports with memory */
    TRY(cw_pipeline_create(&p, ctx, NULL));
    TRY(add_op(p, "A", a_compute, &sh, NULL, NULL, "out"));
    TRY(add_op(p, "B", branch_compute, &bb, "in", NULL, "out"));
    TRY(add_op(p, "D", branch_compute, &bd, "in", NULL, "out"));
    TRY(add_op(p, "C", c_compute, &sh, "in_b", "in_d", NULL));
    TRY(cw_pipeline_connect(p, "A", "out", "B", "in"));
    TRY(cw_pipeline_connect(p, "A", "out", "D", "in"));
    TRY(cw_pipeline_connect(p, "B", "out", "C", "in_b"));
    TRY(cw_pipeline_connect(p, "D", "out", "C", "in_d"));
    TRY(cw_pipeline_make_resident(p, r)); /* port memory allocated here */
    TRY(cw_resident_build(r));            /* the compute calls run here, captured */
    printf("captured: A %u, B %u, D %u, C %u compute calls (one per copy of the iteration, unroll %u)\n",
           sh.captures[0], sh.captures[1], sh.captures[2], sh.captures[3], rs.unroll);
    TRY(cw_resident_launch(r));

    int bad = 0;
    for (unsigned k = 0; k < REQUESTS; k++) {
        cw_devptr slot = 0;
        TRY(cw_resident_next_input(r, 1000, &slot));
        for (unsigned j = 0; j < IN_WORDS; j++) host_in[j] = k * 7919u + j * 31u;
        const double t0 = now_us();
        TRY(cw_copy_to_device(hs, slot, host_in, IN_WORDS * sizeof(unsigned)));
        TRY(cw_stream_synchronize(hs)); /* the input is on the GPU before the doorbell */
        uint64_t seq = 0;
        TRY(cw_resident_data_ready(r, &seq));
        TRY(cw_resident_wait_result(r, seq, 1000));
        const double t1 = now_us();
        TRY(cw_copy_to_host(hs, host_out, sh.result, N * sizeof(unsigned)));
        TRY(cw_stream_synchronize(hs));
        const double t2 = now_us();
        round_trip[k] = t2 - t0;
        request[k] = t1 - t0;
        for (unsigned i = 0; i < N; i++) {
            unsigned a = host_in[i % IN_WORDS] * 3u + i + (unsigned)seq;
            unsigned want = (a * 2u + 1u) * 5u + (a * 3u + 7u);
            if (host_out[i] != want) {
                if (bad < 5)
                    fprintf(stderr, "diamond_resident: request %llu: out[%u] = %u, want %u\n",
                            (unsigned long long)seq, i, host_out[i], want);
                bad++;
            }
        }
    }
    ok = bad == 0 && !sh.bad_stream;
    printf("%d requests: every output right: %s\n", REQUESTS, ok ? "yes" : "NO");
    printf("round trip (copy in, request, result, copy out): median %.1f us; copy in + request alone: median "
           "%.1f us\n",
           median(round_trip, REQUESTS), median(request, REQUESTS));
    cw_resident_info stats;
    TRY(cw_resident_get_info(r, &stats));
    printf("the GPU's own clock: %llu iterations, per iteration min %.2f us, median %.2f us, max %.2f us\n",
           (unsigned long long)stats.iterations, stats.iter_min_ns / 1e3, stats.iter_median_ns / 1e3,
           stats.iter_max_ns / 1e3);
    TRY(cw_resident_tear_down(r, 1000));
    printf("torn down\n");

out:
    /* the loop first (it uses the pipeline's port memory), then the pipeline */
    if (r && cw_resident_tear_down(r, 1000) != CW_SUCCESS) {
        /* it did not stop: the GPU may still use the memory, so free nothing */
        fprintf(stderr, "diamond_resident: %s\n", cw_last_error()->message);
        return 1;
    }
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
    if (hs) cw_stream_synchronize(hs);
    cw_buffer_destroy(&result);
    cw_host_free(ctx, (void **)&host_in);
    cw_host_free(ctx, (void **)&host_out);
    cw_module_destroy(&mod);
    cw_program_destroy(&prog);
    cw_stream_destroy(&hs);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
