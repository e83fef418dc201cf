#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs test commands; exit 0 = pass, 77 = skipped (no GPU), else fail.
# Usage: run-tests.sh LABEL CMD [CMD...]   (each CMD is one word-split string)
# Prints one line per command and a closing "LABEL: N passed, N failed, N skipped".
label=$1; shift
pass=0 failed=0 skipped=0
for cmd in "$@"; do
    name=$(printf '%s' "$cmd" | awk '{ for (i = 1; i <= NF; i++) if ($i !~ /=/ && $i != "env" && $i != "sh" && $i != "python3") { print $i; exit } }')
    out=$(sh -c "$cmd" 2>&1); rc=$?
    case $rc in
        0) pass=$((pass + 1)); echo "PASS $name" ;;
        77) skipped=$((skipped + 1)); echo "SKIP $name: $(printf '%s\n' "$out" | grep -m1 SKIP)" ;;
        *) failed=$((failed + 1)); echo "FAIL $name (exit $rc)"; printf '%s\n' "$out" | sed 's/^/    /' ;;
    esac
done
echo "$label: $pass passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
