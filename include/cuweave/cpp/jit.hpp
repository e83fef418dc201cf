/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/jit.h: cw::program, cw::module, cw::kernel, cw::dims,
// the jit cache, NVRTC's version and log, the built-in kernels.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_JIT_HPP
#define CUWEAVE_CPP_JIT_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {

// Grid and block dimensions.
struct dims {
    unsigned x = 1, y = 1, z = 1;
    dims(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
};

inline namespace CW_HPP_MODE {

// ---- programs, modules, kernels ------------------------------------------------

class program : public detail::handle<program, cw_program, cw_program_destroy> {
  public:
    using handle::handle;
    // Compiles (or finds in the cache) source for ctx's device; on a compile
    // error the status is CW_ERROR_COMPILE and cw_jit_get_compile_log() has the log.
    static detail::ret<program> compile(const context &ctx, const char *source,
                                        const cw_program_settings *settings = nullptr) {
        cw_program *p = nullptr;
        cw_status s = cw_program_compile(&p, ctx.get(), source, settings);
        return detail::make(s, program(p, true));
    }
    cw_program_info info() const noexcept {
        cw_program_info i{};
        (void)cw_program_get_info(get(), &i);
        return i;
    }
    // The mangled name NVRTC gave one of the program's name expressions
    // (borrowed: lives with the program).
    detail::ret<const char *> lowered_name(const char *name_expression) const {
        const char *l = nullptr;
        cw_status s = cw_program_get_lowered_name(get(), name_expression, &l);
        return detail::make(s, std::move(l));
    }
};

// The NVRTC log of this thread's last compile that ran NVRTC.
inline const char *compile_log() noexcept { return cw_jit_get_compile_log(); }

// The kernel cache (jit.h): settings for later compiles, counters,
// emptying the memory cache, what the disk cache holds and emptying it.
inline detail::void_ret jit_cache_configure(const cw_jit_cache_settings &s) {
    return detail::done(cw_jit_cache_configure(&s));
}
inline detail::ret<cw_jit_stats> jit_stats() {
    cw_jit_stats st{};
    cw_status s = cw_jit_get_stats(&st);
    return detail::make(s, std::move(st));
}
inline void jit_cache_clear_memory() noexcept { cw_jit_cache_clear_memory(); }
// Where the disk cache is, its bound and what it holds now (cw_jit_cache_get_info).
inline detail::ret<cw_jit_cache_info> jit_cache_info() {
    cw_jit_cache_info info{};
    cw_status s = cw_jit_cache_get_info(&info);
    return detail::make(s, std::move(info));
}
// Empties the disk cache (cw_jit_cache_clear_disk): how many entries it removed.
inline detail::ret<uint64_t> jit_cache_clear_disk() {
    uint64_t entries = 0;
    cw_status s = cw_jit_cache_clear_disk(&entries, nullptr);
    return detail::make(s, std::move(entries));
}

// A kernel of a module (borrowed: valid while its module lives). A value:
// the C handle and nothing else (no state of its own: the arguments are
// checked by cw_kernel_launch, whose list of each kernel's parameters is
// the library's, made once and shared by every thread), so copy it freely
// and launch it from any thread.
class kernel {
  public:
    kernel() noexcept = default;
    explicit kernel(cw_kernel *k) noexcept : k_(k) {}
    cw_kernel *get() const noexcept { return k_; }

    // Launches with typed arguments: their number, and each one's size, are
    // checked against the kernel's parameters by cw_kernel_launch (given in
    // the config's arg_sizes) where the driver can list them (CUDA 12.4+); a
    // mismatch is CW_ERROR_INVALID_ARGUMENT, nothing launched.
    template <class... Args>
    detail::void_ret launch(const stream &s, dims grid, dims block, const Args &...args) const {
        cw_launch_config c;
        cw_launch_config_default(&c);
        c.grid[0] = grid.x, c.grid[1] = grid.y, c.grid[2] = grid.z;
        c.block[0] = block.x, c.block[1] = block.y, c.block[2] = block.z;
        return launch_with(s, c, args...);
    }
    template <class... Args>
    detail::void_ret launch_with(const stream &s, const cw_launch_config &c, const Args &...args) const {
        static_assert(detail::all_trivially_copyable<Args...>::value, "kernel arguments must be trivially copyable");
        const size_t sizes[] = {sizeof(Args)..., 0};
        cw_launch_config checked = c;
        checked.arg_sizes = sizes;
        checked.n_args = sizeof...(Args);
        void *ptrs[] = {const_cast<void *>(static_cast<const void *>(&args))..., nullptr};
        return detail::done(cw_kernel_launch(k_, s.get(), &checked, ptrs));
    }
    // The size in bytes of each of the kernel's parameters, as the driver
    // lists them (cw_kernel_get_params: CUDA 12.4; the kernel is loaded into
    // ctx to ask) ...
    detail::ret<std::vector<size_t>> params(const context &ctx) const {
        std::vector<size_t> sizes;
        size_t n = 0;
        cw_status s = cw_kernel_get_params(k_, ctx.get(), nullptr, 0, &n);
        if (s == CW_SUCCESS && n > 0) {
            sizes.resize(n);
            s = cw_kernel_get_params(k_, ctx.get(), sizes.data(), sizes.size(), &n);
            if (n < sizes.size()) sizes.resize(n);
        }
        return detail::make(s, std::move(sizes));
    }
    // ... or only their count (-1 when the driver cannot say).
    int param_count(const context &ctx) const noexcept {
        size_t n = 0;
        return cw_kernel_get_params(k_, ctx.get(), nullptr, 0, &n) == CW_SUCCESS ? (int)n : -1;
    }
    // Loads the kernel into ctx now (before any resident loop is launched:
    // loading waits until no kernel runs on the device).
    detail::void_ret preload(const context &ctx) const { return detail::done(cw_kernel_preload(k_, ctx.get())); }
    // The driver kernel (a CUkernel, borrowed).
    void *native() const noexcept {
        void *k = nullptr;
        (void)cw_kernel_get_handle(k_, &k);
        return k;
    }

  private:
    cw_kernel *k_ = nullptr;
};

class module : public detail::handle<module, cw_module, cw_module_destroy> {
  public:
    using handle::handle;
    static detail::ret<module> load(const program &p) {
        cw_module *m = nullptr;
        cw_status s = cw_module_load(&m, p.get());
        return detail::make(s, module(m, true));
    }
    // A cubin, fatbin or PTX image in memory.
    static detail::ret<module> load_image(const void *image) {
        cw_module *m = nullptr;
        cw_status s = cw_module_load_image(&m, image);
        return detail::make(s, module(m, true));
    }
    // By extern "C" name, mangled name, or the program's name expression.
    detail::ret<kernel> get_kernel(const char *name) const {
        cw_kernel *k = nullptr;
        cw_status s = cw_module_get_kernel(get(), name, &k);
        return detail::make(s, kernel(k));
    }
};

// The library's own kernels (never destroyed).
inline detail::ret<kernel> builtin_kernel(cw_builtin which) {
    cw_kernel *k = nullptr;
    cw_status s = cw_builtin_get_kernel(which, &k);
    return detail::make(s, kernel(k));
}

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_JIT_HPP
