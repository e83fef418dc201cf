/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target: every public settings struct, from raw bytes, given to
 * the real public functions that take it, on the fake driver
 * (tests/fake_cuda.c, features all) and the fake NVRTC (tests/fake_nvrtc.c).
 *
 * An input: a first byte choosing the struct (its value % 11, below), then
 * the struct's bytes (missing ones are zero), then what the pointer fields
 * need: a selector byte per pointer field and, for cw_program_settings,
 * strings (NUL-separated) for the name, options, headers, name expressions
 * and the source. Pointer fields the library only compares with live
 * handles (the pools of cw_operator_settings and cw_pipeline_settings) keep
 * their raw bits unless the selector asks for NULL or a live pool; the
 * others (strings, arrays) are made to point at real memory, with the
 * counts kept within the arrays made, as the API asks of its callers.
 *
 *   0 cw_stream_settings        cw_stream_create
 *   1 cw_stream_pool_settings   cw_stream_pool_create
 *   2 cw_resident_settings      cw_resident_create
 *   3 cw_resident_settings      cw_resident_configure (a loop not launched)
 *   4 cw_program_settings       cw_program_compile
 *   5 cw_jit_cache_settings     cw_jit_cache_configure (then a compile through it)
 *   6 cw_cond_settings          cw_graph_add_conditional
 *   7 cw_operator_settings      cw_operator_create
 *   8 cw_pipeline_settings      cw_pipeline_create
 *   9 cw_port_settings          cw_operator_add_input
 *  10 cw_port_settings          cw_operator_add_output
 *
 * What must hold, besides no crash, leak or undefined behaviour: each call
 * returns what the header documents for those settings (a model of the
 * documented rules below): CW_ERROR_INVALID_ARGUMENT for settings out of
 * range, CW_ERROR_INVALID_HANDLE for a pool that is not live, CW_SUCCESS
 * otherwise (or CW_ERROR_OUT_OF_MEMORY where the settings ask for more memory
 * than the fake has); what was made reports the settings asked for; and
 * nothing the fake counts (streams, memory, graphs, libraries, memory pools)
 * is left behind.
 * The fake driver's environment comes from the runner (tools/fuzz.sh) or
 * is found next to this program.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <ftw.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuweave/cuweave.h"
#include "testing/seam.h"

enum { MEM_LIMIT = 1 << 24, DIR_MAX = 944, MAX_STRINGS = 64 };

static cw_context *ctx;
static cw_stream_pool *pool;     /* a live pool for the pool fields */
static cw_resident *loop;        /* never launched: for cw_resident_configure */
static char g_tmp[64];           /* scratch directory for the disk cache */
static long (*fake_live)(const char *what);

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_settings: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (detail: %s)\n", cw_last_error()->message);
    va_end(ap);
    abort();
}

static void expect(cw_status got, cw_status want, const char *call) {
    if (got != want) die("%s returned %s, expected %s", call, cw_status_name(got), cw_status_name(want));
}

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* The raw value of an enum field (a C caller may store any int there). */
static unsigned raw_enum(const void *field) {
    unsigned v;
    memcpy(&v, field, sizeof v);
    return v;
}

/* ---- the input ---------------------------------------------------------------- */

struct input {
    const uint8_t *p;
    size_t n;
};

static void take(struct input *in, void *dst, size_t k) {
    memset(dst, 0, k);
    const size_t m = in->n < k ? in->n : k;
    memcpy(dst, in->p, m);
    in->p += m;
    in->n -= m;
}

static unsigned take_byte(struct input *in) {
    uint8_t b = 0;
    take(in, &b, 1);
    return b;
}

/* The rest of the input as NUL-separated strings (in a malloc'ed copy). */
struct strings {
    char *text;
    const char *s[MAX_STRINGS];
    size_t n, next;
};

static void split(struct input *in, struct strings *ss) {
    ss->text = malloc(in->n + 1);
    if (!ss->text) abort();
    memcpy(ss->text, in->p, in->n);
    ss->text[in->n] = '\0';
    ss->n = ss->next = 0;
    for (size_t at = 0; at <= in->n && ss->n < MAX_STRINGS;) {
        ss->s[ss->n++] = ss->text + at;
        at += strlen(ss->text + at) + 1;
    }
}

