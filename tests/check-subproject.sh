#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# cuweave as a meson subproject of another project (tests/consumer/meson,
# its subprojects/cuweave this source tree):
#  - dependency('cuweave', version: '>=0.3', fallback: 'cuweave') is found
#    (meson.override_dependency, the version read from version.h), builds the
#    library alone (no test, example, benchmark or cuweave-info of cuweave,
#    CMocka not looked for) and the consumer runs (exit 0, or 77 without a GPU),
#    linked with the shared library and with the archive ('cuweave-static');
#  - a constraint the version does not meet ('>=9.0') fails the configure,
#    naming the version;
#  - meson dist names the tarball with the version (cuweave-X.Y.Z.tar.xz).
# Usage: check-subproject.sh SOURCE_ROOT
set -u
root=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2], got [$3]"; fail=1; fi; }
version=$(sh "$root/tools/version.sh")
mkdir -p "$tmp/consumer/meson/subprojects"
cp "$root/tests/consumer/consumer.c" "$tmp/consumer/"
cp "$root/tests/consumer/meson/meson.build" "$root/tests/consumer/meson/meson_options.txt" "$tmp/consumer/meson/"
ln -s "$root" "$tmp/consumer/meson/subprojects/cuweave"
cd "$tmp/consumer/meson" || exit 1
meson setup "$tmp/b" > "$tmp/setup.log" 2>&1; rc=$?
check "configure with cuweave >=0.3 as a subproject" 0 "$rc"
[ $rc -eq 0 ] || tail -30 "$tmp/setup.log"
check "the subproject's version" 1 "$(grep -c "Project version: $version" "$tmp/setup.log")"
check "CMocka not looked for" 0 "$(grep -ci cmocka "$tmp/setup.log")"
ninja -C "$tmp/b" > "$tmp/build.log" 2>&1; rc=$?
check "build" 0 "$rc"
[ $rc -eq 0 ] || tail -30 "$tmp/build.log"
check "only the library of cuweave built (no tests, examples, benchmarks, cuweave-info)" "0 0 0 0" \
    "$(for d in tests examples bench cuweave-info; do ls -d "$tmp/b/subprojects/cuweave/$d" 2>/dev/null | wc -l; done | tr '\n' ' ' | sed 's/ $//')"
for exe in consumer consumer_static; do
    out=$("$tmp/b/$exe" 2>&1); rc=$?
    [ $rc -eq 77 ] && rc=0
    check "$exe runs (0, or 77 without a GPU): $out" 0 "$rc"
done
meson setup "$tmp/b9" -Dcuweave_version='>=9.0' > "$tmp/setup9.log" 2>&1; rc=$?
check "a constraint it does not meet fails" 1 "$([ $rc -ne 0 ] && grep -c "$version" "$tmp/setup9.log" | sed 's/[1-9][0-9]*/1/')"
cd "$root" || exit 1
if [ -d "$root/.git" ] || git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    meson setup "$tmp/d" -Dtests=false -Dexamples=false -Dbench=false > "$tmp/dist-setup.log" 2>&1 \
        && meson dist -C "$tmp/d" --allow-dirty --no-tests --formats xztar > "$tmp/dist.log" 2>&1; rc=$?
    check "meson dist: cuweave-$version.tar.xz" "0 yes" "$rc $([ -f "$tmp/d/meson-dist/cuweave-$version.tar.xz" ] && echo yes)"
fi
exit $fail
