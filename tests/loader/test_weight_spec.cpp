#include <cstring>
#include <fstream>
#include <set>

#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/formats/fp8_block.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/deepseek_v4/schema.h"
#include "dsa/model/schema/from_model_config.h"
#include "dsa/model/glm5/schema.h"
#include "loader_test_util.h"

using namespace dsa;
using namespace dsa::schema;
using dsa::test::error_of;

namespace {
const WeightSpec* find(const std::vector<WeightSpec>& v, const std::string& n) {
  for (const auto& s : v)
    if (s.name == n) return &s;
  return nullptr;
}
}  // namespace

TEST(WeightSpec, DeepseekV4FlashShapes) {
  // V4-Flash numbers (docs/model-reference.md §1); only 3 layers + MTP to keep the list short.
  DeepseekV4Dims d;
  d.vocab = 129280; d.hidden = 4096; d.layers = 3; d.heads = 64; d.q_lora = 1024; d.o_groups = 8; d.o_lora = 1024;
  d.index_heads = 64; d.index_head_dim = 128; d.experts = 256; d.experts_per_tok = 6; d.moe_inter = 2048;
  d.hash_layers = 3; d.mtp_layers = 1; d.compress_ratios = {0, 4, 128, 0};
  auto s = deepseek_v4_weight_specs(d);
  auto expect = [&](const std::string& n, DType t, Shape sh) {
    const WeightSpec* w = find(s, n);
    ASSERT_TRUE(w) << n;
    EXPECT_EQ(w->dtype, t) << n;
    EXPECT_EQ(w->shape, sh) << n;
  };
  expect("embed.weight", DType::BF16, {129280, 4096});
  expect("hc_head_fn", DType::F32, {4, 16384});
  expect("layers.0.hc_attn_fn", DType::F32, {24, 16384});
  expect("layers.0.attn.wq_a.weight", DType::E4M3, {1024, 4096});
  expect("layers.0.attn.wq_a.scale", DType::E8M0, {8, 32});
  expect("layers.0.attn.wq_b.weight", DType::E4M3, {32768, 1024});
  expect("layers.0.attn.wo_a.weight", DType::BF16, {8192, 4096});
  expect("layers.0.attn.wo_b.scale", DType::E8M0, {32, 64});
  expect("layers.0.ffn.gate.tid2eid", DType::I32, {129280, 6});
  expect("layers.0.ffn.experts.255.w1.weight", DType::I8, {2048, 2048});
  expect("layers.0.ffn.experts.255.w1.scale", DType::E8M0, {2048, 128});
  expect("layers.0.ffn.experts.0.w2.weight", DType::I8, {4096, 1024});
  expect("layers.0.ffn.shared_experts.w2.scale", DType::E8M0, {32, 16});
  expect("layers.1.attn.compressor.ape", DType::F32, {4, 1024});
  expect("layers.1.attn.compressor.wkv.weight", DType::BF16, {1024, 4096});
  expect("layers.1.attn.indexer.wq_b.weight", DType::E4M3, {8192, 1024});
  expect("layers.1.attn.indexer.weights_proj.weight", DType::BF16, {64, 4096});
  expect("layers.1.attn.indexer.compressor.ape", DType::F32, {4, 256});
  expect("layers.1.attn.indexer.compressor.norm.weight", DType::BF16, {128});
  expect("layers.2.attn.compressor.ape", DType::F32, {128, 512});
  expect("layers.2.attn.compressor.wgate.weight", DType::BF16, {512, 4096});
  expect("mtp.0.e_proj.scale", DType::E8M0, {32, 32});
  expect("mtp.0.hc_head_base", DType::F32, {4});
  expect("mtp.0.ffn.gate.bias", DType::F32, {256});  // MTP layer id 3 >= 3 hash layers
  EXPECT_FALSE(find(s, "layers.0.attn.compressor.ape"));     // sliding layer
  EXPECT_FALSE(find(s, "layers.2.attn.indexer.wq_b.weight"));  // HCA has no indexer
  EXPECT_FALSE(find(s, "layers.0.ffn.gate.bias"));           // hash layer
  EXPECT_FALSE(find(s, "mtp.0.attn.compressor.ape"));
  std::set<std::string> names;
  for (const auto& w : s) EXPECT_TRUE(names.insert(w.name).second) << "duplicate " << w.name;
}

