/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: green contexts, disjoint SM partitions made by one split.
#pragma once

#include <stddef.h>

#include "core/context.hpp"
#include "cuweave/partition.h"

struct cw_partition_group {
    uint32_t tag;
    int ordinal;
    size_t count;         // partitions, the leftover one included
    cw_context **parts;   // green contexts; the group holds one reference each
    unsigned *sms;        // SMs per partition, as the driver gave them
    bool has_leftover;
    size_t default_index;
};

namespace cw {
namespace core {

constexpr size_t kMaxPartitions = 64;

// What the device offers (supported, SM count, partition sizes).
cw_status partition_caps(int device, cw_partition_caps *caps);
// n partitions of sm_counts[i] SMs of `device`, made by one split (so they
// are disjoint), plus the SMs left over as one more partition when any are;
// default_index -1 names that leftover one. Arguments are checked by the caller
// except what needs the device (sizes, granularity, total).
cw_status partition_group_create(int device, const unsigned *sm_counts, size_t n, int default_index,
                                 cw_partition_group **out);
// Drops the group and its reference to each partition's context: a
// partition on which objects live stays until the last of them goes.
void partition_group_destroy(cw_partition_group *group);

}  // namespace core
}  // namespace cw
