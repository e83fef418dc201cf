#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every C function has a C++ wrapper or is listed in tests/cpp_not_wrapped.txt
# with a reason (tests/check-cpp-coverage.py), and proof that the check can
# fail: on a copy of the headers with a new C function, a wrapper that no
# longer calls its C function (named in a comment only), a stale entry, an
# entry without a reason, and a library source that includes the wrappers,
# it must report each one.
# Usage: check-cpp-coverage.sh SOURCE_ROOT [LIBCUWEAVE_SO]
set -u
root=${1:-.}
lib=${2:-}
check() { python3 "$root/tests/check-cpp-coverage.py" "$@"; }
if [ -n "$lib" ]; then check --root="$root" --lib="$lib" || exit 1; else check --root="$root" || exit 1; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include" "$tmp/tests"
cp -r "$root/include/cuweave" "$tmp/include/cuweave"
cp "$root/tests/cpp_not_wrapped.txt" "$tmp/tests/"
fail=0
expect() { # WHAT PATTERN: the check fails and says PATTERN
    out=$(check --root="$tmp")
    rc=$?
    [ $rc -eq 1 ] || { echo "FAIL: the check passed $1 (exit $rc)"; fail=1; return; }
    echo "$out" | grep -q "$2" || { echo "FAIL: the check did not report $1: $2"; echo "$out"; fail=1; }
}

# a new C function without a wrapper
printf '/* Returns: nothing. */\nCW_API void cw_stream_frobnicate(cw_stream *s);\n' >> "$tmp/include/cuweave/stream.h"
expect "a new C function" 'cw_stream_frobnicate (cuweave/stream.h) has no C++ wrapper'
# listed with a reason, it passes
printf 'cw_stream_frobnicate  a test entry\n' >> "$tmp/tests/cpp_not_wrapped.txt"
check --root="$tmp" > /dev/null || { echo "FAIL: a listed function was not accepted"; fail=1; }
# a wrapper that names its C function only in a comment
sed 's/cw_timer_get_elapsed_ms(/cw_timer_gone(/; s|^// C++ wrappers of|// cw_timer_get_elapsed_ms: C++ wrappers of|' \
    "$root/include/cuweave/cpp/stream.hpp" > "$tmp/include/cuweave/cpp/stream.hpp"
expect "a wrapper that lost its call" 'cw_timer_get_elapsed_ms (cuweave/stream.h) has no C++ wrapper'
cp "$root/include/cuweave/cpp/stream.hpp" "$tmp/include/cuweave/cpp/stream.hpp"
# stale entries: a wrapped function, a function that does not exist; no reason
printf 'cw_stream_create  wrapped after all\n' >> "$tmp/tests/cpp_not_wrapped.txt"
expect "a wrapped function listed" 'cw_stream_create is listed as not wrapped but include/cuweave/cpp/stream.hpp uses it'
printf 'cw_no_such_function  gone\ncw_stream_frobnicate\n' >> "$tmp/tests/cpp_not_wrapped.txt"
expect "a function that does not exist" 'cw_no_such_function is listed as not wrapped but is no C function'
expect "an entry without a reason" 'cw_stream_frobnicate is listed without a reason'

# a library source that includes the wrappers
rm -f "$tmp/tests/cpp_not_wrapped.txt" && cp "$root/tests/cpp_not_wrapped.txt" "$tmp/tests/"
mkdir -p "$tmp/src/api"
printf '#include "cuweave/cuweave.hpp"\n' > "$tmp/src/api/cw_cpp.cpp"
expect "a library source including the wrappers" 'src/api/cw_cpp.cpp:1: the library includes the C++ wrappers'

[ $fail -eq 0 ] && echo "PASS: the check reports a new C function, a lost call, stale entries, a missing reason and wrapper code in the library"
exit $fail
