/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave-info: what cuweave finds on this machine. The library (its
 * version, ABI and file), the CUDA driver, NVRTC and NCCL versions, the
 * kernel cache's directory and size, and each device with its SMs, memory,
 * green-partition granularity and features, with a one-line verdict on
 * whether the resident loop and green contexts are available.
 *
 *   cuweave-info            text
 *   cuweave-info --json     one JSON object (keys in docs/cuweave-info.md)
 *
 * Exit status: 0 when at least one GPU is usable; 77 when none is (no
 * driver, a driver older than 12.0, or no device: everything else is still
 * printed, and the reason); 1 when a query failed otherwise; 2 for a bad
 * argument. Installed with the library (meson install, make install).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cuweave/cuweave.h>

#define INFO_NO_GPU 77

/* ---- output ---------------------------------------------------------------- */

static void json_str(const char *s) {
    if (!s) {
        fputs("null", stdout);
        return;
    }
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static const char *yes(int b) { return b ? "yes" : "no"; }
static const char *jbool(int b) { return b ? "true" : "false"; }

static int usage(void) {
    fputs("usage: cuweave-info [--json]\n"
          "       cuweave-info --clear-cache\n"
          "  prints the cuweave library, CUDA driver, NVRTC and NCCL versions, the kernel\n"
          "  cache (its directory, entries and bound), and each GPU with its SMs,\n"
          "  green-partition granularity and features.\n"
          "  exit status: 0 a GPU is usable, 77 none is, 1 a query failed, 2 a bad argument\n"
          "  --clear-cache: removes the kernel cache's entries from its directory (the\n"
          "  library's cw_jit_cache_clear_disk: nothing else there); exit status 0, or 1\n",
          stderr);
    return 2;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* --clear-cache: the library removes the entries (under the cache's lock). */
static int clear_cache(void) {
    cw_jit_cache_info ci;
    if (cw_jit_cache_get_info(&ci) != CW_SUCCESS) {
        printf("kernel cache: %s\n", cw_last_error()->message);
        return 1;
    }
    if (!ci.dir[0]) {
        printf("kernel cache: off (memory only): nothing to clear\n");
        return 0;
    }
    uint64_t n = 0, bytes = 0;
    const cw_status st = cw_jit_cache_clear_disk(&n, &bytes);
    printf("kernel cache: %s: removed %llu entries (%.1f MiB)\n", ci.dir, (unsigned long long)n, mib(bytes));
    if (st != CW_SUCCESS) {
        printf("kernel cache: %s: %s\n", cw_status_name(st), cw_last_error()->message);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--clear-cache") == 0 && argc == 2)
            return clear_cache();
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else
            return usage();
    }
    int failed = 0;

    /* the library and the versions of what it opens */
    cw_versions vs;
    memset(&vs, 0, sizeof vs);
    char versions_error[512] = "";
    if (cw_get_versions(&vs) != CW_SUCCESS) {
        snprintf(versions_error, sizeof versions_error, "%s", cw_last_error()->message);
        failed = 1;
    }
    const unsigned v = cw_version();
    Dl_info dl;
    const char *lib_path = dladdr((void *)&cw_version, &dl) && dl.dli_fname ? dl.dli_fname : NULL;

    /* the kernel cache: the library's directory, its entries (nothing else
     * in the directory is counted) and its bound */
    cw_jit_cache_info ci;
    memset(&ci, 0, sizeof ci);
    if (cw_jit_cache_get_info(&ci) != CW_SUCCESS) failed = 1;
    const char *dir = ci.dir;

    /* the driver and the devices */
    const cw_status init = cw_init();
    char reason[512] = "";
    int count = 0;
    if (init == CW_SUCCESS) {
        if (cw_device_count(&count) != CW_SUCCESS) {
            snprintf(reason, sizeof reason, "%s", cw_last_error()->message);
            failed = 1;
        }
    } else {
        snprintf(reason, sizeof reason, "%s", cw_last_error()->message);
        if (init != CW_ERROR_NO_DRIVER && init != CW_ERROR_NO_DEVICE && init != CW_ERROR_NOT_SUPPORTED)
            failed = 1;
    }
    const int usable = init == CW_SUCCESS && count > 0;
    const int has_green = usable && cw_driver_has(CW_FEATURE_GREEN_CONTEXTS);
    const int has_cond = usable && cw_driver_has(CW_FEATURE_CONDITIONAL_NODES);
    const int has_library = usable && cw_driver_has(CW_FEATURE_LIBRARY_API);
    const int has_nvrtc = cw_driver_has(CW_FEATURE_NVRTC);
    /* the resident loop needs conditional nodes and the library API (cuweave/resident.h) */
    const int resident = has_cond && has_library;

    if (json) {
        printf("{\n  \"cuweave\": \"%u.%u.%u\",\n  \"abi\": %u,\n  \"library\": ", CW_VERSION_PACK_MAJOR(v),
               CW_VERSION_PACK_MINOR(v), CW_VERSION_PACK_PATCH(v), CW_VERSION_PACK_MAJOR(vs.api));
        json_str(lib_path);
        fputs(",\n  \"builtin_kernels\": ", stdout);
        json_str(vs.builtin_origin);
        if (vs.driver)
            printf(",\n  \"driver\": \"%d.%d\"", vs.driver / 1000, vs.driver % 1000 / 10);
        else
            fputs(",\n  \"driver\": null", stdout);
        if (vs.nvrtc_major)
            printf(",\n  \"nvrtc\": \"%d.%d\"", vs.nvrtc_major, vs.nvrtc_minor);
        else
            fputs(",\n  \"nvrtc\": null", stdout);
        if (vs.nccl)
            printf(",\n  \"nccl\": \"%d.%d.%d\"", vs.nccl / 10000, vs.nccl / 100 % 100, vs.nccl % 100);
        else
            fputs(",\n  \"nccl\": null", stdout);
        fputs(",\n  \"kernel_cache\": {\"dir\": ", stdout);
        json_str(dir[0] ? dir : NULL);
        printf(", \"exists\": %s, \"trusted\": %s, \"files\": %llu, \"bytes\": %llu, \"max_bytes\": %llu}",
               jbool(ci.exists), jbool(ci.trusted), (unsigned long long)ci.entries, (unsigned long long)ci.bytes,
               (unsigned long long)ci.max_bytes);
        printf(",\n  \"gpu_usable\": %s,\n  \"status\": \"%s\",\n  \"reason\": ", jbool(usable),
               cw_status_name(init));
        json_str(usable ? NULL : (reason[0] ? reason : "no CUDA device"));
        printf(",\n  \"features\": {\"green_contexts\": %s, \"conditional_nodes\": %s, \"library_api\": %s, "
               "\"nvrtc\": %s},\n  \"resident_loop\": %s,\n  \"devices\": [",
               jbool(has_green), jbool(has_cond), jbool(has_library), jbool(has_nvrtc), jbool(resident));
    } else {
        printf("cuweave %u.%u.%u (ABI %u), built-in kernels: %s\n", CW_VERSION_PACK_MAJOR(v),
               CW_VERSION_PACK_MINOR(v), CW_VERSION_PACK_PATCH(v), CW_VERSION_PACK_MAJOR(vs.api),
               vs.builtin_origin ? vs.builtin_origin : "?");
        printf("library: %s\n", lib_path ? lib_path : "?");
        if (vs.driver)
            printf("CUDA driver: %d.%d\n", vs.driver / 1000, vs.driver % 1000 / 10);
        else
            printf("CUDA driver: none\n");
        if (vs.nvrtc_major)
            printf("NVRTC: %d.%d\n", vs.nvrtc_major, vs.nvrtc_minor);
        else
            printf("NVRTC: not found (run-time compiles fail; CUWEAVE_LIBNVRTC names it)\n");
        if (vs.nccl)
            printf("NCCL: %d.%d.%d\n", vs.nccl / 10000, vs.nccl / 100 % 100, vs.nccl % 100);
        else
            printf("NCCL: not found (collectives fail; CUWEAVE_LIBNCCL names it)\n");
        if (versions_error[0]) printf("versions: %s\n", versions_error);
        if (!dir[0])
            printf("kernel cache: off (memory only)\n");
        else if (ci.exists && !ci.trusted)
            printf("kernel cache: %s (not used: it must belong to this user and be writable by it alone)\n", dir);
        else if (ci.exists)
            printf("kernel cache: %s (%llu entries, %.1f MiB of at most %.0f MiB)\n", dir,
                   (unsigned long long)ci.entries, mib(ci.bytes), mib(ci.max_bytes));
        else
            printf("kernel cache: %s (not created yet; at most %.0f MiB)\n", dir, mib(ci.max_bytes));
        if (!usable)
            printf("no usable GPU (%s): %s\n", cw_status_name(init), reason[0] ? reason : "no CUDA device");
        else
            printf("%d device(s); driver features: green contexts %s, conditional nodes %s, library API %s\n", count,
                   yes(has_green), yes(has_cond), yes(has_library));
    }

    int any_green = 0;
    for (int i = 0; i < count; i++) {
        cw_device_info info;
        cw_partition_caps caps;
        memset(&caps, 0, sizeof caps);
        if (cw_device_get_info(i, &info) != CW_SUCCESS || cw_partition_get_caps(i, &caps) != CW_SUCCESS) {
            fprintf(stderr, "cuweave-info: device %d: %s\n", i, cw_last_error()->message);
            failed = 1;
            continue;
        }
        any_green |= caps.supported;
        if (json) {
            printf("%s\n    {\"ordinal\": %d, \"name\": ", i ? "," : "", i);
            json_str(info.name);
            printf(", \"compute\": \"%d.%d\", \"sms\": %d, \"memory_bytes\": %llu, "
                   "\"pci\": \"%04x:%02x:%02x\",\n     \"memory_pools\": %s, \"stream_priorities\": %s, "
                   "\"stream_mem_ops_64\": %s, \"copy_engines\": %d,\n     \"green_contexts\": {\"supported\": %s, "
                   "\"min_partition\": %u, \"granularity\": %u, \"workqueues\": %s}}",
                   info.cc_major, info.cc_minor, info.sm_count, (unsigned long long)info.total_memory,
                   info.pci_domain, info.pci_bus, info.pci_device, jbool(info.memory_pools),
                   jbool(info.stream_priorities), jbool(info.stream_mem_ops_64), info.async_engines,
                   jbool(caps.supported), caps.min_partition, caps.granularity, jbool(caps.workqueues));
        } else {
            printf("device %d: %s, compute %d.%d, %d SMs, %.1f GiB, PCI %04x:%02x:%02x\n", i, info.name,
                   info.cc_major, info.cc_minor, info.sm_count,
                   (double)info.total_memory / (1024.0 * 1024.0 * 1024.0), info.pci_domain, info.pci_bus,
                   info.pci_device);
            if (caps.supported)
                printf("  green contexts: partitions of %u SMs or more, in steps of %u%s\n", caps.min_partition,
                       caps.granularity, caps.workqueues ? ", work queues" : "");
            else
                printf("  green contexts: no\n");
            printf("  memory pools %s, stream priorities %s, 64-bit stream memory ops %s, %d copy engines\n",
                   yes(info.memory_pools), yes(info.stream_priorities), yes(info.stream_mem_ops_64),
                   info.async_engines);
        }
    }

    char verdict[256];
    if (!usable)
        snprintf(verdict, sizeof verdict, "no usable GPU: neither the resident loop nor green contexts");
    else
        snprintf(verdict, sizeof verdict, "resident loop %s; green contexts %s",
                 resident ? "available" : "not available (needs conditional nodes, CUDA 12.3)",
                 any_green ? "available" : "not available (needs CUDA 12.5 and a device that has them)");
    if (json) {
        printf("%s],\n  \"verdict\": ", count ? "\n  " : "");
        json_str(verdict);
        puts("\n}");
    } else {
        printf("verdict: %s\n", verdict);
    }
    if (failed) return 1;
    return usable ? 0 : INFO_NO_GPU;
}
