// Checkpoints written the way transformers 5.17 writes them (issue 20; `dsa make-tiny --variant
// transformers`): DeepSeek-V4 with FP8 wo_a + .scale, bf16 / f16 small vectors, f32 norms, no
// MTP layer but compress_ratios' trailing entry; GLM with a bf16 router bias and (FP8) an FP8
// weights_proj. Each loads, and gives exactly the logits of the release-form checkpoint holding
// the same values (`--canonical`): the same model in another storage form.
#include <cstring>

#include "common/testing.h"
#include "dsa/engine/session.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/checkpoint_tiny.h"
#include "loader_test_util.h"

using namespace dsa;

namespace {

void write_pair(const std::string& arch, bool fp8, const test::TempDir& dir) {
  TinyOptions o;
  o.arch = arch;
  o.seed = 3;
  o.fp8 = fp8;
  o.variant = "transformers";
  make_tiny_checkpoint(o, dir.file("variant"));
  o.variant_canonical = true;
  make_tiny_checkpoint(o, dir.file("canonical"));
}

// Logits of a 12-token prefill and 3 greedy decode steps, every position's row.
std::vector<Tensor> run(const std::string& dir) {
  auto lm = model::load_causal_lm(dir, Device::cpu());
  engine::Session session(*lm);
  const kv::RequestId id = session.add_request();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(2 + (i * 37) % 500);
  const engine::ForwardBatch b = engine::ForwardBatch::of(id, prompt);
  std::vector<Tensor> out{session.forward(b, /*all_logits=*/true)};
  for (int step = 0; step < 3; ++step) {
    const Tensor& last = out.back();
    const float* row = last.data<float>() + (last.size(0) - 1) * last.size(1);
    const int32_t next = static_cast<int32_t>(std::max_element(row, row + last.size(1)) - row);
    out.push_back(session.forward({{next}, {id}, {12 + step}}));
  }
  return out;
}

void expect_same_logits(const std::string& a, const std::string& b) {
  const auto x = run(a), y = run(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].shape(), y[i].shape());
    int64_t differ = 0;
    for (int64_t k = 0; k < x[i].numel(); ++k) differ += x[i].data<float>()[k] != y[i].data<float>()[k];
    EXPECT_EQ(differ, 0) << "step " << i << ": " << differ << " of " << x[i].numel() << " logits differ";
    for (int64_t k = 0; k < x[i].numel(); ++k) ASSERT_TRUE(std::isfinite(x[i].data<float>()[k]));
  }
}

}  // namespace

TEST(TransformersVariant, DeepseekV4StoresWhatTransformersWrites) {
  test::TempDir dir;
  write_pair("deepseek_v4", true, dir);
  Checkpoint v = Checkpoint::open(dir.file("variant"));
  EXPECT_EQ(v.entry("layers.0.attn.wo_a.weight").dtype, DType::E4M3);
  EXPECT_TRUE(v.has("layers.0.attn.wo_a.scale"));
  EXPECT_EQ(v.entry("layers.0.attn.attn_sink").dtype, DType::BF16);
  EXPECT_EQ(v.entry("layers.2.ffn.gate.bias").dtype, DType::BF16);
  EXPECT_EQ(v.entry("layers.0.hc_attn_base").dtype, DType::F16);
  EXPECT_EQ(v.entry("layers.0.attn_norm.weight").dtype, DType::F32);
  EXPECT_FALSE(v.has("mtp.0.e_proj.weight"));
  const model::ModelConfig c = model::load_model_config(dir.file("variant"));
  EXPECT_EQ(c.num_mtp_layers, 0);  // compress_ratios has 5 entries for 4 layers: the last is ignored
  EXPECT_EQ(c.compress_ratios.size(), 4u);
  LoadOptions lo;
  lo.progress = false;
  const LoadedWeights w = load_model_weights(dir.file("variant"), c, lo);
  EXPECT_EQ(w.get("layers.0.attn.wo_a.weight").dtype(), DType::BF16);  // dequantized at load
  EXPECT_FALSE(w.has("layers.0.attn.wo_a.scale"));
  EXPECT_EQ(w.get("layers.0.attn.attn_sink").dtype(), DType::F32);     // widened at load
  EXPECT_EQ(w.get("layers.0.hc_attn_base").dtype(), DType::F32);
  EXPECT_TRUE(w.report.unknown.empty()) << w.report.summary();
  // The release form holds the same values: wo_a is bit-identical after dequantization.
  const LoadedWeights r = load_model_weights(dir.file("canonical"), model::load_model_config(dir.file("canonical")), lo);
  const Tensor& a = w.get("layers.1.attn.wo_a.weight");
  const Tensor& b = r.get("layers.1.attn.wo_a.weight");
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  expect_same_logits(dir.file("variant"), dir.file("canonical"));
}

