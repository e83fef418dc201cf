/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake CUPTI for the CPU tests of the traces' CUPTI path (test_trace_cpu),
 * beside the fake driver (tests/fake_cuda.c), whose launches, copies and
 * memsets it sees through the driver's activity observer
 * (fake_cuda_observe, found in the library CUWEAVE_LIBCUDA names).
 *
 * Build:  cc -shared -fPIC -std=c11 -Wall -Wextra -Isrc -o libfakecupti.so tests/fake_cupti.c -ldl -lpthread
 * Use:    CUWEAVE_LIBCUPTI=/path/to/libfakecupti.so
 *
 * What it does, as the real one (CUPTI 13) does:
 *  - cuptiSubscribe: one subscriber (a second, or any while
 *    fake_cupti_busy(1) is set: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
 *    as with Nsight Systems attached); its callback is called at the entry
 *    (CUPTI_API_ENTER; no exit callback) of the driver calls the fake driver
 *    observes, for the callback ids enabled (cuptiEnableCallback): the
 *    driver's cuLaunchKernel (307), cuLaunchKernelEx (652),
 *    cuMemcpyHtoDAsync_v2 (277), cuMemcpyDtoHAsync_v2 (279),
 *    cuMemsetD32Async (220), cuMemcpyPeerAsync (319), cuGraphLaunch (514),
 *    with the call's correlation id (1, 2, ... in the process);
 *  - activity records (cuptiActivityEnable: CONCURRENT_KERNEL or KERNEL,
 *    MEMCPY, MEMSET): one per kernel, copy and memset of an observed call
 *    that completes, with that correlation id, the stream's id
 *    (cuptiGetStreamIdEx gives the same), the context's id
 *    (cuptiGetContextId), on the fake's clock: the host's monotonic clock
 *    plus a fixed offset (CLOCK_REALTIME's at load; cuptiGetTimestamp reads
 *    it). A record's work runs for the kind's duration (fake_cupti_durations;
 *    default 2000 ns a kernel, 1000 ns a copy or memset) from when the fake
 *    driver ran it or the end of the stream's record before, whichever is
 *    later (records on one stream never overlap);
 *  - the records go into the buffers the client's request callback gives
 *    (cuptiActivityRegisterCallbacks); a buffer is completed (the client's
 *    complete callback) on the fake's delivery thread when it is full or
 *    holds fake_cupti_buffer_records(n) records, and by
 *    cuptiActivityFlushAll, in the calling thread, which returns once every
 *    buffer is delivered; cuptiActivityGetNextRecord walks a buffer; the
 *    records are laid out as cuweave reads them (src/driver/cupti_min.h's
 *    heads), each padded to the size of the real record.
 * For tests: fake_cupti_busy, fake_cupti_fail (the next call of an entry
 * returns a result), fake_cupti_durations, fake_cupti_buffer_records,
 * fake_cupti_log (the records made: correlation id, kind, begin and end on
 * the host's clock, name), fake_cupti_state (subscribed, kinds enabled,
 * buffers the client holds from the fake, callbacks called).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/cupti_min.h"

#define FAKE_API __attribute__((visibility("default")))

/* The fake driver's observer (tests/fake_cuda.c). */
struct fake_cuda_activity {
    int kind;
    int copy_kind;
    unsigned corr;
    CUcontext ctx;
    unsigned long long stream;
    const char *name;
    unsigned long long bytes;
    long long begin_ns, end_ns;
};
typedef unsigned (*obs_api_fn)(const char *entry, void *arg);
typedef void (*obs_done_fn)(const struct fake_cuda_activity *a, void *arg);

/* The records' sizes: those of CUPTI 13's CUpti_ActivityKernel10,
 * CUpti_ActivityMemcpy6 and CUpti_ActivityMemset4 (at least). */
