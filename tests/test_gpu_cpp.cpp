/* SPDX-License-Identifier: BSD-2-Clause */
// GPU: every C++ wrapper used once against the real driver. The first test:
// context, partition_group (green contexts), stream (on the primary context
// and on a partition), stream_pool and lease, timer, future of both kinds,
// capture, graph (a conditional body included), graph_exec, program, module,
// kernel (typed launches, and the argument check refusing a wrong count or
// size). The second: the library calls (versions, devices, errors, the log),
// stream queries, waits for two streams, a fork scope whose child's kernel the parent's
// later work waits for, named and waited-for pool streams, future callbacks,
// fds and when_all, graph and exec handles and DOT, the jit cache, cw::buffer
// and cw::host_buffer with copies both ways (data checked). The third: a
// pipeline of two C++ operators (cw::operator_base) moving a cw::buffer from
// a fill kernel to a scale kernel, every value checked. The fourth: resident
// loops, one with a workload captured into a graph and one with a C++
// capture function, each serving requests with their outputs checked. Kernels
// come from the test fatbin (tests/kernels/test_kernels.cu) and, for the
// templated one, NVRTC when it is here. Exits 77 without a GPU.
extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
}
#include <stdio.h>

#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "cuweave/cuweave.hpp"
#include "kernels/test_kernels_fatbin.h"
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
    assert_int_equal(exec.info().launches, 1);
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
    // wrap adopts CUDA handles the caller keeps, as in C: a CUstream made
    // with the driver, on an adopted CUcontext (the primary's); the fill runs
    // through the wrapper, and both CUDA handles outlive their wrappers
    {
        CUstream raw = nullptr;
        assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
        assert_int_equal(rc.cuStreamCreateWithPriority(&raw, 1 /* non-blocking */, 0), 0);
        {
            cw::context outer = cw::context::wrap(ctx.native());
            assert_int_equal(outer.kind(), CW_CONTEXT_EXTERNAL);
            cw::stream w = cw::stream::wrap(outer, raw);
            assert_true(w.owns());
            assert_ptr_equal(w.native(), raw);
            fill.launch(w, cw::dims(4), cw::dims(256), dst, uint32_t(0x1234), uint64_t(4096));
            w.synchronize();
        }
        assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
        assert_int_equal(rc.cuStreamSynchronize(raw), 0); // still the caller's
        assert_int_equal(rc.cuStreamDestroy(raw), 0);
        assert_int_equal(rc.cuMemcpyDtoH(host, buf, sizeof host), 0);
        for (uint32_t v : host) assert_int_equal(v, 0x1234);
    }
    if (fill.param_count(ctx) >= 0) {
        assert_int_equal(fill.param_count(ctx), 3);
        const std::vector<size_t> sizes = fill.params(ctx);
        assert_int_equal(sizes.size(), 3);
        assert_int_equal(sizes[0], 8);
        assert_int_equal(sizes[1], 4);
        assert_int_equal(sizes[2], 8);
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
    if (cw::driver_has(CW_FEATURE_NVRTC)) {
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
        assert_true(strlen(prog.lowered_name("twice<unsigned>")) > 0);
        cw::module mod = cw::module::load(prog);
        cw::kernel twice = mod.get_kernel("twice<unsigned>");
        twice.launch(a, cw::dims(16), cw::dims(256), reinterpret_cast<unsigned *>(buf), 4096);
        a.synchronize();
        assert_int_equal(rc.cuCtxSetCurrent(ctx.native()), 0);
        assert_int_equal(rc.cuMemcpyDtoH(host, buf, sizeof host), 0);
        for (uint32_t v : host) assert_int_equal(v, 0x1234 * 2); // the wrapped stream's fill, doubled
    } else {
        printf("# no NVRTC: program and module not exercised\n");
    }
    assert_int_equal(rc.cuMemFree(buf), 0);
    assert_int_equal(rc.cuCtxSetCurrent(nullptr), 0);

    cw_partition_caps caps = cw::partition_caps(0);
    if (!caps.supported) {
        printf("# green contexts unsupported: partition_group not exercised\n");
        return;
    }
    const unsigned sizes[] = {caps.min_partition > caps.granularity ? caps.min_partition : caps.granularity};
    cw::partition_group parts = cw::partition_group::create(0, sizes, 1, -1);
    assert_int_equal(parts.size(), 2);
    cw::context fast = parts.at(0);
    assert_false(fast.owns());
    assert_int_equal(fast.kind(), CW_CONTEXT_GREEN);
    assert_int_equal(parts.sm_count(0), sizes[0]);
    assert_int_equal(parts.info(1).leftover, 1);
    assert_ptr_equal(parts.info(0).context, fast.get());
    assert_int_equal(parts.group_info().default_index, 1);
    assert_ptr_equal(parts.default_partition().get(), parts.at(1).get());
    {
        cw::stream g = cw::stream::create(fast);
        g.wait(a);  // across contexts of one device
        cw::future f = cw::future::create(g);
        f.wait(5000000);
    }
    printf("# C++ wrappers: context, stream, timer, future x2, pool+lease, capture, graph, graph_exec, "
           "partition_group {%u} used on the GPU\n",
           sizes[0]);
}

