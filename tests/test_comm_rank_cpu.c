/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Communicators by rank across real processes, on the CPU: the fake driver
 * (tests/fake_cuda.c, device memory is host memory in each process) and the
 * fake NCCL (tests/fake_nccl.c, whose ranks meet through files in a
 * directory named by the id, and whose collectives move the data through
 * those files). The parent never touches cuweave: each test forks its ranks
 * (children that load the driver and NCCL on their own), which check their
 * results themselves and report through their exit status; the parent waits
 * with a bound (a hang fails the test: the children are killed).
 *
 * What is checked: ids; N ranks meeting; all-reduce and broadcast (the array
 * forms, the _rank forms, a group) element by element; the info of a
 * communicator that holds one local rank; bad ranks and nranks; NCCL
 * missing and an NCCL without the non-blocking entries; mismatched nranks;
 * a rank taken twice; a rank that never arrives (CW_ERROR_TIMEOUT in
 * bounded time, nothing left alive in the fake); a rank that dies between
 * collectives; the bootstrap through a file and through TCP loopback,
 * disagreeing world sizes, and bad environment values; hostile peers of the
 * TCP bootstrap (idle, garbage, impersonating, slow-loris, gone mid-hello,
 * floods: past the cap, reconnecting, rank 0 out of descriptors; a fake
 * rank 0) and the token; what may sit at the file bootstrap's
 * path (a FIFO, a link, another user's file, bad contents) and rank 0's
 * temporary file (a planted link, its mode).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwtest.h"

static char g_fake_nccl[4096];
static char g_fake_nccl_old[4096];
static char g_dir[256]; /* this test's directory (FAKE_NCCL_DIR, bootstrap files) */

/* ---- in the children ------------------------------------------------------ */

static int g_rank = -1;

/* A failed check in a child: says where, with the library's detail, and
 * exits 10. */
#define CK(expr)                                                                                                \
    do {                                                                                                        \
        if (!(expr)) {                                                                                          \
            fprintf(stderr, "rank %d: %s:%d: %s is false (detail: %s)\n", g_rank, __FILE__, __LINE__, #expr,    \
                    cw_last_error()->message);                                                                  \
            _exit(10);                                                                                          \
        }                                                                                                       \
    } while (0)
#define CK_ST(expected, expr)                                                                                   \
    do {                                                                                                        \
        cw_status ck_s_ = (expr);                                                                               \
        if (ck_s_ != (expected)) {                                                                              \
            fprintf(stderr, "rank %d: %s:%d: %s returned %s, expected %s (detail: %s)\n", g_rank, __FILE__,     \
                    __LINE__, #expr, cw_status_name(ck_s_), cw_status_name(expected), cw_last_error()->message); \
            _exit(10);                                                                                          \
        }                                                                                                       \
    } while (0)
#define CK_OK(expr) CK_ST(CW_SUCCESS, expr)
#define CK_DETAIL(text)                                                                                         \
    do {                                                                                                        \
        if (!strstr(cw_last_error()->message, (text))) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: the detail \"%s\" lacks \"%s\"\n", g_rank, __FILE__, __LINE__,     \
                    cw_last_error()->message, (text));                                                          \
            _exit(10);                                                                                          \
        }                                                                                                       \
    } while (0)

/* The fake NCCL's live communicators in this process (it is loaded by then). */
static int nccl_live_here(void) {
    void *h = dlopen(g_fake_nccl, RTLD_NOW | RTLD_NOLOAD);
    int (*live)(void) = h ? (int (*)(void))dlsym(h, "fake_nccl_live") : NULL;
    int n = live ? live() : -1;
    if (h) dlclose(h);
    return n;
}

/* Calls of one fake NCCL entry in this process. */
static long nccl_calls_here(const char *entry) {
    void *h = dlopen(g_fake_nccl, RTLD_NOW | RTLD_NOLOAD);
    long (*calls)(const char *) = h ? (long (*)(const char *))dlsym(h, "fake_nccl_calls") : NULL;
    long n = calls ? calls(entry) : -1;
    if (h) dlclose(h);
    return n;
}

/* A rank's working set: a context of device rank % 2, a stream, buffers. */
typedef struct Rank {
    cw_context *ctx;
    cw_stream *s;
    cw_buffer *b[2];
    cw_devptr send, recv;
} Rank;

static void rank_open(Rank *r, int rank, size_t bytes) {
    g_rank = rank;
    memset(r, 0, sizeof *r);
    CK_OK(cw_context_create(&r->ctx, rank % 2));
    CK_OK(cw_stream_create(&r->s, r->ctx, NULL));
    for (int i = 0; i < 2; i++) CK_OK(cw_buffer_create(&r->b[i], r->s, bytes));
    CK_OK(cw_buffer_get_ptr(r->b[0], &r->send));
    CK_OK(cw_buffer_get_ptr(r->b[1], &r->recv));
}

static void rank_close(Rank *r) {
    CK_OK(cw_stream_synchronize(r->s));
    for (int i = 0; i < 2; i++) cw_buffer_destroy(&r->b[i]);
    cw_stream_destroy(&r->s);
    cw_context_destroy(&r->ctx);
}

static void put_i32(Rank *r, cw_devptr dst, const int32_t *v, size_t n) {
    CK_OK(cw_copy_to_device(r->s, dst, v, n * sizeof *v));
    CK_OK(cw_stream_synchronize(r->s));
}

static void get_i32(Rank *r, int32_t *v, cw_devptr src, size_t n) {
    CK_OK(cw_copy_to_host(r->s, v, src, n * sizeof *v));
    CK_OK(cw_stream_synchronize(r->s));
}

enum { kN = 1000 };

static int32_t value(int rank, int i) { return (int32_t)(i * (rank + 1) + rank); }

/* The collectives on a communicator by rank (nranks ranks, this one rank),
 * every result checked element by element. */
static void exercise(cw_comm *comm, Rank *r, int rank, int nranks) {
    cw_comm_info ci;
    memset(&ci, 0xab, sizeof ci);
    CK_OK(cw_comm_get_info(comm, &ci));
    CK(ci.size == nranks);
    CK(ci.local_size == 1);
    CK(ci.first_rank == rank);
    CK(ci.contexts[0] == r->ctx);
    CK(ci.contexts[1] == NULL);
    for (size_t i = 0; i < sizeof ci.reserved; i++) CK(ci.reserved[i] == 0);

    static int32_t in[kN], out[kN];
    for (int i = 0; i < kN; i++) in[i] = value(rank, i);
    put_i32(r, r->send, in, kN);

    /* The _rank form: sum. */
    CK_OK(cw_comm_all_reduce_rank(comm, rank, r->send, r->recv, kN, CW_INT32, CW_SUM, r->s));
    get_i32(r, out, r->recv, kN);
    for (int i = 0; i < kN; i++) {
        int32_t want = 0;
        for (int q = 0; q < nranks; q++) want += value(q, i);
        CK(out[i] == want);
    }
    /* The array form (one entry: the local rank): max. */
    CK_OK(cw_comm_all_reduce(comm, &r->send, &r->recv, kN, CW_INT32, CW_MAX, &r->s));
    get_i32(r, out, r->recv, kN);
    for (int i = 0; i < kN; i++) CK(out[i] == value(nranks - 1, i));
    /* Broadcast, array form, from the last rank: only its send is read. */
    int root = nranks - 1;
    cw_devptr send = rank == root ? r->send : 0;
    CK_OK(cw_comm_broadcast(comm, &send, &r->recv, kN, CW_INT32, root, &r->s));
    get_i32(r, out, r->recv, kN);
    for (int i = 0; i < kN; i++) CK(out[i] == value(root, i));
    /* A group: an in-place all-reduce (min) and a broadcast from rank 0. */
    CK_OK(cw_comm_group_begin());
    CK_OK(cw_comm_broadcast_rank(comm, rank, rank == 0 ? r->send : 0, r->recv, kN, CW_INT32, 0, r->s));
    CK_OK(cw_comm_all_reduce_rank(comm, rank, r->send, r->send, kN, CW_INT32, CW_MIN, r->s));
    CK_OK(cw_comm_group_end());
    get_i32(r, out, r->recv, kN);
    for (int i = 0; i < kN; i++) CK(out[i] == value(0, i));
    get_i32(r, out, r->send, kN);
    for (int i = 0; i < kN; i++) CK(out[i] == value(0, i));

    /* A rank this process does not hold, a root out of range. */
    int other = (rank + 1) % nranks;
    if (nranks > 1) {
        CK_ST(CW_ERROR_INVALID_ARGUMENT,
              cw_comm_all_reduce_rank(comm, other, r->send, r->recv, kN, CW_INT32, CW_SUM, r->s));
        CK_DETAIL("is not held by this communicator");
    }
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_broadcast(comm, &r->send, &r->recv, kN, CW_INT32, nranks, &r->s));
    CK_ST(CW_ERROR_INVALID_ARGUMENT,
          cw_comm_broadcast_rank(comm, rank, r->send, r->recv, kN, CW_INT32, -1, r->s));
}

