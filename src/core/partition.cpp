/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: green contexts, disjoint SM partitions made by one split
// (partition.hpp).
#include "core/partition.hpp"

#include <new>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.hpp"


namespace cw {
namespace core {
namespace {

bool have_green_entries() {
    const Driver &d = drv();
    return d.cuDeviceGetDevResource && d.cuDevSmResourceSplitByCount && d.cuDevResourceGenerateDesc &&
           d.cuGreenCtxCreate && d.cuGreenCtxDestroy && d.cuCtxFromGreenCtx && d.cuGreenCtxStreamCreate;
}

// The device's SM resource, or CW_ERROR_NOT_SUPPORTED saying why not.
cw_status sm_resource(CUdevice dev, CUdevResource *res) {
    if (!have_green_entries())
        return fail(CW_ERROR_NOT_SUPPORTED, "the CUDA driver (%d.%d) has no green contexts (they need 12.5 or newer)",
                    driver_version() / 1000, driver_version() % 1000 / 10);
    memset(res, 0, sizeof *res);
    CUresult r = drv().cuDeviceGetDevResource(dev, res, CU_DEV_RESOURCE_TYPE_SM);
    if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_DEVICE)
        return fail_cu(r, "cuDeviceGetDevResource", "the device does not support green contexts");
    if (r != CUDA_SUCCESS) return fail_cu(r, "cuDeviceGetDevResource");
    return CW_SUCCESS;
}

void free_group(cw_partition_group *set) {
    for (size_t i = 0; i < set->count; i++)
        if (set->parts[i]) context_release(set->parts[i]);
    free(set->parts);
    free(set->sms);
    handle_free(set);
}

}  // namespace
cw_status partition_caps(int device, cw_partition_caps *caps) {
    CUdevice dev;
    CW_TRY(device_from_ordinal(device, &dev));
    cw_partition_caps c;
    memset(&c, 0, sizeof c);
    CUdevResource res;
    if (sm_resource(dev, &res) == CW_SUCCESS) {
        c.supported = 1;
        c.sm_count = res.sm.smCount;
        c.min_partition = res.sm.minSmPartitionSize;
        c.granularity = res.sm.smCoscheduledAlignment ? res.sm.smCoscheduledAlignment : 1;
    } else {
        int n = 0;
        CW_CU(cuDeviceGetAttribute, (&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
        c.sm_count = (unsigned)n;
    }
    c.workqueues = 0;  // CUDA 13.0 has no work-queue resource type
    *caps = c;
    return CW_SUCCESS;
}

cw_status partition_group_create(int device, const unsigned *sm_counts, size_t n, int default_index,
                                 cw_partition_group **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CUdevice dev;
    CW_TRY(device_from_ordinal(device, &dev));
    CUdevResource input;
    CW_TRY(sm_resource(dev, &input));
    const unsigned total = input.sm.smCount, min = input.sm.minSmPartitionSize;
    const unsigned g = input.sm.smCoscheduledAlignment ? input.sm.smCoscheduledAlignment : 1;
    const unsigned unit = g > min ? g : min;  // the split makes groups of this many SMs
    // How many groups one split can make (the driver's own answer).
    unsigned max_groups = 0;
    CW_CU(cuDevSmResourceSplitByCount, (nullptr, &max_groups, &input, nullptr, 0, unit));
    // Each entry no larger than the device, and the sum in 64 bits: n is
    // below kMaxPartitions, so it cannot wrap (an unsigned sum did, and a
    // wrapped sum let counts past the split's array through).
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (sm_counts[i] > total)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: partition %zu asks for %u SMs; device %d has %u SMs", i, sm_counts[i],
                        device, total);
        if (sm_counts[i] < min || sm_counts[i] % unit != 0)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: partition %zu asks for %u SMs; device %d (%u SMs) makes partitions of "
                        "at least %u SMs in multiples of %u",
                        i, sm_counts[i], device, total, min, unit);
        sum += sm_counts[i];
    }
    if (sum / unit > max_groups)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: the partitions ask for %llu SMs, but device %d has %u SMs of which at most %u "
                    "can be partitioned (%u groups of %u)",
                    (unsigned long long)sum, device, total, max_groups * unit, max_groups, unit);

    // ONE split: sum/unit groups of `unit` SMs, the rest in `remaining`
    // (at most max_groups, checked above).
    const unsigned groups = (unsigned)(sum / unit);
    CUdevResource *res = static_cast<CUdevResource *>(calloc(groups, sizeof(CUdevResource)));
    cw_partition_group *set = static_cast<cw_partition_group *>(calloc(1, sizeof(cw_partition_group)));
    if (set) {
        set->parts = static_cast<cw_context **>(calloc(n + 1, sizeof(cw_context *)));
        set->sms = static_cast<unsigned *>(calloc(n + 1, sizeof(unsigned)));
    }
    if (!res || !set || !set->parts || !set->sms) {
        free(res);
        if (set) {
            free(set->parts);
            free(set->sms);
            free(set);
        }
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    set->ordinal = device;
    CUdevResource remaining;
    memset(&remaining, 0, sizeof remaining);
    unsigned made = groups;
    cw_status st = CW_SUCCESS;
    CUresult r = drv().cuDevSmResourceSplitByCount(res, &made, &input, &remaining, 0, unit);
    if (r != CUDA_SUCCESS)
        st = fail_cu(r, "cuDevSmResourceSplitByCount");
    else if (made != groups)
        st = fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the driver made %u groups of %u SMs, %u were asked",
                  made, unit, groups);
    const bool leftover = st == CW_SUCCESS && remaining.sm.smCount > 0;
    if (st == CW_SUCCESS && default_index == -1 && !leftover)
        st = fail(CW_ERROR_INVALID_ARGUMENT,
                  "invalid argument: default_index -1 names the leftover partition, but no SMs are left over");

    // A descriptor per partition from its groups (or from the remainder), a
    // green context from each descriptor.
    unsigned first = 0;
    const size_t total_parts = n + (leftover ? 1 : 0);
    for (size_t i = 0; i < total_parts && st == CW_SUCCESS; i++) {
        CUdevResource *from = i < n ? res + first : &remaining;
        unsigned count = i < n ? sm_counts[i] / unit : 1;
        if (i < n) first += count;
        CUdevResourceDesc desc = nullptr;
        CUgreenCtx green = nullptr;
        r = drv().cuDevResourceGenerateDesc(&desc, from, count);
        if (r != CUDA_SUCCESS) {
            st = fail_cu(r, "cuDevResourceGenerateDesc");
            break;
        }
        r = drv().cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
        if (r != CUDA_SUCCESS) {
            st = fail_cu(r, "cuGreenCtxCreate");
            break;
        }
        st = context_new_green(green, dev, device, &set->parts[i]);
        if (st != CW_SUCCESS) {
            drv().cuGreenCtxDestroy(green);
            break;
        }
        set->count = i + 1;
        unsigned sms = 0;
        for (unsigned k = 0; k < count; k++) sms += from[k].sm.smCount;
        CUdevResource got;
        memset(&got, 0, sizeof got);
        if (drv().cuGreenCtxGetDevResource &&
            drv().cuGreenCtxGetDevResource(green, &got, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS)
            sms = got.sm.smCount;
        set->sms[i] = sms;
        set->parts[i]->sm_count = sms;
    }
    free(res);
    if (st != CW_SUCCESS) {
        free_group(set);
        return st;
    }
    set->has_leftover = leftover;
    set->default_index = default_index < 0 ? n : (size_t)default_index;
    room.publish(set);
    *out = set;
    return CW_SUCCESS;
}

void partition_group_destroy(cw_partition_group *group) {
    // Gone for callers now; each partition's context goes with its last
    // reference, the group's or that of an object made on it.
    handle_retire(group);
    free_group(group);
}

}  // namespace core
}  // namespace cw
