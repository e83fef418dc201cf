#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Prints the release version of include/cuweave/version.h (MAJOR.MINOR.PATCH):
# meson.build's project(version:) (the package, meson dist's tarball, the
# wheel) and the Makefile read the same header.
# Usage: version.sh [--abi]   (--abi: the ABI version, CW_API_VERSION_*)
set -eu
h="$(dirname "$0")/../include/cuweave/version.h"
p=CW_VERSION
[ "${1:-}" = --abi ] && p=CW_API_VERSION
for k in MAJOR MINOR PATCH; do sed -n "s/^#define ${p}_$k \([0-9][0-9]*\).*/\1/p" "$h"; done | paste -sd. -
