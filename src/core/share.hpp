/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: buffers and events shared between processes (share.cpp;
// include/cuweave/share.h).
//
// Shareable memory is cuMemAlloc'd (the stream-ordered pool has no
// shareable handle types). Each exported object has a POSIX shared-memory
// block in which importing processes hold slots (their pids); the
// exporter frees the object once no live process holds a slot.
#pragma once

#include <atomic>

#include "core/buffer.hpp"
#include "cuweave/share.h"

struct cw_shared_event {
    uint32_t tag;
    cw_context *ctx;  // retained
    CUevent ev;
    cw::core::Share *share;
};

namespace cw {
namespace core {

struct Share;

// Buffers.
cw_status shareable_alloc(cw_stream *s, size_t bytes, cw_buffer **out);
cw_status buffer_export(const cw_buffer *b, cw_shared_handle *out);
cw_status buffer_import(cw_stream *s, const cw_shared_handle *h, cw_buffer **out);
// The last reference of a buffer with b->share went (buffer_free; its
// context current): an importer's uses are waited for (rel, when not NULL
// and ordered) and its mapping closed; an exporter's memory is freed once
// no importer holds it (now, a later call, or the context's teardown).
// Takes sh.
void share_memory_release(cw_context *ctx, Share *sh, CUdeviceptr ptr, size_t bytes, cw_stream *rel, bool ordered);

// Events.
cw_status shared_event_create(cw_context *ctx, cw_shared_event **out);
void shared_event_destroy(cw_shared_event *e);
cw_status shared_event_export(const cw_shared_event *e, cw_shared_handle *out);
cw_status shared_event_import(cw_context *ctx, const cw_shared_handle *h, cw_shared_event **out);
cw_status shared_event_record(cw_shared_event *e, cw_stream *s);
cw_status shared_event_wait(cw_shared_event *e, cw_stream *s);
void shared_event_info(const cw_shared_event *e, cw_shared_event_info *info);

// Frees what exporters kept for importers that have all closed since.
void share_sweep();

// A testing hook (src/testing/seam.h, cwi_share_hook): fn(point, arg) runs
// at these points (the values of seam.h's CWI_SHARE_*). NULL: none.
constexpr int kHookSweepTaken = 0, kHookTeardownWaits = 1, kHookHoldersWait = 2, kHookExportsLocked = 3,
              kHookImportMatched = 4, kHookHoldersCounted = 5;
using ShareHook = void (*)(int point, void *arg);
extern std::atomic<ShareHook> g_share_hook;
extern std::atomic<void *> g_share_hook_arg;

}  // namespace core
}  // namespace cw
