/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the fused loop's tile dataflow mode (CW_FUSED_DATAFLOW)
 * against the fake driver and the fake NVRTC: every refusal of a plan, each
 * naming the stage and the reason, none reaching NVRTC; the generated
 * source (the protocol's tables as the plan says, the dispatch of tiles to
 * stages, of dependency functions); where a real NVRTC is installed (no
 * GPU needed), the source of tests/dataflow_stages.h (every kind of
 * dependency) compiles for sm_80 and sm_90; on the fake driver, the state
 * the launch zeroes (its size from the plan), the cooperative launch, and a
 * stall written as the GPU would reported by cw_resident_get_info with the
 * stages named; mode mix-ups refused. The protocol itself is modelled in
 * tests/test_fused_model_cpu.c; tests/test_gpu_resident_dataflow.c runs it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "dataflow_stages.h"
#include "fakelive.h"
#include "graph/fused_dataflow.h"
#include "graph/resident_abi.h"
#include "testing/seam.h"

static long (*fake_calls)(const char *entry);
static void (*fake_last_launch)(unsigned out[5]);
static long (*nvrtc_compiles)(void);
static cw_context *ctx;

static const char kSrc[] = "a b c pick /* names are enough for the fake NVRTC */";

/* A small valid plan: a (8 tiles) <- b SAME, c ALL of b. */
typedef struct {
    cw_fused_stage st[3];
    cw_fused_dep d[4];
    cw_resident_fused f;
} plan3;

static void plan3_init(plan3 *p) {
    memset(p, 0, sizeof *p);
    p->st[0].name = "a";
    p->st[0].tiles = 8;
    p->d[0].stage = 0;
    p->d[0].read = CW_FUSED_READ_SAME;
    p->st[1].name = "b";
    p->st[1].tiles = 8;
    p->st[1].deps = &p->d[0];
    p->st[1].dep_count = 1;
    p->d[1].stage = 1;
    p->d[1].read = CW_FUSED_READ_ALL;
    p->st[2].name = "c";
    p->st[2].tiles = 1;
    p->st[2].deps = &p->d[1];
    p->st[2].dep_count = 1;
    p->f.source = kSrc;
    p->f.mode = CW_FUSED_DATAFLOW;
    p->f.stage_defs = p->st;
    p->f.stage_count = 3;
}

/* set_fused refuses p with CW_ERROR_INVALID_ARGUMENT, the detail holding
 * each of the words, and nothing reaches NVRTC. */
static void refused(cw_resident *r, plan3 *p, const char *w1, const char *w2) {
    const long compiles = nvrtc_compiles();
    const cw_status st = cw_resident_set_fused(r, &p->f);
    if (st != CW_ERROR_INVALID_ARGUMENT)
        fail_msg("accepted or refused otherwise (%s): expected a refusal naming '%s'", cw_status_name(st), w1);
    const char *m = cw_last_error()->message;
    if (!strstr(m, w1) || (w2 && !strstr(m, w2))) fail_msg("the detail '%s' lacks '%s' / '%s'", m, w1, w2 ? w2 : "");
    assert_int_equal(nvrtc_compiles(), compiles);
    plan3_init(p);
}

