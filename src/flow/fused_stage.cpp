/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave flow layer: operators that run as fused stages (fused.hpp): the
// stage copied and checked when the operator is made (everything that
// needs neither its ports nor the other operators), its reads found by
// port, and the calls that must refuse a pipeline of stages.
#include <new>
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

bool zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

const char *read_name(uint32_t r) {
    switch (r) {
    case CW_FUSED_READ_SAME: return "CW_FUSED_READ_SAME";
    case CW_FUSED_READ_NEIGHBOURS: return "CW_FUSED_READ_NEIGHBOURS";
    case CW_FUSED_READ_ALL: return "CW_FUSED_READ_ALL";
    default: return "CW_FUSED_READ_FUNCTION";
    }
}

// The tile grid of the cut, as the graph layer counts it (dataflow_plan).
cw_status grid_of(const char *op, const cw_operator_stage *s, uint32_t *tx, uint32_t *ty) {
    const bool by_count = s->tiles != 0;
    const bool by_size = s->size[0] || s->size[1] || s->tile[0] || s->tile[1];
    if (by_count == by_size)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage gives %s: give `tiles`, or `size` and `tile`",
                    op, by_count ? "both tiles and a size" : "neither tiles nor a size");
    uint64_t x = s->tiles, y = 1;
    if (!by_count) {
        const uint64_t sx = s->size[0], sy = s->size[1] ? s->size[1] : 1;
        const uint64_t wx = s->tile[0], wy = s->tile[1] ? s->tile[1] : 1;
        if (sx == 0 || wx == 0)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s': its stage's size[0] and tile[0] must be at least 1 (size %ux%u, tile %ux%u)",
                        op, s->size[0], s->size[1], s->tile[0], s->tile[1]);
        x = (sx + wx - 1) / wx;
        y = (sy + wy - 1) / wy;
    }
    if (x * y > CW_FUSED_MAX_TILES)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage has %llu tiles (at most %u)", op,
                    (unsigned long long)(x * y), CW_FUSED_MAX_TILES);
    *tx = (uint32_t)x;
    *ty = (uint32_t)y;
    return CW_SUCCESS;
}

// One read, checked and copied into *out (its function malloc'ed).
cw_status copy_read(const char *op, uint32_t k, const cw_port_read *r, StageRead *out) {
    const char *why = "";
    if (!name_ok(r->port, &why))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage's read %u has a bad port name: %s", op, k, why);
    const char *port = r->port;
    if (!zero(r->reserved, sizeof r->reserved))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s': its read has nonzero reserved bytes", op, port);
    uint32_t rd = 0;  // the raw value: a caller's need not be one of the enum's
    memcpy(&rd, &r->read, sizeof rd);
    if (rd < CW_FUSED_READ_SAME || rd > CW_FUSED_READ_FUNCTION)
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s': read %u is not a cw_fused_read", op, port, rd);
    if (rd != CW_FUSED_READ_NEIGHBOURS && (r->radius || r->scale_num || r->scale_den))
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s': radius and scale apply to CW_FUSED_READ_NEIGHBOURS only, not %s", op,
                    port, read_name(rd));
    if ((r->scale_num == 0) != (r->scale_den == 0))
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s' input '%s': scale %u/%u (both 0 for 1/1, or both at least 1)", op, port,
                    r->scale_num, r->scale_den);
    if ((rd == CW_FUSED_READ_FUNCTION) != (r->function != nullptr))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s': %s", op, port,
                    r->function ? "function is set but read is not CW_FUSED_READ_FUNCTION"
                                : "CW_FUSED_READ_FUNCTION needs its function's name");
    if (r->function && !graphs::is_identifier(r->function))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s': function '%s' is not an identifier", op, port,
                    r->function);
    snprintf(out->port, sizeof out->port, "%s", port);
    out->read = rd;
    out->radius = r->radius;
    out->num = r->scale_num;
    out->den = r->scale_den;
    out->previous = r->previous != 0;
    out->function = nullptr;
    if (r->function && !(out->function = dup_string(r->function)))
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    return CW_SUCCESS;
}

}  // namespace

