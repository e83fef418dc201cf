/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: collectives through NCCL, opened at run time
// (collective.hpp).
//
// NCCL is not a link dependency: its few entry points are resolved with
// dlsym from the path in CUWEAVE_LIBNCCL or "libnccl.so.2", with the C ABI
// declared here (NCCL's types are plain ints and pointers). Every call
// restores the caller's current context afterwards: NCCL sets devices with
// the CUDA runtime, which changes the thread's current context.
#include <atomic>
#include <climits>
#include <dlfcn.h>
#include <sched.h>
#include <time.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multi/collective.hpp"

namespace cw {
namespace multi {

using namespace core;

#define CW_NCCL_ENTRIES(X)                                                                        \
    X(ncclGetVersion, ncclResult_t, (int *version))                                               \
    X(ncclGetErrorString, const char *, (ncclResult_t result))                                    \
    X(ncclCommInitAll, ncclResult_t, (ncclComm_t * comms, int ndev, const int *devlist))          \
    X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                           \
    X(ncclAllReduce, ncclResult_t,                                                                \
      (const void *send, void *recv, size_t count, int dtype, int op, ncclComm_t comm, CUstream s)) \
    X(ncclBroadcast, ncclResult_t,                                                                \
      (const void *send, void *recv, size_t count, int dtype, int root, ncclComm_t comm, CUstream s)) \
    X(ncclGroupStart, ncclResult_t, (void))                                                       \
    X(ncclGroupEnd, ncclResult_t, (void))

// NCCL's ncclUniqueId (NCCL_UNIQUE_ID_BYTES), passed by value.
struct NcclUniqueId {
    char internal[CW_COMM_ID_BYTES];
};

// ncclConfig_t as NCCL 2.14 defined it: NCCL reads `size` bytes of the
// version given (later versions append fields, and take the ones absent
// as unset).
struct NcclConfig {
    size_t size;
    unsigned int magic;    // 0xcafebeef
    unsigned int version;  // NCCL_VERSION(2, 14, 0)
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
};

constexpr ncclResult_t kNcclInProgress = 7;
constexpr ncclResult_t kNcclInvalidArgument = 4;
constexpr ncclResult_t kNcclInvalidUsage = 5;

struct Nccl {
#define CW_NCCL_MEMBER_(name, ret, params) ret(*name) params;
    CW_NCCL_ENTRIES(CW_NCCL_MEMBER_)
#undef CW_NCCL_MEMBER_
    const char *(*ncclGetLastError)(ncclComm_t comm);  // optional (NCCL 2.13)
    // Optional: communicators by rank (NCCL 2.14's non-blocking init).
    ncclResult_t (*ncclGetUniqueId)(NcclUniqueId *id);
    ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t *comm, int nranks, NcclUniqueId id, int rank,
                                           NcclConfig *config);
    ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t comm, ncclResult_t *state);
    ncclResult_t (*ncclCommAbort)(ncclComm_t comm);
    ncclResult_t (*ncclCommFinalize)(ncclComm_t comm);  // optional even then (2.14)
    // Optional (NCCL 2.18): the joined communicator split into a blocking
    // one for the collectives (see comm_create_rank).
    ncclResult_t (*ncclCommSplit)(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, NcclConfig *config);
};

