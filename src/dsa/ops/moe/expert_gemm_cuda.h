// CUDA path of dense (single-expert, no m_indices) expert GEMM calls: FP8 linears and shared
// experts. Defined with cuda_ops.h's grouped expert_gemm in expert_gemm_cuda.cpp (one builder of
// the kernel arguments for both), which also owns the split-K workspace. Callers validate first
// (validate_expert_gemm).
#pragma once
#include "dsa/ops/moe/expert_gemm.h"

namespace dsa::ops::cuda {

// out: bf16 or f32 [rows][N or N/2]. Splits K over extra CTAs per expert_gemm_planned_split.
void expert_gemm_dense(const Tensor& a, const Tensor& a_rows, const ExpertWeights& w, Tensor& out,
                       const ExpertGemmParams& p);

}  // namespace dsa::ops::cuda
