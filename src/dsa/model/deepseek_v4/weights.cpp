#include "dsa/model/deepseek_v4/weights.h"

#include <optional>

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/model/common/expert_stack.h"
#include "dsa/model/common/shard_slices.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

namespace {

// Which part of a checkpoint tensor a rank keeps (sharding.h): all of it, or a range of its rows
// (out features) or columns (in features).
struct Cut {
  enum Dim { All, Rows, Cols } dim = All;
  Range range;
};

// The cut of a host tensor; FP8 block scales follow their 128x128 blocks (a cut through a block
// throws naming `what`).
Linear cut_linear(const Tensor& weight, const Tensor& scale, const Cut& cut, const std::string& what) {
  const Linear l{weight, scale};
  if (cut.dim == Cut::All) return l;
  return cut.dim == Cut::Rows ? linear_rows(l, {cut.range}, what) : linear_cols(l, {cut.range}, what);
}

Linear linear(const LoadedWeights& w, const std::string& name, Device dev, const Cut& cut = {}) {
  const Linear c = cut_linear(w.get(name + ".weight"), w.has(name + ".scale") ? w.get(name + ".scale") : Tensor(), cut,
                              name);
  return make_linear(c.weight, c.scale, dev, name + ".weight");
}

CompressorWeights compressor(const LoadedWeights& w, const std::string& p, Device dev) {
  return {w.get(p + "ape").to(dev), linear(w, p + "wkv", dev), linear(w, p + "wgate", dev),
          w.get(p + "norm.weight").to(dev)};
}

// Fuses the projections of the attention input (LayerWeights::x_to_bf16 / x_to_f32) and points
// the named fields at their parts, so each weight is held once.
void fuse_input_projections(LayerWeights& L, const std::string& a) {
  L.x_to_bf16 = FusedLinear::of({L.wq_a, L.wkv}, a + "wq_a/wkv");
  L.wq_a = L.x_to_bf16.part(0);
  L.wkv = L.x_to_bf16.part(1);
  if (L.ratio == 0) return;
  std::vector<Linear*> f32{&L.compressor.wkv, &L.compressor.wgate};
  if (L.ratio == 4) f32.insert(f32.end(), {&L.idx_compressor.wkv, &L.idx_compressor.wgate, &L.idx_weights_proj});
  std::vector<Linear> parts;
  for (const Linear* l : f32) parts.push_back(*l);
  L.x_to_f32 = FusedLinear::of(parts, a + "compressor/indexer projections");
  for (size_t i = 0; i < f32.size(); ++i) *f32[i] = L.x_to_f32.part(i);
}

MhcWeights mhc(const LoadedWeights& w, const std::string& p, Device dev) {
  return {w.get(p + "_fn").to(dev), w.get(p + "_base").to(dev), w.get(p + "_scale").to(dev)};
}

// Expert block scales as the expert GEMM reads them: MXFP4 keeps its UE8M0 bytes (one per 32
// values), FP8 128x128 blocks take f32 (widened here once).
Tensor expert_scale(const Tensor& s, ops::WeightFormat fmt) {
  return fmt == ops::WeightFormat::FP8Block ? block_scales_f32(s) : s;
}

// One expert's w1 / w3 (rows) or w2 (columns) of the rank's intermediate slice, as the
// checkpoint stores them ([N][K...] weight, its scale); the cut keeps whole scale blocks
// (MXFP4: 32 columns, FP8: 128 x 128).
std::pair<Tensor, Tensor> cut_expert(const Tensor& weight, const Tensor& scale, ops::WeightFormat fmt, const Cut& cut,
                                     const std::string& what) {
  if (cut.dim == Cut::All) return {weight, scale};
  ops::ExpertWeights e;
  e.format = fmt;
  e.weight = weight.reshape({1, weight.size(0), weight.size(1)});
  if (scale.defined()) e.scale = scale.reshape({1, scale.size(0), scale.size(1)});
  const ops::ExpertWeights o =
      cut.dim == Cut::Rows ? expert_rows(e, {cut.range}, what) : expert_cols(e, {cut.range}, what);
  return {o.weight.reshape({o.weight.size(1), o.weight.size(2)}),
          o.scale.defined() ? o.scale.reshape({o.scale.size(1), o.scale.size(2)}) : Tensor()};
}

// Dummy loads (dummy_weights.h) allocate the experts already stacked on the device, under
// `key` + "w13" / "w2" (".weight", ".scale"), with every expert's tensors views into them: the
// stack is taken as it is (copying it would hold the experts twice). Empty when not stacked.
std::optional<ops::ExpertWeights> prestacked(const LoadedWeights& w, const std::string& key, const char* which,
                                             ops::WeightFormat fmt, Device dev) {
  auto it = w.expert_stacks.find(key + which + ".weight");
  if (it == w.expert_stacks.end() || it->second.device() != dev) return std::nullopt;
  ops::ExpertWeights out;
  out.format = fmt;
  out.weight = it->second;
  if (fmt == ops::WeightFormat::FP8Block && std::string(which) == "w13")
    DSA_CHECK(out.weight.size(1) % 256 == 0, "deepseek_v4: {}w13 has {} rows; FP8 gate/up stacking needs w1 rows a "
              "multiple of 128", key, out.weight.size(1));
  if (fmt != ops::WeightFormat::BF16) {
    auto s = w.expert_stacks.find(key + which + ".scale");
    DSA_CHECK(s != w.expert_stacks.end(), "deepseek_v4: stacked experts {}{} without their scales", key, which);
    out.scale = expert_scale(s->second, fmt).to(dev);
  }
  return out;
}

// Experts [r.begin, r.end) of a stack (expert parallelism on a pre-stacked dummy load: views, so
// the whole stack stays allocated; a checkpoint load stacks only the rank's experts).
ops::ExpertWeights expert_range(ops::ExpertWeights s, Range r) {
  if (r.size() == 0 || (r.begin == 0 && r.end == s.experts())) return s;
  s.weight = s.weight.slice(0, r.begin, r.end);
  if (s.scale.defined()) s.scale = s.scale.slice(0, r.begin, r.end);
  return s;
}

// Part i of expert e as stack_expert_parts reads it: `names[i]` ("w1." / "w3.", or "w2.") under
// expert e's prefix, cut to the rank's `inter` slice, its scale as the expert GEMM reads it.
ExpertPart checkpoint_parts(const LoadedWeights& w, const std::vector<std::string>& prefixes, ops::WeightFormat fmt,
                            const Cut& inter, std::vector<std::string> names) {
  return [&w, &prefixes, fmt, &inter, names = std::move(names)](int64_t e, int i) -> std::pair<Tensor, Tensor> {
    const bool scaled = fmt != ops::WeightFormat::BF16;
    const std::string n = prefixes[static_cast<size_t>(e)] + names[static_cast<size_t>(i)];
    auto [wt, sc] = cut_expert(w.get(n + "weight"), scaled ? w.get(n + "scale") : Tensor(), fmt, inter, n + "weight");
    return {wt, scaled ? expert_scale(sc, fmt) : Tensor()};
  };
}

// Gate/up weights of experts [first, first+count) concatenated as [count][2I][...]: w1 rows then
// w3 rows, for the weight and for the scale (MXFP4: per-row scales; FP8: 128-row blocks, so I must
// be a multiple of 128; BF16: no scale), copied once from the (memory-mapped) checkpoint into `dev`.
// `inter`: the rank's rows of w1 and w3 (tensor parallelism; Cut::All: every row).
ops::ExpertWeights stack_w13(const LoadedWeights& w, const std::vector<std::string>& prefixes, ops::WeightFormat fmt,
                             Device dev, const std::string& key, const Cut& inter = {}, Range experts = {}) {
  if (auto s = prestacked(w, key, "w13", fmt, dev)) {
    s = expert_range(*s, experts);
    if (inter.dim == Cut::All) return *s;
    const int64_t I = s->n() / 2;  // the whole stack, filled in place (dummy loads): cut it
    return expert_rows(*s, {inter.range, {I + inter.range.begin, I + inter.range.end}}, key + "w13");
  }
  return stack_expert_parts(static_cast<int64_t>(prefixes.size()), 2, fmt,
                            checkpoint_parts(w, prefixes, fmt, inter, {"w1.", "w3."}), dev, "deepseek_v4: " + key + "w13");
}

// `inter`: the rank's columns of w2 (the same slice as stack_w13's rows).
ops::ExpertWeights stack_w2(const LoadedWeights& w, const std::vector<std::string>& prefixes, ops::WeightFormat fmt,
                            Device dev, const std::string& key, const Cut& inter = {}, Range experts = {}) {
  if (auto s = prestacked(w, key, "w2", fmt, dev)) {
    s = expert_range(*s, experts);
    return inter.dim == Cut::All ? *s : expert_cols(*s, {inter.range}, key + "w2");
  }
  return stack_expert_parts(static_cast<int64_t>(prefixes.size()), 1, fmt,
                            checkpoint_parts(w, prefixes, fmt, inter, {"w2."}), dev, "deepseek_v4: " + key + "w2");
}

ops::WeightFormat expert_format(const LoadedWeights& w, const std::string& name) {
  const DType t = w.get(name).dtype();
  if (t == DType::E4M3) return ops::WeightFormat::FP8Block;
  if (t == DType::I8 || t == DType::U8 || t == DType::FP4X2) return ops::WeightFormat::MXFP4;
  if (t == DType::BF16) return ops::WeightFormat::BF16;
  fail("deepseek_v4: expert weight {} has dtype {}: expected F8_E4M3 (FP8 block-scaled), I8/U8 packed e2m1 "
       "(MXFP4) or BF16",
       name, dtype_name(t));
}

// tid2eid as i32 on the tensor's device (checkpoints store i64 or i32; converted once at load).
Tensor as_i32(const Tensor& t) {
  if (t.dtype() == DType::I32) return t;
  DSA_CHECK(t.dtype() == DType::I64, "deepseek_v4: tid2eid must be i32 or i64, got {}", t.str());
  const Tensor h = t.to(Device::cpu());
  Tensor out = Tensor::empty(t.shape(), DType::I32);
  for (int64_t i = 0; i < h.numel(); ++i) out.data<int32_t>()[i] = static_cast<int32_t>(h.data<int64_t>()[i]);
  return out.to(t.device());
}

// The weights of one block under prefix p ("layers.N." or "mtp.N.") with compress ratio `ratio`.
// `tp`: the rank's shard (sharding.h); the cut parts are taken on the host, so only they reach `dev`.
LayerWeights layer_weights(const LoadedWeights& w, const std::string& p, int ratio, const ModelConfig& c, Device dev,
                           const TpShard& tp) {
  const auto cut = [&](Cut::Dim d, Range r) { return tp.split() ? Cut{d, r} : Cut{}; };
  const int64_t D = c.head_dim, r = c.o_lora_rank;
  const Cut q_rows = cut(Cut::Rows, {tp.heads.begin * D, tp.heads.end * D});
  const Cut group_rows = cut(Cut::Rows, {tp.groups.begin * r, tp.groups.end * r});
  const Cut group_cols = cut(Cut::Cols, {tp.groups.begin * r, tp.groups.end * r});
  const Cut inter_rows = cut(Cut::Rows, tp.inter), inter_cols = cut(Cut::Cols, tp.inter);
  LayerWeights L;
  L.ratio = ratio;
  L.attn_norm = w.get(p + "attn_norm.weight").to(dev);
  L.ffn_norm = w.get(p + "ffn_norm.weight").to(dev);
  L.hc_attn = mhc(w, p + "hc_attn", dev);
  L.hc_ffn = mhc(w, p + "hc_ffn", dev);
  const std::string a = p + "attn.";
  L.wq_a = linear(w, a + "wq_a", dev);
  L.wq_b = linear(w, a + "wq_b", dev, q_rows);
  L.wkv = linear(w, a + "wkv", dev);
  L.wo_b = linear(w, a + "wo_b", dev, group_cols);
  L.q_norm = w.get(a + "q_norm.weight").to(dev);
  L.kv_norm = w.get(a + "kv_norm.weight").to(dev);
  const Tensor& sink = w.get(a + "attn_sink");
  L.sink = (tp.split() ? gather_ranges(sink.reshape({sink.numel()}), 0, {tp.heads}) : sink).to(dev);
  L.wo_a = cut_linear(w.get(a + "wo_a.weight"), Tensor(), group_rows, a + "wo_a.weight").weight.to(dev);
  DSA_CHECK(L.wo_a.dtype() == DType::BF16, "deepseek_v4: {}wo_a.weight must be bf16, got {}", a, L.wo_a.str());
  if (L.ratio != 0) L.compressor = compressor(w, a + "compressor.", dev);
  if (L.ratio == 4) {
    L.idx_wq_b = linear(w, a + "indexer.wq_b", dev);
    L.idx_weights_proj = linear(w, a + "indexer.weights_proj", dev);
    L.idx_compressor = compressor(w, a + "indexer.compressor.", dev);
  }
  fuse_input_projections(L, a);
  const std::string f = p + "ffn.";
  L.moe.gate = w.get(f + "gate.weight").to(dev);
  if (w.has(f + "gate.tid2eid"))
    L.moe.tid2eid = as_i32(w.get(f + "gate.tid2eid")).to(dev);
  else
    L.moe.gate_bias = w.get(f + "gate.bias").to(dev);
  // Routed experts: every expert's slice of the intermediate dim, or (expert parallelism) the
  // rank's experts whole.
  const Range er = tp.ep ? tp.experts : Range{0, c.n_routed_experts};
  std::vector<std::string> experts;
  for (int64_t e = er.begin; e < er.end; ++e) experts.push_back(fmt::format("{}experts.{}.", f, e));
  const ops::WeightFormat ef = expert_format(w, experts[0] + "w1.weight");
  const Cut routed_rows = tp.ep ? Cut{} : inter_rows, routed_cols = tp.ep ? Cut{} : inter_cols;
  L.moe.w13 = stack_w13(w, experts, ef, dev, f + "experts.", routed_rows, tp.ep ? er : Range{});
  L.moe.w2 = stack_w2(w, experts, ef, dev, f + "experts.", routed_cols, tp.ep ? er : Range{});
  L.expert_base = er.begin;
  if (c.n_shared_experts > 0) {
    const std::vector<std::string> shared{f + "shared_experts."};
    const ops::WeightFormat sf = expert_format(w, shared[0] + "w1.weight");
    L.moe.shared_w13 = stack_w13(w, shared, sf, dev, shared[0], inter_rows);
    L.moe.shared_w2 = stack_w2(w, shared, sf, dev, shared[0], inter_cols);
  }
  return L;
}

}  // namespace

