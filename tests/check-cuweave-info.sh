#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# cuweave-info on the CPU: without a driver and with the fake driver.
# Usage: check-cuweave-info.sh CUWEAVE_INFO LIBFAKECUDA SOURCE_ROOT
#  - no driver: exit 77; the text names the library's version (version.h),
#    the NVRTC line, "no usable GPU (CW_ERROR_NO_DRIVER)" and the verdict;
#    --json: the same exit, exactly the documented keys, gpu_usable false,
#    driver null, no devices;
#  - the fake driver with two devices and every feature: exit 0; two devices
#    of 132 SMs, green partitions of 8 in steps of 8, the resident loop and
#    green contexts available; without conditional nodes the resident loop
#    is not;
#  - the kernel cache, through the library (cw_jit_cache_get_info): with
#    CUWEAVE_CACHE_DIR holding two entries of 100 and 50 bytes, a file of
#    another name and a directory of files (a virtual environment someone
#    put there), 2 files, 150 bytes and the bound (256 MiB); the text says
#    "2 entries"; --clear-cache removes the two entries and nothing else
#    (exit 0, "removed 2 entries"); "off" gives a null directory;
#  - a bad argument: exit 2.
set -u
info=$1 fake=$2 root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2], got [$3]"; fail=1; fi
}
vnum() { sed -n "s/^#define $1 \([0-9]*\).*/\1/p" "$root/include/cuweave/version.h"; }
version="$(vnum CW_VERSION_MAJOR).$(vnum CW_VERSION_MINOR).$(vnum CW_VERSION_PATCH)"
# json FILE PYTHON-EXPRESSION (of j, the parsed object): prints its value
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

out=$(CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 "$info"); rc=$?
check "no driver: exit 77" 77 "$rc"
check "no driver: the library's version" "cuweave $version" "$(echo "$out" | head -1 | cut -d' ' -f1-2)"
check "no driver: an NVRTC line" 1 "$(echo "$out" | grep -c '^NVRTC: ')"
check "no driver: the reason" 1 "$(echo "$out" | grep -c '^no usable GPU (CW_ERROR_NO_DRIVER): ')"
check "no driver: the verdict" "verdict: no usable GPU: neither the resident loop nor green contexts" \
    "$(echo "$out" | tail -1)"

CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 "$info" --json > "$tmp/j"; rc=$?
check "no driver --json: exit 77" 77 "$rc"
check "--json: exactly the documented keys" \
    "abi builtin_kernels cuweave devices driver features gpu_usable kernel_cache library nccl nvrtc reason resident_loop status verdict" \
    "$(json "$tmp/j" '" ".join(sorted(j))')"
check "no driver --json: values" "$version False None CW_ERROR_NO_DRIVER 0" \
    "$(json "$tmp/j" '"%s %s %s %s %d" % (j["cuweave"], j["gpu_usable"], j["driver"], j["status"], len(j["devices"]))')"

CUWEAVE_LIBCUDA=$fake FAKE_CUDA_DEVICES=2 FAKE_CUDA_FEATURES=all "$info" --json > "$tmp/j"; rc=$?
check "fake driver --json: exit 0" 0 "$rc"
check "fake driver: driver, devices, SMs, partitions" "13.0 2 132 132 8 8 True" \
    "$(json "$tmp/j" '"%s %d %d %d %d %d %s" % (j["driver"], len(j["devices"]), j["devices"][0]["sms"], j["devices"][1]["sms"], j["devices"][0]["green_contexts"]["min_partition"], j["devices"][0]["green_contexts"]["granularity"], j["resident_loop"])')"
check "fake driver: device keys" \
    "compute copy_engines green_contexts memory_bytes memory_pools name ordinal pci sms stream_mem_ops_64 stream_priorities" \
    "$(json "$tmp/j" '" ".join(sorted(j["devices"][0]))')"
check "fake driver: the verdict" "resident loop available; green contexts available" "$(json "$tmp/j" 'j["verdict"]')"
out=$(CUWEAVE_LIBCUDA=$fake FAKE_CUDA_DEVICES=2 FAKE_CUDA_FEATURES=all "$info"); rc=$?
check "fake driver text: exit 0" 0 "$rc"
check "fake driver text: both devices" 2 "$(echo "$out" | grep -c '^device [01]: cuweave fake device, compute 9.0, 132 SMs')"
check "fake driver text: green partitions" 2 "$(echo "$out" | grep -c 'green contexts: partitions of 8 SMs or more, in steps of 8')"
CUWEAVE_LIBCUDA=$fake "$info" --json > "$tmp/j"
check "no conditional nodes: no resident loop" "False resident loop not available (needs conditional nodes, CUDA 12.3); green contexts available" \
    "$(json "$tmp/j" '"%s %s" % (j["resident_loop"], j["verdict"])')"

mkdir -p "$tmp/cache/plot-venv/lib"
chmod 700 "$tmp/cache"
e1=$tmp/cache/$(printf '%064d' 1).cwk e2=$tmp/cache/$(printf '%064d' 2).cwk
head -c 100 /dev/zero > "$e1"; head -c 50 /dev/zero > "$e2"
head -c 4000 /dev/zero > "$tmp/cache/plot-venv/lib/matplotlib.so"; head -c 7 /dev/zero > "$tmp/cache/notes.txt"
CUWEAVE_CACHE_DIR=$tmp/cache CUWEAVE_LIBCUDA=$fake "$info" --json > "$tmp/j"
check "the cache's entries, bytes and bound" "$tmp/cache True True 2 150 268435456" \
    "$(json "$tmp/j" '"%s %s %s %d %d %d" % tuple(j["kernel_cache"][k] for k in ("dir", "exists", "trusted", "files", "bytes", "max_bytes"))')"
CUWEAVE_CACHE_DIR=$tmp/cache CUWEAVE_LIBCUDA=$fake "$info" | grep -q "^kernel cache: $tmp/cache (2 entries, 0.0 MiB of at most 256 MiB)"
check "the cache, text" 0 $?
out=$(CUWEAVE_CACHE_DIR=$tmp/cache "$info" --clear-cache); rc=$?
check "--clear-cache" "0 kernel cache: $tmp/cache: removed 2 entries (0.0 MiB)" "$rc $out"
check "--clear-cache removed the entries and nothing else" "no no yes yes" \
    "$(for f in "$e1" "$e2" "$tmp/cache/plot-venv/lib/matplotlib.so" "$tmp/cache/notes.txt"; do [ -e "$f" ] && printf 'yes ' || printf 'no '; done | sed 's/ $//')"
CUWEAVE_CACHE_DIR=off CUWEAVE_LIBCUDA=$fake "$info" --json > "$tmp/j"
check "the cache off" None "$(json "$tmp/j" 'j["kernel_cache"]["dir"]')"
CUWEAVE_CACHE_DIR=off CUWEAVE_LIBCUDA=$fake "$info" | grep -q '^kernel cache: off'; check "the cache off, text" 0 $?

"$info" --bogus 2>/dev/null; check "a bad argument: exit 2" 2 $?
exit $fail
