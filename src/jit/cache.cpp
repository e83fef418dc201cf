/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: the kernel cache. Canonical options, key material, the memory
// cache and the configuration (the disk cache is in disk.cpp).
#include <mutex>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.hpp"
#include "jit/sha256.hpp"

namespace cw {
namespace jit {

JitCounters g_jit;

// ---- bytes -------------------------------------------------------------------

Bytes::~Bytes() { free(data); }

void Bytes::put(const void *p, size_t n) {
    if (!ok || n == 0) return;
    if (size + n > cap) {
        size_t c = cap ? cap : 256;
        while (c < size + n) c *= 2;
        void *q = realloc(data, c);
        if (!q) {
            ok = false;
            return;
        }
        data = static_cast<uint8_t *>(q);
        cap = c;
    }
    memcpy(data + size, p, n);
    size += n;
}

void Bytes::put_str(const char *s) {
    const size_t n = s ? strlen(s) : 0;
    put_u64(n);
    put(s, n);
}

// ---- options -----------------------------------------------------------------

namespace {

struct Alias {
    const char *from;
    const char *to;
};

// Spellings NVRTC accepts for the same option, mapped to the long form.
const Alias kAliases[] = {
    {"-arch", "--gpu-architecture"},
    {"-std", "--std"},
    {"-G", "--device-debug"},
    {"-lineinfo", "--generate-line-info"},
    {"-use_fast_math", "--use_fast_math"},
    {"-rdc", "--relocatable-device-code"},
    {"-ewp", "--extensible-whole-program"},
    {"-w", "--disable-warnings"},
    {"-default-device", "--device-as-default-execution-space"},
    {"-dopt", "--dopt"},
    {"-maxrregcount", "--maxrregcount"},
    {"-ftz", "--ftz"},
    {"-prec-div", "--prec-div"},
    {"-prec-sqrt", "--prec-sqrt"},
    {"-fmad", "--fmad"},
    {"-extra-device-vectorization", "--extra-device-vectorization"},
    {"-include", "--pre-include"},
    {"-time", "--time"},
    {"-pch", "--pch"},
    {"-create-pch", "--create-pch"},
    {"-use-pch", "--use-pch"},
    {"-pch-dir", "--pch-dir"},
    {"-fdevice-time-trace", "--fdevice-time-trace"},
    {"-split-compile", "--split-compile"},
    {"-dlto", "--dlink-time-opt"},
    {"-Werror", "--Werror"},
};

// Options whose value may come as the next entry.
const char *const kTakesValue[] = {"--gpu-architecture", "--std", "--maxrregcount", "--define-macro",
                                   "--undefine-macro", "--include-path", "--pre-include", "--dopt",
                                   "--ftz", "--prec-div", "--prec-sqrt", "--fmad", "--pch-dir",
                                   "--create-pch", "--use-pch", "--time", "--fdevice-time-trace",
                                   "--split-compile", "--Werror", "--relocatable-device-code"};

// Refused: the architecture belongs to the settings; the others write files
// or time the compile, which a cached result would silently skip.
const char *const kRefused[] = {"--gpu-architecture", "--create-pch", "--pch", "--pch-dir", "--use-pch",
                                "--time", "--fdevice-time-trace"};
// Read from the file system: compiled, never cached.
const char *const kReadsFiles[] = {"--include-path", "--pre-include"};

bool in(const char *name, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0) return true;
    return false;
}

#define CW_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

// The key that decides an option's place in the canonical order: the
// option's name, and for a macro definition or removal "macro:" and the
// macro's name (different macros are independent; what is done to one macro
// is done in order).
void group_key(const char *opt, char *out, size_t cap) {
    const char *eq = strchr(opt, '=');
    const size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
    if (eq && ((n == 14 && memcmp(opt, "--define-macro", 14) == 0) ||
               (n == 16 && memcmp(opt, "--undefine-macro", 16) == 0))) {
        const char *v = eq + 1;
        size_t m = strcspn(v, "=");
        snprintf(out, cap, "macro:%.*s", (int)m, v);
        return;
    }
    snprintf(out, cap, "%.*s", (int)n, opt);
}

// Stable insertion sort by group key (the lists are short).
void sort_by_group(char **v, size_t n) {
    char kx[1100], ky[1100];
    for (size_t i = 1; i < n; i++) {
        char *x = v[i];
        group_key(x, kx, sizeof kx);
        size_t j = i;
        while (j > 0) {
            group_key(v[j - 1], ky, sizeof ky);
            if (strcmp(ky, kx) <= 0) break;
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

}  // namespace

CanonOptions::~CanonOptions() {
    for (size_t i = 0; i < n; i++) free(opts[i]);
    free(opts);
}

cw_status canonical_options(const char *const *opts, size_t n, CanonOptions *out) {
    out->opts = n ? static_cast<char **>(calloc(n, sizeof(char *))) : nullptr;
    if (n && !out->opts) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const char *o = opts[i];
        if (!o) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: options[%zu] is NULL", i);
        while (*o == ' ' || *o == '\t') o++;
        size_t len = strlen(o);
        while (len && (o[len - 1] == ' ' || o[len - 1] == '\t')) len--;
        if (len == 0) continue;  // empty entries mean nothing to NVRTC either
        if (o[0] != '-')
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: options[%zu] \"%s\" is not an option (a value must follow its option, "
                        "as in \"--std=c++17\")",
                        i, o);
        char buf[1024];
        if (len >= sizeof buf) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: options[%zu] is too long", i);
        // -Dx, -Ux, -Ix (value glued or following)
        const char *name = nullptr;
        const char *value = nullptr;
        size_t value_len = 0;
        char head[128];
        if (len >= 2 && o[1] != '-' && (o[1] == 'D' || o[1] == 'U' || o[1] == 'I')) {
            name = o[1] == 'D' ? "--define-macro" : o[1] == 'U' ? "--undefine-macro" : "--include-path";
            if (len > 2) {
                value = o + 2;
                value_len = len - 2;
            }
        } else {
            size_t nl = 0;
            while (nl < len && o[nl] != '=') nl++;
            if (nl >= sizeof head) return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: options[%zu] is too long", i);
            memcpy(head, o, nl);
            head[nl] = '\0';
            name = head;
            for (size_t a = 0; a < CW_COUNT_OF(kAliases); a++)
                if (strcmp(head, kAliases[a].from) == 0) name = kAliases[a].to;
            if (nl < len) {
                value = o + nl + 1;
                value_len = len - nl - 1;
            }
        }
        // a value in the next entry, trimmed as entries are (one that is empty
        // or an option once trimmed is no value)
        if (!value && in(name, kTakesValue, CW_COUNT_OF(kTakesValue)) && i + 1 < n && opts[i + 1]) {
            const char *v = opts[i + 1];
            while (*v == ' ' || *v == '\t') v++;
            size_t vl = strlen(v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
            if (vl && v[0] != '-') {
                value = v;
                value_len = vl;
                i++;
            }
        }
        if (in(name, kRefused, CW_COUNT_OF(kRefused))) {
            if (strcmp(name, "--gpu-architecture") == 0)
                return fail(CW_ERROR_INVALID_ARGUMENT,
                            "invalid argument: option \"%s\": give the architecture in cw_program_settings.arch "
                            "(it is part of the cache key)",
                            o);
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "invalid argument: option \"%s\" writes files or times the compile, which a cached result "
                        "would skip: it is not allowed",
                        o);
        }
        if (in(name, kReadsFiles, CW_COUNT_OF(kReadsFiles))) out->reads_files = true;
        int w = value ? snprintf(buf, sizeof buf, "%s=%.*s", name, (int)value_len, value)
                      : snprintf(buf, sizeof buf, "%s", name);
        if (w < 0 || (size_t)w >= sizeof buf)
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: options[%zu] is too long", i);
        char *c = dup_string(buf);
        if (!c) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
        out->opts[out->n++] = c;
    }
    sort_by_group(out->opts, out->n);
    // drop an exact repeat of the previous option (same name, same value)
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (k > 0 && strcmp(out->opts[k - 1], out->opts[i]) == 0) {
            free(out->opts[i]);
            continue;
        }
        out->opts[k++] = out->opts[i];
    }
    out->n = k;
    return CW_SUCCESS;
}

// ---- key material ------------------------------------------------------------

cw_status key_material(const JitInput &in, Bytes *out) {
    static const char magic[] = "cuweave-jit";
    out->put(magic, sizeof magic);
    out->put_u32(kJitSchema);
    out->put_u32((uint32_t)in.nvrtc_major);
    out->put_u32((uint32_t)in.nvrtc_minor);
    out->put_u32((uint32_t)in.driver_version);
    out->put_u32((uint32_t)in.arch);
    out->put_u32((uint32_t)in.ptx);
    out->put_str(in.source);
    // headers, by name (their order means nothing to NVRTC)
    const size_t nh = in.n_headers;
    size_t *order = nh ? static_cast<size_t *>(malloc(nh * sizeof(size_t))) : nullptr;
    if (nh && !order) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < nh; i++) order[i] = i;
    for (size_t i = 1; i < nh; i++)
        for (size_t j = i; j > 0 && strcmp(in.headers[order[j - 1]].name, in.headers[order[j]].name) > 0; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t i = 1; i < nh; i++)
        if (strcmp(in.headers[order[i - 1]].name, in.headers[order[i]].name) == 0) {
            const char *dupname = in.headers[order[i]].name;
            free(order);
            return fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: two headers are named \"%s\"", dupname);
        }
    out->put_u32((uint32_t)nh);
    for (size_t i = 0; i < nh; i++) {
        out->put_str(in.headers[order[i]].name);
        out->put_str(in.headers[order[i]].source);
    }
    free(order);
    out->put_u32((uint32_t)in.options->n);
    for (size_t i = 0; i < in.options->n; i++) out->put_str(in.options->opts[i]);
    // name expressions: a set
    const size_t ne = in.n_exprs;
    const char **ex = ne ? static_cast<const char **>(malloc(ne * sizeof(char *))) : nullptr;
    if (ne && !ex) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < ne; i++) ex[i] = in.exprs[i];
    for (size_t i = 1; i < ne; i++)
        for (size_t j = i; j > 0 && strcmp(ex[j - 1], ex[j]) > 0; j--) {
            const char *t = ex[j];
            ex[j] = ex[j - 1];
            ex[j - 1] = t;
        }
    size_t distinct = 0;
    for (size_t i = 0; i < ne; i++)
        if (i == 0 || strcmp(ex[i - 1], ex[i]) != 0) distinct++;
    out->put_u32((uint32_t)distinct);
    for (size_t i = 0; i < ne; i++)
        if (i == 0 || strcmp(ex[i - 1], ex[i]) != 0) out->put_str(ex[i]);
    free(ex);
    if (!out->ok) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    return CW_SUCCESS;
}

