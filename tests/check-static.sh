#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Checks that a program linked with libcuweave.a links nothing of CUDA:
#  - ldd lists no libcuda, libcudart, libnvrtc and no libcuweave.so (the
#    driver and NVRTC are opened at run time with dlopen);
#  - nm -u lists no undefined cu[A-Z]* or nvrtc* symbol;
#  - the program defines cw_init itself (nm: T), so the archive is in it.
# Prints what it found; exits 1 with the reason otherwise.
# Usage: check-static.sh BINARY
set -eu
[ $# -eq 1 ] || { echo "usage: check-static.sh BINARY"; exit 2; }
exe=$1
fail=0
[ -f "$exe" ] || { echo "FAIL: $exe: no such file"; exit 1; }

if ! deps=$(ldd "$exe" 2>&1); then
    echo "FAIL: ldd $exe failed:"; printf '%s\n' "$deps"; exit 1
fi
echo "ldd $exe:"
printf '%s\n' "$deps" | awk '{print "  " $1}'
bad=$(printf '%s\n' "$deps" | grep -E 'libcuda\.|libcudart|libnvrtc|libcuweave' || true)
if [ -n "$bad" ]; then
    echo "FAIL: $exe links a CUDA library or the shared libcuweave:"; printf '%s\n' "$bad"; fail=1
fi

if ! undef=$(nm -u "$exe" 2>&1); then
    echo "FAIL: nm -u $exe failed:"; printf '%s\n' "$undef"; exit 1
fi
names=$(printf '%s\n' "$undef" | awk '{print $NF}' | sed 's/@.*//')
echo "nm -u: $(printf '%s\n' "$names" | grep -c .) undefined symbols"
bad=$(printf '%s\n' "$names" | grep -E '^(cu[A-Z]|nvrtc)' || true)
if [ -n "$bad" ]; then
    echo "FAIL: $exe has undefined CUDA symbols (it would need the driver or NVRTC at link time):"
    printf '  %s\n' $bad; fail=1
else
    echo "nm -u: no cu[A-Z]* or nvrtc* symbol"
fi

init=$(nm "$exe" 2>/dev/null | awk '$3 == "cw_init" {print $2}')
if [ "$init" = T ]; then
    echo "nm: cw_init is defined in the program (T)"
else
    echo "FAIL: $exe does not define cw_init (nm: '${init:-absent}'): libcuweave.a is not linked into it"; fail=1
fi

[ $fail -eq 0 ] && echo "static link: ok"
exit $fail
