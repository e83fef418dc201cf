# SPDX-License-Identifier: BSD-2-Clause
"""The bindings against the C side, from the public headers:

  - struct layouts: a small C program, compiled by the C compiler (cc, or
    $CC) from include/cuweave/*.h, prints sizeof and every field's offsetof
    and size of every public struct the bindings declare; each ctypes
    Structure must agree (its size, each field's offset and size, the same
    fields). Every public struct is bound or listed in
    _lib.STRUCTS_UNBOUND with the reason (printed by the test).
  - functions: every CW_API declaration of include/cuweave/*.h is bound
    (_lib._SIGNATURES) or listed in _lib.UNBOUND with the reason (printed),
    nothing is both, nothing listed is gone from the headers, the loaded
    library exports every one of them (nm -D, where nm is installed), and
    each bound signature has the header's number of parameters and the
    ctypes type each C type needs (size_t is c_size_t, a cw_foo_info * is
    POINTER(FooInfo), a callback is its CFUNCTYPE, ...), result included.

Each check is also run on a broken copy (a field's type changed, an
export nobody binds, an argument of the wrong width) and must fail there.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 python3 -m unittest test_abi -v
     (from bindings/python/tests; CC picks the compiler)
"""

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
INCLUDE = os.path.join(ROOT, "include")

from cuweave import _lib  # noqa: E402


def _headers():
    return sorted(glob.glob(os.path.join(INCLUDE, "cuweave", "*.h")))


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _header_text(device=False):
    """Every public header's code, comments removed (the device-side header,
    compiled by NVRTC, only when asked)."""
    out = []
    for h in _headers():
        if not device and os.path.basename(h) == "resident_device.h":
            continue
        with open(h) as f:
            out.append(_strip_comments(f.read()))
    return "\n".join(out)


def public_structs(text=None):
    """Names of the structs with a body in the public headers (device side included)."""
    text = _header_text(device=True) if text is None else text
    return sorted(set(re.findall(r"typedef\s+struct\s+(\w+)\s*\{", text)))


def c_declarations(text=None):
    """{name: (return type, [parameter declarations])} of every CW_API function."""
    text = _header_text() if text is None else text
    out = {}
    for m in re.finditer(r"\bCW_API\s+([^;(]*?)\b(cw_\w+)\s*\(([^;]*?)\)\s*;", text, flags=re.S):
        ret, name, params = " ".join(m.group(1).split()), m.group(2), " ".join(m.group(3).split())
        ps = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
        out[name] = (ret, ps)
    return out


# ---- layouts ------------------------------------------------------------------------------------------------

def bound_structures():
    """{C struct name: ctypes Structure} of every Structure the bindings declare."""
    out = {}
    for obj in vars(_lib).values():
        if isinstance(obj, type) and issubclass(obj, ctypes.Structure) and obj is not ctypes.Structure:
            if obj.__name__.startswith("_"):
                continue  # private helpers (none describe a public struct)
            out[obj._c_name_] = obj
    return out


