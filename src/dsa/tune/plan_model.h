// PlanModel: what the warm-up plan and the tunable-op factories need to know of a model (the
// attention shapes and kinds, the MoE shapes). Interim: the full model config type
// (src/dsa/model/config.h, helper `select`) is not in main yet; when it lands, a
// plan_model_from_config(const ModelConfig&) replaces the small config.json reader below.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsa::tune {

// Attention kinds a layer can have; each kind present in a model is one sparse-attention op
// instance (different key counts), so one set of buckets to tune.
enum class AttentionKind {
  SlidingOnly,  // V4 compress ratio 0: sliding window only
  Csa,          // V4 ratio 4: window + indexer top-k over compressed entries
  Hca,          // V4 ratio 128: window + all compressed entries
  Dsa,          // GLM-5.x: indexer top-k over the latent cache
};
const char* attention_kind_name(AttentionKind k);

struct PlanModel {
  std::string name;        // "deepseek-v4-flash", or the directory
  std::string model_type;  // "deepseek_v4" | "glm_moe_dsa"
  int num_heads = 0;
  int d_qk = 0;  // 512 (V4) or 576 (GLM: kv_lora 512 + rope 64)
  int d_v = 512;
  int index_topk = 0;
  int sliding_window = 0;  // 0: none
  std::vector<AttentionKind> layer_kinds;  // one per decoder layer (MTP layers not included)
  // MoE
  int hidden_size = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int experts_per_token = 0;

  std::vector<AttentionKind> distinct_kinds() const;  // in first-seen order
  void validate() const;  // throws dsa::Error naming the bad field
};

// Built-in models by name: deepseek-v4-flash, deepseek-v4-pro, glm-5.1 (alias glm-5).
std::vector<std::string> plan_model_names();
// `name_or_dir`: a built-in name, or a directory with a Hugging Face config.json.
PlanModel load_plan_model(const std::string& name_or_dir);

}  // namespace dsa::tune
