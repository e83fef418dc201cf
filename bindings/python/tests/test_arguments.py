# SPDX-License-Identifier: BSD-2-Clause
"""Every wrong argument is a TypeError or a ValueError that names the
parameter (issue 41), never a ctypes.ArgumentError, an OverflowError, an
AttributeError or a status from C.

The walk: every public callable of the package (each function and class of
cuweave.__all__, each public method, classmethod and staticmethod of those
classes, and __dlpack__) and each of its parameters. For each parameter the
call is made with the other parameters valid (their defaults, or the valid
value of SPECS) and that one given three wrong values in turn: None (unless
None is a meaning of the parameter), a value of a wrong type, and a value
out of range (a number past the C type, a closed object, a NUL inside a
name, a too short id). The call must raise the expected exception, and its
message must name the parameter. A parameter the walk finds no SPECS entry
for fails the test, so a new parameter cannot go unchecked; CONSTRUCTED_BY
lists the classes users never construct (their methods are walked);
NO_RANGE says why a parameter has no out-of-range value.

The walk runs in a child interpreter (the fake driver with two devices and
the fake NCCL, so that a communicator can be made), IO's methods inside a
compute call of a pipeline.
"""

import json
import os
import re
import subprocess
import sys
import unittest

import fakeenv

NONE_OK = object()  # None is a meaning of the parameter


class Spec:
    """valid(env) -> a valid value; wrong: a value of a wrong type (TypeError);
    bad(env) -> an out-of-range value (ValueError), or a str: why there is none;
    none: NONE_OK or the exception None raises."""

    def __init__(self, valid, wrong, bad, none=TypeError, wrong_exc=TypeError, bad_exc=ValueError):
        self.valid, self.wrong, self.bad, self.none = valid, wrong, bad, none
        self.wrong_exc, self.bad_exc = wrong_exc, bad_exc


def const(v):
    return lambda env: v


def closed(attr):
    return lambda env: env.closed(attr)


def obj(attr, none=TypeError):
    return Spec(lambda env: getattr(env, attr), 5, closed(attr), none)


def uint32(valid=0, none=TypeError):
    return Spec(const(valid), "1", const(1 << 32), none)


def size(valid=1, none=TypeError, bad=-1):
    return Spec(const(valid), "1", const(bad), none)


def int32(valid=0, bad=1 << 31):
    return Spec(const(valid), "1", const(bad))


def boolean(valid=False, none=TypeError):
    return Spec(const(valid), "yes", "a bool: every value of the type is in range", none)


def text(valid="x", none=TypeError):
    return Spec(const(valid), 5, const("a\0b"), none)


def member(valid, none=TypeError):
    return Spec(const(valid), 1.5, const(99), none)


def seconds(valid=0):
    return Spec(const(valid), "1", const(-1), NONE_OK)


def path(none=TypeError):
    return Spec(lambda env: env.tmp("out"), 5, const(""), none)


def handle_bytes():
    return Spec(lambda env: env.shared_handle, 5, const(b"short"))


def address(valid=0):
    return Spec(const(valid), "x", const(-1), NONE_OK)


def function(none=TypeError):
    return Spec(const(lambda *a: None), 5, "any callable is in range", none)


