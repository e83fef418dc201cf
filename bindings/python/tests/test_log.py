# SPDX-License-Identifier: BSD-2-Clause
"""The log callback from Python (cw_log_set_callback) and the finalizers that
report through it, against the fake driver:

  - library messages reach a Python callback with their level (a failing
    call's LOG_ERROR is its detail's message; an ignored destroy's
    LOG_WARNING), max_level filters, None removes, log_to_logging forwards;
    an exception in the callback goes to sys.unraisablehook, never into C;
  - a resident loop that will not stop (the fake holds its work): the
    explicit tear_down raises TimeoutError; the finalizer (cw_resident_destroy,
    which never fails) abandons it and the callback gets a LOG_ERROR saying
    so;
  - a lease and a forked stream whose give-back fails: release() / join()
    raise; forgotten, their finalizers report the failure at LOG_ERROR.

Run: CUWEAVE_LIBRARY=build/meson/src/libcuweave.so.2 \\
     CUWEAVE_FAKE_DRIVER=build/meson/tests/libfakecuda.so \\
     python3 -m unittest discover -s bindings/python/tests -v
"""

import ctypes
import gc
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so"))
# CI (tools/test-all.sh, meson test) sets CUWEAVE_TESTS_NEED_FAKE=1: a missing fake driver
# is then an error, not a reason to skip.
if os.environ.get("CUWEAVE_TESTS_NEED_FAKE") == "1" and not os.path.exists(FAKE):
    raise RuntimeError("CUWEAVE_TESTS_NEED_FAKE=1 and the fake driver %s is missing" % FAKE)

os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ["FAKE_CUDA_FEATURES"] = "all"
os.environ["CUWEAVE_LIBNVRTC"] = os.path.join(os.path.dirname(FAKE), "libfakenvrtc.so")
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
os.environ.pop("CUWEAVE_SERIALIZE", None)

import cuweave  # noqa: E402


class Captured:
    """Installs a capturing log callback for a with-block."""

    def __init__(self, max_level=cuweave.LOG_WARNING):
        self.max_level = max_level

    def __enter__(self):
        self.got = []
        self.prev = cuweave.set_log_callback(lambda level, msg: self.got.append((level, msg)), self.max_level)
        return self

    def __exit__(self, *exc):
        cuweave.set_log_callback(*self.prev)

    def at(self, level):
        return [m for lv, m in self.got if lv == level]


