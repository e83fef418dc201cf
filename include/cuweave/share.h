/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: buffers and events shared between processes of one machine
 * (CUDA IPC through the driver: cuIpcGetMemHandle / cuIpcOpenMemHandle,
 * cuIpcGetEventHandle / cuIpcOpenEventHandle).
 *
 * A process exports a shareable buffer or a shared event into a
 * cw_shared_handle (128 opaque bytes) and passes those bytes to another
 * process by any means it likes (a pipe, a socket, a file, shared memory);
 * that process imports them and gets a cw_buffer (the same device memory)
 * or a cw_shared_event of its own. docs/multi-gpu.md ("Sharing between
 * processes") tells the whole story.
 *
 *   producer                              consumer
 *   cw_buffer_create_shareable(&b, s, n)
 *   cw_shared_event_create(&e, ctx)
 *   cw_buffer_export(b, &hb)
 *   cw_shared_event_export(e, &he)        ... hb and he travel ...
 *                                         cw_buffer_import(&b, s2, &hb)
 *                                         cw_shared_event_import(&e, ctx2, &he)
 *   ... write b on s ...
 *   cw_shared_event_record(e, s)
 *   ... tell the consumer "frame ready" ...
 *                                         cw_shared_event_wait(e, s2)
 *                                         ... read b on s2 ...
 *
 * Shareable memory: a buffer made by cw_buffer_create_shareable is
 * allocated with cuMemAlloc, not from the context's stream-ordered pool
 * (that pool is made without shareable handle types, and memory of a
 * stream-ordered pool cannot be exported with cuIpcGetMemHandle). It is
 * otherwise an ordinary cw_buffer: references, uses, copies.
 *
 * Lifetimes: every export makes (once per object) a small POSIX shared
 * memory block ("/cuweave.<pid>.<n>.<nonce>", mode 0600) in which each
 * importing process holds a slot until it closes. Exporter and importer
 * run as the same user: an import refuses a block another user owns. The exporter's last reference (its
 * cw_buffer_destroy, or cw_shared_event_destroy) frees the memory (or the
 * event) at once when no importer holds it (a buffer's memory, while a
 * GPU-resident loop runs, once none does: cuMemFree would wait for it, see
 * resident.h); otherwise the object is kept
 * and freed by a later call of this header's functions in the exporting
 * process once every importer closed (or died: a slot of a process that
 * exited counts as closed, whether its parent has waited for it yet or
 * not) and no resident loop runs, and at the latest when the
 * exporter's context is torn down: that waits up to 2 seconds in all for
 * the importers of everything the context kept, then frees it anyway (logged at CW_LOG_ERROR: an importer
 * still reading it reads freed memory; the exporting process exiting has
 * the same effect). The exporter's last reference first waits for the
 * buffer's recorded uses to finish (cuStreamSynchronize of the context's
 * release stream), whether it frees the memory then or keeps it. An
 * importer's last reference waits for its recorded
 * uses to finish on the GPU (cuStreamSynchronize of the context's release
 * stream), then closes the mapping and its slot.
 *
 * Threading: every function may be called from any thread.
 */
#ifndef CUWEAVE_SHARE_H
#define CUWEAVE_SHARE_H

#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/stream.h"
#include "cuweave/buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An exported buffer or event: bytes to copy to another process as they
 * are. Valid on the same machine only, while the exporter keeps the object
 * (and its process) alive. */
typedef struct cw_shared_handle {
    uint8_t bytes[128];
} cw_shared_handle;

typedef struct cw_shared_event cw_shared_event;

/* ---- buffers -------------------------------------------------------------- */

