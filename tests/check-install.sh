#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installing, using and uninstalling, for either build:
#   make:  make install into a prefix with LIBDIR=$prefix/lib64, and again
#          with DESTDIR; meson: meson install --destdir (a staged, moved
#          install: the .pc and the CMake package are relocatable);
#  - what is installed: the library (soname), the archive, the headers,
#    cuweave.pc, cuweaveConfig.cmake, the docs; cuweave-info runs from the
#    prefix and finds the library there (its rpath follows LIBDIR): exit 77
#    without a GPU, naming that library;
#  - a CMake project (tests/consumer/cmake): find_package(cuweave 0.3
#    CONFIG) gives cuweave::cuweave and cuweave::cuweave_static; both
#    programs build and run (0, or 77 without a GPU); find_package(cuweave
#    0.2) and (cuweave 1.0) are refused;
#  - pkg-config with the installed cuweave.pc: a program links and runs;
#  - uninstall (make uninstall; ninja uninstall) leaves no file, link or
#    directory under the prefix, and keeps the directories that were there
#    before install (empty ones too: /usr/local/bin on a fresh Debian);
#  - make refuses a DESTDIR with a space (before anything is made);
#  - the package files with a LIBDIR outside the prefix that holds sed's
#    special characters (& |) name it as it is.
# Usage: check-install.sh SOURCE_ROOT make BUILD_DIR
#        check-install.sh SOURCE_ROOT meson BUILD_DIR
set -u
root=$(cd "$1" && pwd) kind=$2 build=$(cd "$3" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2], got [$3]"; fail=1; fi; }
version=$(sh "$root/tools/version.sh")
abi=$(sh "$root/tools/version.sh" --abi)
so=libcuweave.so.${abi%%.*}
runs() { # WHAT PROGRAM: exit 0 or 77
    out=$("$2" 2>&1); rc=$?
    [ $rc -eq 77 ] && rc=0
    check "$1 runs (0, or 77 without a GPU)" 0 "$rc"
    [ $rc -eq 0 ] || echo "$out" | tail -5
}
use() { # PREFIX LIBDIR: what a user of the installed library does
    prefix=$1 libdir=$2
    for f in "$libdir/$so" "$libdir/libcuweave.a" "$libdir/pkgconfig/cuweave.pc" "$libdir/cmake/cuweave/cuweaveConfig.cmake" \
             "$libdir/cmake/cuweave/cuweaveConfigVersion.cmake" "$prefix/include/cuweave/cuweave.h" \
             "$prefix/include/cuweave/cpp/stream.hpp" "$prefix/bin/cuweave-info" "$prefix/share/doc/cuweave/README.md" \
             "$prefix/share/doc/cuweave/CHANGELOG.md"; do
        [ -e "$f" ] || { echo "FAIL: not installed: $f"; fail=1; }
    done
    out=$(CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 "$prefix/bin/cuweave-info"); rc=$?
    check "cuweave-info from the prefix: exit 77 without a driver" 77 "$rc"
    check "cuweave-info loads the prefix's library" "library: $libdir/$so" "$(echo "$out" | grep '^library:' | sed 's|/bin/\.\./|/|; s|/bin/|/|')"
    rm -rf "$tmp/cm"
    # CMake looks in PREFIX/lib/<arch>/cmake and PREFIX/lib/cmake; lib64 only
    # where the platform says so (not on Debian): there cuweave_DIR names it.
    case $libdir in
        "$prefix"/lib|"$prefix"/lib/*-linux-gnu) where=-DCMAKE_PREFIX_PATH="$prefix" ;;
        *) where=-Dcuweave_DIR="$libdir/cmake/cuweave" ;;
    esac
    cmake -S "$root/tests/consumer/cmake" -B "$tmp/cm" "$where" > "$tmp/cmake.log" 2>&1; rc=$?
    check "CMake: find_package(cuweave 0.3 CONFIG)" 0 "$rc"
    [ $rc -eq 0 ] || tail -20 "$tmp/cmake.log"
    check "CMake: the package found is the prefix's, version $version" 1 \
        "$(grep -c "cuweave $version from $libdir/cmake/cuweave" "$tmp/cmake.log")"
    cmake --build "$tmp/cm" > "$tmp/cmake-build.log" 2>&1; rc=$?
    check "CMake: cuweave::cuweave and cuweave::cuweave_static link" 0 "$rc"
    [ $rc -eq 0 ] || tail -20 "$tmp/cmake-build.log"
    runs "CMake consumer (shared)" "$tmp/cm/consumer"
    runs "CMake consumer (static)" "$tmp/cm/consumer_static"
    check "the static consumer has no libcuweave.so" 0 "$(ldd "$tmp/cm/consumer_static" | grep -c libcuweave)"
    for want in 0.2 1.0; do
        mkdir -p "$tmp/v$want"
        printf 'cmake_minimum_required(VERSION 3.16)\nproject(v C)\nfind_package(cuweave %s CONFIG REQUIRED)\n' "$want" \
            > "$tmp/v$want/CMakeLists.txt"
        cmake -S "$tmp/v$want" -B "$tmp/v$want/b" "$where" > "$tmp/v.log" 2>&1; rc=$?
        check "CMake: find_package(cuweave $want) refuses $version" "1 1" "$rc $(grep -c 'version: '"$version" "$tmp/v.log" | sed 's/[1-9][0-9]*/1/')"
    done
    cc -std=c11 "$root/tests/consumer/consumer.c" -o "$tmp/pc" $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs cuweave) \
        -Wl,-rpath,"$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=libdir cuweave)"; rc=$?
    check "pkg-config: cc \$(pkg-config --cflags --libs cuweave)" 0 "$rc"
    [ $rc -eq 0 ] && runs "the pkg-config program" "$tmp/pc"
}
left() { # DIR: what is left under it
    find "$1" -mindepth 1 2>/dev/null | sed "s|^$1/||" | sort | head -20
}
# The package files with a LIBDIR outside the prefix (written as it is, not
# relative) holding sed's special characters: verbatim, or a loud failure.
odd='/srv/a&b|c/lib64'
sh "$root/tools/gen-package-files.sh" "$root" "$tmp/gen" /opt/cw "$odd" /opt/cw/include > "$tmp/gen.log" 2>&1; rc=$?
check "gen-package-files.sh, LIBDIR $odd" 0 "$rc"
[ $rc -eq 0 ] || cat "$tmp/gen.log"
check "cuweave.pc names that LIBDIR" "libdir=$odd" "$(grep '^libdir=' "$tmp/gen/cuweave.pc" 2>/dev/null)"
check "cuweaveConfig.cmake names that LIBDIR" "set(_cuweave_libdir \"$odd\")" \
    "$(grep '^set(_cuweave_libdir' "$tmp/gen/cuweaveConfig.cmake" 2>/dev/null)"
