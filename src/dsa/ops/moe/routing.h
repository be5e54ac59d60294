// MoE router: scores from gate logits, top-k expert choice with a selection bias, and the
// normalised routing weights (docs/model-reference.md §2 and §3).
//   DeepSeek-V4: s = sqrt(softplus(logit)); experts = top-k of s + bias; hash layers take the
//                experts from tid2eid[token_id] instead (no bias).
//   GLM-5.1:     s = sigmoid(logit); experts = top-k of s + e_score_correction_bias (one group).
//   Both:        w = s[chosen] / sum(s[chosen]) * routed_scaling.
// Ties in s + bias go to the lower expert index (CPU and CUDA agree). A NaN key ranks lowest, but
// its weight stays NaN so that the layer output shows it.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/ops/moe/router_types.h"

namespace dsa::ops {

struct RouterParams {
  ScoreFunc score = ScoreFunc::SqrtSoftplus;
  int topk = 6;
  float routed_scaling = 1.5f;
};

// Checks shapes/dtypes of one routing call; throws dsa::Error naming the field.
//   logits [T][E] f32; bias [E] f32 or undefined; topk_ids [T][k] i32; topk_weights [T][k] f32.
void validate_route(const Tensor& logits, const Tensor& bias, const Tensor& topk_ids,
                    const Tensor& topk_weights, const RouterParams& p);

// The extra checks of hash routing: token_ids [T] i32, tid2eid contiguous i32 [V][k], same device.
void validate_route_hash(const Tensor& logits, const Tensor& token_ids, const Tensor& tid2eid, const RouterParams& p);

// Score-based routing (CPU reference or CUDA, by the tensors' device).
void route(const Tensor& logits, const Tensor& bias, Tensor& topk_ids, Tensor& topk_weights,
           const RouterParams& p);

// Hash routing: experts = tid2eid[token_ids[t]] ([V][k] i32), weights from the scores of those
// experts. A token id outside [0, V) or a table entry outside [0, E) yields expert -1 (dropped)
// with weight 0; the remaining weights are still normalised.
void route_hash(const Tensor& logits, const Tensor& token_ids, const Tensor& tid2eid,
                Tensor& topk_ids, Tensor& topk_weights, const RouterParams& p);

// Router logits in fp32: logits[t][e] = sum_h x[t][h] * gate[e][h]; x bf16 [T][H], gate f32 or
// bf16 [E][H], logits f32 [T][E].
void router_logits(const Tensor& x, const Tensor& gate, Tensor& logits);

}  // namespace dsa::ops
