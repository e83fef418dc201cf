/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: persistent work, and the releases that wait for it.
//
// Some driver calls wait until no kernel runs on the device (measured by
// tools/probes/loops.cu, docs/resident.md): cuMemFree, cuMemFreeHost,
// cuMemHostUnregister, loading and unloading code, destroying an exec with
// conditional nodes. Persistent work (a GPU-resident loop: kernels that
// never end until told to) would make them wait forever, so the code that
// launches such work counts it here, and the library makes none of those
// calls while any runs: releases wait in a queue instead, and loads are
// refused.
#pragma once

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

// Persistent work launched (+1) or seen stopped (-1) on a driver context.
// The decrement that leaves none in the process runs the queued releases.
void persistent_note(CUcontext cu, int delta);
// Persistent work running on cu, and in the whole process.
int persistent_on(CUcontext cu);
int persistent_running();

// Runs rel->run(rel->owner) now when no persistent work runs in the process,
// else when the last of it is seen to stop. rel must stay valid until it runs.
void release_when_idle(IdleRelease *rel);
// Refuses (CW_ERROR_INVALID_STATE, naming `what`) while persistent work
// runs: for calls that load code, which would wait for it to end.
cw_status refuse_load_while_persistent(const char *what);

}  // namespace core
}  // namespace cw
