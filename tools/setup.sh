#!/bin/sh
# Installs what building and testing cuweave needs on a fresh Debian (or
# Ubuntu) machine: a C/C++ toolchain, meson, ninja, pkg-config, CMocka,
# valgrind.
# Runs apt-get as root, or through sudo when not root. Idempotent.
set -eu
pkgs="build-essential meson ninja-build pkg-config libcmocka-dev python3 file valgrind"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && { echo "setup: all of ($pkgs) already installed"; exit 0; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
echo "setup: installed$missing"
