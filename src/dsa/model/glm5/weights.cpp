#include "dsa/model/glm5/weights.h"

#include <array>
#include <cstring>

#include <fmt/format.h>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/formats/fp8_block.h"
#include "dsa/model/common/expert_stack.h"
#include "dsa/model/common/shard_slices.h"
#include "dsa/model/common/vocab_parallel.h"
#include "dsa/model/glm5/sharding.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::glm5 {

namespace {

// A CPU copy of `t` as bf16 (F32 rounded to nearest even; BF16 copied).
Tensor to_bf16(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  if (c.dtype() == DType::BF16) return c;
  DSA_CHECK(c.dtype() == DType::F32, "glm5: cannot convert {} to bf16", c.str());
  Tensor out = Tensor::empty(c.shape(), DType::BF16);
  const float* s = c.data<float>();
  uint16_t* d = out.data<uint16_t>();
  for (int64_t i = 0; i < c.numel(); ++i) d[i] = f32_to_bf16_bits(s[i]);
  return out;
}

// Dequantized f32 copy of a linear weight [out][in] (CPU).
Tensor dequant_f32(const Linear& l) {
  Tensor out = Tensor::empty({l.out_features(), l.in_features()}, DType::F32);
  if (l.fp8()) {
    formats::Fp8BlockDequantParams p;
    p.weight = l.weight;
    p.scale = l.scale;
    p.out = out;
    formats::fp8_block_dequantize_cpu(p);
  } else {
    const uint16_t* s = l.weight.data<uint16_t>();
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = bf16_bits_to_f32(s[i]);
  }
  return out;
}

// Stacks per-expert linears into the grouped-GEMM layout ([E][N][K], expert e's linears
// concatenated along N: gate then up; model/common/expert_stack.h). FP8 checkpoints keep their
// e4m3 bytes and block scales, BF16 checkpoints their bf16 values (WeightFormat::BF16); every
// linear of one stack must have the format of the first.
ops::ExpertWeights stack_experts(const std::vector<std::vector<const Linear*>>& experts, const std::string& what,
                                 Device dev) {
  const ops::WeightFormat fmt = experts.at(0).at(0)->fp8() ? ops::WeightFormat::FP8Block : ops::WeightFormat::BF16;
  auto part = [&](int64_t e, int i) -> std::pair<Tensor, Tensor> {
    const Linear& l = *experts.at(static_cast<size_t>(e)).at(static_cast<size_t>(i));
    DSA_CHECK(l.fp8() == (fmt == ops::WeightFormat::FP8Block), "glm5: {}: expert {} mixes FP8 and BF16 weights", what,
              e);
    return {l.weight, l.scale};
  };
  for (const auto& ex : experts)
    DSA_CHECK(ex.size() == experts[0].size(), "glm5: {}: experts with {} and {} projections", what, ex.size(),
              experts[0].size());
  return stack_expert_parts(static_cast<int64_t>(experts.size()), static_cast<int>(experts[0].size()), fmt, part, dev,
                            "glm5: " + what);
}

}  // namespace

