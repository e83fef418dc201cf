#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Every C function has its C++ wrapper, or a reason it has none.

Usage: check-cpp-coverage.py [--root=DIR] [--list=FILE] [--lib=LIBCUWEAVE_SO]

The C functions are the CW_API declarations of DIR/include/cuweave/*.h (and,
with --lib, the cw_* functions the shared library exports: the two lists must
be the same). A C function is wrapped when the code of the C++ wrappers
(DIR/include/cuweave/cuweave.hpp and cpp/*.hpp, comments and string literals
left out) names it: a call, or a destroy given to the handle template, or a
settings default given to cw::defaults<S>(). FILE (default
DIR/tests/cpp_not_wrapped.txt) lists the C functions deliberately left to C,
one a line: the name, then the reason (# starts a comment).

The wrappers stay header-only, with no ABI of their own: no file of DIR/src
includes them, and (with --lib) the library defines no symbol of their
namespace (cw::v0_3).

Fails (exit 1), saying which, when a C function is neither wrapped nor
listed, when a listed name is not a C function or is wrapped after all (the
list is stale), when a listed name has no reason, when the library's
exports and the headers' declarations differ, or when the library has C++
wrapper code in it.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def strip_code(text):
    """Comments and string / character literals replaced by spaces."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def c_functions(root):
    """{name: header} of every CW_API declaration."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "include", "cuweave", "*.h"))):
        with open(path, encoding="utf-8") as f:
            text = strip_code(f.read())
        for m in re.finditer(r"\bCW_API\s+[^;(]*?\b(cw_\w+)\s*\(", text):
            out[m.group(1)] = os.path.basename(path)
    return out


def wrapper_names(root):
    """{identifier: first file} of every cw_* identifier in the wrappers' code."""
    out = {}
    paths = [os.path.join(root, "include", "cuweave", "cuweave.hpp")]
    paths += sorted(glob.glob(os.path.join(root, "include", "cuweave", "cpp", "*.hpp")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = strip_code(f.read())
        for name in re.findall(r"\b(cw_\w+)\b", text):
            out.setdefault(name, os.path.relpath(path, root))
    return out


def not_wrapped(path):
    """[(line, name, reason)] from the list file."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            out.append((n, parts[0], parts[1].strip() if len(parts) > 1 else ""))
    return out


def library_includes_wrappers(root):
    """[(file, line)] of the library's sources that include a C++ wrapper header."""
    out = []
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if re.match(r'\s*#\s*include\s*[<"]cuweave/(cuweave\.hpp|cpp/)', line):
                        out.append((os.path.relpath(path, root), n))
    return out


def wrapper_symbols(lib):
    """Symbols of the wrappers' namespace that the library defines."""
    text = subprocess.run(["nm", "-C", "--defined-only", lib], check=True, capture_output=True,
                          text=True).stdout
    return sorted({line.split(None, 2)[-1] for line in text.splitlines() if "cw::v0_3::" in line})


def exports(lib):
    text = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                          text=True).stdout
    names = set()
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in ("T", "W") and f[2].startswith("cw_"):
            names.add(f[2].split("@")[0])
    return names


def main(argv):
    root, lst, lib = ROOT, None, None
    for a in argv:
        if a.startswith("--root="):
            root = a[len("--root="):]
        elif a.startswith("--list="):
            lst = a[len("--list="):]
        elif a.startswith("--lib="):
            lib = a[len("--lib="):]
        else:
            print(__doc__)
            return 2
    lst = lst or os.path.join(root, "tests", "cpp_not_wrapped.txt")
    problems = []

    funcs = c_functions(root)
    if not funcs:
        problems.append("no CW_API declaration found under %s/include/cuweave" % root)
    if lib:
        exp = exports(lib)
        for name in sorted(exp - set(funcs)):
            problems.append("%s is exported by %s but declared in no public header" % (name, os.path.basename(lib)))
        for name in sorted(set(funcs) - exp):
            problems.append("%s (cuweave/%s) is declared but %s does not export it"
                            % (name, funcs[name], os.path.basename(lib)))

    for path, line in library_includes_wrappers(root):
        problems.append("%s:%d: the library includes the C++ wrappers (they are header-only, with no ABI of their own)"
                        % (path, line))
    if lib:
        for sym in wrapper_symbols(lib):
            problems.append("%s defines %s: C++ wrapper code compiled into the library" % (os.path.basename(lib), sym))

    used = wrapper_names(root)
    listed = {}
    for line, name, reason in not_wrapped(lst):
        where = "%s:%d" % (os.path.relpath(lst, root), line)
        if name in listed:
            problems.append("%s: %s is listed twice" % (where, name))
        listed[name] = reason
        if name not in funcs:
            problems.append("%s: %s is listed as not wrapped but is no C function (stale entry)" % (where, name))
        elif name in used:
            problems.append("%s: %s is listed as not wrapped but %s uses it (stale entry)" % (where, name, used[name]))
        if not reason:
            problems.append("%s: %s is listed without a reason" % (where, name))

    wrapped = [n for n in funcs if n in used]
    for name in sorted(funcs):
        if name not in used and name not in listed:
            problems.append("%s (cuweave/%s) has no C++ wrapper and is not listed in %s with a reason"
                            % (name, funcs[name], os.path.relpath(lst, root)))

    for p in problems:
        print("FAIL: " + p)
    if lib:
        print("%d cw_* functions exported by %s" % (len(exp), os.path.basename(lib)))
    print("%d C functions declared: %d wrapped, %d deliberately not (%s)"
          % (len(funcs), len(wrapped), len(listed), ", ".join(sorted(listed)) or "none"))
    if not problems:
        print("PASS: every C function is wrapped or listed with a reason; no wrapper code in the library")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
