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
#include <dlfcn.h>
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

struct Nccl {
#define CW_NCCL_MEMBER_(name, ret, params) ret(*name) params;
    CW_NCCL_ENTRIES(CW_NCCL_MEMBER_)
#undef CW_NCCL_MEMBER_
    const char *(*ncclGetLastError)(ncclComm_t comm);  // optional (NCCL 2.13)
};

namespace {

Nccl g_nccl;
std::atomic<int> g_nccl_state{0};  // 0 not tried, 1 loaded, 2 failed
std::mutex g_nccl_mutex;
char g_nccl_error[512];

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

// A rank's stream: live and on the rank's device.
cw_status check_rank_stream(const cw_comm *c, int rank, const cw_stream *s) {
    if (!s) return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d is NULL", rank);
    if (!live(s)) return fail(CW_ERROR_INVALID_HANDLE, "the stream of rank %d is not a live cw_stream", rank);
    if (s->ctx->device != c->ctx[rank]->device)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d is on device %d, the rank on device %d", rank,
                    s->ctx->ordinal, c->ctx[rank]->ordinal);
    if (s->is_null)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the stream of rank %d wraps a legacy stream: give NCCL a real one",
                    rank);
    return CW_SUCCESS;
}


// Issues one rank's part (all-reduce when root < 0, else broadcast).
cw_status issue(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype, cw_reduce_op op,
                int root, cw_stream *s) {
    const Nccl *n = c->nccl;
    ncclResult_t r;
    const char *call;
    if (root < 0) {
        call = "ncclAllReduce";
        r = n->ncclAllReduce(reinterpret_cast<const void *>(send), reinterpret_cast<void *>(recv), count, (int)dtype,
                             (int)op, c->comms[rank], s->cu);
    } else {
        call = "ncclBroadcast";
        r = n->ncclBroadcast(reinterpret_cast<const void *>(send), reinterpret_cast<void *>(recv), count, (int)dtype,
                             root, c->comms[rank], s->cu);
    }
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, call, c->comms[rank], rank);
}

}  // namespace

// A rank (or root) of the communicator: what names it in the detail.
cw_status check_rank(const cw_comm *c, int rank, const char *what) {
    if (rank < 0 || rank >= c->n)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s %d, but the communicator has %d ranks", what, rank, c->n);
    return CW_SUCCESS;
}

// Every rank's part in one NCCL group.
cw_status collective_all(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count, cw_dtype dtype,
                         cw_reduce_op op, int root, cw_stream *const *streams) {
    for (int i = 0; i < c->n; i++) {
        CW_TRY(check_rank_stream(c, i, streams[i]));
        if (recv[i] == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "recv[%d] is 0", i);
        if ((root < 0 || root == i) && send[i] == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "send[%d] is 0", i);
    }
    if (count == 0) return CW_SUCCESS;
    const Nccl *n = c->nccl;
    KeepCurrent keep;
    ncclResult_t r = n->ncclGroupStart();
    if (r != 0) return fail_nccl(n, r, "ncclGroupStart", nullptr, -1);
    cw_status st = CW_SUCCESS;
    for (int i = 0; i < c->n && st == CW_SUCCESS; i++)
        st = issue(c, i, send[i], recv[i], count, dtype, op, root, streams[i]);
    // The group is always closed, also after a failed part.
    r = n->ncclGroupEnd();
    if (st == CW_SUCCESS && r != 0) st = fail_nccl(n, r, "ncclGroupEnd", c->comms[0], -1);
    return st;
}

cw_status collective_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype,
                          cw_reduce_op op, int root, cw_stream *s) {
    CW_TRY(check_rank(c, rank, "rank"));
    CW_TRY(check_rank_stream(c, rank, s));
    CW_CHECK_ARG(recv != 0);
    if ((root < 0 || root == rank) && send == 0) return fail(CW_ERROR_INVALID_ARGUMENT, "send is 0");
    if (count == 0) return CW_SUCCESS;
    KeepCurrent keep;
    return issue(c, rank, send, recv, count, dtype, op, root, s);
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
            ncclResult_t r = c->nccl->ncclCommDestroy(c->comms[i]);
            if (r != 0) (void)fail_nccl(c->nccl, r, "ncclCommDestroy", nullptr, i);
        }
    }
    for (int i = 0; i < c->n; i++) context_release(c->ctx[i]);
    handle_free(c);
}

void comm_info(const cw_comm *c, cw_comm_info *info) {
    memset(info, 0, sizeof *info);
    info->size = c->n;
    for (int i = 0; i < c->n; i++) info->contexts[i] = c->ctx[i];
}

cw_status group_begin() {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    ncclResult_t r = n->ncclGroupStart();
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, "ncclGroupStart", nullptr, -1);
}

cw_status group_end() {
    const Nccl *n = nullptr;
    CW_TRY(ensure_nccl(&n));
    KeepCurrent keep;
    ncclResult_t r = n->ncclGroupEnd();
    return r == 0 ? CW_SUCCESS : fail_nccl(n, r, "ncclGroupEnd", nullptr, -1);
}

}  // namespace multi
}  // namespace cw