namespace {

Nccl g_nccl;
std::atomic<int> g_nccl_state{0};  // 0 not tried, 1 loaded, 2 failed
std::mutex g_nccl_mutex;
char g_nccl_error[512];
char g_nccl_name[256];  // the path or name NCCL was loaded from

cw_status ensure_nccl(const Nccl **out) {
    int state = g_nccl_state.load(std::memory_order_acquire);
    if (state == 0) {
        std::lock_guard<std::mutex> lock(g_nccl_mutex);
        state = g_nccl_state.load(std::memory_order_relaxed);
        if (state == 0) {
            const char *env = getenv("CUWEAVE_LIBNCCL");
            const char *name = env && *env ? env : "libnccl.so.2";
            state = 2;
            void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (!lib) {
                snprintf(g_nccl_error, sizeof g_nccl_error, "dlopen(\"%s\") failed: %s", name, dlerror());
            } else {
                Nccl t{};
                bool ok = true;
#define CW_NCCL_LOAD_(sym, ret, params)                                                    \
    if (ok && !(t.sym = reinterpret_cast<ret(*) params>(dlsym(lib, #sym)))) {              \
        snprintf(g_nccl_error, sizeof g_nccl_error, "%s lacks %s", name, #sym);            \
        ok = false;                                                                        \
    }
                CW_NCCL_ENTRIES(CW_NCCL_LOAD_)
#undef CW_NCCL_LOAD_
                t.ncclGetLastError = reinterpret_cast<const char *(*)(ncclComm_t)>(dlsym(lib, "ncclGetLastError"));
#define CW_NCCL_OPT_(sym) t.sym = reinterpret_cast<decltype(t.sym)>(dlsym(lib, #sym));
                CW_NCCL_OPT_(ncclGetUniqueId)
                CW_NCCL_OPT_(ncclCommInitRankConfig)
                CW_NCCL_OPT_(ncclCommGetAsyncError)
                CW_NCCL_OPT_(ncclCommAbort)
                CW_NCCL_OPT_(ncclCommFinalize)
                CW_NCCL_OPT_(ncclCommSplit)
#undef CW_NCCL_OPT_
                snprintf(g_nccl_name, sizeof g_nccl_name, "%s", name);
                if (ok) {
                    g_nccl = t;
                    state = 1;
                    int v = 0;
                    (void)t.ncclGetVersion(&v);
                    log(CW_LOG_INFO, "NCCL loaded from %s (version %d)", name, v);
                } else {
                    dlclose(lib);
                }
            }
            g_nccl_state.store(state, std::memory_order_release);
        }
    }
    if (state != 1) return fail(CW_ERROR_NOT_SUPPORTED, "NCCL could not be loaded: %s", g_nccl_error);
    *out = &g_nccl;
    return CW_SUCCESS;
}

// An NCCL failure as CW_ERROR_DRIVER with NCCL's words; rank < 0: none.
cw_status fail_nccl(const Nccl *n, ncclResult_t r, const char *call, ncclComm_t comm, int rank) {
    const char *text = n->ncclGetErrorString ? n->ncclGetErrorString(r) : nullptr;
    const char *last = n->ncclGetLastError ? n->ncclGetLastError(comm) : nullptr;
    char who[32] = "";
    if (rank >= 0) snprintf(who, sizeof who, " for rank %d", rank);
    return fail(CW_ERROR_DRIVER, "%s failed%s: NCCL error %d (%s)%s%s", call, who, r, text ? text : "?",
                last && *last ? ": " : "", last ? last : "");
}

// Keeps the caller's current context across NCCL calls (which set devices
// through the runtime).
class KeepCurrent {
  public:
    KeepCurrent() { ok_ = drv().cuCtxGetCurrent && drv().cuCtxGetCurrent(&prev_) == CUDA_SUCCESS; }
    ~KeepCurrent() {
        if (ok_) (void)drv().cuCtxSetCurrent(prev_);
    }
    KeepCurrent(const KeepCurrent &) = delete;
    KeepCurrent &operator=(const KeepCurrent &) = delete;

  private:
    CUcontext prev_ = nullptr;
    bool ok_ = false;
};

// A local rank's stream (local index i, global rank c->first + i): live and
// on the rank's device.
cw_status check_rank_stream(const cw_comm *c, int i, const cw_stream *s) {
    int rank = c->first + i;
    if (!s) return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d is NULL", rank);
    if (!live(s)) return fail(CW_ERROR_INVALID_HANDLE, "the stream of rank %d is not a live cw_stream", rank);
    if (s->ctx->device != c->ctx[i]->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d is on device %d, the rank on device %d", rank,
                    s->ctx->ordinal, c->ctx[i]->ordinal);
    if (s->is_null)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d wraps a legacy stream: give NCCL a real one",
                    rank);
    return CW_SUCCESS;
}


// Monotonic milliseconds.
uint64_t now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

// A non-blocking communicator's pending operation: polls its async error
// until it is no longer ncclInProgress; timeout_ms UINT32_MAX: no limit.
// Returns the final state (kNcclInProgress on timeout).
ncclResult_t settle(const Nccl *n, ncclComm_t comm, uint32_t timeout_ms) {
    uint64_t start = now_ms();
    for (;;) {
        ncclResult_t state = kNcclInProgress;
        ncclResult_t r = n->ncclCommGetAsyncError(comm, &state);
        if (r != 0) return r;
        if (state != kNcclInProgress) return state;
        uint64_t spent = now_ms() - start;
        if (timeout_ms != UINT32_MAX && spent >= timeout_ms) return kNcclInProgress;
        // Yield for the first 5 ms (an enqueue that answered ncclInProgress
        // settles in microseconds: a nap would cost the collective a
        // millisecond), then nap 1 ms at a time (a join takes longer).
        if (spent < 5)
            sched_yield();
        else
            nap_ms(1);
    }
}

// The non-blocking communicators used in this thread's open cuweave group:
// settled at the outermost cw_comm_group_end. On the heap, made at the first
// use and freed at that end: the library's thread-local block stays small
// (it is loaded with dlopen, into the static TLS surplus).
struct GroupState {
    int n;
    const Nccl *nccl;
    ncclComm_t comms[CW_MAX_DEVICES];
};
thread_local int t_group_depth;
thread_local GroupState *t_group;

void group_note(const Nccl *n, ncclComm_t comm) {
    if (t_group_depth == 0) return;
    if (!t_group) {
        t_group = static_cast<GroupState *>(calloc(1, sizeof(GroupState)));
        if (!t_group) {
            log(CW_LOG_ERROR, "out of host memory: cw_comm_group_end will not wait for NCCL's enqueue");
            return;
        }
    }
    GroupState *g = t_group;
    for (int i = 0; i < g->n; i++)
        if (g->comms[i] == comm) return;
    if (g->n == CW_MAX_DEVICES) return;  // one per local rank at most: cannot happen
    g->comms[g->n++] = comm;
    g->nccl = n;
}

// After a call of a non-blocking communicator outside a group: waits for
// NCCL's enqueue to finish (ncclInProgress), as the blocking mode would.
cw_status finish_call(cw_comm *c, int i, ncclResult_t r, const char *call) {
    const Nccl *n = c->nccl;
    int rank = c->first + i;
    if (r == kNcclInProgress && c->nonblocking) {
        if (t_group_depth > 0) return CW_SUCCESS;  // settled at cw_comm_group_end
        r = settle(n, c->comms[i], UINT32_MAX);
    }
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, call, c->comms[i], rank);
}

// Issues one local rank's part (local index i; all-reduce when root < 0,
// else broadcast from the global rank root).
cw_status issue(cw_comm *c, int i, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype, cw_reduce_op op,
                int root, cw_stream *s) {
    const Nccl *n = c->nccl;
    if (c->nonblocking) group_note(n, c->comms[i]);
    ncclResult_t r;
    const char *call;
    if (root < 0) {
        call = "ncclAllReduce";
        r = n->ncclAllReduce(reinterpret_cast<const void *>(send), reinterpret_cast<void *>(recv), count, (int)dtype,
                             (int)op, c->comms[i], s->cu);
    } else {
        call = "ncclBroadcast";
        r = n->ncclBroadcast(reinterpret_cast<const void *>(send), reinterpret_cast<void *>(recv), count, (int)dtype,
                             root, c->comms[i], s->cu);
    }
    return finish_call(c, i, r, call);
}

// Settles the non-blocking communicators of the group that just ended.
cw_status settle_group(bool wait, const char *call) {
    GroupState *g = t_group;
    t_group = nullptr;
    cw_status st = CW_SUCCESS;
    for (int i = 0; wait && g && i < g->n; i++) {
        ncclResult_t s = settle(g->nccl, g->comms[i], UINT32_MAX);
        if (s != 0 && st == CW_SUCCESS) st = fail_nccl(g->nccl, s, call, g->comms[i], -1);
    }
    free(g);
    return st;
}

}  // namespace

// A rank (or root) of the communicator: what names it in the detail.
cw_status check_rank(const cw_comm *c, int rank, const char *what) {
    if (rank < 0 || rank >= c->nranks)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s %d, but the communicator has %d ranks", what, rank, c->nranks);
    return CW_SUCCESS;
}

// Every rank's part in one NCCL group.
cw_status collective_all(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count, cw_dtype dtype,
                         cw_reduce_op op, int root, cw_stream *const *streams) {
    for (int i = 0; i < c->n; i++) {
        CW_TRY(check_rank_stream(c, i, streams[i]));
        if (recv[i] == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "recv[%d] is 0", i);
        if ((root < 0 || root == c->first + i) && send[i] == 0)
            return fail(CW_ERROR_INVALID_ARGUMENT, "send[%d] is 0", i);
    }
    if (count == 0) return CW_SUCCESS;
    const Nccl *n = c->nccl;
    KeepCurrent keep;
    if (c->n == 1 && t_group_depth == 0) return issue(c, 0, send[0], recv[0], count, dtype, op, root, streams[0]);
    ncclResult_t r = n->ncclGroupStart();
    if (r != 0) return fail_nccl(n, r, "ncclGroupStart", nullptr, -1);
    t_group_depth++;
    cw_status st = CW_SUCCESS;
    for (int i = 0; i < c->n && st == CW_SUCCESS; i++)
        st = issue(c, i, send[i], recv[i], count, dtype, op, root, streams[i]);
    // The group is always closed, also after a failed part.
    r = n->ncclGroupEnd();
    if (--t_group_depth == 0) {
        cw_status s2 = settle_group(r == 0 || r == kNcclInProgress, "ncclGroupEnd");
        if (st == CW_SUCCESS) st = s2;
    }
    if (st == CW_SUCCESS && r != 0 && r != kNcclInProgress) st = fail_nccl(n, r, "ncclGroupEnd", c->comms[0], -1);
    return st;
}

cw_status collective_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype,
                          cw_reduce_op op, int root, cw_stream *s) {
    CW_TRY(check_rank(c, rank, "rank"));
    int i = rank - c->first;
    if (i < 0 || i >= c->n)
        return fail(CW_ERROR_INVALID_ARGUMENT, "rank %d is not held by this communicator (it holds rank %d%s)", rank,
                    c->first, c->n > 1 ? " and up" : "");
    CW_TRY(check_rank_stream(c, i, s));
    CW_CHECK_ARG(recv != 0);
    if ((root < 0 || root == rank) && send == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "send is 0");
    if (count == 0) return CW_SUCCESS;
    KeepCurrent keep;
    return issue(c, i, send, recv, count, dtype, op, root, s);
}


cw_status nccl_version(int *version) {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    ncclResult_t r = n->ncclGetVersion(version);
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, "ncclGetVersion", nullptr, -1);
}

