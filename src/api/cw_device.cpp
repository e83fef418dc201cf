/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/device.h (versions, init, features, devices).
#include "api/api.hpp"
#include "core/device.hpp"
#include "driver/nvrtc.hpp"
#include "kernel/kernel.hpp"
#include "multi/collective.hpp"

using namespace cw;

extern "C" {

CW_API unsigned cw_version(void) {
    return CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH);
}

CW_API cw_status cw_init(void) {
    CW_ENTRY;
    return ensure_init();
}

CW_API cw_status cw_get_versions(cw_versions *v) {
    CW_ENTRY;
    CW_CHECK_ARG(v != NULL);
    cw_versions out;
    memset(&out, 0, sizeof out);
    out.cuweave = CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH);
    out.api = CW_VERSION_PACK(CW_API_VERSION_MAJOR, CW_API_VERSION_MINOR, CW_API_VERSION_PATCH);
    out.builtin_origin = kernels::builtin_origin();
    // Absence is not a failure here: the loads are quiet (nothing logged,
    // the detail kept), and what is absent reads 0.
    const Nvrtc *nv = nullptr;
    cw_status nvrtc_st, nccl_st;
    int nccl = 0;
    {
        QuietErrors quiet;
        (void)ensure_init();
        // The version cuDriverGetVersion gave, also when the driver is too
        // old or cuInit failed; 0 when no driver could be opened.
        out.driver = driver_version();
        nvrtc_st = ensure_nvrtc(&nv);
        nccl_st = multi::nccl_version(&nccl);
    }
    if (nvrtc_st == CW_SUCCESS) {
        int r = nv->nvrtcVersion(&out.nvrtc_major, &out.nvrtc_minor);
        if (r != 0) return fail_nvrtc(r, "nvrtcVersion");
    }
    if (nccl_st == CW_SUCCESS) {
        out.nccl = nccl;
    } else if (nccl_st != CW_ERROR_NOT_SUPPORTED) {
        // NCCL is there (the load is cached) but its version call failed:
        // ask again, this time recording the failure.
        CW_TRY(multi::nccl_version(&nccl));
        out.nccl = nccl;
    }
    *v = out;
    return CW_SUCCESS;
}

CW_API int cw_driver_has(cw_feature feature) {
    CW_ENTRY;
    if (feature == CW_FEATURE_NVRTC) {
        const Nvrtc *n;
        return ensure_nvrtc(&n) == CW_SUCCESS;
    }
    return driver_has(feature) ? 1 : 0;
}

CW_API cw_status cw_device_count(int *count) {
    CW_ENTRY;
    CW_CHECK_ARG(count != NULL);
    return core::device_count(count);
}

CW_API cw_status cw_device_get_info(int device, cw_device_info *info) {
    CW_ENTRY;
    CW_CHECK_ARG(info != NULL);
    CW_CHECK_ARG(device >= 0);
    return core::device_info(device, info);
}

}  // extern "C"
