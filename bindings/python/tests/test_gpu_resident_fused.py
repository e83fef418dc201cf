# SPDX-License-Identifier: BSD-2-Clause
"""GPU: the resident loop's fused persistent mode from Python
(Resident.set_fused): two stages, stage 1 writes one value per block, stage
2 (after the grid barrier) has block 0 sum every block's value into mapped
host memory by request number; 500 requests, every sum checked; grid 0 is
the most that fit co-resident; a grid one block larger is refused.

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

REQUESTS = 500
MAX_BLOCKS = 8192
SOURCE = r'''
#include "cuweave/resident_device.h"
extern "C" __device__ void put(cw_resident_ctl *ctl, void *user) {
    if (threadIdx.x == 0)
        ((volatile unsigned *)user)[blockIdx.x] = (unsigned)cw_resident_sequence(ctl) * 1000u + blockIdx.x;
}
extern "C" __device__ void total(cw_resident_ctl *ctl, void *user) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long s = 0;
        for (unsigned b = 0; b < gridDim.x; b++) s += ((volatile unsigned *)user)[b];
        ((unsigned long long *)((unsigned *)user + 8192))[cw_resident_sequence(ctl)] = s;
    }
}
'''


def _have_gpu():
    try:
        cuweave.init()
        return cuweave.device_count() > 0 and "fake" not in cuweave.device_info(0)["name"]
    except cuweave.CuweaveError:
        return False


@unittest.skipUnless(_have_gpu(), "no GPU")
class TestGpuResidentFused(unittest.TestCase):
    def test_two_stages(self):
        ctx = cuweave.Context(0)
        mem = cuweave.HostMemory(ctx, MAX_BLOCKS * 4 + (REQUESTS + 1) * 8)
        r = cuweave.Resident(ctx, sleep_interval=0, sync_with_host=True)
        r.set_fused(SOURCE, ["put", "total"], block_threads=128, user=mem.ptr)
        st = r.stats()
        grid = st["grid_blocks"]
        self.assertEqual(grid, st["max_grid_blocks"])
        self.assertTrue(0 < grid <= MAX_BLOCKS)
        with self.assertRaises(cuweave.InvalidArgumentError):
            r.set_fused(SOURCE, ["put", "total"], block_threads=128, grid_blocks=grid + 1, user=mem.ptr)
        r.launch()
        sums = (ctypes.c_uint64 * (REQUESTS + 1)).from_address(mem.ptr + MAX_BLOCKS * 4)
        for k in range(1, REQUESTS + 1):
            seq = r.data_ready()
            self.assertEqual(seq, k)
            r.wait_result(seq, timeout=2.0)
            want = sum(seq * 1000 + b for b in range(grid)) & 0xFFFFFFFFFFFFFFFF
            self.assertEqual(sums[seq], want)
        st = r.stats()
        self.assertEqual((st["completed"], st["iterations"], st["fused"]), (REQUESTS, REQUESTS, 1))
        r.tear_down(timeout=2.0)
        r.close()
        mem.close()
        ctx.close()


if __name__ == "__main__":
    unittest.main()
