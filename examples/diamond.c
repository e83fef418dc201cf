/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A diamond of operators run by the CPU-driven executor (cuweave/flow.h):
 *
 *            +--> B (x*2+1, spins 2 ms) --+
 *   A (fill) |                            +--> C (5*b + d, copies back)
 *            +--> D (x*3+7, spins 2 ms) --+
 *
 * A is the source: it takes its internal stream (cw_io_receive_stream with no
 * port), allocates a buffer on it (cw_io_alloc), fills it with a kernel and
 * emits it on "out", which goes to B.in and D.in. B and D each receive it,
 * get their own internal stream ordered behind A's (cw_io_receive_stream on
 * "in": an event, no CPU wait), allocate an output buffer and run a slowish
 * kernel: one block that spins 2 ms on the GPU clock (%globaltimer) and then
 * transforms its input. C takes "in_b" and "in_d": asking for its stream on
 * both ports returns one stream ordered behind both B and D. It combines the
 * two, copies the result and the iteration's timestamps back into page-locked
 * memory (cw_copy_to_host into cw_host_alloc memory) and waits for its stream.
 *
 * The executor calls the operators one after the other on this thread; the
 * compute calls only enqueue work, so B's and D's kernels run on the GPU at
 * the same time. Every kernel writes its start and end time (the GPU's
 * global timer) into one small stamps buffer the example allocates before
 * the run, 8 words per iteration. The example prints them relative to A's
 * start, checks that B and D started after A ended and C after both B and D
 * ended, reports whether B and D overlapped, and checks every output value.
 * Nothing frees a buffer by hand: the pipeline records each operator's stream
 * as a use of every buffer it touched, and the free waits for all of them.
 *
 * Kernels are compiled at run time with NVRTC. Without a GPU or NVRTC it says
 * why and exits 77; exits 1 when a call fails, a value is wrong or the order
 * was broken.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/diamond.c \
 *      build/make/libcuweave.so -o diamond
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuweave/cuweave.h>

enum {
    N = 4096,       /* 32-bit values per message */
    ITERATIONS = 5, /* iterations of the pipeline */
    STAMPS = 8      /* per iteration: start, end of A, B, D, C (GPU ns) */
};

static const unsigned long long A_NS = 200000;  /* A spins 0.2 ms */
static const unsigned long long BD_NS = 2000000; /* B and D spin 2 ms each */
static const unsigned long long C_NS = 200000;  /* C spins 0.2 ms */

/* One block per kernel: small enough that B and D share the GPU. */
static const char *k_source =
    "__device__ __forceinline__ unsigned long long now_ns() {\n"
    "    unsigned long long t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    return t;\n"
    "}\n"
    "// thread 0 stamps the start and spins; everyone waits for it\n"
    "__device__ void begin(unsigned long long *stamp, unsigned long long spin_ns) {\n"
    "    if (threadIdx.x == 0) {\n"
    "        unsigned long long t0 = now_ns();\n"
    "        stamp[0] = t0;\n"
    "        while (now_ns() - t0 < spin_ns) { }\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    "__device__ void end(unsigned long long *stamp) {\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) stamp[1] = now_ns();\n"
    "}\n"
    "extern \"C\" __global__ void produce(unsigned *out, unsigned n, unsigned it,\n"
    "                                    unsigned long long spin_ns, unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = i * 3u + it * 1000u + 1u;\n"
    "    end(stamp);\n"
    "}\n"
    "extern \"C\" __global__ void transform(const unsigned *in, unsigned *out, unsigned n, unsigned mul,\n"
    "                                      unsigned add, unsigned long long spin_ns,\n"
    "                                      unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i] * mul + add;\n"
    "    end(stamp);\n"
    "}\n"
    "extern \"C\" __global__ void combine(const unsigned *b, const unsigned *d, unsigned *out, unsigned n,\n"
    "                                    unsigned long long spin_ns, unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = b[i] * 5u + d[i];\n"
    "    end(stamp);\n"
    "}\n";

/* What the operators share. */
typedef struct shared {
    cw_kernel *produce, *transform, *combine;
    cw_devptr stamps;                /* device: ITERATIONS x STAMPS words */
    unsigned *result;               /* page-locked: ITERATIONS x N */
    unsigned long long *host_stamps; /* page-locked: ITERATIONS x STAMPS */
    int bad_stream;                 /* C got two different streams */
} shared;

