# SPDX-License-Identifier: BSD-2-Clause
"""Operators and pipelines (cuweave/flow.h, docs/pipelines.md) for Python.

An Operator's compute is a Python function compute(io) that the C executor
calls (cw_pipeline_run: on the calling thread or on worker threads; a
resident capture: on the thread that builds the loop). `io` (an IO) is valid
for that call only, like the C cw_io, and so are the streams, buffers and
messages it gives: they are closed when compute returns. The stream rules
are C's, since every call goes to the C cw_io functions:
io.receive_stream(port) is the operator's internal stream ordered behind the
port's messages, its context made current on the thread, and the outputs
carry it.

Callbacks and lifetimes: C calls every Python operator through the same
ctypes functions (made once, never freed) with an int key; the key's entry
(the operator's Python side: its functions, the values it emitted) is held
by the Operator object and, once added, by its Pipeline, whose finalizer
destroys the C pipeline and so the C operators: the Python side lives at
least as long as C may call it, and C's destroy callback drops it.

Exceptions never cross into C: an exception in compute (or start) becomes
the status compute returns (a CuweaveError's own; ValueError:
CW_ERROR_INVALID_ARGUMENT, TimeoutError: CW_ERROR_TIMEOUT, MemoryError:
CW_ERROR_OUT_OF_MEMORY; anything else CW_ERROR_INTERNAL), so the run stops
as it would for a C operator's error, and Pipeline.run raises the matching
CuweaveError from the exception (KeyboardInterrupt and SystemExit as
themselves). An exception in stop goes to sys.unraisablehook.
"""

from __future__ import annotations

import ctypes
import enum
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _check, _lib, _log
from ._core import Context, Stream, StreamPool, _get, _new, handle_of
from ._errors import CuweaveError
from ._memory import Buffer, shape_of, typestr as _typestr
from ._resident import _CW_ERROR_INTERNAL, Resident, _Callbacks, _reraise, _status_of

if TYPE_CHECKING:
    from ._trace import Trace

lib = _lib.lib
PortSpec = Union[str, Tuple[str, Mapping[str, Any]]]



class PortFlag(enum.IntFlag):
    """cw_port_settings.flags of an input port."""

    OPTIONAL = 0x1  #: CW_PORT_OPTIONAL: compute runs without a message on it
    MANY = 0x2      #: CW_PORT_MANY: any number of connections, one message each


PORT_OPTIONAL, PORT_MANY = PortFlag.OPTIONAL, PortFlag.MANY
_NOT_READY = 8

_ops = _Callbacks()  # key -> _OpState

# Python objects carried as message values: id(obj) -> [obj, holders]. A
# message's value is id(obj); each output port holds its last emitted value
# (a message lives one iteration, the port's next emit is in a later one).
_values: Dict[int, List[Any]] = {}
# Reentrant: computes on the executor's threads emit at once, and a garbage collection inside
# _hold or _drop (an allocation there) may finalize a pipeline, whose release drops values again.
_values_lock = threading.RLock()


def _hold(obj: Any) -> None:
    with _values_lock:
        e = _values.get(id(obj))
        if e is None:
            _values[id(obj)] = [obj, 1]
        else:
            e[1] += 1


def _drop(obj: Any) -> None:
    with _values_lock:
        e = _values.get(id(obj))
        if e is not None:
            e[1] -= 1
            if e[1] <= 0:
                del _values[id(obj)]


class _OpState:
    """The Python side of one C operator."""

    def __init__(self, name: str, compute: Callable[["IO"], Any], start: Optional[Callable[[], Any]],
                 stop: Optional[Callable[[], Any]]) -> None:
        self.name = name
        self.compute, self.start, self.stop = compute, start, stop
        self.pipeline: Optional["weakref.ref[Pipeline]"] = None  # its Pipeline, once added
        self.context: Optional[Context] = None   # the pipeline's Context, once added
        self.failures: List[Tuple[str, BaseException]] = []  # the pipeline's list once added
        self.slots: Dict[str, Any] = {}  # output port -> the Python value last emitted there
        self.destroyed = False

    def set_slot(self, port: str, obj: Any) -> None:
        old = self.slots.pop(port, None)
        if old is not None:
            _drop(old)
        if obj is not None:
            _hold(obj)
            self.slots[port] = obj

    def release(self) -> None:
        for obj in list(self.slots.values()):
            _drop(obj)
        self.slots.clear()


