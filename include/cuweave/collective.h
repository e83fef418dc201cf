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
 * primary ones (cw_context_create, or a cw_device_set).
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
 * can take a second or more). Returns CW_SUCCESS;
 * CW_ERROR_INVALID_ARGUMENT (n < 1 or above CW_MAX_DEVICES, ctxs NULL, a
 * NULL entry, a context that is not a primary one, two on one device: the
 * detail names the index); CW_ERROR_INVALID_HANDLE; CW_ERROR_NOT_SUPPORTED
 * (no NCCL); CW_ERROR_OUT_OF_MEMORY; CW_ERROR_DRIVER (NCCL failed: its
 * error text is in the detail). Nothing is left made on failure.
 */
CW_API cw_status cw_comm_create(cw_comm **out, cw_context *const *ctxs, int n);

/* Destroys the communicator (ncclCommDestroy of each rank) after the work
 * already enqueued; sets *c to NULL; accepts NULL. The contexts' references
 * held by the communicator are dropped. */
CW_API void cw_comm_destroy(cw_comm **c);

/* The number of ranks. */
CW_API cw_status cw_comm_size(const cw_comm *c, int *n);

/* Rank `rank`'s context (borrowed). */
CW_API cw_status cw_comm_get_context(const cw_comm *c, int rank, cw_context **ctx);

/*
 * All-reduce over every rank: recv[i] (count elements of dtype, device
 * memory of rank i) receives op over all ranks' send[i]; send[i] == recv[i]
 * is in place. Enqueued on streams[i] for each rank, in one NCCL group.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (a NULL array, a 0 address,
 * an unknown dtype or op, a stream of another device than its rank's: the
 * detail names the rank); CW_ERROR_INVALID_HANDLE; CW_ERROR_DRIVER (NCCL's
 * error, in the detail). count 0 does nothing.
 */
CW_API cw_status cw_comm_all_reduce(cw_comm *c, const unsigned long long *send, const unsigned long long *recv,
                                    size_t count, cw_dtype dtype, cw_reduce_op op, cw_stream *const *streams);

/*
 * Broadcast: every rank's recv[i] receives the root's send[root] (count
 * elements). Only send[root] is read (the others may be 0). Enqueued on
 * streams[i], in one NCCL group. Errors as cw_comm_all_reduce, and
 * CW_ERROR_INVALID_ARGUMENT for a root out of range.
 */
CW_API cw_status cw_comm_broadcast(cw_comm *c, const unsigned long long *send, const unsigned long long *recv,
                                   size_t count, cw_dtype dtype, int root, cw_stream *const *streams);

/*
 * One rank's part of an all-reduce or a broadcast, for one host thread per
 * rank (each thread calls for its rank), or for one thread between
 * cw_comm_group_begin and cw_comm_group_end. Outside a group, one thread
 * calling for several ranks in turn would deadlock inside NCCL: use the
 * array calls then. For the broadcast, send is read at the root only.
 */
CW_API cw_status cw_comm_all_reduce_rank(cw_comm *c, int rank, unsigned long long send, unsigned long long recv,
                                         size_t count, cw_dtype dtype, cw_reduce_op op, cw_stream *s);
CW_API cw_status cw_comm_broadcast_rank(cw_comm *c, int rank, unsigned long long send, unsigned long long recv,
                                        size_t count, cw_dtype dtype, int root, cw_stream *s);

/* ncclGroupStart / ncclGroupEnd: the _rank calls between them are issued
 * together at the end. Per thread; they nest. CW_ERROR_NOT_SUPPORTED
 * without NCCL; CW_ERROR_DRIVER for NCCL's error at the end. */
CW_API cw_status cw_comm_group_begin(void);
CW_API cw_status cw_comm_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_COLLECTIVE_H */
