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

// ---- disk cache --------------------------------------------------------------
//
// File <dir>/<key hex>.cwk:
//   "CWKC" | u32 schema | u64 payload size | 32 bytes SHA-256(payload) |
//   32 bytes key | payload (entry_encode)

namespace {

constexpr size_t kHeader = 4 + 4 + 8 + 32 + 32;
constexpr uint64_t kMaxPayload = 1ull << 30;

void entry_path(const char *dir, const uint8_t key[32], char *out, size_t cap) {
    char hex[65];
    hex32(key, hex);
    snprintf(out, cap, "%s/%s.cwk", dir, hex);
}

bool mkdirs(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST;
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

}  // namespace

DiskResult disk_load(const char *dir, const uint8_t key[32], JitEntry **out) {
    char path[1200];
    entry_path(dir, key, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return DiskResult::Miss;
    struct stat st;
    uint8_t *buf = nullptr;
    bool good = fstat(fd, &st) == 0 && st.st_size >= (off_t)kHeader && (uint64_t)st.st_size <= kHeader + kMaxPayload;
    if (good) {
        buf = static_cast<uint8_t *>(malloc((size_t)st.st_size));
        good = buf && read_all(fd, buf, (size_t)st.st_size);
    }
    close(fd);
    JitEntry *e = nullptr;
    if (good) {
        uint32_t schema;
        uint64_t size;
        memcpy(&schema, buf + 4, 4);
        memcpy(&size, buf + 8, 8);
        uint8_t digest[32];
        good = memcmp(buf, "CWKC", 4) == 0 && schema == kJitSchema && size == (uint64_t)st.st_size - kHeader &&
               memcmp(buf + 48, key, 32) == 0;
        if (good) {
            sha256(buf + kHeader, (size_t)size, digest);
            good = memcmp(digest, buf + 16, 32) == 0;
        }
        if (good) {
            e = entry_decode(buf + kHeader, (size_t)size);
            good = e != nullptr;
        }
    }
    free(buf);
    if (!good) {
        // Never loaded: removed, so that the entry is compiled and written again.
        unlink(path);
        g_jit.disk_rejected.fetch_add(1, std::memory_order_relaxed);
        log(CW_LOG_WARNING, "cuweave: kernel cache entry %s did not verify; removed", path);
        return DiskResult::Rejected;
    }
    memcpy(e->key, key, 32);
    utimensat(AT_FDCWD, path, nullptr, 0);  // most recently used
    *out = e;
    return DiskResult::Hit;
}

cw_status disk_store(const char *dir, const JitEntry *e, uint64_t max_bytes) {
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
    if (!mkdirs(dir)) return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot create %s: %s", dir, strerror(errno));
    char path[1200], tmp[1300];
    entry_path(dir, e->key, path, sizeof path);
    static std::atomic<unsigned> counter{0};
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter.fetch_add(1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot create %s: %s", tmp, strerror(errno));
    bool ok = write_all(fd, header, sizeof header) && write_all(fd, payload.data, payload.size);
    ok = (close(fd) == 0) && ok;
    // rename is atomic: readers see the old file, the new one, or none
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return fail(CW_ERROR_NOT_PERMITTED, "kernel cache: cannot write %s: %s", path, strerror(err));
    }
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
