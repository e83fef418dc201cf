# SPDX-License-Identifier: BSD-2-Clause
"""GPU: a fused pipeline from Python (StageOperator, PortRead,
Pipeline.make_fused; issue 39): test_gpu_resident_dataflow.py's three
stages as operators whose ports carry the data. `fill` writes one value a
tile into its port, `shift` reads fill's tiles around its own
(PortRead NEIGHBOURS, radius 1), `total` reads all of shift (ALL) and writes
the sum, by request number, into mapped host memory given as its stage's
user pointer. Two requests in flight (each port holds two copies, by
t->slot). 2,000 requests, every total checked against Python's; the loop
ends with no stall.

Skipped without a GPU.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     python3 -m unittest discover -s bindings/python/tests -p 'test_gpu_*.py' -v
"""

import ctypes
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import cuweave  # noqa: E402

REQUESTS = 2000
N = 16
RING = 1024
SOURCE = r'''
#include "cuweave/resident_device.h"
#define N 16u
typedef unsigned long long u64;
__device__ void fill(const cw_fused_tile *t, void *user, u64 *out) {
    if (threadIdx.x == 0) out[t->slot * N + t->tile] = t->seq * 100ull + t->tile;
}
__device__ void shift(const cw_fused_tile *t, void *user, const u64 *in, u64 *out) {
    if (threadIdx.x != 0) return;
    const u64 *f = in + t->slot * N;
    const unsigned lo = t->tile ? t->tile - 1u : 0u, hi = t->tile + 1u < N ? t->tile + 1u : N - 1u;
    u64 v = 0;
    for (unsigned j = lo; j <= hi; j++) v += f[j];
    out[t->slot * N + t->tile] = v;
}
__device__ void total(const cw_fused_tile *t, volatile u64 *results, const u64 *in) {
    if (threadIdx.x != 0) return;
    u64 v = 0;
    for (unsigned j = 0; j < N; j++) v += in[t->slot * N + j];
    results[t->seq % 1024u] = v;
}
'''


def expected(seq):
    f = [seq * 100 + j for j in range(N)]
    return sum(sum(f[max(0, t - 1):min(N - 1, t + 1) + 1]) for t in range(N))


def _have_gpu():
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
    except cuweave.CuweaveError:
        return False


@unittest.skipUnless(_have_gpu(), "no GPU")
class TestGpuPipelineFused(unittest.TestCase):
    def test_three_operators_two_in_flight(self):
        ctx = cuweave.Context(0)
        res = cuweave.HostMemory(ctx, RING * 8)
        SO, PR, RD = cuweave.StageOperator, cuweave.PortRead, cuweave.FusedRead
        frame = {"bytes": 2 * N * 8}
        p = cuweave.Pipeline(ctx)
        p.add(SO("fill", "fill", outputs=[("out", frame)], tiles=N),
              SO("shift", "shift", inputs=[("in", PR(RD.NEIGHBOURS, radius=1), frame)], outputs=[("out", frame)],
                 tiles=N),
              SO("total", "total", inputs=[("in", "all", frame)], tiles=1, threads=32, user=res.ptr))
        p.connect("fill", "out", "shift", "in")
        p.connect("shift", "out", "total", "in")
        r = cuweave.Resident(ctx, sleep_interval=0, sync_with_host=True)
        p.make_fused(r, SOURCE, in_flight=2, block_threads=64)
        self.assertEqual(r.stats()["fused"], 1)
        r.launch()
        out = (ctypes.c_uint64 * RING).from_address(res.ptr)
        wrong = 0
        for k in range(1, REQUESTS + 1):
            seq = r.data_ready()
            self.assertEqual(seq, k)
            r.wait_result(seq, timeout=2.0)
            wrong += out[seq % RING] != expected(seq)
        self.assertEqual(wrong, 0)
        st = r.stats()
        self.assertEqual((st["completed"], st["stall"]), (REQUESTS, None))
        r.tear_down(timeout=2.0)
        r.close()  # the loop before the pipeline whose memory it uses
        p.close()
        res.close()
        ctx.close()


if __name__ == "__main__":
    unittest.main()
