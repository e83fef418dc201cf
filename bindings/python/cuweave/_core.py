# SPDX-License-Identifier: BSD-2-Clause
"""The library, devices, contexts, streams, pools, futures and timers."""

from __future__ import annotations

import asyncio
import ctypes
import enum
import itertools
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Generator, Iterable, List, NamedTuple, Optional, Sequence,
                    Tuple, TypeVar, Union)

from . import _check, _errors, _lib, _log
from ._lib import PoolInfo, PoolSettings, StreamSettings, lib

if TYPE_CHECKING:
    from ._graph import Capture, Graph

H = TypeVar("H", bound="_Handle")
_NOT_READY = _errors.NotReadyError.status


class FutureKind(enum.IntEnum):
    """How a Future learns that work completed (cw_future_kind)."""

    HOST_FUNC = 0    #: a host function the driver calls (cuLaunchHostFunc)
    WRITE_VALUE = 1  #: a word the GPU writes (cuStreamWriteValue32), the default
    EVENT = 2        #: an event (cuEventRecord)


class PoolMode(enum.IntEnum):
    """cw_stream_pool_mode."""

    LEASE = 0        #: acquire() hands out a stream no one else holds
    ROUND_ROBIN = 1  #: next() hands out the pool's streams in turn
    SINGLE = 2       #: one stream for everyone


class CaptureMode(enum.IntEnum):
    """cw_capture_mode (CUstreamCaptureMode)."""

    GLOBAL = 0
    THREAD_LOCAL = 1
    RELAXED = 2


class CaptureState(enum.IntEnum):
    """cw_capture_state."""

    NONE = 0
    ACTIVE = 1
    INVALIDATED = 2


class Feature(enum.IntEnum):
    """Optional driver features (cw_feature) for driver_has()."""

    GREEN_CONTEXTS = 0
    CONDITIONAL_NODES = 1
    LIBRARY_API = 2
    STREAM_GET_DEVICE = 3
    CTX_FROM_STREAM = 4
    NVRTC = 5


class Version(NamedTuple):
    """A version: ``(major, minor, patch)``; ``str()`` gives "2.28.3"."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return "%d.%d.%d" % self


class Versions(NamedTuple):
    """What cw_get_versions reports, readable: ``cuweave`` (the release),
    ``api`` (the ABI), ``driver`` (the CUDA version the driver supports),
    ``nvrtc``, ``nccl`` (each a Version, None when that library is absent)
    and ``builtin_origin`` (where the built-in kernels came from)."""

    cuweave: Version
    api: Version
    driver: Optional[Version]
    nvrtc: Optional[Version]
    nccl: Optional[Version]
    builtin_origin: str


def _unpack(v: int) -> Version:
    return Version((v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF)


def _cuda_version(code: int) -> Optional[Version]:
    # CUDA_VERSION style: 1000 * major + 10 * minor (13000 is 13.0)
    return Version(code // 1000, (code % 1000) // 10) if code > 0 else None


def _nccl_version(code: int) -> Optional[Version]:
    # NCCL_VERSION_CODE: 10000 * major + 100 * minor + patch from 2.9 on, 1000 * major + 100 * minor + patch before
    if code <= 0:
        return None
    if code >= 10000:
        return Version(code // 10000, (code % 10000) // 100, code % 100)
    return Version(code // 1000, (code % 1000) // 100, code % 100)


def version() -> Tuple[int, int, int]:
    """The loaded C library's release version, (major, minor, patch)
    (cw_version: nothing is loaded to answer; versions().cuweave is the
    same as a Version)."""
    v = _unpack(int(lib.cw_version()))
    return (v.major, v.minor, v.patch)


def abi_version() -> Tuple[int, int, int]:
    """The C library's ABI version, (major, minor, patch); its major is the
    soname's number (libcuweave.so.2)."""
    v = versions().api
    return (v.major, v.minor, v.patch)


def library() -> Tuple[str, str]:
    """Where the C library was loaded from: (where, path), where one of
    "CUWEAVE_LIBRARY", "package", "source tree", "find_library", "system"
    (cuweave._lib.candidates() has the order)."""
    return _lib.where, _lib.path


def init() -> None:
    """Loads and initialises the CUDA driver (raises NoDriverError, NoDeviceError, ...)."""
    lib.cw_init()


