#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Runs the benchmarks of two source trees on one machine, one after the
# other per benchmark (old, new, old, new, ...), so that a change can be
# judged by ratios measured side by side. Each benchmark already compares
# cuweave with the raw driver API in its own run; this compares two
# versions of cuweave doing that.
#
# Usage (on the GPU machine, from the repository root):
#   bash tools/bench-compare.sh OLD_TREE [RUNS] [bench_name ...]
# OLD_TREE: a copy of the older sources (e.g. `git archive <commit> | tar -x -C .old`).
# RUNS (default 1): runs of each benchmark per tree. Names default to every
# benchmark of this tree. ORDER="new old" runs this tree first in each pair
# (default "old new"): a difference that follows the order is the machine's. Logs go to $OUT (or ./bench-out): bench-NAME-old-R.log,
# bench-NAME-new-R.log; the summary prints each run's docs/benchmarks.md block.
set -u
old=${1:?usage: bench-compare.sh OLD_TREE [RUNS] [bench ...]}
runs=${2:-1}
shift $(( $# >= 2 ? 2 : 1 ))
OUT=${OUT:-$PWD/bench-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0

build() { # TREE DIR
    (cd "$1" && meson setup "$2" -Dbuildtype=release -Dtests=false -Dexamples=false > "$OUT/setup-$(basename "$2").log" 2>&1 &&
        ninja -C "$2" > "$OUT/build-$(basename "$2").log" 2>&1)
}
build "$old" "$PWD/build-bench-old" || { echo "FAIL: the old tree did not build"; tail -20 "$OUT/build-build-bench-old.log"; exit 1; }
build "$PWD" "$PWD/build-bench-new" || { echo "FAIL: this tree did not build"; tail -20 "$OUT/build-build-bench-new.log"; exit 1; }

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for b in build-bench-new/bench/bench_*; do [ -x "$b" ] && [ -f "$b" ] && names+=("$(basename "$b")"); done
fi
for n in "${names[@]}"; do
    for r in $(seq 1 "$runs"); do
        for v in ${ORDER:-old new}; do
            b=build-bench-$v/bench/$n
            [ -x "$b" ] || { echo "$n ($v): not built"; continue; }
            start=$(date +%s)
            "$b" > "$OUT/bench-$n-$v-$r.log" 2>&1
            echo "$n run $r ($v): exit $?, $(( $(date +%s) - start )) s"
        done
    done
done
echo "================ docs blocks"
for n in "${names[@]}"; do
    for r in $(seq 1 "$runs"); do
        for v in old new; do
            f=$OUT/bench-$n-$v-$r.log
            [ -f "$f" ] && { echo "---- $n run $r ($v)"; sed -n '/^---- docs\/benchmarks.md ----/,/^---- end ----/p' "$f"; }
        done
    done
done
