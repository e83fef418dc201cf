/* SPDX-License-Identifier: BSD-2-Clause */
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
 *   cw_program_compile(&p, ctx, source, &ps);   (CW_ERROR_COMPILE: cw_jit_get_compile_log())
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
 * (default 256 MiB) by removing the least recently used entries: a write
 * adds its size to a running account kept in the directory (its file
 * cache.lock, locked while it is changed); only when the account passes
 * the bound is the directory read, and the least recently used entries
 * removed down to 7/8 of it. cw_jit_cache_get_info says where the cache is
 * and how big; cw_jit_cache_clear_disk empties it.
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

/* Fills *s with the defaults above. NULL is ignored.
 *
 * Returns: nothing. */
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
 * The caller owns the program (destroy it with cw_program_destroy).
 * Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the program.
 *   CW_ERROR_INVALID_ARGUMENT  out or source is NULL; ctx is NULL while
 *                              settings->arch is 0; bad settings (counts
 *                              without arrays, an empty header or name
 *                              expression, arch, output_ptx or cache out of
 *                              range, nonzero reserved bytes); a refused
 *                              option (the detail names it).
 *   CW_ERROR_INVALID_HANDLE    ctx is not a live context.
 *   CW_ERROR_NO_DRIVER         the CUDA driver could not be loaded (its
 *                              version is part of the cache key).
 *   CW_ERROR_NOT_SUPPORTED     the driver is older than CUDA 12.0.
 *   CW_ERROR_NO_NVRTC          NVRTC cannot be loaded (even when the entry
 *                              is cached: its version is part of the key;
 *                              the detail says which library was tried).
 *   CW_ERROR_COMPILE           NVRTC rejected the source (the whole log is in
 *                              cw_jit_get_compile_log(), its first lines in
 *                              the detail), or an NVRTC call failed (detail:
 *                              the call and its nvrtcResult).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DRIVER            the device's compute capability could not be
 *                              read (detail: cuDeviceGetAttribute).
 */
CW_API cw_status cw_program_compile(cw_program **out, cw_context *ctx, const char *source,
                                    const cw_program_settings *settings);

/*
 * The NVRTC log of the last cw_program_compile on this thread that ran
 * NVRTC ("" when it had nothing to say, or when the result came from the
 * cache).
 *
 * Returns: the log, owned by the library, valid on this thread until its
 * next compile; never NULL.
 */
CW_API const char *cw_jit_get_compile_log(void);

/*
 * Destroys the program (its code: a module loaded from it keeps its own).
 * Sets *p to NULL; accepts NULL and a pointer to NULL. Never fails: a handle
 * that is not a live program is left alone and said so in a CW_LOG_WARNING
 * (the thread's detail is left alone).
 *
 * Returns: nothing.
 */
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

/*
 * Fills *info. No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled (its reserved bytes zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  p or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    p is not a live program.
 */
CW_API cw_status cw_program_get_info(const cw_program *p, cw_program_info *info);

/*
 * The mangled name NVRTC gave a name expression of this program (borrowed:
 * lives with the program).
 *
 * Returns:
 *   CW_SUCCESS                 *lowered is the name.
 *   CW_ERROR_INVALID_ARGUMENT  p, name_expression or lowered is NULL;
 *                              name_expression is not one of the program's
 *                              (settings.name_expressions).
 *   CW_ERROR_INVALID_HANDLE    p is not a live program.
 */
CW_API cw_status cw_program_get_lowered_name(const cw_program *p, const char *name_expression,
                                             const char **lowered);

/* ---- the cache ------------------------------------------------------------ */

typedef struct cw_jit_cache_settings {
    const char *dir;       /* NULL: the default (see above); "" or "off": no disk cache */
    uint64_t max_bytes;    /* disk bound; 0: 256 MiB */
    int memory;            /* 1 (default): keep compiled code in memory for the process */
    uint8_t reserved[44];
} cw_jit_cache_settings;

/* Fills *s with the defaults (directory from the environment). NULL ignored.
 *
 * Returns: nothing. */
CW_API void cw_jit_cache_settings_default(cw_jit_cache_settings *s);

/* Changes the cache for later compiles (the directory, with its missing
 * parents, is created with mode 0700 on the first write). The directory,
 * whether named here, by CUWEAVE_CACHE_DIR or by default, is used only
 * while it belongs to this user (or root) and group and others cannot
 * write it (see "Trust" above): an untrusted one is not refused here but
 * at each lookup (a warning, disk_untrusted, a compile). Needs no driver.
 * Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 later compiles use these settings.
 *   CW_ERROR_INVALID_ARGUMENT  s is NULL; memory is not 0 or 1; reserved
 *                              bytes are not 0; dir has 944 characters or
 *                              more.
 */
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

