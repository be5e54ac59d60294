// Fused routing + layout (route_and_layout), the register top-k route kernels, the block-scan layout
// count, the gate-once router logits and the split combine: CUDA against the CPU reference.
// Outputs are poisoned with a pattern no kernel writes (ints 0x5A5A5A5A, floats NaN) so every
// element must be written. Discrete outputs (experts, layout) must match exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/ops/moe/route_layout.h"
#include "dsa/ops/moe/routing.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

constexpr int32_t kPoisonInt = 0x5A5A5A5A;

void poison_any(Tensor& t) { t.fill_bytes(t.dtype() == DType::I32 ? 0x5A : 0xFF); }

// The routing rules of the two models (and small/large expert counts for each register width).
enum class Rule { V4Score, V4Hash, GlmSigmoid };

struct Case {
  Rule rule;
  int64_t E;
  int k;
  int64_t align;
};

struct Inputs {
  Tensor logits, bias, tok, table;
  RouterParams p;
};

// Random logits with awkward rows: all equal (ties), +-0 pairs, a NaN, +inf; the bias has ties.
Inputs make_inputs(const Case& c, int64_t T, Rng& rng) {
  Inputs in;
  in.p = RouterParams{c.rule == Rule::GlmSigmoid ? ScoreFunc::Sigmoid : ScoreFunc::SqrtSoftplus, c.k,
                      c.rule == Rule::GlmSigmoid ? 2.5f : 1.5f};
  const int64_t E = c.E;
  in.logits = random_f32({T, E}, rng, 2.f);
  float* lg = in.logits.data<float>();
  for (int64_t e = 0; e < E; ++e) lg[e] = 0.5f;  // token 0: every key ties (with no bias)
  if (T > 1) {
    lg[E + 1] = 0.f, lg[E + 2] = -0.f, lg[E + 3] = 0.f;  // -0 and +0 keys tie (GLM: sigmoid 0.5)
  }
  if (T > 2) lg[2 * E + 5] = NAN;
  if (T > 3) lg[3 * E + 7] = INFINITY;
  if (T > 4)
    for (int64_t e = 0; e < E; e += 3) lg[4 * E + e] = 1.25f;
  if (T > 5)
    for (int64_t e = 0; e < E; ++e) lg[5 * E + e] = -200.f;  // sigmoid underflows to +0: key = bias
  if (c.rule != Rule::V4Hash) {
    in.bias = random_f32({E}, rng, 0.1f);
    in.bias.data<float>()[3] = in.bias.data<float>()[4];
    // V4: a two-valued bias, so equal logits give exact key ties between many experts.
    if (c.rule == Rule::V4Score)
      for (int64_t e = 0; e < E; ++e) in.bias.data<float>()[e] = rng.randint(0, 1) ? 0.25f : 0.f;
  } else {
    const int64_t V = 1000;
    in.table = Tensor::empty({V, c.k}, DType::I32);
    for (int64_t i = 0; i < V * c.k; ++i) in.table.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(0, E - 1));
    in.table.data<int32_t>()[7 * c.k + 1] = -1;                              // dropped slot
    in.table.data<int32_t>()[8 * c.k + 0] = static_cast<int32_t>(E);         // out of range -> dropped
    in.table.data<int32_t>()[9 * c.k + 1] = in.table.data<int32_t>()[9 * c.k];  // an expert twice in a row
    in.tok = Tensor::empty({T}, DType::I32);
    for (int64_t t = 0; t < T; ++t) in.tok.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(0, V - 1));
    const int32_t special[] = {7, 8, 9, -1, static_cast<int32_t>(V), 9};
    for (int64_t t = 0; t < std::min<int64_t>(T, 6); ++t) in.tok.data<int32_t>()[t] = special[t];
  }
  return in;
}

struct Result {
  Tensor ids, w;
  MoeLayout l;
};

