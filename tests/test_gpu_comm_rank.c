/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Communicators by rank on two GPUs, one process per GPU: the test starts
 * its ranks itself (this binary again, "--rank R MODE", through
 * posix_spawn of /proc/self/exe, so that no rank inherits a CUDA state),
 * each on its own GPU, joined by cw_comm_bootstrap (through a file, and
 * through TCP on loopback) or by an id passed on the command line
 * (cw_comm_create_rank). Each rank runs all-reduce and broadcast (the
 * _rank and array forms, and a group) on 4 Mi elements and checks every
 * element; the parent checks that both ranks exited 0, within a bound.
 *
 * Exits 77 (skip) with fewer than two GPUs or without NCCL (the path in
 * CUWEAVE_LIBNCCL, else libnccl.so.2). NCCL_NVLS_ENABLE=0 is set before
 * anything, and the ranks inherit it. The CPU version of these checks, with
 * the fakes: test_comm_rank_cpu.
 *
 * Run: CUWEAVE_LIBNCCL=/path/libnccl.so.2 NCCL_NVLS_ENABLE=0 ./test_gpu_comm_rank
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwtest.h"

extern char **environ;

enum { kN = 4 << 20, kRanks = 2 };

/* ---- a rank (a child process) ------------------------------------------- */

static int g_rank = -1;

