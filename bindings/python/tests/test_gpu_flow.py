# SPDX-License-Identifier: BSD-2-Clause
"""GPU: pipelines of Python operators whose compute launches CuPy or PyTorch
work on the stream the operator receives (io.receive_stream, wrapped with
cupy.cuda.ExternalStream / torch.cuda.ExternalStream), as a C operator
launches on it. Two operators: A writes a cuweave buffer (io.alloc) with a
slow writer (PASSES passes over 16 MiB), B reads it on its own stream, which
cuweave ordered behind A's work on the GPU (no host wait: the buffers' views
name no stream, so neither library synchronises by itself), and keeps
2 * x + 1; every value of every iteration is checked after the run. B
reading before A's passes finished would see smaller values.

Skipped without a GPU, or without CuPy (PyTorch) for its test.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import cuweave  # noqa: E402

try:
    import cupy as cp
except Exception:  # noqa: BLE001
    cp = None
try:
    import torch
except Exception:  # noqa: BLE001
    torch = None

N = 1 << 22        # float32 per buffer (16 MiB)
PASSES = 200       # A's slow writer: that many kernels over the buffer
ITERATIONS = 5


def _have_gpu():
    # A real one: in a run of the whole folder the CPU tests' modules have
    # chosen the fake driver (tests/fake_cuda.c) before this one is imported.
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
    except cuweave.CuweaveError:
        return False


HAVE_GPU = _have_gpu()


class _Case:
    """The pipeline A -> B, built from two operators' computes."""

    def run_pipeline(self, a_compute, b_compute):
        ctx = cuweave.Context(0)  # the device's primary context, which CuPy and PyTorch use too
        p = cuweave.Pipeline(ctx)
        p.add(cuweave.Operator("A", a_compute, outputs=["out"]), cuweave.Operator("B", b_compute, inputs=["in"]))
        p.connect("A", "out", "B", "in")
        p.run(ITERATIONS)
        p.synchronize()  # the GPU has finished every operator's last work
        return ctx, p


@unittest.skipUnless(cp is not None and HAVE_GPU, "needs a GPU and CuPy")
class TestCuPyOperators(unittest.TestCase, _Case):
    def test_two_cupy_operators_ordered_by_the_pipeline(self):
        results, streams = [], {"A": set(), "B": set()}

        def a_compute(io):
            s = io.receive_stream()          # A's own stream (a source: nothing to wait for)
            streams["A"].add(s.cu_stream)
            buf = io.alloc(N, "float32")     # on that stream
            with cp.cuda.ExternalStream(s.cu_stream):
                x = cp.asarray(buf.view(N, "float32"))  # no copy, no stream named: no sync
                x[...] = cp.arange(N, dtype=cp.float32)
                for _ in range(PASSES):
                    x += 1.0
                x += float(io.iteration)
            io.emit("out", buffer=buf)      # carries A's stream

        def b_compute(io):
            m = io.receive("in")
            s = io.receive_stream("in")      # B's stream, waiting on the GPU for A's work
            streams["B"].add(s.cu_stream)
            with cp.cuda.ExternalStream(s.cu_stream):
                x = cp.asarray(m.buffer.view(N, "float32"))
                results.append(x * 2.0 + 1.0)  # a CuPy array computed (and allocated) on B's stream

        ctx, p = self.run_pipeline(a_compute, b_compute)
        cp.cuda.Device().synchronize()
        self.assertEqual(len(results), ITERATIONS)
        self.assertEqual(len(streams["A"]), 1)
        self.assertEqual(len(streams["B"]), 1)
        self.assertNotEqual(streams["A"], streams["B"])
        base = cp.arange(N, dtype=cp.float32)
        wrong = [int((r != 2.0 * (base + PASSES + i) + 1.0).sum()) for i, r in enumerate(results)]
        print("\n# CuPy A -> CuPy B through a cuweave pipeline: %d iterations of %d values, wrong: %s"
              % (ITERATIONS, N, wrong))
        self.assertEqual(wrong, [0] * ITERATIONS)
        del results[:]
        p.close()
        ctx.close()

    def test_an_exception_in_a_cupy_compute(self):
        def a_compute(io):
            s = io.receive_stream()
            with cp.cuda.ExternalStream(s.cu_stream):
                cp.zeros(4, dtype=cp.float32).reshape(3)  # ValueError from CuPy

        def b_compute(io):
            pass

        ctx = cuweave.Context(0)
        p = cuweave.Pipeline(ctx)
        p.add(cuweave.Operator("A", a_compute, outputs=["out"]), cuweave.Operator("B", b_compute, inputs=["in"]))
        p.connect("A", "out", "B", "in")
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            p.run(1)
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        self.assertIn("operator 'A' (compute) raised ValueError", str(cm.exception))
        p.close()
        ctx.close()


