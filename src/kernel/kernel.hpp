/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave kernel layer: code on the GPU without NVRTC. Modules (driver
// libraries, context-independent), their kernels, launches, and the
// library's own kernels embedded at build time (the built-in image). What the
// graph layer needs to put kernels into graphs; the jit layer compiles code
// and hands it here.
#pragma once

#include <atomic>
#include <stddef.h>
#include <stdint.h>

#include "core/idle.hpp"
#include "core/stream.hpp"
#include "cuweave/jit.h"

namespace cw {
namespace kernels {
// A kernel's parameters as the driver lists them (cuKernelGetParamInfo).
struct KernelParams {
    bool known;    // false: the driver cannot list them (launches go unchecked)
    size_t count;
    size_t sizes[1];  // count of them (malloc'ed to fit)
};
}  // namespace kernels
}  // namespace cw

struct cw_kernel {
    uint32_t tag;
    cw_module *module;
    CUkernel cu;
    char *name;  // as asked for
    cw_kernel *next;
    // Its parameters, listed once (at the first launch outside a capture,
    // a preload or cw_kernel_get_params) and published with a release
    // store; NULL until then. Launches read it with one acquire load.
    mutable std::atomic<const cw::kernels::KernelParams *> params;
    // The kernel's function in up to four contexts (cuKernelGetFunction),
    // each entry written once: ctx is published after fn. A launch through
    // the function skips the driver's per-launch lookup of the kernel in the
    // stream's context.
    struct {
        std::atomic<CUcontext> ctx;
        CUfunction fn;
    } fns[4];
};

struct cw_module {
    uint32_t tag;
    bool builtin;  // the library's own: never destroyed by the caller
    CUlibrary cu;
    size_t n_names;  // name expressions of the program it came from
    char **exprs;
    char **lowered;
    std::atomic<int> lock;
    cw_kernel *kernels;  // asked for so far
    cw::core::IdleRelease idle;  // destroyed while persistent work runs: unloaded when none does
};

namespace cw {
namespace kernels {

// CW_ERROR_NOT_SUPPORTED unless the driver has the library API (12.0).
cw_status need_library_api();

// Refuses (CW_ERROR_INVALID_ARGUMENT, saying why) an image that is none of
// what the driver loads, told apart the way it does: a cubin (64-bit ELF
// for EM_CUDA), a fatbin (magic 0xBA55ED50, version 1; or nvcc's wrapper of
// one, magic 0x466243B1), or PTX text whose first directive is .version.
// Needs no driver.
cw_status check_image(const void *image);

// Loads code (cubin, PTX or fatbin) as a module. names: the name
// expressions of the program it was compiled from and their lowered names
// (n_names of each, copied; 0 for a plain image), so that kernels can be
// asked for by expression. Refused while persistent work runs (loading
// would wait for it); `what` names the call in that refusal.
cw_status module_load(const void *image, size_t n_names, char *const *exprs, char *const *lowered, const char *what,
                      cw_module **out);
// Dead to callers at once; unloaded when no persistent work runs.
void module_destroy(cw_module *m);
// The kernel `name` (a name expression of its program, or a symbol).
cw_status module_get_kernel(cw_module *m, const char *name, cw_kernel **out);

// Loads the kernel's code into ctx now (refused while persistent work runs).
cw_status kernel_preload(const cw_kernel *k, cw_context *ctx);
// The number of the kernel's parameters and their sizes (up to cap); the
// kernel keeps them for launch's checks.
cw_status kernel_params(const cw_kernel *k, cw_context *ctx, size_t *count, size_t *sizes, size_t cap);
// Frees what the kernel's params point to (its module is going away).
void kernel_params_free(cw_kernel *k);

void launch_config_default(cw_launch_config *c);
// Launches k on s (captured when s captures). Refuses (nothing launched)
// args NULL for a kernel with parameters, and cfg->arg_sizes (when given)
// that differ from them, once the kernel's parameters are known.
cw_status launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args);

// The library's own kernels (ptx/cuweave_kernels.cu): the image is loaded on
// first use, with the public ones (cw_builtin) resolved at once; any other
// kernel of the image by its name.
cw_status builtin_public(cw_builtin which, cw_kernel **out);
cw_status builtin_by_name(const char *name, cw_kernel **out);
// How the image was made (nvcc at build time, or the checked-in PTX).
const char *builtin_origin();

// ---- clock.cpp ----
// ctx's global timer on the host's monotonic clock: host ns = timer ns +
// *offset, within *err_ns (a probe kernel, best of five). CW_ERROR_TIMEOUT
// when the probe does not run within 200 ms.
cw_status globaltimer_offset(cw_context *ctx, int64_t *offset, int64_t *err_ns);

}  // namespace kernels
}  // namespace cw
