/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Buffers and events shared between processes (include/cuweave/share.h)
 * against the fake driver, across real processes: the test starts copies of
 * itself (fork + exec of /proc/self/exe, "--child ROLE") and talks to them
 * through two pipes. The fake maps cuMemAlloc's memory shared (a memfd the
 * importer maps through /proc/PID/fd) and keeps an interprocess event's
 * counters in a shared page, so what one process writes the other reads,
 * and a wait in one process holds its stream until a record of the other
 * completed.
 *
 *  - a buffer written in one process is read in the other, every value
 *    checked, and the other way round;
 *  - the event orders the reader after the writer: the writer's copy and
 *    record are held back (fake_cuda_hold) and the reader's stream finishes
 *    only after they were let go, with every value new; the control without
 *    the wait reads the old values (the race is real);
 *  - an event recorded before the import is waited for; one never recorded
 *    does not block;
 *  - the exporter's destroy while an importer holds the buffer keeps the
 *    memory (and the importer reads it intact); the importer's close then
 *    lets the exporter's next call free it; an importer that dies without
 *    closing counts as closed;
 *  - errors: a bad handle, an event's handle given as a buffer's, a pool
 *    buffer exported, a handle imported by its own process, an exporter
 *    that freed the buffer or died, a handle of another device.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwtest.h"
#include "testing/seam.h"

enum { N = 1 << 14 };

static long (*fake_live)(const char *kind);
static void (*fake_hold)(int on);
static long (*fake_pers_violations)(char *last, size_t cap);
static cw_context *ctx;
static cw_stream *s;

/* What the processes tell each other. */
enum { M_READ = 1, M_ENQUEUED, M_RESULT, M_CLOSE, M_CLOSED, M_EXPORT, M_HANDLE, M_QUIT, M_WRITE, M_WRITTEN, M_HOLD, M_HELD };
struct msg {
    int32_t cmd;
    int32_t wait;    /* M_READ: 1 to wait for the event first; M_EXPORT: the device */
    int32_t mode;    /* M_EXPORT: 0 keep, 1 free before sending, 2 die after sending */
    uint32_t seed;   /* the values expected (M_READ) or to write (M_WRITE) */
    double t;        /* M_RESULT: when the reader's stream finished */
    int64_t result;  /* M_RESULT: values that differ (or -status on failure) */
    cw_shared_handle hb, he;
};

static uint32_t value(uint32_t seed, uint32_t i) { return seed * 2654435761u + i * 7u + 1u; }

static void send_msg(int fd, const struct msg *m) {
    ssize_t n = write(fd, m, sizeof *m);
    if (n != (ssize_t)sizeof *m) abort();
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

/* ---- children ---- */

static int child_fail(const char *what) {
    fprintf(stderr, "child %d: %s: %s\n", (int)getpid(), what, cw_last_error()->message);
    return 2;
}

/* Imports what it is sent, reads (and writes) it on request. */
static int child_reader(int in, int out) {
    cw_context *c = NULL;
    cw_stream *cs = NULL;
    if (cw_context_create(&c, 0) || cw_stream_create(&cs, c, NULL)) return child_fail("context");
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    uint32_t *host = NULL;
    if (cw_host_alloc((void **)&host, c, N * 4)) return child_fail("host memory");
    struct msg m;
    while (recv_msg(in, &m)) {
        if (m.cmd == M_READ) {
            struct msg r = {.cmd = M_RESULT};
            cw_status st = CW_SUCCESS;
            if (!b) st = cw_buffer_import(&b, cs, &m.hb);
            if (!st && m.wait && !e) st = cw_shared_event_import(&e, c, &m.he);
            if (!st && m.wait) st = cw_shared_event_wait(e, cs);
            cw_devptr p = 0;
            if (!st) st = cw_buffer_get_ptr(b, &p);
            if (!st) st = cw_copy_to_host(cs, host, p, N * 4);
            if (!st) st = cw_buffer_use(b, cs);
            if (st) {
                r.result = -(int64_t)st;
                fprintf(stderr, "child reader: %s\n", cw_last_error()->message);
                send_msg(out, &r);
                continue;
            }
            struct msg q = {.cmd = M_ENQUEUED};
            send_msg(out, &q);
            while ((st = cw_stream_query(cs)) == CW_ERROR_NOT_READY) sleep_ms(1);
            r.t = now_ms();
            if (st) r.result = -(int64_t)st;
            for (uint32_t i = 0; i < N && !st; i++) r.result += host[i] != value(m.seed, i);
            send_msg(out, &r);
        } else if (m.cmd == M_WRITE) {
            struct msg r = {.cmd = M_WRITTEN};
            for (uint32_t i = 0; i < N; i++) host[i] = value(m.seed, i);
            cw_devptr p = 0;
            cw_status st = b ? cw_buffer_get_writable(b, &p) : CW_ERROR_INVALID_STATE;
            if (!st) st = cw_copy_to_device(cs, p, host, N * 4);
            if (!st) st = cw_stream_synchronize(cs);
            r.result = st;
            send_msg(out, &r);
        } else if (m.cmd == M_CLOSE) {
            cw_buffer_destroy(&b);
            cw_shared_event_destroy(&e);
            struct msg r = {.cmd = M_CLOSED};
            send_msg(out, &r);
        } else if (m.cmd == M_QUIT) {
            if (m.mode == 2) _exit(0); /* dies holding its imports */
            break;
        }
    }
    cw_buffer_destroy(&b);
    cw_shared_event_destroy(&e);
    cw_host_free(c, (void **)&host);
    cw_stream_destroy(&cs);
    cw_context_destroy(&c);
    return 0;
}

/* With FAKE_CUDA_NO_IPC=1 (a driver without the IPC entries): every call
 * that needs them says so. Exits 0 when each did. */
static int child_noipc(void) {
    cw_context *c = NULL;
    cw_stream *cs = NULL;
    if (cw_context_create(&c, 0) || cw_stream_create(&cs, c, NULL)) return child_fail("context");
    cw_buffer *b = NULL;
    cw_shared_event *e = NULL;
    cw_shared_handle h;
    memset(&h, 0, sizeof h);
    int bad = 0;
    bad += cw_buffer_create_shareable(&b, cs, 64) != CW_ERROR_NOT_SUPPORTED;
    bad += strstr(cw_last_error()->message, "IPC") == NULL;
    bad += cw_buffer_import(&b, cs, &h) != CW_ERROR_NOT_SUPPORTED;
    bad += cw_shared_event_create(&e, c) != CW_ERROR_NOT_SUPPORTED;
    bad += cw_shared_event_import(&e, c, &h) != CW_ERROR_NOT_SUPPORTED;
    bad += b != NULL || e != NULL;
    /* Pool buffers still work. */
    bad += cw_buffer_create(&b, cs, 64) != CW_SUCCESS;
    bad += cw_buffer_export(b, &h) != CW_ERROR_INVALID_STATE;
    cw_buffer_destroy(&b);
    cw_stream_destroy(&cs);
    cw_context_destroy(&c);
    return bad ? 3 : 0;
}

/* Imports every buffer it is sent (M_HOLD) and holds them until M_CLOSE. */
static int child_holder(int in, int out) {
    cw_context *c = NULL;
    cw_stream *cs = NULL;
    if (cw_context_create(&c, 0) || cw_stream_create(&cs, c, NULL)) return child_fail("context");
    cw_buffer *held[8] = {NULL};
    int n = 0;
    struct msg m;
    while (recv_msg(in, &m) && m.cmd != M_QUIT) {
        struct msg r = {.cmd = m.cmd == M_HOLD ? M_HELD : M_CLOSED};
        if (m.cmd == M_HOLD) {
            cw_status st = n < 8 ? cw_buffer_import(&held[n], cs, &m.hb) : CW_ERROR_OUT_OF_MEMORY;
            n += st == CW_SUCCESS;
            r.result = -(int64_t)st;
        } else if (m.cmd == M_CLOSE) {
            for (; n > 0; n--) cw_buffer_destroy(&held[n - 1]);
        }
        send_msg(out, &r);
    }
    for (; n > 0; n--) cw_buffer_destroy(&held[n - 1]);
    cw_stream_destroy(&cs);
    cw_context_destroy(&c);
    return 0;
}

/* The lock of the process's exports is held by another thread (a testing
 * hook keeps it inside, 30 s at most) when main returns: exit runs the
 * atexit handlers then. */
static atomic_int g_in_lock;
static void stay_in_lock(int point, void *arg) {
    (void)arg;
    if (point != CWI_SHARE_EXPORTS_LOCKED) return;
    atomic_store(&g_in_lock, 1);
    for (int i = 0; i < 30000; i++) sleep_ms(1);
}
static void *export_one(void *arg) {
    cw_buffer *b = NULL;
    (void)cw_buffer_create_shareable(&b, (cw_stream *)arg, 64);
    return NULL;
}
static int child_exit_locked(void) {
    /* Kept at exit (static: no leak report under ASan) */
    static cw_context *c = NULL;
    static cw_stream *cs = NULL;
    static cw_buffer *b = NULL;
    if (cw_context_create(&c, 0) || cw_stream_create(&cs, c, NULL) || cw_buffer_create_shareable(&b, cs, 64))
        return child_fail("exporter");
    cwi_share_hook(stay_in_lock, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, export_one, cs) != 0) return 2;
    while (!atomic_load(&g_in_lock)) sleep_ms(1);
    return 0;
}

