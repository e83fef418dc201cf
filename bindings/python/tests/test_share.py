# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of the sharing between processes (cuweave/share.h) against the
fake driver: a shareable buffer written here is read by a child interpreter
that imports its handle (and written there, read back here), a shared event
exported and imported, and the errors (a handle imported by its own
process, a bad handle, pool memory exported).

Run: CUWEAVE_LIBRARY=build/make/libcuweave.so.2 \
     CUWEAVE_FAKE_DRIVER=build/make/tests/libfakecuda.so \
     python3 -m unittest discover -s bindings/python/tests -v
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.path.abspath(os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so")))
os.environ["CUWEAVE_LIBCUDA"] = FAKE
os.environ.setdefault("FAKE_CUDA_FEATURES", "all")
os.environ.setdefault("CUWEAVE_CACHE_DIR", tempfile.mkdtemp(prefix="cuweave-pytest-"))
import cuweave  # noqa: E402

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import cuweave
hb, he = bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
ctx = cuweave.Context(0)
s = cuweave.Stream(ctx)
b = cuweave.Buffer.import_handle(s, hb)
e = cuweave.SharedEvent.import_handle(ctx, he)
assert e.info()["imported"]
e.wait(s)
data = b.copy_to_host(s)
ok = data == bytes(i % 251 for i in range(len(data)))
b.copy_from_host(s, bytes((i * 3) % 256 for i in range(len(data))))
s.synchronize()
b.close()
e.close()
print("ok" if ok else "bad")
"""


class TestShare(unittest.TestCase):
    def setUp(self):
        self.ctx = cuweave.Context(0)
        self.s = cuweave.Stream(self.ctx)

    def tearDown(self):
        self.s.close()
        self.ctx.close()

    def test_buffer_and_event_across_processes(self):
        n = 4096
        b = cuweave.Buffer.create_shareable(self.s, n)
        b.copy_from_host(self.s, bytes(i % 251 for i in range(n)))
        e = cuweave.SharedEvent(self.ctx)
        e.record(self.s)
        hb, he = b.export(), e.export()
        self.assertEqual(len(hb), 128)
        self.assertEqual(len(he), 128)
        out = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(HERE), hb.hex(), he.hex()],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "ok")  # every byte as written here
        back = b.copy_to_host(self.s)
        self.assertEqual(back, bytes((i * 3) % 256 for i in range(n)))  # as the child wrote
        self.assertEqual(e.info(), {"imported": False, "importers": 0})
        e.close()
        b.close()

    def test_errors(self):
        b = cuweave.Buffer.create_shareable(self.s, 64)
        with self.assertRaises(cuweave.NotPermittedError):
            cuweave.Buffer.import_handle(self.s, b.export())
        with self.assertRaises(cuweave.InvalidArgumentError):
            cuweave.Buffer.import_handle(self.s, bytes(128))
        with self.assertRaises(ValueError):
            cuweave.Buffer.import_handle(self.s, bytes(12))
        pool = cuweave.Buffer(self.s, 64)
        with self.assertRaises(cuweave.InvalidStateError):
            pool.export()
        pool.close()
        b.close()


if __name__ == "__main__":
    unittest.main()
