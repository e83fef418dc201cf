/* SPDX-License-Identifier: BSD-2-Clause */
// The C++ wrappers (include/cuweave/cuweave.hpp) against the fake driver
// (tests/fake_cuda.c, path in argv[1]). Built twice: with exceptions
// (test_cpp) and with -fno-exceptions (test_cpp_noexcept), where calls
// return cw::result / cw::status. Checks at compile time that every wrapper
// is move-only with moves that never throw (and what it costs); at run time
// moves (self-move included), ownership of borrowed handles, leases, fork
// scopes, errors in both modes, every wrapper of the C API once where the
// fake can serve it, and that every handle the wrappers create is destroyed
// (the fake's live counts: streams, events, device and host memory, graphs,
// execs, libraries, kernels, memory pools, primary-context retains).
//
// Two groups, two processes: the first runs with the fake's optional
// features off (a driver without conditional nodes or the library API:
// the errors the wrappers report then); a child forked before any CUDA call
// runs the second with FAKE_CUDA_FEATURES=all (modules, kernels, the
// resident loop, resident pipelines).
#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
    if (!r.ok()) fail_msg("call failed: %s (%s)", cw_status_name(r.code()), cw_last_error()->message);
    return std::move(r).value();
}
#define OK(expr)                                                                                         \
    do {                                                                                                 \
        cw::status s_ = (expr);                                                                          \
        if (!s_.ok()) fail_msg("%s failed: %s (%s)", #expr, s_.name(), cw_last_error()->message);        \
    } while (0)
#else
#define VAL(expr) (expr)
#define OK(expr) (expr)
#endif

static long (*fake_live)(const char *kind);
static int (*fake_drain)(int timeout_ms);
static void (*fake_hold)(int on);
static bool g_features; // this process runs the group with the fake's optional features on

// What the fake has alive: a snapshot, and a check that nothing was left.
static const char *const k_kinds[] = {"stream", "event",   "hostmem", "devmem",  "graph",  "body",
                                      "exec",   "library", "kernel",  "mempool", "primary", "orphans"};
enum { NKINDS = sizeof k_kinds / sizeof k_kinds[0] };
struct live_counts {
    long v[NKINDS];
};
static live_counts snapshot() {
    live_counts c;
    for (int i = 0; i < NKINDS; i++) c.v[i] = fake_live(k_kinds[i]);
    return c;
}
// Every handle made since `before` was destroyed (work the frees wait for
// has run first: the fake completes it on its own thread).
static void expect_no_leaks(const live_counts &before, const char *what) {
    assert_int_equal(fake_drain(5000), 1);
    live_counts now = snapshot();
    int bad = 0;
    for (int i = 0; i < NKINDS; i++)
        if (now.v[i] != before.v[i]) {
            printf("# leak after %s: %s %ld -> %ld\n", what, k_kinds[i], before.v[i], now.v[i]);
            bad++;
        }
    assert_int_equal(bad, 0);
}

// Both modes: the status a call failed with (CW_SUCCESS when it did not).
#ifdef CW_HPP_NO_EXCEPTIONS
#define STATUS_OF(expr) ((expr).code())
#else
#define STATUS_OF(expr) status_of([&]() { (void)(expr); })
template <class F>
static cw_status status_of(F f) {
    try {
        f();
    } catch (const cw::error &e) {
        return e.status();
    }
    return CW_SUCCESS;
}
#endif

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
            cw::stream borrowed = cw::stream::borrow(c.get());
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

// wrap means what it means in C: a cw_context / cw_stream that the wrapper
// owns around a CUDA handle the caller keeps (the CUDA handle is never
// destroyed). borrow takes a cuweave handle without owning it, for every
// owning wrapper.
template <class T, class = void, class... A>
struct has_wrap : std::false_type {};
template <class T, class... A>
struct has_wrap<T, decltype((void)T::wrap(std::declval<A>()...)), A...> : std::true_type {};
static_assert(has_wrap<cw::context, void, CUcontext>::value && !has_wrap<cw::context, void, cw_context *>::value,
              "context::wrap takes a CUcontext, never a cw_context");
static_assert(has_wrap<cw::stream, void, const cw::context &, CUstream>::value &&
                  !has_wrap<cw::stream, void, cw_stream *>::value,
              "stream::wrap takes a context and a CUstream, never a cw_stream");
static_assert(!has_wrap<cw::graph, void, cw_graph *>::value && !has_wrap<cw::buffer, void, cw_buffer *>::value &&
                  !has_wrap<cw::device_group, void, cw_device_group *>::value &&
                  !has_wrap<cw::comm, void, cw_comm *>::value,
              "no wrap of a cuweave handle");
template <class T, class H>
constexpr bool borrows() {
    return std::is_same<decltype(T::borrow(std::declval<H *>())), T>::value && noexcept(T::borrow(nullptr));
}
static_assert(borrows<cw::context, cw_context>() && borrows<cw::stream, cw_stream>() &&
                  borrows<cw::stream_pool, cw_stream_pool>() && borrows<cw::timer, cw_timer>() &&
                  borrows<cw::future, cw_future>() && borrows<cw::partition_group, cw_partition_group>() &&
                  borrows<cw::graph, cw_graph>() && borrows<cw::graph_exec, cw_graph_exec>() &&
                  borrows<cw::program, cw_program>() && borrows<cw::module, cw_module>() &&
                  borrows<cw::resident, cw_resident>() && borrows<cw::buffer, cw_buffer>() &&
                  borrows<cw::pipeline, cw_pipeline>() && borrows<cw::device_group, cw_device_group>() &&
                  borrows<cw::comm, cw_comm>(),
              "every owning wrapper borrows its C handle");

static void test_wrap_and_borrow(void **) {
    const long s0 = live_streams();
    {
        cw::context ctx = VAL(cw::context::create(0));
        // a CUcontext the caller keeps (here the primary's), adopted
        cw::context outer = VAL(cw::context::wrap(ctx.native()));
        assert_true(outer.owns());
        assert_true(outer.get() != ctx.get());
        assert_int_equal(outer.kind(), CW_CONTEXT_EXTERNAL);
        assert_ptr_equal(outer.native(), ctx.native());
        assert_int_equal(STATUS_OF(cw::context::wrap(nullptr)), CW_ERROR_INVALID_ARGUMENT);

        // a CUstream the caller keeps, adopted; and the legacy stream
        cw::stream mine = VAL(cw::stream::create(ctx));
        assert_int_equal(live_streams(), s0 + 1);
        {
            cw::stream w = VAL(cw::stream::wrap(ctx, mine.native()));
            assert_true(w.owns());
            assert_true(w.get() != mine.get());
            assert_ptr_equal(w.native(), mine.native());
            assert_int_equal(VAL(w.info()).owned, 0);
            OK(w.synchronize());
            cw::stream legacy = VAL(cw::stream::wrap(outer, nullptr));
            assert_int_equal(VAL(legacy.info()).is_null, 1);
            assert_ptr_equal(legacy.context().get(), outer.get());
            OK(legacy.wait(w));
        } // the wrappers go, the CUstream stays
        assert_int_equal(live_streams(), s0 + 1);
        OK(mine.synchronize());

        // borrowed: never destroyed
        {
            cw::stream b = cw::stream::borrow(mine.get());
            assert_false(b.owns());
            assert_ptr_equal(b.get(), mine.get());
            cw::context bc = cw::context::borrow(ctx.get());
            assert_false(bc.owns());
            cw::stream moved(std::move(b));
            assert_false(moved.owns());
        }
        assert_int_equal(live_streams(), s0 + 1);
        OK(mine.synchronize());
        OK(ctx.synchronize());
    }
    assert_int_equal(live_streams(), s0);
    cw::clear_error();
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

// cw::trace: GPU and host spans, a pipeline attached and detached, the
// file written with every span; the events go back with the trace.
static void test_trace(void **) {
    const long e0 = live_events();
    char path[] = "/tmp/cw-cpp-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        cw::trace t = VAL(cw::trace::create());
        OK(t.name_stream(s, "gpu work"));
        OK(t.name_thread("main"));
        OK(t.host_begin("host work"));
        OK(t.begin(s, "span"));
        OK(t.end(s));
        OK(t.host_end());
        cw::pipeline p = VAL(cw::pipeline::create(ctx));
        OK(t.attach(p));
        OK(cw::trace::detach(p));
        cw_trace_info i = VAL(t.info());
        assert_int_equal(i.spans, 2);
        assert_int_equal(i.contexts, 1);
        OK(t.write(path));
        cw_resident_settings rs = cw::defaults<cw_resident_settings>();
        rs.trace = 1;
        cw::resident r = VAL(cw::resident::create(ctx, &rs));
        assert_int_equal(STATUS_OF(t.record_resident(r)), CW_ERROR_INVALID_STATE);  // not built yet
    }
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(text, "\"name\":\"span\",\"cat\":\"gpu\""));
    assert_non_null(strstr(text, "\"name\":\"host work\",\"cat\":\"host\""));
    assert_non_null(strstr(text, "{\"name\":\"gpu work\"}"));
    assert_int_equal(live_events(), e0);
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
        assert_int_equal(e.info().launches, 1);
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
    assert_non_null(strstr(cw::compile_log(), "nope"));
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
    cw::status st = cw::context::borrow(nullptr).synchronize();
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
        cw::context::borrow(nullptr).synchronize();
    } catch (const cw::error &e) {
        thrown = e.status() == CW_ERROR_INVALID_ARGUMENT;
    }
    assert_true(thrown);
#endif
}

