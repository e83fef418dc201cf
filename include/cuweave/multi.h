/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: several GPUs in one host.
 *
 * The model (docs/multi-gpu.md): one cw_context per device, and everything
 * made on a context (streams, pools, events, buffers, resident loops) lives
 * on that context's device. Nothing assumes device 0. A device group opens
 * the primary contexts of a list of devices (or of every visible one) in one
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
 *    or explicitly (cw_context_share_buffer_pool, cuMemPoolSetAccess).
 *
 * Resident loops: one per device, each made on its device's context; one
 * host thread rings their doorbells (cw_resident_data_ready on each) and
 * then waits for each result (cw_resident_wait_result), in two loops.
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
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device groups -------------------------------------------------------- */

typedef struct cw_device_group cw_device_group;

/* The most devices a group holds. */
#define CW_MAX_DEVICES 64

/*
 * Opens the primary context (cw_context_create) of each device ordinal in
 * devices[0..count): the group's member i is devices[i]. count 0 (devices
 * then ignored, may be NULL): every visible device, in ordinal order, at
 * most CW_MAX_DEVICES. The group holds a reference to each context; destroy
 * it with cw_device_group_destroy. On failure nothing is left retained and
 * *out is untouched.
 * Returns:
 *   CW_SUCCESS                 *out is the new group.
 *   CW_ERROR_INVALID_ARGUMENT  out is NULL; count is negative or above
 *                              CW_MAX_DEVICES; devices is NULL with
 *                              count > 0; an ordinal is out of range or
 *                              given twice (the detail names it).
 *   CW_ERROR_NO_DEVICE         count is 0 and no device is visible.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory, or the driver could not
 *                              make a primary context.
 *   CW_ERROR_NO_DRIVER         libcuda could not be loaded.
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than CUDA 12.0 or lacks
 *                              an entry point cuweave needs.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call,
 *                              and which devices[i]).
 */
CW_API cw_status cw_device_group_create(cw_device_group **out, const int *devices, int count);

/*
 * Drops the group's reference to each context and frees the group; sets *g
 * to NULL. Accepts NULL and a NULL *g. A handle that is not a live group is
 * ignored (logged at CW_LOG_WARNING; *g is still set to NULL). Objects made
 * on the contexts keep them alive (context.h).
 * Returns: nothing.
 */
CW_API void cw_device_group_destroy(cw_device_group **g);

typedef struct cw_device_group_info {
    int count;                             /* members */
    int devices[CW_MAX_DEVICES];           /* member i's device ordinal (i < count) */
    cw_context *contexts[CW_MAX_DEVICES];  /* member i's context (borrowed: valid while the group lives,
                                              and after that while objects made on it live) */
    uint8_t reserved[64];
} cw_device_group_info;

/*
 * Fills *info: the members, their device ordinals and their contexts (the
 * entries from count on are zero). No driver call.
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  g or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    g is not a live group.
 */
CW_API cw_status cw_device_group_get_info(const cw_device_group *g, cw_device_group_info *info);

/* ---- peers ----------------------------------------------------------------- */

typedef struct cw_peer_info {
    int can_access;     /* 1: kernels on `device` can access `peer`'s memory once enabled */
    int perf_rank;      /* the driver's relative rank of the link (lower is faster); 0 when none */
    int native_atomics; /* 1: every CUDA atomic works over the link */
    uint8_t reserved[20];
} cw_peer_info;

