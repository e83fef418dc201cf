# SPDX-License-Identifier: BSD-2-Clause
"""GPU: DLPack both ways with PyTorch and CuPy (issue 41), each proved with
data and against a control.

cuweave -> them: a Buffer written by a 50 ms kernel on a cuweave stream is
taken with torch.from_dlpack / cupy.from_dlpack (no copy: the same address)
while a stream of theirs is current, and summed there at once: the sum is
right because __dlpack__(stream=theirs) made their stream wait for the
writer; the control, the same buffer exported with stream=-1 (no ordering)
and read the same way, sums it wrong. The tensor outlives the Buffer object
(closed before the read) and its deleter gives the memory back. Their
writes come back too: a tensor written on their stream, named with
written_on, read by copy_to_host.

them -> cuweave: a tensor written on their stream after a 50 ms GPU delay
is taken with cuweave.from_dlpack(tensor, stream=s) while their stream is
current (their __dlpack__ makes s wait), copied by a cuweave kernel on s
into a Buffer and read back: every value right; the control, their
__dlpack__(stream=-1) (no ordering) taken the same way, reads the values
from before the write.

Skipped without a GPU, or without PyTorch / CuPy (the GPU machine has both).

Run: CUWEAVE_LIBRARY=build/make/libcuweave.so.2 \\
     python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
"""

import gc
import os
import struct
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import cuweave  # noqa: E402
from cuweave import _dlpack  # noqa: E402

try:
    import torch
except Exception:  # noqa: BLE001
    torch = None
try:
    import cupy as cp
except Exception:  # noqa: BLE001
    cp = None


def _have_gpu():
    # A real one: in a run of the whole folder the CPU tests' modules may have
    # chosen the fake driver (tests/fake_cuda.c) before this one is imported.
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
    except cuweave.CuweaveError:
        return False


GPU = _have_gpu()

KERNELS = r"""
extern "C" __global__ void slow_fill(int *p, unsigned n, int v, long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + (int)i;
}
extern "C" __global__ void copy_i32(const int *src, int *dst, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
"""
N = 1 << 20
DELAY_NS = 50 * 1000 * 1000  # 50 ms on the GPU before the values are written


def want_sum(v):
    return sum(range(v, v + N))


class _Base(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)  # the primary context PyTorch and CuPy use too
        self.s = cuweave.Stream(self.ctx)
        mod = cuweave.Program(self.ctx, KERNELS, name="dlpack_test.cu").load()
        self.fill, self.copy = mod.kernel("slow_fill"), mod.kernel("copy_i32")
        self.fill.preload(self.ctx)
        self.copy.preload(self.ctx)

    def tearDown(self):
        gc.collect()
        self.s.synchronize()
        self.s.close()
        self.ctx.close()

    def slow_buffer(self, v):
        """A Buffer of N int32 that a kernel on self.s fills with v + i after 50 ms."""
        buf = cuweave.Buffer(self.s, N, "int32")
        self.fill.launch(self.s, 64, 256, buf, N, v, DELAY_NS)
        return buf

    def read_back(self, arr):
        """Copies N int32 from a device array on self.s into a Buffer and reads it on the host."""
        out = cuweave.Buffer(self.s, N, "int32")
        self.copy.launch(self.s, 64, 256, arr, out, N)
        data = out.copy_to_host(self.s)
        out.close()
        return struct.unpack("<%di" % N, bytes(data))


@unittest.skipUnless(GPU and torch is not None, "needs a GPU and PyTorch")
class TestDLPackWithTorch(_Base):
    def test_torch_reads_a_buffer_after_its_writer(self):
        results = {}
        for mode, v in (("ordered", 7), ("control", 1000)):  # (a recycled buffer may hold the other's values)
            buf = self.slow_buffer(v)
            ptr = buf.ptr
            theirs = torch.cuda.Stream()
            with torch.cuda.stream(theirs):
                if mode == "ordered":
                    t = torch.from_dlpack(buf)  # __dlpack__(stream=theirs): theirs waits for the writer
                else:
                    t = torch.from_dlpack(buf.__dlpack__(stream=-1))  # no ordering: the control
                self.assertEqual(t.data_ptr(), ptr)  # no copy
                self.assertEqual((t.shape, t.dtype, t.device.type), (torch.Size([N]), torch.int32, "cuda"))
                buf.close()  # the tensor holds the memory
                total = int(t.to(torch.int64).sum().item())
            results[mode] = total
            theirs.synchronize()
            self.s.synchronize()
            del t
            gc.collect()
        print("\n# torch summing a cuweave Buffer behind a 50 ms writer: right %s through __dlpack__(stream), "
              "%s with stream=-1" % (results["ordered"] == want_sum(7), results["control"] == want_sum(1000)))
        self.assertEqual(results["ordered"], want_sum(7))
        self.assertNotEqual(results["control"], want_sum(1000))
        self.assertEqual(_dlpack.exported(), 0)  # torch called every deleter

    def test_torch_writes_come_back(self):
        buf = cuweave.Buffer(self.s, N, "int32")
        self.s.synchronize()
        theirs = torch.cuda.Stream()
        with torch.cuda.stream(theirs):
            t = torch.from_dlpack(buf)
            torch.cuda._sleep(100 * 1000 * 1000)  # a slow writer
            t.copy_(torch.arange(N, dtype=torch.int32, device="cuda") * 3)
        buf.written_on(cuweave.Stream.wrap(self.ctx, theirs))
        data = struct.unpack("<%di" % N, bytes(buf.copy_to_host(self.s)))  # self.s waits for theirs first
        self.assertEqual(data[:4], (0, 3, 6, 9))
        self.assertEqual(data[-1], 3 * (N - 1))
        del t
        buf.close()

    def test_cuweave_takes_a_torch_tensor(self):
        results = {}
        for mode in ("ordered", "control"):
            x = torch.zeros(N, dtype=torch.int32, device="cuda")
            torch.cuda.synchronize()
            theirs = torch.cuda.Stream()
            with torch.cuda.stream(theirs):
                torch.cuda._sleep(100 * 1000 * 1000)  # the GPU waits, then writes
                x.copy_(torch.arange(N, dtype=torch.int32, device="cuda") + 5)
                if mode == "ordered":
                    arr = cuweave.from_dlpack(x, self.s)  # x.__dlpack__(stream=s): s waits for theirs
                else:
                    arr = _dlpack.take(x.__dlpack__(stream=-1), x)  # no ordering: the control
            self.assertIsInstance(arr, cuweave.DLPackArray)
            self.assertEqual((arr.ptr, arr.shape, arr.typestr, arr.device), (x.data_ptr(), (N,), "<i4", 0))
            results[mode] = self.read_back(arr)
            arr.close()
            theirs.synchronize()
        print("\n# a torch tensor read by a cuweave kernel behind torch's writer: right %s through "
              "from_dlpack(stream=s), %s with stream=-1" % (results["ordered"] == tuple(range(5, N + 5)),
                                                               results["control"] == tuple(range(5, N + 5))))
        self.assertEqual(results["ordered"], tuple(range(5, N + 5)))
        self.assertNotEqual(results["control"], tuple(range(5, N + 5)))

    def test_versioned_capsule(self):
        buf = cuweave.Buffer(self.s, (8, 4), "float32")
        cap = buf.__dlpack__(max_version=(1, 0))
        self.assertIn("dltensor_versioned", repr(cap))
        t = torch.from_dlpack(cap)
        self.assertEqual((tuple(t.shape), t.stride(), t.data_ptr()), ((8, 4), (4, 1), buf.ptr))
        del t, cap
        buf.close()


