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
 * Ordering between streams (cw_stream_wait, wait_all, fork, join) records an
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

/* Fills *s with the defaults: non-blocking, priority 0. NULL is ignored. */
CW_API void cw_stream_settings_default(cw_stream_settings *s);

/*
 * Creates a stream on ctx (cuStreamCreateWithPriority; on a partition's
 * green context, cuGreenCtxStreamCreate). settings may be NULL for the
 * defaults. A priority outside the context's range is clamped into it;
 * cw_stream_get_info reports the priority the stream has.
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (out or ctx NULL, unknown
 * flag bits, nonzero reserved bytes); CW_ERROR_INVALID_HANDLE;
 * CW_ERROR_NOT_SUPPORTED for CW_STREAM_BLOCKING on a partition (the driver
 * makes green-context streams non-blocking only); what the driver returns.
 * The stream keeps ctx alive. Thread-safe.
 */
CW_API cw_status cw_stream_create(cw_stream **out, cw_context *ctx, const cw_stream_settings *settings);

/*
 * Wraps a CUstream owned by the caller, without ownership: cuweave never
 * destroys it and never enqueues its own work on it except the events and
 * completion markers the caller asks for. `stream` may be NULL (the legacy
 * default stream of the context, as video tools hand over), CU_STREAM_LEGACY
 * ((CUstream)0x1) or CU_STREAM_PER_THREAD ((CUstream)0x2). The stream must
 * belong to ctx. Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT,
 * CW_ERROR_INVALID_HANDLE, or the driver's error (a stream of another context
 * gives CW_ERROR_INVALID_ARGUMENT with the reason).
 */
CW_API cw_status cw_stream_wrap(cw_stream **out, cw_context *ctx, CUstream stream);

/*
 * Destroys a stream made by cw_stream_create (pending work still completes),
 * or drops a wrapper made by cw_stream_wrap (the CUstream is left alone).
 * Sets *s to NULL; accepts NULL. A stream leased from a pool is not
 * destroyed (release it to its pool): the call then records
 * CW_ERROR_INVALID_STATE in the detail and does nothing else.
 */
CW_API void cw_stream_destroy(cw_stream **s);

typedef struct cw_stream_info {
    CUstream handle;  /* the driver stream (NULL for the wrapped legacy stream) */
    int device;       /* device ordinal */
    int priority;     /* the stream's priority as the driver reports it */
    unsigned flags;   /* CW_STREAM_NON_BLOCKING or CW_STREAM_BLOCKING */
    int owned;        /* 1: made by cuweave; 0: wrapped */
    int from_pool;    /* 1: belongs to a stream pool */
    int is_null;      /* 1: the legacy NULL stream (or CU_STREAM_LEGACY / PER_THREAD) */
    uint8_t reserved[36];
} cw_stream_info;

/* Fills *info, asking the driver for priority and flags. */
CW_API cw_status cw_stream_get_info(const cw_stream *s, cw_stream_info *info);

/* Writes the driver stream. Lock-free, no driver call. */
CW_API cw_status cw_stream_get_handle(const cw_stream *s, CUstream *handle);

/* Writes the ordinal of the stream's device. Lock-free, no driver call. */
CW_API cw_status cw_stream_get_device(const cw_stream *s, int *device);

/* Writes the stream's context (borrowed: valid while the stream lives). */
CW_API cw_status cw_stream_get_context(const cw_stream *s, cw_context **ctx);

/* Blocks until all work on s is done. CW_ERROR_DEVICE_FAULT when it faulted. */
CW_API cw_status cw_stream_synchronize(cw_stream *s);

/* CW_SUCCESS when all work on s is done, CW_ERROR_NOT_READY when not yet;
 * a fault gives CW_ERROR_DEVICE_FAULT. Does not block. */
CW_API cw_status cw_stream_query(cw_stream *s);

/* ---- ordering ----------------------------------------------------------- */

/*
 * Makes work enqueued on dst from now on wait for the work enqueued on src so
 * far (an event recorded on src, waited for on dst). Does not block the
 * CPU. dst and src may belong to different contexts of the same device.
 * dst == src is allowed and does nothing. No allocation, no lock; two driver
 * calls (cuEventRecord, cuStreamWaitEvent) on the stream's own event.
 * Thread-safety: concurrent calls with the same src may make dst wait for
 * slightly more of src's work than asked (never less).
 */
