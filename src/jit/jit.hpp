/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: run-time compilation. Programs compiled by NVRTC
// (program.cpp) behind the kernel cache, in memory (cache.cpp) and on disk
// (disk.cpp); their code is loaded as modules by the kernel layer.
#pragma once

#include <atomic>
#include <stddef.h>
#include <stdint.h>

#include "base/text.hpp"
#include "core/context.hpp"
#include "cuweave/jit.h"

namespace cw {
namespace jit {

// The cache's on-disk schema: bump when the key material or the file layout
// changes (old entries then simply miss).
constexpr uint32_t kJitSchema = 1;

// A growable byte buffer on malloc (the library never throws).
struct Bytes {
    uint8_t *data = nullptr;
    size_t size = 0, cap = 0;
    bool ok = true;  // false after an allocation failed
    ~Bytes();
    void put(const void *p, size_t n);
    void put_u32(uint32_t v) { put(&v, 4); }
    void put_u64(uint64_t v) { put(&v, 8); }
    void put_str(const char *s);  // u64 length, then the bytes
};

// Options in canonical form (see canonical_options). Strings are malloc'ed.
struct CanonOptions {
    char **opts = nullptr;
    size_t n = 0;
    bool reads_files = false;  // an include path or pre-include: never cached
    ~CanonOptions();
};

// Canonicalises NVRTC options: one option per entry ("--name" or
// "--name=value"), short and alias spellings mapped to the long ones, a value
// given as a separate entry joined to its option; then sorted by option name
// (and macro name, for macro definitions) with the order of options that
// share it kept (NVRTC reads those in order: include paths, two definitions
// of one macro), and an exact repeat of the option before it dropped. Refuses (CW_ERROR_INVALID_ARGUMENT, naming it) an
// architecture option and options that write files or time the compile.
cw_status canonical_options(const char *const *opts, size_t n, CanonOptions *out);

// Everything a compile's result depends on, as bytes (the key material).
struct JitInput {
    const char *source;
    const cw_header *headers;
    size_t n_headers;
    const CanonOptions *options;
    const char *const *exprs;
    size_t n_exprs;
    int arch;
    int ptx;
    int nvrtc_major, nvrtc_minor;
    int driver_version;
};
cw_status key_material(const JitInput &in, Bytes *out);

// A compiled result: code and the lowered names of the name expressions.
// Reference counted: the memory cache and every program holding it.
struct JitEntry {
    std::atomic<int> refs;
    uint8_t *code;
    size_t size;
    int is_ptx;
    int arch;
    size_t n_names;
    char **exprs;
    char **lowered;
    uint8_t key[32];  // SHA-256 of the key material
};
JitEntry *entry_new();
void entry_retain(JitEntry *e);
void entry_release(JitEntry *e);
// Serialised payload of an entry (the disk file's body) and back.
cw_status entry_encode(const JitEntry *e, Bytes *out);
JitEntry *entry_decode(const uint8_t *p, size_t n);  // NULL when malformed

// The memory cache: lookup by key material (exact byte comparison).
JitEntry *memory_find(const Bytes &material);  // retained, or NULL
void memory_put(const Bytes &material, JitEntry *e);
void memory_clear();

// A cache file's bytes: a header ("CWKC", schema, payload size, SHA-256 of
// the payload, key), then the payload. file_encode makes what disk_store
// writes; file_decode checks what disk_load read (size bounds, magic,
// schema, length, key, SHA-256, then entry_decode) and returns the entry
// with its key, or NULL when anything does not verify.
cw_status file_encode(const JitEntry *e, Bytes *out);
JitEntry *file_decode(const uint8_t *p, size_t n, const uint8_t key[32]);

// The disk cache. dir: the directory (no trailing slash needed). A
// directory or entry file is used only when it is owned by this user (or
// root) and not writable by group or others (ssh's rule); else it is
// refused: not read, counted in disk_untrusted, a warning logged. Rejected:
// the file did not verify (removed, if still the file read); FileRefused:
// the entry file is not trusted (a write may replace it); DirRefused: the
// directory is not trusted (do not write there either).
enum class DiskResult { Hit, Miss, Rejected, FileRefused, DirRefused };
DiskResult disk_load(const char *dir, const uint8_t key[32], JitEntry **out);
// Writes the entry (through a temporary file renamed into place), making
// the directory (mode 0700) and its missing parents if needed; refuses an
// untrusted directory (CW_ERROR_NOT_PERMITTED). Then keeps the directory
// under max_bytes: the write is added to the running account in
// dir/cache.lock (under its flock); only when the account passes max_bytes
// (or is missing, unreadable or an hour old) is the directory read, the
// account set from it and, when over, the least recently used entries
// removed down to 7/8 of max_bytes (the entry written last). Without the
// lock file (not trusted), every write reads the directory and keeps
// exactly max_bytes.
cw_status disk_store(const char *dir, const JitEntry *e, uint64_t max_bytes);
// What the directory holds: entry files counted by reading it (under the
// cache's lock, correcting the account, when its cache.lock exists: none is
// made); exists/trusted as the trust rule says (an untrusted one is not
// read, not logged).
struct DiskInfo {
    bool exists, trusted;
    uint64_t bytes, entries;
};
void disk_info(const char *dir, DiskInfo *out);
// Removes every entry file (and writers' stale temporaries) under the
// cache's lock; the account is set to what is left. An untrusted directory
// is refused (CW_ERROR_NOT_PERMITTED, a warning); a missing one or dir ""
// is CW_SUCCESS with nothing removed.
cw_status disk_clear(const char *dir, uint64_t *entries, uint64_t *bytes);
// Full reads of a cache directory so far (the seam cwi_jit_disk_scans).
uint64_t disk_scans();

// The configuration in force (copied under a lock).
struct CacheConfig {
    char dir[1024];  // "" = no disk cache
    uint64_t max_bytes;
    bool memory;
};
// A directory name must be shorter than this: the cache's paths (1200 bytes)
// hold it, '/' and any file name. cw_jit_cache_configure refuses a longer
// one; one from the environment turns the disk cache off.
constexpr size_t kDirMax = 944;
void cache_config(CacheConfig *out);

struct JitCounters {
    std::atomic<uint64_t> compiles, memory_hits, disk_hits, disk_writes, disk_rejected, evictions, disk_untrusted;
};
extern JitCounters g_jit;

// Test hook (src/testing/hooks.cpp, cwi_jit_disk_hook): when set, disk_load
// calls it with an entry file's path once the file was read and did not
// verify, right before (phase 0) and right after (phase 1) it removes the
// file. Set only by tests, while no compile runs.
using DiskHook = void (*)(int phase, const char *path, void *arg);
extern DiskHook g_disk_hook;
extern void *g_disk_hook_arg;

// The cache's configuration (cw_jit_cache_configure; NULL dir: the default).
cw_status cache_configure(const cw_jit_cache_settings *s);
void cache_stats(cw_jit_stats *stats);
// cw_jit_cache_get_info and cw_jit_cache_clear_disk (checked by the caller).
void cache_info(cw_jit_cache_info *info);
cw_status cache_clear_disk(uint64_t *entries, uint64_t *bytes);

}  // namespace jit
}  // namespace cw

struct cw_program {
    uint32_t tag;
    cw::jit::JitEntry *entry;
    cw_cache_source source;
    bool cached;
    char key[65];
};

namespace cw {
namespace jit {

// Compiles source for ctx's device (or settings->arch) through the cache.
// Settings are checked by the caller.
cw_status program_compile(cw_context *ctx, const char *source, const cw_program_settings *settings,
                          cw_program **out);
void program_destroy(cw_program *p);
cw_status program_lowered_name(const cw_program *p, const char *expr, const char **lowered);
// The thread's last compile log ("" when none).
const char *compile_log();
// The program's code loaded as a module (kernel layer).
cw_status module_load(const cw_program *p, cw_module **out);

}  // namespace jit
}  // namespace cw
