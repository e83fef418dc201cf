/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake NCCL for CPU tests of cuweave's collective layer on machines
 * without a GPU (CI has none).
 *
 * Build:  cc -shared -fPIC -std=c11 -Wall -Wextra -O1 -o libfakenccl.so tests/fake_nccl.c -lpthread
 * Use:    CUWEAVE_LIBNCCL=/path/to/libfakenccl.so (with the fake CUDA driver,
 *         tests/fake_cuda.c, as CUWEAVE_LIBCUDA).
 *
 * It exports, with NCCL's C ABI, the entries cuweave resolves: ncclGetVersion,
 * ncclGetErrorString, ncclGetLastError, ncclCommInitAll, ncclCommDestroy,
 * ncclCommCount, ncclCommCuDevice, ncclCommUserRank, ncclAllReduce,
 * ncclBroadcast, ncclGroupStart and ncclGroupEnd.
 *
 * The model:
 *  - ncclGetVersion gives 22703 (2.27.3), or FAKE_NCCL_VERSION (a decimal
 *    number, read once, at the first call);
 *  - ncclCommInitAll(comms, ndev, devlist): ndev >= 1, devlist NULL means
 *    0..ndev-1, the ordinals must be >= 0 and distinct (else
 *    ncclInvalidArgument, nothing made). It makes ndev communicators that
 *    form one "clique": rank i on devlist[i]. The fake does not look at the
 *    CUDA driver (any ordinal is accepted). Communicators are tracked (a
 *    magic number and a registry, so that a destroyed or foreign one is
 *    recognized without reading freed memory: ncclInvalidArgument);
 *  - the fake CUDA driver's device memory is host memory (a device pointer
 *    is a host address), so collectives are performed for real, on the
 *    host. The k-th collective call (ncclAllReduce or ncclBroadcast) of each
 *    rank belongs to collective k of its clique. The first part to arrive
 *    sets the collective's kind, count, datatype and op (or root); a later
 *    part that differs fails with ncclInvalidUsage (and takes no slot: the
 *    rank's next call is still its k-th). A collective runs (computes into
 *    every rank's recvbuff) when every rank has submitted its part, and
 *    collectives of a clique run in order (k only after k-1);
 *  - outside a group a part is accepted at once: where the real NCCL would
 *    block until the peers arrive from other threads, the fake returns, and
 *    the collective runs in the call of whichever rank completes it, from
 *    whatever thread. Inside ncclGroupStart / ncclGroupEnd (a per-thread,
 *    nesting depth) the thread's parts are checked and queued at the call,
 *    and are released at the thread's outermost ncclGroupEnd, which runs the
 *    collectives they complete. As with the real NCCL, a collective call
 *    that fails inside a group fails the group: the outermost ncclGroupEnd
 *    returns that call's error (inner ones succeed) and withdraws all the
 *    thread's parts queued in the group, as if those calls had never been
 *    made (each rank's next call takes the withdrawn slot again, so the
 *    ranks stay in step and no stale buffer is ever used). ncclGroupEnd
 *    outside a group: ncclInvalidUsage;
 *  - ncclAllReduce: sum, prod, max, min and avg (the sum divided by the
 *    number of ranks; integer division for integer types) for int8, uint8,
 *    int32, uint32, int64, uint64, float32 and float64, folded in rank order
 *    (integer sum and prod wrap around). float16 and bfloat16 are not
 *    implemented: ncclInvalidArgument. In place (sendbuff == recvbuff), and
 *    any overlap between ranks' buffers, works: the result is made in a
 *    buffer of the fake's first, then copied to every recvbuff;
 *  - ncclBroadcast: every rank's recvbuff gets root's sendbuff; only root's
 *    sendbuff is read (the others may be NULL). root out of [0, nranks):
 *    ncclInvalidArgument;
 *  - count 0 does nothing but is still a call (it takes its slot k). NULL
 *    buffers with count > 0, an unknown datatype or op, a destroyed or
 *    foreign communicator: ncclInvalidArgument. A call that fails does
 *    nothing (no slot taken, stream not recorded);
 *  - the stream argument is not used (the work is not ordered with the fake
 *    CUDA driver's FIFO: a collective's effect happens in the call that
 *    completes it), only recorded: fake_nccl_last_stream;
 *  - ncclCommDestroy frees the communicator (magic cleared; NULL is
 *    accepted); the collectives still pending for its clique are dropped
 *    (never run). Later calls of the surviving ranks are accepted but their
 *    collectives can never complete (as the real NCCL would hang); the
 *    clique goes with its last communicator;
 *  - ncclGetErrorString gives NCCL's text for each result;
 *    ncclGetLastError gives the text of the last error of the calling
 *    thread (thread-local; "" when none; a success does not clear it).
 *
 * Test controls (exported, for dlsym or direct linking):
 *  - fake_nccl_live(): communicators alive;
 *  - fake_nccl_calls(entry): calls made to an entry by its name
 *    ("ncclAllReduce", ...), failed and injected ones included; -1 for an
 *    unknown name or NULL;
 *  - fake_nccl_fail(entry, result): the next call to that entry returns
 *    `result` and does nothing else (one-shot, one armed failure per entry;
 *    result 0 disarms). Only the entries that return an ncclResult_t can
 *    fail (arming ncclGetErrorString or ncclGetLastError does nothing).
 *    ncclGroupEnd is the exception to "nothing else": as the real NCCL's, it
 *    still leaves the group level, and at the outermost level the thread's
 *    queued parts are withdrawn as after a failed call in the group (an
 *    injected failure of a collective call inside a group fails the group
 *    like any other failure);
 *  - fake_nccl_last_stream(device): the stream argument of the last
 *    accepted collective call whose communicator is on that device (NULL
 *    when none);
 *  - fake_nccl_group_depth(): the calling thread's group depth;
 *  - fake_nccl_reset(): zeroes the call counters, disarms every failure and
 *    forgets the last streams (communicators and pending collectives stay).
 *
 * Communicators by rank, across real processes (ncclGetUniqueId,
 * ncclCommInitRankConfig, ncclCommInitRank, ncclCommGetAsyncError,
 * ncclCommAbort, ncclCommFinalize; built with -DFAKE_NCCL_OLD these are not
 * exported: an NCCL before 2.14, libfakenccl_old.so):
 *  - ncclGetUniqueId makes a directory (mkdtemp under FAKE_NCCL_DIR, else
 *    TMPDIR, else /tmp) and the id is "FAKENCCL" and its path. Nothing in it
 *    is removed by the fake: the test removes the directory;
 *  - ncclCommInitRankConfig(comm, nranks, id, rank, config): an id not made
 *    by ncclGetUniqueId, a rank outside [0, nranks) or a config whose magic
 *    is not 0xcafebeef: ncclInvalidArgument. The rank joins by linking
 *    "rank.<r>" (its nranks and pid) into the directory: a rank already
 *    taken makes the communicator fail with ncclInvalidUsage ("joined
 *    twice"). config->blocking 0: returns ncclInProgress, and
 *    ncclCommGetAsyncError reads the other ranks' files: ncclInProgress
 *    until every rank joined, then ncclSuccess, or ncclInvalidUsage when a
 *    rank joined with another nranks. Blocking (config NULL or blocking
 *    1, and ncclCommInitRank): waits in the call (as NCCL, without bound);
 *  - collectives on such a communicator: the k-th of each rank is the file
 *    "c<k>.r<r>" (a header with kind, count, type, op or root, and the
 *    send data where read), written to a temporary and renamed; the call
 *    then waits (the lock released) for every rank's file and computes its
 *    own recvbuff (folded in rank order; a part that disagrees:
 *    ncclInvalidUsage). A rank whose process is gone (its pid from its
 *    rank file) fails the wait with ncclRemoteError ("is gone"). On a
 *    non-blocking communicator the call answers ncclInProgress (the work is
 *    done) and the next ncclCommGetAsyncError ncclSuccess; a failure
 *    becomes the communicator's async error. In a group the parts are
 *    queued and done at the outermost ncclGroupEnd (all written, then all
 *    completed; ncclInProgress when a non-blocking communicator took part),
 *    or withdrawn when the group failed;
 *  - ncclCommAbort frees the communicator (a join not finished leaves its
 *    rank: the rank file goes); ncclCommFinalize checks the communicator;
 *    ncclCommDestroy frees it;
 *  - FAKE_NCCL_PEER_CHECK_DELAY_MS=ms: a wait for a peer's part sleeps
 *    that long between not finding the part and asking whether the peer's
 *    process is alive (a slow rank, for tests);
 *  - FAKE_NCCL_EXIT_AT_COLLECTIVE=k: the process exits with status 3 when
 *    a communicator by rank is about to issue its collective k (from 0):
 *    a rank that dies. A rank that never arrives is one never started.
 *
 * One mutex guards everything (the collectives are computed with it held;
 * the cross-process waits release it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))
/* Built with -DFAKE_NCCL_OLD: an NCCL before 2.14, without the entries of
 * communicators by rank (libfakenccl_old.so). */
#ifdef FAKE_NCCL_OLD
#define FAKE_XP_API __attribute__((visibility("hidden")))
#else
#define FAKE_XP_API FAKE_API
#endif

/* ---- NCCL's ABI -------------------------------------------------------- */

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;

enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
};
enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8,
    ncclBfloat16 = 9,
    NTYPES = 10
};
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, NOPS = 5 };

