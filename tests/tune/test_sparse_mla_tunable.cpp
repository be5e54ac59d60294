// The sparse MLA decode op as a tunable op: one instance per attention layer type, tactic ids
// = the op's tactic list, every tactic gives the reference result (CUDA), tuning works end to
// end (CPU reference path for the plumbing, CUDA for real timings).
#include <cmath>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/tune/families.h"
#include "dsa/tune/sparse_mla_tunable.h"
#include "dsa/tune/tactic_check.h"
#include "dsa/tune/tuner.h"

using namespace dsa;
using namespace dsa::tune;

TEST(TuneSparseMla, OneInstancePerAttentionLayerType) {
  auto glm = make_sparse_mla_tunables(load_plan_model("glm-5.1"), {}, 0);
  ASSERT_EQ(glm.size(), 1u);
  EXPECT_EQ(glm[0]->name(), "sparse_mla_decode");
  EXPECT_EQ(glm[0]->instance_key(), "fp8_ds_mla.h64.k2048.p64");
  EXPECT_EQ(glm[0]->dim_names(), std::vector<std::string>{"tokens"});
  auto flash = make_sparse_mla_tunables(load_plan_model("deepseek-v4-flash"), {}, 0);
  ASSERT_EQ(flash.size(), 3u);
  EXPECT_EQ(flash[0]->instance_key(), "fp8_model1.h64.k128.p256.sink");
  EXPECT_EQ(flash[1]->instance_key(), "fp8_model1.h64.k128.p256.x512.p64.sink");
  EXPECT_EQ(flash[2]->instance_key(), "fp8_model1.h64.k128.p256.xall.p2.sink");
  EXPECT_EQ(flash[2]->dim_names(), (std::vector<std::string>{"tokens", "keys"}));
  auto kb = flash[2]->other_dim_buckets();
  ASSERT_EQ(kb.size(), 1u);
  EXPECT_EQ(kb[0].front(), 64);
  // HCA key counts bucket up into that list and clamp at its end.
  EXPECT_EQ(flash[2]->bucket({3, 65}, 8192), (Dims{4, 256}));
  EXPECT_EQ(flash[2]->bucket({3, 1 << 30}, 8192)[1], kb[0].back());
  EXPECT_FALSE(glm[0]->signature().empty());
  EXPECT_EQ(glm[0]->signature(), flash[0]->signature());
}

TEST(TuneSparseMla, TacticIdsAreStableCodesOfTheOpsTactics) {
  SparseMlaTuneConfig c;
  c.device = Device::cpu();
  SparseMlaTunable op(c);
  for (int64_t T : {1, 8192}) {  // at T = 8192 large split counts are not offered
    auto t = op.tactics({T});
    ASSERT_GE(t.size(), 3u);
    EXPECT_EQ(t[0].id, kDefaultTactic);
    static char dummy[16];  // shapes only: the tactic list never reads the data
    ops::SparseMlaParams p;
    p.q = Tensor::from_blob(dummy, {T, 64, 576}, DType::BF16);
    p.main.indices = Tensor::from_blob(dummy, {T, 2048}, DType::I32);
    auto list = ops::sparse_mla_tactics(p);
    ASSERT_EQ(t.size(), list.size() + 1) << "T=" << T;
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(t[i + 1].id, list[i].heads_per_cta * 100 + list[i].splits);
      EXPECT_EQ(t[i + 1].description, list[i].name());
      EXPECT_EQ(sparse_mla_op_tactic(p, t[i + 1].id), static_cast<int>(i));  // back to the op's index
    }
    EXPECT_EQ(sparse_mla_op_tactic(p, kDefaultTactic), kDefaultTactic);
    EXPECT_EQ(sparse_mla_op_tactic(p, 3264), kDefaultTactic);  // h32_s64: never offered
  }
  // The positions shift with T; the ids do not.
  EXPECT_LT(op.tactics({8192}).size(), op.tactics({1}).size());
}

