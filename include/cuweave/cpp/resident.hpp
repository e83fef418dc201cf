/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/resident.h: cw::resident (the GPU-resident loop),
// cw::resident_device_header.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_RESIDENT_HPP
#define CUWEAVE_CPP_RESIDENT_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/graph.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- the GPU-resident loop ------------------------------------------------------

// The destructor (cw_resident_destroy, which never fails) tears a launched
// loop down first, up to the settings' destroy_timeout_ms; a loop that will
// not stop by then is abandoned and logged (CW_LOG_ERROR), its memory freed
// once it is seen stopped. tear_down(ms) is the member that reports: call it
// first to learn whether the loop stops.
class resident : public detail::handle<resident, cw_resident, cw_resident_destroy> {
  public:
    using handle::handle;
    static detail::ret<resident> create(const cw::context &c, const cw_resident_settings *settings = nullptr) {
        cw_resident *r = nullptr;
        cw_status s = cw_resident_create(&r, c.get(), settings);
        return detail::make(s, resident(r, true));
    }
    // The device block kernels receive (a cw_resident_ctl *), as a CUdeviceptr.
    cw_devptr ctl() const noexcept {
        cw_devptr p = 0;
        (void)cw_resident_get_ctl(get(), &p);
        return p;
    }
    // The loop's context, borrowed (from cw_resident_get_info: a driver call).
    cw::context context() const noexcept {
        cw_resident_info i{};
        (void)cw_resident_get_info(get(), &i);
        return cw::context::borrow(i.context);
    }
    // The device address of input slot `slot` (0 <= slot < input_slots).
    detail::ret<cw_devptr> input(uint32_t slot) const {
        cw_devptr p = 0;
        cw_status s = cw_resident_get_input(get(), slot, &p);
        return detail::make(s, std::move(p));
    }
    detail::void_ret configure(const cw_resident_settings &s) const { return detail::done(cw_resident_configure(get(), &s)); }
    // The settings in force.
    detail::ret<cw_resident_settings> settings() const {
        cw_resident_settings st{};
        cw_status s = cw_resident_get_settings(get(), &st);
        return detail::make(s, std::move(st));
    }
    // The workload / data-ready handler as a graph (copied: g may go), or
    // (graph() empty) none.
    detail::void_ret set_workload(const graph &g) const { return detail::done(cw_resident_set_workload(get(), g.get())); }
    detail::void_ret set_handler(const graph &g) const { return detail::done(cw_resident_set_handler(get(), g.get())); }
    // The workload / handler as what a function enqueues on a stream that
    // captures into the loop's graph, called at each build once per copy of
    // the iteration: a C function and its user pointer (nullptr removes) ...
    detail::void_ret set_workload_fn(cw_resident_capture_fn fn, void *user) const {
        return detail::done(cw_resident_set_workload_fn(get(), fn, user));
    }
    detail::void_ret set_handler_fn(cw_resident_capture_fn fn, void *user) const {
        return detail::done(cw_resident_set_handler_fn(get(), fn, user));
    }
    // ... or a function object called as f(cw::stream &s), returning
    // cw::status, cw_status or nothing (success); in exceptions mode it may
    // throw (a cw::error gives its status, anything else CW_ERROR_INTERNAL).
    // Used by reference: it must outlive the loop's builds and launches.
    template <class F>
    detail::void_ret set_workload_fn(F &f) const {
        return detail::done(cw_resident_set_workload_fn(get(), &capture_tramp<F>::call, detail::user_ptr(f)));
    }
    template <class F>
    detail::void_ret set_handler_fn(F &f) const {
        return detail::done(cw_resident_set_handler_fn(get(), &capture_tramp<F>::call, detail::user_ptr(f)));
    }
    // Inside a capture function: begins / ends a traced stage on the
    // capture stream s (cw_resident_stage_begin; settings.trace). The number
    // is CW_RESIDENT_NO_STAGE when the loop does not trace.
    detail::ret<uint32_t> stage_begin(const stream &s, const char *name) const {
        uint32_t stage = CW_RESIDENT_NO_STAGE;
        cw_status st = cw_resident_stage_begin(get(), s.get(), name, &stage);
        return detail::make(st, std::move(stage));
    }
    detail::void_ret stage_end(const stream &s, uint32_t stage) const {
        return detail::done(cw_resident_stage_end(get(), s.get(), stage));
    }
    // Fused persistent mode (cw_resident_set_fused): one persistent kernel
    // compiled from f's stages; nullptr makes it a graph loop again.
    detail::void_ret set_fused(const cw_resident_fused *f) const { return detail::done(cw_resident_set_fused(get(), f)); }
    detail::void_ret set_fused(const cw_resident_fused &f) const { return detail::done(cw_resident_set_fused(get(), &f)); }
    detail::void_ret build() const { return detail::done(cw_resident_build(get())); }
    detail::void_ret launch() const { return detail::done(cw_resident_launch(get())); }
    // Stops a launched loop, waiting up to timeout_ms (cw_resident_tear_down):
    // the one call that reports whether it stopped (CW_ERROR_TIMEOUT: still
    // launched; call it again, or let the destructor abandon it). Nothing to
    // do for a loop that is not launched.
    detail::void_ret tear_down(uint32_t timeout_ms) const { return detail::done(cw_resident_tear_down(get(), timeout_ms)); }
    // Running or stopping (cw_resident_get_state).
    bool is_launched() const noexcept {
        cw_resident_state st = CW_RESIDENT_NOT_LAUNCHED;
        (void)cw_resident_get_state(get(), &st);
        return st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING;
    }
    // Not launched, running, stopping or stopped (info().exit says why).
    cw_resident_state state() const noexcept {
        cw_resident_state st = CW_RESIDENT_NOT_LAUNCHED;
        (void)cw_resident_get_state(get(), &st);
        return st;
    }
    // The request's number.
    detail::ret<uint64_t> data_ready() const {
        uint64_t seq = 0;
        cw_status s = cw_resident_data_ready(get(), &seq);
        return detail::make(s, std::move(seq));
    }
    // Whether request seq has finished (cw_resident_poll_result: its
    // CW_ERROR_NOT_READY is false here, not an error).
    detail::ret<bool> result_ready(uint64_t seq) const {
        cw_status s = cw_resident_poll_result(get(), seq);
        bool ready = s == CW_SUCCESS;
        if (s == CW_ERROR_NOT_READY) s = CW_SUCCESS;
        return detail::make(s, std::move(ready));
    }
    detail::void_ret wait_result(uint64_t seq, uint32_t timeout_ms) const {
        return detail::done(cw_resident_wait_result(get(), seq, timeout_ms));
    }
    // The input slot the next request reads, once free.
    detail::ret<cw_devptr> next_input(uint32_t timeout_ms) const {
        cw_devptr p = 0;
        cw_status s = cw_resident_next_input(get(), timeout_ms, &p);
        return detail::make(s, std::move(p));
    }
    // Context, state and the statistics the GPU keeps (a copy from the GPU).
    detail::ret<cw_resident_info> info() const {
        cw_resident_info st{};
        cw_status s = cw_resident_get_info(get(), &st);
        return detail::make(s, std::move(st));
    }

  private:
    template <class F>
    struct capture_tramp {
        static cw_status call(cw_stream *s, void *user) noexcept {
            stream st = stream::borrow(s);
            return detail::call_for_c(*static_cast<F *>(user), st);
        }
    };
};

// The text of <cuweave/resident_device.h>, for NVRTC programs: an in-memory
// header named "cuweave/resident_device.h" (cw_header).
inline const char *resident_device_header() noexcept { return cw_builtin_get_resident_header(); }

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_RESIDENT_HPP
