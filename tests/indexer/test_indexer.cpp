#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <numeric>

#include "dsa/ops/indexer/indexer.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {
Tensor pos_i32(const std::vector<int32_t>& p) {
  Tensor t = Tensor::empty({static_cast<int64_t>(p.size())}, DType::I32);
  for (size_t i = 0; i < p.size(); ++i) t.data<int32_t>()[i] = p[i];
  return t;
}
std::vector<int32_t> row(const Tensor& idx, int64_t t) {
  const int64_t k = idx.size(1);
  return std::vector<int32_t>(idx.data<int32_t>() + t * k, idx.data<int32_t>() + (t + 1) * k);
}
// A score that stresses the select's ordering of equal keys: -inf, -0, +0 (one key) or a tiny
// value of either sign.
float inf_zero_or_tiny(Rng& rng) {
  const int64_t r = rng.randint(0, 5);
  return r == 0 ? -INFINITY : r == 1 ? -0.f : r == 2 ? 0.f : rng.uniform(-1e-6f, 1e-6f);
}

}  // namespace

TEST(ModelopsIndexer, HandComputedScores) {
  // 2 heads, D = 2; keys e0 = (1, 0), e1 = (0, 1), e2 = (1, 1), e3 = (-1, -1).
  // q_h0 = (2, -1), q_h1 = (0, 3); w = (1, 0.5); scale 1 ->
  // e0: 1*relu(2) + .5*relu(0) = 2; e1: relu(-1) + .5*3 = 1.5; e2: 1 + .5*3 = 2.5; e3: 0 + 0 = 0.
  Tensor q = f32_from({2, -1, 0, 3}, {1, 2, 2});
  Tensor keys = f32_from({1, 0, 0, 1, 1, 1, -1, -1}, {4, 2});
  Tensor w = f32_from({1, 0.5f}, {1, 2});
  IndexerParams p;
  p.topk = 6;
  p.ratio = 1;
  p.scale = 1.f;
  Tensor idx = Tensor::empty({1, 6}, DType::I32), sc = Tensor::empty({1, 4}, DType::F32);
  poison(idx), poison(sc);
  indexer_topk(q, keys, w, pos_i32({3}), p, idx, sc);
  EXPECT_EQ(values(sc), (std::vector<float>{2, 1.5f, 2.5f, 0}));
  EXPECT_EQ(row(idx, 0), (std::vector<int32_t>{2, 0, 1, 3, -1, -1}));
  p.scale = 0.25f;  // a positive scale does not change the order, and scales the scores
  indexer_topk(q, keys, w, pos_i32({3}), p, idx, sc);
  EXPECT_EQ(values(sc), (std::vector<float>{0.5f, 0.375f, 0.625f, 0}));
}

TEST(ModelopsIndexer, CausalVisibilityAndPadding) {
  // m = 4: token at pos sees entries e < (pos + 1) / 4. Keys are all equal -> every score ties.
  Rng rng;
  const int64_t N = 4, H = 3, D = 8;
  Tensor keys = Tensor::empty({N, D}, DType::F32);
  Tensor k0 = random_f32({D}, rng);
  for (int64_t e = 0; e < N; ++e)
    for (int64_t k = 0; k < D; ++k) keys.data<float>()[e * D + k] = at(k0, k);
  std::vector<int32_t> positions = {0, 2, 3, 4, 7, 8, 14, 15};
  const int64_t T = positions.size();
  Tensor q = random_f32({T, H, D}, rng), w = random_f32({T, H}, rng);
  Tensor idx = Tensor::empty({T, 3}, DType::I32), sc = Tensor::empty({T, N}, DType::F32);
  poison(idx), poison(sc);
  indexer_topk(q, keys, w, pos_i32(positions), IndexerParams::v4(3, H, D, 4), idx, sc);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t vis = (positions[t] + 1) / 4;
    std::vector<int32_t> want;
    for (int64_t i = 0; i < 3; ++i) want.push_back(i < vis ? int32_t(i) : -1);  // ties: lowest index first
    EXPECT_EQ(row(idx, t), want) << "pos " << positions[t];
    for (int64_t e = 0; e < N; ++e) EXPECT_EQ(std::isinf(at(sc, t * N + e)), e >= vis) << t << " " << e;
  }
  // a token that would see more entries than given is an error (state bug upstream)
  EXPECT_THROW(indexer_topk(q.slice(0, 0, 1), keys, w.slice(0, 0, 1), pos_i32({19}), IndexerParams::v4(3, H, D, 4),
                            idx.slice(0, 0, 1)),
               Error);
}

