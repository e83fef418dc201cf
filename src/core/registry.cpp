/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the registry of live handles (handle.hpp): an open-addressed hash set of
// handle addresses with their kinds. Lookups take no lock on the way to a
// live handle and never touch the handle's memory, so a destroyed or
// foreign pointer is refused without being read. Creation and destruction
// take one spin lock for a few stores; room for a handle is reserved before
// the object is made, so that publishing it cannot fail.
//
// A slot is one 64-bit word: 0 when empty, else the handle's address (user
// space addresses fit in 56 bits on x86-64, with 4- or 5-level paging, and
// on aarch64) with its kind's index (1..) in the top byte, so that a reader
// sees an address and its kind together in one load. Linear probing;
// removal shifts the entries after the removed one back (no tombstones), so
// a table never fills with removed entries and only ever grows, doubling,
// when the live and reserved handles would pass 3/4 of it.
//
// A shift can move an entry behind a lookup that is probing for it: that
// lookup ends at an empty slot and would miss a live handle. So a lookup
// that does not find its key looks again under the lock, where nothing
// moves: a miss is an error path (or a race with a removal), so the lock
// costs nothing on the way to a live handle.
//
// The memory of destroyed handle objects goes through a quarantine: the
// last kHandleQuarantine freed are held (in a ring, oldest first out), so
// that a destroyed handle's address is not reused by a new object, and a
// stale copy of the handle stays refused, until that many more handle
// objects have been freed. A block freed with its size (handle_free_sized)
// is then kept, up to kHandleSpare of them, for a new object of that size
// (handle_alloc) rather than freed: a pipeline's buffers, a new handle for
// each recycled one, cost no malloc and free a frame. What it holds at exit is reachable from a
// global, so leak checkers do not report it. Under ASan the held memory is
// poisoned, under valgrind marked inaccessible (where its header is found
// at build time), so a read through a stale handle is still reported.
//
// A table that grows is replaced by a new array; the old one is kept, never
// freed, because a lookup that started on it may still be reading it. It is
// not written again. Tables only double, so what is kept is less than the
// size of the current one, and the current one is sized by the most handles
// ever live at once.
#include <atomic>
#include <stdlib.h>
#include <string.h>

#include "base/sync.hpp"
#include "core/handle.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CW_REGISTRY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CW_REGISTRY_ASAN 1
#endif
#endif
#if defined(CW_REGISTRY_ASAN)
#include <malloc.h>
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <malloc.h>
#include <valgrind/memcheck.h>
#define CW_REGISTRY_VALGRIND 1
#endif
#endif