// ---- the library, streams, forks, pools, futures, graphs, memory ------------------

template <class T>
static T *dev(unsigned long long d) {
    return reinterpret_cast<T *>(static_cast<uintptr_t>(d));
}

struct log_count {
    int errors = 0;
    void operator()(cw_log_level level, const char *) {
        if (level == CW_LOG_ERROR) errors++;
    }
};
struct done_count {
    std::atomic<int> calls{0};
    std::atomic<int> ok{0};
    void operator()(cw_status st) {
        if (st == CW_SUCCESS) ok++;
        calls++;
    }
};

static void test_more_wrappers_on_gpu(void **) {
    // the library
    assert_int_equal(cw::version(), CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH));
    const cw_versions vs = cw::versions();
    assert_int_equal(CW_VERSION_PACK_MAJOR(vs.api), CW_API_VERSION_MAJOR);
    cw::init();
    assert_true(vs.driver >= 12000);
    const int ndev = cw::device_count();
    assert_true(ndev >= 1);
    cw_device_info di = cw::device_info(0);
    assert_int_equal(di.ordinal, 0);
    assert_true(di.name[0] != '\0' && di.cc_major >= 7 && di.sm_count > 0 && di.total_memory > 0);
    printf("# %s (cc %d.%d, %d SMs), driver %d, %d device(s), built-ins: %s\n", di.name, di.cc_major,
           di.cc_minor, di.sm_count, vs.driver, ndev, vs.builtin_origin);
    log_count logs;
    cw::set_log_callback(logs, CW_LOG_ERROR);
    bool threw = false;
    try {
        cw::device_info(ndev);
    } catch (const cw::error &e) {
        threw = e.status() == CW_ERROR_INVALID_ARGUMENT && strcmp(e.what(), cw::error_message()) == 0;
    }
    assert_true(threw);
    assert_int_equal(logs.errors, 1);
    assert_string_equal(cw::error_detail().function, "cw_device_get_info");
    cw::remove_log_callback();
    cw::clear_error();
    assert_int_equal(cw::error_detail().status, CW_SUCCESS);
    assert_string_equal(cw::status_string(CW_ERROR_TIMEOUT), "the wait timed out");

    cw::context ctx = cw::context::create(0);
    cw::priority_range cpr = ctx.priority_range();
    assert_true(cpr.greatest <= cpr.least);
    cw::module mod = cw::module::load_image(cw_test_kernels_fatbin);
    cw::kernel fill = mod.get_kernel("cw_pl_fill");
    fill.preload(ctx);
    assert_non_null(fill.native());
    assert_true(fill.param_count(ctx) == 5 || fill.param_count(ctx) == -1); // -1: a driver before 12.4

    cw_stream_settings ss = cw::defaults<cw_stream_settings>();
    ss.priority = cpr.greatest;
    cw::stream a = cw::stream::create(ctx, &ss);
    cw::stream b = cw::stream::create(ctx);
    cw_stream_info si = a.info();
    assert_int_equal(si.priority, cpr.greatest);
    assert_int_equal(si.owned, 1);
    assert_int_equal(a.device(), 0);
    assert_ptr_equal(a.context().get(), ctx.get());
    assert_int_equal(a.capture_state(), CW_CAPTURE_NONE);

    // memory: a device buffer filled by a forked child, copied back into
    // page-locked memory after the parent waited for the child
    const unsigned n = 1 << 16;
    cw::host_buffer back = cw::host_buffer::alloc(ctx, n * sizeof(unsigned));
    cw::host_buffer in = cw::host_buffer::alloc(ctx, n * sizeof(unsigned));
    assert_int_equal(in.device_ptr(), (unsigned long long)(uintptr_t)in.data());
    cw::buffer buf = cw::buffer::create(a, n * sizeof(unsigned));
    assert_ptr_equal(buf.context().get(), ctx.get());
    assert_int_equal(buf.info().bytes, n * sizeof(unsigned));
    unsigned *d = dev<unsigned>(buf.writable());
    {
        cw::forked f = cw::forked::create(a);
        fill.launch(f.child(), cw::dims(64), cw::dims(256), d, n, 5u, (long long)200000, (unsigned long long *)nullptr);
        buf.used_by(f.child());
        f.join();
    }
    cw::copy_to_host(a, back.data(), buf.ptr(), back.size());
    a.synchronize();
    for (unsigned i = 0; i < n; i++)
        if (back.as<unsigned>()[i] != 5u + i)
            fail_msg("fork: out[%u] = %u, want %u", i, back.as<unsigned>()[i], 5u + i);
    // and the other way: host memory to the buffer, back again
    for (unsigned i = 0; i < n; i++) in.as<unsigned>()[i] = i * 2654435761u;
    cw::copy_to_device(b, buf.ptr(), in.data(), in.size()); // a is idle: nothing to order behind
    cw::copy_to_host(b, back.data(), buf.ptr(), back.size());
    buf.used_by(b);
    b.synchronize();
    assert_memory_equal(in.data(), back.data(), in.size());
    {
        cw::buffer other = buf.share();
        assert_int_equal(buf.info().refs, 2);
    }

    // ordering and futures: waits for two streams, callbacks, fds, when_all
    cw::stream c = cw::stream::create(ctx);
    c.wait(a);
    c.wait(b);
    cw::future f = cw::future::create(c);
    f.set_spin(20);
    done_count done;
    f.set_callback(done);
    int fd = f.fd();
    f.wait(5000000);
    for (int i = 0; i < 5000 && done.calls == 0; i++) usleep(1000);
    assert_int_equal(done.calls.load(), 1);
    assert_int_equal(done.ok.load(), 1);
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 5000), 1); // readable once complete
    fill.launch(a, cw::dims(64), cw::dims(256), d, n, 9u, (long long)300000, (unsigned long long *)nullptr);
    cw::future all = cw::when_all(a, b, c);
    cw::future all_ev = cw::when_all(CW_FUTURE_EVENT, a, b);
    all.wait(5000000);
    all_ev.wait(5000000);
    assert_true(all.ready());
    assert_true(a.done());

    // pools: a waiting acquire, named streams
    cw_stream_pool_settings ps = cw::defaults<cw_stream_pool_settings>();
    ps.max_streams = 2;
    cw::stream_pool pool = cw::stream_pool::create(ctx, &ps);
    assert_ptr_equal(pool.context().get(), ctx.get());
    int owner = 0;
    cw::stream named = pool.named(&owner, "side");
    assert_ptr_equal(pool.named(&owner, "side").get(), named.get());
    {
        cw::lease l = pool.acquire_wait(1000000);
        l.get().wait(named);
        threw = false;
        try {
            cw::lease none = pool.acquire_wait(1000);
        } catch (const cw::error &e) {
            threw = e.status() == CW_ERROR_TIMEOUT;
        }
        assert_true(threw);
    }
    assert_int_equal(pool.release_owner(&owner), 1);

    // timers, graphs: handles, contexts, DOT
    cw::timer t = cw::timer::create(ctx);
    cw::graph g;
    {
        cw::capture cap(a, CW_CAPTURE_THREAD_LOCAL);
        assert_int_equal(a.capture_state(), CW_CAPTURE_ACTIVE);
        {
            cw::forked side = cw::forked::create(a); // a branch of the graph
            fill.launch(side.child(), cw::dims(64), cw::dims(256), d, n, 11u, (long long)0,
                        (unsigned long long *)nullptr);
        }
        g = cap.end();
    }
    assert_non_null(g.native());
    assert_ptr_equal(g.context().get(), ctx.get());
    char path[] = "/tmp/cw_test_gpu_cpp_XXXXXX";
    int dotfd = mkstemp(path);
    assert_true(dotfd >= 0);
    close(dotfd);
    g.write_dot(path);
    FILE *dot = fopen(path, "r");
    assert_non_null(dot);
    char line[128] = {0};
    assert_non_null(fgets(line, sizeof line, dot));
    fclose(dot);
    unlink(path);
    assert_non_null(strstr(line, "digraph"));
    cw::graph_exec e = cw::graph_exec::create(g);
    assert_non_null(e.native());
    assert_ptr_equal(e.context().get(), ctx.get());
    t.start(a);
    e.launch(a);
    t.stop(a);
    cw::copy_to_host(a, back.data(), buf.ptr(), back.size());
    buf.used_by(a);
    a.synchronize();
    assert_true(t.elapsed_ms() >= 0.0f);
    for (unsigned i = 0; i < n; i++)
        if (back.as<unsigned>()[i] != 11u + i) fail_msg("graph: out[%u] = %u", i, back.as<unsigned>()[i]);

    // the jit cache: counters, a configuration, the memory cache emptied
    cw_jit_stats js = cw::jit_stats();
    cw_jit_cache_settings jc = cw::defaults<cw_jit_cache_settings>();
    jc.dir = "off"; // never the user's disk cache
    jc.max_bytes = 64ull << 20;
    cw::jit_cache_configure(jc);
    cw::jit_cache_clear_memory();
    assert_true(cw::jit_stats().compiles >= js.compiles);
    if (cw::driver_has(CW_FEATURE_NVRTC)) {
        assert_true(cw::versions().nvrtc_major >= 12);
        threw = false;
        try {
            cw::program bad = cw::program::compile(ctx, "#error not today\n");
        } catch (const cw::error &ex) {
            threw = ex.status() == CW_ERROR_COMPILE && strstr(cw::compile_log(), "not today") != nullptr;
        }
        assert_true(threw);
    }
    cw::jit_cache_configure(cw::defaults<cw_jit_cache_settings>());
    printf("# C++ wrappers: library calls, stream queries, waits, fork x2, host_buffer, buffer, copies, "
           "future callback/fd, when_all x2, named and waited-for pool streams, graph/exec handles, DOT, jit cache "
           "used on the GPU\n");
}