# parameter name -> Spec; "Callable:param" for one callable's own
SPECS = {
    "addr": Spec(const("127.0.0.1:1"), 5, const(""), NONE_OK),
    "block": Spec(const(1), "1", const(0)),
    "grid": Spec(const(1), "1", const(0)),
    "block_threads": uint32(), "grid_blocks": uint32(), "shared_bytes": uint32(), "shared": uint32(),
    "blocking": boolean(), "many": boolean(), "optional": boolean(), "no_internal_stream": boolean(),
    "wait_inputs": boolean(), "node_priority": boolean(), "reset_each_launch": boolean(), "verbose": boolean(),
    "with_else": boolean(), "memory": boolean(none=NONE_OK), "Operator:resident": boolean(),
    "buffer": obj("buffer", NONE_OK),
    "bytes": size(0), "dptr": Spec(const(0), "1", const(-1)),
    "child": obj("graph"),
    "comm_id": Spec(lambda env: env.comm_id, "x", const(b"x" * 5)),
    "compute": function(),
    "context": obj("ctx"),
    "from_dlpack:stream": obj("stream", NONE_OK),
    "Module.from_image:context": obj("ctx", NONE_OK),
    "contexts": Spec(lambda env: [env.ctx], 5, const([])),
    "count": size(4),
    "cu_context": Spec(lambda env: env.ctx.cu_context, "x", const(0)),
    "data": Spec(const(b"\0" * 4), 5, const(b"\0" * 100000)),
    "PartitionGroup:default": Spec(const(-1), "1", const(-2)),
    "Graph.add_cond_handle:default": uint32(),
    "deps": Spec(const(()), 5, "a sequence of GraphNodes: its elements' type is checked (deps[i])"),
    "device": Spec(const(0), "0", const(-1)),
    "peer_info:peer": Spec(const(0), "0", const(-1)),
    "devices": Spec(const([0]), 5, const([-1]), NONE_OK),
    "dir": path(NONE_OK),
    "copy_peer:dst": address(), "copy_peer:src": address(),
    "copy_peer:dst_ctx": obj("ctx"), "copy_peer:src_ctx": obj("ctx"),
    "Pipeline.connect:src": text("A"), "Pipeline.connect:dst": text("B"),
    "src_port": text("out"), "dst_port": text("in"),
    "dtype": Spec(const("uint8"), 5, const("no-such-type")),
    "Comm:dtype": Spec(const("float32"), 1.5, const(99)),
    "feature": member(0),
    "file": path(NONE_OK),
    "set_log_callback:fn": function(NONE_OK),
    "Future.add_done_callback:fn": function(),
    "graph": obj("graph"),
    "Buffer.copy_from:src": obj("buffer"),
    "Graph.add_conditional:handle": Spec(const(1), "1", const(-1)),
    "Buffer.import_handle:handle": handle_bytes(),
    "SharedEvent:handle": Spec(lambda env: env.event_handle, 5, const(b"short"), NONE_OK),
    "SharedEvent.import_handle:handle": Spec(lambda env: env.event_handle, 5, const(b"short")),
    "handler": Spec(lambda env: env.graph, 5, closed("graph")),
    "workload": Spec(lambda env: env.graph, 5, closed("graph")),
    "headers": Spec(const({}), 5, const({"h.h": "a\0b"}), NONE_OK),
    "image": Spec(const(b"// PTX\n"), 5, const(b"")),
    "index": Spec(const(0), "0", const(-1)),
    "inputs": Spec(const(()), 5, "a list of port names: each is checked as add_input's name"),
    "outputs": Spec(const(()), 5, "a list of port names: each is checked as add_output's name"),
    "into": obj("graph", NONE_OK),
    "iterations": size(1),
    "kind": member(1),
    "logger": Spec(const(None), 5, "any logging.Logger is in range", NONE_OK),
    "max_bytes": Spec(const(1 << 20), "1", const(-1), NONE_OK),
    "max_in_flight": uint32(4), "threads": uint32(1), "max_spans": uint32(), "max_streams": uint32(),
    "reserved": uint32(1),
    "max_level": member(1),
    "gpu_timing": member(1),
    "StreamPool:mode": member(0), "Stream.capture:mode": member(1),
    "name": text(),
    "error_class:name": Spec(const("CW_ERROR_TIMEOUT"), 5, const("CW_NO_SUCH_STATUS")),
    "Program:name": Spec(const("x.cu"), 5, const("")),
    "Module.kernel:name": Spec(const("k"), 5, const("")),
    "Operator:name": Spec(const("op"), 5, const("")),
    "name_expression": text(),
    "name_expressions": Spec(const(()), 5, const(["a\0b"])),
    "options": Spec(const(()), 5, const(["a\0b"])),
    "HostMemory:nbytes": size(16, bad=0),
    "copy_peer:nbytes": size(4),
    "nranks": Spec(const(1), "1", const(0)),
    "Comm.create_rank:rank": Spec(const(0), "0", const(1)),  # of nranks 1
    "rank": Spec(const(0), "0", const(-1)),
    "Comm.bootstrap:rank": Spec(const(0), "0", const(-1), NONE_OK),
    "Comm.bootstrap:world_size": Spec(const(1), "1", const(0), NONE_OK),
    "Comm.bootstrap:token": Spec(const(None), 5, const("a\0b"), NONE_OK),
    "world_size": Spec(const(1), "1", const(0), NONE_OK),
    "root": Spec(const(0), "0", const(-1)),
    "obj": Spec(lambda env: env.buffer, 5, lambda env: env.host_dlpack),
    "Comm.all_reduce:op": member("sum"), "Comm.all_reduce_rank:op": member("sum"),
    "Pipeline.port_ptr:op": text("A"),
    "other": obj("stream"),
    "out": Spec(const(None), 5, const(bytearray(1)), NONE_OK),
    "StreamPool.acquire_named:owner": Spec(const(7), "any object is a key: no wrong type", const(0)),
    "StreamPool.release_owner:owner": Spec(const(7), "any object is a key: no wrong type", const(0)),
    "share_buffer_pool:owner": obj("ctx"),
    "path": path(),
    "peer": obj("ctx"),
    "pointer": Spec(const(None), "x", const(-1), NONE_OK),
    "pool": obj("pool", NONE_OK),
    "port": text("out"),
    "IO.receive_stream:port": text(none=NONE_OK),
    "priority": int32(),
    "program": obj("program"),
    "send": Spec(lambda env: [env.buffer], 5, const([])),
    "recv": Spec(lambda env: [env.buffer], 5, const([])),
    "Comm.all_reduce_rank:send": address(), "Comm.all_reduce_rank:recv": address(),
    "Comm.broadcast_rank:send": address(), "Comm.broadcast_rank:recv": address(),
    "resident": obj("resident"),
    "seq": size(1),
    "shape": Spec(const(4), "4", const(-1)),
    "Buffer.import_handle:shape": Spec(const(None), "4", const(-1), NONE_OK),
    "slot": uint32(),
    "sm_counts": Spec(const([8]), 5, const([-1])),
    "source": text('extern "C" __global__ void k() {}'),
    "Resident.set_fused:source": Spec(const(None), 5, const("a\0b"), NONE_OK),
    "Resident.set_fused:stages": Spec(const(["a"]), 5, const(["a\0b"]), NONE_OK),
    "Resident.set_dataflow:stages": Spec(lambda env: [__import__("cuweave").FusedStage("a", tiles=1)], 5,
                                         const([])),
    "in_flight": Spec(const(1), "1", const(9)),
    "watchdog": Spec(const(1.0), "1", const(-1), NONE_OK),
    "FusedStage:name": text("a"),
    "reads": Spec(const(()), 5, "a sequence of FusedDeps: its elements' type is checked (reads[i])"),
    "tiles": uint32(1), "threads": uint32(), "radius": uint32(),
    "size": Spec(const(0), "1", const((1, 2, 3))), "tile": Spec(const(0), "1", const((1, 2, 3))),
    "read": member(1),
    "scale": Spec(const(None), 5, const((1, 0)), NONE_OK),
    "previous": boolean(),
    "FusedDep:function": Spec(const(None), 5, const("a\0b"), NONE_OK),
    "PortRead:function": Spec(const(None), 5, const("a\0b"), NONE_OK),
    "StageOperator:name": Spec(const("op"), 5, const("")),
    "StageOperator:function": Spec(const("fn"), 5, const("")),
    "StageOperator:inputs": Spec(const(()), 5, const([("in", "sideways")])),
    "StageOperator:tiles": uint32(1),
    "spin": Spec(const(0), "1", const(-1)),
    "stage": uint32(),
    "start": function(NONE_OK), "stop": function(NONE_OK),
    "stream": obj("stream"),
    "Stream.wrap:stream": Spec(const(0), "x", const(-1)),
    "streams": Spec(lambda env: [env.stream], 5, const([])),
    "timeout": seconds(),
    "trace": obj("trace", NONE_OK),
    "user": Spec(const(0), "x", const(-1), NONE_OK),
    "value": Spec(const(None), "any object", "any object is in range", NONE_OK),
    "which": member(0),
    "Buffer.__dlpack__:stream": Spec(const(None), "x", const(0), NONE_OK),
    "max_version": Spec(const(None), 5, const((-1, 0)), NONE_OK),
    "dl_device": Spec(const(None), 5, "the DLPack protocol asks BufferError for another device", NONE_OK),
    "copy": Spec(const(None), "x", "the DLPack protocol asks BufferError for copy=True", NONE_OK),
    "Buffer.view:shape": Spec(const(4), "4", const(1 << 20)),
    "IO.alloc:shape": Spec(const(4), "4", const(-1)),
    "IO.emit:buffer": Spec(const(None), 5, closed("buffer"), NONE_OK),
    "IO.set_output_stream:stream": obj("stream", NONE_OK),
    "Pipeline.set_trace:trace": obj("trace", NONE_OK),
}

