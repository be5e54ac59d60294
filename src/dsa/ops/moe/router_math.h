// Scalar router math shared by the CPU reference and the CUDA kernel, so both compute the same
// scores, keys and weights (up to the libm/CUDA ulp differences of expf/log1pf/sqrtf).
#pragma once
#include <cmath>

#include "dsa/core/dtype_conv.h"  // DSA_HD
#include "dsa/ops/moe/router_types.h"

namespace dsa::ops {

DSA_HD float router_score(float x, ScoreFunc f) {
  if (f == ScoreFunc::Sigmoid) return 1.f / (1.f + expf(-x));
  float sp = x > 20.f ? x : log1pf(expf(x));  // softplus with torch's threshold 20
  return sqrtf(sp);
}

// Selection key: s + bias with NaN mapped to -inf (a NaN never wins a slot).
DSA_HD float router_key(float s, float bias) {
  float k = s + bias;
  return k != k ? -INFINITY : k;
}

DSA_HD float router_weight(float s, float sum, float scaling) { return s / fmaxf(sum, 1e-20f) * scaling; }

}  // namespace dsa::ops
