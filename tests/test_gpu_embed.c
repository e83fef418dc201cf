/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave embedded in a host program that owns CUDA, the way a video tool
 * hands a filter its context and stream (examples/video_filter.h, the filter
 * of examples/embed.c). For three hosts: a context the host created (with
 * non-default flags) and its legacy NULL stream; the same context and a
 * blocking stream of its own; the device's primary context (the host holds
 * a reference) and a non-blocking stream. Each property is checked with
 * data or with a context query:
 *   - order host -> filter: the host's producer (a kernel that waits 20 ms,
 *     then writes the frame) is enqueued right before the filter and the
 *     filter's output matches what the producer wrote;
 *   - order filter -> host: the filter takes 20 ms more per frame; the host
 *     synchronises only its own stream and then reads the output: right;
 *   - the context the host had current (none, its own, another) is current
 *     again after vf_open, every vf_process and vf_close;
 *   - the host's context keeps its flags, its stream its flags; after
 *     vf_close both still work (a kernel on the stream runs and is checked);
 *   - and the control: with the filter's ordering left out, the same check
 *     finds wrong bytes (so the checks above can fail).
 * And, with two devices, ordering between streams of different devices.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"
#include "../examples/video_filter.h"

enum { W = 1920, H = 1080, PITCH = 2048, FRAMES = 6 };
static const long long kSlowNs = 20 * 1000 * 1000;

static rawcuda rc;
static rc_device dev0;

static CUcontext current(void) {
    CUcontext c = NULL;
    assert_cu_ok(rc.cuCtxGetCurrent(&c));
    return c;
}

typedef struct host {
    const char *name;
    CUcontext ctx;    /* the host's */
    int primary;      /* ctx is the primary context (retained by the host) */
    CUstream stream;  /* the host's (NULL: legacy) */
    CUcontext other;  /* another context, to leave current during calls */
    void *module, *fill;
} host;

static void fill_slow(host *h, unsigned long long p, unsigned value, long long ns) {
    assert_cu_ok(rc.cuCtxSetCurrent(h->ctx));
    unsigned long long n = (unsigned long long)PITCH * H;
    void *args[] = {&p, &n, &value, &ns};
    assert_cu_ok(rc.cuLaunchKernel(h->fill, 264, 1, 1, 256, 1, 1, 0, h->stream, args, NULL));
}

/* Checks dst == 255 - value over the W x H frame. */
static unsigned long long count_wrong(const unsigned char *buf, unsigned value) {
    unsigned long long bad = 0;
    const unsigned char want = (unsigned char)(255u - value);
    for (unsigned y = 0; y < H; y++)
        for (unsigned x = 0; x < W; x++) bad += buf[(size_t)y * PITCH + x] != want;
    return bad;
}

