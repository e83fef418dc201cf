/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: streams, stream pools, ordering between streams, timers.
 *
 * Every stream cuweave creates is non-blocking (CU_STREAM_NON_BLOCKING)
 * unless the caller explicitly asks for a blocking one: a blocking stream
 * synchronises with the legacy NULL stream, so every operation on it is an
 * implicit barrier across the whole context (the mistake libvmaf's ADR-0378
 * records). cuweave never enqueues its own work on the NULL stream; a NULL
 * stream handed over by a host program is wrapped and ordered with events.
 *
 * Ordering between streams (cw_stream_wait, fork, join) records an
 * event on one stream and makes the other wait for it on the GPU; none of
 * these calls blocks the calling thread.
 */
#ifndef CUWEAVE_STREAM_H
#define CUWEAVE_STREAM_H

#include "cuweave/common.h"
#include "cuweave/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_stream cw_stream;
typedef struct cw_stream_pool cw_stream_pool;
typedef struct cw_timer cw_timer;

/* Stream flags. */
#define CW_STREAM_NON_BLOCKING 0x0u /* default: no implicit sync with the NULL stream */
#define CW_STREAM_BLOCKING 0x1u     /* opt in to legacy NULL-stream synchronisation */

typedef struct cw_stream_settings {
    unsigned flags; /* CW_STREAM_NON_BLOCKING (default) or CW_STREAM_BLOCKING */
    int priority;   /* 0 (default); clamped into the context's range, see cw_stream_get_info */
    uint8_t reserved[56];
} cw_stream_settings;

/*
 * Fills *s with the defaults: non-blocking, priority 0. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_stream_settings_default(cw_stream_settings *s);

/*
 * Creates a stream on ctx (cuStreamCreateWithPriority; on a partition's
 * green context, cuGreenCtxStreamCreate). settings may be NULL for the
 * defaults. A priority outside the context's range is clamped into it;
 * cw_stream_get_info reports the priority the stream has. The stream keeps
 * ctx alive. Destroy it with cw_stream_destroy. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new stream.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; settings has unknown flag
 *                              bits or nonzero reserved bytes.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     CW_STREAM_BLOCKING on a partition (the driver
 *                              makes green-context streams non-blocking only).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_stream_create(cw_stream **out, cw_context *ctx, const cw_stream_settings *settings);

/*
 * Wraps a CUstream owned by the caller, without ownership: cuweave never
 * destroys it and never enqueues its own work on it except the events and
 * completion markers the caller asks for. `stream` may be NULL (the legacy
 * default stream of the context, as video tools hand over), CU_STREAM_LEGACY
 * ((CUstream)0x1) or CU_STREAM_PER_THREAD ((CUstream)0x2). The stream must
 * belong to ctx. Destroy the wrapper with cw_stream_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new wrapper.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; the stream belongs to
 *                              another context (the detail says so).
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context, or the driver does
 *                              not know the stream.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_stream_wrap(cw_stream **out, cw_context *ctx, CUstream stream);

/*
 * Destroys a stream made by cw_stream_create (pending work still completes),
 * or drops a wrapper made by cw_stream_wrap (the CUstream is left alone).
 * Sets *s to NULL; accepts NULL and a pointer to NULL; never fails. A stream
 * of a pool is not the caller's to destroy (give a leased one back with
 * cw_stream_pool_release): *s is set to NULL and nothing else happens but a
 * warning (CW_LOG_WARNING; the thread's detail is left as it was). A handle
 * that is not a live stream is ignored the same way. A failing
 * cuStreamDestroy is logged.
 *
 * Returns: nothing.
 */
CW_API void cw_stream_destroy(cw_stream **s);

typedef struct cw_stream_info {
    CUstream handle;      /* the driver stream (NULL for the wrapped legacy stream) */
    cw_context *context;  /* the stream's context (borrowed: valid while the stream lives) */
    int device;           /* device ordinal */
    int priority;         /* the stream's priority (clamped into its context's range) */
    unsigned flags;       /* CW_STREAM_NON_BLOCKING or CW_STREAM_BLOCKING */
    int owned;            /* 1: made by cuweave; 0: wrapped */
    int from_pool;        /* 1: belongs to a stream pool */
    int is_null;          /* 1: the legacy NULL stream (or CU_STREAM_LEGACY / PER_THREAD) */
    uint8_t reserved[32]; /* zeroed; room for new fields */
} cw_stream_info;

