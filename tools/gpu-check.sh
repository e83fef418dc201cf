#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Builds cuweave on the GPU machine, runs every test (CPU and GPU) with both
# builds, the GPU tests again under compute-sanitizer, the examples and the
# benchmarks, and prints a short summary last. Logs go to $OUT (or ./gpu-out).
#
# Usage (from the repository root, CMocka .debs in .deps/ as DEVELOPERS.md says):
#   bash tools/gpu-check.sh [quick]
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
# NVLink multicast is off on the machines this runs on: NCCL must not use it.
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "gpu: $(head -1 "$OUT/gpu.txt")"
note "commit: ${CW_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"

# meson build and all tests
. "$(dirname "$0")/gpu-common.sh"  # cw_setup (CW_KEEP_BUILD=1 keeps build-gpu/)
if cw_setup build-gpu -Dbuildtype=release > "$OUT/meson-setup.log" 2>&1 && ninja -C build-gpu > "$OUT/meson-build.log" 2>&1; then
    meson test -C build-gpu --print-errorlogs > "$OUT/meson-test.log" 2>&1
    note "meson test: $(grep -E '^(Ok|Fail|Skipped):' "$OUT/meson-test.log" | tr -s ' ' | tr '\n' ' ')"
    grep -E '^ *[0-9]+/[0-9]+ ' "$OUT/meson-test.log" | grep -v ' OK ' | sed 's/^/  not ok: /' > "$OUT/notok.txt"
    while read -r l; do note "$l"; done < "$OUT/notok.txt"
    # The GPU test binaries print their own summary lines ("# ...").
    for t in build-gpu/tests/test_gpu_*; do
        [ -f "$t" ] && [ -x "$t" ] || continue
        "$t" > "$OUT/$(basename "$t").log" 2>&1; rc=$?
        note "$(basename "$t"): exit $rc, $(grep -c '^\[       OK \]' "$OUT/$(basename "$t").log") ok, $(grep -c '^\[  FAILED  \]' "$OUT/$(basename "$t").log") failed lines"
        grep '^# ' "$OUT/$(basename "$t").log" | head -12 | while read -r l; do echo "    $l"; done >> "$OUT/facts.txt"
    done
else
    note "meson build FAILED (see meson-*.log)"; tail -30 "$OUT/meson-build.log"
fi

# Makefile build and its test run, with the checked-in PTX of the built-in
# kernels embedded (BUILTIN=ptx: what a build machine without nvcc makes), so
# that both images run on the GPU
if make -j16 O=build-gpu-make BUILTIN=ptx > "$OUT/make-build.log" 2>&1; then
    make O=build-gpu-make BUILTIN=ptx check > "$OUT/make-check.log" 2>&1
    note "make check (built-ins from the checked-in PTX): $(tail -1 "$OUT/make-check.log")"
    build-gpu-make/tests/test_gpu_jit > "$OUT/make-test_gpu_jit.log" 2>&1
    note "  make's test_gpu_jit: exit $?, $(grep -h '# built-in kernels' "$OUT/make-test_gpu_jit.log" | head -1)"
else
    note "make build FAILED"; tail -30 "$OUT/make-build.log"
fi

# compute-sanitizer over the GPU tests
if [ "${1:-}" != quick ] && command -v compute-sanitizer >/dev/null; then
    # test_gpu_fault writes through a bad pointer on purpose: memcheck would
    # (rightly) flag it, so it stays out; the hammer runs 2 s instead of 10.
    export CUWEAVE_TEST_HAMMER_S=2
    for tool in memcheck racecheck synccheck; do
        for t in build-gpu/tests/test_gpu_*; do
            [ -f "$t" ] && [ -x "$t" ] || continue
            case $t in *test_gpu_fault) continue ;; esac
            # API errors the tests provoke on purpose (an invalidated
            # capture, a refused update) are not memory errors.
            # CWT_QUICK: test_gpu_resident serves fewer requests and skips its timing checks and child processes
            # racecheck misreads a named barrier over part of a block
            # (tools/probes/racecheck_named_barrier.cu): the fused pipeline's
            # loops whose tiles are whole blocks only
            blk=""; [ $tool = racecheck ] && [ "$(basename "$t")" = test_gpu_pipeline_fused ] && blk=128
            CWT_BLOCK=$blk CWT_QUICK=1 CWT_SANITIZER_TOOL=$tool compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 "$t" > "$OUT/san-$tool-$(basename "$t").log" 2>&1
            note "compute-sanitizer $tool $(basename "$t"): exit $? ($(grep -m1 'SUMMARY' "$OUT/san-$tool-$(basename "$t").log" || echo 'no summary'))"
        done
    done
