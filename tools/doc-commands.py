#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The commands the documentation tells a user to type, as one script.

Every command a user types is in a fenced ```sh block of README.md,
docs/*.md or bindings/python/README.md. tests/check-doc-commands.sh runs
them exactly as written, in that order, in a fresh copy of the tree, so the
documentation cannot drift from what works. A block that cannot run there
(it needs a GPU, it is the CI run itself, it needs a shell of its own) says
so on the line before its fence:

    <!-- doc-test: not run: needs a GPU (tools/gpu-check.sh runs it) -->

A program shown in full is a file of the tree that the builds compile, and
the block must be that file, byte for byte:

    <!-- doc-test: same as examples/first.c -->

  doc-commands.py SOURCE_ROOT list     every block: FILE:LINE, run or the reason
  doc-commands.py SOURCE_ROOT script   the runnable blocks as one sh script
  doc-commands.py SOURCE_ROOT lint     exits 1 when a command sits in an
                                       indented block instead of a ```sh one,
                                       or a not-run marker gives no reason

The script echoes "=== FILE:LINE" before each block (set -e stops at the
first failing command; the last such line names its block).
"""
import glob
import os
import re
import sys

FENCE = re.compile(r"^```(sh|shell|bash)\s*$")
NOT_RUN = re.compile(r"^<!-- doc-test: not run: (.*\S) -->\s*$")
# A fenced block (any language) that must be the named file of the tree,
# byte for byte: a program shown in full that CI also builds.
SAME_AS = re.compile(r"^<!-- doc-test: same as (\S+) -->\s*$")
# An indented line that reads like a command a user types.
COMMANDISH = re.compile(
    r"^    (\$ )?(sudo |env |[A-Z_]+=\S+ )*(make|meson|ninja|cc|c\+\+|gcc|sh|bash|python3|pip|pip3|pkg-config|cuweave-info|ldconfig|git|apt-get)( |$)")


def doc_files(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files.append(os.path.join(root, "bindings", "python", "README.md"))
    return [f for f in files if os.path.exists(f)]


def blocks(path):
    """(line, text, reason) for each ```sh block; reason None: run it."""
    out = []
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            m = NOT_RUN.match(prev)
            out.append((start + 1, "\n".join(lines[start + 1:j]), m.group(1) if m else None))
            i = j + 1
        else:
            i += 1
    return out


def lint(root):
    bad = 0
    for f in doc_files(root):
        rel = os.path.relpath(f, root)
        lines = open(f).read().split("\n")
        for n, line in enumerate(lines, 1):
            m = SAME_AS.match(line)
            if not m:
                continue
            if n >= len(lines) or not lines[n].startswith("```"):
                print("%s:%d: 'same as' must be followed by a fenced block" % (rel, n))
                bad = 1
                continue
            end = next((k for k in range(n + 1, len(lines)) if lines[k].startswith("```")), len(lines))
            shown = "\n".join(lines[n + 1:end]) + "\n"
            path = os.path.join(root, m.group(1))
            if not os.path.exists(path) or open(path).read() != shown:
                print("%s:%d: the block differs from %s (copy the file into it)" % (rel, n, m.group(1)))
                bad = 1
        in_fence = False
        prev_blank = True
        for n, line in enumerate(open(f).read().split("\n"), 1):
            if line.startswith("```"):
                in_fence = not in_fence
            elif not in_fence and prev_blank and COMMANDISH.match(line):
                print("%s:%d: a command in an indented block (make it a ```sh block, run by "
                      "tests/check-doc-commands.sh, or mark it not run with a reason): %s" % (rel, n, line.strip()))
                bad = 1
            if line.startswith("<!-- doc-test") and not NOT_RUN.match(line) and not SAME_AS.match(line):
                print("%s:%d: a doc-test marker must read '<!-- doc-test: not run: REASON -->' "
                      "or '<!-- doc-test: same as PATH -->'" % (rel, n))
                bad = 1
            prev_blank = line.strip() == "" or (prev_blank and line.startswith("    "))
    return bad


def main(argv):
    if len(argv) != 3 or argv[2] not in ("list", "script", "lint"):
        sys.stderr.write(__doc__)
        return 2
    root = argv[1]
    if argv[2] == "lint":
        return lint(root)
    if argv[2] == "script":
        print("set -eu")
    for f in doc_files(root):
        rel = os.path.relpath(f, root)
        for line, text, reason in blocks(f):
            if argv[2] == "list":
                print("%s:%d: %s" % (rel, line, "run" if reason is None else "not run: " + reason))
            elif reason is None:
                print('echo "=== %s:%d"' % (rel, line))
                print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
