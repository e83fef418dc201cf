# SPDX-License-Identifier: BSD-2-Clause
"""cuweave for Python: a pure-Python package over ctypes.

Handles are freed by weakref.finalize (children keep their parents alive, so
children go first); close() is idempotent; objects are context managers.
C destroys never fail; what can (Resident.tear_down, Lease.release,
Fork.join) raises when called, and its finalizer reports through the log
callback (set_log_callback) instead. Failing calls raise a subclass of
CuweaveError generated from the C status list (NoDriverError,
PoolExhaustedError, ..., see cuweave.errors()).

Covers the whole C API but cw_buffer_get_ptr (Buffer.ptr reads
cw_buffer_get_info; cuweave._lib.UNBOUND): library and devices, the log callback, contexts,
green partitions, streams (with the __cuda_stream__ protocol) and forks,
stream pools, leases and named streams, futures (awaitable with asyncio
through their eventfd; callbacks), timers, traces (timelines), graphs, NVRTC programs, modules
and kernels, the GPU-resident loop, device buffers and host memory,
operators and pipelines with a compute in Python (cuweave/_flow.py), and
several devices: device groups, peer access and copies, and NCCL
collectives (Comm).
"""

import asyncio
import collections
import ctypes
import enum
import os
import weakref

from . import _errors, _lib, _log
from ._lib import (COMM_ID_BYTES, BufferInfo, CommBootstrapSettings, CommId, CommInfo, DeviceGroupInfo, PartitionCaps, Header, LaunchConfig, PoolSettings, PoolInfo,
                   ProgramSettings, ResidentFused, ResidentInfo, ResidentSettings, StreamSettings, last_error, lib)
from ._log import LogLevel

LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG = LogLevel.ERROR, LogLevel.WARNING, LogLevel.INFO, LogLevel.DEBUG

CuweaveError = _errors.CuweaveError

HOST_FUNC = 0
WRITE_VALUE = 1
EVENT = 2
POOL_LEASE, POOL_ROUND_ROBIN, POOL_SINGLE = 0, 1, 2
CAPTURE_GLOBAL, CAPTURE_THREAD_LOCAL, CAPTURE_RELAXED = 0, 1, 2
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2
SLEEP_FIXED, SLEEP_ADAPTIVE = 0, 1
GATE_NODE, GATE_KERNELS, GATE_AUTO, GATE_BEGIN_END = 0, 1, 2, 3
OVERLAP_AUTO = -1  # cw_resident_settings.overlap: decided at the build (the default)
(FALLBACK_NONE, FALLBACK_NODE, FALLBACK_NO_CTL, FALLBACK_DRIVER, FALLBACK_DEVICE, FALLBACK_CODE,
 FALLBACK_SETTING) = range(7)


def errors():
    """{cw_status code: exception class}."""
    return _errors.classes()


_INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1


def _timeout_us(timeout):
    """Seconds (None or negative: no limit) as the int64_t microseconds of
    the C calls (negative: no limit). A value too large for them is no limit,
    never a wrapped one (ctypes would keep the low 64 bits)."""
    if timeout is None or timeout < 0:
        return -1
    if timeout != timeout:
        raise ValueError("timeout is NaN")
    us = timeout * 1e6
    return _INT64_MAX if us >= _INT64_MAX else int(us)


def _timeout_ms(timeout):
    """Seconds (None: the longest wait) as the uint32_t milliseconds of the
    resident loop's calls: clamped to 0 .. 2^32 - 1 ms (about 49.7 days),
    never wrapped (ctypes would keep the low 32 bits)."""
    if timeout is None:
        return _UINT32_MAX
    if timeout != timeout:
        raise ValueError("timeout is NaN")
    ms = timeout * 1000
    return 0 if ms <= 0 else _UINT32_MAX if ms >= _UINT32_MAX else int(ms)


def error_class(name):
    """The exception class of a C status name, e.g. 'CW_ERROR_NO_DRIVER'."""
    for cls in _errors.classes().values():
        if cls.name == name:
            return cls
    raise KeyError(name)


