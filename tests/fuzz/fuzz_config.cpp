// Fuzz target: config.json (model::parse_model_config_json, the one reader every command uses),
// then what commands derive from an accepted config: the attention layer types, the weight-spec
// numbers and, where the loader's check against the checkpoint's tensor count could let it
// through (here: at most 2^16 expert tensors), the weight spec list itself.
#include <string_view>

#include "dsa/core/error.h"
#include "dsa/model/config.h"
#include "dsa/model/schema/from_model_config.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(config) {
  try {
    const dsa::model::ModelConfig c =
        dsa::model::parse_model_config_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)c.attention_layers();
    (void)c.softmax_scale();
    const int64_t expert_tensors = int64_t{c.num_layers + c.num_mtp_layers} * c.n_routed_experts * 3;
    if (expert_tensors <= 65536) (void)dsa::schema::weight_specs(c);
  } catch (const dsa::Error&) {
  }
  return 0;
}
