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

import ctypes
import threading
import weakref

from . import _errors, _lib, _log
from . import (Buffer, Context, CuweaveError, Resident, Stream, _CW_ERROR_INTERNAL, _Callbacks, _get, _new, _reraise,
               _status_of, _typestr)

lib = _lib.lib

PORT_OPTIONAL = 0x1  # CW_PORT_OPTIONAL: compute runs without a message on it
PORT_MANY = 0x2      # CW_PORT_MANY: any number of connections, one message each
_NOT_READY = 8

_ops = _Callbacks()  # key -> _OpState

# Python objects carried as message values: id(obj) -> [obj, holders]. A
# message's value is id(obj); each output port holds its last emitted value
# (a message lives one iteration, the port's next emit is in a later one).
_values = {}
_values_lock = threading.Lock()  # computes on the executor's threads emit at once


def _hold(obj):
    with _values_lock:
        e = _values.get(id(obj))
        if e is None:
            _values[id(obj)] = [obj, 1]
        else:
            e[1] += 1


def _drop(obj):
    with _values_lock:
        e = _values.get(id(obj))
        if e is not None:
            e[1] -= 1
            if e[1] <= 0:
                del _values[id(obj)]


class _OpState:
    """The Python side of one C operator."""

    def __init__(self, name, compute, start, stop):
        self.name = name
        self.compute, self.start, self.stop = compute, start, stop
        self.pipeline = None  # a weakref to its Pipeline, once added
        self.context = None   # the pipeline's Context, once added
        self.failures = []    # (where, exception); the pipeline's list once added
        self.slots = {}       # output port -> the Python value last emitted there
        self.destroyed = False

    def set_slot(self, port, obj):
        old = self.slots.pop(port, None)
        if old is not None:
            _drop(old)
        if obj is not None:
            _hold(obj)
            self.slots[port] = obj

    def release(self):
        for obj in self.slots.values():
            _drop(obj)
        self.slots.clear()


def _where(st, phase):
    return "operator '%s' (%s)" % (st.name, phase)


@_lib.COMPUTE_FN
def _c_compute(io, user):
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


@_lib.START_FN
def _c_start(op, user):
    st = _ops.get(user)
    if st is None:
        return _CW_ERROR_INTERNAL
    try:
        st.start()
        return 0
    except BaseException as exc:  # noqa: BLE001
        st.failures.append((_where(st, "start"), exc))
        return _status_of(exc)


@_lib.STOP_FN
def _c_stop(op, user):
    st = _ops.get(user)
    if st is None:
        return
    try:
        st.stop()
    except BaseException as exc:  # noqa: BLE001
        _log.unraisable(exc, "in the stop callback of operator '%s'" % st.name)


@_lib.DESTROY_FN
def _c_destroy(user):
    st = _ops.pop(user)
    if st is not None:
        st.destroyed = True
        st.release()


def _port_settings(flags=0, bytes=0, dptr=0):
    s = _lib.PortSettings()
    lib.cw_port_settings_default(ctypes.byref(s))
    s.flags, s.bytes, s.dptr = int(flags), int(bytes), int(dptr)
    return s


class Operator:
    """An operator (cw_operator_create): compute(io) called once per
    iteration; optional start() and stop() around each run that computes
    it. inputs / outputs: port names, or (name, {options}) pairs (options
    of add_input / add_output). pool: a StreamPool for its internal and
    named streams (default: the pipeline's). no_internal_stream,
    wait_inputs, resident: cw_operator_settings' booleans.

    Pipeline.add(op) gives it to the pipeline, which then owns it (the
    object stays usable until the pipeline is closed); close() destroys an
    operator never added."""

    def __init__(self, name, compute, inputs=(), outputs=(), start=None, stop=None, pool=None,
                 no_internal_stream=False, wait_inputs=False, resident=False):
        if not callable(compute):
            raise TypeError("compute must be callable")
        self.name = str(name)
        self.pool = pool
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
        s.pool = pool.handle.value if pool is not None else None
        s.no_internal_stream = 1 if no_internal_stream else 0
        s.wait_inputs = 1 if wait_inputs else 0
        s.resident = 1 if resident else 0
        key = _ops.add(st)
        try:
            ptr = _new(lib.cw_operator_create, self.name.encode(), ctypes.byref(ops), ctypes.c_void_p(key),
                       ctypes.byref(s))
        except BaseException:
            _ops.pop(key)  # not made: C will never call it
            raise
        self._state = st  # held here, then by the pipeline too
        self._ptr = ctypes.c_void_p(ptr)
        self.pipeline = None
        self._finalizer = weakref.finalize(self, Operator._free, self._ptr)
        for p in inputs:
            name, opts = (p, {}) if isinstance(p, str) else p
            self.add_input(name, **opts)
        for p in outputs:
            name, opts = (p, {}) if isinstance(p, str) else p
            self.add_output(name, **opts)

    @staticmethod
    def _free(ptr):
        if ptr.value:
            lib.cw_operator_destroy(ctypes.byref(ptr))  # calls its destroy callback

    @property
    def handle(self):
        if not self._ptr.value:
            raise ValueError("operator '%s' is closed (or its pipeline is)" % self.name)
        return self._ptr

    @property
    def closed(self):
        return not self._ptr.value

    def add_input(self, name, optional=False, many=False, bytes=0, dptr=0):
        """Declares an input port (before the operator joins a pipeline):
        optional (PORT_OPTIONAL), many (PORT_MANY); bytes or dptr declare port
        memory (resident pipelines, docs/pipelines.md)."""
        flags = (PORT_OPTIONAL if optional else 0) | (PORT_MANY if many else 0)
        s = _port_settings(flags, bytes, dptr)
        lib.cw_operator_add_input(self.handle, str(name).encode(), ctypes.byref(s))

    def add_output(self, name, bytes=0, dptr=0):
        """Declares an output port (before the operator joins a pipeline)."""
        s = _port_settings(0, bytes, dptr)
        lib.cw_operator_add_output(self.handle, str(name).encode(), ctypes.byref(s))

    def close(self):
        """Destroys an operator that no pipeline owns (a pipeline's goes with
        it: then this only lets go of the object). Idempotent."""
        if self.pipeline is None:
            self._finalizer()

    def __repr__(self):
        return "<cuweave.Operator %r%s>" % (self.name, " closed" if self.closed else "")


