# SPDX-License-Identifier: BSD-2-Clause
"""DLPack over ctypes (https://dmlc.github.io/dlpack/latest/): the C
structures, the capsules Buffer.__dlpack__ hands out, and from_dlpack, which
takes another library's tensor.

Export: the DLManagedTensor (or DLManagedTensorVersioned) and its shape and
strides are ctypes objects held in _exports under the struct's address,
together with what must stay alive (the Buffer's own C reference, taken with
cw_buffer_retain). Its deleter, one ctypes function made once and never
freed, takes them out and drops the reference: the memory is freed (on the
GPU, after every use recorded on the buffer) only when both the consumer and
the Buffer object let go. A capsule no consumer took (its name is still
"dltensor") is released once no one holds it: _exports keeps it until a
consumer renames it, and _sweep (at each export, each garbage collection)
finds those held by _exports alone. (The protocol has the capsule's
destructor do it; one in Python loses the exception a failing consumer has
pending: _sweep says why.) _exports and the deleter live as long as the
process; from atexit on, the deleter fields are NULL (_at_exit).

Import: from_dlpack renames the capsule ("used_dltensor") so that its
destructor leaves the tensor alone, and DLPackArray calls the producer's
deleter when it is closed or collected (refusing, after that call, what a
consumer must refuse).
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._check import Unique as _Unique

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}   # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_KINDS = {v: k for k, v in _CODES.items()}
_KINDS[4] = "V"  # kDLBfloat: no typestr of its own (raw 2-byte values)
FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Names live as long as the module (capsules keep pointers to them).
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"



def _capi(name: str, restype: Any, argtypes: List[Any]) -> Any:
    # A function object of our own (pythonapi["..."] makes a new one; pythonapi.NAME is
    # shared with every other user of ctypes, who may set other argtypes on it).
    f = ctypes.pythonapi[name]
    f.restype, f.argtypes = restype, argtypes
    return f


_capsule_new = _capi("PyCapsule_New", ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p])
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p])
_capsule_get_name = _capi("PyCapsule_GetName", ctypes.c_char_p, [ctypes.c_void_p])
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])
_incref = _capi("Py_IncRef", None, [ctypes.py_object])


class _Export:
    """One exported tensor: the ctypes objects the consumer reads, the
    release of the Buffer's reference, and the capsule while no consumer
    has taken it."""

    __slots__ = ("m", "shape", "strides", "release", "capsule")

    def __init__(self, m: Any, shape: Any, strides: Any, release: Callable[[], None]) -> None:
        self.m, self.shape, self.strides, self.release = m, shape, strides, release
        self.capsule: Any = None


# Reentrant: a garbage collection may run a DLPackArray's finalizer, and so the deleter, in a
# thread that holds it (the sweep's snapshot allocates); nothing iterates _exports itself.
_lock = threading.RLock()
# address of the managed tensor -> its _Export. Never freed (nor what it holds): a consumer may
# read a tensor, and call its deleter, until the process ends (a C++ static's destructor runs
# after the interpreter's teardown, which would free a module's objects).
_exports: Dict[int, _Export] = {}
_incref(_exports)


def _release(addr: int, which: Optional[_Export] = None) -> None:
    """Takes the tensor at `addr` out of _exports and drops its reference;
    `which`: only if that is still the entry there (the address of a freed
    struct may be a new export's by then)."""
    with _lock:
        entry = _exports.get(addr)
        if entry is None or (which is not None and entry is not which):
            return
        del _exports[addr]
    entry.release()


def _py_deleter(addr: Optional[int]) -> None:
    # Called by the consumer, on any thread, the GIL taken by ctypes. (A consumer that calls it with
    # an exception pending loses that exception: a ctypes callback cannot keep it.)
    try:
        _release(addr or 0)
    except BaseException:  # noqa: BLE001 (nothing may cross into C)
        pass


_c_deleter: Any = DELETER(_py_deleter)
_incref(_c_deleter)  # outlives the module's teardown, as _exports


def _sweep() -> None:
    """Lets go of the capsules a consumer took (renamed "used_dltensor") and
    releases those no one but _exports holds any more (never consumed).

    The capsules have no destructor: one written in Python (a ctypes
    callback) would run with the exception a failing consumer has pending
    when it drops the capsule (NumPy's from_dlpack of a CUDA buffer, a
    Cython consumer's error path), and lose it ("SystemError: ... returned
    NULL without setting an exception") and the reference with it. Run by
    every export, exported(), and each garbage collection."""
    with _lock:  # a snapshot (dict.copy() runs no finalizer once it copies)
        entries = _exports.copy()
    for addr, e in entries.items():
        cap = e.capsule  # held while its name is read (another sweep may drop e's reference)
        if cap is None:
            continue
        taken = _capsule_get_name(ctypes.c_void_p(id(cap))) not in (_NAME, _NAME_V)
        del cap
        if taken:
            e.capsule = None  # the consumer calls the deleter
        elif sys.getrefcount(e.capsule) <= 2:  # e's reference and the argument's: no one else can reach it
            _release(addr, e)  # (another sweep may have released it, and its address be a new export's)


def _gc_sweep(phase: str, info: Dict[str, Any]) -> None:
    try:
        if phase == "stop":
            _sweep()
    except BaseException:  # noqa: BLE001 (a gc callback must not raise)
        pass


gc.callbacks.append(_gc_sweep)


def _at_exit() -> None:
    # From here on (module teardown, C atexit handlers after the interpreter is gone) no consumer
    # may call into Python: the deleter field of every tensor still out is NULL (DLPack: "It can be
    # NULL"), and the consumer leaks it, as the process is ending.
    try:
        gc.callbacks.remove(_gc_sweep)
    except ValueError:
        pass
    _sweep()
    with _lock:
        entries = _exports.copy()
    for e in entries.values():
        e.m.deleter = DELETER()


atexit.register(_at_exit)


def exported() -> int:
    """How many exported tensors are still held by their consumers."""
    _sweep()
    with _lock:
        return len(_exports)


def dtype_of(typestr: str) -> Tuple[int, int]:
    """(DLPack type code, bits) of a __cuda_array_interface__ typestr."""
    code = _CODES.get(typestr[1])
    if code is None:
        raise BufferError("no DLPack type for %r" % typestr)
    return code, 8 * int(typestr[2:])


def export(ptr: int, shape: Tuple[int, ...], typestr: str, device: int, versioned: bool,
           release: Callable[[], None]) -> Any:
    """A DLPack capsule over `ptr` (CUDA memory of `device`, C order);
    release() runs when the consumer deletes the tensor (or, once the
    capsule goes unused, at the next sweep)."""
    _sweep()
    code, bits = dtype_of(typestr)
    ndim = len(shape)
    c_shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    c_strides = (ctypes.c_int64 * max(ndim, 1))(*reversed(strides))
    m: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    t.data = ptr
    t.device.device_type, t.device.device_id = KDL_CUDA, device
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    m.deleter = _c_deleter
    if versioned:
        m.version.major, m.version.minor = 1, 0
        m.flags = 0
    addr = ctypes.addressof(m)
    m.manager_ctx = addr
    entry = _Export(m, c_shape, c_strides, release)
    with _lock:
        _exports[addr] = entry
    try:
        capsule = _capsule_new(addr, _NAME_V if versioned else _NAME, None)
    except BaseException:
        _release(addr)
        raise
    entry.capsule = capsule
    return capsule


class DLPackArray(_Unique):
    """Another library's device array taken through DLPack (from_dlpack):
    ``ptr`` (the first element's address), ``shape``, ``strides`` (in
    bytes; None when C-contiguous), ``typestr``, ``device`` (the ordinal),
    ``readonly``. Usable wherever cuweave takes a device address
    (Kernel.launch, copy_peer, Comm's collectives) and by other libraries
    through ``__cuda_array_interface__`` (naming no stream: the producer
    ordered its work before the stream given to from_dlpack). The producer's
    memory stays valid until close() (or until this object is collected),
    which calls the producer's deleter."""

    def __init__(self, managed: int, versioned: bool, owner: Any) -> None:
        # Ours from here on: any refusal calls the producer's deleter first, as DLPack asks.
        try:
            self._read(managed, versioned)
        except BaseException:
            _call_deleter(managed, versioned)
            raise
        self._owner = owner  # the producer's object (for its repr; the deleter keeps its memory)
        self._finalizer = weakref.finalize(self, _call_deleter, managed, versioned)

    def _read(self, managed: int, versioned: bool) -> None:
        if versioned:
            mv: Any = DLManagedTensorVersioned.from_address(managed)
            if int(mv.version.major) != 1:  # another layout: no other field may be read (dlpack.h)
                raise BufferError("a DLPack %d.%d tensor (cuweave reads major version 1)" %
                                  (mv.version.major, mv.version.minor))
        m: Any = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(managed)
        t = m.dl_tensor
        self.device_type: int = int(t.device.device_type)
        if self.device_type not in (KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED):
            raise BufferError("a DLPack tensor on device type %d, not CUDA memory" % self.device_type)
        self.device: int = int(t.device.device_id)
        self.ptr: int = int(t.data or 0) + int(t.byte_offset)
        ndim = int(t.ndim)
        if ndim < 0 or (ndim > 0 and not t.shape):
            raise BufferError("a DLPack tensor with ndim %d and %s shape" % (ndim, "a" if t.shape else "no"))
        self.shape: Tuple[int, ...] = tuple(int(t.shape[i]) for i in range(ndim))
        if any(n < 0 for n in self.shape):
            raise BufferError("a DLPack tensor of shape %r" % (self.shape,))
        code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        if lanes != 1 or bits <= 0 or bits % 8 or code not in _KINDS:
            raise BufferError("a DLPack dtype (code %d, %d bits, %d lanes) with no __cuda_array_interface__ "
                              "typestr" % (code, bits, lanes))
        size = bits // 8
        self.itemsize: int = size
        self.typestr: str = ("|" if size == 1 else "<") + _KINDS[code] + str(size)
        self.readonly: bool = bool(versioned and int(m.flags) & FLAG_READ_ONLY)
        strides: Optional[Tuple[int, ...]] = None
        if t.strides:
            el = tuple(int(t.strides[i]) for i in range(ndim))
            compact, step = [], 1
            for n in reversed(self.shape):
                compact.append(step)
                step *= n
            if el != tuple(reversed(compact)):
                strides = tuple(s * size for s in el)
        self.strides: Optional[Tuple[int, ...]] = strides
        count = 1
        for n in self.shape:
            count *= n
        self.nbytes: int = count * size

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Calls the producer's deleter: its memory may be reused from now on. Idempotent."""
        self._finalizer()

    def __enter__(self) -> "DLPackArray":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """The CUDA array interface (version 3), naming no stream."""
        if self.closed:
            raise ValueError("the DLPackArray is closed")
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, self.readonly), "version": 3,
                "strides": self.strides, "stream": None}

    def __repr__(self) -> str:
        return "<cuweave.DLPackArray %#x device %d %s %r%s>" % (self.ptr, self.device, self.typestr, self.shape,
                                                                " closed" if self.closed else "")


def _call_deleter(managed: int, versioned: bool) -> None:
    m: Any = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(managed)
    if m.deleter:
        m.deleter(managed)


def take(capsule: Any, owner: Any) -> DLPackArray:
    """A DLPackArray over a capsule __dlpack__ returned (taking it over)."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError("__dlpack__() returned %s, not a PyCapsule" % type(capsule).__name__)
    cap = ctypes.c_void_p(id(capsule))
    name = _capsule_get_name(cap)
    if name == _NAME_V:
        versioned, used = True, _USED_V
    elif name == _NAME:
        versioned, used = False, _USED
    else:
        raise BufferError("the capsule is named %r (taken already?), not 'dltensor'" % (name,))
    managed = int(_capsule_get_pointer(cap, name) or 0)
    if not managed:
        raise BufferError("the capsule holds no tensor")
    if _capsule_set_name(cap, used) != 0:
        raise BufferError("the capsule could not be renamed")
    return DLPackArray(managed, versioned, owner)
