/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: stream pools (lease, round-robin, single) and named streams
// (pool.hpp).
#include "core/pool.hpp"

#include <errno.h>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


namespace cw {
namespace core {
namespace {

std::atomic<int> g_serialize{-1};

cw_stream *slot(cw_stream_pool *p, uint32_t index) {
    return p->chunks[index / kChunk].load(std::memory_order_acquire)[index % kChunk];
}

// Lock-free pop from the free stack; NULL when empty. Every load of
// free_head here is seq_cst (the CAS's failure order too): a waiter's look
// at the free list is the load half of the handshake with a release (see
// "Waiting" below), and an acquire load there would not do.
cw_stream *pop_free(cw_stream_pool *p) {
    uint64_t head = p->free_head.load(std::memory_order_seq_cst);
    for (;;) {
        uint32_t idx1 = static_cast<uint32_t>(head);
        if (idx1 == 0) return nullptr;
        cw_stream *s = slot(p, idx1 - 1);
        uint64_t next = ((head >> 32) + 1) << 32 | s->next_free.load(std::memory_order_relaxed);
        if (p->free_head.compare_exchange_weak(head, next, std::memory_order_seq_cst, std::memory_order_seq_cst))
            return s;
    }
}

void push_free(cw_stream_pool *p, cw_stream *s) {
    uint64_t head = p->free_head.load(std::memory_order_relaxed);
    for (;;) {
        s->next_free.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
        uint64_t next = ((head >> 32) + 1) << 32 | (s->index + 1);
        if (p->free_head.compare_exchange_weak(head, next, std::memory_order_seq_cst, std::memory_order_relaxed))
            return;
    }
}

// Makes one more stream and puts it in its slot. Caller holds p->mutex.
// CW_ERROR_POOL_EXHAUSTED, recorded nowhere, at the pool's bound (the
// caller waits, or says so: exhausted).
cw_status grow(cw_stream_pool *p, cw_stream **out) {
    uint32_t n = p->created.load(std::memory_order_relaxed);
    if (p->max && n >= p->max) return CW_ERROR_POOL_EXHAUSTED;
    if (n >= kChunk * kMaxChunks) return CW_ERROR_POOL_EXHAUSTED;
    cw_stream **chunk = p->chunks[n / kChunk].load(std::memory_order_relaxed);
    if (!chunk) {
        chunk = static_cast<cw_stream **>(calloc(kChunk, sizeof(cw_stream *)));
        if (!chunk) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        p->chunks[n / kChunk].store(chunk, std::memory_order_release);
    }
    cw_stream *s = nullptr;
    CW_TRY(stream_new(p->ctx, p->flags, p->priority, false, &s, p, n));  // its pool and slot set before it is live
    chunk[n % kChunk] = s;
    p->created.store(n + 1, std::memory_order_release);
    *out = s;
    return CW_SUCCESS;
}

cw_status exhausted(cw_stream_pool *p) {
    if (!p->max)
        return fail(CW_ERROR_POOL_EXHAUSTED, "the pool holds its limit of %u streams, all leased",
                    p->created.load(std::memory_order_relaxed));
    return fail(CW_ERROR_POOL_EXHAUSTED, "all %u streams of the pool are leased", p->max);
}

void lease(cw_stream_pool *p, cw_stream *s) {
    s->leased.store(kLeased, std::memory_order_relaxed);
    p->leased.fetch_add(1, std::memory_order_relaxed);
}

struct timespec deadline_after(int64_t us) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (us % 1000000) * 1000;
    ts.tv_sec += us / 1000000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    return ts;
}

void fork_pool_teardown(cw_context *ctx) {
    if (ctx->fork_pool) pool_destroy(ctx->fork_pool);
    ctx->fork_pool = nullptr;
}

void destroy_streams(cw_stream_pool *p) {
    uint32_t n = p->created.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) stream_free(slot(p, i));
    for (uint32_t c = 0; c < kMaxChunks; c++) free(p->chunks[c].load(std::memory_order_relaxed));
    free(p->fixed);
    free(p->named);
}

// Waiting. A thread that finds no stream and may not grow the pool queues a
// Ticket (FIFO, on its stack, under the mutex) and sleeps on the ticket's
// condition variable until a stream is handed to it. Released streams go to
// the queue first:
//
//   release:  push_free (seq_cst CAS on free_head)   [A]
//             load waiters (seq_cst)                 [B]; > 0: lock, serve_waiters
//   waiter:   (mutex held) enqueue, waiters += 1 (seq_cst RMW) [C]
//             serve_waiters: pop_free, load free_head (seq_cst) [D]; then sleep
//
// This is a Dekker pair (store X, load Y | store Y, load X): no lost
// wake-up needs that B sees C or D sees A. The C++ memory model promises
// that only when all four are seq_cst: they are then in one total order S,
// and either B comes before C in S, so A (before B) comes before D and D
// reads A's push or a later change of free_head (a pop by someone else,
// whose own release then goes through the same handshake), or C comes
// before B and B reads a count of at least one, so the release takes the
// mutex (the waiter holds it from C until it sleeps, which frees it
// atomically) and hands the stream over. The old code loaded free_head at D
// with acquire only: a seq_cst RMW followed by an acquire load is not
// ordered store-to-load (on POWER the compilers put an lwsync there, which
// lets the load pass the store; seq_cst gets a sync), so both sides could
// read the old values: the release saw no waiter and did not wake it, the
// waiter saw no stream and slept with one on the free list. x86 (every
// locked instruction a full fence) cannot show it.
//
// Fairness: a waiter is queued at C; an acquire whose load of waiters (the
// fast path's test, seq_cst) comes after C in S sees it and takes the slow
// path, where the queue is served first and a newcomer queues behind. So a
// waiter is overtaken only by the waiters queued before it and by acquires
// that had already passed that test when it queued (one stream each).

// Hands free streams to the queued waiters, oldest first, until one or the
// other runs out. Caller holds p->mutex.
void serve_waiters(cw_stream_pool *p) {
    while (p->queue_head) {
        cw_stream *s = pop_free(p);
        if (!s) break;
        Ticket *t = p->queue_head;
        p->queue_head = t->next;
        if (!p->queue_head) p->queue_tail = nullptr;
        p->waiters.fetch_sub(1, std::memory_order_seq_cst);
        lease(p, s);
        t->stream = s;
        pthread_cond_signal(&t->cond);  // t is unlinked: only its waiter reads it now
    }
}

// Queues t last [C above]. Caller holds p->mutex.
void enqueue(cw_stream_pool *p, Ticket *t) {
    t->next = nullptr;
    t->stream = nullptr;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (p->queue_tail) p->queue_tail->next = t;
    else p->queue_head = t;
    p->queue_tail = t;
    p->waiters.fetch_add(1, std::memory_order_seq_cst);
}

// Takes a ticket that was not served out of the queue. Caller holds p->mutex.
void unqueue(cw_stream_pool *p, Ticket *t) {
    Ticket *prev = nullptr;
    for (Ticket *q = p->queue_head; q; prev = q, q = q->next) {
        if (q != t) continue;
        if (prev) prev->next = t->next;
        else p->queue_head = t->next;
        if (p->queue_tail == t) p->queue_tail = prev;
        p->waiters.fetch_sub(1, std::memory_order_seq_cst);
        return;
    }
}

}  // namespace

