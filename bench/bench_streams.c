/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_streams: the host cost of cuweave's stream-pool and ordering calls,
 * against the raw driver calls they stand for, measured in one run on
 * device 0.
 *
 *   pool pair    cw_stream_pool_acquire + cw_stream_pool_release on a lease
 *                pool with 8 reserved streams (no raw counterpart: a raw
 *                program would keep its own array of streams)
 *   pool acquire 8 acquires in a row on the same pool, then the 8 releases,
 *                each run of 8 timed on its own (clock overhead subtracted)
 *   pool next    cw_stream_pool_get_next on a round-robin pool of 4 streams
 *   wait         cw_stream_wait(dst, src) vs cuEventRecord(ev, src) +
 *                cuStreamWaitEvent(dst, ev, 0) on a pre-created
 *                timing-disabled event
 *
 * Method: warm-up batches first; then many samples, each one a batch of K
 * operations timed with clock_gettime(CLOCK_MONOTONIC) and divided by K
 * (K = 1000 for the CPU-only pool calls, K = 100 for wait). Both streams are
 * synchronised between wait batches, outside the timed region, so the
 * queues do not grow. cuweave and raw batches alternate (AB BA AB ...) to
 * cancel drift and order effects. The cw_context's CUcontext is current on
 * the thread for the whole run, so neither side pays a context switch; both
 * sides use the same two streams made by cw_stream_create.
 *
 * Percentiles are over per-batch means (one value per batch of K), so they
 * show the spread between batches, not single-call outliers.
 *
 * Prints what it measures first and a Markdown block for docs/benchmarks.md
 * last. Exits 77 without a GPU, 1 when a call fails, 0 otherwise (a MISS is
 * a result, not a failure). Set CW_COMMIT to name the commit in the output.
 *
 * Build (after `make -j2 O=build/make lib`):
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude -Isrc -Itests bench/bench_streams.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o bench_streams
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuweave/cuweave.h>

#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_streams"
#include "bench_common.h"

#define CPU_K 1000     /* operations per batch, CPU-only pool calls */
#define WAIT_K 100     /* operations per batch, wait */
#define SAMPLES 5000   /* measured batches per operation (and side) */
#define WARMUP 300     /* warm-up batches per operation (and side) */
#define LEASE_RESERVED 8
#define RR_STREAMS 4

#define TARGET_POOL_NS 50.0   /* acquire, next: at most this per call */
#define TARGET_WAIT_RATIO 1.05 /* cw_stream_wait: at most 5% over raw (medians) */

/* ---- small helpers ------------------------------------------------------ */

static rawcuda rc;


/* A batch saw a failing call: report the thread's last error detail (successful
 * calls leave it alone, so it is the failure's). */
static void batch_failed(const char *what) {
    const cw_error_info *e = cw_last_error();
    fprintf(stderr, "bench_streams: %s failed: %s (%s)\n", what, cw_status_name(e->status), e->message);
    exit(1);
}


/* ---- the measured batches ----------------------------------------------- */

static cw_stream_pool *lease_pool, *rr_pool;
static cw_stream *dst, *src;
static CUstream hdst, hsrc;
static CUevent raw_ev;
static double clock_ovh_ns; /* median cost of an empty clock_gettime pair */

/* K acquire + release pairs; ns per pair. */
static double batch_pool_pair(void) {
    int bad = 0;
    cw_stream *s = NULL;
    unsigned long long t0 = now_ns();
    for (int k = 0; k < CPU_K; k++) {
        bad |= cw_stream_pool_acquire(&s, lease_pool, 0);
        bad |= cw_stream_pool_release(lease_pool, &s);
    }
    unsigned long long t1 = now_ns();
    if (bad) batch_failed("cw_stream_pool_acquire/release");
    return (double)(t1 - t0) / CPU_K;
}

/* K acquires and K releases, in runs of LEASE_RESERVED: take every reserved
 * stream, give them all back. Each run is timed on its own and the clock
 * overhead is subtracted. Writes ns per acquire and per release. */
