#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Writes what an installed cuweave offers to other builds, for both build
# systems (meson.build's custom target, the Makefile's rule), from one set of
# templates: OUTDIR/cuweave.pc (src/cuweave.pc.in), OUTDIR/cuweaveConfig.cmake
# and OUTDIR/cuweaveConfigVersion.cmake (src/cuweaveConfig*.cmake.in).
# Relocatable: paths are relative to the files' own directories
# (${pcfiledir}, CMAKE_CURRENT_LIST_DIR) when LIBDIR and INCLUDEDIR are under
# PREFIX (the .pc sits in LIBDIR/pkgconfig, the CMake files in
# LIBDIR/cmake/cuweave); absolute otherwise.
# Usage: gen-package-files.sh SOURCE_ROOT OUTDIR PREFIX LIBDIR INCLUDEDIR
set -eu
root=$1 out=$2 prefix=$3 libdir=$4 includedir=$5
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $includedir in /*) ;; *) includedir=$prefix/$includedir ;; esac
version=$(sh "$root/tools/version.sh")
major=${version%%.*}; minor=${version#*.}; minor=${minor%%.*}
somajor=$(sh "$root/tools/version.sh" --abi); somajor=${somajor%%.*}
libs_static="-ldl -lpthread -lstdc++ -lm"
rel() { realpath -m --relative-to="$1" "$2"; }
under() { case $2 in "$1"|"$1"/*) return 0 ;; *) return 1 ;; esac; }
if under "$prefix" "$libdir" && under "$prefix" "$includedir"; then
    pc_to_prefix=$(rel "$libdir/pkgconfig" "$prefix")
    cmake_to_prefix=$(rel "$libdir/cmake/cuweave" "$prefix")
    pc_libdir="\${prefix}/$(rel "$prefix" "$libdir")"
    pc_includedir="\${prefix}/$(rel "$prefix" "$includedir")"
    cmake_libdir="\${_cuweave_prefix}/$(rel "$prefix" "$libdir")"
    cmake_includedir="\${_cuweave_prefix}/$(rel "$prefix" "$includedir")"
else
    pc_to_prefix=$(rel "$libdir/pkgconfig" "$prefix")
    cmake_to_prefix=$(rel "$libdir/cmake/cuweave" "$prefix")
    pc_libdir=$libdir pc_includedir=$includedir cmake_libdir=$libdir cmake_includedir=$includedir
fi
# A value as sed's replacement: \, & and the delimiter | escaped (a path
# outside the prefix is written as it is).
esc() { printf '%s\n' "$1" | sed -e 's/[\\|&]/\\&/g'; }
mkdir -p "$out"
# One sed, so that its failure is the function's (and set -e's); the last two
# expressions: ${prefix}/. reads badly (a directory that is the prefix itself).
subst() {
    sed -e "s|@PC_TO_PREFIX@|$(esc "$pc_to_prefix")|g" -e "s|@PC_LIBDIR@|$(esc "$pc_libdir")|g" \
        -e "s|@PC_INCLUDEDIR@|$(esc "$pc_includedir")|g" -e "s|@CMAKE_TO_PREFIX@|$(esc "$cmake_to_prefix")|g" \
        -e "s|@CMAKE_LIBDIR@|$(esc "$cmake_libdir")|g" -e "s|@CMAKE_INCLUDEDIR@|$(esc "$cmake_includedir")|g" \
        -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" \
        -e "s|@SONAME@|libcuweave.so.$somajor|g" -e "s|@LIBS_STATIC@|$libs_static|g" \
        -e 's|/\.$||' -e 's|/\./|/|g' "$1"
}
for f in cuweave.pc cuweaveConfig.cmake cuweaveConfigVersion.cmake; do
    subst "$root/src/$f.in" > "$out/$f.tmp"
    mv "$out/$f.tmp" "$out/$f"
done
