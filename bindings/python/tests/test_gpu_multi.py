# SPDX-License-Identifier: BSD-2-Clause
"""GPU, two devices or more: the several-device bindings on real GPUs.
Buffers copied from device 0 to device 1 and back with Buffer.copy_from,
first staged (no peer access), then direct (after Context.enable_peer each
way the topology allows),
every value read back; and, when NCCL is found, an all-reduce and a
broadcast through Comm with every value checked. Skipped with fewer than
two GPUs (NCCL parts: without NCCL).

Run (NVLink multicast off): NCCL_NVLS_ENABLE=0 CUWEAVE_LIBRARY=build-gpu/src/libcuweave.so.2 \\
     python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_multi.py' -v
"""

import os
import struct
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import cuweave  # noqa: E402

N = 1 << 20  # float32 elements per buffer (4 MiB)


def _gpus():
    try:
        cuweave.init()
        return cuweave.device_count()
    except cuweave.CuweaveError:
        return 0


def _have_nccl():
    try:
        return cuweave.nccl_version() is not None
    except cuweave.CuweaveError:
        return False


def floats(values):
    return struct.pack("<%df" % len(values), *values)


@unittest.skipUnless(_gpus() >= 2, "needs two GPUs")
class TestTwoGpus(unittest.TestCase):
    def test_copies_staged_then_direct(self):
        pattern = floats([float(i % 4093) * 0.25 for i in range(N)])
        with cuweave.DeviceGroup([0, 1]) as ds:
            s0, s1 = cuweave.Stream(ds.context(0)), cuweave.Stream(ds.context(1))
            b0 = cuweave.Buffer(s0, N, "float32")
            b1 = cuweave.Buffer(s1, N, "float32")
            self.assertEqual((b0.info()["device"], b1.info()["device"]), (0, 1))
            for direct in (False, True):
                if direct:
                    for a, b in ((0, 1), (1, 0)):
                        if cuweave.peer_info(ds.ordinal(a), ds.ordinal(b)).can_access:
                            ds.context(a).enable_peer(ds.context(b))
                b0.copy_from_host(s0, pattern)
                b1.copy_from_host(s1, bytes(b1.nbytes))
                s1.wait(s0)
                b1.copy_from(s1, b0)
                self.assertEqual(bytes(b1.copy_to_host(s1)), pattern, "device 0 -> 1, direct=%s" % direct)
                b0.copy_from_host(s0, bytes(b0.nbytes))
                b0.copy_from(s0, b1)  # ordered after b1's writer by the binding
                self.assertEqual(bytes(b0.copy_to_host(s0)), pattern, "device 1 -> 0, direct=%s" % direct)
            for x in (b0, b1, s0, s1):
                x.close()

    @unittest.skipUnless(_have_nccl(), "needs NCCL")
    def test_all_reduce_and_broadcast(self):
        with cuweave.DeviceGroup([0, 1]) as ds:
            streams = [cuweave.Stream(c) for c in ds.contexts()]
            send, recv = [], []
            for r, s in enumerate(streams):
                b = cuweave.Buffer(s, N, "float32")
                b.copy_from_host(s, floats([float(r + 1)] * N))
                send.append(b)
                recv.append(cuweave.Buffer(s, N, "float32"))
            with cuweave.Comm(ds.contexts()) as comm:
                comm.all_reduce(send, recv, N, "float32", "sum", streams)
                want = floats([3.0] * N)
                for r, s in enumerate(streams):
                    self.assertEqual(bytes(recv[r].copy_to_host(s)), want, "rank %d" % r)
                root = floats([7.0 + (i % 101) for i in range(N)])
                send[1].copy_from_host(streams[1], root)
                comm.broadcast([None, send[1]], recv, N, "float32", 1, streams)
                for r, s in enumerate(streams):
                    self.assertEqual(bytes(recv[r].copy_to_host(s)), root, "rank %d" % r)
            for x in send + recv + streams:
                x.close()


if __name__ == "__main__":
    unittest.main()