static void test_refusals(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    plan3 p;
    plan3_init(&p);
    const char *names[] = {"a", "b", "c"};
    /* mode mix-ups */
    p.f.stages = names;
    refused(r, &p, "stages must be NULL", NULL);
    p.f.stage_defs = NULL;
    refused(r, &p, "stage_defs is NULL", NULL);
    p.f.mode = (cw_fused_mode)7;
    refused(r, &p, "mode 7", NULL);
    p.f.mode = CW_FUSED_BARRIER;
    p.f.stages = names;
    refused(r, &p, "for CW_FUSED_DATAFLOW", NULL); /* stage_defs with a barrier loop */
    p.f.mode = CW_FUSED_BARRIER;
    p.f.stages = names;
    p.f.stage_defs = NULL;
    p.f.in_flight = 2;
    refused(r, &p, "for CW_FUSED_DATAFLOW", NULL);
    p.f.in_flight = CW_FUSED_MAX_IN_FLIGHT + 1;
    refused(r, &p, "in_flight 9", NULL);
    /* stages */
    p.st[1].name = NULL;
    refused(r, &p, "stage 1's name (NULL)", NULL);
    p.st[1].name = "1b";
    refused(r, &p, "stage 1's name '1b' is not an identifier", NULL);
    p.st[1].name = "zz";
    refused(r, &p, "stage 1, 'zz', is not in the source", NULL);
    p.st[1].reserved[3] = 1;
    refused(r, &p, "stage 1 ('b')", "reserved");
    p.st[1].tiles = 0;
    refused(r, &p, "stage 1 ('b') gives neither", NULL);
    p.st[1].size[0] = 10;
    p.st[1].tile[0] = 2;
    refused(r, &p, "stage 1 ('b') gives both", NULL);
    p.st[1].tiles = 0;
    p.st[1].size[1] = 10;
    p.st[1].tile[1] = 3;
    refused(r, &p, "size[0] and tile[0] must be at least 1", NULL);
    p.st[1].tiles = 0;
    p.st[1].size[0] = 1u << 20;
    p.st[1].size[1] = 1u << 20;
    p.st[1].tile[0] = 1;
    refused(r, &p, "stage 1 ('b') has 1099511627776 tiles", NULL);
    p.st[0].tiles = CW_FUSED_MAX_TILES;
    p.st[1].tiles = CW_FUSED_MAX_TILES;
    refused(r, &p, "tiles in all", NULL);
    p.st[1].threads = 48;
    refused(r, &p, "stage 1 ('b') asks 48 threads", NULL);
    p.st[1].threads = 512;
    refused(r, &p, "stage 1 ('b') asks 512 threads", "up to the block's 256");
    p.st[1].dep_count = CW_FUSED_MAX_DEPS + 1;
    refused(r, &p, "stage 1 ('b'): dep_count 17", NULL);
    p.st[1].deps = NULL;
    refused(r, &p, "with deps NULL", NULL);
    /* dependencies */
    p.d[0].reserved[0] = 1;
    refused(r, &p, "stage 1 ('b') dependency 0: nonzero reserved", NULL);
    p.d[0].read = (cw_fused_read)9;
    refused(r, &p, "read 9 is not a cw_fused_read", NULL);
    p.d[0].stage = 5;
    refused(r, &p, "reads stage 5, which does not exist", NULL);
    p.d[0].stage = 1;
    refused(r, &p, "stage 1 ('b') reads itself", NULL);
    p.d[0].stage = 2;
    refused(r, &p, "stage 1 ('b') reads a stage that runs after it", NULL);
    p.d[0].radius = 1;
    refused(r, &p, "radius and scale apply to CW_FUSED_READ_NEIGHBOURS only, not CW_FUSED_READ_SAME", NULL);
    p.d[0].function = "pick";
    refused(r, &p, "function is set but read is not CW_FUSED_READ_FUNCTION", NULL);
    p.d[0].read = CW_FUSED_READ_FUNCTION;
    refused(r, &p, "CW_FUSED_READ_FUNCTION needs its function's name", NULL);
    p.d[0].read = CW_FUSED_READ_FUNCTION;
    p.d[0].function = "nowhere";
    refused(r, &p, "function 'nowhere' is not in the source", NULL);
    p.d[0].read = CW_FUSED_READ_FUNCTION;
    p.d[0].function = "no-ident";
    refused(r, &p, "function 'no-ident' is not an identifier", NULL);
    p.st[1].tiles = 4;
    refused(r, &p, "tile for tile (CW_FUSED_READ_SAME) but their tile grids differ (4x1 and 8x1)", NULL);
    p.d[0].read = CW_FUSED_READ_NEIGHBOURS;
    p.d[0].scale_num = 3;
    refused(r, &p, "scale 3/0", NULL);
    p.d[0].read = CW_FUSED_READ_NEIGHBOURS;
    p.d[0].scale_num = 2;
    p.d[0].scale_den = 1; /* 8 tiles map to 16 of a's 8 */
    refused(r, &p, "at scale 2/1: its 8x1 tiles map to 16x1 tiles of 'a', which has 8x1", "outside the tile range");
    p.d[0].read = CW_FUSED_READ_NEIGHBOURS;
    p.d[0].radius = 9;
    refused(r, &p, "with radius 9: more than its tile grid", NULL);
    /* accepted after all that: a with 16 tiles read at scale 2/1 by b's 8 */
    p.st[0].tiles = 16;
    p.d[0].read = CW_FUSED_READ_NEIGHBOURS;
    p.d[0].scale_num = 2;
    p.d[0].scale_den = 1;
    p.d[0].radius = 1;
    assert_cw_ok(cw_resident_set_fused(r, &p.f));
    /* a later stage with previous is fine, and so is itself */
    plan3_init(&p);
    p.d[0].stage = 2;
    p.d[0].read = CW_FUSED_READ_ALL;
    p.d[0].previous = 1;
    assert_cw_ok(cw_resident_set_fused(r, &p.f));
    plan3_init(&p);
    p.d[0].stage = 1;
    p.d[0].previous = 1;
    assert_cw_ok(cw_resident_set_fused(r, &p.f));
    cw_resident_destroy(&r);
}