@unittest.skipUnless(os.path.exists(FAKE), "the fake driver is not built")
class TestLog(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.fake = ctypes.CDLL(os.path.abspath(FAKE))
        self.fake.fake_cuda_hold.argtypes = [ctypes.c_int]
        self.fake.fake_cuda_drain.argtypes = [ctypes.c_int]

    def tearDown(self):
        gc.collect()
        self.ctx.close()

    def test_messages_reach_the_python_callback(self):
        with Captured() as log:
            with self.assertRaises(cuweave.InvalidArgumentError) as cm:
                cuweave.StreamPool(self.ctx, reserved=5, max_streams=2)
            s = cuweave.Stream(self.ctx)
            stale = ctypes.c_void_p(s.handle.value)
            s.close()
            cuweave._lib.lib.cw_stream_destroy(ctypes.byref(stale))  # not live: ignored, with a warning
        self.assertEqual(log.at(cuweave.LOG_ERROR), [cm.exception.detail["message"]])
        warnings = log.at(cuweave.LOG_WARNING)
        self.assertEqual(len(warnings), 1, log.got)
        self.assertIn("cw_stream_destroy", warnings[0])
        self.assertTrue(all(isinstance(lv, cuweave.LogLevel) for lv, _ in log.got))

        with Captured(cuweave.LOG_ERROR) as log:  # warnings filtered out
            s = cuweave.Stream(self.ctx)
            stale = ctypes.c_void_p(s.handle.value)
            s.close()
            cuweave._lib.lib.cw_stream_destroy(ctypes.byref(stale))
        self.assertEqual(log.got, [])

        prev = cuweave.set_log_callback(None)
        self.assertIsNone(cuweave.set_log_callback(None)[0])  # removed
        cuweave.set_log_callback(*prev)

    def test_an_exception_in_the_callback_stays_in_python(self):
        seen = []
        old_hook = sys.unraisablehook
        sys.unraisablehook = lambda u: seen.append((u.exc_value, u.err_msg))

        def bad(level, message):
            raise RuntimeError("log callback broken")

        prev = cuweave.set_log_callback(bad, cuweave.LOG_ERROR)
        try:
            with self.assertRaises(cuweave.InvalidArgumentError):  # the call fails as usual
                cuweave.StreamPool(self.ctx, reserved=5, max_streams=2)
        finally:
            cuweave.set_log_callback(*prev)
            sys.unraisablehook = old_hook
        self.assertEqual([str(e) for e, _ in seen], ["log callback broken"])
        self.assertIn("in the cuweave log callback", seen[0][1])  # caught by the bindings, not by ctypes

    def test_log_to_logging(self):
        prev = cuweave.log_to_logging(cuweave.LOG_ERROR)
        try:
            with self.assertLogs("cuweave", "ERROR") as cm:
                with self.assertRaises(cuweave.InvalidArgumentError):
                    cuweave.StreamPool(self.ctx, reserved=5, max_streams=2)
        finally:
            cuweave.set_log_callback(*prev)
        self.assertIn("cw_stream_pool_create", cm.output[0])

    def test_a_loop_that_will_not_stop(self):
        s = cuweave.Stream(self.ctx)
        with s.capture() as cap:
            pass
        r = cuweave.Resident(self.ctx, destroy_timeout=0.02, sleep_interval=0)
        r.set_workload(cap.graph)
        cap.graph.close()
        r.build()
        self.fake.fake_cuda_hold(1)  # the launch never completes: the loop will not stop
        try:
            r.launch()
            with self.assertRaises(cuweave.CuweaveTimeoutError):
                r.tear_down(timeout=0.02)  # the explicit call raises
            with Captured() as log:
                del r
                gc.collect()  # the finalizer: cw_resident_destroy never fails, and says what happened
            errors = log.at(cuweave.LOG_ERROR)
            self.assertEqual(len(errors), 1, log.got)
            self.assertIn("cw_resident_destroy", errors[0])
            self.assertIn("abandoned", errors[0])
        finally:
            self.fake.fake_cuda_hold(0)
            self.assertTrue(self.fake.fake_cuda_drain(2000))
        cuweave.Resident(self.ctx).close()  # the next loop's create frees the abandoned one
        s.close()

    def test_lease_and_fork_give_backs(self):
        pool = cuweave.StreamPool(self.ctx, max_streams=2)
        # explicit: raises
        lease = pool.acquire()
        behind = ctypes.c_void_p(lease.stream.handle.value)
        cuweave._lib.lib.cw_stream_pool_release(pool.handle, ctypes.byref(behind))  # given back behind its back
        with self.assertRaises(cuweave.InvalidStateError):
            lease.release()
        self.assertTrue(lease.stream.closed)
        lease.release()  # idempotent
        # forgotten: the finalizer reports
        lease = pool.acquire()
        behind = ctypes.c_void_p(lease.stream.handle.value)
        cuweave._lib.lib.cw_stream_pool_release(pool.handle, ctypes.byref(behind))
        with Captured() as log:
            del lease
            gc.collect()
        errors = log.at(cuweave.LOG_ERROR)
        self.assertTrue(any("giving a lease back" in m and "cw_stream_pool_release" in m for m in errors), log.got)
        self.assertEqual(pool.stats()["leased"], 0)
        # a lease forgotten without trouble goes back quietly
        with Captured() as log:
            pool.acquire()
            gc.collect()
        self.assertEqual(log.got, [])
        self.assertEqual(pool.stats()["leased"], 0)

        parent = cuweave.Stream(self.ctx)
        with parent.fork() as child:
            child.synchronize()
        self.assertTrue(child.closed)
        fork = parent.fork()
        behind = ctypes.c_void_p(fork.stream.handle.value)
        cuweave._lib.lib.cw_stream_join(parent.handle, ctypes.byref(behind))
        with Captured() as log:
            del fork
            gc.collect()
        self.assertTrue(any("joining a forked stream" in m for m in log.at(cuweave.LOG_ERROR)), log.got)
        fork = parent.fork()
        behind = ctypes.c_void_p(fork.stream.handle.value)
        cuweave._lib.lib.cw_stream_join(parent.handle, ctypes.byref(behind))
        with self.assertRaises(cuweave.CuweaveError):
            fork.join()
        parent.close()
        pool.close()


if __name__ == "__main__":
    unittest.main()
