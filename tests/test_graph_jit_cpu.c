/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of graph.h and jit.h that need the fake driver's optional
 * features (tests/fake_cuda.c, FAKE_CUDA_FEATURES=all; its path in argv[1]):
 *
 *  - images are checked when they are loaded: cw_module_load_image refuses
 *    4 KiB of garbage, and every other image the driver would refuse by its
 *    header, before the driver sees it (CW_ERROR_INVALID_ARGUMENT), and
 *    takes cubin, fatbin and PTX headers; the fake refuses such images
 *    itself the way the real driver does when it loads eagerly
 *    (CUDA_ERROR_INVALID_IMAGE); a refusal by the driver at load names the
 *    driver call in the detail;
 *  - launches are checked against the kernel's parameters (the fake lists
 *    them from the kernel's name, "k#8,4"), in the C launch path: NULL args
 *    for a kernel that has parameters, and cfg.arg_sizes that differ from
 *    them, are CW_ERROR_INVALID_ARGUMENT and launch nothing;
 *  - after a kernel's first launch in a context, a launch makes one driver
 *    call (the launch) and no other;
 *  - many threads' first launches of one kernel at once all launch and
 *    agree on its parameters, listed once (run under ThreadSanitizer in CI,
 *    where the CPU suite runs in a TSan build);
 *  - destroy never fails: the body of a conditional node is left to its
 *    node, a stale module or program is ignored, each with a CW_LOG_WARNING
 *    (not an error) and the caller's pointer nulled.
 *
 * Exits 77 when argv[1] is missing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "cwtest.h"
#include "driver/cuda_min.h"
#include "testing/seam.h"

static long (*fake_live)(const char *kind);
static long (*fake_calls)(const char *entry);
static CUresult (*fake_library_load)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                                     CUlibraryOption *, void **, unsigned);
static CUresult (*fake_library_unload)(CUlibrary);
static cw_context *ctx;

/* A PTX module header: what the driver takes as PTX. The fake makes any
 * kernel asked of a module. */
static const char k_ptx[] = "//\n// a test module\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n";

/* The log callback's errors and warnings, by level. */
static char g_log[2][4096];

static void log_to_buffer(void *user, cw_log_level level, const char *message) {
    (void)user;
    if (level > CW_LOG_WARNING) return;
    const size_t n = strlen(g_log[level]);
    snprintf(g_log[level] + n, sizeof g_log[level] - n, "%s\n", message);
}

static void log_capture(int on) {
    if (on) memset(g_log, 0, sizeof g_log);
    assert_cw_ok(cw_log_set_callback(on ? log_to_buffer : NULL, NULL, CW_LOG_WARNING));
}

/* cw_module_load_image(image): refused before the driver, the detail saying `why`. */
static void expect_refused_image(const void *image, const char *why) {
    const long loads0 = fake_calls("cuLibraryLoadData");
    cw_module *m = NULL;
    cw_clear_error();
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_module_load_image(&m, image));
    assert_null(m);
    assert_detail("cw_module_load_image");
    if (!strstr(cw_last_error()->message, why)) fail_msg("the detail does not say \"%s\": %s", why, cw_last_error()->message);
    assert_string_equal(cw_last_error()->driver_call, ""); /* no driver call was made */
    assert_int_equal(fake_calls("cuLibraryLoadData"), loads0);
}

/* cw_module_load_image(image) loads (the fake took it too). */
static void expect_loaded_image(const void *image) {
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, image));
    assert_non_null(m);
    cw_module_destroy(&m);
    assert_null(m);
}

