#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/checkpoint_tiny.h"
#include "loader_test_util.h"

using namespace dsa;
using dsa::test::error_of;

namespace {
bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor x = a.device().is_cuda() ? a.to(Device::cpu()) : a.contiguous();
  Tensor y = b.device().is_cuda() ? b.to(Device::cpu()) : b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}
}  // namespace

TEST(CheckpointLoad, TinyModelsLoadAsViews) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  make_tiny_checkpoint(o, dir.file("v4"));
  o.arch = "glm_moe_dsa";
  make_tiny_checkpoint(o, dir.file("glm"));
  LoadOptions lo;
  lo.progress = false;
  schema::DeepseekV4Dims d;
  LoadedWeights w = load_deepseek_v4(dir.file("v4"), lo, &d);
  EXPECT_EQ(d.layers, 4);
  EXPECT_EQ(w.tensors.size(), w.report.expected);
  EXPECT_EQ(w.get("layers.1.attn.wq_a.weight").dtype(), DType::E4M3);
  EXPECT_EQ(w.get("layers.1.ffn.experts.0.w1.weight").dtype(), DType::I8);
  EXPECT_HAS(error_of([&] { w.get("layers.9.attn.wq_a.weight"); }), "layers.9.attn.wq_a.weight");
  // CPU tensors are the memory-mapped bytes of the file, not copies.
  Checkpoint c = Checkpoint::open(dir.file("v4"));
  LoadedWeights w2 = load_weights(tensor_set(c), schema::deepseek_v4_weight_specs(d), lo, "v4");
  EXPECT_EQ(w2.get("embed.weight").raw(), c.get("embed.weight").raw());
  EXPECT_TRUE(same_bytes(w.get("layers.3.ffn.experts.7.w2.scale"), c.get("layers.3.ffn.experts.7.w2.scale")));
  LoadedWeights g = load_glm5(dir.file("glm"), lo);
  // Through the engine's ModelConfig too.
  LoadedWeights w3 = load_model_weights(dir.file("v4"), model::load_model_config(dir.file("v4")), lo);
  EXPECT_EQ(w3.tensors.size(), w.tensors.size());
  LoadedWeights g3 = load_model_weights(dir.file("glm"), model::load_model_config(dir.file("glm")), lo);
  EXPECT_EQ(g3.tensors.size(), g.tensors.size());
  EXPECT_EQ(g.get("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv").shape(), (Shape{5, 2}));
}

TEST(CheckpointLoad, MissingAndWrongTensorsAreNamed) {
  // A config that expects a dense layer 1 (missing tensors), a norm of the wrong shape (moved to
  // another shard through the index) and a stray tensor: the load fails and names all three.
  test::Rng rng;
  test::TempDir dir;
  TinyOptions o;
  o.arch = "glm_moe_dsa";
  o.fp8 = false;
  make_tiny_checkpoint(o, dir.str());
  std::ifstream in(dir.file("model.safetensors.index.json"));
  auto idx = nlohmann::json::parse(in);
  in.close();
  idx["weight_map"]["model.norm.weight"] = "extra.safetensors";
  idx["weight_map"]["rogue.tensor"] = "extra.safetensors";
  write_safetensors(dir.file("extra.safetensors"),
                    {{"model.norm.weight", test::random_bf16({255}, rng)}, {"rogue.tensor", test::random_f32({2}, rng)}});
  std::ofstream(dir.file("model.safetensors.index.json")) << idx.dump();
  std::ifstream cin(dir.file("config.json"));
  auto cfg = nlohmann::json::parse(cin);
  cin.close();
  cfg["first_k_dense_replace"] = 2;
  std::ofstream(dir.file("config.json")) << cfg.dump();
  LoadOptions lo;
  lo.progress = false;
  std::string e = error_of([&] { load_glm5(dir.str(), lo); });
  EXPECT_HAS(e, "model.layers.1.mlp.gate_proj.weight");
  EXPECT_HAS(e, "model.norm.weight");
  EXPECT_HAS(e, "[255]");
  // Non-strict: loads what matches, reports the rest.
  lo.strict = false;
  LoadedWeights w = load_glm5(dir.str(), lo);
  EXPECT_FALSE(w.has("model.layers.1.mlp.gate_proj.weight"));
  EXPECT_TRUE(w.has("model.layers.2.mlp.gate.weight"));
  EXPECT_NE(std::find(w.report.unknown.begin(), w.report.unknown.end(), "rogue.tensor"), w.report.unknown.end());
  EXPECT_NE(std::find(w.report.unknown.begin(), w.report.unknown.end(), "model.layers.1.mlp.experts.0.up_proj.weight"),
            w.report.unknown.end());
}

