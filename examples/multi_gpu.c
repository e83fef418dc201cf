/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Several GPUs of one host (cuweave/multi.h, cuweave/collective.h):
 *
 *  1. a device group: the primary context of every visible device, in
 *     ordinal order; the peer topology of each ordered pair
 *     (cw_device_get_peer_info); peer access enabled wherever the topology
 *     allows it (a loop of cw_context_enable_peer over those pairs);
 *  2. a buffer moved from GPU 0 to GPU 1: allocated and filled on a stream of
 *     GPU 0, then a stream of GPU 1 is ordered after GPU 0's stream
 *     (cw_stream_wait works across devices: an event, no CPU wait) and copies
 *     it into a buffer of its own (cw_buffer_copy, cuMemcpyPeerAsync), which
 *     is read back and checked;
 *
 *       GPU 0 stream  ─[fill src]●──────────────────────────────────────▶
 *                                │ event
 *       GPU 1 stream  ─(wait)────▼[peer copy src -> dst][copy to host]──▶
 *
 *  3. if NCCL can be loaded (cw_get_versions; CUWEAVE_LIBNCCL or
 *     libnccl.so.2), an all-reduce over every GPU: rank r's buffer holds
 *     r + 1 in every element, the sum over n ranks is n (n + 1) / 2, checked
 *     on every GPU. Without NCCL it says why and skips this part.
 *
 * NCCL_NVLS_ENABLE=0 is set first thing: the machines this runs on forbid
 * NVLink multicast, and NCCL must not try it (cuweave itself never calls
 * cuMulticastCreate). No kernels: copies and NCCL only, so no NVRTC.
 *
 * Without a GPU, or with one GPU only, it says so and exits 77; exits 1 when a
 * call fails or a value is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/multi_gpu.c \
 *      build-make/libcuweave.so.2 -o multi_gpu
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuweave/cuweave.h>

enum {
    COPY_WORDS = 1 << 20,  /* 4 MiB moved from GPU 0 to GPU 1 */
    REDUCE_COUNT = 1 << 20 /* floats per rank in the all-reduce */
};

