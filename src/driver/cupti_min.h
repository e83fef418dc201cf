/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave driver layer: the subset of CUPTI's types and constants that the
 * trace's CUPTI path uses (src/driver/cupti.cpp opens libcupti at run time;
 * src/core/trace_cupti.cpp uses it), declared here so that the library
 * builds without CUPTI's headers (CI has none). Values and layouts must
 * match cupti.h exactly; tests/cuda_abi.cpp checks every one against the
 * real headers where they are installed. The activity records are declared
 * only as far as cuweave reads them: their first fields, which every
 * version of each record since CUDA 11 shares (CUpti_ActivityKernel4 to
 * CUpti_ActivityKernel10, CUpti_ActivityMemcpy5 and 6, CUpti_ActivityMemset4);
 * the record's size is CUPTI's business (cuptiActivityGetNextRecord).
 * tests/fake_cupti.c, the CPU tests' CUPTI, writes records of this layout.
 */
#ifndef CUWEAVE_SRC_CUPTI_MIN_H
#define CUWEAVE_SRC_CUPTI_MIN_H

#include <stddef.h>
#include <stdint.h>

#include "driver/cuda_min.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUptiResult;
enum {
    CUPTI_SUCCESS = 0,
    CUPTI_ERROR_INVALID_PARAMETER = 1,
    CUPTI_ERROR_OUT_OF_MEMORY = 8,
    CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
    CUPTI_ERROR_NOT_INITIALIZED = 15,
    CUPTI_ERROR_NOT_SUPPORTED = 27,
    CUPTI_ERROR_INSUFFICIENT_PRIVILEGES = 35,
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
    CUPTI_ERROR_UNKNOWN = 999
};

typedef int CUpti_ActivityKind;
enum {
    CUPTI_ACTIVITY_KIND_MEMCPY = 1,
    CUPTI_ACTIVITY_KIND_MEMSET = 2,
    CUPTI_ACTIVITY_KIND_KERNEL = 3,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10
};
enum { CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1 };

typedef int CUpti_CallbackDomain;
enum { CUPTI_CB_DOMAIN_DRIVER_API = 1, CUPTI_CB_DOMAIN_RUNTIME_API = 2 };
typedef uint32_t CUpti_CallbackId;
typedef int CUpti_ApiCallbackSite;
enum { CUPTI_API_ENTER = 0, CUPTI_API_EXIT = 1 };

typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;
typedef void (*CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void *cbdata);

/* What a driver or runtime API callback is given (cbdata). */
typedef struct {
    CUpti_ApiCallbackSite callbackSite;
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    CUcontext context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} CUpti_CallbackData;

