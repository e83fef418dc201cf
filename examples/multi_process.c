/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One process per GPU (cuweave/collective.h, cuweave/share.h): the program
 * starts its own ranks, as a launcher (mpirun, torchrun, a job script)
 * would, each a fresh process of this executable:
 *
 *  1. the ranks join one NCCL communicator by rank: the launcher (here the
 *     parent) sets CUWEAVE_RANK, CUWEAVE_WORLD_SIZE and CUWEAVE_COMM_FILE,
 *     and every rank calls cw_comm_bootstrap (rank 0 makes the id and
 *     writes it to the file, the others read it; on several machines
 *     CUWEAVE_COMM_ADDR=host:port of rank 0 does the same over TCP);
 *  2. an all-reduce by rank: rank r's buffer holds (r + 1) * (i % 7 + 1) at
 *     element i, the sum over n ranks is n (n + 1) / 2 * (i % 7 + 1),
 *     checked element by element in every rank;
 *  3. a frame handed from rank 0 to rank 1 through a shared buffer and a
 *     shared event (CUDA IPC): rank 0 writes a 1920x1080 frame on its
 *     stream and records the event; rank 1 imports both, makes its stream
 *     wait for the event (on the GPU: no CPU wait on rank 0's work), copies
 *     the frame out and checks every word; rank 0 keeps the buffer until
 *     rank 1 says it is done (the library would keep it for an importer
 *     anyway; the acknowledgement keeps the example's exit order simple).
 *
 *       rank 0 stream  ─[write frame]●(record)──────────────▶
 *                                    │ shared event
 *       rank 1 stream  ─(wait)───────▼[copy frame out]──────▶
 *
 * With two GPUs or more, rank r runs on GPU r and the all-reduce runs; with
 * one GPU two processes share it and only the frame is handed over (NCCL
 * wants a GPU per rank). The frame is on GPU 0: rank 1 opens it in a
 * context of GPU 0. NCCL_NVLS_ENABLE=0 is set for the ranks (the machines
 * this runs on forbid NVLink multicast).
 *
 * Exits 77 without a GPU, 1 when a call fails or a value is wrong, else 0.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/multi_process.c \
 *      build-make/libcuweave.so.2 -o multi_process
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuweave/cuweave.h>

extern char **environ;

enum { FRAME_WORDS = 1920 * 1080 / 4, REDUCE_COUNT = 1 << 20, WAIT_MS = 60000 };

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cw_status st_ = (call);                                                                    \
        if (st_ != CW_SUCCESS) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #call, cw_last_error()->message); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int g_rank = -1;

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Writes n bytes to path atomically (a temporary file, then a rename). */
static int publish(const char *path, const void *data, size_t n) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return 1;
    const int bad = fwrite(data, 1, n, f) != n;
    if (fclose(f) != 0 || bad) return 1;
    return rename(tmp, path) != 0;
}

/* Reads n bytes from path once it exists (polling, up to WAIT_MS). */
static int await_file(const char *path, void *data, size_t n) {
    for (long waited = 0; waited < WAIT_MS; waited += 2) {
        FILE *f = fopen(path, "rb");
        if (f) {
            const size_t got = n ? fread(data, 1, n, f) : 0;
            fclose(f);
            return got != n;
        }
        sleep_ms(2);
    }
    fprintf(stderr, "rank %d: %s did not appear within %d ms\n", g_rank, path, WAIT_MS);
    return 1;
}

static uint32_t frame_word(size_t i) { return (uint32_t)(i * 2654435761u) ^ 0x5eedu; }

/* Rank 0: writes the frame on its stream, records the shared event, hands
 * both over, and keeps the buffer until rank 1 is done with it. */
static int produce_frame(cw_context *ctx, const char *dir) {
    cw_stream *s = NULL;
    TRY(cw_stream_create(&s, ctx, NULL));
    cw_buffer *frame = NULL;
    TRY(cw_buffer_create_shareable(&frame, s, FRAME_WORDS * sizeof(uint32_t)));
    cw_buffer_info bi;
    TRY(cw_buffer_get_info(frame, &bi));
    uint32_t *host = malloc(FRAME_WORDS * sizeof *host);
    if (!host) return 1;
    for (size_t i = 0; i < FRAME_WORDS; i++) host[i] = frame_word(i);
    TRY(cw_copy_to_device(s, bi.dptr, host, FRAME_WORDS * sizeof *host));
    cw_shared_event *ready = NULL;
    TRY(cw_shared_event_create(&ready, ctx));
    TRY(cw_shared_event_record(ready, s)); /* before telling the other process */
    cw_shared_handle h[2];
    TRY(cw_buffer_export(frame, &h[0]));
    TRY(cw_shared_event_export(ready, &h[1]));
    char path[512];
    snprintf(path, sizeof path, "%s/frame", dir);
    if (publish(path, h, sizeof h)) return 1;
    snprintf(path, sizeof path, "%s/frame-done", dir);
    const int bad = await_file(path, NULL, 0);
    TRY(cw_stream_synchronize(s)); /* the host copy's source stays valid until here */
    free(host);
    cw_shared_event_destroy(&ready);
    cw_buffer_destroy(&frame);
    cw_stream_destroy(&s);
    if (!bad) printf("rank 0: frame of %d words written on GPU 0 and handed over\n", FRAME_WORDS);
    return bad;
}

/* Rank 1: imports the frame and the event into a context of GPU 0, waits
 * for the event on the GPU, copies the frame out and checks every word. */
static int consume_frame(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/frame", dir);
    cw_shared_handle h[2];
    if (await_file(path, h, sizeof h)) return 1;
    cw_context *ctx0 = NULL;
    TRY(cw_context_create(&ctx0, 0));
    cw_stream *s = NULL;
    TRY(cw_stream_create(&s, ctx0, NULL));
    cw_buffer *frame = NULL;
    TRY(cw_buffer_import(&frame, s, &h[0]));
    cw_shared_event *ready = NULL;
    TRY(cw_shared_event_import(&ready, ctx0, &h[1]));
    TRY(cw_shared_event_wait(ready, s)); /* the copy below runs after rank 0's write */
    cw_buffer_info bi;
    TRY(cw_buffer_get_info(frame, &bi));
    uint32_t *host = malloc(FRAME_WORDS * sizeof *host);
    if (!host) return 1;
    TRY(cw_copy_to_host(s, host, bi.dptr, FRAME_WORDS * sizeof *host));
    TRY(cw_stream_synchronize(s));
    size_t wrong = 0;
    for (size_t i = 0; i < FRAME_WORDS; i++) wrong += host[i] != frame_word(i);
    free(host);
    cw_buffer_destroy(&frame); /* closes the import */
    cw_shared_event_destroy(&ready);
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx0);
    snprintf(path, sizeof path, "%s/frame-done", dir);
    if (publish(path, "", 0)) return 1;
    printf("rank 1: frame received from rank 0 through a shared buffer and event: %zu of %d words wrong\n", wrong,
           FRAME_WORDS);
    return wrong != 0;
}

