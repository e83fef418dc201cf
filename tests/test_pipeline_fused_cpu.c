/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of fused pipelines (cw_operator_create_stage,
 * cw_pipeline_make_fused) against the fake driver and the fake NVRTC:
 *  - the plan made of tests/pipeline_stages.h's diamond: stages in
 *    topological order, one dependency per connection as each port reads
 *    it, the generated functions and the table layout they read;
 *  - on the fake driver: port memory by the rules (shared by a connection,
 *    an operator's own dptr, a sink's own), the table's words, the
 *    cooperative launch; every driver call of the scenario failed in turn:
 *    reported by the call that made it, nothing left behind;
 *  - feedback: a connection into a port read with `previous` orders nothing
 *    (no cycle), without `previous` the cycle is refused;
 *  - every refusal, each naming the operator and port, none reaching NVRTC
 *    or allocating device memory;
 *  - with a real NVRTC here (no GPU needed): the diamond's kernel source
 *    compiles for sm_80 and sm_90, with feedback and without.
 * tests/test_gpu_pipeline_fused.c runs the diamond on a GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "pipeline_stages.h"
#include "testing/pipeline_hooks.h"
#include "testing/seam.h"

static long (*fake_calls)(const char *entry);
static void (*fake_last_launch)(unsigned out[5]);
static long (*nvrtc_compiles)(void);
static void (*fake_pers_watch)(int on);
static cw_context *ctx;

/* ---- the plan --------------------------------------------------------------- */

/* The plan of o's diamond for a new loop (freed by the caller with
 * cwi_pipeline_fused_free; the loop and pipeline too). */
static void *diamond_plan(const pl_options *o, cw_pipeline **p, cw_resident **r, const cw_resident_fused **f) {
    assert_cw_ok(pl_build(ctx, o, p));
    assert_cw_ok(cw_resident_create(r, ctx, NULL));
    cw_resident_fused opts = pl_fused(0, 2);
    void *plan = cwi_pipeline_fused_plan(*p, *r, &opts, f);
    if (!plan) fail_msg("the plan was refused: %s", cw_last_error()->message);
    return plan;
}

static void expect_dep(const cw_fused_stage *s, uint32_t k, uint32_t stage, cw_fused_read read, uint32_t radius,
                       uint32_t num, uint32_t den, int previous) {
    assert_true(k < s->dep_count);
    const cw_fused_dep *d = &s->deps[k];
    if (d->stage != stage || d->read != read || d->radius != radius || d->scale_num != num || d->scale_den != den ||
        d->previous != previous)
        fail_msg("stage '%s' dependency %u: stage %u read %u radius %u scale %u/%u previous %d, want %u %u %u %u/%u %d",
                 s->name, k, d->stage, (unsigned)d->read, d->radius, d->scale_num, d->scale_den, d->previous, stage,
                 (unsigned)read, radius, num, den, previous);
}

/* The diamond's stages in topological order, their cut, a dependency per
 * connection as each port reads it, and the generated functions. */
static void test_plan(void **state) {
    (void)state;
    pl_options o = {0, 0x5000, 0};
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    const cw_resident_fused *f = NULL;
    void *plan = diamond_plan(&o, &p, &r, &f);
    assert_int_equal(f->mode, CW_FUSED_DATAFLOW);
    assert_int_equal(f->stage_count, 4);
    assert_null(f->stages);
    assert_int_equal(f->user, 0); /* the table is made by make_fused */
    assert_int_equal(f->in_flight, 2);
    const cw_fused_stage *s = f->stage_defs;
    assert_string_equal(s[0].name, "cwp_src");
    assert_string_equal(s[1].name, "cwp_scale");
    assert_string_equal(s[2].name, "cwp_blur");
    assert_string_equal(s[3].name, "cwp_sum");
    assert_int_equal(s[0].size[0], PL_N);
    assert_int_equal(s[0].tile[0], 256);
    assert_int_equal(s[2].tile[0], 512);
    assert_int_equal(s[3].tiles, 1);
    assert_int_equal(s[3].threads, 128);
    assert_int_equal(s[3].shared_bytes, 512);
    assert_int_equal(s[0].dep_count, 0); /* src.prev: read, but not connected */
    assert_int_equal(s[1].dep_count, 1);
    expect_dep(&s[1], 0, 0, CW_FUSED_READ_SAME, 0, 0, 0, 0);
    assert_int_equal(s[2].dep_count, 1);
    expect_dep(&s[2], 0, 0, CW_FUSED_READ_NEIGHBOURS, 1, 2, 1, 0);
    assert_int_equal(s[3].dep_count, 2); /* in the order the ports were declared */
    expect_dep(&s[3], 0, 1, CW_FUSED_READ_ALL, 0, 0, 0, 0);
    expect_dep(&s[3], 1, 2, CW_FUSED_READ_ALL, 0, 0, 0, 0);
    /* the source: the caller's from its first line, then the generated
     * functions, each reading its words of the table (src 0..2, scale 3..5,
     * blur 6..8, sum 9..12) */
    assert_true(strncmp(f->source, kPipelineStages, strlen(kPipelineStages)) == 0);
    const char *gen = f->source + strlen(kPipelineStages);
    assert_non_null(strstr(gen, "#line 1 \"cuweave_pipeline_stages.cu\"\n"));
    assert_non_null(strstr(gen, "/* operator 'scale', stage 1: table words 3 .. 5 (user, in, out) */\n"
                                "static __device__ __forceinline__ void cwp_scale(const cw_fused_tile *t, void *table) {\n"
                                "    void *const *w = (void *const *)table + 3u;\n"
                                "    pl_scale(t, cwp_port{w[0]}, cwp_port{w[1]}, cwp_port{w[2]});\n}\n"));
    assert_non_null(strstr(gen, "/* operator 'sum', stage 3: table words 9 .. 12 (user, b, d, log) */\n"));
    assert_non_null(strstr(gen, "    pl_sum(t, cwp_port{w[0]}, cwp_port{w[1]}, cwp_port{w[2]}, cwp_port{w[3]});\n"));
    assert_non_null(strstr(gen, "(const cw_fused_tile *t, void *table) {\n    void *const *w = (void *const *)table + 0u;\n"
                                "    pl_src(t, cwp_port{w[0]}, cwp_port{w[1]}, cwp_port{w[2]});"));
    /* the kernel's source around it: each stage dispatched to its function */
    char *k = cwi_resident_fused_source(f);
    assert_non_null(k);
    assert_non_null(strstr(k, "case 1u: cwp_scale(t, user); break;"));
    assert_non_null(strstr(k, "case 3u: if (threadIdx.x < 128u) cwp_sum(t, user); break;"));
    /* chains: src and scale (scale reads src tile for tile), blur, sum: 16 + 8 + 1 tasks */
    assert_non_null(strstr(k, "#define CWF_CHAINS 3u\n"));
    assert_non_null(strstr(k, "#define CWF_TASKS 25u\n"));
    assert_non_null(strstr(k, "#define CWF_FINAL 1u\n")); /* sum reads everything */
    free(k);
    cwi_pipeline_fused_free(plan);
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
}