// ---- entries -----------------------------------------------------------------

JitEntry *entry_new() {
    void *m = calloc(1, sizeof(JitEntry));
    if (!m) return nullptr;
    JitEntry *e = new (m) JitEntry();
    e->refs.store(1, std::memory_order_relaxed);
    return e;
}

void entry_retain(JitEntry *e) { e->refs.fetch_add(1, std::memory_order_relaxed); }

void entry_release(JitEntry *e) {
    if (!e || e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < e->n_names; i++) {
        if (e->exprs) free(e->exprs[i]);
        if (e->lowered) free(e->lowered[i]);
    }
    free(e->exprs);
    free(e->lowered);
    free(e->code);
    e->~JitEntry();
    free(e);
}

cw_status entry_encode(const JitEntry *e, Bytes *out) {
    out->put_u32((uint32_t)e->is_ptx);
    out->put_u32((uint32_t)e->arch);
    out->put_u64(e->size);
    out->put(e->code, e->size);
    out->put_u32((uint32_t)e->n_names);
    for (size_t i = 0; i < e->n_names; i++) {
        out->put_str(e->exprs[i]);
        out->put_str(e->lowered[i]);
    }
    if (!out->ok) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    return CW_SUCCESS;
}

namespace {
struct Reader {
    const uint8_t *p;
    size_t n;
    bool ok = true;
    bool take(void *dst, size_t k) {
        if (!ok || k > n) return ok = false;
        memcpy(dst, p, k);
        p += k;
        n -= k;
        return true;
    }
    uint32_t u32() {
        uint32_t v = 0;
        take(&v, 4);
        return v;
    }
    uint64_t u64() {
        uint64_t v = 0;
        take(&v, 8);
        return v;
    }
    char *str() {  // NULL and !ok when it holds a NUL (the writer's are C strings)
        uint64_t k = u64();
        if (!ok || k > n || memchr(p, 0, (size_t)k)) {
            ok = false;
            return nullptr;
        }
        char *s = dup_string(reinterpret_cast<const char *>(p), (size_t)k);
        if (!s) ok = false;
        p += k;
        n -= k;
        return s;
    }
};
}  // namespace

