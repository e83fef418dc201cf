/*
 * cuweave: several GPUs in one host.
 *
 * The model (docs/multi-gpu.md): one cw_context per device, and everything
 * made on a context (streams, pools, events, buffers, resident loops) lives
 * on that context's device. Nothing assumes device 0. A device set opens the
 * primary contexts of a list of devices (or of every visible one) in one
 * call and hands out their contexts.
 *
 * Ordering across devices needs no new call: cw_stream_wait(dst, src) with
 * dst and src on different devices records an event on src and makes dst
 * wait for it (cuStreamWaitEvent accepts an event of another device's
 * context); no CPU blocking.
 *
 * Data across devices:
 *  - peer access (cw_context_enable_peer) lets kernels on one device read
 *    and write another device's memory; only where the topology allows it
 *    (cw_device_get_peer_info says which pairs can);
 *  - peer copies (cw_copy_peer, cw_buffer_copy) go through
 *    cuMemcpyPeerAsync, between any two devices: directly when peer access
 *    is possible, staged through host memory by the driver when it is not;
 *  - buffers of one device's stream-ordered pool are opened to another
 *    device's kernels when peer access is enabled (cw_context_enable_peer),
 *    or explicitly (cw_buffer_pool_share, cuMemPoolSetAccess).
 *
 * Resident loops: one per device, each made on its device's context; the
 * calls at the end ring several loops' doorbells and wait for all their
 * results from one host thread.
 *
 * Collectives (all-reduce, broadcast) go through NCCL: cuweave/collective.h.
 *
 * Threading: every call here is thread-safe unless it says otherwise.
 */
#ifndef CUWEAVE_MULTI_H
#define CUWEAVE_MULTI_H

#include "cuweave/buffer.h"
#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/resident.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device sets ---------------------------------------------------------- */

typedef struct cw_device_set cw_device_set;

/* The most devices a set holds. */
#define CW_MAX_DEVICES 64

/*
 * Opens the primary context (cw_context_create) of each device ordinal in
 * devices[0..count): the set's member i is devices[i]. count 0 (devices
 * then ignored, may be NULL): every visible device, in ordinal order, at
 * most CW_MAX_DEVICES. On failure nothing is left retained and *out is
 * untouched.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (out NULL; count negative or
 * above CW_MAX_DEVICES; devices NULL with count > 0; an ordinal out of range
 * or given twice: the detail names it); CW_ERROR_NO_DEVICE (count 0 and no
 * device visible); CW_ERROR_OUT_OF_MEMORY; or what cw_context_create returns.
 */
CW_API cw_status cw_device_set_open(cw_device_set **out, const int *devices, int count);

/*
 * Drops the set's reference to each context and frees the set; sets *set to
 * NULL (so a second close through the same variable does nothing). Accepts
 * NULL and a NULL *set; a handle that is not a live set is refused
 * (CW_ERROR_INVALID_HANDLE in the detail) and left alone. Objects made on
 * the contexts keep them alive (context.h).
 */
CW_API void cw_device_set_close(cw_device_set **set);

/* How many devices the set holds. */
CW_API cw_status cw_device_set_size(const cw_device_set *set, int *count);

/*
 * The context of member `index` (borrowed: valid while the set is open, and
 * after that while objects made on it live). CW_ERROR_INVALID_ARGUMENT for
 * an index out of range.
 */
CW_API cw_status cw_device_set_context(const cw_device_set *set, int index, cw_context **ctx);

/* The device ordinal of member `index`. */
CW_API cw_status cw_device_set_ordinal(const cw_device_set *set, int index, int *device);

/*
 * Enables peer access between every ordered pair of the set's devices whose
 * topology allows it (cw_context_enable_peer for each). Pairs that cannot
 * are skipped, not an error. *enabled (may be NULL) receives how many
 * ordered pairs now have access (n * (n - 1) when every pair can).
 * Returns CW_SUCCESS or the first failing enable's error (pairs enabled
 * before it stay enabled).
 */
CW_API cw_status cw_device_set_enable_peers(cw_device_set *set, int *enabled);

/* ---- peers ----------------------------------------------------------------- */

typedef struct cw_peer_info {
    int can_access;     /* 1: kernels on `device` can access `peer`'s memory once enabled */
    int perf_rank;      /* the driver's relative rank of the link (lower is faster); 0 when none */
    int native_atomics; /* 1: every CUDA atomic works over the link */
    int reserved[5];
} cw_peer_info;

/*
 * What the topology allows from `device` to `peer` (ordinals)
 * (cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute). device == peer: a
 * device always reaches its own memory (can_access 1, rank 0, atomics 1).
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (info NULL, an ordinal out
 * of range); what cw_init returns.
 */