/* The next string, or "" when they ran out. */
static const char *next_string(struct strings *ss) { return ss->next < ss->n ? ss->s[ss->next++] : ""; }

/* A pool field: NULL, the live pool, or the raw bits (never a live handle). */
static cw_stream_pool *pool_field(cw_stream_pool *raw, unsigned sel, int *live) {
    *live = 0;
    switch (sel % 3) {
    case 0: return NULL;
    case 1: *live = 1; return pool;
    default: return raw == pool ? NULL : raw;
    }
}

/* What the fake counts (events left out: a context keeps those its streams
 * gave back, for the next ones). */
static const char *const k_live[] = {"stream", "devmem", "hostmem", "graph", "exec", "library", "mempool"};
enum { N_LIVE = sizeof k_live / sizeof k_live[0] };

static void live_counts(long *v) {
    for (int i = 0; i < N_LIVE; i++) v[i] = fake_live(k_live[i]);
}

/* ---- the structs -------------------------------------------------------------- */

static void fuzz_stream(struct input *in) {
    cw_stream_settings s;
    take(in, &s, sizeof s);
    const int valid = (s.flags & ~CW_STREAM_BLOCKING) == 0 && all_zero(s.reserved, sizeof s.reserved);
    cw_stream *st = NULL;
    expect(cw_stream_create(&st, ctx, &s), valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT, "cw_stream_create");
    if (!st) return;
    cw_context_info ci;
    cw_stream_info info;
    if (cw_context_get_info(ctx, &ci) != CW_SUCCESS || cw_stream_get_info(st, &info) != CW_SUCCESS)
        die("no stream info");
    const int least = ci.least_priority, greatest = ci.greatest_priority;
    const int want = s.priority > least ? least : s.priority < greatest ? greatest : s.priority;
    if (info.priority != want) die("priority %d asked, %d given, %d expected", s.priority, info.priority, want);
    if (info.flags != s.flags || !info.owned || info.from_pool) die("stream info does not match the settings");
    cw_stream_destroy(&st);
}

static void fuzz_pool(struct input *in) {
    cw_stream_pool_settings s;
    take(in, &s, sizeof s);
    /* a pool makes its reserved streams at once: counts the API accepts
     * (65536 at most) are folded to 16 at most, or a run would take seconds;
     * larger ones are kept (refused) */
    if (s.reserved_streams <= 65536) s.reserved_streams %= 17;
    const unsigned mode = raw_enum(&s.mode);
    const int valid = mode <= CW_POOL_SINGLE && (s.flags & ~CW_STREAM_BLOCKING) == 0 &&
                      (mode != CW_POOL_LEASE || s.max_streams == 0 || s.reserved_streams <= s.max_streams) &&
                      s.reserved_streams <= 65536 && all_zero(s.reserved, sizeof s.reserved);
    cw_stream_pool *p = NULL;
    expect(cw_stream_pool_create(&p, ctx, &s), valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT,
           "cw_stream_pool_create");
    if (!p) return;
    cw_stream_pool_info stats;
    if (cw_stream_pool_get_info(p, &stats) != CW_SUCCESS) die("no pool stats");
    if (raw_enum(&stats.mode) != mode) die("pool mode %u asked, %u in force", mode, raw_enum(&stats.mode));
    if (mode == CW_POOL_LEASE && stats.created != s.reserved_streams)
        die("%u streams reserved, %zu created", s.reserved_streams, stats.created);
    cw_stream *st = NULL;
    expect(cw_stream_pool_acquire(&st, p, 0), CW_SUCCESS, "cw_stream_pool_acquire (a new pool)");
    expect(cw_stream_pool_release(p, &st), CW_SUCCESS, "cw_stream_pool_release");
    cw_stream_pool_destroy(&p);
}

