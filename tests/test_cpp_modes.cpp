/* SPDX-License-Identifier: BSD-2-Clause */
// One program, both modes of the C++ wrappers: this translation unit uses
// them with exceptions, test_cpp_modes_noexcept.cpp (built with
// -fno-exceptions) uses the same wrappers (cw::context, cw::stream,
// cw::future, cw::device_count, cw::init) without. The two modes give the
// same functions different return types; cuweave.hpp puts each mode's
// definitions in an inline namespace of its own (cw::v0_3::exc,
// cw::v0_3::noexc), so the program breaks no one-definition rule. Checks:
//  - each unit sees its own definition of each wrapper function (their
//    addresses differ: with one mangled name for both modes the linker would
//    keep one definition for both units);
//  - each unit gets its own mode's behaviour on the fake driver (argv[1]): a
//    refused call throws cw::error here and returns a cw::result there, and
//    no exception reaches the no-exceptions unit;
//  - every stream and event made went.
// Both units are built with -fno-inline, so that every call goes through
// the out-of-line (COMDAT) definition the linker keeps, as in a debug build.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <type_traits>

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
}

#include "cuweave/cuweave.hpp"
#include "test_cpp_modes.h"

#ifdef CW_HPP_NO_EXCEPTIONS
#error "test_cpp_modes.cpp is the unit built with exceptions"
#endif

static_assert(std::is_same<decltype(cw::context::create(0)), cw::context>::value, "exceptions: a value");
static_assert(std::is_same<decltype(std::declval<const cw::stream &>().synchronize()), void>::value,
              "exceptions: void");

modes_addresses modes_exceptions_addresses() {
    modes_addresses a;
    a.context_create = reinterpret_cast<modes_fn>(&cw::context::create);
    a.stream_create = reinterpret_cast<modes_fn>(&cw::stream::create);
    a.future_create = reinterpret_cast<modes_fn>(&cw::future::create);
    a.device_count = reinterpret_cast<modes_fn>(&cw::device_count);
    a.init = reinterpret_cast<modes_fn>(&cw::init);
    return a;
}

const char *modes_exceptions_run() {
    try {
        cw::init();
        if (cw::device_count() != 1) return "exceptions: device_count is not 1";
        cw::context ctx = cw::context::create(0);
        if (!ctx.owns()) return "exceptions: context::create gave no context";
        cw::stream s = cw::stream::create(ctx);
        if (!s.get()) return "exceptions: stream::create gave no stream";
        cw_stream_settings bad = cw::defaults<cw_stream_settings>();
        bad.flags = 7;
        bool thrown = false;
        try {
            cw::stream refused = cw::stream::create(ctx, &bad);
            (void)refused;
        } catch (const cw::error &e) {
            thrown = e.status() == CW_ERROR_INVALID_ARGUMENT && strstr(e.what(), "cw_stream_create");
        }
        if (!thrown) return "exceptions: a refused stream::create did not throw cw::error(CW_ERROR_INVALID_ARGUMENT)";
        cw::future f = cw::future::create(s);
        f.wait(5000000);
        if (!f.ready()) return "exceptions: future::ready is not true";
        thrown = false;
        try {
            cw::stream().synchronize();
        } catch (const cw::error &e) {
            thrown = e.status() == CW_ERROR_INVALID_ARGUMENT;
        }
        if (!thrown) return "exceptions: synchronize of an empty stream did not throw";
    } catch (const cw::error &e) {
        static std::string why;
        why = std::string("exceptions: unexpected cw::error: ") + e.what();
        return why.c_str();
    }
    cw_clear_error();
    return nullptr;
}

static long (*fake_live)(const char *kind);
static int (*fake_drain)(int timeout_ms);

static void test_distinct_definitions(void **) {
    const modes_addresses e = modes_exceptions_addresses(), n = modes_noexcept_addresses();
    const modes_fn pairs[][2] = {{e.context_create, n.context_create},
                                 {e.stream_create, n.stream_create},
                                 {e.future_create, n.future_create},
                                 {e.device_count, n.device_count},
                                 {e.init, n.init}};
    const char *names[] = {"cw::context::create", "cw::stream::create", "cw::future::create", "cw::device_count",
                           "cw::init"};
    int shared = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (pairs[i][0] == pairs[i][1]) {
            printf("# %s: one definition for both modes (the linker kept one of two with different return types)\n",
                   names[i]);
            shared++;
        }
    assert_int_equal(shared, 0);
}

static void test_exceptions_unit(void **) {
    const long s0 = fake_live("stream"), e0 = fake_live("event");
    const char *why = modes_exceptions_run();
    if (why) fail_msg("%s", why);
    assert_int_equal(fake_drain(5000), 1);
    assert_int_equal(fake_live("stream"), s0);
    assert_int_equal(fake_live("event"), e0);
}

static void test_noexcept_unit(void **) {
    const long s0 = fake_live("stream"), e0 = fake_live("event");
    const char *why = nullptr;
    try {
        why = modes_noexcept_run();
    } catch (...) {
        fail_msg("an exception reached the no-exceptions unit");
    }
    if (why) fail_msg("%s", why);
    assert_int_equal(fake_drain(5000), 1);
    assert_int_equal(fake_live("stream"), s0);
    assert_int_equal(fake_live("event"), e0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("SKIP: usage: %s PATH/libfakecuda.so\n", argv[0]);
        return 77;
    }
    setenv("CUWEAVE_LIBCUDA", argv[1], 1);
    unsetenv("FAKE_CUDA_FEATURES");
    if (cw_init() != CW_SUCCESS) {
        printf("FAIL: the fake driver did not load: %s\n", cw_last_error()->message);
        return 1;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    if (!lib || !(*(void **)&fake_live = dlsym(lib, "fake_cuda_live")) ||
        !(*(void **)&fake_drain = dlsym(lib, "fake_cuda_drain"))) {
        printf("FAIL: fake_cuda_live not found in %s\n", argv[1]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_definitions),
        cmocka_unit_test(test_exceptions_unit),
        cmocka_unit_test(test_noexcept_unit),
    };
    return cmocka_run_group_tests_name("C++ wrappers, both modes in one program", tests, NULL, NULL);
}