// The fake cannot make green contexts: creating a group fails cleanly with
// the driver's answer, and an empty partition_group wrapper destroys nothing.
static void test_partition_set_error(void **) {
    const unsigned sizes[] = {16};
#ifdef CW_HPP_NO_EXCEPTIONS
    cw::result<cw::partition_group> r = cw::partition_group::create(0, sizes, 1, -1);
    assert_int_equal(r.code(), CW_ERROR_NOT_SUPPORTED);
#else
    cw_status got = CW_SUCCESS;
    try {
        cw::partition_group p = cw::partition_group::create(0, sizes, 1, -1);
        (void)p;
    } catch (const cw::error &e) {
        got = e.status();
    }
    assert_int_equal(got, CW_ERROR_NOT_SUPPORTED);
#endif
    cw::partition_group empty;
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
            assert_ptr_equal(VAL(p.find("src")), src);
            VAL(p.emplace<sink_op>("sink", &seen, 0));
            assert_int_equal(g_ops_alive, 2);
            OK(p.connect("src", "out", "sink", "in"));
            OK(p.run(3));
            assert_int_equal(emitted, 3);
            assert_int_equal(seen, 3);
            assert_int_equal(p.info().iterations, 3);
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
            assert_int_equal(p.info().iterations, 1);
        }
        assert_int_equal(g_ops_alive, 0);
    }
    assert_int_equal(live_streams(), s0);
}

// ---- compile time ------------------------------------------------------------

// An owning wrapper: move-only, moves and destruction never throw, default
// constructible (empty).
template <class T>
constexpr bool move_only_nothrow() {
    return !std::is_copy_constructible<T>::value && !std::is_copy_assignable<T>::value &&
           std::is_nothrow_move_constructible<T>::value && std::is_nothrow_move_assignable<T>::value &&
           std::is_nothrow_destructible<T>::value && std::is_nothrow_default_constructible<T>::value;
}
static_assert(move_only_nothrow<cw::context>(), "context");
static_assert(move_only_nothrow<cw::partition_group>(), "partition_group");
static_assert(move_only_nothrow<cw::stream>(), "stream");
static_assert(move_only_nothrow<cw::stream_pool>(), "stream_pool");
static_assert(move_only_nothrow<cw::lease>(), "lease");
static_assert(move_only_nothrow<cw::forked>(), "fork");
static_assert(move_only_nothrow<cw::timer>(), "timer");
static_assert(move_only_nothrow<cw::future>(), "future");
static_assert(move_only_nothrow<cw::graph>(), "graph");
static_assert(move_only_nothrow<cw::graph_exec>(), "graph_exec");
static_assert(move_only_nothrow<cw::resident>(), "resident");
static_assert(move_only_nothrow<cw::program>(), "program");
static_assert(move_only_nothrow<cw::module>(), "module");
static_assert(move_only_nothrow<cw::buffer>(), "buffer");
static_assert(move_only_nothrow<cw::host_buffer>(), "host_buffer");
static_assert(move_only_nothrow<cw::pipeline>(), "pipeline");
static_assert(move_only_nothrow<cw::device_group>(), "device_group");
static_assert(move_only_nothrow<cw::comm>(), "comm");
static_assert(move_only_nothrow<cw::comm_group>(), "comm_group");
// A capture is tied to its stream: neither copied nor moved.
static_assert(!std::is_copy_constructible<cw::capture>::value && !std::is_move_constructible<cw::capture>::value &&
                  !std::is_copy_assignable<cw::capture>::value && !std::is_move_assignable<cw::capture>::value,
              "capture stays where it was made");
// The handle plus ownership, nothing more.
struct handle_and_flag {
    void *h;
    bool owned;
};
template <class T>
constexpr bool handle_sized() {
    return sizeof(T) == sizeof(handle_and_flag);
}
static_assert(handle_sized<cw::context>() && handle_sized<cw::partition_group>() && handle_sized<cw::stream>() &&
                  handle_sized<cw::stream_pool>() && handle_sized<cw::timer>() && handle_sized<cw::future>() &&
                  handle_sized<cw::graph>() && handle_sized<cw::graph_exec>() && handle_sized<cw::resident>() &&
                  handle_sized<cw::program>() && handle_sized<cw::module>() && handle_sized<cw::buffer>() &&
                  handle_sized<cw::pipeline>() && handle_sized<cw::device_group>() && handle_sized<cw::comm>(),
              "owning wrappers are the handle plus a flag");
static_assert(sizeof(cw::comm_group) == sizeof(bool), "a group is whether it is open");
static_assert(sizeof(cw::lease) == 2 * sizeof(void *) && sizeof(cw::forked) == 2 * sizeof(void *),
              "a lease is its pool and stream, a fork its parent and child");
static_assert(sizeof(cw::host_buffer) == 2 * sizeof(void *) + sizeof(size_t), "host memory: context, pointer, size");
static_assert(sizeof(cw::io) == sizeof(void *), "io is the C handle");
// Values: copied freely.
static_assert(std::is_trivially_copyable<cw::io>::value && std::is_copy_constructible<cw::kernel>::value &&
                  std::is_trivially_copyable<cw::dims>::value && std::is_trivially_copyable<cw::priority_range>::value,
              "io, kernel, dims and priority_range are values");
// A message holds borrowed wrappers: it moves, it is not copied.
static_assert(!std::is_copy_constructible<cw::message>::value && std::is_nothrow_move_constructible<cw::message>::value,
              "message is move-only");
static_assert(std::is_nothrow_move_constructible<cw::result<cw::stream>>::value &&
                  std::is_nothrow_copy_constructible<cw::status>::value,
              "results and statuses never throw");
// What a call returns in each mode.
#ifdef CW_HPP_NO_EXCEPTIONS
static_assert(std::is_same<decltype(cw::context::create(0)), cw::result<cw::context>>::value &&
                  std::is_same<decltype(cw::init()), cw::status>::value,
              "no exceptions: results and statuses");
static_assert(std::is_same<decltype(std::declval<const cw::resident &>().stage_begin(
                                        std::declval<const cw::stream &>(), "x")),
                           cw::result<uint32_t>>::value,
              "no exceptions: a stage number in a result");
#else
static_assert(std::is_same<decltype(cw::context::create(0)), cw::context>::value &&
                  std::is_same<decltype(cw::init()), void>::value &&
                  std::is_base_of<std::exception, cw::error>::value,
              "exceptions: values, and cw::error");
static_assert(std::is_same<decltype(std::declval<const cw::resident &>().stage_begin(
                                        std::declval<const cw::stream &>(), "x")),
                           uint32_t>::value,
              "exceptions: the stage number");
#endif
static_assert(std::is_same<decltype(cw::defaults<cw_pipeline_settings>()), cw_pipeline_settings>::value,
              "defaults give the C struct");
// Each mode's definitions in an inline namespace of their own (test_cpp_modes
// links both into one program); what both define alike is shared.
#ifdef CW_HPP_NO_EXCEPTIONS
static_assert(std::is_same<cw::stream, cw::v0_3::noexc::stream>::value &&
                  std::is_same<cw::kernel, cw::v0_3::noexc::kernel>::value,
              "no exceptions: cw::v0_3::noexc");
#else
static_assert(std::is_same<cw::stream, cw::v0_3::exc::stream>::value &&
                  std::is_same<cw::error, cw::v0_3::exc::error>::value,
              "exceptions: cw::v0_3::exc");
#endif
static_assert(std::is_same<cw::status, cw::v0_3::status>::value &&
                  std::is_same<cw::result<int>, cw::v0_3::result<int>>::value &&
                  std::is_same<cw::dims, cw::v0_3::dims>::value &&
                  std::is_same<cw::priority_range, cw::v0_3::priority_range>::value,
              "shared by both modes");
static_assert(CW_VERSION_MAJOR == 0 && CW_VERSION_MINOR == 3,
              "a new release: rename the inline namespace v0_3 of the C++ wrappers if they changed, and this check");

static void test_compile_time(void **) {
    // Everything here was checked by the compiler (static_asserts above);
    // the settings defaults are what the C calls fill in.
    cw_stream_settings a = cw::defaults<cw_stream_settings>(), b;
    cw_stream_settings_default(&b);
    assert_memory_equal(&a, &b, sizeof a);
    cw_resident_settings r = cw::defaults<cw_resident_settings>();
    assert_int_equal(r.unroll, 16);
    assert_int_equal(cw::defaults<cw_pipeline_settings>().max_in_flight, 4);
    assert_int_equal(cw::defaults<cw_cond_settings>().type, CW_COND_WHILE);
    assert_int_equal(cw::defaults<cw_launch_config>().grid[0], 1);
    assert_int_equal(cw::defaults<cw_stream_pool_settings>().mode, CW_POOL_LEASE);
    assert_int_equal(cw::defaults<cw_program_settings>().cache, CW_CACHE_DEFAULT);
    assert_int_equal(cw::defaults<cw_jit_cache_settings>().memory, 1);
    assert_int_equal(cw::defaults<cw_port_settings>().flags, 0);
    assert_int_equal(cw::defaults<cw_operator_settings>().resident, 0);
}

// ---- the library: versions, devices, errors, the log ---------------------------

struct log_sink {
    std::vector<std::string> messages;
    cw_log_level last = CW_LOG_DEBUG;
    void operator()(cw_log_level level, const char *message) {
        last = level;
        messages.push_back(message);
    }
};
static int g_c_log_calls;
static void c_log(void *user, cw_log_level, const char *) {
    g_c_log_calls++;
    assert_ptr_equal(user, &g_c_log_calls);
}

