// Log-sum-exp merge of the split partials of the sparse-MLA decode kernel.
//
// One CTA of 128 threads per (token, head); each thread owns 4 of the 512 output columns.
// Split s contributed o_s (already divided by its own softmax sum) and lse_s (natural log,
// -inf when it saw no usable key). lse = log sum_s e^{lse_s}; o = sum_s e^{lse_s - lse} o_s,
// then the sink enters the denominator: o /= 1 + e^{sink - lse}. No usable key at all:
// o = 0, lse = -inf.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "dsa/core/cuda_stream.h"

#include "dsa/ops/sparse_mla/cuda/portable/kernel_args.h"

namespace dsa::ops::sparse_mla_cuda {
namespace {

__global__ void __launch_bounds__(128) sparse_mla_combine_kernel(const float* __restrict__ o_part,
                                                                 const float* __restrict__ lse_part,
                                                                 const float* __restrict__ sink, int H, int splits,
                                                                 uint16_t* __restrict__ o, float* __restrict__ lse) {
  pdl::entry();
  const int64_t th = blockIdx.x;  // t * H + h
  const float* lp = lse_part + th * splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, lp[s]);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float out_lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) sum += expf(lp[s] - mx);
    out_lse = mx + logf(sum);
    // Loads of kBatch splits are issued before any of them is used: at decode there are only
    // T * H CTAs (64 at T = 1), so one dependent load per split would leave the kernel waiting
    // on memory latency split after split. The sum keeps the split order.
    constexpr int kBatch = 8;
    const float4* op = reinterpret_cast<const float4*>(o_part + th * splits * 512) + threadIdx.x;
    for (int s0 = 0; s0 < splits; s0 += kBatch) {
      float4 v[kBatch];
      bool use[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int s = s0 + j;
        use[j] = s < splits && lp[s] != -INFINITY;  // a split with no usable key adds nothing
        if (use[j]) v[j] = op[static_cast<int64_t>(s) * 128];
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (!use[j]) continue;
        const float w = expf(lp[s0 + j] - out_lse);
        acc.x += w * v[j].x;
        acc.y += w * v[j].y;
        acc.z += w * v[j].z;
        acc.w += w * v[j].w;
      }
    }
    if (sink) {
      const float f = 1.f / (1.f + expf(sink[th % H] - out_lse));
      acc.x *= f;
      acc.y *= f;
      acc.z *= f;
      acc.w *= f;
    }
  }
  __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
  uint2 packed = make_uint2(*reinterpret_cast<uint32_t*>(&lo), *reinterpret_cast<uint32_t*>(&hi));
  reinterpret_cast<uint2*>(o + th * 512)[threadIdx.x] = packed;
  if (threadIdx.x == 0) lse[th] = out_lse;
}

}  // namespace

void launch_combine(const float* o_part, const float* lse_part, const float* sink, int T, int H, int splits,
                    uint16_t* o, float* lse, void* stream) {
  const int64_t blocks = static_cast<int64_t>(T) * H;
  pdl::launch(sparse_mla_combine_kernel, static_cast<unsigned>(blocks), 128, 0, DSA_STREAM_OR_CURRENT(stream), o_part,
              lse_part, sink, H, splits, o, lse);
}

}  // namespace dsa::ops::sparse_mla_cuda