#define CW_TRY(expr)                                                                  \
    do {                                                                              \
        if ((expr) != CW_SUCCESS) {                                                   \
            fprintf(stderr, "multi_gpu: %s\n", cw_last_error()->message); \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

/* Prints the topology of every ordered pair. Returns 1 on success. */
static int print_topology(const cw_device_group_info *g) {
    const int n = g->count;
    for (int a = 0; a < n; a++) {
        int da = g->devices[a];
        cw_device_info info;
        if (cw_device_get_info(da, &info) != CW_SUCCESS) {
            fprintf(stderr, "multi_gpu: member %d: %s\n", a, cw_last_error()->message);
            return 0;
        }
        printf("GPU %d: %s, compute %d.%d, %d SMs, PCI %04x:%02x:%02x\n", da, info.name, info.cc_major,
               info.cc_minor, info.sm_count, info.pci_domain, info.pci_bus, info.pci_device);
    }
    printf("peer topology (from -> to: can access, link rank (lower is faster), native atomics):\n");
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (a == b) continue;
            int da = g->devices[a], db = g->devices[b];
            cw_peer_info pi;
            if (cw_device_get_peer_info(da, db, &pi) != CW_SUCCESS) {
                fprintf(stderr, "multi_gpu: peer info %d -> %d: %s\n", a, b, cw_last_error()->message);
                return 0;
            }
            if (pi.can_access)
                printf("  GPU %d -> GPU %d: yes, rank %d, atomics %s\n", da, db, pi.perf_rank,
                       pi.native_atomics ? "yes" : "no");
            else
                printf("  GPU %d -> GPU %d: no (copies are staged through host memory)\n", da, db);
        }
    return 1;
}

/* Peer access for every ordered pair of the group's devices that the
 * topology allows (cw_context_enable_peer is idempotent: enabling a pair
 * twice is fine). Pairs that cannot are skipped. *enabled: the ordered pairs
 * that have access now. Returns 1 on success. */
static int enable_peers(const cw_device_group_info *g, int *enabled) {
    *enabled = 0;
    for (int a = 0; a < g->count; a++)
        for (int b = 0; b < g->count; b++) {
            cw_peer_info pi;
            if (a == b) continue;
            if (cw_device_get_peer_info(g->devices[a], g->devices[b], &pi) != CW_SUCCESS ||
                (pi.can_access && cw_context_enable_peer(g->contexts[a], g->contexts[b]) != CW_SUCCESS)) {
                fprintf(stderr, "multi_gpu: peer access %d -> %d: %s\n", a, b, cw_last_error()->message);
                return 0;
            }
            if (pi.can_access) (*enabled)++;
        }
    return 1;
}

/* Part 2: a buffer of GPU 0 copied to GPU 1 after GPU 0's stream (direct:
 * GPU 1 has peer access to GPU 0). Returns 1 when every word arrived. */
static int peer_copy(cw_context *ctx0, cw_context *ctx1, int direct) {
    const size_t bytes = (size_t)COPY_WORDS * sizeof(unsigned);
    int ok = 0;
    cw_stream *s0 = NULL, *s1 = NULL;
    cw_buffer *src = NULL, *dst = NULL;
    cw_devptr psrc = 0, pdst = 0;
    unsigned *host = malloc(bytes), *back = malloc(bytes);
    if (!host || !back) {
        fprintf(stderr, "multi_gpu: out of host memory\n");
        goto fail;
    }
    for (unsigned i = 0; i < COPY_WORDS; i++) host[i] = 0x5a000000u + i * 7u;
    memset(back, 0, bytes);

    CW_TRY(cw_stream_create(&s0, ctx0, NULL));
    CW_TRY(cw_stream_create(&s1, ctx1, NULL));
    /* The source: allocated and filled in stream order on GPU 0. */
    CW_TRY(cw_buffer_create(&src, s0, bytes));
    CW_TRY(cw_buffer_get_writable(src, &psrc));
    CW_TRY(cw_copy_to_device(s0, psrc, host, bytes));
    /* The destination, on GPU 1. */
    CW_TRY(cw_buffer_create(&dst, s1, bytes));
    CW_TRY(cw_buffer_get_writable(dst, &pdst));
    /* GPU 1's stream waits for GPU 0's fill on the GPU, then copies. */
    CW_TRY(cw_stream_wait(s1, s0));
    CW_TRY(cw_buffer_copy(dst, src, s1));
    CW_TRY(cw_copy_to_host(s1, back, pdst, bytes));
    CW_TRY(cw_stream_synchronize(s1));

    long wrong = 0;
    for (unsigned i = 0; i < COPY_WORDS; i++)
        if (back[i] != host[i]) wrong++;
    printf("peer copy GPU 0 -> GPU 1, %zu MiB on GPU 1's stream after GPU 0's (%s): %ld of %d words wrong\n",
           bytes >> 20, direct ? "direct" : "staged through host memory by the driver", wrong, COPY_WORDS);
    ok = wrong == 0;

fail:
    /* After a failure, let what was enqueued finish before the host memory
     * goes. A released buffer is freed after its recorded uses (the
     * allocation, and cw_buffer_copy's use of both). */
    if (s0) cw_stream_synchronize(s0);
    if (s1) cw_stream_synchronize(s1);
    cw_buffer_destroy(&src);
    cw_buffer_destroy(&dst);
    cw_stream_destroy(&s0);
    cw_stream_destroy(&s1);
    free(host);
    free(back);
    return ok;
}

/* Part 3: an all-reduce (sum) through NCCL over every member. Returns 1 when
 * every element of every rank is right, or when NCCL is not there. */
static int all_reduce(const cw_device_group_info *g) {
    const int n = g->count;
    cw_versions versions;
    cw_status st = cw_get_versions(&versions);
    if (st != CW_SUCCESS) {
        fprintf(stderr, "multi_gpu: cw_get_versions: %s\n", cw_last_error()->message);
        return 0;
    }
    const int version = versions.nccl;
    if (version == 0) {
        printf("all-reduce skipped, no NCCL (CUWEAVE_LIBNCCL, libnccl.so.2)\n");
        return 1;
    }
    printf("NCCL %d.%d.%d (NCCL_NVLS_ENABLE=%s)\n", version / 10000, version / 100 % 100, version % 100,
           getenv("NCCL_NVLS_ENABLE"));

    const size_t bytes = (size_t)REDUCE_COUNT * sizeof(float);
    int ok = 0;
    cw_comm *comm = NULL;
    cw_stream *streams[CW_MAX_DEVICES] = {NULL};
    cw_buffer *bufs[CW_MAX_DEVICES] = {NULL};
    cw_devptr ptrs[CW_MAX_DEVICES] = {0};
    float *host = malloc(bytes);
    if (!host) {
        fprintf(stderr, "multi_gpu: out of host memory\n");
        goto fail;
    }

    CW_TRY(cw_comm_create(&comm, g->contexts, n)); /* rank r on member r's device */
    for (int r = 0; r < n; r++) {
        CW_TRY(cw_stream_create(&streams[r], g->contexts[r], NULL));
        CW_TRY(cw_buffer_create(&bufs[r], streams[r], bytes));
        CW_TRY(cw_buffer_get_writable(bufs[r], &ptrs[r]));
        for (int i = 0; i < REDUCE_COUNT; i++) host[i] = (float)(r + 1);
        CW_TRY(cw_copy_to_device(streams[r], ptrs[r], host, bytes));
    }
    /* In place (send == recv), one stream per rank, every rank's part issued
     * by this thread in one NCCL group. Each stream already holds its fill. */
    CW_TRY(cw_comm_all_reduce(comm, ptrs, ptrs, REDUCE_COUNT, CW_FLOAT32, CW_SUM, streams));
    /* NCCL works on raw addresses: record its use, so a release frees the
     * buffer only after the collective. */
    for (int r = 0; r < n; r++) CW_TRY(cw_buffer_use(bufs[r], streams[r]));

    const float want = (float)(n * (n + 1) / 2);
    long wrong = 0;
    for (int r = 0; r < n; r++) {
        memset(host, 0, bytes);
        CW_TRY(cw_copy_to_host(streams[r], host, ptrs[r], bytes));
        CW_TRY(cw_stream_synchronize(streams[r]));
        for (int i = 0; i < REDUCE_COUNT; i++)
            if (host[i] != want) wrong++;
    }
    printf("all-reduce (sum) of %d floats over %d GPUs: every element should be %.0f; %ld of %ld wrong\n",
           REDUCE_COUNT, n, (double)want, wrong, (long)n * REDUCE_COUNT);
    ok = wrong == 0;

fail:
    for (int r = 0; r < n; r++)
        if (streams[r]) cw_stream_synchronize(streams[r]);
    for (int r = 0; r < n; r++) cw_buffer_destroy(&bufs[r]);
    cw_comm_destroy(&comm);
    for (int r = 0; r < n; r++) cw_stream_destroy(&streams[r]);
    free(host);
    return ok;
}

int main(void) {
    /* Before anything can load NCCL: no NVLink multicast on these machines. */
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    printf("multi_gpu: a device group, peer access, a peer copy and an NCCL all-reduce over every GPU\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS) {
        fprintf(stderr, "multi_gpu: cw_init: %s\n", cw_last_error()->message);
        return 1;
    }

    int ok = 0, n = 0, enabled = 0;
    cw_device_group *set = NULL;
    cw_device_group_info gi;

    st = cw_device_group_create(&set, NULL, 0); /* every visible device */
    if (st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    CW_TRY(st);
    CW_TRY(cw_device_group_get_info(set, &gi));
    n = gi.count;
    if (n < 2) {
        printf("this example needs at least two GPUs; this machine has %d: nothing to do\n", n);
        cw_device_group_destroy(&set);
        return 77;
    }
    if (!print_topology(&gi)) goto fail;

    if (!enable_peers(&gi, &enabled)) goto fail;
    printf("peer access enabled for %d of %d ordered pairs%s\n", enabled, n * (n - 1),
           enabled < n * (n - 1) ? " (the others copy through host memory)" : "");

    cw_peer_info p10;
    CW_TRY(cw_device_get_peer_info(gi.devices[1], gi.devices[0], &p10));
    if (!peer_copy(gi.contexts[0], gi.contexts[1], p10.can_access)) goto fail;
    if (!all_reduce(&gi)) goto fail;
    ok = 1;

fail:
    cw_device_group_destroy(&set);
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
