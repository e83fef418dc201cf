#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Every link of the documentation leads somewhere: README.md, CHANGELOG.md,
docs/*.md and bindings/python/README.md.

A Markdown link [text](target) outside code (fenced blocks and `inline
code` are skipped) to a file of the tree must name one that exists; one
with #anchor (or an anchor alone: this file) must name a heading of that
Markdown file as GitHub makes its anchor (lower case, punctuation but '-'
and '_' dropped, spaces as '-', a repeat numbered -1, -2, ...) or an
explicit <a name="..."> / id="...". Links to other sites (http:, https:,
mailto:) are not followed.

Usage: check-links.py SOURCE_ROOT [--self-test]
Prints each broken link as FILE:LINE: target: why, and a tally; exit 1 when
there is one. --self-test: a copy with a broken file link, a broken anchor
and a good one must give exactly the two.
"""
import glob
import os
import re
import shutil
import sys
import tempfile

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"")


def doc_files(root):
    files = [os.path.join(root, f) for f in ("README.md", "CHANGELOG.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files.append(os.path.join(root, "bindings", "python", "README.md"))
    return [f for f in files if os.path.exists(f)]


def slug(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """(line number, text) outside fenced code, inline code blanked."""
    fence = None
    for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        m = re.match(r"^\s*(```|~~~)", line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence:
            continue
        yield n, re.sub(r"`[^`]*`", "``", line)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2).replace("``", ""))
                raw = open(path, encoding="utf-8").read()
                k = seen.get(s, 0)
                out.add(s if k == 0 else "%s-%d" % (s, k))
                seen[s] = k + 1
            for e in EXPLICIT.finditer(line):
                out.add(e.group(1) or e.group(2))
        # headings inside inline code keep their words: recompute from the raw text
        for line in open(path, encoding="utf-8").read().split("\n"):
            m = HEADING.match(line)
            if m:
                out.add(slug(m.group(2)))
        _anchors[path] = out
    return _anchors[path]


def check(root):
    bad, total = [], 0
    for path in doc_files(root):
        rel = os.path.relpath(path, root)
        for n, line in prose_lines(path):
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                total += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    bad.append("%s:%d: %s: no such file %s" % (rel, n, target, os.path.relpath(dest, root)))
                    continue
                if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append("%s:%d: %s: %s has no heading with the anchor #%s" %
                               (rel, n, target, os.path.relpath(dest, root), anchor))
    return bad, total


def self_test(root):
    tmp = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(tmp, "docs"))
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# Top\n\n## A `code` heading, with punctuation!\n\n[ok](docs/a.md#the-part) [ok](#top)\n"
                    "[ok](#a-code-heading-with-punctuation) [bad](docs/missing.md) [bad](docs/a.md#nowhere)\n"
                    "`[not a link](nowhere.md)`\n```\n[not a link](nowhere.md)\n```\n")
        with open(os.path.join(tmp, "docs", "a.md"), "w") as f:
            f.write("# A\n\n## The part\n")
        bad, _ = check(tmp)
        want = ["README.md:6: docs/missing.md: no such file docs/missing.md",
                "README.md:6: docs/a.md#nowhere: docs/a.md has no heading with the anchor #nowhere"]
        if bad != want:
            print("FAIL: self-test: expected %s, got %s" % (want, bad))
            return 1
        print("check-links: self-test: the broken file and anchor found, nothing else")
        return 0
    finally:
        shutil.rmtree(tmp)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    if "--self-test" in sys.argv:
        return self_test(root)
    rc = self_test(root)
    bad, total = check(root)
    for b in bad:
        print(b)
    print("check-links: %d links in %d files, %d broken" % (total, len(doc_files(root)), len(bad)))
    return 1 if bad or rc else 0


if __name__ == "__main__":
    sys.exit(main())
