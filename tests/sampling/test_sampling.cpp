// The sampler op (ops/sampling): the CPU reference's rules on hand-made rows, and the CUDA kernel
// against the reference on fresh random rows of a real vocabulary size with every combination of
// temperature, top_k and top_p, including awkward rows (NaN, +inf, all -inf, ties, -inf holes).
// Kernel and reference may differ only where the two best Gumbel keys are within float rounding
// (the bound checked below), never otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "common/testing.h"
#include "dsa/ops/sampling/sampling.h"

namespace dsa::ops {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor rows_tensor(const std::vector<SamplingRow>& rows) {
  Tensor t = Tensor::empty({static_cast<int64_t>(rows.size() * sizeof(SamplingRow))}, DType::U8);
  std::memcpy(t.raw(), rows.data(), rows.size() * sizeof(SamplingRow));
  return t;
}

SamplingRow row(float temperature, int top_k = 0, float top_p = 1.f, uint64_t seed = 1, uint64_t counter = 0) {
  SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.seed = seed;
  r.counter = counter;
  return r;
}

TEST(Sampling, NonFiniteRowsGiveMinusOne) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& l : {std::vector<float>{1.f, nan, 2.f}, std::vector<float>{1.f, kInf},
                                      std::vector<float>{-kInf, -kInf}}) {
    EXPECT_EQ(sample_row(l.data(), static_cast<int64_t>(l.size()), row(0.f)), -1);
    EXPECT_EQ(sample_row(l.data(), static_cast<int64_t>(l.size()), row(1.f, 0, 0.9f)), -1);
  }
  const std::vector<float> holes{-kInf, 3.f, -kInf, 3.f};
  EXPECT_EQ(sample_row(holes.data(), 4, row(0.f)), 1);  // ties: lowest id
  for (uint64_t c = 0; c < 100; ++c) {
    const int32_t t = sample_row(holes.data(), 4, row(1.f, 0, 1.f, 3, c));
    EXPECT_TRUE(t == 1 || t == 3) << t;  // -inf is never drawn
  }
}

TEST(Sampling, DrawDependsOnlyOnSeedAndCounter) {
  std::vector<float> l(500);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::cos(0.37f * static_cast<float>(i));
  const SamplingRow r = row(0.8f, 40, 0.9f, 77, 12);
  const int32_t t = sample_row(l.data(), 500, r);
  EXPECT_EQ(sample_row(l.data(), 500, r), t);
  int differ = 0;
  for (uint64_t c = 0; c < 50; ++c) differ += sample_row(l.data(), 500, row(0.8f, 40, 0.9f, 77, c)) != t;
  EXPECT_GT(differ, 10);  // other positions draw other tokens
}

TEST(Sampling, CpuOpMatchesRowByRow) {
  test::Rng rng(5);
  const int64_t N = 6, V = 257;
  Tensor l = test::random_f32({N, V}, rng, 2.f);
  std::vector<SamplingRow> rows{row(0.f), row(1.f), row(0.7f, 5), row(1.2f, 0, 0.5f), row(0.9f, 20, 0.8f, 3, 9),
                                row(2.f, 1)};
  Tensor out = Tensor::empty({N}, DType::I32);
  sample_tokens(l, rows_tensor(rows), out);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(out.data<int32_t>()[i], sample_row(l.data<float>() + i * V, V, rows[i]));
}

// The largest and second-largest Gumbel keys among the candidates the reference keeps, to tell a
// genuine near-tie from a bug when kernel and reference disagree.
double key_gap(const float* l, int64_t V, const SamplingRow& r, int32_t a, int32_t b) {
  const float ka = l[a] / r.temperature + sampling_gumbel(r.seed, r.counter, a);
  const float kb = l[b] / r.temperature + sampling_gumbel(r.seed, r.counter, b);
  (void)V;
  return std::fabs(static_cast<double>(ka) - kb) / std::max(1.0, std::fabs(static_cast<double>(ka)));
}

