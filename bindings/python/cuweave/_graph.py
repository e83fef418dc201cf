# SPDX-License-Identifier: BSD-2-Clause
"""Graphs (captured or built node by node), NVRTC programs, the kernel
cache, modules and kernel launches."""

from __future__ import annotations

import ctypes
import enum
import weakref
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _check, _errors, _lib
from ._core import (CaptureMode, Context, Stream, _get, _Handle, _new, handle_of)
from ._lib import Header, LaunchConfig, ProgramSettings, lib


class CondType(enum.IntEnum):
    """cw_cond_type: what a conditional node does with its condition."""

    IF = 0     #: the body runs once when the value is nonzero (the else body when zero)
    WHILE = 1  #: the body runs again and again while the value is nonzero


class GraphUpdate(enum.IntEnum):
    """cw_graph_update_kind: how GraphExec.update took the new graph."""

    UPDATED_IN_PLACE = 0
    REINSTANTIATED = 1


class Builtin(enum.IntEnum):
    """The kernels built into the library (cw_builtin_kernel)."""

    FILL_U32 = 0   #: (uint32_t *dst, uint32_t value, uint64_t count) any grid
    WRITE_U32 = 1  #: (uint32_t *dst, uint32_t value): one thread, then a system fence
    TIMESTAMP = 2  #: (uint64_t *dst): the GPU's global timer, in ns
    SET_COND = 3   #: (cw_cond_handle h, const uint32_t *value): condition = *value != 0


class Capture:
    """What ``Stream.capture()`` returns: a context manager; ``graph`` is the
    captured Graph once the with block has ended."""

    def __init__(self, stream: Stream, mode: CaptureMode, into: Optional["Graph"] = None) -> None:
        self.stream, self.mode, self.into = stream, mode, into
        self._graph: Optional[Graph] = None

    @property
    def graph(self) -> "Graph":
        """The captured Graph (ValueError before the with block has ended)."""
        if self._graph is None:
            raise ValueError("the capture has not ended: its graph exists once the with block is over")
        return self._graph

    def __enter__(self) -> "Capture":
        lib.cw_capture_begin(self.stream.handle, self.into.handle if self.into is not None else None, int(self.mode))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        out = ctypes.c_void_p()
        try:
            lib.cw_capture_end(ctypes.byref(out), self.stream.handle)
        except _errors.CuweaveError:
            if exc_type is None:
                raise
            return  # the body's exception is the one to see
        # A capture into a graph gives that graph back (no new ownership).
        self._graph = self.into if self.into is not None else Graph(self.stream.context, _ptr=out.value)

    def __repr__(self) -> str:
        return "<cuweave.Capture on %r: %r>" % (self.stream, self._graph)


def _node_array(deps: object) -> Tuple[ctypes.Array[ctypes.c_void_p], int]:
    items = _check.sequence(deps, "deps")
    for i, d in enumerate(items):
        _check.instance(d, GraphNode, "deps[%d]" % i)
    return (ctypes.c_void_p * max(len(items), 1))(*[d._ptr for d in items]), len(items)


class GraphNode:
    """A node of a Graph (owned by the graph; this object keeps it alive)."""

    def __init__(self, graph: "Graph", ptr: Optional[int]) -> None:
        self.graph: Graph = graph
        self._ptr = ptr

    def __repr__(self) -> str:
        return "<cuweave.GraphNode %#x of %r>" % (self._ptr or 0, self.graph)


