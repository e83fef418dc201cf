#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The library's ABI against the last release's (abi/cuweave-X.Y.Z.xml, made
# by libabigail's abidw from that release's libcuweave.so; Debian:
# apt-get install abigail-tools), with abidiff:
#  - an incompatible change (a function removed, a struct's layout or an
#    enum's values changed, ...) fails unless the soname changed too
#    (CW_API_VERSION_MAJOR in include/cuweave/version.h);
#  - any change fails unless CHANGELOG.md, above the baseline release's
#    heading, names it: each function added or removed, each public struct
#    or enum changed, and each member or enumerator it gained or lost as
#    TYPE.MEMBER (cw_resident_info.stall, cw_resident_exit.CW_RESIDENT_EXIT_STALLED).
# The opaque handle types (typedef struct cw_x cw_x; in the headers: their
# definitions are the library's own) are left out, and so are the symbol
# version node and the soname, which are compared on their own.
# Usage: abi-check.sh SOURCE_ROOT LIBCUWEAVE_SO_OR_ABI_XML [CHANGELOG] [BASELINE_XML]
#        abi-check.sh SOURCE_ROOT --write LIBCUWEAVE_SO OUT_XML   (at a release: the new baseline)
# (tools/test-all.sh runs it on the Makefile build; tests/check-abi.sh proves
# it fails where it must.)
set -eu
root=$(cd "$1" && pwd)
abidw_flags="--headers-dir $root/include/cuweave --drop-private-types --no-show-locs --no-corpus-path --no-comp-dir-path"
command -v abidiff >/dev/null 2>&1 || { echo "abi-check: abidiff is not installed (apt-get install abigail-tools)"; exit 1; }
if [ "$2" = --write ]; then
    # shellcheck disable=SC2086
    abidw $abidw_flags "$3" > "$4"
    echo "abi-check: wrote $4 ($(grep -c '<elf-symbol ' "$4") symbols)"
    exit 0
fi
cur=$2
changelog=${3:-$root/CHANGELOG.md}
base=${4:-$(ls "$root"/abi/cuweave-*.xml | sort -V | tail -1)}
base_version=$(basename "$base" .xml); base_version=${base_version#cuweave-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $cur in
    *.xml) cp "$cur" "$tmp/cur.xml" ;;
    # shellcheck disable=SC2086
    *) abidw $abidw_flags "$cur" > "$tmp/cur.xml" ;;
esac
# Without debug information (a stripped library, a build without -g) abidw
# writes the symbols and no type: abidiff would see functions added and
# removed, never a struct, enum or parameter that changed. Refused.
for x in "$base" "$tmp/cur.xml"; do
    if ! grep -q "<function-decl name='cw_" "$x"; then
        [ "$x" = "$base" ] || x=$cur
        echo "FAIL: $x has no type information (no declaration of a cw_ function: built without -g, or stripped);"
        echo "  abidiff would compare its symbols only. Check a library built with debug information."
        exit 1
    fi
done
soname() { sed -n "s/^<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$1" | head -1; }
norm() { sed -e "s/ version='CUWEAVE_[0-9]*'//g" -e "s/ is-default-version='[a-z]*'//g" -e "s/ soname='[^']*'//" \
             -e "s/@@\{0,1\}CUWEAVE_[0-9]*//g" "$1"; }
so_base=$(soname "$base") so_cur=$(soname "$tmp/cur.xml")
norm "$base" > "$tmp/a.xml"
norm "$tmp/cur.xml" > "$tmp/b.xml"
opaque=$(grep -ho '^typedef struct cw_[a-z0-9_]* cw_[a-z0-9_]*;' "$root"/include/cuweave/*.h | awk '{print $3}' | sort -u | paste -sd'|' -)
printf '[suppress_type]\n  type_kind = struct\n  name_regexp = ^(%s)$\n' "$opaque" > "$tmp/opaque.supp"
set +e
abidiff --no-show-locs --suppressions "$tmp/opaque.supp" "$tmp/a.xml" "$tmp/b.xml" > "$tmp/diff.txt"
rc=$?
set -e
if [ $((rc & 3)) -ne 0 ]; then echo "abi-check: abidiff failed ($rc)"; cat "$tmp/diff.txt"; exit 1; fi
echo "abi-check: $cur against $base_version ($so_base): $(sed -n 's/^Functions changes summary: //p' "$tmp/diff.txt")"
fail=0
if [ $((rc & 8)) -ne 0 ] && [ "$so_base" = "$so_cur" ]; then
    echo "FAIL: an incompatible ABI change keeps the soname $so_cur (raise CW_API_VERSION_MAJOR):"
    sed 's/^/  /' "$tmp/diff.txt"
    fail=1
elif [ $((rc & 8)) -ne 0 ]; then
    echo "abi-check: incompatible changes, and the soname changed: $so_base -> $so_cur"
fi
# What abidiff names: functions added or removed, types changed with their
# members and enumerators gained or lost.
python3 - "$tmp/diff.txt" > "$tmp/names.txt" <<'PY'
import re, sys
names, stack = [], []  # stack: (indent, type name)
mode = None
for line in open(sys.argv[1]):
    s = line.rstrip("\n")
    ind = len(s) - len(s.lstrip())
    m = re.match(r"\s*\[[ADC]\] 'function [^']*'\s+\{(\w+)", s) or re.match(r"\s*\[[AD]\] (cw_\w+)\s*$", s)
    if m and not s.lstrip().startswith("[C]"):
        names.append(m.group(1))
        continue
    while stack and stack[-1][0] >= ind:
        stack.pop()
    m = re.search(r"underlying type '(?:struct|enum|union) (\w+)' changed", s) or \
        re.search(r"^\s*'(?:struct|enum|union) (\w+)' changed", s)
    if m:
        names.append(m.group(1))
        stack.append((ind, m.group(1)))
        mode = None
        continue
    m = re.search(r"name of '(\w+)::\w+' changed to '\w+::(\w+)'", s)
    if m:
        names.append("%s.%s" % (m.group(1), m.group(2)))
        continue
    m = re.match(r"\s*\d+ (data member|enumerator) (insertion|deletion)s?:", s)
    if m:
        mode = (ind, m.group(1))
        continue
    if mode and ind > mode[0] and stack:
        t = stack[-1][1]
        m = re.match(r"\s*'(?:.*[ *&])?(\w+)(?:\[\d*\])*', at offset", s) if mode[1] == "data member" else \
            re.match(r"\s*'(?:\w+::)?(\w+)' value", s)
        if m:
            names.append("%s.%s" % (t, m.group(1)))
            continue
    if mode and ind <= mode[0]:
        mode = None
for n in dict.fromkeys(names):
    print(n)
PY
head=$(grep -n "^## $base_version\b" "$changelog" | head -1 | cut -d: -f1)
[ -n "$head" ] || { echo "FAIL: $changelog has no heading '## $base_version' (the baseline release)"; exit 1; }
head -n "$((head - 1))" "$changelog" > "$tmp/new.md"
missing=0
while read -r n; do
    grep -q -- "\b$n\b" "$tmp/new.md" || { [ $missing -eq 0 ] && echo "FAIL: changed since $base_version and not in $(basename "$changelog") above '## $base_version':"; echo "  $n"; missing=$((missing + 1)); }
done < "$tmp/names.txt"
[ $missing -eq 0 ] || fail=1
n=$(wc -l < "$tmp/names.txt")
[ $fail -eq 0 ] && echo "abi-check: PASS ($n changes since $base_version, each in $(basename "$changelog"); soname $so_cur)"
exit $fail
