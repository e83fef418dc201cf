#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Pictures from cuweave's traces and benchmark samples (docs/tracing.md).

  trace_plot.py trace TRACE.json [-o OUT.png] [--title T] [--start WHERE]
                [--show-warmup] [--from US] [--to US] [--describe]
      A timeline: one row per track of a Chrome trace-event JSON file (what
      cw_trace_write makes), host threads first, then GPU streams, each row
      named by the trace's own names (cw_trace_name_stream, cw_trace_name_
      thread, the operators'; the library's default names, "thread <id>",
      "executor thread <id>", "stream <id>", are numbered 1, 2, ... in row
      order instead of by raw ids); each span a bar coloured by its name
      (nested spans thinner, on top), labelled where its name fits, and a
      legend of the names. The time axis starts (--start):
        auto     at the first span named "request" when there is one, else
                 after the warm-up (below), else at the first span;
        warmup   after the warm-up: a first span of a name seen 3 or more
                 times that lasted more than 3 times that name's median (a
                 first call that loads its kernel), with every span that
                 began while it ran; the time cut is said on the picture;
        first    at the first span (nothing cut);
        NAME     at the first span called NAME.
      --show-warmup shades the warm-up instead of cutting it. --from/--to
      (microseconds of the file) override the window.
  trace_plot.py latency A.csv [B.csv ...] [-o OUT.png] [--cdf] [--column C]
                [--label NAME ...] [--title T] [--log] [--full-range]
                [--describe]
      Latency histograms (or CDFs with --cdf) of benchmark sample CSVs (what
      BENCH_CSV=dir makes a benchmark write: a header line, then one sample a
      line; the column named C, default the last one, in nanoseconds). The
      time axis spans the pooled samples' p0.1 to p99.9 (--full-range: all
      of them); each series says how many of its samples lie beyond it.

--describe prints the layout decisions (rows and their names, the time
window and why, the warm-up, the legend, the labels; or the latency axis)
and, without -o, renders nothing. Reading, laying out and describing need
only Python; rendering (-o) imports matplotlib, only then
(`python3 -c 'import trace_plot'` needs nothing beyond Python).
"""

import argparse
import csv
import json
import math
import os
import re
import sys

# The picture's geometry (inches, dots per inch), shared by the layout's
# label decisions and the rendering, so --describe says what is drawn.
DPI = 110
FIG_W = 13.0
AX_LEFT, AX_RIGHT = 0.17, 0.83  # the axes, in figure fractions (the legend right of them)
LABEL_PT = 7.0
CHAR_EM = 0.56  # an average character's width, in ems of the label font
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]
LEGEND_MAX = 16
DEFAULT_NAME = re.compile(r"^(thread|executor thread|stream) (\d+)$")


def read_trace(path):
    """(tracks, spans) of a trace file: tracks a list of (pid, tid, name) in
    display order (host threads, pid 1, first; then by the sort index), spans
    a list of dicts name, pid, tid, ts, dur (microseconds) of "X" events.
    Tracks with no span are left out."""
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
    keys = {(s["pid"], s["tid"]) for s in spans}
    tracks = sorted(keys, key=lambda k: (k[0], order.get(k, k[1]), k[1]))
    return [(p, t, names.get((p, t), "pid %d tid %d" % (p, t))) for p, t in tracks], spans


def display_names(tracks):
    """The row labels: "host: " or "GPU: " and the track's name, the
    library's default names ("thread 5330", "executor thread 5330", "stream
    94123") numbered by their order among the rows of that kind instead."""
    seen, out = {}, []
    for p, _, name in tracks:
        m = DEFAULT_NAME.match(name)
        if m:
            kind = m.group(1)
            seen[kind] = seen.get(kind, 0) + 1
            name = "%s %d" % (kind, seen[kind])
        out.append(("host: " if p == 1 else "GPU: ") + name)
    return out


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


