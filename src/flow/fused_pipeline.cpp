/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: a pipeline of fused stages made into the resident
// loop's tile dataflow plan (fused.hpp). The stages run in the pipeline's
// topological order (a connection into a port read with `previous` orders
// nothing: feedback is allowed); each connected input becomes one
// dependency of its operator's stage on the producer's, in the order the
// ports were declared. Each stage is called through a generated function
// named after its operator, which reads the stage's user pointer and its
// ports' addresses from a table in device memory (the loop's user
// pointer): the source does not depend on addresses, so the kernel cache
// finds it again in the next process.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.hpp"
#include "flow/fused.hpp"
#include "graph/resident.hpp"

namespace cw {
namespace flow {

using namespace core;

namespace {

// The last producer tile (one axis) a neighbourhood's consumer tiles map
// to, without the radius (as graph/resident_dataflow.cpp counts it).
uint64_t mapped_end(uint32_t n, uint32_t num, uint32_t den) { return ((uint64_t)n * num + den - 1) / den; }

// What consumer op's input pt may read of producer `from` (port fp), as
// read rd says: the checks that need both tile grids.
cw_status check_shapes(const cw_operator *op, const Port &pt, const StageRead *rd, const cw_operator *from,
                       const Port &fp) {
    const Stage *me = op->stage, *src = from->stage;
    if (rd->read == CW_FUSED_READ_SAME && (me->tiles_x != src->tiles_x || me->tiles_y != src->tiles_y))
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s' reads operator '%s' port '%s' tile for tile (CW_FUSED_READ_SAME) but "
                    "their tile grids differ (%ux%u and %ux%u): use CW_FUSED_READ_NEIGHBOURS with a scale",
                    op->name, pt.name, from->name, fp.name, me->tiles_x, me->tiles_y, src->tiles_x, src->tiles_y);
    if (rd->read != CW_FUSED_READ_NEIGHBOURS) return CW_SUCCESS;
    const uint32_t num = rd->num ? rd->num : 1, den = rd->den ? rd->den : 1;
    const uint64_t ex = mapped_end(me->tiles_x, num, den);
    const uint64_t ey = me->tiles_y == 1 && src->tiles_y == 1 ? 1 : mapped_end(me->tiles_y, num, den);
    if (ex > src->tiles_x || ey > src->tiles_y)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s' reads operator '%s' port '%s' at scale %u/%u: its %ux%u tiles map to "
                    "%llux%llu tiles of '%s', which has %ux%u (the neighbourhood reaches outside the tile range)",
                    op->name, pt.name, from->name, fp.name, num, den, me->tiles_x, me->tiles_y,
                    (unsigned long long)ex, (unsigned long long)ey, from->name, src->tiles_x, src->tiles_y);
    const uint32_t most = src->tiles_x > src->tiles_y ? src->tiles_x : src->tiles_y;
    if (rd->radius > most)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s' reads operator '%s' port '%s' with radius %u: more than its tile grid "
                    "(%ux%u)",
                    op->name, pt.name, from->name, fp.name, rd->radius, src->tiles_x, src->tiles_y);
    return CW_SUCCESS;
}

// The checks before the pipeline's own (whose port-memory rules would
// refuse a CW_PORT_MANY input in other words): every operator a stage, no
// CW_PORT_MANY input.
cw_status check_stage_kind(const cw_operator *op) {
    if (!op->stage)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' is not a fused stage (it was made by cw_operator_create): a fused pipeline runs "
                    "every operator as a stage (cw_operator_create_stage)",
                    op->name);
    for (const Port &pt : op->ports)
        if (pt.input && (pt.flags & CW_PORT_MANY))
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s' input '%s' accepts many connections (CW_PORT_MANY): a stage's input reads one "
                        "producer",
                        op->name, pt.name);
    return CW_SUCCESS;
}

