#include "model_load.h"

#include <CLI/CLI.hpp>

#include "dsa/core/log.h"
#include "dsa/model/config.h"
#include "dsa/model/load_format.h"

namespace dsa::cli {

model::WeightSource LoadFormatArgs::source() const {
  model::WeightSource s;
  s.format = model::parse_load_format(format);
  s.layers = layers;
  return s;
}

void add_load_format_options(CLI::App* cmd, LoadFormatArgs& a) {
  cmd->add_option("--load-format", a.format,
                  "Where the weights come from: auto (default) or safetensors: the checkpoint; dummy: random weights "
                  "filled on the device from the config alone (--model may then be a directory with only "
                  "config.json or a built-in name: deepseek-v4-flash, deepseek-v4-pro, glm-5.1); outputs are "
                  "meaningless");
  cmd->add_option("--layers", a.layers, "With --load-format dummy: only the first N layers (0: all)");
}

LoadedModel load_model(const std::string& dir, Device dev, int tp_size, const model::LoadModelOptions& lo,
                       int speculative_tokens) {
  engine::check_tensor_parallel_size(model::model_config_for_load(dir, lo.weights.format, lo.weights.layers), tp_size);
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
  engine::TpLoadOptions to;
  to.weights = lo.weights;
  m.tp = std::make_unique<engine::TensorParallelModels>(dir, tp_size, devs, to);
  return m;
}

}  // namespace dsa::cli