class Graph(_Handle):
    """A CUDA graph: Graph(ctx) is an empty one to build with add_*; a
    capture (Stream.capture) makes one too. A conditional node's bodies are
    graphs owned by their parent (body graphs keep it alive and are never
    destroyed here). instantiate() makes a GraphExec."""

    _destroy = lib.cw_graph_destroy

    def __init__(self, context: Context, *, _ptr: Optional[int] = None, _owner: Optional["Graph"] = None) -> None:
        if _owner is not None:  # a conditional node's body: the parent owns it
            self._borrow(_ptr, (_owner,))
            _owner._bodies.add(self)
        else:
            if _ptr is None:
                _ptr = _new(lib.cw_graph_create, handle_of(context, Context, "context"))
            super().__init__(_ptr, keep=(context,))
        self.context: Context = context
        self._bodies: "weakref.WeakSet[Graph]" = weakref.WeakSet()  # body objects handed out

    def close(self) -> None:
        """Destroys the graph (a body: lets go of the object only), and closes
        the body objects it handed out. Idempotent."""
        for b in list(self._bodies):
            b.close()
            b._ptr.value = None
        self._finalizer()

    def info(self) -> Dict[str, Any]:
        """cw_graph_get_info: handle (the CUgraph), nodes, sinks, is_body."""
        i = _lib.GraphInfo()
        lib.cw_graph_get_info(self.handle, ctypes.byref(i))
        return {"handle": i.handle or 0, "nodes": i.nodes, "sinks": i.sinks, "is_body": bool(i.is_body)}

    def add_child(self, child: "Graph", deps: Sequence[GraphNode] = ()) -> GraphNode:
        """A node running a copy of graph `child` after `deps` (GraphNodes)."""
        ch = handle_of(child, Graph, "child")
        arr, n = _node_array(deps)
        return GraphNode(self, _get(lib.cw_graph_add_child, self.handle, ch, arr, n))

    def add_empty(self, deps: Sequence[GraphNode] = ()) -> GraphNode:
        """An empty node after `deps` (a join point)."""
        arr, n = _node_array(deps)
        return GraphNode(self, _get(lib.cw_graph_add_empty, self.handle, arr, n))

    def add_cond_handle(self, default: int = 0, reset_each_launch: bool = False) -> int:
        """A condition handle (an int; device code gives it to cudaGraphSetConditional)."""
        d = _check.uint32(default, "default")
        r = _check.boolean(reset_each_launch, "reset_each_launch")
        h = ctypes.c_uint64()
        lib.cw_graph_add_cond_handle(self.handle, d, 1 if r else 0, ctypes.byref(h))
        return int(h.value)

    def add_conditional(self, handle: int, kind: Union[CondType, int] = CondType.WHILE, with_else: bool = False,
                        deps: Sequence[GraphNode] = ()) -> Tuple[GraphNode, "Graph", Optional["Graph"]]:
        """A conditional node on `handle` after `deps`: (node, body, else_body),
        the bodies Graphs owned by this one (else_body None without with_else)."""
        h = _check.uint64(handle, "handle")
        s = _lib.CondSettings()
        lib.cw_cond_settings_default(ctypes.byref(s))
        s.type = int(_check.member(kind, CondType, "kind"))
        s.with_else = 1 if _check.boolean(with_else, "with_else") else 0
        arr, n = _node_array(deps)
        node, body, other = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        lib.cw_graph_add_conditional(self.handle, ctypes.c_uint64(h), ctypes.byref(s), arr, n,
                                     ctypes.byref(node), ctypes.byref(body), ctypes.byref(other))
        return (GraphNode(self, node.value), Graph(self.context, _ptr=body.value, _owner=self),
                Graph(self.context, _ptr=other.value, _owner=self) if other.value else None)

    def sinks(self) -> List[GraphNode]:
        """The nodes no node depends on (to add nodes after them)."""
        n = ctypes.c_size_t()
        lib.cw_graph_get_sinks(self.handle, None, 0, ctypes.byref(n))
        arr = (ctypes.c_void_p * max(n.value, 1))()
        lib.cw_graph_get_sinks(self.handle, arr, n.value, ctypes.byref(n))
        return [GraphNode(self, arr[i]) for i in range(min(n.value, len(arr)))]

    def write_dot(self, path: _check.PathLike, verbose: bool = False) -> None:
        """Writes the graph in Graphviz DOT form (for debugging)."""
        p = _check.path(path, "path")
        lib.cw_graph_write_dot(self.handle, p, 1 if _check.boolean(verbose, "verbose") else 0)

    def instantiate(self, node_priority: bool = False) -> "GraphExec":
        """An executable graph (cw_graph_instantiate)."""
        prio = _check.boolean(node_priority, "node_priority")
        return GraphExec(self.context, _new(lib.cw_graph_instantiate, self.handle, 1 if prio else 0))

    def _state(self) -> str:
        i = self.info()
        return "device %d, %d nodes%s" % (self.context.device, i["nodes"], ", a body" if i["is_body"] else "")


