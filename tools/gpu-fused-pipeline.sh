#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 39, "operators become stages": on the GPU machine, builds what the
# fused pipelines need (meson, release) and runs, each with a timeout: the
# GPU test of the fused diamond (tests/test_gpu_pipeline_fused.c) and its
# Python counterpart (bindings/python/tests/test_gpu_pipeline_fused.py), the
# dataflow mode's own GPU test (a regression check), the CPU tests of fused
# pipelines and of the C++ front end (the real NVRTC compiles the generated
# source there), the two examples, and the new GPU test under
# compute-sanitizer (memcheck, racecheck, synccheck; CWT_QUICK=1). Logs go
# to $OUT (or ./gpu-out); a short summary is printed last. Under 8 minutes.
#
# Usage (from the repository root, CMocka .debs in .deps/ as tools/gpu-check.sh takes them):
#   bash tools/gpu-fused-pipeline.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
summary=()
note() { summary+=("$*"); }
t_start=$(date +%s)

if ls .deps/*.deb >/dev/null 2>&1; then
    for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
    export PKG_CONFIG_SYSROOT_DIR=/opt/deps
    export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig
    export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}  # the real NVRTC for the CPU tests' compile check
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "gpu: $(head -1 "$OUT/gpu.txt")"
note "commit: ${CW_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"

targets="tests/test_gpu_pipeline_fused tests/test_gpu_resident_dataflow tests/test_pipeline_fused_cpu
         tests/test_resident_dataflow_cpu tests/test_cpp tests/test_cpp_noexcept tests/libfakecuda.so
         tests/libfakenvrtc.so tests/libfakenccl.so tests/libfakenccl_old.so examples/pipeline_fused examples/fused_cpp"
. "$(dirname "$0")/gpu-common.sh"  # cw_setup (CW_KEEP_BUILD=1 keeps build-gpu/)
if ! { cw_setup build-gpu -Dbuildtype=release -Dbench=false -Dexamples=true > "$OUT/meson-setup.log" 2>&1 &&
       timeout 240 ninja -C build-gpu $targets > "$OUT/meson-build.log" 2>&1; }; then
    echo "================ summary"
    echo "build FAILED (meson-setup.log, meson-build.log):"
    tail -30 "$OUT/meson-build.log" "$OUT/meson-setup.log" 2>/dev/null
    exit 1
fi
note "built in $(( $(date +%s) - t_start )) s"

run() {  # run NAME LIMIT_S CMD...: its log in $OUT/NAME.log, its exit status and OK/FAILED counts noted
    local name=$1 limit=$2
    shift 2
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    note "$name: exit $rc$([ $rc -eq 124 ] && echo ' (TIMED OUT)'), $(grep -c '^\[       OK \]' "$OUT/$name.log") ok, $(grep -c '^\[  FAILED  \]' "$OUT/$name.log") failed"
    grep '^# ' "$OUT/$name.log" | head -12 | sed 's/^/    /' >> "$OUT/facts.txt"
}
fake=build-gpu/tests/libfakecuda.so
run test_gpu_pipeline_fused 150 build-gpu/tests/test_gpu_pipeline_fused
run test_gpu_resident_dataflow 150 build-gpu/tests/test_gpu_resident_dataflow
run test_pipeline_fused_cpu 120 build-gpu/tests/test_pipeline_fused_cpu "$fake"
grep -q 'SKIP: no real NVRTC' "$OUT/test_pipeline_fused_cpu.log" && note "  (the real NVRTC was not found: the compile check skipped)"
run test_resident_dataflow_cpu 120 build-gpu/tests/test_resident_dataflow_cpu "$fake"
run test_cpp 60 build-gpu/tests/test_cpp "$fake"
run test_cpp_noexcept 60 build-gpu/tests/test_cpp_noexcept "$fake"
for e in pipeline_fused fused_cpp; do
    timeout 60 build-gpu/examples/$e > "$OUT/example-$e.log" 2>&1
    note "example $e: exit $?"
    sed 's/^/    /' "$OUT/example-$e.log" | tail -4 >> "$OUT/facts.txt"
done
CUWEAVE_LIBRARY=build-gpu/src/libcuweave.so.2 timeout 90 python3 -m unittest discover -s bindings/python/tests \
    -p 'test_gpu_pipeline_fused.py' -v > "$OUT/python-gpu.log" 2>&1
note "python test_gpu_pipeline_fused.py: exit $? ($(grep -E '^(OK|FAILED)' "$OUT/python-gpu.log" | tail -1))"
if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck synccheck; do
        # racecheck misreads a named barrier over part of a block (the sum
        # stage's 128 threads of 256; tools/probes/racecheck_named_barrier.cu):
        # it runs the loops whose tiles are whole blocks (CWT_BLOCK=128)
        blk=""; [ $tool = racecheck ] && blk=128
        CWT_BLOCK=$blk CWT_LINEINFO=1 CWT_QUICK=1 CWT_SANITIZER_TOOL=$tool timeout 100 compute-sanitizer --tool $tool --report-api-errors no \
            --error-exitcode 99 build-gpu/tests/test_gpu_pipeline_fused > "$OUT/san-$tool.log" 2>&1
        rc=$?
        note "compute-sanitizer $tool test_gpu_pipeline_fused: exit $rc$([ $rc -eq 124 ] && echo ' (TIMED OUT)') ($(grep -m1 'SUMMARY' "$OUT/san-$tool.log" || echo 'no summary'))"
    done
else
    note "compute-sanitizer: not found"
fi
note "total $(( $(date +%s) - t_start )) s"

tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null
echo "================ facts"
cat "$OUT/facts.txt" 2>/dev/null
echo "================ summary"
printf '%s\n' "${summary[@]}"
