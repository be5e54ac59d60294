#include "dsa/model/glm5/sharding.h"

#include "dsa/core/error.h"
#include "dsa/model/common/shard_slices.h"
#include "dsa/model/common/vocab_parallel.h"

namespace dsa::model::glm5 {

namespace {

// A SwiGLU MLP in the ops/moe layout (w13 [E][2I][H]: gate rows then up rows; w2 [E][H][I]):
// the rank keeps the same slice of I in the gate, the up and the down projection.
void shard_swiglu(ops::ExpertWeights& w13, ops::ExpertWeights& w2, int rank, int size, const std::string& what) {
  const int64_t I = w13.n() / 2;
  const Range r = rank_range(I, rank, size, what + " intermediate size");
  DSA_CHECK(r.size() % 128 == 0,
            "tensor parallel size {}: {} intermediate size {} / {} = {} is not a multiple of 128 (the down "
            "projection's K and the FP8 scale blocks)", size, what, I, size, r.size());
  w13 = expert_rows(w13, {r, {I + r.begin, I + r.end}}, what + " gate/up");
  w2 = expert_cols(w2, {r}, what + " down");
}

}  // namespace

int64_t tp_local_heads(const schema::Glm5Dims& d, int size) {
  DSA_CHECK(size >= 1, "tensor parallel size {} must be at least 1", size);
  DSA_CHECK(d.heads % size == 0, "tensor parallel size {} does not divide num_attention_heads ({})", size, d.heads);
  return d.heads / size;
}

void shard_weights(Weights& w, const schema::Glm5Dims& d, int rank, int size, bool ep) {
  if (size == 1) return;
  const Range h = rank_range(d.heads, rank, size, "num_attention_heads");
  const Range v = vocab_shard(d.vocab, rank, size);
  if (v.size() != d.vocab) w.lm_head = gather_ranges(w.lm_head, 0, {v});
  const int64_t qd = d.qk_nope + d.qk_rope;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string at = fmt::format("layer {}", l);
    L.q_b = linear_rows(L.q_b, {{h.begin * qd, h.end * qd}}, at + " q_b_proj");
    L.w_uk = gather_ranges(L.w_uk, 0, {h});
    L.w_uv = gather_ranges(L.w_uv, 0, {h});
    L.o_proj = linear_cols(L.o_proj, {{h.begin * d.v_head, h.end * d.v_head}}, at + " o_proj");
    if (L.dense) {
      shard_swiglu(L.moe.shared_w13, L.moe.shared_w2, rank, size, at + " dense MLP");
    } else {
      if (ep) {
        // Whole experts: the rank's part of the stacks (copied, so the others' memory goes).
        const Range e = rank_range(L.moe.w13.experts(), rank, size, "--enable-expert-parallel: " + at + " routed experts");
        for (ops::ExpertWeights* x : {&L.moe.w13, &L.moe.w2}) {
          x->weight = gather_ranges(x->weight, 0, {e});
          if (x->scale.defined()) x->scale = gather_ranges(x->scale, 0, {e});
        }
        L.expert_base = e.begin;
      } else {
        shard_swiglu(L.moe.w13, L.moe.w2, rank, size, at + " routed experts");
      }
      if (L.moe.shared_w13.weight.defined())
        shard_swiglu(L.moe.shared_w13, L.moe.shared_w2, rank, size, at + " shared expert");
    }
  }
}

}  // namespace dsa::model::glm5
