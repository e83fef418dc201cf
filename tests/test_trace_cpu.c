/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU tests of traces (cuweave/trace.h) against the fake CUDA driver
 * (tests/fake_cuda.c, whose events complete in stream order and take the
 * host's monotonic clock when they do). The exported file is parsed by a
 * strict JSON parser here and checked against what Perfetto's importer of
 * Chrome trace-event JSON reads: a traceEvents array, every event's name,
 * ph, pid and tid, ts and dur on complete ("X") events, process_name and
 * thread_name metadata ("M") for every track used, and slices on one track
 * nested or apart (never overlapping in part). Then the spans themselves:
 * the ones scheduled, named as given, on the tracks named as given, in the
 * order and overlap they were made with; a pipeline's operators (host
 * spans per compute call, GPU spans per operator stream); a resident loop's
 * stages and iterations from marks the test writes (the fake runs no
 * kernels), its global timer set through the test seam; argument checks,
 * max_spans, the handle contract, events reused after a write, and no
 * events left behind.
 * Links libcuweave.a; the fake's path is argv[1].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "cwtest.h"
#include "fakelive.h"
#include "testing/seam.h"

static cw_context *ctx;
static char g_dir[256];
static void (*hold)(int on); /* fake_cuda_hold */

/* ---- a strict JSON parser (RFC 8259), into a small tree ----------------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct JV {
    int type;
    double num;
    char *str;         /* J_STR */
    struct JV *items;  /* J_ARR, J_OBJ: values */
    char **keys;       /* J_OBJ */
    size_t n;
} JV;

typedef struct {
    const char *p;
    int bad;
} JP;

static void ws(JP *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static char *jstring(JP *j) {
    if (*j->p != '"') {
        j->bad = 1;
        return NULL;
    }
    j->p++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    for (;;) {
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') break;
        if (c < 0x20) {
            j->bad = 1;
            break;
        }
        if (c == '\\') {
            char e = *j->p++;
            switch (e) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v = 0;
                for (int k = 0; k < 4; k++) {
                    char h = *j->p++;
                    v <<= 4;
                    if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
                    else j->bad = 1;
                }
                c = v < 0x80 ? (unsigned char)v : '?';
                break;
            }
            default: j->bad = 1;
            }
        }
        if (j->bad) break;
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        out[n++] = (char)c;
    }
    out[n] = 0;
    return out;
}

static void jvalue(JP *j, JV *v);

static void jnumber(JP *j, JV *v) {
    const char *s = j->p;
    if (*j->p == '-') j->p++;
    if (*j->p == '0')
        j->p++;
    else if (*j->p >= '1' && *j->p <= '9')
        while (*j->p >= '0' && *j->p <= '9') j->p++;
    else {
        j->bad = 1;
        return;
    }
    if (*j->p == '.') {
        j->p++;
        if (!(*j->p >= '0' && *j->p <= '9')) j->bad = 1;
        while (*j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (*j->p == 'e' || *j->p == 'E') {
        j->p++;
        if (*j->p == '+' || *j->p == '-') j->p++;
        if (!(*j->p >= '0' && *j->p <= '9')) j->bad = 1;
        while (*j->p >= '0' && *j->p <= '9') j->p++;
    }
    v->type = J_NUM;
    v->num = strtod(s, NULL);
}

static void jvalue(JP *j, JV *v) {
    memset(v, 0, sizeof *v);
    ws(j);
    if (j->bad) return;
    if (*j->p == '{' || *j->p == '[') {
        const int obj = *j->p == '{';
        const char close = obj ? '}' : ']';
        v->type = obj ? J_OBJ : J_ARR;
        j->p++;
        ws(j);
        if (*j->p == close) {
            j->p++;
            return;
        }
        size_t cap = 0;
        for (;;) {
            if (v->n == cap) {
                cap = cap ? cap * 2 : 8;
                v->items = realloc(v->items, cap * sizeof *v->items);
                if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
            }
            memset(&v->items[v->n], 0, sizeof v->items[v->n]);
            if (obj) v->keys[v->n] = NULL;
            if (obj) {
                ws(j);
                v->keys[v->n] = jstring(j);
                ws(j);
                if (j->bad || *j->p != ':') {
                    j->bad = 1;
                    v->items[v->n++].type = J_NULL;
                    return;
                }
                j->p++;
            }
            jvalue(j, &v->items[v->n++]);
            if (j->bad) return;
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            if (*j->p == close) {
                j->p++;
                return;
            }
            j->bad = 1;
            return;
        }
    }
    if (*j->p == '"') {
        v->type = J_STR;
        v->str = jstring(j);
    } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
        v->type = J_BOOL;
        v->num = *j->p == 't';
        j->p += *j->p == 't' ? 4 : 5;
    } else if (!strncmp(j->p, "null", 4)) {
        j->p += 4;
    } else {
        jnumber(j, v);
    }
}

static void jfree(JV *v) {
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

static const JV *jget(const JV *o, const char *key) {
    if (o->type != J_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

/* Parses text; 0 when it is not one JSON value with nothing after it. */
static int jparse(const char *text, JV *out) {
    JP j = {text, 0};
    jvalue(&j, out);
    ws(&j);
    if (*j.p) j.bad = 1;
    if (j.bad) jfree(out);
    return !j.bad;
}

static void jparse_tests(void **state) {
    (void)state;
    JV v;
    assert_true(jparse("{\"a\":[1,-2.5e3,\"x\\u0041\\n\",true,null,{}]}", &v));
    assert_int_equal(jget(&v, "a")->n, 6);
    assert_true(jget(&v, "a")->items[1].num == -2500.0);
    assert_string_equal(jget(&v, "a")->items[2].str, "xA\n");
    jfree(&v);
    const char *bad[] = {"{\"a\":1,}", "[1 2]", "{a:1}", "[01]", "[1.]", "\"\t\"", "[1]x", "{\"a\"}", "[\"\\q\"]", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (jparse(bad[i], &v)) fail_msg("accepted bad JSON %s", bad[i]);
}

/* ---- the trace file, checked against the format ------------------------- */

typedef struct Ev {
    char name[64];
    char cat[16];
    int pid, tid;
    double ts, dur;
    /* args (CUPTI's spans): -1 when absent */
    long long corr, iteration, bytes;
    char op[64];
} Ev;

typedef struct Trace {
    Ev ev[512];
    size_t n;
    struct {
        int pid, tid;
        char name[64];
    } tracks[64];
    size_t ntracks;
    char gpu_timing[16]; /* otherData's: "events" or "cupti" */
    char cupti[256];     /* and what it says of CUPTI */
} Trace;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = 0;
    fclose(f);
    return buf;
}

static int is_int(const JV *v) { return v && v->type == J_NUM && v->num == (double)(long long)v->num; }

/* Reads and validates path into *t (fails the test on any format error). */
static void load_trace(const char *path, Trace *t) {
    memset(t, 0, sizeof *t);
    char *text = slurp(path);
    JV root;
    if (!jparse(text, &root)) fail_msg("%s is not valid JSON:\n%s", path, text);
    free(text);
    const JV *evs = jget(&root, "traceEvents");
    assert_non_null(evs);
    assert_int_equal(evs->type, J_ARR);
    const JV *unit = jget(&root, "displayTimeUnit");
    assert_true(unit && unit->type == J_STR && !strcmp(unit->str, "ns"));
    /* how the trace timed its compute calls, and why */
    const JV *other = jget(&root, "otherData");
    assert_true(other && other->type == J_OBJ);
    const JV *timing = jget(other, "gpu_timing"), *cupti = jget(other, "cupti");
    assert_true(timing && timing->type == J_STR && cupti && cupti->type == J_STR);
    assert_true(!strcmp(timing->str, "events") || !strcmp(timing->str, "cupti"));
    snprintf(t->gpu_timing, sizeof t->gpu_timing, "%s", timing->str);
    snprintf(t->cupti, sizeof t->cupti, "%s", cupti->str);
    int procs[8] = {0};
    for (size_t i = 0; i < evs->n; i++) {
        const JV *e = &evs->items[i];
        assert_int_equal(e->type, J_OBJ);
        const JV *name = jget(e, "name"), *ph = jget(e, "ph"), *pid = jget(e, "pid"), *tid = jget(e, "tid");
        assert_true(name && name->type == J_STR);
        assert_true(ph && ph->type == J_STR);
        assert_true(is_int(pid) && pid->num >= 0 && pid->num < 8);
        assert_true(is_int(tid) && tid->num >= 0);
        if (!strcmp(ph->str, "M")) {
            const JV *args = jget(e, "args");
            assert_true(args && args->type == J_OBJ);
            if (!strcmp(name->str, "process_name")) {
                assert_true(jget(args, "name") && jget(args, "name")->type == J_STR);
                procs[(int)pid->num] = 1;
            } else if (!strcmp(name->str, "thread_name")) {
                const JV *tn = jget(args, "name");
                assert_true(tn && tn->type == J_STR);
                assert_true(t->ntracks < 64);
                t->tracks[t->ntracks].pid = (int)pid->num;
                t->tracks[t->ntracks].tid = (int)tid->num;
                snprintf(t->tracks[t->ntracks].name, 64, "%s", tn->str);
                t->ntracks++;
            } else {
                assert_string_equal(name->str, "thread_sort_index");
                assert_true(is_int(jget(args, "sort_index")));
            }
            continue;
        }
        assert_string_equal(ph->str, "X");
        const JV *ts = jget(e, "ts"), *dur = jget(e, "dur");
        assert_true(ts && ts->type == J_NUM && ts->num >= 0);
        assert_true(dur && dur->type == J_NUM && dur->num >= 0);
        assert_true(t->n < 512);
        Ev *x = &t->ev[t->n++];
        snprintf(x->name, sizeof x->name, "%s", name->str);
        const JV *cat = jget(e, "cat"), *args = jget(e, "args");
        assert_true(cat && cat->type == J_STR);
        snprintf(x->cat, sizeof x->cat, "%s", cat->str);
        x->corr = x->iteration = x->bytes = -1;
        x->op[0] = 0;
        if (args) {
            assert_int_equal(args->type, J_OBJ);
            const JV *c = jget(args, "correlation"), *it = jget(args, "iteration"), *b = jget(args, "bytes"),
                     *op = jget(args, "operator");
            if (c) assert_true(is_int(c)), x->corr = (long long)c->num;
            if (it) assert_true(is_int(it)), x->iteration = (long long)it->num;
            if (b) assert_true(is_int(b)), x->bytes = (long long)b->num;
            if (op) assert_int_equal(op->type, J_STR), snprintf(x->op, sizeof x->op, "%s", op->str);
        }
        x->pid = (int)pid->num;
        x->tid = (int)tid->num;
        x->ts = ts->num;
        x->dur = dur->num;
    }
    jfree(&root);
    /* Metadata for every process and track a slice is on; one name per track. */
    for (size_t i = 0; i < t->n; i++) {
        assert_true(procs[t->ev[i].pid]);
        int named = 0;
        for (size_t k = 0; k < t->ntracks; k++)
            named += t->tracks[k].pid == t->ev[i].pid && t->tracks[k].tid == t->ev[i].tid;
        assert_int_equal(named, 1);
    }
    /* Slices of one track nest or are apart (the importer's rule). */
    for (size_t i = 0; i < t->n; i++)
        for (size_t k = 0; k < t->n; k++) {
            const Ev *a = &t->ev[i], *b = &t->ev[k];
            if (i == k || a->pid != b->pid || a->tid != b->tid) continue;
            /* in whole ns, as the file has them (3 decimals of us; as
             * Perfetto's importer reads them): a sum of doubles would differ
             * in the last bit where a parent ends with its last child */
            const long long as = llround(a->ts * 1e3), bs = llround(b->ts * 1e3);
            const long long ae = as + llround(a->dur * 1e3), be = bs + llround(b->dur * 1e3);
            const int apart = ae <= bs || be <= as;
            const int a_in_b = as >= bs && ae <= be, b_in_a = bs >= as && be <= ae;
            if (!apart && !a_in_b && !b_in_a)
                fail_msg("slices '%s' [%lld, %lld] ns and '%s' [%lld, %lld] ns overlap in part on one track", a->name,
                         as, ae, b->name, bs, be);
        }
}

static const Ev *find(const Trace *t, const char *name, int nth) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->ev[i].name, name) && nth-- == 0) return &t->ev[i];
    fail_msg("no span '%s' in the trace", name);
    return NULL;
}

static int count(const Trace *t, const char *name) {
    int n = 0;
    for (size_t i = 0; i < t->n; i++) n += !strcmp(t->ev[i].name, name);
    return n;
}

/* The n-th span named `name` in process pid, in time order (NULL: none). */
static const Ev *nth_on(const Trace *t, const char *name, int pid, int n) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->ev[i].name, name) && t->ev[i].pid == pid && n-- == 0) return &t->ev[i];
    return NULL;
}

