/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave driver layer: status names, the per-thread error detail, the log
// callback.
#include "driver/error.hpp"

#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.hpp"

namespace cw {

void copy_text(char *dst, size_t cap, const char *src) noexcept {
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
// Touched by every public call: initial-exec keeps it to one TLS load even in
// the shared library (a pointer fits the static TLS surplus of dlopen).
thread_local const char *t_api __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

thread_local ErrorDetail t_detail = {
    {CW_SUCCESS, 0, "", "", "", "", ""}, {0}, {0}, {0}, {0}, {0}};

std::mutex g_log_mutex;
cw_log_fn g_log_fn = nullptr;
void *g_log_user = nullptr;
cw_log_level g_log_max = CW_LOG_ERROR;

void deliver(cw_log_level level, const char *message) {
    cw_log_fn fn;
    void *user;
    {
        std::lock_guard<std::mutex> lock(g_log_mutex);
        fn = g_log_fn;
        user = g_log_user;
        if (!fn || level > g_log_max) return;
    }
    fn(user, level, message);
}

// Set while a call probes for something whose absence is not a failure
// (QuietErrors): nothing it records reaches the log callback.
thread_local bool t_quiet = false;

// Fills the thread's detail and logs it at `level`. `text` is the specific
// part of the message; with compose false it is the whole specific part even
// when a driver call is named (a failure passed on from a call made inside
// this one).
cw_status record(cw_status status, CUresult cu, const char *call, const char *text,
                 cw_log_level level = CW_LOG_ERROR, bool compose = true) {
    ErrorDetail &d = t_detail;
    const char *fn = t_api ? t_api : "cuweave";
    copy_text(d.function, sizeof d.function, fn);
    copy_text(d.driver_call, sizeof d.driver_call, call);
    d.cu_name[0] = d.cu_string[0] = '\0';
    if (call && cu != CUDA_SUCCESS) {
        const char *name = nullptr, *str = nullptr;
        // The driver knows its own codes; only ask it when it is loaded.
        driver_error_text(cu, &name, &str);
        if (name)
            copy_text(d.cu_name, sizeof d.cu_name, name);
        else
            snprintf(d.cu_name, sizeof d.cu_name, "CUresult %d", cu);
        copy_text(d.cu_string, sizeof d.cu_string, str ? str : "unrecognised error code");
    }
    if (call && cu != CUDA_SUCCESS && compose)
        snprintf(d.message, sizeof d.message, "%s: %s failed with %s (%s)%s%s", d.function,
                 d.driver_call, d.cu_name, d.cu_string, text && *text ? ": " : "", text ? text : "");
    else
        snprintf(d.message, sizeof d.message, "%s: %s", d.function, text ? text : status_text(status));
    d.info.status = status;
    d.info.cu_result = call ? cu : 0;
    d.info.cu_name = d.cu_name;
    d.info.cu_string = d.cu_string;
    d.info.driver_call = d.driver_call;
    d.info.function = d.function;
    d.info.message = d.message;
    if (!t_quiet) deliver(level, d.message);
    return status;
}

}  // namespace

const char *current_api() noexcept { return t_api ? t_api : "cuweave"; }

cw_status fail(cw_status status, const char *fmt, ...) noexcept {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return record(status, CUDA_SUCCESS, nullptr, text);
}

cw_status fail_from(cw_status status, int cu_result, const char *call, const char *fmt, ...) noexcept {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    const bool named = call && *call && cu_result != CUDA_SUCCESS;
    return record(status, named ? static_cast<CUresult>(cu_result) : CUDA_SUCCESS, named ? call : nullptr, text,
                  CW_LOG_ERROR, false);
}

void ignored(cw_status status, const char *fmt, ...) noexcept {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log(CW_LOG_WARNING, "%s: %s (%s)", current_api(), text, status_name(status));
}

QuietErrors::QuietErrors() noexcept : prev_(t_quiet) { t_quiet = true; }
QuietErrors::~QuietErrors() noexcept { t_quiet = prev_; }

namespace {
// The most recent capture-class failure of any call made through cuweave,
// for explaining an invalidated capture that no per-stream note covers.
std::mutex g_violation_mutex;
uint64_t g_violation_serial;
CaptureNote g_violation;
}  // namespace

cw_status fail_cu(CUresult result, const char *call, const char *what) noexcept {
    if (is_capture_error(result)) {
        std::lock_guard<std::mutex> lock(g_violation_mutex);
        g_violation_serial++;
        copy_text(g_violation.api, sizeof g_violation.api, current_api());
        copy_text(g_violation.call, sizeof g_violation.call, call ? call : "");
        g_violation.result = result;
    }
    return record(status_from_cu(result), result, call, what);
}

uint64_t capture_violation_serial() noexcept {
    std::lock_guard<std::mutex> lock(g_violation_mutex);
    return g_violation_serial;
}

bool capture_violation_since(uint64_t serial, CaptureNote *out) noexcept {
    std::lock_guard<std::mutex> lock(g_violation_mutex);
    if (g_violation_serial <= serial) return false;
    *out = g_violation;
    return true;
}

cw_status fail_nvrtc(int result, const char *call, const char *what) noexcept {
    char text[512];
    snprintf(text, sizeof text, "%s failed with nvrtcResult %d%s%s", call, result, what ? ": " : "",
             what ? what : "");
    cw_status st = record(CW_ERROR_COMPILE, CUDA_SUCCESS, nullptr, text);
    copy_text(t_detail.driver_call, sizeof t_detail.driver_call, call);
    return st;
}

cw_status invalid_arg(const char *expr, const char *file, int line) noexcept {
#if defined(CW_DEBUG_ABORT)
    fprintf(stderr, "cuweave: %s: input check `%s` failed (%s:%d)\n", current_api(), expr, file, line);
    abort();
#else
    (void)file;
    (void)line;
#endif
    char text[384];
    snprintf(text, sizeof text, "invalid argument: check `%s` failed", expr);
    return record(CW_ERROR_INVALID_ARGUMENT, CUDA_SUCCESS, nullptr, text);
}

cw_status status_from_cu(CUresult r) noexcept {
    switch (r) {
    case CUDA_SUCCESS: return CW_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: return CW_ERROR_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_DEVICE: return CW_ERROR_NO_DEVICE;
    case CUDA_ERROR_STUB_LIBRARY: return CW_ERROR_NO_DRIVER;
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_INVALID_HANDLE: return CW_ERROR_INVALID_HANDLE;
    // CUDA_ERROR_NOT_READY is an answer only from a query (cuStreamQuery,
    // cuEventQuery), and the queries turn it into CW_ERROR_NOT_READY (or
    // "not yet") themselves before anything fails. Reaching here it came
    // from a call that is not a query, and a caller told CW_ERROR_NOT_READY
    // ("not finished yet, ask again") would retry a failed creation: it is
    // CW_ERROR_DRIVER, with the call and its CUresult in the detail.
    case CUDA_ERROR_NOT_READY: return CW_ERROR_DRIVER;
    case CUDA_ERROR_NOT_SUPPORTED: return CW_ERROR_NOT_SUPPORTED;
    case CUDA_ERROR_NOT_PERMITTED: return CW_ERROR_NOT_PERMITTED;
    case CUDA_ERROR_TIMEOUT: return CW_ERROR_TIMEOUT;
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED: return CW_ERROR_DEVICE_FAULT;
    default:
        if (r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
            return CW_ERROR_CAPTURE;
        return CW_ERROR_DRIVER;
    }
}

void log(cw_log_level level, const char *fmt, ...) noexcept {
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    deliver(level, text);
}

cw_status prefix_error(const char *fmt, ...) noexcept {
    ErrorDetail &d = t_detail;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    // "function: rest" becomes "function: prefix: rest".
    const size_t skip = strlen(d.function) + 2;
    const char *rest = strncmp(d.message, d.function, skip - 2) == 0 && strlen(d.message) >= skip ? d.message + skip
                                                                                                   : d.message;
    char text[sizeof d.message];
    snprintf(text, sizeof text, "%s: %s: %s", d.function, prefix, rest);
    copy_text(d.message, sizeof d.message, text);
    return d.info.status;
}

KeepError::KeepError() noexcept : saved_(t_detail) {}

KeepError::~KeepError() noexcept {
    ErrorDetail &d = t_detail;
    d = saved_;
    // The info's pointers point into the saved copy's arrays: point them home.
    d.info.cu_name = d.cu_name;
    d.info.cu_string = d.cu_string;
    d.info.driver_call = d.driver_call;
    d.info.function = d.function;
    d.info.message = d.message;
}

const cw_error_info &last_error() noexcept { return t_detail.info; }

void clear_error() noexcept {
    ErrorDetail &d = t_detail;
    d.cu_name[0] = d.cu_string[0] = d.driver_call[0] = d.function[0] = d.message[0] = '\0';
    d.info = cw_error_info{CW_SUCCESS, 0, "", "", "", "", ""};
}

const char *status_name(cw_status status) noexcept {
    switch (status) {
#define CW_NAME_CASE_(name, value, text) \
    case CW_##name: return "CW_" #name;
        CW_STATUS_MAP(CW_NAME_CASE_)
#undef CW_NAME_CASE_
    }
    return "CW_UNKNOWN_STATUS";
}

const char *status_text(cw_status status) noexcept {
    switch (status) {
#define CW_STRING_CASE_(name, value, text) \
    case CW_##name: return text;
        CW_STATUS_MAP(CW_STRING_CASE_)
#undef CW_STRING_CASE_
    }
    return "unknown status";
}

void set_log(cw_log_fn fn, void *user, cw_log_level max_level) noexcept {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_fn = fn;
    g_log_user = user;
    g_log_max = max_level;
}

}  // namespace cw
