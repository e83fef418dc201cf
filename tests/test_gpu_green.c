/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU: green contexts (SM partitions, cuweave/partition.h). What the driver
 * says about a partition is checked against where kernels actually run: a
 * kernel (cw_smid, tests/kernels/test_kernels.cu) launched on a partition's
 * stream writes the %smid of every block, and the sets of SM ids of the
 * partitions of one split must be disjoint and no larger than the SM counts
 * they claim. Also: sizes, the leftover and default partitions, pools on a
 * partition, the destroy order (the group goes first; its partitions stay
 * while streams and pools made on them live, and those keep working), and
 * the refusals (sizes that do not fit).
 *
 * The test's own driver loader (rawcuda.h) loads the kernels, allocates and
 * launches; a module is loaded once per context (primary, each partition)
 * with that partition's CUcontext current. A green context may be current on
 * one thread at a time: this test is single-threaded and leaves no context
 * current after a test. Links libcuweave.a. Exits 77 without a GPU; every
 * test skips when cw_partition_get_caps says green contexts are unsupported.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "cwtest.h"
#include "rawcuda.h"
#include "kernels/test_kernels_fatbin.h"

#define US 1000LL /* nanoseconds */
#define MAX_SMID 1024 /* %smid values are below %nsmid, a few hundred at most */

typedef unsigned long long dptr;

static rawcuda rc;
static cw_partition_caps caps;
static int device_sms;

/* The kernels loaded into one context. */
typedef struct kmod {
    CUcontext cu;
    void *module;
    void *k_smid, *k_small;
} kmod;

/* Loads the test kernels into ctx's CUcontext (made current for it). */
static void kmod_load(kmod *m, cw_context *ctx) {
    memset(m, 0, sizeof *m);
    assert_cw_ok(cwt_context_handle(ctx, &m->cu));
    assert_non_null(m->cu);
    assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
    assert_cu_ok(rawcuda_kernel(&rc, &m->module, cw_test_kernels_fatbin, "cw_smid", &m->k_smid));
    assert_cu_ok(rawcuda_kernel(&rc, &m->module, cw_test_kernels_fatbin, "cw_small", &m->k_small));
}

/* Unloads (before the partition's last object goes) and leaves no context current. */
static void kmod_unload(kmod *m) {
    if (m->module) {
        assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
        assert_cu_ok(rc.cuModuleUnload(m->module));
        m->module = NULL;
    }
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
}

static CUstream hnd(const cw_stream *s) {
    CUstream h = (CUstream)0x7;
    assert_cw_ok(cwt_stream_handle(s, &h));
    return h;
}

/* The SM ids one kernel launch saw. */
typedef struct smset {
    unsigned char seen[MAX_SMID];
    unsigned size;
} smset;

/*
 * Launches cw_smid with `blocks` blocks of one thread, each spinning 200 us
 * (so that the blocks spread over every SM the stream may use), on stream s
 * (whose context m was loaded into) and collects the distinct SM ids.
 */
static void smid_run(const kmod *m, cw_stream *s, unsigned blocks, smset *out) {
    memset(out, 0, sizeof *out);
    CUstream h = hnd(s);
    dptr buf = 0;
    const size_t bytes = blocks * sizeof(unsigned);
    assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
    assert_cu_ok(rc.cuMemAlloc(&buf, bytes));
    assert_cu_ok(rc.cuMemsetD32(buf, 0xffffffffu, blocks));
    assert_cu_ok(rc.cuCtxSynchronize());
    long long ns = 200 * US;
    void *args[] = {&buf, &ns};
    assert_cu_ok(rc.cuLaunchKernel(m->k_smid, blocks, 1, 1, 1, 1, 1, 0, h, args, NULL));
    assert_cw_ok(cw_stream_synchronize(s));
    unsigned *ids = malloc(bytes);
    assert_non_null(ids);
    assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
    assert_cu_ok(rc.cuMemcpyDtoH(ids, buf, bytes));
    assert_cu_ok(rc.cuMemFree(buf));
    for (unsigned i = 0; i < blocks; i++) {
        if (ids[i] >= MAX_SMID) fail_msg("block %u wrote SM id %u (not written, or above %d)", i, ids[i], MAX_SMID);
        if (!out->seen[ids[i]]) out->size++;
        out->seen[ids[i]] = 1;
    }
    free(ids);
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
}

