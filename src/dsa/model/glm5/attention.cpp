#include "dsa/model/glm5/attention.h"

#include "dsa/core/error.h"
#include "dsa/core/trace.h"
#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/common/indexer_rows.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::glm5 {

IndexerInputs indexer_inputs(const IndexerWeights& w, const Tensor& x, const Tensor& q_res, const Tensor& positions,
                             const AttentionConfig& cfg, const Tensor& wk_x) {
  const int64_t T = x.size(0), Hi = cfg.index_heads, D = cfg.index_dim;
  const Device dev = x.device();
  ops::RopeParams rp = cfg.rope_params;
  rp.offset = 0;  // the indexer rotates the FIRST qk_rope dims of its 128

  IndexerInputs in;
  in.q = w.wq_b.apply(q_res).reshape({T, Hi, D});
  ops::apply_rope(in.q, positions, cfg.rope, rp);

  const Tensor k_raw = wk_x.defined() ? wk_x : w.wk.apply(x);  // bf16 [T][128]
  in.k = Tensor::empty({T, D}, DType::F32, dev);
  ops::layer_norm(k_raw, w.k_norm_w, w.k_norm_b, in.k, ops::NormParams{1e-6f});
  ops::apply_rope(in.k, positions, cfg.rope, rp);

  in.weights = Tensor::empty({T, Hi}, DType::F32, dev);
  ops::linear_bf16(x, w.weights_proj, in.weights);
  return in;
}

namespace {

// Runs the indexer of a "full" layer: the new tokens' keys go into the layer's paged FP8 key
// cache (the "tokens" group's slots), then every token scores its own request's keys there.
// Leaves the chosen global slots in step.topk_slots.
void run_indexer(const IndexerWeights& w, int layer, const Tensor& x, const Tensor& q_res, const Tensor& wk_x,
                 const AttentionConfig& cfg, Step& step) {
  const int64_t T = step.tokens, Hi = cfg.index_heads, D = cfg.index_dim;
  const Device dev = x.device();
  const IndexerInputs in = indexer_inputs(w, x, q_res, step.positions, cfg, wk_x);
  const Tensor &qi = in.q, &k = in.k, &weights = in.weights;

  const kv::KvPool& keys = step.in->pool(layer, attn::CacheRole::IndexerKeys);
  formats::kv_insert({.format = formats::KvFormat::Indexer,
                      .page_size = keys.page_size,
                      .cache = keys.data,
                      .kv = ops::cast(k, DType::BF16),
                      .slots = step.slots});
  Tensor local = Tensor::empty({T, cfg.index_topk}, DType::I32, dev);
  const ops::IndexerParams ip = ops::IndexerParams::glm(cfg.index_topk, Hi, D);
  paged_indexer_topk(qi, {keys.data, keys.page_size, step.blocks.table, step.token_seg}, weights, step.positions, ip,
                     step.index_len, local);

  ops::TopkToSlotsParams tp;
  tp.local = local;
  tp.token_req = step.token_seg;
  tp.blocks = step.blocks;
  tp.slots = Tensor::empty({T, cfg.index_topk}, DType::I32, dev);
  ops::topk_to_global_slots(tp);
  step.topk_slots = tp.slots;
  if (trace_enabled()) {
    trace_tensor(fmt::format("glm5.layer{}.indexer.q", layer), qi);
    trace_tensor(fmt::format("glm5.layer{}.indexer.k", layer), k);
    trace_tensor(fmt::format("glm5.layer{}.indexer.weights", layer), weights);
    trace_tensor(fmt::format("glm5.layer{}.indexer.local", layer), local, static_cast<int>(local.numel()));
  }
}

}  // namespace

Tensor attention_block(const LayerWeights& w, int layer, const Tensor& x, const AttentionConfig& cfg,
                       const attn::AttentionImpl& impl, const ops::PagedKvCache& cache, Step& step) {
  const int64_t T = step.tokens, H = cfg.heads, Hp = cfg.heads_padded;
  const int64_t Dn = cfg.qk_nope, Dr = cfg.qk_rope, C = cfg.kv_lora;
  const Device dev = x.device();
  const ops::NormParams rms{cfg.lora_norm_eps};

  // q_a, [the indexer's wk,] kv_a of x: one launch at one token (model/common/linear.h).
  const std::vector<Tensor> xp = w.x_proj.apply(x, DType::BF16);

  // Queries.
  Tensor q_res = xp.front();
  ops::rms_norm(q_res, w.q_a_norm, q_res, rms);
  Tensor q = w.q_b.apply(q_res).reshape({T, H, Dn + Dr});
  ops::RopeParams rp = cfg.rope_params;
  rp.offset = Dn;
  ops::apply_rope(q, step.positions, cfg.rope, rp);

  // Latent + rope key of the new tokens, into the cache.
  Tensor kv = xp.back();  // [T][512 + 64]
  ops::rms_norm(kv.slice(1, 0, C), w.kv_a_norm, kv.slice(1, 0, C), rms);
  rp.offset = 0;
  ops::apply_rope(kv.slice(1, C, C + Dr), step.positions, cfg.rope, rp);
  formats::KvInsertParams ins;
  ins.format = formats::KvFormat::DsMla;
  ins.page_size = cache.page_size;
  ins.cache = cache.data;
  ins.kv = kv;
  ins.slots = step.slots;
  ins.rounding = formats::ScaleRounding::Pow2Ceil;
  formats::kv_insert(ins);

  // Which keys each query reads.
  if (w.has_indexer) run_indexer(w.indexer, layer, x, q_res, xp.at(1), cfg, step);
  DSA_CHECK(step.topk_slots.defined(), "glm5 layer {}: a shared indexer layer needs a full layer before it", layer);

  // Absorbed query [W_UK q_nope | q_rope] per head, written straight into the padded layout
  // the attention kernels take (heads H..Hp stay zero).
  const Tensor q_full = Tensor::zeros({T, Hp, C + Dr}, DType::BF16, dev);
  const Tensor q_heads = q_full.slice(1, 0, H);
  ops::head_matmul(q.slice(2, 0, Dn), w.w_uk, q_heads.slice(2, 0, C));
  ops::copy_cast(q_heads.slice(2, C, C + Dr), q.slice(2, Dn, Dn + Dr));

  ops::SparseMlaParams sp;
  sp.q = q_full;
  sp.main.cache = cache;
  sp.main.indices = step.topk_slots;
  sp.softmax_scale = cfg.softmax_scale;
  sp.o = Tensor::empty({T, Hp, C}, DType::BF16, dev);
  sp.lse = Tensor::empty({T, Hp}, DType::F32, dev);
  impl.forward(sp);
  if (trace_enabled()) {
    trace_tensor(fmt::format("glm5.layer{}.attn.q", layer), q_full);
    trace_tensor(fmt::format("glm5.layer{}.attn.o", layer), sp.o);
  }

  // Latent output -> v per head -> o_proj.
  Tensor v = Tensor::empty({T, H, cfg.v_head}, DType::BF16, dev);
  ops::head_matmul(sp.o.slice(1, 0, H), w.w_uv, v);
  return w.o_proj.apply(v.reshape({T, H * cfg.v_head}));
}

}  // namespace dsa::model::glm5
