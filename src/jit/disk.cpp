/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: the kernel cache on disk (cache.cpp: options, key
// material, entries and the memory cache). One file per entry, verified by
// SHA-256, written through a temporary file and a rename, kept under a size
// bound by LRU eviction.
#include <atomic>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/jit.hpp"
#include "jit/sha256.hpp"

namespace cw {
namespace jit {

DiskHook g_disk_hook = nullptr;
void *g_disk_hook_arg = nullptr;

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
// cannot be opened; -2 (counted, and a warning that says why) when it is not
// trusted.
int open_dir(const char *dir) {
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
    // rename is atomic: readers see the old file, the new one, or none
    if (!ok || renameat(dfd, tmp, dfd, name) != 0) {
        const int err = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot write %s/%s: %s", dir, name, strerror(err));
    }
    close(dfd);
    g_jit.disk_writes.fetch_add(1, std::memory_order_relaxed);
    disk_evict(dir, max_bytes, e->key);
    return CW_SUCCESS;
}

namespace {
struct FileInfo {
    char name[80];
    uint64_t size;
    struct timespec mtime;
};
bool older(const FileInfo &a, const FileInfo &b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    return a.mtime.tv_nsec < b.mtime.tv_nsec;
}
}  // namespace

void disk_evict(const char *dir, uint64_t max_bytes, const uint8_t *keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    char keep_name[80] = "";
    if (keep) {
        char hex[65];
        hex32(keep, hex);
        snprintf(keep_name, sizeof keep_name, "%s.cwk", hex);
    }
    FileInfo *v = nullptr;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    const time_t now = time(nullptr);
    struct dirent *de;
    char path[1200];
    while ((de = readdir(d)) != nullptr) {
        const size_t len = strlen(de->d_name);
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (strstr(de->d_name, ".cwk.tmp.")) {
            // a writer that died: leave fresh ones alone (a write in progress)
            if (stat(path, &st) == 0 && now - st.st_mtime > 600) unlink(path);
            continue;
        }
        if (len != 68 || strcmp(de->d_name + 64, ".cwk") != 0) continue;
        if (stat(path, &st) != 0) continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            void *q = realloc(v, c * sizeof(FileInfo));
            if (!q) break;
            v = static_cast<FileInfo *>(q);
            cap = c;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].size = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        total += v[n].size;
        n++;
    }
    closedir(d);
    if (total > max_bytes) {
        for (size_t i = 1; i < n; i++)  // oldest first
            for (size_t j = i; j > 0 && older(v[j], v[j - 1]); j--) {
                FileInfo t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
        for (int pass = 0; pass < 2 && total > max_bytes; pass++)
            for (size_t i = 0; i < n && total > max_bytes; i++) {
                if (v[i].size == 0) continue;  // gone already
                if (pass == 0 && strcmp(v[i].name, keep_name) == 0) continue;
                snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
                if (unlink(path) == 0 || errno == ENOENT) {
                    total -= v[i].size;
                    v[i].size = 0;
                    g_jit.evictions.fetch_add(1, std::memory_order_relaxed);
                }
            }
    }
    free(v);
}

}  // namespace jit
}  // namespace cw
