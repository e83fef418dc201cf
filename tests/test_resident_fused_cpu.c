/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the resident loop's fused persistent mode
 * (cw_resident_set_fused) against the fake CUDA driver (tests/fake_cuda.c,
 * all features) and the fake NVRTC (tests/fake_nvrtc.c, beside it):
 * every argument and state refusal (and that none of them compiles), the
 * compile error's detail, the co-residency check (grid 0 = the most that
 * fit, one block more refused, nothing fits, no cooperative launch), the
 * kernel cache (the same stages compile once), mutual exclusion with a
 * workload and a handler, settings that do not apply (trace, overlap), the
 * cooperative launch's shape (grid, block, shared bytes, the cooperative
 * attribute) at build and launch, and the host protocol end to end: the
 * test writes the GPU's words (completed) as the fused kernel would and
 * checks sequence numbers, results, double-buffered input slots, dropped
 * requests at a teardown and numbering per launch. Nothing leaks. The
 * kernel's generated source: its parts in order, and, where a real NVRTC
 * is installed (no GPU needed), that it compiles for sm_80 and sm_90.
 * The fake runs no kernels (tests/test_gpu_resident_fused.c runs them).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "graph/resident_abi.h"
#include "testing/seam.h"

static long (*fake_calls)(const char *entry);
static void (*fake_last_launch)(unsigned out[5]);
static long (*nvrtc_compiles)(void);

static cw_context *ctx;

static const char kSource[] =
    "#include \"cuweave/resident_device.h\"\n"
    "extern \"C\" __device__ void first(cw_resident_ctl *ctl, void *user) { (void)ctl; (void)user; }\n"
    "extern \"C\" __device__ void second(cw_resident_ctl *ctl, void *user) { (void)ctl; (void)user; }\n";
static const char *const kStages[] = {"first", "second"};

static cw_resident_fused fused_desc(void) {
    cw_resident_fused f;
    memset(&f, 0, sizeof f);
    f.source = kSource;
    f.stages = kStages;
    f.stage_count = 2;
    return f;
}

static void test_argument_errors(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    const long compiles = nvrtc_compiles();
    cw_resident_fused f = fused_desc();
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(NULL, &f));
    uint32_t junk[64] = {0};
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_resident_set_fused((cw_resident *)junk, &f));
    static const char *const bad_names[] = {"first", NULL};
    static const char *const not_ident[] = {"1st"};
    static const char *const missing[] = {"third"};
    static const char *const partial[] = {"firs"}; /* a prefix of a name is not the name */
    static const char *const opts_null[] = {NULL};
    struct {
        const char *what, *detail;
    } cases[] = {
        {"NULL source", "source"},   {"NULL stages", "stages"},        {"0 stages", "stage_count 0"},
        {"65 stages", "stage_count 65"}, {"NULL name", "(NULL)"},      {"not an identifier", "'1st' is not an identifier"},
        {"not in source", "'third', is not in the source"}, {"prefix", "'firs', is not in the source"},
        {"options NULL", "options"}, {"an option NULL", "options[i]"}, {"1025 threads", "block_threads 1025"},
        {"reserved", "reserved"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        f = fused_desc();
        switch (i) {
        case 0: f.source = NULL; break;
        case 1: f.stages = NULL; break;
        case 2: f.stage_count = 0; break;
        case 3: f.stage_count = 65; break;
        case 4: f.stages = bad_names; break;
        case 5: f.stages = not_ident, f.stage_count = 1; break;
        case 6: f.stages = missing, f.stage_count = 1; break;
        case 7: f.stages = partial, f.stage_count = 1; break;
        case 8: f.option_count = 1; break;
        case 9: f.options = opts_null, f.option_count = 1; break;
        case 10: f.block_threads = 1025; break;
        case 11: f.reserved[7] = 1; break;
        }
        cw_status st = cw_resident_set_fused(r, &f);
        if (st != CW_ERROR_INVALID_ARGUMENT) fail_msg("%s: %s", cases[i].what, cw_status_name(st));
        assert_detail("cw_resident_set_fused");
        if (!strstr(cw_last_error()->message, cases[i].detail))
            fail_msg("%s: detail '%s' lacks '%s'", cases[i].what, cw_last_error()->message, cases[i].detail);
    }
    assert_int_equal(nvrtc_compiles(), compiles); /* nothing refused reached NVRTC */
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 0);
    cw_resident_destroy(&r);
}

