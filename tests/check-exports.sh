#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Checks what the shared library exports and links:
#  - only cw_* symbols are exported (nm -D);
#  - neither the library nor the statically linked example depends on
#    libcuda, libcudart or libnvrtc at link time (ldd);
#  - every exported function is exercised by the no-driver test.
# Usage: check-exports.sh LIBCUWEAVE_SO STATIC_EXAMPLE TEST_NODRIVER_C
set -eu
lib=$1 exe=$2 nodriver=$3
fail=0

syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$syms" ] || { echo "FAIL: no exported symbols found in $lib"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^cw_' | grep -v '^CUWEAVE_[0-9]*$' || true)
if [ -n "$bad" ]; then
    echo "FAIL: symbols exported that are not cw_*:"; printf '  %s\n' $bad; fail=1
fi
echo "exported: $(printf '%s\n' "$syms" | grep -c '^cw_') cw_* functions"

for f in "$lib" "$exe"; do
    deps=$(ldd "$f" 2>&1 || true)
    if printf '%s\n' "$deps" | grep -Eq 'libcuda\.|libcudart|libnvrtc'; then
        echo "FAIL: $f links a CUDA library:"; printf '%s\n' "$deps"; fail=1
    fi
done
# (A sanitizer runtime brings libstdc++ along: skip that one check then.)
if [ -z "${CW_SANITIZED:-}" ] && ldd "$exe" 2>&1 | grep -q 'libstdc++'; then
    echo "FAIL: $exe (linked with libcuweave.a and -static-libstdc++) still needs libstdc++.so"; fail=1
fi
if ldd "$exe" 2>&1 | grep -q 'libcuweave'; then
    echo "FAIL: $exe should link libcuweave.a, not the shared library"; fail=1
fi

for s in $(printf '%s\n' "$syms" | grep '^cw_'); do
    grep -q "\\b$s\\b" "$nodriver" || { echo "FAIL: $s is not exercised by $(basename "$nodriver")"; fail=1; }
done
[ $fail -eq 0 ] && echo "exports: ok"
exit $fail
