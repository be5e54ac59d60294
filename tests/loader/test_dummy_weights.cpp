// `--load-format dummy` (model/dummy_weights.h, model/load_format.h): the dummy tensors are the
// ones a real checkpoint of the same config loads (names, shapes, dtypes), their values are
// finite and deterministic, a model built on them runs a finite forward, DeepSeek-V4's experts
// are used as stacked (no copy), bad options are clear errors, and the CUDA fill writes the CPU
// fill's bytes (skipped without a GPU).
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/engine/session.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/deepseek_v4/model.h"
#include "dsa/model/dummy_weights.h"
#include "dsa/model/load_format.h"
#include "dsa/model/weight_scan.h"
#include "dsa/model/schema/from_model_config.h"
#include "loader_test_util.h"

using namespace dsa;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

// A directory holding only the config.json of a tiny model (no weights).
void write_config_only(const std::string& dir, const std::string& arch) {
  std::filesystem::create_directories(dir);
  const nlohmann::json c = arch == "glm_moe_dsa" ? glm5_config_json(tiny_glm5_dims(), 4)
                                                 : deepseek_v4_config_json(tiny_deepseek_v4_dims(), 4, 128);
  std::ofstream(std::filesystem::path(dir) / "config.json") << c.dump(2);
}

model::LoadModelOptions dummy_options(uint64_t seed = 0, bool mtp = false) {
  model::LoadModelOptions o;
  o.progress = false;
  o.mtp = mtp;
  o.weights.format = model::LoadFormat::Dummy;
  o.weights.seed = seed;
  return o;
}

// Logits of a 5-token prompt (one prefill step) as host floats.
std::vector<float> prompt_logits(model::CausalLM& lm) {
  engine::SessionOptions so;
  so.max_requests = 1;
  so.max_step_tokens = 8;
  so.kv_blocks = 8;
  engine::Session s(lm, so);
  const kv::RequestId id = s.add_request();
  const Tensor l = s.forward(engine::ForwardBatch::of(id, {1, 7, 42, 3, 99}), /*all_logits=*/true).to(Device::cpu());
  return std::vector<float>(l.data<float>(), l.data<float>() + l.numel());
}

void expect_finite(const std::vector<float>& v) {
  ASSERT_FALSE(v.empty());
  size_t bad = 0;
  double sq = 0;
  for (float x : v) {
    bad += !std::isfinite(x);
    sq += static_cast<double>(x) * x;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(sq, 0.0) << "all logits are zero";
}

}  // namespace

TEST(DummyLoad, InventoryMatchesTinyCheckpoint) {
  test::TempDir dir;
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    TinyOptions o;
    o.arch = arch;
    make_tiny_checkpoint(o, dir.file(arch));
    LoadOptions lo;
    lo.progress = false;
    const model::ModelConfig cfg = model::load_model_config(dir.file(arch));
    const LoadedWeights real = load_model_weights(dir.file(arch), cfg, lo);
    const LoadedWeights dummy = dummy_model_weights(cfg, Device::cpu(), 3);
    ASSERT_EQ(dummy.tensors.size(), real.tensors.size()) << arch;
    for (const auto& [name, t] : real.tensors) {
      ASSERT_TRUE(dummy.has(name)) << arch << ": " << name;
      const Tensor& d = dummy.get(name);
      EXPECT_EQ(d.shape(), t.shape()) << name;
      EXPECT_EQ(d.dtype(), t.dtype()) << name;
      EXPECT_TRUE(d.is_contiguous()) << name;
    }
    EXPECT_EQ(dummy.bytes, real.bytes) << arch;
  }
}

TEST(DummyLoad, ValuesAreFiniteAndScalesSane) {
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    test::TempDir dir;
    write_config_only(dir.str(), arch);
    const model::ModelConfig cfg = model::model_config_for_load(dir.str(), model::LoadFormat::Dummy);
    const LoadedWeights w = dummy_model_weights(cfg, Device::cpu(), 1);
    std::vector<std::pair<std::string, Tensor>> all(w.tensors.begin(), w.tensors.end());
    const WeightScanReport scan = scan_non_finite(all, 600);
    EXPECT_TRUE(scan.complete());
    EXPECT_TRUE(scan.bad.empty()) << scan.summary();
    for (const auto& [name, t] : w.tensors) {
      if (t.dtype() == DType::E8M0) {
        const uint8_t b = t.data<uint8_t>()[0];
        EXPECT_GE(b, 127 - 16) << name;  // 2^-16 .. 1: rms 1/sqrt(in) from codes of rms 1..3
        EXPECT_LE(b, 127) << name;
      }
      if (t.dtype() == DType::I32) {  // hash routing: valid, distinct experts per token
        const int64_t k = t.size(1);
        for (int64_t r = 0; r < t.size(0); ++r)
          for (int64_t j = 0; j < k; ++j) {
            const int32_t e = t.data<int32_t>()[r * k + j];
            ASSERT_TRUE(e >= 0 && e < cfg.n_routed_experts) << name;
            for (int64_t i = 0; i < j; ++i) ASSERT_NE(t.data<int32_t>()[r * k + i], e) << name;
          }
      }
    }
  }
}

