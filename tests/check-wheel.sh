#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The wheel as a user gets it: tools/build-wheel.sh makes the sdist, a wheel
# from it (meson-python), retagged py3-none and repaired by auditwheel, and
# runs auditwheel show and twine check; then here:
#  - the wheel's tag is manylinux (glibc 2.34 at most: the floor
#    docs/python.md states) and its library sits in platlib with the package
#    (cuweave/libcuweave.so.N), stripped, needing nothing but libc, ld.so and
#    libgcc_s;
#  - installed with no index into a fresh venv and imported from another
#    directory with no CUWEAVE_* variable set: cuweave.version() is the
#    header's and cuweave.library() says the package's own copy was loaded;
#  - the Python tests (bindings/python/tests) against the installed wheel:
#    run from a view of the tree without bindings/python/cuweave (so the
#    import finds the installed package; fakeenv.py checks it does), on the
#    fake driver of a build (FAKE_DIR, default build/make/tests).
# Leaves the sdist and the wheel in build/wheel/dist/.
# Usage: check-wheel.sh SOURCE_ROOT [FAKE_DIR]   (a tools/test-all.sh step: it builds)
set -eu
root=$(cd "${1:-.}" && pwd)
fake=$(cd "${2:-$root/build/make/tests}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# CHECK_WHEEL_REUSE=1: the wheel build/wheel/dist already holds (a developer's second run)
[ "${CHECK_WHEEL_REUSE:-0}" = 1 ] || sh "$root/tools/build-wheel.sh" "$root" "$root/build/wheel"
version=$(sh "$root/tools/version.sh")
whl=$(ls "$root"/build/wheel/dist/cuweave-"$version"-py3-none-manylinux*.whl)
echo "wheel: $whl"
floor=$(basename "$whl" | sed -n 's/.*-manylinux_2_\([0-9]*\)_.*/\1/p')
[ -n "$floor" ] && [ "$floor" -le 34 ] || { echo "FAIL: the wheel's tag asks for glibc 2.${floor:-?} (at most 2.34)"; exit 1; }
python3 -m zipfile -l "$whl" | awk 'NR > 1 {print $1}' > "$tmp/files"
abi=$(sh "$root/tools/version.sh" --abi); so=libcuweave.so.${abi%%.*}
grep -qx "cuweave/$so" "$tmp/files" || { echo "FAIL: cuweave/$so is not in platlib:"; cat "$tmp/files"; exit 1; }
if grep -q '\.data/' "$tmp/files"; then echo "FAIL: files outside platlib:"; grep '\.data/' "$tmp/files"; exit 1; fi
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --no-index "$whl"
vnum() { sed -n "s/^#define $1 \([0-9]*\).*/\1/p" "$root/include/cuweave/version.h"; }
want="($(vnum CW_VERSION_MAJOR), $(vnum CW_VERSION_MINOR), $(vnum CW_VERSION_PATCH)) package"
got=$(cd "$tmp" && env -u CUWEAVE_LIBRARY -u CUWEAVE_LIBCUDA -u CUWEAVE_FAKE_DRIVER -u PYTHONPATH "$tmp/venv/bin/python" -c \
    'import cuweave; print(cuweave.version(), cuweave.library()[0])')
echo "import cuweave: $got"
[ "$got" = "$want" ] || { echo "FAIL: expected [$want]"; exit 1; }
lib=$(ls "$tmp"/venv/lib/python3*/site-packages/cuweave/"$so")
file "$lib" | grep -q ', stripped' || { echo "FAIL: $lib is not stripped: $(file "$lib")"; exit 1; }
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "the bundled library ($(wc -c < "$lib") bytes, stripped) needs: $needed"
for n in $needed; do
    case $n in libc.so.6|ld-linux*|libgcc_s.so.1) ;; *) echo "FAIL: the bundled library needs $n"; exit 1 ;; esac
done
glibc=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
echo "the newest glibc symbol it needs: $glibc"
# The tests against the installed package: a view of the tree (links to
# everything but bindings/python/cuweave), so that their sys.path entry for
# bindings/python finds no package there.
mkdir -p "$tmp/view/bindings/python"
for f in "$root"/* "$root"/.ci; do
    [ "$(basename "$f")" = bindings ] || [ "$(basename "$f")" = build ] || ln -s "$f" "$tmp/view/"
done
ln -s "$root/build" "$tmp/view/build"
for f in "$root"/bindings/python/*; do
    [ "$(basename "$f")" = cuweave ] || ln -s "$f" "$tmp/view/bindings/python/"
done
site=$(ls -d "$tmp"/venv/lib/python3*/site-packages)
(cd "$tmp" && env -u CUWEAVE_LIBRARY -u PYTHONPATH "$tmp/venv/bin/python" -c \
    "import cuweave, sys; sys.exit(0 if cuweave.__file__.startswith('$site') else 'cuweave from ' + cuweave.__file__)")
echo "=== the Python tests against the installed wheel"
(cd "$tmp" && env -u CUWEAVE_LIBRARY -u PYTHONPATH CUWEAVE_TESTS_NEED_FAKE=1 CUWEAVE_TESTS_INSTALLED="$site" \
    CUWEAVE_FAKE_DRIVER="$fake/libfakecuda.so" "$tmp/venv/bin/python" -m unittest discover \
    -s "$tmp/view/bindings/python/tests" -v) 2>&1 | tee "$tmp/tests.log" | tail -5
grep -q '^OK' "$tmp/tests.log" || { grep -E '^(FAIL|ERROR):' "$tmp/tests.log" | head -20; echo "FAIL: the Python tests against the wheel"; exit 1; }
echo "wheel: PASS"
