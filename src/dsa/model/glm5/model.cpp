#include "dsa/model/glm5/model.h"


#include "dsa/attention/plan.h"
#include "dsa/model/cache_specs.h"
#include "dsa/attention/registry.h"
#include "dsa/attention/selector.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/trace.h"
#include "dsa/model/common/head_padding.h"
#include "dsa/model/common/vocab_parallel.h"
#include "dsa/model/dummy_weights.h"
#include "dsa/model/glm5/sharding.h"
#include "dsa/model/schema/from_model_config.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::glm5 {

namespace {

constexpr int kPageSize = 64;  // tokens per latent-cache page (fp8_ds_mla, docs/kv-cache.md)

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

// The attention plan of the model's layer types (pages of 64 tokens), for the padded head count
// the kernels run with.
std::vector<attn::LayerPlan> plan_for(const ModelConfig& cfg, Device dev, const AttentionConfig& a) {
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
  return attn::plan_attention(layers, po);
}

void add_bytes(size_t& b, const Tensor& t) { b += t.defined() ? t.nbytes() : 0; }
// (x_proj's parts are views: their bytes add up to the fused weight's.)
void add_linear(size_t& b, const Linear& l) { b += l.nbytes(); }

// Bytes of one layer's weights as the forward reads them.
size_t layer_bytes(const LayerWeights& L) {
  size_t b = 0;
  for (const Tensor* t : {&L.input_norm, &L.post_attn_norm, &L.q_a_norm, &L.kv_a_norm, &L.w_uk, &L.w_uv}) add_bytes(b, *t);
  for (const Linear* l : {&L.q_a, &L.q_b, &L.kv_a, &L.o_proj}) add_linear(b, *l);
  if (L.has_indexer) {
    add_linear(b, L.indexer.wq_b);
    add_linear(b, L.indexer.wk);
    for (const Tensor* t : {&L.indexer.k_norm_w, &L.indexer.k_norm_b, &L.indexer.weights_proj}) add_bytes(b, *t);
  }
  add_bytes(b, L.moe.gate);
  add_bytes(b, L.moe.gate_bias);
  for (const ops::ExpertWeights* e : {&L.moe.w13, &L.moe.w2, &L.moe.shared_w13, &L.moe.shared_w2}) {
    add_bytes(b, e->weight);
    add_bytes(b, e->scale);
  }
  return b;
}

size_t weight_bytes_of(const Weights& w) {
  size_t b = 0;
  for (const Tensor* t : {&w.embed, &w.final_norm, &w.lm_head}) add_bytes(b, *t);
  for (const LayerWeights& L : w.layers) b += layer_bytes(L);
  for (const MtpWeights& M : w.mtp) {
    b += layer_bytes(M.layer);
    for (const Tensor* t : {&M.enorm, &M.hnorm, &M.shared_norm}) add_bytes(b, *t);
    add_linear(b, M.eh_proj);
  }
  return b;
}

}  // namespace

Model::Model(const std::string& dir, Device device, const Options& opt) : device_(device) {
  cfg_ = model_config_for_load(dir, opt.weights.format, opt.weights.layers);
  DSA_CHECK(cfg_.arch == Arch::GlmMoeDsa, "glm5: {} is a {} checkpoint", dir, arch_name(cfg_.arch));
  DSA_CHECK(cfg_.rope.type == "default", "glm5: rope type '{}' is not supported (GLM uses plain RoPE)", cfg_.rope.type);
  DSA_CHECK(cfg_.norm_topk_prob && cfg_.n_group == 1,
            "glm5: routing with norm_topk_prob={} n_group={} is not supported (GLM-5.1: true, 1)", cfg_.norm_topk_prob,
            cfg_.n_group);
  LoadOptions lo;
  lo.device = Device::cpu();  // memory-mapped; build_weights reshapes and moves to `device`
  lo.progress = false;
  LoadedWeights lw;
  if (opt.weights.dummy()) {
    dims_ = schema::glm5_dims(cfg_);
    lw = dummy_model_weights(cfg_, Device::cpu(), opt.weights.seed, opt.load_mtp);
  } else {
    lw = load_glm5(dir, lo, &dims_);
  }
  const int tp = opt.shards ? opt.shards->size() : 1;
  const int64_t local_heads = tp_local_heads(dims_, tp);  // checked before the weights are built
  Shard shard;
  if (tp > 1) shard = {opt.shards->rank(), tp, opt.expert_parallel};
  w_ = build_weights(lw, dims_, device, opt.absorbed_dtype, opt.load_mtp, shard);
  if (tp > 1) shards_ = opt.shards;

  AttentionConfig& a = attn_cfg_;
  a.heads = local_heads;
  a.heads_padded = padded_heads(local_heads, "glm5");
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

  plans_ = plan_for(cfg_, device, a);
  weight_bytes_ = weight_bytes_of(w_);
  attn_impl_ = make_attention_impl(device, a);
}

