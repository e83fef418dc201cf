// cuweave core: stream pools (lease, round-robin, single) and named streams.
#pragma once

#include <pthread.h>

#include "core/stream.hpp"

namespace cw {
namespace core {
constexpr uint32_t kChunk = 64;
constexpr uint32_t kMaxChunks = 1024;  // 65536 streams per pool

struct Named {
    const void *owner;
    char name[64];
    cw_stream *stream;
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
    std::atomic<int> waiters;
    pthread_mutex_t mutex;  // growth, waiting, named streams
    pthread_cond_t cond;
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
cw_status pool_acquire(cw_stream_pool *pool, cw_stream **out, int64_t timeout_us);
cw_status pool_release(cw_stream_pool *pool, cw_stream *s);
// The stream named `name` for owner, leased on first use and kept.
cw_status pool_named(cw_stream_pool *pool, const void *owner, const char *name, cw_stream **out);
// Gives back every named stream of owner; *count (may be NULL) how many.
void pool_release_owner(cw_stream_pool *pool, const void *owner, size_t *count);
void pool_stats(const cw_stream_pool *pool, cw_stream_pool_stats *stats);

// The context's own lease pool for fork and when_all (made on first use).
cw_status fork_pool(cw_context *ctx, cw_stream_pool **out);

// True when CUWEAVE_SERIALIZE=1 (read once).
bool serialize_all();
// Forgets the value read: the next serialize_all reads the environment again
// (the fuzzing hooks of the testing layer).
void serialize_forget();

}  // namespace core
}  // namespace cw
