# SPDX-License-Identifier: BSD-2-Clause
"""Loads libcuweave and declares every C signature the bindings use, as data,
in one place. Errors become exceptions through one errcheck.

What is here, and what the tests check against the C side
(tests/test_abi.py):
  - the ctypes Structures of the public C structs, each naming its C struct
    in _c_name_: their size and every field's offset and size are compared
    with what the C compiler says (STRUCTS_UNBOUND lists the public structs
    that have no Structure here, and why);
  - _SIGNATURES, the C functions bound, with their argument and result
    types (compared with the CW_API declarations of include/cuweave/*.h);
    UNBOUND lists the exported functions deliberately not bound, and why;
  - SONAME, the library's soname (libcuweave.so.CW_API_VERSION_MAJOR).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _errors

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))

# The ABI these bindings are written for: include/cuweave/version.h's
# CW_API_VERSION_MAJOR, which is also the soname's number.
ABI_MAJOR = 2
SONAME = "libcuweave.so.%d" % ABI_MAJOR
# Builds of the source tree the package sits in, when it sits in one.
_TREE_BUILDS = ("build/meson/src", "build/make", "build-make")


def candidates(environ: Optional[Mapping[str, str]] = None,
               find_library: Optional[Callable[[str], Optional[str]]] = None) -> List[Tuple[str, str]]:
    """The places the library is looked for, in order, as (where, path):

      CUWEAVE_LIBRARY   the variable, when set: that file and nothing else;
      package           libcuweave.so.2 beside this package (a wheel or an
                        install that bundles the library);
      source tree       build/meson/src, build/make, build-make of the source
                        tree, when the package is bindings/python/cuweave of one;
      find_library      ctypes.util.find_library("cuweave") (ldconfig's cache,
                        then the compiler's and linker's paths);
      system            the bare soname: the dynamic loader's search
                        (LD_LIBRARY_PATH, the cache, /lib, /usr/lib).

    A candidate that is not the ABI these bindings are written for (another
    soname's library) is passed over when loading (_load)."""
    environ = os.environ if environ is None else environ
    find_library = ctypes.util.find_library if find_library is None else find_library
    env = environ.get("CUWEAVE_LIBRARY")
    if env:
        return [("CUWEAVE_LIBRARY", env)]
    out = [("package", os.path.join(_HERE, SONAME))]
    if os.path.isfile(os.path.join(_ROOT, "include", "cuweave", "version.h")):
        out += [("source tree", os.path.join(_ROOT, rel, SONAME)) for rel in _TREE_BUILDS]
    try:
        found = find_library("cuweave")
    except Exception:  # noqa: BLE001 (find_library runs tools that may be missing)
        found = None
    if found:
        out.append(("find_library", found))
    out.append(("system", SONAME))
    return out


def _abi_problem(dll: ctypes.CDLL, required: Sequence[str]) -> Optional[str]:
    """Why a loaded library is not the ABI these bindings are written for, or
    None. Its symbols must carry the version node CUWEAVE_<ABI major>
    (src/cuweave.map), asked with dlvsym, which initialises nothing
    (cw_get_versions would load the driver); a library without symbol
    versions (or a C library without dlvsym) must at least define every
    function bound."""
    try:
        dlvsym = ctypes.CDLL(None).dlvsym
    except (OSError, AttributeError):
        dlvsym = None
    if dlvsym is not None:
        dlvsym.restype = ctypes.c_void_p
        dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        node = ("CUWEAVE_%d" % ABI_MAJOR).encode()
        versioned = not dlvsym(dll._handle, b"cw_init", b"CUWEAVE_NO_SUCH_NODE")
        if versioned and not dlvsym(dll._handle, b"cw_init", node):
            return "not ABI %d (its symbols lack the version node %s of %s)" % (ABI_MAJOR, node.decode(), SONAME)
    missing = [name for name in required if not hasattr(dll, name)]
    if missing:
        return "not ABI %d (it lacks %s%s)" % (ABI_MAJOR, ", ".join(missing[:3]), ", ..." if len(missing) > 3 else "")
    return None


def _load(required: Sequence[str]) -> Tuple[ctypes.CDLL, str, str]:
    errors: List[str] = []
    for where, path in candidates():
        is_path = os.sep in path
        if is_path and not os.path.exists(path) and where != "CUWEAVE_LIBRARY":
            continue  # a place that holds no library: nothing to say
        try:
            dll = ctypes.CDLL(path)
        except OSError as exc:
            errors.append("%s (%s): %s" % (path, where, exc))
            continue
        why = _abi_problem(dll, required)
        if why:
            errors.append("%s (%s): %s" % (path, where, why))
            continue
        return dll, where, path
    raise ImportError("libcuweave (%s) could not be loaded; set CUWEAVE_LIBRARY to its path. Tried: %s" %
                      (SONAME, "; ".join(errors) if errors else "nothing found"))


c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_int_p = ctypes.POINTER(ctypes.c_int)
c_uint_p = ctypes.POINTER(ctypes.c_uint)
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_uint32_p = ctypes.POINTER(ctypes.c_uint32)
c_uint64_p = ctypes.POINTER(ctypes.c_uint64)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


# ---- structs (each names its C struct: tests/test_abi.py compares layouts) ----

class ErrorInfo(ctypes.Structure):
    _c_name_ = "cw_error_info"
    _fields_ = [
        ("status", ctypes.c_int),
        ("cu_result", ctypes.c_int),
        ("cu_name", ctypes.c_char_p),
        ("cu_string", ctypes.c_char_p),
        ("driver_call", ctypes.c_char_p),
        ("function", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
    ]


class Versions(ctypes.Structure):
    _c_name_ = "cw_versions"
    _fields_ = [
        ("cuweave", ctypes.c_uint),
        ("api", ctypes.c_uint),
        ("driver", ctypes.c_int),
        ("nvrtc_major", ctypes.c_int),
        ("nvrtc_minor", ctypes.c_int),
        ("nccl", ctypes.c_int),
        ("builtin_origin", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class DeviceInfo(ctypes.Structure):
    _c_name_ = "cw_device_info"
    _fields_ = [
        ("ordinal", ctypes.c_int),
        ("name", ctypes.c_char * 256),
        ("cc_major", ctypes.c_int),
        ("cc_minor", ctypes.c_int),
        ("sm_count", ctypes.c_int),
        ("max_threads_per_block", ctypes.c_int),
        ("warp_size", ctypes.c_int),
        ("clock_khz", ctypes.c_int),
        ("async_engines", ctypes.c_int),
        ("l2_cache_bytes", ctypes.c_int),
        ("max_shared_per_block_optin", ctypes.c_int),
        ("can_map_host_memory", ctypes.c_int),
        ("stream_priorities", ctypes.c_int),
        ("memory_pools", ctypes.c_int),
        ("stream_mem_ops_64", ctypes.c_int),
        ("pci_domain", ctypes.c_int),
        ("pci_bus", ctypes.c_int),
        ("pci_device", ctypes.c_int),
        ("total_memory", ctypes.c_uint64),
        ("uuid", ctypes.c_ubyte * 16),
        ("reserved", ctypes.c_uint8 * 64),
    ]


class ContextInfo(ctypes.Structure):
    _c_name_ = "cw_context_info"
    _fields_ = [
        ("device", ctypes.c_int),
        ("kind", ctypes.c_int),
        ("handle", ctypes.c_void_p),
        ("least_priority", ctypes.c_int),
        ("greatest_priority", ctypes.c_int),
        ("sm_count", ctypes.c_uint),
        ("reserved", ctypes.c_uint8 * 36),
    ]


class StreamSettings(ctypes.Structure):
    _c_name_ = "cw_stream_settings"
    _fields_ = [("flags", ctypes.c_uint), ("priority", ctypes.c_int), ("reserved", ctypes.c_uint8 * 56)]


class PoolSettings(ctypes.Structure):
    _c_name_ = "cw_stream_pool_settings"
    _fields_ = [
        ("mode", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("priority", ctypes.c_int),
        ("reserved_streams", ctypes.c_uint),
        ("max_streams", ctypes.c_uint),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class StreamInfo(ctypes.Structure):
    _c_name_ = "cw_stream_info"
    _fields_ = [
        ("handle", ctypes.c_void_p),
        ("context", ctypes.c_void_p),
        ("device", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("owned", ctypes.c_int),
        ("from_pool", ctypes.c_int),
        ("is_null", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class PoolInfo(ctypes.Structure):
    _c_name_ = "cw_stream_pool_info"
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("created", ctypes.c_size_t),
        ("leased", ctypes.c_size_t),
        ("idle", ctypes.c_size_t),
        ("named", ctypes.c_size_t),
        ("mode", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 28),
    ]


class GraphInfo(ctypes.Structure):
    _c_name_ = "cw_graph_info"
    _fields_ = [
        ("handle", ctypes.c_void_p),
        ("context", ctypes.c_void_p),
        ("nodes", ctypes.c_size_t),
        ("sinks", ctypes.c_size_t),
        ("is_body", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 28),
    ]


class CondSettings(ctypes.Structure):
    _c_name_ = "cw_cond_settings"
    _fields_ = [("type", ctypes.c_int), ("with_else", ctypes.c_int), ("reserved", ctypes.c_uint8 * 56)]


class GraphUpdateInfo(ctypes.Structure):
    _c_name_ = "cw_graph_update_info"
    _fields_ = [
        ("kind", ctypes.c_int),
        ("driver_result", ctypes.c_int),
        ("reason", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 40),
    ]


class GraphExecInfo(ctypes.Structure):
    _c_name_ = "cw_graph_exec_info"
    _fields_ = [
        ("handle", ctypes.c_void_p),
        ("context", ctypes.c_void_p),
        ("launches", ctypes.c_uint64),
        ("updates_in_place", ctypes.c_uint64),
        ("reinstantiations", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 24),
    ]


class Header(ctypes.Structure):
    _c_name_ = "cw_header"
    _fields_ = [("name", ctypes.c_char_p), ("source", ctypes.c_char_p)]


class ProgramSettings(ctypes.Structure):
    _c_name_ = "cw_program_settings"
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("options", ctypes.POINTER(ctypes.c_char_p)),
        ("n_options", ctypes.c_size_t),
        ("headers", ctypes.POINTER(Header)),
        ("n_headers", ctypes.c_size_t),
        ("name_expressions", ctypes.POINTER(ctypes.c_char_p)),
        ("n_name_expressions", ctypes.c_size_t),
        ("arch", ctypes.c_int),
        ("output_ptx", ctypes.c_int),
        ("cache", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 48),
    ]


class ProgramInfo(ctypes.Structure):
    _c_name_ = "cw_program_info"
    _fields_ = [
        ("code", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("is_ptx", ctypes.c_int),
        ("arch", ctypes.c_int),
        ("source", ctypes.c_int),
        ("cached", ctypes.c_int),
        ("key", ctypes.c_char * 65),
        ("reserved", ctypes.c_uint8 * 39),
    ]


class JitCacheSettings(ctypes.Structure):
    _c_name_ = "cw_jit_cache_settings"
    _fields_ = [
        ("dir", ctypes.c_char_p),
        ("max_bytes", ctypes.c_uint64),
        ("memory", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class JitStats(ctypes.Structure):
    _c_name_ = "cw_jit_stats"
    _fields_ = [
        ("compiles", ctypes.c_uint64),
        ("memory_hits", ctypes.c_uint64),
        ("disk_hits", ctypes.c_uint64),
        ("disk_writes", ctypes.c_uint64),
        ("disk_rejected", ctypes.c_uint64),
        ("evictions", ctypes.c_uint64),
        ("disk_untrusted", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 8),
    ]


class JitCacheInfo(ctypes.Structure):
    _c_name_ = "cw_jit_cache_info"
    _fields_ = [
        ("dir", ctypes.c_char * 1024),
        ("max_bytes", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("entries", ctypes.c_uint64),
        ("exists", ctypes.c_int),
        ("trusted", ctypes.c_int),
        ("memory", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 52),
    ]


class LaunchConfig(ctypes.Structure):
    _c_name_ = "cw_launch_config"
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("cluster", ctypes.c_uint * 3),
        ("priority", ctypes.c_int),
        ("use_priority", ctypes.c_int),
        ("arg_sizes", ctypes.POINTER(ctypes.c_size_t)),
        ("n_args", ctypes.c_uint),
        ("reserved", ctypes.c_uint8 * 20),
    ]


class ResidentSettings(ctypes.Structure):
    _c_name_ = "cw_resident_settings"
    _fields_ = [
        ("timeout_ms", ctypes.c_uint32),
        ("sleep_interval_us", ctypes.c_uint32),
        ("sleep_mode", ctypes.c_int),
        ("spin_us", ctypes.c_uint32),
        ("sync_with_host", ctypes.c_int),
        ("input_slots", ctypes.c_uint32),
        ("input_bytes", ctypes.c_size_t),
        ("unroll", ctypes.c_uint32),
        ("gate", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("use_default_priority", ctypes.c_int),
        ("destroy_timeout_ms", ctypes.c_uint32),
        ("overlap", ctypes.c_int),
        ("trace", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 40),
    ]


class ResidentInfo(ctypes.Structure):
    _c_name_ = "cw_resident_info"
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("state", ctypes.c_int),
        ("launched", ctypes.c_int),
        ("requested", ctypes.c_uint64),
        ("completed", ctypes.c_uint64),
        ("iterations", ctypes.c_uint64),
        ("idle_polls", ctypes.c_uint64),
        ("launches", ctypes.c_uint64),
        ("iter_min_ns", ctypes.c_uint64),
        ("iter_median_ns", ctypes.c_uint64),
        ("iter_max_ns", ctypes.c_uint64),
        ("median_window", ctypes.c_uint64),
        ("run_ns", ctypes.c_uint64),
        ("exit", ctypes.c_int),
        ("fused", ctypes.c_int),
        ("grid_blocks", ctypes.c_uint32),
        ("block_threads", ctypes.c_uint32),
        ("max_grid_blocks", ctypes.c_uint32),
        ("gate", ctypes.c_int),
        ("overlap", ctypes.c_int),
        ("fallback", ctypes.c_int),
        ("fallback_detail", ctypes.c_char_p),
        ("stall", ctypes.c_void_p),
    ]


class ResidentFused(ctypes.Structure):
    _c_name_ = "cw_resident_fused"
    _fields_ = [
        ("source", ctypes.c_char_p),
        ("stages", ctypes.POINTER(ctypes.c_char_p)),
        ("options", ctypes.POINTER(ctypes.c_char_p)),
        ("user", ctypes.c_uint64),
        ("stage_count", ctypes.c_uint32),
        ("option_count", ctypes.c_uint32),
        ("grid_blocks", ctypes.c_uint32),
        ("block_threads", ctypes.c_uint32),
        ("shared_bytes", ctypes.c_uint32),
        ("mode", ctypes.c_int),
        ("stage_defs", ctypes.c_void_p),
        ("in_flight", ctypes.c_uint32),
        ("watchdog_ms", ctypes.c_uint32),
        ("reserved", ctypes.c_uint8 * 24),
    ]


class FusedDep(ctypes.Structure):
    _c_name_ = "cw_fused_dep"
    _fields_ = [
        ("stage", ctypes.c_uint32),
        ("read", ctypes.c_int),
        ("radius", ctypes.c_uint32),
        ("scale_num", ctypes.c_uint32),
        ("scale_den", ctypes.c_uint32),
        ("previous", ctypes.c_int),
        ("function", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 16),
    ]


class FusedStage(ctypes.Structure):
    _c_name_ = "cw_fused_stage"
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("deps", ctypes.POINTER(FusedDep)),
        ("dep_count", ctypes.c_uint32),
        ("tiles", ctypes.c_uint32),
        ("size", ctypes.c_uint32 * 2),
        ("tile", ctypes.c_uint32 * 2),
        ("threads", ctypes.c_uint32),
        ("shared_bytes", ctypes.c_uint32),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class ResidentStall(ctypes.Structure):
    _c_name_ = "cw_resident_stall"
    _fields_ = [
        ("kind", ctypes.c_uint32),
        ("stage", ctypes.c_uint32),
        ("tile", ctypes.c_uint32),
        ("waited_stage", ctypes.c_uint32),
        ("waited_tile", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("request", ctypes.c_uint64),
        ("counter", ctypes.c_uint64),
        ("needed", ctypes.c_uint64),
        ("detail", ctypes.c_char_p),
    ]


class BufferInfo(ctypes.Structure):
    _c_name_ = "cw_buffer_info"
    _fields_ = [
        ("dptr", ctypes.c_uint64),
        ("bytes", ctypes.c_size_t),
        ("refs", ctypes.c_uint),
        ("uses", ctypes.c_uint),
        ("device", ctypes.c_int),
        ("context", ctypes.c_void_p),
        ("reserved", ctypes.c_uint8 * 24),
    ]


class PartitionCaps(ctypes.Structure):
    _c_name_ = "cw_partition_caps"
    _fields_ = [
        ("supported", ctypes.c_int),
        ("sm_count", ctypes.c_uint),
        ("min_partition", ctypes.c_uint),
        ("granularity", ctypes.c_uint),
        ("workqueues", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PartitionGroupInfo(ctypes.Structure):
    _c_name_ = "cw_partition_group_info"
    _fields_ = [
        ("count", ctypes.c_size_t),
        ("default_index", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PartitionInfo(ctypes.Structure):
    _c_name_ = "cw_partition_info"
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("sm_count", ctypes.c_uint),
        ("leftover", ctypes.c_int),
        ("is_default", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PeerInfo(ctypes.Structure):
    _c_name_ = "cw_peer_info"
    _fields_ = [
        ("can_access", ctypes.c_int),
        ("perf_rank", ctypes.c_int),
        ("native_atomics", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 20),
    ]


MAX_DEVICES = 64  # CW_MAX_DEVICES


class DeviceGroupInfo(ctypes.Structure):
    _c_name_ = "cw_device_group_info"
    _fields_ = [
        ("count", ctypes.c_int),
        ("devices", ctypes.c_int * MAX_DEVICES),
        ("contexts", ctypes.c_void_p * MAX_DEVICES),
        ("reserved", ctypes.c_uint8 * 64),
    ]


class CommInfo(ctypes.Structure):
    _c_name_ = "cw_comm_info"
    _fields_ = [
        ("size", ctypes.c_int),
        ("contexts", ctypes.c_void_p * MAX_DEVICES),
        ("local_size", ctypes.c_int),
        ("first_rank", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 56),
    ]


COMM_ID_BYTES = 128  # CW_COMM_ID_BYTES


class CommId(ctypes.Structure):
    _c_name_ = "cw_comm_id"
    _fields_ = [("bytes", ctypes.c_uint8 * COMM_ID_BYTES)]


class CommBootstrapSettings(ctypes.Structure):
    _c_name_ = "cw_comm_bootstrap_settings"
    _fields_ = [
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("file", ctypes.c_char_p),
        ("addr", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_uint32),
        ("token", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 48),
    ]


# ---- callbacks (C function pointer types) ------------------------------------

# void (*cw_log_fn)(void *user, cw_log_level level, const char *message)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
# void (*cw_future_fn)(void *user, cw_future *future, cw_status status)
FUTURE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
# cw_status (*cw_resident_capture_fn)(cw_stream *s, void *user)
CAPTURE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
# cw_operator_ops: start(op, user), compute(io, user), stop(op, user), destroy(user)
START_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
COMPUTE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
STOP_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
DESTROY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# ---- operators and pipelines (flow.h) -----------------------------------------

class PortSettings(ctypes.Structure):
    _c_name_ = "cw_port_settings"
    _fields_ = [
        ("flags", ctypes.c_uint),
        ("bytes", ctypes.c_size_t),
        ("dptr", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 40),
    ]


class PortRead(ctypes.Structure):
    _c_name_ = "cw_port_read"
    _fields_ = [
        ("port", ctypes.c_char_p),
        ("read", ctypes.c_int),
        ("radius", ctypes.c_uint32),
        ("scale_num", ctypes.c_uint32),
        ("scale_den", ctypes.c_uint32),
        ("previous", ctypes.c_int),
        ("function", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 16),
    ]


class OperatorStage(ctypes.Structure):
    _c_name_ = "cw_operator_stage"
    _fields_ = [
        ("function", ctypes.c_char_p),
        ("user", ctypes.c_uint64),
        ("tiles", ctypes.c_uint32),
        ("size", ctypes.c_uint32 * 2),
        ("tile", ctypes.c_uint32 * 2),
        ("threads", ctypes.c_uint32),
        ("shared_bytes", ctypes.c_uint32),
        ("read_count", ctypes.c_uint32),
        ("reads", ctypes.POINTER(PortRead)),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class OperatorOps(ctypes.Structure):
    _c_name_ = "cw_operator_ops"
    _fields_ = [
        ("start", START_FN),
        ("compute", COMPUTE_FN),
        ("stop", STOP_FN),
        ("destroy", DESTROY_FN),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class OperatorSettings(ctypes.Structure):
    _c_name_ = "cw_operator_settings"
    _fields_ = [
        ("pool", ctypes.c_void_p),
        ("no_internal_stream", ctypes.c_int),
        ("wait_inputs", ctypes.c_int),
        ("resident", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PipelineSettings(ctypes.Structure):
    _c_name_ = "cw_pipeline_settings"
    _fields_ = [
        ("pool", ctypes.c_void_p),
        ("threads", ctypes.c_uint),
        ("max_in_flight", ctypes.c_uint),
        ("reserved", ctypes.c_uint8 * 48),
    ]


class PipelineInfo(ctypes.Structure):
    _c_name_ = "cw_pipeline_info"
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("iterations", ctypes.c_uint64),
        ("computes", ctypes.c_uint64),
        ("skipped", ctypes.c_uint64),
        ("fallbacks", ctypes.c_uint64),
        ("operators", ctypes.c_size_t),
        ("connections", ctypes.c_size_t),
        ("buffers_allocated", ctypes.c_uint64),
        ("buffers_reused", ctypes.c_uint64),
        ("peer_copies", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 48),
    ]


class Message(ctypes.Structure):
    _c_name_ = "cw_message"
    _fields_ = [("value", ctypes.c_void_p), ("buffer", ctypes.c_void_p), ("stream", ctypes.c_void_p)]


class IoInfo(ctypes.Structure):
    _c_name_ = "cw_io_info"
    _fields_ = [
        ("op", ctypes.c_void_p),
        ("iteration", ctypes.c_uint64),
        ("name", ctypes.c_char_p),
        ("resident_ctl", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 32),
    ]


class SharedHandle(ctypes.Structure):
    _c_name_ = "cw_shared_handle"
    _fields_ = [("bytes", ctypes.c_uint8 * 128)]


class SharedEventInfo(ctypes.Structure):
    _c_name_ = "cw_shared_event_info"
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("imported", ctypes.c_int),
        ("importers", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 16),
    ]


class TraceSettings(ctypes.Structure):
    _c_name_ = "cw_trace_settings"
    _fields_ = [("max_spans", ctypes.c_uint32), ("gpu_timing", ctypes.c_uint32), ("reserved", ctypes.c_uint8 * 56)]


class TraceInfo(ctypes.Structure):
    _c_name_ = "cw_trace_info"
    _fields_ = [
        ("spans", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("calibration_error_ns", ctypes.c_int64),
        ("tracks", ctypes.c_uint32),
        ("contexts", ctypes.c_uint32),
        ("gpu_timing", ctypes.c_uint32),
        ("cupti_result", ctypes.c_int32),
        ("gpu_records", ctypes.c_uint64),
        ("reserved", ctypes.c_uint8 * 16),
    ]


# Public structs of include/cuweave/*.h that have no Structure here, and why
# (tests/test_abi.py fails on a public struct neither bound nor listed).
STRUCTS_UNBOUND: Dict[str, str] = {
    "cw_resident_ctl": "device-side: resident_device.h's control block, read by kernels compiled with NVRTC "
                       "(pass its address, Resident.ctl, to them); the host never reads or writes its fields",
    "cw_res_dev": "device-side: resident_device.h's whole device block, the library's own layout that "
                  "cw_resident_begin and cw_resident_end read in kernels; the host never touches it",
    "cw_res_host": "device-side: resident_device.h's host block (the doorbell and the results), the library's own "
                   "layout; the host reads it through Resident.poll_result and friends",
    "cw_fused_tile": "device-side: resident_device.h's tile descriptor, given to a dataflow stage's device function "
                     "in shared memory; the host never reads or writes it",
}


def _check(result: int, func: Any, args: Any) -> int:
    if result != 0:
        raise error(result)
    return result


def error(code: int) -> _errors.CuweaveError:
    """The exception of a failed call's status, with the calling thread's
    detail (and, for CompileError, NVRTC's log of this thread's last
    compile)."""
    detail = last_error()
    log = None
    if code == _errors.CompileError.status:
        raw = lib.cw_jit_get_compile_log()
        log = raw.decode("utf-8", "replace") if raw else ""
        detail["message"] = str(detail.get("message", "")).replace(
            "(the whole log: cw_jit_get_compile_log())", "(the whole log: CompileError.log)")
    return _errors.from_status(code, detail, log)


_vp = ctypes.c_void_p
_int = ctypes.c_int
_uint = ctypes.c_uint
_size = ctypes.c_size_t
_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_i64 = ctypes.c_int64
_str = ctypes.c_char_p
_P = ctypes.POINTER

# (name, restype, argtypes, checked): checked calls raise on a non-zero status.
_SIGNATURES: List[Tuple[str, Any, List[Any], bool]] = [
    # common.h, device.h
    ("cw_get_versions", _int, [_P(Versions)], True),
    ("cw_status_name", _str, [_int], False),
    ("cw_status_string", _str, [_int], False),
    ("cw_last_error", _P(ErrorInfo), [], False),
    ("cw_clear_error", None, [], False),
    ("cw_log_set_callback", _int, [LOG_FN, _vp, _int], True),
    ("cw_init", _int, [], True),
    ("cw_driver_has", _int, [_int], False),
    ("cw_device_count", _int, [c_int_p], True),
    ("cw_device_get_info", _int, [_int, _P(DeviceInfo)], True),
    # context.h
    ("cw_context_create", _int, [c_void_pp, _int], True),
    ("cw_context_wrap", _int, [c_void_pp, _vp], True),
    ("cw_context_destroy", None, [c_void_pp], False),
    ("cw_context_get_info", _int, [_vp, _P(ContextInfo)], True),
    ("cw_context_synchronize", _int, [_vp], True),
    # stream.h
    ("cw_stream_settings_default", None, [_P(StreamSettings)], False),
    ("cw_stream_create", _int, [c_void_pp, _vp, _P(StreamSettings)], True),
    ("cw_stream_wrap", _int, [c_void_pp, _vp, _vp], True),
    ("cw_stream_destroy", None, [c_void_pp], False),
    ("cw_stream_get_info", _int, [_vp, _P(StreamInfo)], True),
    ("cw_stream_synchronize", _int, [_vp], True),
    ("cw_stream_query", _int, [_vp], False),  # NOT_READY: Stream.done
    ("cw_stream_wait", _int, [_vp, _vp], True),
    ("cw_stream_fork", _int, [c_void_pp, _vp], True),
    ("cw_stream_join", _int, [_vp, c_void_pp], True),
    ("cw_stream_pool_settings_default", None, [_P(PoolSettings)], False),
    ("cw_stream_pool_create", _int, [c_void_pp, _vp, _P(PoolSettings)], True),
    ("cw_stream_pool_destroy", None, [c_void_pp], False),
    ("cw_stream_pool_acquire", _int, [c_void_pp, _vp, _i64], True),
    ("cw_stream_pool_release", _int, [_vp, c_void_pp], True),
    ("cw_stream_pool_get_next", _int, [_vp, c_void_pp], True),
    ("cw_stream_pool_acquire_named", _int, [c_void_pp, _vp, _vp, _str], True),
    ("cw_stream_pool_release_owner", _int, [_vp, _vp, c_size_t_p], True),
    ("cw_stream_pool_get_info", _int, [_vp, _P(PoolInfo)], True),
    ("cw_timer_create", _int, [c_void_pp, _vp], True),
    ("cw_timer_destroy", None, [c_void_pp], False),
    ("cw_timer_start", _int, [_vp, _vp], True),
    ("cw_timer_stop", _int, [_vp, _vp], True),
    ("cw_timer_get_elapsed_ms", _int, [_vp, _P(ctypes.c_float)], True),
    # future.h
    ("cw_future_create", _int, [c_void_pp, _vp, _int], True),
    ("cw_future_rearm", _int, [_vp, _vp], True),
    ("cw_future_poll", _int, [_vp], False),  # NOT_READY: Future.poll
    ("cw_future_wait", _int, [_vp, _i64], True),
    ("cw_future_set_spin", _int, [_vp, _uint], True),
    ("cw_future_set_callback", _int, [_vp, FUTURE_FN, _vp], True),
    ("cw_future_get_fd", _int, [_vp, c_int_p], True),
    ("cw_future_destroy", None, [c_void_pp], False),
    ("cw_future_when_all", _int, [c_void_pp, c_void_pp, _size, _int], True),
    # partition.h
    ("cw_partition_get_caps", _int, [_int, _P(PartitionCaps)], True),
    ("cw_partition_group_create", _int, [c_void_pp, _int, c_uint_p, _size, _int], True),
    ("cw_partition_group_destroy", None, [c_void_pp], False),
    ("cw_partition_group_get_info", _int, [_vp, _P(PartitionGroupInfo)], True),
    ("cw_partition_group_get_partition", _int, [_vp, _size, _P(PartitionInfo)], True),
    # graph.h
    ("cw_capture_begin", _int, [_vp, _vp, _int], True),
    ("cw_capture_end", _int, [c_void_pp, _vp], True),
    ("cw_capture_get_state", _int, [_vp, c_int_p], True),
    ("cw_graph_create", _int, [c_void_pp, _vp], True),
    ("cw_graph_destroy", None, [c_void_pp], False),
    ("cw_graph_get_info", _int, [_vp, _P(GraphInfo)], True),
    ("cw_graph_add_child", _int, [_vp, _vp, c_void_pp, _size, c_void_pp], True),
    ("cw_graph_add_empty", _int, [_vp, c_void_pp, _size, c_void_pp], True),
    ("cw_graph_add_cond_handle", _int, [_vp, _uint, _uint, c_uint64_p], True),
    ("cw_cond_settings_default", None, [_P(CondSettings)], False),
    ("cw_graph_add_conditional", _int,
     [_vp, _u64, _P(CondSettings), c_void_pp, _size, c_void_pp, c_void_pp, c_void_pp], True),
    ("cw_graph_get_sinks", _int, [_vp, c_void_pp, _size, c_size_t_p], True),
    ("cw_graph_write_dot", _int, [_vp, _str, _int], True),
    ("cw_graph_instantiate", _int, [c_void_pp, _vp, _uint], True),
    ("cw_graph_exec_destroy", None, [c_void_pp], False),
    ("cw_graph_exec_upload", _int, [_vp, _vp], True),
    ("cw_graph_exec_launch", _int, [_vp, _vp], True),
    ("cw_graph_exec_update", _int, [_vp, _vp, _P(GraphUpdateInfo)], True),
    ("cw_graph_exec_get_info", _int, [_vp, _P(GraphExecInfo)], True),
    # jit.h
    ("cw_program_settings_default", None, [_P(ProgramSettings)], False),
    ("cw_program_compile", _int, [c_void_pp, _vp, _str, _P(ProgramSettings)], True),
    ("cw_jit_get_compile_log", _str, [], False),
    ("cw_program_destroy", None, [c_void_pp], False),
    ("cw_program_get_info", _int, [_vp, _P(ProgramInfo)], True),
    ("cw_program_get_lowered_name", _int, [_vp, _str, c_char_pp], True),
    ("cw_jit_cache_settings_default", None, [_P(JitCacheSettings)], False),
    ("cw_jit_cache_configure", _int, [_P(JitCacheSettings)], True),
    ("cw_jit_get_stats", _int, [_P(JitStats)], True),
    ("cw_jit_cache_clear_memory", None, [], False),
    ("cw_jit_cache_get_info", _int, [_P(JitCacheInfo)], True),
    ("cw_jit_cache_clear_disk", _int, [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_module_load", _int, [c_void_pp, _vp], True),
    ("cw_module_load_image", _int, [c_void_pp, _vp], True),
    ("cw_module_destroy", None, [c_void_pp], False),
    ("cw_module_get_kernel", _int, [_vp, _str, c_void_pp], True),
    ("cw_kernel_get_params", _int, [_vp, _vp, c_size_t_p, _size, c_size_t_p], True),
    ("cw_launch_config_default", None, [_P(LaunchConfig)], False),
    ("cw_kernel_launch", _int, [_vp, _vp, _P(LaunchConfig), c_void_pp], True),
    ("cw_kernel_get_handle", _int, [_vp, c_void_pp], True),
    ("cw_kernel_preload", _int, [_vp, _vp], True),
    ("cw_builtin_get_kernel", _int, [_int, c_void_pp], True),
    # resident.h
    ("cw_resident_settings_default", None, [_P(ResidentSettings)], False),
    ("cw_resident_create", _int, [c_void_pp, _vp, _P(ResidentSettings)], True),
    ("cw_resident_destroy", None, [c_void_pp], False),
    ("cw_resident_configure", _int, [_vp, _P(ResidentSettings)], True),
    ("cw_resident_get_settings", _int, [_vp, _P(ResidentSettings)], True),
    ("cw_resident_get_ctl", _int, [_vp, c_uint64_p], True),
    ("cw_resident_get_input", _int, [_vp, _u32, c_uint64_p], True),
    ("cw_resident_set_workload", _int, [_vp, _vp], True),
    ("cw_resident_set_workload_fn", _int, [_vp, CAPTURE_FN, _vp], True),
    ("cw_resident_set_handler_fn", _int, [_vp, CAPTURE_FN, _vp], True),
    ("cw_resident_set_handler", _int, [_vp, _vp], True),
    ("cw_resident_stage_begin", _int, [_vp, _vp, _str, c_uint32_p], True),
    ("cw_resident_stage_end", _int, [_vp, _vp, _u32], True),
    ("cw_resident_build", _int, [_vp], True),
    ("cw_resident_launch", _int, [_vp], True),
    ("cw_resident_data_ready", _int, [_vp, c_uint64_p], True),
    ("cw_resident_poll_result", _int, [_vp, _u64], False),  # NOT_READY: Resident.result_ready
    ("cw_resident_wait_result", _int, [_vp, _u64, _u32], True),
    ("cw_resident_next_input", _int, [_vp, _u32, c_uint64_p], True),
    ("cw_resident_tear_down", _int, [_vp, _u32], True),
    ("cw_resident_get_state", _int, [_vp, c_int_p], True),
    ("cw_resident_get_info", _int, [_vp, _P(ResidentInfo)], True),
    ("cw_resident_set_fused", _int, [_vp, _P(ResidentFused)], True),
    ("cw_builtin_get_resident_header", _str, [], False),
    # buffer.h
    ("cw_buffer_create", _int, [c_void_pp, _vp, _size], True),
    ("cw_buffer_retain", _int, [_vp], True),
    ("cw_buffer_destroy", None, [c_void_pp], False),
    ("cw_buffer_use", _int, [_vp, _vp], True),
    ("cw_buffer_get_writable", _int, [_vp, c_uint64_p], True),
    ("cw_buffer_get_info", _int, [_vp, _P(BufferInfo)], True),
    ("cw_copy_to_device", _int, [_vp, _u64, _vp, _size], True),
    ("cw_copy_to_host", _int, [_vp, _vp, _u64, _size], True),
    ("cw_host_alloc", _int, [c_void_pp, _vp, _size], True),
    ("cw_host_free", None, [_vp, c_void_pp], False),
    # share.h
    ("cw_buffer_create_shareable", _int, [c_void_pp, _vp, _size], True),
    ("cw_buffer_export", _int, [_vp, _P(SharedHandle)], True),
    ("cw_buffer_import", _int, [c_void_pp, _vp, _P(SharedHandle)], True),
    ("cw_shared_event_create", _int, [c_void_pp, _vp], True),
    ("cw_shared_event_destroy", None, [c_void_pp], False),
    ("cw_shared_event_export", _int, [_vp, _P(SharedHandle)], True),
    ("cw_shared_event_import", _int, [c_void_pp, _vp, _P(SharedHandle)], True),
    ("cw_shared_event_record", _int, [_vp, _vp], True),
    ("cw_shared_event_wait", _int, [_vp, _vp], True),
    ("cw_shared_event_get_info", _int, [_vp, _P(SharedEventInfo)], True),
    # multi.h
    ("cw_device_group_create", _int, [c_void_pp, c_int_p, _int], True),
    ("cw_device_group_destroy", None, [c_void_pp], False),
    ("cw_device_group_get_info", _int, [_vp, _P(DeviceGroupInfo)], True),
    ("cw_device_get_peer_info", _int, [_int, _int, _P(PeerInfo)], True),
    ("cw_context_enable_peer", _int, [_vp, _vp], True),
    ("cw_copy_peer", _int, [_vp, _u64, _vp, _u64, _vp, _size], True),
    ("cw_buffer_copy", _int, [_vp, _vp, _vp], True),
    ("cw_context_share_buffer_pool", _int, [_vp, _vp], True),
    # collective.h
    ("cw_comm_create", _int, [c_void_pp, c_void_pp, _int], True),
    ("cw_comm_destroy", None, [c_void_pp], False),
    ("cw_comm_id_generate", _int, [_P(CommId)], True),
    ("cw_comm_create_rank", _int, [c_void_pp, _vp, _P(CommId), _int, _int, _u32], True),
    ("cw_comm_bootstrap_settings_default", None, [_P(CommBootstrapSettings)], False),
    ("cw_comm_bootstrap", _int, [c_void_pp, _vp, _P(CommBootstrapSettings)], True),
    ("cw_comm_get_info", _int, [_vp, _P(CommInfo)], True),
    ("cw_comm_all_reduce", _int, [_vp, c_uint64_p, c_uint64_p, _size, _int, _int, c_void_pp], True),
    ("cw_comm_broadcast", _int, [_vp, c_uint64_p, c_uint64_p, _size, _int, _int, c_void_pp], True),
    ("cw_comm_all_reduce_rank", _int, [_vp, _int, _u64, _u64, _size, _int, _int, _vp], True),
    ("cw_comm_broadcast_rank", _int, [_vp, _int, _u64, _u64, _size, _int, _int, _vp], True),
    ("cw_comm_group_begin", _int, [], True),
    ("cw_comm_group_end", _int, [], True),
    # flow.h
    ("cw_port_settings_default", None, [_P(PortSettings)], False),
    ("cw_operator_settings_default", None, [_P(OperatorSettings)], False),
    ("cw_operator_create", _int, [c_void_pp, _str, _P(OperatorOps), _vp, _P(OperatorSettings)], True),
    ("cw_operator_create_stage", _int, [c_void_pp, _str, _P(OperatorStage)], True),
    ("cw_operator_destroy", None, [c_void_pp], False),
    ("cw_operator_add_input", _int, [_vp, _str, _P(PortSettings)], True),
    ("cw_operator_add_output", _int, [_vp, _str, _P(PortSettings)], True),
    ("cw_pipeline_settings_default", None, [_P(PipelineSettings)], False),
    ("cw_pipeline_create", _int, [c_void_pp, _vp, _P(PipelineSettings)], True),
    ("cw_pipeline_destroy", None, [c_void_pp], False),
    ("cw_pipeline_add", _int, [_vp, _vp], True),
    ("cw_pipeline_connect", _int, [_vp, _str, _str, _str, _str], True),
    ("cw_pipeline_check", _int, [_vp], True),
    ("cw_pipeline_run", _int, [_vp, _u64], True),
    ("cw_pipeline_synchronize", _int, [_vp], True),
    ("cw_pipeline_stop", _int, [_vp], True),
    ("cw_pipeline_get_info", _int, [_vp, _P(PipelineInfo)], True),
    ("cw_pipeline_get_operator", _int, [_vp, _str, c_void_pp], True),
    ("cw_pipeline_make_resident", _int, [_vp, _vp], True),
    ("cw_pipeline_make_fused", _int, [_vp, _vp, _P(ResidentFused)], True),
    ("cw_pipeline_get_port_ptr", _int, [_vp, _str, _str, c_uint64_p], True),
    ("cw_io_receive", _int, [_vp, _str, _P(Message)], False),  # NOT_READY: IO.receive gives None
    ("cw_io_receive_many", _int, [_vp, _str, _P(Message), _size, c_size_t_p], True),
    ("cw_io_receive_stream", _int, [_vp, _str, c_void_pp], True),
    ("cw_io_get_stream", _int, [_vp, _str, c_void_pp], True),
    ("cw_io_set_output_stream", _int, [_vp, _str, _vp], True),
    ("cw_io_emit", _int, [_vp, _str, _vp, _vp], True),
    ("cw_io_alloc", _int, [c_void_pp, _vp, _size], True),
    ("cw_io_get_port_ptr", _int, [_vp, _str, c_uint64_p], True),
    ("cw_io_get_info", _int, [_vp, _P(IoInfo)], True),
    ("cw_trace_settings_default", None, [_P(TraceSettings)], False),
    ("cw_trace_create", _int, [c_void_pp, _P(TraceSettings)], True),
    ("cw_trace_destroy", None, [c_void_pp], False),
    ("cw_trace_name_stream", _int, [_vp, _vp, _str], True),
    ("cw_trace_name_thread", _int, [_vp, _str], True),
    ("cw_trace_begin", _int, [_vp, _vp, _str], True),
    ("cw_trace_end", _int, [_vp, _vp], True),
    ("cw_trace_host_begin", _int, [_vp, _str], True),
    ("cw_trace_host_end", _int, [_vp], True),
    ("cw_pipeline_set_trace", _int, [_vp, _vp], True),
    ("cw_trace_record_resident", _int, [_vp, _vp], True),
    ("cw_trace_get_info", _int, [_vp, _P(TraceInfo)], True),
    ("cw_trace_write", _int, [_vp, _str], True),
    ("cw_version", ctypes.c_uint, [], False),
]

# Exported functions these bindings deliberately leave unbound, and why
# (tests/test_abi.py: every CW_API function is in _SIGNATURES or here, and
# every name here is still exported).
UNBOUND: Dict[str, str] = {
    "cw_buffer_get_ptr": "Buffer.ptr reads cw_buffer_get_info's dptr (one call for the address, size and "
                         "device; no driver call either way)",
}

lib, where, path = _load([s[0] for s in _SIGNATURES])

for _name, _restype, _argtypes, _checked in _SIGNATURES:
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
    if _checked:
        _fn.errcheck = _check


def bound() -> Dict[str, Tuple[Any, List[Any]]]:
    """{name: (restype, argtypes)} of every C function bound."""
    return {name: (restype, argtypes) for name, restype, argtypes, _ in _SIGNATURES}


def last_error() -> Dict[str, Any]:
    """The calling thread's error detail as a dict (strings decoded)."""
    info = lib.cw_last_error().contents

    def dec(b: Optional[bytes]) -> str:
        return b.decode("utf-8", "replace") if b else ""

    return {
        "status": info.status,
        "cu_result": info.cu_result,
        "cu_name": dec(info.cu_name),
        "cu_string": dec(info.cu_string),
        "driver_call": dec(info.driver_call),
        "function": dec(info.function),
        "message": dec(info.message),
    }