/* The source the library makes of tests/dataflow_stages.h's plan (two in
 * flight, 128 threads a block); the caller frees it. */
static char *stages_source(void) {
    cw_fused_stage st[9];
    cw_fused_dep deps[10];
    dataflow_plan_fill(st, deps);
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kDataflowStages;
    f.mode = CW_FUSED_DATAFLOW;
    f.stage_defs = st;
    f.stage_count = 9;
    f.block_threads = 128;
    f.in_flight = 2;
    char *src = cwi_resident_fused_source(&f);
    assert_non_null(src);
    return src;
}

/* The source: the protocol, the tables as the plan, the dispatches. */
static void test_source(void **state) {
    (void)state;
    char *src = stages_source();
    assert_non_null(strstr(src, "#line 1 \"stages.cu\"\n"));
    assert_non_null(strstr(src, "#line 1 \"cuweave_fused_dataflow.cu\"\n"));
    assert_non_null(strstr(src, "CWF_FN unsigned cwf_df_take(")); /* the protocol's text */
    assert_non_null(strstr(src, "__global__ void __launch_bounds__(CWF_BLOCK) cwf_dataflow_loop("));
    /* chains: {produce, same} (same reads produce tile for tile), then each
     * stage alone: 64 + 64 + 32 + 1 + 16 + 64 + 28 + 28 tasks a request */
    assert_non_null(strstr(src, "#define CWF_TASKS 297u\n"));
    assert_non_null(strstr(src, "#define CWF_CHAINS 8u\n"));
    assert_non_null(strstr(src, "#define CWF_FINAL 0u\n")); /* the last stage has 28 tiles */
    assert_non_null(strstr(src, "#define CWF_STAGES 9u\n"));
    assert_non_null(strstr(src, "#define CWF_IN_FLIGHT 2u\n"));
    assert_non_null(strstr(src, "#define CWF_ALLS 2u\n")); /* same and down are read whole */
    assert_non_null(strstr(src, "#define CWF_BLOCK 128\n"));
    /* rows: chain, tiles, tiles_x, tiles_y, dep_first, dep_count, all, done, publish */
    assert_non_null(strstr(src, "{0u, 64u, 64u, 1u, 0u, 0u, 4294967295u, 0u, 1u, 0u}, /* produce */"));
    assert_non_null(strstr(src, "{0u, 64u, 64u, 1u, 0u, 1u, 0u, 64u, 1u, 0u}, /* same */"));
    assert_non_null(strstr(src, "{2u, 32u, 32u, 1u, 2u, 1u, 1u, 192u, 0u, 0u}, /* down */")); /* read whole only */
    assert_non_null(strstr(src, "{6u, 28u, 7u, 4u, 7u, 0u, 4294967295u, 305u, 1u, 0u}, /* grid */"));
    /* chains: task, first stage, stages, tiles */
    assert_non_null(strstr(src, "    {0u, 0u, 2u, 64u},\n    {64u, 2u, 1u, 64u},\n    {128u, 3u, 1u, 32u},\n"));
    /* deps: stage, read, radius, num, den, previous, fn, local */
    assert_non_null(strstr(src, "{0u, 1u, 0u, 0u, 0u, 0u, 4294967295u, 1u},")); /* same <- produce: the block's own */
    assert_non_null(strstr(src, "{0u, 2u, 2u, 1u, 1u, 0u, 4294967295u, 0u},")); /* stencil: radius 2, 1/1 */
    assert_non_null(strstr(src, "{1u, 2u, 0u, 2u, 1u, 0u, 4294967295u, 0u},")); /* down: 2/1 */
    assert_non_null(strstr(src, "{2u, 4u, 0u, 0u, 0u, 0u, 0u, 0u},"));          /* picked: function 0 */
    assert_non_null(strstr(src, "{0u, 1u, 0u, 0u, 0u, 1u, 4294967295u, 0u},")); /* previous */
    /* geometry: size and tile of grid; threads and shared of same */
    assert_non_null(strstr(src, "{100u, 30u, 16u, 8u, 128u, 0u},"));
    assert_non_null(strstr(src, "{0u, 0u, 0u, 0u, 32u, 128u},"));
    assert_non_null(strstr(src, "case 0u: return pick(t, i);"));
    assert_non_null(strstr(src, "case 1u: if (threadIdx.x < 32u) same(t, user); break;"));
    assert_non_null(strstr(src, "case 0u: produce(t, user); break;"));
    free(src);
}

