# SPDX-License-Identifier: BSD-2-Clause
"""Argument checks and the one unit of time.

Every value a public call hands to C goes through one of these first, so
that a wrong argument is a TypeError (wrong type) or a ValueError (a value
out of range, a closed object) whose message names the parameter, never a
ctypes.ArgumentError, an OverflowError or an AttributeError from deep
inside. ctypes would also keep only the low bits of a Python int that is too
large for the C type: the range checks here refuse such a value instead.

Time: the Python API takes seconds (int or float; any numbers.Real, NumPy's
scalars too) everywhere. ``None``
waits without limit, ``0`` only tries, a negative value or NaN is a
ValueError naming the parameter. A positive value smaller than the C call's
unit is rounded up to one unit (a wait never becomes a mere try); a value
too large for the C type is no limit where the C call has one, and is
otherwise waited in parts (the resident loop's waits) or refused.
"""

from __future__ import annotations

import ctypes
import enum
import math
import numbers
import operator
import os
from typing import Any, NoReturn, Optional, Sequence, SupportsIndex, Tuple, Type, TypeVar, Union, cast

T = TypeVar("T")

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1

Seconds = Union[int, float]
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def _tname(value: object) -> str:
    return "None" if value is None else type(value).__name__


def integer(value: object, name: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """An int (or an object with __index__: numpy integers) in [lo, hi]."""
    if isinstance(value, bool) or isinstance(value, float) or value is None:
        raise TypeError("%s must be an int, not %s" % (name, _tname(value)))
    try:
        v = operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (name, _tname(value))) from None
    if not lo <= v <= hi:
        raise ValueError("%s must be in %d .. %d, not %d" % (name, lo, hi, v))
    return v


def uint32(value: object, name: str) -> int:
    return integer(value, name, 0, UINT32_MAX)


def uint64(value: object, name: str) -> int:
    return integer(value, name, 0, UINT64_MAX)


def size(value: object, name: str, lo: int = 0) -> int:
    return integer(value, name, lo, SIZE_MAX)


def boolean(value: object, name: str) -> bool:
    """A bool (or 0 / 1, as C's booleans)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError("%s must be a bool, not %s" % (name, _tname(value)))


def text(value: object, name: str, allow_empty: bool = True) -> bytes:
    """A str as UTF-8 bytes for a const char * (no NUL inside)."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (name, _tname(value)))
    if "\0" in value:
        raise ValueError("%s must not contain a NUL character" % name)
    if not allow_empty and not value:
        raise ValueError("%s must not be empty" % name)
    return value.encode()


def text_or_bytes(value: object, name: str) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if b"\0" in data:
            raise ValueError("%s must not contain a NUL byte" % name)
        return data
    return text(value, name)


def path(value: object, name: str) -> bytes:
    if not isinstance(value, (str, bytes)) and not hasattr(value, "__fspath__"):
        raise TypeError("%s must be a path (str, bytes or os.PathLike), not %s" % (name, _tname(value)))
    try:
        out = os.fsencode(cast(str, value))
    except TypeError as exc:  # an os.PathLike whose __fspath__ gives no str or bytes
        raise TypeError("%s must be a path (str, bytes or os.PathLike): %s" % (name, exc)) from None
    if not out or b"\0" in out:
        raise ValueError("%s must be a non-empty path without NUL" % name)
    return out


def texts(value: object, name: str) -> Tuple[bytes, ...]:
    """A sequence of str (not one str) as bytes."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError("%s must be a list or tuple of str, not %s" % (name, _tname(value)))
    return tuple(text(v, "%s[%d]" % (name, i)) for i, v in enumerate(value))


E = TypeVar("E", bound="enum.IntEnum")


def member(value: object, cls: "Type[E]", name: str) -> "E":
    """A member of an IntEnum from a member or its int value (a str: its
    name, case-insensitive, where the caller allows it)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError("%s must be one of %s, not %r" %
                             (name, ", ".join(m.name.lower() for m in cls), value)) from None
    v = integer(value, name, -(1 << 63), UINT64_MAX)
    try:
        return cls(v)
    except ValueError:
        raise ValueError("%s must be one of %s, not %d" %
                         (name, ", ".join("%s.%s" % (cls.__name__, m.name) for m in cls), v)) from None


def instance(value: object, cls: Type[T], name: str) -> T:
    if not isinstance(value, cls):
        raise TypeError("%s must be a cuweave.%s, not %s" % (name, cls.__name__, _tname(value)))
    return value