TEST(Sampling, CudaMatchesReference) {
  DSA_REQUIRE_CUDA();
  test::Rng rng;
  const int64_t V = 129280;
  std::vector<SamplingRow> rows;
  for (float t : {0.f, 0.6f, 1.f, 1.7f})
    for (int k : {0, 1, 7, 64, 3000})
      for (float p : {1.f, 0.95f, 0.5f, 1e-6f}) rows.push_back(row(t, k, p, 1000 + rows.size(), 3 * rows.size()));
  const int64_t N = static_cast<int64_t>(rows.size());
  Tensor l = test::random_f32({N, V}, rng, 3.f);
  float* d = l.data<float>();
  // Awkward rows: ties at the top, -inf holes, one NaN, one +inf, a flat row (top_p wide).
  for (int64_t v = 0; v < 50; ++v) d[1 * V + v * 7] = 20.f;
  for (int64_t v = 0; v < V; v += 3) d[2 * V + v] = -kInf;
  d[3 * V + 99] = std::numeric_limits<float>::quiet_NaN();
  d[4 * V + 5] = kInf;
  for (int64_t v = 0; v < V; ++v) d[5 * V + v] = 0.001f * static_cast<float>(v % 13);
  Tensor out = Tensor::empty({N}, DType::I32, Device::cuda(0));
  test::poison(out);
  sample_tokens(l.to(Device::cuda(0)), rows_tensor(rows).to(Device::cuda(0)), out);
  const Tensor got = out.to(Device::cpu());
  int exact = 0, near_ties = 0, fallbacks = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t want = sample_row(d + i * V, V, rows[i]), g = got.data<int32_t>()[i];
    if (g == -2) {  // top_p wider than the kernel's sorted candidates: the engine samples it on the host
      ++fallbacks;
      EXPECT_TRUE(rows[i].top_p < 1.f && (rows[i].top_k == 0 || rows[i].top_k > 2048)) << "row " << i;
      continue;
    }
    if (g == want) {
      ++exact;
      continue;
    }
    ASSERT_GE(g, 0) << "row " << i << " want " << want;
    ASSERT_GE(want, 0) << "row " << i << " got " << g;
    EXPECT_LT(key_gap(d + i * V, V, rows[i], g, want), 1e-5) << "row " << i << ": kernel " << g << " reference " << want;
    ++near_ties;
  }
  std::printf("sampler CUDA vs CPU: %d exact, %d near-ties, %d host fallbacks of %lld rows\n", exact, near_ties,
              fallbacks, static_cast<long long>(N));
  EXPECT_LE(near_ties, 2);
  EXPECT_EQ(exact + near_ties + fallbacks, N);
}


// The split sampler (per-chunk partials + a finishing CTA) on the paths it finishes itself:
// greedy (ties across chunk borders: lowest id), invalid rows (NaN / +inf in the last chunk, all
// -inf), whole-vocabulary sampling (no cuts: the Gumbel winner from the partials) and the
// top_k / top_p rows that continue on the finishing CTA, at 1, 3 and 32 rows and vocabularies
// that are not multiples of 4 (unaligned rows: scalar loads) or of the 2048-id chunk. Greedy and
// invalid rows must match the reference exactly; sampled rows exactly but for float near-ties of
// the two best Gumbel keys (key_gap < 1e-5).
TEST(Sampling, CudaSplitRowsMatchReference) {
  DSA_REQUIRE_CUDA();
  test::Rng rng(17);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t V : {1L, 3L, 2049L, 4096L, 129280L, 129281L, 154880L})
    for (int64_t N : {1L, 3L, 32L}) {
      std::vector<SamplingRow> rows;
      for (int64_t i = 0; i < N; ++i) {
        switch (i % 4) {
          case 0: rows.push_back(row(0.f)); break;
          case 1: rows.push_back(row(0.8f, 0, 1.f, 40 + i, 7 * i)); break;  // whole vocabulary
          case 2: rows.push_back(row(1.3f, 0, 1.f, 90 + i, 3 + i)); break;
          default: rows.push_back(row(0.7f, 50, 0.9f, 5 + i, i)); break;  // top_k + top_p
        }
      }
      Tensor l = test::random_f32({N, V}, rng, 3.f);
      float* d = l.data<float>();
      if (N >= 3 && V > 4096) {
        d[0 * V + 2047] = 50.f, d[0 * V + 2048] = 50.f, d[0 * V + V - 1] = 50.f;  // ties across chunks: 2047
        d[2 * V + V - 1] = nan;                                                   // NaN in the last chunk
      }
      if (N == 32) {
        for (int64_t v = 0; v < V; ++v) d[4 * V + v] = -kInf;  // greedy row of only -inf: -1
        d[5 * V + V - 1] = kInf;                               // +inf: -1
        for (int64_t v = 0; v < V; v += 2) d[8 * V + v] = -kInf;  // holes in a greedy row
        for (int64_t v = 0; v < V; ++v) d[12 * V + v] = 1.f;      // flat greedy row: id 0
      }
      Tensor out = Tensor::empty({N}, DType::I32, Device::cuda(0));
      test::poison(out);
      sample_tokens(l.to(Device::cuda(0)), rows_tensor(rows).to(Device::cuda(0)), out);
      const Tensor got = out.to(Device::cpu());
      int near_ties = 0;
      for (int64_t i = 0; i < N; ++i) {
        const int32_t want = sample_row(d + i * V, V, rows[i]), g = got.data<int32_t>()[i];
        if (rows[i].temperature == 0.f || want < 0) {
          EXPECT_EQ(g, want) << "V=" << V << " row " << i;
          continue;
        }
        if (g == want) continue;
        ASSERT_GE(g, 0) << "V=" << V << " row " << i << " want " << want;
        EXPECT_LT(key_gap(d + i * V, V, rows[i], g, want), 1e-5) << "V=" << V << " row " << i;
        ++near_ties;
      }
      EXPECT_LE(near_ties, 1) << "V=" << V << " N=" << N;
      if (N >= 3 && V > 4096) EXPECT_EQ(got.data<int32_t>()[0], 2047);
    }
}

