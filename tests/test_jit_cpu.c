/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of the jit layer: programs and the kernel cache, against the fake
 * driver (tests/fake_cuda.c, path in argv[1]) and a fake NVRTC
 * (tests/fake_nvrtc.c, libfakenvrtc.so next to it), so that CI proves the
 * whole compile path without a GPU or a CUDA toolkit:
 *
 *  - compile, then a memory hit, then a disk hit (no NVRTC compile);
 *  - the key: equivalent option lists give one key, a changed header or
 *    option another; header and name-expression order do not matter;
 *  - refused options, options that read files (never cached);
 *  - a compile error returns the log with the line;
 *  - a corrupt or truncated disk entry is rejected (never loaded), removed,
 *    and written again;
 *  - a second process loads from disk without compiling (its own counters);
 *  - six processes filling one entry at once all succeed and leave one whole
 *    file;
 *  - the size bound holds, oldest entries go first;
 *  - trust (issue 25): a cache directory or entry file that group or others
 *    can write, or that another user owns, is refused (a planted entry with
 *    a valid hash is not loaded); directories the library makes are 0700;
 *    a corrupt file is removed only if it is still the one read (a
 *    writer's entry renamed into place in between survives);
 *  - the cache seen and cleared (issue 40): cw_jit_cache_get_info counts
 *    only entry files; cw_jit_cache_clear_disk removes them (and stale
 *    temporaries) and nothing else, under the cache's lock; a write below
 *    the bound reads no directory (the running account), one past it reads
 *    it once and evicts down to 7/8;
 *  - the review of issue 40: a child forked while a thread waits for the
 *    cache's lock does not keep it; an account total that a write would
 *    carry past 2^64 is not trusted; asking about a directory makes no
 *    cache.lock;
 *  - without NVRTC the compile says so;
 *  - modules and built-ins need the library API (the fake has none).
 *
 * Exits 77 when argv[1] is missing.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwtest.h"
#include "testing/seam.h"

extern char **environ;

static char g_self[4096];
static const char *g_fake_cuda;
static char g_fake_nvrtc[4096];
static char g_root[256]; /* this run's scratch directory */
static long (*nv_compiles)(void);
static const char *(*nv_last_options)(void);
static cw_context *ctx;

/* ---- helpers ---------------------------------------------------------------- */

static void use_dir(const char *dir, uint64_t max_bytes) {
    cw_jit_cache_settings s;
    cw_jit_cache_settings_default(&s);
    s.dir = dir;
    s.max_bytes = max_bytes;
    assert_cw_ok(cw_jit_cache_configure(&s));
}

static void fresh_dir(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_root, name);
    mkdir(out, 0700);
}

static cw_program *compile_with(const char *src, const cw_program_settings *s) {
    cw_program *p = NULL;
    assert_cw_ok(cw_program_compile(&p, ctx, src, s));
    assert_non_null(p);
    return p;
}

static cw_program_info info_of(const cw_program *p) {
    cw_program_info i;
    assert_cw_ok(cw_program_get_info(p, &i));
    return i;
}

static cw_jit_stats stats(void) {
    cw_jit_stats s;
    assert_cw_ok(cw_jit_get_stats(&s));
    return s;
}

static void key_of(const char *src, const cw_program_settings *s, char key[65]) {
    cw_program *p = compile_with(src, s);
    cw_program_info i = info_of(p);
    memcpy(key, i.key, 65);
    cw_program_destroy(&p);
}

/* Files in dir ending with suffix; total size in *bytes (may be NULL). */
static int count_files(const char *dir, const char *suffix, long *bytes) {
    DIR *d = opendir(dir);
    int n = 0;
    if (bytes) *bytes = 0;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name), ls = strlen(suffix);
        if (l < ls || strcmp(de->d_name + l - ls, suffix) != 0) continue;
        n++;
        if (bytes) {
            char path[1024];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (stat(path, &st) == 0) *bytes += st.st_size;
        }
    }
    closedir(d);
    return n;
}

/* A temporary file of a write (<key>.cwk.tmp.<pid>.<n>) left behind. */
static int has_tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int found = 0;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) found = 1;
    closedir(d);
    return found;
}

static void entry_file(const char *dir, const char *key, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s.cwk", dir, key);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Runs this binary as a child: argv = self fake --child mode dir. Returns its
 * exit status (or -1). */
static pid_t spawn_child(const char *mode, const char *dir, const char *extra_env) {
    char *argv[] = {g_self, (char *)g_fake_cuda, (char *)"--child", (char *)mode, (char *)dir, NULL};
    char **env = environ;
    char *envv[256];
    if (extra_env) {
        size_t n = 0;
        for (char **e = environ; *e && n < 250; e++)
            if (strncmp(*e, "CUWEAVE_LIBNVRTC=", 17) != 0) envv[n++] = *e;
        envv[n++] = (char *)extra_env;
        envv[n] = NULL;
        env = envv;
    }
    pid_t pid = -1;
    if (posix_spawn(&pid, g_self, NULL, NULL, argv, env) != 0) return -1;
    return pid;
}

static int wait_child(pid_t pid) {
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static const char *k_shared_src = "extern \"C\" __global__ void shared_kernel(int *p) { *p = 42; }\n";

/* The children's work. Exit codes: 0 as expected, 10+ what went wrong. */
static int child_main(const char *mode, const char *dir) {
    if (cw_init() != CW_SUCCESS) return 10;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return 11;
    void *lib = dlopen(g_fake_nvrtc, RTLD_NOW | RTLD_NOLOAD);
    cw_jit_cache_settings s;
    cw_jit_cache_settings_default(&s);
    s.dir = dir;
    if (cw_jit_cache_configure(&s) != CW_SUCCESS) return 12;
    cw_program *p = NULL;
    cw_status st = cw_program_compile(&p, ctx, k_shared_src, NULL);
    if (strcmp(mode, "nonvrtc") == 0) {
        if (st != CW_ERROR_NO_NVRTC) return 20;
        if (!strstr(cw_last_error()->message, "/nonexistent/libnvrtc.so")) return 21;
        return 0;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "child: %s\n", cw_last_error()->message);
        return 13;
    }
    cw_program_info i;
    cw_program_get_info(p, &i);
    cw_jit_stats js;
    cw_jit_get_stats(&js);
    if (!lib) lib = dlopen(g_fake_nvrtc, RTLD_NOW | RTLD_NOLOAD);
    long (*compiles)(void) = lib ? (long (*)(void))dlsym(lib, "fake_nvrtc_compiles") : NULL;
    if (strcmp(mode, "reader") == 0) {
        /* loaded from disk, NVRTC never asked to compile */
        if (i.source != CW_FROM_DISK) return 30;
        if (js.compiles != 0 || js.disk_hits != 1) return 31;
        if (!compiles || compiles() != 0) return 32;
    } else if (strcmp(mode, "filler") != 0) {
        return 14;
    }
    if (memcmp(i.code, "FAKECUBIN", 9) != 0) return 15;
    cw_program_destroy(&p);
    cw_context_destroy(&ctx);
    return 0;
}

static int group_setup(void **state) {
    (void)state;
    if (cw_context_create(&ctx, 0) != CW_SUCCESS) return -1;
    void *lib = dlopen(g_fake_nvrtc, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) {
        /* NVRTC is opened lazily: ask for its version once */
        cw_versions v;
        if (cw_get_versions(&v) != CW_SUCCESS || v.nvrtc_major != 13) return -1;
        lib = dlopen(g_fake_nvrtc, RTLD_NOW | RTLD_NOLOAD);
    }
    if (!lib) return -1;
    nv_compiles = (long (*)(void))dlsym(lib, "fake_nvrtc_compiles");
    nv_last_options = (const char *(*)(void))dlsym(lib, "fake_nvrtc_last_options");
    return nv_compiles && nv_last_options ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    cw_jit_cache_clear_memory();
    cw_context_destroy(&ctx);
    return 0;
}

/* ---- tests -------------------------------------------------------------------- */

/* Compile; the same again is a memory hit; with the memory emptied, a disk hit.
 * Only the first asked NVRTC. The architecture is the fake device's (9.0). */
static void test_compile_then_hits(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "hits");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void k1(float *x) { x[0] = 1.0f; }\n";
    const cw_jit_stats s0 = stats();
    const long c0 = nv_compiles();
    cw_program *a = compile_with(src, NULL);
    cw_program_info ia = info_of(a);
    assert_int_equal(ia.source, CW_FROM_COMPILE);
    assert_int_equal(ia.arch, 90);
    assert_int_equal(ia.is_ptx, 0);
    assert_int_equal(ia.cached, 1);
    assert_true(ia.size > 9 && memcmp(ia.code, "FAKECUBIN", 9) == 0);
    assert_non_null(strstr(nv_last_options(), "--gpu-architecture=sm_90"));
    assert_int_equal(nv_compiles(), c0 + 1);
    char path[1024];
    entry_file(dir, ia.key, path, sizeof path);
    assert_true(file_size(path) > 0);

    cw_program *b = compile_with(src, NULL);
    cw_program_info ib = info_of(b);
    assert_int_equal(ib.source, CW_FROM_MEMORY);
    assert_string_equal(ib.key, ia.key);
    assert_int_equal(ib.size, ia.size);
    assert_memory_equal(ib.code, ia.code, ia.size);

    cw_jit_cache_clear_memory();
    cw_program *c = compile_with(src, NULL);
    cw_program_info ic = info_of(c);
    assert_int_equal(ic.source, CW_FROM_DISK);
    assert_memory_equal(ic.code, ia.code, ia.size);
    assert_string_equal(cw_jit_get_compile_log(), "");
    assert_int_equal(nv_compiles(), c0 + 1);
    const cw_jit_stats s1 = stats();
    assert_int_equal(s1.compiles - s0.compiles, 1);
    assert_int_equal(s1.memory_hits - s0.memory_hits, 1);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 1);
    assert_int_equal(s1.disk_writes - s0.disk_writes, 1);

    /* PTX on request, for the architecture asked */
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.output_ptx = 1;
    ps.arch = 80;
    cw_program *d = NULL;
    assert_cw_ok(cw_program_compile(&d, NULL, src, &ps)); /* no context needed with an arch */
    cw_program_info id = info_of(d);
    assert_int_equal(id.is_ptx, 1);
    assert_int_equal(id.arch, 80);
    assert_string_not_equal(id.key, ia.key);
    assert_non_null(strstr(nv_last_options(), "--gpu-architecture=compute_80"));
    assert_int_equal(((const char *)id.code)[id.size], '\0');
    assert_int_equal(strlen((const char *)id.code), id.size);
    cw_program_destroy(&a);
    cw_program_destroy(&b);
    cw_program_destroy(&c);
    cw_program_destroy(&d);
    assert_null(a);
}