/* Mode 5's hook: the exporter's destroy, having removed the name and
 * counted the holders, says so (M_HELD) and waits for M_WRITE before it
 * frees or keeps the buffer. */
struct pause_fds {
    int in, out;
};
static void pause_counted(int point, void *arg) {
    const struct pause_fds *f = arg;
    if (point != CWI_SHARE_HOLDERS_COUNTED) return;
    struct msg r = {.cmd = M_HELD}, m;
    send_msg(f->out, &r);
    while (recv_msg(f->in, &m) && m.cmd != M_WRITE) {
    }
}

/* Makes a shareable buffer on the device asked for and sends its handle. */
static int child_exporter(int in, int out) {
    struct msg m;
    if (!recv_msg(in, &m) || m.cmd != M_EXPORT) return 2;
    cw_context *c = NULL;
    cw_stream *cs = NULL;
    cw_buffer *b = NULL;
    if (cw_context_create(&c, m.wait) || cw_stream_create(&cs, c, NULL) || cw_buffer_create_shareable(&b, cs, N * 4))
        return child_fail("exporter");
    struct msg r = {.cmd = M_HANDLE};
    if (cw_buffer_export(b, &r.hb)) return child_fail("export");
    cw_buffer *small = NULL; /* mode 3: a second buffer of 64 bytes, its handle in r.he */
    if (m.mode == 3 && (cw_buffer_create_shareable(&small, cs, 64) || cw_buffer_export(small, &r.he)))
        return child_fail("export (small)");
    cw_shared_event *ea = NULL, *eb = NULL; /* mode 4: two events, their handles in r.hb and r.he */
    if (m.mode == 4 && (cw_shared_event_create(&ea, c) || cw_shared_event_create(&eb, c) ||
                        cw_shared_event_export(ea, &r.hb) || cw_shared_event_export(eb, &r.he)))
        return child_fail("export (events)");
    if (m.mode == 1) cw_buffer_destroy(&b); /* no importer: freed now */
    send_msg(out, &r);
    if (m.mode == 2) _exit(0);              /* dies without freeing */
    while (recv_msg(in, &m) && m.cmd != M_QUIT) {
        if (m.cmd == M_CLOSE) { /* mode 5: destroys the buffer, held at pause_counted */
            struct pause_fds f = {in, out};
            cwi_share_hook(pause_counted, &f);
            cw_buffer_destroy(&b);
            cwi_share_hook(NULL, NULL);
            struct msg r2 = {.cmd = M_CLOSED};
            send_msg(out, &r2);
        }
    }
    cw_shared_event_destroy(&ea);
    cw_shared_event_destroy(&eb);
    cw_buffer_destroy(&small);
    cw_buffer_destroy(&b);
    cw_stream_destroy(&cs);
    cw_context_destroy(&c);
    return 0;
}

/* ---- the parent's side ---- */

struct child {
    pid_t pid;
    int to, from;
};

static char g_self[4096];
static char g_fake[4096];

static struct child spawn(const char *role) {
    int a[2], b[2];
    struct child c = {-1, -1, -1};
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
        execl(g_self, g_self, g_fake, "--child", role, in, out, (char *)NULL);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    c.pid = pid;
    c.to = a[1];
    c.from = b[0];
    return c;
}