/*
 * What the topology allows from `device` to `peer` (ordinals)
 * (cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute). device == peer: a
 * device always reaches its own memory (can_access 1, rank 0, atomics 1).
 * No context is made. To enable every pair a group's topology allows:
 *
 *   for (int a = 0; a < gi.count; a++)
 *       for (int b = 0; b < gi.count; b++) {
 *           cw_peer_info pi;
 *           if (a == b) continue;
 *           cw_device_get_peer_info(gi.devices[a], gi.devices[b], &pi);
 *           if (pi.can_access) cw_context_enable_peer(gi.contexts[a], gi.contexts[b]);
 *       }
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  info is NULL; an ordinal is negative or
 *                              not below the device count.
 *   CW_ERROR_NO_DRIVER         libcuda could not be loaded.
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than CUDA 12.0, lacks an
 *                              entry point cuweave needs, or has no peer
 *                              access entries (device != peer).
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_device_get_peer_info(int device, int peer, cw_peer_info *info);

/*
 * Lets kernels and copies of ctx's device access memory of peer's device
 * (cuCtxEnablePeerAccess, made with ctx current), and opens peer's buffer
 * pool (cw_buffer_create memory on peer's streams) to ctx's device too, now
 * or when the pool is made (cuMemPoolSetAccess: a stream-ordered pool's
 * memory is not covered by context peer access). One direction: enable
 * (peer, ctx) too for the other. Idempotent: enabling a pair already
 * enabled (by cuweave or by anyone) succeeds, and a second enable of a
 * pair through cuweave asks nothing of the driver.
 * Returns:
 *   CW_SUCCESS                 ctx's device reaches peer's memory.
 *   CW_ERROR_INVALID_ARGUMENT  ctx or peer is NULL; both are on one device.
 *   CW_ERROR_INVALID_HANDLE    ctx or peer is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the topology does not allow it, the driver
 *                              has no peer entries, or (the pool) no
 *                              cuMemPoolSetAccess.
 *   CW_ERROR_DRIVER            another driver failure, too many peers say
 *                              (detail: the call).
 */
CW_API cw_status cw_context_enable_peer(cw_context *ctx, cw_context *peer);

/*
 * Copies bytes from src (device memory of src_ctx's device) to dst (device
 * memory of dst_ctx's device) on stream s (cuMemcpyPeerAsync), which may be
 * a stream of either device. Work on other streams orders with
 * cw_stream_wait as usual. Any two devices: directly when peer access is
 * possible, else staged through host memory by the driver. bytes 0 does
 * nothing (dst and src are then not checked).
 * Returns:
 *   CW_SUCCESS                 the copy is enqueued.
 *   CW_ERROR_INVALID_ARGUMENT  s, dst_ctx or src_ctx is NULL; dst or src
 *                              is 0 with bytes > 0.
 *   CW_ERROR_INVALID_HANDLE    s, dst_ctx or src_ctx is not live.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no cuMemcpyPeerAsync.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_CAPTURE           s is being captured and the driver cannot
 *                              record this copy.
 *   CW_ERROR_DRIVER            another driver failure, an address the
 *                              driver refuses included (detail: the call).
 */
CW_API cw_status cw_copy_peer(cw_stream *s, cw_devptr dst, cw_context *dst_ctx, cw_devptr src,
                              cw_context *src_ctx, size_t bytes);

/*
 * Copies the whole of src into dst (dst at least as large) on stream s,
 * whatever devices they are on (cuMemcpyPeerAsync), and records the use of
 * both by s (so neither is freed under the copy). dst must be writable
 * (held by one reference: cw_buffer_get_writable's rule).
 * Returns:
 *   CW_SUCCESS                 the copy is enqueued and both uses recorded.
 *   CW_ERROR_INVALID_ARGUMENT  dst, src or s is NULL; dst is smaller than
 *                              src; dst == src.
 *   CW_ERROR_INVALID_HANDLE    dst, src or s is not live.
 *   CW_ERROR_INVALID_STATE     dst is shared (more than one reference).
 *   CW_ERROR_NOT_PERMITTED     s is being captured (a use recorded in a
 *                              graph would not order the free).
 *   CW_ERROR_NOT_SUPPORTED     the driver has no cuMemcpyPeerAsync.
 *   CW_ERROR_OUT_OF_MEMORY     no memory for the uses' event (the copy,
 *                              enqueued, is waited for before returning).
 *   CW_ERROR_DEVICE_FAULT      s's context faulted, or an older use could
 *                              not be waited for.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_copy(cw_buffer *dst, cw_buffer *src, cw_stream *s);

/*
 * Opens the buffers of owner's stream-ordered pool (cw_buffer_create on a
 * stream of owner) to kernels running on peer's device, read and write
 * (cuMemPoolSetAccess), for buffers already made and made later. Needs
 * peer access to be possible; it also enables it (cw_context_enable_peer
 * (peer, owner)). Idempotent.
 * Returns:
 *   CW_SUCCESS                 peer's device reaches owner's buffers.
 *   CW_ERROR_INVALID_ARGUMENT  owner or peer is NULL; both are on one
 *                              device.
 *   CW_ERROR_INVALID_HANDLE    owner or peer is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the topology does not allow it, or the
 *                              driver has no memory pools or peer entries.
 *   CW_ERROR_OUT_OF_MEMORY     the pool could not be made.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_context_share_buffer_pool(cw_context *owner, cw_context *peer);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_MULTI_H */