bool serialize_all() {
    int v = g_serialize.load(std::memory_order_acquire);
    if (__builtin_expect(v < 0, 0)) {
        const char *e = getenv("CUWEAVE_SERIALIZE");
        v = (e && strcmp(e, "1") == 0) ? 1 : 0;
        g_serialize.store(v, std::memory_order_release);
    }
    return v == 1;
}

void serialize_forget() { g_serialize.store(-1, std::memory_order_release); }

namespace {
// pool_acquire; with probe (timeout 0), an exhausted pool is not a failure
// of the caller's: CW_ERROR_POOL_EXHAUSTED is returned and recorded nowhere.
cw_status acquire(cw_stream_pool *p, cw_stream **out, int64_t timeout_us, bool probe) {
    if (p->mode != CW_POOL_LEASE) {
        uint32_t i = p->mode == CW_POOL_SINGLE ? 0 : static_cast<uint32_t>(p->rr.fetch_add(1, std::memory_order_relaxed) % p->fixed_count);
        *out = p->fixed[i];
        return CW_SUCCESS;
    }
    // Fast path (lock-free, no allocation): nobody waits and a stream is
    // free. While someone waits, free streams are theirs (see "Waiting").
    if (__builtin_expect(p->waiters.load(std::memory_order_seq_cst) == 0, 1)) {
        cw_stream *s = pop_free(p);
        if (__builtin_expect(s != nullptr, 1)) {
            lease(p, s);
            *out = s;
            return CW_SUCCESS;
        }
    }
    // Slow path: the queue first, then a free stream, growth, or a wait.
    pthread_mutex_lock(&p->mutex);
    serve_waiters(p);
    cw_stream *s = nullptr;
    bool handed = false;  // leased to us by serve_waiters
    cw_status st = CW_SUCCESS;
    if (!p->queue_head) s = pop_free(p);
    if (!s) st = grow(p, &s);
    if (st == CW_ERROR_POOL_EXHAUSTED && timeout_us == 0) {
        if (!probe) st = exhausted(p);
    } else if (st == CW_ERROR_POOL_EXHAUSTED) {
        Ticket t;
        enqueue(p, &t);
        serve_waiters(p);  // [D]: a stream pushed before the release saw us
        struct timespec until = deadline_after(timeout_us > 0 ? timeout_us : 0);
        while (!t.stream) {
            int rc = timeout_us < 0 ? pthread_cond_wait(&t.cond, &p->mutex)
                                    : pthread_cond_timedwait(&t.cond, &p->mutex, &until);
            if (rc == ETIMEDOUT && !t.stream) {
                unqueue(p, &t);
                st = fail(CW_ERROR_TIMEOUT, "no stream was released within %lld us", (long long)timeout_us);
                break;
            }
        }
        if (t.stream) {
            s = t.stream;
            handed = true;
            st = CW_SUCCESS;
        }
        pthread_cond_destroy(&t.cond);  // out of the queue: nobody signals it any more
    }
    pthread_mutex_unlock(&p->mutex);
    if (st != CW_SUCCESS) return st;
    if (!handed) lease(p, s);
    *out = s;
    return CW_SUCCESS;
}
}  // namespace