# Directories that were there before the install (empty ones, as
# /usr/local/bin and /usr/local/include on a fresh Debian) are not the
# install's: uninstall keeps them. PREFIX: install, uninstall, then the list.
premade="bin include lib64 lib64/cmake lib64/pkgconfig share share/doc"
kept() { # PREFIX INSTALL UNINSTALL
    for d in $premade; do mkdir -p "$1/$d"; done
    eval "$2" > "$tmp/kept.log" 2>&1 && eval "$3" >> "$tmp/kept.log" 2>&1 || { tail -20 "$tmp/kept.log"; echo FAILED; }
    left "$1" | tr '\n' ' ' | sed 's/ $//'
}
case $kind in
make)
    p=$tmp/prefix
    make -s -C "$root" O="$build" install PREFIX="$p" LIBDIR="$p/lib64" > "$tmp/install.log" 2>&1; rc=$?
    check "make install PREFIX=... LIBDIR=\$prefix/lib64" 0 "$rc"
    [ $rc -eq 0 ] || tail -20 "$tmp/install.log"
    check "nothing in \$prefix/lib" "" "$(ls "$p/lib" 2>/dev/null)"
    use "$p" "$p/lib64"
    make -s -C "$root" O="$build" uninstall PREFIX="$p" LIBDIR="$p/lib64" > "$tmp/uninstall.log" 2>&1; rc=$?
    check "make uninstall" 0 "$rc"
    check "make uninstall leaves nothing under the prefix" "" "$(left "$p")"
    d=$tmp/dest
    make -s -C "$root" O="$build" install PREFIX=/opt/cw LIBDIR=/opt/cw/lib64 DESTDIR="$d" > "$tmp/install.log" 2>&1
    check "make install DESTDIR=: everything under DESTDIR" "opt" "$(ls "$d")"
    use "$d/opt/cw" "$d/opt/cw/lib64"
    make -s -C "$root" O="$build" uninstall PREFIX=/opt/cw LIBDIR=/opt/cw/lib64 DESTDIR="$d" > "$tmp/uninstall.log" 2>&1
    check "make uninstall DESTDIR=: nothing left under the prefix" "" "$(left "$d/opt/cw")"
    p=$tmp/premade
    check "make uninstall keeps the directories that were there before install" "$premade" \
        "$(kept "$p" "make -s -C '$root' O='$build' install PREFIX='$p' LIBDIR='$p/lib64'" \
            "make -s -C '$root' O='$build' uninstall PREFIX='$p' LIBDIR='$p/lib64'")"
    # make cannot carry a path with a space through its word lists and the
    # recipes' shell: refused before anything is made (meson's install can)
    junk=cw-check-install-$$
    make -s -C "$root" O="$build" install PREFIX=/opt/cw DESTDIR="$tmp/sp $junk" > "$tmp/space.log" 2>&1; rc=$?
    check "make install DESTDIR with a space: refused, naming it" "2 1" \
        "$rc $(grep -c "DESTDIR=\"$tmp/sp $junk\"" "$tmp/space.log" | sed 's/[1-9][0-9]*/1/')"
    check "make install DESTDIR with a space: nothing made" "" \
        "$(ls -d "$tmp/sp" "$root/$junk" "$build/$junk" 2>/dev/null)"
    rm -rf "$tmp/sp" "${root:?}/$junk" "${build:?}/$junk"
    ;;
