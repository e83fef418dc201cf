#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The test command (README, .ci/run): builds cuweave with meson and with the
# Makefile and runs every test with each; then runs the CPU tests again
# built with AddressSanitizer + UndefinedBehaviorSanitizer, built with
# ThreadSanitizer, and under valgrind memcheck; builds libcuweave.so with
# libstdc++ linked in (both builds' option) and checks that it needs none;
# builds the libFuzzer targets with clang and runs each for FUZZ_SECONDS
# (default 20) over its corpus (tools/fuzz.sh).
# GPU tests run where there is a GPU and skip (exit 77) where there is none.
# Every result goes to build/test-results.txt; tools/test-summary.py counts
# each test (a program, a script check, a fuzz target, a Python test module)
# once however many steps ran it, names each skipped test once with its
# reason, and ends with one line: "cuweave: N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
# tools/setup.sh installs matplotlib: its PNG test (trace_plot) must not skip here.
export CUWEAVE_TESTS_NEED_MATPLOTLIB="${CUWEAVE_TESTS_NEED_MATPLOTLIB:-1}"
# and the nvidia-nvtx wheel's headers: the NVTX ranges are built, and their
# test (test_nvtx_cpu, an NVTX tool of its own) must not skip either.
export CUWEAVE_TESTS_NEED_NVTX="${CUWEAVE_TESTS_NEED_NVTX:-1}"
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p build
results=build/test-results.txt
: > "$results"
summary() { python3 tools/test-summary.py "$@" >> "$results"; }
fail_step() { # STEP WHY: a step that could not run its tests counts as a failed test
    summary add "$1" "step:$1" FAIL "$2"
}

add_meson_counts() { # STEP BUILD_DIR
    if [ -f "$2/meson-logs/testlog.json" ]; then summary meson "$1" "$2/meson-logs/testlog.json";
    else fail_step "$1" "no $2/meson-logs/testlog.json"; fi
}

step() { echo; echo "=== $*"; }

step "meson build + all tests"
if meson setup --reconfigure build/meson >/dev/null 2>&1 || meson setup build/meson; then :; fi
if ninja -C build/meson; then
    meson test -C build/meson --print-errorlogs 2>&1 | tee build/meson-test.log
    add_meson_counts meson build/meson
else
    fail_step meson "the meson build failed"
fi

step "Makefile build + all tests"
if make -j"$jobs" O=build/make; then
    make O=build/make check 2>&1 | tee build/make-check.log
    if grep -q '^make: [0-9]* passed' build/make-check.log; then summary lines make build/make-check.log;
    else fail_step make "make check did not run its tests"; fi
else
    fail_step make "the Makefile build failed"
fi

step "Python bindings (unittest, fake driver)"
if CUWEAVE_TESTS_NEED_FAKE=1 CUWEAVE_LIBRARY=build/make/libcuweave.so.2 CUWEAVE_FAKE_DRIVER=build/make/tests/libfakecuda.so \
    python3 -m unittest discover -s bindings/python/tests -v > build/python-test.log 2>&1; then
    summary unittest python build/python-test.log 0; tail -3 build/python-test.log
else
    summary unittest python build/python-test.log 1; cat build/python-test.log
fi

step "Python types: mypy --strict over the package and its examples (mypy from PyPI, in a venv of its own)"
# $CUWEAVE_MYPY_VENV (default ${XDG_CACHE_HOME:-~/.cache}/cuweave-dev/mypy-venv, beside the kernel cache's directory, not in it), made and filled once; mypy is pinned so that a
# new release cannot fail a run that changed nothing.
mypy_venv=${CUWEAVE_MYPY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/mypy-venv}
mypy_pin=mypy==2.4.1
if ! "$mypy_venv/bin/python3" -c 'import mypy.version, sys; sys.exit(mypy.version.__version__ != sys.argv[1])' \
        "${mypy_pin#mypy==}" >/dev/null 2>&1; then
    python3 -m venv "$mypy_venv" > build/mypy.log 2>&1 && "$mypy_venv/bin/pip" install -q "$mypy_pin" >> build/mypy.log 2>&1
