// Lightning-indexer kernels (indexer.h).
//
// score_kernel: scores[t][e] = sum_h w[t][h] * scale * relu(q[t][h] . k[e]) for visible e
//   (e < (pos+1)/m, clamped to N), -inf otherwise. Grid (T, ceil(N / 64)), 256 threads (8 warps).
//   The token's q (H*D floats, <= 48 KB dynamic smem) and its scaled weights are staged in
//   shared memory once per CTA; each warp then takes entries e = tile + warp, + 8, ...: lane l
//   holds key elements l, l+32, ... (D <= 256: up to 8 registers), and for every head a
//   warp-shuffle reduction forms q_h . k_e. Keys are read once per (token, entry) with coalesced
//   loads; float accumulation.
// select_kernel: per token one CTA of 1024 threads selects the min(topk, visible) largest
//   scores. Each visible entry gets a unique 64-bit key (order-preserving bits of the score << 32 |
//   (0xffffffff - e)), so "larger key" = higher score, ties -> lower index. When no more than topk
//   entries are visible (short contexts) they are all chosen and only sorted. Otherwise a radix
//   select over the 8 bytes of the key (8 passes, 256-bin shared-memory histogram each, the digit
//   found by one warp's suffix sums; counts are order-independent, so the result is
//   deterministic) finds the k-th largest key, and entries with a key >= it are gathered (exactly
//   k of them) into shared memory. The keys are bitonic-sorted descending (<= 2048 keys, 16 KB)
//   and written as indices; the remaining slots get -1. With the wide selection
//   (indexer_select_wide.cu) a long row's radix select and gather run over its candidates
//   (every entry that can be in the top k, typically a few percent of the row) instead of the
//   whole row; the result is the same. Rows of at most kIndexerFastMaxEntries entries take the
//   register-resident fast_select_kernel (indexer_select_fast.cu) instead unless a caller asks for
//   this path (TopkSelectPath::PerRow): same result, a fraction of the block syncs.
#include "dsa/core/pdl.cuh"
#include <cstdint>

#include "dsa/ops/common/block_select.cuh"
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/ops/indexer/visible_entries.cuh"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kScoreWarps = 8;
constexpr int kScoreTile = 64;  // entries per CTA
constexpr int kMaxKeyRegs = kIndexerMaxHeadDim / 32;
constexpr int kSelectThreads = 1024;

__global__ void score_kernel(IndexerScoreArgs a) {
  pdl::entry();
  extern __shared__ float smem[];  // q [H*D], then w [H]
  float* qs = smem;
  float* ws = smem + a.H * a.D;
  const int64_t t = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(blockIdx.y) * kScoreTile;
  for (int64_t i = threadIdx.x; i < a.H * a.D; i += blockDim.x) qs[i] = ld(a.q, a.q_dtype, t * a.H * a.D + i);
  for (int64_t h = threadIdx.x; h < a.H; h += blockDim.x) ws[h] = ld(a.weights, a.w_dtype, t * a.H + h) * a.scale;
  __syncthreads();
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t e = tile + warp; e < tile + kScoreTile && e < a.N; e += kScoreWarps) {
    if (e >= visible) {
      if (lane == 0) a.scores[t * a.N + e] = -INFINITY;
      continue;
    }
    float kr[kMaxKeyRegs];
#pragma unroll
    for (int j = 0; j < kMaxKeyRegs; ++j) {
      const int64_t c = lane + 32 * j;
      kr[j] = c < a.D ? ld(a.keys, a.k_dtype, e * a.D + c) : 0.f;
    }
    float acc = 0.f;
    for (int64_t h = 0; h < a.H; ++h) {
      const float* qh = qs + h * a.D;
      float dot = 0.f;
#pragma unroll
      for (int j = 0; j < kMaxKeyRegs; ++j) {
        const int64_t c = lane + 32 * j;
        if (c < a.D) dot = fmaf(qh[c], kr[j], dot);
      }
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      acc = fmaf(ws[h], fmaxf(dot, 0.f), acc);
    }
    if (lane == 0) a.scores[t * a.N + e] = acc;
  }
}

__device__ __forceinline__ uint64_t entry_key(const float* row, int64_t e) { return value_index_key(row[e], e); }

__global__ void __launch_bounds__(kSelectThreads) select_kernel(TopkSelectArgs a) {
  pdl::entry();
  __shared__ RadixScratch scratch;
  __shared__ uint64_t picked[kIndexerMaxTopk];
  __shared__ uint32_t count_s;
  const int64_t t = blockIdx.x;
  const float* row = a.scores + t * a.N;
  int32_t* out = a.indices + t * a.topk;
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int64_t k = visible < a.topk ? visible : a.topk;
  for (int64_t i = threadIdx.x; i < a.topk; i += blockDim.x)
    if (i >= k) out[i] = -1;
  if (k == 0) return;
  if (visible <= a.topk) {
    // Every visible entry is chosen: no selection, only the sort below.
    for (int64_t e = threadIdx.x; e < visible; e += blockDim.x) picked[e] = entry_key(row, e);
  } else {
    // The entries ranked: the whole visible row, or (wide selection) the row's candidates.
    const int32_t* cand = a.cand ? a.cand + t * a.N : nullptr;
    const int64_t n = cand ? static_cast<int64_t>(a.wide_hist[t * (kIndexerWideBins + 1) + kIndexerWideBins]) : visible;
    auto key_at = [&](int64_t i) { return entry_key(row, cand ? cand[i] : i); };
    const uint64_t kth = block_kth_largest(key_at, n, k, scratch);
    if (threadIdx.x == 0) count_s = 0;
    __syncthreads();
    block_gather_at_least(key_at, n, kth, picked, &count_s);  // exactly k keys are >= kth
  }
  __syncthreads();
  block_sort_desc(picked, static_cast<int>(k));
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) out[i] = static_cast<int32_t>(key_index(picked[i]));
}

}  // namespace

void indexer_scores(const IndexerScoreArgs& a) {
  if (a.T == 0 || a.N == 0) return;
  if (a.H * a.D + a.H > kIndexerMaxQElems || a.D > kIndexerMaxHeadDim)
    cuda_launch::launch_error("indexer_scores: H*D or D too large");
  const int64_t tiles = (a.N + kScoreTile - 1) / kScoreTile;
  if (a.T > 0x7fffffffLL || tiles > 65535)
    cuda_launch::launch_error("indexer_scores: grid exceeds the launch limits (N <= 4194240)");
  const size_t smem = static_cast<size_t>(a.H * a.D + a.H) * sizeof(float);  // <= 48 KB: no opt-in needed
  pdl::launch(score_kernel, dim3(static_cast<unsigned>(a.T), static_cast<unsigned>(tiles)), kScoreWarps * 32, smem,
              DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("indexer score_kernel");
}

void topk_select(const TopkSelectArgs& a) {
  if (a.T == 0) return;
  if (a.topk > kIndexerMaxTopk) cuda_launch::launch_error("topk_select: topk > 2048");
  if (a.T > 0x7fffffffLL) cuda_launch::launch_error("topk_select: too many tokens for one grid");
  if (a.cand) topk_select_wide_prepare(a);
  pdl::launch(select_kernel, static_cast<unsigned>(a.T), kSelectThreads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("indexer select_kernel");
}

}  // namespace dsa::ops::cuda
