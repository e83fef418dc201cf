/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: CUPTI, opened at run time (like libcuda and NVRTC:
// never a link dependency) for the trace's kernel spans (core/trace_cupti.cpp).
#pragma once

#include "cuweave/common.h"
#include "driver/cupti_min.h"

namespace cw {

#define CW_CUPTI_ENTRIES(X)                                                                                  \
    X(cuptiGetVersion, (uint32_t * version))                                                                 \
    X(cuptiGetResultString, (CUptiResult result, const char **str))                                          \
    X(cuptiSubscribe, (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void *userdata))    \
    X(cuptiUnsubscribe, (CUpti_SubscriberHandle subscriber))                                                 \
    X(cuptiEnableCallback, (uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain, \
                            CUpti_CallbackId cbid))                                                          \
    X(cuptiActivityRegisterCallbacks, (CUpti_BuffersCallbackRequestFunc requested,                           \
                                       CUpti_BuffersCallbackCompleteFunc completed))                          \
    X(cuptiActivityEnable, (CUpti_ActivityKind kind))                                                        \
    X(cuptiActivityDisable, (CUpti_ActivityKind kind))                                                       \
    X(cuptiActivityFlushAll, (uint32_t flag))                                                                \
    X(cuptiActivityGetNextRecord, (uint8_t * buffer, size_t valid, CUpti_Activity * *record))                \
    X(cuptiGetTimestamp, (uint64_t * timestamp))                                                             \
    X(cuptiGetContextId, (CUcontext context, uint32_t * id))                                                 \
    X(cuptiGetStreamIdEx, (CUcontext context, CUstream stream, uint8_t per_thread, uint32_t * id))

struct Cupti {
#define CW_CUPTI_MEMBER_(name, params) CUptiResult (*name) params;
    CW_CUPTI_ENTRIES(CW_CUPTI_MEMBER_)
#undef CW_CUPTI_MEMBER_
    // Optional (may be NULL): records CUPTI lost for want of buffer room.
    CUptiResult (*cuptiActivityGetNumDroppedRecords)(CUcontext context, uint32_t stream, size_t *dropped);
    uint32_t version;  // cuptiGetVersion's
    char path[256];    // the file opened
};

// Opens CUPTI on first call: the path in CUWEAVE_LIBCUPTI alone when set;
// else libcupti.so.13, .so.12 and libcupti.so on the loader's search path,
// then under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (extras/CUPTI/lib64,
// lib64, lib), then the nvidia-cuda-cupti wheel's lib directory beside a
// wheel's libcuweave (../nvidia/cu13/lib, ../nvidia/cuda_cupti/lib). On
// success *out points to the table, valid until cupti_forget. Else
// CW_ERROR_NOT_SUPPORTED, and *why (when not NULL) says what was tried.
cw_status ensure_cupti(const Cupti **out, const char **why);
// Tests only (cwi_cupti_forget), with no CUPTI session open: closes the
// library, so that the next ensure_cupti searches again.
void cupti_forget();
// CUPTI's name of a result ("CUPTI_ERROR_..."), or "CUPTI error <n>".
const char *cupti_result_name(const Cupti *c, CUptiResult r, char *buf, size_t len);

}  // namespace cw
