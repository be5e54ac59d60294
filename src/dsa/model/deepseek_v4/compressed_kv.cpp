#include "dsa/model/deepseek_v4/compressed_kv.h"

#include "dsa/core/error.h"
#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/common/indexer_rows.h"
#include "dsa/model/deepseek_v4/compressor_state.h"
#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/ops/compressor/compressor_batch.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::model::v4 {

namespace {

ops::BlockTable blocks_of(const kv::GroupMetadata& g) { return {g.block_table, g.page_size, g.num_pages}; }

}  // namespace

void compress_into_cache(const CompressorWeights& w, int ratio, int64_t head_dim, attn::CacheRole role, int layer,
                         const Step& s, const Tensor& kv, const Tensor& score, bool indexer) {
  const ModelConfig& c = *s.config;
  const ops::CompressorConfig cfg = compressor_config(c, ratio, head_dim);
  const Device dev = kv.device();
  DSA_CHECK(kv.dim() == 2 && kv.size(1) == cfg.width() && score.shape() == kv.shape(),
            "deepseek_v4: layer {} compressor inputs {} / {}, expected [T][{}]", layer, kv.str(), score.str(),
            cfg.width());
  const kv::KvPool& pool = s.pool(layer, role);
  const kv::GroupMetadata& g = s.meta().groups.at(static_cast<size_t>(pool.group));
  DSA_CHECK(g.ratio == ratio, "deepseek_v4: layer {} {} cache has ratio {}, the compressor {}", layer,
            attn::cache_role_name(role), g.ratio, ratio);
  const kv::BatchMetadata& m = s.meta();
  ops::CompressorBatch b;
  b.state = s.in->kv->state_pool(layer, indexer ? kIndexerCompressorState : kCompressorState).data;
  b.state_slots = m.state_slots;
  b.query_start = m.query_start;
  b.cached_lens = m.cached_lens;
  b.entry_start = g.entry_start;
  // The KV manager allotted slots to exactly the entries these tokens close (entry i at position
  // (i + 1) * ratio - 1), request by request: its entry rows are the compressor's output rows, one
  // per token (kv/batch_metadata.h); rows past a request's entries are not written and their slot
  // is -1, so the insert skips them. Both launches run whether or not any entry closes (fixed
  // shapes for a captured decode step).
  Tensor entries = Tensor::empty({g.entry_rows(), head_dim}, DType::BF16, dev);
  ops::compressor_forward_batch(cfg, b, kv, score, w.ape, w.norm, entries);
  formats::kv_insert({.format = indexer ? formats::KvFormat::Indexer : formats::KvFormat::Model1,
                      .page_size = pool.page_size,
                      .cache = pool.data,
                      .kv = entries,
                      .slots = g.entry_slots});
}

Tensor indexer_select(const LayerWeights& w, int layer, const Step& s, const Tensor& q_res, const Tensor& weights) {
  const ModelConfig& c = *s.config;
  const int64_t T = s.tokens(), nh = c.index_n_heads, hd = c.index_head_dim, topk = c.index_topk;
  const Device dev = q_res.device();
  const kv::BatchMetadata& m = s.meta();
  Tensor q = Tensor::empty({T, nh * hd}, DType::F32, dev);
  w.idx_wq_b.apply(q_res, q);
  const Tensor q3 = q.reshape({T, nh, hd});
  ops::apply_rope(q3, m.positions, rope_config(c, 4), {.offset = hd - c.qk_rope_head_dim});
  DSA_CHECK(weights.dim() == 2 && weights.size(0) == T && weights.size(1) == nh,
            "deepseek_v4: layer {} indexer weights {}, expected [{}][{}]", layer, weights.str(), T, nh);

  const kv::KvPool& keys_pool = s.pool(layer, attn::CacheRole::IndexerKeys);
  const kv::GroupMetadata& g = m.groups.at(static_cast<size_t>(keys_pool.group));
  const ops::IndexerParams ip = ops::IndexerParams::v4(topk, nh, hd, 4);
  Tensor local = Tensor::empty({T, topk}, DType::I32, dev);
  // Every token scores its own request's keys straight from the FP8 key cache; N bounds the
  // entries any token of the step sees (the step's bucketed context: each token is limited by its
  // own position, so the extra candidates are never visible).
  paged_indexer_topk(q3, {keys_pool.data, keys_pool.page_size, g.block_table, m.token_req}, weights, m.positions, ip,
                     m.index_len / 4, local);
  Tensor idx = Tensor::empty({T, topk}, DType::I32, dev);
  ops::topk_to_global_slots({.local = local, .token_req = m.token_req, .blocks = blocks_of(g), .slots = idx});
  return idx;
}

Tensor hca_indices(int ratio, int layer, const Step& s) {
  const int64_t K = s.meta().index_len / ratio;  // bucketed: slots past a token's visible entries are -1
  if (K == 0) return Tensor();
  const kv::GroupMetadata& g = s.group(layer, attn::CacheRole::Compressed);
  Tensor idx = Tensor::empty({s.tokens(), K}, DType::I32, s.device);
  ops::hca_visible_slots({.positions = s.meta().positions, .token_req = s.meta().token_req, .blocks = blocks_of(g), .slots = idx}, ratio);
  return idx;
}

}  // namespace dsa::model::v4
