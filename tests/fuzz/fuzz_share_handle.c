/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: share handles given to import (include/cuweave/share.h):
 * the 128 bytes another process sends, given to cw_buffer_import and
 * cw_shared_event_import on the fake driver (tests/fake_cuda.c, whose IPC
 * works across real processes).
 *
 * Two exporters run beside the target, copies of it (fork + exec, the role
 * in CW_FUZZ_SHARE_ROLE): a live one with a buffer of 4096 bytes, one of 64
 * and an event, which keeps them until the target exits; and a dead one,
 * which exported a buffer of 4096 bytes and exited without freeing it, its
 * block left in /dev/shm (made again, at most once a second, after an
 * input removed it).
 *
 * An input: a first byte whose bits 0-2 choose the handle the rest changes
 * (0, 5-7: none, all zero bytes; 1: the live 4096-byte buffer's; 2: the
 * 64-byte one's; 3: the event's; 4: the dead exporter's) and whose bit 3
 * imports as an event (else as a buffer); then up to 128 bytes XORed onto
 * that handle. The process field of the fake's part of the handle (bytes
 * 44-47) is set to the live exporter's unless it is the dead exporter's
 * (the fake would open any process's descriptors through /proc).
 *
 * What must hold (share.h, docs/sharing.md "What an import trusts"):
 *  - an import succeeds only for a handle equal, every byte, driver's part
 *    included (the block holds it since the first export), to a live
 *    exporter's handle of that kind; a buffer then has that handle's size;
 *    the exact live handle is always imported;
 *  - a refusal is one of the documented statuses, with *out left NULL;
 *  - the live exporter's three blocks are never removed; the dead
 *    exporter's block is removed exactly when a buffer import is given its
 *    own handle (every byte), and the import then returns
 *    CW_ERROR_INVALID_STATE;
 *  - no fake driver object (device memory, imported memory, event, stream)
 *    is left behind; nothing crashes, leaks or is undefined (ASan, UBSan).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuweave/cuweave.h"

#define die(...)                                      \
    do {                                              \
        fprintf(stderr, "fuzz_share_handle: ");       \
        fprintf(stderr, __VA_ARGS__);                 \
        fprintf(stderr, "\n");                        \
        abort();                                      \
    } while (0)

enum { H = 128, IPC_AT = 40, FAKE_IPC_PID = IPC_AT + 4, MAX_NAMES = 4 };

static long (*fake_live)(const char *kind);
static const char *const k_live[] = {"devmem", "ipcmem", "event", "stream"};
enum { N_LIVE = sizeof k_live / sizeof k_live[0] };

static cw_context *ctx;
static cw_stream *s;

/* The live exporter: its handles (0: 4096-byte buffer, 1: 64-byte buffer,
 * 2: event), pid, blocks' names; the pipe whose end tells it to finish. */
static uint8_t g_live[3][H];
static pid_t g_live_pid;
static int g_live_pipe = -1;
static char g_live_names[MAX_NAMES][300];
static int g_n_live_names;
/* The dead exporter: its handle, its block's name, whether it is there. */
static uint8_t g_dead[H];
static char g_dead_name[300];
static int g_dead_present;
static double g_dead_made;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the exporters (this program again, CW_FUZZ_SHARE_ROLE set) ---- */

static void write_all(int fd, const void *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

static void role(const char *which, int out, int in) {
    cw_context *c = NULL;
    cw_stream *cs = NULL;
    cw_buffer *big = NULL, *small = NULL;
    cw_shared_event *e = NULL;
    cw_shared_handle h[3];
    memset(h, 0, sizeof h);
    const int live = strcmp(which, "live") == 0;
    if (cw_init() || cw_context_create(&c, 0) || cw_stream_create(&cs, c, NULL) ||
        cw_buffer_create_shareable(&big, cs, 4096) || cw_buffer_export(big, &h[0]))
        _exit(2);
    if (live && (cw_buffer_create_shareable(&small, cs, 64) || cw_buffer_export(small, &h[1]) ||
                 cw_shared_event_create(&e, c) || cw_shared_event_export(e, &h[2])))
        _exit(2);
    write_all(out, h, live ? sizeof h : sizeof h[0]);
    if (!live) _exit(0); /* dies without freeing: its block stays */
    char b;
    for (ssize_t r; (r = read(in, &b, 1)) > 0 || (r < 0 && errno == EINTR);) {
    }
    cw_shared_event_destroy(&e);
    cw_buffer_destroy(&small);
    cw_buffer_destroy(&big);
    cw_stream_destroy(&cs);
    cw_context_destroy(&c);
    _exit(0);
}

static void read_all(int fd, void *p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue; /* libFuzzer's SIGALRM (-timeout) */
        if (r <= 0) die("an exporter sent no handle");
        p = (char *)p + r;
        n -= (size_t)r;
    }
}

/* Starts an exporter; returns its pid, its handles in out. *keep: the pipe
 * end that keeps a live one alive. */
static pid_t spawn(const char *which, void *out, size_t n, int *keep) {
    int up[2], down[2];
    if (pipe(up) || pipe(down)) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        char env[64];
        close(up[0]);
        close(down[1]);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        setenv("CW_FUZZ_SHARE_ROLE", which, 1);
        snprintf(env, sizeof env, "%d %d", up[1], down[0]);
        setenv("CW_FUZZ_SHARE_FDS", env, 1);
        execl("/proc/self/exe", "fuzz_share_handle", (char *)NULL);
        _exit(127);
    }
    close(up[1]);
    close(down[0]);
    read_all(up[0], out, n);
    close(up[0]);
    if (keep)
        *keep = down[1];
    else
        close(down[1]);
    return pid;
}