cw_status comm_create(cw_context *const *ctxs, int n, cw_comm **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    int devs[CW_MAX_DEVICES];
    for (int i = 0; i < n; i++) {
        if (ctxs[i]->kind != CW_CONTEXT_PRIMARY)
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "ctxs[%d] is not a primary context: NCCL runs on each device's primary context", i);
        for (int j = 0; j < i; j++)
            if (ctxs[j]->device == ctxs[i]->device)
                return fail(CW_ERROR_INVALID_ARGUMENT, "ctxs[%d] and ctxs[%d] are both on device %d", j, i,
                            ctxs[i]->ordinal);
        devs[i] = ctxs[i]->ordinal;
    }
    const Nccl *nc = nullptr;
    CW_TRY(ensure_nccl(&nc));
    cw_comm *c = static_cast<cw_comm *>(calloc(1, sizeof(cw_comm)));
    if (!c) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    ncclResult_t r;
    {
        KeepCurrent keep;
        r = nc->ncclCommInitAll(c->comms, n, devs);
    }
    if (r != 0) {
        cw_status st = fail_nccl(nc, r, "ncclCommInitAll", nullptr, -1);
        free(c);
        return st;
    }
    c->n = n;
    c->nranks = n;
    c->first = 0;
    c->nccl = nc;
    for (int i = 0; i < n; i++) {
        c->ctx[i] = ctxs[i];
        context_retain(ctxs[i]);
    }
    room.publish(c);
    *out = c;
    return CW_SUCCESS;
}