fi
if "$mypy_venv/bin/python3" -m mypy --version >/dev/null 2>&1; then
    if "$mypy_venv/bin/python3" -m mypy --strict --config-file bindings/python/mypy.ini \
        bindings/python/cuweave bindings/python/examples > build/mypy.log 2>&1; then
        summary add python-types mypy_strict PASS "$(tail -1 build/mypy.log)"; tail -1 build/mypy.log
    else
        summary add python-types mypy_strict FAIL "$(tail -1 build/mypy.log)"; tail -40 build/mypy.log
    fi
else
    fail_step python-types "mypy could not be installed into $mypy_venv (build/mypy.log)"; tail -20 build/mypy.log
fi

step "Python wheel: sdist and a wheel built from it by meson-python, auditwheel show, twine check; installed into a fresh venv, imported with no variable set, the Python tests against it (tests/check-wheel.sh)"
if sh tests/check-wheel.sh . build/make/tests > build/wheel.log 2>&1; then
    summary add python-wheel python_wheel PASS; grep -E '^(wheel|import cuweave|the bundled|the newest)' build/wheel.log
else
    summary add python-wheel python_wheel FAIL; tail -60 build/wheel.log
fi

step "ABI against the last release (abi/), abidiff: an incompatible change needs a new soname, every change a CHANGELOG.md line (tests/check-abi.sh)"
if sh tests/check-abi.sh . build/make/libcuweave.so.2.0.0 > build/abi.log 2>&1; then
    summary add abi abi_check PASS; cat build/abi.log
else
    summary add abi abi_check FAIL; tail -60 build/abi.log
fi

step "install, use (cuweave-info, a CMake consumer, pkg-config) and uninstall: make into a lib64 prefix and with DESTDIR, meson with --destdir (tests/check-install.sh)"
for b in "make build/make" "meson build/meson"; do
    set -- $b
    if sh tests/check-install.sh . "$1" "$2" > "build/install-$1.log" 2>&1; then
        summary add install "install_$1" PASS; tail -3 "build/install-$1.log"
    else
        summary add install "install_$1" FAIL; grep -v '^ok:' "build/install-$1.log" | tail -40
    fi
done

step "cuweave as a meson subproject with a version constraint; meson dist's tarball name (tests/check-subproject.sh)"
if sh tests/check-subproject.sh . > build/subproject.log 2>&1; then
    summary add subproject meson_subproject PASS; tail -3 build/subproject.log
else
    summary add subproject meson_subproject FAIL; grep -v '^ok:' build/subproject.log | tail -40
fi

step "links and anchors of README.md, CHANGELOG.md and docs/ (tools/check-links.py)"
if python3 tools/check-links.py . > build/links.log 2>&1; then
    summary add links doc_links PASS; tail -1 build/links.log
else
    summary add links doc_links FAIL; tail -40 build/links.log
fi

step "API reference: Doxygen over the public headers, warnings as errors (tools/api-docs.sh)"
if sh tools/api-docs.sh . build/api > build/api-docs.log 2>&1; then
    summary add api-docs api_docs PASS; tail -1 build/api-docs.log
else
    summary add api-docs api_docs FAIL; tail -40 build/api-docs.log
fi

step "libstdc++ linked in: meson -Dstatic_libstdcxx=true (CPU tests), make STATIC_LIBSTDCXX=1"
if { [ -d build/nostdcxx ] || meson setup build/nostdcxx -Dstatic_libstdcxx=true -Dbench=false; } \
    && ninja -C build/nostdcxx; then
    meson test -C build/nostdcxx --suite cpu --print-errorlogs 2>&1 | tee build/nostdcxx-test.log
    add_meson_counts nostdcxx build/nostdcxx