def c_layouts(structs, cc=None):
    """What the C compiler says: {struct: {"sizeof": n, "fields": {field: (offset, size)}}}."""
    cc = cc or os.environ.get("CC") or "cc"
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "cuweave/cuweave.h"',
             "#define F(T, f) printf(\"%s %s %zu %zu\\n\", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))",
             "int main(void) {"]
    for cname, cls in sorted(structs.items()):
        lines.append('    printf("%%s sizeof %%zu\\n", "%s", sizeof(%s));' % (cname, cname))
        for field in cls._fields_:
            lines.append("    F(%s, %s);" % (cname, field[0]))
    lines += ["    return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="cuweave-abi-")
    try:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        build = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", INCLUDE, src, "-o", exe],
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise AssertionError("the layout program did not compile (a field the C struct lacks?):\n" + build.stderr)
        run = subprocess.run([exe], capture_output=True, text=True, check=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if parts[1] == "sizeof":
            out.setdefault(parts[0], {"fields": {}})["sizeof"] = int(parts[2])
        else:
            out.setdefault(parts[0], {"fields": {}})["fields"][parts[1]] = (int(parts[2]), int(parts[3]))
    return out


def c_field_names(cname, text=None):
    """The field names of a public struct, from its header (for 'the same fields')."""
    text = _header_text(device=True) if text is None else text
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (cname, cname), text, flags=re.S)
    body = m.group(1)
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # a function pointer
        if fp:
            names.append(fp.group(1))
            continue
        # "int a, b" declares two; each declarator's name is its last word (arrays stripped)
        head, _, rest = decl.partition(" ")
        for d in (head + " " + rest).split(","):
            d = re.sub(r"\[[^\]]*\]", "", d).replace("*", " ")
            names.append(d.split()[-1])
    return names


def layout_problems(structs, layouts):
    """Every disagreement between the ctypes Structures and the C layouts."""
    problems = []
    for cname, cls in sorted(structs.items()):
        c = layouts[cname]
        if ctypes.sizeof(cls) != c["sizeof"]:
            problems.append("%s: sizeof %d in C, %d in ctypes (%s)" % (cname, c["sizeof"], ctypes.sizeof(cls),
                                                                     cls.__name__))
        for field in cls._fields_:
            name = field[0]
            got = (getattr(cls, name).offset, getattr(cls, name).size)
            if got != c["fields"][name]:
                problems.append("%s.%s: offset %d size %d in C, offset %d size %d in ctypes" %
                                ((cname, name) + c["fields"][name] + got))
        want = c_field_names(cname)
        have = [f[0] for f in cls._fields_]
        if want != have:
            problems.append("%s: fields %s in C, %s in ctypes" % (cname, want, have))
    return problems


def _have_cc():
    return shutil.which(os.environ.get("CC") or "cc") is not None


@unittest.skipUnless(_have_cc(), "no C compiler (cc, or $CC)")
class TestStructLayouts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.structs = bound_structures()
        cls.layouts = c_layouts(cls.structs)

    def test_every_public_struct_is_bound_or_listed(self):
        public = public_structs()
        missing = [s for s in public if s not in self.structs and s not in _lib.STRUCTS_UNBOUND]
        self.assertEqual(missing, [], "public structs neither bound (a ctypes Structure with _c_name_) nor listed "
                                      "in _lib.STRUCTS_UNBOUND")
        stale = [s for s in list(self.structs) + list(_lib.STRUCTS_UNBOUND) if s not in public]
        self.assertEqual(stale, [], "bound or listed, but no public struct of that name")
        both = [s for s in self.structs if s in _lib.STRUCTS_UNBOUND]
        self.assertEqual(both, [])
        print("\n# %d public structs: %d bound, %d not bound:" % (len(public), len(self.structs),
                                                                 len(_lib.STRUCTS_UNBOUND)))
        for name, why in sorted(_lib.STRUCTS_UNBOUND.items()):
            print("#   %s: %s" % (name, why))

    def test_layouts_match_the_c_compiler(self):
        problems = layout_problems(self.structs, self.layouts)
        self.assertEqual(problems, [], "\n".join(problems))
        n = sum(len(c._fields_) for c in self.structs.values())
        print("\n# %d structs, %d fields: sizes, offsets and field sizes as the C compiler says" %
              (len(self.structs), n))

    def test_the_check_fails_on_a_wrong_layout(self):
        # A copy of cw_port_settings with `bytes` as a 32-bit field: offsets
        # after it and the field's size differ.
        fields = [(n, ctypes.c_uint32 if n == "bytes" else t) for n, t in _lib.PortSettings._fields_]
        broken = type("PortSettings", (ctypes.Structure,), {"_c_name_": "cw_port_settings", "_fields_": fields})
        problems = layout_problems({"cw_port_settings": broken}, self.layouts)
        self.assertTrue(any("cw_port_settings.bytes" in p for p in problems), problems)
        self.assertTrue(any("cw_port_settings.dptr" in p for p in problems), problems)
        # a field missing on the Python side
        short = type("Versions", (ctypes.Structure,), {"_c_name_": "cw_versions", "_fields_": _lib.Versions._fields_[:-1]})
        problems = layout_problems({"cw_versions": short}, self.layouts)
        self.assertTrue(any("cw_versions: sizeof" in p for p in problems), problems)
        self.assertTrue(any("cw_versions: fields" in p for p in problems), problems)


# ---- functions --------------------------------------------------------------------------------------------

_SCALARS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "size_t": ctypes.c_size_t, "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "float": ctypes.c_float, "cw_devptr": ctypes.c_uint64,
    "cw_cond_handle": ctypes.c_uint64,
}
_CALLBACKS = {"cw_log_fn": "LOG_FN", "cw_future_fn": "FUTURE_FN", "cw_resident_capture_fn": "CAPTURE_FN"}
_CU_HANDLES = {"CUcontext", "CUstream", "CUevent", "CUgraph", "CUgraphExec"}


def _split_type(decl, has_name=True):
    """'const cw_stream *const *streams' -> ('cw_stream', 2)."""
    tokens = re.findall(r"\w+|\*", decl)
    tokens = [t for t in tokens if t != "const"]
    stars = tokens.count("*")
    words = [t for t in tokens if t != "*"]
    if has_name:
        words = words[:-1]
    if words == ["unsigned", "int"]:
        words = ["unsigned"]
    if len(words) != 1:
        raise ValueError("cannot read the C type of %r" % decl)
    return words[0], stars


def expected_ctype(base, stars, text):
    """The ctypes type a C type must be bound as."""
    enums = set(re.findall(r"typedef\s+enum\s+(\w+)", text)) | {"cw_status"}
    opaque = set(re.findall(r"typedef\s+struct\s+(\w+)\s+\1\s*;", text))
    structs = bound_structures()
    if stars == 0:
        if base == "void":
            return None
        if base in _SCALARS:
            return _SCALARS[base]
        if base in enums:
            return ctypes.c_int
        if base in _CALLBACKS:
            return getattr(_lib, _CALLBACKS[base])
        if base in _CU_HANDLES:
            return ctypes.c_void_p
        raise ValueError("no ctypes type known for %s" % base)
    if stars == 1:
        if base == "void" or base in opaque:
            return ctypes.c_void_p
        if base == "char":
            return ctypes.c_char_p
        if base in structs:
            return ctypes.POINTER(structs[base])
        return ctypes.POINTER(expected_ctype(base, 0, text))
    if stars == 2:
        if base == "char":
            return ctypes.POINTER(ctypes.c_char_p)
        return ctypes.POINTER(expected_ctype(base, 1, text))
    raise ValueError("no ctypes type known for %s with %d *" % (base, stars))


