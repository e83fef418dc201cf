/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave testing: the driver test seam (fault injection and call counts).
 *
 * Not part of the public API and not exported from the shared library: tests
 * link libcuweave.a and include this header. While the seam is enabled every
 * driver call goes through a wrapper that counts it, counts its successes,
 * and can fail it without calling the driver.
 */
#ifndef CUWEAVE_SRC_SEAM_H
#define CUWEAVE_SRC_SEAM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of driver entries in the table, and an entry's name ("cuInit"). */
int cwi_seam_entry_count(void);
const char *cwi_seam_entry_name(int id);
/* Id of the entry with this name, or -1. */
int cwi_seam_entry(const char *name);

/*
 * Routes every driver call through the counting wrappers. Initialises the
 * library first; returns its cw_status (0 on success). Counters start at 0.
 */
int cwi_seam_enable(void);
/* Restores the real table. Counters are kept until the next enable. */
void cwi_seam_disable(void);
/* Zeroes every counter and disarms the fault. */
void cwi_seam_reset(void);

/*
 * Arms a fault: the nth call (1-based, counted from now) of entry `id`
 * (or of any entry when id is -1) returns `result` without reaching the
 * driver. One fault at a time; nth 0 disarms. The fault fires once.
 */
void cwi_seam_fail(int id, unsigned long nth, int result);
/* Runs fn(arg) inside every call of entry `id` made through the seam, just
 * before the call reaches the driver (after the armed fault, when it fires,
 * the call returns without running it): for tests that check what other
 * threads or calls see while a driver call is under way. One hook at a time;
 * fn NULL removes it. Not reset by cwi_seam_reset. */
void cwi_seam_hook(int id, void (*fn)(void *arg), void *arg);
/* 1 when the armed fault has fired since it was armed. */
int cwi_seam_fired(void);
/* The entry whose call the fault failed, or -1 when it has not fired. (Not
 * "the entry with fewer successes than calls": some calls fail in normal
 * use, cuKernelGetParamInfo past the last parameter for one.) */
int cwi_seam_fired_entry(void);

/* Timing (for benchmarks): with on, every call through the seam adds its
 * duration to its entry's total; cwi_seam_ns(id) reads it (-1: all entries),
 * cwi_seam_reset zeroes it. Off by default. */
void cwi_seam_timing(int on);
unsigned long long cwi_seam_ns(int id);

/* NVTX (src/base/nvtx.hpp): 1 when the library was built with its ranges
 * (NVTX3's headers found), else 0; whether a tool is attached (asks NVTX
 * the first time, as the first range would); texts registered with the
 * domain so far. */
int cwi_nvtx_compiled(void);
int cwi_nvtx_on(void);
unsigned cwi_nvtx_registered(void);
/* For bench_nvtx: n push/pop pairs of one fixed name through the module's
 * scope helper (empty 0), or n turns of the same loop without them (empty
 * 1); returns the nanoseconds they took. */
unsigned long long cwi_nvtx_pairs(unsigned long n, int empty);

/* Calls and successful calls of entry id since enable/reset (-1: all entries). */
unsigned long cwi_seam_calls(int id);
unsigned long cwi_seam_successes(int id);
/* Driver calls the calling thread has made through the seam while it was
 * enabled (all entries; never reset): the difference of two readings counts
 * the calls of the code between them on this thread only. */
unsigned long cwi_seam_thread_calls(void);

/* The handle registry: live handles of every kind, and a fault (the nth
 * next reservation of room fails with CW_ERROR_OUT_OF_MEMORY; 0 disarms). */
size_t cwi_handles_live(void);
void cwi_handles_fail_next(int nth);
/* Bytes the registry holds: its table and the older tables it keeps for
 * lookups that may still read them. */
size_t cwi_handles_bytes(void);
/* Looks the live handle h up while, once the lookup has read the first
 * slot it probes, the entry there (when another) is removed and put back:
 * a removal that moves h behind the lookup. Returns 0 when h is refused,
 * 1 when the lock-free probe found it, 2 when the lookup found it only by
 * looking again under the registry's lock. */
int cwi_handles_lookup_racing_move(const void *h);
/* The quarantine of destroyed handle objects' memory: how many it holds
 * (the memory of a destroyed handle is freed when that many more have been
 * freed after it), and 1 while the memory at object is held. */
