# SPDX-License-Identifier: BSD-2-Clause
"""The tile dataflow mode of the fused resident loop, in Python
(cw_resident_fused.mode CW_FUSED_DATAFLOW; docs/resident.md, "Tile
dataflow"): a stage is cut into tiles and says what it reads of the stages
before it; Resident.set_dataflow compiles them into one persistent kernel."""

import ctypes
import enum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _check
from ._lib import FusedDep as _CFusedDep, FusedStage as _CFusedStage, PortRead as _CPortRead, ResidentStall

UINT32_MAX = 0xFFFFFFFF
MAX_DEPS = 16  # CW_FUSED_MAX_DEPS


class FusedRead(enum.IntEnum):
    """What a tile reads of another stage (cw_fused_read): SAME the tile of
    the same index, NEIGHBOURS the tiles it maps to widened by a radius,
    ALL every tile of the stage, FUNCTION the tiles a device function names."""
    SAME = 1
    NEIGHBOURS = 2
    ALL = 3
    FUNCTION = 4


def _pair(value: object, name: str) -> Tuple[int, int]:
    """An extent: an int (one row) or a pair (x, y) of uint32."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError("%s must be an int or a pair (x, y), not %d values" % (name, len(value)))
        return _check.uint32(value[0], "%s[0]" % name), _check.uint32(value[1], "%s[1]" % name)
    return _check.uint32(value, name), 0


class FusedDep:
    """One dependency of a dataflow stage (cw_fused_dep): its tiles read
    stage `stage` (an index of the stages before it, or with previous=True
    any stage, its own too) as `read` says. radius and scale apply to
    NEIGHBOURS (tile x reads x * num / den .. (x + 1) * num / den of the
    other stage, widened by radius and clipped at the edges; scale None is
    1/1); previous=True reads the previous request's tiles; function names
    the device function of FUNCTION (extern "C" __device__ int
    NAME(const cw_fused_tile *t, unsigned i)). Whether the fields agree is
    checked by Resident.set_dataflow (InvalidArgumentError naming the
    stage)."""

    __slots__ = ("stage", "read", "radius", "scale", "previous", "function")

    def __init__(self, stage: int, read: Union[FusedRead, int, str], radius: int = 0,
                 scale: Optional[Tuple[int, int]] = None, previous: bool = False,
                 function: Optional[str] = None) -> None:
        self.stage = _check.uint32(stage, "stage")
        self.read = _check.member(read, FusedRead, "read")
        self.radius = _check.uint32(radius, "radius")
        if scale is None:
            self.scale: Optional[Tuple[int, int]] = None
        else:
            if not isinstance(scale, (tuple, list)):
                raise TypeError("scale must be a pair (num, den) or None, not %s" % type(scale).__name__)
            num, den = _pair(scale, "scale")
            if den == 0:
                raise ValueError("scale: the denominator must not be 0")
            self.scale = (num, den)
        self.previous = _check.boolean(previous, "previous")
        self.function = None if function is None else _check.text(function, "function", allow_empty=False).decode()

    def __repr__(self) -> str:
        extra = ""
        if self.read == FusedRead.NEIGHBOURS:
            extra = " radius %d" % self.radius + (" scale %d/%d" % self.scale if self.scale else "")
        elif self.read == FusedRead.FUNCTION:
            extra = " %s" % self.function
        return "<cuweave.FusedDep stage %d %s%s%s>" % (self.stage, self.read.name.lower(), extra,
                                                   " previous" if self.previous else "")


def _fill_read(c: Any, r: Union["FusedDep", "PortRead"]) -> None:
    """How a dependency reads (read, radius, scale, previous, function),
    into a C cw_fused_dep or cw_port_read: the two structs share the fields."""
    c.read, c.radius, c.previous = int(r.read), r.radius, int(r.previous)
    if r.scale is not None:
        c.scale_num, c.scale_den = r.scale
    c.function = r.function.encode() if r.function is not None else None


class PortRead:
    """How the tiles of a fused stage (StageOperator) read the operator
    connected to one of its input ports (cw_port_read): `read` as
    FusedDep's, radius and scale for NEIGHBOURS, previous=True for the
    previous request's tiles (such a connection orders nothing: it may come
    back from a later operator), function for FUNCTION. Whether the fields
    agree is checked by the C library when the operator is made
    (InvalidArgumentError naming the operator and port)."""

    __slots__ = ("read", "radius", "scale", "previous", "function")

    def __init__(self, read: Union[FusedRead, int, str], radius: int = 0, scale: Optional[Tuple[int, int]] = None,
                 previous: bool = False, function: Optional[str] = None) -> None:
        d = FusedDep(0, read, radius, scale, previous, function)
        self.read, self.radius, self.scale, self.previous, self.function = (d.read, d.radius, d.scale, d.previous,
                                                                            d.function)

    def _fill(self, c: "_CPortRead", port: bytes) -> None:
        """Its fields into a C cw_port_read for `port`."""
        c.port = port
        _fill_read(c, self)

    def __repr__(self) -> str:
        return "<cuweave.PortRead %s>" % repr(FusedDep(0, self.read, self.radius, self.scale, self.previous,
                                                       self.function))[len("<cuweave.FusedDep stage 0 "):-1]


class FusedStage:
    """One stage of a dataflow loop (cw_fused_stage): its device function
    `name` (extern "C" __device__ void NAME(const cw_fused_tile *t, void
    *user), called by the threads of one block once per tile of each
    request), what it reads (a sequence of FusedDep), and how it is cut: `tiles`
    tiles in a row, or a problem of `size` elements (an int, or (x, y)) in
    tiles of `tile` elements (likewise), ceil(size / tile) each way. threads:
    the threads a tile uses (0: the whole block; else a multiple of 32);
    shared_bytes: the dynamic shared memory the stage uses (t->shared)."""

    __slots__ = ("name", "reads", "tiles", "size", "tile", "threads", "shared_bytes")

    def __init__(self, name: str, reads: Sequence[FusedDep] = (), tiles: int = 0,
                 size: Union[int, Tuple[int, int]] = 0, tile: Union[int, Tuple[int, int]] = 0,
                 threads: int = 0, shared_bytes: int = 0) -> None:
        self.name = _check.text(name, "name", allow_empty=False).decode()
        rs = _check.sequence(reads, "reads")
        for i, r in enumerate(rs):
            _check.instance(r, FusedDep, "reads[%d]" % i)
        if len(rs) > MAX_DEPS:
            raise ValueError("reads: at most %d, not %d" % (MAX_DEPS, len(rs)))
        self.reads: Tuple[FusedDep, ...] = tuple(rs)
        self.tiles = _check.uint32(tiles, "tiles")
        self.size = _pair(size, "size")
        self.tile = _pair(tile, "tile")
        self.threads = _check.uint32(threads, "threads")
        self.shared_bytes = _check.uint32(shared_bytes, "shared_bytes")

    def __repr__(self) -> str:
        cut = ("%d tiles" % self.tiles if self.tiles else
               "%dx%d in %dx%d" % (self.size[0], max(1, self.size[1]), self.tile[0], max(1, self.tile[1])))
        return "<cuweave.FusedStage %s %s, %d reads>" % (self.name, cut, len(self.reads))


class _Plan:
    """The C structs of a plan, and everything they point into (kept alive
    for the call)."""

    def __init__(self, stages: Sequence[FusedStage]) -> None:
        self.keep: List[Any] = []
        self.array = (_CFusedStage * max(1, len(stages)))()
        for i, s in enumerate(stages):
            c = self.array[i]
            name = s.name.encode()
            self.keep.append(name)
            c.name = name
            if s.reads:
                deps = (_CFusedDep * len(s.reads))()
                for k, r in enumerate(s.reads):
                    deps[k].stage = r.stage
                    _fill_read(deps[k], r)  # ctypes keeps the function's bytes with the array
                self.keep.append(deps)
                c.deps = ctypes.cast(deps, ctypes.POINTER(_CFusedDep))
                c.dep_count = len(s.reads)
            c.tiles = s.tiles
            c.size[0], c.size[1] = s.size
            c.tile[0], c.tile[1] = s.tile
            c.threads, c.shared_bytes = s.threads, s.shared_bytes


def stall_of(ptr: Optional[int]) -> Optional[Dict[str, Any]]:
    """cw_resident_info.stall as a dict (None when the loop did not stall)."""
    if not ptr:
        return None
    s = ctypes.cast(ptr, ctypes.POINTER(ResidentStall)).contents
    out: Dict[str, Any] = {name: getattr(s, name) for name, *_ in ResidentStall._fields_ if name != "pad"}
    out["waited_tile"] = None if s.waited_tile == UINT32_MAX else s.waited_tile
    out["detail"] = (s.detail or b"").decode("utf-8", "replace")
    return out
