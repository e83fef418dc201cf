# SPDX-License-Identifier: BSD-2-Clause
"""A timeline: GPU spans on streams, host spans, written as Chrome trace JSON."""
import os
import tempfile

import cuweave

ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
trace = cuweave.Trace()
trace.name_stream(s, "main")
with trace.host_span("enqueue"):
    with trace.span(s, "fill"):
        buf = cuweave.Buffer(s, 1 << 20)
s.synchronize()
path = os.path.join(tempfile.mkdtemp(), "trace.json")
trace.write(path)                             # ui.perfetto.dev opens it
print(trace.info()["spans"], "spans in", os.path.basename(path))
for x in (buf, trace, s, ctx):
    x.close()