def _where(st: _OpState, phase: str) -> str:
    return "operator '%s' (%s)" % (st.name, phase)


def _py_compute(io: Optional[int], user: Optional[int]) -> int:
    st = _ops.get(user)
    if st is None:  # its Python side is gone (so is its pipeline, being destroyed)
        return _CW_ERROR_INTERNAL
    call = IO(io, st)
    try:
        st.compute(call)
        return 0
    except BaseException as exc:  # noqa: BLE001 (nothing may cross into C)
        st.failures.append((_where(st, "compute"), exc))
        return _status_of(exc)
    finally:
        call._close()




_c_compute: Any = _lib.COMPUTE_FN(_py_compute)
def _py_start(op: Optional[int], user: Optional[int]) -> int:
    st = _ops.get(user)
    if st is None:
        return _CW_ERROR_INTERNAL
    try:
        if st.start is not None:
            st.start()
        return 0
    except BaseException as exc:  # noqa: BLE001
        st.failures.append((_where(st, "start"), exc))
        return _status_of(exc)




_c_start: Any = _lib.START_FN(_py_start)
def _py_stop(op: Optional[int], user: Optional[int]) -> None:
    st = _ops.get(user)
    if st is None:
        return
    try:
        if st.stop is not None:
            st.stop()
    except BaseException as exc:  # noqa: BLE001
        _log.unraisable(exc, "in the stop callback of operator '%s'" % st.name)




_c_stop: Any = _lib.STOP_FN(_py_stop)
def _py_destroy(user: Optional[int]) -> None:
    st = _ops.pop(user)
    if st is not None:
        st.destroyed = True
        st.release()




_c_destroy: Any = _lib.DESTROY_FN(_py_destroy)
def _port_settings(flags: int = 0, bytes: object = 0, dptr: object = 0) -> _lib.PortSettings:
    s = _lib.PortSettings()
    lib.cw_port_settings_default(ctypes.byref(s))
    s.flags, s.bytes, s.dptr = flags, _check.size(bytes, "bytes"), _check.uint64(dptr, "dptr")
    return s


def _port(p: object, name: str) -> Tuple[str, Dict[str, Any]]:
    if isinstance(p, str):
        return p, {}
    if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], Mapping):
        return p[0], dict(p[1])
    raise TypeError("%s: a port is a name or (name, {options}), not %r" % (name, p))


