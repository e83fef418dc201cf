/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_comm_rank: all-reduce between two processes, one per GPU, through a
 * cuweave communicator by rank (cw_comm_bootstrap, then
 * cw_comm_all_reduce_rank) against NCCL called directly in the same
 * processes (its own communicator from ncclGetUniqueId / ncclCommInitRank,
 * the id passed through a file), with the same sizes, the same buffers and
 * the same stream.
 *
 * The benchmark starts its two ranks itself (this binary again with
 * "--rank R DIR", through posix_spawn of /proc/self/exe), rank r on GPU r.
 * For each size, 1 KiB to 256 MiB in powers of 4, float32 sum, out of
 * place: warm-ups, then repetitions alternating the two ways (cuweave first
 * on even repetitions, NCCL first on odd ones, the same order in both
 * processes, since each all-reduce waits for the peer's); each repetition is
 * timed on the host from the call to the end of cuStreamSynchronize. Rank 0
 * prints, per size, the medians and p99 of both, the ratio of the medians
 * (cuweave / direct) and PASS when it is within 3%, as a Markdown table.
 * After the timed runs each rank checks one result element by element.
 *
 * Exits 77 (skip) with fewer than two GPUs or without NCCL 2.14 or later
 * (the path in CUWEAVE_LIBNCCL, else libnccl.so.2). NCCL_NVLS_ENABLE=0 is
 * set first thing (the machines forbid NVLink multicast); the ranks inherit
 * it. BENCH_REPS scales the repetitions (default 1.0); BENCH_MAX_MIB lowers
 * the last size (a quick run).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuweave/cuweave.h>

#include "../tests/rawcuda.h"

#define BENCH_NAME "bench_comm_rank"
#include "bench_common.h"

extern char **environ;

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define MAX_BYTES max_bytes()
#define TARGET 1.03

/* 256 MiB, or BENCH_MAX_MIB (a smaller last size, for a quick run). */
static size_t max_bytes(void) {
    const char *e = getenv("BENCH_MAX_MIB");
    long m = e ? atol(e) : 0;
    return m > 0 && m < 256 ? (size_t)m * MIB : 256ull * MIB;
}

/* ---- NCCL, directly ------------------------------------------------------------ */

typedef int nccl_result;
typedef struct ncclComm *nccl_comm;
typedef struct {
    char internal[128];
} nccl_id;
#define NCCL_FLOAT32 7
#define NCCL_SUM 0

static struct {
    nccl_result (*GetUniqueId)(nccl_id *);
    nccl_result (*CommInitRank)(nccl_comm *, int, nccl_id, int);
    nccl_result (*CommDestroy)(nccl_comm);
    nccl_result (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm, CUstream);
    const char *(*GetErrorString)(nccl_result);
    nccl_result (*CommInitRankConfig)(nccl_comm *, int, nccl_id, int, void *);
    nccl_result (*CommGetAsyncError)(nccl_comm, nccl_result *);
} nc;

/* BENCH_DIRECT_NONBLOCKING=1: NCCL's own communicator made non-blocking too
 * (ncclConfig_t of NCCL 2.14, blocking = 0), each call settled by polling
 * ncclCommGetAsyncError, as cuweave's: separates the mode's cost from
 * cuweave's own. */
struct nccl_config {
    size_t size;
    unsigned magic, version;
    int blocking, cga, min_ctas, max_ctas;
    const char *net;
};
static int g_direct_nonblocking;
static void direct_settle(nccl_comm c, nccl_result r) {
    if (!g_direct_nonblocking || r != 7 /* ncclInProgress */) return;
    nccl_result st = 7;
    while (nc.CommGetAsyncError(c, &st) == 0 && st == 7) sched_yield();
}

#define NCCL_CHECK(expr)                                                                                     \
    do {                                                                                                     \
        nccl_result n_ = (expr);                                                                             \
        if (n_ != 0) {                                                                                       \
            fprintf(stderr, "%s: %s failed: ncclResult %d (%s)\n", BENCH_NAME, #expr, n_,                    \
                    nc.GetErrorString ? nc.GetErrorString(n_) : "?");                                       \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static int nccl_open(void) {
    const char *path = getenv("CUWEAVE_LIBNCCL");
    if (!path || !*path) path = "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    nc.GetUniqueId = (nccl_result(*)(nccl_id *))dlsym(h, "ncclGetUniqueId");
    nc.CommInitRank = (nccl_result(*)(nccl_comm *, int, nccl_id, int))dlsym(h, "ncclCommInitRank");
    nc.CommDestroy = (nccl_result(*)(nccl_comm))dlsym(h, "ncclCommDestroy");
    nc.AllReduce = (nccl_result(*)(const void *, void *, size_t, int, int, nccl_comm, CUstream))dlsym(h, "ncclAllReduce");
    nc.GetErrorString = (const char *(*)(nccl_result))dlsym(h, "ncclGetErrorString");
    nc.CommInitRankConfig = (nccl_result(*)(nccl_comm *, int, nccl_id, int, void *))dlsym(h, "ncclCommInitRankConfig");
    nc.CommGetAsyncError = (nccl_result(*)(nccl_comm, nccl_result *))dlsym(h, "ncclCommGetAsyncError");
    return nc.GetUniqueId && nc.CommInitRank && nc.CommDestroy && nc.AllReduce && nc.GetErrorString;
}

/* ---- a rank ------------------------------------------------------------------- */

/* The two driver entries used directly, from the driver cuweave loads
 * (CUWEAVE_LIBCUDA, else libcuda.so.1). */
static struct {
    rc_result (*cuCtxSetCurrent)(CUcontext);
    rc_result (*cuStreamSynchronize)(CUstream);
} rc;

static int driver_open(void) {
    const char *path = getenv("CUWEAVE_LIBCUDA");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    rc.cuCtxSetCurrent = (rc_result(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    rc.cuStreamSynchronize = (rc_result(*)(CUstream))dlsym(h, "cuStreamSynchronize");
    return rc.cuCtxSetCurrent && rc.cuStreamSynchronize;
}

static int reps_for(size_t bytes) {
    const char *e = getenv("BENCH_REPS");
    double scale = e && atof(e) > 0 ? atof(e) : 1.0;
    int reps = bytes <= 1 * MIB ? 400 : bytes <= 16 * MIB ? 200 : bytes <= 64 * MIB ? 60 : 30;
    reps = (int)(reps * scale);
    return reps < 10 ? 10 : reps;
}

static int rank_main(int rank, const char *dir) {
    CW_CHECK(cw_init());
    if (!driver_open()) {
        fprintf(stderr, "%s: the driver's cuCtxSetCurrent and cuStreamSynchronize could not be opened\n", BENCH_NAME);
        return 1;
    }
    if (!nccl_open()) {
        fprintf(stderr, "%s: rank %d: NCCL could not be opened directly\n", BENCH_NAME, rank);
        return 1;
    }
    cw_context *ctx = NULL;
    CW_CHECK(cw_context_create(&ctx, rank));
    char path[512];
    snprintf(path, sizeof path, "%s/cw-id", dir);
    cw_comm_bootstrap_settings bs;
    cw_comm_bootstrap_settings_default(&bs);
    bs.rank = rank;
    bs.world_size = 2;
    bs.file = path;
    bs.timeout_ms = 120000;
    cw_comm *comm = NULL;
    CW_CHECK(cw_comm_bootstrap(&comm, ctx, &bs));

    /* NCCL's own communicator: the id through a file (temporary + rename). */
    nccl_id id;
    snprintf(path, sizeof path, "%s/nccl-id", dir);
    if (rank == 0) {
        NCCL_CHECK(nc.GetUniqueId(&id));
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", BENCH_NAME, path);
            return 1;
        }
    } else {
        double t0 = (double)now_ns();
        for (;;) {
            FILE *f = fopen(path, "rb");
            if (f) {
                size_t got = fread(&id, sizeof id, 1, f);
                fclose(f);
                if (got == 1) break;
            }
            if ((double)now_ns() - t0 > 120e9) {
                fprintf(stderr, "%s: rank 1: no NCCL id from rank 0 in 120 s\n", BENCH_NAME);
                return 1;
            }
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    CU_CHECK(rc.cuCtxSetCurrent(bench_cu_context(ctx))); /* NCCL takes the current device */
    nccl_comm raw = NULL;
    const char *nb = getenv("BENCH_DIRECT_NONBLOCKING");
    g_direct_nonblocking = nb && *nb == '1' && nc.CommInitRankConfig && nc.CommGetAsyncError;
    if (g_direct_nonblocking) {
        struct nccl_config cfg = {sizeof cfg, 0xcafebeefu, 21400u, 0, INT_MIN, INT_MIN, INT_MIN, NULL};
        nccl_result r = nc.CommInitRankConfig(&raw, 2, id, rank, &cfg);
        if (r != 0 && r != 7) NCCL_CHECK(r);
        direct_settle(raw, 7);
        if (rank == 0) printf("the direct side's communicator is non-blocking (BENCH_DIRECT_NONBLOCKING=1)\n");
    } else {
        NCCL_CHECK(nc.CommInitRank(&raw, 2, id, rank));
    }
    if (rank == 0) unlink(path);

    cw_stream *s = NULL;
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    CUstream cs = bench_cu_stream(s);
    cw_buffer *ba = NULL, *bb = NULL;
    CW_CHECK(cw_buffer_create(&ba, s, MAX_BYTES));
    CW_CHECK(cw_buffer_create(&bb, s, MAX_BYTES));
    cw_devptr a = 0, b = 0;
    CW_CHECK(cw_buffer_get_ptr(ba, &a));
    CW_CHECK(cw_buffer_get_ptr(bb, &b));
    size_t nmax = MAX_BYTES / sizeof(float);
    float *host = malloc(MAX_BYTES);
    if (!host) return 1;
    for (size_t i = 0; i < nmax; i++) host[i] = (float)((i % 1024) * (size_t)(rank + 1));
    CW_CHECK(cw_copy_to_device(s, a, host, MAX_BYTES));
    CW_CHECK(cw_stream_synchronize(s));

    if (rank == 0) {
        printf("\n| size | cuweave p50 (us) | cuweave p99 (us) | direct p50 (us) | direct p99 (us) | cw/direct (p50) | "
               "within 3%% |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | :---: |\n");
    }
    int all_pass = 1;
    for (size_t bytes = 1 * KIB; bytes <= MAX_BYTES; bytes *= 4) {
        size_t count = bytes / sizeof(float);
        int reps = reps_for(bytes), warm = reps / 10 + 3;
        double *t[2];
        t[0] = malloc(sizeof(double) * (size_t)reps);
        t[1] = malloc(sizeof(double) * (size_t)reps);
        if (!t[0] || !t[1]) return 1;
        for (int i = 0; i < warm + reps; i++) {
            for (int k = 0; k < 2; k++) {
                int v = (i % 2) ? 1 - k : k; /* 0 cuweave, 1 direct */
                unsigned long long t0 = now_ns();
                if (v == 0)
                    CW_CHECK(cw_comm_all_reduce_rank(comm, rank, a, b, count, CW_FLOAT32, CW_SUM, s));
                else
                {
                    nccl_result r = nc.AllReduce((const void *)(uintptr_t)a, (void *)(uintptr_t)b, count,
                                                 NCCL_FLOAT32, NCCL_SUM, raw, cs);
                    if (g_direct_nonblocking && r == 7)
                        direct_settle(raw, r);
                    else
                        NCCL_CHECK(r);
                }
                CU_CHECK(rc.cuStreamSynchronize(cs));
                if (i >= warm) t[v][i - warm] = (double)(now_ns() - t0) / 1e3;
            }
        }
        stats sc = stats_of(t[0], (size_t)reps), sd = stats_of(t[1], (size_t)reps);
        double ratio = sc.p50 / sd.p50;
        int ok = ratio <= TARGET;
        all_pass &= ok;
        if (rank == 0) {
            char name[32];
            if (bytes < MIB)
                snprintf(name, sizeof name, "%llu KiB", (unsigned long long)(bytes / KIB));
            else
                snprintf(name, sizeof name, "%llu MiB", (unsigned long long)(bytes / MIB));
            printf("| %s | %.1f | %.1f | %.1f | %.1f | %.3f | %s |\n", name, sc.p50, sc.p99, sd.p50, sd.p99, ratio,
                   pass(ok));
            fflush(stdout);
        }
        free(t[0]);
        free(t[1]);
    }
    /* The last result (the largest size, either way: both sum the same), checked. */
    CW_CHECK(cw_copy_to_host(s, host, b, MAX_BYTES));
    CW_CHECK(cw_stream_synchronize(s));
    size_t wrong = 0;
    for (size_t i = 0; i < nmax; i++)
        if (host[i] != (float)((i % 1024) * 3)) wrong++;
    if (rank == 0 || wrong)
        printf("%srank %d: %zu MiB all-reduce: %zu of %zu elements wrong\n", rank == 0 ? "\n" : "", rank,
               (size_t)(MAX_BYTES / MIB), wrong, nmax);
    if (rank == 0) printf("all sizes within 3%%: %s\n", all_pass ? "yes" : "no");
    free(host);
    NCCL_CHECK(nc.CommDestroy(raw));
    cw_buffer_destroy(&ba);
    cw_buffer_destroy(&bb);
    cw_stream_destroy(&s);
    cw_comm_destroy(&comm);
    cw_context_destroy(&ctx);
    return wrong ? 1 : 0;
}

int main(int argc, char **argv) {
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* before NCCL is loaded, here and in the ranks */
    if (argc == 4 && !strcmp(argv[1], "--rank")) return rank_main(atoi(argv[2]), argv[3]);

    cw_status st = cw_init();
    if (st != CW_SUCCESS) {
        printf("SKIP: no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    cw_device_info info0;
    char commit[64], date[32];
    commit_name(commit, sizeof commit);
    time_t tnow = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tnow));
    int ndev = 0;
    CW_CHECK(cw_device_count(&ndev));
    if (ndev < 2) {
        printf("SKIP: bench_comm_rank needs two GPUs; %d visible\n", ndev);
        return 77;
    }
    CW_CHECK(cw_device_get_info(0, &info0));
    cw_versions v;
    CW_CHECK(cw_get_versions(&v));
    int drv = v.driver;
    if (v.nccl < 21400) {
        printf("SKIP: bench_comm_rank needs NCCL 2.14 or later (CUWEAVE_LIBNCCL, libnccl.so.2); found %d\n", v.nccl);
        return 77;
    }
    printf("bench_comm_rank: all-reduce float32 sum between two processes (GPU0, GPU1): cuweave by rank "
           "(cw_comm_bootstrap, cw_comm_all_reduce_rank) vs NCCL directly (ncclCommInitRank, ncclAllReduce), same "
           "buffers and stream, alternating; host time from the call to the end of cuStreamSynchronize\n"
           "%s, driver %d, NCCL %d, commit %s, %s\n",
           info0.name, drv, v.nccl, commit, date);
    fflush(stdout);
    char dir[] = "/tmp/cwbenchcommXXXXXX";
    if (!mkdtemp(dir)) return 1;
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        char *args[] = {"bench_comm_rank", "--rank", rs, dir, NULL};
        if (posix_spawn(&pid[r], "/proc/self/exe", NULL, NULL, args, environ) != 0) {
            fprintf(stderr, "%s: posix_spawn failed\n", BENCH_NAME);
            return 1;
        }
    }
    int rcode = 0;
    for (int r = 0; r < 2; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "%s: rank %d failed (status %d)\n", BENCH_NAME, r, st);
            rcode = 1;
        }
    }
    rmdir(dir);
    return rcode;
}
