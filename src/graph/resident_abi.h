/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave graph layer: the memory layout shared by the resident loop's host code
 * (src/graph/resident_*.cpp) and its kernels (ptx/cuweave_kernels.cu). Plain C so
 * that both compilers read the same definition.
 */
#ifndef CUWEAVE_RESIDENT_ABI_H
#define CUWEAVE_RESIDENT_ABI_H

#include "../../include/cuweave/resident_device.h"

/* The layout itself (cw_res_host, cw_res_dev, CW_RES_*) is in
 * resident_device.h, whose cw_resident_begin and cw_resident_end (gate
 * CW_RESIDENT_GATE_BEGIN_END) use it in the workload's kernels. */

/* Trace (cw_resident_settings.trace): each stage has two words in mapped
 * host memory, marks[2 * i] when it began and marks[2 * i + 1] when it
 * ended, both values of d->trace_clock (the global timer's ns, made
 * unique); a stage that began after it last ended was running when the loop
 * faulted. */
#define CW_RES_MAX_STAGES 1024u

#endif /* CUWEAVE_RESIDENT_ABI_H */