# Classes users never construct: the library hands them out (their methods are walked).
CONSTRUCTED_BY = {
    "Lease": "StreamPool.acquire", "Fork": "Stream.fork", "Capture": "Stream.capture",
    "GraphNode": "Graph.add_*", "GraphExec": "Graph.instantiate", "Kernel": "Module.kernel",
    "Module": "Program.load, Module.from_image", "BufferView": "Buffer.view", "DLPackArray": "from_dlpack",
    "IO": "the pipeline (a compute's argument)", "Message": "IO.receive", "Span": "Trace.span",
}
# Callables the walk leaves out, and why.
SKIPPED = {}  # (Comm.bootstrap was, though a world of 1 bootstraps alone: the walk found its token unchecked)


def public_callables(cuweave):
    import inspect
    out = []
    for name in cuweave.__all__:
        o = getattr(cuweave, name)
        if inspect.isfunction(o):
            out.append((name, o, None))
        elif inspect.isclass(o) and not issubclass(o, (BaseException, int, tuple)):
            if name not in CONSTRUCTED_BY:
                out.append((name, o, None))
            for m, v in vars(o).items():
                if m.startswith("_") and m != "__dlpack__":
                    continue
                kind = "static" if isinstance(v, staticmethod) else "class" if isinstance(v, classmethod) else None
                f = v.__func__ if kind else v
                if inspect.isfunction(f):
                    out.append(("%s.%s" % (name, m), f, (o, kind)))
    return out


