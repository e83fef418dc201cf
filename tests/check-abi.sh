#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tools/abi-check.sh on the library against the last release's ABI, and
# proof that it fails where it must:
#  - the baseline against itself: no change, PASS;
#  - the baseline against a copy that lost a function (cw_version), under
#    the same soname: FAIL, an incompatible change that keeps the soname;
#  - the library stripped of its debug information: FAIL (abidiff would
#    see symbols only, no struct or enum);
#  - the library against a CHANGELOG.md that does not name one of its
#    changes (cw_jit_cache_get_info): FAIL naming it.
# Usage: check-abi.sh SOURCE_ROOT LIBCUWEAVE_SO
set -u
root=$(cd "$1" && pwd) lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # WHAT WANT_RC GREP COMMAND...
    what=$1 want=$2 pat=$3; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne "$want" ] || ! printf '%s\n' "$out" | grep -q -- "$pat"; then
        echo "FAIL: $what: exit $rc (want $want), output:"; printf '%s\n' "$out" | head -20; fail=1
    else
        echo "PASS: $what"
    fi
}
base=$(ls "$root"/abi/cuweave-*.xml | sort -V | tail -1)
check "the library against $(basename "$base")" 0 'abi-check: PASS' sh "$root/tools/abi-check.sh" "$root" "$lib"
check "the baseline against itself" 0 'abi-check: PASS (0 changes' sh "$root/tools/abi-check.sh" "$root" "$base"
python3 - "$base" "$tmp/lost.xml" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r"\n *<elf-symbol name='cw_version'[^\n]*", "", s)
s = re.sub(r"\n *<function-decl name='cw_version'.*?</function-decl>", "", s, flags=re.S)
open(sys.argv[2], "w").write(s)
PY
check "a function removed under the same soname" 1 'keeps the soname' \
    sh "$root/tools/abi-check.sh" "$root" "$tmp/lost.xml" "$root/CHANGELOG.md" "$base"
# A library without debug information (a stripped copy): abidw sees its
# symbols but no types, so struct and enum changes would go unseen; refused.
cp "$lib" "$tmp/stripped.so" && strip "$tmp/stripped.so" || fail=1
check "a library without debug information (stripped)" 1 'no type information' \
    sh "$root/tools/abi-check.sh" "$root" "$tmp/stripped.so"
grep -v 'cw_jit_cache_get_info' "$root/CHANGELOG.md" > "$tmp/CHANGELOG.md"
check "a change the changelog does not name" 1 '^  cw_jit_cache_get_info$' \
    sh "$root/tools/abi-check.sh" "$root" "$lib" "$tmp/CHANGELOG.md"
exit $fail