/* The fake driver's own answer to an image (it models the real driver). */
static CUresult fake_load(const void *image) {
    CUlibrary lib = NULL;
    CUresult r = fake_library_load(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
    if (r == CUDA_SUCCESS) assert_int_equal(fake_library_unload(lib), CUDA_SUCCESS);
    return r;
}

/* Images are checked at load: 0.1 loaded 4 KiB of garbage (the driver's
 * lazy loading said nothing until cw_module_get_kernel). */
static void test_image_checked_at_load(void **state) {
    (void)state;
    const long libs0 = fake_live("library");
    unsigned char *junk = malloc(4096);
    assert_non_null(junk);
    unsigned seed = 23;
    for (size_t i = 0; i < 4096; i++) junk[i] = (unsigned char)(rand_r(&seed) | 1);
    junk[0] = 0x3f;
    junk[4095] = 0;
    expect_refused_image(junk, "not a cubin (64-bit ELF for CUDA), a fatbin (magic 0xBA55ED50) or PTX");
    assert_non_null(strstr(cw_last_error()->message, "starts with 3f"));
    assert_int_equal(fake_load(junk), CUDA_ERROR_INVALID_IMAGE); /* the driver would refuse it too */

    /* near misses: ELF for another machine, 32-bit ELF, a fatbin of another
     * version, text whose first directive is not .version, an open comment,
     * an empty string */
    unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    elf[18] = 62; /* EM_X86_64 */
    expect_refused_image(elf, "ELF file but not a cubin (class 2, data 1, machine 62");
    assert_int_equal(fake_load(elf), CUDA_ERROR_INVALID_IMAGE);
    elf[18] = 190;
    elf[4] = 1; /* ELFCLASS32 */
    expect_refused_image(elf, "ELF file but not a cubin (class 1");
    assert_int_equal(fake_load(elf), CUDA_ERROR_INVALID_IMAGE);
    elf[4] = 2;
    unsigned long long fat[4] = {0};
    memcpy(fat, "\x50\xed\x55\xba\x02\x00\x10\x00", 8); /* version 2 */
    fat[1] = 16;
    expect_refused_image(fat, "fatbin magic but version 2");
    assert_int_equal(fake_load(fat), CUDA_ERROR_INVALID_IMAGE);
    expect_refused_image(".target sm_90\n.version 8.0\n", "starts with 2e 74 61 72");
    assert_int_equal(fake_load(".target sm_90\n.version 8.0\n"), CUDA_ERROR_INVALID_IMAGE);
    expect_refused_image("/* .version 8.0 never closed", "not a cubin");
    expect_refused_image("", "starts with 00");

    /* what the driver loads: a cubin, a fatbin, nvcc's wrapper of one, PTX */
    expect_loaded_image(elf);
    memcpy(fat, "\x50\xed\x55\xba\x01\x00\x10\x00", 8);
    expect_loaded_image(fat);
    struct {
        uint32_t magic, version;
        const void *data;
        void *filename;
    } wrapper = {0x466243b1u, 1, fat, NULL};
    expect_loaded_image(&wrapper);
    expect_loaded_image(k_ptx);
    expect_loaded_image("/* block */ // line\n\t.version 7.8\n.target sm_80\n");
    assert_int_equal(fake_live("library"), libs0);

    /* an image the check passes but the driver refuses at load (an eager
     * driver's verdict): the detail names the call and its result */
    assert_int_equal(cwi_seam_enable(), 0);
    cwi_seam_fail(cwi_seam_entry("cuLibraryLoadData"), 1, CUDA_ERROR_INVALID_IMAGE);
    cw_module *m = NULL;
    assert_cw(CW_ERROR_DRIVER, cw_module_load_image(&m, k_ptx));
    cwi_seam_disable();
    assert_null(m);
    assert_detail("cw_module_load_image");
    assert_string_equal(cw_last_error()->driver_call, "cuLibraryLoadData");
    assert_int_equal(cw_last_error()->cu_result, CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(fake_live("library"), libs0);
    free(junk);
}

/* A module of k_ptx and its kernel `name`. */
static cw_kernel *kernel_of(cw_module **m, const char *name) {
    if (!*m) assert_cw_ok(cw_module_load_image(m, k_ptx));
    cw_kernel *k = NULL;
    assert_cw_ok(cw_module_get_kernel(*m, name, &k));
    return k;
}

static long launches(void) { return fake_calls("cuLaunchKernel") + fake_calls("cuLaunchKernelEx"); }

/* The C launch path checks the arguments against the kernel's parameters:
 * 0.1 sent NULL args for a kernel with parameters to the driver (which
 * answered CW_ERROR_DRIVER on a GPU; the fake launched it), and only the
 * C++ wrapper compared counts and sizes. */
static void test_launch_checks_arguments(void **state) {
    (void)state;
    cw_module *m = NULL;
    cw_kernel *k = kernel_of(&m, "scale#8,4"), *none = kernel_of(&m, "nothing");
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    assert_null(lc.arg_sizes);
    assert_int_equal(lc.n_args, 0);
    unsigned long long p = 0;
    float f = 2.0f;
    void *args[] = {&p, &f};
    long l0 = launches();

    /* NULL args, the kernel has two parameters: refused, nothing launched
     * (on the first launch: the parameters are listed before it) */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, NULL));
    assert_detail("cw_kernel_launch");
    assert_non_null(strstr(cw_last_error()->message, "args is NULL but the kernel \"scale#8,4\" has 2 parameter(s)"));
    assert_int_equal(launches(), l0);
    /* and again, from the kept list */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, NULL));
    assert_int_equal(launches(), l0);
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    assert_int_equal(launches(), l0 + 1);
    /* a kernel without parameters takes NULL */
    assert_cw_ok(cw_kernel_launch(none, s, &lc, NULL));
    assert_int_equal(launches(), l0 + 2);

    /* the sizes, when given: what cw::kernel::launch passes */
    const size_t right[] = {8, 4}, wrong[] = {8, 8};
    lc.arg_sizes = right;
    lc.n_args = 2;
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    lc.n_args = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, args));
    assert_non_null(strstr(cw_last_error()->message, "1 argument(s) given, the kernel \"scale#8,4\" has 2"));
    lc.arg_sizes = wrong;
    lc.n_args = 2;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, args));
    assert_non_null(strstr(cw_last_error()->message, "argument 1 has 8 bytes, parameter 1"));
    lc.n_args = 0; /* sizes of no arguments, for a kernel of none */
    assert_cw_ok(cw_kernel_launch(none, s, &lc, NULL));
    lc.n_args = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(none, s, &lc, args));
    assert_int_equal(launches(), l0 + 4);
    /* a count without sizes, reserved bytes: refused as settings are */
    lc.arg_sizes = NULL;
    lc.n_args = 2;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, args));
    /* every reserved byte counts: the first, one inside, and each of the tail */
    for (size_t i = 0; i < sizeof lc.reserved; i++) {
        cw_launch_config_default(&lc);
        lc.reserved[i] = (uint8_t)(1u << (i % 8));
        if (cw_kernel_launch(k, s, &lc, args) != CW_ERROR_INVALID_ARGUMENT)
            fail_msg("a launch configuration with reserved[%zu] = %u was not refused", i, (unsigned)lc.reserved[i]);
    }
    cw_launch_config_default(&lc);
    assert_int_equal(launches(), l0 + 4);

    /* cw_kernel_get_params agrees */
    size_t n = 0, sizes[4] = {0};
    assert_cw_ok(cw_kernel_get_params(k, ctx, sizes, 4, &n));
    assert_int_equal(n, 2);
    assert_int_equal(sizes[0], 8);
    assert_int_equal(sizes[1], 4);

    /* a kernel first launched while its stream captures goes unchecked (the
     * parameters are not listed in a capture); its first launch outside
     * does list them, and from then on captures are checked too */
    cw_kernel *late = kernel_of(&m, "late#8");
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw_ok(cw_kernel_launch(late, s, &lc, NULL));
    cw_graph *g = NULL;
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_destroy(&g);
    assert_cw_ok(cw_kernel_launch(late, s, &lc, args));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(late, s, &lc, NULL));
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_destroy(&g);
    /* a kernel preloaded before a capture is checked in it */
    cw_kernel *pre = kernel_of(&m, "pre#4");
    assert_cw_ok(cw_kernel_preload(pre, ctx));
    assert_cw_ok(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(pre, s, &lc, NULL));
    assert_cw_ok(cw_capture_end(&g, s));
    cw_graph_destroy(&g);

    assert_cw_ok(cw_stream_synchronize(s));
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* The fault sweeps name the call they failed with cwi_seam_fired_entry.
 * They used to take the last entry with fewer successes than calls, and a
 * first launch's parameter listing ends on a failing cuKernelGetParamInfo
 * (the index past the last parameter) in normal use: a failed
 * cuStreamDestroy or cuLibraryUnload after a launch was then blamed on
 * cuKernelGetParamInfo, and the handle a failed release leaves counted as
 * a leak (test_gpu_sweep failed so on the H100). */
