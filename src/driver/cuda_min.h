/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave driver layer: the subset of the CUDA driver API's types and constants
 * that cuweave uses, declared here so that the library builds without the
 * CUDA toolkit (CI has none). Values and layouts must match cuda.h exactly;
 * tests/cuda_abi.cpp checks every one against the real header when one is
 * installed.
 */
#ifndef CUWEAVE_SRC_CUDA_MIN_H
#define CUWEAVE_SRC_CUDA_MIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;

typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
enum {
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

typedef void (*CUhostFn)(void *userData);

/* Interprocess handles (cuIpc*): 64 opaque bytes each. */
typedef struct CUipcMemHandle_st {
    char reserved[64];
} CUipcMemHandle;
typedef struct CUipcEventHandle_st {
    char reserved[64];
} CUipcEventHandle;
enum {
    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
};

/* Green contexts and device resources (CUDA 12.4+). */
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;
typedef int CUdevResourceType;
enum {
    CU_DEV_RESOURCE_TYPE_INVALID = 0,
    CU_DEV_RESOURCE_TYPE_SM = 1
};
typedef struct CUdevSmResource_st {
    unsigned int smCount;
    unsigned int minSmPartitionSize;
    unsigned int smCoscheduledAlignment;
} CUdevSmResource;
typedef struct CUdevResource_st {
    CUdevResourceType type;
    unsigned char _internal_padding[92];
    union {
        CUdevSmResource sm;
        unsigned char _oversize[48];
    };
} CUdevResource;
enum {
    CU_GREEN_CTX_DEFAULT_STREAM = 1
};

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_ASSERT = 710,
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
    CUDA_ERROR_INVALID_PC = 718,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_TOO_MANY_PEERS = 711,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_CAPTURED_EVENT = 907,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
    CUDA_ERROR_TIMEOUT = 909,
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
    CUDA_ERROR_UNKNOWN = 999
};

/* CUdevice_attribute values used by cuweave. */
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED = 78,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
    CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122
};

/* cuGetProcAddress flags and results. */
enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};
typedef int CUdriverProcAddressQueryResult;
enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

/* Stream and event flags. */
enum {
    CU_STREAM_DEFAULT = 0,
    CU_STREAM_NON_BLOCKING = 1
};
enum {
    CU_EVENT_DEFAULT = 0,
    CU_EVENT_BLOCKING_SYNC = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_EVENT_INTERPROCESS = 4
};
enum {
    CU_EVENT_WAIT_DEFAULT = 0
};
/* Context scheduling flags (cuCtxGetFlags). */
enum {
    CU_CTX_SCHED_BLOCKING_SYNC = 0x04,
    CU_CTX_SCHED_MASK = 0x07
};
/* Special stream handles. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* cuMemHostAlloc flags. */
enum {
    CU_MEMHOSTALLOC_PORTABLE = 1,
    CU_MEMHOSTALLOC_DEVICEMAP = 2,
    CU_MEMHOSTALLOC_WRITECOMBINED = 4
};

/* cuStreamWriteValue / WaitValue flags. */
enum {
    CU_STREAM_WRITE_VALUE_DEFAULT = 0,
    CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 1
};
enum {
    CU_STREAM_WAIT_VALUE_GEQ = 0,
    CU_STREAM_WAIT_VALUE_EQ = 1,
    CU_STREAM_WAIT_VALUE_AND = 2,
    CU_STREAM_WAIT_VALUE_NOR = 3,
    CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30
};

/* Graphs (capture, instantiate, launch, update, conditional nodes). */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphEdgeData_st {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type; /* CUgraphDependencyType */
    unsigned char reserved[5];
} CUgraphEdgeData;
typedef cuuint64_t CUgraphConditionalHandle;
typedef int CUstreamCaptureMode;
typedef int CUstreamCaptureStatus;
typedef int CUgraphExecUpdateResult;
enum {
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2
};
enum {
    CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
};
enum {
    CU_GRAPH_EXEC_UPDATE_SUCCESS = 0,
    CU_GRAPH_EXEC_UPDATE_ERROR = 1,
    CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,
    CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 3,
    CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 4,
    CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 5,
    CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 6,
    CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE = 7,
    CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED = 8
};
typedef struct CUgraphExecUpdateResultInfo_st {
    CUgraphExecUpdateResult result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} CUgraphExecUpdateResultInfo;
enum {
    CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8
};
enum {
    CU_GRAPH_NODE_TYPE_KERNEL = 0,
    CU_GRAPH_NODE_TYPE_MEMCPY = 1,
    CU_GRAPH_NODE_TYPE_MEMSET = 2,
    CU_GRAPH_NODE_TYPE_HOST = 3,
    CU_GRAPH_NODE_TYPE_GRAPH = 4,
    CU_GRAPH_NODE_TYPE_EMPTY = 5,
    CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
    CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
    CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
};
typedef int CUgraphNodeType;
enum {
    CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0,
    CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1
};
/* cuda.h's CU_GRAPH_KERNEL_NODE_PORT_* macros, by other names (tests/cuda_abi.cpp includes both) */
enum {
    CW_KERNEL_NODE_PORT_DEFAULT = 0,
    CW_KERNEL_NODE_PORT_LAUNCH_ORDER = 2
};
enum {
    CU_GRAPH_COND_TYPE_IF = 0,
    CU_GRAPH_COND_TYPE_WHILE = 1
};
enum {
    CU_GRAPH_COND_ASSIGN_DEFAULT = 1
};
enum {
    CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE = 1
};
typedef struct CUDA_CONDITIONAL_NODE_PARAMS {
    CUgraphConditionalHandle handle;
    int type; /* CUgraphConditionalNodeType */
    unsigned int size;
    CUgraph *phGraph_out;
    CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;
typedef struct CUgraphNodeParams_st {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_CONDITIONAL_NODE_PARAMS conditional;
    };
    long long reserved2;
} CUgraphNodeParams;

/* The library API, kernels and extensible launches. */
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
/* cuGraphKernelNodeGetParams (12.0: cuda.h's CUDA_KERNEL_NODE_PARAMS_v2). */
typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;
typedef int CUjit_option;
typedef int CUlibraryOption;
typedef int CUlaunchAttributeID;
enum {
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    CU_LAUNCH_ATTRIBUTE_PRIORITY = 8
};
typedef union CUlaunchAttributeValue_union {
    char pad[64];
    struct {
        unsigned int x;
        unsigned int y;
        unsigned int z;
    } clusterDim;
    int priority;
    int cooperative;
} CUlaunchAttributeValue;
typedef struct CUlaunchAttribute_st {
    CUlaunchAttributeID id;
    char pad[8 - sizeof(CUlaunchAttributeID)];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;


/* Stream-ordered memory pools (CUDA 11.2). */
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmemLocation_st {
    int type;
    int id;
} CUmemLocation;
typedef struct CUmemPoolProps_st {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;
typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;
enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 1,
    CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 2,
    CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3,
};
enum {
    CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    CU_MEM_HANDLE_TYPE_NONE = 0,
    CU_MEM_LOCATION_TYPE_DEVICE = 1,
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7
};

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_SRC_CUDA_MIN_H */