/* ---- state ------------------------------------------------------------- */

#define COMM_MAGIC 0x4e43434cu /* "NCCL" */
#define DEFAULT_VERSION 22703

enum { K_ALLREDUCE, K_BROADCAST };

struct clique;

struct xpart;

struct ncclComm {
    uint32_t magic;
    struct clique *cl; /* NULL for a communicator by rank (xp) */
    int rank;
    int device;
    struct ncclComm *next; /* registry of live communicators */
    /* By rank (ncclCommInitRankConfig), across processes: */
    int xp;
    int nranks;
    int blocking;
    char dir[128];        /* the id's directory */
    ncclResult_t state;   /* ncclInProgress while joining; an error once failed */
    int pending;          /* a non-blocking call answered ncclInProgress: settled by ncclCommGetAsyncError */
    long next_k;          /* the index of this rank's next collective */
    long *pids;           /* nranks: each rank's process, once it joined */
};

struct part {
    int in;           /* submitted */
    uint64_t held;    /* token of the thread whose group holds it; 0: free */
    const void *send;
    void *recv;
};

struct coll {
    long index; /* k: the k-th call of every rank */
    int kind;
    size_t count;
    int dtype;
    int arg; /* op (all-reduce) or root (broadcast) */
    int nin;
    unsigned char *tmp; /* count elements: where the result is made */
    struct coll *next;
    struct part parts[];
};

struct clique {
    int n;
    int nlive;
    struct ncclComm **comms; /* n; NULL once destroyed */
    long *next_call;         /* n: the index of each rank's next call */
    struct coll *pending;    /* sorted by index */
    struct clique *next;
};

struct stream_rec {
    int device;
    void *stream;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *g_comms;
static struct clique *g_cliques;
static int g_live;
static int g_version = -1;
static uint64_t g_next_token = 1;
static struct stream_rec *g_streams;
static size_t g_nstreams, g_capstreams;

static _Thread_local int t_depth;
static _Thread_local ncclResult_t t_group_err; /* first failed call in the group */
static _Thread_local uint64_t t_token;
static _Thread_local char t_err[512];

static ncclResult_t xp_submit(const char *fn, int kind, const void *send, void *recv, size_t count, int dtype, int arg,
                              struct ncclComm *comm);
static void xp_free(struct ncclComm *comm);

#define FAKE_ENTRIES(X)                                                                            \
    X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetLastError) X(ncclCommInitAll) X(ncclCommDestroy) \
    X(ncclCommCount) X(ncclCommCuDevice) X(ncclCommUserRank) X(ncclAllReduce) X(ncclBroadcast)     \
    X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetUniqueId) X(ncclCommInitRankConfig)                 \
    X(ncclCommGetAsyncError) X(ncclCommAbort) X(ncclCommFinalize) X(ncclCommSplit)

enum {
#define FAKE_ID_(name) F_##name,
    FAKE_ENTRIES(FAKE_ID_)
#undef FAKE_ID_
    F_COUNT
};
static const char *const g_entry_names[F_COUNT] = {
#define FAKE_NAME_(name) #name,
    FAKE_ENTRIES(FAKE_NAME_)
#undef FAKE_NAME_
};
static long g_calls[F_COUNT];
static ncclResult_t g_fail[F_COUNT];

