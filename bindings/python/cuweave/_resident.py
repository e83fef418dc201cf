# SPDX-License-Identifier: BSD-2-Clause
"""The GPU-resident loop (cuweave/resident.h, docs/resident.md) and the
machinery of Python functions that C calls back (capture functions, and the
operators of _flow.py)."""

from __future__ import annotations

import ctypes
import enum
import itertools
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, NoReturn, Optional, Sequence, Tuple, Union

from . import _check, _errors, _lib
from ._core import Context, Stream, _Handle, _new, handle_of
from ._fused import FusedStage, stall_of
from ._graph import Graph
from ._lib import ResidentFused, ResidentInfo, ResidentSettings, lib

_CW_ERROR_OUT_OF_MEMORY = _errors.OutOfMemoryError.status
_CW_ERROR_INTERNAL = _errors.InternalError.status
_NOT_READY = _errors.NotReadyError.status
NO_STAGE = 0xFFFFFFFF  #: CW_RESIDENT_NO_STAGE: stage_begin's id when the loop does not trace


class SleepMode(enum.IntEnum):
    """cw_resident_sleep: how an idle loop waits."""

    FIXED = 0
    ADAPTIVE = 1


class Gate(enum.IntEnum):
    """cw_resident_gate: how an iteration skips its work when no request waits."""

    NODE = 0
    KERNELS = 1
    AUTO = 2
    BEGIN_END = 3


class Fallback(enum.IntEnum):
    """cw_resident_fallback: what the build chose instead of the automatic choice, and why."""

    NONE = 0
    NODE = 1
    NO_CTL = 2
    DRIVER = 3
    DEVICE = 4
    CODE = 5
    SETTING = 6


class ResidentState(enum.IntEnum):
    """cw_resident_state."""

    NOT_LAUNCHED = 0
    RUNNING = 1
    STOPPING = 2
    STOPPED = 3


class ResidentExit(enum.IntEnum):
    """cw_resident_exit: why a loop stopped."""

    NONE = 0
    TEAR_DOWN = 1
    TIMEOUT = 2
    FAULT = 3


OVERLAP_AUTO = -1  #: the overlap setting decided at the build (the default; also None)


class _Callbacks:
    """Python functions C calls back go through one ctypes function per kind
    (made once, never freed), so no ctypes thunk can be freed while C holds
    it: C is given an int key as `user`, and the entry is found here. The
    table holds entries weakly: the Python object that owns the C object
    (a Resident, an Operator, then its Pipeline) holds its entries, and its
    finalizer destroys the C object, so an entry lives at least as long as C
    may call it, and a cycle through a callback's closure is still
    collected."""

    def __init__(self) -> None:
        self._items: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        self._keys: Iterator[int] = itertools.count(1)

    def add(self, entry: Any) -> int:
        key = next(self._keys)
        self._items[key] = entry
        return key

    def get(self, key: Optional[int]) -> Any:
        return self._items.get(key or 0)

    def pop(self, key: Optional[int]) -> Any:
        return self._items.pop(key or 0, None)

    def __len__(self) -> int:
        return len(self._items)


class _Entry:
    """What a capture function's key leads to."""

    def __init__(self, context: Context, failures: List[Tuple[str, BaseException]], fn: Callable[[Stream], Any],
                 what: str) -> None:
        self.context, self.failures, self.fn, self.what = context, failures, fn, what


_STATUS_OF_BUILTIN: Tuple[Tuple[type, int], ...] = (
    (MemoryError, _CW_ERROR_OUT_OF_MEMORY), (TimeoutError, _errors.CuweaveTimeoutError.status),
    (ValueError, _errors.InvalidArgumentError.status))


def _status_of(exc: BaseException) -> int:
    """The cw_status a Python callback returns to C for an exception it
    raised (exceptions never cross into C): a CuweaveError's own status (the
    thread's detail is that failing call's, so C reports its driver call and
    CUresult); for other exceptions CW_ERROR_OUT_OF_MEMORY (MemoryError),
    CW_ERROR_TIMEOUT (TimeoutError), CW_ERROR_INVALID_ARGUMENT (ValueError)
    or CW_ERROR_INTERNAL (anything else), with the thread's detail cleared so
    that C does not report an older failure's; the bindings then raise the
    status's CuweaveError from the exception (_reraise)."""
    if isinstance(exc, _errors.CuweaveError) and exc.status:
        return int(exc.status)
    lib.cw_clear_error()
    for cls, status in _STATUS_OF_BUILTIN:
        if isinstance(exc, cls):
            return status
    return _CW_ERROR_INTERNAL