/* The names in /dev/shm of process pid's blocks. */
static int names_of(pid_t pid, char names[][300], int max) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "cuweave.%d.", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d) die("no /dev/shm");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && n < max)
            snprintf(names[n++], 300, "/dev/shm/%s", e->d_name);
    closedir(d);
    return n;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void make_dead(void) {
    pid_t pid = spawn("dead", g_dead, H, NULL);
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (got != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("the dead exporter failed (status %d)", status);
    char names[MAX_NAMES][300];
    if (names_of(pid, names, MAX_NAMES) != 1) die("the dead exporter left no block, or more than one");
    snprintf(g_dead_name, sizeof g_dead_name, "%s", names[0]);
    g_dead_present = 1;
    g_dead_made = now_s();
}

static void cleanup(void) {
    if (g_dead_present) unlink(g_dead_name);
    if (g_live_pipe >= 0) {
        close(g_live_pipe); /* the live exporter frees its objects and exits */
        waitpid(g_live_pid, NULL, 0);
    }
}

/* ---- libFuzzer ---- */

static void fake_next_to(const char *self, const char *var, const char *file) {
    if (getenv(var)) return;
    char path[4200];
    snprintf(path, sizeof path, "%s", self);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "%s", file);
    setenv(var, path, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *which = getenv("CW_FUZZ_SHARE_ROLE");
    if (which) {
        int out = -1, in = -1;
        if (sscanf(getenv("CW_FUZZ_SHARE_FDS") ? getenv("CW_FUZZ_SHARE_FDS") : "", "%d %d", &out, &in) != 2) _exit(2);
        role(which, out, in);
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) die("cannot read /proc/self/exe");
    self[n] = 0;
    fake_next_to(self, "CUWEAVE_LIBCUDA", "libfakecuda.so");
    unsetenv("FAKE_CUDA_NO_IPC");
    void *lib = dlopen(getenv("CUWEAVE_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
    fake_live = lib ? (long (*)(const char *))dlsym(lib, "fake_cuda_live") : NULL;
    if (!fake_live) die("cannot load the fake driver %s", getenv("CUWEAVE_LIBCUDA"));
    g_live_pid = spawn("live", g_live, sizeof g_live, &g_live_pipe);
    g_n_live_names = names_of(g_live_pid, g_live_names, MAX_NAMES);
    if (g_n_live_names != 3) die("the live exporter has %d blocks, not 3", g_n_live_names);
    make_dead();
    atexit(cleanup);
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS ||
        cw_stream_create(&s, ctx, NULL) != CW_SUCCESS)
        die("cuweave could not use the fake driver: %s", cw_last_error()->message);
    /* Each genuine handle once: what the context makes at its first import
     * (its event pool, its release stream) is made before the counts. */
    for (int k = 0; k < 3; k++) {
        cw_shared_handle h;
        memcpy(h.bytes, g_live[k], H);
        cw_buffer *b = NULL;
        cw_shared_event *e = NULL;
        cw_status st = k < 2 ? cw_buffer_import(&b, s, &h) : cw_shared_event_import(&e, ctx, &h);
        if (st) die("a live exporter's handle was refused: %s", cw_last_error()->message);
        if (b) {
            cw_devptr p = 0;
            unsigned char byte;
            if (cw_buffer_get_ptr(b, &p) || cw_copy_to_host(s, &byte, p, 1) || cw_buffer_use(b, s) ||
                cw_stream_synchronize(s))
                die("the imported buffer could not be read: %s", cw_last_error()->message);
        }
        cw_buffer_destroy(&b);
        cw_shared_event_destroy(&e);
    }
    return 0;
}

static uint64_t size_of(const uint8_t *h) {
    uint64_t v;
    memcpy(&v, h + 32, sizeof v);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!g_dead_present && now_s() - g_dead_made >= 1.0) make_dead();
    const unsigned base = data[0] & 7u;
    const int as_event = (data[0] & 8u) != 0;
    uint8_t h[H];
    memset(h, 0, sizeof h);
    if (base >= 1 && base <= 3) memcpy(h, g_live[base - 1], H);
    if (base == 4) memcpy(h, g_dead, H);
    for (size_t i = 1; i < size && i <= H; i++) h[i - 1] ^= data[i];
    const int32_t live_pid = (int32_t)g_live_pid;
    if (memcmp(h + FAKE_IPC_PID, g_dead + FAKE_IPC_PID, sizeof live_pid) != 0)
        memcpy(h + FAKE_IPC_PID, &live_pid, sizeof live_pid);
    cw_shared_handle handle;
    memcpy(handle.bytes, h, H);

    /* The live handle of this kind it is, if any. */
    int match = -1;
    for (int k = as_event ? 2 : 0; k < (as_event ? 3 : 2); k++)
        if (memcmp(h, g_live[k], H) == 0) match = k;
    const int exact = match >= 0;
    const int dead_own = !as_event && memcmp(h, g_dead, H) == 0;
    const int dead_before = g_dead_present && exists(g_dead_name);

    long before[N_LIVE], after[N_LIVE];
    for (int i = 0; i < N_LIVE; i++) before[i] = fake_live(k_live[i]);
    cw_status st;
    if (as_event) {
        cw_shared_event *e = NULL;
        st = cw_shared_event_import(&e, ctx, &handle);
        if (st == CW_SUCCESS) {
            if (!e) die("an import succeeded with no event");
            if (match < 0) die("an event handle that is no exporter's was imported");
            cw_shared_event_info info;
            if (cw_shared_event_get_info(e, &info) || !info.imported) die("the imported event says it is not");
            cw_shared_event_destroy(&e);
        } else if (e) {
            die("a refused event import left *out set");
        }
    } else {
        cw_buffer *b = NULL;
        st = cw_buffer_import(&b, s, &handle);
        if (st == CW_SUCCESS) {
            if (!b) die("an import succeeded with no buffer");
            if (match < 0) die("a buffer handle that is no exporter's was imported");
            cw_buffer_info info;
            if (cw_buffer_get_info(b, &info)) die("cw_buffer_get_info of an imported buffer failed");
            if (info.bytes != size_of(g_live[match]))
                die("imported as %zu bytes, exported as %llu", info.bytes, (unsigned long long)size_of(g_live[match]));
            cw_buffer_destroy(&b);
        } else if (b) {
            die("a refused buffer import left *out set");
        }
    }
    if (exact && st != CW_SUCCESS)
        die("a live exporter's own handle was refused: %s (%s)", cw_status_name(st), cw_last_error()->message);
    if (st != CW_SUCCESS && st != CW_ERROR_INVALID_ARGUMENT && st != CW_ERROR_INVALID_STATE &&
        st != CW_ERROR_NOT_PERMITTED && st != CW_ERROR_INVALID_HANDLE && st != CW_ERROR_DRIVER &&
        st != CW_ERROR_OUT_OF_MEMORY)
        die("an import returned %s (%s)", cw_status_name(st), cw_last_error()->message);

    for (int i = 0; i < g_n_live_names; i++)
        if (!exists(g_live_names[i])) die("the live exporter's block %s was removed", g_live_names[i]);
    const int dead_after = dead_before && exists(g_dead_name);
    if (dead_before && !dead_after && !dead_own) die("the dead exporter's block was removed by a handle not its own");
    if (dead_before && dead_own && dead_after) die("the dead exporter's own handle left its block");
    if (dead_own && st != CW_ERROR_INVALID_STATE)
        die("the dead exporter's handle gave %s, not CW_ERROR_INVALID_STATE", cw_status_name(st));
    if (dead_before && !dead_after) g_dead_present = 0;

    for (int i = 0; i < N_LIVE; i++) {
        after[i] = fake_live(k_live[i]);
        if (after[i] != before[i]) die("fake driver objects (%s): %ld before, %ld after", k_live[i], before[i], after[i]);
    }
    return 0;
}
