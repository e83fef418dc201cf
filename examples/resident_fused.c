/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The resident loop's fused persistent mode: the workload is given as two
 * device functions (stages) in CUDA source; cuweave compiles one persistent
 * kernel that polls the doorbell, runs the stages with a grid-wide barrier
 * between them and signals the result, and the host drives it with the
 * same calls as a graph loop (cw_resident_next_input, data_ready,
 * wait_result, tear_down).
 *
 * Stage "scale" has every thread of the grid double one element of the
 * request's input; stage "reduce" runs after the grid barrier, so block 0
 * sees every block's elements and sums them. 1000 requests through two
 * input slots (the host fills the slot of request n+1 while request n
 * runs); every sum is checked. Prints the grid cuweave chose (the most
 * blocks that fit co-resident) and the round trip.
 *
 * Without a GPU or NVRTC it says why and exits 77; exits 1 when a call
 * fails or a result is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

enum { N = 4096, REQUESTS = 1000 };

/* user: struct { unsigned tmp[N]; unsigned long long sum[REQUESTS + 1]; } in mapped host memory */
static const char *k_stages =
    "#include \"cuweave/resident_device.h\"\n"
    "#define N 4096\n"
    "extern \"C\" __device__ void scale(cw_resident_ctl *ctl, void *user) {\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    unsigned *tmp = (unsigned *)user;\n"
    "    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)\n"
    "        tmp[i] = 2u * in[i];\n"
    "}\n"
    "extern \"C\" __device__ void reduce(cw_resident_ctl *ctl, void *user) {\n"
    "    const unsigned *tmp = (const unsigned *)user;\n"
    "    unsigned long long *sum = (unsigned long long *)((unsigned *)user + N);\n"
    "    if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "        unsigned long long s = 0;\n"
    "        for (unsigned i = 0; i < N; i++) s += tmp[i];\n"
    "        sum[cw_resident_sequence(ctl)] = s;\n"
    "    }\n"
    "}\n";

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#define TRY(call)                                                                                 \
    do {                                                                                          \
        if ((call) != CW_SUCCESS) {                                                               \
            fprintf(stderr, "resident_fused: %s: %s\n", #call, cw_last_error()->message);         \
            goto out;                                                                             \
        }                                                                                         \
    } while (0)

int main(void) {
    printf("resident_fused: a fused persistent loop of two stages\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st == CW_SUCCESS && !cw_driver_has(CW_FEATURE_NVRTC)) {
        printf("no NVRTC here: %s\n", cw_last_error()->message);
        return 77;
    }
    int ok = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    cw_resident *r = NULL;
    void *user = NULL;
    static unsigned input[N];
    TRY(st);
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&s, ctx, NULL));
    const size_t user_bytes = N * sizeof(unsigned) + (REQUESTS + 1) * sizeof(unsigned long long);
    TRY(cw_host_alloc(&user, ctx, user_bytes)); /* mapped: the GPU writes, the host reads */

    cw_resident_settings set;
    cw_resident_settings_default(&set);
    set.input_slots = 2;
    set.input_bytes = sizeof input;
    set.sync_with_host = 1; /* the sums in host memory are visible when a result is */
    TRY(cw_resident_create(&r, ctx, &set));
    const char *stages[] = {"scale", "reduce"};
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = k_stages;
    f.stages = stages;
    f.stage_count = 2;
    f.grid_blocks = 0; /* the most that fit co-resident */
    f.block_threads = 256;
    f.user = (cw_devptr)(uintptr_t)user;
    TRY(cw_resident_set_fused(r, &f));
    cw_resident_info info;
    TRY(cw_resident_get_info(r, &info));
    printf("  grid: %u blocks of %u threads (at most %u co-resident)\n", info.grid_blocks, info.block_threads,
           info.max_grid_blocks);
    TRY(cw_resident_launch(r));

    const unsigned long long *sums = (const unsigned long long *)((const unsigned *)user + N);
    double t0 = now_us();
    unsigned wrong = 0;
    for (unsigned k = 1; k <= REQUESTS; k++) {
        cw_devptr slot = 0;
        TRY(cw_resident_next_input(r, 1000, &slot)); /* the slot request k reads, once free */
        unsigned long long want = 0;
        for (unsigned i = 0; i < N; i++) {
            input[i] = k + i;
            want += 2ull * (k + i);
        }
        TRY(cw_copy_to_device(s, slot, input, sizeof input));
        TRY(cw_stream_synchronize(s));
        uint64_t seq = 0;
        TRY(cw_resident_data_ready(r, &seq));
        TRY(cw_resident_wait_result(r, seq, 1000));
        if (sums[seq] != want) {
            if (wrong++ < 5)
                fprintf(stderr, "resident_fused: request %llu: sum %llu, want %llu\n", (unsigned long long)seq,
                        sums[seq], want);
        }
    }
    const double per = (now_us() - t0) / REQUESTS;
    TRY(cw_resident_get_info(r, &info));
    printf("  %u requests, %u wrong; %.1f us per request (host, with the input copy); GPU median %.2f us\n",
           REQUESTS, wrong, per, info.iter_median_ns / 1e3);
    TRY(cw_resident_tear_down(r, 1000));
    ok = wrong == 0;
out:
    cw_resident_destroy(&r);
    cw_host_free(ctx, &user);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    printf("resident_fused: %s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
