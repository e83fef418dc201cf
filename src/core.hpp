// cuweave internal: the core objects shared by the core layer.
#pragma once

#include <atomic>
#include <stdint.h>

#include "cuweave/context.h"
#include "driver.hpp"
#include "error.hpp"

namespace cw {

// Every handle starts with a tag so that a foreign pointer or a destroyed
// handle is refused (CW_ERROR_INVALID_HANDLE) instead of being used.
enum : uint32_t {
    kTagContext = 0x43574358u,  // "CWCX"
    kTagDead = 0xdeadc0deu,
};

// Makes a context current on this thread and puts back what was current
// before: in leave(), whose failure the caller reports, or (on early return)
// in the destructor. Costs one query when the context is already current.
class CurrentGuard {
  public:
    CurrentGuard() = default;
    ~CurrentGuard() { (void)leave(); }
    CurrentGuard(const CurrentGuard &) = delete;
    CurrentGuard &operator=(const CurrentGuard &) = delete;
    cw_status enter(CUcontext ctx);
    cw_status leave();

  private:
    CUcontext prev_ = nullptr;
    bool switched_ = false;
};

}  // namespace cw

struct cw_context {
    uint32_t tag;
    std::atomic<int> refs;
    cw_context_kind kind;
    CUcontext cu;
    CUdevice device;
    int ordinal;
    int prio_least;
    int prio_greatest;
};

namespace cw {

// True when ctx looks like a live context handle.
inline bool context_ok(const cw_context *ctx) { return ctx && ctx->tag == kTagContext; }

// References held by objects made on a context.
void context_retain(cw_context *ctx);
void context_release(cw_context *ctx);

// Initialises the driver and maps a device ordinal to its CUdevice;
// CW_ERROR_INVALID_ARGUMENT (with the device count) when out of range.
cw_status device_from_ordinal(int ordinal, CUdevice *dev);

// The device's primary-context priority range, cached per device.
cw_status device_priority_range(int ordinal, int *least, int *greatest);

}  // namespace cw

// Rejects a NULL or foreign context handle.
#define CW_CHECK_CONTEXT(ctx)                                                              \
    do {                                                                                   \
        CW_CHECK_ARG((ctx) != NULL);                                                       \
        if (__builtin_expect(!::cw::context_ok(ctx), 0))                                   \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live cw_context", #ctx); \
    } while (0)
