# SPDX-License-Identifier: BSD-2-Clause
"""DLPack on the CPU, against the fake driver (the GPU half, with CuPy and
PyTorch: test_gpu_dlpack.py): Buffer.__dlpack__'s capsule read back through
ctypes as a consumer reads it (the address, device, shape, strides and
dtype; legacy "dltensor" and DLPack 1.0's "dltensor_versioned"); its
lifetime (the capsule holds a reference of the buffer's own, dropped by the
deleter, an unconsumed capsule released once no one holds it, a capsule
dropped while an exception is pending, consumers that let go at interpreter
exit); the `stream`
argument (the consumer's stream made to wait for the buffer's last writer:
one cuStreamWaitEvent, counted by the fake; -1 none; 0 refused); and
from_dlpack, cuweave's own array taken back and a producer of the DLPack
0.x protocol. Also the CUDA array interface's stream (1 for the legacy
stream) and the __cuda_stream__ version check."""

import ctypes
import gc
import os
import unittest

import fakeenv
import cuweave
from cuweave import _dlpack

api = ctypes.pythonapi
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def tensor_of(capsule):
    name = api.PyCapsule_GetName(capsule)
    cls = _dlpack.DLManagedTensorVersioned if name == b"dltensor_versioned" else _dlpack.DLManagedTensor
    return name, cls.from_address(api.PyCapsule_GetPointer(capsule, name))


