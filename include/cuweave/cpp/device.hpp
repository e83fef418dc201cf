/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/version.h, device.h and common.h: versions, init,
// devices, errors (the calling thread's detail) and the log callback.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_DEVICE_HPP
#define CUWEAVE_CPP_DEVICE_HPP

#include "cuweave/cpp/core.hpp"

namespace cw {
inline namespace v0_3 {

// A stream priority range: least (the default, 0) and greatest (e.g. -5).
struct priority_range {
    int least = 0;
    int greatest = 0;
};

inline namespace CW_HPP_MODE {

// ---- the library: versions, init, devices, errors, the log -------------------

// The library's release version (CW_VERSION_PACK form): compare with
// CW_VERSION_PACK(CW_VERSION_MAJOR, ...) to detect a header/library mismatch.
inline unsigned version() noexcept { return cw_version(); }

// The versions of cuweave (release, ABI), the driver, NVRTC and NCCL (0 for
// a library that is absent).
inline detail::ret<cw_versions> versions() {
    cw_versions v{};
    cw_status s = cw_get_versions(&v);
    return detail::make(s, std::move(v));
}

// Loads and initialises the driver (optional: every call that needs it does).
inline detail::void_ret init() { return detail::done(cw_init()); }

// Whether the loaded driver has an optional feature (false without a driver).
inline bool driver_has(cw_feature feature) noexcept { return cw_driver_has(feature) != 0; }

inline detail::ret<int> device_count() {
    int n = 0;
    cw_status s = cw_device_count(&n);
    return detail::make(s, std::move(n));
}

// Facts about device ordinal `device` (no context is made).
inline detail::ret<cw_device_info> device_info(int device) {
    cw_device_info i{};
    cw_status s = cw_device_get_info(device, &i);
    return detail::make(s, std::move(i));
}

// The calling thread's detail of its last failed call (status CW_SUCCESS and
// empty strings when none failed); valid until the next failure or clear_error.
inline const cw_error_info &error_detail() noexcept { return *cw_last_error(); }
inline const char *error_message() noexcept { return cw_last_error()->message; }
inline void clear_error() noexcept { cw_clear_error(); }
inline const char *status_name(cw_status s) noexcept { return cw_status_name(s); }
inline const char *status_string(cw_status s) noexcept { return cw_status_string(s); }

// The process-wide log callback: a C function and its user pointer (fn
// nullptr removes it), messages up to max_level.
inline detail::void_ret set_log_callback(cw_log_fn fn, void *user, cw_log_level max_level) {
    return detail::done(cw_log_set_callback(fn, user, max_level));
}
// ... or a function object called as f(cw_log_level, const char *message). It
// is used by reference: it must outlive its installation (remove it with
// remove_log_callback() first). Exceptions it throws are dropped.
template <class F>
inline detail::void_ret set_log_callback(F &f, cw_log_level max_level = CW_LOG_WARNING) {
    struct tramp {
        static void call(void *user, cw_log_level level, const char *message) noexcept {
            detail::call_quietly(*static_cast<F *>(user), level, message);
        }
    };
    return detail::done(cw_log_set_callback(&tramp::call, detail::user_ptr(f), max_level));
}
inline void remove_log_callback() noexcept { (void)cw_log_set_callback(nullptr, nullptr, CW_LOG_ERROR); }

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_DEVICE_HPP