ModelWeights build_model_weights(LoadedWeights loaded, const ModelConfig& c, Device dev, bool mtp, const TpShard& tp) {
  ModelWeights m;
  m.loaded = std::move(loaded);
  const LoadedWeights& w = m.loaded;
  m.embed = w.get("embed.weight").to(dev);
  // The rank's vocabulary share of the head (all of it unless tp splits the vocabulary), cut on
  // the host so only that part reaches the device.
  const Tensor head = w.get("head.weight");
  m.head = (tp.split() && tp.vocab.size() != head.size(0) ? gather_ranges(head, 0, {tp.vocab}) : head).to(dev);
  m.norm = w.get("norm.weight").to(dev);
  m.hc_head_fn = w.get("hc_head_fn").to(dev);
  m.hc_head_base = w.get("hc_head_base").to(dev);
  m.hc_head_scale = w.get("hc_head_scale").to(dev);
  DSA_CHECK(m.embed.dtype() == DType::BF16 && m.head.dtype() == DType::BF16,
            "deepseek_v4: embed/head must be bf16 (got {} / {})", m.embed.str(), m.head.str());
  for (int l = 0; l < c.num_layers; ++l)
    m.layers.push_back(layer_weights(w, fmt::format("layers.{}.", l), c.compress_ratios.at(l), c, dev, tp));
  for (int k = 0; mtp && k < c.num_mtp_layers; ++k) {
    const std::string p = fmt::format("mtp.{}.", k);
    MtpWeights M;
    M.block = layer_weights(w, p, c.mtp_compress_ratios.at(k), c, dev, tp);
    M.e_proj = linear(w, p + "e_proj", dev);
    M.h_proj = linear(w, p + "h_proj", dev);
    M.enorm = w.get(p + "enorm.weight").to(dev);
    M.hnorm = w.get(p + "hnorm.weight").to(dev);
    M.norm = w.get(p + "norm.weight").to(dev);
    M.hc_head_fn = w.get(p + "hc_head_fn").to(dev);
    M.hc_head_base = w.get(p + "hc_head_base").to(dev);
    M.hc_head_scale = w.get(p + "hc_head_scale").to(dev);
    m.mtp.push_back(std::move(M));
  }
  return m;
}

}  // namespace dsa::model::v4