class Message:
    """A message received in compute: value (the Python object emitted, or
    None), pointer (the raw value pointer, an int: what a C operator
    emitted), buffer (a Buffer borrowed for the compute call, or None),
    stream (the Stream its data was produced on, borrowed, or None)."""

    __slots__ = ("value", "pointer", "buffer", "stream")

    def __init__(self, value, pointer, buffer, stream):
        self.value, self.pointer, self.buffer, self.stream = value, pointer, buffer, stream

    def __repr__(self):
        return "<cuweave.Message value=%r pointer=%#x buffer=%r stream=%r>" % (self.value, self.pointer,
                                                                               self.buffer, self.stream)


class IO:
    """The compute call's cw_io: valid during the call only (then every call
    raises ValueError), and so are the streams, buffers and messages it
    gives (closed when compute returns: buffer.keep() keeps a buffer)."""

    def __init__(self, ptr, state):
        self._ptr = ctypes.c_void_p(ptr)
        self._state = state
        self._borrowed = []

    def _close(self):
        self._ptr.value = None
        for obj in self._borrowed:
            obj._ptr.value = None
        del self._borrowed[:]

    @property
    def handle(self):
        if not self._ptr.value:
            raise ValueError("an IO is valid only inside the compute call it was given to")
        return self._ptr

    @property
    def pipeline(self):
        """The Pipeline running the call (Pipeline.stop() may be called from compute)."""
        return self._state.pipeline() if self._state.pipeline is not None else None

    @property
    def name(self):
        """The operator's name."""
        return self._state.name

    def _lend(self, obj):
        self._borrowed.append(obj)
        return obj

    def _context_of(self, ctx_ptr):
        ctx = self._state.context
        if ctx is not None and ctx._ptr.value == ctx_ptr:
            return ctx
        owner = self.pipeline
        return self._lend(Context(_ptr=ctx_ptr, _owner=owner if owner is not None else self))

    def _stream(self, ptr):
        if not ptr:
            return None
        i = _lib.StreamInfo()
        lib.cw_stream_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        return self._lend(Stream(self._context_of(i.context), _ptr=ptr, _borrowed=True))

    def _buffer(self, ptr, stream, shape=None, dtype="uint8"):
        if not ptr:
            return None
        i = _lib.BufferInfo()
        lib.cw_buffer_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        return self._lend(Buffer._wrap(ptr, self._context_of(i.context), stream,
                                       shape if shape is not None else (i.bytes,), dtype, owned=False))

    def _message(self, m):
        e = _values.get(m.value) if m.value else None
        stream = self._stream(m.stream)
        return Message(e[0] if e is not None else None, m.value or 0, self._buffer(m.buffer, stream), stream)

    def info(self):
        """cw_io_get_info: {"iteration": the iteration (in a resident
        capture: the copy of the iteration), "name": the operator's name,
        "resident_ctl": in a resident capture the loop's device block to pass
        to kernels (0 under Pipeline.run)}."""
        i = _lib.IoInfo()
        lib.cw_io_get_info(self.handle, ctypes.byref(i))
        return {"iteration": i.iteration, "name": (i.name or b"").decode(), "resident_ctl": i.resident_ctl}

    @property
    def iteration(self):
        return self.info()["iteration"]

    def receive(self, port):
        """The first message on input `port`, or None when none arrived
        this iteration (an optional port; always in a resident capture)."""
        m = _lib.Message()
        st = lib.cw_io_receive(self.handle, str(port).encode(), ctypes.byref(m))
        if st == _NOT_READY:
            return None
        if st != 0:
            raise _errors.from_status(st, _lib.last_error())
        return self._message(m)

    def receive_many(self, port):
        """Every message on the port (PORT_MANY: one per connection that sent
        one), each with the stream it was produced on, with no ordering (a
        buffer from another device is moved first)."""
        n = ctypes.c_size_t()
        name = str(port).encode()
        lib.cw_io_receive_many(self.handle, name, None, 0, ctypes.byref(n))
        arr = (_lib.Message * max(n.value, 1))()
        lib.cw_io_receive_many(self.handle, name, arr, n.value, ctypes.byref(n))
        return [self._message(arr[i]) for i in range(min(n.value, len(arr)))]

    def receive_stream(self, port=None):
        """The operator's internal stream, ordered (on the GPU) behind the
        stream of every message on `port` (None: no ordering, for sources),
        its context made current on this thread; the outputs carry it. The
        same stream for every port and every compute call (docs/pipelines.md,
        the stream rules)."""
        return self._stream(_get(lib.cw_io_receive_stream, self.handle, None if port is None else str(port).encode()))

    def stream(self, name):
        """A named extra stream from the operator's pool, the same for the
        same name in every call (cw_io_get_stream); carried by no output
        unless set with set_output_stream."""
        return self._stream(_get(lib.cw_io_get_stream, self.handle, str(name).encode()))

    def set_output_stream(self, port, stream):
        """The stream output `port` carries in this call (None: none)."""
        lib.cw_io_set_output_stream(self.handle, str(port).encode(), stream.handle if stream is not None else None)

    def emit(self, port, value=None, buffer=None, pointer=None):
        """Emits a message on output `port`, delivered to every connected
        input when compute returns: value (any Python object; the receiver's
        Message.value is the same object; kept alive until the port's next
        emit), or pointer (a raw address, for C operators), and buffer (a
        Buffer; the message holds a reference)."""
        if value is not None and pointer is not None:
            raise TypeError("emit takes a value or a pointer, not both")
        st = self._state
        raw = id(value) if value is not None else (int(pointer) if pointer is not None else None)
        if value is not None:
            _hold(value)  # held while C may deliver it: then by the port's slot
        try:
            lib.cw_io_emit(self.handle, str(port).encode(), ctypes.c_void_p(raw) if raw else None,
                           buffer.handle if buffer is not None else None)
            st.set_slot(str(port), value)
        finally:
            if value is not None:
                _drop(value)

    def alloc(self, shape, dtype="uint8"):
        """A Buffer of `shape` elements of `dtype` on the operator's internal
        stream (cw_io_alloc: from the pipeline's cache), borrowed for the
        call: emit it, or keep() it to hold it longer."""
        shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        count = 1
        for n in shape:
            count *= n
        nbytes = count * int(_typestr(dtype)[2:])
        ptr = _new(lib.cw_io_alloc, self.handle, nbytes)
        stream = self._stream(_get(lib.cw_io_receive_stream, self.handle, None))
        return self._buffer(ptr, stream, shape, dtype)

    def port_ptr(self, port):
        """The device address of the port's memory (cw_io_get_port_ptr)."""
        v = ctypes.c_uint64()
        lib.cw_io_get_port_ptr(self.handle, str(port).encode(), ctypes.byref(v))
        return v.value


