// indexer_scores_paged on the GPU (indexer.h): scores[t][e] = sum_h w[t][h] * scale *
// relu(q[t][h] . k[e]) with k[e] read straight from the paged FP8 indexer cache of token t's
// request (no gathered copy of the keys), -inf where e is not visible or has no page.
// Grid (T, ceil(N / (32 * tiles_per_cta))), 256 threads (8 warps), tiles of 32 entries; one
// entry per lane: the 32 lanes of every warp take the tile's 32 entries and the 8 warps split the heads (HPW = ceil(H / 8) each, padded
// with zero rows), so each lane holds its entry's key in registers (64 dims at a time,
// e4m3 -> f32) and streams the token's q rows from shared memory as broadcast float4 loads:
// 4 FMAs per shared load, 8 independent head accumulators per lane (ILP), no per-entry
// dependency chain through shared memory. The 8 warps' partial scores are summed in fixed order
// (deterministic). The key scale is applied to the finished dot (relu(s * d) = s * relu(d) for
// s > 0): the same value as the CPU's dequantize-then-dot up to float rounding. This replaced a
// warp-per-entry kernel whose lanes each ran a 128-long FMA chain per head through shared
// memory (36 us for 64 entries at T = 1 on the H200; the CSA indexer's growth at long context).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
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
constexpr int kTile = 32;  // entries per CTA: one per lane
constexpr int kD = kv::indexer::kDim;
constexpr int kHalf = kD / 2;  // key dims held in registers at a time

// Four e4m3 bytes (little-endian in w) as floats: the hardware pair conversion through f16,
// exact for every e4m3 value.
__device__ __forceinline__ void e4m3x4_to_f32(uint32_t w, float* out) {
  const float2 lo = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xFFFFu), __NV_E4M3)));
  const float2 hi = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3)));
  out[0] = lo.x;
  out[1] = lo.y;
  out[2] = hi.x;
  out[3] = hi.y;
}

// Key bytes [at, at + 64) of one entry as floats (unscaled e4m3 values). kVec16: the entry is
// 16-byte aligned (page sizes that are multiples of 4), else 4-byte loads.
template <bool kVec16>
__device__ __forceinline__ void load_key_half(const uint8_t* key, float (&k)[kHalf]) {
  if constexpr (kVec16) {
#pragma unroll
    for (int v = 0; v < kHalf / 16; ++v) {
      const uint4 w = reinterpret_cast<const uint4*>(key)[v];
      e4m3x4_to_f32(w.x, k + v * 16);
      e4m3x4_to_f32(w.y, k + v * 16 + 4);
      e4m3x4_to_f32(w.z, k + v * 16 + 8);
      e4m3x4_to_f32(w.w, k + v * 16 + 12);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kHalf / 4; ++i) {
      e4m3x4_to_f32(reinterpret_cast<const uint32_t*>(key)[i], k + i * 4);
    }
  }
}