TEST(ModelopsIndexer, TieBreakLowestIndexFirst) {
  // Keys 0, 2 and 5 equal and best, 1 and 4 equal and second; 3 zero score.
  Tensor keys = f32_from({3, 0, 1, 0, 3, 0, -5, 0, 1, 0, 3, 0}, {6, 2});
  Tensor q = f32_from({1, 0}, {1, 1, 2}), w = f32_from({1}, {1, 1});
  Tensor idx = Tensor::empty({1, 6}, DType::I32);
  indexer_topk(q, keys, w, pos_i32({5}), IndexerParams::glm(6, 1, 2), idx);
  EXPECT_EQ(row(idx, 0), (std::vector<int32_t>{0, 2, 5, 1, 4, 3}));
  Tensor idx2 = Tensor::empty({1, 4}, DType::I32);
  indexer_topk(q, keys, w, pos_i32({5}), IndexerParams::glm(4, 1, 2), idx2);
  EXPECT_EQ(row(idx2, 0), (std::vector<int32_t>{0, 2, 5, 1}));
}

TEST(ModelopsIndexer, TopkMatchesBruteForceGlm) {
  Rng rng;
  const int64_t N = 300, H = 4, D = 16, T = 5, K = 64;
  Tensor keys = random_bf16({N, D}, rng), q = random_bf16({T, H, D}, rng), w = random_bf16({T, H}, rng);
  std::vector<int32_t> positions = {0, 10, 63, 64, 299};
  Tensor idx = Tensor::empty({T, K}, DType::I32), sc = Tensor::empty({T, N}, DType::F32);
  poison(idx);
  indexer_topk(q, keys, w, pos_i32(positions), IndexerParams::glm(K, H, D), idx, sc);
  const double scale = 1 / std::sqrt(double(D)) / std::sqrt(double(H));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> s(positions[t] + 1);
    for (int64_t e = 0; e <= positions[t]; ++e) {
      double acc = 0;
      for (int64_t h = 0; h < H; ++h) {
        double dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += double(at(q, (t * H + h) * D + k)) * at(keys, e * D + k);
        acc += at(w, t * H + h) * scale * std::max(dot, 0.0);
      }
      s[e] = static_cast<float>(acc);  // selection runs on the f32 scores
      EXPECT_NEAR(at(sc, t * N + e), acc, 1e-5 * (1 + std::abs(acc)));
    }
    std::vector<int32_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
    std::vector<int32_t> got = row(idx, t);
    for (int64_t i = 0; i < K; ++i) EXPECT_EQ(got[i], i < int64_t(order.size()) ? order[i] : -1) << t << " " << i;
  }
}