static void run_host(host *h) {
    assert_cu_ok(rc.cuCtxSetCurrent(h->ctx));
    assert_cu_ok(rawcuda_kernel(&rc, &h->module, cw_test_kernels_fatbin, "cw_fill_u8_slow", &h->fill));
    unsigned flags_before = 0, sflags_before = 0, flags_after = 0, sflags_after = 0;
    assert_cu_ok(rc.cuCtxGetFlags(&flags_before));
    if (h->stream) assert_cu_ok(rc.cuStreamGetFlags(h->stream, &sflags_before));
    unsigned long long src = 0, dst = 0;
    assert_cu_ok(rc.cuMemAlloc(&src, (size_t)PITCH * H));
    assert_cu_ok(rc.cuMemAlloc(&dst, (size_t)PITCH * H));
    unsigned char *back = malloc((size_t)PITCH * H);
    assert_non_null(back);

    /* open with nothing current: nothing current after */
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    vf_options opt = {(unsigned long long)kSlowNs, 0};
    video_filter *f = NULL;
    cw_status st = vf_open(&f, h->ctx, h->stream, &opt);
    if (st != CW_SUCCESS) fail_msg("%s: vf_open: %s", h->name, cw_last_error()->message);
    assert_ptr_equal(current(), NULL);

    CUcontext leave[3] = {NULL, h->ctx, h->other};
    unsigned long long wrong_total = 0;
    for (unsigned k = 0; k < FRAMES; k++) {
        const unsigned value = 17u + 29u * k;
        /* the host's producer: 20 ms, then the frame */
        fill_slow(h, src, value, kSlowNs);
        /* the filter, called with some context current */
        CUcontext cur = leave[k % 3];
        assert_cu_ok(rc.cuCtxSetCurrent(cur));
        st = vf_process(f, src, dst, W, H, PITCH);
        if (st != CW_SUCCESS) fail_msg("%s frame %u: vf_process: %s", h->name, k, cw_last_error()->message);
        if (current() != cur) fail_msg("%s frame %u: the current context changed in vf_process", h->name, k);
        /* the host: waits for its own stream only, then reads */
        assert_cu_ok(rc.cuCtxSetCurrent(h->ctx));
        assert_cu_ok(rc.cuStreamSynchronize(h->stream));
        assert_cu_ok(rc.cuMemcpyDtoH(back, dst, (size_t)PITCH * H));
        const unsigned long long wrong = count_wrong(back, value);
        if (wrong) printf("# %s frame %u: %llu of %u bytes wrong\n", h->name, k, wrong, W * H);
        wrong_total += wrong;
    }
    assert_int_equal(wrong_total, 0);
    assert_int_equal(f->frames, FRAMES);

    /* close with another context current: it stays current */
    assert_cu_ok(rc.cuCtxSetCurrent(h->other));
    vf_close(&f);
    assert_null(f);
    assert_ptr_equal(current(), h->other);

    /* the host's context and stream: same flags, still working */
    assert_cu_ok(rc.cuCtxSetCurrent(h->ctx));
    assert_cu_ok(rc.cuCtxGetFlags(&flags_after));
    assert_int_equal(flags_after, flags_before);
    if (h->stream) {
        assert_cu_ok(rc.cuStreamGetFlags(h->stream, &sflags_after));
        assert_int_equal(sflags_after, sflags_before);
    }
    unsigned api = 0;
    assert_cu_ok(rc.cuCtxGetApiVersion(h->ctx, &api));
    fill_slow(h, src, 200, 0);
    assert_cu_ok(rc.cuStreamSynchronize(h->stream));
    assert_cu_ok(rc.cuMemcpyDtoH(back, src, 64));
    for (int i = 0; i < 64; i++) assert_int_equal(back[i], 200);
    printf("# %s: %u frames of %ux%u right, orders both ways, context flags 0x%x kept, current context kept\n",
           h->name, FRAMES, W, H, flags_after);

    free(back);
    assert_cu_ok(rc.cuMemFree(src));
    assert_cu_ok(rc.cuMemFree(dst));
    assert_cu_ok(rc.cuModuleUnload(h->module));
    h->module = NULL;
}

static void test_created_context_null_stream(void **state) {
    (void)state;
    CUcontext created = NULL, primary = NULL;
    rc_result r = 1;
    if (rc.cuCtxCreate_v4) r = rc.cuCtxCreate_v4(&created, NULL, 0x04 /* CU_CTX_SCHED_BLOCKING_SYNC */, dev0);
    if (r != 0 && rc.cuCtxCreate_v2) r = rc.cuCtxCreate_v2(&created, 0x04, dev0);
    assert_cu_ok(r);
    assert_cu_ok(rc.cuDevicePrimaryCtxRetain(&primary, dev0));
    host h = {"created context, NULL stream", created, 0, NULL, primary, NULL, NULL};
    run_host(&h);
    /* the same context with a blocking stream of its own */
    CUstream blocking = NULL;
    assert_cu_ok(rc.cuCtxSetCurrent(created));
    assert_cu_ok(rc.cuStreamCreateWithPriority(&blocking, 0 /* CU_STREAM_DEFAULT */, 0));
    host h2 = {"created context, blocking stream", created, 0, blocking, primary, NULL, NULL};
    run_host(&h2);
    assert_cu_ok(rc.cuCtxSetCurrent(created));
    assert_cu_ok(rc.cuStreamDestroy(blocking));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    assert_cu_ok(rc.cuCtxDestroy(created));
    assert_cu_ok(rc.cuDevicePrimaryCtxRelease(dev0));
}

