/*
 * cuweave: green contexts — SM partitions of one device.
 *
 * A partition set splits one device's SMs into disjoint partitions in ONE
 * driver split (cuDevSmResourceSplitByCount into groups of the device's SM
 * granularity, recombined per partition with cuDevResourceGenerateDesc), so
 * partitions can never overlap (separately made splits can). The SMs that
 * no requested partition takes form a last, "leftover" partition.
 *
 * Each partition is a cw_context of kind CW_CONTEXT_GREEN, usable wherever a
 * context is: streams (made with cuGreenCtxStreamCreate, always
 * non-blocking), stream pools, ordering, futures, timers.
 *
 * Threading: the driver lets a green context be current on one thread at a
 * time, and calls that create objects on a partition make it current for
 * their duration. Create objects on one partition from one thread at a time;
 * using them (launches, cw_stream_wait, pool acquire/release/next, futures)
 * needs no current context and is free of that rule.
 */
#ifndef CUWEAVE_PARTITION_H
#define CUWEAVE_PARTITION_H

#include "cuweave/common.h"
#include "cuweave/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_partition_set cw_partition_set;

/* What a device offers for green contexts. */
typedef struct cw_green_caps {
    int supported;            /* 1 when green contexts can be made on the device */
    unsigned sm_count;        /* SMs of the device */
    unsigned min_partition;   /* smallest partition, in SMs (8 on the H100) */
    unsigned granularity;     /* partition sizes are multiples of this (8 on the H100) */
    int workqueues;           /* 1 when the driver has a work-queue resource (not in CUDA 13.0) */
    uint8_t reserved[44];
} cw_green_caps;

/*
 * Fills *caps for device ordinal `device`. Returns CW_SUCCESS (also when
 * unsupported: caps->supported is 0), CW_ERROR_INVALID_ARGUMENT, or what
 * cw_init() returns.
 */
CW_API cw_status cw_green_query(int device, cw_green_caps *caps);

/*
 * Splits device `device` into partitions of sm_counts[0..n-1] SMs (n >= 1),
 * plus a leftover partition of the SMs none of them takes (if any remain).
 * Each count must be at least caps.min_partition, at most caps.sm_count
 * and a multiple of caps.granularity, and their sum (taken without
 * overflow: counts that would wrap an unsigned are refused) at most what
 * one split can give; otherwise CW_ERROR_INVALID_ARGUMENT with a message
 * that names the partition at fault and says what would fit. n must be
 * below 64.
 * default_index names the partition cw_partition_set_default returns: 0..n-1,
 * or -1 for the leftover one (then SMs must be left over).
 *
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT; CW_ERROR_NOT_SUPPORTED when
 * the driver or device has no green contexts (the detail says which);
 * CW_ERROR_OUT_OF_MEMORY; what cw_init() returns; the driver's error.
 * Creating green contexts takes about 1-2 ms each on the H100.
 */
CW_API cw_status cw_partition_set_create(cw_partition_set **out, int device, const unsigned *sm_counts, size_t n,
                                         int default_index);

/*
 * Destroys the set and its green contexts. Refused with
 * CW_ERROR_INVALID_STATE (nothing destroyed, *set left as is) while any
 * object made on one of its partitions (stream, pool, timer, future) is
 * alive: destroy those first. Accepts NULL and a pointer to NULL
 * (CW_SUCCESS); sets *set to NULL on success.
 */
CW_API cw_status cw_partition_set_destroy(cw_partition_set **set);

/* Number of partitions, the leftover one included. */
CW_API cw_status cw_partition_set_count(const cw_partition_set *set, size_t *count);

/*
 * The partition at `index` (0..count-1; the leftover one, if any, is last)
 * as a cw_context of kind CW_CONTEXT_GREEN. Borrowed: valid while the set
 * lives; do not cw_context_destroy it.
 */
CW_API cw_status cw_partition_set_get(const cw_partition_set *set, size_t index, cw_context **ctx);

/* The default partition (default_index of create). Borrowed, as above. */
CW_API cw_status cw_partition_set_default(const cw_partition_set *set, cw_context **ctx);

typedef struct cw_partition_info {
    unsigned sm_count;  /* SMs the driver gave the partition */
    int leftover;       /* 1 for the leftover partition */
    int is_default;     /* 1 for the default partition */
    uint8_t reserved[52];
} cw_partition_info;

CW_API cw_status cw_partition_set_info(const cw_partition_set *set, size_t index, cw_partition_info *info);

/*
 * The SM ids of a partition. The CUDA 13.0 driver does not report them, so
 * this returns CW_ERROR_NOT_SUPPORTED saying so; read %smid in a kernel
 * launched on the partition instead (tests/test_gpu_green.c does).
 */
CW_API cw_status cw_partition_set_sm_ids(const cw_partition_set *set, size_t index, unsigned *ids, size_t cap,
                                         size_t *count);

/*
 * Gives a partition its own work queues, so that independent streams do not
 * share hardware queues. The CUDA 13.0 driver has no work-queue resource:
 * this returns CW_ERROR_NOT_SUPPORTED saying so (and cw_green_caps.workqueues
 * is 0) until a driver that has one is supported.
 */
CW_API cw_status cw_partition_set_request_workqueues(cw_partition_set *set, size_t index, unsigned count);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_PARTITION_H */
