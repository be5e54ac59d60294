#include "dsa/model/deepseek_v4/model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "dsa/attention/plan.h"
#include "dsa/attention/registry.h"
#include "dsa/core/device.h"
#include "dsa/core/trace.h"
#include "dsa/model/common/head_padding.h"
#include "dsa/model/common/vocab_parallel.h"
#include "dsa/model/deepseek_v4/attention.h"
#include "dsa/model/deepseek_v4/moe_block.h"
#include "dsa/model/deepseek_v4/sharding.h"
#include "dsa/model/cache_specs.h"
#include "dsa/model/deepseek_v4/compressor_state.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/dummy_weights.h"
#include "dsa/ops/mhc/mhc.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

namespace {

// The attention plan (backend and cache geometry per layer type) for the padded head count the
// kernels run with (of `heads`: all, or a tensor-parallel rank's), on `device`'s platform.
std::vector<attn::LayerPlan> plan_for(const ModelConfig& c, Device device, int block_size, int64_t heads) {
  attn::register_builtin_attention_backends();
  std::vector<attn::AttentionLayerSpec> layers = c.attention_layers();
  for (auto& l : layers) l.num_heads = static_cast<int>(padded_heads(heads, "deepseek_v4"));
  attn::PlanOptions opt;
  if (device.is_cuda()) {
    opt.capability = effective_capability(device.index);
    DSA_CHECK(opt.capability.has_value(), "deepseek_v4: no CUDA device {} ({})", device.index,
              cuda_unavailable_reason());
    opt.build_cuda_archs = build_cuda_arch_list();
  }
  opt.block_size = block_size;
  opt.select.log = false;
  return attn::plan_attention(layers, opt);
}

attn::LayerKind kind_of_ratio(int ratio) {
  switch (ratio) {
    case 0: return attn::LayerKind::Sliding;
    case 4: return attn::LayerKind::Csa;
    case 128: return attn::LayerKind::Hca;
    default: fail("deepseek_v4: compress ratio {} (expected 0, 4 or 128)", ratio);
  }
}

// Sub-layer wrapper of mHC: y = norm(mhc_pre(X)); X <- mhc_post(F(y), X).
struct MhcScratch {
  Tensor mix, y, post, comb;
  MhcScratch(int64_t T, int64_t hc, int64_t d, Device dev)
      : mix(Tensor::empty({T, (2 + hc) * hc}, DType::F32, dev)),
        y(Tensor::empty({T, d}, DType::F32, dev)),
        post(Tensor::empty({T, hc}, DType::F32, dev)),
        comb(Tensor::empty({T, hc, hc}, DType::F32, dev)) {}
};

void add_bytes(size_t& b, const Tensor& t) { b += t.defined() ? t.nbytes() : 0; }

// Bytes of one layer's weights as the forward reads them (each held once on the device).
size_t layer_bytes(const LayerWeights& L) {
  size_t b = 0;
  for (const Tensor* t : {&L.attn_norm, &L.ffn_norm, &L.q_norm, &L.kv_norm, &L.sink, &L.wo_a}) add_bytes(b, *t);
  for (const MhcWeights* m : {&L.hc_attn, &L.hc_ffn})
    for (const Tensor* t : {&m->fn, &m->base, &m->scale}) add_bytes(b, *t);
  // The fused projections' parts are views: their bytes add up to the fused weight's.
  for (const Linear* l : {&L.wq_a, &L.wq_b, &L.wkv, &L.wo_b, &L.idx_wq_b, &L.idx_weights_proj}) b += l->nbytes();
  for (const CompressorWeights* c : {&L.compressor, &L.idx_compressor}) {
    for (const Tensor* t : {&c->ape, &c->norm}) add_bytes(b, *t);
    for (const Linear* l : {&c->wkv, &c->wgate}) b += l->nbytes();
  }
  for (const Tensor* t : {&L.moe.gate, &L.moe.gate_bias, &L.moe.tid2eid}) add_bytes(b, *t);
  for (const ops::ExpertWeights* e : {&L.moe.w13, &L.moe.w2, &L.moe.shared_w13, &L.moe.shared_w2}) {
    add_bytes(b, e->weight);
    add_bytes(b, e->scale);
  }
  return b;
}

size_t device_weight_bytes(const ModelWeights& w) {
  size_t b = 0;
  for (const Tensor* t : {&w.embed, &w.head, &w.norm, &w.hc_head_fn, &w.hc_head_base, &w.hc_head_scale}) add_bytes(b, *t);
  for (const LayerWeights& L : w.layers) b += layer_bytes(L);
  for (const MtpWeights& M : w.mtp) {
    b += layer_bytes(M.block);
    for (const Tensor* t : {&M.e_proj.weight, &M.e_proj.scale, &M.h_proj.weight, &M.h_proj.scale, &M.enorm, &M.hnorm,
                            &M.norm, &M.hc_head_fn, &M.hc_head_base, &M.hc_head_scale})
      add_bytes(b, *t);
  }
  return b;
}

// mHC pre -> attn_norm of a block's first sub-layer (the rest of the forward's pres are fused
// into the posts before them).
void attention_pre(const LayerWeights& L, const ops::MhcParams& mp, const ops::NormParams& np, const Tensor& X,
                   MhcScratch& m, const Tensor& yn) {
  ops::mhc_pre_norm(X, L.hc_attn.fn, L.hc_attn.base, L.hc_attn.scale, mp, L.attn_norm, np, m.mix, m.y, yn, m.post,
                    m.comb);
}

// One block, its attention pre done (attention_pre, or the previous block): attention -> mHC
// post + (mHC pre -> ffn_norm) -> MoE -> mHC post, fused with `next`'s attention pre + attn_norm
// when there is a next block (one launch fewer per sub-layer boundary: ops::mhc_post_pre_norm).
// shards (tensor parallelism): the layer is the rank's shard, whose attention and MoE outputs are
// partial sums (wo_b and w2 row-parallel): all-reduced before mHC post reads them, so every rank
// updates identical residual streams.
void block_forward(const LayerWeights& L, int l, const Step& s, const ops::MhcParams& mp, const ops::NormParams& np,
                   const Tensor& X, MhcScratch& m, const Tensor& yn, const Tensor& token_ids, ops::MoeWorkspace& ws,
                   ShardGroup* shards, const LayerWeights* next) {
  const ModelConfig& c = *s.config;
  Tensor a = attention_forward(L, l, s, yn);
  if (shards) shards->all_reduce_sum(a);
  ops::mhc_post_pre_norm(a, X, m.post, m.comb, L.hc_ffn.fn, L.hc_ffn.base, L.hc_ffn.scale, mp, L.ffn_norm, np, m.mix,
                         m.y, yn, m.post, m.comb);
  Tensor f = moe_forward(L, c, yn, token_ids, ws);
  if (shards) shards->all_reduce_sum(f);
  if (next != nullptr)
    ops::mhc_post_pre_norm(f, X, m.post, m.comb, next->hc_attn.fn, next->hc_attn.base, next->hc_attn.scale, mp,
                           next->attn_norm, np, m.mix, m.y, yn, m.post, m.comb);
  else
    ops::mhc_post(f, X, m.post, m.comb, X);
  if (trace_enabled()) {
    trace_tensor(fmt::format("v4.layer{}.attn", l), a);
    trace_tensor(fmt::format("v4.layer{}.moe", l), f);
    trace_tensor(fmt::format("v4.layer{}.x", l), X);
  }
}

// The logits of the rows `logit_rows` of the streams X [T][hc][d]: hyper-head (fn, base, scale),
// norm, then the LM head (whole, or the rank's vocabulary share and an all-gather over shards).
void head_logits(const Tensor& X, const Tensor& logit_rows, const Tensor& fn, const Tensor& base, const Tensor& scale,
                 const Tensor& norm, const Tensor& head, const ops::MhcParams& mp, const ops::NormParams& np,
                 ShardGroup* shards, const Tensor& logits) {
  const int64_t T = X.size(0), hc = X.size(1), d = X.size(2), R = logit_rows.size(0);
  const Device dev = X.device();
  Tensor Xr = Tensor::empty({R, hc, d}, DType::F32, dev);
  ops::embed_rows(X.reshape({T, hc * d}), logit_rows, Xr.reshape({R, hc * d}));
  Tensor hmix = Tensor::empty({R, hc}, DType::F32, dev), y = Tensor::empty({R, d}, DType::F32, dev);
  ops::mhc_head_norm(Xr, fn, base, scale, mp, norm, np, hmix, Tensor(), y);
  lm_head_logits(ops::cast(y, DType::BF16), head, shards, logits);
}

ops::MhcParams mhc_params(const ModelConfig& c) {
  ops::MhcParams mp;
  mp.hc_mult = c.hc_mult;
  mp.sinkhorn_iters = c.hc_sinkhorn_iters;
  mp.hc_eps = static_cast<float>(c.hc_eps);
  mp.norm_eps = static_cast<float>(c.rms_norm_eps);
  return mp;
}

}  // namespace