void comm_destroy(cw_comm *c) {
    handle_retire(c);
    {
        KeepCurrent keep;
        for (int i = 0; i < c->n; i++) {
            const Nccl *n = c->nccl;
            if (c->nonblocking && n->ncclCommFinalize) {
                // Non-blocking: finalize (flushes the enqueued work) may
                // answer ncclInProgress; settle it before the destroy.
                ncclResult_t r = n->ncclCommFinalize(c->comms[i]);
                if (r == kNcclInProgress) r = settle(n, c->comms[i], UINT32_MAX);
                if (r != 0) (void)fail_nccl(n, r, "ncclCommFinalize", nullptr, c->first + i);
            }
            ncclResult_t r = n->ncclCommDestroy(c->comms[i]);
            if (r == kNcclInProgress && c->nonblocking) r = 0;
            if (r != 0) (void)fail_nccl(n, r, "ncclCommDestroy", nullptr, c->first + i);
        }
    }
    for (int i = 0; i < c->n; i++) context_release(c->ctx[i]);
    handle_free(c);
}

void comm_info(const cw_comm *c, cw_comm_info *info) {
    memset(info, 0, sizeof *info);
    info->size = c->nranks;
    info->local_size = c->n;
    info->first_rank = c->first;
    for (int i = 0; i < c->n; i++) info->contexts[i] = c->ctx[i];
}

