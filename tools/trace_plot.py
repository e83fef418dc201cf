#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Pictures from cuweave's traces and benchmark samples (docs/tracing.md).

  trace_plot.py trace TRACE.json -o OUT.png [--title T] [--from US] [--to US]
      A timeline: one row per track of a Chrome trace-event JSON file (what
      cw_trace_write makes): host threads first, then GPU streams, each span
      a bar (nested spans thinner, on top), named where it is wide enough.
  trace_plot.py latency A.csv [B.csv ...] -o OUT.png [--cdf] [--column C]
                [--label NAME ...] [--title T] [--log]
      Latency histograms (or CDFs with --cdf) of benchmark sample CSVs (what
      BENCH_CSV=dir makes a benchmark write: a header line, then one sample a
      line; the column named C, default the last one, in nanoseconds).

The rendering functions (render_trace, render_latency) import matplotlib
only when called, so the reading functions (read_trace, read_samples) work
without it; `python3 -c 'import trace_plot'` needs nothing beyond Python.
"""

import argparse
import csv
import json
import os
import sys
import zlib


def read_trace(path):
    """(tracks, spans) of a trace file: tracks a list of (pid, tid, name) in
    display order (host threads, pid 1, first; then by the sort index), spans
    a list of dicts name, pid, tid, ts, dur (microseconds) of "X" events."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names, order, spans = {}, {}, []
    for e in events:
        ph = e.get("ph")
        key = (e.get("pid", 0), e.get("tid", 0))
        if ph == "M" and e.get("name") == "thread_name":
            names[key] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_sort_index":
            order[key] = e["args"]["sort_index"]
        elif ph == "X":
            spans.append({"name": e["name"], "pid": key[0], "tid": key[1], "ts": float(e["ts"]),
                          "dur": float(e.get("dur", 0))})
    keys = set(names) | {(s["pid"], s["tid"]) for s in spans}
    tracks = sorted(keys, key=lambda k: (k[0], order.get(k, k[1]), k[1]))
    return [(p, t, names.get((p, t), "pid %d tid %d" % (p, t))) for p, t in tracks], spans


def _depths(spans):
    """Nesting depth of each span within its track (0: outermost)."""
    by_track = {}
    for i, s in enumerate(spans):
        by_track.setdefault((s["pid"], s["tid"]), []).append(i)
    depth = [0] * len(spans)
    for idx in by_track.values():
        idx.sort(key=lambda i: (spans[i]["ts"], -spans[i]["dur"]))
        stack = []
        for i in idx:
            s = spans[i]
            while stack and spans[stack[-1]]["ts"] + spans[stack[-1]]["dur"] <= s["ts"]:
                stack.pop()
            depth[i] = len(stack)
            stack.append(i)
    return depth


def _color(name):
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
               "#9c755f", "#bab0ac"]
    return palette[zlib.crc32(name.encode()) % len(palette)]


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def render_trace(path, out, title=None, t_from=None, t_to=None):
    """Renders trace file `path` as a PNG timeline at `out`."""
    tracks, spans = read_trace(path)
    if t_from is not None or t_to is not None:
        lo = t_from if t_from is not None else float("-inf")
        hi = t_to if t_to is not None else float("inf")
        spans = [s for s in spans if s["ts"] + s["dur"] >= lo and s["ts"] <= hi]
    plt = _pyplot()
    row = {(p, t): i for i, (p, t, _) in enumerate(tracks)}
    depth = _depths(spans)
    t0 = min((s["ts"] for s in spans), default=0.0)
    t1 = max((s["ts"] + s["dur"] for s in spans), default=1.0)
    fig, ax = plt.subplots(figsize=(12, 0.5 + 0.45 * max(1, len(tracks))), dpi=110)
    width = max(t1 - t0, 1e-3)
    for s, d in sorted(zip(spans, depth), key=lambda x: x[1]):
        y = row[(s["pid"], s["tid"])]
        h = 0.8 * (0.75 ** d)
        ax.broken_barh([(s["ts"] - t0, max(s["dur"], width * 1e-4))], (y - h / 2, h), facecolors=_color(s["name"]),
                       edgecolors="black", linewidth=0.3)
        if s["dur"] > width * 0.04:
            # outermost spans named at their left end, nested ones in the middle
            # (so a parent's name is not under its children's)
            x = s["ts"] - t0 + (s["dur"] / 2 if d else width * 0.004)
            ax.text(x, y - (h / 2 - 0.12 if d == 0 else 0), s["name"], ha="center" if d else "left", va="center",
                    fontsize=7, clip_on=True)
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([("host: " if p == 1 else "GPU: ") + n for p, _, n in tracks], fontsize=8)
    ax.set_ylim(len(tracks) - 0.5, -0.5)
    ax.set_xlim(0, width)
    ax.set_xlabel("microseconds from the first span")
    ax.grid(axis="x", linewidth=0.3)
    ax.set_title(title or os.path.basename(path), fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def read_samples(path, column=None):
    """The samples of a benchmark CSV (column `column`, default the last), as floats."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    col = header.index(column) if column else len(header) - 1
    return [float(r[col]) for r in body if len(r) > col and r[col]]


def render_latency(paths, out, labels=None, column=None, cdf=False, title=None, log=False):
    """Renders the samples of each CSV in `paths` as overlaid histograms
    (or CDFs) of microseconds at `out`; labels default to the file names."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    series = []
    for i, p in enumerate(paths):
        us = sorted(v / 1e3 for v in read_samples(p, column))
        label = labels[i] if labels and i < len(labels) else os.path.splitext(os.path.basename(p))[0]
        series.append((label, us))
    lo = min((s[0] for _, s in series if s), default=0.0)
    hi = max((s[-1] for _, s in series if s), default=1.0)
    for label, us in series:
        if not us:
            continue
        p50, p99 = us[len(us) // 2], us[min(len(us) - 1, int(len(us) * 0.99))]
        text = "%s (p50 %.2f us, p99 %.2f us, n=%d)" % (label, p50, p99, len(us))
        if cdf:
            ax.step(us, [(k + 1) / len(us) for k in range(len(us))], where="post", label=text)
        else:
            ax.hist(us, bins=80, range=(lo, hi if hi > lo else lo + 1), histtype="stepfilled", alpha=0.45,
                    label=text)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("microseconds")
    ax.set_ylabel("fraction of samples at or below" if cdf else "samples")
    ax.grid(linewidth=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or ("latency CDF" if cdf else "latency histogram"), fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace", help="a trace file as a timeline")
    t.add_argument("trace")
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--title")
    t.add_argument("--from", dest="t_from", type=float, help="first microsecond shown (the file's ts)")
    t.add_argument("--to", dest="t_to", type=float, help="last microsecond shown (the file's ts)")
    lat = sub.add_parser("latency", help="benchmark sample CSVs as histograms or CDFs")
    lat.add_argument("csv", nargs="+")
    lat.add_argument("-o", "--out", required=True)
    lat.add_argument("--cdf", action="store_true")
    lat.add_argument("--column")
    lat.add_argument("--label", action="append")
    lat.add_argument("--title")
    lat.add_argument("--log", action="store_true", help="a logarithmic time axis")
    a = ap.parse_args(argv)
    if a.cmd == "trace":
        render_trace(a.trace, a.out, a.title, a.t_from, a.t_to)
    else:
        render_latency(a.csv, a.out, a.label, a.column, a.cdf, a.title, a.log)
    print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