def _unpack(v):
    return ((v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF)


def version():
    """The loaded C library's release version, (major, minor, patch)
    (cw_version: no driver, NVRTC or NCCL is loaded to answer)."""
    return _unpack(lib.cw_version())


def abi_version():
    """The C library's ABI version, (major, minor, patch); the major is the
    soname's number (libcuweave.so.1)."""
    return _unpack(versions()["api"])


def library():
    """Where the C library was loaded from: (where, path), where one of
    "CUWEAVE_LIBRARY", "package", "source tree", "find_library", "system"
    (cuweave._lib.candidates() has the order)."""
    return _lib.where, _lib.path


def set_log_callback(fn, max_level=LogLevel.WARNING):
    """Installs fn(level, message) as the library's log callback
    (cw_log_set_callback), process-wide: level a LogLevel, message a str;
    messages above max_level are not delivered; None removes it. Called on
    the thread that logged (the library's own threads included), while no
    cuweave lock is held; an exception it raises goes to
    sys.unraisablehook. Failures in finalizers (a resident loop abandoned by
    its destroy, a lease that could not be given back) arrive here at
    LOG_ERROR. Returns the previous (fn, max_level)."""
    return _log.set_callback(fn, max_level)


def log_to_logging(max_level=LogLevel.WARNING, logger=None):
    """Sends the library's log to Python's logging (the logger "cuweave", or
    the one given): LOG_ERROR as logging.ERROR, ..., LOG_DEBUG as DEBUG."""
    import logging
    logger = logger or logging.getLogger("cuweave")
    levels = {LogLevel.ERROR: logging.ERROR, LogLevel.WARNING: logging.WARNING, LogLevel.INFO: logging.INFO,
              LogLevel.DEBUG: logging.DEBUG}
    return set_log_callback(lambda level, message: logger.log(levels.get(level, logging.ERROR), "%s", message),
                            max_level)


# The package's version: the C library's release it is written for
# (pyproject.toml says the same; tests check both against version.h and
# against the loaded library's cw_get_versions()).
__version__ = "0.2.0"


def init():
    """Loads and initialises the CUDA driver (raises NoDriverError, ...)."""
    lib.cw_init()


def device_count():
    n = ctypes.c_int()
    lib.cw_device_count(ctypes.byref(n))
    return n.value


def versions():
    """The versions of cuweave (release and ABI, packed), the CUDA driver,
    NVRTC and NCCL, as a dict; 0 for a library that is absent."""
    v = _lib.Versions()
    lib.cw_get_versions(ctypes.byref(v))
    out = {name: getattr(v, name) for name, _ in v._fields_ if name != "reserved"}
    out["builtin_origin"] = (v.builtin_origin or b"").decode("utf-8", "replace")
    return out


def driver_version():
    """The CUDA driver's version (13000 for 13.0); 0 without a driver."""
    return versions()["driver"]


def device_info(device=0):
    """What the driver says of a device (cw_device_get_info), as a dict: name,
    cc (major, minor), sm_count, total_memory, uuid (bytes), pci (domain,
    bus, device), and the other fields of cw_device_info by their names."""
    i = _lib.DeviceInfo()
    lib.cw_device_get_info(int(device), ctypes.byref(i))
    out = {name: getattr(i, name) for name, _ in _lib.DeviceInfo._fields_ if name not in ("reserved", "uuid", "name")}
    out["name"] = i.name.decode("utf-8", "replace")
    out["uuid"] = bytes(i.uuid)
    out["cc"] = (i.cc_major, i.cc_minor)
    out["pci"] = (i.pci_domain, i.pci_bus, i.pci_device)
    return out


def driver_has(feature):
    """Whether the driver has an optional feature (cw_driver_has):
    FEATURE_GREEN_CONTEXTS, FEATURE_CONDITIONAL_NODES, ... False without a driver."""
    return bool(lib.cw_driver_has(int(feature)))


(FEATURE_GREEN_CONTEXTS, FEATURE_CONDITIONAL_NODES, FEATURE_LIBRARY_API, FEATURE_STREAM_GET_DEVICE,
 FEATURE_CTX_FROM_STREAM, FEATURE_NVRTC) = range(6)


def clear_error():
    """Resets the calling thread's error detail (cw_clear_error)."""
    lib.cw_clear_error()


class _Handle:
    """A C handle with its destroy function, freed once by finalize/close."""

    _destroy = None

    def __init__(self, ptr, keep=()):
        self._ptr = ctypes.c_void_p(ptr)
        self._keep = keep  # parents that must outlive this handle
        self._finalizer = weakref.finalize(self, type(self)._free, self._destroy, self._ptr)

    def _borrow(self, ptr, keep):
        """Holds a handle someone else owns (a pool's stream, a partition's
        context): never destroyed here; `keep` stays alive as long as this."""
        self._ptr = ctypes.c_void_p(ptr)
        self._keep = keep
        self._finalizer = weakref.finalize(self, lambda: None)

    @staticmethod
    def _free(destroy, ptr):
        if ptr.value:
            destroy(ctypes.byref(ptr))

    @property
    def handle(self):
        if not self._ptr.value:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._ptr

    @property
    def closed(self):
        return not self._ptr.value

    def close(self):
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _owner_key(owner):
    key = owner if isinstance(owner, int) else id(owner)
    if not key:
        raise ValueError("an owner key of 0 (NULL)")
    return key


def _new(fn, *args):
    """Calls a cw_x_create-style function: the out-parameter comes first."""
    out = ctypes.c_void_p()
    fn(ctypes.byref(out), *args)
    return out.value


def _get(fn, *args):
    """Calls a getter-style function: the out-parameter comes last."""
    out = ctypes.c_void_p()
    fn(*args, ctypes.byref(out))
    return out.value


class Context(_Handle):
    """A device's primary context (Context(0)) or, with Context.wrap, a
    CUcontext the caller owns (given as an int)."""

    _destroy = lib.cw_context_destroy

    def __init__(self, device=0, _ptr=None, _owner=None):
        if _owner is not None:  # a partition's context: borrowed from its group
            self._borrow(_ptr, (_owner,))
            return
        super().__init__(_ptr if _ptr is not None else _new(lib.cw_context_create, device))

    @classmethod
    def wrap(cls, cu_context):
        return cls(_ptr=_new(lib.cw_context_wrap, ctypes.c_void_p(cu_context)))

    def _info(self):
        i = _lib.ContextInfo()
        lib.cw_context_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def device(self):
        return self._info().device

    @property
    def cu_context(self):
        return self._info().handle or 0

    def synchronize(self):
        lib.cw_context_synchronize(self.handle)

    def enable_peer(self, peer):
        """Lets this context's device access `peer`'s device's memory (one
        direction; its buffer pool included). Idempotent: enabling a pair
        twice is fine; NotSupportedError where the topology does not allow it."""
        lib.cw_context_enable_peer(self.handle, peer.handle)


class Stream(_Handle):
    """A non-blocking stream on a Context; Stream.wrap adopts a CUstream (an
    int, or any object with __cuda_stream__) without owning it."""

    _destroy = lib.cw_stream_destroy

    def __init__(self, context, priority=0, blocking=False, _ptr=None, _borrowed=False):
        if _ptr is None:
            s = StreamSettings()
            lib.cw_stream_settings_default(ctypes.byref(s))
            s.priority = priority
            s.flags = 1 if blocking else 0
            _ptr = _new(lib.cw_stream_create, context.handle, ctypes.byref(s))
        if _borrowed:  # a pool's stream
            self._borrow(_ptr, (context,))
        else:
            super().__init__(_ptr, keep=(context,))
        self.context = context

    @classmethod
    def wrap(cls, context, stream):
        """Adopts a CUstream: an int, an object with __cuda_stream__ (CuPy,
        cuda.core), or one with a cuda_stream attribute (torch.cuda.Stream)."""
        if hasattr(stream, "__cuda_stream__"):
            version, stream = stream.__cuda_stream__()
        elif hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        return cls(context, _ptr=_new(lib.cw_stream_wrap, context.handle, ctypes.c_void_p(stream)))

    @property
    def cu_stream(self):
        i = _lib.StreamInfo()
        lib.cw_stream_get_info(self.handle, ctypes.byref(i))
        return i.handle or 0

    def __cuda_stream__(self):
        """The stream protocol CuPy, PyTorch and cuda.core read: (0, CUstream)."""
        return (0, self.cu_stream)

    def wait(self, other):
        """Work enqueued here from now on waits for `other`'s work so far."""
        lib.cw_stream_wait(self.handle, other.handle)

    def synchronize(self):
        lib.cw_stream_synchronize(self.handle)

    def capture(self, mode=CAPTURE_THREAD_LOCAL, into=None):
        """with stream.capture() as cap: ... enqueue work ...; then cap.graph.
        The work is recorded into a Graph instead of running: a new one, or
        `into` (a Graph, such as a conditional node's body), which cap.graph
        is then."""
        return _Capture(self, mode, into)

    def capture_state(self):
        """CAPTURE_NONE, CAPTURE_ACTIVE or CAPTURE_INVALIDATED (cw_capture_get_state)."""
        v = ctypes.c_int()
        lib.cw_capture_get_state(self.handle, ctypes.byref(v))
        return v.value

    def fork(self):
        """A Fork: its .stream runs work after this stream's work so far
        (cw_stream_fork); join() it to order this stream's later work after
        it and give it back. `with s.fork() as child:` joins at the end."""
        return Fork(self, _new(lib.cw_stream_fork, self.handle))

    def info(self):
        """cw_stream_get_info as a dict (handle, device, priority, flags,
        owned, from_pool, is_null)."""
        i = _lib.StreamInfo()
        lib.cw_stream_get_info(self.handle, ctypes.byref(i))
        return {"handle": i.handle or 0, "device": i.device, "priority": i.priority, "flags": i.flags,
                "owned": bool(i.owned), "from_pool": bool(i.from_pool), "is_null": bool(i.is_null)}

    def done(self):
        st = lib.cw_stream_query(self.handle)
        if st == 0:
            return True
        if st == 8:  # CW_ERROR_NOT_READY
            return False
        raise _errors.from_status(st, last_error())


class _GiveBack:
    """A borrowed stream that must be given back (a lease, a fork): give_back()
    (explicit, raises on failure) or, if forgotten, the finalizer, which
    reports a failure through the log callback instead of raising it. The
    stream object is closed either way."""

    _what = "giving a stream back"

    def __init__(self, stream):
        self.stream = stream
        self._ptr = stream._ptr  # shared: the give-back nulls it, closing the stream
        self._finalizer = weakref.finalize(self, type(self)._finalize, self._args(), self._ptr)

    def _args(self):
        raise NotImplementedError

    @staticmethod
    def _call(args, ptr):
        raise NotImplementedError

    @classmethod
    def _finalize(cls, args, ptr):
        try:
            cls._call(args, ptr)
        except CuweaveError as exc:
            _log.report_failure(exc, cls._what)
        finally:
            ptr.value = None

    def _give_back(self):
        if self._finalizer.detach() is None:
            return  # given back already
        try:
            type(self)._call(self._args(), self._ptr)
        finally:
            self._ptr.value = None

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        self._give_back()


class Lease(_GiveBack):
    """A stream leased from a StreamPool (.stream); given back by release() /
    close() or leaving a with-block (which raise if the pool refuses), else by
    its finalizer (which reports a refusal through the log callback)."""

    _what = "giving a lease back (cw_stream_pool_release)"

    def __init__(self, pool, ptr):
        self.pool = pool
        super().__init__(Stream(pool.context, _ptr=ptr, _borrowed=True))

    def _args(self):
        return self.pool

    @staticmethod
    def _call(pool, ptr):
        if ptr.value and not pool.closed:
            lib.cw_stream_pool_release(pool.handle, ctypes.byref(ptr))

    def release(self):
        self._give_back()

    close = release


class Fork(_GiveBack):
    """A stream forked from a parent (Stream.fork, cw_stream_fork): work on
    .stream runs after the parent's work so far. join() (or leaving a
    with-block) makes the parent's later work wait for it and gives the stream
    back (cw_stream_join, raises on failure); a fork never joined is joined by
    its finalizer, which reports a failure through the log callback."""

    _what = "joining a forked stream (cw_stream_join)"

    def __init__(self, parent, ptr):
        self.parent = parent
        super().__init__(Stream(parent.context, _ptr=ptr, _borrowed=True))

    def _args(self):
        return self.parent

    @staticmethod
    def _call(parent, ptr):
        if ptr.value and not parent.closed:
            lib.cw_stream_join(parent.handle, ctypes.byref(ptr))

    def join(self):
        self._give_back()

    close = join


class StreamPool(_Handle):
    _destroy = lib.cw_stream_pool_destroy

    def __init__(self, context, mode=POOL_LEASE, reserved=1, max_streams=0, priority=0):
        s = PoolSettings()
        lib.cw_stream_pool_settings_default(ctypes.byref(s))
        s.mode, s.reserved_streams, s.max_streams, s.priority = mode, reserved, max_streams, priority
        super().__init__(_new(lib.cw_stream_pool_create, context.handle, ctypes.byref(s)), keep=(context,))
        self.context = context

    def acquire(self, timeout_us=0):
        """A lease; waits up to timeout_us for a release when the pool is
        exhausted (0: PoolExhaustedError at once; negative: no limit)."""
        return Lease(self, _new(lib.cw_stream_pool_acquire, self.handle, ctypes.c_int64(timeout_us)))

    def next(self):
        return Stream(self.context, _ptr=_get(lib.cw_stream_pool_get_next, self.handle), _borrowed=True)

    def acquire_named(self, owner, name):
        """The stream named `name` of `owner` (cw_stream_pool_acquire_named):
        the same stream for the same (owner, name) until release_owner(owner).
        owner: an int key, or any object (its id() is the key: keep it alive
        while its streams are in use). The stream is borrowed from the pool."""
        ptr = _new(lib.cw_stream_pool_acquire_named, self.handle, ctypes.c_void_p(_owner_key(owner)),
                   str(name).encode())
        return Stream(self.context, _ptr=ptr, _borrowed=True)

    def release_owner(self, owner):
        """Gives back every named stream of `owner`; returns how many."""
        n = ctypes.c_size_t()
        lib.cw_stream_pool_release_owner(self.handle, ctypes.c_void_p(_owner_key(owner)), ctypes.byref(n))
        return n.value

    def stats(self):
        st = PoolInfo()
        lib.cw_stream_pool_get_info(self.handle, ctypes.byref(st))
        return {"mode": st.mode, "created": st.created, "leased": st.leased, "idle": st.idle, "named": st.named}


class Future(_Handle):
    """Completes when the work enqueued on `stream` so far is done.
    `await future` works in asyncio (through the future's eventfd)."""

    _destroy = lib.cw_future_destroy

    def __init__(self, stream, kind=WRITE_VALUE, _ptr=None, _context=None):
        if _ptr is None:
            _ptr, _context = _new(lib.cw_future_create, stream.handle, kind), stream.context
        super().__init__(_ptr, keep=(_context,))
        self._callbacks = []  # keys of _future_callbacks this future set
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, Future._free_future, self._ptr, self._callbacks)

    @staticmethod
    def _free_future(ptr, keys):
        if ptr.value:
            lib.cw_future_destroy(ctypes.byref(ptr))
        for k in keys:  # a callback that never ran (its marker never completed)
            _future_callbacks.pop(k, None)

    @classmethod
    def when_all(cls, streams, kind=WRITE_VALUE):
        """A future that completes when every stream (one context) has finished
        the work enqueued on it so far (cw_future_when_all)."""
        streams = list(streams)
        if not streams:
            raise ValueError("when_all of no stream")
        arr = (ctypes.c_void_p * len(streams))(*[s.handle.value for s in streams])
        return cls(None, _ptr=_new(lib.cw_future_when_all, arr, len(streams), kind), _context=streams[0].context)

    def set_spin(self, spin_us):
        """How long a waiter spins before sleeping, any kind (default 200 us)."""
        lib.cw_future_set_spin(self.handle, int(spin_us))

    def add_done_callback(self, fn):
        """Calls fn(error) once when the future completes (cw_future_set_callback;
        one callback per future): error is None, or the CuweaveError of a
        device fault. It runs on the driver's callback thread (HOST_FUNC) or
        cuweave's watcher thread, or at once on this thread when already
        complete; it must not wait or enqueue work (future.h says what it may
        do). An exception it raises goes to sys.unraisablehook."""
        key = next(_future_keys)
        _future_callbacks[key] = fn
        self._callbacks.append(key)
        try:
            lib.cw_future_set_callback(self.handle, _c_future_done, ctypes.c_void_p(key))
        except BaseException:
            _future_callbacks.pop(key, None)
            raise

    def poll(self):
        st = lib.cw_future_poll(self.handle)
        if st == 0:
            return True
        if st == 8:  # CW_ERROR_NOT_READY
            return False
        raise _errors.from_status(st, last_error())

    def wait(self, timeout=None):
        """Blocks until complete; timeout in seconds (None: no limit)."""
        lib.cw_future_wait(self.handle, _timeout_us(timeout))

    def rearm(self, stream):
        lib.cw_future_rearm(self.handle, stream.handle)

    def fileno(self):
        fd = ctypes.c_int()
        lib.cw_future_get_fd(self.handle, ctypes.byref(fd))
        return fd.value

    def __await__(self):
        return self._wait_async().__await__()

    async def _wait_async(self):
        if self.poll():
            return None
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.fileno()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            if not self.poll():
                await ready
        finally:
            loop.remove_reader(fd)
        self.poll()  # raises a device error, if any
        return None


