/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: malloc'ed copies of strings and a growable string (the
// library never throws).
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace cw {

// A malloc'ed copy of the n bytes at s, terminated (NULL when out of memory).
inline char *dup_string(const char *s, size_t n) {
    char *d = static_cast<char *>(malloc(n + 1));
    if (!d) return nullptr;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
inline char *dup_string(const char *s) { return dup_string(s, strlen(s)); }

// A growable malloc'ed string (the library never throws): ok turns false
// for good when memory runs out; s is NUL-terminated while ok (NULL before
// the first add). The owner frees s (or takes it).
struct Text {
    char *s = nullptr;
    size_t n = 0, cap = 0;
    bool ok = true;
    void add(const char *t, size_t len) {
        if (!ok) return;
        if (n + len + 1 > cap) {
            size_t c = cap ? cap : 4096;
            while (n + len + 1 > c) c *= 2;
            char *p = static_cast<char *>(realloc(s, c));
            if (!p) {
                ok = false;
                return;
            }
            s = p;
            cap = c;
        }
        memcpy(s + n, t, len);
        n += len;
        s[n] = 0;
    }
    void add(const char *t) { add(t, strlen(t)); }
    // printf-style; the text may be of any length.
    void addf(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        va_list a;
        va_start(a, fmt);
        char small[256];
        va_list b;
        va_copy(b, a);
        const int len = vsnprintf(small, sizeof small, fmt, a);
        va_end(a);
        if (len < 0) {
            ok = false;
        } else if ((size_t)len < sizeof small) {
            add(small, (size_t)len);
        } else {
            char *big = static_cast<char *>(malloc((size_t)len + 1));
            if (!big) ok = false;
            else {
                vsnprintf(big, (size_t)len + 1, fmt, b);
                add(big, (size_t)len);
                free(big);
            }
        }
        va_end(b);
    }
};

}  // namespace cw
