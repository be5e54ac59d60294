#include "dsa/model/checkpoint_tiny.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/formats/fp8_block.h"
#include "dsa/formats/mxfp4.h"
#include "dsa/model/checkpoint.h"

namespace dsa {

using schema::WeightSpec;

schema::DeepseekV4Dims tiny_deepseek_v4_dims() {
  schema::DeepseekV4Dims d;
  d.vocab = 512;
  d.hidden = 256;
  d.layers = 4;
  d.heads = 4;
  d.head_dim = 512;
  d.rope_dim = 64;
  d.q_lora = 128;
  d.o_groups = 2;
  d.o_lora = 128;
  d.index_heads = 4;
  d.index_head_dim = 128;
  d.experts = 8;
  d.experts_per_tok = 2;
  d.shared_experts = 1;
  d.moe_inter = 128;
  d.hc_mult = 4;
  d.hash_layers = 2;
  d.mtp_layers = 1;
  d.compress_ratios = {0, 4, 128, 4, 0};  // + the MTP layer (sliding)
  return d;
}

schema::Glm5Dims tiny_glm5_dims() {
  schema::Glm5Dims d;
  d.vocab = 512;
  d.hidden = 256;
  d.layers = 4;
  d.heads = 4;
  d.q_lora = 128;
  d.kv_lora = 512;
  d.qk_nope = 192;
  d.qk_rope = 64;
  d.v_head = 256;
  d.index_heads = 4;
  d.index_head_dim = 128;
  d.experts = 8;
  d.shared_experts = 1;
  d.moe_inter = 128;
  d.dense_inter = 256;
  d.first_dense = 1;
  d.mtp_layers = 1;
  d.indexer_full = {true, false, true, false};
  return d;
}

schema::DeepseekV4Dims preset_deepseek_v4_dims(const std::string& preset) {
  schema::DeepseekV4Dims d;
  d.vocab = 129280;
  d.head_dim = 512;
  d.rope_dim = 64;
  d.index_heads = 64;
  d.index_head_dim = 128;
  d.experts_per_tok = 6;
  d.shared_experts = 1;
  d.hc_mult = 4;
  d.hash_layers = 3;
  d.mtp_layers = 1;
  if (preset == "flash") {
    d.hidden = 4096; d.layers = 43; d.heads = 64; d.q_lora = 1024; d.o_groups = 8; d.o_lora = 1024;
    d.experts = 256; d.moe_inter = 2048;
    d.compress_ratios = {0, 0};
  } else if (preset == "pro") {
    d.hidden = 7168; d.layers = 61; d.heads = 128; d.q_lora = 1536; d.o_groups = 16; d.o_lora = 1024;
    d.experts = 384; d.moe_inter = 3072;
    d.compress_ratios = {128, 128};
  } else {
    fail("make-tiny: unknown deepseek_v4 preset '{}' (tiny, flash, pro)", preset);
  }
  // docs/model-reference.md §1: then CSA / HCA alternating, ending with CSA.
  while (static_cast<int64_t>(d.compress_ratios.size()) < d.layers)
    d.compress_ratios.push_back(d.compress_ratios.size() % 2 == 0 ? 4 : 128);
  d.compress_ratios.back() = 4;
  return d;
}

schema::Glm5Dims preset_glm5_dims(const std::string& preset) {
  DSA_CHECK(preset == "glm-5.1", "make-tiny: unknown glm_moe_dsa preset '{}' (tiny, glm-5.1)", preset);
  schema::Glm5Dims d;
  d.vocab = 154880; d.hidden = 6144; d.layers = 78; d.heads = 64; d.q_lora = 2048; d.kv_lora = 512;
  d.qk_nope = 192; d.qk_rope = 64; d.v_head = 256; d.index_heads = 32; d.index_head_dim = 128;
  d.experts = 256; d.shared_experts = 1; d.moe_inter = 2048; d.dense_inter = 12288; d.first_dense = 3;
  d.mtp_layers = 1;
  d.indexer_full.assign(78, true);
  return d;
}

nlohmann::json deepseek_v4_config_json(const schema::DeepseekV4Dims& d, int64_t index_topk, int64_t sliding_window,
                                       double routed_scaling_factor) {
  nlohmann::json c = {
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"vocab_size", d.vocab},
      {"hidden_size", d.hidden},
      {"moe_intermediate_size", d.moe_inter},
      {"num_hidden_layers", d.layers},
      {"num_attention_heads", d.heads},
      {"num_key_value_heads", 1},
      {"head_dim", d.head_dim},
      {"qk_rope_head_dim", d.rope_dim},
      {"q_lora_rank", d.q_lora},
      {"o_lora_rank", d.o_lora},
      {"o_groups", d.o_groups},
      {"hidden_act", "silu"},
      {"swiglu_limit", 10.0},
      {"rms_norm_eps", 1e-6},
      {"max_position_embeddings", 65536},
      {"sliding_window", sliding_window},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"rope_scaling",
       {{"type", "yarn"}, {"factor", 16}, {"original_max_position_embeddings", 65536}, {"beta_fast", 32}, {"beta_slow", 1}}},
      {"num_nextn_predict_layers", d.mtp_layers},
      {"compress_ratios", d.compress_ratios},
      {"index_n_heads", d.index_heads},
      {"index_head_dim", d.index_head_dim},
      {"index_topk", index_topk},
      {"hc_mult", d.hc_mult},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"n_routed_experts", d.experts},
      {"n_shared_experts", d.shared_experts},
      {"num_experts_per_tok", d.experts_per_tok},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", routed_scaling_factor},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"num_hash_layers", d.hash_layers},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
  };
  if (d.fp4_experts) c["expert_dtype"] = "fp4";
  if (d.fp8)
    c["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"},     {"quant_method", "fp8"},
                                {"scale_fmt", "ue8m0"},           {"weight_block_size", {128, 128}}};
  return c;
}

