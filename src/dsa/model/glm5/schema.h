// GLM-5 / GLM-5.1 (`glm_moe_dsa`) checkpoint layout: Hugging Face names (docs/model-reference.md §3),
// bf16 or FP8 (F8_E4M3 weights with F32 `weight_scale_inv` [ceil(out/128)][ceil(in/128)], as in
// zai-org's FP8 checkpoints). The MTP layer is `model.layers.{num_hidden_layers}` (a full layer
// plus enorm, hnorm, eh_proj, shared_head.norm; embedding and LM head are shared).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/model/schema/weight_spec.h"

namespace dsa::schema {

// The config numbers the tensor shapes depend on, from a parsed model::ModelConfig (from_model_config.h).
struct Glm5Dims {
  int64_t vocab = 0;           // vocab_size
  int64_t hidden = 0;          // hidden_size
  int64_t layers = 0;          // num_hidden_layers
  int64_t heads = 0;           // num_attention_heads
  int64_t q_lora = 0;          // q_lora_rank
  int64_t kv_lora = 0;         // kv_lora_rank
  int64_t qk_nope = 0;         // qk_nope_head_dim
  int64_t qk_rope = 0;         // qk_rope_head_dim
  int64_t v_head = 0;          // v_head_dim
  int64_t index_heads = 0;     // index_n_heads
  int64_t index_head_dim = 0;  // index_head_dim
  int64_t experts = 0;         // n_routed_experts
  int64_t shared_experts = 1;  // n_shared_experts
  int64_t moe_inter = 0;       // moe_intermediate_size
  int64_t dense_inter = 0;     // intermediate_size
  int64_t first_dense = 0;     // first_k_dense_replace
  int64_t mtp_layers = 0;      // num_nextn_predict_layers
  std::vector<bool> indexer_full;  // per main layer: true = own indexer weights ("full"), false = "shared"
  bool fp8 = false;            // quantization_config fp8

  void validate() const;
};

std::vector<WeightSpec> glm5_weight_specs(const Glm5Dims& d);

}  // namespace dsa::schema