/* Equivalent option lists give one key; real differences give another. */
static void test_key_canonical(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "keys");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void k2() {}\n";
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.cache = CW_CACHE_NONE; /* the key is computed all the same */
    char k[8][65];
    const char *o1[] = {"-DX=1", "-std=c++17", "-lineinfo", "-DY"};
    const char *o2[] = {"--generate-line-info", "--std", "c++17", "-DY", "--define-macro=X=1"};
    const char *o3[] = {" -DX=1 ", "--std=c++17", "-lineinfo", "-lineinfo", "-D", "Y"};
    const char *o4[] = {"-DX=2", "-std=c++17", "-lineinfo", "-DY"};
    const char *o5[] = {"-DX=1", "-UX", "-std=c++17", "-lineinfo", "-DY"};
    const char *o6[] = {"-UX", "-DX=1", "-std=c++17", "-lineinfo", "-DY"};
    ps.options = o1;
    ps.n_options = 4;
    key_of(src, &ps, k[0]);
    ps.options = o2;
    ps.n_options = 5;
    key_of(src, &ps, k[1]);
    ps.options = o3;
    ps.n_options = 6;
    key_of(src, &ps, k[2]);
    ps.options = o4;
    ps.n_options = 4;
    key_of(src, &ps, k[3]);
    ps.options = o5;
    ps.n_options = 5;
    key_of(src, &ps, k[4]);
    ps.options = o6;
    ps.n_options = 5;
    key_of(src, &ps, k[5]);
    assert_string_equal(k[0], k[1]); /* aliases, separate values, order of independent options */
    assert_string_equal(k[0], k[2]); /* spaces, a repeated flag, "-D" "Y" */
    assert_string_not_equal(k[0], k[3]); /* another value */
    assert_string_not_equal(k[4], k[5]); /* define then undefine is not undefine then define */
    assert_string_not_equal(k[0], k[4]);
    /* a value in its own entry is trimmed as entries are, and an entry that
     * is an option once trimmed is not a value (found by
     * tests/fuzz/fuzz_options: canonical options were not a fixed point) */
    const char *o7[] = {" -DX=1", "--std", " c++17 ", "-lineinfo", "-D", "\tY"};
    const char *o8[] = {"-DX=1", "-std=c++17", "-D", " -lineinfo", "-DY"};
    const char *o9[] = {"-DX=1", "-std=c++17", "-D", "-lineinfo", "-DY"};
    ps.options = o7;
    ps.n_options = 6;
    key_of(src, &ps, k[6]);
    assert_string_equal(k[0], k[6]);
    ps.options = o8;
    ps.n_options = 5;
    key_of(src, &ps, k[6]);
    ps.options = o9;
    key_of(src, &ps, k[7]);
    assert_string_equal(k[6], k[7]);

    /* headers: content matters, order does not */
    const char *hsrc = "#include \"a.h\"\n#include \"b.h\"\nextern \"C\" __global__ void k3() { A; B; }\n";
    cw_header h1[] = {{"a.h", "#define A 1"}, {"b.h", "#define B 2"}};
    cw_header h2[] = {{"b.h", "#define B 2"}, {"a.h", "#define A 1"}};
    cw_header h3[] = {{"a.h", "#define A 1"}, {"b.h", "#define B 3"}};
    cw_program_settings_default(&ps);
    ps.cache = CW_CACHE_NONE;
    ps.n_headers = 2;
    ps.headers = h1;
    key_of(hsrc, &ps, k[0]);
    ps.headers = h2;
    key_of(hsrc, &ps, k[1]);
    ps.headers = h3;
    key_of(hsrc, &ps, k[2]);
    assert_string_equal(k[0], k[1]);
    assert_string_not_equal(k[0], k[2]);
    cw_header hdup[] = {{"a.h", "x"}, {"a.h", "y"}};
    ps.headers = hdup;
    cw_program *p = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, hsrc, &ps));
    assert_non_null(strstr(cw_last_error()->message, "a.h"));

    /* name expressions: a set */
    const char *e1[] = {"f<int>", "f<float>"};
    const char *e2[] = {"f<float>", "f<int>", "f<int>"};
    cw_program_settings_default(&ps);
    ps.cache = CW_CACHE_NONE;
    ps.name_expressions = e1;
    ps.n_name_expressions = 2;
    key_of(src, &ps, k[0]);
    ps.name_expressions = e2;
    ps.n_name_expressions = 3;
    key_of(src, &ps, k[1]);
    assert_string_equal(k[0], k[1]);
    /* the architecture and the source are in the key */
    cw_program_settings_default(&ps);
    ps.cache = CW_CACHE_NONE;
    ps.arch = 80;
    key_of(src, &ps, k[0]);
    ps.arch = 90;
    key_of(src, &ps, k[1]);
    key_of("extern \"C\" __global__ void k2() { }\n", &ps, k[2]);
    assert_string_not_equal(k[0], k[1]);
    assert_string_not_equal(k[1], k[2]);
    assert_int_equal(count_files(dir, ".cwk", NULL), 0); /* CW_CACHE_NONE wrote nothing */
}

/* Options that cannot be cached honestly. */
static void test_option_rules(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "rules");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void k4() {}\n";
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    cw_program *p = NULL;
    const char *arch[] = {"-arch=sm_80"};
    ps.options = arch;
    ps.n_options = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    assert_non_null(strstr(cw_last_error()->message, "cw_program_settings.arch"));
    const char *arch2[] = {"--gpu-architecture", "sm_80"};
    ps.options = arch2;
    ps.n_options = 2;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    const char *writes[] = {"--time=/tmp/t.csv"};
    ps.options = writes;
    ps.n_options = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    assert_non_null(strstr(cw_last_error()->message, "writes files"));
    const char *pch[] = {"-pch"};
    ps.options = pch;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    const char *novalue[] = {"c++17"};
    ps.options = novalue;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    assert_null(p);
    /* an include path: compiled, not cached, compiled again next time */
    const char *inc[] = {"-I/usr/include"};
    ps.options = inc;
    const long c0 = nv_compiles();
    for (int i = 0; i < 2; i++) {
        p = compile_with(src, &ps);
        cw_program_info pi = info_of(p);
        assert_int_equal(pi.source, CW_FROM_COMPILE);
        assert_int_equal(pi.cached, 0);
        cw_program_destroy(&p);
    }
    assert_int_equal(nv_compiles(), c0 + 2);
    assert_int_equal(count_files(dir, ".cwk", NULL), 0);
    /* settings checks */
    cw_program_settings_default(&ps);
    ps.reserved[0] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    /* a cache mode out of the enum's range, as a C caller may store it
     * (found by tests/fuzz/fuzz_settings: read as the enum type it was
     * undefined behaviour, which UBSan reports) */
    const int bad_modes[] = {3, 7, -1};
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        cw_program_settings_default(&ps);
        memcpy(&ps.cache, &bad_modes[i], sizeof bad_modes[i]);
        assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    }
    cw_program_settings_default(&ps);
    ps.n_options = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    cw_program_settings_default(&ps);
    cw_header nameless = {NULL, "x"};
    ps.headers = &nameless;
    ps.n_headers = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, src, &ps));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, NULL, src, NULL)); /* no arch, no context */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_compile(&p, ctx, NULL, NULL));
    assert_null(p);
}

