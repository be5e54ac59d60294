// Device side of random_fill.h: one thread per element, grid-stride. Same hash as the host.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include <cstdint>

#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {
__device__ uint32_t mix(uint64_t i, uint64_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x >> 16);
}
__global__ void fill_kernel(void* p, int64_t n, int kind, uint64_t seed, float lo, float hi, int flag) {
  pdl::entry();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(i, seed) & 0xFFFFFF) / 16777216.f;
    if (kind == 0) {
      uint8_t b = static_cast<uint8_t>(static_cast<int>(lo) + static_cast<int>(u * (hi - lo + 1)));
      if (flag && (b & 0x7F) == 0x7F) b -= 1;
      static_cast<uint8_t*>(p)[i] = b;
    } else if (kind == 1) {
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(lo + u * (hi - lo));
    } else {
      static_cast<float*>(p)[i] = lo + u * (hi - lo);
    }
  }
}
}  // namespace

void launch_random_fill(void* p, int64_t n, int kind, uint64_t seed, float lo, float hi, int flag) {
  if (n <= 0) return;
  pdl::launch(fill_kernel, 4096, 256, 0, DSA_CURRENT_STREAM, p, n, kind, seed, lo, hi, flag);
}

}  // namespace dsa::ops::cuda
