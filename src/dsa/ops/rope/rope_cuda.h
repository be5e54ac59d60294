// Launcher of the CUDA RoPE kernel (rope.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

constexpr int kRopeMaxPairs = 128;

struct RopeArgs {
  void* x;
  const void* positions;  // [tokens]; null: position of token t is pos_base + t * pos_step
  bool positions_i64;
  int64_t pos_base, pos_step;
  DType dtype;
  int64_t tokens, heads;
  int64_t token_stride, head_stride;  // elements
  int64_t offset;
  int pairs;  // rope_dim / 2
  float attention_factor;
  bool inverse, deinterleave_out, half_split;
  float inv_freq[kRopeMaxPairs];
};

void rope(const RopeArgs& a);

}  // namespace dsa::ops::cuda
