#include "dsa/model/deepseek_v4/model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "dsa/attention/plan.h"
#include "dsa/attention/registry.h"
#include "dsa/core/device.h"
#include "dsa/core/trace.h"
#include "dsa/model/deepseek_v4/attention.h"
#include "dsa/model/deepseek_v4/moe_block.h"
#include "dsa/model/deepseek_v4/request_state.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/deepseek_v4/tensor_util.h"
#include "dsa/ops/mhc/mhc.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

namespace {

// The sparse-MLA kernels run 16, 32, 64 or 128 heads; smaller models are padded with zero queries.
int64_t padded_heads(int64_t H) {
  for (int64_t h : {16, 32, 64, 128})
    if (H <= h) return h;
  fail("deepseek_v4: {} attention heads; the sparse attention kernels support at most 128", H);
}

// The attention plan (backend and cache geometry per layer type) for the padded head count the
// kernels run with, on `device`'s platform.
std::vector<attn::LayerPlan> plan_for(const ModelConfig& c, Device device, int block_size) {
  attn::register_builtin_attention_backends();
  std::vector<attn::AttentionLayerSpec> layers = c.attention_layers();
  for (auto& l : layers) l.num_heads = static_cast<int>(padded_heads(l.num_heads));
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

}  // namespace

DeepseekV4Model::DeepseekV4Model(ModelConfig config, ModelWeights weights, Device device, const V4Options& opt)
    : config_(std::move(config)), w_(std::move(weights)), device_(device) {
  DSA_CHECK(w_.embed.device() == device, "deepseek_v4: the weights are on {}, the model on {}", w_.embed.device().str(),
            device.str());
  const std::vector<attn::LayerPlan> plans = plan_for(config_, device, opt.block_size);
  engine::KvManagerOptions ko;
  ko.device = device;
  ko.num_blocks = opt.num_blocks;
  ko.max_requests = opt.max_requests;
  ko.max_step_tokens = opt.max_step_tokens;
  ko.max_position = config_.max_position_embeddings;
  const ModelConfig* cfg = &config_;
  ko.make_state = [cfg, device] { return make_request_state(*cfg, device); };
  kv_ = std::make_unique<engine::KvManager>(engine::KvManager::for_model(config_, plans, ko));

  // One attention implementation per layer type, from the backend the plan selected (the KV
  // manager above already refused a layer type no backend serves).
  const int64_t H = config_.num_heads, Hp = padded_heads(H);
  attn_.heads_padded = Hp;
  for (const attn::LayerPlan& lp : plans) {
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
  for (int l = 0; l < config_.num_layers; ++l) {
    const attn::LayerKind kind = kind_of_ratio(w_.layers[l].ratio);
    const attn::AttentionImpl* impl = nullptr;
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i].spec.kind == kind) impl = impls_[i].get();
    DSA_CHECK(impl != nullptr, "deepseek_v4: the attention plan has no {} layer type (layer {})",
              attn::layer_kind_name(kind), l);
    attn_.impl.push_back(impl);
    const Tensor& sink = w_.layers[l].sink;
    DSA_CHECK(sink.dtype() == DType::F32 && sink.numel() == H, "deepseek_v4: layer {} attn_sink must be f32 [{}], got {}",
              l, H, sink.str());
    Tensor sp = Tensor::zeros({Hp}, DType::F32, device);
    sp.slice(0, 0, H).copy_from(sink.reshape({H}));
    attn_.sink.push_back(sp);
  }
}

int DeepseekV4Model::add_request() {
  const int id = next_id_++;
  kv_->add_request(id);
  return id;
}

void DeepseekV4Model::free_request(int id) { kv_->release(id); }

