#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The pictures of docs/tracing.md, from real runs (docs/tracing.md,
# "Pictures"). On the GPU machine:
#
#   sh tools/make-pictures.sh [DIR]
#
# builds the benchmarks (make O=build/make benches) unless BENCH_DIR names
# built ones, runs them with BENCH_TRACE_DIR and BENCH_CSV set, and writes to
# DIR (default $OUT/pictures when $OUT is set, else build/pictures):
#   diamond.json resident.json green.json   bench_trace
#   pipeline-diamond.json pipeline-video.json   bench_pipeline
#   csv/bench_resident-*.csv   bench_resident's round trips
#   bench_trace.txt bench_pipeline.txt bench_resident.txt   their output
# then renders the PNGs into DIR/img when matplotlib imports. Without it
# (the GPU machine may lack it), bring DIR back and render anywhere with
#
#   sh tools/make-pictures.sh --render DIR [IMGDIR]
#
# (IMGDIR default DIR/img; docs/img for the docs), which runs only
# tools/trace_plot.py. PYTHON names the Python with matplotlib (default:
# python3).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}

render() { # DIR IMGDIR
    dir=$1 img=$2
    mkdir -p "$img"
    plot() { "$py" "$root/tools/trace_plot.py" "$@"; }
    [ -f "$dir/diamond.json" ] && plot trace "$dir/diamond.json" -o "$img/trace-diamond.png" \
        --title "diamond A -> (B, D) -> C: B and D overlap (bench_trace, 2 executor threads)"
    [ -f "$dir/pipeline-diamond.json" ] && plot trace "$dir/pipeline-diamond.json" -o "$img/trace-pipeline-diamond.png" \
        --title "bench_pipeline diamond, (a) cuweave, 8 pipelined frames"
    [ -f "$dir/pipeline-video.json" ] && plot trace "$dir/pipeline-video.json" -o "$img/trace-video.png" \
        --title "video pipeline: per-picture streams (bench_pipeline, 8 pipelined frames)"
    [ -f "$dir/resident.json" ] && plot trace "$dir/resident.json" -o "$img/trace-resident.png" \
        --title "resident loop: iterations and their stages (bench_trace)"
    [ -f "$dir/green.json" ] && plot trace "$dir/green.json" -o "$img/trace-green.png" \
        --title "a 1-block kernel beside a hog: same context, then its own 16-SM partition (bench_trace)"
    a=$(ls "$dir"/csv/bench_resident-*-a_cw_resident_back_to_back.csv 2>/dev/null | head -1 || true)
    c=$(ls "$dir"/csv/bench_resident-*-c_raw_graph_relaunch_sync.csv 2>/dev/null | head -1 || true)
    if [ -n "$a" ] && [ -n "$c" ]; then
        plot latency "$a" "$c" --cdf --label "resident loop (cw_resident_data_ready + wait_result)" \
            --label "cuGraphLaunch + cuStreamSynchronize" -o "$img/latency-resident-vs-graph-cdf.png" \
            --title "round trip, resident loop vs cuGraphLaunch (bench_resident a, c)"
        plot latency "$a" "$c" --label "resident loop" --label "cuGraphLaunch + sync" \
            -o "$img/latency-resident-vs-graph-hist.png" --title "round trip histogram (bench_resident a, c)"
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
BENCH_CSV=$dir/csv "$BENCH_DIR/bench_resident" > "$dir/bench_resident.txt" 2>&1 \
    || echo "make-pictures: bench_resident exited $? (see $dir/bench_resident.txt)"
ls -l "$dir" "$dir/csv"
if "$py" -c 'import matplotlib' >/dev/null 2>&1; then
    render "$dir" "$dir/img"
else
    echo "make-pictures: no matplotlib here: bring $dir back and run: sh tools/make-pictures.sh --render $dir docs/img"
fi
