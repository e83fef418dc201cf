/* SPDX-License-Identifier: BSD-2-Clause */
/* The README's complete program: allocate, fill with a built-in kernel on stream a, order stream b
 * after a, run a kernel compiled by NVRTC on b, read back, check. Exit 77 without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <cuweave/cuweave.h>
#define TRY(x) do { if ((x) != CW_SUCCESS) { fprintf(stderr, "%s\n", cw_last_error()->message); return 1; } } while (0)

static const char *source = "extern \"C\" __global__ void add_one(unsigned *x, unsigned n) {\n"
                            "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i < n) x[i] += 1;\n}\n";
enum { N = 1 << 20 };
static uint32_t host[N];

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return printf("no GPU: %s\n", cw_last_error()->message), 77;
    cw_context *ctx; cw_stream *a, *b; cw_buffer *buf; cw_program *prog; cw_module *mod; cw_kernel *fill, *add_one;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&a, ctx, NULL));
    TRY(cw_stream_create(&b, ctx, NULL));
    TRY(cw_buffer_create(&buf, a, sizeof host));          /* stream-ordered: usable by work on a */
    cw_devptr x; uint32_t value = 41; uint64_t count = N; unsigned n = N;
    TRY(cw_buffer_get_writable(buf, &x));
    cw_launch_config cfg; cw_launch_config_default(&cfg); cfg.grid[0] = N / 256; cfg.block[0] = 256;
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &fill));
    TRY(cw_kernel_launch(fill, a, &cfg, (void *[]){&x, &value, &count}));
    TRY(cw_program_compile(&prog, ctx, source, NULL));    /* NVRTC, then the kernel cache */
    TRY(cw_module_load(&mod, prog));
    TRY(cw_module_get_kernel(mod, "add_one", &add_one));
    TRY(cw_stream_wait(b, a));                            /* b's later work runs after a's fill */
    TRY(cw_kernel_launch(add_one, b, &cfg, (void *[]){&x, &n}));
    TRY(cw_copy_to_host(b, host, x, sizeof host));
    TRY(cw_buffer_use(buf, b));                           /* the free waits for b's work */
    TRY(cw_stream_synchronize(b));
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += host[i] != 42;
    printf("%d values, %zu wrong\n", N, wrong);
    cw_buffer_destroy(&buf); cw_module_destroy(&mod); cw_program_destroy(&prog);
    cw_stream_destroy(&b); cw_stream_destroy(&a); cw_context_destroy(&ctx);
    return wrong != 0;
}
