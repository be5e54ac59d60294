// Groups of 4 consecutive f32/bf16 elements for the latency-bound row kernels (norm, mHC): one
// 16-byte (f32) or 8-byte (bf16) access per group when the caller has checked alignment
// (`vec`: base and every group start aligned to 4 elements and the row length a multiple of 4),
// otherwise 4 scalar accesses, each bounds-checked against `n` (elements past n read as 0 and are
// not written). Same bf16 rounding as cuda_elem.cuh.
#pragma once
#include <cstdint>

#include "dsa/ops/norm/cuda_elem.cuh"

namespace dsa::ops::cuda {

struct F4 {
  float v[4];
};

// Elements [i, i+4) of base (i a multiple of 4), as floats.
__device__ __forceinline__ F4 ld4(const void* base, DType t, int64_t i, int64_t n, bool vec) {
  F4 r;
  if (vec) {
    if (t == DType::BF16) {
      const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + i);
      r.v[0] = f32_from_bits(u.x << 16);
      r.v[1] = f32_from_bits(u.x & 0xffff0000u);
      r.v[2] = f32_from_bits(u.y << 16);
      r.v[3] = f32_from_bits(u.y & 0xffff0000u);
    } else {
      const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
      r.v[0] = f.x, r.v[1] = f.y, r.v[2] = f.z, r.v[3] = f.w;
    }
    return r;
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) r.v[u] = i + u < n ? ld(base, t, i + u) : 0.f;
  return r;
}

__device__ __forceinline__ void st4(void* base, DType t, int64_t i, int64_t n, bool vec, const F4& r) {
  if (vec) {
    if (t == DType::BF16) {
      uint2 u;
      u.x = static_cast<uint32_t>(f32_to_bf16_bits(r.v[0])) | (static_cast<uint32_t>(f32_to_bf16_bits(r.v[1])) << 16);
      u.y = static_cast<uint32_t>(f32_to_bf16_bits(r.v[2])) | (static_cast<uint32_t>(f32_to_bf16_bits(r.v[3])) << 16);
      *reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + i) = u;
    } else {
      *reinterpret_cast<float4*>(static_cast<float*>(base) + i) = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
    }
    return;
  }
#pragma unroll
  for (int u = 0; u < 4; ++u)
    if (i + u < n) st(base, t, i + u, r.v[u]);
}

// Host side: may a tensor at `p` with rows `row_stride` elements apart use 4-element groups?
inline bool vec4_ok(const void* p, DType t, int64_t cols, int64_t row_stride) {
  const uintptr_t bytes = (t == DType::BF16 ? 2 : 4) * 4;
  return p == nullptr || (reinterpret_cast<uintptr_t>(p) % bytes == 0 && cols % 4 == 0 && row_stride % 4 == 0);
}

}  // namespace dsa::ops::cuda
