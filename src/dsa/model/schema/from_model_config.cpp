#include "dsa/model/schema/from_model_config.h"

#include "dsa/core/error.h"

namespace dsa::schema {

DeepseekV4Dims deepseek_v4_dims(const model::ModelConfig& c) {
  DSA_CHECK(c.arch == model::Arch::DeepseekV4, "{}: not a DeepSeek-V4 config (arch {})", c.name, model::arch_name(c.arch));
  DeepseekV4Dims d;
  d.vocab = c.vocab_size;
  d.hidden = c.hidden_size;
  d.layers = c.num_layers;
  d.heads = c.num_heads;
  d.head_dim = c.head_dim;
  d.rope_dim = c.qk_rope_head_dim;
  d.q_lora = c.q_lora_rank;
  d.o_groups = c.o_groups;
  d.o_lora = c.o_lora_rank;
  d.index_heads = c.index_n_heads;
  d.index_head_dim = c.index_head_dim;
  d.experts = c.n_routed_experts;
  d.experts_per_tok = c.num_experts_per_tok;
  d.shared_experts = c.n_shared_experts;
  d.moe_inter = c.moe_intermediate_size;
  d.hc_mult = c.hc_mult;
  d.hash_layers = c.num_hash_layers;
  d.mtp_layers = c.num_mtp_layers;
  d.compress_ratios = c.compress_ratios;
  for (int64_t m = 0; m < d.mtp_layers; ++m)
    d.compress_ratios.push_back(m < static_cast<int64_t>(c.mtp_compress_ratios.size()) ? c.mtp_compress_ratios[m] : 0);
  d.fp8 = c.quant.method == "fp8";
  d.fp4_experts = c.quant.expert_dtype == "fp4";
  d.validate();
  return d;
}

Glm5Dims glm5_dims(const model::ModelConfig& c) {
  DSA_CHECK(c.arch == model::Arch::GlmMoeDsa, "{}: not a GLM-5 config (arch {})", c.name, model::arch_name(c.arch));
  Glm5Dims d;
  d.vocab = c.vocab_size;
  d.hidden = c.hidden_size;
  d.layers = c.num_layers;
  d.heads = c.num_heads;
  d.q_lora = c.q_lora_rank;
  d.kv_lora = c.kv_lora_rank;
  d.qk_nope = c.qk_nope_head_dim;
  d.qk_rope = c.qk_rope_head_dim;
  d.v_head = c.v_head_dim;
  d.index_heads = c.index_n_heads;
  d.index_head_dim = c.index_head_dim;
  d.experts = c.n_routed_experts;
  d.shared_experts = c.n_shared_experts;
  d.moe_inter = c.moe_intermediate_size;
  d.dense_inter = c.intermediate_size;
  d.first_dense = c.first_k_dense_replace;
  d.mtp_layers = c.num_mtp_layers;
  if (c.indexer_types.empty()) {
    d.indexer_full.assign(static_cast<size_t>(d.layers), true);
  } else {
    for (const auto& t : c.indexer_types) d.indexer_full.push_back(t == "full");
  }
  d.fp8 = c.quant.method == "fp8";
  d.validate();
  return d;
}

std::vector<WeightSpec> weight_specs(const model::ModelConfig& c) {
  return c.arch == model::Arch::DeepseekV4 ? deepseek_v4_weight_specs(deepseek_v4_dims(c))
                                           : glm5_weight_specs(glm5_dims(c));
}

}  // namespace dsa::schema
