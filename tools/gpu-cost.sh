#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 43 (host cost per frame) on the GPU machine: builds with meson,
# runs test_gpu_flow, test_gpu_ffmpeg and test_gpu_embed, then bench_streams,
# bench_pipeline (shortened: BENCH_FRAMES and BENCH_RUNS below) and, when
# FFmpeg was found, bench_ffmpeg, three times each, every command under a
# timeout; logs under $OUT, a short summary last. The whole is meant to stay
# under 8 minutes (COST_RUNS=1 for a single round).
#
# Usage (from the repository root, CMocka .debs in .deps/ as tools/gpu-check.sh):
#   bash tools/gpu-cost.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
RUNS=${COST_RUNS:-3}
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "gpu: $(head -1 "$OUT/gpu.txt"); commit $CW_COMMIT"

. "$(dirname "$0")/gpu-common.sh"  # cw_setup (CW_KEEP_BUILD=1 keeps build-gpu/)
if ! (cw_setup build-gpu -Dbuildtype=release -Dexamples=false > "$OUT/meson-setup.log" 2>&1 &&
      timeout 240 ninja -C build-gpu > "$OUT/meson-build.log" 2>&1); then
    tail -30 "$OUT/meson-build.log"
    echo "gpu-cost: meson build FAILED (see $OUT/meson-*.log)"
    exit 1
fi
note "ffmpeg found: $(grep -q 'have_ffmpeg\|libavformat.*YES' "$OUT/meson-setup.log" && echo yes || echo see meson-setup.log)"

# the GPU tests that check ordering by data (and the FFmpeg processor's one-stream path)
for t in test_gpu_flow test_gpu_ffmpeg test_gpu_embed; do
    b=build-gpu/tests/$t
    if [ ! -x "$b" ]; then note "$t: not built"; continue; fi
    timeout 90 "$b" > "$OUT/$t.log" 2>&1; rc=$?
    note "$t: exit $rc, $(grep -c '^\[       OK \]' "$OUT/$t.log") ok, $(grep -c '^\[  FAILED  \]' "$OUT/$t.log") failed lines"
done

# the CPU tests that pin the calls a frame (the same counts on this machine)
for t in test_frame_cost_cpu test_ffmpeg_cpu; do
    b=build-gpu/tests/$t
    [ -x "$b" ] || continue
    timeout 120 "$b" build-gpu/tests/libfakecuda.so > "$OUT/$t.log" 2>&1
    note "$t (fake driver): exit $?; $(grep -c 'driver calls a frame' "$OUT/$t.log") workloads counted"
done

for r in $(seq 1 "$RUNS"); do
    if [ -x build-gpu/bench/bench_streams ]; then
        timeout 60 build-gpu/bench/bench_streams > "$OUT/bench_streams.$r.log" 2>&1
        note "bench_streams run $r (exit $?): $(grep -m1 '^targets:' "$OUT/bench_streams.$r.log")"
        grep -m1 'cw_stream_wait' "$OUT/bench_streams.$r.log" | sed 's/^/    /' >> "$OUT/wait-lines.txt"
    fi
    if [ -x build-gpu/bench/bench_pipeline ]; then
        BENCH_FRAMES=${COST_FRAMES:-600} BENCH_RUNS=${COST_BENCH_RUNS:-3} \
            timeout 90 build-gpu/bench/bench_pipeline > "$OUT/bench_pipeline.$r.log" 2>&1
        note "bench_pipeline run $r (exit $?): $(grep -m1 -o 'met [0-9]* of [0-9]*' "$OUT/bench_pipeline.$r.log") (issue 26's targets)"
    fi
    if [ -x build-gpu/bench/bench_ffmpeg ]; then
        timeout 80 build-gpu/bench/bench_ffmpeg > "$OUT/bench_ffmpeg.$r.log" 2>&1
        note "bench_ffmpeg run $r (exit $?): $(grep -m1 '^target: cuweave' "$OUT/bench_ffmpeg.$r.log")"
    fi
done

# issue 43's targets, per run: the ratio tables as the benches print them
{
    for r in $(seq 1 "$RUNS"); do
        echo "== run $r"
        [ -f "$OUT/bench_pipeline.$r.log" ] && grep -E '^\| (diamond|video|video4k|video16) \|' "$OUT/bench_pipeline.$r.log"
        [ -f "$OUT/bench_pipeline.$r.log" ] && grep -E "calls by entry" "$OUT/bench_pipeline.$r.log" | head -8
        [ -f "$OUT/bench_streams.$r.log" ] && grep -E 'cw_stream_wait' "$OUT/bench_streams.$r.log" | head -3
        [ -f "$OUT/bench_ffmpeg.$r.log" ] && grep -E 'latency|p50|p99' "$OUT/bench_ffmpeg.$r.log" | grep -E 'cuweave|hand' | head -12
    done
} > "$OUT/targets.txt"

echo "==== gpu-cost summary ===="
printf '%s\n' "${summary[@]}"
echo "issue 43 targets: pipelines (a)/(c) host enqueue one at a time <= 1.05 (diamond, video, video4k, video16),"
echo "  cw_stream_wait p50 <= 1.03, FFmpeg latency p50 <= 1.05 and p99 <= 1.2, fps >= 0.99: see $OUT/targets.txt"
head -60 "$OUT/targets.txt"