static void test_library(void **) {
    assert_int_equal(cw::version(), CW_VERSION_PACK(CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH));
    cw_versions vs = VAL(cw::versions());
    assert_int_equal(vs.cuweave, cw::version());
    assert_int_equal(vs.api, CW_VERSION_PACK(CW_API_VERSION_MAJOR, CW_API_VERSION_MINOR, CW_API_VERSION_PATCH));
    OK(cw::init());
    assert_int_equal(vs.driver, 13000);
    assert_int_equal(vs.nvrtc_major, 13); // the fake NVRTC
    assert_int_equal(vs.nvrtc_minor, 0);
    assert_int_equal(cw::driver_has(CW_FEATURE_CONDITIONAL_NODES), g_features);
    assert_int_equal(cw::driver_has(CW_FEATURE_LIBRARY_API), g_features);
    assert_true(cw::driver_has(CW_FEATURE_NVRTC)); // the fake NVRTC
    assert_int_equal(VAL(cw::device_count()), 1);
    cw_device_info di = VAL(cw::device_info(0));
    assert_string_equal(di.name, "cuweave fake device");
    assert_int_equal(di.cc_major, 9);
    assert_int_equal(di.cc_minor, 0);
    assert_int_equal(di.sm_count, 132);
    assert_int_equal(STATUS_OF(cw::device_info(1)), CW_ERROR_INVALID_ARGUMENT);
    // the detail of that failure, then cleared
    assert_int_equal(cw::error_detail().status, CW_ERROR_INVALID_ARGUMENT);
    assert_string_equal(cw::error_detail().function, "cw_device_get_info");
    assert_ptr_equal(cw::error_message(), cw::error_detail().message);
    cw::clear_error();
    assert_int_equal(cw::error_detail().status, CW_SUCCESS);
    assert_string_equal(cw::error_message(), "");
    cw_partition_caps caps = VAL(cw::partition_caps(0));
    // the fake reports the SM resource (132 SMs, groups of 8) but cannot make
    // a green context (test_partition_set_error)
    assert_int_equal(caps.supported, 1);
    assert_int_equal(caps.sm_count, 132);
    assert_int_equal(caps.min_partition, 8);
    assert_int_equal(caps.granularity, 8);
    assert_int_equal(caps.workqueues, 0);
    assert_string_equal(cw::status_string(CW_ERROR_TIMEOUT), "the wait timed out");
    assert_string_equal(cw::status(CW_ERROR_TIMEOUT).description(), "the wait timed out");
    assert_string_equal(cw::status_name(CW_ERROR_TIMEOUT), "CW_ERROR_TIMEOUT");
    assert_non_null(strstr(vs.builtin_origin, "ptx"));
    assert_non_null(strstr(cw::resident_device_header(), "cw_resident_ctl"));

    // the log: a function object, then a C function; removed, nothing more
    log_sink sink;
    OK(cw::set_log_callback(sink, CW_LOG_ERROR));
    assert_int_equal(STATUS_OF(cw::device_info(-1)), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.messages.size(), 1);
    assert_int_equal(sink.last, CW_LOG_ERROR);
    assert_string_equal(sink.messages[0].c_str(), cw::error_message());
    OK(cw::set_log_callback(c_log, &g_c_log_calls, CW_LOG_ERROR));
    assert_int_equal(STATUS_OF(cw::device_info(-1)), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(g_c_log_calls, 1);
    cw::remove_log_callback();
    assert_int_equal(STATUS_OF(cw::device_info(-1)), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sink.messages.size(), 1);
    assert_int_equal(g_c_log_calls, 1);
    assert_int_equal(STATUS_OF(cw::set_log_callback(c_log, nullptr, (cw_log_level)9)), CW_ERROR_INVALID_ARGUMENT);
    cw::clear_error();
}

// ---- streams, ordering, fork scopes, pools, timers, futures ---------------------

struct completion {
    std::atomic<int> calls{0};
    std::atomic<cw_status> got{CW_ERROR_INTERNAL};
    void operator()(cw_status st) {
        calls++;
        got = st;
    }
};

static void test_streams_and_futures(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::priority_range pr = VAL(ctx.priority_range());
        assert_int_equal(pr.least, 0);
        assert_int_equal(pr.greatest, -5);
        cw_stream_settings ss = cw::defaults<cw_stream_settings>();
        ss.priority = -3;
        cw::stream a = VAL(cw::stream::create(ctx, &ss));
        cw::stream b = VAL(cw::stream::create(ctx));
        cw::stream c = VAL(cw::stream::create(ctx));
        cw_stream_info si = VAL(a.info());
        assert_int_equal(si.priority, -3);
        assert_int_equal(si.owned, 1);
        assert_int_equal(si.from_pool, 0);
        assert_ptr_equal(si.handle, a.native());
        assert_int_equal(a.device(), 0);
        cw::context borrowed = a.context();
        assert_ptr_equal(borrowed.get(), ctx.get());
        assert_false(borrowed.owns());

        // ordering: one wait per source
        OK(a.wait(b));
        OK(a.wait(c));

        // a fork scope: joined explicitly, by its destructor, moved
        assert_int_equal(VAL(a.capture_state()), CW_CAPTURE_NONE);
        {
            cw::forked f = VAL(cw::forked::create(a));
            assert_true(static_cast<bool>(f));
            assert_true(f.child().get() != a.get());
            assert_ptr_equal(f.parent().get(), a.get());
            assert_false(f.child().owns());
            OK(f.child().wait(b));
            OK(f.join());
            assert_false(static_cast<bool>(f));
            OK(f.join()); // nothing left to join
            cw::forked g = VAL(cw::forked::create(a));
            cw::forked h(std::move(g));
            assert_false(static_cast<bool>(g));
            cw::forked &alias = h;
            h = std::move(alias); // self-move: still held
            assert_true(static_cast<bool>(h));
            h = VAL(cw::forked::create(b)); // joins what h held first
            assert_ptr_equal(h.parent().get(), b.get());
        } // h joins here
        // a fork inside a capture joins the capture and must be joined before its end
        {
            cw::capture cap(a);
            assert_int_equal(cap.began(), CW_SUCCESS);
            assert_int_equal(VAL(a.capture_state()), CW_CAPTURE_ACTIVE);
            {
                cw::forked f = VAL(cw::forked::create(a));
                assert_int_equal(VAL(f.child().capture_state()), CW_CAPTURE_ACTIVE);
            }
            cw::graph g = VAL(cap.end());
            assert_true(g.owns());
        }
        assert_int_equal(VAL(a.capture_state()), CW_CAPTURE_NONE);

        // pools: waiting acquire, named streams, the context
        cw_stream_pool_settings ps = cw::defaults<cw_stream_pool_settings>();
        ps.max_streams = 1;
        cw::stream_pool pool = VAL(cw::stream_pool::create(ctx, &ps));
        assert_ptr_equal(pool.context().get(), ctx.get());
        {
            cw::lease l = VAL(pool.acquire());
            assert_int_equal(STATUS_OF(pool.acquire_wait(1000)), CW_ERROR_TIMEOUT);
            assert_int_equal(STATUS_OF(pool.acquire()), CW_ERROR_POOL_EXHAUSTED);
        }
        {
            cw::lease l = VAL(pool.acquire_wait(-1));
            assert_true(static_cast<bool>(l));
        }
        int owner = 0;
        cw::stream n1 = VAL(pool.named(&owner, "work"));
        cw::stream n2 = VAL(pool.named(&owner, "work"));
        assert_ptr_equal(n1.get(), n2.get());
        assert_false(n1.owns());
        assert_int_equal(pool.stats().named, 1);
        assert_int_equal(VAL(pool.release_owner(&owner)), 1);
        assert_int_equal(pool.stats().named, 0);
        assert_int_equal(VAL(pool.release_owner(&owner)), 0);

        // timers and futures
        cw::timer t = VAL(cw::timer::create(ctx));
        cw::future f = VAL(cw::future::create(a));
        OK(f.set_spin(50));
        OK(f.wait(5000000));
        completion done;
        OK(f.set_callback(done)); // complete already: runs here
        assert_int_equal(done.calls, 1);
        assert_int_equal(done.got, CW_SUCCESS);
        assert_int_equal(STATUS_OF(f.set_callback(done)), CW_ERROR_INVALID_STATE); // one callback
        int fd = VAL(f.fd());
        struct pollfd pfd = {fd, POLLIN, 0};
        assert_int_equal(poll(&pfd, 1, 5000), 1);
        OK(f.rearm(b));
        OK(f.set_callback(done)); // again after the rearm
        OK(f.wait(5000000));
        for (int i = 0; i < 5000 && done.calls < 2; i++) usleep(1000); // the watcher thread runs it
        assert_int_equal(done.calls, 2);

        // when_all: variadic, with a kind, and from an array
        cw::future all = VAL(cw::when_all(a, b, c));
        OK(all.wait(5000000));
        cw::future all2 = VAL(cw::when_all(CW_FUTURE_HOST_FUNC, a, b));
        OK(all2.wait(5000000));
        cw_stream *const arr[] = {b.get(), c.get()};
        cw::future all3 = VAL(cw::when_all(arr, 2, CW_FUTURE_EVENT));
        OK(all3.wait(5000000));
        assert_true(VAL(all3.ready()));
        assert_int_equal(STATUS_OF(cw::when_all(arr, 0)), CW_ERROR_INVALID_ARGUMENT);
    }
    expect_no_leaks(before, "streams and futures");
}

// ---- graphs: the driver handles, the context, DOT -------------------------------

static void test_graph_handles(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::graph g = VAL(cw::graph::create(ctx));
        VAL(g.add_empty());
        assert_non_null(g.native());
        assert_ptr_equal(g.context().get(), ctx.get());
        char path[] = "/tmp/cw_test_cpp_dot_XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        OK(g.write_dot(path, true));
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[64] = {0};
        assert_non_null(fgets(line, sizeof line, f));
        fclose(f);
        unlink(path);
        assert_non_null(strstr(line, "digraph"));
        cw::graph_exec e = VAL(cw::graph_exec::create(g));
        assert_non_null(e.native());
        assert_ptr_equal(e.context().get(), ctx.get());
        assert_int_equal(STATUS_OF(cw::graph::borrow(nullptr).write_dot(path)), CW_ERROR_INVALID_ARGUMENT);
    }
    expect_no_leaks(before, "graph handles");
}

// ---- page-locked host memory, copies, buffers -----------------------------------