/* A compile error: CW_ERROR_COMPILE, the log with the line, nothing cached. */
static void test_compile_error(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "errors");
    use_dir(dir, 0);
    const char *bad = "// line 1\n// line 2\n#error the frobnicator is missing\n";
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name = "frob.cu";
    cw_program *p = NULL;
    cw_clear_error();
    assert_cw(CW_ERROR_COMPILE, cw_program_compile(&p, ctx, bad, &ps));
    assert_null(p);
    assert_non_null(strstr(cw_jit_get_compile_log(), "frob.cu(3): error"));
    assert_non_null(strstr(cw_jit_get_compile_log(), "the frobnicator is missing"));
    assert_non_null(strstr(cw_last_error()->message, "frob.cu(3)"));
    assert_non_null(strstr(cw_last_error()->message, "cw_jit_get_compile_log()"));
    assert_int_equal(cw_last_error()->status, CW_ERROR_COMPILE);
    assert_int_equal(count_files(dir, ".cwk", NULL), 0);
    /* and again: an error is not cached either */
    const long c0 = nv_compiles();
    assert_cw(CW_ERROR_COMPILE, cw_program_compile(&p, ctx, bad, &ps));
    assert_int_equal(nv_compiles(), c0 + 1);
}

/* Entries that do not verify are never loaded: removed, compiled, rewritten. */
static void test_disk_integrity(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "integrity");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void k5(int *p) { p[0] = 5; }\n";
    cw_program *p = compile_with(src, NULL);
    cw_program_info pi = info_of(p);
    char path[1024];
    entry_file(dir, pi.key, path, sizeof path);
    const long full = file_size(path);
    assert_true(full > 100);
    for (int round = 0; round < 4; round++) {
        /* 0: a flipped byte in the code; 1: truncated; 2: a flipped byte in the
         * stored hash; 3: another entry's file under this name */
        if (round == 3) {
            cw_program *other = compile_with("extern \"C\" __global__ void other() {}\n", NULL);
            cw_program_info oi = info_of(other);
            char opath[1024];
            entry_file(dir, oi.key, opath, sizeof opath);
            assert_int_equal(rename(opath, path), 0);
            cw_program_destroy(&other);
        } else {
            int fd = open(path, O_RDWR);
            assert_true(fd >= 0);
            if (round == 1) {
                assert_int_equal(ftruncate(fd, full / 2), 0);
            } else {
                const off_t at = round == 0 ? full - 3 : 20;
                unsigned char c = 0;
                assert_int_equal(pread(fd, &c, 1, at), 1);
                c ^= 0x40;
                assert_int_equal(pwrite(fd, &c, 1, at), 1);
            }
            close(fd);
        }
        cw_jit_cache_clear_memory();
        const cw_jit_stats s0 = stats();
        const long c0 = nv_compiles();
        cw_program *q = compile_with(src, NULL);
        cw_program_info qi = info_of(q);
        if (qi.source != CW_FROM_COMPILE) fail_msg("round %d: a damaged entry was loaded", round);
        assert_memory_equal(qi.code, pi.code, pi.size);
        assert_int_equal(nv_compiles(), c0 + 1);
        const cw_jit_stats s1 = stats();
        assert_int_equal(s1.disk_rejected - s0.disk_rejected, 1);
        assert_int_equal(s1.disk_writes - s0.disk_writes, 1);
        assert_int_equal(file_size(path), full); /* written again, whole */
        cw_program_destroy(&q);
        /* and that one loads */
        cw_jit_cache_clear_memory();
        q = compile_with(src, NULL);
        assert_int_equal(info_of(q).source, CW_FROM_DISK);
        cw_program_destroy(&q);
    }
    assert_false(has_tmp_files(dir));
    cw_program_destroy(&p);
}

/* Sets byte `at` of a cache file to v and makes its SHA-256 right again
 * (header: "CWKC", schema, size, SHA-256 at 16, key at 48; payload at 80). */
static void rewrite_byte(const char *path, long at, unsigned char v) {
    const long n = file_size(path);
    assert_true(n > at && n > 80);
    unsigned char *f = malloc((size_t)n);
    int fd = open(path, O_RDWR);
    assert_true(f && fd >= 0 && pread(fd, f, (size_t)n, 0) == n);
    f[at] = v;
    cwi_sha256(f + 80, (size_t)n - 80, 0, f + 16);
    assert_int_equal(pwrite(fd, f, (size_t)n, 0), n);
    close(fd);
    free(f);
}

/* Files whose hash verifies but whose payload the writer never makes (found
 * by tests/fuzz/fuzz_cache_file): is_ptx neither 0 nor 1, a NUL byte inside
 * PTX, inside a name expression, inside a lowered name. Never loaded:
 * removed, compiled, written again. */
static void test_disk_malformed(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "malformed");
    use_dir(dir, 0);
    const char *src = "template <class T> __global__ void mal(T *x) {}\n";
    const char *exprs[] = {"mal<int>"};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name_expressions = exprs;
    ps.n_name_expressions = 1;
    for (int round = 0; round < 4; round++) {
        ps.output_ptx = round == 1;
        ps.arch = round == 1 ? 80 : 0;
        cw_program *p = compile_with(src, &ps);
        cw_program_info pi = info_of(p);
        entry_file(dir, pi.key, path, sizeof path);
        const long code_end = 96 + (long)pi.size; /* then u32 count, u64 length, the name, u64, the lowered name */
        const long at = round == 0 ? 80 : round == 1 ? 97 : round == 2 ? code_end + 12 + 3 : code_end + 12 + 8 + 8 + 5;
        rewrite_byte(path, at, round == 0 ? 2 : 0);
        cw_jit_cache_clear_memory();
        const cw_jit_stats s0 = stats();
        cw_program *q = compile_with(src, &ps);
        if (info_of(q).source != CW_FROM_COMPILE) fail_msg("round %d: a malformed entry was loaded", round);
        assert_int_equal(stats().disk_rejected - s0.disk_rejected, 1);
        const char *low = NULL;
        assert_cw_ok(cw_program_get_lowered_name(q, "mal<int>", &low));
        assert_string_equal(low, "_Zfake_mal_int_");
        cw_program_destroy(&q);
        cw_jit_cache_clear_memory();
        q = compile_with(src, &ps); /* written again, whole: it loads */
        assert_int_equal(info_of(q).source, CW_FROM_DISK);
        cw_program_destroy(&q);
        cw_program_destroy(&p);
    }
}

/* A cache directory from the environment too long for the cache's paths
 * (944 bytes or more, which cw_jit_cache_configure refuses) turns the disk
 * cache off: it was cut to 1023 bytes (a directory nobody named) or kept
 * (too long for the paths of eviction). Found by tests/fuzz/fuzz_env. */
static void test_env_dir_too_long(void **state) {
    (void)state;
    const char *src = "extern \"C\" __global__ void far_away() {}\n";
    const size_t lengths[] = {980, 1100};
    for (size_t i = 0; i < 2; i++) {
        char dir[1300], top[600];
        snprintf(top, sizeof top, "%s/long%zu", g_root, i);
        snprintf(dir, sizeof dir, "%s", top);
        while (strlen(dir) < lengths[i]) strcat(dir, "/0123456789012345678901234567890123456789");
        dir[lengths[i]] = '\0';
        setenv("CUWEAVE_CACHE_DIR", dir, 1);
        cw_jit_cache_settings cs;
        cw_jit_cache_settings_default(&cs); /* dir NULL: read from the environment */
        assert_cw_ok(cw_jit_cache_configure(&cs));
        const cw_jit_stats s0 = stats();
        cw_program *p = compile_with(src, NULL);
        if (stats().disk_writes != s0.disk_writes) fail_msg("%zu bytes: the cache was written", lengths[i]);
        struct stat st;
        assert_int_not_equal(stat(top, &st), 0); /* nothing made */
        cw_program_destroy(&p);
        cw_jit_cache_clear_memory();
    }
    setenv("CUWEAVE_CACHE_DIR", g_root, 1);
}

