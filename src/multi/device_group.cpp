/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: device groups (multi.hpp).
#include <new>
#include <stdlib.h>
#include <string.h>

#include "multi/multi.hpp"

namespace cw {
namespace multi {

using namespace core;

void device_group_destroy(cw_device_group *g) {
    for (int i = 0; i < g->count; i++) context_release(g->ctx[i]);
    handle_retire(g);
    handle_free(g);
}

cw_status device_group_create(const int *devices, int count, cw_device_group **out) {
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
    cw_device_group *g = static_cast<cw_device_group *>(calloc(1, sizeof(cw_device_group)));
    if (!g) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) {
        cw_status st = context_create_primary(list[i], &g->ctx[i]);
        if (st != CW_SUCCESS) {
            {
                KeepError keep;
                device_group_destroy(g);  // releases the i already open
            }
            return prefix_error("devices[%d]", i);
        }
        g->ordinal[i] = list[i];
        g->count = i + 1;
    }
    room.publish(g);
    *out = g;
    return CW_SUCCESS;
}

void device_group_info(const cw_device_group *g, cw_device_group_info *info) {
    memset(info, 0, sizeof *info);
    info->count = g->count;
    for (int i = 0; i < g->count; i++) {
        info->devices[i] = g->ordinal[i];
        info->contexts[i] = g->ctx[i];
    }
}

}  // namespace multi
}  // namespace cw
