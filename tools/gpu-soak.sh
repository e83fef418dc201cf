#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The GPU churn soak (issue 25): every kind of object created, used with work
# in flight and destroyed up to a million times (tests/test_gpu_churn.c with
# CWT_CHURN_N=1000000), each kind bounded to SOAK_S seconds (default 20),
# one group at a time; logs go to $OUT (or ./gpu-out). Prints each kind's
# "# churn" line and each group's result. Needs a meson build in build-gpu (tools/gpu-check.sh makes one; so
# does this script when it is missing).
#
# Usage (repository root, on the GPU machine): bash tools/gpu-soak.sh [group...]
#   groups: test_churn_core test_churn_graphs_code_flow test_churn_partitions_and_comms
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
if [ ! -x build-gpu/tests/test_gpu_churn ]; then
    { meson setup build-gpu -Dbuildtype=release && ninja -C build-gpu; } > "$OUT/soak-build.log" 2>&1 ||
        { tail -30 "$OUT/soak-build.log"; exit 1; }
fi
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(test_churn_core test_churn_graphs_code_flow test_churn_partitions_and_comms)
status=0
for g in "${groups[@]}"; do
    CWT_FILTER=$g CWT_CHURN_N=1000000 CWT_CHURN_S=${SOAK_S:-20} build-gpu/tests/test_gpu_churn > "$OUT/soak-$g.log" 2>&1
    rc=$?
    grep -E '^# churn|ERROR|error:' "$OUT/soak-$g.log"
    echo "$g: exit $rc"
    [ $rc -eq 0 ] || status=1
done
exit $status
