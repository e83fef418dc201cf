// cuweave: run-time compilation (NVRTC). The loader lives in driver.cpp.
#include "cuweave/jit.h"

#include "driver.hpp"
#include "error.hpp"

using namespace cw;

extern "C" {

CW_API cw_status cw_nvrtc_version(int *major, int *minor) {
    CW_ENTRY;
    CW_CHECK_ARG(major != NULL || minor != NULL);
    const Nvrtc *n;
    CW_TRY(ensure_nvrtc(&n));
    int ma = 0, mi = 0;
    int r = n->nvrtcVersion(&ma, &mi);
    if (r != 0) return fail_nvrtc(r, "nvrtcVersion");
    if (major) *major = ma;
    if (minor) *minor = mi;
    return CW_SUCCESS;
}

}  // extern "C"
