// Launchers of the fused norm + RoPE kernels (norm_rope.cu). Only used when DSA_WITH_CUDA; the
// Tensor-level checks are in norm_rope.cpp, the launchers trust them.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"
#include "dsa/ops/rope/rope_cuda.h"

namespace dsa::ops::cuda {

struct NormRopeArgs {
  const void* x;
  DType x_dtype;
  int64_t x_token_stride, x_head_stride;  // elements
  const void* weight;                     // may be null (unweighted)
  DType weight_dtype;
  const void* positions;
  bool positions_i64;
  uint16_t* out;  // bf16 bits; may be null for the MODEL1 launch (cache only)
  int64_t out_token_stride, out_head_stride;
  int64_t tokens, heads, heads_padded, dim;  // heads_padded >= heads rows of out per token
  float eps;
  int64_t rope_offset;  // even
  int pairs;            // rope_dim / 2
  float attention_factor;
  float inv_freq[kRopeMaxPairs];
  // MODEL1 insert (norm_rope_model1 only)
  uint8_t* cache;
  int64_t num_slots;  // slots outside [0, num_slots) are skipped
  int page_size;
  const int64_t* slots;
};

void norm_rope(const NormRopeArgs& a);         // dim <= kRegMaxCols (norm_cuda.h)
void norm_rope_model1(const NormRopeArgs& a);  // dim == 512, heads == heads_padded == 1, rope at 448

}  // namespace dsa::ops::cuda