class GraphExec(_Handle):
    """An instantiated graph (cw_graph_exec): upload(), launch(stream), update(graph)."""

    _destroy = lib.cw_graph_exec_destroy

    def __init__(self, context: Context, ptr: int) -> None:
        super().__init__(ptr, keep=(context,))
        self.context: Context = context

    def upload(self, stream: Stream) -> None:
        """Uploads the graph's work to the device ahead of its first launch."""
        lib.cw_graph_exec_upload(self.handle, handle_of(stream, Stream, "stream"))

    def launch(self, stream: Stream) -> None:
        """Launches the graph on `stream`."""
        lib.cw_graph_exec_launch(self.handle, handle_of(stream, Stream, "stream"))

    def update(self, graph: Graph) -> Dict[str, Any]:
        """Takes graph's parameters (cw_graph_exec_update): in place when the
        driver can, else instantiated again. Returns {"kind": a GraphUpdate,
        "driver_result", "reason"}."""
        i = _lib.GraphUpdateInfo()
        lib.cw_graph_exec_update(self.handle, handle_of(graph, Graph, "graph"), ctypes.byref(i))
        return {"kind": GraphUpdate(i.kind), "driver_result": i.driver_result,
                "reason": i.reason.decode("utf-8", "replace") if i.reason else ""}

    def info(self) -> Dict[str, Any]:
        """cw_graph_exec_get_info: handle, launches, updates_in_place, reinstantiations."""
        i = _lib.GraphExecInfo()
        lib.cw_graph_exec_get_info(self.handle, ctypes.byref(i))
        return {"handle": i.handle or 0, "launches": i.launches, "updates_in_place": i.updates_in_place,
                "reinstantiations": i.reinstantiations}

    def _state(self) -> str:
        return "device %d, %d launches" % (self.context.device, self.info()["launches"])


def compile_log() -> str:
    """The NVRTC log of this thread's last compile (also after a failure;
    CompileError.log carries it too)."""
    log = lib.cw_jit_get_compile_log()
    return log.decode("utf-8", "replace") if log else ""