/* A second process finds the entry on disk and never asks NVRTC to compile. */
static void test_second_process(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "second");
    use_dir(dir, 0);
    cw_program *p = compile_with(k_shared_src, NULL);
    assert_int_equal(info_of(p).source, CW_FROM_COMPILE);
    cw_program_destroy(&p);
    int rc = wait_child(spawn_child("reader", dir, NULL));
    if (rc != 0) fail_msg("the reader process exited %d (30: not from disk, 31/32: NVRTC compiled)", rc);
}

/* Six processes fill the same entry at once: all succeed, one whole file. */
static void test_concurrent_fill(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "concurrent");
    pid_t pids[6];
    for (int i = 0; i < 6; i++) pids[i] = spawn_child("filler", dir, NULL);
    for (int i = 0; i < 6; i++) {
        int rc = wait_child(pids[i]);
        if (rc != 0) fail_msg("filler %d exited %d", i, rc);
    }
    assert_int_equal(count_files(dir, ".cwk", NULL), 1);
    assert_false(has_tmp_files(dir));
    use_dir(dir, 0);
    cw_jit_cache_clear_memory();
    cw_program *p = compile_with(k_shared_src, NULL);
    assert_int_equal(info_of(p).source, CW_FROM_DISK);
    cw_program_destroy(&p);
    cw_jit_cache_clear_memory();
}

/* The size bound holds; the least recently used entries go first. */
static void test_eviction(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "evict");
    /* one entry is a few hundred bytes: room for about three */
    use_dir(dir, 0);
    char src[128];
    snprintf(src, sizeof src, "extern \"C\" __global__ void e%d() { /* padding padding */ }\n", 0);
    cw_program *p = compile_with(src, NULL);
    char path0[1024];
    entry_file(dir, info_of(p).key, path0, sizeof path0);
    const long one = file_size(path0);
    cw_program_destroy(&p);
    const uint64_t bound = (uint64_t)(one * 3 + one / 2);
    use_dir(dir, bound);
    const cw_jit_stats s0 = stats();
    char keys[10][65];
    for (int i = 1; i < 10; i++) {
        struct timespec ts = {0, 2 * 1000 * 1000}; /* distinct modification times */
        nanosleep(&ts, NULL);
        snprintf(src, sizeof src, "extern \"C\" __global__ void e%d() { /* padding padding */ }\n", i);
        p = compile_with(src, NULL);
        memcpy(keys[i], info_of(p).key, 65);
        cw_program_destroy(&p);
        long total = 0;
        count_files(dir, ".cwk", &total);
        if ((uint64_t)total > bound) fail_msg("after %d entries the cache holds %ld bytes, bound %llu", i + 1, total,
                                              (unsigned long long)bound);
    }
    const cw_jit_stats s1 = stats();
    assert_true(s1.evictions - s0.evictions >= 6);
    assert_int_equal(count_files(dir, ".cwk", NULL), 3);
    char path[1024];
    entry_file(dir, keys[9], path, sizeof path);
    assert_true(file_size(path) > 0); /* the newest stays */
    assert_true(file_size(path0) < 0); /* the oldest went */
    entry_file(dir, keys[6], path, sizeof path);
    assert_true(file_size(path) < 0);
}

/* Without NVRTC: a clear error, in a process of its own (NVRTC is opened
 * once per process). */
static void test_no_nvrtc(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "nonvrtc");
    int rc = wait_child(spawn_child("nonvrtc", dir, "CUWEAVE_LIBNVRTC=/nonexistent/libnvrtc.so"));
    if (rc != 0) fail_msg("the no-NVRTC process exited %d (20: wrong status, 21: message lacks the path)", rc);
}

/* Programs and their names; modules and built-ins need the library API,
 * which the fake driver lacks. */
static void test_names_and_modules(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "names");
    use_dir(dir, 0);
    const char *exprs[] = {"scale<float>", "scale<int>"};
    cw_program_settings ps;
    cw_program_settings_default(&ps);
    ps.name_expressions = exprs;
    ps.n_name_expressions = 2;
    cw_program *p = compile_with("template <class T> __global__ void scale(T *x) {}\n", &ps);
    const char *low = NULL;
    assert_cw_ok(cw_program_get_lowered_name(p, "scale<int>", &low));
    assert_string_equal(low, "_Zfake_scale_int_");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_program_get_lowered_name(p, "scale<double>", &low));
    /* from the disk cache, the names come along */
    cw_jit_cache_clear_memory();
    cw_program *q = compile_with("template <class T> __global__ void scale(T *x) {}\n", &ps);
    assert_int_equal(info_of(q).source, CW_FROM_DISK);
    assert_cw_ok(cw_program_get_lowered_name(q, "scale<float>", &low));
    assert_string_equal(low, "_Zfake_scale_float_");
    cw_module *m = NULL;
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_module_load(&m, p));
    assert_non_null(strstr(cw_last_error()->message, "library API"));
    assert_null(m);
    cw_kernel *k = NULL;
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &k));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_builtin_get_kernel(CW_BUILTIN_COUNT, &k));
    assert_null(k);
    cw_versions vs;
    assert_cw_ok(cw_get_versions(&vs));
    assert_non_null(vs.builtin_origin);
    assert_true(strstr(vs.builtin_origin, "ptx") != NULL); /* "cubin ... + ptx ..." or "ptx ... (checked in)" */
    cw_launch_config lc;
    memset(&lc, 0x5a, sizeof lc);
    cw_launch_config_default(&lc);
    assert_int_equal(lc.grid[0] * lc.grid[1] * lc.grid[2] * lc.block[0] * lc.block[1] * lc.block[2], 1);
    assert_int_equal(lc.shared_bytes + lc.cluster[0] + lc.use_priority, 0);
    cw_program *bogus = (cw_program *)(void *)&ps;
    cw_program_info pi;
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_program_get_info(bogus, &pi));
    cw_program_destroy(&p);
    cw_program_destroy(&q);
}

/* ---- the disk cache's trust rules (issue 25, defect 9) ------------------------
 * An entry file is trusted only in a directory owned by this user (or root)
 * that group and others cannot write, and only when the file itself is owned
 * by this user (or root), not writable by group or others, and a regular
 * file; anything else is refused: not read (nor, for a directory, written),
 * counted in disk_untrusted, and a WARNING in the log says why. */

static char g_log[8192];

static void log_to_buffer(void *user, cw_log_level level, const char *message) {
    (void)user;
    const size_t n = strlen(g_log);
    if (level == CW_LOG_WARNING) snprintf(g_log + n, sizeof g_log - n, "%s\n", message);
}

static void log_capture(int on) {
    if (on) g_log[0] = '\0';
    assert_cw_ok(cw_log_set_callback(on ? log_to_buffer : NULL, NULL, CW_LOG_WARNING));
}

static long read_file(const char *path, unsigned char *buf, size_t cap) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    const ssize_t n = read(fd, buf, cap);
    close(fd);
    return (long)n;
}

/* Compiles src into dir (a trusted 0700 directory: the library writes the
 * entry), then rewrites the entry's code to "EVILCUBIN..." with a matching
 * SHA-256: what another user could plant, valid in every way the cache
 * verifies. Writes the entry file's path into `path`, and checks that from a
 * trusted directory the planted code IS loaded (so that the refusals below
 * are the trust rules' doing, not a broken plant). */
static void plant_entry(const char *dir, const char *src, char *path, size_t cap) {
    use_dir(dir, 0);
    cw_jit_cache_clear_memory();
    cw_program *p = compile_with(src, NULL);
    entry_file(dir, info_of(p).key, path, cap);
    cw_program_destroy(&p);
    unsigned char buf[4096];
    const long n = read_file(path, buf, sizeof buf);
    /* header 80 bytes (the payload's SHA-256 at 16), then the payload: u32
     * is_ptx, u32 arch, u64 size, the code */
    assert_true(n > 96 + 9 && n < (long)sizeof buf);
    assert_memory_equal(buf + 96, "FAKECUBIN", 9);
    memcpy(buf + 96, "EVIL", 4);
    cwi_sha256(buf + 80, (size_t)n - 80, 0, buf + 16);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, (size_t)n, 0), n);
    close(fd);
    cw_jit_cache_clear_memory();
    p = compile_with(src, NULL);
    cw_program_info i = info_of(p);
    assert_int_equal(i.source, CW_FROM_DISK);
    assert_memory_equal(i.code, "EVILCUBIN", 9);
    cw_program_destroy(&p);
    cw_jit_cache_clear_memory();
}