DeepseekV4Model::DeepseekV4Model(ModelConfig config, ModelWeights weights, Device device, const V4Options& opt)
    : config_(std::move(config)), w_(std::move(weights)), device_(device), block_size_(opt.block_size) {
  DSA_CHECK(w_.embed.device() == device, "deepseek_v4: the weights are on {}, the model on {}", w_.embed.device().str(),
            device.str());
  const int tp = opt.shards ? opt.shards->size() : 1;
  check_tensor_parallel(config_, tp);
  if (tp > 1) shards_ = opt.shards;
  weight_bytes_ = device_weight_bytes(w_);
  const int64_t H = config_.num_heads / tp, Hp = padded_heads(H, "deepseek_v4");
  plans_ = plan_for(config_, device, block_size_, H);

  // One attention implementation per layer type, from the backend the plan selected.
  attn_.heads = H;
  attn_.heads_padded = Hp;
  for (const attn::LayerPlan& lp : plans_) {
    DSA_CHECK(lp.selection.backend != nullptr, "deepseek_v4: no attention backend for {} layers: {}",
              attn::layer_kind_name(lp.spec.kind), lp.selection.error);
    attn::AttentionImplConfig ic;
    ic.query = lp.query;
    ic.kind = lp.spec.kind;
    ic.topk = lp.spec.topk;
    ic.window = lp.spec.window;
    ic.softmax_scale = config_.softmax_scale();
    impls_.push_back(lp.selection.backend->create_impl(ic));
  }
  DSA_CHECK(w_.mtp.empty() || static_cast<int>(w_.mtp.size()) == config_.num_mtp_layers,
            "deepseek_v4: {} MTP layers loaded, the config has {}", w_.mtp.size(), config_.num_mtp_layers);
  // Main layers, then the loaded MTP layers (layer index num_layers + k, as their caches are declared).
  for (int l = 0; l < config_.num_layers + static_cast<int>(w_.mtp.size()); ++l) {
    const LayerWeights& LW = l < config_.num_layers ? w_.layers[l] : w_.mtp[l - config_.num_layers].block;
    const attn::LayerKind kind = kind_of_ratio(LW.ratio);
    const attn::AttentionImpl* impl = nullptr;
    for (size_t i = 0; i < plans_.size(); ++i)
      if (plans_[i].spec.kind == kind) impl = impls_[i].get();
    DSA_CHECK(impl != nullptr, "deepseek_v4: the attention plan has no {} layer type (layer {})",
              attn::layer_kind_name(kind), l);
    attn_.impl.push_back(impl);
    const Tensor& sink = LW.sink;
    DSA_CHECK(sink.dtype() == DType::F32 && sink.numel() == H, "deepseek_v4: layer {} attn_sink must be f32 [{}], got {}",
              l, H, sink.str());
    Tensor sp = Tensor::zeros({Hp}, DType::F32, device);
    sp.slice(0, 0, H).copy_from(sink.reshape({H}));
    attn_.sink.push_back(sp);
  }
}