/*
 * Allocates `bytes` (at least 1) of device memory on s's device that can be
 * exported (cw_buffer_export). cuMemAlloc, which is synchronous: the memory
 * is usable by work on any stream of s's context when the call returns
 * (s only names the context; nothing is enqueued on it). *out holds one
 * reference; the buffer is an ordinary cw_buffer otherwise (cw_buffer_use,
 * cw_buffer_get_ptr, cw_buffer_destroy, ...). Its memory is freed as the
 * header's comment says (Lifetimes).
 * Returns:
 *   CW_SUCCESS                 *out is the new buffer.
 *   CW_ERROR_INVALID_ARGUMENT  out or s is NULL; bytes is 0.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no CUDA IPC entry points.
 *   CW_ERROR_OUT_OF_MEMORY     no device memory, or no host memory for the
 *                              object or its shared block.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_create_shareable(cw_buffer **out, cw_stream *s, size_t bytes);

/*
 * Writes a handle another process of this machine can import
 * (cw_buffer_import). Any number of exports of one buffer give equal
 * handles. No work is enqueued: the importer must be ordered after the
 * writes it reads (a cw_shared_event).
 * Returns:
 *   CW_SUCCESS                 *out is the handle.
 *   CW_ERROR_INVALID_ARGUMENT  b or out is NULL.
 *   CW_ERROR_INVALID_HANDLE    b is not a live buffer.
 *   CW_ERROR_INVALID_STATE     b was not made by cw_buffer_create_shareable
 *                              (pool memory cannot be exported), or was
 *                              itself imported.
 *   CW_ERROR_NOT_SUPPORTED     the driver or the device refuses IPC.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_export(const cw_buffer *b, cw_shared_handle *out);

/*
 * Opens an exported buffer in this process, on s's context
 * (cuIpcOpenMemHandle with lazy peer access), which must be of the
 * exporter's device (the handle names it by UUID, so CUDA_VISIBLE_DEVICES
 * may number it differently). *out holds one reference to a cw_buffer of
 * the exporter's size whose address is the same memory; destroying the
 * last reference closes it (after its recorded uses finished) and lets the
 * exporter free it. Import a handle once per process and keep the buffer
 * (cw_buffer_retain for more references): a second import of the same
 * handle in one process is left to the driver, which may refuse it
 * (CW_ERROR_DRIVER) or map the same address again.
 * Returns:
 *   CW_SUCCESS                 *out is the imported buffer.
 *   CW_ERROR_INVALID_ARGUMENT  out, s or h is NULL; h is not a buffer
 *                              handle of this cuweave (bad bytes, an event's
 *                              handle); h does not match the exporter's
 *                              block (its size, nonce or kind changed; its
 *                              IPC part or device not the ones the object's
 *                              first export recorded there; a block of
 *                              another user) or claims more than the memory
 *                              it opens holds; h is of another device than
 *                              s's.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream; or the driver
 *                              refused h's IPC part (CUDA_ERROR_INVALID_HANDLE,
 *                              detail: cuIpcOpenMemHandle).
 *   CW_ERROR_NOT_PERMITTED     h was exported by this very process (the
 *                              driver cannot open it there: use the
 *                              exporter's cw_buffer, cw_buffer_retain).
 *   CW_ERROR_INVALID_STATE     the exporter is gone: its process exited or
 *                              it destroyed the buffer (importers that
 *                              hold it keep it; no new import). A dead
 *                              exporter's block is removed then, only when
 *                              it is that process's own and h its handle.
 *   CW_ERROR_OUT_OF_MEMORY     64 processes hold it already, or no memory.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no CUDA IPC entry points or
 *                              refuses IPC on this device.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_buffer_import(cw_buffer **out, cw_stream *s, const cw_shared_handle *h);

/* ---- events ----------------------------------------------------------------- */

/*
 * Makes an event that can be shared with other processes
 * (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING) on ctx, which the event
 * keeps alive. Destroy it with cw_shared_event_destroy.
 * Returns:
 *   CW_SUCCESS                 *out is the new event.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no CUDA IPC entry points.
 *   CW_ERROR_OUT_OF_MEMORY     no memory for the event or its shared block.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_shared_event_create(cw_shared_event **out, cw_context *ctx);

/*
 * Drops the event and sets *e to NULL; accepts NULL and *e NULL. An
 * exporter's event is kept while importers hold it (as a buffer: see
 * Lifetimes); an importer's is closed at once (waits already enqueued
 * still complete). A handle that is not live is ignored (CW_LOG_WARNING).
 * Returns: nothing.
 */
