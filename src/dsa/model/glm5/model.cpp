#include "dsa/model/glm5/model.h"

#include <cstdlib>

#include "dsa/attention/plan.h"
#include "dsa/attention/registry.h"
#include "dsa/engine/batch.h"
#include "dsa/attention/selector.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/trace.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::glm5 {

namespace {

constexpr int kPageSize = 64;  // tokens per latent-cache page (fp8_ds_mla, docs/kv-cache.md)

int64_t padded_heads(int64_t h) {
  for (int64_t p : {16, 32, 64, 128})
    if (h <= p) return p;
  fail("glm5: {} attention heads; the sparse attention kernels take at most 128", h);
}

std::unique_ptr<attn::AttentionImpl> make_attention_impl(Device dev, const AttentionConfig& a) {
  attn::AttentionQuery q;
  if (dev.is_cuda()) {
    const auto& devs = cuda_devices();
    DSA_CHECK(dev.index >= 0 && dev.index < static_cast<int>(devs.size()), "glm5: no CUDA device {} ({})", dev.index,
              cuda_unavailable_reason());
    q.capability = devs[static_cast<size_t>(dev.index)].capability;
    q.build_cuda_archs = build_cuda_arch_list();
  }
  q.dtype = DType::BF16;
  q.kv_cache_dtype = attn::KvCacheDtype::Fp8DsMla;
  q.head_size = static_cast<int>(a.kv_lora + a.qk_rope);
  q.v_head_size = static_cast<int>(a.kv_lora);
  q.num_heads = static_cast<int>(a.heads_padded);
  q.page_sizes = {kPageSize};
  q.mla = true;
  q.sparse = true;
  q.sink = false;
  attn::register_builtin_attention_backends();  // idempotent
  attn::SelectOptions so;
  so.log = false;
  const attn::Selection sel = attn::select_attention_backend(q, so);
  attn::AttentionImplConfig ic;
  ic.query = q;
  ic.kind = attn::LayerKind::MlaSparse;
  ic.topk = static_cast<int>(a.index_topk);
  ic.softmax_scale = a.softmax_scale;
  return sel.backend->create_impl(ic);
}

// The engine's KV manager over this model's attention plan (pages of 64 tokens). The plan is
// made for the padded head count the kernels run with.
engine::KvManager make_kv_manager(const ModelConfig& cfg, Device dev, const AttentionConfig& a, int64_t pages) {
  attn::register_builtin_attention_backends();
  std::vector<attn::AttentionLayerSpec> layers = cfg.attention_layers();
  for (auto& l : layers) l.num_heads = static_cast<int>(a.heads_padded);
  attn::PlanOptions po;
  if (dev.is_cuda()) {
    po.capability = cuda_devices().at(static_cast<size_t>(dev.index)).capability;
    po.build_cuda_archs = build_cuda_arch_list();
  }
  po.kv_cache_dtype = attn::KvCacheDtype::Fp8DsMla;
  po.block_size = kPageSize;
  po.select.log = false;
  engine::KvManagerOptions ko;
  ko.device = dev;
  ko.num_blocks = pages;
  ko.max_position = cfg.max_position_embeddings;
  return engine::KvManager::for_model(cfg, attn::plan_attention(layers, po), ko);
}

}  // namespace

Model::Model(const std::string& dir, Device device, const Options& opt) : device_(device) {
  cfg_ = load_model_config(dir);
  DSA_CHECK(cfg_.arch == Arch::GlmMoeDsa, "glm5: {} is a {} checkpoint", dir, arch_name(cfg_.arch));
  DSA_CHECK(cfg_.rope.type == "default", "glm5: rope type '{}' is not supported (GLM uses plain RoPE)", cfg_.rope.type);
  DSA_CHECK(cfg_.norm_topk_prob && cfg_.n_group == 1,
            "glm5: routing with norm_topk_prob={} n_group={} is not supported (GLM-5.1: true, 1)", cfg_.norm_topk_prob,
            cfg_.n_group);
  LoadOptions lo;
  lo.device = Device::cpu();  // memory-mapped; build_weights reshapes and moves to `device`
  lo.progress = false;
  const LoadedWeights lw = load_glm5(dir, lo, &dims_);
  w_ = build_weights(lw, dims_, device, opt.absorbed_dtype);

  AttentionConfig& a = attn_cfg_;
  a.heads = dims_.heads;
  a.heads_padded = padded_heads(dims_.heads);
  a.qk_nope = dims_.qk_nope;
  a.qk_rope = dims_.qk_rope;
  a.v_head = dims_.v_head;
  a.kv_lora = dims_.kv_lora;
  DSA_CHECK(a.kv_lora == 512 && a.qk_rope == 64, "glm5: kv_lora_rank {} / qk_rope_head_dim {}: the fp8_ds_mla cache "
                                                 "holds 512 + 64", a.kv_lora, a.qk_rope);
  a.index_heads = dims_.index_heads;
  a.index_dim = dims_.index_head_dim;
  a.index_topk = cfg_.index_topk;
  a.softmax_scale = cfg_.softmax_scale();
  a.rope = ops::RopeConfig::glm(cfg_.rope.theta);
  a.rope.rope_dim = a.qk_rope;
  mlp_cfg_.topk = cfg_.num_experts_per_tok;
  mlp_cfg_.routed_scaling = static_cast<float>(cfg_.routed_scaling_factor);

  int64_t pages = opt.kv_pages;
  if (pages <= 0) {
    const char* env = std::getenv("DSA_GLM5_KV_PAGES");
    pages = env && *env ? std::atoll(env) : 256;
  }
  kv_ = std::make_unique<engine::KvManager>(make_kv_manager(cfg_, device, a, pages));
  latent_group_ = kv_->pool(0, attn::CacheRole::Latent).group;
  attn_impl_ = make_attention_impl(device, a);
}

