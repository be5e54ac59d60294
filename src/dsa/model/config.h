// ModelConfig: the architecture of a DeepSeek-V4 (`deepseek_v4`) or GLM-5/5.1 (`glm_moe_dsa`)
// model (docs/model-reference.md §1). Built-in configurations (`deepseek-v4-flash`,
// `deepseek-v4-pro`, `glm-5.1`) live in builtin_configs.cpp; a checkpoint's config.json is parsed
// by config_json.cpp, which accepts the official DeepSeek names, the DeepSeek inference
// `ModelArgs` names and transformers 5.17's names.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/attention/layer_spec.h"

namespace dsa::model {

enum class Arch { DeepseekV4, GlmMoeDsa };
std::string_view arch_name(Arch a);  // "deepseek_v4" / "glm_moe_dsa" (config.json model_type)

struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default" or "yarn"
  // YaRN (type == "yarn")
  double factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // V4 forces 1.0 (no mscale)
};

struct QuantConfig {
  std::string method = "none";      // "none" (bf16 weights) or "fp8"
  std::string fmt = "e4m3";         // fp8 element format
  std::string scale_fmt = "ue8m0";  // "ue8m0" (power-of-two scales) or "float32"
  int block_n = 128;                // weight_block_size [n, k]
  int block_k = 128;
  std::string expert_dtype = "fp8"; // routed experts: "fp8", "fp4" (MXFP4) or "bf16"
};

struct ModelConfig {
  std::string name;  // built-in name, or the config.json path it came from
  Arch arch = Arch::DeepseekV4;

  int hidden_size = 0;
  int num_layers = 0;       // main layers (num_hidden_layers)
  int num_mtp_layers = 0;   // num_nextn_predict_layers
  int num_heads = 0;
  int num_kv_heads = 1;     // as the config states (GLM: 64 before absorption; attention is MQA over the latent)
  int vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Attention projections
  int head_dim = 0;          // V4: 512 (nope 448 + rope 64); GLM: qk_nope + qk_rope = 256
  int qk_nope_head_dim = 0;  // V4: 448; GLM: 192
  int qk_rope_head_dim = 64;
  int v_head_dim = 0;        // V4: 512 (K = V); GLM: 256
  int q_lora_rank = 0;
  int kv_lora_rank = 0;      // GLM: 512 latent; V4: 0 (the 512-wide KV is the head itself)
  int o_groups = 0;          // V4 grouped output projection
  int o_lora_rank = 0;
  int sliding_window = 0;    // V4: 128; GLM: 0 (none)

  // Per-layer attention schedule
  std::vector<int> compress_ratios;      // V4: one per main layer, 0 / 4 / 128
  std::vector<int> mtp_compress_ratios;  // V4: one per MTP layer (0)
  std::vector<std::string> indexer_types;  // GLM: "full" / "shared" per main layer

  // Indexer (lightning indexer)
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;

  // MoE
  int n_routed_experts = 0;
  int num_experts_per_tok = 0;
  int n_shared_experts = 0;
  int moe_intermediate_size = 0;
  int first_k_dense_replace = 0;  // GLM: leading dense layers
  int intermediate_size = 0;      // dense MLP width (GLM 12288)
  double routed_scaling_factor = 1.0;
  std::string scoring_func;       // V4: "sqrtsoftplus"; GLM: "sigmoid"
  std::string topk_method = "noaux_tc";
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = true;
  int num_hash_layers = 0;        // V4: leading hash-routed MoE layers
  double swiglu_limit = 0.0;      // V4: 10 (clamp); 0 = none

  // mHC (V4)
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 0.0;

  // RoPE: `rope` for plain layers (V4 sliding, all GLM layers), `compress_rope` for V4 CSA/HCA
  // layers, their compressors and the indexer.
  RopeConfig rope;
  RopeConfig compress_rope;
  bool rope_interleave = true;

  QuantConfig quant;

  // Throws dsa::Error naming the field and value that is inconsistent.
  void validate() const;

  // Attention layer types of this model with counts, shapes and the caches each needs.
  std::vector<attn::AttentionLayerSpec> attention_layers() const;

  // Softmax scale of the main attention: V4 head_dim^-0.5 = 512^-0.5; GLM (qk_nope+qk_rope)^-0.5.
  float softmax_scale() const;
};

// Built-ins
const std::vector<std::string>& builtin_model_names();
bool is_builtin_model(std::string_view name);
ModelConfig builtin_model_config(std::string_view name);  // throws listing the known names

// Parses config.json text; `source` names the file in errors. Throws dsa::Error naming file,
// field and value.
ModelConfig parse_model_config_json(std::string_view json_text, const std::string& source);

// A built-in name, a checkpoint directory holding config.json, or a path to a .json file.
ModelConfig load_model_config(const std::string& name_or_path);

}  // namespace dsa::model
