#include "dsa/model/deepseek_v4/attention.h"

#include <algorithm>

#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/deepseek_v4/compressed_kv.h"
#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/model/deepseek_v4/tensor_util.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/sparse_index/sparse_index.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::model::v4 {

namespace {

using attn::CacheRole;

ops::BlockTable blocks_of(const engine::GroupMetadata& g) { return {g.block_table, g.page_size, g.num_pages}; }

// The sparse-MLA op runs 16, 32, 64 or 128 heads; smaller models are padded with zero queries
// (their outputs are dropped).
int64_t padded_heads(int64_t H) {
  for (int64_t h : {16, 32, 64, 128})
    if (H <= h) return h;
  fail("deepseek_v4: {} attention heads; the sparse attention op supports at most 128", H);
}

// Sliding-window keys: the last `window` positions of each token's request.
Tensor swa_indices(int layer, const Step& s) {
  const engine::GroupMetadata& g = s.group(layer, CacheRole::SlidingWindow);
  Tensor idx = Tensor::empty({s.tokens(), s.config->sliding_window}, DType::I32);
  ops::swa_window_slots({.positions = s.meta->positions, .token_req = s.meta->token_req, .blocks = blocks_of(g), .slots = idx});
  return idx;
}

// Grouped output projection: o [T][H*D] bf16 viewed as [T][G][H*D/G]; group g goes through rows
// [g*r, (g+1)*r) of wo_a (r = o_lora_rank); the concatenation goes through wo_b.
Tensor output_projection(const LayerWeights& w, const ModelConfig& c, const Tensor& o) {
  const int64_t T = o.size(0), G = c.o_groups, r = c.o_lora_rank, width = o.size(1) / G;
  Tensor mid = Tensor::empty({T, G * r}, DType::BF16);
  Tensor part = Tensor::empty({T, r}, DType::F32);
  const Tensor o3 = o.reshape({T, G, width});
  for (int64_t g = 0; g < G; ++g) {
    ops::linear_bf16(o3.select(1, g).contiguous(), w.wo_a.slice(0, g * r, (g + 1) * r), part);
    const Tensor pb = cast(part, DType::BF16);
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(pb.data<uint16_t>() + t * r, r, mid.data<uint16_t>() + t * G * r + g * r);
  }
  Tensor out = Tensor::empty({T, c.hidden_size}, DType::F32);
  w.wo_b.apply(mid, out);
  return out;
}

}  // namespace

Tensor attention_forward(const LayerWeights& w, int layer, const Step& s, const Tensor& x) {
  const ModelConfig& c = *s.config;
  const int64_t T = s.tokens(), H = c.num_heads, D = c.head_dim, rope_off = D - c.qk_rope_head_dim;
  const ops::NormParams norm{static_cast<float>(c.rms_norm_eps)};
  const ops::RopeConfig rope = rope_config(c, w.ratio);
  const Tensor& pos = s.meta->positions;
  const Tensor xb = cast(x, DType::BF16);

  // q path
  Tensor qa = Tensor::empty({T, c.q_lora_rank}, DType::F32);
  w.wq_a.apply(xb, qa);
  ops::rms_norm(qa, w.q_norm, qa, norm);
  const Tensor q_res = cast(qa, DType::BF16);
  Tensor q = Tensor::empty({T, H * D}, DType::F32);
  w.wq_b.apply(q_res, q);
  ops::rms_norm(q.reshape({T * H, D}), Tensor(), q.reshape({T * H, D}), norm);  // per head, no weight
  ops::apply_rope(q.reshape({T, H, D}), pos, rope, {.offset = rope_off});

  // kv path: one 512-wide head (K = V) into the sliding-window cache
  Tensor kv = Tensor::empty({T, D}, DType::F32);
  w.wkv.apply(xb, kv);
  ops::rms_norm(kv, w.kv_norm, kv, norm);
  ops::apply_rope(kv, pos, rope, {.offset = rope_off});
  const engine::KvPool& swa = s.kv->pool(layer, CacheRole::SlidingWindow);
  formats::kv_insert({.format = formats::KvFormat::Model1, .page_size = swa.page_size, .cache = swa.data,
                      .kv = cast(kv, DType::BF16), .slots = s.group(layer, CacheRole::SlidingWindow).slots});

  // compressed entries (CSA: the indexer's choice; HCA: all visible)
  Tensor extra_idx;
  if (w.ratio != 0) {
    compress_into_cache(w.compressor, w.ratio, c.head_dim, CacheRole::Compressed, layer, s, xb, false);
    if (w.ratio == 4) {
      compress_into_cache(w.idx_compressor, w.ratio, c.index_head_dim, CacheRole::IndexerKeys, layer, s, xb, true);
      extra_idx = indexer_select(w, layer, s, xb, q_res);
    } else {
      extra_idx = hca_indices(w.ratio, layer, s);
    }
  }

  // sparse attention with the sink
  const int64_t Hp = padded_heads(H);
  Tensor qp = Tensor::zeros({T, Hp, D}, DType::BF16);
  {
    const Tensor qb = cast(q, DType::BF16);
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(qb.data<uint16_t>() + t * H * D, H * D, qp.data<uint16_t>() + t * Hp * D);
  }
  Tensor sink = Tensor::zeros({Hp}, DType::F32);
  sink.slice(0, 0, H).copy_from(w.sink.to(Device::cpu()));
  ops::SparseMlaParams p;
  p.q = qp;
  p.main = {{ops::KvCacheKind::Fp8Model1, swa.page_size, swa.data}, swa_indices(layer, s), Tensor()};
  if (extra_idx.defined()) {
    const engine::KvPool& cp = s.kv->pool(layer, CacheRole::Compressed);
    p.extra = ops::SparseKeyList{{ops::KvCacheKind::Fp8Model1, cp.page_size, cp.data}, extra_idx, Tensor()};
  }
  p.sink = sink;
  p.softmax_scale = c.softmax_scale();
  p.o = Tensor::empty({T, Hp, D}, DType::BF16);
  p.lse = Tensor::empty({T, Hp}, DType::F32);
  ops::sparse_mla_decode(p);

  // inverse RoPE on the output (K = V carried the keys' rotation), grouped output projection
  Tensor o = Tensor::empty({T, H, D}, DType::F32);
  for (int64_t t = 0; t < T; ++t) o.select(0, t).copy_from(cast(p.o.select(0, t).slice(0, 0, H), DType::F32));
  ops::apply_rope(o, pos, rope, {.offset = rope_off, .inverse = true});
  return output_projection(w, c, cast(o.reshape({T, H * D}), DType::BF16));
}

}  // namespace dsa::model::v4