api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Foreign:
    """Another library's DLPack tensor made by hand (its deleter counts its calls)."""

    def __init__(self, versioned=False, major=1, shape=(4,), strides=None, offset=0, code=2, bits=32, lanes=1,
                 device=(2, 0), claimed=None, ndim=None, null_shape=False):
        self.deleted = 0
        self.m = m = _dlpack.DLManagedTensorVersioned() if versioned else _dlpack.DLManagedTensor()
        self.sh = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.st = (ctypes.c_int64 * max(len(shape), 1))(*(strides or [0]))
        t = m.dl_tensor
        t.data = 0x7000
        t.device.device_type, t.device.device_id = device
        t.ndim = len(shape) if ndim is None else ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = None if null_shape else ctypes.cast(self.sh, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(self.st, ctypes.POINTER(ctypes.c_int64)) if strides else None
        t.byte_offset = offset

        def deleter(p):
            self.deleted += 1

        self.c_deleter = _dlpack.DELETER(deleter)
        m.deleter = self.c_deleter
        if versioned:
            m.version.major, m.version.minor = major, 0
        self.versioned = versioned
        self.device = claimed or device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        return api.PyCapsule_New(ctypes.addressof(self.m), b"dltensor_versioned" if self.versioned else b"dltensor",
                                 None)


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestForeignTensors(unittest.TestCase):
    """from_dlpack of tensors cuweave did not make: what DLPack lets a
    producer hand over is taken (offsets, strides in bytes, bfloat16, bool,
    CUDA host memory); what a consumer must refuse is a BufferError after
    the producer's deleter ran (review of issue 41: a versioned tensor of
    major version 2, whose layout DLPack says must not be read, was read as
    1.0; the capsule's own device, a negative ndim or extent, a NULL shape
    and 0-bit elements were taken as they came)."""

    def test_taken(self):
        for kw, want in (({}, (0x7000, (4,), None, "<f4", 16)),
                         ({"offset": 12}, (0x700C, (4,), None, "<f4", 16)),
                         ({"shape": (3, 4), "strides": (1, 3)}, (0x7000, (3, 4), (4, 12), "<f4", 48)),
                         ({"shape": (3, 4), "strides": (4, 1)}, (0x7000, (3, 4), None, "<f4", 48)),
                         ({"code": 4, "bits": 16}, (0x7000, (4,), None, "<V2", 8)),
                         ({"code": 6, "bits": 8}, (0x7000, (4,), None, "|b1", 4)),
                         ({"versioned": True}, (0x7000, (4,), None, "<f4", 16)),
                         ({"device": (3, 0)}, (0x7000, (4,), None, "<f4", 16)),
                         ({"shape": (), "null_shape": True}, (0x7000, (), None, "<f4", 4))):
            f = Foreign(**kw)
            a = cuweave.from_dlpack(f)
            self.assertEqual((a.ptr, a.shape, a.strides, a.typestr, a.nbytes), want, kw)
            self.assertEqual(f.deleted, 0)
            a.close()
            self.assertEqual(f.deleted, 1, kw)

    def test_refused_after_the_deleter(self):
        for kw in ({"versioned": True, "major": 2}, {"versioned": True, "major": 0},
                   {"device": (1, 0), "claimed": (2, 0)},  # the capsule says CPU, __dlpack_device__ CUDA
                   {"ndim": -1}, {"shape": (2, -3)}, {"null_shape": True}, {"bits": 0}, {"bits": 12},
                   {"lanes": 4}, {"code": 7, "bits": 8}):
            f = Foreign(**kw)
            with self.assertRaises(BufferError, msg=repr(kw)):
                cuweave.from_dlpack(f)
            self.assertEqual(f.deleted, 1, kw)  # the producer's deleter ran once, as DLPack asks


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestDLPack(unittest.TestCase):
    def setUp(self):
        self.fake = ctypes.CDLL(os.path.abspath(fakeenv.FAKE))
        self.fake.fake_cuda_waits.restype = ctypes.c_long
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        gc.collect()
        self.assertEqual(_dlpack.exported(), 0)  # every export's deleter ran
        self.s.close()
        self.ctx.close()

    def test_the_capsule_as_a_consumer_reads_it(self):
        buf = cuweave.Buffer(self.s, (3, 5), "float32")
        self.assertEqual(buf.__dlpack_device__(), (2, 0))  # kDLCUDA, device 0
        cap = buf.__dlpack__()
        name, m = tensor_of(cap)
        self.assertEqual(name, b"dltensor")
        t = m.dl_tensor
        self.assertEqual(t.data, buf.ptr)
        self.assertEqual((t.device.device_type, t.device.device_id), (2, 0))
        self.assertEqual(t.ndim, 2)
        self.assertEqual([t.shape[i] for i in range(2)], [3, 5])
        self.assertEqual([t.strides[i] for i in range(2)], [5, 1])  # in elements, C order
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (2, 32, 1))  # kDLFloat
        self.assertEqual(t.byte_offset, 0)
        self.assertTrue(m.deleter)
        self.assertEqual(buf.info()["refs"], 2)  # the capsule's own reference
        del cap, m, t  # never consumed: released once no one holds it (the collection sweeps)
        gc.collect()
        self.assertEqual(buf.info()["refs"], 1)
        buf.close()

    def test_versioned_capsule_and_dtypes(self):
        for dtype, code, bits in (("uint8", 1, 8), ("int64", 0, 64), ("float16", 2, 16), ("bool", 6, 8),
                                  ("complex64", 5, 64)):
            buf = cuweave.Buffer(self.s, 8, dtype)
            cap = buf.__dlpack__(max_version=(1, 2))
            name, m = tensor_of(cap)
            self.assertEqual(name, b"dltensor_versioned")
            self.assertEqual((m.version.major, m.version.minor, m.flags), (1, 0, 0))
            self.assertEqual((m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits), (code, bits), dtype)
            self.assertEqual(m.dl_tensor.ndim, 1)
            legacy, _ = tensor_of(buf.__dlpack__(max_version=(0, 8)))
            self.assertEqual(legacy, b"dltensor")
            del cap, m
            buf.close()

    def test_a_capsule_dropped_while_an_exception_is_pending(self):
        # A consumer that fails drops the capsule with its exception set (NumPy's from_dlpack of a CUDA
        # buffer, a Cython consumer's error path; here list() building from a generator that raises).
        # Review of issue 41: the capsule's destructor, a ctypes callback, ran Python code with the
        # exception set: it lost it ('SystemError: <class 'list'> returned NULL without setting an
        # exception') and the buffer's reference with it (refs stayed 2).
        buf = cuweave.Buffer(self.s, 16)

        def produce():
            yield buf.__dlpack__()
            raise KeyError("the consumer's own error")

        with self.assertRaises(KeyError):
            list(produce())
        gc.collect()
        self.assertEqual((buf.info()["refs"], _dlpack.exported()), (1, 0))
        buf.close()

    def test_a_consumer_deletes_the_tensor(self):
        buf = cuweave.Buffer(self.s, 16)
        cap = buf.__dlpack__()
        name, m = tensor_of(cap)
        api.PyCapsule_SetName(cap, b"used_dltensor")  # what a consumer does when it takes it
        del cap  # a taken tensor is the consumer's
        gc.collect()
        self.assertEqual((buf.info()["refs"], _dlpack.exported()), (2, 1))
        buf.close()  # the Buffer object goes; the memory stays for the consumer
        m.deleter(ctypes.addressof(m))  # the consumer is done
        self.assertEqual(_dlpack.exported(), 0)

    def test_consumers_that_let_go_at_interpreter_exit(self):
        # Review of issue 41: a consumer still holding a tensor when the interpreter shuts down (one held
        # by a module imported before cuweave: modules are cleared in reverse order; a C++ static freed by
        # a C atexit handler) called a deleter that module teardown had freed (a ctypes callback):
        # 'Fatal Python error: Segmentation fault ... in __del__'. Now the capsules' structs and the
        # deleter outlive the interpreter, and from cuweave's atexit on the deleter field is NULL (the
        # consumer leaks the tensor: the process is ending).
        import subprocess
        import sys
        child = r"""
import atexit, ctypes, os, sys


def check_at_exit():  # registered before cuweave's: runs after it
    print("deleter at exit:", ctypes.c_void_p.from_address(os._reads + 56).value)


atexit.register(check_at_exit)  # before fakeenv, which imports an installed cuweave to check where it is
sys.path.insert(0, %(tests)r)
import fakeenv
import cuweave

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def take(cap):
    p = api.PyCapsule_GetPointer(cap, b"dltensor")
    api.PyCapsule_SetName(cap, b"used_dltensor")
    return p


class Reads:  # reads the deleter when it lets go, as C consumers do (torch, CuPy)
    def __init__(self, cap):
        self.p = take(cap)

    def __del__(self):
        d = ctypes.c_void_p.from_address(self.p + 56).value
        if d:
            DELETER(d)(self.p)


class Cached:  # kept the deleter's address from the start
    def __init__(self, cap):
        self.p = take(cap)
        self.d = DELETER(ctypes.c_void_p.from_address(self.p + 56).value)

    def __del__(self):
        self.d(self.p)


ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
b = cuweave.Buffer(s, 16)
os._held = [Reads(b.__dlpack__()), Cached(b.__dlpack__())]  # os: cleared after cuweave
os._reads = os._held[0].p
print("exiting")
""" % {"tests": os.path.dirname(os.path.abspath(__file__))}
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                             env=fakeenv.child_env())
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr[-3000:])
        self.assertEqual(out.stdout.split(), ["exiting", "deleter", "at", "exit:", "None"], out.stderr[-3000:])

    def test_collections_inside_the_lock_and_threads(self):
        # Review of issue 41: a garbage collection can run anywhere something is allocated, _dlpack's own
        # locked sections included (export built its _exports entry, a tuple, under the lock); the
        # capsules and arrays it frees call the deleter, which took the same lock: 6 threads exporting,
        # taking and dropping tensors hung (faulthandler: "_release ... _py_capsule_destructor ...
        # export", the lock held by the same thread; 1 run in 3). The first part does what such a
        # collection does, holding the lock: on the old code it hangs at once. Then the threads, and a
        # consumer's deleter called from C threads with no Python thread state.
        import subprocess
        import sys
        child = r"""
import faulthandler, gc, random, sys, threading
sys.path.insert(0, %(tests)r)
faulthandler.dump_traceback_later(30, exit=True)  # a hang: the stacks, then exit 1
import fakeenv
import cuweave
from cuweave import _dlpack

ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
bufs = [cuweave.Buffer(s, 64) for _ in range(8)]
b = bufs[0]
cap = b.__dlpack__(stream=-1)
arr = cuweave.from_dlpack(b)
cyc = cuweave.from_dlpack(b)
cyc.me = cyc
del cyc
with _dlpack._lock:  # a collection in a locked section, in this thread
    del cap  # an unconsumed capsule freed
    arr.close()  # a taken tensor's deleter
    gc.collect()  # an array in a cycle, and the collection's own sweep
print("in the lock: exported", _dlpack.exported(), "refs", b.info()["refs"])
sys.setswitchinterval(1e-6)
errors = []


def worker(seed):
    rnd = random.Random(seed)
    try:
        for i in range(2000):
            b = rnd.choice(bufs)
            k = rnd.random()
            if k < 0.3:
                cap = b.__dlpack__(stream=-1)  # never consumed
                del cap
            elif k < 0.6:
                cuweave.from_dlpack(b).close()  # taken, deleted
            elif k < 0.8:
                a = cuweave.from_dlpack(b)  # taken, collected
                a.me = a
                del a
            else:
                l = [b.__dlpack__(stream=-1, max_version=(1, 0))]  # never consumed, in a cycle
                l.append(l)
                del l
            if i %% 100 == 0:
                gc.collect()
    except BaseException as e:
        errors.append(repr(e))


threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
gc.collect()
print("threads: errors", errors, "exported", _dlpack.exported(), "refs", sorted(set(x.info()["refs"] for x in bufs)))
""" % {"tests": os.path.dirname(os.path.abspath(__file__))}
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=90,
                             env=fakeenv.child_env())
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr[-4000:])
        self.assertEqual(out.stdout.splitlines(), ["in the lock: exported 0 refs 1",
                                                   "threads: errors [] exported 0 refs [1]"], out.stderr[-4000:])

    def test_stream_argument_orders_the_consumer(self):
        writer = cuweave.Stream(self.ctx)
        consumer = cuweave.Stream(self.ctx)
        buf = cuweave.Buffer(writer, 64)
        w0 = self.fake.fake_cuda_waits()
        cap = buf.__dlpack__(stream=consumer.cu_stream)
        self.assertEqual(self.fake.fake_cuda_waits() - w0, 1)  # the consumer waits for the writer
        del cap
        w0 = self.fake.fake_cuda_waits()
        del_cap = buf.__dlpack__(stream=writer.cu_stream)  # the writer's own stream: nothing to wait for
        self.assertEqual(self.fake.fake_cuda_waits() - w0, 0)
        del del_cap
        w0 = self.fake.fake_cuda_waits()
        cap = buf.__dlpack__(stream=-1)  # the consumer asks for no ordering
        self.assertEqual(self.fake.fake_cuda_waits() - w0, 0)
        del cap
        for legacy in (None, 1):  # the legacy default stream (None: what the protocol says to assume)
            w0 = self.fake.fake_cuda_waits()
            cap = buf.__dlpack__(stream=legacy)
            self.assertEqual(self.fake.fake_cuda_waits() - w0, 1)
            del cap
        with self.assertRaises(ValueError) as cm:
            buf.__dlpack__(stream=0)  # ambiguous for CUDA
        self.assertIn("stream", str(cm.exception))
        with self.assertRaises(BufferError):
            buf.__dlpack__(copy=True)
        with self.assertRaises(BufferError):
            buf.__dlpack__(dl_device=(1, 0))
        buf.__dlpack__(dl_device=(2, 0), copy=False)
        for x in (buf, writer, consumer):
            x.close()

    def test_from_dlpack_round_trip(self):
        buf = cuweave.Buffer(self.s, (4, 2), "int32")
        consumer = cuweave.Stream(self.ctx)
        arr = cuweave.from_dlpack(buf, stream=consumer)
        self.assertIsInstance(arr, cuweave.DLPackArray)
        self.assertEqual((arr.ptr, arr.shape, arr.typestr, arr.device, arr.strides, arr.readonly, arr.nbytes),
                         (buf.ptr, (4, 2), "<i4", 0, None, False, 32))
        cai = arr.__cuda_array_interface__
        self.assertEqual((cai["data"], cai["shape"], cai["stream"]), ((buf.ptr, False), (4, 2), None))
        # usable where cuweave takes an address
        self.assertEqual(cuweave.Kernel._pack(arr, 8).value, buf.ptr)
        buf.close()
        self.assertEqual(_dlpack.exported(), 1)  # the array holds the memory
        self.assertRegex(repr(arr), r"^<cuweave\.DLPackArray 0x[0-9a-f]+ device 0 <i4 \(4, 2\)>$")
        arr.close()
        arr.close()  # idempotent
        self.assertTrue(arr.closed)
        with self.assertRaises(ValueError):
            arr.__cuda_array_interface__
        consumer.close()

    def test_from_dlpack_of_a_protocol_0_producer(self):
        buf = cuweave.Buffer(self.s, 6, "uint16")

        class Old:  # a producer of DLPack before 1.0: __dlpack__ takes no max_version
            asked = []

            def __dlpack_device__(self):
                return buf.__dlpack_device__()

            def __dlpack__(self, stream=None):
                Old.asked.append(stream)
                return buf.__dlpack__(stream=stream)

        arr = cuweave.from_dlpack(Old(), self.s)
        self.assertEqual(Old.asked, [self.s.cu_stream])
        self.assertEqual((arr.ptr, arr.shape, arr.typestr), (buf.ptr, (6,), "<u2"))
        del arr
        gc.collect()
        buf.close()
        with self.assertRaises(TypeError):
            cuweave.from_dlpack(b"not a tensor")

    def test_array_interface_stream_per_spec(self):
        legacy = cuweave.Stream.wrap(self.ctx, 0)
        buf = cuweave.Buffer(legacy, 4)
        self.assertEqual(buf.__cuda_array_interface__["stream"], 1)  # the legacy stream is 1, never 0 or None
        buf.written_on(self.s)
        self.assertEqual(buf.__cuda_array_interface__["stream"], self.s.cu_stream)
        per_thread = cuweave.Stream.wrap(self.ctx, 2)
        buf.written_on(per_thread)
        self.assertEqual(buf.__cuda_array_interface__["stream"], 2)
        keep = buf.keep()
        self.assertIsNone(keep.__cuda_array_interface__["stream"])  # no writer known: no synchronisation
        for x in (keep, buf, per_thread, legacy):
            x.close()

    def test_cuda_stream_protocol_version(self):
        class V:
            def __init__(self, version, handle):
                self.v = (version, handle)

            def __cuda_stream__(self):
                return self.v

        w = cuweave.Stream.wrap(self.ctx, V(0, self.s.cu_stream))
        self.assertEqual(w.cu_stream, self.s.cu_stream)
        w.close()
        with self.assertRaises(ValueError) as cm:
            cuweave.Stream.wrap(self.ctx, V(1, 0))  # 0.2 wrapped the legacy stream here
        self.assertIn("version 1", str(cm.exception))
        self.assertIn("stream", str(cm.exception))
        with self.assertRaises(TypeError):
            cuweave.Stream.wrap(self.ctx, V(0, "x"))


if __name__ == "__main__":
    unittest.main()
