// Small helpers shared by the op tests (tests/compressor, indexer, mhc, norm, rope, tensor and the
// model-op golden vectors in tests/modelops): element access as float, comparisons that never let
// NaN pass, device round trips.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/ops/norm/elem.h"

namespace dsa::test {

inline float at(const Tensor& t, int64_t i) {  // contiguous CPU tensor, element i as float
  return ops::load_f(t.raw(), t.dtype(), i);
}

inline std::vector<float> values(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<float> v(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) v[static_cast<size_t>(i)] = at(c, i);
  return v;
}

inline Tensor f32_from(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::F32);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

inline Tensor random_act(const Shape& shape, DType dt, Rng& rng, float stddev = 1.f) {
  return dt == DType::BF16 ? random_bf16(shape, rng, stddev) : random_f32(shape, rng, stddev);
}

// Max |a - b| / (atol + rtol |b|) must be <= 1; every element must be finite in both.
inline void expect_close(const std::vector<float>& a, const std::vector<float>& b, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << what << ": non-finite at " << i << ": " << a[i] << " vs "
                                                            << b[i];
    double r = std::abs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::abs(static_cast<double>(b[i])));
    if (r > worst) worst = r, wi = i;
  }
  EXPECT_LE(worst, 1.0) << what << ": worst at " << wi << ": " << a[wi] << " vs " << b[wi];
}

inline void expect_close(const Tensor& a, const Tensor& b, double atol, double rtol, const std::string& what) {
  expect_close(values(a), values(b), atol, rtol, what);
}

}  // namespace dsa::test