def device_count() -> int:
    """How many devices the driver shows (cw_device_count)."""
    n = ctypes.c_int()
    lib.cw_device_count(ctypes.byref(n))
    return int(n.value)


def versions() -> Versions:
    """The versions of cuweave, the CUDA driver, NVRTC and NCCL (a Versions
    named tuple; None for a library that is absent)."""
    v = _lib.Versions()
    lib.cw_get_versions(ctypes.byref(v))
    nvrtc = Version(int(v.nvrtc_major), int(v.nvrtc_minor)) if v.nvrtc_major > 0 else None
    return Versions(_unpack(int(v.cuweave)), _unpack(int(v.api)), _cuda_version(int(v.driver)), nvrtc,
                    _nccl_version(int(v.nccl)), (v.builtin_origin or b"").decode("utf-8", "replace"))


def driver_version() -> Optional[Version]:
    """The CUDA version the driver supports (Version(13, 0, 0)); None without a driver."""
    return versions().driver


def nccl_version() -> Optional[Version]:
    """NCCL's version, opening NCCL if need be (the path in CUWEAVE_LIBNCCL,
    else libnccl.so.2); None without it."""
    return versions().nccl


def device_info(device: int = 0) -> Dict[str, Any]:
    """What the driver says of a device (cw_device_get_info), as a dict: name,
    cc (major, minor), sm_count, total_memory, uuid (bytes), pci (domain,
    bus, device), and the other fields of cw_device_info by their names."""
    dev = _check.integer(device, "device", 0)
    i = _lib.DeviceInfo()
    lib.cw_device_get_info(dev, ctypes.byref(i))
    out: Dict[str, Any] = {name: getattr(i, name) for name, *_ in _lib.DeviceInfo._fields_
                           if name not in ("reserved", "uuid", "name")}
    out["name"] = i.name.decode("utf-8", "replace")
    out["uuid"] = bytes(i.uuid)
    out["cc"] = (i.cc_major, i.cc_minor)
    out["pci"] = (i.pci_domain, i.pci_bus, i.pci_device)
    return out


def driver_has(feature: Union[Feature, int]) -> bool:
    """Whether the driver has an optional feature (cw_driver_has; a Feature);
    False without a driver."""
    f = _check.member(feature, Feature, "feature")
    return bool(lib.cw_driver_has(int(f)))


def clear_error() -> None:
    """Resets the calling thread's error detail (cw_clear_error)."""
    lib.cw_clear_error()


def error_class(name: str) -> type:
    """The exception class of a C status name, e.g. 'CW_ERROR_NO_DRIVER'."""
    if not isinstance(name, str):
        raise TypeError("name must be a str, not %s" % type(name).__name__)
    for cls in _errors.classes().values():
        if cls.name == name:
            return cls
    raise ValueError("name: no status %r" % (name,))


def errors() -> Dict[int, type]:
    """{cw_status code: exception class}."""
    return dict(_errors.classes())


def _raise(code: int) -> None:
    raise _lib.error(code)


class _Handle(_check.Unique):
    """A C handle with its destroy function, freed once by finalize/close."""

    _destroy: Any = None
    _ptr: ctypes.c_void_p
    _keep: Tuple[Any, ...]
    _finalizer: "weakref.finalize[Any, Any]"

    def __init__(self, ptr: Optional[int], keep: Tuple[Any, ...] = ()) -> None:
        self._ptr = ctypes.c_void_p(ptr)
        self._keep = keep  # parents that must outlive this handle
        self._finalizer = weakref.finalize(self, type(self)._free, self._destroy, self._ptr)

    def _borrow(self, ptr: Optional[int], keep: Tuple[Any, ...]) -> None:
        """Holds a handle someone else owns (a pool's stream, a partition's
        context): never destroyed here; `keep` stays alive as long as this."""
        self._ptr = ctypes.c_void_p(ptr)
        self._keep = keep
        self._finalizer = weakref.finalize(self, _nothing)

    @staticmethod
    def _free(destroy: Callable[..., None], ptr: ctypes.c_void_p) -> None:
        if ptr.value:
            destroy(ctypes.byref(ptr))

    @property
    def handle(self) -> ctypes.c_void_p:
        """The C handle (a ctypes.c_void_p); ValueError once closed."""
        if not self._ptr.value:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._ptr

    @property
    def closed(self) -> bool:
        """True once close() ran (or the owner of a borrowed handle closed it)."""
        return not self._ptr.value

    def close(self) -> None:
        """Frees the C object (a borrowed one: lets go of it). Idempotent."""
        self._finalizer()

    def __enter__(self: H) -> H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _state(self) -> str:
        return ""

    def __repr__(self) -> str:
        if self.closed:
            return "<cuweave.%s closed>" % type(self).__name__
        try:
            state = self._state()
        except Exception as exc:  # noqa: BLE001 (a repr must not raise)
            state = "(%s)" % type(exc).__name__
        return "<cuweave.%s %#x%s>" % (type(self).__name__, self._ptr.value or 0, " " + state if state else "")


