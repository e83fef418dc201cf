# SPDX-License-Identifier: BSD-2-Clause
"""The exception classes: one per error status of the C library
(include/cuweave/common.h, CW_STATUS_MAP), written out here so that IDEs and
type checkers see them; tests/test_errors.py checks them against the C list
(every status has its class, with its code and name).

All derive from CuweaveError. A few also derive from the matching built-in so
that ordinary handlers catch them: InvalidArgumentError is a ValueError,
OutOfMemoryError a MemoryError, CuweaveTimeoutError a TimeoutError. The
timeout's class is not called TimeoutError: `from cuweave import *` must not
rebind the built-in name (cuweave.TimeoutError still works, with a
DeprecationWarning).
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, Mapping, Optional, Type


class CuweaveError(Exception):
    """A failed cuweave call.

    Attributes: ``status`` (the cw_status code, an int), ``name`` (its C
    name, e.g. ``"CW_ERROR_TIMEOUT"``) and ``detail`` (the library's error
    detail as a dict: status, cu_result, cu_name, cu_string, driver_call,
    function, message). ``str(exc)`` is the library's message."""

    status: int = 0
    name: str = ""

    def __init__(self, message: str, detail: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.detail: Dict[str, Any] = dict(detail or {})

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, str(self))


class InvalidArgumentError(CuweaveError, builtins.ValueError):
    """CW_ERROR_INVALID_ARGUMENT: an argument is invalid (also a ValueError)."""

    status, name = 1, "CW_ERROR_INVALID_ARGUMENT"


class NoDriverError(CuweaveError):
    """CW_ERROR_NO_DRIVER: the CUDA driver (libcuda.so.1) could not be loaded."""

    status, name = 2, "CW_ERROR_NO_DRIVER"


class NoDeviceError(CuweaveError):
    """CW_ERROR_NO_DEVICE: no usable CUDA device."""

    status, name = 3, "CW_ERROR_NO_DEVICE"


class NotSupportedError(CuweaveError):
    """CW_ERROR_NOT_SUPPORTED: not supported by this driver or device."""

    status, name = 4, "CW_ERROR_NOT_SUPPORTED"


class OutOfMemoryError(CuweaveError, builtins.MemoryError):
    """CW_ERROR_OUT_OF_MEMORY: out of memory (also a MemoryError)."""

    status, name = 5, "CW_ERROR_OUT_OF_MEMORY"


class InvalidHandleError(CuweaveError):
    """CW_ERROR_INVALID_HANDLE: invalid, foreign or destroyed handle."""

    status, name = 6, "CW_ERROR_INVALID_HANDLE"


class InvalidStateError(CuweaveError):
    """CW_ERROR_INVALID_STATE: the object is in the wrong state for this call."""

    status, name = 7, "CW_ERROR_INVALID_STATE"


class NotReadyError(CuweaveError):
    """CW_ERROR_NOT_READY: the work has not completed yet."""

    status, name = 8, "CW_ERROR_NOT_READY"


class CuweaveTimeoutError(CuweaveError, builtins.TimeoutError):
    """CW_ERROR_TIMEOUT: the wait timed out (also the built-in TimeoutError)."""

    status, name = 9, "CW_ERROR_TIMEOUT"


class PoolExhaustedError(CuweaveError):
    """CW_ERROR_POOL_EXHAUSTED: the pool has no free stream."""

    status, name = 10, "CW_ERROR_POOL_EXHAUSTED"


class DeviceFaultError(CuweaveError):
    """CW_ERROR_DEVICE_FAULT: the device reported a fault; the context is unusable."""

    status, name = 11, "CW_ERROR_DEVICE_FAULT"


class CaptureError(CuweaveError):
    """CW_ERROR_CAPTURE: stream capture failed or was invalidated."""

    status, name = 12, "CW_ERROR_CAPTURE"


class NotPermittedError(CuweaveError):
    """CW_ERROR_NOT_PERMITTED: the operation is not permitted."""

    status, name = 13, "CW_ERROR_NOT_PERMITTED"


class DriverError(CuweaveError):
    """CW_ERROR_DRIVER: a CUDA driver call failed (``detail["driver_call"]``
    names it, ``detail["cu_result"]`` is its CUresult)."""

    status, name = 14, "CW_ERROR_DRIVER"


class NoNvrtcError(CuweaveError):
    """CW_ERROR_NO_NVRTC: NVRTC (libnvrtc.so) could not be loaded."""

    status, name = 15, "CW_ERROR_NO_NVRTC"


class CompileError(CuweaveError):
    """CW_ERROR_COMPILE: compilation failed. ``log`` is NVRTC's log of the
    failed compile (also in the message)."""

    status, name = 16, "CW_ERROR_COMPILE"

    def __init__(self, message: str, detail: Optional[Mapping[str, Any]] = None, log: str = "") -> None:
        super().__init__(message, detail)
        self.log: str = log


class InternalError(CuweaveError):
    """CW_ERROR_INTERNAL: internal error in cuweave."""

    status, name = 17, "CW_ERROR_INTERNAL"


_CLASSES: "tuple[Type[CuweaveError], ...]" = (
    InvalidArgumentError, NoDriverError, NoDeviceError, NotSupportedError, OutOfMemoryError, InvalidHandleError,
    InvalidStateError, NotReadyError, CuweaveTimeoutError, PoolExhaustedError, DeviceFaultError, CaptureError,
    NotPermittedError, DriverError, NoNvrtcError, CompileError, InternalError)
_by_status: Dict[int, Type[CuweaveError]] = {cls.status: cls for cls in _CLASSES}


def from_status(code: int, detail: Mapping[str, Any], log: Optional[str] = None) -> CuweaveError:
    """The exception of a status code with the library's detail (a class of
    its own for an unknown code is CuweaveError itself)."""
    cls = _by_status.get(code, CuweaveError)
    message = str(detail.get("message") or "cuweave status %d" % code)
    if cls is CompileError:
        return CompileError(message, detail, log or "")
    exc = cls(message, detail)
    if cls is CuweaveError:
        exc.status = code
    return exc


def classes() -> Dict[int, Type[CuweaveError]]:
    """{status code: exception class}."""
    return dict(_by_status)
