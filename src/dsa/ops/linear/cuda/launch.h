// CUDA entry points of the dense linear layers (cuBLASLt and the activation quantizer).
#pragma once
#include "dsa/ops/linear/linear.h"

namespace dsa::ops::cuda {

void linear_bf16(const Tensor& x, const Tensor& w, Tensor& out);
void linear_fp8_block_cublaslt(const Tensor& x, const Fp8BlockWeight& w, Tensor& out);
// Per 1x128 block: q (e4m3 [T][K]) and scales (f32, layout given by scale_mn_major: [K/128][T]
// when true, else [T][K/128]) and/or the fake-quantized bf16 copy `deq`. Null outputs are skipped.
void act_quant_fp8(const Tensor& x, Tensor* q, Tensor* scales, Tensor* deq, bool scale_mn_major = true);

}  // namespace dsa::ops::cuda
