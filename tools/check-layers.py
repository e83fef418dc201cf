#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks that the library keeps its layers (docs/architecture.md).

Fails (exit 1, naming each problem) when:
  - a file of src/ includes a header of a layer its own layer may not use
    (the rule is the table USES below, written once);
  - library code calls a public cw_* function (only src/api/ defines them,
    and nothing calls them: the layers call each other's internal APIs);
  - a public function is not defined exactly once, in the src/api/ file that
    mirrors the header declaring it (api/cw_stream.cpp for cuweave/stream.h);
  - a source file is longer than MAX_LINES, or two sources share a name
    (libcuweave.a holds objects by file name).

Usage: check-layers.py [ROOT]   (ROOT: the repository, default: this script's ../)
"""
import os
import re
import sys

# What each folder of src/ may include besides itself, bottom up. A layer
# uses only layers below it; api/ (the public functions) and testing/ (the
# test seam and hooks) sit on top of all of them and use nothing of each other.
USES = {
    "base": [],
    "driver": ["base"],
    "core": ["base", "driver"],
    "kernel": ["base", "driver", "core"],
    "graph": ["base", "driver", "core", "kernel"],
    "jit": ["base", "driver", "core", "kernel"],
    "multi": ["base", "driver", "core"],
    "flow": ["base", "driver", "core", "kernel", "graph"],
    "testing": ["base", "driver", "core", "kernel", "graph", "jit", "multi", "flow"],
    "api": ["base", "driver", "core", "kernel", "graph", "jit", "multi", "flow"],
}
MAX_LINES = 800


def strip_comments_and_strings(text):
    """The code of a C/C++ file with comments and string/char literals blanked
    (line breaks kept, so line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def public_functions(include_dir):
    """{function name: header base name} of every CW_API declaration."""
    decl = {}
    for name in sorted(os.listdir(include_dir)):
        if not name.endswith(".h"):
            continue
        with open(os.path.join(include_dir, name)) as f:
            code = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for fn in re.findall(r"CW_API\b[^;{]*?\b(cw_\w+)\s*\(", code):
            decl[fn] = name[:-2]
    return decl


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    src = os.path.join(root, "src")
    problems = []
    decl = public_functions(os.path.join(root, "include", "cuweave"))
    if not decl:
        problems.append("no CW_API declarations found under include/cuweave/")
    call = re.compile(r"\b(cw_[a-z0-9_]+)\s*\(")
    defined = {}
    basenames = {}
    files = 0
    for layer in sorted(os.listdir(src)):
        folder = os.path.join(src, layer)
        if not os.path.isdir(folder):
            continue
        if layer not in USES:
            problems.append("src/%s/: a folder the layer table (tools/check-layers.py USES) does not know" % layer)
            continue
        allowed = set(USES[layer]) | {layer}
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".cpp", ".hpp", ".h")):
                continue
            files += 1
            path = "src/%s/%s" % (layer, name)
            with open(os.path.join(folder, name)) as f:
                text = f.read()
            lines = text.count("\n")
            if lines > MAX_LINES:
                problems.append("%s: %d lines (at most %d: split it)" % (path, lines, MAX_LINES))
            if name.endswith(".cpp"):
                base = name[:-4]
                if base in basenames:
                    problems.append("%s and %s share the object name %s.o" % (basenames[base], path, base))
                basenames[base] = path
            for no, line in enumerate(text.splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                if inc.startswith("cuweave/") or inc.endswith("include/cuweave/" + os.path.basename(inc)):
                    continue  # the public headers: the API's types, for every layer
                target = inc.split("/")[0] if "/" in inc else None
                if target not in USES:
                    problems.append('%s:%d: #include "%s" does not name a layer folder (layer/file)' % (path, no, inc))
                elif target not in allowed:
                    problems.append('%s:%d: #include "%s": %s/ may not use %s/ (it may use: %s)'
                                    % (path, no, inc, layer, target, ", ".join(sorted(allowed - {layer})) or "nothing"))
            code = strip_comments_and_strings(text)
            for no, line in enumerate(code.splitlines(), 1):
                for m in call.finditer(line):
                    fn = m.group(1)
                    if fn not in decl:
                        continue
                    if layer == "api" and re.match(r"\s*CW_API\b", line):
                        defined.setdefault(fn, []).append(path)
                        continue
                    problems.append("%s:%d: calls the public %s (library code calls the layers' internal APIs)"
                                    % (path, no, fn))
                if re.match(r"\s*CW_API\b", line) and layer != "api":
                    problems.append("%s:%d: defines a public function outside src/api/" % (path, no))
    for fn, header in sorted(decl.items()):
        where = defined.get(fn, [])
        want = "src/api/cw_%s.cpp" % header
        if where != [want]:
            problems.append("%s (cuweave/%s.h) is defined in %s; it belongs in %s, once"
                            % (fn, header, ", ".join(where) or "no src/api/ file", want))
    for p in problems:
        print("FAIL: " + p)
    if problems:
        print("check-layers: %d problem(s) in %d files" % (len(problems), files))
        return 1
    print("check-layers: %d files in %d layers keep their layers; %d public functions, each defined once in src/api/"
          % (files, len(USES), len(decl)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