static void batch_pool_split(double *acq_ns, double *rel_ns) {
    int bad = 0;
    cw_stream *s[LEASE_RESERVED];
    unsigned long long acq = 0, rel = 0;
    const int runs = CPU_K / LEASE_RESERVED;
    for (int r = 0; r < runs; r++) {
        unsigned long long t0 = now_ns();
        for (int i = 0; i < LEASE_RESERVED; i++) bad |= cw_stream_pool_acquire(&s[i], lease_pool, 0);
        unsigned long long t1 = now_ns();
        for (int i = 0; i < LEASE_RESERVED; i++) bad |= cw_stream_pool_release(lease_pool, &s[i]);
        unsigned long long t2 = now_ns();
        acq += t1 - t0;
        rel += t2 - t1;
    }
    if (bad) batch_failed("cw_stream_pool_acquire/release (runs)");
    const double n = (double)runs * LEASE_RESERVED;
    *acq_ns = ((double)acq - runs * clock_ovh_ns) / n;
    *rel_ns = ((double)rel - runs * clock_ovh_ns) / n;
}

/* K round-robin nexts; ns per call. */
static double batch_pool_next(void) {
    int bad = 0;
    cw_stream *s = NULL;
    unsigned long long t0 = now_ns();
    for (int k = 0; k < CPU_K; k++) bad |= cw_stream_pool_get_next(rr_pool, &s);
    unsigned long long t1 = now_ns();
    if (bad) batch_failed("cw_stream_pool_get_next");
    return (double)(t1 - t0) / CPU_K;
}

static void sync_both(void) {
    CU_CHECK(rc.cuStreamSynchronize(hdst));
    CU_CHECK(rc.cuStreamSynchronize(hsrc));
}

/* K cw_stream_wait(dst, src); ns per call. */
static double batch_wait_cw(void) {
    int bad = 0;
    sync_both();
    unsigned long long t0 = now_ns();
    for (int k = 0; k < WAIT_K; k++) bad |= cw_stream_wait(dst, src);
    unsigned long long t1 = now_ns();
    if (bad) batch_failed("cw_stream_wait");
    return (double)(t1 - t0) / WAIT_K;
}

/* K (cuEventRecord + cuStreamWaitEvent); ns per pair. */
static double batch_wait_raw(void) {
    int bad = 0;
    sync_both();
    unsigned long long t0 = now_ns();
    for (int k = 0; k < WAIT_K; k++) {
        bad |= rc.cuEventRecord(raw_ev, hsrc);
        bad |= rc.cuStreamWaitEvent(hdst, raw_ev, 0);
    }
    unsigned long long t1 = now_ns();
    if (bad) {
        CU_CHECK(rc.cuEventRecord(raw_ev, hsrc));
        CU_CHECK(rc.cuStreamWaitEvent(hdst, raw_ev, 0));
    }
    return (double)(t1 - t0) / WAIT_K;
}

static void print_line(const char *name, const stats *s) {
    printf("  %-34s p50 %8.1f  p90 %8.1f  p99 %8.1f  max %9.1f ns\n", name, s->p50, s->p90, s->p99,
           s->max);
}