_future_callbacks = {}
_future_keys = __import__("itertools").count(1)


@_lib.FUTURE_FN
def _c_future_done(user, future, status):
    fn = _future_callbacks.pop(user or 0, None)
    if fn is None:
        return
    try:
        fn(None if status == 0 else _errors.from_status(status, {}))
    except BaseException as exc:  # noqa: BLE001 (nothing may cross into C)
        _log.unraisable(exc, "in a cuweave future callback %r" % (fn,))


class Timer(_Handle):
    _destroy = lib.cw_timer_destroy

    def __init__(self, context):
        super().__init__(_new(lib.cw_timer_create, context.handle), keep=(context,))

    def start(self, stream):
        lib.cw_timer_start(self.handle, stream.handle)

    def stop(self, stream):
        lib.cw_timer_stop(self.handle, stream.handle)

    def elapsed_ms(self):
        ms = ctypes.c_float()
        lib.cw_timer_get_elapsed_ms(self.handle, ctypes.byref(ms))
        return ms.value


class Trace(_Handle):
    """A timeline (cuweave/trace.h, docs/tracing.md): GPU spans on streams
    (begin/end, or `with trace.span(stream, name):`), host spans on the
    calling thread (host_begin/host_end, or `with trace.host_span(name):`),
    a Pipeline's operators (Pipeline.set_trace), a Resident loop's stages
    (record_resident). write(path) exports Chrome trace-event JSON, which
    ui.perfetto.dev opens and tools/trace_plot.py renders."""

    _destroy = lib.cw_trace_destroy

    def __init__(self, max_spans=0):
        s = _lib.TraceSettings()
        lib.cw_trace_settings_default(ctypes.byref(s))
        s.max_spans = int(max_spans)
        super().__init__(_new(lib.cw_trace_create, ctypes.byref(s)))

    def name_stream(self, stream, name):
        lib.cw_trace_name_stream(self.handle, stream.handle, str(name).encode())

    def name_thread(self, name):
        lib.cw_trace_name_thread(self.handle, str(name).encode())

    def begin(self, stream, name):
        lib.cw_trace_begin(self.handle, stream.handle, str(name).encode())

    def end(self, stream):
        lib.cw_trace_end(self.handle, stream.handle)

    def host_begin(self, name):
        lib.cw_trace_host_begin(self.handle, str(name).encode())

    def host_end(self):
        lib.cw_trace_host_end(self.handle)

    class _Span:
        def __init__(self, enter, leave):
            self._enter, self._leave = enter, leave

        def __enter__(self):
            self._enter()
            return self

        def __exit__(self, *exc):
            self._leave()
            return False

    def span(self, stream, name):
        """A GPU span on stream around the with block's work."""
        return Trace._Span(lambda: self.begin(stream, name), lambda: self.end(stream))

    def host_span(self, name):
        """A host span on this thread around the with block."""
        return Trace._Span(lambda: self.host_begin(name), self.host_end)

    def record_resident(self, resident):
        """Adds the stages of a Resident loop (trace=1) that ran since the
        last call (cw_trace_record_resident)."""
        lib.cw_trace_record_resident(self.handle, resident.handle)

    def info(self):
        i = _lib.TraceInfo()
        lib.cw_trace_get_info(self.handle, ctypes.byref(i))
        return {name: getattr(i, name) for name, _ in _lib.TraceInfo._fields_ if name != "reserved"}

    def write(self, path):
        """Writes the ended spans as Chrome trace-event JSON to path."""
        lib.cw_trace_write(self.handle, os.fsencode(path))


def partition_caps(device=0):
    """What green contexts the device supports: a dict of cw_partition_caps."""
    c = PartitionCaps()
    lib.cw_partition_get_caps(device, ctypes.byref(c))
    return {name: getattr(c, name) for name, _ in PartitionCaps._fields_ if name != "reserved"}


class PartitionGroup(_Handle):
    """Disjoint SM partitions of a device made by one split (green contexts):
    PartitionGroup([16, 8]) has partitions 0 and 1 and the leftover one last.
    context(i) is partition i's Context (borrowed from the group; it keeps the
    group object alive). Closing the group never fails: a partition on which
    objects live stays until they are closed."""

    _destroy = lib.cw_partition_group_destroy

    def __init__(self, sm_counts, device=0, default=-1):
        arr = (ctypes.c_uint * len(sm_counts))(*sm_counts)
        super().__init__(_new(lib.cw_partition_group_create, device, arr, len(sm_counts), default))

    def __len__(self):
        i = _lib.PartitionGroupInfo()
        lib.cw_partition_group_get_info(self.handle, ctypes.byref(i))
        return i.count

    def context(self, index):
        i = _lib.PartitionInfo()
        lib.cw_partition_group_get_partition(self.handle, ctypes.c_size_t(index), ctypes.byref(i))
        return Context(_ptr=i.context, _owner=self)