static void lock(void) { pthread_mutex_lock(&g_mu); }
static void unlock(void) { pthread_mutex_unlock(&g_mu); }

static int entry_id(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(g_entry_names[i], name)) return i;
    return -1;
}

__attribute__((format(printf, 1, 2))) static void set_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_err, sizeof t_err, fmt, ap);
    va_end(ap);
}

/* Counts a call; with the lock held. Returns the armed failure (disarming
 * it) or ncclSuccess. */
static ncclResult_t enter(int id) {
    g_calls[id]++;
    ncclResult_t r = g_fail[id];
    if (r != ncclSuccess) {
        g_fail[id] = ncclSuccess;
        set_err("fake_nccl: injected failure of %s (result %d)", g_entry_names[id], r);
    }
    return r;
}

/* A live communicator of this fake (without dereferencing a stale one). */
static int comm_ok(const struct ncclComm *c) {
    if (!c) return 0;
    for (const struct ncclComm *p = g_comms; p; p = p->next)
        if (p == c) return p->magic == COMM_MAGIC;
    return 0;
}

/* ---- reductions -------------------------------------------------------- */

typedef void (*red_fn)(unsigned char *acc, const unsigned char *src, size_t count, int op);
typedef void (*avg_fn)(unsigned char *acc, size_t count, int n);

/* T: element; U: its arithmetic type for sum and prod (unsigned for the
 * integers: wrap-around, no undefined overflow); W: the type avg divides in. */
#define DEF_RED(NAME, T, U, W)                                                    \
    static void red_##NAME(unsigned char *acc, const unsigned char *src, size_t count, int op) { \
        for (size_t i = 0; i < count; i++) {                                       \
            T a, b, r;                                                             \
            memcpy(&a, acc + i * sizeof(T), sizeof(T));                            \
            memcpy(&b, src + i * sizeof(T), sizeof(T));                            \
            switch (op) {                                                          \
            case ncclSum:                                                          \
            case ncclAvg: r = (T)(U)((U)a + (U)b); break;                          \
            case ncclProd: r = (T)(U)((U)a * (U)b); break;                         \
            case ncclMax: r = a > b ? a : b; break;                                \
            default: r = a < b ? a : b; break;                                     \
            }                                                                      \
            memcpy(acc + i * sizeof(T), &r, sizeof(T));                            \
        }                                                                          \
    }                                                                              \
    static void avg_##NAME(unsigned char *acc, size_t count, int n) {              \
        for (size_t i = 0; i < count; i++) {                                       \
            T a;                                                                   \
            memcpy(&a, acc + i * sizeof(T), sizeof(T));                            \
            a = (T)((W)a / (W)n);                                                  \
            memcpy(acc + i * sizeof(T), &a, sizeof(T));                            \
        }                                                                          \
    }

DEF_RED(i8, int8_t, uint8_t, long long)
DEF_RED(u8, uint8_t, uint8_t, unsigned long long)
DEF_RED(i32, int32_t, uint32_t, long long)
DEF_RED(u32, uint32_t, uint32_t, unsigned long long)
DEF_RED(i64, int64_t, uint64_t, long long)
DEF_RED(u64, uint64_t, uint64_t, unsigned long long)
DEF_RED(f32, float, float, float)
DEF_RED(f64, double, double, double)

static const struct {
    size_t size;
    red_fn red; /* NULL: not implemented by the fake */
    avg_fn avg;
    const char *name;
} g_types[NTYPES] = {
    [ncclInt8] = {1, red_i8, avg_i8, "int8"},
    [ncclUint8] = {1, red_u8, avg_u8, "uint8"},
    [ncclInt32] = {4, red_i32, avg_i32, "int32"},
    [ncclUint32] = {4, red_u32, avg_u32, "uint32"},
    [ncclInt64] = {8, red_i64, avg_i64, "int64"},
    [ncclUint64] = {8, red_u64, avg_u64, "uint64"},
    [ncclFloat16] = {2, NULL, NULL, "float16"},
    [ncclFloat32] = {4, red_f32, avg_f32, "float32"},
    [ncclFloat64] = {8, red_f64, avg_f64, "float64"},
    [ncclBfloat16] = {2, NULL, NULL, "bfloat16"},
};

/* ---- collectives ------------------------------------------------------- */

static void coll_free(struct coll *c) {
    free(c->tmp);
    free(c);
}

static void coll_exec(const struct clique *cl, struct coll *c) {
    size_t bytes = c->count * g_types[c->dtype].size;
    if (bytes == 0) return;
    if (c->kind == K_ALLREDUCE) {
        memcpy(c->tmp, c->parts[0].send, bytes);
        for (int r = 1; r < cl->n; r++) g_types[c->dtype].red(c->tmp, c->parts[r].send, c->count, c->arg);
        if (c->arg == ncclAvg) g_types[c->dtype].avg(c->tmp, c->count, cl->n);
    } else {
        memcpy(c->tmp, c->parts[c->arg].send, bytes);
    }
    for (int r = 0; r < cl->n; r++) memcpy(c->parts[r].recv, c->tmp, bytes);
}

/* Runs the clique's collectives that are complete and free, in order. */
static void run_ready(struct clique *cl) {
    while (cl->pending) {
        struct coll *c = cl->pending;
        if (c->nin < cl->n) return;
        for (int r = 0; r < cl->n; r++)
            if (c->parts[r].held) return;
        cl->pending = c->next;
        coll_exec(cl, c);
        coll_free(c);
    }
}

/* Releases the parts held by a thread's group, then runs what became
 * ready. */
static void release_group(uint64_t token) {
    for (struct clique *cl = g_cliques; cl; cl = cl->next) {
        for (struct coll *c = cl->pending; c; c = c->next)
            for (int r = 0; r < cl->n; r++)
                if (c->parts[r].held == token) c->parts[r].held = 0;
        run_ready(cl);
    }
}

/* Withdraws the parts held by a thread's group, as if those calls had never
 * been made: each rank's next call takes the slot of its first withdrawn
 * part again (a rank's parts in the group are its latest calls, one thread
 * calling for a rank at a time). A collective left with no part goes. */
