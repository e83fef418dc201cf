/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: SHA-256 and a fast 64-bit hash (see sha256.hpp).
#include "jit/sha256.hpp"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define CW_SHA_NI 1
#endif

namespace cw {

bool g_force_portable = false;

namespace {

const uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() noexcept {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h_, init, sizeof h_);
}

#if CW_SHA_NI
namespace {
// The x86 SHA extensions (Goldmont, Zen, Ice Lake and later): the same
// compression, about ten times faster. Chosen at run time.
__attribute__((target("sha,sse4.1,ssse3"))) void block_shani(uint32_t *h, const uint8_t *p) {
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bull, 0x0405060700010203ull);
    __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i *>(h));  // DCBA
    __m128i st1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + 4));  // HGFE
    tmp = _mm_shuffle_epi32(tmp, 0xB1);                                       // CDAB
    st1 = _mm_shuffle_epi32(st1, 0x1B);                                       // EFGH
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                               // ABEF
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                    // CDGH
    const __m128i save0 = st0, save1 = st1;
    __m128i w[4];
    for (int i = 0; i < 16; i++) {
        if (i < 4) {
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * i)), mask);
        } else {
            __m128i x = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);
            x = _mm_add_epi32(x, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
            w[i & 3] = _mm_sha256msg2_epu32(x, w[(i + 3) & 3]);
        }
        __m128i msg = _mm_add_epi32(w[i & 3], _mm_loadu_si128(reinterpret_cast<const __m128i *>(kK + 4 * i)));
        st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
        msg = _mm_shuffle_epi32(msg, 0x0E);
        st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
    }
    st0 = _mm_add_epi32(st0, save0);
    st1 = _mm_add_epi32(st1, save1);
    tmp = _mm_shuffle_epi32(st0, 0x1B);     // FEBA
    st1 = _mm_shuffle_epi32(st1, 0xB1);     // DCHG
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);  // DCBA
    st1 = _mm_alignr_epi8(st1, tmp, 8);     // HGFE
    _mm_storeu_si128(reinterpret_cast<__m128i *>(h), st0);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(h + 4), st1);
}

bool have_shani() {
    // CPUID, not __builtin_cpu_supports: clang 14 does not know "sha" there.
    static const bool has = [] {
        unsigned a, b, c, d;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
        const bool sse = (c & bit_SSE4_1) && (c & bit_SSSE3);
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        return sse && (b & bit_SHA) != 0;
    }();
    return has;
}
}  // namespace
#endif

void Sha256::block(const uint8_t *p) noexcept {
#if CW_SHA_NI
    if (!g_force_portable && have_shani()) {
        block_shani(h_, p);
        return;
    }
#endif
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
}

void Sha256::update(const void *data, size_t n) noexcept {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    total_ += n;
    if (fill_) {
        size_t take = 64 - fill_ < n ? 64 - fill_ : n;
        memcpy(buf_ + fill_, p, take);
        fill_ += take;
        p += take;
        n -= take;
        if (fill_ == 64) {
            block(buf_);
            fill_ = 0;
        }
    }
    for (; n >= 64; p += 64, n -= 64) block(p);
    if (n) {
        memcpy(buf_, p, n);
        fill_ = n;
    }
}

void Sha256::finish(uint8_t out[32]) noexcept {
    const uint64_t bits = total_ * 8;
    const uint8_t one = 0x80, zero = 0;
    update(&one, 1);
    while (fill_ != 56) update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    update(len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h_[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h_[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h_[i] >> 8);
        out[4 * i + 3] = (uint8_t)h_[i];
    }
}

void sha256(const void *data, size_t n, uint8_t out[32]) noexcept {
    Sha256 s;
    s.update(data, n);
    s.finish(out);
}

void hex32(const uint8_t d[32], char out[65]) noexcept {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[64] = '\0';
}

uint64_t fast_hash(const void *data, size_t n) noexcept {
    // Four independent lanes of 8 bytes (32 bytes a turn, so that the
    // multiplies overlap), multiply-xorshift mixing in the spirit of
    // splitmix64; the lanes and the tail are folded at the end.
    const uint8_t *p = static_cast<const uint8_t *>(data);
    const uint64_t m1 = 0xbf58476d1ce4e5b9ull, m2 = 0x94d049bb133111ebull;
    uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ n, 0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull, 0x2545f4914f6cdd1dull};
    while (n >= 32) {
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + 8 * l, 8);
            h[l] ^= w * m1;
            h[l] = (h[l] << 27 | h[l] >> 37) * m2;
        }
        p += 32;
        n -= 32;
    }
    uint64_t x = h[0] ^ (h[1] << 1 | h[1] >> 63) ^ (h[2] << 2 | h[2] >> 62) ^ (h[3] << 3 | h[3] >> 61);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        x ^= w * m1;
        x = (x << 27 | x >> 37) * m2;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    x ^= w * m1;
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

}  // namespace cw
