/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the handles the API hands out, and the registry that says
// which are live (registry.cpp).
//
// Every kind of handle is listed once, here, with the tag its object starts
// with (its first 4 bytes, for debuggers) and the name errors use. A public
// handle is valid when its address is in the registry with its kind: checks
// never read the handle's memory, so a destroyed, foreign or garbage pointer
// is refused (CW_ERROR_INVALID_HANDLE) in every build. Lookups of live
// handles take no lock (a miss looks again under it); creation and
// destruction a short one.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cuweave/common.h"
#include "driver/error.hpp"

// X(type, tag): every handle kind of the API. The tag spells 4 letters.
#define CW_HANDLE_KINDS(X)                                \
    X(cw_context, 0x43574358u)       /* CWCX */           \
    X(cw_partition_group, 0x43574750u) /* CWGP */         \
    X(cw_stream, 0x43575354u)        /* CWST */           \
    X(cw_stream_pool, 0x4357504cu)   /* CWPL */           \
    X(cw_timer, 0x4357544du)         /* CWTM */           \
    X(cw_future, 0x43574655u)        /* CWFU */           \
    X(cw_buffer, 0x43574246u)        /* CWBF */           \
    X(cw_module, 0x43574d4fu)        /* CWMO */           \
    X(cw_kernel, 0x43574b4eu)        /* CWKN */           \
    X(cw_graph, 0x43574752u)         /* CWGR */           \
    X(cw_graph_exec, 0x43574558u)    /* CWEX */           \
    X(cw_resident, 0x43575253u)      /* CWRS */           \
    X(cw_program, 0x43575052u)       /* CWPR */           \
    X(cw_device_group, 0x43574447u)  /* CWDG */           \
    X(cw_comm, 0x4357434du)          /* CWCM */           \
    X(cw_operator, 0x43574f50u)      /* CWOP */           \
    X(cw_pipeline, 0x43575049u)      /* CWPI */           \
    X(cw_shared_event, 0x43575345u)  /* CWSE */           \
    X(cw_trace, 0x43575452u)         /* CWTR */           \
    X(cw_io, 0x4357494fu)            /* CWIO: not registered, see flow.hpp */

#define CW_HANDLE_DECLARE_(type, tag) struct type;
CW_HANDLE_KINDS(CW_HANDLE_DECLARE_)
#undef CW_HANDLE_DECLARE_

