/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave's NVTX ranges (src/base/nvtx.hpp, docs/tracing.md "Nsight
 * Systems") seen by an NVTX tool of the test's own (tests/nvtx_inject.c,
 * libnvtxinject.so beside the fake driver), loaded by NVTX from
 * NVTX_INJECTION64_PATH as Nsight Systems' tool is: on the fake driver, a
 * pipeline's runs and compute calls, kernel compiles and cache hits, graph
 * captures and instantiations, a resident loop's launch, requests and
 * waits, collectives. Each test asserts the exact count of every range and
 * mark by name, their payloads, the thread nesting, and that every name was
 * registered with the domain once (not per range); the last asserts that
 * every push was popped on its thread and every start ended, with no
 * malformed call.
 *
 * Usage: test_nvtx_cpu PATH/libfakecuda.so (libfakenvrtc.so, libfakenccl.so
 * and libnvtxinject.so beside it). Exit 77 (skip) when the library was built
 * without NVTX3's headers (the ranges compiled out), a failure instead with
 * CUWEAVE_TESTS_NEED_NVTX=1 (CI: tools/setup.sh installs the nvidia-nvtx
 * wheel's headers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cwtest.h"
#include "graph/resident_abi.h"
#include "testing/seam.h"

static cw_context *ctx;
static char g_root[256];
static char g_dir[4096]; /* the fakes' directory */

/* The tool's counts (tests/nvtx_inject.c). */
static struct {
    unsigned long (*inits)(void);
    unsigned long (*domains)(const char **name);
    unsigned long (*categories)(void);
    unsigned long (*count)(const char *text, const char *what);
    unsigned long long (*payload)(const char *text, int *has);
    unsigned (*category)(const char *text);
    unsigned long (*registered)(unsigned long *registrations);
    void (*totals)(unsigned long out[7]);
    int (*max_depth)(void);
    unsigned long (*errors)(const char **first);
    void (*reset)(void);
} nvi;

static unsigned long pushes(const char *name) { return nvi.count(name, "p"); }
static unsigned long marks(const char *name) { return nvi.count(name, "m"); }
static unsigned long starts(const char *name) { return nvi.count(name, "s"); }

/* The names the library registers when a tool attaches (nvtx.hpp's list). */
static const char *const kFixed[] = {
    "cw_pipeline_run",         "operator compute",          "resident build",  "cw_resident_launch",
    "resident request",        "cw_resident_wait_result",   "cw_resident_tear_down", "graph capture",
    "graph instantiate",       "cw_program_compile",        "NVRTC compile",   "kernel cache hit (memory)",
    "kernel cache hit (disk)", "all-reduce",                "broadcast",       "NCCL group begin",
    "NCCL group end",
};
enum { NFIXED = sizeof kFixed / sizeof kFixed[0] };

/* Every push popped on its thread, every start ended, no malformed call,
 * and each registered text registered once: what `what` left behind. */
static void assert_balanced(const char *what) {
    unsigned long t[7];
    nvi.totals(t);
    const char *first = NULL;
    const unsigned long errors = nvi.errors(&first);
    if (errors) fail_msg("%s: the tool saw %lu malformed calls, the first: %s", what, errors, first);
    if (t[0] != t[1]) fail_msg("%s: %lu pushes, %lu pops", what, t[0], t[1]);
    if (t[2] != t[3]) fail_msg("%s: %lu starts, %lu ends", what, t[2], t[3]);
    if (t[5] || t[6]) fail_msg("%s: %lu threads with ranges open, %lu start ranges open", what, t[5], t[6]);
    unsigned long registrations = 0;
    const unsigned long texts = nvi.registered(&registrations);
    if (registrations != texts) fail_msg("%s: %lu registrations of %lu texts", what, registrations, texts);
    assert_int_equal(texts, cwi_nvtx_registered());
}

/* ---- the domain and its names -------------------------------------------- */

static void test_domain_and_names(void **state) {
    (void)state;
    assert_int_equal(cwi_nvtx_on(), 1);
    assert_int_equal(nvi.inits(), 1);
    const char *name = NULL;
    assert_int_equal(nvi.domains(&name), 1);
    assert_string_equal(name, "cuweave");
    assert_int_equal(nvi.categories(), 5); /* pipeline, resident, graph, jit, collective */
    for (int i = 0; i < NFIXED; i++)
        if (nvi.count(kFixed[i], "r") != 1)
            fail_msg("\"%s\" registered %lu times", kFixed[i], nvi.count(kFixed[i], "r"));
    unsigned long registrations = 0;
    assert_int_equal(nvi.registered(&registrations), NFIXED); /* nothing else yet */
    assert_int_equal(registrations, NFIXED);
    assert_balanced("the domain");
}

/* ---- a pipeline ------------------------------------------------------------ */

typedef struct Op {
    const char *in[2];
    int nout;
} Op;

static cw_status op_compute(cw_io *io, void *user) {
    const Op *o = user;
    cw_message m;
    for (int i = 0; i < 2 && o->in[i]; i++) {
        cw_status st = cw_io_receive(io, o->in[i], &m);
        if (st != CW_SUCCESS) return st;
    }
    for (int i = 0; i < o->nout; i++) {
        cw_status st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL);
        if (st != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

static Op src = {{NULL, NULL}, 2}, left = {{"in", NULL}, 1}, right = {{"in", NULL}, 1}, sink = {{"a", "b"}, 0};

static cw_operator *make_op(const char *name, Op *o) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = op_compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, name, &ops, o, NULL));
    for (int i = 0; i < 2; i++)
        if (o->in[i]) assert_cw_ok(cw_operator_add_input(op, o->in[i], NULL));
    if (o->nout > 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    if (o->nout > 1) assert_cw_ok(cw_operator_add_output(op, "out2", NULL));
    return op;
}

static cw_pipeline *make_diamond(unsigned threads) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = threads;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    assert_cw_ok(cw_pipeline_add(p, make_op("src", &src)));
    assert_cw_ok(cw_pipeline_add(p, make_op("left", &left)));
    assert_cw_ok(cw_pipeline_add(p, make_op("right", &right)));
    assert_cw_ok(cw_pipeline_add(p, make_op("sink", &sink)));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out", "left", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "right", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "left", "out", "sink", "a"));
    assert_cw_ok(cw_pipeline_connect(p, "right", "out", "sink", "b"));
    return p;
}

