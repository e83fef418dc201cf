"""Loads libcuweave and declares every C signature the bindings use, as data,
in one place. Errors become exceptions through one errcheck."""

import ctypes
import ctypes.util
import os

from . import _errors

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))


def _candidates():
    env = os.environ.get("CUWEAVE_LIBRARY")
    if env:
        yield env
        return
    # A build in the source tree (make or meson), then the system.
    for rel in ("build/make/libcuweave.so.1", "build/meson/src/libcuweave.so.1", "build-make/libcuweave.so.1"):
        yield os.path.join(_ROOT, rel)
    found = ctypes.util.find_library("cuweave")
    if found:
        yield found
    yield "libcuweave.so.1"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            errors.append("%s: %s" % (path, exc))
    raise ImportError("libcuweave could not be loaded (set CUWEAVE_LIBRARY): " + "; ".join(errors))


lib = _load()

c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_int_p = ctypes.POINTER(ctypes.c_int)
c_uint_p = ctypes.POINTER(ctypes.c_uint)


class ErrorInfo(ctypes.Structure):
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
    _fields_ = [
        ("cuweave", ctypes.c_uint),
        ("api", ctypes.c_uint),
        ("driver", ctypes.c_int),
        ("nvrtc_major", ctypes.c_int),
        ("nvrtc_minor", ctypes.c_int),
        ("nccl", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 40),
    ]


class ContextInfo(ctypes.Structure):
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
    _fields_ = [("flags", ctypes.c_uint), ("priority", ctypes.c_int), ("reserved", ctypes.c_uint8 * 56)]


class PoolSettings(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("priority", ctypes.c_int),
        ("reserved_streams", ctypes.c_uint),
        ("max_streams", ctypes.c_uint),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class StreamInfo(ctypes.Structure):
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
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("created", ctypes.c_size_t),
        ("leased", ctypes.c_size_t),
        ("idle", ctypes.c_size_t),
        ("named", ctypes.c_size_t),
        ("mode", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 28),
    ]


class Header(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("source", ctypes.c_char_p)]


class ProgramSettings(ctypes.Structure):
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


class LaunchConfig(ctypes.Structure):
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
        ("reserved", ctypes.c_uint8 * 44),
    ]


class BufferInfo(ctypes.Structure):
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
    _fields_ = [
        ("supported", ctypes.c_int),
        ("sm_count", ctypes.c_uint),
        ("min_partition", ctypes.c_uint),
        ("granularity", ctypes.c_uint),
        ("workqueues", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PartitionGroupInfo(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_size_t),
        ("default_index", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PartitionInfo(ctypes.Structure):
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("sm_count", ctypes.c_uint),
        ("leftover", ctypes.c_int),
        ("is_default", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 44),
    ]


class PeerInfo(ctypes.Structure):
    _fields_ = [
        ("can_access", ctypes.c_int),
        ("perf_rank", ctypes.c_int),
        ("native_atomics", ctypes.c_int),
        ("reserved", ctypes.c_uint8 * 20),
    ]


MAX_DEVICES = 64  # CW_MAX_DEVICES


class DeviceGroupInfo(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_int),
        ("devices", ctypes.c_int * MAX_DEVICES),
        ("contexts", ctypes.c_void_p * MAX_DEVICES),
        ("reserved", ctypes.c_uint8 * 64),
    ]


class CommInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_int),
        ("contexts", ctypes.c_void_p * MAX_DEVICES),
        ("reserved", ctypes.c_uint8 * 64),
    ]


def _check(result, func, args):
    if result != 0:
        raise _errors.from_status(result, last_error())
    return result