def _nothing() -> None:
    pass


def handle_of(value: object, cls: "type[H]", name: str) -> ctypes.c_void_p:
    """The open handle of a cuweave object given as parameter `name`."""
    obj = _check.instance(value, cls, name)
    if obj.closed:
        raise ValueError("%s: the %s is closed" % (name, cls.__name__))
    return obj._ptr


def _owner_key(owner: object) -> int:
    if owner is None:
        raise TypeError("owner must be an int key or an object, not None")
    if isinstance(owner, bool):
        raise TypeError("owner must be an int key or an object, not bool")
    key = _check.integer(owner, "owner", 1, (1 << 64) - 1) if isinstance(owner, int) else id(owner)
    return key


def _new(fn: Callable[..., Any], *args: Any) -> int:
    """Calls a cw_x_create-style function: the out-parameter comes first."""
    out = ctypes.c_void_p()
    fn(ctypes.byref(out), *args)
    return int(out.value or 0)


def _get(fn: Callable[..., Any], *args: Any) -> int:
    """Calls a getter-style function: the out-parameter comes last."""
    out = ctypes.c_void_p()
    fn(*args, ctypes.byref(out))
    return int(out.value or 0)


class Context(_Handle):
    """A device's primary context (``Context(0)``) or, with Context.wrap, a
    CUcontext the caller owns. A partition's or a device group's contexts
    are borrowed from their owner."""

    _destroy = lib.cw_context_destroy

    def __init__(self, device: int = 0, *, _ptr: Optional[int] = None, _owner: Any = None) -> None:
        if _owner is not None:  # a partition's context: borrowed from its group
            self._borrow(_ptr, (_owner,))
            return
        if _ptr is None:
            _ptr = _new(lib.cw_context_create, _check.integer(device, "device", 0))
        super().__init__(_ptr)

    @classmethod
    def wrap(cls, cu_context: int) -> "Context":
        """Wraps a CUcontext (an int) the caller owns and keeps alive
        (cw_context_wrap); closing the Context leaves the CUcontext alone."""
        ptr = _check.integer(cu_context, "cu_context", 1, (1 << 64) - 1)
        return cls(_ptr=_new(lib.cw_context_wrap, ctypes.c_void_p(ptr)))

    def _info(self) -> _lib.ContextInfo:
        i = _lib.ContextInfo()
        lib.cw_context_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def device(self) -> int:
        """The device ordinal."""
        return int(self._info().device)

    @property
    def cu_context(self) -> int:
        """The driver's CUcontext, as an int (borrowed)."""
        return int(self._info().handle or 0)

    def synchronize(self) -> None:
        """Waits until every stream of the context is idle (cw_context_synchronize)."""
        lib.cw_context_synchronize(self.handle)

    def close(self) -> None:
        """Frees the C context (a borrowed one: lets go of it), after the
        HostMemory allocated on it, which C frees only while the context
        lives (close() those first to choose the moment). Idempotent."""
        self._close_dependents()
        super().close()

    def _dependents(self) -> "weakref.WeakSet[Any]":
        """The objects (HostMemory) to close before this context goes."""
        deps: Optional["weakref.WeakSet[Any]"] = self.__dict__.get("_deps")
        if deps is None:
            deps = self.__dict__["_deps"] = weakref.WeakSet()
        return deps

    def _close_dependents(self) -> None:
        for obj in list(self._dependents()):
            obj.close()

    def enable_peer(self, peer: "Context") -> None:
        """Lets this context's device access `peer`'s device's memory (one
        direction; its buffer pool included). Idempotent: enabling a pair
        twice is fine; NotSupportedError where the topology does not allow it."""
        lib.cw_context_enable_peer(self.handle, handle_of(peer, Context, "peer"))

    def _state(self) -> str:
        i = self._info()
        kind = {0: "primary", 1: "external", 2: "green"}.get(int(i.kind), "kind %d" % i.kind)
        return "device %d %s" % (i.device, kind)


