# SPDX-License-Identifier: BSD-2-Clause
"""GPU: the examples that need one (test_examples.py runs the others on the
fake driver): kernels.py (an NVRTC kernel launched and its every value
checked) and resident_cupy.py (the resident loop with CuPy arrays), each in
a fresh interpreter. Skipped without a GPU.

Run: CUWEAVE_LIBRARY=build/make/libcuweave.so.2 \\
     python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
sys.path.insert(0, PACKAGE_ROOT)

import cuweave  # noqa: E402


def _have_gpu():
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
    except cuweave.CuweaveError:
        return False


@unittest.skipUnless(_have_gpu(), "needs a GPU")
class TestGpuExamples(unittest.TestCase):
    def run_example(self, name):
        env = dict(os.environ)
        for k in ("CUWEAVE_LIBCUDA", "CUWEAVE_LIBNVRTC", "FAKE_CUDA_FEATURES"):  # the real driver and NVRTC
            env.pop(k, None)
        env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run([sys.executable, os.path.join(PACKAGE_ROOT, "examples", name)], capture_output=True,
                             text=True, env=env, timeout=300)
        print("\n# %s:\n%s" % (name, out.stdout.strip()))
        return out

    def test_kernels(self):
        out = self.run_example("kernels.py")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("[4, 8, 4, 8, 4]", out.stdout)
        self.assertIn("(0.5, 2.5, 4.5) True", out.stdout)
        # NVRTC 13 calls it "catastrophic error: #error directive: not today"
        self.assertRegex(out.stdout, r"NVRTC said: bad\.cu\(1\): .*error.*not today")

    def test_resident_cupy(self):
        out = self.run_example("resident_cupy.py")
        if out.returncode == 77:
            self.skipTest("no CuPy")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
