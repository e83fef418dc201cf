# SPDX-License-Identifier: BSD-2-Clause
"""The GPU-resident loop: a captured workload, requests from the host."""
import cuweave

ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
with s.capture() as cap:                      # each request's work: here none (kernels, copies, ...)
    pass

loop = cuweave.Resident(ctx, sleep_interval=100e-6, spin=200e-6)  # settings in seconds
loop.set_workload(cap.graph)
loop.build()
loop.launch()
print(loop)                                   # <cuweave.Resident 0x... device 0 running>
seq = loop.data_ready()
try:
    loop.wait_result(seq, timeout=0.5)        # None: without limit
    print("request", seq, "served")
except cuweave.CuweaveTimeoutError:
    print("request", seq, "not served within 0.5 s")
st = loop.stats()
print(st["state"].name, st["requested"], "requested; median iteration %.1f us" % (st["iter_median"] * 1e6))
loop.tear_down(timeout=1.0)                   # raises CuweaveTimeoutError when the loop does not stop
for x in (loop, cap.graph, s, ctx):
    x.close()
