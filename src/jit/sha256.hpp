/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave jit layer: SHA-256 (FIPS 180-4), for the kernel cache's keys and
// the integrity hash of its files, and a fast 64-bit hash for the memory
// cache's buckets.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace cw {

class Sha256 {
  public:
    Sha256() noexcept;
    void update(const void *data, size_t n) noexcept;
    // Writes the 32-byte digest; the object must not be updated afterwards.
    void finish(uint8_t out[32]) noexcept;

  private:
    void block(const uint8_t *p) noexcept;
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t fill_ = 0;
    uint64_t total_ = 0;
};

void sha256(const void *data, size_t n, uint8_t out[32]) noexcept;
// Tests: true forces the portable code where the CPU has SHA instructions.
extern bool g_force_portable;
// 64 lowercase hex digits and a NUL.
void hex32(const uint8_t d[32], char out[65]) noexcept;

// A fast, non-cryptographic 64-bit hash (bucket choice only; equality is
// always decided by comparing the bytes).
uint64_t fast_hash(const void *data, size_t n) noexcept;

}  // namespace cw
