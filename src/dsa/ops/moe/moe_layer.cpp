// The MoE layer as straight-line code over the MoE ops; runs wherever the tensors live.
#include "dsa/ops/moe/moe_layer.h"

#include "dsa/core/cuda_memory.h"
#include "dsa/ops/moe/route_layout.h"
#include "dsa/ops/tactics/tactic_chooser.h"

namespace dsa::ops {

// Reallocates t unless it already has this shape, dtype and device. The workspace lives across
// steps, so it never comes from a step arena.
static void ensure(Tensor& t, const Shape& shape, DType dtype, Device dev) {
  if (t.defined() && t.shape() == shape && t.dtype() == dtype && t.device() == dev) return;
  cuda_memory::PersistentScope persistent;
  t = Tensor::empty(shape, dtype, dev);
}

void moe_layer(const Tensor& x, const Tensor& token_ids, const MoeLayerWeights& w, const MoeLayerParams& p,
               Tensor& out, MoeWorkspace& ws) {
  DSA_CHECK(x.defined() && x.dim() == 2 && x.dtype() == DType::BF16 && x.is_contiguous(),
            "moe_layer: x must be contiguous bf16 [T][H], got {}", x.defined() ? x.str() : "undefined");
  const Device dev = x.device();
  const int64_t T = x.size(0), H = x.size(1);
  w.w13.validate("moe_layer: w13");
  w.w2.validate("moe_layer: w2");
  const int64_t E = w.w13.experts(), I2 = w.w13.n();
  DSA_CHECK(w.w13.k() == H, "moe_layer: w13 K={} != hidden {}", w.w13.k(), H);
  DSA_CHECK(w.w2.experts() == E && w.w2.n() == H && w.w2.k() * 2 == I2,
            "moe_layer: w2 must be [{}][{}][{}], got E={} N={} K={}", E, H, I2 / 2, w.w2.experts(), w.w2.n(), w.w2.k());
  DSA_CHECK(w.gate.defined() && w.gate.dim() == 2 && w.gate.size(0) == E,
            "moe_layer: gate must be [{}][{}], got {}", E, H, w.gate.defined() ? w.gate.str() : "undefined");
  const bool hash = w.tid2eid.defined();
  DSA_CHECK(!hash || token_ids.defined(), "moe_layer: hash routing (tid2eid given) needs token_ids");
  const int64_t k = p.router.topk;

  ensure(ws.logits, {T, E}, DType::F32, dev);
  ensure(ws.topk_ids, {T, k}, DType::I32, dev);
  ensure(ws.topk_weights, {T, k}, DType::F32, dev);
  MoeLayout& l = ws.layout;
  if (!l.m_indices.defined() || l.tokens != T || l.topk != k || l.experts != E || l.alignment != p.alignment ||
      l.m_indices.device() != dev) {
    cuda_memory::PersistentScope persistent;
    l = make_moe_layout(T, k, E, p.alignment, dev);
  }
  router_logits(x, w.gate, ws.logits);
  // Routing (score or hash) and the expert layout: one launch on CUDA for decode sizes.
  route_and_layout(ws.logits, w.gate_bias, hash ? token_ids : Tensor(), w.tid2eid, ws.topk_ids, ws.topk_weights,
                   p.router, l);

  ExpertGemmParams gp;
  gp.tactic = p.tactic;
  gp.m_alignment = p.alignment;
  gp.rows_per_expert_hint = static_cast<double>(T) * static_cast<double>(k) / static_cast<double>(E);
  gp.fuse_swiglu = true;
  gp.swiglu_limit = p.swiglu_limit;
  ExpertGemmParams dp = gp;
  dp.fuse_swiglu = false;
  if (p.tactic < 0 && dev.is_cuda()) {
    // Default requested: the tuned tile per GEMM when start-up installed a tuning table
    // (ops/tactics/tactic_chooser.h), else the op's heuristic.
    ExpertGemmShape s{w.w13.format, E, k, I2, H, true, p.alignment, T};
    gp.tactic = choose_expert_gemm_tactic(s);
    s = ExpertGemmShape{w.w2.format, E, k, H, I2 / 2, false, p.alignment, T};
    dp.tactic = choose_expert_gemm_tactic(s);
  }
  ensure(ws.act, {l.rows_cap, I2 / 2}, DType::BF16, dev);
  expert_gemm(x, l.src_token, l.m_indices, w.w13, ws.act, gp);  // gather + gate/up + SwiGLU
  ensure(ws.y, {l.rows_cap, H}, DType::BF16, dev);
  expert_gemm(ws.act, Tensor(), l.m_indices, w.w2, ws.y, dp);

  Tensor shared;
  if (w.shared_w13.weight.defined()) {
    w.shared_w13.validate("moe_layer: shared_w13");
    w.shared_w2.validate("moe_layer: shared_w2");
    const int64_t Is2 = w.shared_w13.n();
    ensure(ws.shared_act, {T, Is2 / 2}, DType::BF16, dev);
    ensure(ws.shared_out, {T, H}, DType::BF16, dev);
    ExpertGemmParams sp;
    sp.fuse_swiglu = true;
    sp.swiglu_limit = p.swiglu_limit;
    expert_gemm(x, Tensor(), Tensor(), w.shared_w13, ws.shared_act, sp);
    expert_gemm(ws.shared_act, Tensor(), Tensor(), w.shared_w2, ws.shared_out, ExpertGemmParams{});
    shared = ws.shared_out;
  }
  out.check("moe_layer: out", DType::BF16, {T, H});
  moe_combine(ws.y, l, ws.topk_weights, shared, out);
}

}  // namespace dsa::ops
