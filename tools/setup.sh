#!/bin/sh
# Installs what building and testing cuweave needs on a fresh Debian (or
# Ubuntu) machine: a C/C++ toolchain, meson, ninja, pkg-config, CMocka,
# valgrind, and clang with libFuzzer and the sanitizer runtimes for the fuzz
# targets (tools/fuzz.sh; Debian 12 packs those in libclang-rt-dev, older
# releases with clang itself).
# Runs apt-get as root, or through sudo when not root. Idempotent.
set -eu
pkgs="build-essential meson ninja-build pkg-config libcmocka-dev python3 file valgrind clang"
have_fuzzer() {
    f=$(clang -print-file-name="libclang_rt.fuzzer-$(uname -m).a" 2>/dev/null) && [ -f "$f" ]
}
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && have_fuzzer && { echo "setup: all of ($pkgs) and libFuzzer already installed"; exit 0; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
[ -n "$missing" ] && $SUDO apt-get install -y -qq --no-install-recommends $missing
if ! have_fuzzer; then
    $SUDO apt-get install -y -qq --no-install-recommends libclang-rt-dev
    missing="$missing libclang-rt-dev"
fi
have_fuzzer || { echo "setup: clang finds no libFuzzer (libclang_rt.fuzzer-$(uname -m).a)"; exit 1; }
echo "setup: installed$missing"
