# SPDX-License-Identifier: BSD-2-Clause
"""The wheel carries the C library: `pip install ./bindings/python` (or
`pip wheel`) builds libcuweave.so.2 from this source tree with the Makefile
(STATIC_LIBSTDCXX=1: it needs no libstdc++ at run time, only libc) and puts
it in the package, which loads it first (cuweave/_lib.py). The wheel is
tagged for the platform (py3-none-linux_<arch>: the Python code is pure, the
library is not). Needs make, a C/C++ compiler and python3, as the library's
build does (README). CUWEAVE_BUNDLE=PATH bundles that library file instead
of building one. Building from an sdist (no source tree around it) fails and
says so."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SONAME = "libcuweave.so.2"


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("CUWEAVE_BUNDLE")
        if not lib:
            if not os.path.isfile(os.path.join(ROOT, "Makefile")) or \
                    not os.path.isfile(os.path.join(ROOT, "include", "cuweave", "version.h")):
                raise SystemExit("cuweave: the C library is built from the source tree around bindings/python "
                                 "(%s has none); install from a checkout, or set CUWEAVE_BUNDLE to a %s"
                                 % (ROOT, SONAME))
            out = os.path.abspath(os.path.join(self.get_finalized_command("build").build_temp, "libcuweave"))
            subprocess.check_call(["make", "-C", ROOT, "-j%d" % (os.cpu_count() or 1), "O=" + out,
                                   "STATIC_LIBSTDCXX=1", "lib"])
            lib = os.path.join(out, SONAME)
        dst = os.path.join(self.build_lib, "cuweave", SONAME)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), dst)
        os.chmod(dst, 0o755)


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
