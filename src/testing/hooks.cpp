/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave testing: hooks that let tests look inside the layers (seam.h):
// the handle registry, the hash of the kernel cache and its disk hook, a
// written-value future's word, a resident loop's trace marks, a stream
// pool's waiters, whether a pipeline's buffer cache is locked, and the
// parsers of outside input for the fuzzers (tests/fuzz/): the kernel
// cache's file reader, the NVRTC option canonicaliser, the environment
// variables, the communicator bootstrap's messages and id file. Not
// exported from the shared library (tests link libcuweave.a).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvtx.hpp"
#include "core/buffer.hpp"
#include "core/event.hpp"
#include "core/future.hpp"
#include "core/handle.hpp"
#include "core/idle.hpp"
#include "core/pool.hpp"
#include "core/share.hpp"
#include "core/trace.hpp"
#include "flow/flow.hpp"
#include "graph/resident.hpp"
#include "jit/jit.hpp"
#include "jit/sha256.hpp"
#include "multi/bootstrap_msg.hpp"
#include "testing/seam.h"

extern "C" {

size_t cwi_handles_live(void) { return cw::core::handles_live(); }

size_t cwi_handles_bytes(void) { return cw::core::handles_bytes(); }

size_t cwi_handles_quarantine(void) { return cw::core::kHandleQuarantine; }

int cwi_handles_held(const void *object) { return cw::core::handle_held(object) ? 1 : 0; }

unsigned long cwi_handles_freed(void) { return cw::core::handles_freed(); }

int cwi_handles_lookup_racing_move(const void *h) { return cw::core::handle_lookup_racing_move(h); }

void cwi_handles_fail_next(int nth) { cw::core::handle_registry_fail_next(nth); }

int cwi_nvtx_compiled(void) { return CW_HAVE_NVTX; }
int cwi_nvtx_on(void) { return cw::nvtx::on() ? 1 : 0; }
unsigned cwi_nvtx_registered(void) { return cw::nvtx::registered(); }

unsigned long long cwi_nvtx_pairs(unsigned long n, int empty) {
    const int64_t t0 = cw::now_ns();
    if (empty) {
        for (unsigned long i = 0; i < n; i++) asm volatile("" : : "r"(i) : "memory");
    } else {
        for (unsigned long i = 0; i < n; i++) {
            CW_NVTX_RANGE(operator_compute);
            asm volatile("" : : "r"(i) : "memory");
        }
    }
    return (unsigned long long)(cw::now_ns() - t0);
}

void cwi_sha256(const void *data, size_t n, int portable, unsigned char out[32]) {
    const bool was = cw::g_force_portable;
    cw::g_force_portable = portable != 0;
    cw::sha256(data, n, out);
    cw::g_force_portable = was;
}

int cwi_future_word(cw_future *f, volatile unsigned **word, unsigned *armed) {
    if (!f || !cw::live(f)) return -1;
    return cw::core::future_word(f, word, armed) ? 0 : -1;
}

unsigned long cwi_future_watcher_wakes(void) { return cw::core::future_watcher_wakes(); }

void cwi_future_host_fn_hook(void (*fn)(void *arg), void *arg) {
    cw::core::g_host_fn_hook_arg.store(arg);
    cw::core::g_host_fn_hook.store(fn, std::memory_order_release);
}

void cwi_future_watch_hooks(void (*ready)(void *arg), void (*entry)(void *arg), void *arg) {
    cw::core::g_watch_hook_arg.store(arg);
    cw::core::g_watch_ready_hook.store(ready, std::memory_order_release);
    cw::core::g_watch_entry_hook.store(entry, std::memory_order_release);
}

void cwi_future_unwatch_hook(void (*fn)(void *arg), void *arg) {
    cw::core::g_unwatch_hook_arg.store(arg);
    cw::core::g_unwatch_hook.store(fn, std::memory_order_release);
}

int cwi_future_watched(const cw_future *f) {
    if (!f || !cw::live(f)) return -1;
    return cw::core::future_watched(f) ? 1 : 0;
}

static_assert((int)CWI_SHARE_SWEEP_TAKEN == cw::core::kHookSweepTaken &&
                  (int)CWI_SHARE_TEARDOWN_WAITS == cw::core::kHookTeardownWaits &&
                  (int)CWI_SHARE_HOLDERS_WAIT == cw::core::kHookHoldersWait &&
                  (int)CWI_SHARE_EXPORTS_LOCKED == cw::core::kHookExportsLocked &&
                  (int)CWI_SHARE_IMPORT_MATCHED == cw::core::kHookImportMatched &&
                  (int)CWI_SHARE_HOLDERS_COUNTED == cw::core::kHookHoldersCounted,
              "seam.h's share hook points are share.hpp's");

void cwi_share_hook(void (*fn)(int point, void *arg), void *arg) {
    cw::core::g_share_hook_arg.store(arg);
    cw::core::g_share_hook.store(fn, std::memory_order_release);
}

unsigned long cwi_marks_allocated(void) { return cw::core::marks_allocated(); }

void cwi_jit_disk_hook(void (*fn)(int phase, const char *path, void *arg), void *arg) {
    cw::jit::g_disk_hook_arg = arg;
    cw::jit::g_disk_hook = fn;
}

unsigned long long cwi_jit_disk_scans(void) { return cw::jit::disk_scans(); }

int cwi_resident_trace(cw_resident *r, volatile unsigned long long **marks, unsigned *stages) {
    if (!r || !cw::live(r)) return -1;
    return cw::graphs::resident_trace_marks(r, marks, stages) ? 0 : -1;
}

int cwi_trace_set_globaltimer(cw_trace *t, cw_context *ctx, long long offset) {
    if (!t || !cw::live(t) || !ctx || !cw::live(ctx)) return -1;
    return cw::core::trace_set_globaltimer(t, ctx, offset, 0) == CW_SUCCESS ? 0 : -1;
}

long long cwi_trace_sort_comparisons(cw_trace *t) {
    if (!t || !cw::live(t)) return -1;
    return (long long)cw::core::trace_sort_comparisons(t);
}

void cwi_trace_source_hook(void (*fn)(void *arg), void *arg) {
    cw::core::g_trace_source_hook_arg.store(arg);
    cw::core::g_trace_source_hook.store(fn, std::memory_order_release);
}

int cwi_cupti_forget(void) { return cw::core::trace_cupti_forget() == CW_SUCCESS ? 0 : -1; }

cw_res_host *cwi_resident_host(cw_resident *r) {
    if (!r || !cw::live(r)) return nullptr;
    return r->host;
}

char *cwi_resident_fused_source(const cw_resident_fused *f) {
    char *out = nullptr;
    return cw::graphs::fused_source(f, &out) == CW_SUCCESS ? out : nullptr;
}

int cwi_fused_plan(const cw_resident_fused *f, void **stages, void **deps, void **chains, unsigned long long counts[9]) {
    cw::graphs::DataflowPlan p;
    if (cw::graphs::dataflow_plan(f, f->block_threads ? f->block_threads : 256u, &p) != CW_SUCCESS) return -1;
    *stages = p.stages;
    *deps = p.deps;
    *chains = p.chains;
    p.stages = nullptr;
    p.deps = nullptr;
    p.chains = nullptr;
    counts[0] = p.nstages;
    counts[1] = p.ndeps;
    counts[2] = p.tasks;
    counts[3] = p.tiles;
    counts[4] = p.alls;
    counts[5] = p.in_flight;
    counts[6] = p.state_bytes / 8u;
    counts[7] = p.nchains;
    counts[8] = p.final;
    cw::graphs::dataflow_plan_free(&p);
    return 0;
}

int cwi_resident_fused_state(cw_resident *r, unsigned long long *dptr, size_t *bytes) {
    if (!r || !cw::live(r) || !r->fused || !r->fused->module) return -1;
    *dptr = r->fused->sync;
    *bytes = r->fused->sync_bytes;
    return 0;
}
void cwi_idle_hooks(void (*released)(void *arg), void (*checked)(void *arg), void *arg) {
    cw::core::g_idle_hook_arg.store(arg);
    cw::core::g_idle_released_hook.store(released, std::memory_order_release);
    cw::core::g_idle_checked_hook.store(checked, std::memory_order_release);
}

unsigned long cwi_idle_launch_waits(void) { return cw::core::idle_launch_waits(); }

int cwi_pool_waiting(cw_stream_pool *p) {
    if (!p || !cw::live(p)) return -1;
    // Under the pool's mutex: a waiter holds it from the moment it counts
    // itself until it sleeps on the condition variable, so a count read here
    // is of threads asleep (or woken and not yet running).
    pthread_mutex_lock(&p->mutex);
    int n = p->waiters.load(std::memory_order_seq_cst);
    pthread_mutex_unlock(&p->mutex);
    return n;
}

int cwi_pipeline_cache_locked(cw_pipeline *p) {
    if (!p || !cw::live(p)) return -1;
    return cw::core::buffer_cache_locked(p->cache) ? 1 : 0;
}

int cwi_cache_file_read(const void *file, size_t n, const unsigned char key[32], unsigned char **again,
                        size_t *again_n) {
    *again = nullptr;
    *again_n = 0;
    cw::jit::JitEntry *e = cw::jit::file_decode(static_cast<const uint8_t *>(file), n, key);
    if (!e) return 0;
    cw::jit::Bytes out;
    const cw_status st = cw::jit::file_encode(e, &out);
    cw::jit::entry_release(e);
    if (st != CW_SUCCESS) return -1;
    *again = out.data;  // the caller frees it
    *again_n = out.size;
    out.data = nullptr;
    return 1;
}

int cwi_canonical_options(const char *const *opts, size_t n, char ***out, size_t *out_n, int *reads_files) {
    *out = nullptr;
    *out_n = 0;
    *reads_files = 0;
    cw::jit::CanonOptions c;
    const cw_status st = cw::jit::canonical_options(opts, n, &c);
    if (st != CW_SUCCESS) return st;
    *out = c.opts;  // the caller frees them (cwi_free_strings)
    *out_n = c.n;
    *reads_files = c.reads_files;
    c.opts = nullptr;
    c.n = 0;
    return CW_SUCCESS;
}

void cwi_free_strings(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

void cwi_cache_dir_from_env(char *out, size_t cap) {
    cw::jit::CacheConfig was;
    cw::jit::cache_config(&was);
    cw_jit_cache_settings s;
    memset(&s, 0, sizeof s);
    s.memory = 1;
    cw::jit::cache_configure(&s);  // dir NULL: read from the environment
    cw::jit::CacheConfig now;
    cw::jit::cache_config(&now);
    snprintf(out, cap, "%s", now.dir);
    s.dir = was.dir[0] ? was.dir : "off";
    s.max_bytes = was.max_bytes;
    s.memory = was.memory ? 1 : 0;
    cw::jit::cache_configure(&s);
}

int cwi_serialize_from_env(void) {
    cw::core::serialize_forget();
    return cw::core::serialize_all() ? 1 : 0;
}

int cwi_comm_hello_judge(const void *in, size_t n, int world, const char *token, const unsigned char *taken,
                         int *rank, char *reason, size_t cap) {
    using cw::multi::Hello;
    const size_t tl = token ? strlen(token) : 0;
    const Hello h =
        cw::multi::hello_judge(static_cast<const char *>(in), n, world, token, tl, taken, rank, reason, cap);
    return h == Hello::accept ? 1 : h == Hello::refuse ? 0 : -1;
}

size_t cwi_comm_hello_format(char *buf, size_t cap, int rank, int world, const char *token) {
    if (cap < cw::multi::kHelloMax) return 0;
    return cw::multi::hello_format(buf, rank, world, token, token ? strlen(token) : 0);
}

int cwi_comm_reply_parse(const void *buf, size_t n, int rank, int *world, unsigned char id[128], int *whole) {
    const char *b = static_cast<const char *>(buf);
    *whole = cw::multi::reply_complete(b, n) ? 1 : 0;
    cw_comm_id cid;
    memset(&cid, 0, sizeof cid);
    const cw_status st = cw::multi::reply_parse(b, n, rank, world, &cid, "rank 0 (fuzz)");
    memcpy(id, cid.bytes, sizeof cid.bytes);
    return st;
}

size_t cwi_comm_id_format(char *buf, size_t cap, int world, const unsigned char id[128]) {
    if (cap < cw::multi::kIdMsgMax) return 0;
    cw_comm_id cid;
    memcpy(cid.bytes, id, sizeof cid.bytes);
    return cw::multi::id_msg_format(buf, world, &cid);
}

size_t cwi_comm_refusal_format(char *buf, size_t cap, const char *reason) {
    if (cap < cw::multi::kReplyMax) return 0;
    return cw::multi::refusal_format(buf, reason);
}

int cwi_comm_id_file_read(const char *path, int world, unsigned timeout_ms, unsigned char id[128]) {
    cw_comm_id cid;
    memset(&cid, 0, sizeof cid);
    const cw_status st = cw::multi::id_file_read(path, world, timeout_ms, &cid);
    memcpy(id, cid.bytes, sizeof cid.bytes);
    return st;
}

}  // extern "C"