nlohmann::json glm5_config_json(const schema::Glm5Dims& d, int64_t index_topk) {
  std::vector<std::string> indexer_types;
  for (bool f : d.indexer_full) indexer_types.push_back(f ? "full" : "shared");
  nlohmann::json c = {
      {"architectures", {"GlmMoeDsaForCausalLM"}},
      {"model_type", "glm_moe_dsa"},
      {"attention_bias", false},
      {"hidden_act", "silu"},
      {"vocab_size", d.vocab},
      {"hidden_size", d.hidden},
      {"intermediate_size", d.dense_inter},
      {"moe_intermediate_size", d.moe_inter},
      {"num_hidden_layers", d.layers},
      {"num_attention_heads", d.heads},
      {"num_key_value_heads", d.heads},
      {"n_routed_experts", d.experts},
      {"n_shared_experts", d.shared_experts},
      {"num_experts_per_tok", 2},
      {"first_k_dense_replace", d.first_dense},
      {"n_group", 1},
      {"topk_group", 1},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 2.5},
      {"scoring_func", "sigmoid"},
      {"topk_method", "noaux_tc"},
      {"q_lora_rank", d.q_lora},
      {"kv_lora_rank", d.kv_lora},
      {"qk_nope_head_dim", d.qk_nope},
      {"qk_rope_head_dim", d.qk_rope},
      {"v_head_dim", d.v_head},
      {"index_n_heads", d.index_heads},
      {"index_head_dim", d.index_head_dim},
      {"index_topk", index_topk},
      {"indexer_types", indexer_types},
      {"rope_theta", 1000000.0},
      {"rms_norm_eps", 1e-5},
      {"max_position_embeddings", 4096},
      {"num_nextn_predict_layers", d.mtp_layers},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
  };
  if (d.fp8)
    c["quantization_config"] = {
        {"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  return c;
}

namespace {

// Deterministic random source for tiny weights.
struct Gen {
  std::mt19937_64 rng;
  float normal(float sd) { return std::normal_distribution<float>(0.f, sd)(rng); }
  int64_t randint(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Values of a logical [out][in] float weight; std 1/sqrt(in) keeps activations O(1).
std::vector<float> random_matrix(Gen& g, int64_t out, int64_t in) {
  std::vector<float> w(static_cast<size_t>(out * in));
  const float sd = 1.f / std::sqrt(static_cast<float>(in));
  for (auto& x : w) x = g.normal(sd);
  return w;
}

// Quantization goes through dsa::formats (the engine's own FP8-block and MXFP4 encoders):
// FP8 scale = amax / 448 per 128x128 block, a power of two for UE8M0 and exact for GLM's fp32
// weight_scale_inv; MXFP4 scale = 2^ceil(log2(amax / 6)) per 32 values, low nibble first.
// `pow2`: fp32 scales rounded up to a power of two too (TinyOptions::pow2_scales).
void quantize_fp8(const std::vector<float>& w, int64_t out, int64_t in, Tensor& q, Tensor& scale, bool pow2) {
  formats::Fp8BlockQuantParams p;
  p.in = Tensor::from_blob(const_cast<float*>(w.data()), {out, in}, DType::F32);
  p.weight = q;
  p.scale = scale;
  p.rounding = scale.dtype() == DType::E8M0 || pow2 ? formats::ScaleRounding::Pow2Ceil : formats::ScaleRounding::Exact;
  formats::fp8_block_quantize(p);
}

// The BF16 twin of an FP8 linear: the same random matrix, quantized exactly as the FP8
// checkpoint quantizes it (scale dtype `scale_dtype`), dequantized in fp32 and rounded to bf16.
// With power-of-two scales e4m3 * 2^s has at most 4 significant bits and is exact in bf16; with
// arbitrary fp32 scales the bf16 rounding adds at most 2^-8 relative error per weight (bf16 keeps 8 significant bits).
void bf16_twin_of_fp8(const std::vector<float>& w, const WeightSpec& s, DType scale_dtype, bool pow2, Tensor& out) {
  const int64_t rows = s.shape[0], cols = s.shape[1];
  Tensor q = Tensor::empty({rows, cols}, DType::E4M3);
  Tensor scale = Tensor::empty(formats::fp8_block_scale_shape(rows, cols), scale_dtype);
  quantize_fp8(w, rows, cols, q, scale, pow2);
  formats::Fp8BlockDequantParams p;
  p.weight = q;
  p.scale = scale;
  p.out = out;
  formats::fp8_block_dequantize_cpu(p);
}

void quantize_mxfp4(const std::vector<float>& w, int64_t out, int64_t in, Tensor& q, Tensor& scale) {
  formats::Mxfp4QuantParams p;
  p.in = Tensor::from_blob(const_cast<float*>(w.data()), {out, in}, DType::F32);
  p.packed = q;
  p.scale = scale;
  formats::mxfp4_quantize(p);
}

// Values for a non-linear tensor, chosen by its role (name) so that the model is well behaved.
// `round`: values are first rounded to this dtype (BF16 / F16; F32 = none), so that a tensor
// stored wider holds exactly the values of its narrower twin (make-tiny variants).
void fill_other(Gen& g, const WeightSpec& s, Tensor& t, int64_t n_experts, DType round = DType::F32) {
  const int64_t n = t.numel();
  auto set = [&](auto fn) {
    for (int64_t i = 0; i < n; ++i) {
      float v = fn(i);
      if (round == DType::BF16) v = round_to_bf16(v);
      if (round == DType::F16) v = f16_bits_to_f32(f32_to_f16_bits(v));
      if (t.dtype() == DType::F32) t.data<float>()[i] = v;
      else if (t.dtype() == DType::F16) t.data<uint16_t>()[i] = f32_to_f16_bits(v);
      else t.data<uint16_t>()[i] = f32_to_bf16_bits(v);
    }
  };
  const std::string& nm = s.name;
  if (t.dtype() == DType::I32 || t.dtype() == DType::I64) {
    // tid2eid [vocab][k]: k distinct experts per token.
    const int64_t k = s.shape.back(), rows = n / k;
    std::vector<int64_t> perm(static_cast<size_t>(n_experts));
    for (int64_t r = 0; r < rows; ++r) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), g.rng);
      for (int64_t j = 0; j < k; ++j) {
        if (t.dtype() == DType::I32) t.data<int32_t>()[r * k + j] = static_cast<int32_t>(perm[j]);
        else t.data<int64_t>()[r * k + j] = perm[j];
      }
    }
    return;
  }
  if (ends_with(nm, "norm.weight") || ends_with(nm, "layernorm.weight")) return set([&](int64_t) { return 1.f + g.normal(0.1f); });
  if (ends_with(nm, "k_norm.bias")) return set([&](int64_t) { return g.normal(0.1f); });
  if (ends_with(nm, "_fn")) return set([&](int64_t) { return g.normal(0.05f); });
  if (ends_with(nm, "_base")) return set([&](int64_t) { return g.normal(0.1f); });
  if (ends_with(nm, "_scale")) return set([&](int64_t) { return 1.f + g.normal(0.1f); });
  if (ends_with(nm, "attn_sink")) return set([&](int64_t) { return g.normal(0.5f); });
  if (ends_with(nm, ".ape")) return set([&](int64_t) { return g.normal(0.3f); });
  if (ends_with(nm, "gate.bias") || ends_with(nm, "e_score_correction_bias")) return set([&](int64_t) { return g.normal(0.05f); });
  if (nm == "embed.weight" || nm == "model.embed_tokens.weight") return set([&](int64_t) { return g.normal(1.f); });
  // Any other 2-D tensor is a plain linear weight [out][in].
  const float sd = s.shape.size() == 2 ? 1.f / std::sqrt(static_cast<float>(s.shape[1])) : 0.1f;
  set([&](int64_t) { return g.normal(sd); });
}

}  // namespace

