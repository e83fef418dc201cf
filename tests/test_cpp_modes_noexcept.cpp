/* SPDX-License-Identifier: BSD-2-Clause */
// The no-exceptions half of test_cpp_modes (built with -fno-exceptions, so
// cuweave.hpp picks that mode): the same wrappers as test_cpp_modes.cpp
// uses with exceptions, in one program. Each call must behave as this mode
// says: a cw::result or cw::status, never a throw.
#include <type_traits>

#include "cuweave/cuweave.hpp"
#include "test_cpp_modes.h"

#if !defined(CW_HPP_NO_EXCEPTIONS) || defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "test_cpp_modes_noexcept.cpp must be built with -fno-exceptions"
#endif

static_assert(std::is_same<decltype(cw::context::create(0)), cw::result<cw::context>>::value,
              "no exceptions: a result");
static_assert(std::is_same<decltype(std::declval<const cw::stream &>().synchronize()), cw::status>::value,
              "no exceptions: a status");

modes_addresses modes_noexcept_addresses() {
    modes_addresses a;
    a.context_create = reinterpret_cast<modes_fn>(&cw::context::create);
    a.stream_create = reinterpret_cast<modes_fn>(&cw::stream::create);
    a.future_create = reinterpret_cast<modes_fn>(&cw::future::create);
    a.device_count = reinterpret_cast<modes_fn>(&cw::device_count);
    a.init = reinterpret_cast<modes_fn>(&cw::init);
    return a;
}

const char *modes_noexcept_run() {
    if (!cw::init().ok()) return "no exceptions: init failed";
    cw::result<int> n = cw::device_count();
    if (!n.ok() || n.value() != 1) return "no exceptions: device_count is not a result of 1";
    cw::result<cw::context> ctx = cw::context::create(0);
    if (!ctx.ok() || !ctx.value().owns()) return "no exceptions: context::create gave no context";
    cw::result<cw::stream> s = cw::stream::create(ctx.value());
    if (!s.ok() || !s.value().get()) return "no exceptions: stream::create gave no stream";
    cw_stream_settings bad = cw::defaults<cw_stream_settings>();
    bad.flags = 7;
    cw::result<cw::stream> refused = cw::stream::create(ctx.value(), &bad);
    if (refused.code() != CW_ERROR_INVALID_ARGUMENT || refused.value().get())
        return "no exceptions: a refused stream::create is not a result with CW_ERROR_INVALID_ARGUMENT";
    cw::result<cw::future> f = cw::future::create(s.value());
    if (!f.ok()) return "no exceptions: future::create failed";
    if (!f.value().wait(5000000).ok()) return "no exceptions: future::wait failed";
    cw::result<bool> ready = f.value().ready();
    if (!ready.ok() || !ready.value()) return "no exceptions: future::ready is not a result of true";
    cw::status st = cw::stream().synchronize();
    if (st.code() != CW_ERROR_INVALID_ARGUMENT)
        return "no exceptions: synchronize of an empty stream is not a status with CW_ERROR_INVALID_ARGUMENT";
    cw_clear_error();
    return nullptr;
}
