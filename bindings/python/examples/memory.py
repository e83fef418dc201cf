# SPDX-License-Identifier: BSD-2-Clause
"""Device buffers (the CUDA array interface, DLPack), page-locked host memory."""
import struct

import cuweave

ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
buf = cuweave.Buffer(s, 8, "float32")         # stream-ordered pool memory, freed on the GPU after its uses
buf.copy_from_host(s, struct.pack("<8f", *range(8)))
other = cuweave.Stream(ctx)
print(struct.unpack("<8f", bytes(buf.copy_to_host(other))))  # other waits for s, the writer
print(buf.__cuda_array_interface__["stream"] == s.cu_stream)  # consumers order themselves after s
print(buf.__dlpack_device__())               # (2, 0): kDLCUDA, device 0

# torch.from_dlpack(buf) and cupy.from_dlpack(buf) take it without a copy; cuweave takes theirs:
arr = cuweave.from_dlpack(buf, stream=other)  # here a Buffer's own memory, as any producer's
print(arr, arr.ptr == buf.ptr)
buf.close()                                   # the exported memory stays until arr lets go
arr.close()

with cuweave.HostMemory(ctx, 64) as host:     # page-locked, mapped: kernels may use host.ptr
    host.view()[:4] = b"abcd"
    print(bytes(host.view()[:4]))
for x in (other, s, ctx):
    x.close()
