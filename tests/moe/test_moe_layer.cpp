// Full MoE layer: CPU op against a per-token reference; CUDA against CPU (V4-like MXFP4 with
// shared FP8 expert, GLM-like FP8 or BF16 experts with sigmoid routing, hash layer); on CUDA the
// default tactic asks the installed tactic chooser (tuned tactics) per routed GEMM.
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "common/testing.h"
#include "dsa/core/cuda_memory.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/moe_layer.h"
#include "dsa/ops/tactics/tactic_chooser.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

struct Model {
  MoeLayerWeights w;
  MoeLayerParams p;
  int64_t H, I, E;
};

// bf16: GLM-like with unquantized (BF16) routed and shared experts.
Model make_model(bool glm, bool hash, int64_t H, int64_t I, int64_t E, int k, Rng& rng, bool bf16 = false) {
  Model m;
  m.H = H;
  m.I = I;
  m.E = E;
  m.w.gate = random_f32({E, H}, rng, 0.05f);
  if (!hash) m.w.gate_bias = random_f32({E}, rng, 0.05f);
  if (hash) {
    m.w.tid2eid = Tensor::empty({100, k}, DType::I32);
    for (int64_t i = 0; i < 100 * k; ++i) m.w.tid2eid.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(0, E - 1));
  }
  m.w.w13 = glm ? random_fp8(E, 2 * I, H, rng) : random_mxfp4(E, 2 * I, H, rng);
  m.w.w2 = glm ? random_fp8(E, H, I, rng) : random_mxfp4(E, H, I, rng);
  m.w.shared_w13 = random_fp8(1, 2 * I, H, rng, !glm);
  m.w.shared_w2 = random_fp8(1, H, I, rng, !glm);
  if (bf16) {
    m.w.w13 = random_bf16_experts(E, 2 * I, H, rng);
    m.w.w2 = random_bf16_experts(E, H, I, rng);
    m.w.shared_w13 = random_bf16_experts(1, 2 * I, H, rng);
    m.w.shared_w2 = random_bf16_experts(1, H, I, rng);
  }
  m.p.router = glm ? RouterParams{ScoreFunc::Sigmoid, k, 2.5f} : RouterParams{ScoreFunc::SqrtSoftplus, k, 1.5f};
  m.p.swiglu_limit = glm ? 0.f : 10.f;
  return m;
}

MoeLayerWeights to_dev(const MoeLayerWeights& w, Device d) {
  MoeLayerWeights r = w;
  r.gate = w.gate.to(d);
  if (w.gate_bias.defined()) r.gate_bias = w.gate_bias.to(d);
  if (w.tid2eid.defined()) r.tid2eid = w.tid2eid.to(d);
  r.w13 = to_device(w.w13, d);
  r.w2 = to_device(w.w2, d);
  r.shared_w13 = to_device(w.shared_w13, d);
  r.shared_w2 = to_device(w.shared_w2, d);
  return r;
}

// Expert parallelism: the routed experts [base, base + n) of w, with the shared expert or without.
MoeLayerWeights expert_part(const MoeLayerWeights& w, int64_t base, int64_t n, bool shared) {
  MoeLayerWeights r = w;
  for (ExpertWeights* e : {&r.w13, &r.w2}) {
    e->weight = e->weight.slice(0, base, base + n);
    if (e->scale.defined()) e->scale = e->scale.slice(0, base, base + n);
  }
  if (!shared) r.shared_w13 = r.shared_w2 = ExpertWeights{};
  return r;
}

float rb(double v) { return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v))); }

