# SPDX-License-Identifier: BSD-2-Clause
"""The library and its devices: versions, what the driver says, errors."""
import cuweave

v = cuweave.versions()                     # a named tuple of Version tuples
print("cuweave", v.cuweave, "ABI", v.api, "from", cuweave.library()[0])
cuweave.init()                             # NoDriverError without a CUDA driver
print("CUDA", cuweave.driver_version(), "NVRTC", cuweave.versions().nvrtc, "NCCL", cuweave.nccl_version())
for ordinal in range(cuweave.device_count()):
    d = cuweave.device_info(ordinal)
    print("device %d: %s, sm_%d%d, %d SMs" % (ordinal, d["name"], d["cc"][0], d["cc"][1], d["sm_count"]))
print("conditional nodes:", cuweave.driver_has(cuweave.Feature.CONDITIONAL_NODES))

try:
    cuweave.device_info(cuweave.device_count())  # one past the last device: refused by C
except cuweave.InvalidArgumentError as e:     # also a ValueError
    print(e.name, "from", e.detail["function"])
try:
    cuweave.device_info(-1)                   # refused by the bindings, naming the parameter
except ValueError as e:
    print(e)
