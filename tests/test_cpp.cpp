// The C++ wrappers (include/cuweave/cuweave.hpp) against the fake driver
// (tests/fake_cuda.c, path in argv[1]). Built twice: with exceptions
// (test_cpp) and with -fno-exceptions (test_cpp_noexcept), where calls
// return cw::result / cw::status. Checks moves (self-move included),
// ownership of borrowed handles, leases, errors in both modes, and that every
// handle the wrappers create is destroyed (the fake's live counts).
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
}

#include "cuweave/cuweave.hpp"

#ifdef CW_HPP_NO_EXCEPTIONS
// In this mode every call returns a result or status; take the value.
#define VAL(expr) take((expr))
template <class T>
static T take(cw::result<T> &&r) {
    if (!r.ok()) fail_msg("call failed: %s (%s)", cw_status_name(r.code()), cw_last_error_message());
    return std::move(r).value();
}
#define OK(expr)                                                                                         \
    do {                                                                                                 \
        cw::status s_ = (expr);                                                                          \
        if (!s_.ok()) fail_msg("%s failed: %s (%s)", #expr, s_.name(), cw_last_error_message());        \
    } while (0)
#else
#define VAL(expr) (expr)
#define OK(expr) (expr)
#endif

static long (*fake_live)(const char *kind);

static long live_streams() { return fake_live("stream"); }
static long live_events() { return fake_live("event"); }

static void test_moves_and_ownership(void **) {
    const long s0 = live_streams();
    {
        cw::context ctx = VAL(cw::context::create(0));
        assert_true(ctx.owns());
        assert_int_equal(ctx.device(), 0);
        assert_int_equal(ctx.kind(), CW_CONTEXT_PRIMARY);

        cw::stream a = VAL(cw::stream::create(ctx));
        cw::stream b = VAL(cw::stream::create(ctx));
        assert_int_equal(live_streams(), s0 + 2);
        cw_stream *raw_a = a.get();

        // move construction empties the source
        cw::stream c(std::move(a));
        assert_null(a.get());
        assert_false(a.owns());
        assert_ptr_equal(c.get(), raw_a);

        // move assignment destroys what the target held
        c = std::move(b);
        assert_int_equal(live_streams(), s0 + 1);
        assert_null(b.get());

        // self-move leaves it intact (the bug cuda-api-wrappers had)
        cw::stream &alias = c;
        c = std::move(alias);
        assert_non_null(c.get());
        assert_true(c.owns());
        assert_int_equal(live_streams(), s0 + 1);

        // a borrowed wrapper never destroys
        {
            cw::stream borrowed = cw::stream::wrap(c.get());
            assert_false(borrowed.owns());
        }
        assert_int_equal(live_streams(), s0 + 1);
        OK(c.synchronize());

        // release hands the handle over
        cw_stream *mine = c.release();
        assert_null(c.get());
        cw_stream_destroy(&mine);
        assert_int_equal(live_streams(), s0);
    }
    assert_int_equal(live_streams(), s0);
}

static void test_lease_returns_stream(void **) {
    cw::context ctx = VAL(cw::context::create(0));
    cw_stream_pool_settings set;
    cw_stream_pool_settings_default(&set);
    set.max_streams = 2;
    cw::stream_pool pool = VAL(cw::stream_pool::create(ctx, &set));
    {
        cw::lease l1 = VAL(pool.acquire());
        cw::lease l2 = VAL(pool.acquire());
        assert_int_equal(pool.stats().leased, 2);
        assert_true(l1.get().native() != nullptr);
        cw::lease moved(std::move(l1));
        assert_false(static_cast<bool>(l1));
        assert_int_equal(pool.stats().leased, 2);
        moved = std::move(l2);  // gives back what `moved` held
        assert_int_equal(pool.stats().leased, 1);
    }
    assert_int_equal(pool.stats().leased, 0);
    assert_int_equal(pool.stats().idle, 2);
}

static void test_future_and_timer(void **) {
    const long e0 = live_events();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        cw::timer t = VAL(cw::timer::create(ctx));
        OK(t.start(s));
        OK(t.stop(s));
        float ms = VAL(t.elapsed_ms());
        assert_true(ms > 0.0f);
        for (cw_future_kind k : {CW_FUTURE_HOST_FUNC, CW_FUTURE_WRITE_VALUE}) {
            cw::future f = VAL(cw::future::create(s, k));
            OK(f.wait(5000000));
            assert_true(VAL(f.ready()));
            OK(f.rearm(s));
            OK(f.wait(5000000));
        }
        assert_true(VAL(s.done()));
    }
    // every event the wrappers' objects took went back (the context's pool
    // is torn down with the context)
    assert_int_equal(live_events(), e0);
}

