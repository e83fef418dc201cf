/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An NVTX tool of the tests' own (test_nvtx_cpu): loaded by NVTX's loader
 * from NVTX_INJECTION64_PATH, as Nsight Systems' is. It takes over the
 * domain entries of NVTX's core (create, name a category, register a
 * string, push, pop, mark, start, end), checks every call's arguments, and
 * counts per name:
 *   - registrations of each text (nvi_registrations): once each, however
 *     many ranges use it;
 *   - pushes, marks and starts by name, and the last payload given;
 *   - each thread's push/pop depth (a pop with nothing pushed on its thread
 *     is an error), every start's end (an unknown or second end is one);
 *   - anything malformed (a foreign domain, a handle it did not give, an
 *     attribute structure of the wrong version or size, a plain string where
 *     a registered one was expected) as errors, with the first one's words.
 * The test reads the counts through the nvi_* functions (dlsym on the
 * library NVTX loaded). Built only where NVTX3's headers are (the types
 * come from them).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NVTX_NO_IMPL
#include CW_NVTX_HEADER

#define NVI_API __attribute__((visibility("default")))

enum { MAX_NAMES = 256, MAX_THREADS = 64, MAX_RANGES = 4096, TEXT = 64 };

typedef struct Name {
    char text[TEXT];
    unsigned long registrations, pushes, marks, starts, plain;
    unsigned long long payload;
    int has_payload;
    uint32_t category;
    uint32_t color;
} Name;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Name g_names[MAX_NAMES];
static int g_nnames;
typedef struct Thread {
    pthread_t id;
    int depth, max_depth;
} Thread;
static Thread g_threads[MAX_THREADS];
static int g_nthreads;
static unsigned char g_open[MAX_RANGES]; /* start ids 1..: 1 while open */
static unsigned long long g_next_range;
static unsigned long g_pops, g_ends, g_errors, g_domains, g_categories, g_inits;
static char g_first_error[256];
static char g_domain_name[TEXT];
static int g_domain; /* the one domain's handle points here */

static void error_locked(const char *what, const char *detail) {
    if (g_errors++ == 0) snprintf(g_first_error, sizeof g_first_error, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
}

static Name *name_locked(const char *text) {
    for (int i = 0; i < g_nnames; i++)
        if (strcmp(g_names[i].text, text) == 0) return &g_names[i];
    if (g_nnames == MAX_NAMES) return NULL;
    Name *n = &g_names[g_nnames++];
    snprintf(n->text, sizeof n->text, "%s", text);
    return n;
}

static Thread *thread_locked(void) {
    const pthread_t me = pthread_self();
    for (int i = 0; i < g_nthreads; i++)
        if (pthread_equal(g_threads[i].id, me)) return &g_threads[i];
    if (g_nthreads == MAX_THREADS) return NULL;
    g_threads[g_nthreads].id = me;
    return &g_threads[g_nthreads++];
}

static int our_domain(nvtxDomainHandle_t d) { return d == (nvtxDomainHandle_t)&g_domain; }

/* The name an event's attributes give (NULL, with an error, when malformed). */
static Name *event_locked(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a, const char *call) {
    if (!our_domain(d)) {
        error_locked(call, "a domain this tool did not make");
        return NULL;
    }
    if (!a || a->version != NVTX_VERSION || a->size != NVTX_EVENT_ATTRIB_STRUCT_SIZE) {
        error_locked(call, "attributes of the wrong version or size");
        return NULL;
    }
    Name *n = NULL;
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        const Name *h = (const Name *)a->message.registered;
        if (h < g_names || h >= g_names + g_nnames || h->registrations == 0) {
            error_locked(call, "a string handle this tool did not give");
            return NULL;
        }
        n = (Name *)h;
    } else if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) {
        n = name_locked(a->message.ascii);
        if (n) n->plain++;
    } else {
        error_locked(call, "no message");
        return NULL;
    }
    if (!n) {
        error_locked(call, "more names than the tool keeps");
        return NULL;
    }
    n->category = a->category;
    n->color = a->colorType == NVTX_COLOR_ARGB ? a->color : 0;
    if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) {
        n->payload = a->payload.ullValue;
        n->has_payload = 1;
    }
    return n;
}

