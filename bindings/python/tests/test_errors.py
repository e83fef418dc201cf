# SPDX-License-Identifier: BSD-2-Clause
"""The exception classes, written out in cuweave/_errors.py, against the C
status list (include/cuweave/common.h, asked through cw_status_name and
cw_status_string), and the package's namespace: __all__, what a star import
binds (no built-in rebound, no module such as os or ctypes), the deprecated
cuweave.TimeoutError, and CompileError's log."""

import builtins
import subprocess
import sys
import unittest
import warnings

import fakeenv  # noqa: F401 (before cuweave)
import cuweave
from cuweave import _errors, _lib


class TestExceptionClasses(unittest.TestCase):
    def test_every_c_status_has_its_class(self):
        lib = _lib.lib
        code, seen = 1, []
        while True:
            name = lib.cw_status_name(code).decode()
            if name == "CW_UNKNOWN_STATUS":
                break
            cls = cuweave.errors()[code]
            seen.append(cls)
            self.assertEqual((cls.status, cls.name), (code, name))
            self.assertTrue(issubclass(cls, cuweave.CuweaveError))
            self.assertIs(getattr(cuweave, cls.__name__), cls)  # importable by name
            self.assertIn(cls.__name__, cuweave.__all__)
            self.assertIn(name, cls.__doc__)
            self.assertIn(lib.cw_status_string(code).decode().split(" (")[0], cls.__doc__.replace("\n    ", " "))
            code += 1
        self.assertEqual(len(seen), 17)
        self.assertEqual(set(seen), set(cuweave.errors().values()))  # and no class for a status C lacks

    def test_builtin_bases(self):
        self.assertTrue(issubclass(cuweave.CuweaveTimeoutError, builtins.TimeoutError))
        self.assertTrue(issubclass(cuweave.InvalidArgumentError, builtins.ValueError))
        self.assertTrue(issubclass(cuweave.OutOfMemoryError, builtins.MemoryError))
        self.assertIs(cuweave.error_class("CW_ERROR_TIMEOUT"), cuweave.CuweaveTimeoutError)

    def test_attributes_and_unknown_status(self):
        e = _errors.from_status(10, {"message": "cw_x: none free", "function": "cw_x"})
        self.assertIsInstance(e, cuweave.PoolExhaustedError)
        self.assertEqual((e.status, e.name, e.detail["function"], str(e)), (10, "CW_ERROR_POOL_EXHAUSTED", "cw_x",
                                                                          "cw_x: none free"))
        odd = _errors.from_status(99, {})
        self.assertIs(type(odd), cuweave.CuweaveError)
        self.assertEqual((odd.status, str(odd)), (99, "cuweave status 99"))

    @unittest.skipUnless(fakeenv.HAVE_FAKE, "the fake driver is not built")
    def test_compile_error_has_the_log(self):
        ctx = cuweave.Context(0)
        try:
            with self.assertRaises(cuweave.CompileError) as cm:
                cuweave.Program(ctx, '#error nope\nextern "C" __global__ void k() {}', name="bad.cu")
        finally:
            ctx.close()
        e = cm.exception
        self.assertIn("#error directive: nope", e.log)
        self.assertIn("1 error detected", e.log)
        self.assertEqual(e.log, cuweave.compile_log())
        self.assertNotIn("cw_jit_get_compile_log", str(e))  # no C function to call from Python
        self.assertIn("CompileError.log", str(e))
        self.assertEqual((e.status, e.name, e.detail["function"]), (16, "CW_ERROR_COMPILE", "cw_program_compile"))


class TestNamespace(unittest.TestCase):
    def test_all_names_exist_and_are_public(self):
        self.assertEqual(len(cuweave.__all__), len(set(cuweave.__all__)))
        for name in cuweave.__all__:
            self.assertFalse(name.startswith("_"), name)
            self.assertTrue(hasattr(cuweave, name), name)
            self.assertNotEqual(type(getattr(cuweave, name)).__name__, "module", name)

    def test_star_import_rebinds_no_builtin(self):
        ns = {}
        exec("from cuweave import *", ns)
        ns.pop("__builtins__", None)
        clash = sorted(n for n in ns if hasattr(builtins, n))
        self.assertEqual(clash, [])
        for name in ("os", "ctypes", "enum", "weakref", "asyncio", "lib", "TimeoutError"):
            self.assertNotIn(name, ns)
        self.assertIs(ns["CuweaveTimeoutError"], cuweave.CuweaveTimeoutError)

    def test_star_import_in_a_fresh_interpreter(self):
        code = ("from cuweave import *\nimport builtins\n"
                "assert TimeoutError is builtins.TimeoutError\nassert ValueError is builtins.ValueError\n"
                "print(sorted(n for n in dir() if not n.startswith('_'))[:3])\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=fakeenv.child_env())
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_the_old_timeout_name_warns(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cls = cuweave.TimeoutError
        self.assertIs(cls, cuweave.CuweaveTimeoutError)
        self.assertEqual([x.category for x in w], [DeprecationWarning])
        with self.assertRaises(AttributeError):
            cuweave.no_such_name


if __name__ == "__main__":
    unittest.main()
