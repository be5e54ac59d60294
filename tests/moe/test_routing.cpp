// Router: CPU reference against a brute-force formula; CUDA against the CPU reference.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/ops/moe/routing.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

float score_ref(float x, ScoreFunc f) {
  if (f == ScoreFunc::Sigmoid) return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
  return static_cast<float>(std::sqrt(std::log1p(std::exp(static_cast<double>(x)))));
}

struct Out {
  Tensor ids, w;
};
Out run(const Tensor& logits, const Tensor& bias, const RouterParams& p, Device d = Device::cpu(),
        const Tensor* tok = nullptr, const Tensor* table = nullptr) {
  const int64_t T = logits.size(0);
  Out o{Tensor::empty({T, p.topk}, DType::I32, d), Tensor::empty({T, p.topk}, DType::F32, d)};
  poison(o.ids);
  poison(o.w);
  if (table)
    route_hash(logits.to(d), tok->to(d), table->to(d), o.ids, o.w, p);
  else
    route(logits.to(d), bias.defined() ? bias.to(d) : Tensor(), o.ids, o.w, p);
  return {o.ids.to(Device::cpu()), o.w.to(Device::cpu())};
}

}  // namespace

TEST(Routing, SqrtSoftplusTopkWithBiasMatchesBruteForce) {
  Rng rng;
  const int64_t T = 7, E = 32;
  RouterParams p;
  p.topk = 6;
  p.routed_scaling = 1.5f;
  Tensor logits = random_f32({T, E}, rng, 2.f), bias = random_f32({E}, rng, 0.3f);
  Out o = run(logits, bias, p);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int e) { return score_ref(logits.data<float>()[t * E + e], p.score) + bias.data<float>()[e]; };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) > key(b); });
    double sum = 0;
    for (int i = 0; i < p.topk; ++i) sum += score_ref(logits.data<float>()[t * E + order[i]], p.score);
    for (int i = 0; i < p.topk; ++i) {
      EXPECT_EQ(o.ids.data<int32_t>()[t * p.topk + i], order[i]) << "t=" << t << " slot " << i;
      const double want = score_ref(logits.data<float>()[t * E + order[i]], p.score) / sum * 1.5;
      EXPECT_NEAR(o.w.data<float>()[t * p.topk + i], want, 1e-5 * std::fabs(want) + 1e-7);
    }
  }
}

TEST(Routing, TiesGoToLowerExpertIndex) {
  RouterParams p;
  p.topk = 4;
  Tensor logits = Tensor::zeros({2, 16}, DType::F32);
  Out o = run(logits, Tensor(), p);
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(o.ids.data<int32_t>()[t * 4 + i], i);
      EXPECT_FLOAT_EQ(o.w.data<float>()[t * 4 + i], 1.5f / 4);
    }
}

TEST(Routing, SigmoidWithCorrectionBiasGlm) {
  Rng rng;
  RouterParams p{ScoreFunc::Sigmoid, 8, 2.5f};
  const int64_t T = 5, E = 64;
  Tensor logits = random_f32({T, E}, rng), bias = random_f32({E}, rng, 0.1f);
  Out o = run(logits, bias, p);
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int i = 0; i < 8; ++i) sum += o.w.data<float>()[t * 8 + i];
    EXPECT_NEAR(sum, 2.5, 1e-5);
    // Selection is by sigmoid + bias, weights by sigmoid alone.
    float worst_chosen = 1e9f;
    std::vector<bool> chosen(E, false);
    for (int i = 0; i < 8; ++i) {
      const int e = o.ids.data<int32_t>()[t * 8 + i];
      chosen[e] = true;
      worst_chosen = std::min(worst_chosen, score_ref(logits.data<float>()[t * E + e], p.score) + bias.data<float>()[e]);
    }
    for (int64_t e = 0; e < E; ++e)
      if (!chosen[e]) {
        EXPECT_LE(score_ref(logits.data<float>()[t * E + e], p.score) + bias.data<float>()[e], worst_chosen);
      }
  }
}