static void test_primary_context_nonblocking_stream(void **state) {
    (void)state;
    CUcontext primary = NULL, created = NULL;
    assert_cu_ok(rc.cuDevicePrimaryCtxRetain(&primary, dev0));
    assert_cu_ok(rawcuda_ctx_create(&rc, &created, dev0));
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    CUstream nb = NULL;
    assert_cu_ok(rc.cuStreamCreateWithPriority(&nb, 1 /* CU_STREAM_NON_BLOCKING */, 0));
    host h = {"primary context, non-blocking stream", primary, 1, nb, created, NULL, NULL};
    run_host(&h);
    /* the host's reference is still there: the context is active */
    unsigned pflags = 0;
    int active = 0;
    assert_cu_ok(rc.cuDevicePrimaryCtxGetState(dev0, &pflags, &active));
    assert_int_equal(active, 1);
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    assert_cu_ok(rc.cuStreamDestroy(nb));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    assert_cu_ok(rc.cuCtxDestroy(created));
    assert_cu_ok(rc.cuDevicePrimaryCtxRelease(dev0));
}

/* The control: the same frames through the filter with its ordering left
 * out (vf_options.unordered) come out wrong, so the checks above can fail. */
static void test_without_ordering_frames_are_wrong(void **state) {
    (void)state;
    if (getenv("NV_SANITIZER_INJECTION_PORT_BASE") || getenv("CUDA_INJECTION64_PATH")) {
        /* compute-sanitizer serializes the streams' work: the race cannot show */
        printf("# the control is skipped under compute-sanitizer (it serializes streams)\n");
        skip();
        return;
    }
    CUcontext primary = NULL;
    assert_cu_ok(rc.cuDevicePrimaryCtxRetain(&primary, dev0));
    host h = {"unordered", primary, 1, NULL, NULL, NULL, NULL};
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    assert_cu_ok(rawcuda_kernel(&rc, &h.module, cw_test_kernels_fatbin, "cw_fill_u8_slow", &h.fill));
    unsigned long long src = 0, dst = 0;
    assert_cu_ok(rc.cuMemAlloc(&src, (size_t)PITCH * H));
    assert_cu_ok(rc.cuMemAlloc(&dst, (size_t)PITCH * H));
    unsigned char *back = malloc((size_t)PITCH * H);
    assert_non_null(back);
    fill_slow(&h, src, 1, 0);
    fill_slow(&h, dst, 2, 0);
    assert_cu_ok(rc.cuStreamSynchronize(NULL));
    vf_options opt = {(unsigned long long)kSlowNs, 1};
    video_filter *f = NULL;
    if (vf_open(&f, primary, NULL, &opt) != CW_SUCCESS) fail_msg("vf_open: %s", cw_last_error()->message);
    /* the producer's 20 ms are not waited for, nor the filter's 20 ms */
    fill_slow(&h, src, 100, kSlowNs);
    assert_int_equal(vf_process(f, src, dst, W, H, PITCH), CW_SUCCESS);
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    assert_cu_ok(rc.cuStreamSynchronize(NULL));
    assert_cu_ok(rc.cuMemcpyDtoH(back, dst, (size_t)PITCH * H));
    const unsigned long long wrong = count_wrong(back, 100);
    printf("# without the ordering: %llu of %u bytes wrong after the host synchronised its stream\n", wrong, W * H);
    assert_true(wrong > 0);
    vf_close(&f);
    free(back);
    assert_cu_ok(rc.cuCtxSetCurrent(primary));
    assert_cu_ok(rc.cuCtxSynchronize());
    assert_cu_ok(rc.cuMemFree(src));
    assert_cu_ok(rc.cuMemFree(dst));
    assert_cu_ok(rc.cuModuleUnload(h.module));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    assert_cu_ok(rc.cuDevicePrimaryCtxRelease(dev0));
}

/* Multi-device readiness: ordering between streams of two devices with
 * cw_stream_wait (an event of device 0 waited for on device 1). A slow
 * writer on device 0 writes a word of mapped host memory after 20 ms; a
 * reader on device 1, ordered after it, copies the word: it must see the
 * value. Skipped with the reason on fewer than two devices. */
