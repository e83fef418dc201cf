#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Checks a libcuweave.so built with the C++ runtime linked in (make
# STATIC_LIBSTDCXX=1, meson -Dstatic_libstdcxx=true): readelf -d lists no
# NEEDED libstdc++ or libgcc_s, and ldd lists no libstdc++.
# Prints its NEEDED entries and size; exits 1 with the reason otherwise.
# Usage: check-no-libstdcxx.sh LIBCUWEAVE_SO
set -eu
[ $# -eq 1 ] || { echo "usage: check-no-libstdcxx.sh LIBCUWEAVE_SO"; exit 2; }
lib=$1
fail=0
[ -f "$lib" ] || { echo "FAIL: $lib: no such file"; exit 1; }

if ! dyn=$(readelf -d "$lib" 2>&1); then
    echo "FAIL: readelf -d $lib failed:"; printf '%s\n' "$dyn"; exit 1
fi
needed=$(printf '%s\n' "$dyn" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "$lib: $(wc -c < "$lib") bytes; NEEDED: $(echo $needed)"
bad=$(printf '%s\n' "$needed" | grep -E '^lib(stdc\+\+|gcc_s)' || true)
if [ -n "$bad" ]; then
    echo "FAIL: $lib still needs $(echo $bad) at run time"; fail=1
fi
if ldd "$lib" 2>&1 | grep -q 'libstdc++'; then
    echo "FAIL: ldd $lib lists libstdc++:"; ldd "$lib"; fail=1
fi
[ $fail -eq 0 ] && echo "no libstdc++: ok"
exit $fail