static unsigned overlap(const smset *a, const smset *b) {
    unsigned n = 0;
    for (unsigned i = 0; i < MAX_SMID; i++) n += a->seen[i] && b->seen[i];
    return n;
}

static void print_set(const char *name, const smset *s, unsigned claimed) {
    printf("# %s: %u distinct SM ids (partition claims %u SMs):", name, s->size, claimed);
    unsigned shown = 0;
    for (unsigned i = 0; i < MAX_SMID && shown < 12; i++)
        if (s->seen[i]) {
            printf(" %u", i);
            shown++;
        }
    printf("%s\n", s->size > shown ? " ..." : "");
}

/* One cw_small launch on s; returns after it completed. *p counts. */
static void small_once(const kmod *m, cw_stream *s, dptr p) {
    void *args[] = {&p};
    assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
    assert_cu_ok(rawcuda_launch1(&rc, m->k_small, hnd(s), args));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    assert_cw_ok(cw_stream_synchronize(s));
}

static int dget(const kmod *m, dptr p) {
    int v = 0x7eadbeef;
    assert_cu_ok(rc.cuCtxSetCurrent(m->cu));
    assert_cu_ok(rc.cuMemcpyDtoH(&v, p, sizeof v));
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    return v;
}

static void need_green(void) {
    if (!caps.supported) skip();
}

static unsigned info_sms(const cw_partition_group *set, size_t i) {
    cw_partition_info info;
    memset(&info, 0xee, sizeof info);
    assert_cw_ok(cw_partition_group_get_partition(set, i, &info));
    return info.sm_count;
}

/* ---- caps ------------------------------------------------------------------ */

static void test_query(void **state) {
    (void)state;
    cw_partition_caps c;
    memset(&c, 0xee, sizeof c);
    assert_cw_ok(cw_partition_get_caps(0, &c));
    printf("# green caps: supported %d, %u SMs, min partition %u, granularity %u, workqueues %d\n", c.supported,
           c.sm_count, c.min_partition, c.granularity, c.workqueues);
    assert_int_equal(c.sm_count, (unsigned)device_sms);
    assert_true(c.workqueues == 0 || c.workqueues == 1);
    for (size_t i = 0; i < sizeof c.reserved; i++) assert_int_equal(c.reserved[i], 0);
    need_green();
    assert_int_equal(c.supported, 1);
    assert_true(c.min_partition > 0);
    assert_true(c.granularity > 0);
    assert_true(c.min_partition <= c.sm_count);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_get_caps(0, NULL));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_get_caps(-1, &c));
}

/* ---- sizes, leftover, default ------------------------------------------------ */

