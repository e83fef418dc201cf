/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: NVTX ranges and marks in the "cuweave" domain, for Nsight
// Systems and any other NVTX tool (docs/tracing.md, "Nsight Systems").
//
// NVTX3 is header-only: the build finds its headers (the CUDA toolkit's,
// the nvidia-nvtx wheel's, or -Dnvtx_include / NVTX_INCLUDE; tools/
// find-nvtx.sh) and passes their path as CW_NVTX_HEADER. Without them every
// CW_NVTX_* macro below compiles to nothing. With them, nvtx.cpp holds the
// only NVTX code: the first range asks NVTX for a tool (NVTX loads the
// library named by NVTX_INJECTION64_PATH, which Nsight sets); with none
// attached, every later range costs one load and one branch, and no string
// is ever registered. With a tool, the domain is made once, every name of
// the list below is registered once (nvtxDomainRegisterStringA), and an
// operator's name is registered the first time it is seen, so a range hands
// the tool a handle, never a string to copy.
//
// Push/pop ranges (CW_NVTX_RANGE*) nest per thread, as NVTX wants; a range
// that begins in one call and ends in another, maybe on another thread (a
// capture), is a start/end range (CW_NVTX_START / CW_NVTX_END).
#pragma once

#include <atomic>
#include <stdint.h>

#ifdef CW_NVTX_HEADER
#define CW_HAVE_NVTX 1
#else
#define CW_HAVE_NVTX 0
#endif

// The fixed names: (id, text, category). Their texts are what Nsight shows.
#define CW_NVTX_NAMES(X)                                           \
    X(pipeline_run, "cw_pipeline_run", pipeline)                   \
    X(operator_compute, "operator compute", pipeline)              \
    X(resident_build, "resident build", resident)                  \
    X(resident_launch, "cw_resident_launch", resident)             \
    X(resident_request, "resident request", resident)              \
    X(resident_wait, "cw_resident_wait_result", resident)          \
    X(resident_tear_down, "cw_resident_tear_down", resident)       \
    X(graph_capture, "graph capture", graph)                       \
    X(graph_instantiate, "graph instantiate", graph)               \
    X(program_compile, "cw_program_compile", jit)                  \
    X(nvrtc_compile, "NVRTC compile", jit)                         \
    X(cache_hit_memory, "kernel cache hit (memory)", jit)          \
    X(cache_hit_disk, "kernel cache hit (disk)", jit)              \
    X(collective_all_reduce, "all-reduce", collective)             \
    X(collective_broadcast, "broadcast", collective)               \
    X(collective_group_begin, "NCCL group begin", collective)      \
    X(collective_group_end, "NCCL group end", collective)

// Categories (nvtxDomainNameCategoryA), each with its colour in Nsight.
#define CW_NVTX_CATEGORIES(X)        \
    X(pipeline, 1, 0xff4e79a7u)      \
    X(resident, 2, 0xff59a14fu)      \
    X(graph, 3, 0xffb07aa1u)         \
    X(jit, 4, 0xfff28e2bu)           \
    X(collective, 5, 0xffe15759u)

namespace cw {
namespace nvtx {

enum Name : uint8_t {
#define CW_NVTX_ID(id, text, cat) id,
    CW_NVTX_NAMES(CW_NVTX_ID)
#undef CW_NVTX_ID
        kNames
};

// 0: not asked yet, 1: no tool attached, 2: a tool is attached (nvtx.cpp).
extern std::atomic<int> g_state;
bool ask();

// Whether a tool is attached: asks NVTX the first time (a tool is attached
// or not for the life of the process); always false when the ranges are
// compiled out.
inline bool on() {
#if CW_HAVE_NVTX
    const int s = g_state.load(std::memory_order_acquire);
    return __builtin_expect(s == 0, 0) ? ask() : s == 2;
#else
    return false;
#endif
}
// A push/pop range on the calling thread: a fixed name, with an optional
// payload (an unsigned 64-bit value Nsight shows beside the name), or a
// name of the caller's (an operator's: at most 63 bytes are kept) shown in
// the category of `cat`.
void push(Name n);
void push(Name n, uint64_t payload);
void push_text(Name cat, const char *text);
void pop();
// A mark (an instant) with a payload.
void mark(Name n, uint64_t payload);
// A start/end range: any thread may end it. start returns 0 when no tool is
// attached (end(0) does nothing).
uint64_t start(Name n);
void end(uint64_t id);

// The range of a scope: pops what it pushed (nothing when no tool was
// attached as it began).
class Range {
  public:
    explicit Range(Name n) : on_(on()) {
        if (on_) push(n);
    }
    Range(Name n, uint64_t payload) : on_(on()) {
        if (on_) push(n, payload);
    }
    Range(Name cat, const char *text) : on_(on()) {
        if (on_) push_text(cat, text);
    }
    ~Range() {
        if (on_) pop();
    }
    Range(const Range &) = delete;
    Range &operator=(const Range &) = delete;

  private:
    bool on_;
};

// For tests (src/testing/hooks.cpp): distinct texts registered so far (the
// fixed names and the callers' names), 0 without a tool.
unsigned registered();

}  // namespace nvtx
}  // namespace cw

#define CW_NVTX_JOIN2(a, b) a##b
#define CW_NVTX_JOIN(a, b) CW_NVTX_JOIN2(a, b)
#if CW_HAVE_NVTX
// A range from here to the end of the scope.
#define CW_NVTX_RANGE(id) const ::cw::nvtx::Range CW_NVTX_JOIN(cw_nvtx_range_, __LINE__)(::cw::nvtx::id)
#define CW_NVTX_RANGE_N(id, payload) \
    const ::cw::nvtx::Range CW_NVTX_JOIN(cw_nvtx_range_, __LINE__)(::cw::nvtx::id, (uint64_t)(payload))
#define CW_NVTX_RANGE_TEXT(id, text) \
    const ::cw::nvtx::Range CW_NVTX_JOIN(cw_nvtx_range_, __LINE__)(::cw::nvtx::id, (const char *)(text))
#define CW_NVTX_MARK_N(id, payload)                                     \
    do {                                                                \
        if (::cw::nvtx::on()) ::cw::nvtx::mark(::cw::nvtx::id, (uint64_t)(payload)); \
    } while (0)
#define CW_NVTX_START(id) (::cw::nvtx::on() ? ::cw::nvtx::start(::cw::nvtx::id) : uint64_t(0))
#define CW_NVTX_END(range)                            \
    do {                                              \
        if (::cw::nvtx::on()) ::cw::nvtx::end(range); \
    } while (0)
#else
#define CW_NVTX_RANGE(id) static_cast<void>(0)
#define CW_NVTX_RANGE_N(id, payload) static_cast<void>(0)
#define CW_NVTX_RANGE_TEXT(id, text) static_cast<void>(0)
#define CW_NVTX_MARK_N(id, payload) static_cast<void>(0)
#define CW_NVTX_START(id) uint64_t(0)
#define CW_NVTX_END(range) static_cast<void>(0)
#endif
