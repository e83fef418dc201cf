# SPDX-License-Identifier: BSD-2-Clause
"""Operators and a pipeline with computes written in Python."""
from typing import List

import cuweave

ctx = cuweave.Context(0)
seen: List[int] = []


def produce(io: cuweave.IO) -> None:
    s = io.receive_stream()                   # the operator's own stream
    buf = io.alloc(256, "float32")            # from the pipeline's cache, on that stream
    buf.copy_from_host(s, bytes(buf.nbytes))  # work on the stream it received
    io.emit("out", value=io.iteration, buffer=buf)


def consume(io: cuweave.IO) -> None:
    m = io.receive("in")
    assert m is not None and m.buffer is not None
    io.receive_stream("in")                   # ordered on the GPU after produce's work
    seen.append(m.value)


with cuweave.Pipeline(ctx) as p:
    p.add(cuweave.Operator("A", produce, outputs=["out"]),
          cuweave.Operator("B", consume, inputs=["in"]))
    p.connect("A", "out", "B", "in")
    p.run(5)                                  # returns when the computes have returned
    p.synchronize()                           # and the GPU has finished their work
    print(seen, p.info()["computes"], "computes")
ctx.close()