cw_status group_begin() {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    ncclResult_t r = n->ncclGroupStart();
    if (r != 0) return fail_nccl(n, r, "ncclGroupStart", nullptr, -1);
    t_group_depth++;
    return CW_SUCCESS;
}

cw_status group_end() {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    KeepCurrent keep;
    ncclResult_t r = n->ncclGroupEnd();
    if (t_group_depth > 0 && --t_group_depth == 0) {
        // The outermost end: wait for the non-blocking communicators'
        // parts (ncclInProgress), as the blocking mode's end would.
        if (r == 0 || r == kNcclInProgress) return settle_group(true, "ncclGroupEnd");
        (void)settle_group(false, "ncclGroupEnd");
    }
    if (r == kNcclInProgress) r = 0;
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, "ncclGroupEnd", nullptr, -1);
}

cw_status comm_id_generate(cw_comm_id *out) {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    if (!n->ncclGetUniqueId)
        return fail(CW_ERROR_NOT_SUPPORTED, "the NCCL loaded from %s lacks ncclGetUniqueId", g_nccl_name);
    NcclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = n->ncclGetUniqueId(&id);
    if (r != 0) return fail_nccl(n, r, "ncclGetUniqueId", nullptr, -1);
    static_assert(sizeof id == sizeof out->bytes, "ncclUniqueId is 128 bytes");
    memcpy(out->bytes, id.internal, sizeof id);
    return CW_SUCCESS;
}

