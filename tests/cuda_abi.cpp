/* SPDX-License-Identifier: BSD-2-Clause */
// Checks, at compile time, that src/driver/cuda_min.h (cuweave's own declarations of
// the driver API) matches the real cuda.h: every constant and every layout.
// Built only where cuda.h is installed; a mismatch fails the build.
#include <cuda.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// cuda.h spells some constants as macros: keep their values, then drop the
// macros so that cuda_min.h's own definitions can be compared with them.
namespace real {
constexpr long long cond_assign_default = CU_GRAPH_COND_ASSIGN_DEFAULT;
constexpr long long memhost_portable = CU_MEMHOSTALLOC_PORTABLE;
constexpr long long memhost_devicemap = CU_MEMHOSTALLOC_DEVICEMAP;
constexpr long long memhost_writecombined = CU_MEMHOSTALLOC_WRITECOMBINED;
static CUstream const stream_legacy = CU_STREAM_LEGACY;
static CUstream const stream_per_thread = CU_STREAM_PER_THREAD;
}  // namespace real
#undef CU_GRAPH_COND_ASSIGN_DEFAULT
#undef CU_MEMHOSTALLOC_PORTABLE
#undef CU_MEMHOSTALLOC_DEVICEMAP
#undef CU_MEMHOSTALLOC_WRITECOMBINED
#undef CU_STREAM_LEGACY
#undef CU_STREAM_PER_THREAD

namespace mine {
#include "driver/cuda_min.h"
}  // namespace mine

#define SAME(name) static_assert((long long)mine::name == (long long)::name, #name " differs from cuda.h")

