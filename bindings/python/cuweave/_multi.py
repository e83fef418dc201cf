# SPDX-License-Identifier: BSD-2-Clause
"""Several devices (cuweave/multi.h) and NCCL collectives
(cuweave/collective.h); docs/multi-gpu.md."""

from __future__ import annotations

import ctypes
import enum
import weakref
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _check, _errors, _lib
from ._core import Context, Stream, _Handle, _new, contexts_of, handle_of
from ._lib import COMM_ID_BYTES, CommBootstrapSettings, CommId, CommInfo, DeviceGroupInfo, lib
from ._memory import Buffer, wait_writer


def address(value: object, name: str = "address") -> int:
    """A device address from an int, a Buffer, an object with
    __cuda_array_interface__ (a DLPackArray, CuPy, PyTorch), or None (0)."""
    if value is None:
        return 0
    _check.open_object(value, name)
    if isinstance(value, Buffer):
        return value.ptr
    if hasattr(value, "__cuda_array_interface__"):
        return _check.array_address(value, name)
    if isinstance(value, int) and not isinstance(value, bool):
        return _check.uint64(value, name)
    raise TypeError("%s must be a device address (an int, a Buffer or an object with __cuda_array_interface__), "
                    "not %s" % (name, type(value).__name__))


class _BorrowedContexts:
    """The Context objects an owner (a DeviceGroup) hands out: one per member,
    each keeping the owner alive; made unusable (closed) when the owner is
    closed, since the handles are only valid while it is open."""

    def __init__(self) -> None:
        self._made: "weakref.WeakValueDictionary[int, Context]" = weakref.WeakValueDictionary()

    def get(self, key: int, ptr: int, owner: Any) -> Context:
        ctx = self._made.get(key)
        if ctx is None or ctx._ptr.value != ptr:
            ctx = Context(_ptr=ptr, _owner=owner)
            self._made[key] = ctx
        return ctx

    def invalidate(self) -> None:
        for ctx in list(self._made.values()):
            ctx._close_dependents()  # its HostMemory, while the handle is valid
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

    def __init__(self, devices: Optional[Sequence[int]] = None) -> None:
        if devices is None:
            arr, n = None, 0
        else:
            ords = [_check.integer(d, "devices[%d]" % i, 0) for i, d in enumerate(_check.sequence(devices, "devices"))]
            if not ords:
                raise ValueError("devices must not be empty (None means every visible device)")
            arr, n = (ctypes.c_int * len(ords))(*ords), len(ords)
        super().__init__(_new(lib.cw_device_group_create, arr, n))
        self._contexts = _BorrowedContexts()

    def _info(self) -> DeviceGroupInfo:
        i = DeviceGroupInfo()
        lib.cw_device_group_get_info(self.handle, ctypes.byref(i))
        return i

    def _member(self, info: DeviceGroupInfo, index: object) -> int:
        idx = _check.integer(index, "index", 0)
        if idx >= info.count:
            raise _errors.InvalidArgumentError("index: member %d, but the group holds %d devices" % (idx, info.count))
        return idx

    def __len__(self) -> int:
        return int(self._info().count)

    def context(self, index: int) -> Context:
        """Member `index`'s Context (borrowed from the group)."""
        i = self._info()
        idx = self._member(i, index)
        return self._contexts.get(idx, int(i.contexts[idx]), self)

    def ordinal(self, index: int) -> int:
        """Member `index`'s device ordinal."""
        i = self._info()
        return int(i.devices[self._member(i, index)])

    def contexts(self) -> List[Context]:
        """Every member's Context, in member order."""
        return [self.context(i) for i in range(len(self))]

    def ordinals(self) -> List[int]:
        """Every member's device ordinal, in member order."""
        i = self._info()
        return [int(i.devices[k]) for k in range(i.count)]

    def close(self) -> None:
        """Destroys the group and the Context objects it handed out. Idempotent."""
        self._contexts.invalidate()
        self._finalizer()

    def _state(self) -> str:
        return "devices %s" % (self.ordinals(),)


class PeerInfo(NamedTuple):
    """What the topology allows from one device to another (cw_peer_info):
    can_access, perf_rank (the driver's rank of the link, lower is faster),
    native_atomics."""

    can_access: bool
    perf_rank: int
    native_atomics: bool


def peer_info(device: int, peer: int) -> PeerInfo:
    """What the topology allows from ordinal `device` to ordinal `peer` (a
    PeerInfo); makes no context."""
    d, p = _check.integer(device, "device", 0), _check.integer(peer, "peer", 0)
    i = _lib.PeerInfo()
    lib.cw_device_get_peer_info(d, p, ctypes.byref(i))
    return PeerInfo(bool(i.can_access), int(i.perf_rank), bool(i.native_atomics))