static void test_partition_sizes(void **state) {
    (void)state;
    need_green();
    const unsigned sizes[] = {16, 8};
    cw_partition_group *set = NULL;
    assert_cw_ok(cw_partition_group_create(&set, 0, sizes, 2, -1));
    assert_non_null(set);
    cw_partition_group_info gi;
    memset(&gi, 0xee, sizeof gi);
    assert_cw_ok(cw_partition_group_get_info(set, &gi));
    assert_int_equal(gi.count, 3);
    assert_int_equal(gi.default_index, 2);
    assert_int_equal(gi.device, 0);
    for (size_t k = 0; k < sizeof gi.reserved; k++) assert_int_equal(gi.reserved[k], 0);

    cw_partition_info info[3];
    for (size_t i = 0; i < 3; i++) {
        memset(&info[i], 0xee, sizeof info[i]);
        assert_cw_ok(cw_partition_group_get_partition(set, i, &info[i]));
        for (size_t k = 0; k < sizeof info[i].reserved; k++) assert_int_equal(info[i].reserved[k], 0);
    }
    printf("# {16, 8}: partition 0 has %u SMs, partition 1 %u, leftover %u (device %u)\n", info[0].sm_count,
           info[1].sm_count, info[2].sm_count, caps.sm_count);
    assert_true(info[0].sm_count >= 16);
    assert_true(info[1].sm_count >= 8);
    assert_int_equal(info[2].sm_count, caps.sm_count - info[0].sm_count - info[1].sm_count);
    assert_int_equal(info[0].leftover, 0);
    assert_int_equal(info[1].leftover, 0);
    assert_int_equal(info[2].leftover, 1);
    assert_int_equal(info[0].is_default, 0);
    assert_int_equal(info[1].is_default, 0);
    assert_int_equal(info[2].is_default, 1);

    cw_context *parts[3] = {NULL, NULL, NULL}, *def = NULL;
    for (size_t i = 0; i < 3; i++) {
        parts[i] = info[i].context;
        assert_non_null(parts[i]);
        cw_context_info ci;
        assert_cw_ok(cw_context_get_info(parts[i], &ci));
        assert_int_equal(ci.kind, CW_CONTEXT_GREEN);
        assert_int_equal(ci.device, 0);
        assert_non_null(ci.handle);
        assert_int_equal(ci.sm_count, info[i].sm_count); /* the partition's SMs, not the device's */
    }
    assert_ptr_not_equal(parts[0], parts[1]);
    assert_ptr_not_equal(parts[1], parts[2]);
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_get_partition(set, 3, &info[0]));

    /* a partition's context is borrowed from the group: cw_context_destroy
     * nulls the caller's pointer and leaves the context alone */
    cw_context *borrowed = parts[0];
    cw_clear_error();
    cw_context_destroy(&borrowed);
    assert_null(borrowed);
    assert_int_equal(cw_last_error()->status, CW_SUCCESS); /* a warning only */
    cw_context_info still;
    assert_cw_ok(cw_context_get_info(parts[0], &still));

    cw_partition_group_destroy(&set);
    assert_null(set);

    /* default_index 0 names the first partition */
    const unsigned one[] = {16};
    assert_cw_ok(cw_partition_group_create(&set, 0, one, 1, 0));
    assert_cw_ok(cw_partition_group_get_info(set, &gi));
    assert_int_equal(gi.count, 2);
    assert_int_equal(gi.default_index, 0);
    assert_cw_ok(cwt_partition(set, 0, &parts[0]));
    assert_cw_ok(cwt_partition(set, gi.default_index, &def));
    assert_ptr_equal(def, parts[0]);
    memset(&info[0], 0, sizeof info[0]);
    assert_cw_ok(cw_partition_group_get_partition(set, 0, &info[0]));
    assert_int_equal(info[0].is_default, 1);
    assert_int_equal(info_sms(set, 1), caps.sm_count - info[0].sm_count);
    cw_partition_group_destroy(&set);
    assert_null(set);
    /* NULL and a pointer to NULL are accepted */
    cw_partition_group_destroy(NULL);
    cw_partition_group_destroy(&set);
}

/* ---- where kernels run ---------------------------------------------------------- */

/* Kernels on partition A (16 SMs), B (8 SMs) and the leftover land on at
 * most that many SMs each, and on SMs no other partition of the set uses. */
static void test_smid_disjoint(void **state) {
    (void)state;
    need_green();
    const unsigned sizes[] = {16, 8};
    cw_partition_group *set = NULL;
    assert_cw_ok(cw_partition_group_create(&set, 0, sizes, 2, -1));
    cw_context *ctx[3];
    cw_stream *s[3];
    kmod m[3];
    smset ids[3];
    unsigned claimed[3];
    static const char *const name[3] = {"partition A {16}", "partition B {8}", "leftover"};
    for (size_t i = 0; i < 3; i++) {
        assert_cw_ok(cwt_partition(set, i, &ctx[i]));
        claimed[i] = info_sms(set, i);
        s[i] = NULL;
        assert_cw_ok(cw_stream_create(&s[i], ctx[i], NULL));
        kmod_load(&m[i], ctx[i]);
    }
    for (size_t i = 0; i < 3; i++) {
        smid_run(&m[i], s[i], 4 * claimed[i], &ids[i]);
        print_set(name[i], &ids[i], claimed[i]);
    }
    const unsigned ab = overlap(&ids[0], &ids[1]), al = overlap(&ids[0], &ids[2]), bl = overlap(&ids[1], &ids[2]);
    printf("# shared SM ids: A/B %u, A/leftover %u, B/leftover %u\n", ab, al, bl);
    for (size_t i = 0; i < 3; i++) {
        assert_true(ids[i].size >= 1);
        assert_true(ids[i].size <= claimed[i]);
    }
    assert_int_equal(ab, 0);
    assert_int_equal(al, 0);
    assert_int_equal(bl, 0);

    for (size_t i = 0; i < 3; i++) {
        kmod_unload(&m[i]);
        cw_stream_destroy(&s[i]);
        assert_null(s[i]);
    }
    cw_partition_group_destroy(&set);
    assert_null(set);
}