// Per-token reference written from the math (docs/model-reference.md §2): reuses only the CPU router.
// `scale` (optional) receives, per output element, the sum of the magnitudes of the terms it
// adds (|shared| + sum of w * |expert|): the op and the reference round every expert output to
// bf16, so where the terms cancel, one rounding step of a term is large against the result.
std::vector<float> token_ref(const Model& m, const Tensor& x, int64_t t, const int32_t* ids, const float* wts,
                             std::vector<float>* scale = nullptr) {
  const int64_t H = m.H, I = m.I;
  auto ffn = [&](const std::vector<float>& W13, const std::vector<float>& W2) {
    std::vector<float> act(I);
    for (int64_t i = 0; i < I; ++i) {
      double g = 0, u = 0;
      for (int64_t h = 0; h < H; ++h) {
        g += static_cast<double>(bf(x, t * H + h)) * W13[i * H + h];
        u += static_cast<double>(bf(x, t * H + h)) * W13[(I + i) * H + h];
      }
      if (m.p.swiglu_limit > 0) {
        g = std::min<double>(g, m.p.swiglu_limit);
        u = std::max<double>(std::min<double>(u, m.p.swiglu_limit), -m.p.swiglu_limit);
      }
      act[i] = rb(g / (1 + std::exp(-g)) * u);
    }
    std::vector<float> y(H);
    for (int64_t h = 0; h < H; ++h) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(act[i]) * W2[h * I + i];
      y[h] = rb(s);
    }
    return y;
  };
  std::vector<float> out = ffn(dequant_ref(m.w.shared_w13, 0), dequant_ref(m.w.shared_w2, 0));
  if (scale) {
    scale->resize(H);
    for (int64_t h = 0; h < H; ++h) (*scale)[h] = std::fabs(out[h]);
  }
  for (int s = 0; s < m.p.router.topk; ++s) {
    if (ids[s] < 0) continue;
    auto y = ffn(dequant_ref(m.w.w13, ids[s]), dequant_ref(m.w.w2, ids[s]));
    for (int64_t h = 0; h < H; ++h) out[h] += wts[s] * y[h];
    if (scale)
      for (int64_t h = 0; h < H; ++h) (*scale)[h] += std::fabs(wts[s] * y[h]);
  }
  return out;
}

// Router logits differ by fp32 rounding between CPU and GPU: the tokens whose top-k the GPU's
// workspace (`gpu`) and the CPU's agree on; a token with a near tie is left out of a comparison,
// and there must be almost none.
std::vector<int64_t> same_routing_rows(const MoeWorkspace& gpu, const MoeWorkspace& cpu, int64_t T, int k) {
  const Tensor gid = gpu.topk_ids.to(Device::cpu());
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < T; ++t) {
    bool same = true;
    for (int s = 0; s < k; ++s) same = same && gid.data<int32_t>()[t * k + s] == cpu.topk_ids.data<int32_t>()[t * k + s];
    if (same) rows.push_back(t);
  }
  return rows;
}

}  // namespace

TEST(MoeLayer, CpuMatchesPerTokenReference) {
  Rng rng;
  for (int variant : {0, 1, 2}) {  // V4 MXFP4, GLM FP8, GLM BF16
    const bool glm = variant > 0;
    Model m = make_model(glm, false, 128, 128, 8, glm ? 3 : 2, rng, variant == 2);
    const int64_t T = 5;
    Tensor x = random_bf16({T, m.H}, rng);
    Tensor out = Tensor::empty({T, m.H}, DType::BF16);
    poison(out);
    MoeWorkspace ws;
    moe_layer(x, Tensor(), m.w, m.p, out, ws);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> scale;
      auto want = token_ref(m, x, t, ws.topk_ids.data<int32_t>() + t * m.p.router.topk,
                            ws.topk_weights.data<float>() + t * m.p.router.topk, &scale);
      for (int64_t h = 0; h < m.H; ++h) {
        const float g = bf(out, t * m.H + h);
        ASSERT_TRUE(std::isfinite(g));
        // 2 % of the terms' magnitude: a few bf16 rounding steps (2^-8 each) of a term, no more.
        ASSERT_NEAR(g, want[h], 2e-2 * scale[h] + 2e-3) << "variant=" << variant << " t=" << t << " h=" << h
                                                         << " scale=" << scale[h];
      }
    }
  }
}

