// cuweave internal: error reporting.
//
// Every public function starts with CW_ENTRY, which names it for the error
// detail. Failures are built with fail(), fail_cu() or the CW_CHECK_ARG and
// CW_CU macros; each records the thread's detail, logs it, and returns the
// status to hand back.
#pragma once

#include "driver/cuda_min.h"
#include "cuweave/common.h"

namespace cw {

// The public function being executed on this thread (innermost).
class ApiScope {
  public:
    explicit ApiScope(const char *name) noexcept;
    ~ApiScope() noexcept;
    ApiScope(const ApiScope &) = delete;
    ApiScope &operator=(const ApiScope &) = delete;

  private:
    const char *prev_;
};

const char *current_api() noexcept;

// Records a failure without a driver call. printf-style message.
cw_status fail(cw_status status, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// Records a failed driver (or NVRTC when nvrtc is true) call and returns the
// status it maps to. `what` (may be NULL) adds context to the message.
cw_status fail_cu(CUresult result, const char *call, const char *what = nullptr) noexcept;

// The last capture-class failure (CUDA_ERROR_STREAM_CAPTURE_*) that fail_cu
// recorded, process-wide, with a serial number that grows with each.
struct CaptureViolation {
    char api[48];
    char call[48];
    CUresult result;
};
uint64_t capture_violation_serial() noexcept;
// True (and *out filled) when a capture-class failure was recorded after serial.
bool capture_violation_since(uint64_t serial, CaptureViolation *out) noexcept;

// Records a failed NVRTC call.
cw_status fail_nvrtc(int result, const char *call, const char *what = nullptr) noexcept;

// Invalid argument: the failed check's expression goes into the message. In a
// build configured with CW_DEBUG_ABORT this prints it and aborts.
cw_status invalid_arg(const char *expr, const char *file, int line) noexcept;

// Copies src (NULL: "") into dst[cap], truncated, always terminated.
void copy_text(char *dst, size_t cap, const char *src) noexcept;

// Maps a CUresult to the status cuweave reports for it.
cw_status status_from_cu(CUresult result) noexcept;

// Sends a message to the log callback (if any, and if level passes).
void log(cw_log_level level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

}  // namespace cw

#define CW_ENTRY ::cw::ApiScope cw_api_scope_(__func__)

#define CW_CHECK_ARG(expr)                                            \
    do {                                                              \
        if (__builtin_expect(!(expr), 0))                             \
            return ::cw::invalid_arg(#expr, __FILE__, __LINE__);      \
    } while (0)

// Calls a driver entry; on failure returns the mapped status from the
// enclosing function. Usage: CW_CU(cuStreamQuery, (stream));
#define CW_CU(entry, args)                                            \
    do {                                                              \
        CUresult cw_r_ = ::cw::drv().entry args;                      \
        if (__builtin_expect(cw_r_ != CUDA_SUCCESS, 0))               \
            return ::cw::fail_cu(cw_r_, #entry);                      \
    } while (0)

// Returns from the enclosing function when a cw_status is not CW_SUCCESS.
#define CW_TRY(expr)                                                  \
    do {                                                              \
        cw_status cw_s_ = (expr);                                     \
        if (__builtin_expect(cw_s_ != CW_SUCCESS, 0))                 \
            return cw_s_;                                             \
    } while (0)