SAME(CUDA_SUCCESS); SAME(CUDA_ERROR_INVALID_VALUE); SAME(CUDA_ERROR_OUT_OF_MEMORY);
SAME(CUDA_ERROR_NOT_INITIALIZED); SAME(CUDA_ERROR_DEINITIALIZED); SAME(CUDA_ERROR_STUB_LIBRARY);
SAME(CUDA_ERROR_NO_DEVICE); SAME(CUDA_ERROR_INVALID_DEVICE); SAME(CUDA_ERROR_INVALID_IMAGE);
SAME(CUDA_ERROR_INVALID_CONTEXT); SAME(CUDA_ERROR_ECC_UNCORRECTABLE); SAME(CUDA_ERROR_INVALID_HANDLE);
SAME(CUDA_ERROR_NOT_FOUND); SAME(CUDA_ERROR_NOT_READY); SAME(CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); SAME(CUDA_ERROR_LAUNCH_TIMEOUT); SAME(CUDA_ERROR_CONTEXT_IS_DESTROYED);
SAME(CUDA_ERROR_ASSERT); SAME(CUDA_ERROR_HARDWARE_STACK_ERROR); SAME(CUDA_ERROR_ILLEGAL_INSTRUCTION);
SAME(CUDA_ERROR_MISALIGNED_ADDRESS); SAME(CUDA_ERROR_INVALID_ADDRESS_SPACE); SAME(CUDA_ERROR_INVALID_PC);
SAME(CUDA_ERROR_LAUNCH_FAILED); SAME(CUDA_ERROR_NOT_PERMITTED); SAME(CUDA_ERROR_NOT_SUPPORTED);
SAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); SAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
SAME(CUDA_ERROR_STREAM_CAPTURE_MERGE); SAME(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
SAME(CUDA_ERROR_STREAM_CAPTURE_UNJOINED); SAME(CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
SAME(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); SAME(CUDA_ERROR_CAPTURED_EVENT);
SAME(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD); SAME(CUDA_ERROR_TIMEOUT); SAME(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE); SAME(CUDA_ERROR_UNKNOWN);

SAME(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); SAME(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
SAME(CU_DEVICE_ATTRIBUTE_CLOCK_RATE); SAME(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY); SAME(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
SAME(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID); SAME(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
SAME(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT); SAME(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR); SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED); SAME(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH); SAME(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED); SAME(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);

SAME(CU_GET_PROC_ADDRESS_DEFAULT); SAME(CU_GET_PROC_ADDRESS_LEGACY_STREAM);
SAME(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM); SAME(CU_GET_PROC_ADDRESS_SUCCESS);
SAME(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND); SAME(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
SAME(CU_STREAM_DEFAULT); SAME(CU_STREAM_NON_BLOCKING);
SAME(CU_EVENT_DEFAULT); SAME(CU_EVENT_BLOCKING_SYNC); SAME(CU_EVENT_DISABLE_TIMING); SAME(CU_EVENT_INTERPROCESS);
SAME(CU_EVENT_WAIT_DEFAULT);
static_assert(mine::CU_MEMHOSTALLOC_PORTABLE == real::memhost_portable, "CU_MEMHOSTALLOC_PORTABLE");
static_assert(mine::CU_MEMHOSTALLOC_DEVICEMAP == real::memhost_devicemap, "CU_MEMHOSTALLOC_DEVICEMAP");
static_assert(mine::CU_MEMHOSTALLOC_WRITECOMBINED == real::memhost_writecombined, "CU_MEMHOSTALLOC_WRITECOMBINED");
SAME(CU_STREAM_WRITE_VALUE_DEFAULT); SAME(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
SAME(CU_STREAM_WAIT_VALUE_GEQ); SAME(CU_STREAM_WAIT_VALUE_EQ); SAME(CU_STREAM_WAIT_VALUE_AND);
SAME(CU_STREAM_WAIT_VALUE_NOR); SAME(CU_STREAM_WAIT_VALUE_FLUSH);

SAME(CU_DEV_RESOURCE_TYPE_INVALID); SAME(CU_DEV_RESOURCE_TYPE_SM); SAME(CU_GREEN_CTX_DEFAULT_STREAM);
static_assert(sizeof(mine::CUdevResource) == sizeof(::CUdevResource), "CUdevResource size");
static_assert(offsetof(mine::CUdevResource, sm) == offsetof(::CUdevResource, sm), "CUdevResource.sm offset");
static_assert(sizeof(mine::CUdevSmResource) == sizeof(::CUdevSmResource), "CUdevSmResource size");
static_assert(offsetof(mine::CUdevSmResource, smCoscheduledAlignment) ==
                  offsetof(::CUdevSmResource, smCoscheduledAlignment), "CUdevSmResource layout");
static_assert(sizeof(mine::CUdevResourceType) == sizeof(::CUdevResourceType), "CUdevResourceType size");
static_assert(sizeof(mine::CUresult) == sizeof(::CUresult), "CUresult size");
static_assert(sizeof(mine::CUdevice) == sizeof(::CUdevice), "CUdevice size");
static_assert(sizeof(mine::CUdeviceptr) == sizeof(::CUdeviceptr), "CUdeviceptr size");
static_assert(sizeof(mine::CUuuid) == sizeof(::CUuuid), "CUuuid size");
static_assert(sizeof(mine::CUdriverProcAddressQueryResult) == sizeof(::CUdriverProcAddressQueryResult), "query result size");

int main() {
    if ((void *)CU_STREAM_LEGACY != (void *)real::stream_legacy ||
        (void *)CU_STREAM_PER_THREAD != (void *)real::stream_per_thread) {
        puts("special stream handles differ from cuda.h");
        return 1;
    }
    puts("cuda_min.h matches cuda.h ");
    return 0;
}

// Graphs.
SAME(CU_STREAM_CAPTURE_MODE_GLOBAL); SAME(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); SAME(CU_STREAM_CAPTURE_MODE_RELAXED);
SAME(CU_STREAM_CAPTURE_STATUS_NONE); SAME(CU_STREAM_CAPTURE_STATUS_ACTIVE); SAME(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME(CU_GRAPH_EXEC_UPDATE_SUCCESS); SAME(CU_GRAPH_EXEC_UPDATE_ERROR); SAME(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
SAME(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED); SAME(CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED);
SAME(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED); SAME(CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
SAME(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE); SAME(CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
SAME(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY); SAME(CU_GRAPH_NODE_TYPE_CONDITIONAL);
SAME(CU_GRAPH_COND_TYPE_IF); SAME(CU_GRAPH_COND_TYPE_WHILE); SAME(CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
SAME(CU_MEM_ALLOCATION_TYPE_PINNED); SAME(CU_MEM_HANDLE_TYPE_NONE); SAME(CU_MEM_LOCATION_TYPE_DEVICE);
SAME(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES); SAME(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC);
SAME(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES); SAME(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
static_assert(sizeof(mine::CUmemPoolProps) == sizeof(::CUmemPoolProps), "CUmemPoolProps size");
static_assert(offsetof(mine::CUmemPoolProps, location) == offsetof(::CUmemPoolProps, location), "CUmemPoolProps layout");
static_assert(offsetof(mine::CUmemPoolProps, maxSize) == offsetof(::CUmemPoolProps, maxSize), "CUmemPoolProps layout");
static_assert(offsetof(mine::CUmemPoolProps, usage) == offsetof(::CUmemPoolProps, usage), "CUmemPoolProps layout");
SAME(CU_FUNC_ATTRIBUTE_PTX_VERSION); SAME(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); SAME(CU_GRAPH_NODE_TYPE_KERNEL); SAME(CU_GRAPH_NODE_TYPE_MEMCPY); SAME(CU_GRAPH_NODE_TYPE_MEMSET);
SAME(CU_GRAPH_NODE_TYPE_HOST); SAME(CU_GRAPH_NODE_TYPE_GRAPH); SAME(CU_GRAPH_NODE_TYPE_EMPTY);
SAME(CU_GRAPH_NODE_TYPE_EVENT_RECORD); SAME(CU_GRAPH_NODE_TYPE_BATCH_MEM_OP); SAME(CU_GRAPH_DEPENDENCY_TYPE_DEFAULT); SAME(CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
static_assert(mine::CW_KERNEL_NODE_PORT_DEFAULT == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT, "port default");
static_assert(sizeof(mine::CUDA_KERNEL_NODE_PARAMS_v2) == sizeof(::CUDA_KERNEL_NODE_PARAMS_v2), "kernel node params size");
static_assert(offsetof(mine::CUDA_KERNEL_NODE_PARAMS_v2, kernelParams) ==
                  offsetof(::CUDA_KERNEL_NODE_PARAMS_v2, kernelParams), "kernel node params layout");
static_assert(offsetof(mine::CUDA_KERNEL_NODE_PARAMS_v2, kern) == offsetof(::CUDA_KERNEL_NODE_PARAMS_v2, kern),
              "kernel node params layout");
static_assert(mine::CW_KERNEL_NODE_PORT_LAUNCH_ORDER == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER, "port launch order");
static_assert(sizeof(mine::CUgraphEdgeData) == sizeof(::CUgraphEdgeData), "CUgraphEdgeData size");
static_assert(offsetof(mine::CUgraphEdgeData, type) == offsetof(::CUgraphEdgeData, type), "CUgraphEdgeData.type");
static_assert(offsetof(mine::CUgraphEdgeData, from_port) == offsetof(::CUgraphEdgeData, from_port),
              "CUgraphEdgeData.from_port");
static_assert(mine::CU_GRAPH_COND_ASSIGN_DEFAULT == real::cond_assign_default, "CU_GRAPH_COND_ASSIGN_DEFAULT");
static_assert(sizeof(mine::CUgraphConditionalHandle) == sizeof(::CUgraphConditionalHandle), "conditional handle size");
static_assert(sizeof(mine::CUstreamCaptureMode) == sizeof(::CUstreamCaptureMode), "capture mode size");
static_assert(sizeof(mine::CUstreamCaptureStatus) == sizeof(::CUstreamCaptureStatus), "capture status size");
static_assert(sizeof(mine::CUgraphExecUpdateResultInfo) == sizeof(::CUgraphExecUpdateResultInfo), "update info size");
static_assert(offsetof(mine::CUgraphExecUpdateResultInfo, errorNode) == offsetof(::CUgraphExecUpdateResultInfo, errorNode),
              "update info errorNode");
static_assert(offsetof(mine::CUgraphExecUpdateResultInfo, errorFromNode) ==
                  offsetof(::CUgraphExecUpdateResultInfo, errorFromNode), "update info errorFromNode");
static_assert(sizeof(mine::CUgraphNodeParams) == sizeof(::CUgraphNodeParams), "CUgraphNodeParams size");
static_assert(offsetof(mine::CUgraphNodeParams, conditional) == offsetof(::CUgraphNodeParams, conditional),
              "CUgraphNodeParams.conditional");
static_assert(offsetof(mine::CUgraphNodeParams, reserved2) == offsetof(::CUgraphNodeParams, reserved2),
              "CUgraphNodeParams.reserved2");
static_assert(sizeof(mine::CUDA_CONDITIONAL_NODE_PARAMS) == sizeof(::CUDA_CONDITIONAL_NODE_PARAMS), "cond params size");
static_assert(offsetof(mine::CUDA_CONDITIONAL_NODE_PARAMS, type) == offsetof(::CUDA_CONDITIONAL_NODE_PARAMS, type), "cond type");
static_assert(offsetof(mine::CUDA_CONDITIONAL_NODE_PARAMS, size) == offsetof(::CUDA_CONDITIONAL_NODE_PARAMS, size), "cond size");
static_assert(offsetof(mine::CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out) ==
                  offsetof(::CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out), "cond phGraph_out");
static_assert(offsetof(mine::CUDA_CONDITIONAL_NODE_PARAMS, ctx) == offsetof(::CUDA_CONDITIONAL_NODE_PARAMS, ctx), "cond ctx");
static_assert(sizeof(::CUgraphConditionalNodeType) == sizeof(int) && sizeof(::CUgraphNodeType) == sizeof(int),
              "enum sizes");

// The library API and extensible launches.
SAME(CU_LAUNCH_ATTRIBUTE_COOPERATIVE); SAME(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION); SAME(CU_LAUNCH_ATTRIBUTE_PRIORITY);
static_assert(sizeof(mine::CUlaunchAttributeValue) == sizeof(::CUlaunchAttributeValue), "launch attribute value size");
static_assert(sizeof(mine::CUlaunchAttribute) == sizeof(::CUlaunchAttribute), "launch attribute size");
static_assert(offsetof(mine::CUlaunchAttribute, value) == offsetof(::CUlaunchAttribute, value), "launch attribute value");
static_assert(offsetof(mine::CUlaunchAttributeValue, priority) == offsetof(::CUlaunchAttributeValue, priority), "priority");
static_assert(sizeof(mine::CUlaunchConfig) == sizeof(::CUlaunchConfig), "launch config size");
static_assert(offsetof(mine::CUlaunchConfig, sharedMemBytes) == offsetof(::CUlaunchConfig, sharedMemBytes), "shared");
static_assert(offsetof(mine::CUlaunchConfig, hStream) == offsetof(::CUlaunchConfig, hStream), "hStream");
static_assert(offsetof(mine::CUlaunchConfig, attrs) == offsetof(::CUlaunchConfig, attrs), "attrs");
static_assert(offsetof(mine::CUlaunchConfig, numAttrs) == offsetof(::CUlaunchConfig, numAttrs), "numAttrs");
static_assert(sizeof(mine::CUjit_option) == sizeof(::CUjit_option) && sizeof(mine::CUlibraryOption) == sizeof(::CUlibraryOption),
              "option enum sizes");

// Several devices.
SAME(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED); SAME(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
SAME(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED); SAME(CUDA_ERROR_TOO_MANY_PEERS);
SAME(CU_MEM_ACCESS_FLAGS_PROT_NONE); SAME(CU_MEM_ACCESS_FLAGS_PROT_READ); SAME(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME(CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK); SAME(CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED);
SAME(CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED);
static_assert(sizeof(mine::CUmemAccessDesc) == sizeof(::CUmemAccessDesc), "CUmemAccessDesc size");
static_assert(offsetof(mine::CUmemAccessDesc, flags) == offsetof(::CUmemAccessDesc, flags), "CUmemAccessDesc layout");
SAME(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS); SAME(CU_EVENT_INTERPROCESS);
static_assert(sizeof(mine::CUipcMemHandle) == sizeof(::CUipcMemHandle), "CUipcMemHandle size");
static_assert(sizeof(mine::CUipcEventHandle) == sizeof(::CUipcEventHandle), "CUipcEventHandle size");

// src/driver/cupti_min.h against CUPTI's headers (the toolkit's
// extras/CUPTI/include, or a wheel's include beside cuda.h), where found.
#if __has_include(<cupti.h>)
#include <cupti.h>
namespace mine {
#include "driver/cupti_min.h"
}  // namespace mine
SAME(CUPTI_SUCCESS); SAME(CUPTI_ERROR_INVALID_PARAMETER); SAME(CUPTI_ERROR_OUT_OF_MEMORY);
SAME(CUPTI_ERROR_MAX_LIMIT_REACHED); SAME(CUPTI_ERROR_NOT_INITIALIZED); SAME(CUPTI_ERROR_NOT_SUPPORTED);
SAME(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES); SAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); SAME(CUPTI_ERROR_UNKNOWN);
SAME(CUPTI_ACTIVITY_KIND_MEMCPY); SAME(CUPTI_ACTIVITY_KIND_MEMSET); SAME(CUPTI_ACTIVITY_KIND_KERNEL);
SAME(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); SAME(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
SAME(CUPTI_CB_DOMAIN_DRIVER_API); SAME(CUPTI_CB_DOMAIN_RUNTIME_API); SAME(CUPTI_API_ENTER); SAME(CUPTI_API_EXIT);
SAME(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD); SAME(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH); SAME(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
SAME(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
#define CW_SAME_DRIVER_(name, id) static_assert(CUPTI_DRIVER_TRACE_CBID_##name == id, #name " differs");
#define CW_SAME_RUNTIME_(name, id) static_assert(CUPTI_RUNTIME_TRACE_CBID_##name == id, #name " differs");
CW_CUPTI_DRIVER_CBIDS(CW_SAME_DRIVER_)
CW_CUPTI_RUNTIME_CBIDS(CW_SAME_RUNTIME_)
#define CW_SAME_AT_(mine_t, real_t, f) \
    static_assert(offsetof(mine::mine_t, f) == offsetof(::real_t, f), #real_t "." #f " differs");
CW_SAME_AT_(CUpti_CallbackData, CUpti_CallbackData, callbackSite)
CW_SAME_AT_(CUpti_CallbackData, CUpti_CallbackData, functionName)
CW_SAME_AT_(CUpti_CallbackData, CUpti_CallbackData, context)
CW_SAME_AT_(CUpti_CallbackData, CUpti_CallbackData, correlationId)
static_assert(sizeof(mine::CUpti_CallbackData) == sizeof(::CUpti_CallbackData), "CUpti_CallbackData size");
#if CUPTI_API_VERSION >= 130000
#define CW_KERNEL_REC_ CUpti_ActivityKernel10
#define CW_MEMCPY_REC_ CUpti_ActivityMemcpy6
#else
#define CW_KERNEL_REC_ CUpti_ActivityKernel9
#define CW_MEMCPY_REC_ CUpti_ActivityMemcpy5
#endif
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, start)
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, end)
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, contextId)
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, streamId)
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, correlationId)
CW_SAME_AT_(cw_cupti_kernel_head, CW_KERNEL_REC_, name)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, copyKind)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, bytes)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, start)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, end)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, contextId)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, streamId)
CW_SAME_AT_(cw_cupti_memcpy_head, CW_MEMCPY_REC_, correlationId)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, bytes)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, start)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, end)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, contextId)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, streamId)
CW_SAME_AT_(cw_cupti_memset_head, CUpti_ActivityMemset4, correlationId)
static_assert(sizeof(mine::cw_cupti_kernel_head) <= sizeof(::CW_KERNEL_REC_), "the kernel head is a head");
#endif
