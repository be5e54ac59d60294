#include "dsa/model/weights/deepseek_v4.h"

#include <regex>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/model/weights/json_fields.h"

namespace dsa::weights {

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

DeepseekV4Dims deepseek_v4_dims_from_config(const nlohmann::json& c) {
  DSA_CHECK(c.is_object(), "config.json: expected a JSON object");
  DeepseekV4Dims d;
  d.vocab = get_i(c, "vocab_size", 0, true);
  d.hidden = get_i(c, "hidden_size", 0, true);
  d.layers = get_i(c, "num_hidden_layers", 0, true);
  d.heads = get_i(c, "num_attention_heads", 0, true);
  d.head_dim = get_i(c, "head_dim", 512, false);
  d.rope_dim = get_i(c, "qk_rope_head_dim", 64, false);
  if (!c.contains("qk_rope_head_dim") && c.contains("partial_rotary_factor") && c["partial_rotary_factor"].is_number())
    d.rope_dim = static_cast<int64_t>(c["partial_rotary_factor"].get<double>() * static_cast<double>(d.head_dim));
  d.q_lora = get_i(c, "q_lora_rank", 0, true);
  d.o_groups = get_i(c, "o_groups", 0, true);
  d.o_lora = get_i(c, "o_lora_rank", 0, true);
  d.index_heads = get_i(c, "index_n_heads", 0, false);
  d.index_head_dim = get_i(c, "index_head_dim", 0, false);
  d.experts = get_i(c, "n_routed_experts", 0, true);
  d.experts_per_tok = get_i(c, "num_experts_per_tok", 0, true);
  d.shared_experts = get_i(c, "n_shared_experts", 1, false);
  d.moe_inter = get_i(c, "moe_intermediate_size", 0, true);
  d.hc_mult = get_i(c, "hc_mult", 4, false);
  d.mtp_layers = get_i(c, "num_nextn_predict_layers", 0, false);

  // Hash layers: official num_hash_layers, or transformers' mlp_layer_types.
  if (c.contains("num_hash_layers")) {
    d.hash_layers = get_i(c, "num_hash_layers", 0, false);
  } else if (c.contains("mlp_layer_types") && c["mlp_layer_types"].is_array()) {
    d.hash_layers = 0;
    for (const auto& t : c["mlp_layer_types"])
      if (t == "hash_moe") ++d.hash_layers;
  } else {
    d.hash_layers = 3;  // transformers' default
  }

  // Attention schedule: official compress_ratios (main + MTP), or transformers' layer_types.
  if (c.contains("compress_ratios")) {
    DSA_CHECK(c["compress_ratios"].is_array(), "config.json: field 'compress_ratios' must be an array");
    for (const auto& r : c["compress_ratios"]) {
      DSA_CHECK(r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() <= 1 << 20,
                "config.json: compress_ratios entry {} is not a ratio (0, 4 or 128)", r.dump());
      d.compress_ratios.push_back(static_cast<int>(r.get<int64_t>()));
    }
  } else if (c.contains("layer_types") && c["layer_types"].is_array()) {
    for (const auto& t : c["layer_types"]) {
      DSA_CHECK(t.is_string(), "config.json: layer_types entry {} is not a string", t.dump());
      const std::string s = t.get<std::string>();
      if (s == "sliding_attention") d.compress_ratios.push_back(0);
      else if (s == "compressed_sparse_attention") d.compress_ratios.push_back(4);
      else if (s == "heavily_compressed_attention") d.compress_ratios.push_back(128);
      else fail("config.json: layer_types entry '{}' is not a DeepSeek-V4 layer type", s);
    }
  } else {
    fail("config.json: neither 'compress_ratios' nor 'layer_types' is present");
  }
  // MTP layers are sliding-only when the list stops at the main layers.
  while (static_cast<int64_t>(d.compress_ratios.size()) < d.layers + d.mtp_layers) d.compress_ratios.push_back(0);

  d.fp8 = false;
  if (c.contains("quantization_config") && c["quantization_config"].is_object()) {
    const auto& q = c["quantization_config"];
    d.fp8 = get_s(q, "quant_method") == "fp8";
  }
  std::string expert_dtype = get_s(c, "expert_dtype");
  if (expert_dtype.empty() && c.contains("quantization_config") && c["quantization_config"].is_object())
    expert_dtype = get_s(c["quantization_config"], "expert_dtype");
  d.fp4_experts = expert_dtype == "fp4";
  d.validate();
  return d;
}

std::vector<WeightSpec> deepseek_v4_weight_specs(const DeepseekV4Dims& d) {
  d.validate();
  std::vector<WeightSpec> s;
  const LinearKind fp8 = d.fp8 ? LinearKind::Fp8Ue8m0 : LinearKind::Bf16;
  const LinearKind expert = d.fp4_experts ? LinearKind::Mxfp4 : fp8;
  const int64_t H = d.hidden, hc = d.hc_mult, mix = (2 + hc) * hc;
  // Norm weights: BF16 in the official checkpoint; F32 accepted (the reference keeps them in fp32).
  auto norm = [&](const std::string& name, int64_t n) { s.push_back({name, {n}, DType::BF16, {DType::F32}}); };
  auto f32 = [&](const std::string& name, Shape shape) { s.push_back({name, std::move(shape), DType::F32}); };

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
    add_linear(s, a + "wq_a", d.q_lora, H, fp8);
    norm(a + "q_norm.weight", d.q_lora);
    add_linear(s, a + "wq_b", d.heads * d.head_dim, d.q_lora, fp8);
    add_linear(s, a + "wkv", d.head_dim, H, fp8);
    norm(a + "kv_norm.weight", d.head_dim);
    // Grouped output projection: wo_a is BF16 in the official checkpoint.
    add_linear(s, a + "wo_a", d.o_groups * d.o_lora, d.heads * d.head_dim / d.o_groups, LinearKind::Bf16);
    add_linear(s, a + "wo_b", H, d.o_groups * d.o_lora, fp8);
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
      add_linear(s, a + "indexer.wq_b", d.index_heads * d.index_head_dim, d.q_lora, fp8);
      add_linear(s, a + "indexer.weights_proj", d.index_heads, H, LinearKind::Bf16);
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
      add_linear(s, x + "w1", d.moe_inter, H, expert);
      add_linear(s, x + "w2", H, d.moe_inter, expert);
      add_linear(s, x + "w3", d.moe_inter, H, expert);
    }
    if (d.shared_experts > 0) {
      const int64_t I = d.moe_inter * d.shared_experts;
      add_linear(s, f + "shared_experts.w1", I, H, fp8);
      add_linear(s, f + "shared_experts.w2", H, I, fp8);
      add_linear(s, f + "shared_experts.w3", I, H, fp8);
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
    add_linear(s, p + "e_proj", H, H, fp8);
    add_linear(s, p + "h_proj", H, H, fp8);
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

}  // namespace dsa::weights
