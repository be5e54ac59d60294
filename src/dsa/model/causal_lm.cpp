#include "dsa/model/causal_lm.h"

#include "dsa/core/error.h"
#include "dsa/model/deepseek_v4/model.h"
#include "dsa/model/glm5/model.h"

namespace dsa::model {

std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir, Device device, const LoadModelOptions& opt) {
  const ModelConfig cfg = model_config_for_load(dir, opt.weights.format, opt.weights.layers);
  switch (cfg.arch) {
    case Arch::GlmMoeDsa: {
      glm5::Options o;
      o.shards = opt.shards;
      o.expert_parallel = opt.expert_parallel;
      o.load_mtp = opt.mtp;
      o.weights = opt.weights;
      return std::make_unique<glm5::Model>(dir, device, o);
    }
    case Arch::DeepseekV4:
      return v4::load_deepseek_v4_model(
          dir, device,
          v4::V4Options{.progress = opt.progress,
                        .load_mtp = opt.mtp,
                        .weights = opt.weights,
                        .shards = opt.shards && opt.shards->size() > 1 ? opt.shards : nullptr,
                        .expert_parallel = opt.expert_parallel});
  }
  fail("load_causal_lm: no forward for architecture {} yet ({})", arch_name(cfg.arch), dir);
}

void CausalLM::draft(const StepInputs&, const Tensor&) {
  fail("{}: this checkpoint has no MTP layer (num_nextn_predict_layers = {}): speculative decoding needs one",
       config().name, config().num_mtp_layers);
}

}  // namespace dsa::model
