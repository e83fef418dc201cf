/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/collective.h (NCCL communicators).
#include <string.h>

#include "api/api.hpp"
#include "multi/collective.hpp"

using namespace cw;

namespace {

cw_status check_dtype(cw_dtype dtype) {
    if ((int)dtype < CW_INT8 || (int)dtype > CW_BFLOAT16)
        return fail(CW_ERROR_INVALID_ARGUMENT, "dtype %d is not a cw_dtype", (int)dtype);
    return CW_SUCCESS;
}

cw_status check_op(cw_reduce_op op) {
    if ((int)op < CW_SUM || (int)op > CW_AVG) return fail(CW_ERROR_INVALID_ARGUMENT, "op %d is not a cw_reduce_op", (int)op);
    return CW_SUCCESS;
}

void bootstrap_defaults(cw_comm_bootstrap_settings *s) {
    memset(s, 0, sizeof *s);
    s->rank = -1;
    s->world_size = 0;
    s->timeout_ms = 60000;
}

}  // namespace

static_assert(sizeof(void *) != 8 || sizeof(cw_comm_info) == 584, "cw_comm_info: 584 bytes on LP64");
static_assert(sizeof(cw_comm_id) == 128, "cw_comm_id: 128 bytes");
static_assert(sizeof(void *) != 8 || sizeof(cw_comm_bootstrap_settings) == 88,
              "cw_comm_bootstrap_settings: 88 bytes on LP64");

extern "C" {

CW_API cw_status cw_comm_create(cw_comm **out, cw_context *const *ctxs, int n) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(ctxs != NULL);
    CW_CHECK_ARG(n >= 1 && n <= CW_MAX_DEVICES);
    for (int i = 0; i < n; i++) CW_CHECK_HANDLE_AT(ctxs, i);
    return multi::comm_create(ctxs, n, out);
}

CW_API cw_status cw_comm_id_generate(cw_comm_id *out) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    return multi::comm_id_generate(out);
}

CW_API cw_status cw_comm_create_rank(cw_comm **out, cw_context *ctx, const cw_comm_id *id, int nranks, int rank,
                                     uint32_t timeout_ms) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    CW_CHECK_ARG(id != NULL);
    return multi::comm_create_rank(ctx, id, nranks, rank, timeout_ms, out);
}

CW_API void cw_comm_bootstrap_settings_default(cw_comm_bootstrap_settings *s) {
    if (s) bootstrap_defaults(s);
}

CW_API cw_status cw_comm_bootstrap(cw_comm **out, cw_context *ctx, const cw_comm_bootstrap_settings *s) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_HANDLE(ctx);
    cw_comm_bootstrap_settings d;
    if (!s) {
        bootstrap_defaults(&d);
        s = &d;
    }
    for (size_t i = 0; i < sizeof s->reserved; i++) CW_CHECK_ARG(s->reserved[i] == 0);
    return multi::comm_bootstrap(ctx, s, out);
}

CW_API void cw_comm_destroy(cw_comm **pc) {
    CW_ENTRY;
    if (!pc || !*pc) return;
    cw_comm *c = *pc;
    *pc = nullptr;
    if (!live(c)) {
        log(CW_LOG_WARNING, "%s: *c is not a live cw_comm; nothing destroyed", current_api());
        return;
    }
    multi::comm_destroy(c);
}

CW_API cw_status cw_comm_get_info(const cw_comm *c, cw_comm_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(c);
    CW_CHECK_ARG(info != NULL);
    multi::comm_info(c, info);
    return CW_SUCCESS;
}

CW_API cw_status cw_comm_all_reduce(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count,
                                    cw_dtype dtype, cw_reduce_op op, cw_stream *const *streams) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(collective_all_reduce, count);
    CW_CHECK_HANDLE(c);
    CW_CHECK_ARG(send != NULL && recv != NULL && streams != NULL);
    CW_TRY(check_dtype(dtype));
    CW_TRY(check_op(op));
    return multi::collective_all(c, send, recv, count, dtype, op, -1, streams);
}

CW_API cw_status cw_comm_broadcast(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count,
                                   cw_dtype dtype, int root, cw_stream *const *streams) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(collective_broadcast, count);
    CW_CHECK_HANDLE(c);
    CW_CHECK_ARG(send != NULL && recv != NULL && streams != NULL);
    CW_TRY(check_dtype(dtype));
    CW_TRY(multi::check_rank(c, root, "root"));
    return multi::collective_all(c, send, recv, count, dtype, CW_SUM, root, streams);
}

CW_API cw_status cw_comm_all_reduce_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count,
                                         cw_dtype dtype, cw_reduce_op op, cw_stream *s) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(collective_all_reduce, count);
    CW_CHECK_HANDLE(c);
    CW_TRY(check_dtype(dtype));
    CW_TRY(check_op(op));
    return multi::collective_rank(c, rank, send, recv, count, dtype, op, -1, s);
}

CW_API cw_status cw_comm_broadcast_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count,
                                        cw_dtype dtype, int root, cw_stream *s) {
    CW_ENTRY;
    CW_NVTX_RANGE_N(collective_broadcast, count);
    CW_CHECK_HANDLE(c);
    CW_TRY(check_dtype(dtype));
    CW_TRY(multi::check_rank(c, root, "root"));
    return multi::collective_rank(c, rank, send, recv, count, dtype, CW_SUM, root, s);
}

CW_API cw_status cw_comm_group_begin(void) {
    CW_ENTRY;
    CW_NVTX_MARK_N(collective_group_begin, 0);
    return multi::group_begin();
}

CW_API cw_status cw_comm_group_end(void) {
    CW_ENTRY;
    CW_NVTX_MARK_N(collective_group_end, 0);
    return multi::group_end();
}

}  // extern "C"
