/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: NVRTC, opened lazily on first use.
#pragma once

#include "cuweave/common.h"

namespace cw {

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

#define CW_NVRTC_ENTRIES(X)                                                                    \
    X(nvrtcVersion, (int *major, int *minor))                                                  \
    X(nvrtcGetNumSupportedArchs, (int *count))                                                 \
    X(nvrtcGetSupportedArchs, (int *archs))                                                    \
    X(nvrtcCreateProgram, (nvrtcProgram * prog, const char *src, const char *name, int nheaders, \
                           const char *const *headers, const char *const *include_names))      \
    X(nvrtcDestroyProgram, (nvrtcProgram * prog))                                              \
    X(nvrtcCompileProgram, (nvrtcProgram prog, int nopts, const char *const *opts))            \
    X(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t *size))                               \
    X(nvrtcGetProgramLog, (nvrtcProgram prog, char *log))                                      \
    X(nvrtcGetPTXSize, (nvrtcProgram prog, size_t *size))                                      \
    X(nvrtcGetPTX, (nvrtcProgram prog, char *ptx))                                             \
    X(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t *size))                                    \
    X(nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin))                                         \
    X(nvrtcAddNameExpression, (nvrtcProgram prog, const char *expr))                           \
    X(nvrtcGetLoweredName, (nvrtcProgram prog, const char *expr, const char **lowered))

struct Nvrtc {
#define CW_NVRTC_MEMBER_(name, params) nvrtcResult (*name) params;
    CW_NVRTC_ENTRIES(CW_NVRTC_MEMBER_)
#undef CW_NVRTC_MEMBER_
    const char *(*nvrtcGetErrorString)(nvrtcResult result);
};

// Opens NVRTC on first call ("libnvrtc.so.13", then older sonames, or the
// path in CUWEAVE_LIBNVRTC); CW_ERROR_NO_NVRTC when it cannot. On success
// *out points to the table, valid for the life of the process.
cw_status ensure_nvrtc(const Nvrtc **out);

}  // namespace cw
