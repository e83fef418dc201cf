#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The directories of the Makefile's install and uninstall, so that uninstall
# removes only directories that install made (as meson's does), never one
# that was there before (an empty /usr/local/bin or /usr/local/include on a
# fresh Debian, a lib64 the system made):
#   install-dirs.sh make MANIFEST DIR...
#       makes each DIR and its missing parents (install -d), and adds each
#       directory it made to MANIFEST (one a line, kept across installs; the
#       paths as made, DESTDIR included);
#   install-dirs.sh remove MANIFEST [OWN_DIR...]
#       removes MANIFEST, then, deepest first, each directory it lists and
#       each OWN_DIR (cuweave's own, as $INCLUDEDIR/cuweave: removed even
#       when an older install left no list) that is empty.
# Usage: the Makefile's install and uninstall.
set -eu
mode=$1 manifest=$2
shift 2
case $mode in
make)
    made=
    for d in "$@"; do
        p=$d
        while [ ! -d "$p" ]; do
            made="$made$p
"
            p=$(dirname "$p")
        done
        install -d "$d"
    done
    { if [ -f "$manifest" ]; then cat "$manifest"; fi; printf '%s' "$made"; } | sed '/^$/d' | sort -u > "$manifest.tmp"
    mv "$manifest.tmp" "$manifest"
    ;;
remove)
    list=
    if [ -f "$manifest" ]; then list=$(cat "$manifest"); fi
    rm -f "$manifest"
    { printf '%s\n' "$list"; for d in "$@"; do printf '%s\n' "$d"; done; } | sed '/^$/d' | sort -u |
        awk '{ n = gsub("/", "/"); print n "\t" $0 }' | sort -rn | cut -f2- |
        while IFS= read -r d; do
            if [ -d "$d" ] && rmdir "$d" 2>/dev/null; then echo "rmdir $d"; fi
        done
    ;;
*)
    echo "usage: install-dirs.sh make|remove MANIFEST DIR..." >&2
    exit 2
    ;;
esac