// ---- a pipeline of two C++ operators moving a cw::buffer ---------------------------

enum { PL_N = 4096, PL_ITERATIONS = 6 };

struct fill_op : cw::operator_base {
    cw::kernel k;
    explicit fill_op(cw::kernel kernel) : k(kernel) {}
    void setup(cw::op_spec &spec) override { spec.output("out"); }
    cw::status compute(cw::io &io) override {
        cw::stream s = io.receive_stream();
        cw::buffer b = io.alloc(PL_N * sizeof(unsigned));
        const unsigned value = 1000u * (unsigned)(io.iteration() + 1);
        k.launch(s, cw::dims(16), cw::dims(256), dev<unsigned>(b.writable()), (unsigned)PL_N, value, (long long)0,
                 (unsigned long long *)nullptr);
        io.emit("out", b);
        return {};
    }
};
struct scale_op : cw::operator_base {
    cw::kernel k;
    unsigned *results; // page-locked: PL_ITERATIONS x PL_N
    int *checks;
    scale_op(cw::kernel kernel, unsigned *r, int *c) : k(kernel), results(r), checks(c) {}
    void setup(cw::op_spec &spec) override { spec.input("in"); }
    cw::status compute(cw::io &io) override {
        cw::message m = io.receive("in");
        if (!m.data || m.data.owns() || !m.producer) return cw::status(CW_ERROR_INTERNAL);
        // the manual calls agree with receive: one message, one stream, this operator
        if (io.receive_many("in").size() != 1 || !io.receive_many("in")[0].producer ||
            strcmp(io.op_name(), "scale") != 0)
            return cw::status(CW_ERROR_INTERNAL);
        (*checks)++;
        cw::stream s = io.receive_stream("in"); // ordered behind the fill, no CPU wait
        cw::buffer out = io.alloc(PL_N * sizeof(unsigned));
        k.launch(s, cw::dims(16), cw::dims(256), dev<const unsigned>(m.data.ptr()), dev<unsigned>(out.writable()),
                 (unsigned)PL_N, 3u, 7u, (long long)0, (unsigned long long *)nullptr);
        cw::copy_to_host(s, results + io.iteration() * PL_N, out.ptr(), PL_N * sizeof(unsigned));
        return {};
    }
};