// The workspace only grows: calls of 8, 2, 5 and 8 tokens after a first call of 8 keep every
// buffer where it was (a moved buffer invalidates every CUDA graph, engine/step_graphs.h), and
// each call gives what a fresh workspace gives, bit for bit.
TEST(MoeLayer, WorkspaceOnlyGrowsAndShorterCallsMatchAFreshOne) {
  Rng rng;
  for (int variant : {0, 1}) {  // V4 MXFP4 (no shared-expert change), GLM FP8
    Model m = make_model(variant == 1, false, 128, 128, 8, variant == 1 ? 3 : 2, rng);
    MoeWorkspace ws;
    std::vector<const void*> first;
    for (int64_t T : {8, 2, 5, 8, 1}) {
      Tensor x = random_bf16({T, m.H}, rng);
      Tensor got = Tensor::empty({T, m.H}, DType::BF16), want = Tensor::empty({T, m.H}, DType::BF16);
      poison(got);
      moe_layer(x, Tensor(), m.w, m.p, got, ws);
      MoeWorkspace fresh;
      moe_layer(x, Tensor(), m.w, m.p, want, fresh);
      for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_EQ(got.data<uint16_t>()[i], want.data<uint16_t>()[i]) << "variant " << variant << " T=" << T << " i=" << i;
      const std::vector<const void*> now{ws.logits.raw(), ws.topk_ids.raw(), ws.act.raw(), ws.y.raw(),
                                         ws.layout.m_indices.raw(), ws.layout.dst_row.raw()};
      if (first.empty()) first = now;
      EXPECT_EQ(now, first) << "variant " << variant << ": a buffer moved at T=" << T;
    }
  }
}

// Expert parallelism: two parts of the routed experts (the shared expert in the first) give
// outputs that add up to the whole layer's within bf16 rounding of the terms, route exactly as
// the whole layer, and a part none of whose experts a token chose gives that token zeros.
TEST(MoeLayer, ExpertPartsAddUpToTheLayer) {
  Rng rng;
  for (int variant : {0, 1, 2}) {  // V4 MXFP4, GLM FP8, V4 hash layer
    const bool glm = variant == 1, hash = variant == 2;
    Model m = make_model(glm, hash, 128, 128, 8, glm ? 3 : 2, rng);
    const int64_t T = 9, k = m.p.router.topk;
    Tensor x = random_bf16({T, m.H}, rng);
    Tensor tok = Tensor::empty({T}, DType::I32);
    for (int64_t t = 0; t < T; ++t) tok.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(0, 99));
    const Tensor ids = hash ? tok : Tensor();
    Tensor full = Tensor::empty({T, m.H}, DType::BF16);
    MoeWorkspace wsf;
    moe_layer(x, ids, m.w, m.p, full, wsf);
    const std::pair<int64_t, int64_t> parts[] = {{0, 3}, {3, 5}};
    std::vector<Tensor> outs;
    for (const auto& [base, n] : parts) {
      MoeLayerParams p = m.p;
      p.expert_base = base;
      Tensor o = Tensor::empty({T, m.H}, DType::BF16);
      poison(o);
      MoeWorkspace ws;
      moe_layer(x, ids, expert_part(m.w, base, n, base == 0), p, o, ws);
      for (int64_t i = 0; i < T * k; ++i)
        ASSERT_EQ(ws.topk_ids.data<int32_t>()[i], wsf.topk_ids.data<int32_t>()[i]) << "variant " << variant;
      for (int64_t t = 0; t < T && base > 0; ++t) {
        bool chosen = false;
        for (int64_t s = 0; s < k; ++s) {
          const int32_t e = wsf.topk_ids.data<int32_t>()[t * k + s];
          chosen = chosen || (e >= base && e < base + n);
        }
        for (int64_t h = 0; h < m.H && !chosen; ++h) ASSERT_EQ(bf(o, t * m.H + h), 0.f) << "t=" << t;
      }
      outs.push_back(o);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> scale;
      token_ref(m, x, t, wsf.topk_ids.data<int32_t>() + t * k, wsf.topk_weights.data<float>() + t * k, &scale);
      for (int64_t h = 0; h < m.H; ++h) {
        const float sum = bf(outs[0], t * m.H + h) + bf(outs[1], t * m.H + h);
        ASSERT_TRUE(std::isfinite(sum));
        ASSERT_NEAR(sum, bf(full, t * m.H + h), 2e-2 * scale[h] + 2e-3) << "variant " << variant << " t=" << t;
      }
    }
  }
  Model m = make_model(false, false, 128, 128, 8, 2, rng);
  MoeLayerParams p = m.p;
  p.expert_base = 6;  // experts [6, 9) of a gate of 8
  Tensor x = random_bf16({2, 128}, rng), out = Tensor::empty({2, 128}, DType::BF16);
  MoeWorkspace ws;
  EXPECT_THROW(moe_layer(x, Tensor(), expert_part(m.w, 0, 3, true), p, out, ws), Error);
}