/*
 * The process's cache counters. Needs no driver. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *stats is filled (its reserved bytes zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  stats is NULL.
 */
CW_API cw_status cw_jit_get_stats(cw_jit_stats *stats);

/* Empties the memory cache (the disk cache is left alone). Programs made
 * from it keep their code. Thread-safe.
 *
 * Returns: nothing. */
CW_API void cw_jit_cache_clear_memory(void);

typedef struct cw_jit_cache_info {
    char dir[1024];     /* the disk cache's directory in force; "" when the disk cache is off */
    uint64_t max_bytes; /* its size bound (cw_jit_cache_settings.max_bytes; default 256 MiB) */
    uint64_t bytes;     /* bytes in its entry files now */
    uint64_t entries;   /* entry files in it now (<64 hex digits>.cwk; nothing else is counted) */
    int exists;         /* 1 when the directory exists */
    int trusted;        /* 1 when it exists and may be used (see "Trust" above) */
    int memory;         /* 1 when compiled code is kept in memory for the process */
    uint8_t reserved[52];
} cw_jit_cache_info;

/*
 * What the kernel cache is now: the disk directory in force (the settings
 * of cw_jit_cache_configure, else the environment's rule above), its bound,
 * and what its entry files hold, counted by reading the directory (no other
 * file in it is counted). Counting also corrects the cache's running
 * account of its size (see docs/kernels.md). Creates nothing, and reads no
 * entry. A directory that is not trusted is reported (trusted 0, nothing
 * counted), not used. Needs no driver. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled (its reserved bytes zeroed).
 *   CW_ERROR_INVALID_ARGUMENT  info is NULL.
 */
CW_API cw_status cw_jit_cache_get_info(cw_jit_cache_info *info);

/*
 * Empties the disk cache: removes every entry file of the directory in
 * force (and temporary files that writers left more than 10 minutes ago),
 * nothing else, holding the cache's lock (the one a write takes to keep the
 * size bound), so no eviction runs meanwhile; a compile in another process
 * may write an entry right after. The memory cache is left alone
 * (cw_jit_cache_clear_memory). entries and bytes, each may be NULL, get how
 * many entry files and bytes were removed. Needs no driver. Thread-safe.
 *
 * Returns:
 *   CW_SUCCESS                 the entries are removed (none when the disk
 *                              cache is off or the directory does not exist).
 *   CW_ERROR_NOT_PERMITTED     the directory is not trusted (see "Trust";
 *                              nothing removed, a warning logged), cannot
 *                              be read, or an entry could not be removed
 *                              (the detail names it; the others are removed).
 */
CW_API cw_status cw_jit_cache_clear_disk(uint64_t *entries, uint64_t *bytes);

/* ---- modules and kernels -------------------------------------------------- */

/*
 * Loads a program's code with the library API (cuLibraryLoadData): the module
 * is not tied to a context, and its kernels launch on any context of a device
 * the code suits (green partitions included). The program may be destroyed
 * afterwards. The caller owns the module (destroy it with
 * cw_module_destroy). Loading is refused while a GPU-resident loop runs in
 * the process (loading waits until no kernel runs on the device, which a
 * loop never allows: load first).
 *
 * Returns:
 *   CW_SUCCESS                 *out is the module.
 *   CW_ERROR_INVALID_ARGUMENT  out or p is NULL.
 *   CW_ERROR_INVALID_HANDLE    p is not a live program.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no library API
 *                              (cw_driver_has(CW_FEATURE_LIBRARY_API)).
 *   CW_ERROR_INVALID_STATE     a GPU-resident loop runs in the process.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory, or the driver ran out.
 *   CW_ERROR_DRIVER            cuLibraryLoadData refused the code (detail:
 *                              the result).
 */
CW_API cw_status cw_module_load(cw_module **out, const cw_program *p);

