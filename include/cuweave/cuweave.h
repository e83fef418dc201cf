/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: umbrella header. Including it includes every public C header.
 * See docs/api.md for the guide.
 */
#ifndef CUWEAVE_CUWEAVE_H
#define CUWEAVE_CUWEAVE_H

#include "cuweave/version.h"
#include "cuweave/common.h"
#include "cuweave/device.h"
#include "cuweave/context.h"
#include "cuweave/stream.h"
#include "cuweave/future.h"
#include "cuweave/graph.h"
#include "cuweave/partition.h"
#include "cuweave/jit.h"
#include "cuweave/resident.h"
#include "cuweave/buffer.h"
#include "cuweave/flow.h"
#include "cuweave/multi.h"
#include "cuweave/collective.h"
#include "cuweave/share.h"
#include "cuweave/trace.h"

#endif /* CUWEAVE_CUWEAVE_H */