static void abandon_group(uint64_t token) {
    for (struct clique *cl = g_cliques; cl; cl = cl->next) {
        struct coll **pp = &cl->pending;
        while (*pp) {
            struct coll *c = *pp;
            for (int r = 0; r < cl->n; r++)
                if (c->parts[r].held == token) {
                    memset(&c->parts[r], 0, sizeof c->parts[r]);
                    c->nin--;
                    if (cl->next_call[r] > c->index) cl->next_call[r] = c->index;
                }
            if (c->nin == 0) {
                *pp = c->next;
                coll_free(c);
            } else {
                pp = &c->next;
            }
        }
        run_ready(cl);
    }
}

static void drop_pending(struct clique *cl) {
    while (cl->pending) {
        struct coll *c = cl->pending;
        cl->pending = c->next;
        coll_free(c);
    }
}

static void record_stream(int device, void *stream) {
    for (size_t i = 0; i < g_nstreams; i++)
        if (g_streams[i].device == device) {
            g_streams[i].stream = stream;
            return;
        }
    if (g_nstreams == g_capstreams) {
        size_t cap = g_capstreams ? 2 * g_capstreams : 16;
        struct stream_rec *v = realloc(g_streams, cap * sizeof *v);
        if (!v) return;
        g_streams = v;
        g_capstreams = cap;
    }
    g_streams[g_nstreams].device = device;
    g_streams[g_nstreams].stream = stream;
    g_nstreams++;
}

static const char *kind_name(int kind) { return kind == K_ALLREDUCE ? "ncclAllReduce" : "ncclBroadcast"; }

/* One rank's part of a collective (arg: op or root). */
static ncclResult_t submit(int id, int kind, const void *send, void *recv, size_t count, int dtype, int arg,
                           struct ncclComm *comm, void *stream) {
    const char *fn = g_entry_names[id];
    lock();
    ncclResult_t r = enter(id);
    if (r != ncclSuccess) goto out;
    r = ncclInvalidArgument;
    if (!comm_ok(comm)) {
        set_err("%s: invalid communicator %p (destroyed or not made by ncclCommInitAll)", fn, (void *)comm);
        goto out;
    }
    struct clique *cl = comm->cl;
    int rank = comm->rank;
    int nr = comm->xp ? comm->nranks : cl->n;
    if (dtype < 0 || dtype >= NTYPES) {
        set_err("%s: invalid datatype %d", fn, dtype);
        goto out;
    }
    if (!g_types[dtype].red) {
        set_err("%s: datatype %s is not implemented by the fake NCCL", fn, g_types[dtype].name);
        goto out;
    }
    if (kind == K_ALLREDUCE && (arg < 0 || arg >= NOPS)) {
        set_err("%s: invalid reduction operation %d", fn, arg);
        goto out;
    }
    if (kind == K_BROADCAST && (arg < 0 || arg >= nr)) {
        set_err("%s: invalid root %d (nranks %d)", fn, arg, nr);
        goto out;
    }
    if (count > 0) {
        int need_send = kind == K_ALLREDUCE || rank == arg;
        if ((need_send && !send) || !recv) {
            set_err("%s: rank %d: NULL %s with count %zu", fn, rank, !recv ? "recvbuff" : "sendbuff", count);
            goto out;
        }
        if (count > SIZE_MAX / g_types[dtype].size) {
            set_err("%s: count %zu is too large", fn, count);
            goto out;
        }
    }

    if (comm->xp) {
        r = xp_submit(fn, kind, send, recv, count, dtype, arg, comm);
        if (r == ncclSuccess) record_stream(comm->device, stream);
        goto out;
    }

    long k = cl->next_call[rank];
    struct coll **pp = &cl->pending;
    while (*pp && (*pp)->index < k) pp = &(*pp)->next;
    struct coll *c = *pp;
    if (c && c->index == k) {
        if (c->kind != kind || c->count != count || c->dtype != dtype || c->arg != arg) {
            set_err("%s: rank %d: collective %ld is %s(count %zu, %s, %s %d) on the other ranks, not "
                    "%s(count %zu, %s, %s %d)",
                    fn, rank, k, kind_name(c->kind), c->count, g_types[c->dtype].name,
                    c->kind == K_ALLREDUCE ? "op" : "root", c->arg, kind_name(kind), count, g_types[dtype].name,
                    kind == K_ALLREDUCE ? "op" : "root", arg);
            r = ncclInvalidUsage;
            goto out;
        }
        if (c->parts[rank].in) { /* cannot happen: next_call moves on */
            set_err("%s: rank %d submitted collective %ld twice", fn, rank, k);
            r = ncclInternalError;
            goto out;
        }
    } else {
        c = calloc(1, sizeof *c + (size_t)cl->n * sizeof c->parts[0]);
        size_t bytes = count * g_types[dtype].size;
        unsigned char *tmp = bytes ? malloc(bytes) : NULL;
        if (!c || (bytes && !tmp)) {
            free(c);
            free(tmp);
            set_err("%s: out of host memory", fn);
            r = ncclSystemError;
            goto out;
        }
        c->index = k;
        c->kind = kind;
        c->count = count;
        c->dtype = dtype;
        c->arg = arg;
        c->tmp = tmp;
        c->next = *pp;
        *pp = c;
    }
    c->parts[rank].in = 1;
    c->parts[rank].send = send;
    c->parts[rank].recv = recv;
    if (t_depth > 0) {
        if (!t_token) t_token = g_next_token++;
        c->parts[rank].held = t_token;
    }
    c->nin++;
    cl->next_call[rank]++;
    record_stream(comm->device, stream);
    if (t_depth == 0) run_ready(cl);
    r = ncclSuccess;
out:
    if (r != ncclSuccess && t_depth > 0 && t_group_err == ncclSuccess) t_group_err = r;
    unlock();
    return r;
}


/* ---- communicators by rank, across processes ---------------------------- */

/* The id: "FAKENCCL" and the path of a directory made for it (under
 * FAKE_NCCL_DIR, else TMPDIR, else /tmp). The ranks meet there: rank r
 * links "rank.<r>" (its nranks and pid) into it, and collective k of rank r
 * is the file "c<k>.r<r>" (a header and, where the collective reads it, the
 * rank's send buffer), written to a temporary and renamed. Every rank reads
 * every part and computes its own recvbuff. Nothing is removed: the test
 * removes the directory. */
#define ID_MAGIC "FAKENCCL"
#define XP_MAGIC 0x58504e43u

typedef struct {
    char internal[128];
} ncclUniqueId;

typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    /* later fields are not read */
} ncclConfig_t;

