/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/trace.h: cw::trace (timelines).
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_TRACE_HPP
#define CUWEAVE_CPP_TRACE_HPP

#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/flow.hpp"
#include "cuweave/cpp/resident.hpp"
#include "cuweave/cpp/stream.hpp"
#include "cuweave/trace.h"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

class trace : public detail::handle<trace, cw_trace, cw_trace_destroy> {
  public:
    using handle::handle;
    static detail::ret<trace> create(const cw_trace_settings *settings = nullptr) {
        cw_trace *t = nullptr;
        cw_status s = cw_trace_create(&t, settings);
        return detail::make(s, trace(t, true));
    }
    detail::void_ret name_stream(const stream &s, const char *name) const {
        return detail::done(cw_trace_name_stream(get(), s.get(), name));
    }
    detail::void_ret name_thread(const char *name) const { return detail::done(cw_trace_name_thread(get(), name)); }
    // A GPU span on s (begin/end), a host span on this thread (host_begin/host_end).
    detail::void_ret begin(const stream &s, const char *name) const {
        return detail::done(cw_trace_begin(get(), s.get(), name));
    }
    detail::void_ret end(const stream &s) const { return detail::done(cw_trace_end(get(), s.get())); }
    detail::void_ret host_begin(const char *name) const { return detail::done(cw_trace_host_begin(get(), name)); }
    detail::void_ret host_end() const { return detail::done(cw_trace_host_end(get())); }
    // Traces p's next runs into this trace (cw_pipeline_set_trace); detach(p) stops.
    detail::void_ret attach(const pipeline &p) const { return detail::done(cw_pipeline_set_trace(p.get(), get())); }
    static detail::void_ret detach(const pipeline &p) { return detail::done(cw_pipeline_set_trace(p.get(), nullptr)); }
    detail::void_ret record_resident(const resident &r) const {
        return detail::done(cw_trace_record_resident(get(), r.get()));
    }
    detail::ret<cw_trace_info> info() const {
        cw_trace_info i{};
        cw_status s = cw_trace_get_info(get(), &i);
        return detail::make(s, std::move(i));
    }
    detail::void_ret write(const char *path) const { return detail::done(cw_trace_write(get(), path)); }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_TRACE_HPP
