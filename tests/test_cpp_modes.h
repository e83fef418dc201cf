/* SPDX-License-Identifier: BSD-2-Clause */
// The interface between the two translation units of test_cpp_modes: C
// types only, since the wrappers' types are not the same in the two modes.
#ifndef CW_TEST_CPP_MODES_H
#define CW_TEST_CPP_MODES_H

// A wrapper function's address as one unit sees it.
typedef void (*modes_fn)(void);

// The addresses of the same wrapper functions as each unit sees them: if the
// two modes shared definitions (one mangled name for both), the linker would
// keep one of them and the two units would see the same address.
struct modes_addresses {
    modes_fn context_create;
    modes_fn stream_create;
    modes_fn future_create;
    modes_fn device_count;
    modes_fn init;
};

// test_cpp_modes.cpp, built with exceptions.
modes_addresses modes_exceptions_addresses();
// Uses the wrappers on the fake driver in this unit's mode; nullptr when
// every call behaved as the mode says, else what did not.
const char *modes_exceptions_run();

// test_cpp_modes_noexcept.cpp, built with -fno-exceptions.
modes_addresses modes_noexcept_addresses();
const char *modes_noexcept_run();

#endif
