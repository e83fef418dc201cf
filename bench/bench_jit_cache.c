/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_jit_cache: what a write into the kernel cache's directory costs when
 * the directory is full of entries (CPU only: the fake driver and the fake
 * NVRTC of tests/, whose compile takes microseconds, so a compile's time is
 * the cache's).
 *
 * A scratch directory gets N planted entries (<64 hex>.cwk files of 1 KiB,
 * default N = 40,000, BENCH_CACHE_ENTRIES), then each of R compiles
 * (default 200, BENCH_CACHE_WRITES) of a source not compiled before writes
 * one entry; the same with an empty directory is the reference. Printed: the
 * median and the worst write with N entries and with none, and their
 * difference; then with the bound set just below what the directory holds,
 * the write that passes it (it reads the directory once and evicts down to
 * 7/8 of the bound) and the mean over the writes after it. Issue 40's
 * target: a write with 40,000 entries at most 1 ms above an empty
 * directory's (the old cache read and insertion-sorted the whole directory
 * on every write: about 65 ms a compile at 40,000 entries).
 *
 * Usage: bench_jit_cache PATH/libfakecuda.so   (libfakenvrtc.so beside it;
 * without it, or with a driver that does not load: exit 77)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuweave/cuweave.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long env_long(const char *name, long def) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : def;
}

static int plant(const char *dir, long n) {
    static char junk[1024];
    memset(junk, 'j', sizeof junk);
    const time_t old = time(NULL) - 3600;
    for (long i = 0; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%064lx.cwk", dir, (unsigned long)i + 1);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, junk, sizeof junk) != (ssize_t)sizeof junk) return -1;
        struct timespec t[2] = {{old, 0}, {old, 0}};
        futimens(fd, t);
        close(fd);
    }
    return 0;
}

static void use_dir(const char *dir, uint64_t max_bytes) {
    cw_jit_cache_settings s;
    cw_jit_cache_settings_default(&s);
    s.dir = dir;
    s.max_bytes = max_bytes;
    s.memory = 0;
    cw_jit_cache_configure(&s);
}

static unsigned g_serial;

/* R compiles of new sources: each time in ms into t[]. */
static int writes(cw_context *ctx, double *t, long r) {
    for (long i = 0; i < r; i++) {
        char src[160];
        snprintf(src, sizeof src, "extern \"C\" __global__ void bench_cache_%u(int *p) { *p = %u; }\n", g_serial,
                 g_serial);
        g_serial++;
        const double t0 = now_ms();
        cw_program *p = NULL;
        if (cw_program_compile(&p, ctx, src, NULL) != CW_SUCCESS) {
            printf("FAIL: compile: %s\n", cw_last_error()->message);
            return -1;
        }
        t[i] = now_ms() - t0;
        cw_program_destroy(&p);
    }
    return 0;
}

static double median(double *t, long n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("skipped: usage: %s PATH/libfakecuda.so (libfakenvrtc.so beside it)\n", argv[0]);
        return 77;
    }
    char nvrtc[4096], tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(nvrtc, sizeof nvrtc, "%s/libfakenvrtc.so", dirname(tmp));
    if (access(argv[1], R_OK) != 0 || access(nvrtc, R_OK) != 0) {
        printf("skipped: %s or %s is missing\n", argv[1], nvrtc);
        return 77;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("CUWEAVE_LIBNVRTC", nvrtc, 1);
    const long n = env_long("BENCH_CACHE_ENTRIES", 40000), r = env_long("BENCH_CACHE_WRITES", 200);
    if (n < 0 || r < 2) return 2;
    cw_context *ctx = NULL;
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("skipped: the fake driver did not load: %s\n", cw_last_error()->message);
        return 77;
    }
    char root[] = "/tmp/cuweave-bench-cache-XXXXXX", full[1100], empty[1100];
    if (!mkdtemp(root)) return 1;
    snprintf(full, sizeof full, "%s/full", root);
    snprintf(empty, sizeof empty, "%s/empty", root);
    mkdir(full, 0700);
    mkdir(empty, 0700);
    const double p0 = now_ms();
    if (plant(full, n) != 0) {
        printf("FAIL: planting %ld entries in %s\n", n, full);
        return 1;
    }
    printf("bench_jit_cache: %ld entries of 1 KiB planted in %.0f ms; %ld writes each\n", n, now_ms() - p0, r);
    double *t = calloc((size_t)r, sizeof *t);
    if (!t) return 1;
    int rc = 0;
    use_dir(empty, 0);
    if (writes(ctx, t, r) != 0) rc = 1;
    const double ref = median(t, r), ref_max = t[r - 1];
    use_dir(full, 0);
    /* the first write of a process with no account reads the directory once */
    double first = 0;
    if (writes(ctx, &first, 1) != 0) rc = 1;
    if (writes(ctx, t, r) != 0) rc = 1;
    const double med = median(t, r), worst = t[r - 1];
    printf("write, empty directory:        median %.3f ms, worst %.3f ms\n", ref, ref_max);
    printf("write, %ld entries:          median %.3f ms, worst %.3f ms (the first: %.1f ms, it reads the "
           "directory once)\n", n, med, worst, first);
    printf("a write's cost of the %ld entries: %.3f ms (median; target: at most 1 ms)\n", n, med - ref);
    /* past the bound: the write that passes it reads and evicts; the next ones do not */
#ifndef BENCH_BEFORE_0_3 /* built against the library before cw_jit_cache_get_info: only the above */
    cw_jit_cache_info ci;
    if (cw_jit_cache_get_info(&ci) == CW_SUCCESS && ci.bytes > 4096) {
        use_dir(full, ci.bytes - 2048);
        double over = 0;
        if (writes(ctx, &over, 1) != 0) rc = 1;
        if (writes(ctx, t, r) != 0) rc = 1;
        double sum = 0;
        for (long i = 0; i < r; i++) sum += t[i];
        cw_jit_cache_get_info(&ci);
        printf("bound just below the directory: the write that passes it %.1f ms (one read, eviction to 7/8); "
               "the %ld after it: mean %.3f ms; %llu entries left\n",
               over, r, sum / (double)r, (unsigned long long)ci.entries);
    }
#endif
    cw_jit_stats js;
    cw_jit_get_stats(&js);
    printf("compiles %llu, disk writes %llu, evictions %llu\n", (unsigned long long)js.compiles,
           (unsigned long long)js.disk_writes, (unsigned long long)js.evictions);
    free(t);
    cw_context_destroy(&ctx);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("# could not remove %s\n", root);
    return rc;
}