size_t cwi_handles_quarantine(void);
int cwi_handles_held(const void *object);
/* Handle objects freed into the quarantine since the process started. */
unsigned long cwi_handles_freed(void);

/* SHA-256 of data (the kernel cache's hash); portable 1 forces the portable
 * code on a CPU with SHA instructions. */
void cwi_sha256(const void *data, size_t n, int portable, unsigned char out[32]);

/* The kernel disk cache: fn (NULL: none) is called with an entry file's
 * path when a file was read and did not verify, right before (phase 0) and
 * right after (phase 1) the cache removes it. Set it while no compile runs. */
void cwi_jit_disk_hook(void (*fn)(int phase, const char *path, void *arg), void *arg);

/* Full reads of a kernel cache directory by this process so far (a write
 * that passes the bound or finds no account, cw_jit_cache_get_info,
 * cw_jit_cache_clear_disk): a write below the bound reads none. */
unsigned long long cwi_jit_disk_scans(void);

/*
 * Diagnostics for benchmarks and tests: the host view of a WRITE_VALUE
 * future's word and the sequence number its current marker writes. Returns
 * 0 on success, -1 for a future of the other kind. Read the word with an
 * acquire load (__atomic_load_n(word, __ATOMIC_ACQUIRE)), as cuweave does:
 * on a weakly ordered host (aarch64) a plain load lets later reads of the
 * work's results run ahead of it.
 */
struct cw_future;
int cwi_future_word(struct cw_future *f, volatile unsigned **word, unsigned *armed);

/* Times the futures' watcher thread (callbacks and fds of WRITE_VALUE and
 * EVENT futures) was woken from its polling sleep by a future newly watched
 * (then its polls start again from the shortest sleep), since the process
 * started. */
unsigned long cwi_future_watcher_wakes(void);

/* Calls fn(arg) in every HOST_FUNC future's host function after it stored the
 * completion and before it wakes waiters and runs the callback; NULL removes
 * it. Set it while no host function can run. */
void cwi_future_host_fn_hook(void (*fn)(void *arg), void *arg);

/* ready(arg): called on the futures' watcher thread after a pass over its
 * list that found futures to notify, before it notifies them; entry(arg):
 * called at the start of every watch (cw_future_set_callback, get_fd, rearm
 * of a future with an fd) on the caller's thread. NULL removes them. Set
 * them while no future is watched or being watched. */
void cwi_future_watch_hooks(void (*ready)(void *arg), void (*entry)(void *arg), void *arg);

/* Calls fn(arg) in every unwatch of a future (cw_future_destroy, and
 * cw_future_rearm), on the caller's thread, after it read whether the
 * future is on one of the watcher's lists or being notified by it and
 * before it acts on that (tests: hold that window open); NULL removes it.
 * Set it while no future is destroyed or rearmed. */
void cwi_future_unwatch_hook(void (*fn)(void *arg), void *arg);

/* 1 while the future is on the watcher's list, 0 when not, -1 for a handle
 * that is not a live future. */
int cwi_future_watched(const struct cw_future *f);

/* Marks (the events the pipeline records after each compute call) whose host
 * memory was allocated since the process started: reused from then on, so
 * a warm pipeline's iterations allocate none. */
unsigned long cwi_marks_allocated(void);

/* A resident loop's trace (settings.trace): its marks (two words a stage,
 * begun and ended, as the GPU writes them) and how many stages its last
 * build made. Returns 0, or -1 when the loop has no marks yet. */
struct cw_resident;
int cwi_resident_trace(struct cw_resident *r, volatile unsigned long long **marks, unsigned *stages);

/* Sets trace t's global timer of context ctx (host ns = timer ns + offset),
 * as cw_trace_record_resident's calibration kernel would (the fake runs no
 * kernels). Returns 0, or -1 when t or ctx is not live. */
struct cw_trace;
struct cw_context;
int cwi_trace_set_globaltimer(struct cw_trace *t, struct cw_context *ctx, long long offset);

/* How many comparisons the sort of trace t's last cw_trace_write made (the
 * spans put in time order); -1 when t is not live. */
long long cwi_trace_sort_comparisons(struct cw_trace *t);