TEST(TuneSparseMla, TunesOnTheCpuReferencePath) {
  // On CPU tensors every tactic runs the reference: this checks prepare/run/release plumbing.
  SparseMlaTuneConfig c;
  c.device = Device::cpu();
  c.heads = 16;
  c.main_keys = 64;
  c.cache_bytes = 64 * 656;
  SparseMlaTunable op(c);
  TuneOptions o;
  o.timing.warmups = 0;
  o.timing.repeats = 1;
  BucketResult r = tune_bucket(op, {2}, o);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& tt : r.timings) EXPECT_TRUE(tt.ok) << tt.tactic.description << ": " << tt.error;
}

namespace {
// Compares the op's last output with the CPU reference on host copies of the same inputs.
std::string compare_with_reference(const SparseMlaTunable& op) {
  const ops::SparseMlaParams& d = op.last_params();
  ops::SparseMlaParams h = d;
  h.q = d.q.to(Device::cpu());
  h.main.cache.data = d.main.cache.data.to(Device::cpu());
  h.main.indices = d.main.indices.to(Device::cpu());
  if (d.extra) {
    h.extra->cache.data = d.extra->cache.data.to(Device::cpu());
    h.extra->indices = d.extra->indices.to(Device::cpu());
  }
  if (d.sink.defined()) h.sink = d.sink.to(Device::cpu());
  h.o = Tensor::empty(d.o.shape(), DType::BF16);
  h.lse = Tensor::empty(d.lse.shape(), DType::F32);
  h.stream = nullptr;
  ops::sparse_mla_reference(h);
  Tensor o = d.o.to(Device::cpu()), lse = d.lse.to(Device::cpu());
  for (int64_t i = 0; i < o.numel(); ++i) {
    float got = bf16_bits_to_f32(o.data<uint16_t>()[i]), want = bf16_bits_to_f32(h.o.data<uint16_t>()[i]);
    if (!(std::fabs(got - want) <= 1e-2f + 2.f / 128 * std::fabs(want)))
      return fmt::format("o[{}] = {} vs reference {}", i, got, want);
  }
  for (int64_t i = 0; i < lse.numel(); ++i) {
    float got = lse.data<float>()[i], want = h.lse.data<float>()[i];
    if (!(std::fabs(got - want) <= 1e-3f + 1e-3f * std::fabs(want)))
      return fmt::format("lse[{}] = {} vs reference {}", i, got, want);
  }
  return "";
}
}  // namespace

TEST(TuneSparseMla, CudaEveryTacticMatchesTheReference) {
  DSA_REQUIRE_CUDA();
  for (auto kind : {formats::KvFormat::DsMla, formats::KvFormat::Model1}) {
    SparseMlaTuneConfig c;
    c.kind = kind;
    c.heads = 64;
    c.main_keys = kind == formats::KvFormat::DsMla ? 2048 : 128;
    c.main_page = kind == formats::KvFormat::DsMla ? 64 : 256;
    c.extra_keys = kind == formats::KvFormat::DsMla ? 0 : 512;
    c.sink = kind == formats::KvFormat::Model1;
    c.cache_bytes = size_t{4} << 20;
    SparseMlaTunable op(c);
    for (int64_t T : {1, 5}) {
      SCOPED_TRACE(fmt::format("{} T={}", formats::kv_format_name(kind), T));
      auto failures = check_all_tactics(
          op, {T}, [&](const Tactic&) { return compare_with_reference(op); },
          [&] {
            // All input sets share o and lse. 0xFF bytes are NaN: an element a tactic fails to
            // write shows up.
            Tensor o = op.last_params().o, lse = op.last_params().lse;
            o.fill_bytes(0xFF);
            lse.fill_bytes(0xFF);
          });
      EXPECT_TRUE(failures.empty()) << describe(failures);
    }
  }
}

TEST(TuneSparseMla, CudaTuningPicksAWorkingTactic) {
  DSA_REQUIRE_CUDA();
  SparseMlaTuneConfig c;
  c.device = Device::cuda(0);
  SparseMlaTunable op(c);
  BucketResult r = tune_bucket(op, {8});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GT(r.entry.us, 0);
  for (const auto& tt : r.timings) EXPECT_TRUE(tt.ok) << tt.tactic.description << ": " << tt.error;
}
