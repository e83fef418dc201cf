/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: library initialisation, versions, driver features and devices.
 */
#ifndef CUWEAVE_DEVICE_H
#define CUWEAVE_DEVICE_H

#include "cuweave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The library's release version. Compare with CW_VERSION_* to detect a
 * header/library mismatch. Needs no driver; thread-safe.
 *
 * Returns: the version, packed as CW_VERSION_PACK does.
 */
CW_API unsigned cw_version(void);

/* The versions of cuweave and of the libraries it opens at run time. */
typedef struct cw_versions {
    unsigned cuweave;        /* the release, packed as cw_version() */
    unsigned api;            /* the ABI version, packed likewise */
    int driver;              /* the CUDA driver's CUDA version (13000 for 13.0); 0: no driver */
    int nvrtc_major;         /* NVRTC's version (13, 0); 0, 0: no NVRTC */
    int nvrtc_minor;
    int nccl;                /* NCCL's version code (22703 for 2.27.3); 0: no NCCL */
    const char *builtin_origin; /* the built-in kernels' image (docs/kernels.md): "cubin ... + ptx ...
                                   (nvcc at build time)" or "ptx ... (checked in)"; a static string */
    uint8_t reserved[32];    /* zeroed; room for new fields */
} cw_versions;

/*
 * Fills *v with the versions of cuweave and of the libraries it opens at
 * run time: the CUDA driver (loaded as cw_init() does: the driver's version
 * is reported even when cw_init() fails for another reason than its
 * absence, an old driver or no device), NVRTC (opened as a compile would,
 * CUWEAVE_LIBNVRTC or the usual sonames) and NCCL (CUWEAVE_LIBNCCL, else
 * libnccl.so.2). A library that is absent (cannot be opened, or lacks an
 * entry cuweave needs) is not an error: its fields are 0, nothing is logged
 * and the thread's detail is left as it was. Whether the driver can be used
 * is cw_init()'s answer; whether a compile can run, cw_driver_has(
 * CW_FEATURE_NVRTC)'s. Thread-safe; the first call may take some
 * milliseconds (it opens the libraries).
 *
 * Returns:
 *   CW_SUCCESS                 *v is filled (every field; reserved zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  v is NULL.
 *   CW_ERROR_COMPILE           NVRTC was opened but nvrtcVersion failed
 *                              (detail: the call); *v untouched.
 *   CW_ERROR_DRIVER            NCCL was opened but ncclGetVersion failed
 *                              (detail: NCCL's words); *v untouched.
 */
CW_API cw_status cw_get_versions(cw_versions *v);

/*
 * Loads the CUDA driver and initialises it. Idempotent and thread-safe:
 * the first call does the work, every later call (from any thread) returns
 * the same result at once. Every other cuweave function that needs the
 * driver calls this itself, so calling it is optional; it is the place to
 * find out early whether a GPU can be used.
 *
 * The driver is found as "libcuda.so.1" through the dynamic loader's search
 * path, or at the path in the environment variable CUWEAVE_LIBCUDA when that
 * is set (read once, by the first call).
 *
 * Returns:
 *   CW_SUCCESS              the driver is loaded and cuInit succeeded.
 *   CW_ERROR_NO_DRIVER      libcuda could not be opened, lacks
 *                           cuGetProcAddress or cuDriverGetVersion (every
 *                           call needing the driver then returns this).
 *   CW_ERROR_NOT_SUPPORTED  the driver is older than CUDA 12.0, or lacks an
 *                           entry point cuweave requires.
 *   CW_ERROR_NO_DEVICE      cuInit reported no usable device.
 *   CW_ERROR_DRIVER         cuInit failed otherwise (detail: the CUresult).
 */
CW_API cw_status cw_init(void);

/* Optional driver features, each a group of entry points. */
typedef enum cw_feature {
    CW_FEATURE_GREEN_CONTEXTS = 0,    /* cuGreenCtxCreate, cuGreenCtxStreamCreate, SM resources (12.5) */
    CW_FEATURE_CONDITIONAL_NODES = 1, /* cuGraphConditionalHandleCreate, cuGraphAddNode (12.3) */
    CW_FEATURE_LIBRARY_API = 2,       /* cuLibraryLoadData, cuLibraryGetKernel (12.0) */
    CW_FEATURE_STREAM_GET_DEVICE = 3, /* cuStreamGetDevice (12.8) */
    CW_FEATURE_CTX_FROM_STREAM = 4,   /* cuStreamGetCtx_v2, green-aware (12.5) */
    CW_FEATURE_NVRTC = 5              /* NVRTC can be loaded (opens it on first ask) */
} cw_feature;

/*
 * Whether the loaded driver has an optional feature. A device may still
 * refuse a feature its driver has (the call then returns
 * CW_ERROR_NOT_SUPPORTED). Initialises the library if needed (a failure to
 * load is recorded in the detail and logged, as cw_init() does);
 * thread-safe.
 *
 * Returns: 1 when the feature's entry points were all found in the loaded
 * driver (for CW_FEATURE_NVRTC: when NVRTC loads), 0 otherwise, including
 * when there is no driver or the value is not a cw_feature.
 */
CW_API int cw_driver_has(cw_feature feature);

/*
 * Writes the number of CUDA devices to *count (0 is possible).
 *
 * Returns:
 *   CW_SUCCESS                 *count is the number of devices.
 *   CW_ERROR_INVALID_ARGUMENT  count is NULL.
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than 12.0 (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            cuInit or cuDeviceGetCount failed (detail:
 *                              the call).
 */
CW_API cw_status cw_device_count(int *count);

/* Facts about one device. Filled by cw_device_get_info(). */
typedef struct cw_device_info {
    int ordinal;                 /* the device ordinal this describes */
    char name[256];              /* NUL-terminated marketing name */
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;                /* streaming multiprocessors */
    int max_threads_per_block;
    int warp_size;
    int clock_khz;
    int async_engines;           /* copy engines */
    int l2_cache_bytes;
    int max_shared_per_block_optin;
    int can_map_host_memory;     /* 1/0 */
    int stream_priorities;       /* 1/0: stream priorities supported */
    int memory_pools;            /* 1/0: cuMemAllocAsync supported */
    int stream_mem_ops_64;       /* 1/0: 64-bit cuStreamWriteValue/WaitValue */
    int pci_domain, pci_bus, pci_device;
    uint64_t total_memory;       /* bytes */
    unsigned char uuid[16];
    uint8_t reserved[64];        /* zero; room for new fields */
} cw_device_info;

/*
 * Fills *info for device ordinal `device`. Does not create a context. (A
 * context's stream priority range is in cw_context_info.)
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the device.
 *   CW_ERROR_INVALID_ARGUMENT  info is NULL; device is negative or not below
 *                              cw_device_count() (the detail says how many).
 *   CW_ERROR_NO_DRIVER         no CUDA driver (as cw_init()).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than 12.0 (as cw_init()).
 *   CW_ERROR_NO_DEVICE         cuInit found no device (as cw_init()).
 *   CW_ERROR_DRIVER            cuInit or a device query failed (detail: the
 *                              call).
 * On failure *info is untouched.
 */
CW_API cw_status cw_device_get_info(int device, cw_device_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_DEVICE_H */