/* A pipeline of n stage operators named names[] (function "fn", 4 tiles,
 * no ports) and the plan of it with `source` (freed by the caller with
 * cwi_pipeline_fused_free; the loop and pipeline too). */
static void *names_plan(const char *const *names, int n, const char *source, cw_pipeline **p, cw_resident **r,
                        const cw_resident_fused **f) {
    assert_cw_ok(cw_pipeline_create(p, ctx, NULL));
    assert_cw_ok(cw_resident_create(r, ctx, NULL));
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fn";
    st.tiles = 4;
    for (int i = 0; i < n; i++) {
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create_stage(&op, names[i], &st));
        assert_cw_ok(cw_pipeline_add(*p, op));
    }
    cw_resident_fused o = pl_fused(0, 1);
    o.source = source;
    void *plan = cwi_pipeline_fused_plan(*p, *r, &o, f);
    assert_non_null(plan);
    return plan;
}

/* A name taken by the source, or by another operator's generated function,
 * gets the stage's number. */
static void test_generated_names(void **state) {
    (void)state;
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    const cw_resident_fused *f = NULL;
    const char *names[] = {"a.b", "a-b", "cwp_src"};
    void *plan = names_plan(names, 3, "__device__ void fn(const cw_fused_tile *t, void *u) {} /* cwp_cwp_src */", &p,
                            &r, &f);
    assert_string_equal(f->stage_defs[0].name, "cwp_a_b");
    assert_string_equal(f->stage_defs[1].name, "cwp_a_b_1");
    assert_string_equal(f->stage_defs[2].name, "cwp_cwp_src_2");
    assert_non_null(strstr(f->source, "fn(t, cwp_port{w[0]});")); /* no ports: the user only */
    cwi_pipeline_fused_free(plan);
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
}

/* Feedback: sum.log into src.prev, read with previous: no cycle, src runs
 * first and reads sum (stage 3) of the previous request; without previous
 * the same connection is a cycle. */
static void test_feedback(void **state) {
    (void)state;
    pl_options o = {1, 0, 0};
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    const cw_resident_fused *f = NULL;
    void *plan = diamond_plan(&o, &p, &r, &f);
    assert_string_equal(f->stage_defs[0].name, "cwp_src");
    assert_int_equal(f->stage_defs[0].dep_count, 1);
    expect_dep(&f->stage_defs[0], 0, 3, CW_FUSED_READ_ALL, 0, 0, 0, 1);
    assert_cw_ok(cw_pipeline_check(p));
    char *k = cwi_resident_fused_source(f);
    assert_non_null(k); /* the graph layer takes a later stage read with previous */
    free(k);
    cwi_pipeline_fused_free(plan);
    cw_pipeline_destroy(&p);
    /* the same connection without previous: a cycle, named */
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fn";
    st.tiles = 4;
    cw_port_read rd;
    memset(&rd, 0, sizeof rd);
    rd.port = "in";
    rd.read = CW_FUSED_READ_ALL;
    st.reads = &rd;
    st.read_count = 1;
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    ps.bytes = 64;
    for (int i = 0; i < 2; i++) {
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create_stage(&op, i ? "y" : "x", &st));
        assert_cw_ok(cw_operator_add_input(op, "in", &ps));
        assert_cw_ok(cw_operator_add_output(op, "out", &ps));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "x", "out", "y", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "y", "out", "x", "in"));
    cw_resident_fused opts = pl_fused(0, 1);
    opts.source = "fn";
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_fused(p, r, &opts));
    assert_non_null(strstr(cw_last_error()->message, "the connections form a cycle through operators 'x', 'y'"));
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
}

/* ---- on the fake driver ----------------------------------------------------- */

/* make_fused: port memory by the rules, the table the stages read, the
 * compile (once: the cache), the launch. */
