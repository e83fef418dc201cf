/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave graph layer: a resident loop's stages on a trace's timeline
// (resident_timeline.cpp, cw_trace_record_resident).
#pragma once

#include "cuweave/resident.h"
#include "cuweave/trace.h"

namespace cw {
namespace graphs {

// Adds to t the stages of r that began and ended since t last read them
// (r traces: settings.trace), and each copy of the iteration they ran in;
// calibrates r's context's global timer for t when t has not yet.
cw_status resident_record_trace(cw_trace *t, cw_resident *r);

}  // namespace graphs
}  // namespace cw