enum { KERNEL_BYTES = 264, MEMCPY_BYTES = 96, MEMSET_BYTES = 88 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_subscribed, g_busy;
static CUpti_CallbackFunc g_cb;
static void *g_cb_user;
static unsigned char g_enabled[3][1024]; /* [domain][cbid] */
static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_comp;
static int g_kinds; /* bit 0 kernel, 1 memcpy, 2 memset */
static int g_concurrent;
static unsigned g_corr;
static long long g_clock_off; /* fake clock - host monotonic */
static long long g_dur[3] = {2000, 1000, 1000};
static size_t g_per_buffer;    /* records a buffer holds at most before it is delivered (0: until full) */
static long g_buffers_out;     /* buffers the client gave and the fake has not completed */
static long g_callbacks;       /* API callbacks called */
static void (*g_observe)(obs_api_fn, obs_done_fn, void *);
static unsigned long long (*g_stream_id)(CUstream);

/* The current buffer and the full ones waiting for delivery. */
struct buf {
    uint8_t *p;
    size_t size, used, records;
    struct buf *next;
};
static struct buf g_cur;
static struct buf *g_queue, **g_queue_tail = &g_queue;
static int g_delivering, g_thread_on, g_thread_stop;
static pthread_t g_thread;

/* The last record's end per stream (records of a stream never overlap). */
static struct {
    unsigned long long stream;
    long long end;
} g_stream_end[64];

/* Context ids by pointer. */
static CUcontext g_ctxs[16];

/* Names (kernel records point at them until the process ends). */
static char g_names[64][48];
static int g_nnames;

/* The log of records made (fake_cupti_log). */
struct fake_cupti_rec {
    unsigned corr;
    int kind; /* 1 kernel, 2 copy, 3 memset */
    long long begin_ns, end_ns; /* the host's monotonic clock */
    char name[48];
};
static struct fake_cupti_rec g_log[4096];
static size_t g_nlog;

/* Faults: the next call of g_fail_entry returns g_fail_result. */
static char g_fail_entry[64];
static int g_fail_result;

static int failing(const char *entry, CUptiResult *r) {
    pthread_mutex_lock(&g_mu);
    int hit = g_fail_entry[0] && strcmp(g_fail_entry, entry) == 0;
    if (hit) {
        *r = g_fail_result;
        g_fail_entry[0] = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return hit;
}
#define FAULT(entry)                                  \
    do {                                              \
        CUptiResult fr_;                              \
        if (failing(entry, &fr_)) return fr_;         \
    } while (0)

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

__attribute__((constructor)) static void fake_init(void) {
    struct timespec r;
    clock_gettime(CLOCK_REALTIME, &r);
    g_clock_off = (long long)r.tv_sec * 1000000000ll + r.tv_nsec - mono_ns();
    if (getenv("FAKE_CUPTI_BUSY")) g_busy = 1;
}

static size_t record_bytes(CUpti_ActivityKind k) {
    return k == CUPTI_ACTIVITY_KIND_MEMCPY ? MEMCPY_BYTES : k == CUPTI_ACTIVITY_KIND_MEMSET ? MEMSET_BYTES : KERNEL_BYTES;
}

/* ---- delivery -------------------------------------------------------------- */

/* Moves the current buffer to the queue (lock held). */
static void retire_locked(void) {
    if (!g_cur.p) return;
    struct buf *b = (struct buf *)malloc(sizeof *b);
    if (!b) return; /* kept as the current one */
    *b = g_cur;
    b->next = NULL;
    *g_queue_tail = b;
    g_queue_tail = &b->next;
    memset(&g_cur, 0, sizeof g_cur);
    pthread_cond_broadcast(&g_cv);
}

/* Delivers the queued buffers (lock held; dropped while calling the client). */
static void deliver_locked(void) {
    while (g_queue) {
        struct buf *b = g_queue;
        g_queue = b->next;
        if (!g_queue) g_queue_tail = &g_queue;
        CUpti_BuffersCallbackCompleteFunc comp = g_comp;
        g_delivering++;
        pthread_mutex_unlock(&g_mu);
        if (comp) comp(NULL, 0, b->p, b->size, b->used);
        else free(b->p);
        free(b);
        pthread_mutex_lock(&g_mu);
        g_delivering--;
        g_buffers_out--;
        pthread_cond_broadcast(&g_cv);
    }
}

static void *delivery_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!g_queue && !g_thread_stop) pthread_cond_wait(&g_cv, &g_mu);
        if (g_thread_stop && !g_queue) break;
        deliver_locked();
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* ---- the driver's observer ----------------------------------------------------- */

static unsigned cbid_of(const char *entry) {
    static const struct {
        const char *name;
        unsigned id;
    } ids[] = {{"cuLaunchKernel", 307},     {"cuLaunchKernelEx", 652}, {"cuMemcpyHtoDAsync", 277},
               {"cuMemcpyDtoHAsync", 279},  {"cuMemsetD32Async", 220}, {"cuMemcpyPeerAsync", 319},
               {"cuGraphLaunch", 514}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (!strcmp(ids[i].name, entry)) return ids[i].id;
    return 0;
}

static unsigned on_api(const char *entry, void *arg) {
    (void)arg;
    const unsigned id = cbid_of(entry);
    pthread_mutex_lock(&g_mu);
    const unsigned corr = ++g_corr;
    CUpti_CallbackFunc cb = g_subscribed && id < 1024 && g_enabled[CUPTI_CB_DOMAIN_DRIVER_API][id] ? g_cb : NULL;
    void *user = g_cb_user;
    if (cb) g_callbacks++;
    pthread_mutex_unlock(&g_mu);
    if (cb) {
        CUpti_CallbackData d;
        memset(&d, 0, sizeof d);
        d.callbackSite = CUPTI_API_ENTER;
        d.functionName = entry;
        d.correlationId = corr;
        cb(user, CUPTI_CB_DOMAIN_DRIVER_API, id, &d);
    }
    return corr;
}

static const char *intern(const char *name) {
    for (int i = 0; i < g_nnames; i++)
        if (!strcmp(g_names[i], name)) return g_names[i];
    if (g_nnames == 64) return "kernel";
    snprintf(g_names[g_nnames], sizeof g_names[0], "%s", name);
    return g_names[g_nnames++];
}

static uint32_t ctx_id_locked(CUcontext c) {
    for (uint32_t i = 0; i < 16; i++) {
        if (g_ctxs[i] == c) return i + 1;
        if (!g_ctxs[i]) {
            g_ctxs[i] = c;
            return i + 1;
        }
    }
    return 99;
}

/* A completed activity becomes a record (the fake driver's lock held: the
 * client's request callback only allocates). */
static void on_done(const struct fake_cuda_activity *a, void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    const int bit = a->kind == 1 ? 1 : a->kind == 2 ? 2 : 4;
    if (!(g_kinds & bit)) {
        pthread_mutex_unlock(&g_mu);
        return;
    }
    const CUpti_ActivityKind kind = a->kind == 1 ? (g_concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                                 : CUPTI_ACTIVITY_KIND_KERNEL)
                                  : a->kind == 2 ? CUPTI_ACTIVITY_KIND_MEMCPY : CUPTI_ACTIVITY_KIND_MEMSET;
    const size_t need = record_bytes(kind);
    if (g_cur.p && (g_cur.used + need > g_cur.size || (g_per_buffer && g_cur.records >= g_per_buffer)))
        retire_locked();
    if (!g_cur.p && g_req) {
        uint8_t *p = NULL;
        size_t size = 0, max = 0;
        g_req(&p, &size, &max);
        if (p && size >= need) {
            g_cur.p = p;
            g_cur.size = size;
            g_buffers_out++;
        } else {
            free(p);
        }
    }
    if (!g_cur.p) { /* no room: lost */
        pthread_mutex_unlock(&g_mu);
        return;
    }
    /* The work runs its duration from when the driver ran it, after the
     * stream's record before. */
    long long begin = a->begin_ns;
    size_t slot = 0;
    while (slot < 64 && g_stream_end[slot].stream && g_stream_end[slot].stream != a->stream) slot++;
    if (slot == 64) slot = a->stream % 64;
    if (g_stream_end[slot].stream == a->stream && g_stream_end[slot].end > begin) begin = g_stream_end[slot].end;
    const long long end = begin + g_dur[a->kind - 1];
    g_stream_end[slot].stream = a->stream;
    g_stream_end[slot].end = end;
    uint8_t *r = g_cur.p + g_cur.used;
    memset(r, 0, need);
    const uint32_t ctx = ctx_id_locked(a->ctx), stream = (uint32_t)a->stream;
    if (a->kind == 1) {
        cw_cupti_kernel_head *k = (cw_cupti_kernel_head *)r;
        k->kind = kind;
        k->start = (uint64_t)(begin + g_clock_off);
        k->end = (uint64_t)(end + g_clock_off);
        k->completed = k->end;
        k->contextId = ctx;
        k->streamId = stream;
        k->gridX = k->gridY = k->gridZ = k->blockX = k->blockY = k->blockZ = 1;
        k->correlationId = a->corr;
        k->name = intern(a->name ? a->name : "");
    } else if (a->kind == 2) {
        cw_cupti_memcpy_head *m = (cw_cupti_memcpy_head *)r;
        m->kind = kind;
        m->copyKind = (uint8_t)a->copy_kind;
        m->bytes = a->bytes;
        m->start = (uint64_t)(begin + g_clock_off);
        m->end = (uint64_t)(end + g_clock_off);
        m->contextId = ctx;
        m->streamId = stream;
        m->correlationId = a->corr;
    } else {
        cw_cupti_memset_head *m = (cw_cupti_memset_head *)r;
        m->kind = kind;
        m->bytes = a->bytes;
        m->start = (uint64_t)(begin + g_clock_off);
        m->end = (uint64_t)(end + g_clock_off);
        m->contextId = ctx;
        m->streamId = stream;
        m->correlationId = a->corr;
    }
    g_cur.used += need;
    g_cur.records++;
    if (g_nlog < sizeof g_log / sizeof g_log[0]) {
        struct fake_cupti_rec *l = &g_log[g_nlog++];
        l->corr = a->corr;
        l->kind = a->kind;
        l->begin_ns = begin;
        l->end_ns = end;
        snprintf(l->name, sizeof l->name, "%s", a->kind == 1 && a->name ? a->name : "");
    }
    if (g_per_buffer && g_cur.records >= g_per_buffer) retire_locked();
    pthread_mutex_unlock(&g_mu);
}

/* Finds the fake driver and installs the observer (lock not held). */
static int attach(void) {
    if (!g_observe) {
        /* FAKE_CUPTI_LIBCUDA: the fake driver when CUWEAVE_LIBCUDA does not
         * name it (a test of cuweave's own search for CUPTI) */
        const char *path = getenv("FAKE_CUPTI_LIBCUDA");
        if (!path || !*path) path = getenv("CUWEAVE_LIBCUDA");
        void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
        if (!lib) return 0;
        *(void **)&g_observe = dlsym(lib, "fake_cuda_observe");
        *(void **)&g_stream_id = dlsym(lib, "fake_cuda_stream_id");
        dlclose(lib); /* (NOLOAD: the library stays, cuweave holds it) */
        if (!g_observe || !g_stream_id) return 0;
    }
    g_observe(on_api, on_done, NULL);
    return 1;
}

/* ---- CUPTI's entries ------------------------------------------------------------ */

FAKE_API CUptiResult cuptiGetVersion(uint32_t *version) {
    FAULT("cuptiGetVersion");
    if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = 130001;
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
    switch (r) {
    case CUPTI_SUCCESS: *s = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *s = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *s = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *s = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *user) {
    FAULT("cuptiSubscribe");
    if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    const int busy = g_busy || g_subscribed;
    pthread_mutex_unlock(&g_mu);
    if (busy) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    if (!attach()) return CUPTI_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_mu);
    g_subscribed = 1;
    g_cb = cb;
    g_cb_user = user;
    memset(g_enabled, 0, sizeof g_enabled);
    pthread_mutex_unlock(&g_mu);
    *sub = (CUpti_SubscriberHandle)&g_subscribed;
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
    FAULT("cuptiUnsubscribe");
    if (sub != (CUpti_SubscriberHandle)&g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    g_subscribed = 0;
    g_cb = NULL;
    const int stop = !g_kinds && g_thread_on;
    if (stop) {
        g_thread_stop = 1;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    if (stop) {
        pthread_join(g_thread, NULL);
        pthread_mutex_lock(&g_mu);
        g_thread_on = g_thread_stop = 0;
        pthread_mutex_unlock(&g_mu);
    }
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
    FAULT("cuptiEnableCallback");
    if (sub != (CUpti_SubscriberHandle)&g_subscribed || domain < 1 || domain > 2 || cbid >= 1024)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    g_enabled[domain][cbid] = enable != 0;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc comp) {
    FAULT("cuptiActivityRegisterCallbacks");
    if (!req || !comp) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    g_req = req;
    g_comp = comp;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

static int kind_bit(CUpti_ActivityKind kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return 1;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return 2;
    case CUPTI_ACTIVITY_KIND_MEMSET: return 4;
    default: return 0;
    }
}

FAKE_API CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    FAULT("cuptiActivityEnable");
    const int bit = kind_bit(kind);
    if (!bit) return CUPTI_ERROR_NOT_SUPPORTED;
    if (!attach()) return CUPTI_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_mu);
    g_kinds |= bit;
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_concurrent = 1;
    int start = !g_thread_on;
    if (start) g_thread_on = pthread_create(&g_thread, NULL, delivery_main, NULL) == 0;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    FAULT("cuptiActivityDisable");
    const int bit = kind_bit(kind);
    if (!bit) return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_mu);
    g_kinds &= ~bit;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    FAULT("cuptiActivityFlushAll");
    pthread_mutex_lock(&g_mu);
    if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) || (g_cur.p && g_cur.used)) retire_locked();
    deliver_locked();
    while (g_delivering || g_queue) {
        deliver_locked();
        if (g_delivering) pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t at = 0;
    if (*record) at = (size_t)((uint8_t *)*record - buffer) + record_bytes((*record)->kind);
    if (at >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(buffer + at);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
    (void)ctx, (void)stream;
    if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = 0;
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetTimestamp(uint64_t *ts) {
    FAULT("cuptiGetTimestamp");
    if (!ts) return CUPTI_ERROR_INVALID_PARAMETER;
    *ts = (uint64_t)(mono_ns() + g_clock_off);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetContextId(CUcontext ctx, uint32_t *id) {
    FAULT("cuptiGetContextId");
    if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    *id = ctx_id_locked(ctx);
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

FAKE_API CUptiResult cuptiGetStreamIdEx(CUcontext ctx, CUstream stream, uint8_t per_thread, uint32_t *id) {
    (void)ctx, (void)per_thread;
    FAULT("cuptiGetStreamIdEx");
    if (!id || !g_stream_id) return CUPTI_ERROR_INVALID_PARAMETER;
    const unsigned long long s = g_stream_id(stream);
    if (!s) return CUPTI_ERROR_INVALID_PARAMETER;
    *id = (uint32_t)s;
    return CUPTI_SUCCESS;
}

/* ---- for tests ------------------------------------------------------------------- */

FAKE_API void fake_cupti_busy(int on) {
    pthread_mutex_lock(&g_mu);
    g_busy = on;
    pthread_mutex_unlock(&g_mu);
}

/* The next call of `entry` returns `result` (NULL: none). */
FAKE_API void fake_cupti_fail(const char *entry, int result) {
    pthread_mutex_lock(&g_mu);
    snprintf(g_fail_entry, sizeof g_fail_entry, "%s", entry ? entry : "");
    g_fail_result = result;
    pthread_mutex_unlock(&g_mu);
}

FAKE_API void fake_cupti_durations(long long kernel_ns, long long copy_ns, long long memset_ns) {
    pthread_mutex_lock(&g_mu);
    g_dur[0] = kernel_ns;
    g_dur[1] = copy_ns;
    g_dur[2] = memset_ns;
    pthread_mutex_unlock(&g_mu);
}

FAKE_API void fake_cupti_buffer_records(size_t n) {
    pthread_mutex_lock(&g_mu);
    g_per_buffer = n;
    pthread_mutex_unlock(&g_mu);
}

/* Copies up to cap records made since the last call into out (NULL, 0:
 * forgets them); returns how many were copied. */
FAKE_API size_t fake_cupti_log(struct fake_cupti_rec *out, size_t cap) {
    pthread_mutex_lock(&g_mu);
    const size_t n = g_nlog < cap ? g_nlog : cap;
    if (out) memcpy(out, g_log, n * sizeof *out);
    g_nlog = 0;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* The fake's state: subscribed, the kinds enabled (bits 1, 2, 4), buffers
 * the client holds from the fake (requested and not completed), API
 * callbacks called so far. */
FAKE_API void fake_cupti_state(int *subscribed, int *kinds, long *buffers, long *callbacks) {
    pthread_mutex_lock(&g_mu);
    if (subscribed) *subscribed = g_subscribed;
    if (kinds) *kinds = g_kinds;
    if (buffers) *buffers = g_buffers_out;
    if (callbacks) *callbacks = g_callbacks;
    pthread_mutex_unlock(&g_mu);
}
