// Launchers of the CUDA indexer kernels (indexer.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

constexpr int64_t kIndexerMaxQElems = 12288;  // H*D + H floats staged in shared memory (<= 48 KB)
constexpr int64_t kIndexerMaxHeadDim = 256;
constexpr int64_t kIndexerMaxTopk = 2048;
// The register-resident select (indexer_select_fast.cu): rows of at most this many entries.
constexpr int64_t kIndexerFastMaxEntries = 16384;
// The wide selection (indexer_select_wide.cu): digits of the top 12 bits of a score.
constexpr int kIndexerWideDigitBits = 12;
constexpr int kIndexerWideBins = 1 << kIndexerWideDigitBits;

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
  // The wide selection (both set, else the one-CTA-per-row select over the whole row): the
  // candidate entries of each row, [T][N] i32, and per row kIndexerWideBins digit counts plus
  // the candidate count, [T][kIndexerWideBins + 1] u32 (cleared by the launcher).
  int32_t* cand = nullptr;
  uint32_t* wide_hist = nullptr;
};

void indexer_scores(const IndexerScoreArgs& a);
// topk_select: with a.cand set, topk_select_wide_prepare first cuts every long row to its
// candidates (two launches over (T, N / 2048) CTAs), then the per-row select runs over them.
void topk_select(const TopkSelectArgs& a);
void topk_select_wide_prepare(const TopkSelectArgs& a);
// The one-launch select of rows of at most kIndexerFastMaxEntries entries, each row resident in
// its CTA's registers (a.cand must be null); the same result as topk_select.
void topk_select_fast(const TopkSelectArgs& a);

}  // namespace dsa::ops::cuda

namespace dsa::ops::cuda {

constexpr int64_t kIndexerPagedMaxHeads = 64;

struct IndexerPagedScoreArgs {
  const void* q;        // [T][H][128]
  const void* weights;  // [T][H]
  const void* positions;
  bool positions_i64;
  DType q_dtype, w_dtype;
  const uint8_t* cache;
  int page_size;
  int64_t num_pages;
  const int32_t* block_table;  // [R][blocks]
  int64_t blocks;
  const int32_t* token_req;    // [T]
  int64_t num_requests;
  float* scores;               // [T][N]
  int64_t T, H, N, ratio;
  float scale;
  int64_t tiles_per_cta = 1;  // set by the launcher
};

void indexer_scores_paged(const IndexerPagedScoreArgs& a);

}  // namespace dsa::ops::cuda
