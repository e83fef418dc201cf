#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Doxygen's input filter for the public headers (tools/api-docs.sh).

The headers' comments are plain C comments (docs/api-convention.md): a
comment that opens at column 0 becomes a documentation comment of what
follows it, one after a struct member or an enumerator documents that; and
a "Returns:" block, one status a line with its meaning (continuation lines
indented under it), becomes a Markdown list, one item a status, so the
reference shows a list rather than one run-on paragraph.
Usage: api-docs-filter.py HEADER   (prints the filtered header)
"""
import re
import sys

STATUS = re.compile(r"^( \*)\s{2,}(CW_[A-Z0-9_]+|nothing|[a-z_]+\s*(?:==|!=|<|>))\s{2,}(\S.*)$")
STATUS_ONLY = re.compile(r"^( \*)\s{2,}(CW_[A-Z0-9_]+)\s*$")
CONT = re.compile(r"^( \*)\s{6,}(\S.*)$")

out = []
in_returns = False
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    if line == "/*":
        line = "/**"
    elif line.startswith("/* "):
        line = "/** " + line[3:]
    line = re.sub(r"([;,])( *)/\* ", r"\1\2/**< ", line)
    if re.match(r"^ \* Returns:\s*$", line):
        in_returns = True
        out.append(" *")
        out.append(" * @returns")
        out.append(" *")
        continue
    if in_returns:
        m = STATUS.match(line) or STATUS_ONLY.match(line)
        if m:
            rest = m.group(3) if m.re is STATUS else ""
            out.append(" * - `%s` %s" % (m.group(2), rest))
            continue
        m = CONT.match(line)
        if m:
            out.append(" *   " + m.group(2))
            continue
        in_returns = False
    out.append(line)
sys.stdout.write("\n".join(out))
