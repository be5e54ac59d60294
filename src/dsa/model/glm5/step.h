// What one forward step knows about its batch, shared by the blocks of every layer: the engine's
// step inputs (pools and device metadata), and the views of it the GLM blocks use: positions,
// each token's request row, each token's slot in the "tokens" cache group (latent cache and
// indexer keys) and that group's block table.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"
#include "dsa/model/step_inputs.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::model::glm5 {

struct Step {
  const StepInputs* in = nullptr;
  int64_t tokens = 0;
  int64_t index_len = 0;          // host: the longest request after this step, bucketed (kv/batch_metadata.h)
  Tensor positions;               // i32 [T] (model device)
  Tensor token_seg;               // i32 [T] request row of each token (row of blocks.table)
  Tensor slots;                   // i64 [T] global slot of each token's position in the "tokens" group
  ops::BlockTable blocks;         // i32 [R][max_blocks] of the "tokens" group
  // Top-k of the last "full" indexer layer, reused by the following "shared" layers:
  Tensor topk_slots;              // i32 [T][topk] global slots, -1 = none
};

}  // namespace dsa::model::glm5