/* ---- the parent ----------------------------------------------------------- */

typedef void (*child_fn)(int rank, void *arg);

/* Starts n children, child i running fn(i, arg) then exiting 0; waits for
 * all, up to timeout_ms (then kills them and fails). status[i]: the exit
 * status (128 + signal when killed by one). Returns the elapsed ms. */
static double run_ranks(int n, child_fn fn, void *arg, int *status, int timeout_ms) {
    pid_t pids[16];
    assert_true(n <= 16);
    fflush(stdout);
    fflush(stderr);
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            g_rank = i;
            fn(i, arg);
            _exit(0);
        }
    }
    int left = n;
    for (int i = 0; i < n; i++) status[i] = -1;
    while (left > 0) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < n; i++)
                if (pids[i] == p) {
                    status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    left--;
                }
            continue;
        }
        if (now_ms() - t0 > timeout_ms) {
            for (int i = 0; i < n; i++)
                if (status[i] < 0) kill(pids[i], SIGKILL);
            for (int i = 0; i < n; i++)
                if (status[i] < 0) waitpid(pids[i], NULL, 0);
            fail_msg("the ranks did not finish within %d ms (a hang)", timeout_ms);
        }
        sleep_ms(5);
    }
    return now_ms() - t0;
}

static void expect_all_zero(int n, const int *status) {
    for (int i = 0; i < n; i++)
        if (status[i] != 0) fail_msg("rank %d exited with %d (its message is above)", i, status[i]);
}

static int setup_dir(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/cwcommXXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    setenv("FAKE_NCCL_DIR", g_dir, 1);
    return 0;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- ids passed by a pipe; N ranks meeting --------------------------------- */

typedef struct PipeArg {
    int fd[2];
    int nranks;
} PipeArg;

static void child_by_pipe(int rank, void *arg) {
    PipeArg *pa = arg;
    cw_comm_id id;
    if (rank == 0) {
        memset(&id, 0, sizeof id);
        CK_OK(cw_comm_id_generate(&id));
        cw_comm_id other;
        CK_OK(cw_comm_id_generate(&other));
        CK(memcmp(&id, &other, sizeof id) != 0); /* each id is new */
        for (int i = 1; i < pa->nranks; i++) CK(write(pa->fd[1], &id, sizeof id) == (ssize_t)sizeof id);
    } else {
        CK(read(pa->fd[0], &id, sizeof id) == (ssize_t)sizeof id);
    }
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    cw_comm *comm = NULL;
    CK_OK(cw_comm_create_rank(&comm, r.ctx, &id, pa->nranks, rank, 20000));
    CK(nccl_live_here() == 1);
    /* joined non-blocking (it may time out), then split into a blocking
     * communicator for the collectives (NCCL's non-blocking mode defers
     * every call's enqueue: some 40 us a call on the H200s), the joining
     * one gone: the collectives never poll for an enqueue */
    CK(nccl_calls_here("ncclCommInitRankConfig") == 1);
    CK(nccl_calls_here("ncclCommSplit") == 1);
    const long polls = nccl_calls_here("ncclCommGetAsyncError");
    exercise(comm, &r, rank, pa->nranks);
    CK(nccl_calls_here("ncclCommGetAsyncError") == polls);
    cw_comm_destroy(&comm);
    CK(comm == NULL);
    CK(nccl_live_here() == 0);
    rank_close(&r);
}

static void run_by_pipe(int nranks) {
    PipeArg pa = {{-1, -1}, nranks};
    assert_int_equal(pipe(pa.fd), 0);
    int status[16];
    run_ranks(nranks, child_by_pipe, &pa, status, 60000);
    close(pa.fd[0]);
    close(pa.fd[1]);
    expect_all_zero(nranks, status);
}

static void test_two_ranks(void **state) {
    (void)state;
    run_by_pipe(2);
}

static void test_four_ranks(void **state) {
    (void)state;
    run_by_pipe(4);
}

/* One rank alone: a communicator of one. */
static void test_one_rank(void **state) {
    (void)state;
    run_by_pipe(1);
}

/* ---- arguments, NCCL missing or too old ------------------------------------ */

static void child_bad_args(int rank, void *arg) {
    (void)arg;
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm_id id;
    CK_OK(cw_comm_id_generate(&id));
    cw_comm *comm = NULL;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_id_generate(NULL));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(NULL, r.ctx, &id, 2, 0, 100));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, NULL, &id, 2, 0, 100));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, r.ctx, NULL, 2, 0, 100));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, r.ctx, &id, 0, 0, 100));
    CK_DETAIL("nranks is 0");
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, r.ctx, &id, 2, 2, 100));
    CK_DETAIL("rank 2 is outside [0, 2)");
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, r.ctx, &id, 2, -1, 100));
    CK_ST(CW_ERROR_INVALID_HANDLE, cw_comm_create_rank(&comm, (cw_context *)r.s, &id, 2, 0, 100));
    /* An id NCCL did not make. */
    cw_comm_id junk;
    memset(&junk, 0x5a, sizeof junk);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_create_rank(&comm, r.ctx, &junk, 2, 0, 100));
    CK_DETAIL("NCCL refused the join");
    CK(comm == NULL);
    CK(nccl_live_here() == 0);
    rank_close(&r);
}

static void test_bad_arguments(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_bad_args, NULL, status, 30000);
    expect_all_zero(1, status);
}

static void child_no_nccl(int rank, void *arg) {
    const char *lib = arg;
    setenv("CUWEAVE_LIBNCCL", lib, 1);
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm_id id;
    memset(&id, 0, sizeof id);
    cw_comm *comm = NULL;
    if (strstr(lib, "nonexistent")) {
        CK_ST(CW_ERROR_NOT_SUPPORTED, cw_comm_id_generate(&id));
        CK_DETAIL("/nonexistent/libnccl.so.2");
        CK_ST(CW_ERROR_NOT_SUPPORTED, cw_comm_create_rank(&comm, r.ctx, &id, 2, 0, 100));
        CK_DETAIL("NCCL could not be loaded");
        cw_comm_bootstrap_settings s;
        cw_comm_bootstrap_settings_default(&s);
        s.rank = 0;
        s.world_size = 1;
        s.addr = "127.0.0.1:1";
        CK_ST(CW_ERROR_NOT_SUPPORTED, cw_comm_bootstrap(&comm, r.ctx, &s));
    } else {
        CK_ST(CW_ERROR_NOT_SUPPORTED, cw_comm_id_generate(&id));
        CK_DETAIL("lacks ncclGetUniqueId");
        CK_DETAIL(lib);
        CK_ST(CW_ERROR_NOT_SUPPORTED, cw_comm_create_rank(&comm, r.ctx, &id, 2, 0, 100));
        CK_DETAIL("lacks ncclCommInitRankConfig");
        CK_DETAIL("NCCL 2.14");
        /* The communicators of one process still work with it. */
        cw_comm *all = NULL;
        CK_OK(cw_comm_create(&all, &r.ctx, 1));
        cw_comm_destroy(&all);
    }
    CK(comm == NULL);
    rank_close(&r);
}

