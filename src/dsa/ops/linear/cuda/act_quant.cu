// Activation quantization per 1x128 block (power-of-two scale, e4m3 values). One warp per block,
// 4 values per lane, amax by warp shuffle. Launch: ceil(T*K/128 / 8) x 256.
#include <cuda_bf16.h>

#include "dsa/core/cuda_check.h"
#include "dsa/ops/linear/act_quant.h"
#include "dsa/ops/linear/cuda/launch.h"

namespace dsa::ops::cuda {
namespace {
__global__ void act_quant_kernel(const __nv_bfloat16* x, int64_t T, int64_t K, uint8_t* q, float* scales, int mn_major,
                                 __nv_bfloat16* deq) {
  const int64_t kb_n = K / 128;
  const int64_t blk = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (blk >= T * kb_n) return;
  const int64_t t = blk / kb_n, kb = blk % kb_n;
  const int64_t base = t * K + kb * 128 + lane * 4;
  float v[4], amax = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = __bfloat162float(x[base + i]);
    amax = fmaxf(amax, fabsf(v[i]));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  const float s = act_scale_from_amax(amax);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint8_t c = f32_to_e4m3(v[i] / s);
    if (q) q[base + i] = c;
    if (deq) deq[base + i] = __float2bfloat16_rn(e4m3_to_f32(c) * s);
  }
  if (scales && lane == 0) scales[mn_major ? kb * T + t : t * kb_n + kb] = s;
}
}  // namespace

void act_quant_fp8(const Tensor& x, Tensor* q, Tensor* scales, Tensor* deq, bool scale_mn_major) {
  const int64_t T = x.size(0), K = x.size(1);
  const int64_t blocks = T * (K / 128);
  if (blocks == 0) return;
  act_quant_kernel<<<static_cast<unsigned>((blocks + 7) / 8), 256>>>(
      static_cast<const __nv_bfloat16*>(x.raw()), T, K, q ? static_cast<uint8_t*>(q->raw()) : nullptr,
      scales ? scales->data<float>() : nullptr, scale_mn_major ? 1 : 0,
      deq ? static_cast<__nv_bfloat16*>(deq->raw()) : nullptr);
  DSA_CUDA_CHECK_LAUNCH();
}

}  // namespace dsa::ops::cuda
