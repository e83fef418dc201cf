/*
 * cuweave: run-time compiled kernels. NVRTC programs, a kernel cache in
 * memory and on disk, modules loaded with the context-independent library
 * API, kernels and launches.
 *
 *   cw_program_settings ps;
 *   cw_program_settings_default(&ps);
 *   const char *exprs[] = {"scale<float>"};
 *   ps.name_expressions = exprs; ps.n_name_expressions = 1;
 *   cw_program *p;
 *   cw_program_compile(&p, ctx, source, &ps);   (CW_ERROR_COMPILE: cw_compile_log())
 *   cw_module *m;
 *   cw_module_load(&m, p);                      one load serves every context
 *   cw_kernel *k;
 *   cw_module_get_kernel(m, "scale<float>", &k);
 *   cw_kernel_launch(k, stream, &cfg, args);
 *
 * NVRTC is opened lazily, only when something is compiled: the core library
 * never needs it. It is found as "libnvrtc.so.13", then "libnvrtc.so.12",
 * then "libnvrtc.so" through the dynamic loader's search path, then under
 * $CUDA_HOME, $CUDA_PATH and /usr/local/cuda, or at the path in the
 * environment variable CUWEAVE_LIBNVRTC (read once, on first use).
 *
 * The cache: a compile is looked up by a key made of the source, the
 * headers, the options (in a canonical form: equivalent lists give the same
 * key), the name expressions, the target architecture, the output kind,
 * NVRTC's version, the driver's version and a schema number. First in
 * memory (process-wide), then on disk: one file per entry under
 * $CUWEAVE_CACHE_DIR, else $XDG_CACHE_HOME/cuweave, else
 * $HOME/.cache/cuweave; CUWEAVE_CACHE_DIR=off turns the disk cache off, and
 * so does a directory of 944 bytes or more (a warning is logged). Each
 * file carries a SHA-256 of its contents and is written to a temporary file
 * and renamed, so a reader sees a whole entry or none; a file that does not
 * verify is never loaded: it is removed (only if it is still the file that
 * was read: a concurrent writer's fresh entry is kept) and the entry
 * compiled and written again. The disk cache is kept under a size bound
 * (default 256 MiB) by removing the least recently used entries.
 *
 * Trust (as ssh's rule for its files): the cache directory, however it was
 * named, and each entry file are used only when owned by the process's
 * effective user (or root) and not writable by group or others; an entry
 * must also be a regular file. A directory that fails is neither read nor
 * written (what the memory cache lacks is compiled); a file that fails is not read (the
 * compile's write then replaces it with the library's own, mode 0600).
 * Each refusal counts in cw_jit_stats.disk_untrusted and is logged as a
 * CW_LOG_WARNING saying why. Only the directory itself is checked, not its
 * parents. Directories the library creates (the cache directory and missing
 * parents, on the first write) get mode 0700; entry files 0600. A shared
 * cache directory (group-writable, or another user's) is therefore not
 * possible: give each user their own. See docs/kernels.md.
 */
#ifndef CUWEAVE_JIT_H
#define CUWEAVE_JIT_H

#include "cuweave/common.h"
#include "cuweave/context.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_program cw_program;
typedef struct cw_module cw_module;
typedef struct cw_kernel cw_kernel;

/* ---- programs ----------------------------------------------------------- */

/* A header supplied in memory: `#include "name"` in the source finds it. */
typedef struct cw_header {
    const char *name;
    const char *source;
} cw_header;

/* Cache use of one compile. */
typedef enum cw_cache_mode {
    CW_CACHE_DEFAULT = 0,     /* memory, then disk (unless the disk cache is off) */
    CW_CACHE_MEMORY_ONLY = 1, /* memory only */
    CW_CACHE_NONE = 2         /* always compile; store nothing */
} cw_cache_mode;

typedef struct cw_program_settings {
    const char *name;                      /* program name in logs (default "cuweave.cu") */
    const char *const *options;            /* NVRTC options, n_options of them (may be NULL) */
    size_t n_options;
    const cw_header *headers;              /* headers in memory (may be NULL) */
    size_t n_headers;
    const char *const *name_expressions;   /* C++ names to fetch kernels by ("f<int>") */
    size_t n_name_expressions;
    int arch;                              /* compute capability x10 (90 = sm_90); 0 (default):
                                              the context's device */
    int output_ptx;                        /* 1: PTX for compute_<arch>; 0 (default): a cubin
                                              for sm_<arch> */
    cw_cache_mode cache;                   /* default CW_CACHE_DEFAULT */
    uint8_t reserved[48];
} cw_program_settings;

/* Fills *s with the defaults above. NULL is ignored. */
CW_API void cw_program_settings_default(cw_program_settings *s);