std::vector<size_t> Model::layer_weight_bytes() const {
  std::vector<size_t> v;
  for (const LayerWeights& L : w_.layers) v.push_back(layer_bytes(L));
  return v;
}

kv::KvRequirements Model::kv_requirements() const {
  kv::KvRequirements r;
  r.groups = kv_cache_groups(cfg_, plans_);
  r.block_size = kPageSize;
  return r;
}

void Model::reserve(int64_t max_tokens, int max_requests) {
  // Step temporaries come from the engine's step arena; the MoE workspace persists across steps
  // and is sized by moe_layer on first use (outside the arena).
  (void)max_tokens;
  (void)max_requests;
}

void Model::forward(const StepInputs& in, const Tensor& logits) {
  const kv::BatchMetadata& md = *in.meta;
  const int64_t T = md.num_tokens(), Hd = dims_.hidden;
  DSA_CHECK(T > 0 && md.token_ids.defined(), "glm5 forward: a step needs token ids (got {} tokens)", T);
  DSA_CHECK(in.logit_rows.defined() && in.logit_rows.dim() == 1, "glm5 forward: logit_rows must be i32 [N]");
  const int64_t R = in.logit_rows.size(0);
  logits.check("glm5 forward: logits", DType::F32, {R, dims_.vocab});
  Step step = make_step(in);

  // Residual stream in f32; block inputs and outputs in bf16. Everything below runs on the
  // model's device.
  Tensor x = Tensor::empty({T, Hd}, DType::F32, device_);
  ops::embed_rows(w_.embed, md.token_ids, x);
  trace_tensor("glm5.embed", x);
  Tensor h = Tensor::empty({T, Hd}, DType::BF16, device_);
  Tensor pending;  // the last layer's MLP output, added into the next layer's input norm
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    in.mark(static_cast<int>(l));
    pending = layer_forward(w_.layers[l], static_cast<int>(l), x, h, step, /*sharded=*/shards_ != nullptr, pending);
    if (trace_enabled()) {
      ops::add_into(x, pending);
      pending = Tensor();
      trace_tensor(fmt::format("glm5.layer{}.x", l), x);
    }
  }
  if (pending.defined()) ops::add_into(x, pending);

  in.mark(static_cast<int>(w_.layers.size()));
  if (in.hidden_out.defined()) ops::copy_cast(in.hidden_out, x);
  head_logits(x, in.logit_rows, w_.final_norm, logits);
}

Step Model::make_step(const StepInputs& in) const {
  const kv::BatchMetadata& md = *in.meta;
  const kv::KvPool& latent0 = in.pool(0, attn::CacheRole::Latent);
  const kv::GroupMetadata& g = md.groups.at(static_cast<size_t>(latent0.group));
  Step step;
  step.in = &in;
  step.tokens = md.num_tokens();
  step.index_len = md.index_len;
  step.positions = md.positions;
  step.token_seg = md.token_req;
  step.slots = g.slots;
  step.blocks = {g.block_table, g.page_size, g.num_pages};
  return step;
}