JitEntry *entry_decode(const uint8_t *p, size_t n) {
    Reader r{p, n};
    JitEntry *e = entry_new();
    if (!e) return nullptr;
    // Only what entry_encode writes: is_ptx 0 or 1, PTX without a NUL byte,
    // names not empty, nothing left over.
    const uint32_t is_ptx = r.u32();
    e->is_ptx = (int)is_ptx;
    e->arch = (int)r.u32();
    uint64_t size = r.u64();
    if (!r.ok || is_ptx > 1 || size > r.n || size == 0 || (is_ptx && memchr(r.p, 0, (size_t)size))) {
        entry_release(e);
        return nullptr;
    }
    e->code = static_cast<uint8_t *>(malloc((size_t)size + 1));
    if (!e->code || !r.take(e->code, (size_t)size)) {
        entry_release(e);
        return nullptr;
    }
    e->code[size] = 0;  // PTX is loaded as a C string
    e->size = (size_t)size;
    uint32_t names = r.u32();
    if (!r.ok || names > 1u << 16) {
        entry_release(e);
        return nullptr;
    }
    if (names) {
        e->exprs = static_cast<char **>(calloc(names, sizeof(char *)));
        e->lowered = static_cast<char **>(calloc(names, sizeof(char *)));
        if (!e->exprs || !e->lowered) {
            entry_release(e);
            return nullptr;
        }
        e->n_names = names;
        for (uint32_t i = 0; i < names && r.ok; i++) {
            e->exprs[i] = r.str();
            e->lowered[i] = r.str();
            if (e->exprs[i] && !e->exprs[i][0]) r.ok = false;
        }
    }
    if (!r.ok || r.n != 0) {
        entry_release(e);
        return nullptr;
    }
    return e;
}