class Program(_Handle):
    """CUDA C++ compiled with NVRTC for the context's device (cached in memory
    and on disk; cw_program_compile). headers: {name: source} given to NVRTC
    in memory. A failed compile raises CompileError, whose .log is NVRTC's."""

    _destroy = lib.cw_program_destroy

    def __init__(self, context: Context, source: str, name: str = "cuweave.cu", options: Sequence[str] = (),
                 headers: Optional[Mapping[str, str]] = None, name_expressions: Sequence[str] = ()) -> None:
        ctx = handle_of(context, Context, "context")
        src = _check.text(source, "source")
        s = ProgramSettings()
        lib.cw_program_settings_default(ctypes.byref(s))
        keep: List[Any] = []  # the C strings must live through the call
        s.name = _check.text(name, "name", allow_empty=False)
        opts = _check.texts(options, "options")
        if opts:
            arr = (ctypes.c_char_p * len(opts))(*opts)
            keep.append(arr)
            s.options, s.n_options = arr, len(opts)
        if headers is not None:
            if not isinstance(headers, Mapping):
                raise TypeError("headers must be a dict {name: source}, not %s" % type(headers).__name__)
            items = [(_check.text(k, "headers key"), _check.text_or_bytes(v, "headers[%r]" % (k,)))
                     for k, v in headers.items()]
            if items:
                hs = (Header * len(items))()
                for i, (n, hsrc) in enumerate(items):
                    hs[i].name, hs[i].source = n, hsrc
                keep.append(hs)
                s.headers, s.n_headers = hs, len(items)
        exprs = _check.texts(name_expressions, "name_expressions")
        if exprs:
            arr2 = (ctypes.c_char_p * len(exprs))(*exprs)
            keep.append(arr2)
            s.name_expressions, s.n_name_expressions = arr2, len(exprs)
        super().__init__(_new(lib.cw_program_compile, ctx, src, ctypes.byref(s)), keep=(context,))
        self.context: Context = context
        self.name: str = name

    def load(self) -> "Module":
        """The program's code loaded as a Module."""
        return Module(self)

    def info(self) -> Dict[str, Any]:
        """cw_program_get_info: code (bytes: PTX or cubin), is_ptx, arch,
        source ("compile", "memory" or "disk"), cached, key."""
        i = _lib.ProgramInfo()
        lib.cw_program_get_info(self.handle, ctypes.byref(i))
        return {"code": ctypes.string_at(i.code, i.size) if i.code else b"", "is_ptx": bool(i.is_ptx),
                "arch": i.arch, "source": {0: "compile", 1: "memory", 2: "disk"}.get(i.source, i.source),
                "cached": bool(i.cached), "key": i.key.decode()}

    def lowered_name(self, name_expression: str) -> str:
        """The mangled name NVRTC gave a name expression (given in
        name_expressions=...)."""
        out = ctypes.c_char_p()
        lib.cw_program_get_lowered_name(self.handle, _check.text(name_expression, "name_expression"),
                                        ctypes.byref(out))
        return (out.value or b"").decode()

    def _state(self) -> str:
        i = self.info()
        return "%r device %d sm_%d %s" % (self.name, self.context.device, i["arch"], "PTX" if i["is_ptx"] else "cubin")


def jit_cache_configure(dir: Optional[_check.PathLike] = None, max_bytes: Optional[int] = None,
                        memory: Optional[bool] = None) -> None:
    """Changes the kernel cache for later compiles (cw_jit_cache_configure):
    dir (None: the default or CUWEAVE_CACHE_DIR), max_bytes (None: the
    default bound), memory (keep compiled code in memory too)."""
    s = _lib.JitCacheSettings()
    lib.cw_jit_cache_settings_default(ctypes.byref(s))
    keep = None
    if dir is not None:
        keep = _check.path(dir, "dir")
        s.dir = keep
    if max_bytes is not None:
        s.max_bytes = _check.uint64(max_bytes, "max_bytes")
    if memory is not None:
        s.memory = 1 if _check.boolean(memory, "memory") else 0
    lib.cw_jit_cache_configure(ctypes.byref(s))
    del keep


def jit_stats() -> Dict[str, int]:
    """The kernel cache's counters (cw_jit_get_stats) as a dict."""
    st = _lib.JitStats()
    lib.cw_jit_get_stats(ctypes.byref(st))
    return {name: getattr(st, name) for name, *_ in _lib.JitStats._fields_ if name != "reserved"}


def jit_cache_clear_memory() -> None:
    """Empties the kernel cache's memory level (cw_jit_cache_clear_memory)."""
    lib.cw_jit_cache_clear_memory()


def jit_cache_info() -> Dict[str, Any]:
    """Where the disk cache is and what it holds (cw_jit_cache_get_info): a dict with dir (None when the
    disk cache is off), max_bytes, bytes, entries, exists, trusted and memory (bools)."""
    info = _lib.JitCacheInfo()
    lib.cw_jit_cache_get_info(ctypes.byref(info))
    return {"dir": info.dir.decode() or None, "max_bytes": info.max_bytes, "bytes": info.bytes,
            "entries": info.entries, "exists": bool(info.exists), "trusted": bool(info.trusted),
            "memory": bool(info.memory)}