static void finish(struct child *c) {
    struct msg q = {.cmd = M_QUIT};
    send_msg(c->to, &q);
    close(c->to);
    int status = 0;
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    close(c->from);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void expect(struct child *c, int cmd, struct msg *m) {
    assert_true(recv_msg(c->from, m));
    assert_int_equal(m->cmd, cmd);
}

/* Sends a read to the child and returns its result (0: every value right),
 * after its "enqueued" report. */
static int64_t child_read(struct child *c, const struct msg *m) {
    struct msg r;
    send_msg(c->to, m);
    expect(c, M_ENQUEUED, &r);
    expect(c, M_RESULT, &r);
    return r.result;
}

static cw_buffer *filled(uint32_t seed) {
    static uint32_t host[N];
    for (uint32_t i = 0; i < N; i++) host[i] = value(seed, i);
    cw_buffer *b = NULL;
    assert_cw_ok(cw_buffer_create_shareable(&b, s, N * 4));
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_writable(b, &p));
    assert_cw_ok(cw_copy_to_device(s, p, host, N * 4));
    assert_cw_ok(cw_stream_synchronize(s));
    return b;
}

static void test_buffer_values_both_ways(void **state) {
    (void)state;
    cw_buffer *b = filled(11);
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .seed = 11}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_int_equal(child_read(&c, &m), 0); /* every value as this process wrote it */
    /* The other way: the importer writes, this process reads. */
    struct msg w = {.cmd = M_WRITE, .seed = 12};
    send_msg(c.to, &w);
    expect(&c, M_WRITTEN, &r);
    assert_int_equal(r.result, 0);
    static uint32_t host[N];
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    assert_cw_ok(cw_copy_to_host(s, host, p, N * 4));
    assert_cw_ok(cw_stream_synchronize(s));
    for (uint32_t i = 0; i < N; i++)
        if (host[i] != value(12, i)) fail_msg("value %u: %u, the importer wrote %u", i, host[i], value(12, i));
    struct msg cl = {.cmd = M_CLOSE};
    send_msg(c.to, &cl);
    expect(&c, M_CLOSED, &r);
    finish(&c);
    long before = fake_live("devmem");
    cw_buffer_destroy(&b); /* no importer left: freed at once */
    assert_int_equal(fake_live("devmem"), before - 1);
}

/* The writer's copy of new values and its record are held back in this
 * process; the reader's stream (waiting, or not, for the event) is checked. */
static void run_ordering(int wait, int64_t *mismatches, double *t_reader, double *t_release) {
    cw_buffer *b = filled(21);
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .wait = wait, .seed = 22}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_cw_ok(cw_shared_event_export(e, &m.he));
    static uint32_t host[N];
    for (uint32_t i = 0; i < N; i++) host[i] = value(22, i);
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    fake_hold(1);
    assert_cw_ok(cw_copy_to_device(s, p, host, N * 4));
    assert_cw_ok(cw_shared_event_record(e, s));
    send_msg(c.to, &m); /* after the record: the reader's wait is for it */
    expect(&c, M_ENQUEUED, &r);
    sleep_ms(150); /* the reader's stream would finish now, were it not ordered */
    *t_release = now_ms();
    fake_hold(0);
    assert_cw_ok(cw_stream_synchronize(s));
    expect(&c, M_RESULT, &r);
    *mismatches = r.result;
    *t_reader = r.t;
    struct msg cl = {.cmd = M_CLOSE};
    send_msg(c.to, &cl);
    expect(&c, M_CLOSED, &r);
    finish(&c);
    cw_shared_event_destroy(&e);
    cw_buffer_destroy(&b);
}

static void test_event_orders_reader_after_writer(void **state) {
    (void)state;
    int64_t bad = -1;
    double t_reader = 0, t_release = 0;
    run_ordering(1, &bad, &t_reader, &t_release);
    assert_int_equal(bad, 0);            /* every value the writer's held copy wrote */
    assert_true(t_reader >= t_release);  /* and only once it was let go */
}

static void test_without_the_wait_the_reader_races(void **state) {
    (void)state;
    int64_t bad = -1;
    double t_reader = 0, t_release = 0;
    run_ordering(0, &bad, &t_reader, &t_release);
    assert_int_equal(bad, N);           /* the old values, all of them */
    assert_true(t_reader < t_release);  /* before the writer's copy ran */
}

/* A record made before the import is waited for like any other; the event
 * never recorded does not block. */
static void test_record_before_import_and_never_recorded(void **state) {
    (void)state;
    cw_buffer *b = filled(31);
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .wait = 1, .seed = 31}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_cw_ok(cw_shared_event_export(e, &m.he));
    assert_int_equal(child_read(&c, &m), 0); /* never recorded: nothing to wait for */
    cw_shared_event_info info;
    assert_cw_ok(cw_shared_event_get_info(e, &info));
    assert_int_equal(info.imported, 0);
    assert_int_equal(info.importers, 1);
    assert_ptr_equal(info.context, ctx);
    finish(&c);
    /* A new reader imports after the record was made (held back here). */
    static uint32_t host[N];
    for (uint32_t i = 0; i < N; i++) host[i] = value(32, i);
    cw_devptr p = 0;
    assert_cw_ok(cw_buffer_get_ptr(b, &p));
    fake_hold(1);
    assert_cw_ok(cw_copy_to_device(s, p, host, N * 4));
    assert_cw_ok(cw_shared_event_record(e, s));
    c = spawn("reader");
    struct msg m2 = {.cmd = M_READ, .wait = 1, .seed = 32};
    m2.hb = m.hb;
    m2.he = m.he;
    send_msg(c.to, &m2);
    expect(&c, M_ENQUEUED, &r);
    sleep_ms(100);
    double t_release = now_ms();
    fake_hold(0);
    expect(&c, M_RESULT, &r);
    assert_int_equal(r.result, 0);
    assert_true(r.t >= t_release);
    finish(&c);
    cw_shared_event_destroy(&e);
    cw_buffer_destroy(&b);
}

static void sweep(void) {
    /* Any call of share.h frees what importers gave back since. */
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    cw_shared_event_destroy(&e);
}

