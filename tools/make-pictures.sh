#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The pictures of the docs (docs/tracing.md, "Pictures"), from real runs. On
# the GPU machine:
#
#   sh tools/make-pictures.sh [DIR]
#
# builds the benchmarks (make O=build/make benches) unless BENCH_DIR names
# built ones, runs them with BENCH_TRACE_DIR and BENCH_CSV set, and writes to
# DIR (default $OUT/pictures when $OUT is set, else build/pictures):
#   diamond.json resident.json green.json   bench_trace
#   pipeline-diamond.json pipeline-video.json   bench_pipeline
#   vmaf-576x324.json vmaf-1920x1080.json   bench_vmaf (cuweave's variant)
#   csv/bench_resident-*.csv   bench_resident's round trips
#   bench_*.txt   their output
# then renders the PNGs into DIR/img when matplotlib imports. Without it
# (the GPU machine may lack it), bring DIR back and render anywhere with
#
#   sh tools/make-pictures.sh --render DIR [IMGDIR]
#
# (IMGDIR default DIR/img; docs/img for the docs), which runs only
# tools/trace_plot.py. PYTHON names the Python with matplotlib (default:
# python3). Each PNG gets its layout beside it (NAME.txt: trace_plot.py
# --describe: the rows, where the time axis starts and why, the warm-up cut).
# The pictures and the pages that show them:
#   trace-diamond.png            pipelines.md, tracing.md: B and D overlap
#   trace-pipeline-diamond.png   tracing.md: bench_pipeline's diamond
#   trace-video.png              tracing.md: the video pipeline's picture streams
#   trace-vmaf.png               embedding.md: libvmaf's per-picture uploads (ADR-0378)
#   trace-resident.png           resident.md, tracing.md: requests, iterations, stages
#   trace-green.png              green.md, tracing.md: a small kernel beside a hog
#   latency-resident-vs-graph-{cdf,hist}.png   resident.md, tracing.md
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}

render() { # DIR IMGDIR
    dir=$1 img=$2
    mkdir -p "$img"
    # plot OUT.png ARGS...: the picture and its layout (OUT.txt)
    plot() {
        out=$1
        shift
        "$py" "$root/tools/trace_plot.py" "$@" -o "$out" --describe > "${out%.png}.txt"
        echo "wrote $out"
    }
    [ -f "$dir/diamond.json" ] && plot "$img/trace-diamond.png" trace "$dir/diamond.json" --start warmup \
        --title "diamond A -> (B, D) -> C, two executor threads: B and D overlap on the GPU and on the host (bench_trace)"
    [ -f "$dir/pipeline-diamond.json" ] && plot "$img/trace-pipeline-diamond.png" trace "$dir/pipeline-diamond.json" \
        --start warmup --title "bench_pipeline's diamond, (a) cuweave, 8 pipelined frames"
    [ -f "$dir/pipeline-video.json" ] && plot "$img/trace-video.png" trace "$dir/pipeline-video.json" --start warmup \
        --title "video pipeline: each picture's upload and blur on its own stream, the SAD after both (bench_pipeline)"
    [ -f "$dir/vmaf-576x324.json" ] && plot "$img/trace-vmaf.png" trace "$dir/vmaf-576x324.json" --start warmup \
        --title "libvmaf's per-picture uploads (ADR-0378) through cuweave, 576x324, 8 frames, 4 in flight (bench_vmaf)"
    [ -f "$dir/resident.json" ] && plot "$img/trace-resident.png" trace "$dir/resident.json" \
        --title "resident loop: each request holds one iteration, the iteration its three stages (bench_trace)"
    [ -f "$dir/green.json" ] && plot "$img/trace-green.png" trace "$dir/green.json" --start first \
        --title "a 1-block kernel beside a hog: same context, then its own 16-SM partition (bench_trace)"
    a=$(ls "$dir"/csv/bench_resident-*-a_cw_resident_back_to_back.csv 2>/dev/null | head -1 || true)
    c=$(ls "$dir"/csv/bench_resident-*-c_raw_graph_relaunch_sync.csv 2>/dev/null | head -1 || true)
    if [ -n "$a" ] && [ -n "$c" ]; then
        plot "$img/latency-resident-vs-graph-cdf.png" latency "$a" "$c" --cdf \
            --label "resident loop (cw_resident_data_ready + wait_result)" \
            --label "cuGraphLaunch + cuStreamSynchronize" \
            --title "round trip, resident loop vs cuGraphLaunch (bench_resident a, c)"
        plot "$img/latency-resident-vs-graph-hist.png" latency "$a" "$c" --label "resident loop" \
            --label "cuGraphLaunch + sync" --title "round trip histogram (bench_resident a, c)"
    fi
    echo "make-pictures: PNGs in $img"
}

if [ "${1:-}" = "--render" ]; then
    [ $# -ge 2 ] || { echo "usage: $0 --render DIR [IMGDIR]" >&2; exit 2; }
    render "$2" "${3:-$2/img}"
    exit 0
fi

dir=${1:-${OUT:+$OUT/pictures}}
dir=${dir:-build/pictures}
mkdir -p "$dir/csv"
dir=$(cd "$dir" && pwd)
cd "$root"
if [ -z "${BENCH_DIR:-}" ]; then
    make -j"$(nproc 2>/dev/null || echo 4)" O=build/make benches >/dev/null
    BENCH_DIR=build/make/bench
fi
BENCH_TRACE_DIR=$dir BENCH_CSV=$dir/csv "$BENCH_DIR/bench_trace" | tee "$dir/bench_trace.txt"
BENCH_TRACE_DIR=$dir BENCH_FRAMES=${BENCH_FRAMES:-200} BENCH_RUNS=${BENCH_RUNS:-2} "$BENCH_DIR/bench_pipeline" \
    > "$dir/bench_pipeline.txt" 2>&1 || echo "make-pictures: bench_pipeline exited $? (see $dir/bench_pipeline.txt)"
BENCH_TRACE_DIR=$dir BENCH_FRAMES=${BENCH_VMAF_FRAMES:-400} "$BENCH_DIR/bench_vmaf" \
    > "$dir/bench_vmaf.txt" 2>&1 || echo "make-pictures: bench_vmaf exited $? (see $dir/bench_vmaf.txt)"
BENCH_CSV=$dir/csv "$BENCH_DIR/bench_resident" > "$dir/bench_resident.txt" 2>&1 \
    || echo "make-pictures: bench_resident exited $? (see $dir/bench_resident.txt)"
ls -l "$dir" "$dir/csv"
if "$py" -c 'import matplotlib' >/dev/null 2>&1; then
    render "$dir" "$dir/img"
else
    echo "make-pictures: no matplotlib here: bring $dir back and run: sh tools/make-pictures.sh --render $dir docs/img"
fi
