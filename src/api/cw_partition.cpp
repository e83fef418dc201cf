/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave api: include/cuweave/partition.h (green contexts).
#include "api/api.hpp"
#include "core/partition.hpp"

using namespace cw;

static_assert(sizeof(cw_partition_caps) == 64, "cw_partition_caps keeps cw_green_caps' size");
static_assert(sizeof(cw_partition_info) == 64, "cw_partition_info keeps its 0.1 size");
static_assert(sizeof(cw_partition_group_info) == 64, "cw_partition_group_info");

extern "C" {

CW_API cw_status cw_partition_get_caps(int device, cw_partition_caps *caps) {
    CW_ENTRY;
    CW_CHECK_ARG(caps != NULL);
    CW_CHECK_ARG(device >= 0);
    return core::partition_caps(device, caps);
}

CW_API cw_status cw_partition_group_create(cw_partition_group **out, int device, const unsigned *sm_counts,
                                           size_t n, int default_index) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(device >= 0);
    CW_CHECK_ARG(sm_counts != NULL);
    CW_CHECK_ARG(n >= 1 && n < core::kMaxPartitions);
    for (size_t i = 0; i < n; i++) CW_CHECK_ARG(sm_counts[i] > 0);
    CW_CHECK_ARG(default_index >= -1 && default_index < (int)n);
    return core::partition_group_create(device, sm_counts, n, default_index, out);
}

CW_API void cw_partition_group_destroy(cw_partition_group **pgroup) {
    CW_ENTRY;
    if (!pgroup || !*pgroup) return;
    cw_partition_group *group = *pgroup;
    *pgroup = NULL;
    if (!live(group)) {
        log(CW_LOG_WARNING, "%s: not a live cw_partition_group; nothing destroyed", current_api());
        return;
    }
    core::partition_group_destroy(group);
}

CW_API cw_status cw_partition_group_get_info(const cw_partition_group *group, cw_partition_group_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(group);
    CW_CHECK_ARG(info != NULL);
    cw_partition_group_info i;
    memset(&i, 0, sizeof i);
    i.count = group->count;
    i.default_index = group->default_index;
    i.device = group->ordinal;
    *info = i;
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_group_get_partition(const cw_partition_group *group, size_t index,
                                                  cw_partition_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(group);
    CW_CHECK_ARG(index < group->count);
    CW_CHECK_ARG(info != NULL);
    cw_partition_info i;
    memset(&i, 0, sizeof i);
    i.context = group->parts[index];
    i.sm_count = group->sms[index];
    i.leftover = group->has_leftover && index == group->count - 1;
    i.is_default = index == group->default_index;
    *info = i;
    return CW_SUCCESS;
}

}  // extern "C"
