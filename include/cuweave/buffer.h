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
 *   cw_buffer_alloc(&b, s, bytes);     usable by work on s from now on
 *   unsigned long long p;
 *   cw_buffer_get_writable(b, &p);     ... launch writers on s ...
 *   cw_buffer_use(b, s);               the free waits for what s has so far
 *   cw_buffer_release(&b);             freed on the GPU after that work
 *
 * Sharing: a buffer held by more than one reference is read-only through
 * this API: cw_buffer_get_writable refuses it (CW_ERROR_INVALID_STATE), so
 * two downstream operators given the same buffer cannot both write it.
 * cw_buffer_get_ptr always gives the address (for reading).
 *
 * Threading: retain, release, use and the getters may be called from any
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
 * The allocation itself counts as the first use. *out holds one reference.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (out or s NULL, bytes 0);
 * CW_ERROR_INVALID_HANDLE; CW_ERROR_OUT_OF_MEMORY; CW_ERROR_NOT_SUPPORTED
 * (a device without memory pools); CW_ERROR_NOT_PERMITTED while s is being
 * captured (a graph cannot own pooled memory past its launch); the
 * driver's error. Nothing is allocated on failure.
 */
CW_API cw_status cw_buffer_alloc(cw_buffer **out, cw_stream *s, size_t bytes);

/* Adds a reference. Lock-free. */
CW_API cw_status cw_buffer_retain(cw_buffer *b);

/*
 * Drops the caller's reference and sets *b to NULL; accepts NULL and *b
 * NULL. The last reference enqueues the free after every recorded use (see
 * above) and returns at once. A failure of the driver on that path is
 * recorded in the detail (cw_last_error) and logged; the memory is then
 * freed when the context is destroyed.
 */
CW_API void cw_buffer_release(cw_buffer **b);

/*
 * Records that the work enqueued on s so far uses the buffer: the free
 * waits for it. s may be a stream of any context and any device (a peer
 * reading the buffer over peer access, or copying it: multi.h). Costs
 * one cuEventRecord on a pooled event. Any number of uses may be recorded;
 * a later use on the same stream replaces the earlier one (it covers it);
 * a buffer keeps 8 pending and folds older ones into its release stream's
 * waits. Returns CW_ERROR_INVALID_ARGUMENT, CW_ERROR_INVALID_HANDLE, or the
 * driver's error (a capturing stream: CW_ERROR_NOT_PERMITTED, as for
 * cw_buffer_alloc).
 */
CW_API cw_status cw_buffer_use(cw_buffer *b, cw_stream *s);

/* The device address, for reading (any number of holders). No driver call. */
CW_API cw_status cw_buffer_get_ptr(const cw_buffer *b, unsigned long long *dptr);

/*
 * The device address for writing: only while the caller's reference is the
 * only one. CW_ERROR_INVALID_STATE (with the reference count in the detail)
 * when the buffer is shared. No driver call.
 */
CW_API cw_status cw_buffer_get_writable(cw_buffer *b, unsigned long long *dptr);

typedef struct cw_buffer_info {
    unsigned long long dptr; /* device address */
    size_t bytes;            /* size asked for */
    unsigned refs;           /* references held now */
    unsigned uses;           /* uses recorded and not yet folded into the release stream */
    int device;              /* device ordinal */
    uint8_t reserved[36];
} cw_buffer_info;

/* Fills *info. No driver call. */
CW_API cw_status cw_buffer_get_info(const cw_buffer *b, cw_buffer_info *info);

/* The buffer's context (borrowed: valid while the buffer lives). */
CW_API cw_status cw_buffer_get_context(const cw_buffer *b, cw_context **ctx);

/* ---- copies and page-locked host memory ---------------------------------- */

/*
 * Copies `bytes` from host memory src to device address dst in stream order
 * on s (cuMemcpyHtoDAsync). From page-locked memory (cw_host_alloc) the copy
 * runs asynchronously: src must stay untouched until s has reached it;
 * from ordinary memory the driver stages it and src may be reused when the
 * call returns. bytes 0 does nothing. Returns CW_SUCCESS,
 * CW_ERROR_INVALID_ARGUMENT (NULL src or dst with bytes > 0),
 * CW_ERROR_INVALID_HANDLE, or the driver's error.
 */
CW_API cw_status cw_copy_to_device(cw_stream *s, unsigned long long dst, const void *src, size_t bytes);

/* The other way (cuMemcpyDtoHAsync): dst holds the data once s has reached
 * the copy (wait with a future, or cw_stream_synchronize). */
CW_API cw_status cw_copy_to_host(cw_stream *s, void *dst, unsigned long long src, size_t bytes);

/*
 * Page-locked, device-mapped host memory (cuMemHostAlloc), zeroed, usable by
 * every context of the process: asynchronous copies from and to it overlap
 * with other work, and kernels may read and write it directly at the same
 * address (unified addressing, which every 64-bit platform CUDA 12 runs on
 * has: the device address is the pointer). Free it with cw_host_free. Returns CW_SUCCESS,
 * CW_ERROR_INVALID_ARGUMENT (bytes 0), CW_ERROR_INVALID_HANDLE,
 * CW_ERROR_OUT_OF_MEMORY, or the driver's error.
 */
CW_API cw_status cw_host_alloc(cw_context *ctx, size_t bytes, void **out);

/*
 * Frees memory from cw_host_alloc (ctx: the same context). Accepts NULL.
 * The driver's free waits for running resident loops: while one runs, the
 * memory is freed when none does.
 */
CW_API void cw_host_free(cw_context *ctx, void *p);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_BUFFER_H */
