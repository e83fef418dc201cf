/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/common.h (status names, the error detail, the
// log callback).
#include "api/api.hpp"

using namespace cw;

extern "C" {

CW_API const char *cw_status_name(cw_status status) { return status_name(status); }

CW_API const char *cw_status_string(cw_status status) { return status_text(status); }

CW_API const cw_error_info *cw_last_error(void) { return &last_error(); }


CW_API void cw_clear_error(void) { clear_error(); }

CW_API cw_status cw_log_set_callback(cw_log_fn fn, void *user, cw_log_level max_level) {
    CW_ENTRY;
    CW_CHECK_ARG(max_level >= CW_LOG_ERROR && max_level <= CW_LOG_DEBUG);
    set_log(fn, user, max_level);
    return CW_SUCCESS;
}

}  // extern "C"
