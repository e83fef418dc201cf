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
 * Communicators by rank (one process per GPU, one machine or several):
 * cw_comm_create_rank (or cw_comm_bootstrap) makes a communicator that
 * holds one rank of many, the others in other processes. On it every call
 * works as on the first kind, over the ranks it holds ("local" ranks):
 *  - the array calls (cw_comm_all_reduce, cw_comm_broadcast) take arrays
 *    of local_size entries (cw_comm_info), entry i for global rank
 *    first_rank + i: one entry for a communicator by rank;
 *  - the _rank calls take a global rank, which must be one held here (the
 *    rank given at creation);
 *  - a broadcast's root is a global rank, in [0, size); send is read only
 *    in the root's process;
 *  - every process must issue its part of each collective, in the same
 *    order, as every rank must in one process.
 * cw_comm_get_info reports size (all ranks), local_size and first_rank.
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

/* The bytes of an NCCL unique id (ncclUniqueId, NCCL_UNIQUE_ID_BYTES). */
#define CW_COMM_ID_BYTES 128

/*
 * The id that the ranks of one communicator share across processes (and
 * machines): made once, by one process (cw_comm_id_generate), and handed
 * to every other process by any means (a file, a socket, MPI, an
 * environment variable in hex); then each process calls
 * cw_comm_create_rank with it. Opaque bytes (NCCL's ncclUniqueId); an id
 * serves one communicator.
 */
typedef struct cw_comm_id {
    uint8_t bytes[CW_COMM_ID_BYTES];
} cw_comm_id;

/*
 * Makes a new id (ncclGetUniqueId). With the real NCCL the id holds the
 * address where this process will answer the other ranks' first contact,
 * so the process that makes it should be one of the ranks (usually rank 0)
 * and stay alive until every rank has joined. Thread-safe.
 * Returns:
 *   CW_SUCCESS                 *out holds the id.
 *   CW_ERROR_INVALID_ARGUMENT  out is NULL.
 *   CW_ERROR_NOT_SUPPORTED     NCCL could not be loaded, or it lacks
 *                              ncclGetUniqueId (the detail names the
 *                              library).
 *   CW_ERROR_DRIVER            NCCL failed (its error, in the detail).
 */
CW_API cw_status cw_comm_id_generate(cw_comm_id *out);

/*
 * Makes this process's rank of a communicator of nranks ranks spread over
 * processes (one process per GPU, on one machine or several): rank `rank`,
 * on ctx (a primary context; NCCL runs on it). Every rank calls it with the
 * same id and nranks and its own rank, in its own process (or thread);
 * the call returns when all nranks have joined. The join runs in NCCL's
 * non-blocking mode (ncclCommInitRankConfig with blocking 0, polled with
 * ncclCommGetAsyncError), so a rank that never arrives ends in
 * CW_ERROR_TIMEOUT after timeout_ms (0: one check) instead of a hang: the
 * half-made communicator is aborted (ncclCommAbort) and nothing is left.
 * The communicator holds one local rank: see "Communicators by rank"
 * below for what the array and _rank calls mean on it. It holds a
 * reference to ctx; destroy it with cw_comm_destroy. Needs NCCL 2.14 or
 * later (the non-blocking entries).
 * Returns:
 *   CW_SUCCESS                 *out is this process's rank.
 *   CW_ERROR_INVALID_ARGUMENT  out, ctx or id is NULL; nranks < 1; rank
 *                              outside [0, nranks); ctx is not a primary
 *                              context; NCCL refused the join (another
 *                              process joined with a different nranks, or
 *                              the same rank: NCCL's invalid usage or
 *                              argument, its words in the detail).
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     NCCL could not be loaded, or it lacks the
 *                              non-blocking entries (ncclCommInitRankConfig,
 *                              ncclCommGetAsyncError, ncclCommAbort: the
 *                              detail names the library and the entry).
 *   CW_ERROR_TIMEOUT           not every rank joined within timeout_ms (the
 *                              detail says which rank waited, and how long).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            NCCL failed otherwise (a peer died or could
 *                              not be reached: its error, in the detail).
 */
