/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: persistent work, and the releases that wait for it.
//
// Some driver calls wait until no kernel runs on the device (measured by
// tools/probes/loops.cu, docs/resident.md): cuMemFree, cuMemFreeHost,
// cuMemHostUnregister, loading and unloading code, destroying an exec with
// conditional nodes (and cuCtxSynchronize, for the work of its context).
// Persistent work (a GPU-resident loop: kernels that never end until told
// to) would make them wait forever, so the code that launches such work
// counts it here, and the library makes none of those calls while any runs:
// releases wait in a queue instead, and loads are refused.
//
// Finding that none runs and making the call are one step for a launch on
// another thread: such a call (a quiet call: a release run, a QuietCall)
// is counted while it is under way, and a launch of persistent work, counted
// first, waits until none is under way before it launches. Those calls end
// by themselves (they wait for ordinary kernels only), so the launch waits
// a bounded time; no lock is held across a driver call.
#pragma once

#include <atomic>

#include "cuweave/common.h"
#include "driver/cuda_min.h"

namespace cw {
namespace core {

// A release that waits for persistent work to stop (an intrusive node inside
// the object it frees, so queuing it cannot fail).
struct IdleRelease {
    void (*run)(void *owner);
    void *owner;
    IdleRelease *next;
};

// Persistent work about to be launched on cu: counted from now (a release
// made after this waits, a load is refused, as while it runs). Returns once
// no quiet call is under way on another thread, so that the launch cannot
// start while one is. Refused (CW_ERROR_INVALID_STATE, counting nothing)
// on a thread inside a quiet call, which would wait for itself, and
// (CW_ERROR_NOT_PERMITTED) inside a HOST_FUNC future's callback, where a
// quiet call on another thread may wait for the callback: `what` names the
// launch in the message.
cw_status persistent_start(CUcontext cu, const char *what);
// Persistent work counted by persistent_start seen stopped (or its launch
// failed). The stop that leaves none in the process runs the queued
// releases.
void persistent_stop(CUcontext cu);
// Persistent work running on cu, and in the whole process.
int persistent_on(CUcontext cu);
int persistent_running();

// Runs rel->run(rel->owner) now when no persistent work runs in the process,
// else when the last of it is seen to stop. rel must stay valid until it runs.
void release_when_idle(IdleRelease *rel);

// A quiet call: one that waits until no kernel runs on the device. enter()
// finds whether persistent work runs (on cu; in the process when cu is
// null): it returns how much (nothing entered), or 0, entered: until the
// QuietCall ends (its destructor), launches of persistent work wait. A
// quiet call nested in one entered while none ran in the process (a load
// inside a build, a release inside a release) enters at once.
class QuietCall {
  public:
    QuietCall() = default;
    ~QuietCall();
    QuietCall(const QuietCall &) = delete;
    QuietCall &operator=(const QuietCall &) = delete;
    int enter(CUcontext cu);

  private:
    bool in_ = false, clear_ = false;
};

// Enters q for a call that loads code, or refuses (CW_ERROR_INVALID_STATE,
// naming `what`) while persistent work runs in the process.
cw_status refuse_load_while_persistent(QuietCall &q, const char *what);

// Tests (src/testing/hooks.cpp, cwi_idle_hooks): `released` runs on the
// thread that saw the last persistent work stop, after it took the queued
// releases and before it runs them; `checked` after a quiet call (a load, a
// context synchronize, the destroy of a replaced exec) found no persistent
// work running, before that call. Both hold those windows open while
// another thread launches a loop.
using IdleHook = void (*)(void *arg);
extern std::atomic<IdleHook> g_idle_released_hook, g_idle_checked_hook;
extern std::atomic<void *> g_idle_hook_arg;
// Launches of persistent work that waited for a quiet call under way on
// another thread (tests).
unsigned long idle_launch_waits();

}  // namespace core
}  // namespace cw
