// Helpers shared by the format tests: host copies, slot lists, error messages, random rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/tensor.h"

using dsa::test::error_of;

namespace dsa::test {

// Raw bytes of a (contiguous) tensor on any device.
std::vector<uint8_t> host_bytes(const Tensor& t);

Tensor i64_tensor(const std::vector<int64_t>& v, Device dev = Device::cpu());

// n slots: distinct values in [0, num_slots) (n - skips of them) and `skips` entries of -1, shuffled.
std::vector<int64_t> random_slots(Rng& rng, int64_t n, int64_t num_slots, int64_t skips);

// bf16 [rows][cols]: each run of `group` values gets its own magnitude (10^U(-3, 2)), so group
// scales vary; some groups are all zero; a few values are large outliers.
Tensor random_grouped_bf16(Rng& rng, int64_t rows, int64_t cols, int group);

// Runs f, expects a dsa::Error, and returns its message ("" and a test failure when none is thrown).
// |got - want| <= max(|want| * 2^-4, scale * 2^-10): e4m3 round-to-nearest error for a value
// quantized with `scale` (half a step: 2^-4 relative in the normal range, 2^-10 * scale in the
// subnormal range), since x / scale never exceeds 448 with the formats' scales.
inline bool within_e4m3(float got, float want, float scale) {
  const float bound = std::max(std::fabs(want) * 0.0625f, scale * 0.0009765625f);
  return std::fabs(got - want) <= bound * 1.0001f;
}

}  // namespace dsa::test