def params_of(fn):
    import inspect
    sig = inspect.signature(fn)
    return [p for p in sig.parameters.values() if p.name not in ("self", "cls") and not p.name.startswith("_")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def spec_for(qual, pname):
    return SPECS.get("%s:%s" % (qual, pname)) or SPECS.get("%s:%s" % (qual.split(".")[0], pname)) or SPECS.get(pname)


def walk(cuweave, env, only=None, exclude=("IO.",)):
    """[(callable, parameter, case, problem)] for every case that did not raise as it should."""
    problems, cases = [], 0
    for qual, fn, owner in public_callables(cuweave):
        if qual in SKIPPED or (only and not qual.startswith(only)) or any(qual.startswith(e) for e in exclude):
            continue
        ps = params_of(fn)
        for target in ps:
            spec = spec_for(qual, target.name)
            if spec is None:
                problems.append((qual, target.name, "-", "no SPECS entry for this parameter"))
                continue
            bads = []
            if spec.none is not NONE_OK:
                bads.append(("None", lambda e: None, spec.none))
            if not isinstance(spec.wrong, str) or not spec.wrong.startswith(("any ", "a ")):
                bads.append(("wrong type", (lambda w: lambda e: w)(spec.wrong), spec.wrong_exc))
            if not isinstance(spec.bad, str):
                bads.append(("out of range", spec.bad, spec.bad_exc))
            for case, make_bad, exc in bads:
                cases += 1
                kwargs = {}
                try:
                    for p in ps:
                        if p is target:
                            kwargs[p.name] = make_bad(env)
                        elif p.default is p.empty:
                            s = spec_for(qual, p.name)
                            if s is None:
                                raise LookupError("no SPECS entry for %s" % p.name)
                            kwargs[p.name] = s.valid(env)
                    call = env.bound(qual, fn, owner)
                except Exception as e:  # noqa: BLE001
                    problems.append((qual, target.name, case, "could not set up: %r" % (e,)))
                    continue
                try:
                    call(**kwargs)
                except exc as e:
                    if isinstance(e, cuweave.CuweaveError) and not (type(e).__name__ == "InvalidArgumentError"
                                                                    and target.name in str(e)):
                        problems.append((qual, target.name, case, "a status from C: %s: %s" % (type(e).__name__, e)))
                    elif not re.search(r"(^|[^\w])%s([^\w]|$)" % re.escape(target.name), str(e)):
                        problems.append((qual, target.name, case, "%s does not name it: %s" % (type(e).__name__, e)))
                except BaseException as e:  # noqa: BLE001
                    problems.append((qual, target.name, case, "%s instead of %s: %s" % (type(e).__name__,
                                                                                       exc.__name__, e)))
                else:
                    problems.append((qual, target.name, case, "accepted"))
    return problems, cases


CHILD = r'''
import json, os, sys, tempfile
sys.path.insert(0, %(tests)r)
import fakeenv
import cuweave
import test_arguments as T


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cuweave-walk-")
        self.ctx = cuweave.Context(0)
        self.stream = cuweave.Stream(self.ctx)
        self.pool = cuweave.StreamPool(self.ctx)
        with self.stream.capture() as cap:
            pass
        self.graph = cap.graph
        self.program = cuweave.Program(self.ctx, 'extern "C" __global__ void k() {}', name="k.cu")
        self.buffer = cuweave.Buffer(self.stream, 64)
        sh = cuweave.Buffer.create_shareable(self.stream, 64)
        self.shared_buffer = sh
        self.shared_handle = sh.export()
        self.event = cuweave.SharedEvent(self.ctx)
        self.event_handle = self.event.export()
        self.resident = cuweave.Resident(self.ctx)
        self.trace = cuweave.Trace()
        self.comm_id = cuweave.comm_id_generate()

        class HostOnly:
            def __dlpack_device__(self):
                return (1, 0)

            def __dlpack__(self, **kw):
                raise AssertionError("not to be asked")

        self.host_dlpack = HostOnly()
        self._made = {}

    def tmp(self, name):
        return os.path.join(self.dir, name)

    def closed(self, attr):
        fresh = {"ctx": lambda: cuweave.Context(0), "stream": lambda: cuweave.Stream(self.ctx),
                 "pool": lambda: cuweave.StreamPool(self.ctx), "graph": lambda: cuweave.Graph(self.ctx),
                 "program": lambda: cuweave.Program(self.ctx, 'extern "C" __global__ void k() {}', name="k.cu"),
                 "buffer": lambda: cuweave.Buffer(self.stream, 64), "resident": lambda: cuweave.Resident(self.ctx),
                 "trace": lambda: cuweave.Trace()}[attr]()
        fresh.close()
        return fresh

    def instance(self, cls):
        name = cls.__name__
        makers = {
            "Context": lambda: self.ctx, "Stream": lambda: self.stream, "StreamPool": lambda: self.pool,
            "Future": lambda: cuweave.Future(self.stream), "Timer": lambda: cuweave.Timer(self.ctx),
            "Graph": lambda: cuweave.Graph(self.ctx), "GraphExec": lambda: self.graph.instantiate(),
            "Program": lambda: self.program, "Module": lambda: self.program.load(),
            "Kernel": lambda: self.program.load().kernel("k"), "Buffer": lambda: self.buffer,
            "HostMemory": lambda: cuweave.HostMemory(self.ctx, 64), "SharedEvent": lambda: self.event,
            "Resident": lambda: cuweave.Resident(self.ctx), "Trace": lambda: self.trace,
            "DeviceGroup": lambda: cuweave.DeviceGroup([0]), "Comm": lambda: cuweave.Comm([self.ctx]),
            "Pipeline": lambda: self.pipeline(),
            "Operator": lambda: cuweave.Operator("op", lambda io: None),
            "PartitionGroup": self.partitions,
        }
        if name not in self._made:
            self._made[name] = makers[name]()
        return self._made[name]

    def partitions(self):
        # the fake makes no green contexts: an object over a handle C refuses (never reached: the
        # arguments are refused first)
        pg = cuweave.PartitionGroup.__new__(cuweave.PartitionGroup)
        cuweave._core._Handle.__init__(pg, 0x10)
        pg._finalizer.detach()
        return pg

    def pipeline(self):
        p = cuweave.Pipeline(self.ctx)
        p.add(cuweave.Operator("A", lambda io: None, outputs=["out"]),
              cuweave.Operator("B", lambda io: None, inputs=["in"]))
        return p

    def bound(self, qual, fn, owner):
        if owner is None:
            return fn
        cls, kind = owner
        if kind == "static":
            return fn
        if kind == "class":
            return lambda **kw: fn(cls, **kw)
        inst = self.instance(cls)
        return lambda **kw: fn(inst, **kw)


env = Env()
problems, cases = T.walk(cuweave, env)

# IO's methods, inside a compute call
io_result = {}


def compute(io):
    class IoEnv(Env):
        pass
    e = env
    e.io = io

    def bound(qual, fn, owner):
        return lambda **kw: fn(io, **kw)
    old = e.bound
    e.bound = bound
    try:
        io_result["r"] = T.walk(cuweave, e, only="IO.", exclude=())
    finally:
        e.bound = old


p = cuweave.Pipeline(env.ctx)
p.add(cuweave.Operator("A", compute, outputs=["out"]))
p.run(1)
p.close()
io_problems, io_cases = io_result["r"]
print(json.dumps({"problems": problems + io_problems, "cases": cases + io_cases}))
'''


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestDeviceAddresses(unittest.TestCase):
    """The parameters that take a device address (copy_peer's dst and src,
    the collectives' send and recv, a kernel's args): a closed Buffer or
    DLPackArray and an array interface whose data is no address are errors
    naming the parameter (review of issue 41: "Buffer is closed", "the
    DLPackArray is closed", int()'s own TypeError, and a negative address
    wrapped by ctypes into a DriverError)."""

    def setUp(self):
        import cuweave
        self.cw = cuweave
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)
        self.good = cuweave.Buffer(self.s, 16)

    def tearDown(self):
        self.good.close()
        self.s.close()
        self.ctx.close()

    def bad_addresses(self):
        cw = self.cw
        closed_buf = cw.Buffer(self.s, 16)
        closed_buf.close()
        other = cw.Buffer(self.s, 16)
        closed_arr = cw.from_dlpack(other)
        closed_arr.close()
        other.close()
        closed_host = cw.HostMemory(self.ctx, 16)
        closed_host.close()

        def cai(data):
            return type("Array", (), {"__cuda_array_interface__": {"data": data, "shape": (4,), "typestr": "|u1",
                                                                   "version": 3}})()

        return [(closed_buf, ValueError), (closed_arr, ValueError), (cai((None, False)), TypeError),
                (cai((-5, False)), ValueError), (cai((1 << 64, False)), ValueError), (cai("x"), TypeError),
                (closed_host, ValueError)]

    def check(self, what, call, name):
        with self.assertRaises((TypeError, ValueError), msg=what) as cm:
            call()
        self.assertNotIsInstance(cm.exception, self.cw.CuweaveError, what)
        self.assertRegex(str(cm.exception), r"(^|[^\w])%s([^\w]|$)" % re.escape(name), what)
        return cm.exception

    def test_copy_peer_and_collectives(self):
        cw = self.cw
        for bad, exc in self.bad_addresses():
            what = repr(bad)
            e = self.check(what, lambda: cw.copy_peer(self.s, bad, self.ctx, self.good, None, 4), "dst")
            self.assertIsInstance(e, exc, what)
            self.check(what, lambda: cw.copy_peer(self.s, self.good, None, bad, self.ctx, 4), "src")
            # the collectives' send and recv go through the same conversion (the fake NCCL is for child
            # interpreters: test_multi.py)
            self.check(what, lambda: cw._multi.address(bad, "recv[0]"), "recv[0]")

    def test_kernel_arguments(self):
        cw = self.cw
        module = cw.Module.from_image(b"//FAKEPTX\n.version 8.0\n", self.ctx)
        k = module.kernel("k#8")  # the fake: one 8-byte parameter
        k.launch(self.s, 1, 1, self.good)
        for bad, exc in self.bad_addresses():
            self.check(repr(bad), lambda: k.launch(self.s, 1, 1, bad), "args[0]")
        module.close()