def _name(op):
    return op.name if isinstance(op, Operator) else str(op)


class Pipeline:
    """A pipeline of operators on a Context (cw_pipeline_create): threads
    (executor threads: 1 runs every compute on the thread of run()),
    max_in_flight (how many iterations the GPU may lag), pool (the
    StreamPool of operators that have none). add(), connect(), then run().
    close() (or its finalizer) destroys it with its operators; closing it
    from a compute call stops the run, which destroys it as it returns."""

    def __init__(self, context, threads=1, max_in_flight=4, pool=None):
        s = _lib.PipelineSettings()
        lib.cw_pipeline_settings_default(ctypes.byref(s))
        s.threads, s.max_in_flight = int(threads), int(max_in_flight)
        s.pool = pool.handle.value if pool is not None else None
        self._ptr = ctypes.c_void_p(_new(lib.cw_pipeline_create, context.handle, ctypes.byref(s)))
        self.context = context
        self.pool = pool
        self._keep = (context, pool)
        self._states = []    # the operators' Python sides: alive as long as the pipeline
        self._op_ptrs = []   # their handles, closed when the pipeline goes
        self._ops = {}       # name -> Operator
        self._failures = []  # (where, exception) raised by callbacks during a call
        self._running = False
        self._finalizer = weakref.finalize(self, Pipeline._free, self._ptr, self._op_ptrs)

    @staticmethod
    def _free(ptr, op_ptrs):
        if ptr.value:
            lib.cw_pipeline_destroy(ctypes.byref(ptr))  # its operators' destroy callbacks run
        for p in op_ptrs:
            p.value = None

    @property
    def handle(self):
        if not self._ptr.value:
            raise ValueError("Pipeline is closed")
        return self._ptr

    @property
    def closed(self):
        return not self._ptr.value

    def add(self, *ops):
        """Gives operators to the pipeline, which owns them from now on."""
        for op in ops:
            lib.cw_pipeline_add(self.handle, op.handle)
            op._finalizer.detach()  # the pipeline destroys it now
            op.pipeline = self
            st = op._state
            st.pipeline = weakref.ref(self)
            st.context = self.context
            st.failures = self._failures
            self._states.append(st)
            self._op_ptrs.append(op._ptr)
            self._ops[op.name] = op
        return ops[0] if len(ops) == 1 else ops

    def connect(self, src, src_port, dst, dst_port):
        """Connects output src_port of operator src to input dst_port of dst
        (operators or their names)."""
        lib.cw_pipeline_connect(self.handle, _name(src).encode(), str(src_port).encode(), _name(dst).encode(),
                                str(dst_port).encode())

    def check(self):
        """What a run checks first (no driver needed): raises if it would fail."""
        lib.cw_pipeline_check(self.handle)

    def _call(self, fn, *args):
        del self._failures[:]
        try:
            fn(self.handle, *args)
        except CuweaveError as err:
            _reraise(err, self._failures)
        finally:
            del self._failures[:]

    def run(self, iterations=1):
        """Runs `iterations` iterations (0: until stop()). Returns when the
        compute calls have returned, not when the GPU has finished
        (synchronize()). A failing compute stops the run: raises its
        CuweaveError, from the Python exception when it raised one."""
        self._running = True
        try:
            self._call(lib.cw_pipeline_run, int(iterations))
        finally:
            self._running = False
            if self.closed:  # closed from a compute call: the run destroyed it as it returned
                self._release()

    def synchronize(self):
        """Waits until the GPU has finished every operator's last compute call's work."""
        lib.cw_pipeline_synchronize(self.handle)

    def stop(self):
        """Asks a run to end after the iteration in progress (any thread, compute included)."""
        lib.cw_pipeline_stop(self.handle)

    def info(self):
        """cw_pipeline_get_info's counters as a dict (iterations, computes,
        skipped, fallbacks, operators, connections, buffers_allocated,
        buffers_reused, peer_copies)."""
        i = _lib.PipelineInfo()
        lib.cw_pipeline_get_info(self.handle, ctypes.byref(i))
        return {n: getattr(i, n) for n, _ in _lib.PipelineInfo._fields_ if n not in ("reserved", "context")}

    def operator(self, name):
        """The Operator named `name` (cw_pipeline_get_operator)."""
        ptr = _get(lib.cw_pipeline_get_operator, self.handle, str(name).encode())
        for op in self._ops.values():
            if op._ptr.value == ptr:
                return op
        raise KeyError(name)  # not one added from Python

    def port_ptr(self, op, port):
        """The device address of port memory, any port by name
        (cw_pipeline_get_port_ptr)."""
        v = ctypes.c_uint64()
        lib.cw_pipeline_get_port_ptr(self.handle, _name(op).encode(), str(port).encode(), ctypes.byref(v))
        return v.value

    def set_trace(self, trace):
        """Traces the next runs into trace (a cuweave.Trace; None: stop
        tracing): a host span per compute call, a GPU span per operator on its
        stream (cw_pipeline_set_trace). The pipeline keeps the trace alive."""
        lib.cw_pipeline_set_trace(self.handle, trace.handle if trace is not None else None)
        self._trace = trace

    def make_resident(self, resident):
        """Makes the pipeline the workload of a Resident loop
        (cw_pipeline_make_resident): every operator resident=True; their
        computes are captured when the loop builds (an exception there fails
        the build, raised from it). The loop keeps the pipeline alive."""
        if not isinstance(resident, Resident):
            raise TypeError("make_resident takes a Resident")
        lib.cw_pipeline_make_resident(self.handle, resident.handle)
        resident._parts["workload"] = self
        if not any(f is self._failures for f in resident._failure_lists):
            resident._failure_lists.append(self._failures)

    def close(self):
        """Destroys the pipeline and its operators (from a compute call: the
        run stops and destroys it as it returns). Idempotent."""
        self._finalizer()
        if not self._running:
            self._release()

    def _release(self):
        # The C operators are gone: so is what C called.
        del self._states[:]
        self._ops.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
