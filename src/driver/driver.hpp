/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: the CUDA driver, loaded at run time.
//
// libcuda is opened at run time and every entry point is resolved through
// cuGetProcAddress with the CUDA version whose signature is declared here, into
// one function table (Driver). Code calls the driver only through drv(). The
// table can be replaced (driver_install): the test seam (src/testing/) puts
// wrappers there that count calls and fail the Nth call of a chosen entry.
#pragma once

#include "driver/cuda_min.h"
#include "cuweave/common.h"

namespace cw {

// X(member, symbol, version, parameter list). The version selects which ABI
// variant cuGetProcAddress returns; the parameter list must be that variant's.
#define CW_DRIVER_REQUIRED(X)                                                                  \
    X(cuInit, "cuInit", 2000, (unsigned flags))                                                \
    X(cuDriverGetVersion, "cuDriverGetVersion", 2020, (int *version))                          \
    X(cuGetErrorName, "cuGetErrorName", 6000, (CUresult error, const char **str))              \
    X(cuGetErrorString, "cuGetErrorString", 6000, (CUresult error, const char **str))          \
    X(cuDeviceGetCount, "cuDeviceGetCount", 2000, (int *count))                                \
    X(cuDeviceGet, "cuDeviceGet", 2000, (CUdevice * device, int ordinal))                      \
    X(cuDeviceGetName, "cuDeviceGetName", 2000, (char *name, int len, CUdevice dev))           \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000, (int *pi, int attrib, CUdevice dev)) \
    X(cuDeviceTotalMem, "cuDeviceTotalMem", 3020, (size_t * bytes, CUdevice dev))              \
    X(cuDeviceGetUuid, "cuDeviceGetUuid", 11040, (CUuuid * uuid, CUdevice dev))                \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, (CUcontext * pctx, CUdevice dev)) \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000, (CUdevice dev))           \
    X(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 7000,                          \
      (CUdevice dev, unsigned *flags, int *active))                                            \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, (CUcontext * pctx))                            \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, (CUcontext ctx))                               \
    X(cuCtxGetDevice, "cuCtxGetDevice", 2000, (CUdevice * device))                             \
    X(cuCtxGetFlags, "cuCtxGetFlags", 7000, (unsigned *flags))                                 \
    X(cuCtxSynchronize, "cuCtxSynchronize", 2000, (void))                                      \
    X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050,                        \
      (int *least, int *greatest))                                                             \
    X(cuCtxGetApiVersion, "cuCtxGetApiVersion", 3020, (CUcontext ctx, unsigned *version))      \
    X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050,                          \
      (CUstream * stream, unsigned flags, int priority))                                       \
    X(cuStreamDestroy, "cuStreamDestroy", 4000, (CUstream stream))                             \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", 3020, (CUstream stream, CUevent event, unsigned flags)) \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, (CUstream stream))                     \
    X(cuStreamQuery, "cuStreamQuery", 2000, (CUstream stream))                                 \
    X(cuStreamGetPriority, "cuStreamGetPriority", 5050, (CUstream stream, int *priority))      \
    X(cuStreamGetFlags, "cuStreamGetFlags", 5050, (CUstream stream, unsigned *flags))          \
    X(cuStreamGetCtx, "cuStreamGetCtx", 9020, (CUstream stream, CUcontext * pctx))             \
    X(cuLaunchHostFunc, "cuLaunchHostFunc", 10000, (CUstream stream, CUhostFn fn, void *user)) \
    X(cuStreamWriteValue32, "cuStreamWriteValue32", 11070,                                     \
      (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned flags))                   \
    X(cuStreamWriteValue64, "cuStreamWriteValue64", 11070,                                     \
      (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned flags))                   \
    X(cuStreamWaitValue32, "cuStreamWaitValue32", 11070,                                       \
      (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned flags))                   \
    X(cuEventCreate, "cuEventCreate", 2000, (CUevent * event, unsigned flags))                 \
    X(cuEventRecord, "cuEventRecord", 2000, (CUevent event, CUstream stream))                  \
    X(cuEventDestroy, "cuEventDestroy", 4000, (CUevent event))                                 \
    X(cuEventSynchronize, "cuEventSynchronize", 2000, (CUevent event))                         \
    X(cuEventQuery, "cuEventQuery", 2000, (CUevent event))                                     \
    X(cuMemHostAlloc, "cuMemHostAlloc", 2020, (void **pp, size_t bytes, unsigned flags))       \
    X(cuMemFreeHost, "cuMemFreeHost", 2000, (void *p))                                         \
    X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer", 3020,                            \
      (CUdeviceptr * dptr, void *p, unsigned flags))                                           \
    X(cuMemAlloc, "cuMemAlloc", 3020, (CUdeviceptr * dptr, size_t bytes))                      \
    X(cuMemFree, "cuMemFree", 3020, (CUdeviceptr dptr))                                        \
    X(cuMemcpyHtoD, "cuMemcpyHtoD", 3020, (CUdeviceptr dst, const void *src, size_t bytes))    \
    X(cuMemcpyDtoH, "cuMemcpyDtoH", 3020, (void *dst, CUdeviceptr src, size_t bytes))          \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", 3020,                                            \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                       \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", 3020,                                            \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                             \
    X(cuMemsetD32Async, "cuMemsetD32Async", 3020,                                              \
      (CUdeviceptr dst, unsigned value, size_t count, CUstream stream))                        \
    X(cuModuleLoadData, "cuModuleLoadData", 2000, (CUmodule * module, const void *image))      \
    X(cuModuleUnload, "cuModuleUnload", 2000, (CUmodule module))                               \
    X(cuModuleGetFunction, "cuModuleGetFunction", 2000,                                        \
      (CUfunction * fn, CUmodule module, const char *name))                                    \
    X(cuLaunchKernel, "cuLaunchKernel", 4000,                                                  \
      (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,          \
       unsigned bz, unsigned shared, CUstream stream, void **params, void **extra))            \
    X(cuStreamBeginCapture, "cuStreamBeginCapture", 10010, (CUstream stream, CUstreamCaptureMode mode)) \
    X(cuStreamEndCapture, "cuStreamEndCapture", 10000, (CUstream stream, CUgraph * graph))     \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", 10000,                                       \
      (CUstream stream, CUstreamCaptureStatus * status))                                       \
    X(cuGraphCreate, "cuGraphCreate", 10000, (CUgraph * graph, unsigned flags))                \
    X(cuGraphDestroy, "cuGraphDestroy", 10000, (CUgraph graph))                                \
    X(cuGraphGetNodes, "cuGraphGetNodes", 10000, (CUgraph graph, CUgraphNode * nodes, size_t *count)) \
    X(cuGraphNodeGetDependentNodes, "cuGraphNodeGetDependentNodes", 10000,                     \
      (CUgraphNode node, CUgraphNode * dependents, size_t *count))                             \
    X(cuGraphAddChildGraphNode, "cuGraphAddChildGraphNode", 10000,                             \
      (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, CUgraph child)) \
    X(cuGraphAddEmptyNode, "cuGraphAddEmptyNode", 10000,                                       \
      (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps))              \
    X(cuGraphDebugDotPrint, "cuGraphDebugDotPrint", 11030, (CUgraph graph, const char *path, unsigned flags)) \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040,                       \
      (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                           \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000, (CUgraphExec exec))                     \
    X(cuGraphUpload, "cuGraphUpload", 11010, (CUgraphExec exec, CUstream stream))              \
    X(cuGraphLaunch, "cuGraphLaunch", 10000, (CUgraphExec exec, CUstream stream))              \
    X(cuGraphExecUpdate, "cuGraphExecUpdate", 12000,                                           \
      (CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo * info)) \
    X(cuMemPoolCreate, "cuMemPoolCreate", 11020, (CUmemoryPool * pool, const CUmemPoolProps *props)) \
    X(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, (CUmemoryPool pool))                        \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, (CUmemoryPool pool, int attr, void *value)) \
    X(cuMemPoolGetAttribute, "cuMemPoolGetAttribute", 11020, (CUmemoryPool pool, int attr, void *value)) \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020,                                \
      (CUdeviceptr * dptr, size_t bytes, CUmemoryPool pool, CUstream stream))                   \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, (CUdeviceptr dptr, CUstream stream))