// Graphs: capture (RAII, also an abandoned one), instantiate, launch,
// update, moves; every graph and exec goes (the fake's live counts).
static void test_graphs(void **) {
    const long g0 = fake_live("graph"), e0 = fake_live("exec");
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        cw::graph g;
        {
            cw::capture cap(s);
            assert_int_equal(cap.began(), CW_SUCCESS);
            g = VAL(cap.end());
        }
        assert_true(g.owns());
        assert_int_equal(g.info().nodes, 0);
        {
            cw::capture dropped(s);  // never ended: the destructor ends and drops it
            assert_int_equal(dropped.began(), CW_SUCCESS);
        }
        assert_int_equal(fake_live("graph"), g0 + 1);
        cw::graph parent = VAL(cw::graph::create(ctx));
        cw_graph_node *first = VAL(parent.add_child(g));
        cw_graph_node *join = VAL(parent.add_empty(&first, 1));
        assert_ptr_equal(parent.sink(), join);
        cw::graph_exec e = VAL(cw::graph_exec::create(parent));
        OK(e.upload(s));
        OK(e.launch(s));
        OK(s.synchronize());
        assert_int_equal(e.stats().launches, 1);
        cw_graph_update_info ui = VAL(e.update(parent));
        assert_int_equal(ui.kind, CW_GRAPH_UPDATED_IN_PLACE);
        // moves
        cw::graph_exec e2(std::move(e));
        assert_null(e.get());
        cw::graph_exec &alias = e2;
        e2 = std::move(alias);
        assert_non_null(e2.get());
        g = std::move(parent);  // destroys the first graph
        assert_int_equal(fake_live("graph"), g0 + 1);
        assert_int_equal(fake_live("exec"), e0 + 1);
    }
    assert_int_equal(fake_live("graph"), g0);
    assert_int_equal(fake_live("exec"), e0);
}

// Programs through the fake NVRTC: compile, the memory cache, a compile
// error in both modes; modules need the library API the fake driver lacks.
static void test_programs(void **) {
    cw::context ctx = VAL(cw::context::create(0));
    const char *src = "extern \"C\" __global__ void cpp_k(int *p) { *p = 1; }\n";
    cw::program p = VAL(cw::program::compile(ctx, src));
    assert_true(p.owns());
    assert_int_equal(p.info().arch, 90);
    cw::program q = VAL(cw::program::compile(ctx, src));
    assert_int_equal(q.info().source, CW_FROM_MEMORY);
    assert_string_equal(q.info().key, p.info().key);
    cw::program moved(std::move(q));
    assert_null(q.get());
    assert_non_null(moved.get());
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
        cw::program bad = cw::program::compile(ctx, "#error nope\n");
        fail_msg("a compile error did not throw");
    } catch (const cw::error &e) {
        assert_int_equal(e.status(), CW_ERROR_COMPILE);
        assert_non_null(strstr(e.what(), "nope"));
    }
    try {
        cw::module m = cw::module::load(p);
        fail_msg("a module loaded without the library API");
    } catch (const cw::error &e) {
        assert_int_equal(e.status(), CW_ERROR_NOT_SUPPORTED);
    }
#else
    cw::result<cw::program> bad = cw::program::compile(ctx, "#error nope\n");
    assert_false(bad.ok());
    assert_int_equal(bad.code(), CW_ERROR_COMPILE);
    assert_non_null(strstr(cw_compile_log(), "nope"));
    cw::result<cw::module> m = cw::module::load(p);
    assert_int_equal(m.code(), CW_ERROR_NOT_SUPPORTED);
#endif
}

