// PlanModel from the model config: the only place where tune/ reads model/ (the model config
// sits above the tuner; everything else in tune/ depends on PlanModel alone).
#include "dsa/model/config.h"
#include "dsa/tune/plan_model.h"

namespace dsa::tune {

PlanModel plan_model_from_config(const model::ModelConfig& c) {
  PlanModel m;
  m.name = c.name;
  m.model_type = std::string(model::arch_name(c.arch));
  m.attention = c.attention_layers();
  m.max_position = c.max_position_embeddings;
  m.hidden_size = c.hidden_size;
  m.moe_intermediate_size = c.moe_intermediate_size;
  m.n_routed_experts = c.n_routed_experts;
  m.experts_per_token = c.num_experts_per_tok;
  m.expert_dtype = c.quant.expert_dtype;
  m.validate();
  return m;
}

PlanModel load_plan_model(const std::string& name_or_path) {
  return plan_model_from_config(model::load_model_config(name_or_path));
}

}  // namespace dsa::tune
