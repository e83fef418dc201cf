#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Runs every GPU test (and the pipeline examples) under one compute-sanitizer
# tool, each with a time limit, in the sanitizer mode of the tests
# (CWT_QUICK=1: fewer requests, longer waits; cwt_under_sanitizer() is true
# under the tool). Prints one line per binary: exit code, the tool's
# summary, and whether the limit cut it short. Logs go to $OUT.
#
# Usage (from the repository root, after building build-gpu with meson as
# tools/gpu-check.sh does): bash tools/sanitize-suite.sh TOOL [LIMIT_S]
#   TOOL: memcheck, racecheck, synccheck or initcheck
set -u
tool=${1:?usage: sanitize-suite.sh memcheck|racecheck|synccheck|initcheck [limit_s]}
limit=${2:-120}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
# CWT_SANITIZER_TOOL: the tool does not say which it is; the tests ask
# (cwt_sanitizer_is) where one tool cannot run a part (racecheck and
# programmatic edges in a loop, test_gpu_resident)
export CWT_QUICK=1 CUWEAVE_TEST_HAMMER_S=2 NCCL_NVLS_ENABLE=0 CWT_SANITIZER_TOOL=$tool
for t in build-gpu/tests/test_gpu_* build-gpu/examples/diamond build-gpu/examples/diamond_resident \
         build-gpu/examples/video_pipeline; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    # test_gpu_fault writes through a bad pointer on purpose: memcheck
    # rightly flags it, so it is left out of every tool.
    case $t in *test_gpu_fault) continue ;; esac
    log="$OUT/san-$tool-$(basename "$t").log"
    timeout "$limit" compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 99 "$t" > "$log" 2>&1
    rc=$?
    sum=$(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log" || echo 'no summary')
    [ $rc = 124 ] && sum="$sum (cut at ${limit} s)"
    echo "$tool $(basename "$t"): exit $rc, $sum"
done
