/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_share: a frame handed from a producer process to a consumer process
 * through a shared buffer and a shared event (include/cuweave/share.h),
 * against the same hand-over inside one process (two streams, cw_stream_wait).
 * One GPU (device 0); exits 77 without one.
 *
 * Frames: 1920x1080 and 3840x2160, 8 bits a pixel (one plane), each in a
 * buffer made by cw_buffer_create_shareable (the in-process side uses the
 * same kind of buffer, so memory is not the difference).
 *
 * One hand-over, timed with CLOCK_MONOTONIC (one clock for both processes):
 *   the producer fills the frame with frame n's value (the built-in
 *   CW_BUILTIN_FILL_U32 kernel, every word) on its stream, then
 *     in one process:  cw_stream_wait(consumer, producer);
 *     across:          cw_shared_event_record(e, producer), then a message
 *                      "frame n" over a pipe; the consumer process reads it,
 *                      cw_shared_event_wait(e', consumer);
 *   the consumer copies the frame's first and last words to pinned host
 *   memory on its stream and synchronises it; both words must be frame n's
 *   value (checked every frame; a wrong one fails the run). The time runs
 *   from before the fill is enqueued to the consumer's synchronise
 *   returning. Across processes the consumer then acknowledges (a second
 *   message), and the producer starts frame n+1 only after that (the frame
 *   is not overwritten while read), outside the timing; the in-process side
 *   synchronises its consumer the same way.
 *
 * BENCH_ITERS (default 2000) hand-overs per frame size and side after 100
 * warm-ups; microseconds p50 / p99, and the ratio across / one process.
 * Printed as a Markdown table.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/rawcuda.h"
#define BENCH_NAME "bench_share"
#include "bench_common.h"

enum { WARMUP = 100 };

struct msg {
    int32_t cmd; /* 1: set up (handles), 2: frame, 3: quit */
    uint32_t value;
    uint64_t bytes;
    unsigned long long t_end; /* reply: when the consumer's synchronise returned */
    int32_t ok;
    int32_t pad;
    cw_shared_handle hb, he;
};

static void send_msg(int fd, const struct msg *m) {
    if (write(fd, m, sizeof *m) != (ssize_t)sizeof *m) {
        fprintf(stderr, "%s: pipe write failed\n", BENCH_NAME);
        exit(1);
    }
}
static int recv_msg(int fd, struct msg *m) {
    size_t got = 0;
    while (got < sizeof *m) {
        ssize_t n = read(fd, (char *)m + got, sizeof *m - got);
        if (n <= 0) return 0;
        got += (size_t)n;
    }
    return 1;
}

static cw_kernel *k_fill;

static void fill(cw_stream *s, cw_devptr p, uint32_t value, uint64_t bytes) {
    uint64_t count = bytes / 4;
    void *args[] = {&p, &value, &count};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = 1024;
    cfg.block[0] = 256;
    CW_CHECK(cw_kernel_launch(k_fill, s, &cfg, args));
}

/* The consumer's read: the first and last words, then synchronise. */
static int consume(cw_stream *s, cw_devptr p, uint64_t bytes, uint32_t *words, uint32_t value) {
    CW_CHECK(cw_copy_to_host(s, &words[0], p, 4));
    CW_CHECK(cw_copy_to_host(s, &words[1], p + bytes - 4, 4));
    CW_CHECK(cw_stream_synchronize(s));
    return words[0] == value && words[1] == value;
}

/* ---- the consumer process ---- */

static int consumer(int in, int out) {
    CW_CHECK(cw_init());
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    uint32_t *words = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    CW_CHECK(cw_stream_create(&s, ctx, NULL));
    CW_CHECK(cw_host_alloc((void **)&words, ctx, 64));
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    cw_devptr p = 0;
    uint64_t bytes = 0;
    struct msg m;
    while (recv_msg(in, &m) && m.cmd != 3) {
        struct msg r;
        memset(&r, 0, sizeof r);
        if (m.cmd == 1) {
            cw_buffer_destroy(&b);
            cw_shared_event_destroy(&e);
            CW_CHECK(cw_buffer_import(&b, s, &m.hb));
            CW_CHECK(cw_shared_event_import(&e, ctx, &m.he));
            CW_CHECK(cw_buffer_get_ptr(b, &p));
            bytes = m.bytes;
            r.ok = 1;
        } else {
            CW_CHECK(cw_shared_event_wait(e, s));
            r.ok = consume(s, p, bytes, words, m.value);
            r.t_end = now_ns();
        }
        send_msg(out, &r);
    }
    CW_CHECK(cw_buffer_use(b, s));
    cw_buffer_destroy(&b);
    cw_shared_event_destroy(&e);
    cw_host_free(ctx, (void **)&words);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return 0;
}

/* ---- the producer ---- */

int main(int argc, char **argv) {
    (void)pass;
    if (argc == 4 && !strcmp(argv[1], "--consumer")) return consumer(atoi(argv[2]), atoi(argv[3]));
    signal(SIGPIPE, SIG_IGN);
    rawcuda raw;
    cw_device_info dinfo;
    int drv = 0;
    char commit[64], date[32];
    int rc = bench_setup(&raw, &dinfo, &drv, commit, sizeof commit, date, sizeof date);
    if (rc) return rc;
    const char *env = getenv("BENCH_ITERS");
    int iters = env && atoi(env) > 0 ? atoi(env) : 2000;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: cannot read /proc/self/exe\n", BENCH_NAME);
        return 1;
    }
    self[n] = 0;

    cw_context *ctx = NULL;
    cw_stream *prod = NULL, *cons = NULL;
    uint32_t *words = NULL;
    CW_CHECK(cw_context_create(&ctx, 0));
    CW_CHECK(cw_stream_create(&prod, ctx, NULL));
    CW_CHECK(cw_stream_create(&cons, ctx, NULL));
    CW_CHECK(cw_host_alloc((void **)&words, ctx, 64));
    CW_CHECK(cw_builtin_get_kernel(CW_BUILTIN_FILL_U32, &k_fill));

    int to[2], from[2];
    if (pipe(to) || pipe(from)) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", to[0]);
        snprintf(b, sizeof b, "%d", from[1]);
        close(to[1]);
        close(from[0]);
        execl(self, self, "--consumer", a, b, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);

    static const struct {
        const char *name;
        uint64_t bytes;
    } sizes[] = {{"1920x1080 8-bit", 1920ull * 1080}, {"3840x2160 8-bit", 3840ull * 2160}};
    double *one = malloc(sizeof(double) * (size_t)iters), *two = malloc(sizeof(double) * (size_t)iters);
    if (!one || !two) return 1;

    printf("## bench_share: a frame handed between processes (%s, driver %d, commit %s, %s)\n\n", dinfo.name, drv,
           commit, date);
    printf("%d hand-overs per row after %d warm-ups; microseconds from the producer's fill enqueued to the "
           "consumer's synchronise returning (first and last words checked every frame).\n\n",
           iters, WARMUP);
    printf("| frame | one process p50 | p99 | two processes p50 | p99 | ratio p50 | ratio p99 |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    uint32_t value = 1;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        uint64_t bytes = sizes[z].bytes;
        cw_buffer *b = NULL;
        cw_shared_event *e = NULL;
        CW_CHECK(cw_buffer_create_shareable(&b, prod, bytes));
        CW_CHECK(cw_shared_event_create(&e, ctx));
        cw_devptr p = 0;
        CW_CHECK(cw_buffer_get_ptr(b, &p));
        struct msg m, r;
        memset(&m, 0, sizeof m);
        m.cmd = 1;
        m.bytes = bytes;
        CW_CHECK(cw_buffer_export(b, &m.hb));
        CW_CHECK(cw_shared_event_export(e, &m.he));
        send_msg(to[1], &m);
        if (!recv_msg(from[0], &r) || !r.ok) {
            fprintf(stderr, "%s: the consumer could not import\n", BENCH_NAME);
            return 1;
        }
        /* The two sides alternate frame by frame, so that both see the same drift. */
        for (int i = -WARMUP; i < iters; i++) {
            for (int side = 0; side < 2; side++) {
                value++;
                unsigned long long t0 = now_ns(), t1;
                fill(prod, p, value, bytes);
                if (side == 0) {
                    CW_CHECK(cw_stream_wait(cons, prod));
                    if (!consume(cons, p, bytes, words, value)) {
                        fprintf(stderr, "%s: one process: frame %u read %u / %u\n", BENCH_NAME, value, words[0],
                                words[1]);
                        return 1;
                    }
                    t1 = now_ns();
                } else {
                    CW_CHECK(cw_shared_event_record(e, prod));
                    struct msg f;
                    memset(&f, 0, sizeof f);
                    f.cmd = 2;
                    f.value = value;
                    send_msg(to[1], &f);
                    if (!recv_msg(from[0], &r) || !r.ok) {
                        fprintf(stderr, "%s: two processes: frame %u read wrong by the consumer\n", BENCH_NAME,
                                value);
                        return 1;
                    }
                    t1 = r.t_end;
                }
                if (i >= 0) (side == 0 ? one : two)[i] = (double)(t1 - t0) / 1e3;
            }
            CW_CHECK(cw_stream_synchronize(prod));
        }
        stats a = stats_of(one, (size_t)iters), c = stats_of(two, (size_t)iters);
        printf("| %s (%.1f MB) | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", sizes[z].name, (double)bytes / 1e6,
               a.p50, a.p99, c.p50, c.p99, c.p50 / a.p50, c.p99 / a.p99);
        fflush(stdout);
        CW_CHECK(cw_buffer_use(b, prod));
        CW_CHECK(cw_buffer_use(b, cons));
        cw_buffer_destroy(&b); /* kept until the consumer's next set-up closes its import */
        cw_shared_event_destroy(&e);
    }
    struct msg q;
    memset(&q, 0, sizeof q);
    q.cmd = 3;
    send_msg(to[1], &q);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("\nratio: two processes / one process (above 1: the hand-over across processes costs more).\n");
    free(one);
    free(two);
    cw_host_free(ctx, (void **)&words);
    cw_stream_destroy(&cons);
    cw_stream_destroy(&prod);
    cw_context_destroy(&ctx);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