/* Every rank: the all-reduce by rank, checked element by element. */
static int all_reduce(cw_context *ctx, int nranks) {
    cw_comm *comm = NULL;
    TRY(cw_comm_bootstrap(&comm, ctx, NULL)); /* CUWEAVE_RANK, _WORLD_SIZE, _COMM_FILE */
    cw_comm_info ci;
    TRY(cw_comm_get_info(comm, &ci));
    cw_stream *s = NULL;
    TRY(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    TRY(cw_buffer_create(&buf, s, REDUCE_COUNT * sizeof(float)));
    cw_buffer_info bi;
    TRY(cw_buffer_get_info(buf, &bi));
    float *host = malloc(REDUCE_COUNT * sizeof *host);
    if (!host) return 1;
    for (size_t i = 0; i < REDUCE_COUNT; i++) host[i] = (float)((g_rank + 1) * (int)(i % 7 + 1));
    TRY(cw_copy_to_device(s, bi.dptr, host, REDUCE_COUNT * sizeof *host));
    TRY(cw_comm_all_reduce_rank(comm, g_rank, bi.dptr, bi.dptr, REDUCE_COUNT, CW_FLOAT32, CW_SUM, s));
    TRY(cw_copy_to_host(s, host, bi.dptr, REDUCE_COUNT * sizeof *host));
    TRY(cw_stream_synchronize(s));
    size_t wrong = 0;
    for (size_t i = 0; i < REDUCE_COUNT; i++)
        wrong += host[i] != (float)(nranks * (nranks + 1) / 2 * (int)(i % 7 + 1));
    free(host);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_comm_destroy(&comm);
    printf("rank %d of %d (GPU %d): all-reduce (sum) of %d floats by rank: %zu wrong\n", g_rank, ci.size, g_rank,
           REDUCE_COUNT, wrong);
    return wrong != 0;
}

static int run_rank(int rank, int nranks, int device, int reduce, const char *dir) {
    g_rank = rank;
    cw_context *ctx = NULL;
    TRY(cw_context_create(&ctx, device));
    int bad = 0;
    if (rank == 0) bad |= produce_frame(ctx, dir);
    if (rank == 1) bad |= consume_frame(dir);
    if (reduce) bad |= all_reduce(ctx, nranks);
    cw_context_destroy(&ctx);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "--rank") == 0)
        return run_rank(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argv[6]);

    int ndev = 0;
    if (cw_init() != CW_SUCCESS || cw_device_count(&ndev) != CW_SUCCESS || ndev < 1) {
        printf("multi_process: no usable GPU (%s): nothing to do\n", cw_last_error()->message);
        return 77;
    }
    cw_versions v;
    if (cw_get_versions(&v) != CW_SUCCESS) v.nccl = 0;
    const int nranks = ndev >= 2 ? ndev : 2;
    const int reduce = ndev >= 2 && v.nccl != 0;
    printf("multi_process: %d GPU(s), %d ranks, one process each; %s\n", ndev, nranks,
           reduce ? "an all-reduce by rank and a frame handed between processes"
                  : ndev < 2 ? "a frame handed between two processes on GPU 0 (the all-reduce needs two GPUs)"
                             : "a frame handed between processes (no NCCL: CUWEAVE_LIBNCCL or libnccl.so.2)");
    fflush(stdout); /* before the ranks write theirs */
    char dir[] = "/tmp/cw-multi-process-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char comm_file[600], arg[5][32];
    snprintf(comm_file, sizeof comm_file, "%s/comm.id", dir);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("CUWEAVE_COMM_FILE", comm_file, 1);
    snprintf(arg[1], sizeof arg[1], "%d", nranks);
    setenv("CUWEAVE_WORLD_SIZE", arg[1], 1);
    pid_t pids[64];
    int started = 0, bad = 0;
    for (int r = 0; r < nranks && r < 64; r++, started++) {
        snprintf(arg[0], sizeof arg[0], "%d", r);
        snprintf(arg[2], sizeof arg[2], "%d", ndev >= 2 ? r : 0);
        snprintf(arg[3], sizeof arg[3], "%d", reduce);
        setenv("CUWEAVE_RANK", arg[0], 1);
        char *child_argv[] = {argv[0], "--rank", arg[0], arg[1], arg[2], arg[3], dir, NULL};
        int e = posix_spawn(&pids[r], "/proc/self/exe", NULL, NULL, child_argv, environ);
        if (e != 0) {
            fprintf(stderr, "multi_process: starting rank %d: %s\n", r, strerror(e));
            bad = 1;
            break;
        }
    }
    for (int r = 0; r < started; r++) {
        int status = 0;
        if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "multi_process: rank %d failed (status %d)\n", r, status);
            bad = 1;
        }
    }
    char path[700];
    const char *files[] = {"frame", "frame-done", "comm.id"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        (void)unlink(path);
    }
    (void)rmdir(dir);
    printf("%s\n", bad ? "FAILED" : "ok");
    return bad;
}