static int resident_valid(const cw_resident_settings *s) {
    if (s->input_slots && s->input_bytes > SIZE_MAX / s->input_slots) return 0; /* a setting out of range */
    const unsigned sleep_mode = raw_enum(&s->sleep_mode), gate = raw_enum(&s->gate);
    /* overlap: 0 off, CW_RESIDENT_OVERLAP_AUTO (the build decides), any other value on; on needs a gate
     * without an IF node (KERNELS or BEGIN_END); trace excludes overlap on and gate BEGIN_END */
    const int overlap_on = s->overlap != 0 && s->overlap != CW_RESIDENT_OVERLAP_AUTO;
    return s->sleep_interval_us <= 1000000 && s->spin_us <= 1000000 && sleep_mode <= CW_RESIDENT_SLEEP_ADAPTIVE &&
           gate <= CW_RESIDENT_GATE_BEGIN_END && s->input_slots <= 2 &&
           (s->input_slots == 0 ? s->input_bytes == 0 : s->input_bytes > 0) && s->unroll >= 1 && s->unroll <= 64 &&
           (!overlap_on || gate == CW_RESIDENT_GATE_KERNELS || gate == CW_RESIDENT_GATE_BEGIN_END) &&
           !(s->trace && overlap_on) && !(s->trace && gate == CW_RESIDENT_GATE_BEGIN_END) &&
           all_zero(s->reserved, sizeof s->reserved); /* booleans: any value (nonzero is true) */
}

/* The loop reports the settings it was given, its booleans as 0 or 1. */
static void check_resident_settings(const cw_resident *r, const cw_resident_settings *given) {
    cw_resident_settings got, want = *given;
    want.sync_with_host = want.sync_with_host != 0;
    want.use_default_priority = want.use_default_priority != 0;
    want.overlap = want.overlap == CW_RESIDENT_OVERLAP_AUTO ? CW_RESIDENT_OVERLAP_AUTO : want.overlap != 0;
    want.trace = want.trace != 0;
    if (cw_resident_get_settings(r, &got) != CW_SUCCESS) die("no resident settings");
    if (memcmp(&got, &want, sizeof got) != 0) die("the loop does not report the settings it was given");
}

static void fuzz_resident_create(struct input *in) {
    cw_resident_settings s;
    take(in, &s, sizeof s);
    const int valid = resident_valid(&s);
    cw_resident *r = NULL;
    const cw_status st = cw_resident_create(&r, ctx, &s);
    if (valid && s.input_bytes > MEM_LIMIT / 4 && st == CW_ERROR_OUT_OF_MEMORY) return;
    expect(st, valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT, "cw_resident_create");
    if (!r) return;
    check_resident_settings(r, &s);
    cw_resident_destroy(&r);
    if (r) die("cw_resident_destroy left the handle set");
}

static void fuzz_resident_configure(struct input *in) {
    cw_resident_settings s;
    take(in, &s, sizeof s);
    /* the loop's input layout and priority are fixed (it was made with the
     * defaults: no input slots, the default priority) */
    const int valid = resident_valid(&s) && s.input_slots == 0 && s.use_default_priority != 0;
    expect(cw_resident_configure(loop, &s), valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT,
           "cw_resident_configure");
    if (!valid) return;
    check_resident_settings(loop, &s);
    cw_resident_settings_default(&s);
    expect(cw_resident_configure(loop, &s), CW_SUCCESS, "cw_resident_configure (defaults)");
}

static const char k_source[] = "extern \"C\" __global__ void k(int *p) { *p = 1; }\n";

