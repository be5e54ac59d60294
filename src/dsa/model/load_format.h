// Where a model's weights come from (`--load-format`, vLLM's option): the checkpoint's
// safetensors files, or dummy values filled on the device from the config alone
// (dummy_weights.h), so that a release-shape model runs without a checkpoint on disk. The config
// then comes from a directory holding only config.json, or from a built-in name
// (builtin_configs.cpp: deepseek-v4-flash, deepseek-v4-pro, glm-5.1), optionally cut to its
// first layers (`--layers N`: a few layers of real shapes load in seconds).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "dsa/model/config.h"

namespace dsa::model {

enum class LoadFormat {
  Auto,         // today's behaviour: the checkpoint's safetensors
  Safetensors,  // the same, spelled out
  Dummy,        // random weights from the config (outputs are meaningless)
};

// How a load gets its config and weights (LoadModelOptions, the models' options).
struct WeightSource {
  LoadFormat format = LoadFormat::Auto;
  int layers = 0;     // dummy: only the first N main layers (0: all)
  uint64_t seed = 0;  // dummy: the fill's seed (same seed, same weights)
  bool dummy() const { return format == LoadFormat::Dummy; }
};

// "auto", "safetensors" or "dummy"; anything else throws naming the option and the choices.
LoadFormat parse_load_format(std::string_view s);
std::string_view load_format_name(LoadFormat f);

// `c` with only its first `layers` main layers (the per-layer schedules cut to match, hash-routed
// and dense leading layers capped); the MTP layers stay. layers <= 0 or >= num_layers: unchanged.
ModelConfig with_layers(ModelConfig c, int layers);

// The config a load of `model` (a built-in name, a directory with config.json, or a .json file)
// uses. A built-in name has no weights: it needs LoadFormat::Dummy. `layers` > 0 (dummy only):
// with_layers. Errors say what is missing and how to ask for it.
ModelConfig model_config_for_load(const std::string& model, LoadFormat format, int layers = 0);

}  // namespace dsa::model
