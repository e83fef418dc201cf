/* SPDX-License-Identifier: BSD-2-Clause */
/* docs/guide.md, "Graphs": two launches captured from a stream into a graph, instantiated once and
 * launched three times, each launch adding 1 after a fill of 10. Exit 77 without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <cuweave/cuweave.h>
#define TRY(x) do { if ((x) != CW_SUCCESS) { fprintf(stderr, "%s\n", cw_last_error()->message); return 1; } } while (0)
static const char *source = "extern \"C\" __global__ void add_one(unsigned *x, unsigned n) {\n"
                            "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i < n) x[i] += 1;\n}\n";
enum { N = 1 << 16 };
static uint32_t host[N];

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return printf("no GPU: %s\n", cw_last_error()->message), 77;
    cw_context *ctx; cw_stream *s; cw_buffer *buf; cw_kernel *fill, *add; cw_program *p; cw_module *m;
    cw_graph *g = NULL; cw_graph_exec *e;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&s, ctx, NULL));
    TRY(cw_buffer_create(&buf, s, sizeof host));          /* allocate before capturing: a graph owns no pool memory */
    cw_devptr x; uint32_t ten = 10; uint64_t count = N; unsigned n = N;
    TRY(cw_buffer_get_writable(buf, &x));
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &fill));
    TRY(cw_program_compile(&p, ctx, source, NULL));
    TRY(cw_module_load(&m, p));
    TRY(cw_module_get_kernel(m, "add_one", &add));
    cw_launch_config cfg; cw_launch_config_default(&cfg); cfg.grid[0] = N / 256; cfg.block[0] = 256;
    TRY(cw_kernel_launch(fill, s, &cfg, (void *[]){&x, &ten, &count}));   /* runs now */
    TRY(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));   /* from here s records instead of running */
    TRY(cw_kernel_launch(add, s, &cfg, (void *[]){&x, &n}));
    TRY(cw_capture_end(&g, s));
    TRY(cw_graph_instantiate(&e, g, 0));
    for (int i = 0; i < 3; i++) TRY(cw_graph_exec_launch(e, s));         /* in s's order */
    TRY(cw_copy_to_host(s, host, x, sizeof host));
    TRY(cw_buffer_use(buf, s));
    TRY(cw_stream_synchronize(s));
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += host[i] != 13;
    printf("%d values, %zu wrong\n", N, wrong);
    cw_graph_exec_destroy(&e); cw_graph_destroy(&g); cw_buffer_destroy(&buf);
    cw_module_destroy(&m); cw_program_destroy(&p); cw_stream_destroy(&s); cw_context_destroy(&ctx);
    return wrong != 0;
}