static void make_fused_once(int check) {
    cw_devptr blur_mem = 0; /* memory blur's output supplies itself */
    cw_buffer *buf = NULL;
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_buffer_create(&buf, s, (size_t)PL_COPIES * PL_N * 4u));
    assert_cw_ok(cw_buffer_get_writable(buf, &blur_mem));
    cw_resident *r2 = NULL; /* a second loop, made before the count (the context's events grow with it) */
    assert_cw_ok(cw_resident_create(&r2, ctx, NULL));
    long before[NKINDS];
    snapshot(before);
    pl_options o = {0, 0x7000, blur_mem};
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    assert_cw_ok(pl_build(ctx, &o, &p));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.input_slots = 2;
    rs.input_bytes = 16;
    assert_cw_ok(cw_resident_create(&r, ctx, &rs));
    cw_resident_fused f = pl_fused(128, 2);
    f.grid_blocks = 6;
    const long compiles = nvrtc_compiles();
    const long allocs = fake_calls("cuMemAlloc");
    assert_cw_ok(cw_pipeline_make_fused(p, r, &f));
    static int round;
    const long compiled = round++ ? 0 : 1; /* from the second time on the kernel cache has it */
    assert_int_equal(nvrtc_compiles(), compiles + compiled);
    /* src.out, scale.out, sum.log and the table (blur.out brought its own),
     * and the loop's counters */
    assert_int_equal(fake_calls("cuMemAlloc"), allocs + 5);
    cw_devptr src_out = 0, scale_in = 0, blur_in = 0, scale_out = 0, sum_b = 0, blur_out = 0, sum_d = 0, log = 0;
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "src", "out", &src_out));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "scale", "in", &scale_in));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "blur", "in", &blur_in));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "scale", "out", &scale_out));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "sum", "b", &sum_b));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "blur", "out", &blur_out));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "sum", "d", &sum_d));
    assert_cw_ok(cw_pipeline_get_port_ptr(p, "sum", "log", &log));
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_get_port_ptr(p, "src", "prev", &log)); /* no memory */
    assert_true(src_out && src_out == scale_in && src_out == blur_in);
    assert_true(scale_out && scale_out == sum_b && scale_out != src_out);
    assert_true(blur_out == blur_mem && sum_d == blur_mem);
    assert_true(log && log != src_out && log != scale_out);
    /* the table: per stage its user, then its ports as declared */
    cw_devptr table = 0;
    size_t words = 0;
    assert_int_equal(cwi_pipeline_stage_table(p, &table, &words), 0);
    assert_int_equal(words, 13);
    const unsigned long long want[13] = {0, 0, src_out, 0, scale_in, scale_out, 0x7000, blur_in, blur_out,
                                         0, sum_b, sum_d, log};
    const unsigned long long *w = (const unsigned long long *)(uintptr_t)table;
    for (int i = 0; i < 13; i++)
        if (w[i] != want[i]) fail_msg("table word %d: 0x%llx, want 0x%llx", i, w[i], want[i]);
    /* the loop runs it */
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 1);
    assert_int_equal(info.grid_blocks, 6);
    assert_int_equal(info.block_threads, 128);
    assert_cw_ok(cw_resident_launch(r));
    unsigned l[5];
    fake_last_launch(l);
    assert_int_equal(l[0], 6);
    assert_int_equal(l[1], 128);
    assert_int_equal(l[2], 512); /* sum's shared memory */
    assert_int_equal(l[3], 1);   /* cooperative */
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    /* again: the same source from the kernel cache, the table written again in place */
    assert_cw_ok(cw_pipeline_make_fused(p, r, &f));
    assert_int_equal(nvrtc_compiles(), compiles + compiled);
    assert_int_equal(fake_calls("cuMemAlloc"), allocs + 5); /* nothing new: the port memory, the table and the counters kept */
    cw_devptr table2 = 0;
    assert_int_equal(cwi_pipeline_stage_table(p, &table2, &words), 0);
    assert_true(table2 == table);
    /* the pipeline is the loop's now: its own runs and captures refuse it */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_run(p, 1));
    assert_non_null(strstr(cw_last_error()->message, "operator 'src' is a fused stage"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_resident(p, r2));
    assert_non_null(strstr(cw_last_error()->message, "operator 'src' is a fused stage"));
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
    if (check) assert_int_equal(leaks(before, "a fused pipeline"), 0);
    cw_resident_destroy(&r2);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
}

/* The first times grow the context's pools (the events of its streams,
 * and of a freed buffer's marks, which stay in flight into the next round:
 * the fake's count settles on the third, with or without a pipeline): the
 * third is checked for leaks. */
static void test_make_fused(void **state) {
    (void)state;
    make_fused_once(0);
    make_fused_once(0);
    make_fused_once(1);
}

/* ---- refusals ------------------------------------------------------------------ */

/* The call refuses with CW_ERROR_INVALID_ARGUMENT, its detail holding w1
 * (and w2). */
static void refused_with(cw_status st, const char *w1, const char *w2) {
    if (st != CW_ERROR_INVALID_ARGUMENT)
        fail_msg("accepted or refused otherwise (%s): expected a refusal naming '%s'", cw_status_name(st), w1);
    const char *m = cw_last_error()->message;
    if (!strstr(m, w1) || (w2 && !strstr(m, w2))) fail_msg("the detail '%s' lacks '%s' / '%s'", m, w1, w2 ? w2 : "");
}

static cw_operator_stage one_stage(cw_port_read *rd) {
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fn";
    st.tiles = 8;
    memset(rd, 0, sizeof *rd);
    rd->port = "in";
    rd->read = CW_FUSED_READ_SAME;
    st.reads = rd;
    st.read_count = 1;
    return st;
}

