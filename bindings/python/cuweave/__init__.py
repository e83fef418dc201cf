"""cuweave for Python: a pure-Python package over ctypes.

Handles are freed by weakref.finalize (children keep their parents alive, so
children go first); close() is idempotent; objects are context managers.
Failing calls raise a subclass of CuweaveError generated from the C status
list (NoDriverError, TimeoutError_..., see cuweave.errors()).

Covers so far: library and devices, contexts, streams (with the
__cuda_stream__ protocol), stream pools and leases, futures (awaitable with
asyncio through their eventfd), timers.
"""

import asyncio
import ctypes
import weakref

from . import _errors
from ._lib import PoolSettings, PoolStats, StreamSettings, last_error, lib

CuweaveError = _errors.CuweaveError

HOST_FUNC = 0
WRITE_VALUE = 1
EVENT = 2
POOL_LEASE, POOL_ROUND_ROBIN, POOL_SINGLE = 0, 1, 2


def errors():
    """{cw_status code: exception class}."""
    return _errors.classes()


def error_class(name):
    """The exception class of a C status name, e.g. 'CW_ERROR_NO_DRIVER'."""
    for cls in _errors.classes().values():
        if cls.name == name:
            return cls
    raise KeyError(name)


def version():
    v = lib.cw_version()
    return ((v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF)


__version__ = "%d.%d.%d" % version()


def init():
    """Loads and initialises the CUDA driver (raises NoDriverError, ...)."""
    lib.cw_init()


def device_count():
    n = ctypes.c_int()
    lib.cw_device_count(ctypes.byref(n))
    return n.value


def driver_version():
    v = ctypes.c_int()
    lib.cw_driver_version(ctypes.byref(v))
    return v.value


class _Handle:
    """A C handle with its destroy function, freed once by finalize/close."""

    _destroy = None

    def __init__(self, ptr, keep=()):
        self._ptr = ctypes.c_void_p(ptr)
        self._keep = keep  # parents that must outlive this handle
        self._finalizer = weakref.finalize(self, type(self)._free, self._destroy, self._ptr)

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

    def __init__(self, device=0, _ptr=None):
        super().__init__(_ptr if _ptr is not None else _new(lib.cw_context_create, device))

    @classmethod
    def wrap(cls, cu_context):
        return cls(_ptr=_new(lib.cw_context_wrap, ctypes.c_void_p(cu_context)))

    @property
    def device(self):
        d = ctypes.c_int()
        lib.cw_context_get_device(self.handle, ctypes.byref(d))
        return d.value

    @property
    def cu_context(self):
        h = ctypes.c_void_p()
        lib.cw_context_get_handle(self.handle, ctypes.byref(h))
        return h.value or 0

    def synchronize(self):
        lib.cw_context_synchronize(self.handle)


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
        if _borrowed:
            # A pool's stream: never destroyed here.
            self._ptr = ctypes.c_void_p(_ptr)
            self._keep = (context,)
            self._finalizer = weakref.finalize(self, lambda: None)
        else:
            super().__init__(_ptr, keep=(context,))
        self.context = context

    @classmethod
    def wrap(cls, context, stream):
        if hasattr(stream, "__cuda_stream__"):
            version, stream = stream.__cuda_stream__()
        return cls(context, _ptr=_new(lib.cw_stream_wrap, context.handle, ctypes.c_void_p(stream)))

    @property
    def cu_stream(self):
        h = ctypes.c_void_p()
        lib.cw_stream_get_handle(self.handle, ctypes.byref(h))
        return h.value or 0

    def __cuda_stream__(self):
        """The stream protocol CuPy, PyTorch and cuda.core read: (0, CUstream)."""
        return (0, self.cu_stream)

    def wait(self, other):
        """Work enqueued here from now on waits for `other`'s work so far."""
        lib.cw_stream_wait(self.handle, other.handle)

    def synchronize(self):
        lib.cw_stream_synchronize(self.handle)

    def done(self):
        st = lib.cw_stream_query(self.handle)
        if st == 0:
            return True
        if st == 8:  # CW_ERROR_NOT_READY
            return False
        raise _errors.from_status(st, last_error())


class Lease:
    """A stream leased from a StreamPool; released by release()/close() or
    leaving a with-block."""

    def __init__(self, pool, ptr):
        self.pool = pool
        self.stream = Stream(pool.context, _ptr=ptr, _borrowed=True)
        self._ptr = ctypes.c_void_p(ptr)
        self._finalizer = weakref.finalize(self, Lease._give_back, pool, self._ptr)

    @staticmethod
    def _give_back(pool, ptr):
        if ptr.value and not pool.closed:
            lib.cw_stream_pool_release(pool.handle, ctypes.byref(ptr))

    def release(self):
        self._finalizer()

    close = release

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        self.release()


class StreamPool(_Handle):
    _destroy = lib.cw_stream_pool_destroy

    def __init__(self, context, mode=POOL_LEASE, reserved=1, max_streams=0, priority=0):
        s = PoolSettings()
        lib.cw_stream_pool_settings_default(ctypes.byref(s))
        s.mode, s.reserved_streams, s.max_streams, s.priority = mode, reserved, max_streams, priority
        super().__init__(_new(lib.cw_stream_pool_create, context.handle, ctypes.byref(s)), keep=(context,))
        self.context = context

    def acquire(self):
        return Lease(self, _get(lib.cw_stream_pool_acquire, self.handle))

    def next(self):
        return Stream(self.context, _ptr=_get(lib.cw_stream_pool_next, self.handle), _borrowed=True)

    def stats(self):
        st = PoolStats()
        lib.cw_stream_pool_get_stats(self.handle, ctypes.byref(st))
        return {"mode": st.mode, "created": st.created, "leased": st.leased, "idle": st.idle, "named": st.named}


class Future(_Handle):
    """Completes when the work enqueued on `stream` so far is done.
    `await future` works in asyncio (through the future's eventfd)."""

    _destroy = lib.cw_future_destroy

    def __init__(self, stream, kind=WRITE_VALUE):
        super().__init__(_new(lib.cw_future_create, stream.handle, kind), keep=(stream.context,))

    def poll(self):
        st = lib.cw_future_poll(self.handle)
        if st == 0:
            return True
        if st == 8:  # CW_ERROR_NOT_READY
            return False
        raise _errors.from_status(st, last_error())

    def wait(self, timeout=None):
        """Blocks until complete; timeout in seconds (None: no limit)."""
        lib.cw_future_wait(self.handle, -1 if timeout is None else int(timeout * 1e6))

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
        lib.cw_timer_elapsed_ms(self.handle, ctypes.byref(ms))
        return ms.value


# Exception classes by name (NoDriverError, TimeoutError, ...) at package level.
for _cls in _errors.classes().values():
    globals()[_cls.__name__] = _cls
