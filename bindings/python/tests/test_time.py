# SPDX-License-Identifier: BSD-2-Clause
"""One unit of time (issue 41): every duration of the Python API is seconds
(int or float); None waits without limit, 0 only tries, a negative value or
NaN is a ValueError naming the parameter, a bool or a str a TypeError. The
conversions to the C calls' units are checked at the limits: 0, a
sub-microsecond value (rounded up: a wait never becomes a mere try), values
just under and over what the C type holds (never wrapped: ctypes keeps the
low bits, so 2**32 ms used to become 0, issue 25), infinity and 1e300. The
resident loop's uint32 millisecond waits are repeated in parts for a
longer timeout (and for None). Then each timed call of the API, on the fake
driver."""

import math
import unittest
from unittest import mock

import fakeenv
import cuweave
from cuweave import _check
from cuweave._resident import Resident

INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1


class TestConversions(unittest.TestCase):
    def test_microseconds_of_a_wait(self):
        us = _check.timeout_us
        self.assertEqual(us(None), -1)            # no limit (C: negative)
        self.assertEqual(us(0), 0)                # only tries
        self.assertEqual(us(0.0), 0)
        self.assertEqual(us(1e-9), 1)             # sub-microsecond: one microsecond, not a try
        self.assertEqual(us(4e-7), 1)
        self.assertEqual(us(1e-6), 1)
        self.assertEqual(us(1.5e-6), 2)           # rounded up
        self.assertEqual(us(0.0001), 100)         # not 101: the float's own error is not rounded up
        self.assertEqual(us(1.5), 1500000)
        self.assertEqual(us(7), 7000000)
        self.assertEqual(us(9.2e12), 9200000000000000000)  # just under INT64_MAX us
        self.assertEqual(us(9.3e12), -1)          # past INT64_MAX us: no limit, never wrapped
        self.assertEqual(us(1e300), -1)
        self.assertEqual(us(float("inf")), -1)
        self.assertEqual(us(10 ** 30), -1)        # a huge int

    def test_milliseconds_with_no_unlimited_value(self):
        ms = _check.timeout_ms_clamped
        self.assertEqual(ms(None), UINT32_MAX)    # the longest the C call takes
        self.assertEqual(ms(0), 0)
        self.assertEqual(ms(1e-7), 1)             # sub-millisecond: rounded up
        self.assertEqual(ms(0.25), 250)
        self.assertEqual(ms(4294967.294), UINT32_MAX - 1)
        self.assertEqual(ms(4294967.296), UINT32_MAX)  # 2**32 ms: wrapped to 0 before issue 25
        self.assertEqual(ms(1e300), UINT32_MAX)
        self.assertEqual(ms(float("inf")), UINT32_MAX)

    def test_milliseconds_in_parts(self):
        parts = _check.ms_parts
        self.assertIsNone(parts(None))
        self.assertIsNone(parts(float("inf")))
        self.assertEqual(parts(0), 0)
        self.assertEqual(parts(1e-9), 1)
        self.assertEqual(parts(1e7), 10 ** 10)    # more than a uint32 holds: the caller waits in parts
        self.assertEqual(parts(9.2e15), 9200000000000000000)  # just under INT64_MAX ms
        self.assertIsNone(parts(9.3e15))          # past it: no limit (1e306 s raised OverflowError)

    def test_durations_of_settings(self):
        d = _check.duration
        self.assertEqual(d(0, "spin", 1000000, 1000000), 0)
        self.assertEqual(d(1e-7, "spin", 1000000, 1000000), 1)
        self.assertEqual(d(1, "spin", 1000000, 1000000), 1000000)
        for bad in (1.000001, 2, float("inf"), 1e300):
            with self.assertRaises(ValueError) as cm:
                d(bad, "spin", 1000000, 1000000)
            self.assertIn("spin must be at most 1 seconds", str(cm.exception))
        with self.assertRaises(TypeError):
            d(None, "spin", 1000000, 1000000)  # a setting has no 'no limit'

    def test_a_positive_value_is_never_a_try(self):
        # Review of issue 41: _units snapped anything within 1e-9 units of 0 to 0, so 1e-12 s was 0 ms
        # (create_rank/bootstrap: one check; the resident waits: one check) and 1e-16 s was 0 us.
        for v in (1e-12, 1e-15, 5e-16, 1e-300, 5e-324):
            self.assertEqual(_check.timeout_ms_clamped(v), 1, v)
            self.assertEqual(_check.ms_parts(v), 1, v)
            self.assertEqual(_check.timeout_us(v), 1, v)
            self.assertEqual(_check.duration(v, "spin", 1000000, 1000000), 1, v)
            self.assertEqual(_check.duration(v, "lifetime", 1000, UINT32_MAX), 1, v)
        self.assertEqual(_check.timeout_us(-0.0), 0)  # negative zero is zero: a try
        self.assertEqual(_check.ms_parts(-0.0), 0)

    def test_huge_finite_values_are_no_overflow(self):
        # Review of issue 41: 1e303 s is 1e309 us, an infinite float: round() raised OverflowError
        for v in (1e303, 1e306, 1.7976931348623157e308, 10 ** 400):
            with self.assertRaises(ValueError) as cm:
                _check.duration(v, "spin", 1000000, 1000000)
            self.assertIn("spin must be at most 1 seconds", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                _check.duration(v, "lifetime", 1000, UINT32_MAX)
            self.assertIn("lifetime", str(cm.exception))
            self.assertIsNone(_check.ms_parts(v))  # past int64 ms: no limit, as timeout_us says
            self.assertEqual(_check.timeout_us(v), -1)
            self.assertEqual(_check.timeout_ms_clamped(v), UINT32_MAX)

    def test_numpy_style_scalars(self):
        # Review of issue 41: integer() took NumPy's ints (__index__), the seconds refused them (TypeError)
        import fractions
        import numbers

        class Int64:  # what numpy.int64 is as far as the bindings can tell: a numbers.Integral with __index__
            def __init__(self, v):
                self.v = v

            def __index__(self):
                return self.v

            def __float__(self):
                return float(self.v)

            def __lt__(self, other):
                return self.v < other

            def __gt__(self, other):
                return self.v > other

        numbers.Integral.register(Int64)
        self.assertEqual(_check.timeout_us(Int64(2)), 2000000)
        self.assertEqual(_check.timeout_us(fractions.Fraction(1, 4)), 250000)
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            self.assertEqual(_check.timeout_us(numpy.int64(3)), 3000000)
            self.assertEqual(_check.timeout_us(numpy.float32(0.5)), 500000)
            with self.assertRaises(ValueError):
                _check.timeout_us(numpy.float32("nan"))
        for bad in ("1", b"1", [1], True, 1j):
            with self.assertRaises(TypeError):
                _check.timeout_us(bad)

    def test_refused_values_name_the_parameter(self):
        for fn in (_check.timeout_us, _check.timeout_ms_clamped, _check.ms_parts):
            for bad, exc in ((-1, ValueError), (-1e-9, ValueError), (-math.inf, ValueError),
                             (float("nan"), ValueError), (True, TypeError), ("1", TypeError), ([1], TypeError)):
                with self.assertRaises(exc, msg="%s(%r)" % (fn.__name__, bad)) as cm:
                    fn(bad, "my_timeout")
                self.assertIn("my_timeout", str(cm.exception))


class TestResidentWaitsInParts(unittest.TestCase):
    """Resident's waits take uint32 milliseconds: a longer timeout (or None)
    is waited in parts, each at most 2**32 - 2 ms, until it has passed."""

    def run_wait(self, timeout, timeouts_before_success, clock_step):
        calls = []
        now = [1000.0]

        def call(ms):
            calls.append(ms)
            now[0] += ms / 1000.0 if clock_step is None else clock_step
            if len(calls) <= timeouts_before_success:
                raise cuweave.CuweaveTimeoutError("timed out")
            return "done"

        with mock.patch("cuweave._resident.time.monotonic", lambda: now[0]):
            try:
                return Resident._wait(None, call, timeout), calls  # type: ignore[arg-type]
            except cuweave.CuweaveTimeoutError:
                return "timeout", calls

    def test_short_waits_are_one_call(self):
        self.assertEqual(self.run_wait(0, 5, None), ("timeout", [0]))
        self.assertEqual(self.run_wait(1e-9, 5, None), ("timeout", [1]))
        self.assertEqual(self.run_wait(2.5, 0, None), ("done", [2500]))
        self.assertEqual(self.run_wait(4294967.294, 5, None), ("timeout", [UINT32_MAX - 1]))

    def test_no_limit_repeats_until_done(self):
        result, calls = self.run_wait(None, 3, None)
        self.assertEqual(result, "done")
        self.assertEqual(calls, [UINT32_MAX - 1] * 4)

    def test_a_timeout_past_int64_ms_is_no_limit(self):
        # 1e306 s: OverflowError before (review of issue 41); now as None
        self.assertEqual(self.run_wait(1e306, 3, None), ("done", [UINT32_MAX - 1] * 4))

    def test_a_long_timeout_is_waited_in_full(self):
        # 10**7 s = 10**10 ms: two full parts, then what is left
        result, calls = self.run_wait(1e7, 100, None)
        self.assertEqual(result, "timeout")
        self.assertEqual(calls, [UINT32_MAX - 1, UINT32_MAX - 1, 10 ** 10 - 2 * (UINT32_MAX - 1)])
        self.assertEqual(sum(calls), 10 ** 10)


@unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
class TestTimedCalls(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def test_future_wait(self):
        f = cuweave.Future(self.s)
        for t in (None, 0, 1e-9, 5, 1e300, float("inf")):  # complete already: every form returns
            f.wait(t)
        f.wait(timeout=None)
        for bad in (-1, float("nan")):
            with self.assertRaises(ValueError) as cm:
                f.wait(bad)
            self.assertIn("timeout", str(cm.exception))
        with self.assertRaises(TypeError):
            f.wait("1")
        f.close()

    def test_pool_acquire(self):
        pool = cuweave.StreamPool(self.ctx, max_streams=1)
        lease = pool.acquire()  # timeout 0: only tries
        with self.assertRaises(cuweave.PoolExhaustedError):
            pool.acquire(0)
        with self.assertRaises(cuweave.CuweaveTimeoutError):
            pool.acquire(1e-9)  # a sub-microsecond wait is one microsecond, not a try
        with self.assertRaises(cuweave.CuweaveTimeoutError):
            pool.acquire(0.01)
        with self.assertRaises(ValueError) as cm:
            pool.acquire(-1)  # 0.2 took a negative value as no limit
        self.assertIn("timeout", str(cm.exception))
        lease.release()
        pool.acquire(None).release()  # one free now
        pool.close()

    def test_resident_waits(self):
        r = cuweave.Resident(self.ctx, sleep_interval=0, input_slots=1, input_bytes=8)
        with self.s.capture() as cap:
            pass
        r.set_workload(cap.graph)
        r.launch()
        seq = r.data_ready()
        for t in (0, 1e-9, 0.01):
            with self.assertRaises(cuweave.CuweaveTimeoutError):  # the fake serves nothing
                r.wait_result(seq, timeout=t)
        with self.assertRaises(ValueError) as cm:
            r.wait_result(seq, timeout=-0.5)
        self.assertIn("timeout", str(cm.exception))
        with self.assertRaises(cuweave.CuweaveTimeoutError):
            r.next_input(timeout=0.01)  # its slot waits for request 1
        with self.assertRaises(cuweave.CuweaveTimeoutError):
            with mock.patch("cuweave._resident.time.monotonic", side_effect=[0.0, 1e13, 1e13]):
                r.wait_result(seq, timeout=1e10)  # waited in parts until the (mocked) clock passes the deadline
        with self.assertRaises(ValueError) as cm:
            cuweave.Resident(self.ctx, spin=1e303)  # OverflowError before
        self.assertIn("spin", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            cuweave.Resident(self.ctx, lifetime=1e306)
        self.assertIn("lifetime", str(cm.exception))
        r2 = cuweave.Resident(self.ctx, lifetime=1e-12)  # "must be > 0 seconds" before: a positive value is 1 ms
        self.assertEqual(r2.settings()["lifetime"], 0.001)
        r2.close()
        r.tear_down(timeout=None)
        self.assertFalse(r.launched)
        r.close()
        cap.graph.close()

    def test_settings_in_seconds(self):
        r = cuweave.Resident(self.ctx, sleep_interval=0.00025, spin=1e-7, destroy_timeout=None, lifetime=2.5)
        st = r.settings()
        self.assertEqual((st["sleep_interval"], st["spin"], st["destroy_timeout"], st["lifetime"]),
                         (0.00025, 1e-6, UINT32_MAX / 1e3, 2.5))
        r.configure(lifetime=None, destroy_timeout=0)
        self.assertEqual((r.settings()["lifetime"], r.settings()["destroy_timeout"]), (None, 0.0))
        for k, v, exc in (("sleep_interval", 2, ValueError), ("spin", -1, ValueError), ("lifetime", 0, ValueError),
                          ("destroy_timeout", "5", TypeError), ("sleep_interval_us", 5, TypeError)):
            with self.assertRaises(exc) as cm:
                r.configure(**{k: v})
            self.assertIn(k, str(cm.exception))
        r.close()

    def test_future_spin_and_timer(self):
        f = cuweave.Future(self.s)
        f.set_spin(0)
        f.set_spin(10)
        with self.assertRaises(ValueError):
            f.set_spin(10.000001)
        with self.assertRaises(ValueError) as cm:
            f.set_spin(1e303)  # OverflowError before (1e309 us)
        self.assertIn("spin", str(cm.exception))
        f.close()
        t = cuweave.Timer(self.ctx)
        t.start(self.s)
        t.stop(self.s)
        self.assertGreater(t.elapsed(), 0.0)
        self.assertLess(t.elapsed(), 10.0)  # seconds, not milliseconds (the fake's events are ~us apart)
        t.close()


if __name__ == "__main__":
    unittest.main()