cw_status comm_create_rank(cw_context *ctx, const cw_comm_id *id, int nranks, int rank, uint32_t timeout_ms,
                           cw_comm **out) {
    if (nranks < 1) return fail(CW_ERROR_INVALID_ARGUMENT, "nranks is %d: a communicator has at least one rank", nranks);
    if (rank < 0 || rank >= nranks)
        return fail(CW_ERROR_INVALID_ARGUMENT, "rank %d is outside [0, %d) (nranks %d)", rank, nranks, nranks);
    if (ctx->kind != CW_CONTEXT_PRIMARY)
        return fail(CW_ERROR_INVALID_ARGUMENT, "ctx is not a primary context: NCCL runs on the device's primary context");
    HandleRoom room;
    CW_TRY(room.reserve());
    const Nccl *nc = nullptr;
    CW_TRY(ensure_nccl(&nc));
    const char *missing = !nc->ncclCommInitRankConfig  ? "ncclCommInitRankConfig"
                          : !nc->ncclCommGetAsyncError ? "ncclCommGetAsyncError"
                          : !nc->ncclCommAbort         ? "ncclCommAbort"
                                                       : nullptr;
    if (missing)
        return fail(CW_ERROR_NOT_SUPPORTED,
                    "the NCCL loaded from %s lacks %s: communicators by rank need NCCL 2.14 or later (its "
                    "non-blocking init)",
                    g_nccl_name, missing);
    cw_comm *c = static_cast<cw_comm *>(calloc(1, sizeof(cw_comm)));
    if (!c) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    NcclUniqueId nid;
    memcpy(nid.internal, id->bytes, sizeof nid.internal);
    NcclConfig config;
    memset(&config, 0, sizeof config);
    config.size = sizeof config;
    config.magic = 0xcafebeef;
    config.version = 21400;  // NCCL_VERSION(2, 14, 0)
    config.blocking = 0;
    config.cgaClusterSize = INT_MIN;  // NCCL_CONFIG_UNDEF_INT
    config.minCTAs = INT_MIN;
    config.maxCTAs = INT_MIN;
    config.netName = nullptr;
    ncclComm_t comm = nullptr;
    ncclResult_t r;
    uint64_t start = now_ms();
    {
        KeepCurrent keep;
        // NCCL takes the device from the calling thread's current one.
        CUresult cr = drv().cuCtxSetCurrent(ctx->cu);
        if (cr != CUDA_SUCCESS) {
            free(c);
            return fail_cu(cr, "cuCtxSetCurrent");
        }
        r = nc->ncclCommInitRankConfig(&comm, nranks, nid, rank, &config);
        if (r == kNcclInProgress || (r == 0 && comm)) {
            uint32_t left = timeout_ms;
            r = settle(nc, comm, left);
        }
    }
    if (r != 0) {
        cw_status st;
        uint64_t waited = now_ms() - start;
        if (r == kNcclInProgress) {
            st = fail(CW_ERROR_TIMEOUT,
                      "rank %d of %d: not every rank joined within %u ms (waited %llu ms): a peer never arrived, "
                      "or has another id",
                      rank, nranks, timeout_ms, (unsigned long long)waited);
        } else if (r == kNcclInvalidUsage || r == kNcclInvalidArgument) {
            const char *last = nc->ncclGetLastError ? nc->ncclGetLastError(comm) : nullptr;
            st = fail(CW_ERROR_INVALID_ARGUMENT,
                      "rank %d of %d: NCCL refused the join (error %d, %s)%s%s: do all ranks pass the same id and "
                      "nranks, each its own rank?",
                      rank, nranks, r, nc->ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
        } else {
            st = fail_nccl(nc, r, "ncclCommInitRankConfig", comm, rank);
        }
        if (comm) {
            KeepCurrent keep;
            (void)nc->ncclCommAbort(comm);
        }
        free(c);
        return st;
    }
    // The join was non-blocking so that it could time out and be aborted;
    // the collectives are not: in non-blocking mode NCCL defers each call's
    // enqueue, some 40 us a call on the H200s (bench_comm_rank with NCCL's
    // own communicator made non-blocking too: the same 55 us where its
    // blocking one takes 17). Every rank splits the joined communicator into
    // a blocking one, all of them at once (they are all here), within what
    // is left of the timeout, and keeps that.
    int nonblocking = 1;
    if (nc->ncclCommSplit) {
        NcclConfig blocking = config;
        blocking.blocking = 1;
        ncclComm_t fast = nullptr;
        ncclResult_t rs;
        {
            KeepCurrent keep;
            CUresult cr = drv().cuCtxSetCurrent(ctx->cu);
            rs = cr == CUDA_SUCCESS ? nc->ncclCommSplit(comm, 0, rank, &fast, &blocking) : ncclResult_t(-1);
            // The parent is non-blocking: the split may go on after the
            // call returns (and write the new communicator then), so the
            // parent is settled first, then the new one.
            auto left = [&]() -> uint32_t {
                uint64_t spent = now_ms() - start;
                return timeout_ms == UINT32_MAX ? UINT32_MAX
                       : spent >= timeout_ms    ? 0
                                                : (uint32_t)(timeout_ms - spent);
            };
            if (rs == kNcclInProgress || rs == 0) rs = settle(nc, comm, left());
            if (rs == 0 && !fast) rs = kNcclInvalidUsage;
            if (rs == 0) rs = settle(nc, fast, left());
        }
        if (rs != 0) {
            cw_status st = rs == kNcclInProgress
                               ? fail(CW_ERROR_TIMEOUT,
                                      "rank %d of %d: the ranks joined, but not every rank made the blocking "
                                      "communicator (ncclCommSplit) within %u ms",
                                      rank, nranks, timeout_ms)
                               : fail_nccl(nc, rs, "ncclCommSplit", comm, rank);
            KeepCurrent keep;
            if (fast) (void)nc->ncclCommAbort(fast);
            (void)nc->ncclCommAbort(comm);
            free(c);
            return st;
        }
        {
            KeepCurrent keep;
            ncclResult_t rf = nc->ncclCommFinalize ? nc->ncclCommFinalize(comm) : 0;
            if (rf == kNcclInProgress) rf = settle(nc, comm, UINT32_MAX);
            ncclResult_t rd = nc->ncclCommDestroy(comm);
            if (rf != 0 || (rd != 0 && rd != kNcclInProgress))
                log(CW_LOG_WARNING, "%s: rank %d: the joining communicator's teardown answered %d / %d",
                    current_api(), rank, rf, rd);
        }
        comm = fast;
        nonblocking = 0;
    } else {
        static std::atomic<int> told{0};
        if (!told.exchange(1))
            log(CW_LOG_WARNING,
                "%s: %s has no ncclCommSplit (NCCL 2.18): communicators by rank stay non-blocking, which costs "
                "NCCL some 40 us a collective call",
                current_api(), g_nccl_name);
    }
    c->n = 1;
    c->nranks = nranks;
    c->first = rank;
    c->nonblocking = nonblocking;
    c->nccl = nc;
    c->comms[0] = comm;
    c->ctx[0] = ctx;
    context_retain(ctx);
    room.publish(c);
    *out = c;
    return CW_SUCCESS;
}

}  // namespace multi
}  // namespace cw