static void test_nccl_missing(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_no_nccl, "/nonexistent/libnccl.so.2", status, 30000);
    expect_all_zero(1, status);
}

static void test_nccl_without_nonblocking_init(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_no_nccl, g_fake_nccl_old, status, 30000);
    expect_all_zero(1, status);
}

/* ---- mismatches, a rank that never comes, a rank that dies ------------------ */

typedef struct JoinArg {
    int fd[2];
    int nranks[4]; /* each child's nranks */
    int ranks[4];  /* each child's rank */
    uint32_t timeout_ms;
} JoinArg;

/* Child i joins as ranks[i] of nranks[i] (the id from child 0, by the
 * pipe) and exits with the status's value (0 success). */
static void child_join(int i, void *arg) {
    JoinArg *ja = arg;
    cw_comm_id id;
    int n = 0;
    for (int k = 0; k < 4; k++)
        if (ja->nranks[k]) n++;
    if (i == 0) {
        CK_OK(cw_comm_id_generate(&id));
        for (int k = 1; k < n; k++) CK(write(ja->fd[1], &id, sizeof id) == (ssize_t)sizeof id);
    } else {
        CK(read(ja->fd[0], &id, sizeof id) == (ssize_t)sizeof id);
    }
    Rank r;
    rank_open(&r, ja->ranks[i], 64);
    cw_comm *comm = NULL;
    cw_status st = cw_comm_create_rank(&comm, r.ctx, &id, ja->nranks[i], ja->ranks[i], ja->timeout_ms);
    if (st != CW_SUCCESS) {
        fprintf(stderr, "rank %d (child %d): %s: %s\n", ja->ranks[i], i, cw_status_name(st), cw_last_error()->message);
        CK(comm == NULL);
        CK(nccl_live_here() == 0); /* aborted: nothing left */
    }
    cw_comm_destroy(&comm);
    rank_close(&r);
    _exit(st == CW_SUCCESS ? 0 : st == CW_ERROR_TIMEOUT ? 21 : st == CW_ERROR_INVALID_ARGUMENT ? 20 : 22);
}

static void test_mismatched_nranks(void **state) {
    (void)state;
    JoinArg ja = {{-1, -1}, {2, 3}, {0, 1}, 20000};
    assert_int_equal(pipe(ja.fd), 0);
    int status[2];
    double ms = run_ranks(2, child_join, &ja, status, 30000);
    close(ja.fd[0]);
    close(ja.fd[1]);
    /* Both refused at once (not a timeout). */
    assert_int_equal(status[0], 20);
    assert_int_equal(status[1], 20);
    assert_true(ms < 15000);
}

static void test_rank_taken_twice(void **state) {
    (void)state;
    JoinArg ja = {{-1, -1}, {2, 2}, {0, 0}, 1500};
    assert_int_equal(pipe(ja.fd), 0);
    int status[2];
    run_ranks(2, child_join, &ja, status, 30000);
    close(ja.fd[0]);
    close(ja.fd[1]);
    /* One refused (the rank is taken), the other waits for rank 1 in vain. */
    assert_true((status[0] == 20 && status[1] == 21) || (status[0] == 21 && status[1] == 20));
}

static void test_rank_never_arrives(void **state) {
    (void)state;
    JoinArg ja = {{-1, -1}, {3, 3}, {0, 2}, 500}; /* rank 1 never comes */
    assert_int_equal(pipe(ja.fd), 0);
    int status[2];
    double ms = run_ranks(2, child_join, &ja, status, 30000);
    close(ja.fd[0]);
    close(ja.fd[1]);
    assert_int_equal(status[0], 21);
    assert_int_equal(status[1], 21);
    assert_true(ms >= 450);
    assert_true(ms < 10000);
}

/* Two ranks by a pipe: rank 0 makes the id and writes it, rank 1 reads it
 * and sets env=value (a fake NCCL setting for rank 1 alone, or NULL); both
 * open their side and join. */
static cw_comm *join_pair(int rank, PipeArg *pa, const char *env, const char *value, Rank *r) {
    cw_comm_id id;
    if (rank == 0) {
        CK_OK(cw_comm_id_generate(&id));
        CK(write(pa->fd[1], &id, sizeof id) == (ssize_t)sizeof id);
    } else {
        CK(read(pa->fd[0], &id, sizeof id) == (ssize_t)sizeof id);
        if (env) setenv(env, value, 1);
    }
    rank_open(r, rank, kN * sizeof(int32_t));
    cw_comm *comm = NULL;
    CK_OK(cw_comm_create_rank(&comm, r->ctx, &id, 2, rank, 20000));
    return comm;
}

/* One all-reduce of the two ranks' values, the sum checked. */
static void reduce_checked(cw_comm *comm, Rank *r, int rank) {
    static int32_t in[kN], out[kN];
    for (int i = 0; i < kN; i++) in[i] = value(rank, i);
    put_i32(r, r->send, in, kN);
    CK_OK(cw_comm_all_reduce_rank(comm, rank, r->send, r->recv, kN, CW_INT32, CW_SUM, r->s));
    get_i32(r, out, r->recv, kN);
    for (int i = 0; i < kN; i++) CK(out[i] == value(0, i) + value(1, i));
}

/* Runs fn in two ranks joined by a pipe; status[i]: each one's exit. */
static void run_pair(child_fn fn, int status[2]) {
    PipeArg pa = {{-1, -1}, 2};
    assert_int_equal(pipe(pa.fd), 0);
    run_ranks(2, fn, &pa, status, 60000);
    close(pa.fd[0]);
    close(pa.fd[1]);
}

static void child_dies(int rank, void *arg) {
    /* The fake NCCL ends rank 1's process (status 3) at its second collective. */
    Rank r;
    cw_comm *comm = join_pair(rank, arg, "FAKE_NCCL_EXIT_AT_COLLECTIVE", "1", &r);
    reduce_checked(comm, &r, rank);
    /* Rank 1 dies in this call; rank 0 learns it from NCCL. */
    CK_ST(CW_ERROR_DRIVER, cw_comm_all_reduce_rank(comm, rank, r.send, r.recv, kN, CW_INT32, CW_SUM, r.s));
    CK_DETAIL("is gone");
    CK(rank == 0);
    cw_comm_destroy(&comm);
    CK(nccl_live_here() == 0);
    rank_close(&r);
}

static void test_rank_dies(void **state) {
    (void)state;
    int status[2];
    run_pair(child_dies, status);
    assert_int_equal(status[0], 0);
    assert_int_equal(status[1], 3);
}

/* Rank 1 finds rank 0's part missing, and is slow to ask whether rank 0 is
 * alive: meanwhile rank 0 writes its part, finishes the collective (rank
 * 1's part was there) and exits. Rank 0 is done, not gone: rank 1's
 * collective completes. */
static void child_peer_done_first(int rank, void *arg) {
    Rank r;
    cw_comm *comm = join_pair(rank, arg, "FAKE_NCCL_PEER_CHECK_DELAY_MS", "400", &r);
    if (rank == 0) sleep_ms(100); /* rank 1 reaches the collective first */
    reduce_checked(comm, &r, rank);
    cw_comm_destroy(&comm);
    rank_close(&r);
}

static void test_peer_done_first(void **state) {
    (void)state;
    int status[2];
    run_pair(child_peer_done_first, status);
    expect_all_zero(2, status);
}

/* ---- the bootstrap ------------------------------------------------------- */

typedef struct BootArg {
    const char *var;   /* CUWEAVE_COMM_FILE or CUWEAVE_COMM_ADDR */
    char value[512];
    int nranks;
    int delay_rank0_ms; /* rank 0 starts late: the others retry */
} BootArg;