// ---- memory cache ------------------------------------------------------------

namespace {
struct MemNode {
    uint64_t hash;
    uint8_t *material;
    size_t size;
    JitEntry *entry;
    MemNode *next;
};
constexpr size_t kBuckets = 256;
std::mutex g_mem_mutex;
MemNode *g_mem[kBuckets];
}  // namespace

JitEntry *memory_find(const Bytes &m) {
    const uint64_t h = fast_hash(m.data, m.size);
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    for (MemNode *n = g_mem[h % kBuckets]; n; n = n->next)
        if (n->hash == h && n->size == m.size && memcmp(n->material, m.data, m.size) == 0) {
            entry_retain(n->entry);
            return n->entry;
        }
    return nullptr;
}

void memory_put(const Bytes &m, JitEntry *e) {
    const uint64_t h = fast_hash(m.data, m.size);
    MemNode *node = static_cast<MemNode *>(malloc(sizeof(MemNode)));
    uint8_t *copy = static_cast<uint8_t *>(malloc(m.size));
    if (!node || !copy) {  // not cached: only a later compile is slower
        free(node);
        free(copy);
        return;
    }
    memcpy(copy, m.data, m.size);
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    for (MemNode *n = g_mem[h % kBuckets]; n; n = n->next)
        if (n->hash == h && n->size == m.size && memcmp(n->material, m.data, m.size) == 0) {
            free(node);  // another thread put it first
            free(copy);
            return;
        }
    entry_retain(e);
    *node = MemNode{h, copy, m.size, e, g_mem[h % kBuckets]};
    g_mem[h % kBuckets] = node;
}

