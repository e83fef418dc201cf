/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: what every file of the C API uses. Each public function here
// is a thin shim: it names itself for the error detail (CW_ENTRY), checks
// its arguments and handles, and calls the layer that does the work. No
// library code outside src/api/ calls a public cw_* function, and src/api/
// files mirror include/cuweave/ (api/cw_X.cpp defines what cuweave/X.h
// declares); tools/check-layers.sh checks both.
#pragma once

#include <stdint.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "core/handle.hpp"
#include "cuweave/cuweave.h"
#include "driver/error.hpp"

namespace cw {
namespace api {

// Whether n bytes at p are all zero (the reserved fields of settings and
// launch configurations). Eight bytes a load, OR-ed, no early exit: with n a
// constant the compiler makes it a few loads (a byte loop with an early exit
// was some 80 instructions for cw_launch_config's 20 bytes, on every launch).
inline bool all_zero(const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        acc |= w;
    }
    for (; i < n; i++) acc |= b[i];
    return acc == 0;
}

// An enum field as the caller stored it: C callers may store any int, and
// loading an out-of-range value as the C++ enum type is undefined.
template <class E>
inline unsigned raw_enum(const E &field) {
    static_assert(sizeof(E) == sizeof(unsigned), "C enums are int-sized");
    unsigned v;
    memcpy(&v, &field, sizeof v);
    return v;
}

// cw_resident.cpp: compiles the fused kernel of f for r's device (NVRTC,
// through the kernel cache) and loads it into r's context: *m and *k, the
// caller's (kernels::module_destroy) until the graph layer takes them.
cw_status compile_fused(cw_resident *r, const cw_resident_fused *f, cw_module **m, cw_kernel **k);

}  // namespace api
}  // namespace cw
