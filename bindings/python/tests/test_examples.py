# SPDX-License-Identifier: BSD-2-Clause
"""Every example of bindings/python/examples (docs/python.md shows each, as
tools/doc-commands.py checks, byte for byte) runs on the fake driver, each
in a fresh interpreter, and prints what it should. The examples that need a
GPU (a kernel launch needs the driver to describe the kernel's parameters,
which the fake does not; CuPy) run in test_gpu_examples.py. mypy --strict
checks them all (tools/test-all.sh)."""

import os
import subprocess
import sys
import unittest

import fakeenv

EXAMPLES = os.path.join(fakeenv.PACKAGE_ROOT, "examples")
GPU_ONLY = {"kernels.py": "launches a kernel", "resident_cupy.py": "CuPy on a GPU"}
FAKE_NCCL = os.path.join(os.path.dirname(fakeenv.FAKE), "libfakenccl.so")

# example -> lines its output must hold (on the fake driver)
EXPECT = {
    "library.py": ["cuweave 0.3.0 ABI 2.0.0", "CUDA 13.0.0", "device 0: cuweave fake device, sm_90, 132 SMs",
                   "CW_ERROR_INVALID_ARGUMENT from cw_device_get_info", "device must be in 0 .. "],
    "streams.py": ["device 0 non-blocking>", "no stream within 10 ms", "done: True", "GPU time: "],
    "graphs.py": ["3 launches of <cuweave.Graph", "sinks: 1", "update: UPDATED_IN_PLACE"],
    "memory.py": ["(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)", "True", "(2, 0)", "<cuweave.DLPackArray", "b'abcd'"],
    "resident.py": ["device 0 running>", "not served within 0.5 s", "RUNNING 1 requested"],
    "pipeline.py": ["[0, 1, 2, 3, 4] 10 computes"],
    "multi_gpu.py": ["[True, True]"],
    "tracing.py": ["2 spans in trace.json"],
    "logging_errors.py": ["1 CW_ERROR_INVALID_ARGUMENT cw_stream_pool_create", "ERROR cw_stream_pool_create",
                          "priority must be an int, not str"],
}


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestExamples(unittest.TestCase):
    def test_every_example_is_known(self):
        found = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
        self.assertEqual(found, sorted(set(EXPECT) | set(GPU_ONLY)))

    def run_example(self, name, **env):
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], capture_output=True, text=True,
                             env=fakeenv.child_env(**env), timeout=120)
        self.assertEqual(out.returncode, 0, "%s:\n%s%s" % (name, out.stdout, out.stderr))
        for want in EXPECT[name]:
            self.assertIn(want, out.stdout, "%s printed:\n%s" % (name, out.stdout))
        return out.stdout

    def test_examples_on_the_fake_driver(self):
        for name in sorted(EXPECT):
            with self.subTest(example=name):
                extra = {"FAKE_CUDA_DEVICES": "2", "CUWEAVE_LIBNCCL": FAKE_NCCL} if name == "multi_gpu.py" else {}
                self.run_example(name, **extra)


if __name__ == "__main__":
    unittest.main()
