#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 42 parts 1 and 4 on the GPU machine: the NVTX ranges' cost and the
# docs' pictures. Builds with meson (NVTX3's headers from the CUDA toolkit),
# then, each step under a time limit, logs in $OUT:
#   1. test_nvtx_cpu on that build (the ranges counted by the tests' NVTX
#      tool, fake driver): it must pass, not skip;
#   2. bench_nvtx with no tool attached (the verdict PASS/MISS) and with the
#      tests' counting tool attached (NVTX_INJECTION64_PATH);
#   3. tools/make-pictures.sh into $OUT/pictures: bench_trace, bench_pipeline,
#      bench_vmaf and bench_resident with their traces and samples, and the
#      PNGs (with their layouts, NAME.txt) in $OUT/pictures/img when
#      matplotlib imports here; otherwise render them where it does:
#        sh tools/make-pictures.sh --render <$OUT/pictures brought back> docs/img
# and prints a short summary last. Whole run: about 5 minutes on an H200.
#
# Usage (from the repository root, CMocka .debs in .deps/ as gpu-check.sh):
#   bash tools/gpu-pictures.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
summary=()
note() { summary+=("$*"); }

if ls .deps/*.deb >/dev/null 2>&1; then
    for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
    export PKG_CONFIG_SYSROOT_DIR=/opt/deps
    export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig
    export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0
export CW_COMMIT=${CW_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "gpu: $(head -1 "$OUT/gpu.txt"); commit $CW_COMMIT"

. "$(dirname "$0")/gpu-common.sh"  # cw_setup (CW_KEEP_BUILD=1 keeps build-gpu/)
if cw_setup build-gpu -Dbuildtype=release -Dexamples=false > "$OUT/meson-setup.log" 2>&1 \
    && timeout 240 ninja -C build-gpu > "$OUT/meson-build.log" 2>&1; then
    note "build: $(grep -m1 'NVTX ranges' "$OUT/meson-setup.log" | sed 's/^ *//')"
else
    note "meson build FAILED (see meson-setup.log, meson-build.log)"
    tail -20 "$OUT/meson-build.log"
    printf '%s\n' "${summary[@]}"
    exit 1
fi
b=build-gpu

# 1. the ranges counted by the tests' tool
CUWEAVE_TESTS_NEED_NVTX=1 NVTX_INJECTION64_PATH=$PWD/$b/tests/libnvtxinject.so \
    timeout 60 "$b/tests/test_nvtx_cpu" "$b/tests/libfakecuda.so" > "$OUT/test_nvtx_cpu.log" 2>&1
note "test_nvtx_cpu: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_nvtx_cpu.log" | tr '\n' ' '))"

# 2. what a range costs, no tool and the tests' tool
timeout 60 "$b/bench/bench_nvtx" > "$OUT/bench_nvtx.txt" 2>&1
note "bench_nvtx, no tool: exit $?"
grep -E '^(NVTX ranges|push/pop|the same loop|pair - empty|diamond|a range|target)' "$OUT/bench_nvtx.txt" | sed 's/^/    /' \
    > "$OUT/bench_nvtx.facts"
NVTX_INJECTION64_PATH=$PWD/$b/tests/libnvtxinject.so timeout 60 "$b/bench/bench_nvtx" > "$OUT/bench_nvtx_tool.txt" 2>&1
note "bench_nvtx, the tests' tool attached: exit $?"
grep -E '^(NVTX ranges|pair - empty|diamond|a range)' "$OUT/bench_nvtx_tool.txt" | sed 's/^/    /' \
    > "$OUT/bench_nvtx_tool.facts"

# 3. the pictures (the benchmarks' runs shortened: pictures, not figures)
BENCH_DIR=$b/bench BENCH_FRAMES=200 BENCH_RUNS=2 BENCH_VMAF_FRAMES=400 BENCH_ITERS=5000 \
    timeout 300 sh tools/make-pictures.sh "$OUT/pictures" > "$OUT/make-pictures.log" 2>&1
note "make-pictures: exit $? ($(ls "$OUT/pictures"/*.json 2>/dev/null | wc -l) traces, $(ls "$OUT/pictures/csv" 2>/dev/null | wc -l) CSVs, $(ls "$OUT/pictures/img"/*.png 2>/dev/null | wc -l) PNGs)"
grep -h '^make-pictures:' "$OUT/make-pictures.log" | sed 's/^/    /' > "$OUT/make-pictures.facts"
for f in "$OUT/pictures/img"/trace-*.txt; do
    [ -f "$f" ] || continue
    echo "    $(basename "$f" .txt): $(grep -E '^(axis|warm-up):' "$f" | tr '\n' ';')" >> "$OUT/make-pictures.facts"
done

echo
echo "==== gpu-pictures summary ===="
printf '%s\n' "${summary[@]}"
cat "$OUT/bench_nvtx.facts" "$OUT/bench_nvtx_tool.facts" "$OUT/make-pictures.facts" 2>/dev/null