// Entry points a driver may lack; a missing one leaves its member NULL.
#define CW_DRIVER_OPTIONAL(X)                                                                  \
    X(cuEventElapsedTime, "cuEventElapsedTime", 12080, (float *ms, CUevent start, CUevent end)) \
    X(cuEventElapsedTime_v1, "cuEventElapsedTime", 2000, (float *ms, CUevent start, CUevent end)) \
    X(cuStreamGetDevice, "cuStreamGetDevice", 12080, (CUstream stream, CUdevice * device))         \
    X(cuDeviceGetDevResource, "cuDeviceGetDevResource", 12040,                                   \
      (CUdevice dev, CUdevResource * resource, CUdevResourceType type))                          \
    X(cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount", 12040,                         \
      (CUdevResource * result, unsigned *groups, const CUdevResource *input,                     \
       CUdevResource *remaining, unsigned flags, unsigned min_count))                            \
    X(cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc", 12040,                             \
      (CUdevResourceDesc * desc, CUdevResource * resources, unsigned count))                     \
    X(cuGreenCtxCreate, "cuGreenCtxCreate", 12040,                                               \
      (CUgreenCtx * green, CUdevResourceDesc desc, CUdevice dev, unsigned flags))                \
    X(cuGreenCtxDestroy, "cuGreenCtxDestroy", 12040, (CUgreenCtx green))                         \
    X(cuCtxFromGreenCtx, "cuCtxFromGreenCtx", 12040, (CUcontext * ctx, CUgreenCtx green))        \
    X(cuGreenCtxGetDevResource, "cuGreenCtxGetDevResource", 12040,                               \
      (CUgreenCtx green, CUdevResource * resource, CUdevResourceType type))                      \
    X(cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate", 12050,                                   \
      (CUstream * stream, CUgreenCtx green, unsigned flags, int priority))                       \
    X(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030,                         \
      (CUstream stream, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,    \
       size_t ndeps, CUstreamCaptureMode mode))                                                  \
    X(cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate", 12030,                   \
      (CUgraphConditionalHandle * handle, CUgraph graph, CUcontext ctx, unsigned default_value,  \
       unsigned flags))                                                                          \
    X(cuGraphAddNode, "cuGraphAddNode", 12030,                                                   \
      (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges, \
       size_t ndeps, CUgraphNodeParams *params))                                                 \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", 2020, (int *value, int attrib, CUfunction f))   \
    X(cuGraphNodeGetType, "cuGraphNodeGetType", 10000, (CUgraphNode node, CUgraphNodeType * type)) \
    X(cuGraphNodeGetDependencies, "cuGraphNodeGetDependencies", 12030,                           \
      (CUgraphNode node, CUgraphNode * deps, CUgraphEdgeData * edges, size_t *count))            \
    X(cuGraphAddDependencies, "cuGraphAddDependencies", 12030,                                   \
      (CUgraph graph, const CUgraphNode *from, const CUgraphNode *to, const CUgraphEdgeData *edges, \
       size_t count))                                                                            \
    X(cuGraphRemoveDependencies, "cuGraphRemoveDependencies", 12030,                             \
      (CUgraph graph, const CUgraphNode *from, const CUgraphNode *to, const CUgraphEdgeData *edges, \
       size_t count))                                                                            \
    X(cuLibraryLoadData, "cuLibraryLoadData", 12000,                                             \
      (CUlibrary * lib, const void *code, CUjit_option *jit_options, void **jit_values,          \
       unsigned n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned n_lib))         \
    X(cuLibraryUnload, "cuLibraryUnload", 12000, (CUlibrary lib))                                \
    X(cuLibraryGetKernel, "cuLibraryGetKernel", 12000, (CUkernel * kernel, CUlibrary lib, const char *name)) \
    X(cuKernelGetFunction, "cuKernelGetFunction", 12000, (CUfunction * f, CUkernel kernel))      \
    X(cuKernelGetParamInfo, "cuKernelGetParamInfo", 12040,                                       \
      (CUkernel kernel, size_t index, size_t *offset, size_t *size))                             \
    X(cuFuncGetParamInfo, "cuFuncGetParamInfo", 12040,                                           \
      (CUfunction f, size_t index, size_t *offset, size_t *size))                                \
    X(cuFuncGetName, "cuFuncGetName", 12030, (const char **name, CUfunction f))                  \
    X(cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams", 12000,                           \
      (CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v2 * params))                                   \
    X(cuGraphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph", 10000,                     \
      (CUgraphNode node, CUgraph * graph))                                                       \
    X(cuGraphKernelNodeSetAttribute, "cuGraphKernelNodeSetAttribute", 11000,                     \
      (CUgraphNode node, CUlaunchAttributeID attr, const CUlaunchAttributeValue *value))         \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", 11060,                                               \
      (const CUlaunchConfig *config, CUfunction f, void **params, void **extra))                 \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, \
      (int *blocks, CUfunction f, int block_threads, size_t shared_bytes))                       \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", 9000, (CUfunction f, int attrib, int value))     \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 4000, (int *can, CUdevice dev, CUdevice peer)) \
    X(cuDeviceGetP2PAttribute, "cuDeviceGetP2PAttribute", 8000,                                  \
      (int *value, int attrib, CUdevice src, CUdevice dst))                                      \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", 4000, (CUcontext peer, unsigned flags))    \
    X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 4000,                                              \
      (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,     \
       CUstream stream))                                                                         \
    X(cuMemPoolSetAccess, "cuMemPoolSetAccess", 11020,                                           \
      (CUmemoryPool pool, const CUmemAccessDesc *map, size_t count))                             \
    X(cuMemPoolGetAccess, "cuMemPoolGetAccess", 11020,                                           \
      (int *flags, CUmemoryPool pool, CUmemLocation *location))                                  \
    X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010,             \
      (CUstreamCaptureMode * mode))                                                             \
    X(cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010, (CUipcMemHandle * handle, CUdeviceptr dptr))  \
    X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle", 11000,                                           \
      (CUdeviceptr * dptr, CUipcMemHandle handle, unsigned flags))                               \
    X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010, (CUdeviceptr dptr))                      \
    X(cuIpcGetEventHandle, "cuIpcGetEventHandle", 4010, (CUipcEventHandle * handle, CUevent event)) \
    X(cuIpcOpenEventHandle, "cuIpcOpenEventHandle", 4010, (CUevent * event, CUipcEventHandle handle)) \
    X(cuMemGetAddressRange, "cuMemGetAddressRange", 3020, (CUdeviceptr * base, size_t * size, CUdeviceptr dptr))