def _reraise(err: _errors.CuweaveError, failures: List[Tuple[str, BaseException]]) -> NoReturn:
    """Raises `err` (a CuweaveError from a C call that ran Python callbacks)
    with the first exception a callback raised as its cause, named in the
    message; KeyboardInterrupt and SystemExit are raised as themselves."""
    if not failures:
        raise err
    where, exc = failures[0]
    del failures[:]
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        raise exc
    if isinstance(exc, _errors.CuweaveError) and exc.status == err.status:
        raise err from exc
    msg = "%s: %s raised %s: %s" % (err.detail.get("function") or "cuweave", where, type(exc).__name__, exc)
    raise type(err)(msg, dict(err.detail, message=msg)) from exc


_capture_fns = _Callbacks()


def _py_capture(s: Optional[int], user: Optional[int]) -> int:
    e = _capture_fns.get(user)
    if e is None:  # its loop object is gone (the loop with it)
        return _CW_ERROR_INTERNAL
    stream = Stream(e.context, _ptr=s, _borrowed=True)
    try:
        e.fn(stream)
        return 0
    except BaseException as exc:  # noqa: BLE001 (nothing may cross into C)
        e.failures.append((e.what, exc))
        return _status_of(exc)
    finally:
        stream._ptr.value = None  # borrowed for the call only




_c_capture: Any = _lib.CAPTURE_FN(_py_capture)
# Python setting name -> (C field, how it converts to C, how it reads back)
def _us_setting(name: str) -> Tuple[Callable[[object], int], Callable[[int], float]]:
    return (lambda v: _check.duration(v, name, 1000000, 1000000)), (lambda c: c / 1e6)


def _lifetime_in(v: object) -> int:
    if v is None:
        return 0
    n = _check.duration(v, "lifetime", 1000, _check.UINT32_MAX)
    if n == 0:
        raise ValueError("lifetime must be > 0 seconds (None: until torn down), not %r" % (v,))
    return n


def _overlap_in(v: object) -> int:
    if v is None or (isinstance(v, int) and not isinstance(v, bool) and v == OVERLAP_AUTO):
        return OVERLAP_AUTO
    return 1 if _check.boolean(v, "overlap") else 0


_SETTINGS: Dict[str, Tuple[str, Callable[[object], int], Callable[[int], Any]]] = {
    "lifetime": ("timeout_ms", _lifetime_in, lambda c: c / 1e3 if c else None),
    "sleep_interval": ("sleep_interval_us",) + _us_setting("sleep_interval"),
    "sleep_mode": ("sleep_mode", lambda v: int(_check.member(v, SleepMode, "sleep_mode")), SleepMode),
    "spin": ("spin_us",) + _us_setting("spin"),
    "sync_with_host": ("sync_with_host", lambda v: int(_check.boolean(v, "sync_with_host")), bool),
    "input_slots": ("input_slots", lambda v: _check.uint32(v, "input_slots"), int),
    "input_bytes": ("input_bytes", lambda v: _check.size(v, "input_bytes"), int),
    "unroll": ("unroll", lambda v: _check.uint32(v, "unroll"), int),
    "gate": ("gate", lambda v: int(_check.member(v, Gate, "gate")), Gate),
    "destroy_timeout": ("destroy_timeout_ms", lambda v: _check.timeout_ms_clamped(v, "destroy_timeout"),
                        lambda c: c / 1e3),
    "overlap": ("overlap", _overlap_in, lambda c: None if c == OVERLAP_AUTO else bool(c)),
    "trace": ("trace", lambda v: int(_check.boolean(v, "trace")), bool),
}