TEST(MoeLayer, HashLayerNeedsTokenIds) {
  Rng rng;
  Model m = make_model(false, true, 128, 128, 8, 2, rng);
  Tensor x = random_bf16({3, 128}, rng), out = Tensor::empty({3, 128}, DType::BF16);
  MoeWorkspace ws;
  EXPECT_THROW(moe_layer(x, Tensor(), m.w, m.p, out, ws), Error);
}

TEST(MoeLayerCuda, MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int variant : {0, 1, 2, 3}) {  // V4 MXFP4, GLM FP8, V4 hash layer, GLM BF16
    const bool glm = variant == 1 || variant == 3, hash = variant == 2;
    Model m = make_model(glm, hash, 256, 128, 32, glm ? 8 : 6, rng, variant == 3);
    if (hash) m.p.alignment = 16;  // 16-row segments: only the 16-row tile is valid
    MoeLayerWeights wd = to_dev(m.w, d);
    for (int64_t T : {1, 7, 64, 1000}) {
      Tensor x = random_bf16({T, m.H}, rng, 2.f);
      Tensor tok = Tensor::empty({T}, DType::I32);
      for (int64_t t = 0; t < T; ++t) tok.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(0, 99));
      Tensor want = Tensor::empty({T, m.H}, DType::BF16);
      MoeWorkspace wsc, wsg;
      moe_layer(x, hash ? tok : Tensor(), m.w, m.p, want, wsc);
      Tensor got = Tensor::empty({T, m.H}, DType::BF16, d);
      poison(got);
      moe_layer(x.to(d), hash ? tok.to(d) : Tensor(), wd, m.p, got, wsg);
      const std::vector<int64_t> rows = same_routing_rows(wsg, wsc, T, m.p.router.topk);
      ASSERT_GE(static_cast<double>(rows.size()), 0.99 * T) << "routing differs on too many tokens";
      ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 3e-2, 3e-2 * rms_bf16(want), "moe layer", &rows), 0)
          << "variant " << variant << " T=" << T;
    }
  }
}

// Expert parallelism on CUDA: each part of the experts equals the CPU's same part.
TEST(MoeLayerCuda, ExpertPartsMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int variant : {0, 1, 2}) {  // V4 MXFP4, GLM FP8, V4 hash layer
    const bool glm = variant == 1, hash = variant == 2;
    Model m = make_model(glm, hash, 256, 128, 32, glm ? 8 : 6, rng);
    if (hash) m.p.alignment = 16;
    const MoeLayerWeights wd = to_dev(m.w, d);
    for (int64_t T : {1, 7, 200})
      for (const auto& [base, n] : {std::pair<int64_t, int64_t>{0, 16}, {16, 16}, {5, 20}}) {
        Tensor x = random_bf16({T, m.H}, rng, 2.f);
        Tensor tok = Tensor::empty({T}, DType::I32);
        for (int64_t t = 0; t < T; ++t) tok.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(0, 99));
        MoeLayerParams p = m.p;
        p.expert_base = base;
        Tensor want = Tensor::empty({T, m.H}, DType::BF16);
        MoeWorkspace wsc, wsg;
        moe_layer(x, hash ? tok : Tensor(), expert_part(m.w, base, n, base == 0), p, want, wsc);
        Tensor got = Tensor::empty({T, m.H}, DType::BF16, d);
        poison(got);
        moe_layer(x.to(d), hash ? tok.to(d) : Tensor(), expert_part(wd, base, n, base == 0), p, got, wsg);
        const std::vector<int64_t> rows = same_routing_rows(wsg, wsc, T, m.p.router.topk);
        ASSERT_GE(static_cast<double>(rows.size()), 0.99 * T) << "routing differs on too many tokens";
        ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 3e-2, 3e-2 * rms_bf16(want) + 1e-3, "moe part", &rows), 0)
            << "variant " << variant << " T=" << T << " experts [" << base << ", " << base + n << ")";
      }
  }
}