static void test_pipeline_on_gpu(void **) {
    cw::context ctx = cw::context::create(0);
    cw::module mod = cw::module::load_image(cw_test_kernels_fatbin);
    cw::kernel fill = mod.get_kernel("cw_pl_fill"), scale = mod.get_kernel("cw_pl_scale");
    fill.preload(ctx);
    scale.preload(ctx);
    assert_true(scale.param_count(ctx) == 7 || scale.param_count(ctx) == -1);
    cw::host_buffer results = cw::host_buffer::alloc(ctx, PL_ITERATIONS * PL_N * sizeof(unsigned));
    int checks = 0;
    {
        cw::pipeline p = cw::pipeline::create(ctx);
        assert_ptr_equal(p.context().get(), ctx.get());
        cw_operator *f = p.emplace<fill_op>("fill", fill);
        p.emplace<scale_op>("scale", scale, results.as<unsigned>(), &checks);
        assert_ptr_equal(p.find("fill"), f);
        p.connect("fill", "out", "scale", "in");
        p.check();
        p.run(PL_ITERATIONS);
        p.synchronize(); // the copies into results are done
        cw_pipeline_info st = p.info();
        assert_int_equal(st.iterations, PL_ITERATIONS);
        assert_int_equal(st.computes, 2 * PL_ITERATIONS);
        printf("# pipeline: %llu iterations, buffers allocated %llu, reused %llu\n",
               (unsigned long long)st.iterations, (unsigned long long)st.buffers_allocated,
               (unsigned long long)st.buffers_reused);
    }
    assert_int_equal(checks, PL_ITERATIONS);
    int bad = 0;
    for (unsigned it = 0; it < PL_ITERATIONS; it++)
        for (unsigned i = 0; i < PL_N; i++) {
            const unsigned want = (1000u * (it + 1) + i) * 3u + 7u;
            const unsigned got = results.as<unsigned>()[it * PL_N + i];
            if (got != want && bad++ < 3) printf("# iteration %u: out[%u] = %u, want %u\n", it, i, got, want);
        }
    assert_int_equal(bad, 0);
}