static const char *track_name(const Trace *t, const Ev *e) {
    for (size_t k = 0; k < t->ntracks; k++)
        if (t->tracks[k].pid == e->pid && t->tracks[k].tid == e->tid) return t->tracks[k].name;
    return "";
}

/* ---- spans placed by hand ------------------------------------------------ */

static void *other_thread(void *arg) {
    cw_trace *t = arg;
    if (cw_trace_name_thread(t, "helper") != CW_SUCCESS) return (void *)1;
    if (cw_trace_host_begin(t, "helper work") != CW_SUCCESS) return (void *)1;
    sleep_ms(2);
    return (void *)(intptr_t)(cw_trace_host_end(t) != CW_SUCCESS);
}

static void test_marks(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_stream *a = NULL, *b = NULL;
    assert_cw_ok(cw_stream_create(&a, ctx, NULL));
    assert_cw_ok(cw_stream_create(&b, ctx, NULL));
    assert_cw_ok(cw_trace_name_stream(t, a, "decode \"A\""));  /* a name that needs escaping */
    assert_cw_ok(cw_trace_name_stream(t, b, "filter B"));
    assert_cw_ok(cw_trace_name_thread(t, "main"));
    assert_cw_ok(cw_trace_host_begin(t, "enqueue"));
    /* a: [outer [inner]] ; b: [b1] overlapping outer, then [b2] after b1 */
    assert_cw_ok(cw_trace_begin(t, a, "outer"));
    assert_cw_ok(cw_trace_begin(t, b, "b1"));
    assert_cw_ok(cw_stream_synchronize(a));
    sleep_ms(2);
    assert_cw_ok(cw_trace_begin(t, a, "inner"));
    sleep_ms(2);
    assert_cw_ok(cw_trace_end(t, a)); /* inner */
    sleep_ms(2);
    assert_cw_ok(cw_trace_end(t, a)); /* outer */
    sleep_ms(2);
    assert_cw_ok(cw_trace_end(t, b)); /* b1 */
    assert_cw_ok(cw_stream_synchronize(b));
    sleep_ms(2);
    assert_cw_ok(cw_trace_begin(t, b, "b2"));
    sleep_ms(1);
    assert_cw_ok(cw_trace_end(t, b));
    assert_cw_ok(cw_trace_host_end(t));
    assert_cw(CW_ERROR_INVALID_STATE, cw_trace_end(t, a));     /* nothing open on a */
    assert_cw(CW_ERROR_INVALID_STATE, cw_trace_host_end(t));   /* nothing open here */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, t), 0);
    void *rc = NULL;
    pthread_join(th, &rc);
    assert_null(rc);
    assert_cw_ok(cw_trace_begin(t, a, "left open"));  /* not ended: not written */

    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 7);
    assert_int_equal(info.dropped, 0);
    assert_int_equal(info.tracks, 4);
    assert_int_equal(info.contexts, 1);
    assert_true(info.calibration_error_ns > 0);

    char path[300];
    snprintf(path, sizeof path, "%s/marks.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(tr->n, 6);
    assert_int_equal(tr->ntracks, 4);
    const Ev *outer = find(tr, "outer", 0), *inner = find(tr, "inner", 0), *b1 = find(tr, "b1", 0),
             *b2 = find(tr, "b2", 0), *enq = find(tr, "enqueue", 0), *hw = find(tr, "helper work", 0);
    assert_int_equal(count(tr, "left open"), 0);
    assert_string_equal(track_name(tr, outer), "decode \"A\"");
    assert_string_equal(track_name(tr, inner), "decode \"A\"");
    assert_string_equal(track_name(tr, b1), "filter B");
    assert_string_equal(track_name(tr, enq), "main");
    assert_string_equal(track_name(tr, hw), "helper");
    assert_int_equal(outer->pid, 2);
    assert_int_equal(enq->pid, 1);
    assert_int_equal(hw->pid, 1);
    assert_int_not_equal(hw->tid, enq->tid);
    assert_int_not_equal(b1->tid, outer->tid);
    const double slack = 1.0; /* us: float milliseconds and the fake's clock */
    /* nesting on a: inner within outer, by the sleeps (2 ms each side) */
    assert_true(inner->ts >= outer->ts + 1500);
    assert_true(inner->ts + inner->dur <= outer->ts + outer->dur - 1500);
    assert_true(inner->dur >= 1500 && inner->dur < 100000);
    /* b1 overlaps outer; b2 comes after b1, with no overlap */
    assert_true(b1->ts < outer->ts + outer->dur && outer->ts < b1->ts + b1->dur);
    assert_true(b1->ts + b1->dur >= outer->ts + outer->dur - slack);
    assert_true(b2->ts >= b1->ts + b1->dur + 1500);
    /* the host span covers the GPU work it enqueued and waited for; the
     * helper's span comes after it */
    assert_true(enq->ts <= outer->ts + slack);
    assert_true(enq->ts + enq->dur >= b2->ts + b2->dur - slack);
    assert_true(hw->ts >= enq->ts + enq->dur);
    assert_true(hw->dur >= 1500);
    free(tr);
    /* written again after the open span ends: now 7 */
    assert_cw_ok(cw_trace_end(t, a));
    assert_cw_ok(cw_trace_write(t, path));
    tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(tr->n, 7);
    assert_int_equal(count(tr, "left open"), 1);
    free(tr);
    /* a written span's events serve the next spans: no event is created */
    const long events = fake_live("event");
    assert_cw_ok(cw_trace_begin(t, a, "again"));
    assert_cw_ok(cw_trace_end(t, a));
    assert_int_equal(fake_live("event"), events);

    cw_stream_destroy(&a);
    cw_stream_destroy(&b);
    cw_trace_destroy(&t);
    assert_null(t);
    cw_trace_destroy(&t); /* NULL: nothing */
    cw_trace_destroy(NULL);
    assert_false(leaks(before, "a trace with marks"));
}

static void test_arguments_and_limits(void **state) {
    (void)state;
    cw_trace *t = NULL;
    cw_trace_settings s;
    cw_trace_settings_default(&s);
    assert_int_equal(s.max_spans, 0);
    s.reserved[3] = 1;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_create(&t, &s));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_create(NULL, NULL));
    cw_trace_settings_default(&s);
    s.max_spans = 2;
    assert_cw_ok(cw_trace_create(&t, &s));
    cw_stream *a = NULL;
    assert_cw_ok(cw_stream_create(&a, ctx, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_begin(t, a, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_begin(NULL, a, "x"));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_write(t, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_get_info(t, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_name_thread(t, NULL));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_trace_begin((cw_trace *)a, a, "x"));
    /* past max_spans: counted, not kept, and their ends still match */
    assert_cw_ok(cw_trace_begin(t, a, "kept 1"));
    assert_cw_ok(cw_trace_host_begin(t, "kept 2"));
    assert_cw_ok(cw_trace_begin(t, a, "dropped 1"));
    assert_cw_ok(cw_trace_host_begin(t, "dropped 2"));
    assert_cw_ok(cw_trace_host_end(t));
    assert_cw_ok(cw_trace_host_end(t));
    assert_cw_ok(cw_trace_end(t, a));
    assert_cw_ok(cw_trace_end(t, a));
    assert_cw(CW_ERROR_INVALID_STATE, cw_trace_end(t, a));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 2);
    assert_int_equal(info.dropped, 2);
    char path[300];
    snprintf(path, sizeof path, "%s/limits.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(tr->n, 2);
    assert_non_null(find(tr, "kept 1", 0));
    assert_non_null(find(tr, "kept 2", 0));
    free(tr);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_write(t, "/nonexistent-dir/x.json"));
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent-dir/x.json"));
    cw_trace *stale = t;
    cw_trace_destroy(&t);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_trace_host_begin(stale, "x"));
    cw_trace_destroy(&stale); /* not live: ignored */
    cw_stream_destroy(&a);
}

/* ---- a pipeline: a diamond src -> (left, right) -> sink ------------------ */

typedef struct Op {
    int sleep_ms;
    const char *in[2];
    int nout;
} Op;

static cw_status op_compute(cw_io *io, void *user) {
    Op *o = user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, o->in[0], &s);
    if (st != CW_SUCCESS) return st;
    if (o->in[1]) {
        cw_stream *s2 = NULL;
        if ((st = cw_io_receive_stream(io, o->in[1], &s2)) != CW_SUCCESS) return st;
    }
    if (o->sleep_ms) sleep_ms(o->sleep_ms);
    for (int i = 0; i < o->nout; i++)
        if ((st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL)) != CW_SUCCESS) return st;
    return CW_SUCCESS;
}

static Op src = {1, {NULL, NULL}, 2}, left = {3, {"in", NULL}, 1}, right = {3, {"in", NULL}, 1},
          sink = {1, {"a", "b"}, 0};

/* left's and right's k-th calls meet: each waits, inside its compute, until
 * the other's k-th call has begun (bounded: 10 s, counted as a miss), so
 * both are in compute at once, provably, whatever the scheduler does. The
 * executor's host span of a call begins before compute and ends after it,
 * so the two spans overlap. */
static pthread_mutex_t g_meet_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_meet_cv = PTHREAD_COND_INITIALIZER;
static int g_meet_calls[2], g_meet_misses;

static void meet(int side) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&g_meet_mu);
    const int k = ++g_meet_calls[side];
    pthread_cond_broadcast(&g_meet_cv);
    int rc = 0;
    while (g_meet_calls[!side] < k && rc == 0) rc = pthread_cond_timedwait(&g_meet_cv, &g_meet_mu, &deadline);
    if (g_meet_calls[!side] < k) g_meet_misses++;
    pthread_mutex_unlock(&g_meet_mu);
}

/* A time of the file (us, 3 decimals, never negative) in whole ns. */
static long long ns_of(double us) { return (long long)(us * 1e3 + 0.5); }

static cw_status side_compute(cw_io *io, void *user) {
    meet(user == &right);
    return op_compute(io, user);
}

static cw_operator *make_op(const char *name, Op *o) {
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = o == &left || o == &right ? side_compute : op_compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, name, &ops, o, NULL));
    for (int i = 0; i < 2; i++)
        if (o->in[i]) assert_cw_ok(cw_operator_add_input(op, o->in[i], NULL));
    if (o->nout > 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
    if (o->nout > 1) assert_cw_ok(cw_operator_add_output(op, "out2", NULL));
    return op;
}

static cw_pipeline *make_diamond(void) {
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 2;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    assert_cw_ok(cw_pipeline_add(p, make_op("src", &src)));
    assert_cw_ok(cw_pipeline_add(p, make_op("left", &left)));
    assert_cw_ok(cw_pipeline_add(p, make_op("right", &right)));
    assert_cw_ok(cw_pipeline_add(p, make_op("sink", &sink)));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out", "left", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "right", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "left", "out", "sink", "a"));
    assert_cw_ok(cw_pipeline_connect(p, "right", "out", "sink", "b"));
    return p;
}