static void test_seam_names_the_failed_call(void **state) {
    (void)state;
    const char *const releases[] = {"cuStreamDestroy", "cuLibraryUnload"};
    for (size_t r = 0; r < 2; r++) {
        assert_int_equal(cwi_seam_enable(), 0);
        cwi_seam_reset();
        cwi_seam_fail(cwi_seam_entry(releases[r]), 1, CUDA_ERROR_INVALID_VALUE);
        cw_module *m = NULL;
        cw_kernel *k = kernel_of(&m, "scale#8,4");
        cw_stream *s = NULL;
        assert_cw_ok(cw_stream_create(&s, ctx, NULL));
        cw_launch_config lc;
        cw_launch_config_default(&lc);
        unsigned long long p = 0;
        float f = 2.0f;
        void *args[] = {&p, &f};
        assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
        assert_cw_ok(cw_stream_synchronize(s));
        cw_stream_destroy(&s);
        cw_module_destroy(&m);
        assert_true(cwi_seam_fired());
        const int pi = cwi_seam_entry("cuKernelGetParamInfo");
        assert_true(cwi_seam_calls(pi) > cwi_seam_successes(pi)); /* the listing's end: a failure in normal use */
        assert_string_equal(cwi_seam_entry_name(cwi_seam_fired_entry()), releases[r]);
        cwi_seam_reset();
        assert_int_equal(cwi_seam_fired_entry(), -1);
        cwi_seam_disable();
    }
}