static void test_exporter_destroy_keeps_memory_until_importer_closes(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    cw_buffer *b = filled(41);
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .seed = 41}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_int_equal(child_read(&c, &m), 0);
    cw_buffer_destroy(&b); /* the importer holds it: kept */
    sweep();
    assert_int_equal(fake_live("devmem"), devmem0 + 1);
    {
        /* Dropped by its exporter: no new import. */
        struct child c2 = spawn("reader");
        send_msg(c2.to, &m);
        expect(&c2, M_RESULT, &r);
        assert_int_equal(r.result, -(int64_t)CW_ERROR_INVALID_STATE);
        finish(&c2);
    }
    assert_int_equal(child_read(&c, &m), 0); /* reads it again: intact */
    struct msg cl = {.cmd = M_CLOSE};
    send_msg(c.to, &cl);
    expect(&c, M_CLOSED, &r);
    assert_int_equal(fake_live("devmem"), devmem0 + 1); /* until this process calls again */
    sweep();
    assert_int_equal(fake_live("devmem"), devmem0);
    finish(&c);
}

static int blocks_of(pid_t pid);

/* A child forked without exec that exits (its atexit handlers run) leaves
 * the parent's exports alone. */
static void test_forked_child_exit_keeps_exports(void **state) {
    (void)state;
    cw_buffer *b = filled(61);
    struct msg m = {.cmd = M_READ, .seed = 61}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) exit(0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    struct child c = spawn("reader");
    assert_int_equal(child_read(&c, &m), 0);
    struct msg cl = {.cmd = M_CLOSE};
    send_msg(c.to, &cl);
    expect(&c, M_CLOSED, &r);
    finish(&c);
    cw_buffer_destroy(&b);
}

/* A child forked without exec that drops an export it inherited (a
 * destructor, a Python child's collector) leaves the parent's export alone:
 * its block stays, a reader still imports it. */
static void test_forked_child_destroy_keeps_exports(void **state) {
    (void)state;
    if (blocks_of(getpid()) < 0) skip();
    cw_buffer *b = filled(62);
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    struct msg m = {.cmd = M_READ, .wait = 1, .seed = 62}, r;
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_cw_ok(cw_shared_event_export(e, &m.he));
    const int blocks = blocks_of(getpid());
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cw_buffer_destroy(&b);
        cw_shared_event_destroy(&e);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    int left = blocks_of(getpid());
    if (left != blocks)
        fail_msg("a forked child's destroy of the buffer and the event it inherited removed %d of this process's %d "
                 "blocks", blocks - left, blocks);
    struct child c = spawn("reader");
    assert_int_equal(child_read(&c, &m), 0);
    struct msg cl = {.cmd = M_CLOSE};
    send_msg(c.to, &cl);
    expect(&c, M_CLOSED, &r);
    finish(&c);
    cw_shared_event_destroy(&e);
    cw_buffer_destroy(&b);
}

static void test_importer_that_dies_counts_as_closed(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    cw_buffer *b = filled(51);
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .seed = 51};
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_int_equal(child_read(&c, &m), 0);
    cw_buffer_destroy(&b);
    sweep();
    assert_int_equal(fake_live("devmem"), devmem0 + 1);
    struct msg q = {.cmd = M_QUIT, .mode = 2}; /* exits without closing */
    send_msg(c.to, &q);
    int status = 0;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.to);
    close(c.from);
    sweep();
    assert_int_equal(fake_live("devmem"), devmem0);
}

/* 1 when process pid is a zombie (exited, not yet waited for). */
static int zombie(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/* An importer that died counts as closed before its parent (here: the
 * exporter, as when a producer starts its consumers) has waited for it. */
static void test_importer_dead_not_yet_waited_for(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    cw_buffer *b = filled(52);
    struct child c = spawn("reader");
    struct msg m = {.cmd = M_READ, .seed = 52};
    assert_cw_ok(cw_buffer_export(b, &m.hb));
    assert_int_equal(child_read(&c, &m), 0);
    cw_buffer_destroy(&b);
    sweep();
    assert_int_equal(fake_live("devmem"), devmem0 + 1);
    struct msg q = {.cmd = M_QUIT, .mode = 2}; /* exits without closing */
    send_msg(c.to, &q);
    int z = 0;
    for (int i = 0; i < 10000 && !(z = zombie(c.pid)); i++) sleep_ms(1);
    sweep();
    const long left = fake_live("devmem") - devmem0;
    int status = 0;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.to);
    close(c.from);
    sweep();
    assert_true(z);
    if (left != 0) fail_msg("the importer had died (a zombie, not yet waited for) and its buffer was still kept");
    assert_int_equal(fake_live("devmem"), devmem0);
}

static int g_errors;
static void count_errors(void *user, cw_log_level level, const char *message) {
    (void)user;
    (void)message;
    if (level == CW_LOG_ERROR) g_errors++;
}

/* The exporter's context teardown frees what it kept: at once when the
 * importers closed, after a bounded wait (logged) when one still holds it. */
static void test_context_teardown_frees_kept_memory(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    for (int still_held = 0; still_held < 2; still_held++) {
        cw_context *c2 = NULL;
        cw_stream *s2 = NULL;
        cw_buffer *b = NULL;
        assert_cw_ok(cw_context_create(&c2, 0));
        assert_cw_ok(cw_stream_create(&s2, c2, NULL));
        assert_cw_ok(cw_buffer_create_shareable(&b, s2, N * 4));
        struct child c = spawn("reader");
        struct msg m = {.cmd = M_READ, .seed = 0}, r;
        assert_cw_ok(cw_buffer_export(b, &m.hb));
        send_msg(c.to, &m);
        expect(&c, M_ENQUEUED, &r);
        expect(&c, M_RESULT, &r);
        assert_true(r.result >= 0); /* imported and read (zeros) */
        cw_buffer_destroy(&b);      /* kept: the child holds it */
        cw_stream_destroy(&s2);
        assert_int_equal(fake_live("devmem"), devmem0 + 1);
        struct msg cl = {.cmd = M_CLOSE};
        if (!still_held) {
            send_msg(c.to, &cl);
            expect(&c, M_CLOSED, &r);
        }
        g_errors = 0;
        assert_cw_ok(cw_log_set_callback(count_errors, NULL, CW_LOG_ERROR));
        double t0 = now_ms();
        cw_context_destroy(&c2); /* no other call of share.h in between */
        double took = now_ms() - t0;
        assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
        assert_int_equal(fake_live("devmem"), devmem0);
        if (still_held) {
            assert_true(took >= 1900); /* waited for the importer, up to 2 s */
            assert_int_equal(g_errors, 1);
            send_msg(c.to, &cl);
            expect(&c, M_CLOSED, &r);
        } else {
            assert_true(took < 1000);
            assert_int_equal(g_errors, 0);
        }
        finish(&c);
    }
}