TEST(DummyLoad, SameSeedSameBytesOtherSeedOther) {
  test::TempDir dir;
  write_config_only(dir.str(), "deepseek_v4");
  const model::ModelConfig cfg = model::load_model_config(dir.str());
  const LoadedWeights a = dummy_model_weights(cfg, Device::cpu(), 5), b = dummy_model_weights(cfg, Device::cpu(), 5);
  const LoadedWeights c = dummy_model_weights(cfg, Device::cpu(), 6);
  for (const auto& [name, t] : a.tensors) EXPECT_TRUE(same_bytes(t, b.get(name))) << name;
  EXPECT_FALSE(same_bytes(a.get("embed.weight"), c.get("embed.weight")));
  EXPECT_FALSE(same_bytes(a.get("layers.2.ffn.experts.1.w1.weight"), c.get("layers.2.ffn.experts.1.w1.weight")));
  // Tensors of one shape differ too (the name is part of the seed).
  EXPECT_FALSE(same_bytes(a.get("layers.2.ffn.experts.1.w1.weight"), a.get("layers.2.ffn.experts.2.w1.weight")));
}

TEST(DummyLoad, ForwardIsFiniteAndDeterministic) {
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    test::TempDir dir;
    write_config_only(dir.str(), arch);
    auto lm = model::load_causal_lm(dir.str(), Device::cpu(), dummy_options(11));
    const std::vector<float> first = prompt_logits(*lm);
    expect_finite(first);
    auto again = model::load_causal_lm(dir.str(), Device::cpu(), dummy_options(11));
    const std::vector<float> second = prompt_logits(*again);
    ASSERT_EQ(first.size(), second.size());
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0) << arch;
  }
}

TEST(DummyLoad, V4ExpertsAreUsedAsStacked) {
  test::TempDir dir;
  write_config_only(dir.str(), "deepseek_v4");
  model::v4::V4Options o;
  o.weights.format = model::LoadFormat::Dummy;
  o.load_mtp = true;
  auto m = model::v4::load_deepseek_v4_model(dir.str(), Device::cpu(), o);
  const auto& w = m->weights();
  const auto& stacks = w.loaded.expert_stacks;
  EXPECT_EQ(w.layers[2].moe.w13.weight.raw(), stacks.at("layers.2.ffn.experts.w13.weight").raw());
  EXPECT_EQ(w.layers[2].moe.w2.scale.raw(), stacks.at("layers.2.ffn.experts.w2.scale").raw());
  EXPECT_EQ(w.layers[0].moe.shared_w13.weight.raw(), stacks.at("layers.0.ffn.shared_experts.w13.weight").raw());
  EXPECT_EQ(m->num_draft_layers(), 1);
  // Expert 1's w3 is the second half of its gate/up rows.
  const Tensor w3 = w.loaded.get("layers.2.ffn.experts.1.w3.weight");
  EXPECT_EQ(w3.raw(), w.layers[2].moe.w13.weight.select(0, 1).slice(0, w3.size(0), 2 * w3.size(0)).raw());
}

TEST(DummyLoad, BuiltinConfigsWithLayers) {
  const model::ModelConfig f = model::model_config_for_load("deepseek-v4-flash", model::LoadFormat::Dummy, 4);
  EXPECT_EQ(f.num_layers, 4);
  EXPECT_EQ(f.compress_ratios, (std::vector<int>{0, 0, 4, 128}));
  EXPECT_EQ(f.num_hash_layers, 3);
  EXPECT_EQ(f.num_mtp_layers, 1);
  EXPECT_EQ(f.hidden_size, 4096);
  const model::ModelConfig g = model::model_config_for_load("glm-5.1", model::LoadFormat::Dummy, 2);
  EXPECT_EQ(g.num_layers, 2);
  EXPECT_EQ(g.first_k_dense_replace, 2);
  EXPECT_EQ(g.indexer_types.size(), 2u);
  EXPECT_EQ(model::model_config_for_load("deepseek-v4-pro", model::LoadFormat::Dummy).num_layers, 61);
  // The same shapes as make-tiny's real-shape preset of the same layers.
  schema::DeepseekV4Dims d = preset_deepseek_v4_dims("flash");
  d.layers = 4;
  d.compress_ratios.resize(4);
  d.compress_ratios.push_back(0);
  d.hash_layers = 3;
  const auto want = schema::deepseek_v4_weight_specs(d);
  const auto got = schema::weight_specs(f);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].shape, want[i].shape) << got[i].name;
    EXPECT_EQ(got[i].dtype, want[i].dtype) << got[i].name;
  }
}