cw_status pool_acquire(cw_stream_pool *p, cw_stream **out, int64_t timeout_us) {
    return acquire(p, out, timeout_us, false);
}

cw_status pool_try_acquire(cw_stream_pool *p, cw_stream **out) { return acquire(p, out, 0, true); }

cw_status pool_release(cw_stream_pool *p, cw_stream *s) {
    if (s->pool != p) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: the stream is not from this pool");
    if (p->mode != CW_POOL_LEASE) return CW_SUCCESS;
    int was = kLeased;
    if (!s->leased.compare_exchange_strong(was, kFree, std::memory_order_acq_rel, std::memory_order_acquire)) {
        if (was == kNamed)
            return fail(CW_ERROR_INVALID_STATE,
                        "the stream is a named stream of the pool (cw_stream_pool_acquire_named): the pool keeps it "
                        "until cw_stream_pool_release_owner gives it back");
        return fail(CW_ERROR_INVALID_STATE, "the stream is not leased (released twice?)");
    }
    p->leased.fetch_sub(1, std::memory_order_relaxed);
    s->in_capture = false;  // the next holder starts afresh
    push_free(p, s);        // [A]
    if (__builtin_expect(p->waiters.load(std::memory_order_seq_cst) > 0, 0)) {  // [B]
        pthread_mutex_lock(&p->mutex);
        serve_waiters(p);
        pthread_mutex_unlock(&p->mutex);
    }
    return CW_SUCCESS;
}

cw_status pool_new(cw_context *ctx, const cw_stream_pool_settings *set, bool internal, cw_stream_pool **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    void *mem = calloc(1, sizeof(cw_stream_pool));
    if (!mem) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_stream_pool *p = new (mem) cw_stream_pool();
    pthread_mutex_init(&p->mutex, nullptr);
    p->ctx = ctx;
    p->internal = internal;
    p->mode = serialize_all() ? CW_POOL_SINGLE : set->mode;
    p->flags = set->flags;
    p->priority = clamp_priority(ctx, set->priority);
    p->max = p->mode == CW_POOL_LEASE ? set->max_streams : 0;  // a lease setting only
    cw_status st = CW_SUCCESS;
    if (p->mode == CW_POOL_LEASE) {
        // Streams made up front go on the free list.
        pthread_mutex_lock(&p->mutex);
        for (unsigned i = 0; i < set->reserved_streams && st == CW_SUCCESS; i++) {
            cw_stream *s = nullptr;
            st = grow(p, &s);
            if (st == CW_SUCCESS) push_free(p, s);
        }
        pthread_mutex_unlock(&p->mutex);
    } else {
        unsigned n = p->mode == CW_POOL_SINGLE ? 1 : (set->reserved_streams ? set->reserved_streams : 4);
        p->fixed = static_cast<cw_stream **>(calloc(n, sizeof(cw_stream *)));
        if (!p->fixed) st = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        pthread_mutex_lock(&p->mutex);
        for (unsigned i = 0; i < n && st == CW_SUCCESS; i++) {
            cw_stream *s = nullptr;
            st = grow(p, &s);
            if (st == CW_SUCCESS) p->fixed[p->fixed_count++] = s;
        }
        pthread_mutex_unlock(&p->mutex);
    }
    if (st != CW_SUCCESS) {
        destroy_streams(p);
        pthread_mutex_destroy(&p->mutex);
        p->~cw_stream_pool();
        free(p);
        return st;
    }
    if (!internal) context_retain(ctx);
    room.publish(p);
    *out = p;
    return CW_SUCCESS;
}

void pool_destroy(cw_stream_pool *p) {
    handle_retire(p);
    destroy_streams(p);
    pthread_mutex_destroy(&p->mutex);
    cw_context *ctx = p->ctx;
    bool internal = p->internal;
    p->~cw_stream_pool();
    handle_free(p);
    if (!internal) context_release(ctx);
}

