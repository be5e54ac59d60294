// PlanModel: what the warm-up plan and the tunable-op factories need to know of a model: its
// attention layer types (one sparse-attention op instance per type: the key counts differ) and
// its MoE shapes. Built from the model config (plan_model_from_config); kept as a small struct
// so that the tuner and the op factories do not depend on the whole model config.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/attention/layer_spec.h"

namespace dsa::model {
struct ModelConfig;
}

namespace dsa::tune {

struct PlanModel {
  std::string name;        // built-in name, or the config path
  std::string model_type;  // "deepseek_v4" | "glm_moe_dsa"
  std::vector<attn::AttentionLayerSpec> attention;  // one per layer type (ModelConfig::attention_layers)
  int64_t max_position = 0;
  // MoE
  int hidden_size = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int experts_per_token = 0;
  std::string expert_dtype;  // routed experts: "fp4" (MXFP4), "fp8" or "bf16"

  void validate() const;  // throws dsa::Error naming the bad field
};

// The one bridge from model/ into tune/ (plan_model_config.cpp).
PlanModel plan_model_from_config(const model::ModelConfig& config);
// A built-in model name, a checkpoint directory with config.json, or a .json path
// (model::load_model_config), as a PlanModel.
PlanModel load_plan_model(const std::string& name_or_path);

}  // namespace dsa::tune
