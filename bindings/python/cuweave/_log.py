# SPDX-License-Identifier: BSD-2-Clause
"""The log callback (cw_log_set_callback) and what the bindings report
through it.

One C callback (a ctypes function made once, never freed) serves every
Python callback: set_callback only swaps the Python function it calls. The
library calls it on the thread whose call logged, also on its own threads
(the future watcher, executor workers): ctypes takes the GIL there. An
exception raised by the Python function never reaches C: it goes to
sys.unraisablehook.

The bindings' finalizers call the C destroys, which never fail and log what
went wrong (a resident loop abandoned, CW_LOG_ERROR). What a finalizer does
itself that can fail (giving a lease or a forked stream back) is reported
here at CW_LOG_ERROR (report()), with the library's detail, instead of
being raised from a finalizer (where Python would only print it).
"""

from __future__ import annotations

import atexit
import enum
import sys
import threading
from typing import Any, Callable, Optional, Tuple, Union

from . import _check, _lib

LogFn = Callable[["LogLevel", str], Any]


class LogLevel(enum.IntEnum):
    """cw_log_level."""

    ERROR = 0    # a call failed; the message is cw_last_error()'s
    WARNING = 1  # something worked, but not the way asked
    INFO = 2     # one-off events (driver loaded, NVRTC loaded)
    DEBUG = 3


_lock = threading.Lock()
_fn: Optional[LogFn] = None
_max_level = LogLevel.ERROR


def unraisable(exc: BaseException, where: str) -> None:
    """Hands an exception that must not propagate (it would cross into C, or
    leave a finalizer) to sys.unraisablehook, with `where` as its message."""
    try:
        hook = sys.unraisablehook
    except AttributeError:  # before 3.8
        sys.stderr.write("cuweave: exception %s: %r\n" % (where, exc))
        return

    class _Args:  # sys.UnraisableHookArgs' fields
        exc_type = type(exc)
        exc_value = exc
        exc_traceback = exc.__traceback__
        err_msg = "Exception ignored " + where
        object = None

    try:
        hook(_Args)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001
        pass


def _deliver(level: int, message: str) -> None:
    fn = _fn
    if fn is None or level > _max_level:
        return
    try:
        lvl: Any = LogLevel(level)
    except ValueError:
        lvl = level
    try:
        fn(lvl, message)
    except BaseException as exc:  # noqa: BLE001 (nothing may cross into C)
        unraisable(exc, "in the cuweave log callback %r" % (fn,))


def _py_log(user: Optional[int], level: int, message: Optional[bytes]) -> None:
    _deliver(level, message.decode("utf-8", "replace") if message else "")




_c_log: Any = _lib.LOG_FN(_py_log)
def set_callback(fn: Optional[LogFn], max_level: Union[LogLevel, int] = LogLevel.WARNING
                 ) -> Tuple[Optional[LogFn], LogLevel]:
    """Installs fn(level, message) as the process-wide log callback
    (cw_log_set_callback): level a LogLevel, message a str. Messages above
    max_level are not delivered. fn None removes it. It is called on the
    thread that logged, synchronously; it may call cuweave functions except
    set_log_callback. Returns the previous (fn, max_level)."""
    global _fn, _max_level
    if fn is not None and not callable(fn):
        raise TypeError("fn must be callable or None, not %s" % type(fn).__name__)
    max_level = _check.member(max_level, LogLevel, "max_level")
    with _lock:
        prev = (_fn, _max_level)
        if fn is None:
            _lib.lib.cw_log_set_callback(_lib.LOG_FN(), None, int(max_level))
        else:
            _lib.lib.cw_log_set_callback(_c_log, None, int(max_level))
        _fn, _max_level = fn, max_level
    return prev


def get_callback() -> Tuple[Optional[LogFn], LogLevel]:
    """The installed (fn, max_level); fn None when none is."""
    return _fn, _max_level


def report(level: int, message: str) -> None:
    """Sends a message of the bindings' own (a failure in a finalizer, say)
    to the log callback, as the library sends its own."""
    _deliver(int(level), message)


def report_failure(exc: BaseException, what: str) -> None:
    """Reports a CuweaveError (or another exception) that a finalizer caught:
    at CW_LOG_ERROR, the library's message and what was being done."""
    detail = getattr(exc, "detail", None) or {}
    message = detail.get("message") or "%s: %s" % (type(exc).__name__, exc)
    report(LogLevel.ERROR, "cuweave (Python, %s): %s" % (what, message))


def _at_exit() -> None:
    # The library may log from its own threads while the interpreter shuts
    # down: no Python callback past this point.
    global _fn
    _fn = None
    try:
        _lib.lib.cw_log_set_callback(_lib.LOG_FN(), None, 0)
    except Exception:  # noqa: BLE001
        pass


atexit.register(_at_exit)
