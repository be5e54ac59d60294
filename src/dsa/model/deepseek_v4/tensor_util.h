// Small host-side helper of the DeepSeek-V4 forward (tensor math lives in ops/tensor/tensor_ops.h).
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::model::v4 {

// Host vector of an integer tensor (i32 or i64, any device).
std::vector<int64_t> to_host_i64(const Tensor& t);

}  // namespace dsa::model::v4
