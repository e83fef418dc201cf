#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tools/trace_plot.py on traces made with the fake driver: test_trace_cpu
# keeps its trace files (TRACE_OUT), trace_plot.py renders the pipeline's
# and the resident loop's as timelines and two sample CSVs as a CDF, and
# each PNG is checked: its signature, an IHDR chunk, and sensible sizes.
# Also that trace_plot.py imports without matplotlib (reading needs none).
# Usage: check-trace-plot.sh SRCDIR TEST_TRACE_CPU LIBFAKECUDA
# The Python with matplotlib: $CUWEAVE_PLOT_PYTHON, else the virtual
# environment tools/setup.sh makes ($CUWEAVE_PLOT_VENV, default
# ~/.cache/cuweave-dev/plot-venv), else python3. Without matplotlib: skipped
# (exit 77), or a failure when CUWEAVE_TESTS_NEED_MATPLOTLIB=1 (CI).
set -eu
src=$1 exe=$2 fake=$3
py=""
for p in "${CUWEAVE_PLOT_PYTHON:-}" "${CUWEAVE_PLOT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/plot-venv}/bin/python3" python3; do
    [ -n "$p" ] || continue
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' >/dev/null 2>&1; then py=$p; break; fi
done
python3 -c "import sys; sys.path.insert(0, '$src/tools'); import trace_plot; trace_plot.read_trace" \
    || { echo "FAIL: trace_plot.py does not import without matplotlib"; exit 1; }
if [ -z "$py" ]; then
    if [ "${CUWEAVE_TESTS_NEED_MATPLOTLIB:-0}" = 1 ]; then echo "FAIL: no Python with matplotlib"; exit 1; fi
    echo "SKIP: no Python with matplotlib (tools/setup.sh installs it; or set CUWEAVE_PLOT_PYTHON)"
    exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
TRACE_OUT=$dir "$exe" "$fake" >"$dir/test.log" 2>&1 || { cat "$dir/test.log"; echo "FAIL: $exe"; exit 1; }
"$py" "$src/tools/trace_plot.py" trace "$dir/pipeline.json" -o "$dir/pipeline.png" --title "diamond (fake driver)"
"$py" "$src/tools/trace_plot.py" trace "$dir/resident.json" -o "$dir/resident.png"
printf 'sample,ns\n0,5000\n1,5200\n2,6100\n3,4900\n' >"$dir/a.csv"
printf 'sample,ns\n0,9000\n1,9900\n2,8800\n' >"$dir/b.csv"
"$py" "$src/tools/trace_plot.py" latency "$dir/a.csv" "$dir/b.csv" --cdf -o "$dir/cdf.png"
"$py" "$src/tools/trace_plot.py" latency "$dir/a.csv" -o "$dir/hist.png"
python3 - "$dir"/pipeline.png "$dir"/resident.png "$dir"/cdf.png "$dir"/hist.png <<'PY'
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