@unittest.skipUnless(torch is not None and HAVE_GPU, "needs a GPU and PyTorch")
class TestTorchOperators(unittest.TestCase, _Case):
    def test_two_torch_operators_ordered_by_the_pipeline(self):
        if not torch.cuda.is_available():
            self.skipTest("PyTorch sees no GPU")
        results = []

        def a_compute(io):
            s = io.receive_stream()
            buf = io.alloc(N, "float32")
            with torch.cuda.stream(torch.cuda.ExternalStream(s.cu_stream)):
                x = torch.as_tensor(buf.view(N, "float32"), device="cuda")  # shares the buffer's memory
                x.copy_(torch.arange(N, dtype=torch.float32, device="cuda"))
                for _ in range(PASSES):
                    x.add_(1.0)
                x.add_(float(io.iteration))
            io.emit("out", buffer=buf)

        def b_compute(io):
            m = io.receive("in")
            s = io.receive_stream("in")
            with torch.cuda.stream(torch.cuda.ExternalStream(s.cu_stream)):
                x = torch.as_tensor(m.buffer.view(N, "float32"), device="cuda")
                results.append(x * 2.0 + 1.0)  # computed (and allocated) on B's stream

        ctx, p = self.run_pipeline(a_compute, b_compute)
        torch.cuda.synchronize()
        self.assertEqual(len(results), ITERATIONS)
        base = torch.arange(N, dtype=torch.float32, device="cuda")
        wrong = [int((r != 2.0 * (base + PASSES + i) + 1.0).sum()) for i, r in enumerate(results)]
        print("\n# PyTorch A -> PyTorch B through a cuweave pipeline: %d iterations of %d values, wrong: %s"
              % (ITERATIONS, N, wrong))
        self.assertEqual(wrong, [0] * ITERATIONS)
        del results[:]
        p.close()
        ctx.close()


@unittest.skipUnless(cp is not None and torch is not None and HAVE_GPU, "needs a GPU, CuPy and PyTorch")
class TestMixedOperators(unittest.TestCase, _Case):
    def test_cupy_producer_torch_consumer(self):
        if not torch.cuda.is_available():
            self.skipTest("PyTorch sees no GPU")
        results = []

        def a_compute(io):
            s = io.receive_stream()
            buf = io.alloc(N, "float32")
            with cp.cuda.ExternalStream(s.cu_stream):
                x = cp.asarray(buf.view(N, "float32"))
                x[...] = cp.arange(N, dtype=cp.float32)
                for _ in range(PASSES):
                    x += 1.0
                x += float(io.iteration)
            io.emit("out", buffer=buf)

        def b_compute(io):
            m = io.receive("in")
            s = io.receive_stream("in")
            with torch.cuda.stream(torch.cuda.ExternalStream(s.cu_stream)):
                x = torch.as_tensor(m.buffer.view(N, "float32"), device="cuda")
                results.append(x * 2.0 + 1.0)

        ctx, p = self.run_pipeline(a_compute, b_compute)
        torch.cuda.synchronize()
        base = torch.arange(N, dtype=torch.float32, device="cuda")
        wrong = [int((r != 2.0 * (base + PASSES + i) + 1.0).sum()) for i, r in enumerate(results)]
        print("\n# CuPy A -> PyTorch B through a cuweave pipeline: wrong values per iteration: %s" % wrong)
        self.assertEqual(wrong, [0] * ITERATIONS)
        del results[:]
        p.close()
        ctx.close()


if __name__ == "__main__":
    unittest.main()
