#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks the public C headers against the API convention (docs/api-convention.md).

Usage: check-api.py [--count] [--root=DIR] [HEADER ...]
       (default: DIR/include/cuweave/*.h, DIR the source tree this script is in)

Each violation is printed as FILE:LINE: RULE: message; the exit status is 1 if
there is any. --count prints the number of CW_API functions (all headers given)
and exits 0. The rules a script can check:

  doc        every CW_API declaration has a comment right above it with a
             Returns block ("Returns:" or "Returns nothing.")
  returns    a cw_status function's Returns block names the statuses it can
             return, each a member of cw_status, CW_SUCCESS (or another) at
             least once; a void function's says "nothing"
  name       lower snake case, cw_ prefix, and an object prefix: the name of a
             handle type, or one of the library-wide families (FREE below)
  destroy    cw_x_destroy returns void and takes exactly one cw_x **
  out-first  functions that hand out a handle (create, wrap, compile, load,
             instantiate, alloc, acquire, fork, when_all, capture_end) take
             that out-parameter (a T **) first
  getter     a cw_x_get_* function takes its object first (a cw_x *, or an
             index for library-wide getters) and, returning cw_status, its
             out-parameters last; a function that returns a value other than
             cw_status or void is a getter (has _get_) unless listed in VALUE
  type-name  no type name has get or set as a word (they are verbs)
  devptr     no unsigned long long in a public header (device addresses are
             cw_devptr)
  reserved   padding fields named reserved* are uint8_t arrays
  settings   every cw_x_settings struct has its cw_x_settings_default
"""

import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Library-wide functions that act on no handle: each entry is a name or a
# prefix (ending in _).
FREE = [
    "cw_version", "cw_get_versions", "cw_init", "cw_driver_has", "cw_device_count",
    "cw_device_", "cw_status_", "cw_last_error", "cw_clear_error",
    "cw_log_", "cw_copy_", "cw_host_", "cw_capture_", "cw_jit_", "cw_builtin_",
    "cw_partition_get_caps", "cw_launch_config_", "cw_cond_", "cw_port_",
]
# Headers of device code (compiled by NVRTC, no <stdint.h>): the devptr and
# reserved rules do not apply to them.
DEVICE_HEADERS = {"resident_device.h"}
# Functions that return a value (not cw_status, not void) without being getters.
VALUE = {"cw_version", "cw_status_name", "cw_status_string", "cw_last_error",
         "cw_driver_has"}
# Verbs that hand out a handle the caller must destroy or give back.
OUT_FIRST = re.compile(r"_(create|wrap|compile|load|load_image|instantiate|alloc|acquire|acquire_named|fork|when_all)$")
OUT_FIRST_NAMES = {"cw_capture_end"}

problems = []


def report(path, line, rule, msg):
    problems.append("%s:%d: %s: %s" % (os.path.relpath(path, ROOT), line, rule, msg))


def strip_comments(text):
    """Comments replaced by spaces (newlines kept, so line numbers hold)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"/\*.*?\*/", blank, text, flags=re.S)
    return re.sub(r"//[^\n]*", blank, text)


def split_params(params):
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [] if out == ["void"] else out


def comment_above(raw_lines, lineno):
    """The /* ... */ block (or // lines) ending on the line above lineno (1-based)."""
    i = lineno - 2
    while i >= 0 and raw_lines[i].strip() == "":
        i -= 1
        if lineno - 2 - i > 1:  # at most one blank line between
            return None
    if i < 0:
        return None
    if raw_lines[i].strip().endswith("*/"):
        j = i
        while j >= 0 and "/*" not in raw_lines[j]:
            j -= 1
        return "\n".join(raw_lines[j:i + 1]) if j >= 0 else None
    if raw_lines[i].strip().startswith("//"):
        j = i
        while j >= 0 and raw_lines[j].strip().startswith("//"):
            j -= 1
        return "\n".join(raw_lines[j + 1:i + 1])
    return None


def status_names(headers):
    path = os.path.join(ROOT, "include", "cuweave", "common.h")
    text = strip_comments(open(path).read())
    # The statuses come from the X-macro list CW_STATUS_MAP: X(NAME, value, text).
    return {"CW_" + n for n in re.findall(r"\bX\((SUCCESS|ERROR_[A-Z0-9_]+),\s*\d+", text)}


def main(argv):
    global ROOT
    count_only = "--count" in argv
    for a in argv:
        if a.startswith("--root="):
            ROOT = os.path.abspath(a[len("--root="):])
    paths = [a for a in argv if not a.startswith("--")]
    if not paths:
        paths = sorted(glob.glob(os.path.join(ROOT, "include", "cuweave", "*.h")))
    paths = [os.path.abspath(p) for p in paths]
    all_headers = sorted(glob.glob(os.path.join(ROOT, "include", "cuweave", "*.h")))
    statuses = status_names(all_headers)

    # Handle types and structs of every public header (a function's object
    # may be declared in another header).
    handles, structs, struct_defs = set(), set(), {}
    for h in sorted(set(all_headers) | set(paths)):
        text = strip_comments(open(h).read())
        handles |= set(re.findall(r"typedef\s+struct\s+(cw_\w+)\s+\1\s*;", text))
        for m in re.finditer(r"typedef\s+struct\s+(cw_\w+)\s*\{", text):
            structs.add(m.group(1))
        for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{(.*?)\}\s*(cw_\w+)\s*;", text, re.S):
            struct_defs[m.group(2)] = (h, text[:m.start()].count("\n") + 1, m.group(1))
    objects = sorted((n for n in handles), key=len, reverse=True)

    functions = []
    for path in paths:
        raw = open(path).read()
        raw_lines = raw.split("\n")
        text = strip_comments(raw)
        for m in re.finditer(r"\bCW_API\b(.*?);", text, re.S):
            decl = " ".join(m.group(1).split())
            line = text[:m.start()].count("\n") + 1
            fm = re.match(r"(.*?)\b(cw_\w+)\s*\((.*)\)\s*$", decl)
            if not fm:
                continue  # not a function (a macro's definition)
            ret, name, params = fm.group(1).strip(), fm.group(2), split_params(fm.group(3))
            functions.append(name)
            check_function(path, line, ret, name, params, comment_above(raw_lines, line), statuses, objects)

        # Types: names, unsigned long long, reserved fields.
        for m in re.finditer(r"typedef\s+(?:struct|enum)\s*\w*[^;]*?\b(cw_\w+)\s*;", text, re.S):
            tname = m.group(1)
            if re.search(r"(^|_)(get|set)(_|$)", tname[3:]):
                report(path, text[:m.start()].count("\n") + 1, "type-name",
                       "%s: get and set are verbs, not parts of a type's name" % tname)
        # resident_device.h is device code that NVRTC compiles without
        # <stdint.h>: its types are the compiler's own.
        device_code = os.path.basename(path) in DEVICE_HEADERS
        for m in ([] if device_code else re.finditer(r"\bunsigned\s+long\s+long\b", text)):
            report(path, text[:m.start()].count("\n") + 1, "devptr",
                   "unsigned long long in a public header: device addresses are cw_devptr")
        for sname, (spath, sline, body) in struct_defs.items():
            if spath != path or device_code:
                continue
            for fm2 in re.finditer(r"([\w\s\*]+?)\b(reserved\w*)\s*\[", body):
                ftype = " ".join(fm2.group(1).split())
                if ftype != "uint8_t":
                    report(path, sline + body[:fm2.start()].count("\n"), "reserved",
                           "%s.%s is %s: padding is uint8_t" % (sname, fm2.group(2), ftype))
            if sname.endswith("_settings"):
                want = sname + "_default"
                if not re.search(r"\b%s\s*\(" % re.escape(want), text):
                    report(path, sline, "settings", "%s has no %s()" % (sname, want))

    if count_only:
        print(len(functions))
        return 0
    for p in problems:
        print(p)
    print("check-api: %d functions in %d headers, %d problems" % (len(functions), len(paths), len(problems)))
    return 1 if problems else 0


def object_of(name, objects):
    for o in objects:
        if name == o or name.startswith(o + "_"):
            return o
    return None


def check_function(path, line, ret, name, params, comment, statuses, objects):
    if not re.match(r"^cw_[a-z0-9_]+$", name):
        report(path, line, "name", "%s: not lower snake case with the cw_ prefix" % name)
    obj = object_of(name, objects)
    free = any(name == f or (f.endswith("_") and name.startswith(f)) for f in FREE)
    settings_default = re.match(r"^(cw_\w+_settings)_default$", name)
    if not obj and not free and not settings_default:
        report(path, line, "name", "%s: names no handle type and is not a library-wide function" % name)

    # doc / returns
    if comment is None:
        report(path, line, "doc", "%s has no comment right above it" % name)
    else:
        rm = re.search(r"\bReturns\b(.*)", comment, re.S)
        if not rm:
            report(path, line, "doc", "%s: its comment has no Returns block" % name)
        else:
            block = rm.group(1)
            if ret == "cw_status":
                named = set(re.findall(r"\b(CW_(?:SUCCESS|ERROR_[A-Z0-9_]+))\b", block))
                if not named:
                    report(path, line, "returns", "%s: the Returns block names no status" % name)
                for s in sorted(named - statuses):
                    report(path, line, "returns", "%s: %s is not a cw_status" % (name, s))
            elif ret == "void":
                if not re.match(r"\s*:?\s*nothing", block):
                    report(path, line, "returns", "%s returns void: its block says 'Returns: nothing.'" % name)

    # destroy
    if name.endswith("_destroy"):
        target = name[:-len("_destroy")]
        if ret != "void":
            report(path, line, "destroy", "%s returns %s: destroy returns void and never fails" % (name, ret))
        if len(params) != 1 or not re.match(r"^%s\s*\*\s*\*\s*\w*$" % re.escape(target), params[0]):
            report(path, line, "destroy", "%s must take exactly one %s **" % (name, target))

    # out-parameter first
    if OUT_FIRST.search(name) or name in OUT_FIRST_NAMES:
        if not params or "**" not in params[0].replace(" ", ""):
            report(path, line, "out-first", "%s hands out a handle: its out-parameter (T **) comes first" % name)

    # getters
    if "_get_" in name:
        if obj and not name.startswith("cw_get_"):
            if not params or not re.search(r"\b%s\s*\*" % re.escape(obj), params[0]) or "**" in params[0].replace(" ", ""):
                report(path, line, "getter", "%s: a getter takes its object (%s *) first" % (name, obj))
        if ret == "cw_status" and params:
            last = params[-1].replace(" ", "")
            if "*" not in last:
                report(path, line, "getter", "%s: a getter's out-parameters come last" % name)
    elif ret not in ("cw_status", "void") and name not in VALUE:
        report(path, line, "getter", "%s returns a value (%s): a getter is named cw_x_get_*" % (name, ret))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
