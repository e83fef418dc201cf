# SPDX-License-Identifier: BSD-2-Clause
"""GPU: cuweave streams and CuPy streams ordered through cuweave, proved with
data; cuweave buffers read and written by CuPy through __cuda_array_interface__
(its stream honoured, proved against a control without it); a graph captured from Python with CuPy work in it; an NVRTC kernel
launched with Python floats and ints and CuPy arrays; the resident loop
served from Python with CuPy arrays, every result checked. Skipped without a
GPU or without CuPy (the GPU machine has both).

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
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
    # A real one: in a run of the whole folder the CPU tests' modules have
    # chosen the fake driver (tests/fake_cuda.c) before this one is imported.
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
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


SLOW_FILL = r"""
extern "C" __global__ void slow_fill(unsigned *p, unsigned n, unsigned v, long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + i;
}
"""


class _NoStream:
    """The same memory described without a stream: the control (CuPy does not
    synchronise with the writer)."""

    def __init__(self, buf):
        cai = dict(buf.__cuda_array_interface__)
        cai["stream"] = None
        self.__cuda_array_interface__ = cai


@unittest.skipUnless(cp is not None and _have_gpu(), "needs a GPU and CuPy")
class TestBuffersWithCuPy(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def test_cupy_reads_a_cuweave_buffer_after_its_writer(self):
        n = 1 << 20
        k = cuweave.Program(self.ctx, SLOW_FILL, name="slow_fill.cu").load().kernel("slow_fill")
        k.preload(self.ctx)
        results, want = {}, {}
        for mode, v in (("interface", 7), ("control", 1000)):  # (a recycled buffer may hold the other's values)
            buf = cuweave.Buffer(self.s, n, "uint32")
            want[mode] = sum(v + i for i in range(n))
            k.launch(self.s, 64, 256, buf, n, v, 50 * 1000 * 1000)  # 50 ms, then the values
            reader = cp.cuda.Stream(non_blocking=True)
            with reader:  # CuPy's own stream: it honours the interface's "stream"
                arr = cp.asarray(buf if mode == "interface" else _NoStream(buf))
                self.assertEqual(arr.data.ptr, buf.ptr)  # no copy
                total = int(arr.astype(cp.uint64).sum())
            buf.used_by(cuweave.Stream.wrap(self.ctx, reader.ptr))
            results[mode] = total
            self.s.synchronize()
            buf.close()
        print("\n# CuPy summing a cuweave buffer behind a 50 ms writer: right %s with the interface's stream, "
              "%s without it" % (results["interface"] == want["interface"], results["control"] == want["control"]))
        self.assertEqual(results["interface"], want["interface"])
        # the control: without the stream CuPy reads before the writer is done
        self.assertNotEqual(results["control"], want["control"])

    def test_cuweave_reads_what_cupy_wrote(self):
        n = 1 << 22
        buf = cuweave.Buffer(self.s, n, "float32")
        writer = cp.cuda.Stream(non_blocking=True)
        with writer:
            arr = cp.asarray(buf)
            arr[...] = cp.arange(n, dtype=cp.float32)
            for _ in range(100):  # a slow writer
                arr += 1.0
        buf.written_on(cuweave.Stream.wrap(self.ctx, writer.ptr))
        out = buf.copy_to_host(self.s)  # self.s waits for CuPy's stream first
        import struct
        head = struct.unpack("<4f", bytes(out[:16]))
        tail = struct.unpack("<f", bytes(out[-4:]))[0]
        self.assertEqual(head, (100.0, 101.0, 102.0, 103.0))
        self.assertEqual(tail, float(n - 1 + 100))
        buf.close()


APPLY = r"""
#include "cuweave/resident_device.h"
extern "C" __global__ void apply(const cw_resident_ctl *ctl, const unsigned *in, unsigned *out) {
    if (cw_resident_skip(ctl)) return;
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = in[0] * 3u + 1u;
        out[1] = (unsigned)cw_resident_sequence(ctl);
    }
}
"""

AXPB = r"""
extern "C" __global__ void axpb(float a, const float *x, float b, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


@unittest.skipUnless(cp is not None and _have_gpu(), "needs a GPU and CuPy")
class TestGraphsKernelsResidentOnGPU(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def test_kernel_launch_with_python_and_cupy_arguments(self):
        k = cuweave.Program(self.ctx, AXPB, name="axpb.cu").load().kernel("axpb")
        self.assertEqual(k.param_sizes(self.ctx), [4, 8, 4, 8, 4])
        n = 100000
        x = cp.arange(n, dtype=cp.float32)
        y = cp.zeros(n, dtype=cp.float32)
        cp.cuda.Device().synchronize()
        k.launch(self.s, (n + 255) // 256, 256, 2.0, x, 0.5, y, n)
        self.s.synchronize()
        self.assertTrue(bool((y == 2.0 * x + 0.5).all()))

    def test_graph_captured_from_python_with_cupy_work(self):
        x = cp.arange(1 << 16, dtype=cp.float32)
        y = cp.zeros_like(x)
        with cp.cuda.ExternalStream(self.s.cu_stream):
            cp.add(y, x, out=y)  # warm: CuPy loads its kernel before the capture
        self.s.synchronize()
        y.fill(0)
        cp.cuda.Device().synchronize()
        with self.s.capture() as cap:
            with cp.cuda.ExternalStream(self.s.cu_stream):
                cp.add(y, x, out=y)
        exe = cap.graph.instantiate()
        for _ in range(5):
            exe.launch(self.s)
        self.s.synchronize()
        self.assertTrue(bool((y == 5 * x).all()))
        exe.close()
        cap.graph.close()

    def test_partition_runs_a_kernel(self):
        caps = cuweave.partition_caps(0)
        if not caps["supported"]:
            self.skipTest("no green contexts on this device")
        ps = cuweave.PartitionGroup([caps["min_partition"] * 2])
        self.assertEqual(len(ps), 2)  # the partition and the leftover
        part = ps.context(0)
        s = cuweave.Stream(part)
        k = cuweave.Program(part, AXPB, name="axpb_part.cu").load().kernel("axpb")
        n = 4096
        x = cp.arange(n, dtype=cp.float32)
        y = cp.zeros(n, dtype=cp.float32)
        cp.cuda.Device().synchronize()
        k.launch(s, (n + 255) // 256, 256, 3.0, x, 1.0, y, n)
        s.synchronize()
        self.assertTrue(bool((y == 3.0 * x + 1.0).all()))
        # the group goes; the partition stays while its stream lives
        ps.close()
        self.assertTrue(ps.closed)
        k.launch(s, (n + 255) // 256, 256, 2.0, x, 0.0, y, n)
        s.synchronize()
        self.assertTrue(bool((y == 2.0 * x).all()))
        s.close()

    def test_order_a_torch_stream_before_a_cuweave_stream(self):
        try:
            import torch
        except Exception:  # noqa: BLE001
            self.skipTest("no PyTorch")
        if not torch.cuda.is_available():
            self.skipTest("PyTorch sees no GPU")
        k = cuweave.Program(self.ctx, AXPB, name="axpb_torch.cu").load().kernel("axpb")
        n = 1 << 24
        producer = torch.cuda.Stream()
        x = torch.zeros(n, device="cuda", dtype=torch.float32)
        y = torch.full((n,), -1.0, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        with torch.cuda.stream(producer):
            for _ in range(200):  # a slow writer
                x += 1.0
        wrapped = cuweave.Stream.wrap(self.ctx, producer)
        self.s.wait(wrapped)  # GPU-side: the copy waits for the 200 passes
        k.launch(self.s, (n + 255) // 256, 256, 1.0, x, 0.0, y, n)
        self.s.synchronize()
        self.assertEqual(float(y.min()), 200.0)
        self.assertEqual(float(y.max()), 200.0)
        print("\n# PyTorch producer -> cuweave consumer: %d values, all exactly 200.0" % n)
        wrapped.close()

    def test_resident_loop_with_cupy_arrays(self):
        import cupyx
        import numpy as np
        k = cuweave.Program(self.ctx, APPLY, name="apply.cu",
                            headers={"cuweave/resident_device.h": cuweave.resident_device_header()}).load().kernel("apply")
        inp = cp.zeros(1, dtype=cp.uint32)
        out = cp.zeros(2, dtype=cp.uint32)
        staged = cupyx.empty_pinned(1, dtype=np.uint32)  # pinned: the copy is done when it returns
        back = cupyx.empty_pinned(2, dtype=np.uint32)
        cp.cuda.Device().synchronize()
        r = cuweave.Resident(self.ctx, sleep_interval=0)
        with self.s.capture() as cap:
            k.launch(self.s, 1, 1, r.ctl, inp, out)
        r.set_workload(cap.graph)
        cap.graph.close()
        r.build()  # loads everything before the loop runs (loading would wait for it)
        r.launch()
        n, bad = 2000, 0
        for i in range(1, n + 1):
            staged[0] = (i * 2654435761) & 0xFFFFFFFF
            inp.data.copy_from_host(staged.ctypes.data, 4)
            seq = r.data_ready()
            r.wait_result(seq, timeout=2.0)
            out.data.copy_to_host(back.ctypes.data, 8)
            if int(back[0]) != (int(staged[0]) * 3 + 1) & 0xFFFFFFFF or int(back[1]) != seq:
                bad += 1
        st = r.stats()
        r.tear_down(timeout=2.0)
        r.close()
        print("\n# resident loop from Python: %d requests with CuPy arrays, %d wrong; GPU iteration median %.2f us"
              % (n, bad, st["iter_median"] * 1e6))
        self.assertEqual(bad, 0)
        self.assertEqual(st["iterations"], n)


if __name__ == "__main__":
    unittest.main()
