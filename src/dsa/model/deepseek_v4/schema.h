// DeepSeek-V4 checkpoint layout: the tensors of the official checkpoint (docs/model-reference.md §2,
// "Tensor names"), the config numbers they depend on, and the renames between the official
// names and transformers 5.17's (its conversion mapping for `deepseek_v4`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsa/model/schema/weight_spec.h"

namespace dsa::schema {

// The config numbers the tensor shapes depend on (official config.json names in comments), taken
// from a parsed model::ModelConfig (from_model_config.h: config.json has one reader).
struct DeepseekV4Dims {
  int64_t vocab = 0;            // vocab_size
  int64_t hidden = 0;           // hidden_size
  int64_t layers = 0;           // num_hidden_layers
  int64_t heads = 0;            // num_attention_heads
  int64_t head_dim = 512;       // head_dim
  int64_t rope_dim = 64;        // qk_rope_head_dim
  int64_t q_lora = 0;           // q_lora_rank
  int64_t o_groups = 0;         // o_groups
  int64_t o_lora = 0;           // o_lora_rank
  int64_t index_heads = 0;      // index_n_heads
  int64_t index_head_dim = 0;   // index_head_dim
  int64_t experts = 0;          // n_routed_experts
  int64_t experts_per_tok = 0;  // num_experts_per_tok (tid2eid width)
  int64_t shared_experts = 1;   // n_shared_experts
  int64_t moe_inter = 0;        // moe_intermediate_size
  int64_t hc_mult = 4;          // hc_mult
  int64_t hash_layers = 0;      // num_hash_layers
  int64_t mtp_layers = 0;       // num_nextn_predict_layers
  std::vector<int> compress_ratios;  // one per main layer, then one per MTP layer (0 / 4 / 128)
  bool fp8 = true;              // quantization_config fp8 (else every FP8 weight is BF16)
  bool fp4_experts = true;      // expert_dtype "fp4" (else experts follow `fp8`)

  void validate() const;        // throws naming the field and value
};

// Every tensor of the official checkpoint, main layers then MTP layers.
std::vector<WeightSpec> deepseek_v4_weight_specs(const DeepseekV4Dims& d);

// Official name of a transformers 5.17 DeepSeek-V4 tensor name ("model.layers.0.self_attn.q_a_proj.weight"
// -> "layers.0.attn.wq_a.weight"), or nullopt when the name has no one-to-one official
// counterpart (the fused expert tensors `mlp.experts.gate_up_proj` / `down_proj`, which hold
// all experts' w1|w3 and w2 in one [E][2I][H] / [E][H][I] tensor: split them by expert).
std::optional<std::string> deepseek_v4_official_name(const std::string& hf_name);
// The reverse: transformers name of an official name (experts excluded, as above).
std::optional<std::string> deepseek_v4_hf_name(const std::string& official_name);

}  // namespace dsa::schema
