/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: fused pipelines (cw_operator_create_stage,
// cw_pipeline_make_fused). An operator made as a stage has no callbacks:
// it is a device function of the resident loop's tile dataflow kernel
// (graph/resident.hpp, CW_FUSED_DATAFLOW). fused_stage.cpp keeps the
// stage (copied and checked when the operator is made); fused_pipeline.cpp
// turns a pipeline of stages into the loop's plan: the stages in
// topological order, a dependency per connection, the generated functions
// that hand each stage its ports' memory (read from a table in device
// memory, the loop's user pointer, so that the source, and the kernel
// cache's key, do not depend on addresses), and the table itself.
//
// The api layer compiles the plan's source (the jit layer) between
// fused_plan and fused_memory, and hands the module to the graph layer.
#pragma once

#include "flow/flow.hpp"

namespace cw {
namespace flow {

// One cw_port_read, copied.
struct StageRead {
    char port[CW_NAME_MAX + 1];
    uint32_t read;      // CW_FUSED_READ_*
    uint32_t radius;
    uint32_t num, den;  // as given (0 and 0: 1/1)
    bool previous;
    char *function;     // CW_FUSED_READ_FUNCTION, else NULL
};

// An operator's stage (cw_operator_stage), copied and checked.
struct Stage {
    char *function;
    CUdeviceptr user;
    uint32_t tiles, size[2], tile[2];
    uint32_t tiles_x, tiles_y;  // its tile grid
    uint32_t threads, shared_bytes;
    uint32_t nreads;
    StageRead *reads;
};

// ---- fused_stage.cpp ----
// Makes a stage operator (its settings the defaults, no callbacks); the
// name is checked by the caller.
cw_status stage_create(const char *name, const cw_operator_stage *s, cw_operator **out);
void stage_free(Stage *s);
// The read of input `port` of stage operator op, or NULL (op not a stage,
// the port not read).
const StageRead *stage_read(const cw_operator *op, const char *port);
// Whether a connection into op's `port` orders op after its producer (not
// when op is a stage reading that port with `previous`).
bool connection_orders(const cw_operator *op, const char *port);
// Refuses a pipeline holding a stage operator, for `call` (what needs
// every operator's compute).
cw_status refuse_stages(const cw_pipeline *p, const char *call);

// ---- fused_pipeline.cpp ----
struct FusedPlan {
    cw_resident_fused f;     // what the loop gets (pointers into the plan)
    char *source;            // the caller's source and the generated functions
    cw_fused_stage *stages;  // in the order they run
    cw_fused_dep *deps;
    char **names;            // the generated functions' names, a stage each
    uint32_t nstages;
    int *order;              // the operator of each stage
    uint32_t *offset;        // each stage's first word of the table
    size_t table_words;      // the table: per stage its user and its ports' memory
};
// The plan of p for loop r (checked: every refusal names the operator and
// port), with `opts`'s source, options and shape; no driver call.
cw_status fused_plan(cw_pipeline *p, cw_resident *r, const cw_resident_fused *opts, FusedPlan *out);
// Sets up the port memory (memory.cpp's rules) and the table of their
// addresses on r's context; plan->f.user is the table.
cw_status fused_memory(cw_pipeline *p, cw_resident *r, FusedPlan *plan);
void fused_plan_free(FusedPlan *plan);

}  // namespace flow
}  // namespace cw