CW_API cw_status cw_device_get_peer_info(int device, int peer, cw_peer_info *info);

/*
 * Lets kernels and copies of ctx's device access memory of peer's device
 * (cuCtxEnablePeerAccess, made with ctx current), and opens peer's buffer
 * pool (cw_buffer_alloc memory on peer's streams) to ctx's device too, now
 * or when the pool is made (cuMemPoolSetAccess: a stream-ordered pool's
 * memory is not covered by context peer access). One direction: enable
 * (peer, ctx) too for the other. Enabling a pair already enabled (by
 * cuweave or by anyone) succeeds; a second enable of a pair through
 * cuweave asks nothing of the driver.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (both on one device);
 * CW_ERROR_INVALID_HANDLE; CW_ERROR_NOT_SUPPORTED (the topology does not
 * allow it, or the driver has no peer entries); the driver's error (too
 * many peers, say).
 */
CW_API cw_status cw_context_enable_peer(cw_context *ctx, cw_context *peer);

/*
 * *enabled = 1 when peer access from ctx's device to peer's device was
 * enabled (or found enabled) through cw_context_enable_peer in this
 * process, else 0; 1 for two contexts of one device. No driver call.
 */
CW_API cw_status cw_context_peer_enabled(const cw_context *ctx, const cw_context *peer, int *enabled);

/*
 * Copies bytes from src (device memory of src_ctx's device) to dst (device
 * memory of dst_ctx's device) on stream s (cuMemcpyPeerAsync), which may be
 * a stream of either device. Work on other streams orders with
 * cw_stream_wait as usual. Any two devices: directly when peer access is
 * possible, else staged through host memory by the driver. bytes 0 does
 * nothing. Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (dst or src 0);
 * CW_ERROR_INVALID_HANDLE; CW_ERROR_NOT_SUPPORTED (no peer copy entry); the
 * driver's error.
 */
CW_API cw_status cw_copy_peer(cw_stream *s, unsigned long long dst, cw_context *dst_ctx, unsigned long long src,
                              cw_context *src_ctx, size_t bytes);

/*
 * Copies the whole of src into dst (dst at least as large) on stream s,
 * whatever devices they are on (cuMemcpyPeerAsync), and records the use of
 * both by s (so neither is freed under the copy). dst must be writable
 * (held by one reference: cw_buffer_get_writable's rule).
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (dst smaller than src, dst
 * == src); CW_ERROR_INVALID_STATE (dst shared); CW_ERROR_INVALID_HANDLE;
 * the driver's error.
 */
CW_API cw_status cw_buffer_copy(cw_stream *s, cw_buffer *dst, cw_buffer *src);

/*
 * Opens the buffers of owner's stream-ordered pool (cw_buffer_alloc on a
 * stream of owner) to kernels running on peer's device, read and write
 * (cuMemPoolSetAccess), for buffers already made and made later. Needs
 * peer access to be possible; it also enables it (cw_context_enable_peer
 * (peer, owner)). Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (one
 * device); CW_ERROR_NOT_SUPPORTED (the topology does not allow it, or no
 * memory pools); the driver's error.
 */
CW_API cw_status cw_buffer_pool_share(cw_context *owner, cw_context *peer);

/* ---- several resident loops --------------------------------------------------- */

/*
 * Rings the doorbell of each of loops[0..n) once (cw_resident_data_ready on
 * each, in order): n host writes, no driver call. seqs (may be NULL) gets
 * each request's number. The loops may be on any devices, one per device or
 * several on one. Stops at the first loop that refuses: the detail names its
 * index, and the loops before it were rung (their seqs are filled).
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (loops NULL with n > 0, a
 * NULL entry); CW_ERROR_INVALID_HANDLE; CW_ERROR_INVALID_STATE (a loop not
 * launched, or with a data-ready handler).
 */
CW_API cw_status cw_resident_data_ready_many(cw_resident *const *loops, size_t n, uint64_t *seqs);

/*
 * Waits until every loops[i] has finished request seqs[i], all within one
 * timeout_ms (0: checks each once). Returns CW_SUCCESS, or the first failure
 * of cw_resident_wait_result (CW_ERROR_TIMEOUT, CW_ERROR_DEVICE_FAULT,
 * CW_ERROR_INVALID_STATE) with a detail that names the loop's index.
 */
CW_API cw_status cw_resident_wait_many(cw_resident *const *loops, const uint64_t *seqs, size_t n,
                                       uint32_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_MULTI_H */
