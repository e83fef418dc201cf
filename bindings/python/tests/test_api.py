# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests, against the fake driver, of the calls bound in 0.2 beyond those
test_cuweave.py covers: device info and features, graph building
(empty, child and conditional nodes, condition handles, sinks, DOT output,
exec update and info), program info and lowered names, the kernel cache's
settings and statistics, modules from images, built-in kernels, kernel
handles, page-locked host memory, future callbacks / when_all / spin,
forks, named pool streams, and the resident loop's configure, handler,
capture functions and stages.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     CUWEAVE_FAKE_DRIVER=build/meson/tests/libfakecuda.so \\
     python3 -m unittest discover -s bindings/python/tests -v
"""

import ctypes
import gc
import os
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
# CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a missing fake driver
# is then an error, not a reason to skip.
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)

os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
os.environ.pop("CUWEAVE_SERIALIZE", None)

import cuweave  # noqa: E402

FAKE_PTX = "// fake PTX\n.version 8.0\n.target sm_90\n"


@unittest.skipUnless(os.path.exists(FAKE), "the fake driver is not built")
class TestMoreOfTheApi(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        gc.collect()
        self.ctx.close()

    def test_device_info_and_features(self):
        d = cuweave.device_info(0)
        self.assertEqual((d["name"], d["cc"], d["sm_count"], d["ordinal"]), ("cuweave fake device", (9, 0), 132, 0))
        self.assertEqual(len(d["uuid"]), 16)
        self.assertGreater(d["total_memory"], 0)
        self.assertTrue(cuweave.driver_has(cuweave.FEATURE_CONDITIONAL_NODES))
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.device_info(7)
        self.assertEqual(cuweave.versions().driver, (13, 0, 0))
        self.assertEqual(str(cuweave.versions().driver), "13.0.0")

    def test_graph_building(self):
        g = cuweave.Graph(self.ctx)
        first = g.add_empty()
        with self.s.capture() as cap:
            pass
        child = g.add_child(cap.graph, [first])
        cap.graph.close()  # copied into the node
        h = g.add_cond_handle(default=1, reset_each_launch=True)
        node, body, other = g.add_conditional(h, cuweave.COND_IF, with_else=True, deps=[child])
        self.assertIsNotNone(other)
        self.assertTrue(body.info()["is_body"])
        body.add_empty()  # a body is built like any graph
        with self.s.capture(into=other) as c2:
            pass
        self.assertIs(c2.graph, other)
        info = g.info()
        self.assertEqual((info["nodes"], info["sinks"]), (3, 1))
        [sink] = g.sinks()
        g.add_empty([sink, first])
        self.assertEqual(len(g.sinks()), 1)
        dot = os.path.join(tempfile.mkdtemp(), "g.dot")
        g.write_dot(dot)
        self.assertTrue(os.path.exists(dot))
        with self.assertRaises(TypeError):
            g.add_empty(["not a node"])
        exe = g.instantiate()
        exe.launch(self.s)
        self.s.synchronize()
        self.assertEqual(exe.info()["launches"], 1)
        up = exe.update(g)
        self.assertIn(up["kind"], (cuweave.GRAPH_UPDATED_IN_PLACE, cuweave.GRAPH_REINSTANTIATED))
        exe.close()
        g.close()
        self.assertTrue(body.closed)  # a body goes with its graph
        self.assertEqual(self.s.capture_state(), cuweave.CAPTURE_NONE)

    def test_programs_cache_modules_and_kernels(self):
        cuweave.jit_cache_configure(memory=True)
        before = cuweave.jit_stats()
        prog = cuweave.Program(self.ctx, 'extern "C" __global__ void k() {}\n'
                                         'template <int N> __global__ void t() {}\n',
                               name="more.cu", name_expressions=["t<3>"])
        info = prog.info()
        self.assertEqual((info["source"], info["arch"], len(info["key"])), ("compile", 90, 64))
        self.assertGreater(len(info["code"]), 0)
        self.assertTrue(prog.lowered_name("t<3>"))
        with self.assertRaises(cuweave.InvalidArgumentError):
            prog.lowered_name("t<4>")
        self.assertEqual(cuweave.jit_stats()["compiles"], before["compiles"] + 1)
        cuweave.jit_cache_clear_memory()
        k = prog.load().kernel("k")
        self.assertNotEqual(k.cu_kernel, 0)
        m = cuweave.Module.from_image(FAKE_PTX, self.ctx)
        self.assertIs(m.context, self.ctx)
        m.close()
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            cuweave.Module.from_image(b"garbage" * 100)
        self.assertIn("not a cubin", str(cm.exception))
        fill = cuweave.builtin_kernel(cuweave.BUILTIN_FILL_U32)
        self.assertNotEqual(fill.cu_kernel, 0)

    def test_host_memory(self):
        with cuweave.HostMemory(self.ctx, 64) as hm:
            self.assertEqual(bytes(hm.view()), bytes(64))  # zeroed
            hm.view()[:4] = b"abcd"
            buf = cuweave.Buffer(self.s, 64)
            cuweave._lib.lib.cw_copy_to_device(self.s.handle, buf.ptr, ctypes.c_void_p(hm.ptr), 64)
            out = buf.copy_to_host(self.s)
            self.assertEqual(bytes(out[:4]), b"abcd")
            buf.close()
        self.assertTrue(hm.closed)
        hm.close()  # idempotent

    def test_future_callbacks_when_all_and_spin(self):
        got = []
        done = threading.Event()
        f = cuweave.Future(self.s, cuweave.HOST_FUNC)
        f.add_done_callback(lambda err: (got.append(err), done.set()))
        self.assertTrue(done.wait(5))
        self.assertEqual(got, [None])
        with self.assertRaises(cuweave.InvalidStateError):
            f.add_done_callback(lambda err: None)  # one callback per future
        # already complete: it runs at once, on this thread
        here = []
        g = cuweave.Future(self.s)
        g.wait(5)
        g.add_done_callback(lambda err: here.append(threading.get_ident()))
        self.assertEqual(here, [threading.get_ident()])
        g.set_spin(50e-6)
        with self.assertRaises(ValueError) as cm:
            g.set_spin(20)  # more than 10 s
        self.assertIn("spin", str(cm.exception))
        other = cuweave.Stream(self.ctx)
        w = cuweave.Future.when_all([self.s, other], cuweave.EVENT)
        w.wait(5)
        self.assertTrue(w.poll())
        with self.assertRaises(ValueError):
            cuweave.Future.when_all([])
        f.close(), g.close(), w.close(), other.close()
        gc.collect()
        self.assertEqual(cuweave._core._future_callbacks, {})

    def test_forks_and_named_pool_streams(self):
        with self.s.fork() as child:
            self.assertNotEqual(child.cu_stream, self.s.cu_stream)
        self.assertTrue(child.closed)
        pool = cuweave.StreamPool(self.ctx)
        owner = object()
        a = pool.acquire_named(owner, "x")
        self.assertEqual(pool.acquire_named(owner, "x").cu_stream, a.cu_stream)
        self.assertNotEqual(pool.acquire_named(owner, "y").cu_stream, a.cu_stream)
        self.assertEqual(pool.stats()["named"], 2)
        self.assertEqual(pool.release_owner(owner), 2)
        self.assertEqual(pool.stats()["named"], 0)
        with self.assertRaises(ValueError):
            pool.acquire_named(0, "x")
        pool.close()

    def test_resident_configure_handler_capture_functions_and_stages(self):
        r = cuweave.Resident(self.ctx, trace=1, unroll=2)
        r.configure(sleep_interval=7e-6)
        self.assertEqual(r.settings()["sleep_interval"], 7e-6)
        with self.assertRaises(cuweave.InvalidArgumentError):
            r.configure(input_slots=2)  # fixed when the loop is made
        stages = []

        def workload(stream):
            stages.append(stream.capture_state())
            sid = r.stage_begin(stream, "mine")
            r.stage_end(stream, sid)

        r.set_workload(workload)
        with self.s.capture() as cap:
            pass
        r.set_handler(cap.graph)
        r.build()
        # once per unrolled copy, and once first for the build's look at the workload (gate AUTO, the
        # default), each on a capturing stream
        self.assertEqual(stages, [cuweave.CAPTURE_ACTIVE] * (2 + 1))

        def broken(stream):
            raise ValueError("no workload today")

        r.set_workload(broken)
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            r.build()
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        self.assertIn("no workload today", str(cm.exception))
        r.set_workload(cap.graph)  # a graph again: the function is let go
        self.assertNotIn("workload", r._parts)
        r.build()
        r.close()


if __name__ == "__main__":
    unittest.main()