def number(value: object, name: str) -> float:
    """A real number as a float: an int, a float, or another numbers.Real
    (NumPy's scalars, Fraction); never a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float, numbers.Real)):
        raise TypeError("%s must be a number of seconds (int or float), not %s" % (name, _tname(value)))
    try:
        v = float(value)
    except OverflowError:  # an int past the float range: as far as time goes, infinite
        v = math.inf if cast(int, value) > 0 else -math.inf
    if v != v:
        raise ValueError("%s must not be NaN" % name)
    return v


def seconds(value: object, name: str, allow_none: bool = True) -> Optional[float]:
    """A duration in seconds: None (no limit, where allowed), or >= 0."""
    if value is None:
        if allow_none:
            return None
        raise TypeError("%s must be a number of seconds (int or float), not None" % name)
    v = number(value, name)
    if v < 0:
        raise ValueError("%s must be >= 0 seconds (None: no limit), not %r" % (name, value))
    return v


def _units(v: float, per_second: int) -> int:
    """v seconds (finite, >= 0) in whole units, rounded up: a positive
    duration never becomes 0, however small (0.0001 s is 100 us, not 101:
    the float's error is ignored above one unit); one too large for a float
    of units (1e303 s in us) is counted exactly, never an OverflowError."""
    x = v * per_second
    if math.isinf(x):
        return math.ceil(v) * per_second
    n = round(x)
    units = int(n) if abs(x - n) <= 1e-9 * max(1.0, abs(x)) else int(math.ceil(x))
    return max(units, 1) if v > 0 else units


def timeout_us(value: object, name: str = "timeout") -> int:
    """Seconds as the int64_t microseconds of a C wait that takes a negative
    value as no limit: None and values too large for int64 (inf too) -> -1."""
    v = seconds(value, name)
    if v is None or math.isinf(v) or v * 1e6 >= INT64_MAX:
        return -1
    return min(_units(v, 1000000), INT64_MAX)


def timeout_ms_clamped(value: object, name: str = "timeout") -> int:
    """Seconds as a uint32_t milliseconds bound that has no 'no limit' value
    (a communicator's join): None and anything longer -> 2^32 - 1 ms (about
    49.7 days, the longest the C call takes)."""
    v = seconds(value, name)
    if v is None or math.isinf(v) or v * 1e3 >= UINT32_MAX:
        return UINT32_MAX
    return min(_units(v, 1000), UINT32_MAX)


def ms_parts(value: object, name: str = "timeout") -> Optional[int]:
    """Seconds as whole milliseconds for a wait that may be repeated (the
    resident loop's): None (no limit) stays None; the caller waits in parts
    of at most 2^32 - 1 ms. Longer than int64 milliseconds: None too."""
    v = seconds(value, name)
    if v is None or math.isinf(v) or v * 1e3 >= INT64_MAX:  # too long for int64 ms: no limit, as timeout_us
        return None
    return _units(v, 1000)


def duration(value: object, name: str, per_second: int, hi: int) -> int:
    """A duration setting (not a wait): seconds >= 0 in whole units of
    1/per_second, at most hi units."""
    v = seconds(value, name, allow_none=False)
    assert v is not None
    n = _units(v, per_second) if not math.isinf(v) else hi + 1
    if n > hi:
        raise ValueError("%s must be at most %g seconds, not %r" % (name, hi / per_second, value))
    return n


def open_object(value: object, name: str) -> None:
    """ValueError naming the parameter when `value` is a closed object (a
    cuweave Buffer, DLPackArray, HostMemory: their ``closed`` is True)."""
    if getattr(value, "closed", False) is True:
        raise ValueError("%s: the %s is closed" % (name, type(value).__name__))


def array_address(value: object, name: str) -> int:
    """The device address of an open object with __cuda_array_interface__
    (its data's first item, a uint64), the parameter named in every error."""
    open_object(value, name)
    cai = getattr(value, "__cuda_array_interface__")
    data = cai.get("data") if isinstance(cai, dict) else None
    if not isinstance(data, tuple) or len(data) != 2:
        raise TypeError("%s: __cuda_array_interface__['data'] must be (address, read_only), not %r" %
                        (name, data))
    try:
        return integer(data[0], name, 0, UINT64_MAX)
    except (TypeError, ValueError) as exc:
        raise type(exc)("%s (its __cuda_array_interface__ data address)" % exc) from None


def sequence(value: object, name: str) -> Sequence[Any]:
    """A list or tuple (any iterable but a str / bytes is accepted and listed)."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError("%s must be a list or tuple, not %s" % (name, _tname(value)))
    try:
        return list(value)  # type: ignore[call-overload, no-any-return]
    except TypeError:
        raise TypeError("%s must be a list or tuple, not %s" % (name, _tname(value))) from None


class Unique:
    """A mixin of the objects that own a C resource (a handle, a lease, host
    memory, a DLPack tensor): copy.copy, copy.deepcopy and pickle are a
    TypeError. A copy would share the resource and the finalizer that frees
    it (closed once the original is collected); a handle means nothing in
    another process (Buffer.export and SharedEvent.export are for that)."""

    __slots__ = ()

    def _refuse(self, what: str) -> NoReturn:
        raise TypeError("cannot %s a cuweave.%s: it owns a resource of this process (share the object)" %
                        (what, type(self).__name__))

    def __copy__(self) -> NoReturn:
        self._refuse("copy")

    def __deepcopy__(self, memo: object) -> NoReturn:
        self._refuse("copy")

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        self._refuse("pickle")
