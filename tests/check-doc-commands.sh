#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs every command the documentation tells a user to type, exactly as
# written (tools/doc-commands.py: the ```sh blocks of README.md, docs/*.md
# and bindings/python/README.md, in that order, in one shell), in a fresh
# copy of the tree with HOME in a scratch directory, so that installs into
# $HOME/.local and pip's files stay there. Fails on the first command that
# fails (the last "=== FILE:LINE" names its block), and when a command sits
# outside a ```sh block or a block is left out without a reason.
# Usage: check-doc-commands.sh SOURCE_ROOT   (CI: tools/test-all.sh; it
# builds and installs the library twice, so it is not in `meson test`)
set -u
root=$(cd "${1:-.}" && pwd)
python3 "$root/tools/doc-commands.py" "$root" lint || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/home"
# the tree as a clone has it (tracked files and new ones git does not ignore)
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/src" || exit 1
python3 "$root/tools/doc-commands.py" "$root" list
python3 "$root/tools/doc-commands.py" "$root" script > "$tmp/doc-commands.sh"
cd "$tmp/src" && HOME="$tmp/home" sh "$tmp/doc-commands.sh"
rc=$?
[ $rc -eq 0 ] && echo "doc commands: every runnable block ran" || echo "doc commands: FAILED (exit $rc) in the block above"
exit $rc