_CU_STREAM_LEGACY, _CU_STREAM_PER_THREAD = 0x1, 0x2


class Stream(_Handle):
    """A stream on a Context: ``Stream(ctx)`` is a new non-blocking one;
    Stream.wrap adopts another library's stream without owning it. Exposes
    ``__cuda_stream__`` (the protocol CuPy, PyTorch and cuda.core read)."""

    _destroy = lib.cw_stream_destroy
    context: Context

    def __init__(self, context: Context, priority: int = 0, blocking: bool = False, *,
                 _ptr: Optional[int] = None, _borrowed: bool = False) -> None:
        if _ptr is None:
            ctx = handle_of(context, Context, "context")
            s = StreamSettings()
            lib.cw_stream_settings_default(ctypes.byref(s))
            s.priority = _check.integer(priority, "priority")
            s.flags = 1 if _check.boolean(blocking, "blocking") else 0
            _ptr = _new(lib.cw_stream_create, ctx, ctypes.byref(s))
        if _borrowed:  # a pool's stream
            self._borrow(_ptr, (context,))
        else:
            super().__init__(_ptr, keep=(context,))
        self.context = context

    @classmethod
    def wrap(cls, context: Context, stream: Any) -> "Stream":
        """Adopts a CUstream without owning it (cw_stream_wrap): an int (0 or
        1: the legacy default stream, 2: the per-thread one), an object with
        ``__cuda_stream__`` (CuPy, cuda.core; protocol version 0), or one with
        a ``cuda_stream`` attribute (torch.cuda.Stream)."""
        ctx = handle_of(context, Context, "context")
        raw: Any = stream
        if hasattr(stream, "__cuda_stream__"):
            proto = stream.__cuda_stream__
            got = proto() if callable(proto) else proto  # a method (cuda.core, CuPy); a property elsewhere
            if not isinstance(got, tuple) or len(got) != 2:
                raise TypeError("stream: __cuda_stream__() must return (version, handle), not %r" % (got,))
            ver, raw = got
            if ver != 0:
                raise ValueError("stream: __cuda_stream__ protocol version %r is not supported (0 is)" % (ver,))
        elif hasattr(stream, "cuda_stream") and not isinstance(stream, int):
            raw = stream.cuda_stream
        handle = _check.integer(raw, "stream", 0, (1 << 64) - 1)
        return cls(context, _ptr=_new(lib.cw_stream_wrap, ctx, ctypes.c_void_p(handle)))

    def _info(self) -> _lib.StreamInfo:
        i = _lib.StreamInfo()
        lib.cw_stream_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def cu_stream(self) -> int:
        """The driver's CUstream as an int (0 for the wrapped legacy stream)."""
        return int(self._info().handle or 0)

    def __cuda_stream__(self) -> Tuple[int, int]:
        """The stream protocol CuPy, PyTorch and cuda.core read: (0, CUstream)."""
        return (0, self.cu_stream)

    def _protocol_value(self) -> int:
        """The stream as the CUDA array interface and DLPack name it: 1 for
        the legacy default stream, 2 for the per-thread one, else the CUstream."""
        i = self._info()
        h = int(i.handle or 0)
        if h == _CU_STREAM_PER_THREAD:
            return 2
        if i.is_null or h in (0, _CU_STREAM_LEGACY):
            return 1
        return h

    def wait(self, other: "Stream") -> None:
        """Work enqueued here from now on waits (on the GPU) for `other`'s work so far."""
        lib.cw_stream_wait(self.handle, handle_of(other, Stream, "other"))

    def synchronize(self) -> None:
        """Blocks until the stream's work so far has finished."""
        lib.cw_stream_synchronize(self.handle)

    def capture(self, mode: Union[CaptureMode, int] = CaptureMode.THREAD_LOCAL,
                into: Optional["Graph"] = None) -> "Capture":
        """``with stream.capture() as cap: ...``; then ``cap.graph``. The
        work is recorded into a Graph instead of running: a new one, or
        `into` (a Graph, such as a conditional node's body), which cap.graph
        is then."""
        from ._graph import Capture as _Capture, Graph as _Graph
        m = _check.member(mode, CaptureMode, "mode")
        if into is not None:
            handle_of(into, _Graph, "into")
        return _Capture(self, m, into)

    def capture_state(self) -> CaptureState:
        """CaptureState.NONE, ACTIVE or INVALIDATED (cw_capture_get_state)."""
        v = ctypes.c_int()
        lib.cw_capture_get_state(self.handle, ctypes.byref(v))
        return CaptureState(v.value)

    def fork(self) -> "Fork":
        """A Fork: its .stream runs work after this stream's work so far
        (cw_stream_fork); join() it to order this stream's later work after
        it and give it back. ``with s.fork() as child:`` joins at the end."""
        return Fork(self, _new(lib.cw_stream_fork, self.handle))

    def info(self) -> Dict[str, Any]:
        """cw_stream_get_info as a dict (handle, device, priority, flags,
        owned, from_pool, is_null)."""
        i = self._info()
        return {"handle": i.handle or 0, "device": i.device, "priority": i.priority, "flags": i.flags,
                "owned": bool(i.owned), "from_pool": bool(i.from_pool), "is_null": bool(i.is_null)}

    def done(self) -> bool:
        """Whether the stream's work so far has finished (cw_stream_query)."""
        st = int(lib.cw_stream_query(self.handle))
        if st == 0:
            return True
        if st == _NOT_READY:
            return False
        _raise(st)
        return False

    def _state(self) -> str:
        i = self._info()
        words = ["device %d" % i.device, "blocking" if i.flags & 1 else "non-blocking"]
        if i.is_null:
            words.append("legacy")
        if not i.owned:
            words.append("wrapped")
        if i.from_pool:
            words.append("from a pool")
        return " ".join(words)

    def __repr__(self) -> str:
        if self.closed:
            return "<cuweave.Stream closed>"
        try:
            return "<cuweave.Stream %#x %s>" % (self.cu_stream, self._state())
        except Exception as exc:  # noqa: BLE001
            return "<cuweave.Stream (%s)>" % type(exc).__name__