TEST(ModelopsIndexer, Validation) {
  Tensor q = Tensor::zeros({1, 2, 4}, DType::F32), keys = Tensor::zeros({3, 4}, DType::F32);
  Tensor w = Tensor::zeros({1, 2}, DType::F32), idx = Tensor::empty({1, 2}, DType::I32);
  EXPECT_THROW(indexer_topk(q, Tensor::zeros({3, 5}, DType::F32), w, pos_i32({0}), IndexerParams::glm(2), idx), Error);
  EXPECT_THROW(indexer_topk(q, keys, w, pos_i32({0}), IndexerParams::glm(3), idx), Error);
  EXPECT_THROW(indexer_topk(q, keys, w, pos_i32({-1}), IndexerParams::glm(2), idx), Error);
  EXPECT_THROW(indexer_topk(q, keys, w, pos_i32({0}), IndexerParams::glm(2), Tensor::empty({1, 2}, DType::I64)), Error);
  IndexerParams bad = IndexerParams::glm(2);
  bad.ratio = 0;
  EXPECT_THROW(indexer_topk(q, keys, w, pos_i32({0}), bad, idx), Error);
  EXPECT_NO_THROW(indexer_topk(q, keys, w, pos_i32({2}), IndexerParams::glm(2), idx));
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------

namespace {
Tensor small_ints(const Shape& shape, Rng& rng, int lo, int hi) {
  Tensor t = Tensor::empty(shape, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.randint(lo, hi));
  return t;
}
Tensor random_positions(int64_t T, int64_t max_pos, Rng& rng) {
  Tensor p = Tensor::empty({T}, DType::I64);
  for (int64_t t = 0; t < T; ++t) p.data<int64_t>()[t] = rng.randint(0, max_pos);
  p.data<int64_t>()[0] = 0;  // a token that sees nothing (m > 1) or one entry
  p.data<int64_t>()[T - 1] = max_pos;
  return p;
}
}  // namespace

TEST(ModelopsIndexer, CudaExactScoresAndTiesMatchCpu) {
  DSA_REQUIRE_CUDA();
  // Small-integer inputs and a power-of-two scale make every float sum exact, so CPU and GPU
  // scores are identical and the selection (with its many ties) must match index for index.
  Rng rng;
  const Device g = Device::cuda();
  for (auto [T, H, D, N, m, K] : {std::tuple{5L, 64L, 128L, 700L, 4L, 512L}, std::tuple{3L, 32L, 128L, 2500L, 1L, 2048L},
                                  std::tuple{9L, 4L, 64L, 130L, 4L, 3L}, std::tuple{2L, 1L, 96L, 1L, 1L, 8L}}) {
    Tensor q = small_ints({T, H, D}, rng, -2, 2), keys = small_ints({N, D}, rng, -2, 2), w = small_ints({T, H}, rng, -3, 3);
    Tensor pos = random_positions(T, N * m - 1, rng);
    IndexerParams p = IndexerParams::v4(K, H, D, m);
    p.scale = 0.5f;
    Tensor idx = Tensor::empty({T, K}, DType::I32), sc = Tensor::empty({T, N}, DType::F32);
    indexer_topk(q, keys, w, pos, p, idx, sc);
    Tensor idx_d = Tensor::empty({T, K}, DType::I32, g), sc_d = Tensor::empty({T, N}, DType::F32, g);
    poison(idx_d), poison(sc_d);
    indexer_topk(q.to(g), keys.to(g), w.to(g), pos.to(g), p, idx_d, sc_d);
    std::vector<float> a = values(sc), b = values(sc_d);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "score " << i;  // -inf included
    Tensor ih = idx_d.to(Device::cpu());
    for (int64_t i = 0; i < T * K; ++i)
      ASSERT_EQ(ih.data<int32_t>()[i], idx.data<int32_t>()[i]) << "T=" << T << " N=" << N << " slot " << i;
  }
}

TEST(ModelopsIndexer, CudaRandomBf16MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device g = Device::cuda();
  const int64_t T = 7, H = 64, D = 128, N = 1500, m = 4, K = 512;
  Tensor q = random_bf16({T, H, D}, rng), keys = random_bf16({N, D}, rng), w = random_bf16({T, H}, rng);
  Tensor pos = random_positions(T, N * m - 1, rng);
  IndexerParams p = IndexerParams::v4(K, H, D, m);
  Tensor idx = Tensor::empty({T, K}, DType::I32), sc = Tensor::empty({T, N}, DType::F32);
  indexer_topk(q, keys, w, pos, p, idx, sc);
  Tensor idx_d = Tensor::empty({T, K}, DType::I32, g), sc_d = Tensor::empty({T, N}, DType::F32, g);
  poison(idx_d), poison(sc_d);
  indexer_topk(q.to(g), keys.to(g), w.to(g), pos.to(g), p, idx_d, sc_d);
  std::vector<float> a = values(sc), b = values(sc_d);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i])) {
      ASSERT_EQ(a[i], b[i]) << i;
      continue;
    }
    ASSERT_NEAR(b[i], a[i], 1e-4 + 1e-4 * std::abs(a[i])) << "score " << i;
  }
  // Float vs double accumulation may swap near-equal scores: each GPU pick must score (by the CPU
  // scores) like the CPU pick in the same slot, every pick must be visible and distinct.
  Tensor ih = idx_d.to(Device::cpu());
  for (int64_t t = 0; t < T; ++t) {
    const int64_t vis = std::min<int64_t>((pos.data<int64_t>()[t] + 1) / m, N);
    std::vector<bool> seen(N, false);
    for (int64_t i = 0; i < K; ++i) {
      const int32_t gi = ih.data<int32_t>()[t * K + i], ci = idx.data<int32_t>()[t * K + i];
      if (ci < 0) {
        ASSERT_EQ(gi, -1) << t << " " << i;
        continue;
      }
      ASSERT_TRUE(gi >= 0 && gi < vis && !seen[gi]) << t << " " << i << " " << gi;
      seen[gi] = true;
      ASSERT_NEAR(a[t * N + gi], a[t * N + ci], 2e-4 + 2e-4 * std::abs(a[t * N + ci])) << t << " " << i;
    }
  }
}

