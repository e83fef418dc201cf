/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: green contexts — SM partitions of one device.
 *
 * A partition group splits one device's SMs into disjoint partitions in ONE
 * driver split (cuDevSmResourceSplitByCount into groups of the device's SM
 * granularity, recombined per partition with cuDevResourceGenerateDesc), so
 * partitions can never overlap (separately made splits can). The SMs that
 * no requested partition takes form a last, "leftover" partition.
 *
 * Each partition is a cw_context of kind CW_CONTEXT_GREEN, usable wherever a
 * context is: streams (made with cuGreenCtxStreamCreate, always
 * non-blocking), stream pools, ordering, futures, timers. The group holds
 * each partition's context; objects made on a partition hold it too, so it
 * outlives the group while they live.
 *
 * Threading: the driver lets a green context be current on one thread at a
 * time, and calls that create objects on a partition make it current for
 * their duration. Create objects on one partition from one thread at a time;
 * using them (launches, cw_stream_wait, pool acquire/release/get_next, futures)
 * needs no current context and is free of that rule.
 */
#ifndef CUWEAVE_PARTITION_H
#define CUWEAVE_PARTITION_H

#include "cuweave/common.h"
#include "cuweave/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_partition_group cw_partition_group;

/* What a device offers for green contexts. Filled by cw_partition_get_caps(). */
typedef struct cw_partition_caps {
    int supported;            /* 1 when green contexts can be made on the device */
    unsigned sm_count;        /* SMs of the device */
    unsigned min_partition;   /* smallest partition, in SMs (8 on the H100) */
    unsigned granularity;     /* partition sizes are multiples of this (8 on the H100) */
    int workqueues;           /* 1 when the driver has a work-queue resource (not in CUDA 13.0) */
    uint8_t reserved[44];     /* zeroed; room for new fields */
} cw_partition_caps;

/*
 * Fills *caps for device ordinal `device`. A device or driver without green
 * contexts is not an error: caps->supported is 0 (and sm_count the
 * device's).
 *
 * Returns:
 *   CW_SUCCESS                 *caps describes the device.
 *   CW_ERROR_INVALID_ARGUMENT  caps is NULL; device is negative or not below
 *                              the device count.
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than 12.0 (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            a device query failed (detail: the call).
 * On failure *caps is untouched.
 */
CW_API cw_status cw_partition_get_caps(int device, cw_partition_caps *caps);

/*
 * Splits device `device` into partitions of sm_counts[0..n-1] SMs (n >= 1),
 * plus a leftover partition of the SMs none of them takes (if any remain).
 * Each count must be at least caps.min_partition, at most caps.sm_count
 * and a multiple of caps.granularity, and their sum (taken without
 * overflow: counts that would wrap an unsigned are refused) at most what
 * one split can give; otherwise CW_ERROR_INVALID_ARGUMENT with a message
 * that names the partition at fault and says what would fit. n must be
 * below 64. default_index names the default partition
 * (cw_partition_group_info.default_index): 0..n-1, or -1 for the leftover
 * one (then SMs must be left over). Destroy the group with
 * cw_partition_group_destroy. Creating green contexts takes about 1-2 ms
 * each on the H100.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new group.
 *   CW_ERROR_INVALID_ARGUMENT  out or sm_counts is NULL; n is 0 or 64 or
 *                              more; a count is 0; default_index is out of
 *                              range; device is negative or not below the
 *                              device count; the sizes do not fit the device
 *                              (the detail says what would).
 *   CW_ERROR_NOT_SUPPORTED     the driver or device has no green contexts
 *                              (the detail says which), or the driver is
 *                              older than 12.0.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched and no green context is left.
 */
CW_API cw_status cw_partition_group_create(cw_partition_group **out, int device, const unsigned *sm_counts,
                                           size_t n, int default_index);

/*
 * Drops the group and sets *group to NULL. Accepts NULL and a pointer to
 * NULL; never fails. The group's reference to each partition's context goes:
 * a partition on which nothing was made is destroyed now; one on which
 * objects live (streams, pools, timers, futures, graphs, ...) stays, and
 * those objects keep working, until the last of them is destroyed (green
 * contexts are reference counted as every context is). A partition's
 * context current on the calling thread when it is destroyed (here, or with
 * the last object on it) is made not current: nothing is current afterwards
 * (any other current context is kept). A handle that is not a live group is
 * ignored (logged at CW_LOG_WARNING; the thread's detail is left as it was).
 *
 * Returns: nothing.
 */
CW_API void cw_partition_group_destroy(cw_partition_group **group);

/* A group as a whole. Filled by cw_partition_group_get_info(). */
typedef struct cw_partition_group_info {
    size_t count;          /* partitions, the leftover one included (it is last) */
    size_t default_index;  /* the default partition's index (n for default_index -1 at create) */
    int device;            /* the device ordinal */
    uint8_t reserved[44];  /* zeroed; room for new fields */
} cw_partition_group_info;

/*
 * Fills *info. No driver call. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the group.
 *   CW_ERROR_INVALID_ARGUMENT  group or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    group is not a live group.
 */
CW_API cw_status cw_partition_group_get_info(const cw_partition_group *group, cw_partition_group_info *info);

/* One partition. Filled by cw_partition_group_get_partition(). */
typedef struct cw_partition_info {
    cw_context *context;  /* the partition, a context of kind CW_CONTEXT_GREEN: borrowed from the group
                             (do not cw_context_destroy it), valid while the group lives */
    unsigned sm_count;    /* SMs the driver gave the partition */
    int leftover;         /* 1 for the leftover partition */
    int is_default;       /* 1 for the default partition */
    uint8_t reserved[44]; /* zeroed; room for new fields */
} cw_partition_info;

/*
 * Fills *info for the partition at `index` (0..count-1; the leftover one,
 * if any, is last). info->context is usable wherever a context is. No
 * driver call. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the partition.
 *   CW_ERROR_INVALID_ARGUMENT  group or info is NULL; index is not below the
 *                              group's count.
 *   CW_ERROR_INVALID_HANDLE    group is not a live group.
 */
CW_API cw_status cw_partition_group_get_partition(const cw_partition_group *group, size_t index,
                                                  cw_partition_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_PARTITION_H */
