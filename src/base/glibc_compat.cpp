/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: what keeps libcuweave.so's glibc floor low when the C++
// runtime is linked in (-static-libstdc++: the wheel, -Dstatic_libstdcxx,
// make STATIC_LIBSTDCXX=1). GCC 12's libstdc++.a brings std::random_device
// along with std::__throw_system_error (std::mutex's), and its random.o
// calls arc4random, new in glibc 2.36: linked in, the library would need
// GLIBC_2.36 (Debian 12, not Ubuntu 22.04 nor RHEL 9) for a function it
// never calls. This definition, hidden, is the one random.o binds to:
// getrandom (glibc 2.25). The library's floor is then glibc 2.34 (its
// pthread and dl symbols, built against glibc 2.34 or newer); docs/python.md,
// "The wheel". With the C++ runtime shared, nothing refers to it.
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void);

extern "C" uint32_t arc4random(void) {
    uint32_t v = 0;
    for (;;) {
        const ssize_t n = getrandom(&v, sizeof v, 0);
        if (n == (ssize_t)sizeof v) return v;
        if (n < 0 && errno != EINTR) return v;  // never returns an error: the kernel has getrandom since 3.17
    }
}