static void test_pipeline(void **state) {
    (void)state;
    /* warm the context's pools with an untraced run of the same pipeline */
    cw_pipeline *p = make_diamond();
    assert_cw_ok(cw_pipeline_run(p, 8));
    cw_pipeline_destroy(&p);
    long before[NKINDS];
    snapshot(before);
    p = make_diamond();
    assert_cw_ok(cw_pipeline_run(p, 1)); /* untraced */
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_pipeline_set_trace(NULL, t));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    cw_trace_destroy(&t); /* the pipeline keeps it */
    assert_cw_ok(cw_pipeline_run(p, 3));
    assert_cw_ok(cw_pipeline_synchronize(p));
    /* write through a trace the test holds: attach a second one to get it */
    cw_trace *t2 = NULL;
    assert_cw_ok(cw_trace_create(&t2, NULL));
    assert_cw_ok(cw_pipeline_set_trace(p, t2));  /* drops the first: freed now */
    assert_cw_ok(cw_pipeline_run(p, 2));
    assert_cw_ok(cw_pipeline_set_trace(p, NULL));
    assert_cw_ok(cw_pipeline_run(p, 1));         /* untraced again */
    char path[300];
    snprintf(path, sizeof path, "%s/pipeline.json", g_dir);
    assert_cw_ok(cw_trace_write(t2, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    const char *names[] = {"src", "left", "right", "sink"};
    for (int k = 0; k < 4; k++) {
        int host = 0, gpu = 0;
        for (size_t i = 0; i < tr->n; i++) {
            if (strcmp(tr->ev[i].name, names[k])) continue;
            if (tr->ev[i].pid == 1) host++;
            if (tr->ev[i].pid == 2) {
                gpu++;
                assert_string_equal(track_name(tr, &tr->ev[i]), names[k]); /* the operator's stream */
            }
        }
        assert_int_equal(host, 2); /* one per compute call of the two iterations */
        assert_int_equal(gpu, 2);
    }
    assert_true(count(tr, "wait inputs") == 0); /* wait_inputs is off by default */
    assert_int_equal(g_meet_misses, 0); /* every left and right call met its pair */
    for (int it = 0; it < 2; it++) {
        /* host spans: on worker threads; left and right overlap (each call
         * waited inside its compute until the other's had begun: meet);
         * sink starts after both ended, src before both began (the
         * executor's order). In whole ns, as written (3 decimals of us). */
        const Ev *s = nth_on(tr, "src", 1, it), *l = nth_on(tr, "left", 1, it), *r = nth_on(tr, "right", 1, it),
                 *k = nth_on(tr, "sink", 1, it);
        assert_non_null(s);
        assert_non_null(l);
        assert_non_null(r);
        assert_non_null(k);
        const long long se = ns_of(s->ts) + ns_of(s->dur), lb = ns_of(l->ts), le = lb + ns_of(l->dur),
                        rb = ns_of(r->ts), re = rb + ns_of(r->dur), kb = ns_of(k->ts);
        assert_true(lb >= se && rb >= se);
        if (!(lb <= re && rb <= le))
            fail_msg("iteration %d: left [%lld, %lld] ns and right [%lld, %lld] ns do not overlap", it, lb, le, rb, re);
        assert_int_not_equal(l->tid, r->tid);
        assert_int_equal(strncmp(track_name(tr, l), "executor thread ", 16), 0); /* workers named by the executor */
        assert_true(kb >= le && kb >= re);
        assert_true(l->dur >= 2500 && r->dur >= 2500); /* each call slept 3 ms inside its span */
    }
    /* GPU spans: each operator's span ends after its call; the sink's begins
     * where its stream waited for left's and right's work */
    for (int it = 0; it < 2; it++) {
        const Ev *k = nth_on(tr, "sink", 2, it), *l = nth_on(tr, "left", 2, it), *r = nth_on(tr, "right", 2, it);
        assert_non_null(k);
        assert_non_null(l);
        assert_non_null(r);
        assert_true(k->ts >= l->ts + l->dur - 1.0 && k->ts >= r->ts + r->dur - 1.0);
    }
    free(tr);
    cw_trace_destroy(&t2);
    cw_pipeline_destroy(&p);
    assert_false(leaks(before, "a traced pipeline"));
}

/* ---- a resident loop's stages ------------------------------------------- */

static cw_resident *g_loop;
static cw_status two_stages(cw_stream *s, void *user) {
    (void)user;
    const char *names[] = {"decode", "infer"};
    for (int i = 0; i < 2; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(g_loop, s, names[i], &stage);
        if (st != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(g_loop, s, stage)) != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

/* Writes a copy's marks (stages workload, decode, infer from index 3 * copy):
 * timer ns from base: workload [0, 8000], decode [1000, 3000], infer [4000, 7000]. */
static void run_copy(volatile unsigned long long *marks, unsigned copy, unsigned long long base) {
    const unsigned long long v[6] = {0, 8000, 1000, 3000, 4000, 7000};
    for (unsigned i = 0; i < 6; i++) marks[6 * copy + i] = base + v[i];
}

static void test_resident(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    cw_resident *plain = NULL;
    assert_cw_ok(cw_resident_create(&plain, ctx, &rs));
    assert_cw(CW_ERROR_INVALID_STATE, cw_trace_record_resident(t, plain)); /* no trace */
    assert_non_null(strstr(cw_last_error()->message, "settings.trace"));
    cw_resident_destroy(&plain);
    rs.trace = 1;
    rs.unroll = 2;
    assert_cw_ok(cw_resident_create(&g_loop, ctx, &rs));
    assert_cw(CW_ERROR_INVALID_STATE, cw_trace_record_resident(t, g_loop)); /* not built */
    assert_cw_ok(cw_resident_set_workload_fn(g_loop, two_stages, NULL));
    assert_cw_ok(cw_resident_build(g_loop));
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    assert_int_equal(cwi_resident_trace(g_loop, &marks, &stages), 0);
    assert_int_equal(stages, 6);
    /* the timer at 0 is 1 ms past now on the host's clock (the fake runs no
     * probe kernel: the test sets the calibration) */
    const long long offset = (long long)(now_ms() * 1e6) + 1000000;
    assert_int_equal(cwi_trace_set_globaltimer(t, ctx, offset), 0);
    assert_cw_ok(cw_trace_record_resident(t, g_loop)); /* nothing ran yet: nothing added */
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 0);
    /* request 1: copies 0 and 1; then recorded twice (the second adds nothing) */
    run_copy(marks, 0, 10000);
    run_copy(marks, 1, 20000);
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 2 * 3 + 2);
    /* request 2 ran copy 0 again; copy 1's infer has begun and not ended */
    run_copy(marks, 0, 40000);
    marks[6 * 1 + 4] = 50000; /* infer of copy 1 began again: running */
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 2 * 3 + 2 + 3 + 1);
    char path[300];
    snprintf(path, sizeof path, "%s/resident.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(tr->n, 12);
    assert_int_equal(count(tr, "iteration"), 3);
    assert_int_equal(count(tr, "workload"), 3);
    assert_int_equal(count(tr, "decode"), 3);
    assert_int_equal(count(tr, "infer"), 3);
    const double t0 = find(tr, "iteration", 0)->ts; /* timer 10000 */
    const unsigned long long bases[3] = {10000, 20000, 40000};
    for (int i = 0; i < 3; i++) {
        const Ev *it = find(tr, "iteration", i), *w = find(tr, "workload", i), *d = find(tr, "decode", i),
                 *f = find(tr, "infer", i);
        assert_int_equal(it->pid, 2);
        assert_string_equal(track_name(tr, it), "loop 0: iterations");
        assert_string_equal(track_name(tr, w), "loop 0: workload");
        assert_string_equal(track_name(tr, d), "loop 0: decode");
        assert_string_equal(track_name(tr, f), "loop 0: infer");
        const double at = t0 + (double)(bases[i] - 10000) / 1e3;
        assert_float_equal(it->ts, at, 0.002);
        assert_float_equal(it->dur, 8.0, 0.002);
        assert_float_equal(w->ts, at, 0.002);
        assert_float_equal(d->ts, at + 1.0, 0.002);
        assert_float_equal(d->dur, 2.0, 0.002);
        assert_float_equal(f->ts, at + 4.0, 0.002);
        assert_float_equal(f->dur, 3.0, 0.002);
    }
    free(tr);
    /* stages that ran before a trace was made: its axis starts at the first */
    cw_trace *early = NULL;
    assert_cw_ok(cw_trace_create(&early, NULL));
    assert_int_equal(cwi_trace_set_globaltimer(early, ctx, (long long)(now_ms() * 1e6) - 10000000), 0);
    assert_cw_ok(cw_trace_record_resident(early, g_loop));
    assert_cw_ok(cw_trace_write(early, path));
    tr = calloc(1, sizeof *tr);
    load_trace(path, tr); /* every ts >= 0 */
    /* copy 0 (3 stages, its iteration); copy 1's infer runs: its copy is an
     * iteration still running, left whole for the next call */
    assert_int_equal(tr->n, 3 + 1);
    assert_float_equal(find(tr, "iteration", 0)->ts, 0.0, 0.0005);
    free(tr);
    cw_trace_destroy(&early);
    cw_resident_destroy(&g_loop);
    cw_trace_destroy(&t);
}

/* A record while the workload (the outer stage) runs and its inner stages
 * have ended: the header leaves an iteration still running for the next
 * call. The copy's stages all come with that call, the workload among them
 * (never skipped for good), and the iteration spans the workload: 8 us. */
static void test_resident_nested(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    rs.unroll = 1;
    assert_cw_ok(cw_resident_create(&g_loop, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(g_loop, two_stages, NULL));
    assert_cw_ok(cw_resident_build(g_loop));
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    assert_int_equal(cwi_resident_trace(g_loop, &marks, &stages), 0);
    assert_int_equal(stages, 3); /* workload, decode, infer */
    assert_int_equal(cwi_trace_set_globaltimer(t, ctx, (long long)(now_ms() * 1e6) + 1000000), 0);
    cw_trace_info info;
    uint64_t seen[4];
    /* request 1: the workload has begun, decode and infer have ended in it */
    run_copy(marks, 0, 10000);
    marks[1] = 0; /* the workload's end: not yet */
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_get_info(t, &info));
    seen[0] = info.spans;
    marks[1] = 18000; /* the workload ends */
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_get_info(t, &info));
    seen[1] = info.spans;
    /* request 2: recorded after it ended, twice */
    run_copy(marks, 0, 30000);
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_record_resident(t, g_loop)); /* nothing new */
    assert_cw_ok(cw_trace_get_info(t, &info));
    seen[2] = info.spans;
    /* request 3: recorded while decode runs inside the running workload */
    run_copy(marks, 0, 50000);
    marks[1] = 38000; /* the workload began at 50000 and has not ended */
    marks[3] = 33000; /* decode began at 51000 and has not ended */
    marks[4] = 34000; /* infer still holds request 2's run, read before */
    marks[5] = 37000;
    assert_cw_ok(cw_trace_record_resident(t, g_loop));
    assert_cw_ok(cw_trace_get_info(t, &info));
    seen[3] = info.spans;
    char path[300];
    snprintf(path, sizeof path, "%s/nested.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(count(tr, "workload"), 2); /* request 1's was skipped for good */
    assert_int_equal(count(tr, "decode"), 2);
    assert_int_equal(count(tr, "infer"), 2);
    assert_int_equal(count(tr, "iteration"), 2);
    for (int i = 0; i < 2; i++) {
        const Ev *it = find(tr, "iteration", i), *w = find(tr, "workload", i);
        assert_float_equal(it->ts, w->ts, 0.002);
        assert_float_equal(it->dur, 8.0, 0.002); /* was 6: from decode's begin to infer's end */
        assert_float_equal(w->dur, 8.0, 0.002);
        assert_float_equal(find(tr, "decode", i)->ts, w->ts + 1.0, 0.002);
    }
    assert_float_equal(find(tr, "iteration", 1)->ts - find(tr, "iteration", 0)->ts, 20.0, 0.002);
    free(tr);
    assert_int_equal(seen[0], 0);     /* request 1 left for the next call */
    assert_int_equal(seen[1], 4);     /* then its three stages and its iteration */
    assert_int_equal(seen[2], 4 + 4); /* request 2, once */
    assert_int_equal(seen[3], 4 + 4); /* request 3 left for the next call */
    cw_resident_destroy(&g_loop);
    cw_trace_destroy(&t);
}