// sampling_probs is the distribution sample_row draws from (speculative decoding's rejection rule
// reads it while the target's own draws come from the sampler): over 100k counters (seed 7) the
// draws' empirical distribution is within total variation 0.01 of it (the expected TV of 100k
// draws over <= 12 ids is about 0.004), for every kind of cut; the support is the candidate set.
TEST(Sampling, ProbsAreTheDistributionOfTheDraws) {
  const std::vector<float> l{1.5f, -0.5f, 0.2f, 2.0f, 0.2f, -kInf, 1.0f, -1.2f, 0.7f, 0.0f, 1.9f, -3.0f};
  const int64_t V = static_cast<int64_t>(l.size());
  SamplingRow min_p = row(0.9f);
  min_p.min_p = 0.3f;
  const std::vector<std::pair<const char*, SamplingRow>> cases{
      {"plain", row(1.f)}, {"hot", row(2.5f)}, {"top_k 4", row(1.f, 4)}, {"top_p 0.7", row(0.8f, 0, 0.7f)},
      {"top_k 6 + top_p 0.9", row(1.2f, 6, 0.9f)}, {"min_p 0.3", min_p}};
  for (const auto& [name, base] : cases) {
    std::vector<float> p(static_cast<size_t>(V));
    ASSERT_TRUE(sampling_probs(l.data(), V, base, p.data()));
    double total = 0;
    for (float x : p) total += x;
    EXPECT_NEAR(total, 1.0, 1e-6) << name;
    EXPECT_EQ(p[5], 0.f) << name;  // -inf
    std::vector<double> hist(static_cast<size_t>(V));
    constexpr int kTrials = 100000;
    for (int t = 0; t < kTrials; ++t) {
      SamplingRow r = base;
      r.seed = 7;
      r.counter = static_cast<uint64_t>(t);
      const int32_t id = sample_row(l.data(), V, r);
      ASSERT_GE(id, 0);
      EXPECT_GT(p[static_cast<size_t>(id)], 0.f) << name << ": drew id " << id << " outside the support";
      hist[static_cast<size_t>(id)] += 1.0 / kTrials;
    }
    double tv = 0;
    for (int64_t i = 0; i < V; ++i) tv += std::abs(hist[static_cast<size_t>(i)] - p[static_cast<size_t>(i)]) / 2;
    std::printf("sampling_probs %s: TV(draws, probs) = %.4f\n", name, tv);
    EXPECT_LT(tv, 0.01) << name;
  }
  std::vector<float> p(static_cast<size_t>(V), -1.f);
  ASSERT_TRUE(sampling_probs(l.data(), V, row(0.f), p.data()));  // greedy: a point mass
  EXPECT_EQ(p[3], 1.f);
  EXPECT_EQ(p[10], 0.f);
  const std::vector<float> bad{1.f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_FALSE(sampling_probs(bad.data(), 2, row(1.f), p.data()));
}

}  // namespace
}  // namespace dsa::ops
