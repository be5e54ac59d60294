// The rotation of one interleaved RoPE pair on the device, shared by rope.cu and the fused
// norm + RoPE kernels (ops/norm/norm_rope.cu) so that both round identically: the angle is the
// fp32 product float(pos) * inv_freq without FMA contraction (__fmul_rn, as the CPU reference forms
// it), sincosf at full precision (no fast math), and the rotation written with explicit rounding
// intrinsics (y0 = fma(x0, c, -(x1 s)), y1 = fma(x1, c, x0 s)), so the compiler cannot contract the
// two copies differently.
#pragma once
#include <cstdint>

namespace dsa::ops::cuda {

__device__ __forceinline__ void rope_rotate_pair(float x0, float x1, int64_t pos, float inv_freq, float attention_factor,
                                                 bool inverse, float& y0, float& y1) {
  const float angle = __fmul_rn(static_cast<float>(pos), inv_freq);
  float s, c;
  sincosf(angle, &s, &c);
  c = __fmul_rn(c, attention_factor);
  s = __fmul_rn(s, attention_factor);
  if (inverse) s = -s;
  y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
  y1 = __fmaf_rn(x1, c, __fmul_rn(x0, s));
}

}  // namespace dsa::ops::cuda
