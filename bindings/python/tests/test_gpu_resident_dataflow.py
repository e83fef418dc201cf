# SPDX-License-Identifier: BSD-2-Clause
"""GPU: the fused loop's tile dataflow mode from Python
(Resident.set_dataflow, issue 39): three stages over 16 tiles, two requests
in flight. `fill` writes one value a tile into its request slot's row,
`shift` sums each tile's neighbourhood of `fill` (FusedRead.NEIGHBOURS,
radius 1, clipped at the edges), `total` reads all of `shift`
(FusedRead.ALL) and writes the sum into mapped host memory by request
number. 2,000 requests, every total checked against Python's; the loop
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
extern "C" __device__ void fill(const cw_fused_tile *t, void *u) {
    if (threadIdx.x == 0) ((u64 *)u)[t->slot * N + t->tile] = t->seq * 100ull + t->tile;
}
extern "C" __device__ void shift(const cw_fused_tile *t, void *u) {
    if (threadIdx.x != 0) return;
    const u64 *f = (const u64 *)u + t->slot * N;
    const unsigned lo = t->tile ? t->tile - 1u : 0u, hi = t->tile + 1u < N ? t->tile + 1u : N - 1u;
    u64 v = 0;
    for (unsigned j = lo; j <= hi; j++) v += f[j];
    ((u64 *)u)[2u * N + t->slot * N + t->tile] = v;
}
extern "C" __device__ void total(const cw_fused_tile *t, void *u) {
    if (threadIdx.x != 0) return;
    const u64 *s = (const u64 *)u + 2u * N + t->slot * N;
    u64 v = 0;
    for (unsigned j = 0; j < N; j++) v += s[j];
    ((volatile u64 *)RESULTS)[t->seq % 1024u] = v;
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
class TestGpuResidentDataflow(unittest.TestCase):
    def test_three_stages_two_in_flight(self):
        ctx = cuweave.Context(0)
        s = cuweave.Stream(ctx)
        data = cuweave.Buffer(s, 4 * N * 8)
        res = cuweave.HostMemory(ctx, RING * 8)
        s.synchronize()
        FS, FD, RD = cuweave.FusedStage, cuweave.FusedDep, cuweave.FusedRead
        stages = [FS("fill", tiles=N), FS("shift", [FD(0, RD.NEIGHBOURS, radius=1)], tiles=N),
                  FS("total", [FD(1, RD.ALL)], tiles=1, threads=32)]
        r = cuweave.Resident(ctx, sleep_interval=0, sync_with_host=True)
        r.set_dataflow(SOURCE, stages, in_flight=2, block_threads=64, user=data.ptr,
                       options=["-DRESULTS=%#xull" % res.ptr])
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
        r.close()
        res.close()
        data.close()
        s.close()
        ctx.close()


if __name__ == "__main__":
    unittest.main()