struct xhdr {
    uint32_t magic;
    int kind;
    uint64_t count;
    int dtype;
    int arg;
    int has_data;
};

/* A collective queued by a group: done at the outermost ncclGroupEnd. */
struct xop {
    struct ncclComm *comm;
    int kind;
    const void *send;
    void *recv;
    size_t count;
    int dtype;
    int arg;
    long k;
    struct xop *next;
};
static _Thread_local struct xop *t_xops, **t_xops_tail; /* NULL: &t_xops */

static int xp_exit_at = -2; /* FAKE_NCCL_EXIT_AT_COLLECTIVE; -2 not read, -1 none */

static int write_file_atomic(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int ok = write(fd, a, na) == (ssize_t)na && (nb == 0 || write(fd, b, nb) == (ssize_t)nb);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The join: reads every rank's file. With the lock held. */
static void xp_progress(struct ncclComm *c) {
    if (c->state != ncclInProgress) return;
    int all = 1;
    for (int j = 0; j < c->nranks; j++) {
        if (c->pids[j]) continue;
        char path[256];
        snprintf(path, sizeof path, "%s/rank.%d", c->dir, j);
        FILE *f = fopen(path, "r");
        if (!f) {
            all = 0;
            continue;
        }
        int n = 0;
        long pid = 0;
        int got = fscanf(f, "%d %ld", &n, &pid);
        fclose(f);
        if (got != 2) {
            all = 0;
            continue;
        }
        if (n != c->nranks) {
            set_err("ncclCommInitRankConfig: rank %d joined with nranks %d, rank %d with nranks %d", j, n, c->rank,
                    c->nranks);
            c->state = ncclInvalidUsage;
            return;
        }
        c->pids[j] = pid;
    }
    if (all) c->state = ncclSuccess;
}

static int pid_dead(long pid) { return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

/* Writes this rank's part of collective k. */
static ncclResult_t xp_write(const struct xop *op) {
    struct ncclComm *c = op->comm;
    struct xhdr h;
    memset(&h, 0, sizeof h); /* its padding too: the file is written whole (valgrind) */
    h.magic = XP_MAGIC;
    h.kind = op->kind;
    h.count = op->count;
    h.dtype = op->dtype;
    h.arg = op->arg;
    size_t bytes = op->count * g_types[op->dtype].size;
    h.has_data = bytes > 0 && (op->kind == K_ALLREDUCE || c->rank == op->arg);
    char path[256];
    snprintf(path, sizeof path, "%s/c%ld.r%d", c->dir, op->k, c->rank);
    if (write_file_atomic(path, &h, sizeof h, op->send, h.has_data ? bytes : 0) != 0) {
        set_err("fake_nccl: cannot write %s: %s", path, strerror(errno));
        return ncclSystemError;
    }
    return ncclSuccess;
}

/* Waits for every rank's part of collective k and computes this rank's
 * recvbuff. Without the lock (the files are the only shared state). A
 * peer whose process is gone: ncclRemoteError. */
static ncclResult_t xp_finish(const struct xop *op) {
    struct ncclComm *c = op->comm;
    size_t bytes = op->count * g_types[op->dtype].size;
    unsigned char *acc = bytes ? malloc(bytes) : NULL;
    unsigned char *part = bytes ? malloc(bytes) : NULL;
    ncclResult_t r = ncclSuccess;
    if (bytes && (!acc || !part)) {
        set_err("fake_nccl: out of host memory");
        r = ncclSystemError;
    }
    int folded = 0;
    for (int j = 0; j < c->nranks && r == ncclSuccess; j++) {
        char path[256];
        snprintf(path, sizeof path, "%s/c%ld.r%d", c->dir, op->k, j);
        FILE *f;
        for (;;) {
            f = fopen(path, "rb");
            if (f) break;
            const char *d = getenv("FAKE_NCCL_PEER_CHECK_DELAY_MS"); /* widens the window below (tests) */
            if (d && *d) usleep((useconds_t)atoi(d) * 1000);
            if (pid_dead(c->pids[j])) {
                /* A peer writes its part before it can finish (and exit):
                 * one that wrote it and exited since the open above is done,
                 * not gone. */
                f = fopen(path, "rb");
                if (f) break;
                set_err("fake_nccl: rank %d (process %ld) is gone: collective %ld cannot complete", j, c->pids[j],
                        op->k);
                r = ncclRemoteError;
                break;
            }
            usleep(500);
        }
        if (!f) break;
        struct xhdr h;
        if (fread(&h, sizeof h, 1, f) != 1 || h.magic != XP_MAGIC) {
            set_err("fake_nccl: %s is malformed", path);
            r = ncclInternalError;
        } else if (h.kind != op->kind || h.count != op->count || h.dtype != op->dtype || h.arg != op->arg) {
            set_err("%s: collective %ld is %s(count %llu, %s, %s %d) on rank %d, not %s(count %zu, %s, %s %d)",
                    kind_name(op->kind), op->k, kind_name(h.kind), (unsigned long long)h.count,
                    h.dtype >= 0 && h.dtype < NTYPES ? g_types[h.dtype].name : "?",
                    h.kind == K_ALLREDUCE ? "op" : "root", h.arg, j, kind_name(op->kind), op->count,
                    g_types[op->dtype].name, op->kind == K_ALLREDUCE ? "op" : "root", op->arg);
            r = ncclInvalidUsage;
        } else if (h.has_data) {
            if (fread(folded ? part : acc, 1, bytes, f) != bytes) {
                set_err("fake_nccl: %s is cut short", path);
                r = ncclInternalError;
            } else if (op->kind == K_BROADCAST) {
                folded = 1;
            } else if (folded) {
                g_types[op->dtype].red(acc, part, op->count, op->arg);
            } else {
                folded = 1;
            }
        }
        fclose(f);
    }
    if (r == ncclSuccess && bytes) {
        if (op->kind == K_ALLREDUCE && op->arg == ncclAvg) g_types[op->dtype].avg(acc, op->count, c->nranks);
        memcpy(op->recv, acc, bytes);
    }
    free(acc);
    free(part);
    return r;
}

/* One part on a communicator by rank. With the lock held (released while
 * waiting for the peers). */
static ncclResult_t xp_submit(const char *fn, int kind, const void *send, void *recv, size_t count, int dtype, int arg,
                              struct ncclComm *comm) {
    if (comm->state != ncclSuccess) {
        set_err("%s: the communicator is %s", fn,
                comm->state == ncclInProgress ? "still joining (ncclInProgress)" : "in error");
        return comm->state == ncclInProgress ? ncclInvalidUsage : comm->state;
    }
    if (xp_exit_at == -2) {
        const char *e = getenv("FAKE_NCCL_EXIT_AT_COLLECTIVE");
        xp_exit_at = e && *e ? atoi(e) : -1;
    }
    if (xp_exit_at >= 0 && comm->next_k == xp_exit_at) _exit(3); /* the simulated death of this rank */
    struct xop *op = calloc(1, sizeof *op);
    if (!op) {
        set_err("%s: out of host memory", fn);
        return ncclSystemError;
    }
    *op = (struct xop){comm, kind, send, recv, count, dtype, arg, comm->next_k, NULL};
    comm->next_k++;
    if (t_depth > 0) {
        if (!t_xops_tail) t_xops_tail = &t_xops;
        *t_xops_tail = op;
        t_xops_tail = &op->next;
        return ncclSuccess;
    }
    ncclResult_t r = xp_write(op);
    if (r == ncclSuccess) {
        unlock();
        r = xp_finish(op);
        lock();
    }
    free(op);
    if (r != ncclSuccess) {
        if (!comm->blocking) comm->state = r; /* as NCCL: the communicator's async error */
        return comm->blocking ? r : ncclInProgress;
    }
    if (!comm->blocking) {
        comm->pending = 1;
        return ncclInProgress;
    }
    return ncclSuccess;
}

/* The outermost ncclGroupEnd: the thread's queued parts on communicators
 * by rank, written all first, then completed in order (ok: released;
 * else withdrawn). With the lock held. Returns ncclInProgress when a
 * non-blocking communicator took part. */
static ncclResult_t xp_group_end(int ok) {
    struct xop *list = t_xops;
    t_xops = NULL;
    t_xops_tail = &t_xops;
    ncclResult_t r = ncclSuccess;
    int nonblocking = 0;
    if (!ok) {
        for (struct xop *op = list; op; op = op->next)
            if (comm_ok(op->comm) && op->comm->next_k > op->k) op->comm->next_k = op->k;
    } else {
        for (struct xop *op = list; op && r == ncclSuccess; op = op->next) r = xp_write(op);
        unlock();
        for (struct xop *op = list; op && r == ncclSuccess; op = op->next) r = xp_finish(op);
        lock();
        for (struct xop *op = list; op; op = op->next)
            if (comm_ok(op->comm) && !op->comm->blocking) {
                nonblocking = 1;
                if (r != ncclSuccess)
                    op->comm->state = r;
                else
                    op->comm->pending = 1;
            }
    }
    while (list) {
        struct xop *n = list->next;
        free(list);
        list = n;
    }
    if (nonblocking) return ncclInProgress;
    return r;
}

/* ---- NCCL entries ------------------------------------------------------ */

FAKE_API ncclResult_t ncclGetVersion(int *version) {
    lock();
    ncclResult_t r = enter(F_ncclGetVersion);
    if (r == ncclSuccess) {
        if (g_version < 0) {
            const char *e = getenv("FAKE_NCCL_VERSION");
            char *end = NULL;
            long v = e && *e ? strtol(e, &end, 10) : -1;
            g_version = (end && *end == '\0' && v >= 0 && v <= 0x7fffffff) ? (int)v : DEFAULT_VERSION;
        }
        if (!version) {
            set_err("ncclGetVersion: NULL version");
            r = ncclInvalidArgument;
        } else {
            *version = g_version;
        }
    }
    unlock();
    return r;
}

FAKE_API const char *ncclGetErrorString(ncclResult_t result) {
    lock();
    g_calls[F_ncclGetErrorString]++;
    unlock();
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

FAKE_API const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm; /* as the real NCCL's: not per communicator */
    lock();
    g_calls[F_ncclGetLastError]++;
    unlock();
    return t_err;
}

FAKE_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    lock();
    ncclResult_t r = enter(F_ncclCommInitAll);
    if (r != ncclSuccess) goto out;
    r = ncclInvalidArgument;
    if (!comms) {
        set_err("ncclCommInitAll: NULL comms");
        goto out;
    }
    if (ndev < 1) {
        set_err("ncclCommInitAll: invalid ndev %d", ndev);
        goto out;
    }
    for (int i = 0; devlist && i < ndev; i++) {
        if (devlist[i] < 0) {
            set_err("ncclCommInitAll: invalid device %d at index %d", devlist[i], i);
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (devlist[j] == devlist[i]) {
                set_err("ncclCommInitAll: device %d twice (indices %d and %d)", devlist[i], j, i);
                goto out;
            }
    }
    struct clique *cl = calloc(1, sizeof *cl);
    if (cl) {
        cl->n = ndev;
        cl->comms = calloc((size_t)ndev, sizeof *cl->comms);
        cl->next_call = calloc((size_t)ndev, sizeof *cl->next_call);
    }
    int ok = cl && cl->comms && cl->next_call;
    for (int i = 0; ok && i < ndev; i++) {
        struct ncclComm *c = calloc(1, sizeof *c);
        if (!c) {
            ok = 0;
            break;
        }
        c->magic = COMM_MAGIC;
        c->cl = cl;
        c->rank = i;
        c->device = devlist ? devlist[i] : i;
        cl->comms[i] = c;
    }
    if (!ok) {
        if (cl) {
            for (int i = 0; cl->comms && i < ndev; i++) free(cl->comms[i]);
            free(cl->comms);
            free(cl->next_call);
            free(cl);
        }
        set_err("ncclCommInitAll: out of host memory");
        r = ncclSystemError;
        goto out;
    }
    cl->nlive = ndev;
    cl->next = g_cliques;
    g_cliques = cl;
    for (int i = 0; i < ndev; i++) {
        cl->comms[i]->next = g_comms;
        g_comms = cl->comms[i];
        comms[i] = cl->comms[i];
    }
    g_live += ndev;
    r = ncclSuccess;
out:
    unlock();
    return r;
}

FAKE_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    lock();
    ncclResult_t r = enter(F_ncclCommDestroy);
    if (r != ncclSuccess || !comm) goto out;
    if (!comm_ok(comm)) {
        set_err("ncclCommDestroy: invalid communicator %p", (void *)comm);
        r = ncclInvalidArgument;
        goto out;
    }
    if (comm->xp) {
        xp_free(comm);
        goto out;
    }
    struct clique *cl = comm->cl;
    drop_pending(cl);
    for (struct ncclComm **pp = &g_comms; *pp; pp = &(*pp)->next)
        if (*pp == comm) {
            *pp = comm->next;
            break;
        }
    cl->comms[comm->rank] = NULL;
    comm->magic = 0;
    free(comm);
    g_live--;
    if (--cl->nlive == 0) {
        for (struct clique **pp = &g_cliques; *pp; pp = &(*pp)->next)
            if (*pp == cl) {
                *pp = cl->next;
                break;
            }
        free(cl->comms);
        free(cl->next_call);
        free(cl);
    }
out:
    unlock();
    return r;
}

/* Unregisters and frees a communicator by rank. With the lock held. */
static void xp_free(struct ncclComm *comm) {
    for (struct ncclComm **pp = &g_comms; *pp; pp = &(*pp)->next)
        if (*pp == comm) {
            *pp = comm->next;
            break;
        }
    comm->magic = 0;
    free(comm->pids);
    free(comm);
    g_live--;
}

FAKE_XP_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    lock();
    ncclResult_t r = enter(F_ncclGetUniqueId);
    if (r != ncclSuccess) goto out;
    if (!id) {
        set_err("ncclGetUniqueId: NULL id");
        r = ncclInvalidArgument;
        goto out;
    }
    const char *base = getenv("FAKE_NCCL_DIR");
    if (!base || !*base) base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char dir[128];
    int n = snprintf(dir, sizeof dir, "%s/fakenccl.XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof id->internal - 8 || !mkdtemp(dir)) {
        set_err("ncclGetUniqueId: cannot make a directory under %s", base);
        r = ncclSystemError;
        goto out;
    }
    memset(id, 0, sizeof *id);
    memcpy(id->internal, ID_MAGIC, 8);
    memcpy(id->internal + 8, dir, strlen(dir) + 1);
out:
    unlock();
    return r;
}