/*
 * Fills *info. No driver call, no lock: cheap enough to read the handle or
 * the context of a stream on every use. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info describes s.
 *   CW_ERROR_INVALID_ARGUMENT  s or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 */
CW_API cw_status cw_stream_get_info(const cw_stream *s, cw_stream_info *info);

/*
 * Blocks until all work on s is done.
 *
 * Returns:
 *   CW_SUCCESS                 all work on s is done.
 *   CW_ERROR_INVALID_ARGUMENT  s is NULL.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_DEVICE_FAULT      the work (or earlier work in the context)
 *                              faulted.
 *   CW_ERROR_CAPTURE           s is capturing (the capture is invalidated).
 *   CW_ERROR_DRIVER            the driver call failed (detail: the call).
 */
CW_API cw_status cw_stream_synchronize(cw_stream *s);

/*
 * Asks whether all work on s is done. Does not block.
 *
 * Returns:
 *   CW_SUCCESS                 all work on s is done.
 *   CW_ERROR_NOT_READY         not yet: ask again.
 *   CW_ERROR_INVALID_ARGUMENT  s is NULL.
 *   CW_ERROR_INVALID_HANDLE    s is not a live stream.
 *   CW_ERROR_DEVICE_FAULT      the work (or earlier work in the context)
 *                              faulted.
 *   CW_ERROR_CAPTURE           s is capturing (the capture is invalidated).
 *   CW_ERROR_DRIVER            the driver call failed (detail: the call).
 */
CW_API cw_status cw_stream_query(cw_stream *s);

/* ---- ordering ----------------------------------------------------------- */

/*
 * Makes work enqueued on dst from now on wait for the work enqueued on src so
 * far (an event recorded on src, waited for on dst). Does not block the
 * CPU. dst and src may belong to different contexts of the same device.
 * dst == src is allowed and does nothing. No allocation, no lock; two driver
 * calls (cuEventRecord, cuStreamWaitEvent) on the stream's own event. To
 * wait for several streams, call it once for each (no allocation either).
 * Thread-safety: concurrent calls with the same src may make dst wait for
 * slightly more of src's work than asked (never less).
 *
 * Returns:
 *   CW_SUCCESS                 dst's later work waits for src's work so far.
 *   CW_ERROR_INVALID_ARGUMENT  dst or src is NULL.
 *   CW_ERROR_INVALID_HANDLE    dst or src is not a live stream.
 *   CW_ERROR_CAPTURE           the record or wait broke a capture on either
 *                              stream (detail: the call).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 */
CW_API cw_status cw_stream_wait(cw_stream *dst, cw_stream *src);

/*
 * Fork: *child is a stream on which work runs only after everything
 * enqueued on parent so far. The child is leased from parent's pool when
 * parent came from a lease-mode pool, otherwise from its context's own fork
 * pool (non-blocking, unbounded, the parent's priority class is not copied).
 * In a single-mode pool (CUWEAVE_SERIALIZE=1) the child is parent itself.
 * Give the child back with cw_stream_join.
 *
 * Returns:
 *   CW_SUCCESS                 *child is the child stream.
 *   CW_ERROR_INVALID_ARGUMENT  child or parent is NULL.
 *   CW_ERROR_INVALID_HANDLE    parent is not a live stream.
 *   CW_ERROR_POOL_EXHAUSTED    parent's lease pool has no free stream and may
 *                              not grow.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_CAPTURE           the ordering broke a capture (detail: the call).
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *child is untouched.
 */
CW_API cw_status cw_stream_fork(cw_stream **child, cw_stream *parent);

/*
 * Join: parent's later work waits for everything enqueued on *child; the
 * child goes back to where fork took it from and *child is set to NULL.
 * The child's work still runs; only the handle is given back. When the
 * ordering fails the child is given back all the same (*child NULL) and
 * the status says the parent does not wait for it; only a capture the
 * ordering broke keeps the child (*child unchanged; join again once the
 * capture has ended).
 *
 * Returns:
 *   CW_SUCCESS                 joined; *child is NULL.
 *   CW_ERROR_INVALID_ARGUMENT  parent, child or *child is NULL; *child was not
 *                              made by cw_stream_fork.
 *   CW_ERROR_INVALID_HANDLE    parent or *child is not a live stream.
 *   CW_ERROR_INVALID_STATE     *child was joined or released already, or is a
 *                              named stream of its pool (nothing changed).
 *   CW_ERROR_CAPTURE           the ordering broke a capture (detail: the
 *                              call); the child is kept.
 *   CW_ERROR_DEVICE_FAULT      the context faulted: the child was given back
 *                              without the ordering.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call): the
 *                              child was given back without the ordering.
 */
