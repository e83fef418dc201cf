/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave testing: hooks into fused pipelines (cw_pipeline_make_fused), for
 * tests that link libcuweave.a (not exported from the shared library).
 */
#ifndef CUWEAVE_TESTING_PIPELINE_HOOKS_H
#define CUWEAVE_TESTING_PIPELINE_HOOKS_H

#include <stddef.h>

#include "cuweave/cuweave.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plan cw_pipeline_make_fused(p, r, f) would hand to r, made as it
 * makes it but compiling and allocating nothing: *out is the
 * cw_resident_fused the loop would get (its source the caller's and the
 * generated functions, its stage_defs in the order they run with their
 * deps, user 0: the table is not made), owned by the returned plan (free
 * it with cwi_pipeline_fused_free, which accepts NULL). NULL when refused
 * (cw_last_error says why). */
void *cwi_pipeline_fused_plan(cw_pipeline *p, cw_resident *r, const cw_resident_fused *f,
                              const cw_resident_fused **out);
void cwi_pipeline_fused_free(void *plan);

/* The table of port addresses a fused pipeline's stages read (the loop's
 * user pointer) and its size in 64-bit words: per stage, in the order they
 * run, its user, then its ports' memory in the order they were declared.
 * 0, or -1 when p is not live or has no table yet. */
int cwi_pipeline_stage_table(cw_pipeline *p, cw_devptr *dptr, size_t *words);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_TESTING_PIPELINE_HOOKS_H */
