/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave: header-only C++17 wrappers over the C API (no ABI of their own:
// every function is inline and calls the C API; nothing of C++ is compiled
// into libcuweave).
//
// Each wrapper is the C handle plus an ownership flag. Copies are deleted;
// moves transfer ownership (and leave the source empty). An owning wrapper
// destroys its handle in its destructor, with the C destroy, which never
// fails: destructors never throw and never fail. Where tearing down can
// fail or time out (a resident loop), a member reports it (tear_down(ms))
// and the destructor does the rest.
//
// Handles: `T::borrow(handle)` makes a wrapper of a cuweave handle that
// never destroys it; `T(handle, true)` takes ownership of one; `release()`
// gives it up. `wrap` means what it means in C: `context::wrap(CUcontext)`
// and `stream::wrap(ctx, CUstream)` adopt a CUDA handle the caller keeps
// (the wrapper owns the cuweave object, never the CUDA handle).
//
// Errors: by default a failing call throws cw::error, which carries the
// cw_status and the library's detail message. Built with -fno-exceptions (or
// with CW_HPP_NO_EXCEPTIONS defined), the same calls return cw::result<T>
// (or cw::status) instead, which the caller checks. Each mode's definitions
// live in an inline namespace of their own (cw::v0_3::exc, cw::v0_3::noexc;
// core.hpp says more), so translation units of both modes may be linked into
// one program.
//
// Covers every function of the public C API (docs/cpp.md has the table;
// tests/cpp_not_wrapped.txt lists what is deliberately left to C, and
// tests/check-cpp-coverage.py checks it): the library (versions, init,
// devices, errors, the log), contexts, partitions, streams (fork scopes,
// ordering), pools and leases, timers, futures (callbacks, fds, when_all),
// graphs, executable graphs, captures, the resident loop, programs, modules,
// kernels (with a typed launch), the jit cache, buffers, page-locked host
// memory and copies, several devices (device groups, peer access, peer
// copies, pools shared with peers), NCCL collectives (communicators,
// groups), operators and pipelines (a base class for operator authors), and
// traces (timelines).
// Settings stay the C structs: cw::defaults<cw_..._settings>() gives one
// filled with defaults.
// There is no event wrapper: the C API has no public event object (ordering
// is stream to stream: stream::wait, cw::forked).
//
// The wrappers live in cuweave/cpp/, one header per C header (cpp/stream.hpp
// wraps stream.h, and so on; cpp/core.hpp has the errors, the modes and the
// common helpers); this header includes them all. Include this one.
#ifndef CUWEAVE_CUWEAVE_HPP
#define CUWEAVE_CUWEAVE_HPP

#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/device.hpp"
#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/partition.hpp"
#include "cuweave/cpp/stream.hpp"
#include "cuweave/cpp/future.hpp"
#include "cuweave/cpp/graph.hpp"
#include "cuweave/cpp/resident.hpp"
#include "cuweave/cpp/jit.hpp"
#include "cuweave/cpp/buffer.hpp"
#include "cuweave/cpp/multi.hpp"
#include "cuweave/cpp/collective.hpp"
#include "cuweave/cpp/share.hpp"
#include "cuweave/cpp/flow.hpp"
#include "cuweave/cpp/trace.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// The wrappers cost nothing beyond the handle and its ownership flag, and
// moving them never throws (checked here, where every cpp/ header is in).
namespace detail {
struct handle_and_flag {
    void *h;
    bool owned;
};
}  // namespace detail
static_assert(sizeof(context) == sizeof(detail::handle_and_flag), "context is the handle plus ownership");
static_assert(sizeof(stream) == sizeof(detail::handle_and_flag), "stream is the handle plus ownership");
static_assert(sizeof(stream_pool) == sizeof(detail::handle_and_flag), "stream_pool is the handle plus ownership");
static_assert(sizeof(partition_group) == sizeof(detail::handle_and_flag), "partition_group is the handle plus ownership");
static_assert(sizeof(timer) == sizeof(detail::handle_and_flag), "timer is the handle plus ownership");
static_assert(sizeof(trace) == sizeof(detail::handle_and_flag), "trace is the handle plus ownership");
static_assert(sizeof(future) == sizeof(detail::handle_and_flag), "future is the handle plus ownership");
static_assert(sizeof(graph) == sizeof(detail::handle_and_flag), "graph is the handle plus ownership");
static_assert(sizeof(graph_exec) == sizeof(detail::handle_and_flag), "graph_exec is the handle plus ownership");
static_assert(sizeof(program) == sizeof(detail::handle_and_flag), "program is the handle plus ownership");
static_assert(sizeof(module) == sizeof(detail::handle_and_flag), "module is the handle plus ownership");
static_assert(sizeof(resident) == sizeof(detail::handle_and_flag), "resident is the handle plus ownership");
static_assert(sizeof(buffer) == sizeof(detail::handle_and_flag), "buffer is the handle plus ownership");
static_assert(sizeof(pipeline) == sizeof(detail::handle_and_flag), "pipeline is the handle plus ownership");
static_assert(sizeof(device_group) == sizeof(detail::handle_and_flag), "device_group is the handle plus ownership");
static_assert(sizeof(comm) == sizeof(detail::handle_and_flag), "comm is the handle plus ownership");
static_assert(sizeof(comm_group) == sizeof(bool), "comm_group is whether it is open");
static_assert(sizeof(io) == sizeof(void *), "io is the handle");
static_assert(std::is_nothrow_move_constructible<buffer>::value && std::is_nothrow_move_assignable<pipeline>::value,
              "buffers and pipelines move without throwing");
static_assert(std::is_nothrow_move_constructible<resident>::value && std::is_nothrow_move_assignable<resident>::value,
              "resident moves without throwing");
static_assert(std::is_nothrow_move_constructible<module>::value && std::is_nothrow_move_assignable<program>::value,
              "modules and programs move without throwing");
static_assert(std::is_nothrow_move_constructible<graph>::value && std::is_nothrow_move_assignable<graph_exec>::value,
              "graphs move without throwing");
static_assert(sizeof(lease) == 2 * sizeof(void *), "lease is the pool and the stream");
static_assert(std::is_nothrow_move_constructible<stream>::value && std::is_nothrow_move_assignable<stream>::value,
              "stream moves never throw");
static_assert(std::is_nothrow_move_constructible<lease>::value && std::is_nothrow_move_assignable<lease>::value,
              "lease moves never throw");
static_assert(!std::is_copy_constructible<stream>::value && !std::is_copy_assignable<future>::value,
              "wrappers are not copyable");
static_assert(sizeof(host_buffer) == 2 * sizeof(void *) + sizeof(size_t),
              "host_buffer is the context, the pointer and the size");
static_assert(!std::is_copy_constructible<host_buffer>::value && !std::is_copy_assignable<host_buffer>::value,
              "host memory is not copyable");
static_assert(std::is_nothrow_move_constructible<host_buffer>::value &&
                  std::is_nothrow_move_assignable<host_buffer>::value,
              "host_buffer moves never throw");
static_assert(sizeof(forked) == 2 * sizeof(void *), "forked is the parent and the child");
static_assert(!std::is_copy_constructible<forked>::value && !std::is_copy_assignable<forked>::value,
              "forked is not copyable");
static_assert(std::is_nothrow_move_constructible<forked>::value && std::is_nothrow_move_assignable<forked>::value,
              "forked moves never throw");
static_assert(std::is_nothrow_move_constructible<context>::value && std::is_nothrow_move_assignable<context>::value &&
                  std::is_nothrow_move_constructible<partition_group>::value &&
                  std::is_nothrow_move_assignable<partition_group>::value &&
                  std::is_nothrow_move_constructible<stream_pool>::value &&
                  std::is_nothrow_move_assignable<stream_pool>::value &&
                  std::is_nothrow_move_constructible<timer>::value && std::is_nothrow_move_assignable<timer>::value &&
                  std::is_nothrow_move_constructible<future>::value && std::is_nothrow_move_assignable<future>::value,
              "contexts, partition groups, pools, timers and futures move without throwing");
static_assert(std::is_nothrow_move_constructible<device_group>::value && std::is_nothrow_move_assignable<device_group>::value &&
                  std::is_nothrow_move_constructible<comm>::value && std::is_nothrow_move_assignable<comm>::value,
              "device groups and communicators move without throwing");
static_assert(!std::is_copy_constructible<comm_group>::value && !std::is_copy_assignable<comm_group>::value &&
                  std::is_nothrow_move_constructible<comm_group>::value &&
                  std::is_nothrow_move_assignable<comm_group>::value,
              "comm_group is move-only and its moves never throw");

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CUWEAVE_HPP
