/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Helpers shared by the benchmarks: a monotonic clock, checks that exit with
 * the failing call named, nearest-rank percentiles, the commit label and the
 * common start. Include tests/rawcuda.h and define BENCH_NAME (a string)
 * before including.
 */
#ifndef CUWEAVE_BENCH_COMMON_H
#define CUWEAVE_BENCH_COMMON_H

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuweave/cuweave.h"

/* The watchdog: a bench that makes no progress for `seconds` (a hang) ends
 * with a message on SIGALRM. bench_watchdog installs it and arms it; alarm()
 * re-arms it (alarm(0) disarms). */
static inline void bench_on_alarm(int sig) {
    (void)sig;
    static const char msg[] = BENCH_NAME ": no progress within the time limit (a hang?): giving up\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

static inline void bench_watchdog(unsigned seconds) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bench_on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

static inline unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

#define CW_CHECK(expr)                                                                             \
    do {                                                                                           \
        cw_status st_ = (expr);                                                                    \
        if (st_ != CW_SUCCESS) {                                                                   \
            fprintf(stderr, "%s: %s failed: %s (%s)\n", BENCH_NAME, #expr, cw_status_name(st_),     \
                    cw_last_error()->message);                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CU_CHECK(expr)                                                                             \
    do {                                                                                           \
        rc_result r_ = (expr);                                                                     \
        if (r_ != 0) {                                                                             \
            fprintf(stderr, "%s: %s failed with CUresult %d\n", BENCH_NAME, #expr, r_);             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The driver context of a cw_context (its info's handle); exits on failure. */
static inline CUcontext bench_cu_context(const cw_context *ctx) {
    cw_context_info info;
    CW_CHECK(cw_context_get_info(ctx, &info));
    return info.handle;
}

/* The driver stream of a cw_stream (its info's handle); exits on failure. */
static inline CUstream bench_cu_stream(const cw_stream *s) {
    cw_stream_info info;
    CW_CHECK(cw_stream_get_info(s, &info));
    return info.handle;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double p10, p50, p90, p99, p999, max; /* p999: the 99.9th percentile */
} stats;

/* Nearest-rank percentiles; sorts v in place. */
static stats stats_of(double *v, size_t n) {
    stats s;
    qsort(v, n, sizeof *v, cmp_double);
#define PCT_(p) v[(size_t)ceil((p) / 100.0 * (double)n) - 1]
    s.p10 = PCT_(10.0);
    s.p50 = PCT_(50.0);
    s.p90 = PCT_(90.0);
    s.p99 = PCT_(99.0);
    s.p999 = PCT_(99.9);
#undef PCT_
    s.max = v[n - 1];
    return s;
}

__attribute__((unused)) static const char *pass(int ok) { return ok ? "PASS" : "MISS"; }

/*
 * The slowest 1% of samples against the typical ones. parts[k][i] is part k
 * of sample i (k < nparts); parts[total] holds each sample's total. For each
 * part: each[k], its percentiles over all samples; slow[k], its mean over
 * the slow samples (total at least the total's p99, *cut); grew[k], how many
 * slow samples had their largest excess over the part's median in part k
 * (only parts with may_grow[k] set compete). Returns the number of slow
 * samples. The parts are left as they were.
 */
__attribute__((unused)) static long bench_slowest(double *const *parts, int nparts, int total, long count,
                                                  const int *may_grow, stats *each, double *slow, int *grew,
                                                  double *cut) {
    double *tmp = malloc(sizeof(double) * (size_t)count);
    if (!tmp) {
        fprintf(stderr, "%s: out of host memory\n", BENCH_NAME);
        exit(1);
    }
    for (int k = 0; k < nparts; k++) {
        memcpy(tmp, parts[k], sizeof(double) * (size_t)count);
        each[k] = stats_of(tmp, (size_t)count);
        slow[k] = 0.0;
        grew[k] = 0;
    }
    free(tmp);
    *cut = each[total].p99;
    long nslow = 0;
    for (long i = 0; i < count; i++) {
        if (parts[total][i] < *cut) continue;
        nslow++;
        int worst = -1;
        double excess = 0.0;
        for (int k = 0; k < nparts; k++) {
            slow[k] += parts[k][i];
            const double e = parts[k][i] - each[k].p50;
            if (may_grow[k] && (worst < 0 || e > excess)) {
                excess = e;
                worst = k;
            }
        }
        if (worst >= 0) grew[worst]++;
    }
    for (int k = 0; k < nparts; k++) slow[k] /= (double)(nslow ? nslow : 1);
    return nslow;
}

/*
 * BENCH_CSV=dir: a benchmark writes each set of samples it measures to
 * dir/<BENCH_NAME>-<nn>-<label>.csv (nn counts the files this process
 * wrote, the label's characters other than letters and digits become '_'):
 * a header "sample,ns", then one line per sample, in the order measured.
 * tools/trace_plot.py latency draws them (docs/tracing.md). v holds
 * microseconds (as the benchmarks' samples do). Call before stats_of, which
 * sorts v. Without BENCH_CSV nothing happens; a file that cannot be written
 * is said on stderr, and the benchmark goes on.
 */
__attribute__((unused)) static void bench_csv_us(const char *label, const double *v, size_t n) {
    static int files = 0;
    const char *dir = getenv("BENCH_CSV");
    if (!dir || !*dir) return;
    char name[160];
    size_t k = 0;
    for (const char *c = label; *c && k + 1 < sizeof name; c++) {
        const int alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        if (alnum)
            name[k++] = *c;
        else if (k > 0 && name[k - 1] != '_')
            name[k++] = '_';
    }
    while (k > 0 && name[k - 1] == '_') k--;
    name[k] = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%02d-%s.csv", dir, BENCH_NAME, files++, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: BENCH_CSV: cannot write %s\n", BENCH_NAME, path);
        return;
    }
    fputs("sample,ns\n", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%zu,%.0f\n", i, v[i] * 1e3);
    if (fclose(f) != 0) fprintf(stderr, "%s: BENCH_CSV: cannot write %s\n", BENCH_NAME, path);
}

/* Fisher-Yates with xorshift64: a fixed-seed shuffle, for running methods in
 * a fresh random order each round. */
/* Splits device 0 into a green partition of about `want` SMs (raised to
 * what the device allows) and the leftover (bench_resident's and
 * bench_resident_fused's loaded partitions). 1: *set made; 0: the device
 * cannot (no green contexts, too few SMs), why in skip. Exits on any other
 * error. */
static inline int bench_partition_split(const cw_device_info *info, unsigned want, cw_partition_group **set, char *skip,
                                        size_t skip_size) {
    cw_partition_caps caps;
    cw_status st = cw_partition_get_caps(0, &caps);
    if (st == CW_SUCCESS && !caps.supported) {
        snprintf(skip, skip_size, "device 0 (%s) or its driver has no green contexts", info->name);
        return 0;
    }
    unsigned small = want;
    if (st == CW_SUCCESS) {
        if (small < caps.min_partition) small = caps.min_partition;
        if (caps.granularity > 0 && small % caps.granularity) small += caps.granularity - small % caps.granularity;
        if (small + caps.min_partition > caps.sm_count) {
            snprintf(skip, skip_size, "%u SMs cannot be split into a %u-SM partition and a leftover", caps.sm_count,
                     small);
            return 0;
        }
        st = cw_partition_group_create(set, 0, &small, 1, -1);
        if (st == CW_ERROR_NOT_SUPPORTED) {
            snprintf(skip, skip_size, "cw_partition_group_create: %s", cw_last_error()->message);
            return 0;
        }
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "bench: splitting device 0: %s (%s)\n", cw_status_string(st), cw_last_error()->message);
        exit(1);
    }
    return 1;
}

static uint64_t bench_rng_state = 0x9e3779b97f4a7c15ull;
__attribute__((unused)) static void shuffle(int *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        bench_rng_state ^= bench_rng_state << 13;
        bench_rng_state ^= bench_rng_state >> 7;
        bench_rng_state ^= bench_rng_state << 17;
        int j = (int)(bench_rng_state % (uint64_t)(i + 1));
        int x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* The commit: $CW_COMMIT, else `git rev-parse --short HEAD`, else "unknown". */
static void commit_name(char *buf, size_t size) {
    const char *env = getenv("CW_COMMIT");
    snprintf(buf, size, "unknown");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return;
    }
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    char line[64];
    if (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = 0;
        if (*line) snprintf(buf, size, "%s", line);
    }
    pclose(p);
}

/*
 * Common start of a benchmark: the driver through cuweave and through the
 * raw loader, device 0's facts, the driver version, the commit and the UTC
 * date. Returns 0 to go on, 77 (skip) without a GPU, 1 on failure.
 */
__attribute__((unused)) static int bench_setup(rawcuda *raw, cw_device_info *info, int *drv, char *commit, size_t commit_size,
                       char *date, size_t date_size) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("SKIP: no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    CW_CHECK(st);
    int ndev = 0;
    CW_CHECK(cw_device_count(&ndev));
    if (ndev < 1) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    if (!rawcuda_open(raw)) {
        fprintf(stderr, "%s: cuweave loaded the driver but the raw loader (tests/rawcuda.h) failed\n", BENCH_NAME);
        return 1;
    }
    CW_CHECK(cw_device_get_info(0, info));
    cw_versions versions;
    CW_CHECK(cw_get_versions(&versions));
    *drv = versions.driver;
    commit_name(commit, commit_size);
    time_t tnow = time(NULL);
    strftime(date, date_size, "%Y-%m-%d", gmtime(&tnow));
    return 0;
}

/*
 * The hog: a host thread keeping a context full (bench_resident h) and i),
 * bench_resident_fused's loaded partition). It launches fn(sink, ns) (a
 * kernel of `threads`-thread blocks that each wait ns nanoseconds; block 0
 * adds 1 to *sink, e.g. cw_hog of the test kernels) as `blocks` blocks on
 * stream h of context cu, at most `depth` (up to 8) launches in flight,
 * until bench_hog_stop. bench_hog_start returns once the first wave runs and
 * a second is queued behind it; a launch that fails is reported by
 * bench_hog_stop (which exits).
 */
#define BENCH_HOG_MAX_DEPTH 8
typedef struct bench_hog {
    rawcuda *rc;
    CUcontext cu;
    void *fn;
    unsigned long long sink;
    long long ns;
    CUstream h;
    unsigned blocks, threads, depth;
    pthread_t thread;
    atomic_int stop;
    atomic_ullong launched;
    int err;
    const char *err_call;
} bench_hog;

#define BENCH_HOG_CU_(call)                                                                           \
    do {                                                                                              \
        rc_result r_ = (call);                                                                        \
        if (r_ != 0 && !g->err) {                                                                     \
            g->err = r_;                                                                              \
            g->err_call = #call;                                                                      \
        }                                                                                             \
    } while (0)

__attribute__((unused)) static void *bench_hog_main(void *arg) {
    bench_hog *g = (bench_hog *)arg;
    rawcuda *rc = g->rc;
    long long ns = g->ns;
    void *args[] = {&g->sink, &ns};
    CUevent ev[BENCH_HOG_MAX_DEPTH] = {0};
    BENCH_HOG_CU_(rc->cuCtxSetCurrent(g->cu));
    for (unsigned i = 0; i < g->depth && !g->err; i++)
        BENCH_HOG_CU_(rc->cuEventCreate(&ev[i], 0x1 | 0x2 /* CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING */));
    for (unsigned long long i = 0; !g->err && !atomic_load_explicit(&g->stop, memory_order_acquire); i++) {
        if (i >= g->depth) BENCH_HOG_CU_(rc->cuEventSynchronize(ev[i % g->depth]));
        BENCH_HOG_CU_(rc->cuLaunchKernel(g->fn, g->blocks, 1, 1, g->threads, 1, 1, 0, g->h, args, NULL));
        BENCH_HOG_CU_(rc->cuEventRecord(ev[i % g->depth], g->h));
        if (!g->err) atomic_fetch_add_explicit(&g->launched, 1, memory_order_release);
    }
    BENCH_HOG_CU_(rc->cuStreamSynchronize(g->h));
    for (unsigned i = 0; i < g->depth; i++)
        if (ev[i]) BENCH_HOG_CU_(rc->cuEventDestroy(ev[i]));
    BENCH_HOG_CU_(rc->cuCtxSetCurrent(NULL));
    return NULL;
}

__attribute__((unused)) static void bench_hog_start(bench_hog *g, rawcuda *rc, CUcontext cu, void *fn,
                                                    unsigned long long sink, CUstream h, unsigned blocks,
                                                    unsigned threads, long long ns, unsigned depth) {
    memset(g, 0, sizeof *g);
    g->rc = rc;
    g->cu = cu;
    g->fn = fn;
    g->sink = sink;
    g->h = h;
    g->blocks = blocks;
    g->threads = threads;
    g->ns = ns;
    g->depth = depth < 1 ? 1 : depth > BENCH_HOG_MAX_DEPTH ? BENCH_HOG_MAX_DEPTH : depth;
    atomic_init(&g->stop, 0);
    atomic_init(&g->launched, 0);
    if (pthread_create(&g->thread, NULL, bench_hog_main, g) != 0) {
        fprintf(stderr, "%s: pthread_create failed\n", BENCH_NAME);
        exit(1);
    }
    /* full once the first wave runs and a second is queued behind it */
    const unsigned long long t = now_ns();
    while (atomic_load_explicit(&g->launched, memory_order_acquire) < 2 && !g->err) {
        if (now_ns() - t > 5000000000ull) {
            fprintf(stderr, "%s: the hog thread did not launch within 5 s\n", BENCH_NAME);
            exit(1);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    /* let the first wave start */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

/* Stops and joins the hog thread (its stream drained); returns its launches. */
__attribute__((unused)) static unsigned long long bench_hog_stop(bench_hog *g) {
    atomic_store_explicit(&g->stop, 1, memory_order_release);
    pthread_join(g->thread, NULL);
    if (g->err) {
        fprintf(stderr, "%s: hog thread: %s failed with CUresult %d\n", BENCH_NAME, g->err_call, g->err);
        exit(1);
    }
    return atomic_load(&g->launched);
}

/* Blocks of fn that fit on one SM at `threads` threads (fn's context
 * current on this thread; 2048 / threads without the occupancy call). */
__attribute__((unused)) static int bench_hog_blocks_per_sm(rawcuda *rc, void *fn, int threads) {
    rc_result (*occ)(int *, void *, int, size_t) = NULL;
    *(void **)&occ = dlsym(rc->lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    int n = 0;
    if (occ && occ(&n, fn, threads, 0) == 0 && n > 0) return n;
    return 2048 / threads;
}

#endif /* CUWEAVE_BENCH_COMMON_H */