namespace {

// Fast filler for large synthetic checkpoints (load-time measurements): xorshift bytes, FP8
// codes without NaN, scales near 2^-8, small bf16/fp32 values. Not a meaningful model.
struct Fast {
  uint64_t x;
  uint64_t next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24) * 2.f - 1.f; }
};

void fast_fill(Fast& f, const WeightSpec& s, Tensor& t, int64_t n_experts, Gen& g) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::E4M3:
      for (int64_t i = 0; i < n; ++i) {
        uint8_t b = static_cast<uint8_t>(f.next());
        t.data<uint8_t>()[i] = (b & 0x7F) == 0x7F ? static_cast<uint8_t>(b & 0xF0) : b;
      }
      return;
    case DType::E8M0:
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(117 + f.next() % 4);
      return;
    case DType::I8:
    case DType::U8:
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(f.next());
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = f32_to_bf16_bits(0.05f * f.uniform());
      return;
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = 0.05f * f.uniform();
      return;
    default:
      fill_other(g, s, t, n_experts);  // routing tables
  }
}

}  // namespace

namespace {

// `--variant transformers`: the dtype a small tensor has in a checkpoint written by transformers
// 5.17 (its fp32 parameters saved in bf16 or f16, norms in f32 where the release has bf16), or
// nullopt where it keeps the release dtype. One of each kind is enough to test the loader.
std::optional<DType> transformers_storage(const std::string& arch, const WeightSpec& s) {
  if (arch == "deepseek_v4") {
    if (ends_with(s.name, "attn_sink") || ends_with(s.name, "ffn.gate.bias")) return DType::BF16;
    if (ends_with(s.name, "_base")) return DType::F16;
    if (ends_with(s.name, "norm.weight")) return DType::F32;
    return std::nullopt;
  }
  if (ends_with(s.name, "e_score_correction_bias")) return DType::BF16;  // save_pretrained of a bf16 model
  return std::nullopt;
}

// Linears transformers' FP8 quantizer stores quantized although the release keeps them in bf16:
// DeepSeek-V4's wo_a (o_a_proj) always; GLM's indexer weights_proj in FP8 checkpoints.
bool transformers_quantizes(const std::string& arch, bool fp8, const std::string& name) {
  if (arch == "deepseek_v4") return ends_with(name, ".attn.wo_a.weight");
  return fp8 && ends_with(name, ".indexer.weights_proj.weight");
}

}  // namespace

