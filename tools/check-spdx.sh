#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every source file names its licence in its first lines (LICENSE:
# BSD-2-Clause): C, C++, CUDA and headers, Python, shell, meson.build,
# Makefile, meson_options.txt, pyproject.toml, .ci/run, the linker map.
# Generated files are left as their generators write them. With a built
# cuweave.pc as second argument, it checks that one too.
# Usage: check-spdx.sh SOURCE_ROOT [CUWEAVE_PC]
set -u
cd "${1:-.}"
tag='SPDX-License-Identifier: BSD-2-Clause'
fail=0 n=0
files=$(git ls-files 2>/dev/null || find . -type f | sed 's|^\./||')
for f in $files; do
    case $f in
        tests/kernels/test_kernels_fatbin.h|*/corpus/*) continue ;;
        *.c|*.h|*.cpp|*.hpp|*.cu|*.c.in|*.py|*.sh|*meson.build|Makefile|meson_options.txt|*pyproject.toml|.ci/run|src/cuweave.map) ;;
        *) continue ;;
    esac
    [ -f "$f" ] || continue
    n=$((n + 1))
    head -3 "$f" | grep -q "$tag" || { echo "FAIL: $f: no '$tag' in its first lines"; fail=1; }
done
[ -f LICENSE ] && grep -q 'Redistribution and use in source and binary forms' LICENSE \
    || { echo "FAIL: no BSD-2-Clause LICENSE"; fail=1; }
if [ -n "${2:-}" ]; then
    grep -q '^license=BSD-2-Clause$' "$2" || { echo "FAIL: $2 has no license=BSD-2-Clause"; fail=1; }
fi
[ $fail -eq 0 ] && echo "spdx: $n source files and LICENSE name BSD-2-Clause"
exit $fail
