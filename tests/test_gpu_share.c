/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Buffers and events shared between two processes on one GPU, on the real
 * driver (CUDA IPC; exits 77 without a GPU). The test starts a copy of
 * itself (fork + exec of /proc/self/exe, "--child"), which imports the
 * buffer and the event and reads on request; the two talk through pipes.
 *  - values: 4 MiB written here (a fill of known bytes), read there, every
 *    byte checked; then written there, read back here, every byte checked;
 *  - ordering: a long writer kernel here (it spins 200 ms, then fills every
 *    byte), the event recorded after it; the reader's stream waits for the
 *    event and its copy sees every byte new; the control without the wait
 *    reads before the writer wrote (some bytes old: the race is real);
 *  - lifetime: this process destroys its buffer while the child holds it;
 *    the child still reads every byte; after the child closes, the next
 *    call here frees the memory (the device's free memory comes back).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwtest.h"
#include "kernels/test_kernels_fatbin.h"

enum { BYTES = 4 << 20 };
static const long long SLOW_NS = 200000000; /* 200 ms: far longer than the hand-over */

enum { M_READ = 1, M_RESULT, M_WRITE, M_WRITTEN, M_CLOSE, M_CLOSED, M_QUIT };
struct msg {
    int32_t cmd;
    int32_t wait;     /* M_READ: wait for the event first */
    uint32_t value;   /* the byte expected (M_READ) or to write (M_WRITE) */
    uint32_t pad;
    int64_t result;   /* M_RESULT: bytes that differ; -status on failure */
    cw_shared_handle hb, he;
};

static void send_msg(int fd, const struct msg *m) {
    if (write(fd, m, sizeof *m) != (ssize_t)sizeof *m) abort();
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

static cw_module *mod;
static cw_kernel *k_fill;

static cw_status fill(cw_stream *s, cw_devptr p, unsigned value, long long ns) {
    unsigned long long n = BYTES;
    void *args[] = {&p, &n, &value, &ns};
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    cfg.grid[0] = 256;
    cfg.block[0] = 256;
    return cw_kernel_launch(k_fill, s, &cfg, args);
}

static int load_kernels(void) {
    return cw_module_load_image(&mod, cw_test_kernels_fatbin) == CW_SUCCESS &&
           cw_module_get_kernel(mod, "cw_fill_u8_slow", &k_fill) == CW_SUCCESS;
}

/* ---- the child: imports, reads and writes on request ---- */

static int child(int in, int out) {
    cw_context *c = NULL;
    cw_stream *s = NULL;
    unsigned char *host = NULL;
    if (cw_init() || cw_context_create(&c, 0) || cw_stream_create(&s, c, NULL) || !load_kernels() ||
        cw_host_alloc((void **)&host, c, BYTES)) {
        fprintf(stderr, "child: setup: %s\n", cw_last_error()->message);
        return 2;
    }
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    struct msg m;
    while (recv_msg(in, &m) && m.cmd != M_QUIT) {
        struct msg r;
        memset(&r, 0, sizeof r);
        cw_status st = CW_SUCCESS;
        if (m.cmd == M_READ) {
            r.cmd = M_RESULT;
            if (!b) st = cw_buffer_import(&b, s, &m.hb);
            if (!st && !e) st = cw_shared_event_import(&e, c, &m.he);
            if (!st && m.wait) st = cw_shared_event_wait(e, s);
            cw_devptr p = 0;
            if (!st) st = cw_buffer_get_ptr(b, &p);
            if (!st) st = cw_copy_to_host(s, host, p, BYTES);
            if (!st) st = cw_buffer_use(b, s);
            if (!st) st = cw_stream_synchronize(s);
            if (st) {
                fprintf(stderr, "child: read: %s\n", cw_last_error()->message);
                r.result = -(int64_t)st;
            }
            for (size_t i = 0; i < BYTES && !st; i++) r.result += host[i] != (unsigned char)m.value;
        } else if (m.cmd == M_WRITE) {
            r.cmd = M_WRITTEN;
            cw_devptr p = 0;
            st = b ? cw_buffer_get_writable(b, &p) : CW_ERROR_INVALID_STATE;
            if (!st) st = fill(s, p, m.value, 0);
            if (!st) st = cw_buffer_use(b, s);
            if (!st) st = cw_stream_synchronize(s);
            r.result = st;
        } else if (m.cmd == M_CLOSE) {
            r.cmd = M_CLOSED;
            cw_buffer_destroy(&b);
            cw_shared_event_destroy(&e);
        }
        send_msg(out, &r);
    }
    cw_buffer_destroy(&b);
    cw_shared_event_destroy(&e);
    cw_host_free(c, (void **)&host);
    cw_module_destroy(&mod);
    cw_stream_destroy(&s);
    cw_context_destroy(&c);
    return 0;
}

/* ---- this process: the exporter and writer ---- */

static char g_self[4096];
static cw_context *ctx;
static cw_stream *s;

struct kid {
    pid_t pid;
    int to, from;
};

static struct kid spawn(void) {
    int a[2], b[2];
    struct kid k = {-1, -1, -1};
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char in[16], out[16];
        snprintf(in, sizeof in, "%d", a[0]);
        snprintf(out, sizeof out, "%d", b[1]);
        close(a[1]);
        close(b[0]);
        execl(g_self, g_self, "--child", in, out, (char *)NULL);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    k.pid = pid;
    k.to = a[1];
    k.from = b[0];
    return k;
}

static void ask(struct kid *k, struct msg *m, int want, struct msg *r) {
    send_msg(k->to, m);
    assert_true(recv_msg(k->from, r));
    assert_int_equal(r->cmd, want);
}

static void finish(struct kid *k) {
    struct msg q = {.cmd = M_QUIT};
    send_msg(k->to, &q);
    close(k->to);
    int status = 0;
    assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
    close(k->from);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_share_values_ordering_lifetime(void **state) {
    (void)state;
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_buffer_create_shareable(&b, s, BYTES));
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_writable(b, &p));
    assert_cw_ok(fill(s, p, 0x11, 0));
    assert_cw_ok(cw_buffer_use(b, s));
    assert_cw_ok(cw_stream_synchronize(s));
    struct kid k = spawn();
    struct msg m, r;
    memset(&m, 0, sizeof m);
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_cw_ok(cw_shared_event_export(e, &m.he));

    /* Values, this way: every byte the fill wrote. */
    m.cmd = M_READ;
    m.wait = 0;
    m.value = 0x11;
    ask(&k, &m, M_RESULT, &r);
    assert_int_equal(r.result, 0);

    /* The other way: the child writes, this process reads. */
    struct msg w = {.cmd = M_WRITE, .value = 0x22};
    ask(&k, &w, M_WRITTEN, &r);
    assert_int_equal(r.result, 0);
    unsigned char *host = NULL;
    assert_cw_ok(cw_host_alloc((void **)&host, ctx, BYTES));
    assert_cw_ok(cw_copy_to_host(s, host, p, BYTES));
    assert_cw_ok(cw_stream_synchronize(s));
    for (size_t i = 0; i < BYTES; i++)
        if (host[i] != 0x22) fail_msg("byte %zu: 0x%02x, the child wrote 0x22", i, host[i]);

    /* Ordering: a long writer, the event after it; the reader waits for it. */
    assert_cw_ok(fill(s, p, 0x33, SLOW_NS));
    assert_cw_ok(cw_shared_event_record(e, s));
    m.wait = 1;
    m.value = 0x33;
    ask(&k, &m, M_RESULT, &r); /* sent after the record returned */
    assert_int_equal(r.result, 0);
    assert_cw_ok(cw_stream_synchronize(s));

    /* The control: without the wait the reader reads before the writer. */
    if (!cwt_under_sanitizer()) {
        assert_cw_ok(fill(s, p, 0x44, SLOW_NS));
        assert_cw_ok(cw_shared_event_record(e, s));
        m.wait = 0;
        m.value = 0x44;
        ask(&k, &m, M_RESULT, &r);
        assert_true(r.result > 0); /* old bytes seen: the race is real */
        assert_cw_ok(cw_stream_synchronize(s));
    }

    /* Lifetime: destroyed here while the child holds it. */
    assert_cw_ok(fill(s, p, 0x55, 0));
    assert_cw_ok(cw_buffer_use(b, s));
    assert_cw_ok(cw_stream_synchronize(s));
    cw_shared_event_info info;
    assert_cw_ok(cw_shared_event_get_info(e, &info));
    assert_int_equal(info.importers, 1);
    cw_buffer_destroy(&b);
    m.wait = 0;
    m.value = 0x55;
    ask(&k, &m, M_RESULT, &r);
    assert_int_equal(r.result, 0); /* still there, intact */
    struct msg cl = {.cmd = M_CLOSE};
    ask(&k, &cl, M_CLOSED, &r);
    finish(&k);
    cw_shared_event_destroy(&e); /* no importer left: destroyed now, and the buffer freed */
    cw_host_free(ctx, (void **)&host);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return child(atoi(argv[2]), atoi(argv[3]));
    signal(SIGPIPE, SIG_IGN);
    if (!cwt_have_gpu()) return CWT_SKIP_EXIT;
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) {
        printf("FAIL: cannot read /proc/self/exe\n");
        return 1;
    }
    g_self[n] = 0;
    if (cw_context_create(&ctx, 0) || cw_stream_create(&s, ctx, NULL) || !load_kernels()) {
        printf("FAIL: setup: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_values_ordering_lifetime),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    cw_module_destroy(&mod);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return failed;
}