// Entry points only probed for presence (features whose typed entries come
// with the layers that use them). X(symbol, version, feature).
#define CW_DRIVER_PROBES(X)                                        \
    X("cuGreenCtxCreate", 12040, CW_FEATURE_GREEN_CONTEXTS)        \
    X("cuGreenCtxDestroy", 12040, CW_FEATURE_GREEN_CONTEXTS)       \
    X("cuGreenCtxStreamCreate", 12050, CW_FEATURE_GREEN_CONTEXTS)  \
    X("cuCtxFromGreenCtx", 12040, CW_FEATURE_GREEN_CONTEXTS)       \
    X("cuDeviceGetDevResource", 12040, CW_FEATURE_GREEN_CONTEXTS)  \
    X("cuDevSmResourceSplitByCount", 12040, CW_FEATURE_GREEN_CONTEXTS) \
    X("cuDevResourceGenerateDesc", 12040, CW_FEATURE_GREEN_CONTEXTS) \
    X("cuGraphConditionalHandleCreate", 12030, CW_FEATURE_CONDITIONAL_NODES) \
    X("cuGraphAddNode", 12030, CW_FEATURE_CONDITIONAL_NODES)       \
    X("cuStreamBeginCaptureToGraph", 12030, CW_FEATURE_CONDITIONAL_NODES) \
    X("cuLibraryLoadData", 12000, CW_FEATURE_LIBRARY_API)          \
    X("cuLibraryGetKernel", 12000, CW_FEATURE_LIBRARY_API)         \
    X("cuLibraryUnload", 12000, CW_FEATURE_LIBRARY_API)            \
    X("cuStreamGetDevice", 12080, CW_FEATURE_STREAM_GET_DEVICE)    \
    X("cuStreamGetCtx", 12050, CW_FEATURE_CTX_FROM_STREAM)