/* ---- the entries NVTX calls ----------------------------------------------- */

static nvtxDomainHandle_t NVTX_API domain_create(const char *name) {
    pthread_mutex_lock(&g_mu);
    if (g_domains++ == 0) snprintf(g_domain_name, sizeof g_domain_name, "%s", name ? name : "");
    else error_locked("nvtxDomainCreateA", "a second domain");
    pthread_mutex_unlock(&g_mu);
    return (nvtxDomainHandle_t)&g_domain;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d) {
    pthread_mutex_lock(&g_mu);
    error_locked("nvtxDomainDestroy", our_domain(d) ? "the domain was destroyed" : "a foreign domain");
    pthread_mutex_unlock(&g_mu);
}

static void NVTX_API name_category(nvtxDomainHandle_t d, uint32_t category, const char *name) {
    pthread_mutex_lock(&g_mu);
    if (!our_domain(d) || category == 0 || !name || !*name) error_locked("nvtxDomainNameCategoryA", "bad arguments");
    g_categories++;
    pthread_mutex_unlock(&g_mu);
}

static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char *text) {
    pthread_mutex_lock(&g_mu);
    Name *n = NULL;
    if (!our_domain(d) || !text) error_locked("nvtxDomainRegisterStringA", "bad arguments");
    else if (!(n = name_locked(text))) error_locked("nvtxDomainRegisterStringA", "more names than the tool keeps");
    else n->registrations++;
    pthread_mutex_unlock(&g_mu);
    return (nvtxStringHandle_t)n;
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&g_mu);
    Name *n = event_locked(d, a, "nvtxDomainRangePushEx");
    if (n) n->pushes++;
    Thread *t = thread_locked();
    int level = -1;
    if (t) {
        level = t->depth++;
        if (t->depth > t->max_depth) t->max_depth = t->depth;
    } else {
        error_locked("nvtxDomainRangePushEx", "more threads than the tool keeps");
    }
    pthread_mutex_unlock(&g_mu);
    return level;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d) {
    pthread_mutex_lock(&g_mu);
    g_pops++;
    Thread *t = thread_locked();
    int level = -1;
    if (!our_domain(d)) error_locked("nvtxDomainRangePop", "a domain this tool did not make");
    else if (!t || t->depth == 0) error_locked("nvtxDomainRangePop", "a pop with no range pushed on its thread");
    else level = --t->depth;
    pthread_mutex_unlock(&g_mu);
    return level;
}

static void NVTX_API mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&g_mu);
    Name *n = event_locked(d, a, "nvtxDomainMarkEx");
    if (n) n->marks++;
    pthread_mutex_unlock(&g_mu);
}

static nvtxRangeId_t NVTX_API range_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&g_mu);
    Name *n = event_locked(d, a, "nvtxDomainRangeStartEx");
    if (n) n->starts++;
    nvtxRangeId_t id = 0;
    if (g_next_range + 1 >= MAX_RANGES) {
        error_locked("nvtxDomainRangeStartEx", "more ranges than the tool keeps");
    } else {
        id = ++g_next_range;
        g_open[id] = 1;
    }
    pthread_mutex_unlock(&g_mu);
    return id;
}

static void NVTX_API range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    pthread_mutex_lock(&g_mu);
    g_ends++;
    if (!our_domain(d)) error_locked("nvtxDomainRangeEnd", "a domain this tool did not make");
    else if (id == 0 || id >= MAX_RANGES || !g_open[id]) error_locked("nvtxDomainRangeEnd", "a range not started, or ended already");
    else g_open[id] = 0;
    pthread_mutex_unlock(&g_mu);
}

static int set_slot(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
    if (!table || id >= size || !table[id]) return 0;
    *table[id] = fn;
    return 1;
}

NVI_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    g_inits++;
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb) return 0;
    NvtxFunctionTable t = NULL;
    unsigned size = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size)) return 0;
    int ok = set_slot(t, size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainDestroy, (NvtxFunctionPointer)domain_destroy) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainNameCategoryA, (NvtxFunctionPointer)name_category) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_string) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)range_push) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)range_pop) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)mark) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainRangeStartEx, (NvtxFunctionPointer)range_start) &&
             set_slot(t, size, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)range_end);
    return ok;
}