/* A stream from a pool made on a partition runs its kernels on that
 * partition's SMs (and not on the leftover's). */
static void test_pool_on_partition(void **state) {
    (void)state;
    need_green();
    const unsigned sizes[] = {16};
    cw_partition_group *set = NULL;
    assert_cw_ok(cw_partition_group_create(&set, 0, sizes, 1, -1));
    cw_context *a = NULL, *left = NULL;
    assert_cw_ok(cwt_partition(set, 0, &a));
    assert_cw_ok(cwt_partition(set, 1, &left)); /* the leftover, the default */
    const unsigned na = info_sms(set, 0), nl = info_sms(set, 1);

    cw_stream_pool *pool = NULL;
    assert_cw_ok(cw_stream_pool_create(&pool, a, NULL));
    cw_stream *ps = NULL, *ls = NULL;
    assert_cw_ok(cw_stream_pool_acquire(&ps, pool, 0));
    cw_context *back = NULL;
    assert_cw_ok(cwt_stream_context(ps, &back));
    assert_ptr_equal(back, a);
    assert_cw_ok(cw_stream_create(&ls, left, NULL));

    kmod ma, ml;
    kmod_load(&ma, a);
    kmod_load(&ml, left);
    smset ia, il;
    smid_run(&ma, ps, 4 * na, &ia);
    smid_run(&ml, ls, 4 * nl, &il);
    print_set("pool stream on partition {16}", &ia, na);
    print_set("leftover", &il, nl);
    const unsigned shared = overlap(&ia, &il);
    printf("# shared SM ids: %u\n", shared);
    assert_true(ia.size >= 1 && ia.size <= na);
    assert_true(il.size >= 1 && il.size <= nl);
    assert_int_equal(shared, 0);

    kmod_unload(&ma);
    kmod_unload(&ml);
    assert_cw_ok(cw_stream_pool_release(pool, &ps));
    /* the pool keeps the partition alive after the group goes */
    cw_partition_group_destroy(&set);
    assert_null(set);
    cw_context_info ci;
    assert_cw_ok(cw_context_get_info(a, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_GREEN);
    cw_stream_pool_destroy(&pool);
    cw_stream_destroy(&ls);
    /* now nothing holds the partitions: they are gone */
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(a, &ci));
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(left, &ci));
}

/* ---- destroy order ------------------------------------------------------------- */

static void test_destroy_order(void **state) {
    (void)state;
    need_green();
    const unsigned sizes[] = {16};
    cw_partition_group *set = NULL;
    assert_cw_ok(cw_partition_group_create(&set, 0, sizes, 1, -1));
    cw_context *a = NULL;
    assert_cw_ok(cwt_partition(set, 0, &a));
    cw_stream *s = NULL;
    assert_cw_ok(cw_stream_create(&s, a, NULL));
    kmod m;
    kmod_load(&m, a);
    dptr p = 0;
    assert_cu_ok(rc.cuCtxSetCurrent(m.cu));
    assert_cu_ok(rc.cuMemAlloc(&p, sizeof(int)));
    assert_cu_ok(rc.cuMemsetD32(p, 0, 1));
    assert_cu_ok(rc.cuCtxSynchronize());
    assert_cu_ok(rc.cuCtxSetCurrent(NULL));
    small_once(&m, s, p);
    assert_int_equal(dget(&m, p), 1);

    /* the group goes while the stream lives: the partition stays (the
     * stream holds its context), and the stream keeps working on it */
    cw_partition_group_destroy(&set);
    assert_null(set);
    small_once(&m, s, p);
    assert_int_equal(dget(&m, p), 2);
    cw_context_info ci;
    assert_cw_ok(cw_context_get_info(a, &ci));
    assert_int_equal(ci.kind, CW_CONTEXT_GREEN);

    assert_cu_ok(rc.cuCtxSetCurrent(m.cu));
    assert_cu_ok(rc.cuMemFree(p));
    kmod_unload(&m);
    /* the last object on the partition: the green context goes with it */
    cw_stream_destroy(&s);
    assert_null(s);
    assert_cw(CW_ERROR_INVALID_HANDLE, cw_context_get_info(a, &ci));
}

