# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of operators and pipelines from Python (cuweave/flow.h) against
the fake driver (tests/fake_cuda.c, whose device memory is host memory and
whose streams run their work on a thread of their own):

  - values through a pipeline: a source writes device buffers, a consumer
    copies them to page-locked host memory, every value read back;
  - the stream rules for a Python compute, as for a C one: its internal
    stream (the same every call, not its producer's) waits for the
    producer's work (cuStreamWaitEvent counted by the fake), its context is
    made current, the outputs carry it, receive_many gives the
    producers', no_internal_stream falls back to the upstream stream;
  - messages: Python objects, raw pointers, optional and many-input ports;
  - worker threads; stop and close from compute; a resident pipeline built
    from Python operators;
  - exceptions in compute and start become a status (never cross into C):
    run raises the matching CuweaveError from them, a driver failure inside
    compute keeps its driver call and CUresult, the pipeline runs again;
  - lifetimes: an operator's Python side lives as long as its C operator
    (its pipeline), then goes; objects lent to compute are closed after it.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     CUWEAVE_FAKE_DRIVER=build/meson/tests/libfakecuda.so \\
     python3 -m unittest discover -s bindings/python/tests -v
"""

import ctypes
import gc
import os
import struct
import sys
import tempfile
import threading
import unittest
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
# CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a missing fake driver
# is then an error, not a reason to skip.
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)

# As test_cuweave.py: the fake driver with every feature, chosen before the
# first cuweave call (whichever of the two modules is imported first).
os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
os.environ.pop("CUWEAVE_SERIALIZE", None)

import cuweave  # noqa: E402
from cuweave import _flow  # noqa: E402

N = 64  # floats per buffer


def _fake():
    f = ctypes.CDLL(os.path.abspath(FAKE))  # the library's own copy (same file: same handle)
    f.fake_cuda_waits.restype = ctypes.c_long
    f.fake_cuda_other_context.restype = ctypes.c_void_p
    f.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    f.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    f.fake_cuda_hold.argtypes = [ctypes.c_int]
    f.fake_cuda_drain.argtypes = [ctypes.c_int]
    return f


def current_context(fake):
    c = ctypes.c_void_p()
    fake.cuCtxGetCurrent(ctypes.byref(c))
    return c.value or 0


def floats(values):
    return struct.pack("<%df" % len(values), *values)


class Unraisable:
    """Collects what reaches sys.unraisablehook (nothing should, unless said)."""

    def __enter__(self):
        self.seen = []
        self._old = sys.unraisablehook
        sys.unraisablehook = lambda u: self.seen.append(u.exc_value)
        return self

    def __exit__(self, *exc):
        sys.unraisablehook = self._old


@unittest.skipUnless(os.path.exists(FAKE), "the fake driver is not built")
class TestPipelines(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.fake = _fake()

    def tearDown(self):
        gc.collect()
        self.ctx.close()

    def source(self, name="A", **kw):
        """An operator writing N floats i + iteration into a new buffer on its
        stream, emitted with the dict {"it": iteration} as the value."""
        def compute(io):
            s = io.receive_stream()
            b = io.alloc(N, "float32")
            it = io.iteration
            b.copy_from_host(s, floats([float(i + it) for i in range(N)]))
            io.emit("out", value={"it": it}, buffer=b)
        return cuweave.Operator(name, compute, outputs=["out"], **kw)

    def test_a_pipeline_collected_in_a_cycle_lets_go_of_its_values(self):
        # Review of issue 41: a pipeline whose compute refers to it (a cycle) and that emitted a Python
        # value was collected, but the value stayed in the module's table of emitted values for ever:
        # its operators' Python sides (weakly held for C's callbacks) were cleared by the collection
        # before the pipeline's finalizer ran, so the destroy callback found none and released nothing
        # (a Buffer in the value: never freed). And the table's lock, taken again by a release that a
        # collection runs inside a locked section, must not hang (done here holding it).
        import subprocess
        child = r"""
import faulthandler, gc, sys, weakref
sys.path.insert(0, %(tests)r)
faulthandler.dump_traceback_later(30, exit=True)  # a hang: the stacks, then exit 1
import fakeenv
import cuweave
from cuweave import _flow


class Value:
    pass


ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)


