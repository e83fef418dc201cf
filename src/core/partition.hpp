// cuweave core: green contexts, disjoint SM partitions made by one split.
#pragma once

#include <stddef.h>

#include "core/context.hpp"
#include "cuweave/partition.h"

struct cw_partition_set {
    uint32_t tag;
    int ordinal;
    size_t count;         // partitions, the leftover one included
    cw_context **parts;   // green contexts; the set holds one reference each
    unsigned *sms;        // SMs per partition, as the driver gave them
    bool has_leftover;
    size_t default_index;
};

namespace cw {
namespace core {

constexpr size_t kMaxPartitions = 64;

// What the device offers (supported, SM count, partition sizes).
cw_status green_query(int device, cw_green_caps *caps);
// n partitions of sm_counts[i] SMs of `device`, made by one split (so they
// are disjoint), plus the SMs left over as one more partition when any are;
// default_index -1 names that leftover one. Arguments are checked by the caller
// except what needs the device (sizes, granularity, total).
cw_status partition_set_create(int device, const unsigned *sm_counts, size_t n, int default_index,
                               cw_partition_set **out);
// Refused (CW_ERROR_INVALID_STATE) while objects made on a partition live.
cw_status partition_set_destroy(cw_partition_set *set);

}  // namespace core
}  // namespace cw