static void test_driver_without_ipc(void **state) {
    (void)state;
    setenv("FAKE_CUDA_NO_IPC", "1", 1);
    struct child c = spawn("noipc");
    unsetenv("FAKE_CUDA_NO_IPC");
    close(c.to);
    int status = 0;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.from);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_errors(void **state) {
    (void)state;
    cw_shared_handle h, zero;
    memset(&zero, 0, sizeof zero);
    cw_buffer *b = NULL, *in = NULL;
    cw_shared_event *e = NULL, *ein = NULL;
    /* Arguments and handles. */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_create_shareable(NULL, s, 64));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_create_shareable(&b, s, 0));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_import(&in, s, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_shared_event_import(&ein, ctx, NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_shared_event_record((cw_shared_event *)s, s));
    /* A bad handle. */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_import(&in, s, &zero));
    assert_detail("cw_buffer_import");
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_shared_event_import(&ein, ctx, &zero));
    /* Pool memory cannot be exported. */
    assert_cw_ok(cw_buffer_create(&b, s, 64));
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_export(b, &h));
    cw_buffer_destroy(&b);
    /* This process's own handles. */
    assert_cw_ok(cw_buffer_create_shareable(&b, s, 64));
    assert_cw_ok(cw_buffer_export(b, &h));
    assert_cw(CW_ERROR_NOT_PERMITTED, cw_buffer_import(&in, s, &h));
    assert_null(in);
    assert_cw_ok(cw_shared_event_create(&e, ctx));
    cw_shared_handle he;
    assert_cw_ok(cw_shared_event_export(e, &he));
    assert_cw(CW_ERROR_NOT_PERMITTED, cw_shared_event_import(&ein, ctx, &he));
    /* An event's handle given as a buffer's, and the other way round. */
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_buffer_import(&in, s, &he));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_shared_event_import(&ein, ctx, &h));
    /* A record on a stream of another context. */
    cw_context *c1 = NULL;
    cw_stream *s1 = NULL;
    assert_cw_ok(cw_context_create(&c1, 1));
    assert_cw_ok(cw_stream_create(&s1, c1, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_shared_event_record(e, s1));
    cw_shared_event_destroy(&e);
    cw_buffer_destroy(&b);
    /* An exporter that freed the buffer, one that died, one of another device. */
    for (int mode = 1; mode <= 3; mode++) {
        struct child c = spawn("exporter");
        struct msg m = {.cmd = M_EXPORT, .wait = mode == 3 ? 1 : 0, .mode = mode == 3 ? 0 : mode}, r;
        send_msg(c.to, &m);
        expect(&c, M_HANDLE, &r);
        if (mode == 2) {
            int status = 0;
            assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
        }
        cw_status want = mode == 3 ? CW_ERROR_INVALID_ARGUMENT : CW_ERROR_INVALID_STATE;
        assert_cw(want, cw_buffer_import(&in, s, &r.hb));
        assert_null(in);
        if (mode == 3) {
            /* On a context of the exporter's device it opens. */
            assert_cw_ok(cw_buffer_import(&in, s1, &r.hb));
            cw_buffer_destroy(&in);
        }
        if (mode == 2) {
            close(c.to);
            close(c.from);
        } else {
            finish(&c);
        }
    }
    cw_stream_destroy(&s1);
    cw_context_destroy(&c1);
}

/* ---- handles from outside: forged ones ---- */

/* Where share.cpp's handle layout keeps the fields a forger changes. */
enum { H_PID = 8, H_UUID = 16, H_BYTES = 32, H_IPC = 40, H_NONCE = 104 };

/* A pid no process has (a child that exited and was reaped). */
static int32_t dead_pid(void) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return (int32_t)pid;
}

/* Blocks of process pid in /dev/shm. */
static int blocks_of(pid_t pid) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "cuweave.%d.", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

static struct child exporter(int mode, struct msg *r) {
    struct child c = spawn("exporter");
    struct msg m = {.cmd = M_EXPORT, .mode = mode};
    send_msg(c.to, &m);
    expect(&c, M_HANDLE, r);
    return c;
}

/* A live exporter's handle with a dead process's pid is refused, and the
 * refusal removes nothing: the exporter's block stays, a genuine import of
 * it still opens. A dead exporter's block is removed by its own handle
 * only. */
static void test_forged_pid_keeps_live_block(void **state) {
    (void)state;
    if (blocks_of(getpid()) < 0) skip();
    struct msg r;
    struct child c = exporter(0, &r);
    assert_int_equal(blocks_of(c.pid), 1);
    cw_shared_handle forged = r.hb;
    const int32_t dead = dead_pid();
    memcpy(forged.bytes + H_PID, &dead, sizeof dead);
    cw_buffer *in = NULL;
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_import(&in, s, &forged)); /* "the exporter is gone" */
    assert_null(in);
    assert_int_equal(blocks_of(c.pid), 1); /* the exporter's block is still there */
    assert_cw_ok(cw_buffer_import(&in, s, &r.hb));
    cw_buffer_info info;
    assert_cw_ok(cw_buffer_get_info(in, &info));
    assert_int_equal(info.bytes, N * 4);
    cw_buffer_destroy(&in);
    finish(&c);
    /* A dead exporter's block goes only with that exporter's own handle:
     * not with another nonce or size (nor is anything opened then). */
    c = exporter(2, &r);
    int status = 0;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    close(c.to);
    close(c.from);
    assert_int_equal(blocks_of(c.pid), 1);
    forged = r.hb;
    forged.bytes[H_NONCE] ^= 1;
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_import(&in, s, &forged));
    assert_int_equal(blocks_of(c.pid), 1);
    forged = r.hb;
    forged.bytes[H_BYTES] ^= 4;
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_import(&in, s, &forged));
    assert_int_equal(blocks_of(c.pid), 1);
    assert_cw(CW_ERROR_INVALID_STATE, cw_buffer_import(&in, s, &r.hb));
    assert_null(in);
    assert_int_equal(blocks_of(c.pid), 0); /* its own handle: removed */
}

/* The imported size is the exported one and fits the memory the driver
 * mapped: a handle claiming more (or less) is refused, and so is a handle
 * whose driver part is another, smaller buffer's. */
