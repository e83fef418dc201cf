/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: what a rank of a file bootstrap makes of what it finds
 * at the path (src/multi/bootstrap.cpp, file_fetch: the checks of what sits
 * there, the read, the id message's parser), through cwi_comm_id_file_read
 * (src/testing/seam.h), on files this target writes in a directory of its
 * own (removed at exit).
 *
 * An input: a first byte k; k & 7 says what the target puts at the path: 0
 * to 3 a regular file of the rest of the input (mode 0600; 3: 0644), 4 a
 * FIFO, 5 a symbolic link to such a file, 6 a directory, 7 nothing (the
 * reader then polls for 0 ms). The rank's world is 1 + (k >> 3). When k & 7
 * is 1 the rest (past a byte that gives the world) is an id message made by
 * the bootstrap's writer from the input's bytes (as fuzz_comm_id does), so
 * that the reader's accepting path is reached.
 *
 * What must hold, besides no crash, leak, undefined behaviour or a wait
 * (a FIFO opened for reading used to block past any timeout; libFuzzer's
 * -timeout catches a hang):
 *  - a regular file of this user is accepted exactly when its bytes are an
 *    id message of the rank's world (what cwi_comm_reply_parse accepts, the
 *    same id), whatever its mode;
 *  - a FIFO, a link, a directory are refused (CW_ERROR_INVALID_ARGUMENT),
 *    nothing at the path is CW_ERROR_TIMEOUT.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuweave/cuweave.h"
#include "testing/seam.h"

static char g_dir[64], g_path[128], g_target[128];

static void die(const char *what, int st) {
    fprintf(stderr, "fuzz_comm_file: %s (status %d: %s)\n", what, st, cw_last_error()->message);
    abort();
}

static void clean(void) {
    unlink(g_path);
    rmdir(g_path);
    unlink(g_target);
}

static void remove_dir(void) {
    clean();
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(g_dir, sizeof g_dir, "/tmp/cw-fuzz-comm-XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_path, sizeof g_path, "%s/id", g_dir);
    snprintf(g_target, sizeof g_target, "%s/target", g_dir);
    atexit(remove_dir);
    return 0;
}

static void write_file(const char *path, const uint8_t *b, size_t n, mode_t mode) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0 || chmod(path, mode) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned kind = data[0] & 7;
    const int world = 1 + (data[0] >> 3);
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    char made[512];
    if (kind == 1) {
        uint8_t src[129] = {0};
        memcpy(src, in, n < sizeof src ? n : sizeof src);
        n = cwi_comm_id_format(made, sizeof made, src[0] & 1 ? world : 1 + src[0], src + 1);
        if (n == 0) abort();
        in = (const uint8_t *)made;
    }
    clean();
    if (kind <= 3) write_file(g_path, in, n, kind == 3 ? 0644 : 0600);
    if (kind == 4 && mkfifo(g_path, 0600) != 0) abort();
    if (kind == 5) {
        write_file(g_target, in, n, 0600);
        if (symlink(g_target, g_path) != 0) abort();
    }
    if (kind == 6 && mkdir(g_path, 0700) != 0) abort();
    unsigned char id[128];
    const int st = cwi_comm_id_file_read(g_path, world, 0, id);
    if (kind <= 3) {
        int w = 0, whole = 0;
        unsigned char want[128];
        const int pst = cwi_comm_reply_parse(in, n, 1, &w, want, &whole);
        const int is_id = pst == CW_SUCCESS && !(n >= 16 && memcmp(in, "cuweave-refused ", 16) == 0);
        if (st == CW_SUCCESS) {
            if (!is_id || w != world || memcmp(id, want, 128) != 0)
                die("a file was accepted that is not an id message of this world", st);
        } else if (is_id && w == world) {
            die("an id message of this world was refused", st);
        } else if (st != CW_ERROR_INVALID_ARGUMENT) {
            die("a file that is not an id was not CW_ERROR_INVALID_ARGUMENT", st);
        }
    } else if (kind <= 6) {
        if (st != CW_ERROR_INVALID_ARGUMENT) die("a FIFO, link or directory was not refused", st);
    } else if (st != CW_ERROR_TIMEOUT) {
        die("nothing at the path was not CW_ERROR_TIMEOUT", st);
    }
    return 0;
}
