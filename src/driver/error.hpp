/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: error reporting.
//
// Every public function starts with CW_ENTRY, which names it for the error
// detail: the library never calls its own public functions, so the name in
// the detail is always the call the user made. Failures are built with
// fail(), fail_cu() or the CW_CHECK_ARG and CW_CU macros; each records the
// thread's detail, logs it, and returns the status to hand back.
#pragma once

#include "cuweave/common.h"
#include "driver/cuda_min.h"

namespace cw {

// The public function being executed on this thread. A user callback that
// calls the API from inside a call (a capture function, an operator) gets
// its own scope for the length of that call.
// The name of the public call in progress on this thread (error.cpp): read
// by the failure paths, set by every public call (inline: two TLS accesses,
// no call, on every entry).
extern thread_local const char *t_api __attribute__((tls_model("initial-exec")));

class ApiScope {
  public:
    explicit ApiScope(const char *name) noexcept : prev_(t_api) { t_api = name; }
    ~ApiScope() noexcept { t_api = prev_; }
    ApiScope(const ApiScope &) = delete;
    ApiScope &operator=(const ApiScope &) = delete;

  private:
    const char *prev_;
};

const char *current_api() noexcept;

// Records a failure without a driver call. printf-style message.
cw_status fail(cw_status status, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// Records a failure passed on from a call made inside this one (an
// operator's compute, say): cu_result and call, when a driver call failed
// there, fill the detail's cu_result, cu_name, cu_string and driver_call as
// fail_cu would; the printf-style message is the whole specific part.
cw_status fail_from(cw_status status, int cu_result, const char *call, const char *fmt, ...) noexcept
    __attribute__((format(printf, 4, 5)));

// For a call that cannot fail (a destroy) and ignores what it was given (a
// handle that is not live): logs a CW_LOG_WARNING naming the public call and
// the status a fallible call would have returned; the thread's detail
// (cw_last_error) is left alone (docs/api-convention.md).
void ignored(cw_status status, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// Records a failed driver call and returns the status it maps to. `what`
// (may be NULL) adds context to the message.
cw_status fail_cu(CUresult result, const char *call, const char *what = nullptr) noexcept;

// Records a failed NVRTC call.
cw_status fail_nvrtc(int result, const char *call, const char *what = nullptr) noexcept;

// Invalid argument: the failed check's expression goes into the message. In a
// build configured with CW_DEBUG_ABORT this prints it and aborts.
cw_status invalid_arg(const char *expr, const char *file, int line) noexcept;

// Puts a printf-style prefix in front of the specific part of the detail
// just recorded ("function: PREFIX: what it said"), keeping its status, its
// driver call and its CUresult. Returns the detail's status.
cw_status prefix_error(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// The thread's detail: the public cw_error_info and the text it points to.
struct ErrorDetail {
    cw_error_info info;
    char cu_name[64];
    char cu_string[192];
    char driver_call[64];
    char function[64];
    char message[768];
};

// Keeps the thread's detail across cleanup that may overwrite it (a failed
// call's rollback), and puts it back when it goes out of scope.
class KeepError {
  public:
    KeepError() noexcept;
    ~KeepError() noexcept;
    KeepError(const KeepError &) = delete;
    KeepError &operator=(const KeepError &) = delete;

  private:
    ErrorDetail saved_;
};

// For a call that probes for something whose absence is not a failure (a
// library that may not be installed): while one lives on the thread,
// failures recorded are not logged, and the thread's detail is put back
// when it goes out of scope (a successful call leaves the detail alone).
class QuietErrors {
  public:
    QuietErrors() noexcept;
    ~QuietErrors() noexcept;
    QuietErrors(const QuietErrors &) = delete;
    QuietErrors &operator=(const QuietErrors &) = delete;

  private:
    KeepError keep_;
    bool prev_;
};

// The thread's detail (what cw_last_error returns), and clearing it.
const cw_error_info &last_error() noexcept;
void clear_error() noexcept;

// A status's name ("CW_ERROR_TIMEOUT") and its short description.
const char *status_name(cw_status status) noexcept;
const char *status_text(cw_status status) noexcept;

// Maps a CUresult to the status cuweave reports for it. CUDA_ERROR_NOT_READY
// maps to CW_ERROR_DRIVER: a query (cuStreamQuery, cuEventQuery) checks for
// it and answers CW_ERROR_NOT_READY itself; from any other call it is a
// failure.
cw_status status_from_cu(CUresult result) noexcept;

inline bool is_capture_error(CUresult r) {
    return r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

// A capture-class failure (CUDA_ERROR_STREAM_CAPTURE_*): the public call it
// happened in, the driver entry, and its result. fail_cu keeps the last one
// of the process with a serial number that grows with each; the stream code
// keeps the first one per capture (stream.hpp).
struct CaptureNote {
    char api[48];
    char call[48];
    CUresult result;
};
uint64_t capture_violation_serial() noexcept;
// True (and *out filled) when a capture-class failure was recorded after serial.
bool capture_violation_since(uint64_t serial, CaptureNote *out) noexcept;

// Copies src (NULL: "") into dst[cap], truncated, always terminated.
void copy_text(char *dst, size_t cap, const char *src) noexcept;

// The log callback (cw_log_set_callback) and sending a message to it.
void set_log(cw_log_fn fn, void *user, cw_log_level max_level) noexcept;
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
