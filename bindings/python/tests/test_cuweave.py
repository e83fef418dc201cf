# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of the Python bindings: the library loads, errors become the
generated exception classes, the no-driver path, and (against the fake
driver, tests/fake_cuda.c) contexts, streams, pools, leases, futures (asyncio
included), timers, handle lifetimes, the __cuda_stream__ protocol, and device
buffers (__cuda_array_interface__, copies, their lifetime).

Run: CUWEAVE_LIBRARY=build/make/libcuweave.so.2 \
     CUWEAVE_FAKE_DRIVER=build/make/tests/libfakecuda.so \
     python3 -m unittest discover -s bindings/python/tests -v
"""

import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
# CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a missing fake driver
# is then an error, not a reason to skip.
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)

# The driver is chosen once, at the first cuweave call: use the fake one,
# with its conditional-node and library features (graphs, modules and the
# resident loop), and the fake NVRTC beside it; the kernel cache in a
# temporary folder.
os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
os.environ["CUWEAVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="cuweave-pytest-")
os.environ.pop("CUWEAVE_SERIALIZE", None)

import cuweave  # noqa: E402


class TestLibrary(unittest.TestCase):
    def test_version_matches_the_header(self):
        with open(os.path.join(ROOT, "include/cuweave/version.h")) as f:
            text = f.read()
        want = tuple(int(text.split("#define CW_VERSION_%s " % k)[1].split()[0]) for k in ("MAJOR", "MINOR", "PATCH"))
        self.assertEqual(cuweave.version(), want)

    def test_exception_classes_from_the_c_list(self):
        classes = cuweave.errors()
        self.assertEqual(classes[2].name, "CW_ERROR_NO_DRIVER")
        self.assertIs(cuweave.error_class("CW_ERROR_POOL_EXHAUSTED"), cuweave.PoolExhaustedError)
        self.assertTrue(issubclass(cuweave.error_class("CW_ERROR_TIMEOUT"), TimeoutError))
        self.assertTrue(issubclass(cuweave.InvalidArgumentError, ValueError))
        self.assertEqual(len(classes), 17)
        for code, cls in classes.items():
            self.assertEqual(cls.status, code)
            self.assertTrue(issubclass(cls, cuweave.CuweaveError))

    def test_no_driver_in_a_fresh_process(self):
        code = (
            "import os, sys; sys.path.insert(0, %r); os.environ['CUWEAVE_LIBCUDA'] = '/nonexistent/libcuda.so.1'\n"
            "import cuweave\n"
            "try:\n    cuweave.init()\nexcept cuweave.NoDriverError as e:\n"
            "    assert e.detail['function'] == 'cw_init', e.detail\n    assert 'no CUDA driver' in str(e)\n"
            "    print('ok')\n"
        ) % os.path.dirname(HERE)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)


class TestWithFakeDriver(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)

    def tearDown(self):
        self.ctx.close()

    def test_context(self):
        self.assertEqual(self.ctx.device, 0)
        self.assertNotEqual(self.ctx.cu_context, 0)
        self.ctx.synchronize()
        self.assertEqual(cuweave.device_count(), 1)
        self.assertEqual(cuweave.driver_version(), cuweave.Version(13, 0, 0))

    def test_invalid_argument_raises_with_detail(self):
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            cuweave.StreamPool(self.ctx, reserved=5, max_streams=2)  # more reserved than allowed
        self.assertIn("cw_stream_pool_create", str(cm.exception))
        self.assertEqual(cm.exception.detail["function"], "cw_stream_pool_create")
        self.assertEqual(cm.exception.status, 1)
        with self.assertRaises(ValueError) as cm2:
            cuweave.StreamPool(self.ctx, mode=7)  # refused by the bindings, naming the parameter
        self.assertIn("mode", str(cm2.exception))

    def test_stream_protocol_and_wrap(self):
        with cuweave.Stream(self.ctx) as s:
            version, handle = s.__cuda_stream__()
            self.assertEqual(version, 0)
            self.assertEqual(handle, s.cu_stream)
            self.assertNotEqual(handle, 0)
            # wrapping the protocol object borrows the same CUstream
            w = cuweave.Stream.wrap(self.ctx, s)
            self.assertEqual(w.cu_stream, handle)
            w.close()
            s.synchronize()  # still alive after the wrapper went
            self.assertTrue(s.done())
        self.assertTrue(s.closed)
        s.close()  # idempotent

    def test_parent_outlives_children(self):
        s = cuweave.Stream(self.ctx)
        ctx = self.ctx
        del self.ctx  # the stream keeps the context alive
        gc.collect()
        s.synchronize()
        s.close()
        self.ctx = ctx

    def test_pool_lease_and_exhaustion(self):
        pool = cuweave.StreamPool(self.ctx, max_streams=2)
        a, b = pool.acquire(), pool.acquire()
        self.assertEqual(pool.stats()["leased"], 2)
        with self.assertRaises(cuweave.PoolExhaustedError):
            pool.acquire()
        a.release()
        a.release()  # idempotent
        with pool.acquire() as s:
            s.wait(b.stream)
            self.assertEqual(pool.stats()["leased"], 2)
        self.assertEqual(pool.stats()["leased"], 1)
        b.release()
        self.assertEqual(pool.stats(), {"mode": 0, "created": 2, "leased": 0, "idle": 2, "named": 0})
        pool.close()

    def test_round_robin(self):
        pool = cuweave.StreamPool(self.ctx, mode=cuweave.POOL_ROUND_ROBIN, reserved=3)
        seen = [pool.next().cu_stream for _ in range(9)]
        self.assertEqual(len(set(seen)), 3)
        self.assertEqual(seen[:3], seen[3:6])
        pool.close()

    def test_futures_wait_poll_fd_and_await(self):
        s = cuweave.Stream(self.ctx)
        for kind in (cuweave.HOST_FUNC, cuweave.WRITE_VALUE):
            f = cuweave.Future(s, kind)
            f.wait(timeout=5)
            self.assertTrue(f.poll())
            f.rearm(s)
            asyncio.run(asyncio.wait_for(self._await(f), 5))
            self.assertTrue(f.poll())
            self.assertGreaterEqual(f.fileno(), 0)
            f.close()
        s.close()

    async def _await(self, f):
        await f

    def test_timer(self):
        s = cuweave.Stream(self.ctx)
        t = cuweave.Timer(self.ctx)
        t.start(s)
        t.stop(s)
        self.assertGreater(t.elapsed(), 0.0)
        t.close()
        s.close()


@unittest.skipUnless(os.path.exists(FAKE), "the fake driver is not built")
class TestGraphsKernelsResident(unittest.TestCase):
    """Graphs captured from Python, NVRTC programs and kernel launches, and the
    resident loop, against the fake driver (which runs no kernels)."""

    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def test_capture_instantiate_launch(self):
        with self.s.capture() as cap:
            pass
        self.assertIsInstance(cap.graph, cuweave.Graph)
        exe = cap.graph.instantiate()
        exe.upload(self.s)
        for _ in range(3):
            exe.launch(self.s)
        self.s.synchronize()
        exe.close()
        cap.graph.close()
        cap.graph.close()  # idempotent

    def test_copy_into_a_buffer_inside_a_capture(self):
        # issue 41: the copy recorded a use on the capturing stream, which C refuses
        # (NotPermittedError: "cw_buffer_use: the stream is being captured")
        host = cuweave.HostMemory(self.ctx, 16)
        buf = cuweave.Buffer(self.s, 16)
        uses = buf.info()["uses"]
        with self.s.capture() as cap:
            buf.copy_from_host(self.s, host.view())
        self.assertEqual(cap.graph.info()["nodes"], 1)  # the copy
        self.assertEqual(buf.info()["uses"], uses)  # no use recorded in the capture
        exe = cap.graph.instantiate()
        exe.launch(self.s)
        buf.used_by(self.s)  # the launch's: the free waits for it
        self.s.synchronize()
        for x in (exe, cap.graph, buf, host):
            x.close()

    def test_capture_error_inside_the_body_wins(self):
        with self.assertRaises(ZeroDivisionError):
            with self.s.capture():
                1 / 0
        self.s.synchronize()  # the stream is usable again

    def test_program_module_kernel_launch(self):
        prog = cuweave.Program(self.ctx, 'extern "C" __global__ void k() {}', name="k.cu", options=["-lineinfo"],
                               headers={"extra.h": "#define X 1\n"})
        mod = prog.load()
        k = mod.kernel("k")
        self.assertIs(mod.kernel("k"), k)
        self.assertEqual(k.param_sizes(self.ctx), [])  # the fake reports no parameters
        k.launch(self.s, (2, 1, 1), 32)
        with self.assertRaises(TypeError):
            k.launch(self.s, 1, 1, 5)  # one argument too many
        self.s.synchronize()
        mod.close()
        prog.close()

    def test_buffer_interface_copies_and_lifetime(self):
        import struct
        buf = cuweave.Buffer(self.s, (4, 8), "float32")
        self.assertEqual(buf.nbytes, 128)
        cai = buf.__cuda_array_interface__
        self.assertEqual(cai["shape"], (4, 8))
        self.assertEqual(cai["typestr"], "<f4")
        self.assertEqual(cai["version"], 3)
        self.assertEqual(cai["data"], (buf.ptr, False))
        self.assertNotEqual(buf.ptr, 0)
        self.assertEqual(cai["stream"], self.s.cu_stream)  # written on (allocated on) this stream
        info = buf.info()
        self.assertEqual((info["nbytes"], info["refs"], info["uses"]), (128, 1, 1))
        data = struct.pack("<32f", *[float(i) for i in range(32)])
        buf.copy_from_host(self.s, data)
        other = cuweave.Stream(self.ctx)
        out = buf.copy_to_host(other)  # ordered behind the stream that wrote it
        self.assertEqual(bytes(out), data)
        self.assertEqual(buf.info()["uses"], 2)  # one per stream
        # a kernel argument: its address
        self.assertEqual(bytes(cuweave.Kernel._pack(buf, 8)), struct.pack("<Q", buf.ptr))
        with self.assertRaises(ValueError):
            buf.copy_from_host(self.s, bytes(129))
        with self.assertRaises(ValueError):
            buf.copy_to_host(self.s, bytearray(10))
        with self.assertRaises(ValueError):
            cuweave.Buffer(self.s, 4, "complex-ish")
        with self.assertRaises(ValueError):
            cuweave.Buffer(self.s, 0)
        self.assertEqual(cuweave.Buffer(self.s, 3, "uint16").nbytes, 6)
        buf.close()
        buf.close()  # idempotent
        self.assertTrue(buf.closed)
        other.close()

    def test_argument_packing(self):
        import struct
        pack = cuweave.Kernel._pack
        self.assertEqual(bytes(pack(-1, 4)), struct.pack("<I", 0xFFFFFFFF))
        self.assertEqual(bytes(pack(1 << 40, 8)), struct.pack("<Q", 1 << 40))
        self.assertEqual(bytes(pack(2.5, 4)), struct.pack("<f", 2.5))
        self.assertEqual(bytes(pack(2.5, 8)), struct.pack("<d", 2.5))

        class Buf:
            __cuda_array_interface__ = {"data": (0x1234000, False), "shape": (4,), "typestr": "<f4", "version": 3}

        self.assertEqual(bytes(pack(Buf(), 8)), struct.pack("<Q", 0x1234000))
        with self.assertRaises(TypeError):
            pack(1.5, 2)

    def test_partition_caps_and_partitions(self):
        caps = cuweave.partition_caps(0)
        self.assertEqual((caps["supported"], caps["sm_count"], caps["granularity"]), (1, 132, 8))
        # the fake answers the query but (by default) makes no green contexts
        with self.assertRaises(cuweave.NotSupportedError) as cm:
            cuweave.PartitionGroup([16, 8])
        self.assertIn("cw_partition_group_create", str(cm.exception))

    def test_resident_settings_layout_and_errors(self):
        d = cuweave.Resident.default_settings()
        self.assertEqual((d["sleep_interval"], d["unroll"], d["destroy_timeout"], d["priority"], d["lifetime"]),
                         (500e-6, 16, 5.0, None, None))
        with self.assertRaises(TypeError):
            cuweave.Resident(self.ctx, no_such_setting=1)
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.Resident(self.ctx, unroll=0)
        # trace: off by default, a boolean (any nonzero value, kept as 1), not with overlap (the field sits
        # where the C struct has it)
        self.assertIs(d["trace"], False)
        # issue 24: the gate and overlap are chosen at the build by default
        self.assertEqual((d["gate"], d["overlap"]), (cuweave.GATE_AUTO, None))
        with self.assertRaises(TypeError) as cm:
            cuweave.Resident(self.ctx, trace=2)  # a bool
        self.assertIn("trace", str(cm.exception))
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            cuweave.Resident(self.ctx, trace=True, overlap=True, gate=cuweave.GATE_KERNELS)
        self.assertIn("trace and overlap", str(cm.exception))
        r = cuweave.Resident(self.ctx, trace=1)
        self.assertEqual(r.settings()["trace"], 1)
        r.close()
        # gate BEGIN_END: the workload's kernels poll and signal; without a capture function the build refuses
        r = cuweave.Resident(self.ctx, gate=cuweave.GATE_BEGIN_END, overlap=0)
        self.assertEqual(r.settings()["gate"], cuweave.GATE_BEGIN_END)
        with self.assertRaises(cuweave.InvalidStateError) as cm:
            r.build()
        self.assertIn("gate BEGIN_END needs the workload as a capture function", str(cm.exception))
        r.close()
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.Resident(self.ctx, trace=1, gate=cuweave.GATE_BEGIN_END)
        self.assertIn("cw_resident_ctl", cuweave.resident_device_header())

    def test_resident_states_and_requests(self):
        with self.s.capture() as cap:
            pass
        r = cuweave.Resident(self.ctx, input_slots=2, input_bytes=64, sleep_interval=0)
        r.set_workload(cap.graph)
        cap.graph.close()  # the loop keeps its own copy
        self.assertNotEqual(r.ctl, 0)
        self.assertEqual(r.input(1) - r.input(0), 64)
        self.assertFalse(r.launched)
        with self.assertRaises(cuweave.InvalidStateError):
            r.data_ready()
        st = r.stats()
        self.assertEqual((st["gate"], st["overlap"], st["fallback_detail"]), (cuweave.GATE_AUTO, None, ""))
        r.build()
        # an empty workload qualifies for the kernel gate; given as a graph it is
        # a child graph node, which overlap cannot chain: off, with the reason
        st = r.stats()
        self.assertEqual((st["gate"], st["overlap"], st["fallback"]), (cuweave.GATE_KERNELS, False, cuweave.FALLBACK_NODE))
        self.assertIn("child graph node", st["fallback_detail"])
        r.launch()
        self.assertTrue(r.launched)
        slot = r.next_input()
        self.assertEqual(slot, r.input(0))
        self.assertEqual(r.data_ready(), 1)
        self.assertEqual(r.data_ready(), 2)
        self.assertFalse(r.result_ready(1))  # the fake serves nothing
        with self.assertRaises(cuweave.CuweaveTimeoutError):
            r.wait_result(1, timeout=0.01)
        st = r.stats()
        self.assertEqual((st["requested"], st["completed"], st["launches"]), (2, 0, 1))
        self.assertEqual((st["state"], st["launched"]), (cuweave.ResidentState.RUNNING, True))
        r.tear_down(timeout=1.0)
        self.assertFalse(r.launched)
        with self.assertRaises(cuweave.InvalidStateError):
            r.result_ready(1)  # dropped by the teardown
        r.close()
        r.close()

    def test_resident_fused(self):
        src = ('extern "C" __device__ void a(cw_resident_ctl *c, void *u) {}\n'
               'extern "C" __device__ void b(cw_resident_ctl *c, void *u) {}\n')
        r = cuweave.Resident(self.ctx, input_slots=2, input_bytes=16)
        # the fake: 2048 threads an SM, 132 SMs
        r.set_fused(src, ["a", "b"], block_threads=512, user=0x1000)
        st = r.stats()
        self.assertEqual((st["fused"], st["grid_blocks"], st["block_threads"], st["max_grid_blocks"]),
                         (1, 4 * 132, 512, 4 * 132))
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            r.set_fused(src, ["a", "b"], block_threads=512, grid_blocks=4 * 132 + 1)
        self.assertIn("at most 528", str(cm.exception))
        with self.assertRaises(cuweave.InvalidArgumentError) as cm:
            r.set_fused(src, ["a", "zz"])
        self.assertIn("'zz', is not in the source", str(cm.exception))
        with self.assertRaises(cuweave.CompileError):
            r.set_fused(src + "#error nope\n", ["a"])
        with self.assertRaises(cuweave.InvalidStateError):
            with self.s.capture() as cap:
                pass
            r.set_workload(cap.graph)
        r.set_fused(src, ["a"], grid_blocks=2, options=["-DX=1"])
        self.assertEqual(r.stats()["grid_blocks"], 2)
        r.launch()
        self.assertEqual(r.data_ready(), 1)
        self.assertFalse(r.result_ready(1))  # the fake runs no kernel
        r.tear_down(timeout=1.0)
        with self.assertRaises(cuweave.InvalidStateError):
            r.result_ready(1)  # dropped
        r.set_fused(None, None)
        self.assertEqual(r.stats()["fused"], 0)
        r.close()

    def test_resident_dataflow(self):
        # issue 39: tile dataflow stages from Python; each refusal below is
        # the C library's, so its words show the field reached it as given
        src = ('extern "C" __device__ void a(const cw_fused_tile *t, void *u) {}\n'
               'extern "C" __device__ void b(const cw_fused_tile *t, void *u) {}\n'
               'extern "C" __device__ void c(const cw_fused_tile *t, void *u) {}\n'
               'extern "C" __device__ int pick(const cw_fused_tile *t, unsigned i) { return -1; }\n')
        FS, FD, RD = cuweave.FusedStage, cuweave.FusedDep, cuweave.FusedRead
        r = cuweave.Resident(self.ctx, input_slots=2, input_bytes=16)

        def plan(b_reads, a_cut=None, b_cut=None):
            return [FS("a", **(a_cut or {"tiles": 8})), FS("b", b_reads, **(b_cut or {"tiles": 8})),
                    FS("c", [FD(1, RD.ALL)], tiles=1, threads=64, shared_bytes=256)]

        r.set_dataflow(src, plan([FD(0, "same")]), in_flight=2, block_threads=128, user=0x1000)
        st = r.stats()
        self.assertEqual((st["fused"], st["block_threads"], st["stall"]), (1, 128, None))
        self.assertEqual(st["grid_blocks"], 132)  # one block an SM of the fake's 132
        refusals = [
            (plan([FD(2, RD.SAME)]), "stage 1 ('b') reads a stage that runs after it"),
            (plan([FD(1, RD.SAME)]), "stage 1 ('b') reads itself"),
            (plan([FD(0, RD.SAME)], b_cut={"tiles": 4}), "tile grids differ (4x1 and 8x1)"),
            (plan([FD(0, RD.NEIGHBOURS, radius=9)]), "with radius 9: more than its tile grid"),
            (plan([FD(0, RD.NEIGHBOURS, scale=(2, 1))]), "at scale 2/1: its 8x1 tiles map to 16x1 tiles"),
            (plan([FD(0, RD.FUNCTION, function="nowhere")]), "function 'nowhere' is not in the source"),
            (plan([FD(0, RD.SAME, function="pick")]), "function is set but read is not CW_FUSED_READ_FUNCTION"),
            (plan([], b_cut={"size": (1 << 20, 1 << 20), "tile": 1}), "has 1099511627776 tiles"),
            (plan([], b_cut={"tiles": 4, "size": 64, "tile": 8}), "stage 1 ('b') gives both"),
            ([FS("a", tiles=8), FS("b", tiles=8, threads=512)], "stage 1 ('b') asks 512 threads"),
        ]
        for stages, words in refusals:
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                r.set_dataflow(src, stages)
            self.assertIn(words, str(cm.exception))
        # accepted: a 2-D cut read through a neighbourhood at a scale, a
        # function, the previous request, and no watchdog
        r.set_dataflow(src, [FS("a", size=(64, 32), tile=(16, 16)),
                             FS("b", [FD(0, RD.NEIGHBOURS, radius=1, scale=(2, 1))], size=(32, 16), tile=(16, 16)),
                             FS("c", [FD(1, RD.FUNCTION, function="pick"), FD(2, RD.SAME, previous=True)],
                                size=(32, 16), tile=(16, 16))], in_flight=1, watchdog=None)
        self.assertEqual(r.stats()["fused"], 1)
        r.launch()
        self.assertEqual(r.data_ready(), 1)
        r.tear_down(timeout=1.0)
        self.assertIsNone(r.stats()["stall"])
        for bad, exc, words in ((lambda: r.set_dataflow(src, []), ValueError, "stages"),
                                (lambda: r.set_dataflow(src, plan([]), in_flight=9), ValueError, "in_flight"),
                                (lambda: r.set_dataflow(src, plan([]), watchdog=0), ValueError, "watchdog"),
                                (lambda: r.set_dataflow(src, ["a"]), TypeError, "stages[0]"),
                                (lambda: FD(0, "sideways"), ValueError, "read"),
                                (lambda: FD(0, RD.NEIGHBOURS, scale=(1, 0)), ValueError, "scale"),
                                (lambda: FD(0, RD.NEIGHBOURS, scale=2), TypeError, "scale"),
                                (lambda: FS("a", size=(1, 2, 3)), ValueError, "size"),
                                (lambda: FS("a", reads=[FD(0, 1)] * 17), ValueError, "reads")):
            with self.assertRaises(exc) as cm:
                bad()
            self.assertIn(words, str(cm.exception))
        self.assertEqual(repr(FD(0, RD.NEIGHBOURS, radius=1, scale=(2, 1))),
                         "<cuweave.FusedDep stage 0 neighbours radius 1 scale 2/1>")
        self.assertEqual(repr(FS("b", [FD(0, 1)], size=(64, 32), tile=(16, 16))),
                         "<cuweave.FusedStage b 64x32 in 16x16, 1 reads>")
        r.close()


if __name__ == "__main__":
    unittest.main()