class Operator(_check.Unique):
    """An operator (cw_operator_create): compute(io) called once per
    iteration; optional start() and stop() around each run that computes
    it. inputs / outputs: port names, or (name, {options}) pairs (options
    of add_input / add_output). pool: a StreamPool for its internal and
    named streams (default: the pipeline's). no_internal_stream,
    wait_inputs, resident: cw_operator_settings' booleans.

    Pipeline.add(op) gives it to the pipeline, which then owns it (the
    object stays usable until the pipeline is closed); close() destroys an
    operator never added."""

    def __init__(self, name: str, compute: Callable[["IO"], Any], inputs: Sequence[PortSpec] = (),
                 outputs: Sequence[PortSpec] = (), start: Optional[Callable[[], Any]] = None,
                 stop: Optional[Callable[[], Any]] = None, pool: Optional[StreamPool] = None,
                 no_internal_stream: bool = False, wait_inputs: bool = False, resident: bool = False) -> None:
        cname = _check.text(name, "name", allow_empty=False)
        if not callable(compute):
            raise TypeError("compute must be callable, not %s" % ("None" if compute is None else type(compute).__name__))
        for pname, fn in (("start", start), ("stop", stop)):
            if fn is not None and not callable(fn):
                raise TypeError("%s must be callable or None, not %s" % (pname, type(fn).__name__))
        pool_h = handle_of(pool, StreamPool, "pool").value if pool is not None else None
        ins = [_port(p, "inputs[%d]" % i) for i, p in enumerate(_check.sequence(inputs, "inputs"))]
        outs = [_port(p, "outputs[%d]" % i) for i, p in enumerate(_check.sequence(outputs, "outputs"))]
        flags = [_check.boolean(v, n) for v, n in ((no_internal_stream, "no_internal_stream"),
                                                     (wait_inputs, "wait_inputs"), (resident, "resident"))]
        self.name: str = name
        self.pool: Optional[StreamPool] = pool
        st = _OpState(self.name, compute, start, stop)
        ops = _lib.OperatorOps()
        ops.compute = _c_compute
        if start is not None:
            ops.start = _c_start
        if stop is not None:
            ops.stop = _c_stop
        ops.destroy = _c_destroy
        s = _lib.OperatorSettings()
        lib.cw_operator_settings_default(ctypes.byref(s))
        s.pool = pool_h
        s.no_internal_stream, s.wait_inputs, s.resident = (1 if f else 0 for f in flags)
        key = _ops.add(st)
        try:
            ptr = _new(lib.cw_operator_create, cname, ctypes.byref(ops), ctypes.c_void_p(key),
                       ctypes.byref(s))
        except BaseException:
            _ops.pop(key)  # not made: C will never call it
            raise
        self._state: Optional[_OpState] = st  # held here, then by the pipeline too
        self._ptr = ctypes.c_void_p(ptr)
        self.pipeline: Optional[Pipeline] = None
        self._finalizer = weakref.finalize(self, Operator._free, self._ptr)
        for pname, opts in ins:
            self.add_input(pname, **opts)
        for pname, opts in outs:
            self.add_output(pname, **opts)

    @staticmethod
    def _free(ptr: ctypes.c_void_p) -> None:
        if ptr.value:
            lib.cw_operator_destroy(ctypes.byref(ptr))  # calls its destroy callback

    @property
    def handle(self) -> ctypes.c_void_p:
        """The C handle; ValueError once closed (or its pipeline is)."""
        if not self._ptr.value:
            raise ValueError("operator '%s' is closed (or its pipeline is)" % self.name)
        return self._ptr

    @property
    def closed(self) -> bool:
        """True once closed (or its pipeline is)."""
        return not self._ptr.value

    def add_input(self, name: str, optional: bool = False, many: bool = False, bytes: int = 0, dptr: int = 0) -> None:
        """Declares an input port (before the operator joins a pipeline):
        optional (PORT_OPTIONAL), many (PORT_MANY); bytes or dptr declare port
        memory (resident pipelines, docs/pipelines.md)."""
        n = _check.text(name, "name", allow_empty=False)
        flags = (PORT_OPTIONAL if _check.boolean(optional, "optional") else 0) | \
            (PORT_MANY if _check.boolean(many, "many") else 0)
        s = _port_settings(flags, bytes, dptr)
        lib.cw_operator_add_input(self.handle, n, ctypes.byref(s))

    def add_output(self, name: str, bytes: int = 0, dptr: int = 0) -> None:
        """Declares an output port (before the operator joins a pipeline)."""
        n = _check.text(name, "name", allow_empty=False)
        s = _port_settings(0, bytes, dptr)
        lib.cw_operator_add_output(self.handle, n, ctypes.byref(s))

    def close(self) -> None:
        """Destroys an operator that no pipeline owns (a pipeline's goes with
        it: then this only lets go of the object). Idempotent."""
        if self.pipeline is None:
            self._finalizer()

    def __repr__(self) -> str:
        where = " closed" if self.closed else " in a pipeline" if self.pipeline is not None else ""
        return "<cuweave.Operator %r %#x%s>" % (self.name, self._ptr.value or 0, where)