// ---- resident loops: a captured graph, and a C++ capture function -----------------

// Serves `requests` requests: each input written into the slot the loop
// names, each result (mapped host memory) checked: out[0] = v * 3 + 1, out[1] = seq.
static void serve(const cw::resident &r, const cw::stream &s, cw::host_buffer &stage, volatile unsigned *out,
                  unsigned requests) {
    for (unsigned k = 1; k <= requests; k++) {
        unsigned long long slot = r.next_input(1000);
        const unsigned v = k * 40503u + 17u;
        stage.as<unsigned>()[0] = v;
        cw::copy_to_device(s, slot, stage.data(), sizeof v);
        s.synchronize(); // the input is on the GPU before the request
        uint64_t seq = r.data_ready();
        r.wait_result(seq, 2000);
        assert_true(r.result_ready(seq));
        if (out[0] != v * 3u + 1u || out[1] != (unsigned)seq)
            fail_msg("request %u: output %u/%u, want %u/%u", k, out[0], out[1], v * 3u + 1u, (unsigned)seq);
    }
}

static void test_resident_on_gpu(void **) {
    if (!cw::driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        printf("# no conditional nodes: the resident loop not exercised\n");
        return;
    }
    cw::context ctx = cw::context::create(0);
    cw::module mod = cw::module::load_image(cw_test_kernels_fatbin);
    cw::kernel apply = mod.get_kernel("cw_res_apply");
    apply.preload(ctx); // before any loop runs
    assert_true(apply.param_count(ctx) == 4 || apply.param_count(ctx) == -1); // asked before any capture
    assert_non_null(strstr(cw::resident_device_header(), "cw_resident_ctl"));
    cw::stream s = cw::stream::create(ctx);
    cw::host_buffer out = cw::host_buffer::alloc(ctx, 64);
    cw::host_buffer stage = cw::host_buffer::alloc(ctx, 64);
    volatile unsigned *o = out.as<volatile unsigned>();
    unsigned long long *no_log = nullptr;
    const unsigned long long no_cap = 0;

    cw_resident_settings rs = cw::defaults<cw_resident_settings>();
    rs.input_slots = 2;
    rs.input_bytes = sizeof(unsigned);
    rs.sync_with_host = 1;
    rs.sleep_interval_us = 50;
    {
        // a workload captured into a graph
        cw::resident r = cw::resident::create(ctx, &rs);
        assert_ptr_equal(r.context().get(), ctx.get());
        assert_int_equal(r.settings().input_slots, 2);
        assert_int_equal(r.input(1) - r.input(0), sizeof(unsigned));
        const unsigned long long ctl = r.ctl();
        cw::graph g;
        {
            cw::capture cap(s, CW_CAPTURE_THREAD_LOCAL);
            apply.launch(s, cw::dims(1), cw::dims(32), ctl, out.as<unsigned>(), no_log, no_cap);
            g = cap.end();
        }
        assert_int_equal(g.info().nodes, 1);
        r.set_workload(g);
        r.build();
        assert_int_equal(r.state(), CW_RESIDENT_NOT_LAUNCHED);
        r.launch();
        assert_int_equal(r.state(), CW_RESIDENT_RUNNING);
        serve(r, s, stage, o, 200);
        cw_resident_info st = r.info();
        assert_int_equal(st.completed, 200);
        assert_int_equal(st.iterations, 200);
        printf("# resident (captured graph): 200 requests, per iteration min %.2f us, median %.2f us\n",
               st.iter_min_ns / 1e3, st.iter_median_ns / 1e3);
        r.tear_down(2000);
        assert_int_equal(r.state(), CW_RESIDENT_STOPPED);
        assert_int_equal(r.info().exit, CW_RESIDENT_EXIT_TEAR_DOWN);
    }
    {
        // the same workload enqueued by a C++ function at each build
        cw::resident r = cw::resident::create(ctx, &rs);
        const unsigned long long ctl = r.ctl();
        int calls = 0;
        auto workload = [&](cw::stream &cs) {
            calls++;
            apply.launch(cs, cw::dims(1), cw::dims(32), ctl, out.as<unsigned>(), no_log, no_cap);
        };
        cw_resident_settings c = r.settings();
        c.unroll = 4;
        r.configure(c);
        r.set_workload_fn(workload);
        r.launch();
        assert_int_equal(calls, 5); // once per copy of the iteration, and once for gate AUTO's look
        serve(r, s, stage, o, 50);
        r.tear_down(2000);
        assert_int_equal(r.info().completed, 50);
    }
    {
        // fused persistent mode: the same work as one stage of a compiled persistent kernel
        static const char *stages =
            "#include \"cuweave/resident_device.h\"\n"
            "extern \"C\" __device__ void apply(cw_resident_ctl *ctl, void *user) {\n"
            "    if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
            "        const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
            "        ((unsigned *)user)[0] = in[0] * 3u + 1u;\n"
            "        ((unsigned *)user)[1] = (unsigned)cw_resident_sequence(ctl);\n"
            "    }\n"
            "}\n";
        const char *names[] = {"apply"};
        cw::resident r = cw::resident::create(ctx, &rs);
        cw_resident_fused f{};
        f.source = stages;
        f.stages = names;
        f.stage_count = 1;
        f.grid_blocks = 2;
        f.block_threads = 64;
        f.user = (cw_devptr)(uintptr_t)out.as<unsigned>();
        r.set_fused(f);
        assert_int_equal(r.info().fused, 1);
        assert_int_equal(r.info().grid_blocks, 2);
        r.launch();
        serve(r, s, stage, o, 100);
        r.tear_down(2000);
        assert_int_equal(r.info().completed, 100);
        r.set_fused(nullptr); // a graph loop again
        assert_int_equal(r.info().fused, 0);
    }
    printf("# C++ wrappers: resident loops (captured graph, C++ capture function, fused) used on the GPU\n");
}

int main() {
    cw_status st = cw_init();
    int n = 0;
    if (st != CW_SUCCESS || cw_device_count(&n) != CW_SUCCESS || n == 0) {
        printf("SKIP: no usable GPU: %s\n", cw_last_error()->message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrappers_on_gpu),
        cmocka_unit_test(test_more_wrappers_on_gpu),
        cmocka_unit_test(test_pipeline_on_gpu),
        cmocka_unit_test(test_resident_on_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
