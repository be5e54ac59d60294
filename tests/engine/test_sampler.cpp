// Sampler: greedy is the argmax (lowest id on ties; a row with NaN gives -1), top_k = 1 and a tiny top_p
// are greedy too, draws follow softmax(logits / temperature) within the cut, a seed reproduces
// (the draw of each position is a pure function of seed and position).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/engine/sampler.h"

namespace dsa::engine {
namespace {

TEST(Sampler, GreedyIsArgmax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l{0.5f, 2.f, nan, 2.f, -1.f};
  EXPECT_EQ(argmax_token(l.data(), 5), 1);
  // The sampler refuses a row with a NaN (-1: the engine reports a non-finite logit) ...
  EXPECT_EQ(sample_token(l.data(), 5, SamplingParams{}, 1, 0), -1);
  // ... and is the argmax, lowest id on ties, of a finite row.
  l[2] = -5.f;
  EXPECT_EQ(sample_token(l.data(), 5, SamplingParams{}, 1, 0), 1);
  std::vector<float> all_nan{nan, nan};
  EXPECT_THROW(argmax_token(all_nan.data(), 2), Error);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::mt19937_64 gen(3);
  std::normal_distribution<float> nd;
  std::vector<float> l(1000);
  for (float& x : l) x = nd(gen);
  const int32_t best = argmax_token(l.data(), 1000);
  SamplingParams k1;
  k1.temperature = 5;
  k1.top_k = 1;
  SamplingParams p0;
  p0.temperature = 5;
  p0.top_p = 1e-9;
  for (uint64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(l.data(), 1000, k1, 7, i), best);
    EXPECT_EQ(sample_token(l.data(), 1000, p0, 7, i), best);
  }
}

// Frequencies against the exact probabilities (binomial 5-sigma bounds at 40000 draws).
TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> l{0.f, std::log(3.f), std::log(6.f), -50.f};  // p = 0.1, 0.3, 0.6, ~0
  auto freqs = [&](const SamplingParams& p) {
    std::vector<double> f(4);
    for (uint64_t i = 0; i < 40000; ++i) f[static_cast<size_t>(sample_token(l.data(), 4, p, 11, i))] += 1.0 / 40000;
    return f;
  };
  SamplingParams t1;
  t1.temperature = 1;
  auto f = freqs(t1);
  EXPECT_NEAR(f[0], 0.1, 0.008);
  EXPECT_NEAR(f[1], 0.3, 0.012);
  EXPECT_NEAR(f[2], 0.6, 0.012);
  EXPECT_EQ(f[3], 0.0);
  // top_k = 2: ids 2 and 1 renormalised to 2/3, 1/3.
  SamplingParams k2 = t1;
  k2.top_k = 2;
  f = freqs(k2);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[2], 2.0 / 3, 0.012);
  // top_p = 0.8: 0.6 + 0.3 reach it; id 0 is cut.
  SamplingParams p8 = t1;
  p8.top_p = 0.8;
  f = freqs(p8);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[1], 1.0 / 3, 0.012);
  // temperature 2: p ~ sqrt(1, 3, 6) normalised.
  SamplingParams t2;
  t2.temperature = 2;
  f = freqs(t2);
  const double z = 1 + std::sqrt(3.0) + std::sqrt(6.0);
  EXPECT_NEAR(f[0], 1 / z, 0.012);
  EXPECT_NEAR(f[2], std::sqrt(6.0) / z, 0.012);
}

TEST(Sampler, SeedReproduces) {
  std::vector<float> l(300);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(static_cast<float>(i));
  SamplingParams p;
  p.temperature = 1;
  auto draws = [&](uint64_t seed) {
    std::vector<int32_t> v;
    for (uint64_t i = 0; i < 20; ++i) v.push_back(sample_token(l.data(), 300, p, seed, i));
    return v;
  };
  EXPECT_EQ(draws(5), draws(5));
  EXPECT_NE(draws(5), draws(6));
}

}  // namespace
}  // namespace dsa::engine