void memory_clear() {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    for (size_t b = 0; b < kBuckets; b++) {
        MemNode *n = g_mem[b];
        while (n) {
            MemNode *next = n->next;
            entry_release(n->entry);
            free(n->material);
            free(n);
            n = next;
        }
        g_mem[b] = nullptr;
    }
}

// ---- configuration -----------------------------------------------------------

namespace {
std::mutex g_cfg_mutex;
bool g_cfg_set = false;
CacheConfig g_cfg;

// The directory the environment names (out: "" for none); false when it is
// too long for the cache's paths (kDirMax): then none, never a shortened one.
bool default_dir(char *out, size_t cap) {
    const char *env = getenv("CUWEAVE_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = 0;
    if (env)
        n = *env == '\0' || strcmp(env, "off") == 0 ? snprintf(out, cap, "%s", "") : snprintf(out, cap, "%s", env);
    else if (xdg && *xdg == '/')
        n = snprintf(out, cap, "%s/cuweave", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.cache/cuweave", home);
    else
        out[0] = '\0';
    if (n < 0 || (size_t)n >= kDirMax || (size_t)n >= cap) {
        out[0] = '\0';
        return false;
    }
    return true;
}

void warn_dir_too_long() {
    log(CW_LOG_WARNING,
        "cuweave: the kernel cache directory from the environment is %zu bytes or longer; the disk cache is off",
        kDirMax);
}
}  // namespace

void cache_config(CacheConfig *out) {
    bool fits = true;
    {
        std::lock_guard<std::mutex> lock(g_cfg_mutex);
        if (!g_cfg_set) {
            fits = default_dir(g_cfg.dir, sizeof g_cfg.dir);
            g_cfg.max_bytes = 256ull << 20;
            g_cfg.memory = true;
            g_cfg_set = true;
        }
        *out = g_cfg;
    }
    if (!fits) warn_dir_too_long();
}

cw_status cache_configure(const cw_jit_cache_settings *s) {
    CacheConfig c;
    if (s->dir == nullptr) {
        if (!default_dir(c.dir, sizeof c.dir)) warn_dir_too_long();
    }
    else if (s->dir[0] == '\0' || strcmp(s->dir, "off") == 0)
        c.dir[0] = '\0';
    else
        snprintf(c.dir, sizeof c.dir, "%s", s->dir);
    c.max_bytes = s->max_bytes ? s->max_bytes : 256ull << 20;
    c.memory = s->memory == 1;
    std::lock_guard<std::mutex> lock(g_cfg_mutex);
    g_cfg = c;
    g_cfg_set = true;
    return CW_SUCCESS;
}

void cache_stats(cw_jit_stats *stats) {
    memset(stats, 0, sizeof *stats);
    stats->compiles = g_jit.compiles.load();
    stats->memory_hits = g_jit.memory_hits.load();
    stats->disk_hits = g_jit.disk_hits.load();
    stats->disk_writes = g_jit.disk_writes.load();
    stats->disk_rejected = g_jit.disk_rejected.load();
    stats->evictions = g_jit.evictions.load();
    stats->disk_untrusted = g_jit.disk_untrusted.load();
}

void cache_info(cw_jit_cache_info *info) {
    memset(info, 0, sizeof *info);
    CacheConfig c;
    cache_config(&c);
    snprintf(info->dir, sizeof info->dir, "%s", c.dir);
    info->max_bytes = c.max_bytes;
    info->memory = c.memory ? 1 : 0;
    DiskInfo d;
    disk_info(c.dir, &d);
    info->exists = d.exists ? 1 : 0;
    info->trusted = d.trusted ? 1 : 0;
    info->bytes = d.bytes;
    info->entries = d.entries;
}

cw_status cache_clear_disk(uint64_t *entries, uint64_t *bytes) {
    CacheConfig c;
    cache_config(&c);
    uint64_t n = 0, b = 0;
    const cw_status st = disk_clear(c.dir, &n, &b);
    if (entries) *entries = n;
    if (bytes) *bytes = b;
    return st;
}

}  // namespace jit
}  // namespace cw
