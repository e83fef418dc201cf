/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: stream pools (lease, round-robin, single) and named streams.
#pragma once

#include <pthread.h>

#include "core/stream.hpp"

namespace cw {
namespace core {
constexpr uint32_t kChunk = 64;
constexpr uint32_t kMaxChunks = 1024;  // 65536 streams per pool

// cw_stream::leased of a lease pool's stream: on the free list (or being
// made), held by one acquirer, or held by the pool's named table (given back
// only by pool_release_owner; pool_release refuses it).
constexpr int kFree = 0, kLeased = 1, kNamed = 2;

struct Named {
    const void *owner;
    char name[64];
    cw_stream *stream;
};

// A thread waiting in pool_acquire: on its own stack, in the pool's FIFO
// (under the mutex) until a release hands it a stream or it times out. Its
// own condition variable (CLOCK_MONOTONIC): a hand-off wakes that waiter
// only, not all of them.
struct Ticket {
    Ticket *next;
    cw_stream *stream;  // set by the hand-off (leased to this waiter)
    pthread_cond_t cond;
};
}  // namespace core
}  // namespace cw

struct cw_stream_pool {
    uint32_t tag;
    cw_context *ctx;
    bool internal;  // the context's fork pool: does not hold a context reference
    cw_pool_mode mode;
    unsigned flags;
    int priority;
    unsigned max;
    // lease mode: slots in chunks that never move, a tagged Treiber stack of free ones
    std::atomic<cw_stream **> chunks[cw::core::kMaxChunks];
    std::atomic<uint32_t> created;
    std::atomic<uint64_t> free_head;  // (tag << 32) | (index + 1)
    std::atomic<size_t> leased;
    // Tickets in the FIFO below. Written under the mutex; read without it by
    // the acquire fast path (no stream taken while someone waits) and by a
    // release (a hand-off is due). See pool.cpp for the ordering.
    std::atomic<int> waiters;
    cw::core::Ticket *queue_head, *queue_tail;  // under the mutex
    pthread_mutex_t mutex;  // growth, waiting, named streams
    // round-robin and single modes: a fixed set
    cw_stream **fixed;
    uint32_t fixed_count;
    std::atomic<uint64_t> rr;
    // named streams
    cw::core::Named *named;
    size_t named_count, named_cap;
};


namespace cw {
namespace core {

cw_status pool_new(cw_context *ctx, const cw_stream_pool_settings *s, bool internal, cw_stream_pool **out);
// Destroys a pool and its streams (leased ones too).
void pool_destroy(cw_stream_pool *pool);
// Lease mode: a free stream, waiting up to timeout_us for one (0: no wait,
// negative: no limit). Round-robin and single: the next stream of the set.
// While threads wait, a released stream goes to the one that waited first,
// and no acquire that starts meanwhile takes a stream.
cw_status pool_acquire(cw_stream_pool *pool, cw_stream **out, int64_t timeout_us);
// pool_acquire with no wait, for a caller that has a way on without a
// stream (the flow layer's fallback): an exhausted pool is an answer, not a
// failure, so CW_ERROR_POOL_EXHAUSTED is returned and neither logged nor
// put in the thread's detail. Other failures are recorded as usual.
cw_status pool_try_acquire(cw_stream_pool *pool, cw_stream **out);
// Gives back a stream leased by pool_acquire (refuses one that is not
// leased, and a named stream: CW_ERROR_INVALID_STATE).
cw_status pool_release(cw_stream_pool *pool, cw_stream *s);
// The stream named `name` for owner, leased on first use and kept.
cw_status pool_named(cw_stream_pool *pool, const void *owner, const char *name, cw_stream **out);
// Gives back every named stream of owner; *count (may be NULL) how many.
// CW_ERROR_INVALID_STATE (the others still given back) for an entry whose
// stream is not held by the named table; that stream is dropped from the
// table and left alone.
cw_status pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count);
// What cw_stream_pool_get_info reports (the named count under the mutex).
void pool_info(const cw_stream_pool *pool, cw_stream_pool_info *info);

// The context's own lease pool for fork and when_all (made on first use).
cw_status fork_pool(cw_context *ctx, cw_stream_pool **out);

// True when CUWEAVE_SERIALIZE=1 (read once).
bool serialize_all();
// Forgets the value read: the next serialize_all reads the environment again
// (the fuzzing hooks of the testing layer).
void serialize_forget();

}  // namespace core
}  // namespace cw