static void test_pipeline(void **state) {
    (void)state;
    const char *ops[] = {"src", "left", "right", "sink"};
    nvi.reset();
    const unsigned before = cwi_nvtx_registered();
    /* one executor thread: the compute calls nest inside the run's range */
    cw_pipeline *p = make_diamond(1);
    assert_cw_ok(cw_pipeline_run(p, 5));
    assert_cw_ok(cw_pipeline_run(p, 3));
    assert_int_equal(pushes("cw_pipeline_run"), 2);
    int has = 0;
    assert_int_equal(nvi.payload("cw_pipeline_run", &has), 3); /* the iterations asked for */
    assert_int_equal(has, 1);
    for (int k = 0; k < 4; k++) {
        if (pushes(ops[k]) != 8) fail_msg("operator %s: %lu compute ranges, not 8", ops[k], pushes(ops[k]));
        assert_int_equal(nvi.count(ops[k], "r"), 1); /* registered at its first call, not at each */
        assert_int_equal(nvi.count(ops[k], "a"), 0); /* never as a plain string */
        assert_int_equal(nvi.category(ops[k]), 1);   /* the pipeline category */
    }
    assert_int_equal(nvi.max_depth(), 2); /* run > compute */
    assert_int_equal(cwi_nvtx_registered(), before + 4);
    cw_pipeline_destroy(&p);
    assert_balanced("a pipeline on one thread");

    /* two executor threads, another pipeline with the same names: the
     * names are not registered again; each thread pops what it pushed */
    nvi.reset();
    p = make_diamond(2);
    assert_cw_ok(cw_pipeline_run(p, 4));
    cw_pipeline_destroy(&p);
    assert_int_equal(pushes("cw_pipeline_run"), 1);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(pushes(ops[k]), 4);
        assert_int_equal(nvi.count(ops[k], "r"), 1);
    }
    unsigned long t[7];
    nvi.totals(t);
    assert_true(t[4] >= 2); /* the caller and at least one worker pushed */
    assert_int_equal(cwi_nvtx_registered(), before + 4);
    assert_balanced("a pipeline on two threads");
}

