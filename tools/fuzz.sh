#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds the libFuzzer targets of tests/fuzz/ (clang; the library and the
# targets with ASan, UBSan and libFuzzer's coverage: meson -Dfuzz=true in
# build/fuzz) and runs each for SECONDS (default 20) over its seed corpus
# tests/fuzz/corpus/<target>/, which is only read: what a run finds goes to
# build/fuzz-corpus/<target>/ (kept, and read again by the next run). A
# crash, leak, sanitizer report, failed check or timeout ends the target's
# run and counts as a failure; its input is kept as
# build/fuzz-artifacts/<target>/crash-* (or leak-*, timeout-*), to be run
# again with: build/fuzz/tests/fuzz/<target> FILE.
# Ends with one line: "fuzz: N passed, N failed".
#
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (docs/testing.md)
set -u
cd "$(dirname "$0")/.."
secs=${1:-20}
[ $# -gt 0 ] && shift
targets=${*:-"fuzz_cache_file fuzz_options fuzz_env fuzz_settings fuzz_comm_hello fuzz_comm_id fuzz_comm_file fuzz_share_handle"}
build=build/fuzz
pass=0 failed=0

if [ ! -d "$build" ]; then
    CC=clang CXX=clang++ meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dtests=false -Dexamples=false -Dbench=false || { echo "fuzz: 0 passed, 1 failed (setup)"; exit 1; }
fi
ninja -C "$build" || { echo "fuzz: 0 passed, 1 failed (build)"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
bin=$build/tests/fuzz
for t in $targets; do
    corpus=build/fuzz-corpus/$t art=build/fuzz-artifacts/$t log=build/fuzz-$t.log
    mkdir -p "$corpus" "$art"
    # the new corpus first: libFuzzer adds what it finds to the first directory
    CUWEAVE_LIBCUDA=$bin/libfakecuda.so CUWEAVE_LIBNVRTC=$bin/libfakenvrtc.so \
        "$bin/$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$corpus" "tests/fuzz/corpus/$t" > "$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    done_line=$(grep -a 'DONE' "$log" | tail -1)
    corp=$(echo "$done_line" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1))
        echo "PASS $t: ${secs} s, ${runs:-?} runs, corpus ${corp:-?} inputs"
    else
        failed=$((failed + 1))
        echo "FAIL $t (exit $rc); input kept in $art/; the end of $log:"
        grep -a -v -E '^#[0-9]+ +(NEW|REDUCE|pulse|RELOAD)' "$log" | tail -30
    fi
done
echo "fuzz: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