static void fuzz_program(struct input *in) {
    cw_program_settings s;
    take(in, &s, sizeof s);
    const unsigned sel = take_byte(in), sel2 = take_byte(in);
    struct strings ss;
    split(in, &ss);
    /* the pointer fields: NULL (the count kept as given) or arrays of
     * strings from the input, the count at most their length */
    const char *opts[MAX_STRINGS], *exprs[MAX_STRINGS];
    cw_header headers[MAX_STRINGS / 2];
    s.name = sel & 1 ? next_string(&ss) : NULL;
    size_t k = (sel >> 1) & 7;
    if (sel & 16) {
        for (size_t i = 0; i < k; i++) opts[i] = next_string(&ss);
        s.options = opts;
        s.n_options = k == 0 ? 0 : s.n_options % (k + 1);
    } else {
        s.options = NULL;
    }
    k = (sel >> 5) & 3;
    if (sel2 & 1) {
        for (size_t i = 0; i < k; i++) {
            headers[i].name = (sel2 & 8) && i == 0 ? NULL : next_string(&ss);
            headers[i].source = (sel2 & 16) && i == 0 ? NULL : next_string(&ss);
        }
        s.headers = headers;
        s.n_headers = k == 0 ? 0 : s.n_headers % (k + 1);
    } else {
        s.headers = NULL;
    }
    k = (sel2 >> 1) & 3;
    if (sel2 & 32) {
        for (size_t i = 0; i < k; i++) exprs[i] = next_string(&ss);
        s.name_expressions = exprs;
        s.n_name_expressions = k == 0 ? 0 : s.n_name_expressions % (k + 1);
    } else {
        s.name_expressions = NULL;
    }
    const char *source = sel & 128 ? next_string(&ss) : k_source;
    cw_context *c = sel2 & 64 ? NULL : ctx;

    int valid = (s.n_options == 0 || s.options) && (s.n_headers == 0 || s.headers) &&
                (s.n_name_expressions == 0 || s.name_expressions) && s.arch >= 0 && s.arch < 1000 &&
                (s.output_ptx == 0 || s.output_ptx == 1) && raw_enum(&s.cache) <= CW_CACHE_NONE &&
                all_zero(s.reserved, sizeof s.reserved) && (s.arch != 0 || c);
    for (size_t i = 0; valid && i < s.n_headers; i++)
        valid = s.headers[i].name && s.headers[i].name[0] && s.headers[i].source;
    for (size_t i = 0; valid && i < s.n_name_expressions; i++) valid = s.name_expressions[i][0] != '\0';

    cw_program *p = NULL;
    const cw_status st = cw_program_compile(&p, c, source, &s);
    if (!valid) expect(st, CW_ERROR_INVALID_ARGUMENT, "cw_program_compile");
    /* valid settings: the options may still be refused (fuzz_options checks
     * them), two headers may share a name, the fake NVRTC may refuse the source */
    else if (st != CW_SUCCESS && st != CW_ERROR_INVALID_ARGUMENT && st != CW_ERROR_COMPILE)
        die("cw_program_compile returned %s", cw_status_name(st));
    if (p) {
        cw_program_info info;
        if (cw_program_get_info(p, &info) != CW_SUCCESS) die("no program info");
        if (info.arch != (s.arch ? s.arch : 90) || info.is_ptx != s.output_ptx || info.size == 0)
            die("the program is not what the settings asked for (arch %d, ptx %d)", info.arch, info.is_ptx);
        for (size_t i = 0; i < s.n_name_expressions; i++) {
            const char *low = NULL;
            expect(cw_program_get_lowered_name(p, s.name_expressions[i], &low), CW_SUCCESS, "cw_program_get_lowered_name");
        }
        cw_program_destroy(&p);
    }
    cw_jit_cache_clear_memory();
    free(ss.text);
}

static void cache_off(void) {
    cw_jit_cache_settings s;
    cw_jit_cache_settings_default(&s);
    s.dir = "off";
    expect(cw_jit_cache_configure(&s), CW_SUCCESS, "cw_jit_cache_configure (off)");
}