/* The compile of src must not load the planted entry: NVRTC compiles it,
 * disk_untrusted counts one refusal, nothing is found on or read from disk,
 * and a warning names `where` and says `why`. Returns the stats' change. */
static cw_jit_stats expect_refused(const char *what, const char *src, const char *where, const char *why) {
    cw_jit_cache_clear_memory();
    const cw_jit_stats s0 = stats();
    const long c0 = nv_compiles();
    log_capture(1);
    cw_program *p = compile_with(src, NULL);
    log_capture(0);
    cw_program_info i = info_of(p);
    if (i.source != CW_FROM_COMPILE || memcmp(i.code, "FAKECUBIN", 9) != 0)
        fail_msg("%s: the planted entry was loaded (source %d, code \"%.9s\")", what, (int)i.source,
                 (const char *)i.code);
    cw_program_destroy(&p);
    const cw_jit_stats s1 = stats();
    cw_jit_stats d;
    memset(&d, 0, sizeof d);
    d.compiles = s1.compiles - s0.compiles;
    d.disk_hits = s1.disk_hits - s0.disk_hits;
    d.disk_writes = s1.disk_writes - s0.disk_writes;
    d.disk_rejected = s1.disk_rejected - s0.disk_rejected;
    d.disk_untrusted = s1.disk_untrusted - s0.disk_untrusted;
    if (nv_compiles() != c0 + 1 || d.compiles != 1 || d.disk_hits != 0 || d.disk_rejected != 0 ||
        d.disk_untrusted != 1)
        fail_msg("%s: compiles %ld, disk hits %llu, rejected %llu, untrusted %llu (expected 1, 0, 0, 1)", what,
                 nv_compiles() - c0, (unsigned long long)d.disk_hits, (unsigned long long)d.disk_rejected,
                 (unsigned long long)d.disk_untrusted);
    if (!strstr(g_log, where) || !strstr(g_log, why))
        fail_msg("%s: the log does not name %s and say \"%s\": %s", what, where, why, g_log);
    return d;
}

/* A directory that group or others can write is refused: the planted entry
 * is not loaded, nothing is written there, the file is left as it was.
 * Directories that only group or others can read are used. */
static void test_disk_untrusted_dir(void **state) {
    (void)state;
    static const unsigned refused[] = {0777, 0770, 0707, 0730, 0703, 01777};
    static const unsigned used[] = {0755, 0711};
    const char *src = "extern \"C\" __global__ void planted_dir() {}\n";
    for (size_t m = 0; m < sizeof refused / sizeof refused[0] + sizeof used / sizeof used[0]; m++) {
        const int refuse = m < sizeof refused / sizeof refused[0];
        const unsigned mode = refuse ? refused[m] : used[m - sizeof refused / sizeof refused[0]];
        char dir[512], path[1024], what[128];
        snprintf(what, sizeof what, "udir%04o", mode);
        fresh_dir(dir, sizeof dir, what);
        plant_entry(dir, src, path, sizeof path);
        unsigned char before[4096], after[4096];
        const long n = read_file(path, before, sizeof before);
        assert_int_equal(chmod(dir, mode), 0);
        if (refuse) {
            snprintf(what, sizeof what, "directory mode %04o", mode);
            cw_jit_stats d = expect_refused(what, src, dir, "writable by group or others");
            if (d.disk_writes != 0) fail_msg("%s: %llu entries written into it", what, (unsigned long long)d.disk_writes);
            assert_int_equal(read_file(path, after, sizeof after), n); /* neither removed nor replaced */
            assert_memory_equal(after, before, (size_t)n);
            assert_int_equal(count_files(dir, ".cwk", NULL), 1);
            assert_false(has_tmp_files(dir));
        } else {
            cw_jit_cache_clear_memory();
            cw_program *p = compile_with(src, NULL);
            if (info_of(p).source != CW_FROM_DISK) fail_msg("directory mode %04o was not used", mode);
            cw_program_destroy(&p);
        }
        chmod(dir, 0700);
    }
    cw_jit_cache_clear_memory();
}

/* An entry file that group or others can write is refused (not read, not
 * removed as corrupt); the compile's write then replaces it with the
 * library's own (mode 0600), which the next lookup loads. */
static void test_disk_untrusted_file(void **state) {
    (void)state;
    static const unsigned refused[] = {0666, 0660, 0606, 0620, 0602};
    static const unsigned used[] = {0644, 0400};
    const char *src = "extern \"C\" __global__ void planted_file() {}\n";
    for (size_t m = 0; m < sizeof refused / sizeof refused[0] + sizeof used / sizeof used[0]; m++) {
        const int refuse = m < sizeof refused / sizeof refused[0];
        const unsigned mode = refuse ? refused[m] : used[m - sizeof refused / sizeof refused[0]];
        char dir[512], path[1024], what[128];
        snprintf(what, sizeof what, "ufile%04o", mode);
        fresh_dir(dir, sizeof dir, what);
        plant_entry(dir, src, path, sizeof path);
        assert_int_equal(chmod(path, mode), 0);
        if (refuse) {
            snprintf(what, sizeof what, "file mode %04o", mode);
            cw_jit_stats d = expect_refused(what, src, path, "writable by group or others");
            assert_int_equal(d.disk_writes, 1);
            struct stat st;
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_mode & 07777, 0600);
            assert_false(has_tmp_files(dir));
        }
        cw_jit_cache_clear_memory();
        cw_program *p = compile_with(src, NULL);
        cw_program_info i = info_of(p);
        if (i.source != CW_FROM_DISK) fail_msg("file mode %04o: the next lookup was not a disk hit", mode);
        /* refused: the library's own entry replaced it; used: the planted one */
        assert_memory_equal(i.code, refuse ? "FAKECUBIN" : "EVILCUBIN", 9);
        cw_program_destroy(&p);
    }
    cw_jit_cache_clear_memory();
}

/* A directory or file owned by another user (not root) is refused. Only
 * root can give a file away: as root (CI) the test chowns to nobody (65534);
 * otherwise it skips, saying so. */
static void test_disk_foreign_owner(void **state) {
    (void)state;
    if (geteuid() != 0) {
        printf("# skipped: making a file owned by another user needs root (euid %d)\n", (int)geteuid());
        skip();
    }
    const char *src = "extern \"C\" __global__ void planted_owner() {}\n";
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "owner_dir");
    plant_entry(dir, src, path, sizeof path);
    if (chown(dir, 65534, 65534) != 0) {
        printf("# skipped: chown to uid 65534 is not permitted here: %s\n", strerror(errno));
        skip();
    }
    cw_jit_stats d = expect_refused("directory owned by uid 65534", src, dir, "owned by uid 65534");
    assert_int_equal(d.disk_writes, 0);
    assert_int_equal(chown(dir, 0, 0), 0);

    fresh_dir(dir, sizeof dir, "owner_file");
    plant_entry(dir, src, path, sizeof path);
    assert_int_equal(chown(path, 65534, 65534), 0);
    d = expect_refused("file owned by uid 65534", src, path, "owned by uid 65534");
    assert_int_equal(d.disk_writes, 1); /* replaced by the library's own */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, 0);
    cw_jit_cache_clear_memory();
}

/* Directories the library makes get mode 0700 whatever the umask. */
static void test_disk_created_mode(void **state) {
    (void)state;
    char top[512], dir[600];
    snprintf(top, sizeof top, "%s/made", g_root);
    snprintf(dir, sizeof dir, "%s/a/b", top);
    use_dir(dir, 0);
    const mode_t old = umask(0277);
    cw_program *p = compile_with("extern \"C\" __global__ void made_dir() {}\n", NULL);
    umask(old);
    cw_program_destroy(&p);
    const char *made[] = {top, "a", "b"};
    char path[700];
    for (int i = 0; i < 3; i++) {
        if (i == 0) snprintf(path, sizeof path, "%s", top);
        else snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", made[i]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        if ((st.st_mode & 07777) != 0700) fail_msg("%s was made with mode %04o, not 0700", path, st.st_mode & 07777);
    }
    assert_int_equal(count_files(dir, ".cwk", NULL), 1);
    cw_jit_cache_clear_memory();
}