/* B and D: one compute function, two parameter sets. */
typedef struct branch {
    shared *sh;
    unsigned mul, add;
    unsigned slot; /* their stamps: 2 (B) or 4 (D) */
} branch;

#define OP_TRY(expr)                          \
    do {                                      \
        cw_status st_ = (expr);               \
        if (st_ != CW_SUCCESS) return st_;    \
    } while (0)

static void one_block(cw_launch_config *lc) {
    cw_launch_config_default(lc);
    lc->block[0] = 256;
}

static cw_status iteration_of(cw_io *io, unsigned *it) {
    cw_io_info io_info = {0};
    OP_TRY(cw_io_get_info(io, &io_info));
    uint64_t i = io_info.iteration;
    if (i >= ITERATIONS) return CW_ERROR_INVALID_STATE; /* more iterations than the arrays hold */
    *it = (unsigned)i;
    return CW_SUCCESS;
}

/* A: the source. */
static cw_status a_compute(cw_io *io, void *user) {
    shared *sh = user;
    unsigned it;
    OP_TRY(iteration_of(io, &it));
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, NULL, &s)); /* the internal stream, no ordering */
    cw_buffer *b;
    OP_TRY(cw_io_alloc(&b, io, N * sizeof(unsigned))); /* on s; the call holds it until compute returns */
    cw_devptr out, stamp = sh->stamps + (cw_devptr)it * STAMPS * 8 + 0 * 8;
    OP_TRY(cw_buffer_get_writable(b, &out));
    unsigned n = N;
    unsigned long long spin = A_NS;
    void *args[] = {&out, &n, &it, &spin, &stamp};
    cw_launch_config lc;
    one_block(&lc);
    OP_TRY(cw_kernel_launch(sh->produce, s, &lc, args));
    return cw_io_emit(io, "out", NULL, b); /* takes its own reference; carries s */
}

/* B and D. */
static cw_status branch_compute(cw_io *io, void *user) {
    branch *br = user;
    unsigned it;
    OP_TRY(iteration_of(io, &it));
    cw_message m;
    OP_TRY(cw_io_receive(io, "in", &m));
    if (!m.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s;
    OP_TRY(cw_io_receive_stream(io, "in", &s)); /* own stream, waits for A's on the GPU */
    cw_buffer *o;
    OP_TRY(cw_io_alloc(&o, io, N * sizeof(unsigned)));
    cw_devptr in, out, stamp = br->sh->stamps + (cw_devptr)it * STAMPS * 8 + br->slot * 8;
    OP_TRY(cw_buffer_get_ptr(m.buffer, &in)); /* shared by B and D: read-only */
    OP_TRY(cw_buffer_get_writable(o, &out));
    unsigned n = N, mul = br->mul, add = br->add;
    unsigned long long spin = BD_NS;
    void *args[] = {&in, &out, &n, &mul, &add, &spin, &stamp};
    cw_launch_config lc;
    one_block(&lc);
    OP_TRY(cw_kernel_launch(br->sh->transform, s, &lc, args));
    return cw_io_emit(io, "out", NULL, o);
}

/* C: the sink. */
static cw_status c_compute(cw_io *io, void *user) {
    shared *sh = user;
    unsigned it;
    OP_TRY(iteration_of(io, &it));
    cw_message mb, md;
    OP_TRY(cw_io_receive(io, "in_b", &mb));
    OP_TRY(cw_io_receive(io, "in_d", &md));
    if (!mb.buffer || !md.buffer) return CW_ERROR_INVALID_STATE;
    cw_stream *s, *s2;
    OP_TRY(cw_io_receive_stream(io, "in_b", &s));  /* behind B */
    OP_TRY(cw_io_receive_stream(io, "in_d", &s2)); /* the same stream, now behind D too */
    if (s != s2) {
        sh->bad_stream = 1;
        fprintf(stderr, "diamond: C was given two different streams for its two inputs\n");
        return CW_ERROR_INTERNAL;
    }
    cw_buffer *o;
    OP_TRY(cw_io_alloc(&o, io, N * sizeof(unsigned)));
    cw_devptr bp, dp, out, row = sh->stamps + (cw_devptr)it * STAMPS * 8;
    cw_devptr stamp = row + 6 * 8;
    OP_TRY(cw_buffer_get_ptr(mb.buffer, &bp));
    OP_TRY(cw_buffer_get_ptr(md.buffer, &dp));
    OP_TRY(cw_buffer_get_writable(o, &out));
    unsigned n = N;
    unsigned long long spin = C_NS;
    void *args[] = {&bp, &dp, &out, &n, &spin, &stamp};
    cw_launch_config lc;
    one_block(&lc);
    OP_TRY(cw_kernel_launch(sh->combine, s, &lc, args));
    /* the result and this iteration's 8 stamps, in stream order after combine */
    OP_TRY(cw_copy_to_host(s, sh->result + (size_t)it * N, out, N * sizeof(unsigned)));
    OP_TRY(cw_copy_to_host(s, sh->host_stamps + (size_t)it * STAMPS, row, STAMPS * 8));
    return cw_stream_synchronize(s); /* the host memory holds them once this returns */
}

/* Makes an operator with its ports and adds it to p (destroying it if that fails). */
static cw_status add_op(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), void *user,
                        const char *in1, const char *in2, const char *out) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    OP_TRY(cw_operator_create(&op, name, &ops, user, NULL));
    cw_status st = CW_SUCCESS;
    if (in1) st = cw_operator_add_input(op, in1, NULL);
    if (st == CW_SUCCESS && in2) st = cw_operator_add_input(op, in2, NULL);
    if (st == CW_SUCCESS && out) st = cw_operator_add_output(op, out, NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_add(p, op);
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
}