namespace cw {
namespace core {
namespace {

constexpr int kKindShift = 56;
constexpr uint64_t kAddressMask = (uint64_t(1) << kKindShift) - 1;
constexpr size_t kFirstCap = 256;

struct Table {
    size_t cap;    // a power of two
    Table *older;  // kept for lookups still on it
    // The slots follow the header in the same block.
    std::atomic<uint64_t> *slots() { return reinterpret_cast<std::atomic<uint64_t> *>(this + 1); }
    const std::atomic<uint64_t> *slots() const { return reinterpret_cast<const std::atomic<uint64_t> *>(this + 1); }
};
static_assert(sizeof(Table) % alignof(std::atomic<uint64_t>) == 0, "the slots are aligned");

struct Quarantine {
    std::atomic<int> lock{0};
    void *held[kHandleQuarantine];  // a ring; held[next] is the oldest once full
    size_t held_bytes[kHandleQuarantine];  // its size for handle_alloc, or 0 (handle_free)
    size_t next = 0;
    std::atomic<unsigned long> freed{0};  // handle_free calls (tests)
    // Blocks out of the quarantine kept for handle_alloc (still poisoned).
    void *spare[kHandleSpare];
    size_t spare_bytes[kHandleSpare];
    size_t spares = 0;
};
Quarantine g_quarantine;

struct Registry {
    std::atomic<int> lock{0};
    std::atomic<Table *> table{nullptr};
    size_t live = 0;
    size_t reserved = 0;  // handles promised room
    int fail_next = 0;    // test hook: the nth next reserve fails (1: the next)
};
Registry g_reg;

inline size_t hash(uint64_t address) {
    uint64_t x = address >> 4;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 29));
}

inline size_t home(const Table *t, uint64_t slot) { return hash(slot & kAddressMask) & (t->cap - 1); }

Table *table_new(size_t cap) {
    // One block: the header, then the slots (calloc's zeros are valid empty
    // atomics of this trivial type).
    void *m = calloc(1, sizeof(Table) + cap * sizeof(std::atomic<uint64_t>));
    if (!m) return nullptr;
    Table *t = static_cast<Table *>(m);
    t->cap = cap;
    return t;
}

// True when key (address and kind) is in t: probes from its home until the
// key or an empty slot. Lock-free; under the lock it is exact. after_first
// runs once the first slot has been read (nothing, but for a test hook that
// moves entries under a lookup).
template <class Step>
inline bool find(const Table *t, uint64_t key, Step after_first) {
    const size_t mask = t->cap - 1;
    for (size_t i = home(t, key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
        const uint64_t v = t->slots()[i].load(std::memory_order_acquire);
        if (v == key) return true;
        if (v == 0) return false;
        if (n == 0) after_first();
    }
    return false;
}
inline bool find(const Table *t, uint64_t key) {
    return find(t, key, [] {});
}

// Under the lock: the slot holding this address (any kind), or -1.
long find_address(const Table *t, uint64_t address) {
    const size_t mask = t->cap - 1;
    for (size_t i = hash(address) & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
        const uint64_t v = t->slots()[i].load(std::memory_order_relaxed);
        if (v == 0) return -1;
        if ((v & kAddressMask) == address) return (long)i;
    }
    return -1;
}

// Under the lock: puts key in t (which has room). Returns false when its
// address was there already (which a missed retire would leave): that
// entry takes the new kind, and nothing is added.
bool place(Table *t, uint64_t key) {
    const size_t mask = t->cap - 1;
    for (size_t i = home(t, key);; i = (i + 1) & mask) {
        const uint64_t v = t->slots()[i].load(std::memory_order_relaxed);
        if (v == 0) {
            t->slots()[i].store(key, std::memory_order_release);
            return true;
        }
        if ((v & kAddressMask) == (key & kAddressMask)) {
            t->slots()[i].store(key, std::memory_order_release);
            return false;
        }
    }
}

// Under the lock: empties slot i and shifts back the entries after it that
// may move (those whose home is not between the hole and themselves), so
// that every entry stays reachable from its home without tombstones. An
// entry is written to its new slot before its old one is overwritten: a
// reader sees it twice for a moment, never a removed key.
void remove_at(Table *t, size_t i) {
    const size_t mask = t->cap - 1;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        const uint64_t v = t->slots()[j].load(std::memory_order_relaxed);
        if (v == 0) break;
        const size_t h = home(t, v);
        const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        t->slots()[i].store(v, std::memory_order_release);
        i = j;
    }
    t->slots()[i].store(0, std::memory_order_release);
}

// Under the lock: room for `more` handles beyond those live and promised,
// keeping the table at most 3/4 full. A new table is twice the size (or
// more), half full after the move.
bool make_room(size_t more) {
    Table *t = g_reg.table.load(std::memory_order_relaxed);
    const size_t need = g_reg.live + g_reg.reserved + more;
    if (t && need * 4 <= t->cap * 3) return true;
    size_t cap = t ? t->cap * 2 : kFirstCap;
    while (need * 2 > cap) cap *= 2;
    Table *n = table_new(cap);
    if (!n) return false;
    if (t)
        for (size_t i = 0; i < t->cap; i++) {
            const uint64_t v = t->slots()[i].load(std::memory_order_relaxed);
            if (v) (void)place(n, v);
        }
    n->older = t;
    g_reg.table.store(n, std::memory_order_release);
    return true;
}

// A lookup that missed, again under the lock (see the top of the file).
__attribute__((noinline, cold)) bool live_locked(uint64_t key) {
    SpinLock lock(g_reg.lock);
    const Table *t = g_reg.table.load(std::memory_order_relaxed);
    return t && find(t, key);
}

// 0: key not live; 1: found without the lock; 2: found by the look again.
template <class Step>
inline int lookup(uint64_t key, Step after_first) {
    const Table *t = g_reg.table.load(std::memory_order_acquire);
    if (__builtin_expect(t != nullptr && find(t, key, after_first), 1)) return 1;
    return live_locked(key) ? 2 : 0;
}

}  // namespace

