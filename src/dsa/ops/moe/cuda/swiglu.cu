// Clamped SwiGLU on bf16 [rows][2I] -> [rows][I] (fp32 math). Grid-stride, one element per thread.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include <algorithm>

#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {
__global__ void swiglu_kernel(const __nv_bfloat16* gu, __nv_bfloat16* out, int64_t rows, int64_t I, float limit) {
  pdl::entry();
  const int64_t n = rows * I;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / I, c = i % I;
    float g = __bfloat162float(gu[r * 2 * I + c]), u = __bfloat162float(gu[r * 2 * I + I + c]);
    if (limit > 0.f) {
      g = fminf(g, limit);
      u = fmaxf(fminf(u, limit), -limit);
    }
    out[i] = __float2bfloat16_rn(g / (1.f + expf(-g)) * u);
  }
}
}  // namespace

void launch_swiglu(const void* gu, void* out, int64_t rows, int64_t I, float limit) {
  if (rows * I == 0) return;
  const int64_t blocks = std::min<int64_t>((rows * I + 255) / 256, 65535);
  pdl::launch(swiglu_kernel, static_cast<unsigned>(blocks), 256, 0, DSA_CURRENT_STREAM,
              static_cast<const __nv_bfloat16*>(gu), static_cast<__nv_bfloat16*>(out), rows, I, limit);
}

}  // namespace dsa::ops::cuda