static void create_refused(const cw_operator_stage *st, const char *w1, const char *w2) {
    cw_operator *op = NULL;
    refused_with(cw_operator_create_stage(&op, "op1", st), w1, w2);
    assert_null(op);
}

/* cw_operator_create_stage: what the stage says on its own. */
static void test_stage_refusals(void **state) {
    (void)state;
    cw_port_read rd, rd2[2];
    cw_operator_stage st = one_stage(&rd);
    cw_operator *op = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create_stage(NULL, "x", &st));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_operator_create_stage(&op, "x", NULL));
    refused_with(cw_operator_create_stage(&op, "bad name", &st), "bad operator name", NULL);
    st.function = NULL;
    create_refused(&st, "operator 'op1': its stage's function (NULL) is not an identifier", NULL);
    st = one_stage(&rd);
    st.function = "1x";
    create_refused(&st, "function '1x' is not an identifier", NULL);
    st = one_stage(&rd);
    st.reserved[5] = 1;
    create_refused(&st, "operator 'op1': its stage has nonzero reserved bytes", NULL);
    st = one_stage(&rd);
    st.tiles = 0;
    create_refused(&st, "operator 'op1': its stage gives neither tiles nor a size", NULL);
    st = one_stage(&rd);
    st.size[0] = 10;
    create_refused(&st, "gives both tiles and a size", NULL);
    st = one_stage(&rd);
    st.tiles = 0;
    st.size[0] = 10;
    create_refused(&st, "size[0] and tile[0] must be at least 1", NULL);
    st.tile[0] = 1;
    st.size[1] = 1u << 20;
    create_refused(&st, "its stage has 10485760 tiles (at most 1048576)", NULL);
    st = one_stage(&rd);
    st.threads = 48;
    create_refused(&st, "its stage asks 48 threads a tile", NULL);
    st.threads = 2048;
    create_refused(&st, "asks 2048 threads", NULL);
    st = one_stage(&rd);
    st.read_count = CW_FUSED_MAX_DEPS + 1;
    create_refused(&st, "its stage's read_count 17", NULL);
    st.read_count = 1;
    st.reads = NULL;
    create_refused(&st, "with reads NULL", NULL);
    /* reads */
    st = one_stage(&rd);
    rd.port = "in/1";
    create_refused(&st, "its stage's read 0 has a bad port name", NULL);
    st = one_stage(&rd);
    rd.reserved[2] = 1;
    create_refused(&st, "operator 'op1' input 'in': its read has nonzero reserved bytes", NULL);
    st = one_stage(&rd);
    rd.read = (cw_fused_read)9;
    create_refused(&st, "operator 'op1' input 'in': read 9 is not a cw_fused_read", NULL);
    st = one_stage(&rd);
    rd.radius = 1;
    create_refused(&st, "input 'in': radius and scale apply to CW_FUSED_READ_NEIGHBOURS only, not CW_FUSED_READ_SAME",
                   NULL);
    st = one_stage(&rd);
    rd.read = CW_FUSED_READ_NEIGHBOURS;
    rd.scale_num = 3;
    create_refused(&st, "input 'in': scale 3/0", NULL);
    st = one_stage(&rd);
    rd.function = "pick";
    create_refused(&st, "input 'in': function is set but read is not CW_FUSED_READ_FUNCTION", NULL);
    st = one_stage(&rd);
    rd.read = CW_FUSED_READ_FUNCTION;
    create_refused(&st, "input 'in': CW_FUSED_READ_FUNCTION needs its function's name", NULL);
    rd.function = "no-ident";
    create_refused(&st, "input 'in': function 'no-ident' is not an identifier", NULL);
    st = one_stage(&rd2[0]);
    rd2[1] = rd2[0];
    st.read_count = 2;
    create_refused(&st, "operator 'op1' input 'in' is read twice (reads 0 and 1)", NULL);
    /* a good one; a port may be declared after the stage */
    st = one_stage(&rd);
    assert_cw_ok(cw_operator_create_stage(&op, "op1", &st));
    cw_operator_destroy(&op);
}

/* A pipeline a -> b of stages (a: out; b: in, out) whose b reads as rd. */
typedef struct {
    cw_pipeline *p;
    cw_resident *r;
} pair;

static pair make_pair(const cw_port_read *rd, uint32_t b_tiles, uint32_t b_threads, unsigned in_flags) {
    pair x;
    assert_cw_ok(cw_pipeline_create(&x.p, ctx, NULL));
    assert_cw_ok(cw_resident_create(&x.r, ctx, NULL));
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    ps.bytes = 256;
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fa";
    st.tiles = 8;
    cw_operator *a = NULL, *b = NULL;
    assert_cw_ok(cw_operator_create_stage(&a, "a", &st));
    assert_cw_ok(cw_operator_add_output(a, "out", &ps));
    assert_cw_ok(cw_pipeline_add(x.p, a));
    st.function = "fb";
    st.tiles = b_tiles;
    st.threads = b_threads;
    st.reads = rd;
    st.read_count = rd ? 1 : 0;
    assert_cw_ok(cw_operator_create_stage(&b, "b", &st));
    ps.flags = in_flags;
    assert_cw_ok(cw_operator_add_input(b, "in", &ps));
    ps.flags = 0;
    assert_cw_ok(cw_operator_add_output(b, "out", &ps));
    assert_cw_ok(cw_pipeline_add(x.p, b));
    assert_cw_ok(cw_pipeline_connect(x.p, "a", "out", "b", "in"));
    return x;
}

