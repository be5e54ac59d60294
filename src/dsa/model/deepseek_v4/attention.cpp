#include "dsa/model/deepseek_v4/attention.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "dsa/core/trace.h"
#include "dsa/model/deepseek_v4/compressed_kv.h"
#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/norm/norm_rope.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/sparse_index/sparse_index.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

namespace {

using attn::CacheRole;

ops::BlockTable blocks_of(const kv::GroupMetadata& g) { return {g.block_table, g.page_size, g.num_pages}; }

// Sliding-window keys: the last `window` positions of each token's request (once per step and
// cache group: every layer of the group has the same list).
Tensor swa_indices(int layer, const Step& s) {
  return s.shared_slots(s.pool(layer, CacheRole::SlidingWindow).group, Step::SlotList::SwaWindow, [&] {
    const kv::GroupMetadata& g = s.group(layer, CacheRole::SlidingWindow);
    Tensor idx = Tensor::empty({s.tokens(), s.config->sliding_window}, DType::I32, s.device);
    ops::swa_window_slots({.positions = s.meta().positions, .token_req = s.meta().token_req, .blocks = blocks_of(g), .slots = idx});
    return idx;
  });
}

// Grouped output projection: o [T][H][D] bf16 viewed as [T][G][H*D/G]; group g goes through rows
// [g*r, (g+1)*r) of wo_a (r = o_lora_rank), all groups in one per-group matmul (head_matmul with
// the group as the head); the bf16 concatenation goes through wo_b.
Tensor output_projection(const LayerWeights& w, const ModelConfig& c, const Tensor& o) {
  // G: the groups this wo_a holds (a tensor-parallel rank's share, sharding.h).
  const int64_t T = o.size(0), r = c.o_lora_rank, G = w.wo_a.size(0) / r, width = o.numel() / T / G;
  const Device dev = o.device();
  Tensor mid = Tensor::empty({T, G, r}, DType::BF16, dev);
  ops::head_matmul(o.reshape({T, G, width}), w.wo_a.reshape({G, r, width}), mid);
  Tensor out = Tensor::empty({T, c.hidden_size}, DType::BF16, dev);
  w.wo_b.apply(mid.reshape({T, G * r}), out);
  return out;
}

}  // namespace

Tensor attention_forward(const LayerWeights& w, int layer, const Step& s, const Tensor& x) {
  const ModelConfig& c = *s.config;
  const int64_t T = s.tokens(), H = s.attn->heads, D = c.head_dim, rope_off = D - c.qk_rope_head_dim;
  const ops::NormParams norm{static_cast<float>(c.rms_norm_eps)};
  const ops::RopeConfig rope = rope_config(c, w.ratio);
  const ops::NormRopeParams norm_rope{norm, rope, rope_off};
  const Tensor& pos = s.meta().positions;
  const Device dev = x.device();
  DSA_CHECK(x.dtype() == DType::BF16, "deepseek_v4: attention input must be bf16, got {}", x.str());
  const Tensor& xb = x;

  // The projections of x: wq_a, wkv (bf16: the FP8 GEMM's output rounding, read directly by the
  // norms, which compute in f32 and round once) and in compressed layers the compressors' and the
  // indexer's (f32); one launch per set at one token (model/common/linear.h).
  const std::vector<Tensor> xq = w.x_to_bf16.apply(xb, DType::BF16);
  const std::vector<Tensor> xf = w.ratio != 0 ? w.x_to_f32.apply(xb, DType::F32) : std::vector<Tensor>{};

  // q path
  const Tensor& qa = xq[0];
  const Tensor q_res = Tensor::empty({T, c.q_lora_rank}, DType::BF16, dev);
  ops::rms_norm(qa, w.q_norm, q_res, norm);
  Tensor qb = Tensor::empty({T, H * D}, DType::BF16, dev);
  w.wq_b.apply(q_res, qb);
  // per-head unweighted norm, RoPE, bf16, in one launch; the query is padded with zero heads to
  // the count the sparse-MLA kernels run (their outputs are dropped)
  const int64_t Hp = s.attn->heads_padded;
  Tensor qp = Tensor::empty({T, Hp, D}, DType::BF16, dev);
  ops::rms_norm_rope(qb.reshape({T, H, D}), Tensor(), pos, qp, norm_rope);

  // kv path: one 512-wide head (K = V): norm, RoPE, bf16 and the MODEL1 insert into the
  // sliding-window cache in one launch
  const Tensor& kvb = xq[1];
  const kv::KvPool& swa = s.pool(layer, CacheRole::SlidingWindow);
  ops::rms_norm_rope_model1(kvb, w.kv_norm, pos, swa.data, swa.page_size, s.group(layer, CacheRole::SlidingWindow).slots,
                            Tensor(), norm_rope);

  // compressed entries (CSA: the indexer's choice; HCA: all visible)
  Tensor extra_idx;
  if (w.ratio != 0) {
    compress_into_cache(w.compressor, w.ratio, c.head_dim, CacheRole::Compressed, layer, s, xf[0], xf[1], false);
    if (w.ratio == 4) {
      compress_into_cache(w.idx_compressor, w.ratio, c.index_head_dim, CacheRole::IndexerKeys, layer, s, xf[2], xf[3],
                          true);
      extra_idx = indexer_select(w, layer, s, q_res, xf[4]);
    } else {
      extra_idx = s.shared_slots(s.pool(layer, CacheRole::Compressed).group, Step::SlotList::HcaVisible,
                                 [&] { return hca_indices(w.ratio, layer, s); });
    }
  }

  // sparse attention with the sink, through the layer type's selected backend
  ops::SparseMlaParams p;
  p.q = qp;
  p.main = {{formats::KvFormat::Model1, swa.page_size, swa.data}, swa_indices(layer, s), Tensor()};
  if (extra_idx.defined()) {
    const kv::KvPool& cp = s.pool(layer, CacheRole::Compressed);
    p.extra = ops::SparseKeyList{{formats::KvFormat::Model1, cp.page_size, cp.data}, extra_idx, Tensor()};
  }
  p.sink = s.attn->sink.at(layer);
  p.softmax_scale = c.softmax_scale();
  p.o = Tensor::empty({T, Hp, D}, DType::BF16, dev);
  p.lse = Tensor::empty({T, Hp}, DType::F32, dev);
  s.attn->impl.at(layer)->forward(p);
  if (trace_enabled()) {
    if (extra_idx.defined()) trace_tensor(fmt::format("v4.layer{}.extra_slots", layer), extra_idx);
    trace_tensor(fmt::format("v4.layer{}.attn_o", layer), p.o);
  }

  // inverse RoPE on the output (K = V carried the keys' rotation), in place on the bf16 heads:
  // the kernel rotates in f32 and rounds once, as widening, rotating and rounding would; then the
  // grouped output projection (bf16 out: mhc_post reads it as it is).
  Tensor o = p.o.slice(1, 0, H);  // bf16 [T][H][D]
  if (Hp != H) o = ops::cast(o, DType::BF16);  // contiguous heads for the grouped view
  ops::apply_rope(o, pos, rope, {.offset = rope_off, .inverse = true});
  return output_projection(w, c, o);
}

}  // namespace dsa::model::v4