/* ---- kernel compiles and cache hits ---------------------------------------- */

static void test_compiles_and_hits(void **state) {
    (void)state;
    nvi.reset();
    const char *source = "extern \"C\" __global__ void nvtx_probe(int *p) { *p = 42; }";
    cw_program *prog = NULL;
    assert_cw_ok(cw_program_compile(&prog, ctx, source, NULL)); /* compiled, written to the disk cache */
    cw_program_destroy(&prog);
    assert_int_equal(pushes("cw_program_compile"), 1);
    assert_int_equal(pushes("NVRTC compile"), 1);
    assert_int_equal(marks("kernel cache hit (memory)"), 0);
    assert_int_equal(marks("kernel cache hit (disk)"), 0);
    assert_int_equal(nvi.max_depth(), 2); /* compile > NVRTC */
    assert_cw_ok(cw_program_compile(&prog, ctx, source, NULL)); /* from memory */
    cw_program_destroy(&prog);
    cw_jit_cache_clear_memory();
    assert_cw_ok(cw_program_compile(&prog, ctx, source, NULL)); /* from disk */
    cw_program_destroy(&prog);
    assert_int_equal(pushes("cw_program_compile"), 3);
    assert_int_equal(pushes("NVRTC compile"), 1);
    assert_int_equal(marks("kernel cache hit (memory)"), 1);
    assert_int_equal(marks("kernel cache hit (disk)"), 1);
    assert_int_equal(nvi.category("NVRTC compile"), 4); /* jit */
    cw_jit_stats js;
    assert_cw_ok(cw_jit_get_stats(&js));
    assert_int_equal(js.memory_hits, 1);
    assert_int_equal(js.disk_hits, 1);
    assert_balanced("compiles");
}

/* ---- captures and instantiation ------------------------------------------- */

typedef struct Ending {
    cw_stream *s;
    cw_graph *g;
    cw_status st;
} Ending;

static void *end_elsewhere(void *arg) {
    Ending *e = arg;
    e->st = cw_capture_end(&e->g, e->s);
    return NULL;
}

static void test_captures(void **state) {
    (void)state;
    nvi.reset();
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    /* a capture and its instantiation */
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    assert_int_equal(starts("graph capture"), 1);
    unsigned long t[7];
    nvi.totals(t);
    assert_int_equal(t[6], 1); /* open while it captures */
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_exec *e = NULL;
    assert_cw_ok(cw_graph_instantiate(&e, g, 0));
    assert_int_equal(pushes("graph instantiate"), 1);
    cw_graph_exec_destroy(&e);
    cw_graph_destroy(&g);
    /* a relaxed capture ended on another thread: a start/end range, not a push */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_RELAXED));
    Ending end = {s, NULL, CW_ERROR_INVALID_STATE};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, end_elsewhere, &end), 0);
    pthread_join(th, NULL);
    assert_cw_ok(end.st);
    cw_graph_destroy(&end.g);
    /* a capture left open: the stream's destroy ends it, and its range */
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    cw_stream_destroy(&s);
    assert_int_equal(starts("graph capture"), 3);
    assert_int_equal(pushes("graph instantiate"), 1);
    assert_int_equal(nvi.category("graph capture"), 3); /* graph */
    nvi.totals(t);
    assert_int_equal(t[3], 3); /* three ends */
    assert_balanced("captures");
}