static void test_host_memory_and_copies(void **) {
    const live_counts before = snapshot();
    const long host0 = fake_live("hostmem");
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        enum { N = 1024 };
        cw::host_buffer in = VAL(cw::host_buffer::alloc(ctx, N * sizeof(unsigned)));
        cw::host_buffer out = VAL(cw::host_buffer::alloc(ctx, N * sizeof(unsigned)));
        assert_int_equal(fake_live("hostmem"), host0 + 2);
        assert_int_equal(in.size(), N * sizeof(unsigned));
        assert_ptr_equal(in.context_handle(), ctx.get());
        assert_int_equal(in.device_ptr(), (unsigned long long)(uintptr_t)in.data());
        for (unsigned i = 0; i < N; i++) assert_int_equal(in.as<unsigned>()[i], 0); // zeroed
        for (unsigned i = 0; i < N; i++) in.as<unsigned>()[i] = i * 7u + 3u;

        cw::buffer b = VAL(cw::buffer::create(s, N * sizeof(unsigned)));
        assert_ptr_equal(b.context().get(), ctx.get());
        cw_buffer_info bi = b.info();
        assert_int_equal(bi.bytes, N * sizeof(unsigned));
        assert_int_equal(bi.refs, 1);
        assert_int_equal(bi.device, 0);
        OK(cw::copy_to_device(s, VAL(b.writable()), in.data(), in.size()));
        OK(cw::copy_to_host(s, out.data(), b.ptr(), out.size()));
        OK(s.synchronize());
        assert_memory_equal(in.data(), out.data(), in.size());
        assert_int_equal(STATUS_OF(cw::copy_to_device(s, b.ptr(), nullptr, 4)), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(cw::host_buffer::alloc(ctx, 0)), CW_ERROR_INVALID_ARGUMENT);
        {
            cw::buffer again = VAL(b.share());
            assert_int_equal(b.info().refs, 2);
            assert_int_equal(STATUS_OF(b.writable()), CW_ERROR_INVALID_STATE); // shared: read-only
        }
        assert_int_equal(b.info().refs, 1);

        // moves: the target's memory goes, the source is left empty
        cw::host_buffer moved(std::move(in));
        assert_null(in.data());
        assert_int_equal(in.size(), 0);
        assert_false(static_cast<bool>(in));
        out = std::move(moved); // frees what out held
        assert_int_equal(fake_live("hostmem"), host0 + 1);
        cw::host_buffer &alias = out;
        out = std::move(alias);
        assert_non_null(out.data());
        assert_int_equal(out.as<unsigned>()[5], 5u * 7u + 3u);
        cw_context *owner = out.context_handle();
        void *raw = out.release(); // handed over
        assert_int_equal(fake_live("hostmem"), host0 + 1);
        cw_host_free(owner, &raw);
        assert_int_equal(fake_live("hostmem"), host0);
        cw::host_buffer last = VAL(cw::host_buffer::alloc(ctx, 64));
        last.reset();
        assert_int_equal(fake_live("hostmem"), host0);
        OK(b.used_by(s));
    } // the buffer's free waits for s; the context goes after it
    expect_no_leaks(before, "host memory, copies and buffers");
}

// Sharing between processes (share.hpp), the calls one process can make:
// export, the refusals, an event recorded and waited for (the C tests,
// test_share_cpu, cross real processes).
static void test_sharing(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        cw::buffer b = VAL(cw::create_shareable_buffer(s, 4096));
        assert_int_equal(b.size(), 4096);
        cw_shared_handle h = VAL(cw::export_buffer(b));
        assert_int_equal(STATUS_OF(cw::import_buffer(s, h)), CW_ERROR_NOT_PERMITTED); // its own process
        cw_shared_handle zero{};
        assert_int_equal(STATUS_OF(cw::import_buffer(s, zero)), CW_ERROR_INVALID_ARGUMENT);
        cw::buffer pool = VAL(cw::buffer::create(s, 64));
        assert_int_equal(STATUS_OF(cw::export_buffer(pool)), CW_ERROR_INVALID_STATE);
        cw::shared_event e = VAL(cw::shared_event::create(ctx));
        cw_shared_handle he = VAL(e.export_handle());
        assert_int_equal(STATUS_OF(cw::shared_event::import(ctx, he)), CW_ERROR_NOT_PERMITTED);
        OK(e.record(s));
        OK(e.wait(s));
        OK(s.synchronize());
        cw_shared_event_info info = e.info();
        assert_int_equal(info.imported, 0);
        assert_int_equal(info.importers, 0);
        assert_ptr_equal(info.context, ctx.get());
        OK(b.used_by(s));
        OK(pool.used_by(s));
    }
    expect_no_leaks(before, "shareable buffers and shared events");
}

// ---- operators and pipelines: many inputs, finding, port memory, C operators ---

struct emitter : cw::operator_base {
    unsigned value;
    explicit emitter(unsigned v) : value(v) {}
    void setup(cw::op_spec &spec) override { spec.output("out"); }
    cw::status compute(cw::io &io) override {
        cw::stream s = VAL(io.receive_stream());
        cw::buffer b = VAL(io.alloc(sizeof(unsigned)));
        OK(cw::copy_to_device(s, VAL(b.writable()), &value, sizeof value)); // staged: value may change after
        OK(io.emit("out", b));
        return cw::status();
    }
};
struct gatherer : cw::operator_base {
    cw_operator **self;
    unsigned *sum;
    size_t *messages, *streams;
    gatherer(cw_operator **me, unsigned *s, size_t *m, size_t *st) : self(me), sum(s), messages(m), streams(st) {}
    void setup(cw::op_spec &spec) override { spec.input("in", CW_PORT_MANY); }
    cw::status compute(cw::io &io) override {
        *self = io.op();
        if (strcmp(io.op_name(), "gather") != 0) return cw::status(CW_ERROR_INTERNAL);
        std::vector<cw::message> ms = VAL(io.receive_many("in"));
        cw_message raw[4];
        size_t n = VAL(io.receive_many("in", raw, 1)); // one copied, the count of all
        if (n != ms.size() || raw[0].buffer != ms[0].data.get()) return cw::status(CW_ERROR_INTERNAL);
        *messages += ms.size();
        for (cw::message &m : ms) *streams += m.producer ? 1 : 0;
        cw::stream s = VAL(io.receive_stream("in")); // behind both producers
        for (cw::message &m : ms) {
            if (m.data.owns() || m.producer.owns()) return cw::status(CW_ERROR_INTERNAL); // borrowed
            unsigned v = 0;
            OK(cw::copy_to_host(s, &v, m.data.ptr(), sizeof v));
            OK(s.synchronize());
            *sum += v;
        }
        return cw::status();
    }
};
// A GPU-resident operator: port memory, under cw_pipeline_run too.
struct ported : cw::operator_base {
    const char *in, *out;
    size_t bytes;
    unsigned long long *seen_in, *seen_out;
    ported(const char *i, const char *o, size_t b, unsigned long long *si, unsigned long long *so)
        : in(i), out(o), bytes(b), seen_in(si), seen_out(so) {}
    void setup(cw::op_spec &spec) override {
        if (in) spec.input(in);
        spec.output(out, bytes);
    }
    cw::status compute(cw::io &io) override {
        cw::stream s = VAL(io.receive_stream(in));
        (void)s;
        if (in) *seen_in = VAL(io.port_ptr(in));
        *seen_out = VAL(io.port_ptr(out));
        OK(io.emit_value(out, nullptr)); // "ready"
        return cw::status();
    }
};
static cw_status c_compute(cw_io *io, void *user) {
    (*static_cast<int *>(user))++;
    cw_message m;
    return cw_io_receive(io, "in", &m);
}

static void test_pipeline_more(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw_pipeline_settings set = cw::defaults<cw_pipeline_settings>();
        set.threads = 2;
        cw::pipeline p = VAL(cw::pipeline::create(ctx, &set));
        assert_ptr_equal(p.context().get(), ctx.get());
        assert_false(p.context().owns());
        unsigned sum = 0;
        size_t messages = 0, streams = 0;
        cw_operator *seen = nullptr;
        VAL(p.emplace<emitter>("one", 10u));
        VAL(p.emplace<emitter>("two", 32u));
        cw_operator *g = VAL(p.emplace<gatherer>("gather", &seen, &sum, &messages, &streams));
        OK(p.connect("one", "out", "gather", "in"));
        OK(p.connect("two", "out", "gather", "in"));
        // an operator made with the C API joins as well
        int c_calls = 0;
        cw_operator_ops ops = {nullptr, c_compute, nullptr, nullptr, {}};
        cw_operator *cop = nullptr;
        assert_int_equal(cw_operator_create(&cop, "c_sink", &ops, &c_calls, nullptr), CW_SUCCESS);
        assert_int_equal(cw_operator_add_input(cop, "in", nullptr), CW_SUCCESS);
        OK(p.add(cop));
        assert_int_equal(STATUS_OF(p.add(cop)), CW_ERROR_INVALID_STATE); // it belongs to p now
        OK(p.connect("one", "out", "c_sink", "in"));
        OK(p.check());
        OK(p.run(3));
        OK(p.synchronize());
        assert_int_equal(sum, 3 * (10 + 32));
        assert_int_equal(messages, 6);
        assert_int_equal(streams, 6);
        assert_int_equal(c_calls, 3);
        assert_ptr_equal(seen, g);
        assert_ptr_equal(VAL(p.find("gather")), g);
        assert_ptr_equal(VAL(p.find("c_sink")), cop);
        assert_int_equal(STATUS_OF(p.find("nope")), CW_ERROR_INVALID_ARGUMENT);
        cw_pipeline_info st = p.info();
        assert_int_equal(st.operators, 4);
        assert_int_equal(st.connections, 3);
        assert_int_equal(st.computes, 12);
    }
    {
        // port memory under run(): resident operators, read from outside
        cw::context ctx = VAL(cw::context::create(0));
        cw::pipeline p = VAL(cw::pipeline::create(ctx));
        cw_operator_settings os = cw::defaults<cw_operator_settings>();
        os.resident = 1;
        unsigned long long a_out = 0, b_in = 0, b_res = 0, unused = 0;
        VAL(p.add("A", std::unique_ptr<cw::operator_base>(new ported(nullptr, "out", 64, &unused, &a_out)), &os));
        VAL(p.add("B", std::unique_ptr<cw::operator_base>(new ported("in", "res", 16, &b_in, &b_res)), &os));
        OK(p.connect("A", "out", "B", "in"));
        assert_int_equal(STATUS_OF(p.port_ptr("B", "res")), CW_ERROR_INVALID_STATE); // not set up yet
        OK(p.run(2));
        OK(p.synchronize());
        assert_true(a_out != 0 && a_out == b_in && b_res != 0 && b_res != a_out);
        assert_int_equal(VAL(p.port_ptr("A", "out")), a_out);
        assert_int_equal(VAL(p.port_ptr("B", "in")), a_out);
        assert_int_equal(VAL(p.port_ptr("B", "res")), b_res);
        assert_int_equal(STATUS_OF(p.port_ptr("B", "nope")), CW_ERROR_INVALID_ARGUMENT);
    }
    expect_no_leaks(before, "pipelines");
}