// The checks of a stage operator's own: reads of its own input ports, a
// read for every connected input, its functions in the source.
cw_status check_operator(const cw_pipeline *p, const cw_operator *op, const char *source) {
    const Stage *st = op->stage;
    if (!graphs::has_word(source, st->function))
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s': its stage function '%s' is not in the source (a __device__ void %s(const "
                    "cw_fused_tile *t, void *user, ...) with a pointer per port)",
                    op->name, st->function, st->function);
    for (uint32_t k = 0; k < st->nreads; k++) {
        const StageRead *rd = &st->reads[k];
        const int pi = find_port(op, rd->port);
        if (pi < 0)
            return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage reads port '%s', which it has not",
                        op->name, rd->port);
        if (!op->ports[pi].input)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s': its stage reads port '%s', an output (a read says how an input's producer is "
                        "read)",
                        op->name, rd->port);
        if (rd->function && !graphs::has_word(source, rd->function))
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s' input '%s': function '%s' is not in the source (extern \"C\" __device__ int "
                        "%s(const cw_fused_tile *t, unsigned i))",
                        op->name, rd->port, rd->function, rd->function);
    }
    for (const Port &pt : op->ports) {
        if (!pt.input || pt.conns.empty() || stage_read(op, pt.name)) continue;
        const Connection &c = p->conns[pt.conns[0]];
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s' (connected to operator '%s' port '%s') has no read in its stage "
                    "(cw_operator_stage.reads): say how its tiles read the producer's",
                    op->name, pt.name, p->ops[c.from_op]->name, p->ops[c.from_op]->ports[c.from_port].name);
    }
    return CW_SUCCESS;
}

// "cwp_" and the operator's name, '.' and '-' as '_'; where that name is
// taken (another stage's, or a word of the source), with "_<n>" after it,
// n the stage's number or the first one above it that makes a name not
// taken either.
char *wrapper_name(const FusedPlan *plan, uint32_t k, const char *op, const char *source) {
    auto taken = [&](const char *name) {
        if (graphs::has_word(source, name)) return true;
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(plan->names[j], name) == 0) return true;
        return false;
    };
    Text t;
    t.add("cwp_");
    t.add(op);
    if (!t.ok) {
        free(t.s);
        return nullptr;
    }
    for (char *c = t.s + 4; *c; c++)
        if (*c == '.' || *c == '-') *c = '_';
    if (!taken(t.s)) return t.s;
    const size_t len = strlen(t.s) + 24;  // "_" and a 64-bit number
    char *s = static_cast<char *>(malloc(len));
    if (!s) {
        free(t.s);
        return nullptr;
    }
    // At most k names and the source's words are taken: some n is free.
    for (uint64_t n = k;; n++) {
        snprintf(s, len, "%s_%llu", t.s, (unsigned long long)n);
        if (!taken(s)) break;
    }
    free(t.s);
    return s;
}