// part_n > 0: the layout of experts [part_base, part_base + part_n) only (expert parallelism).
Result run(const Inputs& in, int64_t align, Device d, bool fused, int64_t part_base = 0, int64_t part_n = 0) {
  const int64_t T = in.logits.size(0), E = in.logits.size(1), k = in.p.topk;
  Result r{Tensor::empty({T, k}, DType::I32, d), Tensor::empty({T, k}, DType::F32, d),
           make_moe_layout(T, k, part_n > 0 ? part_n : E, align, d)};
  r.l.expert_base = part_base;
  for (Tensor* t : {&r.ids, &r.w, &r.l.expert_offsets, &r.l.expert_counts, &r.l.m_indices, &r.l.src_token,
                    &r.l.dst_row})
    poison_any(*t);
  const Tensor lg = in.logits.to(d), bias = in.bias.defined() ? in.bias.to(d) : Tensor();
  const Tensor tok = in.tok.defined() ? in.tok.to(d) : Tensor(), tab = in.table.defined() ? in.table.to(d) : Tensor();
  if (fused) {
    route_and_layout(lg, bias, tok, tab, r.ids, r.w, in.p, r.l);
  } else {
    if (tab.defined())
      route_hash(lg, tok, tab, r.ids, r.w, in.p);
    else
      route(lg, bias, r.ids, r.w, in.p);
    build_moe_layout(r.ids, r.l);
  }
  Result h = r;
  h.ids = r.ids.to(Device::cpu());
  h.w = r.w.to(Device::cpu());
  h.l.expert_offsets = r.l.expert_offsets.to(Device::cpu());
  h.l.expert_counts = r.l.expert_counts.to(Device::cpu());
  h.l.m_indices = r.l.m_indices.to(Device::cpu());
  h.l.src_token = r.l.src_token.to(Device::cpu());
  h.l.dst_row = r.l.dst_row.to(Device::cpu());
  return h;
}

void expect_same_ints(const Tensor& g, const Tensor& c, const std::string& what) {
  ASSERT_EQ(g.numel(), c.numel()) << what;
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_NE(g.data<int32_t>()[i], kPoisonInt) << what << " element " << i << " not written";
    ASSERT_EQ(g.data<int32_t>()[i], c.data<int32_t>()[i]) << what << " element " << i;
  }
}

// Weights: GPU and CPU expf/log1pf may differ by an ulp or two; NaN (a NaN logit chosen by hash
// routing) must be NaN on both sides.
void expect_close_weights(const Tensor& g, const Tensor& c, const std::string& what) {
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float a = g.data<float>()[i], b = c.data<float>()[i];
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(a)) << what << " " << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(a)) << what << " weight " << i << " not written or NaN";
    ASSERT_NEAR(a, b, 1e-6f + 1e-5f * std::fabs(b)) << what << " " << i;
  }
}

// Layout of the atomics path: the same counts and offsets, rows a permutation inside each segment.
void expect_same_layout_up_to_order(const MoeLayout& g, const MoeLayout& c, const Tensor& ids, const std::string& what) {
  expect_same_ints(g.expert_counts, c.expert_counts, what + " counts");
  expect_same_ints(g.expert_offsets, c.expert_offsets, what + " offsets");
  std::set<int32_t> used;
  const int64_t n = ids.numel(), k = c.topk;
  for (int64_t i = 0; i < n; ++i) {
    // ids are global; the layout's experts are [expert_base, expert_base + experts), local ids
    const int32_t e = ids.data<int32_t>()[i] < 0 ? -1 : ids.data<int32_t>()[i] - static_cast<int32_t>(c.expert_base),
                  r = g.dst_row.data<int32_t>()[i];
    if (e < 0 || e >= c.experts) {
      ASSERT_EQ(r, -1) << what;
      continue;
    }
    ASSERT_GE(r, c.expert_offsets.data<int32_t>()[e]) << what;
    ASSERT_LT(r, c.expert_offsets.data<int32_t>()[e] + c.expert_counts.data<int32_t>()[e]) << what;
    ASSERT_TRUE(used.insert(r).second) << what << " row used twice";
    ASSERT_EQ(g.m_indices.data<int32_t>()[r], e) << what;
    ASSERT_EQ(g.src_token.data<int32_t>()[r], i / k) << what;
  }
  for (int64_t r = 0; r < c.rows_cap; ++r)
    if (!used.count(static_cast<int32_t>(r))) {
      ASSERT_EQ(g.m_indices.data<int32_t>()[r], -1) << what << " row " << r;
      ASSERT_EQ(g.src_token.data<int32_t>()[r], -1) << what << " row " << r;
    }
}

// The fused kernel's outputs (T <= 32) against the CPU's: every one identical, row order
// included; above that (the separate kernels) the layout up to the order inside a segment.
void expect_fused_matches_cpu(const Result& gpu, const Result& cpu, int64_t T, const std::string& what) {
  expect_same_ints(gpu.ids, cpu.ids, what + " ids");
  expect_close_weights(gpu.w, cpu.w, what);
  if (T <= 32) {
    expect_same_ints(gpu.l.expert_counts, cpu.l.expert_counts, what + " counts");
    expect_same_ints(gpu.l.expert_offsets, cpu.l.expert_offsets, what + " offsets");
    expect_same_ints(gpu.l.dst_row, cpu.l.dst_row, what + " dst_row");
    expect_same_ints(gpu.l.m_indices, cpu.l.m_indices, what + " m_indices");
    expect_same_ints(gpu.l.src_token, cpu.l.src_token, what + " src_token");
  } else {
    expect_same_layout_up_to_order(gpu.l, cpu.l, cpu.ids, what);
  }
}

