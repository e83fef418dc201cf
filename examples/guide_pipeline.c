/* SPDX-License-Identifier: BSD-2-Clause */
/* docs/guide.md, "Pipelines": a source operator fills a buffer with its iteration's number on its own
 * stream and emits it; a sink, whose stream waits for the source's on the GPU, copies it back. Four
 * iterations, every value checked. Exit 77 without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuweave/cuweave.h>
#define TRY(x) do { if ((x) != CW_SUCCESS) { fprintf(stderr, "%s\n", cw_last_error()->message); return 1; } } while (0)
#define OP_TRY(x) do { cw_status st_ = (x); if (st_ != CW_SUCCESS) return st_; } while (0)
enum { N = 4096, ITERATIONS = 4 };
static uint32_t results[ITERATIONS][N];
static cw_kernel *fill;

static cw_status source(cw_io *io, void *user) {
    (void)user;
    cw_io_info info; cw_stream *s; cw_buffer *b; cw_devptr x;
    OP_TRY(cw_io_get_info(io, &info));
    OP_TRY(cw_io_receive_stream(io, NULL, &s));           /* the source's own stream */
    OP_TRY(cw_io_alloc(&b, io, N * sizeof(uint32_t)));    /* from the pipeline's cache, on s */
    OP_TRY(cw_buffer_get_writable(b, &x));
    uint32_t value = (uint32_t)info.iteration + 1; uint64_t count = N;
    cw_launch_config cfg; cw_launch_config_default(&cfg); cfg.grid[0] = N / 256; cfg.block[0] = 256;
    OP_TRY(cw_kernel_launch(fill, s, &cfg, (void *[]){&x, &value, &count}));
    return cw_io_emit(io, "out", NULL, b);                /* the message carries s */
}

static cw_status sink(cw_io *io, void *user) {
    (void)user;
    cw_io_info info; cw_message m; cw_stream *s; cw_devptr x;
    OP_TRY(cw_io_get_info(io, &info));
    OP_TRY(cw_io_receive(io, "in", &m));
    OP_TRY(cw_io_receive_stream(io, "in", &s));           /* waits on the GPU for the source's work */
    OP_TRY(cw_buffer_get_ptr(m.buffer, &x));
    OP_TRY(cw_copy_to_host(s, results[info.iteration], x, sizeof results[0]));
    return CW_SUCCESS;                                     /* cw_pipeline_synchronize waits for the copies */
}

static cw_status add(cw_pipeline *p, const char *name, cw_status (*compute)(cw_io *, void *), const char *in,
                     const char *out) {
    cw_operator_ops ops; memset(&ops, 0, sizeof ops); ops.compute = compute;
    cw_operator *op;
    OP_TRY(cw_operator_create(&op, name, &ops, NULL, NULL));
    cw_status st = in ? cw_operator_add_input(op, in, NULL) : cw_operator_add_output(op, out, NULL);
    if (st == CW_SUCCESS) st = cw_pipeline_add(p, op);   /* the pipeline owns it now */
    if (st != CW_SUCCESS) cw_operator_destroy(&op);
    return st;
}

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return printf("no GPU: %s\n", cw_last_error()->message), 77;
    cw_context *ctx; cw_pipeline *p;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &fill));
    TRY(cw_pipeline_create(&p, ctx, NULL));               /* one thread, a stream pool of its own */
    TRY(add(p, "source", source, NULL, "out"));
    TRY(add(p, "sink", sink, "in", NULL));
    TRY(cw_pipeline_connect(p, "source", "out", "sink", "in"));
    TRY(cw_pipeline_check(p));
    TRY(cw_pipeline_run(p, ITERATIONS));                  /* returns when the compute calls have */
    TRY(cw_pipeline_synchronize(p));                      /* and the GPU too */
    size_t wrong = 0;
    for (int it = 0; it < ITERATIONS; it++)
        for (int i = 0; i < N; i++) wrong += results[it][i] != (uint32_t)it + 1;
    printf("%d iterations of %d values, %zu wrong\n", ITERATIONS, N, wrong);
    cw_pipeline_destroy(&p); cw_context_destroy(&ctx);
    return wrong != 0;
}