/* Checks and prints one iteration; returns 1 when the order held and every value is right. */
static int report(unsigned it, const unsigned *res, const unsigned long long *t, int *overlapped) {
    int bad = 0;
    for (unsigned i = 0; i < N; i++) {
        unsigned a = i * 3u + it * 1000u + 1u;
        unsigned b = a * 2u + 1u, d = a * 3u + 7u;
        unsigned want = b * 5u + d;
        if (res[i] != want) {
            if (bad < 3) fprintf(stderr, "diamond: iteration %u: out[%u] = %u, want %u\n", it, i, res[i], want);
            bad++;
        }
    }
#define US_(x) ((double)((long long)((x) - t[0])) / 1000.0)
    printf("iteration %u: A %7.1f..%7.1f  B %7.1f..%7.1f  D %7.1f..%7.1f  C %7.1f..%7.1f us\n", it, US_(t[0]),
           US_(t[1]), US_(t[2]), US_(t[3]), US_(t[4]), US_(t[5]), US_(t[6]), US_(t[7]));
#undef US_
    int ordered = t[2] >= t[1] && t[4] >= t[1] && t[6] >= t[3] && t[6] >= t[5];
    *overlapped = t[2] < t[5] && t[4] < t[3];
    long long both = (long long)((t[3] < t[5] ? t[3] : t[5]) - (t[2] > t[4] ? t[2] : t[4]));
    printf("             B and D overlapped: %s", *overlapped ? "yes" : "no");
    if (*overlapped) printf(" (for %.1f us)", both / 1000.0);
    printf("; A before B and D, C after both: %s; %d of %d values wrong\n", ordered ? "yes" : "NO", bad, N);
    return ordered && bad == 0 && t[0] != 0;
}