// A DeepSeek-V4 checkpoint in transformers' layout (renamed tensors, fused experts, no MTP, bf16
// fp32-kept parameters) loads under the official names with the same bytes.
TEST(CheckpointLoad, DeepseekV4TransformersLayout) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  o.fp8 = false;
  o.fp4_experts = false;
  make_tiny_checkpoint(o, dir.file("official"));
  Checkpoint off = Checkpoint::open(dir.file("official"));
  const auto d = tiny_deepseek_v4_dims();
  std::vector<std::pair<std::string, Tensor>> hf;
  for (const auto& n : off.names()) {
    if (n.rfind("mtp.", 0) == 0 || n.find(".experts.") != std::string::npos) continue;
    auto h = schema::deepseek_v4_hf_name(n);
    ASSERT_TRUE(h) << n;
    Tensor t = off.get(n);
    if (n == "hc_head_fn") {  // store one fp32 parameter as bf16, as a bf16 save does
      Tensor b = Tensor::empty(t.shape(), DType::BF16);
      for (int64_t i = 0; i < t.numel(); ++i) b.data<uint16_t>()[i] = f32_to_bf16_bits(t.data<float>()[i]);
      t = b;
    }
    hf.emplace_back(*h, t);
  }
  for (int64_t l = 0; l < d.layers; ++l) {
    const int64_t E = d.experts, I = d.moe_inter, H = d.hidden;
    Tensor gu = Tensor::empty({E, 2 * I, H}, DType::BF16), dn = Tensor::empty({E, H, I}, DType::BF16);
    for (int64_t e = 0; e < E; ++e) {
      const std::string b = "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e) + ".";
      std::memcpy(gu.data<uint16_t>() + e * 2 * I * H, off.get(b + "w1.weight").raw(), I * H * 2);
      std::memcpy(gu.data<uint16_t>() + e * 2 * I * H + I * H, off.get(b + "w3.weight").raw(), I * H * 2);
      std::memcpy(dn.data<uint16_t>() + e * H * I, off.get(b + "w2.weight").raw(), H * I * 2);
    }
    hf.emplace_back("model.layers." + std::to_string(l) + ".mlp.experts.gate_up_proj", gu);
    hf.emplace_back("model.layers." + std::to_string(l) + ".mlp.experts.down_proj", dn);
  }
  write_sharded_checkpoint(dir.file("hf"), hf, 3u << 20);
  // transformers' config names: layer_types / mlp_layer_types instead of compress_ratios / num_hash_layers.
  auto cfg = deepseek_v4_config_json(d, 4, 128);
  cfg.erase("compress_ratios");
  cfg.erase("num_hash_layers");
  cfg.erase("quantization_config");
  cfg["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                        "compressed_sparse_attention"};
  cfg["mlp_layer_types"] = {"hash_moe", "hash_moe", "moe", "moe"};
  std::ofstream(dir.file("hf/config.json")) << cfg.dump();

  LoadOptions lo;
  lo.progress = false;
  schema::DeepseekV4Dims got;
  LoadedWeights w = load_deepseek_v4(dir.file("hf"), lo, &got);
  EXPECT_EQ(got.mtp_layers, 0);
  EXPECT_EQ(got.compress_ratios, (std::vector<int>{0, 4, 128, 4}));
  EXPECT_EQ(got.hash_layers, 2);
  EXPECT_TRUE(w.report.unknown.empty()) << w.report.summary();
  size_t compared = 0;
  for (const auto& [name, t] : w.tensors) {
    if (name == "hc_head_fn") {
      Tensor ref = off.get(name);
      for (int64_t i = 0; i < ref.numel(); ++i)
        ASSERT_EQ(t.data<float>()[i], round_to_bf16(ref.data<float>()[i]));
      continue;
    }
    ASSERT_TRUE(same_bytes(t, off.get(name))) << name;
    ++compared;
  }
  EXPECT_GT(compared, 200u);
}

