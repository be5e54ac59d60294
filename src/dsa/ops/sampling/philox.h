// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so any draw is a pure function of (key, counter) and the same on the
// host and the device. Used by the sampler for per-request, batch-independent draws.
#pragma once
#include <cstdint>

#include "dsa/core/dtype_conv.h"  // DSA_HD

namespace dsa::ops {

struct Philox4 {
  uint32_t v[4];
};

DSA_HD uint32_t philox_mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *lo = static_cast<uint32_t>(p);
  return static_cast<uint32_t>(p >> 32);
}

DSA_HD Philox4 philox4x32_10(Philox4 c, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t lo0, lo1;
    const uint32_t hi0 = philox_mulhi(0xD2511F53u, c.v[0], &lo0);
    const uint32_t hi1 = philox_mulhi(0xCD9E8D57u, c.v[2], &lo1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Uniform in (0, 1) with 24 random bits (exact in float): ((x >> 8) + 0.5) / 2^24.
DSA_HD float philox_uniform(uint64_t seed, uint64_t counter, uint64_t id) {
  const Philox4 out = philox4x32_10(
      Philox4{{static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32), static_cast<uint32_t>(counter),
               static_cast<uint32_t>(counter >> 32)}},
      seed);
  return (static_cast<float>(out.v[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

}  // namespace dsa::ops