// The caller's source, then the functions that call each stage with its
// ports (a table word each: the stage's user, then its ports in the order
// they were declared).
cw_status make_source(const cw_pipeline *p, FusedPlan *plan, const char *source) {
    Text t;
    t.add(source);
    t.add("\n#line 1 \"cuweave_pipeline_stages.cu\"\n"
          "/* cuweave: each operator's stage called with its ports' memory (cw_pipeline_make_fused). */\n"
          "struct cwp_port {\n"
          "    void *p;\n"
          "    template <class T> __device__ __forceinline__ operator T *() const { return static_cast<T *>(p); }\n"
          "};\n"
          "extern \"C\" {\n");
    for (uint32_t k = 0; k < plan->nstages; k++) {
        const cw_operator *op = p->ops[plan->order[k]];
        t.addf("/* operator '%s', stage %u: table words %u .. %u (user", op->name, k, plan->offset[k],
               plan->offset[k] + (unsigned)op->ports.size());
        for (const Port &pt : op->ports) t.addf(", %s", pt.name);
        t.addf(") */\nstatic __device__ __forceinline__ void %s(const cw_fused_tile *t, void *table) {\n"
               "    void *const *w = (void *const *)table + %uu;\n    %s(t, cwp_port{w[0]}",
               plan->names[k], plan->offset[k], op->stage->function);
        for (size_t j = 0; j < op->ports.size(); j++) t.addf(", cwp_port{w[%zu]}", j + 1);
        t.add(");\n}\n");
    }
    t.add("}  /* extern \"C\" */\n");
    if (!t.ok) {
        free(t.s);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    plan->source = t.s;
    return CW_SUCCESS;
}

// The stages, their dependencies and the table's layout, in topological
// order.
cw_status make_stages(const cw_pipeline *p, FusedPlan *plan, const char *source) {
    const uint32_t n = (uint32_t)p->topo.size();
    uint32_t ndeps = 0;
    for (const cw_operator *op : p->ops)
        for (const Port &pt : op->ports) ndeps += pt.input && !pt.conns.empty() ? 1u : 0u;
    plan->nstages = n;
    plan->stages = static_cast<cw_fused_stage *>(calloc(n, sizeof *plan->stages));
    plan->deps = static_cast<cw_fused_dep *>(calloc(ndeps ? ndeps : 1, sizeof *plan->deps));
    plan->names = static_cast<char **>(calloc(n, sizeof *plan->names));
    plan->order = static_cast<int *>(calloc(n, sizeof *plan->order));
    plan->offset = static_cast<uint32_t *>(calloc(n, sizeof *plan->offset));
    int *stage_of = static_cast<int *>(calloc(p->ops.size(), sizeof *stage_of));
    cw_status st = CW_SUCCESS;
    if (!plan->stages || !plan->deps || !plan->names || !plan->order || !plan->offset || !stage_of)
        st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t k = 0; st == CW_SUCCESS && k < n; k++) {
        plan->order[k] = p->topo[k];
        stage_of[p->topo[k]] = (int)k;
        plan->offset[k] = (uint32_t)plan->table_words;
        plan->table_words += 1 + p->ops[p->topo[k]]->ports.size();
        const char *name = p->ops[p->topo[k]]->name;
        if (!(plan->names[k] = wrapper_name(plan, k, name, source))) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    uint32_t d = 0;
    for (uint32_t k = 0; st == CW_SUCCESS && k < n; k++) {
        const cw_operator *op = p->ops[plan->order[k]];
        const Stage *sg = op->stage;
        cw_fused_stage *fs = &plan->stages[k];
        fs->name = plan->names[k];
        fs->tiles = sg->tiles;
        memcpy(fs->size, sg->size, sizeof fs->size);
        memcpy(fs->tile, sg->tile, sizeof fs->tile);
        fs->threads = sg->threads;
        fs->shared_bytes = sg->shared_bytes;
        fs->deps = &plan->deps[d];
        for (const Port &pt : op->ports) {
            if (!pt.input || pt.conns.empty()) continue;
            const Connection &c = p->conns[pt.conns[0]];
            const cw_operator *from = p->ops[c.from_op];
            const StageRead *rd = stage_read(op, pt.name);
            st = check_shapes(op, pt, rd, from, from->ports[c.from_port]);
            if (st != CW_SUCCESS) break;
            cw_fused_dep *dep = &plan->deps[d++];
            dep->stage = (uint32_t)stage_of[c.from_op];
            dep->read = (cw_fused_read)rd->read;
            dep->radius = rd->radius;
            dep->scale_num = rd->num;
            dep->scale_den = rd->den;
            dep->previous = rd->previous ? 1 : 0;
            dep->function = rd->function;
            fs->dep_count++;
        }
        if (st == CW_SUCCESS && fs->dep_count > CW_FUSED_MAX_DEPS)
            st = fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' has %u connected inputs: a stage reads at most %u",
                      op->name, fs->dep_count, CW_FUSED_MAX_DEPS);
        if (!fs->dep_count) fs->deps = nullptr;
    }
    free(stage_of);
    return st;
}

}  // namespace

void fused_plan_free(FusedPlan *plan) {
    free(plan->source);
    free(plan->stages);
    free(plan->deps);
    for (uint32_t k = 0; plan->names && k < plan->nstages; k++) free(plan->names[k]);
    free(plan->names);
    free(plan->order);
    free(plan->offset);
    memset(plan, 0, sizeof *plan);
}