/* Runs fn(arg) inside every cw_trace_record_resident, on its thread, once it
 * has read what the trace noted of the loop's stages and before it adds
 * any (tests hold that window open). NULL removes it. */
void cwi_trace_source_hook(void (*fn)(void *arg), void *arg);

/* Closes libcupti (the traces' CUPTI path) so that the next trace that asks
 * for CUPTI searches for it again (CUWEAVE_LIBCUPTI as set then): 0, or -1
 * while a trace is on CUPTI. */
int cwi_cupti_forget(void);

/* A resident loop's host block (struct cw_res_host, graph/resident_abi.h):
 * the doorbell and launch words the host writes, and the words the GPU
 * writes (completed, exited_epoch, exit_reason), which a test writes as
 * the GPU would. NULL for a handle that is not a live loop. */
struct cw_res_host;
struct cw_res_host *cwi_resident_host(struct cw_resident *r);

/* The source a fused loop compiles for f (cw_resident_set_fused), malloc'ed
 * (free it), or NULL when f is refused (cw_last_error says why). Its one
 * in-memory header is "cuweave/resident_device.h". */
struct cw_resident_fused;
char *cwi_resident_fused_source(const struct cw_resident_fused *f);

/* The tables a dataflow loop's kernel gets for f (src/graph/fused_dataflow.h's
 * cwf_df_stage, cwf_df_dep and cwf_df_chain), for a test that runs the
 * protocol itself: *stages, *deps and *chains are malloc'ed (free them);
 * counts[] receives stages, deps, tasks a request, tiles, stages read whole,
 * requests in flight, the state's 64-bit words, chains, and final (the last
 * chain's task signals). 0, or -1 when f is refused (cw_last_error says
 * why). block_threads as in f (0: 256). */
int cwi_fused_plan(const struct cw_resident_fused *f, void **stages, void **deps, void **chains,
                   unsigned long long counts[9]);

/* A fused loop's state in device memory (the barrier's words, or the
 * dataflow protocol's counters) and its size. 0, or -1 for a handle that is
 * not a live fused loop. */
int cwi_resident_fused_state(struct cw_resident *r, unsigned long long *dptr, size_t *bytes);
/* Persistent work and the calls that wait for it (core/idle.hpp): released(arg)
 * runs on the thread that saw the last running resident loop stop, after it
 * took the releases queued meanwhile and before it runs them; checked(arg)
 * after a call that would wait for a running loop (a code load, a context
 * synchronize) found none, before it makes that call. NULL removes them.
 * Set them while no such call runs. */
void cwi_idle_hooks(void (*released)(void *arg), void (*checked)(void *arg), void *arg);
/* Loop launches that waited for such a call or release in progress on
 * another thread to finish, since the process started. */
unsigned long cwi_idle_launch_waits(void);

/* A lease pool's waiters: threads asleep in cw_stream_pool_acquire
 * for a stream (read under the pool's mutex, which a waiter holds until it
 * sleeps). -1 for a handle that is not a live pool. */
struct cw_stream_pool;
int cwi_pool_waiting(struct cw_stream_pool *p);

/* Points in the sharing code (src/core/share.cpp) where the hook of
 * cwi_share_hook runs, on the thread that is there:
 *  CWI_SHARE_SWEEP_TAKEN     a sweep took a kept object (its importers all
 *                            closed) off the list, before freeing it;
 *  CWI_SHARE_TEARDOWN_WAITS  a context's teardown is about to wait for a
 *                            sweep on another thread to free one of the
 *                            context's kept objects (under the list's lock);
 *  CWI_SHARE_HOLDERS_WAIT    each 1 ms sleep of a context's teardown waiting
 *                            for the importers of its kept objects;
 *  CWI_SHARE_EXPORTS_LOCKED  inside the lock of the process's list of
 *                            exported blocks, as an export is added;
 *  CWI_SHARE_IMPORT_MATCHED  an import found the handle's block and its
 *                            header the handle's, before taking a slot;
 *  CWI_SHARE_HOLDERS_COUNTED the exporter's last reference removed the
 *                            block's name and counted its holders, before
 *                            it frees the object or keeps it. */