/* ---- a resident loop ------------------------------------------------------ */

static void test_resident(void **state) {
    (void)state;
    nvi.reset();
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    struct cw_res_host *h = cwi_resident_host(r);
    assert_non_null(h);
    assert_cw_ok(cw_resident_launch(r)); /* builds: captures its kernels, instantiates */
    assert_int_equal(pushes("cw_resident_launch"), 1);
    assert_int_equal(pushes("resident build"), 1);
    assert_int_equal(pushes("graph instantiate"), 1);
    assert_true(starts("graph capture") >= 1);
    assert_int_equal(nvi.max_depth(), 3); /* launch > build > instantiate */
    uint64_t seq = 0;
    for (int i = 0; i < 3; i++) assert_cw_ok(cw_resident_data_ready(r, &seq));
    assert_int_equal(seq, 3);
    assert_int_equal(marks("resident request"), 3);
    int has = 0;
    assert_int_equal(nvi.payload("resident request", &has), 3); /* the request's number */
    assert_int_equal(has, 1);
    __atomic_store_n(&h->completed, 3, __ATOMIC_RELEASE); /* as the loop's signal kernel would */
    assert_cw_ok(cw_resident_wait_result(r, 2, 100));
    assert_cw_ok(cw_resident_wait_result(r, 3, 100));
    assert_int_equal(pushes("cw_resident_wait_result"), 2);
    assert_int_equal(nvi.payload("cw_resident_wait_result", &has), 3);
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    assert_int_equal(pushes("cw_resident_tear_down"), 1);
    assert_int_equal(nvi.category("resident request"), 2); /* resident */
    cw_resident_destroy(&r);
    assert_int_equal(pushes("cw_resident_launch"), 1); /* the destroy launched nothing */
    assert_balanced("a resident loop");
}

/* ---- collectives --------------------------------------------------------- */

static void test_collectives(void **state) {
    (void)state;
    nvi.reset();
    cw_device_group *group = NULL;
    cw_device_group_info gi;
    assert_cw_ok(cw_device_group_create(&group, NULL, 0));
    assert_cw_ok(cw_device_group_get_info(group, &gi));
    assert_int_equal(gi.count, 2);
    cw_comm *comm = NULL;
    assert_cw_ok(cw_comm_create(&comm, gi.contexts, 2));
    cw_stream *s[2];
    cw_buffer *buf[2];
    cw_devptr send[2], recv[2];
    enum { kCount = 64 };
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_create(&s[r], gi.contexts[r], NULL));
        assert_cw_ok(cw_buffer_create(&buf[r], s[r], 2 * kCount * sizeof(float)));
        assert_cw_ok(cw_buffer_get_writable(buf[r], &send[r]));
        recv[r] = send[r] + kCount * sizeof(float);
    }
    assert_cw_ok(cw_comm_all_reduce(comm, send, recv, kCount, CW_FLOAT32, CW_SUM, s));
    assert_cw_ok(cw_comm_broadcast(comm, send, recv, kCount / 2, CW_FLOAT32, 0, s));
    assert_cw_ok(cw_comm_group_begin());
    for (int r = 0; r < 2; r++)
        assert_cw_ok(cw_comm_all_reduce_rank(comm, r, send[r], recv[r], kCount, CW_FLOAT32, CW_SUM, s[r]));
    assert_cw_ok(cw_comm_group_end());
    assert_int_equal(pushes("all-reduce"), 3);
    assert_int_equal(pushes("broadcast"), 1);
    int has = 0;
    assert_int_equal(nvi.payload("broadcast", &has), kCount / 2); /* the element count */
    assert_int_equal(marks("NCCL group begin"), 1);
    assert_int_equal(marks("NCCL group end"), 1);
    assert_int_equal(nvi.category("all-reduce"), 5); /* collective */
    for (int r = 0; r < 2; r++) {
        assert_cw_ok(cw_stream_synchronize(s[r]));
        cw_buffer_destroy(&buf[r]);
        cw_stream_destroy(&s[r]);
    }
    cw_comm_destroy(&comm);
    cw_device_group_destroy(&group);
    assert_balanced("collectives");
}

