# SPDX-License-Identifier: BSD-2-Clause
"""CPU tests of communicators by rank across real processes (Python
bindings of cw_comm_id_generate, cw_comm_create_rank, cw_comm_bootstrap)
against the fake driver and the fake NCCL (tests/fake_nccl.c, whose ranks
meet through files in a directory named by the id and move the collectives'
data through them). Each test starts its ranks as separate interpreters
(subprocess) running RANK_SCRIPT, and checks their exit status and output;
the ranks check their sums element by element themselves.

Run: CUWEAVE_LIBRARY=build-make/libcuweave.so.2 \\
     CUWEAVE_FAKE_DRIVER=build-make/tests/libfakecuda.so \\
     python3 -m unittest discover -s bindings/python/tests -v
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.path.abspath(os.environ.get("CUWEAVE_FAKE_DRIVER", os.path.join(ROOT, "build/make/tests/libfakecuda.so")))
FAKE_NCCL = os.path.join(os.path.dirname(FAKE), "libfakenccl.so")

# One rank: argv = mode nranks rank [id in hex] (the id passed on the command line).
RANK_SCRIPT = r'''
import struct, sys
import cuweave
mode, nranks, rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = cuweave.Context(rank % 2)
if mode == "id":
    comm = cuweave.Comm.create_rank(ctx, bytes.fromhex(sys.argv[4]), nranks, rank, timeout=20)
elif mode == "timeout":
    try:
        cuweave.Comm.create_rank(ctx, bytes.fromhex(sys.argv[4]), nranks, rank, timeout=0.3)
    except cuweave.CuweaveError as e:
        print("ERROR", e.status_name if hasattr(e, "status_name") else type(e).__name__)
        sys.exit(0)
    sys.exit(5)
elif mode == "bootstrap-token":  # the token as an argument (over CUWEAVE_COMM_TOKEN)
    import os
    comm = cuweave.Comm.bootstrap(ctx, token=os.environ["TEST_TOKEN"])
else:
    comm = cuweave.Comm.bootstrap(ctx)  # everything from the environment
assert comm.size == nranks, comm.size
assert comm.local_size == 1 and comm.first_rank == rank
assert comm.context(rank) is ctx
s = cuweave.Stream(ctx)
n = 257
send = cuweave.Buffer(s, n, "int32")
recv = cuweave.Buffer(s, n, "int32")
send.copy_from_host(s, struct.pack("<%di" % n, *[i * (rank + 1) + rank for i in range(n)]))
comm.all_reduce_rank(rank, send, recv, n, "int32", "sum", s)
got = struct.unpack("<%di" % n, bytes(recv.copy_to_host(s)))
want = [sum(i * (q + 1) + q for q in range(nranks)) for i in range(n)]
assert list(got) == want, (got[:4], want[:4])
comm.broadcast([send if rank == nranks - 1 else None], [recv], n, "int32", nranks - 1, [s])
got = struct.unpack("<%di" % n, bytes(recv.copy_to_host(s)))
assert list(got) == [i * nranks + nranks - 1 for i in range(n)], got[:4]
s.synchronize()
comm.close()
print("OK", rank)
'''


def _env(tmp, **extra):
    env = dict(os.environ)
    if env.get("CUWEAVE_LIBRARY"):
        env["CUWEAVE_LIBRARY"] = os.path.abspath(env["CUWEAVE_LIBRARY"])
    env.update({
        "CUWEAVE_LIBCUDA": FAKE,
        "CUWEAVE_LIBNCCL": FAKE_NCCL,
        "FAKE_CUDA_DEVICES": "2",
        "FAKE_CUDA_FEATURES": "all",
        "FAKE_NCCL_DIR": tmp,
        "NCCL_NVLS_ENABLE": "0",
        "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
    })
    for k in ("CUWEAVE_COMM_FILE", "CUWEAVE_COMM_ADDR", "CUWEAVE_RANK", "CUWEAVE_WORLD_SIZE"):
        env.pop(k, None)
    env.update(extra)
    return env


@unittest.skipUnless(os.path.exists(FAKE) and os.path.exists(FAKE_NCCL), "the fake driver and fake NCCL are not built")
class TestCommRank(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cuweave-pytest-comm-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_ranks(self, nranks, mode, stdin=None, env_of=lambda r: {}, started=None):
        """Ranks 0 .. started-1 (default: all) of nranks, given the id `stdin`
        (hex) on their command line; their (status, out, err)."""
        procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, mode, str(nranks), str(r), stdin or ""],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=_env(self.tmp, **env_of(r))) for r in range(started or nranks)]
        outs = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=60)
                outs.append((p.returncode, out.decode(), err.decode()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        return outs

    def make_id(self):
        """An id made in this (parent) process, as the hex the ranks read."""
        out = subprocess.run([sys.executable, "-c", "import cuweave; print(cuweave.comm_id_generate().hex())"],
                             env=_env(self.tmp), capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        hexid = out.stdout.decode().strip()
        self.assertEqual(len(hexid), 256)
        return hexid

    def test_create_rank_by_id(self):
        hexid = self.make_id()
        for r, (rc, out, err) in enumerate(self.run_ranks(3, "id", stdin=hexid)):
            self.assertEqual(rc, 0, "rank %d: %s" % (r, err))
            self.assertIn("OK %d" % r, out)

    def test_rank_never_arrives(self):
        hexid = self.make_id()
        # two of three ranks: both time out (cuweave.CuweaveTimeoutError)
        results = self.run_ranks(3, "timeout", stdin=hexid, started=2)
        for r, (rc, out, err) in enumerate(results):
            self.assertEqual(rc, 0, "rank %d: %s" % (r, err))
            self.assertIn("ERROR", out)
            self.assertIn("Timeout", out)

    def test_bootstrap_file(self):
        path = os.path.join(self.tmp, "comm-id")
        env_of = lambda r: {"CUWEAVE_RANK": str(r), "CUWEAVE_WORLD_SIZE": "2", "CUWEAVE_COMM_FILE": path}
        for r, (rc, out, err) in enumerate(self.run_ranks(2, "bootstrap", env_of=env_of)):
            self.assertEqual(rc, 0, "rank %d: %s" % (r, err))
        self.assertFalse(os.path.exists(path))  # rank 0 removed it

    def test_bootstrap_tcp(self):
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        addr = "127.0.0.1:%d" % port
        env_of = lambda r: {"CUWEAVE_RANK": str(r), "CUWEAVE_WORLD_SIZE": "2", "CUWEAVE_COMM_ADDR": addr}
        for r, (rc, out, err) in enumerate(self.run_ranks(2, "bootstrap", env_of=env_of)):
            self.assertEqual(rc, 0, "rank %d: %s" % (r, err))

    def test_bootstrap_tcp_token(self):
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        addr = "127.0.0.1:%d" % port
        env_of = lambda r: {"CUWEAVE_RANK": str(r), "CUWEAVE_WORLD_SIZE": "2", "CUWEAVE_COMM_ADDR": addr,
                            "CUWEAVE_COMM_TOKEN": "not-this-%d" % r, "TEST_TOKEN": "s3cret"}
        for r, (rc, out, err) in enumerate(self.run_ranks(2, "bootstrap-token", env_of=env_of)):
            self.assertEqual(rc, 0, "rank %d: %s" % (r, err))


if __name__ == "__main__":
    unittest.main()