def signature_problems(bound, decls, text):
    """Every bound function whose ctypes signature disagrees with its C declaration."""
    problems = []
    for name, (restype, argtypes) in sorted(bound.items()):
        if name not in decls:
            continue  # reported by the coverage check
        ret, params = decls[name]
        want_ret = expected_ctype(*_split_type(ret + " x"), text)
        if restype is not want_ret:
            problems.append("%s: returns %s, bound as %s" % (name, ret, getattr(restype, "__name__", restype)))
        if len(argtypes) != len(params):
            problems.append("%s: %d parameters in C, %d argtypes" % (name, len(params), len(argtypes)))
            continue
        for i, (p, a) in enumerate(zip(params, argtypes)):
            want = expected_ctype(*_split_type(p), text)
            if a is not want:
                problems.append("%s: parameter %d (%s) needs %s, bound as %s" %
                                (name, i + 1, p, getattr(want, "__name__", want), getattr(a, "__name__", a)))
    return problems


def coverage_problems(exports, bound, unbound):
    problems = []
    for name in sorted(exports):
        if name not in bound and name not in unbound:
            problems.append("%s: exported, neither bound (_lib._SIGNATURES) nor listed in _lib.UNBOUND" % name)
        if name in bound and name in unbound:
            problems.append("%s: both bound and listed as unbound" % name)
    for name in sorted(set(bound) | set(unbound)):
        if name not in exports:
            problems.append("%s: bound or listed, but no CW_API declaration has that name" % name)
    return problems


def nm_exports(path):
    """cw_* functions the shared library exports (nm -D), or None without nm."""
    if not shutil.which("nm"):
        return None
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return {line.split()[-1].split("@")[0] for line in out.stdout.splitlines()
            if len(line.split()) >= 3 and line.split()[1] == "T" and line.split()[-1].startswith("cw_")}


class TestFunctions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = _header_text()
        cls.decls = c_declarations(cls.text)

    def test_every_c_function_is_bound_or_listed(self):
        problems = coverage_problems(set(self.decls), _lib.bound(), _lib.UNBOUND)
        self.assertEqual(problems, [], "\n".join(problems))
        print("\n# %d CW_API functions: %d bound, %d deliberately unbound:" %
              (len(self.decls), len(_lib.bound()), len(_lib.UNBOUND)))
        for name, why in sorted(_lib.UNBOUND.items()):
            print("#   %s: %s" % (name, why))

    def test_the_library_exports_what_the_headers_declare(self):
        exported = nm_exports(_lib.path) if os.sep in _lib.path else None
        if exported is None:
            self.skipTest("no nm, or the library was found by name only (%s)" % _lib.path)
        self.assertEqual(sorted(set(self.decls) - exported), [], "declared, not exported by %s" % _lib.path)
        self.assertEqual(sorted(exported - set(self.decls)), [], "exported by %s, declared in no header" % _lib.path)

    def test_signatures_match_the_declarations(self):
        problems = signature_problems(_lib.bound(), self.decls, self.text)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_the_checks_fail_on_a_gap_or_a_wrong_signature(self):
        bound = dict(_lib.bound())
        exports = set(self.decls) | {"cw_something_new"}
        self.assertIn("cw_something_new: exported, neither bound (_lib._SIGNATURES) nor listed in _lib.UNBOUND",
                      coverage_problems(exports, bound, _lib.UNBOUND))
        self.assertTrue(coverage_problems(set(self.decls), bound, dict(_lib.UNBOUND, cw_gone="was removed")))
        # size_t bound as int (the upper half of a 64-bit count lost), a parameter missing, a wrong struct
        restype, argtypes = bound["cw_buffer_create"]
        bound["cw_buffer_create"] = (restype, argtypes[:2] + [ctypes.c_int])
        restype, argtypes = bound["cw_pipeline_connect"]
        bound["cw_pipeline_connect"] = (restype, argtypes[:-1])
        restype, argtypes = bound["cw_stream_get_info"]
        bound["cw_stream_get_info"] = (restype, [argtypes[0], ctypes.POINTER(_lib.PoolInfo)])
        problems = signature_problems(bound, self.decls, self.text)
        self.assertTrue(any(p.startswith("cw_buffer_create: parameter 3") for p in problems), problems)
        self.assertTrue(any(p.startswith("cw_pipeline_connect: 5 parameters") for p in problems), problems)
        self.assertTrue(any(p.startswith("cw_stream_get_info: parameter 2") for p in problems), problems)


if __name__ == "__main__":
    unittest.main()