def _fill(s: ResidentSettings, settings: Mapping[str, Any]) -> None:
    for k, v in settings.items():
        if k == "priority":  # None: the context's greatest (most urgent) priority
            if v is None:
                s.use_default_priority = 1
            else:
                s.priority, s.use_default_priority = _check.integer(v, "priority"), 0
            continue
        spec = _SETTINGS.get(k)
        if spec is None:
            raise TypeError("no resident setting %r (the settings: %s)" % (k, ", ".join(sorted(_SETTINGS) +
                                                                                        ["priority"])))
        setattr(s, spec[0], spec[1](v))


def _read(s: ResidentSettings) -> Dict[str, Any]:
    out: Dict[str, Any] = {k: spec[2](getattr(s, spec[0])) for k, spec in _SETTINGS.items()}
    out["priority"] = None if s.use_default_priority else int(s.priority)
    return out


class Resident(_Handle):
    """The GPU-resident loop on a context (docs/resident.md). Settings as
    keyword arguments, durations in seconds: lifetime (None: until torn
    down), sleep_interval, sleep_mode (a SleepMode), spin, sync_with_host,
    input_slots, input_bytes, unroll, gate (a Gate), priority (None: the
    context's most urgent), destroy_timeout, overlap (None: decided at the
    build), trace.

    The workload and the data-ready handler are captured graphs or Python
    capture functions fn(stream) that enqueue the work on `stream` when the
    loop builds (set_workload(fn), set_handler(fn)); stage_begin/stage_end
    name stages inside them for trace=True.

    Tear-down: tear_down(timeout) is the call that reports (raises
    CuweaveTimeoutError when the loop does not stop). close() and the
    finalizer call cw_resident_destroy, which never fails: a loop that does
    not stop within destroy_timeout is abandoned and the log callback
    (cuweave.set_log_callback) gets a LOG_ERROR saying so."""

    _destroy = lib.cw_resident_destroy

    def __init__(self, context: Context, **settings: Any) -> None:
        ctx = handle_of(context, Context, "context")
        s = ResidentSettings()
        lib.cw_resident_settings_default(ctypes.byref(s))
        _fill(s, settings)
        super().__init__(_new(lib.cw_resident_create, ctx, ctypes.byref(s)), keep=(context,))
        self.context: Context = context
        self._failures: List[Tuple[str, BaseException]] = []  # raised by capture functions
        self._failure_lists = [self._failures]  # and those of a resident pipeline's operators
        self._parts: Dict[str, Any] = {}  # "workload"/"handler" -> what C calls to capture them

    def configure(self, **settings: Any) -> None:
        """Changes settings of a loop that is not launched
        (cw_resident_configure): the current ones with these replaced."""
        s = ResidentSettings()
        lib.cw_resident_get_settings(self.handle, ctypes.byref(s))
        _fill(s, settings)
        lib.cw_resident_configure(self.handle, ctypes.byref(s))

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        """A C call that may run capture functions: their exception is the cause."""
        for f in self._failure_lists:
            del f[:]
        try:
            fn(self.handle, *args)
        except _errors.CuweaveError as err:
            _reraise(err, [x for f in self._failure_lists for x in f])
        finally:
            for f in self._failure_lists:
                del f[:]

    def _set_part(self, part: str, what: object, by_graph: Callable[..., Any], by_fn: Callable[..., Any]) -> None:
        h = self.handle
        if isinstance(what, Graph):
            by_graph(h, handle_of(what, Graph, part))
            self._parts.pop(part, None)
        elif callable(what):
            e = _Entry(self.context, self._failures, what, "the %s capture function %r" % (part, what))
            key = _capture_fns.add(e)
            by_fn(h, _c_capture, ctypes.c_void_p(key))
            self._parts[part] = e  # alive while the loop object is (the loop with it)
        else:
            raise TypeError("%s must be a cuweave.Graph or a capture function fn(stream), not %s" %
                            (part, "None" if what is None else type(what).__name__))

    @staticmethod
    def default_settings() -> Dict[str, Any]:
        """The settings a new loop has (cw_resident_settings_default), as Resident's keywords."""
        s = ResidentSettings()
        lib.cw_resident_settings_default(ctypes.byref(s))
        return _read(s)

    @property
    def ctl(self) -> int:
        """The device address of the loop's control block (cw_resident_ctl *)."""
        v = ctypes.c_uint64()
        lib.cw_resident_get_ctl(self.handle, ctypes.byref(v))
        return int(v.value)

    def input(self, slot: int) -> int:
        """The device address of input slot `slot` (cw_resident_get_input)."""
        v = ctypes.c_uint64()
        lib.cw_resident_get_input(self.handle, _check.uint32(slot, "slot"), ctypes.byref(v))
        return int(v.value)

    def set_workload(self, workload: Union[Graph, Callable[[Stream], Any]]) -> None:
        """The work of each request: a Graph (copied) or a capture function
        fn(stream) called when the loop builds, once per unrolled copy of the
        iteration, to enqueue the work on `stream` (cw_resident_set_workload_fn;
        kept until replaced or the loop is closed). An exception in fn fails
        the build, raised from it."""
        self._set_part("workload", workload, lib.cw_resident_set_workload, lib.cw_resident_set_workload_fn)

    def set_handler(self, handler: Union[Graph, Callable[[Stream], Any]]) -> None:
        """The data-ready handler: a Graph or a capture function, as
        set_workload (cw_resident_set_handler, cw_resident_set_handler_fn)."""
        self._set_part("handler", handler, lib.cw_resident_set_handler, lib.cw_resident_set_handler_fn)

    def stage_begin(self, stream: Stream, name: str) -> int:
        """Inside a capture function: begins a stage named `name` on `stream`
        (trace=True names it when the GPU faults in it); returns its id for
        stage_end (NO_STAGE when the loop does not trace)."""
        sh = handle_of(stream, Stream, "stream")
        v = ctypes.c_uint32()
        lib.cw_resident_stage_begin(self.handle, sh, _check.text(name, "name"), ctypes.byref(v))
        return int(v.value)

    def stage_end(self, stream: Stream, stage: int) -> None:
        """Ends the stage stage_begin returned."""
        lib.cw_resident_stage_end(self.handle, handle_of(stream, Stream, "stream"), _check.uint32(stage, "stage"))

    def set_fused(self, source: Optional[str], stages: Optional[Sequence[str]], grid_blocks: int = 0,
                  block_threads: int = 0, shared_bytes: int = 0, options: Sequence[str] = (), user: object = 0) -> None:
        """Fused persistent mode (cw_resident_set_fused): one persistent
        kernel, compiled from `source` (CUDA C++), runs the stages named in
        `stages` in order for each request, with a grid-wide barrier after
        each; every stage is extern "C" __device__ void NAME(cw_resident_ctl
        *ctl, void *user). grid_blocks 0: the most that fit co-resident
        (stats()["grid_blocks"] says how many). user: a device address (an
        int, a Buffer, or an object with __cuda_array_interface__) passed to
        every stage. set_fused(None, None) makes the loop a graph loop again."""
        from ._multi import address
        h = self.handle
        src = _check.text_or_bytes(source, "source") if source is not None else None
        names = _check.texts(stages, "stages") if stages is not None or src is not None else ()
        opts = _check.texts(options, "options")
        grid = _check.uint32(grid_blocks, "grid_blocks")
        block = _check.uint32(block_threads, "block_threads")
        shm = _check.uint32(shared_bytes, "shared_bytes")
        dptr = address(user, "user")
        if src is None:
            lib.cw_resident_set_fused(h, None)
            return
        c_stages = (ctypes.c_char_p * max(1, len(names)))(*names)
        c_opts = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        f = ResidentFused()
        f.source = src
        f.stages = ctypes.cast(c_stages, ctypes.POINTER(ctypes.c_char_p))
        f.stage_count = len(names)
        f.options = ctypes.cast(c_opts, ctypes.POINTER(ctypes.c_char_p)) if opts else None
        f.option_count = len(opts)
        f.grid_blocks, f.block_threads, f.shared_bytes, f.user = grid, block, shm, dptr
        lib.cw_resident_set_fused(h, ctypes.byref(f))

    def set_dataflow(self, source: str, stages: Sequence[FusedStage], in_flight: int = 1,
                     watchdog: Optional[float] = 5.0, grid_blocks: int = 0, block_threads: int = 0,
                     shared_bytes: int = 0, options: Sequence[str] = (), user: object = 0) -> None:
        """Fused persistent mode with tile dataflow (cw_resident_set_fused,
        mode CW_FUSED_DATAFLOW): one persistent kernel, compiled from
        `source`, runs the FusedStages in `stages` (each reads only stages
        before it, but with previous=True) as tiles that blocks take from
        counters on the GPU; a tile waits only for the tiles it reads, no
        grid barrier. in_flight: requests whose tiles may run at once (1..8;
        results are signalled in order). watchdog: seconds a tile may wait
        for what it reads before the loop stops (exit STALLED; stats()
        ["stall"] says which tile waited on which); None: no watchdog.
        grid_blocks 0: one block an SM of the context. user: a device address
        passed to every stage. A refused plan raises InvalidArgumentError
        naming the stage and the reason; a compile error CompileError."""
        from ._fused import _Plan
        from ._multi import address
        h = self.handle
        src = _check.text_or_bytes(source, "source")
        defs = _check.sequence(stages, "stages")
        for i, st in enumerate(defs):
            _check.instance(st, FusedStage, "stages[%d]" % i)
        if not defs:
            raise ValueError("stages must name at least one FusedStage")
        flight = _check.uint32(in_flight, "in_flight")
        if not 1 <= flight <= 8:
            raise ValueError("in_flight must be 1 .. 8, not %d" % flight)
        if watchdog is None:
            wd = 0xFFFFFFFF
        else:
            wd = _check.duration(watchdog, "watchdog", 1000, 0xFFFFFFFE)
            if wd == 0:
                raise ValueError("watchdog must be more than 0 seconds (None: no watchdog), not %r" % watchdog)
        opts = _check.texts(options, "options")
        grid = _check.uint32(grid_blocks, "grid_blocks")
        block = _check.uint32(block_threads, "block_threads")
        shm = _check.uint32(shared_bytes, "shared_bytes")
        dptr = address(user, "user")
        plan = _Plan(defs)
        c_opts = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        f = ResidentFused()
        f.source = src
        f.mode = 1  # CW_FUSED_DATAFLOW
        f.stage_defs = ctypes.cast(plan.array, ctypes.c_void_p)
        f.stage_count = len(defs)
        f.options = ctypes.cast(c_opts, ctypes.POINTER(ctypes.c_char_p)) if opts else None
        f.option_count = len(opts)
        f.in_flight, f.watchdog_ms = flight, wd
        f.grid_blocks, f.block_threads, f.shared_bytes, f.user = grid, block, shm, dptr
        lib.cw_resident_set_fused(h, ctypes.byref(f))

    def build(self) -> None:
        """Builds the loop's graph (capture functions run now; cw_resident_build)."""
        self._call(lib.cw_resident_build)

    def launch(self) -> None:
        """Launches the loop (builds it first if need be; cw_resident_launch)."""
        self._call(lib.cw_resident_launch)

    @property
    def state(self) -> ResidentState:
        """The loop's ResidentState (cw_resident_get_state)."""
        v = ctypes.c_int()
        lib.cw_resident_get_state(self.handle, ctypes.byref(v))
        return ResidentState(v.value)

    @property
    def launched(self) -> bool:
        """Running or stopping."""
        return self.state in (ResidentState.RUNNING, ResidentState.STOPPING)

    def _wait(self, call: Callable[[int], Any], timeout: object) -> Any:
        """A wait of the loop's in uint32 milliseconds, repeated while time
        is left (None: without limit)."""
        ms = _check.ms_parts(timeout)
        part = _check.UINT32_MAX - 1
        if ms is not None and ms <= part:
            return call(ms)
        deadline = None if ms is None else time.monotonic() + ms / 1000.0
        while True:
            chunk = part if deadline is None else max(1, min(part, int((deadline - time.monotonic()) * 1000)))
            try:
                return call(chunk)
            except _errors.CuweaveTimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def next_input(self, timeout: Optional[float] = 1.0) -> int:
        """The device address of the input slot the next request will read,
        once it is free: waits up to `timeout` seconds (None: no limit; 0:
        only checks) for the request that used it (cw_resident_next_input)."""
        h = self.handle
        v = ctypes.c_uint64()
        self._wait(lambda ms: lib.cw_resident_next_input(h, ms, ctypes.byref(v)), timeout)
        return int(v.value)

    def data_ready(self) -> int:
        """Makes a request; returns its sequence number."""
        seq = ctypes.c_uint64()
        lib.cw_resident_data_ready(self.handle, ctypes.byref(seq))
        return int(seq.value)

    def result_ready(self, seq: int) -> bool:
        """True when request seq has finished, False when not yet
        (cw_resident_poll_result); raises when it never will."""
        st = int(lib.cw_resident_poll_result(self.handle, _check.uint64(seq, "seq")))
        if st == _NOT_READY:
            return False
        if st != 0:
            raise _lib.error(st)
        return True

    def wait_result(self, seq: int, timeout: Optional[float] = 1.0) -> None:
        """Waits until request seq has finished: at most `timeout` seconds
        (None: no limit; 0: only checks), then CuweaveTimeoutError."""
        h, sq = self.handle, _check.uint64(seq, "seq")
        self._wait(lambda ms: lib.cw_resident_wait_result(h, sq, ms), timeout)

    def tear_down(self, timeout: Optional[float] = 1.0) -> None:
        """Asks the loop to stop and waits up to `timeout` seconds (None: no
        limit) until it has; CuweaveTimeoutError when it has not (the request
        to stop stays: call again to keep waiting)."""
        h = self.handle
        self._wait(lambda ms: lib.cw_resident_tear_down(h, ms), timeout)

    def settings(self) -> Dict[str, Any]:
        """The loop's settings, as Resident's keywords (durations in seconds)."""
        s = ResidentSettings()
        lib.cw_resident_get_settings(self.handle, ctypes.byref(s))
        return _read(s)

    def stats(self) -> Dict[str, Any]:
        """State and statistics (cw_resident_get_info) as a dict named as in
        cw_resident_info, durations in seconds: iter_min, iter_median,
        iter_max (an iteration on the GPU) and run_time (the loop's
        cw_resident_info.*_ns); state a ResidentState, exit a ResidentExit,
        gate a Gate, fallback a Fallback, overlap a bool, stall None or a dict
        of cw_resident_stall's fields (a dataflow loop that stopped because a
        tile waited too long, or a dependency function named a tile that does
        not exist: which stage and tile waited on which, and detail in words)."""
        st = ResidentInfo()
        lib.cw_resident_get_info(self.handle, ctypes.byref(st))
        out: Dict[str, Any] = {name: getattr(st, name) for name, *_ in ResidentInfo._fields_
                               if name not in ("reserved", "context") and not name.endswith("_ns")}
        for name, key in (("iter_min_ns", "iter_min"), ("iter_median_ns", "iter_median"),
                          ("iter_max_ns", "iter_max"), ("run_ns", "run_time")):
            out[key] = getattr(st, name) / 1e9
        out["state"], out["exit"] = ResidentState(st.state), ResidentExit(st.exit)
        out["launched"], out["fused"] = bool(st.launched), bool(st.fused)
        out["gate"], out["fallback"] = Gate(st.gate), Fallback(st.fallback)
        out["overlap"] = None if st.overlap == OVERLAP_AUTO else bool(st.overlap)
        out["fallback_detail"] = (st.fallback_detail or b"").decode("utf-8", "replace")
        out["stall"] = stall_of(st.stall)
        return out

    def close(self) -> None:
        """Tears the loop down (if launched) and frees it. Never raises: a loop
        that would not stop within destroy_timeout is abandoned and logged
        (cw_resident_destroy); call tear_down() first to learn whether it
        stops. Idempotent."""
        super().close()

    def _state(self) -> str:
        return "device %d %s" % (self.context.device, self.state.name.lower().replace("_", " "))


def resident_device_header() -> str:
    """The text of cuweave/resident_device.h, to give NVRTC as a header."""
    return str(lib.cw_builtin_get_resident_header().decode())
