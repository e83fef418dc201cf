/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/,
 * committed; docs/testing.md): cache files made by the library's own writer
 * (compiles through the fake driver and the fake NVRTC), the option lists of
 * tests/test_jit_cpu.c, environment values, every settings struct as its
 * _default function fills it, share handles (genuine and forged) and the
 * communicator bootstrap's messages. Not a fuzz target: a plain program,
 * built with them.
 *
 * Usage: make_seeds CORPUS_DIR (with CUWEAVE_LIBCUDA and CUWEAVE_LIBNVRTC
 * naming the fakes, or the fakes next to this program).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuweave/cuweave.h"

static const char *g_out;

static void put(const char *target, const char *name, const void *a, size_t an, const void *b, size_t bn) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_out, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", g_out, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, an, f) != an || (bn && fwrite(b, 1, bn, f) != bn) || fclose(f) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
}

/* An option list as fuzz_options reads it: entries separated by NUL bytes. */
static void put_options(const char *name, const char *const *v, size_t n) {
    char buf[512];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + len, v[i], strlen(v[i]) + 1);
        len += strlen(v[i]) + 1;
    }
    put("fuzz_options", name, buf, len - 1, NULL, 0);
}

static void put_env(const char *name, unsigned which, const char *values, size_t n) {
    unsigned char head[2] = {(unsigned char)which, 0};
    put("fuzz_env", name, head, 2, values, n);
}

static void fake_next_to(const char *self, const char *var, const char *file) {
    if (getenv(var)) return;
    char buf[4096], path[4200];
    snprintf(buf, sizeof buf, "%s", self);
    snprintf(path, sizeof path, "%s/%s", dirname(buf), file);
    setenv(var, path, 1);
}

/* The .cwk file in dir (the only one). */
static void put_cache_file(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4096] = "";
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".cwk")) snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (d) closedir(d);
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    static unsigned char buf[65536];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    if (n < 80) {
        fprintf(stderr, "make_seeds: no cache file in %s\n", dir);
        exit(1);
    }
    unlink(path);
    char fname[64];
    const unsigned char whole = 0, payload = 1;
    snprintf(fname, sizeof fname, "%s-file", name);
    put("fuzz_cache_file", fname, &whole, 1, buf, n);
    snprintf(fname, sizeof fname, "%s-payload", name);
    put("fuzz_cache_file", fname, &payload, 1, buf + 80, n - 80);
}

/* fuzz_share_handle: a first byte choosing the handle (bits 0-2) and the
 * import (bit 3: as an event), then bytes XORed onto the handle at their
 * offsets (share_block.hpp's layout; the fake's IPC handle from byte 40):
 * the genuine handles, the wrong kinds, and the forgeries of
 * tests/test_share_cpu.c. */
static void put_share(const char *name, unsigned char base, const int *at, const unsigned char *x, int n) {
    unsigned char buf[1 + 128];
    memset(buf, 0, sizeof buf);
    buf[0] = base;
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        buf[1 + at[i]] = x[i];
        if ((size_t)(2 + at[i]) > len) len = (size_t)(2 + at[i]);
    }
    put("fuzz_share_handle", name, buf, len, NULL, 0);
}

static void put_share_seeds(void) {
    put_share("raw-zero", 0, NULL, NULL, 0);
    put_share("live-buffer", 1, NULL, NULL, 0);
    put_share("live-small-buffer", 2, NULL, NULL, 0);
    put_share("live-event", 3 | 8, NULL, NULL, 0);
    put_share("event-as-buffer", 3, NULL, NULL, 0);
    put_share("buffer-as-event", 1 | 8, NULL, NULL, 0);
    put_share("dead-exporter", 4, NULL, NULL, 0);
    const int pid_hi[] = {11}, size2[] = {33}, size_hi[] = {39}, fake_bytes[] = {56, 57}, nonce[] = {104};
    const unsigned char bit30[] = {0x40}, x30[] = {0x30}, x40_10[] = {0x40, 0x10}, x1[] = {1};
    put_share("regress-forged-dead-pid", 1, pid_hi, bit30, 1);      /* pid past pid_max: dead */
    put_share("regress-size-doubled", 1, size2, x30, 1);            /* 4096 -> 8192 */
    put_share("regress-size-huge", 1, size_hi, bit30, 1);           /* + 2^62 */
    put_share("regress-mapping-smaller", 1, fake_bytes, x40_10, 2); /* the fake maps 64 bytes */
    put_share("dead-other-nonce", 4, nonce, x1, 1);
}

/* The communicator bootstrap's messages (fuzz_comm_hello, fuzz_comm_id,
 * fuzz_comm_file), with the reproductions of issue 38 ("regress-"). */
