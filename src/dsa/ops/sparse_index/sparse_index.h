// Index conversions that build the global slot lists consumed by sparse_mla_decode
// (docs/kv-cache.md). Each op has a CPU reference and a CUDA kernel behind one function
// (CPU tensors -> CPU loop, CUDA tensors -> kernel). Output rows: slots (int32, -1 = none) and
// per-row valid counts (number of entries != -1).
//
//  - topk_to_global_slots: request-local top-k positions -> global slots through the block
//    table; -1 and anything out of range (see slot_math.h) -> -1.
//  - hca_visible_slots: all compressed entries visible to the query (e < (pos+1)/m), in order,
//    as slots of the compressed cache; the row holds the first K of them (size K >= the largest
//    visible count; counts tell how many were written), padded with -1.
//  - swa_window_slots: positions [max(pos-W+1, 0), pos] (W = window = K) in ascending order as
//    slots of the sliding-window cache, padded with -1.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

// Block table of one paged cache: i32 [R][max_blocks], entries < 0 = unmapped.
struct BlockTable {
  Tensor table;
  int page_size = 64;     // entries (tokens) per page, >= 1
  int64_t num_pages = 0;  // > 0: pages >= num_pages give -1; 0: not checked
};

struct TopkToSlotsParams {
  Tensor local;         // i32 [T][K] request-local positions, -1 = none
  Tensor token_req;     // i32 [T] request of each token
  BlockTable blocks;
  Tensor slots;         // out i32 [T][K]
  Tensor valid_counts;  // out i32 [T] (optional)
  void* stream = nullptr;
  void validate() const;
};
void topk_to_global_slots(const TopkToSlotsParams& p);

struct PositionSlotsParams {
  Tensor positions;     // i32 [T] position of each query token in its request
  Tensor token_req;     // i32 [T]
  BlockTable blocks;
  Tensor slots;         // out i32 [T][K]
  Tensor valid_counts;  // out i32 [T] (optional)
  void* stream = nullptr;
  void validate() const;
};
// ratio m >= 1 (128 for HCA layers).
void hca_visible_slots(const PositionSlotsParams& p, int ratio);
// window = K = slots.size(1) (128 for DeepSeek-V4).
void swa_window_slots(const PositionSlotsParams& p);

#ifdef DSA_WITH_CUDA
namespace sparse_index_cuda {
void topk_to_slots(const TopkToSlotsParams& p);
void hca_slots(const PositionSlotsParams& p, int ratio);
void swa_slots(const PositionSlotsParams& p);
}  // namespace sparse_index_cuda
#endif

}  // namespace dsa::ops