TEST(WeightSpec, DeepseekV4DimsValidate) {
  DeepseekV4Dims d = tiny_deepseek_v4_dims();
  d.compress_ratios = {0, 4, 8, 4, 0};
  EXPECT_HAS(error_of([&] { d.validate(); }), "compress_ratios[2] = 8");
  d = tiny_deepseek_v4_dims();
  d.compress_ratios.pop_back();
  EXPECT_HAS(error_of([&] { d.validate(); }), "compress_ratios has 4 entries");
  d = tiny_deepseek_v4_dims();
  d.o_groups = 3;
  EXPECT_HAS(error_of([&] { d.validate(); }), "o_groups 3");
}

TEST(WeightSpec, Glm5Shapes) {
  Glm5Dims d;
  d.vocab = 154880; d.hidden = 6144; d.layers = 4; d.heads = 64; d.q_lora = 2048; d.kv_lora = 512; d.qk_nope = 192;
  d.qk_rope = 64; d.v_head = 256; d.index_heads = 32; d.index_head_dim = 128; d.experts = 4; d.moe_inter = 2048;
  d.dense_inter = 12288; d.first_dense = 3; d.mtp_layers = 1; d.indexer_full = {true, true, true, false}; d.fp8 = true;
  auto s = glm5_weight_specs(d);
  auto expect = [&](const std::string& n, DType t, Shape sh) {
    const WeightSpec* w = find(s, n);
    ASSERT_TRUE(w) << n;
    EXPECT_EQ(w->dtype, t) << n;
    EXPECT_EQ(w->shape, sh) << n;
  };
  // Shapes as in the published GLM-5 FP8 headers.
  expect("model.layers.0.self_attn.q_a_proj.weight_scale_inv", DType::F32, {16, 48});
  expect("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", DType::E4M3, {576, 6144});
  expect("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", DType::F32, {5, 48});  // ceil(576/128)
  expect("model.layers.0.self_attn.q_b_proj.weight_scale_inv", DType::F32, {128, 16});
  expect("model.layers.0.self_attn.kv_b_proj.weight_scale_inv", DType::F32, {224, 4});
  expect("model.layers.0.self_attn.o_proj.weight_scale_inv", DType::F32, {48, 128});
  expect("model.layers.0.self_attn.indexer.wk.weight_scale_inv", DType::F32, {1, 48});
  expect("model.layers.0.self_attn.indexer.k_norm.bias", DType::BF16, {128});
  expect("model.layers.0.self_attn.indexer.weights_proj.weight", DType::BF16, {32, 6144});
  expect("model.layers.0.mlp.gate_proj.weight", DType::E4M3, {12288, 6144});
  expect("model.layers.3.mlp.gate.e_score_correction_bias", DType::F32, {4});
  expect("model.layers.3.mlp.experts.3.down_proj.weight_scale_inv", DType::F32, {48, 16});
  expect("model.layers.4.eh_proj.weight", DType::BF16, {6144, 12288});
  expect("model.layers.4.self_attn.indexer.wq_b.weight", DType::E4M3, {4096, 2048});  // MTP has its own indexer
  EXPECT_FALSE(find(s, "model.layers.3.self_attn.indexer.wq_b.weight"));  // shared layer
  EXPECT_FALSE(find(s, "model.layers.0.mlp.gate.weight"));               // dense layer
}