#define CK(expr)                                                                                              \
    do {                                                                                                      \
        if (!(expr)) {                                                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s is false (detail: %s)\n", g_rank, __FILE__, __LINE__, #expr,  \
                    cw_last_error()->message);                                                                \
            exit(10);                                                                                         \
        }                                                                                                     \
    } while (0)
#define CK_OK(expr)                                                                                           \
    do {                                                                                                      \
        cw_status ck_s_ = (expr);                                                                             \
        if (ck_s_ != CW_SUCCESS) {                                                                            \
            fprintf(stderr, "rank %d: %s:%d: %s returned %s (detail: %s)\n", g_rank, __FILE__, __LINE__, #expr, \
                    cw_status_name(ck_s_), cw_last_error()->message);                                         \
            exit(10);                                                                                         \
        }                                                                                                     \
    } while (0)

static int32_t value(int rank, size_t i) { return (int32_t)((i % 100003) * (size_t)(rank + 1) + (size_t)rank); }

/* Every element of v against want(i); the first wrong one is printed. */
#define CHECK_ALL(v, n, want_expr, what)                                                                       \
    do {                                                                                                      \
        size_t wrong_ = 0, first_ = 0;                                                                        \
        for (size_t i = 0; i < (n); i++)                                                                      \
            if ((v)[i] != (want_expr)) {                                                                      \
                if (!wrong_) first_ = i;                                                                      \
                wrong_++;                                                                                     \
            }                                                                                                 \
        if (wrong_) {                                                                                         \
            size_t i = first_;                                                                                \
            fprintf(stderr, "rank %d: %s: %zu of %zu elements wrong; first at %zu: %d, want %d\n", g_rank,     \
                    what, wrong_, (size_t)(n), i, (int)(v)[i], (int)(want_expr));                              \
            exit(11);                                                                                         \
        }                                                                                                     \
        printf("rank %d: %s: %zu of %zu elements right\n", g_rank, what, (size_t)(n), (size_t)(n));          \
    } while (0)

static int rank_main(int rank, const char *mode, const char *arg) {
    g_rank = rank;
    CK_OK(cw_init());
    cw_context *ctx = NULL;
    CK_OK(cw_context_create(&ctx, rank));
    cw_comm *comm = NULL;
    if (!strcmp(mode, "id")) {
        cw_comm_id id;
        CK(strlen(arg) == 2 * sizeof id.bytes);
        for (size_t i = 0; i < sizeof id.bytes; i++) {
            unsigned v = 0;
            CK(sscanf(arg + 2 * i, "%2x", &v) == 1);
            id.bytes[i] = (uint8_t)v;
        }
        CK_OK(cw_comm_create_rank(&comm, ctx, &id, kRanks, rank, 120000));
    } else {
        cw_comm_bootstrap_settings s;
        cw_comm_bootstrap_settings_default(&s);
        s.rank = rank;
        s.world_size = kRanks;
        if (!strcmp(mode, "file"))
            s.file = arg;
        else
            s.addr = arg;
        s.timeout_ms = 120000;
        CK_OK(cw_comm_bootstrap(&comm, ctx, &s));
    }
    cw_comm_info ci;
    CK_OK(cw_comm_get_info(comm, &ci));
    CK(ci.size == kRanks && ci.local_size == 1 && ci.first_rank == rank && ci.contexts[0] == ctx);

    cw_stream *s = NULL;
    CK_OK(cw_stream_create(&s, ctx, NULL));
    cw_buffer *bs = NULL, *br = NULL;
    CK_OK(cw_buffer_create(&bs, s, kN * sizeof(int32_t)));
    CK_OK(cw_buffer_create(&br, s, kN * sizeof(int32_t)));
    cw_devptr send = 0, recv = 0;
    CK_OK(cw_buffer_get_ptr(bs, &send));
    CK_OK(cw_buffer_get_ptr(br, &recv));
    int32_t *in = malloc(kN * sizeof *in), *out = malloc(kN * sizeof *out);
    float *fin = malloc(kN * sizeof *fin), *fout = malloc(kN * sizeof *fout);
    CK(in && out && fin && fout);
    for (size_t i = 0; i < kN; i++) in[i] = value(rank, i);
    CK_OK(cw_copy_to_device(s, send, in, kN * sizeof *in));

    /* _rank form, int32 sum. */
    CK_OK(cw_comm_all_reduce_rank(comm, rank, send, recv, kN, CW_INT32, CW_SUM, s));
    CK_OK(cw_copy_to_host(s, out, recv, kN * sizeof *out));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(out, kN, value(0, i) + value(1, i), "all_reduce_rank int32 sum");
    /* Array form (one entry), int32 max. */
    CK_OK(cw_comm_all_reduce(comm, &send, &recv, kN, CW_INT32, CW_MAX, &s));
    CK_OK(cw_copy_to_host(s, out, recv, kN * sizeof *out));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(out, kN, value(1, i), "all_reduce int32 max");
    /* Float32 sum of exactly representable values, in place. */
    for (size_t i = 0; i < kN; i++) fin[i] = (float)((i % 4096) * (size_t)(rank + 1)) + 0.5f;
    CK_OK(cw_copy_to_device(s, recv, fin, kN * sizeof *fin));
    CK_OK(cw_comm_all_reduce_rank(comm, rank, recv, recv, kN, CW_FLOAT32, CW_SUM, s));
    CK_OK(cw_copy_to_host(s, fout, recv, kN * sizeof *fout));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(fout, kN, (float)((i % 4096) * 3) + 1.0f, "all_reduce_rank float32 sum in place");
    /* Broadcast from rank 1, array form; only rank 1's send is read. */
    cw_devptr bsend = rank == 1 ? send : 0;
    CK_OK(cw_comm_broadcast(comm, &bsend, &recv, kN, CW_INT32, 1, &s));
    CK_OK(cw_copy_to_host(s, out, recv, kN * sizeof *out));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(out, kN, value(1, i), "broadcast from rank 1");
    /* A group: broadcast from rank 0 and an in-place min. */
    CK_OK(cw_comm_group_begin());
    CK_OK(cw_comm_broadcast_rank(comm, rank, rank == 0 ? send : 0, recv, kN, CW_INT32, 0, s));
    CK_OK(cw_comm_all_reduce_rank(comm, rank, send, send, kN, CW_INT32, CW_MIN, s));
    CK_OK(cw_comm_group_end());
    CK_OK(cw_copy_to_host(s, out, recv, kN * sizeof *out));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(out, kN, value(0, i), "group: broadcast from rank 0");
    CK_OK(cw_copy_to_host(s, out, send, kN * sizeof *out));
    CK_OK(cw_stream_synchronize(s));
    CHECK_ALL(out, kN, value(0, i), "group: in-place min");

    free(in);
    free(out);
    free(fin);
    free(fout);
    cw_buffer_destroy(&bs);
    cw_buffer_destroy(&br);
    cw_stream_destroy(&s);
    cw_comm_destroy(&comm);
    cw_context_destroy(&ctx);
    return 0;
}

/* ---- the parent ------------------------------------------------------------ */

static char g_tmp[256];

/* Starts both ranks (this binary, "--rank R MODE ARG"), waits up to 240 s;
 * asserts both exit 0. */
static void run_two(const char *mode, const char *arg) {
    pid_t pid[kRanks];
    fflush(stdout);
    for (int r = 0; r < kRanks; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        char *argv[] = {"test_gpu_comm_rank", "--rank", rs, (char *)mode, (char *)arg, NULL};
        assert_int_equal(posix_spawn(&pid[r], "/proc/self/exe", NULL, NULL, argv, environ), 0);
    }
    int status[kRanks] = {-1, -1}, left = kRanks;
    double t0 = now_ms();
    while (left > 0) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < kRanks; r++)
                if (pid[r] == p) {
                    status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    left--;
                }
            continue;
        }
        if (now_ms() - t0 > 240000) {
            for (int r = 0; r < kRanks; r++)
                if (status[r] < 0) kill(pid[r], SIGKILL);
            for (int r = 0; r < kRanks; r++)
                if (status[r] < 0) waitpid(pid[r], NULL, 0);
            fail_msg("the ranks did not finish within 240 s");
        }
        sleep_ms(10);
    }
    printf("%s: both ranks done in %.0f ms\n", mode, now_ms() - t0);
    for (int r = 0; r < kRanks; r++)
        if (status[r] != 0) fail_msg("rank %d exited with %d (its output is above)", r, status[r]);
}

