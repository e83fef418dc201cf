/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: the NVRTC option canonicaliser of the kernel cache
 * (canonical_options in src/jit/cache.cpp, which takes the strings of
 * cw_program_settings.options), through cwi_canonical_options
 * (src/testing/seam.h).
 *
 * An input is the option list, its entries separated by NUL bytes; when the
 * first byte is 0xff, entry (second byte % count) is NULL instead (the rest
 * follows them).
 *
 * What must hold, besides no crash, leak or undefined behaviour:
 *  - the result is CW_SUCCESS or CW_ERROR_INVALID_ARGUMENT; a NULL entry is
 *    refused;
 *  - on success: no more options than entries; each option starts with '-',
 *    has no space or tab at either end, and is not refused (the architecture,
 *    the options that write files or time the compile); the options are in
 *    the canonical order (by option name, macro options by macro name) with
 *    no option the same as the one before it; reads_files says whether one
 *    is an include path or a pre-include;
 *  - canonical form is a fixed point: canonicalising the result again gives
 *    the same options.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuweave/common.h"
#include "testing/seam.h"

enum { MAX_ENTRIES = 256 };

static void die(const char *what, const char *opt) {
    fprintf(stderr, "fuzz_options: %s%s%s%s\n", what, opt ? " (\"" : "", opt ? opt : "", opt ? "\")" : "");
    abort();
}

/* The name of option o (up to '='). */
static size_t name_len(const char *o) {
    const char *eq = strchr(o, '=');
    return eq ? (size_t)(eq - o) : strlen(o);
}

static int name_is(const char *o, const char *name) {
    return name_len(o) == strlen(name) && memcmp(o, name, strlen(name)) == 0;
}

/* The order key: the name, or "macro:" and the macro's name. */
static void group_key(const char *o, char *out, size_t cap) {
    const size_t n = name_len(o);
    if (o[n] == '=' && (name_is(o, "--define-macro") || name_is(o, "--undefine-macro"))) {
        const char *v = o + n + 1;
        snprintf(out, cap, "macro:%.*s", (int)strcspn(v, "="), v);
        return;
    }
    snprintf(out, cap, "%.*s", (int)n, o);
}

static const char *const refused[] = {"--gpu-architecture", "-arch", "--create-pch", "-create-pch", "--pch", "-pch",
                                      "--pch-dir", "-pch-dir", "--use-pch", "-use-pch", "--time", "-time",
                                      "--fdevice-time-trace", "-fdevice-time-trace"};

static void check(char **out, size_t n_out, size_t n_in, int reads_files) {
    if (n_out > n_in) die("more options than entries", NULL);
    int reads = 0;
    char prev_key[2200] = "", key[2200];
    for (size_t i = 0; i < n_out; i++) {
        const char *o = out[i];
        const size_t len = strlen(o);
        if (len == 0 || o[0] != '-') die("an option that does not start with '-'", o);
        if (o[len - 1] == ' ' || o[len - 1] == '\t' || o[0] == ' ' || o[0] == '\t') die("a space left at an end", o);
        for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
            if (name_is(o, refused[r])) die("a refused option came through", o);
        if (name_is(o, "--include-path") || name_is(o, "--pre-include")) reads = 1;
        group_key(o, key, sizeof key);
        if (i > 0 && strcmp(prev_key, key) > 0) die("options out of the canonical order", o);
        if (i > 0 && strcmp(out[i - 1], o) == 0) die("an option repeated right after itself", o);
        memcpy(prev_key, key, sizeof key);
    }
    if (reads != reads_files) die("reads_files is wrong", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int null_at = -1;
    if (size >= 2 && data[0] == 0xff) {
        null_at = data[1];
        data += 2;
        size -= 2;
    }
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *entries[MAX_ENTRIES];
    size_t n = 0;
    for (size_t at = 0; at <= size && n < MAX_ENTRIES;) {
        entries[n++] = text + at;
        at += strlen(text + at) + 1;
    }
    if (null_at >= 0) entries[(size_t)null_at % n] = NULL;

    char **out = NULL;
    size_t n_out = 0;
    int reads = 0;
    const int st = cwi_canonical_options(entries, n, &out, &n_out, &reads);
    if (st != CW_SUCCESS && st != CW_ERROR_INVALID_ARGUMENT) die("a status other than success or invalid argument", NULL);
    if (null_at >= 0 && st == CW_SUCCESS) die("a NULL entry was accepted", NULL);
    if (st == CW_SUCCESS) {
        check(out, n_out, n, reads);
        char **again = NULL;
        size_t n_again = 0;
        int reads_again = 0;
        if (cwi_canonical_options((const char *const *)out, n_out, &again, &n_again, &reads_again) != CW_SUCCESS)
            die("the canonical form was refused", NULL);
        if (n_again != n_out || reads_again != reads) die("canonicalising the canonical form changed it", NULL);
        for (size_t i = 0; i < n_out; i++)
            if (strcmp(again[i], out[i]) != 0) die("canonicalising the canonical form changed an option", out[i]);
        cwi_free_strings(again, n_again);
    }
    cwi_free_strings(out, n_out);
    free(text);
    return 0;
}