/* ---- cw_trace_write beside other threads, and its sort ------------------ */

typedef struct {
    cw_trace *t;
    const char *path;
    cw_status st;
    int done; /* atomic */
} Caller;

/* Two threads record the same loop into one trace at once (trace.h: every
 * call is thread-safe; each stage is added once): the first is held by a
 * hook after it read what the trace noted of the stages and before it adds
 * any, while the second records (it returns, or waits for the first; the
 * test waits up to 2 s for it, then lets the first go). */
typedef struct {
    int armed, inside, go; /* atomics */
} Hold;

static void hold_source(void *arg) {
    Hold *h = arg;
    if (!__atomic_exchange_n(&h->armed, 0, __ATOMIC_ACQ_REL)) return;
    __atomic_store_n(&h->inside, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 10000 && !__atomic_load_n(&h->go, __ATOMIC_ACQUIRE); i++) sleep_ms(1); /* bounded: 10 s */
}

static void *record_main(void *arg) {
    Caller *c = arg;
    c->st = cw_trace_record_resident(c->t, g_loop);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_resident_recorded_by_two_threads(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    rs.unroll = 1;
    assert_cw_ok(cw_resident_create(&g_loop, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(g_loop, two_stages, NULL));
    assert_cw_ok(cw_resident_build(g_loop));
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    assert_int_equal(cwi_resident_trace(g_loop, &marks, &stages), 0);
    assert_int_equal(cwi_trace_set_globaltimer(t, ctx, (long long)(now_ms() * 1e6) + 1000000), 0);
    run_copy(marks, 0, 10000); /* request 1 ended: workload, decode, infer */
    Hold h = {1, 0, 0};
    cwi_trace_source_hook(hold_source, &h);
    Caller a = {t, NULL, CW_ERROR_INTERNAL, 0}, b = {t, NULL, CW_ERROR_INTERNAL, 0};
    pthread_t at, bt;
    assert_int_equal(pthread_create(&at, NULL, record_main, &a), 0);
    for (int i = 0; i < 10000 && !__atomic_load_n(&h.inside, __ATOMIC_ACQUIRE); i++) sleep_ms(1);
    const int inside = __atomic_load_n(&h.inside, __ATOMIC_ACQUIRE);
    assert_int_equal(pthread_create(&bt, NULL, record_main, &b), 0);
    for (int i = 0; i < 2000 && !__atomic_load_n(&b.done, __ATOMIC_ACQUIRE); i++) sleep_ms(1);
    __atomic_store_n(&h.go, 1, __ATOMIC_RELEASE);
    pthread_join(at, NULL);
    pthread_join(bt, NULL);
    cwi_trace_source_hook(NULL, NULL);
    assert_true(inside);
    assert_cw_ok(a.st);
    assert_cw_ok(b.st);
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    char path[300];
    snprintf(path, sizeof path, "%s/two-recorders.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    const int w = count(tr, "workload"), d = count(tr, "decode"), in = count(tr, "infer"), it = count(tr, "iteration");
    free(tr);
    cw_resident_destroy(&g_loop);
    cw_trace_destroy(&t);
    if (w != 1 || d != 1 || in != 1 || it != 1)
        fail_msg("request 1 recorded by two threads: workload %d, decode %d, infer %d, iteration %d times (%llu spans)",
                 w, d, in, it, (unsigned long long)info.spans);
    assert_int_equal(info.spans, 4);
}

static void *write_caller(void *arg) {
    Caller *c = arg;
    c->st = cw_trace_write(c->t, c->path);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *span_caller(void *arg) {
    Caller *c = arg;
    c->st = cw_trace_host_begin(c->t, "other thread");
    if (c->st == CW_SUCCESS) c->st = cw_trace_host_end(c->t);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Polls until *flag or fake_live(kind) >= 1 (when kind), up to 10 s; 1 when it came. */
static int wait_for(const int *flag, const char *kind) {
    for (int i = 0; i < 10000; i++) {
        if (flag ? __atomic_load_n(flag, __ATOMIC_ACQUIRE) : fake_live(kind) >= 1) return 1;
        sleep_ms(1);
    }
    return 0;
}

/* The trace's lock is not held across the GPU wait: another thread's host
 * span is begun and ended while cw_trace_write waits for a GPU span's end
 * (held back in the fake). Each span ended then is in that file or the
 * next, once. */
static void test_write_beside_spans(void **state) {
    (void)state;
    long before[NKINDS];
    snapshot(before);
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_stream *a = NULL;
    assert_cw_ok(cw_stream_create(&a, ctx, NULL));
    assert_cw_ok(cw_trace_begin(t, a, "held")); /* calibrates, not held */
    hold(1);
    assert_cw_ok(cw_trace_end(t, a)); /* its end event waits in the fake */
    char path[300];
    snprintf(path, sizeof path, "%s/beside.json", g_dir);
    Caller w = {t, path, CW_SUCCESS, 0}, o = {t, NULL, CW_SUCCESS, 0};
    pthread_t wt, ot;
    assert_int_equal(pthread_create(&wt, NULL, write_caller, &w), 0);
    const int waiting = wait_for(NULL, "syncwaiting"); /* the write waits for the end event */
    assert_int_equal(pthread_create(&ot, NULL, span_caller, &o), 0);
    const int spanned = waiting && wait_for(&o.done, NULL);
    /* the other thread's span was made while the write still waited */
    const int beside = spanned && !__atomic_load_n(&w.done, __ATOMIC_ACQUIRE) && fake_live("syncwaiting") == 1;
    hold(0);
    pthread_join(wt, NULL);
    pthread_join(ot, NULL);
    assert_int_equal(waiting, 1);
    assert_int_equal(beside, 1);
    assert_cw_ok(w.st);
    assert_cw_ok(o.st);
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(count(tr, "held"), 1);
    assert_true(count(tr, "other thread") <= 1); /* this file or the next */
    free(tr);
    assert_cw_ok(cw_trace_write(t, path));
    tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(tr->n, 2);
    assert_int_equal(count(tr, "held"), 1);
    assert_int_equal(count(tr, "other thread"), 1);
    free(tr);
    cw_stream_destroy(&a);
    cw_trace_destroy(&t);
    assert_false(leaks(before, "a write beside other spans"));
}

/* Spans made while writes run: host spans "h<k>" on one thread, GPU spans
 * "g<k>" on one stream from another, each ended in order. */
enum { kHostSpans = 20000, kGpuSpans = 5000 };
static void *host_adder(void *arg) {
    Caller *c = arg;
    char name[16];
    for (int k = 0; k < kHostSpans && c->st == CW_SUCCESS; k++) {
        snprintf(name, sizeof name, "h%d", k);
        c->st = cw_trace_host_begin(c->t, name);
        if (c->st == CW_SUCCESS) c->st = cw_trace_host_end(c->t);
        if (k % 200 == 199) sleep_ms(1); /* spread over the writes */
    }
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static cw_stream *g_adder_stream;
static void *gpu_adder(void *arg) {
    Caller *c = arg;
    char name[16];
    for (int k = 0; k < kGpuSpans && c->st == CW_SUCCESS; k++) {
        snprintf(name, sizeof name, "g%d", k);
        c->st = cw_trace_begin(c->t, g_adder_stream, name);
        if (c->st == CW_SUCCESS) c->st = cw_trace_end(c->t, g_adder_stream);
        if (k % 50 == 49) sleep_ms(1);
    }
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The spans of path named <kind><k>: each at most once, and those present
 * the first m (ended in order: none lost); returns m. */
static int ended_prefix(const char *path, char kind, int n) {
    char *text = slurp(path);
    unsigned char *seen = calloc((size_t)n, 1);
    int got = 0, top = 0;
    char key[16];
    snprintf(key, sizeof key, "{\"name\":\"%c", kind);
    for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = 0;
        if (strncmp(p, key, strlen(key))) continue;
        const int k = atoi(p + strlen(key));
        assert_true(k >= 0 && k < n);
        if (seen[k]++) fail_msg("%s holds %c%d twice", path, kind, k);
        got++;
        if (k + 1 > top) top = k + 1;
    }
    free(seen);
    free(text);
    if (got != top) fail_msg("%s holds %d of the first %d spans %c<k>: one was left out", path, got, top, kind);
    return got;
}

/* Writes while two threads add spans: every file holds each span once, all
 * those ended before the write began (a prefix of each thread's), and the
 * last one every span. */
static void test_write_while_adding(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_stream_create(&g_adder_stream, ctx, NULL));
    char path[300];
    snprintf(path, sizeof path, "%s/adding.json", g_dir);
    Caller h = {t, NULL, CW_SUCCESS, 0}, g = {t, NULL, CW_SUCCESS, 0};
    pthread_t ht, gt;
    assert_int_equal(pthread_create(&ht, NULL, host_adder, &h), 0);
    assert_int_equal(pthread_create(&gt, NULL, gpu_adder, &g), 0);
    int writes = 0, last_h = 0, last_g = 0;
    for (;;) {
        const int finished = __atomic_load_n(&h.done, __ATOMIC_ACQUIRE) && __atomic_load_n(&g.done, __ATOMIC_ACQUIRE);
        assert_cw_ok(cw_trace_write(t, path));
        writes++;
        const int nh = ended_prefix(path, 'h', kHostSpans), ng = ended_prefix(path, 'g', kGpuSpans);
        assert_true(nh >= last_h && ng >= last_g);
        last_h = nh;
        last_g = ng;
        if (finished) break;
    }
    pthread_join(ht, NULL);
    pthread_join(gt, NULL);
    assert_cw_ok(h.st);
    assert_cw_ok(g.st);
    print_message("# %d writes while spans were added\n", writes);
    assert_int_equal(last_h, kHostSpans);
    assert_int_equal(last_g, kGpuSpans);
    cw_stream_destroy(&g_adder_stream);
    cw_trace_destroy(&t);
}

/* The checks of ended_prefix without cmocka's assertions (for threads):
 * -1 with why in err when a span is twice or one was left out. */
static int ended_prefix_quiet(const char *path, char kind, int n, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot read %s", path);
        return -1;
    }
    unsigned char *seen = calloc((size_t)n, 1);
    int got = 0, top = 0, bad = 0;
    char key[16], line[512];
    snprintf(key, sizeof key, "{\"name\":\"%c", kind);
    while (!bad && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key))) continue;
        const int k = atoi(line + strlen(key));
        if (k < 0 || k >= n) bad = snprintf(err, cap, "%s: %c%d out of range", path, kind, k);
        else if (seen[k]++) bad = snprintf(err, cap, "%s holds %c%d twice", path, kind, k);
        got++;
        if (k + 1 > top) top = k + 1;
    }
    fclose(f);
    free(seen);
    if (!bad && got != top) bad = snprintf(err, cap, "%s holds %d of the first %d spans %c<k>", path, got, top, kind);
    return bad ? -1 : got;
}

typedef struct {
    cw_trace *t;
    const Caller *adders[2]; /* done flags: host, gpu */
    char path[320];
    int writes, failed, last_h, last_g;
    cw_status other; /* an unexpected status */
    char err[400];
} Writer;

static void *writer_main(void *arg) {
    Writer *w = arg;
    for (;;) {
        const int finished = __atomic_load_n(&w->adders[0]->done, __ATOMIC_ACQUIRE) &&
                             (!w->adders[1] || __atomic_load_n(&w->adders[1]->done, __ATOMIC_ACQUIRE));
        const cw_status st = cw_trace_write(w->t, w->path);
        if (st == CW_ERROR_DRIVER) {
            w->failed++; /* the fault: nothing written, nothing lost */
            continue;
        }
        if (st != CW_SUCCESS) {
            w->other = st;
            snprintf(w->err, sizeof w->err, "%s", cw_last_error()->message);
            return NULL;
        }
        w->writes++;
        const int nh = ended_prefix_quiet(w->path, 'h', kHostSpans, w->err, sizeof w->err);
        const int ng = w->adders[1] ? ended_prefix_quiet(w->path, 'g', kGpuSpans, w->err, sizeof w->err) : 0;
        if (nh < 0 || ng < 0) return NULL;
        if (nh < w->last_h || ng < w->last_g) {
            snprintf(w->err, sizeof w->err, "a later file of %s holds fewer spans", w->path);
            return NULL;
        }
        w->last_h = nh;
        w->last_g = ng;
        if (finished) return NULL;
    }
}

/* Two writers of one trace at once beside its adders, a third writing
 * another trace whose adder reaches max_spans meanwhile, and
 * cuEventSynchronize failing in some writes (the seam): each file holds
 * each span at most once and a prefix of each adder's; a failed write loses
 * nothing (the last files hold every span); run under TSan. */
static void test_writers_beside_adders_and_faults(void **state) {
    (void)state;
    cw_trace *t = NULL, *u = NULL;
    cw_trace_settings ts;
    cw_trace_settings_default(&ts);
    ts.max_spans = 3000;
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_trace_create(&u, &ts));
    assert_cw_ok(cw_stream_create(&g_adder_stream, ctx, NULL));
    /* the context's clock calibrated before any fault */
    assert_cw_ok(cw_trace_begin(t, g_adder_stream, "first"));
    assert_cw_ok(cw_trace_end(t, g_adder_stream));
    assert_int_equal(cwi_seam_enable(), 0);
    const int sync = cwi_seam_entry("cuEventSynchronize");
    assert_true(sync >= 0);
    Caller h = {t, NULL, CW_SUCCESS, 0}, g = {t, NULL, CW_SUCCESS, 0}, hu = {u, NULL, CW_SUCCESS, 0};
    Writer w[3];
    memset(w, 0, sizeof w);
    for (int i = 0; i < 3; i++) {
        w[i].t = i < 2 ? t : u;
        w[i].adders[0] = i < 2 ? &h : &hu;
        w[i].adders[1] = i < 2 ? &g : NULL;
        snprintf(w[i].path, sizeof w[i].path, "%s/writer%d.json", g_dir, i);
    }
    pthread_t at[3], wt[3];
    assert_int_equal(pthread_create(&at[0], NULL, host_adder, &h), 0);
    assert_int_equal(pthread_create(&at[1], NULL, gpu_adder, &g), 0);
    assert_int_equal(pthread_create(&at[2], NULL, host_adder, &hu), 0);
    for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&wt[i], NULL, writer_main, &w[i]), 0);
    int faults = 0;
    for (int k = 0; k < 2000 && !(__atomic_load_n(&h.done, __ATOMIC_ACQUIRE) &&
                                    __atomic_load_n(&g.done, __ATOMIC_ACQUIRE));
         k++) {
        if (!cwi_seam_fired() && k % 10 == 0) cwi_seam_fail(sync, 3, 999 /* CUDA_ERROR_UNKNOWN */);
        if (cwi_seam_fired()) {
            faults++;
            cwi_seam_fail(sync, 0, 0);
        }
        sleep_ms(2);
    }
    cwi_seam_fail(sync, 0, 0);
    for (int i = 0; i < 3; i++) pthread_join(at[i], NULL);
    for (int i = 0; i < 3; i++) pthread_join(wt[i], NULL);
    cwi_seam_disable();
    for (int i = 0; i < 3; i++) {
        print_message("# writer %d: %d files, %d failed writes, %d host and %d GPU spans in the last\n", i,
                      w[i].writes, w[i].failed, w[i].last_h, w[i].last_g);
        if (w[i].err[0]) fail_msg("writer %d: %s (status %d)", i, w[i].err, (int)w[i].other);
    }
    print_message("# %d faults fired\n", faults);
    assert_cw_ok(h.st);
    assert_cw_ok(g.st);
    assert_cw_ok(hu.st);
    /* a last write of each after all: every span ended */
    assert_cw_ok(cw_trace_write(t, w[0].path));
    assert_int_equal(ended_prefix(w[0].path, 'h', kHostSpans), kHostSpans);
    assert_int_equal(ended_prefix(w[0].path, 'g', kGpuSpans), kGpuSpans);
    assert_cw_ok(cw_trace_write(u, w[2].path));
    assert_int_equal(ended_prefix(w[2].path, 'h', kHostSpans), 3000);
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(u, &info));
    assert_int_equal(info.spans, 3000);
    assert_int_equal(info.dropped, kHostSpans - 3000);
    assert_true(faults > 0);
    cw_stream_destroy(&g_adder_stream);
    cw_trace_destroy(&t);
    cw_trace_destroy(&u);
}

