#include "model_load.h"

#include "dsa/core/log.h"
#include "dsa/model/config.h"

namespace dsa::cli {

LoadedModel load_model(const std::string& dir, Device dev, int tp_size, const model::LoadModelOptions& lo,
                       int speculative_tokens) {
  engine::check_tensor_parallel_size(model::load_model_config(dir), tp_size);
  engine::check_tensor_parallel_options(tp_size, speculative_tokens);
  LoadedModel m;
  if (tp_size == 1) {
    m.whole = model::load_causal_lm(dir, dev, lo);
    return m;
  }
  const std::vector<Device> devs = engine::tp_rank_devices(dev, tp_size);
  std::string where;
  for (const Device& d : devs) where += (where.empty() ? "" : ", ") + d.str();
  log_info("tensor parallel size {}: loading {} shards on {}", tp_size, tp_size, where);
  m.tp = std::make_unique<engine::TensorParallelModels>(dir, tp_size, devs);
  return m;
}

}  // namespace dsa::cli
