# SPDX-License-Identifier: BSD-2-Clause
"""Timelines (cuweave/trace.h, docs/tracing.md)."""

from __future__ import annotations

import ctypes
import enum
from typing import TYPE_CHECKING, Any, Callable, Dict

from . import _check, _lib
from ._core import Stream, _Handle, _new, handle_of
from ._lib import lib

if TYPE_CHECKING:
    from ._resident import Resident


class GpuTiming(enum.IntEnum):
    """cw_trace_gpu_timing: how a traced pipeline's compute calls are timed on the GPU."""

    AUTO = 0    #: CUPTI when it can be had, else timing events
    EVENTS = 1  #: two timing events per call on its stream
    CUPTI = 2   #: CUPTI's kernel, copy and memset records


class Span:
    """What Trace.span and Trace.host_span return: a context manager around a span."""

    def __init__(self, enter: Callable[[], None], leave: Callable[[], None]) -> None:
        self._enter, self._leave = enter, leave

    def __enter__(self) -> "Span":
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._leave()

    def __repr__(self) -> str:
        return "<cuweave.Span>"


class Trace(_Handle):
    """A timeline (cuweave/trace.h, docs/tracing.md): GPU spans on streams
    (begin/end, or ``with trace.span(stream, name):``), host spans on the
    calling thread (host_begin/host_end, or ``with trace.host_span(name):``),
    a Pipeline's operators (Pipeline.set_trace), a Resident loop's stages
    (record_resident). write(path) exports Chrome trace-event JSON, which
    ui.perfetto.dev opens and tools/trace_plot.py renders. max_spans 0: the
    library's default bound; gpu_timing: a GpuTiming (or its name), AUTO by
    default."""

    _destroy = lib.cw_trace_destroy

    def __init__(self, max_spans: int = 0, gpu_timing: Any = GpuTiming.AUTO) -> None:
        s = _lib.TraceSettings()
        lib.cw_trace_settings_default(ctypes.byref(s))
        s.max_spans = _check.uint32(max_spans, "max_spans")
        s.gpu_timing = int(_check.member(gpu_timing, GpuTiming, "gpu_timing"))
        super().__init__(_new(lib.cw_trace_create, ctypes.byref(s)))

    def name_stream(self, stream: Stream, name: str) -> None:
        """Names the track of `stream`'s GPU spans."""
        lib.cw_trace_name_stream(self.handle, handle_of(stream, Stream, "stream"), _check.text(name, "name"))

    def name_thread(self, name: str) -> None:
        """Names the calling thread's track of host spans."""
        lib.cw_trace_name_thread(self.handle, _check.text(name, "name"))

    def begin(self, stream: Stream, name: str) -> None:
        """Begins a GPU span named `name` at this point of `stream`."""
        lib.cw_trace_begin(self.handle, handle_of(stream, Stream, "stream"), _check.text(name, "name"))

    def end(self, stream: Stream) -> None:
        """Ends `stream`'s innermost open GPU span."""
        lib.cw_trace_end(self.handle, handle_of(stream, Stream, "stream"))

    def host_begin(self, name: str) -> None:
        """Begins a host span on this thread."""
        lib.cw_trace_host_begin(self.handle, _check.text(name, "name"))

    def host_end(self) -> None:
        """Ends this thread's innermost open host span."""
        lib.cw_trace_host_end(self.handle)

    def span(self, stream: Stream, name: str) -> Span:
        """A GPU span on stream around the with block's work."""
        handle_of(stream, Stream, "stream")
        _check.text(name, "name")
        return Span(lambda: self.begin(stream, name), lambda: self.end(stream))

    def host_span(self, name: str) -> Span:
        """A host span on this thread around the with block."""
        _check.text(name, "name")
        return Span(lambda: self.host_begin(name), self.host_end)

    def record_resident(self, resident: "Resident") -> None:
        """Adds the stages of a Resident loop (trace=True) that ran since the
        last call (cw_trace_record_resident)."""
        from ._resident import Resident as _Resident
        lib.cw_trace_record_resident(self.handle, handle_of(resident, _Resident, "resident"))

    def info(self) -> Dict[str, Any]:
        """cw_trace_get_info: spans, dropped, calibration_error (seconds), tracks, contexts,
        gpu_timing (a GpuTiming: EVENTS or CUPTI), cupti_result, gpu_records."""
        i = _lib.TraceInfo()
        lib.cw_trace_get_info(self.handle, ctypes.byref(i))
        return {"spans": i.spans, "dropped": i.dropped, "calibration_error": i.calibration_error_ns / 1e9,
                "tracks": i.tracks, "contexts": i.contexts, "gpu_timing": GpuTiming(i.gpu_timing),
                "cupti_result": i.cupti_result, "gpu_records": i.gpu_records}

    def write(self, path: _check.PathLike) -> None:
        """Writes the ended spans as Chrome trace-event JSON to path."""
        lib.cw_trace_write(self.handle, _check.path(path, "path"))

    def _state(self) -> str:
        i = self.info()
        return "%d spans, %d dropped" % (i["spans"], i["dropped"])
