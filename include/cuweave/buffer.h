/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: device buffers from a stream-ordered memory pool.
 *
 * A cw_buffer is device memory allocated on a stream
 * (cuMemAllocFromPoolAsync, from a pool cuweave makes per context on first
 * use) with a reference count and a list of the streams that used it. When
 * the last reference goes, the memory is freed on the GPU only after every
 * recorded use has finished: the free is enqueued (cuMemFreeAsync) on a
 * release stream of the context that first waits, with events, for each
 * recorded use. The streams that used the buffer are not made to wait for
 * one another, so releasing never adds a dependency between them.
 *
 * This closes the race of pool allocators that Holoscan documents for sink
 * operators: a reader on stream B still running when the buffer's last
 * reference is dropped, the allocator believing the memory free after the
 * producer's stream A, and the next frame reusing it under B's reader.
 * Operators of a cw_pipeline never record uses by hand: after each compute
 * call the pipeline records every stream the operator used on every buffer
 * it received, emitted or allocated (docs/pipelines.md).
 *
 *   cw_buffer *b;
 *   cw_buffer_create(&b, s, bytes);    usable by work on s from now on
 *   cw_devptr p;
 *   cw_buffer_get_writable(b, &p);     ... launch writers on s ...
 *   cw_buffer_use(b, s);               the free waits for what s has so far
 *   cw_buffer_destroy(&b);             freed on the GPU after that work
 *
 * Sharing: a buffer held by more than one reference is read-only through
 * this API: cw_buffer_get_writable refuses it (CW_ERROR_INVALID_STATE), so
 * two downstream operators given the same buffer cannot both write it.
 * cw_buffer_get_ptr always gives the address (for reading).
 *
 * Threading: retain, destroy, use and the getters may be called from any
 * thread; a buffer's use list takes a short spin lock. Memory is released
 * with cuMemFreeAsync, which does not wait for a running resident loop.
 */
#ifndef CUWEAVE_BUFFER_H
#define CUWEAVE_BUFFER_H

#include "cuweave/common.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_buffer cw_buffer;

/*
 * Allocates `bytes` (at least 1) of device memory on stream s from the
 * stream-ordered pool of s's context (made at first use: device memory of
 * the context's device, kept cached between frees, released to the system
 * when the context is destroyed; its reuse never inserts a dependency
 * between streams). Work enqueued on s after this call may use the memory;
 * work on other streams must be ordered after s first (cw_stream_wait).
 * The allocation itself counts as the first use. *out holds one reference
 * (drop it with cw_buffer_destroy). Nothing is allocated on failure.
 * Returns:
 *   CW_SUCCESS                 *out is the new buffer.
 *   CW_ERROR_INVALID_ARGUMENT  out or s is NULL; bytes is 0.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_NOT_PERMITTED     s is being captured (a graph cannot own
 *                              pooled memory past its launch).
 *   CW_ERROR_OUT_OF_MEMORY     no device memory left in the pool, or no
 *                              host memory for the object.
 *   CW_ERROR_NOT_SUPPORTED     the device has no memory pools.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_create(cw_buffer **out, cw_stream *s, size_t bytes);

/*
 * Adds a reference (each is dropped with cw_buffer_destroy). Lock-free.
 * Returns:
 *   CW_SUCCESS                 the buffer has one reference more.
 *   CW_ERROR_INVALID_ARGUMENT  b is NULL.
 *   CW_ERROR_INVALID_HANDLE    b is not a live buffer.
 */
CW_API cw_status cw_buffer_retain(cw_buffer *b);

/*
 * Drops the caller's reference and sets *b to NULL; accepts NULL and *b
 * NULL. The last reference enqueues the free after every recorded use (see
 * above) and returns at once. A handle that is not a live buffer is ignored
 * (logged at CW_LOG_WARNING). A failure of the driver on the free's path
 * is logged (CW_LOG_ERROR, naming the driver call, then CW_LOG_WARNING)
 * and the memory then stays in the context's pool until its CUDA context
 * is destroyed.
 * Returns: nothing.
 */
CW_API void cw_buffer_destroy(cw_buffer **b);

