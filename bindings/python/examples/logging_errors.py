# SPDX-License-Identifier: BSD-2-Clause
"""The library's log, and the exceptions: every C status is a class."""
from typing import List, Tuple

import cuweave

got: List[Tuple[cuweave.LogLevel, str]] = []
previous = cuweave.set_log_callback(lambda level, message: got.append((level, message)), cuweave.LOG_WARNING)
ctx = cuweave.Context(0)
try:
    cuweave.StreamPool(ctx, reserved=4, max_streams=2)   # more reserved streams than allowed
except cuweave.InvalidArgumentError as e:
    print(e.status, e.name, e.detail["function"])
print(got[0][0].name, got[0][1].split(":")[0])          # the log saw the failure too
cuweave.set_log_callback(*previous)

try:
    cuweave.Stream(ctx, priority="high")                 # type: ignore[arg-type]
except TypeError as e:
    print(e)                                             # names the parameter
ctx.close()
