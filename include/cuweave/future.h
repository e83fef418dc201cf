/*
 * cuweave: host completion (futures).
 *
 * A cw_future completes when the work enqueued on a stream before it is
 * done. Two mechanisms, chosen when it is made:
 *
 *  CW_FUTURE_HOST_FUNC    a host function (cuLaunchHostFunc) runs on a
 *                         driver thread when the stream reaches it and wakes
 *                         everything waiting. Works on every stream; slower
 *                         (tens of microseconds on the H100).
 *  CW_FUTURE_WRITE_VALUE  the stream writes a sequence number
 *                         (cuStreamWriteValue32) into mapped pinned host
 *                         memory; a waiter spins on it for a short while
 *                         (spin_us) and then polls it with sleeps that grow
 *                         up to 1 ms. The fastest way for a thread to learn
 *                         of completion (a few microseconds).
 *  CW_FUTURE_EVENT        the stream records an event (from the context's
 *                         pool); a waiter spins on cuEventQuery for spin_us
 *                         and then polls it with sleeps that grow up to
 *                         1 ms. The cheapest marker to enqueue (one
 *                         cuEventRecord, where WRITE_VALUE enqueues a memory
 *                         operation): for hosts that enqueue many frames and
 *                         wait for few. Each check is a driver call.
 *
 * Callbacks and fds are served by the driver's callback thread (HOST_FUNC)
 * and by one cuweave watcher thread (WRITE_VALUE, EVENT), started on first
 * need.
 *
 * Device errors are reported: when the context faulted before the marker
 * ran, poll, wait, the callback and the fd report CW_ERROR_DEVICE_FAULT
 * (the driver is asked while waiting: every 10 ms for host-function waits,
 * every 1 ms once a written-value waiter sleeps), never success or a hang.
 */
#ifndef CUWEAVE_FUTURE_H
#define CUWEAVE_FUTURE_H

#include "cuweave/common.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_future cw_future;

typedef enum cw_future_kind {
    CW_FUTURE_HOST_FUNC = 0,
    CW_FUTURE_WRITE_VALUE = 1,
    CW_FUTURE_EVENT = 2
} cw_future_kind;

/*
 * Completion callback. Runs exactly once per completion: on the driver's
 * callback thread (HOST_FUNC), on cuweave's watcher thread (WRITE_VALUE, EVENT), or
 * on the thread that set it when the future had already completed. status
 * is CW_SUCCESS or the error the waiter sees. After a device fault the
 * driver never runs a HOST_FUNC marker; cuweave's watcher thread then
 * reports the fault (callback with CW_ERROR_DEVICE_FAULT, fd readable)
 * within about a millisecond.
 *
 * Inside a callback: it must not destroy or rearm its own future, and must
 * not call CUDA or cuweave functions that enqueue work or wait. It may
 * signal, queue, call cw_future_poll, and set callbacks or get fds of other
 * futures. A HOST_FUNC future's callback runs on the driver's callback
 * thread, where CUDA allows no CUDA call at all; cuweave knows when it runs
 * one there and then makes no driver call on its behalf:
 *  - cw_future_poll of a WRITE_VALUE or HOST_FUNC future answers from memory
 *    (CW_SUCCESS, CW_ERROR_NOT_READY, or a device fault already seen; a
 *    fault not yet seen is reported by waiters, callbacks and fds);
 *  - cw_future_poll of an EVENT future needs cuEventQuery: it returns
 *    CW_SUCCESS or a fault only when cuweave already saw one, else
 *    CW_ERROR_NOT_PERMITTED with a detail that says why. Nothing of that
 *    refusal is remembered: the future stays usable elsewhere;
 *  - cw_future_set_callback and cw_future_get_fd work; on an EVENT future
 *    cuweave cannot ask the driver whether it completed, so the callback
 *    runs (and the fd becomes readable) on the watcher thread, within about
 *    a millisecond if it has;
 *  - cw_future_wait of a future that has not completed, cw_future_rearm,
 *    cw_future_create and cw_when_all return CW_ERROR_NOT_PERMITTED.
 * cw_future_destroy and other cuweave calls that reach the driver must not
 * be made there.
 */
typedef void (*cw_future_fn)(void *user, cw_future *future, cw_status status);

