/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: collectives over the GPUs of one host, through NCCL.
 *
 * cuweave does not implement collectives: it drives NCCL, the existing
 * engine, on cuweave streams. NCCL is opened at run time as the driver is
 * (no link dependency): the path in CUWEAVE_LIBNCCL, else "libnccl.so.2".
 * Without it every call here returns CW_ERROR_NOT_SUPPORTED, with dlopen's
 * reason in the detail.
 *
 * A communicator (cw_comm) holds one NCCL rank per context, all in this
 * process (ncclCommInitAll): rank i is ctxs[i]. NCCL runs on each device's
 * primary context (it uses the CUDA runtime), so the contexts must be
 * primary ones (cw_context_create, or a cw_device_group's).
 *
 * Ordering: a collective is enqueued on the cuweave streams given, one per
 * rank, each a stream of that rank's device, and orders with everything else
 * through them: cw_stream_wait before (producers) and after (consumers),
 * futures on them, buffers' uses. NCCL's kernels of one collective wait for
 * one another across devices, so all ranks' parts must be issued: by one
 * thread with the array calls (cw_comm_all_reduce, cw_comm_broadcast, which
 * group them), or by one thread per rank with the _rank calls, or by one
 * thread with the _rank calls between cw_comm_group_begin and
 * cw_comm_group_end.
 *
 * NVLink multicast (NVLS): cuweave never calls cuMulticastCreate. Where
 * NCCL may use it and the machine forbids it, set NCCL_NVLS_ENABLE=0 in the
 * environment before the first call here (cuweave's tests and benchmarks do).
 *
 * Each call makes no context current behind the caller's back: what was
 * current before is current after (NCCL's own cudaSetDevice included).
 * Threading: a communicator's calls for one rank from one thread at a time.
 */
#ifndef CUWEAVE_COLLECTIVE_H
#define CUWEAVE_COLLECTIVE_H

#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/multi.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_comm cw_comm;

/* Element types (the values are NCCL's). */
typedef enum cw_dtype {
    CW_INT8 = 0,
    CW_UINT8 = 1,
    CW_INT32 = 2,
    CW_UINT32 = 3,
    CW_INT64 = 4,
    CW_UINT64 = 5,
    CW_FLOAT16 = 6,
    CW_FLOAT32 = 7,
    CW_FLOAT64 = 8,
    CW_BFLOAT16 = 9
} cw_dtype;

/* Reductions (the values are NCCL's). */
typedef enum cw_reduce_op { CW_SUM = 0, CW_PROD = 1, CW_MAX = 2, CW_MIN = 3, CW_AVG = 4 } cw_reduce_op;

/*
 * Makes a communicator of n ranks, rank i on ctxs[i] (ncclCommInitAll; it
 * can take a second or more). The communicator holds a reference to each
 * context; destroy it with cw_comm_destroy. Nothing is left made on
 * failure.
 * Returns:
 *   CW_SUCCESS                 *out is the new communicator.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctxs is NULL; n < 1 or above
 *                              CW_MAX_DEVICES; a NULL entry, a context that
 *                              is not a primary one, two on one device (the
 *                              detail names the index).
 *   CW_ERROR_INVALID_HANDLE    an entry is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     NCCL could not be loaded (the detail says
 *                              why).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            NCCL failed (its error text is in the
 *                              detail).
 */
CW_API cw_status cw_comm_create(cw_comm **out, cw_context *const *ctxs, int n);

/*
 * Destroys the communicator (ncclCommDestroy of each rank) after the work
 * already enqueued, and drops its references to the contexts; sets *c to
 * NULL; accepts NULL and a NULL *c. A handle that is not a live
 * communicator is ignored (logged at CW_LOG_WARNING; *c is still set to
 * NULL). A failure of NCCL is logged (CW_LOG_ERROR).
 * Returns: nothing.
 */
CW_API void cw_comm_destroy(cw_comm **c);

typedef struct cw_comm_info {
    int size;                             /* ranks */
    cw_context *contexts[CW_MAX_DEVICES]; /* rank i's context (borrowed: valid while the communicator
                                             lives), i < size */
    uint8_t reserved[64];
} cw_comm_info;

/*
 * Fills *info: the number of ranks and each rank's context (the entries
 * from size on are NULL). No NCCL or driver call.
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  c or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    c is not a live communicator.
 */
CW_API cw_status cw_comm_get_info(const cw_comm *c, cw_comm_info *info);

/*
 * All-reduce over every rank from one thread: recv[i] (count elements of
 * dtype, device memory of rank i) receives op over all ranks' send[i];
 * send[i] == recv[i] is in place. Enqueued on streams[i] for each rank, in
 * one NCCL group. Every rank's arguments are checked before any part is
 * issued, so a refusal leaves nothing queued for any rank (unlike a loop of
 * cw_comm_all_reduce_rank calls in a group, whose parts issued before a
 * refused one would still run at cw_comm_group_end and wait forever for
 * the missing part). count 0 does nothing (the arguments are still
 * checked).
 * Returns:
 *   CW_SUCCESS                 every rank's part is enqueued.
 *   CW_ERROR_INVALID_ARGUMENT  c, send, recv or streams is NULL; a 0
 *                              address; an unknown dtype or op; a NULL
 *                              stream, a stream of another device than its
 *                              rank's, or a wrapped legacy stream (the
 *                              detail names the rank).
 *   CW_ERROR_INVALID_HANDLE    c or a stream is not live.
 *   CW_ERROR_DRIVER            NCCL failed (its error, in the detail).
 */
CW_API cw_status cw_comm_all_reduce(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count,
                                    cw_dtype dtype, cw_reduce_op op, cw_stream *const *streams);

/*
 * Broadcast from one thread: every rank's recv[i] receives the root's
 * send[root] (count elements). Only send[root] is read (the others may be
 * 0). Enqueued on streams[i], in one NCCL group, after every rank's
 * arguments are checked (as cw_comm_all_reduce).
 * Returns: as cw_comm_all_reduce, and CW_ERROR_INVALID_ARGUMENT for a root
 * out of range.
 */
CW_API cw_status cw_comm_broadcast(cw_comm *c, const cw_devptr *send, const cw_devptr *recv, size_t count,
                                   cw_dtype dtype, int root, cw_stream *const *streams);

/*
 * One rank's part of an all-reduce, for one host thread per rank (each
 * thread calls for its rank), or for one thread between
 * cw_comm_group_begin and cw_comm_group_end. Outside a group, one thread
 * calling for several ranks in turn would deadlock inside NCCL: use the
 * array call then. Inside a group, a part that cuweave refuses (its
 * arguments) never reaches NCCL, so the parts issued before it still run
 * at cw_comm_group_end and wait for it forever: check every rank's
 * arguments first, or use cw_comm_all_reduce. count 0 does nothing.
 * Returns:
 *   CW_SUCCESS                 the rank's part is enqueued (inside a group:
 *                              queued until cw_comm_group_end).
 *   CW_ERROR_INVALID_ARGUMENT  c or s is NULL; rank out of range; send or
 *                              recv is 0; an unknown dtype or op; s is on
 *                              another device than the rank's, or wraps a
 *                              legacy stream.
 *   CW_ERROR_INVALID_HANDLE    c or s is not live.
 *   CW_ERROR_DRIVER            NCCL failed (its error, in the detail).
 */
CW_API cw_status cw_comm_all_reduce_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count,
                                         cw_dtype dtype, cw_reduce_op op, cw_stream *s);

/*
 * One rank's part of a broadcast from root, with the rules of
 * cw_comm_all_reduce_rank. send is read at the root only (may be 0
 * elsewhere).
 * Returns: as cw_comm_all_reduce_rank, and CW_ERROR_INVALID_ARGUMENT for a
 * root out of range.
 */
CW_API cw_status cw_comm_broadcast_rank(cw_comm *c, int rank, cw_devptr send, cw_devptr recv, size_t count,
                                        cw_dtype dtype, int root, cw_stream *s);

/*
 * ncclGroupStart: the _rank calls made until the matching
 * cw_comm_group_end are issued together at its end. Per thread; groups
 * nest (only the outermost end issues).
 * Returns:
 *   CW_SUCCESS                 the group is open on this thread.
 *   CW_ERROR_NOT_SUPPORTED     NCCL could not be loaded.
 *   CW_ERROR_DRIVER            NCCL failed (its error, in the detail).
 */
CW_API cw_status cw_comm_group_begin(void);

/*
 * ncclGroupEnd: closes the group cw_comm_group_begin opened on this thread
 * (the outermost one issues the calls made in it). A part NCCL refused
 * inside the group fails the group: its other parts are withdrawn.
 * Returns:
 *   CW_SUCCESS                 the group is closed (and, outermost, issued).
 *   CW_ERROR_NOT_SUPPORTED     NCCL could not be loaded.
 *   CW_ERROR_DRIVER            NCCL failed: no group open on this thread,
 *                              or a part of the group was refused (its
 *                              error, in the detail).
 */
CW_API cw_status cw_comm_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_COLLECTIVE_H */
