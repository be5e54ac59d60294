// Small device helpers shared by the dsa/formats kernels.
#pragma once
#include <cuda_runtime.h>

#include "dsa/core/cuda_stream.h"

#include <cstdint>

#include "dsa/core/dtype_conv.h"

namespace dsa::formats::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Max over the 32 lanes of a warp; every lane gets the result. Max is exact and order-independent,
// so this equals the CPU reference's sequential fmaxf (NaN operands are dropped by fmaxf on both).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Stores v as f32 or bf16 (round to nearest even) at element index i of out.
__device__ __forceinline__ void store_value(void* out, int64_t i, float v, bool bf16) {
  if (bf16)
    static_cast<uint16_t*>(out)[i] = f32_to_bf16_bits(v);
  else
    static_cast<float*>(out)[i] = v;
}

inline cudaStream_t as_stream(void* s) { return DSA_STREAM_OR_CURRENT(s); }  // nullptr: the current stream

// Grid size for `n` work items of `per_block` each, capped so that grid-stride loops take over.
inline unsigned grid_for(int64_t n, int64_t per_block, int64_t cap = 65535LL * 16) {
  int64_t g = (n + per_block - 1) / per_block;
  if (g < 1) g = 1;
  return static_cast<unsigned>(g < cap ? g : cap);
}

}  // namespace dsa::formats::cuda