TEST(Routing, HashTableAndOutOfRangeTokens) {
  Rng rng;
  RouterParams p;
  p.topk = 3;
  const int64_t T = 4, E = 8, V = 10;
  Tensor logits = random_f32({T, E}, rng);
  Tensor table = Tensor::empty({V, 3}, DType::I32);
  for (int64_t i = 0; i < V * 3; ++i) table.data<int32_t>()[i] = static_cast<int32_t>(i % E);
  table.data<int32_t>()[5 * 3 + 1] = 99;  // bad table entry -> dropped
  Tensor tok = Tensor::empty({T}, DType::I32);
  int32_t toks[4] = {0, 5, -1, 9};
  std::copy(toks, toks + 4, tok.data<int32_t>());
  Out o = run(logits, Tensor(), p, Device::cpu(), &tok, &table);
  EXPECT_EQ(o.ids.data<int32_t>()[0], 0);
  EXPECT_EQ(o.ids.data<int32_t>()[1 * 3 + 1], -1);
  EXPECT_EQ(o.w.data<float>()[1 * 3 + 1], 0.f);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(o.ids.data<int32_t>()[2 * 3 + i], -1);
  EXPECT_EQ(o.ids.data<int32_t>()[3 * 3 + 0], (9 * 3) % E);
  EXPECT_NEAR(o.w.data<float>()[1 * 3 + 0] + o.w.data<float>()[1 * 3 + 2], 1.5f, 1e-5);
}

TEST(Routing, ValidateNamesField) {
  RouterParams p;
  p.topk = 40;
  Tensor logits = Tensor::zeros({2, 64}, DType::F32);
  Tensor ids = Tensor::empty({2, 40}, DType::I32), w = Tensor::empty({2, 40}, DType::F32);
  try {
    route(logits, Tensor(), ids, w, p);
    FAIL() << "expected dsa::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk"), std::string::npos) << e.what();
  }
}

TEST(RoutingCuda, MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (int64_t T : {1, 7, 64, 1000})
    for (auto f : {ScoreFunc::SqrtSoftplus, ScoreFunc::Sigmoid}) {
      RouterParams p{f, f == ScoreFunc::Sigmoid ? 8 : 6, 1.5f};
      const int64_t E = 256;
      Tensor logits = random_f32({T, E}, rng, 2.f), bias = random_f32({E}, rng, 0.1f);
      // Exact ties in some rows.
      for (int64_t e = 0; e < E; ++e) logits.data<float>()[e] = 0.5f;
      if (T > 1) bias.data<float>()[3] = bias.data<float>()[4];
      Out c = run(logits, bias, p), g = run(logits, bias, p, Device::cuda());
      for (int64_t i = 0; i < T * p.topk; ++i) {
        ASSERT_EQ(g.ids.data<int32_t>()[i], c.ids.data<int32_t>()[i]) << "T=" << T << " i=" << i;
        ASSERT_NEAR(g.w.data<float>()[i], c.w.data<float>()[i], 1e-5f) << "T=" << T << " i=" << i;
      }
    }
}

TEST(RoutingCuda, HashMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  RouterParams p;
  const int64_t T = 64, E = 256, V = 1000;
  Tensor logits = random_f32({T, E}, rng);
  Tensor table = Tensor::empty({V, 6}, DType::I32);
  for (int64_t i = 0; i < V * 6; ++i) table.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(-1, E));
  Tensor tok = Tensor::empty({T}, DType::I32);
  for (int64_t t = 0; t < T; ++t) tok.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(-2, V + 2));
  Out c = run(logits, Tensor(), p, Device::cpu(), &tok, &table);
  Out g = run(logits, Tensor(), p, Device::cuda(), &tok, &table);
  for (int64_t i = 0; i < T * 6; ++i) {
    ASSERT_EQ(g.ids.data<int32_t>()[i], c.ids.data<int32_t>()[i]);
    ASSERT_NEAR(g.w.data<float>()[i], c.w.data<float>()[i], 1e-5f);
  }
}

TEST(RoutingCuda, RouterLogitsMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (DType gd : {DType::F32, DType::BF16}) {
    const int64_t T = 13, E = 40, H = 96;
    Tensor x = random_bf16({T, H}, rng);
    Tensor gate = gd == DType::F32 ? random_f32({E, H}, rng, 0.1f) : random_bf16({E, H}, rng, 0.1f);
    Tensor lc = Tensor::empty({T, E}, DType::F32), lg = Tensor::empty({T, E}, DType::F32, Device::cuda());
    poison(lg);
    router_logits(x, gate, lc);
    router_logits(x.to(Device::cuda()), gate.to(Device::cuda()), lg);
    Tensor h = lg.to(Device::cpu());
    for (int64_t i = 0; i < T * E; ++i) ASSERT_NEAR(h.data<float>()[i], lc.data<float>()[i], 1e-4f);
  }
}
