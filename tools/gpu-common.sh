# SPDX-License-Identifier: BSD-2-Clause
# Sourced by tools/gpu-*.sh (bash).
#
# cw_setup ARGS...: `meson setup ARGS` of a fresh build-gpu/ (its output on
# stdout, kept in build-gpu/setup-output.txt), or, with CW_KEEP_BUILD=1 and a
# build-gpu/ an earlier script configured, that one kept (its setup output
# again): one device call builds once for several scripts in a row.
cw_setup() {
    if [ -n "${CW_KEEP_BUILD:-}" ] && [ -f build-gpu/build.ninja ]; then
        cat build-gpu/setup-output.txt 2>/dev/null
        echo "(build-gpu kept: CW_KEEP_BUILD)"
    else
        rm -rf build-gpu
        local log rc
        log=$(mktemp)
        meson setup "$@" > "$log" 2>&1
        rc=$?
        cat "$log"
        cp "$log" build-gpu/setup-output.txt 2>/dev/null
        rm -f "$log"
        return $rc
    fi
}