/* A loop of a workload and 1023 stages "step", which the test's marks
 * place in the reverse of their order. */
enum { kSteps = 1023 };
static cw_status many_steps(cw_stream *s, void *user) {
    (void)user;
    for (int i = 0; i < kSteps; i++) {
        uint32_t stage = 0;
        cw_status st = cw_resident_stage_begin(g_loop, s, "step", &stage);
        if (st != CW_SUCCESS) return st;
        if ((st = cw_resident_stage_end(g_loop, s, stage)) != CW_SUCCESS) return st;
    }
    return CW_SUCCESS;
}

/* The write puts 160k spans in time order with O(n log n) comparisons
 * (counted by the seam), also when spans were added far from that order:
 * each record adds 1023 stages whose begins fall as their number rises. */
static void test_write_sort(void **state) {
    (void)state;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_resident_settings rs;
    cw_resident_settings_default(&rs);
    rs.trace = 1;
    rs.unroll = 1;
    assert_cw_ok(cw_resident_create(&g_loop, ctx, &rs));
    assert_cw_ok(cw_resident_set_workload_fn(g_loop, many_steps, NULL));
    assert_cw_ok(cw_resident_build(g_loop));
    volatile unsigned long long *marks = NULL;
    unsigned stages = 0;
    assert_int_equal(cwi_resident_trace(g_loop, &marks, &stages), 0);
    assert_int_equal(stages, kSteps + 1);
    assert_int_equal(cwi_trace_set_globaltimer(t, ctx, (long long)(now_ms() * 1e6) + 1000000), 0);
    const int records = 157; /* 1025 spans each: the workload, its steps, the iteration */
    for (int k = 0; k < records; k++) {
        const unsigned long long base = 1000000ull + 100000ull * (unsigned long long)k;
        for (unsigned j = 1; j <= kSteps; j++) {
            marks[2 * j] = base + 10ull * (kSteps + 1 - j);
            marks[2 * j + 1] = base + 10ull * (kSteps + 1 - j) + 5;
        }
        marks[0] = base;
        marks[1] = base + 20000;
        assert_cw_ok(cw_trace_record_resident(t, g_loop));
    }
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    const long long n = (long long)info.spans;
    assert_int_equal(n, records * (kSteps + 2));
    char path[300];
    snprintf(path, sizeof path, "%s/sorted.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    long long lg = 0;
    while ((1ll << lg) < n) lg++;
    const long long cmps = cwi_trace_sort_comparisons(t);
    print_message("# %lld spans sorted with %lld comparisons (n log2 n = %lld)\n", n, cmps, n * lg);
    assert_true(cmps > 0);
    assert_true(cmps <= 4 * n * lg); /* the insertion sort made 82 million: 28 n log2 n */
    /* the file: every span once, by begin, the longer first at one begin */
    char *text = slurp(path);
    long long spans = 0;
    double ts0 = -1, dur0 = 0;
    for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1) { /* one event a line */
        *nl = 0;
        if (!strstr(p, "\"ph\":\"X\"")) continue;
        const char *q = strstr(p, "\"ts\":"), *d = strstr(p, "\"dur\":");
        assert_non_null(q);
        assert_non_null(d);
        const double ts = strtod(q + 5, NULL), dur = strtod(d + 6, NULL);
        if (ts < ts0 || (ts == ts0 && dur > dur0))
            fail_msg("span %lld (ts %.3f, dur %.3f) after ts %.3f, dur %.3f", spans, ts, dur, ts0, dur0);
        ts0 = ts;
        dur0 = dur;
        spans++;
    }
    free(text);
    assert_int_equal(spans, n);
    cw_resident_destroy(&g_loop);
    cw_trace_destroy(&t);
}

/* ---- CUPTI: kernel spans from activity records (tests/fake_cupti.c) ------- */

/* The fake CUPTI's controls (dlsym; the same library cuweave opens). */
struct fake_cupti_rec {
    unsigned corr;
    int kind; /* 1 kernel, 2 copy, 3 memset */
    long long begin_ns, end_ns;
    char name[48];
};
static void (*cupti_busy)(int on);
static void (*cupti_fail)(const char *entry, int result);
static void (*cupti_buffer_records)(size_t n);
static size_t (*cupti_log)(struct fake_cupti_rec *out, size_t cap);
static void (*cupti_state)(int *subscribed, int *kinds, long *buffers, long *callbacks);
static long (*fake_calls)(const char *entry);
static int (*raw_memset)(unsigned long long dst, unsigned value, size_t count, CUstream s);
static char g_cupti_path[300];

static const char k_cupti_ptx[] = "//\n// trace test kernels\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n";

/* The next trace that asks for CUPTI opens path (a missing file: none). */
static void use_cupti(const char *path) {
    setenv("CUWEAVE_LIBCUPTI", path, 1);
    assert_int_equal(cwi_cupti_forget(), 0);
}

static long long mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* No CUPTI session is left: unsubscribed, no kind enabled, no buffer held. */
static void assert_cupti_closed(void) {
    int sub = -1, kinds = -1;
    long buffers = -1;
    cupti_state(&sub, &kinds, &buffers, NULL);
    assert_int_equal(sub, 0);
    assert_int_equal(kinds, 0);
    assert_int_equal(buffers, 0);
}

static void test_cupti_absent(void **state) {
    (void)state;
    use_cupti("/nonexistent/libcupti.so.13");
    cw_trace_settings s;
    cw_trace_settings_default(&s);
    assert_int_equal(s.gpu_timing, CW_TRACE_GPU_AUTO);
    cw_trace *t = NULL;
    s.gpu_timing = 3;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_trace_create(&t, &s));
    assert_null(t);
    s.gpu_timing = CW_TRACE_GPU_CUPTI;
    assert_cw(CW_ERROR_NOT_SUPPORTED, cw_trace_create(&t, &s));
    assert_non_null(strstr(cw_last_error()->message, "/nonexistent/libcupti.so.13"));
    assert_null(t);
    const char *want[2] = {"not used: CUPTI not found: tried /nonexistent/libcupti.so.13",
                           "not used: gpu_timing is CW_TRACE_GPU_EVENTS"};
    for (int k = 0; k < 2; k++) {
        s.gpu_timing = k ? CW_TRACE_GPU_EVENTS : CW_TRACE_GPU_AUTO;
        cw_clear_error();
        assert_cw_ok(cw_trace_create(&t, &s));
        assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* AUTO without CUPTI is no failure */
        cw_trace_info info;
        assert_cw_ok(cw_trace_get_info(t, &info));
        assert_int_equal(info.gpu_timing, CW_TRACE_GPU_EVENTS);
        assert_int_equal(info.cupti_result, k ? 0 : -1);
        assert_int_equal(info.gpu_records, 0);
        char path[300];
        snprintf(path, sizeof path, "%s/absent.json", g_dir);
        assert_cw_ok(cw_trace_write(t, path));
        Trace *tr = calloc(1, sizeof *tr);
        load_trace(path, tr);
        assert_string_equal(tr->gpu_timing, "events");
        assert_string_equal(tr->cupti, want[k]);
        free(tr);
        cw_trace_destroy(&t);
    }
}