class _Capture:
    def __init__(self, stream, mode, into=None):
        self.stream, self.mode, self.into, self.graph = stream, mode, into, None

    def __enter__(self):
        lib.cw_capture_begin(self.stream.handle, self.into.handle if self.into is not None else None, self.mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        out = ctypes.c_void_p()
        try:
            lib.cw_capture_end(ctypes.byref(out), self.stream.handle)
        except _errors.CuweaveError:
            if exc_type is None:
                raise
            return False  # the body's exception is the one to see
        # A capture into a graph gives that graph back (no new ownership).
        self.graph = self.into if self.into is not None else Graph(self.stream.context, _ptr=out.value)
        return False


COND_IF, COND_WHILE = 0, 1
GRAPH_UPDATED_IN_PLACE, GRAPH_REINSTANTIATED = 0, 1


def _node_array(deps):
    deps = list(deps or ())
    for d in deps:
        if not isinstance(d, GraphNode):
            raise TypeError("a dependency must be a GraphNode, not %r" % (d,))
    return (ctypes.c_void_p * max(len(deps), 1))(*[d._ptr for d in deps]), len(deps)


class GraphNode:
    """A node of a Graph (owned by the graph; this object keeps it alive)."""

    def __init__(self, graph, ptr):
        self.graph = graph
        self._ptr = ptr


class Graph(_Handle):
    """A CUDA graph: Graph(ctx) is an empty one to build with add_*; a
    capture (Stream.capture) makes one too. A conditional node's bodies are
    graphs owned by their parent (body graphs keep it alive and are never
    destroyed here). instantiate() makes a GraphExec."""

    _destroy = lib.cw_graph_destroy

    def __init__(self, context, _ptr=None, _owner=None):
        if _owner is not None:  # a conditional node's body: the parent owns it
            self._borrow(_ptr, (_owner,))
            _owner._bodies.add(self)
        else:
            super().__init__(_ptr if _ptr is not None else _new(lib.cw_graph_create, context.handle),
                             keep=(context,))
        self.context = context
        self._bodies = weakref.WeakSet()  # body objects handed out: closed with this graph

    def close(self):
        """Destroys the graph (a body: lets go of the object only), and closes
        the body objects it handed out. Idempotent."""
        for b in list(self._bodies):
            b.close()
            b._ptr.value = None
        self._finalizer()

    def info(self):
        """cw_graph_get_info: handle (the CUgraph), nodes, sinks, is_body."""
        i = _lib.GraphInfo()
        lib.cw_graph_get_info(self.handle, ctypes.byref(i))
        return {"handle": i.handle or 0, "nodes": i.nodes, "sinks": i.sinks, "is_body": bool(i.is_body)}

    def add_child(self, child, deps=()):
        """A node running a copy of graph `child` after `deps` (GraphNodes)."""
        arr, n = _node_array(deps)
        return GraphNode(self, _get(lib.cw_graph_add_child, self.handle, child.handle, arr, n))

    def add_empty(self, deps=()):
        """An empty node after `deps` (a join point)."""
        arr, n = _node_array(deps)
        return GraphNode(self, _get(lib.cw_graph_add_empty, self.handle, arr, n))

    def add_cond_handle(self, default=0, reset_each_launch=False):
        """A condition handle (an int device code gives cudaGraphSetConditional)."""
        h = ctypes.c_uint64()
        lib.cw_graph_add_cond_handle(self.handle, int(default), 1 if reset_each_launch else 0, ctypes.byref(h))
        return h.value

    def add_conditional(self, handle, kind=COND_WHILE, with_else=False, deps=()):
        """A conditional node on `handle` after `deps`: (node, body, else_body),
        the bodies Graphs owned by this one (else_body None without with_else)."""
        s = _lib.CondSettings()
        lib.cw_cond_settings_default(ctypes.byref(s))
        s.type, s.with_else = int(kind), 1 if with_else else 0
        arr, n = _node_array(deps)
        node, body, other = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        lib.cw_graph_add_conditional(self.handle, ctypes.c_uint64(handle), ctypes.byref(s), arr, n,
                                     ctypes.byref(node), ctypes.byref(body), ctypes.byref(other))
        return (GraphNode(self, node.value), Graph(self.context, _ptr=body.value, _owner=self),
                Graph(self.context, _ptr=other.value, _owner=self) if other.value else None)

    def sinks(self):
        """The nodes no node depends on (to add nodes after them)."""
        n = ctypes.c_size_t()
        lib.cw_graph_get_sinks(self.handle, None, 0, ctypes.byref(n))
        arr = (ctypes.c_void_p * max(n.value, 1))()
        lib.cw_graph_get_sinks(self.handle, arr, n.value, ctypes.byref(n))
        return [GraphNode(self, arr[i]) for i in range(min(n.value, len(arr)))]

    def write_dot(self, path, verbose=False):
        """Writes the graph in Graphviz DOT form (for debugging)."""
        lib.cw_graph_write_dot(self.handle, os.fsencode(path), 1 if verbose else 0)

    def instantiate(self, node_priority=False):
        return GraphExec(self.context, _new(lib.cw_graph_instantiate, self.handle, 1 if node_priority else 0))


class GraphExec(_Handle):
    _destroy = lib.cw_graph_exec_destroy

    def __init__(self, context, ptr):
        super().__init__(ptr, keep=(context,))
        self.context = context

    def upload(self, stream):
        lib.cw_graph_exec_upload(self.handle, stream.handle)

    def launch(self, stream):
        lib.cw_graph_exec_launch(self.handle, stream.handle)

    def update(self, graph):
        """Takes graph's parameters (cw_graph_exec_update): in place when the
        driver can, else instantiated again. Returns {"kind":
        GRAPH_UPDATED_IN_PLACE or GRAPH_REINSTANTIATED, "driver_result",
        "reason"}."""
        i = _lib.GraphUpdateInfo()
        lib.cw_graph_exec_update(self.handle, graph.handle, ctypes.byref(i))
        return {"kind": i.kind, "driver_result": i.driver_result,
                "reason": i.reason.decode("utf-8", "replace") if i.reason else ""}

    def info(self):
        """cw_graph_exec_get_info: handle, launches, updates_in_place, reinstantiations."""
        i = _lib.GraphExecInfo()
        lib.cw_graph_exec_get_info(self.handle, ctypes.byref(i))
        return {"handle": i.handle or 0, "launches": i.launches, "updates_in_place": i.updates_in_place,
                "reinstantiations": i.reinstantiations}


def compile_log():
    """The NVRTC log of this thread's last compile (also after a failure)."""
    log = lib.cw_jit_get_compile_log()
    return log.decode("utf-8", "replace") if log else ""


class Program(_Handle):
    """CUDA C++ compiled with NVRTC for the context's device (cached in memory
    and on disk). headers: {name: source} given to NVRTC in memory."""

    _destroy = lib.cw_program_destroy

    def __init__(self, context, source, name="cuweave.cu", options=(), headers=None, name_expressions=()):
        s = ProgramSettings()
        lib.cw_program_settings_default(ctypes.byref(s))
        keep = []  # the C strings must live through the call
        s.name = name.encode()
        if options:
            arr = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            keep.append(arr)
            s.options, s.n_options = arr, len(options)
        if headers:
            hs = (Header * len(headers))()
            for i, (n, src) in enumerate(headers.items()):
                hs[i].name, hs[i].source = n.encode(), src.encode() if isinstance(src, str) else src
            keep.append(hs)
            s.headers, s.n_headers = hs, len(headers)
        if name_expressions:
            arr = (ctypes.c_char_p * len(name_expressions))(*[e.encode() for e in name_expressions])
            keep.append(arr)
            s.name_expressions, s.n_name_expressions = arr, len(name_expressions)
        super().__init__(_new(lib.cw_program_compile, context.handle, source.encode(), ctypes.byref(s)),
                         keep=(context,))
        self.context = context

    def load(self):
        return Module(self)

    def info(self):
        """cw_program_get_info: code (bytes: PTX or cubin), is_ptx, arch,
        source ("compile", "memory" or "disk"), cached, key."""
        i = _lib.ProgramInfo()
        lib.cw_program_get_info(self.handle, ctypes.byref(i))
        return {"code": ctypes.string_at(i.code, i.size) if i.code else b"", "is_ptx": bool(i.is_ptx),
                "arch": i.arch, "source": {0: "compile", 1: "memory", 2: "disk"}.get(i.source, i.source),
                "cached": bool(i.cached), "key": i.key.decode()}

    def lowered_name(self, name_expression):
        """The mangled name NVRTC gave a name expression (given in
        name_expressions=...)."""
        out = ctypes.c_char_p()
        lib.cw_program_get_lowered_name(self.handle, name_expression.encode(), ctypes.byref(out))
        return out.value.decode()


def jit_cache_configure(dir=None, max_bytes=None, memory=None):
    """Changes the kernel cache for later compiles (cw_jit_cache_configure):
    dir (None: the default or CUWEAVE_CACHE_DIR), max_bytes (None: the
    default bound), memory (keep compiled code in memory too)."""
    s = _lib.JitCacheSettings()
    lib.cw_jit_cache_settings_default(ctypes.byref(s))
    if dir is not None:
        s.dir = os.fsencode(dir)
    if max_bytes is not None:
        s.max_bytes = int(max_bytes)
    if memory is not None:
        s.memory = 1 if memory else 0
    lib.cw_jit_cache_configure(ctypes.byref(s))


def jit_stats():
    """The kernel cache's counters (cw_jit_get_stats) as a dict."""
    st = _lib.JitStats()
    lib.cw_jit_get_stats(ctypes.byref(st))
    return {name: getattr(st, name) for name, _ in _lib.JitStats._fields_ if name != "reserved"}


def jit_cache_clear_memory():
    """Empties the kernel cache's memory level (cw_jit_cache_clear_memory)."""
    lib.cw_jit_cache_clear_memory()


class Module(_Handle):
    """A program's code loaded with the library API (any context of a device
    it suits); Module.from_image(ptx_or_cubin) loads code compiled elsewhere."""

    _destroy = lib.cw_module_destroy

    def __init__(self, program=None, _image=None, _context=None):
        if program is not None:
            super().__init__(_new(lib.cw_module_load, program.handle), keep=(program.context,))
            self.context = program.context
        else:
            # The image is read during the load only (NUL-terminated PTX or a
            # cubin/fatbin).
            buf = ctypes.create_string_buffer(bytes(_image), len(_image) + 1)
            super().__init__(_new(lib.cw_module_load_image, buf), keep=(_context,) if _context else ())
            self.context = _context
        self._kernels = {}

    @classmethod
    def from_image(cls, image, context=None):
        """Loads PTX text or a cubin/fatbin image (bytes or str)
        (cw_module_load_image); refused at load when the driver refuses it.
        context: the Context kernels default to (launches name their stream's)."""
        if isinstance(image, str):
            image = image.encode()
        return cls(_image=image, _context=context)

    def kernel(self, name):
        if name not in self._kernels:
            self._kernels[name] = Kernel(self, _get(lib.cw_module_get_kernel, self.handle, name.encode()))
        return self._kernels[name]


class Kernel:
    """A kernel of a Module. launch(stream, grid, block, *args): ints, floats,
    numpy-style scalars, device buffers (__cuda_array_interface__: their
    address) and objects with a `ptr` attribute; each argument is packed to the
    size the kernel's parameter has (the driver says)."""

    def __init__(self, module, ptr):
        self.module = module  # keeps the module (and its code) alive
        self._ptr = ctypes.c_void_p(ptr)
        self._sizes = None

    def param_sizes(self, context):
        if self._sizes is None:
            n = ctypes.c_size_t()
            lib.cw_kernel_get_params(self._ptr, context.handle, None, 0, ctypes.byref(n))
            sizes = (ctypes.c_size_t * max(n.value, 1))()
            lib.cw_kernel_get_params(self._ptr, context.handle, sizes, n.value, ctypes.byref(n))
            self._sizes = [sizes[i] for i in range(n.value)]
        return self._sizes

    def preload(self, context):
        """Loads the kernel on `context` now, not at its first launch there."""
        lib.cw_kernel_preload(self._ptr, context.handle)

    @property
    def cu_kernel(self):
        """The driver's CUkernel (an int; borrowed: valid while the module lives)."""
        return _get(lib.cw_kernel_get_handle, self._ptr) or 0

    @staticmethod
    def _pack(value, size):
        if hasattr(value, "__cuda_array_interface__"):
            value = value.__cuda_array_interface__["data"][0]
        elif hasattr(value, "ptr") and not isinstance(value, (int, float)):
            value = int(value.ptr)
        if isinstance(value, float) or type(value).__name__.startswith("float"):
            if size == 4:
                return ctypes.c_float(float(value))
            if size == 8:
                return ctypes.c_double(float(value))
        else:
            value = int(value)
            kinds = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
            if size in kinds:
                return kinds[size](value & ((1 << (8 * size)) - 1))
        raise TypeError("cannot pass %r as a %d-byte kernel parameter" % (value, size))

    def launch(self, stream, grid, block, *args, shared=0):
        sizes = self.param_sizes(stream.context)
        if len(args) != len(sizes):
            raise TypeError("the kernel takes %d arguments, %d given" % (len(sizes), len(args)))
        packed = [self._pack(a, n) for a, n in zip(args, sizes)]
        ptrs = (ctypes.c_void_p * max(len(packed), 1))(*[ctypes.addressof(p) for p in packed])
        c = LaunchConfig()
        lib.cw_launch_config_default(ctypes.byref(c))
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        block = (block,) if isinstance(block, int) else tuple(block)
        for i, v in enumerate(grid):
            c.grid[i] = v
        for i, v in enumerate(block):
            c.block[i] = v
        c.shared_bytes = shared
        lib.cw_kernel_launch(self._ptr, stream.handle, ctypes.byref(c), ptrs)


_TYPESTR = {"int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4", "uint32": "<u4",
            "int64": "<i8", "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8"}


def _typestr(dtype):
    """A __cuda_array_interface__ typestr from a name ("float32"), a typestr
    ("<f4") or anything with a .str (a NumPy or CuPy dtype)."""
    if hasattr(dtype, "str"):
        dtype = dtype.str
    dtype = str(dtype)
    t = _TYPESTR.get(dtype, dtype)
    if len(t) < 3 or t[0] not in "<>|=" or t[1] not in "iufbc" or not t[2:].isdigit():
        raise TypeError("unknown element type %r" % (dtype,))
    return t


class Buffer(_Handle):
    """Device memory from the context's stream-ordered pool (cw_buffer, see
    docs/pipelines.md): allocated on `stream`, freed when closed, on the GPU,
    after every use recorded with used_by(). Exposes __cuda_array_interface__
    (version 3) with the given shape and dtype, so CuPy, PyTorch and Numba
    read it without a copy (cupy.asarray(buf) keeps the buffer alive). Its
    "stream" is the stream the data was last written on as far as cuweave
    knows: the allocating one, or the one given to written_on(). Work on
    another library's stream that reads or writes the buffer must be
    recorded (used_by(Stream.wrap(ctx, their_stream))) before close, or the
    memory may be reused under it."""

    _destroy = lib.cw_buffer_destroy

    def __init__(self, stream, shape, dtype="uint8"):
        shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError("negative extent in shape %r" % (shape,))
        self.typestr = _typestr(dtype)
        self.shape = shape
        count = 1
        for n in shape:
            count *= n
        self.nbytes = count * int(self.typestr[2:])
        if self.nbytes == 0:
            raise ValueError("a buffer holds at least one byte")
        super().__init__(_new(lib.cw_buffer_create, stream.handle, self.nbytes), keep=(stream.context,))
        self.context = stream.context
        self._stream = stream

    @classmethod
    def _wrap(cls, ptr, context, stream, shape, dtype, owned):
        """A Buffer object for a cw_buffer made elsewhere: owned (drops a
        reference when closed) or borrowed (a compute call's: closed with it)."""
        self = cls.__new__(cls)
        self.typestr = _typestr(dtype)
        self.shape = tuple(shape)
        count = 1
        for n in self.shape:
            count *= n
        self.nbytes = count * int(self.typestr[2:])
        if owned:
            _Handle.__init__(self, ptr, keep=(context,))
        else:
            self._borrow(ptr, (context,))
        self.context = context
        self._stream = stream
        return self

    def keep(self):
        """A Buffer holding a reference of its own (cw_buffer_retain), for a
        buffer borrowed inside a compute call (io.alloc, a message's) to be
        used after it. Its __cuda_array_interface__ names no stream: the
        caller orders its use (a buffer with more than one reference is
        read-only to C's cw_buffer_get_writable)."""
        lib.cw_buffer_retain(self.handle)
        return Buffer._wrap(self._ptr.value, self.context, None, self.shape, self.typestr, owned=True)

    def view(self, shape, dtype):
        """An object with __cuda_array_interface__ over this buffer's memory
        as `shape` elements of `dtype` (at most nbytes), naming no stream: for
        use on a stream already ordered after the buffer's writer (inside
        compute: the stream io.receive_stream gave). Keeps the buffer object."""
        return _View(self, shape, dtype)

    @property
    def ptr(self):
        i = BufferInfo()
        lib.cw_buffer_get_info(self.handle, ctypes.byref(i))
        return i.dptr

    def info(self):
        i = BufferInfo()
        lib.cw_buffer_get_info(self.handle, ctypes.byref(i))
        return {"ptr": i.dptr, "nbytes": i.bytes, "refs": i.refs, "uses": i.uses, "device": i.device}

    def used_by(self, stream):
        """The free waits for the work queued on `stream` so far."""
        lib.cw_buffer_use(self.handle, stream.handle)

    def written_on(self, stream):
        """Names the stream whose work last wrote the data (what consumers of
        __cuda_array_interface__ synchronise with), and records it as a use."""
        self.used_by(stream)
        self._stream = stream

    def copy_from_host(self, stream, data):
        """Queues a copy of `data` (bytes-like, at most nbytes) to the buffer
        on `stream`; pageable memory is staged by the driver (reusable when
        this returns)."""
        view = memoryview(data).cast("B")
        if view.nbytes > self.nbytes:
            raise ValueError("%d bytes do not fit in a %d-byte buffer" % (view.nbytes, self.nbytes))
        tmp = (ctypes.c_char * view.nbytes).from_buffer_copy(view) if view.readonly else \
            (ctypes.c_char * view.nbytes).from_buffer(view)
        lib.cw_copy_to_device(stream.handle, self.ptr, tmp, view.nbytes)
        self.written_on(stream)

    def copy_to_host(self, stream, out=None):
        """Copies the buffer to `out` (a writable bytes-like object of at least
        nbytes; a new bytearray when None) on `stream` and waits for it."""
        if out is None:
            out = bytearray(self.nbytes)
        view = memoryview(out).cast("B")
        if view.readonly or view.nbytes < self.nbytes:
            raise ValueError("need a writable buffer of at least %d bytes" % self.nbytes)
        dst = (ctypes.c_char * view.nbytes).from_buffer(view)
        if self._stream is not None and self._stream is not stream and not self._stream.closed:
            stream.wait(self._stream)
        lib.cw_copy_to_host(stream.handle, dst, self.ptr, self.nbytes)
        self.used_by(stream)
        stream.synchronize()
        return out

    def copy_from(self, stream, src):
        """Queues a copy of the whole of Buffer `src` (at most nbytes; any
        device) into this buffer on `stream` (a stream of either device;
        cw_buffer_copy), after the streams that last wrote either buffer;
        records the use of both. This buffer's data is then written on
        `stream`."""
        if not isinstance(src, Buffer):
            raise TypeError("copy_from takes a Buffer (cuweave.copy_peer takes addresses)")
        _wait_writer(stream, src)
        _wait_writer(stream, self)
        lib.cw_buffer_copy(self.handle, src.handle, stream.handle)
        self._stream = stream

    @property
    def __cuda_array_interface__(self):
        s = self._stream.cu_stream if self._stream is not None and not self._stream.closed else None
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": s if s else None,
        }

    @classmethod
    def create_shareable(cls, stream, shape, dtype="uint8"):
        """A Buffer another process can import (cw_buffer_create_shareable:
        cuMemAlloc'd, not pool memory). Export it with export()."""
        self = cls.__new__(cls)
        shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        self.typestr = _typestr(dtype)
        self.shape = shape
        count = 1
        for n in shape:
            count *= n
        self.nbytes = count * int(self.typestr[2:])
        if self.nbytes == 0:
            raise ValueError("a buffer holds at least one byte")
        _Handle.__init__(self, _new(lib.cw_buffer_create_shareable, stream.handle, self.nbytes),
                         keep=(stream.context,))
        self.context = stream.context
        self._stream = stream
        return self

    def export(self):
        """The handle (128 bytes) another process of this machine passes to
        Buffer.import_handle (cw_buffer_export). The memory stays until every
        importer closed (docs/multi-gpu.md, "Sharing between processes")."""
        h = _lib.SharedHandle()
        lib.cw_buffer_export(self.handle, ctypes.byref(h))
        return bytes(h.bytes)

    @classmethod
    def import_handle(cls, stream, handle, shape=None, dtype="uint8"):
        """Opens another process's exported buffer on stream's context
        (cw_buffer_import); shape defaults to its size in elements of dtype."""
        h = _shared_handle(handle)
        out = _new(lib.cw_buffer_import, stream.handle, ctypes.byref(h))
        info = _lib.BufferInfo()
        lib.cw_buffer_get_info(out, ctypes.byref(info))
        if shape is None:
            shape = (info.bytes // int(_typestr(dtype)[2:]),)
        return cls._wrap(out, stream.context, stream, shape, dtype, owned=True)


def _shared_handle(handle):
    data = bytes(handle)
    if len(data) != 128:
        raise ValueError("a shared handle is 128 bytes, not %d" % len(data))
    h = _lib.SharedHandle()
    ctypes.memmove(h.bytes, data, 128)
    return h


class SharedEvent(_Handle):
    """An event shared between processes (cw_shared_event): record() in
    one, wait() in another; export() gives the bytes to pass over."""

    _destroy = lib.cw_shared_event_destroy

    def __init__(self, context, handle=None):
        if handle is None:
            ptr = _new(lib.cw_shared_event_create, context.handle)
        else:
            h = _shared_handle(handle)
            ptr = _new(lib.cw_shared_event_import, context.handle, ctypes.byref(h))
        super().__init__(ptr, keep=(context,))
        self.context = context

    @classmethod
    def import_handle(cls, context, handle):
        return cls(context, handle)

    def export(self):
        h = _lib.SharedHandle()
        lib.cw_shared_event_export(self.handle, ctypes.byref(h))
        return bytes(h.bytes)

    def record(self, stream):
        lib.cw_shared_event_record(self.handle, stream.handle)

    def wait(self, stream):
        """Work enqueued on stream from now on waits for the latest record."""
        lib.cw_shared_event_wait(self.handle, stream.handle)

    def info(self):
        i = _lib.SharedEventInfo()
        lib.cw_shared_event_get_info(self.handle, ctypes.byref(i))
        return {"imported": bool(i.imported), "importers": i.importers}


BUILTIN_FILL_U32, BUILTIN_WRITE_U32, BUILTIN_TIMESTAMP, BUILTIN_SET_COND = 0, 1, 2, 3


def builtin_kernel(which):
    """A kernel built into the library (cw_builtin_get_kernel: BUILTIN_FILL_U32,
    ...; owned by the library). Loads the embedded image on first use."""
    return Kernel(None, _get(lib.cw_builtin_get_kernel, int(which)))


class HostMemory:
    """Page-locked, device-mapped host memory (cw_host_alloc), zeroed: copies
    from and to it run asynchronously, and kernels may use it at the same
    address (.ptr). mem.view() (a ctypes char array: memoryview(mem.view()),
    bytes(mem.view())) reads and writes it from Python and keeps the
    HostMemory object alive (memoryview(mem) too, from Python 3.12). Freed by
    close() (then no view may be used) or its finalizer (cw_host_free; while
    a resident loop runs the free waits for it to stop)."""

    def __init__(self, context, nbytes):
        self.context = context
        self.nbytes = int(nbytes)
        self._ptr = ctypes.c_void_p(_new(lib.cw_host_alloc, context.handle, self.nbytes))
        self._finalizer = weakref.finalize(self, HostMemory._free, context, self._ptr)

    @staticmethod
    def _free(context, ptr):
        if ptr.value and not context.closed:
            lib.cw_host_free(context.handle, ctypes.byref(ptr))

    @property
    def ptr(self):
        if not self._ptr.value:
            raise ValueError("HostMemory is closed")
        return self._ptr.value

    @property
    def closed(self):
        return not self._ptr.value

    def view(self):
        """A writable ctypes char array over the memory (keeps it alive)."""
        arr = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        arr._cuweave_owner = self
        return arr

    def __buffer__(self, flags):  # Python 3.12's buffer protocol for classes
        return memoryview(self.view())

    def __len__(self):
        return self.nbytes

    def close(self):
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _View:
    """Buffer.view: the buffer's memory under another shape, no stream."""

    def __init__(self, buf, shape, dtype):
        self.buffer = buf
        self.shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        self.typestr = _typestr(dtype)
        count = 1
        for n in self.shape:
            count *= n
        if count * int(self.typestr[2:]) > buf.nbytes:
            raise ValueError("a view of %r %s exceeds the %d-byte buffer" % (self.shape, self.typestr, buf.nbytes))

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.buffer.ptr, False), "version": 3,
                "strides": None, "stream": None}


