// indexer_scores_paged on the GPU (indexer.h): scores[t][e] = sum_h w[t][h] * scale *
// relu(q[t][h] . k[e]) with k[e] read straight from the paged FP8 indexer cache of token t's
// request (no gathered copy of the keys), -inf where e is not visible or has no page.
// Grid (T, ceil(N / 32)), 256 threads (8 warps). The CTA stages the token's q transposed in
// shared memory (qs[c][h], so that lanes reading different heads hit different banks) and its
// scaled weights; each warp then takes entries e = tile + warp, + 8, ...: its lanes load the
// entry's 128 e4m3 bytes (4 per lane, one 32-bit load) and scale, dequantize into a per-warp
// shared buffer, and each lane accumulates q_h . k over the 128 dims for heads h = lane, lane + 32
// (H <= 64); relu, weight, and a warp sum give the score. Float accumulation, one launch for the
// whole step (every request's tokens).
#include <cstdint>

#include "dsa/core/cuda_stream.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTile = 32;  // entries per CTA
constexpr int kD = kv::indexer::kDim;

__global__ void __launch_bounds__(kWarps * 32) paged_score_kernel(const __grid_constant__ IndexerPagedScoreArgs a) {
  extern __shared__ float smem[];
  float* qs = smem;                 // [kD][H]
  float* ws = qs + kD * a.H;        // [H]
  float* kbuf = ws + a.H;           // [kWarps][kD]
  const int64_t t = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t i = threadIdx.x; i < a.H * kD; i += blockDim.x) {
    const int64_t h = i / kD, c = i % kD;
    qs[c * a.H + h] = ld(a.q, a.q_dtype, t * a.H * kD + i);
  }
  for (int64_t h = threadIdx.x; h < a.H; h += blockDim.x) ws[h] = ld(a.weights, a.w_dtype, t * a.H + h) * a.scale;
  __syncthreads();
  const int64_t pos = a.positions_i64 ? static_cast<const int64_t*>(a.positions)[t]
                                      : static_cast<const int32_t*>(a.positions)[t];
  int64_t visible = (pos + 1) / a.ratio;
  visible = visible < 0 ? 0 : (visible > a.N ? a.N : visible);
  const int32_t r = a.token_req[t];
  const bool row_ok = r >= 0 && r < a.num_requests;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* kw = kbuf + warp * kD;
  for (int64_t e = tile + warp; e < tile + kTile && e < a.N; e += kWarps) {
    int32_t page = -1;
    if (row_ok && e < visible && e / a.page_size < a.blocks) page = a.block_table[r * a.blocks + e / a.page_size];
    if (page < 0 || page >= a.num_pages) {  // uniform over the warp
      if (lane == 0) a.scores[t * a.N + e] = -INFINITY;
      continue;
    }
    const int64_t slot = static_cast<int64_t>(page) * a.page_size + e % a.page_size;
    const uint32_t codes = reinterpret_cast<const uint32_t*>(a.cache + kv::indexer::key_offset(slot, a.page_size))[lane];
    const float scale = *reinterpret_cast<const float*>(a.cache + kv::indexer::scale_offset(slot, a.page_size));
#pragma unroll
    for (int j = 0; j < 4; ++j)
      kw[lane * 4 + j] = formats::dequantize_e4m3(static_cast<uint8_t>(codes >> (8 * j)), scale);
    __syncwarp();
    float part = 0.f;
    for (int64_t h = lane; h < a.H; h += 32) {
      float dot = 0.f;
#pragma unroll 8
      for (int c = 0; c < kD; ++c) dot = fmaf(qs[c * a.H + h], kw[c], dot);
      part = fmaf(ws[h], fmaxf(dot, 0.f), part);
    }
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    if (lane == 0) a.scores[t * a.N + e] = part;
    __syncwarp();  // kw is rewritten by the next entry
  }
}

}  // namespace

void indexer_scores_paged(const IndexerPagedScoreArgs& a) {
  if (a.T == 0 || a.N == 0) return;
  if (a.H < 1 || a.H > kIndexerPagedMaxHeads) cuda_launch::launch_error("indexer_scores_paged: heads outside 1..64");
  const int64_t tiles = (a.N + kTile - 1) / kTile;
  if (a.T > 0x7fffffffLL || tiles > 65535)
    cuda_launch::launch_error("indexer_scores_paged: grid exceeds the launch limits");
  const size_t smem = static_cast<size_t>(kD * a.H + a.H + kWarps * kD) * sizeof(float);  // <= 37 KB
  paged_score_kernel<<<dim3(static_cast<unsigned>(a.T), static_cast<unsigned>(tiles)), kWarps * 32, smem,
                       DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("indexer paged_score_kernel");
}

}  // namespace dsa::ops::cuda
