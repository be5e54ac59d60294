#include "dsa/model/deepseek_v4/schema.h"

#include <regex>
#include <utility>

#include <fmt/format.h>
#include "dsa/core/error.h"

namespace dsa::schema {

void DeepseekV4Dims::validate() const {
  auto pos = [](const char* f, int64_t v) { DSA_CHECK(v > 0, "DeepSeek-V4 config: {} must be > 0, got {}", f, v); };
  pos("vocab_size", vocab);
  pos("hidden_size", hidden);
  pos("num_hidden_layers", layers);
  pos("num_attention_heads", heads);
  pos("head_dim", head_dim);
  pos("q_lora_rank", q_lora);
  pos("o_groups", o_groups);
  pos("o_lora_rank", o_lora);
  pos("n_routed_experts", experts);
  pos("num_experts_per_tok", experts_per_tok);
  pos("moe_intermediate_size", moe_inter);
  pos("hc_mult", hc_mult);
  DSA_CHECK(rope_dim > 0 && rope_dim <= head_dim, "DeepSeek-V4 config: qk_rope_head_dim {} must be in (0, head_dim {}]",
            rope_dim, head_dim);
  DSA_CHECK((heads * head_dim) % o_groups == 0, "DeepSeek-V4 config: o_groups {} does not divide heads*head_dim {}",
            o_groups, heads * head_dim);
  DSA_CHECK(shared_experts >= 0 && hash_layers >= 0 && mtp_layers >= 0,
            "DeepSeek-V4 config: negative n_shared_experts / num_hash_layers / num_nextn_predict_layers");
  DSA_CHECK(static_cast<int64_t>(compress_ratios.size()) >= layers + mtp_layers,
            "DeepSeek-V4 config: compress_ratios has {} entries, needs num_hidden_layers + num_nextn_predict_layers = {}",
            compress_ratios.size(), layers + mtp_layers);
  bool csa = false;
  for (size_t i = 0; i < compress_ratios.size(); ++i) {
    int r = compress_ratios[i];
    DSA_CHECK(r == 0 || r == 4 || r == 128, "DeepSeek-V4 config: compress_ratios[{}] = {} (expected 0, 4 or 128)", i, r);
    csa |= r == 4;
  }
  if (csa) {
    pos("index_n_heads", index_heads);
    pos("index_head_dim", index_head_dim);
  }
  if (fp4_experts) {
    DSA_CHECK(hidden % kMxfp4Block == 0 && moe_inter % kMxfp4Block == 0,
              "DeepSeek-V4 config: MXFP4 experts need hidden_size ({}) and moe_intermediate_size ({}) to be multiples "
              "of {}",
              hidden, moe_inter, kMxfp4Block);
  }
}

std::vector<WeightSpec> deepseek_v4_weight_specs(const DeepseekV4Dims& d) {
  d.validate();
  std::vector<WeightSpec> s;
  const LinearKind fp8 = d.fp8 ? LinearKind::Fp8Ue8m0 : LinearKind::Bf16;
  const LinearKind expert = d.fp4_experts ? LinearKind::Mxfp4 : fp8;
  const int64_t H = d.hidden, hc = d.hc_mult, mix = (2 + hc) * hc;
  // Every linear may be stored quantized (e4m3 + UE8M0 .scale) or not, whatever the config says:
  // the scale tensor present decides; routed experts MXFP4 too. wo_a and weights_proj are read in
  // bf16 only (dequantized at load when stored FP8, as transformers' FP8 quantizer writes wo_a).
  const std::vector<LinearKind> forms = {LinearKind::Fp8Ue8m0, LinearKind::Bf16};
  const std::vector<LinearKind> expert_forms = {LinearKind::Mxfp4, LinearKind::Fp8Ue8m0, LinearKind::Bf16};
  auto linear = [&](const std::string& base, int64_t out, int64_t in, LinearKind kind,
                    LinearUse use = LinearUse::Any) { add_linear(s, base, out, in, kind, forms, use); };
  // Norm weights: BF16 in the official checkpoint; F32 read as well (the reference keeps them in
  // fp32), F16 widened. fp32 parameters: BF16 / F16 widened (transformers may save them so).
  auto norm = [&](const std::string& name, int64_t n) {
    s.push_back({name, {n}, DType::BF16, {DType::F32}, /*any_float=*/true});
  };
  auto f32 = [&](const std::string& name, Shape shape) {
    s.push_back({name, std::move(shape), DType::F32, {}, /*any_float=*/true});
  };

  auto block = [&](const std::string& p, int64_t layer_id, int ratio) {
    norm(p + "attn_norm.weight", H);
    norm(p + "ffn_norm.weight", H);
    for (const char* sub : {"attn", "ffn"}) {
      f32(fmt::format("{}hc_{}_fn", p, sub), {mix, hc * H});
      f32(fmt::format("{}hc_{}_base", p, sub), {mix});
      f32(fmt::format("{}hc_{}_scale", p, sub), {3});
    }
    const std::string a = p + "attn.";
    f32(a + "attn_sink", {d.heads});
    linear(a + "wq_a", d.q_lora, H, fp8);
    norm(a + "q_norm.weight", d.q_lora);
    linear(a + "wq_b", d.heads * d.head_dim, d.q_lora, fp8);
    linear(a + "wkv", d.head_dim, H, fp8);
    norm(a + "kv_norm.weight", d.head_dim);
    // Grouped output projection: wo_a is BF16 in the official checkpoint (FP8 where transformers
    // quantized it).
    linear(a + "wo_a", d.o_groups * d.o_lora, d.heads * d.head_dim / d.o_groups, LinearKind::Bf16, LinearUse::Bf16);
    linear(a + "wo_b", H, d.o_groups * d.o_lora, fp8);
    auto compressor = [&](const std::string& c, int64_t head_dim, int r) {
      const int64_t coff = r == 4 ? 2 : 1;  // CSA overlaps two windows
      f32(c + "ape", {r, coff * head_dim});
      // Compressor projections ship BF16 (F32 accepted: the reference declares them fp32).
      s.push_back({c + "wkv.weight", {coff * head_dim, H}, DType::BF16, {DType::F32}});
      s.push_back({c + "wgate.weight", {coff * head_dim, H}, DType::BF16, {DType::F32}});
      norm(c + "norm.weight", head_dim);
    };
    if (ratio != 0) compressor(a + "compressor.", d.head_dim, ratio);
    if (ratio == 4) {
      linear(a + "indexer.wq_b", d.index_heads * d.index_head_dim, d.q_lora, fp8);
      linear(a + "indexer.weights_proj", d.index_heads, H, LinearKind::Bf16, LinearUse::Bf16);
      compressor(a + "indexer.compressor.", d.index_head_dim, ratio);
    }
    const std::string f = p + "ffn.";
    s.push_back({f + "gate.weight", {d.experts, H}, DType::BF16, {DType::F32}});
    if (layer_id < d.hash_layers)
      s.push_back({f + "gate.tid2eid", {d.vocab, d.experts_per_tok}, DType::I32, {DType::I64}});
    else
      f32(f + "gate.bias", {d.experts});
    for (int64_t e = 0; e < d.experts; ++e) {
      const std::string x = fmt::format("{}experts.{}.", f, e);
      add_linear(s, x + "w1", d.moe_inter, H, expert, expert_forms);
      add_linear(s, x + "w2", H, d.moe_inter, expert, expert_forms);
      add_linear(s, x + "w3", d.moe_inter, H, expert, expert_forms);
    }
    if (d.shared_experts > 0) {
      const int64_t I = d.moe_inter * d.shared_experts;
      linear(f + "shared_experts.w1", I, H, fp8);
      linear(f + "shared_experts.w2", H, I, fp8);
      linear(f + "shared_experts.w3", I, H, fp8);
    }
  };

  s.push_back({"embed.weight", {d.vocab, H}, DType::BF16, {DType::F32}});
  s.push_back({"head.weight", {d.vocab, H}, DType::BF16, {DType::F32}});
  norm("norm.weight", H);
  f32("hc_head_fn", {hc, hc * H});
  f32("hc_head_base", {hc});
  f32("hc_head_scale", {1});
  for (int64_t l = 0; l < d.layers; ++l) block(fmt::format("layers.{}.", l), l, d.compress_ratios[l]);
  for (int64_t m = 0; m < d.mtp_layers; ++m) {
    const std::string p = fmt::format("mtp.{}.", m);
    block(p, d.layers + m, d.compress_ratios[d.layers + m]);
    linear(p + "e_proj", H, H, fp8);
    linear(p + "h_proj", H, H, fp8);
    norm(p + "enorm.weight", H);
    norm(p + "hnorm.weight", H);
    norm(p + "norm.weight", H);
    f32(p + "hc_head_fn", {hc, hc * H});
    f32(p + "hc_head_base", {hc});
    f32(p + "hc_head_scale", {1});
  }
  return s;
}

// --- official <-> transformers names ------------------------------------------------------
// transformers 5.17 `conversion_mapping.py` ("deepseek_v4") renames official keys with an
// ordered list of regex substitutions; its FP8 quantizer renames `.scale` to `.weight_scale_inv`.
// The tables below apply the same substitutions (forward) and their inverses (reverse).

namespace {
struct Rule {
  std::regex from;
  std::string to;
};

const std::vector<Rule>& forward_rules() {
  static const std::vector<Rule> r = [] {
    std::vector<std::pair<const char*, const char*>> t = {
        // The FP8 quantizer's rename runs first, on the checkpoint key itself.
        {R"(^(.+)\.scale$)", "$1.weight_scale_inv"},
        {R"(\.attn\.)", ".self_attn."},
        {R"(\.ffn\.)", ".mlp."},
        {R"(\.indexer\.compressor\.)", ".compressor.indexer."},
        {R"(^embed\.weight$)", "embed_tokens.weight"},
        {R"(^hc_head_fn$)", "hc_head.hc_fn"},
        {R"(^hc_head_base$)", "hc_head.hc_base"},
        {R"(^hc_head_scale$)", "hc_head.hc_scale"},
        {R"(\.attn_norm\.)", ".input_layernorm."},
        {R"(\.ffn_norm\.)", ".post_attention_layernorm."},
        {R"(\.hc_attn_fn$)", ".attn_hc.fn"},
        {R"(\.hc_attn_base$)", ".attn_hc.base"},
        {R"(\.hc_attn_scale$)", ".attn_hc.scale"},
        {R"(\.hc_ffn_fn$)", ".ffn_hc.fn"},
        {R"(\.hc_ffn_base$)", ".ffn_hc.base"},
        {R"(\.hc_ffn_scale$)", ".ffn_hc.scale"},
        {R"(\.attn_sink$)", ".sinks"},
        {R"(\.indexer\.weights_proj\.)", ".compressor.indexer.scorer.weights_proj."},
        {R"(\.indexer\.wq_b\.)", ".compressor.indexer.q_b_proj."},
        {R"(\.norm\.)", ".kv_norm."},
        {R"(\.ape$)", ".position_bias"},
        {R"(\.wq_a\.)", ".q_a_proj."},
        {R"(\.self_attn\.wq_b\.)", ".self_attn.q_b_proj."},
        {R"(\.wkv\.)", ".kv_proj."},
        {R"(\.wgate\.)", ".gate_proj."},
        {R"(\.wo_a\.)", ".o_a_proj."},
        {R"(\.wo_b\.)", ".o_b_proj."},
        {R"(\.q_norm\.)", ".q_a_norm."},
        {R"(\.gate\.bias$)", ".gate.e_score_correction_bias"},
        {R"(\.shared_experts\.w1\.)", ".shared_experts.gate_proj."},
        {R"(\.shared_experts\.w2\.)", ".shared_experts.down_proj."},
        {R"(\.shared_experts\.w3\.)", ".shared_experts.up_proj."},
    };
    std::vector<Rule> v;
    for (auto& [a, b] : t) v.push_back({std::regex(a), b});
    return v;
  }();
  return r;
}

// Inverse substitutions, applied in order to a transformers name without its "model." prefix.
const std::vector<Rule>& reverse_rules() {
  static const std::vector<Rule> r = [] {
    std::vector<std::pair<const char*, const char*>> t = {
        {R"(\.weight_scale_inv$)", ".scale"},
        {R"(\.shared_experts\.gate_proj\.)", ".shared_experts.w1."},
        {R"(\.shared_experts\.down_proj\.)", ".shared_experts.w2."},
        {R"(\.shared_experts\.up_proj\.)", ".shared_experts.w3."},
        {R"(\.gate\.e_score_correction_bias$)", ".gate.bias"},
        {R"(\.q_a_norm\.)", ".q_norm."},
        {R"(\.o_b_proj\.)", ".wo_b."},
        {R"(\.o_a_proj\.)", ".wo_a."},
        {R"(\.gate_proj\.)", ".wgate."},  // only compressors have gate_proj left at this point
        {R"(\.kv_proj\.)", ".wkv."},
        {R"(\.self_attn\.q_b_proj\.)", ".self_attn.wq_b."},
        {R"(\.q_a_proj\.)", ".wq_a."},
        {R"(\.position_bias$)", ".ape"},
        {R"(\.compressor\.(indexer\.)?kv_norm\.)", ".compressor.$1norm."},
        {R"(\.compressor\.indexer\.q_b_proj\.)", ".indexer.wq_b."},
        {R"(\.compressor\.indexer\.scorer\.weights_proj\.)", ".indexer.weights_proj."},
        {R"(\.sinks$)", ".attn_sink"},
        {R"(\.ffn_hc\.(fn|base|scale)$)", ".hc_ffn_$1"},
        {R"(\.attn_hc\.(fn|base|scale)$)", ".hc_attn_$1"},
        {R"(\.post_attention_layernorm\.)", ".ffn_norm."},
        {R"(\.input_layernorm\.)", ".attn_norm."},
        {R"(^hc_head\.hc_(fn|base|scale)$)", "hc_head_$1"},
        {R"(^embed_tokens\.weight$)", "embed.weight"},
        {R"(\.compressor\.indexer\.)", ".indexer.compressor."},
        {R"(\.mlp\.)", ".ffn."},
        {R"(\.self_attn\.)", ".attn."},
    };
    std::vector<Rule> v;
    for (auto& [a, b] : t) v.push_back({std::regex(a), b});
    return v;
  }();
  return r;
}

std::string apply(const std::vector<Rule>& rules, std::string s) {
  for (const auto& r : rules) s = std::regex_replace(s, r.from, r.to);
  return s;
}

bool is_fused_expert(const std::string& n) {
  static const std::regex re(R"(\.mlp\.experts\.(gate_up_proj|down_proj)(_scale_inv)?$)");
  return std::regex_search(n, re);
}
bool is_official_routed_expert(const std::string& n) {
  static const std::regex re(R"(\.ffn\.experts\.\d+\.)");
  return std::regex_search(n, re);
}
}  // namespace

std::optional<std::string> deepseek_v4_official_name(const std::string& hf_name) {
  if (hf_name == "lm_head.weight") return std::string("head.weight");
  if (hf_name.rfind("model.", 0) != 0) return std::nullopt;
  std::string n = hf_name.substr(6);
  if (is_fused_expert("." + n)) return std::nullopt;
  if (n.rfind("rotary_emb", 0) == 0 || n.find(".rotary_emb.") != std::string::npos) return std::nullopt;
  return apply(reverse_rules(), n);
}

std::optional<std::string> deepseek_v4_hf_name(const std::string& official_name) {
  if (official_name == "head.weight") return std::string("lm_head.weight");
  if (official_name.rfind("mtp.", 0) == 0) return std::nullopt;  // transformers does not load MTP
  if (is_official_routed_expert(official_name)) return std::nullopt;
  return "model." + apply(forward_rules(), official_name);
}

}  // namespace dsa::schema