class StageOperator(Operator):
    """An operator that runs as a fused stage (cw_operator_create_stage):
    no compute, a device function `function` of the source given to
    Pipeline.make_fused, called as function(const cw_fused_tile *t, void
    *user, port0, port1, ...) with one pointer per port in the order they
    are declared, once per tile of each request. Cut into `tiles` tiles in a
    row, or `size` elements (an int or (x, y)) in tiles of `tile`; threads
    a tile (0: the block's), shared_bytes of t->shared, user a device
    address passed as `user`.

    inputs: (name, read) or (name, read, {options}) pairs: read is a
    PortRead, a FusedRead (or its name) as shorthand, or None for an
    optional input left unread; options those of add_input (optional,
    bytes, dptr). outputs: as Operator's. Only Pipeline.make_fused runs it."""

    def __init__(self, name: str, function: str, inputs: Sequence[Any] = (), outputs: Sequence[PortSpec] = (),
                 tiles: int = 0, size: Union[int, Tuple[int, int]] = 0, tile: Union[int, Tuple[int, int]] = 0,
                 threads: int = 0, shared_bytes: int = 0, user: object = 0) -> None:
        from ._fused import FusedRead, PortRead, _pair
        from ._multi import address
        cname = _check.text(name, "name", allow_empty=False)
        fn = _check.text(function, "function", allow_empty=False)
        ins: List[Tuple[str, Optional[PortRead], Dict[str, Any]]] = []
        for i, p in enumerate(_check.sequence(inputs, "inputs")):
            where = "inputs[%d]" % i
            if not isinstance(p, tuple) or len(p) not in (2, 3) or not isinstance(p[0], str):
                raise TypeError("%s: an input is (name, read) or (name, read, {options}), not %r" % (where, p))
            if len(p) == 3 and not isinstance(p[2], Mapping):
                raise TypeError("%s: its options are a mapping, not %s" % (where, type(p[2]).__name__))
            rd = p[1]
            if rd is not None and not isinstance(rd, PortRead):
                rd = PortRead(_check.member(rd, FusedRead, "%s read" % where))
            ins.append((p[0], rd, dict(p[2]) if len(p) == 3 else {}))
        outs = [_port(p, "outputs[%d]" % i) for i, p in enumerate(_check.sequence(outputs, "outputs"))]
        st = _lib.OperatorStage()
        st.function, st.tiles = fn, _check.uint32(tiles, "tiles")
        st.size[0], st.size[1] = _pair(size, "size")
        st.tile[0], st.tile[1] = _pair(tile, "tile")
        st.threads, st.shared_bytes = _check.uint32(threads, "threads"), _check.uint32(shared_bytes, "shared_bytes")
        st.user = address(user, "user")
        reads = [(_check.text(n, "inputs[%d] name" % i), r) for i, (n, r, _) in enumerate(ins) if r is not None]
        c_reads = (_lib.PortRead * max(1, len(reads)))()
        for k, (port, r) in enumerate(reads):
            r._fill(c_reads[k], port)
        st.reads = ctypes.cast(c_reads, ctypes.POINTER(_lib.PortRead)) if reads else None
        st.read_count = len(reads)
        self.name = name
        self.function: str = function
        self.pool = None
        self._state = None  # no callbacks: nothing of Python runs in it
        self._ptr = ctypes.c_void_p(_new(lib.cw_operator_create_stage, cname, ctypes.byref(st)))
        self.pipeline = None
        self._finalizer = weakref.finalize(self, Operator._free, self._ptr)
        for pname, _, opts in ins:
            self.add_input(pname, **opts)
        for pname, opts in outs:
            self.add_output(pname, **opts)

    def __repr__(self) -> str:
        where = " closed" if self.closed else " in a pipeline" if self.pipeline is not None else ""
        return "<cuweave.StageOperator %r (%s) %#x%s>" % (self.name, self.function, self._ptr.value or 0, where)


class Message:
    """A message received in compute: value (the Python object emitted, or
    None), pointer (the raw value pointer, an int: what a C operator
    emitted), buffer (a Buffer borrowed for the compute call, or None),
    stream (the Stream its data was produced on, borrowed, or None)."""

    __slots__ = ("value", "pointer", "buffer", "stream")

    def __init__(self, value: Any, pointer: int, buffer: Optional[Buffer], stream: Optional[Stream]) -> None:
        self.value, self.pointer, self.buffer, self.stream = value, pointer, buffer, stream

    def __repr__(self) -> str:
        return "<cuweave.Message value=%r pointer=%#x buffer=%r stream=%r>" % (self.value, self.pointer,
                                                                               self.buffer, self.stream)


