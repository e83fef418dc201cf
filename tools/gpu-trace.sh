#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 42 parts 2 and 3 on the GPU machine: what CUPTI is there, the GPU
# trace tests with CUPTI (as found), without it (CUWEAVE_LIBCUPTI a missing
# file: the event path) and under compute-sanitizer (which holds CUPTI: the
# fallback), the CPU trace tests, bench_trace (untraced, events, CUPTI, the
# resident loop's marks; its traces kept for the pictures) and
# bench_resident's f3/f6 rows (the traced workload stage). Logs under $OUT
# (or ./gpu-out), a short summary last. Whole script well under 8 minutes.
#
# Usage (from the repository root, CMocka .debs in .deps/ as tools/gpu-check.sh has them):
#   bash tools/gpu-trace.sh
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
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "gpu: $(head -1 "$OUT/gpu.txt")"
note "commit: ${CW_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"

# Where CUPTI is (cuweave's own search: docs/tracing.md)
{
    echo "CUWEAVE_LIBCUPTI=${CUWEAVE_LIBCUPTI:-(unset)} CUDA_HOME=${CUDA_HOME:-(unset)}"
    ls -l /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* \
        /usr/local/cuda/lib/libcupti.so* 2>/dev/null
    ldconfig -p 2>/dev/null | grep -i cupti
    python3 - <<'PY' 2>/dev/null
import glob, site
for d in site.getsitepackages():
    for f in glob.glob(d + "/nvidia/*/lib/libcupti.so*"):
        print("wheel:", f)
PY
} > "$OUT/cupti-found.txt" 2>&1
note "CUPTI files: $(grep -c 'libcupti' "$OUT/cupti-found.txt") found (cupti-found.txt): $(grep -o '/[^ ]*libcupti.so[^ ]*' "$OUT/cupti-found.txt" | head -3 | tr '\n' ' ')"

. "$(dirname "$0")/gpu-common.sh"  # cw_setup (CW_KEEP_BUILD=1 keeps build-gpu/)
targets="tests/test_gpu_trace tests/test_trace_cpu tests/libfakecuda.so tests/libfakecupti.so tests/libfakenvrtc.so
         tests/libfakenccl.so tests/libfakenccl_old.so bench/bench_trace bench/bench_resident"
if cw_setup build-gpu -Dbuildtype=release > "$OUT/meson-setup.log" 2>&1 &&
    timeout 300 ninja -C build-gpu $targets > "$OUT/meson-build.log" 2>&1; then
    note "build: ok"
else
    note "build FAILED (meson-*.log)"; tail -30 "$OUT/meson-build.log"
    printf '%s\n' "${summary[@]}"; exit 1
fi

run() { # NAME TIMEOUT COMMAND...: runs, notes its exit and its cmocka counts
    local name=$1 limit=$2; shift 2
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    note "$name: exit $rc ($(grep -c '^\[       OK \]' "$OUT/$name.log") ok, $(grep -c '^\[  SKIPPED \]' "$OUT/$name.log") skipped, $(grep -c '^\[  FAILED  \]' "$OUT/$name.log") failed lines)"
    grep -E '^# |^ERROR|^\[  ERROR' "$OUT/$name.log" | head -20 | sed 's/^/    /' >> "$OUT/facts.txt"
}
run test_gpu_trace-cupti 120 build-gpu/tests/test_gpu_trace
run test_gpu_trace-events 120 env CUWEAVE_LIBCUPTI=/nonexistent/libcupti.so.13 build-gpu/tests/test_gpu_trace
if command -v compute-sanitizer > /dev/null; then
    run test_gpu_trace-memcheck 240 env CWT_SANITIZER_TOOL=memcheck compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_trace
fi
run test_trace_cpu 120 build-gpu/tests/test_trace_cpu build-gpu/tests/libfakecuda.so

mkdir -p "$OUT/traces"
run bench_trace 180 env BENCH_TRACE_DIR="$OUT/traces" build-gpu/bench/bench_trace
run bench_resident 240 env BENCH_ITERS="${BENCH_ITERS:-5000}" build-gpu/bench/bench_resident

tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null
echo "================ facts"
cat "$OUT/facts.txt" 2>/dev/null
echo "================ bench_trace"
grep -E '^CUPTI|^  |^\|' "$OUT/bench_trace.log" | head -40
echo "================ bench_resident (traced rows)"
grep -E 'f3|f6|trace \(one stage' "$OUT/bench_resident.log" | head -12
echo "================ summary"
printf '%s\n' "${summary[@]}"
