/* SPDX-License-Identifier: BSD-2-Clause */
/* docs/guide.md, "Streams, pools, ordering and futures": a leased stream, a fork whose child fills
 * half a buffer while the parent fills the other half, the join, a read-back, a future. Exit 77
 * without a GPU. */
#include <stdint.h>
#include <stdio.h>
#include <cuweave/cuweave.h>
#define TRY(x) do { if ((x) != CW_SUCCESS) { fprintf(stderr, "%s\n", cw_last_error()->message); return 1; } } while (0)
enum { N = 1 << 16 };
static uint32_t host[2 * N];

static cw_status fill(cw_kernel *k, cw_stream *s, cw_devptr dst, uint32_t value) {
    uint64_t count = N;
    cw_launch_config cfg; cw_launch_config_default(&cfg); cfg.grid[0] = N / 256; cfg.block[0] = 256;
    return cw_kernel_launch(k, s, &cfg, (void *[]){&dst, &value, &count});
}

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return printf("no GPU: %s\n", cw_last_error()->message), 77;
    cw_context *ctx; cw_stream_pool *pool; cw_stream *s, *child; cw_buffer *buf; cw_kernel *k; cw_future *done;
    TRY(cw_context_create(&ctx, 0));                      /* device 0's primary context */
    cw_stream_pool_settings ps; cw_stream_pool_settings_default(&ps); ps.max_streams = 4;
    TRY(cw_stream_pool_create(&pool, ctx, &ps));          /* lease mode: a stream is ours until released */
    TRY(cw_stream_pool_acquire(&s, pool, -1));
    TRY(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &k));
    TRY(cw_buffer_create(&buf, s, sizeof host));
    cw_devptr x; TRY(cw_buffer_get_writable(buf, &x));
    TRY(cw_stream_fork(&child, s));                       /* child waits for s's work so far (the allocation) */
    TRY(fill(k, s, x, 1));                                /* the two halves at once */
    TRY(fill(k, child, x + N * sizeof(uint32_t), 2));
    TRY(cw_stream_join(s, &child));                       /* s's later work waits for child's; child given back */
    TRY(cw_copy_to_host(s, host, x, sizeof host));
    TRY(cw_buffer_use(buf, s));
    TRY(cw_future_create(&done, s, CW_FUTURE_WRITE_VALUE)); /* completes when s gets here */
    TRY(cw_future_wait(done, -1));
    size_t wrong = 0;
    for (size_t i = 0; i < 2 * N; i++) wrong += host[i] != (i < N ? 1u : 2u);
    printf("%d values, %zu wrong\n", 2 * N, wrong);
    cw_future_destroy(&done); cw_buffer_destroy(&buf);
    TRY(cw_stream_pool_release(pool, &s));
    cw_stream_pool_destroy(&pool); cw_context_destroy(&ctx);
    return wrong != 0;
}
