/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: malloc'ed copies of strings (the library never throws).
#pragma once

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

}  // namespace cw
