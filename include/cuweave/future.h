/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: host completion (futures).
 *
 * A cw_future completes when the work enqueued on a stream before it is
 * done. Two mechanisms, chosen when it is made:
 *
 *  CW_FUTURE_HOST_FUNC    a host function (cuLaunchHostFunc) runs on a
 *                         driver thread when the stream reaches it and wakes
 *                         everything waiting; a waiter spins on the counter it
 *                         sets for spin_us, then sleeps on a condition
 *                         variable. Works on every stream; slower (tens of
 *                         microseconds on the H100).
 *  CW_FUTURE_WRITE_VALUE  the stream writes a sequence number
 *                         (cuStreamWriteValue32) into mapped pinned host
 *                         memory; a waiter spins on it for a short while
 *                         (spin_us) and then polls it with sleeps that grow
 *                         up to 1 ms. The fastest way for a thread to learn
 *                         of completion (a few microseconds).
 *  CW_FUTURE_EVENT        the stream records an event; a waiter spins on
 *                         cuEventQuery for spin_us, then, waiting with no
 *                         limit on a context made with
 *                         CU_CTX_SCHED_BLOCKING_SYNC, sleeps in
 *                         cuEventSynchronize until the GPU's completion
 *                         wakes it; on other contexts, or with a limit, it
 *                         polls with sleeps that grow up to 1 ms. The cheapest
 *                         marker to enqueue (one
 *                         cuEventRecord, where WRITE_VALUE enqueues a memory
 *                         operation): for hosts that enqueue many frames and
 *                         wait for few. Each check is a driver call.
 *
 * Callbacks and fds are served by the driver's callback thread (HOST_FUNC)
 * and by one cuweave watcher thread (WRITE_VALUE, EVENT), started on first
 * need; a callback not run yet when the future is rearmed or destroyed runs
 * then, on that thread (cw_future_fn).
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
 * Completion callback. Runs exactly once per completion (per arming it was
 * set on): on the driver's callback thread (HOST_FUNC), on cuweave's watcher
 * thread (WRITE_VALUE, EVENT), or on the calling thread when a call finds
 * the future complete with its callback not yet run: cw_future_set_callback
 * on a completed future, cw_future_rearm, and cw_future_destroy run it
 * before they return. status is CW_SUCCESS or the error the waiter sees.
 * After a device fault the driver never runs a HOST_FUNC marker; cuweave's
 * watcher thread then reports the fault (callback with
 * CW_ERROR_DEVICE_FAULT, fd readable) within about a millisecond.
 *
 * Destroy cancels nothing: cw_future_destroy waits for a marker that has
 * not run (see there), so every arming completes or faults, and a callback
 * set on it runs before destroy returns. This is on purpose: a callback
 * often owns something (a buffer to give back, a count to drop), and a
 * destroy that raced the watcher used to drop it silently, while a HOST_FUNC
 * callback cannot be taken back once the driver started its host function.
 * The price is where it may run: inside cw_future_set_callback,
 * cw_future_rearm and cw_future_destroy on the calling thread, and those
 * calls (and destroy of a future whose callback runs on another thread,
 * which waits for it to return) must not be made while holding a lock that
 * the callback takes.
 *
 * Inside a callback: it must not call CUDA or cuweave functions that
 * enqueue work or wait, but for these calls on futures, which it may make
 * on its own future and on others (those of the same watcher pass
 * included):
 *  - cw_future_destroy of another future (its callback, if set and not run,
 *    runs first, nested in this one); of its own future, which is freed
 *    once this callback returns (the handle must not be used after the
 *    call). A destroy of a future whose marker has not run waits for it
 *    there, holding up the other callbacks of that thread meanwhile;
 *  - cw_future_rearm of its own future or another (the callback of the new
 *    arming must be set again); inside a callback that cw_future_destroy
 *    runs, a rearm of that future returns CW_ERROR_INVALID_STATE;
 *  - cw_future_set_callback of other futures (its own has its callback:
 *    CW_ERROR_INVALID_STATE), cw_future_get_fd and cw_future_poll of any,
 *    its own included.
 * A HOST_FUNC future's callback runs on the driver's callback thread, where
 * CUDA allows no CUDA call at all; cuweave knows when it runs one there and
 * then makes no driver call on its behalf:
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
 *    cw_future_create, cw_future_when_all and cw_resident_launch (which
 *    could wait for a call on another thread that waits for this
 *    callback) return CW_ERROR_NOT_PERMITTED;
 *  - cw_future_destroy destroys nothing there (it could wait for a marker
 *    the driver cannot run meanwhile): it logs a CW_LOG_WARNING and leaves
 *    the handle as it was, to be destroyed elsewhere.
 * Other cuweave calls that reach the driver must not be made there.
 */
