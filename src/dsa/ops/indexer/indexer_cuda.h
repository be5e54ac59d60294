// Launchers of the CUDA indexer kernels (indexer.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

constexpr int64_t kIndexerMaxQElems = 12288;  // H*D + H floats staged in shared memory (<= 48 KB)
constexpr int64_t kIndexerMaxHeadDim = 256;
constexpr int64_t kIndexerMaxTopk = 2048;

struct IndexerScoreArgs {
  const void* q;        // [T][H][D]
  const void* keys;     // [N][D]
  const void* weights;  // [T][H]
  const void* positions;
  bool positions_i64;
  DType q_dtype, k_dtype, w_dtype;
  float* scores;  // [T][N]
  int64_t T, H, D, N, ratio;
  float scale;
};

struct TopkSelectArgs {
  const float* scores;  // [T][N]
  const void* positions;
  bool positions_i64;
  int32_t* indices;  // [T][topk]
  int64_t T, N, ratio, topk;
};

void indexer_scores(const IndexerScoreArgs& a);
void topk_select(const TopkSelectArgs& a);

}  // namespace dsa::ops::cuda