/* After a kernel's first launch in a context, a launch costs one driver
 * call, the launch, whether its stream is new or not; the parameters are
 * listed once per kernel (count + 1 calls), also for a second context. */
static void test_launch_hot_path(void **state) {
    (void)state;
    cw_module *m = NULL;
    cw_kernel *k = kernel_of(&m, "hot#8,4,8");
    cw_stream *s = NULL, *s2 = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    unsigned long long a = 0, c = 0;
    uint32_t b = 0;
    void *args[] = {&a, &b, &c};
    const size_t sizes[] = {8, 4, 8};
    const long info0 = fake_calls("cuKernelGetParamInfo"), get0 = fake_calls("cuKernelGetFunction");
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args)); /* the first: loads, lists, launches */
    assert_int_equal(fake_calls("cuKernelGetParamInfo"), info0 + 4);
    assert_int_equal(fake_calls("cuKernelGetFunction"), get0 + 1);
    long all0 = fake_calls("*"), l0 = launches();
    for (int i = 0; i < 100; i++) assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    lc.arg_sizes = sizes;
    lc.n_args = 3;
    for (int i = 0; i < 100; i++) assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    for (int i = 0; i < 10; i++) assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_kernel_launch(k, s, &lc, NULL));
    assert_int_equal(launches(), l0 + 200);
    assert_int_equal(fake_calls("*"), all0 + 200); /* nothing but the launches */
    /* another stream of the same context: the same */
    assert_cw_ok(cw_stream_create(&s2, ctx, NULL));
    all0 = fake_calls("*");
    for (int i = 0; i < 10; i++) assert_cw_ok(cw_kernel_launch(k, s2, &lc, args));
    assert_int_equal(fake_calls("*"), all0 + 10);
    /* the seam's count of this thread's driver calls says the same */
    assert_int_equal(cwi_seam_enable(), 0);
    const unsigned long t0 = cwi_seam_thread_calls();
    assert_cw_ok(cw_kernel_launch(k, s, &lc, args));
    assert_int_equal(cwi_seam_thread_calls() - t0, 1);
    cwi_seam_disable();
    assert_int_equal(fake_calls("cuKernelGetParamInfo"), info0 + 4);
    assert_int_equal(fake_calls("cuKernelGetFunction"), get0 + 1);
    assert_cw_ok(cw_stream_synchronize(s));
    assert_cw_ok(cw_stream_synchronize(s2));
    cw_stream_destroy(&s2);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* Many threads' first launches of one kernel at once (for each of several
 * fresh kernels): every launch succeeds, every thread then sees the listed
 * parameters (a NULL args launch is refused), and no thread reads a list
 * another is still writing (ThreadSanitizer, in CI). */
enum { RACE_THREADS = 8, RACE_KERNELS = 24 };
static cw_kernel *g_race_kernels[RACE_KERNELS];
static pthread_barrier_t g_race_barrier;
static int g_race_bad;

