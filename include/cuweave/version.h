/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: version numbers.
 *
 * This header is the single source of the library's version and of its ABI
 * version. Both build systems read it: the shared library's soname is
 * libcuweave.so.CW_API_VERSION_MAJOR.
 */
#ifndef CUWEAVE_VERSION_H
#define CUWEAVE_VERSION_H

/* Release version of the library. */
#define CW_VERSION_MAJOR 0
#define CW_VERSION_MINOR 3
#define CW_VERSION_PATCH 0

/* ABI version. MAJOR changes on an incompatible ABI change (it is the
 * soname), MINOR when symbols are added, PATCH otherwise. 0.2 reshaped
 * the C API (docs/api-convention.md): ABI 1, libcuweave.so.1. 0.3 removed
 * five functions and changed promises and struct fields: ABI 2,
 * libcuweave.so.2, version node CUWEAVE_2 (CHANGELOG.md). tools/abi-check.sh
 * compares the library with the last release's ABI (abi/) and fails on an
 * incompatible change that keeps the soname. */
#define CW_API_VERSION_MAJOR 2
#define CW_API_VERSION_MINOR 0
#define CW_API_VERSION_PATCH 0

/* Packs a version triple into one integer: 0x00MMmmpp. */
#define CW_VERSION_PACK(major, minor, patch) \
    ((((unsigned)(major) & 0xffu) << 16) | (((unsigned)(minor) & 0xffu) << 8) | ((unsigned)(patch) & 0xffu))
#define CW_VERSION_PACK_MAJOR(v) (((unsigned)(v) >> 16) & 0xffu)
#define CW_VERSION_PACK_MINOR(v) (((unsigned)(v) >> 8) & 0xffu)
#define CW_VERSION_PACK_PATCH(v) ((unsigned)(v) & 0xffu)

#endif /* CUWEAVE_VERSION_H */