else
    fail_step nostdcxx "the meson -Dstatic_libstdcxx=true build failed"
fi
if make -j"$jobs" O=build/make-nostdcxx STATIC_LIBSTDCXX=1 lib >/dev/null \
    && sh tests/check-no-libstdcxx.sh build/make-nostdcxx/libcuweave.so.2; then
    summary add make-nostdcxx no_libstdcxx_make PASS; echo "PASS make STATIC_LIBSTDCXX=1: no libstdc++"
else
    summary add make-nostdcxx no_libstdcxx_make FAIL; echo "FAIL make STATIC_LIBSTDCXX=1: no libstdc++"
fi

step "every command of README.md, docs/ and bindings/python/README.md, as written (tests/check-doc-commands.sh)"
if sh tests/check-doc-commands.sh . > build/doc-commands.log 2>&1; then
    summary add doc-commands doc_commands PASS; tail -1 build/doc-commands.log
else
    summary add doc-commands doc_commands FAIL "$(grep '^=== ' build/doc-commands.log | tail -1)"; tail -40 build/doc-commands.log
fi

step "ASan + UBSan build, CPU tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if { [ -d build/asan ] || meson setup build/asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug; } \
    && ninja -C build/asan; then
    meson test -C build/asan --suite cpu --print-errorlogs 2>&1 | tee build/asan-test.log
    add_meson_counts asan build/asan
else
    fail_step asan "the ASan + UBSan build failed"
fi

step "ThreadSanitizer build, CPU tests"
if { [ -d build/tsan ] || meson setup build/tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug; } \
    && ninja -C build/tsan; then
    TSAN_OPTIONS=halt_on_error=1 meson test -C build/tsan --suite cpu --print-errorlogs 2>&1 | tee build/tsan-test.log
    add_meson_counts tsan build/tsan
else
    fail_step tsan "the ThreadSanitizer build failed"
fi

step "valgrind memcheck, CPU tests (Makefile build)"
if command -v valgrind >/dev/null 2>&1; then
    for t in "build/make/tests/test_api" "build/make/tests/test_nodriver" \
             "build/make/tests/test_stream_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_future_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_multi_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_handles_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_model_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_trace_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_comm_rank_cpu build/make/tests/libfakecuda.so" \
             "build/make/tests/test_frame_cost_cpu build/make/tests/libfakecuda.so"; do
        if valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect -q $t \
            > build/valgrind.log 2>&1; then
            summary add valgrind "valgrind:${t%% *}" PASS; echo "PASS valgrind $t"
        else
            summary add valgrind "valgrind:${t%% *}" FAIL; echo "FAIL valgrind $t"; grep '^==' build/valgrind.log | head -40
        fi
    done
else
    fail_step valgrind "valgrind is not installed (sh tools/setup.sh)"
fi

step "libFuzzer targets (clang, ASan + UBSan): tools/fuzz.sh, ${FUZZ_SECONDS:-20} s each"
if command -v clang >/dev/null 2>&1; then
    sh tools/fuzz.sh "${FUZZ_SECONDS:-20}" 2>&1 | tee build/fuzz.log
    if grep -q '^fuzz: [0-9]* passed' build/fuzz.log; then
        sed 's/^\(PASS\|FAIL\) /\1 fuzz:/' build/fuzz.log > build/fuzz-lines.log
        summary lines fuzz build/fuzz-lines.log
        grep -q '^fuzz: 0 passed, [0-9]* failed' build/fuzz.log && fail_step fuzz "no fuzz target ran: $(grep '^fuzz:' build/fuzz.log | tail -1)"
    else fail_step fuzz "tools/fuzz.sh printed no tally"; fi
else
    fail_step fuzz "clang is not installed (sh tools/setup.sh)"
fi

step "summary: each test counted once (build/test-results.txt has every run)"
python3 tools/test-summary.py report "$results"