static void test_compile_error(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    const long libs = fake_live("library");
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_resident_fused f = fused_desc();
    char src[512];
    snprintf(src, sizeof src, "%s#error stage two does not build\n", kSource);
    f.source = src;
    assert_cw(CW_ERROR_COMPILE, cw_resident_set_fused(r, &f));
    assert_detail("cw_resident_set_fused");
    assert_non_null(strstr(cw_last_error()->message, "stage two does not build"));
    /* the user's lines are numbered from 1 in "stages.cu": the log says where */
    assert_non_null(strstr(cw_jit_get_compile_log(), "error"));
    assert_int_equal(fake_live("library"), libs);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 0);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "a compile error"), 0);
}

/* grid 0: the most that fit (the fake: 2048 threads an SM, 132 SMs);
 * one more block is refused with the figure; nothing fitting is refused;
 * a device without cooperative launch is refused. */
static void test_grid_fits(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    const long libs = fake_live("library");
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_resident_fused f = fused_desc();
    const long occ = fake_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_int_equal(fake_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor"), occ + 1);
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 1);
    assert_int_equal(info.block_threads, 256);          /* the default */
    assert_int_equal(info.max_grid_blocks, 8 * 132);    /* 2048 / 256 an SM */
    assert_int_equal(info.grid_blocks, 8 * 132);        /* 0: the most */
    assert_int_equal(fake_live("library"), libs + 1);

    f.block_threads = 1024;
    f.grid_blocks = 2 * 132;
    assert_cw_ok(cw_resident_set_fused(r, &f)); /* replaces the kernel: the old module goes */
    assert_int_equal(fake_live("library"), libs + 1);
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.grid_blocks, 264);
    assert_int_equal(info.max_grid_blocks, 264);
    assert_int_equal(info.block_threads, 1024);

    f.grid_blocks = 265;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "a grid of 265 blocks does not fit co-resident: at most 264"));
    assert_non_null(strstr(cw_last_error()->message, "132 SMs"));
    assert_cw_ok(cw_resident_get_info(r, &info)); /* the loop keeps what it had */
    assert_int_equal(info.grid_blocks, 264);
    assert_int_equal(fake_live("library"), libs + 1);

    f.grid_blocks = 1;
    f.shared_bytes = 100 * 1024; /* above 48 KiB: the attribute is set first */
    const long attrs = fake_calls("cuFuncSetAttribute");
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_int_equal(fake_calls("cuFuncSetAttribute"), attrs + 1);

    setenv("FAKE_CUDA_OCCUPANCY", "0", 1);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "no block of 1024 threads"));
    unsetenv("FAKE_CUDA_OCCUPANCY");
    setenv("FAKE_CUDA_NO_COOPERATIVE", "1", 1);
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "cooperative launch"));
    unsetenv("FAKE_CUDA_NO_COOPERATIVE");
    assert_int_equal(fake_live("library"), libs + 1);

    /* NULL: a graph loop again (the module goes) */
    assert_cw_ok(cw_resident_set_fused(r, NULL));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.fused, 0);
    assert_int_equal(info.grid_blocks, 0);
    assert_int_equal(fake_live("library"), libs);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "grid checks"), 0);
    assert_int_equal(fake_live("library"), libs);
}

/* The same stages compile once (the kernel cache); other stages again. */
static void test_kernel_cache(void **state) {
    (void)state;
    cw_resident *a = NULL, *b = NULL;
    assert_cw_ok(cw_resident_create(&a, ctx, NULL));
    assert_cw_ok(cw_resident_create(&b, ctx, NULL));
    cw_resident_fused f = fused_desc();
    f.user = 0x1234; /* not part of the code */
    const long c0 = nvrtc_compiles();
    assert_cw_ok(cw_resident_set_fused(a, &f));
    const long c1 = nvrtc_compiles();
    assert_true(c1 <= c0 + 1);
    f.user = 0x5678;
    f.grid_blocks = 3;
    assert_cw_ok(cw_resident_set_fused(b, &f));
    assert_int_equal(nvrtc_compiles(), c1); /* a hit */
    f.stage_count = 1;                      /* other stages: other code */
    assert_cw_ok(cw_resident_set_fused(b, &f));
    assert_int_equal(nvrtc_compiles(), c1 + 1);
    cw_resident_destroy(&a);
    cw_resident_destroy(&b);
}