// Ids of the typed entries, in table order (required, then optional).
enum DriverEntry : int {
#define CW_DRV_ID_(member, symbol, version, params) DRV_##member,
    CW_DRIVER_REQUIRED(CW_DRV_ID_) CW_DRIVER_OPTIONAL(CW_DRV_ID_)
#undef CW_DRV_ID_
    DRV_ENTRY_COUNT
};

struct Driver {
#define CW_DRV_MEMBER_(member, symbol, version, params) CUresult (*member) params;
    CW_DRIVER_REQUIRED(CW_DRV_MEMBER_) CW_DRIVER_OPTIONAL(CW_DRV_MEMBER_)
#undef CW_DRV_MEMBER_
};

// The table code calls through. Valid (all required members non-NULL) once
// ensure_init() returned CW_SUCCESS; never written afterwards except by
// driver_install.
extern Driver g_driver;

inline const Driver &drv() { return g_driver; }

// The path CUWEAVE_LIBCUDA named when the driver loaded is not the one
// "libcuda.so.1" finds (a substitute driver), else NULL; fixed at the first
// load, whatever the environment says later.
const char *driver_other();

// The table as resolved from the driver (valid after ensure_init succeeded).
const Driver &driver_loaded();
// Replaces the table code calls through: the test seam installs its
// wrappers, and driver_loaded() again to remove them. Only while no other
// thread calls the driver.
void driver_install(const Driver &table);

// Loads and initialises the driver once; returns the cached result after.
// Fast path: one acquire load.
cw_status ensure_init();

// 1 when the feature is present (driver loaded and all its symbols found).
bool driver_has(int feature);

// The driver's version (valid after ensure_init succeeded).
int driver_version();

// The driver's name and description of a CUresult, through the real entry
// points (never the test seam). False when the driver is not loaded.
bool driver_error_text(CUresult result, const char **name, const char **text);

// Name of an entry by id, for the seam and for messages.
const char *driver_entry_name(int id);

}  // namespace cw