class IO:
    """The compute call's cw_io: valid during the call only (then every call
    raises ValueError), and so are the streams, buffers and messages it
    gives (closed when compute returns: buffer.keep() keeps a buffer)."""

    def __init__(self, ptr: Optional[int], state: _OpState) -> None:
        self._ptr = ctypes.c_void_p(ptr)
        self._state = state
        self._borrowed: List[Any] = []

    def _close(self) -> None:
        self._ptr.value = None
        for obj in self._borrowed:
            obj._ptr.value = None
        del self._borrowed[:]

    @property
    def handle(self) -> ctypes.c_void_p:
        """The C cw_io; ValueError after the compute call."""
        if not self._ptr.value:
            raise ValueError("an IO is valid only inside the compute call it was given to")
        return self._ptr

    @property
    def pipeline(self) -> Optional["Pipeline"]:
        """The Pipeline running the call (Pipeline.stop() may be called from compute)."""
        return self._state.pipeline() if self._state.pipeline is not None else None

    @property
    def name(self) -> str:
        """The operator's name."""
        return self._state.name

    def _lend(self, obj: Any) -> Any:
        self._borrowed.append(obj)
        return obj

    def _context_of(self, ctx_ptr: Optional[int]) -> Context:
        ctx = self._state.context
        if ctx is not None and ctx._ptr.value == ctx_ptr:
            return ctx
        owner = self.pipeline
        out: Context = self._lend(Context(_ptr=ctx_ptr, _owner=owner if owner is not None else self))
        return out

    def _stream(self, ptr: Optional[int]) -> Optional[Stream]:
        if not ptr:
            return None
        i = _lib.StreamInfo()
        lib.cw_stream_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        out: Stream = self._lend(Stream(self._context_of(i.context), _ptr=ptr, _borrowed=True))
        return out

    def _buffer(self, ptr: Optional[int], stream: Optional[Stream], shape: Optional[Tuple[int, ...]] = None,
                dtype: str = "uint8") -> Optional[Buffer]:
        if not ptr:
            return None
        i = _lib.BufferInfo()
        lib.cw_buffer_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        out: Buffer = self._lend(Buffer._wrap(ptr, self._context_of(i.context), stream,
                                              shape if shape is not None else (i.bytes,), dtype, owned=False))
        return out

    def _message(self, m: _lib.Message) -> "Message":
        e = _values.get(m.value) if m.value else None
        stream = self._stream(m.stream)
        return Message(e[0] if e is not None else None, m.value or 0, self._buffer(m.buffer, stream), stream)

    def info(self) -> Dict[str, Any]:
        """cw_io_get_info: {"iteration": the iteration (in a resident
        capture: the copy of the iteration), "name": the operator's name,
        "resident_ctl": in a resident capture the loop's device block to pass
        to kernels (0 under Pipeline.run)}."""
        i = _lib.IoInfo()
        lib.cw_io_get_info(self.handle, ctypes.byref(i))
        return {"iteration": i.iteration, "name": (i.name or b"").decode(), "resident_ctl": i.resident_ctl}

    @property
    def iteration(self) -> int:
        """The iteration number (info()["iteration"])."""
        return int(self.info()["iteration"])

    def receive(self, port: str) -> Optional["Message"]:
        """The first message on input `port`, or None when none arrived
        this iteration (an optional port; always in a resident capture)."""
        h, name = self.handle, _check.text(port, "port")
        m = _lib.Message()
        st = int(lib.cw_io_receive(h, name, ctypes.byref(m)))
        if st == _NOT_READY:
            return None
        if st != 0:
            raise _lib.error(st)
        return self._message(m)

    def receive_many(self, port: str) -> List["Message"]:
        """Every message on the port (PORT_MANY: one per connection that sent
        one), each with the stream it was produced on, with no ordering (a
        buffer from another device is moved first)."""
        h, name = self.handle, _check.text(port, "port")
        n = ctypes.c_size_t()
        lib.cw_io_receive_many(h, name, None, 0, ctypes.byref(n))
        arr = (_lib.Message * max(n.value, 1))()
        lib.cw_io_receive_many(h, name, arr, n.value, ctypes.byref(n))
        return [self._message(arr[i]) for i in range(min(n.value, len(arr)))]

    def receive_stream(self, port: Optional[str] = None) -> Stream:
        """The operator's internal stream, ordered (on the GPU) behind the
        stream of every message on `port` (None: no ordering, for sources),
        its context made current on this thread; the outputs carry it. The
        same stream for every port and every compute call (docs/pipelines.md,
        the stream rules)."""
        h = self.handle
        name = None if port is None else _check.text(port, "port")
        s = self._stream(_get(lib.cw_io_receive_stream, h, name))
        assert s is not None
        return s

    def stream(self, name: str) -> Stream:
        """A named extra stream from the operator's pool, the same for the
        same name in every call (cw_io_get_stream); carried by no output
        unless set with set_output_stream."""
        h = self.handle
        s = self._stream(_get(lib.cw_io_get_stream, h, _check.text(name, "name")))
        assert s is not None
        return s

    def set_output_stream(self, port: str, stream: Optional[Stream]) -> None:
        """The stream output `port` carries in this call (None: none)."""
        h, name = self.handle, _check.text(port, "port")
        lib.cw_io_set_output_stream(h, name, handle_of(stream, Stream, "stream") if stream is not None else None)

    def emit(self, port: str, value: Any = None, buffer: Optional[Buffer] = None, pointer: Optional[int] = None) -> None:
        """Emits a message on output `port`, delivered to every connected
        input when compute returns: value (any Python object; the receiver's
        Message.value is the same object; kept alive until the port's next
        emit), or pointer (a raw address, for C operators), and buffer (a
        Buffer; the message holds a reference)."""
        h, name = self.handle, _check.text(port, "port")
        if value is not None and pointer is not None:
            raise TypeError("pointer: emit takes a value or a pointer, not both")
        bh = handle_of(buffer, Buffer, "buffer") if buffer is not None else None
        st = self._state
        raw = id(value) if value is not None else (_check.uint64(pointer, "pointer") if pointer is not None else None)
        if value is not None:
            _hold(value)  # held while C may deliver it: then by the port's slot
        try:
            lib.cw_io_emit(h, name, ctypes.c_void_p(raw) if raw else None, bh)
            st.set_slot(port, value)
        finally:
            if value is not None:
                _drop(value)

    def alloc(self, shape: Union[int, Sequence[int]], dtype: object = "uint8") -> Buffer:
        """A Buffer of `shape` elements of `dtype` on the operator's internal
        stream (cw_io_alloc: from the pipeline's cache), borrowed for the
        call: emit it, or keep() it to hold it longer."""
        h = self.handle
        dims = shape_of(shape)
        t = _typestr(dtype)
        count = 1
        for n in dims:
            count *= n
        nbytes = count * int(t[2:])
        if nbytes == 0:
            raise ValueError("shape: a buffer holds at least one byte, not %r" % (dims,))
        ptr = _new(lib.cw_io_alloc, h, nbytes)
        stream = self._stream(_get(lib.cw_io_receive_stream, h, None))
        b = self._buffer(ptr, stream, dims, t)
        assert b is not None
        return b

    def port_ptr(self, port: str) -> int:
        """The device address of the port's memory (cw_io_get_port_ptr)."""
        h, name = self.handle, _check.text(port, "port")
        v = ctypes.c_uint64()
        lib.cw_io_get_port_ptr(h, name, ctypes.byref(v))
        return int(v.value)

    def __repr__(self) -> str:
        return "<cuweave.IO of operator %r%s>" % (self._state.name, "" if self._ptr.value else " (call over)")