/* A fused loop has no workload or handler, and refuses settings that do
 * not apply; a launched one cannot change. */
static void test_states(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_graph *g = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    assert_cw_ok(cw_graph_add_empty(g, NULL, 0, NULL));
    cw_resident_fused f = fused_desc();
    const long compiles = nvrtc_compiles();

    assert_cw_ok(cw_resident_set_workload(r, g));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "workload"));
    assert_cw_ok(cw_resident_set_workload(r, NULL));
    assert_cw_ok(cw_resident_set_handler(r, g));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "data-ready handler"));
    assert_cw_ok(cw_resident_set_handler(r, NULL));

    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.trace = 1;
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "trace"));
    s.trace = 0;
    s.overlap = 1;
    s.gate = CW_RESIDENT_GATE_KERNELS;
    assert_cw_ok(cw_resident_configure(r, &s));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_set_fused(r, &f));
    assert_non_null(strstr(cw_last_error()->message, "overlap"));
    assert_int_equal(nvrtc_compiles(), compiles); /* refused before compiling */
    cw_resident_settings_default(&s);
    assert_cw_ok(cw_resident_configure(r, &s));

    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_workload(r, g));
    assert_non_null(strstr(cw_last_error()->message, "fused"));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_handler(r, g));
    assert_cw_ok(cw_resident_set_workload(r, NULL)); /* removing none is fine */
    s.trace = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_resident_configure(r, &s));
    assert_non_null(strstr(cw_last_error()->message, "trace"));
    s.trace = 0;
    s.unroll = 3; /* ignored by a fused loop, accepted */
    s.gate = CW_RESIDENT_GATE_KERNELS;
    assert_cw_ok(cw_resident_configure(r, &s));

    assert_cw_ok(cw_resident_launch(r));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_fused(r, &f));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_set_fused(r, NULL));
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    assert_cw_ok(cw_resident_set_fused(r, NULL));
    assert_cw_ok(cw_resident_set_workload(r, g)); /* a graph loop again */
    cw_graph_destroy(&g);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "fused states"), 0);
}

/* Build runs the kernel once, cooperatively, with the stop asked; launch
 * runs it again; then the host protocol as the GPU would drive it. */
