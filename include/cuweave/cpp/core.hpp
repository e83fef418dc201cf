/* SPDX-License-Identifier: BSD-2-Clause */
// The common part of the C++ wrappers, included by every cpp/*.hpp: the
// exceptions / no-exceptions switch and its namespaces, cw::status and
// cw::result (over common.h's cw_status), cw::error, the detail helpers (the
// handle template, call_for_c, ...), and cw::defaults<S>() for every C
// settings struct.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_CORE_HPP
#define CUWEAVE_CPP_CORE_HPP

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuweave/cuweave.h"

// The mode: exceptions (a failing call throws cw::error) unless the
// translation unit is built without them (-fno-exceptions) or defines
// CW_HPP_NO_EXCEPTIONS (a failing call returns cw::result<T> / cw::status).
#if !defined(CW_HPP_NO_EXCEPTIONS) && !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#define CW_HPP_NO_EXCEPTIONS 1
#endif
#ifndef CW_HPP_NO_EXCEPTIONS
#include <exception>
#endif

// The namespaces. Everything is in namespace cw, through two inline
// namespaces that user code never names:
//   cw::v0_3               the wrappers of this release (renamed when a
//                          release changes them), with what both modes share
//                          and define alike: status, result<T>, defaults<S>(),
//                          priority_range, dims;
//   cw::v0_3::CW_HPP_MODE  what differs between the modes: every wrapper
//                          whose calls return T in one mode and result<T> in
//                          the other, error, detail. CW_HPP_MODE is exc with
//                          exceptions and noexc without.
// Two translation units of one program built in different modes therefore
// define different functions (cw::v0_3::exc::stream::create and
// cw::v0_3::noexc::stream::create): the one-definition rule holds, and a
// function of one unit that takes a wrapper (cw::stream &) cannot be called
// from a unit of the other mode by mistake (it does not link). Between the
// modes, pass the C handles (get(), T::borrow) or the shared types.
#ifndef CW_HPP_NO_EXCEPTIONS
#define CW_HPP_MODE exc
#else
#define CW_HPP_MODE noexc
#endif

