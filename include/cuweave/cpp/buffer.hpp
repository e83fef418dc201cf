/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/buffer.h: cw::buffer, cw::copy_to_device,
// cw::copy_to_host, cw::host_buffer.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_BUFFER_HPP
#define CUWEAVE_CPP_BUFFER_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- buffers -------------------------------------------------------------------

// A reference to a cw_buffer: the owning wrapper drops its reference in its
// destructor (the memory goes after every recorded use, buffer.h).
class buffer : public detail::handle<buffer, cw_buffer, cw_buffer_destroy> {
  public:
    using handle::handle;
    static detail::ret<buffer> create(const stream &s, size_t bytes) {
        cw_buffer *b = nullptr;
        cw_status st = cw_buffer_create(&b, s.get(), bytes);
        return detail::make(st, buffer(b, true));
    }
    // A new reference of its own (kept past the compute call that lent it).
    detail::ret<buffer> share() const {
        cw_status st = cw_buffer_retain(get());
        return detail::make(st, buffer(st == CW_SUCCESS ? get() : nullptr, true));
    }
    cw_devptr ptr() const noexcept {
        cw_devptr p = 0;
        (void)cw_buffer_get_ptr(get(), &p);
        return p;
    }
    // The address for writing: only while this is the one reference.
    detail::ret<cw_devptr> writable() const {
        cw_devptr p = 0;
        cw_status st = cw_buffer_get_writable(get(), &p);
        return detail::make(st, std::move(p));
    }
    size_t size() const noexcept {
        cw_buffer_info i{};
        (void)cw_buffer_get_info(get(), &i);
        return i.bytes;
    }
    cw_buffer_info info() const noexcept {
        cw_buffer_info i{};
        (void)cw_buffer_get_info(get(), &i);
        return i;
    }
    // The free waits for what s has enqueued so far.
    detail::void_ret used_by(const stream &s) const { return detail::done(cw_buffer_use(get(), s.get())); }
    // Copies the whole of src into this buffer (at least as large, and
    // writable: the one reference) on s, whatever devices the two are on
    // (cw_buffer_copy); both are recorded as used by s.
    detail::void_ret copy_from(const stream &s, const buffer &src) const {
        return detail::done(cw_buffer_copy(get(), src.get(), s.get()));
    }
    // The buffer's context, borrowed (cw_buffer_info.context).
    cw::context context() const noexcept {
        cw_buffer_info i{};
        (void)cw_buffer_get_info(get(), &i);
        return cw::context::borrow(i.context);
    }
};

// Copies in stream order on s (cw_copy_to_device / cw_copy_to_host): from
// host memory to a device address, and back. The data is there once s has
// reached the copy (a future, or s.synchronize()). From page-locked memory
// (cw::host_buffer) the copy is asynchronous: leave the host memory alone
// until then.
inline detail::void_ret copy_to_device(const stream &s, cw_devptr dst, const void *src, size_t bytes) {
    return detail::done(cw_copy_to_device(s.get(), dst, src, bytes));
}
inline detail::void_ret copy_to_host(const stream &s, void *dst, cw_devptr src, size_t bytes) {
    return detail::done(cw_copy_to_host(s.get(), dst, src, bytes));
}

// Page-locked, device-mapped host memory (cw_host_alloc), zeroed; freed with
// cw_host_free in the destructor. The device address is the pointer
// (unified addressing): kernels may use it directly. The memory does not
// keep its context alive: destroy a host_buffer before the context wrapper
// it was made with (declare it after).
class host_buffer {
  public:
    host_buffer() noexcept = default;
    static detail::ret<host_buffer> alloc(const context &ctx, size_t bytes) {
        void *p = nullptr;
        cw_status s = cw_host_alloc(&p, ctx.get(), bytes);
        return detail::make(s, s == CW_SUCCESS ? host_buffer(ctx.get(), p, bytes) : host_buffer());
    }
    ~host_buffer() { reset(); }
    host_buffer(const host_buffer &) = delete;
    host_buffer &operator=(const host_buffer &) = delete;
    host_buffer(host_buffer &&o) noexcept : ctx_(o.ctx_), p_(o.p_), n_(o.n_) { o.forget(); }
    host_buffer &operator=(host_buffer &&o) noexcept {
        if (this != &o) {
            reset();
            ctx_ = o.ctx_;
            p_ = o.p_;
            n_ = o.n_;
            o.forget();
        }
        return *this;
    }
    void *data() const noexcept { return p_; }
    template <class T>
    T *as() const noexcept {
        return static_cast<T *>(p_);
    }
    size_t size() const noexcept { return n_; }
    // The device address of the memory (the same address).
    cw_devptr device_ptr() const noexcept { return static_cast<cw_devptr>(reinterpret_cast<uintptr_t>(p_)); }
    // The context it was allocated with, borrowed.
    cw_context *context_handle() const noexcept { return ctx_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    // Frees now (the free waits for running resident loops, host_free in buffer.h).
    void reset() noexcept {
        if (p_) cw_host_free(ctx_, &p_);
        forget();
    }
    // Gives the memory up; the caller frees it with cw_host_free (with the
    // context of context_handle(): take that first).
    void *release() noexcept {
        void *p = p_;
        forget();
        return p;
    }

  private:
    host_buffer(cw_context *c, void *p, size_t n) noexcept : ctx_(c), p_(p), n_(n) {}
    void forget() noexcept {
        ctx_ = nullptr;
        p_ = nullptr;
        n_ = 0;
    }
    cw_context *ctx_ = nullptr;
    void *p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_BUFFER_HPP