static void test_cross_device_order(void **state) {
    (void)state;
    int n = 0;
    assert_cw_ok(cw_device_count(&n));
    if (n < 2) {
        printf("# cross-device ordering: %d device(s) here, needs 2: skipped\n", n);
        skip();
        return;
    }
    cw_context *c[2] = {NULL, NULL};
    cw_stream *s[2] = {NULL, NULL};
    CUcontext cu[2];
    void *mod[2] = {NULL, NULL}, *writer = NULL, *reader = NULL;
    for (int d = 0; d < 2; d++) {
        assert_cw_ok(cw_context_create(&c[d], d));
        assert_cw_ok(cw_stream_create(&s[d], c[d], NULL));
        cw_stream_info info;
        assert_cw_ok(cw_stream_get_info(s[d], &info));
        assert_int_equal(info.device, d); /* the stream records its device */
        int cd = -1;
        assert_cw_ok(cwt_context_device(c[d], &cd));
        assert_int_equal(cd, d);
        assert_cw_ok(cwt_context_handle(c[d], &cu[d]));
    }
    /* one word of portable mapped host memory for the writer, one for the reader */
    assert_cu_ok(rc.cuCtxSetCurrent(cu[0]));
    int *words = NULL;
    assert_cu_ok(rc.cuMemHostAlloc((void **)&words, 64, 0x01 | 0x02 /* PORTABLE | DEVICEMAP */));
    unsigned long long wdev = (unsigned long long)(uintptr_t)words; /* unified addressing: same address */
    unsigned long long rdev = wdev + 4;
    for (int round = 1; round <= 3; round++) {
        words[0] = 0;
        words[1] = -1;
        CUstream h0 = NULL, h1 = NULL;
        assert_cw_ok(cwt_stream_handle(s[0], &h0));
        assert_cw_ok(cwt_stream_handle(s[1], &h1));
        assert_cu_ok(rc.cuCtxSetCurrent(cu[0]));
        assert_cu_ok(rawcuda_kernel(&rc, &mod[0], cw_test_kernels_fatbin, "cw_slow_write", &writer));
        int value = 1000 + round;
        long long ns = kSlowNs;
        void *wa[] = {&wdev, &value, &ns};
        assert_cu_ok(rawcuda_launch1(&rc, writer, h0, wa));
        assert_cw_ok(cw_stream_wait(s[1], s[0])); /* device 1 after device 0 */
        assert_cu_ok(rc.cuCtxSetCurrent(cu[1]));
        assert_cu_ok(rawcuda_kernel(&rc, &mod[1], cw_test_kernels_fatbin, "cw_copy_int", &reader));
        void *ra[] = {&wdev, &rdev};
        assert_cu_ok(rawcuda_launch1(&rc, reader, h1, ra));
        assert_cw_ok(cw_stream_synchronize(s[1]));
        printf("# cross-device ordering, round %d: device 1 read %d (device 0 wrote %d after 20 ms)\n", round,
               words[1], value);
        assert_int_equal(words[1], value);
        assert_cw_ok(cw_stream_synchronize(s[0]));
    }
    assert_cu_ok(rc.cuCtxSetCurrent(cu[1]));
    assert_cu_ok(rc.cuModuleUnload(mod[1]));
    assert_cu_ok(rc.cuCtxSetCurrent(cu[0]));
    assert_cu_ok(rc.cuModuleUnload(mod[0]));
    assert_cu_ok(rc.cuMemFreeHost(words));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    for (int d = 0; d < 2; d++) {
        cw_stream_destroy(&s[d]);
        cw_context_destroy(&c[d]);
    }
}

int main(void) {
    int start = rawcuda_start(&rc);
    if (start) return start;
    if (rc.cuDeviceGet(&dev0, 0) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_created_context_null_stream),
        cmocka_unit_test(test_primary_context_nonblocking_stream),
        cmocka_unit_test(test_without_ordering_frames_are_wrong),
        cmocka_unit_test(test_cross_device_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