CW_API void cw_shared_event_destroy(cw_shared_event **e);

/*
 * Writes a handle another process of this machine can import. Only the
 * process that made the event exports it.
 * Returns:
 *   CW_SUCCESS                 *out is the handle.
 *   CW_ERROR_INVALID_ARGUMENT  e or out is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live shared event.
 *   CW_ERROR_INVALID_STATE     e was imported.
 *   CW_ERROR_NOT_SUPPORTED     the driver or the device refuses IPC.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_shared_event_export(const cw_shared_event *e, cw_shared_handle *out);

/*
 * Opens an exported event in this process, on ctx (of the exporter's
 * device), which the event keeps alive.
 * Returns:
 *   CW_SUCCESS                 *out is the imported event.
 *   CW_ERROR_INVALID_ARGUMENT  out, ctx or h is NULL; h is not an event
 *                              handle of this cuweave; h does not match
 *                              the exporter's block (as for buffers); h is
 *                              of another device than ctx's.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context; or the driver
 *                              refused h's IPC part (CUDA_ERROR_INVALID_HANDLE,
 *                              detail: cuIpcOpenEventHandle).
 *   CW_ERROR_NOT_PERMITTED     h was exported by this very process.
 *   CW_ERROR_INVALID_STATE     the exporter is gone (process exited, or
 *                              the event destroyed by its exporter).
 *   CW_ERROR_OUT_OF_MEMORY     64 processes hold it already, or no memory.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no CUDA IPC entry points.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_shared_event_import(cw_shared_event **out, cw_context *ctx, const cw_shared_handle *h);

/*
 * Records the work enqueued on s so far into the event (cuEventRecord); s
 * must be a stream of the event's context. Either side may record (the
 * exporter usually does).
 * Returns:
 *   CW_SUCCESS                 the record is enqueued.
 *   CW_ERROR_INVALID_ARGUMENT  e or s is NULL; s is of another context.
 *   CW_ERROR_INVALID_HANDLE    e or s is not live.
 *   CW_ERROR_NOT_PERMITTED     s is being captured.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_shared_event_record(cw_shared_event *e, cw_stream *s);

/*
 * Makes work enqueued on s from now on wait, on the GPU, for the event's
 * latest recording (cuStreamWaitEvent), made in whichever process; does
 * not block the host. The ordering rules of cw_stream_wait hold across the
 * process boundary:
 *  - the wait is for the recording that the driver has seen last when this
 *    call is made, in any process: the exporter must have returned from
 *    cw_shared_event_record before the waiter calls this (tell the waiter
 *    through the same channel as the handle: "frame n recorded");
 *  - a recording made later (the next frame) does not change what an
 *    already enqueued wait waits for;
 *  - a recording made before the import counts like any other; an event
 *    never recorded is complete: the wait waits for nothing.
 * s may be of any context of the event's device.
 * Returns:
 *   CW_SUCCESS                 the wait is enqueued.
 *   CW_ERROR_INVALID_ARGUMENT  e or s is NULL.
 *   CW_ERROR_INVALID_HANDLE    e or s is not live.
 *   CW_ERROR_NOT_PERMITTED     s is being captured.
 *   CW_ERROR_DEVICE_FAULT      s's context faulted earlier.
 *   CW_ERROR_DRIVER            another driver failure (detail: the call).
 */
CW_API cw_status cw_shared_event_wait(cw_shared_event *e, cw_stream *s);

typedef struct cw_shared_event_info {
    cw_context *context; /* the event's context (borrowed) */
    int imported;        /* 1: opened from a handle; 0: made here */
    int importers;       /* exporter: processes holding it now; importer: 0 */
    uint8_t reserved[16];
} cw_shared_event_info;

/*
 * Fills *info. No driver call.
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  e or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    e is not a live shared event.
 */
CW_API cw_status cw_shared_event_get_info(const cw_shared_event *e, cw_shared_event_info *info);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_SHARE_H */