// The partition group's calls on a group the fake cannot make: each reports
// the error, nothing crashes.
static void test_partition_calls_on_empty_set(void **) {
    cw::partition_group empty;
    assert_int_equal(STATUS_OF(empty.info(0)), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(STATUS_OF(empty.group_info()), CW_ERROR_INVALID_ARGUMENT);
    assert_int_equal(empty.size(), 0);
    cw::clear_error();
}

// ---- with the fake's optional features: modules, kernels, the jit cache ---------

static void test_modules_and_kernels(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        const char *src = "template <typename T> __global__ void f(T *p) { *p = 1; }\n";
        const char *exprs[] = {"f<int>"};
        cw_program_settings ps = cw::defaults<cw_program_settings>();
        ps.name_expressions = exprs;
        ps.n_name_expressions = 1;
        cw_jit_stats j0 = VAL(cw::jit_stats());
        cw::program p = VAL(cw::program::compile(ctx, src, &ps));
        cw_jit_stats j1 = VAL(cw::jit_stats());
        assert_int_equal(j1.compiles, j0.compiles + 1);
        assert_string_equal(VAL(p.lowered_name("f<int>")), "_Zfake_f_int_");
        assert_int_equal(STATUS_OF(p.lowered_name("g<int>")), CW_ERROR_INVALID_ARGUMENT);
        {
            cw::program again = VAL(cw::program::compile(ctx, src, &ps));
            assert_int_equal(again.info().source, CW_FROM_MEMORY);
            assert_int_equal(VAL(cw::jit_stats()).memory_hits, j1.memory_hits + 1);
        }
        cw::jit_cache_clear_memory();
        {
            cw::program again = VAL(cw::program::compile(ctx, src, &ps));
            assert_int_equal(again.info().source, CW_FROM_COMPILE);
        }
        // no memory cache: every compile runs NVRTC; then the defaults again
        cw_jit_cache_settings js = cw::defaults<cw_jit_cache_settings>();
        js.memory = 0;
        OK(cw::jit_cache_configure(js));
        const uint64_t c0 = VAL(cw::jit_stats()).compiles;
        for (int i = 0; i < 2; i++) {
            cw::program q = VAL(cw::program::compile(ctx, src, &ps));
            assert_int_equal(q.info().source, CW_FROM_COMPILE);
        }
        assert_int_equal(VAL(cw::jit_stats()).compiles, c0 + 2);
        OK(cw::jit_cache_configure(cw::defaults<cw_jit_cache_settings>()));

        cw::module m = VAL(cw::module::load(p));
        cw::kernel k = VAL(m.get_kernel("f<int>"));
        OK(k.preload(ctx));
        assert_non_null(k.native());
        assert_int_equal(k.param_count(ctx), 0); // the fake lists no parameters
        OK(k.launch(s, cw::dims(1), cw::dims(32)));
        int *dst = nullptr;
        assert_int_equal(STATUS_OF(k.launch(s, cw::dims(1), cw::dims(1), dst)), CW_ERROR_INVALID_ARGUMENT);
        OK(s.synchronize());
        cw::kernel ts = VAL(cw::builtin_kernel(CW_BUILTIN_TIMESTAMP));
        assert_non_null(ts.native());
        OK(ts.preload(ctx));
    }
    expect_no_leaks(before, "modules and kernels");
}

// cw::kernel is the C handle and nothing else: the argument checks are the C
// launch path's (cw_kernel_launch), with the parameters the library lists
// once per kernel for every thread. The fake lists the parameters a kernel's
// name gives ("scale#8,4": 8 and 4 bytes). Typed launches that match are
// launched, those that do not are refused with the C path's detail; threads
// racing to a fresh kernel's first launch all get the same answers.
static_assert(sizeof(cw::kernel) == sizeof(cw_kernel *) && std::is_trivially_copyable<cw::kernel>::value,
              "a kernel is its C handle: no cache of its own");

static void test_kernel_arguments(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        static const char image[] = "// fake PTX\n.version 8.0\n.target sm_90\n";
        cw::module m = VAL(cw::module::load_image(image));
        cw::kernel k = VAL(m.get_kernel("scale#8,4"));
        const uint64_t p = 0;
        const int32_t n = 3;
        OK(k.launch(s, cw::dims(1), cw::dims(32), p, n));
        std::vector<size_t> sizes = VAL(k.params(ctx));
        assert_int_equal(sizes.size(), 2);
        assert_int_equal(sizes[0], 8);
        assert_int_equal(sizes[1], 4);
        assert_int_equal(k.param_count(ctx), 2);
        assert_int_equal(STATUS_OF(k.launch(s, cw::dims(1), cw::dims(32), n, n)), CW_ERROR_INVALID_ARGUMENT);
        assert_string_equal(cw::error_detail().function, "cw_kernel_launch");
        assert_non_null(strstr(cw::error_detail().message, "argument 0 has 4 bytes, parameter 0"));
        assert_int_equal(STATUS_OF(k.launch(s, cw::dims(1), cw::dims(32), p)), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw::error_detail().message, "1 argument(s) given, the kernel \"scale#8,4\" has 2"));
        assert_int_equal(STATUS_OF(k.launch(s, cw::dims(1), cw::dims(32))), CW_ERROR_INVALID_ARGUMENT);
        cw_launch_config lc = cw::defaults<cw_launch_config>();
        lc.shared_bytes = 64;
        OK(k.launch_with(s, lc, p, n));
        // a kernel without parameters: none given is right
        cw::kernel none = VAL(m.get_kernel("nothing"));
        OK(none.launch(s, cw::dims(1), cw::dims(1)));
        assert_int_equal(VAL(none.params(ctx)).size(), 0);
        OK(s.synchronize());

        // first launches racing: 8 threads, 4 fresh kernels each; even
        // threads launch right, odd ones wrong
        enum { THREADS = 8, KERNELS = 4 };
        std::vector<cw::kernel> fresh;
        for (int i = 0; i < KERNELS; i++) {
            std::string name = "race" + std::to_string(i) + "#8,4";
            fresh.push_back(VAL(m.get_kernel(name.c_str())));
        }
        std::vector<cw::stream> streams;
        for (int i = 0; i < THREADS; i++) streams.push_back(VAL(cw::stream::create(ctx)));
        std::atomic<int> ready{0}, bad{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < THREADS; t++)
            threads.emplace_back([&, t]() {
                ready++;
                while (ready.load() < THREADS) std::this_thread::yield();
                for (const cw::kernel &fk : fresh) {
                    cw_status st = t % 2 == 0 ? STATUS_OF(fk.launch(streams[t], cw::dims(1), cw::dims(1), p, n))
                                              : STATUS_OF(fk.launch(streams[t], cw::dims(1), cw::dims(1), n, p));
                    if (st != (t % 2 == 0 ? CW_SUCCESS : CW_ERROR_INVALID_ARGUMENT)) bad++;
                }
                if (STATUS_OF(streams[t].synchronize()) != CW_SUCCESS) bad++;
            });
        for (std::thread &th : threads) th.join();
        assert_int_equal(bad.load(), 0);
    }
    cw::clear_error();
    expect_no_leaks(before, "kernel launches");
}

// ---- with the fake's optional features: the resident loop -------------------------

// A capture function object: launches the timestamp kernel once per call.
struct stamp_workload {
    int calls = 0;
    cw_status fail = CW_SUCCESS;
    cw::status operator()(cw::stream &s) {
        calls++;
        if (fail != CW_SUCCESS) return cw::status(fail);
        if (s.owns()) return cw::status(CW_ERROR_INTERNAL); // borrowed
        cw::kernel k = VAL(cw::builtin_kernel(CW_BUILTIN_TIMESTAMP));
        (void)k;
        cw_launch_config lc = cw::defaults<cw_launch_config>();
        unsigned long long nowhere = 0;
        void *args[] = {&nowhere};
        return cw::status(cw_kernel_launch(k.get(), s.get(), &lc, args)); // the fake runs nothing
    }
};
static int g_c_handler_calls;
static cw_status c_handler(cw_stream *, void *user) {
    (*static_cast<int *>(user))++;
    return CW_SUCCESS;
}