/* A rejected (corrupt) file is removed only if it is still the file that was
 * read. The hook runs between the read and the removal: there the test does
 * what a concurrent writer does (writes a whole good entry to a temporary
 * file and renames it over the entry's name). The good entry must survive;
 * with nobody in between, the corrupt file must go. */
struct race {
    const unsigned char *good;
    long n;
    int replace;
    int calls[2];
    ino_t planted;   /* the good file's inode, put in place in phase 0 */
    ino_t seen;      /* what is at the path in phase 1 (0: nothing) */
    int seen_good;   /* it is the good entry, byte for byte */
};

static void race_hook(int phase, const char *path, void *arg) {
    struct race *r = arg;
    r->calls[phase & 1]++;
    struct stat st;
    if (phase == 0 && r->replace) {
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "%s.tmp.writer", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || write(fd, r->good, (size_t)r->n) != r->n || close(fd) != 0 || rename(tmp, path) != 0) return;
        if (stat(path, &st) == 0) r->planted = st.st_ino;
    } else if (phase == 1) {
        unsigned char buf[4096];
        r->seen = stat(path, &st) == 0 ? st.st_ino : 0;
        r->seen_good = r->seen && read_file(path, buf, sizeof buf) == r->n && memcmp(buf, r->good, (size_t)r->n) == 0;
    }
}

static void test_disk_reject_race(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "race");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void raced(int *p) { p[0] = 7; }\n";
    cw_jit_cache_clear_memory();
    cw_program *p = compile_with(src, NULL);
    entry_file(dir, info_of(p).key, path, sizeof path);
    cw_program_destroy(&p);
    unsigned char good[4096];
    const long n = read_file(path, good, sizeof good);
    assert_true(n > 100 && n < (long)sizeof good);
    for (int replace = 1; replace >= 0; replace--) {
        /* corrupt the entry: a flipped byte in the code */
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        unsigned char c = good[n - 3] ^ 0x40;
        assert_int_equal(pwrite(fd, &c, 1, n - 3), 1);
        close(fd);
        struct race r;
        memset(&r, 0, sizeof r);
        r.good = good;
        r.n = n;
        r.replace = replace;
        cw_jit_cache_clear_memory();
        const cw_jit_stats s0 = stats();
        cwi_jit_disk_hook(race_hook, &r);
        p = compile_with(src, NULL);
        cwi_jit_disk_hook(NULL, NULL);
        assert_int_equal(info_of(p).source, CW_FROM_COMPILE);
        cw_program_destroy(&p);
        assert_int_equal(stats().disk_rejected - s0.disk_rejected, 1);
        assert_int_equal(r.calls[0], 1);
        assert_int_equal(r.calls[1], 1);
        if (replace) {
            assert_true(r.planted != 0);
            if (!r.seen)
                fail_msg("the writer's fresh entry (inode %lu), renamed into place after the corrupt file was "
                         "read, was removed with it", (unsigned long)r.planted);
            assert_int_equal(r.seen, r.planted);
            assert_true(r.seen_good);
        } else {
            if (r.seen) fail_msg("the corrupt file (inode %lu) was not removed", (unsigned long)r.seen);
        }
        assert_false(has_tmp_files(dir));
        /* and the entry on disk is whole: the next lookup loads it */
        cw_jit_cache_clear_memory();
        p = compile_with(src, NULL);
        assert_int_equal(info_of(p).source, CW_FROM_DISK);
        cw_program_destroy(&p);
    }
    cw_jit_cache_clear_memory();
}

/* SHA-256: the standard's test vectors, and the x86 SHA-instruction code
 * (where the CPU has it) equal to the portable code on 500 random inputs. */
static void test_sha256(void **state) {
    (void)state;
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int portable = 0; portable < 2; portable++) {
            unsigned char d[32];
            char hex[65];
            cwi_sha256(v[i].msg, strlen(v[i].msg), portable, d);
            for (int k = 0; k < 32; k++) snprintf(hex + 2 * k, 3, "%02x", d[k]);
            assert_string_equal(hex, v[i].hex);
        }
    unsigned char *buf = malloc(1000000);
    assert_non_null(buf);
    memset(buf, 'a', 1000000);
    unsigned char d[32];
    char hex[65];
    cwi_sha256(buf, 1000000, 0, d);
    for (int k = 0; k < 32; k++) snprintf(hex + 2 * k, 3, "%02x", d[k]);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    unsigned seed = 12345;
    for (int t = 0; t < 500; t++) {
        size_t n = (size_t)(rand_r(&seed) % 4000);
        for (size_t k = 0; k < n; k++) buf[k] = (unsigned char)rand_r(&seed);
        unsigned char a[32], b[32];
        cwi_sha256(buf, n, 0, a);
        cwi_sha256(buf, n, 1, b);
        if (memcmp(a, b, 32) != 0) fail_msg("SHA-256 of %zu bytes differs between the two implementations", n);
    }
    free(buf);
}

/* ---- the cache seen and cleared (issue 40) ------------------------------------- */

/* n files with entries' names (keys base..base+n-1) of `size` bytes each,
 * modified `age` seconds ago: counted and evicted as entries, never loaded
 * (no compile has their keys). */
static void plant_named(const char *dir, int base, int n, size_t size, int age) {
    static char junk[8192];
    assert_true(size <= sizeof junk);
    memset(junk, 'j', size);
    const time_t when = time(NULL) - age;
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%064x.cwk", dir, base + i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, junk, size), (ssize_t)size);
        struct timespec t[2] = {{when, 0}, {when, 0}};
        futimens(fd, t);
        close(fd);
    }
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static cw_jit_cache_info cache_info(void) {
    cw_jit_cache_info i;
    memset(&i, 0xab, sizeof i);
    assert_cw_ok(cw_jit_cache_get_info(&i));
    for (size_t k = 0; k < sizeof i.reserved; k++) assert_int_equal(i.reserved[k], 0);
    return i;
}

/* The account in dir/cache.lock: bytes, entries (-1, -1 when none). */
static void read_account(const char *dir, long long *bytes, long long *entries) {
    char path[1024];
    unsigned char a[32];
    snprintf(path, sizeof path, "%s/cache.lock", dir);
    *bytes = *entries = -1;
    if (read_file(path, a, sizeof a) != 32 || memcmp(a, "CWKA", 4) != 0) return;
    uint64_t b, e;
    memcpy(&b, a + 8, 8);
    memcpy(&e, a + 16, 8);
    *bytes = (long long)b;
    *entries = (long long)e;
}

/* cw_jit_cache_get_info: the directory in force, its bound, and only its
 * entry files counted (not a virtual environment or notes someone put
 * there); off, missing, untrusted. */
static void test_cache_info(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "info");
    rmdir(dir);
    use_dir(dir, 5u << 20);
    cw_jit_cache_info i = cache_info();
    assert_string_equal(i.dir, dir);
    assert_int_equal(i.max_bytes, 5u << 20);
    assert_int_equal(i.exists, 0);
    assert_int_equal(i.trusted, 0);
    assert_int_equal(i.entries, 0);
    assert_int_equal(i.memory, 1);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0); /* asking created nothing */
    cw_program *p = compile_with("extern \"C\" __global__ void info_a() {}\n", NULL);
    cw_program_destroy(&p);
    p = compile_with("extern \"C\" __global__ void info_b() {}\n", NULL);
    cw_program_destroy(&p);
    long bytes = 0;
    assert_int_equal(count_files(dir, ".cwk", &bytes), 2);
    /* not entries: a file of another name, a directory of files, a link */
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    write_file(path, "not an entry\n");
    snprintf(path, sizeof path, "%s/plot-venv", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/plot-venv/%064x.cwk", dir, 7);
    write_file(path, "inside a subdirectory\n");
    snprintf(path, sizeof path, "%s/%064x.cwk", dir, 8);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    i = cache_info();
    assert_int_equal(i.exists, 1);
    assert_int_equal(i.trusted, 1);
    assert_int_equal(i.entries, 2);
    assert_int_equal(i.bytes, (uint64_t)bytes);
    long long ab, ae;
    read_account(dir, &ab, &ae);
    assert_int_equal(ab, bytes);
    assert_int_equal(ae, 2);
    /* an untrusted directory: reported, not read */
    assert_int_equal(chmod(dir, 0770), 0);
    const cw_jit_stats s0 = stats();
    i = cache_info();
    assert_int_equal(i.exists, 1);
    assert_int_equal(i.trusted, 0);
    assert_int_equal(i.entries, 0);
    assert_int_equal(stats().disk_untrusted, s0.disk_untrusted); /* asking is not a refused lookup */
    chmod(dir, 0700);
    /* the environment's directory when none is configured; off */
    cw_jit_cache_settings s;
    cw_jit_cache_settings_default(&s);
    assert_cw_ok(cw_jit_cache_configure(&s));
    i = cache_info();
    assert_string_equal(i.dir, g_root);
    assert_int_equal(i.max_bytes, 256u << 20);
    use_dir("off", 0);
    i = cache_info();
    assert_string_equal(i.dir, "");
    assert_int_equal(i.exists + i.trusted + (int)i.entries + (int)i.bytes, 0);
    assert_int_equal(cw_jit_cache_get_info(NULL), CW_ERROR_INVALID_ARGUMENT);
    cw_jit_cache_clear_memory();
}