CW_API cw_status cw_stream_join(cw_stream *parent, cw_stream **child);

/* ---- stream pools ------------------------------------------------------- */

typedef enum cw_pool_mode {
    CW_POOL_LEASE = 0,       /* acquire gives a stream no one else holds until release */
    CW_POOL_ROUND_ROBIN = 1, /* get_next gives the pool's streams in turn (one atomic) */
    CW_POOL_SINGLE = 2       /* every request gets the same stream (debug serialisation) */
} cw_pool_mode;

typedef struct cw_stream_pool_settings {
    cw_pool_mode mode;      /* default CW_POOL_LEASE */
    unsigned flags;         /* stream flags, default CW_STREAM_NON_BLOCKING */
    int priority;           /* default 0, clamped as in cw_stream_create */
    unsigned reserved_streams; /* lease: streams created up front (default 1);
                                  round-robin: the fixed set size (default 4, 0 means 4) */
    unsigned max_streams;   /* lease: at most this many streams (0 = unbounded, default);
                               the other modes ignore it */
    uint8_t reserved[44];
} cw_stream_pool_settings;

/*
 * Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_stream_pool_settings_default(cw_stream_pool_settings *s);

/*
 * Creates a pool on ctx. When the environment variable CUWEAVE_SERIALIZE is
 * "1" (read when the first pool is created), every pool is made in
 * CW_POOL_SINGLE mode whatever the settings say; cw_stream_pool_get_info
 * reports the mode in force. Destroy it with cw_stream_pool_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new pool.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL; settings has a bad mode or
 *                              flags, reserved_streams above max_streams or
 *                              above 65536, or nonzero reserved bytes.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NOT_SUPPORTED     CW_STREAM_BLOCKING on a partition.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_stream_pool_create(cw_stream_pool **out, cw_context *ctx,
                                       const cw_stream_pool_settings *settings);

/*
 * Destroys the pool and all its streams (work already enqueued completes).
 * Streams still leased become invalid: release them first. Sets *pool to
 * NULL; accepts NULL and a pointer to NULL; never fails. A handle that is
 * not a live pool is ignored (logged at CW_LOG_WARNING; the thread's detail
 * is left as it was). Not to be called while another thread uses the
 * pool.
 *
 * Returns: nothing.
 */
CW_API void cw_stream_pool_destroy(cw_stream_pool **pool);

