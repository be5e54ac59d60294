// Tensor-level CUDA paths of the dense linear layers (host code, CUDA builds only).
#pragma once
#include "dsa/ops/linear/linear.h"

namespace dsa::ops::cuda {

void linear_bf16(const Tensor& x, const Tensor& w, Tensor& out);
// Returns false (and does nothing) when cuBLASLt has no algorithm for this shape.
bool linear_fp8_block_cublaslt(const Tensor& x, const Fp8BlockWeight& w, Tensor& out);

}  // namespace dsa::ops::cuda
