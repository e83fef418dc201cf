/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave kernel layer: the GPU's global timer on the host's clock
// (kernel.hpp). A one-thread kernel (cwk_timestamp) writes %globaltimer to
// mapped host memory while the host spins on it: the timer was read between
// the host's readings before the launch and when the value appeared, and is
// estimated at the middle; the best of five windows is kept.
#include "base/sync.hpp"
#include "core/buffer.hpp"
#include "kernel/kernel.hpp"

namespace cw {
namespace kernels {

namespace {
constexpr int kProbes = 5;
constexpr int64_t kProbeTimeoutNs = 200 * 1000 * 1000;
}  // namespace

cw_status globaltimer_offset(cw_context *ctx, int64_t *offset, int64_t *err_ns) {
    cw_kernel *k = nullptr;
    CW_TRY(builtin_public(CW_BUILTIN_TIMESTAMP, &k));
    core::CurrentGuard guard;  // left last: the memory is freed in ctx
    CW_TRY(guard.enter(ctx->cu));
    cw_stream *s = nullptr;
    CW_TRY(core::stream_new(ctx, CW_STREAM_NON_BLOCKING, 0, true, &s));
    // The probe's word is freed as a release (core::host_free): the call
    // may be made while a resident loop runs (trace.h), and cuMemFreeHost
    // would wait for the loop to end.
    struct Free {
        cw_context *ctx;
        cw_stream *s;
        void *host = nullptr;
        ~Free() {
            if (host) {
                KeepError keep;  // the call's own outcome stays the detail
                (void)core::host_free(ctx, host);
            }
            core::stream_free(s);
        }
    } fr{ctx, s};
    CUdeviceptr dev = 0;
    CW_TRY(core::host_mapped_alloc(ctx, sizeof(uint64_t), 0, &fr.host, &dev));
    volatile uint64_t *word = static_cast<volatile uint64_t *>(fr.host);
    cw_launch_config cfg;
    launch_config_default(&cfg);
    int64_t best = INT64_MAX, best_offset = 0;
    for (int i = 0; i < kProbes; i++) {
        *word = 0;
        void *args[] = {&dev};
        const int64_t t0 = now_ns();
        CW_TRY(launch(k, s, &cfg, args));
        uint64_t gt = 0;
        int64_t t1 = now_ns();
        while ((gt = *word) == 0) {
            t1 = now_ns();
            if (t1 - t0 > kProbeTimeoutNs)
                return fail(CW_ERROR_TIMEOUT, "the GPU did not run the global timer's probe kernel within %lld ms "
                            "(is the device full?)", (long long)(kProbeTimeoutNs / 1000000));
            cpu_relax();
        }
        t1 = now_ns();
        if (t1 - t0 < best) {
            best = t1 - t0;
            best_offset = (t0 + (t1 - t0) / 2) - (int64_t)gt;
        }
    }
    CW_CU(cuStreamSynchronize, (s->cu));
    *offset = best_offset;
    *err_ns = (best + 1) / 2;
    return CW_SUCCESS;
}

}  // namespace kernels
}  // namespace cw
