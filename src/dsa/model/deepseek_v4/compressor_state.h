// The per-request state of the DeepSeek-V4 forward that is not paged KV: the open compressor
// windows (and the CSA overlap rows) of every compressed layer, for the attention compressor
// ("compressor") and the indexer's compressor ("indexer_compressor", CSA layers). The model
// declares one state pool per (layer, compressor) (kv::StatePoolSpec); the engine's KV manager
// owns the memory and gives every request a slot, which the batched compressor op
// (ops/compressor/compressor_batch.h) finds through the step's state_slots.
#pragma once
#include <vector>

#include "dsa/kv/cache_spec.h"
#include "dsa/model/config.h"
#include "dsa/ops/compressor/compressor.h"

namespace dsa::model::v4 {

inline constexpr const char* kCompressorState = "compressor";
inline constexpr const char* kIndexerCompressorState = "indexer_compressor";

// Compressor configuration of layer type `ratio` (4 or 128) at `head_dim` (512 attention, 128 indexer).
ops::CompressorConfig compressor_config(const ModelConfig& c, int ratio, int64_t head_dim);

// The state pools of every compressed main layer.
std::vector<kv::StatePoolSpec> compressor_state_specs(const ModelConfig& c);

}  // namespace dsa::model::v4