TEST(DummyLoad, BadOptionsAreClearErrors) {
  using dsa::test::error_of;
  EXPECT_HAS(error_of([] { model::parse_load_format("pt"); }), "--load-format 'pt': expected auto, safetensors or dummy");
  test::TempDir dir;
  EXPECT_HAS(error_of([&] { model::model_config_for_load(dir.str(), model::LoadFormat::Dummy); }),
             "has no config.json");
  EXPECT_HAS(error_of([&] { model::model_config_for_load(dir.file("nope"), model::LoadFormat::Dummy); }),
             "is neither a built-in");
  EXPECT_HAS(error_of([] { model::model_config_for_load("deepseek-v5", model::LoadFormat::Dummy); }),
             "deepseek-v4-flash");
  EXPECT_HAS(error_of([] { model::model_config_for_load("glm-5.1", model::LoadFormat::Auto); }),
             "add --load-format dummy");
  EXPECT_HAS(error_of([&] { model::model_config_for_load(dir.str(), model::LoadFormat::Safetensors, 2); }),
             "--layers 2 needs --load-format dummy");
  EXPECT_HAS(error_of([] { model::model_config_for_load("glm-5.1", model::LoadFormat::Dummy, -1); }),
             "--layers must be >= 0");
  // Through the model loader: the same message, before any weight.
  EXPECT_HAS(error_of([&] { model::load_causal_lm(dir.str(), Device::cpu(), dummy_options()); }), "has no config.json");
}

TEST(DummyLoad, CudaFillEqualsCpuFill) {
  DSA_REQUIRE_CUDA();
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    test::TempDir dir;
    write_config_only(dir.str(), arch);
    const model::ModelConfig cfg = model::load_model_config(dir.str());
    const LoadedWeights cpu = dummy_model_weights(cfg, Device::cpu(), 9);
    const LoadedWeights gpu = dummy_model_weights(cfg, Device::cuda(0), 9);
    ASSERT_EQ(cpu.tensors.size(), gpu.tensors.size());
    for (const auto& [name, t] : cpu.tensors) {
      EXPECT_TRUE(gpu.get(name).device().is_cuda()) << name;
      EXPECT_TRUE(same_bytes(t, gpu.get(name))) << arch << ": " << name;
    }
  }
}

TEST(DummyLoad, CudaForwardIsFiniteAndMatchesItself) {
  DSA_REQUIRE_CUDA();
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    test::TempDir dir;
    write_config_only(dir.str(), arch);
    auto lm = model::load_causal_lm(dir.str(), Device::cuda(0), dummy_options(4));
    const std::vector<float> a = prompt_logits(*lm);
    expect_finite(a);
    auto again = model::load_causal_lm(dir.str(), Device::cuda(0), dummy_options(4));
    const std::vector<float> b = prompt_logits(*again);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << arch;
  }
}

TEST(DummyLoad, HostGroupedFillEqualsElementFill) {
  // The host fill draws the byte kinds 8 bytes per hash over ranges (fill_range); the device
  // kernel writes element by element (fill_element): they must agree at every offset.
  using model::dummy::FillKind;
  for (FillKind k : {FillKind::E4m3, FillKind::Bytes, FillKind::ConstByte, FillKind::Bf16, FillKind::F32}) {
    model::dummy::FillRecipe r;
    r.kind = k;
    r.a = 1.f;
    r.b = 0.25f;
    r.byte = 120;
    std::vector<uint32_t> a(64), b(64);  // room for 64 f32 or 256 bytes
    for (int64_t i = 0; i < 61; ++i) model::dummy::fill_element(r, 77, i, a.data());
    model::dummy::fill_range(r, 77, 0, 5, b.data());
    model::dummy::fill_range(r, 77, 5, 22, b.data());
    model::dummy::fill_range(r, 77, 22, 61, b.data());
    const size_t bytes = k == FillKind::F32 ? 61 * 4 : k == FillKind::Bf16 ? 61 * 2 : 61;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << static_cast<int>(k);
  }
}
