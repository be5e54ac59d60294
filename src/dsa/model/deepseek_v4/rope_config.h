// RoPE of a DeepSeek-V4 layer from the model config (docs/model-reference.md §1): sliding-only layers
// (ratio 0) use `rope` (plain, theta 10000); CSA/HCA layers, their compressors and the indexer use
// `compress_rope` (theta 160000, YaRN). Both rotate the trailing qk_rope_head_dim dims.
#pragma once
#include "dsa/model/config.h"
#include "dsa/ops/rope/rope.h"

namespace dsa::model::v4 {

ops::RopeConfig rope_config(const ModelConfig& c, int ratio);

}  // namespace dsa::model::v4
