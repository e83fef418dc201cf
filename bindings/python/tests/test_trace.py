# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of traces from Python (cuweave/trace.h) against the fake driver
(tests/fake_cuda.c, whose events complete in stream order at the host's
clock): GPU spans on streams and host spans on threads, and a Python
pipeline's operators, written as Chrome trace-event JSON and read back with
the json module: the fields Perfetto reads, the track names given, the
spans' order, nesting and overlap. A resident loop's stages need its marks
written (tests/test_trace_cpu.c does that through the C test seam): here,
only that a loop is refused before it is built or when it does not trace.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     CUWEAVE_FAKE_DRIVER=build/meson/tests/libfakecuda.so \\
     python3 -m unittest discover -s bindings/python/tests -v
"""

import json
import os
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)

os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
os.environ["CUWEAVE_LIBCUPTI"] = "/nonexistent/libcupti.so.13"  # no CUPTI: the event path
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
os.environ.pop("CUWEAVE_SERIALIZE", None)

import cuweave  # noqa: E402


def load(path):
    """The trace file's complete events and track names, checked for the
    fields every event needs."""
    with open(path) as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ns"
    names, spans = {}, []
    for e in doc["traceEvents"]:
        for k in ("name", "ph", "pid", "tid"):
            assert k in e, (k, e)
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        assert e["ph"] == "X", e
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        spans.append(e)
    for e in spans:
        assert (e["pid"], e["tid"]) in names, e
    return spans, names


@unittest.skipUnless(os.path.exists(FAKE), "the fake driver is not built")
class TestTrace(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.dir = tempfile.mkdtemp(prefix="cw-pytrace-")

    def tearDown(self):
        self.ctx.close()

    def test_marks_and_host_spans(self):
        t = cuweave.Trace()
        a, b = cuweave.Stream(self.ctx), cuweave.Stream(self.ctx)
        t.name_stream(a, "stream A")
        t.name_stream(b, "stream B")
        t.name_thread("python main")
        with t.host_span("enqueue"):
            with t.span(a, "outer"):
                t.begin(b, "b1")
                a.synchronize()
                time.sleep(0.002)
                with t.span(a, "inner"):
                    time.sleep(0.002)
                time.sleep(0.002)
            time.sleep(0.002)
            t.end(b)
            b.synchronize()

        def other():
            t.name_thread("helper")
            with t.host_span("helper work"):
                time.sleep(0.001)
        th = threading.Thread(target=other)
        th.start()
        th.join()
        with self.assertRaises(cuweave.InvalidStateError):
            t.end(a)  # nothing open
        info = t.info()
        self.assertEqual((info["spans"], info["dropped"], info["tracks"], info["contexts"]), (5, 0, 4, 1))
        self.assertEqual((info["gpu_timing"], info["cupti_result"], info["gpu_records"]),
                         (cuweave.GpuTiming.EVENTS, -1, 0))  # AUTO, and no libcupti
        self.assertGreater(info["calibration_error"], 0)
        path = os.path.join(self.dir, "marks.json")
        t.write(path)
        spans, names = load(path)
        by = {e["name"]: e for e in spans}
        self.assertEqual(sorted(by), ["b1", "enqueue", "helper work", "inner", "outer"])
        track = lambda n: names[(by[n]["pid"], by[n]["tid"])]  # noqa: E731
        self.assertEqual((track("outer"), track("inner"), track("b1")), ("stream A", "stream A", "stream B"))
        self.assertEqual((track("enqueue"), track("helper work")), ("python main", "helper"))
        self.assertEqual((by["outer"]["pid"], by["enqueue"]["pid"]), (2, 1))
        o, i, b1 = by["outer"], by["inner"], by["b1"]
        self.assertGreaterEqual(i["ts"], o["ts"] + 1500)
        self.assertLessEqual(i["ts"] + i["dur"], o["ts"] + o["dur"] - 1500)
        self.assertTrue(b1["ts"] < o["ts"] + o["dur"] and o["ts"] < b1["ts"] + b1["dur"])  # overlap
        self.assertGreaterEqual(by["helper work"]["ts"], by["enqueue"]["ts"] + by["enqueue"]["dur"])
        t.close()
        a.close()
        b.close()

    def test_gpu_timing(self):
        with self.assertRaises(cuweave.NotSupportedError):
            cuweave.Trace(gpu_timing="cupti")  # CUPTI asked for, none found
        with self.assertRaises(ValueError):
            cuweave.Trace(gpu_timing="sometimes")
        with self.assertRaises(ValueError):
            cuweave.Trace(gpu_timing=7)
        t = cuweave.Trace(gpu_timing=cuweave.GpuTiming.EVENTS)
        self.assertEqual((t.info()["gpu_timing"], t.info()["cupti_result"]), (cuweave.GpuTiming.EVENTS, 0))
        path = os.path.join(self.dir, "events.json")
        t.write(path)
        with open(path) as f:
            other = json.load(f)["otherData"]
        self.assertEqual(other, {"gpu_timing": "events", "cupti": "not used: gpu_timing is CW_TRACE_GPU_EVENTS"})
        t.close()

    def test_pipeline(self):
        def src(io):
            io.receive_stream()
            time.sleep(0.001)
            io.emit("out", value=io.iteration)

        def sink(io):
            io.receive("in")
            io.receive_stream("in")
            time.sleep(0.002)

        t = cuweave.Trace()
        with cuweave.Pipeline(self.ctx) as p:
            p.add(cuweave.Operator("src", src, outputs=["out"]), cuweave.Operator("sink", sink, inputs=["in"]))
            p.connect("src", "out", "sink", "in")
            p.set_trace(t)
            p.run(3)
            p.synchronize()
            p.set_trace(None)
            p.run(1)  # not traced
        path = os.path.join(self.dir, "pipeline.json")
        t.write(path)
        spans, names = load(path)
        for op in ("src", "sink"):
            host = [e for e in spans if e["name"] == op and e["pid"] == 1]
            gpu = [e for e in spans if e["name"] == op and e["pid"] == 2]
            self.assertEqual((len(host), len(gpu)), (3, 3), op)
            self.assertTrue(all(names[(e["pid"], e["tid"])] == op for e in gpu))
        srcs = sorted((e for e in spans if e["name"] == "src" and e["pid"] == 1), key=lambda e: e["ts"])
        sinks = sorted((e for e in spans if e["name"] == "sink" and e["pid"] == 1), key=lambda e: e["ts"])
        for s, k in zip(srcs, sinks):  # one thread: src then sink, every iteration
            self.assertGreaterEqual(k["ts"], s["ts"] + s["dur"])
            self.assertGreaterEqual(k["dur"], 1500)
        t.close()

    def test_resident_refused_until_built(self):
        t = cuweave.Trace()
        r = cuweave.Resident(self.ctx, trace=1)
        with self.assertRaises(cuweave.InvalidStateError):
            t.record_resident(r)
        plain = cuweave.Resident(self.ctx)
        with self.assertRaises(cuweave.InvalidStateError):
            t.record_resident(plain)
        r.close()
        plain.close()
        t.close()


if __name__ == "__main__":
    unittest.main()