def find_warmup(spans):
    """The warm-up at a trace's start, or None: the earliest first span of
    a name seen 3 or more times that lasted more than 3 times the median of
    that name's others (and by more than 2 % of the trace), with the first
    spans of the same kind that overlap it. A dict begin, end, name, dur,
    median (microseconds)."""
    if not spans:
        return None
    lo = min(s["ts"] for s in spans)
    hi = max(s["ts"] + s["dur"] for s in spans)
    by_name = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    found = []
    for name, ss in by_name.items():
        if len(ss) < 3:
            continue
        ss = sorted(ss, key=lambda s: s["ts"])
        rest = sorted(s["dur"] for s in ss[1:])
        med = rest[len(rest) // 2]
        first = ss[0]
        if first["dur"] > 3.0 * med and first["dur"] - med > 0.02 * (hi - lo):
            found.append((first, med))
    if not found:
        return None
    found.sort(key=lambda x: x[0]["ts"])
    first, med = found[0]
    end = first["ts"] + first["dur"]
    for s, _ in found[1:]:  # the other slow first calls of the same start
        if s["ts"] < end:
            end = max(end, s["ts"] + s["dur"])
    return {"begin": lo, "end": end, "name": first["name"], "dur": first["dur"], "median": med}


def layout_trace(tracks, spans, start="auto", show_warmup=False, t_from=None, t_to=None):
    """What the timeline shows: a dict with rows (display names), the window
    t0..t1 (microseconds of the file) and why, the warm-up, the spans drawn
    (with their row and depth), the legend (names in colour order) and the
    labels (span index: the text drawn on it)."""
    depth = _depths(spans)
    lo = min((s["ts"] for s in spans), default=0.0)
    hi = max((s["ts"] + s["dur"] for s in spans), default=1.0)
    warm = find_warmup(spans)
    reason, t0 = "the first span", lo
    cut = None
    if start == "auto":
        req = [s["ts"] for s in spans if s["name"] == "request"]
        if req:
            t0, reason = min(req), 'the first "request" span'
        elif warm:
            cut = warm
    elif start == "warmup":
        if warm:
            cut = warm
        else:
            reason = "the first span (no warm-up found)"
    elif start != "first":
        named = [s["ts"] for s in spans if s["name"] == start]
        if not named:
            raise SystemExit('trace_plot: no span is called "%s" (--start)' % start)
        t0, reason = min(named), 'the first "%s" span' % start
    shaded = None
    if cut:
        if show_warmup:
            shaded, reason = cut, "the first span (the warm-up shaded)"
        else:
            after = [s["ts"] for s in spans if s["ts"] >= cut["end"]]
            t0 = min(after) if after else cut["end"]
            reason = "the first span after the warm-up"
    if t_from is not None:
        t0, reason = t_from, "the file's %.3f us (--from)" % t_from
    t1 = t_to if t_to is not None else hi
    width = max(t1 - t0, 1e-3)
    pad = 0.01 * width
    # nothing left of the start when something before it is left out
    view0, view1 = (t0 if t0 > lo else t0 - pad), t1 + pad
    shown = [i for i, s in enumerate(spans) if s["ts"] + s["dur"] >= view0 and s["ts"] <= view1]
    # colours: the names by time spent in the window, the most first
    total = {}
    for i in shown:
        s = spans[i]
        total[s["name"]] = total.get(s["name"], 0.0) + min(s["ts"] + s["dur"], view1) - max(s["ts"], view0)
    legend = sorted(total, key=lambda n: (-total[n], n))
    color = {n: PALETTE[k % len(PALETTE)] for k, n in enumerate(legend)}
    # labels: the name when it fits the bar, else cut with an ellipsis (3 characters at least)
    plot_px = FIG_W * DPI * (AX_RIGHT - AX_LEFT)
    px_per_us = plot_px / (view1 - view0)
    char_px = LABEL_PT / 72.0 * DPI * CHAR_EM
    labels = {}
    for i in shown:
        s = spans[i]
        vis = min(s["ts"] + s["dur"], view1) - max(s["ts"], view0)
        fit = int((vis * px_per_us - 4) / char_px)
        name = s["name"]
        if fit >= len(name):
            labels[i] = name
        elif fit >= 4:
            labels[i] = name[:fit - 1] + "\u2026"
    rows = {(p, t): k for k, (p, t, _) in enumerate(tracks)}
    return {"rows": display_names(tracks), "files": [n for _, _, n in tracks], "row_of": rows, "t0": t0, "t1": t1,
            "view": (view0, view1), "reason": reason, "warmup": cut, "shaded": shaded, "shown": shown,
            "depth": depth, "legend": legend, "color": color, "labels": labels}


def describe_trace(path, spans, lay, out=sys.stdout):
    counts = {}
    for s in spans:
        k = (s["pid"], s["tid"])
        counts[k] = counts.get(k, 0) + 1
    print("trace: %s" % path, file=out)
    for (key, k) in sorted(lay["row_of"].items(), key=lambda x: x[1]):
        print('row %d: %s (file: "%s", %d spans)' % (k, lay["rows"][k], lay["files"][k], counts.get(key, 0)), file=out)
    print("axis: %.3f .. %.3f us of the file, from %s" % (lay["t0"], lay["t1"], lay["reason"]), file=out)
    w = lay["warmup"]
    if not w:
        print("warm-up: none", file=out)
    else:
        print('warm-up: %s %.3f .. %.3f us ("%s" %.1f us, %.1fx its median %.1f us)' %
              ("shaded" if lay["shaded"] else "cut", w["begin"], w["end"], w["name"], w["dur"],
               w["dur"] / w["median"] if w["median"] > 0 else float("inf"), w["median"]), file=out)
    leg = lay["legend"]
    print("legend: %s%s" % (", ".join(leg[:LEGEND_MAX]), " (+%d more)" % (len(leg) - LEGEND_MAX)
                            if len(leg) > LEGEND_MAX else ""), file=out)
    print("labels: %d of %d spans shown" % (len(lay["labels"]), len(lay["shown"])), file=out)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def render_trace(path, out, title=None, t_from=None, t_to=None, start="auto", show_warmup=False, describe=False):
    """Renders trace file `path` as a PNG timeline at `out` (None: only
    describe, when asked). Returns the layout."""
    tracks, spans = read_trace(path)
    lay = layout_trace(tracks, spans, start, show_warmup, t_from, t_to)
    if describe:
        describe_trace(path, spans, lay)
    if not out:
        return lay
    plt = _pyplot()
    from matplotlib.patches import Patch
    nrows = max(1, len(tracks))
    fig_h = 1.3 + 0.42 * nrows
    fig = plt.figure(figsize=(FIG_W, fig_h), dpi=DPI)
    bottom, top = 0.75 / fig_h, 1.0 - 0.45 / fig_h
    ax = fig.add_axes([AX_LEFT, bottom, AX_RIGHT - AX_LEFT, top - bottom])
    v0, v1 = lay["view"]
    t0 = lay["t0"]
    order = sorted(lay["shown"], key=lambda i: lay["depth"][i])
    nested_rows = {lay["row_of"][(spans[i]["pid"], spans[i]["tid"])] for i in order if lay["depth"][i] > 0}
    for i in order:
        s, d = spans[i], lay["depth"][i]
        y = lay["row_of"][(s["pid"], s["tid"])]
        h = 0.8 * (0.72 ** d)
        b, e = max(s["ts"], v0), min(s["ts"] + s["dur"], v1)
        ax.broken_barh([(b - t0, max(e - b, (v1 - v0) * 1e-4))], (y - h / 2, h),
                       facecolors=lay["color"][s["name"]], edgecolors="black", linewidth=0.3)
        text = lay["labels"].get(i)
        if text:
            # an outer span with spans inside: its name along its lower edge, clear of theirs
            dy = h / 2 - 0.12 if d == 0 and y in nested_rows else 0.0
            ax.text((b + e) / 2 - t0, y + dy, text, ha="center", va="center", fontsize=LABEL_PT, clip_on=True)
    if lay["shaded"]:
        w = lay["shaded"]
        ax.axvspan(w["begin"] - t0, w["end"] - t0, color="#999999", alpha=0.18, lw=0)
        ax.text(w["begin"] - t0, -0.45, " warm-up", fontsize=7, va="top", ha="left", color="#555555")
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels(lay["rows"], fontsize=8)
    ax.set_ylim(len(tracks) - 0.5, -0.5)
    ax.set_xlim(v0 - t0, v1 - t0)
    ax.set_xlabel("microseconds from %s" % lay["reason"].replace("the first span (the warm-up shaded)", "the first span"))
    ax.grid(axis="x", linewidth=0.3)
    head = title or os.path.basename(path)
    w = lay["warmup"]
    if w and not lay["shaded"]:
        head += "\n(warm-up cut: the first %.0f us; %s's first span lasted %.0f us, %.0fx its median)" % (
            lay["t0"] - w["begin"], w["name"], w["dur"], w["dur"] / w["median"] if w["median"] > 0 else 0.0)
    ax.set_title(head, fontsize=9)
    leg = lay["legend"][:LEGEND_MAX]
    handles = [Patch(facecolor=lay["color"][n], edgecolor="black", linewidth=0.3, label=n) for n in leg]
    if len(lay["legend"]) > LEGEND_MAX:
        handles.append(Patch(facecolor="white", edgecolor="white", label="+%d more" % (len(lay["legend"]) - LEGEND_MAX)))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
                  title="spans", title_fontsize=8)
    fig.savefig(out)
    plt.close(fig)
    return lay


