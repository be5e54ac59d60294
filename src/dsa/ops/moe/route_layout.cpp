// route_and_layout: the fused CUDA launch where it applies, else route/route_hash + build_moe_layout.
#include "dsa/ops/moe/route_layout.h"

#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/moe/cuda/kernels.h"
#endif

namespace dsa::ops {

void route_and_layout(const Tensor& logits, const Tensor& bias, const Tensor& token_ids, const Tensor& tid2eid,
                      Tensor& topk_ids, Tensor& topk_weights, const RouterParams& p, MoeLayout& l) {
  const bool hash = tid2eid.defined();
  validate_route(logits, hash ? Tensor() : bias, topk_ids, topk_weights, p);
  if (hash) validate_route_hash(logits, token_ids, tid2eid, p);
  validate_moe_layout(topk_ids, l);
  DSA_CHECK(l.expert_base >= 0 && l.expert_base + l.experts <= logits.size(1),
            "route_and_layout: layout experts [{}, {}) outside the logits' {} experts", l.expert_base,
            l.expert_base + l.experts, logits.size(1));
#ifdef DSA_WITH_CUDA
  if (logits.device().is_cuda() && l.tokens >= 1) {
    cuda::RouteLayoutArgs a{};
    a.logits = logits.data<float>();
    a.bias = !hash && bias.defined() ? bias.data<float>() : nullptr;
    a.token_ids = hash ? token_ids.data<int32_t>() : nullptr;
    a.tid2eid = hash ? tid2eid.data<int32_t>() : nullptr;
    a.vocab = hash ? tid2eid.size(0) : 0;
    a.ids = topk_ids.data<int32_t>();
    a.wts = topk_weights.data<float>();
    a.T = l.tokens <= cuda::kFusedMaxTokens ? static_cast<int>(l.tokens) : cuda::kFusedMaxTokens + 1;
    a.E = static_cast<int>(logits.size(1));
    a.base = static_cast<int>(l.expert_base);
    a.EL = static_cast<int>(l.experts);
    a.k = p.topk;
    a.score = p.score;
    a.scaling = p.routed_scaling;
    a.align = static_cast<int>(l.alignment);
    a.rows_cap = l.rows_cap;
    a.nseg = moe_rows_upper_bound(l.tokens, l.topk, l.experts, l.alignment) / l.alignment;
    a.counts = l.expert_counts.data<int32_t>();
    a.offsets = l.expert_offsets.data<int32_t>();
    a.dst_row = l.dst_row.data<int32_t>();
    a.m_indices = l.m_indices.data<int32_t>();
    a.src_token = l.src_token.data<int32_t>();
    if (cuda::launch_route_layout(a)) {
      cuda_launch::check_launch("moe route_layout kernel");
      return;
    }
  }
#endif
  if (hash)
    route_hash(logits, token_ids, tid2eid, topk_ids, topk_weights, p);
  else
    route(logits, bias, topk_ids, topk_weights, p);
  build_moe_layout(topk_ids, l);
}

}  // namespace dsa::ops