// topk_select of host scores on cuda:0 (poisoned output) equals the CPU's, index for index.
static void expect_cuda_select_equals_cpu(const Tensor& sc, const Tensor& pos, const IndexerParams& p, const std::string& what) {
  const Device g = Device::cuda();
  const int64_t T = sc.size(0), K = p.topk;
  Tensor idx = Tensor::empty({T, K}, DType::I32);
  topk_select(sc, pos, p, idx);
  Tensor idx_d = Tensor::empty({T, K}, DType::I32, g);
  poison(idx_d);
  topk_select(sc.to(g), pos.to(g), p, idx_d);
  Tensor ih = idx_d.to(Device::cpu());
  for (int64_t i = 0; i < T * K; ++i) ASSERT_EQ(ih.data<int32_t>()[i], idx.data<int32_t>()[i]) << what << "slot " << i;
}

TEST(ModelopsIndexer, CudaSelectFromGivenScores) {
  DSA_REQUIRE_CUDA();
  // Many duplicates, negative values, -inf and zeros of both signs; N large, topk at its maximum.
  Rng rng;
  const int64_t T = 4, N = 100003, K = 2048;
  Tensor sc = Tensor::empty({T, N}, DType::F32);
  for (int64_t i = 0; i < T * N; ++i) {
    const int64_t r = rng.randint(0, 9);
    sc.data<float>()[i] = r == 0 ? -0.f : r == 1 ? 0.f : r == 2 ? -INFINITY : static_cast<float>(rng.randint(-50, 50)) / 4;
  }
  Tensor pos = Tensor::empty({T}, DType::I32);
  pos.data<int32_t>()[0] = 0, pos.data<int32_t>()[1] = 1000, pos.data<int32_t>()[2] = N - 1, pos.data<int32_t>()[3] = 2047;
  expect_cuda_select_equals_cpu(sc, pos, IndexerParams::glm(K), "");
}

TEST(ModelopsIndexer, CudaSelectFromDistinctScoresOfLongRows) {
  DSA_REQUIRE_CUDA();
  // Distinct-looking float scores (the indexer's case): the radix search usually ends after a
  // few key bytes, when the bin holding the rank is taken whole. Rows of a long context (262147
  // compressed entries ~ 1M tokens at ratio 4) and of a 128K one, several magnitudes and signs,
  // topk 512 and 2048; the CPU's selection index for index.
  Rng rng(31);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{262147, 512}, std::pair<int64_t, int64_t>{32768, 2048}}) {
    const int64_t T = 3;
    Tensor sc = Tensor::empty({T, N}, DType::F32);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < N; ++i)
        sc.data<float>()[t * N + i] = t == 0 ? rng.uniform(0.f, 1.f) : t == 1 ? rng.uniform(-3.f, 40.f) : rng.uniform(-1e-3f, 1e-3f);
    Tensor pos = Tensor::empty({T}, DType::I32);
    pos.data<int32_t>()[0] = static_cast<int32_t>(N - 1), pos.data<int32_t>()[1] = static_cast<int32_t>(N / 2);
    pos.data<int32_t>()[2] = static_cast<int32_t>(N - 7);
    expect_cuda_select_equals_cpu(sc, pos, IndexerParams::glm(K), fmt::format("N {} ", N));
  }
}