def read_samples(path, column=None):
    """The samples of a benchmark CSV (column `column`, default the last), as floats."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    col = header.index(column) if column else len(header) - 1
    return [float(r[col]) for r in body if len(r) > col and r[col]]


def _rank(sorted_v, p):
    """The nearest-rank p-th percentile of sorted values."""
    if not sorted_v:
        return 0.0
    k = max(0, min(len(sorted_v) - 1, int(math.ceil(p / 100.0 * len(sorted_v))) - 1))
    return sorted_v[k]


def layout_latency(paths, labels=None, column=None, full_range=False):
    """The series (label, sorted microseconds) and the time axis: the pooled
    samples' p0.1 .. p99.9 (or min .. max), with a 3 % margin."""
    series = []
    for i, p in enumerate(paths):
        us = sorted(v / 1e3 for v in read_samples(p, column))
        label = labels[i] if labels and i < len(labels) else os.path.splitext(os.path.basename(p))[0]
        series.append((label, us))
    pooled = sorted(v for _, us in series for v in us)
    if full_range or not pooled:
        lo, hi = (pooled[0], pooled[-1]) if pooled else (0.0, 1.0)
        why = "all %d samples" % len(pooled)
    else:
        lo, hi = _rank(pooled, 0.1), _rank(pooled, 99.9)
        why = "p0.1 .. p99.9 of all %d samples" % len(pooled)
    if hi <= lo:
        hi = lo + max(abs(lo) * 0.01, 1e-3)
    m = 0.03 * (hi - lo)
    return {"series": series, "lo": lo, "hi": hi, "view": (lo - m, hi + m), "why": why}


