/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: common definitions.
 *
 * Status codes, the per-thread error detail, the log callback and the CUDA
 * handle types that appear in the public API. Every other cuweave header
 * includes this one.
 *
 * Conventions used across the whole API:
 *  - Every fallible function returns a cw_status. CW_SUCCESS is 0; every
 *    error is a positive value whose number never changes between releases.
 *  - On failure a function leaves its out-parameters untouched unless its
 *    comment says otherwise, and records a detail for the calling thread
 *    (cw_last_error()).
 *  - Arguments are checked before anything else: an invalid argument gives
 *    CW_ERROR_INVALID_ARGUMENT even on a machine without a CUDA driver.
 *  - Handles are pointers to the library's objects. A call given a handle
 *    that is not a live object of its type (a pointer to anything else, a
 *    handle of another type, a destroyed one) refuses it with
 *    CW_ERROR_INVALID_HANDLE without reading its memory (NULL:
 *    CW_ERROR_INVALID_ARGUMENT); a destroy of such a handle does nothing
 *    but set the caller's pointer to NULL and log a warning
 *    (CW_LOG_WARNING; the thread's detail is left as it was). For a destroyed
 *    handle this holds until 256 more objects (of any type, including
 *    those the library makes and frees itself, such as a pool's streams)
 *    have been freed after it: the library holds the memory of the last
 *    256 objects freed, so no new object can be made at a destroyed one's
 *    address before then. After that a new object of the same type may be
 *    made at that address, and a stale copy of the destroyed handle then
 *    names it. Do not use a handle after destroying it.
 *  - Each function's comment ends in a Returns block listing the statuses
 *    it returns. CW_ERROR_DRIVER there stands for any failed driver call:
 *    the detail names the call (driver_call) and its CUresult (cu_result),
 *    and a CUresult that has a status of its own gives that status instead
 *    (CUDA_ERROR_OUT_OF_MEMORY: CW_ERROR_OUT_OF_MEMORY, a sticky device
 *    error: CW_ERROR_DEVICE_FAULT, ...; docs/errors.md has the table).
 *    CW_ERROR_NOT_READY comes only from calls that ask whether work is done.
 *  - The library never prints, never calls abort() or exit() (except in a
 *    build configured with debug_abort, see docs/errors.md), and never lets
 *    a C++ exception cross the API.
 */
#ifndef CUWEAVE_COMMON_H
#define CUWEAVE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  define CW_EXPORT_ __declspec(dllexport)
#  define CW_IMPORT_ __declspec(dllimport)
#else
#  define CW_EXPORT_ __attribute__((visibility("default")))
#  define CW_IMPORT_
#endif

/* CW_API marks every exported symbol. */
#if defined(CW_BUILDING_LIBRARY)
#  define CW_API CW_EXPORT_
#else
#  define CW_API CW_IMPORT_
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * CUDA driver handle types, declared exactly as cuda.h declares them, so that
 * a program may include cuda.h before or after cuweave's headers, and so that
 * cuweave's headers do not need the CUDA toolkit to compile.
 */
#ifndef __cuda_cuda_h__
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
#endif

/* A device address (CUdeviceptr): 64 bits on every platform CUDA supports. */
typedef uint64_t cw_devptr;

/*
 * The status list. Each entry: X(NAME, value, description). Values are
 * pinned: a value is never reused or renumbered.
 */
#define CW_STATUS_MAP(X)                                                                    \
    X(SUCCESS, 0, "success")                                                                \
    X(ERROR_INVALID_ARGUMENT, 1, "an argument is invalid")                                  \
    X(ERROR_NO_DRIVER, 2, "the CUDA driver (libcuda.so.1) could not be loaded")             \
    X(ERROR_NO_DEVICE, 3, "no usable CUDA device")                                          \
    X(ERROR_NOT_SUPPORTED, 4, "not supported by this driver or device")                     \
    X(ERROR_OUT_OF_MEMORY, 5, "out of memory")                                              \
    X(ERROR_INVALID_HANDLE, 6, "invalid, foreign or destroyed handle")                      \
    X(ERROR_INVALID_STATE, 7, "the object is in the wrong state for this call")             \
    X(ERROR_NOT_READY, 8, "the work has not completed yet")                                 \
    X(ERROR_TIMEOUT, 9, "the wait timed out")                                               \
    X(ERROR_POOL_EXHAUSTED, 10, "the pool has no free stream")                              \
    X(ERROR_DEVICE_FAULT, 11, "the device reported a fault; the context is unusable")       \
    X(ERROR_CAPTURE, 12, "stream capture failed or was invalidated")                        \
    X(ERROR_NOT_PERMITTED, 13, "the operation is not permitted")                            \
    X(ERROR_DRIVER, 14, "a CUDA driver call failed")                                        \
    X(ERROR_NO_NVRTC, 15, "NVRTC (libnvrtc.so) could not be loaded")                        \
    X(ERROR_COMPILE, 16, "compilation failed")                                              \
    X(ERROR_INTERNAL, 17, "internal error in cuweave")

typedef enum cw_status {
#define CW_STATUS_ENUM_ENTRY_(name, value, text) CW_##name = value,
    CW_STATUS_MAP(CW_STATUS_ENUM_ENTRY_)
#undef CW_STATUS_ENUM_ENTRY_
} cw_status;

/*
 * The enumerator's name of a status ("CW_ERROR_TIMEOUT"). Thread-safe,
 * needs no driver.
 *
 * Returns: the name, a static string; "CW_UNKNOWN_STATUS" for a value that
 * is not a cw_status. Never NULL.
 */
CW_API const char *cw_status_name(cw_status status);

/*
 * A short English description of a status. Thread-safe, needs no driver.
 *
 * Returns: the description, a static string; "unknown status" for a value
 * that is not a cw_status. Never NULL.
 */
CW_API const char *cw_status_string(cw_status status);

/*
 * The detail of the most recent failure on the calling thread.
 *
 * All strings are owned by the library, never NULL (empty when not
 * applicable), and stay valid on this thread until the next cuweave call on
 * this thread that fails (or cw_clear_error()). Successful calls do not
 * change the detail.
 */
typedef struct cw_error_info {
    cw_status status;        /* what the failing function returned */
    int cu_result;           /* CUresult of the failing driver call, 0 if none */
    const char *cu_name;     /* "CUDA_ERROR_OUT_OF_MEMORY", or "" */
    const char *cu_string;   /* the driver's description of cu_result, or "" */
    const char *driver_call; /* driver or NVRTC entry point that failed, or "" */
    const char *function;    /* the cuweave function that failed, e.g. "cw_context_create" */
    const char *message;     /* one line that says all of the above in words */
} cw_error_info;

/*
 * The calling thread's error detail. Thread-safe (each thread has its own).
 *
 * Returns: the detail, owned by the library and valid on this thread until
 * its next failing cuweave call (or cw_clear_error()). Never NULL. When no
 * cuweave call has failed on this thread, status is CW_SUCCESS and the
 * strings are empty.
 */
CW_API const cw_error_info *cw_last_error(void);

/*
 * Resets the calling thread's detail to CW_SUCCESS and empty strings.
 *
 * Returns: nothing.
 */
CW_API void cw_clear_error(void);

typedef enum cw_log_level {
    CW_LOG_ERROR = 0,   /* a call failed; the message equals cw_last_error()->message */
    CW_LOG_WARNING = 1, /* something worked, but not the way asked (a fallback was taken) */
    CW_LOG_INFO = 2,    /* one-off events: driver loaded, NVRTC loaded */
    CW_LOG_DEBUG = 3
} cw_log_level;

/*
 * Log callback. Called synchronously on the thread whose cuweave call
 * produced the message, while no cuweave lock is held. It may call
 * cw_last_error() and other cuweave functions except cw_log_set_callback().
 * message is valid only during the call.
 */
typedef void (*cw_log_fn)(void *user, cw_log_level level, const char *message);

/*
 * Installs (or, with fn NULL, removes) the process-wide log callback.
 * Messages with a level above max_level are not delivered. The library has
 * no callback by default and never prints. Needs no driver. Thread-safe; a
 * message being logged concurrently goes to either the old or the new
 * callback, never to a half-installed one.
 *
 * Returns:
 *   CW_SUCCESS                 the callback (or none) is installed.
 *   CW_ERROR_INVALID_ARGUMENT  max_level is not a cw_log_level (nothing
 *                              changed).
 */
CW_API cw_status cw_log_set_callback(cw_log_fn fn, void *user, cw_log_level max_level);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_COMMON_H */