/*
 * Lease mode: hands out a stream no one else holds until it is released
 * (cw_stream_pool_release). When none is free and max_streams are out, waits
 * up to timeout_us microseconds for a release: 0 does not wait
 * (CW_ERROR_POOL_EXHAUSTED at once); a negative value, or one too large to
 * represent as a deadline of the monotonic clock (INT64_MAX, or anything
 * past some 292 years), waits without limit; any other positive value is
 * waited in full (no overflow ends it early), then CW_ERROR_TIMEOUT. A
 * stream handed over as the wait times out is returned (CW_SUCCESS).
 * Round-robin and single modes: same as cw_stream_pool_get_next (the stream
 * is shared; release accepts it back and does nothing).
 * Free stream available and nobody waiting: one load and one CAS, no lock,
 * no allocation. A new stream is created (slow path) when none is free and
 * the pool may grow. While threads wait, released streams are theirs (see
 * the guarantees below): an acquire then takes the pool's lock, and does
 * not wait (timeout_us 0: CW_ERROR_POOL_EXHAUSTED) or waits behind them.
 *
 * Guarantees of a lease pool (every build, any architecture):
 * - A stream is leased to at most one holder at a time, and is on the free
 *   list at most once: a second release of a stream, a release of a named
 *   stream and a join of one are refused (CW_ERROR_INVALID_STATE).
 * - No lost wake-up: a stream released while a thread waits reaches a
 *   waiter (the release and the waiter's check of the free list are ordered
 *   by sequentially consistent atomics, not by the processor's memory
 *   model).
 * - Waiters first, in order: a released stream goes to the thread that has
 *   waited longest (FIFO). A waiter is served before any acquire that
 *   starts after it began to wait; only the waiters that began before it,
 *   and acquires already under way when it began (one stream each), can
 *   take a stream before it. So it waits for at most (waiters ahead of it +
 *   acquires then in progress + 1) releases.
 * - Fairness costs throughput only when threads wait: each hand-off wakes
 *   one waiter, where a barging pool would let the releasing thread take
 *   the stream back at once.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the stream.
 *   CW_ERROR_INVALID_ARGUMENT  out or pool is NULL.
 *   CW_ERROR_INVALID_HANDLE    pool is not a live pool.
 *   CW_ERROR_POOL_EXHAUSTED    timeout_us 0 and no stream free.
 *   CW_ERROR_TIMEOUT           no stream was released within timeout_us.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory to grow the pool.
 *   CW_ERROR_NOT_SUPPORTED     growing a pool of CW_STREAM_BLOCKING streams
 *                              on a partition.
 *   CW_ERROR_DRIVER            growing the pool failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_stream_pool_acquire(cw_stream **out, cw_stream_pool *pool, int64_t timeout_us);

/*
 * Gives a leased stream back and sets *s to NULL. Lock-free while nobody
 * waits; when threads wait in cw_stream_pool_acquire it takes the pool's
 * lock and hands the stream to the one that waited longest. A stale pointer
 * to a stream that was released and has been leased again cannot be told
 * from its new holder's: do not keep a stream after giving it back.
 *
 * Returns:
 *   CW_SUCCESS                 given back (round-robin and single pools:
 *                              nothing to do); *s is NULL.
 *   CW_ERROR_INVALID_ARGUMENT  pool, s or *s is NULL; the stream is not from
 *                              this pool.
 *   CW_ERROR_INVALID_HANDLE    pool or *s is not live.
 *   CW_ERROR_INVALID_STATE     the stream is not leased (a double release) or
 *                              is a named stream (cw_stream_pool_acquire_named:
 *                              the pool keeps it until
 *                              cw_stream_pool_release_owner); nothing changed,
 *                              *s left as it was.
 */
CW_API cw_status cw_stream_pool_release(cw_stream_pool *pool, cw_stream **s);

/*
 * Round-robin mode: the next stream of the fixed set, in turn (one atomic
 * fetch-add). Single mode: the one stream. The stream stays the pool's; do
 * not release it.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the stream (borrowed from the pool).
 *   CW_ERROR_INVALID_ARGUMENT  pool or out is NULL.
 *   CW_ERROR_INVALID_HANDLE    pool is not a live pool.
 *   CW_ERROR_INVALID_STATE     a lease pool (use cw_stream_pool_acquire).
 */
CW_API cw_status cw_stream_pool_get_next(cw_stream_pool *pool, cw_stream **out);

/*
 * Named streams: the stream `owner` uses under `name`. The first call with a
 * given (owner, name) takes a stream as acquire does (without waiting) and
 * keeps it; later calls return the same stream. owner is any pointer that
 * identifies the user (an operator, a thread); NULL is a valid owner. name:
 * 1..63 bytes. Takes a lock (named lookups are not a hot path). The stream
 * is held by the pool's named table until cw_stream_pool_release_owner;
 * cw_stream_pool_release and cw_stream_join refuse it
 * (CW_ERROR_INVALID_STATE).
 *
 * Returns:
 *   CW_SUCCESS                 *out is the owner's stream of that name.
 *   CW_ERROR_INVALID_ARGUMENT  out, pool or name is NULL; name is empty or
 *                              64 bytes or longer.
 *   CW_ERROR_INVALID_HANDLE    pool is not a live pool.
 *   CW_ERROR_POOL_EXHAUSTED    a new name and no stream free.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            growing the pool failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_stream_pool_acquire_named(cw_stream **out, cw_stream_pool *pool, const void *owner,
                                              const char *name);

/*
 * Gives back every named stream of owner (to the waiters of
 * cw_stream_pool_acquire first). Writes how many to *count (may be NULL).
 * Each named stream goes back exactly once: a second call finds none.
 *
 * Returns:
 *   CW_SUCCESS                 given back (none is fine).
 *   CW_ERROR_INVALID_ARGUMENT  pool is NULL.
 *   CW_ERROR_INVALID_HANDLE    pool is not a live pool.
 *   CW_ERROR_INVALID_STATE     a stream the named table no longer held (not
 *                              reachable through this API, which refuses
 *                              every other way of giving a named stream
 *                              back): it is dropped from the table and not
 *                              put on the free list a second time; the others
 *                              are still given back.
 */
