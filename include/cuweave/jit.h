/*
 * cuweave: run-time compilation (NVRTC).
 *
 * NVRTC is opened lazily, only when something asks for it: the core library
 * never needs it. It is found as "libnvrtc.so.13", then "libnvrtc.so.12",
 * then "libnvrtc.so" through the dynamic loader's search path, or at the path
 * in the environment variable CUWEAVE_LIBNVRTC (read once, on first use).
 */
#ifndef CUWEAVE_JIT_H
#define CUWEAVE_JIT_H

#include "cuweave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Loads NVRTC if needed and writes its version. Either pointer may be NULL,
 * not both. Needs no CUDA driver.
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, or CW_ERROR_NO_NVRTC (the
 * detail says which library was tried and why it failed). Thread-safe.
 */
CW_API cw_status cw_nvrtc_version(int *major, int *minor);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_JIT_H */