static void pair_free(pair *x) {
    cw_resident_destroy(&x->r);
    cw_pipeline_destroy(&x->p);
}

static const char kPairSrc[] = "fa fb pick /* the fake NVRTC needs the names only */";

/* make_fused refuses x with the words; nothing compiled, no device memory. */
static void fused_refused(pair *x, const cw_resident_fused *f, const char *w1, const char *w2) {
    const long compiles = nvrtc_compiles(), allocs = fake_calls("cuMemAlloc");
    refused_with(cw_pipeline_make_fused(x->p, x->r, f), w1, w2);
    assert_int_equal(nvrtc_compiles(), compiles);
    assert_int_equal(fake_calls("cuMemAlloc"), allocs);
    cw_devptr d = 0;
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_get_port_ptr(x->p, "a", "out", &d)); /* no port memory either */
    pair_free(x);
}

/* cw_pipeline_make_fused: what needs the pipeline. */
static void test_pipeline_refusals(void **state) {
    (void)state;
    cw_port_read rd;
    memset(&rd, 0, sizeof rd);
    rd.port = "in";
    rd.read = CW_FUSED_READ_SAME;
    cw_resident_fused f = pl_fused(0, 1);
    f.source = kPairSrc;
    pair x = make_pair(&rd, 8, 0, 0);
    assert_cw_ok(cw_pipeline_make_fused(x.p, x.r, &f)); /* the pair is good */
    pair_free(&x);
    /* the descriptor */
    x = make_pair(&rd, 8, 0, 0);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_make_fused(x.p, x.r, NULL));
    f.source = NULL;
    fused_refused(&x, &f, "fused->source is NULL", NULL);
    f = pl_fused(0, 1);
    f.source = kPairSrc;
    f.mode = (cw_fused_mode)7;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "mode 7: a fused pipeline runs in the tile dataflow mode", NULL);
    f.mode = CW_FUSED_DATAFLOW;
    f.user = 1;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "fills stages, stage_defs, stage_count and user from the pipeline", NULL);
    f.user = 0;
    f.stage_count = 2;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "leave them 0", NULL);
    f.stage_count = 0;
    f.reserved[3] = 1;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "invalid argument", NULL);
    f.reserved[3] = 0;
    f.block_threads = 2048;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "block_threads 2048", NULL);
    f.block_threads = 0;
    /* the operators and ports */
    x = make_pair(NULL, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b' input 'in' (connected to operator 'a' port 'out') has no read in its stage",
                  NULL);
    rd.port = "zz";
    x = make_pair(&rd, 8, 0, CW_PORT_OPTIONAL);
    /* b.in is optional: unconnected it would need no read; connected it does */
    fused_refused(&x, &f, "operator 'b': its stage reads port 'zz', which it has not", NULL);
    rd.port = "out";
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b': its stage reads port 'out', an output", NULL);
    rd.port = "in";
    x = make_pair(&rd, 8, 0, CW_PORT_MANY);
    fused_refused(&x, &f, "operator 'b' input 'in' accepts many connections (CW_PORT_MANY)", NULL);
    x = make_pair(&rd, 4, 0, 0);
    fused_refused(&x, &f,
                  "operator 'b' input 'in' reads operator 'a' port 'out' tile for tile (CW_FUSED_READ_SAME) but their "
                  "tile grids differ (4x1 and 8x1)",
                  NULL);
    rd.read = CW_FUSED_READ_NEIGHBOURS;
    rd.scale_num = 2;
    rd.scale_den = 1;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b' input 'in' reads operator 'a' port 'out' at scale 2/1: its 8x1 tiles map to 16x1",
                  "outside the tile range");
    rd.scale_num = rd.scale_den = 0;
    rd.radius = 9;
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b' input 'in' reads operator 'a' port 'out' with radius 9: more than its tile grid",
                  NULL);
    rd.radius = 0;
    rd.read = CW_FUSED_READ_FUNCTION;
    rd.function = "nowhere";
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b' input 'in': function 'nowhere' is not in the source", NULL);
    rd.function = NULL;
    rd.read = CW_FUSED_READ_SAME;
    f.source = "fa only";
    x = make_pair(&rd, 8, 0, 0);
    fused_refused(&x, &f, "operator 'b': its stage function 'fb' is not in the source", NULL);
    f.source = kPairSrc;
    /* what the loop refuses: the stage named by its generated function */
    x = make_pair(&rd, 8, 512, 0);
    fused_refused(&x, &f, "stage 1 ('cwp_b') asks 512 threads a tile", "up to the block's 256");
    /* an operator with a compute role beside the stages */
    x = make_pair(&rd, 8, 0, 0);
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = (cw_status(*)(cw_io *, void *))(uintptr_t)1; /* never called */
    cw_operator_settings os;
    cw_operator_settings_default(&os);
    os.resident = 1;
    cw_operator *c = NULL;
    assert_cw_ok(cw_operator_create(&c, "compute_op", &ops, NULL, &os));
    assert_cw_ok(cw_pipeline_add(x.p, c));
    fused_refused(&x, &f, "operator 'compute_op' is not a fused stage (it was made by cw_operator_create)", NULL);
    /* the loop's state: launched, or with a workload */
    x = make_pair(&rd, 8, 0, 0);
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    assert_cw_ok(cw_resident_set_workload(x.r, g));
    cw_graph_destroy(&g);
    assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_make_fused(x.p, x.r, &f));
    assert_non_null(strstr(cw_last_error()->message, "the loop has a workload"));
    pair_free(&x);
    /* a pipeline with no operator */
    x.p = NULL;
    assert_cw_ok(cw_pipeline_create(&x.p, ctx, NULL));
    assert_cw_ok(cw_resident_create(&x.r, ctx, NULL));
    refused_with(cw_pipeline_make_fused(x.p, x.r, &f), "the pipeline has no operator", NULL);
    pair_free(&x);
}