fi

# Python bindings on the GPU (CuPy interop)
CUWEAVE_LIBRARY=build-gpu/src/libcuweave.so.2 python3 -m unittest discover -s bindings/python/tests \
    -p 'test_gpu_*.py' -v > "$OUT/python-gpu.log" 2>&1
note "python GPU tests: exit $? ($(grep -E '^(OK|FAILED)' "$OUT/python-gpu.log" | tail -1))"

# examples and benchmarks
build-gpu/cuweave-info > "$OUT/cuweave-info.txt" 2>&1; note "cuweave-info: exit $?"
build-gpu/cuweave-info --json > "$OUT/cuweave-info.json" 2>&1; note "cuweave-info --json: exit $?"
build-gpu/examples/devices > "$OUT/example.log" 2>&1; note "example devices: exit $?"
build-gpu/examples/forkjoin >> "$OUT/example.log" 2>&1; note "example forkjoin: exit $?"
CUWEAVE_SERIALIZE=1 build-gpu/examples/forkjoin >> "$OUT/example.log" 2>&1; note "example forkjoin (CUWEAVE_SERIALIZE=1): exit $?"
build-gpu/examples/green >> "$OUT/example.log" 2>&1; note "example green: exit $?"
build-gpu/examples/graph >> "$OUT/example.log" 2>&1; note "example graph: exit $?"
build-gpu/examples/resident >> "$OUT/example.log" 2>&1; note "example resident: exit $?"
build-gpu/examples/resident_handler >> "$OUT/example.log" 2>&1; note "example resident_handler: exit $?"
build-gpu/examples/resident_fused >> "$OUT/example.log" 2>&1; note "example resident_fused: exit $?"
build-gpu/examples/embed >> "$OUT/example.log" 2>&1; note "example embed: exit $?"
# FFmpeg's NVDEC frames (built where FFmpeg's dev packages are: .deps/ has them)
for clip in tests/data/clip_h264.mp4 tests/data/clip_hevc.mp4; do
    if [ -x build-gpu/examples/ffmpeg_decode ]; then
        build-gpu/examples/ffmpeg_decode "$clip" >> "$OUT/example.log" 2>&1; note "example ffmpeg_decode $(basename "$clip"): exit $?"
    else
        note "example ffmpeg_decode: NOT BUILT (FFmpeg's dev packages not found)"
    fi
done
for e in diamond video_pipeline diamond_resident pipeline_fused diamond_cpp resident_cpp fused_cpp multi_gpu multi_process first guide_streams guide_graph guide_resident guide_pipeline; do
    build-gpu/examples/$e >> "$OUT/example.log" 2>&1; note "example $e: exit $?"
done
rm -rf /tmp/cw-example-cache
for run in 1 2; do
    CUWEAVE_CACHE_DIR=/tmp/cw-example-cache build-gpu/examples/kernels >> "$OUT/example.log" 2>&1
    note "example kernels (run $run): exit $?, $(grep -h '^scale<float>' "$OUT/example.log" | tail -1 | sed 's/.*cubin, //')"
done
# Benchmarks: BENCH_RUNS runs each (the figures move between runs).
for b in build-gpu/bench/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    for r in $(seq 1 "${BENCH_RUNS:-2}"); do
        "$b" > "$OUT/bench-$(basename "$b")-$r.log" 2>&1; note "bench $(basename "$b") run $r: exit $?"
    done
done

# logs travel back as one archive (few files come back)
tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null
echo "================ facts"
cat "$OUT/facts.txt" 2>/dev/null
cat "$OUT/example.log"
for b in "$OUT"/bench-*.log; do
    [ -f "$b" ] && { echo "---- $(basename "$b")"; sed -n '/^---- docs\/benchmarks.md ----/,/^---- end ----/p' "$b"; }
done
echo "================ summary"
printf '%s\n' "${summary[@]}"
