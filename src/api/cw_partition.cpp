// cuweave api: include/cuweave/partition.h (green contexts).
#include "api/api.hpp"
#include "core/partition.hpp"

using namespace cw;

extern "C" {

CW_API cw_status cw_green_query(int device, cw_green_caps *caps) {
    CW_ENTRY;
    CW_CHECK_ARG(caps != NULL);
    CW_CHECK_ARG(device >= 0);
    return core::green_query(device, caps);
}

CW_API cw_status cw_partition_set_create(cw_partition_set **out, int device, const unsigned *sm_counts, size_t n,
                                         int default_index) {
    CW_ENTRY;
    CW_CHECK_ARG(out != NULL);
    CW_CHECK_ARG(device >= 0);
    CW_CHECK_ARG(sm_counts != NULL);
    CW_CHECK_ARG(n >= 1 && n < core::kMaxPartitions);
    for (size_t i = 0; i < n; i++) CW_CHECK_ARG(sm_counts[i] > 0);
    CW_CHECK_ARG(default_index >= -1 && default_index < (int)n);
    return core::partition_set_create(device, sm_counts, n, default_index, out);
}

CW_API cw_status cw_partition_set_destroy(cw_partition_set **pset) {
    CW_ENTRY;
    if (!pset || !*pset) return CW_SUCCESS;
    cw_partition_set *set = *pset;
    CW_CHECK_HANDLE(set);
    CW_TRY(core::partition_set_destroy(set));
    *pset = NULL;
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_set_count(const cw_partition_set *set, size_t *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(count != NULL);
    *count = set->count;
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_set_get(const cw_partition_set *set, size_t index, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(index < set->count);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = set->parts[index];
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_set_default(const cw_partition_set *set, cw_context **ctx) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(ctx != NULL);
    *ctx = set->parts[set->default_index];
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_set_info(const cw_partition_set *set, size_t index, cw_partition_info *info) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(index < set->count);
    CW_CHECK_ARG(info != NULL);
    cw_partition_info i;
    memset(&i, 0, sizeof i);
    i.sm_count = set->sms[index];
    i.leftover = set->has_leftover && index == set->count - 1;
    i.is_default = index == set->default_index;
    *info = i;
    return CW_SUCCESS;
}

CW_API cw_status cw_partition_set_sm_ids(const cw_partition_set *set, size_t index, unsigned *ids, size_t cap,
                                         size_t *count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(index < set->count);
    CW_CHECK_ARG(ids != NULL || cap == 0);
    CW_CHECK_ARG(count != NULL);
    return fail(CW_ERROR_NOT_SUPPORTED,
                "the CUDA driver does not report which SMs a green context has; read %%smid in a kernel launched "
                "on the partition");
}

CW_API cw_status cw_partition_set_request_workqueues(cw_partition_set *set, size_t index, unsigned count) {
    CW_ENTRY;
    CW_CHECK_HANDLE(set);
    CW_CHECK_ARG(index < set->count);
    CW_CHECK_ARG(count > 0);
    return fail(CW_ERROR_NOT_SUPPORTED,
                "the CUDA driver (%d.%d) has no work-queue resource for green contexts", driver_version() / 1000,
                driver_version() % 1000 / 10);
}

}  // extern "C"
