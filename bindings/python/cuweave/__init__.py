# SPDX-License-Identifier: BSD-2-Clause
"""cuweave for Python: a pure-Python package over ctypes (docs/python.md).

Handles are freed by weakref.finalize (children keep their parents alive, so
children go first); close() is idempotent; objects are context managers.
C destroys never fail; what can (Resident.tear_down, Lease.release,
Fork.join) raises when called, and its finalizer reports through the log
callback (set_log_callback) instead.

Time is in seconds everywhere (int or float): None waits without limit, 0
only tries, a negative value is a ValueError. A wrong argument is a
TypeError (wrong type) or a ValueError (wrong value) that names the
parameter. A failing call raises a subclass of CuweaveError (one per C
status: NoDriverError, PoolExhaustedError, CuweaveTimeoutError, ...), with
.status, .name and .detail.

Covers the whole C API but cw_buffer_get_ptr (Buffer.ptr reads
cw_buffer_get_info; cuweave._lib.UNBOUND): library and devices, the log
callback, contexts, green partitions, streams (with the __cuda_stream__
protocol) and forks, stream pools, leases and named streams, futures
(awaitable with asyncio through their eventfd; callbacks), timers, traces,
graphs, NVRTC programs, modules and kernels, the GPU-resident loop, device
buffers (__cuda_array_interface__ and DLPack) and host memory, operators and
pipelines with a compute in Python, and several devices: device groups, peer
access and copies, and NCCL collectives (Comm).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Optional, Tuple, Union

from . import _errors, _lib, _log  # noqa: F401 (cuweave._lib, cuweave._errors: the tests reach in)
from ._core import (CaptureMode, CaptureState, Context, Feature, Fork, Future, FutureKind, Lease, PartitionGroup,
                    PoolMode, Stream, StreamPool, Timer, Version, Versions, abi_version, clear_error, device_count,
                    device_info, driver_has, driver_version, error_class, errors, init, library, nccl_version,
                    partition_caps, version, versions)
from ._dlpack import DLPackArray
from ._errors import (CaptureError, CompileError, CuweaveError, CuweaveTimeoutError, DeviceFaultError, DriverError,
                      InternalError, InvalidArgumentError, InvalidHandleError, InvalidStateError, NoDeviceError,
                      NoDriverError, NoNvrtcError, NotPermittedError, NotReadyError, NotSupportedError,
                      OutOfMemoryError, PoolExhaustedError)
from ._flow import IO, Message, Operator, Pipeline, PortFlag, StageOperator
from ._fused import FusedDep, FusedRead, FusedStage, PortRead
from ._graph import (Builtin, Capture, CondType, Graph, GraphExec, GraphNode, GraphUpdate, Kernel, Module, Program,
                     builtin_kernel, compile_log, jit_cache_clear_disk, jit_cache_clear_memory, jit_cache_configure,
                     jit_cache_info, jit_stats)
from ._log import LogFn, LogLevel
from ._memory import Buffer, BufferView, HostMemory, SharedEvent, from_dlpack
from ._multi import (Comm, DeviceGroup, Dtype, PeerInfo, ReduceOp, comm_group, comm_id_generate, copy_peer, peer_info,
                     share_buffer_pool)
from ._resident import (NO_STAGE, OVERLAP_AUTO, Fallback, Gate, Resident, ResidentExit, ResidentState, SleepMode,
                        resident_device_header)
from ._trace import GpuTiming, Span, Trace

# The package's version: the C library's release it is written for
# (the wheel's version is meson's, from version.h; tests check both against version.h and
# against the loaded library's cw_get_versions()).
__version__ = "0.3.0"

# The enumerations' members under the names of the C constants (CW_ dropped).
LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG = LogLevel.ERROR, LogLevel.WARNING, LogLevel.INFO, LogLevel.DEBUG
HOST_FUNC, WRITE_VALUE, EVENT = FutureKind.HOST_FUNC, FutureKind.WRITE_VALUE, FutureKind.EVENT
POOL_LEASE, POOL_ROUND_ROBIN, POOL_SINGLE = PoolMode.LEASE, PoolMode.ROUND_ROBIN, PoolMode.SINGLE
CAPTURE_GLOBAL, CAPTURE_THREAD_LOCAL, CAPTURE_RELAXED = CaptureMode.GLOBAL, CaptureMode.THREAD_LOCAL, CaptureMode.RELAXED
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = CaptureState.NONE, CaptureState.ACTIVE, CaptureState.INVALIDATED
SLEEP_FIXED, SLEEP_ADAPTIVE = SleepMode.FIXED, SleepMode.ADAPTIVE
GATE_NODE, GATE_KERNELS, GATE_AUTO, GATE_BEGIN_END = Gate.NODE, Gate.KERNELS, Gate.AUTO, Gate.BEGIN_END
(FALLBACK_NONE, FALLBACK_NODE, FALLBACK_NO_CTL, FALLBACK_DRIVER, FALLBACK_DEVICE, FALLBACK_CODE,
 FALLBACK_SETTING) = tuple(Fallback)
(FEATURE_GREEN_CONTEXTS, FEATURE_CONDITIONAL_NODES, FEATURE_LIBRARY_API, FEATURE_STREAM_GET_DEVICE,
 FEATURE_CTX_FROM_STREAM, FEATURE_NVRTC) = tuple(Feature)
COND_IF, COND_WHILE = CondType.IF, CondType.WHILE
GRAPH_UPDATED_IN_PLACE, GRAPH_REINSTANTIATED = GraphUpdate.UPDATED_IN_PLACE, GraphUpdate.REINSTANTIATED
BUILTIN_FILL_U32, BUILTIN_WRITE_U32, BUILTIN_TIMESTAMP, BUILTIN_SET_COND = tuple(Builtin)
PORT_OPTIONAL, PORT_MANY = PortFlag.OPTIONAL, PortFlag.MANY


def set_log_callback(fn: Optional[LogFn], max_level: Union[LogLevel, int] = LogLevel.WARNING
                     ) -> Tuple[Optional[LogFn], LogLevel]:
    """Installs fn(level, message) as the library's log callback
    (cw_log_set_callback), process-wide: level a LogLevel, message a str;
    messages above max_level are not delivered; None removes it. Called on
    the thread that logged (the library's own threads included), while no
    cuweave lock is held; an exception it raises goes to
    sys.unraisablehook. Failures in finalizers (a resident loop abandoned by
    its destroy, a lease that could not be given back) arrive here at
    LOG_ERROR. Returns the previous (fn, max_level)."""
    return _log.set_callback(fn, max_level)


def log_to_logging(max_level: Union[LogLevel, int] = LogLevel.WARNING,
                   logger: Optional["logging.Logger"] = None) -> Tuple[Optional[LogFn], LogLevel]:
    """Sends the library's log to Python's logging (the logger "cuweave", or
    the one given: a logging.Logger): LOG_ERROR as logging.ERROR, ...,
    LOG_DEBUG as DEBUG. Returns the previous (fn, max_level)."""
    if logger is not None and not isinstance(logger, logging.Logger):
        raise TypeError("logger must be a logging.Logger or None, not %s" % type(logger).__name__)
    log = logger or logging.getLogger("cuweave")
    levels = {LogLevel.ERROR: logging.ERROR, LogLevel.WARNING: logging.WARNING, LogLevel.INFO: logging.INFO,
              LogLevel.DEBUG: logging.DEBUG}

    def forward(level: LogLevel, message: str) -> None:
        log.log(levels.get(level, logging.ERROR), "%s", message)

    return set_log_callback(forward, max_level)


def __getattr__(name: str) -> Any:
    # 0.2 named the timeout's class TimeoutError, which `from cuweave import *`
    # bound over the built-in: still reachable as cuweave.TimeoutError.
    if name == "TimeoutError":
        warnings.warn("cuweave.TimeoutError is cuweave.CuweaveTimeoutError (a subclass of the built-in "
                      "TimeoutError) from 0.3 on", DeprecationWarning, stacklevel=2)
        return CuweaveTimeoutError
    raise AttributeError("module 'cuweave' has no attribute %r" % (name,))


__all__ = [
    # library and devices
    "Version", "Versions", "version", "abi_version", "versions", "library", "init", "device_count", "device_info",
    "driver_has", "driver_version", "nccl_version", "clear_error", "Feature", "partition_caps",
    # the log
    "LogLevel", "LogFn", "set_log_callback", "log_to_logging",
    # errors
    "CuweaveError", "InvalidArgumentError", "NoDriverError", "NoDeviceError", "NotSupportedError",
    "OutOfMemoryError", "InvalidHandleError", "InvalidStateError", "NotReadyError", "CuweaveTimeoutError",
    "PoolExhaustedError", "DeviceFaultError", "CaptureError", "NotPermittedError", "DriverError", "NoNvrtcError",
    "CompileError", "InternalError", "errors", "error_class",
    # contexts, streams, pools, futures, timers, partitions
    "Context", "Stream", "Fork", "StreamPool", "Lease", "PoolMode", "Future", "FutureKind", "Timer",
    "PartitionGroup", "CaptureMode", "CaptureState",
    # graphs, programs, kernels
    "Capture", "Graph", "GraphNode", "GraphExec", "CondType", "GraphUpdate", "Program", "Module", "Kernel",
    "Builtin", "builtin_kernel", "compile_log", "jit_cache_configure", "jit_stats", "jit_cache_clear_memory",
    "jit_cache_info", "jit_cache_clear_disk",
    # the resident loop
    "Resident", "SleepMode", "Gate", "Fallback", "ResidentState", "ResidentExit", "NO_STAGE", "OVERLAP_AUTO",
    "FusedStage", "FusedDep", "FusedRead", "PortRead",
    "resident_device_header",
    # memory
    "Buffer", "BufferView", "HostMemory", "SharedEvent", "DLPackArray", "from_dlpack",
    # several devices, collectives
    "DeviceGroup", "PeerInfo", "peer_info", "copy_peer", "share_buffer_pool", "Comm", "Dtype", "ReduceOp",
    "comm_group", "comm_id_generate",
    # operators and pipelines, traces
    "Operator", "StageOperator", "Pipeline", "IO", "Message", "PortFlag", "Trace", "Span", "GpuTiming",
    # the C constants' names
    "LOG_ERROR", "LOG_WARNING", "LOG_INFO", "LOG_DEBUG", "HOST_FUNC", "WRITE_VALUE", "EVENT", "POOL_LEASE",
    "POOL_ROUND_ROBIN", "POOL_SINGLE", "CAPTURE_GLOBAL", "CAPTURE_THREAD_LOCAL", "CAPTURE_RELAXED", "CAPTURE_NONE",
    "CAPTURE_ACTIVE", "CAPTURE_INVALIDATED", "SLEEP_FIXED", "SLEEP_ADAPTIVE", "GATE_NODE", "GATE_KERNELS",
    "GATE_AUTO", "GATE_BEGIN_END", "FALLBACK_NONE", "FALLBACK_NODE", "FALLBACK_NO_CTL", "FALLBACK_DRIVER",
    "FALLBACK_DEVICE", "FALLBACK_CODE", "FALLBACK_SETTING", "FEATURE_GREEN_CONTEXTS", "FEATURE_CONDITIONAL_NODES",
    "FEATURE_LIBRARY_API", "FEATURE_STREAM_GET_DEVICE", "FEATURE_CTX_FROM_STREAM", "FEATURE_NVRTC", "COND_IF",
    "COND_WHILE", "GRAPH_UPDATED_IN_PLACE", "GRAPH_REINSTANTIATED", "BUILTIN_FILL_U32", "BUILTIN_WRITE_U32",
    "BUILTIN_TIMESTAMP", "BUILTIN_SET_COND", "PORT_OPTIONAL", "PORT_MANY",
]