std::vector<size_t> DeepseekV4Model::layer_weight_bytes() const {
  std::vector<size_t> v;
  for (const LayerWeights& L : w_.layers) v.push_back(layer_bytes(L));
  return v;
}

kv::KvRequirements DeepseekV4Model::kv_requirements() const {
  kv::KvRequirements r;
  r.groups = kv_cache_groups(config_, plans_);
  r.states = compressor_state_specs(config_);
  r.block_size = block_size_;
  return r;
}

void DeepseekV4Model::reserve(int64_t max_tokens, int max_requests) {
  // Step temporaries come from the engine's step arena; the MoE workspace persists across steps
  // and is sized by moe_layer on first use (outside the arena).
  (void)max_tokens;
  (void)max_requests;
}

void DeepseekV4Model::forward(const StepInputs& in, const Tensor& logits) {
  const ModelConfig& c = config_;
  const kv::BatchMetadata& meta = *in.meta;
  const int64_t T = meta.num_tokens();
  DSA_CHECK(T > 0 && meta.token_ids.defined(), "deepseek_v4: a step needs token ids (got {} tokens)", T);
  DSA_CHECK(in.logit_rows.defined() && in.logit_rows.dim() == 1, "deepseek_v4: logit_rows must be i32 [N]");
  const int64_t R = in.logit_rows.size(0);
  logits.check("deepseek_v4: logits", DType::F32, {R, c.vocab_size});

  Step s;
  s.config = &c;
  s.in = &in;
  s.attn = &attn_;
  s.device = device_;

  // Embedding into all hc streams (f32 residual); the engine checked the ids against the vocabulary.
  const int64_t hc = c.hc_mult, d = c.hidden_size;
  Tensor X = Tensor::empty({T, hc, d}, DType::F32, device_);
  ops::embed_rows(w_.embed, meta.token_ids, X);
  trace_tensor("v4.embed", X);

  const ops::MhcParams mp = mhc_params(c);
  const ops::NormParams np{static_cast<float>(c.rms_norm_eps)};
  MhcScratch m(T, hc, d, device_);
  // The normalised sub-layer input is bf16, what the attention and MoE projections read (the
  // norm computes in f32 and rounds once, as a separate cast would).
  Tensor yn = Tensor::empty({T, d}, DType::BF16, device_);
  // Layer l's span holds the attention pre of layer l + 1 (fused into its last post), not its own
  // (but layer 0's).
  if (c.num_layers > 0) {
    in.mark(0);
    attention_pre(w_.layers[0], mp, np, X, m, yn);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    if (l > 0) in.mark(l);
    const LayerWeights* next = l + 1 < c.num_layers ? &w_.layers[static_cast<size_t>(l) + 1] : nullptr;
    block_forward(w_.layers[l], l, s, mp, np, X, m, yn, meta.token_ids, moe_ws_, shards_, next);
  }

  in.mark(c.num_layers);
  if (in.hidden_out.defined()) ops::copy_cast(in.hidden_out.reshape({T, hc * d}), X.reshape({T, hc * d}));

  // The rows whose logits the step returns (gathered on the device).
  head_logits(X, in.logit_rows, w_.hc_head_fn, w_.hc_head_base, w_.hc_head_scale, w_.norm, w_.head, mp, np, shards_,
              logits);
  trace_tensor("v4.logits", logits);
}