static void child_bootstrap(int rank, void *arg) {
    BootArg *ba = arg;
    char v[16];
    snprintf(v, sizeof v, "%d", rank);
    setenv("CUWEAVE_RANK", v, 1);
    snprintf(v, sizeof v, "%d", ba->nranks);
    setenv("CUWEAVE_WORLD_SIZE", v, 1);
    setenv(ba->var, ba->value, 1);
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    if (rank == 0 && ba->delay_rank0_ms) sleep_ms(ba->delay_rank0_ms);
    cw_comm *comm = NULL;
    CK_OK(cw_comm_bootstrap(&comm, r.ctx, NULL)); /* every setting from the environment */
    exercise(comm, &r, rank, ba->nranks);
    if (rank == 0 && !strcmp(ba->var, "CUWEAVE_COMM_FILE")) CK(access(ba->value, F_OK) != 0); /* removed */
    cw_comm_destroy(&comm);
    rank_close(&r);
}

static void test_bootstrap_file(void **state) {
    (void)state;
    BootArg ba = {"CUWEAVE_COMM_FILE", "", 3, 200};
    snprintf(ba.value, sizeof ba.value, "%s/comm-id", g_dir);
    int status[3];
    run_ranks(3, child_bootstrap, &ba, status, 60000);
    expect_all_zero(3, status);
    assert_int_not_equal(access(ba.value, F_OK), 0);
}

/* A TCP port free now on loopback. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_bootstrap_tcp(void **state) {
    (void)state;
    BootArg ba = {"CUWEAVE_COMM_ADDR", "", 3, 300};
    snprintf(ba.value, sizeof ba.value, "127.0.0.1:%d", free_port());
    int status[3];
    run_ranks(3, child_bootstrap, &ba, status, 60000);
    expect_all_zero(3, status);
}

/* Rank 0 with world size 2, rank 1 with 3, through TCP: both fail. */
static void child_boot_disagree(int rank, void *arg) {
    BootArg *ba = arg;
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = rank;
    s.world_size = rank == 0 ? 2 : 3;
    s.addr = ba->value;
    s.timeout_ms = rank == 0 ? 1500 : 10000;
    cw_comm *comm = NULL;
    /* rank 1 is refused at once, told why; rank 0 serves on (a peer's hello
     * cannot end it) and times out, naming what it refused */
    CK_ST(rank == 0 ? CW_ERROR_TIMEOUT : CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL(rank == 0 ? "1 connection(s) refused, the last: world size 3, rank 0 has 2"
                        : "refused rank 1: world size 3, rank 0 has 2: the ranks disagree");
    CK(comm == NULL);
    rank_close(&r);
}

static void test_bootstrap_world_disagrees(void **state) {
    (void)state;
    BootArg ba = {"", "", 2, 0};
    snprintf(ba.value, sizeof ba.value, "127.0.0.1:%d", free_port());
    int status[2];
    run_ranks(2, child_boot_disagree, &ba, status, 30000);
    expect_all_zero(2, status);
}

static void child_boot_env(int rank, void *arg) {
    (void)arg;
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm *comm = NULL;
    char file[512];
    snprintf(file, sizeof file, "%s/never-written", g_dir);
    unsetenv("CUWEAVE_COMM_FILE");
    unsetenv("CUWEAVE_COMM_ADDR");
    setenv("CUWEAVE_WORLD_SIZE", "2", 1);

    unsetenv("CUWEAVE_RANK");
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("CUWEAVE_RANK is not set");
    setenv("CUWEAVE_RANK", "one", 1);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("CUWEAVE_RANK=\"one\"");
    setenv("CUWEAVE_RANK", "2", 1);
    setenv("CUWEAVE_COMM_FILE", file, 1);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("rank 2 is outside [0, 2)");
    setenv("CUWEAVE_RANK", "1", 1);
    setenv("CUWEAVE_WORLD_SIZE", "-3", 1);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("CUWEAVE_WORLD_SIZE=\"-3\"");
    setenv("CUWEAVE_WORLD_SIZE", "2x", 1);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    setenv("CUWEAVE_WORLD_SIZE", "2", 1);
    setenv("CUWEAVE_COMM_ADDR", "127.0.0.1:9", 1);
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("not both");
    unsetenv("CUWEAVE_COMM_FILE");
    unsetenv("CUWEAVE_COMM_ADDR");
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    CK_DETAIL("neither CUWEAVE_COMM_FILE nor CUWEAVE_COMM_ADDR");
    const char *bad_addrs[] = {"localhost", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:http", "[::1:5"};
    for (size_t i = 0; i < sizeof bad_addrs / sizeof bad_addrs[0]; i++) {
        setenv("CUWEAVE_COMM_ADDR", bad_addrs[i], 1);
        CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, NULL));
    }
    /* The settings override the environment; reserved bytes are refused. */
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    CK(s.rank == -1 && s.world_size == 0 && !s.file && !s.addr && s.timeout_ms == 60000);
    s.reserved[3] = 1;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(NULL, r.ctx, NULL));
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, NULL, NULL));
    /* Rank 1 waits for a file rank 0 never writes: a timeout. */
    cw_comm_bootstrap_settings_default(&s);
    s.rank = 1;
    s.world_size = 2;
    s.file = file;
    s.timeout_ms = 300;
    double t0 = now_ms();
    CK_ST(CW_ERROR_TIMEOUT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL("rank 0 did not write");
    CK(now_ms() - t0 >= 280 && now_ms() - t0 < 5000);
    /* And a rank 0 that nobody connects to. */
    cw_comm_bootstrap_settings_default(&s);
    s.rank = 0;
    s.world_size = 2;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", *(int *)arg);
    s.addr = addr;
    s.timeout_ms = 300;
    CK_ST(CW_ERROR_TIMEOUT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL("0 of the 1 other ranks came");
    /* Rank 0's address unreachable (a non-routed address): the connect
     * does not hold the call past the timeout. */
    s.rank = 1;
    s.addr = "10.255.255.1:9";
    s.timeout_ms = 300;
    t0 = now_ms();
    cw_status ust = cw_comm_bootstrap(&comm, r.ctx, &s);
    /* TIMEOUT; DRIVER where the network refuses outright; INVALID_ARGUMENT
     * where a proxy answers for every address (not a cuweave rank 0). */
    CK(ust == CW_ERROR_TIMEOUT || ust == CW_ERROR_DRIVER || ust == CW_ERROR_INVALID_ARGUMENT);
    CK(now_ms() - t0 < 5000);
    /* A file that is not an id. */
    FILE *f = fopen(file, "w");
    CK(f && fputs("hello\n", f) >= 0 && fclose(f) == 0);
    s.rank = 1;
    s.addr = NULL;
    s.file = file;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL("does not hold a cuweave communicator id");
    CK(comm == NULL);
    CK(nccl_live_here() == 0);
    rank_close(&r);
}

static void test_bootstrap_bad_environment(void **state) {
    (void)state;
    int port = free_port();
    int status[1];
    run_ranks(1, child_boot_env, &port, status, 30000);
    expect_all_zero(1, status);
}

/* ---- hostile peers of the TCP bootstrap (127.0.0.1 only) ------------------ */

/* The genuine ranks against peers that are not: each genuine rank is a
 * child running cw_comm_bootstrap, each hostile peer a child of the test
 * that only speaks raw TCP to rank 0's port (no cuweave). The ranks after
 * rank 0 start once every hostile peer is in position (a byte each through
 * the `ready` pipe: connected, or its bytes sent), so the hostile one comes
 * first. Every case asserts every genuine rank's outcome (joined, and the
 * collectives checked; or the status and detail expected) and that no
 * hostile peer received the id; a hang fails (the children are killed at
 * the bound), and every child has an alarm of its own. */

enum {
    H_IDLE, H_GARBAGE, H_IMPERSONATE, H_SLOWLORIS, H_HALF, H_FLOOD, H_FLOOD_PAST_CAP, H_FAKE_RANK0, H_FLOOD_RECONNECT
};

typedef struct Hostile {
    int port;
    int nranks;
    int timeout_ms;           /* the genuine ranks' */
    const char *token;        /* CUWEAVE_COMM_TOKEN of the genuine ranks (NULL: unset) */
    cw_status want[4];        /* each genuine rank's status */
    const char *detail[4];    /* and a piece of its detail (NULL: none asked) */
    int kind[4];              /* the hostile peers */
    int nhostile;
    const char *reply;        /* H_FAKE_RANK0: what it answers (NULL: nothing, ever) */
    size_t reply_n;
    int endless;              /* H_FAKE_RANK0: then '7' forever */
    int skip_rank;            /* a genuine rank not started (0: none) */
    int rank0_fds;            /* rank 0 may open this many descriptors more (0: its limit as it is) */
    int ready[2];
} Hostile;

/* Connects to 127.0.0.1:port, retrying for up to 5 s while nobody listens;
 * exits 22 when it cannot. */
static int h_connect(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    double t0 = now_ms();
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) _exit(23);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        close(fd);
        if (now_ms() - t0 > 5000) {
            fprintf(stderr, "hostile peer: rank 0 did not listen on port %d\n", port);
            _exit(22);
        }
        sleep_ms(5);
    }
}