static void test_launch_and_protocol(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.input_slots = 2;
    s.input_bytes = 64;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, &s));
    struct cw_res_host *h = cwi_resident_host(r);
    cw_resident_fused f = fused_desc();
    f.grid_blocks = 7;
    f.block_threads = 128;
    f.shared_bytes = 512;
    assert_cw_ok(cw_resident_set_fused(r, &f));
    const long graphs = fake_calls("cuGraphLaunch");
    const long memsets = fake_calls("cuMemsetD32Async");
    unsigned l0[5], l[5];
    fake_last_launch(l0);

    assert_cw_ok(cw_resident_build(r)); /* the trial run */
    fake_last_launch(l);
    assert_int_equal(l[4], l0[4] + 1);
    assert_int_equal(l[0], 7);
    assert_int_equal(l[1], 128);
    assert_int_equal(l[2], 512);
    assert_int_equal(l[3], 1); /* cooperative */
    assert_int_equal(fake_calls("cuMemsetD32Async"), memsets + 1); /* the barrier zeroed first */
    assert_int_equal(__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE), 1);
    assert_cw_ok(cw_resident_build(r)); /* nothing changed: nothing runs */
    fake_last_launch(l);
    assert_int_equal(l[4], l0[4] + 1);

    assert_cw_ok(cw_resident_launch(r));
    fake_last_launch(l);
    assert_int_equal(l[4], l0[4] + 2);
    assert_int_equal(l[3], 1);
    assert_int_equal(fake_calls("cuGraphLaunch"), graphs); /* no graph */
    assert_int_equal(__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE), 0);
    cw_resident_state rs;
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_RUNNING);

    /* double-buffered inputs: requests 1 and 2 take slots 0 and 1; the
     * third waits for request 1 */
    cw_devptr slot0 = 0, slot1 = 0, p = 0;
    assert_cw_ok(cw_resident_get_input(r, 0, &slot0));
    assert_cw_ok(cw_resident_get_input(r, 1, &slot1));
    uint64_t seq[3];
    assert_cw_ok(cw_resident_next_input(r, 0, &p));
    assert_int_equal(p, slot0);
    assert_cw_ok(cw_resident_data_ready(r, &seq[0]));
    assert_cw_ok(cw_resident_next_input(r, 0, &p));
    assert_int_equal(p, slot1);
    assert_cw_ok(cw_resident_data_ready(r, &seq[1]));
    assert_int_equal(seq[0], 1);
    assert_int_equal(seq[1], 2);
    assert_cw(CW_ERROR_TIMEOUT, cw_resident_next_input(r, 0, &p));
    assert_cw(CW_ERROR_NOT_READY, cw_resident_poll_result(r, 1));
    __atomic_store_n(&h->completed, 1, __ATOMIC_RELEASE); /* the kernel served request 1 */
    assert_cw_ok(cw_resident_wait_result(r, 1, 0));
    assert_cw_ok(cw_resident_next_input(r, 0, &p));
    assert_int_equal(p, slot0);
    assert_cw_ok(cw_resident_data_ready(r, &seq[2]));
    assert_int_equal(seq[2], 3);
    __atomic_store_n(&h->completed, 2, __ATOMIC_RELEASE);
    assert_cw_ok(cw_resident_poll_result(r, 2));
    cw_resident_info info;
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.requested, 3);
    assert_int_equal(info.completed, 2);
    assert_int_equal(info.fused, 1);
    assert_int_equal(info.grid_blocks, 7);

    /* tear down: request 3 was taken and not served: dropped */
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_STOPPED);
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_poll_result(r, 3));
    assert_non_null(strstr(cw_last_error()->message, "dropped"));
    assert_cw(CW_ERROR_INVALID_STATE, cw_resident_data_ready(r, NULL));

    /* relaunch: numbers go on after every number used; no rebuild */
    assert_cw_ok(cw_resident_launch(r));
    fake_last_launch(l);
    assert_int_equal(l[4], l0[4] + 3);
    assert_int_equal(__atomic_load_n(&h->base, __ATOMIC_ACQUIRE), 3);
    uint64_t s4 = 0;
    assert_cw_ok(cw_resident_data_ready(r, &s4));
    assert_int_equal(s4, 4);
    __atomic_store_n(&h->completed, 4, __ATOMIC_RELEASE);
    assert_cw_ok(cw_resident_wait_result(r, 4, 100));
    assert_cw_ok(cw_resident_get_info(r, &info));
    assert_int_equal(info.launches, 2);
    cw_resident_destroy(&r); /* tears the running loop down */
    assert_int_equal(leaks(before, "fused launches"), 0);
}

/* A failed cooperative launch leaves nothing launched and the loop
 * counted as not running (a module loads afterwards). */
static void test_launch_failure(void **state) {
    (void)state;
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    cw_resident_fused f = fused_desc();
    f.grid_blocks = 1;
    assert_cw_ok(cw_resident_set_fused(r, &f));
    assert_cw_ok(cw_resident_build(r));
    assert_int_equal(cwi_seam_enable(), 0);
    cwi_seam_fail(cwi_seam_entry("cuLaunchKernelEx"), 1, 701 /* CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES */);
    cw_status st = cw_resident_launch(r);
    assert_int_equal(cwi_seam_fired(), 1);
    cwi_seam_disable();
    assert_int_not_equal(st, CW_SUCCESS);
    assert_non_null(strstr(cw_last_error()->driver_call, "cuLaunchKernelEx"));
    cw_resident_state rs;
    assert_cw_ok(cw_resident_get_state(r, &rs));
    assert_int_equal(rs, CW_RESIDENT_NOT_LAUNCHED);
    cw_module *m = NULL;
    static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
    assert_cw_ok(cw_module_load_image(&m, image)); /* not refused: no loop counted as running */
    cw_module_destroy(&m);
    assert_cw_ok(cw_resident_launch(r));
    assert_cw_ok(cw_resident_tear_down(r, 1000));
    cw_resident_destroy(&r);
}