class _GiveBack(_check.Unique):
    """A borrowed stream that must be given back (a lease, a fork): give_back()
    (explicit, raises on failure) or, if forgotten, the finalizer, which
    reports a failure through the log callback instead of raising it. The
    stream object is closed either way."""

    _what = "giving a stream back"

    def __init__(self, stream: Stream) -> None:
        self.stream: Stream = stream
        self._ptr = stream._ptr  # shared: the give-back nulls it, closing the stream
        self._finalizer = weakref.finalize(self, type(self)._finalize, self._args(), self._ptr)

    def _args(self) -> Any:
        raise NotImplementedError

    @staticmethod
    def _call(args: Any, ptr: ctypes.c_void_p) -> None:
        raise NotImplementedError

    @classmethod
    def _finalize(cls, args: Any, ptr: ctypes.c_void_p) -> None:
        try:
            cls._call(args, ptr)
        except _errors.CuweaveError as exc:
            _log.report_failure(exc, cls._what)
        finally:
            ptr.value = None

    def _give_back(self) -> None:
        if self._finalizer.detach() is None:
            return  # given back already
        try:
            type(self)._call(self._args(), self._ptr)
        finally:
            self._ptr.value = None

    @property
    def closed(self) -> bool:
        """True once given back."""
        return not self._ptr.value

    def __enter__(self) -> Stream:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        self._give_back()

    def __repr__(self) -> str:
        return "<cuweave.%s %s>" % (type(self).__name__, "given back" if self.closed else repr(self.stream))


class Lease(_GiveBack):
    """A stream leased from a StreamPool (.stream); given back by release() /
    close() or leaving a with-block (which raise if the pool refuses), else by
    its finalizer (which reports a refusal through the log callback)."""

    _what = "giving a lease back (cw_stream_pool_release)"

    def __init__(self, pool: "StreamPool", ptr: int) -> None:
        self.pool: StreamPool = pool
        super().__init__(Stream(pool.context, _ptr=ptr, _borrowed=True))

    def _args(self) -> Any:
        return self.pool

    @staticmethod
    def _call(pool: "StreamPool", ptr: ctypes.c_void_p) -> None:
        if ptr.value and not pool.closed:
            lib.cw_stream_pool_release(pool.handle, ctypes.byref(ptr))

    def release(self) -> None:
        """Gives the stream back to the pool (idempotent; raises if the pool refuses)."""
        self._give_back()

    def close(self) -> None:
        """The same as release()."""
        self._give_back()