TEST(ModelopsIndexer, CudaWideSelectEqualsPerRowAndCpu) {
  DSA_REQUIRE_CUDA();
  // The wide selection (rows cut to their candidates by 2048-entry segments, then selected) and
  // the one-CTA-per-row select over whole rows give the CPU's indices, index for index, on rows
  // that stress the cut: distinct scores, a few distinct values (the cut digit's bin holds most
  // of the row), every score equal (all visible entries are candidates), -inf and signed zeros,
  // visibility of 1, topk - 1, topk, topk + 1 entries, a row end inside a segment, and row
  // lengths that are not multiples of the segment.
  const uint64_t seed = 97;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{9001, 2048}, std::pair<int64_t, int64_t>{131071, 2048},
                      std::pair<int64_t, int64_t>{70000, 512}, std::pair<int64_t, int64_t>{4099, 64}}) {
    const int64_t T = 9;
    Tensor sc = Tensor::empty({T, N}, DType::F32);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < N; ++i) {
        float v = 0;
        switch (t % 5) {
          case 0: v = rng.uniform(-2.f, 30.f); break;
          case 1: v = static_cast<float>(rng.randint(0, 3)); break;
          case 2: v = 1.5f; break;
          case 3: v = inf_zero_or_tiny(rng); break;
          default: v = rng.uniform(0.f, 1.f) * (i % 7 == 0 ? 1e4f : 1.f);
        }
        sc.data<float>()[t * N + i] = v;
      }
    const int32_t vis[T] = {static_cast<int32_t>(N), static_cast<int32_t>(N - 1), static_cast<int32_t>(N / 2 + 3),
                            static_cast<int32_t>(N), 1, static_cast<int32_t>(K - 1), static_cast<int32_t>(K),
                            static_cast<int32_t>(K + 1), static_cast<int32_t>(2048 * 2 + 5)};
    Tensor pos = Tensor::empty({T}, DType::I32);
    for (int64_t t = 0; t < T; ++t) pos.data<int32_t>()[t] = std::min<int32_t>(vis[t], static_cast<int32_t>(N)) - 1;
    for (const TopkSelectPath path : {TopkSelectPath::Wide, TopkSelectPath::PerRow, TopkSelectPath::Fast}) {
      if (path == TopkSelectPath::Fast && N > kTopkSelectFastMaxEntries) continue;
      IndexerParams p = IndexerParams::glm(K);
      p.select = path;
      const char* name = path == TopkSelectPath::Wide ? "wide" : path == TopkSelectPath::Fast ? "fast" : "per row";
      expect_cuda_select_equals_cpu(sc, pos, p, fmt::format("N {} K {} {} ", N, K, name));
    }
  }
}

TEST(ModelopsIndexer, CudaFastSelectEqualsOldPathAndCpu) {
  DSA_REQUIRE_CUDA();
  // The register-resident select (TopkSelectPath::Fast) and the old per-row select give the CPU's
  // indices, index for index, on rows that stress the fast path's threshold search (the 32-bit
  // radix), its tie ranks at the threshold (by index, through a block prefix sum) and its bucket
  // sort (with its fallback to a bitonic sort when a bucket is crowded): distinct scores, 4
  // distinct values, every score equal, -inf with signed zeros and tiny values, far outliers, 64
  // levels, log-normal scores, scores of both signs, mostly zeros; every entry visible, a random
  // visibility, visibility around topk (topk - 1 .. topk + 1) and topk > visibility; topk
  // 3..2048; N just below / at / above topk, odd N, N = 16384 (the path's limit); T 1, 3 and 8.
  const uint64_t seed = 20261203;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  const std::pair<int64_t, int64_t> shapes[] = {{4109, 2048}, {2047, 2048}, {2048, 2048}, {2049, 2048}, {16384, 512},
                                                {16384, 2048}, {1025, 1024}, {8191, 1024}, {3001, 512}, {511, 512},
                                                {5, 3}, {12345, 2048}, {4099, 64}};
  for (const auto& [N, K] : shapes)
    for (const int64_t T : {1, 3, 8})
      for (int kind = 0; kind < 9; ++kind)
        for (int vis_mode = 0; vis_mode < 4; ++vis_mode) {
          Tensor sc = Tensor::empty({T, N}, DType::F32);
          Tensor pos = Tensor::empty({T}, DType::I32);
          for (int64_t t = 0; t < T; ++t) {
            const int64_t vis = vis_mode == 0   ? N
                                : vis_mode == 1 ? rng.randint(1, N)
                                : vis_mode == 2 ? std::min<int64_t>(N, K - 1 + t % 3)
                                                : std::max<int64_t>(1, std::min<int64_t>(N, K / 2));
            pos.data<int32_t>()[t] = static_cast<int32_t>(vis - 1);
            for (int64_t e = 0; e < N; ++e) {
              float v = 0;
              switch (kind) {
                case 0: v = rng.normal(2.f, 1.f); break;
                case 1: v = static_cast<float>(rng.randint(0, 3)); break;
                case 2: v = 1.5f; break;
                case 3: v = inf_zero_or_tiny(rng); break;
                case 4: v = rng.uniform(0.f, 1.f) * (e % 97 == 0 ? 1e4f : 1.f); break;
                case 5: v = static_cast<float>(rng.randint(0, 63)) / 8 - 3; break;
                case 6: v = std::exp(rng.normal(0.f, 3.f)); break;
                case 7: v = rng.normal(0.f, 1.f); break;  // the threshold near 0: buckets linear in the score
                default: v = rng.randint(0, 4) < 3 ? 0.f : rng.uniform(0.f, 8.f);  // relu zeros: the threshold is 0
              }
              sc.data<float>()[t * N + e] = v;
            }
          }
          for (const TopkSelectPath path : {TopkSelectPath::Fast, TopkSelectPath::PerRow}) {
            IndexerParams p = IndexerParams::glm(K);
            p.select = path;
            expect_cuda_select_equals_cpu(sc, pos, p,
                                          fmt::format("N {} K {} T {} kind {} vis {} {} ", N, K, T, kind, vis_mode,
                                                      path == TopkSelectPath::Fast ? "fast" : "per row"));
          }
        }
}