static void test_errors(void **) {
    cw::context ctx = VAL(cw::context::create(0));
    cw_stream_settings bad;
    cw_stream_settings_default(&bad);
    bad.flags = 7;
#ifdef CW_HPP_NO_EXCEPTIONS
    cw::result<cw::stream> r = cw::stream::create(ctx, &bad);
    assert_false(r.ok());
    assert_int_equal(r.code(), CW_ERROR_INVALID_ARGUMENT);
    assert_null(r.value().get());
    cw::status st = cw::context::wrap(nullptr).synchronize();
    assert_int_equal(st.code(), CW_ERROR_INVALID_ARGUMENT);
#else
    bool thrown = false;
    try {
        cw::stream s = cw::stream::create(ctx, &bad);
        (void)s;
    } catch (const cw::error &e) {
        thrown = true;
        assert_int_equal(e.status(), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(e.what(), "cw_stream_create"));
    }
    assert_true(thrown);
    thrown = false;
    try {
        cw::context::wrap(nullptr).synchronize();
    } catch (const cw::error &e) {
        thrown = e.status() == CW_ERROR_INVALID_ARGUMENT;
    }
    assert_true(thrown);
#endif
}

// The fake cannot make green contexts: creating a set fails cleanly with
// the driver's answer, and an empty partition_set wrapper destroys nothing.
static void test_partition_set_error(void **) {
    const unsigned sizes[] = {16};
#ifdef CW_HPP_NO_EXCEPTIONS
    cw::result<cw::partition_set> r = cw::partition_set::create(0, sizes, 1, -1);
    assert_int_equal(r.code(), CW_ERROR_NOT_SUPPORTED);
#else
    cw_status got = CW_SUCCESS;
    try {
        cw::partition_set p = cw::partition_set::create(0, sizes, 1, -1);
        (void)p;
    } catch (const cw::error &e) {
        got = e.status();
    }
    assert_int_equal(got, CW_ERROR_NOT_SUPPORTED);
#endif
    cw::partition_set empty;
    assert_false(static_cast<bool>(empty));
}

// The resident loop's wrapper: the fake (run here without its conditional
// nodes) cannot make one, and says so; an empty wrapper destroys nothing.
// (tests/test_resident_cpu.c drives the C API with the fake's conditional
// nodes on; test_gpu_cpp uses the wrapper on the GPU.)
static void test_resident_error(void **) {
    cw::context ctx = VAL(cw::context::create(0));
#ifdef CW_HPP_NO_EXCEPTIONS
    cw::result<cw::resident> r = cw::resident::create(ctx);
    assert_int_equal(r.code(), CW_ERROR_NOT_SUPPORTED);
#else
    cw_status got = CW_SUCCESS;
    try {
        cw::resident r = cw::resident::create(ctx);
        (void)r;
    } catch (const cw::error &e) {
        got = e.status();
    }
    assert_int_equal(got, CW_ERROR_NOT_SUPPORTED);
#endif
    cw::resident empty;
    assert_false(static_cast<bool>(empty));
    assert_false(empty.is_launched());
}

// Operators written in C++: a source allocating and emitting a buffer on its
// internal stream, and a sink checking what it got; destructors run with the
// pipeline; an error from compute (a throw, or a status) stops the run and
// names the operator.
static int g_ops_alive;
struct source_op : cw::operator_base {
    int *emitted;
    explicit source_op(int *e) : emitted(e) { g_ops_alive++; }
    ~source_op() override { g_ops_alive--; }
    void setup(cw::op_spec &spec) override { spec.output("out"); }
    cw::status compute(cw::io &io) override {
        cw::stream s = VAL(io.receive_stream());
        cw::buffer b = VAL(io.alloc(64));
        assert_true(b.size() == 64);
        OK(io.emit("out", b, reinterpret_cast<void *>(static_cast<uintptr_t>(io.iteration() + 1))));
        (void)s;
        (*emitted)++;
        return cw::status();
    }
};
struct sink_op : cw::operator_base {
    int *seen;
    int fail_at;
    sink_op(int *s, int f) : seen(s), fail_at(f) { g_ops_alive++; }
    ~sink_op() override { g_ops_alive--; }
    void setup(cw::op_spec &spec) override { spec.input("in").input("opt", CW_PORT_OPTIONAL); }
    cw::status compute(cw::io &io) override {
        cw::message m = VAL(io.receive("in"));
        assert_false(io.has("opt"));
        assert_true(static_cast<bool>(m.data));
        assert_false(m.data.owns()); // borrowed
        assert_true(m.producer.get() != nullptr);
        cw::stream s = VAL(io.receive_stream("in"));
        assert_true(s.get() != m.producer.get()); // its own stream, ordered behind the producer's
        if (reinterpret_cast<uintptr_t>(m.value) != io.iteration() + 1) return cw::status(CW_ERROR_INTERNAL);
        (*seen)++;
        if (fail_at && (int)io.iteration() + 1 == fail_at) {
#ifndef CW_HPP_NO_EXCEPTIONS
            throw cw::error(CW_ERROR_NOT_PERMITTED, "sink refused");
#else
            return cw::status(CW_ERROR_NOT_PERMITTED);
#endif
        }
        return cw::status();
    }
};

