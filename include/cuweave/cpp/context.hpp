/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/context.h: cw::context.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_CONTEXT_HPP
#define CUWEAVE_CPP_CONTEXT_HPP

#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/device.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- contexts ---------------------------------------------------------------

class context : public detail::handle<context, cw_context, cw_context_destroy> {
  public:
    using handle::handle;
    // The primary context of `device`, retained.
    static detail::ret<context> create(int device) {
        cw_context *c = nullptr;
        cw_status s = cw_context_create(&c, device);
        return detail::make(s, context(c, true));
    }
    // Adopts a CUcontext the caller owns (cw_context_wrap): a cw_context
    // that this wrapper owns around it. The CUcontext is never destroyed and
    // must outlive every object made on the wrapper. (Borrowing a cw_context
    // is borrow().)
    static detail::ret<context> wrap(CUcontext cu) {
        cw_context *c = nullptr;
        cw_status s = cw_context_wrap(&c, cu);
        return detail::make(s, context(c, true));
    }

    // Device, kind, driver context, priority range and SMs (no driver call).
    detail::ret<cw_context_info> info() const {
        cw_context_info i{};
        cw_status s = cw_context_get_info(get(), &i);
        return detail::make(s, std::move(i));
    }
    int device() const noexcept {
        cw_context_info i{};
        i.device = -1;
        (void)cw_context_get_info(get(), &i);
        return i.device;
    }
    cw_context_kind kind() const noexcept {
        cw_context_info i{};
        (void)cw_context_get_info(get(), &i);
        return i.kind;
    }
    CUcontext native() const noexcept {
        cw_context_info i{};
        (void)cw_context_get_info(get(), &i);
        return i.handle;
    }
    // The stream priority range of the context.
    detail::ret<cw::priority_range> priority_range() const {
        cw_context_info i{};
        cw_status s = cw_context_get_info(get(), &i);
        cw::priority_range r;
        r.least = i.least_priority;
        r.greatest = i.greatest_priority;
        return detail::make(s, std::move(r));
    }
    detail::void_ret synchronize() const { return detail::done(cw_context_synchronize(get())); }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_CONTEXT_HPP