static void test_forged_size_refused(void **state) {
    (void)state;
    struct msg r;
    struct child c = exporter(3, &r); /* r.hb: N*4 bytes, r.he: 64 bytes */
    long ipc0 = fake_live("ipcmem");
    const uint64_t sizes[] = {2ull * N * 4, N * 4 + 1, N * 2, 1ull << 62};
    cw_buffer *in = NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cw_shared_handle h = r.hb;
        memcpy(h.bytes + H_BYTES, &sizes[i], sizeof sizes[i]);
        cw_status st = cw_buffer_import(&in, s, &h);
        if (st == CW_SUCCESS) {
            cw_buffer_info info;
            assert_cw_ok(cw_buffer_get_info(in, &info));
            fail_msg("a handle claiming %llu bytes (%d exported) was imported as %zu bytes",
                     (unsigned long long)sizes[i], N * 4, info.bytes);
        }
        assert_int_equal(st, CW_ERROR_INVALID_ARGUMENT);
        assert_null(in);
    }
    cw_shared_handle h = r.hb; /* the big buffer's handle with the small one's driver handle */
    memcpy(h.bytes + H_IPC, r.he.bytes + H_IPC, 64);
    cw_status st = cw_buffer_import(&in, s, &h);
    if (st == CW_SUCCESS) {
        cw_buffer_info info;
        assert_cw_ok(cw_buffer_get_info(in, &info));
        fail_msg("a handle of %zu bytes over a mapping of 64 was imported", info.bytes);
    }
    assert_int_equal(st, CW_ERROR_INVALID_ARGUMENT);
    assert_null(in);
    assert_int_equal(fake_live("ipcmem"), ipc0); /* the refused mapping was closed */
    /* The genuine handles open, each with its own size. */
    cw_buffer *small = NULL;
    assert_cw_ok(cw_buffer_import(&in, s, &r.hb));
    assert_cw_ok(cw_buffer_import(&small, s, &r.he));
    cw_buffer_info a, b;
    assert_cw_ok(cw_buffer_get_info(in, &a));
    assert_cw_ok(cw_buffer_get_info(small, &b));
    assert_int_equal(a.bytes, N * 4);
    assert_int_equal(b.bytes, 64);
    cw_buffer_destroy(&in);
    cw_buffer_destroy(&small);
    assert_int_equal(fake_live("ipcmem"), ipc0);
    finish(&c);
}

/* What the driver opens (the handle's IPC part) and the device the handle
 * names are its block's exporter's for that object: a handle whose IPC part
 * is another object's (a buffer big enough for the size claimed, another
 * event) or whose UUID names another device is refused, nothing left
 * mapped; the genuine handles still open. */
static void test_forged_driver_part_refused(void **state) {
    (void)state;
    struct msg r;
    struct child c = exporter(3, &r); /* r.hb: N*4 bytes, r.he: 64 bytes */
    long ipc0 = fake_live("ipcmem");
    cw_buffer *in = NULL;
    cw_shared_handle h = r.he; /* the small buffer's block and size, the big one's IPC part */
    memcpy(h.bytes + H_IPC, r.hb.bytes + H_IPC, 64);
    cw_status st = cw_buffer_import(&in, s, &h);
    if (st == CW_SUCCESS)
        fail_msg("the 64-byte buffer's handle with the %d-byte buffer's IPC part was imported: this process maps "
                 "the big buffer while its slot is in the small one's block (the exporter frees the big one under "
                 "it)", N * 4);
    assert_int_equal(st, CW_ERROR_INVALID_ARGUMENT);
    assert_null(in);
    assert_int_equal(fake_live("ipcmem"), ipc0);
    /* The exporter's device-0 buffer with device 1's UUID, imported on device 1. */
    cw_context *c1 = NULL;
    cw_stream *s1 = NULL;
    cw_buffer *own1 = NULL;
    cw_shared_handle h1;
    assert_cw_ok(cw_context_create(&c1, 1));
    assert_cw_ok(cw_stream_create(&s1, c1, NULL));
    assert_cw_ok(cw_buffer_create_shareable(&own1, s1, 64));
    assert_cw_ok(cw_buffer_export(own1, &h1));
    h = r.hb;
    memcpy(h.bytes + H_UUID, h1.bytes + H_UUID, 16);
    assert_true(memcmp(h.bytes + H_UUID, r.hb.bytes + H_UUID, 16) != 0);
    st = cw_buffer_import(&in, s1, &h);
    if (st == CW_SUCCESS) fail_msg("device 0's buffer, its handle naming device 1, was imported on device 1");
    assert_int_equal(st, CW_ERROR_INVALID_ARGUMENT);
    assert_null(in);
    assert_int_equal(fake_live("ipcmem"), ipc0);
    cw_buffer_destroy(&own1);
    cw_stream_destroy(&s1);
    cw_context_destroy(&c1);
    /* The genuine handles open. */
    assert_cw_ok(cw_buffer_import(&in, s, &r.he));
    cw_buffer_destroy(&in);
    assert_cw_ok(cw_buffer_import(&in, s, &r.hb));
    cw_buffer_destroy(&in);
    finish(&c);
    /* Event A's handle with event B's IPC part. */
    c = exporter(4, &r); /* r.hb, r.he: two events */
    long ev0 = fake_live("event");
    cw_shared_event *ev = NULL;
    h = r.hb;
    memcpy(h.bytes + H_IPC, r.he.bytes + H_IPC, 64);
    st = cw_shared_event_import(&ev, ctx, &h);
    if (st == CW_SUCCESS)
        fail_msg("event A's handle with event B's IPC part was imported: this process holds B with its slot in A's "
                 "block");
    assert_int_equal(st, CW_ERROR_INVALID_ARGUMENT);
    assert_null(ev);
    assert_int_equal(fake_live("event"), ev0);
    assert_cw_ok(cw_shared_event_import(&ev, ctx, &r.hb));
    cw_shared_event_destroy(&ev);
    assert_cw_ok(cw_shared_event_import(&ev, ctx, &r.he));
    cw_shared_event_destroy(&ev);
    finish(&c);
}

/* An import racing the exporter's destroy either is counted by it or
 * fails, even when the block's name is made again meanwhile (any user may
 * make a file of that name in /dev/shm once the exporter removed it). The
 * import is held after it matched the block, before it takes its slot; the
 * exporter's destroy then removes the name, counts no holder and is held
 * before the free; a file of the block's name (mode 0644, as another user
 * would make it) appears; then the import goes on. */