def resident_device_header():
    """The text of cuweave/resident_device.h, to give NVRTC as a header."""
    return lib.cw_builtin_get_resident_header().decode()


# ---- Python callbacks called by C (resident capture functions, operators) ----

_CW_ERROR_OUT_OF_MEMORY = 5
_CW_ERROR_INTERNAL = 17


class _Callbacks:
    """Python functions C calls back go through one ctypes function per kind
    (made once, never freed), so no ctypes thunk can be freed while C holds
    it: C is given an int key as `user`, and the entry is found here. The
    table holds entries weakly: the Python object that owns the C object
    (a Resident, an Operator, then its Pipeline) holds its entries, and its
    finalizer destroys the C object, so an entry lives at least as long as C
    may call it, and a cycle through a callback's closure is still
    collected."""

    def __init__(self):
        self._items = weakref.WeakValueDictionary()
        self._keys = __import__("itertools").count(1)

    def add(self, entry):
        key = next(self._keys)
        self._items[key] = entry
        return key

    def get(self, key):
        return self._items.get(key or 0)

    def pop(self, key):
        return self._items.pop(key or 0, None)

    def __len__(self):
        return len(self._items)


class _Entry:
    """What a callback key leads to (attributes set by its owner)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


_STATUS_OF_BUILTIN = ((MemoryError, _CW_ERROR_OUT_OF_MEMORY), (TimeoutError, 9), (ValueError, 1))


def _status_of(exc):
    """The cw_status a Python callback returns to C for an exception it
    raised (exceptions never cross into C): a CuweaveError's own status (the
    thread's detail is that failing call's, so C reports its driver call and
    CUresult); for other exceptions CW_ERROR_OUT_OF_MEMORY (MemoryError),
    CW_ERROR_TIMEOUT (TimeoutError), CW_ERROR_INVALID_ARGUMENT (ValueError)
    or CW_ERROR_INTERNAL (anything else), with the thread's detail cleared so
    that C does not report an older failure's; the bindings then raise the
    status's CuweaveError from the exception (_reraise)."""
    if isinstance(exc, CuweaveError) and exc.status:
        return int(exc.status)
    lib.cw_clear_error()
    for cls, status in _STATUS_OF_BUILTIN:
        if isinstance(exc, cls):
            return status
    return _CW_ERROR_INTERNAL


