// Element access for the model ops' CPU references: load any supported activation dtype as
// float, store float back with the dtype's rounding (bf16: round-to-nearest-even, the same
// conversion the CUDA kernels use, from dsa/core/dtype_conv.h). The model ops take F32 or BF16
// activations; everything is computed in float/double and rounded once when stored.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsa/core/dtype.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"

namespace dsa::ops {

inline bool is_activation_dtype(DType t) { return t == DType::F32 || t == DType::BF16; }

inline void check_activation_dtype(std::string_view what, DType t) {
  DSA_CHECK(is_activation_dtype(t), "{}: dtype {} not supported (expected f32 or bf16)", what, dtype_name(t));
}

inline float load_f(const void* base, DType t, int64_t i) {
  if (t == DType::BF16) return bf16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

inline void store_f(void* base, DType t, int64_t i, float v) {
  if (t == DType::BF16)
    static_cast<uint16_t*>(base)[i] = f32_to_bf16_bits(v);
  else
    static_cast<float*>(base)[i] = v;
}

}  // namespace dsa::ops
