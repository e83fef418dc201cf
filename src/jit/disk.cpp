/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: the kernel cache on disk (cache.cpp: options, key
// material, entries and the memory cache). One file per entry, verified by
// SHA-256, written through a temporary file and a rename, kept under a size
// bound by LRU eviction, kept by a running account (below) under the cache's
// lock, so that a write does not read the whole directory.
#include <algorithm>
#include <atomic>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/jit.hpp"
#include "jit/sha256.hpp"

namespace cw {
namespace jit {

DiskHook g_disk_hook = nullptr;
void *g_disk_hook_arg = nullptr;
std::atomic<uint64_t> g_disk_scans{0};

// After a write: the running account, and the bound kept (below). `keep`:
// the entry just written, removed last.
void keep_bound(int dfd, uint64_t max_bytes, uint64_t added, uint64_t replaced_bytes, bool replaced,
                const char *keep);

// ---- disk cache --------------------------------------------------------------
//
// File <dir>/<key hex>.cwk:
//   "CWKC" | u32 schema | u64 payload size | 32 bytes SHA-256(payload) |
//   32 bytes key | payload (entry_encode)

namespace {

constexpr size_t kHeader = 4 + 4 + 8 + 32 + 32;
constexpr uint64_t kMaxPayload = 1ull << 30;

void entry_name(const uint8_t key[32], char *out, size_t cap) {
    char hex[65];
    hex32(key, hex);
    snprintf(out, cap, "%s.cwk", hex);
}

// Makes dir and its missing parents. A directory made here gets mode 0700
// whatever the umask (mkdir's mode is masked by it).
bool mkdirs(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        const bool last = *p == '\0';
        if (!last && *p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0700) == 0)
            chmod(path, 0700);
        else if (errno != EEXIST)
            return false;
        if (last) return true;
        *p = '/';
    }
}

// ssh's rule for its files: trusted when owned by this user (or root) and
// not writable by group or others; an entry must also be a regular file.
// Else false, with the reason in `why`.
bool trusted(const struct stat &st, bool regular, char *why, size_t cap) {
    const uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0) {
        snprintf(why, cap, "it is owned by uid %u, not by this user (uid %u) or root", (unsigned)st.st_uid,
                 (unsigned)me);
        return false;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, cap, "it is writable by group or others (mode %04o)", (unsigned)(st.st_mode & 07777));
        return false;
    }
    if (regular && !S_ISREG(st.st_mode)) {
        snprintf(why, cap, "it is not a regular file");
        return false;
    }
    return true;
}

// The cache directory, opened, if it may be used: -1 with errno when it
// cannot be opened; -2 (when `warn`: counted, and a warning that says why)
// when it is not trusted.
int open_dir(const char *dir, bool warn = true) {
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    struct stat st;
    char why[160];
    if (fstat(dfd, &st) != 0) {
        snprintf(why, sizeof why, "fstat failed: %s", strerror(errno));
    } else if (trusted(st, false, why, sizeof why)) {
        return dfd;
    }
    close(dfd);
    if (!warn) return -2;
    g_jit.disk_untrusted.fetch_add(1, std::memory_order_relaxed);
    log(CW_LOG_WARNING,
        "cuweave: kernel cache directory %s is not used (nothing is read from or written to it): %s; a cache "
        "directory must belong to this user and be writable by it alone (chmod 700)",
        dir, why);
    return -2;
}

std::atomic<unsigned> g_tmp_counter{0};

// A name beside `name` for a temporary file of this process.
void tmp_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s.tmp.%ld.%u", name, (long)getpid(), g_tmp_counter.fetch_add(1));
}