class Fork(_GiveBack):
    """A stream forked from a parent (Stream.fork, cw_stream_fork): work on
    .stream runs after the parent's work so far. join() (or leaving a
    with-block) makes the parent's later work wait for it and gives the stream
    back (cw_stream_join, raises on failure); a fork never joined is joined by
    its finalizer, which reports a failure through the log callback."""

    _what = "joining a forked stream (cw_stream_join)"

    def __init__(self, parent: Stream, ptr: int) -> None:
        self.parent: Stream = parent
        super().__init__(Stream(parent.context, _ptr=ptr, _borrowed=True))

    def _args(self) -> Any:
        return self.parent

    @staticmethod
    def _call(parent: Stream, ptr: ctypes.c_void_p) -> None:
        if ptr.value and not parent.closed:
            lib.cw_stream_join(parent.handle, ctypes.byref(ptr))

    def join(self) -> None:
        """Orders the parent's later work after the fork's and gives it back (idempotent)."""
        self._give_back()

    def close(self) -> None:
        """The same as join()."""
        self._give_back()


class StreamPool(_Handle):
    """A pool of streams on a Context (cw_stream_pool): lease mode
    (acquire(), the default), round-robin or single (next())."""

    _destroy = lib.cw_stream_pool_destroy
    context: Context

    def __init__(self, context: Context, mode: Union[PoolMode, int] = PoolMode.LEASE, reserved: int = 1,
                 max_streams: int = 0, priority: int = 0) -> None:
        ctx = handle_of(context, Context, "context")
        s = PoolSettings()
        lib.cw_stream_pool_settings_default(ctypes.byref(s))
        s.mode = int(_check.member(mode, PoolMode, "mode"))
        s.reserved_streams = _check.uint32(reserved, "reserved")
        s.max_streams = _check.uint32(max_streams, "max_streams")
        s.priority = _check.integer(priority, "priority")
        super().__init__(_new(lib.cw_stream_pool_create, ctx, ctypes.byref(s)), keep=(context,))
        self.context = context

    def acquire(self, timeout: Optional[float] = 0) -> Lease:
        """A lease (lease mode). When the pool is exhausted, waits up to
        `timeout` seconds for a release: 0 (the default) raises
        PoolExhaustedError at once, None waits without limit; then
        CuweaveTimeoutError."""
        us = _check.timeout_us(timeout)
        return Lease(self, _new(lib.cw_stream_pool_acquire, self.handle, ctypes.c_int64(us)))

    def next(self) -> Stream:
        """The next stream (round-robin and single modes; borrowed from the pool)."""
        return Stream(self.context, _ptr=_get(lib.cw_stream_pool_get_next, self.handle), _borrowed=True)

    def acquire_named(self, owner: object, name: str) -> Stream:
        """The stream named `name` of `owner` (cw_stream_pool_acquire_named):
        the same stream for the same (owner, name) until release_owner(owner).
        owner: an int key, or any object (its id() is the key: keep it alive
        while its streams are in use). The stream is borrowed from the pool."""
        key = _owner_key(owner)
        ptr = _new(lib.cw_stream_pool_acquire_named, self.handle, ctypes.c_void_p(key),
                   _check.text(name, "name"))
        return Stream(self.context, _ptr=ptr, _borrowed=True)

    def release_owner(self, owner: object) -> int:
        """Gives back every named stream of `owner`; returns how many."""
        key = _owner_key(owner)
        n = ctypes.c_size_t()
        lib.cw_stream_pool_release_owner(self.handle, ctypes.c_void_p(key), ctypes.byref(n))
        return int(n.value)

    def stats(self) -> Dict[str, int]:
        """The pool's counts (cw_stream_pool_get_info): mode, created, leased, idle, named."""
        st = PoolInfo()
        lib.cw_stream_pool_get_info(self.handle, ctypes.byref(st))
        return {"mode": st.mode, "created": st.created, "leased": st.leased, "idle": st.idle, "named": st.named}

    def _state(self) -> str:
        st = self.stats()
        return "device %d %s, %d streams, %d leased" % (self.context.device, PoolMode(st["mode"]).name.lower(),
                                                        st["created"], st["leased"])