def make(hold_lock):
    v, buf = Value(), cuweave.Buffer(s, 16)
    v.buf = buf
    p = cuweave.Pipeline(ctx)
    p.add(cuweave.Operator("A", lambda io: (p, io.emit("out", value=v)), outputs=["out"]))
    p.run(1)
    wv, wb, ref = weakref.ref(v), weakref.ref(buf), buf._ptr
    buf.close()  # the Python object; the value holds it
    del v, buf, p
    if hold_lock:
        with _flow._values_lock:  # what a collection inside _hold's or _drop's locked section does
            gc.collect()
    else:
        gc.collect()
    return wv() is None, wb() is None, len(_flow._values)


print(make(False), make(True))
""" % {"tests": os.path.dirname(os.path.abspath(__file__))}
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=90,
                             env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(
                                 __file__)))))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr[-3000:])
        self.assertEqual(out.stdout.strip(), "(True, True, 0) (True, True, 0)", out.stderr[-3000:])

    def test_values_through_two_python_operators(self):
        host = cuweave.HostMemory(self.ctx, 3 * N * 4)
        got = []

        def sink(io):
            m = io.receive("in")
            s = io.receive_stream("in")  # ordered behind A's copy
            it = m.value["it"]
            got.append(it)
            cuweave._lib.lib.cw_copy_to_host(s.handle, ctypes.c_void_p(host.ptr + it * N * 4), m.buffer.ptr, N * 4)

        with cuweave.Pipeline(self.ctx) as p:
            p.add(self.source(), cuweave.Operator("B", sink, inputs=["in"]))
            p.connect("A", "out", "B", "in")
            p.check()
            p.run(3)
            p.synchronize()
            info = p.info()
        self.assertEqual(got, [0, 1, 2])
        data = bytes(host.view())
        for it in range(3):
            self.assertEqual(struct.unpack_from("<%df" % N, data, it * N * 4), tuple(float(i + it) for i in range(N)))
        self.assertEqual((info["iterations"], info["computes"], info["operators"], info["connections"]), (3, 6, 2, 1))
        self.assertEqual(info["buffers_allocated"] + info["buffers_reused"], 3)
        host.close()

    def test_a_python_compute_gets_its_stream_by_the_c_rules(self):
        fake = self.fake
        other = fake.fake_cuda_other_context()
        seen = {"A": [], "B": [], "C": []}

        def b_compute(io):
            m = io.receive("in")
            before_wait = fake.fake_cuda_waits()
            found = current_context(fake)
            fake.cuCtxSetCurrent(other)  # work of its own on another context,
            fake.cuCtxSetCurrent(found)  # the one it found put back (flow.h)
            s = io.receive_stream("in")
            seen["B"].append({
                "internal": s.cu_stream,
                "producer": m.stream.cu_stream,
                "streams": [x.stream.cu_stream for x in io.receive_many("in")],
                "waited": fake.fake_cuda_waits() - before_wait,
                "current": current_context(fake),
                "again": io.receive_stream("in").cu_stream,  # the same stream for a second call
                "device": s.info()["device"],
            })
            io.emit("out", buffer=m.buffer)  # the output carries the internal stream

        def c_compute(io):
            m = io.receive("in")
            seen["C"].append(m.stream.cu_stream)

        def a_compute(io):
            s = io.receive_stream()
            seen["A"].append(s.cu_stream)
            b = io.alloc(N, "float32")
            b.copy_from_host(s, floats([1.0] * N))
            io.emit("out", buffer=b)

        mine = current_context(fake)
        with cuweave.Pipeline(self.ctx) as p:
            p.add(cuweave.Operator("A", a_compute, outputs=["out"]),
                  cuweave.Operator("B", b_compute, inputs=["in"], outputs=["out"]),
                  cuweave.Operator("C", c_compute, inputs=["in"]))
            p.connect("A", "out", "B", "in")
            p.connect("B", "out", "C", "in")
            p.run(3)
            p.synchronize()
            self.assertEqual(p.info()["fallbacks"], 0)
        self.assertEqual(current_context(fake), mine)  # run gives the caller its context back
        a_stream = seen["A"][0]
        self.assertEqual(set(seen["A"]), {a_stream})  # one internal stream, kept across calls
        b_stream = seen["B"][0]["internal"]
        self.assertNotEqual(b_stream, a_stream)     # its own, not its producer's
        for call in seen["B"]:
            self.assertEqual(call["internal"], b_stream)
            self.assertEqual(call["again"], b_stream)
            self.assertEqual(call["producer"], a_stream)     # the message carries A's stream
            self.assertEqual(call["streams"], [a_stream])    # receive_many: every message's stream
            self.assertGreaterEqual(call["waited"], 1)       # cuStreamWaitEvent on A's mark
            self.assertEqual(call["current"], self.ctx.cu_context)  # the stream's context made current
            self.assertEqual(call["device"], 0)
        self.assertEqual(seen["C"], [b_stream] * 3)          # B's outputs carried its internal stream

    def test_no_internal_stream_falls_back_to_the_upstream_stream(self):
        seen = []

        def b_compute(io):
            m = io.receive("in")
            seen.append((io.receive_stream("in").cu_stream, m.stream.cu_stream))

        with cuweave.Pipeline(self.ctx) as p:
            p.add(self.source(), cuweave.Operator("B", b_compute, inputs=["in"], no_internal_stream=True))
            p.connect("A", "out", "B", "in")
            p.run(2)
            self.assertEqual(p.info()["fallbacks"], 2)
        self.assertEqual([a for a, b in seen], [b for a, b in seen])

    def test_named_and_output_streams(self):
        seen = []

        def b_compute(io):
            m = io.receive("in")
            side = io.stream("side")
            side.wait(m.stream)
            io.set_output_stream("out", side)
            io.emit("out", buffer=m.buffer)
            seen.append(side.cu_stream)

        def c_compute(io):
            seen.append(io.receive("in").stream.cu_stream)

        with cuweave.Pipeline(self.ctx) as p:
            p.add(self.source(), cuweave.Operator("B", b_compute, inputs=["in"], outputs=["out"]),
                  cuweave.Operator("C", c_compute, inputs=["in"]))
            p.connect("A", "out", "B", "in")
            p.connect("B", "out", "C", "in")
            p.run(2)
        self.assertEqual(seen[0], seen[1])   # the named stream C received is B's side stream
        self.assertEqual(seen, [seen[0]] * 4)  # and the same one in both iterations

    def test_messages_values_pointers_optional_and_many(self):
        marker = object()
        got = {}

        def a(io):
            self.assertEqual(io.info(), {"iteration": 0, "name": "A", "resident_ctl": 0})
            io.emit("obj", value=marker)
            io.emit("raw", pointer=0x1234)

        def b(io):
            io.emit("out", value=("b", io.iteration))

        def c(io):
            m = io.receive("obj")
            got["obj"] = (m.value, m.pointer == id(marker), m.buffer, m.stream)
            r = io.receive("raw")
            got["raw"] = (r.value, r.pointer)
            got["optional"] = io.receive("opt")
            got["many"] = sorted(x.value for x in io.receive_many("many"))

        with cuweave.Pipeline(self.ctx) as p:
            p.add(cuweave.Operator("A", a, outputs=["obj", "raw"]),
                  cuweave.Operator("B1", b, outputs=["out"]), cuweave.Operator("B2", b, outputs=["out"]),
                  cuweave.Operator("C", c, inputs=["obj", "raw", ("opt", {"optional": True}), ("many", {"many": True})]))
            p.connect("A", "obj", "C", "obj")
            p.connect("A", "raw", "C", "raw")
            p.connect("B1", "out", "C", "many")
            p.connect("B2", "out", "C", "many")
            p.run(1)
            self.assertIs(p.operator("C"), p._ops["C"])
        self.assertIs(got["obj"][0], marker)
        self.assertEqual(got["obj"][1:], (True, None, None))  # no buffer, no stream (nothing used one)
        self.assertEqual(got["raw"], (None, 0x1234))
        self.assertIsNone(got["optional"])
        self.assertEqual(got["many"], [("b", 0), ("b", 0)])
        gc.collect()
        self.assertEqual(_flow._values, {})  # the values went with their operators

    def test_worker_threads(self):
        host = cuweave.HostMemory(self.ctx, N * 4)
        threads = set()

        def branch(scale):
            def compute(io):
                threads.add(threading.get_ident())
                m = io.receive("in")
                s = io.receive_stream("in")
                data = bytearray(N * 4)
                cuweave._lib.lib.cw_copy_to_host(s.handle, (ctypes.c_char * len(data)).from_buffer(data), m.buffer.ptr,
                                            N * 4)
                s.synchronize()
                vals = struct.unpack("<%df" % N, bytes(data))
                out = io.alloc(N, "float32")
                out.copy_from_host(s, floats([v * scale for v in vals]))
                io.emit("out", buffer=out)
            return compute

        def join(io):
            s = io.receive_stream("l")
            io.receive_stream("r")
            bl, br = io.receive("l").buffer, io.receive("r").buffer
            a, b = bytearray(N * 4), bytearray(N * 4)
            for buf, dst in ((bl, a), (br, b)):
                cuweave._lib.lib.cw_copy_to_host(s.handle, (ctypes.c_char * len(dst)).from_buffer(dst), buf.ptr, N * 4)
            s.synchronize()
            va, vb = struct.unpack("<%df" % N, bytes(a)), struct.unpack("<%df" % N, bytes(b))
            host.view()[:] = floats([x + y for x, y in zip(va, vb)])

        with cuweave.Pipeline(self.ctx, threads=4) as p:
            p.add(self.source(), cuweave.Operator("L", branch(2.0), inputs=["in"], outputs=["out"]),
                  cuweave.Operator("R", branch(3.0), inputs=["in"], outputs=["out"]),
                  cuweave.Operator("J", join, inputs=["l", "r"]))
            p.connect("A", "out", "L", "in")
            p.connect("A", "out", "R", "in")
            p.connect("L", "out", "J", "l")
            p.connect("R", "out", "J", "r")
            p.run(4)
            p.synchronize()
        self.assertEqual(struct.unpack("<%df" % N, bytes(host.view())), tuple(5.0 * (i + 3) for i in range(N)))
        self.assertNotIn(threading.get_ident(), threads)  # computes ran on the executor's threads
        host.close()

    def test_stop_and_close_from_compute(self):
        calls = []
        p = cuweave.Pipeline(self.ctx)

        def stopper(io):
            calls.append(io.iteration)
            if io.iteration == 4:
                io.pipeline.stop()

        p.add(cuweave.Operator("S", stopper))
        p.run(0)  # until stopped
        self.assertEqual(calls, [0, 1, 2, 3, 4])

        q = cuweave.Pipeline(self.ctx)
        op = cuweave.Operator("Q", lambda io: io.pipeline.close())
        q.add(op)
        q.run(10)  # the close stops the run, which destroys the pipeline as it returns
        self.assertTrue(q.closed)
        self.assertTrue(op.closed)
        p.close()

    def test_exceptions_become_a_status_and_run_raises_from_them(self):
        fail = {"how": None}
        stops = []

        def b(io):
            m = io.receive("in")
            s = io.receive_stream("in")
            if fail["how"] == "value":
                raise ValueError("bad frame %d" % m.value["it"])
            if fail["how"] == "runtime":
                raise RuntimeError("oops")
            if fail["how"] == "driver":  # a cuweave call failing in the driver, inside compute
                dst = (ctypes.c_char * 16)()
                cuweave._lib.lib.cw_copy_to_host(s.handle, dst, 0x1234, 16)
            if fail["how"] == "interrupt":
                raise KeyboardInterrupt()

        p = cuweave.Pipeline(self.ctx)
        p.add(self.source(), cuweave.Operator("B", b, inputs=["in"], stop=lambda: stops.append(1)))
        p.connect("A", "out", "B", "in")
        with Unraisable() as u:
            fail["how"] = "value"
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                p.run(5)
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIsInstance(cm.exception.__cause__, ValueError)
            self.assertIn("operator 'B' (compute) raised ValueError: bad frame 0", str(cm.exception))
            self.assertEqual(cm.exception.detail["function"], "cw_pipeline_run")

            fail["how"] = "runtime"
            with self.assertRaises(cuweave.InternalError) as cm:
                p.run(5)
            self.assertIsInstance(cm.exception.__cause__, RuntimeError)
            self.assertIn("raised RuntimeError: oops", str(cm.exception))

            fail["how"] = "driver"
            with self.assertRaises(cuweave.DriverError) as cm:
                p.run(5)
            d = cm.exception.detail
            self.assertEqual((d["driver_call"], d["cu_result"]), ("cuMemcpyDtoHAsync", 1))
            self.assertIn("operator 'B' (compute): cw_copy_to_host: cuMemcpyDtoHAsync failed", d["message"])
            self.assertIsInstance(cm.exception.__cause__, cuweave.DriverError)

            fail["how"] = "interrupt"
            with self.assertRaises(KeyboardInterrupt):
                p.run(5)

            fail["how"] = None  # the pipeline runs again
            before = p.info()["iterations"]
            p.run(2)
            self.assertEqual(p.info()["iterations"], before + 2)
        self.assertEqual(u.seen, [])  # nothing went astray
        self.assertEqual(len(stops), 5)  # every run stopped the operator, failed ones too
        p.close()

    def test_start_and_stop_callbacks(self):
        events = []

        def bad_stop():
            events.append("stop")
            raise RuntimeError("in stop")

        p = cuweave.Pipeline(self.ctx)
        p.add(cuweave.Operator("S", lambda io: events.append("compute"), start=lambda: events.append("start"),
                               stop=bad_stop))
        with Unraisable() as u:
            p.run(2)
        self.assertEqual(events, ["start", "compute", "compute", "stop"])
        self.assertEqual([str(e) for e in u.seen], ["in stop"])  # a stop cannot fail the run: reported

        def bad_start():
            raise TimeoutError("not ready")

        q = cuweave.Pipeline(self.ctx)
        q.add(cuweave.Operator("T", lambda io: None, start=bad_start))
        with self.assertRaises(cuweave.CuweaveTimeoutError) as cm:
            q.run(1)
        self.assertIn("operator 'T' (start) raised TimeoutError: not ready", str(cm.exception))
        p.close()
        q.close()

    def test_what_compute_is_lent_is_closed_after_it(self):
        kept = {}

        def a(io):
            s = io.receive_stream()
            b = io.alloc(N, "float32")
            b.copy_from_host(s, floats([7.0] * N))
            kept.update(io=io, stream=s, buffer=b, own=b.keep())
            io.emit("out", buffer=b)

        with cuweave.Pipeline(self.ctx) as p:
            p.add(cuweave.Operator("A", a, outputs=["out"]))
            p.run(1)
            p.synchronize()
            for name in ("io", "stream", "buffer"):
                with self.assertRaises(ValueError):
                    kept[name].handle
            own = kept["own"]  # keep(): a reference of its own, usable after the call
            s = cuweave.Stream(self.ctx)
            self.assertEqual(bytes(own.copy_to_host(s)), floats([7.0] * N))
            own.close()
            s.close()

    def test_callbacks_live_as_long_as_the_operator(self):
        class Compute:
            calls = 0

            def __call__(self, io):
                Compute.calls += 1

        fn = Compute()
        ref = weakref.ref(fn)
        p = cuweave.Pipeline(self.ctx)
        p.add(cuweave.Operator("A", fn))  # neither the Operator object nor fn is kept here
        del fn
        gc.collect()
        self.assertIsNotNone(ref())  # the pipeline holds its operator's Python side
        p.run(3)
        self.assertEqual(Compute.calls, 3)
        keys = len(_flow._ops)
        p.close()
        gc.collect()
        self.assertIsNone(ref())  # gone with the pipeline (the C destroy callback ran)
        self.assertEqual(len(_flow._ops), keys - 1)

        # an operator never added goes with its object: the C operator too
        fn2 = Compute()
        ref2 = weakref.ref(fn2)
        op = cuweave.Operator("B", fn2, inputs=["in"])
        raw = op._ptr.value
        del op, fn2
        gc.collect()
        self.assertIsNone(ref2())
        with self.assertRaises(cuweave.InvalidHandleError):
            cuweave._lib.lib.cw_operator_add_input(ctypes.c_void_p(raw), b"x", None)

        # a cycle through the compute's closure is collected too
        p2 = cuweave.Pipeline(self.ctx)
        p2.add(cuweave.Operator("C", lambda io: p2.info()))
        p2.run(1)
        ref3 = weakref.ref(p2)
        del p2
        gc.collect()
        self.assertIsNone(ref3())

    def test_resident_pipeline_of_python_operators(self):
        calls = []
        nbytes = N * 4

        def scale(io):
            s = io.receive_stream("in")
            info = io.info()
            calls.append((io.iteration, io.port_ptr("in"), io.port_ptr("out"), s.capture_state(), info["name"],
                          info["resident_ctl"]))
            self.assertIsNone(io.receive("in"))  # no messages in a capture
            io.emit("out")

        def src(io):
            io.receive_stream()
            io.emit("out")

        r = cuweave.Resident(self.ctx, unroll=2, sleep_interval=0)
        p = cuweave.Pipeline(self.ctx)
        p.add(cuweave.Operator("S", src, outputs=[("out", {"bytes": nbytes})], resident=True),
              cuweave.Operator("B", scale, inputs=[("in", {"bytes": nbytes})], outputs=[("out", {"bytes": nbytes})],
                               resident=True))
        p.connect("S", "out", "B", "in")
        p.make_resident(r)
        r.build()
        # once per unrolled copy, and once first for the build's look at the workload (gate AUTO, the default)
        self.assertEqual([c[0] for c in calls], [0, 1, 2])
        self.assertTrue(all(c[3] == cuweave.CAPTURE_ACTIVE for c in calls))
        self.assertEqual([c[4] for c in calls], ["B", "B", "B"])
        self.assertEqual([c[5] for c in calls], [r.ctl, r.ctl, r.ctl])  # the loop's device block, for kernels
        self.assertEqual(calls[0][1], p.port_ptr("S", "out"))  # the connection's one buffer
        self.assertEqual(calls[0][2], p.port_ptr("B", "out"))
        r.close()

        # an exception in a captured compute fails the build, raised from it
        def broken(io):
            raise ValueError("cannot capture")

        r2 = cuweave.Resident(self.ctx, unroll=1)
        q = cuweave.Pipeline(self.ctx)
        q.add(cuweave.Operator("X", broken, outputs=[("out", {"bytes": nbytes})], resident=True))
        q.make_resident(r2)
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            r2.build()
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        self.assertIn("operator 'X' (compute) raised ValueError: cannot capture", str(cm.exception))
        r2.close()
        q.close()
        p.close()

    def test_stage_operator_review_points(self):
        # review of issue 39: a read port's name with a NUL is refused
        # before C (ctypes cut it short), and an operator added after
        # make_fused is refused (it would have had no port memory)
        SO, RD = cuweave.StageOperator, cuweave.FusedRead
        with self.assertRaises(ValueError) as cm:
            SO("b", "fb", inputs=[("in", RD.SAME), ("in\0x", RD.ALL)], tiles=1)
        self.assertIn("NUL", str(cm.exception))
        src = "__device__ void fa(const cw_fused_tile *t, void *u, unsigned *out) {}\n"
        p = cuweave.Pipeline(self.ctx)
        p.add(SO("a", "fa", outputs=[("out", {"bytes": 256})], tiles=8))
        r = cuweave.Resident(self.ctx)
        p.make_fused(r, src)
        with self.assertRaises(cuweave.InvalidStateError) as cm2:
            p.add(SO("c", "fa", outputs=[("out", {"bytes": 256})], tiles=8))
        self.assertIn("operators are fixed", str(cm2.exception))
        r.close()
        p.close()

    def test_fused_pipeline_of_stage_operators(self):
        # issue 39: operators become stages. Each refusal below is the C
        # library's, so its words show each field reached it as given.
        src = ("__device__ void fa(const cw_fused_tile *t, void *u, unsigned *out) {}\n"
               "__device__ void fb(const cw_fused_tile *t, void *u, const unsigned *in, unsigned *out) {}\n"
               'extern "C" __device__ int pick(const cw_fused_tile *t, unsigned i) { return -1; }\n')
        SO, PR, RD = cuweave.StageOperator, cuweave.PortRead, cuweave.FusedRead

        def pair(read, b_cut=None, b_opts=None):
            p = cuweave.Pipeline(self.ctx)
            p.add(SO("a", "fa", outputs=[("out", {"bytes": 256})], tiles=8),
                  SO("b", "fb", inputs=[("in", read, b_opts or {"bytes": 256})], outputs=[("out", {"bytes": 64})],
                     **(b_cut or {"tiles": 8})))
            p.connect("a", "out", "b", "in")
            return p

        r = cuweave.Resident(self.ctx, input_slots=2, input_bytes=16)
        p = pair("same")
        p.make_fused(r, src, in_flight=2, block_threads=128)
        st = r.stats()
        self.assertEqual((st["fused"], st["block_threads"]), (1, 128))
        self.assertEqual(p.port_ptr("a", "out"), p.port_ptr("b", "in"))  # the connection's one buffer
        self.assertNotEqual(p.port_ptr("b", "out"), 0)  # the sink's own
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            p.run(1)  # no compute to run
        self.assertIn("operator 'a' is a fused stage", str(cm.exception))
        r.launch()
        self.assertEqual(r.data_ready(), 1)
        r.tear_down(timeout=1.0)
        r.close()
        p.close()
        refusals = [
            (lambda: pair(PR(RD.SAME), b_cut={"tiles": 4}),
             "operator 'b' input 'in' reads operator 'a' port 'out' tile for tile (CW_FUSED_READ_SAME) but their tile "
             "grids differ (4x1 and 8x1)"),
            (lambda: pair(PR("neighbours", scale=(2, 1))),
             "operator 'b' input 'in' reads operator 'a' port 'out' at scale 2/1: its 8x1 tiles map to 16x1"),
            (lambda: pair(PR(RD.NEIGHBOURS, radius=9)), "with radius 9: more than its tile grid"),
            (lambda: pair(PR(RD.FUNCTION, function="nowhere")), "input 'in': function 'nowhere' is not in the source"),
            (lambda: pair(None), "operator 'b' input 'in' (connected to operator 'a' port 'out') has no read"),
            (lambda: pair(PR(RD.SAME), b_cut={"tiles": 8, "threads": 512}), "stage 1 ('cwp_b') asks 512 threads"),
            (lambda: pair(PR(RD.SAME), b_opts={"bytes": 256, "many": True}), "accepts many connections"),
        ]
        for make, words in refusals:
            r = cuweave.Resident(self.ctx)
            q = make()
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                q.make_fused(r, src)
            self.assertIn(words, str(cm.exception))
            q.close()
            r.close()
        # the operator's own refusals, and the stage's fields reaching C
        for bad, words in ((lambda: SO("x", "fa"), "gives neither tiles nor a size"),
                           (lambda: SO("x", "fa", tiles=4, size=8, tile=2), "gives both tiles and a size"),
                           (lambda: SO("x", "fa", tiles=4, threads=48), "asks 48 threads a tile"),
                           (lambda: SO("x", "1fa", tiles=4), "function '1fa' is not an identifier"),
                           (lambda: SO("x", "fa", tiles=4, inputs=[("in", PR(RD.SAME, radius=1))]),
                            "input 'in': radius and scale apply to CW_FUSED_READ_NEIGHBOURS only"),
                           (lambda: SO("x", "fa", tiles=4, inputs=[("in", PR(RD.SAME, function="pick"))]),
                            "function is set but read is not CW_FUSED_READ_FUNCTION")):
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                bad()
            self.assertIn(words, str(cm.exception))
        for bad, exc, words in ((lambda: SO("x", "fa", tiles=1, inputs=["in"]), TypeError, "inputs[0]"),
                                (lambda: SO("x", "fa", tiles=1, inputs=[("in", "sideways")]), ValueError,
                                 "inputs[0] read"),
                                (lambda: SO("x", "fa", tiles=1, inputs=[("in", RD.ALL, 5)]), TypeError, "options"),
                                (lambda: PR(RD.NEIGHBOURS, scale=(1, 0)), ValueError, "scale")):
            with self.assertRaises(exc) as cm:
                bad()
            self.assertIn(words, str(cm.exception))
        # feedback: a port read with previous orders nothing (no cycle)
        r = cuweave.Resident(self.ctx)
        q = cuweave.Pipeline(self.ctx)
        q.add(SO("a", "fb", inputs=[("in", PR(RD.ALL, previous=True), {"optional": True})],
                 outputs=[("out", {"bytes": 256})], tiles=8),
              SO("b", "fb", inputs=[("in", PR(RD.NEIGHBOURS, radius=1, scale=(1, 2)))], outputs=[("out", {"bytes": 64})],
                 tiles=8))
        q.connect("a", "out", "b", "in")
        q.connect("b", "out", "a", "in")
        q.make_fused(r, src)
        self.assertEqual(r.stats()["fused"], 1)
        self.assertEqual(repr(PR(RD.NEIGHBOURS, radius=1, scale=(2, 1), previous=True)),
                         "<cuweave.PortRead neighbours radius 1 scale 2/1 previous>")
        self.assertIn("<cuweave.StageOperator 'a' (fb)", repr(q.operator("a")))
        r.close()
        q.close()

    def test_errors_of_the_building_calls(self):
        with self.assertRaises(TypeError):
            cuweave.Operator("A", None)
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.Operator("bad name!", lambda io: None)
        op = cuweave.Operator("A", lambda io: None, outputs=["out"])
        with self.assertRaises(cuweave.InvalidArgumentError):
            op.add_output("out")  # duplicate
        p = cuweave.Pipeline(self.ctx)
        p.add(op)
        with self.assertRaises(cuweave.InvalidStateError):
            op.add_input("late")  # in a pipeline already
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            p.connect("A", "out", "Z", "in")
        self.assertIn("Z", str(cm.exception))
        op.close()  # a pipeline's operator: only the object lets go
        self.assertFalse(op.closed)
        p.close()
        self.assertTrue(op.closed)
        with self.assertRaises(ValueError):
            op.handle


if __name__ == "__main__":
    unittest.main()