/* ---- the real NVRTC ------------------------------------------------------------- */

typedef int (*nvrtc_create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*nvrtc_compile_fn)(void *, int, const char *const *);
typedef int (*nvrtc_logsize_fn)(void *, size_t *);
typedef int (*nvrtc_log_fn)(void *, char *);
typedef int (*nvrtc_destroy_fn)(void **);

/* The diamond's kernel (with and without feedback) compiles for sm_80 and
 * sm_90: the generated functions call the stages with their ports. */
static void test_source_compiles(void **state) {
    (void)state;
    void *nv = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!nv) nv = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!nv) nv = dlopen("libnvrtc.so.12", RTLD_NOW | RTLD_LOCAL);
    nvrtc_create_fn create = nv ? (nvrtc_create_fn)dlsym(nv, "nvrtcCreateProgram") : NULL;
    if (!create || dlsym(nv, "fake_nvrtc_compiles")) {
        printf("# SKIP: no real NVRTC here (libnvrtc.so)\n");
        skip();
        return;
    }
    nvrtc_compile_fn compile = (nvrtc_compile_fn)dlsym(nv, "nvrtcCompileProgram");
    nvrtc_logsize_fn logsize = (nvrtc_logsize_fn)dlsym(nv, "nvrtcGetProgramLogSize");
    nvrtc_log_fn getlog = (nvrtc_log_fn)dlsym(nv, "nvrtcGetProgramLog");
    nvrtc_destroy_fn destroy = (nvrtc_destroy_fn)dlsym(nv, "nvrtcDestroyProgram");
    assert_true(compile && logsize && getlog && destroy);
    const char *hname[] = {"cuweave/resident_device.h"};
    const char *htext[] = {cw_builtin_get_resident_header()};
    const char *archs[] = {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90"};
    for (int feedback = 0; feedback < 2; feedback++) {
        pl_options o = {feedback, 0, 0};
        cw_pipeline *p = NULL;
        cw_resident *r = NULL;
        const cw_resident_fused *f = NULL;
        void *plan = diamond_plan(&o, &p, &r, &f);
        char *src = cwi_resident_fused_source(f);
        assert_non_null(src);
        for (int i = 0; i < 2; i++) {
            void *prog = NULL;
            assert_int_equal(create(&prog, src, "cuweave_fused_dataflow.cu", 1, htext, hname), 0);
            const char *opts[] = {archs[i]};
            const int rc = compile(prog, 1, opts);
            size_t n = 0;
            logsize(prog, &n);
            char *log = malloc(n + 1);
            assert_non_null(log);
            log[0] = 0;
            getlog(prog, log);
            if (rc != 0) fail_msg("NVRTC (%s) refused the pipeline's kernel (feedback %d): %s", archs[i], feedback, log);
            free(log);
            destroy(&prog);
        }
        free(src);
        cwi_pipeline_fused_free(plan);
        cw_resident_destroy(&r);
        cw_pipeline_destroy(&p);
    }
}

/* ---- fault sweep ------------------------------------------------------------------ */

static const char *g_step;
#define STEP(call) (g_step = #call, (call))
static cw_status scenario(cw_pipeline **p, cw_resident **r) {
    pl_options o = {1, 0x9000, 0};
    cw_status st = STEP(pl_build)(ctx, &o, p);
    if (st != CW_SUCCESS) return st;
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.input_slots = 2;
    s.input_bytes = 16;
    st = STEP(cw_resident_create)(r, ctx, &s);
    cw_resident_fused f = pl_fused(0, 2);
    if (st == CW_SUCCESS) st = STEP(cw_pipeline_make_fused)(*p, *r, &f);
    if (st == CW_SUCCESS) st = STEP(cw_resident_launch)(*r);
    if (st == CW_SUCCESS) st = STEP(cw_resident_data_ready)(*r, NULL);
    if (st == CW_SUCCESS) st = STEP(cw_resident_tear_down)(*r, 100);
    return st;
}

static void scenario_end(cw_pipeline **p, cw_resident **r) {
    cw_resident_destroy(r);
    cw_pipeline_destroy(p);
}

/* Every driver call of building, making fused, launching, serving one
 * request and tearing down, failed in turn: an error from the call that
 * made it (pl_build's calls are the pipeline's), nothing left behind. */