def _reraise(err, failures):
    """Raises `err` (a CuweaveError from a C call that ran Python callbacks)
    with the first exception a callback raised as its cause, named in the
    message; KeyboardInterrupt and SystemExit are raised as themselves."""
    if not failures:
        raise err
    where, exc = failures[0]
    del failures[:]
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        raise exc
    if isinstance(exc, CuweaveError) and exc.status == err.status:
        raise err from exc
    msg = "%s: %s raised %s: %s" % (err.detail.get("function") or "cuweave", where, type(exc).__name__, exc)
    raise type(err)(msg, dict(err.detail, message=msg)) from exc


_capture_fns = _Callbacks()


@_lib.CAPTURE_FN
def _c_capture(s, user):
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


class Resident(_Handle):
    """The GPU-resident loop on a context (docs/resident.md). Settings as
    keyword arguments named as in cw_resident_settings (timeout_ms,
    sleep_interval_us, sleep_mode, spin_us, sync_with_host, input_slots,
    input_bytes, unroll, gate, overlap, trace, destroy_timeout_ms).

    The workload and the data-ready handler are captured graphs or Python
    capture functions fn(stream) that enqueue the work on `stream` when the
    loop builds (set_workload(fn), set_handler(fn)); stage_begin/stage_end
    name stages inside them for trace=1.

    Tear-down: tear_down(timeout) is the call that reports (raises
    TimeoutError when the loop does not stop). close() and the finalizer call
    cw_resident_destroy, which never fails: a loop that does not stop within
    destroy_timeout_ms is abandoned and the log callback
    (cuweave.set_log_callback) gets a LOG_ERROR saying so."""

    _destroy = lib.cw_resident_destroy

    def __init__(self, context, **settings):
        s = ResidentSettings()
        lib.cw_resident_settings_default(ctypes.byref(s))
        self._fill(s, settings)
        super().__init__(_new(lib.cw_resident_create, context.handle, ctypes.byref(s)), keep=(context,))
        self.context = context
        self._failures = []  # (where, exception) raised by capture functions
        self._failure_lists = [self._failures]  # and those of a resident pipeline's operators
        self._parts = {}     # "workload"/"handler" -> what C calls to capture them

    @staticmethod
    def _fill(s, settings):
        for k, v in settings.items():
            if k == "reserved" or not hasattr(s, k):
                raise TypeError("no resident setting %r" % k)
            setattr(s, k, v)

    def configure(self, **settings):
        """Changes settings of a loop that is not launched
        (cw_resident_configure): the current ones with these replaced."""
        s = ResidentSettings()
        lib.cw_resident_get_settings(self.handle, ctypes.byref(s))
        self._fill(s, settings)
        lib.cw_resident_configure(self.handle, ctypes.byref(s))

    def _call(self, fn, *args):
        """A C call that may run capture functions: their exception is the cause."""
        for f in self._failure_lists:
            del f[:]
        try:
            fn(self.handle, *args)
        except CuweaveError as err:
            _reraise(err, [x for f in self._failure_lists for x in f])
        finally:
            for f in self._failure_lists:
                del f[:]

    def _set_part(self, part, what, by_graph, by_fn):
        if callable(what) and not isinstance(what, Graph):
            e = _Entry(context=self.context, failures=self._failures, fn=what,
                       what="the %s capture function %r" % (part, what))
            key = _capture_fns.add(e)
            by_fn(self.handle, _c_capture, ctypes.c_void_p(key))
            self._parts[part] = e  # alive while the loop object is (the loop with it)
        else:
            by_graph(self.handle, what.handle)
            self._parts.pop(part, None)

    @staticmethod
    def default_settings():
        s = ResidentSettings()
        lib.cw_resident_settings_default(ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in ResidentSettings._fields_ if name != "reserved"}

    @property
    def ctl(self):
        """The device address of the loop's control block (cw_resident_ctl *)."""
        v = ctypes.c_uint64()
        lib.cw_resident_get_ctl(self.handle, ctypes.byref(v))
        return v.value

    def input(self, slot):
        v = ctypes.c_uint64()
        lib.cw_resident_get_input(self.handle, slot, ctypes.byref(v))
        return v.value

    def set_workload(self, workload):
        """The work of each request: a Graph (copied) or a capture function
        fn(stream) called when the loop builds, once per unrolled copy of the
        iteration, to enqueue the work on `stream` (cw_resident_set_workload_fn;
        kept until replaced or the loop is closed). An exception in fn fails
        the build, raised from it."""
        self._set_part("workload", workload, lib.cw_resident_set_workload, lib.cw_resident_set_workload_fn)

    def set_handler(self, handler):
        """The data-ready handler: a Graph or a capture function, as
        set_workload (cw_resident_set_handler, cw_resident_set_handler_fn)."""
        self._set_part("handler", handler, lib.cw_resident_set_handler, lib.cw_resident_set_handler_fn)

    def stage_begin(self, stream, name):
        """Inside a capture function: begins a stage named `name` on `stream`
        (trace=1 names it when the GPU faults in it); returns its id for
        stage_end (CW_RESIDENT_NO_STAGE when the loop does not trace)."""
        v = ctypes.c_uint32()
        lib.cw_resident_stage_begin(self.handle, stream.handle, str(name).encode(), ctypes.byref(v))
        return v.value

    def stage_end(self, stream, stage):
        lib.cw_resident_stage_end(self.handle, stream.handle, int(stage))

    def set_fused(self, source, stages, grid_blocks=0, block_threads=0, shared_bytes=0, options=(), user=0):
        """Fused persistent mode (cw_resident_set_fused): one persistent
        kernel, compiled from `source` (CUDA C++), runs the stages named in
        `stages` in order for each request, with a grid-wide barrier after
        each; every stage is extern "C" __device__ void NAME(cw_resident_ctl
        *ctl, void *user). grid_blocks 0: the most that fit co-resident
        (stats()["grid_blocks"] says how many). user: a device address (an
        int, a Buffer, or an object with __cuda_array_interface__) passed to
        every stage. set_fused(None) makes the loop a graph loop again."""
        if source is None:
            lib.cw_resident_set_fused(self.handle, None)
            return
        names = [str(x).encode() for x in stages]
        opts = [str(x).encode() for x in options]
        c_stages = (ctypes.c_char_p * max(1, len(names)))(*names)
        c_opts = (ctypes.c_char_p * max(1, len(opts)))(*opts)
        f = ResidentFused()
        f.source = source.encode() if isinstance(source, str) else bytes(source)
        f.stages = ctypes.cast(c_stages, ctypes.POINTER(ctypes.c_char_p))
        f.stage_count = len(names)
        f.options = ctypes.cast(c_opts, ctypes.POINTER(ctypes.c_char_p)) if opts else None
        f.option_count = len(opts)
        f.grid_blocks = grid_blocks
        f.block_threads = block_threads
        f.shared_bytes = shared_bytes
        f.user = _address(user)
        lib.cw_resident_set_fused(self.handle, ctypes.byref(f))

    def build(self):
        self._call(lib.cw_resident_build)

    def launch(self):
        self._call(lib.cw_resident_launch)

    @property
    def launched(self):
        """Running or stopping (cw_resident_get_state)."""
        v = ctypes.c_int()
        lib.cw_resident_get_state(self.handle, ctypes.byref(v))
        return v.value in (1, 2)  # CW_RESIDENT_RUNNING, CW_RESIDENT_STOPPING

    def next_input(self, timeout=1.0):
        v = ctypes.c_uint64()
        lib.cw_resident_next_input(self.handle, _timeout_ms(timeout), ctypes.byref(v))
        return v.value

    def data_ready(self):
        """Makes a request; returns its sequence number."""
        seq = ctypes.c_uint64()
        lib.cw_resident_data_ready(self.handle, ctypes.byref(seq))
        return seq.value

    def result_ready(self, seq):
        """True when request seq has finished, False when not yet
        (cw_resident_poll_result); raises when it never will."""
        st = lib.cw_resident_poll_result(self.handle, seq)
        if st == 8:  # CW_ERROR_NOT_READY
            return False
        if st != 0:
            raise _errors.from_status(st, last_error())
        return True

    def wait_result(self, seq, timeout=1.0):
        lib.cw_resident_wait_result(self.handle, seq, _timeout_ms(timeout))

    def tear_down(self, timeout=1.0):
        lib.cw_resident_tear_down(self.handle, _timeout_ms(timeout))

    def settings(self):
        """The loop's settings, as a dict named as in cw_resident_settings."""
        s = ResidentSettings()
        lib.cw_resident_get_settings(self.handle, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in ResidentSettings._fields_ if name != "reserved"}

    def stats(self):
        """State and statistics (cw_resident_get_info), as a dict named as in
        cw_resident_info (its context left out: self.context)."""
        st = ResidentInfo()
        lib.cw_resident_get_info(self.handle, ctypes.byref(st))
        out = {name: getattr(st, name) for name, _ in ResidentInfo._fields_ if name not in ("reserved", "context")}
        out["fallback_detail"] = (st.fallback_detail or b"").decode("utf-8", "replace")
        return out

    def close(self):
        """Tears the loop down (if launched) and frees it. Never raises: a loop
        that would not stop within destroy_timeout_ms is abandoned and logged
        (cw_resident_destroy); call tear_down() first to learn whether it
        stops. Idempotent."""
        super().close()


