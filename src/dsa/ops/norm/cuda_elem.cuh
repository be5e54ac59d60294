// Device-side element access for the model-op kernels: f32/bf16 loads and stores chosen by a
// runtime dtype (uniform per launch, so the branch costs nothing measurable), with the same
// round-to-nearest-even bf16 conversion as the CPU reference (dsa/core/dtype_conv.h).
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"
#include "dsa/core/dtype_conv.h"

namespace dsa::ops::cuda {

__device__ __forceinline__ float ld(const void* base, DType t, int64_t i) {
  if (t == DType::BF16) return bf16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

__device__ __forceinline__ void st(void* base, DType t, int64_t i, float v) {
  if (t == DType::BF16)
    static_cast<uint16_t*>(base)[i] = f32_to_bf16_bits(v);
  else
    static_cast<float*>(base)[i] = v;
}

// Sum over the block of one float per thread; every thread gets the result. blockDim.x must be a
// multiple of 32 and <= 1024; `scratch` holds 32 floats. Ends with a barrier so that scratch can
// be reused by the next call.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? scratch[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  __syncthreads();
  return r;
}

}  // namespace dsa::ops::cuda
