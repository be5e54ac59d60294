#include "dsa/model/weights/glm5.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/model/weights/json_fields.h"

namespace dsa::weights {

void Glm5Dims::validate() const {
  auto pos = [](const char* f, int64_t v) { DSA_CHECK(v > 0, "GLM-5 config: {} must be > 0, got {}", f, v); };
  pos("vocab_size", vocab);
  pos("hidden_size", hidden);
  pos("num_hidden_layers", layers);
  pos("num_attention_heads", heads);
  pos("q_lora_rank", q_lora);
  pos("kv_lora_rank", kv_lora);
  pos("qk_nope_head_dim", qk_nope);
  pos("qk_rope_head_dim", qk_rope);
  pos("v_head_dim", v_head);
  pos("index_n_heads", index_heads);
  pos("index_head_dim", index_head_dim);
  DSA_CHECK(first_dense >= 0 && first_dense <= layers, "GLM-5 config: first_k_dense_replace {} out of [0, {}]",
            first_dense, layers);
  if (first_dense > 0) pos("intermediate_size", dense_inter);
  if (first_dense < layers || mtp_layers > 0) {
    pos("n_routed_experts", experts);
    pos("moe_intermediate_size", moe_inter);
  }
  DSA_CHECK(mtp_layers >= 0 && shared_experts >= 0, "GLM-5 config: negative num_nextn_predict_layers / n_shared_experts");
  DSA_CHECK(static_cast<int64_t>(indexer_full.size()) == layers,
            "GLM-5 config: indexer_types has {} entries, num_hidden_layers is {}", indexer_full.size(), layers);
  DSA_CHECK(layers == 0 || indexer_full[0], "GLM-5 config: indexer_types[0] must be \"full\" (a shared layer reuses "
                                             "the previous full layer's top-k)");
}

Glm5Dims glm5_dims_from_config(const nlohmann::json& c) {
  DSA_CHECK(c.is_object(), "config.json: expected a JSON object");
  Glm5Dims d;
  d.vocab = get_i(c, "vocab_size", 0, true);
  d.hidden = get_i(c, "hidden_size", 0, true);
  d.layers = get_i(c, "num_hidden_layers", 0, true);
  d.heads = get_i(c, "num_attention_heads", 0, true);
  d.q_lora = get_i(c, "q_lora_rank", 0, true);
  d.kv_lora = get_i(c, "kv_lora_rank", 0, true);
  d.qk_nope = get_i(c, "qk_nope_head_dim", 0, true);
  d.qk_rope = get_i(c, "qk_rope_head_dim", 0, true);
  d.v_head = get_i(c, "v_head_dim", 0, true);
  d.index_heads = get_i(c, "index_n_heads", 32, false);
  d.index_head_dim = get_i(c, "index_head_dim", 128, false);
  d.experts = get_i(c, "n_routed_experts", 0, false);
  d.shared_experts = get_i(c, "n_shared_experts", 1, false);
  d.moe_inter = get_i(c, "moe_intermediate_size", 0, false);
  d.dense_inter = get_i(c, "intermediate_size", 0, false);
  d.first_dense = get_i(c, "first_k_dense_replace", 3, false);
  d.mtp_layers = get_i(c, "num_nextn_predict_layers", 0, false);
  if (c.contains("mlp_layer_types") && c["mlp_layer_types"].is_array() && !c.contains("first_k_dense_replace")) {
    d.first_dense = 0;
    for (const auto& t : c["mlp_layer_types"]) {
      if (t != "dense") break;
      ++d.first_dense;
    }
  }
  // indexer_types (transformers) or the index_topk_freq / index_skip_topk_offset schedule.
  if (c.contains("indexer_types") && c["indexer_types"].is_array()) {
    for (const auto& t : c["indexer_types"]) {
      DSA_CHECK(t == "full" || t == "shared", "config.json: indexer_types entry {} is neither \"full\" nor \"shared\"",
                t.dump());
      d.indexer_full.push_back(t == "full");
    }
  } else {
    const int64_t freq = std::max<int64_t>(get_i(c, "index_topk_freq", 1, false), 1);
    const int64_t offset = get_i(c, "index_skip_topk_offset", 2, false);
    for (int64_t i = 0; i < d.layers; ++i) d.indexer_full.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0);
  }
  d.fp8 = c.contains("quantization_config") && c["quantization_config"].is_object() &&
          get_s(c["quantization_config"], "quant_method") == "fp8";
  d.validate();
  return d;
}

