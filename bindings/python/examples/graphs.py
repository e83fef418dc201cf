# SPDX-License-Identifier: BSD-2-Clause
"""Graphs: captured from a stream, or built node by node with a
conditional node; instantiated, launched and updated."""
import cuweave

ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
host = cuweave.HostMemory(ctx, 1024)          # page-locked: a copy from it can be captured
buf = cuweave.Buffer(s, 1024)

with s.capture() as cap:                      # record instead of running
    buf.copy_from_host(s, host.view())        # (or kernel launches, CuPy work on s.cu_stream, ...)
graph = cap.graph
exe = graph.instantiate()
for i in range(3):
    exe.launch(s)
print(exe.info()["launches"], "launches of", graph)

g = cuweave.Graph(ctx)                        # built node by node
first = g.add_empty()
g.add_child(graph, [first])
handle = g.add_cond_handle(default=1)
node, body, no_else = g.add_conditional(handle, cuweave.CondType.IF, deps=g.sinks())
with s.capture(into=body):                    # the body runs when the condition is nonzero
    buf.copy_from_host(s, host.view())
print(g, "sinks:", len(g.sinks()))
upd = exe.update(graph)                       # new parameters: in place when the driver can
print("update:", upd["kind"].name)
s.synchronize()
for x in (exe, g, graph, buf, s):
    x.close()
host.close()
ctx.close()