struct recreate {
    struct child *c;
    char name[64];
    int held, made;
};
static void recreate_hook(int point, void *arg) {
    struct recreate *r = arg;
    if (point != CWI_SHARE_IMPORT_MATCHED || r->held) return;
    struct msg cl = {.cmd = M_CLOSE}, m;
    send_msg(r->c->to, &cl);
    r->held = recv_msg(r->c->from, &m) && m.cmd == M_HELD; /* the exporter counted, and waits */
    int fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0644);
    if (fd >= 0) {
        r->made = fchmod(fd, 0644) == 0 && ftruncate(fd, 4096) == 0;
        close(fd);
    }
}

static void test_import_racing_destroy_name_made_again(void **state) {
    (void)state;
    struct msg r;
    struct child c = exporter(5, &r);
    struct recreate rc = {.c = &c};
    int32_t pid;
    uint32_t serial;
    uint64_t nonce;
    memcpy(&pid, r.hb.bytes + H_PID, 4);
    memcpy(&serial, r.hb.bytes + H_PID + 4, 4);
    memcpy(&nonce, r.hb.bytes + H_NONCE, 8);
    snprintf(rc.name, sizeof rc.name, "/cuweave.%d.%u.%016llx", (int)pid, serial, (unsigned long long)nonce);
    long ipc0 = fake_live("ipcmem");
    cw_buffer *in = NULL;
    cwi_share_hook(recreate_hook, &rc);
    cw_status st = cw_buffer_import(&in, s, &r.hb);
    cwi_share_hook(NULL, NULL);
    const long mapped = fake_live("ipcmem") - ipc0;
    struct msg go = {.cmd = M_WRITE};
    send_msg(c.to, &go); /* the exporter frees the buffer now */
    expect(&c, M_CLOSED, &r);
    cw_buffer_destroy(&in);
    shm_unlink(rc.name);
    finish(&c);
    assert_true(rc.held);
    assert_true(rc.made);
    if (st == CW_SUCCESS)
        fail_msg("the import succeeded (%ld mapping) after the exporter had removed the name and counted no holder: "
                 "the exporter then freed the memory it maps (the name's new file passed the check)", mapped);
    assert_int_equal(st, CW_ERROR_INVALID_STATE);
    assert_int_equal(mapped, 0);
}

/* ---- kept objects and the context's teardown ---- */

/* Makes a context whose `n` shareable buffers a holder child imported and
 * this process then destroyed: each kept for the child. */
static cw_context *context_with_kept(int n, struct child *holder) {
    cw_context *c2 = NULL;
    cw_stream *s2 = NULL;
    assert_cw_ok(cw_context_create(&c2, 0));
    assert_cw_ok(cw_stream_create(&s2, c2, NULL));
    *holder = spawn("holder");
    for (int i = 0; i < n; i++) {
        cw_buffer *b = NULL;
        assert_cw_ok(cw_buffer_create_shareable(&b, s2, 4096));
        struct msg m = {.cmd = M_HOLD}, r;
        assert_cw_ok(cw_buffer_export(b, &m.hb));
        send_msg(holder->to, &m);
        expect(holder, M_HELD, &r);
        assert_int_equal(r.result, 0);
        cw_buffer_destroy(&b); /* kept: the child holds it */
    }
    cw_stream_destroy(&s2);
    return c2;
}

static void close_held(struct child *holder) {
    struct msg cl = {.cmd = M_CLOSE}, r;
    send_msg(holder->to, &cl);
    expect(holder, M_CLOSED, &r);
}

/* A sweep (any call of share.h, on any thread) that took a context's kept
 * object off the list to free it, while that context is torn down on
 * another thread: the teardown still frees it before it returns, and the
 * sweep never enters the freed context. A hook holds the sweep between
 * taking the object and freeing it until the teardown has returned, or has
 * said that it waits for that free. */
struct race {
    atomic_int taken, destroyed, waits;
};
static void race_hook(int point, void *arg) {
    struct race *r = arg;
    if (point == CWI_SHARE_SWEEP_TAKEN) {
        atomic_store(&r->taken, 1);
        for (int i = 0; i < 10000 && !atomic_load(&r->destroyed) && !atomic_load(&r->waits); i++) sleep_ms(1);
    } else if (point == CWI_SHARE_TEARDOWN_WAITS) {
        atomic_store(&r->waits, 1);
    }
}
static void *sweep_thread(void *arg) {
    cw_shared_event *e = NULL;
    if (cw_shared_event_create(&e, (cw_context *)arg) == CW_SUCCESS) cw_shared_event_destroy(&e);
    return NULL;
}

static void test_sweep_racing_teardown(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    struct child holder;
    cw_context *c2 = context_with_kept(1, &holder);
    close_held(&holder); /* no importer left: the next sweep frees it */
    assert_int_equal(fake_live("devmem"), devmem0 + 1);
    struct race r = {0};
    cwi_share_hook(race_hook, &r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sweep_thread, ctx), 0);
    for (int i = 0; i < 10000 && !atomic_load(&r.taken); i++) sleep_ms(1);
    int taken = atomic_load(&r.taken);
    if (taken) cw_context_destroy(&c2);
    long after = fake_live("devmem");
    atomic_store(&r.destroyed, 1);
    pthread_join(t, NULL);
    cwi_share_hook(NULL, NULL);
    finish(&holder);
    assert_true(taken);
    if (after != devmem0)
        fail_msg("cw_context_destroy returned with the context's kept memory not freed (%ld allocations over, the "
                 "sweep on the other thread still to free it: in a context already freed)", after - devmem0);
    assert_int_equal(atomic_load(&r.waits), 1); /* the teardown waited for the sweep's free */
    assert_int_equal(fake_live("devmem"), devmem0);
}

/* A sweep (any call of share.h) that finds a kept buffer no importer holds
 * any more frees its memory with cuMemFree, which waits until no kernel runs
 * on the device: for good while a resident loop runs (docs/resident.md).
 * While one runs the sweep leaves the memory kept; the first sweep after
 * the loop stopped frees it. */