/*
 * Records that the work enqueued on s so far uses the buffer: the free
 * waits for it. s may be a stream of any context and any device (a peer
 * reading the buffer over peer access, or copying it: multi.h). Costs
 * one cuEventRecord on a pooled event. Any number of uses may be recorded;
 * a use recorded later on the same stream replaces the earlier one (it
 * covers it), whichever is recorded on the buffer first (uses recorded on
 * one stream by two threads at once are both kept); a buffer keeps 8
 * pending and folds older ones into its release stream's waits.
 * Returns:
 *   CW_SUCCESS                 the use is recorded.
 *   CW_ERROR_INVALID_ARGUMENT  b or s is NULL.
 *   CW_ERROR_INVALID_HANDLE    b or s is not live.
 *   CW_ERROR_NOT_PERMITTED     s is being captured (a use recorded in a
 *                              graph would not order the free).
 *   CW_ERROR_DEVICE_FAULT      an older use folded into the release
 *                              stream's waits could not be waited for, or
 *                              s's context faulted.
 *   CW_ERROR_OUT_OF_MEMORY     no memory for the use's event.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_use(cw_buffer *b, cw_stream *s);

/*
 * Writes the device address, for reading (any number of holders). No
 * driver call.
 * Returns:
 *   CW_SUCCESS                 *dptr is the address.
 *   CW_ERROR_INVALID_ARGUMENT  b or dptr is NULL.
 *   CW_ERROR_INVALID_HANDLE    b is not a live buffer.
 */
CW_API cw_status cw_buffer_get_ptr(const cw_buffer *b, cw_devptr *dptr);

/*
 * Writes the device address for writing: only while the caller's reference
 * is the only one. No driver call.
 * Returns:
 *   CW_SUCCESS                 *dptr is the address.
 *   CW_ERROR_INVALID_ARGUMENT  b or dptr is NULL.
 *   CW_ERROR_INVALID_HANDLE    b is not a live buffer.
 *   CW_ERROR_INVALID_STATE     the buffer is shared (more than one
 *                              reference; the count is in the detail).
 */
CW_API cw_status cw_buffer_get_writable(cw_buffer *b, cw_devptr *dptr);

typedef struct cw_buffer_info {
    cw_devptr dptr;      /* device address */
    size_t bytes;        /* size asked for */
    unsigned refs;       /* references held now */
    unsigned uses;       /* uses recorded and not yet folded into the release stream */
    int device;          /* device ordinal */
    cw_context *context; /* the buffer's context (borrowed: valid while the buffer lives) */
    uint8_t reserved[24];
} cw_buffer_info;

/*
 * Fills *info. No driver call.
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  b or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    b is not a live buffer.
 */
CW_API cw_status cw_buffer_get_info(const cw_buffer *b, cw_buffer_info *info);

/* ---- copies and page-locked host memory ---------------------------------- */

/*
 * Copies `bytes` from host memory src to device address dst in stream order
 * on s (cuMemcpyHtoDAsync). From page-locked memory (cw_host_alloc) the copy
 * runs asynchronously: src must stay untouched until s has reached it;
 * from ordinary memory the driver stages it and src may be reused when the
 * call returns. bytes 0 does nothing (dst and src are then not checked).
 * Returns:
 *   CW_SUCCESS                 the copy is enqueued.
 *   CW_ERROR_INVALID_ARGUMENT  s is NULL; src is NULL or dst 0 with
 *                              bytes > 0.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_CAPTURE           s is being captured and the driver cannot
 *                              record this copy.
 *   CW_ERROR_DRIVER            another driver failure, an address the
 *                              driver refuses included (detail: the call).
 */
CW_API cw_status cw_copy_to_device(cw_stream *s, cw_devptr dst, const void *src, size_t bytes);

/*
 * The other way (cuMemcpyDtoHAsync): dst holds the data once s has reached
 * the copy (wait with a future, or cw_stream_synchronize).
 * Returns: as cw_copy_to_device (dst NULL or src 0 with bytes > 0:
 * CW_ERROR_INVALID_ARGUMENT).
 */
CW_API cw_status cw_copy_to_host(cw_stream *s, void *dst, cw_devptr src, size_t bytes);

/*
 * Page-locked, device-mapped host memory (cuMemHostAlloc), zeroed, usable by
 * every context of the process: asynchronous copies from and to it overlap
 * with other work, and kernels may read and write it directly at the same
 * address (unified addressing, which every 64-bit platform CUDA 12 runs on
 * has: the device address is the pointer). *out is the caller's: free it
 * with cw_host_free (with the same context).
 * Returns:
 *   CW_SUCCESS                 *out is the memory.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; bytes is 0.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_OUT_OF_MEMORY     the driver could not pin that much.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_host_alloc(void **out, cw_context *ctx, size_t bytes);

/*
 * Frees memory from cw_host_alloc (ctx: the context it was allocated with)
 * and sets *p to NULL; accepts p NULL and *p NULL. The driver's free waits
 * for running resident loops: while one runs, the memory is freed when
 * none does. A ctx that is not a live context is ignored and logged
 * (CW_LOG_WARNING): the memory is then not freed, and *p is still set to
 * NULL. A failure of the free itself is logged (CW_LOG_ERROR) and the
 * memory kept.
 * Returns: nothing.
 */
CW_API void cw_host_free(cw_context *ctx, void **p);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_BUFFER_H */