/* cw_jit_cache_clear_disk removes the entries and writers' stale
 * temporaries, nothing else; the next compile compiles; refused for an
 * untrusted directory (nothing removed). */
static void test_cache_clear_disk(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "clear");
    use_dir(dir, 0);
    const char *src = "extern \"C\" __global__ void cleared() {}\n";
    cw_program *p = compile_with(src, NULL);
    cw_program_destroy(&p);
    plant_named(dir, 1, 4, 1000, 0);
    long bytes = 0;
    assert_int_equal(count_files(dir, ".cwk", &bytes), 5);
    snprintf(path, sizeof path, "%s/keep.txt", dir);
    write_file(path, "kept\n");
    snprintf(path, sizeof path, "%s/sub", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/sub/%064x.cwk", dir, 9);
    write_file(path, "kept too\n");
    char fresh_tmp[1024], stale_tmp[1024];
    snprintf(fresh_tmp, sizeof fresh_tmp, "%s/%064x.cwk.tmp.1.1", dir, 1);
    write_file(fresh_tmp, "a write in progress");
    snprintf(stale_tmp, sizeof stale_tmp, "%s/%064x.cwk.tmp.1.2", dir, 1);
    write_file(stale_tmp, "a writer that died");
    struct timespec t[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    utimensat(AT_FDCWD, stale_tmp, t, 0);
    /* untrusted: refused, nothing removed */
    chmod(dir, 0770);
    uint64_t n = 99, b = 99;
    assert_int_equal(cw_jit_cache_clear_disk(&n, &b), CW_ERROR_NOT_PERMITTED);
    assert_non_null(strstr(cw_last_error()->message, "not trusted"));
    assert_int_equal(count_files(dir, ".cwk", NULL), 5);
    chmod(dir, 0700);
    n = b = 99;
    assert_cw_ok(cw_jit_cache_clear_disk(&n, &b));
    assert_int_equal(n, 5);
    assert_int_equal(b, (uint64_t)bytes);
    assert_int_equal(count_files(dir, ".cwk", NULL), 0);
    assert_int_equal(file_size(fresh_tmp) > 0, 1);
    assert_int_equal(file_size(stale_tmp), -1);
    snprintf(path, sizeof path, "%s/keep.txt", dir);
    assert_int_equal(file_size(path), 5);
    snprintf(path, sizeof path, "%s/sub/%064x.cwk", dir, 9);
    assert_int_equal(file_size(path), 9);
    long long ab, ae;
    read_account(dir, &ab, &ae);
    assert_int_equal(ab, 0);
    assert_int_equal(ae, 0);
    assert_int_equal(cache_info().entries, 0);
    /* the memory cache is left alone; emptied too, the next compile compiles and writes */
    p = compile_with(src, NULL);
    assert_int_equal(info_of(p).source, CW_FROM_MEMORY);
    cw_program_destroy(&p);
    cw_jit_cache_clear_memory();
    const long c0 = nv_compiles();
    p = compile_with(src, NULL);
    assert_int_equal(info_of(p).source, CW_FROM_COMPILE);
    cw_program_destroy(&p);
    assert_int_equal(nv_compiles(), c0 + 1);
    assert_int_equal(count_files(dir, ".cwk", NULL), 1);
    assert_cw_ok(cw_jit_cache_clear_disk(NULL, NULL)); /* both may be NULL */
    assert_int_equal(count_files(dir, ".cwk", NULL), 0);
    /* missing directory, disk cache off: nothing to remove */
    snprintf(path, sizeof path, "%s/never-made", g_root);
    use_dir(path, 0);
    assert_cw_ok(cw_jit_cache_clear_disk(&n, &b));
    assert_int_equal(n + b, 0);
    use_dir("off", 0);
    n = b = 7;
    assert_cw_ok(cw_jit_cache_clear_disk(&n, &b));
    assert_int_equal(n + b, 0);
    cw_jit_cache_clear_memory();
}

struct clear_arg {
    atomic_int done;
    uint64_t n;
    cw_status st;
};

static void *clear_thread(void *p) {
    struct clear_arg *a = p;
    a->st = cw_jit_cache_clear_disk(&a->n, NULL);
    atomic_store(&a->done, 1);
    return NULL;
}

/* The clear holds the cache's lock (cache.lock, the one a write takes to
 * keep the bound): while another holder has it, the clear waits and
 * removes nothing. */
static void test_cache_clear_takes_the_lock(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "clearlock");
    use_dir(dir, 0);
    cw_program *p = compile_with("extern \"C\" __global__ void locked() {}\n", NULL);
    cw_program_destroy(&p);
    snprintf(path, sizeof path, "%s/cache.lock", dir);
    const int lfd = open(path, O_RDWR);
    assert_true(lfd >= 0);
    assert_int_equal(flock(lfd, LOCK_EX), 0);
    struct clear_arg a = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, clear_thread, &a), 0);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(atomic_load(&a.done), 0);
    assert_int_equal(count_files(dir, ".cwk", NULL), 1); /* nothing removed while the lock is held */
    flock(lfd, LOCK_UN);
    close(lfd);
    pthread_join(t, NULL);
    assert_cw_ok(a.st);
    assert_int_equal(a.n, 1);
    assert_int_equal(count_files(dir, ".cwk", NULL), 0);
    cw_jit_cache_clear_memory();
}

/* A write below the bound does not read the directory (the running
 * account): with 2,000 planted entries, the first write reads it once (no
 * account yet), the next 20 none; the account equals what is there. Past
 * the bound, one read and eviction of the oldest down to 7/8 of it, the
 * entry just written kept. */
static void test_write_keeps_an_account(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "account");
    plant_named(dir, 1, 2000, 512, 100);
    use_dir(dir, 64u << 20);
    const unsigned long long r0 = cwi_jit_disk_scans();
    char src[128];
    cw_program *p;
    for (int i = 0; i < 21; i++) {
        snprintf(src, sizeof src, "extern \"C\" __global__ void acct%d() {}\n", i);
        p = compile_with(src, NULL);
        cw_program_destroy(&p);
        if (i == 0) assert_int_equal(cwi_jit_disk_scans(), r0 + 1);
    }
    assert_int_equal(cwi_jit_disk_scans(), r0 + 1);
    long bytes = 0;
    assert_int_equal(count_files(dir, ".cwk", &bytes), 2021);
    long long ab, ae;
    read_account(dir, &ab, &ae);
    assert_int_equal(ab, bytes);
    assert_int_equal(ae, 2021);
    /* past the bound: one read, the oldest evicted down to 7/8 of it */
    const uint64_t bound = (uint64_t)bytes - 100 * 512;
    use_dir(dir, bound);
    const cw_jit_stats e0 = stats();
    const unsigned long long r1 = cwi_jit_disk_scans();
    p = compile_with("extern \"C\" __global__ void acct_over() {}\n", NULL);
    char key[65];
    memcpy(key, info_of(p).key, 65);
    cw_program_destroy(&p);
    assert_int_equal(cwi_jit_disk_scans(), r1 + 1);
    long after = 0;
    const int left = count_files(dir, ".cwk", &after);
    if ((uint64_t)after > bound - bound / 8)
        fail_msg("%ld bytes left, more than 7/8 of the bound %llu", after, (unsigned long long)bound);
    assert_true(stats().evictions - e0.evictions >= 300);
    char path[1024];
    entry_file(dir, key, path, sizeof path);
    assert_true(file_size(path) > 0); /* the newest stays */
    for (int i = 0; i < 21; i++) { /* the compiled ones are newer than every planted one */
        snprintf(src, sizeof src, "extern \"C\" __global__ void acct%d() {}\n", i);
        p = compile_with(src, NULL);
        entry_file(dir, info_of(p).key, path, sizeof path);
        cw_program_destroy(&p);
    }
    read_account(dir, &ab, &ae);
    assert_int_equal(ab, after);
    assert_int_equal(ae, left);
    cw_jit_cache_clear_memory();
}