TinyCheckpoint make_tiny_checkpoint(const TinyOptions& opt, const std::string& dir) {
  TinyCheckpoint out;
  std::vector<WeightSpec> specs, fp8_specs;  // fp8_specs: the same model's FP8 layout
  int64_t n_experts = 0;
  if (opt.arch == "deepseek_v4") {
    auto d = opt.v4_dims ? *opt.v4_dims
                         : opt.preset == "tiny" ? tiny_deepseek_v4_dims() : preset_deepseek_v4_dims(opt.preset);
    if (opt.layers > 0) d.layers = opt.layers;
    if (opt.intermediate > 0) d.moe_inter = opt.intermediate;
    if (!opt.variant.empty()) d.mtp_layers = 0;  // transformers saves no MTP layer
    if (opt.vocab > 0) d.vocab = opt.vocab;
    d.compress_ratios.resize(static_cast<size_t>(d.layers));
    for (int64_t m = 0; m < d.mtp_layers; ++m) d.compress_ratios.push_back(0);
    if (opt.preset != "tiny") d.hash_layers = std::min(d.hash_layers, d.layers);
    d.fp4_experts = opt.fp4_experts;
    d.fp8 = true;
    fp8_specs = schema::deepseek_v4_weight_specs(d);
    d.fp8 = opt.fp8;
    specs = schema::deepseek_v4_weight_specs(d);
    const bool tiny = opt.preset == "tiny";
    out.config = deepseek_v4_config_json(d, tiny ? 4 : (opt.preset == "pro" ? 1024 : 512), 128,
                                         opt.preset == "pro" ? 2.5 : 1.5);
    // The release configs' context: YaRN factor 16 over 65536 positions (the tiny keeps 65536).
    if (!tiny) out.config["max_position_embeddings"] = 1048576;
    // The release config's entry for the MTP layer stays although the layer is gone.
    if (!opt.variant.empty() && !opt.variant_canonical) out.config["compress_ratios"].push_back(0);
    n_experts = d.experts;
  } else if (opt.arch == "glm_moe_dsa") {
    auto d = opt.preset == "tiny" ? tiny_glm5_dims() : preset_glm5_dims(opt.preset);
    if (opt.vocab > 0) d.vocab = opt.vocab;
    if (opt.intermediate > 0) d.moe_inter = d.dense_inter = opt.intermediate;
    if (opt.layers > 0) {
      d.layers = opt.layers;
      d.indexer_full.resize(static_cast<size_t>(d.layers), true);
      d.first_dense = std::min(d.first_dense, d.layers);
    }
    d.fp8 = true;
    fp8_specs = schema::glm5_weight_specs(d);
    d.fp8 = opt.fp8;
    specs = schema::glm5_weight_specs(d);
    out.config = glm5_config_json(d, opt.preset == "tiny" ? 4 : 2048);
    if (opt.preset != "tiny") out.config["max_position_embeddings"] = 202752;  // GLM-5.1's release config
    n_experts = d.experts;
  } else {
    fail("make-tiny: unknown arch '{}' (expected deepseek_v4 or glm_moe_dsa)", opt.arch);
  }

  // --variant transformers: other storage of some tensors (transformers_storage); with
  // variant_canonical the same values in the release storage instead.
  std::map<std::string, DType> round_to;     // value rounding of a tensor stored wider
  std::map<std::string, DType> fp8_twin;      // BF16 weight holding its FP8 twin's values (name -> scale dtype)
  if (!opt.variant.empty()) {
    DSA_CHECK(opt.variant == "transformers", "make-tiny: unknown variant '{}' (transformers)", opt.variant);
    std::vector<WeightSpec> written;
    for (const WeightSpec& sp : specs) {
      WeightSpec w = sp;
      w.linear.reset();
      if (auto t = transformers_storage(opt.arch, sp)) {
        round_to[sp.name] = sp.dtype == DType::F32 ? *t : sp.dtype;
        if (!opt.variant_canonical) w.dtype = *t;
      } else if (transformers_quantizes(opt.arch, opt.fp8, sp.name)) {
        const schema::LinearKind k =
            opt.arch == "deepseek_v4" ? schema::LinearKind::Fp8Ue8m0 : schema::LinearKind::Fp8F32Inv;
        if (opt.variant_canonical) {
          fp8_twin[sp.name] = k == schema::LinearKind::Fp8Ue8m0 ? DType::E8M0 : DType::F32;
        } else {
          schema::add_linear(written, sp.name.substr(0, sp.name.size() - 7), sp.shape[0], sp.shape[1], k);
          continue;
        }
      }
      written.push_back(std::move(w));
    }
    specs = std::move(written);
  }

  // Units: a quantized weight with its scale, or a single tensor; kept in spec order so the
  // random stream (and so the bytes) depends only on the seed and the spec.
  std::map<std::string, const WeightSpec*> by_name;
  for (const auto& s : specs) by_name[s.name] = &s;
  std::vector<std::vector<const WeightSpec*>> units;
  std::set<std::string> in_unit;
  for (const auto& s : specs) {
    if (in_unit.count(s.name)) continue;
    std::vector<const WeightSpec*> u{&s};
    if (s.dtype == DType::E4M3 || s.dtype == DType::I8) {
      const std::string base = s.name.substr(0, s.name.size() - std::string(".weight").size());
      const WeightSpec* sc = by_name.count(base + ".scale") ? by_name[base + ".scale"] : by_name[base + ".weight_scale_inv"];
      DSA_CHECK(sc, "make-tiny: no scale tensor for {}", s.name);
      u.push_back(sc);
      in_unit.insert(sc->name);
    } else {
      DSA_CHECK(s.dtype != DType::E8M0, "make-tiny: scale {} without its weight", s.name);
    }
    units.push_back(std::move(u));
  }
  // BF16 checkpoints are the twins of the FP8 ones: every BF16 weight that is FP8 in the FP8
  // layout takes that FP8 weight's dequantized values (name -> its scale dtype). The FP8 layout
  // lists the same tensors in the same order plus scales (generated with their weights, drawing
  // nothing), so both draw the same random stream and describe the same model.
  if (!opt.fp8) {
    std::map<std::string, const WeightSpec*> fp8_by_name;
    for (const auto& s : fp8_specs) fp8_by_name[s.name] = &s;
    for (const auto& s : specs) {
      auto it = fp8_by_name.find(s.name);
      if (s.dtype != DType::BF16 || it == fp8_by_name.end() || it->second->dtype != DType::E4M3) continue;
      const std::string base = s.name.substr(0, s.name.size() - std::string(".weight").size());
      const WeightSpec* sc = fp8_by_name.count(base + ".scale") ? fp8_by_name[base + ".scale"]
                                                                 : fp8_by_name[base + ".weight_scale_inv"];
      DSA_CHECK(sc && s.shape.size() == 2 && it->second->shape == s.shape, "make-tiny: no FP8 twin layout for {}", s.name);
      fp8_twin[s.name] = sc->dtype;
    }
  }
  std::vector<uint64_t> sizes;
  for (const auto& u : units) {
    uint64_t b = 0;
    for (const auto* s : u) {
      uint64_t n = dtype_size(s->dtype);
      for (int64_t d : s->shape) n *= static_cast<uint64_t>(d);
      b += n;
    }
    sizes.push_back(b);
    out.bytes += b;
  }
  const std::vector<size_t> shard = plan_shards(sizes, opt.max_shard_bytes);
  const size_t n_shards = shard.empty() ? 1 : shard.back() + 1;

  std::filesystem::create_directories(dir);
  Gen g{std::mt19937_64(opt.seed)};
  Fast fast{opt.seed * 0x9E3779B97F4A7C15ull + 1};
  std::vector<std::pair<std::string, std::string>> weight_map;
  size_t u = 0;
  for (size_t k = 0; k < n_shards; ++k) {
    std::vector<std::pair<std::string, Tensor>> part;  // generated per shard: bounded memory
    for (; u < units.size() && shard[u] == k; ++u) {
      const WeightSpec& s = *units[u][0];
      Tensor t = Tensor::empty(s.shape, s.dtype);
      if (units[u].size() == 2) {
        const WeightSpec& sc = *units[u][1];
        Tensor scale = Tensor::empty(sc.shape, sc.dtype);
        if (opt.fast_fill) {
          fast_fill(fast, s, t, n_experts, g);
          fast_fill(fast, sc, scale, n_experts, g);
          if (sc.dtype == DType::F32)
            for (int64_t i = 0; i < scale.numel(); ++i) scale.data<float>()[i] = 1.f / 256;
        } else if (s.dtype == DType::E4M3) {
          quantize_fp8(random_matrix(g, s.shape[0], s.shape[1]), s.shape[0], s.shape[1], t, scale, opt.pow2_scales);
        } else {
          quantize_mxfp4(random_matrix(g, s.shape[0], s.shape[1] * 2), s.shape[0], s.shape[1] * 2, t, scale);
        }
        part.emplace_back(s.name, t);
        part.emplace_back(sc.name, scale);
      } else {
        auto twin = fp8_twin.find(s.name);
        if (opt.fast_fill)
          fast_fill(fast, s, t, n_experts, g);
        else if (twin != fp8_twin.end())  // draws the same numbers as the FP8 unit would
          bf16_twin_of_fp8(random_matrix(g, s.shape[0], s.shape[1]), s, twin->second, opt.pow2_scales, t);
        else
          fill_other(g, s, t, n_experts, round_to.count(s.name) ? round_to[s.name] : DType::F32);
        part.emplace_back(s.name, t);
      }
    }
    const std::string fname = shard_file_name(k, n_shards);
    for (const auto& [name, _] : part) weight_map.emplace_back(name, fname);
    write_safetensors((std::filesystem::path(dir) / fname).string(), part, {{"format", "pt"}});
    if (opt.verbose) std::fprintf(stderr, "make-tiny: wrote %s (%zu/%zu)\n", fname.c_str(), k + 1, n_shards);
  }
  write_checkpoint_index(dir, weight_map, out.bytes);
  std::ofstream cf(std::filesystem::path(dir) / "config.json");
  DSA_CHECK(cf, "{}/config.json: cannot create", dir);
  cf << out.config.dump(2) << "\n";
  DSA_CHECK(cf.good(), "{}/config.json: write failed", dir);
  out.tensors = specs.size();
  out.shards = n_shards;
  return out;
}

}  // namespace dsa