static void test_resident_loop(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::stream s = VAL(cw::stream::create(ctx));
        cw_resident_settings rs = cw::defaults<cw_resident_settings>();
        rs.input_slots = 2;
        rs.input_bytes = 64;
        rs.unroll = 3;
        cw::resident r = VAL(cw::resident::create(ctx, &rs));
        assert_ptr_equal(r.context().get(), ctx.get());
        cw_resident_settings got = VAL(r.settings());
        assert_memory_equal(&got, &rs, sizeof rs);
        assert_int_equal(VAL(r.input(1)) - VAL(r.input(0)), 64);
        assert_int_equal(STATUS_OF(r.input(2)), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(r.state(), CW_RESIDENT_NOT_LAUNCHED);
        assert_true(r.ctl() != 0);

        // the workload as a function object: its error fails the launch
        stamp_workload w;
        w.fail = CW_ERROR_NOT_PERMITTED;
        OK(r.set_workload_fn(w));
        assert_int_equal(STATUS_OF(r.launch()), CW_ERROR_NOT_PERMITTED);
        assert_int_equal(r.state(), CW_RESIDENT_NOT_LAUNCHED);
        w.fail = CW_SUCCESS;
        w.calls = 0;
        OK(r.set_handler_fn(c_handler, &g_c_handler_calls));
        OK(r.build());
        // once per copy of the iteration, and once first for the build's look
        // at the workload (gate CW_RESIDENT_GATE_AUTO, the default); the
        // handler is not looked at
        assert_int_equal(w.calls, 3 + 1);
        assert_int_equal(g_c_handler_calls, 3);
        // what the default gate chose, through info(): the timestamp kernel
        // does not take the device block, so the IF node, and why
        cw_resident_info bi = VAL(r.info());
        assert_int_equal(bi.gate, CW_RESIDENT_GATE_NODE);
        assert_int_equal(bi.overlap, 0);
        assert_int_equal(bi.fallback, CW_RESIDENT_FALLBACK_NO_CTL);
        assert_non_null(strstr(bi.fallback_detail, "cwk_timestamp"));
        {
            // gate BEGIN_END through the wrapper: a capture function whose first
            // kernel does not take the device block is refused at the build
            cw_resident_settings fs = cw::defaults<cw_resident_settings>();
            fs.gate = CW_RESIDENT_GATE_BEGIN_END;
            cw::resident f = VAL(cw::resident::create(ctx, &fs));
            stamp_workload fw;
            OK(f.set_workload_fn(fw));
            assert_int_equal(STATUS_OF(f.build()), CW_ERROR_INVALID_STATE);
            assert_non_null(strstr(cw_last_error()->message, "gate BEGIN_END"));
        }
        OK(r.set_handler_fn(nullptr, nullptr)); // host requests again
        OK(r.launch());
        assert_int_equal(r.state(), CW_RESIDENT_RUNNING);
        assert_true(r.is_launched());
        assert_int_equal(STATUS_OF(r.set_workload_fn(w)), CW_ERROR_INVALID_STATE);
        unsigned long long slot = VAL(r.next_input(0));
        assert_int_equal(slot, VAL(r.input(0)));
        uint64_t seq = VAL(r.data_ready());
        assert_int_equal(seq, 1);
        assert_false(VAL(r.result_ready(seq))); // the fake serves nothing
        assert_int_equal(STATUS_OF(r.wait_result(seq, 1)), CW_ERROR_TIMEOUT);
        cw_resident_info st = VAL(r.info());
        assert_int_equal(st.requested, 1);
        assert_int_equal(st.launches, 1);
        OK(r.tear_down(1000));
        assert_int_equal(r.state(), CW_RESIDENT_STOPPED);
        assert_int_equal(VAL(r.info()).exit, CW_RESIDENT_EXIT_TEAR_DOWN);

        // a workload from a captured graph, settings changed before the launch
        cw::graph g;
        {
            cw::capture cap(s);
            cw::kernel k = VAL(cw::builtin_kernel(CW_BUILTIN_TIMESTAMP));
            OK(k.launch(s, cw::dims(1), cw::dims(1))); // the fake lists no parameters: none given
            g = VAL(cap.end());
        }
        assert_int_equal(g.info().nodes, 1);
        OK(r.set_workload(g));
        cw_resident_settings c = got;
        c.unroll = 2;
        OK(r.configure(c));
        assert_int_equal(VAL(r.settings()).unroll, 2);
        OK(r.launch());
        OK(r.tear_down(1000));
        OK(r.set_workload(cw::graph())); // none

        // a pipeline of C++ resident operators as the workload
        cw::pipeline p = VAL(cw::pipeline::create(ctx));
        cw_operator_settings os = cw::defaults<cw_operator_settings>();
        os.resident = 1;
        unsigned long long a_out = 0, b_in = 0, b_res = 0, unused = 0;
        VAL(p.add("A", std::unique_ptr<cw::operator_base>(new ported(nullptr, "out", 64, &unused, &a_out)), &os));
        VAL(p.add("B", std::unique_ptr<cw::operator_base>(new ported("in", "res", 16, &b_in, &b_res)), &os));
        OK(p.connect("A", "out", "B", "in"));
        OK(p.make_resident(r));
        OK(r.launch());
        assert_true(a_out != 0 && a_out == b_in);
        assert_int_equal(VAL(p.port_ptr("B", "res")), b_res);
        OK(r.tear_down(1000));
        assert_int_equal(VAL(r.info()).launches, 3);
        r.reset(); // the loop before the pipeline it captures
        assert_false(static_cast<bool>(r));
    }
    expect_no_leaks(before, "the resident loop");
}

// Tile dataflow plans by value (cw::fused_plan, cw::read_*): the C
// description they make (names resolved to indices, every field of a
// dependency, the loop's shape), an unknown name refused before any C
// call in both modes, a loop made fused from a plan; a fused pipeline of
// cw::stage_op operators made the loop's kernel, its port memory shared by
// the connection; a failing add leaves nothing.
static void test_fused_plans(void **) {
    const live_counts before = snapshot();
    {
        static const char src[] = "a b c pick fn_a fn_b /* the fake NVRTC needs the names */";
        cw::fused_plan plan(src);
        plan.stage("a").tiles(8);
        plan.stage("b").size(100, 30).tile(16, 8).threads(64).shared_bytes(256).reads(cw::read_all("a").previous(),
                                                                                         cw::read_all(0u));
        plan.stage("c").tiles(8).reads(cw::read_neighbours("a", 1, 1, 2), cw::read_function("b", "pick"),
                                       cw::read_same("a"));
        plan.block_threads(128).in_flight(2).watchdog_ms(700).grid_blocks(3).option("-DX=1");
        assert_int_equal(plan.size(), 3);
        assert_int_equal(plan.index_of("c"), 2);
        assert_int_equal(plan.index_of("zz"), -1);
        const cw_resident_fused f = VAL(plan.c());
        assert_string_equal(f.source, src);
        assert_int_equal(f.mode, CW_FUSED_DATAFLOW);
        assert_int_equal(f.stage_count, 3);
        assert_int_equal(f.block_threads, 128);
        assert_int_equal(f.in_flight, 2);
        assert_int_equal(f.watchdog_ms, 700);
        assert_int_equal(f.grid_blocks, 3);
        assert_int_equal(f.option_count, 1);
        assert_string_equal(f.options[0], "-DX=1");
        const cw_fused_stage *st = f.stage_defs;
        assert_string_equal(st[1].name, "b");
        assert_int_equal(st[0].tiles, 8);
        assert_null(st[0].deps);
        assert_int_equal(st[1].size[0], 100);
        assert_int_equal(st[1].tile[1], 8);
        assert_int_equal(st[1].threads, 64);
        assert_int_equal(st[1].shared_bytes, 256);
        assert_int_equal(st[1].dep_count, 2);
        assert_int_equal(st[1].deps[0].stage, 0);
        assert_int_equal(st[1].deps[0].read, CW_FUSED_READ_ALL);
        assert_int_equal(st[1].deps[0].previous, 1);
        assert_int_equal(st[1].deps[1].read, CW_FUSED_READ_ALL);
        assert_int_equal(st[1].deps[1].previous, 0);
        assert_int_equal(st[2].deps[0].read, CW_FUSED_READ_NEIGHBOURS);
        assert_int_equal(st[2].deps[0].radius, 1);
        assert_int_equal(st[2].deps[0].scale_num, 1);
        assert_int_equal(st[2].deps[0].scale_den, 2);
        assert_int_equal(st[2].deps[1].stage, 1);
        assert_int_equal(st[2].deps[1].read, CW_FUSED_READ_FUNCTION);
        assert_string_equal(st[2].deps[1].function, "pick");
        assert_int_equal(st[2].dep_count, 3);
        // A const plan shared by threads (set_fused(plan) and
        // make_fused(r, plan) take it so): each describe() owns its arrays
        // (review: c() const rewrote the plan's, a data race under TSan).
        const cw::fused_plan &shared = plan;
        const cw::fused_plan::description d1 = shared.describe();
        const cw::fused_plan::description d2 = shared.describe();
        assert_true(d1.get().stage_defs != d2.get().stage_defs);
        assert_true(d1.get().stage_defs[2].deps != d2.get().stage_defs[2].deps);
        std::atomic<int> torn{0};
        auto describe_many = [&] {
            for (int k = 0; k < 200; k++) {
                const cw::fused_plan::description d = shared.describe();
                const cw_resident_fused &g = d.get();
                if (g.stage_count != 3 || g.stage_defs[2].dep_count != 3 || g.stage_defs[2].deps[1].stage != 1 ||
                    strcmp(g.stage_defs[1].name, "b") != 0 || !d.problem().empty())
                    torn.fetch_add(1);
            }
        };
        std::thread t1(describe_many), t2(describe_many);
        t1.join();
        t2.join();
        assert_int_equal(torn.load(), 0);
        assert_string_equal(f.stage_defs[1].name, "b"); // c()'s description is untouched by describe()
        assert_int_equal(st[2].deps[2].stage, 0);
        assert_int_equal(st[2].deps[2].read, CW_FUSED_READ_SAME);
        assert_null(st[2].deps[2].function);
        // a copy is a plan of its own
        cw::fused_plan copy = plan;
        copy.stage("d").tiles(1).reads(cw::read_all("nowhere"));
        assert_int_equal(STATUS_OF(copy.c()), CW_ERROR_INVALID_ARGUMENT);
        assert_string_equal(copy.problem().c_str(),
                            "cw::fused_plan: stage 'd' reads 'nowhere', which is not a stage of the plan");
        assert_int_equal(plan.size(), 3);
        cw::context ctx = VAL(cw::context::create(0));
        cw::resident r = VAL(cw::resident::create(ctx));
        assert_int_equal(STATUS_OF(r.set_fused(copy)), CW_ERROR_INVALID_ARGUMENT); // before the C call
        OK(r.set_fused(plan));
        cw_resident_info info = VAL(r.info());
        assert_int_equal(info.fused, 1);
        assert_int_equal(info.grid_blocks, 3);
        assert_int_equal(info.block_threads, 128);
        OK(r.set_fused(nullptr));

        // a fused pipeline: a -> b, b reads a tile for tile
        cw::pipeline p = VAL(cw::pipeline::create(ctx));
        VAL(p.add(cw::stage_op("A", "fn_a").tiles(8).output("out", 256)));
        cw_operator *b = VAL(p.add(cw::stage_op("B", "fn_b").tiles(8).user(0x40)
                                       .input("in", cw::read_same(), 0, 256)
                                       .input("spare", cw::read_all(), CW_PORT_OPTIONAL)
                                       .output("res", 64)));
        assert_non_null(b);
        // a second "A": refused, nothing left behind
        assert_int_equal(STATUS_OF(p.add(cw::stage_op("A", "fn_a").tiles(8))), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw_last_error()->message, "has an operator named 'A' already"));
        assert_int_equal(STATUS_OF(p.add(cw::stage_op("C", "fn_a"))), CW_ERROR_INVALID_ARGUMENT); // no cut
        OK(p.connect("A", "out", "B", "in"));
        cw::fused_plan opts(src);
        opts.in_flight(2);
        cw::resident fr = VAL(cw::resident::create(ctx));
        OK(p.make_fused(fr, opts));
        assert_int_equal(VAL(fr.info()).fused, 1);
        const cw_devptr a_out = VAL(p.port_ptr("A", "out"));
        assert_true(a_out != 0 && a_out == VAL(p.port_ptr("B", "in")));
        assert_true(VAL(p.port_ptr("B", "res")) != 0);
        // the C description directly; a plan with stages is refused (the pipeline has them)
        cw_resident_fused cf{};
        cf.source = src;
        OK(p.make_fused(fr, cf));
        assert_int_equal(STATUS_OF(p.make_fused(fr, plan)), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw_last_error()->message, "leave them 0"));
        OK(fr.launch());
        OK(fr.tear_down(1000));
        fr.reset(); // the loop before the pipeline it runs
        r.reset();
    }
    expect_no_leaks(before, "fused plans and a fused pipeline");
}

