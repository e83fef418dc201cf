/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: what a rank of a TCP bootstrap makes of the bytes rank
 * 0 answers it (src/multi/bootstrap_msg.cpp, reply_parse and
 * reply_complete: the id message "cuweave-comm-id 1\n<world>\n<256 hex>\n",
 * or a refusal "cuweave-refused <reason>\n"), through cwi_comm_reply_parse
 * (src/testing/seam.h). The same message is the content of the id file
 * (fuzz_comm_file reads it through the file).
 *
 * An input: a first byte m; when m & 3 is 0 the rest is the reply as it is;
 * else the target makes a good id message with the bootstrap's own writer
 * (world 1 + the next two bytes, the id the next 128 bytes, zeros past the
 * end) and then, for m & 3: 1, replaces the byte at data[1] by data[2] (2:
 * cuts the message at data[1]; 3: appends the rest of the input).
 *
 * What must hold, besides no crash, leak or undefined behaviour (the reader
 * is bounded by its length: a message of the magic line and 302 digits
 * read past its buffer before):
 *  - an id is accepted only when the bytes are exactly what the writer
 *    makes of that world and id (world in [1, 2^20]);
 *  - a message the writer made, unchanged, is accepted with its world and id;
 *  - an accepted reply is whole (a rank reading it stops there);
 *  - a reply that is refused says why, in a detail of printable bytes only
 *    (a refusal's reason is shown only when it is printable).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuweave/cuweave.h"
#include "testing/seam.h"

static void die(const char *what, const uint8_t *in, size_t n) {
    fprintf(stderr, "fuzz_comm_id: %s (input \"%.*s\", %zu bytes)\n", what, (int)(n > 400 ? 400 : n),
            (const char *)in, n);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned m = data[0] & 3;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    uint8_t *buf = NULL;
    int made_world = 0;
    unsigned char made_id[128];
    if (m) {
        uint8_t src[130] = {0};
        memcpy(src, in, n < sizeof src ? n : sizeof src);
        made_world = 1 + (src[0] | src[1] << 8);
        memcpy(made_id, src + 2, 128);
        buf = malloc(320 + n);
        if (!buf) return 0;
        size_t len = cwi_comm_id_format((char *)buf, 320 + n, made_world, made_id);
        if (len == 0) die("the id writer refused a buffer of 320 bytes", in, n);
        if (m == 1 && n >= 2) buf[in[0] % len] = in[1];
        if (m == 2 && n >= 1) len = in[0] % len;
        if (m == 3) {
            memcpy(buf + len, in, n);
            len += n;
        }
        in = buf;
        n = len;
    }
    int world = 0, whole = 0;
    unsigned char id[128];
    const int st = cwi_comm_reply_parse(in, n, 1, &world, id, &whole);
    if (st == CW_SUCCESS) {
        if (world < 1 || world > (1 << 20)) die("an accepted world size is out of range", in, n);
        char again[512];
        size_t an = cwi_comm_id_format(again, sizeof again, world, id);
        if (an != n || memcmp(again, in, n) != 0) die("accepted bytes are not what the writer makes of them", in, n);
        if (!whole) die("an accepted reply is not whole", in, n);
    } else {
        const char *d = cw_last_error()->message;
        if (!d[0]) die("a refused reply has no detail", in, n);
        for (; *d; d++)
            if (*d < ' ' || *d > '~') die("the detail of a refused reply has a byte that is not printable", in, n);
    }
    /* the writer's own message, unchanged, reads back */
    if (m) {
        char good[512];
        size_t gn = cwi_comm_id_format(good, sizeof good, made_world, made_id);
        if (cwi_comm_reply_parse(good, gn, 1, &world, id, &whole) != CW_SUCCESS || world != made_world ||
            memcmp(id, made_id, 128) != 0 || !whole)
            die("a message the writer made is not read back", (const uint8_t *)good, gn);
    }
    free(buf);
    return 0;
}