cw_status fork_pool(cw_context *ctx, cw_stream_pool **out) {
    cw_stream_pool *p;
    {
        SpinLock lock(ctx->lock);
        p = ctx->fork_pool;
    }
    if (__builtin_expect(p != nullptr, 1)) {
        *out = p;
        return CW_SUCCESS;
    }
    context_on_teardown(fork_pool_teardown, kTeardownStreams);
    cw_stream_pool_settings s;
    memset(&s, 0, sizeof s);
    s.mode = CW_POOL_LEASE;
    s.flags = CW_STREAM_NON_BLOCKING;
    s.reserved_streams = 2;
    CW_TRY(pool_new(ctx, &s, true, &p));
    {
        SpinLock lock(ctx->lock);
        if (!ctx->fork_pool) {
            ctx->fork_pool = p;
            p = nullptr;
        }
        *out = ctx->fork_pool;
    }
    if (p) pool_destroy(p);  // another thread made it first
    return CW_SUCCESS;
}

cw_status pool_named(cw_stream_pool *pool, const void *owner, const char *name, cw_stream **out) {
    // Found: return it. Not found: take a stream (outside the lock: acquire
    // may create one and takes the same mutex), then insert unless another
    // thread inserted the same name meanwhile.
    cw_stream *s = nullptr;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&pool->mutex);
        for (size_t i = 0; i < pool->named_count; i++) {
            Named &n = pool->named[i];
            if (n.owner == owner && strcmp(n.name, name) == 0) {
                *out = n.stream;
                pthread_mutex_unlock(&pool->mutex);
                if (s) pool_release(pool, s);
                return CW_SUCCESS;
            }
        }
        if (s) {
            if (pool->named_count == pool->named_cap) {
                size_t cap = pool->named_cap ? pool->named_cap * 2 : 8;
                void *mem = realloc(pool->named, cap * sizeof(Named));
                if (!mem) {
                    pthread_mutex_unlock(&pool->mutex);
                    pool_release(pool, s);
                    return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
                }
                pool->named = static_cast<Named *>(mem);
                pool->named_cap = cap;
            }
            Named &n = pool->named[pool->named_count++];
            n.owner = owner;
            snprintf(n.name, sizeof n.name, "%s", name);
            n.stream = s;
            // The table holds it now: pool_release refuses it.
            if (pool->mode == CW_POOL_LEASE) s->leased.store(kNamed, std::memory_order_relaxed);
            *out = s;
            pthread_mutex_unlock(&pool->mutex);
            return CW_SUCCESS;
        }
        pthread_mutex_unlock(&pool->mutex);
        CW_TRY(pool_acquire(pool, &s, 0));
    }
    return fail(CW_ERROR_INTERNAL, "unreachable");
}

cw_status pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count) {
    size_t released = 0;
    bool stray = false;
    pthread_mutex_lock(&pool->mutex);
    for (size_t i = 0; i < pool->named_count;) {
        if (pool->named[i].owner != owner) {
            i++;
            continue;
        }
        cw_stream *s = pool->named[i].stream;
        pool->named[i] = pool->named[--pool->named_count];
        if (pool->mode != CW_POOL_LEASE) {
            released++;
            continue;
        }
        // Only from the table's hold: a stream given back some other way is
        // never pushed a second time.
        int was = kNamed;
        if (!s->leased.compare_exchange_strong(was, kFree, std::memory_order_acq_rel, std::memory_order_acquire)) {
            stray = true;
            continue;
        }
        pool->leased.fetch_sub(1, std::memory_order_relaxed);
        s->in_capture = false;
        push_free(pool, s);
        released++;
    }
    // The mutex is held, so the queue is seen as it is: hand the streams over.
    if (released) serve_waiters(pool);
    pthread_mutex_unlock(&pool->mutex);
    if (count) *count = released;
    if (stray)
        return fail(CW_ERROR_INVALID_STATE, "a named stream of this owner was no longer held by the pool's named "
                                            "table: dropped from the table, not given back a second time");
    return CW_SUCCESS;
}

void pool_info(const cw_stream_pool *pool, cw_stream_pool_info *info) {
    cw_stream_pool_info st;
    memset(&st, 0, sizeof st);
    st.context = pool->ctx;
    st.mode = pool->mode;
    st.created = pool->created.load(std::memory_order_acquire);
    if (pool->mode == CW_POOL_LEASE) {
        st.leased = pool->leased.load(std::memory_order_relaxed);
        st.idle = st.created >= st.leased ? st.created - st.leased : 0;
    }
    cw_stream_pool *p = const_cast<cw_stream_pool *>(pool);
    pthread_mutex_lock(&p->mutex);
    st.named = p->named_count;
    pthread_mutex_unlock(&p->mutex);
    *info = st;
}

}  // namespace core
}  // namespace cw
