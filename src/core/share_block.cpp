/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the shared-memory blocks of exported objects and the bytes
// of their handles (share_block.hpp).
//
// What an import checks, so that a handle from another process (bytes it
// sent, which may be anything) opens only the block and the memory its
// exporter made for it: the handle is well formed (magic, version, kind,
// zero padding, a size for a buffer and none for an event); its process is
// not this one and lives; the block it names is a regular file of this
// user's of a block's size that no other user may open; the block's header
// is the handle's (process, user, nonce, kind, size), and so are the
// device and the driver's handle its first export wrote there (a handle
// whose driver part is another object's, or whose UUID another device's,
// names that block but not what it was made for). A dead exporter's
// block is removed only when all of that holds: the name carries the
// process and the nonce, so no handle names the block of a living process
// with a dead pid, and no other process's block has that name.
#include "core/share_block.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/context.hpp"

namespace cw {
namespace core {

namespace {
constexpr int kSlots = 64;
constexpr uint32_t kBlockMagic = 0x33535743u;   // CWS3
constexpr uint32_t kHandleMagic = 0x43575348u;  // CWSH
constexpr uint8_t kHandleVersion = 2;
}  // namespace

// The exporter writes the header before the magic (release), and its
// first export the device and the driver's handle before `sealed`
// (release); neither changes after.
struct Block {
    uint32_t magic;
    uint32_t kind;
    int32_t exporter;  // its process
    uint32_t uid;      // its effective user
    uint64_t nonce;    // also in the block's name and in the handle
    uint64_t bytes;    // a buffer's size, 0 for an event
    std::atomic<uint32_t> sealed;  // 1: uuid and ipc are written (the first export)
    uint8_t uuid[16];              // the object's device
    char ipc[64];                  // the driver's handle (CUipcMemHandle or CUipcEventHandle)
    std::atomic<int32_t> slots[kSlots];  // importing processes' pids, 0: free
};
static_assert(sizeof(std::atomic<int32_t>) == 4 && sizeof(std::atomic<uint32_t>) == 4,
              "slots and the seal are plain 32-bit words in shared memory");

namespace {

// A process that exited but was not yet waited for (a zombie) is dead: it
// holds no mapping and frees no block. Its state is in /proc/<pid>/stat,
// after the command's closing parenthesis; a process kill finds is alive
// unless that file says Z or X (no /proc, or no entry: alive, as kill
// says; the next call sees a process that has gone since).
bool process_alive(int32_t pid) {
    if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
    char path[32], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return true;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')');
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

// The block was made by this process (a child forked without exec shares
// its parent's objects, not their names: it never removes them).
bool own_block(const Share *sh) { return sh->block->exporter == (int32_t)getpid(); }

void block_name(char (&out)[kNameMax], int32_t pid, uint32_t serial, uint64_t nonce) {
    snprintf(out, sizeof out, "/cuweave.%d.%u.%016llx", (int)pid, serial, (unsigned long long)nonce);
}

// A random 64-bit number, never 0: the kernel's, or (no entropy at hand)
// one unique in this process and unlikely in another.
uint64_t block_nonce() {
    uint64_t v = 0;
    for (int tries = 0; tries < 4; tries++) {
        ssize_t n = getrandom(&v, sizeof v, GRND_NONBLOCK);
        if (n == (ssize_t)sizeof v && v) return v;
        if (n < 0 && errno != EINTR) break;
    }
    static std::atomic<uint64_t> count{0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
        ((count.fetch_add(1) + 1) * 0x9e3779b97f4a7c15ull);
    return v ? v : 1;
}

// The names of the blocks this process exported and has not freed: removed
// at exit, so that a process that exits with objects still exported leaves
// no file in /dev/shm (importers then see the exporter gone).
pthread_mutex_t g_exports_mu = PTHREAD_MUTEX_INITIALIZER;
Share *g_exports;

// An exit never waits long for the list's lock: another thread may hold
// it for good (stopped inside; or this is a child forked while a thread of
// its parent held it, which it does not have). The names stay then (up to
// kExitLockMs later): importers find them stale and remove them.
constexpr long kExitLockMs = 100;

void unlink_exports_at_exit() {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += kExitLockMs * 1000000;
    until.tv_sec += until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    if (pthread_mutex_timedlock(&g_exports_mu, &until) != 0) return;
    // Only this process's own: a child forked without exec inherits the
    // list, and its exit must not take its parent's names.
    for (Share *s = g_exports; s; s = s->next_export)
        if (own_block(s)) shm_unlink(s->name);
    pthread_mutex_unlock(&g_exports_mu);
}

void exports_add(Share *sh) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] { atexit(unlink_exports_at_exit); });
    pthread_mutex_lock(&g_exports_mu);
    share_hook(kHookExportsLocked);
    sh->next_export = g_exports;
    g_exports = sh;
    pthread_mutex_unlock(&g_exports_mu);
}

void exports_remove(Share *sh) {
    pthread_mutex_lock(&g_exports_mu);
    for (Share **pp = &g_exports; *pp; pp = &(*pp)->next_export)
        if (*pp == sh) {
            *pp = sh->next_export;
            break;
        }
    pthread_mutex_unlock(&g_exports_mu);
}

// Processes holding the object now; slots of processes gone are cleared.
int block_holders_of(Block *b) {
    int n = 0;
    for (int i = 0; i < kSlots; i++) {
        int32_t pid = b->slots[i].load(std::memory_order_acquire);
        if (!pid) continue;
        if (process_alive(pid))
            n++;
        else
            b->slots[i].compare_exchange_strong(pid, 0);
    }
    return n;
}

// What is wrong with the block open at fd for an importer, or NULL: it
// must be a block's file made by an exporter of this user (the exporter
// makes it 0600), which no other user could have made or changed.
const char *block_untrusted(int fd, struct stat &st) {
    if (fstat(fd, &st) != 0) return "fstat failed";
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (st.st_uid != geteuid()) return "owned by another user: exporter and importer must run as the same user";
    if (st.st_mode & 077) return "open to other users";
    if (st.st_size != (off_t)sizeof(Block)) return "not the size of a block";
    return nullptr;
}

// The block's header is the handle's exporter's: its process, user, nonce,
// kind and size; and its first export's device and driver handle are the
// handle's.
bool block_matches(const Block *b, const HandleBytes &h) {
    return __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == kBlockMagic && b->kind == h.kind &&
           b->exporter == h.pid && b->uid == (uint32_t)geteuid() && b->nonce == h.nonce && b->bytes == h.bytes &&
           b->sealed.load(std::memory_order_acquire) == 1 && memcmp(b->uuid, h.uuid, sizeof b->uuid) == 0 &&
           memcmp(b->ipc, h.ipc, sizeof b->ipc) == 0;
}

// The first export of an object writes its device and driver handle into
// its block, one thread at a time; every handle carries those.
pthread_mutex_t g_seal_mu = PTHREAD_MUTEX_INITIALIZER;

bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

// The handle's bytes are a handle of this version for an object of kind.
bool handle_well_formed(const HandleBytes &h, uint8_t kind) {
    return h.magic == kHandleMagic && h.version == kHandleVersion && h.kind == kind && h.pid > 0 && h.serial > 0 &&
           h.nonce != 0 && (kind == kKindBuffer ? h.bytes > 0 : h.bytes == 0) && all_zero(h.pad, sizeof h.pad) &&
           all_zero(h.reserved, sizeof h.reserved);
}

// The block of an exporter that died without freeing: removed when it is
// provably that process's own (this user's, its header the handle's). The
// name carries the nonce, so no other process's block has it.
void remove_stale(const HandleBytes &h, const char *name) {
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    bool own = false;
    struct stat st;
    if (!block_untrusted(fd, st)) {
        void *p = mmap(nullptr, sizeof(Block), PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            own = block_matches(static_cast<const Block *>(p), h);
            munmap(p, sizeof(Block));
        }
    }
    close(fd);
    if (own) shm_unlink(name);
}

}  // namespace