int Model::add_request() {
  const int id = next_id_++;
  kv_->add_request(id);
  requests_[id].index_keys.resize(w_.layers.size());
  return id;
}

void Model::free_request(int id) {
  auto it = requests_.find(id);
  DSA_CHECK(it != requests_.end(), "glm5: unknown request {}", id);
  kv_->release(id);
  requests_.erase(it);
}

Step Model::prepare(const ForwardBatch& b) {
  const int64_t T = static_cast<int64_t>(b.token_ids.size());
  DSA_CHECK(T > 0, "glm5 forward: empty batch");
  DSA_CHECK(b.request.size() == b.token_ids.size() && b.positions.size() == b.token_ids.size(),
            "glm5 forward: token_ids ({}), request ({}) and positions ({}) differ in length", T, b.request.size(),
            b.positions.size());
  for (int64_t t = 0; t < T; ++t) {
    DSA_CHECK(requests_.count(b.request[t]), "glm5 forward: token {} names unknown request {}", t, b.request[t]);
    DSA_CHECK(b.token_ids[t] >= 0 && b.token_ids[t] < cfg_.vocab_size,
              "glm5 forward: token {} has id {} outside the vocabulary [0, {})", t, b.token_ids[t], cfg_.vocab_size);
  }
  // Checks the batch (segments, positions continuing each request's cache), allocates pages and
  // returns the slots and block tables; changes nothing when it throws.
  engine::Batch eb = engine::batch_of(b);
  const engine::BatchMetadata md = kv_->prepare(eb);
  const engine::GroupMetadata& g = md.groups.at(static_cast<size_t>(latent_group_));

  Step s;
  s.tokens = T;
  for (const engine::Batch::Segment& seg : eb.segments())
    s.segments.push_back({&requests_.at(static_cast<int>(seg.id)), seg.first, seg.count, seg.start});
  s.positions = md.positions;
  s.token_seg = md.token_req;
  s.slots = g.slots;
  s.blocks.table = g.block_table;
  s.blocks.page_size = g.page_size;
  s.blocks.num_pages = g.num_pages;

  // Indexer key buffers for the new positions.
  for (Segment& sg : s.segments) {
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      if (!w_.layers[l].has_indexer) continue;
      Tensor& keys = sg.req->index_keys[l];
      const int64_t need = sg.start + sg.count;
      if (keys.defined() && keys.size(0) >= need) continue;
      int64_t cap = keys.defined() ? keys.size(0) : 64;
      while (cap < need) cap *= 2;
      Tensor grown = Tensor::empty({cap, attn_cfg_.index_dim}, DType::F32, device_);
      if (keys.defined() && sg.start > 0) grown.slice(0, 0, sg.start).copy_from(keys.slice(0, 0, sg.start));
      keys = grown;
    }
  }
  return s;
}

Tensor Model::forward(const ForwardBatch& batch, bool all_logits) {
  Step step = prepare(batch);
  const int64_t T = step.tokens, Hd = dims_.hidden;
  const ops::NormParams rms{static_cast<float>(cfg_.rms_norm_eps)};

  // Residual stream in f32; block inputs and outputs in bf16. Everything below runs on the
  // model's device: the token ids (checked against the vocabulary in prepare) go up once.
  const Tensor ids =
      Tensor::from_blob(const_cast<int32_t*>(batch.token_ids.data()), {T}, DType::I32).to(device_);
  Tensor x = Tensor::empty({T, Hd}, DType::F32, device_);
  ops::embed_rows(w_.embed, ids, x);
  trace_tensor("glm5.embed", x);
  Tensor h = Tensor::empty({T, Hd}, DType::BF16, device_);
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const LayerWeights& L = w_.layers[l];
    ops::rms_norm(x, L.input_norm, h, rms);
    ops::PagedKvCache cache;
    cache.kind = ops::KvCacheKind::Fp8DsMla;
    const engine::KvPool& pool = kv_->pool(static_cast<int>(l), attn::CacheRole::Latent);
    cache.page_size = pool.page_size;
    cache.data = pool.data;
    ops::add_into(x, attention_block(L, static_cast<int>(l), h, attn_cfg_, *attn_impl_, cache, step));
    ops::rms_norm(x, L.post_attn_norm, h, rms);
    ops::add_into(x, mlp_block(L, h, mlp_cfg_, moe_ws_));
    if (trace_enabled()) trace_tensor(fmt::format("glm5.layer{}.x", l), x);
  }

  // Rows that get logits: every token, or the last token of each request.
  Tensor rows = x;
  if (!all_logits) {
    rows = Tensor::empty({static_cast<int64_t>(step.segments.size()), Hd}, DType::F32, device_);
    for (size_t i = 0; i < step.segments.size(); ++i) {
      const int64_t t = step.segments[i].first + step.segments[i].count - 1;
      rows.slice(0, static_cast<int64_t>(i), static_cast<int64_t>(i) + 1).copy_from(x.slice(0, t, t + 1));
    }
  }
  Tensor hn = Tensor::empty({rows.size(0), Hd}, DType::BF16, device_);
  ops::rms_norm(rows, w_.final_norm, hn, rms);
  Tensor logits = Tensor::empty({rows.size(0), w_.lm_head.size(0)}, DType::F32, device_);
  ops::linear_bf16(hn, w_.lm_head, logits);
  return logits.to(Device::cpu());
}

}  // namespace dsa::model::glm5
