// Routing of one token by one warp, with the keys in registers (shared by route_kernel_warp in
// routing.cu and the fused route + layout kernel in route_layout.cu).
//
// Same decisions as the CPU reference (routing.cpp) by construction:
//  * scores and keys come from router_score/router_key (router_math.h), so a NaN key is -inf;
//  * a key is turned into an order-preserving u32 (+0 and -0 alike, -inf lowest but > 0) and
//    packed with ~index into a u64, so one integer max picks (key desc, index asc) -- the CPU's
//    comparator. Experts >= E have key code 0 and chosen ones count as 0, below every real key
//    (the code of -inf is 0x007FFFFF);
//  * weights: the chosen scores summed in slot order on every lane, router_weight per slot.
// Expert e lives in lane e % 32, register e / 32 (J registers per lane: E <= 32 * J). Each of the
// k rounds is one 5-step shuffle max of the lanes' current bests; only the winning lane rescans
// its J keys. No shared memory, no block barriers. J <= 32.
#pragma once
#include <cstdint>

#include "dsa/ops/moe/router_math.h"

namespace dsa::ops::cuda::rw {

__device__ __forceinline__ uint32_t key_ord(float k) {
  const uint32_t u = k == 0.f ? 0u : __float_as_uint(k);  // -0 == +0 as floats: one code (tie by index)
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Best (key, -index) of the lane's keys not yet taken (bit j of `taken`: register j chosen).
template <int J>
__device__ __forceinline__ uint64_t lane_best(const uint32_t (&ord)[J], uint32_t taken, int lane) {
  uint64_t b = 0;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const uint64_t c = (taken >> j) & 1u ? 0ull
                                         : (static_cast<uint64_t>(ord[j]) << 32) | static_cast<uint32_t>(~(lane + 32 * j));
    b = c > b ? c : b;
  }
  return b;
}

// Routes token row `lg` (E logits). Lane i < k gets slot i: its expert (or -1) and its weight.
// hash: experts from `hash_row` (k entries; nullptr = token outside the table) instead of top-k.
template <int J>
__device__ __forceinline__ void route_token(const float* lg, const float* bias, int E, int k, ScoreFunc f,
                                            float scaling, bool hash, const int32_t* hash_row, int lane, int& id,
                                            float& w) {
  id = -1;
  if (hash) {
    if (lane < k && hash_row) {
      const int32_t e = hash_row[lane];
      id = (e >= 0 && e < E) ? e : -1;
    }
  } else {
    uint32_t ord[J];
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int e = lane + 32 * j;
      ord[j] = e < E ? key_ord(router_key(router_score(lg[e], f), bias ? bias[e] : 0.f)) : 0u;
    }
    uint32_t taken = 0;  // a bit mask, not a store into ord[]: keeps ord[] in registers
    uint64_t mine = lane_best<J>(ord, taken, lane);
    for (int i = 0; i < k; ++i) {
      uint64_t b = mine;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const uint64_t o = __shfl_xor_sync(0xFFFFFFFFu, b, off);
        b = o > b ? o : b;
      }
      const int e = static_cast<int>(~static_cast<uint32_t>(b));  // k <= E: always a real expert
      if (lane == i) id = e;
      if ((e & 31) == lane) {
        taken |= 1u << (e >> 5);
        mine = lane_best<J>(ord, taken, lane);
      }
    }
  }
  // The score of the lane's own slot, recomputed from its logit (router_score is a pure function:
  // the same value the keys were built from).
  const float s = (lane < k && id >= 0) ? router_score(lg[id], f) : 0.f;
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += __shfl_sync(0xFFFFFFFFu, s, i);
  w = id >= 0 ? router_weight(s, sum, scaling) : 0.f;
}

}  // namespace dsa::ops::cuda::rw