FAKE_XP_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                             ncclConfig_t *config) {
    lock();
    ncclResult_t r = enter(F_ncclCommInitRankConfig);
    if (r != ncclSuccess) goto out;
    r = ncclInvalidArgument;
    if (!out) {
        set_err("ncclCommInitRankConfig: NULL comm");
        goto out;
    }
    if (memcmp(id.internal, ID_MAGIC, 8) != 0 || !memchr(id.internal + 8, 0, sizeof id.internal - 8)) {
        set_err("ncclCommInitRankConfig: the id was not made by ncclGetUniqueId");
        goto out;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        set_err("ncclCommInitRankConfig: invalid rank %d or nranks %d", rank, nranks);
        goto out;
    }
    if (config && config->magic != 0xcafebeef) {
        set_err("ncclCommInitRankConfig: the config's magic is wrong");
        goto out;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    long *pids = calloc((size_t)nranks, sizeof *pids);
    if (!c || !pids) {
        free(c);
        free(pids);
        set_err("ncclCommInitRankConfig: out of host memory");
        r = ncclSystemError;
        goto out;
    }
    c->magic = COMM_MAGIC;
    c->xp = 1;
    c->rank = rank;
    c->nranks = nranks;
    c->device = 0;
    c->blocking = !config || config->blocking != 0;
    c->pids = pids;
    snprintf(c->dir, sizeof c->dir, "%s", id.internal + 8);
    c->state = ncclInProgress;
    /* Join: the rank's file, made exclusively (link fails if the rank is
     * taken). */
    char path[256], tmp[300], line[64];
    snprintf(path, sizeof path, "%s/rank.%d", c->dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int ln = snprintf(line, sizeof line, "%d %ld\n", nranks, (long)getpid());
    if (write_file_atomic(tmp, line, (size_t)ln, NULL, 0) != 0) {
        set_err("ncclCommInitRankConfig: cannot write in %s: %s", c->dir, strerror(errno));
        c->state = ncclSystemError;
    } else {
        if (link(tmp, path) != 0) {
            if (errno == EEXIST)
                set_err("ncclCommInitRankConfig: rank %d joined twice (another process has it)", rank);
            else
                set_err("ncclCommInitRankConfig: cannot join in %s: %s", c->dir, strerror(errno));
            c->state = errno == EEXIST ? ncclInvalidUsage : ncclSystemError;
        }
        unlink(tmp);
    }
    c->next = g_comms;
    g_comms = c;
    g_live++;
    *out = c;
    if (c->blocking) {
        while (c->state == ncclInProgress) {
            xp_progress(c);
            if (c->state != ncclInProgress) break;
            unlock();
            usleep(1000);
            lock();
        }
        r = c->state;
        if (r != ncclSuccess) {
            xp_free(c);
            *out = NULL;
        }
    } else {
        r = c->state == ncclInProgress ? ncclInProgress : ncclSuccess;
    }
out:
    unlock();
    return r;
}

/* The blocking join (counted as ncclCommInitRankConfig). */
FAKE_XP_API ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(out, nranks, id, rank, NULL);
}

FAKE_XP_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
    lock();
    ncclResult_t r = enter(F_ncclCommGetAsyncError);
    if (r != ncclSuccess) goto out;
    if (!comm_ok(comm) || !state) {
        set_err("ncclCommGetAsyncError: invalid communicator %p or NULL state", (void *)comm);
        r = ncclInvalidArgument;
        goto out;
    }
    if (!comm->xp) {
        *state = ncclSuccess;
        goto out;
    }
    xp_progress(comm);
    if (comm->state == ncclSuccess && comm->pending) {
        comm->pending = 0; /* the call answered ncclInProgress is done */
    }
    *state = comm->state;
out:
    unlock();
    return r;
}