def _name(op: object, param: str) -> bytes:
    if isinstance(op, Operator):
        return op.name.encode()
    return _check.text(op, param, allow_empty=False)


class Pipeline(_check.Unique):
    """A pipeline of operators on a Context (cw_pipeline_create): threads
    (executor threads: 1 runs every compute on the thread of run()),
    max_in_flight (how many iterations the GPU may lag), pool (the
    StreamPool of operators that have none). add(), connect(), then run().
    close() (or its finalizer) destroys it with its operators; closing it
    from a compute call stops the run, which destroys it as it returns."""

    def __init__(self, context: Context, threads: int = 1, max_in_flight: int = 4,
                 pool: Optional[StreamPool] = None) -> None:
        ctx = handle_of(context, Context, "context")
        s = _lib.PipelineSettings()
        lib.cw_pipeline_settings_default(ctypes.byref(s))
        s.threads, s.max_in_flight = _check.uint32(threads, "threads"), _check.uint32(max_in_flight, "max_in_flight")
        s.pool = handle_of(pool, StreamPool, "pool").value if pool is not None else None
        self._ptr = ctypes.c_void_p(_new(lib.cw_pipeline_create, ctx, ctypes.byref(s)))
        self.context: Context = context
        self.pool: Optional[StreamPool] = pool
        self._keep = (context, pool)
        self._states: List[_OpState] = []  # the operators' Python sides: alive as long as the pipeline
        self._op_ptrs: List[ctypes.c_void_p] = []  # their handles, closed when the pipeline goes
        self._ops: Dict[str, Operator] = {}  # name -> Operator
        self._failures: List[Tuple[str, BaseException]] = []  # raised by callbacks during a call
        self._running = False
        self._trace: Any = None
        # Each operator's slots (its ports' last values), for the finalizer: when the pipeline is
        # collected in a cycle, its operators' Python sides are cleared from _ops first, and their
        # destroy callbacks find nothing to release.
        self._slots: List[Dict[str, Any]] = []
        self._finalizer = weakref.finalize(self, Pipeline._free, self._ptr, self._op_ptrs, self._slots)

    @staticmethod
    def _free(ptr: ctypes.c_void_p, op_ptrs: List[ctypes.c_void_p], slots: List[Dict[str, Any]]) -> None:
        if ptr.value:
            lib.cw_pipeline_destroy(ctypes.byref(ptr))  # its operators' destroy callbacks run
        for p in op_ptrs:
            p.value = None
        for held in slots:  # what no destroy callback released (C holds no message of theirs now)
            for obj in list(held.values()):
                _drop(obj)
            held.clear()

    @property
    def handle(self) -> ctypes.c_void_p:
        """The C handle; ValueError once closed."""
        if not self._ptr.value:
            raise ValueError("Pipeline is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        """True once closed."""
        return not self._ptr.value

    def add(self, *ops: Operator) -> Any:
        """Gives operators to the pipeline, which owns them from now on;
        returns the operator (or the tuple of them)."""
        h = self.handle
        if not ops:
            raise TypeError("ops: add takes at least one Operator")
        for i, op in enumerate(ops):
            _check.instance(op, Operator, "ops[%d]" % i)
        for op in ops:
            lib.cw_pipeline_add(h, op.handle)
            op._finalizer.detach()  # the pipeline destroys it now
            op.pipeline = self
            st = op._state
            if st is not None:  # a StageOperator has no Python side
                st.pipeline = weakref.ref(self)
                st.context = self.context
                st.failures = self._failures
                self._states.append(st)
                self._slots.append(st.slots)
            self._op_ptrs.append(op._ptr)
            self._ops[op.name] = op
        return ops[0] if len(ops) == 1 else ops

    def connect(self, src: Union[Operator, str], src_port: str, dst: Union[Operator, str], dst_port: str) -> None:
        """Connects output src_port of operator src to input dst_port of dst
        (operators or their names)."""
        h = self.handle
        lib.cw_pipeline_connect(h, _name(src, "src"), _check.text(src_port, "src_port"), _name(dst, "dst"),
                                _check.text(dst_port, "dst_port"))

    def check(self) -> None:
        """What a run checks first (no driver needed): raises if it would fail."""
        lib.cw_pipeline_check(self.handle)

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        del self._failures[:]
        try:
            fn(self.handle, *args)
        except CuweaveError as err:
            _reraise(err, self._failures)
        finally:
            del self._failures[:]

    def run(self, iterations: int = 1) -> None:
        """Runs `iterations` iterations (0: until stop()). Returns when the
        compute calls have returned, not when the GPU has finished
        (synchronize()). A failing compute stops the run: raises its
        CuweaveError, from the Python exception when it raised one."""
        n = _check.uint64(iterations, "iterations")
        self.handle
        self._running = True
        try:
            self._call(lib.cw_pipeline_run, n)
        finally:
            self._running = False
            if self.closed:  # closed from a compute call: the run destroyed it as it returned
                self._release()

    def synchronize(self) -> None:
        """Waits until the GPU has finished every operator's last compute call's work."""
        lib.cw_pipeline_synchronize(self.handle)

    def stop(self) -> None:
        """Asks a run to end after the iteration in progress (any thread, compute included)."""
        lib.cw_pipeline_stop(self.handle)

    def info(self) -> Dict[str, int]:
        """cw_pipeline_get_info's counters as a dict (iterations, computes,
        skipped, fallbacks, operators, connections, buffers_allocated,
        buffers_reused, peer_copies)."""
        i = _lib.PipelineInfo()
        lib.cw_pipeline_get_info(self.handle, ctypes.byref(i))
        return {n: getattr(i, n) for n, *_ in _lib.PipelineInfo._fields_ if n not in ("reserved", "context")}

    def operator(self, name: str) -> Operator:
        """The Operator named `name` (cw_pipeline_get_operator)."""
        ptr = _get(lib.cw_pipeline_get_operator, self.handle, _check.text(name, "name"))
        for op in self._ops.values():
            if op._ptr.value == ptr:
                return op
        raise KeyError(name)  # not one added from Python

    def port_ptr(self, op: Union[Operator, str], port: str) -> int:
        """The device address of port memory, any port by name
        (cw_pipeline_get_port_ptr)."""
        h = self.handle
        v = ctypes.c_uint64()
        lib.cw_pipeline_get_port_ptr(h, _name(op, "op"), _check.text(port, "port"), ctypes.byref(v))
        return int(v.value)

    def set_trace(self, trace: Optional["Trace"]) -> None:
        """Traces the next runs into trace (a cuweave.Trace; None: stop
        tracing): a host span per compute call, a GPU span per operator on its
        stream (cw_pipeline_set_trace). The pipeline keeps the trace alive."""
        from ._trace import Trace as _Trace
        h = self.handle
        lib.cw_pipeline_set_trace(h, handle_of(trace, _Trace, "trace") if trace is not None else None)
        self._trace = trace

    def make_resident(self, resident: Resident) -> None:
        """Makes the pipeline the workload of a Resident loop
        (cw_pipeline_make_resident): every operator resident=True; their
        computes are captured when the loop builds (an exception there fails
        the build, raised from it). The loop keeps the pipeline alive."""
        h = self.handle
        lib.cw_pipeline_make_resident(h, handle_of(resident, Resident, "resident"))
        resident._parts["workload"] = self
        if not any(f is self._failures for f in resident._failure_lists):
            resident._failure_lists.append(self._failures)

    def make_fused(self, resident: Resident, source: Union[str, bytes], in_flight: int = 1,
                   watchdog: Optional[float] = 5.0, grid_blocks: int = 0, block_threads: int = 0,
                   shared_bytes: int = 0, options: Sequence[str] = ()) -> None:
        """Makes the pipeline a Resident loop's fused kernel in the tile
        dataflow mode (cw_pipeline_make_fused): every operator a
        StageOperator, run in topological order, each connection a
        dependency read as the consumer's input says; port memory set up as
        for make_resident. source: CUDA C++ defining every stage's function;
        in_flight, watchdog, grid_blocks, block_threads, shared_bytes and
        options as Resident.set_dataflow's. A refusal raises
        InvalidArgumentError naming the operator and port; a compile error
        CompileError. The loop keeps the pipeline alive."""
        h = self.handle
        r = handle_of(resident, Resident, "resident")
        src = _check.text_or_bytes(source, "source")
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
        f = _lib.ResidentFused()
        f.source, f.mode, f.in_flight, f.watchdog_ms = src, 1, flight, wd  # mode CW_FUSED_DATAFLOW
        f.grid_blocks, f.block_threads = _check.uint32(grid_blocks, "grid_blocks"), \
            _check.uint32(block_threads, "block_threads")
        f.shared_bytes = _check.uint32(shared_bytes, "shared_bytes")
        c_opts = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        f.options = ctypes.cast(c_opts, ctypes.POINTER(ctypes.c_char_p)) if opts else None
        f.option_count = len(opts)
        lib.cw_pipeline_make_fused(h, r, ctypes.byref(f))
        resident._parts["fused"] = self

    def close(self) -> None:
        """Destroys the pipeline and its operators (from a compute call: the
        run stops and destroys it as it returns). Idempotent."""
        self._finalizer()
        if not self._running:
            self._release()

    def _release(self) -> None:
        # The C operators are gone: so is what C called.
        del self._states[:]
        self._ops.clear()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "<cuweave.Pipeline closed>"
        return "<cuweave.Pipeline %#x device %d, %d operators%s>" % (self._ptr.value or 0, self.context.device,
                                                                     len(self._ops), " running" if self._running else "")