// Destructors cannot fail; what can fail or time out has a member that
// reports it. A resident loop the fake holds busy (it will not stop):
// tear_down(ms) reports CW_ERROR_TIMEOUT and the loop is still there; once
// it can stop, tear_down succeeds and the destructor has nothing left to
// do. A loop that still will not stop when its wrapper goes: the destructor
// returns all the same (destroy_timeout_ms), the log callback gets the
// CW_LOG_ERROR that says it was abandoned, and everything is freed once the
// loop is seen stopped.
static void test_resident_tear_down_reports(void **) {
    const live_counts before = snapshot();
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw_resident_settings rs = cw::defaults<cw_resident_settings>();
        rs.destroy_timeout_ms = 20;
        log_sink sink;
        OK(cw::set_log_callback(sink, CW_LOG_WARNING));
        {
            cw::resident r = VAL(cw::resident::create(ctx, &rs));
            OK(r.build());
            fake_hold(1); // the launch never completes: the loop cannot stop
            OK(r.launch());
            cw_status st = STATUS_OF(r.tear_down(0));
            assert_int_equal(st, CW_ERROR_TIMEOUT); // reported, nothing lost
            assert_true(r.is_launched());
            assert_non_null(r.get());
            sink.messages.clear();
            fake_hold(0);
            OK(r.tear_down(1000)); // now it stops
            assert_int_equal(r.state(), CW_RESIDENT_STOPPED);
        } // nothing left for the destructor to report
        assert_int_equal(sink.messages.size(), 0);
        {
            cw::resident r = VAL(cw::resident::create(ctx, &rs));
            OK(r.build());
            fake_hold(1);
            OK(r.launch());
            sink.messages.clear();
        } // the destructor gives up after destroy_timeout_ms, and says so
        assert_int_equal(sink.messages.size(), 1);
        assert_int_equal(sink.last, CW_LOG_ERROR);
        printf("# %s\n", sink.messages[0].c_str());
        assert_non_null(strstr(sink.messages[0].c_str(), "cw_resident_destroy"));
        assert_non_null(strstr(sink.messages[0].c_str(), "abandoned"));
        cw::remove_log_callback();
        fake_hold(0);
        assert_int_equal(fake_drain(2000), 1);
        // the next loop's create sees the abandoned one stopped and frees it
        cw::resident next = VAL(cw::resident::create(ctx));
        next.reset();
    }
    cw::clear_error();
    expect_no_leaks(before, "resident loops torn down by hand and by the destructor");
}

static void test_conditional_graphs(void **) {
    const live_counts before = snapshot();
    const long bodies0 = fake_live("body");
    {
        cw::context ctx = VAL(cw::context::create(0));
        cw::graph loop = VAL(cw::graph::create(ctx));
        cw_cond_handle h = VAL(loop.cond_create(1));
        cw::graph body = VAL(loop.add_conditional(h, CW_COND_WHILE));
        assert_false(body.owns());
        assert_int_equal(body.info().is_body, 1);
        assert_ptr_equal(body.context().get(), ctx.get());
        VAL(body.add_empty());
        cw::graph_exec e = VAL(cw::graph_exec::create(loop));
        assert_int_equal(fake_live("body"), bodies0 + 1);
    }
    expect_no_leaks(before, "conditional graphs");
}

// ---- several devices and collectives: one fake device, no NCCL ----------------------

// Every wrapper of multi.h and collective.h once, on the fake's one device:
// a device group of every device, peer facts and the errors of a pair on one
// device, peer and buffer copies within the device (bytes checked), and
// communicators refused without NCCL (CUWEAVE_LIBNCCL names none, set in
// main).
static void test_several_devices(void **) {
    const live_counts before = snapshot();
    {
        // device groups: every device, a list, an array; lists refused
        cw::device_group set = VAL(cw::device_group::create());
        assert_true(set.owns());
        assert_int_equal(set.size(), 1);
        assert_int_equal(set.info().devices[0], 0);
        assert_int_equal(set.ordinal(0), 0);
        assert_int_equal(set.ordinal(1), -1);
        cw::context c0 = set.context(0);
        assert_false(c0.owns());
        assert_ptr_equal(c0.get(), set.info().contexts[0]);
        assert_int_equal(c0.device(), 0);
        assert_int_equal(c0.kind(), CW_CONTEXT_PRIMARY);
        assert_null(set.context(1).get());
        {
            cw::device_group listed = VAL(cw::device_group::create({0}));
            assert_int_equal(listed.size(), 1);
            cw::device_group moved(std::move(listed));
            assert_null(listed.get());
            assert_int_equal(moved.size(), 1);
            cw::device_group &alias = moved;
            moved = std::move(alias); // self-move: still held
            assert_int_equal(moved.ordinal(0), 0);
            const int devs[] = {0};
            moved = VAL(cw::device_group::create(devs, 1)); // destroys what moved held
            assert_int_equal(moved.ordinal(0), 0);
            cw::device_group borrowed = cw::device_group::borrow(moved.get());
            assert_false(borrowed.owns());
        }
        assert_int_equal(STATUS_OF(cw::device_group::create({1})), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(cw::device_group::create({0, 0})), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw::error_message(), "both device 0"));
        assert_int_equal(cw::device_group().size(), 0);

        // peers: a device reaches its own memory; two contexts of one device are no pair
        cw_peer_info pi = VAL(cw::peer_info(0, 0));
        assert_int_equal(pi.can_access, 1);
        assert_int_equal(pi.perf_rank, 0);
        assert_int_equal(pi.native_atomics, 1);
        assert_int_equal(STATUS_OF(cw::peer_info(0, 1)), CW_ERROR_INVALID_ARGUMENT);
        cw::context c1 = VAL(cw::context::create(0));
        assert_true(c1.get() != c0.get());
#ifdef CW_HPP_NO_EXCEPTIONS
        cw::status st = cw::enable_peer(c0, c1);
        assert_false(st.ok());
        assert_int_equal(st.code(), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw::error_message(), "both on device 0"));
#else
        bool thrown = false;
        try {
            cw::enable_peer(c0, c1);
        } catch (const cw::error &e) {
            thrown = true;
            assert_int_equal(e.status(), CW_ERROR_INVALID_ARGUMENT);
            assert_non_null(strstr(e.what(), "both on device 0"));
        }
        assert_true(thrown);
#endif
        assert_int_equal(STATUS_OF(cw::enable_peer(c0, cw::context())), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(cw::share_buffer_pool(c0, c1)), CW_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(cw::error_message(), "both on device 0"));

        // peer copies within the device, between its two contexts: the bytes arrive
        cw::stream s = VAL(cw::stream::create(c0));
        enum { N = 256 };
        unsigned in[N], out[N];
        for (unsigned i = 0; i < N; i++) in[i] = i * 13u + 1u;
        cw::buffer a = VAL(cw::buffer::create(s, sizeof in));
        cw::buffer b = VAL(cw::buffer::create(s, sizeof in));
        cw::buffer c = VAL(cw::buffer::create(s, sizeof in));
        OK(cw::copy_to_device(s, VAL(a.writable()), in, sizeof in));
        OK(cw::copy_peer(s, VAL(b.writable()), c1, a.ptr(), c0, sizeof in));
        memset(out, 0, sizeof out);
        OK(cw::copy_to_host(s, out, b.ptr(), sizeof out));
        OK(s.synchronize());
        assert_memory_equal(in, out, sizeof in);
        OK(cw::copy_peer(s, 0, c1, 0, c0, 0)); // nothing to copy
        assert_int_equal(STATUS_OF(cw::copy_peer(s, 0, c1, a.ptr(), c0, 4)), CW_ERROR_INVALID_ARGUMENT);
        // whole buffers: a stream of c1 copies c0's buffers
        cw::stream s1 = VAL(cw::stream::create(c1));
        OK(s1.wait(s));
        OK(c.copy_from(s1, b));
        memset(out, 0, sizeof out);
        OK(cw::copy_to_host(s1, out, c.ptr(), sizeof out));
        OK(s1.synchronize());
        assert_memory_equal(in, out, sizeof in);
        assert_int_equal(STATUS_OF(c.copy_from(s1, c)), CW_ERROR_INVALID_ARGUMENT); // onto itself
        {
            cw::buffer small = VAL(cw::buffer::create(s, 16));
            assert_int_equal(STATUS_OF(small.copy_from(s, a)), CW_ERROR_INVALID_ARGUMENT); // too small
            cw::buffer again = VAL(c.share());
            assert_int_equal(STATUS_OF(c.copy_from(s, a)), CW_ERROR_INVALID_STATE); // shared: read-only
            OK(a.copy_from(s, small)); // a larger destination is fine
        }
        OK(s.synchronize());

        // collectives: no NCCL, so every communicator is refused and says why
        assert_int_equal(VAL(cw::versions()).nccl, 0); // absent: 0, not an error
