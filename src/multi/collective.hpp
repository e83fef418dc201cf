/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: collectives through NCCL, opened at run time.
//
// NCCL is not a link dependency: its few entry points are resolved with
// dlsym from the path in CUWEAVE_LIBNCCL or "libnccl.so.2", with the C ABI
// declared in collective.cpp (NCCL's types are plain ints and pointers).
#pragma once

#include "core/stream.hpp"
#include "cuweave/collective.h"

namespace cw {
namespace multi {
struct Nccl;
typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;  // 0: ncclSuccess
}  // namespace multi
}  // namespace cw

struct cw_comm {
    uint32_t tag;
    int n;       // ranks held here (local): comms[0..n), ctx[0..n)
    int nranks;  // ranks in all (every process)
    int first;   // global rank of local rank 0
    int nonblocking;  // made by rank (ncclCommInitRankConfig, blocking 0): calls may answer ncclInProgress
    const cw::multi::Nccl *nccl;
    cw::multi::ncclComm_t comms[CW_MAX_DEVICES];
    cw_context *ctx[CW_MAX_DEVICES];  // retained
};

namespace cw {
namespace multi {

cw_status nccl_version(int *version);
// One rank per context (primary contexts of distinct devices: checked here),
// all in this process (ncclCommInitAll).
cw_status comm_create(cw_context *const *ctxs, int n, cw_comm **out);
// ncclGetUniqueId.
cw_status comm_id_generate(cw_comm_id *out);
// One rank of nranks in this process, joined by id (non-blocking init,
// polled up to timeout_ms; aborted on timeout).
cw_status comm_create_rank(cw_context *ctx, const cw_comm_id *id, int nranks, int rank, uint32_t timeout_ms,
                           cw_comm **out);
// bootstrap.cpp: the id exchanged through a file or TCP, then
// comm_create_rank (s already checked: reserved bytes zero).
cw_status comm_bootstrap(cw_context *ctx, const cw_comm_bootstrap_settings *s, cw_comm **out);
void comm_destroy(cw_comm *c);
void comm_info(const cw_comm *c, cw_comm_info *info);
// A global rank (or root) of the communicator; `what` names it in the detail.
cw_status check_rank(const cw_comm *c, int rank, const char *what);
// Every rank's part in one NCCL group: all-reduce (root < 0) or broadcast
// from root; send, recv and streams hold one entry per rank.
cw_status collective_all(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count, cw_dtype dtype,
                         cw_reduce_op op, int root, cw_stream *const *streams);
// One rank's part (the caller groups the ranks' calls).
cw_status collective_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype,
                          cw_reduce_op op, int root, cw_stream *s);
cw_status group_begin();
cw_status group_end();

}  // namespace multi
}  // namespace cw