# ---- several devices (cuweave/multi.h, docs/multi-gpu.md) --------------------


def _address(value):
    """A device address from an int, a Buffer, an object with
    __cuda_array_interface__, or None (0)."""
    if value is None:
        return 0
    if isinstance(value, Buffer):
        return value.ptr
    if hasattr(value, "__cuda_array_interface__"):
        return int(value.__cuda_array_interface__["data"][0])
    return int(value)


def _wait_writer(stream, buf):
    """Orders `stream` after the stream that last wrote Buffer `buf` (any device)."""
    if isinstance(buf, Buffer):
        w = buf._stream
        if w is not None and w is not stream and not w.closed:
            stream.wait(w)


class _BorrowedContexts:
    """The Context objects an owner (a DeviceGroup) hands out: one per member,
    each keeping the owner alive; made unusable (closed) when the owner is
    closed, since the handles are only valid while it is open."""

    def __init__(self):
        self._made = weakref.WeakValueDictionary()

    def get(self, key, ptr, owner):
        ctx = self._made.get(key)
        if ctx is None or ctx._ptr.value != ptr:
            ctx = Context(_ptr=ptr, _owner=owner)
            self._made[key] = ctx
        return ctx

    def invalidate(self):
        for ctx in list(self._made.values()):
            ctx._ptr.value = None
        self._made.clear()


class DeviceGroup(_Handle):
    """The primary contexts of several devices, opened in one call:
    DeviceGroup() takes every visible device, DeviceGroup([2, 0]) those
    ordinals in that order (member i is devices[i]). context(i) is member i's
    Context, borrowed from the group: it keeps the group alive, and is closed
    with the group (objects already made on it keep the context alive, as in
    C). Peer access: Context.enable_peer for each pair peer_info allows."""

    _destroy = lib.cw_device_group_destroy

    def __init__(self, devices=None):
        if devices is None:
            arr, n = None, 0
        else:
            devices = [int(d) for d in devices]
            if not devices:
                raise ValueError("an empty device list (None means every visible device)")
            arr, n = (ctypes.c_int * len(devices))(*devices), len(devices)
        super().__init__(_new(lib.cw_device_group_create, arr, n))
        self._contexts = _BorrowedContexts()

    def _info(self):
        i = DeviceGroupInfo()
        lib.cw_device_group_get_info(self.handle, ctypes.byref(i))
        return i

    def _member(self, info, index):
        index = int(index)
        if not 0 <= index < info.count:
            raise error_class("CW_ERROR_INVALID_ARGUMENT")(
                "member %d, but the group holds %d devices" % (index, info.count))
        return index

    def __len__(self):
        return self._info().count

    def context(self, index):
        i = self._info()
        index = self._member(i, index)
        return self._contexts.get(index, i.contexts[index], self)

    def ordinal(self, index):
        i = self._info()
        return i.devices[self._member(i, index)]

    def contexts(self):
        """Every member's Context, in member order."""
        return [self.context(i) for i in range(len(self))]

    def ordinals(self):
        i = self._info()
        return [i.devices[k] for k in range(i.count)]

    def close(self):
        """Destroys the group and the Context objects it handed out. Idempotent."""
        self._contexts.invalidate()
        self._finalizer()


PeerInfo = collections.namedtuple("PeerInfo", ["can_access", "perf_rank", "native_atomics"])
PeerInfo.__doc__ = """What the topology allows from one device to another (cw_peer_info):
can_access (bool), perf_rank (the driver's rank of the link, lower is faster),
native_atomics (bool)."""


def peer_info(device, peer):
    """What the topology allows from ordinal `device` to ordinal `peer` (a
    PeerInfo); makes no context."""
    i = _lib.PeerInfo()
    lib.cw_device_get_peer_info(int(device), int(peer), ctypes.byref(i))
    return PeerInfo(bool(i.can_access), i.perf_rank, bool(i.native_atomics))


def copy_peer(stream, dst, dst_ctx, src, src_ctx, nbytes):
    """Queues a copy of nbytes from src (memory of src_ctx's device) to dst
    (memory of dst_ctx's device) on `stream`, a stream of either device
    (cw_copy_peer; direct with peer access, else staged by the driver).
    dst and src: device addresses (ints), Buffers, or objects with
    __cuda_array_interface__; for a Buffer the context may be None (its
    own), the copy is ordered after its last writer and the use recorded."""
    nbytes = int(nbytes)
    for name, b in (("dst", dst), ("src", src)):
        if isinstance(b, Buffer) and nbytes > b.nbytes:
            raise ValueError("%d bytes exceed the %d-byte %s buffer" % (nbytes, b.nbytes, name))
    if dst_ctx is None and isinstance(dst, Buffer):
        dst_ctx = dst.context
    if src_ctx is None and isinstance(src, Buffer):
        src_ctx = src.context
    if dst_ctx is None or src_ctx is None:
        raise TypeError("a raw address needs its context")
    _wait_writer(stream, src)
    _wait_writer(stream, dst)
    lib.cw_copy_peer(stream.handle, _address(dst), dst_ctx.handle, _address(src), src_ctx.handle, nbytes)
    if isinstance(src, Buffer):
        src.used_by(stream)
    if isinstance(dst, Buffer):
        dst.written_on(stream)


def share_buffer_pool(owner, peer):
    """Opens the buffers of `owner`'s pool (made on its streams, now and
    later) to kernels on `peer`'s device, read and write; also enables peer
    access (peer -> owner). NotSupportedError where the topology says no."""
    lib.cw_context_share_buffer_pool(owner.handle, peer.handle)


def _handles(objs):
    objs = list(objs)
    return (ctypes.c_void_p * max(len(objs), 1))(*[o.handle.value for o in objs]), len(objs)


# ---- collectives through NCCL (cuweave/collective.h) --------------------------