typedef void (*CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void (*CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId, uint8_t *buffer, size_t size,
                                                  size_t validSize);

#define CW_CUPTI_RECORD __attribute__((__packed__)) __attribute__((aligned(8)))

typedef struct CW_CUPTI_RECORD {
    CUpti_ActivityKind kind;
} CUpti_Activity;

/* CUPTI_ACTIVITY_KIND_KERNEL and _CONCURRENT_KERNEL: the shared head. */
typedef struct CW_CUPTI_RECORD {
    CUpti_ActivityKind kind;
    uint8_t cacheConfig;
    uint8_t sharedMemoryConfig;
    uint16_t registersPerThread;
    int32_t partitionedGlobalCacheRequested;
    int32_t partitionedGlobalCacheExecuted;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    int32_t gridX, gridY, gridZ;
    int32_t blockX, blockY, blockZ;
    int32_t staticSharedMemory;
    int32_t dynamicSharedMemory;
    uint32_t localMemoryPerThread;
    uint32_t localMemoryTotal;
    uint32_t correlationId;
    int64_t gridId;
    const char *name;
} cw_cupti_kernel_head;

/* CUPTI_ACTIVITY_KIND_MEMCPY: the shared head. */
typedef struct CW_CUPTI_RECORD {
    CUpti_ActivityKind kind;
    uint8_t copyKind;
    uint8_t srcKind;
    uint8_t dstKind;
    uint8_t flags;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    uint32_t correlationId;
} cw_cupti_memcpy_head;

/* CUPTI_ACTIVITY_KIND_MEMSET: the shared head. */
typedef struct CW_CUPTI_RECORD {
    CUpti_ActivityKind kind;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    uint32_t correlationId;
} cw_cupti_memset_head;

/* The copy kinds of CUpti_ActivityMemcpyKind the trace names. */
enum { CUPTI_ACTIVITY_MEMCPY_KIND_HTOD = 1, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH = 2, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD = 8,
       CUPTI_ACTIVITY_MEMCPY_KIND_PTOP = 10 };

/* The driver and runtime API calls whose callbacks correlate GPU work to
 * the compute call that made it (cupti_driver_cbid.h, cupti_runtime_cbid.h;
 * their values never change). */
#define CW_CUPTI_DRIVER_CBIDS(X)                                                                         \
    X(cuMemcpyHtoDAsync, 60) X(cuMemcpyDtoHAsync, 62) X(cuMemcpyDtoDAsync, 64) X(cuMemcpy2DAsync, 68)    \
    X(cuMemcpy3DAsync, 69) X(cuMemsetD8Async, 216) X(cuMemsetD16Async, 218) X(cuMemsetD32Async, 220)     \
    X(cuMemsetD2D8Async, 222) X(cuMemsetD2D16Async, 224) X(cuMemsetD2D32Async, 226)                      \
    X(cuMemcpyHtoDAsync_v2, 277) X(cuMemcpyDtoHAsync_v2, 279) X(cuMemcpyDtoDAsync_v2, 281)               \
    X(cuMemcpy2DAsync_v2, 289) X(cuMemcpy3DAsync_v2, 291) X(cuMemcpyAsync, 306) X(cuLaunchKernel, 307)  \
    X(cuMemcpyPeerAsync, 319) X(cuMemcpy3DPeerAsync, 321) X(cuMemcpyAsync_ptsz, 418)                     \
    X(cuMemcpyHtoDAsync_v2_ptsz, 421) X(cuMemcpyDtoHAsync_v2_ptsz, 422) X(cuMemcpyDtoDAsync_v2_ptsz, 423) \
    X(cuMemcpy2DAsync_v2_ptsz, 424) X(cuMemcpy3DAsync_v2_ptsz, 425) X(cuMemcpyPeerAsync_ptsz, 426)       \
    X(cuMemsetD8Async_ptsz, 428) X(cuMemsetD16Async_ptsz, 429) X(cuMemsetD32Async_ptsz, 430)             \
    X(cuLaunchKernel_ptsz, 442) X(cuLaunchCooperativeKernel, 477) X(cuLaunchCooperativeKernel_ptsz, 478) \
    X(cuGraphLaunch, 514) X(cuGraphLaunch_ptsz, 515) X(cuLaunchKernelEx, 652) X(cuLaunchKernelEx_ptsz, 653)
#define CW_CUPTI_RUNTIME_CBIDS(X)                                                                         \
    X(cudaMemcpyAsync_v3020, 41) X(cudaMemcpy2DAsync_v3020, 44) X(cudaMemsetAsync_v3020, 51)              \
    X(cudaMemset2DAsync_v3020, 52) X(cudaMemcpy3DAsync_v3020, 145) X(cudaMemcpyPeerAsync_v4000, 161)      \
    X(cudaLaunchKernel_v7000, 211) X(cudaLaunchKernel_ptsz_v7000, 214) X(cudaMemcpyAsync_ptsz_v7000, 225) \
    X(cudaMemcpy2DAsync_ptsz_v7000, 228) X(cudaMemsetAsync_ptsz_v7000, 235)                               \
    X(cudaMemset2DAsync_ptsz_v7000, 236) X(cudaMemcpy3DAsync_ptsz_v7000, 246)                             \
    X(cudaLaunchCooperativeKernel_v9000, 269) X(cudaLaunchCooperativeKernel_ptsz_v9000, 270)             \
    X(cudaGraphLaunch_v10000, 311) X(cudaGraphLaunch_ptsz_v10000, 312) X(cudaLaunchKernelExC_v11060, 430) \
    X(cudaLaunchKernelExC_ptsz_v11060, 431)

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_SRC_CUPTI_MIN_H */