enum {
    CWI_SHARE_SWEEP_TAKEN = 0,
    CWI_SHARE_TEARDOWN_WAITS = 1,
    CWI_SHARE_HOLDERS_WAIT = 2,
    CWI_SHARE_EXPORTS_LOCKED = 3,
    CWI_SHARE_IMPORT_MATCHED = 4,
    CWI_SHARE_HOLDERS_COUNTED = 5
};
/* Sets the hook (NULL removes it). Set it while no call of share.h runs. */
void cwi_share_hook(void (*fn)(int point, void *arg), void *arg);
/* 1 while some thread holds the spin lock of pipeline p's buffer cache (a
 * seam hook on a driver call asks it to learn whether that call is made
 * with the lock held), 0 when none does, -1 for a handle that is not a
 * live pipeline. No lock taken. */
struct cw_pipeline;
int cwi_pipeline_cache_locked(struct cw_pipeline *p);

/* ---- for the fuzzers (tests/fuzz/) ---- */

/* The kernel cache's file reader (what disk_load does with a file's bytes:
 * size bounds, magic, schema, length, key, SHA-256, the payload) on the n
 * bytes at file, asked for `key` (32 bytes). Returns 1 when it accepts
 * them: then *again (malloc'ed; free it) holds the file the cache's writer
 * makes of the entry read, *again_n bytes long; 0 when it rejects them;
 * -1 when the writer failed (out of memory). */
int cwi_cache_file_read(const void *file, size_t n, const unsigned char key[32], unsigned char **again,
                        size_t *again_n);

/* The NVRTC option canonicaliser of the kernel cache on n option strings.
 * Returns its cw_status; on success *out holds *out_n canonical options
 * (free them with cwi_free_strings) and *reads_files whether one of them
 * reads the file system. */
int cwi_canonical_options(const char *const *opts, size_t n, char ***out, size_t *out_n, int *reads_files);
void cwi_free_strings(char **v, size_t n);

/* The kernel cache directory as the environment gives it now
 * (CUWEAVE_CACHE_DIR, XDG_CACHE_HOME, HOME), copied to out; "" when the
 * disk cache is off. The configuration in force is kept. */
void cwi_cache_dir_from_env(char *out, size_t cap);
/* CUWEAVE_SERIALIZE read again: 1 when it makes every pool single. */
int cwi_serialize_from_env(void);

/* The communicator bootstrap's messages (src/multi/bootstrap_msg.hpp: the
 * id, a rank's hello, rank 0's refusal), as the bootstrap makes and reads
 * them; ids are the 128 bytes of a cw_comm_id. */
/* What rank 0 makes of the n bytes a peer has sent so far, rank 0 of world
 * ranks with token (NULL: none); taken[r] nonzero for each rank r already
 * answered. Returns 1 when it answers the peer with the id (*rank), 0 when
 * it refuses it (reason: the refusal's text, NUL-terminated, in cap bytes),
 * -1 while it waits for more bytes. */
int cwi_comm_hello_judge(const void *in, size_t n, int world, const char *token, const unsigned char *taken,
                         int *rank, char *reason, size_t cap);
/* The hello rank `rank` sends (token NULL: none) into buf (cap bytes: 300
 * hold any); returns its length (0 when cap is too small). */
size_t cwi_comm_hello_format(char *buf, size_t cap, int rank, int world, const char *token);
/* What rank `rank` makes of the n bytes of rank 0's reply: returns its
 * cw_status (0: *world and id hold what rank 0 sent; else cw_last_error
 * says why, rank 0's reason for a refusal); *whole: 1 when a rank reading
 * those bytes stops there (the reply is whole). */
int cwi_comm_reply_parse(const void *buf, size_t n, int rank, int *world, unsigned char id[128], int *whole);
/* The id message and a refusal line (cap bytes: 320 hold either); return
 * their lengths (0 when cap is too small). */
size_t cwi_comm_id_format(char *buf, size_t cap, int world, const unsigned char id[128]);
size_t cwi_comm_refusal_format(char *buf, size_t cap, const char *reason);
/* A rank of world ranks reading the id file at path as cw_comm_bootstrap
 * does (what sits there checked, read, parsed), polling up to timeout_ms
 * while it is absent. Returns its cw_status (0: id holds the id). */
int cwi_comm_id_file_read(const char *path, int world, unsigned timeout_ms, unsigned char id[128]);

#ifdef __cplusplus
}
#endif


#endif /* CUWEAVE_SRC_SEAM_H */