def describe_latency(lay, out=sys.stdout):
    print("latency: %d series" % len(lay["series"]), file=out)
    v0, v1 = lay["view"]
    for k, (label, us) in enumerate(lay["series"]):
        beyond = sum(1 for v in us if v < v0 or v > v1)
        print("series %d: %s (n=%d, p50 %.2f us, p99 %.2f us, %d beyond the axis)" %
              (k, label, len(us), _rank(us, 50), _rank(us, 99), beyond), file=out)
    print("axis: %.3f .. %.3f us (%s)" % (lay["lo"], lay["hi"], lay["why"]), file=out)


def render_latency(paths, out, labels=None, column=None, cdf=False, title=None, log=False, full_range=False,
                   describe=False):
    """Renders the samples of each CSV in `paths` as overlaid histograms
    (or CDFs) of microseconds at `out` (None: only describe); labels default
    to the file names. Returns the layout."""
    lay = layout_latency(paths, labels, column, full_range)
    if describe:
        describe_latency(lay)
    if not out:
        return lay
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=DPI)
    v0, v1 = lay["view"]
    for label, us in lay["series"]:
        if not us:
            continue
        beyond = sum(1 for v in us if v < v0 or v > v1)
        text = "%s (p50 %.2f us, p99 %.2f us, n=%d%s)" % (label, _rank(us, 50), _rank(us, 99), len(us),
                                                          ", %d beyond the axis" % beyond if beyond else "")
        if cdf:
            ax.step(us, [(k + 1) / len(us) for k in range(len(us))], where="post", label=text)
        else:
            ax.hist([min(max(v, v0), v1) for v in us], bins=80, range=(v0, v1), histtype="stepfilled", alpha=0.45,
                    label=text)
    if log and v0 > 0:
        ax.set_xscale("log")
    ax.set_xlim(v0, v1)
    ax.set_xlabel("microseconds (axis: %s)" % lay["why"])
    ax.set_ylabel("fraction of samples at or below" if cdf else "samples (those beyond the axis at its ends)")
    ax.grid(linewidth=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title or ("latency CDF" if cdf else "latency histogram"), fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return lay


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace", help="a trace file as a timeline")
    t.add_argument("trace")
    t.add_argument("-o", "--out")
    t.add_argument("--title")
    t.add_argument("--start", default="auto", help="auto, warmup, first, or a span's name (see the module's help)")
    t.add_argument("--show-warmup", action="store_true", help="shade the warm-up instead of cutting it")
    t.add_argument("--from", dest="t_from", type=float, help="first microsecond shown (the file's ts)")
    t.add_argument("--to", dest="t_to", type=float, help="last microsecond shown (the file's ts)")
    t.add_argument("--describe", action="store_true", help="print the layout's decisions")
    lat = sub.add_parser("latency", help="benchmark sample CSVs as histograms or CDFs")
    lat.add_argument("csv", nargs="+")
    lat.add_argument("-o", "--out")
    lat.add_argument("--cdf", action="store_true")
    lat.add_argument("--column")
    lat.add_argument("--label", action="append")
    lat.add_argument("--title")
    lat.add_argument("--log", action="store_true", help="a logarithmic time axis")
    lat.add_argument("--full-range", action="store_true", help="the axis over every sample, not p0.1 .. p99.9")
    lat.add_argument("--describe", action="store_true", help="print the axis and the series")
    a = ap.parse_args(argv)
    if not a.out and not a.describe:
        ap.error("give -o OUT.png, --describe, or both")
    if a.cmd == "trace":
        render_trace(a.trace, a.out, a.title, a.t_from, a.t_to, a.start, a.show_warmup, a.describe)
    else:
        render_latency(a.csv, a.out, a.label, a.column, a.cdf, a.title, a.log, a.full_range, a.describe)
    if a.out:
        print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
