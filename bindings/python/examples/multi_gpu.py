# SPDX-License-Identifier: BSD-2-Clause
"""Several devices: a device group, peer access, copies, NCCL collectives."""
import struct

import cuweave

with cuweave.DeviceGroup() as ds:             # every visible device
    ctxs = ds.contexts()
    for i in range(len(ds)):
        for j in range(len(ds)):
            if i != j and cuweave.peer_info(ds.ordinal(i), ds.ordinal(j)).can_access:
                ctxs[i].enable_peer(ctxs[j])
    streams = [cuweave.Stream(c) for c in ctxs]
    bufs = [cuweave.Buffer(s, 4, "float32") for s in streams]
    for r, (s, b) in enumerate(zip(streams, bufs)):
        b.copy_from_host(s, struct.pack("<4f", *[r + 1.0] * 4))
    if len(ds) > 1:
        bufs[1].copy_from(streams[1], bufs[0])    # across devices, after bufs[0]'s writer
        bufs[1].copy_from_host(streams[1], struct.pack("<4f", *[2.0] * 4))
    if cuweave.nccl_version() is not None:
        with cuweave.Comm(ctxs) as comm:      # one rank per device
            comm.all_reduce(bufs, bufs, 4, "float32", "sum", streams)
            total = sum(range(1, len(ds) + 1))
            print([struct.unpack("<4f", bytes(b.copy_to_host(s))) == (total,) * 4 for s, b in zip(streams, bufs)])
    for x in bufs + streams:
        x.close()