CW_API cw_status cw_comm_create_rank(cw_comm **out, cw_context *ctx, const cw_comm_id *id, int nranks, int rank,
                                     uint32_t timeout_ms);

/*
 * How cw_comm_bootstrap finds its rank, the world size and rank 0. Each
 * field left at its default is taken from the environment, as a launcher
 * (a script, torchrun-style tools, a job scheduler's wrapper) would set it:
 *   CUWEAVE_RANK        this process's rank (0 .. world size - 1);
 *   CUWEAVE_WORLD_SIZE  the number of ranks;
 *   CUWEAVE_COMM_FILE   a path every rank can read (one host, or a shared
 *                       file system): rank 0 writes the id there;
 *   CUWEAVE_COMM_ADDR   "host:port" of rank 0 (several machines, or one):
 *                       rank 0 listens there, the others connect to it.
 *                       "[v6addr]:port" for IPv6.
 *   CUWEAVE_COMM_TOKEN  (TCP, optional) a secret every rank shares, 1 to 256
 *                       printable bytes without spaces: rank 0 gives the id
 *                       only to a peer that presents it. Unset or empty:
 *                       none, and any process that can reach rank 0's port
 *                       can take a rank (docs/multi-gpu.md, "Trust").
 * Exactly one of file and addr must end up set.
 */
typedef struct cw_comm_bootstrap_settings {
    int rank;            /* -1 (default): CUWEAVE_RANK */
    int world_size;      /* 0 (default): CUWEAVE_WORLD_SIZE */
    const char *file;    /* NULL (default): CUWEAVE_COMM_FILE (NULL too when addr is set) */
    const char *addr;    /* NULL (default): CUWEAVE_COMM_ADDR (NULL too when file is set) */
    uint32_t timeout_ms; /* for the whole bootstrap, the exchange and the join; default 60000 */
    const char *token;   /* NULL (default): CUWEAVE_COMM_TOKEN (TCP only; none when unset or empty) */
    uint8_t reserved[48];
} cw_comm_bootstrap_settings;

/*
 * Fills *s with the defaults (rank -1, world_size 0, file and addr NULL:
 * all from the environment at cw_comm_bootstrap; timeout_ms 60000).
 * Returns: nothing (a NULL s does nothing).
 */
CW_API void cw_comm_bootstrap_settings_default(cw_comm_bootstrap_settings *s);