namespace cw {

constexpr uint32_t kTagDead = 0xdeadc0deu;  // a destroyed object's first word

// Each registered kind's index, from 1 (the registry keeps it with the
// address, in a slot's top byte).
enum HandleKindIndex : unsigned {
    kKindNone = 0,
#define CW_HANDLE_INDEX_(type, t) kKind_##type,
    CW_HANDLE_KINDS(CW_HANDLE_INDEX_)
#undef CW_HANDLE_INDEX_
    kKindEnd
};
static_assert(kKindEnd <= 256, "a kind's index fits in a byte");

// The tag, index and name of each kind: HandleKind<cw_stream>::tag, ::index, ::name.
template <class T>
struct HandleKind;
#define CW_HANDLE_KIND_(type, t)                       \
    template <>                                        \
    struct HandleKind<type> {                          \
        static constexpr uint32_t tag = t;             \
        static constexpr unsigned index = kKind_##type; \
        static constexpr const char *name = #type;     \
    };
CW_HANDLE_KINDS(CW_HANDLE_KIND_)
#undef CW_HANDLE_KIND_

namespace core {

// True when h is in the registry with this kind (HandleKind<T>::index). A
// live handle is never refused, even while others are created and
// destroyed; a destroyed one is refused once its destroy has returned.
bool handle_live(const void *h, unsigned kind);
// Removes h (whose tag, its first 4 bytes, is then set dead).
void handle_retire(void *h);
// Frees the memory of a destroyed handle object (after handle_retire and
// its destructor; instead of free()), late: the memory of the last
// kHandleQuarantine handle objects freed is held, the oldest freed when
// another comes. So no new object takes a destroyed handle's address, and
// a stale copy of the handle stays refused, until kHandleQuarantine more
// handle objects (of any kind, the library's own included) have been freed
// after it. Memory from malloc/calloc only; NULL does nothing.
constexpr size_t kHandleQuarantine = 256;
void handle_free(void *object);
// handle_free of an object of `bytes` made by handle_alloc(bytes) (or by
// malloc/calloc of that size): the same quarantine, and once out of it the
// memory is kept for a later handle_alloc(bytes) instead of freed (up to
// kHandleSpare blocks; more are freed). For objects made and destroyed per
// frame (a pipeline's recycled buffers): no malloc and free each time.
constexpr size_t kHandleSpare = 64;
void handle_free_sized(void *object, size_t bytes);
// Zeroed memory for a handle object of `bytes`: a block handle_free_sized
// gave back with that size, out of the quarantine, else calloc's. NULL when
// out of memory. Freed by handle_free(_sized), or free() before it is
// published.
void *handle_alloc(size_t bytes);
// True while object's memory is held (for tests).
bool handle_held(const void *object);
// Handle objects freed (handle_free) since the process started (for tests).
unsigned long handles_freed();
// Live handles of every kind (for tests).
size_t handles_live();
// Bytes of every table the registry holds, the current one and those kept
// for lookups (for tests).
size_t handles_bytes();
// Test hook: looks h up (with its registered kind) while, once the lookup
// has read h's first slot, the entry there is removed and put back (which
// moves h behind the lookup when h was placed past its first slot).
// 0: refused; 1: found without the lock; 2: found by the look again under
// the lock.
int handle_lookup_racing_move(const void *h);
// Test hook: the nth next reservation fails with CW_ERROR_OUT_OF_MEMORY.
void handle_registry_fail_next(int n);

// Room in the registry for handles about to be made: reserve() before
// anything is created (it is the only step that can fail), publish() once
// the object is complete (writes its tag and makes it live; cannot fail).
// Room not used is given back when the object goes out of scope.
class HandleRoom {
  public:
    HandleRoom() = default;
    ~HandleRoom();
    HandleRoom(const HandleRoom &) = delete;
    HandleRoom &operator=(const HandleRoom &) = delete;
    cw_status reserve(unsigned n = 1);
    template <class T>
    void publish(T *h) {
        publish_kind(h, HandleKind<T>::tag, HandleKind<T>::index);
    }

  private:
    void publish_kind(void *h, uint32_t tag, unsigned kind);
    unsigned held_ = 0;
};

}  // namespace core

// True when h is a live handle of its kind (never reads *h).
template <class T>
inline bool live(const T *h) {
    return core::handle_live(h, HandleKind<T>::index);
}
template <class T>
inline const char *kind_name(const T *) {
    return HandleKind<T>::name;
}

}  // namespace cw

// Rejects a NULL handle (CW_ERROR_INVALID_ARGUMENT) or one that is not a live
// handle of its type (CW_ERROR_INVALID_HANDLE, naming the argument and type).
#define CW_CHECK_HANDLE(h)                                                                      \
    do {                                                                                        \
        CW_CHECK_ARG((h) != NULL);                                                              \
        if (__builtin_expect(!::cw::live(h), 0))                                                \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s is not a live %s", #h, ::cw::kind_name(h)); \
    } while (0)

// The same for an element of an array of handles: "name[i] is not a live ...".
#define CW_CHECK_HANDLE_AT(array, i)                                                            \
    do {                                                                                        \
        if (__builtin_expect((array)[i] == NULL, 0))                                            \
            return ::cw::fail(CW_ERROR_INVALID_ARGUMENT, "invalid argument: %s[%zu] is NULL", #array, \
                              (size_t)(i));                                                     \
        if (__builtin_expect(!::cw::live((array)[i]), 0))                                       \
            return ::cw::fail(CW_ERROR_INVALID_HANDLE, "%s[%zu] is not a live %s", #array, (size_t)(i), \
                              ::cw::kind_name((array)[i]));                                     \
    } while (0)
