// Small tensor helpers of the DeepSeek-V4 forward: dtype conversion between the f32 residual path
// and the bf16 inputs of the linear ops, and host-side conversions of index tensors.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::model::v4 {

// Contiguous copy of x (f32 or bf16) in dtype `to` (f32 or bf16), rounding once.
Tensor cast(const Tensor& x, DType to);
// In-place float add: acc[i] += x[i] (same shape, f32 acc; x f32 or bf16).
void add_into(const Tensor& acc, const Tensor& x);
// Host vector of an integer tensor (i32 or i64).
std::vector<int64_t> to_host_i64(const Tensor& t);

}  // namespace dsa::model::v4
