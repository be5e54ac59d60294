// indexer_scores_paged on the GPU (indexer.h): scores[t][e] = sum_h w[t][h] * scale *
// relu(q[t][h] . k[e]) with k[e] read straight from the paged FP8 indexer cache of token t's
// request (no gathered copy of the keys), -inf where e is not visible or has no page.
// Grid (T, ceil(N / (32 * tiles_per_cta))), 256 threads (8 warps), tiles of 32 entries. Per
// tile the 256 threads load its 32 keys (4 KB) into shared memory once, coalesced, one 16-byte
// chunk each (the loads of the next tile are issued before this tile computes, so they are in
// flight during it; the first tile's go out before the q rows are staged). Then one entry per
// lane: the 32 lanes of every warp take the tile's 32 entries and the 8 warps split the heads
// (HPW = ceil(H / 8) each, padded with zero rows); each lane converts its entry's key from
// shared memory to registers (64 dims at a time, e4m3 -> f32) and streams the token's q rows
// as broadcast float4 shared loads: 4 FMAs per shared load, HPW independent accumulators. The
// 8 warps' partial scores are summed in fixed order (deterministic). The key scale is applied to
// the finished dot (relu(s * d) = s * relu(d) for s > 0): the same value as the CPU's
// dequantize-then-dot up to float rounding. (Before 2026-12-02 every warp read its lanes' keys
// from global memory itself, 8 warps x 32 scattered 128-byte rows per tile: ~0.9 ns per entry
// at T = 1 on the H200, 119 us for GLM-5.1's 131072 keys and 279 us for V4's 262144 at 1M.)
#include "dsa/core/pdl.cuh"
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "dsa/core/cuda_stream.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/ops/indexer/visible_entries.cuh"
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

// One tile's keys in shared memory: entry j's 128 key bytes at j * kKeyStride (16 bytes of
// padding per entry: lane j's 16-byte reads of its own entry then fall in distinct bank groups
// for lanes 0..7, 8..15, ..., i.e. no conflicts beyond the 4 wavefronts a 512-byte read needs).
constexpr int kKeyStride = kD + 16;
constexpr int kChunks = kD / 16;  // 16-byte chunks per key: kTile * kChunks = 256 = one per thread
static_assert(kTile * kChunks == kWarps * 32, "one 16-byte key chunk per thread and tile");

// Key bytes [half * 64, half * 64 + 64) of one entry in shared memory as floats (unscaled e4m3).
__device__ __forceinline__ void load_key_half(const uint8_t* key, float (&k)[kHalf]) {
#pragma unroll
  for (int v = 0; v < kHalf / 16; ++v) {
    const uint4 w = reinterpret_cast<const uint4*>(key)[v];
    e4m3x4_to_f32(w.x, k + v * 16);
    e4m3x4_to_f32(w.y, k + v * 16 + 4);
    e4m3x4_to_f32(w.z, k + v * 16 + 8);
    e4m3x4_to_f32(w.w, k + v * 16 + 12);
  }
}

