/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: devices by ordinal (device.hpp).
#include "core/device.hpp"

#include <atomic>
#include <stdio.h>
#include <string.h>

#include "core/context.hpp"

namespace cw {
namespace core {
namespace {

constexpr int kMaxCachedDevices = 64;
struct PrioCache {
    std::atomic<int> ready;
    int least, greatest;
};
PrioCache g_prio[kMaxCachedDevices];

}  // namespace

cw_status device_from_ordinal(int ordinal, CUdevice *dev) {
    CW_TRY(ensure_init());
    int count = 0;
    CW_CU(cuDeviceGetCount, (&count));
    if (ordinal >= count)
        return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: device %d, but there are %d devices", ordinal,
                    count);
    CW_CU(cuDeviceGet, (dev, ordinal));
    return CW_SUCCESS;
}

cw_status device_priority_range(int ordinal, int *least, int *greatest) {
    if (ordinal < kMaxCachedDevices && g_prio[ordinal].ready.load(std::memory_order_acquire)) {
        *least = g_prio[ordinal].least;
        *greatest = g_prio[ordinal].greatest;
        return CW_SUCCESS;
    }
    CUdevice dev;
    CW_TRY(device_from_ordinal(ordinal, &dev));
    CUcontext primary = nullptr;
    CW_CU(cuDevicePrimaryCtxRetain, (&primary, dev));
    int lo = 0, hi = 0;
    cw_status st = CW_SUCCESS;
    {
        CurrentGuard guard;
        st = guard.enter(primary);
        if (st == CW_SUCCESS) {
            CUresult r = drv().cuCtxGetStreamPriorityRange(&lo, &hi);
            if (r != CUDA_SUCCESS) st = fail_cu(r, "cuCtxGetStreamPriorityRange");
        }
        cw_status left = guard.leave();
        if (st == CW_SUCCESS) st = left;
    }
    CUresult r = drv().cuDevicePrimaryCtxRelease(dev);
    if (st == CW_SUCCESS && r != CUDA_SUCCESS) st = fail_cu(r, "cuDevicePrimaryCtxRelease");
    if (st != CW_SUCCESS) return st;
    if (ordinal < kMaxCachedDevices) {
        g_prio[ordinal].least = lo;
        g_prio[ordinal].greatest = hi;
        g_prio[ordinal].ready.store(1, std::memory_order_release);
    }
    *least = lo;
    *greatest = hi;
    return CW_SUCCESS;
}

cw_status device_count(int *count) {
    CW_TRY(ensure_init());
    int n = 0;
    CW_CU(cuDeviceGetCount, (&n));
    *count = n;
    return CW_SUCCESS;
}

cw_status device_info(int device, cw_device_info *info) {
    CUdevice dev;
    CW_TRY(device_from_ordinal(device, &dev));

    cw_device_info d;
    memset(&d, 0, sizeof d);
    d.ordinal = device;
    CW_CU(cuDeviceGetName, (d.name, (int)sizeof d.name - 1, dev));
    struct {
        int *out;
        int attr;
    } const attrs[] = {
        {&d.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
        {&d.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
        {&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
        {&d.max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
        {&d.warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
        {&d.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE},
        {&d.async_engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
        {&d.l2_cache_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
        {&d.max_shared_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
        {&d.can_map_host_memory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY},
        {&d.stream_priorities, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED},
        {&d.memory_pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
        {&d.stream_mem_ops_64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS},
        {&d.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID},
        {&d.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
        {&d.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID},
    };
    for (const auto &a : attrs) CW_CU(cuDeviceGetAttribute, (a.out, a.attr, dev));
    size_t bytes = 0;
    CW_CU(cuDeviceTotalMem, (&bytes, dev));
    d.total_memory = bytes;
    CUuuid uuid;
    CW_CU(cuDeviceGetUuid, (&uuid, dev));
    memcpy(d.uuid, uuid.bytes, sizeof d.uuid);
    *info = d;
    return CW_SUCCESS;
}

}  // namespace core
}  // namespace cw
