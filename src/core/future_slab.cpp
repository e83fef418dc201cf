/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the context's slab of mapped host words that written-value
// futures' markers write (future.hpp; split from future.cpp).
#include <stdlib.h>

#include "core/buffer.hpp"
#include "core/future.hpp"
#include "core/pool.hpp"

namespace cw {
namespace core {
namespace {

constexpr size_t kSlabPageBytes = 4096;
constexpr size_t kSlotBytes = 64;
constexpr size_t kSlotsPerPage = kSlabPageBytes / kSlotBytes;

}  // namespace

cw_status slab_get(cw_context *ctx, uint32_t *slot, volatile uint32_t **host, CUdeviceptr *dev) {
    HostSlab &sl = ctx->slab;
    for (;;) {
        {
            SpinLock lock(ctx->lock);
            if (sl.free_count > 0) {
                uint32_t id = sl.free_slots[--sl.free_count];
                const HostSlab::Page &pg = sl.pages[id / kSlotsPerPage];
                size_t off = (id % kSlotsPerPage) * kSlotBytes;
                *slot = id;
                *host = reinterpret_cast<volatile uint32_t *>(static_cast<char *>(pg.host) + off);
                *dev = pg.dev + off;
                return CW_SUCCESS;
            }
        }
        // Grow by one page (outside the spin lock: the driver call is slow).
        context_on_teardown(futures_teardown, kTeardownUsers);
        CurrentGuard guard;
        CW_TRY(guard.enter(ctx->cu));
        void *hostp = nullptr;
        CUdeviceptr devp = 0;
        // Mapped for this context only: the slab serves this context's futures.
        CW_TRY(host_mapped_alloc(ctx, kSlabPageBytes, 0, &hostp, &devp));
        cw_status st = guard.leave();
        if (st != CW_SUCCESS) {
            KeepError keep;
            (void)host_free(ctx, hostp);  // cuMemFreeHost waits for running resident loops
            return st;
        }
        bool ok = true;
        {
            SpinLock lock(ctx->lock);
            if (sl.page_count == sl.page_cap) {
                size_t cap = sl.page_cap ? sl.page_cap * 2 : 4;
                void *p = realloc(sl.pages, cap * sizeof(HostSlab::Page));
                if (p) {
                    sl.pages = static_cast<HostSlab::Page *>(p);
                    sl.page_cap = cap;
                } else {
                    ok = false;
                }
            }
            // Room for every slot that will exist, so that slab_put never grows.
            if (ok && sl.free_cap < (sl.page_count + 1) * kSlotsPerPage) {
                size_t cap = (sl.page_count + 1) * kSlotsPerPage * 2;
                void *p = realloc(sl.free_slots, cap * sizeof(uint32_t));
                if (p) {
                    sl.free_slots = static_cast<uint32_t *>(p);
                    sl.free_cap = cap;
                } else {
                    ok = false;
                }
            }
            if (ok) {
                uint32_t page = static_cast<uint32_t>(sl.page_count);
                sl.pages[sl.page_count++] = HostSlab::Page{hostp, devp};
                for (size_t i = kSlotsPerPage; i-- > 0;)
                    sl.free_slots[sl.free_count++] = page * kSlotsPerPage + (uint32_t)i;
            }
        }
        if (!ok) {  // (the page goes outside the spin lock)
            const cw_status oom = fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
            KeepError keep;
            (void)host_free(ctx, hostp);  // cuMemFreeHost waits for running resident loops
            return oom;
        }
    }
}
void slab_put(cw_context *ctx, uint32_t slot) {
    SpinLock lock(ctx->lock);
    // free_cap always covers every slot ever made, so this cannot overflow.
    ctx->slab.free_slots[ctx->slab.free_count++] = slot;
}

void slab_free(cw_context *ctx) {
    HostSlab &sl = ctx->slab;
    for (size_t i = 0; i < sl.page_count; i++) drv().cuMemFreeHost(sl.pages[i].host);
    free(sl.pages);
    free(sl.free_slots);
    sl = HostSlab{};
}

}  // namespace core
}  // namespace cw