static void test_bootstrap_file(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/comm-id", g_tmp);
    run_two("file", path);
}

static void test_bootstrap_tcp(void **state) {
    (void)state;
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
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    run_two("tcp", addr);
}

/* The id made here (the parent is no rank: with the real NCCL the id's
 * maker answers the ranks' first contact, and this process stays alive). */
static void test_create_rank_by_id(void **state) {
    (void)state;
    cw_comm_id id;
    assert_cw_ok(cw_comm_id_generate(&id));
    char hex[2 * sizeof id.bytes + 1];
    for (size_t i = 0; i < sizeof id.bytes; i++) snprintf(hex + 2 * i, 3, "%02x", id.bytes[i]);
    run_two("id", hex);
}

int main(int argc, char **argv) {
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* before NCCL is loaded, here and in the ranks */
    if (argc == 5 && !strcmp(argv[1], "--rank")) return rank_main(atoi(argv[2]), argv[3], argv[4]);
    cw_status st = cw_init();
    if (st != CW_SUCCESS) {
        printf("SKIP: no GPU: %s\n", cw_last_error()->message);
        return CWT_SKIP_EXIT;
    }
    int n = 0;
    if (cw_device_count(&n) != CW_SUCCESS || n < 2) {
        printf("SKIP: %d GPU(s): one process per GPU needs two\n", n);
        return CWT_SKIP_EXIT;
    }
    cw_versions v;
    if (cw_get_versions(&v) != CW_SUCCESS || v.nccl == 0) {
        printf("SKIP: no NCCL (CUWEAVE_LIBNCCL, libnccl.so.2)\n");
        return CWT_SKIP_EXIT;
    }
    if (v.nccl < 21400) {
        printf("SKIP: NCCL %d lacks the non-blocking init (2.14 needed)\n", v.nccl);
        return CWT_SKIP_EXIT;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/cwgpucommXXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    printf("NCCL %d, %d GPUs; ranks on GPUs 0 and 1\n", v.nccl, n);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bootstrap_file),
        cmocka_unit_test(test_bootstrap_tcp),
        cmocka_unit_test(test_create_rank_by_id),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(g_tmp);
    return rc;
}
