#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Checks of the test command's own tools. Usage: check-tools.sh SOURCE_ROOT
#  1. tools/test-summary.py counts a test run by several steps once (failed
#     if it failed in any, skipped if skipped in every), names each skip once
#     with its reason, counts a Python test module as one test, and exits 1
#     when a test failed.
#  2. tools/setup.sh waits while another process holds the package
#     manager's lock and then installs (apt-get, dpkg, clang faked on PATH),
#     and gives up after SETUP_LOCK_WAIT seconds.
#  3. Every benchmark exits 77 without a GPU (the driver pointed at a
#     missing file), when BENCH_DIR names the built benchmarks.
set -u
root=$(cd "${1:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2], got [$3]"; fail=1; fi
}

# ---- 1. the tally
sum="python3 $root/tools/test-summary.py"
cat > "$tmp/testlog.json" <<'EOF'
{"name": "cuweave:cpu / test_api", "result": "OK", "stdout": ""}
{"name": "cuweave:gpu / test_gpu_device", "result": "SKIP", "stdout": "[==========] tests\nSKIP: no usable GPU: no CUDA driver\n"}
{"name": "exports", "result": "OK", "stdout": ""}
EOF
cat > "$tmp/make.log" <<'EOF'
PASS build/make/tests/test_api
SKIP build/make/tests/test_gpu_device: SKIP: no usable GPU: no CUDA driver
PASS tests/check-exports.sh
make: 2 passed, 0 failed, 1 skipped
EOF
cat > "$tmp/py.log" <<'EOF'
test_layout (test_abi.AbiTest.test_layout) ... ok
test_other (test_abi.AbiTest.test_other) ... skipped 'no nm'
test_cupy (test_gpu_cupy.CupyTest.test_cupy) ... skipped 'needs a GPU and CuPy'
test_more (test_gpu_cupy.CupyTest.test_more) ... skipped 'needs a GPU and CuPy'
EOF
r="$tmp/results.txt"
{ $sum meson meson "$tmp/testlog.json"; $sum lines make "$tmp/make.log"; $sum unittest python "$tmp/py.log" 0; } > "$r"
out=$($sum report "$r"); rc=$?
check "tally exit status with no failure" 0 "$rc"
check "tally line" "cuweave: 4 passed, 0 failed, 2 skipped (tests, each counted once)" "$(echo "$out" | tail -1)"
check "a GPU test skipped by two steps is named once" 1 "$(echo "$out" | grep -c '^SKIPPED test_gpu_device')"
check "its reason and steps" "SKIPPED test_gpu_device: no usable GPU: no CUDA driver [meson, make]" \
    "$(echo "$out" | grep '^SKIPPED test_gpu_device')"
check "a Python module whose every case skipped" "SKIPPED python:test_gpu_cupy: needs a GPU and CuPy [python]" \
    "$(echo "$out" | grep '^SKIPPED python:')"
$sum add asan test_api FAIL "exit 1" >> "$r"
out=$($sum report "$r"); rc=$?
check "tally exit status with a failure" 1 "$rc"
check "a test that failed in one step of two" "cuweave: 3 passed, 1 failed, 2 skipped (tests, each counted once)" \
    "$(echo "$out" | tail -1)"
$sum unittest python "$tmp/py.log" 1 > "$r"
check "unittest failing with no failed case parsed" "FAIL	python	python:unittest	exit 1" "$(grep '^FAIL' "$r")"

# ---- 2. setup.sh and the lock
mkdir -p "$tmp/bin"
cat > "$tmp/bin/dpkg" <<'EOF'
#!/bin/sh
[ "$2" = valgrind ] && exit 1   # one package missing
exit 0
EOF
cat > "$tmp/bin/clang" <<EOF
#!/bin/sh
echo "$tmp/libfuzzer.a"
EOF
: > "$tmp/libfuzzer.a"
cat > "$tmp/bin/apt-get" <<EOF
#!/bin/sh
n=\$(cat "$tmp/tries" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n > "$tmp/tries"
echo "apt-get \$*" >> "$tmp/apt.log"
if [ \$n -le 2 ]; then
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100
fi
exit 0
EOF
cat > "$tmp/bin/sudo" <<'EOF'
#!/bin/sh
exec "$@"
EOF
chmod +x "$tmp/bin/"*
out=$(PATH="$tmp/bin:$PATH" SETUP_PLOT=0 SETUP_LOCK_POLL=0 SETUP_LOCK_WAIT=10 sh "$root/tools/setup.sh" 2>&1); rc=$?
check "setup waits for the lock, then succeeds" 0 "$rc"
check "setup says it waits" 1 "$(echo "$out" | grep -c 'holds the package manager.s lock; waiting')"
check "apt-get tried 3 times for update, then install" "3 1" \
    "$(grep -c ' update' "$tmp/apt.log") $(grep -c ' install .*valgrind' "$tmp/apt.log")"
check "setup names what it installed" "setup: installed valgrind" "$(echo "$out" | tail -1)"
echo 0 > "$tmp/tries"; : > "$tmp/apt.log"
sed -i 's/-le 2/-le 1000/' "$tmp/bin/apt-get"
out=$(PATH="$tmp/bin:$PATH" SETUP_PLOT=0 SETUP_LOCK_POLL=1 SETUP_LOCK_WAIT=2 sh "$root/tools/setup.sh" 2>&1); rc=$?
check "setup gives up after SETUP_LOCK_WAIT" "1 3" "$rc $(grep -c ' update' "$tmp/apt.log")"

# ---- 3. benchmarks without a GPU
if [ -n "${BENCH_DIR:-}" ]; then
    for b in bench_streams bench_completion bench_green bench_graph bench_jit bench_resident bench_vmaf bench_pipeline bench_pipeline_wide bench_multi bench_trace bench_nvtx; do
        CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 timeout 60 "$BENCH_DIR/$b" > "$tmp/b.log" 2>&1; rc=$?
        check "$b exits 77 without a GPU" 77 "$rc"
    done
    # built only where FFmpeg's development packages are
    if [ -x "$BENCH_DIR/bench_ffmpeg" ]; then
        CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 timeout 60 "$BENCH_DIR/bench_ffmpeg" > "$tmp/b.log" 2>&1; rc=$?
        check "bench_ffmpeg exits 77 without a GPU" 77 "$rc"
    fi
fi
exit $fail