template <int HPW, bool kVec16>
__global__ void __launch_bounds__(kWarps * 32) paged_score_kernel(const __grid_constant__ IndexerPagedScoreArgs a) {
  extern __shared__ float4 smem4[];
  constexpr int kHeads = kWarps * HPW;  // padded head rows
  float* qs = reinterpret_cast<float*>(smem4);  // [kHeads][kD], rows >= H zero
  float* ws = qs + kHeads * kD;                 // [kHeads], scaled weights, zero past H
  float* red = ws + kHeads;                     // [kWarps][kTile]
  const int64_t t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < kHeads * kD; i += blockDim.x)
    qs[i] = i < a.H * kD ? ld(a.q, a.q_dtype, t * a.H * kD + i) : 0.f;
  for (int64_t h = threadIdx.x; h < kHeads; h += blockDim.x)
    ws[h] = h < a.H ? ld(a.weights, a.w_dtype, t * a.H + h) * a.scale : 0.f;
  __syncthreads();

  const int64_t pos = a.positions_i64 ? static_cast<const int64_t*>(a.positions)[t]
                                      : static_cast<const int32_t*>(a.positions)[t];
  int64_t visible = (pos + 1) / a.ratio;
  visible = visible < 0 ? 0 : (visible > a.N ? a.N : visible);
  const int32_t r = a.token_req[t];
  const bool row_ok = r >= 0 && r < a.num_requests;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* qw = qs + warp * HPW * kD;  // this warp's head rows
  const int64_t first = static_cast<int64_t>(blockIdx.y) * a.tiles_per_cta;
  for (int64_t tile = first; tile < first + a.tiles_per_cta && tile * kTile < a.N; ++tile) {
    const int64_t e = tile * kTile + lane;
    int32_t page = -1;
    if (row_ok && e < visible && e / a.page_size < a.blocks) page = a.block_table[r * a.blocks + e / a.page_size];
    const bool valid = page >= 0 && page < a.num_pages;
    const int64_t slot = valid ? static_cast<int64_t>(page) * a.page_size + e % a.page_size : 0;
    const uint8_t* key = a.cache + kv::indexer::key_offset(slot, a.page_size);

    float dot[HPW];
#pragma unroll
    for (int j = 0; j < HPW; ++j) dot[j] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float k[kHalf];
      if (valid) {
        load_key_half<kVec16>(key + half * kHalf, k);
      } else {
#pragma unroll
        for (int c = 0; c < kHalf; ++c) k[c] = 0.f;
      }
#pragma unroll
      for (int c4 = 0; c4 < kHalf / 4; ++c4)
#pragma unroll
        for (int j = 0; j < HPW; ++j) {
          const float4 q = reinterpret_cast<const float4*>(qw + j * kD + half * kHalf)[c4];
          dot[j] = fmaf(q.x, k[4 * c4], dot[j]);
          dot[j] = fmaf(q.y, k[4 * c4 + 1], dot[j]);
          dot[j] = fmaf(q.z, k[4 * c4 + 2], dot[j]);
          dot[j] = fmaf(q.w, k[4 * c4 + 3], dot[j]);
        }
    }
    const float scale =
        valid ? *reinterpret_cast<const float*>(a.cache + kv::indexer::scale_offset(slot, a.page_size)) : 0.f;
    float part = 0.f;
#pragma unroll
    for (int j = 0; j < HPW; ++j) part = fmaf(ws[warp * HPW + j], fmaxf(dot[j] * scale, 0.f), part);
    red[warp * kTile + lane] = part;
    __syncthreads();
    if (warp == 0 && e < a.N) {
      float total = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += red[w * kTile + lane];
      a.scores[t * a.N + e] = valid ? total : -INFINITY;
    }
    __syncthreads();  // red is rewritten by the next tile
  }
}

template <int HPW>
void launch_paged_score(const IndexerPagedScoreArgs& a, dim3 grid) {
  const size_t smem = static_cast<size_t>(kWarps * HPW * kD + kWarps * HPW + kWarps * kTile) * sizeof(float);  // <= 34 KB
  const bool vec16 = a.page_size % 4 == 0 && reinterpret_cast<uintptr_t>(a.cache) % 16 == 0;
  if (vec16)
    paged_score_kernel<HPW, true><<<grid, kWarps * 32, smem, DSA_CURRENT_STREAM>>>(a);
  else
    paged_score_kernel<HPW, false><<<grid, kWarps * 32, smem, DSA_CURRENT_STREAM>>>(a);
}

}  // namespace

void indexer_scores_paged(const IndexerPagedScoreArgs& a) {
  if (a.T == 0 || a.N == 0) return;
  if (a.H < 1 || a.H > kIndexerPagedMaxHeads) cuda_launch::launch_error("indexer_scores_paged: heads outside 1..64");
  const int64_t tiles = (a.N + kTile - 1) / kTile;
  if (a.T > 0x7fffffffLL || tiles > 65535)
    cuda_launch::launch_error("indexer_scores_paged: grid exceeds the launch limits");
  // Tiles per CTA: one while the grid is small (decode: spread the entries over the SMs); with
  // many tokens (prefill) up to 16, so that staging the token's q rows is paid once per 512
  // entries rather than once per 32.
  IndexerPagedScoreArgs args = a;
  args.tiles_per_cta = std::clamp<int64_t>(a.T * tiles / 4096, 1, 16);
  const int64_t ys = (tiles + args.tiles_per_cta - 1) / args.tiles_per_cta;
  const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>(ys));
  const int64_t hpw = (a.H + kWarps - 1) / kWarps;
  if (hpw <= 1)
    launch_paged_score<1>(args, grid);
  else if (hpw <= 2)
    launch_paged_score<2>(args, grid);
  else if (hpw <= 4)
    launch_paged_score<4>(args, grid);
  else
    launch_paged_score<8>(args, grid);
  cuda_launch::check_launch("indexer paged_score_kernel");
}

}  // namespace dsa::ops::cuda
