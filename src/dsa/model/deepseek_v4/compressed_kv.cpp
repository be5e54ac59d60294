#include "dsa/model/deepseek_v4/compressed_kv.h"

#include <cmath>

#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/deepseek_v4/request_state.h"
#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/ops/compressor/compressor.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/sparse_index/sparse_index.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

namespace {

ops::BlockTable blocks_of(const engine::GroupMetadata& g) { return {g.block_table, g.page_size, g.num_pages}; }

}  // namespace

void compress_into_cache(const CompressorWeights& w, int ratio, int64_t head_dim, attn::CacheRole role, int layer,
                         const Step& s, const Tensor& xb, bool indexer) {
  const ModelConfig& c = *s.config;
  const ops::CompressorConfig cfg = compressor_config(c, ratio, head_dim);
  const int64_t T = s.tokens();
  const Device dev = xb.device();
  Tensor kv = Tensor::empty({T, cfg.width()}, DType::F32, dev), score = Tensor::empty({T, cfg.width()}, DType::F32, dev);
  ops::linear_bf16(xb, w.wkv, kv);
  ops::linear_bf16(xb, w.wgate, score);
  const engine::KvPool& pool = s.kv->pool(layer, role);
  const engine::GroupMetadata& g = s.meta->groups.at(pool.group);
  DSA_CHECK(g.ratio == ratio, "deepseek_v4: layer {} {} cache has ratio {}, the compressor {}", layer,
            attn::cache_role_name(role), g.ratio, ratio);
  for (int r = 0; r < s.requests(); ++r) {
    const int64_t q0 = s.query_start[r], q1 = s.query_start[r + 1];
    if (q1 == q0) continue;
    ops::CompressorState& st = indexer ? s.states[r]->layers.at(layer).indexer : s.states[r]->layers.at(layer).kv;
    const int64_t n = ops::compressor_entries_emitted(cfg, st.next_pos, q1 - q0);
    Tensor entries = Tensor::empty({std::max<int64_t>(n, 1), head_dim}, DType::F32, dev);
    const ops::CompressorResult res =
        ops::compressor_forward(cfg, st, kv.slice(0, q0, q1), score.slice(0, q0, q1), w.ape, w.norm, entries);
    // The KV manager allotted slots to exactly the entries these tokens close (entry i at
    // position (i + 1) * ratio - 1): its entry_slots rows for this request are ours, in order.
    const Step::EntryRange e = s.written_entries(pool.group, r);
    DSA_CHECK(res.count == e.count && (res.count == 0 || res.first_entry == e.first_entry),
              "deepseek_v4: layer {} request row {}: the compressor emitted entries [{}, +{}), the KV manager "
              "allotted [{}, +{}) (compressor state out of step with the cache)",
              layer, r, res.first_entry, res.count, e.first_entry, e.count);
    if (res.count == 0) continue;
    formats::kv_insert({.format = indexer ? formats::KvFormat::Indexer : formats::KvFormat::Model1,
                        .page_size = pool.page_size,
                        .cache = pool.data,
                        .kv = ops::cast(entries.slice(0, 0, res.count), DType::BF16),
                        .slots = g.entry_slots.slice(0, e.offset, e.offset + e.count)});
  }
}

Tensor indexer_select(const LayerWeights& w, int layer, const Step& s, const Tensor& xb, const Tensor& q_res) {
  const ModelConfig& c = *s.config;
  const int64_t T = s.tokens(), nh = c.index_n_heads, hd = c.index_head_dim, topk = c.index_topk;
  const Device dev = xb.device();
  Tensor q = Tensor::empty({T, nh * hd}, DType::F32, dev);
  w.idx_wq_b.apply(q_res, q);
  const Tensor q3 = q.reshape({T, nh, hd});
  ops::apply_rope(q3, s.meta->positions, rope_config(c, 4), {.offset = hd - c.qk_rope_head_dim});
  Tensor weights = Tensor::empty({T, nh}, DType::F32, dev);
  ops::linear_bf16(xb, w.idx_weights_proj, weights);

  const engine::KvPool& keys_pool = s.kv->pool(layer, attn::CacheRole::IndexerKeys);
  const engine::GroupMetadata& g = s.meta->groups.at(keys_pool.group);
  const ops::IndexerParams ip = ops::IndexerParams::v4(topk, nh, hd, 4);
  Tensor local = Tensor::empty({T, topk}, DType::I32, dev);
  for (int r = 0; r < s.requests(); ++r) {
    const int64_t q0 = s.query_start[r], q1 = s.query_start[r + 1];
    if (q1 == q0) continue;
    const int64_t N = s.seq_lens[r] / 4;  // entries of the request after this step's compression
    Tensor rows = local.slice(0, q0, q1);
    if (N == 0) {
      rows.fill_bytes(0xFF);  // -1: no entry
      continue;
    }
    // The request's keys, read back from the FP8 indexer cache (what attention-time kernels see).
    Tensor keys = Tensor::empty({N, hd}, DType::F32, dev);
    formats::kv_gather({.format = formats::KvFormat::Indexer, .page_size = keys_pool.page_size,
                        .cache = keys_pool.data, .slots = s.request_entry_slots(keys_pool.group, r), .out = keys});
    ops::indexer_topk(q3.slice(0, q0, q1), keys, weights.slice(0, q0, q1), s.meta->positions.slice(0, q0, q1), ip,
                      rows);
  }
  Tensor idx = Tensor::empty({T, topk}, DType::I32, dev);
  ops::topk_to_global_slots({.local = local, .token_req = s.meta->token_req, .blocks = blocks_of(g), .slots = idx});
  return idx;
}

Tensor hca_indices(int ratio, int layer, const Step& s) {
  const int64_t K = s.meta->max_seq_len / ratio;
  if (K == 0) return Tensor();
  const engine::GroupMetadata& g = s.group(layer, attn::CacheRole::Compressed);
  Tensor idx = Tensor::empty({s.tokens(), K}, DType::I32, s.device);
  ops::hca_visible_slots({.positions = s.meta->positions, .token_req = s.meta->token_req, .blocks = blocks_of(g), .slots = idx}, ratio);
  return idx;
}

}  // namespace dsa::model::v4