void stage_free(Stage *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->nreads; i++) free(s->reads[i].function);
    free(s->reads);
    free(s->function);
    free(s);
}

cw_status stage_create(const char *name, const cw_operator_stage *s, cw_operator **out) {
    if (!s->function || !graphs::is_identifier(s->function))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage's function %s%s%s is not an identifier", name,
                    s->function ? "'" : "", s->function ? s->function : "(NULL)", s->function ? "'" : "");
    if (!zero(s->reserved, sizeof s->reserved))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage has nonzero reserved bytes", name);
    uint32_t tx = 0, ty = 0;
    CW_TRY(grid_of(name, s, &tx, &ty));
    if (s->threads % 32 != 0 || s->threads > 1024)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "operator '%s': its stage asks %u threads a tile: 0 (the block's) or a multiple of 32 up to 1024",
                    name, s->threads);
    if (s->read_count > CW_FUSED_MAX_DEPS || (s->read_count && !s->reads))
        return fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s': its stage's read_count %u%s (at most %u)", name,
                    s->read_count, s->read_count && !s->reads ? " with reads NULL" : "", CW_FUSED_MAX_DEPS);
    Stage *st = static_cast<Stage *>(calloc(1, sizeof *st));
    if (!st) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status rc = CW_SUCCESS;
    st->function = dup_string(s->function);
    st->reads = static_cast<StageRead *>(calloc(s->read_count ? s->read_count : 1, sizeof *st->reads));
    if (!st->function || !st->reads) rc = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t k = 0; rc == CW_SUCCESS && k < s->read_count; k++) {
        rc = copy_read(name, k, &s->reads[k], &st->reads[k]);
        if (rc != CW_SUCCESS) break;
        st->nreads = k + 1;
        for (uint32_t j = 0; j < k; j++)
            if (same_name(st->reads[j].port, st->reads[k].port)) {
                rc = fail(CW_ERROR_INVALID_ARGUMENT, "operator '%s' input '%s' is read twice (reads %u and %u)", name,
                          st->reads[k].port, j, k);
                break;
            }
    }
    if (rc != CW_SUCCESS) {
        stage_free(st);
        return rc;
    }
    st->user = s->user;
    st->tiles = s->tiles;
    memcpy(st->size, s->size, sizeof st->size);
    memcpy(st->tile, s->tile, sizeof st->tile);
    st->tiles_x = tx;
    st->tiles_y = ty;
    st->threads = s->threads;
    st->shared_bytes = s->shared_bytes;
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    cw_operator_settings settings;
    memset(&settings, 0, sizeof settings);
    cw_operator *op = nullptr;
    rc = operator_create(name, &ops, nullptr, &settings, &op);
    if (rc != CW_SUCCESS) {
        stage_free(st);
        return rc;
    }
    op->stage = st;
    *out = op;
    return CW_SUCCESS;
}

const StageRead *stage_read(const cw_operator *op, const char *port) {
    if (!op->stage) return nullptr;
    for (uint32_t k = 0; k < op->stage->nreads; k++)
        if (same_name(op->stage->reads[k].port, port)) return &op->stage->reads[k];
    return nullptr;
}

bool connection_orders(const cw_operator *op, const char *port) {
    const StageRead *r = stage_read(op, port);
    return !(r && r->previous);
}

cw_status refuse_stages(const cw_pipeline *p, const char *call) {
    for (const cw_operator *o : p->ops)
        if (o->stage)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "operator '%s' is a fused stage (cw_operator_create_stage): it has no compute for %s; "
                        "cw_pipeline_make_fused runs it",
                        o->name, call);
    return CW_SUCCESS;
}

}  // namespace flow
}  // namespace cw