CW_API cw_status cw_stream_pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count);

typedef struct cw_stream_pool_info {
    cw_context *context; /* the pool's context (borrowed: valid while the pool lives) */
    size_t created;      /* streams created by the pool */
    size_t leased;       /* lease mode: streams out now (named ones included) */
    size_t idle;         /* lease mode: streams free now */
    size_t named;        /* named streams held */
    cw_pool_mode mode;   /* mode in force (CW_POOL_SINGLE under CUWEAVE_SERIALIZE=1) */
    uint8_t reserved[28]; /* zeroed; room for new fields */
} cw_stream_pool_info;

/*
 * Fills *info. No driver call; takes the pool's lock briefly (for the named
 * count).
 *
 * Returns:
 *   CW_SUCCESS                 *info describes the pool.
 *   CW_ERROR_INVALID_ARGUMENT  pool or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    pool is not a live pool.
 */
CW_API cw_status cw_stream_pool_get_info(const cw_stream_pool *pool, cw_stream_pool_info *info);

/* ---- timers ------------------------------------------------------------- */

/*
 * A pair of timing events on ctx. The timer keeps ctx alive. Destroy it with
 * cw_timer_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new timer.
 *   CW_ERROR_INVALID_ARGUMENT  out or ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *out is untouched.
 */
CW_API cw_status cw_timer_create(cw_timer **out, cw_context *ctx);

/*
 * Destroys the timer and its events. Sets *t to NULL; accepts NULL and a
 * pointer to NULL; never fails. A handle that is not a live timer is ignored
 * (logged at CW_LOG_WARNING; the thread's detail is left as it was).
 *
 * Returns: nothing.
 */
CW_API void cw_timer_destroy(cw_timer **t);

/*
 * Records the start event on s. s must be on the timer's context.
 *
 * Returns:
 *   CW_SUCCESS                 recorded.
 *   CW_ERROR_INVALID_ARGUMENT  t or s is NULL; s is on another context.
 *   CW_ERROR_INVALID_HANDLE    t or s is not live.
 *   CW_ERROR_CAPTURE           the record broke a capture (detail: the call).
 *   CW_ERROR_DRIVER            the driver call failed (detail: the call).
 */
CW_API cw_status cw_timer_start(cw_timer *t, cw_stream *s);

/*
 * Records the stop event on s. s must be on the timer's context.
 *
 * Returns:
 *   CW_SUCCESS                 recorded.
 *   CW_ERROR_INVALID_ARGUMENT  t or s is NULL; s is on another context.
 *   CW_ERROR_INVALID_HANDLE    t or s is not live.
 *   CW_ERROR_INVALID_STATE     start was not recorded.
 *   CW_ERROR_CAPTURE           the record broke a capture (detail: the call).
 *   CW_ERROR_DRIVER            the driver call failed (detail: the call).
 */
CW_API cw_status cw_timer_stop(cw_timer *t, cw_stream *s);

/*
 * Writes the milliseconds between start and stop, as the GPU measured them.
 * Blocks until the stop event completes.
 *
 * Returns:
 *   CW_SUCCESS                 *ms is the time between the two events.
 *   CW_ERROR_INVALID_ARGUMENT  t or ms is NULL.
 *   CW_ERROR_INVALID_HANDLE    t is not a live timer.
 *   CW_ERROR_INVALID_STATE     start or stop was not recorded.
 *   CW_ERROR_DEVICE_FAULT      the work before stop faulted.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no cuEventElapsedTime.
 *   CW_ERROR_DRIVER            a driver call failed (detail: the call).
 * On failure *ms is untouched.
 */
CW_API cw_status cw_timer_get_elapsed_ms(cw_timer *t, float *ms);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_STREAM_H */