static void test_fault_sweep(void **state) {
    (void)state;
    fake_pers_watch(0); /* a failed cuStreamQuery never reaches the fake: its mark would stay */
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    assert_int_equal(scenario(&p, &r), CW_SUCCESS); /* once first: what is done once per process */
    scenario_end(&p, &r);
    long before[NKINDS];
    snapshot(before);
    long libs = fake_live("library");
    cwi_seam_reset();
    assert_int_equal(scenario(&p, &r), CW_SUCCESS);
    const unsigned long calls = cwi_seam_calls(-1);
    scenario_end(&p, &r);
    assert_int_equal(leaks(before, "the clean run"), 0);
    unsigned long handled = 0, absorbed = 0, tried = 0, bad = 0, in_make_fused = 0;
    for (unsigned long k = 1; k <= calls; k++) {
        p = NULL;
        r = NULL;
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        const cw_status st = scenario(&p, &r);
        const int fired = cwi_seam_fired();
        char function[64];
        snprintf(function, sizeof function, "%s", cw_last_error()->function);
        const char *entry = cwi_seam_fired_entry() >= 0 ? cwi_seam_entry_name(cwi_seam_fired_entry()) : "?";
        const int is_release = strstr(entry, "Destroy") || strstr(entry, "Free") || strstr(entry, "Unload");
        cwi_seam_reset();
        if (!fired) {
            if (st != CW_SUCCESS) bad++;
            scenario_end(&p, &r);
            break;
        }
        tried++;
        if (is_release) {
            absorbed++;
            scenario_end(&p, &r);
            snapshot(before);
            libs = fake_live("library");
            continue;
        }
        if (st == CW_SUCCESS) {
            printf("# call %lu (%s) failing: the scenario returned CW_SUCCESS\n", k, entry);
            bad++;
        } else {
            handled++;
            const char *want = strcmp(g_step, "pl_build") == 0 ? NULL : g_step;
            if (want && strcmp(function, want) != 0) {
                printf("# call %lu (%s): the detail names %s, the call that failed was %s\n", k, entry, function, want);
                bad++;
            }
            if (strcmp(g_step, "cw_pipeline_make_fused") == 0) {
                in_make_fused++;
                if (!cw_last_error()->driver_call[0] && !strstr(cw_last_error()->message, "out of device memory")) {
                    printf("# call %lu (%s): make_fused's detail names no driver call: %s\n", k, entry,
                           cw_last_error()->message);
                    bad++;
                }
            }
        }
        scenario_end(&p, &r);
        char what[64];
        snprintf(what, sizeof what, "failing call %lu (%s)", k, entry);
        if (leaks(before, what)) bad++;
        if (fake_live("library") != libs) {
            printf("# %s: a module left behind\n", what);
            bad++;
        }
    }
    assert_int_equal(scenario(&p, &r), CW_SUCCESS); /* the library still works */
    scenario_end(&p, &r);
    cwi_seam_disable();
    fake_pers_watch(1);
    printf("# fused pipeline fault sweep: %lu driver calls, %lu failures injected (%lu in make_fused): %lu returned an "
           "error and leaked nothing, %lu failed releases absorbed; %lu problems\n",
           calls, tried, in_make_fused, handled, absorbed, bad);
    assert_int_equal(bad, 0);
    assert_int_equal(handled + absorbed, tried);
    assert_true(in_make_fused >= 4); /* port memory (3), the table, its copy, the module's load */
}

/* The generated names are unique however the operators' names and the
 * source's words collide: a suffixed name is checked again (review: "a_b_2",
 * "a.b", "a-b" made cwp_a_b_2 twice, and NVRTC refused the source). */
static void test_generated_names_unique(void **state) {
    (void)state;
    cw_pipeline *p = NULL;
    cw_resident *r = NULL;
    const cw_resident_fused *f = NULL;
    const char *names[] = {"a_b_2", "a.b", "a-b", "z", "y"};
    void *plan = names_plan(names, 5, "__device__ void fn(const cw_fused_tile *t, void *u) {} /* cwp_y cwp_y_4 */", &p,
                            &r, &f);
    assert_string_equal(f->stage_defs[0].name, "cwp_a_b_2");
    assert_string_equal(f->stage_defs[1].name, "cwp_a_b");
    assert_string_equal(f->stage_defs[2].name, "cwp_a_b_3"); /* cwp_a_b, then cwp_a_b_2 taken */
    assert_string_equal(f->stage_defs[3].name, "cwp_z");
    assert_string_equal(f->stage_defs[4].name, "cwp_y_5"); /* cwp_y, then cwp_y_4 words of the source */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(f->stage_defs[i].name, f->stage_defs[j].name))
                fail_msg("stages %d and %d are both %s", j, i, f->stage_defs[i].name);
    cwi_pipeline_fused_free(plan);
    cw_resident_destroy(&r);
    cw_pipeline_destroy(&p);
}

/* Once make_fused has set up the port memory, an operator added would have
 * none (its words in the table 0): refused, as connections are (review). */
static void test_add_after_make_fused(void **state) {
    (void)state;
    cw_port_read rd;
    memset(&rd, 0, sizeof rd);
    rd.port = "in";
    rd.read = CW_FUSED_READ_SAME;
    cw_resident_fused f = pl_fused(0, 1);
    f.source = kPairSrc;
    pair x = make_pair(&rd, 8, 0, 0);
    assert_cw_ok(cw_pipeline_make_fused(x.p, x.r, &f));
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fa";
    st.tiles = 8;
    cw_port_settings ps;
    cw_port_settings_default(&ps);
    ps.bytes = 256;
    cw_operator *c = NULL;
    assert_cw_ok(cw_operator_create_stage(&c, "c", &st));
    assert_cw_ok(cw_operator_add_output(c, "out", &ps));
    const cw_status st_add = cw_pipeline_add(x.p, c);
    if (st_add != CW_ERROR_INVALID_STATE || !strstr(cw_last_error()->message, "operators are fixed"))
        fail_msg("an operator added after make_fused: %s (%s)", cw_status_name(st_add),
                 st_add == CW_SUCCESS ? "accepted" : cw_last_error()->message);
    cw_operator_destroy(&c); /* still the caller's */
    assert_cw_ok(cw_pipeline_make_fused(x.p, x.r, &f)); /* the pipeline as it was */
    pair_free(&x);
}

