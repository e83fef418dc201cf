#!/bin/sh
# The test command (README, .ci/run): builds cuweave with meson and with the
# Makefile and runs every test with each; then runs the CPU tests again
# built with AddressSanitizer + UndefinedBehaviorSanitizer, built with
# ThreadSanitizer, and under valgrind memcheck; builds libcuweave.so with
# libstdc++ linked in (both builds' option) and checks that it needs none;
# builds the libFuzzer targets with clang and runs each for FUZZ_SECONDS
# (default 20) over its corpus (tools/fuzz.sh).
# GPU tests run where there is a GPU and skip (exit 77) where there is none.
# Ends with one line: "cuweave: N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
pass=0 failed=0 skipped=0 steps_failed=""

add_meson_counts() { # LOG
    ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$1"); bad=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$1")
    sk=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$1"); to=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$1")
    pass=$((pass + ${ok:-0})); failed=$((failed + ${bad:-0} + ${to:-0})); skipped=$((skipped + ${sk:-0}))
}

step() { echo; echo "=== $*"; }

step "meson build + all tests"
if meson setup --reconfigure build/meson >/dev/null 2>&1 || meson setup build/meson; then :; fi
if ninja -C build/meson; then
    meson test -C build/meson --print-errorlogs 2>&1 | tee build/meson-test.log
    add_meson_counts build/meson-test.log
else
    failed=$((failed + 1)); steps_failed="$steps_failed meson-build"
fi

step "Makefile build + all tests"
if make -j"$jobs" O=build/make; then
    make O=build/make check 2>&1 | tee build/make-check.log
    line=$(grep '^make: [0-9]* passed' build/make-check.log | tail -1)
    p=$(echo "$line" | sed -n 's/^make: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped/\1 \2 \3/p')
    set -- $p
    if [ $# -eq 3 ]; then pass=$((pass + $1)); failed=$((failed + $2)); skipped=$((skipped + $3));
    else failed=$((failed + 1)); steps_failed="$steps_failed make-check"; fi
else
    failed=$((failed + 1)); steps_failed="$steps_failed make-build"
fi

step "Python bindings (unittest, fake driver)"
if CUWEAVE_LIBRARY=build/make/libcuweave.so.1 CUWEAVE_FAKE_DRIVER=build/make/tests/libfakecuda.so \
    python3 -m unittest discover -s bindings/python/tests -v > build/python-test.log 2>&1; then
    n=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' build/python-test.log)
    sk=$(sed -n 's/^OK (skipped=\([0-9]*\))$/\1/p' build/python-test.log)
    pass=$((pass + ${n:-0} - ${sk:-0})); skipped=$((skipped + ${sk:-0})); tail -3 build/python-test.log
else
    failed=$((failed + 1)); cat build/python-test.log
fi

step "libstdc++ linked in: meson -Dstatic_libstdcxx=true (CPU tests), make STATIC_LIBSTDCXX=1"
if { [ -d build/nostdcxx ] || meson setup build/nostdcxx -Dstatic_libstdcxx=true -Dbench=false; } \
    && ninja -C build/nostdcxx; then
    meson test -C build/nostdcxx --suite cpu --print-errorlogs 2>&1 | tee build/nostdcxx-test.log
    add_meson_counts build/nostdcxx-test.log
else
    failed=$((failed + 1)); steps_failed="$steps_failed nostdcxx-meson-build"
fi
if make -j"$jobs" O=build/make-nostdcxx STATIC_LIBSTDCXX=1 lib >/dev/null \
    && sh tests/check-no-libstdcxx.sh build/make-nostdcxx/libcuweave.so.1; then
    pass=$((pass + 1)); echo "PASS make STATIC_LIBSTDCXX=1: no libstdc++"
else
    failed=$((failed + 1)); echo "FAIL make STATIC_LIBSTDCXX=1: no libstdc++"
fi

step "ASan + UBSan build, CPU tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if { [ -d build/asan ] || meson setup build/asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug; } \
    && ninja -C build/asan; then
    meson test -C build/asan --suite cpu --print-errorlogs 2>&1 | tee build/asan-test.log
    add_meson_counts build/asan-test.log
else
    failed=$((failed + 1)); steps_failed="$steps_failed asan-build"
fi

step "ThreadSanitizer build, CPU tests"
if { [ -d build/tsan ] || meson setup build/tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug; } \
    && ninja -C build/tsan; then
    TSAN_OPTIONS=halt_on_error=1 meson test -C build/tsan --suite cpu --print-errorlogs 2>&1 | tee build/tsan-test.log
    add_meson_counts build/tsan-test.log
else
    failed=$((failed + 1)); steps_failed="$steps_failed tsan-build"
fi

step "valgrind memcheck, CPU tests (Makefile build)"
if command -v valgrind >/dev/null 2>&1; then
    for t in "build/make/tests/test_api" "build/make/tests/test_nodriver" \
             "build/make/tests/test_stream_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_multi_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_handles_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_model_cpu build/make/tests/libfakecuda.so"; do
        if valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect -q $t \
            > build/valgrind.log 2>&1; then
            pass=$((pass + 1)); echo "PASS valgrind $t"
        else
            failed=$((failed + 1)); echo "FAIL valgrind $t"; grep '^==' build/valgrind.log | head -40
        fi
    done
else
    failed=$((failed + 1)); steps_failed="$steps_failed valgrind-missing"
fi

step "libFuzzer targets (clang, ASan + UBSan): tools/fuzz.sh, ${FUZZ_SECONDS:-20} s each"
if command -v clang >/dev/null 2>&1; then
    sh tools/fuzz.sh "${FUZZ_SECONDS:-20}" 2>&1 | tee build/fuzz.log
    p=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' build/fuzz.log | tail -1)
    set -- $p
    if [ $# -eq 2 ]; then pass=$((pass + $1)); failed=$((failed + $2));
    else failed=$((failed + 1)); steps_failed="$steps_failed fuzz"; fi
else
    failed=$((failed + 1)); steps_failed="$steps_failed clang-missing"
fi

echo
[ -n "$steps_failed" ] && echo "steps that failed to build:$steps_failed"
echo "cuweave: $pass passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