Tensor Model::layer_forward(const LayerWeights& L, int l, const Tensor& x, const Tensor& h, Step& step, bool sharded,
                           const Tensor& pending) {
  const ops::NormParams rms{static_cast<float>(cfg_.rms_norm_eps)};
  if (pending.defined()) ops::add_rms_norm(x, pending, L.input_norm, h, rms);
  else ops::rms_norm(x, L.input_norm, h, rms);
  ops::PagedKvCache cache;
  cache.kind = formats::KvFormat::DsMla;
  const kv::KvPool& pool = step.in->pool(l, attn::CacheRole::Latent);
  cache.page_size = pool.page_size;
  cache.data = pool.data;
  Tensor attn = attention_block(L, l, h, attn_cfg_, *attn_impl_, cache, step);
  if (sharded) shards_->all_reduce_sum(attn);  // row-parallel o_proj: the ranks' partial sums
  ops::add_rms_norm(x, attn, L.post_attn_norm, h, rms);
  Tensor mlp = mlp_block(L, h, mlp_cfg_, moe_ws_);
  if (sharded) shards_->all_reduce_sum(mlp);  // row-parallel down projections
  return mlp;
}

void Model::head_logits(const Tensor& x, const Tensor& logit_rows, const Tensor& norm, const Tensor& logits) const {
  const int64_t R = logit_rows.size(0), Hd = dims_.hidden;
  const ops::NormParams rms{static_cast<float>(cfg_.rms_norm_eps)};
  Tensor rows = Tensor::empty({R, Hd}, DType::F32, device_);
  ops::embed_rows(x, logit_rows, rows);
  Tensor hn = Tensor::empty({R, Hd}, DType::BF16, device_);
  ops::rms_norm(rows, norm, hn, rms);
  lm_head_logits(hn, w_.lm_head, shards_, logits);  // whole, or the rank's vocabulary share + all-gather
}

void Model::draft(const StepInputs& in, const Tensor& logits) {
  if (w_.mtp.empty()) CausalLM::draft(in, logits);  // throws: no MTP layer
  const MtpWeights& M = w_.mtp[0];
  const kv::BatchMetadata& md = *in.meta;
  const int64_t T = md.num_tokens(), Hd = dims_.hidden;
  DSA_CHECK(T > 0 && md.token_ids.defined(), "glm5 draft: a step needs token ids (got {} tokens)", T);
  DSA_CHECK(in.hidden_src.defined() && in.hidden_src.dim() == 2 && in.hidden_src.size(1) == Hd &&
                in.hidden_rows.defined() && in.hidden_rows.numel() == T,
            "glm5 draft: hidden_src must be f32 [S][{}] and hidden_rows i32 [{}]", Hd, T);
  logits.check("glm5 draft: logits", DType::F32, {in.logit_rows.size(0), dims_.vocab});
  const ops::NormParams rms{static_cast<float>(cfg_.rms_norm_eps)};
  Step step = make_step(in);

  // x = eh_proj([enorm(embed(next token)) | hnorm(hidden)]).
  Tensor e = Tensor::empty({T, Hd}, DType::F32, device_), hs = Tensor::empty({T, Hd}, DType::F32, device_);
  ops::embed_rows(w_.embed, md.token_ids, e);
  ops::embed_rows(in.hidden_src, in.hidden_rows, hs);
  Tensor cat = Tensor::empty({T, 2 * Hd}, DType::BF16, device_);
  Tensor en = Tensor::empty({T, Hd}, DType::BF16, device_), hn = Tensor::empty({T, Hd}, DType::BF16, device_);
  ops::rms_norm(e, M.enorm, en, rms);
  ops::rms_norm(hs, M.hnorm, hn, rms);
  ops::copy_cast(cat.slice(1, 0, Hd), en);
  ops::copy_cast(cat.slice(1, Hd, 2 * Hd), hn);
  Tensor x = Tensor::empty({T, Hd}, DType::F32, device_);
  ops::copy_cast(x, M.eh_proj.apply(cat));
  trace_tensor("glm5.mtp.x0", x);

  Tensor h = Tensor::empty({T, Hd}, DType::BF16, device_);
  ops::add_into(x, layer_forward(M.layer, cfg_.num_layers, x, h, step, /*sharded=*/shards_ != nullptr, Tensor()));
  if (in.hidden_out.defined()) ops::copy_cast(in.hidden_out, x);
  head_logits(x, in.logit_rows, M.shared_norm, logits);
  trace_tensor("glm5.mtp.logits", logits);
}

}  // namespace dsa::model::glm5
