#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs what building and testing cuweave needs on a fresh Debian (or
# Ubuntu) machine: a C/C++ toolchain, meson, ninja, pkg-config, CMocka,
# valgrind, python3-venv (the wheel's check; matplotlib's environment),
# doxygen (the API reference), cmake (the CMake consumer of the installed
# package), abigail-tools (abidw and abidiff: the ABI check against the last
# release, tools/abi-check.sh),
# clang with libFuzzer and the sanitizer runtimes for the fuzz
# targets (tools/fuzz.sh; Debian 12 packs those in libclang-rt-dev, older
# releases with clang itself), and FFmpeg's development packages (the
# FFmpeg example, tests and benchmark: docs/embedding.md, "Inside FFmpeg").
# Runs apt-get as root, or through sudo when not root. Idempotent.
# Waits for the package manager's lock when another apt or dpkg holds it (an
# unattended upgrade on a fresh machine): up to SETUP_LOCK_WAIT seconds
# (default 600), trying again every SETUP_LOCK_POLL seconds (default 5),
# before it gives up.
set -eu
pkgs="build-essential meson ninja-build pkg-config libcmocka-dev python3 python3-venv file valgrind clang doxygen cmake abigail-tools libavformat-dev libavcodec-dev libavutil-dev"
have_fuzzer() {
    f=$(clang -print-file-name="libclang_rt.fuzzer-$(uname -m).a" 2>/dev/null) && [ -f "$f" ]
}
# matplotlib for tools/trace_plot.py (its test renders PNGs from traces) and
# the nvidia-nvtx wheel (NVTX3's headers, for the NVTX ranges and their test,
# test_nvtx_cpu, where no CUDA toolkit is installed: tools/find-nvtx.sh looks
# there), from PyPI with pip into a virtual environment of its own,
# $CUWEAVE_PLOT_VENV (default ${XDG_CACHE_HOME:-~/.cache}/cuweave-dev/plot-venv:
# the developers' tools, beside the kernel cache's directory ~/.cache/cuweave,
# never in it; Debian's python3 is externally managed). SETUP_PLOT=0 skips it.
plot_env() {
    [ "${SETUP_PLOT:-1}" = 0 ] && return 0
    venv=${CUWEAVE_PLOT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/plot-venv}
    if "$venv/bin/python3" -c 'import matplotlib' >/dev/null 2>&1 \
        && "$venv/bin/pip" show nvidia-nvtx >/dev/null 2>&1; then
        echo "setup: matplotlib and nvidia-nvtx already in $venv"
        return 0
    fi
    python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib nvidia-nvtx \
        && echo "setup: installed matplotlib and nvidia-nvtx in $venv"
}
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && have_fuzzer && { plot_env; echo "setup: all of ($pkgs) and libFuzzer already installed"; exit 0; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# apt-get ARGS, again while the lock is held by another process (apt's own
# DPkg::Lock::Timeout covers dpkg's lock only, not the lists' lock of update).
apt() {
    waited=0 said=0 wait_max=${SETUP_LOCK_WAIT:-600} log=$(mktemp)
    while :; do
        if $SUDO apt-get -o DPkg::Lock::Timeout=5 "$@" 2>"$log"; then cat "$log" >&2; rm -f "$log"; return 0; fi
        if grep -qi 'could not get lock\|unable to lock\|unable to acquire the dpkg frontend lock\|is another process using it' "$log" \
            && [ "$waited" -lt "$wait_max" ]; then
            [ "$said" -eq 1 ] || { said=1; echo "setup: another process holds the package manager's lock; waiting (up to ${wait_max} s)" >&2; }
            sleep "${SETUP_LOCK_POLL:-5}"; waited=$((waited + ${SETUP_LOCK_POLL:-5}))
            continue
        fi
        cat "$log" >&2; rm -f "$log"
        return 1
    done
}
apt update -qq
[ -n "$missing" ] && apt install -y -qq --no-install-recommends $missing
if ! have_fuzzer; then
    apt install -y -qq --no-install-recommends libclang-rt-dev
    missing="$missing libclang-rt-dev"
fi
have_fuzzer || { echo "setup: clang finds no libFuzzer (libclang_rt.fuzzer-$(uname -m).a)"; exit 1; }
plot_env
echo "setup: installed$missing"
