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
 * disagreeing world sizes, and bad environment values.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
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

/* Rank 0 with world size 2, rank 1 with 3, through TCP: both refuse. */
static void child_boot_disagree(int rank, void *arg) {
    BootArg *ba = arg;
    Rank r;
    rank_open(&r, rank, 64);
    cw_comm_bootstrap_settings s;
    cw_comm_bootstrap_settings_default(&s);
    s.rank = rank;
    s.world_size = rank == 0 ? 2 : 3;
    s.addr = ba->value;
    s.timeout_ms = 10000;
    cw_comm *comm = NULL;
    CK_ST(CW_ERROR_INVALID_ARGUMENT, cw_comm_bootstrap(&comm, r.ctx, &s));
    CK_DETAIL(rank == 0 ? "rank 1 has world size 3, rank 0 2" : "closed the connection without an id");
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
