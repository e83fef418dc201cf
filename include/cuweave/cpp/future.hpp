/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/future.h: cw::future, cw::when_all.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_FUTURE_HPP
#define CUWEAVE_CPP_FUTURE_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- futures -----------------------------------------------------------------

class future : public detail::handle<future, cw_future, cw_future_destroy> {
  public:
    using handle::handle;
    // Completes when the work enqueued on s so far is done.
    static detail::ret<future> create(const stream &s, cw_future_kind kind = CW_FUTURE_WRITE_VALUE) {
        cw_future *f = nullptr;
        cw_status st = cw_future_create(&f, s.get(), kind);
        return detail::make(st, future(f, true));
    }
    detail::void_ret wait(int64_t timeout_us = -1) const { return detail::done(cw_future_wait(get(), timeout_us)); }
    // True when complete, false when not yet; throws / returns device errors.
    detail::ret<bool> ready() const {
        cw_status s = cw_future_poll(get());
        return detail::make(s == CW_ERROR_NOT_READY ? CW_SUCCESS : s, s == CW_SUCCESS);
    }
    detail::void_ret rearm(const stream &s) const { return detail::done(cw_future_rearm(get(), s.get())); }
    // How long a WRITE_VALUE waiter spins before it sleeps (default 200 us).
    detail::void_ret set_spin(unsigned spin_us) const { return detail::done(cw_future_set_spin(get(), spin_us)); }
    // The completion callback, once per completion (set it again after a
    // rearm): a C function and its user pointer ...
    detail::void_ret set_callback(cw_future_fn fn, void *user) const {
        return detail::done(cw_future_set_callback(get(), fn, user));
    }
    // ... or a function object called as f(cw_status), used by reference (it
    // must outlive the completion). It runs on a driver or watcher thread, or
    // here when the future is complete already (or in the rearm or destroy
    // that finds it not run yet); the rules of future.h's cw_future_fn apply
    // (no waiting or enqueueing in it but the future calls listed there).
    // Exceptions it throws are dropped.
    template <class F>
    detail::void_ret set_callback(F &f) const {
        struct tramp {
            static void call(void *user, cw_future *, cw_status st) noexcept {
                detail::call_quietly(*static_cast<F *>(user), st);
            }
        };
        return detail::done(cw_future_set_callback(get(), &tramp::call, detail::user_ptr(f)));
    }
    // An eventfd, readable once the future completes (owned by the future).
    detail::ret<int> fd() const {
        int f = -1;
        cw_status s = cw_future_get_fd(get(), &f);
        return detail::make(s, std::move(f));
    }
};

// A future that completes when each of the streams has finished the work
// enqueued on it so far (all on one context): when_all(a, b, c), with a kind
// first if not CW_FUTURE_WRITE_VALUE, or an array of n streams.
inline detail::ret<future> when_all(cw_stream *const *streams, size_t n,
                                    cw_future_kind kind = CW_FUTURE_WRITE_VALUE) {
    cw_future *f = nullptr;
    cw_status st = cw_future_when_all(&f, streams, n, kind);
    return detail::make(st, future(f, true));
}
template <class... S, class = typename std::enable_if<detail::all_are<stream, S...>::value>::type>
inline detail::ret<future> when_all(cw_future_kind kind, const S &...streams) {
    cw_stream *const v[] = {streams.get()..., nullptr};
    return when_all(v, sizeof...(S), kind);
}
template <class... S, class = typename std::enable_if<detail::all_are<stream, S...>::value>::type>
inline detail::ret<future> when_all(const stream &first, const S &...rest) {
    cw_stream *const v[] = {first.get(), rest.get()..., nullptr};
    return when_all(v, 1 + sizeof...(S), CW_FUTURE_WRITE_VALUE);
}

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_FUTURE_HPP