std::vector<WeightSpec> glm5_weight_specs(const Glm5Dims& d) {
  d.validate();
  std::vector<WeightSpec> s;
  const LinearKind q = d.fp8 ? LinearKind::Fp8F32Inv : LinearKind::Bf16;
  const int64_t H = d.hidden;
  auto norm = [&](const std::string& name, int64_t n) { s.push_back({name, {n}, DType::BF16, {DType::F32}}); };

  auto layer = [&](int64_t l, bool full_indexer, bool dense) {
    const std::string p = fmt::format("model.layers.{}.", l);
    norm(p + "input_layernorm.weight", H);
    norm(p + "post_attention_layernorm.weight", H);
    const std::string a = p + "self_attn.";
    add_linear(s, a + "q_a_proj", d.q_lora, H, q);
    norm(a + "q_a_layernorm.weight", d.q_lora);
    add_linear(s, a + "q_b_proj", d.heads * (d.qk_nope + d.qk_rope), d.q_lora, q);
    add_linear(s, a + "kv_a_proj_with_mqa", d.kv_lora + d.qk_rope, H, q);
    norm(a + "kv_a_layernorm.weight", d.kv_lora);
    add_linear(s, a + "kv_b_proj", d.heads * (d.qk_nope + d.v_head), d.kv_lora, q);
    add_linear(s, a + "o_proj", H, d.heads * d.v_head, q);
    if (full_indexer) {
      add_linear(s, a + "indexer.wq_b", d.index_heads * d.index_head_dim, d.q_lora, q);
      add_linear(s, a + "indexer.wk", d.index_head_dim, H, q);
      norm(a + "indexer.k_norm.weight", d.index_head_dim);
      norm(a + "indexer.k_norm.bias", d.index_head_dim);
      s.push_back({a + "indexer.weights_proj.weight", {d.index_heads, H}, DType::BF16, {DType::F32}});
    }
    const std::string m = p + "mlp.";
    if (dense) {
      add_linear(s, m + "gate_proj", d.dense_inter, H, q);
      add_linear(s, m + "up_proj", d.dense_inter, H, q);
      add_linear(s, m + "down_proj", H, d.dense_inter, q);
      return;
    }
    s.push_back({m + "gate.weight", {d.experts, H}, DType::BF16, {DType::F32}});
    s.push_back({m + "gate.e_score_correction_bias", {d.experts}, DType::F32});
    for (int64_t e = 0; e < d.experts; ++e) {
      const std::string x = fmt::format("{}experts.{}.", m, e);
      add_linear(s, x + "gate_proj", d.moe_inter, H, q);
      add_linear(s, x + "up_proj", d.moe_inter, H, q);
      add_linear(s, x + "down_proj", H, d.moe_inter, q);
    }
    if (d.shared_experts > 0) {
      const int64_t I = d.moe_inter * d.shared_experts;
      add_linear(s, m + "shared_experts.gate_proj", I, H, q);
      add_linear(s, m + "shared_experts.up_proj", I, H, q);
      add_linear(s, m + "shared_experts.down_proj", H, I, q);
    }
  };

  s.push_back({"model.embed_tokens.weight", {d.vocab, H}, DType::BF16, {DType::F32}});
  s.push_back({"lm_head.weight", {d.vocab, H}, DType::BF16, {DType::F32}});
  norm("model.norm.weight", H);
  for (int64_t l = 0; l < d.layers; ++l) layer(l, d.indexer_full[l], l < d.first_dense);
  for (int64_t m = 0; m < d.mtp_layers; ++m) {
    const int64_t l = d.layers + m;
    layer(l, true, false);  // the MTP layer is a full MoE layer with its own indexer
    const std::string p = fmt::format("model.layers.{}.", l);
    norm(p + "enorm.weight", H);
    norm(p + "hnorm.weight", H);
    add_linear(s, p + "eh_proj", H, 2 * H, LinearKind::Bf16);  // BF16 even in FP8 checkpoints
    norm(p + "shared_head.norm.weight", H);
  }
  return s;
}

}  // namespace dsa::weights