/* ---- fault sweep: every driver call of create + set_fused + launch +
 * data_ready + tear_down failed in turn; each run returns an error (named
 * after the public call that failed) or absorbs a failed release, and
 * leaves nothing behind (modules included). */
static const char *g_step;
#define STEP(call) (g_step = #call, (call))
static cw_status scenario(cw_resident **r) {
    cw_resident_settings s;
    cw_resident_settings_default(&s);
    s.input_slots = 2;
    s.input_bytes = 16;
    cw_status st = STEP(cw_resident_create)(r, ctx, &s);
    if (st != CW_SUCCESS) return st;
    cw_resident_fused f = fused_desc();
    f.grid_blocks = 3;
    f.shared_bytes = 64 * 1024; /* the attribute call too */
    st = STEP(cw_resident_set_fused)(*r, &f);
    if (st == CW_SUCCESS) st = STEP(cw_resident_launch)(*r);
    if (st == CW_SUCCESS) st = STEP(cw_resident_data_ready)(*r, NULL);
    if (st == CW_SUCCESS) st = STEP(cw_resident_tear_down)(*r, 100);
    return st;
}

static void (*fake_pers_watch)(int on);

static void test_fault_sweep(void **state) {
    (void)state;
    fake_pers_watch(0); /* issue 38's marks: a failed cuStreamQuery never reaches the fake, its mark would stay */
    assert_int_equal(cwi_seam_enable(), CW_SUCCESS);
    cw_resident *r = NULL;
    assert_int_equal(scenario(&r), CW_SUCCESS); /* once first: what is done once per process */
    cw_resident_destroy(&r);
    long before[NKINDS];
    snapshot(before);
    long libs = fake_live("library");
    cwi_seam_reset();
    assert_int_equal(scenario(&r), CW_SUCCESS);
    const unsigned long calls = cwi_seam_calls(-1);
    cw_resident_destroy(&r);
    assert_int_equal(leaks(before, "the clean run"), 0);
    assert_int_equal(fake_live("library"), libs);
    unsigned long handled = 0, absorbed = 0, tried = 0, bad = 0;
    for (unsigned long k = 1; k <= calls; k++) {
        r = NULL;
        cwi_seam_reset();
        cwi_seam_fail(-1, k, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
        cw_status st = scenario(&r);
        const int fired = cwi_seam_fired();
        char function[64];
        snprintf(function, sizeof function, "%s", cw_last_error()->function);
        const char *entry = cwi_seam_fired_entry() >= 0 ? cwi_seam_entry_name(cwi_seam_fired_entry()) : "?";
        const int is_release = strstr(entry, "Destroy") || strstr(entry, "Free") || strstr(entry, "Unload");
        cwi_seam_reset();
        if (!fired) {
            if (st != CW_SUCCESS) bad++;
            cw_resident_destroy(&r);
            break;
        }
        tried++;
        if (is_release) {
            absorbed++;
            cw_resident_destroy(&r);
            snapshot(before);
            libs = fake_live("library");
            continue;
        }
        if (st == CW_SUCCESS) {
            printf("# call %lu (%s) failing: the scenario returned CW_SUCCESS\n", k, entry);
            bad++;
        } else {
            handled++;
            if (strcmp(function, g_step) != 0) {
                printf("# call %lu (%s): the detail names %s, the call that failed was %s\n", k, entry, function,
                       g_step);
                bad++;
            }
        }
        cw_resident_destroy(&r);
        char what[64];
        snprintf(what, sizeof what, "failing call %lu (%s)", k, entry);
        if (leaks(before, what)) bad++;
        if (fake_live("library") != libs) {
            printf("# %s: a module left behind\n", what);
            bad++;
        }
    }
    r = NULL;
    assert_int_equal(scenario(&r), CW_SUCCESS); /* the library still works */
    cw_resident_destroy(&r);
    cwi_seam_disable();
    fake_pers_watch(1);
    printf("# fused fault sweep: %lu driver calls, %lu failures injected: %lu returned an error and leaked nothing, "
           "%lu failed releases absorbed; %lu problems\n",
           calls, tried, handled, absorbed, bad);
    assert_int_equal(bad, 0);
    assert_int_equal(handled + absorbed, tried);
    assert_true(tried >= 20);
}

/* The kernel's source: the device header (which holds the loop's layout) and resident_abi.h (its include
 * rewritten to the in-memory name), the caller's source from line 1 of
 * "stages.cu", then the loop calling the stages in order, a grid barrier
 * between each two, and at the iteration's end every block's arrival for
 * block 0 (system-wide with sync_with_host). */
static void test_generated_source(void **state) {
    (void)state;
    static const char *const three[] = {"second", "first", "second"};
    cw_resident_fused f = fused_desc();
    f.stages = three;
    f.stage_count = 3;
    char *src = cwi_resident_fused_source(&f);
    assert_non_null(src);
    assert_non_null(strstr(src, "#include \"cuweave/resident_device.h\""));
    assert_null(strstr(src, "../../include"));
    assert_non_null(strstr(src, "CW_RES_MAX_STAGES")); /* resident_abi.h, embedded; the layout comes with the device header */
    const char *user = strstr(src, "#line 1 \"stages.cu\"\n");
    assert_non_null(user);
    assert_non_null(strstr(user, kSource));
    const char *a = strstr(src, "        second((cw_resident_ctl *)d, user);\n        cwf_barrier(s, &target, 0u);\n");
    assert_non_null(a);
    const char *b = strstr(a + 1, "        first((cw_resident_ctl *)d, user);\n        cwf_barrier(s, &target, 0u);\n");
    assert_non_null(b);
    /* the last stage's end is the iteration's: every block arrives (released
     * system-wide with sync_with_host), block 0 alone waits, then signals */
    const char *c = strstr(b + 1, "        second((cw_resident_ctl *)d, user);\n        /* the iteration's end");
    assert_non_null(c);
    assert_non_null(strstr(c, "cwf_arrive(s, sys);"));
    assert_non_null(strstr(c, "if (lead) cwf_wait(&s->arrive, target, ~0ull, 0u);"));
    assert_true(strstr(c, "if (lead) cwf_wait(&s->arrive") < strstr(c, "if (lead) cwf_signal(h, d, L, flags);"));
    assert_non_null(strstr(src, "__global__ void __launch_bounds__(1024) cwf_resident_loop("));
    assert_null(strstr(src, "CWF_STAGES"));
    /* The loop's lead thread keeps its state in registers (cwf_arm, cwf_poll,
     * cwf_signal): it does not call the graph loop's poll and signal, which
     * load it from the device block between the doorbell and the result; a
     * grid of one block takes the decision from shared memory. */
    const char *loop = strstr(src, "#line 1 \"cuweave_fused_loop.cu\"\n");
    assert_non_null(loop);
    assert_non_null(strstr(loop, "if (lead) cwf_arm(h, d, L, timeout_ns);"));
    assert_non_null(strstr(loop, "cwf_poll(h, d, L, sleep_ns, spin_ns, flags)"));
    assert_non_null(strstr(loop, "if (lead) cwf_signal(h, d, L, flags);"));
    /* block 0's decision reaches the other blocks as the iteration's number
     * (no grid barrier for it): they wait for it, block 0 does not wait for them */
    assert_non_null(strstr(loop, "st.release.gpu.global.u64 [%0], %1;\" ::\"l\"(&s->go), \"l\"(c == 1u ? it : it | CWF_STOP)"));
    assert_non_null(strstr(loop, "const unsigned long long g = cwf_wait(&s->go, it, ~CWF_STOP, idle_nap);"));
    assert_null(strstr(loop, "cw__res_poll("));
    assert_null(strstr(loop, "cw__res_signal("));
    assert_null(strstr(loop, "cw__res_arm("));
    /* the signal loads nothing from the device block: its statistics come from L */
    const char *sig = strstr(loop, "static __device__ __forceinline__ void cwf_signal(");
    assert_non_null(sig);
    const char *sig_end = strstr(sig, "\n}\n");
    assert_non_null(sig_end);
    for (const char *p = strstr(sig, "= d->"); p; p = strstr(p + 1, "= d->")) assert_true(p > sig_end);
    /* an empty check stores idle_polls from a register: no load of the
     * device block between two doorbell loads (spin mode) */
    const char *poll = strstr(loop, "static __device__ __forceinline__ unsigned cwf_poll(");
    assert_non_null(poll);
    const char *poll_end = strstr(poll, "\n}\n");
    assert_non_null(poll_end);
    const char *idle = strstr(poll, "d->idle_polls = L.idle_polls;");
    assert_non_null(idle);
    assert_true(idle < poll_end);
    const char *rmw = strstr(poll, "d->idle_polls +=");
    assert_true(rmw == NULL || rmw > poll_end);
    for (const char *p = strstr(poll, "= d->"); p; p = strstr(p + 1, "= d->")) assert_true(p > poll_end);
    assert_non_null(strstr(loop, "L.idle_polls = d->idle_polls;"));
    /* the iteration's time starts when the request is seen: the clock is
     * read in the taken branch (after the doorbell load returned), not the
     * `now` read while that load was in flight */
    const char *ts = strstr(poll, "L.t_start = cw__res_now();");
    assert_non_null(ts);
    assert_true(ts < poll_end);
    assert_true(ts > strstr(poll, "if (requested > L.started) {"));
    const char *tsnow = strstr(poll, "L.t_start = now;");
    assert_true(tsnow == NULL || tsnow > poll_end);
    free(src);
    f.stages = NULL; /* refused: NULL */
    static const char *const bad[] = {"nope"};
    f.stages = bad;
    f.stage_count = 1;
    assert_null(cwi_resident_fused_source(&f));
}

/* Stage names of any length: each stage's call is followed by its grid
 * barrier (the last by the iteration's end) in the generated loop, whatever
 * the name's length (names of 209 to 218 characters once lost the barrier
 * after them: the call and the barrier went through a 256-byte line,
 * truncated unchecked). Returns the source (the caller frees it) after
 * checking it. */
static char *long_name(size_t len, char letter) {
    char *n = malloc(len + 1);
    assert_non_null(n);
    memset(n, letter, len);
    n[len] = 0;
    return n;
}

static char *long_names_source(char *const names[3]) {
    size_t cap = 256;
    for (int i = 0; i < 3; i++) cap += 96 + strlen(names[i]);
    char *stages = malloc(cap);
    assert_non_null(stages);
    size_t at = (size_t)snprintf(stages, cap, "#include \"cuweave/resident_device.h\"\n");
    for (int i = 0; i < 3; i++)
        at += (size_t)snprintf(stages + at, cap - at,
                               "extern \"C\" __device__ void %s(cw_resident_ctl *ctl, void *user) { (void)ctl; (void)user; }\n",
                               names[i]);
    cw_resident_fused f = fused_desc();
    f.source = stages;
    f.stages = (const char *const *)names;
    f.stage_count = 3;
    char *src = cwi_resident_fused_source(&f);
    free(stages);
    assert_non_null(src);
    const char *loop = strstr(src, "#line 1 \"cuweave_fused_loop.cu\"\n");
    assert_non_null(loop);
    const char *at_call = loop;
    for (int i = 0; i < 3; i++) {
        char *call = malloc(strlen(names[i]) + 128);
        assert_non_null(call);
        sprintf(call, "        %s((cw_resident_ctl *)d, user);\n%s", names[i],
                i == 2 ? "        /* the iteration's end" : "        cwf_barrier(s, &target, 0u);\n");
        const char *c = strstr(at_call, call);
        if (!c) fail_msg("stage %d (a name of %zu characters): its call and barrier are not in the loop", i, strlen(names[i]));
        at_call = c + strlen(call);
        free(call);
    }
    /* one barrier between stages in the loop's body, no more */
    int barriers = 0;
    for (const char *b = strstr(strstr(loop, "if (cmd == 2u) break;"), "cwf_barrier(s, &target, "); b;
         b = strstr(b + 1, "cwf_barrier(s, &target, "))
        barriers++;
    assert_int_equal(barriers, 2);
    return src;
}

static void test_generated_source_long_names(void **state) {
    (void)state;
    static const size_t lens[] = {1, 64, 199, 200, 208, 209, 210, 213, 217, 218, 219, 250, 255, 256, 300, 4000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char *names[3] = {long_name(lens[i], 'a'), long_name(lens[i], 'b'), long_name(lens[i] + 1, 'c')};
        free(long_names_source(names));
        for (int k = 0; k < 3; k++) free(names[k]);
    }
}

/* With a real NVRTC on this machine (no GPU needed): the generated source
 * compiles for sm_80 and sm_90. Skipped when there is none. */
typedef int (*nvrtc_create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*nvrtc_compile_fn)(void *, int, const char *const *);
typedef int (*nvrtc_logsize_fn)(void *, size_t *);
typedef int (*nvrtc_log_fn)(void *, char *);
typedef int (*nvrtc_destroy_fn)(void **);
static void test_generated_source_compiles(void **state) {
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
    static const char stages[] =
        "#include \"cuweave/resident_device.h\"\n"
        "extern \"C\" __device__ void a(cw_resident_ctl *ctl, void *user) {\n"
        "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
        "    if (threadIdx.x == 0) ((unsigned *)user)[blockIdx.x] = (unsigned)cw_resident_sequence(ctl) + (in ? *in : 0u);\n"
        "}\n"
        "extern \"C\" __device__ void b(cw_resident_ctl *ctl, void *user) { (void)ctl; (void)user; }\n";
    static const char *const names[] = {"a", "b", "a"};
    cw_resident_fused f = fused_desc();
    f.source = stages;
    f.stages = names;
    f.stage_count = 3;
    char *src = cwi_resident_fused_source(&f);
    assert_non_null(src);
    const char *hname[] = {"cuweave/resident_device.h"};
    const char *htext[] = {cw_builtin_get_resident_header()};
    const char *archs[] = {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90"};
    /* the stages above, then stage names of 213 and 300 characters (sm_90 only) */
    static const size_t long_lens[] = {213, 300};
    for (int k = 0; k < 3; k++) {
        char *names_k[3] = {NULL, NULL, NULL};
        if (k > 0) {
            for (int j = 0; j < 3; j++) names_k[j] = long_name(long_lens[k - 1] + (size_t)j, (char)('a' + j));
            free(src);
            src = long_names_source(names_k);
        }
        for (int i = k == 0 ? 0 : 1; i < 2; i++) {
            void *prog = NULL;
            assert_int_equal(create(&prog, src, "cuweave_fused_loop.cu", 1, htext, hname), 0);
            const char *opts[] = {archs[i]};
            const int r = compile(prog, 1, opts);
            size_t n = 0;
            logsize(prog, &n);
            char *log = malloc(n + 1);
            assert_non_null(log);
            log[0] = 0;
            getlog(prog, log);
            if (r != 0) fail_msg("NVRTC (%s) refused the fused loop's source (case %d): %s", archs[i], k, log);
            free(log);
            destroy(&prog);
        }
        for (int j = 0; j < 3; j++) free(names_k[j]);
    }
    free(src);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenvrtc.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    char tmp[4096], nvrtc[4200], cache[] = "/tmp/cuweave-fused-test-XXXXXX";
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
        cmocka_unit_test(test_argument_errors), cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_grid_fits),       cmocka_unit_test(test_kernel_cache),
        cmocka_unit_test(test_states),          cmocka_unit_test(test_launch_and_protocol),
        cmocka_unit_test(test_launch_failure),  cmocka_unit_test(test_generated_source),
        cmocka_unit_test(test_generated_source_long_names),
        cmocka_unit_test(test_generated_source_compiles), cmocka_unit_test(test_fault_sweep),
    };
    cwt_filter_from_env();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0) printf("# could not remove %s\n", cache);
    return rc;
}