typedef void (*cw_future_fn)(void *user, cw_future *future, cw_status status);

/*
 * Creates a future and enqueues its marker on s now: it completes when the
 * work enqueued on s before this call is done. The future keeps the
 * stream's context alive (not the stream). Destroy it with
 * cw_future_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new future.
 *   CW_ERROR_INVALID_ARGUMENT  out or s is NULL; kind is not a cw_future_kind.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_INVALID_STATE     s is capturing (the future would complete at
 *                              every launch of the graph).
 *   CW_ERROR_NOT_PERMITTED     inside a HOST_FUNC future's callback.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_future_create(cw_future **out, cw_stream *s, cw_future_kind kind);

/*
 * Re-arms a completed future on s (the same or another stream of the same
 * context) without allocating: the marker is enqueued again and the fd and
 * callback are reset (the callback must be set again). A callback of the
 * previous completion that has not run yet runs first, on this thread (see
 * cw_future_fn); when that callback rearms f itself, this call returns
 * CW_SUCCESS without arming it a second time.
 *
 * Returns:
 *   CW_SUCCESS                 the marker is enqueued on s.
 *   CW_ERROR_INVALID_ARGUMENT  f or s is NULL; s is on another context.
 *   CW_ERROR_INVALID_HANDLE    f or s is not live; the callback this call ran
 *                              destroyed f (it is gone).
 *   CW_ERROR_INVALID_STATE     the previous marker has not completed; s is
 *                              capturing; f is being destroyed (a callback
 *                              that cw_future_destroy runs rearms f).
 *   CW_ERROR_NOT_PERMITTED     inside a HOST_FUNC future's callback.
 *   CW_ERROR_DEVICE_FAULT      the context faulted before the previous marker
 *                              (asked of the driver when the marker has not
 *                              run), for every kind.
 *   CW_ERROR_OUT_OF_MEMORY     the watcher thread could not start (a future
 *                              with an fd).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 */
CW_API cw_status cw_future_rearm(cw_future *f, cw_stream *s);

/*
 * Asks whether the future has completed. Never blocks; lock-free. A query
 * error that is not a device fault (the driver refusing the call, say) is
 * returned but never remembered: only a device fault sticks to the future.
 *
 * Returns:
 *   CW_SUCCESS                 complete.
 *   CW_ERROR_NOT_READY         not yet: ask again.
 *   CW_ERROR_INVALID_ARGUMENT  f is NULL.
 *   CW_ERROR_INVALID_HANDLE    f is not a live future.
 *   CW_ERROR_DEVICE_FAULT      the context faulted before the marker ran.
 *   CW_ERROR_NOT_PERMITTED     inside a HOST_FUNC future's callback, for an
 *                              EVENT future cuweave cannot answer for without
 *                              the driver (see cw_future_fn).
 *   CW_ERROR_DRIVER            the driver's query failed (detail: the call).
 */
CW_API cw_status cw_future_poll(cw_future *f);

/*
 * Blocks until the future completes or timeout_us microseconds pass
 * (negative: no limit; 0: checks once). A timeout too large to represent as
 * a point of the monotonic clock in nanoseconds (INT64_MAX, or anything past
 * about 9.2e15 us less the uptime: some 292 years) also means no limit: it
 * never ends the wait early. A WRITE_VALUE or HOST_FUNC wait starts with a
 * short spin that reads no clock (256 turns, a few microseconds), so its
 * timeout may end that much late. Every kind spins for the future's spin_us
 * (cw_future_set_spin) before it sleeps: docs/threading.md, "How a wait
 * waits", gives each kind's checks and what a wait past the spin costs.
 * Any number of threads may wait.
 *
 * Returns:
 *   CW_SUCCESS                 complete.
 *   CW_ERROR_TIMEOUT           not complete within timeout_us.
 *   CW_ERROR_INVALID_ARGUMENT  f is NULL.
 *   CW_ERROR_INVALID_HANDLE    f is not a live future.
 *   CW_ERROR_DEVICE_FAULT      the context faulted before the marker ran.
 *   CW_ERROR_NOT_PERMITTED     inside a HOST_FUNC future's callback, when the
 *                              future has not completed.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 */
CW_API cw_status cw_future_wait(cw_future *f, int64_t timeout_us);

