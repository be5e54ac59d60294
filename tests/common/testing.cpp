#include "common/testing.h"

#include <chrono>
#include <cstdlib>

#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"

namespace dsa::test {

bool cuda_available() { return !cuda_devices().empty(); }

uint64_t test_seed() {
  uint64_t seed;
  if (const char* s = std::getenv("DSA_TEST_SEED"))
    seed = std::strtoull(s, nullptr, 10);
  else
    seed = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "?";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[seed] %s DSA_TEST_SEED=%llu\n", name.c_str(), static_cast<unsigned long long>(seed));
  return seed;
}

Tensor random_bf16(const Shape& shape, Rng& rng, float stddev) {
  Tensor t = Tensor::empty(shape, DType::BF16);
  auto* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16_bits(rng.normal(0.f, stddev));
  return t;
}

Tensor random_f32(const Shape& shape, Rng& rng, float stddev) {
  Tensor t = Tensor::empty(shape, DType::F32);
  auto* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.normal(0.f, stddev);
  return t;
}

Tensor random_bytes(const Shape& shape, DType dtype, Rng& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = t.data<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng.randint(0, 255));
  return t;
}

void poison(Tensor& t) { t.fill_bytes(0xFF); }

}  // namespace dsa::test