TEST(TransformersVariant, Glm5Bf16RouterBias) {
  test::TempDir dir;
  write_pair("glm_moe_dsa", false, dir);
  Checkpoint v = Checkpoint::open(dir.file("variant"));
  EXPECT_EQ(v.entry("model.layers.1.mlp.gate.e_score_correction_bias").dtype, DType::BF16);
  expect_same_logits(dir.file("variant"), dir.file("canonical"));
}

TEST(TransformersVariant, Glm5Fp8WeightsProj) {
  test::TempDir dir;
  write_pair("glm_moe_dsa", true, dir);
  Checkpoint v = Checkpoint::open(dir.file("variant"));
  EXPECT_EQ(v.entry("model.layers.0.self_attn.indexer.weights_proj.weight").dtype, DType::E4M3);
  EXPECT_TRUE(v.has("model.layers.0.self_attn.indexer.weights_proj.weight_scale_inv"));
  expect_same_logits(dir.file("variant"), dir.file("canonical"));
}

// One linear stored in the other form than its neighbours (the scale tensor decides): a BF16
// GLM checkpoint whose q_a_proj is FP8 loads, and a form the spec does not accept is named.
TEST(TransformersVariant, MixedFormsAreDecidedByTheScaleTensor) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "glm_moe_dsa";
  o.seed = 4;
  make_tiny_checkpoint(o, dir.file("fp8"));
  o.fp8 = false;
  make_tiny_checkpoint(o, dir.file("bf16"));
  // bf16 checkpoint + the FP8 q_a_proj of layer 0 (its weight and scale from the FP8 files).
  Checkpoint f = Checkpoint::open(dir.file("fp8")), b = Checkpoint::open(dir.file("bf16"));
  std::vector<std::pair<std::string, Tensor>> all;
  for (const auto& n : b.names())
    if (n != "model.layers.0.self_attn.q_a_proj.weight") all.emplace_back(n, b.get(n));
  all.emplace_back("model.layers.0.self_attn.q_a_proj.weight", f.get("model.layers.0.self_attn.q_a_proj.weight"));
  all.emplace_back("model.layers.0.self_attn.q_a_proj.weight_scale_inv",
                   f.get("model.layers.0.self_attn.q_a_proj.weight_scale_inv"));
  std::filesystem::create_directories(dir.file("mixed"));
  write_safetensors(dir.file("mixed/model.safetensors"), all);
  std::filesystem::copy_file(dir.file("bf16/config.json"), dir.file("mixed/config.json"));
  LoadOptions lo;
  lo.progress = false;
  const LoadedWeights w = load_model_weights(dir.file("mixed"), model::load_model_config(dir.file("mixed")), lo);
  EXPECT_EQ(w.get("model.layers.0.self_attn.q_a_proj.weight").dtype(), DType::E4M3);
  EXPECT_EQ(w.get("model.layers.1.self_attn.q_a_proj.weight").dtype(), DType::BF16);
  EXPECT_TRUE(w.report.unknown.empty()) << w.report.summary();
  auto lm = model::load_causal_lm(dir.file("mixed"), Device::cpu());  // the forward builds with mixed forms
  EXPECT_EQ(lm->config().num_layers, 4);
  // GLM does not accept UE8M0 `.scale` scales: the mismatch names the forms accepted.
  all.pop_back();
  all.emplace_back("model.layers.0.self_attn.q_a_proj.scale", Tensor::empty({1, 2}, DType::E8M0));
  write_safetensors(dir.file("mixed/model.safetensors"), all);
  const std::string e =
      error_of([&] { load_model_weights(dir.file("mixed"), model::load_model_config(dir.file("mixed")), lo); });
  EXPECT_HAS(e, "model.layers.0.self_attn.q_a_proj.weight (in ");
  EXPECT_HAS(e, "expected bf16 [128, 256], got e4m3 [128, 256] (stored forms accepted: bf16, fp8 (e4m3 + f32 "
                ".weight_scale_inv))");
  EXPECT_HAS(e, "unknown tensors (not used):\n  model.layers.0.self_attn.q_a_proj.scale");
}

// Unquantized DeepSeek-V4 experts (what transformers saves when it dequantizes): BF16 routed and
// shared experts build into the MoE layer's BF16 format and the forward runs with finite logits
// (they used to be refused at build time).
TEST(TransformersVariant, DeepseekV4Bf16ExpertsRun) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  o.seed = 5;
  o.fp8 = false;
  o.fp4_experts = false;
  make_tiny_checkpoint(o, dir.file("bf16"));
  EXPECT_EQ(Checkpoint::open(dir.file("bf16")).entry("layers.2.ffn.experts.1.w1.weight").dtype, DType::BF16);
  EXPECT_EQ(Checkpoint::open(dir.file("bf16")).entry("layers.2.ffn.shared_experts.w2.weight").dtype, DType::BF16);
  const auto logits = run(dir.file("bf16"));
  for (const Tensor& t : logits)
    for (int64_t k = 0; k < t.numel(); ++k) ASSERT_TRUE(std::isfinite(t.data<float>()[k]));
}
