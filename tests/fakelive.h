/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Leak checks against the fake CUDA driver (tests/fake_cuda.c): the live
 * counts of its objects, snapshotted before a scenario and compared after.
 * The test sets fake_live (dlsym of fake_cuda_live) and, when work must have
 * completed before counting, live_drain (fake_cuda_drain).
 */
#ifndef CUWEAVE_TESTS_FAKELIVE_H
#define CUWEAVE_TESTS_FAKELIVE_H

#include <stdio.h>

static long (*fake_live)(const char *kind);
static int (*live_drain)(int timeout_ms);
/* "hazards": accesses to device memory by work on a stream not ordered after
 * another stream's unfinished work on it (fake_cuda.c: none may appear). */
static const char *const k_kinds[] = {"stream", "event", "hostmem", "devmem", "graph", "body", "exec", "pending",
                                      "hazards"};
#define NKINDS (sizeof k_kinds / sizeof k_kinds[0])

static void snapshot(long *v) {
    if (live_drain) live_drain(2000);
    for (size_t i = 0; i < NKINDS; i++) v[i] = fake_live(k_kinds[i]);
}

/* 1 (and each difference printed) when a count moved since `before`. */
static int leaks(const long *before, const char *what) {
    long now[NKINDS];
    snapshot(now);
    int bad = 0;
    for (size_t i = 0; i < NKINDS; i++)
        if (now[i] != before[i]) {
            printf("# leak after %s: %s %ld -> %ld\n", what, k_kinds[i], before[i], now[i]);
            bad = 1;
        }
    return bad;
}

#endif /* CUWEAVE_TESTS_FAKELIVE_H */
