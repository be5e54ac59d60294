// Activation quantization per 1x128 block (power-of-two scale, e4m3 values) and the weight-scale
// relayout used by the cuBLASLt path.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include "dsa/ops/linear/act_quant.h"
#include "dsa/ops/linear/cuda/kernels.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// One warp per 128-value block, 4 values per lane, amax by warp shuffle.
// Launch: ceil(blocks / 8) x 256.
__global__ void act_quant_kernel(const __nv_bfloat16* x, int64_t T, int64_t K, uint8_t* q, float* scales, int mn_major,
                                 __nv_bfloat16* deq) {
  pdl::entry();
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

// One thread per scale.
__global__ void weight_scale_kernel(const void* in, int f32, int64_t NB, int64_t KB, int layout, int64_t ld, float* out) {
  pdl::entry();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= NB * KB) return;
  const int64_t nb = i / KB, kb = i % KB;
  const float s = f32 ? static_cast<const float*>(in)[i] : ue8m0_to_f32(static_cast<const uint8_t*>(in)[i]);
  out[layout == 0 ? i : kb * ld + nb] = s;
}

}  // namespace

void launch_act_quant(const void* x, int64_t T, int64_t K, uint8_t* q, float* scales, bool mn_major, void* deq) {
  const int64_t blocks = T * (K / 128);
  if (blocks == 0) return;
  pdl::launch(act_quant_kernel, static_cast<unsigned>((blocks + 7) / 8), 256, 0, DSA_CURRENT_STREAM,
              static_cast<const __nv_bfloat16*>(x), T, K, q, scales, mn_major ? 1 : 0,
              static_cast<__nv_bfloat16*>(deq));
}

void launch_weight_scales(const void* in, bool in_f32, int64_t NB, int64_t KB, int layout, int64_t ld, float* out) {
  if (NB * KB == 0) return;
  pdl::launch(weight_scale_kernel, static_cast<unsigned>((NB * KB + 255) / 256), 256, 0, DSA_CURRENT_STREAM, in,
              in_f32 ? 1 : 0, NB, KB, layout, ld, out);
}

}  // namespace dsa::ops::cuda