/* ---- what the test reads ---------------------------------------------------- */

/* Times the library's NVTX called this tool's init (1 once attached). */
NVI_API unsigned long nvi_inits(void) { return g_inits; }

/* Domains made, and the first one's name. */
NVI_API unsigned long nvi_domains(const char **name) {
    if (name) *name = g_domain_name;
    return g_domains;
}

NVI_API unsigned long nvi_categories(void) { return g_categories; }

/* The counts of the name `text`: what is "r" (registrations), "p"
 * (pushes), "m" (marks), "s" (starts) or "a" (as a plain string). */
NVI_API unsigned long nvi_count(const char *text, const char *what) {
    pthread_mutex_lock(&g_mu);
    unsigned long v = 0;
    for (int i = 0; i < g_nnames; i++) {
        const Name *n = &g_names[i];
        if (strcmp(n->text, text) != 0) continue;
        v = *what == 'r' ? n->registrations : *what == 'p' ? n->pushes : *what == 'm' ? n->marks
            : *what == 's' ? n->starts : n->plain;
    }
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* The last payload given with `text` (0 and *has 0 when none). */
NVI_API unsigned long long nvi_payload(const char *text, int *has) {
    pthread_mutex_lock(&g_mu);
    unsigned long long v = 0;
    *has = 0;
    for (int i = 0; i < g_nnames; i++)
        if (strcmp(g_names[i].text, text) == 0) {
            v = g_names[i].payload;
            *has = g_names[i].has_payload;
        }
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* The category the last event of `text` gave (0: none). */
NVI_API unsigned nvi_category(const char *text) {
    pthread_mutex_lock(&g_mu);
    unsigned v = 0;
    for (int i = 0; i < g_nnames; i++)
        if (strcmp(g_names[i].text, text) == 0) v = g_names[i].category;
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* Texts registered (once or more), and registrations in all. */
NVI_API unsigned long nvi_registered(unsigned long *registrations) {
    pthread_mutex_lock(&g_mu);
    unsigned long texts = 0, all = 0;
    for (int i = 0; i < g_nnames; i++) {
        if (g_names[i].registrations) texts++;
        all += g_names[i].registrations;
    }
    pthread_mutex_unlock(&g_mu);
    if (registrations) *registrations = all;
    return texts;
}

/* Pushes, pops, starts and ends in all; threads seen;
 * threads whose depth is not 0 now; start ranges still open. */
NVI_API void nvi_totals(unsigned long out[7]) {
    pthread_mutex_lock(&g_mu);
    unsigned long pushes = 0, starts = 0, open_threads = 0, open_ranges = 0;
    for (int i = 0; i < g_nnames; i++) {
        pushes += g_names[i].pushes;
        starts += g_names[i].starts;
    }
    for (int i = 0; i < g_nthreads; i++)
        if (g_threads[i].depth) open_threads++;
    for (unsigned long long id = 1; id <= g_next_range && id < MAX_RANGES; id++) open_ranges += g_open[id];
    out[0] = pushes;
    out[1] = g_pops;
    out[2] = starts;
    out[3] = g_ends;
    out[4] = (unsigned long)g_nthreads;
    out[5] = open_threads;
    out[6] = open_ranges;
    pthread_mutex_unlock(&g_mu);
}

/* The deepest push/pop nesting any thread reached. */
NVI_API int nvi_max_depth(void) {
    pthread_mutex_lock(&g_mu);
    int m = 0;
    for (int i = 0; i < g_nthreads; i++)
        if (g_threads[i].max_depth > m) m = g_threads[i].max_depth;
    pthread_mutex_unlock(&g_mu);
    return m;
}

/* Errors seen, and the first one's words. */
NVI_API unsigned long nvi_errors(const char **first) {
    if (first) *first = g_first_error;
    return g_errors;
}

/* Forgets the counts of pushes, marks, starts, payloads and threads (not the
 * registrations, the domain nor the open ranges). */
NVI_API void nvi_reset(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nnames; i++) {
        g_names[i].pushes = g_names[i].marks = g_names[i].starts = g_names[i].plain = 0;
        g_names[i].has_payload = 0;
        g_names[i].payload = 0;
    }
    g_pops = g_ends = 0;
    pthread_mutex_unlock(&g_mu);
}
