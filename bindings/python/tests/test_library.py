# SPDX-License-Identifier: BSD-2-Clause
"""Finding and checking the C library, and the versions:

  - the soname the bindings load (cuweave._lib.SONAME) is the one the build
    makes: libcuweave.so.CW_API_VERSION_MAJOR of include/cuweave/version.h,
    and the DT_SONAME of the library loaded;
  - the package version (cuweave.__version__; the wheel's is meson's, from version.h) is the C
    library's release (version.h, and cw_get_versions of the library loaded);
  - discovery, each place in a fresh interpreter with a copy of the package:
    CUWEAVE_LIBRARY (only that file), the library beside the package (what a
    wheel that bundles it installs), ctypes.util.find_library (patched, and
    for real through LD_LIBRARY_PATH where ld and objdump are installed),
    the bare soname through the dynamic loader; a library of another ABI is
    passed over (ImportError naming why).

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 python3 -m unittest test_library -v
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_PARENT = os.path.dirname(HERE)
sys.path.insert(0, PKG_PARENT)
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))

import cuweave  # noqa: E402
from cuweave import _lib  # noqa: E402


def _define(name):
    with open(os.path.join(ROOT, "include", "cuweave", "version.h")) as f:
        return int(re.search(r"#define %s (\d+)" % name, f.read()).group(1))


def _real_library():
    """The library file loaded (resolved), for copies."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith(_lib.SONAME):
                return path
    raise AssertionError("libcuweave is not mapped")


def _soname_of(path):
    for tool, args in (("readelf", ["-d"]), ("objdump", ["-p"])):
        if shutil.which(tool):
            out = subprocess.run([tool] + args + [path], capture_output=True, text=True).stdout
            m = re.search(r"SONAME\s+(?:Library soname: \[)?([^\]\s]+)", out)
            if m:
                return m.group(1)
    return None


class TestVersions(unittest.TestCase):
    def test_the_soname_is_the_builds(self):
        major = _define("CW_API_VERSION_MAJOR")
        self.assertEqual(_lib.ABI_MAJOR, major)
        self.assertEqual(_lib.SONAME, "libcuweave.so.%d" % major)
        soname = _soname_of(_real_library())
        if soname is None:
            self.skipTest("neither readelf nor objdump to read the soname")
        self.assertEqual(soname, _lib.SONAME)
        self.assertEqual(cuweave.abi_version()[0], major)

    def test_the_package_version_is_the_libraries(self):
        want = "%d.%d.%d" % tuple(_define("CW_VERSION_" + k) for k in ("MAJOR", "MINOR", "PATCH"))
        # The wheel's version is meson's project version (pyproject.toml at the top of the tree: dynamic),
        # which meson.build reads from version.h.
        pyproject = os.path.join(PKG_PARENT, "..", "..", "pyproject.toml")
        if os.path.exists(pyproject):
            with open(pyproject) as f:
                self.assertRegex(f.read(), r'(?m)^dynamic = \["version"\]')
        self.assertEqual(cuweave.__version__, want)
        self.assertEqual("%d.%d.%d" % cuweave.version(), want)  # what the loaded library says

    def test_candidates_in_order(self):
        env = {"CUWEAVE_LIBRARY": "/x/libcuweave.so.2"}
        self.assertEqual(_lib.candidates(env, lambda n: "libcuweave.so.2"), [("CUWEAVE_LIBRARY", "/x/libcuweave.so.2")])
        got = _lib.candidates({}, lambda n: "libcuweave.so.2" if n == "cuweave" else None)
        where = [w for w, _ in got]
        self.assertEqual(where[0], "package")
        self.assertEqual(got[0][1], os.path.join(os.path.dirname(_lib.__file__), _lib.SONAME))
        if os.path.isfile(os.path.join(_lib._ROOT, "include", "cuweave", "version.h")):
            self.assertEqual(where[1:4], ["source tree"] * 3)  # this package sits in the source tree
            self.assertIn(os.path.join(ROOT, "build", "meson", "src", _lib.SONAME), [p for _, p in got])
        else:  # an installed package (tests/check-wheel.sh)
            self.assertNotIn("source tree", where)
        self.assertEqual(got[-2:], [("find_library", "libcuweave.so.2"), ("system", _lib.SONAME)])
        got = _lib.candidates({}, lambda n: None)
        self.assertEqual([w for w, _ in got][-1], "system")
        self.assertNotIn("find_library", [w for w, _ in got])


