/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: the environment variables the library parses (those it
 * only hands to dlopen, CUWEAVE_LIBCUDA, CUWEAVE_LIBNVRTC, CUWEAVE_LIBNCCL,
 * CUDA_HOME and CUDA_PATH, are left out): the kernel cache's directory
 * (CUWEAVE_CACHE_DIR, XDG_CACHE_HOME, HOME) and CUWEAVE_SERIALIZE, through
 * cwi_cache_dir_from_env and cwi_serialize_from_env (src/testing/seam.h).
 * Nothing is written to the file system.
 *
 * An input: a first byte whose bits 0 to 3 say which of CUWEAVE_CACHE_DIR,
 * XDG_CACHE_HOME, HOME and CUWEAVE_SERIALIZE are set; a second byte g: the
 * first three values are repeated to at least 8 * g bytes (so that long
 * values, up to 2040 bytes, are as easy to reach as short ones); then the
 * values in that order, separated by NUL bytes. The variables are set with
 * putenv on buffers of the target's own (setenv would leak a copy a run).
 *
 * What must hold (include/cuweave/jit.h, docs/kernels.md): the directory is
 * $CUWEAVE_CACHE_DIR when set ("" or "off": none), else
 * $XDG_CACHE_HOME/cuweave when that is an absolute path, else
 * $HOME/.cache/cuweave when HOME is not empty, else none; a directory of
 * DIR_MAX (944) bytes or more (longer than the cache's paths allow, and
 * than cw_jit_cache_configure accepts) means none, never a shortened one. Every pool is single exactly when CUWEAVE_SERIALIZE is "1".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuweave/cuweave.h"
#include "testing/seam.h"

enum { DIR_MAX = 944 };

static void die(const char *what, const char *got, const char *want) {
    fprintf(stderr, "fuzz_env: %s: got \"%.200s\" (%zu bytes), expected \"%.200s\" (%zu bytes)\n", what, got,
            strlen(got), want, strlen(want));
    abort();
}

enum { VALUE_MAX = 8192 };
static char g_env[4][VALUE_MAX + 32];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const unsigned which = data[0], grow = data[1] * 8u;
    data += 2;
    size -= 2;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *names[4] = {"CUWEAVE_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "CUWEAVE_SERIALIZE"};
    const char *value[4] = {NULL, NULL, NULL, NULL};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        if (!(which & (1u << i))) {
            unsetenv(names[i]);
            continue;
        }
        const char *v = at < size ? text + at : "";
        at += strlen(v) + 1;
        const size_t vl = strlen(v), head = (size_t)snprintf(g_env[i], 64, "%s=", names[i]);
        char *out = g_env[i] + head;
        size_t n = 0;
        do {
            for (size_t k = 0; k < vl && n < VALUE_MAX; k++) out[n++] = v[k];
        } while (i < 3 && vl && n < grow && n < VALUE_MAX);
        out[n] = '\0';
        value[i] = out;
        putenv(g_env[i]);
    }

    char *want = malloc(VALUE_MAX + 32);
    if (!want) abort();
    if (value[0])
        snprintf(want, VALUE_MAX + 32, "%s", strcmp(value[0], "off") == 0 ? "" : value[0]);
    else if (value[1] && value[1][0] == '/')
        snprintf(want, VALUE_MAX + 32, "%s/cuweave", value[1]);
    else if (value[2] && value[2][0])
        snprintf(want, VALUE_MAX + 32, "%s/.cache/cuweave", value[2]);
    else
        want[0] = '\0';
    if (strlen(want) >= DIR_MAX) want[0] = '\0';
    char got[4096];
    cwi_cache_dir_from_env(got, sizeof got);
    if (strcmp(got, want) != 0) die("the kernel cache directory", got, want);

    const int single = cwi_serialize_from_env();
    if (single != (value[3] && strcmp(value[3], "1") == 0))
        die("CUWEAVE_SERIALIZE", single ? "single" : "not single", single ? "not single" : "single");
    free(want);
    free(text);
    return 0;
}
