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
 * Returns the library's release version, packed as CW_VERSION_PACK does.
 * Compare with CW_VERSION_* to detect a header/library mismatch.
 * Needs no driver; thread-safe.
 */
CW_API unsigned cw_version(void);

/* Returns the library's ABI version, packed as CW_VERSION_PACK does. */
CW_API unsigned cw_version_api(void);

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
 *  CW_SUCCESS              the driver is loaded and cuInit succeeded;
 *  CW_ERROR_NO_DRIVER      libcuda could not be opened or lacks
 *                          cuGetProcAddress (every call needing the driver
 *                          then returns this);
 *  CW_ERROR_NOT_SUPPORTED  the driver is older than CUDA 12.0, or lacks an
 *                          entry point cuweave requires;
 *  CW_ERROR_NO_DEVICE      cuInit reported no usable device;
 *  CW_ERROR_DRIVER         cuInit failed otherwise (see cw_last_error()).
 */
CW_API cw_status cw_init(void);

/*
 * Writes the driver's CUDA version (for example 13000 for 13.0) to *version.
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT (version NULL), or what
 * cw_init() returns.
 */
CW_API cw_status cw_driver_version(int *version);

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
 * Returns 1 when the feature's entry points were all found in the loaded
 * driver (for CW_FEATURE_NVRTC: when NVRTC loads), 0 otherwise, including
 * when there is no driver or the value is not a cw_feature. A device may
 * still refuse a feature its driver has (the call then returns
 * CW_ERROR_NOT_SUPPORTED). Initialises the library if needed; thread-safe.
 */
CW_API int cw_driver_has(cw_feature feature);

/*
 * Writes the number of CUDA devices to *count (0 is possible).
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT (count NULL), or what
 * cw_init() returns.
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
 * Fills *info for device ordinal `device`. Does not create a context.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT when info is NULL, device is
 * negative or not below cw_device_count(); what cw_init() returns; or
 * CW_ERROR_DRIVER when a query fails. On failure *info is untouched.
 */
CW_API cw_status cw_device_get_info(int device, cw_device_info *info);

/*
 * Writes the device's stream priority range: *least (lowest priority, the
 * default, 0 on current GPUs) and *greatest (numerically smallest, e.g. -5).
 * The driver answers this only through a context: when the device's primary
 * context is not active, this retains it for the duration of the call, which
 * may take 100 ms or more the first time. The result is cached per device.
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, what cw_init() returns, or
 * the error of the failing driver call.
 */
CW_API cw_status cw_device_get_priority_range(int device, int *least, int *greatest);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_DEVICE_H */