/*
 * As cw_module_load, from a cubin, fatbin or NUL-terminated PTX image in
 * memory (copied by the driver: the image may be freed afterwards).
 *
 * The image is checked here, the way the driver tells images apart, before
 * the driver sees it: a cubin is a 64-bit ELF file for CUDA (EM_CUDA), a
 * fatbin starts with the fatbin magic (0xBA55ED50, version 1), and PTX is
 * text whose first directive (after blanks and comments) is .version. The
 * driver loads code lazily by default (CUDA_MODULE_LOADING): it may accept
 * anything here and refuse it only at the first kernel lookup, so without
 * this check garbage would load. What passes the check may still be
 * refused by the driver (PTX that does not compile, code for no GPU of the
 * machine): here when it loads eagerly, else at cw_module_get_kernel or the
 * first launch.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the module.
 *   CW_ERROR_INVALID_ARGUMENT  out or image is NULL; image is not a cubin,
 *                              a fatbin or PTX (the detail says what its
 *                              first bytes are). Checked before the driver
 *                              is loaded.
 *   CW_ERROR_NO_DRIVER         the CUDA driver could not be loaded.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no library API
 *                              (cw_driver_has(CW_FEATURE_LIBRARY_API)).
 *   CW_ERROR_INVALID_STATE     a GPU-resident loop runs in the process.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory, or the driver ran out.
 *   CW_ERROR_DRIVER            cuLibraryLoadData refused the image (detail:
 *                              the result, CUDA_ERROR_INVALID_IMAGE say).
 */
CW_API cw_status cw_module_load_image(cw_module **out, const void *image);

/*
 * Unloads the module; its kernels become invalid. Work already enqueued
 * completes. Sets *m to NULL; accepts NULL and a pointer to NULL. While a
 * GPU-resident loop runs in the process, unloading would wait for it: the
 * handles are invalid at once and the code is unloaded when the last
 * running loop stops. Never fails: a handle that is not a live module (or
 * the library's own) is left alone and said so in a CW_LOG_WARNING (the
 * thread's detail is left alone); a driver that refuses to unload is logged
 * (CW_LOG_WARNING).
 *
 * Returns: nothing.
 */
CW_API void cw_module_destroy(cw_module **m);

/*
 * A kernel by its name: an extern "C" name, a mangled name, or (for a
 * module made from a program) one of the program's name expressions. The
 * kernel belongs to the module (valid until it is destroyed); asking twice
 * gives the same handle.
 *
 * Returns:
 *   CW_SUCCESS                 *kernel is the kernel.
 *   CW_ERROR_INVALID_ARGUMENT  m, name or kernel is NULL; name is ""; the
 *                              module has no such kernel (the detail names
 *                              it, and its lowered name).
 *   CW_ERROR_INVALID_HANDLE    m is not a live module.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory for the kernel's handle.
 *   CW_ERROR_DRIVER            cuLibraryGetKernel failed otherwise (a lazily
 *                              loaded image the driver cannot read; detail:
 *                              the result).
 */
CW_API cw_status cw_module_get_kernel(cw_module *m, const char *name, cw_kernel **kernel);

/*
 * Loads the kernel into ctx now. The driver otherwise loads a kernel into a
 * context at its first launch there, and loading code waits until no
 * kernel runs on the device (any context of it, partitions included):
 * while a GPU-resident loop (cw_resident) runs, that is never. Load every
 * kernel a context will run before launching any loop. Also learns the
 * kernel's parameters for cw_kernel_launch's checks, where it has not yet.
 *
 * Returns:
 *   CW_SUCCESS                 the kernel is loaded into ctx.
 *   CW_ERROR_INVALID_ARGUMENT  k or ctx is NULL.
 *   CW_ERROR_INVALID_HANDLE    k is not a live kernel, ctx not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no library API.
 *   CW_ERROR_INVALID_STATE     a GPU-resident loop runs in the process.
 *   CW_ERROR_OUT_OF_MEMORY     the driver ran out loading the code.
 *   CW_ERROR_DRIVER            the driver could not load the kernel into ctx
 *                              (code for another GPU, say; detail:
 *                              cuKernelGetFunction), or could not make ctx
 *                              current.
 */
CW_API cw_status cw_kernel_preload(const cw_kernel *k, cw_context *ctx);

/*
 * The kernel's parameters as the driver knows them (cuKernelGetParamInfo,
 * CUDA 12.4): the size in bytes of the first `cap` of them in sizes (may
 * be NULL when cap is 0), and their number in *count (as
 * cw_graph_get_sinks: the buffer, its capacity, then the count). The
 * driver loads kernels into a context
 * lazily and can list parameters only once it has: the kernel is loaded into
 * ctx (a context it will run on) first.
 *
 * Returns:
 *   CW_SUCCESS                 *count is the number of parameters; the first
 *                              min(cap, *count) sizes are in sizes.
 *   CW_ERROR_INVALID_ARGUMENT  k, ctx or count is NULL; sizes is NULL while
 *                              cap is not 0.
 *   CW_ERROR_INVALID_HANDLE    k is not a live kernel, ctx not a live context.
 *   CW_ERROR_NOT_SUPPORTED     the driver cannot list parameters (before
 *                              CUDA 12.4).
 *   CW_ERROR_DRIVER            the driver could not load the kernel into ctx
 *                              or list its parameters, or could not make ctx
 *                              current (detail: the call).
 */