_future_callbacks: Dict[int, Callable[[Optional[_errors.CuweaveError]], Any]] = {}
_future_keys = itertools.count(1)


class Future(_Handle):
    """Completes when the work enqueued on `stream` so far is done
    (cw_future). ``await future`` works in asyncio (through its eventfd)."""

    _destroy = lib.cw_future_destroy

    def __init__(self, stream: Stream, kind: Union[FutureKind, int] = FutureKind.WRITE_VALUE, *,
                 _ptr: Optional[int] = None, _context: Optional[Context] = None) -> None:
        if _ptr is None:
            sh = handle_of(stream, Stream, "stream")
            k = _check.member(kind, FutureKind, "kind")
            _ptr, _context = _new(lib.cw_future_create, sh, int(k)), stream.context
        super().__init__(_ptr, keep=(_context,))
        self.context: Optional[Context] = _context
        self._callbacks: List[int] = []  # keys of _future_callbacks this future set
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, Future._free_future, self._ptr, self._callbacks)

    @staticmethod
    def _free_future(ptr: ctypes.c_void_p, keys: List[int]) -> None:
        if ptr.value:
            lib.cw_future_destroy(ctypes.byref(ptr))
        for k in keys:  # a callback that never ran (its marker never completed)
            _future_callbacks.pop(k, None)

    @classmethod
    def when_all(cls, streams: Sequence[Stream], kind: Union[FutureKind, int] = FutureKind.WRITE_VALUE) -> "Future":
        """A future that completes when every stream (one context) has finished
        the work enqueued on it so far (cw_future_when_all)."""
        items = _check.sequence(streams, "streams")
        if not items:
            raise ValueError("streams must hold at least one Stream")
        hs = [handle_of(s, Stream, "streams[%d]" % i).value for i, s in enumerate(items)]
        k = _check.member(kind, FutureKind, "kind")
        arr = (ctypes.c_void_p * len(hs))(*hs)
        return cls(items[0], _ptr=_new(lib.cw_future_when_all, arr, len(hs), int(k)), _context=items[0].context)

    def set_spin(self, spin: float) -> None:
        """How long a waiter spins before sleeping, in seconds (default
        0.0002; at most 10)."""
        lib.cw_future_set_spin(self.handle, _check.duration(spin, "spin", 1000000, 10000000))

    def add_done_callback(self, fn: Callable[[Optional[_errors.CuweaveError]], Any]) -> None:
        """Calls fn(error) once when the future completes (cw_future_set_callback;
        one callback per future): error is None, or the CuweaveError of a
        device fault. It runs on the driver's callback thread (HOST_FUNC) or
        cuweave's watcher thread, or at once on this thread when already
        complete; it must not wait or enqueue work (future.h says what it may
        do). An exception it raises goes to sys.unraisablehook."""
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)
        h = self.handle
        key = next(_future_keys)
        _future_callbacks[key] = fn
        self._callbacks.append(key)
        try:
            lib.cw_future_set_callback(h, _c_future_done, ctypes.c_void_p(key))
        except BaseException:
            _future_callbacks.pop(key, None)
            raise

    def poll(self) -> bool:
        """True when complete, False when not yet; raises a device error."""
        st = int(lib.cw_future_poll(self.handle))
        if st == 0:
            return True
        if st == _NOT_READY:
            return False
        _raise(st)
        return False

    def wait(self, timeout: Optional[float] = None) -> None:
        """Blocks until complete: at most `timeout` seconds (None: no limit;
        0: only checks), then CuweaveTimeoutError."""
        us = _check.timeout_us(timeout)
        lib.cw_future_wait(self.handle, us)

    def rearm(self, stream: Stream) -> None:
        """Makes the future complete again after `stream`'s work so far (cw_future_rearm)."""
        lib.cw_future_rearm(self.handle, handle_of(stream, Stream, "stream"))

    def fileno(self) -> int:
        """An eventfd that becomes readable when the future completes (cw_future_get_fd)."""
        fd = ctypes.c_int()
        lib.cw_future_get_fd(self.handle, ctypes.byref(fd))
        return int(fd.value)

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait_async().__await__()

    async def _wait_async(self) -> None:
        if self.poll():
            return None
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.fileno()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, wake)
        try:
            if not self.poll():
                await ready
        finally:
            loop.remove_reader(fd)
        self.poll()  # raises a device error, if any
        return None

    def _state(self) -> str:
        st = int(lib.cw_future_poll(self._ptr))
        return "done" if st == 0 else "pending" if st == _NOT_READY else _errors.classes().get(
            st, _errors.CuweaveError).__name__


