/* SPDX-License-Identifier: BSD-2-Clause */
/* Probe, not part of the library: the waiter's half of the stream pool's
 * release/waiter handshake (src/core/pool.cpp, "Waiting"), as the old and
 * the new code order it. A waiter adds itself to the waiter count (seq_cst
 * read-modify-write), then looks at the free list; a release pushes onto
 * the free list (seq_cst), then reads the count (seq_cst). No lost wake-up
 * needs one side to see the other's write: store-to-load order on both.
 *
 * See the code a weakly ordered machine gets (no target libraries needed):
 *   clang -O2 -S --target=powerpc64le-linux-gnu -ffreestanding -o - pool_handshake.c
 * waiter_old: stwcx. (the add) ... lwsync ... ld free_head. lwsync does not
 * order a store before a later load, so the load may be satisfied before
 * the add is visible to the releasing thread: both read the old values.
 * waiter_new: lwsync; sync ... ld free_head (the sync orders them).
 * On x86 both are `lock xadd` + `mov`, and the lock orders fully: an x86
 * run cannot show the old code's lost wake-up. */
#include <stdint.h>

int waiters;
uint64_t free_head;

uint64_t waiter_old(void) {
    __atomic_fetch_add(&waiters, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&free_head, __ATOMIC_ACQUIRE);
}

uint64_t waiter_new(void) {
    __atomic_fetch_add(&waiters, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&free_head, __ATOMIC_SEQ_CST);
}

int release(uint64_t pushed) {
    uint64_t old = __atomic_load_n(&free_head, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&free_head, &old, pushed, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return __atomic_load_n(&waiters, __ATOMIC_SEQ_CST);
}
