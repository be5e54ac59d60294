// Activation quantization rule shared by the CPU reference and the CUDA kernel: one power-of-two
// (UE8M0) scale per 1x128 block, the smallest with amax / scale <= 448 (e4m3 max); an all-zero
// block gets scale 1.
#pragma once
#include <cmath>

#include "dsa/core/dtype_conv.h"

namespace dsa::ops {

DSA_HD float act_scale_from_amax(float amax) {
  return amax > 0.f ? round_scale_up_pow2(amax / kE4M3Max) : 1.f;
}

inline float act_block_scale(const float* v, int n) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(v[i]));
  return act_scale_from_amax(amax);
}

}  // namespace dsa::ops
