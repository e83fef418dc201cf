/*
 * Helpers shared by the benchmarks: a monotonic clock, checks that exit with
 * the failing call named, nearest-rank percentiles, and the commit label.
 * Define BENCH_NAME (a string) before including.
 */
#ifndef CUWEAVE_BENCH_COMMON_H
#define CUWEAVE_BENCH_COMMON_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuweave/cuweave.h"

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
                    cw_last_error_message());                                                      \
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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double p10, p50, p90, p99, max;
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
#undef PCT_
    s.max = v[n - 1];
    return s;
}

static const char *pass(int ok) { return ok ? "PASS" : "MISS"; }

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

#endif /* CUWEAVE_BENCH_COMMON_H */