// Removes the entry `name` only if it is still the file that was read (`st`,
// from the descriptor the caller still holds open, so its inode cannot be
// reused meanwhile). A writer may have renamed a fresh entry into place
// since the read: the file is first renamed aside (atomic), then compared;
// a file that is not the one read is renamed back. 1: removed; 0: a newer
// file was there and is kept; -1: nothing was there.
int remove_if_read(int dfd, const char *name, const struct stat &st) {
    char aside[128];
    tmp_name(name, aside, sizeof aside);
    if (renameat(dfd, name, dfd, aside) != 0) return -1;
    struct stat now;
    if (fstatat(dfd, aside, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
        unlinkat(dfd, aside, 0);
        return 1;
    }
    // Another writer's whole entry; should a third have renamed one into
    // place since, this replaces it with an equally whole one.
    if (renameat(dfd, aside, dfd, name) != 0) unlinkat(dfd, aside, 0);
    return 0;
}

bool write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

bool read_all(int fd, void *p, size_t n) {
    uint8_t *b = static_cast<uint8_t *>(p);
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

// The entry read from fd (its stat in st) and verified against key; NULL
// when it does not verify.
JitEntry *read_entry(int fd, const struct stat &st, const uint8_t key[32]) {
    if (st.st_size < (off_t)kHeader || (uint64_t)st.st_size > kHeader + kMaxPayload) return nullptr;
    uint8_t *buf = static_cast<uint8_t *>(malloc((size_t)st.st_size));
    if (!buf || !read_all(fd, buf, (size_t)st.st_size)) {
        free(buf);
        return nullptr;
    }
    JitEntry *e = file_decode(buf, (size_t)st.st_size, key);
    free(buf);
    return e;
}

}  // namespace

JitEntry *file_decode(const uint8_t *buf, size_t n, const uint8_t key[32]) {
    if (n < kHeader || n - kHeader > kMaxPayload) return nullptr;
    uint32_t schema;
    uint64_t size;
    memcpy(&schema, buf + 4, 4);
    memcpy(&size, buf + 8, 8);
    if (memcmp(buf, "CWKC", 4) != 0 || schema != kJitSchema || size != (uint64_t)(n - kHeader) ||
        memcmp(buf + 48, key, 32) != 0)
        return nullptr;
    uint8_t digest[32];
    sha256(buf + kHeader, (size_t)size, digest);
    if (memcmp(digest, buf + 16, 32) != 0) return nullptr;
    JitEntry *e = entry_decode(buf + kHeader, (size_t)size);
    if (e) memcpy(e->key, key, 32);
    return e;
}

cw_status file_encode(const JitEntry *e, Bytes *out) {
    Bytes payload;
    CW_TRY(entry_encode(e, &payload));
    uint8_t header[kHeader];
    memcpy(header, "CWKC", 4);
    const uint32_t schema = kJitSchema;
    const uint64_t size = payload.size;
    memcpy(header + 4, &schema, 4);
    memcpy(header + 8, &size, 8);
    sha256(payload.data, payload.size, header + 16);
    memcpy(header + 48, e->key, 32);
    out->put(header, sizeof header);
    out->put(payload.data, payload.size);
    if (!out->ok) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    return CW_SUCCESS;
}

DiskResult disk_load(const char *dir, const uint8_t key[32], JitEntry **out) {
    const int dfd = open_dir(dir);
    if (dfd == -2) return DiskResult::DirRefused;
    if (dfd < 0) return DiskResult::Miss;
    char name[80], path[1200];
    entry_name(key, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        close(dfd);
        return DiskResult::Miss;
    }
    struct stat st;
    char why[160];
    bool ok = fstat(fd, &st) == 0;
    if (!ok) snprintf(why, sizeof why, "fstat failed: %s", strerror(errno));
    if (ok && !trusted(st, true, why, sizeof why)) ok = false;
    if (!ok) {
        // Not read, and not removed: the next write replaces it.
        close(fd);
        close(dfd);
        g_jit.disk_untrusted.fetch_add(1, std::memory_order_relaxed);
        log(CW_LOG_WARNING, "cuweave: kernel cache entry %s is not used (not read): %s", path, why);
        return DiskResult::FileRefused;
    }
    JitEntry *e = read_entry(fd, st, key);
    if (!e) {
        // Never loaded: removed (if it is still the file read), so that the
        // entry is compiled and written again.
        if (g_disk_hook) g_disk_hook(0, path, g_disk_hook_arg);
        const int removed = remove_if_read(dfd, name, st);
        if (g_disk_hook) g_disk_hook(1, path, g_disk_hook_arg);
        close(fd);
        close(dfd);
        g_jit.disk_rejected.fetch_add(1, std::memory_order_relaxed);
        log(CW_LOG_WARNING, "cuweave: kernel cache entry %s did not verify; %s", path,
            removed > 0    ? "removed"
            : removed == 0 ? "not removed: a newer file took its place meanwhile"
                           : "another process removed it");
        return DiskResult::Rejected;
    }
    futimens(fd, nullptr);  // most recently used
    close(fd);
    close(dfd);
    *out = e;
    return DiskResult::Hit;
}

cw_status disk_store(const char *dir, const JitEntry *e, uint64_t max_bytes) {
    Bytes file;
    CW_TRY(file_encode(e, &file));
    if (!mkdirs(dir)) return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot create %s: %s", dir, strerror(errno));
    const int dfd = open_dir(dir);
    if (dfd == -2)
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: the directory %s is not trusted (see the warning before)",
                    dir);
    if (dfd < 0) return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot open %s: %s", dir, strerror(errno));
    char name[80], tmp[128];
    entry_name(e->key, name, sizeof name);
    tmp_name(name, tmp, sizeof tmp);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        const int err = errno;
        close(dfd);
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot create %s/%s: %s", dir, tmp, strerror(err));
    }
    bool ok = write_all(fd, file.data, file.size);
    ok = (close(fd) == 0) && ok;
    // What the rename replaces, for the account (another writer may change it meanwhile: the next full read of
    // the directory corrects the account).
    struct stat old;
    const bool replaces = fstatat(dfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode);
    // rename is atomic: readers see the old file, the new one, or none
    if (!ok || renameat(dfd, tmp, dfd, name) != 0) {
        const int err = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot write %s/%s: %s", dir, name, strerror(err));
    }
    g_jit.disk_writes.fetch_add(1, std::memory_order_relaxed);
    keep_bound(dfd, max_bytes, file.size, replaces ? (uint64_t)old.st_size : 0, replaces, name);
    close(dfd);
    return CW_SUCCESS;
}