/* A connection to 127.0.0.1:port begun without waiting for it (a socket
 * whose connect fails shows as readable with an error, or hung up). */
static int h_connect_nb(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) _exit(23);
    (void)connect(fd, (struct sockaddr *)&a, sizeof a);
    return fd;
}

static void h_send(int fd, const void *b, size_t n) { (void)!send(fd, b, n, MSG_NOSIGNAL); }

/* What the peer sends until it closes (3 s at most), NUL-terminated. */
static size_t h_read_all(int fd, char *buf, size_t cap) {
    size_t n = 0;
    double t0 = now_ms();
    while (n + 1 < cap && now_ms() - t0 < 3000) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

/* Fails the hostile peer (exit 21) when rank 0 answered it with the id. */
static void h_expect_no_id(int fd, const char *what) {
    char buf[4096];
    size_t n = h_read_all(fd, buf, sizeof buf);
    if (memmem(buf, n, "cuweave-comm-id", 15)) {
        fprintf(stderr, "hostile peer (%s): rank 0 handed it the communicator id\n", what);
        _exit(21);
    }
}

/* In position: a byte for each genuine rank that waits (all but rank 0). */
static void h_ready(const Hostile *h) {
    for (int i = 1; i < h->nranks; i++) (void)!write(h->ready[1], "r", 1);
}

static void hostile_peer(const Hostile *h, int which) {
    alarm(60);
    switch (h->kind[which]) {
    case H_IDLE: { /* connects and says nothing */
        int fd = h_connect(h->port);
        h_ready(h);
        for (;;) pause();
        (void)fd;
    }
    case H_FLOOD:          /* 32 connections that say nothing */
    case H_FLOOD_PAST_CAP: /* 80 */
        for (int i = 0; i < (h->kind[which] == H_FLOOD ? 32 : 80); i++) (void)h_connect(h->port);
        h_ready(h);
        for (;;) pause();
    case H_FLOOD_RECONNECT: { /* 300 connections that say nothing, each made again when rank 0 closes it */
        enum { kFlood = 300 };
        static struct pollfd p[kFlood];
        p[0].fd = h_connect(h->port); /* rank 0 listens */
        for (int i = 1; i < kFlood; i++) p[i].fd = h_connect_nb(h->port);
        for (int i = 0; i < kFlood; i++) p[i].events = POLLIN;
        sleep_ms(100);
        h_ready(h);
        for (;;) {
            if (poll(p, kFlood, 1000) <= 0) continue;
            int again = 0;
            for (int i = 0; i < kFlood; i++) {
                if (!p[i].revents) continue;
                char c[64];
                ssize_t r = recv(p[i].fd, c, sizeof c, MSG_DONTWAIT);
                if (r > 0 || (r < 0 && errno == EAGAIN)) continue;
                close(p[i].fd);
                p[i].fd = h_connect_nb(h->port);
                again++;
            }
            if (again == kFlood) sleep_ms(1); /* rank 0 closed its port: no spinning */
        }
    }
    case H_SLOWLORIS: { /* a hello a byte at a time, never finished */
        int fd = h_connect(h->port);
        h_send(fd, "1", 1);
        h_ready(h);
        for (;;) {
            sleep_ms(200);
            h_send(fd, "1", 1);
        }
    }
    case H_HALF: { /* hellos cut short: the peer goes away mid-message */
        const char *cut[] = {"1 2", "1", "1 2 ", ""};
        for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
            int fd = h_connect(h->port);
            h_send(fd, cut[i], strlen(cut[i]));
            shutdown(fd, SHUT_WR);
            h_expect_no_id(fd, cut[i]);
            close(fd);
        }
        h_ready(h);
        _exit(0);
    }
    case H_GARBAGE: { /* hellos no cuweave rank sends */
        static char big[600], zeros[40];
        memset(big, '7', sizeof big);
        const struct {
            const char *b;
            size_t n;
        } bad[] = {
            {"7 2\n", 4},     {"0 2\n", 4},   {"-1 2\n", 5},      {"1 3\n", 4},     {"1 0\n", 4},
            {"hello\n", 6},   {"1 2 3 4\n", 8}, {"1  2\n", 5},    {" 1 2\n", 5},    {"1 2\r\n", 5},
            {"+1 2\n", 5},    {"1 2x\n", 5},  {"01 2\n", 5},      {zeros, sizeof zeros},
            {"1 99999999999999999999999999\n", 29}, {"99999999999999999999999999 2\n", 29},
            {"4294967297 2\n", 13}, {big, sizeof big},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int fd = h_connect(h->port);
            h_send(fd, bad[i].b, bad[i].n);
            h_expect_no_id(fd, "garbage");
            close(fd);
        }
        h_ready(h);
        _exit(0);
    }
    case H_IMPERSONATE: { /* says it is rank 1: without the token, or with a wrong one */
        char line[64];
        int fd = h_connect(h->port);
        h_send(fd, line, (size_t)snprintf(line, sizeof line, "1 %d\n", h->nranks));
        char buf[4096];
        size_t n = h_read_all(fd, buf, sizeof buf);
        close(fd);
        const int got = memmem(buf, n, "cuweave-comm-id", 15) != NULL;
        if (h->token) {
            if (got) {
                fprintf(stderr, "hostile peer: rank 0 gave the id to a hello without the token\n");
                _exit(21);
            }
            const char *wrong[] = {"wrong-token", "sesame-", "sesam", "", "Sesame"};
            for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
                fd = h_connect(h->port);
                h_send(fd, line, (size_t)snprintf(line, sizeof line, "1 %d %s\n", h->nranks, wrong[i]));
                h_expect_no_id(fd, wrong[i]);
                close(fd);
            }
        } else if (!got) { /* without a token rank 0 cannot tell: the first rank 1 gets the id */
            fprintf(stderr, "hostile peer: rank 0 did not answer a hello of rank 1 (no token): \"%s\"\n", buf);
            _exit(24);
        }
        h_ready(h);
        _exit(0);
    }
    case H_FAKE_RANK0: { /* listens in rank 0's place and answers h->reply */
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)h->port);
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 4) != 0) _exit(25);
        h_ready(h);
        int fd = accept(ls, NULL, NULL);
        char hello[64];
        (void)!recv(fd, hello, sizeof hello, 0);
        if (h->reply) h_send(fd, h->reply, h->reply_n);
        if (h->endless) /* a message that never ends */
            for (;;) h_send(fd, "7", 1);
        if (!h->reply) /* silent */
            for (;;) pause();
        close(fd);
        _exit(0);
    }
    }
    _exit(26);
}