namespace {
// Answers fixed tiles and records the shapes the MoE layer asked about.
struct RecordingChooser : TacticChooser {
  mutable std::mutex mu;
  mutable std::vector<ExpertGemmShape> asked;
  std::string describe() const override { return "recording"; }
  int sparse_mla(const SparseMlaParams&) const override { return -1; }
  int expert_gemm(const ExpertGemmShape& s) const override {
    std::lock_guard lock(mu);
    asked.push_back(s);
    return s.fuse_swiglu ? 2 : 0;  // gate/up: 16-row tiles with k split; down: 16-row tiles
  }
};
}  // namespace

TEST(MoeLayerCuda, DefaultTacticAsksTheInstalledChooserPerGemm) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  Model m = make_model(/*glm=*/true, false, 256, 128, 32, 8, rng);
  MoeLayerWeights wd = to_dev(m.w, d);
  const int64_t T = 7;
  Tensor x = random_bf16({T, m.H}, rng, 2.f);
  Tensor want = Tensor::empty({T, m.H}, DType::BF16);
  MoeWorkspace wsc, wsg;
  moe_layer(x, Tensor(), m.w, m.p, want, wsc);

  auto chooser = std::make_shared<RecordingChooser>();
  install_tactic_chooser(chooser);
  reset_tactic_choice_stats();
  Tensor got = Tensor::empty({T, m.H}, DType::BF16, d);
  poison(got);
  moe_layer(x.to(d), Tensor(), wd, m.p, got, wsg);
  clear_tactic_chooser();

  ASSERT_EQ(chooser->asked.size(), 2u);  // the routed gate/up and down GEMMs (not the shared expert)
  const ExpertGemmShape& gu = chooser->asked[0];
  EXPECT_TRUE(gu.fuse_swiglu);
  EXPECT_EQ(gu.n, 2 * m.I);
  EXPECT_EQ(gu.k, m.H);
  const ExpertGemmShape& dn = chooser->asked[1];
  EXPECT_FALSE(dn.fuse_swiglu);
  EXPECT_EQ(dn.n, m.H);
  EXPECT_EQ(dn.k, m.I);
  for (const auto& s : chooser->asked) {
    EXPECT_EQ(s.format, WeightFormat::FP8Block);
    EXPECT_EQ(s.experts, m.E);
    EXPECT_EQ(s.topk, 8);
    EXPECT_EQ(s.tokens, T);
    EXPECT_EQ(s.alignment, m.p.alignment);
  }
  const auto st = tactic_choice_stats(TunedFamily::ExpertGemm);
  EXPECT_EQ(st.calls, 2u);
  EXPECT_EQ(st.tuned, 2u);  // both answers were non-default tactics
  EXPECT_EQ(st.last, 0);
  const std::vector<int64_t> rows = same_routing_rows(wsg, wsc, T, 8);
  ASSERT_GE(static_cast<double>(rows.size()), T - 1.0) << "routing differs on too many tokens";
  ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 3e-2, 3e-2 * rms_bf16(want), "moe layer", &rows), 0);
}