static void *race_main(void *arg) {
    (void)arg;
    cw_stream *s = NULL;
    if (cw_stream_create(&s, ctx, NULL) != CW_SUCCESS) {
        __atomic_fetch_add(&g_race_bad, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    cw_launch_config lc;
    cw_launch_config_default(&lc);
    const size_t sizes[] = {8, 4};
    lc.arg_sizes = sizes;
    lc.n_args = 2;
    unsigned long long p = 0;
    uint32_t v = 0;
    void *args[] = {&p, &v};
    for (int i = 0; i < RACE_KERNELS; i++) {
        pthread_barrier_wait(&g_race_barrier); /* all threads at the same fresh kernel */
        if (cw_kernel_launch(g_race_kernels[i], s, &lc, args) != CW_SUCCESS ||
            cw_kernel_launch(g_race_kernels[i], s, &lc, NULL) != CW_ERROR_INVALID_ARGUMENT)
            __atomic_fetch_add(&g_race_bad, 1, __ATOMIC_RELAXED);
    }
    if (cw_stream_synchronize(s) != CW_SUCCESS) __atomic_fetch_add(&g_race_bad, 1, __ATOMIC_RELAXED);
    cw_stream_destroy(&s);
    return NULL;
}

static void test_first_launches_race(void **state) {
    (void)state;
    cw_module *m = NULL;
    for (int i = 0; i < RACE_KERNELS; i++) {
        char name[32];
        snprintf(name, sizeof name, "race%d#8,4", i);
        g_race_kernels[i] = kernel_of(&m, name);
    }
    const long info0 = fake_calls("cuKernelGetParamInfo");
    g_race_bad = 0;
    pthread_barrier_init(&g_race_barrier, NULL, RACE_THREADS);
    pthread_t t[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, race_main, NULL), 0);
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&g_race_barrier);
    assert_int_equal(g_race_bad, 0);
    /* listed at least once per kernel (3 calls each), at most once per thread */
    const long listed = fake_calls("cuKernelGetParamInfo") - info0;
    printf("# %d threads' first launches of %d kernels: %ld cuKernelGetParamInfo calls (%d to %d)\n", RACE_THREADS,
           RACE_KERNELS, listed, 3 * RACE_KERNELS, 3 * RACE_KERNELS * RACE_THREADS);
    assert_true(listed >= 3 * RACE_KERNELS && listed <= 3 * RACE_KERNELS * RACE_THREADS);
    cw_module_destroy(&m);
}

/* Destroy never fails: a conditional node's body is left to its node (0.1
 * refused it and kept the caller's pointer), a stale module or graph is
 * ignored; each is a CW_LOG_WARNING, not an error, and the pointer is
 * nulled. A capture into a body is ended when its graph goes. */
static void test_destroy_ignores(void **state) {
    (void)state;
    const long graphs0 = fake_live("graph"), bodies0 = fake_live("body");
    cw_graph *g = NULL, *body = NULL;
    assert_cw_ok(cw_graph_create(&g, ctx));
    cw_cond_handle h = 0;
    assert_cw_ok(cw_graph_add_cond_handle(g, 1, CW_COND_RESET_EACH_LAUNCH, &h));
    assert_cw_ok(cw_graph_add_conditional(g, h, NULL, NULL, 0, NULL, &body, NULL));
    cw_graph *body_copy = body;
    log_capture(1);
    cw_graph_destroy(&body);
    log_capture(0);
    assert_null(body);
    assert_non_null(strstr(g_log[CW_LOG_WARNING], "cw_graph_destroy: the graph is the body of a conditional node"));
    assert_string_equal(g_log[CW_LOG_ERROR], "");
    cw_graph_info gi;
    assert_cw_ok(cw_graph_get_info(body_copy, &gi)); /* still there, its node's */
    assert_int_equal(gi.is_body, 1);
    assert_ptr_equal(gi.context, ctx);
    assert_int_equal(fake_live("body"), bodies0 + 1);

    /* a capture into the body ends when the graph goes */
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    assert_cw_ok(cw_capture_begin(s, body_copy, CW_CAPTURE_GLOBAL));
    cw_graph_destroy(&g);
    assert_null(g);
    assert_int_equal(fake_live("graph"), graphs0);
    assert_int_equal(fake_live("body"), bodies0);
    cw_capture_state cs = CW_CAPTURE_ACTIVE;
    assert_cw_ok(cw_capture_get_state(s, &cs));
    assert_int_equal(cs, CW_CAPTURE_NONE);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_graph_get_info(body_copy, &gi));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_stream_destroy(&s);

    /* a stale module */
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_ptx));
    cw_module *m_copy = m;
    cw_module_destroy(&m);
    log_capture(1);
    cw_clear_error();
    cw_module_destroy(&m_copy);
    log_capture(0);
    assert_null(m_copy);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* the detail is left alone */
    assert_non_null(strstr(g_log[CW_LOG_WARNING], "cw_module_destroy: not a live cw_module"));
    assert_string_equal(g_log[CW_LOG_ERROR], "");
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(*(void **)&fake_library_load = dlsym(lib, "cuLibraryLoadData")) ||
        !(*(void **)&fake_library_unload = dlsym(lib, "cuLibraryUnload"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    cwt_filter_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_checked_at_load),
        cmocka_unit_test(test_launch_checks_arguments),
        cmocka_unit_test(test_seam_names_the_failed_call),
        cmocka_unit_test(test_launch_hot_path),
        cmocka_unit_test(test_first_launches_race),
        cmocka_unit_test(test_destroy_ignores),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    return rc;
}
