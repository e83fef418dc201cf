/* SPDX-License-Identifier: BSD-2-Clause */
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
 * why and exits 77. Exits 1 when a call fails.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/green.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o green
 */
#include <stdio.h>

#include <cuweave/cuweave.h>

#define TRY(expr)                                                           \
    do {                                                                    \
        if ((expr) != CW_SUCCESS) {                                         \
            fprintf(stderr, "green: %s\n", cw_last_error()->message);        \
            goto out;                                                       \
        }                                                                   \
    } while (0)

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "green: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }

    cw_partition_caps caps;
    if (cw_partition_get_caps(0, &caps) != CW_SUCCESS) {
        fprintf(stderr, "green: %s\n", cw_last_error()->message);
        return 1;
    }
    printf("device 0: %u SMs; green contexts %s", caps.sm_count, caps.supported ? "supported" : "not supported");
    if (caps.supported)
        printf(" (partitions of at least %u SMs, in multiples of %u)", caps.min_partition, caps.granularity);
    printf("\n");
    if (!caps.supported) return 77;

    int ok = 0;
    cw_partition_group *group = NULL;
    cw_stream *fast = NULL, *bulk = NULL;
    cw_partition_group_info group_info;
    cw_partition_info fast_info, bulk_info;

    /* one 16-SM partition, the rest left over and the default (-1) */
    const unsigned sizes[] = {16};
    TRY(cw_partition_group_create(&group, 0, sizes, 1, -1));
    TRY(cw_partition_group_get_info(group, &group_info));
    TRY(cw_partition_group_get_partition(group, 0, &fast_info));
    TRY(cw_partition_group_get_partition(group, group_info.default_index, &bulk_info)); /* the leftover one */
    printf("%zu partitions: fast %u SMs, leftover %u SMs%s\n", group_info.count, fast_info.sm_count,
           bulk_info.sm_count, bulk_info.is_default ? " (the default)" : "");

    /* a stream on each (cuGreenCtxStreamCreate; always non-blocking); the
     * partitions' contexts are borrowed from the group */
    TRY(cw_stream_create(&fast, fast_info.context, NULL));
    TRY(cw_stream_create(&bulk, bulk_info.context, NULL));

    /* work enqueued on `fast` from now on waits for what `bulk` has so far,
     * on the GPU: partitions of one device order like any two streams */
    TRY(cw_stream_wait(fast, bulk));
    TRY(cw_stream_synchronize(fast));
    printf("ordered the fast partition's stream after the leftover's\n");

    /* the group can go first: its partitions stay while streams made on
     * them live, and the streams keep working */
    cw_partition_group_destroy(&group);
    TRY(cw_stream_wait(bulk, fast));
    TRY(cw_stream_synchronize(bulk));
    printf("the group is gone; its partitions' streams still work\n");
    ok = 1;

out:
    cw_stream_destroy(&fast);
    cw_stream_destroy(&bulk); /* the last objects on the partitions: they go now */
    cw_partition_group_destroy(&group);
    if (ok) printf("done\n");
    return ok ? 0 : 1;
}
