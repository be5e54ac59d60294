// Sampler: greedy is the argmax (lowest id on ties; a row with NaN gives -1), top_k = 1 and a
// tiny top_p are greedy too, draws follow softmax(logits / temperature) within the cut (min_p too), a seed
// reproduces (each position's draw is a pure function of seed and position); the logit processors
// (bias, min_tokens, penalties) give hand-computed values; token_logprob is the log-softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
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
  const uint64_t seed = 1;
  uint64_t counter = 0;
  EXPECT_EQ(argmax_token(l.data(), 5), 1);
  // The sampler refuses a row with a NaN (-1: the engine reports a non-finite logit) ...
  EXPECT_EQ(sample_token(l.data(), 5, SamplingParams{}, seed, counter++), -1);
  // ... and is the argmax, lowest id on ties, of a finite row.
  l[2] = -5.f;
  EXPECT_EQ(sample_token(l.data(), 5, SamplingParams{}, seed, counter++), 1);
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
  const uint64_t seed = 7;
  uint64_t counter = 0;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(l.data(), 1000, k1, seed, counter++), best);
    EXPECT_EQ(sample_token(l.data(), 1000, p0, seed, counter++), best);
  }
}

// Frequencies against the exact probabilities (binomial 5-sigma bounds at 40000 draws).
TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> l{0.f, std::log(3.f), std::log(6.f), -50.f};  // p = 0.1, 0.3, 0.6, ~0
  auto freqs = [&](const SamplingParams& p) {
    const uint64_t seed = 11;
  uint64_t counter = 0;
    std::vector<double> f(4);
    for (int i = 0; i < 40000; ++i) f[static_cast<size_t>(sample_token(l.data(), 4, p, seed, counter++))] += 1.0 / 40000;
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
    uint64_t counter = 0;
    std::vector<int32_t> v;
    for (int i = 0; i < 20; ++i) v.push_back(sample_token(l.data(), 300, p, seed, counter++));
    return v;
  };
  EXPECT_EQ(draws(5), draws(5));
  EXPECT_NE(draws(5), draws(6));
}

TEST(Sampler, MinPCutsRelativeToTheMostLikely) {
  const std::vector<float> l{std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplingParams p;
  p.temperature = 1;
  p.min_p = 0.2;  // keeps p >= 0.12: ids 0 and 1, renormalised to 2/3 and 1/3
  const uint64_t seed = 5;
  uint64_t counter = 0;
  std::vector<double> f(3);
  for (int i = 0; i < 30000; ++i) f[static_cast<size_t>(sample_token(l.data(), 3, p, seed, counter++))] += 1.0 / 30000;
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[0], 2.0 / 3, 0.014);
  p.min_p = 1.0;  // only the most likely
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(l.data(), 3, p, seed, counter++), 0);
}

// Each processor on a 6-token row, values computed by hand (float arithmetic as in the code).
TEST(Sampler, ProcessLogitsGivesHandComputedValues) {
  const std::vector<float> base{2.f, -1.f, 0.5f, 3.f, -2.f, 1.f};
  const std::vector<int32_t> prompt{0, 1};
  const std::vector<int32_t> out{3, 3, 4};
  auto run = [&](const SamplingParams& p, std::vector<int32_t> stops = {}) {
    std::vector<float> l = base;
    process_logits(l.data(), 6, p, prompt, out, stops);
    return l;
  };
  SamplingParams bias;
  bias.logit_bias = {{2, 1.5f}, {5, -100.f}};
  EXPECT_EQ(run(bias), (std::vector<float>{2.f, -1.f, 2.f, 3.f, -2.f, -99.f}));
  SamplingParams rep;
  rep.repetition_penalty = 2;  // ids 0, 1 (prompt), 3, 4 (output): positive halved, negative doubled
  EXPECT_EQ(run(rep), (std::vector<float>{1.f, -2.f, 0.5f, 1.5f, -4.f, 1.f}));
  SamplingParams fp;
  fp.frequency_penalty = 0.5;  // counts 3: 2, 4: 1; prompt ids untouched
  fp.presence_penalty = 0.25;
  EXPECT_EQ(run(fp), (std::vector<float>{2.f, -1.f, 0.5f, 3.f - 1.25f, -2.f - 0.75f, 1.f}));
  SamplingParams mt;
  mt.min_tokens = 4;  // 3 generated: the stop ids are masked
  std::vector<float> m = run(mt, {5, 2});
  EXPECT_TRUE(std::isinf(m[5]) && m[5] < 0);
  EXPECT_TRUE(std::isinf(m[2]) && m[2] < 0);
  EXPECT_EQ(m[0], 2.f);
  mt.min_tokens = 3;  // reached: nothing masked
  EXPECT_EQ(run(mt, {5, 2}), base);
  SamplingParams off;
  EXPECT_FALSE(off.processes_logits());
  EXPECT_EQ(run(off), base);
  SamplingParams bad;
  bad.logit_bias = {{6, 1.f}};
  std::vector<float> l = base;
  EXPECT_THROW(process_logits(l.data(), 6, bad, prompt, out, {}), Error);
}

TEST(Sampler, TokenLogprobIsTheLogSoftmax) {
  std::mt19937_64 gen(9);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> l(777);
  for (float& x : l) x = nd(gen);
  l[10] = l[20] = 50.f;  // a tie at the top: the lower id first
  double mx = -INFINITY, sum = 0;
  for (float x : l) mx = std::max(mx, static_cast<double>(x));
  for (float x : l) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  const TokenLogprob r = token_logprob(l.data(), 777, 33, 4);
  EXPECT_EQ(r.token, 33);
  EXPECT_NEAR(r.logprob, l[33] - lse, 1e-5);
  ASSERT_EQ(r.top.size(), 4u);
  EXPECT_EQ(r.top[0].first, 10);
  EXPECT_EQ(r.top[1].first, 20);
  std::vector<float> sorted = l;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(r.top[j].second, sorted[j] - lse, 1e-5) << j;
  EXPECT_TRUE(token_logprob(l.data(), 777, 0, 0).top.empty());
  std::vector<float> nan_row{1.f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THROW(token_logprob(nan_row.data(), 2, 0, 1), Error);
}

}  // namespace
}  // namespace dsa::engine