typedef int (*nvrtc_create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*nvrtc_compile_fn)(void *, int, const char *const *);
typedef int (*nvrtc_logsize_fn)(void *, size_t *);
typedef int (*nvrtc_log_fn)(void *, char *);
typedef int (*nvrtc_destroy_fn)(void **);

/* With a real NVRTC here (no GPU needed): the GPU test's stages compile for
 * sm_80 and sm_90, with its options (the hang and the bad tile on). */
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
    char *src = stages_source();
    const char *hname[] = {"cuweave/resident_device.h"};
    const char *htext[] = {cw_builtin_get_resident_header()};
    const char *archs[] = {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90"};
    for (int i = 0; i < 2; i++) {
        void *prog = NULL;
        assert_int_equal(create(&prog, src, "cuweave_fused_dataflow.cu", 1, htext, hname), 0);
        const char *opts[] = {archs[i], "-DDF_IN_FLIGHT=2ull", "-DDF_HANG_SEQ=5ull", "-DDF_BAD_TILE=3ull"};
        const int rc = compile(prog, 4, opts);
        size_t n = 0;
        logsize(prog, &n);
        char *log = malloc(n + 1);
        assert_non_null(log);
        log[0] = 0;
        getlog(prog, log);
        if (rc != 0) fail_msg("NVRTC (%s) refused the dataflow loop's source: %s", archs[i], log);
        free(log);
        destroy(&prog);
    }
    free(src);
}

/* On the fake: the state zeroed before each launch is the plan's size, the
 * launch is cooperative with the kernel's shared memory the most a stage
 * asks; a stall the GPU would write is reported, stages named. */