static size_t comm_id_msg(char *buf, int world) {
    int n = sprintf(buf, "cuweave-comm-id 1\n%d\n", world);
    for (int i = 0; i < 128; i++) n += sprintf(buf + n, "%02x", (unsigned)(i * 37 + 11) & 255);
    buf[n++] = '\n';
    return (size_t)n;
}

static void put_comm_seeds(void) {
    static const struct {
        const char *name;
        unsigned char c, taken;
        const char *hello;
        size_t n; /* 0: strlen */
    } hellos[] = {
        {"rank1", 0, 0, "1 2\n", 0},
        {"rank2-token", 16 | 1, 0, "2 3 sesame\n", 0},
        {"wrong-token", 16, 0, "1 2 sesam\n", 0},
        {"token-to-none", 0, 0, "1 2 sesame\n", 0},
        {"world-disagrees", 0, 0, "1 3\n", 0},
        {"regress-rank-7-of-2", 0, 0, "7 2\n", 0},
        {"regress-impersonate-rank1", 0, 1, "1 2\n", 0},
        {"regress-long-number", 0, 0, "1 99999999999999999999999999\n", 0},
        {"regress-cut-short", 0, 0, "1 2", 0},
        {"made-hello", 32 | 2, 0, "\x05\x13\x00\x00", 4},
        {"made-hello-spoiled", 32 | 64 | 16, 0, "\x01\x11\x03 ", 4},
    };
    for (size_t i = 0; i < sizeof hellos / sizeof hellos[0]; i++) {
        unsigned char head[2] = {hellos[i].c, hellos[i].taken};
        put("fuzz_comm_hello", hellos[i].name, head, 2, hellos[i].hello,
            hellos[i].n ? hellos[i].n : strlen(hellos[i].hello));
    }
    char msg[400], digits[400];
    size_t n = comm_id_msg(msg, 2);
    size_t dn = (size_t)sprintf(digits, "cuweave-comm-id 1\n");
    memset(digits + dn, '9', 302);
    dn += 302;
    const char *refusal = "cuweave-refused world size 3, rank 0 has 2: the ranks disagree\n";
    const char *world_overflow = "cuweave-comm-id 1\n99999999999999999999\n";
    unsigned char m = 0;
    put("fuzz_comm_id", "id-message", &m, 1, msg, n);
    put("fuzz_comm_id", "regress-302-digits", &m, 1, digits, dn);
    put("fuzz_comm_id", "regress-world-overflow", &m, 1, world_overflow, strlen(world_overflow));
    put("fuzz_comm_id", "refusal", &m, 1, refusal, strlen(refusal));
    put("fuzz_comm_id", "http", &m, 1, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
    unsigned char made[131] = {1, 1, 0};
    for (int i = 0; i < 128; i++) made[3 + i] = (unsigned char)(i * 7);
    put("fuzz_comm_id", "made-replace", made, sizeof made, NULL, 0);
    made[0] = 2;
    made[1] = 200;
    put("fuzz_comm_id", "made-cut", made, sizeof made, NULL, 0);
    made[0] = 3 | 4;
    put("fuzz_comm_id", "made-append", made, sizeof made, "\n", 1);
    /* the file: world 2 ((2 - 1) << 3) and what sits at the path */
    unsigned char k = 8;
    put("fuzz_comm_file", "id-file", &k, 1, msg, n);
    put("fuzz_comm_file", "regress-302-digits", &k, 1, digits, dn);
    k = 8 | 3;
    put("fuzz_comm_file", "id-file-0644", &k, 1, msg, n);
    k = 8 | 1;
    put("fuzz_comm_file", "made-id", &k, 1, made + 2, 129);
    k = 8 | 4;
    put("fuzz_comm_file", "regress-fifo", &k, 1, NULL, 0);
    k = 8 | 5;
    put("fuzz_comm_file", "link", &k, 1, msg, n);
    k = 8 | 6;
    put("fuzz_comm_file", "directory", &k, 1, NULL, 0);
    k = 8 | 7;
    put("fuzz_comm_file", "missing", &k, 1, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    g_out = argv[1];
    mkdir(g_out, 0755);
    fake_next_to(argv[0], "CUWEAVE_LIBCUDA", "libfakecuda.so");
    fake_next_to(argv[0], "CUWEAVE_LIBNVRTC", "libfakenvrtc.so");
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    cw_context *ctx = NULL;
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        fprintf(stderr, "make_seeds: %s\n", cw_last_error()->message);
        return 1;
    }

    /* cache files: a cubin, PTX with a name, a cubin with two names and a header */
    char dir[] = "/tmp/cuweave-seeds-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    cw_jit_cache_settings cs;
    cw_jit_cache_settings_default(&cs);
    cs.dir = dir;
    cs.memory = 0;
    if (cw_jit_cache_configure(&cs) != CW_SUCCESS) return 1;
    const char *exprs[] = {"scale<float>", "scale<int>"};
    const char *opts[] = {"-std=c++17", "-DN=4"};
    cw_header hdr = {"n.h", "#define M 2\n"};
    for (int k = 0; k < 3; k++) {
        cw_program_settings ps;
        cw_program_settings_default(&ps);
        ps.output_ptx = k == 1;
        ps.arch = k == 1 ? 80 : 0;
        ps.name_expressions = exprs;
        ps.n_name_expressions = (size_t)k;
        ps.options = k == 2 ? opts : NULL;
        ps.n_options = k == 2 ? 2 : 0;
        ps.headers = k == 2 ? &hdr : NULL;
        ps.n_headers = k == 2 ? 1 : 0;
        cw_program *p = NULL;
        if (cw_program_compile(&p, ctx, "template <class T> __global__ void scale(T *x) {}\n", &ps) != CW_SUCCESS) {
            fprintf(stderr, "make_seeds: %s\n", cw_last_error()->message);
            return 1;
        }
        cw_program_destroy(&p);
        put_cache_file(dir, k == 0 ? "cubin" : k == 1 ? "ptx-name" : "cubin-names-header");
    }
    rmdir(dir);

    /* option lists (tests/test_jit_cpu.c) */
    const char *o1[] = {"-DX=1", "-std=c++17", "-lineinfo", "-DY"};
    const char *o2[] = {"--generate-line-info", "--std", "c++17", "-DY", "--define-macro=X=1"};
    const char *o3[] = {" -DX=1 ", "--std=c++17", "-lineinfo", "-lineinfo", "-D", "Y"};
    const char *o4[] = {"-UX", "-DX=1", "-I/usr/include", "-include", "a.h", "-arch=sm_80"};
    const char *o5[] = {"--time=/tmp/t.csv", "-pch", "c++17", "-maxrregcount", "32", "-use_fast_math", "-G"};
    put_options("defines-std-lineinfo", o1, 4);
    put_options("long-forms-separate-values", o2, 5);
    put_options("spaces-repeats", o3, 6);
    put_options("macros-paths-arch", o4, 6);
    put_options("refused-and-values", o5, 7);

    /* environment values (bits: CUWEAVE_CACHE_DIR, XDG_CACHE_HOME, HOME, CUWEAVE_SERIALIZE) */
    put_env("cache-dir", 1, "/tmp/cw-cache", 13);
    put_env("cache-dir-off", 1, "off", 3);
    put_env("xdg-home", 6, "/home/u/.cache\0/home/u", 23);
    put_env("home-serialize", 12, "/home/u\0" "1", 9);

    /* every settings struct as its _default function fills it (the kind byte
     * of fuzz_settings first; selectors of pointer fields 0) */
    unsigned char z[4] = {0};
    cw_stream_settings s0;
    cw_stream_settings_default(&s0);
    cw_stream_pool_settings s1;
    cw_stream_pool_settings_default(&s1);
    cw_resident_settings s2;
    cw_resident_settings_default(&s2);
    cw_program_settings s4;
    cw_program_settings_default(&s4);
    s4.name = NULL;
    cw_jit_cache_settings s5;
    cw_jit_cache_settings_default(&s5);
    cw_cond_settings s6;
    cw_cond_settings_default(&s6);
    cw_operator_settings s7;
    cw_operator_settings_default(&s7);
    cw_pipeline_settings s8;
    cw_pipeline_settings_default(&s8);
    cw_port_settings s9;
    cw_port_settings_default(&s9);
    const struct {
        const char *name;
        unsigned char kind;
        const void *s;
        size_t n;
    } st[] = {
        {"stream", 0, &s0, sizeof s0},         {"pool", 1, &s1, sizeof s1},
        {"resident-create", 2, &s2, sizeof s2}, {"resident-configure", 3, &s2, sizeof s2},
        {"program", 4, &s4, sizeof s4},         {"jit-cache", 5, &s5, sizeof s5},
        {"cond", 6, &s6, sizeof s6},           {"operator", 7, &s7, sizeof s7},
        {"pipeline", 8, &s8, sizeof s8},       {"port-input", 9, &s9, sizeof s9},
        {"port-output", 10, &s9, sizeof s9},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        unsigned char buf[512];
        buf[0] = st[i].kind;
        memcpy(buf + 1, st[i].s, st[i].n);
        memcpy(buf + 1 + st[i].n, z, sizeof z);
        put("fuzz_settings", st[i].name, buf, 1 + st[i].n + sizeof z, NULL, 0);
    }
    put_share_seeds();
    put_comm_seeds();
    cw_context_destroy(&ctx);
    printf("make_seeds: corpora written under %s\n", g_out);
    return 0;
}
