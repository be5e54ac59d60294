// The MoE expert GEMM as a tunable op: gate/up and down instances per model, every tile tactic
// gives the reference result (CUDA), tuning works end to end (CPU reference path for plumbing).
#include <cmath>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/tune/moe_gemm_tunable.h"
#include "dsa/tune/tactic_check.h"
#include "dsa/tune/tuner.h"

using namespace dsa;
using namespace dsa::tune;

TEST(TuneMoeGemm, GateUpAndDownInstancesPerModel) {
  auto flash = make_moe_gemm_tunables(load_plan_model("deepseek-v4-flash"), {}, 0);
  ASSERT_EQ(flash.size(), 2u);
  EXPECT_EQ(flash[0]->name(), "moe_expert_gemm");
  EXPECT_EQ(flash[0]->instance_key(), "mxfp4.e256.top6.n4096.k4096.a64.swiglu");
  EXPECT_EQ(flash[1]->instance_key(), "mxfp4.e256.top6.n4096.k2048.a64");
  auto glm = make_moe_gemm_tunables(load_plan_model("glm-5.1"), {}, 0);
  ASSERT_EQ(glm.size(), 2u);
  EXPECT_EQ(glm[0]->instance_key(), "fp8.e256.top8.n4096.k6144.a64.swiglu");
  auto t = flash[0]->tactics({1});
  ASSERT_EQ(t.size(), 12u);  // default, tiles 0-2, stream 3-8, gemv 9-10
  EXPECT_EQ(t[0].id, kDefaultTactic);
  EXPECT_EQ(t[2].description, "tile64");
  EXPECT_EQ(t[4].id, 3);
  EXPECT_EQ(t[10].id, 9);
  EXPECT_EQ(t[10].description, "gemv9");
  EXPECT_EQ(t[11].id, 10);
  MoeGemmTuneConfig c;
  c.alignment = 16;  // 64-row tiles need 64-aligned segments
  c.device = Device::cpu();
  EXPECT_EQ(MoeGemmTunable(c).tactics({1}).size(), 11u);
  c.format = ops::WeightFormat::BF16;  // no stream or GEMV kernel for bf16 weights
  EXPECT_EQ(MoeGemmTunable(c).tactics({1}).size(), 3u);
  c.format = ops::WeightFormat::MXFP4;
  c.topk = 300;
  EXPECT_THROW(MoeGemmTunable{c}, Error);
}

namespace {
MoeGemmTuneConfig small(ops::WeightFormat f, Device dev) {
  MoeGemmTuneConfig c;
  c.format = f;
  c.experts = 8;
  c.topk = 2;
  c.n = 256;
  c.k = 256;
  c.device = dev;
  return c;
}
}  // namespace

TEST(TuneMoeGemm, TunesOnTheCpuReferencePath) {
  for (auto f : {ops::WeightFormat::MXFP4, ops::WeightFormat::BF16}) {
    MoeGemmTunable op(small(f, Device::cpu()));
    SCOPED_TRACE(op.instance_key());
    TuneOptions o;
    o.timing.warmups = 0;
    o.timing.repeats = 1;
    BucketResult r = tune_bucket(op, {3}, o);
    ASSERT_TRUE(r.ok) << r.error;
    for (const auto& tt : r.timings) EXPECT_TRUE(tt.ok) << tt.tactic.description << ": " << tt.error;
  }
}

TEST(TuneMoeGemm, Bf16ExpertsGetInstances) {
  PlanModel m = load_plan_model("glm-5.1");
  m.expert_dtype = "bf16";
  auto t = make_moe_gemm_tunables(m, {}, 0);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]->instance_key(), "bf16.e256.top8.n4096.k6144.a64.swiglu");
  EXPECT_EQ(t[1]->instance_key(), "bf16.e256.top8.n6144.k2048.a64");
}

namespace {
// The last output's valid rows against the CPU op on host copies of the same inputs.
std::string compare_with_reference(const MoeGemmTunable& op) {
  const auto& s = op.last_set();
  Tensor m_idx = s.layout.m_indices.to(Device::cpu()), src = s.layout.src_token.to(Device::cpu());
  const Tensor& sc = op.weights().scale;
  ops::ExpertWeights w{op.weights().format, op.weights().weight.to(Device::cpu()), sc.defined() ? sc.to(Device::cpu()) : Tensor()};
  Tensor a = op.activations().to(Device::cpu());
  Tensor want = Tensor::empty(s.out.shape(), DType::BF16);
  want.fill_bytes(0);
  ops::ExpertGemmParams p;
  p.fuse_swiglu = op.config().fuse_swiglu;
  p.m_alignment = op.config().alignment;
  ops::expert_gemm(a, src, m_idx, w, want, p);
  Tensor got = s.out.to(Device::cpu());
  const int64_t cols = got.size(1);
  for (int64_t r = 0; r < got.size(0); ++r) {
    if (m_idx.data<int32_t>()[r] < 0) continue;  // padding rows are not written
    for (int64_t c = 0; c < cols; ++c) {
      float g = bf16_bits_to_f32(got.data<uint16_t>()[r * cols + c]);
      float e = bf16_bits_to_f32(want.data<uint16_t>()[r * cols + c]);
      if (!(std::fabs(g - e) <= 1e-3f + 2.f / 128 * std::fabs(e)))
        return fmt::format("out[{}][{}] = {} vs reference {}", r, c, g, e);
    }
  }
  return "";
}
}  // namespace

TEST(TuneMoeGemm, CudaEveryTacticMatchesTheReference) {
  DSA_REQUIRE_CUDA();
  for (auto f : {ops::WeightFormat::MXFP4, ops::WeightFormat::FP8Block, ops::WeightFormat::BF16})
    for (bool swiglu : {true, false}) {
      MoeGemmTuneConfig c = small(f, Device::cuda(0));
      c.fuse_swiglu = swiglu;
      MoeGemmTunable op(c);
      for (int64_t T : {1, 37}) {
        SCOPED_TRACE(fmt::format("{} swiglu={} T={}", op.instance_key(), swiglu, T));
        auto failures = check_all_tactics(
            op, {T}, [&](const Tactic&) { return compare_with_reference(op); },
            [&] {
              Tensor o = op.next_set().out;
              o.fill_bytes(0xFF);  // NaN: a valid row a tactic fails to write shows up
            });
        EXPECT_TRUE(failures.empty()) << describe(failures);
      }
    }
}

TEST(TuneMoeGemm, CudaTuningPicksAWorkingTactic) {
  DSA_REQUIRE_CUDA();
  MoeGemmTunable op(small(ops::WeightFormat::MXFP4, Device::cuda(0)));
  BucketResult r = tune_bucket(op, {4});
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& tt : r.timings) EXPECT_TRUE(tt.ok) << tt.tactic.description << ": " << tt.error;
}