/* A refusal of the loop's checks after the compile (shared memory above the
 * device's, a grid not co-resident) comes before any port memory: nothing
 * allocated, the pipeline still open to changes (review: the port memory
 * was set up first, and connections were fixed by a refused call). */
static void test_fit_refused_before_memory(void **state) {
    (void)state;
    for (int what = 0; what < 2; what++) {
        cw_pipeline *p = NULL;
        cw_resident *r = NULL;
        assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
        assert_cw_ok(cw_resident_create(&r, ctx, NULL));
        cw_operator_stage st;
        memset(&st, 0, sizeof st);
        st.function = "fa";
        st.tiles = 8;
        if (what == 0) st.shared_bytes = 16u << 20;
        cw_port_settings ps;
        cw_port_settings_default(&ps);
        ps.bytes = 256;
        cw_operator *a = NULL;
        assert_cw_ok(cw_operator_create_stage(&a, "a", &st));
        assert_cw_ok(cw_operator_add_output(a, "out", &ps));
        assert_cw_ok(cw_pipeline_add(p, a));
        cw_resident_fused f = pl_fused(0, 1);
        f.source = kPairSrc;
        if (what == 1) f.grid_blocks = 1u << 30;
        const long allocs = fake_calls("cuMemAlloc");
        refused_with(cw_pipeline_make_fused(p, r, &f), what == 0 ? "bytes of shared memory" : "does not fit co-resident",
                     NULL);
        if (fake_calls("cuMemAlloc") != allocs)
            fail_msg("case %d: %ld device allocations by a refused make_fused", what, fake_calls("cuMemAlloc") - allocs);
        cw_devptr d = 0;
        assert_cw(CW_ERROR_INVALID_STATE, cw_pipeline_get_port_ptr(p, "a", "out", &d)); /* no port memory */
        cw_operator *b = NULL; /* still open: an operator and a connection more */
        st.shared_bytes = 0;
        st.function = "fb";
        assert_cw_ok(cw_operator_create_stage(&b, "b", &st));
        assert_cw_ok(cw_operator_add_input(b, "in", &ps));
        assert_cw_ok(cw_pipeline_add(p, b));
        assert_cw_ok(cw_pipeline_connect(p, "a", "out", "b", "in"));
        cw_resident_destroy(&r);
        cw_pipeline_destroy(&p);
    }
}

/* A name of 64 bytes and no NUL ending at a page nobody may read: refused as
 * too long, never read past its 64th byte (review: strlen ran on, an ASan
 * heap-buffer-overflow). For the operator's name and a read's port. */
static void test_names_read_bounded(void **state) {
    (void)state;
    const long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + page, (size_t)page, PROT_NONE), 0);
    char *name = m + page - (CW_NAME_MAX + 1); /* 64 bytes, then the guard page */
    memset(name, 'a', CW_NAME_MAX + 1);
    cw_operator_stage st;
    memset(&st, 0, sizeof st);
    st.function = "fa";
    st.tiles = 1;
    cw_operator *op = NULL;
    refused_with(cw_operator_create_stage(&op, name, &st), "longer than 63 bytes", NULL);
    assert_null(op);
    cw_port_read rd;
    memset(&rd, 0, sizeof rd);
    rd.port = name;
    rd.read = CW_FUSED_READ_ALL;
    st.reads = &rd;
    st.read_count = 1;
    refused_with(cw_operator_create_stage(&op, "ok", &st), "longer than 63 bytes", NULL);
    assert_null(op);
    munmap(m, (size_t)page * 2);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenvrtc.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    char tmp[4096], nvrtc[4200], cache[] = "/tmp/cuweave-pipeline-fused-test-XXXXXX";
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(nvrtc, sizeof nvrtc, "%s/libfakenvrtc.so", dirname(tmp));
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("CUWEAVE_LIBNVRTC", nvrtc, 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    if (!mkdtemp(cache)) return 1;
    setenv("CUWEAVE_CACHE_DIR", cache, 1); /* never the user's cache */
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *nv = dlopen(nvrtc, RTLD_NOW | RTLD_LOCAL);
    if (!lib || !nv || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(*(void **)&fake_last_launch = dlsym(lib, "fake_cuda_last_launch")) ||
        !(*(void **)&live_drain = dlsym(lib, "fake_cuda_drain")) ||
        !(*(void **)&nvrtc_compiles = dlsym(nv, "fake_nvrtc_compiles")) ||
        !(*(void **)&fake_pers_watch = dlsym(lib, "fake_cuda_persistent_watch"))) {
        printf("FAIL: cannot load %s or %s\n", argv[1], nvrtc);
        return 1;
    }
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    cw_resident *warm = NULL; /* the context's event pool warmed: live counts compare like with like */
    if (cw_resident_create(&warm, ctx, NULL) != CW_SUCCESS) return 1;
    cw_resident_destroy(&warm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),           cmocka_unit_test(test_generated_names),
        cmocka_unit_test(test_feedback),       cmocka_unit_test(test_make_fused),
        cmocka_unit_test(test_stage_refusals), cmocka_unit_test(test_pipeline_refusals),
        cmocka_unit_test(test_source_compiles), cmocka_unit_test(test_fault_sweep),
        cmocka_unit_test(test_generated_names_unique), cmocka_unit_test(test_add_after_make_fused),
        cmocka_unit_test(test_fit_refused_before_memory), cmocka_unit_test(test_names_read_bounded),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0) printf("# could not remove %s\n", cache);
    return rc;
}
