#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Proves that the checked-in ptx/cuweave_kernels.ptx is what nvcc makes of
# ptx/cuweave_kernels.cu (comment lines, which carry the compiler's build id,
# aside). Exits 77 (skip) when there is no nvcc.
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })}
if [ -z "$NVCC" ]; then
    echo "SKIP: no nvcc here: the checked-in PTX is used as is"
    exit 77
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if ! "$NVCC" -ptx -arch=compute_80 -o "$tmp" ptx/cuweave_kernels.cu; then
    echo "FAIL: nvcc could not compile ptx/cuweave_kernels.cu"
    exit 1
fi
a=$(grep -v '^//' "$tmp" | cksum)
b=$(grep -v '^//' ptx/cuweave_kernels.ptx | cksum)
if [ "$a" != "$b" ]; then
    echo "FAIL: ptx/cuweave_kernels.ptx is stale: run tools/gen-ptx.sh and commit the result ($("$NVCC" --version | tail -1))"
    exit 1
fi
echo "PASS: ptx/cuweave_kernels.ptx matches ptx/cuweave_kernels.cu ($("$NVCC" --version | tail -1))"