CW_API cw_status cw_stream_wait(cw_stream *dst, cw_stream *src);

/* cw_stream_wait for each of srcs[0..n-1] (NULL entries are skipped). */
CW_API cw_status cw_stream_wait_all(cw_stream *dst, cw_stream *const *srcs, size_t n);

/*
 * Fork: *child is a stream on which work runs only after everything
 * enqueued on parent so far. The child is leased from parent's pool when
 * parent came from a lease-mode pool, otherwise from its context's own fork
 * pool (non-blocking, unbounded, the parent's priority class is not copied).
 * In a single-mode pool (CUWEAVE_SERIALIZE=1) the child is parent itself.
 */
CW_API cw_status cw_stream_fork(cw_stream *parent, cw_stream **child);

/*
 * Join: parent's later work waits for everything enqueued on *child; the
 * child goes back to where fork took it from and *child is set to NULL.
 * The child's work still runs; only the handle is given back.
 */
CW_API cw_status cw_stream_join(cw_stream *parent, cw_stream **child);

/* ---- stream pools ------------------------------------------------------- */

typedef enum cw_pool_mode {
    CW_POOL_LEASE = 0,       /* acquire gives a stream no one else holds until release */
    CW_POOL_ROUND_ROBIN = 1, /* next gives the pool's streams in turn (one atomic) */
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

/* Fills *s with the defaults above. NULL is ignored. */
CW_API void cw_stream_pool_settings_default(cw_stream_pool_settings *s);

/*
 * Creates a pool on ctx. When the environment variable CUWEAVE_SERIALIZE is
 * "1" (read when the first pool is created), every pool is made in
 * CW_POOL_SINGLE mode whatever the settings say; cw_stream_pool_get_stats
 * reports the mode in force. Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT
 * (bad mode, flags, reserved > max, nonzero reserved bytes),
 * CW_ERROR_INVALID_HANDLE, CW_ERROR_OUT_OF_MEMORY, or the driver's error.
 */
CW_API cw_status cw_stream_pool_create(cw_stream_pool **out, cw_context *ctx,
                                       const cw_stream_pool_settings *settings);

/*
 * Destroys the pool and all its streams (work already enqueued completes).
 * Streams still leased become invalid: release them first. Sets *pool to
 * NULL; accepts NULL. Not to be called while another thread uses the pool.
 */
CW_API void cw_stream_pool_destroy(cw_stream_pool **pool);

/*
 * Lease mode: hands out a stream no one else holds until it is released.
 * When none is free and max_streams are out, returns CW_ERROR_POOL_EXHAUSTED
 * at once. Round-robin and single modes: same as cw_stream_pool_next (the
 * stream is shared; release accepts it back and does nothing).
 * Free stream available and nobody waiting: one load and one CAS, no lock,
 * no allocation. A new stream is created (slow path) when none is free and
 * the pool may grow. While threads wait in cw_stream_pool_acquire_wait,
 * released streams are theirs (see the guarantees below): acquire then takes
 * the pool's lock and returns CW_ERROR_POOL_EXHAUSTED.
 *
 * Guarantees of a lease pool (every build, any architecture):
 * - A stream is leased to at most one holder at a time, and is on the free
 *   list at most once: a second release of a stream, a release of a named
 *   stream and a join of one are refused (CW_ERROR_INVALID_STATE).
 * - No lost wake-up: a stream released while a thread waits in
 *   cw_stream_pool_acquire_wait reaches a waiter (the release and the
 *   waiter's check of the free list are ordered by sequentially consistent
 *   atomics, not by the processor's memory model).
 * - Waiters first, in order: a released stream goes to the thread that has
 *   waited longest (FIFO). A waiter is served before any acquire or
 *   acquire_wait that starts after it began to wait; only the waiters that
 *   began before it, and acquires already under way when it began (one
 *   stream each), can take a stream before it. So it waits for at most
 *   (waiters ahead of it + acquires then in progress + 1) releases.
 * - Fairness costs throughput only when threads wait: each hand-off wakes
 *   one waiter, where a barging pool would let the releasing thread take
 *   the stream back at once.
 */
CW_API cw_status cw_stream_pool_acquire(cw_stream_pool *pool, cw_stream **out);

/*
 * As cw_stream_pool_acquire, but waits up to timeout_us microseconds
 * (negative: forever; 0: no wait, as acquire) for a release when the pool
 * is exhausted; then CW_ERROR_TIMEOUT. Any positive value is waited in
 * full, INT64_MAX included (no overflow ends it early). Waiters are served
 * in the order they began to wait, before any acquire that starts later
 * (guarantees above). A stream handed over as the wait times out is
 * returned (CW_SUCCESS).
 */
CW_API cw_status cw_stream_pool_acquire_wait(cw_stream_pool *pool, cw_stream **out, int64_t timeout_us);

/*
 * Gives a leased stream back and sets *s to NULL. Lock-free while nobody
 * waits; when threads wait in cw_stream_pool_acquire_wait it takes the
 * pool's lock and hands the stream to the one that waited longest. Returns
 * CW_ERROR_INVALID_ARGUMENT when the stream is not from this pool, and
 * CW_ERROR_INVALID_STATE (nothing changed, *s left as it was) when it is not
 * leased (double release) or is a named stream (cw_stream_pool_named: the
 * pool keeps it until cw_stream_pool_release_owner). A stale pointer to a
 * stream that was released and has been leased again cannot be told from
 * its new holder's: do not keep a stream after giving it back.
 */
CW_API cw_status cw_stream_pool_release(cw_stream_pool *pool, cw_stream **s);

/*
 * Round-robin mode: the next stream of the fixed set, in turn (one atomic
 * fetch-add). Single mode: the one stream. Lease mode: CW_ERROR_INVALID_STATE
 * (use acquire). The stream stays the pool's; do not release it.
 */
CW_API cw_status cw_stream_pool_next(cw_stream_pool *pool, cw_stream **out);

/*
 * Named streams: the stream `owner` uses under `name`. The first call with a
 * given (owner, name) takes a stream as acquire does and keeps it; later
 * calls return the same stream. owner is any pointer that identifies the
 * user (an operator, a thread); NULL is a valid owner. name: 1..63 bytes.
 * Takes a lock (named lookups are not a hot path). The stream is borrowed:
 * the pool's named table holds it until cw_stream_pool_release_owner;
 * cw_stream_pool_release and cw_stream_join refuse it
 * (CW_ERROR_INVALID_STATE).
 */
CW_API cw_status cw_stream_pool_named(cw_stream_pool *pool, const void *owner, const char *name,
                                      cw_stream **out);

/*
 * Gives back every named stream of owner (to the waiters of
 * cw_stream_pool_acquire_wait first). Returns how many in *count (may be
 * NULL). Each named stream goes back exactly once: a second call finds
 * none. CW_ERROR_INVALID_STATE (the others still given back) for a stream
 * the named table no longer held (not reachable through this API, which
 * refuses every other way of giving a named stream back): it is dropped
 * from the table and not put on the free list a second time.
 */
CW_API cw_status cw_stream_pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count);