TEST(CheckpointLoad, CudaCopiesKeepBytes) {
  DSA_REQUIRE_CUDA();
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  make_tiny_checkpoint(o, dir.str());
  LoadOptions lo;
  lo.device = Device::cuda(0);
  LoadedWeights w = load_deepseek_v4(dir.str(), lo);
  Checkpoint c = Checkpoint::open(dir.str());
  for (const auto& [name, t] : w.tensors) {
    ASSERT_TRUE(t.device().is_cuda()) << name;
    ASSERT_TRUE(same_bytes(t, c.get(name))) << name;
  }
}

// GLM BF16 checkpoints (no quantization_config, no weight_scale_inv) load; so does an FP8
// checkpoint whose config lost its quantization_config: the scale tensors present decide each
// linear's form, not the config.
TEST(CheckpointLoad, Glm5Bf16CheckpointAndFp8TensorsUnderABf16Config) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "glm_moe_dsa";
  o.fp8 = false;
  make_tiny_checkpoint(o, dir.file("bf16"));
  o.fp8 = true;
  make_tiny_checkpoint(o, dir.file("fp8"));
  LoadOptions lo;
  lo.progress = false;
  schema::Glm5Dims d;
  LoadedWeights w = load_glm5(dir.file("bf16"), lo, &d);
  EXPECT_FALSE(d.fp8);
  EXPECT_EQ(w.tensors.size(), w.report.expected);
  EXPECT_EQ(w.get("model.layers.2.mlp.experts.3.down_proj.weight").dtype(), DType::BF16);
  EXPECT_FALSE(w.has("model.layers.0.self_attn.q_a_proj.weight_scale_inv"));

  std::ifstream cin(dir.file("fp8/config.json"));
  auto cfg = nlohmann::json::parse(cin);
  cin.close();
  cfg.erase("quantization_config");
  std::ofstream(dir.file("fp8/config.json")) << cfg.dump();
  LoadedWeights f = load_glm5(dir.file("fp8"), lo, &d);
  EXPECT_FALSE(d.fp8);  // what the config says
  EXPECT_EQ(f.get("model.layers.2.mlp.experts.3.down_proj.weight").dtype(), DType::E4M3);
  EXPECT_TRUE(f.has("model.layers.2.mlp.experts.3.down_proj.weight_scale_inv"));
  EXPECT_TRUE(f.report.unknown.empty()) << f.report.summary();
  // A scale tensor of the wrong shape is named as such.
  Checkpoint c = Checkpoint::open(dir.file("fp8"));
  std::vector<std::pair<std::string, Tensor>> all;
  for (const auto& n : c.names())
    all.emplace_back(n, n == "model.layers.0.self_attn.o_proj.weight_scale_inv" ? Tensor::zeros({1, 1}, DType::F32)
                                                                                 : c.get(n));
  std::filesystem::create_directories(dir.file("bad"));
  write_safetensors(dir.file("bad/model.safetensors"), all);
  std::ofstream(dir.file("bad/config.json")) << cfg.dump();
  const std::string e = error_of([&] { load_glm5(dir.file("bad"), lo); });
  EXPECT_HAS(e, "model.layers.0.self_attn.o_proj.weight_scale_inv");
  EXPECT_HAS(e, "[1, 1]");
}
