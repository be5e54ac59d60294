// Per-request state of the DeepSeek-V4 forward that is not paged KV: the open compressor windows
// (and the CSA overlap rows) of every compressed layer, for the attention compressor and the
// indexer's compressor. Paged memory (sliding-window KV, compressed KV, indexer keys) lives in the
// KV manager's pools; this struct travels with the request through engine::KvManager.
#pragma once
#include <memory>
#include <vector>

#include "dsa/engine/request_state.h"
#include "dsa/model/config.h"
#include "dsa/ops/compressor/compressor.h"

namespace dsa::model::v4 {

struct LayerCompressorState {
  ops::CompressorState kv;       // attention compressor (CSA / HCA layers)
  ops::CompressorState indexer;  // the indexer's compressor (CSA layers)
};

struct V4RequestState : engine::RequestState {
  std::vector<LayerCompressorState> layers;  // one per main layer (empty states on sliding layers)
};

// Compressor configuration of layer type `ratio` (4 or 128) at `head_dim` (512 attention, 128 indexer).
ops::CompressorConfig compressor_config(const ModelConfig& c, int ratio, int64_t head_dim);

// Fresh state for a new request on `dev`.
std::unique_ptr<V4RequestState> make_request_state(const ModelConfig& c, Device dev);

}  // namespace dsa::model::v4
