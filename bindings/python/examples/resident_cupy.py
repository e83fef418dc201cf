# SPDX-License-Identifier: BSD-2-Clause
"""The GPU-resident loop driven from Python, its data in CuPy arrays.

One graph is launched once and serves requests on the GPU until torn down.
Each request: the host writes an input value into a CuPy array (from pinned
memory, so the copy is complete when it returns), rings the doorbell
(data_ready gives the request's number), waits for that request's result
and reads it back. The workload is a kernel compiled with NVRTC through
cuweave; it reads the request number from the loop's control block.

Run on a machine with a GPU and CuPy:
    CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 python3 bindings/python/examples/resident_cupy.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cuweave  # noqa: E402

SOURCE = r"""
#include "cuweave/resident_device.h"
extern "C" __global__ void square_plus_seq(const cw_resident_ctl *ctl, const float *in, float *out, int n) {
    if (cw_resident_skip(ctl)) return;  // no request in this iteration (the loop stops)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * in[i] + (float)cw_resident_sequence(ctl);
}
"""


def main() -> int:
    try:
        import cupy as cp
        import cupyx
        import numpy as np
    except ImportError:
        print("resident_cupy: needs CuPy")
        return 77  # skipped, as every example without what it needs
    try:
        cuweave.init()
    except cuweave.CuweaveError as exc:
        print("resident_cupy: no GPU here: %s" % exc)
        return 77
    n = 1024
    with cuweave.Context(0) as ctx, cuweave.Stream(ctx) as s:
        kernel = cuweave.Program(ctx, SOURCE, name="square_plus_seq.cu",
                                 headers={"cuweave/resident_device.h": cuweave.resident_device_header()}
                                 ).load().kernel("square_plus_seq")
        inp = cp.zeros(n, dtype=cp.float32)
        out = cp.zeros(n, dtype=cp.float32)
        host_in = cupyx.empty_pinned(n, dtype=np.float32)
        host_out = cupyx.empty_pinned(n, dtype=np.float32)
        cp.cuda.Device().synchronize()

        # ADAPTIVE: spin 200 us after each request, then sleep up to 100 us between checks
        loop = cuweave.Resident(ctx, sleep_mode=cuweave.SLEEP_ADAPTIVE, sleep_interval=100e-6, spin=200e-6)
        with s.capture() as cap:
            kernel.launch(s, (n + 255) // 256, 256, loop.ctl, inp, out, n)
        loop.set_workload(cap.graph)
        cap.graph.close()
        loop.build()  # everything loaded before the loop runs
        loop.launch()

        requests, wrong, t0 = 500, 0, time.perf_counter()
        for k in range(1, requests + 1):
            host_in[:] = np.arange(n, dtype=np.float32) + k  # small integers: every result exact in float32
            inp.data.copy_from_host(host_in.ctypes.data, host_in.nbytes)
            seq = loop.data_ready()
            loop.wait_result(seq, timeout=1.0)
            out.data.copy_to_host(host_out.ctypes.data, host_out.nbytes)
            want = host_in * host_in + np.float32(seq)
            wrong += int((host_out != want).sum())
        dt = time.perf_counter() - t0
        st = loop.stats()
        loop.tear_down(timeout=1.0)
        loop.close()
        print("%d requests of %d floats: %d wrong values; %.1f us per request from Python (copy in, request, "
              "wait, copy out)" % (requests, n, wrong, dt / requests * 1e6))
        print("the GPU's own clock: %d iterations, per iteration median %.2f us"
              % (st["iterations"], st["iter_median"] * 1e6))
        return 0 if wrong == 0 and st["iterations"] == requests else 1


if __name__ == "__main__":
    sys.exit(main())
