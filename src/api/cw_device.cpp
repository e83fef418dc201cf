// cuweave api: include/cuweave/device.h (versions, init, features, devices).
#include "api/api.hpp"
#include "core/device.hpp"
#include "driver/nvrtc.hpp"

using namespace cw;

extern "C" {

CW_API unsigned cw_version(void) {
    return CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH);
}

CW_API unsigned cw_version_api(void) {
    return CW_VERSION_PACK(CW_API_VERSION_MAJOR, CW_API_VERSION_MINOR, CW_API_VERSION_PATCH);
}

CW_API cw_status cw_init(void) {
    CW_ENTRY;
    return ensure_init();
}

CW_API cw_status cw_driver_version(int *version) {
    CW_ENTRY;
    CW_CHECK_ARG(version != NULL);
    CW_TRY(ensure_init());
    *version = driver_version();
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

CW_API cw_status cw_device_get_priority_range(int device, int *least, int *greatest) {
    CW_ENTRY;
    CW_CHECK_ARG(least != NULL || greatest != NULL);
    CW_CHECK_ARG(device >= 0);
    int lo, hi;
    CW_TRY(core::device_priority_range(device, &lo, &hi));
    if (least) *least = lo;
    if (greatest) *greatest = hi;
    return CW_SUCCESS;
}

}  // extern "C"