// Graph-capturable decode step: with a warm workspace, a second call of the layer (V4 form:
// MXFP4 experts, FP8 shared expert with UE8M0 scales) allocates nothing, makes the host wait
// for nothing, and gives the same output.
TEST(MoeLayerCuda, WarmWorkspaceAllocatesAndWaitsForNothing) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  Model m = make_model(/*glm=*/false, false, 256, 128, 32, 6, rng);
  ASSERT_NE(m.w.shared_w13.scale.dtype(), DType::F32);  // UE8M0 scales on the FP8 path
  MoeLayerWeights wd = to_dev(m.w, d);
  for (int64_t T : {1, 5, 40}) {
    Tensor x = random_bf16({T, m.H}, rng, 2.f).to(d);
    Tensor a = Tensor::empty({T, m.H}, DType::BF16, d), b = Tensor::empty({T, m.H}, DType::BF16, d);
    MoeWorkspace ws;
    moe_layer(x, Tensor(), wd, m.p, a, ws);  // warm-up: sizes the workspace
    const auto before = cuda_memory::cache_stats(d.index);
    const auto waits = cuda_stream::host_waits();
    moe_layer(x, Tensor(), wd, m.p, b, ws);
    const auto after = cuda_memory::cache_stats(d.index);
    EXPECT_EQ(after.device_allocs + after.reuses, before.device_allocs + before.reuses) << "T=" << T << ": allocation in a warm call";
    EXPECT_EQ(cuda_stream::host_waits().total(), waits.total()) << "T=" << T << ": host wait in a warm call";
    Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
    for (int64_t i = 0; i < ha.numel(); ++i) {
      const float va = bf(ha, i), vb = bf(hb, i);
      ASSERT_TRUE(std::isfinite(va));
      ASSERT_LE(std::fabs(va - vb), 1e-2f * std::fabs(va) + 1e-3f) << "T=" << T << " i=" << i;  // atomics order rows
    }
  }
}

// The shared expert on the workspace's side stream (forked from and joined to the caller's
// stream, here an explicit one as the model runner installs) gives exactly the output of the
// one-stream order, call after call (the branch's buffers and split-K scratch are its own), for
// both forms and decode / prefill sizes, and a warm call still allocates and waits for nothing.
TEST(MoeLayerCuda, SharedExpertOnTheSideStreamEqualsOneStream) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  cuda_stream::Stream stream(d.index);
  cuda_stream::StreamScope on_stream(stream.get());
  for (int variant : {0, 1}) {  // V4 (MXFP4 routed, FP8 UE8M0 shared), GLM FP8
    const bool glm = variant == 1;
    Model m = make_model(glm, false, 256, 128, 32, glm ? 8 : 6, rng);
    ASSERT_TRUE(m.w.shared_w13.weight.defined());
    const MoeLayerWeights wd = to_dev(m.w, d);
    for (int64_t T : {1, 3, 64}) {
      MoeLayerParams one = m.p, side = m.p;
      one.shared_on_side_stream = false;
      side.shared_on_side_stream = true;
      MoeWorkspace ws_one, ws_side;
      for (int call = 0; call < 3; ++call) {
        Tensor x = random_bf16({T, m.H}, rng, 2.f).to(d);
        Tensor a = Tensor::empty({T, m.H}, DType::BF16, d), b = Tensor::empty({T, m.H}, DType::BF16, d);
        poison(a);
        poison(b);
        moe_layer(x, Tensor(), wd, one, a, ws_one);
        const auto before = cuda_memory::cache_stats(d.index);
        const auto waits = cuda_stream::host_waits();
        moe_layer(x, Tensor(), wd, side, b, ws_side);
        if (call > 0) {
          const auto after = cuda_memory::cache_stats(d.index);
          EXPECT_EQ(after.device_allocs + after.reuses, before.device_allocs + before.reuses)
              << "variant " << variant << " T=" << T << ": allocation in a warm call";
          EXPECT_EQ(cuda_stream::host_waits().total(), waits.total()) << "variant " << variant << " T=" << T;
        }
        ASSERT_TRUE(ws_side.side) << "the side stream was not used";
        const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
        for (int64_t i = 0; i < ha.numel(); ++i) {
          ASSERT_TRUE(std::isfinite(bf(ha, i))) << "variant " << variant << " T=" << T << " i=" << i;
          ASSERT_EQ(ha.data<uint16_t>()[i], hb.data<uint16_t>()[i])
              << "variant " << variant << " T=" << T << " call " << call << " i=" << i << ": " << bf(ha, i) << " vs "
              << bf(hb, i);
        }
      }
    }
  }
}