def copy_peer(stream: Stream, dst: object, dst_ctx: Optional[Context], src: object, src_ctx: Optional[Context],
              nbytes: int) -> None:
    """Queues a copy of nbytes from src (memory of src_ctx's device) to dst
    (memory of dst_ctx's device) on `stream`, a stream of either device
    (cw_copy_peer; direct with peer access, else staged by the driver).
    dst and src: device addresses (ints), Buffers, or objects with
    __cuda_array_interface__; for a Buffer the context may be None (its
    own), the copy is ordered after its last writer and the use recorded."""
    sh = handle_of(stream, Stream, "stream")
    n = _check.size(nbytes, "nbytes")
    da, sa = address(dst, "dst"), address(src, "src")
    for name, b in (("dst", dst), ("src", src)):
        if isinstance(b, Buffer) and n > b.nbytes:
            raise ValueError("nbytes: %d bytes exceed the %d-byte %s buffer" % (n, b.nbytes, name))
    if dst_ctx is None and isinstance(dst, Buffer):
        dst_ctx = dst.context
    if src_ctx is None and isinstance(src, Buffer):
        src_ctx = src.context
    if dst_ctx is None:
        raise TypeError("dst_ctx must be a cuweave.Context for a raw address, not None")
    if src_ctx is None:
        raise TypeError("src_ctx must be a cuweave.Context for a raw address, not None")
    dh, srh = handle_of(dst_ctx, Context, "dst_ctx"), handle_of(src_ctx, Context, "src_ctx")
    wait_writer(stream, src)
    wait_writer(stream, dst)
    lib.cw_copy_peer(sh, da, dh, sa, srh, n)
    if isinstance(src, Buffer):
        src.used_by(stream)
    if isinstance(dst, Buffer):
        dst.written_on(stream)


def share_buffer_pool(owner: Context, peer: Context) -> None:
    """Opens the buffers of `owner`'s pool (made on its streams, now and
    later) to kernels on `peer`'s device, read and write; also enables peer
    access (peer -> owner). NotSupportedError where the topology says no."""
    lib.cw_context_share_buffer_pool(handle_of(owner, Context, "owner"), handle_of(peer, Context, "peer"))


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
    def itemsize(self) -> int:
        """The element's size in bytes."""
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


def comm_id_generate() -> bytes:
    """A new id for a communicator by rank (cw_comm_id_generate), as 128
    bytes: make it in one process, hand it to the others by any means, and
    pass it to Comm.create_rank in each."""
    cid = CommId()
    lib.cw_comm_id_generate(ctypes.byref(cid))
    return bytes(cid.bytes)