Weights build_weights(const LoadedWeights& lw, const schema::Glm5Dims& d, Device dev, std::optional<DType> absorbed,
                      bool mtp, const Shard& tp) {
  const DType absorbed_dtype = absorbed.value_or(dev.is_cuda() ? DType::BF16 : DType::F32);
  DSA_CHECK(absorbed_dtype == DType::F32 || absorbed_dtype == DType::BF16,
            "glm5: absorbed MLA weights (w_uk, w_uv) are stored in f32 or bf16, not {}", dtype_name(absorbed_dtype));
  auto get = [&](const std::string& n) { return lw.get(n); };
  // A linear as the checkpoint stores it, on the host (experts, kv_b_proj) or on `dev`.
  auto linear = [&](const std::string& base, Device on = Device::cpu()) {
    const Tensor w = get(base + ".weight");
    return make_linear(w, w.dtype() == DType::E4M3 ? get(base + ".weight_scale_inv") : Tensor(), on,
                       "glm5: " + base + ".weight");
  };
  auto vec = [&](const std::string& n) { return get(n).to(dev); };
  // A linear cut on the host to the rank's rows (dim 0) or columns (dim 1) of `r` when tp splits
  // (sharding.h), then on `dev`; whole otherwise.
  auto split_linear = [&](const std::string& base, int dim, Range r, const std::string& what) {
    if (!tp.split()) return linear(base, dev);
    const Linear host = linear(base);
    return (dim == 0 ? linear_rows(host, {r}, what) : linear_cols(host, {r}, what)).to(dev);
  };
  const Range heads = tp.split() ? rank_range(d.heads, tp.rank, tp.size, "num_attention_heads") : Range{0, d.heads};
  const int64_t qd = d.qk_nope + d.qk_rope;

  Weights W;
  W.embed = get("model.embed_tokens.weight").to(dev);
  W.final_norm = vec("model.norm.weight");
  {  // vocabulary-parallel when tp divides the vocabulary (model/common/vocab_parallel.h)
    const Tensor head = to_bf16(get("lm_head.weight"));
    const Range v = vocab_shard(head.size(0), tp.rank, tp.size);
    W.lm_head = (v.size() == head.size(0) ? head : gather_ranges(head, 0, {v})).to(dev);
  }
  // A SwiGLU MLP's gate / up / down linears (host) as the rank keeps them: the rows (gate, up) and
  // columns (down) of its tp_inter_range slice when tp splits, else whole.
  auto swiglu_parts = [&](Linear g, Linear u, Linear dn, const std::string& what) {
    if (tp.split()) {
      const Range r = tp_inter_range(g.out_features(), tp, what);
      g = linear_rows(g, {r}, what + " gate");
      u = linear_rows(u, {r}, what + " up");
      dn = linear_cols(dn, {r}, what + " down");
    }
    return std::array<Linear, 3>{std::move(g), std::move(u), std::move(dn)};
  };
  // Layer l's weights; has_indexer / dense as the layer's type says (the MTP layer: full, MoE).
  auto load_layer = [&](int64_t l, bool has_indexer, bool dense) {
    const std::string p = fmt::format("model.layers.{}.", l), a = p + "self_attn.", m = p + "mlp.";
    const std::string at = fmt::format("layer {}", l);
    LayerWeights L;
    L.input_norm = vec(p + "input_layernorm.weight");
    L.post_attn_norm = vec(p + "post_attention_layernorm.weight");
    L.q_a = linear(a + "q_a_proj", dev);
    L.q_b = split_linear(a + "q_b_proj", 0, {heads.begin * qd, heads.end * qd}, at + " q_b_proj");
    L.kv_a = linear(a + "kv_a_proj_with_mqa", dev);
    L.o_proj = split_linear(a + "o_proj", 1, {heads.begin * d.v_head, heads.end * d.v_head}, at + " o_proj");
    L.q_a_norm = vec(a + "q_a_layernorm.weight");
    L.kv_a_norm = vec(a + "kv_a_layernorm.weight");

    // Absorbed MLA matrices from kv_b_proj: rows h*(nope+v) + [0, nope) are W_UK_h, the next v
    // rows W_UV_h; columns are the kv_lora latent.
    const Tensor kvb = dequant_f32(linear(a + "kv_b_proj"));
    const int64_t H = d.heads, C = d.kv_lora, Dn = d.qk_nope, Dv = d.v_head;
    DSA_CHECK(kvb.size(0) == H * (Dn + Dv) && kvb.size(1) == C, "glm5: {}kv_b_proj has shape {}", a, kvb.str());
    L.w_uk = Tensor::empty({H, C, Dn}, DType::F32);
    L.w_uv = Tensor::empty({H, Dv, C}, DType::F32);
    const float* src = kvb.data<float>();
    float* uk = L.w_uk.data<float>();
    float* uv = L.w_uv.data<float>();
    for (int64_t h = 0; h < H; ++h) {
      const float* rows = src + h * (Dn + Dv) * C;
      for (int64_t i = 0; i < Dn; ++i)
        for (int64_t c = 0; c < C; ++c) uk[(h * C + c) * Dn + i] = rows[i * C + c];
      std::memcpy(uv + h * Dv * C, rows + Dn * C, sizeof(float) * Dv * C);
    }
    if (tp.split()) {  // the rank's heads
      L.w_uk = gather_ranges(L.w_uk, 0, {heads});
      L.w_uv = gather_ranges(L.w_uv, 0, {heads});
    }
    if (absorbed_dtype != DType::F32) {
      L.w_uk = ops::cast(L.w_uk, absorbed_dtype);
      L.w_uv = ops::cast(L.w_uv, absorbed_dtype);
    }
    L.w_uk = L.w_uk.to(dev);
    L.w_uv = L.w_uv.to(dev);

    L.has_indexer = has_indexer;
    if (L.has_indexer) {
      L.indexer.wq_b = linear(a + "indexer.wq_b", dev);
      L.indexer.wk = linear(a + "indexer.wk", dev);
      L.indexer.k_norm_w = vec(a + "indexer.k_norm.weight");
      L.indexer.k_norm_b = vec(a + "indexer.k_norm.bias");
      L.indexer.weights_proj = to_bf16(get(a + "indexer.weights_proj.weight")).to(dev);
    }
    // q_a (2048 rows), wk (128), kv_a (576, not whole FP8 blocks: last) as one weight.
    if (L.has_indexer) {
      L.x_proj = FusedLinear::of({L.q_a, L.indexer.wk, L.kv_a}, a + "q_a/indexer.wk/kv_a");
      L.indexer.wk = L.x_proj.part(1);
    } else {
      L.x_proj = FusedLinear::of({L.q_a, L.kv_a}, a + "q_a/kv_a");
    }
    L.q_a = L.x_proj.part(0);
    L.kv_a = L.x_proj.part(L.x_proj.size() - 1);

    L.dense = dense;
    if (L.dense) {
      const auto mlp = swiglu_parts(linear(m + "gate_proj"), linear(m + "up_proj"), linear(m + "down_proj"),
                                    at + " dense MLP");
      L.moe.shared_w13 = stack_experts({{&mlp[0], &mlp[1]}}, m + "gate_proj/up_proj", dev);
      L.moe.shared_w2 = stack_experts({{&mlp[2]}}, m + "down_proj", dev);
    } else {
      L.moe.gate = get(m + "gate.weight").to(dev);
      L.moe.gate_bias = get(m + "gate.e_score_correction_bias").to(dev);
      // Expert parallelism: the rank's whole experts; else every expert, each cut to the rank's
      // intermediate slice when tp splits.
      const Range er = tp.split() && tp.ep ? rank_range(d.experts, tp.rank, tp.size,
                                                         "--enable-expert-parallel: " + at + " routed experts")
                                           : Range{0, d.experts};
      L.expert_base = er.begin;
      std::vector<std::array<Linear, 3>> lin;
      lin.reserve(static_cast<size_t>(er.size()));
      for (int64_t e = er.begin; e < er.end; ++e) {
        auto part = [&](const char* n) { return linear(fmt::format("{}experts.{}.{}", m, e, n)); };
        if (tp.ep)
          lin.push_back({part("gate_proj"), part("up_proj"), part("down_proj")});
        else
          lin.push_back(swiglu_parts(part("gate_proj"), part("up_proj"), part("down_proj"), at + " routed experts"));
      }
      std::vector<std::vector<const Linear*>> w13, w2;
      for (const auto& x : lin) {
        w13.push_back({&x[0], &x[1]});
        w2.push_back({&x[2]});
      }
      L.moe.w13 = stack_experts(w13, m + "experts.*.gate_proj/up_proj", dev);
      L.moe.w2 = stack_experts(w2, m + "experts.*.down_proj", dev);
      if (d.shared_experts > 0) {
        const auto se = swiglu_parts(linear(m + "shared_experts.gate_proj"), linear(m + "shared_experts.up_proj"),
                                     linear(m + "shared_experts.down_proj"), at + " shared expert");
        L.moe.shared_w13 = stack_experts({{&se[0], &se[1]}}, m + "shared_experts.gate_proj/up_proj", dev);
        L.moe.shared_w2 = stack_experts({{&se[2]}}, m + "shared_experts.down_proj", dev);
      }
    }
    return L;
  };
  for (int64_t l = 0; l < d.layers; ++l)
    W.layers.push_back(load_layer(l, d.indexer_full.at(static_cast<size_t>(l)), l < d.first_dense));
  for (int64_t k = 0; mtp && k < d.mtp_layers; ++k) {
    const int64_t l = d.layers + k;
    const std::string p = fmt::format("model.layers.{}.", l);
    MtpWeights M;
    M.layer = load_layer(l, true, false);
    M.enorm = vec(p + "enorm.weight");
    M.hnorm = vec(p + "hnorm.weight");
    M.eh_proj = linear(p + "eh_proj", dev);
    M.shared_norm = vec(p + "shared_head.norm.weight");
    W.mtp.push_back(std::move(M));
  }
  return W;
}

}  // namespace dsa::model::glm5