/* ---- at the end ----------------------------------------------------------- */

static void test_everything_balanced(void **state) {
    (void)state;
    assert_balanced("the whole run");
    /* the fixed names and the four operators' names, each registered once */
    unsigned long registrations = 0;
    assert_int_equal(nvi.registered(&registrations), NFIXED + 4);
    assert_int_equal(registrations, NFIXED + 4);
    assert_int_equal(nvi.domains(NULL), 1);
}

static int load_tool(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* NVTX loaded it: the library's first range asked */
    if (!lib) {
        printf("FAIL: NVTX did not load the tool %s (%s)\n", path, dlerror());
        return 0;
    }
#define NVI(field, sym)                                                           \
    if (!(*(void **)&nvi.field = dlsym(lib, sym))) {                              \
        printf("FAIL: %s has no %s\n", path, sym);                                \
        return 0;                                                                 \
    }
    NVI(inits, "nvi_inits");
    NVI(domains, "nvi_domains");
    NVI(categories, "nvi_categories");
    NVI(count, "nvi_count");
    NVI(payload, "nvi_payload");
    NVI(category, "nvi_category");
    NVI(registered, "nvi_registered");
    NVI(totals, "nvi_totals");
    NVI(max_depth, "nvi_max_depth");
    NVI(errors, "nvi_errors");
    NVI(reset, "nvi_reset");
#undef NVI
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fakes and libnvtxinject.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    if (!cwi_nvtx_compiled()) {
        const char *need = getenv("CUWEAVE_TESTS_NEED_NVTX");
        if (need && strcmp(need, "1") == 0) {
            printf("FAIL: the library was built without NVTX ranges (no NVTX3 headers found: tools/find-nvtx.sh)\n");
            return 1;
        }
        printf("SKIP: the library was built without NVTX ranges (no NVTX3 headers: pip install nvidia-nvtx, "
               "or the CUDA toolkit; tools/find-nvtx.sh)\n");
        return CWT_SKIP_EXIT;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(g_dir, sizeof g_dir, "%s", dirname(tmp));
    char path[4200];
    /* the tool is named before the first NVTX call: the first range */
    const char *tool = getenv("NVTX_INJECTION64_PATH");
    if (!tool || !*tool) {
        snprintf(path, sizeof path, "%s/libnvtxinject.so", g_dir);
        setenv("NVTX_INJECTION64_PATH", path, 1);
        tool = getenv("NVTX_INJECTION64_PATH");
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    snprintf(path, sizeof path, "%s/libfakenvrtc.so", g_dir);
    setenv("CUWEAVE_LIBNVRTC", path, 1);
    snprintf(path, sizeof path, "%s/libfakenccl.so", g_dir);
    setenv("CUWEAVE_LIBNCCL", path, 1);
    snprintf(g_root, sizeof g_root, "/tmp/cuweave-nvtx-test-XXXXXX"); /* never the user's kernel cache */
    if (!mkdtemp(g_root)) return 1;
    setenv("CUWEAVE_CACHE_DIR", g_root, 1);
    if (!cwi_nvtx_on()) {
        printf("FAIL: no NVTX tool attached (NVTX_INJECTION64_PATH=%s)\n", tool);
        return 1;
    }
    if (!load_tool(tool)) return 1;
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_and_names),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_compiles_and_hits),
        cmocka_unit_test(test_captures),
        cmocka_unit_test(test_resident),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_everything_balanced),
    };
    cwt_filter_from_env(); /* CWT_FILTER=test_name runs one */
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
