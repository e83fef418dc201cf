/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Load the driver, list the devices, and open a context on each. Prints why
 * when there is no GPU and exits 77 then (skipped: no GPU, as every test and
 * example); exits 1 when something else fails.
 *
 *   make example            (or: build/examples/devices after a meson build)
 */
#include <stdio.h>

#include <cuweave/cuweave.h>

int main(void) {
    unsigned v = cw_version();
    cw_versions vs;
    if (cw_get_versions(&vs) != CW_SUCCESS) { /* only a NULL pointer or a broken NVRTC/NCCL fails */
        fprintf(stderr, "cw_get_versions: %s\n", cw_last_error()->message);
        return 1;
    }
    printf("cuweave %u.%u.%u (ABI %u)\n", CW_VERSION_PACK_MAJOR(v), CW_VERSION_PACK_MINOR(v),
           CW_VERSION_PACK_PATCH(v), CW_VERSION_PACK_MAJOR(vs.api));

    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "cw_init: %s\n", cw_last_error()->message);
        return 1;
    }
    const int driver = vs.driver;
    int count = 0;
    if (cw_device_count(&count) != CW_SUCCESS) {
        fprintf(stderr, "%s\n", cw_last_error()->message);
        return 1;
    }
    printf("CUDA driver %d.%d, %d device(s); green contexts %s, conditional nodes %s, NVRTC %s\n",
           driver / 1000, driver % 1000 / 10, count, cw_driver_has(CW_FEATURE_GREEN_CONTEXTS) ? "yes" : "no",
           cw_driver_has(CW_FEATURE_CONDITIONAL_NODES) ? "yes" : "no",
           cw_driver_has(CW_FEATURE_NVRTC) ? "yes" : "no");

    for (int i = 0; i < count; i++) {
        cw_device_info info;
        cw_context *ctx = NULL;
        cw_context_info ci;
        if (cw_device_get_info(i, &info) != CW_SUCCESS || cw_context_create(&ctx, i) != CW_SUCCESS ||
            cw_context_get_info(ctx, &ci) != CW_SUCCESS) {
            fprintf(stderr, "device %d: %s\n", i, cw_last_error()->message);
            cw_context_destroy(&ctx);
            return 1;
        }
        printf("device %d: %s, compute %d.%d, %d SMs, %.1f GiB, PCI %04x:%02x:%02x, stream priorities %d..%d\n",
               i, info.name, info.cc_major, info.cc_minor, info.sm_count,
               (double)info.total_memory / (1024.0 * 1024.0 * 1024.0), info.pci_domain, info.pci_bus,
               info.pci_device, ci.least_priority, ci.greatest_priority);
        cw_context_destroy(&ctx);
    }
    return 0;
}