/*
 * Compiles CUDA C++ source with NVRTC into a cubin for the device of ctx
 * (or the architecture in settings), or finds it in the cache. ctx may be
 * NULL when settings->arch is given. The architecture comes from settings,
 * never from the options: an -arch / --gpu-architecture option is refused.
 * Options that make NVRTC write files or that time the compile (--create-pch,
 * --pch-dir, --time, --fdevice-time-trace, ...) are refused; a compile that
 * reads headers from the file system (--include-path, -I, --pre-include)
 * is done but never cached (the files may change behind the key).
 *
 * Returns CW_SUCCESS; CW_ERROR_INVALID_ARGUMENT (NULL source, bad settings,
 * a refused option: the detail names it); CW_ERROR_NO_NVRTC when NVRTC
 * cannot be loaded (even when the entry is cached: its version is part of
 * the key); CW_ERROR_COMPILE when NVRTC rejects the source: the whole log is
 * then in cw_compile_log() and its first lines in the detail. Thread-safe.
 */
CW_API cw_status cw_program_compile(cw_program **out, cw_context *ctx, const char *source,
                                    const cw_program_settings *settings);

/*
 * The NVRTC log of the last cw_program_compile on this thread that ran
 * NVRTC ("" when it had nothing to say, or when the result came from the
 * cache). Valid until the next compile on this thread. Never NULL.
 */
CW_API const char *cw_compile_log(void);

CW_API void cw_program_destroy(cw_program **p);

typedef enum cw_cache_source {
    CW_FROM_COMPILE = 0, /* NVRTC compiled it in this call */
    CW_FROM_MEMORY = 1,  /* found in this process's cache */
    CW_FROM_DISK = 2     /* read from the disk cache */
} cw_cache_source;

typedef struct cw_program_info {
    const void *code;         /* the cubin or PTX (borrowed: lives with the program) */
    size_t size;              /* bytes (PTX: without the final NUL) */
    int is_ptx;
    int arch;                 /* compute capability x10 it was made for */
    cw_cache_source source;   /* where this program's code came from */
    int cached;               /* 1 when the entry may be cached (see the file-system options) */
    char key[65];             /* the cache key, hex SHA-256 */
    uint8_t reserved[39];
} cw_program_info;

CW_API cw_status cw_program_get_info(const cw_program *p, cw_program_info *info);

/* The mangled name NVRTC gave a name expression of this program (borrowed). */
CW_API cw_status cw_program_lowered_name(const cw_program *p, const char *name_expression, const char **lowered);

/* ---- the cache ------------------------------------------------------------ */

typedef struct cw_jit_cache_settings {
    const char *dir;       /* NULL: the default (see above); "" or "off": no disk cache */
    uint64_t max_bytes;    /* disk bound; 0: 256 MiB */
    int memory;            /* 1 (default): keep compiled code in memory for the process */
    uint8_t reserved[44];
} cw_jit_cache_settings;

/* Fills *s with the defaults (directory from the environment). NULL ignored. */
CW_API void cw_jit_cache_settings_default(cw_jit_cache_settings *s);

/* Changes the cache for later compiles (the directory, with its missing
 * parents, is created with mode 0700 on the first write). The directory,
 * whether named here, by CUWEAVE_CACHE_DIR or by default, is used only
 * while it belongs to this user (or root) and group and others cannot
 * write it (see "Trust" above): an untrusted one is not refused here but
 * at each lookup (a warning, disk_untrusted, a compile). Returns
 * CW_SUCCESS or CW_ERROR_INVALID_ARGUMENT (s NULL, memory not 0 or 1,
 * reserved bytes not 0, a dir of 944 characters or more).
 * Thread-safe. */
CW_API cw_status cw_jit_cache_configure(const cw_jit_cache_settings *s);

typedef struct cw_jit_stats {
    uint64_t compiles;      /* NVRTC compiles run by this process */
    uint64_t memory_hits;
    uint64_t disk_hits;
    uint64_t disk_writes;
    uint64_t disk_rejected; /* entry files that did not verify (never loaded; removed) */
    uint64_t evictions;     /* entry files removed to keep the size bound */
    uint64_t disk_untrusted; /* lookups that refused the cache directory or an entry file
                                (owner or mode: see cw_jit_cache_configure); nothing read */
    uint8_t reserved[8];
} cw_jit_stats;

CW_API cw_status cw_jit_get_stats(cw_jit_stats *stats);

/* Empties the memory cache (the disk cache is left alone). */
CW_API void cw_jit_cache_clear_memory(void);

/* ---- modules and kernels -------------------------------------------------- */

/*
 * Loads a program's code with the library API (cuLibraryLoadData): the module
 * is not tied to a context, and its kernels launch on any context of a device
 * the code suits (green partitions included). The program may be destroyed
 * afterwards. Returns CW_ERROR_NOT_SUPPORTED on a driver without the library
 * API (cw_driver_has(CW_FEATURE_LIBRARY_API)); CW_ERROR_INVALID_STATE while
 * a GPU-resident loop runs in the process (loading waits until no kernel
 * runs on the device, which a loop never allows: load first).
 */