static void fuzz_jit_cache(struct input *in) {
    cw_jit_cache_settings s;
    take(in, &s, sizeof s);
    const unsigned sel = take_byte(in), len = take_byte(in) * 4 + take_byte(in);
    char dir[2048];
    int disk = 0;
    switch (sel % 5) {
    case 0: s.dir = NULL; break; /* the environment: CUWEAVE_CACHE_DIR=off */
    case 1: s.dir = ""; break;
    case 2: s.dir = "off"; break;
    case 3: /* a directory of the scratch directory, written */
        snprintf(dir, sizeof dir, "%s/c%u", g_tmp, (sel / 5) % 4);
        s.dir = dir;
        disk = 1;
        break;
    default: /* a long name (not written) */
        snprintf(dir, sizeof dir, "%s/", g_tmp);
        for (size_t i = strlen(dir); i < len && i + 1 < sizeof dir; i++) dir[i] = 'x', dir[i + 1] = '\0';
        s.dir = dir;
        break;
    }
    const int valid = (s.memory == 0 || s.memory == 1) && all_zero(s.reserved, sizeof s.reserved) &&
                      (s.dir == NULL || strlen(s.dir) < DIR_MAX);
    expect(cw_jit_cache_configure(&s), valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT, "cw_jit_cache_configure");
    if (valid && disk) {
        /* one compile, then the same again: from memory, or from disk */
        cw_jit_stats before, after;
        cw_jit_get_stats(&before);
        cw_program *a = NULL, *b = NULL;
        expect(cw_program_compile(&a, ctx, k_source, NULL), CW_SUCCESS, "cw_program_compile");
        expect(cw_program_compile(&b, ctx, k_source, NULL), CW_SUCCESS, "cw_program_compile (again)");
        cw_program_info ia, ib;
        cw_program_get_info(a, &ia);
        cw_program_get_info(b, &ib);
        cw_jit_get_stats(&after);
        if (ia.size != ib.size || memcmp(ia.code, ib.code, ia.size) != 0) die("the same source gave other code");
        if (s.memory == 1 && ib.source != CW_FROM_MEMORY) die("memory cache on, not a memory hit");
        if (s.memory == 0 && ib.source == CW_FROM_MEMORY) die("memory cache off, a memory hit");
        /* a written entry is read back, unless the bound is below one entry:
         * then the write is followed by its own eviction (the directory holds
         * at most max_bytes, docs/kernels.md), and the second compile is a
         * compile again. A bound of 1 MiB or more (0: 256 MiB) holds this
         * source's entry. */
        const int room = s.max_bytes == 0 || s.max_bytes >= (1u << 20);
        if (room && s.memory == 0 && ia.source == CW_FROM_COMPILE && ib.source != CW_FROM_DISK &&
            after.disk_writes > before.disk_writes)
            die("written to disk, not read back (source %d)", (int)ib.source);
        cw_program_destroy(&a);
        cw_program_destroy(&b);
    }
    cw_jit_cache_clear_memory();
    cache_off();
}

static void fuzz_cond(struct input *in) {
    cw_cond_settings s;
    take(in, &s, sizeof s);
    const unsigned sel = take_byte(in);
    const unsigned type = raw_enum(&s.type);
    const int valid = type <= CW_COND_WHILE && (s.with_else == 0 || (s.with_else == 1 && type == CW_COND_IF)) &&
                      all_zero(s.reserved, sizeof s.reserved);
    cw_graph *g = NULL;
    expect(cw_graph_create(&g, ctx), CW_SUCCESS, "cw_graph_create");
    cw_cond_handle h;
    expect(cw_graph_add_cond_handle(g, 0, 0, &h), CW_SUCCESS, "cw_graph_add_cond_handle");
    cw_graph_node *node = NULL;
    cw_graph *body = NULL, *else_body = (cw_graph *)1;
    expect(cw_graph_add_conditional(g, h, &s, NULL, 0, &node, &body, sel & 1 ? &else_body : NULL),
           valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT, "cw_graph_add_conditional");
    if (valid) {
        if (!body || !node) die("no body or no node");
        if ((sel & 1) && (else_body != NULL) != (s.with_else == 1)) die("else body %p with with_else %d", (void *)else_body, s.with_else);
    }
    cw_graph_destroy(&g);
}

static cw_status compute(cw_io *io, void *user) {
    (void)io, (void)user;
    return CW_SUCCESS;
}

static void fuzz_operator(struct input *in) {
    cw_operator_settings s;
    take(in, &s, sizeof s);
    int live = 0;
    s.pool = pool_field(s.pool, take_byte(in), &live);
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    const cw_status want = !all_zero(s.reserved, sizeof s.reserved) ? CW_ERROR_INVALID_ARGUMENT
                           : s.pool && !live                         ? CW_ERROR_INVALID_HANDLE
                                                                     : CW_SUCCESS;
    cw_operator *op = NULL;
    expect(cw_operator_create(&op, "op", &ops, NULL, &s), want, "cw_operator_create");
    cw_operator_destroy(&op);
}

static void fuzz_pipeline(struct input *in) {
    cw_pipeline_settings s;
    take(in, &s, sizeof s);
    int live = 0;
    s.pool = pool_field(s.pool, take_byte(in), &live);
    const cw_status want = !all_zero(s.reserved, sizeof s.reserved) ? CW_ERROR_INVALID_ARGUMENT
                           : s.pool && !live                         ? CW_ERROR_INVALID_HANDLE
                           : s.threads > 256                         ? CW_ERROR_INVALID_ARGUMENT
                                                                     : CW_SUCCESS;
    cw_pipeline *p = NULL;
    expect(cw_pipeline_create(&p, ctx, &s), want, "cw_pipeline_create");
    cw_pipeline_destroy(&p);
}