#ifdef CW_HPP_NO_EXCEPTIONS
        cw::result<cw::comm> cr = cw::comm::create(set);
        assert_false(cr.ok());
        assert_int_equal(cr.code(), CW_ERROR_NOT_SUPPORTED);
        assert_null(cr.value().get());
        assert_non_null(strstr(cw::error_message(), "/nonexistent/libnccl.so.2"));
#else
        thrown = false;
        try {
            cw::comm cm = cw::comm::create(set);
            (void)cm;
        } catch (const cw::error &e) {
            thrown = true;
            assert_int_equal(e.status(), CW_ERROR_NOT_SUPPORTED);
            assert_non_null(strstr(e.what(), "/nonexistent/libnccl.so.2"));
        }
        assert_true(thrown);
#endif
        assert_int_equal(STATUS_OF(cw::comm::create(c0)), CW_ERROR_NOT_SUPPORTED);
        cw_context *const ctxs[] = {c0.get()};
        assert_int_equal(STATUS_OF(cw::comm::create(ctxs, 1)), CW_ERROR_NOT_SUPPORTED);
        // checked before NCCL is looked for: two ranks on one device
        assert_int_equal(STATUS_OF(cw::comm::create(c0, c1)), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(cw::comm::create(cw::device_group())), CW_ERROR_INVALID_ARGUMENT); // no ranks
        assert_int_equal(STATUS_OF(cw::comm_group::begin()), CW_ERROR_NOT_SUPPORTED);
        // communicators by rank: refused without NCCL too (the CPU tests across
        // processes, test_comm_rank_cpu, run them with the fake NCCL)
        assert_int_equal(STATUS_OF(cw::comm_id_generate()), CW_ERROR_NOT_SUPPORTED);
        {
            cw_comm_id id{};
            assert_int_equal(STATUS_OF(cw::comm::create_rank(c0, id, 2, 0, 100)), CW_ERROR_NOT_SUPPORTED);
            assert_int_equal(STATUS_OF(cw::comm::create_rank(c0, id, 2, 2, 100)), CW_ERROR_INVALID_ARGUMENT);
            cw_comm_bootstrap_settings bs = cw::defaults<cw_comm_bootstrap_settings>();
            assert_int_equal(bs.rank, -1);
            assert_int_equal((int)bs.timeout_ms, 60000);
            bs.rank = 0;
            bs.world_size = 1;
            bs.addr = "127.0.0.1:1";
            assert_int_equal(STATUS_OF(cw::comm::bootstrap(c0, bs)), CW_ERROR_NOT_SUPPORTED);
            bs.reserved[0] = 1;
            assert_int_equal(STATUS_OF(cw::comm::bootstrap(c0, bs)), CW_ERROR_INVALID_ARGUMENT);
        }
        {
            cw::comm_group g; // empty: nothing to end
            assert_false(static_cast<bool>(g));
            OK(g.end());
            cw::comm_group h(std::move(g));
            assert_false(static_cast<bool>(h));
        }
        cw::comm empty;
        assert_int_equal(empty.size(), 0);
        assert_null(empty.context(0).get());
        assert_int_equal(empty.info().size, 0);
        assert_int_equal(empty.local_size(), 0);
        assert_int_equal(empty.first_rank(), 0);
        const cw_devptr addr[] = {a.ptr()};
        cw_stream *const streams[] = {s.get()};
        assert_int_equal(STATUS_OF(empty.all_reduce(addr, addr, N, CW_UINT32, CW_SUM, streams)),
                         CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(empty.broadcast(addr, addr, N, CW_UINT32, 0, streams)), CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(empty.all_reduce_rank(0, a.ptr(), a.ptr(), N, CW_UINT32, CW_MAX, s)),
                         CW_ERROR_INVALID_ARGUMENT);
        assert_int_equal(STATUS_OF(empty.broadcast_rank(0, a.ptr(), a.ptr(), N, CW_FLOAT32, 0, s)),
                         CW_ERROR_INVALID_ARGUMENT);
        assert_false(cw::comm::borrow(nullptr).owns());
        cw::clear_error();
    }
    expect_no_leaks(before, "several devices and collectives");
}

// ---- every handle made by either group went ---------------------------------------

static live_counts g_group_start;
static void test_every_handle_destroyed(void **) { expect_no_leaks(g_group_start, "the whole group"); }


// Runs one group in this process: the fake's optional features on or off
// (read by the fake once, at cuweave's first driver call).
static int run_group(const char *fake, bool features) {
    g_features = features;
    if (features) setenv("FAKE_CUDA_FEATURES", "all", 1);
    else unsetenv("FAKE_CUDA_FEATURES");
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: the fake driver did not load: %s\n", cw_last_error()->message);
        return 1;
    }
    void *lib = dlopen(fake, RTLD_NOW | RTLD_NOLOAD);
    if (!lib || !(*(void **)&fake_live = dlsym(lib, "fake_cuda_live")) ||
        !(*(void **)&fake_drain = dlsym(lib, "fake_cuda_drain")) ||
        !(*(void **)&fake_hold = dlsym(lib, "fake_cuda_hold"))) {
        printf("FAIL: fake_cuda_live not found in %s\n", fake);
        return 1;
    }
    unsigned (*fake_features)(void) = nullptr;
    *(void **)&fake_features = dlsym(lib, "fake_cuda_features");
    if (!fake_features || (fake_features() != 0) != features) {
        printf("FAIL: the fake's features are not what this group needs\n");
        return 1;
    }
    if (features) {
        // the library's own kernels are loaded once per process, and stay:
        // the public ones with the image, the resident loop's own when the
        // first loop is made
        for (int b = 0; b < CW_BUILTIN_COUNT; b++) {
            cw_kernel *k = nullptr;
            if (cw_builtin_get_kernel((cw_builtin)b, &k) != CW_SUCCESS) {
                printf("FAIL: built-in kernel %d: %s\n", b, cw_last_error()->message);
                return 1;
            }
        }
        cw_context *wctx = nullptr;
        cw_resident *warm = nullptr;
        if (cw_context_create(&wctx, 0) != CW_SUCCESS || cw_resident_create(&warm, wctx, NULL) != CW_SUCCESS) {
            printf("FAIL: a first resident loop: %s\n", cw_last_error()->message);
            return 1;
        }
        cw_resident_destroy(&warm);
        cw_context_destroy(&wctx);
    }
    g_group_start = snapshot();
    if (!features) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_compile_time),
            cmocka_unit_test(test_library),
            cmocka_unit_test(test_moves_and_ownership),
            cmocka_unit_test(test_wrap_and_borrow),
            cmocka_unit_test(test_lease_returns_stream),
            cmocka_unit_test(test_future_and_timer),
            cmocka_unit_test(test_streams_and_futures),
            cmocka_unit_test(test_graphs),
            cmocka_unit_test(test_graph_handles),
            cmocka_unit_test(test_programs),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_partition_set_error),
            cmocka_unit_test(test_partition_calls_on_empty_set),
            cmocka_unit_test(test_resident_error),
            cmocka_unit_test(test_host_memory_and_copies),
            cmocka_unit_test(test_sharing),
            cmocka_unit_test(test_operators),
            cmocka_unit_test(test_pipeline_more),
            cmocka_unit_test(test_several_devices),
            cmocka_unit_test(test_every_handle_destroyed),
        };
        return cmocka_run_group_tests_name("C++ wrappers, a driver without optional features", tests, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library),
        cmocka_unit_test(test_modules_and_kernels),
        cmocka_unit_test(test_kernel_arguments),
        cmocka_unit_test(test_conditional_graphs),
        cmocka_unit_test(test_resident_loop),
        cmocka_unit_test(test_resident_tear_down_reports),
        cmocka_unit_test(test_fused_plans),
        cmocka_unit_test(test_host_memory_and_copies),
        cmocka_unit_test(test_several_devices),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_every_handle_destroyed),
    };
    return cmocka_run_group_tests_name("C++ wrappers, FAKE_CUDA_FEATURES=all", tests, NULL, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("SKIP: usage: %s PATH/libfakecuda.so\n", argv[0]);
        return 77;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    // no NCCL: the communicators' wrappers get CW_ERROR_NOT_SUPPORTED
    setenv("CUWEAVE_LIBNCCL", "/nonexistent/libnccl.so.2", 1);
    unsetenv("CUWEAVE_SERIALIZE");
    // the fake NVRTC beside the fake driver; no disk cache (never the user's)
    std::string nvrtc = argv[1];
    nvrtc = nvrtc.substr(0, nvrtc.rfind('/') + 1) + "libfakenvrtc.so";
    setenv("CUWEAVE_LIBNVRTC", nvrtc.c_str(), 1);
    setenv("CUWEAVE_CACHE_DIR", "off", 1);
    // The group with features runs in a child forked before any driver call
    // (the fake reads its features once per process).
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        int rc = run_group(argv[1], true);
        fflush(stdout);
        _exit(rc == 0 ? 0 : 1);
    }
    int wstatus = 0;
    if (waitpid(pid, &wstatus, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    const bool child_ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (!child_ok) printf("FAIL: the group with the fake's features failed (wait status %d)\n", wstatus);
    int rc = run_group(argv[1], false);
    return rc == 0 && child_ok ? 0 : 1;
}