class Dtype(enum.IntEnum):
    """cw_dtype (NCCL's values)."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9

    @property
    def itemsize(self):
        return _DTYPE_SIZES[self]


_DTYPE_SIZES = {Dtype.INT8: 1, Dtype.UINT8: 1, Dtype.INT32: 4, Dtype.UINT32: 4, Dtype.INT64: 8, Dtype.UINT64: 8,
                Dtype.FLOAT16: 2, Dtype.FLOAT32: 4, Dtype.FLOAT64: 8, Dtype.BFLOAT16: 2}


class ReduceOp(enum.IntEnum):
    """cw_reduce_op (NCCL's values)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


def _enum(cls, value):
    """An enum member from a member, its value or its name ("float32", "sum")."""
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError("no %s %r" % (cls.__name__, value)) from None
    return cls(value)


def nccl_version():
    """NCCL's version code (22703 for 2.27.3), opening NCCL if need be (the
    path in CUWEAVE_LIBNCCL, else libnccl.so.2); 0 without it."""
    return versions()["nccl"]


def comm_id_generate():
    """A new id for a communicator by rank (cw_comm_id_generate), as 128
    bytes: make it in one process, hand it to the others by any means, and
    pass it to Comm.create_rank in each."""
    cid = CommId()
    lib.cw_comm_id_generate(ctypes.byref(cid))
    return bytes(cid.bytes)


class Comm(_Handle):
    """An NCCL communicator. Comm(contexts): one rank per Context, all in this
    process: rank i is contexts[i] (primary contexts of distinct devices:
    Context(n) or a DeviceGroup's). Comm.create_rank and Comm.bootstrap: this
    process's one rank of many, the others in other processes (one process per
    GPU, on one machine or several). Collectives take, per local rank, a
    device address (an int), a Buffer or an object with
    __cuda_array_interface__, and a Stream of that rank's device; they are
    enqueued on those streams in one NCCL group. The lists have one entry per
    local rank (local_size: one for a communicator by rank, entry i for global
    rank first_rank + i); ranks and roots are global. Buffers are ordered
    after their last writer and their uses recorded."""

    _destroy = lib.cw_comm_destroy

    def __init__(self, contexts, _ptr=None, _first=0):
        contexts = tuple(contexts)
        if _ptr is None:
            arr, n = _handles(contexts)
            _ptr = _new(lib.cw_comm_create, arr, n)
        super().__init__(_ptr, keep=contexts)
        self._contexts = contexts
        self._first = _first

    @classmethod
    def create_rank(cls, context, comm_id, nranks, rank, timeout_ms=60000):
        """This process's rank `rank` of `nranks`, on `context`, joined with the
        others by `comm_id` (the bytes of comm_id_generate, the same in every
        process) (cw_comm_create_rank). Raises TimeoutError when not every
        rank joins within timeout_ms."""
        cid = CommId()
        comm_id = bytes(comm_id)
        if len(comm_id) != COMM_ID_BYTES:
            raise ValueError("a communicator id has %d bytes, not %d" % (COMM_ID_BYTES, len(comm_id)))
        ctypes.memmove(cid.bytes, comm_id, COMM_ID_BYTES)
        ptr = _new(lib.cw_comm_create_rank, context.handle, ctypes.byref(cid), int(nranks), int(rank),
                   int(timeout_ms))
        return cls((context,), _ptr=ptr, _first=int(rank))

    @classmethod
    def bootstrap(cls, context, rank=None, world_size=None, file=None, addr=None, timeout_ms=60000, token=None):
        """The common bootstrap (cw_comm_bootstrap): rank 0 makes the id and
        publishes it through `file` or `addr` ("host:port" of rank 0); each
        argument left None comes from the environment (CUWEAVE_RANK,
        CUWEAVE_WORLD_SIZE, CUWEAVE_COMM_FILE, CUWEAVE_COMM_ADDR,
        CUWEAVE_COMM_TOKEN). `token` (TCP): a secret every rank shares; rank 0
        answers only the peers that present it."""
        s = CommBootstrapSettings()
        lib.cw_comm_bootstrap_settings_default(ctypes.byref(s))
        if rank is not None:
            s.rank = int(rank)
        if world_size is not None:
            s.world_size = int(world_size)
        if file is not None:
            s.file = os.fsencode(file)
        if addr is not None:
            s.addr = addr.encode()
        s.timeout_ms = int(timeout_ms)
        if token is not None:
            s.token = token.encode()
        ptr = _new(lib.cw_comm_bootstrap, context.handle, ctypes.byref(s))
        i = CommInfo()
        lib.cw_comm_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        return cls((context,), _ptr=ptr, _first=i.first_rank)

    def _info(self):
        i = CommInfo()
        lib.cw_comm_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def size(self):
        """The ranks in all (every process)."""
        return self._info().size

    @property
    def local_size(self):
        """The ranks held in this process (1 for a communicator by rank)."""
        return self._info().local_size

    @property
    def first_rank(self):
        """The global rank of local rank 0."""
        return self._info().first_rank

    def __len__(self):
        return self.size

    def contexts(self):
        """The local ranks' Contexts, in rank order (those given at creation)."""
        return list(self._contexts)

    def context(self, rank):
        """Global rank `rank`'s Context (the one given at creation), for a rank
        held in this process."""
        i = self._info()
        rank = int(rank)
        if not i.first_rank <= rank < i.first_rank + i.local_size:
            raise error_class("CW_ERROR_INVALID_ARGUMENT")(
                "rank %d is not held here (ranks %d to %d of %d)" %
                (rank, i.first_rank, i.first_rank + i.local_size - 1, i.size))
        ptr = i.contexts[rank - i.first_rank]
        for ctx in self._contexts:
            if ctx._ptr.value == ptr:
                return ctx
        # the one given was closed (a closed DeviceGroup's): the comm still holds the context
        return Context(_ptr=ptr, _owner=self)

    def _collective(self, fn, send, recv, count, dtype, arg, streams, reads):
        send, recv, streams = list(send), list(recv), list(streams)
        n = len(self._contexts)
        if not len(send) == len(recv) == len(streams) == n:
            raise ValueError("%d ranks: need %d send, recv and streams (got %d, %d, %d)" %
                             (n, n, len(send), len(recv), len(streams)))
        count = int(count)
        dtype = _enum(Dtype, dtype)
        nbytes = count * dtype.itemsize
        for i in range(n):
            for b, used in ((send[i], reads(i)), (recv[i], True)):
                if used and isinstance(b, Buffer) and nbytes > b.nbytes:
                    raise ValueError("rank %d: %d elements of %s exceed a %d-byte buffer" %
                                     (i, count, dtype.name, b.nbytes))
        s_arr = (ctypes.c_uint64 * n)(*[_address(b) for b in send])
        r_arr = (ctypes.c_uint64 * n)(*[_address(b) for b in recv])
        st_arr, _ = _handles(streams)
        for i in range(n):
            if reads(i):
                _wait_writer(streams[i], send[i])
            _wait_writer(streams[i], recv[i])
        fn(self.handle, s_arr, r_arr, count, int(dtype), arg, st_arr)
        for i in range(n):
            if reads(i) and isinstance(send[i], Buffer):
                send[i].used_by(streams[i])
            if isinstance(recv[i], Buffer):
                recv[i].written_on(streams[i])

    def all_reduce(self, send, recv, count, dtype, op, streams):
        """recv[i] (count elements of dtype) receives op over every rank's
        send[i]; send[i] may be recv[i] (in place). dtype: a Dtype (or its
        name, "float32"); op: a ReduceOp (or "sum", ...)."""
        self._collective(lib.cw_comm_all_reduce, send, recv, count, dtype, int(_enum(ReduceOp, op)), streams,
                         lambda i: True)

    def broadcast(self, send, recv, count, dtype, root, streams):
        """Every local rank's recv[i] receives the root's send (count elements;
        root is a global rank): only send[root - first_rank] is read, in the
        root's process (the others may be None or 0)."""
        root = int(root)
        first = self._first
        self._collective(lib.cw_comm_broadcast, send, recv, count, dtype, root, streams, lambda i: first + i == root)

    def _rank_part(self, fn, rank, send, recv, count, dtype, arg, stream, reads):
        count = int(count)
        dtype = _enum(Dtype, dtype)
        nbytes = count * dtype.itemsize
        for b, used in ((send, reads), (recv, True)):
            if used and isinstance(b, Buffer) and nbytes > b.nbytes:
                raise ValueError("rank %d: %d elements of %s exceed a %d-byte buffer" %
                                 (rank, count, dtype.name, b.nbytes))
        if reads:
            _wait_writer(stream, send)
        _wait_writer(stream, recv)
        fn(self.handle, int(rank), _address(send), _address(recv), count, int(dtype), arg, stream.handle)
        if reads and isinstance(send, Buffer):
            send.used_by(stream)
        if isinstance(recv, Buffer):
            recv.written_on(stream)

    def all_reduce_rank(self, rank, send, recv, count, dtype, op, stream):
        """Rank `rank`'s part of an all-reduce (cw_comm_all_reduce_rank): for
        one thread per rank, or for one thread inside `with
        cuweave.comm_group():` (outside a group, one thread issuing several
        ranks' parts in turn deadlocks inside NCCL: use all_reduce)."""
        self._rank_part(lib.cw_comm_all_reduce_rank, rank, send, recv, count, dtype, int(_enum(ReduceOp, op)),
                        stream, True)

    def broadcast_rank(self, rank, send, recv, count, dtype, root, stream):
        """Rank `rank`'s part of a broadcast from `root`
        (cw_comm_broadcast_rank): as all_reduce_rank; send is read on the root only."""
        self._rank_part(lib.cw_comm_broadcast_rank, rank, send, recv, count, dtype, int(root), stream,
                        int(rank) == int(root))


class comm_group:
    """with cuweave.comm_group(): ... the _rank calls of several ranks from one
    thread ...: NCCL issues them together at the end (cw_comm_group_begin,
    cw_comm_group_end). Groups nest. A part refused inside a group never
    reaches NCCL, and the parts issued before it would wait for it forever:
    check every rank's arguments first."""

    def __enter__(self):
        lib.cw_comm_group_begin()
        return self

    def __exit__(self, *exc):
        lib.cw_comm_group_end()
        return False


from ._flow import IO, PORT_MANY, PORT_OPTIONAL, Message, Operator, Pipeline  # noqa: E402

# Exception classes by name (NoDriverError, TimeoutError, ...) at package level.
for _cls in _errors.classes().values():
    globals()[_cls.__name__] = _cls
