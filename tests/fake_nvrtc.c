/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake NVRTC for the CPU tests of the jit layer (built as
 * libfakenvrtc.so; cuweave opens it through CUWEAVE_LIBNVRTC). It exports the
 * NVRTC entry points cuweave resolves, and:
 *
 *  - "compiles" by writing an image that records the source, the options and
 *    the header contents ("FAKECUBIN" or "//FAKEPTX" first), so that any
 *    change of input changes the code;
 *  - fails a source that contains "#error": the log names the program, the
 *    line and the message, as NVRTC's does;
 *  - lowers a name expression "f<int>" to "_Zfake_f_int_";
 *  - counts compiles (fake_nvrtc_compiles) and keeps the last option list
 *    (fake_nvrtc_last_options), so that tests can prove a compile did or did
 *    not happen and which architecture was asked for.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

typedef int nvrtcResult;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_INVALID_INPUT = 3, NVRTC_ERROR_INVALID_PROGRAM = 4,
       NVRTC_ERROR_COMPILATION = 6, NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION = 9,
       NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10 };

#define MAXN 32

struct prog {
    char *src;
    char *name;
    char *headers; /* names and contents, concatenated */
    int nexpr;
    char *exprs[MAXN];
    char *lowered[MAXN];
    char *log;
    char *code;
    size_t code_size;
    int is_ptx;
    int compiled;
};
typedef struct prog *nvrtcProgram;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_compiles;
static char g_last_options[4096];

static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}
static char *dup(const char *s) { return dupn(s, strlen(s)); }

FAKE_API long fake_nvrtc_compiles(void) {
    pthread_mutex_lock(&g_mu);
    long n = g_compiles;
    pthread_mutex_unlock(&g_mu);
    return n;
}

FAKE_API const char *fake_nvrtc_last_options(void) { return g_last_options; }

FAKE_API nvrtcResult nvrtcVersion(int *major, int *minor) {
    *major = 13;
    *minor = 0;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcGetNumSupportedArchs(int *n) {
    *n = 1;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcGetSupportedArchs(int *archs) {
    archs[0] = 90;
    return NVRTC_SUCCESS;
}

FAKE_API const char *nvrtcGetErrorString(nvrtcResult r) {
    switch (r) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID: return "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID";
    default: return "NVRTC_ERROR_INVALID_INPUT";
    }
}

FAKE_API nvrtcResult nvrtcCreateProgram(nvrtcProgram *out, const char *src, const char *name, int nheaders,
                                        const char *const *headers, const char *const *names) {
    if (!out || !src) return NVRTC_ERROR_INVALID_INPUT;
    struct prog *p = calloc(1, sizeof *p);
    if (!p) return NVRTC_ERROR_INVALID_INPUT;
    p->src = dup(src);
    p->name = dup(name ? name : "default_program");
    size_t total = 1;
    for (int i = 0; i < nheaders; i++) total += strlen(names[i]) + strlen(headers[i]) + 4;
    p->headers = calloc(1, total);
    for (int i = 0; i < nheaders; i++) {
        strcat(p->headers, names[i]);
        strcat(p->headers, ":");
        strcat(p->headers, headers[i]);
        strcat(p->headers, "\n");
    }
    *out = p;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcDestroyProgram(nvrtcProgram *pp) {
    if (!pp || !*pp) return NVRTC_ERROR_INVALID_PROGRAM;
    struct prog *p = *pp;
    for (int i = 0; i < p->nexpr; i++) {
        free(p->exprs[i]);
        free(p->lowered[i]);
    }
    free(p->src);
    free(p->name);
    free(p->headers);
    free(p->log);
    free(p->code);
    free(p);
    *pp = NULL;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcAddNameExpression(nvrtcProgram p, const char *expr) {
    if (!p || !expr || p->compiled || p->nexpr == MAXN) return NVRTC_ERROR_INVALID_INPUT;
    p->exprs[p->nexpr] = dup(expr);
    char *low = malloc(strlen(expr) + 16);
    strcpy(low, "_Zfake_");
    char *o = low + strlen(low);
    for (const char *c = expr; *c; c++) *o++ = (char)((('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') ||
                                                       ('0' <= *c && *c <= '9'))
                                                          ? *c
                                                          : '_');
    *o = '\0';
    p->lowered[p->nexpr++] = low;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int nopts, const char *const *opts) {
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    pthread_mutex_lock(&g_mu);
    g_compiles++;
    g_last_options[0] = '\0';
    for (int i = 0; i < nopts; i++) {
        strncat(g_last_options, opts[i], sizeof g_last_options - strlen(g_last_options) - 2);
        strcat(g_last_options, " ");
    }
    pthread_mutex_unlock(&g_mu);
    p->compiled = 1;
    p->is_ptx = 0;
    for (int i = 0; i < nopts; i++)
        if (strstr(opts[i], "--gpu-architecture=compute_")) p->is_ptx = 1;
    const char *err = strstr(p->src, "#error");
    if (err) {
        int line = 1;
        for (const char *c = p->src; c < err; c++) line += *c == '\n';
        const char *msg = err + 6;
        while (*msg == ' ') msg++;
        size_t len = strcspn(msg, "\n");
        char buf[512];
        snprintf(buf, sizeof buf,
                 "%s(%d): error: #error directive: %.*s\n\n1 error detected in the compilation of \"%s\".\n",
                 p->name, line, (int)len, msg, p->name);
        p->log = dup(buf);
        return NVRTC_ERROR_COMPILATION;
    }
    p->log = dup("");
    size_t n = strlen(p->src) + strlen(p->headers) + strlen(g_last_options) + 64;
    p->code = malloc(n);
    snprintf(p->code, n, "%s\n%s\n%s\n%s", p->is_ptx ? "//FAKEPTX" : "FAKECUBIN", g_last_options, p->headers, p->src);
    p->code_size = strlen(p->code) + (p->is_ptx ? 1 : 0); /* NVRTC's PTX size counts the NUL */
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t *n) {
    if (!p || !p->log) return NVRTC_ERROR_INVALID_PROGRAM;
    *n = strlen(p->log) + 1;
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char *log) {
    if (!p || !p->log) return NVRTC_ERROR_INVALID_PROGRAM;
    strcpy(log, p->log);
    return NVRTC_SUCCESS;
}

static nvrtcResult code_size(nvrtcProgram p, size_t *n, int want_ptx) {
    if (!p || !p->code || p->is_ptx != want_ptx) return NVRTC_ERROR_INVALID_PROGRAM;
    *n = p->code_size;
    return NVRTC_SUCCESS;
}
static nvrtcResult code_copy(nvrtcProgram p, char *out, int want_ptx) {
    if (!p || !p->code || p->is_ptx != want_ptx) return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(out, p->code, p->code_size);
    return NVRTC_SUCCESS;
}

FAKE_API nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t *n) { return code_size(p, n, 1); }
FAKE_API nvrtcResult nvrtcGetPTX(nvrtcProgram p, char *out) { return code_copy(p, out, 1); }
FAKE_API nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t *n) { return code_size(p, n, 0); }
FAKE_API nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char *out) { return code_copy(p, out, 0); }

FAKE_API nvrtcResult nvrtcGetLoweredName(nvrtcProgram p, const char *expr, const char **lowered) {
    if (!p || !p->compiled) return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
    for (int i = 0; i < p->nexpr; i++)
        if (strcmp(p->exprs[i], expr) == 0) {
            *lowered = p->lowered[i];
            return NVRTC_SUCCESS;
        }
    return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}