static void test_operators(void **) {
    const long s0 = live_streams();
    {
        cw::context ctx = VAL(cw::context::create(0));
        int emitted = 0, seen = 0;
        {
            cw::pipeline p = VAL(cw::pipeline::create(ctx));
            cw_operator *src = VAL(p.add("src", std::unique_ptr<cw::operator_base>(new source_op(&emitted))));
            assert_string_equal(cw_operator_name(src), "src");
            VAL(p.emplace<sink_op>("sink", &seen, 0));
            assert_int_equal(g_ops_alive, 2);
            OK(p.connect("src", "out", "sink", "in"));
            OK(p.run(3));
            assert_int_equal(emitted, 3);
            assert_int_equal(seen, 3);
            assert_int_equal(p.stats().iterations, 3);
            // a duplicate name: refused, and the operator is deleted at once
#ifdef CW_HPP_NO_EXCEPTIONS
            assert_int_equal(p.emplace<sink_op>("sink", &seen, 0).code(), CW_ERROR_INVALID_ARGUMENT);
#else
            cw_status got = CW_SUCCESS;
            try {
                p.emplace<sink_op>("sink", &seen, 0);
            } catch (const cw::error &e) {
                got = e.status();
            }
            assert_int_equal(got, CW_ERROR_INVALID_ARGUMENT);
#endif
            assert_int_equal(g_ops_alive, 2);
        }
        assert_int_equal(g_ops_alive, 0);
        {
            cw::pipeline p = VAL(cw::pipeline::create(ctx));
            VAL(p.emplace<source_op>("src", &emitted));
            VAL(p.emplace<sink_op>("sink", &seen, 2));
            OK(p.connect("src", "out", "sink", "in"));
#ifdef CW_HPP_NO_EXCEPTIONS
            assert_int_equal(p.run(5).code(), CW_ERROR_NOT_PERMITTED);
#else
            cw_status got = CW_SUCCESS;
            try {
                p.run(5);
            } catch (const cw::error &e) {
                got = e.status();
                assert_non_null(strstr(e.what(), "operator 'sink' (compute)"));
            }
            assert_int_equal(got, CW_ERROR_NOT_PERMITTED);
#endif
            assert_int_equal(p.stats().iterations, 1);
        }
        assert_int_equal(g_ops_alive, 0);
    }
    assert_int_equal(live_streams(), s0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("SKIP: usage: %s PATH/libfakecuda.so\n", argv[0]);
        return 77;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    unsetenv("CUWEAVE_SERIALIZE");
    // the fake NVRTC beside the fake driver; no disk cache (never the user's)
    std::string nvrtc = argv[1];
    nvrtc = nvrtc.substr(0, nvrtc.rfind('/') + 1) + "libfakenvrtc.so";
    setenv("CUWEAVE_LIBNVRTC", nvrtc.c_str(), 1);
    setenv("CUWEAVE_CACHE_DIR", "off", 1);
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: the fake driver did not load: %s\n", cw_last_error_message());
        return 1;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    if (!lib || !(*(void **)&fake_live = dlsym(lib, "fake_cuda_live"))) {
        printf("FAIL: fake_cuda_live not found in %s\n", argv[1]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves_and_ownership),
        cmocka_unit_test(test_lease_returns_stream),
        cmocka_unit_test(test_future_and_timer),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_programs),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_partition_set_error),
        cmocka_unit_test(test_resident_error),
        cmocka_unit_test(test_operators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