def jit_cache_clear_disk() -> Tuple[int, int]:
    """Empties the disk cache (cw_jit_cache_clear_disk): (entries, bytes) removed."""
    n, b = ctypes.c_uint64(), ctypes.c_uint64()
    lib.cw_jit_cache_clear_disk(ctypes.byref(n), ctypes.byref(b))
    return n.value, b.value


class Module(_Handle):
    """A program's code loaded with the library API (any context of a device
    it suits); Module.from_image(ptx_or_cubin) loads code compiled elsewhere."""

    _destroy = lib.cw_module_destroy

    def __init__(self, program: Program, *, _image: Optional[bytes] = None, _context: Optional[Context] = None) -> None:
        self._kernels: Dict[str, Kernel] = {}
        if _image is None:
            ph = handle_of(program, Program, "program")
            super().__init__(_new(lib.cw_module_load, ph), keep=(program.context,))
            self.context: Optional[Context] = program.context
        else:
            # The image is read during the load only (NUL-terminated PTX or a cubin/fatbin).
            buf = ctypes.create_string_buffer(_image, len(_image) + 1)
            super().__init__(_new(lib.cw_module_load_image, buf), keep=(_context,) if _context else ())
            self.context = _context

    @classmethod
    def from_image(cls, image: Union[bytes, str], context: Optional[Context] = None) -> "Module":
        """Loads PTX text or a cubin/fatbin image (bytes or str)
        (cw_module_load_image); refused at load when the driver refuses it.
        context: the Context kernels default to (launches name their stream's)."""
        if isinstance(image, str):
            data = image.encode()
        elif isinstance(image, (bytes, bytearray, memoryview)):
            data = bytes(image)
        else:
            raise TypeError("image must be bytes or str, not %s" % ("None" if image is None else type(image).__name__))
        if not data:
            raise ValueError("image must not be empty")
        if context is not None:
            handle_of(context, Context, "context")
        return cls(None, _image=data, _context=context)  # type: ignore[arg-type]

    def kernel(self, name: str) -> "Kernel":
        """The kernel named `name` (its extern "C" or lowered name)."""
        key = _check.text(name, "name", allow_empty=False)
        h = self.handle
        if name not in self._kernels:
            self._kernels[name] = Kernel(self, _get(lib.cw_module_get_kernel, h, key), name)
        return self._kernels[name]


_UINT_KINDS = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}


def _dims(value: object, name: str) -> Tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        if not 1 <= len(value) <= 3:
            raise ValueError("%s must have 1 to 3 dimensions, not %d" % (name, len(value)))
        return tuple(_check.integer(v, "%s[%d]" % (name, i), 1, _check.UINT32_MAX) for i, v in enumerate(value))
    return (_check.integer(value, name, 1, _check.UINT32_MAX),)