CW_API cw_status cw_module_load(cw_module **out, const cw_program *p);

/* As cw_module_load, from a cubin, fatbin or NUL-terminated PTX image in memory
 * (copied by the driver: the image may be freed afterwards). Same errors. */
CW_API cw_status cw_module_load_image(cw_module **out, const void *image);

/* Unloads the module; its kernels become invalid. Work already enqueued
 * completes. Sets *m to NULL; accepts NULL. While a GPU-resident loop runs
 * in the process, unloading would wait for it: the handles are invalid at
 * once and the code is unloaded when the last running loop stops. */
CW_API void cw_module_destroy(cw_module **m);

/*
 * A kernel by its name: an extern "C" name, a mangled name, or (for a
 * module made from a program) one of the program's name expressions. The
 * kernel belongs to the module (valid until it is destroyed); asking twice
 * gives the same handle. CW_ERROR_INVALID_ARGUMENT when there is no such
 * kernel (the detail names it).
 */
CW_API cw_status cw_module_get_kernel(cw_module *m, const char *name, cw_kernel **kernel);

/*
 * Loads the kernel into ctx now. The driver otherwise loads a kernel into a
 * context at its first launch there, and loading code waits until no
 * kernel runs on the device (any context of it, partitions included):
 * while a GPU-resident loop (cw_resident) runs, that is never. Load every
 * kernel a context will run before launching any loop.
 * Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, CW_ERROR_INVALID_HANDLE,
 * CW_ERROR_NOT_SUPPORTED without the library API, CW_ERROR_INVALID_STATE
 * while a loop runs in the process, or the driver's error.
 */
CW_API cw_status cw_kernel_preload(const cw_kernel *k, cw_context *ctx);

/*
 * The kernel's parameters as the driver knows them (cuKernelGetParamInfo,
 * CUDA 12.4): *count, and the size in bytes of the first `cap` of them in
 * sizes (may be NULL when cap is 0). The driver loads kernels into a context
 * lazily and can list parameters only once it has: the kernel is loaded into
 * ctx (a context it will run on) first. CW_ERROR_NOT_SUPPORTED on older
 * drivers.
 */
CW_API cw_status cw_kernel_get_params(const cw_kernel *k, cw_context *ctx, size_t *count, size_t *sizes, size_t cap);

typedef struct cw_launch_config {
    unsigned grid[3];        /* blocks; 0 is read as 1 */
    unsigned block[3];       /* threads per block; 0 is read as 1 */
    unsigned shared_bytes;   /* dynamic shared memory per block */
    unsigned cluster[3];     /* thread-block cluster dimensions; all 0: no cluster */
    int priority;            /* launch priority (used when use_priority is 1) */
    int use_priority;
    uint8_t reserved[32];
} cw_launch_config;

/* Fills *c: grid and block 1x1x1, no shared memory, no cluster, no priority. */
CW_API void cw_launch_config_default(cw_launch_config *c);

/*
 * Launches the kernel on s (cuLaunchKernelEx with the kernel itself, so it
 * runs in s's context: primary, external or a green partition). args: one
 * pointer per kernel parameter, as for cuLaunchKernel. No allocation, no
 * lock. Returns CW_SUCCESS, CW_ERROR_INVALID_ARGUMENT, CW_ERROR_INVALID_HANDLE,
 * or the driver's error (a bad configuration gives its reason).
 */
CW_API cw_status cw_kernel_launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args);

/* The driver kernel (CUkernel, borrowed), cast to void * so that this header
 * needs no CUDA type. */
CW_API cw_status cw_kernel_get_handle(const cw_kernel *k, void **cukernel);

/* ---- the library's own kernels -------------------------------------------- */

/*
 * Kernels cuweave ships precompiled (sources in ptx/, embedded in the
 * library, loaded on first use; no NVRTC involved). Each takes the
 * arguments listed.
 */
typedef enum cw_builtin {
    CW_BUILTIN_FILL_U32 = 0,   /* (uint32_t *dst, uint32_t value, uint64_t count) any grid */
    CW_BUILTIN_WRITE_U32 = 1,  /* (uint32_t *dst, uint32_t value): one thread, then a system fence */
    CW_BUILTIN_TIMESTAMP = 2,  /* (uint64_t *dst): the GPU's global timer, in ns */
    CW_BUILTIN_SET_COND = 3,   /* (cw_cond_handle h, const uint32_t *value): condition = *value != 0 */
    CW_BUILTIN_COUNT = 4
} cw_builtin;

/* The built-in kernel (owned by the library; never destroy it). */
CW_API cw_status cw_builtin_kernel(cw_builtin which, cw_kernel **kernel);

/* How the embedded built-ins were made: "cubin+ptx (nvcc at build time)" or
 * "ptx (checked in)". Static string. */
CW_API const char *cw_builtin_origin(void);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_JIT_H */