static void child_genuine(int rank, void *arg) {
    const Hostile *h = arg;
    alarm(60);
    if (h->token)
        setenv("CUWEAVE_COMM_TOKEN", h->token, 1);
    else
        unsetenv("CUWEAVE_COMM_TOKEN");
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    if (rank == 0 && h->rank0_fds) { /* descriptors for h->rank0_fds more, no more */
        int lowest = dup(0);
        CK(lowest >= 0 && close(lowest) == 0);
        struct rlimit rl;
        CK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
        rl.rlim_cur = (rlim_t)(lowest + h->rank0_fds); /* the soft limit only (valgrind keeps the hard one) */
        CK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    if (rank > 0) /* after the hostile peers are in position */
        for (int i = 0; i < h->nhostile; i++) {
            char c;
            struct pollfd p = {h->ready[0], POLLIN, 0};
            CK(poll(&p, 1, 20000) == 1 && read(h->ready[0], &c, 1) == 1);
        }
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = rank;
    s.world_size = h->nranks;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", h->port);
    s.addr = addr;
    s.timeout_ms = (uint32_t)h->timeout_ms;
    cw_comm *comm = NULL;
    CK_ST(h->want[rank], cw_comm_bootstrap(&comm, r.ctx, &s));
    if (h->detail[rank]) CK_DETAIL(h->detail[rank]);
    if (h->want[rank] == CW_SUCCESS) {
        exercise(comm, &r, rank, h->nranks);
        cw_comm_destroy(&comm);
    }
    CK(comm == NULL);
    rank_close(&r);
}

/* Runs the genuine ranks (all but rank 0 when h->kind[0] is H_FAKE_RANK0:
 * then rank 1 alone) and the hostile peers; waits for the genuine ranks (a
 * bound: their timeout and 20 s more), then for the hostile peers that end
 * by themselves (3 s), then kills the rest. Fails on any genuine rank's
 * failure, a hang, or a hostile peer that found the id (or could not do its
 * part). */
static void run_hostile(Hostile *h) {
    assert_int_equal(pipe(h->ready), 0);
    const int fake0 = h->nhostile > 0 && h->kind[0] == H_FAKE_RANK0;
    const int first = fake0 ? 1 : 0;
    pid_t pids[16];
    int status[16], n = 0;
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < h->nhostile; i++, n++) {
        pids[n] = fork();
        assert_true(pids[n] >= 0);
        if (pids[n] == 0) hostile_peer(h, i);
    }
    for (int rank = first; rank < h->nranks; rank++, n++) {
        if (h->skip_rank && rank == h->skip_rank) {
            n--;
            continue;
        }
        pids[n] = fork();
        assert_true(pids[n] >= 0);
        if (pids[n] == 0) {
            g_rank = rank;
            child_genuine(rank, h);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++) status[i] = -1;
    const double t0 = now_ms();
    int hung = 0;
    for (;;) {
        int left_genuine = 0, left_hostile_ending = 0;
        for (int i = 0; i < n; i++) {
            int st = 0;
            if (status[i] < 0 && waitpid(pids[i], &st, WNOHANG) == pids[i])
                status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (status[i] >= 0) continue;
            if (i >= h->nhostile) left_genuine++;
            else if (h->kind[i] != H_IDLE && h->kind[i] != H_FLOOD && h->kind[i] != H_FLOOD_PAST_CAP &&
                     h->kind[i] != H_SLOWLORIS && h->kind[i] != H_FLOOD_RECONNECT &&
                     !(h->kind[i] == H_FAKE_RANK0 && (!h->reply || h->endless)))
                left_hostile_ending++;
        }
        const double t = now_ms() - t0;
        if (left_genuine == 0 && (left_hostile_ending == 0 || t > h->timeout_ms + 23000)) break;
        if (t > h->timeout_ms + 20000 && left_genuine) {
            hung = 1;
            break;
        }
        sleep_ms(5);
    }
    for (int i = 0; i < n; i++)
        if (status[i] < 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    close(h->ready[0]);
    close(h->ready[1]);
    if (hung) fail_msg("a genuine rank did not finish within %d ms (a hang)", h->timeout_ms + 20000);
    for (int i = 0; i < h->nhostile; i++)
        if (status[i] > 0) fail_msg("hostile peer %d (kind %d) exited with %d (its message is above)", i, h->kind[i],
                                    status[i]);
    for (int i = h->nhostile; i < n; i++)
        if (status[i] != 0) fail_msg("rank %d exited with %d (its message is above)", i - h->nhostile + first,
                                     status[i]);
}

static Hostile hostile(int kind, int timeout_ms) {
    Hostile h;
    memset(&h, 0, sizeof h);
    h.port = free_port();
    h.nranks = 2;
    h.timeout_ms = timeout_ms;
    h.kind[0] = kind;
    h.nhostile = 1;
    return h;
}

/* A connection that says nothing is served beside the genuine rank
 * (rank 0 used to wait for its hello with the whole timeout). */
static void test_bootstrap_tcp_idle_peer(void **state) {
    (void)state;
    Hostile h = hostile(H_IDLE, 4000);
    run_hostile(&h);
    h = hostile(H_FLOOD, 4000);
    run_hostile(&h);
}

/* Hellos no rank sends are refused, each alone: rank 0 serves on (it used
 * to abort at "7 2"), none gets the id. */
static void test_bootstrap_tcp_garbage_hello(void **state) {
    (void)state;
    Hostile h = hostile(H_GARBAGE, 8000);
    run_hostile(&h);
}

/* A hello of a rank that is not one. Without a token rank 0 cannot tell:
 * the first to claim rank 1 gets the id. The genuine rank 1, coming second
 * while rank 0 still waits for others (world 3, rank 2 never comes), is
 * refused at once with the reason, and rank 0 times out naming it; where
 * the impostor was the last rank awaited (world 2), rank 0 has closed its
 * port and gone to the join (where it times out), and the genuine rank 1
 * times out connecting, told why that may be. With the token the impostor
 * is refused and the ranks join. */
static void test_bootstrap_tcp_impersonating_hello(void **state) {
    (void)state;
    Hostile h = hostile(H_IMPERSONATE, 3000);
    h.nranks = 3;
    h.want[0] = CW_ERROR_TIMEOUT;
    h.detail[0] = "1 of the 2 other ranks came within 3000 ms; 1 connection(s) refused, the last: rank 1 has already "
                  "joined";
    h.want[1] = CW_ERROR_INVALID_ARGUMENT;
    h.detail[1] = "refused rank 1: rank 1 has already joined";
    h.skip_rank = 2;
    run_hostile(&h);
    h = hostile(H_IMPERSONATE, 3000);
    h.want[0] = CW_ERROR_TIMEOUT;
    h.detail[0] = "not every rank joined";
    h.want[1] = CW_ERROR_TIMEOUT;
    h.detail[1] = "answered every rank and closed it";
    run_hostile(&h);
    h = hostile(H_IMPERSONATE, 8000);
    h.token = "sesame";
    run_hostile(&h);
}

/* A hello dribbled a byte at a time, never ended: served beside the rest. */
static void test_bootstrap_tcp_slowloris(void **state) {
    (void)state;
    Hostile h = hostile(H_SLOWLORIS, 4000);
    run_hostile(&h);
}

/* Peers that go away mid-hello: none counts as a rank (rank 0 used to take
 * "1 2" without its newline for rank 1). */
static void test_bootstrap_tcp_disconnect_mid_message(void **state) {
    (void)state;
    Hostile h = hostile(H_HALF, 8000);
    run_hostile(&h);
}

/* Every hostile kind at once, three genuine ranks, with a token. */
static void test_bootstrap_tcp_all_hostile(void **state) {
    (void)state;
    Hostile h = hostile(H_IDLE, 10000);
    h.nranks = 3;
    h.token = "sesame";
    h.kind[1] = H_SLOWLORIS;
    h.kind[2] = H_GARBAGE;
    h.kind[3] = H_IMPERSONATE;
    h.nhostile = 4;
    run_hostile(&h);
}

/* A rank 0 that is not one: what it sends is read within its bounds (the
 * magic line and 302 digits read past the buffer), and the genuine rank
 * gets a clean error within its timeout. */
static void test_bootstrap_tcp_hostile_rank0(void **state) {
    (void)state;
    static char digits[400];
    snprintf(digits, sizeof digits, "cuweave-comm-id 1\n");
    memset(digits + 18, '9', 302);
    const struct {
        const char *reply;
        int endless;
        cw_status want;
        const char *detail;
    } cases[] = {
        {digits, 0, CW_ERROR_INVALID_ARGUMENT, "world size line"},
        {"cuweave-comm-id 1\n2\n00ff", 0, CW_ERROR_INVALID_ARGUMENT, "cut short"},
        {"cuweave-comm-id 1\n99999999999999999999\n", 0, CW_ERROR_INVALID_ARGUMENT, "world size line"},
        {"HTTP/1.1 400 Bad Request\r\n\r\n", 0, CW_ERROR_INVALID_ARGUMENT, "does not hold a cuweave"},
        {"", 1, CW_ERROR_INVALID_ARGUMENT, "does not hold a cuweave"}, /* endless */
        {NULL, 0, CW_ERROR_TIMEOUT, "rank 1 reading the id"},         /* silent */
        /* closes without a word (as a busy rank 0 does): the rank connects again, and times out saying so */
        {"", 0, CW_ERROR_TIMEOUT, "closed the connection without a reply"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Hostile h = hostile(H_FAKE_RANK0, 1500);
        h.reply = cases[i].reply;
        h.reply_n = cases[i].reply ? strlen(cases[i].reply) : 0;
        h.endless = cases[i].endless;
        h.want[1] = cases[i].want;
        h.detail[1] = cases[i].detail;
        run_hostile(&h);
    }
}

/* The token through the settings (which win over CUWEAVE_COMM_TOKEN):
 * ranks with the same one join; a rank without it is refused, told why;
 * a token that is not one is refused before anything is sent, and the
 * detail names where it came from, never its bytes. */
static void child_token(int rank, void *arg) {
    const int *ports = arg;
    alarm(60);
    setenv("CUWEAVE_COMM_TOKEN", "not-this-one", 1);
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    CK(s.token == NULL);
    s.rank = rank;
    s.world_size = 2;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ports[0]);
    s.addr = addr;
    s.timeout_ms = 10000;
    s.token = "k3y!-~{}";
    cw_comm *comm = NULL;
    CK_OK(cw_comm_bootstrap(&comm, r.ctx, &s));
    exercise(comm, &r, rank, 2);
    cw_comm_destroy(&comm);
    /* rank 0 with a token, rank 1 without (the environment's emptied) */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ports[1]);
    s.timeout_ms = 1500;
    s.token = rank == 0 ? "k3y" : NULL;
    setenv("CUWEAVE_COMM_TOKEN", "", 1);
    CK_ST(rank == 0 ? CW_ERROR_TIMEOUT : CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL(rank == 0 ? "the last: no token: rank 0 requires one" : "refused rank 1: no token: rank 0 requires one");
    if (rank == 1) {
        static char longer[300];
        memset(longer, 'a', sizeof longer - 1);
        const char *bad[] = {"has space", "tab\there", longer, "caf\xc3\xa9"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            s.token = bad[i];
            CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
            CK_DETAIL("the token (settings.token)");
            CK(!strstr(cw_last_error()->message, i == 2 ? "aaaa" : bad[i]));
        }
        s.token = NULL;
        setenv("CUWEAVE_COMM_TOKEN", "two words", 1);
        CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
        CK_DETAIL("the token (CUWEAVE_COMM_TOKEN)");
        CK(!strstr(cw_last_error()->message, "two words"));
    }
    CK(comm == NULL);
    rank_close(&r);
}

static void test_bootstrap_tcp_token(void **state) {
    (void)state;
    int ports[2] = {free_port(), free_port()};
    int status[2];
    run_ranks(2, child_token, ports, status, 30000);
    expect_all_zero(2, status);
}

/* More connections that say nothing than rank 0 holds at once (64): the
 * oldest make room for the ones after them, and the genuine rank is served
 * as it is accepted. */
static void test_bootstrap_tcp_flood_past_the_cap(void **state) {
    (void)state;
    Hostile h = hostile(H_FLOOD_PAST_CAP, 15000);
    run_hostile(&h);
}

/* A flood that does not let up: 300 connections that say nothing, each
 * made again as soon as rank 0 closes it (more than rank 0 serves at once
 * and its listen backlog together). Rank 0 used to stop accepting at 64
 * and drop each silent one only at its 5 s deadline: the backlog stayed
 * full of the flood's connections, the genuine rank's SYN was dropped
 * again and again, and it timed out connecting ("rank 0 did not listen").
 * Now rank 0 always accepts: the genuine rank's hello is read as it is
 * accepted, and a silent connection holds a place only while no one else
 * needs it. */
static void test_bootstrap_tcp_flood_reconnecting(void **state) {
    (void)state;
    Hostile h = hostile(H_FLOOD_RECONNECT, 10000);
    run_hostile(&h);
}

/* Rank 0 out of descriptors: it can hold a few connections only (its
 * limit), and 32 that say nothing are waiting. It used to stop accepting
 * (EMFILE) until the silent ones it held reached their 5 s deadline, so a
 * genuine rank with a timeout under 5 s timed out behind them; now a silent
 * connection gives its descriptor up to the next one waiting. */
static void test_bootstrap_tcp_flood_out_of_descriptors(void **state) {
    (void)state;
    Hostile h = hostile(H_FLOOD, 4000);
    h.rank0_fds = 12;
    run_hostile(&h);
}

/* Rank 0 binds the address given, not every address of the host: while it
 * listens on 127.0.0.1:P, 127.0.0.2:P is refused (loopback holds both). */
static void child_bind_check(int rank, void *arg) {
    int port = *(int *)arg;
    alarm(60);
    if (rank == 1) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = -1;
        for (int i = 0; i < 2000; i++) { /* until rank 0 listens */
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
            close(fd);
            fd = -1;
            sleep_ms(5);
        }
        CK(fd >= 0);
        close(fd); /* says nothing: rank 0 listens on */
        a.sin_addr.s_addr = htonl(0x7f000002u);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CK(connect(fd, (struct sockaddr *)&a, sizeof a) != 0);
        close(fd);
    }
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = rank;
    s.world_size = 2;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    s.addr = addr;
    s.timeout_ms = 10000;
    cw_comm *comm = NULL;
    CK_OK(cw_comm_bootstrap(&comm, r.ctx, &s));
    exercise(comm, &r, rank, 2);
    cw_comm_destroy(&comm);
    rank_close(&r);
}

static void test_bootstrap_tcp_binds_address_given(void **state) {
    (void)state;
    int port = free_port();
    int status[2];
    run_ranks(2, child_bind_check, &port, status, 30000);
    expect_all_zero(2, status);
}

/* A name server that does not answer, for the names under ".slow-dns.test":
 * the library's getaddrinfo is this one (the test links libcuweave.a). It
 * holds the caller 20 s, then fails as glibc does once its timeouts and
 * attempts are spent (5 s twice for each address family by default), and
 * never asks a real name server. Other names, and a lookup of a number only
 * (AI_NUMERICHOST: no name server asked), go to the C library's. */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    if (node && strstr(node, ".slow-dns.test") && !(hints && (hints->ai_flags & AI_NUMERICHOST))) {
        sleep_ms(20000);
        return EAI_AGAIN;
    }
    int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **) =
        (int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **))dlsym(RTLD_NEXT,
                                                                                                 "getaddrinfo");
    return real ? real(node, service, hints, res) : EAI_FAIL;
}