cw_status fused_plan(cw_pipeline *p, cw_resident *r, const cw_resident_fused *o, FusedPlan *out) {
    memset(out, 0, sizeof *out);
    if (p->running.load()) return fail(CW_ERROR_INVALID_STATE, "the pipeline is running");
    if (r->ctx->device != p->ctx->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the loop is on device %d, the pipeline on device %d", r->ctx->ordinal,
                    p->ctx->ordinal);
    if (!o->source) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: fused->source is NULL");
    const uint32_t mode = graphs::fused_mode(o);
    if (mode != 0 && mode != CW_FUSED_DATAFLOW)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: mode %u: a fused pipeline runs in the tile dataflow mode (0 or "
                    "CW_FUSED_DATAFLOW)",
                    mode);
    if (o->stages || o->stage_defs || o->stage_count || o->user)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "invalid argument: cw_pipeline_make_fused fills stages, stage_defs, stage_count and user from the "
                    "pipeline: leave them 0");
    if (p->ops.size() > CW_RESIDENT_MAX_FUSED_STAGES)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the pipeline has %zu operators: a fused loop runs at most %u stages",
                    p->ops.size(), CW_RESIDENT_MAX_FUSED_STAGES);
    for (const cw_operator *op : p->ops) CW_TRY(check_stage_kind(op));
    CW_TRY(pipeline_check(p));
    for (const cw_operator *op : p->ops) CW_TRY(check_operator(p, op, o->source));
    cw_status st = make_stages(p, out, o->source);
    if (st == CW_SUCCESS) st = make_source(p, out, o->source);
    if (st != CW_SUCCESS) {
        fused_plan_free(out);
        return st;
    }
    out->f = *o;
    out->f.source = out->source;
    out->f.mode = CW_FUSED_DATAFLOW;
    out->f.stage_defs = out->stages;
    out->f.stage_count = out->nstages;
    return CW_SUCCESS;
}

cw_status fused_memory(cw_pipeline *p, cw_resident *r, FusedPlan *plan) {
    CW_TRY(setup_memory(p, r->ctx));  // once: its rules were checked by pipeline_check
    uint64_t *words = static_cast<uint64_t *>(calloc(plan->table_words, sizeof *words));
    if (!words) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t k = 0; k < plan->nstages; k++) {
        const cw_operator *op = p->ops[plan->order[k]];
        uint64_t *w = words + plan->offset[k];
        w[0] = op->stage->user;
        for (size_t j = 0; j < op->ports.size(); j++) w[1 + j] = op->ports[j].mem;
    }
    const size_t bytes = plan->table_words * sizeof *words;
    PortMemory *m = p->memory;
    CurrentGuard guard;
    cw_status st = guard.enter(m->ctx->cu);
    if (st == CW_SUCCESS && (!p->stage_table || p->stage_table_words != plan->table_words)) {
        // A new table (the memory's allocations free it with the port
        // memory); a table of the same size is written again.
        CUdeviceptr d = 0;
        CUresult cr = drv().cuMemAlloc(&d, bytes);
        if (cr != CUDA_SUCCESS) {
            st = fail_cu(cr, "cuMemAlloc", "the stages' table of port addresses");
        } else if (!m->ptrs.push(d)) {
            drv().cuMemFree(d);
            st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        } else {
            p->stage_table = d;
            p->stage_table_words = plan->table_words;
        }
    }
    if (st == CW_SUCCESS) {
        CUresult cr = drv().cuMemcpyHtoD(p->stage_table, words, bytes);
        if (cr != CUDA_SUCCESS) st = fail_cu(cr, "cuMemcpyHtoD", "the stages' table of port addresses");
    }
    free(words);
    if (st == CW_SUCCESS) st = guard.leave();
    if (st == CW_SUCCESS) plan->f.user = p->stage_table;
    return st;
}

}  // namespace flow
}  // namespace cw
