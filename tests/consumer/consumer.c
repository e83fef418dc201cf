/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program of another project that uses an installed cuweave (CMake:
 * find_package(cuweave 0.3 CONFIG)) or cuweave as a meson subproject
 * (tests/check-install.sh, tests/check-subproject.sh): it checks the version
 * it was compiled against is the one it runs with, then initialises: exit 0
 * with a GPU, 77 without one (CW_ERROR_NO_DRIVER, CW_ERROR_NO_DEVICE), 1
 * otherwise.
 */
#include <stdio.h>

#include <cuweave/cuweave.h>

int main(void) {
    const unsigned v = cw_version();
    if (v != CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH)) {
        printf("consumer: compiled against cuweave %d.%d.%d, runs with %u.%u.%u\n", CW_VERSION_MAJOR,
               CW_VERSION_MINOR, CW_VERSION_PATCH, CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v),
               CW_VERSION_PACK_PATCH(v));
        return 1;
    }
    const cw_status st = cw_init();
    printf("consumer: cuweave %u.%u.%u, cw_init: %s\n", CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v),
           CW_VERSION_PACK_PATCH(v), cw_status_name(st));
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return 77;
    return st == CW_SUCCESS ? 0 : 1;
}