cw_status block_create(uint8_t kind, uint64_t bytes, Share **out) {
    static std::atomic<uint32_t> serial{0};
    Share *sh = static_cast<Share *>(calloc(1, sizeof(Share)));
    if (!sh) return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for a shared object");
    sh->serial = serial.fetch_add(1) + 1;
    if (sh->serial == 0) sh->serial = serial.fetch_add(1) + 1;  // after 2^32 exports
    sh->nonce = block_nonce();
    block_name(sh->name, (int32_t)getpid(), sh->serial, sh->nonce);
    int fd = shm_open(sh->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    void *p = MAP_FAILED;
    int err = errno;
    if (fd >= 0) {
        if (ftruncate(fd, sizeof(Block)) == 0)
            p = mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        err = errno;
        close(fd);
        if (p == MAP_FAILED) shm_unlink(sh->name);
    }
    if (p == MAP_FAILED) {
        free(sh);
        return fail(CW_ERROR_OUT_OF_MEMORY, "the shared block of an exported object (shm_open): %s", strerror(err));
    }
    sh->block = static_cast<Block *>(p);
    sh->block->kind = kind;
    sh->block->exporter = (int32_t)getpid();
    sh->block->uid = (uint32_t)geteuid();
    sh->block->nonce = sh->nonce;
    sh->block->bytes = bytes;
    __atomic_store_n(&sh->block->magic, kBlockMagic, __ATOMIC_RELEASE);
    sh->exporter = true;
    sh->kind = kind;
    exports_add(sh);
    *out = sh;
    return CW_SUCCESS;
}

// The exporter frees its object: the name goes (later imports fail), then the mapping.
void block_free(Share *sh) {
    exports_remove(sh);
    if (own_block(sh)) shm_unlink(sh->name);
    munmap(sh->block, sizeof(Block));
    free(sh);
}

// The name goes (no import from now on); the block stays for its holders.
void block_unname(Share *sh) {
    if (own_block(sh)) shm_unlink(sh->name);
}

int block_holders(Share *sh) { return block_holders_of(sh->block); }

void handle_make(const Share *sh, const CUuuid &uuid, uint64_t bytes, const void *ipc, HandleBytes *out) {
    memset(out, 0, sizeof *out);
    out->magic = kHandleMagic;
    out->version = kHandleVersion;
    out->kind = sh->kind;
    out->pid = sh->block->exporter;
    out->serial = sh->serial;
    out->bytes = bytes;
    out->nonce = sh->nonce;
    Block *b = sh->block;
    pthread_mutex_lock(&g_seal_mu);
    if (b->sealed.load(std::memory_order_relaxed) != 1) {
        memcpy(b->uuid, uuid.bytes, sizeof b->uuid);
        memcpy(b->ipc, ipc, sizeof b->ipc);
        b->sealed.store(1, std::memory_order_release);
    }
    memcpy(out->uuid, b->uuid, sizeof out->uuid);
    memcpy(out->ipc, b->ipc, sizeof out->ipc);
    pthread_mutex_unlock(&g_seal_mu);
}

// Checks a handle and opens its block, taking a slot.
cw_status block_open(const HandleBytes &h, uint8_t kind, const CUuuid &uuid, Share **out) {
    if (!handle_well_formed(h, kind))
        return fail(CW_ERROR_INVALID_ARGUMENT, "the handle is not a cuweave %s handle (version %d)",
                    kind == kKindBuffer ? "buffer" : "event", (int)kHandleVersion);
    if (h.pid == (int32_t)getpid())
        return fail(CW_ERROR_NOT_PERMITTED,
                    "the handle was exported by this process: the driver cannot open it here (use the exported "
                    "object itself)");
    if (memcmp(h.uuid, uuid.bytes, 16) != 0)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "the handle is of another device (UUID %02x%02x%02x%02x...): import it on a context of the "
                    "exporter's device", h.uuid[0], h.uuid[1], h.uuid[2], h.uuid[3]);
    char name[kNameMax];
    block_name(name, h.pid, h.serial, h.nonce);
    if (!process_alive(h.pid)) {
        remove_stale(h, name);
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) is gone", (int)h.pid);
    }
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) has destroyed the object (%s: %s)", (int)h.pid,
                    name, strerror(errno));
    struct stat st;
    const char *why = block_untrusted(fd, st);
    void *p = why ? MAP_FAILED : mmap(nullptr, sizeof(Block), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (why) return fail(CW_ERROR_INVALID_ARGUMENT, "the handle's shared block %s is refused: %s", name, why);
    if (p == MAP_FAILED) return fail(CW_ERROR_OUT_OF_MEMORY, "mapping the shared block %s: %s", name, strerror(err));
    Block *b = static_cast<Block *>(p);
    if (!block_matches(b, h)) {
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "the handle does not match its shared block %s (its exporter, user, kind, size, device or "
                    "driver handle)", name);
    }
    share_hook(kHookImportMatched);
    int32_t me = (int32_t)getpid();
    int slot = -1;
    for (int i = 0; i < kSlots && slot < 0; i++) {
        int32_t z = 0;
        if (b->slots[i].compare_exchange_strong(z, me)) slot = i;
    }
    if (slot < 0) {
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_OUT_OF_MEMORY, "%d imports hold the object already", kSlots);
    }
    // The exporter removes the name before it counts the holders: the name
    // still naming this block now means that count sees this slot. (Once
    // removed, anyone may make a file of that name: it must be this one.)
    fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    struct stat again;
    const bool same = fd >= 0 && fstat(fd, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino;
    if (fd >= 0) close(fd);
    if (!same) {
        b->slots[slot].store(0, std::memory_order_release);
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_INVALID_STATE, "the exporter (process %d) has destroyed the object", (int)h.pid);
    }
    Share *sh = static_cast<Share *>(calloc(1, sizeof(Share)));
    if (!sh) {
        b->slots[slot].store(0, std::memory_order_release);
        munmap(p, sizeof(Block));
        return fail(CW_ERROR_OUT_OF_MEMORY, "no host memory for an imported object");
    }
    sh->exporter = false;
    sh->kind = kind;
    sh->block = b;
    sh->serial = h.serial;
    sh->nonce = h.nonce;
    memcpy(sh->name, name, sizeof sh->name);
    *out = sh;
    return CW_SUCCESS;
}

// An importer closes: one of its slots goes.
void block_leave(Share *sh) {
    int32_t me = (int32_t)getpid();
    for (int i = 0; i < kSlots; i++) {
        int32_t v = me;
        if (sh->block->slots[i].compare_exchange_strong(v, 0, std::memory_order_acq_rel)) break;
    }
    munmap(sh->block, sizeof(Block));
    free(sh);
}

}  // namespace core
}  // namespace cw
