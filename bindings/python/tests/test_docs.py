# SPDX-License-Identifier: BSD-2-Clause
"""A docstring on every public item (issue 41): each function, class,
method, property, classmethod and staticmethod reachable from
cuweave.__all__ (enumeration members are documented by their class), and
reprs that show what an object is: the handle, the device and the state
(``<cuweave.Stream 0x... device 0 non-blocking>``), and ``closed`` once
closed."""

import ctypes
import inspect
import re
import unittest

import fakeenv
import cuweave


def public_items():
    for name in cuweave.__all__:
        o = getattr(cuweave, name)
        if inspect.isfunction(o):
            yield name, o
        elif inspect.isclass(o):
            yield name, o
            if issubclass(o, BaseException) or (issubclass(o, int) and hasattr(o, "__members__")):
                continue
            for m, v in vars(o).items():
                if m.startswith("_") and m not in ("__dlpack__", "__dlpack_device__", "__cuda_stream__",
                                                   "__cuda_array_interface__"):
                    continue
                if isinstance(v, (staticmethod, classmethod)):
                    v = v.__func__
                if inspect.isfunction(v) or isinstance(v, property):
                    yield "%s.%s" % (name, m), v


class TestDocstrings(unittest.TestCase):
    def test_every_public_item_has_a_docstring(self):
        missing, n = [], 0
        for name, o in public_items():
            n += 1
            doc = inspect.getdoc(o) if not isinstance(o, property) else (o.__doc__ or "")
            if isinstance(o, type) and o.__doc__ is None:
                doc = ""
            if not doc or not doc.strip() or (isinstance(o, type) and doc == inspect.getdoc(o.__mro__[1])
                                              and o.__doc__ is None):
                missing.append(name)
        self.assertGreater(n, 250)
        self.assertEqual(missing, [])

    def test_the_package_and_its_modules(self):
        import cuweave._check, cuweave._core, cuweave._dlpack, cuweave._flow, cuweave._graph  # noqa: E401
        import cuweave._memory, cuweave._multi, cuweave._resident, cuweave._trace  # noqa: E401
        for m in (cuweave, cuweave._check, cuweave._core, cuweave._dlpack, cuweave._flow, cuweave._graph,
                  cuweave._memory, cuweave._multi, cuweave._resident, cuweave._trace):
            self.assertTrue((m.__doc__ or "").strip(), m.__name__)


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestReprs(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def check(self, obj, pattern):
        self.assertRegex(repr(obj), pattern)

    def test_reprs_show_handle_device_and_state(self):
        hexa = r"0x[0-9a-f]+"
        self.check(self.ctx, r"^<cuweave\.Context %s device 0 primary>$" % hexa)
        self.check(self.s, r"^<cuweave\.Stream %s device 0 non-blocking>$" % hexa)
        self.assertIn("%#x" % self.s.cu_stream, repr(self.s))  # the CUstream, as CuPy and PyTorch show theirs
        b = cuweave.Stream(self.ctx, blocking=True)
        self.check(b, r"device 0 blocking>$")
        legacy = cuweave.Stream.wrap(self.ctx, 0)
        self.check(legacy, r"^<cuweave\.Stream 0x0 device 0 blocking legacy wrapped>$")
        pool = cuweave.StreamPool(self.ctx, max_streams=2)
        lease = pool.acquire()
        self.check(pool, r"^<cuweave\.StreamPool %s device 0 lease, 1 streams, 1 leased>$" % hexa)
        self.check(lease, r"^<cuweave\.Lease <cuweave\.Stream %s device 0 non-blocking from a pool>>$" % hexa)
        lease.release()
        self.check(lease, r"^<cuweave\.Lease given back>$")
        f = cuweave.Future(self.s)
        f.wait(5)
        self.check(f, r"^<cuweave\.Future %s done>$" % hexa)
        buf = cuweave.Buffer(self.s, (2, 3), "float32")
        self.check(buf, r"^<cuweave\.Buffer %s device 0 <f4 \(2, 3\), 24 bytes at %s>$" % (hexa, hexa))
        r = cuweave.Resident(self.ctx)
        self.check(r, r"^<cuweave\.Resident %s device 0 not launched>$" % hexa)
        g = cuweave.Graph(self.ctx)
        self.check(g, r"^<cuweave\.Graph %s device 0, 0 nodes>$" % hexa)
        self.check(cuweave.Trace(), r"^<cuweave\.Trace %s 0 spans, 0 dropped>$" % hexa)
        self.check(cuweave.HostMemory(self.ctx, 32), r"^<cuweave\.HostMemory %s 32 bytes, device 0>$" % hexa)
        prog = cuweave.Program(self.ctx, 'extern "C" __global__ void k() {}', name="k.cu")
        self.check(prog, r"^<cuweave\.Program %s 'k\.cu' device 0 sm_\d+ (PTX|cubin)>$" % hexa)
        self.check(prog.load().kernel("k"), r"^<cuweave\.Kernel 'k' %s>$" % hexa)
        for o in (b, legacy, pool, f, buf, r, g, prog):
            o.close()
            self.check(o, r"^<cuweave\.\w+ closed>$")
        self.check(cuweave.Version(2, 28, 3), r"Version\(major=2, minor=28, patch=3\)")
        self.assertEqual(str(cuweave.Version(2, 28, 3)), "2.28.3")
        self.assertRegex(repr(cuweave.PoolExhaustedError("none free")), r"^PoolExhaustedError\('none free'\)$")
        self.assertTrue(re.match(r"^<cuweave\.DeviceGroup %s devices \[0\]>$" % hexa, repr(cuweave.DeviceGroup([0]))))

    def test_a_repr_never_raises(self):
        # Review of issue 41: repr(HostMemory) read its context's device: 'ValueError: Context is closed'
        # once the context was closed; the reprs of _Handle objects say "(ValueError)" there instead.
        ctx = cuweave.Context(0)
        s = cuweave.Stream(ctx)
        objs = [cuweave.HostMemory(ctx, 16), cuweave.StreamPool(ctx), cuweave.Resident(ctx), cuweave.Timer(ctx),
                cuweave.Buffer(s, 16), cuweave.SharedEvent(ctx), s]
        ctx.close()
        for o in objs:
            self.assertRegex(repr(o), r"^<cuweave\.%s .*>$" % type(o).__name__)
        for o in objs:
            o.close()

    def test_host_memory_of_a_closed_context(self):
        # Review of issue 41: HostMemory's finalizer freed nothing once its Context was closed
        # (cw_host_free needs a live context) and left the object open: after ctx.close(), h.close()
        # made no cuMemFreeHost call, h.closed stayed False, nothing was logged (the pinned memory
        # leaked; on a GPU it goes with the context while h.ptr still gives its address).
        import os
        fake = ctypes.CDLL(os.path.abspath(fakeenv.FAKE))
        fake.fake_cuda_calls.restype = ctypes.c_long
        frees = lambda: fake.fake_cuda_calls(b"cuMemFreeHost")  # noqa: E731
        ctx = cuweave.Context(0)
        h, h2 = cuweave.HostMemory(ctx, 16), cuweave.HostMemory(ctx, 32)
        h2.close()
        n = frees()
        ctx.close()  # frees the HostMemory made on it first, while C can
        self.assertEqual(frees() - n, 1)
        self.assertTrue(h.closed)
        with self.assertRaises(ValueError):
            h.ptr
        h.close()  # idempotent
        self.assertEqual(frees() - n, 1)
        with self.assertRaises(ValueError):
            cuweave.HostMemory(ctx, 16)  # context: the Context is closed
        dg = cuweave.DeviceGroup([0])  # a borrowed context: its owner's close() frees its HostMemory too
        h = cuweave.HostMemory(dg.context(0), 16)
        n = frees()
        dg.close()
        self.assertEqual((frees() - n, h.closed), (1, True))

    def test_handles_are_not_copied_or_pickled(self):
        # Review of issue 41: copy.copy(buf) gave a second object sharing the handle and the finalizer of
        # the first: once the first was collected, the copy was closed ('ValueError: Buffer is closed');
        # pickle.dumps said 'ctypes objects containing pointers cannot be pickled' (a ValueError).
        import copy
        import gc
        import pickle
        pool = cuweave.StreamPool(self.ctx)
        buf = cuweave.Buffer(self.s, 16)
        objs = [self.ctx, self.s, buf, pool, pool.acquire(), self.s.fork(), cuweave.Future(self.s),
                cuweave.HostMemory(self.ctx, 16), cuweave.from_dlpack(buf), cuweave.Graph(self.ctx),
                cuweave.Pipeline(self.ctx), cuweave.Operator("op", lambda io: None), cuweave.Trace()]
        for o in objs:
            for what, fn in (("copy", copy.copy), ("deepcopy", copy.deepcopy), ("pickle", pickle.dumps)):
                with self.assertRaises(TypeError, msg="%s of %r" % (what, o)) as cm:
                    fn(o)
                self.assertIn("cuweave.%s" % type(o).__name__, str(cm.exception))
        for o in reversed(objs[2:]):
            o.close()
        del objs, o
        gc.collect()
        # the exceptions, plain values, copy and pickle as ever
        e = pickle.loads(pickle.dumps(cuweave.CompileError("failed", {"status": 16}, log="the log")))
        self.assertEqual((str(e), e.log, e.detail, e.status), ("failed", "the log", {"status": 16}, 16))
        self.assertEqual(copy.copy(cuweave.Version(1, 2, 3)), (1, 2, 3))


if __name__ == "__main__":
    unittest.main()