TEST(WeightSpec, DeepseekV4HfNameMapRoundTrips) {
  auto s = deepseek_v4_weight_specs(tiny_deepseek_v4_dims());
  size_t mapped = 0;
  for (const auto& w : s) {
    auto hf = deepseek_v4_hf_name(w.name);
    if (!hf) {
      EXPECT_TRUE(w.name.rfind("mtp.", 0) == 0 || w.name.find(".experts.") != std::string::npos) << w.name;
      continue;
    }
    ++mapped;
    auto back = deepseek_v4_official_name(*hf);
    ASSERT_TRUE(back) << *hf;
    EXPECT_EQ(*back, w.name) << "via " << *hf;
  }
  EXPECT_GT(mapped, 50u);
  // Spot checks against transformers 5.17's module names.
  EXPECT_EQ(*deepseek_v4_hf_name("layers.0.attn.wq_a.weight"), "model.layers.0.self_attn.q_a_proj.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.0.attn.wq_a.scale"), "model.layers.0.self_attn.q_a_proj.weight_scale_inv");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.1.attn.indexer.compressor.norm.weight"),
            "model.layers.1.self_attn.compressor.indexer.kv_norm.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.1.attn.indexer.weights_proj.weight"),
            "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.1.attn.compressor.wgate.weight"),
            "model.layers.1.self_attn.compressor.gate_proj.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.2.ffn.gate.bias"), "model.layers.2.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.2.ffn.shared_experts.w3.weight"), "model.layers.2.mlp.shared_experts.up_proj.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.0.hc_ffn_scale"), "model.layers.0.ffn_hc.scale");
  EXPECT_EQ(*deepseek_v4_hf_name("hc_head_fn"), "model.hc_head.hc_fn");
  EXPECT_EQ(*deepseek_v4_hf_name("head.weight"), "lm_head.weight");
  EXPECT_EQ(*deepseek_v4_hf_name("layers.0.attn.attn_sink"), "model.layers.0.self_attn.sinks");
  EXPECT_FALSE(deepseek_v4_official_name("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_FALSE(deepseek_v4_hf_name("layers.0.ffn.experts.3.w1.weight"));
}

TEST(WeightSpec, ValidatorNamesMissingWrongAndUnknown) {
  test::Rng rng;
  test::TempDir dir;
  std::vector<WeightSpec> specs = {{"a.weight", {4, 8}, DType::BF16},
                                   {"b.weight", {2}, DType::BF16, {DType::F32}},
                                   {"c.scale", {1, 1}, DType::E8M0},
                                   {"d.weight", {3}, DType::F32}};
  write_safetensors(dir.file("model.safetensors"),
                    {{"a.weight", test::random_bf16({4, 9}, rng)},   // wrong shape
                     {"b.weight", test::random_f32({2}, rng)},       // accepted alternative dtype
                     {"c.scale", test::random_f32({1, 1}, rng)},     // wrong dtype
                     {"zzz", test::random_f32({1}, rng)}});          // unknown; d.weight missing
  Checkpoint c = Checkpoint::open(dir.str());
  ValidationReport r = validate(c, specs);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, std::vector<std::string>{"d.weight"});
  ASSERT_EQ(r.mismatched.size(), 2u);
  EXPECT_HAS(r.mismatched[0], "a.weight");
  EXPECT_HAS(r.mismatched[0], "[4, 8]");
  EXPECT_HAS(r.mismatched[0], "[4, 9]");
  EXPECT_HAS(r.mismatched[1], "c.scale");
  EXPECT_HAS(r.mismatched[1], "ue8m0");
  EXPECT_HAS(r.mismatched[1], "F32");
  EXPECT_EQ(r.unknown, std::vector<std::string>{"zzz"});
  std::string e = error_of([&] { r.throw_if_invalid(dir.str()); });
  EXPECT_HAS(e, "d.weight");
  EXPECT_HAS(e, "a.weight");
  EXPECT_HAS(e, "zzz");
}

// The checkpoint `dsa make-tiny` writes matches the weight spec of its own config.json.
TEST(TinyCheckpoint, DeepseekV4MatchesSpec) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  o.seed = 7;
  TinyCheckpoint t = make_tiny_checkpoint(o, dir.str());
  EXPECT_GT(t.shards, 1u);
  Checkpoint c = Checkpoint::open(dir.str());
  auto dims = deepseek_v4_dims(model::load_model_config(dir.str()));
  EXPECT_EQ(dims.compress_ratios, (std::vector<int>{0, 4, 128, 4, 0}));
  EXPECT_TRUE(dims.fp8);
  EXPECT_TRUE(dims.fp4_experts);
  ValidationReport r = validate(c, deepseek_v4_weight_specs(dims));
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_TRUE(r.unknown.empty()) << r.summary();
  EXPECT_EQ(r.expected, t.tensors);
  // UE8M0 scales are plausible exponents and FP8 weights hold no NaN (0x7F / 0xFF).
  Tensor sc = c.get("layers.0.attn.wq_a.scale");
  for (int64_t i = 0; i < sc.numel(); ++i) EXPECT_NE(sc.data<uint8_t>()[i], 0xFF);
  Tensor w = c.get("layers.0.attn.wq_a.weight");
  for (int64_t i = 0; i < w.numel(); ++i) ASSERT_NE(w.data<uint8_t>()[i] & 0x7F, 0x7F);
  // Hash routing table holds valid, distinct expert ids per token.
  Tensor tid = c.get("layers.0.ffn.gate.tid2eid");
  for (int64_t r0 = 0; r0 < tid.size(0); ++r0) {
    std::set<int32_t> ids;
    for (int64_t j = 0; j < tid.size(1); ++j) {
      int32_t e = tid.data<int32_t>()[r0 * tid.size(1) + j];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, 8);
      ids.insert(e);
    }
    ASSERT_EQ(ids.size(), static_cast<size_t>(tid.size(1)));
  }
  // Same seed, same bytes; another seed differs.
  test::TempDir d2;
  make_tiny_checkpoint(o, d2.str());
  Checkpoint c2 = Checkpoint::open(d2.str());
  EXPECT_EQ(std::memcmp(c2.get("layers.0.attn.wq_a.weight").raw(), w.raw(), w.nbytes()), 0);
}