Tensor DeepseekV4Model::forward(const ForwardBatch& batch, bool all_logits) {
  const ModelConfig& c = config_;
  const int64_t T = static_cast<int64_t>(batch.token_ids.size());
  DSA_CHECK(T > 0 && batch.request.size() == static_cast<size_t>(T) && batch.positions.size() == static_cast<size_t>(T),
            "deepseek_v4: batch needs token_ids, request and positions of one length (got {}, {}, {})", T,
            batch.request.size(), batch.positions.size());
  engine::Batch b;
  for (int64_t t = 0; t < T; ++t) {
    DSA_CHECK(batch.token_ids[t] >= 0 && batch.token_ids[t] < c.vocab_size,
              "deepseek_v4: token {} has id {} outside the vocabulary [0, {})", t, batch.token_ids[t], c.vocab_size);
    b.request.push_back(batch.request[t]);
    b.position.push_back(batch.positions[t]);
    b.token.push_back(batch.token_ids[t]);
  }
  const engine::BatchMetadata meta = kv_->prepare(b);

  Step s;
  s.config = &c;
  s.kv = kv_.get();
  s.meta = &meta;
  for (int r = 0; r < meta.num_requests(); ++r) {
    auto* st = dynamic_cast<V4RequestState*>(meta.states[r]);
    DSA_CHECK(st != nullptr, "deepseek_v4: request {} has no model state", meta.request_ids[r]);
    s.states.push_back(st);
  }
  s.attn = &attn_;
  s.device = device_;
  // Per-request token ranges on the host (on CUDA: two small downloads per step, not per layer).
  s.query_start = to_host_i64(meta.query_start);
  s.seq_lens = to_host_i64(meta.seq_lens);
  DSA_CHECK(s.tokens() == T, "deepseek_v4: the KV manager's metadata covers {} tokens, the batch {}", s.tokens(), T);

  // Embedding into all hc streams (f32 residual); ids were checked against the vocabulary above.
  const int64_t hc = c.hc_mult, d = c.hidden_size;
  Tensor X = Tensor::empty({T, hc, d}, DType::F32, device_);
  ops::embed_rows(w_.embed, meta.token_ids, X);
  trace_tensor("v4.embed", X);

  ops::MhcParams mp;
  mp.hc_mult = static_cast<int>(hc);
  mp.sinkhorn_iters = c.hc_sinkhorn_iters;
  mp.hc_eps = static_cast<float>(c.hc_eps);
  mp.norm_eps = static_cast<float>(c.rms_norm_eps);
  const ops::NormParams np{static_cast<float>(c.rms_norm_eps)};
  MhcScratch m(T, hc, d, device_);
  Tensor yn = Tensor::empty({T, d}, DType::F32, device_);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    ops::mhc_pre(X, L.hc_attn.fn, L.hc_attn.base, L.hc_attn.scale, mp, m.mix, m.y, m.post, m.comb);
    ops::rms_norm(m.y, L.attn_norm, yn, np);
    Tensor a = attention_forward(L, l, s, yn);
    ops::mhc_post(a, X, m.post, m.comb, X);

    ops::mhc_pre(X, L.hc_ffn.fn, L.hc_ffn.base, L.hc_ffn.scale, mp, m.mix, m.y, m.post, m.comb);
    ops::rms_norm(m.y, L.ffn_norm, yn, np);
    Tensor f = moe_forward(L, c, yn, meta.token_ids, moe_ws_);
    ops::mhc_post(f, X, m.post, m.comb, X);
    if (trace_enabled()) {
      trace_tensor(fmt::format("v4.layer{}.attn", l), a);
      trace_tensor(fmt::format("v4.layer{}.moe", l), f);
      trace_tensor(fmt::format("v4.layer{}.x", l), X);
    }
  }

  // Rows whose logits are returned: all, or the last token of each request (first-appearance order).
  std::vector<int64_t> rows;
  if (all_logits) {
    for (int64_t t = 0; t < T; ++t) rows.push_back(t);
  } else {
    for (int r = 0; r < s.requests(); ++r) rows.push_back(s.query_start[r + 1] - 1);
  }
  const auto R = static_cast<int64_t>(rows.size());
  Tensor Xr = X;
  if (!all_logits) {
    Xr = Tensor::empty({R, hc, d}, DType::F32, device_);
    for (int64_t i = 0; i < R; ++i) Xr.select(0, i).copy_from(X.select(0, rows[i]));  // one row per request
  }
  Tensor hmix = Tensor::empty({R, hc}, DType::F32, device_), y = Tensor::empty({R, d}, DType::F32, device_);
  ops::mhc_head(Xr, w_.hc_head_fn, w_.hc_head_base, w_.hc_head_scale, mp, hmix, y);
  ops::rms_norm(y, w_.norm, y, np);
  Tensor logits = Tensor::empty({R, c.vocab_size}, DType::F32, device_);
  ops::linear_bf16(ops::cast(y, DType::BF16), w_.head, logits);
  trace_tensor("v4.logits", logits);
  return logits.to(Device::cpu());
}

std::unique_ptr<DeepseekV4Model> load_deepseek_v4_model(const std::string& dir, Device device, const V4Options& opt) {
  if (device.is_cuda())
    DSA_CHECK(device.index >= 0 && device.index < static_cast<int>(cuda_devices().size()),
              "deepseek_v4: no CUDA device {} ({})", device.index, cuda_unavailable_reason());
  ModelConfig config = load_model_config(dir);
  DSA_CHECK(config.arch == Arch::DeepseekV4, "deepseek_v4: {} holds a {} model", dir, arch_name(config.arch));
  LoadOptions lo;
  lo.device = device;
  lo.progress = opt.progress;
  ModelWeights w = build_model_weights(load_deepseek_v4(dir, lo), config);
  return std::make_unique<DeepseekV4Model>(std::move(config), std::move(w), device, opt);
}

}  // namespace dsa::model::v4