/*
 * The common bootstrap in one call, the same code on every rank: rank 0
 * makes the id (cw_comm_id_generate) and publishes it with the world size,
 * the others fetch it, and every rank joins (cw_comm_create_rank on ctx).
 *  - file: rank 0 writes the id to a temporary file beside the path (a
 *    name no one can guess, created mode 0600, never through a link) and
 *    renames it there (readers never see half a file); the others poll for
 *    the path until it appears, and accept only a regular file of their own
 *    user there (not a link, a FIFO or another user's file: refused at
 *    once, without waiting). Rank 0 removes the file once every rank has
 *    joined. Use a fresh path for each run, in a directory other users
 *    cannot write: a rank that finds a file left by another run joins that
 *    run's id and ends in CW_ERROR_TIMEOUT.
 *  - addr: rank 0 listens on host:port (bound to that address only: give
 *    the address of rank 0's machine that the others can reach, 127.0.0.1
 *    on one host) and serves every connection at once, each within 5 s of
 *    its accept (one that says nothing or dribbles is dropped then). It
 *    never stops accepting: it holds 64 connections, and past them the
 *    oldest that has not sent its hello after 200 ms makes room for the
 *    next (one that finds only younger ones is closed at once), so a flood
 *    of connections that say nothing does not keep a rank out. It
 *    answers each other rank of its world size (with the token, when one
 *    is set) once, and refuses, telling the peer why, a hello that is
 *    malformed, of another world size, without the token or with another,
 *    or for a rank already answered (the first hello of a rank gets the id:
 *    without a token rank 0 cannot tell an impostor); nothing a peer sends
 *    ends rank 0's call. It closes the socket once every rank is answered.
 *    The others connect, retrying until rank 0 listens, and again when it
 *    closes a connection without a reply.
 * On several machines: the same program on each, CUWEAVE_RANK and
 * CUWEAVE_WORLD_SIZE set per process and CUWEAVE_COMM_ADDR the same
 * everywhere (the address of rank 0's machine and a free port), and
 * CUWEAVE_COMM_TOKEN one secret everywhere where others can reach it. The
 * timeout (settings.timeout_ms) bounds the whole call, the lookup of a
 * host name in the address too (made on a thread of its own, which is left
 * to finish by itself when its name server does not answer in time; an
 * address by number needs none). s NULL: every setting from the
 * environment. Blocking; thread-safe (one call per rank).
 * Returns:
 *   CW_SUCCESS                 *out is this process's rank.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; s has nonzero reserved
 *                              bytes; a setting missing or malformed in
 *                              both s and the environment (the detail
 *                              names the variable and its value, never a
 *                              token's bytes); both or neither of file and
 *                              addr; rank outside [0, world_size); a rank
 *                              other than 0 that rank 0 refused (another
 *                              world size, a rank already answered, the
 *                              token missing or wrong: rank 0's reason in
 *                              the detail), or a reply or file that is not
 *                              an id of this world size (a link, a FIFO,
 *                              another user's file); as cw_comm_create_rank.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     as cw_comm_create_rank.
 *   CW_ERROR_TIMEOUT           the id or the peers did not come within the
 *                              timeout, or the host name in the address did
 *                              not resolve within it (the detail says what
 *                              was awaited;
 *                              rank 0's counts the connections it refused
 *                              or dropped, with the last reason).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a file or socket call failed (the detail has
 *                              the call and errno's text), or NCCL failed
 *                              (as cw_comm_create_rank).
 */
CW_API cw_status cw_comm_bootstrap(cw_comm **out, cw_context *ctx, const cw_comm_bootstrap_settings *s);

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
    int size;                             /* ranks of the whole communicator (every process) */
    cw_context *contexts[CW_MAX_DEVICES]; /* the context of local rank i, global rank first_rank + i
                                             (borrowed: valid while the communicator lives),
                                             i < local_size */
    int local_size;                       /* ranks held by this communicator in this process:
                                             size (cw_comm_create) or 1 (cw_comm_create_rank) */
    int first_rank;                       /* global rank of local rank 0: 0 (cw_comm_create) or
                                             the rank given to cw_comm_create_rank */
    uint8_t reserved[56];
} cw_comm_info;

/*
 * Fills *info: the number of ranks, the ranks held here and their
 * contexts (the entries from local_size on are NULL). No NCCL or driver
 * call.
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  c or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    c is not a live communicator.
 */
CW_API cw_status cw_comm_get_info(const cw_comm *c, cw_comm_info *info);

/*
 * All-reduce over every rank from one thread: recv[i] (count elements of
 * dtype, device memory of local rank i) receives op over all ranks' send
 * buffers; send[i] == recv[i] is in place. The arrays have one entry per
 * local rank (cw_comm_info.local_size: every rank for cw_comm_create, one
 * for a communicator by rank). Enqueued on streams[i] for each rank, in
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
 * Broadcast from one thread: every local rank's recv[i] receives the
 * root's send buffer (count elements); root is a global rank. Only the
 * root's entry, send[root - first_rank], is read, in the process that
 * holds the root (the others may be 0). Enqueued on streams[i], in one NCCL group, after every rank's
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
 *   CW_ERROR_INVALID_ARGUMENT  c or s is NULL; rank out of range or not
 *                              held by this communicator; send or
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
