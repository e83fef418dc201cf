#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tools/trace_plot.py on traces made with the fake driver and on small
# traces written here. Without matplotlib (reading and laying out need none),
# its --describe output: rows named by the traces' names with the library's
# default thread and stream names numbered 1, 2, ... (never a raw thread id),
# the time axis starting at the first "request", after a warm-up (cut, or
# shaded with --show-warmup), or at the first span as asked, the legend, and
# the latency axis over the samples' p0.1 .. p99.9 with the outlier counted
# beyond it. With matplotlib: every picture rendered and each PNG checked
# (its signature, an IHDR chunk, sensible sizes).
# Usage: check-trace-plot.sh SRCDIR TEST_TRACE_CPU LIBFAKECUDA
# The Python with matplotlib: $CUWEAVE_PLOT_PYTHON, else the virtual
# environment tools/setup.sh makes ($CUWEAVE_PLOT_VENV, default
# ~/.cache/cuweave-dev/plot-venv), else python3. Without matplotlib the
# PNGs are skipped (exit 77 after the layout checks pass), or a failure
# when CUWEAVE_TESTS_NEED_MATPLOTLIB=1 (CI).
set -eu
src=$1 exe=$2 fake=$3
py=""
for p in "${CUWEAVE_PLOT_PYTHON:-}" "${CUWEAVE_PLOT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/plot-venv}/bin/python3" python3; do
    [ -n "$p" ] || continue
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' >/dev/null 2>&1; then py=$p; break; fi
done
python3 -c "import sys; sys.path.insert(0, '$src/tools'); import trace_plot; trace_plot.read_trace" \
    || { echo "FAIL: trace_plot.py does not import without matplotlib"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
TRACE_OUT=$dir "$exe" "$fake" >"$dir/test.log" 2>&1 || { cat "$dir/test.log"; echo "FAIL: $exe"; exit 1; }
plot="$src/tools/trace_plot.py"
fail=0
want() { # FILE PATTERN WHAT
    grep -q -- "$2" "$1" || { echo "FAIL: $3 (no line matching: $2)"; cat "$1"; fail=1; }
}
wantnot() { # FILE PATTERN WHAT
    if grep -q -- "$2" "$1"; then echo "FAIL: $3 (a line matches: $2)"; cat "$1"; fail=1; fi
}

# ---- the layout, without matplotlib
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def meta(pid, tid, name, k):
    return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": k}}]
def x(name, pid, tid, ts, dur):
    return {"name": name, "cat": "gpu" if pid == 2 else "host", "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur}
# Requests to a resident loop after a setup span: the axis starts at the first request.
ev = meta(1, 1, "requests (main thread)", 1) + meta(2, 2, "loop 0: iterations", 2)
ev += [x("setup", 1, 1, 0.0, 500.0)]
for i in range(3):
    ev += [x("request", 1, 1, 600.0 + 100 * i, 50.0), x("iteration", 2, 2, 605.0 + 100 * i, 40.0)]
json.dump({"displayTimeUnit": "ns", "traceEvents": ev}, open(d + "/req.json", "w"))
# Round trips: 1000 between 5 and 6 us and one of 42 us; 500 between 9 and 9.9 us.
with open(d + "/a.csv", "w") as f:
    f.write("sample,ns\n")
    for i in range(1000):
        f.write("%d,%d\n" % (i, 5000 + i))
    f.write("1000,42000\n")
with open(d + "/b.csv", "w") as f:
    f.write("sample,ns\n")
    for i in range(500):
        f.write("%d,%d\n" % (i, 9000 + 2 * i - i % 2))
PY
d=$dir
python3 "$plot" trace "$d/pipeline.json" --describe >"$d/pipeline.txt"
want "$d/pipeline.txt" '^row [0-9]*: host: executor thread 1 (file: "executor thread [0-9]*"' "the pipeline's executor threads numbered"
want "$d/pipeline.txt" '^row [0-9]*: host: executor thread 2 ' "the second executor thread"
for op in src left right sink; do want "$d/pipeline.txt" "^row [0-9]*: GPU: $op (file: \"$op\"" "the stream named after operator $op"; done
wantnot "$d/pipeline.txt" '^row [0-9]*: [^(]*[0-9][0-9][0-9]' "a raw thread or stream id in a row's name"
want "$d/pipeline.txt" '^legend: .*src' "the legend names the operators"
python3 "$plot" trace "$d/resident.json" --describe >"$d/resident.txt"
want "$d/resident.txt" '^row 0: GPU: loop 0: iterations ' "the resident loop's tracks"
want "$d/resident.txt" '^row 2: GPU: loop 0: decode ' "the resident loop's stage tracks"

warm=$src/tests/data/trace-warmup.json  # a diamond as bench_trace makes it (tests/data/README.md)
python3 "$plot" trace "$warm" --describe >"$d/warm.txt"
want "$d/warm.txt" '^row 0: host: executor thread 1 (file: "executor thread 5330", 12 spans)' "executor thread 5330 is row 0, number 1"
want "$d/warm.txt" '^row 1: host: executor thread 2 (file: "executor thread 5329"' "executor thread 5329 is number 2"
want "$d/warm.txt" '^row 2: host: thread 1 (file: "thread 5320"' "an unnamed thread numbered"
want "$d/warm.txt" '^row 3: GPU: stream 1 (file: "stream 94123456"' "an unnamed stream numbered"
wantnot "$d/warm.txt" 'never used' "a track with no span"
want "$d/warm.txt" '^warm-up: cut 0.000 .. 345.000 us ("A" 345.0 us, 9.1x its median 38.0 us)' "the warm-up found and cut"
want "$d/warm.txt" '^axis: 347.000 .. 948.000 us of the file, from the first span after the warm-up' "the axis after the warm-up"
want "$d/warm.txt" '^legend: D, B, A, in-flight wait' "the legend by time spent in the window"
python3 "$plot" trace "$warm" --describe --show-warmup >"$d/warm-shaded.txt"
want "$d/warm-shaded.txt" '^warm-up: shaded 0.000 .. 345.000' "the warm-up shaded"
want "$d/warm-shaded.txt" '^axis: 0.000 .. ' "a shaded warm-up is not cut"
python3 "$plot" trace "$warm" --describe --start first >"$d/warm-first.txt"
want "$d/warm-first.txt" '^warm-up: none' "--start first cuts nothing"
want "$d/warm-first.txt" '^axis: 0.000 .. 948.000 us of the file, from the first span$' "--start first"
python3 "$plot" trace "$warm" --describe --start D >"$d/warm-d.txt"
want "$d/warm-d.txt" '^axis: 347.000 .. .*from the first "D" span' "--start NAME"
if python3 "$plot" trace "$warm" --describe --start nosuch >"$d/nosuch.txt" 2>&1; then
    echo "FAIL: --start with a name no span has succeeded"; fail=1
fi
want "$d/nosuch.txt" 'no span is called "nosuch"' "--start with an unknown name says so"
python3 "$plot" trace "$d/req.json" --describe >"$d/req.txt"
want "$d/req.txt" '^axis: 600.000 .. 850.000 us of the file, from the first "request" span' "the axis at the first request"
want "$d/req.txt" '^row 0: host: requests (main thread) ' "a thread named by cw_trace_name_thread"
python3 "$plot" latency "$d/a.csv" "$d/b.csv" --label "loop" --label "graph" --describe >"$d/lat.txt"
want "$d/lat.txt" '^series 0: loop (n=1001, p50 5.50 us, p99 5.99 us, 1 beyond the axis)' "the outlier beyond the axis"
want "$d/lat.txt" '^series 1: graph (n=500, .* 0 beyond the axis)' "the second series inside the axis"
want "$d/lat.txt" '^axis: 5.001 .. 9.997 us (p0.1 .. p99.9 of all 1501 samples)' "the axis from p0.1 to p99.9"
python3 "$plot" latency "$d/a.csv" --full-range --describe >"$d/lat-full.txt"
want "$d/lat-full.txt" '^axis: 5.000 .. 42.000 us (all 1001 samples)' "--full-range"
[ $fail -eq 0 ] || exit 1
echo "trace-plot: the layouts say what they should (names, axes, warm-up, legend)"

# ---- the pictures, with matplotlib
if [ -z "$py" ]; then
    if [ "${CUWEAVE_TESTS_NEED_MATPLOTLIB:-0}" = 1 ]; then echo "FAIL: no Python with matplotlib"; exit 1; fi
    echo "SKIP: the PNGs: no Python with matplotlib (tools/setup.sh installs it; or set CUWEAVE_PLOT_PYTHON)"
    exit 77
fi
"$py" "$plot" trace "$d/pipeline.json" -o "$d/pipeline.png" --title "diamond (fake driver)"
"$py" "$plot" trace "$d/resident.json" -o "$d/resident.png"
"$py" "$plot" trace "$warm" -o "$d/warm.png"
"$py" "$plot" trace "$warm" -o "$d/warm-shaded.png" --show-warmup
"$py" "$plot" trace "$d/req.json" -o "$d/req.png"
"$py" "$plot" latency "$d/a.csv" "$d/b.csv" --cdf -o "$d/cdf.png"
"$py" "$plot" latency "$d/a.csv" -o "$d/hist.png"
python3 - "$d"/pipeline.png "$d"/resident.png "$d"/warm.png "$d"/warm-shaded.png "$d"/req.png "$d"/cdf.png "$d"/hist.png <<'PY'
import struct, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) > 1000, (path, len(data))
    assert data[:8] == b"\x89PNG\r\n\x1a\n", (path, "not a PNG signature")
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, (path, kind)
    w, h = struct.unpack(">II", data[16:24])
    assert 200 <= w <= 4000 and 100 <= h <= 4000, (path, w, h)
    assert data[-8:-4] == b"IEND", (path, "no IEND chunk")
    print("%s: PNG %dx%d, %d bytes" % (path.rsplit("/", 1)[-1], w, h, len(data)))
PY
echo "trace-plot: every PNG valid"