const Case kCases[] = {
    {Rule::V4Score, 256, 6, 64},    {Rule::V4Hash, 256, 6, 64},     {Rule::GlmSigmoid, 256, 8, 64},
    {Rule::V4Score, 384, 6, 16},    {Rule::GlmSigmoid, 64, 8, 16},  {Rule::V4Hash, 512, 6, 32},
    {Rule::GlmSigmoid, 512, 32, 16}, {Rule::V4Score, 33, 32, 16},
};

std::string name(const Case& c, int64_t T) {
  const char* r = c.rule == Rule::V4Score ? "v4-score" : c.rule == Rule::V4Hash ? "v4-hash" : "glm-sigmoid";
  return std::string(r) + " E=" + std::to_string(c.E) + " k=" + std::to_string(c.k) + " a=" +
         std::to_string(c.align) + " T=" + std::to_string(T);
}

}  // namespace

TEST(RouteLayout, CpuEqualsRouteThenLayout) {
  Rng rng;
  for (const Case& c : kCases)
    for (int64_t T : {1, 7, 40}) {
      const Inputs in = make_inputs(c, T, rng);
      const Result a = run(in, c.align, Device::cpu(), true), b = run(in, c.align, Device::cpu(), false);
      const std::string what = name(c, T);
      expect_same_ints(a.ids, b.ids, what + " ids");
      expect_close_weights(a.w, b.w, what);
      expect_same_ints(a.l.m_indices, b.l.m_indices, what + " m_indices");
      expect_same_ints(a.l.dst_row, b.l.dst_row, what + " dst_row");
    }
}