# (name, restype, argtypes, checked): checked calls raise on a non-zero status.
_SIGNATURES = [
    ("cw_version", ctypes.c_uint, [], False),
    ("cw_get_versions", ctypes.c_int, [ctypes.POINTER(Versions)], True),
    ("cw_status_name", ctypes.c_char_p, [ctypes.c_int], False),
    ("cw_status_string", ctypes.c_char_p, [ctypes.c_int], False),
    ("cw_last_error", ctypes.POINTER(ErrorInfo), [], False),
    ("cw_clear_error", None, [], False),
    ("cw_init", ctypes.c_int, [], True),
    ("cw_driver_has", ctypes.c_int, [ctypes.c_int], False),
    ("cw_device_count", ctypes.c_int, [c_int_p], True),
    ("cw_context_create", ctypes.c_int, [c_void_pp, ctypes.c_int], True),
    ("cw_context_wrap", ctypes.c_int, [c_void_pp, ctypes.c_void_p], True),
    ("cw_context_destroy", None, [c_void_pp], False),
    ("cw_context_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ContextInfo)], True),
    ("cw_context_synchronize", ctypes.c_int, [ctypes.c_void_p], True),
    ("cw_stream_settings_default", None, [ctypes.POINTER(StreamSettings)], False),
    ("cw_stream_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.POINTER(StreamSettings)], True),
    ("cw_stream_wrap", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_stream_destroy", None, [c_void_pp], False),
    ("cw_stream_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(StreamInfo)], True),
    ("cw_stream_synchronize", ctypes.c_int, [ctypes.c_void_p], True),
    ("cw_stream_query", ctypes.c_int, [ctypes.c_void_p], False),
    ("cw_stream_wait", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_stream_pool_settings_default", None, [ctypes.POINTER(PoolSettings)], False),
    ("cw_stream_pool_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.POINTER(PoolSettings)], True),
    ("cw_stream_pool_destroy", None, [c_void_pp], False),
    ("cw_stream_pool_acquire", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.c_int64], True),
    ("cw_stream_pool_release", ctypes.c_int, [ctypes.c_void_p, c_void_pp], True),
    ("cw_stream_pool_get_next", ctypes.c_int, [ctypes.c_void_p, c_void_pp], True),
    ("cw_stream_pool_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(PoolInfo)], True),
    ("cw_future_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.c_int], True),
    ("cw_future_rearm", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_future_poll", ctypes.c_int, [ctypes.c_void_p], False),
    ("cw_future_wait", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64], True),
    ("cw_future_get_fd", ctypes.c_int, [ctypes.c_void_p, c_int_p], True),
    ("cw_future_destroy", None, [c_void_pp], False),
    ("cw_timer_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p], True),
    ("cw_timer_destroy", None, [c_void_pp], False),
    ("cw_timer_start", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_timer_stop", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_timer_get_elapsed_ms", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)], True),
    # green partitions
    ("cw_partition_get_caps", ctypes.c_int, [ctypes.c_int, ctypes.POINTER(PartitionCaps)], True),
    ("cw_partition_group_create", ctypes.c_int,
     [c_void_pp, ctypes.c_int, ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.c_int], True),
    ("cw_partition_group_destroy", None, [c_void_pp], False),
    ("cw_partition_group_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(PartitionGroupInfo)], True),
    ("cw_partition_group_get_partition", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(PartitionInfo)], True),
    # graphs
    ("cw_capture_begin", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int], True),
    ("cw_capture_end", ctypes.c_int, [c_void_pp, ctypes.c_void_p], True),
    ("cw_graph_destroy", None, [c_void_pp], False),
    ("cw_graph_instantiate", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.c_uint], True),
    ("cw_graph_exec_upload", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_graph_exec_launch", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_graph_exec_destroy", None, [c_void_pp], False),
    # NVRTC programs, modules, kernels
    ("cw_program_settings_default", None, [ctypes.POINTER(ProgramSettings)], False),
    ("cw_program_compile", ctypes.c_int,
     [c_void_pp, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ProgramSettings)], True),
    ("cw_program_destroy", None, [c_void_pp], False),
    ("cw_jit_get_compile_log", ctypes.c_char_p, [], False),
    ("cw_module_load", ctypes.c_int, [c_void_pp, ctypes.c_void_p], True),
    ("cw_module_destroy", None, [c_void_pp], False),
    ("cw_module_get_kernel", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, c_void_pp], True),
    ("cw_kernel_get_params", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
      ctypes.POINTER(ctypes.c_size_t)], True),
    ("cw_kernel_preload", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_launch_config_default", None, [ctypes.POINTER(LaunchConfig)], False),
    ("cw_kernel_launch", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(LaunchConfig), ctypes.POINTER(ctypes.c_void_p)], True),
    # the GPU-resident loop
    ("cw_resident_settings_default", None, [ctypes.POINTER(ResidentSettings)], False),
    ("cw_resident_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.POINTER(ResidentSettings)], True),
    ("cw_resident_destroy", None, [c_void_pp], False),
    ("cw_resident_get_ctl", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_resident_get_input", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_resident_set_workload", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_resident_build", ctypes.c_int, [ctypes.c_void_p], True),
    ("cw_resident_launch", ctypes.c_int, [ctypes.c_void_p], True),
    ("cw_resident_get_state", ctypes.c_int, [ctypes.c_void_p, c_int_p], True),
    ("cw_resident_data_ready", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_resident_poll_result", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64], False),  # NOT_READY: Resident.result_ready
    ("cw_resident_wait_result", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32], True),
    ("cw_resident_next_input", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_resident_tear_down", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32], True),
    ("cw_resident_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ResidentInfo)], True),
    ("cw_resident_get_settings", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ResidentSettings)], True),
    ("cw_builtin_get_resident_header", ctypes.c_char_p, [], False),
    # buffers and copies
    ("cw_buffer_create", ctypes.c_int, [c_void_pp, ctypes.c_void_p, ctypes.c_size_t], True),
    ("cw_buffer_retain", ctypes.c_int, [ctypes.c_void_p], True),
    ("cw_buffer_destroy", None, [c_void_pp], False),
    ("cw_buffer_use", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_buffer_get_ptr", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_buffer_get_writable", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)], True),
    ("cw_buffer_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(BufferInfo)], True),
    ("cw_copy_to_device", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t], True),
    ("cw_copy_to_host", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t], True),
    # several devices (multi.h)
    ("cw_device_group_create", ctypes.c_int, [c_void_pp, c_int_p, ctypes.c_int], True),
    ("cw_device_group_destroy", None, [c_void_pp], False),
    ("cw_device_group_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(DeviceGroupInfo)], True),
    ("cw_device_get_peer_info", ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.POINTER(PeerInfo)], True),
    ("cw_context_enable_peer", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_copy_peer", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t],
     True),
    ("cw_buffer_copy", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p], True),
    ("cw_context_share_buffer_pool", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p], True),
    # collectives through NCCL (collective.h)
    ("cw_comm_create", ctypes.c_int, [c_void_pp, c_void_pp, ctypes.c_int], True),
    ("cw_comm_destroy", None, [c_void_pp], False),
    ("cw_comm_get_info", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(CommInfo)], True),
    ("cw_comm_all_reduce", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
      ctypes.c_int, ctypes.c_int, c_void_pp], True),
    ("cw_comm_broadcast", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
      ctypes.c_int, ctypes.c_int, c_void_pp], True),
]

for _name, _restype, _argtypes, _checked in _SIGNATURES:
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
    if _checked:
        _fn.errcheck = _check


def last_error():
    """The calling thread's error detail as a dict (strings decoded)."""
    info = lib.cw_last_error().contents
    dec = lambda b: b.decode("utf-8", "replace") if b else ""
    return {
        "status": info.status,
        "cu_result": info.cu_result,
        "cu_name": dec(info.cu_name),
        "driver_call": dec(info.driver_call),
        "function": dec(info.function),
        "message": dec(info.message),
    }


_errors.build(lambda code: lib.cw_status_name(code).decode(), lambda code: lib.cw_status_string(code).decode())