int main(void) {
    printf("diamond: A -> (B, D) -> C with the CPU executor, %d iterations; B and D spin %.1f ms each\n",
           ITERATIONS, BD_NS / 1e6);
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "diamond: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }

    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    cw_program *prog = NULL;
    cw_module *mod = NULL;
    cw_buffer *stamps = NULL;
    cw_pipeline *p = NULL;
    shared sh;
    memset(&sh, 0, sizeof sh);
    branch bb = {&sh, 2u, 1u, 2u}, bd = {&sh, 3u, 7u, 4u};
#define TRY(expr)                                                          \
    do {                                                                   \
        if ((expr) != CW_SUCCESS) {                                        \
            fprintf(stderr, "diamond: %s\n", cw_last_error()->message);     \
            if (cw_last_error()->status == CW_ERROR_COMPILE)               \
                fprintf(stderr, "%s", cw_jit_get_compile_log());                   \
            goto out;                                                      \
        }                                                                  \
    } while (0)

    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&s, ctx, NULL));

    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "diamond.cu";
    TRY(cw_program_compile(&prog, ctx, k_source, &ps));
    TRY(cw_module_load(&mod, prog));
    TRY(cw_module_get_kernel(mod, "produce", &sh.produce));
    TRY(cw_module_get_kernel(mod, "transform", &sh.transform));
    TRY(cw_module_get_kernel(mod, "combine", &sh.combine));
    /* load them now rather than at their first launch inside the timeline */
    TRY(cw_kernel_preload(sh.produce, ctx));
    TRY(cw_kernel_preload(sh.transform, ctx));
    TRY(cw_kernel_preload(sh.combine, ctx));

    /* The stamps: allocated on s and zeroed; once s is synchronized the
     * memory is usable from every stream. It lives across the whole run
     * (released below, when the pipeline's streams are idle). */
    static unsigned long long zero[ITERATIONS * STAMPS];
    TRY(cw_buffer_create(&stamps, s, sizeof zero));
    TRY(cw_buffer_get_writable(stamps, &sh.stamps));
    TRY(cw_copy_to_device(s, sh.stamps, zero, sizeof zero));
    TRY(cw_buffer_use(stamps, s));
    TRY(cw_stream_synchronize(s));
    TRY(cw_host_alloc((void **)&sh.result, ctx, (size_t)ITERATIONS * N * sizeof(unsigned)));
    TRY(cw_host_alloc((void **)&sh.host_stamps, ctx, sizeof zero));

    /* the pipeline: its own lease pool, every compute call on this thread */
    TRY(cw_pipeline_create(&p, ctx, NULL));
    TRY(add_op(p, "A", a_compute, &sh, NULL, NULL, "out"));
    TRY(add_op(p, "B", branch_compute, &bb, "in", NULL, "out"));
    TRY(add_op(p, "D", branch_compute, &bd, "in", NULL, "out"));
    TRY(add_op(p, "C", c_compute, &sh, "in_b", "in_d", NULL));
    TRY(cw_pipeline_connect(p, "A", "out", "B", "in"));
    TRY(cw_pipeline_connect(p, "A", "out", "D", "in"));
    TRY(cw_pipeline_connect(p, "B", "out", "C", "in_b"));
    TRY(cw_pipeline_connect(p, "D", "out", "C", "in_d"));
    TRY(cw_pipeline_check(p));
    TRY(cw_pipeline_run(p, ITERATIONS));

    cw_pipeline_info stats;
    TRY(cw_pipeline_get_info(p, &stats));
    printf("%llu iterations, %llu compute calls, %llu skipped, %llu stream fallbacks\n",
           (unsigned long long)stats.iterations, (unsigned long long)stats.computes,
           (unsigned long long)stats.skipped, (unsigned long long)stats.fallbacks);
    printf("device timestamps from A's start (us):\n");
    ok = stats.iterations == ITERATIONS && stats.computes == 4 * ITERATIONS && !sh.bad_stream;
    int overlaps = 0;
    for (unsigned it = 0; it < ITERATIONS; it++) {
        int overlapped = 0;
        ok &= report(it, sh.result + (size_t)it * N, sh.host_stamps + (size_t)it * STAMPS, &overlapped);
        overlaps += overlapped;
    }
    printf("B and D overlapped on the GPU in %d of %d iterations%s\n", overlaps, ITERATIONS,
           overlaps ? "" : " (CUWEAVE_SERIALIZE=1, or a GPU busy with other work?)");
    printf("every value right and the order kept: %s\n", ok ? "yes" : "NO");

out:
    /* C synchronized its stream, which waited for every other stream of its
     * iteration: nothing of the pipeline still runs. After a failure, wait. */
    if (!ok && ctx) cw_context_synchronize(ctx);
    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&stamps);
    cw_host_free(ctx, (void **)&sh.result);
    cw_host_free(ctx, (void **)&sh.host_stamps);
    cw_module_destroy(&mod);
    cw_program_destroy(&prog);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
