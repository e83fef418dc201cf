// GPU: every C++ wrapper used once against the real driver: context,
// partition_set (green contexts), stream (on the primary context and on a
// partition), stream_pool and lease, timer, future of both kinds, capture,
// graph (a conditional body included), graph_exec, program, module, kernel
// (typed launches, and the argument check refusing a wrong count or size). Exits 77
// without a GPU.
extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
}
#include <stdio.h>

#include "cuweave/cuweave.hpp"
#include "rawcuda.h"

static void test_wrappers_on_gpu(void **) {
    cw::context ctx = cw::context::create(0);
    assert_int_equal(ctx.kind(), CW_CONTEXT_PRIMARY);
    assert_non_null(ctx.native());

    cw::stream a = cw::stream::create(ctx);
    cw::stream b = cw::stream::create(ctx);
    b.wait(a);
    cw::timer t = cw::timer::create(ctx);
    t.start(a);
    t.stop(a);
    assert_true(t.elapsed_ms() >= 0.0f);
    for (cw_future_kind k : {CW_FUTURE_HOST_FUNC, CW_FUTURE_WRITE_VALUE}) {
        cw::future f = cw::future::create(b, k);
        f.wait(5000000);
        assert_true(f.ready());
    }

    cw_stream_pool_settings set;
    cw_stream_pool_settings_default(&set);
    set.max_streams = 1;
    cw::stream_pool pool = cw::stream_pool::create(ctx, &set);
    {
        cw::lease l = pool.acquire();
        l.get().wait(a);
        l.get().synchronize();
        assert_int_equal(pool.stats().leased, 1);
    }
    assert_int_equal(pool.stats().leased, 0);

    // graphs: a capture, a graph built from parts with an IF node whose
    // condition stays 0 (its body never runs), an exec launched and updated
    cw::graph captured;
    {
        cw::capture cap(a);
        captured = cap.end();
    }
    cw::graph parent = cw::graph::create(ctx);
    cw_graph_node *first = parent.add_child(captured);
    cw_cond_handle h = parent.cond_create(0);
    cw::graph body = parent.add_conditional(h, CW_COND_IF, &first, 1);
    assert_false(body.owns());
    assert_int_equal(body.info().is_body, 1);
    body.add_empty();
    cw::graph_exec exec = cw::graph_exec::create(parent);
    exec.upload(a);
    exec.launch(a);
    a.synchronize();
    assert_int_equal(exec.stats().launches, 1);
    assert_int_equal(exec.update(parent).kind, CW_GRAPH_UPDATED_IN_PLACE);

    // kernels: a built-in launched with typed arguments, checked against its
    // parameters; a templated kernel compiled by NVRTC (when it is here)
    rawcuda rc;
    assert_true(rawcuda_open(&rc));
    unsigned long long buf = 0;
    assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
    assert_int_equal(rc.cuMemAlloc(&buf, 4096 * 4), 0);
    cw::kernel fill = cw::builtin_kernel(CW_BUILTIN_FILL_U32);
    uint32_t *dst = reinterpret_cast<uint32_t *>(buf);
    fill.launch(a, cw::dims(4), cw::dims(256), dst, uint32_t(0xabcd), uint64_t(4096));
    a.synchronize();
    static uint32_t host[4096];
    assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
    assert_int_equal(rc.cuMemcpyDtoH(host, buf, sizeof host), 0);
    for (uint32_t v : host) assert_int_equal(v, 0xabcd);
    if (fill.param_count(ctx) >= 0) {
        assert_int_equal(fill.param_count(ctx), 3);
        bool threw = false;
        try {
            fill.launch(a, cw::dims(1), cw::dims(1), dst, uint32_t(1));  // one argument short
        } catch (const cw::error &e) {
            threw = e.status() == CW_ERROR_INVALID_ARGUMENT;
        }
        assert_true(threw);
        threw = false;
        try {
            fill.launch(a, cw::dims(1), cw::dims(1), dst, uint32_t(1), int(4096));  // int for uint64_t
        } catch (const cw::error &e) {
            threw = e.status() == CW_ERROR_INVALID_ARGUMENT;
        }
        assert_true(threw);
    }
    int nvmaj = 0;
    if (cw_nvrtc_version(&nvmaj, nullptr) == CW_SUCCESS) {
        const char *src = "template <typename T> __global__ void twice(T *x, int n) {\n"
                          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                          "    if (i < n) x[i] = x[i] * (T)2;\n"
                          "}\n";
        const char *exprs[] = {"twice<unsigned>"};
        cw_program_settings ps;
        cw_program_settings_default(&ps);
        ps.name_expressions = exprs;
        ps.n_name_expressions = 1;
        ps.cache = CW_CACHE_MEMORY_ONLY;
        cw::program prog = cw::program::compile(ctx, src, &ps);
        cw::module mod = cw::module::load(prog);
        cw::kernel twice = mod.get_kernel("twice<unsigned>");
        twice.launch(a, cw::dims(16), cw::dims(256), reinterpret_cast<unsigned *>(buf), 4096);
        a.synchronize();
        assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
        assert_int_equal(rc.cuMemcpyDtoH(host, buf, sizeof host), 0);
        for (uint32_t v : host) assert_int_equal(v, 0xabcd * 2);
    } else {
        printf("# no NVRTC: program and module not exercised\n");
    }
    assert_int_equal(rc.cuMemFree(buf), 0);
    assert_int_equal(rc.cuCtxSetCurrent(nullptr), 0);

    cw_green_caps caps;
    if (cw_green_query(0, &caps) != CW_SUCCESS || !caps.supported) {
        printf("# green contexts unsupported: partition_set not exercised\n");
        return;
    }
    const unsigned sizes[] = {caps.min_partition > caps.granularity ? caps.min_partition : caps.granularity};
    cw::partition_set parts = cw::partition_set::create(0, sizes, 1, -1);
    assert_int_equal(parts.size(), 2);
    cw::context fast = parts.at(0);
    assert_false(fast.owns());
    assert_int_equal(fast.kind(), CW_CONTEXT_GREEN);
    assert_int_equal(parts.sm_count(0), sizes[0]);
    {
        cw::stream g = cw::stream::create(fast);
        g.wait(a);  // across contexts of one device
        cw::future f = cw::future::create(g);
        f.wait(5000000);
    }
    printf("# C++ wrappers: context, stream, timer, future x2, pool+lease, capture, graph, graph_exec, "
           "partition_set {%u} used on the GPU\n",
           sizes[0]);
}

int main() {
    cw_status st = cw_init();
    int n = 0;
    if (st != CW_SUCCESS || cw_device_count(&n) != CW_SUCCESS || n == 0) {
        printf("SKIP: no usable GPU: %s\n", cw_last_error_message());
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_wrappers_on_gpu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
