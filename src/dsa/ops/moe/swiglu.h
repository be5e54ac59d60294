// SwiGLU with the DeepSeek-V4 clamps: out[r][i] = silu(min(g, L)) * clamp(u, -L, L) where
// g = gu[r][i], u = gu[r][I + i] (gate half first). L = 0 means no clamp (GLM-5.1).
// gu [rows][2I] bf16, out [rows][I] bf16; computed in fp32.
#pragma once
#include <cmath>

#include "dsa/core/tensor.h"

namespace dsa::ops {

inline float swiglu_value(float g, float u, float limit) {
  if (limit > 0.f) {
    g = std::fmin(g, limit);
    u = std::fmax(std::fmin(u, limit), -limit);
  }
  return g / (1.f + std::exp(-g)) * u;
}

void swiglu(const Tensor& gu, Tensor& out, float limit);

}  // namespace dsa::ops