namespace cw {
inline namespace v0_3 {

// ---- what both modes share ---------------------------------------------------

// A status: what a call returns in no-exceptions mode (in exceptions mode it
// returns void), and what an operator's compute returns in both.
class status {
  public:
    status(cw_status s = CW_SUCCESS) noexcept : s_(s) {}
    cw_status code() const noexcept { return s_; }
    bool ok() const noexcept { return s_ == CW_SUCCESS; }
    explicit operator bool() const noexcept { return ok(); }
    const char *name() const noexcept { return cw_status_name(s_); }
    // A short English description ("the wait timed out").
    const char *description() const noexcept { return cw_status_string(s_); }

  private:
    cw_status s_;
};

// A value or the status that prevented it (no-exceptions mode).
template <class T>
class result {
  public:
    result(T value) noexcept(std::is_nothrow_move_constructible<T>::value) : value_(std::move(value)) {}
    result(cw_status s) noexcept : status_(s) {}
    bool ok() const noexcept { return status_ == CW_SUCCESS; }
    explicit operator bool() const noexcept { return ok(); }
    cw_status code() const noexcept { return status_; }
    T &value() & noexcept { return value_; }
    T &&value() && noexcept { return std::move(value_); }

  private:
    T value_{};
    cw_status status_ = CW_SUCCESS;
};

// ---- settings -------------------------------------------------------------------

// A C settings struct filled with its defaults (the *_settings_default call):
//   auto s = cw::defaults<cw_pipeline_settings>(); s.threads = 2;
template <class S>
S defaults() noexcept;
#define CW_HPP_DEFAULTS_(type, fn)          \
    template <>                            \
    inline type defaults<type>() noexcept { \
        type s;                            \
        fn(&s);                            \
        return s;                          \
    }
CW_HPP_DEFAULTS_(cw_stream_settings, cw_stream_settings_default)
CW_HPP_DEFAULTS_(cw_stream_pool_settings, cw_stream_pool_settings_default)
CW_HPP_DEFAULTS_(cw_cond_settings, cw_cond_settings_default)
CW_HPP_DEFAULTS_(cw_program_settings, cw_program_settings_default)
CW_HPP_DEFAULTS_(cw_jit_cache_settings, cw_jit_cache_settings_default)
CW_HPP_DEFAULTS_(cw_launch_config, cw_launch_config_default)
CW_HPP_DEFAULTS_(cw_resident_settings, cw_resident_settings_default)
CW_HPP_DEFAULTS_(cw_port_settings, cw_port_settings_default)
CW_HPP_DEFAULTS_(cw_operator_settings, cw_operator_settings_default)
CW_HPP_DEFAULTS_(cw_pipeline_settings, cw_pipeline_settings_default)
CW_HPP_DEFAULTS_(cw_comm_bootstrap_settings, cw_comm_bootstrap_settings_default)
CW_HPP_DEFAULTS_(cw_trace_settings, cw_trace_settings_default)
#undef CW_HPP_DEFAULTS_

// ---- what differs between the modes --------------------------------------------

inline namespace CW_HPP_MODE {

#ifndef CW_HPP_NO_EXCEPTIONS
// A failed cuweave call: its status and the detail message of that failure.
class error : public std::exception {
  public:
    error(cw_status status, std::string message) : status_(status), message_(std::move(message)) {}
    cw_status status() const noexcept { return status_; }
    const char *what() const noexcept override { return message_.c_str(); }

  private:
    cw_status status_;
    std::string message_;
};
#endif

namespace detail {

#ifndef CW_HPP_NO_EXCEPTIONS
using void_ret = void;
template <class T>
using ret = T;
// The message is built only on failure.
inline void check(cw_status s) {
    if (s != CW_SUCCESS) throw error(s, cw_last_error()->message);
}
inline void_ret done(cw_status s) { check(s); }
template <class T>
inline T make(cw_status s, T &&value) {
    check(s);
    return std::move(value);
}
#else
using void_ret = status;
template <class T>
using ret = result<T>;
inline void_ret done(cw_status s) { return status(s); }
template <class T>
inline result<T> make(cw_status s, T &&value) {
    if (s != CW_SUCCESS) return result<T>(s);
    return result<T>(std::move(value));
}
#endif

template <class... T>
struct all_trivially_copyable : std::true_type {};
template <class T, class... R>
struct all_trivially_copyable<T, R...>
    : std::integral_constant<bool, std::is_trivially_copyable<T>::value && all_trivially_copyable<R...>::value> {};

// The C handle plus ownership: the base of wrapper T of C handle H, whose
// destroy is Destroy (a C destroy: returns nothing and never fails, so
// neither does the destructor).
template <class T, class H, void (*Destroy)(H **)>
class handle {
  public:
    handle() noexcept = default;
    // Takes h, owned (destroyed with the wrapper) or not.
    handle(H *h, bool owned) noexcept : h_(h), owned_(owned) {}
    ~handle() { reset(); }
    // Borrows a cuweave handle: the wrapper never destroys it (a pool's
    // stream, a partition's context, a buffer a message lends, or any C
    // handle the caller keeps). T(h, true) takes ownership instead.
    static T borrow(H *h) noexcept { return T(h, false); }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    handle(handle &&o) noexcept : h_(o.h_), owned_(o.owned_) {
        o.h_ = nullptr;
        o.owned_ = false;
    }
    handle &operator=(handle &&o) noexcept {
        // Move-assign as reset(other.release()): self-move leaves it intact.
        if (this != &o) {
            bool owned = o.owned_;
            H *h = o.release();
            reset();
            h_ = h;
            owned_ = owned;
        }
        return *this;
    }
    H *get() const noexcept { return h_; }
    bool owns() const noexcept { return owned_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }
    // Gives up ownership; the caller destroys the handle.
    H *release() noexcept {
        H *h = h_;
        h_ = nullptr;
        owned_ = false;
        return h;
    }
    void reset() noexcept {
        if (h_ && owned_) Destroy(&h_);
        h_ = nullptr;
        owned_ = false;
    }

  private:
    H *h_ = nullptr;
    bool owned_ = false;
};

// What a C++ callback returned, as a cw_status: void is success.
inline cw_status to_cw_status(cw_status s) noexcept { return s; }
inline cw_status to_cw_status(const status &s) noexcept { return s.code(); }

// Calls f(args...) for the C library, which must never see an exception:
// a cw::error becomes its status, anything else CW_ERROR_INTERNAL.
template <class F, class... A>
inline cw_status call_for_c(F &f, A &&...args) noexcept {
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
#endif
        if constexpr (std::is_void<decltype(f(std::forward<A>(args)...))>::value) {
            f(std::forward<A>(args)...);
            return CW_SUCCESS;
        } else {
            return to_cw_status(f(std::forward<A>(args)...));
        }
#ifndef CW_HPP_NO_EXCEPTIONS
    } catch (const error &e) {
        return e.status();
    } catch (...) {
        return CW_ERROR_INTERNAL;
    }
#endif
}

// Calls f(args...) where nothing can be returned to the C library (log and
// completion callbacks): an exception is swallowed.
template <class F, class... A>
inline void call_quietly(F &f, A &&...args) noexcept {
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
#endif
        f(std::forward<A>(args)...);
#ifndef CW_HPP_NO_EXCEPTIONS
    } catch (...) {
    }
#endif
}

// A function object as the user pointer of a C callback.
template <class F>
inline void *user_ptr(F &f) noexcept {
    static_assert(!std::is_function<F>::value, "pass a function object, or a C function with its user pointer");
    return const_cast<void *>(static_cast<const void *>(&f));
}

template <class T, class... R>
struct all_are : std::true_type {};
template <class T, class U, class... R>
struct all_are<T, U, R...>
    : std::integral_constant<bool, std::is_same<T, typename std::decay<U>::type>::value && all_are<T, R...>::value> {};

}  // namespace detail

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_CORE_HPP