/* ---- refusals ------------------------------------------------------------------ */

/* Expects CW_ERROR_INVALID_ARGUMENT; when must_say_sms, the detail names the
 * device's SM count. */
static void expect_refused(const char *what, const unsigned *sizes, size_t n, int def, int must_say_sms) {
    cw_partition_group *set = NULL;
    const cw_status st = cw_partition_group_create(&set, 0, sizes, n, def);
    printf("# %s: %s: %s\n", what, cw_status_name(st), cw_last_error()->message);
    if (st != CW_ERROR_INVALID_ARGUMENT) {
        cw_partition_group_destroy(&set);
        fail_msg("%s: cw_partition_group_create returned %s, expected CW_ERROR_INVALID_ARGUMENT", what,
                 cw_status_name(st));
    }
    assert_null(set);
    assert_string_equal(cw_last_error()->function, "cw_partition_group_create");
    if (must_say_sms) {
        char num[16];
        snprintf(num, sizeof num, "%u", caps.sm_count);
        if (!strstr(cw_last_error()->message, num))
            fail_msg("%s: the detail does not mention the device's %s SMs: %s", what, num, cw_last_error()->message);
    }
}

static void test_invalid_sizes(void **state) {
    (void)state;
    need_green();
    const unsigned unit = caps.granularity > caps.min_partition ? caps.granularity : caps.min_partition;
    if (caps.granularity > 1) {
        const unsigned not_multiple[] = {unit + caps.granularity / 2}; /* 12 on the H100 */
        expect_refused("not a multiple of the granularity", not_multiple, 1, -1, 1);
        const unsigned second_bad[] = {16, unit + caps.granularity / 2};
        expect_refused("second size not a multiple", second_bad, 2, 0, 1);
    }
    if (caps.min_partition > 1) {
        const unsigned below_min[] = {caps.min_partition / 2}; /* 4 on the H100 */
        expect_refused("below the minimum", below_min, 1, -1, 1);
    }
    const unsigned zero[] = {0};
    expect_refused("zero SMs", zero, 1, -1, 0);
    const unsigned over[] = {caps.sm_count / unit * unit, 16}; /* {128, 16} on the H100 */
    expect_refused("sum over the SM count", over, 2, 0, 1);
    const unsigned over2[] = {caps.sm_count / unit * unit + unit}; /* {136} */
    expect_refused("one size over the SM count", over2, 1, 0, 1);
    const unsigned ok[] = {16};
    expect_refused("default_index 1 of 1 partition", ok, 1, 1, 0);
    expect_refused("default_index -2", ok, 1, -2, 0);
    const unsigned ok2[] = {16, 8};
    expect_refused("default_index 2 of 2 partitions", ok2, 2, 2, 0);
    /* plain argument checks */
    cw_partition_group *set = NULL;
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(NULL, 0, ok, 1, -1));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, NULL, 1, -1));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, 0, ok, 0, -1));
    assert_cw(CW_ERROR_INVALID_ARGUMENT, cw_partition_group_create(&set, -1, ok, 1, -1));
    assert_null(set);
}

static int group_setup(void **state) {
    (void)state;
    cw_device_info info;
    if (cw_device_get_info(0, &info) != CW_SUCCESS) return -1;
    device_sms = info.sm_count;
    if (cw_partition_get_caps(0, &caps) != CW_SUCCESS) return -1;
    if (!caps.supported) printf("# green contexts unsupported on device 0: the tests skip\n");
    return 0;
}

int main(void) {
    const int start = rawcuda_start(&rc);
    if (start != 0) return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_partition_sizes),
        cmocka_unit_test(test_smid_disjoint),
        cmocka_unit_test(test_pool_on_partition),
        cmocka_unit_test(test_destroy_order),
        cmocka_unit_test(test_invalid_sizes),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
