# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of the several-device bindings (cuweave/multi.h and
cuweave/collective.h) against the fake driver with two devices
(FAKE_CUDA_DEVICES=2) and the fake NCCL (tests/fake_nccl.c, which performs
the collectives on the host: the fake's device memory is host memory):
device groups, peer queries and access, peer and buffer copies across
devices, pools shared, several resident loops served from one thread, the
communicator's all-reduce and broadcast with their results read back, and the
errors.

The fake driver reads its device count once per process, at the first
cuInit, and test_cuweave.py (imported first by discovery) has it initialised
with one device by then. So each test here runs in a fresh interpreter: the
parent class TestMulti has one test per case of MultiCases, each running
`python3 -m unittest test_multi.TestMultiChild.<case>` with the environment
set before cuweave is imported.

Run: CUWEAVE_LIBRARY=build-make/libcuweave.so.2 \
     CUWEAVE_FAKE_DRIVER=build-make/tests/libfakecuda.so \
     python3 -m unittest discover -s bindings/python/tests -v
"""

import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.path.abspath(os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so")))
# CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a missing fake driver
# is then an error, not a reason to skip.
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)
FAKE_NCCL = os.path.join(os.path.dirname(FAKE), "libfakenccl.so")
FAKE_NVRTC = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
CHILD = os.environ.get("CUWEAVE_PYTEST_MULTI_CHILD") == "1"


def _child_env(**extra):
    """The environment a case runs in: two fake devices with every feature,
    the fake NCCL (NVLS off), the fake NVRTC, a temporary kernel cache."""
    env = dict(os.environ)
    for k in ("CUWEAVE_SERIALIZE", "FAKE_CUDA_NO_PEER", "FAKE_NCCL_VERSION"):
        env.pop(k, None)
    if env.get("CUWEAVE_LIBRARY"):
        env["CUWEAVE_LIBRARY"] = os.path.abspath(env["CUWEAVE_LIBRARY"])
    env.update({
        "CUWEAVE_PYTEST_MULTI_CHILD": "1",
        "CUWEAVE_FAKE_DRIVER": FAKE,
        "FAKE_CUDA_DEVICES": "2",
        "FAKE_CUDA_FEATURES": "all",
        "CUWEAVE_LIBCUDA": FAKE,
        "CUWEAVE_LIBNCCL": FAKE_NCCL,
        "CUWEAVE_LIBNVRTC": FAKE_NVRTC,
        "NCCL_NVLS_ENABLE": "0",
        "CUWEAVE_CACHE_DIR": tempfile.mkdtemp(prefix="cuweave-pytest-multi-"),
        "PYTHONPATH": os.pathsep.join([HERE] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
    })
    env.update(extra)
    return env


def child_env(**extra):
    """Marks a case to run with these extra environment variables."""
    def mark(fn):
        fn.child_env = extra
        return fn
    return mark


def enable_all_peers(group):
    """Peer access for every ordered pair of the group the topology allows
    (what 0.1's DeviceSet.enable_peers did); the pairs enabled."""
    pairs = 0
    for a, ca in enumerate(group.contexts()):
        for b, cb in enumerate(group.contexts()):
            if a != b and cuweave.peer_info(group.ordinal(a), group.ordinal(b)).can_access:
                ca.enable_peer(cb)
                pairs += 1
    return pairs


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def unfloats(data):
    return list(struct.unpack("<%df" % (len(data) // 4), bytes(data)))


class MultiCases:
    """The cases; they run in a child process (TestMultiChild), never here."""

    N = 16  # float32 elements per buffer

    def setUp(self):
        self.fake = ctypes.CDLL(FAKE)  # the library cuweave loaded: its counters
        self.fake.fake_cuda_live.restype = ctypes.c_long
        self.fake.fake_cuda_live.argtypes = [ctypes.c_char_p]

    def live(self, kind):
        return self.fake.fake_cuda_live(kind.encode())

    def two_streams(self, ds):
        return cuweave.Stream(ds.context(0)), cuweave.Stream(ds.context(1))

    # ---- device groups ----

    def test_device_group_of_every_device(self):
        self.assertEqual(cuweave.device_count(), 2)
        with cuweave.DeviceGroup() as ds:
            self.assertEqual(len(ds), 2)
            self.assertEqual(ds.ordinals(), [0, 1])
            c0, c1 = ds.contexts()
            self.assertEqual((c0.device, c1.device), (0, 1))
            self.assertIs(ds.context(0), c0)  # one Context object per member
            self.assertNotEqual(c0.cu_context, c1.cu_context)
            self.assertEqual(self.live("primary0"), 1)
            self.assertEqual(self.live("primary1"), 1)
            with self.assertRaises(cuweave.InvalidArgumentError):
                ds.context(2)
            with self.assertRaises(ValueError) as cm:
                ds.ordinal(-1)  # refused by the bindings, naming the parameter
            self.assertIn("index", str(cm.exception))
        self.assertTrue(ds.closed)
        self.assertTrue(c0.closed)  # borrowed: closed with the group
        with self.assertRaises(ValueError):
            c0.handle
        ds.close()  # idempotent
        self.assertEqual(self.live("primary0"), 0)
        self.assertEqual(self.live("primary1"), 0)

    def test_device_group_with_a_list_and_objects_outliving_it(self):
        ds = cuweave.DeviceGroup([1, 0])
        self.assertEqual((ds.ordinal(0), ds.ordinal(1)), (1, 0))
        self.assertEqual((ds.context(0).device, ds.context(1).device), (1, 0))
        s = cuweave.Stream(ds.context(0))  # keeps device 1's context alive in C
        ds.close()
        self.assertEqual(self.live("primary1"), 1)
        self.assertEqual(self.live("primary0"), 0)
        s.synchronize()
        s.close()
        self.assertEqual(self.live("primary1"), 0)

    def test_device_group_errors(self):
        for devices in ([0, 0], [1, 0, 1]):
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                cuweave.DeviceGroup(devices)
            e = cm.exception
            self.assertEqual(e.status, 1)
            self.assertEqual(e.name, "CW_ERROR_INVALID_ARGUMENT")
            self.assertIs(type(e), cuweave.error_class("CW_ERROR_INVALID_ARGUMENT"))
            self.assertEqual(e.detail["function"], "cw_device_group_create")
            self.assertIn("both device", str(e))
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.DeviceGroup([0, 2])  # out of range
        with self.assertRaises(ValueError):
            cuweave.DeviceGroup([])
        self.assertEqual(self.live("primary0"), 0)  # nothing left retained
        self.assertEqual(self.live("primary1"), 0)

    # ---- peers ----

    def test_peer_info(self):
        self.assertEqual(cuweave.peer_info(0, 1), cuweave.PeerInfo(True, 0, True))
        self.assertTrue(cuweave.peer_info(1, 0).can_access)
        self.assertEqual(cuweave.peer_info(1, 1), (True, 0, True))  # a device reaches itself
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.peer_info(0, 2)

    @child_env(FAKE_CUDA_NO_PEER="1")
    def test_peer_info_without_topology_access(self):
        self.assertFalse(cuweave.peer_info(0, 1).can_access)
        with cuweave.DeviceGroup() as ds:
            self.assertEqual(enable_all_peers(ds), 0)  # skipped, not an error
            with self.assertRaises(cuweave.NotSupportedError):
                ds.context(0).enable_peer(ds.context(1))

    def test_enable_peers_idempotent(self):
        with cuweave.DeviceGroup() as ds:
            c0, c1 = ds.contexts()
            self.assertEqual(self.live("peers"), 0)
            self.assertEqual(enable_all_peers(ds), 2)
            self.assertEqual(self.live("peers"), 2)
            self.assertEqual(enable_all_peers(ds), 2)  # again: nothing new
            c0.enable_peer(c1)  # already enabled: fine
            self.assertEqual(self.live("peers"), 2)

    def test_context_enable_peer_one_direction(self):
        a, b = cuweave.Context(0), cuweave.Context(1)
        a.enable_peer(b)
        self.assertEqual(self.live("peers"), 1)
        with self.assertRaises(cuweave.InvalidArgumentError):
            a.enable_peer(cuweave.Context(0))  # one device
        a.close()
        b.close()

    def test_share_buffer_pool(self):
        with cuweave.DeviceGroup() as ds:
            c0, c1 = ds.contexts()
            cuweave.share_buffer_pool(c0, c1)
            self.assertEqual(self.live("peers"), 1)  # it enables (peer, owner)
            with self.assertRaises(cuweave.InvalidArgumentError):
                cuweave.share_buffer_pool(c0, c0)

    # ---- copies across devices ----

    def test_buffer_copy_from_across_devices(self):
        with cuweave.DeviceGroup() as ds:
            enable_all_peers(ds)
            s0, s1 = self.two_streams(ds)
            b0 = cuweave.Buffer(s0, self.N, "float32")
            data = floats([i * 0.5 for i in range(self.N)])
            b0.copy_from_host(s0, data)
            b1 = cuweave.Buffer(s1, self.N, "float32")
            self.assertEqual((b0.info()["device"], b1.info()["device"]), (0, 1))
            s1.wait(s0)  # device 1's stream after device 0's writes
            b1.copy_from(s1, b0)
            self.assertEqual(b1.__cuda_array_interface__["stream"], s1.cu_stream)  # written on s1
            self.assertEqual(b0.info()["uses"], 2)  # s0 and s1
            self.assertEqual(bytes(b1.copy_to_host(s1)), data)
            self.assertEqual(self.live("direct"), 1)  # peer access is on
            # and back, on device 0's stream
            b0.copy_from_host(s0, bytes(b0.nbytes))
            b0.copy_from(s0, b1)  # ordered after b1's writer (s1) by the binding
            self.assertEqual(bytes(b0.copy_to_host(s0)), data)
            small = cuweave.Buffer(s1, 4, "float32")
            with self.assertRaises(cuweave.InvalidArgumentError):
                small.copy_from(s1, b0)  # smaller than the source
            with self.assertRaises(cuweave.InvalidArgumentError):
                b0.copy_from(s0, b0)
            with self.assertRaises(TypeError):
                b0.copy_from(s0, b1.ptr)  # addresses go through copy_peer
            for b in (b0, b1, small):
                b.close()
            s0.close()
            s1.close()
        self.assertEqual(self.live("badaccess"), 0)

    def test_copy_peer_raw_addresses_and_buffers(self):
        with cuweave.DeviceGroup() as ds:
            c0, c1 = ds.contexts()
            s0, s1 = self.two_streams(ds)
            b0 = cuweave.Buffer(s0, self.N, "float32")
            b1 = cuweave.Buffer(s1, self.N, "float32")
            data = floats([float(100 + i) for i in range(self.N)])
            b0.copy_from_host(s0, data)
            s1.wait(s0)
            # raw device addresses: staged (no peer access enabled); the caller records the uses
            cuweave.copy_peer(s1, b1.ptr, c1, b0.ptr, c0, b0.nbytes)
            b0.used_by(s1)
            b1.written_on(s1)
            self.assertEqual(bytes(b1.copy_to_host(s1)), data)
            self.assertEqual((self.live("staged"), self.live("direct")), (1, 0))
            # half of it back with Buffers (their own contexts), on device 0's stream
            b0.copy_from_host(s0, bytes(b0.nbytes))
            cuweave.copy_peer(s0, b0, None, b1, None, b0.nbytes // 2)
            out = bytes(b0.copy_to_host(s0))
            self.assertEqual(out[:b0.nbytes // 2], data[:b0.nbytes // 2])
            self.assertEqual(out[b0.nbytes // 2:], bytes(b0.nbytes // 2))
            cuweave.copy_peer(s0, b0, None, b1, None, 0)  # nothing
            with self.assertRaises(ValueError):
                cuweave.copy_peer(s0, b0, None, b1, None, b0.nbytes + 4)
            with self.assertRaises(TypeError):
                cuweave.copy_peer(s0, b0.ptr, None, b1, None, 4)
            with self.assertRaises(cuweave.InvalidArgumentError):
                cuweave.copy_peer(s0, 0, c0, b1.ptr, c1, 4)
            for x in (b0, b1, s0, s1):
                x.close()
        self.assertEqual(self.live("badaccess"), 0)

    # ---- several resident loops ----

    def test_resident_loops_on_two_devices(self):
        with cuweave.DeviceGroup() as ds:
            loops, streams = [], []
            for ctx in ds.contexts():
                s = cuweave.Stream(ctx)
                with s.capture() as cap:
                    pass
                r = cuweave.Resident(ctx, sleep_interval=0)
                r.set_workload(cap.graph)
                cap.graph.close()
                streams.append(s)
                loops.append(r)
            idle = cuweave.Resident(ds.context(0))  # never launched
            for r in loops:  # every loop built before any runs (building loads code)
                r.build()
            for r in loops:
                r.launch()
            # one thread rings both doorbells, then waits for both results
            self.assertEqual([r.data_ready() for r in loops], [1, 1])
            self.assertEqual([r.data_ready() for r in loops[::-1]], [2, 2])
            with self.assertRaises(cuweave.CuweaveTimeoutError):  # the fake serves nothing
                loops[0].wait_result(1, timeout=0.01)
            self.assertEqual(loops[1].data_ready(), 3)
            with self.assertRaises(cuweave.InvalidStateError):
                idle.data_ready()  # not launched
            self.assertEqual([r.stats()["requested"] for r in loops], [2, 3])
            for r in loops + [idle]:
                r.close()
            for s in streams:
                s.close()

    # ---- NCCL ----

    def test_nccl_version(self):
        self.assertEqual(cuweave.nccl_version(), (2, 27, 3))

    def test_comm_all_reduce_float32(self):
        with cuweave.DeviceGroup() as ds:
            ctxs = ds.contexts()
            streams = list(self.two_streams(ds))
            send, recv = [], []
            for r, s in enumerate(streams):
                b = cuweave.Buffer(s, self.N, "float32")
                b.copy_from_host(s, floats([float(r + 1)] * self.N))
                send.append(b)
                recv.append(cuweave.Buffer(s, self.N, "float32"))
            with cuweave.Comm(ctxs) as comm:
                self.assertEqual(comm.size, 2)
                self.assertEqual(len(comm), 2)
                self.assertIs(comm.context(0), ctxs[0])
                self.assertIs(comm.context(1), ctxs[1])
                comm.all_reduce(send, recv, self.N, cuweave.Dtype.FLOAT32, cuweave.ReduceOp.SUM, streams)
                for r, s in enumerate(streams):
                    self.assertEqual(unfloats(recv[r].copy_to_host(s)), [3.0] * self.N)
                    self.assertEqual(recv[r].__cuda_array_interface__["stream"], s.cu_stream)
                # raw addresses, in place, by name
                comm.all_reduce([b.ptr for b in send], [b.ptr for b in send], self.N, "float32", "max", streams)
                for r, s in enumerate(streams):
                    self.assertEqual(unfloats(send[r].copy_to_host(s)), [2.0] * self.N)
                # int32, avg
                ints = []
                for r, s in enumerate(streams):
                    b = cuweave.Buffer(s, 4, "int32")
                    b.copy_from_host(s, struct.pack("<4i", *[10 * (r + 1)] * 4))
                    ints.append(b)
                comm.all_reduce(ints, ints, 4, cuweave.Dtype.INT32, cuweave.ReduceOp.AVG, streams)
                self.assertEqual(struct.unpack("<4i", ints[1].copy_to_host(streams[1])), (15,) * 4)
                comm.all_reduce(send, recv, 0, "float32", "sum", streams)  # count 0: nothing
                # errors
                with self.assertRaises(ValueError):
                    comm.all_reduce(send[:1], recv, self.N, "float32", "sum", streams)
                with self.assertRaises(ValueError):
                    comm.all_reduce(send, recv, self.N + 1, "float32", "sum", streams)  # exceeds the buffers
                with self.assertRaises(ValueError):
                    comm.all_reduce(send, recv, self.N, "complex", "sum", streams)
                with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                    comm.all_reduce(send, recv, self.N, "float32", "sum", streams[::-1])  # other devices' streams
                self.assertIn("rank 0", str(cm.exception))
                with self.assertRaises(cuweave.InvalidArgumentError):
                    comm.all_reduce([0, 0], [0, 0], self.N, "float32", "sum", streams)
                comm.close()
                self.assertTrue(comm.closed)
            comm.close()  # idempotent
            for b in send + recv + ints + streams:
                b.close()

    def test_comm_broadcast(self):
        with cuweave.DeviceGroup() as ds:
            streams = list(self.two_streams(ds))
            root_data = floats([7.0 + i for i in range(self.N)])
            src = cuweave.Buffer(streams[1], self.N, "float32")
            src.copy_from_host(streams[1], root_data)
            recv = [cuweave.Buffer(s, self.N, "float32") for s in streams]
            comm = cuweave.Comm(ds.contexts())
            comm.broadcast([None, src], recv, self.N, cuweave.Dtype.FLOAT32, 1, streams)
            for r, s in enumerate(streams):
                self.assertEqual(bytes(recv[r].copy_to_host(s)), root_data)
            # root 0, raw addresses, the others' send 0
            comm.broadcast([recv[0].ptr, 0], [recv[0].ptr, src.ptr], self.N, "float32", 0, streams)
            self.assertEqual(bytes(src.copy_to_host(streams[1])), root_data)
            with self.assertRaises(cuweave.InvalidArgumentError):
                comm.broadcast([src, src], recv, self.N, "float32", 2, streams)
            comm.close()
            for b in recv + [src] + streams:
                b.close()

    def test_comm_rank_calls_in_a_group(self):
        with cuweave.DeviceGroup() as ds:
            streams = list(self.two_streams(ds))
            bufs = []
            for r, s in enumerate(streams):
                b = cuweave.Buffer(s, self.N, "float32")
                b.copy_from_host(s, floats([float(10 * (r + 1))] * self.N))
                bufs.append(b)
            with cuweave.Comm(ds.contexts()) as comm:
                with cuweave.comm_group():  # one thread, both ranks' parts: issued together at the end
                    for r in range(2):
                        comm.all_reduce_rank(r, bufs[r], bufs[r], self.N, "float32", "sum", streams[r])
                for r, s in enumerate(streams):
                    self.assertEqual(unfloats(bufs[r].copy_to_host(s)), [30.0] * self.N)
                    self.assertEqual(bufs[r].__cuda_array_interface__["stream"], s.cu_stream)
                bufs[1].copy_from_host(streams[1], floats([5.0] * self.N))
                with cuweave.comm_group():
                    for r in range(2):
                        comm.broadcast_rank(r, bufs[r], bufs[r], self.N, cuweave.Dtype.FLOAT32, 1, streams[r])
                self.assertEqual(unfloats(bufs[0].copy_to_host(streams[0])), [5.0] * self.N)
                with self.assertRaises(ValueError):
                    comm.all_reduce_rank(0, bufs[0], bufs[0], self.N + 1, "float32", "sum", streams[0])
                with self.assertRaises(cuweave.InvalidArgumentError):
                    comm.all_reduce_rank(2, bufs[0], bufs[0], self.N, "float32", "sum", streams[0])
            for x in bufs + streams:
                x.close()

    def test_comm_outlives_its_device_group(self):
        nccl = ctypes.CDLL(FAKE_NCCL)  # the library cuweave opened: its live count
        ds = cuweave.DeviceGroup()
        streams = list(self.two_streams(ds))
        bufs = [cuweave.Buffer(s, self.N, "float32") for s in streams]
        comm = cuweave.Comm(ds.contexts())
        self.assertEqual(nccl.fake_nccl_live(), 2)
        ds.close()  # the communicator holds the contexts in C
        self.assertEqual(comm.context(1).device, 1)
        bufs[0].copy_from_host(streams[0], floats([4.0] * self.N))
        comm.broadcast(bufs, bufs, self.N, "float32", 0, streams)
        self.assertEqual(unfloats(bufs[1].copy_to_host(streams[1])), [4.0] * self.N)
        comm.close()
        self.assertEqual(nccl.fake_nccl_live(), 0)
        for x in bufs + streams:
            x.close()
        self.assertEqual((self.live("primary0"), self.live("primary1")), (0, 0))

    def test_comm_errors(self):
        a, b = cuweave.Context(0), cuweave.Context(0)
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.Comm([a, b])  # two ranks on one device
        with self.assertRaises(ValueError) as cm:
            cuweave.Comm([])
        self.assertIn("contexts", str(cm.exception))
        with cuweave.Comm([a]) as one:  # a single rank is a communicator too
            self.assertEqual(one.size, 1)
        a.close()
        b.close()

    @child_env(CUWEAVE_LIBNCCL="/nonexistent/libnccl.so.2")
    def test_no_nccl(self):
        self.assertIsNone(cuweave.nccl_version())  # absent: None, not an error
        with cuweave.DeviceGroup() as ds:  # everything else still works
            self.assertEqual(enable_all_peers(ds), 2)
            with self.assertRaises(cuweave.NotSupportedError) as cm:
                cuweave.Comm(ds.contexts())
            self.assertIn("nonexistent", str(cm.exception))


if CHILD:
    import cuweave  # noqa: E402  (the environment was set by the parent)

    class TestMultiChild(MultiCases, unittest.TestCase):
        pass

else:

    @unittest.skipUnless(os.path.exists(FAKE) and os.path.exists(FAKE_NCCL), "the fake driver or NCCL is not built")
    class TestMulti(unittest.TestCase):
        """Each case of MultiCases in a fresh interpreter with two fake devices."""

    def _runner(name):
        def run(self):
            extra = getattr(getattr(MultiCases, name), "child_env", {})
            out = subprocess.run([sys.executable, "-m", "unittest", "-v", "test_multi.TestMultiChild." + name],
                                 capture_output=True, text=True, env=_child_env(**extra), timeout=300)
            if out.returncode != 0 or "Ran 1 test" not in out.stderr:
                self.fail("%s failed in its process (rc %d):\n%s%s" % (name, out.returncode, out.stdout, out.stderr))
        run.__name__ = name
        run.__doc__ = getattr(MultiCases, name).__doc__
        return run

    for _name in [n for n in vars(MultiCases) if n.startswith("test_")]:
        setattr(TestMulti, _name, _runner(_name))


if __name__ == "__main__":
    unittest.main()
