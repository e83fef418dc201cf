# SPDX-License-Identifier: BSD-2-Clause
"""Device buffers (with the CUDA array interface and DLPack), page-locked
host memory, and what is shared between processes."""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import _check, _dlpack, _lib, _log
from ._core import CaptureState, Context, Stream, _Handle, _new, handle_of
from ._lib import BufferInfo, lib

Shape = Union[int, Sequence[int]]
_TYPESTR = {"bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
            "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
            "complex64": "<c8", "complex128": "<c16"}


def typestr(dtype: object, name: str = "dtype") -> str:
    """A __cuda_array_interface__ typestr from a name ("float32"), a typestr
    ("<f4") or anything with a .str (a NumPy or CuPy dtype)."""
    raw = getattr(dtype, "str", dtype)
    if not isinstance(raw, str):
        raise TypeError("%s must be a str such as 'float32' or a NumPy dtype, not %s" %
                        (name, "None" if dtype is None else type(dtype).__name__))
    t = _TYPESTR.get(raw, raw)
    if len(t) < 3 or t[0] not in "<>|=" or t[1] not in "iufbc" or not t[2:].isdigit() or int(t[2:]) == 0:
        raise ValueError("%s: unknown element type %r" % (name, raw))
    return t


def shape_of(shape: object, name: str = "shape") -> Tuple[int, ...]:
    if isinstance(shape, (list, tuple)):
        return tuple(_check.size(n, "%s[%d]" % (name, i)) for i, n in enumerate(shape))
    return (_check.size(shape, name),)