FAKE_XP_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
    lock();
    ncclResult_t r = enter(F_ncclCommAbort);
    if (r != ncclSuccess || !comm) goto out;
    if (!comm_ok(comm) || !comm->xp) {
        set_err("ncclCommAbort: invalid communicator %p (the fake aborts communicators by rank only)", (void *)comm);
        r = ncclInvalidArgument;
        goto out;
    }
    if (comm->state == ncclInProgress) {
        /* A join given up: the rank leaves (a later process may take it;
         * the real NCCL's peers would never see this one complete). */
        char path[256];
        snprintf(path, sizeof path, "%s/rank.%d", comm->dir, comm->rank);
        unlink(path);
    }
    xp_free(comm);
out:
    unlock();
    return r;
}

/* A split of a communicator by rank with color 0 and key = rank (what
 * cuweave asks: the same ranks, another mode): a copy that goes on from the
 * parent's next collective, its mode from config. Other colors and keys are
 * refused (the fake does not regroup ranks). */
FAKE_XP_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                       ncclConfig_t *config) {
    lock();
    ncclResult_t r = enter(F_ncclCommSplit);
    if (r != ncclSuccess) goto out;
    r = ncclInvalidArgument;
    if (!comm_ok(comm) || !comm->xp || !newcomm) {
        set_err("ncclCommSplit: invalid communicator %p (the fake splits communicators by rank) or NULL newcomm",
                (void *)comm);
        goto out;
    }
    if (comm->state != ncclSuccess) {
        set_err("ncclCommSplit: the communicator has not joined (state %d)", comm->state);
        goto out;
    }
    if (color != 0 || key != comm->rank) {
        set_err("ncclCommSplit: the fake splits with color 0 and key = rank only");
        goto out;
    }
    if (config && config->magic != 0xcafebeef) {
        set_err("ncclCommSplit: the config's magic is wrong");
        goto out;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    long *pids = calloc((size_t)comm->nranks, sizeof *pids);
    if (!c || !pids) {
        free(c);
        free(pids);
        set_err("ncclCommSplit: out of host memory");
        r = ncclSystemError;
        goto out;
    }
    *c = *comm;
    memcpy(pids, comm->pids, (size_t)comm->nranks * sizeof *pids);
    c->pids = pids;
    c->blocking = config ? config->blocking != 0 : comm->blocking;
    c->pending = 0;
    c->next = g_comms;
    g_comms = c;
    g_live++;
    *newcomm = c;
    r = ncclSuccess;
out:
    unlock();
    return r;
}

FAKE_XP_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    lock();
    ncclResult_t r = enter(F_ncclCommFinalize);
    if (r == ncclSuccess && !comm_ok(comm)) {
        set_err("ncclCommFinalize: invalid communicator %p", (void *)comm);
        r = ncclInvalidArgument;
    }
    unlock();
    return r;
}