void DeepseekV4Model::draft(const StepInputs& in, const Tensor& logits) {
  const ModelConfig& c = config_;
  if (w_.mtp.empty()) CausalLM::draft(in, logits);  // throws: no MTP layer
  const MtpWeights& M = w_.mtp[0];
  const int layer = c.num_layers;  // the MTP layer's caches
  const kv::BatchMetadata& meta = *in.meta;
  const int64_t T = meta.num_tokens(), hc = c.hc_mult, d = c.hidden_size;
  DSA_CHECK(T > 0 && meta.token_ids.defined(), "deepseek_v4 draft: a step needs token ids (got {} tokens)", T);
  DSA_CHECK(in.hidden_src.defined() && in.hidden_src.dim() == 2 && in.hidden_src.size(1) == hc * d &&
                in.hidden_rows.defined() && in.hidden_rows.numel() == T,
            "deepseek_v4 draft: hidden_src must be f32 [S][{}] and hidden_rows i32 [{}]", hc * d, T);
  const int64_t R = in.logit_rows.size(0);
  logits.check("deepseek_v4 draft: logits", DType::F32, {R, c.vocab_size});
  Step s;
  s.config = &c;
  s.in = &in;
  s.attn = &attn_;
  s.device = device_;
  const ops::MhcParams mp = mhc_params(c);
  const ops::NormParams np{static_cast<float>(c.rms_norm_eps)};

  // x = e_proj(enorm(embed(next token))) on every stream + h_proj(hnorm(stream)).
  Tensor h = Tensor::empty({T * hc, d}, DType::F32, device_);
  ops::embed_rows(in.hidden_src, in.hidden_rows, h.reshape({T, hc * d}));
  Tensor e = Tensor::empty({T, d}, DType::F32, device_);
  ops::embed_rows(w_.embed, meta.token_ids, e);
  Tensor en = Tensor::empty({T, d}, DType::BF16, device_), hn = Tensor::empty({T * hc, d}, DType::BF16, device_);
  ops::rms_norm(e, M.enorm, en, np);
  ops::rms_norm(h, M.hnorm, hn, np);
  Tensor ep = Tensor::empty({T, d}, DType::BF16, device_);
  M.e_proj.apply(en, ep);
  Tensor hp = Tensor::empty({T * hc, d}, DType::F32, device_);
  M.h_proj.apply(hn, hp);
  Tensor X = Tensor::empty({T, hc, d}, DType::F32, device_);
  for (int64_t k = 0; k < hc; ++k) ops::copy_cast(X.select(1, k), ep);
  ops::add_into(X, hp.reshape({T, hc, d}));
  trace_tensor("v4.mtp.x0", X);

  MhcScratch m(T, hc, d, device_);
  Tensor yn = Tensor::empty({T, d}, DType::BF16, device_);
  attention_pre(M.block, mp, np, X, m, yn);
  block_forward(M.block, layer, s, mp, np, X, m, yn, meta.token_ids, moe_ws_, shards_, nullptr);  // sharded as others
  if (in.hidden_out.defined()) ops::copy_cast(in.hidden_out.reshape({T, hc * d}), X.reshape({T, hc * d}));
  head_logits(X, in.logit_rows, M.hc_head_fn, M.hc_head_base, M.hc_head_scale, M.norm, w_.head, mp, np, shards_,
              logits);
  trace_tensor("v4.mtp.logits", logits);
}

