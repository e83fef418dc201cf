// cuweave core: the registry of live handles (handle.hpp): an open-addressed hash set of
// handle addresses with their kinds. Lookups take no lock and never touch
// the handle's memory, so a destroyed or foreign pointer is refused without
// being read. Creation and destruction take one spin lock for a few
// stores; room for a handle is reserved before the object is made, so that
// publishing it cannot fail.
//
// Slots hold an address (0: empty, 1: a removed entry) and a kind. A table
// grows (doubling, or rehashing in place when removed entries pile up) into
// a new array; the old one is kept, never freed, because a lookup that
// started on it may still be reading it (the arrays only double, so what is
// kept is at most the size of the current one).
#include <atomic>
#include <stdlib.h>
#include <string.h>

#include "base/sync.hpp"
#include "core/handle.hpp"

namespace cw {
namespace core {
namespace {

constexpr uintptr_t kEmpty = 0, kRemoved = 1;
constexpr size_t kFirstCap = 256;

struct Table {
    size_t cap;  // a power of two
    Table *older;  // kept for lookups still on it
    std::atomic<uintptr_t> *keys;
    std::atomic<uint32_t> *kinds;
};

struct Registry {
    std::atomic<int> lock{0};
    std::atomic<Table *> table{nullptr};
    size_t used = 0;      // live + removed slots of the current table
    size_t live = 0;
    size_t reserved = 0;  // handles promised room
    int fail_next = 0;    // test hook: the nth next reserve fails (1: the next)
};
Registry g_reg;

inline size_t hash(uintptr_t h) {
    uint64_t x = (uint64_t)h >> 4;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 29));
}

Table *table_new(size_t cap) {
    Table *t = static_cast<Table *>(calloc(1, sizeof(Table)));
    void *k = calloc(cap, sizeof(std::atomic<uintptr_t>));
    void *v = calloc(cap, sizeof(std::atomic<uint32_t>));
    if (!t || !k || !v) {
        free(t);
        free(k);
        free(v);
        return nullptr;
    }
    t->cap = cap;
    // calloc's zeros are valid empty atomics of these trivial types.
    t->keys = static_cast<std::atomic<uintptr_t> *>(k);
    t->kinds = static_cast<std::atomic<uint32_t> *>(v);
    return t;
}

// The slot holding key in t, or -1: probes from key's hash until the key or
// an empty slot (removed slots are passed over). Lock-free for readers.
long find(const Table *t, uintptr_t key) {
    for (size_t i = hash(key) & (t->cap - 1), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
        uintptr_t k = t->keys[i].load(std::memory_order_acquire);
        if (k == key) return (long)i;
        if (k == kEmpty) return -1;
    }
    return -1;
}

// Under the lock: puts h in t (which has room). What it took: an entry for
// h already there (which a missed retire would leave: reused, never
// doubled), an empty slot, or a removed one.
enum Placed { kReused, kTookEmpty, kTookRemoved };
Placed place(Table *t, uintptr_t h, uint32_t kind) {
    const long at = find(t, h);
    if (at >= 0) {
        t->kinds[at].store(kind, std::memory_order_release);
        return kReused;
    }
    for (size_t i = hash(h) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        uintptr_t k = t->keys[i].load(std::memory_order_relaxed);
        if (k == kEmpty || k == kRemoved) {
            t->kinds[i].store(kind, std::memory_order_relaxed);
            t->keys[i].store(h, std::memory_order_release);  // the kind is visible with it
            return k == kEmpty ? kTookEmpty : kTookRemoved;
        }
    }
}

// Under the lock: room for `more` handles beyond those live and promised,
// keeping the table at most 3/4 full (removed slots count as full).
bool make_room(size_t more) {
    Table *t = g_reg.table.load(std::memory_order_relaxed);
    const size_t need = g_reg.used + g_reg.reserved + more;
    if (t && need * 4 <= t->cap * 3) return true;
    size_t cap = t ? t->cap : kFirstCap;
    while ((g_reg.live + g_reg.reserved + more) * 2 > cap) cap *= 2;  // half full after the move
    Table *n = table_new(cap);
    if (!n) return false;
    size_t used = 0;
    if (t)
        for (size_t i = 0; i < t->cap; i++) {
            uintptr_t k = t->keys[i].load(std::memory_order_relaxed);
            if (k == kEmpty || k == kRemoved) continue;
            (void)place(n, k, t->kinds[i].load(std::memory_order_relaxed));
            used++;
        }
    n->older = t;
    g_reg.used = used;
    g_reg.table.store(n, std::memory_order_release);
    return true;
}

}  // namespace

bool handle_live(const void *h, uint32_t kind) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(h);
    if (key <= kRemoved) return false;
    Table *t = g_reg.table.load(std::memory_order_acquire);
    if (!t) return false;
    const long at = find(t, key);
    return at >= 0 && t->kinds[at].load(std::memory_order_relaxed) == kind;
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

void HandleRoom::publish_kind(void *h, uint32_t kind) {
    *static_cast<uint32_t *>(h) = kind;  // the tag, for debuggers
    SpinLock lock(g_reg.lock);
    // Every caller reserved first; without room reserved, make it now (its
    // failure cannot be reported here, so no caller may rely on this).
    if (!held_ && !make_room(1)) return;
    Table *t = g_reg.table.load(std::memory_order_relaxed);
    const Placed how = place(t, reinterpret_cast<uintptr_t>(h), kind);
    if (how == kTookEmpty) g_reg.used++;
    if (how != kReused) g_reg.live++;
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
    const uintptr_t key = reinterpret_cast<uintptr_t>(h);
    SpinLock lock(g_reg.lock);
    Table *t = g_reg.table.load(std::memory_order_relaxed);
    if (!t) return;
    const long at = find(t, key);
    if (at < 0) return;
    t->keys[at].store(kRemoved, std::memory_order_release);
    g_reg.live--;
}

size_t handles_live() {
    SpinLock lock(g_reg.lock);
    return g_reg.live;
}

size_t handles_bytes() {
    SpinLock lock(g_reg.lock);
    size_t bytes = 0;
    for (const Table *t = g_reg.table.load(std::memory_order_relaxed); t; t = t->older)
        bytes += sizeof(Table) + t->cap * (sizeof(std::atomic<uintptr_t>) + sizeof(std::atomic<uint32_t>));
    return bytes;
}

void handle_registry_fail_next(int n) {
    SpinLock lock(g_reg.lock);
    g_reg.fail_next = n;
}

}  // namespace core
}  // namespace cw
