#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Finds NVTX3's headers for cuweave's NVTX ranges (src/base/nvtx.hpp,
# docs/tracing.md "Nsight Systems"): both builds run it at configure time
# (meson.build, the Makefile).
#
#   find-nvtx.sh [--origin] DIR TOOLKIT_INCLUDE
#
# DIR: the directory given by hand (-Dnvtx_include, NVTX_INCLUDE; empty:
# search); it must hold nvtx3/nvToolsExt.h. Otherwise the first of:
#   1. the CUDA toolkit's: TOOLKIT_INCLUDE, $CUDA_HOME/include,
#      $CUDA_PATH/include, /usr/local/cuda/include;
#   2. the nvidia-nvtx wheel's (pip install nvidia-nvtx: nvidia/cu13/include;
#      nvidia-nvtx-cu12: nvidia/nvtx/include), in the packages of $PYTHON
#      (default python3) and of the developers' virtual environment that
#      tools/setup.sh fills ($CUWEAVE_PLOT_VENV, default
#      ${XDG_CACHE_HOME:-~/.cache}/cuweave-dev/plot-venv).
# Prints the directory (with --origin: where it came from, in words) and
# exits 0; prints nothing and exits 1 when none is found, 2 when DIR is given
# but holds no nvtx3/nvToolsExt.h.
set -u
origin=0
if [ "${1:-}" = "--origin" ]; then origin=1; shift; fi
given=${1:-}
toolkit=${2:-}

found() { # DIR ORIGIN
    if [ $origin -eq 1 ]; then echo "$2"; else echo "$1"; fi
    exit 0
}
has() { [ -n "$1" ] && [ -f "$1/nvtx3/nvToolsExt.h" ] && [ -d "$1/nvtx3/nvtxDetail" ]; }

if [ -n "$given" ]; then
    has "$given" && found "$given" "given: $given"
    echo "find-nvtx: $given has no nvtx3/nvToolsExt.h" >&2
    exit 2
fi
for d in "$toolkit" "${CUDA_HOME:+$CUDA_HOME/include}" "${CUDA_PATH:+$CUDA_PATH/include}" /usr/local/cuda/include; do
    has "$d" && found "$d" "CUDA toolkit: $d"
done
venv=${CUWEAVE_PLOT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuweave-dev/plot-venv}
for py in "${PYTHON:-python3}" "$venv/bin/python3"; do
    command -v "$py" >/dev/null 2>&1 || continue
    d=$("$py" - 2>/dev/null <<'PY'
import importlib.util, os
for mod in ("nvidia.cu13", "nvidia.nvtx"):  # nvidia-nvtx (CUDA 13 and later), nvidia-nvtx-cu12
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        continue
    for loc in (spec.submodule_search_locations or []) if spec else []:
        inc = os.path.join(loc, "include")
        if os.path.isfile(os.path.join(inc, "nvtx3", "nvToolsExt.h")):
            print(inc)
            raise SystemExit(0)
PY
    ) || d=""
    has "$d" && found "$d" "nvidia-nvtx wheel: $d"
done
exit 1