Address = Union[int, Buffer, Any, None]


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

    def __init__(self, contexts: Sequence[Context], *, _ptr: Optional[int] = None, _first: int = 0) -> None:
        ctxs = tuple(_check.sequence(contexts, "contexts"))
        if _ptr is None:
            arr, n = contexts_of(ctxs, "contexts")
            if n == 0:
                raise ValueError("contexts must hold at least one Context")
            _ptr = _new(lib.cw_comm_create, arr, n)
        super().__init__(_ptr, keep=ctxs)
        self._contexts: Tuple[Context, ...] = ctxs
        self._first = _first

    @classmethod
    def create_rank(cls, context: Context, comm_id: bytes, nranks: int, rank: int,
                    timeout: Optional[float] = 60.0) -> "Comm":
        """This process's rank `rank` of `nranks`, on `context`, joined with the
        others by `comm_id` (the bytes of comm_id_generate, the same in every
        process) (cw_comm_create_rank). Raises CuweaveTimeoutError when not
        every rank joins within `timeout` seconds (None: the longest the C
        call takes, 2^32 - 1 ms; 0: one check)."""
        ctx = handle_of(context, Context, "context")
        if not isinstance(comm_id, (bytes, bytearray, memoryview)):
            raise TypeError("comm_id must be the bytes of comm_id_generate(), not %s" %
                            ("None" if comm_id is None else type(comm_id).__name__))
        raw = bytes(comm_id)
        if len(raw) != COMM_ID_BYTES:
            raise ValueError("comm_id: a communicator id has %d bytes, not %d" % (COMM_ID_BYTES, len(raw)))
        n = _check.integer(nranks, "nranks", 1)
        r = _check.integer(rank, "rank", 0, n - 1)
        ms = _check.timeout_ms_clamped(timeout)
        cid = CommId()
        ctypes.memmove(cid.bytes, raw, COMM_ID_BYTES)
        ptr = _new(lib.cw_comm_create_rank, ctx, ctypes.byref(cid), n, r, ms)
        return cls((context,), _ptr=ptr, _first=r)

    @classmethod
    def bootstrap(cls, context: Context, rank: Optional[int] = None, world_size: Optional[int] = None,
                  file: Optional[_check.PathLike] = None, addr: Optional[str] = None,
                  timeout: Optional[float] = 60.0, token: Optional[str] = None) -> "Comm":
        """The common bootstrap (cw_comm_bootstrap): rank 0 makes the id and
        publishes it through `file` or `addr` ("host:port" of rank 0); each
        argument left None comes from the environment (CUWEAVE_RANK,
        CUWEAVE_WORLD_SIZE, CUWEAVE_COMM_FILE, CUWEAVE_COMM_ADDR,
        CUWEAVE_COMM_TOKEN). `token` (TCP): a secret every rank shares; rank 0
        answers only the peers that present it. `timeout` in seconds bounds
        the whole call (None: 2^32 - 1 ms)."""
        ctx = handle_of(context, Context, "context")
        s = CommBootstrapSettings()
        lib.cw_comm_bootstrap_settings_default(ctypes.byref(s))
        keep: List[bytes] = []
        if rank is not None:
            s.rank = _check.integer(rank, "rank", 0)
        if world_size is not None:
            s.world_size = _check.integer(world_size, "world_size", 1)
        if file is not None:
            keep.append(_check.path(file, "file"))
            s.file = keep[-1]
        if addr is not None:
            keep.append(_check.text(addr, "addr", allow_empty=False))
            s.addr = keep[-1]
        s.timeout_ms = _check.timeout_ms_clamped(timeout)
        if token is not None:
            keep.append(_check.text(token, "token", allow_empty=False))
            s.token = keep[-1]
        ptr = _new(lib.cw_comm_bootstrap, ctx, ctypes.byref(s))
        i = CommInfo()
        lib.cw_comm_get_info(ctypes.c_void_p(ptr), ctypes.byref(i))
        return cls((context,), _ptr=ptr, _first=int(i.first_rank))

    def _info(self) -> CommInfo:
        i = CommInfo()
        lib.cw_comm_get_info(self.handle, ctypes.byref(i))
        return i

    @property
    def size(self) -> int:
        """The ranks in all (every process)."""
        return int(self._info().size)

    @property
    def local_size(self) -> int:
        """The ranks held in this process (1 for a communicator by rank)."""
        return int(self._info().local_size)

    @property
    def first_rank(self) -> int:
        """The global rank of local rank 0."""
        return int(self._info().first_rank)

    def __len__(self) -> int:
        return self.size

    def contexts(self) -> List[Context]:
        """The local ranks' Contexts, in rank order (those given at creation)."""
        return list(self._contexts)

    def context(self, rank: int) -> Context:
        """Global rank `rank`'s Context (the one given at creation), for a rank
        held in this process."""
        i = self._info()
        r = _check.integer(rank, "rank", 0)
        if not i.first_rank <= r < i.first_rank + i.local_size:
            raise _errors.InvalidArgumentError("rank %d is not held here (ranks %d to %d of %d)" %
                                               (r, i.first_rank, i.first_rank + i.local_size - 1, i.size))
        ptr = i.contexts[r - i.first_rank]
        for ctx in self._contexts:
            if ctx._ptr.value == ptr:
                return ctx
        # the one given was closed (a closed DeviceGroup's): the comm still holds the context
        return Context(_ptr=ptr, _owner=self)

    def _sizes(self, count: object, dtype: object) -> Tuple[int, Dtype, int]:
        n = _check.size(count, "count")
        d = _check.member(dtype, Dtype, "dtype")
        return n, d, n * d.itemsize

    def _collective(self, fn: Callable[..., Any], send: object, recv: object, count: object, dtype: object, arg: int,
                    streams: object, reads: Callable[[int], bool]) -> None:
        h = self.handle
        sends, recvs = _check.sequence(send, "send"), _check.sequence(recv, "recv")
        sts = _check.sequence(streams, "streams")
        n = len(self._contexts)
        for name, lst in (("send", sends), ("recv", recvs), ("streams", sts)):
            if len(lst) != n:
                raise ValueError("%s: %d ranks here need %d entries, not %d" % (name, n, n, len(lst)))
        cnt, dt, nbytes = self._sizes(count, dtype)
        st_arr = (ctypes.c_void_p * n)(*[handle_of(s, Stream, "streams[%d]" % i).value for i, s in enumerate(sts)])
        s_arr = (ctypes.c_uint64 * n)(*[address(b, "send[%d]" % i) for i, b in enumerate(sends)])
        r_arr = (ctypes.c_uint64 * n)(*[address(b, "recv[%d]" % i) for i, b in enumerate(recvs)])
        for i in range(n):
            for name, b, used in (("send", sends[i], reads(i)), ("recv", recvs[i], True)):
                if used and isinstance(b, Buffer) and nbytes > b.nbytes:
                    raise ValueError("count: rank %d: %d elements of %s exceed the %d-byte %s buffer" %
                                     (i, cnt, dt.name, b.nbytes, name))
        for i in range(n):
            if reads(i):
                wait_writer(sts[i], sends[i])
            wait_writer(sts[i], recvs[i])
        fn(h, s_arr, r_arr, cnt, int(dt), arg, st_arr)
        for i in range(n):
            if reads(i) and isinstance(sends[i], Buffer):
                sends[i].used_by(sts[i])
            if isinstance(recvs[i], Buffer):
                recvs[i].written_on(sts[i])

    def all_reduce(self, send: Sequence[Address], recv: Sequence[Address], count: int, dtype: Union[Dtype, int, str],
                   op: Union[ReduceOp, int, str], streams: Sequence[Stream]) -> None:
        """recv[i] (count elements of dtype) receives op over every rank's
        send[i]; send[i] may be recv[i] (in place). dtype: a Dtype (or its
        name, "float32"); op: a ReduceOp (or "sum", ...)."""
        o = int(_check.member(op, ReduceOp, "op"))
        self._collective(lib.cw_comm_all_reduce, send, recv, count, dtype, o, streams, lambda i: True)

    def broadcast(self, send: Sequence[Address], recv: Sequence[Address], count: int, dtype: Union[Dtype, int, str],
                  root: int, streams: Sequence[Stream]) -> None:
        """Every local rank's recv[i] receives the root's send (count elements;
        root is a global rank): only send[root - first_rank] is read, in the
        root's process (the others may be None or 0)."""
        r = _check.integer(root, "root", 0)
        first = self._first
        self._collective(lib.cw_comm_broadcast, send, recv, count, dtype, r, streams, lambda i: first + i == r)

    def _rank_part(self, fn: Callable[..., Any], rank: object, send: object, recv: object, count: object,
                   dtype: object, arg: int, stream: Stream, reads: bool) -> None:
        h = self.handle
        r = _check.integer(rank, "rank", 0)
        sh = handle_of(stream, Stream, "stream")
        cnt, dt, nbytes = self._sizes(count, dtype)
        sa, ra = address(send, "send"), address(recv, "recv")
        for name, b, used in (("send", send, reads), ("recv", recv, True)):
            if used and isinstance(b, Buffer) and nbytes > b.nbytes:
                raise ValueError("count: rank %d: %d elements of %s exceed the %d-byte %s buffer" %
                                 (r, cnt, dt.name, b.nbytes, name))
        if reads:
            wait_writer(stream, send)
        wait_writer(stream, recv)
        fn(h, r, sa, ra, cnt, int(dt), arg, sh)
        if reads and isinstance(send, Buffer):
            send.used_by(stream)
        if isinstance(recv, Buffer):
            recv.written_on(stream)

    def all_reduce_rank(self, rank: int, send: Address, recv: Address, count: int, dtype: Union[Dtype, int, str],
                        op: Union[ReduceOp, int, str], stream: Stream) -> None:
        """Rank `rank`'s part of an all-reduce (cw_comm_all_reduce_rank): for
        one thread per rank, or for one thread inside `with
        cuweave.comm_group():` (outside a group, one thread issuing several
        ranks' parts in turn deadlocks inside NCCL: use all_reduce)."""
        o = int(_check.member(op, ReduceOp, "op"))
        self._rank_part(lib.cw_comm_all_reduce_rank, rank, send, recv, count, dtype, o, stream, True)

    def broadcast_rank(self, rank: int, send: Address, recv: Address, count: int, dtype: Union[Dtype, int, str],
                       root: int, stream: Stream) -> None:
        """Rank `rank`'s part of a broadcast from `root`
        (cw_comm_broadcast_rank): as all_reduce_rank; send is read on the root only."""
        r = _check.integer(root, "root", 0)
        rk = _check.integer(rank, "rank", 0)
        self._rank_part(lib.cw_comm_broadcast_rank, rk, send, recv, count, dtype, r, stream, rk == r)

    def _state(self) -> str:
        i = self._info()
        return "ranks %d-%d of %d" % (i.first_rank, i.first_rank + i.local_size - 1, i.size)


class comm_group:
    """``with cuweave.comm_group(): ...`` the _rank calls of several ranks from
    one thread: NCCL issues them together at the end (cw_comm_group_begin,
    cw_comm_group_end). Groups nest. A part refused inside a group never
    reaches NCCL, and the parts issued before it would wait for it forever:
    check every rank's arguments first."""

    def __enter__(self) -> "comm_group":
        lib.cw_comm_group_begin()
        return self

    def __exit__(self, *exc: object) -> None:
        lib.cw_comm_group_end()

    def __repr__(self) -> str:
        return "<cuweave.comm_group>"