static void test_sweep_beside_a_loop(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    struct child holder;
    cw_context *c2 = context_with_kept(1, &holder);
    close_held(&holder); /* no importer left: the next sweep frees it */
    finish(&holder);
    cw_resident *r = NULL;
    assert_cw_ok(cw_resident_create(&r, ctx, NULL));
    assert_cw_ok(cw_resident_build(r));
    assert_cw_ok(cw_resident_launch(r));
    char last[160] = "";
    const long v0 = fake_pers_violations(NULL, 0), running = fake_live("devmem");
    cw_shared_event *e = NULL;
    assert_cw_ok(cw_shared_event_create(&e, ctx)); /* sweeps */
    const long violations = fake_pers_violations(last, sizeof last) - v0;
    const long freed_during = running - fake_live("devmem");
    const cw_status down = cw_resident_tear_down(r, 1000);
    cw_shared_event_destroy(&e); /* sweeps, no loop running */
    const long freed_after = running - fake_live("devmem");
    cw_resident_destroy(&r);
    cw_context_destroy(&c2);
    if (violations) printf("# %ld calls would wait for the running loop; the last: %s\n", violations, last);
    assert_int_equal(violations, 0);
    assert_int_equal(freed_during, 0); /* kept while the loop ran */
    assert_cw_ok(down);
    assert_int_equal(freed_after, 1);
    assert_int_equal(fake_live("devmem"), devmem0);
}

/* A teardown waits 2 s in all for the importers of its kept objects, not
 * 2 s for each: with 3 objects held, the hook counts its 1 ms sleeps. */
static atomic_int g_waits;
static void count_waits(int point, void *arg) {
    (void)arg;
    if (point == CWI_SHARE_HOLDERS_WAIT) atomic_fetch_add(&g_waits, 1);
}

static void test_teardown_one_deadline(void **state) {
    (void)state;
    long devmem0 = fake_live("devmem");
    struct child holder;
    cw_context *c2 = context_with_kept(3, &holder);
    assert_int_equal(fake_live("devmem"), devmem0 + 3);
    g_errors = 0;
    atomic_store(&g_waits, 0);
    assert_cw_ok(cw_log_set_callback(count_errors, NULL, CW_LOG_ERROR));
    cwi_share_hook(count_waits, NULL);
    cw_context_destroy(&c2); /* the child still holds all three */
    cwi_share_hook(NULL, NULL);
    assert_cw_ok(cw_log_set_callback(NULL, NULL, CW_LOG_ERROR));
    int waits = atomic_load(&g_waits);
    printf("# teardown of 3 held objects: %d sleeps of 1 ms\n", waits);
    assert_int_equal(fake_live("devmem"), devmem0);
    assert_int_equal(g_errors, 3); /* each freed while held, logged */
    if (waits >= 2 * 2000) fail_msg("the teardown slept %d times 1 ms: 2 s for each object, one after another", waits);
    assert_true(waits > 0); /* it did wait for the importer */
    close_held(&holder);
    finish(&holder);
}

/* A process whose main returns while another thread holds the lock of its
 * exports (kept there by a hook) exits: the atexit handler does not wait
 * for that lock for good. Bounded: the child is killed after 10 s. */
static void test_exit_while_exports_locked(void **state) {
    (void)state;
    struct child c = spawn("exitlocked");
    close(c.to);
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 10000 && (got = waitpid(c.pid, &status, WNOHANG)) == 0; i++) sleep_ms(1);
    if (got == 0) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
    }
    close(c.from);
    /* Its blocks (the names stay when the lock cannot be had): gone with it. */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "cuweave.%d.", (int)c.pid);
    DIR *d = opendir("/dev/shm");
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            char name[300];
            snprintf(name, sizeof name, "/%s", e->d_name);
            left += shm_unlink(name) == 0;
        }
    if (d) closedir(d);
    if (got == 0) fail_msg("the child had not exited 10 s after its main returned (its atexit handler waits for the lock "
                           "another thread holds); killed");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(left, 2); /* its first export and the one inside the lock */
}

/* Every object exported here was freed: no block of this process is left in
 * /dev/shm (nor of its children, which exited: a dead exporter's block is
 * removed by the import that finds it dead, a living one's at exit). */
static void test_no_block_left(void **state) {
    (void)state;
    sweep();
    char prefix[32];
    snprintf(prefix, sizeof prefix, "cuweave.%d.", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d) skip();
    int left = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            printf("# left: /dev/shm/%s\n", e->d_name);
            left++;
        }
    closedir(d);
    assert_int_equal(left, 0);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1); /* conditional nodes: a resident loop (test_sweep_beside_a_loop) */
    if (argc == 6 && !strcmp(argv[2], "--child")) {
        int in = atoi(argv[4]), out = atoi(argv[5]);
        if (cw_init() != CW_SUCCESS) return 2;
        if (!strcmp(argv[3], "reader")) return child_reader(in, out);
        if (!strcmp(argv[3], "exporter")) return child_exporter(in, out);
        if (!strcmp(argv[3], "noipc")) return child_noipc();
        if (!strcmp(argv[3], "holder")) return child_holder(in, out);
        if (!strcmp(argv[3], "exitlocked")) return child_exit_locked();
        return 2;
    }
    snprintf(g_fake, sizeof g_fake, "%s", argv[1]);
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) {
        printf("FAIL: cannot read /proc/self/exe\n");
        return 1;
    }
    g_self[n] = 0;
    signal(SIGPIPE, SIG_IGN);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(fake_hold = (void (*)(int))dlsym(lib, "fake_cuda_hold")) ||
        !(*(void **)&fake_pers_violations = dlsym(lib, "fake_cuda_persistent_violations"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS ||
        cw_stream_create(&s, ctx, NULL) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_values_both_ways),
        cmocka_unit_test(test_event_orders_reader_after_writer),
        cmocka_unit_test(test_without_the_wait_the_reader_races),
        cmocka_unit_test(test_record_before_import_and_never_recorded),
        cmocka_unit_test(test_exporter_destroy_keeps_memory_until_importer_closes),
        cmocka_unit_test(test_importer_that_dies_counts_as_closed),
        cmocka_unit_test(test_importer_dead_not_yet_waited_for),
        cmocka_unit_test(test_forked_child_exit_keeps_exports),
        cmocka_unit_test(test_forked_child_destroy_keeps_exports),
        cmocka_unit_test(test_context_teardown_frees_kept_memory),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_driver_without_ipc),
        cmocka_unit_test(test_forged_pid_keeps_live_block),
        cmocka_unit_test(test_forged_size_refused),
        cmocka_unit_test(test_forged_driver_part_refused),
        cmocka_unit_test(test_import_racing_destroy_name_made_again),
        cmocka_unit_test(test_sweep_racing_teardown),
        cmocka_unit_test(test_sweep_beside_a_loop),
        cmocka_unit_test(test_teardown_one_deadline),
        cmocka_unit_test(test_exit_while_exports_locked),
        cmocka_unit_test(test_no_block_left),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return failed;
}
