#include "util.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "dsa/core/dtype_conv.h"

namespace dsa::test {

std::vector<uint8_t> host_bytes(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  const auto* p = h.data<uint8_t>();
  return std::vector<uint8_t>(p, p + h.nbytes());
}

Tensor i64_tensor(const std::vector<int64_t>& v, Device dev) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t.to(dev);
}

std::vector<int64_t> random_slots(Rng& rng, int64_t n, int64_t num_slots, int64_t skips) {
  EXPECT_LE(n - skips, num_slots);
  std::unordered_set<int64_t> used;
  std::vector<int64_t> s;
  while (static_cast<int64_t>(s.size()) < n - skips) {
    int64_t v = rng.randint(0, num_slots - 1);
    if (used.insert(v).second) s.push_back(v);
  }
  for (int64_t i = 0; i < skips; ++i) s.push_back(-1);
  std::shuffle(s.begin(), s.end(), rng.gen());
  return s;
}

Tensor random_grouped_bf16(Rng& rng, int64_t rows, int64_t cols, int group) {
  Tensor t = Tensor::empty({rows, cols}, DType::BF16);
  auto* p = t.data<uint16_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += group) {
      const float mag = std::pow(10.f, rng.uniform(-3.f, 2.f));
      const bool zero = rng.uniform() < 0.05f;
      for (int64_t c = c0; c < std::min(cols, c0 + group); ++c) {
        float v = zero ? 0.f : rng.normal(0.f, mag);
        if (!zero && rng.uniform() < 0.01f) v *= 30.f;
        p[r * cols + c] = f32_to_bf16_bits(v);
      }
    }
  }
  return t;
}

}  // namespace dsa::test
