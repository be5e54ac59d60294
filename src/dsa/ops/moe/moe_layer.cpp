// The MoE layer as straight-line code over the MoE ops; runs wherever the tensors live.
#include "dsa/ops/moe/moe_layer.h"

#include <algorithm>

#include "dsa/core/cuda_memory.h"
#include "dsa/ops/moe/route_layout.h"
#include "dsa/ops/tactics/tactic_chooser.h"

namespace dsa::ops {

// The workspace (moe_layer.h) holds flat capacity buffers that only grow; a call works on views
// of their first elements. Reallocating whenever the token count changed (as this did before)
// moved device memory between steps of different sizes, and every move invalidates the CUDA
// graphs of every step shape (engine/step_graphs.h): decode buckets of 1, 2, 4, 8 rows or a
// verification of N + 1 tokens beside MTP steps of 1 then never replayed. The capacity lives
// across steps, so it never comes from a step arena.
static Tensor view_of(Tensor& cap, const Shape& shape, DType dtype, Device dev) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (!cap.defined() || cap.dtype() != dtype || cap.device() != dev || cap.numel() < n) {
    cuda_memory::PersistentScope persistent;
    cap = Tensor::empty({std::max<int64_t>(n, 1)}, dtype, dev);
  }
  return cap.slice(0, 0, n).reshape(shape);
}

// The expert layout of T tokens as views of a capacity layout allocated for at least T tokens
// (same k, E, alignment and device); the views have exactly the shapes make_moe_layout gives.
static MoeLayout layout_view(MoeLayout& cap, int64_t T, int64_t k, int64_t E, int64_t alignment, Device dev) {
  if (!cap.m_indices.defined() || cap.tokens < T || cap.topk != k || cap.experts != E || cap.alignment != alignment ||
      cap.m_indices.device() != dev) {
    cuda_memory::PersistentScope persistent;
    cap = make_moe_layout(std::max(T, cap.m_indices.defined() && cap.topk == k && cap.experts == E ? cap.tokens : 0),
                          k, E, alignment, dev);
  }
  MoeLayout l = cap;
  l.tokens = T;
  l.rows_cap = moe_rows_upper_bound(T, k, E, alignment);
  l.m_indices = cap.m_indices.slice(0, 0, l.rows_cap);
  l.src_token = cap.src_token.slice(0, 0, l.rows_cap);
  l.dst_row = cap.dst_row.slice(0, 0, T);
  return l;
}

void moe_layer(const Tensor& x, const Tensor& token_ids, const MoeLayerWeights& w, const MoeLayerParams& p,
               Tensor& out, MoeWorkspace& ws) {
  DSA_CHECK(x.defined() && x.dim() == 2 && x.dtype() == DType::BF16 && x.is_contiguous(),
            "moe_layer: x must be contiguous bf16 [T][H], got {}", x.defined() ? x.str() : "undefined");
  const Device dev = x.device();
  const int64_t T = x.size(0), H = x.size(1);
  w.w13.validate("moe_layer: w13");
  w.w2.validate("moe_layer: w2");
  const int64_t E = w.w13.experts(), I2 = w.w13.n();  // E: this part's experts (all without EP)
  DSA_CHECK(w.w13.k() == H, "moe_layer: w13 K={} != hidden {}", w.w13.k(), H);
  DSA_CHECK(w.w2.experts() == E && w.w2.n() == H && w.w2.k() * 2 == I2,
            "moe_layer: w2 must be [{}][{}][{}], got E={} N={} K={}", E, H, I2 / 2, w.w2.experts(), w.w2.n(), w.w2.k());
  DSA_CHECK(w.gate.defined() && w.gate.dim() == 2 && w.gate.size(0) >= E,
            "moe_layer: gate must be [E >= {}][{}], got {}", E, H, w.gate.defined() ? w.gate.str() : "undefined");
  const int64_t E_all = w.gate.size(0);
  DSA_CHECK(p.expert_base >= 0 && p.expert_base + E <= E_all,
            "moe_layer: experts [{}, {}) (expert_base, w13 experts) outside the gate's {} experts", p.expert_base,
            p.expert_base + E, E_all);
  const bool hash = w.tid2eid.defined();
  DSA_CHECK(!hash || token_ids.defined(), "moe_layer: hash routing (tid2eid given) needs token_ids");
  const int64_t k = p.router.topk;

  Tensor logits = view_of(ws.logits, {T, E_all}, DType::F32, dev);
  Tensor topk_ids = view_of(ws.topk_ids, {T, k}, DType::I32, dev);
  Tensor topk_weights = view_of(ws.topk_weights, {T, k}, DType::F32, dev);
  MoeLayout l = layout_view(ws.layout, T, k, E, p.alignment, dev);
  l.expert_base = p.expert_base;
  router_logits(x, w.gate, logits);
  // Routing (score or hash) and the expert layout: one launch on CUDA for decode sizes.
  route_and_layout(logits, w.gate_bias, hash ? token_ids : Tensor(), w.tid2eid, topk_ids, topk_weights,
                   p.router, l);

  ExpertGemmParams gp;
  gp.tactic = p.tactic;
  gp.m_alignment = p.alignment;
  gp.rows_per_expert_hint = static_cast<double>(T) * static_cast<double>(k) / static_cast<double>(E_all);
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
  Tensor act = view_of(ws.act, {l.rows_cap, I2 / 2}, DType::BF16, dev);
  expert_gemm(x, l.src_token, l.m_indices, w.w13, act, gp);  // gather + gate/up + SwiGLU
  Tensor y = view_of(ws.y, {l.rows_cap, H}, DType::BF16, dev);
  expert_gemm(act, Tensor(), l.m_indices, w.w2, y, dp);

  Tensor shared;
  if (w.shared_w13.weight.defined()) {
    w.shared_w13.validate("moe_layer: shared_w13");
    w.shared_w2.validate("moe_layer: shared_w2");
    const int64_t Is2 = w.shared_w13.n();
    Tensor shared_act = view_of(ws.shared_act, {T, Is2 / 2}, DType::BF16, dev);
    shared = view_of(ws.shared_out, {T, H}, DType::BF16, dev);
    ExpertGemmParams sp;
    sp.fuse_swiglu = true;
    sp.swiglu_limit = p.swiglu_limit;
    expert_gemm(x, Tensor(), Tensor(), w.shared_w13, shared_act, sp);
    expert_gemm(shared_act, Tensor(), Tensor(), w.shared_w2, shared, ExpertGemmParams{});
  }
  out.check("moe_layer: out", DType::BF16, {T, H});
  moe_combine(y, l, topk_weights, shared, out);
}

}  // namespace dsa::ops
