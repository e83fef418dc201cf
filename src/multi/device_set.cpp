// cuweave multi layer: device sets (multi.hpp).
#include <new>
#include <stdlib.h>
#include <string.h>

#include "multi/multi.hpp"

namespace cw {
namespace multi {

using namespace core;

void device_set_close(cw_device_set *set) {
    for (int i = 0; i < set->count; i++) context_release(set->ctx[i]);
    handle_retire(set);
    handle_free(set);
}

cw_status device_set_open(const int *devices, int count, cw_device_set **out) {
    HandleRoom room;
    CW_TRY(room.reserve());
    CW_TRY(ensure_init());
    int visible = 0;
    CW_CU(cuDeviceGetCount, (&visible));
    int list[CW_MAX_DEVICES];
    int n = count;
    if (count > 0) {
        for (int i = 0; i < n; i++) {
            if (devices[i] < 0 || devices[i] >= visible)
                return fail(CW_ERROR_INVALID_ARGUMENT, "devices[%d] is %d, but there are %d devices", i, devices[i],
                            visible);
            for (int j = 0; j < i; j++)
                if (devices[j] == devices[i])
                    return fail(CW_ERROR_INVALID_ARGUMENT, "devices[%d] and devices[%d] are both device %d", j, i,
                                devices[i]);
            list[i] = devices[i];
        }
    } else {
        if (visible == 0) return fail(CW_ERROR_NO_DEVICE, "no CUDA device is visible");
        n = visible < CW_MAX_DEVICES ? visible : CW_MAX_DEVICES;
        for (int i = 0; i < n; i++) list[i] = i;
    }
    cw_device_set *set = static_cast<cw_device_set *>(calloc(1, sizeof(cw_device_set)));
    if (!set) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) {
        cw_status st = context_create_primary(list[i], &set->ctx[i]);
        if (st != CW_SUCCESS) {
            {
                KeepError keep;
                device_set_close(set);  // closes the i already open
            }
            return prefix_error("devices[%d]", i);
        }
        set->ordinal[i] = list[i];
        set->count = i + 1;
    }
    room.publish(set);
    *out = set;
    return CW_SUCCESS;
}

cw_status device_set_enable_peers(cw_device_set *set, int *enabled) {
    CW_TRY(need_peer_entries());
    int pairs = 0;
    cw_status st = CW_SUCCESS;
    for (int a = 0; a < set->count && st == CW_SUCCESS; a++)
        for (int b = 0; b < set->count && st == CW_SUCCESS; b++) {
            if (a == b) continue;
            int can = 0;
            CUresult r = drv().cuDeviceCanAccessPeer(&can, set->ctx[a]->device, set->ctx[b]->device);
            if (r != CUDA_SUCCESS) {
                st = fail_cu(r, "cuDeviceCanAccessPeer");
            } else if (can) {
                st = context_enable_peer(set->ctx[a], set->ctx[b]);
                if (st == CW_SUCCESS) pairs++;
            }
        }
    if (enabled) *enabled = pairs;
    return st;
}

}  // namespace multi
}  // namespace cw
