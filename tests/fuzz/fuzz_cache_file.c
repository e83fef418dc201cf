/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: the kernel cache's file reader (src/jit/cache.cpp,
 * file_decode: what disk_load does with the bytes of <dir>/<key>.cwk), through
 * cwi_cache_file_read (src/testing/seam.h).
 *
 * The first byte of an input says what the rest is:
 *  - mode & 3 == 0: a whole file, read as it is, asked for the key the file
 *    names (bytes 48..79), or for another key when mode & 4;
 *  - otherwise: a payload; the target makes its header right (magic, schema,
 *    size, SHA-256, key), so that the fuzzer reaches the payload decoder
 *    past the hash, then spoils one header field when (mode >> 2) & 7 is 1
 *    to 6 (magic, schema, size, a digest byte, the key asked for, the last
 *    byte of the file).
 *
 * What must hold, besides no crash, leak or undefined behaviour:
 *  - a file is accepted only when its header verifies (checked here, from
 *    the layout in docs/kernels.md, with the library's SHA-256) and its
 *    payload is one the cache's writer makes (is_ptx 0 or 1, code of at
 *    least one byte with no NUL in PTX, names and lowered names without NUL
 *    bytes, non-empty names, nothing left over);
 *  - an accepted file written back by the cache's writer gives the very
 *    same bytes;
 *  - a file with a good header and such a payload is accepted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/seam.h"

enum { HEADER = 80, SCHEMA = 1, MAX_NAMES = 1 << 16 };

static void die(const char *what) {
    fprintf(stderr, "fuzz_cache_file: %s\n", what);
    abort();
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t u64_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A length-prefixed string without NUL bytes (non-empty when nonempty). */
static int take_str(const uint8_t **p, size_t *n, int nonempty) {
    if (*n < 8) return 0;
    uint64_t k = u64_at(*p);
    *p += 8;
    *n -= 8;
    if (k > *n || (nonempty && k == 0) || memchr(*p, 0, (size_t)k)) return 0;
    *p += k;
    *n -= (size_t)k;
    return 1;
}

/* 1 when p..p+n is a payload the writer makes (entry_encode). */
static int payload_ok(const uint8_t *p, size_t n) {
    if (n < 16) return 0;
    const uint32_t is_ptx = u32_at(p);
    const uint64_t size = u64_at(p + 8);
    p += 16;
    n -= 16;
    if (is_ptx > 1 || size == 0 || size > n) return 0;
    if (is_ptx && memchr(p, 0, (size_t)size)) return 0;
    p += size;
    n -= (size_t)size;
    if (n < 4) return 0;
    const uint32_t names = u32_at(p);
    p += 4;
    n -= 4;
    if (names > MAX_NAMES) return 0;
    for (uint32_t i = 0; i < names; i++)
        if (!take_str(&p, &n, 1) || !take_str(&p, &n, 0)) return 0;
    return n == 0;
}

/* 1 when the header of the n-byte file verifies for key. */
static int header_ok(const uint8_t *f, size_t n, const uint8_t key[32]) {
    if (n < HEADER) return 0;
    if (memcmp(f, "CWKC", 4) != 0 || u32_at(f + 4) != SCHEMA || u64_at(f + 8) != n - HEADER) return 0;
    if (memcmp(f + 48, key, 32) != 0) return 0;
    unsigned char digest[32];
    cwi_sha256(f + HEADER, n - HEADER, 0, digest);
    return memcmp(digest, f + 16, 32) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    data++;
    size--;
    uint8_t key[32];
    uint8_t *file;
    size_t n;
    if ((mode & 3) == 0) {
        n = size;
        file = malloc(n ? n : 1);
        if (!file) return 0;
        memcpy(file, data, n);
        if (n >= HEADER)
            memcpy(key, file + 48, 32);
        else
            memset(key, 0x5a, 32);
        if (mode & 4) key[mode >> 5] ^= 1;
    } else {
        n = HEADER + size;
        file = malloc(n);
        if (!file) return 0;
        memcpy(file + HEADER, data, size);
        const uint32_t schema = SCHEMA;
        const uint64_t len = size;
        memcpy(file, "CWKC", 4);
        memcpy(file + 4, &schema, 4);
        memcpy(file + 8, &len, 8);
        cwi_sha256(file + HEADER, size, 0, file + 16);
        for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + mode);
        memcpy(file + 48, key, 32);
        switch ((mode >> 2) & 7) {
        case 1: file[1] ^= 0x20; break;
        case 2: file[4] ^= 1; break;
        case 3: file[8] ^= 1; break;
        case 4: file[16 + (mode >> 5)] ^= 0x80; break;
        case 5: key[31] ^= 1; break;
        case 6: n--; break;
        default: break;
        }
    }
    const int good_header = header_ok(file, n, key);
    const int good = good_header && payload_ok(file + HEADER, n - HEADER);
    unsigned char *again = NULL;
    size_t again_n = 0;
    const int r = cwi_cache_file_read(file, n, key, &again, &again_n);
    if (r < 0) die("the writer failed on an entry the reader accepted");
    if (r == 1) {
        if (!good_header) die("accepted a file whose header does not verify");
        if (!good) die("accepted a payload the cache's writer never makes");
        if (again_n != n || memcmp(again, file, n) != 0) die("an accepted file does not write back as the same bytes");
    } else if (good) {
        die("rejected a well-formed file");
    }
    free(again);
    free(file);
    return 0;
}
