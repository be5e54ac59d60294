// Shared test helpers: CUDA presence (GPU tests skip cleanly and say so), seeded random inputs
// (fresh each run; the seed is printed and DSA_TEST_SEED reproduces a run), output poisoning.
#pragma once
#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dsa/core/device.h"
#include "dsa/core/tensor.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::test {

bool cuda_available();

// Seed for this test: DSA_TEST_SEED when set, else fresh from the clock. Logged once per test.
uint64_t test_seed();

class Rng {
 public:
  explicit Rng(uint64_t seed = test_seed()) : gen_(seed) {}
  float normal(float mean = 0.f, float stddev = 1.f) { return std::normal_distribution<float>(mean, stddev)(gen_); }
  float uniform(float lo = 0.f, float hi = 1.f) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  int64_t randint(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }  // [lo, hi]
  std::mt19937_64& gen() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// Host tensors filled with random values (bf16 values are rounded from normal(0, stddev)).
Tensor random_bf16(const Shape& shape, Rng& rng, float stddev = 1.f);
Tensor random_f32(const Shape& shape, Rng& rng, float stddev = 1.f);
Tensor random_bytes(const Shape& shape, DType dtype, Rng& rng);

// Fills with 0xFF bytes: NaN for f32/bf16/e4m3, so any element a kernel fails to write shows up.
void poison(Tensor& t);

// Runs f and returns the message of the dsa::Error it throws, to compare with the exact text a
// user would see. Nothing thrown, or another exception type, is a test failure (and returns
// "(no error)" / "").
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected dsa::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected dsa::Error, nothing was thrown";
  return "(no error)";
}

}  // namespace dsa::test

// Skips the current test, with a message saying why, when no CUDA device is usable.
#define DSA_REQUIRE_CUDA()                                                          \
  do {                                                                              \
    if (!::dsa::test::cuda_available())                                          \
      GTEST_SKIP() << "no CUDA device (" << ::dsa::cuda_unavailable_reason()        \
                   << "): GPU test skipped";                                        \
  } while (0)

// Skips the current test (or its remaining part), saying so, when dsa was built without PCRE2:
// no tokenizer loads, so neither do commands on checkpoint folders that hold one.
#define DSA_REQUIRE_TOKENIZER()                                                    \
  do {                                                                             \
    if (!::dsa::tokenizer_available()) GTEST_SKIP() << "dsa built without PCRE2"; \
  } while (0)
