#include "dsa/attention/backend.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/tactics/tactic_chooser.h"

namespace dsa::attn {

std::string AttentionQuery::platform() const { return capability ? "cuda " + capability->sm() : "cpu"; }

std::string AttentionQuery::describe() const {
  return fmt::format(
      "{{dtype: {}, kv_cache_dtype: {}, head_size: {}, v_head_size: {}, num_heads: {}, page_sizes: [{}], "
      "mla: {}, sparse: {}, sink: {}}}",
      dtype_name(dtype), kv_cache_dtype_name(kv_cache_dtype), head_size, v_head_size, num_heads,
      fmt::join(page_sizes, ", "), mla, sparse, sink);
}

bool PageSizeRule::accepts(int p) const {
  if (p < min || p > max) return false;
  return !power_of_two || (p & (p - 1)) == 0;
}

std::string PageSizeRule::describe() const {
  std::string range = max == INT_MAX ? fmt::format(">= {}", min) : fmt::format("{}..{}", min, max);
  return power_of_two ? "powers of two " + range : "any " + range;
}

size_t KvCacheShape::total_bytes() const {
  if (dims.empty()) return 0;
  return static_cast<size_t>(dims[0]) * page_bytes;
}

std::optional<std::string> AttentionBackend::supports_combination(const AttentionQuery&) const { return std::nullopt; }

std::optional<std::string> AttentionBackend::layout_head_size_mismatch(const AttentionQuery& q) {
  auto d = kv_cache_dtype_head_size(q.kv_cache_dtype);
  if (!d || *d == q.head_size) return std::nullopt;
  const char* hint = q.kv_cache_dtype == KvCacheDtype::Fp8DsMla
                         ? "fp8_ds_mla is the GLM-5.1/V3.2 layout; DeepSeek-V4 layers (d_qk 512) use fp8_model1"
                         : "fp8_model1 is the DeepSeek-V4 layout; GLM-5.1/V3.2 layers (d_qk 576) use fp8_ds_mla";
  return fmt::format("kv_cache_dtype {} stores d_qk {} but head_size is {} ({})", kv_cache_dtype_name(q.kv_cache_dtype),
                     *d, q.head_size, hint);
}

namespace {
template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

std::vector<std::string> AttentionBackend::reasons(const AttentionQuery& q) const {
  std::vector<std::string> r;
  if (runs_on_gpu() && !q.capability) r.push_back("needs a CUDA GPU (selecting for the CPU platform)");
  if (!runs_on_gpu() && q.capability)
    r.push_back(fmt::format("runs only on the CPU platform (selecting for {})", q.platform()));
  if (requires_cuda_build() && !q.build_has_cuda) r.push_back("dsa built without CUDA");
  if (runs_on_gpu() && q.capability && !supports_capability(*q.capability))
    r.push_back(fmt::format("compute capability {} not supported (needs {})", q.capability->str(),
                            capability_requirement()));

  auto dts = supported_dtypes();
  if (!contains(dts, q.dtype)) {
    std::vector<std::string_view> names;
    for (DType d : dts) names.push_back(dtype_name(d));
    r.push_back(fmt::format("dtype {} not supported (supported: {})", dtype_name(q.dtype), fmt::join(names, ", ")));
  }
  if (is_kv_cache_dtype_alias(q.kv_cache_dtype)) {
    r.push_back(fmt::format("kv_cache_dtype {} is an alias: resolve it against the model first",
                            kv_cache_dtype_name(q.kv_cache_dtype)));
  } else {
    auto kvs = supported_kv_cache_dtypes();
    if (!contains(kvs, q.kv_cache_dtype)) {
      std::vector<std::string_view> names;
      for (KvCacheDtype d : kvs) names.push_back(kv_cache_dtype_name(d));
      r.push_back(fmt::format("kv_cache_dtype {} not supported (supported: {})", kv_cache_dtype_name(q.kv_cache_dtype),
                              fmt::join(names, ", ")));
    }
  }
  auto hs = supported_head_sizes();
  if (!contains(hs, q.head_size))
    r.push_back(fmt::format("head_size {} not supported (supported: {})", q.head_size, fmt::join(hs, ", ")));
  auto vhs = supported_v_head_sizes();
  if (!contains(vhs, q.v_head_size))
    r.push_back(fmt::format("v_head_size {} not supported (supported: {})", q.v_head_size, fmt::join(vhs, ", ")));
  if (auto hc = supported_head_counts(); hc && !contains(*hc, q.num_heads))
    r.push_back(fmt::format("num_heads {} not supported (supported: {})", q.num_heads, fmt::join(*hc, ", ")));
  PageSizeRule pr = supported_page_sizes();
  if (q.page_sizes.empty()) r.push_back("no page size given");
  for (int p : q.page_sizes)
    if (!pr.accepts(p)) r.push_back(fmt::format("page_size {} not supported (supported: {})", p, pr.describe()));
  if (q.mla && !is_mla()) r.push_back("MLA not supported");
  if (q.sparse && !is_sparse()) r.push_back("sparse attention not supported");
  if (q.sink && !supports_sink()) r.push_back("attention sink not supported");
  if (auto c = supports_combination(q)) r.push_back(*c);
  return r;
}

KvCacheShape AttentionBackend::kv_cache_shape(int64_t num_pages, int page_size, KvCacheDtype kv, int head_size) const {
  DSA_CHECK(num_pages >= 0, "kv_cache_shape: num_pages {} must be >= 0", num_pages);
  DSA_CHECK(supported_page_sizes().accepts(page_size), "{}: page_size {} not supported (supported: {})", name(),
            page_size, supported_page_sizes().describe());
  DSA_CHECK(!is_kv_cache_dtype_alias(kv), "{}: kv_cache_dtype {} is an alias: resolve it against the model first",
            name(), kv_cache_dtype_name(kv));
  DSA_CHECK(contains(supported_kv_cache_dtypes(), kv), "{}: kv_cache_dtype {} not supported", name(),
            kv_cache_dtype_name(kv));
  DSA_CHECK(head_size > 0, "kv_cache_shape: head_size {} must be > 0", head_size);
  KvCacheShape s;
  switch (kv) {
    case KvCacheDtype::Fp8DsMla:
      // Tokens packed back to back, 656 bytes each.
      s.dims = {num_pages, page_size, kv::ds_mla::kTokenBytes};
      s.page_bytes = kv::ds_mla::page_bytes(page_size);
      break;
    case KvCacheDtype::Fp8Model1:
      // [P x 576 B token data][P x 8 B scales] padded to a multiple of 576 B: not a per-token
      // stride, so the buffer is pages of raw bytes.
      s.page_bytes = kv::model1::page_bytes(page_size);
      s.dims = {num_pages, static_cast<int64_t>(s.page_bytes)};
      break;
    case KvCacheDtype::Bf16:
      s.dtype = DType::BF16;
      s.dims = {num_pages, page_size, head_size};
      s.page_bytes = static_cast<size_t>(page_size) * head_size * 2;
      break;
    default: fail("{}: unexpected kv_cache_dtype {}", name(), kv_cache_dtype_name(kv));
  }
  return s;
}

size_t AttentionBackend::page_bytes(int page_size, KvCacheDtype kv, int head_size) const {
  return kv_cache_shape(1, page_size, kv, head_size).page_bytes;
}

std::unique_ptr<AttentionImpl> AttentionBackend::create_impl(const AttentionImplConfig& config) const {
  auto r = reasons(config.query);
  if (!r.empty())
    fail("attention backend {} cannot serve {} with {}: [{}]", name(), config.query.platform(),
         config.query.describe(), fmt::join(r, ", "));
  DSA_CHECK(config.topk >= 0, "AttentionImplConfig.topk {} must be >= 0", config.topk);
  DSA_CHECK(config.window >= 0, "AttentionImplConfig.window {} must be >= 0", config.window);
  DSA_CHECK(config.softmax_scale > 0.f, "AttentionImplConfig.softmax_scale {} must be > 0", config.softmax_scale);
  return std::make_unique<AttentionImpl>(*this, config);
}

void AttentionImpl::forward(const ops::SparseMlaParams& p, int tactic) const {
  const AttentionQuery& q = config_.query;
  const bool on_gpu = p.q.defined() && p.q.device().is_cuda();
  DSA_CHECK(on_gpu == backend_->runs_on_gpu(), "attention backend {} runs on the {}, but q is on {}",
            backend_->name(), backend_->runs_on_gpu() ? "GPU" : "CPU", p.q.defined() ? p.q.device().str() : "nothing");
  p.validate();
  DSA_CHECK(p.heads() == q.num_heads, "attention backend {} was created for {} heads, q has {}", backend_->name(),
            q.num_heads, p.heads());
  DSA_CHECK(p.d_qk() == q.head_size, "attention backend {} was created for d_qk {}, the cache ({}) has {}",
            backend_->name(), q.head_size, formats::kv_format_name(p.main.cache.kind), p.d_qk());
  DSA_CHECK(!p.sink.defined() || q.sink, "attention backend {} was created without a sink, but one was given",
            backend_->name());
  if (on_gpu) {
    if (auto why = ops::sparse_mla_cuda_unsupported_reason(p, p.q.device().index))
      fail("attention backend {}: {}", backend_->name(), *why);
    // Default requested: the tuned tactic for these dims when start-up installed a tuning
    // table (ops/tactics/tactic_chooser.h), else still the op's heuristic.
    if (tactic < 0) tactic = ops::choose_sparse_mla_tactic(p);
  }
  ops::sparse_mla_decode(p, tactic);
}

}  // namespace dsa::attn
