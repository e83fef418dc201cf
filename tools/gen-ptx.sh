#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Regenerates ptx/cuweave_kernels.ptx (checked in) from ptx/cuweave_kernels.cu:
# the PTX a build machine without nvcc embeds in the library. Needs nvcc; run
# it after editing the .cu and commit both. tools/check-ptx.sh (a test in
# both builds) fails when they disagree.
set -eu
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
"$NVCC" -ptx -arch=compute_80 -o ptx/cuweave_kernels.ptx ptx/cuweave_kernels.cu
echo "wrote ptx/cuweave_kernels.ptx"