TEST(TinyCheckpoint, Glm5Fp8AndBf16MatchSpec) {
  for (bool fp8 : {true, false}) {
    SCOPED_TRACE(fp8);
    test::TempDir dir;
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.fp8 = fp8;
    make_tiny_checkpoint(o, dir.str());
    Checkpoint c = Checkpoint::open(dir.str());
    auto dims = glm5_dims(model::load_model_config(dir.str()));
    EXPECT_EQ(dims.fp8, fp8);
    EXPECT_EQ(dims.indexer_full, (std::vector<bool>{true, false, true, false}));
    ValidationReport r = validate(c, glm5_weight_specs(dims));
    EXPECT_TRUE(r.ok()) << r.summary();
    EXPECT_TRUE(r.unknown.empty()) << r.summary();
  }
}

TEST(TinyCheckpoint, SpecOfAnotherConfigReportsTensors) {
  // Validating the tiny V4 checkpoint against a spec with 9 experts names the missing expert
  // and, with 7, reports expert 7 as unknown.
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  make_tiny_checkpoint(o, dir.str());
  Checkpoint c = Checkpoint::open(dir.str());
  DeepseekV4Dims d = tiny_deepseek_v4_dims();
  d.experts = 9;
  ValidationReport r = validate(c, deepseek_v4_weight_specs(d));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::find(r.missing.begin(), r.missing.end(), "layers.0.ffn.experts.8.w1.weight"), r.missing.end());
  // The gate weight now has the wrong shape.
  bool gate_named = false;
  for (const auto& m : r.mismatched) gate_named |= m.find("layers.0.ffn.gate.weight") != std::string::npos;
  EXPECT_TRUE(gate_named) << r.summary();
  d.experts = 7;
  r = validate(c, deepseek_v4_weight_specs(d));
  EXPECT_NE(std::find(r.unknown.begin(), r.unknown.end(), "layers.3.ffn.experts.7.w2.scale"), r.unknown.end());
}

// config.json has one reader (model::parse_model_config_json); the weight-spec numbers derived
// from what it parses are those the config was written from, for the tiny checkpoints and the
// built-in configurations.

namespace {
void expect_same(const DeepseekV4Dims& a, const DeepseekV4Dims& b) {
  EXPECT_EQ(a.vocab, b.vocab); EXPECT_EQ(a.hidden, b.hidden); EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads); EXPECT_EQ(a.head_dim, b.head_dim); EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.q_lora, b.q_lora); EXPECT_EQ(a.o_groups, b.o_groups); EXPECT_EQ(a.o_lora, b.o_lora);
  EXPECT_EQ(a.index_heads, b.index_heads); EXPECT_EQ(a.index_head_dim, b.index_head_dim);
  EXPECT_EQ(a.experts, b.experts); EXPECT_EQ(a.experts_per_tok, b.experts_per_tok);
  EXPECT_EQ(a.shared_experts, b.shared_experts); EXPECT_EQ(a.moe_inter, b.moe_inter);
  EXPECT_EQ(a.hc_mult, b.hc_mult); EXPECT_EQ(a.hash_layers, b.hash_layers); EXPECT_EQ(a.mtp_layers, b.mtp_layers);
  EXPECT_EQ(a.compress_ratios, b.compress_ratios); EXPECT_EQ(a.fp8, b.fp8); EXPECT_EQ(a.fp4_experts, b.fp4_experts);
}
void expect_same(const Glm5Dims& a, const Glm5Dims& b) {
  EXPECT_EQ(a.vocab, b.vocab); EXPECT_EQ(a.hidden, b.hidden); EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads); EXPECT_EQ(a.q_lora, b.q_lora); EXPECT_EQ(a.kv_lora, b.kv_lora);
  EXPECT_EQ(a.qk_nope, b.qk_nope); EXPECT_EQ(a.qk_rope, b.qk_rope); EXPECT_EQ(a.v_head, b.v_head);
  EXPECT_EQ(a.index_heads, b.index_heads); EXPECT_EQ(a.index_head_dim, b.index_head_dim);
  EXPECT_EQ(a.experts, b.experts); EXPECT_EQ(a.shared_experts, b.shared_experts);
  EXPECT_EQ(a.moe_inter, b.moe_inter); EXPECT_EQ(a.dense_inter, b.dense_inter);
  EXPECT_EQ(a.first_dense, b.first_dense); EXPECT_EQ(a.mtp_layers, b.mtp_layers);
  EXPECT_EQ(a.indexer_full, b.indexer_full); EXPECT_EQ(a.fp8, b.fp8);
}
}  // namespace