typedef struct cw_stream_pool_stats {
    cw_pool_mode mode; /* mode in force (CW_POOL_SINGLE under CUWEAVE_SERIALIZE=1) */
    size_t created;    /* streams created by the pool */
    size_t leased;     /* lease mode: streams out now (named ones included) */
    size_t idle;       /* lease mode: streams free now */
    size_t named;      /* named streams held */
    uint8_t reserved[32];
} cw_stream_pool_stats;

CW_API cw_status cw_stream_pool_get_stats(const cw_stream_pool *pool, cw_stream_pool_stats *stats);

/* Writes the pool's context (borrowed: valid while the pool lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_stream_pool_get_context(const cw_stream_pool *pool, cw_context **ctx);

/* ---- timers ------------------------------------------------------------- */

/* A pair of timing events on ctx. */
CW_API cw_status cw_timer_create(cw_timer **out, cw_context *ctx);
CW_API void cw_timer_destroy(cw_timer **t);
/* Records the start / stop event on s. s must be on the timer's context. */
CW_API cw_status cw_timer_start(cw_timer *t, cw_stream *s);
CW_API cw_status cw_timer_stop(cw_timer *t, cw_stream *s);
/*
 * Milliseconds between start and stop, as the GPU measured them. Blocks until
 * the stop event completes. CW_ERROR_INVALID_STATE when start or stop was
 * not recorded.
 */
CW_API cw_status cw_timer_elapsed_ms(cw_timer *t, float *ms);

/* Writes the timer's context (borrowed: valid while the timer lives; its device: cw_context_get_device). No driver call. */
CW_API cw_status cw_timer_get_context(const cw_timer *t, cw_context **ctx);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_STREAM_H */
