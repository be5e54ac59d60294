#include "dsa/model/load_format.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/core/regular_file.h"

namespace dsa::model {

LoadFormat parse_load_format(std::string_view s) {
  if (s == "auto") return LoadFormat::Auto;
  if (s == "safetensors") return LoadFormat::Safetensors;
  if (s == "dummy") return LoadFormat::Dummy;
  fail("--load-format '{}': expected auto, safetensors or dummy", s);
}

std::string_view load_format_name(LoadFormat f) {
  switch (f) {
    case LoadFormat::Auto: return "auto";
    case LoadFormat::Safetensors: return "safetensors";
    case LoadFormat::Dummy: return "dummy";
  }
  return "?";
}

ModelConfig with_layers(ModelConfig c, int layers) {
  if (layers <= 0 || layers >= c.num_layers) return c;
  c.num_layers = layers;
  if (!c.compress_ratios.empty()) c.compress_ratios.resize(static_cast<size_t>(layers));
  if (!c.indexer_types.empty()) c.indexer_types.resize(static_cast<size_t>(layers));
  c.num_hash_layers = std::min(c.num_hash_layers, layers);
  c.first_k_dense_replace = std::min(c.first_k_dense_replace, layers);
  c.validate();
  return c;
}

ModelConfig model_config_for_load(const std::string& model, LoadFormat format, int layers) {
  DSA_CHECK(layers >= 0, "--layers must be >= 0 (0: all), got {}", layers);
  if (format != LoadFormat::Dummy) {
    DSA_CHECK(!is_builtin_model(model),
              "model '{}' is a built-in configuration without weights: add --load-format dummy to run it with random "
              "weights, or give a checkpoint directory",
              model);
    DSA_CHECK(layers == 0, "--layers {} needs --load-format dummy (a checkpoint loads all its layers)", layers);
    return load_model_config(model);
  }
  if (!is_builtin_model(model)) {
    const std::filesystem::path p(model);
    const PathKind k = path_kind(model);
    DSA_CHECK(k != PathKind::Missing, "--load-format dummy: model '{}' is neither a built-in ({}) nor a directory "
              "with config.json nor a .json file", model, fmt::join(builtin_model_names(), ", "));
    if (k == PathKind::Directory)
      DSA_CHECK(path_kind((p / "config.json").string()) != PathKind::Missing,
                "--load-format dummy: directory '{}' has no config.json (the dummy load takes the model's shapes from "
                "it; or give a built-in name: {})",
                model, fmt::join(builtin_model_names(), ", "));
  }
  return with_layers(load_model_config(model), layers);
}

}  // namespace dsa::model
