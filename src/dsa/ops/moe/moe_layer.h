// A full MoE layer: router logits -> routing (score or hash) -> contiguous layout -> gate/up
// grouped GEMM with fused SwiGLU (gather fused) -> down grouped GEMM -> weighted combine, plus
// the shared expert (dense GEMMs through the same kernels) added in the combine. On CUDA the
// shared expert runs on a second stream beside the router, routing and routed GEMMs (at decode
// the routed GEMMs leave SMs idle: ~one CTA per used expert and column block), joined before
// the combine (MoeLayerParams::shared_on_side_stream). Same kernels, same results.
//   out[t] = shared(x[t]) + sum_s w[t][s] * down_e(swiglu(gate_up_e(x[t])))
// Intermediates are bf16 (the SwiGLU output and each expert's down output), sums in fp32.
#pragma once
#include <memory>

#include "dsa/core/cuda_stream.h"
#include "dsa/core/tensor.h"
#include "dsa/ops/moe/expert_gemm.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/ops/moe/routing.h"

namespace dsa::ops {

struct MoeLayerWeights {
  Tensor gate;          // [E][H] f32 or bf16
  Tensor gate_bias;     // [E] f32 or undefined (selection bias / e_score_correction_bias)
  Tensor tid2eid;       // [V][k] i32 for hash layers, else undefined
  ExpertWeights w13;    // [E][2I][H]: gate rows then up rows
  ExpertWeights w2;     // [E][H][I]
  ExpertWeights shared_w13;  // [1][2Is][H] or undefined weight (no shared expert)
  ExpertWeights shared_w2;   // [1][H][Is]
};

struct MoeLayerParams {
  RouterParams router;
  float swiglu_limit = 10.f;  // DeepSeek-V4: 10; GLM-5.1: 0 (no clamp)
  int64_t alignment = 64;
  int tactic = -1;            // passed to the expert GEMMs; -1 on CUDA: the installed tuning's
                              // choice per GEMM (ops/tactics/tactic_chooser.h), else the default
  // Expert parallelism: w13 / w2 hold the routed experts [expert_base, expert_base + E_local) of
  // the gate's E. Routing is over all E (the same choice on every rank); only this part's slots
  // are computed, so `out` is this part's share of the routed sum plus the shared expert (give
  // the shared expert to one part, or a slice of it to each), and the parts add up to the layer.
  int64_t expert_base = 0;
  // CUDA: the shared expert on the workspace's side stream, beside the routed part (the
  // environment's DSA_MOE_OVERLAP=0 turns it off everywhere). Results are the same either way.
  bool shared_on_side_stream = true;
};

// Scratch buffers, grown on demand and reused across calls (keeps allocation out of the hot path).
struct MoeWorkspace {
  Tensor logits, topk_ids, topk_weights, act, y, shared_act, shared_out;
  MoeLayout layout;
  // CUDA: the branch the shared expert runs on beside the routing and the routed experts
  // (created at the first CUDA call, outside any graph capture: warm-up runs eagerly first).
  std::shared_ptr<cuda_stream::SideStream> side;
};

// x [T][H] bf16; token_ids [T] i32 (needed for hash layers, else may be undefined); out [T][H] bf16.
void moe_layer(const Tensor& x, const Tensor& token_ids, const MoeLayerWeights& w, const MoeLayerParams& p,
               Tensor& out, MoeWorkspace& ws);

}  // namespace dsa::ops
