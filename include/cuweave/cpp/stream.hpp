/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/stream.h: cw::stream, cw::forked, cw::lease,
// cw::stream_pool, cw::timer.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_STREAM_HPP
#define CUWEAVE_CPP_STREAM_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- streams ------------------------------------------------------------------

class stream : public detail::handle<stream, cw_stream, cw_stream_destroy> {
  public:
    using handle::handle;
    static detail::ret<stream> create(const cw::context &ctx, const cw_stream_settings *settings = nullptr) {
        cw_stream *st = nullptr;
        cw_status s = cw_stream_create(&st, ctx.get(), settings);
        return detail::make(s, stream(st, true));
    }
    // Adopts a CUstream of ctx that the caller owns (cw_stream_wrap; NULL is
    // the legacy stream): a cw_stream that this wrapper owns around it. The
    // CUstream is never destroyed. (Borrowing a cw_stream is borrow().)
    static detail::ret<stream> wrap(const cw::context &ctx, CUstream cu) {
        cw_stream *st = nullptr;
        cw_status s = cw_stream_wrap(&st, ctx.get(), cu);
        return detail::make(s, stream(st, true));
    }

    // The driver stream (from the info: no driver call).
    CUstream native() const noexcept {
        cw_stream_info i{};
        (void)cw_stream_get_info(get(), &i);
        return i.handle;
    }
    // The device ordinal (-1 for an empty wrapper). No driver call.
    int device() const noexcept {
        cw_stream_info i{};
        i.device = -1;
        (void)cw_stream_get_info(get(), &i);
        return i.device;
    }
    // The stream's context, borrowed.
    cw::context context() const noexcept {
        cw_stream_info i{};
        (void)cw_stream_get_info(get(), &i);
        return cw::context::borrow(i.context);
    }
    // Handle, context, device, priority, flags, and where it came from.
    detail::ret<cw_stream_info> info() const {
        cw_stream_info i{};
        cw_status s = cw_stream_get_info(get(), &i);
        return detail::make(s, std::move(i));
    }
    // Whether the stream takes part in a capture (as the driver sees it).
    detail::ret<cw_capture_state> capture_state() const {
        cw_capture_state c = CW_CAPTURE_NONE;
        cw_status s = cw_capture_get_state(get(), &c);
        return detail::make(s, std::move(c));
    }
    // Work enqueued on *this from now on waits for `src`'s work so far (for
    // several sources, call it once for each).
    detail::void_ret wait(const stream &src) const { return detail::done(cw_stream_wait(get(), src.get())); }
    detail::void_ret synchronize() const { return detail::done(cw_stream_synchronize(get())); }
    // True when all work is done (false: not yet); throws / returns the error otherwise.
    detail::ret<bool> done() const {
        cw_status s = cw_stream_query(get());
        return detail::make(s == CW_ERROR_NOT_READY ? CW_SUCCESS : s, s == CW_SUCCESS);
    }
};

// A fork scope (cw_stream_fork / cw_stream_join): child() is a stream whose
// work runs after everything enqueued on the parent before the fork; join()
// (or the destructor) makes the parent's later work wait for the child's and
// gives the child back (to the parent's lease pool, or the context's fork
// pool). Neither blocks the CPU. The parent must outlive the fork. join()
// reports a failure (a device fault, a broken capture); the destructor
// cannot: a join that fails there is in the log (CW_LOG_ERROR, as every
// failure). cw_stream_join gives the child back even when the ordering
// failed; only a capture the ordering broke keeps it (end the capture, then
// join() again), and a destructor in that state leaves it leased.
class forked {
  public:
    forked() noexcept = default;
    static detail::ret<forked> create(const stream &parent) {
        cw_stream *c = nullptr;
        cw_status s = cw_stream_fork(&c, parent.get());
        return detail::make(s, s == CW_SUCCESS ? forked(parent.get(), c) : forked());
    }
    ~forked() { (void)join_(); }
    forked(const forked &) = delete;
    forked &operator=(const forked &) = delete;
    forked(forked &&o) noexcept : parent_(o.parent_), child_(o.child_) {
        o.parent_ = nullptr;
        o.child_ = nullptr;
    }
    forked &operator=(forked &&o) noexcept {
        if (this != &o) {
            (void)join_();
            parent_ = o.parent_;
            child_ = o.child_;
            o.parent_ = nullptr;
            o.child_ = nullptr;
        }
        return *this;
    }
    // The child stream (borrowed: valid until the join).
    stream child() const noexcept { return stream::borrow(child_); }
    stream parent() const noexcept { return stream::borrow(parent_); }
    explicit operator bool() const noexcept { return child_ != nullptr; }
    // Joins now; on failure the forked stays as it was (the destructor tries again).
    detail::void_ret join() {
        if (!parent_ || !child_) return detail::done(CW_SUCCESS);
        cw_status s = cw_stream_join(parent_, &child_);
        if (s == CW_SUCCESS) parent_ = nullptr;
        return detail::done(s);
    }

