#include "dsa/model/deepseek_v4/compressed_kv.h"

#include <cmath>

#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/deepseek_v4/request_state.h"
#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/model/deepseek_v4/tensor_util.h"
#include "dsa/ops/compressor/compressor.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::model::v4 {

namespace {

ops::BlockTable blocks_of(const engine::GroupMetadata& g) { return {g.block_table, g.page_size, g.num_pages}; }

// Global slot of request-local entry i of request row r (block table of group g; REFERENCE 4).
int64_t entry_slot(const engine::GroupMetadata& g, int64_t r, int64_t i) {
  const int64_t width = g.block_table.size(1), b = i / g.page_size;
  DSA_CHECK(b < width, "deepseek_v4: entry {} of request row {} is past its block table ({} blocks)", i, r, width);
  const int32_t page = g.block_table.data<int32_t>()[r * width + b];
  DSA_CHECK(page >= 0, "deepseek_v4: entry {} of request row {} has no page", i, r);
  return static_cast<int64_t>(page) * g.page_size + i % g.page_size;
}

}  // namespace

void compress_into_cache(const CompressorWeights& w, int ratio, int64_t head_dim, attn::CacheRole role, int layer,
                         const Step& s, const Tensor& xb, bool indexer) {
  const ModelConfig& c = *s.config;
  const ops::CompressorConfig cfg = compressor_config(c, ratio, head_dim);
  const int64_t T = s.tokens();
  Tensor kv = Tensor::empty({T, cfg.width()}, DType::F32), score = Tensor::empty({T, cfg.width()}, DType::F32);
  ops::linear_bf16(xb, w.wkv, kv);
  ops::linear_bf16(xb, w.wgate, score);
  const engine::KvPool& pool = s.kv->pool(layer, role);
  const engine::GroupMetadata& g = s.meta->groups.at(pool.group);
  for (int r = 0; r < s.requests(); ++r) {
    const int64_t q0 = s.query_start[r], q1 = s.query_start[r + 1];
    if (q1 == q0) continue;
    ops::CompressorState& st = indexer ? s.states[r]->layers.at(layer).indexer : s.states[r]->layers.at(layer).kv;
    const int64_t n = ops::compressor_entries_emitted(cfg, st.next_pos, q1 - q0);
    Tensor entries = Tensor::empty({std::max<int64_t>(n, 1), head_dim}, DType::F32);
    const ops::CompressorResult res =
        ops::compressor_forward(cfg, st, kv.slice(0, q0, q1), score.slice(0, q0, q1), w.ape, w.norm, entries);
    if (res.count == 0) continue;
    Tensor slots = Tensor::empty({res.count}, DType::I64);
    for (int64_t k = 0; k < res.count; ++k) slots.data<int64_t>()[k] = entry_slot(g, r, res.first_entry + k);
    formats::kv_insert({.format = indexer ? formats::KvFormat::Indexer : formats::KvFormat::Model1,
                        .page_size = pool.page_size,
                        .cache = pool.data,
                        .kv = cast(entries.slice(0, 0, res.count), DType::BF16),
                        .slots = slots});
  }
}

Tensor indexer_select(const LayerWeights& w, int layer, const Step& s, const Tensor& xb, const Tensor& q_res) {
  const ModelConfig& c = *s.config;
  const int64_t T = s.tokens(), nh = c.index_n_heads, hd = c.index_head_dim, topk = c.index_topk;
  Tensor q = Tensor::empty({T, nh * hd}, DType::F32);
  w.idx_wq_b.apply(q_res, q);
  const Tensor q3 = q.reshape({T, nh, hd});
  ops::apply_rope(q3, s.meta->positions, rope_config(c, 4), {.offset = hd - c.qk_rope_head_dim});
  Tensor weights = Tensor::empty({T, nh}, DType::F32);
  ops::linear_bf16(xb, w.idx_weights_proj, weights);

  const engine::KvPool& keys_pool = s.kv->pool(layer, attn::CacheRole::IndexerKeys);
  const engine::GroupMetadata& g = s.meta->groups.at(keys_pool.group);
  const ops::IndexerParams ip = ops::IndexerParams::v4(topk, nh, hd, 4);
  Tensor local = Tensor::empty({T, topk}, DType::I32);
  for (int r = 0; r < s.requests(); ++r) {
    const int64_t q0 = s.query_start[r], q1 = s.query_start[r + 1];
    if (q1 == q0) continue;
    const int64_t N = s.seq_lens[r] / 4;  // entries of the request after this step's compression
    Tensor rows = local.slice(0, q0, q1);
    if (N == 0) {
      std::fill_n(rows.data<int32_t>(), rows.numel(), -1);
      continue;
    }
    // The request's keys, read back from the FP8 indexer cache (what attention-time kernels see).
    Tensor slots = Tensor::empty({N}, DType::I64);
    for (int64_t i = 0; i < N; ++i) slots.data<int64_t>()[i] = entry_slot(g, r, i);
    Tensor keys = Tensor::empty({N, hd}, DType::F32);
    formats::kv_gather({.format = formats::KvFormat::Indexer, .page_size = keys_pool.page_size,
                        .cache = keys_pool.data, .slots = slots, .out = keys});
    ops::indexer_topk(q3.slice(0, q0, q1), keys, weights.slice(0, q0, q1), s.meta->positions.slice(0, q0, q1), ip,
                      rows);
  }
  Tensor idx = Tensor::empty({T, topk}, DType::I32);
  ops::topk_to_global_slots({.local = local, .token_req = s.meta->token_req, .blocks = blocks_of(g), .slots = idx});
  return idx;
}

Tensor hca_indices(int ratio, int layer, const Step& s) {
  const int64_t K = s.meta->max_seq_len / ratio;
  if (K == 0) return Tensor();
  const engine::GroupMetadata& g = s.group(layer, attn::CacheRole::Compressed);
  Tensor idx = Tensor::empty({s.tokens(), K}, DType::I32);
  ops::hca_visible_slots({.positions = s.meta->positions, .token_req = s.meta->token_req, .blocks = blocks_of(g), .slots = idx}, ratio);
  return idx;
}

}  // namespace dsa::model::v4