// The 16-byte chunk `chunk` of the key at `key` (global memory); kVec16: 16-byte aligned (page
// sizes that are multiples of 4), else four 4-byte loads.
template <bool kVec16>
__device__ __forceinline__ uint4 load_chunk(const uint8_t* key, int chunk) {
  if constexpr (kVec16) {
    return reinterpret_cast<const uint4*>(key)[chunk];
  } else {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(key) + 4 * chunk;
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// A tile's loads, issued one tile ahead (in registers while the current tile computes): thread
// i fetches chunk i % 8 of entry i / 8 and, for i < 32, entry i's scale (0 for an entry without
// a key: not visible, no page, past the block table).
struct TileLoad {
  uint4 chunk;
  float scale;
  bool valid;
};

template <bool kVec16>
__device__ __forceinline__ TileLoad fetch_tile(const IndexerPagedScoreArgs& a, int64_t tile, bool row_ok, int32_t r,
                                               int64_t visible) {
  TileLoad l{make_uint4(0, 0, 0, 0), 0.f, false};
  const int j = threadIdx.x / kChunks, chunk = threadIdx.x % kChunks;
  const int owner = threadIdx.x;  // threads 0..31 also fetch entry threadIdx.x's scale
  auto slot_of = [&](int64_t e, int64_t& slot) {
    if (!row_ok || e >= visible || e / a.page_size >= a.blocks) return false;
    const int32_t page = a.block_table[r * a.blocks + e / a.page_size];
    if (page < 0 || page >= a.num_pages) return false;
    slot = static_cast<int64_t>(page) * a.page_size + e % a.page_size;
    return true;
  };
  int64_t slot = 0;
  if (slot_of(tile * kTile + j, slot)) l.chunk = load_chunk<kVec16>(a.cache + kv::indexer::key_offset(slot, a.page_size), chunk);
  if (owner < kTile && slot_of(tile * kTile + owner, slot)) {
    l.valid = true;
    l.scale = *reinterpret_cast<const float*>(a.cache + kv::indexer::scale_offset(slot, a.page_size));
  }
  return l;
}

template <int HPW, bool kVec16>
__global__ void __launch_bounds__(kWarps * 32) paged_score_kernel(const __grid_constant__ IndexerPagedScoreArgs a) {
  pdl::entry();
  extern __shared__ float4 smem4[];
  constexpr int kHeads = kWarps * HPW;  // padded head rows
  float* qs = reinterpret_cast<float*>(smem4);  // [kHeads][kD], rows >= H zero
  float* ws = qs + kHeads * kD;                 // [kHeads], scaled weights, zero past H
  float* red = ws + kHeads;                     // [kWarps][kTile]
  float* scale_s = red + kWarps * kTile;        // [kTile], 0 = no key
  uint8_t* keys_s = reinterpret_cast<uint8_t*>(scale_s + kTile);  // [kTile][kKeyStride] (16-byte aligned)
  const int64_t t = blockIdx.x;
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int32_t r = a.token_req[t];
  const bool row_ok = r >= 0 && r < a.num_requests;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * a.tiles_per_cta;
  const int64_t last = first + a.tiles_per_cta < (a.N + kTile - 1) / kTile ? first + a.tiles_per_cta : (a.N + kTile - 1) / kTile;
  // The first tile's loads go out before the q rows are staged: their latencies overlap.
  TileLoad next = fetch_tile<kVec16>(a, first, row_ok, r, visible);
  if (a.q_dtype == DType::F32 && a.H * kD % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0) {
    // 16-byte loads of the token's q rows (the staging of a short-context decode step is latency)
    const float4* q4 = reinterpret_cast<const float4*>(static_cast<const float*>(a.q) + t * a.H * kD);
    const int64_t n4 = a.H * kD / 4;
    for (int64_t i = threadIdx.x; i < kHeads * kD / 4; i += blockDim.x)
      smem4[i] = i < n4 ? q4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    for (int64_t i = threadIdx.x; i < kHeads * kD; i += blockDim.x)
      qs[i] = i < a.H * kD ? ld(a.q, a.q_dtype, t * a.H * kD + i) : 0.f;
  }
  for (int64_t h = threadIdx.x; h < kHeads; h += blockDim.x)
    ws[h] = h < a.H ? ld(a.weights, a.w_dtype, t * a.H + h) * a.scale : 0.f;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* qw = qs + warp * HPW * kD;  // this warp's head rows
  for (int64_t tile = first; tile < last; ++tile) {
    // 1. This tile's keys into shared memory (coalesced: the 256 threads cover its 4 KB), then
    //    the next tile's loads go out while this one computes.
    *reinterpret_cast<uint4*>(keys_s + (threadIdx.x / kChunks) * kKeyStride + (threadIdx.x % kChunks) * 16) = next.chunk;
    if (threadIdx.x < kTile) scale_s[threadIdx.x] = next.valid ? next.scale : 0.f;
    const bool valid_lane = threadIdx.x < kTile && next.valid;  // threads 0..31 = warp 0 = the writers below
    __syncthreads();
    if (tile + 1 < last) next = fetch_tile<kVec16>(a, tile + 1, row_ok, r, visible);
    // 2. Lane l scores entry l of the tile for this warp's heads.
    const uint8_t* key = keys_s + lane * kKeyStride;
    float dot[HPW];
#pragma unroll
    for (int j = 0; j < HPW; ++j) dot[j] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float k[kHalf];
      load_key_half(key + half * kHalf, k);
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
    const float scale = scale_s[lane];
    float part = 0.f;
#pragma unroll
    for (int j = 0; j < HPW; ++j) part = fmaf(ws[warp * HPW + j], fmaxf(dot[j] * scale, 0.f), part);
    red[warp * kTile + lane] = part;
    __syncthreads();
    const int64_t e = tile * kTile + lane;
    if (warp == 0 && e < a.N) {
      float total = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += red[w * kTile + lane];
      a.scores[t * a.N + e] = valid_lane ? total : -INFINITY;
    }
    __syncthreads();  // keys_s, scale_s and red are rewritten by the next tile
  }
}

template <int HPW>
void launch_paged_score(const IndexerPagedScoreArgs& a, dim3 grid) {
  const size_t smem = static_cast<size_t>(kWarps * HPW * kD + kWarps * HPW + kWarps * kTile + kTile) * sizeof(float) +
                     static_cast<size_t>(kTile) * kKeyStride;  // <= 39 KB
  const bool vec16 = a.page_size % 4 == 0 && reinterpret_cast<uintptr_t>(a.cache) % 16 == 0;
  if (vec16)
    pdl::launch(paged_score_kernel<HPW, true>, grid, kWarps * 32, smem, DSA_CURRENT_STREAM, a);
  else
    pdl::launch(paged_score_kernel<HPW, false>, grid, kWarps * 32, smem, DSA_CURRENT_STREAM, a);
}

}  // namespace

void indexer_scores_paged(const IndexerPagedScoreArgs& a) {
  if (a.T == 0 || a.N == 0) return;
  if (a.H < 1 || a.H > kIndexerPagedMaxHeads) cuda_launch::launch_error("indexer_scores_paged: heads outside 1..64");
  const int64_t tiles = (a.N + kTile - 1) / kTile;
  if (a.T > 0x7fffffffLL || tiles > 65535)
    cuda_launch::launch_error("indexer_scores_paged: grid exceeds the launch limits");
  // Tiles per CTA: one while the grid is small (a short decode step: spread the entries over
  // the SMs); otherwise enough for about 1024 CTAs (a few waves of the SMs, register-limited to
  // 2 CTAs each), up to 16, so that staging the token's q rows is paid once per up to 512
  // entries and each CTA pipelines its tiles' loads.
  IndexerPagedScoreArgs args = a;
  args.tiles_per_cta = std::clamp<int64_t>((a.T * tiles + 1023) / 1024, 1, 16);
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
