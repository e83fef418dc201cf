/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/share.h: cw::create_shareable_buffer,
// cw::export_buffer, cw::import_buffer, cw::shared_event.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_SHARE_HPP
#define CUWEAVE_CPP_SHARE_HPP

#include "cuweave/cpp/buffer.hpp"
#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"
#include "cuweave/share.h"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// A buffer another process can import (cw_buffer_create_shareable).
inline detail::ret<buffer> create_shareable_buffer(const stream &s, size_t bytes) {
    cw_buffer *b = nullptr;
    cw_status st = cw_buffer_create_shareable(&b, s.get(), bytes);
    return detail::make(st, buffer(b, true));
}

// The handle of a shareable buffer, for another process (cw_buffer_export).
inline detail::ret<cw_shared_handle> export_buffer(const buffer &b) {
    cw_shared_handle h{};
    cw_status st = cw_buffer_export(b.get(), &h);
    return detail::make(st, std::move(h));
}

// Opens another process's exported buffer on s's context (cw_buffer_import).
inline detail::ret<buffer> import_buffer(const stream &s, const cw_shared_handle &h) {
    cw_buffer *b = nullptr;
    cw_status st = cw_buffer_import(&b, s.get(), &h);
    return detail::make(st, buffer(b, true));
}

// An event shared between processes: recorded in one, waited for in another.
class shared_event : public detail::handle<shared_event, cw_shared_event, cw_shared_event_destroy> {
  public:
    using handle::handle;
    static detail::ret<shared_event> create(const context &ctx) {
        cw_shared_event *e = nullptr;
        cw_status st = cw_shared_event_create(&e, ctx.get());
        return detail::make(st, shared_event(e, true));
    }
    static detail::ret<shared_event> import(const context &ctx, const cw_shared_handle &h) {
        cw_shared_event *e = nullptr;
        cw_status st = cw_shared_event_import(&e, ctx.get(), &h);
        return detail::make(st, shared_event(e, true));
    }
    detail::ret<cw_shared_handle> export_handle() const {
        cw_shared_handle h{};
        cw_status st = cw_shared_event_export(get(), &h);
        return detail::make(st, std::move(h));
    }
    detail::void_ret record(const stream &s) const { return detail::done(cw_shared_event_record(get(), s.get())); }
    // Work enqueued on s from now on waits for the latest recording.
    detail::void_ret wait(const stream &s) const { return detail::done(cw_shared_event_wait(get(), s.get())); }
    cw_shared_event_info info() const noexcept {
        cw_shared_event_info i{};
        (void)cw_shared_event_get_info(get(), &i);
        return i;
    }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_SHARE_HPP
