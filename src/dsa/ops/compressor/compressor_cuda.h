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

namespace dsa::ops::cuda {

constexpr int kCompressorMaxHeadDim = 512;
constexpr int kCompressorMaxRopePairs = 64;

struct CompressorBatchArgs {
  const void* kv;     // [T][W]
  const void* score;  // [T][W]
  DType kv_dtype, score_dtype;
  const float* ape;          // [m][W]
  const void* norm_weight;   // [d]
  DType norm_dtype;
  uint8_t* state;            // slots of slot_bytes: f32 kv [coff*m][W], then f32 score
  int64_t slot_bytes, num_slots;
  const int32_t* state_slots;  // [R]
  const int32_t* query_start;  // [R + 1]
  const int32_t* cached_lens;  // [R]
  const int32_t* entry_start;  // [R + 1]
  void* out;                   // [out_rows][d]
  DType out_dtype;
  int64_t out_rows, requests, ratio, head_dim;
  bool overlap;
  float eps;
  int rope_dim;
  float attention_factor;
  float inv_freq[kCompressorMaxRopePairs];
};

// The whole step's compressor (compressor_batch.h): state recurrence, pooling, RMSNorm, RoPE.
void compressor_batch(const CompressorBatchArgs& a);

}  // namespace dsa::ops::cuda