/* Rank 0's address by a name whose name server never answers: the call
 * ends at its timeout, CW_ERROR_TIMEOUT (rank 0 and rank 1 alike). It used
 * to wait for getaddrinfo (no timeout of its own) past the timeout: here
 * 20 s, then CW_ERROR_INVALID_ARGUMENT "does not resolve: Temporary
 * failure in name resolution". */
static void child_name_server_silent(int rank, void *arg) {
    (void)arg;
    alarm(60);
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.world_size = 2;
    s.addr = "rank0.slow-dns.test:29500";
    s.timeout_ms = 500;
    cw_comm *comm = NULL;
    for (int who = 0; who < 2; who++) {
        s.rank = who;
        double t0 = now_ms();
        cw_status st = cw_comm_bootstrap(&comm, r.ctx, &s);
        double spent = now_ms() - t0;
        CK_ST(CW_ERROR_TIMEOUT, st);
        CK_DETAIL("rank0.slow-dns.test did not resolve within 500 ms");
        CK(spent < 10000); /* a bound for the test only: the call ends at its timeout */
    }
    /* An address by number needs no lookup, and a name of /etc/hosts
     * resolves as before: rank 0 listens, a rank that nobody answers
     * times out waiting. */
    s.rank = 0;
    s.addr = "localhost:1";
    s.timeout_ms = 200;
    cw_status st = cw_comm_bootstrap(&comm, r.ctx, &s);
    CK(st == CW_ERROR_TIMEOUT || st == CW_ERROR_DRIVER); /* port 1: bind is refused to a non-root user */
    CK(comm == NULL);
    rank_close(&r);
}