def _py_future_done(user: Optional[int], future: Optional[int], status: int) -> None:
    fn = _future_callbacks.pop(user or 0, None)
    if fn is None:
        return
    try:
        fn(None if status == 0 else _errors.from_status(status, {}))
    except BaseException as exc:  # noqa: BLE001 (nothing may cross into C)
        _log.unraisable(exc, "in a cuweave future callback %r" % (fn,))




_c_future_done: Any = _lib.FUTURE_FN(_py_future_done)
class Timer(_Handle):
    """Measures GPU time between two points of streams (cw_timer, CUDA events)."""

    _destroy = lib.cw_timer_destroy

    def __init__(self, context: Context) -> None:
        super().__init__(_new(lib.cw_timer_create, handle_of(context, Context, "context")), keep=(context,))

    def start(self, stream: Stream) -> None:
        """Records the start on `stream`."""
        lib.cw_timer_start(self.handle, handle_of(stream, Stream, "stream"))

    def stop(self, stream: Stream) -> None:
        """Records the end on `stream`."""
        lib.cw_timer_stop(self.handle, handle_of(stream, Stream, "stream"))

    def elapsed(self) -> float:
        """The GPU time from start to stop, in seconds (waits for the stop)."""
        ms = ctypes.c_float()
        lib.cw_timer_get_elapsed_ms(self.handle, ctypes.byref(ms))
        return float(ms.value) / 1000.0


def partition_caps(device: int = 0) -> Dict[str, int]:
    """What green contexts the device supports: a dict of cw_partition_caps."""
    c = _lib.PartitionCaps()
    lib.cw_partition_get_caps(_check.integer(device, "device", 0), ctypes.byref(c))
    return {name: getattr(c, name) for name, *_ in _lib.PartitionCaps._fields_ if name != "reserved"}


class PartitionGroup(_Handle):
    """Disjoint SM partitions of a device made by one split (green contexts):
    PartitionGroup([16, 8]) has partitions 0 and 1 and the leftover one last.
    context(i) is partition i's Context (borrowed from the group; it keeps the
    group object alive). Closing the group never fails: a partition on which
    objects live stays until they are closed."""

    _destroy = lib.cw_partition_group_destroy

    def __init__(self, sm_counts: Sequence[int], device: int = 0, default: int = -1) -> None:
        counts = [_check.uint32(n, "sm_counts[%d]" % i) for i, n in enumerate(_check.sequence(sm_counts, "sm_counts"))]
        dev = _check.integer(device, "device", 0)
        dflt = _check.integer(default, "default", -1)
        arr = (ctypes.c_uint * max(len(counts), 1))(*counts)
        super().__init__(_new(lib.cw_partition_group_create, dev, arr, len(counts), dflt))

    def __len__(self) -> int:
        i = _lib.PartitionGroupInfo()
        lib.cw_partition_group_get_info(self.handle, ctypes.byref(i))
        return int(i.count)

    def context(self, index: int) -> Context:
        """Partition `index`'s Context (borrowed from the group)."""
        idx = _check.size(index, "index")
        i = _lib.PartitionInfo()
        lib.cw_partition_group_get_partition(self.handle, ctypes.c_size_t(idx), ctypes.byref(i))
        return Context(_ptr=i.context, _owner=self)

    def _state(self) -> str:
        return "%d partitions" % len(self)


def contexts_of(objs: Iterable[Any], name: str) -> Tuple[ctypes.Array[ctypes.c_void_p], int]:
    """An array of open handles of Contexts."""
    items = _check.sequence(objs, name)
    hs = [handle_of(c, Context, "%s[%d]" % (name, i)).value for i, c in enumerate(items)]
    return (ctypes.c_void_p * max(len(hs), 1))(*hs), len(hs)