bool handle_live(const void *h, unsigned kind) {
    const uint64_t address = reinterpret_cast<uintptr_t>(h);
    if (__builtin_expect(address == 0 || (address & ~kAddressMask) != 0, 0)) return false;
    return lookup(address | (uint64_t)kind << kKindShift, [] {}) != 0;
}

int handle_lookup_racing_move(const void *h) {
    const uint64_t address = reinterpret_cast<uintptr_t>(h);
    uint64_t key;
    {
        SpinLock lock(g_reg.lock);
        const Table *t = g_reg.table.load(std::memory_order_relaxed);
        const long at = t && address && (address & ~kAddressMask) == 0 ? find_address(t, address) : -1;
        if (at < 0) return 0;
        key = t->slots()[at].load(std::memory_order_relaxed);
    }
    // After the lookup has read h's home slot: the entry there (when it is
    // another) is removed, which shifts the entries after it back, h among
    // them, and is put back, at the end of the run.
    return lookup(key, [key] {
        SpinLock lock(g_reg.lock);
        Table *t = g_reg.table.load(std::memory_order_relaxed);
        const size_t at = home(t, key);
        const uint64_t other = t->slots()[at].load(std::memory_order_relaxed);
        if (other == 0 || other == key) return;
        remove_at(t, at);
        (void)place(t, other);
    });
}

cw_status HandleRoom::reserve(unsigned n) {
    bool ok;
    {
        SpinLock lock(g_reg.lock);
        ok = !(g_reg.fail_next > 0 && --g_reg.fail_next == 0) && make_room(n);
        if (ok) g_reg.reserved += n;
    }
    if (!ok) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory (the handle registry could not grow)");
    held_ += n;
    return CW_SUCCESS;
}

void HandleRoom::publish_kind(void *h, uint32_t tag, unsigned kind) {
    *static_cast<uint32_t *>(h) = tag;  // for debuggers
    const uint64_t address = reinterpret_cast<uintptr_t>(h);
    SpinLock lock(g_reg.lock);
    // An address past 56 bits (a platform this registry does not serve, or
    // a tagged heap) cannot be keyed: the handle stays unregistered, so
    // every call refuses it (CW_ERROR_INVALID_HANDLE) rather than mistake it.
    // Every caller reserved first; without room reserved, make it now (its
    // failure cannot be reported here, so no caller may rely on this).
    if ((address & ~kAddressMask) == 0 && (held_ || make_room(1))) {
        Table *t = g_reg.table.load(std::memory_order_relaxed);
        if (place(t, address | (uint64_t)kind << kKindShift)) g_reg.live++;
    }
    if (held_) {
        held_--;
        g_reg.reserved--;
    }
}

HandleRoom::~HandleRoom() {
    if (!held_) return;
    SpinLock lock(g_reg.lock);
    g_reg.reserved -= held_;
}