/* ---- the review of issue 40's account and lock ---------------------------- */

struct info_arg {
    atomic_int done;
    cw_status st;
};

static void *info_thread(void *p) {
    struct info_arg *a = p;
    cw_jit_cache_info i;
    a->st = cw_jit_cache_get_info(&i);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Descriptors of this process open on `path` (by /proc/self/fd). */
static int fds_on(const char *path) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        char link[300], target[1024];
        snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
        const ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        if (strcmp(target, path) == 0) n++;
    }
    closedir(d);
    return n;
}

/* A child forked while a thread of the parent is inside the cache's lock
 * (cache.lock's flock: a write keeping the bound, an info, a clear) gets a
 * copy of that descriptor, and a flock belongs to the open file, not to the
 * descriptor: once the library's call has returned, the lock must be free
 * (for the parent, other processes and the child's own compiles). Here the
 * thread waits in cw_jit_cache_get_info for the lock the test holds, the
 * test forks, releases the lock, and joins the thread; then the lock must
 * be free and the child's compile (a write) must finish. */
static void test_fork_while_lock_held(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "forklock");
    use_dir(dir, 0);
    cw_program *p = compile_with("extern \"C\" __global__ void fork_before() {}\n", NULL);
    cw_program_destroy(&p);
    snprintf(path, sizeof path, "%s/cache.lock", dir);
    const int lfd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(lfd >= 0);
    assert_int_equal(flock(lfd, LOCK_EX), 0);
    struct info_arg a = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, info_thread, &a), 0);
    /* the thread has opened the lock file (and waits for the lock) */
    for (int i = 0; i < 10000 && fds_on(path) < 2; i++) usleep(1000);
    assert_int_equal(fds_on(path), 2);
    int go[2];
    assert_int_equal(pipe(go), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(10);
        cw_program *q = NULL;
        if (cw_program_compile(&q, ctx, "extern \"C\" __global__ void fork_child() {}\n", NULL) != CW_SUCCESS)
            _exit(11);
        cw_program_info qi;
        if (cw_program_get_info(q, &qi) != CW_SUCCESS || qi.source != CW_FROM_COMPILE) _exit(12);
        cw_program_destroy(&q);
        _exit(0);
    }
    close(go[0]);
    flock(lfd, LOCK_UN);
    close(lfd);
    pthread_join(t, NULL);
    assert_cw_ok(a.st);
    /* every call of the library returned: the lock is free */
    const int probe = open(path, O_RDWR | O_CLOEXEC);
    assert_true(probe >= 0);
    const int free_now = flock(probe, LOCK_EX | LOCK_NB) == 0;
    close(probe);
    /* the child compiles (and writes) */
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    int status = 0, waited = 0;
    for (int i = 0; i < 10000 && (waited = (int)waitpid(pid, &status, WNOHANG)) == 0; i++) usleep(1000);
    if (waited == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    if (!free_now)
        fail_msg("the cache's lock is still held after cw_jit_cache_get_info returned: the child forked while it "
                 "waited for the lock holds it (child %s)",
                 waited == 0 ? "hung in its compile for 10 s, killed" : "exited");
    if (waited == 0) fail_msg("the forked child's compile hung for 10 s waiting for the cache's lock (killed)");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    cw_jit_cache_clear_memory();
}

/* Writes an account into dir/cache.lock: bytes, entries, the time of its
 * last full read. */
static void plant_account(const char *dir, uint64_t bytes, uint64_t entries, int64_t scanned) {
    char path[1024];
    unsigned char a[32];
    memcpy(a, "CWKA", 4);
    const uint32_t v = 1;
    memcpy(a + 4, &v, 4);
    memcpy(a + 8, &bytes, 8);
    memcpy(a + 16, &entries, 8);
    memcpy(a + 24, &scanned, 8);
    snprintf(path, sizeof path, "%s/cache.lock", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, a, sizeof a), (ssize_t)sizeof a);
    close(fd);
}

/* A corrupt account (the lock file is input from outside the process): a
 * total of 2^64 - 100 (a "negative" one, -100) read with a fresh time. A
 * write adds its size to it; the sum must not wrap around to a small total
 * that passes for "under the bound": the write reads the directory and
 * keeps the bound. */
static void test_account_total_wraps(void **state) {
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "wrap");
    plant_named(dir, 1, 200, 1000, 100); /* 200,000 bytes */
    const uint64_t bound = 100000;
    use_dir(dir, bound);
    plant_account(dir, UINT64_MAX - 99, 5, (int64_t)time(NULL));
    cw_program *p = compile_with("extern \"C\" __global__ void wrapped() {}\n", NULL);
    cw_program_destroy(&p);
    long bytes = 0;
    count_files(dir, ".cwk", &bytes);
    long long ab, ae;
    read_account(dir, &ab, &ae);
    if ((uint64_t)bytes > bound)
        fail_msg("the directory holds %ld bytes of entries past its bound of %llu after a write (the account "
                 "says %lld bytes, %lld entries: the total wrapped around)",
                 bytes, (unsigned long long)bound, ab, ae);
    assert_int_equal(ab, bytes);
    cw_jit_cache_clear_memory();
}

/* cw_jit_cache_get_info "creates nothing": not in a directory that exists
 * either (cuweave-info asks it about whatever CUWEAVE_CACHE_DIR names). */
static void test_cache_info_creates_nothing(void **state) {
    (void)state;
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "infonothing");
    plant_named(dir, 1, 3, 100, 0);
    use_dir(dir, 0);
    cw_jit_cache_info i = cache_info();
    assert_int_equal(i.exists, 1);
    assert_int_equal(i.trusted, 1);
    assert_int_equal(i.entries, 3);
    assert_int_equal(i.bytes, 300);
    snprintf(path, sizeof path, "%s/cache.lock", dir);
    if (file_size(path) >= 0)
        fail_msg("cw_jit_cache_get_info created %s (%ld bytes) in the directory it was asked about", path,
                 file_size(path));
    assert_int_equal(count_files(dir, "", NULL), 2 + 3); /* ".", ".." and the entries */
    cw_jit_cache_clear_memory();
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenvrtc.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    g_fake_cuda = argv[1];
    ssize_t len = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (len <= 0) return 1;
    g_self[len] = '\0';
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", g_fake_cuda);
    snprintf(g_fake_nvrtc, sizeof g_fake_nvrtc, "%s/libfakenvrtc.so", dirname(tmp));
    if (access(g_fake_cuda, R_OK) != 0 || access(g_fake_nvrtc, R_OK) != 0) {
        printf("FAIL: %s or %s is not readable\n", g_fake_cuda, g_fake_nvrtc);
        return 1;
    }
    setenv("CUWEAVE_LIBCUDA", g_fake_cuda, 1);
    if (!(argc >= 5 && strcmp(argv[2], "--child") == 0 && strcmp(argv[3], "nonvrtc") == 0))
        setenv("CUWEAVE_LIBNVRTC", g_fake_nvrtc, 1);
    if (argc >= 5 && strcmp(argv[2], "--child") == 0) return child_main(argv[3], argv[4]);
    /* never the user's cache: a scratch directory for this run */
    snprintf(g_root, sizeof g_root, "/tmp/cuweave-jit-test-XXXXXX");
    if (!mkdtemp(g_root)) return 1;
    setenv("CUWEAVE_CACHE_DIR", g_root, 1);
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: cuweave could not load the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_then_hits),
        cmocka_unit_test(test_key_canonical),
        cmocka_unit_test(test_option_rules),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_disk_integrity),
        cmocka_unit_test(test_disk_malformed),
        cmocka_unit_test(test_env_dir_too_long),
        cmocka_unit_test(test_second_process),
        cmocka_unit_test(test_concurrent_fill),
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_no_nvrtc),
        cmocka_unit_test(test_names_and_modules),
        cmocka_unit_test(test_disk_untrusted_dir),
        cmocka_unit_test(test_disk_untrusted_file),
        cmocka_unit_test(test_disk_foreign_owner),
        cmocka_unit_test(test_disk_created_mode),
        cmocka_unit_test(test_disk_reject_race),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_cache_info),
        cmocka_unit_test(test_cache_clear_disk),
        cmocka_unit_test(test_cache_clear_takes_the_lock),
        cmocka_unit_test(test_write_keeps_an_account),
        cmocka_unit_test(test_fork_while_lock_held),
        cmocka_unit_test(test_account_total_wraps),
        cmocka_unit_test(test_cache_info_creates_nothing),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_root);
    return rc;
}
