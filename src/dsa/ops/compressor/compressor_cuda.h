// Launchers of the CUDA compressor (compressor.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

struct CompressorPoolArgs {
  const void* kv;     // [T][W]
  const void* score;  // [T][W]
  DType kv_dtype, score_dtype;
  const float* ape;  // [m][W]
  float* state_kv;   // [coff*m][W]
  float* state_score;
  float* pooled;  // [emitted][d] f32: pooled entries before the norm
  int64_t tokens, start_pos, ratio, head_dim;
  bool overlap;
};

// Runs the per-token state recurrence and writes the pooled (un-normalised) entries.
void compressor_pool(const CompressorPoolArgs& a);

}  // namespace dsa::ops::cuda