class TestDiscovery(unittest.TestCase):
    """Each case: a copy of the package in a temporary folder (outside any
    source tree), imported by a fresh interpreter."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cuweave-discovery-")
        self.site = os.path.join(self.tmp, "site")
        # the package imported: this tree's, or an installed wheel's (tests/check-wheel.sh)
        shutil.copytree(os.path.dirname(_lib.__file__), os.path.join(self.site, "cuweave"),
                        ignore=shutil.ignore_patterns("__pycache__", "libcuweave.so*"))
        self.lib = _real_library()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_child(self, code="", env=None, patch_find_library="keep"):
        prelude = "import sys; sys.path.insert(0, %r)\n" % self.site
        if patch_find_library != "keep":
            prelude += "import ctypes.util; ctypes.util.find_library = lambda name: %r\n" % (patch_find_library,)
        prelude += ("import cuweave\nwhere, path = cuweave.library()\n"
                    "mapped = [l.split()[-1] for l in open('/proc/self/maps') if 'libcuweave.so' in l]\n"
                    "print('WHERE', where); print('PATH', path); print('MAPPED', mapped[0] if mapped else '')\n")
        e = {k: v for k, v in os.environ.items() if k not in ("CUWEAVE_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
        e.update(env or {})
        out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=e,
                             cwd=self.tmp)
        fields = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        return out, fields

    def copy_lib(self, folder):
        os.makedirs(folder, exist_ok=True)
        dst = os.path.join(folder, _lib.SONAME)
        shutil.copy(self.lib, dst)
        return dst

    def test_cuweave_library_variable(self):
        out, f = self.run_child(env={"CUWEAVE_LIBRARY": self.lib})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual((f["WHERE"], f["PATH"]), ("CUWEAVE_LIBRARY", self.lib))
        # the variable names the only place: a wrong one is an error, not a fallback
        out, f = self.run_child(env={"CUWEAVE_LIBRARY": "/nonexistent/libcuweave.so.2"})
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ImportError", out.stderr)
        self.assertIn("/nonexistent/libcuweave.so.2 (CUWEAVE_LIBRARY)", out.stderr)

    def test_beside_the_package(self):
        dst = self.copy_lib(os.path.join(self.site, "cuweave"))
        out, f = self.run_child(patch_find_library=None)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual((f["WHERE"], f["PATH"], f["MAPPED"]), ("package", dst, dst))

    def test_find_library(self):
        dst = self.copy_lib(os.path.join(self.tmp, "lib"))
        out, f = self.run_child(patch_find_library=dst)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual((f["WHERE"], f["PATH"], f["MAPPED"]), ("find_library", dst, dst))

    @unittest.skipUnless(shutil.which("ld") and shutil.which("objdump"), "find_library needs ld and objdump here")
    def test_find_library_for_real(self):
        folder = os.path.join(self.tmp, "lib")
        dst = self.copy_lib(folder)
        os.symlink(_lib.SONAME, os.path.join(folder, "libcuweave.so"))  # what a -dev install adds
        out, f = self.run_child(env={"LD_LIBRARY_PATH": folder})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual((f["WHERE"], f["PATH"], f["MAPPED"]), ("find_library", _lib.SONAME, dst))

    def test_the_soname_through_the_loader(self):
        folder = os.path.join(self.tmp, "lib")
        dst = self.copy_lib(folder)
        out, f = self.run_child(env={"LD_LIBRARY_PATH": folder}, patch_find_library=None)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual((f["WHERE"], f["PATH"], f["MAPPED"]), ("system", _lib.SONAME, dst))

    @unittest.skipUnless(shutil.which(os.environ.get("CC") or "cc"), "no C compiler")
    def test_another_abi_is_passed_over(self):
        # Libraries with the right file name beside the package that are not
        # this ABI: one whose symbols carry another version node, one without
        # symbol versions that lacks functions; the real one is found next.
        src = os.path.join(self.tmp, "old.c")
        with open(src, "w") as f:
            f.write("int cw_init(void) { return 0; }\nint cw_get_versions(void *v) { return 0; }\n")
        ver = os.path.join(self.tmp, "old.map")
        with open(ver, "w") as f:
            f.write("CUWEAVE_0 { global: cw_*; local: *; };\n")
        pkg_lib = os.path.join(self.site, "cuweave", _lib.SONAME)
        real = self.copy_lib(os.path.join(self.tmp, "lib"))
        cc = os.environ.get("CC") or "cc"
        abi = "not ABI %d" % _lib.ABI_MAJOR
        for extra, why in ((["-Wl,--version-script=" + ver], abi + " (its symbols lack the version node CUWEAVE_%d" % _lib.ABI_MAJOR),
                           ([], abi + " (it lacks cw_status_name")):
            subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname," + _lib.SONAME, src, "-o", pkg_lib] + extra,
                           check=True)
            out, f = self.run_child(patch_find_library=None)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("ImportError", out.stderr)
            self.assertIn("%s (package): %s" % (pkg_lib, why), out.stderr)
            out, f = self.run_child(patch_find_library=real)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual((f["WHERE"], f["MAPPED"]), ("find_library", real))


if __name__ == "__main__":
    unittest.main()