@unittest.skipUnless(GPU and cp is not None, "needs a GPU and CuPy")
class TestDLPackWithCuPy(_Base):
    def test_cupy_reads_a_buffer_after_its_writer(self):
        results = {}
        for mode, v in (("ordered", 7), ("control", 1000)):
            buf = self.slow_buffer(v)
            ptr = buf.ptr
            theirs = cp.cuda.Stream(non_blocking=True)
            with theirs:
                if mode == "ordered":
                    a = cp.from_dlpack(buf)  # __dlpack__(stream=theirs)
                else:
                    a = cp.from_dlpack(_Unordered(buf))  # __dlpack__(stream=-1): the control
                self.assertEqual(a.data.ptr, ptr)  # no copy
                buf.close()
                total = int(a.astype(cp.int64).sum())
            results[mode] = total
            theirs.synchronize()
            self.s.synchronize()
            del a
            gc.collect()
        print("\n# CuPy summing a cuweave Buffer behind a 50 ms writer: right %s through __dlpack__(stream), "
              "%s with stream=-1" % (results["ordered"] == want_sum(7), results["control"] == want_sum(1000)))
        self.assertEqual(results["ordered"], want_sum(7))
        self.assertNotEqual(results["control"], want_sum(1000))
        self.assertEqual(_dlpack.exported(), 0)

    def test_cuweave_takes_a_cupy_array(self):
        results = {}
        for mode in ("ordered", "control"):
            x = cp.zeros(N, dtype=cp.int32)
            cp.cuda.Device().synchronize()
            theirs = cp.cuda.Stream(non_blocking=True)
            # CuPy's own work: the slow fill launched on CuPy's stream (wrapped for the launch only)
            on_theirs = cuweave.Stream.wrap(self.ctx, theirs)
            self.fill.launch(on_theirs, 64, 256, x, N, 11, DELAY_NS)
            with theirs:
                if mode == "ordered":
                    arr = cuweave.from_dlpack(x, self.s)
                else:
                    arr = _dlpack.take(x.__dlpack__(stream=-1), x)
            self.assertEqual((arr.ptr, arr.shape, arr.typestr), (x.data.ptr, (N,), "<i4"))
            results[mode] = self.read_back(arr)
            arr.close()
            theirs.synchronize()
            on_theirs.close()
        print("\n# a CuPy array read by a cuweave kernel behind CuPy's writer: right %s through "
              "from_dlpack(stream=s), %s with stream=-1" % (results["ordered"] == tuple(range(11, N + 11)),
                                                               results["control"] == tuple(range(11, N + 11))))
        self.assertEqual(results["ordered"], tuple(range(11, N + 11)))
        self.assertNotEqual(results["control"], tuple(range(11, N + 11)))

    def test_array_interface_names_the_legacy_stream_as_1(self):
        legacy = cuweave.Stream.wrap(self.ctx, 0)
        buf = cuweave.Buffer(legacy, N, "int32")
        self.fill.launch(legacy, 64, 256, buf, N, 3, DELAY_NS)
        self.assertEqual(buf.__cuda_array_interface__["stream"], 1)
        theirs = cp.cuda.Stream(non_blocking=True)
        with theirs:
            a = cp.asarray(buf)  # CuPy orders its stream after the legacy stream (the interface's 1)
            total = int(a.astype(cp.int64).sum())
        self.assertEqual(total, want_sum(3))
        buf.used_by(cuweave.Stream.wrap(self.ctx, theirs.ptr))
        theirs.synchronize()
        buf.close()
        legacy.close()


class _Unordered:
    """A Buffer whose __dlpack__ ignores the consumer's stream (stream=-1): the control."""

    def __init__(self, buf):
        self.buf = buf

    def __dlpack_device__(self):
        return self.buf.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.buf.__dlpack__(stream=-1, max_version=max_version)


if __name__ == "__main__":
    unittest.main()
