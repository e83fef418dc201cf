# SPDX-License-Identifier: BSD-2-Clause
"""NVRTC programs, the kernel cache, modules and kernel launches (a GPU:
the launch needs the driver to say what the kernel's parameters are)."""
import struct

import cuweave

SOURCE = r'''
extern "C" __global__ void axpb(float a, const float *x, float b, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
'''
ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
prog = cuweave.Program(ctx, SOURCE, name="axpb.cu", options=["-lineinfo"])
print(prog, prog.info()["source"])            # "compile", or "memory"/"disk" from the kernel cache
kernel = prog.load().kernel("axpb")
print(kernel.param_sizes(ctx))                # [4, 8, 4, 8, 4]: each argument is packed to its size
n = 4096
x, y = cuweave.Buffer(s, n, "float32"), cuweave.Buffer(s, n, "float32")
x.copy_from_host(s, struct.pack("<%df" % n, *range(n)))
kernel.launch(s, (n + 255) // 256, 256, 2.0, x, 0.5, y, n)   # floats, ints, buffers (by address)
out = struct.unpack("<%df" % n, bytes(y.copy_to_host(s)))
print(out[:3], all(v == 2.0 * i + 0.5 for i, v in enumerate(out)))

try:
    cuweave.Program(ctx, "#error not today\n", name="bad.cu")
except cuweave.CompileError as e:
    print("NVRTC said:", e.log.splitlines()[0])
for b in (x, y, s, ctx):
    b.close()
