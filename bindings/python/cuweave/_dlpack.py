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
"dltensor") calls the deleter from its destructor, as the protocol asks.

Import: from_dlpack renames the capsule ("used_dltensor") so that its
destructor leaves the tensor alone, and DLPackArray calls the producer's
deleter when it is closed or collected.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

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
_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p])
_capsule_get_name = _capi("PyCapsule_GetName", ctypes.c_char_p, [ctypes.c_void_p])
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])

_lock = threading.Lock()
# address of the managed tensor -> (the struct, shape, strides, release function)
_exports: Dict[int, Tuple[Any, Any, Any, Callable[[], None]]] = {}


def _release(addr: int) -> None:
    with _lock:
        entry = _exports.pop(addr, None)
    if entry is not None:
        entry[3]()


def _py_deleter(addr: Optional[int]) -> None:
    try:
        _release(addr or 0)
    except BaseException:  # noqa: BLE001 (nothing may cross into C)
        pass




_c_deleter: Any = DELETER(_py_deleter)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _py_capsule_destructor(capsule: Optional[int]) -> None:
    # Called as the capsule is freed: the tensor is ours to delete only when
    # no consumer took it (a consumer renames the capsule "used_...").
    try:
        for name in (_NAME, _NAME_V):
            if _capsule_is_valid(capsule, name):
                _release(int(_capsule_get_pointer(capsule, name) or 0))
                return
    except BaseException:  # noqa: BLE001
        pass




_c_capsule_destructor: Any = _CAPSULE_DESTRUCTOR(_py_capsule_destructor)
def exported() -> int:
    """How many exported tensors are still held by their consumers."""
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
    release() runs when the consumer deletes the tensor (or the capsule goes
    unused)."""
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
    with _lock:
        _exports[addr] = (m, c_shape, c_strides, release)
    try:
        return _capsule_new(addr, _NAME_V if versioned else _NAME,
                                  ctypes.cast(_c_capsule_destructor, ctypes.c_void_p))
    except BaseException:
        _release(addr)
        raise


class DLPackArray:
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
