// Tensor-level CUDA paths of the MoE ops: unpack, choose the tile, launch, check.
#include "dsa/ops/moe/cuda_ops.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/moe/cuda/kernels.h"

namespace dsa::ops::cuda {

void route(const Tensor& logits, const Tensor& bias, const Tensor* token_ids, const Tensor* tid2eid, Tensor& topk_ids,
           Tensor& topk_weights, const RouterParams& p) {
  launch_route(logits.data<float>(), bias.defined() ? bias.data<float>() : nullptr,
               token_ids ? token_ids->data<int32_t>() : nullptr, tid2eid ? tid2eid->data<int32_t>() : nullptr,
               tid2eid ? tid2eid->size(0) : 0, topk_ids.data<int32_t>(), topk_weights.data<float>(),
               static_cast<int>(logits.size(0)), static_cast<int>(logits.size(1)), p.topk, p.score, p.routed_scaling);
  cuda_launch::check_launch("moe route_kernel");
}

void router_logits(const Tensor& x, const Tensor& gate, Tensor& logits) {
  launch_router_logits(x.raw(), gate.raw(), gate.dtype() == DType::F32, logits.data<float>(),
                       static_cast<int>(x.size(0)), static_cast<int>(gate.size(0)), static_cast<int>(x.size(1)));
  cuda_launch::check_launch("moe router_logits_kernel");
}

void build_moe_layout(const Tensor& topk_ids, MoeLayout& l) {
  // Padding rows: expert -1, token -1 (0xFF bytes).
  DSA_CUDA_CHECK(cudaMemsetAsync(l.m_indices.raw(), 0xFF, l.m_indices.nbytes(), DSA_CURRENT_STREAM));
  DSA_CUDA_CHECK(cudaMemsetAsync(l.src_token.raw(), 0xFF, l.src_token.nbytes(), DSA_CURRENT_STREAM));
  launch_layout(topk_ids.data<int32_t>(), l.tokens * l.topk, static_cast<int>(l.topk), static_cast<int>(l.expert_base),
                static_cast<int>(l.experts),
                static_cast<int>(l.alignment), l.expert_counts.data<int32_t>(), l.expert_offsets.data<int32_t>(),
                l.cursor.data<int32_t>(), l.dst_row.data<int32_t>(), l.m_indices.data<int32_t>(),
                l.src_token.data<int32_t>());
  cuda_launch::check_launch("moe layout kernels");
}

void moe_permute(const Tensor& x, const MoeLayout& l, Tensor& x_perm) {
  const int64_t H = x.size(1);
  DSA_CHECK(H % 8 == 0, "moe_permute (CUDA): hidden {} must be a multiple of 8", H);
  launch_permute(x.raw(), l.src_token.data<int32_t>(), l.tokens, H, l.rows_cap, x_perm.raw());
  cuda_launch::check_launch("moe permute_kernel");
}

void moe_combine(const Tensor& y, const MoeLayout& l, const Tensor& w, const Tensor& shared, Tensor& out) {
  const int64_t H = y.size(1);
  DSA_CHECK(H % 8 == 0, "moe_combine (CUDA): hidden {} must be a multiple of 8", H);
  launch_combine(y.raw(), l.dst_row.data<int32_t>(), w.data<float>(), shared.defined() ? shared.raw() : nullptr,
                 out.raw(), l.tokens, static_cast<int>(l.topk), H, l.rows_cap);
  cuda_launch::check_launch("moe combine kernel");
}

void swiglu(const Tensor& gu, Tensor& out, float limit) {
  launch_swiglu(gu.raw(), out.raw(), gu.size(0), gu.size(1) / 2, limit);
  cuda_launch::check_launch("moe swiglu_kernel");
}

}  // namespace dsa::ops::cuda
#endif
