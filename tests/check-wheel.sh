#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The Python wheel (bindings/python/setup.py) carries libcuweave.so.2: built
# here (pip wheel, which builds the library with the Makefile), installed
# with no index into a fresh venv, imported from another directory with no
# CUWEAVE_* variable set: cuweave.version() is the header's and
# cuweave.library() says the package's own copy was loaded; the copy needs
# nothing but libc (STATIC_LIBSTDCXX=1). Leaves the wheel in build/wheel/.
# Usage: check-wheel.sh SOURCE_ROOT   (a tools/test-all.sh step: it builds)
set -eu
root=$(cd "${1:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$root/build/wheel"
python3 -m pip wheel --no-deps -w "$root/build/wheel" "$root/bindings/python"
whl=$(ls "$root"/build/wheel/cuweave-*.whl)
echo "wheel: $whl"
case $whl in *-py3-none-linux_*.whl) ;; *) echo "FAIL: not a platform wheel: $whl"; exit 1 ;; esac
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --no-index "$whl"
vnum() { sed -n "s/^#define $1 \([0-9]*\).*/\1/p" "$root/include/cuweave/version.h"; }
want="($(vnum CW_VERSION_MAJOR), $(vnum CW_VERSION_MINOR), $(vnum CW_VERSION_PATCH)) package"
got=$(cd "$tmp" && env -u CUWEAVE_LIBRARY -u CUWEAVE_LIBCUDA -u CUWEAVE_FAKE_DRIVER "$tmp/venv/bin/python" -c \
    'import cuweave; print(cuweave.version(), cuweave.library()[0])')
echo "import cuweave: $got"
[ "$got" = "$want" ] || { echo "FAIL: expected [$want]"; exit 1; }
so=$(ls "$tmp"/venv/lib/python3*/site-packages/cuweave/libcuweave.so.2)
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "the bundled library needs: $needed"
case $needed in *libstdc++*) echo "FAIL: the bundled library needs libstdc++"; exit 1 ;; esac
echo "wheel: PASS"