static void test_bootstrap_tcp_name_server_silent(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_name_server_silent, NULL, status, 60000);
    expect_all_zero(1, status);
}

/* ---- the file bootstrap: what sits at the path ---------------------------- */

/* A FIFO at the path: rank 1 refuses it within its timeout (it used to
 * block in open past any timeout). A symbolic link there is refused too,
 * and a file of another user. */
static void child_file_not_regular(int rank, void *arg) {
    (void)arg;
    alarm(60);
    Rank r;
    rank_open(&r, rank, 64);
    char path[512], target[512];
    snprintf(path, sizeof path, "%s/fifo-id", g_dir);
    CK(mkfifo(path, 0600) == 0);
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = 1;
    s.world_size = 2;
    s.file = path;
    s.timeout_ms = 1000;
    cw_comm *comm = NULL;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL("is not a regular file");
    /* a link to a good file */
    snprintf(target, sizeof target, "%s/real-id", g_dir);
    FILE *f = fopen(target, "w");
    CK(f && fputs("cuweave-comm-id 1\n2\n", f) >= 0 && fclose(f) == 0);
    snprintf(path, sizeof path, "%s/link-id", g_dir);
    CK(symlink(target, path) == 0);
    s.file = path;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL("is a symbolic link");
    /* another user's file (as root only) */
    if (geteuid() == 0) {
        CK(chown(target, 65534, 65534) == 0);
        s.file = target;
        CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
        CK_DETAIL("is owned by uid 65534");
    }
    CK(comm == NULL);
    rank_close(&r);
}

static void test_bootstrap_file_not_regular(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_file_not_regular, NULL, status, 8000);
    expect_all_zero(1, status);
}

/* Files that are not ids, read within their bounds: the magic line and 302
 * digits (strtol read past the buffer: valgrind's uninitialised value), a
 * world size past int, an id cut short, a byte that is not the newline after it. */
static void child_file_bounded(int rank, void *arg) {
    (void)arg;
    alarm(60);
    Rank r;
    rank_open(&r, rank, 64);
    static char digits[400], id[400];
    snprintf(digits, sizeof digits, "cuweave-comm-id 1\n");
    memset(digits + 18, '9', 302);
    snprintf(id, sizeof id, "cuweave-comm-id 1\n2\n");
    memset(id + 20, 'a', 256);
    const struct {
        const char *bytes;
        size_t n;
        const char *detail;
    } cases[] = {
        {digits, 320, "world size line"},
        {"cuweave-comm-id 1\n99999999999999999999\n", 39, "world size line"},
        {"cuweave-comm-id 1\n2\n00ff\n", 26, "is not 256 lowercase hexadecimal digits"},
        {id, 276, "cut short"},    /* no newline after the id */
        {id, 277, "does not end"}, /* a NUL byte there */
    };
    char path[512];
    snprintf(path, sizeof path, "%s/bad-id", g_dir);
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = 1;
    s.world_size = 2;
    s.file = path;
    s.timeout_ms = 1000;
    cw_comm *comm = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        CK(f && fwrite(cases[i].bytes, 1, cases[i].n, f) == cases[i].n && fclose(f) == 0);
        CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
        CK_DETAIL(cases[i].detail);
    }
    CK(comm == NULL);
    rank_close(&r);
}

static void test_bootstrap_file_bounded_read(void **state) {
    (void)state;
    int status[1];
    run_ranks(1, child_file_bounded, NULL, status, 20000);
    expect_all_zero(1, status);
}

/* Rank 0's temporary file: a link planted at the old predictable name
 * (<path>.tmp.<pid>) is not followed (the target keeps its bytes), and the
 * id file is the user's alone (mode 0600) as rank 1 finds it. */
static void child_file_private(int rank, void *arg) {
    const char *path = arg;
    alarm(60);
    char victim[512], planted[600];
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    if (rank == 0) {
        snprintf(planted, sizeof planted, "%s.tmp.%ld", path, (long)getpid());
        CK(symlink(victim, planted) == 0);
    } else {
        struct stat st;
        int i = 0;
        while (lstat(path, &st) != 0 && i++ < 4000) sleep_ms(5);
        if (!S_ISREG(st.st_mode)) {
            fprintf(stderr, "rank 1: the id file is not a regular file (mode %o%s)\n", (unsigned)st.st_mode,
                    S_ISLNK(st.st_mode) ? ": a symbolic link, the one planted, renamed" : "");
            _exit(10);
        }
        if ((st.st_mode & 0777) != 0600) {
            fprintf(stderr, "rank 1: the id file has mode %o, not 600\n", (unsigned)(st.st_mode & 0777));
            _exit(10);
        }
    }
    Rank r;
    rank_open(&r, rank, kN * sizeof(int32_t));
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = rank;
    s.world_size = 2;
    s.file = path;
    s.timeout_ms = 10000;
    cw_comm *comm = NULL;
    cw_status st = cw_comm_bootstrap(&comm, r.ctx, &s);
    if (rank == 0) {
        char buf[64] = "";
        FILE *f = fopen(victim, "r");
        CK(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        if (strcmp(buf, "untouched\n") != 0) {
            fprintf(stderr, "rank 0: the link's target now holds \"%.40s\"\n", buf);
            _exit(10);
        }
        struct stat ls;
        CK(lstat(planted, &ls) == 0 && S_ISLNK(ls.st_mode)); /* the link itself is left alone */
    }
    CK_OK(st);
    exercise(comm, &r, rank, 2);
    cw_comm_destroy(&comm);
    rank_close(&r);
}

static void test_bootstrap_file_private(void **state) {
    (void)state;
    char path[512], victim[512];
    snprintf(path, sizeof path, "%s/comm-id", g_dir);
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    FILE *f = fopen(victim, "w");
    assert_true(f && fputs("untouched\n", f) >= 0 && fclose(f) == 0);
    int status[2];
    run_ranks(2, child_file_private, path, status, 30000);
    expect_all_zero(2, status);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (libfakenccl.so beside it)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(g_fake_nccl, sizeof g_fake_nccl, "%s/libfakenccl.so", dirname(tmp));
    snprintf(tmp, sizeof tmp, "%s", argv[1]);
    snprintf(g_fake_nccl_old, sizeof g_fake_nccl_old, "%s/libfakenccl_old.so", dirname(tmp));
    setenv("CUWEAVE_LIBNCCL", g_fake_nccl, 1);
    if (access(g_fake_nccl, R_OK) != 0 || access(g_fake_nccl_old, R_OK) != 0) {
        printf("FAIL: %s or %s is missing\n", g_fake_nccl, g_fake_nccl_old);
        return 1;
    }
    cwt_filter_from_env(); /* CWT_FILTER=test_name runs one */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_rank, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_two_ranks, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_four_ranks, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_nccl_missing, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_nccl_without_nonblocking_init, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_mismatched_nranks, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_rank_taken_twice, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_rank_never_arrives, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_rank_dies, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_peer_done_first, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_file, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_world_disagrees, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_bad_environment, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_idle_peer, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_garbage_hello, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_impersonating_hello, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_slowloris, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_disconnect_mid_message, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_all_hostile, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_hostile_rank0, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_token, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_flood_past_the_cap, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_flood_reconnecting, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_flood_out_of_descriptors, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_binds_address_given, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_tcp_name_server_silent, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_file_not_regular, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_file_bounded_read, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bootstrap_file_private, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
