#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs CMD and passes when its exit status is CODE (make check: a program
# expected to exit 77 is checked, not counted as a skip).
# Usage: expect-exit.sh CODE CMD [ARG...]
code=$1; shift
"$@"; rc=$?
[ "$rc" -eq "$code" ] && exit 0
echo "FAIL: $* exited $rc, expected $code"
exit 1
