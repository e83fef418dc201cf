# SPDX-License-Identifier: BSD-2-Clause
"""What the CPU tests of the bindings share: the package from this tree, the
fake driver (tests/fake_cuda.c) with all its features, the fake NVRTC beside
it, the kernel cache in a temporary folder. Import it before cuweave.

CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a
missing fake driver is then an error, not a reason to skip (HAVE_FAKE)."""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)  # bindings/python
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, PACKAGE_ROOT)
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)
HAVE_FAKE = os.path.exists(FAKE)

# The driver is chosen once, at the first cuweave call (a module of the same
# run may have chosen it already: the same settings).
os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
# traces on timing events: no CUPTI from the machine beside the fake driver
os.environ["CUWEAVE_LIBCUPTI"] = "/nonexistent/libcupti.so.13"
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
os.environ.pop("CUWEAVE_SERIALIZE", None)


def child_env(**extra):
    """The environment for a child interpreter that imports this tree's cuweave on the fake driver."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env

# tests/check-wheel.sh runs these tests against an installed wheel, from a
# view of the tree without bindings/python/cuweave: CUWEAVE_TESTS_INSTALLED
# is then the site-packages folder the package must come from.
if os.environ.get("CUWEAVE_TESTS_INSTALLED"):
    import cuweave as _installed

    if not os.path.abspath(_installed.__file__).startswith(os.environ["CUWEAVE_TESTS_INSTALLED"]):
        raise RuntimeError("CUWEAVE_TESTS_INSTALLED: cuweave was imported from %s" % _installed.__file__)