/*
 * Sets how long a waiter spins before it starts sleeping (default 200 us,
 * at most 10 s), for every kind: a WRITE_VALUE waiter spins on its word, a
 * HOST_FUNC waiter on the counter its host function sets, an EVENT waiter
 * on cuEventQuery. A wait that outlasts the spin polls with sleeps (a
 * HOST_FUNC wait sleeps on a condition variable; an EVENT wait with no
 * limit sleeps in cuEventSynchronize, woken by the completion) and may
 * return later than the completion by up to a sleep (docs/threading.md,
 * "How a wait waits").
 *
 * Returns:
 *   CW_SUCCESS                 set.
 *   CW_ERROR_INVALID_ARGUMENT  f is NULL; spin_us is above 10000000.
 *   CW_ERROR_INVALID_HANDLE    f is not a live future.
 */
CW_API cw_status cw_future_set_spin(cw_future *f, unsigned spin_us);

/*
 * Sets the completion callback (replacing none). When the future is already
 * complete the callback runs now, on this thread, before the call returns
 * (but for an EVENT future set inside a HOST_FUNC future's callback: see
 * cw_future_fn).
 *
 * Returns:
 *   CW_SUCCESS                 set (and, when complete, run).
 *   CW_ERROR_INVALID_ARGUMENT  f or fn is NULL.
 *   CW_ERROR_INVALID_HANDLE    f is not a live future.
 *   CW_ERROR_INVALID_STATE     the future has a callback already.
 *   CW_ERROR_OUT_OF_MEMORY     the watcher thread could not start.
 */
CW_API cw_status cw_future_set_callback(cw_future *f, cw_future_fn fn, void *user);

/*
 * Writes a file descriptor (an eventfd, owned by the future) that becomes
 * readable when the future completes, for poll/epoll/select loops. Reading
 * it is allowed but not needed. Valid until the future is destroyed.
 *
 * Returns:
 *   CW_SUCCESS                 *fd is the eventfd.
 *   CW_ERROR_INVALID_ARGUMENT  f or fd is NULL.
 *   CW_ERROR_INVALID_HANDLE    f is not a live future.
 *   CW_ERROR_OUT_OF_MEMORY     eventfd failed, or the watcher thread could
 *                              not start.
 */
CW_API cw_status cw_future_get_fd(cw_future *f, int *fd);

/*
 * Destroys the future. If its marker has not completed yet, the destroy
 * waits for it (a marker holds on to the future's memory, and a WRITE_VALUE
 * marker writes the future's word, which the next future may reuse). Only a
 * device fault ends that wait early (the marker then never runs); another
 * error of the driver's query does not (but for an EVENT future, whose
 * marker holds nothing of it: an error the driver keeps giving ends the wait
 * and is the status its callback gets). Then the callback, if one is set and
 * has not run for this arming, runs on this thread before destroy returns,
 * with CW_SUCCESS or CW_ERROR_DEVICE_FAULT: destroy cancels no callback (see
 * cw_future_fn: do not destroy while holding a lock the callback takes). A
 * callback of this future running on another thread (the watcher's) is
 * waited for. Inside the future's own callback the future is freed once the
 * callback returns. When the context faulted before a HOST_FUNC marker ran,
 * the driver may still hold the marker, so the future's memory (a few
 * hundred bytes) is deliberately not freed and a warning is logged. Sets *f
 * to NULL; accepts NULL and a pointer to NULL; never fails. A handle that is
 * not a live future is ignored (logged at CW_LOG_WARNING; the thread's
 * detail is left as it was). Inside a HOST_FUNC future's callback it
 * destroys nothing and leaves *f as it was (logged at CW_LOG_WARNING; see
 * cw_future_fn).
 *
 * Returns: nothing.
 */
CW_API void cw_future_destroy(cw_future **f);

/*
 * A future that completes when every one of streams[0..n-1] has finished the
 * work enqueued on it so far (Holoscan's CudaStreamCondition). All streams
 * must share one context. The marker goes on an internal stream of that
 * context's fork pool that waits for each of them. Destroy it with
 * cw_future_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new future.
 *   CW_ERROR_INVALID_ARGUMENT  out or streams is NULL; n is 0; an entry is
 *                              NULL or on another context than streams[0];
 *                              kind is not a cw_future_kind.
 *   CW_ERROR_INVALID_HANDLE    an entry is not a live stream (the detail
 *                              names it).
 *   CW_ERROR_INVALID_STATE     a stream is capturing.
 *   CW_ERROR_NOT_PERMITTED     inside a HOST_FUNC future's callback.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_CAPTURE           the ordering broke a capture (detail: the call).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_future_when_all(cw_future **out, cw_stream *const *streams, size_t n, cw_future_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_FUTURE_H */