/*
 * Creates a future and enqueues its marker on s now: it completes when the
 * work enqueued on s before this call is done. Returns CW_SUCCESS,
 * CW_ERROR_INVALID_ARGUMENT, CW_ERROR_INVALID_HANDLE,
 * CW_ERROR_OUT_OF_MEMORY, CW_ERROR_NOT_PERMITTED (inside a HOST_FUNC
 * future's callback), or the driver's error. The future keeps the
 * stream's context alive (not the stream).
 */
CW_API cw_status cw_future_create(cw_future **out, cw_stream *s, cw_future_kind kind);

/*
 * Re-arms a completed future on s (the same or another stream of the same
 * context) without allocating: the marker is enqueued again and the fd and
 * callback are reset (the callback must be set again). Returns
 * CW_ERROR_INVALID_STATE when the previous marker has not completed,
 * CW_ERROR_NOT_PERMITTED inside a HOST_FUNC future's callback.
 */
CW_API cw_status cw_future_rearm(cw_future *f, cw_stream *s);

/* CW_SUCCESS when complete, CW_ERROR_NOT_READY when not yet, or the
 * device error. Never blocks; lock-free. A query error that is not a device
 * fault (the driver refusing the call, say) is returned but never
 * remembered: only a device fault sticks to the future. Inside a HOST_FUNC
 * future's callback: see cw_future_fn (CW_ERROR_NOT_PERMITTED for an EVENT
 * future cuweave cannot answer for without the driver). */
CW_API cw_status cw_future_poll(cw_future *f);

/*
 * Blocks until the future completes or timeout_us microseconds pass
 * (negative: no limit; 0: checks once and returns CW_ERROR_TIMEOUT when not
 * complete). A timeout too large to represent as a point of the monotonic
 * clock in nanoseconds (INT64_MAX, or anything past about 9.2e15 us less
 * the uptime: some 292 years) also means no limit: it never ends the wait
 * early. A WRITE_VALUE wait starts with a short spin that reads no clock
 * (256 turns, a few microseconds), so its timeout may end that much late.
 * Returns CW_SUCCESS, CW_ERROR_TIMEOUT, or the device error; inside a
 * HOST_FUNC future's callback, CW_ERROR_NOT_PERMITTED unless the future has
 * completed. Any number of threads may wait.
 */
CW_API cw_status cw_future_wait(cw_future *f, int64_t timeout_us);

/*
 * Sets how long a WRITE_VALUE waiter spins before it starts sleeping
 * (default 200 us). No effect on HOST_FUNC futures.
 */
CW_API cw_status cw_future_set_spin(cw_future *f, unsigned spin_us);

/*
 * Sets the completion callback (replacing none: a second call returns
 * CW_ERROR_INVALID_STATE). When the future is already complete the callback
 * runs now, on this thread, before the call returns (but for an EVENT
 * future set inside a HOST_FUNC future's callback: see cw_future_fn).
 */
CW_API cw_status cw_future_set_callback(cw_future *f, cw_future_fn fn, void *user);

/*
 * Writes a file descriptor (an eventfd, owned by the future) that becomes
 * readable when the future completes, for poll/epoll/select loops. Reading
 * it is allowed but not needed. Valid until the future is destroyed.
 */
CW_API cw_status cw_future_get_fd(cw_future *f, int *fd);

/* Writes the future's context (that of the stream it was made on) (borrowed: valid while the future lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_future_get_context(const cw_future *f, cw_context **ctx);

/*
 * Destroys the future. If its marker has not completed yet, the destroy
 * waits for it (a marker holds on to the future's memory, and a WRITE_VALUE
 * marker writes the future's word, which the next future may reuse). Only a
 * device fault ends that wait early (the marker then never runs); another
 * error of the driver's query does not. When the context faulted before a
 * HOST_FUNC marker ran, the driver may still hold the marker, so the
 * future's memory (a few hundred bytes) is deliberately not freed and a
 * warning is logged. Sets *f to NULL; accepts NULL. Not inside a HOST_FUNC
 * future's callback (see cw_future_fn).
 */
CW_API void cw_future_destroy(cw_future **f);

/*
 * A future that completes when every one of streams[0..n-1] has finished the
 * work enqueued on it so far (Holoscan's CudaStreamCondition). All streams
 * must share one context. The marker goes on an internal stream of that
 * context's fork pool that waits for each of them.
 */
CW_API cw_status cw_when_all(cw_future **out, cw_stream *const *streams, size_t n, cw_future_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_FUTURE_H */