// T <= 32 takes the fused kernel: every output identical to the CPU reference, the layout's
// row order included. T = 33 and 300 take route + count + assign (row order inside a segment free).
TEST(RouteLayoutCuda, MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (const Case& c : kCases)
    for (int64_t T : {1, 2, 7, 32, 33, 300}) {
      const Inputs in = make_inputs(c, T, rng);
      const Result cpu = run(in, c.align, Device::cpu(), false);
      const Result gpu = run(in, c.align, Device::cuda(), true);
      const std::string what = name(c, T);
      expect_fused_matches_cpu(gpu, cpu, T, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// Expert parallelism: the layout of a part of the experts from the fused kernel (T <= 32) equals
// the CPU's route + layout of the same part, row order included; the ids stay global.
TEST(RouteLayoutCuda, ExpertPartMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (const Case& c : kCases)
    for (int64_t T : {1, 7, 32, 100}) {
      const Inputs in = make_inputs(c, T, rng);
      const int64_t E = in.logits.size(1), base = E / 4, n = E / 2;
      const Result cpu = run(in, c.align, Device::cpu(), false, base, n);
      const Result gpu = run(in, c.align, Device::cuda(), true, base, n);
      const std::string what = name(c, T) + " experts [" + std::to_string(base) + ", " + std::to_string(base + n) + ")";
      expect_fused_matches_cpu(gpu, cpu, T, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// The separate route kernels (register top-k for E <= 512, the shared-memory one above) on ties,
// NaN and infinite logits, against the CPU; with the unfused layout (block-scan count).
TEST(RouteLayoutCuda, SeparateKernelsMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Case cases[] = {{Rule::V4Score, 256, 6, 64}, {Rule::GlmSigmoid, 100, 8, 16}, {Rule::V4Hash, 384, 6, 64},
                        {Rule::V4Score, 600, 8, 16}, {Rule::GlmSigmoid, 1024, 8, 64}, {Rule::V4Hash, 1024, 6, 16}};
  for (const Case& c : cases)
    for (int64_t T : {1, 5, 32, 300}) {
      const Inputs in = make_inputs(c, T, rng);
      const Result cpu = run(in, c.align, Device::cpu(), false);
      const Result gpu = run(in, c.align, Device::cuda(), false);
      const std::string what = name(c, T) + " (separate)";
      expect_same_ints(gpu.ids, cpu.ids, what + " ids");
      expect_close_weights(gpu.w, cpu.w, what);
      expect_same_layout_up_to_order(gpu.l, cpu.l, cpu.ids, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// Gate-once logits: within (8*ceil(H/2048) + 12) * 2^-24 * sum|x g| of the exact sum (bound in
// routing.cu), bitwise repeatable; the fallback (H % 8 != 0, H > 8192) within the same kind of bound.
TEST(RouteLayoutCuda, RouterLogitsWithinBound) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  struct Shape3 {
    int64_t T, E, H;
  };
  const Shape3 shapes[] = {{1, 256, 4096}, {2, 40, 6144}, {7, 37, 4104}, {32, 64, 96}, {33, 19, 8192},
                           {300, 9, 2056},  {5, 11, 100},  {3, 5, 8200}, {9, 256, 6144}};
  for (DType gd : {DType::BF16, DType::F32})
    for (const Shape3& s : shapes) {
      const int64_t T = s.T, E = s.E, H = s.H;
      Tensor x = random_bf16({T, H}, rng);
      Tensor gate = gd == DType::F32 ? random_f32({E, H}, rng, 0.05f) : random_bf16({E, H}, rng, 0.05f);
      Tensor ref = Tensor::empty({T, E}, DType::F32);
      router_logits(x, gate, ref);
      Tensor xd = x.to(Device::cuda()), gdv = gate.to(Device::cuda());
      Tensor l1 = Tensor::empty({T, E}, DType::F32, Device::cuda()), l2 = Tensor::empty({T, E}, DType::F32, Device::cuda());
      poison(l1);
      poison(l2);
      router_logits(xd, gdv, l1);
      router_logits(xd, gdv, l2);
      const Tensor h1 = l1.to(Device::cpu()), h2 = l2.to(Device::cpu());
      const bool fallback = H % 8 != 0 || H > 8192;
      const double u = std::ldexp(1.0, -24), depth = fallback ? static_cast<double>(H) : 8.0 * ((H + 2047) / 2048) + 12;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < E; ++e) {
          double mag = 0;
          for (int64_t h = 0; h < H; ++h) {
            const double g = gd == DType::F32 ? gate.data<float>()[e * H + h] : bf(gate, e * H + h);
            mag += std::fabs(bf(x, t * H + h) * g);
          }
          const int64_t i = t * E + e;
          const float got = h1.data<float>()[i];
          ASSERT_TRUE(std::isfinite(got)) << "T=" << T << " H=" << H << " i=" << i;
          // The fallback kernel's depth is below H/32 + 5; H is a loose bound for it.
          ASSERT_LE(std::fabs(got - ref.data<float>()[i]), (depth + 2) * u * mag + 1e-30)
              << "T=" << T << " E=" << E << " H=" << H << " t=" << t << " e=" << e;
          ASSERT_EQ(std::memcmp(&got, h2.data<float>() + i, 4), 0) << "not repeatable at " << i;
        }
    }
}

// Split combine (k <= 32) and the per-token fallback (k > 32), tails of H / 1024, against the CPU.
TEST(RouteLayoutCuda, CombineMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  struct C3 {
    int64_t T, k, E, H;
  };
  for (const C3 c : {C3{1, 6, 256, 4096}, C3{2, 8, 256, 6144}, C3{7, 6, 64, 4104}, C3{33, 32, 64, 1032},
                     C3{3, 40, 64, 520}, C3{1, 1, 4, 8}}) {
    Tensor ids = Tensor::empty({c.T, c.k}, DType::I32);
    for (int64_t i = 0; i < c.T * c.k; ++i)
      ids.data<int32_t>()[i] = rng.randint(0, 9) == 0 ? -1 : static_cast<int32_t>(rng.randint(0, c.E - 1));
    MoeLayout h = make_moe_layout(c.T, c.k, c.E, 16, Device::cpu());
    build_moe_layout(ids, h);
    MoeLayout g = make_moe_layout(c.T, c.k, c.E, 16, d);
    build_moe_layout(ids.to(d), g);
    // Same rows on both sides: copy the host layout to the device one.
    g.dst_row = h.dst_row.to(d);
    Tensor y = random_bf16({h.rows_cap, c.H}, rng), w = random_f32({c.T, c.k}, rng), sh = random_bf16({c.T, c.H}, rng);
    for (bool with_shared : {true, false}) {
      Tensor oc = Tensor::empty({c.T, c.H}, DType::BF16), og = Tensor::empty({c.T, c.H}, DType::BF16, d);
      poison(og);
      moe_combine(y, h, w, with_shared ? sh : Tensor(), oc);
      moe_combine(y.to(d), g, w.to(d), with_shared ? sh.to(d) : Tensor(), og);
      ASSERT_EQ(compare_bf16(og.to(Device::cpu()), oc, 1e-2, 1e-3, "combine T=" + std::to_string(c.T)), 0);
    }
  }
}