class TestOddPaths(unittest.TestCase):
    """An os.PathLike whose __fspath__ gives no str or bytes, or raises
    (review of issue 41: os.fsencode's own "expected BadPath.__fspath__()
    to return str or bytes, not int", naming no parameter)."""

    def test_fspath_of_a_wrong_type(self):
        from cuweave import _check

        class Gives:
            def __init__(self, v):
                self.v = v

            def __fspath__(self):
                return self.v

        class Raises:
            def __fspath__(self):
                raise TypeError("no path here")

        for bad in (Gives(5), Gives(None), Raises()):
            with self.assertRaises(TypeError) as cm:
                _check.path(bad, "file")
            self.assertRegex(str(cm.exception), r"^file\b")
        with self.assertRaises(ValueError):
            _check.path(Gives(""), "file")
        self.assertEqual(_check.path(Gives(b"/tmp/x"), "file"), b"/tmp/x")


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestArgumentWalk(unittest.TestCase):
    def test_every_wrong_argument_is_named(self):
        here = os.path.dirname(os.path.abspath(__file__))
        env = fakeenv.child_env(FAKE_CUDA_DEVICES="2",
                                CUWEAVE_LIBNCCL=os.path.join(os.path.dirname(fakeenv.FAKE), "libfakenccl.so"))
        out = subprocess.run([sys.executable, "-c", CHILD % {"tests": here}], capture_output=True, text=True,
                             env=env, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr[-4000:])
        result = json.loads(out.stdout.strip().splitlines()[-1])
        problems = result["problems"]
        # (nothing printed: tools/test-summary.py reads unittest's "... ok" lines)
        self.assertGreater(result["cases"], 600)
        self.assertEqual(problems, [], "%d cases, %d problems:\n%s" % (
            result["cases"], len(problems), "\n".join("%s(%s) %s: %s" % tuple(p) for p in problems)))


if __name__ == "__main__":
    unittest.main()
