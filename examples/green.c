/*
 * Green contexts with cuweave: split device 0 into a 16-SM partition for
 * latency-critical work and the leftover SMs for everything else, make a
 * stream on each, order one after the other, and tear it all down.
 *
 * The partitions are disjoint (one driver split makes them both); each is a
 * cw_context of kind CW_CONTEXT_GREEN on which streams, pools, ordering,
 * futures and timers work as on any context. This example launches nothing
 * (docs/green.md and bench/bench_green.c show kernels on partitions).
 *
 * Without a GPU, or when the device or driver has no green contexts, it says
 * why and exits 0. Exits 1 when a call fails.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/green.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o green
 */
#include <stdio.h>

#include <cuweave/cuweave.h>

#define TRY(expr)                                                           \
    do {                                                                    \
        if ((expr) != CW_SUCCESS) {                                         \
            fprintf(stderr, "green: %s\n", cw_last_error_message());        \
            goto out;                                                       \
        }                                                                   \
    } while (0)

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error_message());
        return 0;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "green: cw_init: %s\n", cw_last_error_message());
        return 1;
    }

    cw_green_caps caps;
    if (cw_green_query(0, &caps) != CW_SUCCESS) {
        fprintf(stderr, "green: %s\n", cw_last_error_message());
        return 1;
    }
    printf("device 0: %u SMs; green contexts %s", caps.sm_count, caps.supported ? "supported" : "not supported");
    if (caps.supported)
        printf(" (partitions of at least %u SMs, in multiples of %u)", caps.min_partition, caps.granularity);
    printf("\n");
    if (!caps.supported) return 0;

    int ok = 0;
    cw_partition_set *set = NULL;
    cw_stream *fast = NULL, *bulk = NULL;
    cw_context *fast_ctx = NULL, *bulk_ctx = NULL;
    cw_partition_info fast_info, bulk_info;
    size_t count = 0;

    /* one 16-SM partition, the rest left over and the default (-1) */
    const unsigned sizes[] = {16};
    TRY(cw_partition_set_create(&set, 0, sizes, 1, -1));
    TRY(cw_partition_set_count(set, &count));
    TRY(cw_partition_set_get(set, 0, &fast_ctx)); /* borrowed: lives with the set */
    TRY(cw_partition_set_default(set, &bulk_ctx)); /* the leftover partition */
    TRY(cw_partition_set_info(set, 0, &fast_info));
    TRY(cw_partition_set_info(set, count - 1, &bulk_info));
    printf("%zu partitions: fast %u SMs, leftover %u SMs%s\n", count, fast_info.sm_count, bulk_info.sm_count,
           bulk_info.is_default ? " (the default)" : "");

    /* a stream on each (cuGreenCtxStreamCreate; always non-blocking) */
    TRY(cw_stream_create(&fast, fast_ctx, NULL));
    TRY(cw_stream_create(&bulk, bulk_ctx, NULL));

    /* work enqueued on `fast` from now on waits for what `bulk` has so far,
     * on the GPU: partitions of one device order like any two streams */
    TRY(cw_stream_wait(fast, bulk));
    TRY(cw_stream_synchronize(fast));
    printf("ordered the fast partition's stream after the leftover's\n");

    /* the set refuses to go while objects made on it live */
    if (cw_partition_set_destroy(&set) == CW_ERROR_INVALID_STATE)
        printf("destroying the set with live streams is refused: %s\n", cw_last_error_message());
    ok = 1;

out:
    cw_stream_destroy(&fast);
    cw_stream_destroy(&bulk);
    if (cw_partition_set_destroy(&set) != CW_SUCCESS) {
        fprintf(stderr, "green: %s\n", cw_last_error_message());
        ok = 0;
    }
    if (ok) printf("done\n");
    return ok ? 0 : 1;
}