// ---- the size bound: a running account under the cache's lock ----------------
//
// <dir>/cache.lock is the cache's lock (flock, exclusive) and holds its
// account: "CWKA" | u32 version | u64 bytes | u64 entries | i64 time of the
// last full read of the directory. A write adds its file (less the one it
// replaced) under the lock; only when the account passes the bound, is
// older than an hour, or is missing or unreadable, is the directory read:
// the account is set from what is there, and when that is over the bound
// the least recently used entries are removed (sorted once, n log n) down
// to 7/8 of it, so the next full read comes only after an eighth of the
// bound was written again. Loads, rejected files' removals and writers
// without the lock (a library before this one) are not counted; the next
// full read corrects the account. cw_jit_cache_get_info reads the
// directory and corrects it too.

namespace {

constexpr char kLockName[] = "cache.lock";
constexpr uint32_t kAccountVersion = 1;
constexpr time_t kRescanAfter = 3600;
constexpr time_t kStaleTmp = 600;  // a temporary file older than this: its writer died

struct Account {
    char magic[4];
    uint32_t version;
    uint64_t bytes, entries;
    int64_t scanned;
};
static_assert(sizeof(Account) == 32, "the account's layout on disk");

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// <64 lower-case hex digits>.cwk: an entry's name, and nothing else is one.
bool is_entry_name(const char *n) {
    for (int i = 0; i < 64; i++)
        if (!hex_digit(n[i])) return false;
    return strcmp(n + 64, ".cwk") == 0;
}

// The cache's lock: dir/cache.lock opened (made, mode 0600, when missing
// and `create`) and locked. -1 when it cannot be, or is not a regular file
// of this user's that only it can write: the caller goes on without the
// account.
int lock_take(int dfd, bool create = true) {
    const int fd = openat(dfd, kLockName, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) return -1;
    struct stat st;
    char why[160];
    if (fstat(fd, &st) != 0 || !trusted(st, true, why, sizeof why)) {
        close(fd);
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    return fd;
}

// Unlocked before it is closed: a flock belongs to the open file, and a
// child forked while this thread held it has a copy of the descriptor, whose
// close would never come (the lock would stay held until the child exits,
// and the child's own writes would wait for it forever).
void lock_drop(int lfd) {
    if (lfd < 0) return;
    flock(lfd, LOCK_UN);
    close(lfd);
}

bool account_read(int lfd, Account *a) {
    return pread(lfd, a, sizeof *a, 0) == (ssize_t)sizeof *a && memcmp(a->magic, "CWKA", 4) == 0 &&
           a->version == kAccountVersion;
}

void account_write(int lfd, uint64_t bytes, uint64_t entries, time_t scanned) {
    Account a;
    memcpy(a.magic, "CWKA", 4);
    a.version = kAccountVersion;
    a.bytes = bytes;
    a.entries = entries;
    a.scanned = (int64_t)scanned;
    if (pwrite(lfd, &a, sizeof a, 0) != (ssize_t)sizeof a) {
        // a short write leaves an account that does not read: the next write reads the directory
    }
}

struct FileInfo {
    char name[72];
    uint64_t size;
    struct timespec mtime;
};

bool older(const FileInfo &a, const FileInfo &b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    return a.mtime.tv_nsec < b.mtime.tv_nsec;
}

// What a full read of the directory found: its entry files (listed when
// asked) and their total.
struct Listing {
    FileInfo *v = nullptr;
    size_t n = 0, cap = 0;
    uint64_t bytes = 0, entries = 0;
    bool complete = true;  // false: the directory could not be read, or the list not grown
    ~Listing() { free(v); }
};

// Reads the directory: every entry file (a regular file with an entry's
// name) counted, and listed when `list`; temporaries of writers that died
// removed when `clean`.
void read_dir(int dfd, Listing *out, bool list, bool clean) {
    g_disk_scans.fetch_add(1, std::memory_order_relaxed);
    const int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : nullptr;
    if (!d) {
        if (fd >= 0) close(fd);
        out->complete = false;
        return;
    }
    const time_t now = time(nullptr);
    struct dirent *de;
    while ((de = readdir(d)) != nullptr) {
        struct stat st;
        if (strstr(de->d_name, ".cwk.tmp.")) {
            // a writer that died: leave fresh ones alone (a write in progress)
            if (clean && fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtime > kStaleTmp)
                unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (strlen(de->d_name) != 68 || !is_entry_name(de->d_name)) continue;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        out->bytes += (uint64_t)st.st_size;
        out->entries++;
        if (!list) continue;
        if (out->n == out->cap) {
            const size_t c = out->cap ? out->cap * 2 : 256;
            void *q = realloc(out->v, c * sizeof(FileInfo));
            if (!q) {
                out->complete = false;
                continue;
            }
            out->v = static_cast<FileInfo *>(q);
            out->cap = c;
        }
        FileInfo &f = out->v[out->n++];
        memcpy(f.name, de->d_name, 69);
        f.size = (uint64_t)st.st_size;
        f.mtime = st.st_mtim;
    }
    closedir(d);
}

// Removes the least recently used entries of the listing until its total
// is at most `target`; the entry named `keep` (may be NULL) goes last.
void evict(int dfd, Listing *l, uint64_t target, const char *keep) {
    std::sort(l->v, l->v + l->n, older);  // oldest first
    for (int pass = 0; pass < 2 && l->bytes > target; pass++)
        for (size_t i = 0; i < l->n && l->bytes > target; i++) {
            FileInfo &f = l->v[i];
            if (f.size == UINT64_MAX) continue;  // gone already
            if (pass == 0 && keep && strcmp(f.name, keep) == 0) continue;
            if (unlinkat(dfd, f.name, 0) == 0 || errno == ENOENT) {
                l->bytes -= f.size;
                l->entries--;
                f.size = UINT64_MAX;
                g_jit.evictions.fetch_add(1, std::memory_order_relaxed);
            }
        }
}

}  // namespace

void keep_bound(int dfd, uint64_t max_bytes, uint64_t added, uint64_t replaced_bytes, bool replaced,
                const char *keep) {
    const int lfd = lock_take(dfd);
    const time_t now = time(nullptr);
    Account a;
    // A total that this write would carry past 2^64 is corrupt (a small sum
    // after the wrap would pass for "under the bound"): read the directory.
    if (lfd >= 0 && account_read(lfd, &a) && a.scanned <= (int64_t)now + 60 && now - a.scanned < kRescanAfter &&
        a.bytes <= UINT64_MAX - added) {
        const uint64_t bytes = a.bytes + added >= replaced_bytes ? a.bytes + added - replaced_bytes : 0;
        const uint64_t entries = a.entries + (replaced ? 0 : 1);
        if (bytes <= max_bytes) {
            account_write(lfd, bytes, entries, (time_t)a.scanned);
            lock_drop(lfd);
            return;
        }
    }
    // Past the bound, or no account to trust: read the directory. Without
    // the lock there is no account: every write reads it and keeps exactly
    // the bound.
    Listing l;
    read_dir(dfd, &l, true, true);
    if (l.bytes > max_bytes) evict(dfd, &l, lfd >= 0 ? max_bytes - max_bytes / 8 : max_bytes, keep);
    if (lfd >= 0 && l.complete) account_write(lfd, l.bytes, l.entries, now);
    lock_drop(lfd);
}

void disk_info(const char *dir, DiskInfo *out) {
    memset(out, 0, sizeof *out);
    if (!dir[0]) return;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    out->exists = true;
    const int dfd = open_dir(dir, false);
    if (dfd < 0) return;
    out->trusted = true;
    const int lfd = lock_take(dfd, false);  // asking creates nothing: no lock file, no account to correct
    Listing l;
    read_dir(dfd, &l, false, false);
    if (lfd >= 0 && l.complete) account_write(lfd, l.bytes, l.entries, time(nullptr));
    lock_drop(lfd);
    close(dfd);
    out->bytes = l.bytes;
    out->entries = l.entries;
}

cw_status disk_clear(const char *dir, uint64_t *entries, uint64_t *bytes) {
    *entries = *bytes = 0;
    if (!dir[0]) return CW_SUCCESS;
    const int dfd = open_dir(dir, true);
    if (dfd == -2)
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: the directory %s is not trusted (see the warning before)",
                    dir);
    if (dfd < 0) {
        if (errno == ENOENT) return CW_SUCCESS;
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot open %s: %s", dir, strerror(errno));
    }
    const int lfd = lock_take(dfd);
    Listing l;
    read_dir(dfd, &l, true, true);
    cw_status st = l.complete ? CW_SUCCESS
                              : fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot read all of %s (out of memory "
                                                             "or unreadable)", dir);
    uint64_t left = l.bytes, left_n = l.entries;
    for (size_t i = 0; i < l.n; i++) {
        if (unlinkat(dfd, l.v[i].name, 0) == 0 || errno == ENOENT) {
            *entries += 1;
            *bytes += l.v[i].size;
            left -= l.v[i].size;
            left_n--;
        } else if (st == CW_SUCCESS) {
            st = fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot remove %s/%s: %s", dir, l.v[i].name,
                      strerror(errno));
        }
    }
    if (lfd >= 0) account_write(lfd, left, left_n, time(nullptr));
    lock_drop(lfd);
    close(dfd);
    return st;
}

uint64_t disk_scans() { return g_disk_scans.load(std::memory_order_relaxed); }

}  // namespace jit
}  // namespace cw