def _count(shape: Tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


class Buffer(_Handle):
    """Device memory from the context's stream-ordered pool (cw_buffer,
    docs/pipelines.md): allocated on `stream`, freed when closed, on the GPU,
    after every use recorded with used_by().

    Other libraries take it without a copy: through
    ``__cuda_array_interface__`` (version 3; ``cupy.asarray(buf)``,
    ``torch.as_tensor(buf, device="cuda")``, Numba) and through DLPack
    (``__dlpack__``, ``__dlpack_device__``: ``torch.from_dlpack(buf)``,
    ``cupy.from_dlpack(buf)``, ``jax.dlpack.from_dlpack(buf)``). The
    interface's ``stream`` is the stream that last wrote the data as far as
    cuweave knows (the allocating one, or the one given to written_on());
    DLPack orders the consumer's stream after it. Work on another library's
    stream that reads or writes the buffer must be recorded
    (``used_by(Stream.wrap(ctx, their_stream))``) before close, or the
    memory may be reused under it (what DLPack's consumer queues before its
    __dlpack__ call is recorded for it)."""

    _destroy = lib.cw_buffer_destroy
    context: Context
    shape: Tuple[int, ...]
    typestr: str
    nbytes: int
    _stream: Optional[Stream]

    def __init__(self, stream: Stream, shape: Shape, dtype: object = "uint8") -> None:
        sh = handle_of(stream, Stream, "stream")
        self._setup(shape, dtype)
        if self.nbytes == 0:
            raise ValueError("shape: a buffer holds at least one byte, not %r" % (self.shape,))
        super().__init__(_new(lib.cw_buffer_create, sh, self.nbytes), keep=(stream.context,))
        self.context = stream.context
        self._stream = stream

    def _setup(self, shape: object, dtype: object) -> None:
        self.shape = shape_of(shape)
        self.typestr = typestr(dtype)
        self.nbytes = _count(self.shape) * int(self.typestr[2:])

    @classmethod
    def _wrap(cls, ptr: int, context: Context, stream: Optional[Stream], shape: Sequence[int], dtype: str,
              owned: bool) -> "Buffer":
        """A Buffer object for a cw_buffer made elsewhere: owned (drops a
        reference when closed) or borrowed (a compute call's: closed with it)."""
        self = cls.__new__(cls)
        self._setup(tuple(shape), dtype)
        if owned:
            _Handle.__init__(self, ptr, keep=(context,))
        else:
            self._borrow(ptr, (context,))
        self.context = context
        self._stream = stream
        return self

    def keep(self) -> "Buffer":
        """A Buffer holding a reference of its own (cw_buffer_retain), for a
        buffer borrowed inside a compute call (io.alloc, a message's) to be
        used after it. Its __cuda_array_interface__ names no stream: the
        caller orders its use (a buffer with more than one reference is
        read-only to C's cw_buffer_get_writable)."""
        lib.cw_buffer_retain(self.handle)
        return Buffer._wrap(self._ptr.value or 0, self.context, None, self.shape, self.typestr, owned=True)

    def view(self, shape: Shape, dtype: object) -> "BufferView":
        """An object with __cuda_array_interface__ over this buffer's memory
        as `shape` elements of `dtype` (at most nbytes), naming no stream: for
        use on a stream already ordered after the buffer's writer (inside
        compute: the stream io.receive_stream gave). Keeps the buffer object."""
        return BufferView(self, shape, dtype)

    def _info(self) -> BufferInfo:
        i = BufferInfo()
        lib.cw_buffer_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def ptr(self) -> int:
        """The device address (an int)."""
        return int(self._info().dptr)

    @property
    def device(self) -> int:
        """The device ordinal of the memory."""
        return int(self._info().device)

    def info(self) -> Dict[str, int]:
        """cw_buffer_get_info: ptr, nbytes, refs, uses, device."""
        i = self._info()
        return {"ptr": i.dptr, "nbytes": i.bytes, "refs": i.refs, "uses": i.uses, "device": i.device}

    def used_by(self, stream: Stream) -> None:
        """The free waits for the work queued on `stream` so far."""
        lib.cw_buffer_use(self.handle, handle_of(stream, Stream, "stream"))

    def written_on(self, stream: Stream) -> None:
        """Names the stream whose work last wrote the data (what consumers of
        __cuda_array_interface__ and DLPack are ordered after), and records
        it as a use."""
        self.used_by(stream)
        self._stream = stream

    def copy_from_host(self, stream: Stream, data: Any) -> None:
        """Queues a copy of `data` (bytes-like, at most nbytes) to the buffer
        on `stream`; pageable memory is staged by the driver (reusable when
        this returns). `stream` then wrote the buffer (written_on); inside a
        capture (page-locked data: HostMemory.view()) the use is not
        recorded: order the buffer's free after the graph's launches
        (used_by on the stream that launches it)."""
        sh = handle_of(stream, Stream, "stream")
        try:
            view = memoryview(data).cast("B")
        except TypeError:
            raise TypeError("data must be bytes-like, not %s" % ("None" if data is None
                                                                 else type(data).__name__)) from None
        if view.nbytes > self.nbytes:
            raise ValueError("data: %d bytes do not fit in a %d-byte buffer" % (view.nbytes, self.nbytes))
        tmp = (ctypes.c_char * view.nbytes).from_buffer_copy(view) if view.readonly else \
            (ctypes.c_char * view.nbytes).from_buffer(view)
        lib.cw_copy_to_device(sh, self.ptr, tmp, view.nbytes)
        if stream.capture_state() == CaptureState.NONE:  # a use cannot be recorded in a capture (cw_buffer_use)
            self.written_on(stream)

    def copy_to_host(self, stream: Stream, out: Any = None) -> Any:
        """Copies the buffer to `out` (a writable bytes-like object of at least
        nbytes; a new bytearray when None) on `stream` and waits for it."""
        sh = handle_of(stream, Stream, "stream")
        if out is None:
            out = bytearray(self.nbytes)
        try:
            view = memoryview(out).cast("B")
        except TypeError:
            raise TypeError("out must be a writable bytes-like object, not %s" % type(out).__name__) from None
        if view.readonly or view.nbytes < self.nbytes:
            raise ValueError("out must be a writable buffer of at least %d bytes" % self.nbytes)
        dst = (ctypes.c_char * view.nbytes).from_buffer(view)
        wait_writer(stream, self)
        lib.cw_copy_to_host(sh, dst, self.ptr, self.nbytes)
        self.used_by(stream)
        stream.synchronize()
        return out

    def copy_from(self, stream: Stream, src: "Buffer") -> None:
        """Queues a copy of the whole of Buffer `src` (at most nbytes; any
        device) into this buffer on `stream` (a stream of either device;
        cw_buffer_copy), after the streams that last wrote either buffer;
        records the use of both. This buffer's data is then written on
        `stream`."""
        sh = handle_of(stream, Stream, "stream")
        srch = handle_of(src, Buffer, "src")
        wait_writer(stream, src)
        wait_writer(stream, self)
        lib.cw_buffer_copy(self.handle, srch, sh)
        self._stream = stream

    def _writer(self) -> Optional[Stream]:
        w = self._stream
        return w if w is not None and not w.closed else None

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """The CUDA array interface (version 3): "stream" is the last
        writer's (1 for the legacy default stream, 2 for the per-thread one,
        else the CUstream; None when no writer is known)."""
        w = self._writer()
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": w._protocol_value() if w is not None else None,  # 1: the legacy stream
        }

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCUDA, the device ordinal): the DLPack protocol."""
        return (_dlpack.KDL_CUDA, self.device)

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule over the buffer (no copy). `stream` is the
        consumer's: None or 1 the legacy default stream, 2 the per-thread
        one, another int a CUstream, -1 no ordering; the consumer's stream is
        made to wait (on the GPU) for the buffer's last writer, and that use
        is recorded. The capsule holds a reference of its own (the memory
        stays until the consumer deletes the tensor and the Buffer is
        closed; a capsule no one consumed lets go at the next garbage
        collection or export once no one holds it). A versioned capsule
        (DLPack 1.0) when max_version allows."""
        h = self.handle
        if copy is not None and not isinstance(copy, bool):
            raise TypeError("copy must be a bool or None, not %s" % type(copy).__name__)
        if copy:
            raise BufferError("copy: a Buffer is exported without a copy (copy=True cannot be honoured)")
        if dl_device is not None:
            if not isinstance(dl_device, tuple) or len(dl_device) != 2:
                raise TypeError("dl_device must be a (device_type, device_id) tuple, not %r" % (dl_device,))
            if tuple(dl_device) != self.__dlpack_device__():
                raise BufferError("dl_device: the buffer is on %r, not %r" % (self.__dlpack_device__(), dl_device))
        versioned = False
        if max_version is not None:
            if not isinstance(max_version, tuple) or len(max_version) != 2:
                raise TypeError("max_version must be a (major, minor) tuple, not %r" % (max_version,))
            versioned = _check.integer(max_version[0], "max_version[0]", 0) >= 1
        value = 1 if stream is None else _check.integer(stream, "stream", -1, (1 << 64) - 1)
        if value == 0:
            raise ValueError("stream: 0 is ambiguous for CUDA (1: the legacy default stream, 2: per-thread)")
        if value != -1:
            consumer = Stream.wrap(self.context, value)
            try:
                w = self._writer()
                if w is not None and w._protocol_value() != value:
                    consumer.wait(w)
                self.used_by(consumer)
            finally:
                consumer.close()
        lib.cw_buffer_retain(h)
        ref = ctypes.c_void_p(h.value)

        def release() -> None:
            lib.cw_buffer_destroy(ctypes.byref(ref))

        try:
            return _dlpack.export(self.ptr, self.shape, self.typestr, self.device, versioned, release)
        except BaseException:
            release()
            raise

    @classmethod
    def create_shareable(cls, stream: Stream, shape: Shape, dtype: object = "uint8") -> "Buffer":
        """A Buffer another process can import (cw_buffer_create_shareable:
        cuMemAlloc'd, not pool memory). Export it with export()."""
        sh = handle_of(stream, Stream, "stream")
        self = cls.__new__(cls)
        self._setup(shape, dtype)
        if self.nbytes == 0:
            raise ValueError("shape: a buffer holds at least one byte, not %r" % (self.shape,))
        _Handle.__init__(self, _new(lib.cw_buffer_create_shareable, sh, self.nbytes), keep=(stream.context,))
        self.context = stream.context
        self._stream = stream
        return self

    def export(self) -> bytes:
        """The handle (128 bytes) another process of this machine passes to
        Buffer.import_handle (cw_buffer_export). The memory stays until every
        importer closed (docs/sharing.md)."""
        h = _lib.SharedHandle()
        lib.cw_buffer_export(self.handle, ctypes.byref(h))
        return bytes(h.bytes)

    @classmethod
    def import_handle(cls, stream: Stream, handle: bytes, shape: Optional[Shape] = None,
                      dtype: object = "uint8") -> "Buffer":
        """Opens another process's exported buffer on stream's context
        (cw_buffer_import); shape defaults to its size in elements of dtype."""
        sh = handle_of(stream, Stream, "stream")
        h = shared_handle(handle)
        t = typestr(dtype)
        dims = shape_of(shape) if shape is not None else None
        out = _new(lib.cw_buffer_import, sh, ctypes.byref(h))
        info = _lib.BufferInfo()
        lib.cw_buffer_get_info(ctypes.c_void_p(out), ctypes.byref(info))
        if dims is None:
            dims = (int(info.bytes) // int(t[2:]),)
        return cls._wrap(out, stream.context, stream, dims, t, owned=True)

    def _state(self) -> str:
        i = self._info()
        return "device %d %s %r, %d bytes at %#x" % (i.device, self.typestr, self.shape, i.bytes, i.dptr)


def wait_writer(stream: Stream, buf: object) -> None:
    """Orders `stream` after the stream that last wrote Buffer `buf` (any device)."""
    if isinstance(buf, Buffer):
        w = buf._writer()
        if w is not None and w is not stream:
            stream.wait(w)


def shared_handle(handle: object, name: str = "handle") -> _lib.SharedHandle:
    if not isinstance(handle, (bytes, bytearray, memoryview)):
        raise TypeError("%s must be the 128 bytes export() gave, not %s" %
                        (name, "None" if handle is None else type(handle).__name__))
    data = bytes(handle)
    if len(data) != 128:
        raise ValueError("%s: a shared handle is 128 bytes, not %d" % (name, len(data)))
    h = _lib.SharedHandle()
    ctypes.memmove(h.bytes, data, 128)
    return h


class BufferView:
    """Buffer.view: the buffer's memory under another shape, naming no stream."""

    def __init__(self, buf: Buffer, shape: Shape, dtype: object) -> None:
        self.buffer: Buffer = _check.instance(buf, Buffer, "buf")
        self.shape: Tuple[int, ...] = shape_of(shape)
        self.typestr: str = typestr(dtype)
        if _count(self.shape) * int(self.typestr[2:]) > buf.nbytes:
            raise ValueError("shape: a view of %r %s exceeds the %d-byte buffer" % (self.shape, self.typestr,
                                                                                     buf.nbytes))

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """The CUDA array interface (version 3), naming no stream."""
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.buffer.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def __repr__(self) -> str:
        return "<cuweave.BufferView %s %r of %r>" % (self.typestr, self.shape, self.buffer)


def from_dlpack(obj: Any, stream: Optional[Stream] = None) -> _dlpack.DLPackArray:
    """Takes another library's device array through DLPack, without a copy
    (a DLPackArray: usable by Kernel.launch, copy_peer and the collectives).
    ``obj.__dlpack__(stream=...)`` is asked to order its pending work before
    `stream` (a cuweave Stream you will use the data on; None: the legacy
    default stream, which does not order non-blocking streams)."""
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise TypeError("obj must support DLPack (__dlpack__, __dlpack_device__), not %s" %
                        ("None" if obj is None else type(obj).__name__))
    value: Optional[int] = None
    if stream is not None:
        handle_of(stream, Stream, "stream")
        value = stream._protocol_value()
    dev = obj.__dlpack_device__()
    if int(dev[0]) not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_HOST, _dlpack.KDL_CUDA_MANAGED):
        raise ValueError("obj: a DLPack tensor on device type %d, not CUDA memory" % int(dev[0]))
    try:
        capsule = obj.__dlpack__(stream=value, max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0's max_version
        capsule = obj.__dlpack__(stream=value)
    return _dlpack.take(capsule, obj)


class HostMemory(_check.Unique):
    """Page-locked, device-mapped host memory (cw_host_alloc), zeroed: copies
    from and to it run asynchronously, and kernels may use it at the same
    address (.ptr). mem.view() (a ctypes char array: memoryview(mem.view()),
    bytes(mem.view())) reads and writes it from Python and keeps the
    HostMemory object alive (memoryview(mem) too, from Python 3.12). Freed by
    close() (then no view may be used), its Context's close() (C frees it
    only while the context lives) or its finalizer (cw_host_free; while a
    resident loop runs the free waits for it to stop)."""

    def __init__(self, context: Context, nbytes: int) -> None:
        ctx = handle_of(context, Context, "context")
        self.context: Context = context
        self.nbytes: int = _check.size(nbytes, "nbytes", 1)
        self._ptr = ctypes.c_void_p(_new(lib.cw_host_alloc, ctx, self.nbytes))
        self._finalizer = weakref.finalize(self, HostMemory._free, context, self._ptr)
        context._dependents().add(self)  # Context.close() frees it first

    @staticmethod
    def _free(context: Context, ptr: ctypes.c_void_p) -> None:
        if not ptr.value:
            return
        if context.closed:  # (a borrowed context whose owner let go of it unseen): C cannot free it
            _log.report(_log.LogLevel.WARNING, "cuweave (Python): HostMemory at %#x not freed: its Context "
                        "was closed first" % ptr.value)
            ptr.value = None
            return
        lib.cw_host_free(context.handle, ctypes.byref(ptr))

    @property
    def ptr(self) -> int:
        """The address (the same on the host and in kernels)."""
        if not self._ptr.value:
            raise ValueError("HostMemory is closed")
        return int(self._ptr.value)

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return not self._ptr.value

    def view(self) -> Any:
        """A writable ctypes char array over the memory (keeps it alive)."""
        arr: Any = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        arr._cuweave_owner = self
        return arr

    def __buffer__(self, flags: int) -> memoryview:  # Python 3.12's buffer protocol for classes
        return memoryview(self.view())

    def __len__(self) -> int:
        return self.nbytes

    def close(self) -> None:
        """Frees the memory (cw_host_free). Idempotent."""
        self._finalizer()

    def __enter__(self) -> "HostMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "<cuweave.HostMemory closed>"
        try:
            device = "device %d" % self.context.device
        except Exception as exc:  # noqa: BLE001 (a repr must not raise: its context closed, say)
            device = "(%s)" % type(exc).__name__
        return "<cuweave.HostMemory %#x %d bytes, %s>" % (self.ptr, self.nbytes, device)


class SharedEvent(_Handle):
    """An event shared between processes (cw_shared_event): record() in
    one, wait() in another; export() gives the bytes to pass over."""

    _destroy = lib.cw_shared_event_destroy

    def __init__(self, context: Context, handle: Optional[bytes] = None) -> None:
        ctx = handle_of(context, Context, "context")
        if handle is None:
            ptr = _new(lib.cw_shared_event_create, ctx)
        else:
            h = shared_handle(handle)
            ptr = _new(lib.cw_shared_event_import, ctx, ctypes.byref(h))
        super().__init__(ptr, keep=(context,))
        self.context: Context = context

    @classmethod
    def import_handle(cls, context: Context, handle: bytes) -> "SharedEvent":
        """Opens another process's exported event (cw_shared_event_import)."""
        shared_handle(handle)
        return cls(context, handle)

    def export(self) -> bytes:
        """The 128 bytes another process passes to SharedEvent.import_handle."""
        h = _lib.SharedHandle()
        lib.cw_shared_event_export(self.handle, ctypes.byref(h))
        return bytes(h.bytes)

    def record(self, stream: Stream) -> None:
        """Records the event after `stream`'s work so far."""
        lib.cw_shared_event_record(self.handle, handle_of(stream, Stream, "stream"))

    def wait(self, stream: Stream) -> None:
        """Work enqueued on stream from now on waits for the latest record."""
        lib.cw_shared_event_wait(self.handle, handle_of(stream, Stream, "stream"))

    def info(self) -> Dict[str, Any]:
        """cw_shared_event_get_info: imported, importers."""
        i = _lib.SharedEventInfo()
        lib.cw_shared_event_get_info(self.handle, ctypes.byref(i))
        return {"imported": bool(i.imported), "importers": i.importers}

    def _state(self) -> str:
        i = self.info()
        return "device %d %s" % (self.context.device, "imported" if i["imported"] else "%d importers" % i["importers"])