/* The three queries: what 0 count, 1 device, 2 rank. */
static ncclResult_t query(int id, const struct ncclComm *comm, int *out, int what) {
    lock();
    ncclResult_t r = enter(id);
    if (r != ncclSuccess) goto done;
    if (!comm_ok(comm)) {
        set_err("%s: invalid communicator %p", g_entry_names[id], (const void *)comm);
        r = ncclInvalidArgument;
    } else if (!out) {
        set_err("%s: NULL output", g_entry_names[id]);
        r = ncclInvalidArgument;
    } else {
        *out = what == 0 ? (comm->xp ? comm->nranks : comm->cl->n) : what == 1 ? comm->device : comm->rank;
    }
done:
    unlock();
    return r;
}

FAKE_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    return query(F_ncclCommCount, comm, count, 0);
}

FAKE_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    return query(F_ncclCommCuDevice, comm, device, 1);
}

FAKE_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    return query(F_ncclCommUserRank, comm, rank, 2);
}

FAKE_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, ncclComm_t comm, void *stream) {
    return submit(F_ncclAllReduce, K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

FAKE_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, void *stream) {
    return submit(F_ncclBroadcast, K_BROADCAST, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

FAKE_API ncclResult_t ncclGroupStart(void) {
    lock();
    ncclResult_t r = enter(F_ncclGroupStart);
    if (r == ncclSuccess) {
        if (!t_token) t_token = g_next_token++;
        t_depth++;
    }
    unlock();
    return r;
}

FAKE_API ncclResult_t ncclGroupEnd(void) {
    lock();
    ncclResult_t r = enter(F_ncclGroupEnd);
    if (t_depth == 0) {
        if (r == ncclSuccess) {
            set_err("ncclGroupEnd: not in a group call");
            r = ncclInvalidUsage;
        }
    } else if (--t_depth == 0) {
        /* As NCCL's: a failed end still leaves the group; the outermost end
         * of a group with a failed call (or an injected failure) abandons
         * the group's operations and returns the error (the failed call's
         * text stays in ncclGetLastError). */
        if (r == ncclSuccess) r = t_group_err;
        t_group_err = ncclSuccess;
        if (r != ncclSuccess) {
            abandon_group(t_token);
            (void)xp_group_end(0);
        } else {
            release_group(t_token);
            r = xp_group_end(1);
        }
    }
    unlock();
    return r;
}

/* ---- test controls ----------------------------------------------------- */

/* Communicators alive. */
FAKE_API int fake_nccl_live(void) {
    lock();
    int n = g_live;
    unlock();
    return n;
}

/* Calls made to an entry by name (-1: unknown name). */
FAKE_API long fake_nccl_calls(const char *entry) {
    int id = entry_id(entry);
    if (id < 0) return -1;
    lock();
    long v = g_calls[id];
    unlock();
    return v;
}

/* The next call to `entry` returns `result` (0 disarms). */
FAKE_API void fake_nccl_fail(const char *entry, int result) {
    int id = entry_id(entry);
    if (id < 0 || id == F_ncclGetErrorString || id == F_ncclGetLastError) return;
    lock();
    g_fail[id] = result;
    unlock();
}

/* The stream of the last accepted collective call on `device` (NULL: none). */
FAKE_API void *fake_nccl_last_stream(int device) {
    void *s = NULL;
    lock();
    for (size_t i = 0; i < g_nstreams; i++)
        if (g_streams[i].device == device) s = g_streams[i].stream;
    unlock();
    return s;
}

/* The calling thread's group depth. */
FAKE_API int fake_nccl_group_depth(void) { return t_depth; }

/* The stream table goes with the library (dlclose), so that leak checkers
 * see only what tests leave. */
__attribute__((destructor)) static void fake_nccl_unload(void) {
    free(g_streams);
    g_streams = NULL;
    g_nstreams = g_capstreams = 0;
}

/* Zeroes the counters, disarms the failures, forgets the last streams. */
FAKE_API void fake_nccl_reset(void) {
    lock();
    memset(g_calls, 0, sizeof g_calls);
    memset(g_fail, 0, sizeof g_fail);
    g_nstreams = 0;
    unlock();
}
