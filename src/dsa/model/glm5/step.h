// What one forward step knows about its batch, shared by the blocks of every layer: positions,
// the request segments (each request's tokens are one contiguous run of the batch), the block
// table of the requests in batch order and each token's cache slot.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/glm5/request.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::model::glm5 {

struct Segment {
  Request* req = nullptr;
  int64_t first = 0;   // first token in the batch
  int64_t count = 0;   // tokens
  int64_t start = 0;   // position of the first token (= the request's cached length before the step)
};

struct Step {
  int64_t tokens = 0;
  std::vector<Segment> segments;  // batch order
  Tensor positions;               // i32 [T] (model device)
  Tensor token_seg;               // i32 [T] segment of each token (row of blocks.table)
  Tensor slots;                   // i64 [T] global latent-cache slot of each token's position
  ops::BlockTable blocks;         // i32 [segments][max_blocks] of the latent cache group
  // Top-k of the last "full" indexer layer, reused by the following "shared" layers:
  Tensor topk_slots;              // i32 [T][topk] global slots, -1 = none
};

}  // namespace dsa::model::glm5
