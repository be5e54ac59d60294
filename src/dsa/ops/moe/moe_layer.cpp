// The MoE layer as straight-line code over the MoE ops; runs wherever the tensors live.
#include "dsa/ops/moe/moe_layer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

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

// DSA_MOE_OVERLAP=0: the shared expert on the calling stream after the routed experts.
static bool shared_overlap_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("DSA_MOE_OVERLAP");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// The shared expert into `shared` [T][H] through `shared_act` [T][Is] (workspace views, made by
// the caller before any branch: this allocates nothing), dense GEMMs on the current stream.
static void shared_expert(const Tensor& x, const MoeLayerWeights& w, const MoeLayerParams& p, Tensor& shared_act,
                          Tensor& shared) {
  ExpertGemmParams sp;
  sp.fuse_swiglu = true;
  sp.swiglu_limit = p.swiglu_limit;
  expert_gemm(x, Tensor(), Tensor(), w.shared_w13, shared_act, sp);
  expert_gemm(shared_act, Tensor(), Tensor(), w.shared_w2, shared, ExpertGemmParams{});
}

// The routed part: router logits, routing + layout, gate/up (gather + SwiGLU fused) and down
// GEMMs on the current stream; y holds each routed row's down output in the layout's order.
struct Routed {
  MoeLayout layout;
  Tensor topk_weights, y;
};
static Routed routed_experts(const Tensor& x, const Tensor& token_ids, const MoeLayerWeights& w, const MoeLayerParams& p,
                             MoeWorkspace& ws) {
  const Device dev = x.device();
  const int64_t T = x.size(0), H = x.size(1);
  const int64_t E = w.w13.experts(), I2 = w.w13.n(), E_all = w.gate.size(0), k = p.router.topk;
  const bool hash = w.tid2eid.defined();
  Routed r;
  Tensor logits = view_of(ws.logits, {T, E_all}, DType::F32, dev);
  Tensor topk_ids = view_of(ws.topk_ids, {T, k}, DType::I32, dev);
  r.topk_weights = view_of(ws.topk_weights, {T, k}, DType::F32, dev);
  r.layout = layout_view(ws.layout, T, k, E, p.alignment, dev);
  MoeLayout& l = r.layout;
  l.expert_base = p.expert_base;
  router_logits(x, w.gate, logits);
  // Routing (score or hash) and the expert layout: one launch on CUDA for decode sizes.
  route_and_layout(logits, w.gate_bias, hash ? token_ids : Tensor(), w.tid2eid, topk_ids, r.topk_weights, p.router, l);

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
  r.y = view_of(ws.y, {l.rows_cap, H}, DType::BF16, dev);
  expert_gemm(act, Tensor(), l.m_indices, w.w2, r.y, dp);
  return r;
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
  DSA_CHECK(!w.tid2eid.defined() || token_ids.defined(), "moe_layer: hash routing (tid2eid given) needs token_ids");
  const bool has_shared = w.shared_w13.weight.defined();
  if (has_shared) {
    w.shared_w13.validate("moe_layer: shared_w13");
    w.shared_w2.validate("moe_layer: shared_w2");
  }
  out.check("moe_layer: out", DType::BF16, {T, H});

  // The shared expert depends on x alone: on CUDA it is enqueued first, on the side stream, and
  // joined before the combine. Its buffers are the workspace's own, taken here before the fork
  // (view_of allocates only when a size grows, on calls that run eagerly before any capture), so
  // the branch allocates nothing (core/cuda_stream.h). The branch is joined on every path out,
  // so a capture never ends with it open.
  Tensor shared, shared_act;
  if (has_shared) {
    shared_act = view_of(ws.shared_act, {T, w.shared_w13.n() / 2}, DType::BF16, dev);
    shared = view_of(ws.shared_out, {T, H}, DType::BF16, dev);
  }
  const bool branch = has_shared && dev.is_cuda() && p.shared_on_side_stream && shared_overlap_enabled();
  if (branch) {
    if (!ws.side || ws.side->device() != dev.index) ws.side = std::make_shared<cuda_stream::SideStream>(dev.index);
    ws.side->fork();
  }
  Routed r;
  try {
    if (branch) {
      cuda_stream::StreamScope on_side(ws.side->get());
      shared_expert(x, w, p, shared_act, shared);
    }
    r = routed_experts(x, token_ids, w, p, ws);
  } catch (...) {
    if (branch) ws.side->join();
    throw;
  }
  if (branch)
    ws.side->join();
  else if (has_shared)
    shared_expert(x, w, p, shared_act, shared);
  moe_combine(r.y, r.layout, r.topk_weights, shared, out);
}

}  // namespace dsa::ops