meson)
    d=$tmp/dest
    prefix=$(meson introspect --buildoptions "$build" | python3 -c 'import json, sys; o = {x["name"]: x["value"] for x in json.load(sys.stdin)}; print(o["prefix"] + "\n" + o["libdir"])')
    p=$(echo "$prefix" | sed -n 1p) l=$(echo "$prefix" | sed -n 2p)
    case $l in /*) ;; *) l=$p/$l ;; esac
    DESTDIR=$d meson install -C "$build" --no-rebuild > "$tmp/install.log" 2>&1; rc=$?
    check "meson install --destdir" 0 "$rc"
    [ $rc -eq 0 ] || tail -20 "$tmp/install.log"
    use "$d$p" "$d$l"
    DESTDIR=$d ninja -C "$build" uninstall > "$tmp/uninstall.log" 2>&1; rc=$?
    check "ninja uninstall" 0 "$rc"
    check "ninja uninstall leaves nothing under the prefix" "" "$(left "$d$p")"
    d=$tmp/premade
    lib=${l#"$p"/}
    premade="bin include $lib $lib/pkgconfig share share/doc"
    check "ninja uninstall keeps the directories that were there before install" "$(echo "$premade" | tr ' ' '\n' | \
        awk -F/ '{ p = ""; for (i = 1; i <= NF; i++) { p = p (i > 1 ? "/" : "") $i; print p } }' | sort -u | tr '\n' ' ' | \
        sed 's/ $//')" "$(kept "$d$p" "DESTDIR='$d' meson install -C '$build' --no-rebuild" "DESTDIR='$d' ninja -C '$build' uninstall")"
    ;;
*) echo "usage: check-install.sh SOURCE_ROOT make|meson BUILD_DIR"; exit 2 ;;
esac
exit $fail
