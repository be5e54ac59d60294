// Tensor-level CUDA paths of the MoE ops (cuda_ops.cpp; only in CUDA builds). Callers validate
// first; these unpack tensors, launch (cuda/kernels.h) and turn launch errors into dsa::Error.
#pragma once
#include "dsa/ops/moe/expert_gemm.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/ops/moe/routing.h"

namespace dsa::ops::cuda {

void route(const Tensor& logits, const Tensor& bias, const Tensor* token_ids, const Tensor* tid2eid,
           Tensor& topk_ids, Tensor& topk_weights, const RouterParams& p);
void router_logits(const Tensor& x, const Tensor& gate, Tensor& logits);
void build_moe_layout(const Tensor& topk_ids, MoeLayout& layout);
void moe_permute(const Tensor& x, const MoeLayout& layout, Tensor& x_perm);
void moe_combine(const Tensor& y, const MoeLayout& layout, const Tensor& topk_weights, const Tensor& shared,
                 Tensor& out);
void swiglu(const Tensor& gu, Tensor& out, float limit);
// Grouped (and plain) expert GEMM; defined in expert_gemm_cuda.cpp beside the dense split-K path.
void expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w,
                 Tensor& out, const ExpertGemmParams& p);

}  // namespace dsa::ops::cuda
