#include "dsa/model/glm5/schema.h"

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::schema {

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

std::vector<WeightSpec> glm5_weight_specs(const Glm5Dims& d) {
  d.validate();
  std::vector<WeightSpec> s;
  const LinearKind q = d.fp8 ? LinearKind::Fp8F32Inv : LinearKind::Bf16;
  const int64_t H = d.hidden;
  // Every linear may be stored FP8 (e4m3 + f32 weight_scale_inv) or BF16, whatever the config
  // says: the scale tensor present decides. weights_proj is read in bf16 only (dequantized at
  // load where transformers' FP8 quantizer stored it quantized).
  auto add_linear = [&](std::vector<WeightSpec>& v, const std::string& base, int64_t out, int64_t in, LinearKind k,
                        LinearUse use = LinearUse::Any) {
    schema::add_linear(v, base, out, in, k, {LinearKind::Fp8F32Inv, LinearKind::Bf16}, use);
  };
  // Norms and biases: BF16 as shipped, F32 read as well, F16 widened (any_float).
  auto norm = [&](const std::string& name, int64_t n) {
    s.push_back({name, {n}, DType::BF16, {DType::F32}, /*any_float=*/true});
  };

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
      add_linear(s, a + "indexer.weights_proj", d.index_heads, H, LinearKind::Bf16, LinearUse::Bf16);
      s.back().also = {DType::F32};  // rounded to bf16 by the model
    }
    const std::string m = p + "mlp.";
    if (dense) {
      add_linear(s, m + "gate_proj", d.dense_inter, H, q);
      add_linear(s, m + "up_proj", d.dense_inter, H, q);
      add_linear(s, m + "down_proj", H, d.dense_inter, q);
      return;
    }
    s.push_back({m + "gate.weight", {d.experts, H}, DType::BF16, {DType::F32}});
    // F32 in the release; save_pretrained of a bf16 model writes it in bf16 (widened at load).
    s.push_back({m + "gate.e_score_correction_bias", {d.experts}, DType::F32, {}, /*any_float=*/true});
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

}  // namespace dsa::schema