/* A diamond whose operators launch: src a kernel and a copy to the device,
 * left and right a kernel each, sink a kernel and a memset (the driver's,
 * called directly: cuweave has no memset call). */
typedef struct COp {
    const char *in[2];
    int nout;
    cw_kernel *k;
    int copy, memset;
} COp;
static cw_devptr g_cdev;

static cw_status cupti_compute(cw_io *io, void *user) {
    COp *o = user;
    cw_stream *s = NULL;
    cw_status st = cw_io_receive_stream(io, o->in[0], &s);
    if (st != CW_SUCCESS) return st;
    if (o->in[1] && (st = cw_io_receive_stream(io, o->in[1], &s)) != CW_SUCCESS) return st;
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    void *args[] = {&g_cdev};
    if ((st = cw_kernel_launch(o->k, s, &cfg, args)) != CW_SUCCESS) return st;
    static const unsigned char host[256];
    if (o->copy && (st = cw_copy_to_device(s, g_cdev, host, sizeof host)) != CW_SUCCESS) return st;
    if (o->memset) {
        CUstream h = NULL;
        if ((st = cwt_stream_handle(s, &h)) != CW_SUCCESS) return st;
        if (raw_memset(g_cdev, 0, 64, h) != 0) return CW_ERROR_DRIVER;
    }
    for (int i = 0; i < o->nout; i++)
        if ((st = cw_io_emit(io, i ? "out2" : "out", NULL, NULL)) != CW_SUCCESS) return st;
    return CW_SUCCESS;
}

static COp g_cops[4];
static const char *const k_cop_names[4] = {"src", "left", "right", "sink"};
static const char *const k_cop_kernels[4] = {"src_k#8", "left_k#8", "right_k#8", "sink_k#8"};

static cw_pipeline *cupti_diamond(cw_module *m) {
    const COp shape[4] = {{{NULL, NULL}, 2, NULL, 1, 0}, {{"in", NULL}, 1, NULL, 0, 0}, {{"in", NULL}, 1, NULL, 0, 0},
                          {{"a", "b"}, 0, NULL, 0, 1}};
    cw_pipeline_settings ps;
    cw_pipeline_settings_default(&ps);
    ps.threads = 2;
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, &ps));
    for (int i = 0; i < 4; i++) {
        g_cops[i] = shape[i];
        assert_cw_ok(cw_module_get_kernel(m, k_cop_kernels[i], &g_cops[i].k));
        cw_operator_ops ops;
        memset(&ops, 0, sizeof ops);
        ops.compute = cupti_compute;
        cw_operator *op = NULL;
        assert_cw_ok(cw_operator_create(&op, k_cop_names[i], &ops, &g_cops[i], NULL));
        for (int k = 0; k < 2; k++)
            if (g_cops[i].in[k]) assert_cw_ok(cw_operator_add_input(op, g_cops[i].in[k], NULL));
        if (g_cops[i].nout > 0) assert_cw_ok(cw_operator_add_output(op, "out", NULL));
        if (g_cops[i].nout > 1) assert_cw_ok(cw_operator_add_output(op, "out2", NULL));
        assert_cw_ok(cw_pipeline_add(p, op));
    }
    assert_cw_ok(cw_pipeline_connect(p, "src", "out", "left", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "src", "out2", "right", "in"));
    assert_cw_ok(cw_pipeline_connect(p, "left", "out", "sink", "a"));
    assert_cw_ok(cw_pipeline_connect(p, "right", "out", "sink", "b"));
    return p;
}

static const Ev *span_of_corr(const Trace *t, unsigned corr, int *count) {
    const Ev *found = NULL;
    *count = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].corr == (long long)corr) {
            found = &t->ev[i];
            ++*count;
        }
    return found;
}

static void test_cupti_pipeline(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    cw_pipeline *p = cupti_diamond(m);
    assert_cw_ok(cw_pipeline_run(p, 8)); /* warm: pools, kernels */
    assert_cw_ok(cw_pipeline_synchronize(p));
    long before[NKINDS];
    snapshot(before); /* compared once the trace is gone, the pipeline still here */
    cupti_log(NULL, 0);
    const long long t0 = mono();
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, NULL)); /* AUTO: the fake CUPTI */
    const long long t1 = mono();
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_timing, CW_TRACE_GPU_CUPTI);
    assert_int_equal(info.cupti_result, 0);
    assert_int_equal(info.contexts, 1); /* CUPTI's clock */
    assert_true(info.calibration_error_ns > 0 && info.calibration_error_ns < 1000000);
    int sub = 0, kinds = 0;
    cupti_state(&sub, &kinds, NULL, NULL);
    assert_int_equal(sub, 1);
    assert_int_equal(kinds, 7);
    /* the same run untraced and traced: no event recorded for the trace */
    long ev = fake_calls("cuEventRecord");
    assert_cw_ok(cw_pipeline_run(p, 3));
    assert_cw_ok(cw_pipeline_synchronize(p));
    const long untraced_records = fake_calls("cuEventRecord") - ev;
    struct fake_cupti_rec untraced[64];
    const size_t nun = cupti_log(untraced, 64);
    assert_int_equal(nun, 3 * 6); /* CUPTI sees every launch in the process */
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    ev = fake_calls("cuEventRecord");
    assert_cw_ok(cw_pipeline_run(p, 3));
    assert_cw_ok(cw_pipeline_synchronize(p));
    assert_int_equal(fake_calls("cuEventRecord") - ev, untraced_records);
    struct fake_cupti_rec rec[64];
    const size_t nrec = cupti_log(rec, 64);
    assert_int_equal(nrec, 3 * 6);
    /* a launch outside every compute call: recorded by CUPTI, not traced */
    cw_launch_config cfg;
    cw_launch_config_default(&cfg);
    void *args[] = {&g_cdev};
    assert_cw_ok(cw_kernel_launch(g_cops[0].k, s, &cfg, args));
    assert_cw_ok(cw_stream_synchronize(s));
    struct fake_cupti_rec outside;
    assert_int_equal(cupti_log(&outside, 1), 1);
    char path[300];
    snprintf(path, sizeof path, "%s/cupti-pipeline.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_records, nrec);
    assert_int_equal(info.dropped, 0);
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr); /* the format, the nesting rule */
    assert_string_equal(tr->gpu_timing, "cupti");
    assert_int_equal(strncmp(tr->cupti, "used: ", 6), 0);
    assert_non_null(strstr(tr->cupti, "libfakecupti.so"));
    /* every traced record is a span, once, as CUPTI had it, on the host's
     * clock: ts is the record's begin less the trace's origin, made between
     * t0 and t1 (within the calibration error and the file's rounding) */
    const double err = (double)info.calibration_error_ns + 2.0;
    int kernels[4] = {0}, copies = 0, memsets = 0;
    long long iters[4][3];
    for (size_t i = 0; i < nrec; i++) {
        int n = 0;
        const Ev *e = span_of_corr(tr, rec[i].corr, &n);
        if (n != 1) fail_msg("record %u (%s) is %d spans", rec[i].corr, rec[i].name, n);
        assert_int_equal(e->pid, 2);
        const double origin = (double)rec[i].begin_ns - e->ts * 1e3;
        if (origin < (double)t0 - err || origin > (double)t1 + err)
            fail_msg("record %u begins at %.0f ns from an origin outside [%lld, %lld]", rec[i].corr, origin, t0, t1);
        assert_true(fabs(e->dur * 1e3 - (double)(rec[i].end_ns - rec[i].begin_ns)) <= 2.0);
        assert_true(e->iteration >= 0);
        int op = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(e->op, k_cop_names[k])) op = k;
        assert_true(op >= 0);
        assert_string_equal(track_name(tr, e), k_cop_names[op]); /* the stream the call asked for */
        if (rec[i].kind == 1) {
            assert_string_equal(e->cat, "kernel");
            assert_string_equal(e->name, k_cop_kernels[op]);
            assert_true(kernels[op] < 3);
            iters[op][kernels[op]++] = e->iteration;
        } else if (rec[i].kind == 2) {
            assert_string_equal(e->cat, "memcpy");
            assert_string_equal(e->name, "memcpy HtoD");
            assert_int_equal(e->bytes, 256);
            assert_int_equal(op, 0);
            copies++;
        } else {
            assert_string_equal(e->cat, "memset");
            assert_string_equal(e->name, "memset");
            assert_int_equal(e->bytes, 64 * 4);
            assert_int_equal(op, 3);
            memsets++;
        }
    }
    for (int k = 0; k < 4; k++) {
        assert_int_equal(kernels[k], 3);
        assert_true(iters[k][0] != iters[k][1] && iters[k][1] != iters[k][2] && iters[k][0] != iters[k][2]);
    }
    assert_int_equal(copies, 3);
    assert_int_equal(memsets, 3);
    /* the untraced run's records and the launch outside are not there */
    for (size_t i = 0; i < nun; i++) {
        int n = 0;
        span_of_corr(tr, untraced[i].corr, &n);
        assert_int_equal(n, 0);
    }
    int n_out = 0;
    span_of_corr(tr, outside.corr, &n_out);
    assert_int_equal(n_out, 0);
    /* per call, a span named after its operator around its records on its
     * stream's track; per call a host span */
    for (int k = 0; k < 4; k++) {
        int gpu = 0, host = 0;
        for (size_t i = 0; i < tr->n; i++) {
            const Ev *e = &tr->ev[i];
            if (strcmp(e->name, k_cop_names[k])) continue;
            if (e->pid == 1) {
                host++;
                continue;
            }
            gpu++;
            assert_string_equal(e->cat, "gpu");
            assert_true(e->iteration >= 0);
            int inside = 0;
            for (size_t j = 0; j < tr->n; j++) {
                const Ev *c = &tr->ev[j];
                if (c->corr < 0 || c->iteration != e->iteration || strcmp(c->op, k_cop_names[k])) continue;
                assert_int_equal(c->tid, e->tid);
                assert_true(c->ts >= e->ts - 0.0015 && c->ts + c->dur <= e->ts + e->dur + 0.0015);
                inside++;
            }
            assert_int_equal(inside, k == 0 || k == 3 ? 2 : 1);
        }
        assert_int_equal(gpu, 3);
        assert_int_equal(host, 3);
    }
    free(tr);
    cw_trace_destroy(&t); /* the pipeline holds it */
    int held = 0;
    cupti_state(&held, NULL, NULL, NULL);
    assert_int_equal(held, 1);
    assert_cw_ok(cw_pipeline_set_trace(p, NULL));
    assert_cupti_closed(); /* the last CUPTI trace went: the session closed */
    assert_false(leaks(before, "a pipeline traced through CUPTI"));
    cw_pipeline_destroy(&p);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* One operator launching one kernel a call. */
static cw_pipeline *one_op(cw_module *m, const char *name, COp *o) {
    memset(o, 0, sizeof *o);
    assert_cw_ok(cw_module_get_kernel(m, "one_k#8", &o->k));
    cw_pipeline *p = NULL;
    assert_cw_ok(cw_pipeline_create(&p, ctx, NULL));
    cw_operator_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.compute = cupti_compute;
    cw_operator *op = NULL;
    assert_cw_ok(cw_operator_create(&op, name, &ops, o, NULL));
    assert_cw_ok(cw_pipeline_add(p, op));
    return p;
}

static int count_cat(const Trace *t, const char *cat, const char *op) {
    int n = 0;
    for (size_t i = 0; i < t->n; i++) n += !strcmp(t->ev[i].cat, cat) && (!op || !strcmp(t->ev[i].op, op));
    return n;
}

/* Two traces on CUPTI at once, CUPTI delivering full buffers from its own
 * thread: each trace has its own calls' records, each once. */