TEST(WeightSpec, ConfigJsonRoundTripsTinyDims) {
  for (bool fp8 : {true, false}) {
    auto v4 = tiny_deepseek_v4_dims();
    v4.fp8 = fp8;
    const auto j4 = deepseek_v4_config_json(v4, 4, 128);
    expect_same(deepseek_v4_dims(model::parse_model_config_json(j4.dump(), "tiny-v4")), v4);
    auto g = tiny_glm5_dims();
    g.fp8 = fp8;
    const auto jg = glm5_config_json(g, 4);
    expect_same(glm5_dims(model::parse_model_config_json(jg.dump(), "tiny-glm")), g);
  }
}

TEST(WeightSpec, BuiltinConfigsMatchPresets) {
  expect_same(deepseek_v4_dims(model::builtin_model_config("deepseek-v4-flash")), [] {
    auto d = preset_deepseek_v4_dims("flash");
    d.compress_ratios.push_back(0);  // MTP
    return d;
  }());
  expect_same(deepseek_v4_dims(model::builtin_model_config("deepseek-v4-pro")), [] {
    auto d = preset_deepseek_v4_dims("pro");
    d.compress_ratios.push_back(0);
    return d;
  }());
  auto g = glm5_dims(model::builtin_model_config("glm-5.1"));
  auto p = preset_glm5_dims("glm-5.1");
  p.fp8 = g.fp8;
  p.indexer_full = g.indexer_full;  // the built-in's indexer schedule is the engine's choice
  expect_same(g, p);
  EXPECT_GT(weight_specs(model::builtin_model_config("glm-5.1")).size(), 10000u);
}

// The BF16 DeepSeek-V4 tiny checkpoint is the twin of the FP8 one with the same seed: every
// weight that the FP8 checkpoint stores as e4m3 + UE8M0 scales holds exactly the dequantized
// value (power-of-two scales: e4m3 * 2^s is a bf16 value), everything else is byte-identical
// (MXFP4 experts included). This also pins that both draw the same random stream.
TEST(TinyCheckpoint, DeepseekV4Bf16IsTheExactTwinOfFp8) {
  test::TempDir dir;
  TinyOptions o;
  o.arch = "deepseek_v4";
  o.seed = 2;
  make_tiny_checkpoint(o, dir.file("fp8"));
  o.fp8 = false;
  make_tiny_checkpoint(o, dir.file("bf16"));
  Checkpoint f = Checkpoint::open(dir.file("fp8")), b = Checkpoint::open(dir.file("bf16"));
  size_t twins = 0;
  for (const auto& name : b.names()) {
    ASSERT_TRUE(f.has(name)) << name;
    Tensor tf = f.get(name).contiguous(), tb = b.get(name).contiguous();
    ASSERT_EQ(tf.shape(), tb.shape()) << name;
    if (tf.dtype() != DType::E4M3) {
      ASSERT_EQ(tf.dtype(), tb.dtype()) << name;
      ASSERT_EQ(std::memcmp(tf.raw(), tb.raw(), tf.nbytes()), 0) << name;
      continue;
    }
    ++twins;
    ASSERT_EQ(tb.dtype(), DType::BF16) << name;
    formats::Fp8BlockDequantParams p;
    p.weight = tf;
    p.scale = f.get(name.substr(0, name.size() - 7) + ".scale").contiguous();
    p.out = Tensor::empty(tf.shape(), DType::F32);
    formats::fp8_block_dequantize_cpu(p);
    for (int64_t i = 0; i < tf.numel(); ++i)
      ASSERT_EQ(bf16_bits_to_f32(tb.data<uint16_t>()[i]), p.out.data<float>()[i]) << name << " [" << i << "]";
  }
  EXPECT_GT(twins, 20u);
}