CW_API cw_status cw_kernel_get_params(const cw_kernel *k, cw_context *ctx, size_t *sizes, size_t cap, size_t *count);

typedef struct cw_launch_config {
    unsigned grid[3];        /* blocks; 0 is read as 1 */
    unsigned block[3];       /* threads per block; 0 is read as 1 */
    unsigned shared_bytes;   /* dynamic shared memory per block */
    unsigned cluster[3];     /* thread-block cluster dimensions; all 0: no cluster */
    int priority;            /* launch priority (used when use_priority is 1) */
    int use_priority;        /* 0 or 1 */
    const size_t *arg_sizes; /* NULL (default): the arguments' count and sizes are not
                                checked. Else the size in bytes of each of the n_args
                                arguments, checked against the kernel's parameters */
    unsigned n_args;         /* entries of arg_sizes (0 when arg_sizes is NULL) */
    uint8_t reserved[20];
} cw_launch_config;

/* Fills *c: grid and block 1x1x1, no shared memory, no cluster, no priority,
 * no argument check. NULL is ignored.
 *
 * Returns: nothing. */
CW_API void cw_launch_config_default(cw_launch_config *c);

/*
 * Launches the kernel on s (cuLaunchKernelEx with the kernel itself, so it
 * runs in s's context: primary, external or a green partition). args: one
 * pointer per kernel parameter, as for cuLaunchKernel (NULL for a kernel
 * without parameters). No allocation, no lock.
 *
 * The arguments are checked against the kernel's parameters where the
 * driver can list them (cuKernelGetParamInfo, CUDA 12.4): args NULL for a
 * kernel that has parameters is refused, and so are cfg->arg_sizes (when
 * given) that differ from the parameters in number or in any size; nothing
 * is launched then. The parameters are listed once per kernel, at its
 * first launch outside a capture (or cw_kernel_preload,
 * cw_kernel_get_params), and kept: later launches check them without a
 * driver call. A kernel first launched while its stream captures (listing
 * may load code, which a capture may not see), and every kernel on a driver
 * that cannot list parameters, is launched unchecked until then.
 *
 * Returns:
 *   CW_SUCCESS                 the launch is enqueued on s (recorded, when s
 *                              captures).
 *   CW_ERROR_INVALID_ARGUMENT  k, s or cfg is NULL; cfg->use_priority is not
 *                              0 or 1; cfg->n_args is not 0 while
 *                              cfg->arg_sizes is NULL; cfg's reserved bytes
 *                              are not 0; args is NULL and the kernel has
 *                              parameters; cfg->arg_sizes differ from the
 *                              kernel's parameters (the detail says how).
 *   CW_ERROR_INVALID_HANDLE    k is not a live kernel, s not a live stream.
 *   CW_ERROR_DEVICE_FAULT      the context faulted earlier (detail: the fault).
 *   CW_ERROR_CAPTURE           s captures and the driver refused the launch
 *                              there (the capture is invalidated).
 *   CW_ERROR_DRIVER            the driver refused the launch (a bad
 *                              configuration, code for another GPU; detail:
 *                              the call and the reason).
 */
CW_API cw_status cw_kernel_launch(cw_kernel *k, cw_stream *s, const cw_launch_config *cfg, void **args);

/*
 * The driver kernel (CUkernel, borrowed: valid while its module lives),
 * cast to void * so that this header needs no CUDA type. No driver call.
 *
 * Returns:
 *   CW_SUCCESS                 *cukernel is the driver kernel.
 *   CW_ERROR_INVALID_ARGUMENT  k or cukernel is NULL.
 *   CW_ERROR_INVALID_HANDLE    k is not a live kernel.
 */
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

/*
 * The built-in kernel (owned by the library; never destroy it). The first
 * call loads the embedded image (refused while a GPU-resident loop runs:
 * loading would wait for it).
 *
 * Returns:
 *   CW_SUCCESS                 *kernel is the kernel.
 *   CW_ERROR_INVALID_ARGUMENT  which is not a cw_builtin; kernel is NULL.
 *   CW_ERROR_NO_DRIVER         the CUDA driver could not be loaded.
 *   CW_ERROR_NOT_SUPPORTED     the driver has no library API.
 *   CW_ERROR_INVALID_STATE     first use while a GPU-resident loop runs.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory, or the driver ran out.
 *   CW_ERROR_DRIVER            the driver refused the embedded image or one
 *                              of its kernels (detail: the call).
 */
CW_API cw_status cw_builtin_get_kernel(cw_builtin which, cw_kernel **kernel);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_JIT_H */