  private:
    forked(cw_stream *parent, cw_stream *child) noexcept : parent_(parent), child_(child) {}
    cw_status join_() noexcept {
        cw_status s = parent_ && child_ ? cw_stream_join(parent_, &child_) : CW_SUCCESS;
        parent_ = nullptr;
        child_ = nullptr;
        return s;
    }
    cw_stream *parent_ = nullptr;
    cw_stream *child_ = nullptr;
};

// A leased stream: given back to its pool when the lease goes.
class lease {
  public:
    lease() noexcept = default;
    lease(cw_stream_pool *pool, cw_stream *s) noexcept : pool_(pool), s_(s) {}
    ~lease() { reset(); }
    lease(const lease &) = delete;
    lease &operator=(const lease &) = delete;
    lease(lease &&o) noexcept : pool_(o.pool_), s_(o.s_) { o.pool_ = nullptr, o.s_ = nullptr; }
    lease &operator=(lease &&o) noexcept {
        if (this != &o) {
            reset();
            pool_ = o.pool_;
            s_ = o.s_;
            o.pool_ = nullptr;
            o.s_ = nullptr;
        }
        return *this;
    }
    stream get() const noexcept { return stream::borrow(s_); }
    cw_stream *native_handle() const noexcept { return s_; }
    explicit operator bool() const noexcept { return s_ != nullptr; }
    void reset() noexcept {
        if (pool_ && s_) (void)cw_stream_pool_release(pool_, &s_);
        pool_ = nullptr;
        s_ = nullptr;
    }

  private:
    cw_stream_pool *pool_ = nullptr;
    cw_stream *s_ = nullptr;
};

class stream_pool : public detail::handle<stream_pool, cw_stream_pool, cw_stream_pool_destroy> {
  public:
    using handle::handle;
    static detail::ret<stream_pool> create(const cw::context &ctx, const cw_stream_pool_settings *settings = nullptr) {
        cw_stream_pool *p = nullptr;
        cw_status s = cw_stream_pool_create(&p, ctx.get(), settings);
        return detail::make(s, stream_pool(p, true));
    }
    // A stream no one else holds, until the lease goes.
    detail::ret<lease> acquire() const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_acquire(&s, get(), 0);
        return detail::make(st, st == CW_SUCCESS ? lease(get(), s) : lease());
    }
    // As acquire, waiting up to timeout_us (negative: forever) for a release
    // when the pool is exhausted (then CW_ERROR_TIMEOUT).
    detail::ret<lease> acquire_wait(int64_t timeout_us) const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_acquire(&s, get(), timeout_us);
        return detail::make(st, st == CW_SUCCESS ? lease(get(), s) : lease());
    }
    // Round-robin / single pools: the next stream (borrowed).
    detail::ret<stream> next() const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_get_next(get(), &s);
        return detail::make(st, stream::borrow(s));
    }
    // The stream `owner` uses under `name`: the same (owner, name), the same
    // stream (borrowed: the pool keeps it until release_owner(owner)).
    detail::ret<stream> named(const void *owner, const char *name) const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_acquire_named(&s, get(), owner, name);
        return detail::make(st, stream::borrow(s));
    }
    // Gives back every named stream of owner; returns how many.
    detail::ret<size_t> release_owner(const void *owner) const {
        size_t n = 0;
        cw_status st = cw_stream_pool_release_owner(get(), owner, &n);
        return detail::make(st, std::move(n));
    }
    // Its context, mode and counts.
    cw_stream_pool_info stats() const noexcept {
        cw_stream_pool_info st{};
        (void)cw_stream_pool_get_info(get(), &st);
        return st;
    }
    // The pool's context, borrowed.
    cw::context context() const noexcept { return cw::context::borrow(stats().context); }
};

// ---- timers ------------------------------------------------------------------

class timer : public detail::handle<timer, cw_timer, cw_timer_destroy> {
  public:
    using handle::handle;
    static detail::ret<timer> create(const cw::context &ctx) {
        cw_timer *t = nullptr;
        cw_status s = cw_timer_create(&t, ctx.get());
        return detail::make(s, timer(t, true));
    }
    detail::void_ret start(const stream &s) const { return detail::done(cw_timer_start(get(), s.get())); }
    detail::void_ret stop(const stream &s) const { return detail::done(cw_timer_stop(get(), s.get())); }
    detail::ret<float> elapsed_ms() const {
        float ms = 0;
        cw_status s = cw_timer_get_elapsed_ms(get(), &ms);
        return detail::make(s, std::move(ms));
    }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_STREAM_HPP
