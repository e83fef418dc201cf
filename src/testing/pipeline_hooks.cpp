/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave testing: hooks into fused pipelines (pipeline_hooks.h). Not
// exported from the shared library (tests link libcuweave.a).
#include <new>
#include <stdlib.h>

#include "core/handle.hpp"
#include "flow/fused.hpp"
#include "testing/pipeline_hooks.h"

extern "C" {

void *cwi_pipeline_fused_plan(cw_pipeline *p, cw_resident *r, const cw_resident_fused *f,
                              const cw_resident_fused **out) {
    if (!p || !r || !f || !out || !cw::live(p) || !cw::live(r)) return nullptr;
    cw::flow::FusedPlan *plan = static_cast<cw::flow::FusedPlan *>(calloc(1, sizeof *plan));
    if (!plan) return nullptr;
    if (cw::flow::fused_plan(p, r, f, plan) != CW_SUCCESS) {
        free(plan);
        return nullptr;
    }
    *out = &plan->f;
    return plan;
}

void cwi_pipeline_fused_free(void *plan) {
    if (!plan) return;
    cw::flow::fused_plan_free(static_cast<cw::flow::FusedPlan *>(plan));
    free(plan);
}

int cwi_pipeline_stage_table(cw_pipeline *p, cw_devptr *dptr, size_t *words) {
    if (!p || !cw::live(p) || !p->stage_table) return -1;
    *dptr = p->stage_table;
    *words = p->stage_table_words;
    return 0;
}

}  // extern "C"