static void fuzz_port(struct input *in, int input) {
    cw_port_settings s;
    take(in, &s, sizeof s);
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = compute;
    cw_operator *op = NULL;
    expect(cw_operator_create(&op, "op", &ops, NULL, NULL), CW_SUCCESS, "cw_operator_create");
    const int valid = all_zero(s.reserved, sizeof s.reserved) && (s.flags & ~(CW_PORT_OPTIONAL | CW_PORT_MANY)) == 0 &&
                      (input || s.flags == 0) && !(s.bytes && s.dptr);
    const cw_status st = input ? cw_operator_add_input(op, "port", &s) : cw_operator_add_output(op, "port", &s);
    expect(st, valid ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT, input ? "cw_operator_add_input" : "cw_operator_add_output");
    /* the name is taken now, whatever the settings were */
    if (valid) expect(cw_operator_add_input(op, "port", NULL), CW_ERROR_INVALID_ARGUMENT, "cw_operator_add_input (again)");
    cw_operator_destroy(&op);
}

/* ---- libFuzzer ---------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void cleanup(void) {
    if (g_tmp[0]) nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* CUWEAVE_LIBCUDA / CUWEAVE_LIBNVRTC, when unset: the fakes next to this program. */
static void fake_next_to(const char *self, const char *var, const char *file) {
    if (getenv(var)) return;
    char buf[4096], path[4200];
    snprintf(buf, sizeof buf, "%s", self);
    snprintf(path, sizeof path, "%s/%s", dirname(buf), file);
    setenv(var, path, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    fake_next_to((*argv)[0], "CUWEAVE_LIBCUDA", "libfakecuda.so");
    fake_next_to((*argv)[0], "CUWEAVE_LIBNVRTC", "libfakenvrtc.so");
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    char limit[32];
    snprintf(limit, sizeof limit, "%d", MEM_LIMIT);
    setenv("FAKE_CUDA_MEM_LIMIT", limit, 1);
    setenv("CUWEAVE_CACHE_DIR", "off", 1);
    unsetenv("CUWEAVE_SERIALIZE");
    void *lib = dlopen(getenv("CUWEAVE_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
    fake_live = lib ? (long (*)(const char *))dlsym(lib, "fake_cuda_live") : NULL;
    if (!fake_live) die("cannot load the fake driver %s", getenv("CUWEAVE_LIBCUDA"));
    snprintf(g_tmp, sizeof g_tmp, "/tmp/cuweave-fuzz-XXXXXX");
    if (!mkdtemp(g_tmp)) die("no scratch directory");
    atexit(cleanup);
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS ||
        cw_stream_pool_create(&pool, ctx, NULL) != CW_SUCCESS || cw_resident_create(&loop, ctx, NULL) != CW_SUCCESS)
        die("cuweave could not use the fake driver");
    cw_program *warm = NULL; /* NVRTC loaded, the context's event pool made */
    if (cw_program_compile(&warm, ctx, k_source, NULL) != CW_SUCCESS) die("no compile with the fake NVRTC");
    cw_program_destroy(&warm);
    cw_jit_cache_clear_memory();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    struct input in = {data + 1, size - 1};
    long before[N_LIVE], after[N_LIVE];
    live_counts(before);
    switch (data[0] % 11) {
    case 0: fuzz_stream(&in); break;
    case 1: fuzz_pool(&in); break;
    case 2: fuzz_resident_create(&in); break;
    case 3: fuzz_resident_configure(&in); break;
    case 4: fuzz_program(&in); break;
    case 5: fuzz_jit_cache(&in); break;
    case 6: fuzz_cond(&in); break;
    case 7: fuzz_operator(&in); break;
    case 8: fuzz_pipeline(&in); break;
    case 9: fuzz_port(&in, 1); break;
    default: fuzz_port(&in, 0); break;
    }
    live_counts(after);
    for (int i = 0; i < N_LIVE; i++)
        if (after[i] != before[i]) die("fake driver objects (%s): %ld before, %ld after", k_live[i], before[i], after[i]);
    return 0;
}
