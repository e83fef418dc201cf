/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: what rank 0 of a TCP bootstrap makes of the bytes a
 * peer sends it (src/multi/bootstrap_msg.cpp, hello_judge: the hello
 * "rank world[ token]\n", its token, its world, its rank, the ranks already
 * answered), through cwi_comm_hello_judge (src/testing/seam.h).
 *
 * An input: a first byte c (rank 0's world is 2 + (c & 15); with the token
 * "sesame" when c & 16; when c & 32 the rest is not the peer's bytes but a
 * hello made by the bootstrap's own writer, of rank data[2] % 20, world
 * 2 + (data[3] & 15) and the token "sesame" when data[3] & 16, then one byte
 * of it replaced at data[4] by data[5] when c & 64); a second byte whose
 * bits say which ranks 1..8 are answered already; then the bytes.
 *
 * What must hold (docs/multi-gpu.md, "Trust"), besides no crash, leak or
 * undefined behaviour:
 *  - the id goes only to a rank of [1, world) not answered already, and
 *    only for bytes that are exactly the hello the bootstrap's writer makes
 *    of that rank, world and rank 0's token (so a peer without the token,
 *    or with another, or with bytes after its line, never gets it);
 *  - a hello the writer made of a rank not answered, the world and the
 *    token, is answered;
 *  - rank 0 waits for more only while there is no newline and fewer bytes
 *    than any hello holds (274); else it answers or refuses;
 *  - a refusal's reason is 1..200 printable bytes, and the refusal line
 *    rank 0 sends with it reads back, for the peer, as that refusal.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuweave/cuweave.h"
#include "testing/seam.h"

enum { HELLO_MAX = 274, REASON_MAX = 200 };

static void die(const char *what, const uint8_t *in, size_t n) {
    fprintf(stderr, "fuzz_comm_hello: %s (input \"%.*s\", %zu bytes)\n", what, (int)(n > 300 ? 300 : n),
            (const char *)in, n);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const unsigned c = data[0];
    const int world = 2 + (int)(c & 15);
    const char *token = (c & 16) ? "sesame" : NULL;
    unsigned char taken[32] = {0};
    for (int r = 1; r <= 8; r++) taken[r] = (data[1] >> (r - 1)) & 1;
    const uint8_t *in = data + 2;
    size_t n = size - 2;
    char made[512];
    if (c & 32) {
        if (n < 4) return 0;
        const int hw = 2 + (in[1] & 15);
        n = cwi_comm_hello_format(made, sizeof made, in[0] % 20, hw, (in[1] & 16) ? "sesame" : NULL);
        if (n == 0) die("the hello writer refused a buffer of 512 bytes", in, 0);
        if (c & 64) made[in[2] % n] = (char)in[3];
        in = (const uint8_t *)made;
    }
    int rank = -1;
    char reason[REASON_MAX + 8];
    memset(reason, 0, sizeof reason);
    const int got = cwi_comm_hello_judge(in, n, world, token, taken, &rank, reason, sizeof reason);
    if (got == 1) {
        if (rank < 1 || rank >= world) die("the id went to a rank outside [1, world)", in, n);
        if (taken[rank]) die("the id went to a rank answered already", in, n);
        char want[512];
        size_t wn = cwi_comm_hello_format(want, sizeof want, rank, world, token);
        if (wn != n || memcmp(want, in, n) != 0) die("the id went to bytes that are not the hello of that rank", in, n);
    } else if (got == 0) {
        const size_t rl = strlen(reason);
        if (rl == 0 || rl > REASON_MAX) die("a refusal's reason is empty or too long", in, n);
        for (size_t i = 0; i < rl; i++)
            if (reason[i] < ' ' || reason[i] > '~') die("a refusal's reason has a byte that is not printable", in, n);
        char line[512];
        size_t ln = cwi_comm_refusal_format(line, sizeof line, reason);
        int w = 0, whole = 0;
        unsigned char id[128];
        if (cwi_comm_reply_parse(line, ln, 1, &w, id, &whole) != CW_ERROR_INVALID_ARGUMENT || !whole ||
            !strstr(cw_last_error()->message, reason))
            die("a refusal line does not read back as that refusal", in, n);
    } else if (got == -1) {
        if (memchr(in, '\n', n) || n >= HELLO_MAX) die("rank 0 waits for more after a newline or a full hello", in, n);
    } else {
        die("cwi_comm_hello_judge returned something else", in, n);
    }
    /* the genuine hello of every rank not answered is answered */
    for (int r = 1; r < world && r < 20; r += 3) {
        char h[512];
        size_t hn = cwi_comm_hello_format(h, sizeof h, r, world, token);
        int gr = -1;
        const int g = cwi_comm_hello_judge(h, hn, world, token, taken, &gr, reason, sizeof reason);
        if (taken[r] ? g != 0 : (g != 1 || gr != r)) die("a genuine hello was not judged as it should", in, n);
    }
    return 0;
}