static void test_cupti_two_traces(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    COp oa, ob;
    cw_pipeline *pa = one_op(m, "alpha", &oa), *pb = one_op(m, "beta", &ob);
    cw_trace *ta = NULL, *tb = NULL;
    assert_cw_ok(cw_trace_create(&ta, NULL));
    assert_cw_ok(cw_trace_create(&tb, NULL));
    assert_cw_ok(cw_pipeline_set_trace(pa, ta));
    assert_cw_ok(cw_pipeline_set_trace(pb, tb));
    cupti_buffer_records(3);
    for (int i = 0; i < 5; i++) {
        assert_cw_ok(cw_pipeline_run(pa, 2));
        assert_cw_ok(cw_pipeline_run(pb, 1));
    }
    assert_cw_ok(cw_pipeline_synchronize(pa));
    assert_cw_ok(cw_pipeline_synchronize(pb));
    char path[300];
    snprintf(path, sizeof path, "%s/cupti-a.json", g_dir);
    assert_cw_ok(cw_trace_write(ta, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(count_cat(tr, "kernel", "alpha"), 10);
    assert_int_equal(count_cat(tr, "kernel", NULL), 10);
    assert_cw_ok(cw_trace_write(ta, path)); /* again: the same spans, once each */
    load_trace(path, tr);
    assert_int_equal(count_cat(tr, "kernel", NULL), 10);
    cw_pipeline_destroy(&pa);
    cw_trace_destroy(&ta); /* tb keeps the session */
    int sub = 0;
    cupti_state(&sub, NULL, NULL, NULL);
    assert_int_equal(sub, 1);
    assert_cw_ok(cw_pipeline_run(pb, 1));
    assert_cw_ok(cw_pipeline_synchronize(pb));
    snprintf(path, sizeof path, "%s/cupti-b.json", g_dir);
    assert_cw_ok(cw_trace_write(tb, path));
    load_trace(path, tr);
    assert_int_equal(count_cat(tr, "kernel", "beta"), 6);
    assert_int_equal(count_cat(tr, "kernel", NULL), 6);
    cupti_buffer_records(0);
    free(tr);
    cw_pipeline_destroy(&pb);
    cw_trace_destroy(&tb);
    assert_cupti_closed();
    cupti_log(NULL, 0);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* CUPTI refused (another subscriber) or failing: AUTO takes events and says
 * why, CUPTI is an error; nothing is left subscribed or enabled. */
static void test_cupti_refused(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    COp o;
    cw_pipeline *p = one_op(m, "solo", &o);
    assert_cw_ok(cw_pipeline_run(p, 1));
    assert_cw_ok(cw_pipeline_synchronize(p));
    long before[NKINDS];
    snapshot(before);
    cw_trace_settings set;
    cw_trace_settings_default(&set);
    cw_trace *t = NULL;
    /* Nsight Systems (say) holds CUPTI */
    cupti_busy(1);
    set.gpu_timing = CW_TRACE_GPU_CUPTI;
    assert_cw(CW_ERROR_NOT_PERMITTED, cw_trace_create(&t, &set));
    assert_non_null(strstr(cw_last_error()->message, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
    assert_null(t);
    assert_cw_ok(cw_trace_create(&t, NULL));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_timing, CW_TRACE_GPU_EVENTS);
    assert_int_equal(info.cupti_result, 39);
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_pipeline_run(p, 2));
    assert_cw_ok(cw_pipeline_synchronize(p));
    char path[300];
    snprintf(path, sizeof path, "%s/cupti-refused.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_string_equal(tr->gpu_timing, "events");
    assert_string_equal(tr->cupti, "refused: cuptiSubscribe returned CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED "
                                   "(another CUPTI user holds it: Nsight Systems, Nsight Compute, compute-sanitizer, "
                                   "a profiler)");
    assert_int_equal(count_cat(tr, "kernel", NULL), 0);
    int gpu = 0; /* the event path: a span per call named after the operator */
    for (size_t i = 0; i < tr->n; i++) gpu += tr->ev[i].pid == 2 && !strcmp(tr->ev[i].name, "solo");
    assert_int_equal(gpu, 2);
    assert_cw_ok(cw_pipeline_set_trace(p, NULL));
    cw_trace_destroy(&t);
    cupti_busy(0);
    assert_cupti_closed();
    /* each step of opening the session failing */
    static const struct {
        const char *entry;
        int result;
        cw_status cupti_mode;
        const char *says;
    } fails[] = {
        {"cuptiSubscribe", 35, CW_ERROR_NOT_PERMITTED, "refused: cuptiSubscribe returned CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"},
        {"cuptiSubscribe", 15, CW_ERROR_NOT_SUPPORTED, "refused: cuptiSubscribe returned CUPTI_ERROR_NOT_INITIALIZED"},
        {"cuptiActivityRegisterCallbacks", 15, CW_ERROR_NOT_SUPPORTED,
         "failed: cuptiActivityRegisterCallbacks returned CUPTI_ERROR_NOT_INITIALIZED"},
        {"cuptiActivityEnable", 27, CW_ERROR_NOT_SUPPORTED, "failed: cuptiActivityEnable returned CUPTI_ERROR_NOT_SUPPORTED"},
    };
    for (size_t k = 0; k < sizeof fails / sizeof fails[0]; k++) {
        for (int mode = 0; mode < 2; mode++) {
            cupti_fail(fails[k].entry, fails[k].result);
            set.gpu_timing = mode ? CW_TRACE_GPU_CUPTI : CW_TRACE_GPU_AUTO;
            const cw_status st = cw_trace_create(&t, &set);
            assert_cupti_closed();
            if (mode) {
                assert_int_equal(st, fails[k].cupti_mode);
                assert_non_null(strstr(cw_last_error()->message, fails[k].says));
                assert_null(t);
                continue;
            }
            assert_cw_ok(st);
            assert_cw_ok(cw_trace_get_info(t, &info));
            assert_int_equal(info.gpu_timing, CW_TRACE_GPU_EVENTS);
            assert_int_equal(info.cupti_result, fails[k].result);
            assert_cw_ok(cw_trace_write(t, path));
            load_trace(path, tr);
            assert_string_equal(tr->cupti, fails[k].says);
            cw_trace_destroy(&t);
        }
    }
    /* and then it works */
    assert_cw_ok(cw_trace_create(&t, NULL));
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_timing, CW_TRACE_GPU_CUPTI);
    cw_trace_destroy(&t);
    assert_cupti_closed();
    free(tr);
    assert_false(leaks(before, "CUPTI refused"));
    cw_pipeline_destroy(&p);
    cupti_log(NULL, 0);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* max_spans bounds a CUPTI trace too: records past it are counted dropped. */
static void test_cupti_bounded(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    COp o;
    cw_pipeline *p = one_op(m, "bounded", &o);
    cw_trace_settings set;
    cw_trace_settings_default(&set);
    set.max_spans = 6;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, &set));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    assert_cw_ok(cw_pipeline_run(p, 5)); /* 5 host spans, 5 calls, 5 kernels */
    assert_cw_ok(cw_pipeline_synchronize(p));
    cw_trace_info i0;
    assert_cw_ok(cw_trace_get_info(t, &i0)); /* the host spans: the calls, maybe in-flight waits */
    assert_int_equal(i0.gpu_records, 0);
    char path[300];
    snprintf(path, sizeof path, "%s/cupti-bounded.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.spans, 6);
    /* the 5 kernels' records came at the write: each kept or counted dropped */
    assert_int_equal(info.gpu_records + (info.dropped - i0.dropped), 5);
    assert_int_equal(info.gpu_records, 6 - i0.spans);
    Trace *tr = calloc(1, sizeof *tr);
    load_trace(path, tr);
    assert_int_equal(count_cat(tr, "kernel", NULL) + count_cat(tr, "host", NULL), 6);
    free(tr);
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    assert_cupti_closed();
    cupti_log(NULL, 0);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* Past max_spans a CUPTI trace keeps no more calls: their launches are not
 * followed, and no timing event is recorded for them either (the CUPTI path
 * records none, trace.h). */
static void test_cupti_calls_past_max_spans(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    COp o;
    cw_pipeline *p = one_op(m, "past", &o);
    assert_cw_ok(cw_pipeline_run(p, 5)); /* warm */
    assert_cw_ok(cw_pipeline_synchronize(p));
    long ev = fake_calls("cuEventRecord");
    assert_cw_ok(cw_pipeline_run(p, 5));
    assert_cw_ok(cw_pipeline_synchronize(p));
    const long untraced = fake_calls("cuEventRecord") - ev;
    cw_trace_settings set;
    cw_trace_settings_default(&set);
    set.max_spans = 2;
    set.gpu_timing = CW_TRACE_GPU_CUPTI;
    cw_trace *t = NULL;
    assert_cw_ok(cw_trace_create(&t, &set));
    assert_cw_ok(cw_pipeline_set_trace(p, t));
    ev = fake_calls("cuEventRecord");
    const long live_ev = fake_live("event");
    assert_cw_ok(cw_pipeline_run(p, 5)); /* 2 calls kept, 3 past max_spans */
    assert_cw_ok(cw_pipeline_synchronize(p));
    const long traced = fake_calls("cuEventRecord") - ev;
    cw_trace_info info;
    assert_cw_ok(cw_trace_get_info(t, &info));
    assert_int_equal(info.gpu_timing, CW_TRACE_GPU_CUPTI);
    char path[300];
    snprintf(path, sizeof path, "%s/cupti-past.json", g_dir);
    assert_cw_ok(cw_trace_write(t, path));
    if (traced != untraced)
        fail_msg("a CUPTI trace past max_spans recorded %ld cuEventRecord more than untraced (%ld events live more)",
                 traced - untraced, fake_live("event") - live_ev);
    cw_pipeline_destroy(&p);
    cw_trace_destroy(&t);
    assert_cupti_closed();
    cupti_log(NULL, 0);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* Traces on CUPTI made, used and destroyed on three threads at once, CUPTI
 * delivering each record from its own thread: the session opened and closed
 * under them, every other trace destroyed with its records in flight: each
 * trace written has its own calls' records, each once. */
typedef struct ChurnArg {
    cw_module *m;
    int id, rounds, bad;
    char why[160];
} ChurnArg;

static void *cupti_churn(void *arg) {
    ChurnArg *a = arg;
    char name[32];
    snprintf(name, sizeof name, "churn%d", a->id);
    for (int r = 0; r < a->rounds && !a->bad; r++) {
        COp o;
        memset(&o, 0, sizeof o);
        cw_operator *op = NULL;
        cw_pipeline *p = NULL;
        cw_trace *t = NULL;
        cw_operator_ops ops;
        memset(&ops, 0, sizeof ops);
        ops.compute = cupti_compute;
        cw_trace_settings set;
        cw_trace_settings_default(&set);
        set.gpu_timing = CW_TRACE_GPU_CUPTI;
        char path[300];
        snprintf(path, sizeof path, "%s/churn-%d.json", g_dir, a->id);
        cw_trace_info info;
        cw_status st;
        if ((st = cw_module_get_kernel(a->m, "one_k#8", &o.k)) || (st = cw_pipeline_create(&p, ctx, NULL)) ||
            (st = cw_operator_create(&op, name, &ops, &o, NULL)) || (st = cw_pipeline_add(p, op)) ||
            (st = cw_trace_create(&t, &set)) || (st = cw_pipeline_set_trace(p, t)) ||
            (st = cw_pipeline_run(p, 3))) {
            a->bad = 1;
            snprintf(a->why, sizeof a->why, "round %d: status %d: %s", r, st, cw_last_error()->message);
        } else if (r % 2) {
            /* destroyed with its records in CUPTI's buffers, maybe being delivered */
        } else if ((st = cw_pipeline_synchronize(p)) || (st = cw_trace_write(t, path)) ||
                   (st = cw_trace_get_info(t, &info))) {
            a->bad = 1;
            snprintf(a->why, sizeof a->why, "round %d: status %d: %s", r, st, cw_last_error()->message);
        } else if (info.gpu_records != 3 || info.dropped != 0) {
            a->bad = 1;
            snprintf(a->why, sizeof a->why, "round %d: %llu records, %llu dropped (3, 0 expected)", r,
                     (unsigned long long)info.gpu_records, (unsigned long long)info.dropped);
        }
        cw_pipeline_destroy(&p);
        cw_trace_destroy(&t);
    }
    return NULL;
}

static void test_cupti_traces_churned_on_threads(void **state) {
    (void)state;
    use_cupti(g_cupti_path);
    cw_module *m = NULL;
    assert_cw_ok(cw_module_load_image(&m, k_cupti_ptx));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, ctx, NULL));
    cw_buffer *buf = NULL;
    assert_cw_ok(cw_buffer_create(&buf, s, 4096));
    assert_cw_ok(cw_buffer_get_ptr(buf, &g_cdev));
    cupti_buffer_records(1);
    enum { N = 3 };
    ChurnArg a[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].m = m;
        a[i].id = i;
        a[i].rounds = 40;
        assert_int_equal(pthread_create(&th[i], NULL, cupti_churn, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    cupti_buffer_records(0);
    for (int i = 0; i < N; i++)
        if (a[i].bad) fail_msg("thread %d: %s", i, a[i].why);
    assert_cupti_closed();
    cupti_log(NULL, 0);
    cw_buffer_destroy(&buf);
    cw_stream_destroy(&s);
    cw_module_destroy(&m);
}

/* CUWEAVE_LIBCUPTI naming what is no CUPTI (a directory, the C library, the
 * fake driver: a library lacking CUPTI's entry points, a relative name):
 * CUPTI is CW_ERROR_NOT_SUPPORTED naming the file, AUTO timing events with
 * the reason in the trace; nothing opened stays subscribed. */
static void test_cupti_hostile_library_names(void **state) {
    (void)state;
    char lib_fake[300];
    snprintf(lib_fake, sizeof lib_fake, "%s", g_cupti_path);
    char *slash = strrchr(lib_fake, '/');
    snprintf(slash ? slash + 1 : lib_fake, sizeof lib_fake - (size_t)(slash ? slash + 1 - lib_fake : 0),
             "libfakecuda.so");
    const char *names[4] = {g_dir, "libc.so.6", lib_fake, "../../nonexistent/libcupti.so"};
    for (int i = 0; i < 4; i++) {
        use_cupti(names[i]);
        cw_trace_settings s;
        cw_trace_settings_default(&s);
        s.gpu_timing = CW_TRACE_GPU_CUPTI;
        cw_trace *t = NULL;
        assert_cw(CW_ERROR_NOT_SUPPORTED, cw_trace_create(&t, &s));
        assert_null(t);
        if (!strstr(cw_last_error()->message, names[i])) fail_msg("'%s': %s", names[i], cw_last_error()->message);
        s.gpu_timing = CW_TRACE_GPU_AUTO;
        assert_cw_ok(cw_trace_create(&t, &s));
        cw_trace_info info;
        assert_cw_ok(cw_trace_get_info(t, &info));
        assert_int_equal(info.gpu_timing, CW_TRACE_GPU_EVENTS);
        assert_int_equal(info.cupti_result, -1);
        cw_trace_destroy(&t);
        int sub = 1;
        cupti_state(&sub, NULL, NULL, NULL);
        assert_int_equal(sub, 0);
    }
    use_cupti("/nonexistent/libcupti.so.13");
}

/* CUWEAVE_LIBCUDA naming a driver other than the system's (here the fake):
 * the search for libcupti must not pick up one found on its own (CUPTI
 * instruments the libcuda.so.1 it links, not the driver cuweave runs on: on
 * a machine with the toolkit that was the real CUPTI under the fake driver,
 * and test_cpp's trace counted a context too many). Only CUWEAVE_LIBCUPTI
 * names a CUPTI then. The driver loaded decides, not the variable's value
 * at the trace's creation: unset after the load (review), still not
 * searched. The control: CUWEAVE_LIBCUPTI naming the same file is taken. */
static void test_cupti_not_searched_beside_another_driver(void **state) {
    (void)state;
    char dir[64] = "/tmp/cw-cupti-home-XXXXXX", lib64[128], link[160], target[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(lib64, sizeof lib64, "%s/lib64", dir);
    assert_int_equal(mkdir(lib64, 0700), 0);
    snprintf(link, sizeof link, "%s/libcupti.so", lib64);
    assert_non_null(realpath(g_cupti_path, target));
    assert_int_equal(symlink(target, link), 0);
    const char *driver = getenv("CUWEAVE_LIBCUDA");
    assert_non_null(driver);
    char saved[PATH_MAX];
    snprintf(saved, sizeof saved, "%s", driver);
    unsetenv("CUWEAVE_LIBCUPTI");
    setenv("CUDA_HOME", dir, 1);
    setenv("FAKE_CUPTI_LIBCUDA", saved, 1); /* the fake CUPTI's own way to the fake driver */
    char path[200];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    Trace *tr = calloc(1, sizeof *tr);
    assert_non_null(tr);
    for (int round = 0; round < 3; round++) {
        /* 0: another driver loaded, nothing names CUPTI: not searched;
         * 1: the same with CUWEAVE_LIBCUDA unset since the load: not searched;
         * 2: another driver and CUWEAVE_LIBCUPTI naming the file: taken */
        if (round == 1) unsetenv("CUWEAVE_LIBCUDA");
        if (round == 2) {
            setenv("CUWEAVE_LIBCUDA", saved, 1);
            setenv("CUWEAVE_LIBCUPTI", link, 1);
        }
        assert_int_equal(cwi_cupti_forget(), 0);
        cw_trace_settings s;
        cw_trace_settings_default(&s);
        s.gpu_timing = CW_TRACE_GPU_AUTO;
        cw_trace *t = NULL;
        assert_cw_ok(cw_trace_create(&t, &s));
        cw_trace_info info;
        assert_cw_ok(cw_trace_get_info(t, &info));
        assert_cw_ok(cw_trace_write(t, path));
        cw_trace_destroy(&t);
        load_trace(path, tr);
        const int searched = strstr(tr->cupti, "not searched") == NULL;
        if (round < 2) {
            if (info.gpu_timing != CW_TRACE_GPU_EVENTS || searched)
                fail_msg("round %d, the driver loaded from %s: the search ran (gpu_timing %u): %s", round, saved,
                         info.gpu_timing, tr->cupti);
            if (!strstr(tr->cupti, "CUWEAVE_LIBCUDA") || !strstr(tr->cupti, "CUWEAVE_LIBCUPTI"))
                fail_msg("the trace does not say why: %s", tr->cupti);
            s.gpu_timing = CW_TRACE_GPU_CUPTI;
            assert_cw(CW_ERROR_NOT_SUPPORTED, cw_trace_create(&t, &s));
            assert_null(t);
            if (!strstr(cw_last_error()->message, "CUWEAVE_LIBCUDA") ||
                !strstr(cw_last_error()->message, "CUWEAVE_LIBCUPTI"))
                fail_msg("the refusal does not say why: %s", cw_last_error()->message);
        } else {
            if (info.gpu_timing != CW_TRACE_GPU_CUPTI)
                fail_msg("CUWEAVE_LIBCUPTI=%s: gpu_timing %u: %s", link, info.gpu_timing, tr->cupti);
        }
    }
    free(tr);
    unlink(path);
    assert_cupti_closed();
    setenv("CUWEAVE_LIBCUDA", saved, 1);
    unsetenv("CUDA_HOME");
    unsetenv("FAKE_CUPTI_LIBCUDA");
    use_cupti("/nonexistent/libcupti.so.13");
    unlink(link);
    rmdir(lib64);
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc < 2 || !argv[1][0]) {
        printf("SKIP: usage: %s PATH/libfakecuda.so (the fake CUDA driver)\n", argv[0]);
        return CWT_SKIP_EXIT;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    setenv("FAKE_CUDA_FEATURES", "all", 1);
    /* no CUPTI, until the CUPTI tests open the fake one beside the fake driver */
    setenv("CUWEAVE_LIBCUPTI", "/nonexistent/libcupti.so.13", 1);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(fake_live = (long (*)(const char *))dlsym(lib, "fake_cuda_live")) ||
        !(live_drain = (int (*)(int))dlsym(lib, "fake_cuda_drain")) ||
        !(hold = (void (*)(int))dlsym(lib, "fake_cuda_hold")) ||
        !(fake_calls = (long (*)(const char *))dlsym(lib, "fake_cuda_calls")) ||
        !(*(void **)&raw_memset = dlsym(lib, "cuMemsetD32Async"))) {
        printf("FAIL: cannot load %s\n", argv[1]);
        return 1;
    }
    snprintf(g_cupti_path, sizeof g_cupti_path, "%s", argv[1]);
    char *slash = strrchr(g_cupti_path, '/');
    snprintf(slash ? slash + 1 : g_cupti_path, sizeof g_cupti_path - (size_t)(slash ? slash + 1 - g_cupti_path : 0),
             "libfakecupti.so");
    void *cl = dlopen(g_cupti_path, RTLD_NOW | RTLD_LOCAL);
    if (!cl || !(*(void **)&cupti_busy = dlsym(cl, "fake_cupti_busy")) ||
        !(*(void **)&cupti_fail = dlsym(cl, "fake_cupti_fail")) ||
        !(*(void **)&cupti_buffer_records = dlsym(cl, "fake_cupti_buffer_records")) ||
        !(*(void **)&cupti_log = dlsym(cl, "fake_cupti_log")) ||
        !(*(void **)&cupti_state = dlsym(cl, "fake_cupti_state"))) {
        printf("FAIL: cannot load the fake CUPTI %s\n", g_cupti_path);
        return 1;
    }
    if (cw_init() != CW_SUCCESS || cw_context_create(&ctx, 0) != CW_SUCCESS) {
        printf("FAIL: cuweave could not use the fake driver: %s\n", cw_last_error()->message);
        return 1;
    }
    /* TRACE_OUT=dir keeps the files (tools/trace_plot.py's test renders one) */
    const char *keep = getenv("TRACE_OUT");
    if (keep && *keep) {
        snprintf(g_dir, sizeof g_dir, "%s", keep);
    } else {
        snprintf(g_dir, sizeof g_dir, "/tmp/cw-trace-XXXXXX");
        if (!mkdtemp(g_dir)) return 1;
    }
    /* warm the context's pools so that live counts compare like with like */
    cw_stream *s[4] = {0};
    for (int k = 0; k < 4; k++)
        if (cw_stream_create(&s[k], ctx, NULL)) return 1;
    for (int k = 0; k < 4; k++) cw_stream_destroy(&s[k]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jparse_tests),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_arguments_and_limits),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_resident),
        cmocka_unit_test(test_resident_nested),
        cmocka_unit_test(test_resident_recorded_by_two_threads),
        cmocka_unit_test(test_write_beside_spans),
        cmocka_unit_test(test_write_while_adding),
        cmocka_unit_test(test_writers_beside_adders_and_faults),
        cmocka_unit_test(test_write_sort),
        cmocka_unit_test(test_cupti_absent),
        cmocka_unit_test(test_cupti_hostile_library_names),
        cmocka_unit_test(test_cupti_not_searched_beside_another_driver),
        cmocka_unit_test(test_cupti_pipeline),
        cmocka_unit_test(test_cupti_two_traces),
        cmocka_unit_test(test_cupti_refused),
        cmocka_unit_test(test_cupti_bounded),
        cmocka_unit_test(test_cupti_calls_past_max_spans),
        cmocka_unit_test(test_cupti_traces_churned_on_threads),
    };
    cwt_filter_from_env(); /* CWT_FILTER=test_name runs one */
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_context_destroy(&ctx);
    if (!(keep && *keep)) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) rc = rc ? rc : 1;
    }
    return rc;
}
