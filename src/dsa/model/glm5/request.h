// Per-request state of the GLM forward (explicit, one struct).
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::model::glm5 {

struct Request {
  // Pages and cached length live in the engine's KvManager (same request id).
  // Indexer keys of every cached position, per layer with its own indexer ("full"; empty tensor
  // for "shared" layers): f32 [capacity][index_head_dim] on the model's device, rows [0, cached length).
  // Kept in plain values as transformers does (no FP8 key simulation).
  std::vector<Tensor> index_keys;
};

}  // namespace dsa::model::glm5
