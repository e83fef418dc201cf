/* SPDX-License-Identifier: BSD-2-Clause */
/* Probe, not part of the library: LD_PRELOAD it to get a host backtrace
 * when a process aborts or faults (glibc's "double free or corruption"
 * calls abort). Offsets into shared objects (lib(+0x...)) are for
 * addr2line -e lib. Build: cc -shared -fPIC -o abort_trace.so abort_trace.c */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_signal(int sig) {
    void *frames[64];
    int n = backtrace(frames, 64);
    static const char head[] = "\n==== abort_trace: backtrace ====\n";
    (void)write(2, head, sizeof head - 1);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    signal(SIGABRT, on_signal);
    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
}