void handle_retire(void *h) {
    *static_cast<uint32_t *>(h) = kTagDead;
    const uint64_t address = reinterpret_cast<uintptr_t>(h);
    SpinLock lock(g_reg.lock);
    Table *t = g_reg.table.load(std::memory_order_relaxed);
    if (!t || (address & ~kAddressMask) != 0) return;
    const long at = find_address(t, address);
    if (at < 0) return;
    remove_at(t, (size_t)at);
    g_reg.live--;
}

void handle_free(void *object) { handle_free_sized(object, 0); }

namespace {
// The memory of a block leaving the quarantine, or handed out again, made
// accessible (it was poisoned or marked inaccessible when freed).
void unpoison(void *block) {
#if defined(CW_REGISTRY_ASAN)
    ASAN_UNPOISON_MEMORY_REGION(block, malloc_usable_size(block));
#endif
#if defined(CW_REGISTRY_VALGRIND)
    VALGRIND_MAKE_MEM_UNDEFINED(block, malloc_usable_size(block));
#endif
    (void)block;
}
}  // namespace

void handle_free_sized(void *object, size_t bytes) {
    if (!object) return;
#if defined(CW_REGISTRY_ASAN) || defined(CW_REGISTRY_VALGRIND)
    const size_t usable = malloc_usable_size(object);
#endif
#if defined(CW_REGISTRY_ASAN)
    ASAN_POISON_MEMORY_REGION(object, usable);
#endif
#if defined(CW_REGISTRY_VALGRIND)
    VALGRIND_MAKE_MEM_NOACCESS(object, usable);
#endif
    void *oldest;
    {
        SpinLock lock(g_quarantine.lock);
        const size_t at = g_quarantine.next;
        oldest = g_quarantine.held[at];
        const size_t oldest_bytes = g_quarantine.held_bytes[at];
        g_quarantine.held[at] = object;
        g_quarantine.held_bytes[at] = bytes;
        g_quarantine.next = (at + 1) % kHandleQuarantine;
        g_quarantine.freed.fetch_add(1, std::memory_order_relaxed);
        if (oldest && oldest_bytes && g_quarantine.spares < kHandleSpare) {
            // Out of the quarantine: kept for handle_alloc(oldest_bytes).
            g_quarantine.spare[g_quarantine.spares] = oldest;
            g_quarantine.spare_bytes[g_quarantine.spares] = oldest_bytes;
            g_quarantine.spares++;
            oldest = nullptr;
        }
    }
    if (!oldest) return;
    unpoison(oldest);
    free(oldest);
}

void *handle_alloc(size_t bytes) {
    void *p = nullptr;
    {
        SpinLock lock(g_quarantine.lock);
        for (size_t i = g_quarantine.spares; i-- > 0;)
            if (g_quarantine.spare_bytes[i] == bytes) {
                p = g_quarantine.spare[i];
                const size_t last = --g_quarantine.spares;
                g_quarantine.spare[i] = g_quarantine.spare[last];
                g_quarantine.spare_bytes[i] = g_quarantine.spare_bytes[last];
                break;
            }
    }
    if (!p) return calloc(1, bytes);
    unpoison(p);
    memset(p, 0, bytes);
    return p;
}

unsigned long handles_freed() { return g_quarantine.freed.load(std::memory_order_relaxed); }

bool handle_held(const void *object) {
    SpinLock lock(g_quarantine.lock);
    for (size_t i = 0; i < kHandleQuarantine; i++)
        if (g_quarantine.held[i] == object) return object != nullptr;
    return false;
}

size_t handles_live() {
    SpinLock lock(g_reg.lock);
    return g_reg.live;
}

size_t handles_bytes() {
    SpinLock lock(g_reg.lock);
    size_t bytes = 0;
    for (const Table *t = g_reg.table.load(std::memory_order_relaxed); t; t = t->older)
        bytes += sizeof(Table) + t->cap * sizeof(std::atomic<uint64_t>);
    return bytes;
}

void handle_registry_fail_next(int n) {
    SpinLock lock(g_reg.lock);
    g_reg.fail_next = n;
}

}  // namespace core
}  // namespace cw