static void test_launch_and_stall(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    struct cw_res_host *h = cwi_resident_host(r);
    plan3 p;
    plan3_init(&p);
    p.st[1].shared_bytes = 4096;
    p.f.grid_blocks = 4;
    p.f.in_flight = 2;
    assert_cw_ok(cw_resident_set_fused(r, &p.f));
    unsigned long long state_ptr = 0;
    size_t bytes = 0;
    assert_int_equal(cwi_resident_fused_state(r, &state_ptr, &bytes), 0);
    /* the fixed words, one count (b read whole) per slot, a done word per tile */
    assert_int_equal(bytes, (size_t)CWF_STATE_WORDS(1, 2, 17) * 8u);
    const long memsets = fake_calls("cuMemsetD32Async");
    unsigned l[5];
    assert_cw_ok(cw_resident_launch(r));
    fake_last_launch(l);
    assert_int_equal(l[0], 4);
    assert_int_equal(l[1], 256);
    assert_int_equal(l[2], 4096);
    assert_int_equal(l[3], 1);
    assert_int_equal(fake_calls("cuMemsetD32Async"), memsets + 2); /* the build's trial run and the launch */
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_null(info.stall);
    /* requests 1 and 2 made; the GPU serves 1, then stage 'b' tile 5 of
     * request 2 waits too long for 'a' tile 5, which finished request 1 */
    assert_cw_ok(cw_resident_data_ready(r, NULL));
    assert_cw_ok(cw_resident_data_ready(r, NULL));
    __atomic_store_n(&h->completed, 1, __ATOMIC_RELEASE);
    unsigned long long *w = (unsigned long long *)(uintptr_t)state_ptr;
    const unsigned long long rec[8] = {CWF_STALL_WAIT, 2, 1, 5, 0, 5, 1, 2};
    memcpy(&w[CWF_W_STALL], rec, sizeof rec);
    __atomic_store_n(&h->exit_reason, CW_RES_EXIT_STALLED, __ATOMIC_RELEASE);
    __atomic_store_n(&h->exited_epoch, __atomic_load_n(&h->epoch, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
    cw_resident_state rs = CW_RESIDENT_RUNNING;
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_STOPPED);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.exit, CW_RESIDENT_EXIT_STALLED);
    assert_non_null(info.stall);
    assert_int_equal(info.stall->kind, 1);
    assert_int_equal(info.stall->request, 2);
    assert_int_equal(info.stall->stage, 1);
    assert_int_equal(info.stall->tile, 5);
    assert_int_equal(info.stall->waited_stage, 0);
    assert_int_equal(info.stall->waited_tile, 5);
    assert_int_equal(info.stall->counter, 1);
    assert_int_equal(info.stall->needed, 2);
    assert_string_equal(info.stall->detail,
                        "stage 'b' tile 5 of request 2 waited longer than the watchdog for stage 'a' tile 5: it had "
                        "finished request 1, 2 needed");
    /* the whole of a stage, and a function's tile out of range */
    const unsigned long long all[8] = {CWF_STALL_WAIT, 2, 2, 0, 1, CWF_NONE, 7, 8};
    memcpy(&w[CWF_W_STALL], all, sizeof all);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_string_equal(info.stall->detail,
                        "stage 'c' tile 0 of request 2 waited longer than the watchdog for the whole of stage 'b': 7 of "
                        "its 8 tiles had finished");
    assert_int_equal(info.stall->waited_tile, UINT32_MAX);
    const unsigned long long range[8] = {CWF_STALL_RANGE, 2, 1, 3, 0, 8, 0, 8};
    memcpy(&w[CWF_W_STALL], range, sizeof range);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.stall->kind, 2);
    assert_string_equal(info.stall->detail,
                        "stage 'b' tile 3 of request 2: its dependency function's call 0 named tile 8 of stage 'a', "
                        "which has 8 tiles");
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_poll_result(r, 2)); /* dropped */
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "dataflow launches"), 0);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenvrtc.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    char tmp[4096], nvrtc[4200], cache[] = "/tmp/cuweave-dataflow-test-XXXXXX";
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
        !(*(void **)&nvrtc_compiles = dlsym(nv, "fake_nvrtc_compiles"))) {
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
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_source),
        cmocka_unit_test(test_source_compiles),
        cmocka_unit_test(test_launch_and_stall),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0) printf("# could not remove %s\n", cache);
    return rc;
}