TEST(ModelopsIndexer, CudaFastSelectRejectsLongRows) {
  DSA_REQUIRE_CUDA();
  Tensor sc = Tensor::zeros({1, kTopkSelectFastMaxEntries + 1}, DType::F32, Device::cuda());
  Tensor pos = pos_i32({0}).to(Device::cuda()), idx = Tensor::empty({1, 8}, DType::I32, Device::cuda());
  IndexerParams p = IndexerParams::glm(8);
  p.select = TopkSelectPath::Fast;
  EXPECT_THROW(topk_select(sc, pos, p, idx), Error);
}

TEST(ModelopsIndexer, SelectPathRule) {
  // Rows of at most 16384 entries take the register-resident select (unless
  // DSA_INDEXER_FAST_SELECT=0); longer decode rows (<= 64 rows) the wide selection, everything
  // else the per-row select.
  const char* env = std::getenv("DSA_INDEXER_FAST_SELECT");
  const bool fast = env == nullptr || std::string(env) != "0";
  EXPECT_EQ(topk_select_path(1, 4109, TopkSelectPath::Auto), fast ? TopkSelectPath::Fast : TopkSelectPath::PerRow);
  EXPECT_EQ(topk_select_path(1, 8193, TopkSelectPath::Auto), fast ? TopkSelectPath::Fast : TopkSelectPath::Wide);
  EXPECT_EQ(topk_select_path(1, 16385, TopkSelectPath::Auto), TopkSelectPath::Wide);
  EXPECT_EQ(topk_select_path(65, 16385, TopkSelectPath::Auto), TopkSelectPath::PerRow);
  EXPECT_EQ(topk_select_path(1, 100, TopkSelectPath::PerRow), TopkSelectPath::PerRow);
  EXPECT_EQ(topk_select_path(1, 100, TopkSelectPath::Fast), TopkSelectPath::Fast);
  EXPECT_TRUE(topk_select_is_wide(1, 32768, TopkSelectPath::Auto));
  EXPECT_TRUE(topk_select_is_wide(64, 16385, TopkSelectPath::Auto));
  EXPECT_EQ(topk_select_is_wide(64, 8193, TopkSelectPath::Auto), !fast);
  EXPECT_FALSE(topk_select_is_wide(65, 262144, TopkSelectPath::Auto));
  EXPECT_FALSE(topk_select_is_wide(1, 8192, TopkSelectPath::Auto));
  EXPECT_TRUE(topk_select_is_wide(1000, 10, TopkSelectPath::Wide));
  EXPECT_FALSE(topk_select_is_wide(1, 1 << 20, TopkSelectPath::PerRow));
}
