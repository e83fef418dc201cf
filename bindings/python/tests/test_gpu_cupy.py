"""GPU: cuweave streams and CuPy streams ordered through cuweave, proved with
data. Skipped without a GPU or without CuPy (the GPU machine has both).

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.0 python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
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


def _have_gpu():
    try:
        cuweave.init()
        return cuweave.device_count() > 0
    except cuweave.CuweaveError:
        return False


@unittest.skipUnless(cp is not None and _have_gpu(), "needs a GPU and CuPy")
class TestCuPyInterop(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)  # the primary context CuPy uses too

    def tearDown(self):
        self.ctx.close()

    def test_cupy_runs_on_a_cuweave_stream(self):
        s = cuweave.Stream(self.ctx)
        with cp.cuda.ExternalStream(s.cu_stream):
            a = cp.arange(1 << 20, dtype=cp.float32)
            b = a * 3.0
        f = cuweave.Future(s)
        f.wait(timeout=10)
        self.assertTrue(bool((b.get() == cp.arange(1 << 20, dtype=cp.float32).get() * 3.0).all()))
        s.close()

    def test_order_a_cupy_stream_before_a_cuweave_stream(self):
        producer = cp.cuda.Stream(non_blocking=True)
        wrapped = cuweave.Stream.wrap(self.ctx, producer.ptr)
        consumer = cuweave.Stream(self.ctx)
        n = 1 << 24
        with producer:
            x = cp.zeros(n, dtype=cp.float32)
            for _ in range(200):  # a slow writer: many passes over 64 MiB
                x += 1.0
        consumer.wait(wrapped)  # GPU-side: consumer waits for the 200 passes
        with cp.cuda.ExternalStream(consumer.cu_stream):
            y = x.copy()
        cuweave.Future(consumer).wait(timeout=30)
        host = y.get()
        self.assertEqual(float(host.min()), 200.0)
        self.assertEqual(float(host.max()), 200.0)
        print("\n# CuPy producer -> cuweave consumer: %d values, all exactly 200.0" % n)
        wrapped.close()
        consumer.close()


if __name__ == "__main__":
    unittest.main()