std::unique_ptr<DeepseekV4Model> load_deepseek_v4_model(const std::string& dir, Device device, const V4Options& opt) {
  if (device.is_cuda())
    DSA_CHECK(device.index >= 0 && device.index < static_cast<int>(cuda_devices().size()),
              "deepseek_v4: no CUDA device {} ({})", device.index, cuda_unavailable_reason());
  ModelConfig config = model_config_for_load(dir, opt.weights.format, opt.weights.layers);
  DSA_CHECK(config.arch == Arch::DeepseekV4, "deepseek_v4: {} holds a {} model", dir, arch_name(config.arch));
  const TpShard tp = opt.shards ? tp_shard(config, opt.shards->rank(), opt.shards->size(), opt.expert_parallel) : TpShard{};
  if (opt.weights.dummy()) {
    // Filled where the model keeps them (device-direct on CUDA, experts pre-stacked): the
    // build below copies nothing but the small widened scales. A tensor-parallel rank fills the
    // whole model on the host and cuts its shard from it as from a checkpoint (the host holds one
    // whole model per rank while loading; no per-rank fill yet).
    const Device fill = tp.split() ? Device::cpu() : device;
    ModelWeights w = build_model_weights(dummy_model_weights(config, fill, opt.weights.seed, opt.load_mtp), config,
                                         device, opt.load_mtp, tp);
    if (tp.split()) w.loaded = LoadedWeights{};  // the host fill: only the shard is kept
    return std::make_unique<DeepseekV4Model>(std::move(config), std::move(w), device, opt);
  }
  LoadOptions lo;
  lo.device = Device::cpu();  // memory-mapped; build_model_weights copies each tensor to `device` once
  lo.progress = false;
  ModelWeights w = build_model_weights(load_deepseek_v4(dir, lo), config, device, opt.load_mtp, tp);
  return std::make_unique<DeepseekV4Model>(std::move(config), std::move(w), device, opt);
}

}  // namespace dsa::model::v4
