/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: NVTX ranges and marks in the "cuweave" domain (nvtx.hpp).
// The only file that includes NVTX's headers: they define NVTX's loader
// (hidden, weak: one copy per program, shared with the program's own NVTX
// code of the same version), which looks for a tool at the first NVTX call.
#include "base/nvtx.hpp"

#if CW_HAVE_NVTX

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// NVTX's headers as system headers (their own switch): cuweave's warnings
// are for cuweave's code. No static injection: libcuweave.a must not define
// the weak InitializeInjectionNvtx2_fnptr that a program's tool may define.
#define NVTX_AS_SYSTEM_HEADER
#define NVTX_SUPPORT_STATIC_INJECTION_LIBRARY 0
#include CW_NVTX_HEADER

namespace cw {
namespace nvtx {

std::atomic<int> g_state{0};

namespace {

enum Category : uint32_t {
#define CW_NVTX_CAT(name, id, argb) cat_##name = id,
    CW_NVTX_CATEGORIES(CW_NVTX_CAT)
#undef CW_NVTX_CAT
};

uint32_t color_of(uint32_t cat) {
#define CW_NVTX_CAT(name, id, argb) \
    if (cat == id) return argb;
    CW_NVTX_CATEGORIES(CW_NVTX_CAT)
#undef CW_NVTX_CAT
    return 0xff808080u;
}

const char *const kText[kNames] = {
#define CW_NVTX_TEXT(id, text, cat) text,
    CW_NVTX_NAMES(CW_NVTX_TEXT)
#undef CW_NVTX_TEXT
};
const uint32_t kCategory[kNames] = {
#define CW_NVTX_CATOF(id, text, cat) cat_##cat,
    CW_NVTX_NAMES(CW_NVTX_CATOF)
#undef CW_NVTX_CATOF
};

nvtxDomainHandle_t g_domain;
nvtxStringHandle_t g_names[kNames];
std::atomic<unsigned> g_registered{0};

// The callers' names (operators'), registered once each: an open-addressing
// table, read without a lock (an entry is published by its state's release
// store after its text and handle are written), filled under g_add. When
// full, a name goes as a plain string (the tool copies it).
constexpr unsigned kTexts = 512;
constexpr size_t kTextMax = 63;
struct Text {
    std::atomic<uint32_t> state;  // 0 empty, else the name's hash | 1
    char text[kTextMax + 1];
    nvtxStringHandle_t handle;
};
Text *g_texts;  // kTexts entries, made with the domain
pthread_mutex_t g_add = PTHREAD_MUTEX_INITIALIZER;

uint32_t hash_of(const char *s, size_t n) {
    uint32_t h = 2166136261u;  // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h | 1u;
}

pthread_once_t g_once = PTHREAD_ONCE_INIT;

void init() {
    // The first NVTX call: NVTX looks for a tool (NVTX_INJECTION64_PATH);
    // without one every NVTX function is a no-op and the domain is NULL.
    nvtxDomainHandle_t d = nvtxDomainCreateA("cuweave");
    if (!d) {
        g_state.store(1, std::memory_order_release);
        return;
    }
#define CW_NVTX_CAT(name, id, argb) nvtxDomainNameCategoryA(d, id, #name);
    CW_NVTX_CATEGORIES(CW_NVTX_CAT)
#undef CW_NVTX_CAT
    for (unsigned i = 0; i < kNames; i++) g_names[i] = nvtxDomainRegisterStringA(d, kText[i]);
    g_registered.store(kNames, std::memory_order_relaxed);
    g_texts = static_cast<Text *>(calloc(kTexts, sizeof(Text)));  // NULL: every caller's name goes as a string
    g_domain = d;
    g_state.store(2, std::memory_order_release);
}

void attributes(nvtxEventAttributes_t *a, uint32_t cat) {
    memset(a, 0, sizeof *a);
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a->category = cat;
    a->colorType = NVTX_COLOR_ARGB;
    a->color = color_of(cat);
}

void named(nvtxEventAttributes_t *a, Name n) {
    attributes(a, kCategory[n]);
    a->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a->message.registered = g_names[n];
}

// The handle of a caller's name (registered the first time), or NULL when
// the table is full.
nvtxStringHandle_t text_handle(const char *text, size_t n) {
    if (!g_texts) return nullptr;
    const uint32_t h = hash_of(text, n);
    for (int locked = 0; locked < 2; locked++) {
        if (locked) pthread_mutex_lock(&g_add);
        for (unsigned k = 0; k < kTexts; k++) {
            Text &t = g_texts[(h + k) % kTexts];
            const uint32_t st = t.state.load(std::memory_order_acquire);
            if (st == 0) {
                if (!locked) break;  // not there: look again, and add it, under the lock
                memcpy(t.text, text, n);
                t.text[n] = '\0';
                t.handle = nvtxDomainRegisterStringA(g_domain, t.text);
                g_registered.fetch_add(1, std::memory_order_relaxed);
                t.state.store(h, std::memory_order_release);
                pthread_mutex_unlock(&g_add);
                return t.handle;
            }
            if (st == h && strncmp(t.text, text, n) == 0 && t.text[n] == '\0') {
                if (locked) pthread_mutex_unlock(&g_add);
                return t.handle;
            }
        }
        if (locked) pthread_mutex_unlock(&g_add);
    }
    return nullptr;
}

}  // namespace

bool ask() {
    pthread_once(&g_once, init);
    return g_state.load(std::memory_order_acquire) == 2;
}

void push(Name n) {
    nvtxEventAttributes_t a;
    named(&a, n);
    nvtxDomainRangePushEx(g_domain, &a);
}

void push(Name n, uint64_t payload) {
    nvtxEventAttributes_t a;
    named(&a, n);
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    nvtxDomainRangePushEx(g_domain, &a);
}

void push_text(Name cat, const char *text) {
    if (!text || !*text) {
        push(cat);
        return;
    }
    const size_t n = strnlen(text, kTextMax);
    nvtxEventAttributes_t a;
    attributes(&a, kCategory[cat]);
    char copy[kTextMax + 1];
    nvtxStringHandle_t h = text_handle(text, n);
    if (h) {
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = h;
    } else {
        memcpy(copy, text, n);
        copy[n] = '\0';
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = copy;
    }
    nvtxDomainRangePushEx(g_domain, &a);
}

void pop() { nvtxDomainRangePop(g_domain); }

void mark(Name n, uint64_t payload) {
    if (!on()) return;
    nvtxEventAttributes_t a;
    named(&a, n);
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    nvtxDomainMarkEx(g_domain, &a);
}

uint64_t start(Name n) {
    if (!on()) return 0;
    nvtxEventAttributes_t a;
    named(&a, n);
    return nvtxDomainRangeStartEx(g_domain, &a);
}

void end(uint64_t id) {
    if (on()) nvtxDomainRangeEnd(g_domain, id);
}

unsigned registered() { return g_registered.load(std::memory_order_relaxed); }

}  // namespace nvtx
}  // namespace cw

#else  // the ranges compiled out: the macros of nvtx.hpp make no call; these are for the tests' hooks

namespace cw {
namespace nvtx {

std::atomic<int> g_state{1};
bool ask() { return false; }
void push(Name) {}
void push(Name, uint64_t) {}
void push_text(Name, const char *) {}
void pop() {}
void mark(Name, uint64_t) {}
uint64_t start(Name) { return 0; }
void end(uint64_t) {}
unsigned registered() { return 0; }

}  // namespace nvtx
}  // namespace cw

#endif
