// Routing followed by the contiguous expert layout as one op: the same outputs as route (or
// route_hash) and then build_moe_layout. On CUDA the decode sizes (T <= 32, E <= 512, k <= 32)
// take one kernel launch instead of five (route, two memsets, count, assign), and their layout
// rows come in the CPU reference's (token, slot) order; larger sizes take the separate kernels.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/ops/moe/routing.h"

namespace dsa::ops {

// logits [T][E] f32; bias [E] f32 or undefined (score routing); token_ids [T] i32 and tid2eid
// [V][k] i32 both defined for hash routing (then bias is ignored), else both undefined.
// topk_ids/topk_weights [T][k]; layout from make_moe_layout(T, k, E, ...) on the same device.
void route_and_layout(const Tensor& logits, const Tensor& bias, const Tensor& token_ids, const Tensor& tid2eid,
                      Tensor& topk_ids, Tensor& topk_weights, const RouterParams& p, MoeLayout& layout);

}  // namespace dsa::ops