class Kernel:
    """A kernel of a Module. launch(stream, grid, block, *args): ints, floats,
    numpy-style scalars, device arrays (__cuda_array_interface__: their
    address; a cuweave Buffer, CuPy and PyTorch arrays) and objects with a
    ``ptr`` attribute; each argument is packed to the size the kernel's
    parameter has (the driver says)."""

    def __init__(self, module: Optional[Module], ptr: int, name: str = "") -> None:
        self.module: Optional[Module] = module  # keeps the module (and its code) alive
        self.name: str = name
        self._ptr = ctypes.c_void_p(ptr)
        self._sizes: Optional[List[int]] = None

    def param_sizes(self, context: Context) -> List[int]:
        """The sizes in bytes of the kernel's parameters (cw_kernel_get_params)."""
        ctx = handle_of(context, Context, "context")
        if self._sizes is None:
            n = ctypes.c_size_t()
            lib.cw_kernel_get_params(self._ptr, ctx, None, 0, ctypes.byref(n))
            sizes = (ctypes.c_size_t * max(n.value, 1))()
            lib.cw_kernel_get_params(self._ptr, ctx, sizes, n.value, ctypes.byref(n))
            self._sizes = [int(sizes[i]) for i in range(n.value)]
        return self._sizes

    def preload(self, context: Context) -> None:
        """Loads the kernel on `context` now, not at its first launch there."""
        lib.cw_kernel_preload(self._ptr, handle_of(context, Context, "context"))

    @property
    def cu_kernel(self) -> int:
        """The driver's CUkernel (an int; borrowed: valid while the module lives)."""
        return _get(lib.cw_kernel_get_handle, self._ptr)

    @staticmethod
    def _pack(value: Any, size: int, name: str = "argument") -> Any:
        if value is None or isinstance(value, (str, bytes)):
            raise TypeError("%s: cannot pass %s as a kernel parameter" % (name, "None" if value is None
                                                                        else type(value).__name__))
        _check.open_object(value, name)
        if hasattr(value, "__cuda_array_interface__"):
            value = _check.array_address(value, name)
        elif hasattr(value, "ptr") and not isinstance(value, (int, float)):
            value = int(value.ptr)
        if isinstance(value, float) or type(value).__name__.startswith("float"):
            if size == 4:
                return ctypes.c_float(float(value))
            if size == 8:
                return ctypes.c_double(float(value))
        elif size in _UINT_KINDS:
            try:
                v = int(value)
            except (TypeError, ValueError):
                raise TypeError("%s: cannot pass %s as a kernel parameter" % (name, type(value).__name__)) from None
            if not -(1 << (8 * size - 1)) <= v < (1 << (8 * size)):
                raise ValueError("%s: %d does not fit a %d-byte kernel parameter" % (name, v, size))
            return _UINT_KINDS[size](v & ((1 << (8 * size)) - 1))
        raise TypeError("%s: cannot pass %r as a %d-byte kernel parameter" % (name, value, size))

    def launch(self, stream: Stream, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]], *args: Any,
               shared: int = 0) -> None:
        """Launches the kernel on `stream` over `grid` blocks of `block`
        threads (an int or 1-3 ints each), with `shared` bytes of dynamic
        shared memory; `args` as the class says."""
        sh = handle_of(stream, Stream, "stream")
        g, b = _dims(grid, "grid"), _dims(block, "block")
        shm = _check.uint32(shared, "shared")
        sizes = self.param_sizes(stream.context)
        if len(args) != len(sizes):
            raise TypeError("args: the kernel takes %d arguments, %d given" % (len(sizes), len(args)))
        packed = [self._pack(a, n, "args[%d]" % i) for i, (a, n) in enumerate(zip(args, sizes))]
        ptrs = (ctypes.c_void_p * max(len(packed), 1))(*[ctypes.addressof(p) for p in packed])
        c = LaunchConfig()
        lib.cw_launch_config_default(ctypes.byref(c))
        for i, v in enumerate(g):
            c.grid[i] = v
        for i, v in enumerate(b):
            c.block[i] = v
        c.shared_bytes = shm
        lib.cw_kernel_launch(self._ptr, sh, ctypes.byref(c), ptrs)

    def __repr__(self) -> str:
        return "<cuweave.Kernel %r %#x%s>" % (self.name, self._ptr.value or 0,
                                              "" if self.module is not None else " built-in")


def builtin_kernel(which: Union[Builtin, int]) -> Kernel:
    """A kernel built into the library (cw_builtin_get_kernel: a Builtin;
    owned by the library). Loads the embedded image on first use."""
    b = _check.member(which, Builtin, "which")
    return Kernel(None, _get(lib.cw_builtin_get_kernel, int(b)), b.name.lower())
