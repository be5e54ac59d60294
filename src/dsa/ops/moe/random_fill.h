// Device-side pseudo-random fills for benchmarks (multi-GB expert weights cannot be generated on
// the host in reasonable time). Values are a hash of (index, seed): reproducible, never all zero.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

// Bytes uniform in [lo, hi]; with `e4m3_finite` the NaN codes 0x7F/0xFF become 0x7E/0xFE.
void random_fill_bytes(Tensor& t, uint64_t seed, int lo = 0, int hi = 255, bool e4m3_finite = false);
// bf16 values uniform in [-a, a].
void random_fill_bf16(Tensor& t, uint64_t seed, float a);
// f32 values uniform in [lo, hi].
void random_fill_f32(Tensor& t, uint64_t seed, float lo, float hi);

}  // namespace dsa::ops