int main(void) {
    printf("bench_streams: host cost per call of cuweave stream pools and ordering vs the raw driver\n"
           "  pool pair    : cw_stream_pool_acquire + cw_stream_pool_release, lease pool, %d reserved (no raw)\n"
           "  pool acquire : %d acquires in a row, then the %d releases, each run timed alone\n"
           "  pool next    : cw_stream_pool_get_next, round-robin pool of %d streams (no raw)\n"
           "  wait         : cw_stream_wait(dst, src) vs cuEventRecord(ev, src) + cuStreamWaitEvent(dst, ev, 0)\n"
           "  method       : batches of K calls timed with CLOCK_MONOTONIC / K (K=%d pool, K=%d wait),\n"
           "                 %d warm-up + %d measured batches each, cuweave and raw batches alternated,\n"
           "                 streams synchronised between wait batches outside the timed region\n",
           LEASE_RESERVED, LEASE_RESERVED, LEASE_RESERVED, RR_STREAMS, CPU_K, WAIT_K, WARMUP, SAMPLES);
    fflush(stdout);

    cw_device_info info;
    int drv = 0;
    char commit[64], date[32];
    int setup = bench_setup(&rc, &info, &drv, commit, sizeof commit, date, sizeof date);
    if (setup != 0) return setup;
    unsigned v = cw_version();
    printf("device 0: %s, driver %d.%d, cuweave %u.%u.%u, commit %s, %s\n", info.name, drv / 1000,
           drv % 1000 / 10, CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v), CW_VERSION_PACK_PATCH(v),
           commit, date);

    /* context, made current for the whole run */
    cw_context *ctx = NULL;
    CUcontext cuctx = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    cuctx = bench_cu_context(ctx);
    CU_CHECK(rc.cuCtxSetCurrent(cuctx));

    /* streams and pools */
    CW_CHECK(cw_stream_create(&dst, ctx, NULL));
    CW_CHECK(cw_stream_create(&src, ctx, NULL));
    hdst = bench_cu_stream(dst);
    hsrc = bench_cu_stream(src);
    CU_CHECK(rc.cuEventCreate(&raw_ev, 0x2 /* CU_EVENT_DISABLE_TIMING */));

    cw_stream_pool_settings ps;
    cw_stream_pool_settings_default(&ps);
    ps.mode = CW_POOL_LEASE;
    ps.reserved_streams = LEASE_RESERVED;
    CW_CHECK(cw_stream_pool_create(&lease_pool, ctx, &ps));
    cw_stream_pool_settings_default(&ps);
    ps.mode = CW_POOL_ROUND_ROBIN;
    ps.reserved_streams = RR_STREAMS;
    CW_CHECK(cw_stream_pool_create(&rr_pool, ctx, &ps));
    cw_stream_pool_info pst;
    CW_CHECK(cw_stream_pool_get_info(lease_pool, &pst));
    if (pst.mode != CW_POOL_LEASE)
        printf("note: the lease pool runs in mode %d (CUWEAVE_SERIALIZE=1?): figures are not the lease path\n",
               (int)pst.mode);

    /* clock overhead: an empty timed region */
    {
        double *ov = malloc(sizeof(double) * 10000);
        if (!ov) return 1;
        for (int i = 0; i < 10000; i++) {
            unsigned long long t0 = now_ns(), t1 = now_ns();
            ov[i] = (double)(t1 - t0);
        }
        clock_ovh_ns = stats_of(ov, 10000).p50;
        free(ov);
    }
    printf("clock_gettime pair overhead (median): %.1f ns (subtracted per run of %d in 'pool acquire')\n",
           clock_ovh_ns, LEASE_RESERVED);

    double *pair = malloc(sizeof(double) * SAMPLES), *acq = malloc(sizeof(double) * SAMPLES),
           *rel = malloc(sizeof(double) * SAMPLES), *nxt = malloc(sizeof(double) * SAMPLES),
           *wcw = malloc(sizeof(double) * SAMPLES), *wraw = malloc(sizeof(double) * SAMPLES);
    if (!pair || !acq || !rel || !nxt || !wcw || !wraw) {
        fprintf(stderr, "bench_streams: out of memory\n");
        return 1;
    }

    /* warm-up: every path, both sides */
    for (int i = 0; i < WARMUP; i++) {
        double a, b;
        (void)batch_pool_pair();
        batch_pool_split(&a, &b);
        (void)batch_pool_next();
        (void)batch_wait_cw();
        (void)batch_wait_raw();
    }

    /* measured: the CPU-only calls, interleaved round by round */
    for (int i = 0; i < SAMPLES; i++) {
        switch (i % 3) {
        case 0:
            pair[i] = batch_pool_pair();
            batch_pool_split(&acq[i], &rel[i]);
            nxt[i] = batch_pool_next();
            break;
        case 1:
            batch_pool_split(&acq[i], &rel[i]);
            nxt[i] = batch_pool_next();
            pair[i] = batch_pool_pair();
            break;
        default:
            nxt[i] = batch_pool_next();
            pair[i] = batch_pool_pair();
            batch_pool_split(&acq[i], &rel[i]);
            break;
        }
    }
    /* measured: wait, cuweave and raw alternated AB BA AB ... */
    for (int i = 0; i < SAMPLES; i++) {
        if (i & 1) {
            wraw[i] = batch_wait_raw();
            wcw[i] = batch_wait_cw();
        } else {
            wcw[i] = batch_wait_cw();
            wraw[i] = batch_wait_raw();
        }
    }
    sync_both();

    /* the ratio of each round's two adjacent batches, before the sorts below */
    double *pr = malloc(sizeof(double) * SAMPLES);
    if (!pr) return 1;
    for (int i = 0; i < SAMPLES; i++) pr[i] = wcw[i] / wraw[i];
    stats s_pr = stats_of(pr, SAMPLES);
    free(pr);

    stats s_pair = stats_of(pair, SAMPLES), s_acq = stats_of(acq, SAMPLES), s_rel = stats_of(rel, SAMPLES),
          s_nxt = stats_of(nxt, SAMPLES), s_wcw = stats_of(wcw, SAMPLES), s_wraw = stats_of(wraw, SAMPLES);
    double r50 = s_wcw.p50 / s_wraw.p50, r99 = s_wcw.p99 / s_wraw.p99;
    int ok_acq = s_acq.p50 < TARGET_POOL_NS, ok_nxt = s_nxt.p50 < TARGET_POOL_NS,
        ok_wait = r50 <= TARGET_WAIT_RATIO;

    printf("results (ns per call; percentiles over %d batch means):\n", SAMPLES);
    print_line("pool acquire+release (pair)", &s_pair);
    print_line("pool acquire (8 in a row)", &s_acq);
    print_line("pool release (8 in a row)", &s_rel);
    print_line("pool next (round robin)", &s_nxt);
    print_line("cw_stream_wait", &s_wcw);
    print_line("raw cuEventRecord+cuStreamWaitEvent", &s_wraw);
    printf("  wait ratio cuweave/raw: p50 %.3f, p99 %.3f (ratio of the medians, of the p99s)\n", r50, r99);
    printf("  wait ratio per round (cuweave batch / adjacent raw batch): p10 %.3f, p50 %.3f, p90 %.3f\n",
           s_pr.p10, s_pr.p50, s_pr.p90);
    printf("targets: pool acquire p50 < %.0f ns: %s; pool next p50 < %.0f ns: %s; "
           "wait p50 ratio <= %.2f: %s (p99 ratio %.3f, not judged)\n",
           TARGET_POOL_NS, pass(ok_acq), TARGET_POOL_NS, pass(ok_nxt), TARGET_WAIT_RATIO, pass(ok_wait), r99);

    /* the block for docs/benchmarks.md */
    printf("\n---- docs/benchmarks.md ----\n");
    printf("### Stream pools and ordering, host cost per call (bench_streams)\n\n");
    printf("%s, %s, driver %d.%d, commit %s. Nanoseconds per call: batches of K calls timed with\n"
           "CLOCK_MONOTONIC and divided by K (K = %d pool, %d wait); p50 / p90 / p99 over %d batches;\n"
           "cuweave and raw batches alternated in one run.\n\n",
           date, info.name, drv / 1000, drv % 1000 / 10, commit, CPU_K, WAIT_K, SAMPLES);
    printf("| operation | cuweave p50 / p90 / p99 | raw p50 / p90 / p99 | ratio p50 / p99 | target | result |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    printf("| pool acquire + release, lease pool of %d (pair) | %.1f / %.1f / %.1f | none | - | - | - |\n",
           LEASE_RESERVED, s_pair.p50, s_pair.p90, s_pair.p99);
    printf("| pool acquire, %d in a row | %.1f / %.1f / %.1f | none | - | p50 < %.0f ns | %s |\n", LEASE_RESERVED,
           s_acq.p50, s_acq.p90, s_acq.p99, TARGET_POOL_NS, pass(ok_acq));
    printf("| pool release, %d in a row | %.1f / %.1f / %.1f | none | - | - | - |\n", LEASE_RESERVED, s_rel.p50,
           s_rel.p90, s_rel.p99);
    printf("| pool next, round robin of %d | %.1f / %.1f / %.1f | none | - | p50 < %.0f ns | %s |\n", RR_STREAMS,
           s_nxt.p50, s_nxt.p90, s_nxt.p99, TARGET_POOL_NS, pass(ok_nxt));
    printf("| `cw_stream_wait` vs `cuEventRecord` + `cuStreamWaitEvent` | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f "
           "| %.3f / %.3f | p50 ratio <= %.2f | %s |\n",
           s_wcw.p50, s_wcw.p90, s_wcw.p99, s_wraw.p50, s_wraw.p90, s_wraw.p99, r50, r99, TARGET_WAIT_RATIO,
           pass(ok_wait));
    printf("\n'%d in a row': each run of %d calls timed alone, the clock's own %.1f ns subtracted per run.\n"
           "Wait, median of the per-round ratios (each cuweave batch over the adjacent raw one): %.3f.\n",
           LEASE_RESERVED, LEASE_RESERVED, clock_ovh_ns, s_pr.p50);
    printf("---- end ----\n");

    free(pair);
    free(acq);
    free(rel);
    free(nxt);
    free(wcw);
    free(wraw);
    CU_CHECK(rc.cuEventDestroy(raw_ev));
    cw_stream_pool_destroy(&rr_pool);
    cw_stream_pool_destroy(&lease_pool);
    cw_stream_destroy(&src);
    cw_stream_destroy(&dst);
    CU_CHECK(rc.cuCtxSetCurrent(NULL));
    cw_context_destroy(&ctx);
    return 0;
}
