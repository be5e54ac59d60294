// The weight-spec numbers of a model::ModelConfig (the engine's parsed config.json or a built-in
// configuration), so that a model loads its checkpoint from the same config it runs with.
#pragma once
#include "dsa/model/config.h"
#include "dsa/model/deepseek_v4/schema.h"
#include "dsa/model/glm5/schema.h"

namespace dsa::schema {

DeepseekV4Dims deepseek_v4_dims(const model::ModelConfig& c);  // throws unless arch is DeepseekV4
Glm5Dims glm5_dims(const model::ModelConfig& c);               // throws unless arch is GlmMoeDsa
std::vector<WeightSpec> weight_specs(const model::ModelConfig& c);

}  // namespace dsa::schema
